#pragma once
// Tile configuration of the half-precision GEMM: every layout, tiled MMA and tiled copy the kernel
// (gemm_kernel.cuh) uses, in a header free of CUDA includes so host tests can check them
// (tests/cpp/test_gemm_maps.cpp: coverage of every TV map, bank conflicts of every shared-memory
// access).

#include "cute_gemm/composed_layout.hpp"
#include "cute_gemm/copy_atom.hpp"
#include "cute_gemm/mma_atom.hpp"

namespace cute_gemm {

constexpr int log2_of(int x) { return x <= 1 ? 0 : 1 + log2_of(x / 2); }

template <class Element_, class MmaOp, int BM, int BN, int BK, int Stages, int WarpsM, int WarpsN>
struct GemmConfig {
  using Element = Element_;
  static constexpr int kBM = BM, kBN = BN, kBK = BK, kStages = Stages;
  static constexpr int kThreads = 32 * WarpsM * WarpsN;
  static constexpr int kRepM = BM / (16 * WarpsM);  // m16 atoms per warp
  static constexpr int kRepN = BN / (8 * WarpsN);   // n8 atoms per warp
  static constexpr int kKSteps = BK / 16;
  static constexpr int kGroupM = 8;
  static_assert(kRepM >= 1 && BM % (16 * WarpsM) == 0, "BM must split into m16 atoms per warp");
  static_assert(kRepN % 2 == 0, "B is loaded two n8 atoms per ldmatrix.x4");
  static_assert(BK % 16 == 0 && BK >= 32, "BK: whole k16 steps, 64-byte rows at least");
  static_assert(Stages >= 3, "the pipeline keeps Stages - 2 tiles in flight while computing");

  // Each warp owns a contiguous (BM / WarpsM) x (BN / WarpsN) block: the permutations map the
  // natural interleaved order (atom, warp, repeat) to (atom, repeat, warp).
  using Mma = TiledMMA<MMA_Atom<MmaOp>, WarpsM, WarpsN,
                       Layout<Shape<_16, Int<WarpsM>, Int<kRepM>>, Stride<_1, Int<16 * kRepM>, _16>>,
                       Layout<Shape<_8, Int<WarpsN>, Int<kRepN>>, Stride<_1, Int<8 * kRepN>, _8>>,
                       Layout<Int<BK>>>;
  using CopyA = TiledCopyA<LdsmA_x4, Mma>;
  using CopyB = TiledCopyB<LdsmB_x4, Mma>;
  using CopyC = TiledCopyC<R2S_CPairs, Mma>;  // accumulators -> the epilogue buffer

  // global -> shared: BK / 8 threads per row, 16 bytes each.
  static constexpr int kChunks = BK / 8;
  using G2S = TiledCopy<CpAsync16, Layout<Shape<Int<kThreads / kChunks>, Int<kChunks>>,
                                          Stride<Int<kChunks>, _1>>,
                        Layout<Shape<_1, _8>>>;
  static_assert(BM % G2S::kTileR == 0 && BN % G2S::kTileR == 0, "G2S tile must divide BM, BN");

  // Shared operand buffers (rows, BK, stages), K contiguous. The stage stride (a multiple of
  // 512 elements) is above the swizzle's bits, so every stage is swizzled alike.
  using SmemA = decltype(composition(
      Swizzle<3, 3, 3>{}, make_layout(make_shape(Int<BM>{}, Int<BK>{}, Int<Stages>{}),
                                      make_stride(Int<BK>{}, _1{}, Int<BM * BK>{}))));
  using SmemB = decltype(composition(
      Swizzle<3, 3, 3>{}, make_layout(make_shape(Int<BN>{}, Int<BK>{}, Int<Stages>{}),
                                      make_stride(Int<BK>{}, _1{}, Int<BN * BK>{}))));

  // Epilogue buffer (BM, BN), N contiguous; the row index's low 3 bits are XORed into the 16-byte
  // unit index, so the 8 rows of an accumulator register land in 8 bank groups.
  using SmemC = decltype(composition(
      Swizzle<3, 3, log2_of(BN) - 3>{},
      make_layout(make_shape(Int<BM>{}, Int<BN>{}), make_stride(Int<BN>{}, _1{}))));
  // shared -> global: BN / 8 threads per row, 16 bytes each.
  using S2G = TiledCopy<CpAsync16, Layout<Shape<Int<kThreads * 8 / BN>, Int<BN / 8>>,
                                          Stride<Int<BN / 8>, _1>>,
                        Layout<Shape<_1, _8>>>;

  static constexpr int kSmemOperandBytes = Stages * (BM + BN) * BK * 2;
  static constexpr int kSmemBytes = kSmemOperandBytes > BM * BN * 2 ? kSmemOperandBytes : BM * BN * 2;
};

}  // namespace cute_gemm
