#pragma once
// Mixed-input GEMM on Hopper (sm_90a) with the weights dequantized into shared memory:
// out[M, N] = A[M, K] @ dequant(W)[N, K]^T (+ bias). The CTA, its layouts and barriers are
// described in mixed_wgmma_smem_config.hpp; the consumers' main loop and epilogue are the dense
// GEMM's (gemm_wgmma_kernel.cuh), so a mixed GEMM at large M runs the dense mainloop with one
// more warpgroup that writes the weight tile.
//
// Edges: the TMA reads zeros past M and K for A, past N for the packed weights and scales (a zero
// scale makes the weight 0), so no loop has predicates; the epilogue stores rows < M and
// columns < N. Split-K (blockIdx.z, a run of packed k blocks each) writes fp32 partial sums to the
// workspace for split_k_reduce_kernel (mixed_epilogue.cuh), as the other mixed kernels do.

#include "cute_gemm/arch/copy_sm90.hpp"
#include "cute_gemm/arch/grid_dependency_sm90.hpp"
#include "cute_gemm/arch/mbarrier_sm80.hpp"
#include "cute_gemm/arch/mma_sm90.hpp"
#include "cute_gemm/arch/setmaxnreg_sm90.hpp"
#include "cute_gemm/arch/tma_sm90.hpp"
#include "kernels/gemm/gemm_wgmma_kernel.cuh"
#include "kernels/mixed/dequant.cuh"
#include "kernels/mixed/group_shape.cuh"
#include "kernels/mixed/mixed_epilogue.cuh"
#include "kernels/mixed/mixed_wgmma_launch.cuh"
#include "kernels/mixed/mixed_wgmma_smem_config.hpp"

