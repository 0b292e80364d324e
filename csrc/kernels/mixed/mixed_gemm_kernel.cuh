#pragma once
// Mixed-input GEMM: out[M, N] = A[M, K] @ dequant(W)^T (+ bias), A fp16/bf16, W INT4/INT8 packed
// as in weight_format.hpp, fp32 accumulation on mma.sync m16n8k16.
//
// Built for decode (small M), where the time is the weight stream:
//   - A CTA of 4 warps owns 128 output columns (each warp 4 n8 blocks) and a range of K (split-K
//     across CTAs fills every SM even when N / 128 is small). Its A tile is shared by the 4 warps
//     and each A fragment feeds 4 n8 blocks.
//   - Weights, their scales (and zeros) and the activation tile of each k block travel together
//     through a kStages-deep cp.async pipeline in shared memory. Weights use an L2 evict-first
//     policy (read once); in shared memory they keep the packed order, so each lane reads its own
//     16 bytes per n8 block (conflict-free LDS.128). Deep stages put ~3 x 8 KB of weights in
//     flight per CTA without spending registers, which is what the weight stream needs.
//   - Activation rows past M are zero-filled without reading memory and reach the MMA through
//     ldmatrix from swizzled shared memory.
//   - Weights are dequantized in registers (dequant.cuh) and consumed by the mma directly.
//   - Split-K partial sums go to an fp32 workspace; a second kernel adds them in split order
//     (deterministic), adds the bias and rounds. Without split-K the kernel writes `out` itself.

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
  // n8 blocks per warp. 8 at M <= 16 (256 columns per CTA) was measured on the H200: better for
  // K = 28672 (M=1 2.15x vs 1.84x over fp16) but worse for 8192x8192 (1.69x vs 1.96x) and
  // 4096x4096 (fewer CTAs, 2 instead of 4 per SM), so 4.
  static constexpr int kBlocksPerWarp = 4;
  static constexpr int kBlocksPerCta = kWarps * kBlocksPerWarp;     // 16
  static constexpr int kTileN = kBlocksPerCta * kBlockN;            // 128 columns
  static constexpr int kTileM = 16 * MTiles;
  static constexpr int kBlockK = block_k(Bits);  // 128 (INT4) or 64 (INT8) per packed block
  static constexpr int kKSteps = kBlockK / 16;
  static constexpr int kStages = 4;
  static constexpr int kMaxGroups = kBlockK / 32;  // groups per k block at the smallest group (32)

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
      make_layout(make_shape(Int<kTileM>{}, Int<kBlockK>{}, Int<kStages>{}),
                  make_stride(Int<kBlockK>{}, _1{}, Int<kTileM * kBlockK>{}))));

  // Shared memory, per stage: weights [blocks][32 lanes][16 B], scales and zeros
  // [kMaxGroups][kTileN columns], then the activation buffers of all stages.
  static constexpr int kWeightBytes = kBlocksPerCta * 32 * 16;        // 8 KB
  static constexpr int kScaleElems = kMaxGroups * kTileN;
  static constexpr int kStageBytes = kWeightBytes + 2 * kScaleElems * 2;
  static constexpr int kSmemBytes = kStages * kStageBytes + kTileM * kBlockK * kStages * 2;
};

