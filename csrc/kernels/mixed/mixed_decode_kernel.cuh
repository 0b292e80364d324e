#pragma once
// Mixed-input GEMM for decode (M <= 8): out[M, N] = A[M, K] @ dequant(W)^T (+ bias), the same
// contract and packed format as mixed_gemm_kernel.cuh, built around what limits that kernel at
// small M (benchmarks/results/NOTES.md, sessions 5-7). Not the memory system: its access pattern
// streams at 4.0-4.5 TB/s with no arithmetic (benchmarks/stream_probe.cu). What costs is each
// warp's instruction stream per weight byte, the CTA barrier per k block and the split-K kernel.
//   - Every warp copies its own 4 n8 blocks of weights and its columns' scales (and zeros) into
//     its own slice of each stage (cp.async) and waits for its own copies (cp.async.wait_group).
//   - A k group is col_warps warps side by side (32 columns each) that share the activation rows
//     of each stage, copied by all of them. With col_warps = 1 a warp is an independent pipeline
//     (a __syncwarp per k block, no barrier in the loop; a slow warp delays nobody), but it reads
//     the activations from L2 once per 32 columns: M * 256 bytes per 2 KB of weights per k block,
//     as many bytes as the weights at M = 8. With 2 or 4 the group meets at its own mbarrier per
//     k block (only its own warps; a bar.sync with a run-time id would reserve all 16 hardware
//     barriers and limit the CTAs per SM), and the activations cost a half or a quarter of that
//     in L2 traffic and shared memory: at M = 5-8, and for wide layers, that keeps more warps per
//     SM.
//   - A CTA is 1-16 warps: k groups on the same columns, each a slice of the CTA's k range; their
//     sums meet in shared memory (in k group order) and group 0 writes the output. Decode needs a
//     K split to fill the GPU (8192^2 has 256 column tiles for 132 SMs x 16 warps), and this one
//     needs neither a workspace nor a second kernel; the grid splits K only where 16 warps per
//     column tile are not enough.
//   - The transposed product out^T = dequant(W) @ A^T: the weights are the mma's A operand (16
//     weight rows per m16n8k16), tokens its N of 8. A lane's B fragments of n8 blocks 2p and
//     2p + 1 (column g of each) are exactly the A fragment of rows g and g + 8 of the 16 rows they
//     form, so the packed format is unchanged. Against the weights-as-B kernel this halves the
//     mmas and the ldmatrix of the activations at M <= 8, and the accumulators.
//   - Only the M rows of A are stored; the ldmatrix rows past M read a zeroed 256-byte buffer.
//     Rows are 16-byte units XOR the row (mod 8), so the 8 rows an ldmatrix reads hit 8 distinct
//     bank groups.
//   - A warp's copies are about a third of its instructions per k block if each recomputes its
//     source address, and they delay the next requests: every address is computed once and
//     advanced (5-9% faster at M = 1 on the H200).
//   - The per-group scaling of fp32 sums of a * (q - z), the split-K workspace and its reduction
//     kernel (when the grid splits K) are the mma.sync kernel's (mixed_epilogue.cuh). The
//     dequantization is exact (dequant.cuh) except for fp16 INT8 and bf16 INT4, which keep the
//     magic offset and subtract (off + z) * sum(a) per group: one mma per k16 step yields sum(a)
//     for all the warp's columns.

#include <atomic>

#include "cute_gemm/arch/copy_sm75.hpp"
#include "cute_gemm/arch/copy_sm80.hpp"
#include "cute_gemm/arch/grid_dependency_sm90.hpp"
#include "cute_gemm/arch/mbarrier_sm80.hpp"
#include "kernels/device_info.hpp"
#include "kernels/gemm/gemm_kernel.cuh"
#include "kernels/mixed/dequant.cuh"
#include "kernels/mixed/group_shape.cuh"
#include "kernels/mixed/mixed_epilogue.cuh"
#include "kernels/mixed/mixed_gemm_launch.hpp"
#include "kernels/mixed/weight_format.hpp"

