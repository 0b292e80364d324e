#pragma once
// Configuration of the decode kernel (mixed_decode_kernel.cuh, M <= 8): the resources the planner
// reads and every shared-memory layout and thread-value map the kernel indexes through, in a
// header free of CUDA, so that the planner (plain C++) instantiates it with Element = uint16_t
// and tests/cpp/test_mixed_decode_layouts.cpp checks the maps on the host.
//
// Words: a k slice is col_warps warps side by side (kWarpN columns each) that share the
// activation rows of each stage and work on one part of the CTA's k range; a group is only ever a
// quantization group (the scales' rows).

#include <type_traits>

#include "cute_gemm/composed_layout.hpp"
#include "cute_gemm/copy_traits_ldsm_k32.hpp"
#include "cute_gemm/mma_atom.hpp"
#include "cute_gemm/tv_coords.hpp"
#include "kernels/mixed/weight_format.hpp"

namespace cute_gemm {
namespace mixed {

// Element: the activation type (uint16_t where only its size matters). MmaOp: its m16n8k16 mma,
// SM80_16x8x16_F32F16F16F32_TN or SM80_16x8x16_F32BF16BF16F32_TN, which also tells fp16 from bf16
// to the CUDA-free planner (the registers differ). Bits: 4 or 8. FineGroups: quantization groups
// shorter than a packed k block (32, 64), whose scales apply every 2 k16 steps.
template <class Element_, class MmaOp_, int Bits, bool FineGroups>
struct MixedDecodeConfig {
  using Element = Element_;
  using MmaOp = MmaOp_;
  static constexpr int kBits = Bits;
  static constexpr bool kFineGroups = FineGroups;
  static_assert(Bits == 4 || Bits == 8, "INT4 or INT8 weights");
  static_assert(sizeof(Element) == 2, "16-bit activations");

  // ---- CTA shape. A CTA is 1..kMaxWarps warps: k slices of col_warps warps (blockDim = (32
  // col_warps, k slices), both chosen at run time) on the same kWarpN * col_warps columns.
  static constexpr int kMaxWarps = 16;
  static constexpr int kMaxThreads = 32 * kMaxWarps;
  static constexpr int kMaxColWarps = 4;
  static constexpr int kBlocksPerWarp = 4;  // n8 blocks
  static constexpr int kRowTiles = kBlocksPerWarp / 2;  // m16 tiles of weight rows (mma's M)
  static constexpr int kWarpN = kBlocksPerWarp * kBlockN;  // 32 output columns per warp
  static constexpr int kTileM = 8;  // tokens per CTA: one n8 tile (the mma's N)
  static constexpr int kBlockK = block_k(Bits);  // 128 (INT4) or 64 (INT8)
  static constexpr int kKSteps = kBlockK / 16;
  // k blocks in flight per warp, within the 128 registers per thread that 16 warps per SM leave
  // (4 stages under a 96-register cap spilled and measured slower: benchmarks/results/NOTES.md).
  static constexpr int kStages = 5;
  static constexpr int kStepsPerChunk = FineGroups ? 2 : kKSteps;  // k16 steps per scaling
  static constexpr int kChunks = kKSteps / kStepsPerChunk;
  static constexpr int kScaleRows = FineGroups ? kBlockK / 32 : 1;  // group rows per k block

  // The rows of A a CTA stages at M = m (1..kTileM).
  CG_HOST_DEVICE static constexpr int rows_for(int m) {
    return m < 1 ? 1 : (m < kTileM ? m : kTileM);
  }
  // Whether col_warps warps side by side can share a k slice's activations: 1, 2 or 4.
  CG_HOST_DEVICE static constexpr bool col_warps_valid(int col_warps) {
    return col_warps == 1 || col_warps == 2 || col_warps == kMaxColWarps;
  }

  // ---- The warp's product, transposed: out^T = dequant(W) @ A^T. The mma's M is the warp's
  // kWarpN columns (kRowTiles m16 tiles of weight rows), its N the kTileM tokens, its K the k
  // block; M, N and K below are the mma's.
  using Mma = TiledMMA<MMA_Atom<MmaOp>, 1, 1, Layout<Int<kWarpN>>, Layout<Int<kTileM>>,
                       Layout<Int<kBlockK>>>;
  using LayoutA_TV = typename Mma::LayoutA_TV;  // (T32,(V8,RT,KSteps)) -> (M32,K): weights
  using LayoutB_TV = typename Mma::LayoutB_TV;  // (T32,(V4,1,KSteps)) -> (N8,K): activations
  using LayoutC_TV = typename Mma::LayoutC_TV;  // (T32,(V4,RT,1)) -> (M32,N8): sums