// grid: (ceil(N / kTileN), ceil(M / kTileM), splits). Split s handles k blocks
// [s * blocks_per_split, min((s + 1) * blocks_per_split, k_blocks)).
template <class Cfg>
__global__ void __launch_bounds__(Cfg::kThreads) mixed_gemm_kernel(MixedGemmParams p,
                                                                   int blocks_per_split) {
  using T = typename Cfg::Element;
  using D = Dequant<T>;
  using Mma = typename Cfg::Mma;
  constexpr int BM = Cfg::kTileM, BK = Cfg::kBlockK, S = Cfg::kStages;
  constexpr int NB = Cfg::kBlocksPerWarp;
  extern __shared__ uint128_t smem_raw[];
  char* smem = reinterpret_cast<char*>(smem_raw);
  T* smem_a = reinterpret_cast<T*>(smem + S * Cfg::kStageBytes);

  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int m0 = blockIdx.y * BM;
  const int n0 = blockIdx.x * Cfg::kTileN;
  const int k_blocks = (p.k + BK - 1) / BK;
  const int kb_begin = blockIdx.z * blocks_per_split;
  const int kb_end = min(kb_begin + blocks_per_split, k_blocks);
  const int n_kb = kb_end - kb_begin;
  // Per-channel scales are one group of K.
  const int group_size = (p.group_size <= 0 || p.group_size > p.k) ? p.k : p.group_size;
  const int last_group = (p.k + group_size - 1) / group_size - 1;
  const int groups_per_block = group_size >= BK ? 1 : BK / group_size;
  // Group sizes are 32, 64 or 128 (powers of two) or the whole of K: shifts instead of run-time
  // divisions in the loop.
  const bool per_channel = group_size == p.k && (group_size & (group_size - 1)) != 0;
  const int group_shift = per_channel ? 0 : __ffs(group_size) - 1;
  const int steps_per_group_shift = __ffs(group_size >= BK ? Cfg::kKSteps : group_size / 16) - 1;

  // ---- global -> shared, one k block per stage
  const uint64_t policy = make_l2_evict_first_policy();
  uint128_t const* qw = reinterpret_cast<uint128_t const*>(p.qweight);
  T const* scales = static_cast<T const*>(p.scales);
  T const* zeros = static_cast<T const*>(p.zeros);
  T const* a_ptr = static_cast<T const*>(p.a);
  const auto gA = make_tensor(a_ptr + int64_t(m0) * p.lda + int64_t(kb_begin) * BK,
                              make_layout(make_shape(Int<BM>{}, Int<BK>{}), make_stride(p.lda, _1{})));
  auto sA = make_tensor(smem_a, typename Cfg::SmemA{});
  const auto g2s = get_thread_copy(typename Cfg::G2S{}, tid);
  const auto tAgA = g2s.partition_S(gA);
  auto tAsA = g2s.partition_D(sA);
  const auto cA = g2s.partition_coords(make_shape(Int<BM>{}, Int<BK>{}));
  constexpr int RA = decltype(size<1>(tAgA))::value;
  bool a_row_ok[RA];
  const int a_col = g2s_row_predicates<BM>(cA, m0, p.m, a_row_ok);
  auto load_stage = [&](int i, int stage) {
    const bool live = i < n_kb;
    const int kb = kb_begin + i;
    char* st = smem + stage * Cfg::kStageBytes;
    // Weights: 512 chunks of 16 bytes, block c / 32, lane c % 32; coalesced 512-byte runs.
    CG_PRAGMA_UNROLL
    for (int r = 0; r < Cfg::kBlocksPerCta * 32 / Cfg::kThreads; ++r) {
      const int c = tid + r * Cfg::kThreads;
      const int nb = n0 / 8 + c / 32;
      const bool ok = live && nb * 8 < p.n;
      // k_blocks packed blocks per n8 block (K padded to BK).
      uint128_t const* src = qw + (int64_t(ok ? nb : 0) * k_blocks + (ok ? kb : 0)) * 32 + c % 32;
      SM80_CP_ASYNC_CACHEGLOBAL_ZFILL_POLICY::copy(
          *src, *reinterpret_cast<uint128_t*>(st + c * 16), ok, policy);
    }
    // Scales (and zeros): groups_per_block rows of kTileN columns, in chunks of 8 columns.
    constexpr int kChunksPerRow = Cfg::kTileN / 8;
    if (tid < groups_per_block * kChunksPerRow) {
      const int row = tid / kChunksPerRow, chunk = tid % kChunksPerRow;
      const int group = per_channel ? 0 : min(((kb * BK) >> group_shift) + row, last_group);
      const int col = n0 + chunk * 8;
      const bool ok = live && col < p.n;
      const int64_t at = ok ? int64_t(group) * p.n + col : 0;
      T* s_dst = reinterpret_cast<T*>(st + Cfg::kWeightBytes) + row * Cfg::kTileN + chunk * 8;
      SM80_CP_ASYNC_CACHEGLOBAL_ZFILL::copy(*reinterpret_cast<uint128_t const*>(scales + at),
                                            *reinterpret_cast<uint128_t*>(s_dst), ok);
      if (zeros != nullptr) {
        SM80_CP_ASYNC_CACHEGLOBAL_ZFILL::copy(*reinterpret_cast<uint128_t const*>(zeros + at),
                                              *reinterpret_cast<uint128_t*>(s_dst + Cfg::kScaleElems),
                                              ok);
      }
    }
    // Activations.
    const int k0 = kb * BK;
    const bool col_ok = live && k0 + a_col < p.k;
    auto dA = tAsA(_, _, _, stage);
    copy_if(CpAsync16{}, [&](int rr, int) { return a_row_ok[rr] && col_ok; },
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

  // This lane's columns within the CTA tile: n8 block 4 * warp + b, column lane / 4.
  int lcol[NB];
  CG_PRAGMA_UNROLL
  for (int b = 0; b < NB; ++b) lcol[b] = (NB * warp + b) * 8 + lane / 4;
  const float zsym = float(1 << (Cfg::kBits - 1));

  // ---- prologue
  CG_PRAGMA_UNROLL
  for (int s = 0; s < S - 1; ++s) {
    load_stage(s, s);
    cp_async_fence();
  }

  // ---- main loop
  CG_PRAGMA_NO_UNROLL
  for (int i = 0; i < n_kb; ++i) {
    cp_async_wait<S - 2>();
    __syncthreads();  // stage i % S landed; stage (i - 1) % S is free again
    const int stage = i % S;
    load_stage(i + S - 1, (i + S - 1) % S);
    cp_async_fence();

    char const* st = smem + stage * Cfg::kStageBytes;
    T const* s_scale = reinterpret_cast<T const*>(st + Cfg::kWeightBytes);
    T const* s_zero = s_scale + Cfg::kScaleElems;
    uint4 w[NB];
    CG_PRAGMA_UNROLL
    for (int b = 0; b < NB; ++b)
      w[b] = reinterpret_cast<uint4 const*>(st)[(NB * warp + b) * 32 + lane];

    // Dequantization constants of each block for the current group row, recomputed only when the
    // row changes (never within a k block for groups >= the block: g128 INT4, g64+ INT8).
    using T2 = typename D::T2;
    T2 c_s[NB], c_zc[NB], c_nzc16[NB];
    float c_sf[NB], c_zf[NB];
    auto load_consts = [&](int grow) {
      CG_PRAGMA_UNROLL
      for (int b = 0; b < NB; ++b) {
        const float sf = HalfTraits<T>::to_float(s_scale[grow * Cfg::kTileN + lcol[b]]);
        const float zf = zeros != nullptr
                             ? HalfTraits<T>::to_float(s_zero[grow * Cfg::kTileN + lcol[b]])
                             : zsym;
        c_sf[b] = sf;
        c_zf[b] = zf;
        c_s[b] = D::splat(sf);
        if constexpr (Cfg::kBits == 4) {
          c_zc[b] = D::int4_zc(zf);
          c_nzc16[b] = D::int4_nzc16(zf);
        } else if constexpr (std::is_same<T, __half>::value) {
          c_zc[b] = D::int8_zc(zf);
        }
      }
    };
    int cur_grow = 0;
    load_consts(0);

    // One packed word per block at a time: INT4 words feed k16 steps 2wi, 2wi+1; INT8 step wi.
    CG_PRAGMA_UNROLL
    for (int wi = 0; wi < 4; ++wi) {
      constexpr int kStepsPerWord = Cfg::kBits == 4 ? 2 : 1;
      const int grow = (wi * kStepsPerWord) >> steps_per_group_shift;
      if (grow != cur_grow) {  // warp-uniform
        load_consts(grow);
        cur_grow = grow;
      }
      CG_PRAGMA_UNROLL
      for (int b = 0; b < NB; ++b) {
        const uint32_t word = wi == 0 ? w[b].x : wi == 1 ? w[b].y : wi == 2 ? w[b].z : w[b].w;
        if constexpr (Cfg::kBits == 4) {
          uint32_t r[4];
          D::int4(word, c_zc[b], c_nzc16[b], c_s[b], r);
          uint32_t* f0 = reinterpret_cast<uint32_t*>(&tCrB(0, b, 2 * wi));
          uint32_t* f1 = reinterpret_cast<uint32_t*>(&tCrB(0, b, 2 * wi + 1));
          f0[0] = r[0];
          f0[1] = r[1];
          f1[0] = r[2];
          f1[1] = r[3];
        } else {
          uint32_t r[2];
          if constexpr (std::is_same<T, __half>::value) {
            D::int8(word, c_zc[b], c_s[b], r);
          } else {
            D::int8_f32(word, c_zf[b], c_sf[b], r);
          }
          uint32_t* f = reinterpret_cast<uint32_t*>(&tCrB(0, b, wi));
          f[0] = r[0];
          f[1] = r[1];
        }
      }
      CG_PRAGMA_UNROLL
      for (int j = wi * kStepsPerWord; j < (wi + 1) * kStepsPerWord; ++j) {
        copy_ldsm(LdsmA_x4{}, tAsA_ld(_, _, _, stage), tArA, j);
        gemm(Mma{}, tCrC, tCrA, tCrB, j);
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
