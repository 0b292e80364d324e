#pragma once
// Mixed-input GEMM: out[M, N] = A[M, K] @ dequant(W)^T (+ bias), A fp16/bf16, W INT4/INT8 packed
// as in weight_format.hpp, fp32 accumulation on mma.sync m16n8k16. Layouts and thread-value maps:
// mixed_mma_config.hpp.
//
// Built for small M, where the time is the weight stream, and written to spend as few
// instructions per weight as possible (at M = 1 the tensor cores idle; the issue slots are what a
// warp can run out of):
//   - A CTA of 4 or 8 warps owns 128 or 256 output columns (each warp 4 n8 blocks) and a range of
//     K (split-K across CTAs fills every SM even when N / kTileN is small). Its A tile is shared by
//     the warps and each A fragment feeds 4 n8 blocks.
//   - Weights, their scales (and zeros) and the activation tile of each k block travel together
//     through a kStages-deep cp.async pipeline in shared memory. Weights use an L2 evict-first
//     policy (read once); in shared memory they keep the packed order, so each lane reads its own
//     16 bytes per n8 block (conflict-free LDS.128). Source addresses are computed once and
//     advanced by a constant per k block. Activation rows past M are zero-filled once, before the
//     loop, and never loaded again.
//   - Weights are dequantized in registers to the integers q - z (dequant.cuh; the 16-row tile
//     keeps bf16 INT4's and fp16 INT8's offset in them and subtracts it from the sums, kBiased)
//     and the mma accumulates a * (q - z) exactly in fp32. The group scale is applied afterwards,
//     once per group and output element (one FFMA per accumulator), instead of once per weight:
//     every 2 k16 steps for groups shorter than a k block (32, 64; kFineGroups), otherwise once
//     per k block.
//   - Split-K partial sums go to the fp32 workspace and split_k_reduce_kernel adds them in split
//     order (deterministic). Without split-K the kernel writes `out` itself.
//   - INT4's 16-row tile may run CTAs of 2 k slices (Cfg::kMaxKSlices): two groups of 4 warps on
//     the same columns, each with its own stages and half of the CTA's k blocks, in lockstep; the
//     second parks its sums in shared memory and the first adds them and stores. Twice the warps
//     per column tile without a workspace (Hopper's plan for gated GEMMs that run unsplit on this
//     tile: those whose K is too short for the planner's kGatedHopperSplits).
//   - Gated GEMMs (SiLU(gate) * up) without split-K gate in registers in the 16-row tile
//     (Cfg::kGatesInRegisters), compiled apart (Gated): a warp's n8 blocks 2j and 2j + 1 load the
//     weight's gate block j and up block j (mixed_epilogue.cuh's weight_block), so each lane holds
//     both sums of its outputs. Other tiles and split-K plans gate in split_k_reduce_kernel.
//   - On sm_90 the kernels are programmatic dependent launches: the first stages' weights are
//     requested before waiting for the previous kernel in the stream (grid_dependency_sm90.hpp).

#include "cute_gemm/arch/grid_dependency_sm90.hpp"
#include "cute_gemm/composed_layout.hpp"
#include "cute_gemm/copy_atom.hpp"
#include "cute_gemm/mma_atom.hpp"
#include "cute_gemm/tv_coords.hpp"
#include "kernels/device_info.hpp"
#include "kernels/gemm/gemm_kernel.cuh"
#include "kernels/mixed/dequant.cuh"
#include "kernels/mixed/group_shape.cuh"
#include "kernels/mixed/mixed_epilogue.cuh"
#include "kernels/mixed/mixed_gemm_launch.hpp"
#include "kernels/mixed/mixed_mma_config.hpp"
#include "kernels/mixed/weight_format.hpp"