namespace cute_gemm {
namespace mixed {

// TokenTiles n8 tiles of tokens (up to 8 or 16 rows of A; only 1 is instantiated: see
// generate_kernels.py); FineGroups: groups shorter than a packed k block (32, 64), scaled every 2
// k16 steps.
template <class Element_, int Bits, int TokenTiles, bool FineGroups>
struct MixedDecodeConfig {
  using Element = Element_;
  static constexpr int kBits = Bits;
  // A CTA is 1..kMaxWarps warps: col_warps warps side by side on 32 columns each (a k group), and
  // k groups on slices of the CTA's k range (run-time, blockDim = (32 col_warps, k groups): the
  // dispatcher picks them so that a wave fills the GPU without a second kernel).
  static constexpr int kMaxWarps = 16;
  static constexpr int kMaxThreads = 32 * kMaxWarps;
  static constexpr int kMaxColWarps = 4;
  static constexpr int kBlocksPerWarp = 4;  // n8 blocks: 2 tiles of 16 weight rows
  static constexpr int kRowTiles = kBlocksPerWarp / 2;
  static constexpr int kWarpN = kBlocksPerWarp * kBlockN;  // 32 output columns per warp
  static constexpr int kTokenTiles = TokenTiles;
  static constexpr int kTileM = 8 * TokenTiles;
  static constexpr int kBlockK = block_k(Bits);  // 128 (INT4) or 64 (INT8)
  static constexpr int kKSteps = kBlockK / 16;
  // 5 stages, <= 128 registers (16 warps per SM). Measured on the H200 at M = 1 against 4 stages
  // and <= 96 registers (a few spilled): 4096x28672 22.1 vs 25.8 us, 14336x4096 12.7 vs 14.2,
  // 8192^2 13.9 vs 14.2, 28672x8192 35.7 vs 36.5 (4-warp CTAs of 128 columns then).
  static constexpr int kStages = 5;
  static constexpr bool kFineGroups = FineGroups;
  static constexpr int kStepsPerChunk = FineGroups ? 2 : kKSteps;
  static constexpr int kChunks = kKSteps / kStepsPerChunk;
  static constexpr int kScaleRows = FineGroups ? kBlockK / 32 : 1;

