#pragma once
// Mixed-input GEMM: out[M, N] = A[M, K] @ dequant(W)^T (+ bias), A fp16/bf16, W INT4/INT8 packed
// as in weight_format.hpp, fp32 accumulation on mma.sync m16n8k16.
//
// Built for decode (small M), where the time is the weight stream, and written to spend as few
// instructions per weight as possible (at M = 1 the tensor cores idle; the issue slots are what a
// warp can run out of):
//   - A CTA of 4 warps owns 128 output columns (each warp 4 n8 blocks) and a range of K (split-K
//     across CTAs fills every SM even when N / 128 is small). Its A tile is shared by the 4 warps
//     and each A fragment feeds 4 n8 blocks.
//   - Weights, their scales (and zeros) and the activation tile of each k block travel together
//     through a kStages-deep cp.async pipeline in shared memory. Weights use an L2 evict-first
//     policy (read once); in shared memory they keep the packed order, so each lane reads its own
//     16 bytes per n8 block (conflict-free LDS.128). Source addresses are computed once and
//     advanced by a constant per k block. Activation rows past M are zero-filled once, before the
//     loop, and never loaded again.
//   - Weights are dequantized in registers to the integers q - z (dequant.cuh: 9 instructions per
//     8 INT4 weights in fp16) and the mma accumulates a * (q - z) exactly in fp32. The group scale
//     is applied afterwards, once per group and output element (one FFMA per accumulator), instead
//     of once per weight. For groups shorter than a k block (32, 64) this happens every 2 k16 steps
//     (kFineGroups), otherwise once per k block.
//   - Split-K partial sums are added in split order (deterministic): through an fp32 workspace and
//     a second kernel, or, on request on sm_90, in the same kernel with the splits of a column tile
//     forming a thread block cluster that adds through distributed shared memory (slower on the
//     H200 as measured: see mixed_dispatch.cu). Without split-K the kernel writes `out` itself.
//   - On sm_90 the kernels are programmatic dependent launches: the first stages' weights are
//     requested before waiting for the previous kernel in the stream (grid_dependency_sm90.hpp).

#include "cute_gemm/arch/cluster_sm90.hpp"
#include "cute_gemm/arch/grid_dependency_sm90.hpp"
#include "cute_gemm/composed_layout.hpp"
#include "cute_gemm/copy_atom.hpp"
#include "cute_gemm/mma_atom.hpp"
#include "kernels/device_info.hpp"
#include "kernels/gemm/gemm_kernel.cuh"
#include "kernels/mixed/dequant.cuh"
#include "kernels/mixed/group_shape.cuh"
#include "kernels/mixed/mixed_epilogue.cuh"
#include "kernels/mixed/mixed_gemm_launch.hpp"
#include "kernels/mixed/weight_format.hpp"

