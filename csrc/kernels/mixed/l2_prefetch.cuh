#pragma once
// A CTA's share of a launch's L2 prefetch (MixedGemmParams::prefetch, the next kernel's weight).
// The range is split evenly over the grid's CTAs in 16-byte units; `issuers` threads of the CTA
// (the caller's choice: a warp, or the one thread that issues the kernel's copies), numbered
// `issuer`, hand its share to the copy engine in pieces of at most kL2PrefetchPiece bytes, piece
// j by issuer j % issuers. Called before the kernel's dependency wait: the bytes do not depend on
// the previous kernel, and the sooner they are asked for the more of the kernel's run they
// overlap.

#include <cstdint>

#include "cute_gemm/arch/prefetch_sm90.hpp"
#include "kernels/mixed/mixed_gemm_launch.hpp"

namespace cute_gemm {
namespace mixed {

constexpr uint32_t kL2PrefetchPiece = 16 * 1024;

__device__ __forceinline__ void l2_prefetch_cta_share(MixedGemmParams const& p, int issuer,
                                                      int issuers) {
  if (p.prefetch_bytes == 0) return;
  const uint64_t ctas = uint64_t(gridDim.x) * gridDim.y * gridDim.z;
  const uint64_t cta = blockIdx.x + uint64_t(gridDim.x) * (blockIdx.y + uint64_t(gridDim.y) *
                                                                          blockIdx.z);
  const uint64_t units = p.prefetch_bytes / 16;
  const uint64_t per_cta = (units + ctas - 1) / ctas;
  const uint64_t begin = cta * per_cta * 16;
  const uint64_t end = min((cta + 1) * per_cta, units) * 16;
  char const* base = static_cast<char const*>(p.prefetch);
  for (uint64_t at = begin + uint64_t(issuer) * kL2PrefetchPiece; at < end;
       at += uint64_t(issuers) * kL2PrefetchPiece) {
    l2_prefetch_bulk(base + at, uint32_t(min(uint64_t(kL2PrefetchPiece), end - at)));
  }
}

}  // namespace mixed
}  // namespace cute_gemm
