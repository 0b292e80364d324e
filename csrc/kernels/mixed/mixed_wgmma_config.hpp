#pragma once
// Configuration of the Hopper (sm_90a) wgmma kernels of the mixed-input GEMM, the cp.async kernel
// (mixed_wgmma_kernel.cuh) and the warp-specialized one (mixed_wgmma_ws_kernel.cuh): tile sizes,
// pipeline depth and resources, and every shared-memory layout and thread-value map the kernels
// index with, in a header free of CUDA includes. The planner (mixed_plan.cpp) reads the resources;
// tests/cpp/test_mixed_wgmma_layouts.cpp checks the layouts of every instance.
//
// Axes: out[M, N] = A[M, K] @ W[N, K]^T. The kernels compute out^T = W @ A^T with the weights as
// wgmma's A operand (wgmma's M: 64 columns of N per instruction, dequantized in registers) and the
// activations as its B (wgmma's N: the kTileM rows of A of the CTA, from shared memory).
//
// CTA: kWarpGroups consumer warpgroups (4 warps each), each computing kNTiles n64 tiles (64
// columns of N, one wgmma's M each), so kTileN = 64 * kNTiles * kWarpGroups columns; with
// kProducer one more warpgroup issues the copies (TMA). Consumer thread T = 128 wg + 32 w + 4 g + t
// is warpgroup wg, warp w, lane 4 g + t (g = lane / 4, t = lane % 4, as in the mma fragments).

#include "cute_gemm/mma_traits_sm90.hpp"
#include "cute_gemm/tv_coords.hpp"
#include "kernels/mixed/weight_format.hpp"

namespace cute_gemm {
namespace mixed {

template <class Element_, int Bits, int TileM, int NTiles, bool ExactScales, int WarpGroups,
          bool Producer = false, bool CpAsync = false>
struct MixedWgmmaConfig {
  using Element = Element_;  // the activation type (uint16_t stands in for it on the host)
  static_assert(sizeof(Element) == 2, "16-bit activations");
  static constexpr int kBits = Bits;
  static constexpr int kBlockK = block_k(Bits);  // k per packed block: 128 (INT4) or 64 (INT8)
  static constexpr int kKSteps = kBlockK / 16;
  static constexpr int kStepsPerWord = Bits == 4 ? 2 : 1;  // k16 steps one packed word feeds
  static constexpr int kKPerWord = 16 * kStepsPerWord;