namespace cute_gemm {
namespace mixed {

// Warps: 4 (128 columns per CTA) at M <= 16, where more CTAs keep more weight bytes in flight;
// 8 (256 columns) for taller M tiles, where each CTA re-reads its rows of A from L2 and a wider
// tile halves that traffic (at M = 64 and 128 columns it was twice the weight bytes).
template <class Element_, int Bits, int MTiles, bool FineGroups, int Warps>
struct MixedConfig {
  using Element = Element_;
  static constexpr int kBits = Bits;
  static constexpr int kWarps = Warps;
  static constexpr int kThreads = 32 * kWarps;
  // n8 blocks per warp. 8 at M <= 16 (256 columns per CTA) was measured on the H200: better for
  // K = 28672 but worse for 8192x8192 and 4096x4096 (fewer CTAs per SM), so 4.
  static constexpr int kBlocksPerWarp = 4;
  static constexpr int kBlocksPerCta = kWarps * kBlocksPerWarp;     // 16 or 32
  static constexpr int kTileN = kBlocksPerCta * kBlockN;            // 128 or 256 columns
  static constexpr int kTileM = 16 * MTiles;
  static constexpr int kBlockK = block_k(Bits);  // 128 (INT4) or 64 (INT8) per packed block
  static constexpr int kKSteps = kBlockK / 16;
  // Pipeline depth and CTAs per SM (the register cap __launch_bounds__ asks for). At M <= 16:
  // INT4 4 stages (56 KB of shared memory, <= 128 registers: 4 CTAs per SM); INT8 3 stages (42 KB,
  // <= 102 registers: 5 CTAs). Measured on the H200 at M = 1 and 16: 3 stages x 5 CTAs made INT4
  // 10-15% slower (8192^2 M=1 16.3 vs 14.6 us) and INT8 4-15% faster (28672x8192 M=16 62.2 vs
  // 72.7 us).
  static constexpr int kStages = MTiles == 1 && Bits == 8 ? 3 : 4;
  static constexpr int kMinCtasPerSm = MTiles == 1 ? (Bits == 8 ? 5 : 4) : 1;
  static constexpr int kMaxGroups = kBlockK / 32;  // groups per k block at the smallest group (32)
  // k16 steps between two applications of the group scales (see the file comment).
  static constexpr bool kFineGroups = FineGroups;
  static constexpr int kStepsPerChunk = FineGroups ? 2 : kKSteps;
  static constexpr int kChunks = kKSteps / kStepsPerChunk;
  static constexpr int kStepsPerWord = Bits == 4 ? 2 : 1;  // k16 steps one packed word feeds

  // Warp w owns n8 blocks 4w .. 4w+3 of the CTA's 128 columns: natural (atom, warp, repeat) ->
  // (atom, repeat, warp) as in the GEMM.
  using Mma = TiledMMA<MMA_Atom<typename HalfTraits<Element>::MmaOp>, 1, kWarps,
                       Layout<Int<kTileM>>,
                       Layout<Shape<_8, Int<kWarps>, Int<kBlocksPerWarp>>,
                              Stride<_1, Int<8 * kBlocksPerWarp>, _8>>,
                       Layout<Int<kBlockK>>>;
  using CopyA = TiledMmaCopy<LdsmA_x4, Mma, MmaOperand::kA>;
  // global -> shared for A: kBlockK / 8 threads per row, 16 bytes each.
  static constexpr int kChunksA = kBlockK / 8;
  static_assert(kThreads / kChunksA <= kTileM, "one pass of the A copy must fit the tile");
  using G2S = TiledCopy<CpAsync16, Layout<Shape<Int<kThreads / kChunksA>, Int<kChunksA>>,
                                          Stride<Int<kChunksA>, _1>>,
                        Layout<Shape<_1, _8>>>;
  // One stage's (rows, kBlockK) activation tile, K contiguous; the row's low 3 bits XOR the
  // 16-byte unit. Stage s starts kAStageElems elements further on: a multiple of the swizzle's
  // period (it permutes offset bits below 2^(3 + 3 + log2(kBlockK) - 3)), so a stage's addresses
  // are stage 0's plus a constant, and the per-thread ldmatrix addresses stay loop-invariant.
  using SmemA = decltype(composition(
      Swizzle<3, 3, log2_of(kBlockK) - 3>{},
      make_layout(make_shape(Int<kTileM>{}, Int<kBlockK>{}), make_stride(Int<kBlockK>{}, _1{}))));
  static constexpr int kAStageElems = kTileM * kBlockK;
  static_assert(kAStageElems % (8 * kBlockK) == 0, "stage offsets must not meet the swizzle");

