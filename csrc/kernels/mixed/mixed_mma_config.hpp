#pragma once
// Configuration of the mma.sync mixed-input GEMM kernel (mixed_gemm_kernel.cuh), of the split-K
// reduction (mixed_epilogue.cuh) and of the dequantize kernel (dequant_weight.cu): the resources
// the planner reads and every shared-memory layout and thread-value map the kernels index through,
// in a header free of CUDA, so that the planner (plain C++) instantiates it with Element =
// uint16_t and tests/cpp/test_mixed_mma_layouts.cpp checks the maps on the host.
//
// TV layouts map (thread, value) to the column-major index of a tile, as in tv_layout.hpp; where a
// kernel needs the row or the column itself, tile_row_layout / tile_col_layout (tv_coords.hpp)
// give it as a layout of (thread, value) of its own. The kernels evaluate them at hierarchical
// thread coordinates made of the lane's mma coordinates (t = lane % 4, g = lane / 4) and its warp:
// each value's offset folds to a constant, and the thread's part costs the few integer operations
// hand-written indices would.

#include <cstdint>
#include <type_traits>

#include "cute_gemm/composed_layout.hpp"
#include "cute_gemm/copy_atom.hpp"
#include "cute_gemm/mma_atom.hpp"
#include "cute_gemm/tv_coords.hpp"
#include "kernels/gemm/gemm_config.hpp"  // log2_of
#include "kernels/mixed/weight_format.hpp"

namespace cute_gemm {
namespace mixed {

// A layout over a tiled MMA's (T, V) = (((t, g), wm, wn), v) evaluated at one part of the
// coordinate, the others 0: the warp's (wn = w), the lane's (t = lane % 4, g = lane / 4) or a
// value's. A kernel adds the parts where its address arithmetic wants them (the warp's into a row
// pointer, the lane's and the value's per access).
template <class TV, class W>
CG_HOST_DEVICE constexpr auto mma_warp_part(W const& w) {
  return TV{}(make_coord(make_coord(make_coord(_0{}, _0{}), _0{}, w), _0{}));
}
template <class TV, class I>
CG_HOST_DEVICE constexpr auto mma_lane_part(I const& t, I const& g) {
  return TV{}(make_coord(make_coord(make_coord(t, g), _0{}, _0{}), _0{}));
}
template <class TV, class V>
CG_HOST_DEVICE constexpr auto mma_value_part(V const& v) {
  return TV{}(make_coord(make_coord(make_coord(_0{}, _0{}), _0{}, _0{}), v));
}

// ------------------------------------------------------------------------------------------------
// The mma.sync kernel: out[M, N] = A[M, K] @ dequant(W)^T on m16n8k16, for M tiles of 16 MTiles
// rows.
//
// Element: the activation type (uint16_t where only its size matters). MmaOp: its m16n8k16 mma,
// SM80_16x8x16_F32F16F16F32_TN or SM80_16x8x16_F32BF16BF16F32_TN (which also tells fp16 from bf16
// to the CUDA-free planner: the registers differ). Bits: 4 or 8. MTiles: 1, 2 or 4 m16 tiles.
// FineGroups: quantization groups shorter than a packed k block (32, 64), whose scales apply every
// 2 k16 steps instead of once per k block.
template <class Element_, class MmaOp_, int Bits, int MTiles, bool FineGroups>
struct MixedConfig {
  using Element = Element_;
  using MmaOp = MmaOp_;
  static constexpr int kBits = Bits;
  static constexpr bool kFineGroups = FineGroups;
  static_assert(Bits == 4 || Bits == 8, "INT4 or INT8 weights");
  static_assert(MTiles == 1 || MTiles == 2 || MTiles == 4, "16, 32 or 64 rows of A per CTA");
  static_assert(sizeof(Element) == 2, "16-bit activations");
  static constexpr bool kBf16 = std::is_same<MmaOp, SM80_16x8x16_F32BF16BF16F32_TN>::value;
  static_assert(kBf16 || std::is_same<MmaOp, SM80_16x8x16_F32F16F16F32_TN>::value,
                "an m16n8k16 mma of fp16 or bf16");

