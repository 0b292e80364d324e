#pragma once
// Mixed-input GEMM for decode (M <= 8): out[M, N] = A[M, K] @ dequant(W)^T (+ bias), the same
// contract and packed format as mixed_gemm_kernel.cuh, built around what limits that kernel at
// small M. Not the memory system (its access pattern streams at full bandwidth without the
// arithmetic) but each warp's instruction stream per weight byte, the CTA barrier per k block and
// the split-K kernel. Every layout and thread-value map is in mixed_decode_config.hpp.
//   - Every warp copies its own 4 n8 blocks of weights and its columns' scales (and zeros) into
//     its own slice of each stage (cp.async) and waits for its own copies (cp_async_wait).
//   - A k slice is col_warps warps side by side (32 columns each) that share the activation rows
//     of each stage, copied by all of them. With col_warps = 1 a warp is an independent pipeline
//     (a __syncwarp per k block, no barrier in the loop; a slow warp delays nobody), but it reads
//     the activations from L2 once per 32 columns: M * 256 bytes per 2 KB of weights per k block,
//     as many bytes as the weights at M = 8. With 2 or 4 the k slice meets at its own mbarrier per
//     k block (only its own warps; a bar.sync with a run-time id would reserve all 16 hardware
//     barriers and limit the CTAs per SM), and the activations cost a half or a quarter of that
//     in L2 traffic and shared memory, which keeps more warps per SM at M = 5-8 and for wide
//     layers.
//   - A CTA is 1-16 warps: k slices on the same columns, each a part of the CTA's k range; their
//     sums meet in shared memory (in k slice order) and k slice 0 writes the output. Decode needs
//     a K split to fill the GPU (8192^2 has 256 column tiles for 132 SMs x 16 warps), and this one
//     needs neither a workspace nor a second kernel; the grid splits K only where 16 warps per
//     column tile are not enough.
//   - The transposed product out^T = dequant(W) @ A^T: the weights are the mma's A operand (16
//     weight rows per m16n8k16), tokens its N of 8. A lane's B fragments of n8 blocks 2r and
//     2r + 1 (column g of each) are exactly the A fragment of rows g and g + 8 of the 16 rows they
//     form (Cfg::a_block), so the packed format is unchanged. Against the weights-as-B kernel this
//     halves the mmas and the ldmatrix of the activations at M <= 8, and the accumulators.
//   - Only the M rows of A are stored; the ldmatrix rows past M read a zeroed 256-byte buffer.
//     Rows are swizzled (Cfg::SmemA) so the 8 rows an ldmatrix matrix reads hit all 32 banks.
//   - A warp's copies are about a third of its instructions per k block if each recomputes its
//     source address, and they delay the next requests: every address is computed once and
//     advanced. A lane copies from one weight block (Cfg::WeightCopy: its copies differ by
//     immediate offsets, one pointer advanced per k block), and every shared-memory address
//     (copies, loads, ldmatrix) is a 32-bit one: a lane's base in stage 0, computed before the
//     loop and pinned in a register (NVVM would recompute it in every iteration), plus the
//     stage's byte offset.
//   - One token row (SingleRow, MixedPlan::single_row: M = 1 in one-warp k slices): a k block's
//     scale, zero-point and activation units are at most 32, so each lane makes one of those
//     copies per k block (Cfg::small_copy), from a source and to a destination set before the
//     loop and stepped per block, in the basic block of the weight copies: no per-block scale
//     row arithmetic and no branches around the small copies (each basic block that starts
//     with a cp.async also costs three fence instructions from ptxas). Group rows past K read
//     zeros (their activations are zero too) instead of the last row. Half a lane's sums are
//     tokens past the one row: they are neither scaled per group nor summed over k slices.
//   - The per-group scaling of fp32 sums of a * (q - z), the split-K workspace and its reduction
//     kernel (when the grid splits K) are the mma.sync kernel's (mixed_epilogue.cuh). The
//     dequantization is exact (dequant.cuh) except for fp16 INT8 and bf16 INT4, which keep the
//     magic offset and subtract (off + z) * sum(a) per group: one mma per k16 step yields sum(a)
//     for all the warp's columns.

#include <type_traits>

#include "cute_gemm/arch/copy_sm75.hpp"
#include "cute_gemm/arch/copy_sm80.hpp"
#include "cute_gemm/arch/grid_dependency_sm90.hpp"
#include "cute_gemm/arch/ld_shared.hpp"
#include "cute_gemm/arch/mbarrier_sm80.hpp"
#include "kernels/device_info.hpp"
#include "kernels/gemm/gemm_kernel.cuh"
#include "kernels/mixed/dequant.cuh"
#include "kernels/mixed/group_shape.cuh"
#include "kernels/mixed/mixed_decode_config.hpp"
#include "kernels/mixed/mixed_epilogue.cuh"
#include "kernels/mixed/mixed_gemm_launch.hpp"
#include "kernels/mixed/weight_format.hpp"

