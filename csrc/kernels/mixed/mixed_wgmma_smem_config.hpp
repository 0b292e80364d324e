#pragma once
// Configuration of the mixed-input GEMM kernel that dequantizes the weights into shared memory
// (mixed_wgmma_smem_kernel.cuh, sm_90a), in a header free of CUDA: the CTA, every shared-memory
// layout, the dequantizing warps' thread-value maps and the registers. The CPU test
// tests/cpp/test_mixed_wgmma_smem_layouts.cpp checks the maps against the packed format.
//
//   out[M, N] = A[M, K] @ dequant(W)[N, K]^T (+ bias), the contract of mixed_gemm_launch.hpp.
//
// The product is the dense GEMM's (gemm_wgmma_config.hpp, `Tile` below), not transposed: per
// stage a (kBM = 128 rows of A, 64 k) tile and a (kBN columns of N, 64 k) tile of the weights,
// both K-major with the 128-byte swizzle, and the consumers' wgmma m64n(kBN)k16 read both from
// shared memory. Only the weight tile comes another way: the TMA brings the packed weights and
// their scales (and zeros) of a packed k block (weight_format.hpp; 128 k for INT4, 64 for INT8)
// into a "packed" stage, and a dequantizing warpgroup turns them into the stage's weight tile.
//
// CTA, 384 threads:
//   - consumer warpgroups 0 and 1: rows 64 g .. 64 g + 63 of the tile, as in the dense kernel;
//   - the dequantizing warpgroup (threads 256 .. 383): thread 256 also issues every TMA copy;
//     warp d dequantizes the n8 blocks kBlocksPerWarp d .. of the tile, one stmatrix.x4 per
//     lane and 32 k (INT4: one packed word; INT8: two), the rounded weight (q - z) * s of the
//     dense path and the register wgmma kernels.
// Why: in the register wgmma kernels (mixed_wgmma_*kernel.cuh) the warps that issue the wgmmas
// also dequantize, so the tensor cores wait while a warp dequantizes and a warp waits for its
// wgmmas before reusing its registers. Here dequantization runs in its own warps, kStages - 1
// tiles ahead of the wgmmas, and each weight is dequantized once per CTA for 128 rows of A.
//
// Barriers (mbarriers): per tile stage "full" (the TMA's bytes of the A tile, one arrive of the
// copying thread and one per dequantizing warp once its part of the weight tile is written and
// fenced for the async proxy) and "empty" (one arrive per consumer warp); per packed stage
// "packed_full" (the TMA's bytes) and "packed_empty" (one arrive per dequantizing warp).

#include "cute_gemm/layout.hpp"
#include "kernels/gemm/gemm_wgmma_config.hpp"
#include "kernels/mixed/weight_format.hpp"

namespace cute_gemm {
namespace mixed {

template <class Element_, int Bits, int BN, int Stages, int PackedStages, int DequantGroups>
struct MixedWgmmaSmemConfig {
  using Element = Element_;
  static constexpr int kBits = Bits;
  static constexpr int kBlockK = block_k(Bits);  // k per packed block
  // The A and weight tiles, their stages, descriptors and accumulators: the dense kernel's.
  using Tile = GemmWgmmaConfig<Element, BN, Stages, 2, 1>;
  static constexpr int kBM = Tile::kBM, kBN = Tile::kBN, kBK = Tile::kBK;
  static constexpr int kTileM = kBM, kTileN = kBN;  // the planner's names
  static constexpr int kStages = Stages;
  static constexpr int kPackedStages = PackedStages;
  static constexpr int kTilesPerBlock = kBlockK / kBK;  // k tiles per packed block: 2 or 1
  static_assert(kBlockK % kBK == 0, "a packed block is whole k tiles");
  static_assert(PackedStages >= 2, "a packed block lands while another is dequantized");

  static constexpr int kConsumerThreads = Tile::kConsumerThreads;  // 256
  static constexpr int kConsumerWarps = Tile::kConsumerWarps;
  static constexpr int kDequantGroups = DequantGroups;  // dequantizing warpgroups
  static_assert(DequantGroups == 1 || DequantGroups == 2, "one or two dequantizing warpgroups");
  static constexpr int kDequantWarps = 4 * DequantGroups;
  static constexpr int kThreads = kConsumerThreads + 32 * kDequantWarps;
  static constexpr int kMinCtasPerSm = 1;

