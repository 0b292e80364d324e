#pragma once
// What the kernels need to know of a 16-bit element type: its m16n8k16 mma (fp32 accumulators)
// and its conversions to fp32 (also from raw bits) and from fp32 (round to nearest even). One
// place for the GEMM, mixed GEMM and attention kernels.

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "cute_gemm/arch/mma_sm80.hpp"

namespace cute_gemm {

template <class T>
struct HalfTraits;
template <>
struct HalfTraits<__half> {
  using MmaOp = SM80_16x8x16_F32F16F16F32_TN;
  CG_DEVICE static __half from_float(float x) { return __float2half_rn(x); }
  CG_DEVICE static float to_float(__half x) { return __half2float(x); }
  CG_DEVICE static float bits_to_float(uint16_t bits) { return to_float(__ushort_as_half(bits)); }
  CG_DEVICE static uint32_t pack2(float lo, float hi) {
    __half2 const h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t const*>(&h);
  }
};
template <>
struct HalfTraits<__nv_bfloat16> {
  using MmaOp = SM80_16x8x16_F32BF16BF16F32_TN;
  CG_DEVICE static __nv_bfloat16 from_float(float x) { return __float2bfloat16_rn(x); }
  CG_DEVICE static float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
  CG_DEVICE static float bits_to_float(uint16_t bits) {
    return to_float(__ushort_as_bfloat16(bits));
  }
  CG_DEVICE static uint32_t pack2(float lo, float hi) {
    __nv_bfloat162 const h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t const*>(&h);
  }
};

}  // namespace cute_gemm