namespace cute_gemm {
namespace mixed {

// The dequantizing warps' loop over this split's packed blocks (see mixed_smem_dequantize), for
// symmetric or asymmetric weights (zero points loaded per group) as a compile-time choice, so
// neither pays for the other's instructions.
template <class Cfg, bool Asymmetric, class LoadPacked>
CG_DEVICE void mixed_smem_dequantize_loop(MixedWgmmaMaps const& maps, char* smem,
                                          uint32_t smem_base, uint32_t const (&store_off)[2],
                                          int d, int lane, bool copier, int m0, int kb_begin,
                                          int n_kb, LoadPacked const& load_packed) {
  using T = typename Cfg::Element;
  using D = Dequant<T>;
  using T2 = typename D::T2;
  using Tile = typename Cfg::Tile;
  constexpr int S = Cfg::kStages, P = Cfg::kPackedStages, KT = Cfg::kTilesPerBlock;
  constexpr int NBW = Cfg::kBlocksPerWarp;
  constexpr auto sW = typename Cfg::SmemW{};
  constexpr auto sS = typename Cfg::SmemScales{};
  constexpr auto sB = typename Tile::SmemB{};
  constexpr int kBlockRowBytes = int(sB(8, 0)) * int(sizeof(T));
  uint64_t* const full = reinterpret_cast<uint64_t*>(smem + Cfg::kBarrierOffset);
  uint64_t* const empty = full + S;
  uint64_t* const packed_full = empty + S;
  uint64_t* const packed_empty = packed_full + P;
  char const* const packed0 = smem + Cfg::kPackedOffset;
  const int g = lane / 4;
  const ZeroConstants<T2> symmetric_zc = D::zero_constants(float(1 << (Cfg::kBits - 1)));

  int kt = 0;  // this split's k tile
  for (int j = 0; j < n_kb; ++j) {
    const int ps = j % P;
    mbarrier_wait_parity_suspend(packed_full + ps, (j / P) & 1);  // block j landed
    char const* pst = packed0 + ps * Cfg::kPackedBytes;
    T const* s_scale = reinterpret_cast<T const*>(pst + Cfg::kWeightBytes);
    // This lane's 16 bytes of each of its n8 blocks (all k tiles of the block).
    uint4 words[NBW];
    CG_PRAGMA_UNROLL
    for (int i = 0; i < NBW; ++i) {
      words[i] = reinterpret_cast<uint4 const*>(pst)[sW(lane, NBW * d + i)];
    }
    CG_PRAGMA_UNROLL
    for (int h = 0; h < KT; ++h, ++kt) {
      const int s = kt % S;
      if (kt >= S) mbarrier_wait_parity_suspend(empty + s, ((kt / S) + 1) & 1);  // tile kt - S
      if (copier) {
        mbarrier_arrive_expect_tx(full + s, Cfg::kStageABytes);
        tma_load_2d(smem + s * Tile::kStageBytes, &maps.a, full + s,
                    (kb_begin * KT + kt) * Cfg::kBK, m0);
      }
      const uint32_t wtile = smem_base + uint32_t(s * Tile::kStageBytes + Tile::kABytes);
      CG_PRAGMA_UNROLL
      for (int i = 0; i < NBW; ++i) {
        const int col = kBlockN * (NBW * d + i) + g;
        CG_PRAGMA_UNROLL
        for (int q = 0; q < 2; ++q) {
          const int row = Cfg::scale_row(h, q);
          const T2 s2 = D::splat_of(s_scale[sS(row, col, 0)]);
          ZeroConstants<T2> zc = symmetric_zc;
          if constexpr (Asymmetric) {
            zc = D::zero_constants(HalfTraits<T>::to_float(s_scale[sS(row, col, 1)]));
          }
          uint32_t r[4];  // register j: 8 k chunk 4 q + j of the tile, q - z
          if constexpr (Cfg::kBits == 4) {
            dequant_word<T, 4, false>(word_of(words[i], Cfg::first_word(h, q)), zc, r);
          } else {
            uint32_t lo[2], hi[2];
            dequant_word<T, 8, false>(word_of(words[i], Cfg::first_word(h, q)), zc, lo);
            dequant_word<T, 8, false>(word_of(words[i], Cfg::first_word(h, q) + 1), zc, hi);
            r[0] = lo[0], r[1] = lo[1], r[2] = hi[0], r[3] = hi[1];
          }
          CG_PRAGMA_UNROLL
          for (int v = 0; v < 4; ++v) r[v] = D::as_u32(__hmul2(D::as_t2(r[v]), s2));  // rounded
          SM90_U32x4_STSM_N::copy(r[0], r[1], r[2], r[3],
                                  wtile + store_off[q] + uint32_t(i * kBlockRowBytes));
        }
      }
      // The weight tile is read by wgmma (the async proxy): fence, then publish.
      fence_proxy_async_shared();
      __syncwarp();
      if (lane == 0) mbarrier_arrive(full + s);
    }
    __syncwarp();
    if (lane == 0) mbarrier_arrive(packed_empty + ps);  // this warp is done with block j
    if (copier && j + P < n_kb) {
      mbarrier_wait_parity_suspend(packed_empty + ps, (j / P) & 1);
      load_packed(j + P, ps);
    }
  }
}

// The dequantizing warpgroups (threads kConsumerThreads ..): thread 0 of them issues every TMA
// copy (packed blocks kPackedStages ahead, each A tile when its stage is free); each warp writes
// its n8 blocks of each weight tile. dt: the thread within the dequantizing warpgroups.
template <class Cfg>
CG_DEVICE void mixed_smem_dequantize(MixedGemmParams const& p, MixedWgmmaMaps const& maps,
                                     char* smem, int dt, int m0, int n0, int kb_begin, int n_kb) {
  using T = typename Cfg::Element;
  constexpr int S = Cfg::kStages, P = Cfg::kPackedStages;
  constexpr auto sS = typename Cfg::SmemScales{};
  constexpr auto sB = typename Cfg::Tile::SmemB{};
  uint64_t* const packed_full = reinterpret_cast<uint64_t*>(smem + Cfg::kBarrierOffset) + 2 * S;
  char* const packed0 = smem + Cfg::kPackedOffset;

  const int d = dt / 32, lane = dt % 32;
  const bool copier = dt == 0;
  const bool asymmetric = p.zeros != nullptr;
  const GroupShape groups(p);

  // Packed block j of this split into packed stage ps, with its byte count announced.
  auto load_packed = [&](int j, int ps) {
    const uint32_t bytes =
        Cfg::kWeightBytes + Cfg::kScaleRows * Cfg::kScaleRowBytes * (asymmetric ? 2 : 1);
    mbarrier_arrive_expect_tx(packed_full + ps, bytes);
    const int kb = kb_begin + j;
    char* st = packed0 + ps * Cfg::kPackedBytes;
    tma_load_2d(st, &maps.w, packed_full + ps, kb * Cfg::kWBoxWords, n0 / kBlockN);
    CG_PRAGMA_UNROLL
    for (int r = 0; r < Cfg::kScaleRows; ++r) {
      const int grp = min(groups.of(kb * Cfg::kBlockK + 32 * r), groups.last);
      char* dst = st + Cfg::kWeightBytes + sS(r, 0, 0) * int(sizeof(T));
      tma_load_2d(dst, &maps.scales, packed_full + ps, n0, grp);
      if (asymmetric) {
        tma_load_2d(dst + sS(0, 0, 1) * int(sizeof(T)), &maps.zeros, packed_full + ps, n0, grp);
      }
    }
  };
  if (copier) {
    tma_prefetch_map(&maps.a);
    tma_prefetch_map(&maps.w);
    tma_prefetch_map(&maps.scales);
    // Programmatic dependent launch: the weights do not depend on the previous kernel; the
    // activations (its output) are read only after the wait.
    for (int j = 0; j < min(P, n_kb); ++j) load_packed(j, j);
    grid_dependency_wait();
  }

  // Where this lane's stmatrix rows go in a weight tile: x4 store q of its first n8 block
  // (StoreRowTV, then SmemB, in bytes); block i is sB(8, 0) * i elements further (8 rows keep
  // the swizzle phase).
  uint32_t store_off[2];
  CG_PRAGMA_UNROLL
  for (int q = 0; q < 2; ++q) {
    const int idx = typename Cfg::StoreRowTV{}(lane, make_coord(q, 0), d);
    store_off[q] = uint32_t(sB(idx % Cfg::kBN, idx / Cfg::kBN)) * uint32_t(sizeof(T));
  }
  const uint32_t smem_base = detail::smem_addr(smem);
  if (asymmetric) {
    mixed_smem_dequantize_loop<Cfg, true>(maps, smem, smem_base, store_off, d, lane, copier, m0,
                                          kb_begin, n_kb, load_packed);
  } else {
    mixed_smem_dequantize_loop<Cfg, false>(maps, smem, smem_base, store_off, d, lane, copier, m0,
                                           kb_begin, n_kb, load_packed);
  }
}

// grid (ceil(N / kBN), ceil(M / kBM), splits), split z the packed k blocks
// [z blocks_per_split, ..) (none empty); blockDim kThreads (consumers, then the dequantizing
// warpgroup). The launch_split_k signature of the other mixed kernels.
template <class Cfg>
__global__ void __launch_bounds__(Cfg::kThreads, 1)
    mixed_wgmma_smem_kernel(MixedGemmParams p, int blocks_per_split, bool to_workspace,
                            const __grid_constant__ MixedWgmmaMaps maps) {
#if defined(CG_ARCH_WGMMA_ENABLED)
  using T = typename Cfg::Element;
  using Tile = typename Cfg::Tile;
  using Wgmma = SM90_64xNx16_F32_SS<T, Cfg::kBN>;
  constexpr int S = Cfg::kStages, P = Cfg::kPackedStages;
  extern __shared__ uint128_t smem_raw[];
  // The swizzle atoms (and so every stage) start on 1024-byte boundaries of the shared space.
  const uint32_t raw_addr = detail::smem_addr(smem_raw);
  char* smem = reinterpret_cast<char*>(smem_raw) + (((raw_addr + 1023u) & ~1023u) - raw_addr);
  uint64_t* const full = reinterpret_cast<uint64_t*>(smem + Cfg::kBarrierOffset);
  uint64_t* const empty = full + S;
  uint64_t* const packed_full = empty + S;
  uint64_t* const packed_empty = packed_full + P;

  const int tid = threadIdx.x;
  const int m0 = blockIdx.y * Cfg::kBM, n0 = blockIdx.x * Cfg::kBN;
  const int k_blocks = mixed::k_blocks(p.k, Cfg::kBits);
  const int kb_begin = blockIdx.z * blocks_per_split;
  const int n_kb = min(kb_begin + blocks_per_split, k_blocks) - kb_begin;

  if (tid == 0) {
    CG_PRAGMA_UNROLL
    for (int s = 0; s < S; ++s) {
      mbarrier_init(full + s, 1 + Cfg::kDequantWarps);
      mbarrier_init(empty + s, Cfg::kConsumerWarps);
    }
    CG_PRAGMA_UNROLL
    for (int s = 0; s < P; ++s) {
      mbarrier_init(packed_full + s, 1);
      mbarrier_init(packed_empty + s, Cfg::kDequantWarps);
    }
    fence_proxy_async_shared();  // the initialized barriers are seen by the TMA unit
  }
  __syncthreads();

  if (tid >= Cfg::kConsumerThreads) {
    warpgroup_reg_dealloc<Cfg::kDequantRegisters>();
    mixed_smem_dequantize<Cfg>(p, maps, smem, tid - Cfg::kConsumerThreads, m0, n0, kb_begin,
                               n_kb);
    return;
  }

  // ---- consumer warpgroups: warpgroup wg multiplies rows 64 wg .. 64 wg + 63 of the tile, as
  // the dense kernel does.
  warpgroup_reg_alloc<Cfg::kConsumerRegisters>();
  const int wg = tid / 128, lane = tid % 32;
  const uint32_t base = detail::smem_addr(smem);
  const uint64_t desc_a0 = Tile::DescA::make(base + Tile::group_a_bytes(wg));
  const uint64_t desc_b0 = Tile::DescB::make(base + Tile::kABytes);
  float acc[Tile::kAccRegs];  // the first wgmma ignores their values (scale_d = 0)
  const int k_tiles = n_kb * Cfg::kTilesPerBlock;
  int s = 0;
  uint32_t phase = 0;  // of the full barriers: (kt / S) % 2
  int release = 0;     // the stage of tile kt - 1
  for (int kt = 0; kt < k_tiles; ++kt) {
    mbarrier_wait_parity_suspend(full + s, phase);  // tile kt's A landed, its weights written
    wgmma_fence();
    const uint64_t at = uint64_t((s * Tile::kStageBytes) >> 4);
    CG_PRAGMA_UNROLL
    for (int j = 0; j < Tile::kKSteps; ++j) {
      const uint64_t step = uint64_t((j * Tile::kStepBytes) >> 4);
      Wgmma::fma(acc, desc_a0 + at + step, desc_b0 + at + step, kt > 0 || j > 0);
    }
    wgmma_commit_group();
    wgmma_wait_group<1>();  // tile kt - 1's wgmmas are done (this warp's view)
    if (kt > 0) {
      __syncwarp();
      if (lane == 0) mbarrier_arrive(empty + release);
    }
    release = s;
    if (++s == S) s = 0, phase ^= 1;
  }
  wgmma_wait_group<0>();
  grid_launch_dependents();
  float* ws = to_workspace
                  ? static_cast<float*>(p.workspace) + int64_t(blockIdx.z) * p.m * p.n
                  : nullptr;
  gemm_wgmma_epilogue<Tile>(acc, wg, m0, n0, p.m, p.n, static_cast<T*>(p.out), p.ldo,
                            static_cast<T const*>(p.bias), ws);
#else
  (void)p, (void)blocks_per_split, (void)to_workspace, (void)maps;
#endif
}

// Raises the kernel's dynamic shared memory limit once.
template <class Cfg>
cudaError_t prepare_mixed_wgmma_smem() {
  static const cudaError_t e = cudaFuncSetAttribute(
      mixed_wgmma_smem_kernel<Cfg>, cudaFuncAttributeMaxDynamicSharedMemorySize, Cfg::kSmemBytes);
  return e;
}

// splits: the split-K factor of the plan, none empty; splits > 1 needs p.workspace.
template <class Cfg>
cudaError_t launch_mixed_wgmma_smem(MixedGemmParams const& p, int splits, cudaStream_t stream) {
  const cudaError_t prepared = prepare_mixed_wgmma_smem<Cfg>();
  if (prepared != cudaSuccess) return prepared;
  MixedWgmmaMaps maps{};
  const cudaError_t encoded = encode_wgmma_maps<Cfg>(p, &maps);
  if (encoded != cudaSuccess) return encoded;
  return launch_split_k<typename Cfg::Element>(mixed_wgmma_smem_kernel<Cfg>, p, Cfg::kBM,
                                               Cfg::kBN, Cfg::kThreads, Cfg::kSmemBytes, splits,
                                               true, stream, maps);
}

// The CTAs per SM of launch_mixed_wgmma_smem<Cfg>'s kernel on the current device.
template <class Cfg>
cudaError_t mixed_wgmma_smem_occupancy(MixedPlan const& plan, int* ctas_per_sm) {
  if (plan.threads != Cfg::kThreads || plan.smem_bytes != Cfg::kSmemBytes)
    return cudaErrorInvalidValue;
  const cudaError_t prepared = prepare_mixed_wgmma_smem<Cfg>();
  if (prepared != cudaSuccess) return prepared;
  return cudaOccupancyMaxActiveBlocksPerMultiprocessor(
      ctas_per_sm, mixed_wgmma_smem_kernel<Cfg>, Cfg::kThreads, Cfg::kSmemBytes);
}

}  // namespace mixed
}  // namespace cute_gemm