  // Weights. The packed format (weight_format.hpp) gives lane 4 g + t column g of each of its n8
  // blocks, as the B fragment (T32,V4) -> (N8,K16) of an mma with the weights as B:
  // (T32, n8 block) -> the warp's column whose weights the lane holds.
  using WeightCols = Layout<Shape<Shape<_4, _8>, Int<kBlocksPerWarp>>,
                            Stride<Stride<_0, _1>, Int<kBlockN>>>;
  // Blocks 2r and 2r + 1 are rows 0-7 and 8-15 of row tile r, so those B fragments are the A
  // fragment of the tile: A register j (values 2j, 2j + 1 of (T32,V8) -> (M16,K16)) is register
  // a_block_reg(j) of block 2r + a_block(j)'s B fragment, in the same lane.
  using AtomA = typename MMA_Traits<MmaOp>::ALayout;  // (T32,V8) -> (M16,K16)
  using AtomB = typename MMA_Traits<MmaOp>::BLayout;  // (T32,V4) -> (N8,K16)
  CG_HOST_DEVICE static constexpr int a_block(int j) { return int(AtomA{}(0, 2 * j)) % 16 / 8; }
  CG_HOST_DEVICE static constexpr int a_block_reg(int j) {
    const int mk = int(AtomA{}(0, 2 * j));
    for (int v = 0; v < 4; v += 2)
      if (int(AtomB{}(0, v)) == mk % 8 + 8 * (mk / 16)) return v / 2;
    return -1;
  }
  // ... for every lane, and the lane's A rows are its columns of WeightCols.
  static constexpr bool a_from_b_fragments() {
    for (int l = 0; l < 32; ++l) {
      for (int j = 0; j < 4; ++j) {
        if (a_block_reg(j) < 0) return false;
        const int m = int(AtomA{}(l, 2 * j)) % 16;
        for (int x = 0; x < 2; ++x) {  // both values of the register
          const int a = int(AtomA{}(l, 2 * j + x)), b = int(AtomB{}(l, 2 * a_block_reg(j) + x));
          if (a % 16 / 8 != a_block(j) || a % 8 != b % 8 || a / 16 != b / 8) return false;
        }
        if (m % 8 + 8 * a_block(j) != m || m % 8 != int(WeightCols{}(l, 0))) return false;
      }
    }
    return true;
  }
  static_assert(a_from_b_fragments(), "the packed B fragments must be the A fragments");

  // Activations: one ldmatrix.x4 per pair of k16 steps, its registers the B map's values of both
  // steps. The lane's source row and k: (T32,V8) -> N8 and (T32,V8) -> K32.
  using CopyB = LdsmB_x4_K32;
  using CopyBRow = decltype(tile_row_layout<kTileM>(typename CopyB::SrcLayout{}));
  using CopyBCol = decltype(tile_col_layout<kTileM>(typename CopyB::SrcLayout{}));