  // ---- CTA shape. 4 warps (128 columns) for M tiles of 16, where more CTAs per SM keep more
  // weight bytes in flight; 8 warps (256 columns) for taller M tiles, where every CTA reads its
  // rows of A again and a wider tile halves that traffic. Each warp owns kBlocksPerWarp n8 blocks,
  // so each A fragment feeds that many mma.
  static constexpr int kWarps = MTiles == 1 ? 4 : 8;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kBlocksPerWarp = 4;
  static constexpr int kBlocksPerCta = kWarps * kBlocksPerWarp;  // 16 or 32
  static constexpr int kTileN = kBlocksPerCta * kBlockN;         // 128 or 256 columns
  static constexpr int kTileM = 16 * MTiles;
  static constexpr int kBlockK = block_k(Bits);  // 128 (INT4) or 64 (INT8): one packed k block
  static constexpr int kKSteps = kBlockK / 16;
  // Pipeline depth and the CTAs per SM __launch_bounds__ asks for (its register cap). At M <= 16:
  // INT4 4 stages and 4 CTAs per SM (at most 128 registers), INT8 3 stages and 5 CTAs (at most
  // 102); taller tiles need the registers of a single CTA per SM.
  static constexpr int kStages = MTiles == 1 && Bits == 8 ? 3 : 4;
  static constexpr int kMinCtasPerSm = MTiles == 1 ? (Bits == 8 ? 5 : 4) : 1;
  static_assert(kStages >= 2, "the pipeline computes on one stage while the next ones load");
  // k slices (INT4's 16-row tile): a CTA of up to kMaxKSlices groups of kWarps warps on the same
  // columns, each a part of the CTA's k range with its own stages (kSmemBytes each), in lockstep
  // (one CTA barrier per k block); their sums meet in shared memory and k slice 0 stores them.
  // Twice the warps per column tile without a split-K workspace or a reduce kernel: the unsplit
  // 16-row tile has one warp per 32 columns, too few per SM to hide a k block's latency where N is
  // under ~40 K columns (NOTES.md, session 48). blockDim = (kThreads, k slices), a kernel of its
  // own; the register cap stays that of kMinCtasPerSm one-slice CTAs.
  static constexpr int kMaxKSlices = MTiles == 1 && Bits == 4 ? 2 : 1;
  static_assert(kMinCtasPerSm % kMaxKSlices == 0, "the register cap must not move");

  // ---- scaling. The mma accumulates a * (q - z) exactly; the group scales multiply those sums
  // once per chunk of kStepsPerChunk k16 steps: every 2 steps (32 of K) with fine groups, else
  // once per k block. A stage holds the scale rows of up to kMaxGroups groups.
  static constexpr int kMaxGroups = kBlockK / 32;  // groups per k block at the smallest group (32)
  static constexpr int kStepsPerChunk = FineGroups ? 2 : kKSteps;
  static constexpr int kChunks = kKSteps / kStepsPerChunk;
  static constexpr int kStepsPerWord = Bits == 4 ? 2 : 1;  // k16 steps one packed word feeds
  // Two ways to fewer instructions per k block, for the 16-row tile with coarse groups only
  // (M = 9-16, the tile Hopper ran for gated GEMMs and long K slices until wgmma's exact 16-row
  // tile took over, and the A100's; 1-4% faster there on an H200): the 32-row tile ran 12-18%
  // slower with both (NOTES.md, session 56), and the fine-group instances were not measured with
  // them.
  //   - Biased dequantization (dequant.cuh's, where the dtype has one: bf16 INT4, fp16 INT8): the
  //     B fragments keep the dequantization's offset, and the offset and zero points come off
  //     each chunk's sums through the tokens' activation sums (the kernel). Per k block a lane
  //     saves 2 instructions per fragment register pair (INT4 64, INT8 32) and pays an mma per
  //     k16 step and an FFMA per accumulator and chunk.
  //   - ldmatrix sources stepped by XOR (a_step_xor_bytes): one offset register per m16 tile.
  static constexpr bool kLdsmStepsByXor = MTiles == 1 && !FineGroups;
  static constexpr bool kBiased = kLdsmStepsByXor && (kBf16 ? Bits == 4 : Bits == 8);

