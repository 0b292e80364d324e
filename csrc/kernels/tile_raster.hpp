#pragma once
// Which output tile a CTA of a GEMM grid computes: the tiles in groups of `group_rows` tile rows
// (M), walked column by column (N) within a group. CTAs are dispatched in linear order, so the
// ones in flight together cover a block of about group_rows x (CTAs in flight / group_rows)
// tiles: each operand tile is fetched from DRAM about once per group and read again from the L2
// by the group's other CTAs, instead of the whole B (weights) being streamed once per tile row.
// Host and device (tests/cpp/test_tile_raster.cpp checks that it is a bijection).

#include "cute_gemm/config.hpp"

namespace cute_gemm {

struct TileCoord {
  int m;  // tile row
  int n;  // tile column
};

// Tile of the CTA `linear` (0 .. tiles_m * tiles_n - 1); the last group may have fewer rows.
CG_HOST_DEVICE TileCoord raster_tile(int linear, int tiles_m, int tiles_n, int group_rows) {
  const int per_group = group_rows * tiles_n;
  const int group = linear / per_group, in_group = linear % per_group;
  const int first_m = group * group_rows;
  const int rows = tiles_m - first_m < group_rows ? tiles_m - first_m : group_rows;
  return TileCoord{first_m + in_group % rows, in_group / rows};
}

}  // namespace cute_gemm