  // ---- the packed stage (one packed k block of the tile's kBN columns), from a 1024-byte
  // aligned offset: the weights [n8 blocks][32 lanes][16 B] as they lie in global memory, then
  // the scales and zeros [scale | zero][kScaleRows][kBN] (row r: the group of k = 32 r of the
  // block; groups are at least 32 long, so one row per 32 k).
  static constexpr int kBlocks = kBN / kBlockN;  // n8 blocks of the tile
  // (lane, n8 block) -> 16-byte unit
  using SmemW = Layout<Shape<Int<kLanes>, Int<kBlocks>>>;
  static constexpr int kScaleRows = kBlockK / 32;
  // (row, N, scale | zero) -> element
  using SmemScales = Layout<Shape<Int<kScaleRows>, Int<kBN>, _2>,
                            Stride<Int<kBN>, _1, Int<kScaleRows * kBN>>>;
  static constexpr int kWeightBytes = kBlocks * kLanes * 16;
  static constexpr int kScaleRowBytes = kBN * 2;
  static constexpr int kPackedBytes =
      (kWeightBytes + 2 * kScaleRows * kScaleRowBytes + 1023) / 1024 * 1024;
  // TMA boxes (encode_wgmma_maps): A as one (kBM rows, 64 k) box per tile stage, the weights as
  // one (kBlocks, 128 words) box, the scales one (1, kBN) box per row.
  static constexpr int kABoxRows = kBM, kABoxK = kBK;
  static constexpr int kScaleBoxCols = kBN;
  static constexpr int kWBoxBlocks = kBlocks;
  static constexpr int kWBoxWords = kLanes * kWordsPerLane;
  static_assert(kBlocks <= 256 && kBN <= 256, "TMA boxes are at most 256 elements a side");

  // ---- the dequantizing warps. Warp d, lane L = 4 g + t, x4 store q (0, 1: k 32 q .. 32 q + 31
  // of the k tile) of its i-th n8 block b = kBlocksPerWarp d + i. The lane's registers are the
  // mma.sync B fragments of the packed format, which are stmatrix's fragments of 8x8 matrices of
  // (8 columns of N, 8 k): register j of x4 store q is 8 k chunk 4 q + j of the k tile (INT4:
  // word 2 h + q of the block's k tile h, registers r0(2w), r1(2w), r0(2w + 1), r1(2w + 1);
  // INT8: words 2 q, 2 q + 1, registers r0, r1 of each). Lane L points at row L % 8 of matrix
  // L / 8: element (n, k) of the weight tile below.
  static constexpr int kBlocksPerWarp = kBlocks / kDequantWarps;
  static_assert(kBlocks % kDequantWarps == 0, "whole n8 blocks per dequantizing warp");
  // (L(8, 4), V(q, i), d) -> column-major index n + kBN k of the (N kBN, K64) weight tile
  using StoreRowTV =
      Layout<Shape<Shape<_8, _4>, Shape<_2, Int<kBlocksPerWarp>>, Int<kDequantWarps>>,
             Stride<Stride<_1, Int<8 * kBN>>, Stride<Int<32 * kBN>, _8>, Int<8 * kBlocksPerWarp>>>;
  // The packed words of x4 store q of k tile h: INT4 word 2 h + q, INT8 words 2 q and 2 q + 1.
  static constexpr int kWordsPerStore = Bits == 4 ? 1 : 2;
  CG_HOST_DEVICE static constexpr int first_word(int h, int q) {
    return Bits == 4 ? 2 * h + q : 2 * q;
  }
  // The scale row of x4 store q of k tile h (32 k each).
  CG_HOST_DEVICE static constexpr int scale_row(int h, int q) { return 2 * h + q; }

  // ---- shared memory: [pad to 1024][tile stages][packed stages][barriers]
  static constexpr int kPackedOffset = Stages * Tile::kStageBytes;
  static constexpr int kBarrierOffset = kPackedOffset + PackedStages * kPackedBytes;
  static constexpr int kBarrierBytes = 8 * (2 * Stages + 2 * PackedStages);
  static constexpr int kSmemBytes = 1024 + kBarrierOffset + kBarrierBytes;
  static_assert(kSmemBytes <= 227 * 1024, "fits sm_90's 227 KB per CTA");
  static constexpr int kStageABytes = Tile::kABytes;  // the TMA bytes of a tile stage

  // ---- registers: launched at what one CTA per SM gets (168 per thread of 384, 128 of 512); the
  // dequantizing warpgroups keep kDequantRegisters and the consumers take the rest (setmaxnreg).
  static constexpr int kLaunchRegisters = 65536 / kThreads / 8 * 8;
  static constexpr int kDequantRegisters = DequantGroups == 1 ? 128 : 88;
  static constexpr int kConsumerFree =
      (kThreads * kLaunchRegisters - 128 * DequantGroups * kDequantRegisters) /
      kConsumerThreads / 8 * 8;
  static constexpr int kConsumerRegisters = kConsumerFree > 240 ? 240 : kConsumerFree;
  static_assert(kConsumerRegisters >= kLaunchRegisters, "the consumers must not lose registers");
  static constexpr int kRegisters = kLaunchRegisters;  // for the planner's occupancy model
};

}  // namespace mixed
}  // namespace cute_gemm
