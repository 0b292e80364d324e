#pragma once
// The Hopper half-precision GEMM (sm_90a): C[M, N] = A[M, K] @ B[N, K]^T (+ bias), the contract
// of gemm_launch.hpp, on TMA copies and wgmma with both operands in shared memory, in a
// warp-specialized CTA. Every layout, descriptor and register count is in gemm_wgmma_config.hpp.
//
// Why warp-specialized: the mma.sync kernel (gemm_kernel.cuh) copies each stage with every
// thread's cp.async and meets at a CTA barrier per k tile, and its tensor-core work is issued
// warp by warp through ldmatrix and mma.sync. Here one producer thread keeps kStages - 1 stages in
// flight ahead of the consumers, and the consumers only wait for their data: a warpgroup's four
// wgmmas per stage read both operands from shared memory and run asynchronously, so the next
// stage's wait overlaps them. A stage goes back to the producer once the wgmmas that read it are
// done (wgmma_wait_group<1> one stage later, then an arrive per warp on its "empty" barrier).
//
// Edges: the TMA boxes read zeros past M, N and K (a zero contributes nothing to a sum), so the
// main loop has no predicates; the epilogue stores only rows < M and columns < N.
//
// Split-K (grids of few tiles, gemm_dispatch.cu's wgmma_splits): blockIdx.y is the split, each a
// run of k tiles; the CTAs write fp32 partial sums to p.workspace ([split][M][N]) and
// gemm_split_k_reduce_kernel adds them in split order (deterministic), adds the bias and rounds.

#include <algorithm>
#include <cstdint>

#include "cute_gemm/arch/mbarrier_sm80.hpp"
#include "cute_gemm/arch/mma_sm90.hpp"
#include "cute_gemm/arch/named_barrier.hpp"
#include "cute_gemm/arch/setmaxnreg_sm90.hpp"
#include "cute_gemm/arch/tma_sm90.hpp"
#include "kernels/gemm/gemm_kernel.cuh"
#include "kernels/gemm/gemm_wgmma_config.hpp"
#include "kernels/tma_map.hpp"
#include "kernels/tile_raster.hpp"
#include "kernels/tma_store_tile.cuh"

