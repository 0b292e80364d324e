#pragma once
// The wgmma shared-memory matrix descriptor of an operand tile, derived from the tile's static
// layout: the layout is checked at compile time against the layouts the instruction accepts, and
// the descriptor's byte offsets are read off its strides.
//
// Supported: K-major tiles with the 128-byte swizzle (Sw128KMajor, mma_traits_sm90.hpp):
//   Swizzle<3, M, 3> o 0 o (Rows, (A, KA)) : (A, (1, DA)),   A * E = 128 bytes, 2^M * E = 16 bytes
// for E-byte elements: rows of one 128-byte line of K, 8 rows per 1024-byte swizzle atom (the
// 16-byte unit u of row r stored at unit u ^ (r % 8)), KA atoms along K, DA elements apart. The
// PTX ISA describes the operand as core matrices of 8 rows x 16 bytes:
//   leading byte offset  between core matrices adjacent along K: one 16-byte unit of the row,
//                        stride<1,0> * (16 / E) * E = 16 bytes (the hardware steps through the
//                        128-byte row by the swizzle for K-major tiles; a k16 step reads 32
//                        bytes of it, so the field is not used, but it holds the layout's value);
//   stride byte offset   between core matrices adjacent along the rows: 8 rows,
//                        stride<0> * 8 * E = 1024 bytes.
// A k16 step j of the tile starts at byte E * L(0, 16 j) (row 0 is never swizzled): the descriptor
// of the step is the tile's descriptor plus that offset >> 4 (start address field).
// Example: WgmmaDesc<Sw128KMajor<64, 128>>::make(0x4400) == 0x4000004000010440; its k16 step 2
// starts 64 bytes on: 0x4000004000010444.

#include "cute_gemm/arch/wgmma_desc_sm90.hpp"
#include "cute_gemm/composed_layout.hpp"

namespace cute_gemm {

template <class SmemLayout, int ElementBytes = 2>
struct WgmmaDesc {
  static_assert(sizeof(SmemLayout) == 0, "WgmmaDesc: a swizzled layout (ComposedLayout) is needed");
};

template <int B, int M, int S, class Offset, class Shape, class Stride, int ElementBytes>
struct WgmmaDesc<ComposedLayout<Swizzle<B, M, S>, Offset, Layout<Shape, Stride>>, ElementBytes> {
  using Tile = Layout<Shape, Stride>;
  static_assert(is_static<Tile>::value && is_constant<0, Offset>::value,
                "WgmmaDesc: a static layout with no offset");
  static_assert(B == 3 && S == 3 && (1 << M) * ElementBytes == 16,
                "WgmmaDesc: the 128-byte swizzle (8 rows, 16-byte units XORed by row % 8)");
  static_assert(decltype(rank(Tile{}))::value == 2 && decltype(rank<1>(Tile{}))::value == 2 &&
                    decltype(depth<0>(Tile{}))::value == 0,
                "WgmmaDesc: a (rows, (k within a 128-byte line, lines)) tile");
  static constexpr int kRows = decltype(size<0>(Tile{}))::value;
  static constexpr int kRowStride = decltype(stride<0>(Tile{}))::value;
  static constexpr int kLineK = decltype(size<1, 0>(Tile{}))::value;
  static constexpr int kKStride = decltype(stride<1, 0>(Tile{}))::value;
  static constexpr int kLines = decltype(size<1, 1>(Tile{}))::value;
  static constexpr int kLineStride = decltype(stride<1, 1>(Tile{}))::value;
  static_assert(kKStride == 1, "WgmmaDesc: K-major (K contiguous within a row)");
  static_assert(kLineK * ElementBytes == 128 && kRowStride == kLineK,
                "WgmmaDesc: rows of one 128-byte line, dense within the swizzle atom");
  static_assert(kRows % 8 == 0, "WgmmaDesc: whole 8-row swizzle atoms");
  static_assert(kLines == 1 || (kLineStride * ElementBytes % 1024 == 0 &&
                                kLineStride >= kRows * kRowStride),
                "WgmmaDesc: lines along K in their own 1024-byte aligned atoms");

  static constexpr WgmmaSwizzle kSwizzle = WgmmaSwizzle::k128B;
  static constexpr uint32_t kLeadingBytes = kKStride * (16 / ElementBytes) * ElementBytes;
  static constexpr uint32_t kStrideBytes = kRowStride * 8 * ElementBytes;

  // The descriptor of the tile at shared-memory address smem_addr.
  // @pre smem_addr % 1024 == 0 (the swizzle atoms on their alignment: base offset 0).
  CG_HOST_DEVICE static constexpr uint64_t make(uint32_t smem_addr) {
    return make_wgmma_desc(smem_addr, kLeadingBytes, kStrideBytes, kSwizzle);
  }
};

// make_wgmma_desc(layout, smem_addr): WgmmaDesc<decltype(layout)>::make(smem_addr).
template <int ElementBytes = 2, class SmemLayout>
CG_HOST_DEVICE constexpr uint64_t make_wgmma_desc(SmemLayout const&, uint32_t smem_addr) {
  return WgmmaDesc<SmemLayout, ElementBytes>::make(smem_addr);
}

}  // namespace cute_gemm