  // ---- the CTA
  static constexpr int kWarpGroups = WarpGroups;  // consumers
  static_assert(WarpGroups == 1 || WarpGroups == 2, "one or two consumer warpgroups per CTA");
  static constexpr bool kProducer = Producer;
  // How the stages are filled: by TMA (a few threads issue each stage's boxes, see the TMA boxes
  // below) in the warp-specialized kernel and in the cp.async kernel's INT4 tiles, whose loops
  // are bound by their warps' instruction chains (the ~70 copy and bookkeeping instructions per
  // k block and warp that cp.async takes are gone: 1-9% faster on an H200 at 16 and 32 rows,
  // NOTES.md session 66; 64 rows with one activation box fitted to M, kFittedABox, session 83);
  // by cp.async from every thread in the others (INT8's 32-row tiles, whose k blocks are half as
  // long, were 3% slower to 12% faster with TMA), and in the CpAsync form of INT4's 64-row tile:
  // cp.async copies only the rows of A inside M, so at M = 33-40 its copies cost half of M = 64's
  // and it ran 1-6% faster than TMA in long unsplit k loops (the planner's kCpAsyncMaxRows).
  static_assert(!CpAsync || (!Producer && Bits == 4 && TileM == 64),
                "a cp.async form of INT4's 64-row tile only");
  static constexpr bool kTmaLoads = Producer || (!CpAsync && TileM <= 64 && Bits == 4);
  // Split-K sums that meet in a thread block cluster (see below) in the 16-row tile in 64
  // columns (4 CTAs per SM) only: faster than the reduce kernel on an H200 (bf16 M = 16, us: o
  // 4096x4096 in 8 splits 5.56 against 6.09, down 14336x4096 12.27 against 12.72, 8192x8192 in 4
  // splits 13.64 against 14.36); tiles of 2 CTAs per SM were 40-75% slower in clusters (M = 64 o
  // in 8 splits 17.95 against 10.79, M = 32 down 25.22 against 14.48; NOTES.md session 68).
  static constexpr bool kClusterSums =
      !Producer && WarpGroups == 1 && NTiles == 1 && TileM <= 16;
  static_assert(!Producer || !ExactScales || Bits == 8,
                "the warp-specialized kernel's exact scales are INT8's, one group over K");
  static constexpr int kConsumerThreads = 128 * WarpGroups;
  static constexpr int kThreads = kConsumerThreads + (Producer ? 128 : 0);
  static constexpr int kNTiles = NTiles;                   // n64 tiles per warpgroup
  static constexpr int kTileN = 64 * NTiles * WarpGroups;  // columns of N per CTA (wgmma's M)
  static constexpr int kTileM = TileM;                     // rows of A per CTA (wgmma's N)
  static_assert(TileM % 8 == 0 && TileM >= 8 && TileM <= 256, "wgmma's N is 8 .. 256 in 8s");
  static constexpr bool kExactScales = ExactScales;
  // Exact scales, in the 16- and 32-row tiles: where the groups are whole k blocks
  // (whole_block_groups), block i is dequantized into one of two register sets while block
  // i - 1's wgmmas run, and only then are block i - 1's sums scaled into the accumulators and
  // block i's wgmmas issued, so the tensor cores wait for a scaling, not for a dequantization
  // (the kernel's per_block loop). Finer groups take turns per group (per_group). The sums of a
  // block cost kAccRegs registers per n64 tile.
  // In the warp-specialized INT8 tiles, for one group over all of K (per-channel scales) only:
  // the accumulators sum a (q - z) over the whole K and are scaled once, after the loop, so a
  // word's dequantization drops its two multiplications (4 instructions instead of 6 in fp16).
  static_assert(!ExactScales || TileM <= 32 || Producer,
                "exact scales in the 16- and 32-row tiles and the warp-specialized INT8 tiles");
  static constexpr int kBlocksPerCta = kTileN / kBlockN;  // n8 blocks of the packed weights
  static constexpr int kBlocksPerWarp = 2 * NTiles;
  static constexpr int kAccRegs = TileM / 2;  // f32 accumulators per thread per n64 tile
  // Scale (and zero) rows per stage: one per 32 k of the block (the smallest group), repeated
  // when a group is longer, so a word's row is a constant offset (k16 step j reads row j / 2).
  static constexpr int kScaleRows = kBlockK / 32;

  // ---- shared memory, from a base the kernels round up to 1024 bytes (1 KB of kSmemBytes): the
  // activation tiles of all stages (each a multiple of 1024 bytes, so every 128-byte swizzle atom
  // starts on a 1024-byte boundary), then per stage the weights and the scales (and zeros), then
  // the mbarriers of the TMA-filled stages.
  // Activation tile of one stage, in elements: (kTileM, kBlockK) K-major with the 128-byte
  // swizzle, as the wgmma descriptor reads it (WgmmaDesc) and the TMA writes it.
  // (M, K) -> element
  using SmemA = Sw128KMajor<TileM, kBlockK>;
  // Weights of one stage, in 16-byte units: the n8 blocks as they lie in global memory
  // (weight_format.hpp), [blocks][32 lanes][16 B]; each lane reads back the unit it copied.
  // (lane, n8 block) -> 16-byte unit
  using SmemW = Layout<Shape<Int<kLanes>, Int<kBlocksPerCta>>>;
  // Scales and zeros of one stage, in elements: [scale | zero][kScaleRows][kTileN]; row r holds
  // the group of k = 32 r of the block.
  // (row, N, scale | zero) -> element
  using SmemScales = Layout<Shape<Int<kScaleRows>, Int<kTileN>, _2>,
                            Stride<Int<kTileN>, _1, Int<kScaleRows * kTileN>>>;
  static constexpr int kAStageBytes = decltype(cosize(SmemA{}))::value * 2;
  static_assert(kAStageBytes % 1024 == 0, "stages must keep the swizzle atoms 1024-byte aligned");
  static constexpr int kWeightBytes = decltype(cosize(SmemW{}))::value * 16;
  static constexpr int kScaleElems = kScaleRows * kTileN;  // the scales' part (the zeros follow)
  static constexpr int kStageBytes = kWeightBytes + decltype(cosize(SmemScales{}))::value * 2;