  // Sums, acc[r][v] = value v + 4 r of the C map: (T32,(V4,RT,1)) -> M32, the warp's column, and
  // (T32,(V4,RT,1)) -> N8, the token.
  using AccCol = decltype(tile_row_layout<kWarpN>(LayoutC_TV{}));
  using AccToken = decltype(tile_col_layout<kWarpN>(LayoutC_TV{}));
  static constexpr int kAccs = kRowTiles * 4;  // fp32 sums per lane
  // A lane sums the columns it holds the weights of (the kernel reads both columns' scales and
  // zeros from one base).
  static constexpr bool lane_cols_agree() {
    for (int l = 0; l < 32; ++l)
      if (int(AccCol{}(l, 0)) != int(WeightCols{}(l, 0))) return false;
    return true;
  }
  static_assert(lane_cols_agree(), "a lane's sums must be its weights' columns");
  // A lane's odd values are odd tokens: with one token row (the single-row instance) they are
  // past M, and the kernel neither scales nor adds them.
  static constexpr bool odd_values_odd_tokens() {
    for (int l = 0; l < 32; ++l)
      for (int v = 0; v < kAccs; ++v)
        if (int(AccToken{}(l, v)) % 2 != v % 2) return false;
    return true;
  }
  static_assert(odd_values_odd_tokens(), "the single-row kernel skips a lane's odd values");
  // Gated GEMMs (mixed_epilogue.cuh's weight_block): values v and v + 2 (v < 2) of row tile r are
  // one token's sums of a column in n8 block 2r and the same column of block 2r + 1, the gate and
  // up sums of one output.
  static constexpr bool gate_up_pairs_in_lane() {
    for (int l = 0; l < 32; ++l)
      for (int r = 0; r < kRowTiles; ++r)
        for (int v = 0; v < 2; ++v) {
          const int col = int(AccCol{}(l, v + 4 * r)), up = int(AccCol{}(l, v + 2 + 4 * r));
          if (col / kBlockN != 2 * r || up != col + kBlockN ||
              int(AccToken{}(l, v + 4 * r)) != int(AccToken{}(l, v + 2 + 4 * r)))
            return false;
        }
    return true;
  }
  static_assert(gate_up_pairs_in_lane(), "a lane must hold both sums of its gated outputs");

  // ---- Shared memory: [zero row][an mbarrier per k slice][each k slice's kStages stages]
  // [the sums of the warps outside k slice 0]. A stage: each warp's slice (its weights, then its
  // columns' scales and zeros), then the activation rows that the k slice's warps share.
  static constexpr int kZeroRowBytes = 256;  // what the ldmatrix rows past M read
  static constexpr int kBarrierBytes = 8 * kMaxWarps;
  static constexpr int kStagesOffset = kZeroRowBytes + kBarrierBytes;
  // (block, lane) -> 16-byte unit of the warp's weights, [blocks][32 lanes][16 B]: the packed
  // order, so a lane copies and reads its own 16 bytes of each block (512-byte runs,
  // conflict-free).
  using SmemWeights = Layout<Shape<Int<kBlocksPerWarp>, _32>, Stride<_32, _1>>;
  static constexpr int kWeightBytes = 16 * decltype(cosize(SmemWeights{}))::value;  // 2 KB
  // The weight copies: (T32, copy i) -> 16-byte unit of SmemWeights. Lane (b, g) = b + 4 g copies
  // unit g + 8 i of block b, so a lane reads one block (one source pointer, advanced once per k
  // block) and its copies differ by constant offsets, 128 bytes apart in global and shared memory;
  // each copy instruction moves 128 contiguous bytes of each block.
  using WeightCopy = Layout<Shape<Shape<_4, _8>, Int<kBlocksPerWarp>>,
                            Stride<Stride<_32, _1>, _8>>;
  // The kernel reads copy i of every lane as its copy 0 plus i * WeightCopy(0, 1) units.
  static constexpr bool weight_copy_covers() {
    bool seen[kBlocksPerWarp * 32] = {};
    const int step = int(WeightCopy{}(0, 1));
    for (int l = 0; l < 32; ++l)
      for (int i = 0; i < kBlocksPerWarp; ++i) {
        const int u = int(WeightCopy{}(l, i)), first = int(WeightCopy{}(l, 0));
        if (u < 0 || u >= kBlocksPerWarp * 32 || seen[u]) return false;
        seen[u] = true;
        if (u / 32 != first / 32 || u != first + step * i) return false;  // one block per lane
      }
    return true;
  }
  static_assert(weight_copy_covers(), "the weight copies must cover each unit once");
  // (column, group row, scale | zero) -> element after the weights.
  using SmemScales = Layout<Shape<Int<kWarpN>, Int<kScaleRows>, _2>,
                            Stride<_1, Int<kWarpN>, Int<kScaleRows * kWarpN>>>;
  static constexpr int kScaleBytes = kScaleRows * kWarpN * 2;  // of the scales (zeros alike)
  static constexpr int kSliceBytes =
      kWeightBytes + int(sizeof(Element)) * decltype(cosize(SmemScales{}))::value;
  static_assert(kSliceBytes % 128 == 0, "activation rows must start on 128 bytes");
  // Scale copies: lane 4 r + c (r < kScaleRows) copies the 16 bytes of columns 8c .. 8c + 7 of
  // group row r: lane -> element of SmemScales, (4,R):(8,32), which is lane * 8.
  using ScaleCopy = decltype(coalesce(composition(
      SmemScales{}, Layout<Shape<_4, Int<kScaleRows>>, Stride<_8, Int<kWarpN>>>{})));
  // (M8, K) -> element of the stage's activation rows (token, k): the 16-byte units of a row XOR
  // the row (mod 8), so the 8 rows one ldmatrix matrix reads (a column of units) hit all 32
  // banks. A stage holds only the M rows of A: row r lies below (r + 1) kBlockK.
  static constexpr int kLog2BlockK = kBlockK == 128 ? 7 : 6;
  using SmemA = decltype(composition(
      Swizzle<3, 3, kLog2BlockK - 3>{},
      make_layout(make_shape(Int<kTileM>{}, Int<kBlockK>{}), make_stride(Int<kBlockK>{}, _1{}))));
  static constexpr int kARowBytes = kBlockK * 2;
  // Pairs 2 and 3 (INT4) are pairs 0 and 1 plus this many elements: the swizzle moves units
  // within 64-element halves of a row, so the lanes' ldmatrix offsets of pairs 0 and 1 serve all.
  static constexpr int kPairHalf = 64;
  static constexpr bool halves_alike() {
    for (int r = 0; r < kTileM; ++r)
      for (int k = 0; k + kPairHalf < kBlockK; ++k)
        if (int(SmemA{}(r, k + kPairHalf)) != int(SmemA{}(r, k)) + kPairHalf) return false;
    return true;
  }
  static_assert(halves_alike(), "a k offset of kPairHalf must not meet the swizzle");

