#pragma once
// Layouts attached to the sm_90a wgmma instructions (arch/mma_sm90.hpp), as layout-algebra types
// so that kernels address shared memory and registers through them and the CPU tests check them.

#include "cute_gemm/composed_layout.hpp"
#include "cute_gemm/layout.hpp"
#include "cute_gemm/swizzle.hpp"

namespace cute_gemm {

// A (Rows, K) tile of 16-bit elements, K-major, as a wgmma descriptor with the 128-byte swizzle
// reads it (WgmmaDesc, wgmma_desc.hpp): K in 64-element (128-byte) atoms, each atom Rows rows of
// 128 bytes, atoms Rows * 64 elements apart; within a row the 16-byte unit of K is XORed with the
// row's low 3 bits (Swizzle<3,3,3> on element offsets = Swizzle<3,4,3> on bytes).
//   (Rows, (64, K / 64)) : (64, (1, Rows * 64)), swizzled
// Example, Rows = 8, K = 128: element (r = 3, k = 70) is atom 1, unit 0 ^ 3 = 3, element 6 of it:
// 1 * 512 + 3 * 64 + 3 * 8 + 6 = 734.
// @pre Rows % 8 == 0 (whole 1024-byte swizzle atoms), K % 64 == 0; the tile starts on a 1024-byte
//      boundary of shared memory.
template <int Rows, int K>
using Sw128KMajor = decltype(composition(
    Swizzle<3, 3, 3>{},
    make_layout(make_shape(Int<Rows>{}, make_shape(_64{}, Int<K / 64>{})),
                make_stride(_64{}, make_stride(_1{}, Int<Rows * 64>{})))));

// Register fragments of wgmma.mma_async m64nNk16 with A from registers (SM90_64xNx16_F32_RS), for
// the 128 threads of a warpgroup, thread 32 w + 4 g + t (warp w, lane 4 g + t). In the
// instruction's own axes (wgmma's M, N, K), layouts map (T128, V) to the column-major index of the
// instruction's tile:
//   A: (M64, K16) index m + 64 k          C: (M64, N) index m + 64 n
// Warp w holds rows 16 w .. 16 w + 15 of both in the m16n8k16 fragment order (mma_traits_sm80.hpp),
// value i in register order (two 16-bit A values per 32-bit register):
//   A  a0..a7:            row 16 w + g + 8 (i / 2 % 2), column 2 t + i % 2 + 8 (i / 4)
//   C  d0..d(N / 2 - 1):  row 16 w + g + 8 (i / 2 % 2), column 2 t + i % 2 + 8 (i / 4)
// (from the PTX ISA's wgmma register fragment figures for .m64nNk16).
template <int N>
struct Wgmma64xNx16Layouts {
  static_assert(N % 8 == 0 && N >= 8 && N <= 256, "wgmma's N is 8 .. 256 in steps of 8");
  using Shape_MNK = Shape<_64, Int<N>, _16>;
  using ThrID = Layout<_128>;
  // (T128, V8) -> (M64, K16)
  using ALayout = Layout<Shape<Shape<_4, _8, _4>, Shape<_2, _2, _2>>,
                         Stride<Stride<_128, _1, _16>, Stride<_64, _8, _512>>>;
  // (T128, V(N / 2)) -> (M64, N)
  using CLayout = Layout<Shape<Shape<_4, _8, _4>, Shape<_2, _2, Int<N / 8>>>,
                         Stride<Stride<_128, _1, _16>, Stride<_64, _8, _512>>>;
};

}  // namespace cute_gemm