  // Stages: the most of this tile that fit in sm_90's 227 KB of dynamic shared memory per CTA.
  static constexpr int kMaxSmemBytes = 227 * 1024;
  static constexpr int kMaxStages = 5;
  static constexpr int kStagesThatFit =
      (kMaxSmemBytes - 1024 - (Producer ? 2 * 8 * kMaxStages : 0)) / (kAStageBytes + kStageBytes);
  // Depth: kLoadAhead k blocks are in flight while one is computed. The wgmmas of block i - 1
  // still run while block i is dequantized (rounded weights, scales per block), so the stage of
  // block i - 2 is refilled, S - 2 ahead; M tiles of 128 rows or more (one CTA per SM) take up
  // to 5 stages (256-row INT4 tiles: 3 fit, 74 KB each).
  static constexpr int kStages =
      TileM >= 128 ? (kStagesThatFit < kMaxStages ? kStagesThatFit : kMaxStages) : 4;
  static_assert(kStages >= 3, "too few stages fit in shared memory");
  static constexpr int kLoadAhead = kStages - 2;
  // The warp-specialized kernel's consumers free a stage kReleaseLag k blocks after its use: 2
  // keeps the next block's wgmmas queued behind the previous ones, 1 (waiting for the previous
  // block's wgmmas before issuing) lets the producer run S - 1 stages ahead instead of S - 2,
  // which a 3-stage tile needs (INT4 from 192 rows; 1-3% faster there at M = 256-4096 on an H100,
  // NOTES session 28).
  static constexpr int kReleaseLag = kStages <= 3 ? 1 : 2;
  static_assert(!Producer || kStages - kReleaseLag >= 2, "the producer fills two stages ahead");
  // Byte offsets from the aligned base: activation stage s at s * kAStageBytes, weight stage s at
  // kWeightsOffset + s * kStageBytes (its scales kWeightBytes further), then the "full" mbarrier
  // of each stage (TMA loads) and the "empty" one (warp-specialized kernel), or the cp.async
  // kernel's cluster sums barrier (ClusterSums below).
  static constexpr int kWeightsOffset = kStages * kAStageBytes;
  static constexpr int kBarrierOffset = kWeightsOffset + kStages * kStageBytes;
  static constexpr int kClusterBarrierOffset = kBarrierOffset + (kTmaLoads ? 8 * kStages : 0);
  static constexpr int kBarrierBytes =
      Producer ? 2 * 8 * kStages : (kTmaLoads ? 8 * kStages : 0) + (kClusterSums ? 8 : 0);
  static constexpr int kSmemBytes = 1024 + kBarrierOffset + kBarrierBytes;

