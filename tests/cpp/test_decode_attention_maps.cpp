// Host checks of the decode attention kernel's maps and split rule
// (kernels/attention/decode_attention_config.hpp), for every head dim the op takes (8..256):
//   - a team is a power of two of lanes that divides the warp (its shuffles stay in the warp) and
//     holds the row: team * kVec >= D, and no narrower power of two of at least kMinTeam would;
//     a tile is kRowsPerThread rows per slice and its scores fit kMaxTile;
//   - thread -> (chunk, slice) is a bijection onto team x slices, and the teams are whole
//     lane groups of one warp;
//   - the reduce buffer gives each (slice, head, element) its own float within kReduceFloats;
//   - the split rule's shares of positions cover [0, L) once, none is empty, there are no more
//     splits than kMinSplitRows pieces of L, a cluster never exceeds kMaxSplits, and no split is
//     made where the grid already fills the SMs.
#include <cstdio>
#include <vector>

#include "host_check.hpp"
#include "kernels/attention/decode_attention_config.hpp"

using namespace cute_gemm::attention;
using Cfg = DecodeAttentionConfig;

int main() {
  for (int dim = 8; dim <= Cfg::kMaxHeadDim; dim += 8) {
    const int team = Cfg::team_lanes(dim), slices = Cfg::slices(dim);
    CHECK(team >= Cfg::kMinTeam && team <= 32 && 32 % team == 0, "D=%d: team of %d lanes", dim,
          team);
    CHECK(Cfg::tile_rows(dim) == Cfg::kRowsPerThread * slices &&
              Cfg::tile_rows(dim) <= Cfg::kMaxTile,
          "D=%d: tile of %d rows", dim, Cfg::tile_rows(dim));
    CHECK(team * Cfg::kVec >= dim && (team == Cfg::kMinTeam || team / 2 * Cfg::kVec < dim),
          "D=%d: team of %d lanes is not the narrowest that holds the row", dim, team);
    CHECK(team * slices == Cfg::kThreads, "D=%d: %d slices of %d lanes", dim, slices, team);
    std::vector<long> cells;
    for (int t = 0; t < Cfg::kThreads; ++t) {
      const int chunk = Cfg::thread_chunk(t, dim), slice = Cfg::thread_slice(t, dim);
      cells.push_back(long(slice) * team + chunk);
      CHECK((t - chunk) / 32 == (t - chunk + team - 1) / 32,
            "D=%d: thread %d's team crosses a warp", dim, t);
    }
    CHECK(bijective(cells, Cfg::kThreads), "D=%d: thread map not a bijection", dim);
    std::vector<long> reduce;
    for (int s = 0; s < slices; ++s)
      for (int g = 0; g < Cfg::kReduceHeads; ++g)
        for (int d = 0; d < team * Cfg::kVec; ++d)
          reduce.push_back(Cfg::reduce_index(s, g, d, dim));
    CHECK(bijective(reduce, Cfg::kReduceFloats), "D=%d: reduce buffer not a bijection", dim);
  }

  CHECK(Cfg::head_chunks(1) == 1 && Cfg::head_chunks(8) == 1 && Cfg::head_chunks(9) == 2 &&
            Cfg::head_chunks(16) == 2 && Cfg::head_chunks(17) == 3,
        "head chunks of a group");

  const int lengths[] = {1, 2, 63, 64, 65, 127, 128, 129, 229, 511, 512, 513, 4096, 100000};
  const long ctas_list[] = {1, 2, 8, 16, 33, 128, 132, 133, 1000};
  for (int length : lengths) {
    for (long ctas : ctas_list) {
      for (int clusters = 0; clusters < 2; ++clusters) {
        const int splits = decode_attention_splits(ctas, length, 132, clusters == 1);
        CHECK(splits >= 1 && splits <= Cfg::kMaxSplits, "L=%d ctas=%ld: %d splits", length,
              ctas, splits);
        CHECK(clusters || splits == 1, "L=%d ctas=%ld: split without clusters", length, ctas);
        CHECK(ctas < 132 || splits == 1, "L=%d ctas=%ld: split of a full grid", length, ctas);
        CHECK(splits <= (length + Cfg::kMinSplitRows - 1) / Cfg::kMinSplitRows,
              "L=%d ctas=%ld: %d splits of %d rows", length, ctas, splits,
              Cfg::split_rows(length, splits));
        if (clusters && length >= Cfg::kMaxSplits * Cfg::kMinSplitRows && ctas <= 16) {
          CHECK(splits == Cfg::kMaxSplits, "L=%d ctas=%ld: only %d splits", length, ctas, splits);
        }
        std::vector<int> hits(length, 0);
        const int per = Cfg::split_rows(length, splits);
        for (int s = 0; s < splits; ++s) {
          const int begin = s * per, end = begin + per < length ? begin + per : length;
          CHECK(end > begin, "L=%d, %d splits: split %d is empty", length, splits, s);
          for (int j = begin; j < end; ++j) hits[j]++;
        }
        bool once = true;
        for (int h : hits) once = once && h == 1;
        CHECK(once, "L=%d, %d splits: positions not covered once", length, splits);
      }
    }
  }
  if (failures) std::printf("%d failures\n", failures);
  return failures != 0;
}
