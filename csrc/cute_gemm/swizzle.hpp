#pragma once
// Swizzle<B, M, S>: an XOR permutation of offsets that spreads rows of a tile across shared-memory
// banks. Units of 2^M elements are kept together; the B bits above bit M+S select a row phase
// that is XORed into the B bits above bit M (the column of the unit).
//
//   yyy = bits [M+S, M+S+B)   (the row phase)
//   zzz = bits [M,   M+B)     (the 2^M-element unit within a 2^S-unit row)
//   swizzle(x) = x ^ ((x & yyy_mask) >> S)
//
// Example, Swizzle<3,3,3> on half-precision offsets of an (8,64) row-major tile: the 16-byte unit
// (8 halves) at column c of row r lands in unit c ^ (r % 8), so the 8 rows that one ldmatrix 8x8
// reads in a column of units hit 8 different 16-byte bank groups.

#include "cute_gemm/dyn_layout.hpp"

namespace cute_gemm {

// Run-time swizzle (Python API, host tests). @pre 0 <= B, 0 <= M, |S| >= B.
struct DynSwizzle {
  int bits = 0;
  int base = 0;
  int shift = 0;

  CG_HOST_DEVICE constexpr int64_t yyy_mask() const {
    return ((int64_t(1) << bits) - 1) << (base + (shift > 0 ? shift : 0));
  }
  CG_HOST_DEVICE constexpr int64_t zzz_mask() const {
    return ((int64_t(1) << bits) - 1) << (base - (shift < 0 ? shift : 0));
  }
  CG_HOST_DEVICE constexpr int64_t operator()(int64_t x) const {
    return shift >= 0 ? x ^ ((x & yyy_mask()) >> shift) : x ^ ((x & yyy_mask()) << -shift);
  }
};

CG_HOST_DEVICE constexpr DynSwizzle make_dyn_swizzle(int b, int m, int s) {
  CG_REQUIRE(b >= 0 && m >= 0, "Swizzle: bits and base must be non-negative, got {a} and {b}", b,
             m);
  CG_REQUIRE((s < 0 ? -s : s) >= b, "Swizzle: |shift| ({a}) must be at least bits ({b})", s, b);
  CG_REQUIRE(b + m + (s < 0 ? -s : s) <= 40, "Swizzle: bits + base + |shift| = {a} exceeds {b}",
             b + m + (s < 0 ? -s : s), 40);
  return DynSwizzle{b, m, s};
}

// swizzle o (offset + layout): what a swizzled shared-memory layout is.
struct DynComposedLayout {
  DynSwizzle swizzle;
  int64_t offset = 0;
  DynLayout layout;

  CG_HOST_DEVICE constexpr int64_t operator()(int64_t idx) const {
    return swizzle(offset + layout(idx));
  }
  CG_HOST_DEVICE constexpr int64_t operator()(DynTuple const& crd) const {
    return swizzle(offset + layout(crd));
  }
};

// Typed swizzle for kernels: all three parameters static, so the masks fold into the code.
template <int B, int M, int S>
struct Swizzle {
  static_assert(B >= 0 && M >= 0, "Swizzle: bits and base must be non-negative");
  static_assert((S < 0 ? -S : S) >= B, "Swizzle: |shift| must be at least bits");
  static constexpr int kBits = B;
  static constexpr int kBase = M;
  static constexpr int kShift = S;
  static constexpr DynSwizzle kValue{B, M, S};

  template <class Offset>
  CG_HOST_DEVICE constexpr Offset operator()(Offset x) const {
    constexpr int64_t yyy = kValue.yyy_mask();
    if constexpr (S >= 0) {
      return x ^ ((x & Offset(yyy)) >> S);
    } else {
      return x ^ ((x & Offset(yyy)) << -S);
    }
  }
};

}  // namespace cute_gemm