  // Shared memory, per stage: weights [blocks][32 lanes][16 B], scales and zeros
  // [kMaxGroups][kTileN columns], then the activation buffers of all stages.
  static constexpr int kWeightBytes = kBlocksPerCta * 32 * 16;        // 8 or 16 KB
  static constexpr int kScaleElems = kMaxGroups * kTileN;
  static constexpr int kStageBytes = kWeightBytes + 2 * kScaleElems * 2;
  static constexpr int kSmemBytes = kStages * kStageBytes + kTileM * kBlockK * kStages * 2;
  // The cluster reduction's fp32 [kTileM][kAccStride] tile reuses the pipeline's shared memory;
  // 8 floats of padding spread the rows of the fragment stores over the banks.
  static constexpr int kAccStride = kTileN + 8;
  static_assert(kTileM * kAccStride * 4 <= kSmemBytes, "accumulator tile must fit");
};

// grid: (ceil(N / kTileN), ceil(M / kTileM), splits). Split s handles k blocks
// [s * blocks_per_split, min((s + 1) * blocks_per_split, k_blocks)). With SplitReduce::kCluster
// the grid is launched with clusters of (1, 1, splits).
template <class Cfg>
__global__ void __launch_bounds__(Cfg::kThreads, Cfg::kMinCtasPerSm)
    mixed_gemm_kernel(MixedGemmParams p, int blocks_per_split, int reduce_mode) {
  using T = typename Cfg::Element;
  using D = Dequant<T>;
  using T2 = typename D::T2;
  using Mma = typename Cfg::Mma;
  using Atom = typename Mma::AtomType;
  constexpr int BM = Cfg::kTileM, BK = Cfg::kBlockK, S = Cfg::kStages;
  constexpr int NB = Cfg::kBlocksPerWarp, MT = BM / 16;
  extern __shared__ uint128_t smem_raw[];
  char* smem = reinterpret_cast<char*>(smem_raw);
  T* smem_a = reinterpret_cast<T*>(smem + S * Cfg::kStageBytes);

  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int m0 = blockIdx.y * BM;
  const int n0 = blockIdx.x * Cfg::kTileN;
  const int k_blocks = (p.k + BK - 1) / BK;
  const int kb_begin = blockIdx.z * blocks_per_split;
  const int n_kb = min(kb_begin + blocks_per_split, k_blocks) - kb_begin;
  const GroupShape groups(p);

  // ---- global -> shared, one k block per stage. Every source address is computed here once and
  // advanced by one k block per stage.
  const uint64_t policy = make_l2_evict_first_policy();
  // Weights: warp w copies the 4 n8 blocks it computes on, each lane its 16 bytes: 512-byte runs.
  // Blocks past N read block 0 instead (any valid data: those columns are never stored).
  uint128_t const* w_src[NB];
  CG_PRAGMA_UNROLL
  for (int b = 0; b < NB; ++b) {
    const int nb = n0 / 8 + NB * warp + b;
    w_src[b] = reinterpret_cast<uint128_t const*>(p.qweight) +
               (int64_t(nb * 8 < p.n ? nb : 0) * k_blocks + kb_begin) * 32 + lane;
  }
  // Scales (and zeros): `scale_rows` rows of 128 columns per stage, 16 columns of 8 each; thread
  // tid < 16 * scale_rows copies row tid / 16, chunk tid % 16. Columns past N read column 0.
  constexpr int kScaleChunks = Cfg::kTileN / 8;
  const int scale_rows = Cfg::kFineGroups ? BK >> groups.shift : 1;
  const bool scale_copier = tid < scale_rows * kScaleChunks;
  T const* scales = static_cast<T const*>(p.scales);
  T const* zeros = static_cast<T const*>(p.zeros);
  const int scale_col = n0 + (tid % kScaleChunks) * 8 < p.n ? n0 + (tid % kScaleChunks) * 8 : 0;
  const int scale_row = tid / kScaleChunks;
  auto scale_group = [&](int kb) {  // the group of row scale_row of k block kb
    return groups.per_channel ? 0 : min(groups.of(kb * BK) + scale_row, groups.last);
  };
  // Activations: rows below M only; the others were zero-filled once.
  T const* a_ptr = static_cast<T const*>(p.a);
  const auto gA = make_tensor(a_ptr + int64_t(m0) * p.lda + int64_t(kb_begin) * BK,
                              make_layout(make_shape(Int<BM>{}, Int<BK>{}),
                                          make_stride(p.lda, _1{})));
  auto sA = make_tensor(smem_a, typename Cfg::SmemA{});
  const auto g2s = get_thread_copy(typename Cfg::G2S{}, tid);
  const auto tAgA = g2s.partition_S(gA);
  auto tAsA = g2s.partition_D(sA);
  const auto cA = g2s.partition_coords(make_shape(Int<BM>{}, Int<BK>{}));
  constexpr int RA = decltype(size<1>(tAgA))::value;
  bool a_row_ok[RA];
  const int a_col = g2s_row_predicates<BM>(cA, m0, p.m, a_row_ok);
  CG_PRAGMA_UNROLL
  for (int s = 0; s < S; ++s) {
    CG_PRAGMA_UNROLL
    for (int r = 0; r < RA; ++r) {
      if (!a_row_ok[r]) {
        SM80_CP_ASYNC_CACHEGLOBAL_ZFILL::copy(
            *reinterpret_cast<uint128_t const*>(a_ptr),
            *reinterpret_cast<uint128_t*>(&tAsA(0, r, 0) + s * Cfg::kAStageElems), false);
      }
    }
  }

  // Weights, scales and zeros of k block i: they do not depend on earlier kernels.
  auto load_weights = [&](int i, int stage) {
    if (i >= n_kb) return;
    const int kb = kb_begin + i;
    char* st = smem + stage * Cfg::kStageBytes;
    CG_PRAGMA_UNROLL
    for (int b = 0; b < NB; ++b) {
      SM80_CP_ASYNC_CACHEGLOBAL_ZFILL_POLICY::copy(
          w_src[b][int64_t(i) * 32],
          reinterpret_cast<uint128_t*>(st)[(NB * warp + b) * 32 + lane], true, policy);
    }
    if (scale_copier) {
      // 32 x 32 -> 64-bit multiply-add: one IMAD.WIDE.U32 (group and N are non-negative ints).
      const size_t at = size_t(unsigned(scale_group(kb))) * unsigned(p.n) + unsigned(scale_col);
      uint128_t* s_dst = reinterpret_cast<uint128_t*>(st + Cfg::kWeightBytes) + tid;
      SM80_CP_ASYNC_CACHEGLOBAL_ZFILL::copy(*reinterpret_cast<uint128_t const*>(scales + at),
                                            s_dst[0], true);
      if (zeros != nullptr) {
        SM80_CP_ASYNC_CACHEGLOBAL_ZFILL::copy(*reinterpret_cast<uint128_t const*>(zeros + at),
                                              s_dst[Cfg::kScaleElems / 8], true);
      }
    }
  };
  // Activations of k block i: written by an earlier kernel, so only after grid_dependency_wait.
  auto load_activations = [&](int i, int stage) {
    if (i >= n_kb) return;
    // Columns past K read as zeros (the packed weight's padding then meets zeros).
    const bool col_ok = (kb_begin + i) * BK + a_col < p.k;
    CG_PRAGMA_UNROLL
    for (int r = 0; r < RA; ++r) {
      if (a_row_ok[r]) {
        SM80_CP_ASYNC_CACHEGLOBAL_ZFILL::copy(
            *reinterpret_cast<uint128_t const*>(&tAgA(0, r, 0) + int64_t(i) * BK),
            *reinterpret_cast<uint128_t*>(&tAsA(0, r, 0) + stage * Cfg::kAStageElems), col_ok);
      }
    }
  };

  auto tCrA = ThrMMA<Mma>::template partition_fragment_A<T>(make_shape(Int<BM>{}, Int<BK>{}));
  auto tCrB = ThrMMA<Mma>::template partition_fragment_B<T>(
      make_shape(Int<Cfg::kTileN>{}, Int<BK>{}));  // (4, NB, KSteps)
  // acc: the scaled sum; part: the current chunk's unscaled sum of a * (q - z). Both (4, MT, NB):
  // values c0..c3 of the m16n8 fragment: (row g, col 2t), (g, 2t + 1), (g + 8, 2t),
  // (g + 8, 2t + 1).
  auto acc = ThrMMA<Mma>::template partition_fragment_C<float>(
      make_shape(Int<BM>{}, Int<Cfg::kTileN>{}));
  auto part = make_fragment_like<float>(acc);
  clear(acc);
  auto tArA = Cfg::CopyA::retile(tCrA);
  const auto tAsA_ld = get_thread_copy(typename Cfg::CopyA{}, tid).partition_S(sA);

  // This lane's columns within the CTA tile, per n8 block b: the B fragment's column g and the
  // accumulator's column pair 2t, 2t + 1.
  const int g = lane / 4, t = lane % 4;
  const bool symmetric = zeros == nullptr;
  // Each n8 block's dequantization constants for the current group: the symmetric zero point
  // 2^(bits-1) throughout, or the group's zero points, loaded per chunk.
  ZeroConstants<T2> zc[NB];
  CG_PRAGMA_UNROLL
  for (int b = 0; b < NB; ++b) zc[b] = D::zero_constants(float(1 << (Cfg::kBits - 1)));

  // ---- prologue. The first stages' weights go out before waiting for the previous kernel
  // (programmatic dependent launch on sm_90), so their DRAM latency overlaps its tail. Group s
  // then holds stage s's activations, group 0 also all the prologue's weights.
  CG_PRAGMA_UNROLL
  for (int s = 0; s < S - 1; ++s) load_weights(s, s);
  grid_dependency_wait();
  CG_PRAGMA_UNROLL
  for (int s = 0; s < S - 1; ++s) {
    load_activations(s, s);
    cp_async_fence();
  }

  // ---- main loop
  CG_PRAGMA_NO_UNROLL
  for (int i = 0; i < n_kb; ++i) {
    cp_async_wait<S - 2>();
    __syncthreads();  // stage i % S landed; stage (i - 1) % S is free again
    const int stage = i % S;
    load_weights(i + S - 1, (i + S - 1) % S);
    load_activations(i + S - 1, (i + S - 1) % S);
    cp_async_fence();

    char const* st = smem + stage * Cfg::kStageBytes;
    T const* s_scale = reinterpret_cast<T const*>(st + Cfg::kWeightBytes);
    uint4 w[NB];
    CG_PRAGMA_UNROLL
    for (int b = 0; b < NB; ++b)
      w[b] = reinterpret_cast<uint4 const*>(st)[(NB * warp + b) * 32 + lane];

    CG_PRAGMA_UNROLL
    for (int c = 0; c < Cfg::kChunks; ++c) {
      // The chunk's group row in this stage's scales: 32 columns of K per chunk when fine.
      const int grow = Cfg::kFineGroups ? (32 * c) >> groups.shift : 0;
      T const* srow = s_scale + grow * Cfg::kTileN + NB * warp * 8;
      if (!symmetric) {  // warp-uniform; symmetric weights keep the constants set before the loop
        CG_PRAGMA_UNROLL
        for (int b = 0; b < NB; ++b) {
          zc[b] = D::zero_constants(HalfTraits<T>::to_float(srow[Cfg::kScaleElems + b * 8 + g]));
        }
      }
      CG_PRAGMA_UNROLL
      for (int j = c * Cfg::kStepsPerChunk; j < (c + 1) * Cfg::kStepsPerChunk; ++j) {
        // Dequantize step j's B fragments when j starts a packed word.
        if (j % Cfg::kStepsPerWord == 0) {
          const int wi = j / Cfg::kStepsPerWord;
          CG_PRAGMA_UNROLL
          for (int b = 0; b < NB; ++b) {
            uint32_t r[2 * Cfg::kStepsPerWord];  // (r0, r1) of steps j, j + 1 (INT4) or j (INT8)
            dequant_word<T, Cfg::kBits, false>(word_of(w[b], wi), zc[b], r);
            CG_PRAGMA_UNROLL
            for (int s = 0; s < Cfg::kStepsPerWord; ++s) {
              uint32_t* f = reinterpret_cast<uint32_t*>(&tCrB(0, b, j + s));
              f[0] = r[2 * s];
              f[1] = r[2 * s + 1];
            }
          }
        }
        copy_ldsm(LdsmA_x4{},
                  make_tensor(tAsA_ld.data() + stage * Cfg::kAStageElems, tAsA_ld.layout()), tArA,
                  j);
        const bool first = j == c * Cfg::kStepsPerChunk;
        CG_PRAGMA_UNROLL
        for (int m = 0; m < MT; ++m) {
          CG_PRAGMA_UNROLL
          for (int bi = 0; bi < NB; ++bi) {
            const int b = (m & 1) ? NB - 1 - bi : bi;  // serpentine: reuse the last B fragment
            if (first) {
              const float zero[4] = {0.f, 0.f, 0.f, 0.f};
              Atom::call(part(_, m, b), tCrA(_, m, j), tCrB(_, b, j),
                         make_tensor(zero, make_layout(_4{})));
            } else {
              Atom::call(part(_, m, b), tCrA(_, m, j), tCrB(_, b, j), part(_, m, b));
            }
          }
        }
      }
      // acc += scale * part for the accumulator's columns 2t, 2t + 1 of each block.
      CG_PRAGMA_UNROLL
      for (int b = 0; b < NB; ++b) {
        const T2 s2 = *reinterpret_cast<T2 const*>(srow + b * 8 + 2 * t);
        const float s_even = HalfTraits<T>::to_float(s2.x), s_odd = HalfTraits<T>::to_float(s2.y);
        CG_PRAGMA_UNROLL
        for (int m = 0; m < MT; ++m) {
          acc(0, m, b) = fmaf(s_even, part(0, m, b), acc(0, m, b));
          acc(1, m, b) = fmaf(s_odd, part(1, m, b), acc(1, m, b));
          acc(2, m, b) = fmaf(s_even, part(2, m, b), acc(2, m, b));
          acc(3, m, b) = fmaf(s_odd, part(3, m, b), acc(3, m, b));
        }
      }
    }
  }
  cp_async_wait<0>();
  grid_launch_dependents();  // the next kernel may start streaming its weights

  // ---- epilogue. This lane's accumulators: rows 16 m + g (+ 8), columns (NB * warp + b) * 8 + 2t
  // (+ 1) of the tile.
  if (reduce_mode == int(SplitReduce::kCluster)) {
    // Each split stores its tile to its own shared memory; after the cluster barrier, split r adds
    // float4 column groups r, r + splits, ... of all valid rows over the splits in order.
    __syncthreads();  // every warp is done with the pipeline's shared memory
    float* tile = reinterpret_cast<float*>(smem);
    CG_PRAGMA_UNROLL
    for (int m = 0; m < MT; ++m) {
      CG_PRAGMA_UNROLL
      for (int b = 0; b < NB; ++b) {
        const int col = (NB * warp + b) * 8 + 2 * t;
        const int row = 16 * m + g;
        *reinterpret_cast<float2*>(tile + row * Cfg::kAccStride + col) =
            make_float2(acc(0, m, b), acc(1, m, b));
        *reinterpret_cast<float2*>(tile + (row + 8) * Cfg::kAccStride + col) =
            make_float2(acc(2, m, b), acc(3, m, b));
      }
    }
    cluster_sync();
    const int splits = gridDim.z;
    const int rank = int(cluster_cta_rank());
    const int rows = min(BM, p.m - m0);
    constexpr int kCol4 = Cfg::kTileN / 4;
    const uint32_t tile_addr = detail::smem_addr(tile);
    for (int item = rank + splits * tid; item < rows * kCol4; item += splits * Cfg::kThreads) {
      const int row = item / kCol4, col = (item % kCol4) * 4;
      if (n0 + col >= p.n) continue;
      const uint32_t off = uint32_t(row * Cfg::kAccStride + col) * 4;
      float4 sum = make_float4(0.f, 0.f, 0.f, 0.f);
      for (int s = 0; s < splits; ++s)
        add_f32x4(sum, ld_shared_cluster_f32x4(map_shared_rank(tile_addr + off, s)));
      store_out_pair<T>(p, m0 + row, n0 + col, sum.x, sum.y);
      store_out_pair<T>(p, m0 + row, n0 + col + 2, sum.z, sum.w);
    }
    cluster_sync();  // peers may still read this CTA's tile
    return;
  }
  const bool to_workspace = reduce_mode == int(SplitReduce::kWorkspace);
  float* ws = static_cast<float*>(p.workspace) + int64_t(blockIdx.z) * p.m * p.n;
  CG_PRAGMA_UNROLL
  for (int m = 0; m < MT; ++m) {
    CG_PRAGMA_UNROLL
    for (int b = 0; b < NB; ++b) {
      const int col = n0 + (NB * warp + b) * 8 + 2 * t;
      if (col >= p.n) continue;  // N % 8 == 0: both columns of the pair are in or out
      CG_PRAGMA_UNROLL
      for (int h = 0; h < 2; ++h) {
        const int row = m0 + 16 * m + g + 8 * h;
        if (row >= p.m) continue;
        const float v0 = acc(2 * h, m, b), v1 = acc(2 * h + 1, m, b);
        if (to_workspace) {
          *reinterpret_cast<float2*>(ws + int64_t(row) * p.n + col) = make_float2(v0, v1);
        } else {
          store_out_pair<T>(p, row, col, v0, v1);
        }
      }
    }
  }
}

// Whether this build has sm_90 code for the kernel (distributed shared memory); cached.
template <class Cfg>
bool cluster_reduce_supported() {
  static const bool supported = [] {
    cudaFuncAttributes attr{};
    return cudaFuncGetAttributes(&attr, mixed_gemm_kernel<Cfg>) == cudaSuccess &&
           attr.binaryVersion >= 90;
  }();
  return supported;
}

// splits: the split-K factor the dispatcher chose, none of them empty (mixed_gemm_plan); reduce:
// how the splits meet, kNone exactly when splits == 1 (kCluster needs cluster_reduce_supported()
// and splits <= kMaxClusterSplits; kWorkspace needs p.workspace).
template <class Cfg>
cudaError_t launch_mixed(MixedGemmParams const& p, int splits, SplitReduce reduce,
                         cudaStream_t stream) {
  const int k_blocks = (p.k + Cfg::kBlockK - 1) / Cfg::kBlockK;
  const int per_split = (k_blocks + splits - 1) / splits;
  dim3 grid((p.n + Cfg::kTileN - 1) / Cfg::kTileN, (p.m + Cfg::kTileM - 1) / Cfg::kTileM, splits);
  const int smem = Cfg::kSmemBytes;
  if (smem > 48 * 1024) {
    const cudaError_t e = cudaFuncSetAttribute(
        mixed_gemm_kernel<Cfg>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (e != cudaSuccess) return e;
  }
  // sm_90: both kernels are programmatic dependents of what precedes them in the stream (see
  // grid_dependency_sm90.hpp); each waits for it before touching its outputs.
  const bool pdl = current_cc_major() >= 9;
  cudaLaunchAttribute attr[2];
  int n_attr = 0;
  if (pdl) {
    attr[n_attr].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[n_attr].val.programmaticStreamSerializationAllowed = 1;
    ++n_attr;
  }
  if (reduce == SplitReduce::kCluster) {
    attr[n_attr].id = cudaLaunchAttributeClusterDimension;
    attr[n_attr].val.clusterDim.x = 1;
    attr[n_attr].val.clusterDim.y = 1;
    attr[n_attr].val.clusterDim.z = splits;
    ++n_attr;
  }
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = dim3(Cfg::kThreads);
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  config.attrs = attr;
  config.numAttrs = n_attr;
  cudaError_t e =
      cudaLaunchKernelEx(&config, mixed_gemm_kernel<Cfg>, p, per_split, int(reduce));
  if (e != cudaSuccess || reduce != SplitReduce::kWorkspace) return e;
  return launch_split_k_reduce<typename Cfg::Element>(p, splits, pdl, stream);
}

}  // namespace mixed
}  // namespace cute_gemm
