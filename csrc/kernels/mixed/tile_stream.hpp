#pragma once
// The work of a tile stream (MixedPlan::tile_stream, mixed_decode_kernel.cuh): `ctas` CTAs share
// the `tiles` 32-column tiles of a token tile, CTA c the consecutive tiles [tile_begin(c),
// tile_begin(c + 1)), and the CTA's `warps` warps split the k blocks of its tiles, tile after tile,
// into runs: warp w the blocks [run_start(n, w), run_start(n, w + 1)) of the CTA's n =
// cta_blocks(c). Tiles per CTA differ by at most one, and so do blocks per run. Where a CTA holds
// at most `warps` tiles (the planner's rule), a run has at most k_blocks blocks and so touches at
// most two tiles. Each run keeps its sums per tile (slot 0: its first tile, slot 1: its second),
// and the run that holds a tile's last k block adds the tile's slots in run order, from
// first_run(n, t) on. Host and device; tests/cpp/test_tile_stream.cpp checks that the runs cover
// every k block of every tile once and that each tile is added once. 32-bit arithmetic: the
// planner keeps tiles x ctas and warps x cta_blocks below 2^32.

#include "cute_gemm/config.hpp"

namespace cute_gemm {
namespace mixed {

struct TileStream {
  unsigned tiles, ctas, k_blocks, warps;

  CG_HOST_DEVICE unsigned tile_begin(unsigned c) const { return c * tiles / ctas; }
  CG_HOST_DEVICE unsigned cta_blocks(unsigned c) const {
    return (tile_begin(c + 1) - tile_begin(c)) * k_blocks;
  }
  // Where run w starts in a CTA of n k blocks (tile-major: tile t's block kb is t k_blocks + kb).
  CG_HOST_DEVICE int run_start(unsigned n, int w) const { return int(unsigned(w) * n / warps); }

  struct Run {
    int tile;          // the run's first tile, of the CTA's
    int kb;            // the run's first k block in that tile
    int blocks;        // the run's k blocks
    int first_blocks;  // how many of them lie in its first tile (all but where it has two)
  };
  CG_HOST_DEVICE Run run(unsigned n, int w) const {
    const int start = run_start(n, w), kb = start % int(k_blocks);
    const int blocks = run_start(n, w + 1) - start;
    const int in_first = int(k_blocks) - kb;
    return Run{start / int(k_blocks), kb, blocks, blocks < in_first ? blocks : in_first};
  }
  // The run that holds tile t's first k block, searched back from run `last` (one that holds
  // a block of tile t).
  CG_HOST_DEVICE int first_run(unsigned n, int t, int last) const {
    int w = last;
    while (w > 0 && run_start(n, w) > t * int(k_blocks)) --w;
    return w;
  }
  // The slot of tile t in run w's sums: 1 where the run started in an earlier tile.
  CG_HOST_DEVICE int slot(unsigned n, int w, int t) const {
    return run_start(n, w) < t * int(k_blocks) ? 1 : 0;
  }
};

}  // namespace mixed
}  // namespace cute_gemm
