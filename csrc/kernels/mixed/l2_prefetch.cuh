#pragma once
// A mixed GEMM kernel's share of MixedGemmParams::l2_prefetch: bytes a later kernel reads (the
// next GEMM's weights), asked of L2 before this kernel waits for the kernel before it. At batch 1
// the decode attention kernel is bound by latency for ~10 us and triggers the next kernel (the
// o projection) at its start; that GEMM's CTAs stream their own weights and then idle in
// griddepcontrol.wait, so DRAM idles too. Prefetching part of the gate/up weights there moves
// that part of the layer's largest stream into the idle window. A hint (prefetch_sm90.hpp):
// results never depend on it.
//
// CTA c of the grid's C (x fastest, then y, z) takes units [U c / C, U (c + 1) / C) of the
// range's U 16-byte units, split among `lanes` callers; each issues its part in pieces of at most
// kMaxPieceBytes (one bulk prefetch each).

#include <cstdint>

#include "cute_gemm/arch/prefetch_sm90.hpp"
#include "kernels/mixed/mixed_gemm_launch.hpp"

namespace cute_gemm {
namespace mixed {

constexpr int64_t kL2PrefetchUnit = 16;               // the bulk prefetch's alignment and size unit
constexpr uint32_t kMaxPieceBytes = 64 * 1024;        // bytes per bulk prefetch

// Called by callers lane = 0 .. lanes - 1 of every CTA (the same `lanes` in every CTA).
CG_DEVICE void l2_prefetch_share(MixedGemmParams const& p, int lane, int lanes) {
  if (p.l2_prefetch_bytes <= 0) return;
  const int64_t units = p.l2_prefetch_bytes / kL2PrefetchUnit;
  const int64_t ctas = int64_t(gridDim.x) * gridDim.y * gridDim.z;
  const int64_t cta = blockIdx.x + int64_t(gridDim.x) * (blockIdx.y + int64_t(gridDim.y) *
                                                          blockIdx.z);
  const int64_t cta_begin = units * cta / ctas, cta_units = units * (cta + 1) / ctas - cta_begin;
  int64_t begin = cta_begin + cta_units * lane / lanes;
  const int64_t end = cta_begin + cta_units * (lane + 1) / lanes;
  char const* base = static_cast<char const*>(p.l2_prefetch);
  constexpr int64_t kPieceUnits = kMaxPieceBytes / kL2PrefetchUnit;
  for (; begin < end; begin += kPieceUnits) {
    const int64_t piece = end - begin < kPieceUnits ? end - begin : kPieceUnits;
    l2_prefetch_bulk(base + begin * kL2PrefetchUnit, uint32_t(piece * kL2PrefetchUnit));
  }
}

}  // namespace mixed
}  // namespace cute_gemm
