// Host checks of stream-K's partition (kernels/mixed/stream_k.hpp), for every tile count up to 40,
// k blocks up to 40 and CTAs from the tiles to 2.5 times them (within the pairs):
//   - the CTAs' segments cover every (tile, k block) pair exactly once, each inside one tile;
//   - every CTA runs the same number of k blocks to within one, at most k_blocks, in at most two
//     segments, its contributed segment (not owned) first;
//   - each tile has exactly one owner, the CTA holding its last k block, whose first_cta is the
//     lowest CTA of the tile; the other CTAs of the tile are exactly first_cta .. owner - 1, each
//     contributing one segment of it; a CTA contributes at most one segment (one workspace slot);
//   - kb_of / tile_of walk the segments in run order, and stream_k_cta_of inverts the ranges.
#include <cstdio>
#include <vector>

#include "host_check.hpp"
#include "kernels/mixed/stream_k.hpp"

using namespace cute_gemm::mixed;

int main() {
  int cases = 0;
  for (int tiles = 1; tiles <= 40; ++tiles) {
    for (int k_blocks = 1; k_blocks <= 40; ++k_blocks) {
      const int64_t pairs = int64_t(tiles) * k_blocks;
      for (int ctas = tiles; ctas <= tiles * 5 / 2 && ctas <= pairs; ++ctas) {
        ++cases;
        std::vector<int> hits(pairs, 0), owner(tiles, -1), first(tiles, -1);
        std::vector<std::vector<int>> contributors(tiles);
        int least = 1 << 30, most = 0;
        for (int r = 0; r < ctas; ++r) {
          const StreamKWork w = stream_k_work(r, ctas, tiles, k_blocks);
          CHECK(w.segments >= 1 && w.segments <= 2, "T%d KB%d C%d: CTA %d has %d segments",
                tiles, k_blocks, ctas, r, w.segments);
          least = w.blocks < least ? w.blocks : least;
          most = w.blocks > most ? w.blocks : most;
          int contributed = 0, sum = 0;
          for (int s = 0; s < w.segments; ++s) {
            const StreamKSegment& g = w.seg[s];
            CHECK(g.blocks > 0 && g.kb_begin >= 0 && g.kb_begin + g.blocks <= k_blocks &&
                      g.tile >= 0 && g.tile < tiles,
                  "T%d KB%d C%d: CTA %d segment %d outside its tile", tiles, k_blocks, ctas, r,
                  s);
            CHECK(g.owned == (g.kb_begin + g.blocks == k_blocks),
                  "T%d KB%d C%d: CTA %d segment %d owned %d", tiles, k_blocks, ctas, r, s,
                  int(g.owned));
            if (s == 1) {
              CHECK(!w.seg[0].owned || w.seg[1].owned, "T%d KB%d C%d: CTA %d runs its owned "
                    "segment first", tiles, k_blocks, ctas, r);
            }
            for (int kb = g.kb_begin; kb < g.kb_begin + g.blocks; ++kb) {
              const int64_t pair = int64_t(g.tile) * k_blocks + kb;
              hits[pair]++;
              CHECK(stream_k_cta_of(pair, ctas, pairs) == r, "T%d KB%d C%d: pair %lld not CTA "
                    "%d's", tiles, k_blocks, ctas, (long long)pair, r);
            }
            for (int i = 0; i < g.blocks; ++i) {
              const int b = sum + i;
              CHECK(w.tile_of(b) == g.tile && w.kb_of(b) == g.kb_begin + i,
                    "T%d KB%d C%d: CTA %d block %d", tiles, k_blocks, ctas, r, b);
            }
            sum += g.blocks;
            if (g.owned) {
              CHECK(owner[g.tile] == -1, "T%d KB%d C%d: tile %d owned twice", tiles, k_blocks,
                    ctas, g.tile);
              owner[g.tile] = r;
              first[g.tile] = g.first_cta;
            } else {
              ++contributed;
              contributors[g.tile].push_back(r);
            }
          }
          CHECK(sum == w.blocks, "T%d KB%d C%d: CTA %d blocks %d of %d", tiles, k_blocks, ctas, r,
                sum, w.blocks);
          CHECK(contributed <= 1, "T%d KB%d C%d: CTA %d contributes %d segments", tiles,
                k_blocks, ctas, r, contributed);
        }
        CHECK(most - least <= 1 && most <= k_blocks, "T%d KB%d C%d: blocks per CTA %d .. %d",
              tiles, k_blocks, ctas, least, most);
        for (int64_t g = 0; g < pairs; ++g) {
          CHECK(hits[g] == 1, "T%d KB%d C%d: pair %lld run %d times", tiles, k_blocks, ctas,
                (long long)g, hits[g]);
        }
        for (int t = 0; t < tiles; ++t) {
          CHECK(owner[t] >= 0, "T%d KB%d C%d: tile %d has no owner", tiles, k_blocks, ctas, t);
          const int lowest = stream_k_cta_of(int64_t(t) * k_blocks, ctas, pairs);
          CHECK(first[t] == lowest, "T%d KB%d C%d: tile %d first %d, lowest %d", tiles,
                k_blocks, ctas, t, first[t], lowest);
          const int expected = owner[t] - lowest;
          CHECK(int(contributors[t].size()) == expected, "T%d KB%d C%d: tile %d has %d "
                "contributors, owner %d first %d", tiles, k_blocks, ctas, t,
                int(contributors[t].size()), owner[t], lowest);
          for (size_t i = 0; i < contributors[t].size(); ++i) {
            CHECK(contributors[t][i] == lowest + int(i), "T%d KB%d C%d: tile %d contributor %d",
                  tiles, k_blocks, ctas, t, contributors[t][i]);
          }
        }
      }
    }
  }
  std::printf("%d partitions, %d failures\n", cases, failures);
  return failures == 0 ? 0 : 1;
}