  // ---- the tiled MMA. Warp w owns n8 blocks kBlocksPerWarp w .. kBlocksPerWarp w + 3 of the
  // CTA's columns: the N permutation maps the natural (atom, warp, repeat) to (atom, repeat, warp)
  // as in the dense GEMM.
  using Mma = TiledMMA<MMA_Atom<MmaOp>, 1, kWarps, Layout<Int<kTileM>>,
                       Layout<Shape<_8, Int<kWarps>, Int<kBlocksPerWarp>>,
                              Stride<_1, Int<8 * kBlocksPerWarp>, _8>>,
                       Layout<Int<kBlockK>>>;
  using CopyA = TiledCopyA<LdsmA_x4, Mma>;  // shared -> registers: ldmatrix.x4 per m16 x k16
  // The row and column of each accumulator, (T, (V4, MTiles, B)) -> M and -> N: where the store
  // writes it and which column's scale multiplies it. The column of each B fragment value,
  // (T, (V4, B, KSteps)) -> N: whose zero point its dequantization subtracts.
  using AccRows = decltype(tile_row_layout<kTileM>(typename Mma::LayoutC_TV{}));
  using AccCols = decltype(tile_col_layout<kTileM>(typename Mma::LayoutC_TV{}));
  using BCols = decltype(tile_row_layout<kTileN>(typename Mma::LayoutB_TV{}));
  static_assert(decltype(mma_warp_part<AccCols>(_1{}))::value ==
                    decltype(mma_warp_part<BCols>(_1{}))::value,
                "a warp's accumulators and B fragments lie in the same columns");
  // Gated GEMMs gate in registers in the 16-row tile (mixed_gemm_kernel's Gated, compiled for it
  // alone); taller tiles gate in split_k_reduce_kernel. A warp's logical n8 blocks b and b + 1 (b
  // even) are then a gate block and its up block: each lane's values (v, m, b) and (v, m, b + 1)
  // must be the same token's sums 8 columns apart (checked on warp 0's lanes: another warp's
  // columns are warp 0's plus an offset, mma_warp_part).
  static constexpr bool kGatesInRegisters = MTiles == 1;
  static constexpr bool gate_up_pairs_in_lane() {
    for (int t = 0; t < 32; ++t)
      for (int v = 0; v < 4; ++v)
        for (int m = 0; m < MTiles; ++m)
          for (int b = 0; b < kBlocksPerWarp; b += 2) {
            const auto gate = make_coord(v, m, b), up = make_coord(v, m, b + 1);
            if (int(AccCols{}(t, up)) != int(AccCols{}(t, gate)) + kBlockN ||
                int(AccCols{}(t, gate)) % (2 * kBlockN) >= kBlockN ||
                int(AccRows{}(t, up)) != int(AccRows{}(t, gate)))
              return false;
          }
    return true;
  }
  static_assert(!kGatesInRegisters || gate_up_pairs_in_lane(),
                "a lane must hold both sums of its gated outputs");

