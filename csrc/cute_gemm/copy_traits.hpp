#pragma once
// Traits of copy instructions: how many threads cooperate in one, and which (thread, value)
// each source and destination element belongs to. Layouts map (T, V) to the column-major index
// of the instruction's own tile; the reference layout is the one a tiled copy is expressed in.
//
//   ldmatrix.x4 (A, m16 x k16):  lane l addresses row l % 16, k 8 * (l / 16); registers receive
//                                the mma.m16n8k16 A fragment.
//   ldmatrix.x4 (B, n16 x k16):  lane l addresses row n = l % 8 + 8 * (l / 16),
//                                k 8 * (l / 8 % 2); registers receive the B fragments of two
//                                n8 atoms (n 0-7 then n 8-15).
//   cp.async 16 B:               one thread, 8 contiguous 16-bit values; source = destination.
//   accumulator pairs (R2S):     the mma C fragment stored as two 4-byte words per lane.

#include "cute_gemm/arch/copy_sm75.hpp"
#include "cute_gemm/arch/copy_sm80.hpp"
#include "cute_gemm/layout.hpp"

namespace cute_gemm {

// ldmatrix.x4 feeding one m16n8k16 A fragment per instruction. (T32, V8) -> (M16, K16).
struct LdsmA_x4 {
  using Op = SM75_U32x4_LDSM_N;
  static constexpr int kThreads = 32;
  static constexpr int kValues = 8;
  using SrcLayout = Layout<Shape<Shape<_16, _2>, _8>, Stride<Stride<_1, _128>, _16>>;
  using RefLayout = Layout<Shape<Shape<_4, _8>, Shape<_2, _2, _2>>,
                           Stride<Stride<_32, _1>, Stride<_16, _8, _128>>>;
};

// ldmatrix.x4 feeding two adjacent m16n8k16 B fragments per instruction. (T32, V8) -> (N16, K16).
struct LdsmB_x4 {
  using Op = SM75_U32x4_LDSM_N;
  static constexpr int kThreads = 32;
  static constexpr int kValues = 8;
  using SrcLayout = Layout<Shape<Shape<_8, _2, _2>, _8>, Stride<Stride<_1, _128, _8>, _16>>;
  using RefLayout = Layout<Shape<Shape<_4, _8>, Shape<_2, _2, _2>>,
                           Stride<Stride<_32, _1>, Stride<_16, _128, _8>>>;
};

// Accumulators -> shared memory (an epilogue's R2S step): one m16n8 C fragment per instruction,
// each lane storing its two pairs of adjacent 16-bit values (columns 2t, 2t+1 of rows g and g+8)
// as two 4-byte words. Source and reference are the mma.m16n8k16 C layout itself.
// (T32, V4) -> (M16, N8).
struct R2S_CPairs {
  struct Op {
    // v: the lane's 4 values (already converted), d0/d1: the two pairs' destinations.
    template <class T>
    CG_HOST_DEVICE static void copy(T const* v, T* d0, T* d1) {
      *reinterpret_cast<uint32_t*>(d0) = *reinterpret_cast<uint32_t const*>(v);
      *reinterpret_cast<uint32_t*>(d1) = *reinterpret_cast<uint32_t const*>(v + 2);
    }
  };
  static constexpr int kThreads = 32;
  static constexpr int kValues = 4;
  using SrcLayout = Layout<Shape<Shape<_4, _8>, Shape<_2, _2>>, Stride<Stride<_32, _1>, Stride<_16, _8>>>;
  using RefLayout = SrcLayout;
};

// One thread moves 16 contiguous bytes (8 16-bit values) global -> shared, zero-filling when the
// predicate is false.
struct CpAsync16 {
  using Op = SM80_CP_ASYNC_CACHEGLOBAL_ZFILL;
  static constexpr int kThreads = 1;
  static constexpr int kValues = 8;
};

// As CpAsync16, with an L2 eviction policy (evict-first for operands read exactly once).
struct CpAsync16Policy {
  using Op = SM80_CP_ASYNC_CACHEGLOBAL_ZFILL_POLICY;
  static constexpr int kThreads = 1;
  static constexpr int kValues = 8;
};

}  // namespace cute_gemm
