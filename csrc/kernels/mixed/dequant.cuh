#pragma once
// Register dequantization of packed weights (weight_format.hpp) into mma.sync B-fragment registers.
// Bit manipulation only: which fragment element each nibble or byte becomes is the packed format's
// business (weight_format.hpp); here one 32-bit word becomes two or four fragment registers.
//
// The kernels multiply by the group scale AFTER the mma, in fp32 (mixed_gemm_kernel.cuh), so the
// registers here hold the small integers q - z, which fp16 and bf16 represent exactly (|q - z| <=
// 255). Every product a * (q - z) is then exact in the fp32 accumulator, and the one scale
// multiply per group and output element replaces a multiply per weight.
//
// No integer-to-float conversion instructions: OR-ing a small integer q into the mantissa of a
// half whose exponent encodes 1024 (0x6400) gives exactly 1024 + q, so one subtraction of
// (1024 + z) yields q - z. A nibble sitting 4 bits higher gives 1024 + 16 q, and one FMA with 1/16
// and -(64 + z) yields q - z. bf16 has a 7-bit mantissa: 0x4300 encodes 128 + q for q < 128, so
// INT4 nibbles are extracted unshifted. An INT8 byte q = lo + 128 hi of symmetric weights is taken
// in two halves: 0x4300 | lo is 128 + lo, and 0xC300 with bit 7 set where hi is 0 is -256 (hi = 0)
// or -128 (hi = 1), so their sum is exactly q - 128 (all three are integers of magnitude at most
// 256, which bf16 holds exactly); other INT8 goes through fp32 (0x4B000000 encodes 2^23 + q).
//
// Biased dequantization (the decode kernel, where these instructions are a large part of a warp's
// work per weight byte): the registers keep the magic offset, off + q, and the kernel subtracts
// what the offsets and zero points contribute after the mma. For a token's activations a and a
// column's zero point z:  sum_k a_k (q_k - z) = sum_k a_k (off + q_k) - (off + z) sum_k a_k.
// sum_k a_k does not depend on the column, so one more mma per k16 step against a constant operand
// yields it for every token, shared by all the warp's columns. Each product is still exact, but
// the fp32 sums carry off * sum(a) and cancel it afterwards, which costs about
// log2(off / |q - z|) of their 24 bits. So only where off / |q - z| is small:
//   fp16 INT8: 1024 + q (|q - z| ~ 64): 2 byte permutes per word instead of 4 instructions;
//   bf16 INT4: 128 + q (|q - z| ~ 4): 7 instructions per word instead of 11.
// Not fp16 INT4: its cheap extraction leaves 1024 + q (ratio ~256) in half the registers, which
// costs about 8 of the 24 bits: too much for activations of one sign at large K.
// Not bf16 INT8: 0x43 next to a byte of q >= 128 would change the exponent.

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "cute_gemm/config.hpp"

namespace cute_gemm {
namespace mixed {

// lop3's immediate is its function applied to the operands' truth-table bytes 0xF0, 0xCC, 0xAA.
constexpr int kLop3A = 0xF0, kLop3B = 0xCC, kLop3C = 0xAA;

CG_DEVICE uint32_t lop3_and_or(uint32_t a, uint32_t mask, uint32_t bits) {
  uint32_t r;  // (a & mask) | bits in one instruction
  asm("lop3.b32 %0, %1, %2, %3, %4;\n"
      : "=r"(r)
      : "r"(a), "r"(mask), "r"(bits), "n"((kLop3A & kLop3B) | kLop3C));
  return r;
}

CG_DEVICE uint32_t lop3_andnot_or(uint32_t a, uint32_t mask, uint32_t bits) {
  uint32_t r;  // (~a & mask) | bits in one instruction
  asm("lop3.b32 %0, %1, %2, %3, %4;\n"
      : "=r"(r)
      : "r"(a), "r"(mask), "r"(bits), "n"(((~kLop3A & kLop3B) | kLop3C) & 0xFF));
  return r;
}

template <class T>
struct Dequant;

// The per-(group, column) constants of the subtraction for zero point z: zc = magic + z (both
// halves), nzc16 = -(magic / 16 + z) for nibbles read 4 bits up, nzf = -(2^23 + z) for the fp32
// route. Each dtype fills the ones its routines use.
template <class T2>
struct ZeroConstants {
  T2 zc, nzc16;
  float nzf;
};

template <>
struct Dequant<__half> {
  using T2 = __half2;
  CG_DEVICE static T2 as_t2(uint32_t x) { return *reinterpret_cast<T2*>(&x); }
  CG_DEVICE static uint32_t as_u32(T2 x) { return *reinterpret_cast<uint32_t*>(&x); }
  CG_DEVICE static T2 splat(float v) { return __float2half2_rn(v); }
  CG_DEVICE static T2 splat_of(__half v) { return __half2half2(v); }