  // ---- shared memory: kStages stages of kStageBytes (stage s at byte s * kStageBytes) holding a
  // k block's weights and scales, then the kStages activation tiles.
  // Weights keep the packed order, 512 bytes per n8 block: (L32, B) -> 16-byte unit, so every
  // lane copies and reads its own 16 bytes (one conflict-free LDS.128 per n8 block), which hold
  // its B fragments of all k16 steps of the block (weight_format.hpp).
  using SmemW = Layout<Shape<_32, Int<kBlocksPerCta>>>;
  static constexpr int kWeightBytes = 16 * decltype(cosize(SmemW{}))::value;  // 8 or 16 KB
  // Scales, then zero points, from byte kScaleOffset of a stage: (group row, column, scale|zero)
  // -> element.
  static constexpr int kScaleElems = kMaxGroups * kTileN;
  using SmemS = Layout<Shape<Int<kMaxGroups>, Int<kTileN>, _2>,
                       Stride<Int<kTileN>, _1, Int<kScaleElems>>>;
  static constexpr int kScaleOffset = kWeightBytes;
  static constexpr int kStageBytes =
      kScaleOffset + decltype(cosize(SmemS{}))::value * int(sizeof(Element));
  static_assert(kStageBytes % 16 == 0, "stages of whole 16-byte units");
  // Which weights a thread copies and reads: lane l of warp w, value b -> unit (l, 4 w + b), the
  // n8 block of its B fragments b (BCols). (T, V) -> (L32, B)
  using WeightTV = Layout<Shape<Shape<_32, Int<kWarps>>, Int<kBlocksPerWarp>>,
                          Stride<Stride<_1, Int<32 * kBlocksPerWarp>>, _32>>;
  using WeightBlocks = decltype(tile_col_layout<32>(WeightTV{}));  // (T, V) -> B
  // The activations: one (kTileM, kBlockK) tile per stage, K contiguous, the row's low 3 bits
  // XORed into the 16-byte unit so the 8 rows of each ldmatrix matrix hit 8 different sets of 4
  // banks. Stage s starts s * kAStageElems further on, a multiple of the swizzle's period (it
  // permutes offset bits below 2^(3 + log2(kBlockK))), so a stage's addresses are stage 0's plus a
  // constant and the per-thread ldmatrix addresses stay loop-invariant.
  using SmemA = decltype(composition(
      Swizzle<3, 3, log2_of(kBlockK) - 3>{},
      make_layout(make_shape(Int<kTileM>{}, Int<kBlockK>{}), make_stride(Int<kBlockK>{}, _1{}))));
  static constexpr int kAStageElems = kTileM * kBlockK;
  static constexpr int kAStageBytes = kAStageElems * int(sizeof(Element));
  static_assert(kAStageElems % (8 * kBlockK) == 0, "stage offsets must not meet the swizzle");
  // k16 step j of a row lies where step 0 does with the offset XOR 16 j (elements): the swizzle
  // XORs a row's low 3 bits into offset bits 3-5, and 16 j (bits 4 up, below the row's) meets
  // them as an XOR, not a carry. So a lane's ldmatrix offset for step j is its step-0 offset XOR
  // a constant (the kernel adds the stage, a multiple of the swizzle's period, before it).
  CG_HOST_DEVICE static constexpr int a_step_xor_bytes(int j) {
    return 16 * j * int(sizeof(Element));
  }
  static constexpr bool a_steps_are_xors() {  // at the columns ldmatrix rows start: 0 and 8
    for (int r = 0; r < kTileM; ++r)
      for (int c = 0; c < 16; c += 8)
        for (int j = 0; j < kKSteps; ++j)
          if (int(SmemA{}(r, 16 * j + c)) != (int(SmemA{}(r, c)) ^ (16 * j))) return false;
    return true;
  }
  static_assert(a_steps_are_xors(), "k16 steps of the activation tile are XORs of step 0");
  static_assert(kAStageBytes % (32 * kKSteps) == 0,
                "a stage offset leaves the bits a step flips alone");
  // Per k slice; slice y's stages start y * kSmemBytes in. After its main loop a slice y > 0
  // parks its sums at the start of its own stages for slice 0: value v of thread x at float
  // SmemParked(x, v), one 128-thread row per value (conflict-free).
  static constexpr int kSmemBytes = kStages * (kStageBytes + kAStageBytes);
  static_assert(kSmemBytes % 128 == 0, "k slices' stages start on 128 bytes");
  static constexpr int kAccs = 4 * MTiles * kBlocksPerWarp;  // fp32 sums per thread
  using SmemParked = Layout<Shape<Int<kThreads>, Int<kAccs>>, Stride<_1, Int<kThreads>>>;
  static_assert(4 * kThreads * kAccs <= kSmemBytes, "the parked sums fit in a slice's stages");
  CG_HOST_DEVICE static constexpr int smem_bytes(int k_slices) { return k_slices * kSmemBytes; }

