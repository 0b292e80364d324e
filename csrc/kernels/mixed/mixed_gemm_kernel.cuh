#pragma once
// Mixed-input GEMM: out[M, N] = A[M, K] @ dequant(W)^T (+ bias), A fp16/bf16, W INT4/INT8 packed
// as in weight_format.hpp, fp32 accumulation on mma.sync m16n8k16.
//
// Built for decode (small M), where the time is the weight stream:
//   - A CTA of 4 warps owns 128 output columns (each warp 4 n8 blocks) and a range of K (split-K
//     across CTAs fills every SM even when N / 128 is small). Its A tile is shared by the 4 warps
//     and each A fragment feeds 4 n8 blocks.
//   - Weights never touch shared memory: each lane loads its own fragments, 16 bytes per n8 block
//     and k block, straight into registers (evict-first, no L1), kStagesW k blocks ahead.
//   - Activations go through a cp.async pipeline into swizzled shared memory (rows past M are
//     zero-filled without reading memory) and reach the MMA through ldmatrix.
//   - Weights are dequantized in registers (dequant.cuh) and consumed by the mma directly.
//   - Split-K partial sums go to an fp32 workspace; a second kernel adds them in split order
//     (deterministic), adds the bias and rounds. Without split-K the kernel writes `out` itself.

#include "cute_gemm/arch/ld_global.hpp"
#include "cute_gemm/composed_layout.hpp"
#include "cute_gemm/copy_atom.hpp"
#include "cute_gemm/mma_atom.hpp"
#include "kernels/gemm/gemm_kernel.cuh"
#include "kernels/mixed/dequant.cuh"
#include "kernels/mixed/mixed_gemm_launch.hpp"
#include "kernels/mixed/weight_format.hpp"

namespace cute_gemm {
namespace mixed {

template <class Element_, int Bits, int MTiles>
struct MixedConfig {
  using Element = Element_;
  static constexpr int kBits = Bits;
  static constexpr int kWarps = 4;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kBlocksPerWarp = 4;                          // n8 blocks per warp
  static constexpr int kTileN = kWarps * kBlocksPerWarp * kBlockN;  // 128 columns per CTA
  static constexpr int kTileM = 16 * MTiles;
  static constexpr int kBlockK = block_k(Bits);  // 128 (INT4) or 64 (INT8) per packed block
  static constexpr int kKSteps = kBlockK / 16;
  static constexpr int kStagesA = 3;  // activation tiles in flight (shared memory)
  static constexpr int kStagesW = 2;  // weight blocks in flight per lane (registers)

