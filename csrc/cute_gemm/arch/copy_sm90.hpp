#pragma once
// stmatrix (sm_90+): the inverse of ldmatrix (copy_sm75.hpp). A warp stores 4 8x8 matrices of
// 16-bit elements to shared memory: each lane gives one 32-bit register per matrix, row lane / 4,
// elements 2 (lane % 4) and 2 (lane % 4) + 1 (the mma.sync fragment order), and lanes 8i .. 8i + 7
// give the addresses of the 8 rows (16 bytes each) of matrix i, so the rows may land anywhere,
// a swizzled tile included.

#include "cute_gemm/arch/config_arch.hpp"
#include "cute_gemm/numeric.hpp"

namespace cute_gemm {

struct SM90_U32x4_STSM_N {
  using SRegisters = uint32_t[4];
  using DRegisters = uint128_t[1];
  // dst: the shared-memory address (detail::smem_addr) of the 16-byte row this lane points at.
  CG_DEVICE static void copy(uint32_t s0, uint32_t s1, uint32_t s2, uint32_t s3, uint32_t dst) {
#if defined(CG_ARCH_SM90_ENABLED)
    asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1,%2,%3,%4};\n" ::"r"(dst),
                 "r"(s0), "r"(s1), "r"(s2), "r"(s3)
                 : "memory");
#else
    detail::arch_unsupported(s0, s1, s2, s3, dst);
#endif
  }
};

}  // namespace cute_gemm