  // Where the kernel's activation copy stores 16-byte unit `unit` of row `row` (bytes): SmemA with
  // its XOR written on units, checked for every row and unit below. The copy keeps this form
  // rather than evaluating SmemA: that drops the signed row % 8 and reschedules the main loop
  // (fewer instructions and registers in most instances, a few more in some; a change of its own,
  // to be measured: benchmarks/results/NOTES.md).
  CG_HOST_DEVICE static constexpr int a_unit_bytes(int row, int unit) {
    return row * kARowBytes + 16 * (unit ^ (row % 8));
  }
  static constexpr bool a_units_match() {
    for (int r = 0; r < kTileM; ++r)
      for (int u = 0; u < kBlockK / 8; ++u)
        for (int e = 0; e < 8; ++e)
          if (a_unit_bytes(r, u) + 2 * e != 2 * int(SmemA{}(r, 8 * u + e))) return false;
    return true;
  }
  static_assert(a_units_match(), "the activation copy must store where SmemA says");

  // ---- One token row (M = 1) in one-warp k slices (the single-row instance): a k block's small
  // copies, the scales' (4 units per group row), the zero points' (as many; asymmetric weights)
  // and the activation row's (kBlockK / 8 units), are one copy per lane, its source and
  // destination set before the main loop and stepped per k block: lane -> (kind, unit), the lanes
  // past them idle. Where that fits 32 lanes for either kind of weights (all but INT4 with
  // 32-element groups) and the scale rows step evenly (groups no longer than a k block, or one
  // group), the launcher runs that instance at M = 1 (single_row_fits).
  enum SmallKind { kScaleUnit, kZeroUnit, kActUnit, kIdleLane };
  struct SmallCopy {
    int kind, unit;
  };
  CG_HOST_DEVICE static constexpr SmallCopy small_copy(int lane, int scale_units, int zero_units) {
    if (lane < scale_units) return SmallCopy{kScaleUnit, lane};
    if (lane < scale_units + zero_units) return SmallCopy{kZeroUnit, lane - scale_units};
    if (lane < scale_units + zero_units + kBlockK / 8) {
      return SmallCopy{kActUnit, lane - scale_units - zero_units};
    }
    return SmallCopy{kIdleLane, 0};
  }
  // group: the effective group size (K for per-channel scales), groups: how many along K.
  CG_HOST_DEVICE static constexpr bool single_row_fits(int group, int groups) {
    const int scale_rows = FineGroups ? kBlockK / group : 1;
    return (group <= kBlockK || groups == 1) && 8 * scale_rows + kBlockK / 8 <= kLanes;
  }

