// Host checks of raster_tile (kernels/tile_raster.hpp), the CTA -> output tile order of the
// Hopper GEMM kernels: over grids of 1 .. 40 x 1 .. 40 tiles and group sizes 1 .. 12,
//   - every tile is computed by exactly one CTA (a bijection of [0, tiles_m * tiles_n));
//   - within a group the tiles go column by column, rows first (consecutive CTAs share a column
//     of B, the weights, while they walk the group's rows);
//   - group_rows >= tiles_m is the column-major order of the whole grid, and group_rows 1 the
//     row-major one.
#include <cstdio>
#include <vector>

#include "host_check.hpp"
#include "kernels/tile_raster.hpp"

using namespace cute_gemm;

int main() {
  for (int tiles_m = 1; tiles_m <= 40; ++tiles_m) {
    for (int tiles_n = 1; tiles_n <= 40; ++tiles_n) {
      for (int group = 1; group <= 12; ++group) {
        const int tiles = tiles_m * tiles_n;
        std::vector<long> offsets;
        for (int i = 0; i < tiles; ++i) {
          const TileCoord t = raster_tile(i, tiles_m, tiles_n, group);
          CHECK(t.m >= 0 && t.m < tiles_m && t.n >= 0 && t.n < tiles_n,
                "%dx%d group %d: CTA %d -> (%d, %d) outside", tiles_m, tiles_n, group, i, t.m,
                t.n);
          offsets.push_back(long(t.m) * tiles_n + t.n);
          if (i > 0) {
            const TileCoord p = raster_tile(i - 1, tiles_m, tiles_n, group);
            const bool same_group = p.m / group == t.m / group;
            if (same_group) {
              const bool next_row = t.n == p.n && t.m == p.m + 1;
              const bool next_col = t.n == p.n + 1 && t.m % group == 0;
              CHECK(next_row || next_col, "%dx%d group %d: CTA %d (%d, %d) after (%d, %d)",
                    tiles_m, tiles_n, group, i, t.m, t.n, p.m, p.n);
            }
          }
          if (group >= tiles_m) {
            CHECK(t.m == i % tiles_m && t.n == i / tiles_m, "%dx%d: not column-major at %d",
                  tiles_m, tiles_n, i);
          }
          if (group == 1) {
            CHECK(t.m == i / tiles_n && t.n == i % tiles_n, "%dx%d: not row-major at %d",
                  tiles_m, tiles_n, i);
          }
        }
        CHECK(bijective(offsets, tiles), "%dx%d group %d: not a bijection", tiles_m, tiles_n,
              group);
      }
    }
  }
  std::printf("%d failures\n", failures);
  return failures == 0 ? 0 : 1;
}