namespace cute_gemm {
namespace mixed {

// grid: (ceil(N / (32 col_warps)), ceil(M / kTileM), splits), blockDim = (32 col_warps, k slices).
// Split z handles k blocks [z * blocks_per_split, min((z + 1) * blocks_per_split, k_blocks)), none
// empty; k slice y of its CTA the y-th of blockDim.y near-equal parts of them (empty when the
// split is shorter), warp x / 32 of the k slice its 32 columns x / 32 of the CTA's. The k slices'
// sums meet in shared memory, added in k slice order; with split-K the CTA's fp32 sum goes to
// p.workspace ([split][M][N]) for split_k_reduce_kernel. Shared: k slices of 2 or 4 warps
// (blockDim.x 64 or 128); otherwise of 1, compiled apart so that its copies' offsets fold to
// constants. Gated (p.gated): the kernel of gated GEMMs, compiled apart so that the ungated one
// carries neither the block remapping nor the gated epilogue (their registers and instructions
// slow a GEMM that is bound by its few k blocks per warp at small M). early_dependents: the plan's
// (MixedPlan::early_dependents), where the next kernel in the stream may launch.
template <class Cfg, bool Shared, bool Gated, bool SingleRow>
__global__ void __launch_bounds__(Cfg::kMaxThreads, 1)
    mixed_decode_kernel(MixedGemmParams p, int blocks_per_split, bool to_workspace,
                        bool early_dependents) {
  using T = typename Cfg::Element;
  using D = Dequant<T>;
  using Op = typename Cfg::MmaOp;
  static_assert(std::is_same<Op, typename HalfTraits<T>::MmaOp>::value,
                "the config's mma must be the element type's");
  static_assert(!(SingleRow && Shared), "the single-row copies are one-warp k slices'");
  constexpr int S = Cfg::kStages, BK = Cfg::kBlockK;
  constexpr int RT = Cfg::kRowTiles, NB = Cfg::kBlocksPerWarp;
  extern __shared__ uint128_t smem_raw[];
  char* smem = reinterpret_cast<char*>(smem_raw);

  const int col_warps = Shared ? blockDim.x / 32 : 1, k_slices = blockDim.y;
  // lane from a signed int: with threadIdx.x % 32 (unsigned) NVVM knows lane < 32, so a_off,
  // lane * 16 and the activation swizzles become one-op remat candidates and its
  // rematerialization recomputes them in the main loop.
  const int lane = int(threadIdx.x) % 32, col_warp = Shared ? threadIdx.x / 32 : 0;
  const int k_slice = threadIdx.y;
  const int warp = k_slice * col_warps + col_warp;
  // The lane as the mma's thread coordinate (t, g), lane = 4 g + t.
  const auto thr = make_coord(make_coord(lane % 4, lane / 4), _0{}, _0{});
  const int n_warp = (blockIdx.x * col_warps + col_warp) * Cfg::kWarpN;  // the warp's columns
  const int m0 = blockIdx.y * Cfg::kTileM;
  const int rows = min(Cfg::kTileM, p.m - m0);
  const int k_blocks = mixed::k_blocks(p.k, Cfg::kBits);
  const int split_begin = blockIdx.z * blocks_per_split;
  const int split_blocks = min(split_begin + blocks_per_split, k_blocks) - split_begin;
  const int kb_begin = split_begin + k_slice * split_blocks / k_slices;
  const int n_kb = split_begin + (k_slice + 1) * split_blocks / k_slices - kb_begin;
  const GroupShape groups(p);
  T const* scales = static_cast<T const*>(p.scales);
  T const* zeros = static_cast<T const*>(p.zeros);
  const bool symmetric = zeros == nullptr;

  // The zero row (every warp's rows past M read it; written by each k slice's first 16 threads,
  // the same zeros) and the k slices' mbarriers, ready before any warp uses them.
  const int tid = threadIdx.x;
  if (tid < Cfg::kZeroRowBytes / 16) reinterpret_cast<uint4*>(smem)[tid] = make_uint4(0, 0, 0, 0);
  uint64_t* const bars = reinterpret_cast<uint64_t*>(smem + Cfg::kZeroRowBytes);
  if (Shared && tid == 0) mbarrier_init(bars + k_slice, 32 * col_warps);
  __syncthreads();
  const auto stages = Cfg::stages_layout(rows, col_warps, k_slices);  // (k slice, stage) -> byte
  const int a_offset = Cfg::a_offset(col_warps);
  const int slice = col_warp * Cfg::kSliceBytes;  // the warp's weights and scales in a stage
  // The k slice's stage 0 as a shared-memory address, computed once (a generic pointer would be
  // converted at every copy and load, in the loop).
  const uint32_t sstages_addr = detail::smem_addr(smem + Cfg::kStagesOffset + stages(k_slice, 0));

  // ---- global -> shared. Every source address is computed once and advanced per k block: the
  // copies would be a third of a warp's instructions at M = 1 if each recomputed its address.
  const uint64_t policy = make_l2_evict_first_policy();  // weights are read once
  // Weights: copy i of lane l is unit Cfg::WeightCopy(l, i) of the warp's blocks (512-byte runs,
  // one block per lane); blocks past N read zeros (their columns are never stored). Gated, the
  // warp's blocks 2r and 2r + 1 are one block of the gate half and the same block of the up half
  // (weight_block).
  using WeightCopy = typename Cfg::WeightCopy;
  const int w_unit = WeightCopy{}(lane, 0);  // block w_unit / 32, unit w_unit % 32 of it
  constexpr int kCopyUnits = WeightCopy{}(0, 1);  // from one copy to the next
  const int w_nb = n_warp / kBlockN + w_unit / kLanes;
  const bool w_ok = w_nb * kBlockN < p.n;
  uint128_t const* w_src =
      reinterpret_cast<uint128_t const*>(p.qweight) +
      ((w_ok ? weight_block<Gated>(p, w_nb) : 0) * int64_t(k_blocks) + kb_begin) * kLanes +
      w_unit % kLanes;
  // Scales (and zeros): lanes 4 r + c (c < 4) copy 16 bytes (8 columns, block c) of group row r
  // (Cfg::ScaleCopy).
  const int scale_rows = Cfg::kFineGroups ? BK >> groups.shift : 1;
  const int s_row = lane / 4;
  const bool s_copier = s_row < scale_rows;
  const int s_col = n_warp + (lane % 4) * 8;
  const bool s_ok = s_col < p.n;
  const int s_weight_col = s_ok ? weight_column<Gated>(p, s_col) : 0;
  // As bytes: a group row's address is then one wide multiply-add.
  char const* s_src = reinterpret_cast<char const*>(scales + s_weight_col);
  char const* z_src = symmetric ? nullptr : reinterpret_cast<char const*>(zeros + s_weight_col);
  const unsigned s_row_bytes = unsigned(p.n) * unsigned(sizeof(T));
  // Activations, shared by the k slice's warps: rows * kBlockK / 8 units of 16 bytes per k block;
  // thread x of the k slice copies units x + 32 col_warps j: row a_row + j * rows_per_iter, unit
  // a_unit of it, stored where Cfg::SmemA puts it.
  constexpr int kUnitsPerRow = BK / 8;
  constexpr int kUnitIters = (Cfg::kTileM * kUnitsPerRow + kLanes - 1) / kLanes;  // 1 warp
  const int rows_per_iter = 32 * col_warps / kUnitsPerRow;
  const int copier = Shared ? int(threadIdx.x) : lane;  // the thread's index in its k slice
  const int a_row = copier / kUnitsPerRow, a_unit = copier % kUnitsPerRow;
  const int64_t a_iter_stride = int64_t(rows_per_iter) * p.lda;
  T const* a_src = static_cast<T const*>(p.a) + int64_t(m0 + min(a_row, rows - 1)) * p.lda +
                   int64_t(kb_begin) * BK + a_unit * 8;
  T const* const a_fallback = static_cast<T const*>(p.a);  // the address of zero-filled copies
  int a_k = kb_begin * BK + a_unit * 8;                       // K column of the lane's unit

  // The lane's destinations in stage 0: its first weight copy's (copy i: + 16 i kCopyUnits), its
  // scale copy's (zeros: + kZerosBytes), its activation rows' base.
  const uint32_t w_dst = pinned(sstages_addr + slice + 16 * w_unit);
  const uint32_t s_dst = pinned(sstages_addr + slice + Cfg::kWeightBytes +
                                int(sizeof(T)) * typename Cfg::ScaleCopy{}(lane));
  const uint32_t a_dst = pinned(sstages_addr + a_offset);
  const int stage_bytes = stages(0, 1);
  constexpr int kZerosBytes = int(sizeof(T)) * typename Cfg::SmemScales{}(0, 0, 1);

  // Copy split-local k block `next` into the stage `stage_off` bytes past stage 0. Each is called
  // for next = 0, 1, 2, ... (< n_kb) in order, since it advances its source addresses. The
  // activations come from an earlier kernel, so the prologue issues them after the dependency wait.
  auto load_weights = [&](int next, uint32_t stage_off) {
    CG_PRAGMA_UNROLL
    for (int i = 0; i < NB; ++i) {
      SM80_CP_ASYNC_CACHEGLOBAL_ZFILL_POLICY::copy(
          w_src[i * kCopyUnits], w_dst + stage_off + 16 * kCopyUnits * i, w_ok, policy);
    }
    w_src += kLanes;
    if (!SingleRow && s_copier) {
      const int grp = groups.row_of((kb_begin + next) * BK, s_row);
      const size_t at = size_t(unsigned(grp)) * s_row_bytes;
      SM80_CP_ASYNC_CACHEGLOBAL_ZFILL::copy(*reinterpret_cast<uint128_t const*>(s_src + at),
                                            s_dst + stage_off, s_ok);
      if (!symmetric) {
        SM80_CP_ASYNC_CACHEGLOBAL_ZFILL::copy(*reinterpret_cast<uint128_t const*>(z_src + at),
                                              s_dst + stage_off + kZerosBytes, s_ok);
      }
    }
  };
  // Single row (SingleRow, M = 1): the lane's one small copy of each k block
  // (Cfg::small_copy: a scale, zero-point or activation unit, or none), from l_src, stepped by
  // l_step bytes per k block, to l_dst in stage 0; it reads zeros where its group row or K column
  // l_k (stepped by l_k_step) is at l_end or past, or its column is past N.
  char const* l_src = nullptr;
  int64_t l_step = 0;
  uint32_t l_dst = 0;
  int l_k = 0, l_k_step = 0, l_end = 0;
  bool l_ok = false, l_active = false;
  if constexpr (SingleRow) {
    const int scale_units = 4 * scale_rows, zero_units = symmetric ? 0 : scale_units;
    const auto mine = Cfg::small_copy(lane, scale_units, zero_units);
    l_active = mine.kind != Cfg::kIdleLane;
    if (mine.kind == Cfg::kActUnit) {
      l_src = reinterpret_cast<char const*>(static_cast<T const*>(p.a) + int64_t(m0) * p.lda +
                                            int64_t(kb_begin) * BK + mine.unit * 8);
      l_step = BK * int(sizeof(T));
      l_dst = a_dst + 16 * mine.unit;  // row 0: Cfg::a_unit_bytes(0, unit)
      l_k = kb_begin * BK + mine.unit * 8;
      l_k_step = BK;
      l_end = p.k;
      l_ok = true;
    } else if (l_active) {  // 8 columns of group row unit / 4 of the scales or zero points
      const int row = mine.unit / 4, col = n_warp + (mine.unit % 4) * 8;
      l_ok = col < p.n;
      const int weight_col = l_ok ? weight_column<Gated>(p, col) : 0;
      T const* base = mine.kind == Cfg::kScaleUnit ? scales : zeros;
      // The group row of the split's first block (one group: row 0 throughout).
      l_k = groups.last == 0 ? row : (kb_begin * BK >> groups.shift) + row;
      l_k_step = groups.last == 0 ? 0 : BK >> groups.shift;
      l_end = groups.last + 1;
      l_src = reinterpret_cast<char const*>(base + weight_col) +
              int64_t(l_k < l_end ? l_k : 0) * s_row_bytes;
      l_step = int64_t(l_k_step) * s_row_bytes;
      l_dst = sstages_addr + slice + Cfg::kWeightBytes +
              int(sizeof(T)) * typename Cfg::ScaleCopy{}(mine.unit) +
              (mine.kind == Cfg::kZeroUnit ? kZerosBytes : 0);
    }
    l_dst = pinned(l_dst);
  }
  auto load_activations = [&](uint32_t stage_off) {
    if constexpr (SingleRow) {  // the scales and zero points travel with the activation row here
      const bool ok = l_ok && l_k < l_end;
      SM80_CP_ASYNC_CACHEGLOBAL_ZFILL::copy_if(
          l_active, *reinterpret_cast<uint128_t const*>(ok ? l_src : p.a), l_dst + stage_off, ok);
      l_src += l_step;
      l_k += l_k_step;
      return;
    }
    const uint32_t st = a_dst + stage_off;
    const bool k_ok = a_k < p.k;  // columns past K read as zeros
    CG_PRAGMA_UNROLL
    for (int j = 0; j < kUnitIters; ++j) {
      const int r = a_row + j * rows_per_iter;
      if (j * rows_per_iter >= rows) break;  // warp-uniform
      if (r < rows) {
        T const* src = k_ok ? a_src + j * a_iter_stride : a_fallback;
        // Unit a_unit of row r as Cfg::SmemA stores it: Cfg::a_unit_bytes, written out (see there).
        SM80_CP_ASYNC_CACHEGLOBAL_ZFILL::copy(*reinterpret_cast<uint128_t const*>(src),
                                              st + r * Cfg::kARowBytes + 16 * (a_unit ^ (r % 8)),
                                              k_ok);
      }
    }
    a_src += BK;
    a_k += BK;
  };

  // ---- prologue: the first stages' weights go out before waiting for the previous kernel
  // (programmatic dependent launch on sm_90); commit s then holds stage s's activations, commit 0
  // also all the prologue's weights.
  CG_PRAGMA_UNROLL
  for (int s = 0; s < S - 1; ++s) {
    if (s < n_kb) load_weights(s, s * stage_bytes);
  }
  grid_dependency_wait();  // also orders this kernel's output writes after the previous kernel
  // The next kernel may launch now where this grid fills the SMs (MixedPlan::early_dependents):
  // its CTAs then take each SM as this grid's CTAs leave it, and stream their first weights
  // during this grid's tail instead of after its last CTA's main loop.
  if (early_dependents) grid_launch_dependents();
  CG_PRAGMA_UNROLL
  for (int s = 0; s < S - 1; ++s) {
    if (s < n_kb) load_activations(s * stage_bytes);
    cp_async_fence();
  }

  // acc / part: acc[r][v] is value (v, r) of the sums' TV layout (Cfg::LayoutC_TV): the warp's
  // column Cfg::AccCol, token Cfg::AccToken. The odd values are odd tokens
  // (Cfg::odd_values_odd_tokens): with one token row (SingleRow) they are never scaled, parked
  // or added, and stay 0 (kValueStep).
  constexpr int kValueStep = SingleRow ? 2 : 1;
  float acc[RT][4], part[RT][4];
  CG_PRAGMA_UNROLL
  for (int r = 0; r < RT; ++r) {
    CG_PRAGMA_UNROLL
    for (int v = 0; v < 4; ++v) acc[r][v] = 0.f;
  }
  // Biased dequantization (dequant.cuh; fp16 INT8, bf16 INT4): the weight fragments keep the
  // offset; per k16 step one more mma against an all-ones A fragment accumulates each token's
  // S = sum_k a_k (bacc: c0, c2 token 2t; c1, c3 token 2t + 1), shared by all the warp's columns,
  // and a column's chunk sum is part - (off + z) S; zoff[b] = off + z of block b's column.
  // Otherwise zc[b] holds the constants of the exact subtraction.
  constexpr bool kBiased = D::template kBiased<Cfg::kBits>;
  const float z_sym = float(1 << (Cfg::kBits - 1));
  ZeroConstants<typename D::T2> zc[NB];
  float zoff[NB];
  auto set_zero_point = [&](int b, float z) {
    if constexpr (kBiased) {
      zoff[b] = D::template kBias<Cfg::kBits> + z;
    } else {
      zc[b] = D::zero_constants(z);
    }
  };
  CG_PRAGMA_UNROLL
  for (int b = 0; b < NB; ++b) set_zero_point(b, z_sym);
  const uint32_t ones = D::as_u32(D::splat(1.f));
  const uint32_t ones_a[4] = {ones, ones, ones, ones};
  float bacc[4];
  // ldmatrix.x4 of the 8 token rows x 32 k of pair pr (k16 steps 2 pr, 2 pr + 1; Cfg::CopyB):
  // the lane's row and k from the copy's source layout. Pairs 2 and 3 are pairs 0 and 1 plus
  // Cfg::kPairHalf elements, so two offsets per lane serve all. Rows past M read the zero row
  // instead (any offset within it).
  const int b_row = typename Cfg::CopyBRow{}(lane, 0), b_k = typename Cfg::CopyBCol{}(lane, 0);
  // Per pr % 2: the lane's ldmatrix address in stage 0 (the zero row's for rows past M); it
  // moves with the stage only for rows below M (a mask of the stage's byte offset).
  const bool a_in_stage = b_row < rows;
  const uint32_t a_stage_mask = a_in_stage ? ~0u : 0u;
  uint32_t a_addr0[2];
  CG_PRAGMA_UNROLL
  for (int h = 0; h < 2; ++h) {
    a_addr0[h] = a_in_stage ? a_dst + int(sizeof(T)) * typename Cfg::SmemA{}(b_row, b_k + 32 * h)
                            : detail::smem_addr(smem);
  }
  // The lane's columns: of its weights (WeightCols), which are the rows of its A fragments and
  // of its sums (AccCol); their scales and zeros.
  const int lane_col = typename Cfg::WeightCols{}(get<0>(thr), 0);
  const float zero[4] = {0.f, 0.f, 0.f, 0.f};
  // Where the lane reads its weights and its columns' scales in stage 0.
  const uint32_t w_read = pinned(sstages_addr + slice + 16 * lane);
  const uint32_t s_read =
      pinned(sstages_addr + slice + Cfg::kWeightBytes + int(sizeof(T)) * lane_col);

  // The byte offsets from stage 0 of the stages of blocks i and i + S - 1.
  const uint32_t ring_bytes = S * stage_bytes;
  uint32_t read_off = 0, write_off = (S - 1) * stage_bytes;
  auto advance = [&](uint32_t off) {
    off += stage_bytes;
    return off == ring_bytes ? 0u : off;
  };
  CG_PRAGMA_NO_UNROLL
  for (int i = 0; i < n_kb; ++i) {
    cp_async_wait<S - 2>();
    // Every thread's copies of block i landed, and every warp of the k slice is done with block
    // i - 1 (whose stage the next copies overwrite): the warp alone, or the k slice's warps that
    // share the activations (phase i of the k slice's mbarrier).
    if constexpr (!Shared) {
      __syncwarp();
    } else {
      mbarrier_arrive(bars + k_slice);
      mbarrier_wait_parity(bars + k_slice, i & 1);
    }
    if (i < n_kb - (S - 1)) {  // k block i + S - 1 exists: the steady state
      load_weights(i + S - 1, write_off);
      load_activations(write_off);
    }
    cp_async_fence();
    write_off = advance(write_off);

    const uint32_t read_bytes = read_off;  // block i's stage
    read_off = advance(read_off);
    // The lane's 16 bytes of each block: SmemWeights(b, lane), as the block's stride times b plus
    // the lane's w_read (the layout evaluated at a run-time (b, lane) here moves the register
    // allocation of the shared instantiations: 124 -> 126 registers for fp16 INT4 fine groups).
    constexpr int kWBlockUnits = typename Cfg::SmemWeights{}(1, 0);
    uint4 w[NB];
    CG_PRAGMA_UNROLL
    for (int b = 0; b < NB; ++b) {
      ld_shared_u32x4(w_read + read_bytes + 16 * b * kWBlockUnits, w[b].x, w[b].y, w[b].z, w[b].w);
    }
    const uint32_t s_base = s_read + read_bytes;
    // Element `at` of the warp's scales and zeros in block i's stage, as fp32.
    auto scale_at = [&](int at) {
      return HalfTraits<T>::bits_to_float(ld_shared_u16(s_base + int(sizeof(T)) * at));
    };
    uint32_t a_addr[2];
    CG_PRAGMA_UNROLL
    for (int h = 0; h < 2; ++h) a_addr[h] = a_addr0[h] + (read_bytes & a_stage_mask);

    CG_PRAGMA_UNROLL
    for (int c = 0; c < Cfg::kChunks; ++c) {
      const int grow = Cfg::kFineGroups ? (32 * c) >> groups.shift : 0;  // the chunk's group row
      if (!symmetric) {  // warp-uniform; symmetric weights keep the constants set before the loop
        CG_PRAGMA_UNROLL
        for (int b = 0; b < NB; ++b) {
          const int at = typename Cfg::SmemScales{}(typename Cfg::WeightCols{}(0, b), grow, 1);
          set_zero_point(b, scale_at(at));
        }
      }
      CG_PRAGMA_UNROLL
      for (int pr = c * Cfg::kStepsPerChunk / 2; pr < (c + 1) * Cfg::kStepsPerChunk / 2; ++pr) {
        uint32_t bf[4];
        SM75_U32x4_LDSM_N::copy(a_addr[pr % 2] + (pr / 2) * int(sizeof(T)) * Cfg::kPairHalf,
                                bf[0], bf[1], bf[2], bf[3]);
        // A fragments of the pair's two k16 steps for each row tile, from the B fragments of its
        // two blocks (Cfg::a_block). INT4 word pr holds both steps, INT8 words 2 pr and 2 pr + 1
        // one each.
        constexpr int kWords = Cfg::kBits == 4 ? 1 : 2, kRegs = Cfg::kBits == 4 ? 4 : 2;
        uint32_t af[RT][2][4];
        CG_PRAGMA_UNROLL
        for (int r = 0; r < RT; ++r) {
          CG_PRAGMA_UNROLL
          for (int x = 0; x < kWords; ++x) {
            uint32_t bfrag[2][kRegs];  // B fragments (r0, r1 per step) of blocks 2r, 2r + 1
            dequant_word<T, Cfg::kBits, kBiased>(word_of(w[2 * r], kWords * pr + x), zc[2 * r],
                                                 bfrag[0]);
            dequant_word<T, Cfg::kBits, kBiased>(word_of(w[2 * r + 1], kWords * pr + x),
                                                 zc[2 * r + 1], bfrag[1]);
            CG_PRAGMA_UNROLL
            for (int h = 0; h < 2 / kWords; ++h) {
              CG_PRAGMA_UNROLL
              for (int j = 0; j < 4; ++j)
                af[r][x + h][j] = bfrag[Cfg::a_block(j)][2 * h + Cfg::a_block_reg(j)];
            }
          }
        }
        const bool first = pr == c * Cfg::kStepsPerChunk / 2;
        CG_PRAGMA_UNROLL
        for (int r = 0; r < RT; ++r) {
          if (first) {
            mma_16816<Op>(part[r], af[r][0], bf[0], bf[1], zero);
          } else {
            mma_16816<Op>(part[r], af[r][0], bf[0], bf[1], part[r]);
          }
          mma_16816<Op>(part[r], af[r][1], bf[2], bf[3], part[r]);
        }
        if constexpr (kBiased) {
          if (first) {
            mma_16816<Op>(bacc, ones_a, bf[0], bf[1], zero);
          } else {
            mma_16816<Op>(bacc, ones_a, bf[0], bf[1], bacc);
          }
          mma_16816<Op>(bacc, ones_a, bf[2], bf[3], bacc);
        }
      }
      // Values 0, 1 and 2, 3 of row tile r are two columns (AccCol), each for two tokens.
      if constexpr (kBiased) {  // part -= (off + z) S
        CG_PRAGMA_UNROLL
        for (int r = 0; r < RT; ++r) {
          CG_PRAGMA_UNROLL
          for (int v = 0; v < 4; v += kValueStep) {
            part[r][v] = fmaf(-zoff[2 * r + v / 2], bacc[v % 2], part[r][v]);
          }
        }
      }
      // acc += scale * part.
      CG_PRAGMA_UNROLL
      for (int r = 0; r < RT; ++r) {
        const float s_lo =
            scale_at(typename Cfg::SmemScales{}(typename Cfg::AccCol{}(0, 4 * r), grow, 0));
        const float s_hi =
            scale_at(typename Cfg::SmemScales{}(typename Cfg::AccCol{}(0, 4 * r + 2), grow, 0));
        CG_PRAGMA_UNROLL
        for (int v = 0; v < 4; v += kValueStep) {
          acc[r][v] = fmaf(v < 2 ? s_lo : s_hi, part[r][v], acc[r][v]);
        }
      }
    }
  }
  cp_async_wait<0>();
  if (!early_dependents) grid_launch_dependents();  // the next kernel may stream its weights

  // ---- the k slices' sum, in k slice order: the warps of k slices 1.. park their sums
  // (Cfg::SmemParked), each warp of k slice 0 adds those of its columns.
  using Parked = typename Cfg::SmemParked;
  if (k_slices > 1) {
    float* parked = reinterpret_cast<float*>(smem + Cfg::parked_offset(rows, col_warps, k_slices));
    if (k_slice > 0) {
      float* mine = parked + Parked{}(lane, 0, warp - col_warps);
      CG_PRAGMA_UNROLL
      for (int r = 0; r < RT; ++r) {
        CG_PRAGMA_UNROLL
        for (int v = 0; v < 4; v += kValueStep) mine[Parked{}(0, v + 4 * r, 0)] = acc[r][v];
      }
    }
    __syncthreads();
    if (k_slice > 0) return;
    for (int y = 1; y < k_slices; ++y) {
      float const* theirs = parked + Parked{}(lane, 0, (y - 1) * col_warps + col_warp);
      CG_PRAGMA_UNROLL
      for (int r = 0; r < RT; ++r) {
        CG_PRAGMA_UNROLL
        for (int v = 0; v < 4; v += kValueStep) acc[r][v] += theirs[Parked{}(0, v + 4 * r, 0)];
      }
    }
  }

  // ---- epilogue (k slice 0): value (v, r) is column n_warp + AccCol, token m0 + AccToken (the
  // workspace takes the weight's column of it). Gated, values v and v + 2 (v < 2) are the gate and
  // up sums of one output (Cfg::gate_up_pairs_in_lane): column 16 j + c of the warp's order is
  // output 8 j + c.
  float* ws = static_cast<float*>(p.workspace) + int64_t(blockIdx.z) * p.m * p.n;
  CG_PRAGMA_UNROLL
  for (int r = 0; r < RT; ++r) {
    CG_PRAGMA_UNROLL
    for (int v = 0; v < 4; ++v) {
      const int col = n_warp + typename Cfg::AccCol{}(thr, v + 4 * r);
      const int row = m0 + typename Cfg::AccToken{}(thr, v + 4 * r);
      if (col >= p.n || row >= p.m) continue;
      if (to_workspace) {
        ws[int64_t(row) * p.n + weight_column<Gated>(p, col)] = acc[r][v];
      } else if constexpr (!Gated) {
        store_out_one<T>(p, row, col, acc[r][v]);
      } else if (v < 2) {
        store_out_gated<T>(p, row, gated_output_column(col), acc[r][v], acc[r][v + 2]);
      }
    }
  }
}

// The kernel may use all the shared memory a CTA can opt in to (set once per process).
inline int decode_smem_limit() {
  return cached_device_attribute<cudaDevAttrMaxSharedMemoryPerBlockOptin>(48 * 1024);
}

// The instantiation that runs k slices of col_warps warps, for a gated GEMM or not, with the
// single-row copies or not (one-warp k slices only).
template <class Cfg>
auto decode_kernel_for(int col_warps, bool gated, bool single_row) {
  if (single_row && col_warps == 1) {
    return gated ? mixed_decode_kernel<Cfg, false, true, true>
                 : mixed_decode_kernel<Cfg, false, false, true>;
  }
  if (gated) {
    return col_warps > 1 ? mixed_decode_kernel<Cfg, true, true, false>
                         : mixed_decode_kernel<Cfg, false, true, false>;
  }
  return col_warps > 1 ? mixed_decode_kernel<Cfg, true, false, false>
                       : mixed_decode_kernel<Cfg, false, false, false>;
}

template <class Cfg>
cudaError_t prepare_mixed_decode() {
  static const cudaError_t e = [] {
    for (int col_warps : {1, 2}) {
      for (bool gated : {false, true}) {
        for (bool single_row : {false, true}) {
          const cudaError_t set = cudaFuncSetAttribute(
              decode_kernel_for<Cfg>(col_warps, gated, single_row),
              cudaFuncAttributeMaxDynamicSharedMemorySize, decode_smem_limit());
          if (set != cudaSuccess) return set;
        }
      }
    }
    return cudaSuccess;
  }();
  return e;
}

// plan: the planner's, for this instance: its grid split-K factor (none of the splits empty;
// whether the sums go through p.workspace), warps per CTA (<= Cfg::max_warps(Cfg::rows_for(p.m),
// col_warps, the opt-in shared memory)), warps per k slice (col_warps) and whether the single-row
// instance runs (MixedPlan::single_row).
template <class Cfg>
cudaError_t launch_mixed_decode(MixedGemmParams const& p, MixedPlan const& plan,
                                cudaStream_t stream) {
  const int warps = plan.warps, col_warps = plan.col_warps;
  if (!Cfg::col_warps_valid(col_warps) || warps < col_warps || warps % col_warps != 0 ||
      warps > Cfg::kMaxWarps)
    return cudaErrorInvalidValue;
  if (plan.single_row) {  // the planner's rule (MixedPlan::single_row), held here
    const GroupShape groups(p);
    if (p.m != 1 || col_warps != 1 || !Cfg::single_row_fits(groups.size, groups.last + 1))
      return cudaErrorInvalidValue;
  }
  const cudaError_t prepared = prepare_mixed_decode<Cfg>();
  if (prepared != cudaSuccess) return prepared;
  const int smem = Cfg::smem_bytes(Cfg::rows_for(p.m), warps, col_warps);
  // sm_90: a programmatic dependent of what precedes it in the stream (grid_dependency_sm90.hpp).
  return launch_split_k<typename Cfg::Element>(
      decode_kernel_for<Cfg>(col_warps, p.gated, plan.single_row), p, plan,
      Cfg::kTileM, col_warps * Cfg::kWarpN,
      dim3(32 * col_warps, warps / col_warps), smem, current_cc_major() >= 9, stream,
      plan.early_dependents);
}

// The CTAs per SM of launch_mixed_decode<Cfg>'s kernel for `plan` on the current device (the
// occupancy calculator), for the test that holds the planner's model against the GPU;
// cudaErrorInvalidValue for a plan of a CTA shape the launcher does not run. The plan keeps the
// shared memory, not M: it must be the launcher's for some M <= kTileM.
template <class Cfg>
cudaError_t mixed_decode_occupancy(MixedPlan const& plan, int* ctas_per_sm) {
  const int warps = plan.warps, col_warps = plan.col_warps;
  if (!Cfg::col_warps_valid(col_warps) || warps < col_warps || warps % col_warps != 0 ||
      warps > Cfg::kMaxWarps || plan.threads != 32 * warps)
    return cudaErrorInvalidValue;
  bool launched = false;
  for (int m = 1; m <= Cfg::kTileM; ++m)
    launched |= Cfg::smem_bytes(Cfg::rows_for(m), warps, col_warps) == plan.smem_bytes;
  if (!launched) return cudaErrorInvalidValue;
  const cudaError_t prepared = prepare_mixed_decode<Cfg>();
  if (prepared != cudaSuccess) return prepared;
  return cudaOccupancyMaxActiveBlocksPerMultiprocessor(
      ctas_per_sm, decode_kernel_for<Cfg>(col_warps, plan.gated, plan.single_row), 32 * warps,
      plan.smem_bytes);
}

}  // namespace mixed
}  // namespace cute_gemm