namespace cute_gemm {
namespace mixed {

// The config of an instance for a real element type (__half or __nv_bfloat16): its mma.
template <class Element, int Bits, int MTiles, bool FineGroups>
using MixedKernelConfig =
    MixedConfig<Element, typename HalfTraits<Element>::MmaOp, Bits, MTiles, FineGroups>;

// grid: (ceil(N / kTileN), ceil(M / kTileM), splits), blockDim = (kThreads, KSlices). Split s
// handles k blocks [s * blocks_per_split, min((s + 1) * blocks_per_split, k_blocks)), k slice y
// of its CTA the y-th of KSlices near-equal parts of them (an empty part adds zeros), and writes
// its partial sums to the workspace when to_workspace, `out` otherwise. Gated: the kernel of gated
// GEMMs that gates in registers (launched with one split, to_workspace false). KSlices (1 or
// Cfg::kMaxKSlices) is compiled in: the one-slice kernel keeps the register cap of kMinCtasPerSm
// CTAs and carries none of the slices' indexing.
template <class Cfg, bool Gated, int KSlices>
__global__ void __launch_bounds__(Cfg::kThreads * KSlices, Cfg::kMinCtasPerSm / KSlices)
    mixed_gemm_kernel(MixedGemmParams p, int blocks_per_split, bool to_workspace) {
  using T = typename Cfg::Element;
  using D = Dequant<T>;
  using T2 = typename D::T2;
  using Mma = typename Cfg::Mma;
  using Atom = typename Mma::AtomType;
  using SmemW = typename Cfg::SmemW;  // a stage's weights, (L32, B) -> 16-byte unit
  using SmemS = typename Cfg::SmemS;  // its scales, zeros, (group row, N, scale|zero) -> element
  constexpr int BM = Cfg::kTileM, BK = Cfg::kBlockK, S = Cfg::kStages;
  constexpr int NB = Cfg::kBlocksPerWarp, MT = BM / 16;
  extern __shared__ uint128_t smem_raw[];
  // The k slice's stages (Cfg::kSmemBytes each); tid is the thread's index in its k slice.
  static_assert(KSlices == 1 || KSlices == Cfg::kMaxKSlices, "1 or the config's k slices");
  const int k_slice = KSlices > 1 ? int(threadIdx.y) : 0;
  char* smem = reinterpret_cast<char*>(smem_raw) + k_slice * Cfg::kSmemBytes;
  T* smem_a = reinterpret_cast<T*>(smem + S * Cfg::kStageBytes);

  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const auto thr_w = make_coord(lane, warp);  // in WeightTV's thread mode (L32, W)
  const int m0 = blockIdx.y * BM;
  const int n0 = blockIdx.x * Cfg::kTileN;
  const int k_blocks = mixed::k_blocks(p.k, Cfg::kBits);
  const int split_begin = blockIdx.z * blocks_per_split;
  const int split_blocks = min(split_begin + blocks_per_split, k_blocks) - split_begin;
  const int kb_begin = split_begin + k_slice * split_blocks / KSlices;
  const int n_kb = split_begin + (k_slice + 1) * split_blocks / KSlices - kb_begin;
  // The k slices run in lockstep, one CTA barrier per k block (the last slice has the most k
  // blocks): a slice past its own k blocks copies and computes nothing in the last iteration.
  const int loop_kb = split_blocks - (KSlices - 1) * split_blocks / KSlices;
  const GroupShape groups(p);

  // ---- global -> shared, one k block per stage. Every source address is computed here once and
  // advanced by one k block per stage.
  const uint64_t policy = make_l2_evict_first_policy();
  // Weights: each lane copies the 16 bytes of each of its warp's n8 blocks that it reads later
  // (WeightTV): 512-byte runs per warp and block. Blocks past N read block 0 instead (any valid
  // data: those columns are never stored).
  const auto w_blocks = slice_and_offset(make_coord(thr_w, _), typename Cfg::WeightBlocks{});
  uint128_t const* w_src[NB];
  CG_PRAGMA_UNROLL
  for (int b = 0; b < NB; ++b) {
    const int nb = n0 / 8 + get<1>(w_blocks) + get<0>(w_blocks)(b);
    w_src[b] = reinterpret_cast<uint128_t const*>(p.qweight) +
               (int64_t(nb * 8 < p.n ? weight_block<Gated>(p, nb) : 0) * k_blocks + kb_begin) *
                   32 +
               lane;
  }
  // Scales (and zeros): thread (chunk, row) = (tid % kScaleChunks, tid / kScaleChunks) of G2SScale
  // copies 16 bytes of row `row` of the k block's groups, if the k block has that many
  // (scale_rows). Its column depends on the chunk only, its row on the row only. Columns past N
  // read column 0.
  constexpr int kScaleChunks = Cfg::kScaleChunks;
  const int scale_rows = Cfg::kFineGroups ? BK >> groups.shift : 1;
  const bool scale_copier = tid < scale_rows * kScaleChunks;
  const bool zero_copier = scale_copier && p.zeros != nullptr;
  T const* scales = static_cast<T const*>(p.scales);
  T const* zeros = static_cast<T const*>(p.zeros);
  const auto chunk = make_coord(make_coord(tid % kScaleChunks, _0{}), _0{});
  using ScaleCols = typename Cfg::ScaleCopyCols;
  const int logical_col = n0 + ScaleCols{}(chunk);  // the weight's column of it when gated
  const int scale_col = logical_col < p.n ? weight_column<Gated>(p, logical_col) : 0;
  const int scale_row =
      typename Cfg::ScaleCopyRows{}(make_coord(make_coord(_0{}, tid / kScaleChunks), _0{}));
  auto scale_group = [&](int kb) {  // the group of row scale_row of k block kb
    return groups.row_of(kb * BK, scale_row);
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

  // Every copy's destination in stage 0 as a 32-bit shared-memory address, computed once and
  // pinned (a generic pointer would be converted at every copy, in the loop); stage s is
  // s * Cfg::kStageBytes (weights, scales) or s * Cfg::kAStageBytes (activations) on.
  const uint32_t stage0 = detail::smem_addr(smem);
  uint32_t w_dst[NB];
  CG_PRAGMA_UNROLL
  for (int b = 0; b < NB; ++b) {
    w_dst[b] = pinned(
        stage0 + 16 * int(SmemW{}(tile_coord<32>(typename Cfg::WeightTV{}, thr_w, b))));
  }
  // Thread tid's 16 bytes are unit tid of the stage's scales (Cfg::ScaleCopyDst), its zero
  // points as far on as the zeros lie from the scales.
  const uint32_t s_dst = pinned(stage0 + Cfg::kScaleOffset + 16 * tid);
  constexpr int kZerosBytes = int(sizeof(T)) * SmemS{}(_0{}, _0{}, _1{});
  uint32_t a_dst[RA];
  CG_PRAGMA_UNROLL
  for (int r = 0; r < RA; ++r) a_dst[r] = pinned(detail::smem_addr(&tAsA(0, r, 0)));

  // Weights, scales and zeros of k block i: they do not depend on earlier kernels. The scale and
  // zero copies are guarded copies in the weights' basic block, not branches around them.
  auto load_weights = [&](int i, int stage) {
    if (i >= n_kb) return;
    const int kb = kb_begin + i;
    const uint32_t st = stage * Cfg::kStageBytes;
    CG_PRAGMA_UNROLL
    for (int b = 0; b < NB; ++b) {
      SM80_CP_ASYNC_CACHEGLOBAL_ZFILL_POLICY::copy(w_src[b][int64_t(i) * 32], w_dst[b] + st, true,
                                                   policy);
    }
    // 32 x 32 -> 64-bit multiply-add: one IMAD.WIDE.U32 (group and N are non-negative ints).
    const size_t at = size_t(unsigned(scale_group(kb))) * unsigned(p.n) + unsigned(scale_col);
    SM80_CP_ASYNC_CACHEGLOBAL_ZFILL::copy_if(
        scale_copier, *reinterpret_cast<uint128_t const*>(scales + at), s_dst + st, true);
    SM80_CP_ASYNC_CACHEGLOBAL_ZFILL::copy_if(
        zero_copier, *reinterpret_cast<uint128_t const*>((zero_copier ? zeros : scales) + at),
        s_dst + st + kZerosBytes, true);
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
            a_dst[r] + stage * Cfg::kAStageBytes, col_ok);
      }
    }
  };