  // ---- split-K sums that meet in a thread block cluster (the cp.async kernel launched in
  // clusters of its splits, MixedPlan::reduce_in_cluster): each CTA's accumulators are units, one
  // value (gated tiles: an output's gate and up sums, values (e, 0, i) and (e, 1, i) of AccTV),
  // and the CTA that owns a unit adds the splits' values in split order and stores the output. A
  // thread's unit u belongs to cluster rank u % splits, slot u / splits. Each thread pushes its
  // units to their owners, where they land at (value, thread, slot, split) -> float:
  // cluster_sums(splits), split the sender's, over the stages from the aligned base (free once
  // every CTA of the cluster is done with its loop).
  static constexpr int kMaxClusterSplits = 8;  // the portable cluster size
  static constexpr int cluster_unit_values(bool gated) { return gated ? 2 : 1; }
  static constexpr int cluster_units(bool gated) {
    return NTiles * kAccRegs / cluster_unit_values(gated);
  }
  // Value k of unit u is acc[cluster_tile(u)][cluster_value(u, k)] (AccTV's (v, r)): ungated,
  // the values of each n64 tile in order; gated, unit q of a tile is its q-th gate sum (h = 0:
  // v % 4 of 0, 1) and, k = 1, that output's up sum (h = 1, two values further).
  static constexpr int cluster_tile(int u, bool gated) {
    return u / (cluster_units(gated) / NTiles);
  }
  static constexpr int cluster_value(int u, int k, bool gated) {
    const int q = u % (cluster_units(gated) / NTiles);
    return gated ? (q / 2) * 4 + q % 2 + 2 * k : q;
  }
  static constexpr int cluster_slots(int splits, bool gated) {
    return (cluster_units(gated) + splits - 1) / splits;
  }
  template <bool Gated>
  static constexpr auto cluster_sums(int splits) {
    return make_layout(make_shape(Int<cluster_unit_values(Gated)>{}, Int<kConsumerThreads>{},
                                  cluster_slots(splits, Gated), splits));
  }
  static constexpr bool cluster_sums_fit() {
    for (int splits = 2; splits <= kMaxClusterSplits; ++splits) {
      if (int(cosize(cluster_sums<false>(splits))) * 4 > kBarrierOffset ||
          int(cosize(cluster_sums<true>(splits))) * 4 > kBarrierOffset)
        return false;
    }
    return true;
  }
  static_assert(!kClusterSums || cluster_sums_fit(), "the cluster's sums fit over the stages");

  // ---- stream-K (MixedPlan::stream_k_ctas, stream_k.hpp): the 16-row exact tile in 128 columns,
  // TMA-filled, groups of whole k blocks, where its tiles leave some SMs one CTA fewer than
  // others (160 tiles on 132 SMs: 23.8 us unsplit, 19.2 over 264 CTAs; NOTES.md session 70). A
  // CTA hands a tile's partial sums over as kStreamKPartialFloats floats.
  // The warp-specialized tiles (M >= 128) run the tiles past their grid's full waves as
  // stream-K work (mixed_wgmma_ws_kernel.cuh's StreamK form): 448 256-row tiles on 132 SMs run as
  // 3 waves and 0.39 of one instead of 4 (2.5% faster on an H200, NOTES.md session 78).
  static constexpr bool kStreamK =
      Producer || (WarpGroups == 1 && NTiles == 2 && TileM == 16 && ExactScales && kTmaLoads);
  static constexpr int kStreamKPartialFloats = kConsumerThreads * NTiles * kAccRegs;

  // The warp-specialized kernel's output tiles: each n64 tile of the CTA's output, (kTileM rows,
  // 64 columns of N) row-major with the 128-byte swizzle, the box in which the output's TMA map
  // stores it; tile b = kNTiles wg + r at b * kOutTileBytes from the aligned base, over the
  // stages (free once every wgmma is done). Consecutive rows' 16-byte units are XOR-swizzled, so
  // a warp's stores of 4 rows x 8 columns hit 4 different bank groups.
  // (M, N) -> element
  using SmemOut = Sw128KMajor<TileM, 64>;
  static constexpr int kOutTileBytes = TileM * 64 * 2;
  static_assert(!Producer || NTiles * WarpGroups * kOutTileBytes <= kBarrierOffset,
                "the output tiles fit over the stages");