namespace cute_gemm {

// The tensor maps of one launch (a kernel parameter, __grid_constant__).
struct GemmWgmmaMaps {
  CUtensorMap a;  // A [M, K], (kBM rows, 64 k) boxes, 128-byte swizzle
  CUtensorMap b;  // B [N, K], (kBN rows, 64 k) boxes, 128-byte swizzle
  CUtensorMap c;  // C [M, N], (kBM rows, 64 columns) boxes, 128-byte swizzle (SmemC's slabs);
                  // encoded only when c_by_tma
};

// The epilogue of a warpgroup's whole-width (64, kBN) tile into C rows of 16-byte-aligned
// stride ldc (elements; rows past `rows` are not stored), + bias, rounded once. In the C fragment
// (Cfg::AccLayout) the quad of lanes 4 g + t (t = 0..3) holds 8 consecutive columns of a row per
// n8 block, 2 each; a transpose within the quad gives lane t all 8 columns of block 4 j + t, one
// 16-byte store, so a quad writes 64 contiguous bytes (whole 32-byte sectors) instead of 4-byte
// pieces. Value e + 2 h + 4 i is row 16 w + g + 8 h, column 8 i + 2 t + e (warp w, lane 4 g + t;
// checked on the host).
template <class Cfg>
CG_DEVICE void gemm_wgmma_store_rows(float const (&acc)[Cfg::kAccRegs], typename Cfg::Element* c,
                                     int ldc, int rows, typename Cfg::Element const* bias) {
  using T = typename Cfg::Element;
  const int thr = int(threadIdx.x) % 128, lane = thr % 32;
  const int t = lane % 4, g = lane / 4, w = thr / 32;
  auto pack = [](float x0, float x1) {
    T pair[2] = {HalfTraits<T>::from_float(x0), HalfTraits<T>::from_float(x1)};
    return *reinterpret_cast<uint32_t const*>(pair);
  };
  auto pick = [](uint32_t const (&x)[4], int i) {  // x[i] without indexing registers at run time
    return i == 0 ? x[0] : (i == 1 ? x[1] : (i == 2 ? x[2] : x[3]));
  };
  CG_PRAGMA_UNROLL
  for (int h = 0; h < 2; ++h) {
    const int row = 16 * w + g + 8 * h;
    CG_PRAGMA_UNROLL
    for (int j = 0; j < Cfg::kBN / 32; ++j) {
      uint32_t word[4];  // n8 block 4 j + u: this lane's columns 2 t, 2 t + 1
      CG_PRAGMA_UNROLL
      for (int u = 0; u < 4; ++u) {
        const int v = 2 * h + 4 * (4 * j + u), col = 8 * (4 * j + u) + 2 * t;
        float x0 = acc[v], x1 = acc[v + 1];
        if (bias != nullptr) {
          x0 += HalfTraits<T>::to_float(bias[col]);
          x1 += HalfTraits<T>::to_float(bias[col + 1]);
        }
        word[u] = pack(x0, x1);
      }
      // Round r: each lane sends its word for lane t - r of the quad and receives lane t + r's
      // word for it (block 4 j + t, columns 2 (t + r), 2 (t + r) + 1).
      uint32_t got[4];
      CG_PRAGMA_UNROLL
      for (int r = 0; r < 4; ++r) {
        got[r] = __shfl_sync(0xffffffffu, pick(word, (t - r) & 3), (lane & ~3) | ((t + r) & 3));
      }
      if (row < rows) {  // after the shuffles: every lane takes part in them
        // Word u of the 16 bytes (columns 2 u, 2 u + 1) came in round (u - t) & 3.
        const uint4 out = make_uint4(pick(got, (0 - t) & 3), pick(got, (1 - t) & 3),
                                     pick(got, (2 - t) & 3), pick(got, (3 - t) & 3));
        *reinterpret_cast<uint4*>(c + int64_t(row) * ldc + 8 * (4 * j + t)) = out;
      }
    }
  }
}

// fn(v, row, col) for each pair of adjacent accumulators v, v + 1 of consumer thread `tid` (of
// its warpgroup's C fragment, Cfg::AccLayout) that lies inside the [m, n] output: row and col of
// value v in C, for a warpgroup tile whose first row is `row0` and first column `n0`. The pair is
// columns col, col + 1 of one row (col + 1 may be n).
template <class Cfg, class Fn>
CG_DEVICE void for_each_acc_pair(int tid, int row0, int n0, int m, int n, Fn&& fn) {
  CG_PRAGMA_UNROLL
  for (int v = 0; v < Cfg::kAccRegs; v += 2) {
    const int idx = typename Cfg::AccLayout{}(tid % 128, v);
    const int row = row0 + idx % 64, col = n0 + idx / 64;
    if (row < m && col < n) fn(v, row, col);
  }
}

// grid: (one CTA per (kBM, kBN) tile of C, in the raster order of the config; splits), split z
// the k tiles [z tiles_per_split, (z + 1) tiles_per_split) (none empty); blockDim kThreads (the
// consumer warpgroups, then the producer warpgroup).
template <class Cfg>
__global__ void __launch_bounds__(Cfg::kThreads, Cfg::kMinCtasPerSm)
    gemm_wgmma_kernel(GemmParams p, int tiles_per_split, bool c_by_tma,
                      const __grid_constant__ GemmWgmmaMaps maps) {
#if defined(CG_ARCH_WGMMA_ENABLED)
  using T = typename Cfg::Element;
  using Wgmma = SM90_64xNx16_F32_SS<T, Cfg::kBN>;
  constexpr int S = Cfg::kStages, BM = Cfg::kBM, BN = Cfg::kBN, BK = Cfg::kBK;
  extern __shared__ uint128_t smem_raw[];
  // The swizzle atoms (and so every stage) start on 1024-byte boundaries of the shared space.
  const uint32_t raw_addr = detail::smem_addr(smem_raw);
  char* smem = reinterpret_cast<char*>(smem_raw) + (((raw_addr + 1023u) & ~1023u) - raw_addr);
  uint64_t* const full = reinterpret_cast<uint64_t*>(smem + Cfg::kBarrierOffset);
  uint64_t* const empty = full + S;

  // The CTA's tile: groups of kRasterM tile rows, walked column by column.
  const TileCoord tile_mn =
      raster_tile(blockIdx.x, (p.m + BM - 1) / BM, (p.n + BN - 1) / BN, Cfg::kRasterM);
  const int m0 = tile_mn.m * BM, n0 = tile_mn.n * BN;
  const int kt_begin = blockIdx.y * tiles_per_split;
  const int k_tiles = min((p.k + BK - 1) / BK - kt_begin, tiles_per_split);  // this split's

  const int tid = threadIdx.x;
  if (tid == 0) {
    CG_PRAGMA_UNROLL
    for (int s = 0; s < S; ++s) {
      mbarrier_init(full + s, 1);
      mbarrier_init(empty + s, Cfg::kConsumerWarps);
    }
    fence_proxy_async_shared();  // the initialized barriers are seen by the TMA unit
  }
  __syncthreads();

  if (tid >= Cfg::kConsumerThreads) {
    // ---- producer warpgroup: one thread issues every copy.
    warpgroup_reg_dealloc<Cfg::kProducerRegisters>();
    if (tid != Cfg::kConsumerThreads) return;
    tma_prefetch_map(&maps.a);
    tma_prefetch_map(&maps.b);
    int s = 0;
    uint32_t phase = 0;  // of the empty barriers, from the stages' second use on
    for (int kt = 0; kt < k_tiles; ++kt) {
      if (kt >= S) mbarrier_wait_parity_suspend(empty + s, phase);  // tile kt - S is consumed
      char* st = smem + s * Cfg::kStageBytes;
      mbarrier_arrive_expect_tx(full + s, Cfg::kStageBytes);
      tma_load_2d(st, &maps.a, full + s, (kt_begin + kt) * BK, m0);
      tma_load_2d(st + Cfg::kABytes, &maps.b, full + s, (kt_begin + kt) * BK, n0);
      if (++s == S) {
        s = 0;
        if (kt >= S) phase ^= 1;
      }
    }
    return;
  }

  // ---- consumer warpgroups: warpgroup g multiplies rows 64 g .. 64 g + 63 of the tile.
  warpgroup_reg_alloc<Cfg::kConsumerRegisters>();
  const int wg = tid / 128, lane = tid % 32;
  const uint32_t base = detail::smem_addr(smem);
  // Stage 0's descriptors, from the layouts; stage s adds s * kStageBytes (>> 4 in the start
  // address field), k16 step j adds j * kStepBytes.
  const uint64_t desc_a0 = Cfg::DescA::make(base + Cfg::group_a_bytes(wg));
  const uint64_t desc_b0 = Cfg::DescB::make(base + Cfg::kABytes);
  float acc[Cfg::kAccRegs];  // the first wgmma ignores their values (scale_d = 0)

  int s = 0;
  uint32_t phase = 0;  // of the full barriers: (kt / S) % 2
  int release = 0;     // the stage of tile kt - 1
  for (int kt = 0; kt < k_tiles; ++kt) {
    mbarrier_wait_parity_suspend(full + s, phase);  // tile kt landed
    wgmma_fence();
    const uint64_t at = uint64_t((s * Cfg::kStageBytes) >> 4);
    CG_PRAGMA_UNROLL
    for (int j = 0; j < Cfg::kKSteps; ++j) {
      const uint64_t step = uint64_t((j * Cfg::kStepBytes) >> 4);
      Wgmma::fma(acc, desc_a0 + at + step, desc_b0 + at + step, kt > 0 || j > 0);
    }
    wgmma_commit_group();
    // Tile kt - 1's wgmmas are done (this warp's view): its stage goes back to the producer.
    wgmma_wait_group<1>();
    if (kt > 0) {
      __syncwarp();
      if (lane == 0) mbarrier_arrive(empty + release);
    }
    release = s;
    if (++s == S) s = 0, phase ^= 1;
  }
  wgmma_wait_group<0>();

  // ---- epilogue: value v of the thread's C fragment (Cfg::AccLayout) is row m + 64 wg and
  // column n of the tile, (m, n) its column-major index in (M64, N). Adjacent values 2i, 2i + 1
  // are columns n, n + 1 of one row: stored as a pair where the row allows it.
  if (gridDim.y > 1) {  // split-K: this split's fp32 sums, [split][M][N]
    float* ws = static_cast<float*>(p.workspace) + int64_t(blockIdx.y) * p.m * p.n;
    const bool ws_pairs = p.n % 2 == 0;
    for_each_acc_pair<Cfg>(tid, m0 + 64 * wg, n0, p.m, p.n, [&](int v, int row, int col) {
      float* dst = ws + int64_t(row) * p.n + col;
      if (ws_pairs) {
        *reinterpret_cast<float2*>(dst) = make_float2(acc[v], acc[v + 1]);
      } else {
        dst[0] = acc[v];
        if (col + 1 < p.n) dst[1] = acc[v + 1];
      }
    });
    return;
  }
  T* c = static_cast<T*>(p.c);
  T const* bias = static_cast<T const*>(p.bias);
  if constexpr (Cfg::kCThroughSmem) {
    if (c_by_tma) {
      // Through shared memory: whole 128-byte lines stored by the TMA while the CTA retires,
      // instead of a wave of CTAs storing from registers at once (as the mixed kernel's
      // warp-specialized tiles do; NOTES session 28).
      named_barrier_sync<1, Cfg::kConsumerThreads>();  // every consumer's wgmmas are done
      constexpr auto sC = typename Cfg::SmemC{};
      T* tile = reinterpret_cast<T*>(smem);
      T const* tile_bias = bias == nullptr ? nullptr : bias + n0;
      const int cols = p.n - n0;  // of the tile inside C
      CG_PRAGMA_UNROLL
      for (int v = 0; v < Cfg::kAccRegs; v += 2) {
        const int idx = typename Cfg::AccLayout{}(tid % 128, v);
        const int row = 64 * wg + idx % 64, col = idx / 64;  // within the tile; col even
        float x0 = acc[v], x1 = acc[v + 1];
        if (tile_bias != nullptr && col < cols) {  // N % 2 == 0 here: col + 1 < N too
          x0 += HalfTraits<T>::to_float(tile_bias[col]);
          x1 += HalfTraits<T>::to_float(tile_bias[col + 1]);
        }
        T pair[2] = {HalfTraits<T>::from_float(x0), HalfTraits<T>::from_float(x1)};
        *reinterpret_cast<uint32_t*>(tile + sC(row, col)) = *reinterpret_cast<uint32_t*>(pair);
      }
      tma_store_tile_slabs<Cfg::kConsumerThreads, BN / 64>(tid, &maps.c, smem, Cfg::kCSlabBytes,
                                                           n0, m0, p.n);
      return;
    }
  }
  if (n0 + BN <= p.n && p.ldc % 8 == 0) {
    gemm_wgmma_store_rows<Cfg>(acc, c + int64_t(m0 + 64 * wg) * p.ldc + n0, p.ldc,
                               p.m - (m0 + 64 * wg), bias == nullptr ? nullptr : bias + n0);
    return;
  }
  // Tiles past N or rows not 16-byte aligned: value by value, pairs where the row allows.
  const bool pairs_ok = p.ldc % 2 == 0;
  for_each_acc_pair<Cfg>(tid, m0 + 64 * wg, n0, p.m, p.n, [&](int v, int row, int col) {
    float x0 = acc[v], x1 = acc[v + 1];
    if (bias != nullptr) {
      x0 += HalfTraits<T>::to_float(bias[col]);
      if (col + 1 < p.n) x1 += HalfTraits<T>::to_float(bias[col + 1]);
    }
    T* dst = c + int64_t(row) * p.ldc + col;
    if (pairs_ok && col + 1 < p.n) {
      T pair[2] = {HalfTraits<T>::from_float(x0), HalfTraits<T>::from_float(x1)};
      *reinterpret_cast<uint32_t*>(dst) = *reinterpret_cast<uint32_t const*>(pair);
    } else {
      dst[0] = HalfTraits<T>::from_float(x0);
      if (col + 1 < p.n) dst[1] = HalfTraits<T>::from_float(x1);
    }
  });
#else
  (void)p, (void)tiles_per_split, (void)c_by_tma, (void)maps;
#endif
}

// C = the sum of the splits' partial sums (in split order) + bias, rounded once: one output per
// thread, grid-stride.
template <class T>
__global__ void gemm_split_k_reduce_kernel(GemmParams p, int splits) {
  const int64_t total = int64_t(p.m) * p.n;
  float const* ws = static_cast<float const*>(p.workspace);
  T const* bias = static_cast<T const*>(p.bias);
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    float acc = 0.f;
    for (int s = 0; s < splits; ++s) acc += __ldcg(ws + s * total + i);
    const int row = int(i / p.n), col = int(i % p.n);
    if (bias != nullptr) acc += HalfTraits<T>::to_float(bias[col]);
    static_cast<T*>(p.c)[int64_t(row) * p.ldc + col] = HalfTraits<T>::from_float(acc);
  }
}