  // ---- global -> shared. Activations: kBlockK / 8 threads per row, 16 bytes each.
  static constexpr int kChunksA = kBlockK / 8;
  static_assert(kThreads / kChunksA <= kTileM, "one pass of the A copy must fit the tile");
  using G2S = TiledCopy<CpAsync16, Layout<Shape<Int<kThreads / kChunksA>, Int<kChunksA>>,
                                          Stride<Int<kChunksA>, _1>>,
                        Layout<Shape<_1, _8>>>;
  // Scales and zeros: one thread per 16 bytes, kTileN / 8 per row of a stage's (kMaxGroups,
  // kTileN) scales; the kernel runs only the threads of the rows the k block needs. Thread
  // (chunk, row), that is tid = row * kScaleChunks + chunk.
  static constexpr int kScaleChunks = kTileN / 8;
  using G2SScale = TiledCopy<CpAsync16, Layout<Shape<Int<kMaxGroups>, Int<kScaleChunks>>,
                                               Stride<Int<kScaleChunks>, _1>>,
                             Layout<Shape<_1, _8>>>;
  static_assert(kMaxGroups * kScaleChunks <= kThreads, "one pass of the scale copy");
  // The copying thread's group row and column, and its destination in a stage's scales: thread
  // tid writes elements 8 tid .. 8 tid + 7, 16-byte unit tid (the threads follow the rows).
  // (T, V8) -> element
  using ScaleCopyRows = decltype(tile_row_layout<kMaxGroups>(typename G2SScale::LayoutTV{}));
  using ScaleCopyCols = decltype(tile_col_layout<kMaxGroups>(typename G2SScale::LayoutTV{}));
  using ScaleCopyDst = decltype(coalesce_by_mode(composition(
      decltype(SmemS{}(_, _, _0{})){},
      typename G2SScale::LayoutTV{})));
  static_assert(std::is_same<ScaleCopyDst, Layout<Shape<Int<kMaxGroups * kScaleChunks>, _8>,
                                                  Stride<_8, _1>>>::value,
                "the scale copy writes 16-byte unit tid");

