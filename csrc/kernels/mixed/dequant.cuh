#pragma once
// Register dequantization of packed weights into mma.sync B-fragment registers (weight_format.hpp).
//
// No integer-to-float conversion instructions: OR-ing a small integer q into the mantissa of a
// half whose exponent encodes 1024 (0x6400) gives exactly 1024 + q, so one subtraction of
// (1024 + z) yields q - z exactly, and one multiplication by the group scale rounds once -- the
// same value the reference (q - z) * s rounded to the activation dtype gives. (Folding both into
// a single FMA with a precomputed -(1024 + z) * s would cancel catastrophically.)
// bf16 has a 7-bit mantissa: 0x4300 encodes 128 + q for q < 128, so INT4 nibbles are extracted
// unshifted; INT8 goes through fp32 (0x4B000000 encodes 2^23 + q).

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "cute_gemm/config.hpp"

namespace cute_gemm {
namespace mixed {

CG_DEVICE uint32_t lop3_and_or(uint32_t a, uint32_t mask, uint32_t bits) {
  uint32_t r;
  // (a & mask) | bits in one instruction; 0xEA is the truth table of (x & y) | z.
  asm("lop3.b32 %0, %1, %2, %3, 0xEA;\n" : "=r"(r) : "r"(a), "r"(mask), "r"(bits));
  return r;
}

template <class T>
struct Dequant;

template <>
struct Dequant<__half> {
  using T2 = __half2;
  CG_DEVICE static T2 as_t2(uint32_t x) { return *reinterpret_cast<T2*>(&x); }
  CG_DEVICE static uint32_t as_u32(T2 x) { return *reinterpret_cast<uint32_t*>(&x); }
  CG_DEVICE static T2 splat(float v) { return __float2half2_rn(v); }

  // One INT4 word -> the four registers r0(2w), r1(2w), r0(2w+1), r1(2w+1).
  // zc = 1024 + z (both halves), nzc16 = -(64 + z); s = scale (both halves).
  CG_DEVICE static void int4(uint32_t w, T2 zc, T2 nzc16, T2 s, uint32_t (&out)[4]) {
    const T2 one_16 = __float2half2_rn(1.f / 16.f);
    const uint32_t lo0 = lop3_and_or(w, 0x000F000Fu, 0x64006400u);
    const uint32_t hi0 = lop3_and_or(w, 0x00F000F0u, 0x64006400u);
    const uint32_t lo1 = lop3_and_or(w >> 8, 0x000F000Fu, 0x64006400u);
    const uint32_t hi1 = lop3_and_or(w >> 8, 0x00F000F0u, 0x64006400u);
    out[0] = as_u32(__hmul2(__hsub2(as_t2(lo0), zc), s));
    out[1] = as_u32(__hmul2(__hfma2(as_t2(hi0), one_16, nzc16), s));
    out[2] = as_u32(__hmul2(__hsub2(as_t2(lo1), zc), s));
    out[3] = as_u32(__hmul2(__hfma2(as_t2(hi1), one_16, nzc16), s));
  }
  // One INT8 word -> r0, r1 of one k16 step. zc = 1024 + z.
  CG_DEVICE static void int8(uint32_t w, T2 zc, T2 s, uint32_t (&out)[2]) {
    const uint32_t r0 = __byte_perm(w, 0x64646464u, 0x4240);
    const uint32_t r1 = __byte_perm(w, 0x64646464u, 0x4341);
    out[0] = as_u32(__hmul2(__hsub2(as_t2(r0), zc), s));
    out[1] = as_u32(__hmul2(__hsub2(as_t2(r1), zc), s));
  }
  CG_DEVICE static T2 int4_zc(float z) { return __float2half2_rn(1024.f + z); }
  CG_DEVICE static T2 int4_nzc16(float z) { return __float2half2_rn(-(64.f + z)); }
  CG_DEVICE static T2 int8_zc(float z) { return __float2half2_rn(1024.f + z); }
};

template <>
struct Dequant<__nv_bfloat16> {
  using T2 = __nv_bfloat162;
  CG_DEVICE static T2 as_t2(uint32_t x) { return *reinterpret_cast<T2*>(&x); }
  CG_DEVICE static uint32_t as_u32(T2 x) { return *reinterpret_cast<uint32_t*>(&x); }
  CG_DEVICE static T2 splat(float v) { return __float2bfloat162_rn(v); }

  // zc = 128 + z; the nzc16 slot is unused (nibbles are extracted unshifted).
  CG_DEVICE static void int4(uint32_t w, T2 zc, T2 /*nzc16*/, T2 s, uint32_t (&out)[4]) {
    const uint32_t lo0 = lop3_and_or(w, 0x000F000Fu, 0x43004300u);
    const uint32_t hi0 = lop3_and_or(w >> 4, 0x000F000Fu, 0x43004300u);
    const uint32_t lo1 = lop3_and_or(w >> 8, 0x000F000Fu, 0x43004300u);
    const uint32_t hi1 = lop3_and_or(w >> 12, 0x000F000Fu, 0x43004300u);
    out[0] = as_u32(__hmul2(__hsub2(as_t2(lo0), zc), s));
    out[1] = as_u32(__hmul2(__hsub2(as_t2(hi0), zc), s));
    out[2] = as_u32(__hmul2(__hsub2(as_t2(lo1), zc), s));
    out[3] = as_u32(__hmul2(__hsub2(as_t2(hi1), zc), s));
  }
  // INT8 through fp32: 2^23 + q exactly, minus (2^23 + z), times s, rounded once to bf16.
  // zc is unused here; zf = z and sf = s as floats.
  CG_DEVICE static void int8_f32(uint32_t w, float zf, float sf, uint32_t (&out)[2]) {
    const float magic = 8388608.f;
    float v[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const uint32_t bits = __byte_perm(w, 0x4B000000u, 0x7650 + i) ;
      v[i] = (__uint_as_float(bits) - (magic + zf)) * sf;
    }
    // bytes: 0 = r0.x, 1 = r1.x, 2 = r0.y, 3 = r1.y
    out[0] = as_u32(__floats2bfloat162_rn(v[0], v[2]));
    out[1] = as_u32(__floats2bfloat162_rn(v[1], v[3]));
  }
  CG_DEVICE static T2 int4_zc(float z) { return __float2bfloat162_rn(128.f + z); }
  // Unused by int4() above; kept so both dtypes share the callers' code.
  CG_DEVICE static T2 int4_nzc16(float /*z*/) { return __float2bfloat162_rn(0.f); }
};

}  // namespace mixed
}  // namespace cute_gemm
