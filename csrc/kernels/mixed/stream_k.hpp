#pragma once
// Stream-K: a GEMM's work shared evenly among persistent CTAs (Osama, Merrill, Cecka, Garland and
// Owens, "Stream-K: Work-centric Parallel Decomposition for Dense Matrix-Matrix Multiplication on
// the GPU", PPoPP 2023). Plain C++ (host and device): the planner sizes the workspace with it, the
// warp-specialized wgmma kernel walks it, and tests/cpp/test_stream_k.cpp checks it on the host.
//
// Why: a grid of one CTA per output tile runs in whole waves, so 448 tiles on 132 SMs take 4 waves
// for 3.4 waves of work (85%), and split-K restarts a pipeline per split and adds a reduce
// kernel. Here the units of work are (tile, k block) pairs, tile-major: unit u is k block
// u % k_blocks of tile u / k_blocks. CTA c of `ctas` takes units [begin(c), begin(c + 1)),
// begin(c) = floor(units * c / ctas), so every CTA has the same number of units within one.
// A CTA's units fall into segments, one per tile it touches: the middle ones are whole tiles,
// only its first and its last may be part of a tile (a "partial" segment).
//
// The fixup of a tile computed by several CTAs (its contributors, first_cta .. last_cta, in the
// order of their units): the first holds the tile's first k blocks, the "owner", which computes
// them last of all its units (its range ends inside the tile); every later contributor ("peer")
// starts its range inside the tile, computes its part first, writes the fp32 partial sums to its
// slot of the workspace and counts itself in the tile's counter (zeroed before the launch). The
// owner, once its own part is done, waits for the count (by then the peers have long finished:
// their part came first), adds the peers' slots in contributor order and stores the tile. The
// sum is the same in every run. A peer's slot is the CTA's own: only a CTA's first segment can
// be a peer's. The owner's wait needs the peers resident or done: the planner launches at most
// one wave of CTAs.
//
// Tile t is N tile t % tiles_n of M tile t / tiles_n (a grid of tiles' order): CTAs that run
// together share one activation tile (the operand each k block reads most of) through the L2.

#include <cstdint>

#include "cute_gemm/config.hpp"

namespace cute_gemm {
namespace mixed {

struct StreamKPartition {
  int tiles_m = 0, tiles_n = 0;  // output tiles along M and N
  int k_blocks = 0;              // k blocks (units) per tile
  int ctas = 0;                  // persistent CTAs; 0: not a stream-K launch

  // One CTA's units within one tile: k blocks [kb_begin, kb_end) of tile `tile`.
  struct Segment {
    int tile = 0;
    int kb_begin = 0, kb_end = 0;
    bool partial = false;  // not the whole tile: the fixup applies (owner iff kb_begin == 0)
  };

  CG_HOST_DEVICE int tiles() const { return tiles_m * tiles_n; }
  CG_HOST_DEVICE int64_t units() const { return int64_t(tiles()) * k_blocks; }
  CG_HOST_DEVICE int64_t begin(int cta) const { return units() * cta / ctas; }
  // The CTA whose units hold unit u: the largest c with begin(c) <= u.
  CG_HOST_DEVICE int cta_of(int64_t u) const { return int(((u + 1) * ctas - 1) / units()); }
  CG_HOST_DEVICE int m_tile(int tile) const { return tile / tiles_n; }
  CG_HOST_DEVICE int n_tile(int tile) const { return tile % tiles_n; }

  // The segment of `cta` that starts at unit u (begin(cta) <= u < begin(cta + 1)).
  CG_HOST_DEVICE Segment segment_at(int cta, int64_t u) const {
    Segment s;
    s.tile = int(u / k_blocks);
    s.kb_begin = int(u - int64_t(s.tile) * k_blocks);
    const int64_t left = begin(cta + 1) - u;
    s.kb_end = left < k_blocks - s.kb_begin ? s.kb_begin + int(left) : k_blocks;
    s.partial = s.kb_begin > 0 || s.kb_end < k_blocks;
    return s;
  }

  // The contributors of tile t: CTAs first_cta(t) (the owner) .. last_cta(t).
  CG_HOST_DEVICE int first_cta(int tile) const { return cta_of(int64_t(tile) * k_blocks); }
  CG_HOST_DEVICE int last_cta(int tile) const { return cta_of(int64_t(tile + 1) * k_blocks - 1); }

  // The workspace: one int32 counter per tile (rounded up to 256 bytes), then one slot of
  // slot_bytes per CTA (CTA c's partial sums as a peer).
  CG_HOST_DEVICE static int64_t counter_bytes(int tiles) {
    return (int64_t(tiles) * 4 + 255) / 256 * 256;
  }
  CG_HOST_DEVICE static int64_t workspace_bytes(int tiles, int ctas, int64_t slot_bytes) {
    return counter_bytes(tiles) + int64_t(ctas) * slot_bytes;
  }
};

}  // namespace mixed
}  // namespace cute_gemm