  // TMA boxes (kTmaLoads), read off the layouts: the activation tile as
  // (kABoxRows rows, 128-byte line of K) boxes, kARowBoxes per line; the weights of a stage as
  // one (n8 blocks, 32 lanes x 4 words) box, the scales (zeros) as one (1 row, kTileN) box per
  // scale row. Tiles of more than 128 rows load 64-row boxes (32-row for 160 rows) and skip those
  // wholly past M: TMA's zero fill of rows past M is slower than loading rows of A (8192² on the
  // same 128 CTAs of 256 rows: M = 288 took 131 us with one 256-row box, M = 512 95; 92 at
  // M = 288 with 64-row boxes; NOTES session 23). The rows a skipped box leaves stale reach only
  // accumulators of rows past M, never stored. Tiles of up to 128 rows keep one box: there a
  // second TMA issue per line costs more than the zero fill it saves (the cp.async kernel's
  // 64-row tile in four 16-row boxes: 2-11% slower at M = 33-64 than in one, session 83).
  static constexpr int kABoxRows = TileM <= 128 ? TileM : (TileM % 64 == 0 ? 64 : 32);
  static constexpr int kARowBoxes = TileM / kABoxRows;
  static_assert(TileM % kABoxRows == 0, "whole row boxes");
  // The cp.async kernel's 64-row tile runs M = 33-64 in one M tile, where a 64-row box would
  // zero-fill up to 31 rows (M = 33 2-12% slower than cp.async on an H200): its box is fitted to
  // M, a_box_rows(M) rows (M rounded up to 8; rows past it stay stale, as those of a skipped
  // box). The host encodes the map's box and the kernel counts the stage's bytes with the same
  // function. Against cp.async (H200, NOTES.md session 83): M = 49-64 2-7.5% faster; M = 33-40
  // 2-8% faster in split grids, up to 6% slower in long unsplit loops (bf16 4096x28672,
  // 28672x8192), where a box of exactly M rows was no better.
  static constexpr bool kFittedABox = kTmaLoads && !Producer && TileM == 64;
  static constexpr int a_box_rows(int m) {
    return kFittedABox && m < TileM ? (m + 7) / 8 * 8 : kABoxRows;
  }
  static constexpr int kABoxK = decltype(size<1, 0>(SmemA{}))::value;
  static constexpr int kABoxes = decltype(size<1, 1>(SmemA{}))::value;
  static constexpr int kWBoxBlocks = decltype(size<1>(SmemW{}))::value;
  static constexpr int kWBoxWords = decltype(size<0>(SmemW{}))::value * 16 / 4;
  static constexpr int kScaleBoxCols = decltype(size<1>(SmemScales{}))::value;
  // The bytes one TMA-filled stage brings, for its "full" mbarrier: `row_boxes` activation row
  // boxes of `box_rows` rows per line of K, the weights, and `scale_rows` scale rows (as many
  // zero rows when asymmetric); boxes past the tensors' edges count whole.
  static constexpr uint32_t tma_stage_bytes(int row_boxes, int scale_rows, bool asymmetric,
                                            int box_rows = kABoxRows) {
    return uint32_t(row_boxes * kABoxes * box_rows * kABoxK * 2 + kWeightBytes +
                    scale_rows * kScaleBoxCols * 2 * (asymmetric ? 2 : 1));
  }

