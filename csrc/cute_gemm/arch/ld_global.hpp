#pragma once
// Streaming 16-byte global loads into registers (no shared-memory staging): for operands each
// lane reads exactly once, already in its fragment order (the mixed GEMM's packed weights).
// .nc: read-only path; L1::no_allocate: nothing to keep in L1; L2 cache hint: the caller's policy
// (evict-first, so streamed weights do not push reused activations out of L2).

#include "cute_gemm/arch/config_arch.hpp"
#include "cute_gemm/numeric.hpp"

namespace cute_gemm {

CG_DEVICE uint4 ld_global_stream_v4(void const* ptr, uint64_t policy) {
  uint4 r;
#if defined(CG_ARCH_CP_ASYNC_ENABLED)
  asm volatile(
      "ld.global.nc.L1::no_allocate.L2::cache_hint.v4.u32 {%0,%1,%2,%3}, [%4], %5;\n"
      : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
      : "l"(ptr), "l"(policy));
#else
  r = make_uint4(0, 0, 0, 0);
  detail::arch_unsupported(ptr, policy);
#endif
  return r;
}

}  // namespace cute_gemm