  auto tCrA = ThrMMA<Mma>::template partition_fragment_A<T>(make_shape(Int<BM>{}, Int<BK>{}));
  auto tCrB = ThrMMA<Mma>::template partition_fragment_B<T>(
      make_shape(Int<Cfg::kTileN>{}, Int<BK>{}));  // (V4, NB, KSteps)
  // acc: the scaled sum; part: the current chunk's unscaled sum of a * (q - z). Both (V4, MT, NB).
  auto acc = ThrMMA<Mma>::template partition_fragment_C<float>(
      make_shape(Int<BM>{}, Int<Cfg::kTileN>{}));
  auto part = make_fragment_like<float>(acc);
  clear(acc);
  auto tArA = Cfg::CopyA::retile(tCrA);
  // The lane's ldmatrix sources. With Cfg::kLdsmStepsByXor, m16 tile m at k16 step j of stage s
  // lies at byte offset (a_ld[m] + s * Cfg::kAStageBytes) ^ a_step_xor_bytes(j) from the
  // activation tiles' base (the swizzle moves whole k16 steps by flipping offset bits: Cfg's
  // check), so the loop keeps one offset per m16 tile instead of one per step or the swizzle's
  // arithmetic.
  const auto tAsA_ld = get_thread_copy(typename Cfg::CopyA{}, tid).partition_S(sA);
  const uint32_t a_ld_base = detail::smem_addr(smem_a);
  uint32_t a_ld[MT] = {};
  if constexpr (Cfg::kLdsmStepsByXor) {
    CG_PRAGMA_UNROLL
    for (int m = 0; m < MT; ++m) {
      a_ld[m] = pinned(detail::smem_addr(&tAsA_ld(0, m, 0)) - a_ld_base);
    }
  }