  // ---- thread-value maps. Consumer threads T = ((t, g), w, wg) : 128 wg + 32 w + 4 g + t.
  using ConsumerThreads = Shape<Shape<_4, _8>, _4, Int<WarpGroups>>;
  using NTiles_ = Int<NTiles>;
  using TileM_ = Int<TileM>;
  // The n8 blocks a lane dequantizes: warp w of warpgroup wg takes blocks 2 w + h (h = 0, 1) of
  // each of its n64 tiles kNTiles wg + r; every lane of the warp reads its own 16 bytes of them
  // (SmemW), the columns and k of weight_format.hpp.
  // (T, V(h, r)) -> n8 block
  using WeightBlockTV =
      Layout<Shape<ConsumerThreads, Shape<_2, NTiles_>>,
             Stride<Stride<Stride<_0, _0>, _2, Int<8 * NTiles>>, Stride<_1, _8>>>;
  // The columns of the packed blocks: lane 4 g + t holds column g of each (weight_format.hpp).
  // (g, n8 block) -> N
  using BlockColumns = Layout<Shape<_8, Int<kBlocksPerCta>>>;
  // Where a TMA-filled gated tile's logical n8 blocks lie in a stage's SmemW (and their columns
  // in SmemScales): TMA loads the gate blocks, then the up blocks (mixed_epilogue.cuh's
  // weight_block) as one box of the halves, so logical block 2 j (gate block j) lies at j and
  // block 2 j + 1 (up block j) at kBlocksPerCta / 2 + j. The other tiles lie in order
  // (WeightBlockTV).
  // (T, V(h, r)) -> n8 block of SmemW
  using GatedWeightSlotTV =
      Layout<Shape<ConsumerThreads, Shape<_2, NTiles_>>,
             Stride<Stride<Stride<_0, _0>, _1, Int<4 * NTiles>>,
                    Stride<Int<kBlocksPerCta / 2>, _4>>>;
  // The column of N (within the CTA tile) of a lane's weights, BlockColumns(g, WeightBlockTV(T, V))
  // (as the kernels compute it). Blocks 2 w and 2 w + 1 of an n64 tile are wgmma's rows g and g + 8
  // of warp w's 16 rows of the A fragment (Wgmma64xNx16Layouts::ALayout): the mma.sync B fragments
  // of the packed format are exactly that fragment.
  // (T, V(h, r)) -> N
  using WeightColTV =
      Layout<Shape<ConsumerThreads, Shape<_2, NTiles_>>,
             Stride<Stride<Stride<_0, _1>, _16, Int<64 * NTiles>>, Stride<_8, _64>>>;
  // The accumulators acc[r][v]: the wgmma C fragment (Wgmma64xNx16Layouts<kTileM>::CLayout) of n64
  // tile kNTiles wg + r, transposed onto out (wgmma's M is N, its N is M): value v = (e, h, i) is
  // row 2 t + e + 8 i of M, column 16 w + g + 8 h of the n64 tile.
  // (T, V((e, h, i), r)) -> (M kTileM, N kTileN)
  using AccTV =
      Layout<Shape<ConsumerThreads, Shape<Shape<_2, _2, Int<TileM / 8>>, NTiles_>>,
             Stride<Stride<Stride<_2, TileM_>, Int<16 * TileM>, Int<64 * NTiles * TileM>>,
                    Stride<Stride<_1, Int<8 * TileM>, _8>, Int<64 * TileM>>>>;
  using AccRowTV = decltype(tile_row_layout<TileM>(AccTV{}));  // (T, V) -> M
  using AccColTV = decltype(tile_col_layout<TileM>(AccTV{}));  // (T, V) -> N

  // Gated GEMMs (SiLU(gate) * up) gate in registers in the tiles with exact scales (the
  // kernel's Gated form, compiled apart); the other tiles gate in split_k_reduce_kernel. Logical
  // n8 blocks 2j and 2j + 1 are then the weight's gate block j and up block j (mixed_epilogue.cuh's
  // weight_block), so a lane's values (e, 0, i) and (e, 1, i) of an n64 tile must be the two sums
  // of one output: the same row, the up column kBlockN further, in a gate (even) block. Checked
  // on warp 0's lanes: warp w's columns are warp 0's plus 16 w (AccTV), its rows the same.
  static constexpr bool kGatesInRegisters = ExactScales && !Producer;
  static constexpr bool gate_up_pairs_in_lane() {
    for (int x = 0; x < 32; ++x)
      for (int r = 0; r < NTiles; ++r)
        for (int v = 0; v < kAccRegs; v += (v % 4 == 1 ? 3 : 1)) {  // v with h = (v / 2) % 2 = 0
          const auto gate = make_coord(v, r), up = make_coord(v + 2, r);
          if (int(AccRowTV{}(x, up)) != int(AccRowTV{}(x, gate)) ||
              int(AccColTV{}(x, up)) != int(AccColTV{}(x, gate)) + kBlockN ||
              int(AccColTV{}(x, gate)) % (2 * kBlockN) >= kBlockN)
            return false;
        }
    return true;
  }
  static_assert(!kGatesInRegisters || gate_up_pairs_in_lane(),
                "a lane must hold both sums of its gated outputs");
  // GatedWeightSlotTV puts each logical block where the box of the halves lands it.
  static constexpr bool gated_slots_match() {
    for (int x = 0; x < kConsumerThreads; ++x)
      for (int v = 0; v < 2 * NTiles; ++v) {
        const int logical = int(WeightBlockTV{}(x, v));
        if (int(GatedWeightSlotTV{}(x, v)) != (logical % 2) * (kBlocksPerCta / 2) + logical / 2)
          return false;
      }
    return true;
  }
  static_assert(!kGatesInRegisters || !kTmaLoads ||
                    (kBlocksPerCta % 2 == 0 && gated_slots_match()),
                "TMA-filled gated tiles: gate blocks before up blocks");