  // Warp w owns n8 blocks 4w .. 4w+3 of the CTA's 128 columns: natural (atom, warp, repeat) ->
  // (atom, repeat, warp) as in the GEMM.
  using Mma = TiledMMA<MMA_Atom<typename HalfTraits<Element>::MmaOp>, 1, kWarps,
                       Layout<Int<kTileM>>,
                       Layout<Shape<_8, Int<kWarps>, Int<kBlocksPerWarp>>,
                              Stride<_1, Int<8 * kBlocksPerWarp>, _8>>,
                       Layout<Int<kBlockK>>>;
  using CopyA = TiledMmaCopy<LdsmA_x4, Mma, MmaOperand::kA>;
  // global -> shared for A: kBlockK / 8 threads per row, 16 bytes each.
  static constexpr int kChunks = kBlockK / 8;
  using G2S = TiledCopy<CpAsync16, Layout<Shape<Int<kThreads / kChunks>, Int<kChunks>>,
                                          Stride<Int<kChunks>, _1>>,
                        Layout<Shape<_1, _8>>>;
  // (rows, kBlockK, stages), K contiguous; the row's low 3 bits XOR the 16-byte unit.
  using SmemA = decltype(composition(
      Swizzle<3, 3, log2_of(kBlockK) - 3>{},
      make_layout(make_shape(Int<kTileM>{}, Int<kBlockK>{}, Int<kStagesA>{}),
                  make_stride(Int<kBlockK>{}, _1{}, Int<kTileM * kBlockK>{}))));
  static constexpr int kSmemBytes = kTileM * kBlockK * kStagesA * 2;
};

// Per-lane dequantization constants of one group: scale and zero terms for each of the lane's
// n8 blocks.
template <class Cfg>
struct GroupConsts {
  using D = Dequant<typename Cfg::Element>;
  using T2 = typename D::T2;
  T2 s[Cfg::kBlocksPerWarp], zc[Cfg::kBlocksPerWarp], zc16[Cfg::kBlocksPerWarp];
  float sf[Cfg::kBlocksPerWarp], zf[Cfg::kBlocksPerWarp];
};

template <class Cfg>
CG_DEVICE void load_group(GroupConsts<Cfg>& gc, MixedGemmParams const& p, int group,
                          int const (&col)[Cfg::kBlocksPerWarp]) {
  using T = typename Cfg::Element;
  using D = Dequant<T>;
  T const* scales = static_cast<T const*>(p.scales);
  T const* zeros = static_cast<T const*>(p.zeros);
  const float zsym = float(1 << (Cfg::kBits - 1));
  CG_PRAGMA_UNROLL
  for (int b = 0; b < Cfg::kBlocksPerWarp; ++b) {
    const bool ok = col[b] < p.n;
    const int64_t at = int64_t(group) * p.n + col[b];
    const float s = ok ? HalfTraits<T>::to_float(scales[at]) : 0.f;
    const float z = zeros == nullptr ? zsym : (ok ? HalfTraits<T>::to_float(zeros[at]) : 0.f);
    gc.sf[b] = s;
    gc.zf[b] = z;
    gc.s[b] = D::splat(s);
    if constexpr (Cfg::kBits == 4) {
      gc.zc[b] = D::int4_zc(z);
      gc.zc16[b] = D::int4_zc16(z);
    } else if constexpr (std::is_same<T, __half>::value) {
      gc.zc[b] = D::int8_zc(z);
    }
  }
}

// The constants of one n8 block under one group.
template <class Cfg>
struct BlockConsts {
  typename Dequant<typename Cfg::Element>::T2 s, zc, zc16;
  float sf, zf;
};

// gcs[gi] for block b, with gi known only at run time: selected through static indices so the
// constants stay in registers (a run-time array index would move gcs to local memory).
template <class Cfg, int G>
CG_DEVICE BlockConsts<Cfg> select_consts(GroupConsts<Cfg> const (&gcs)[G], int gi, int b) {
  BlockConsts<Cfg> r{gcs[0].s[b], gcs[0].zc[b], gcs[0].zc16[b], gcs[0].sf[b], gcs[0].zf[b]};
  CG_PRAGMA_UNROLL
  for (int g = 1; g < G; ++g) {
    if (gi == g) r = BlockConsts<Cfg>{gcs[g].s[b], gcs[g].zc[b], gcs[g].zc16[b], gcs[g].sf[b],
                                      gcs[g].zf[b]};
  }
  return r;
}

// Dequantizes one lane's 16-byte weight block (n8 block b) into the B fragments frag(_, b, j) of
// the block's k16 steps j; step j uses group j / steps_per_group of the block.
template <class Cfg, class Frag, int G>
CG_DEVICE void dequant_block(uint4 const& w, int b, Frag& frag, GroupConsts<Cfg> const (&gcs)[G],
                             int steps_per_group) {
  using T = typename Cfg::Element;
  using D = Dequant<T>;
  const uint32_t words[4] = {w.x, w.y, w.z, w.w};
  CG_PRAGMA_UNROLL
  for (int wi = 0; wi < 4; ++wi) {
    if constexpr (Cfg::kBits == 4) {
      // word wi: k16 steps 2wi and 2wi+1, always in one group (groups are >= 32 wide).
      const BlockConsts<Cfg> c = select_consts(gcs, (2 * wi) / steps_per_group, b);
      uint32_t r[4];
      D::int4(words[wi], c.zc, c.zc16, c.s, r);
      uint32_t* f0 = reinterpret_cast<uint32_t*>(&frag(0, b, 2 * wi));
      uint32_t* f1 = reinterpret_cast<uint32_t*>(&frag(0, b, 2 * wi + 1));
      f0[0] = r[0];
      f0[1] = r[1];
      f1[0] = r[2];
      f1[1] = r[3];
    } else {
      const BlockConsts<Cfg> c = select_consts(gcs, wi / steps_per_group, b);
      uint32_t r[2];
      if constexpr (std::is_same<T, __half>::value) {
        D::int8(words[wi], c.zc, c.s, r);
      } else {
        D::int8_f32(words[wi], c.zf, c.sf, r);
      }
      uint32_t* f = reinterpret_cast<uint32_t*>(&frag(0, b, wi));
      f[0] = r[0];
      f[1] = r[1];
    }
  }
}

// grid: (ceil(N / 128), ceil(M / kTileM), splits). Split s handles k blocks
// [s * blocks_per_split, min((s + 1) * blocks_per_split, k_blocks)).
template <class Cfg>
__global__ void __launch_bounds__(Cfg::kThreads) mixed_gemm_kernel(MixedGemmParams p,
                                                                   int blocks_per_split) {
  using T = typename Cfg::Element;
  using Mma = typename Cfg::Mma;
  constexpr int BM = Cfg::kTileM, BK = Cfg::kBlockK, SA = Cfg::kStagesA, SW = Cfg::kStagesW;
  constexpr int NB = Cfg::kBlocksPerWarp;
  extern __shared__ uint128_t smem_raw[];
  T* smem = reinterpret_cast<T*>(smem_raw);

  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int m0 = blockIdx.y * BM;
  const int n0 = blockIdx.x * Cfg::kTileN;
  const int k_blocks = (p.k + BK - 1) / BK;
  const int kb_begin = blockIdx.z * blocks_per_split;
  const int kb_end = min(kb_begin + blocks_per_split, k_blocks);
  const int n_kb = kb_end - kb_begin;
  // Per-channel scales are one group of K.
  const int group_size = (p.group_size <= 0 || p.group_size > p.k) ? p.k : p.group_size;
  const int groups_per_block = group_size >= BK ? 1 : BK / group_size;
  const int last_group = (p.k + group_size - 1) / group_size - 1;

  // ---- this lane's weight stream: n8 block nb = n0 / 8 + 4 * warp + b, lane's 16 bytes.
  const int kb_total = (p.k + BK - 1) / BK;  // packed blocks per n8 block (K padded to BK)
  int col[NB];
  uint4 const* wptr[NB];
  bool wok[NB];
  CG_PRAGMA_UNROLL
  for (int b = 0; b < NB; ++b) {
    const int nb = n0 / 8 + NB * warp + b;
    col[b] = nb * 8 + lane / 4;
    wok[b] = nb * 8 < p.n;
    wptr[b] = reinterpret_cast<uint4 const*>(p.qweight) +
              (int64_t(wok[b] ? nb : 0) * kb_total + kb_begin) * 32 + lane;
  }
  const uint64_t policy = make_l2_evict_first_policy();
  uint4 wreg[SW][NB];
  auto load_w = [&](int i, int slot) {  // the i-th k block of this split into register slot
    CG_PRAGMA_UNROLL
    for (int b = 0; b < NB; ++b) {
      wreg[slot][b] = (wok[b] && i < n_kb) ? ld_global_stream_v4(wptr[b] + int64_t(i) * 32, policy)
                                           : make_uint4(0, 0, 0, 0);
    }
  };

  // ---- activations: global -> shared (cp.async) -> A fragments (ldmatrix)
  T const* a_ptr = static_cast<T const*>(p.a);
  const auto gA = make_tensor(a_ptr + int64_t(m0) * p.lda + int64_t(kb_begin) * BK,
                              make_layout(make_shape(Int<BM>{}, Int<BK>{}), make_stride(p.lda, _1{})));
  auto sA = make_tensor(smem, typename Cfg::SmemA{});
  const auto g2s = get_thread_copy(typename Cfg::G2S{}, tid);
  const auto tAgA = g2s.partition_S(gA);
  auto tAsA = g2s.partition_D(sA);
  const auto cA = g2s.partition_coords(make_shape(Int<BM>{}, Int<BK>{}));
  constexpr int RA = decltype(size<1>(tAgA))::value;
  bool a_row_ok[RA];
  int a_col = 0;
  CG_PRAGMA_UNROLL
  for (int i = 0; i < RA; ++i) {
    int r, c;
    tile_rc<BM>(get<0>(cA)(0, i, 0) + get<1>(cA), r, c);
    a_row_ok[i] = m0 + r < p.m;
    a_col = c;
  }
  auto load_a = [&](int i, int stage) {
    const int k0 = (kb_begin + i) * BK;
    const bool col_ok = i < n_kb && k0 + a_col < p.k;
    auto dA = tAsA(_, _, _, stage);
    copy_if(CpAsync16{}, [&](int r, int) { return a_row_ok[r] && col_ok; },
            make_tensor(tAgA.data() + int64_t(i) * BK, tAgA.layout()), dA);
  };

  const auto thr_mma = get_thread_slice(Mma{}, tid);
  auto tCrA = ThrMMA<Mma>::template partition_fragment_A<T>(make_shape(Int<BM>{}, Int<BK>{}));
  auto tCrB = ThrMMA<Mma>::template partition_fragment_B<T>(
      make_shape(Int<Cfg::kTileN>{}, Int<BK>{}));  // (4, NB, KSteps)
  auto tCrC = ThrMMA<Mma>::template partition_fragment_C<float>(
      make_shape(Int<BM>{}, Int<Cfg::kTileN>{}));
  clear(tCrC);
  auto tArA = Cfg::CopyA::retile(tCrA);
  const auto tAsA_ld = get_thread_copy(typename Cfg::CopyA{}, tid).partition_S(sA);

  // ---- prologue
  CG_PRAGMA_UNROLL
  for (int s = 0; s < SA - 1; ++s) {
    load_a(s, s);
    cp_async_fence();
  }
  CG_PRAGMA_UNROLL
  for (int s = 0; s < SW; ++s) load_w(s, s);

  GroupConsts<Cfg> gcs[Cfg::kBits == 4 ? 4 : 2];  // one per group within a block (g >= 32)
  const int k_steps_per_group = group_size >= BK ? Cfg::kKSteps : group_size / 16;

  // ---- main loop, unrolled by the register stages so weight slots are static
  for (int it = 0; it < n_kb; it += SW) {
    CG_PRAGMA_UNROLL
    for (int s = 0; s < SW; ++s) {
      const int i = it + s;
      if (i < n_kb) {
        cp_async_wait<SA - 2>();
        __syncthreads();
        const int stage = i % SA;
        // Issue the next activation tile before computing: its stage was read in block i - 1.
        load_a(i + SA - 1, (i + SA - 1) % SA);
        cp_async_fence();
        // Group constants of this block.
        const int kb = kb_begin + i;
        CG_PRAGMA_UNROLL
        for (int g = 0; g < (Cfg::kBits == 4 ? 4 : 2); ++g) {
          if (g < groups_per_block) {
            // The padded tail of K (zero activations) reuses the last group's scales.
            const int group = min((kb * BK) / group_size + g, last_group);
            load_group<Cfg>(gcs[g], p, group, col);
          }
        }
        CG_PRAGMA_UNROLL
        for (int b = 0; b < NB; ++b) {
          dequant_block<Cfg>(wreg[s][b], b, tCrB, gcs, k_steps_per_group);
        }
        load_w(i + SW, s);  // refill this slot SW blocks ahead
        CG_PRAGMA_UNROLL
        for (int j = 0; j < Cfg::kKSteps; ++j) {
          copy_ldsm(LdsmA_x4{}, tAsA_ld(_, _, _, stage), tArA, j);
          gemm(Mma{}, tCrC, tCrA, tCrB, j);
        }
      }
    }
  }
  cp_async_wait<0>();

  // ---- epilogue: each lane's accumulators (rows g, g + 8 of each m16 atom; column pairs)
  const auto cC = thr_mma.partition_coords_C(make_shape(Int<BM>{}, Int<Cfg::kTileN>{}));
  const bool split = gridDim.z > 1;
  float* ws = static_cast<float*>(p.workspace) + int64_t(blockIdx.z) * p.m * p.n;
  T* out = static_cast<T*>(p.out);
  T const* bias = static_cast<T const*>(p.bias);
  CG_PRAGMA_UNROLL
  for (int v = 0; v < decltype(size(tCrC))::value; ++v) {
    int r, c;
    tile_rc<BM>(get<1>(cC) + get<0>(cC)(v), r, c);
    const int row = m0 + r, colx = n0 + c;
    if (row < p.m && colx < p.n) {
      if (split) {
        ws[int64_t(row) * p.n + colx] = tCrC(v);
      } else {
        float acc = tCrC(v);
        if (bias != nullptr) acc += HalfTraits<T>::to_float(bias[colx]);
        out[int64_t(row) * p.ldo + colx] = HalfTraits<T>::from_float(acc);
      }
    }
  }
}

// out = sum over splits (in split order) of the partial sums, + bias, rounded.
template <class T>
__global__ void split_k_reduce_kernel(MixedGemmParams p, int splits) {
  const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t total = int64_t(p.m) * p.n;
  if (idx >= total) return;
  float const* ws = static_cast<float const*>(p.workspace);
  float acc = 0.f;
  for (int s = 0; s < splits; ++s) acc += ws[s * total + idx];
  const int row = int(idx / p.n), col = int(idx % p.n);
  if (p.bias != nullptr) acc += HalfTraits<T>::to_float(static_cast<T const*>(p.bias)[col]);
  static_cast<T*>(p.out)[int64_t(row) * p.ldo + col] = HalfTraits<T>::from_float(acc);
}

template <class Cfg>
cudaError_t launch_mixed(MixedGemmParams const& p, int splits, cudaStream_t stream) {
  const int k_blocks = (p.k + Cfg::kBlockK - 1) / Cfg::kBlockK;
  const int per_split = (k_blocks + splits - 1) / splits;
  splits = (k_blocks + per_split - 1) / per_split;  // no empty splits
  dim3 grid((p.n + Cfg::kTileN - 1) / Cfg::kTileN, (p.m + Cfg::kTileM - 1) / Cfg::kTileM, splits);
  const int smem = Cfg::kSmemBytes;
  if (smem > 48 * 1024) {
    const cudaError_t e = cudaFuncSetAttribute(
        mixed_gemm_kernel<Cfg>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (e != cudaSuccess) return e;
  }
  mixed_gemm_kernel<Cfg><<<grid, Cfg::kThreads, smem, stream>>>(p, per_split);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess || splits == 1) return e;
  const int64_t total = int64_t(p.m) * p.n;
  split_k_reduce_kernel<typename Cfg::Element>
      <<<unsigned((total + 255) / 256), 256, 0, stream>>>(p, splits);
  return cudaGetLastError();
}

}  // namespace mixed
}  // namespace cute_gemm
