#pragma once
// ldmatrix.x4 along K: the mma.m16n8k16 B fragments of one n8 atom for two consecutive k16
// steps in one instruction (copy_traits.hpp's LdsmB_x4 instead covers two n8 atoms of one step).
// For an operand with only 8 rows of B (8 tokens as the mma's N), each instruction then feeds two
// k16 steps.
//   lane l addresses row n = l % 8, k 8 * (l / 8) (matrix q = l / 8 holds k 8q .. 8q + 7);
//   register q receives matrix q: lane 4 g + t gets row g, k 8 q + 2 t and + 1, which are b0, b1
//   of the first k16 step (q = 0, 1) and b0, b1 of the second (q = 2, 3).
// Layouts map (T32, V8) to the column-major index n + 8 k of the (N8, K32) tile.

#include "cute_gemm/arch/copy_sm75.hpp"
#include "cute_gemm/layout.hpp"

namespace cute_gemm {

struct LdsmB_x4_K32 {
  using Op = SM75_U32x4_LDSM_N;
  static constexpr int kThreads = 32;
  static constexpr int kValues = 8;
  // (T32, V8) -> (N8, K32): what each lane addresses (one 16-byte row, 8 consecutive k).
  using SrcLayout = Layout<Shape<Shape<_8, _4>, _8>, Stride<Stride<_1, _64>, _8>>;
  // (T32, V8) -> (N8, K32): what each lane receives, the m16n8k16 B layout of the two steps.
  using RefLayout = Layout<Shape<Shape<_4, _8>, Shape<_2, _2, _2>>,
                           Stride<Stride<_16, _1>, Stride<_8, _64, _128>>>;
};

}  // namespace cute_gemm
