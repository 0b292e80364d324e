#pragma once
// Loads from shared memory by 32-bit address (the operand PTX's ld.shared takes), for loops that
// compute a buffer's address once and add stage offsets to it: through a generic pointer the
// compiler recomputes the conversion, or the pointer's parts, in every iteration.

#include "cute_gemm/arch/config_arch.hpp"
#include "cute_gemm/numeric.hpp"

namespace cute_gemm {

// 16 bytes (four 32-bit words) at a 16-byte aligned shared-memory address.
CG_DEVICE void ld_shared_u32x4(uint32_t smem, uint32_t& d0, uint32_t& d1, uint32_t& d2,
                               uint32_t& d3) {
#if defined(__CUDA_ARCH__)
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(d0), "=r"(d1), "=r"(d2), "=r"(d3)
               : "r"(smem));
#else
  d0 = d1 = d2 = d3 = 0;
  detail::arch_unsupported(smem);
#endif
}

// 2 bytes at a 2-byte aligned shared-memory address.
CG_DEVICE uint16_t ld_shared_u16(uint32_t smem) {
  uint16_t v = 0;
#if defined(__CUDA_ARCH__)
  asm volatile("ld.shared.u16 %0, [%1];\n" : "=h"(v) : "r"(smem));
#else
  detail::arch_unsupported(smem);
#endif
  return v;
}

}  // namespace cute_gemm
