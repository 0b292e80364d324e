#pragma once
// Traits of the sm_80 tensor-core atoms: which (thread, value) of the warp holds which element.
// Layouts map (T32, V) to the column-major index of the atom's operand tile:
//   A: (M16, K16) index m + 16 k      B: (N8, K16) index n + 8 k      C: (M16, N8) index m + 16 n
// From the PTX ISA's fragment figures for mma.m16n8k16 (lane = 4 * groupID + threadID_in_group):
//   A  a0..a7: row groupID + 8 * (i / 2 % 2), col 2 * threadID_in_group + i % 2 + 8 * (i / 4)
//   B  b0..b3: row(k) 2 * threadID_in_group + i % 2 + 8 * (i / 2), col(n) groupID
//   C  c0..c3: row groupID + 8 * (i / 2), col 2 * threadID_in_group + i % 2
// The value order is the register order, so a fragment's values feed the instruction directly.

#include "cute_gemm/arch/mma_sm80.hpp"
#include "cute_gemm/layout.hpp"

namespace cute_gemm {

template <class Op>
struct MMA_Traits;

struct MMA_Traits_16x8x16_Layouts {
  using Shape_MNK = Shape<_16, _8, _16>;
  using ThrID = Layout<_32>;
  // (T32, V8) -> (M16, K16)
  using ALayout = Layout<Shape<Shape<_4, _8>, Shape<_2, _2, _2>>,
                         Stride<Stride<_32, _1>, Stride<_16, _8, _128>>>;
  // (T32, V4) -> (N8, K16)
  using BLayout = Layout<Shape<Shape<_4, _8>, Shape<_2, _2>>, Stride<Stride<_16, _1>, Stride<_8, _64>>>;
  // (T32, V4) -> (M16, N8)
  using CLayout = Layout<Shape<Shape<_4, _8>, Shape<_2, _2>>, Stride<Stride<_32, _1>, Stride<_16, _8>>>;
};

// Both element types share the fragment layouts; the element type is the kernel's parameter.
template <>
struct MMA_Traits<SM80_16x8x16_F32F16F16F32_TN> : MMA_Traits_16x8x16_Layouts {};
template <>
struct MMA_Traits<SM80_16x8x16_F32BF16BF16F32_TN> : MMA_Traits_16x8x16_Layouts {};

}  // namespace cute_gemm
