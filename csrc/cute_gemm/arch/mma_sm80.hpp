#pragma once
// mma.sync.aligned.m16n8k16 (sm_80+): D[16x8] = A[16x16] * B[16x8] + C, f32 accumulators.
// Operand register counts are per thread of the warp: A 4x32-bit (8 halves), B 2x32-bit (4 halves),
// C/D 4 floats. Which elements each thread holds is the atom's traits (mma_traits_sm80.hpp).
// ".row.col": A is K-contiguous per row, B K-contiguous per column (both "TN" in BLAS terms).

#include "cute_gemm/arch/config_arch.hpp"

namespace cute_gemm {

struct SM80_16x8x16_F32F16F16F32_TN {
  using ARegisters = uint32_t[4];
  using BRegisters = uint32_t[2];
  using CRegisters = float[4];
  using DRegisters = float[4];

  CG_DEVICE static void fma(float& d0, float& d1, float& d2, float& d3, uint32_t a0, uint32_t a1,
                            uint32_t a2, uint32_t a3, uint32_t b0, uint32_t b1, float c0, float c1,
                            float c2, float c3) {
#if defined(CG_ARCH_MMA_SM80_ENABLED)
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
        "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};\n"
        : "=f"(d0), "=f"(d1), "=f"(d2), "=f"(d3)
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1), "f"(c0), "f"(c1), "f"(c2),
          "f"(c3));
#else
    detail::arch_unsupported(d0, d1, d2, d3, a0, a1, a2, a3, b0, b1, c0, c1, c2, c3);
#endif
  }
};

struct SM80_16x8x16_F32BF16BF16F32_TN {
  using ARegisters = uint32_t[4];
  using BRegisters = uint32_t[2];
  using CRegisters = float[4];
  using DRegisters = float[4];

  CG_DEVICE static void fma(float& d0, float& d1, float& d2, float& d3, uint32_t a0, uint32_t a1,
                            uint32_t a2, uint32_t a3, uint32_t b0, uint32_t b1, float c0, float c1,
                            float c2, float c3) {
#if defined(CG_ARCH_MMA_SM80_ENABLED)
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
        "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};\n"
        : "=f"(d0), "=f"(d1), "=f"(d2), "=f"(d3)
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1), "f"(c0), "f"(c1), "f"(c2),
          "f"(c3));
#else
    detail::arch_unsupported(d0, d1, d2, d3, a0, a1, a2, a3, b0, b1, c0, c1, c2, c3);
#endif
  }
};

// D = A * B + C through Op (one of the m16n8k16 structs above) on register arrays, for kernels
// that hold their fragments as plain registers rather than atom tensors.
template <class Op>
CG_DEVICE void mma_16816(float (&d)[4], uint32_t const (&a)[4], uint32_t b0, uint32_t b1,
                         float const (&c)[4]) {
  Op::fma(d[0], d[1], d[2], d[3], a[0], a[1], a[2], a[3], b0, b1, c[0], c[1], c[2], c[3]);
}

}  // namespace cute_gemm