  CG_DEVICE static ZeroConstants<T2> zero_constants(float z) {
    return {__float2half2_rn(1024.f + z), __float2half2_rn(-(64.f + z)), 0.f};
  }

  // One INT4 word -> q - z in the four registers r0(2w), r1(2w), r0(2w+1), r1(2w+1).
  CG_DEVICE static void int4(uint32_t w, ZeroConstants<T2> const& c, uint32_t (&out)[4]) {
    const T2 one_16 = __float2half2_rn(1.f / 16.f);
    const uint32_t w8 = w >> 8;
    out[0] = as_u32(__hsub2(as_t2(lop3_and_or(w, 0x000F000Fu, 0x64006400u)), c.zc));
    out[1] = as_u32(__hfma2(as_t2(lop3_and_or(w, 0x00F000F0u, 0x64006400u)), one_16, c.nzc16));
    out[2] = as_u32(__hsub2(as_t2(lop3_and_or(w8, 0x000F000Fu, 0x64006400u)), c.zc));
    out[3] = as_u32(__hfma2(as_t2(lop3_and_or(w8, 0x00F000F0u, 0x64006400u)), one_16, c.nzc16));
  }
  // One INT8 word -> q - z in r0, r1 of one k16 step (bytes 0..3 = r0.x, r1.x, r0.y, r1.y).
  // Symmetric takes the same instructions here (bf16's int8 has its own route for it).
  template <bool Symmetric = false>
  CG_DEVICE static void int8(uint32_t w, ZeroConstants<T2> const& c, uint32_t (&out)[2]) {
    out[0] = as_u32(__hsub2(as_t2(__byte_perm(w, 0x64646464u, 0x4240)), c.zc));
    out[1] = as_u32(__hsub2(as_t2(__byte_perm(w, 0x64646464u, 0x4341)), c.zc));
  }

  template <int Bits>
  static constexpr bool kBiased = Bits == 8;
  template <int Bits>
  static constexpr float kBias = 1024.f;
  // The registers of int8(): 1024 + q.
  CG_DEVICE static void int8_biased(uint32_t w, uint32_t (&out)[2]) {
    out[0] = __byte_perm(w, 0x64646464u, 0x4240);
    out[1] = __byte_perm(w, 0x64646464u, 0x4341);
  }
};

template <>
struct Dequant<__nv_bfloat16> {
  using T2 = __nv_bfloat162;
  CG_DEVICE static T2 as_t2(uint32_t x) { return *reinterpret_cast<T2*>(&x); }
  CG_DEVICE static uint32_t as_u32(T2 x) { return *reinterpret_cast<uint32_t*>(&x); }
  CG_DEVICE static T2 splat(float v) { return __float2bfloat162_rn(v); }
  CG_DEVICE static T2 splat_of(__nv_bfloat16 v) { return __bfloat162bfloat162(v); }

  // INT4 nibbles are extracted unshifted, so nzc16 is not needed; INT8 uses nzf.
  CG_DEVICE static ZeroConstants<T2> zero_constants(float z) {
    const T2 zc = __float2bfloat162_rn(128.f + z);
    return {zc, zc, -(8388608.f + z)};
  }