  // The activation rows start after the col_warps slices.
  CG_HOST_DEVICE static constexpr int a_offset(int col_warps) { return col_warps * kSliceBytes; }
  CG_HOST_DEVICE static constexpr int stage_bytes(int rows, int col_warps) {
    return a_offset(col_warps) + rows * kARowBytes;
  }
  // (k slice, stage) -> byte offset from kStagesOffset (run-time strides).
  CG_HOST_DEVICE static constexpr auto stages_layout(int rows, int col_warps, int k_slices) {
    const int sb = stage_bytes(rows, col_warps);
    return make_layout(make_shape(k_slices, Int<kStages>{}), make_stride(kStages * sb, sb));
  }
  // The sums parked for k slice 0: (lane, value (v, r), warp - col_warps) -> float after the
  // stages. A value of all lanes is one 128-byte row (conflict-free).
  using SmemParked = Layout<Shape<_32, Shape<_4, Int<kRowTiles>>, Int<kMaxWarps - 1>>,
                            Stride<_1, Stride<_32, _128>, Int<32 * kAccs>>>;
  CG_HOST_DEVICE static constexpr int parked_offset(int rows, int col_warps, int k_slices) {
    return kStagesOffset + k_slices * kStages * stage_bytes(rows, col_warps);
  }
  CG_HOST_DEVICE static constexpr int smem_bytes(int rows, int warps, int col_warps) {
    return parked_offset(rows, col_warps, warps / col_warps) +
           (warps - col_warps) * kLanes * kAccs * 4;
  }
  // The most warps per CTA (<= kMaxWarps, a multiple of col_warps) whose shared memory fits
  // smem_limit bytes at `rows` rows; 0 when not even one k slice fits or col_warps is invalid.
  CG_HOST_DEVICE static constexpr int max_warps(int rows, int col_warps, int smem_limit) {
    if (!col_warps_valid(col_warps)) return 0;
    int warps = kMaxWarps;
    while (warps > 0 && smem_bytes(rows, warps, col_warps) > smem_limit) warps -= col_warps;
    return warps;
  }

  // ---- Registers per thread that ptxas allocates on sm_90a (its count rounded up to 8) for the
  // one-warp (col_warps 1) and the shared (col_warps 2, 4) instantiations, for ungated and gated
  // GEMMs (compiled apart); the planner's occupancy model reads them
  // (test_planned_occupancy_matches_gpu holds it against cudaOccupancy). Measured with ptxas -v
  // (nvcc 13.0) on the kernel as it is; remeasure when it changes.
  static constexpr bool kBf16 = std::is_same<MmaOp, SM80_16x8x16_F32BF16BF16F32_TN>::value;
  static_assert(kBf16 || std::is_same<MmaOp, SM80_16x8x16_F32F16F16F32_TN>::value,
                "an m16n8k16 mma of fp16 or bf16");
  CG_HOST_DEVICE static constexpr int registers(int col_warps, bool gated,
                                                bool single_row = false) {
    if (single_row) {  // the single-row instance (one-warp k slices), gated or not alike
      if (Bits == 4) return kBf16 || FineGroups ? 96 : 88;
      return kBf16 ? 80 : 88;
    }
    const bool shared = col_warps > 1;
    if (Bits == 4) {
      if (kBf16) return (FineGroups ? 8 : 0) + (!shared && gated ? 120 : 112);
      return FineGroups ? 120 : (shared ? 104 : 112);
    }
    if (kBf16) return shared ? (FineGroups ? 104 : 128) : 96;
    return !FineGroups && shared && !gated ? 112 : 104;
  }
  static constexpr int max_registers() {
    int most = 0;
    for (int col_warps : {1, kMaxColWarps}) {
      for (bool gated : {false, true}) {
        for (bool single_row : {false, col_warps == 1}) {
          const int r = registers(col_warps, gated, single_row);
          most = r > most ? r : most;
        }
      }
    }
    return most;
  }
  static constexpr int kRegisters = max_registers();
};

}  // namespace mixed
}  // namespace cute_gemm