// Whether a launch stores C through shared memory and TMA (SmemC): one split (no workspace), and
// C's address and row stride what a tensor map takes (16-byte aligned; N even, so that the
// epilogue's column pairs never straddle N).
inline bool gemm_c_by_tma(GemmParams const& p, int splits) {
  return splits == 1 && p.ldc % 8 == 0 && p.n % 2 == 0 &&
         reinterpret_cast<uintptr_t>(p.c) % 16 == 0;
}

// Encodes the launch's tensor maps: A and B as K-major matrices read in boxes of (kBM, 64) and
// (kBN, 64) elements, each box one SmemA / SmemB tile; with c_by_tma, C written in (kBM, 64)
// boxes, each one slab of SmemC.
template <class Cfg>
cudaError_t encode_gemm_wgmma_maps(GemmParams const& p, bool c_by_tma, GemmWgmmaMaps* maps) {
  const bool bf16 = p.dtype == HalfType::kBFloat16;
  cudaError_t e = encode_k_major_sw128_map(&maps->a, p.a, bf16, uint64_t(p.m), uint64_t(p.k),
                                           uint64_t(p.lda), Cfg::kBM);
  if (e == cudaSuccess) {
    e = encode_k_major_sw128_map(&maps->b, p.b, bf16, uint64_t(p.n), uint64_t(p.k),
                                 uint64_t(p.ldb), Cfg::kBN);
  }
  if (e == cudaSuccess && c_by_tma) {
    e = encode_k_major_sw128_map(&maps->c, p.c, bf16, uint64_t(p.m), uint64_t(p.n),
                                 uint64_t(p.ldc), Cfg::kBM);
  }
  return e;
}

