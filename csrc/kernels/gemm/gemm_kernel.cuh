#pragma once
// The half-precision GEMM kernel, C = A @ B^T (+ bias), built from the layout core's atoms.
//
// Per CTA: a BM x BN tile of C, K walked in BK slices through a `Stages`-deep cp.async pipeline.
//   global -> shared   cp.async 16 B per thread (TiledCopy), zero-filled outside the matrix
//   shared             K-contiguous rows, Swizzle<3,3,3>: the 8 rows one ldmatrix reads land in
//                      8 different 16-byte bank groups
//   shared -> regs     ldmatrix.x4 straight into mma fragments (TiledMmaCopy), one k-step ahead
//   regs               mma.sync m16n8k16, fp32 accumulators
//   epilogue           accumulators (+ bias) -> half, through swizzled shared memory, then 16-byte
//                      coalesced row stores (scalar stores where a row's end is not 16-byte aligned)
// CTAs are ordered in groups of kGroupM tile-rows so consecutive CTAs share A and B tiles in L2.

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/gemm/gemm_config.hpp"
#include "kernels/gemm/gemm_launch.hpp"
#include "kernels/half_traits.cuh"

namespace cute_gemm {

template <class Element, int BM, int BN, int BK, int Stages, int WarpsM, int WarpsN>
using GemmKernelConfig = GemmConfig<Element, typename HalfTraits<Element>::MmaOp, BM, BN, BK,
                                    Stages, WarpsM, WarpsN>;

// The (row, col) of a column-major tile index.
template <int R>
CG_DEVICE void tile_rc(int idx, int& r, int& c) {
  r = idx % R;
  c = idx / R;
}

// For a G2S partition of an (R, BK) tile: whether each instruction's row lies inside the matrix
// (row0 + r < rows) and the tile column all of a thread's instructions share.
// coords: partition_coords of the tile, ((V, I, 1) layout, offset).
template <int R, int I, class Coords>
CG_DEVICE int g2s_row_predicates(Coords const& coords, int row0, int rows, bool (&row_ok)[I]) {
  int col = 0;
  CG_PRAGMA_UNROLL
  for (int i = 0; i < I; ++i) {
    int r;
    tile_rc<R>(get<0>(coords)(0, i, 0) + get<1>(coords), r, col);
    row_ok[i] = row0 + r < rows;
  }
  return col;
}

template <class Cfg>
__global__ void __launch_bounds__(Cfg::kThreads) gemm_kernel(GemmParams p) {
  using T = typename Cfg::Element;
  constexpr int BM = Cfg::kBM, BN = Cfg::kBN, BK = Cfg::kBK, S = Cfg::kStages;
  extern __shared__ uint128_t smem_raw[];
  T* smem = reinterpret_cast<T*>(smem_raw);

  // Grouped CTA order: kGroupM tile-rows at a time, column by column.
  const int tiles_m = (p.m + BM - 1) / BM, tiles_n = (p.n + BN - 1) / BN;
  const int per_group = Cfg::kGroupM * tiles_n;
  const int group = blockIdx.x / per_group;
  const int first_m = group * Cfg::kGroupM;
  const int group_rows = min(tiles_m - first_m, Cfg::kGroupM);
  const int in_group = blockIdx.x % per_group;
  const int m0 = (first_m + in_group % group_rows) * BM;
  const int n0 = (in_group / group_rows) * BN;
  const int tid = threadIdx.x;

  T const* a_ptr = static_cast<T const*>(p.a);
  T const* b_ptr = static_cast<T const*>(p.b);

  // ---- global -> shared partitions (k-tile 0; later tiles advance the pointer by BK)
  const auto gA = make_tensor(a_ptr + int64_t(m0) * p.lda,
                              make_layout(make_shape(Int<BM>{}, Int<BK>{}), make_stride(p.lda, _1{})));
  const auto gB = make_tensor(b_ptr + int64_t(n0) * p.ldb,
                              make_layout(make_shape(Int<BN>{}, Int<BK>{}), make_stride(p.ldb, _1{})));
  auto sA = make_tensor(smem, typename Cfg::SmemA{});
  auto sB = make_tensor(smem + BM * BK * S, typename Cfg::SmemB{});

  const auto g2s = get_thread_copy(typename Cfg::G2S{}, tid);
  const auto tAgA = g2s.partition_S(gA);  // (8, RA, 1)
  const auto tBgB = g2s.partition_S(gB);  // (8, RB, 1)
  auto tAsA = g2s.partition_D(sA);        // (8, RA, 1, S)
  auto tBsB = g2s.partition_D(sB);        // (8, RB, 1, S)
  // Tile coordinates of each instruction: rows are fixed, columns move with the k-tile.
  const auto cA = g2s.partition_coords(make_shape(Int<BM>{}, Int<BK>{}));
  const auto cB = g2s.partition_coords(make_shape(Int<BN>{}, Int<BK>{}));
  constexpr int RA = decltype(size<1>(tAgA))::value;
  constexpr int RB = decltype(size<1>(tBgB))::value;
  bool a_row_ok[RA], b_row_ok[RB];
  const int a_col = g2s_row_predicates<BM>(cA, m0, p.m, a_row_ok);
  const int b_col = g2s_row_predicates<BN>(cB, n0, p.n, b_row_ok);

  const int k_tiles = (p.k + BK - 1) / BK;
  auto load_tile = [&](int k_tile, int stage) {
    const int k0 = k_tile * BK;
    const bool a_col_ok = k0 + a_col < p.k, b_col_ok = k0 + b_col < p.k;
    auto dA = tAsA(_, _, _, stage);
    auto dB = tBsB(_, _, _, stage);
    copy_if(CpAsync16{}, [&](int i, int) { return a_row_ok[i] && a_col_ok; },
            make_tensor(tAgA.data() + k0, tAgA.layout()), dA);
    copy_if(CpAsync16{}, [&](int i, int) { return b_row_ok[i] && b_col_ok; },
            make_tensor(tBgB.data() + k0, tBgB.layout()), dB);
  };

  // ---- shared -> register partitions and fragments
  using Mma = typename Cfg::Mma;
  const auto thr_mma = get_thread_slice(Mma{}, tid);
  auto tCrA = ThrMMA<Mma>::template partition_fragment_A<T>(make_shape(Int<BM>{}, Int<BK>{}));
  auto tCrB = ThrMMA<Mma>::template partition_fragment_B<T>(make_shape(Int<BN>{}, Int<BK>{}));
  auto tCrC = ThrMMA<Mma>::template partition_fragment_C<float>(make_shape(Int<BM>{}, Int<BN>{}));
  clear(tCrC);
  auto tArA = Cfg::CopyA::retile(tCrA);  // (8, RepM, KSteps)
  auto tBrB = Cfg::CopyB::retile(tCrB);  // (8, RepN / 2, KSteps)
  const auto tAsA_ld = get_thread_copy(typename Cfg::CopyA{}, tid).partition_S(sA);
  const auto tBsB_ld = get_thread_copy(typename Cfg::CopyB{}, tid).partition_S(sB);

  // ---- prologue: Stages - 1 tiles in flight
  CG_PRAGMA_UNROLL
  for (int s = 0; s < S - 1; ++s) {
    if (s < k_tiles) load_tile(s, s);
    cp_async_fence();
  }
  cp_async_wait<S - 2>();
  __syncthreads();

  int read_stage = 0;
  int write_stage = S - 1;
  copy_ldsm(LdsmA_x4{}, tAsA_ld(_, _, _, read_stage), tArA, 0);
  copy_ldsm(LdsmB_x4{}, tBsB_ld(_, _, _, read_stage), tBrB, 0);

  // ---- main loop: fragments one k-step ahead, the next tile's loads issued at k-step 0
  CG_PRAGMA_NO_UNROLL
  for (int kt = 0; kt < k_tiles; ++kt) {
    CG_PRAGMA_UNROLL
    for (int ks = 0; ks < Cfg::kKSteps; ++ks) {
      if (ks == Cfg::kKSteps - 1) {
        // The next tile's stage must have landed before its first fragments are read.
        cp_async_wait<S - 2>();
        __syncthreads();
        read_stage = read_stage + 1 == S ? 0 : read_stage + 1;
      }
      const int ks_next = ks + 1 == Cfg::kKSteps ? 0 : ks + 1;
      copy_ldsm(LdsmA_x4{}, tAsA_ld(_, _, _, read_stage), tArA, ks_next);
      copy_ldsm(LdsmB_x4{}, tBsB_ld(_, _, _, read_stage), tBrB, ks_next);
      if (ks == 0) {
        // The stage being overwritten was last read in tile kt - 1, before the barrier above.
        if (kt + S - 1 < k_tiles) load_tile(kt + S - 1, write_stage);
        cp_async_fence();
        write_stage = write_stage + 1 == S ? 0 : write_stage + 1;
      }
      gemm(Mma{}, tCrC, tCrA, tCrB, ks);
    }
  }

  // ---- epilogue
  cp_async_wait<0>();
  __syncthreads();  // operand buffers are reused for C

  // Tile coordinates of this thread's accumulators.
  const auto cC = thr_mma.partition_coords_C(make_shape(Int<BM>{}, Int<BN>{}));
  if (p.bias != nullptr) {
    T const* bias = static_cast<T const*>(p.bias);
    CG_PRAGMA_UNROLL
    for (int i = 0; i < decltype(size(tCrC))::value; ++i) {
      const int col = (get<1>(cC) + get<0>(cC)(i)) / BM;
      const float b = n0 + col < p.n ? HalfTraits<T>::to_float(bias[n0 + col]) : 0.f;
      tCrC(i) += b;
    }
  }
  auto sC = make_tensor(smem, typename Cfg::SmemC{});
  auto tCrC_h = make_fragment_like<T>(tCrC);
  CG_PRAGMA_UNROLL
  for (int i = 0; i < decltype(size(tCrC))::value; ++i) tCrC_h(i) = HalfTraits<T>::from_float(tCrC(i));
  copy_r2s(R2S_CPairs{}, Cfg::CopyC::retile_S(tCrC_h),
           get_thread_copy(typename Cfg::CopyC{}, tid).partition_D(sC));
  __syncthreads();

  const auto s2g = get_thread_copy(typename Cfg::S2G{}, tid);
  const auto tSsC = s2g.partition_S(sC);  // (8, R, 1)
  const auto cS = s2g.partition_coords(make_shape(Int<BM>{}, Int<BN>{}));
  T* c_ptr = static_cast<T*>(p.c);
  const bool vector_ok = (p.ldc % 8) == 0;
  CG_PRAGMA_UNROLL
  for (int i = 0; i < decltype(size<1>(tSsC))::value; ++i) {
    int r, c;
    tile_rc<BM>(get<0>(cS)(0, i, 0) + get<1>(cS), r, c);
    const int row = m0 + r, col = n0 + c;
    if (row >= p.m || col >= p.n) continue;
    T* dst = c_ptr + int64_t(row) * p.ldc + col;
    if (vector_ok && col + 8 <= p.n) {
      *reinterpret_cast<uint128_t*>(dst) = *reinterpret_cast<uint128_t const*>(&tSsC(0, i, 0));
    } else {
      for (int v = 0; v < 8 && col + v < p.n; ++v) dst[v] = tSsC(v, i, 0);
    }
  }
}

template <class Cfg>
cudaError_t launch_gemm(GemmParams const& p, cudaStream_t stream) {
  const int tiles = ((p.m + Cfg::kBM - 1) / Cfg::kBM) * ((p.n + Cfg::kBN - 1) / Cfg::kBN);
  const int smem = Cfg::kSmemBytes;
  if (smem > 48 * 1024) {
    const cudaError_t e = cudaFuncSetAttribute(
        gemm_kernel<Cfg>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (e != cudaSuccess) return e;
  }
  gemm_kernel<Cfg><<<tiles, Cfg::kThreads, smem, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace cute_gemm
