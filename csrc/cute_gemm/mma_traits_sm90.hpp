#pragma once
// Layouts attached to the sm_90a wgmma instructions (arch/mma_sm90.hpp), as layout-algebra types
// so that kernels address shared memory through them and the CPU tests check them.

#include "cute_gemm/composed_layout.hpp"
#include "cute_gemm/layout.hpp"
#include "cute_gemm/swizzle.hpp"

namespace cute_gemm {

// A (Rows, K) tile of 16-bit elements, K-major, as a wgmma descriptor with the 128-byte swizzle
// reads it (make_wgmma_desc_sw128): K in 64-element (128-byte) atoms, each atom Rows rows of 128
// bytes, atoms Rows * 64 elements apart; within a row the 16-byte unit of K is XORed with the
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

}  // namespace cute_gemm