// splits: the split-K factor (gemm_dispatch.cu), none empty; splits > 1 needs p.workspace
// ([splits][M][N] fp32).
template <class Cfg>
cudaError_t launch_gemm_wgmma(GemmParams const& p, int splits, cudaStream_t stream) {
  static const cudaError_t prepared = cudaFuncSetAttribute(
      gemm_wgmma_kernel<Cfg>, cudaFuncAttributeMaxDynamicSharedMemorySize, Cfg::kSmemBytes);
  if (prepared != cudaSuccess) return prepared;
  if (splits < 1 || (splits > 1 && p.workspace == nullptr)) return cudaErrorInvalidValue;
  GemmWgmmaMaps maps{};
  const bool c_by_tma = Cfg::kCThroughSmem && gemm_c_by_tma(p, splits);
  const cudaError_t encoded = encode_gemm_wgmma_maps<Cfg>(p, c_by_tma, &maps);
  if (encoded != cudaSuccess) return encoded;
  const int tiles = ((p.m + Cfg::kBM - 1) / Cfg::kBM) * ((p.n + Cfg::kBN - 1) / Cfg::kBN);
  const int k_tiles = (p.k + Cfg::kBK - 1) / Cfg::kBK;
  const int per_split = (k_tiles + splits - 1) / splits;
  // splits must leave none empty (gemm_dispatch.cu's wgmma_splits makes sure).
  if ((k_tiles + per_split - 1) / per_split != splits) return cudaErrorInvalidValue;
  gemm_wgmma_kernel<Cfg><<<dim3(tiles, splits), Cfg::kThreads, Cfg::kSmemBytes, stream>>>(
      p, per_split, c_by_tma, maps);
  if (splits == 1) return cudaGetLastError();
  const int64_t total = int64_t(p.m) * p.n;
  const int threads = 256;
  const int blocks = int(std::min<int64_t>((total + threads - 1) / threads, 4 * 1024));
  gemm_split_k_reduce_kernel<typename Cfg::Element><<<blocks, threads, 0, stream>>>(p, splits);
  return cudaGetLastError();
}

}  // namespace cute_gemm