  CG_DEVICE static void int4(uint32_t w, ZeroConstants<T2> const& c, uint32_t (&out)[4]) {
    out[0] = as_u32(__hsub2(as_t2(lop3_and_or(w, 0x000F000Fu, 0x43004300u)), c.zc));
    out[1] = as_u32(__hsub2(as_t2(lop3_and_or(w >> 4, 0x000F000Fu, 0x43004300u)), c.zc));
    out[2] = as_u32(__hsub2(as_t2(lop3_and_or(w >> 8, 0x000F000Fu, 0x43004300u)), c.zc));
    out[3] = as_u32(__hsub2(as_t2(lop3_and_or(w >> 12, 0x000F000Fu, 0x43004300u)), c.zc));
  }
  // INT8, symmetric (z = 128, known at compile time): q - 128 from two halves of each byte (the
  // header's note), bytes 0 and 2 (r0.x, r0.y) in place, 1 and 3 (r1.x, r1.y) shifted down a byte:
  // 7 instructions a word. Otherwise through fp32: 2^23 + q exactly, minus (2^23 + z), packed to
  // bf16 (exact: |q - z| < 256): 10 instructions a word. A zero point known only at run time keeps
  // the fp32 route: the halves plus a subtraction of z - 128 made the mma.sync kernel slower
  // (NOTES.md session 77).
  template <bool Symmetric = false>
  CG_DEVICE static void int8(uint32_t w, ZeroConstants<T2> const& c, uint32_t (&out)[2]) {
    if constexpr (Symmetric) {
      const uint32_t w8 = w >> 8;
      out[0] = as_u32(__hadd2(as_t2(lop3_and_or(w, 0x007F007Fu, 0x43004300u)),
                              as_t2(lop3_andnot_or(w, 0x00800080u, 0xC300C300u))));
      out[1] = as_u32(__hadd2(as_t2(lop3_and_or(w8, 0x007F007Fu, 0x43004300u)),
                              as_t2(lop3_andnot_or(w8, 0x00800080u, 0xC300C300u))));
    } else {
      float v[4];
      CG_PRAGMA_UNROLL
      for (int i = 0; i < 4; ++i) {
        v[i] = __uint_as_float(__byte_perm(w, 0x4B000000u, 0x7650 + i)) + c.nzf;
      }
      // bytes: 0 = r0.x, 1 = r1.x, 2 = r0.y, 3 = r1.y
      out[0] = as_u32(__floats2bfloat162_rn(v[0], v[2]));
      out[1] = as_u32(__floats2bfloat162_rn(v[1], v[3]));
    }
  }

  template <int Bits>
  static constexpr bool kBiased = Bits == 4;
  template <int Bits>
  static constexpr float kBias = 128.f;
  // The registers of int4(): 128 + q.
  CG_DEVICE static void int4_biased(uint32_t w, uint32_t (&out)[4]) {
    out[0] = lop3_and_or(w, 0x000F000Fu, 0x43004300u);
    out[1] = lop3_and_or(w >> 4, 0x000F000Fu, 0x43004300u);
    out[2] = lop3_and_or(w >> 8, 0x000F000Fu, 0x43004300u);
    out[3] = lop3_and_or(w >> 12, 0x000F000Fu, 0x43004300u);
  }
};

// Word i (0..3) of a lane's 16-byte load.
CG_DEVICE uint32_t word_of(uint4 const& v, int i) {
  return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

// One packed word into fragment registers, exact (q - z, with zc) or biased (off + q): INT4
// r0(2w), r1(2w), r0(2w + 1), r1(2w + 1); INT8 r0, r1 of its k16 step.
// Symmetric: the zero point is known to be 2^(Bits - 1) at compile time (bf16 INT8 then takes
// its two-halves route).
template <class T, int Bits, bool Biased, bool Symmetric = false>
CG_DEVICE void dequant_word(uint32_t w, ZeroConstants<typename Dequant<T>::T2> const& zc,
                            uint32_t (&out)[Bits == 4 ? 4 : 2]) {
  using D = Dequant<T>;
  if constexpr (Bits == 4 && Biased) {
    D::int4_biased(w, out);
  } else if constexpr (Bits == 4) {
    D::int4(w, zc, out);
  } else if constexpr (Biased) {
    D::int8_biased(w, out);
  } else {
    D::template int8<Symmetric>(w, zc, out);
  }
}

}  // namespace mixed
}  // namespace cute_gemm