  // The cp.async kernel's activation copy: 16-byte chunks (8 elements of K) of the (kTileM,
  // kBlockK) tile; thread T copies chunk T % kAChunksPerRow of rows T / kAChunksPerRow +
  // kARowStep j. Row steps are multiples of 8 rows, so they keep the swizzle phase: one smem
  // offset per thread plus a constant per step.
  static constexpr int kAChunksPerRow = kBlockK / 8;
  static constexpr int kARowStep = kThreads / kAChunksPerRow;
  static constexpr int kAPerThread = (TileM * kAChunksPerRow + kThreads - 1) / kThreads;
  // (T, V(8, j)) -> (M kTileM, K kBlockK)
  using ACopyTV =
      Layout<Shape<Shape<Int<kAChunksPerRow>, Int<kARowStep>>, Shape<_8, Int<kAPerThread>>>,
             Stride<Stride<Int<8 * TileM>, _1>, Stride<TileM_, Int<kARowStep>>>>;
  // The cp.async kernel's scale (and zero) copy: thread T < kScaleRows * kScaleChunks copies the 8
  // columns 8 (T % kScaleChunks) of scale row T / kScaleChunks.
  static constexpr int kScaleChunks = kTileN / 8;
  // (T, V8) -> (row kScaleRows, N kTileN)
  using ScaleCopyTV = Layout<Shape<Shape<Int<kScaleChunks>, Int<kScaleRows>>, _8>,
                             Stride<Stride<Int<8 * kScaleRows>, _1>, Int<kScaleRows>>>;
  // Where those values land: SmemScales' scales (the zeros kScaleElems further) o ScaleCopyTV,
  // which coalesces to 8 T + v.
  // (T, V8) -> element
  using ScaleCopyDst = decltype(coalesce_by_mode(
      composition(SmemScales{}(_, _, _0{}), ScaleCopyTV{})));

  // ---- resources
  // CTAs per SM the kernel is compiled for (__launch_bounds__), which caps the registers: one
  // consumer warpgroup: 2 up to 64 rows (two register sets of a k block for the overlap), 1
  // above, 4 for one n64 tile of 16 rows (two register sets of 32: 128 registers without
  // spills); two consumer warpgroups (one n64 tile each): 2 up to 64 rows, 1 at 128 and 256 (128
  // accumulators and two register sets of 32).
  static constexpr bool kOneTile16 = WarpGroups == 1 && NTiles == 1 && TileM <= 16;
  static constexpr int kMinCtasPerSm =
      WarpGroups == 2 ? (TileM <= 64 ? 2 : 1) : (kOneTile16 ? 4 : (TileM <= 64 ? 2 : 1));
  // The most registers per thread that let kMinCtasPerSm CTAs share the 64K-register file, in 8s
  // (at most 256: ptxas's limit of 255 allocates as 256).
  static constexpr int kRegisterShare = 65536 / (kThreads * kMinCtasPerSm) / 8 * 8;
  static constexpr int kLaunchRegisters = kRegisterShare < 256 ? kRegisterShare : 256;
  // Registers per thread ptxas allocates on sm_90a, rounded up to 8 (f16 and bf16 alike within the
  // rounding), for the planner's occupancy model (test_planned_occupancy_matches_gpu holds the
  // CTAs per SM it gives against cudaOccupancy on the GPU), so update this table with ptxas -v
  // when a kernel changes. The warp-specialized kernel is compiled to its launch bound
  // (setmaxnreg moves registers between its warpgroups at run time); configurations not built
  // fall back to the bound, ptxas's upper limit.
  static constexpr int registers() {
    if (Producer) return kLaunchRegisters;
    if (ExactScales && WarpGroups == 1 && TileM == 32) return Bits == 4 ? 256 : 224;
    if (kOneTile16) return 128;
    if (!ExactScales && WarpGroups == 1 && TileM == 64 && Bits == 4) return 256;
    if (!ExactScales && WarpGroups == 1 && TileM <= 32) return Bits == 4 ? 256 : 168;
    return kLaunchRegisters;
  }
  static constexpr int kRegisters = registers();
};

}  // namespace mixed
}  // namespace cute_gemm
