#pragma once
// ldmatrix (sm_75+): a warp loads 1, 2 or 4 8x8 matrices of 16-bit elements from shared memory.
// Lanes 8i..8i+7 supply the addresses of the 8 rows (16 bytes each) of matrix i; each lane then
// holds one 32-bit register per matrix: row lane/4, elements 2*(lane%4) and 2*(lane%4)+1.
// With .trans a lane receives that pair from a column instead, which turns an N-major tile into
// the operand layout mma.sync expects.
// Source operand: the 16-byte row this lane points at (its address is what matters).

#include "cute_gemm/arch/config_arch.hpp"
#include "cute_gemm/numeric.hpp"

namespace cute_gemm {

struct SM75_U32x1_LDSM_N {
  using SRegisters = uint128_t[1];
  using DRegisters = uint32_t[1];
  CG_DEVICE static void copy(uint128_t const& src, uint32_t& d0) {
#if defined(CG_ARCH_LDSM_ENABLED)
    asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];\n"
                 : "=r"(d0)
                 : "r"(detail::smem_addr(&src)));
#else
    detail::arch_unsupported(src, d0);
#endif
  }
};

struct SM75_U32x2_LDSM_N {
  using SRegisters = uint128_t[1];
  using DRegisters = uint32_t[2];
  CG_DEVICE static void copy(uint128_t const& src, uint32_t& d0, uint32_t& d1) {
#if defined(CG_ARCH_LDSM_ENABLED)
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n"
                 : "=r"(d0), "=r"(d1)
                 : "r"(detail::smem_addr(&src)));
#else
    detail::arch_unsupported(src, d0, d1);
#endif
  }
};

// Also with the source as a 32-bit shared-memory address (detail::smem_addr), for loops that keep
// their shared-memory addresses as such.
struct SM75_U32x4_LDSM_N {
  using SRegisters = uint128_t[1];
  using DRegisters = uint32_t[4];
  CG_DEVICE static void copy(uint32_t src, uint32_t& d0, uint32_t& d1, uint32_t& d2,
                             uint32_t& d3) {
#if defined(CG_ARCH_LDSM_ENABLED)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(d0), "=r"(d1), "=r"(d2), "=r"(d3)
                 : "r"(src));
#else
    detail::arch_unsupported(src, d0, d1, d2, d3);
#endif
  }
  CG_DEVICE static void copy(uint128_t const& src, uint32_t& d0, uint32_t& d1, uint32_t& d2,
                             uint32_t& d3) {
    copy(detail::smem_addr(&src), d0, d1, d2, d3);
  }
};

struct SM75_U16x2_LDSM_T {
  using SRegisters = uint128_t[1];
  using DRegisters = uint32_t[1];
  CG_DEVICE static void copy(uint128_t const& src, uint32_t& d0) {
#if defined(CG_ARCH_LDSM_ENABLED)
    asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];\n"
                 : "=r"(d0)
                 : "r"(detail::smem_addr(&src)));
#else
    detail::arch_unsupported(src, d0);
#endif
  }
};

struct SM75_U16x4_LDSM_T {
  using SRegisters = uint128_t[1];
  using DRegisters = uint32_t[2];
  CG_DEVICE static void copy(uint128_t const& src, uint32_t& d0, uint32_t& d1) {
#if defined(CG_ARCH_LDSM_ENABLED)
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];\n"
                 : "=r"(d0), "=r"(d1)
                 : "r"(detail::smem_addr(&src)));
#else
    detail::arch_unsupported(src, d0, d1);
#endif
  }
};

struct SM75_U16x8_LDSM_T {
  using SRegisters = uint128_t[1];
  using DRegisters = uint32_t[4];
  CG_DEVICE static void copy(uint128_t const& src, uint32_t& d0, uint32_t& d1, uint32_t& d2,
                             uint32_t& d3) {
#if defined(CG_ARCH_LDSM_ENABLED)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(d0), "=r"(d1), "=r"(d2), "=r"(d3)
                 : "r"(detail::smem_addr(&src)));
#else
    detail::arch_unsupported(src, d0, d1, d2, d3);
#endif
  }
};

}  // namespace cute_gemm
