#pragma once
// Stream-K work of the 16-row wgmma tile (MixedPlan::stream_k_ctas), in a header free of CUDA
// so that the planner sizes the workspace with it and tests/cpp/test_stream_k.cpp checks the
// partition on the host.
//
// `ctas` CTAs share the tiles * k_blocks (tile, k block) pairs of an unsplit grid in their linear
// order t * k_blocks + kb: CTA r takes pairs [begin(r), begin(r + 1)), begin(r) = floor(r B / C)
// (B pairs, C CTAs), so every CTA runs the same number of k blocks to within one. Where the tile
// count is not a multiple of the CTAs an SM holds, the SMs then finish together instead of some
// running one tile more than others (160 tiles of the 16-row tile over an H200's 264 CTA slots:
// 19.2 us against 23.8 unsplit at K = 4096; NOTES.md session 70).
//
// With ctas >= tiles a CTA's range spans at most two tiles: its segments are the end of one tile
// and the start of the next (or one tile's middle). The CTA whose range holds a tile's last k block
// owns the tile: it adds the partial sums of the tile's other CTAs, all of lower index, to its own
// and stores the output. A CTA runs the segment it contributes first, so that its partial sums are
// ready early, and the one it owns last. Owners wait only for CTAs of lower index, which the GPU
// starts no later (it dispatches a grid's CTAs in index order; CUDA does not promise it, and a
// wait that outlasts WgmmaStreamK::kWaitLimitNs traps rather than hang), so the grid makes
// progress however many of its CTAs are resident.

#include <cstdint>

#include "cute_gemm/config.hpp"

namespace cute_gemm {
namespace mixed {

struct StreamKSegment {
  int tile = 0;      // the tile of N
  int kb_begin = 0;  // its first k block
  int blocks = 0;    // k blocks
  bool owned = false;  // holds the tile's last k block: this CTA adds and stores the tile
  int first_cta = 0;   // owned: the lowest CTA of the tile (its contributors: first_cta .. cta - 1)
};

// A CTA's segments in the order it runs them (segments 1 or 2; 0 where the CTA has no pairs).
struct StreamKWork {
  StreamKSegment seg[2];
  int segments = 0;
  int blocks = 0;  // k blocks over both segments
  // Block i's k block and tile (the CTA's blocks in run order, i < blocks).
  CG_HOST_DEVICE int kb_of(int i) const {
    return i < seg[0].blocks ? seg[0].kb_begin + i : seg[1].kb_begin + (i - seg[0].blocks);
  }
  CG_HOST_DEVICE int tile_of(int i) const { return i < seg[0].blocks ? seg[0].tile : seg[1].tile; }
};

// The partition's arithmetic is 32-bit (a kernel computes it before its first copy, and 64-bit
// division is a long chain of instructions on the GPU; so was a division by shifts and
// subtractions, ~1500 instructions before the first copy): pairs * ctas must stay below 2^32.
CG_HOST_DEVICE constexpr bool stream_k_fits_32_bits(int64_t pairs, int ctas) {
  return pairs * ctas < (int64_t(1) << 32);
}

// The first (tile, k block) pair of CTA r of `ctas` over `pairs` pairs.
CG_HOST_DEVICE uint32_t stream_k_begin(int r, int ctas, uint32_t pairs) {
  return uint32_t(r) * pairs / uint32_t(ctas);
}

// The CTA whose range holds pair g: the largest r with stream_k_begin(r) <= g.
CG_HOST_DEVICE int stream_k_cta_of(uint32_t g, int ctas, uint32_t pairs) {
  return int(((g + 1) * uint32_t(ctas) - 1) / pairs);
}

// The segment of pairs [g, end) that lies in g's tile (g < end).
CG_HOST_DEVICE StreamKSegment stream_k_segment(uint32_t g, uint32_t end, int ctas, uint32_t pairs,
                                               uint32_t k_blocks) {
  StreamKSegment s;
  const uint32_t tile = g / k_blocks;
  const uint32_t tile_end = (tile + 1) * k_blocks;
  const uint32_t seg_end = end < tile_end ? end : tile_end;
  s.tile = int(tile);
  s.kb_begin = int(g - tile * k_blocks);
  s.blocks = int(seg_end - g);
  s.owned = seg_end == tile_end;
  s.first_cta = stream_k_cta_of(tile * k_blocks, ctas, pairs);
  return s;
}

// CTA r's segments (tiles <= ctas <= tiles * k_blocks, stream_k_fits_32_bits). Straight-line
// code, no arrays indexed at run time (no local memory in the kernel).
CG_HOST_DEVICE StreamKWork stream_k_work(int r, int ctas, int tiles, int k_blocks) {
  StreamKWork w;
  const uint32_t pairs = uint32_t(tiles) * uint32_t(k_blocks), kb = uint32_t(k_blocks);
  const uint32_t begin = stream_k_begin(r, ctas, pairs), end = stream_k_begin(r + 1, ctas, pairs);
  if (begin >= end) return w;  // no pairs (ctas > pairs; the planner makes none)
  const StreamKSegment a = stream_k_segment(begin, end, ctas, pairs, kb);
  const uint32_t a_end = begin + uint32_t(a.blocks);
  if (a_end >= end) {
    w.seg[0] = a;
    w.segments = 1;
    w.blocks = a.blocks;
    return w;
  }
  const StreamKSegment b = stream_k_segment(a_end, end, ctas, pairs, kb);
  // Run order: the contributed segment (not owned) first.
  const bool swap = a.owned && !b.owned;
  w.seg[0] = swap ? b : a;
  w.seg[1] = swap ? a : b;
  w.segments = 2;
  w.blocks = a.blocks + b.blocks;
  return w;
}

// The workspace of a stream-K launch: per CTA, its partial sums (`partial_floats` floats: each
// thread's accumulators, value-major so that a warp's stores coalesce), then per CTA and warp one
// 64-bit flag that says the warp's partial sums are complete (the launch's id; the owner's warp of
// the same index, the only reader of those sums, writes 0 back once it has read them, so a CUDA
// graph's replays find 0 there). The flags are 16-byte aligned.
CG_HOST_DEVICE constexpr int64_t stream_k_partials_bytes(int ctas, int partial_floats) {
  return (int64_t(ctas) * partial_floats * 4 + 15) / 16 * 16;
}
CG_HOST_DEVICE constexpr int64_t stream_k_workspace_bytes(int ctas, int partial_floats,
                                                          int warps) {
  return stream_k_partials_bytes(ctas, partial_floats) + int64_t(ctas) * warps * 8;
}

}  // namespace mixed
}  // namespace cute_gemm