  // Shared memory of one k group's stage: each of its col_warps warps' slice (weights [4 blocks]
  // [32 lanes][16 B], scales then zeros [kScaleRows][32 columns]), then `rows` activation rows of
  // kBlockK (swizzled 16-byte units) that the slices share. Slices are multiples of 128 bytes,
  // so the activation rows start on one.
  static constexpr int kWeightBytes = kBlocksPerWarp * kLanes * 16;  // 2 KB
  static constexpr int kScaleBytes = kScaleRows * kWarpN * 2;
  static constexpr int kSliceBytes = kWeightBytes + 2 * kScaleBytes;
  static_assert(kSliceBytes % 128 == 0, "activation rows must start on 128 bytes");
  static constexpr int kARowBytes = kBlockK * 2;
  static constexpr int kZeroRowBytes = 256;  // what ldmatrix rows past M read
  static constexpr int kBarrierBytes = 8 * kMaxWarps;  // an mbarrier per k group (128 bytes)
  // A warp's accumulators, as the warps' sum reads them: kAccs floats per lane.
  static constexpr int kAccs = kRowTiles * kTokenTiles * 4;
  CG_HOST_DEVICE static constexpr int a_offset(int col_warps) { return col_warps * kSliceBytes; }
  CG_HOST_DEVICE static constexpr int stage_bytes(int rows, int col_warps) {
    return a_offset(col_warps) + rows * kARowBytes;
  }
  static constexpr int kStagesOffset = kZeroRowBytes + kBarrierBytes;
  // The zero row, the k groups' mbarriers, each k group's stages, then the accumulators of the
  // warps outside k group 0.
  CG_HOST_DEVICE static constexpr int smem_bytes(int rows, int warps, int col_warps) {
    return kStagesOffset + warps / col_warps * kStages * stage_bytes(rows, col_warps) +
           (warps - col_warps) * kLanes * kAccs * 4;
  }
};

template <class T>
CG_DEVICE void mma_16816(float (&d)[4], uint32_t const (&a)[4], uint32_t b0, uint32_t b1,
                         float const (&c)[4]) {
  HalfTraits<T>::MmaOp::fma(d[0], d[1], d[2], d[3], a[0], a[1], a[2], a[3], b0, b1, c[0], c[1],
                            c[2], c[3]);
}

// grid: (ceil(N / (32 col_warps)), ceil(M / kTileM), splits), blockDim = (32 col_warps, k groups).
// Split z handles k blocks [z * blocks_per_split, min((z + 1) * blocks_per_split, k_blocks)), none
// empty; k group y of its CTA the y-th of blockDim.y near-equal slices of them (empty when the
// split is shorter), warp x / 32 of the group its 32 columns x / 32 of the CTA's. The k groups'
// sums meet in shared memory, added in k group order; with split-K the CTA's fp32 sum goes to
// p.workspace ([split][M][N]) for split_k_reduce_kernel. Shared: k groups of 2 or 4 warps
// (blockDim.x 64 or 128); otherwise of 1, compiled apart so that its copies' offsets fold to
// constants (about 10% fewer instructions per k block than the run-time k group width).
template <class Cfg, bool Shared>
__global__ void __launch_bounds__(Cfg::kMaxThreads, 1)
    mixed_decode_kernel(MixedGemmParams p, int blocks_per_split, bool to_workspace) {
  using T = typename Cfg::Element;
  using D = Dequant<T>;
  constexpr int S = Cfg::kStages, BK = Cfg::kBlockK, TT = Cfg::kTokenTiles;
  constexpr int RT = Cfg::kRowTiles, NB = Cfg::kBlocksPerWarp;
  extern __shared__ uint128_t smem_raw[];
  char* smem = reinterpret_cast<char*>(smem_raw);

  const int col_warps = Shared ? blockDim.x / 32 : 1, k_groups = blockDim.y;
  // lane from a signed int, as before the k groups: with threadIdx.x % 32 (unsigned) NVVM knows
  // lane < 32, so a_off, lane * 16 and the activation swizzles become one-op remat candidates and
  // its rematerialization recomputes them in the main loop (418 vs 389 SASS instructions, M = 1).
  const int lane = int(threadIdx.x) % 32, col_warp = Shared ? threadIdx.x / 32 : 0;
  const int k_group = threadIdx.y;
  const int warp = k_group * col_warps + col_warp;
  const int g = lane / 4, t = lane % 4;
  const int n_warp = (blockIdx.x * col_warps + col_warp) * Cfg::kWarpN;  // the warp's columns
  const int m0 = blockIdx.y * Cfg::kTileM;
  const int rows = min(Cfg::kTileM, p.m - m0);
  const int k_blocks = (p.k + BK - 1) / BK;
  const int split_begin = blockIdx.z * blocks_per_split;
  const int split_blocks = min(split_begin + blocks_per_split, k_blocks) - split_begin;
  const int kb_begin = split_begin + k_group * split_blocks / k_groups;
  const int n_kb = split_begin + (k_group + 1) * split_blocks / k_groups - kb_begin;
  const GroupShape groups(p);
  T const* scales = static_cast<T const*>(p.scales);
  T const* zeros = static_cast<T const*>(p.zeros);
  const bool symmetric = zeros == nullptr;

  // The zero row (every warp's rows past M read it; written by each k group's first 16 threads,
  // the same zeros) and the k groups' mbarriers, ready before any warp uses them.
  const int tid = threadIdx.x;
  if (tid < Cfg::kZeroRowBytes / 16) reinterpret_cast<uint4*>(smem)[tid] = make_uint4(0, 0, 0, 0);
  uint64_t* const bars = reinterpret_cast<uint64_t*>(smem + Cfg::kZeroRowBytes);
  if (Shared && tid == 0) mbarrier_init(bars + k_group, 32 * col_warps);
  __syncthreads();
  const int stage_bytes = Cfg::stage_bytes(rows, col_warps), a_offset = Cfg::a_offset(col_warps);
  char* gsmem = smem + Cfg::kStagesOffset + k_group * S * stage_bytes;  // the k group's stages
  const int slice = col_warp * Cfg::kSliceBytes;  // the warp's weights and scales in a stage

  // ---- global -> shared. Every source address is computed once and advanced per k block: at
  // M = 1 the copies are a third of a warp's instructions if each recomputes its address.
  const uint64_t policy = make_l2_evict_first_policy();  // weights are read once
  // Weights: lane l copies its 16 bytes of each of the warp's 4 blocks (512-byte runs); blocks
  // past N read zeros (their columns are never stored).
  uint128_t const* w_src[NB];
  bool w_ok[NB];
  CG_PRAGMA_UNROLL
  for (int b = 0; b < NB; ++b) {
    const int nb = n_warp / kBlockN + b;
    w_ok[b] = nb * kBlockN < p.n;
    w_src[b] = reinterpret_cast<uint128_t const*>(p.qweight) +
               (int64_t(w_ok[b] ? nb : 0) * k_blocks + kb_begin) * kLanes + lane;
  }
  // Scales (and zeros): lanes 4 r + c (c < 4) copy 16 bytes (8 columns) of group row r.
  const int scale_rows = Cfg::kFineGroups ? BK >> groups.shift : 1;
  const int s_row = lane / 4;
  const bool s_copier = s_row < scale_rows;
  const int s_col = n_warp + (lane % 4) * 8;
  const bool s_ok = s_col < p.n;
  T const* s_src = scales + (s_ok ? s_col : 0);
  T const* z_src = symmetric ? nullptr : zeros + (s_ok ? s_col : 0);
  // Activations, shared by the k group's warps: rows * kBlockK / 8 units of 16 bytes per k block;
  // thread x of the group copies units x + 32 col_warps j: row a_row + j * rows_per_iter, unit
  // a_unit of it, stored at unit a_unit ^ (row % 8).
  constexpr int kUnitsPerRow = BK / 8;
  constexpr int kUnitIters = (Cfg::kTileM * kUnitsPerRow + kLanes - 1) / kLanes;  // 1 warp
  const int rows_per_iter = 32 * col_warps / kUnitsPerRow;
  const int copier = Shared ? int(threadIdx.x) : lane;  // the thread's index in its k group
  const int a_row = copier / kUnitsPerRow, a_unit = copier % kUnitsPerRow;
  const int64_t a_iter_stride = int64_t(rows_per_iter) * p.lda;
  T const* a_src = static_cast<T const*>(p.a) + int64_t(m0 + min(a_row, rows - 1)) * p.lda +
                   int64_t(kb_begin) * BK + a_unit * 8;
  T const* const a_fallback = static_cast<T const*>(p.a);  // the address of zero-filled copies
  int a_k = kb_begin * BK + a_unit * 8;                       // K column of the lane's unit

  // Copy split-local k block `next` into stage `stage`; each is called for next = 0, 1, 2, ... in
  // order, since it advances its source addresses. The activations come from an earlier kernel,
  // so the prologue issues them after the dependency wait.
  auto load_weights = [&](int next, int stage) {
    if (next >= n_kb) return;
    char* st = gsmem + stage * stage_bytes + slice;
    CG_PRAGMA_UNROLL
    for (int b = 0; b < NB; ++b) {
      SM80_CP_ASYNC_CACHEGLOBAL_ZFILL_POLICY::copy(
          *w_src[b], reinterpret_cast<uint128_t*>(st)[b * kLanes + lane], w_ok[b], policy);
      w_src[b] += kLanes;
    }
    if (s_copier) {
      const int kb = kb_begin + next;
      const int grp = groups.per_channel ? 0 : min(groups.of(kb * BK) + s_row, groups.last);
      const size_t at = size_t(unsigned(grp)) * unsigned(p.n);
      uint128_t* dst = reinterpret_cast<uint128_t*>(st + Cfg::kWeightBytes) + lane;
      SM80_CP_ASYNC_CACHEGLOBAL_ZFILL::copy(*reinterpret_cast<uint128_t const*>(s_src + at),
                                            dst[0], s_ok);
      if (!symmetric) {
        SM80_CP_ASYNC_CACHEGLOBAL_ZFILL::copy(*reinterpret_cast<uint128_t const*>(z_src + at),
                                              dst[Cfg::kScaleBytes / 16], s_ok);
      }
    }
  };
  auto load_activations = [&](int next, int stage) {
    if (next >= n_kb) return;
    char* st = gsmem + stage * stage_bytes + a_offset;
    const bool k_ok = a_k < p.k;  // columns past K read as zeros
    CG_PRAGMA_UNROLL
    for (int j = 0; j < kUnitIters; ++j) {
      const int r = a_row + j * rows_per_iter;
      if (j * rows_per_iter >= rows) break;  // warp-uniform
      if (r < rows) {
        T const* src = k_ok ? a_src + j * a_iter_stride : a_fallback;
        SM80_CP_ASYNC_CACHEGLOBAL_ZFILL::copy(
            *reinterpret_cast<uint128_t const*>(src),
            reinterpret_cast<uint128_t*>(st + r * Cfg::kARowBytes)[a_unit ^ (r % 8)], k_ok);
      }
    }
    a_src += BK;
    a_k += BK;
  };

  // ---- prologue: the first stages' weights go out before waiting for the previous kernel
  // (programmatic dependent launch on sm_90); group s then holds stage s's activations, group 0
  // also all the prologue's weights.
  CG_PRAGMA_UNROLL
  for (int s = 0; s < S - 1; ++s) load_weights(s, s);
  grid_dependency_wait();  // also orders this kernel's output writes after the previous kernel
  CG_PRAGMA_UNROLL
  for (int s = 0; s < S - 1; ++s) {
    load_activations(s, s);
    cp_async_fence();
  }

  // acc / part: (row tile, token tile, c0..c3): rows g (c0, c1) and g + 8 (c2, c3) of the row
  // tile, tokens 2t (c0, c2) and 2t + 1 (c1, c3) of the token tile.
  float acc[RT][TT][4], part[RT][TT][4];
  CG_PRAGMA_UNROLL
  for (int r = 0; r < RT; ++r) {
    CG_PRAGMA_UNROLL
    for (int tt = 0; tt < TT; ++tt) {
      CG_PRAGMA_UNROLL
      for (int v = 0; v < 4; ++v) acc[r][tt][v] = 0.f;
    }
  }
  // Biased dequantization (dequant.cuh; fp16 INT8, bf16 INT4): the weight fragments keep the
  // offset; per k16 step one more mma against an all-ones A fragment accumulates each token's
  // S = sum_k a_k (bacc: c0, c2 token 2t; c1, c3 token 2t + 1), shared by all the warp's columns,
  // and a column's chunk sum is part - (off + z) S; zoff[b] = off + z of block b's column g.
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
  float bacc[TT][4];
  // ldmatrix.x4 of 8 token rows x 32 k (pair pr = k16 steps 2 pr, 2 pr + 1): lane l addresses row
  // r = l % 8 of matrix q = l / 8, unit 4 pr + q, stored at unit (4 pr + q) ^ r = (4 pr) ^ u with
  // u = q ^ r < 8: u for even pr, u ^ 4 for odd, + 8 units (128 bytes) for pr >= 2. Rows past M
  // read the zero row instead (any offset within it).
  const int lr = lane % 8, u = (lane / 8) ^ lr;
  int a_off[TT][2];  // per token tile and pr % 2, from the stage's activation base; -1: zero row
  CG_PRAGMA_UNROLL
  for (int tt = 0; tt < TT; ++tt) {
    const int row = 8 * tt + lr;
    a_off[tt][0] = row < rows ? row * Cfg::kARowBytes + u * 16 : -1;
    a_off[tt][1] = row < rows ? row * Cfg::kARowBytes + (u ^ 4) * 16 : -1;
  }
  const float zero[4] = {0.f, 0.f, 0.f, 0.f};

  int read_stage = 0, write_stage = S - 1;  // the stages of blocks i and i + S - 1
  CG_PRAGMA_NO_UNROLL
  for (int i = 0; i < n_kb; ++i) {
    cp_async_wait<S - 2>();
    // Every thread's copies of block i landed, and every warp of the k group is done with block
    // i - 1 (whose stage the next copies overwrite): the warp alone, or the group's warps that
    // share the activations (phase i of the group's mbarrier).
    if constexpr (!Shared) {
      __syncwarp();
    } else {
      mbarrier_arrive(bars + k_group);
      mbarrier_wait_parity(bars + k_group, i & 1);
    }
    load_weights(i + S - 1, write_stage);
    load_activations(i + S - 1, write_stage);
    cp_async_fence();
    write_stage = write_stage == S - 1 ? 0 : write_stage + 1;

    char const* st = gsmem + read_stage * stage_bytes;
    read_stage = read_stage == S - 1 ? 0 : read_stage + 1;
    uint4 w[NB];
    CG_PRAGMA_UNROLL
    for (int b = 0; b < NB; ++b) {
      w[b] = reinterpret_cast<uint4 const*>(st + slice)[b * kLanes + lane];
    }
    T const* s_base = reinterpret_cast<T const*>(st + slice + Cfg::kWeightBytes) + g;
    char const* a_base[TT][2];
    CG_PRAGMA_UNROLL
    for (int tt = 0; tt < TT; ++tt) {
      CG_PRAGMA_UNROLL
      for (int h = 0; h < 2; ++h)
        a_base[tt][h] = a_off[tt][h] < 0 ? smem : st + a_offset + a_off[tt][h];
    }

    CG_PRAGMA_UNROLL
    for (int c = 0; c < Cfg::kChunks; ++c) {
      const int grow = Cfg::kFineGroups ? (32 * c) >> groups.shift : 0;
      if (!symmetric) {  // warp-uniform; symmetric weights keep the constants set before the loop
        CG_PRAGMA_UNROLL
        for (int b = 0; b < NB; ++b) {
          set_zero_point(b, HalfTraits<T>::to_float(
                                s_base[Cfg::kScaleBytes / 2 + grow * Cfg::kWarpN + 8 * b]));
        }
      }
      CG_PRAGMA_UNROLL
      for (int pr = c * Cfg::kStepsPerChunk / 2; pr < (c + 1) * Cfg::kStepsPerChunk / 2; ++pr) {
        uint32_t bf[TT][4];
        CG_PRAGMA_UNROLL
        for (int tt = 0; tt < TT; ++tt) {
          SM75_U32x4_LDSM_N::copy(
              *reinterpret_cast<uint128_t const*>(a_base[tt][pr % 2] + (pr / 2) * 128), bf[tt][0],
              bf[tt][1], bf[tt][2], bf[tt][3]);
        }
        // A fragments of the pair's two k16 steps for each row tile: (r0 of block 2p, r0 of 2p + 1,
        // r1 of 2p, r1 of 2p + 1). INT4 word pr holds both steps, INT8 words 2 pr and 2 pr + 1 one
        // each.
        constexpr int kWords = Cfg::kBits == 4 ? 1 : 2, kRegs = Cfg::kBits == 4 ? 4 : 2;
        uint32_t af[RT][2][4];
        CG_PRAGMA_UNROLL
        for (int r = 0; r < RT; ++r) {
          CG_PRAGMA_UNROLL
          for (int x = 0; x < kWords; ++x) {
            uint32_t lo[kRegs], hi[kRegs];
            dequant_word<T, Cfg::kBits, kBiased>(word_of(w[2 * r], kWords * pr + x), zc[2 * r], lo);
            dequant_word<T, Cfg::kBits, kBiased>(word_of(w[2 * r + 1], kWords * pr + x),
                                                 zc[2 * r + 1], hi);
            CG_PRAGMA_UNROLL
            for (int h = 0; h < 2 / kWords; ++h) {
              af[r][x + h][0] = lo[2 * h];
              af[r][x + h][1] = hi[2 * h];
              af[r][x + h][2] = lo[2 * h + 1];
              af[r][x + h][3] = hi[2 * h + 1];
            }
          }
        }
        const bool first = pr == c * Cfg::kStepsPerChunk / 2;
        CG_PRAGMA_UNROLL
        for (int r = 0; r < RT; ++r) {
          CG_PRAGMA_UNROLL
          for (int tt = 0; tt < TT; ++tt) {
            if (first) {
              mma_16816<T>(part[r][tt], af[r][0], bf[tt][0], bf[tt][1], zero);
            } else {
              mma_16816<T>(part[r][tt], af[r][0], bf[tt][0], bf[tt][1], part[r][tt]);
            }
            mma_16816<T>(part[r][tt], af[r][1], bf[tt][2], bf[tt][3], part[r][tt]);
          }
        }
        if constexpr (kBiased) {
          CG_PRAGMA_UNROLL
          for (int tt = 0; tt < TT; ++tt) {
            if (first) {
              mma_16816<T>(bacc[tt], ones_a, bf[tt][0], bf[tt][1], zero);
            } else {
              mma_16816<T>(bacc[tt], ones_a, bf[tt][0], bf[tt][1], bacc[tt]);
            }
            mma_16816<T>(bacc[tt], ones_a, bf[tt][2], bf[tt][3], bacc[tt]);
          }
        }
      }
      if constexpr (kBiased) {  // part -= (off + z) S
        CG_PRAGMA_UNROLL
        for (int r = 0; r < RT; ++r) {
          CG_PRAGMA_UNROLL
          for (int tt = 0; tt < TT; ++tt) {
            CG_PRAGMA_UNROLL
            for (int v = 0; v < 4; ++v) {
              part[r][tt][v] = fmaf(-zoff[2 * r + v / 2], bacc[tt][v % 2], part[r][tt][v]);
            }
          }
        }
      }
      // acc += scale * part: rows g (c0, c1) and g + 8 (c2, c3) of row tile r are the warp's
      // columns 16 r + g (+ 8).
      CG_PRAGMA_UNROLL
      for (int r = 0; r < RT; ++r) {
        const float s_lo = HalfTraits<T>::to_float(s_base[grow * Cfg::kWarpN + 16 * r]);
        const float s_hi = HalfTraits<T>::to_float(s_base[grow * Cfg::kWarpN + 16 * r + 8]);
        CG_PRAGMA_UNROLL
        for (int tt = 0; tt < TT; ++tt) {
          acc[r][tt][0] = fmaf(s_lo, part[r][tt][0], acc[r][tt][0]);
          acc[r][tt][1] = fmaf(s_lo, part[r][tt][1], acc[r][tt][1]);
          acc[r][tt][2] = fmaf(s_hi, part[r][tt][2], acc[r][tt][2]);
          acc[r][tt][3] = fmaf(s_hi, part[r][tt][3], acc[r][tt][3]);
        }
      }
    }
  }
  cp_async_wait<0>();
  grid_launch_dependents();  // the next kernel may start streaming its weights

  // ---- the k groups' sum, in k group order: the warps of groups 1.. park their accumulators,
  // each warp of group 0 adds those of its columns. Layout [warp - col_warps][value][lane]:
  // conflict-free.
  if (k_groups > 1) {
    float* parked =
        reinterpret_cast<float*>(smem + Cfg::kStagesOffset + k_groups * S * stage_bytes);
    if (k_group > 0) {
      float* mine = parked + (warp - col_warps) * Cfg::kAccs * kLanes + lane;
      CG_PRAGMA_UNROLL
      for (int r = 0; r < RT; ++r) {
        CG_PRAGMA_UNROLL
        for (int tt = 0; tt < TT; ++tt) {
          CG_PRAGMA_UNROLL
          for (int v = 0; v < 4; ++v) mine[((r * TT + tt) * 4 + v) * kLanes] = acc[r][tt][v];
        }
      }
    }
    __syncthreads();
    if (k_group > 0) return;
    for (int y = 1; y < k_groups; ++y) {
      float const* theirs =
          parked + ((y - 1) * col_warps + col_warp) * Cfg::kAccs * kLanes + lane;
      CG_PRAGMA_UNROLL
      for (int r = 0; r < RT; ++r) {
        CG_PRAGMA_UNROLL
        for (int tt = 0; tt < TT; ++tt) {
          CG_PRAGMA_UNROLL
          for (int v = 0; v < 4; ++v) acc[r][tt][v] += theirs[((r * TT + tt) * 4 + v) * kLanes];
        }
      }
    }
  }

  // ---- epilogue (k group 0): value v of (r, tt) is column n_warp + 16 r + g + 8 (v / 2), token
  // m0 + 8 tt + 2 t + v % 2.
  float* ws = static_cast<float*>(p.workspace) + int64_t(blockIdx.z) * p.m * p.n;
  CG_PRAGMA_UNROLL
  for (int r = 0; r < RT; ++r) {
    CG_PRAGMA_UNROLL
    for (int tt = 0; tt < TT; ++tt) {
      CG_PRAGMA_UNROLL
      for (int v = 0; v < 4; ++v) {
        const int col = n_warp + 16 * r + g + 8 * (v / 2);
        const int row = m0 + 8 * tt + 2 * t + v % 2;
        if (col >= p.n || row >= p.m) continue;
        if (to_workspace) {
          ws[int64_t(row) * p.n + col] = acc[r][tt][v];
        } else {
          store_out_one<T>(p, row, col, acc[r][tt][v]);
        }
      }
    }
  }
}

// The kernel may use all the shared memory a CTA can opt in to (set once per process).
inline int decode_smem_limit() {
  return cached_device_attribute<cudaDevAttrMaxSharedMemoryPerBlockOptin>(48 * 1024);
}
template <class Cfg>
cudaError_t prepare_mixed_decode() {
  static const cudaError_t e = [] {
    const cudaError_t alone = cudaFuncSetAttribute(mixed_decode_kernel<Cfg, false>,
                                                   cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                   decode_smem_limit());
    if (alone != cudaSuccess) return alone;
    return cudaFuncSetAttribute(mixed_decode_kernel<Cfg, true>,
                                cudaFuncAttributeMaxDynamicSharedMemorySize, decode_smem_limit());
  }();
  return e;
}

template <class Cfg>
int decode_rows(int m) {
  return m < 1 ? 1 : (m < Cfg::kTileM ? m : Cfg::kTileM);
}

// Whether `col_warps` warps side by side can share a k group's activations: 1, 2 or 4.
template <class Cfg>
bool decode_col_warps_valid(int col_warps) {
  return col_warps == 1 || col_warps == 2 || col_warps == Cfg::kMaxColWarps;
}

// The instantiation that runs k groups of col_warps warps.
template <class Cfg>
auto decode_kernel_for(int col_warps) {
  return col_warps > 1 ? mixed_decode_kernel<Cfg, true> : mixed_decode_kernel<Cfg, false>;
}

// The most warps per CTA (<= kMaxWarps, a multiple of col_warps) whose stages fit in shared memory
// at M rows; 0 when not even one k group fits. One token tile, col_warps 1: 16 up to M = 2, 8 at
// M = 8 (INT4, 227 KB).
template <class Cfg>
int mixed_decode_max_warps(int m, int col_warps) {
  if (!decode_col_warps_valid<Cfg>(col_warps)) return 0;
  const int rows = decode_rows<Cfg>(m), limit = decode_smem_limit();
  int warps = Cfg::kMaxWarps;
  while (warps > 0 && Cfg::smem_bytes(rows, warps, col_warps) > limit) warps -= col_warps;
  return warps;
}

// CTAs of `warps` warps (k groups of col_warps) resident per SM at M rows (the occupancy
// calculator, cached per row count, warp count and col_warps): the dispatcher sizes the grid to
// one full wave of them. 1 when it cannot tell.
template <class Cfg>
int mixed_decode_ctas_per_sm(int m, int warps, int col_warps) {
  static std::atomic<int> cache[Cfg::kTileM + 1][Cfg::kMaxWarps + 1][Cfg::kMaxColWarps + 1] = {};
  if (!decode_col_warps_valid<Cfg>(col_warps)) return 1;
  const int rows = decode_rows<Cfg>(m);
  warps = warps < col_warps ? col_warps : (warps > Cfg::kMaxWarps ? Cfg::kMaxWarps : warps);
  warps -= warps % col_warps;
  int ctas = cache[rows][warps][col_warps].load(std::memory_order_relaxed);
  if (ctas > 0) return ctas;
  if (prepare_mixed_decode<Cfg>() == cudaSuccess) {
    ctas = resident_ctas_per_sm(decode_kernel_for<Cfg>(col_warps), 32 * warps,
                                Cfg::smem_bytes(rows, warps, col_warps));
  } else {
    cudaGetLastError();  // clear the error
    ctas = 1;
  }
  cache[rows][warps][col_warps].store(ctas, std::memory_order_relaxed);
  return ctas;
}

// splits, warps, col_warps: the dispatcher's grid split-K factor (none empty; > 1 needs
// p.workspace), warps per CTA (<= mixed_decode_max_warps(p.m, col_warps)) and warps per k group.
template <class Cfg>
cudaError_t launch_mixed_decode(MixedGemmParams const& p, int splits, int warps, int col_warps,
                                cudaStream_t stream) {
  if (!decode_col_warps_valid<Cfg>(col_warps) || warps < col_warps || warps % col_warps != 0 ||
      warps > Cfg::kMaxWarps)
    return cudaErrorInvalidValue;
  const cudaError_t prepared = prepare_mixed_decode<Cfg>();
  if (prepared != cudaSuccess) return prepared;
  const int smem = Cfg::smem_bytes(decode_rows<Cfg>(p.m), warps, col_warps);
  // sm_90: a programmatic dependent of what precedes it in the stream (grid_dependency_sm90.hpp).
  return launch_split_k<typename Cfg::Element>(
      decode_kernel_for<Cfg>(col_warps), p, Cfg::kTileM, col_warps * Cfg::kWarpN,
      dim3(32 * col_warps, warps / col_warps), smem, splits, current_cc_major() >= 9, stream);
}

}  // namespace mixed
}  // namespace cute_gemm