  // The lane's coordinates in the m16n8k16 atom (t = lane % 4, g = lane / 4: its column pair and
  // row in the accumulator fragment) and this thread's in the tiled MMA's thread mode
  // ((T4, G8), WM, WN).
  const int g = lane / 4, t = lane % 4;
  const auto thr_mma = make_coord(make_coord(t, g), _0{}, warp);
  const bool symmetric = zeros == nullptr;
  // Each n8 block's dequantization constants for the current group: the symmetric zero point
  // 2^(bits-1) throughout, or the group's zero points, loaded per chunk.
  const float z_sym = float(1 << (Cfg::kBits - 1));
  ZeroConstants<T2> zc[NB];
  CG_PRAGMA_UNROLL
  for (int b = 0; b < NB; ++b) zc[b] = D::zero_constants(z_sym);
  // Biased dequantization (Cfg::kBiased): the B fragments keep the offset, off + q, so part sums
  // a * (off + q); one more mma per k16 step and m16 tile, against a B fragment of ones, sums
  // each token's activations over the chunk (rsum[m], rows as part's: values 0, 1 row g, 2, 3 row
  // g + 8), and a column with zero point z takes part - (off + z) rsum: the symmetric zero point's
  // share in every chunk, z - z_sym's after it for asymmetric weights (zc is then unused).
  constexpr bool kBiased = Cfg::kBiased;
  static_assert(!kBiased || D::template kBiased<Cfg::kBits>, "the dtype's biased dequantization");
  constexpr float kBias = D::template kBias<Cfg::kBits>;
  float rsum[MT][4];
  const uint32_t ones = kBiased ? pinned(D::as_u32(D::splat(1.f))) : 0u;  // the B registers
  // part(_, _, b) -= off_z[column] * rsum, off_z of the accumulators' even and odd columns.
  auto unbias = [&](int b, float const (&off_z)[2]) {
    CG_PRAGMA_UNROLL
    for (int m = 0; m < MT; ++m) {
      CG_PRAGMA_UNROLL
      for (int v = 0; v < 4; ++v) part(v, m, b) = fmaf(-off_z[v % 2], rsum[m][v], part(v, m, b));
    }
  };