  // ---- registers per thread ptxas allocates on sm_90a, rounded up to 8: the planner's occupancy
  // model reads them (no GPU test compares it with cudaOccupancy yet). Measured with
  // scripts/kernel_resources.py; remeasure when the kernel changes. The two-slice kernels of the
  // 16-row INT4 tile take 116-128 (nvcc 13.0): 2 CTAs of 8 warps per SM either way, as shared
  // memory also allows.
  CG_HOST_DEVICE static constexpr int registers() {
    if (Bits == 4) {
      if (MTiles == 1) return FineGroups || kBf16 ? 128 : 120;
      if (MTiles == 2) return FineGroups ? 216 : (kBf16 ? 160 : 168);
      return 256;
    }
    if (MTiles == 1) return 96;
    if (MTiles == 2) return FineGroups ? 144 : (kBf16 ? 152 : 144);
    return 224;
  }
  static constexpr int kRegisters = registers();
};

// ------------------------------------------------------------------------------------------------
// The split-K reduction (split_k_reduce_kernel): thread i of the grid adds the four outputs
// 4 i .. 4 i + 3 of the row-major [M, N] output over the splits' fp32 partial sums in split order
// and stores them (N % 8 == 0: the four never straddle a row).
struct SplitKReduceConfig {
  static constexpr int kThreads = 256;  // per CTA
  static constexpr int kValues = 4;     // one 16-byte load per split
  // (T, V4) -> row-major index of [M, N]; T = M N / 4 threads in all.
  CG_HOST_DEVICE static constexpr auto tv(int64_t threads) {
    return make_layout(make_shape(threads, Int<kValues>{}), make_stride(Int<kValues>{}, _1{}));
  }
  // The workspace [splits][M][N] fp32 in 16-byte units: (U, split) -> unit, U = M N / 4.
  CG_HOST_DEVICE static constexpr auto workspace(int64_t units, int splits) {
    return make_layout(make_shape(units, splits), make_stride(_1{}, units));
  }
};

// ------------------------------------------------------------------------------------------------
// The dequantize kernel (dequantize_weight_kernel): one warp per (n8 block, k block) of the packed
// weight. Each lane dequantizes its 16 packed bytes into its mma B fragment values, which lie at
// scattered (n, k) of the block's (N8, kBlockK) tile; the warp stages the tile in shared memory
// and writes it back as 16-byte row segments, so the global stores are coalesced.
template <int Bits>
struct DequantWeightConfig {
  static constexpr int kBits = Bits;
  static constexpr int kBlockK = block_k(Bits);
  static constexpr int kKSteps = kBlockK / 16;
  static constexpr int kStepsPerWord = Bits == 4 ? 2 : 1;  // k16 steps one packed word feeds
  static constexpr int kWarps = 8;  // (n8 block, k block) items per CTA
  static constexpr int kThreads = 32 * kWarps;
  // The lane's B fragment values of every k16 step of the block, in register order: the m16n8k16
  // B atom repeated along K. (T32, (V4, KSteps)) -> (N8, kBlockK)
  using FragTV = decltype(make_layout(
      layout<0>(MMA_Traits_16x8x16_Layouts::BLayout{}),
      make_layout(layout<1>(MMA_Traits_16x8x16_Layouts::BLayout{}),
                  Layout<Int<kKSteps>, Int<8 * 16>>{})));
  // A warp's staging tile (N8, kBlockK), K contiguous. Rows are kBlockK + 8 elements apart: the
  // fragment stores (rows g = 0..7, 4-byte pairs at k = 2t) of a lane quad t = 0..3 then fall into
  // 32 different banks, and rows stay 16-byte aligned for the row-segment reads.
  static constexpr int kRowStride = kBlockK + 8;
  using SmemTile = Layout<Shape<_8, Int<kBlockK>>, Stride<Int<kRowStride>, _1>>;
  // The same tile in 4-byte words, the pairs of adjacent elements a fragment register holds:
  // (N8, kBlockK / 2) -> word.
  using SmemTilePairs = Layout<Shape<_8, Int<kBlockK / 2>>, Stride<Int<kRowStride / 2>, _1>>;
  static constexpr int kTileElems = 8 * kRowStride;  // per warp
  static constexpr int kSmemBytes = kWarps * kTileElems * 2;
  // Write-back: 16 bytes (8 values along K) per lane, kBlockK / 8 lanes per row, 32 lanes per
  // pass over the (N8, kBlockK) tile.
  static constexpr int kChunksPerRow = kBlockK / 8;
  struct RowSegment16 {  // a 16-byte shared-memory load and global store per lane
    static constexpr int kThreads = 1;
    static constexpr int kValues = 8;
  };
  using S2G = TiledCopy<RowSegment16, Layout<Shape<Int<32 / kChunksPerRow>, Int<kChunksPerRow>>,
                                          Stride<Int<kChunksPerRow>, _1>>,
                        Layout<Shape<_1, _8>>>;
  static constexpr int kPasses = 8 / S2G::kTileR;
};

}  // namespace mixed
}  // namespace cute_gemm
