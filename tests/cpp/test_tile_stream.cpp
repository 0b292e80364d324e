// Host checks of a tile stream's work (kernels/mixed/tile_stream.hpp), for grids the planner's rule
// allows (ctas <= tiles, at most `warps` tiles and at least `warps` k blocks per CTA): the CTAs'
// tiles partition the tiles; each CTA's runs partition its k blocks, none empty, each within two
// tiles with first_blocks of them in the first; and the tile sums the kernel forms (the run that
// holds a tile's last block adds the slots of first_run .. itself) take every (run, tile) part of
// every tile exactly once, in run order, and nothing of another tile.
#include <cstdio>
#include <vector>

#include "host_check.hpp"
#include "kernels/mixed/tile_stream.hpp"

using namespace cute_gemm::mixed;

namespace {

void check_grid(unsigned tiles, unsigned ctas, unsigned k_blocks, unsigned warps) {
  const TileStream ts{tiles, ctas, k_blocks, warps};
  std::vector<int> tile_owner(tiles, -1);
  for (unsigned c = 0; c < ctas; ++c) {
    const unsigned t0 = ts.tile_begin(c), t1 = ts.tile_begin(c + 1);
    CHECK(t1 > t0 && t1 - t0 <= warps, "tiles %u ctas %u: CTA %u has %u tiles", tiles, ctas, c,
          t1 - t0);
    for (unsigned t = t0; t < t1 && t < tiles; ++t) {
      CHECK(tile_owner[t] == -1, "tile %u taken twice", t);
      tile_owner[t] = int(c);
    }
    const unsigned n = ts.cta_blocks(c);
    CHECK(n == (t1 - t0) * k_blocks, "cta_blocks");
    const int cta_tiles = int(t1 - t0);
    // block_run[t][kb]: the run that computes block kb of the CTA's tile t; slot_of[w][t].
    std::vector<std::vector<int>> block_run(cta_tiles, std::vector<int>(k_blocks, -1));
    std::vector<std::vector<int>> slot_of(warps, std::vector<int>(cta_tiles, -1));
    int next = 0;
    for (unsigned w = 0; w < warps; ++w) {
      const TileStream::Run run = ts.run(n, int(w));
      CHECK(ts.run_start(n, int(w)) == next && run.blocks >= 1 && run.blocks <= int(k_blocks),
            "tiles %u ctas %u kb %u warps %u: run %u (%d blocks) does not follow on", tiles, ctas,
            k_blocks, warps, w, run.blocks);
      CHECK(run.first_blocks >= 1 && run.first_blocks <= run.blocks &&
                run.kb + run.first_blocks <= int(k_blocks) &&
                (run.first_blocks == run.blocks || run.kb + run.first_blocks == int(k_blocks)),
            "run %u: first_blocks %d", w, run.first_blocks);
      for (int b = 0; b < run.blocks; ++b) {
        const int t = run.tile + (b < run.first_blocks ? 0 : 1);
        const int kb = b < run.first_blocks ? run.kb + b : b - run.first_blocks;
        CHECK(t < cta_tiles && kb < int(k_blocks) && block_run[t][kb] == -1,
              "run %u block %d: tile %d kb %d", w, b, t, kb);
        if (t < cta_tiles && kb < int(k_blocks)) block_run[t][kb] = int(w);
        if (t < cta_tiles) slot_of[w][t] = b < run.first_blocks ? 0 : 1;
      }
      next += run.blocks;
    }
    CHECK(next == int(n), "runs cover %d of %u blocks", next, n);
    // The sums: every tile once, by the run that holds its last block.
    for (int t = 0; t < cta_tiles; ++t) {
      const int last = block_run[t][k_blocks - 1];
      int adders = 0;
      for (unsigned w = 0; w < warps; ++w) {
        const TileStream::Run run = ts.run(n, int(w));
        const int g1 = ts.run_start(n, int(w)) + run.blocks;
        const bool ends = (run.tile == t || (run.first_blocks < run.blocks && run.tile + 1 == t)) &&
                          g1 >= (t + 1) * int(k_blocks);
        adders += ends;
      }
      CHECK(adders == 1, "tile %d added by %d runs", t, adders);
      std::vector<int> taken;
      for (int w = ts.first_run(n, t, last); w <= last; ++w) {
        CHECK(slot_of[w][t] == ts.slot(n, w, t), "run %d tile %d: slot %d, parked in %d", w, t,
              ts.slot(n, w, t), slot_of[w][t]);
        taken.push_back(w);
      }
      std::vector<int> parts;  // the runs that computed blocks of tile t, in order
      for (unsigned kb = 0; kb < k_blocks; ++kb)
        if (parts.empty() || parts.back() != block_run[t][kb]) parts.push_back(block_run[t][kb]);
      CHECK(taken == parts, "tile %d: the sum takes the wrong runs", t);
    }
  }
  for (unsigned t = 0; t < tiles; ++t) CHECK(tile_owner[t] >= 0, "tile %u in no CTA", t);
}

}  // namespace

int main() {
  int grids = 0;
  // Every small grid the planner allows, and the Llama-3-8B gate/up at batch 1 (896 tiles of
  // 32 k blocks on 132 SMs in 16-warp CTAs) with its neighbours.
  for (unsigned tiles = 1; tiles <= 40; ++tiles)
    for (unsigned ctas = 1; ctas <= tiles; ++ctas)
      for (unsigned k_blocks : {1u, 2u, 3u, 5u, 8u, 33u})
        for (unsigned warps : {1u, 2u, 3u, 7u, 16u}) {
          if ((tiles + ctas - 1) / ctas > warps || tiles / ctas * k_blocks < warps) continue;
          check_grid(tiles, ctas, k_blocks, warps);
          ++grids;
        }
  for (unsigned tiles : {896u, 897u, 192u, 128u, 4008u})
    for (unsigned ctas : {132u, 264u})
      if ((tiles + ctas - 1) / ctas <= 16 && ctas <= tiles) {
        check_grid(tiles, ctas, 32, 16);
        check_grid(tiles, ctas, 112, 16);
        grids += 2;
      }
  std::printf("%d grids, %d failures\n", grids, failures);
  return failures == 0 ? 0 : 1;
}