  // ---- prologue. The first stages' weights go out before waiting for the previous kernel
  // (programmatic dependent launch on sm_90), so their DRAM latency overlaps its tail. The s-th
  // committed batch of copies then holds stage s's activations, the first also all the prologue's
  // weights.
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
  for (int i = 0; i < loop_kb; ++i) {
    cp_async_wait<S - 2>();
    __syncthreads();  // stage i % S landed; stage (i - 1) % S is free again
    const int stage = i % S;
    const uint32_t a_stage = stage * Cfg::kAStageBytes;
    load_weights(i + S - 1, (i + S - 1) % S);
    load_activations(i + S - 1, (i + S - 1) % S);
    cp_async_fence();
    if constexpr (KSlices > 1) {
      if (i >= n_kb) continue;  // the slice's k blocks are done (warp-uniform)
    }

    char const* st = smem + stage * Cfg::kStageBytes;
    T const* s_scale = reinterpret_cast<T const*>(st + Cfg::kScaleOffset);
    uint4 w[NB];
    CG_PRAGMA_UNROLL
    for (int b = 0; b < NB; ++b) {
      w[b] = reinterpret_cast<uint4 const*>(st)[SmemW{}(
          tile_coord<32>(typename Cfg::WeightTV{}, thr_w, b))];
    }

    CG_PRAGMA_UNROLL
    for (int c = 0; c < Cfg::kChunks; ++c) {
      // The chunk's group row in this stage's scales (32 of K per chunk when fine), at the warp's
      // columns; the lane's B fragments (zero points) and accumulators (scales) lie at its lane and
      // value parts of BCols and AccCols from there.
      const int grow = Cfg::kFineGroups ? (32 * c) >> groups.shift : 0;
      T const* srow =
          s_scale + SmemS{}(grow, _0{}, _0{}) + mma_warp_part<typename Cfg::AccCols>(warp);
      if (!kBiased && !symmetric) {  // warp-uniform; symmetric weights keep the constants
        CG_PRAGMA_UNROLL
        for (int b = 0; b < NB; ++b) {
          const T z = srow[SmemS{}(_0{}, mma_value_part<typename Cfg::BCols>(make_coord(0, b, 0)),
                                   _1{}) +
                           mma_lane_part<typename Cfg::BCols>(t, g)];
          zc[b] = D::zero_constants(HalfTraits<T>::to_float(z));
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
            dequant_word<T, Cfg::kBits, kBiased>(word_of(w[b], wi), zc[b], r);
            CG_PRAGMA_UNROLL
            for (int s = 0; s < Cfg::kStepsPerWord; ++s) {
              uint32_t* f = reinterpret_cast<uint32_t*>(&tCrB(0, b, j + s));
              f[0] = r[2 * s];
              f[1] = r[2 * s + 1];
            }
          }
        }
        if constexpr (Cfg::kLdsmStepsByXor) {
          CG_PRAGMA_UNROLL
          for (int m = 0; m < MT; ++m) {
            uint32_t* d = reinterpret_cast<uint32_t*>(&tArA(0, m, j));
            SM75_U32x4_LDSM_N::copy(a_ld_base + ((a_ld[m] + a_stage) ^ Cfg::a_step_xor_bytes(j)),
                                    d[0], d[1], d[2], d[3]);
          }
        } else {
          copy_ldsm(LdsmA_x4{},
                    make_tensor(tAsA_ld.data() + stage * Cfg::kAStageElems, tAsA_ld.layout()),
                    tArA, j);
        }
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
          if constexpr (kBiased) {
            auto const& a = *reinterpret_cast<uint32_t const(*)[4]>(&tCrA(0, m, j));
            if (first) {
              const float zero[4] = {0.f, 0.f, 0.f, 0.f};
              mma_16816<typename Cfg::MmaOp>(rsum[m], a, ones, ones, zero);
            } else {
              mma_16816<typename Cfg::MmaOp>(rsum[m], a, ones, ones, rsum[m]);
            }
          }
        }
      }
      if (kBiased && !symmetric) {  // warp-uniform: the rest of part -= (off + z) rsum
        CG_PRAGMA_UNROLL
        for (int b = 0; b < NB; ++b) {
          const T2 z2 = *reinterpret_cast<T2 const*>(
              srow +
              SmemS{}(_0{}, mma_value_part<typename Cfg::AccCols>(make_coord(0, 0, b)), _1{}) +
              mma_lane_part<typename Cfg::AccCols>(t, g));
          unbias(b, {HalfTraits<T>::to_float(z2.x) - z_sym, HalfTraits<T>::to_float(z2.y) - z_sym});
        }
      }
      // acc += scale * part: values 0 and 2 of block b lie in one column, 1 and 3 in the next
      // (one T2 of scales).
      CG_PRAGMA_UNROLL
      for (int b = 0; b < NB; ++b) {
        const T2 s2 = *reinterpret_cast<T2 const*>(
            srow + SmemS{}(_0{}, mma_value_part<typename Cfg::AccCols>(make_coord(0, 0, b)), _0{}) +
            mma_lane_part<typename Cfg::AccCols>(t, g));
        const float s_even = HalfTraits<T>::to_float(s2.x), s_odd = HalfTraits<T>::to_float(s2.y);
        if constexpr (kBiased) unbias(b, {kBias + z_sym, kBias + z_sym});  // part -= (off + z) rsum
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

  // ---- the k slices' sums, in k slice order: slices 1.. park theirs in their own stages once
  // every warp of the CTA is past its main loop, and k slice 0 adds them.
  if constexpr (KSlices > 1) {
    using Parked = typename Cfg::SmemParked;
    __syncthreads();
    if (k_slice > 0) {
      float* mine = reinterpret_cast<float*>(smem);
      CG_PRAGMA_UNROLL
      for (int v = 0; v < Cfg::kAccs; ++v) mine[Parked{}(tid, v)] = acc(v);
    }
    __syncthreads();
    if (k_slice > 0) return;
    CG_PRAGMA_UNROLL
    for (int y = 1; y < KSlices; ++y) {
      float const* theirs = reinterpret_cast<float const*>(smem + y * Cfg::kSmemBytes);
      CG_PRAGMA_UNROLL
      for (int v = 0; v < Cfg::kAccs; ++v) acc(v) += theirs[Parked{}(tid, v)];
    }
  }

  // ---- epilogue: each pair of adjacent accumulators (values 2h, 2h + 1 of an m16n8 fragment)
  // goes to its row and columns (AccRows, AccCols), as one float2 to the workspace or one T2 to
  // `out`.
  const auto acc_rows = slice_and_offset(make_coord(thr_mma, _), typename Cfg::AccRows{});
  const auto acc_cols = slice_and_offset(make_coord(thr_mma, _), typename Cfg::AccCols{});
  if constexpr (Gated) {
    // Blocks b and b + 1 (b even) hold the gate and up sums of the same outputs, 8 columns apart
    // (Cfg::gate_up_pairs_in_lane).
    CG_PRAGMA_UNROLL
    for (int m = 0; m < MT; ++m) {
      CG_PRAGMA_UNROLL
      for (int b = 0; b < NB; b += 2) {
        const int col = n0 + get<1>(acc_cols) + get<0>(acc_cols)(0, m, b);
        if (col >= p.n) continue;
        const int out_col = gated_output_column(col);
        CG_PRAGMA_UNROLL
        for (int h = 0; h < 2; ++h) {
          const int row = m0 + get<1>(acc_rows) + get<0>(acc_rows)(2 * h, m, b);
          if (row >= p.m) continue;
          store_out_gated<T>(p, row, out_col, acc(2 * h, m, b), acc(2 * h, m, b + 1));
          store_out_gated<T>(p, row, out_col + 1, acc(2 * h + 1, m, b), acc(2 * h + 1, m, b + 1));
        }
      }
    }
    return;
  }
  float* ws = static_cast<float*>(p.workspace) + int64_t(blockIdx.z) * p.m * p.n;
  CG_PRAGMA_UNROLL
  for (int m = 0; m < MT; ++m) {
    CG_PRAGMA_UNROLL
    for (int b = 0; b < NB; ++b) {
      const int col = n0 + get<1>(acc_cols) + get<0>(acc_cols)(0, m, b);
      if (col >= p.n) continue;  // N % 8 == 0: both columns of the pair are in or out
      CG_PRAGMA_UNROLL
      for (int h = 0; h < 2; ++h) {
        const int row = m0 + get<1>(acc_rows) + get<0>(acc_rows)(2 * h, m, b);
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

// Raises the kernel's dynamic shared memory limit where it needs more than 48 KB.
template <class Cfg, bool Gated, int KSlices>
cudaError_t raise_mixed_smem_limit() {
  constexpr int kBytes = Cfg::smem_bytes(KSlices);
  if (kBytes <= 48 * 1024) return cudaSuccess;
  return cudaFuncSetAttribute(mixed_gemm_kernel<Cfg, Gated, KSlices>,
                              cudaFuncAttributeMaxDynamicSharedMemorySize, kBytes);
}

// The plan's k slices per CTA, where this instance runs them (1 otherwise).
template <class Cfg>
bool mixed_k_slices_valid(MixedPlan const& plan) {
  return plan.k_slices >= 1 && plan.k_slices <= Cfg::kMaxKSlices &&
         plan.threads == Cfg::kThreads * plan.k_slices &&
         plan.smem_bytes == Cfg::smem_bytes(plan.k_slices);
}

// The kernel a plan runs: the one that gates in registers for a gated plan without the workspace
// (only instances with Cfg::kGatesInRegisters have it; the planner plans no other), else the
// plain one, each with the plan's k slices (mixed_k_slices_valid). Calls f(kernel,
// raise_smem_limit).
template <class Cfg, int KSlices, class F>
cudaError_t with_mixed_kernel_slices(MixedPlan const& plan, F&& f) {
  if constexpr (Cfg::kGatesInRegisters) {
    if (plan.gates_in_kernel()) {
      return f(mixed_gemm_kernel<Cfg, true, KSlices>, raise_mixed_smem_limit<Cfg, true, KSlices>);
    }
  } else {
    if (plan.gates_in_kernel()) return cudaErrorInvalidValue;
  }
  return f(mixed_gemm_kernel<Cfg, false, KSlices>, raise_mixed_smem_limit<Cfg, false, KSlices>);
}
template <class Cfg, class F>
cudaError_t with_mixed_kernel(MixedPlan const& plan, F&& f) {
  if (!mixed_k_slices_valid<Cfg>(plan)) return cudaErrorInvalidValue;
  if constexpr (Cfg::kMaxKSlices > 1) {
    if (plan.k_slices == Cfg::kMaxKSlices) {
      return with_mixed_kernel_slices<Cfg, Cfg::kMaxKSlices>(plan, f);
    }
  }
  return with_mixed_kernel_slices<Cfg, 1>(plan, f);
}

// plan: the planner's, for this instance (its split-K factor, none of the splits empty, and
// whether the sums go through p.workspace to split_k_reduce_kernel).
template <class Cfg>
cudaError_t launch_mixed(MixedGemmParams const& p, MixedPlan const& plan, cudaStream_t stream) {
  return with_mixed_kernel<Cfg>(plan, [&](auto kernel, auto raise_smem_limit) {
    const cudaError_t e = raise_smem_limit();
    if (e != cudaSuccess) return e;
    // sm_90: both kernels are programmatic dependents of what precedes them in the stream (see
    // grid_dependency_sm90.hpp); each waits for it before touching its outputs.
    return launch_split_k<typename Cfg::Element>(
        kernel, p, plan, Cfg::kTileM, Cfg::kTileN, dim3(Cfg::kThreads, plan.k_slices),
        Cfg::smem_bytes(plan.k_slices), current_cc_major() >= 9, stream);
  });
}

// The CTAs per SM of launch_mixed<Cfg>'s kernel on the current device (the occupancy
// calculator), for the test that holds the planner's model against the GPU; cudaErrorInvalidValue
// for a plan of another CTA shape.
template <class Cfg>
cudaError_t mixed_occupancy(MixedPlan const& plan, int* ctas_per_sm) {
  return with_mixed_kernel<Cfg>(plan, [&](auto kernel, auto raise_smem_limit) {
    const cudaError_t e = raise_smem_limit();
    if (e != cudaSuccess) return e;
    return cudaOccupancyMaxActiveBlocksPerMultiprocessor(ctas_per_sm, kernel, plan.threads,
                                                         plan.smem_bytes);
  });
}

}  // namespace mixed
}  // namespace cute_gemm
