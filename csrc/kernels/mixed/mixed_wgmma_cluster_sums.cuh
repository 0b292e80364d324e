#pragma once
// Split-K sums that meet in a thread block cluster, for the cp.async wgmma kernel
// (mixed_wgmma_kernel.cuh). Launched in clusters of its splits (MixedPlan::reduce_in_cluster:
// cluster dims (1, 1, splits), so a tile's splits are one cluster and cluster rank = split), the
// CTAs of an output tile add their partial sums through distributed shared memory instead of an
// fp32 workspace and split_k_reduce_kernel: no second kernel, no workspace, no round trip
// through L2 for the next kernel to wait out.
//
// Each CTA writes its accumulators to shared memory as units (MixedWgmmaConfig::cluster_sums:
// one value, or a gated tile's gate and up sums of one output, of every thread) and copies each
// unit to the CTA that owns it in one bulk copy (the copy engine; a store per value costs the SM
// a transaction each), counted on the owner's mbarrier. The units land over the owner's stages,
// so a cluster barrier first waits for every CTA of the cluster to leave its loop; it is relaxed
// (no write needs ordering across CTAs: a release would cost a GPU-scope memory barrier). The
// owner adds the splits' values in split order, starting from 0, as split_k_reduce_kernel does,
// so the two give the same bits, and stores the output (+ bias; gated, SiLU(gate) * up). A
// second relaxed cluster barrier keeps every CTA, and the units it sends, alive until every unit
// has landed. The units' places do not depend on the split count where the accumulators are
// written (a layout of run-time shape there let the compiler compute 32 addresses before the
// loop: 14 more registers in bf16 INT8's 32-row tile).

#include <cooperative_groups.h>

#include "cute_gemm/arch/cluster_barrier_sm90.hpp"
#include "cute_gemm/arch/dsmem_sm90.hpp"
#include "cute_gemm/arch/mbarrier_sm80.hpp"
#include "cute_gemm/arch/mma_sm90.hpp"  // wgmma_fence_operand, fence_proxy_async_shared
#include "kernels/mixed/mixed_epilogue.cuh"
#include "kernels/mixed/mixed_wgmma_config.hpp"

namespace cute_gemm {
namespace mixed {

template <class Cfg, bool Gated>
struct WgmmaClusterSums {
  using T = typename Cfg::Element;
  static constexpr int kValues = Cfg::cluster_unit_values(Gated);
  static constexpr int kUnits = Cfg::cluster_units(Gated);
  static constexpr int tile(int u) { return Cfg::cluster_tile(u, Gated); }
  static constexpr int value(int u, int k) { return Cfg::cluster_value(u, k, Gated); }

  // Before the loop, by one thread: the barrier this CTA's units count on, made visible to the
  // cluster (the cluster barrier in add_and_store orders it before any push).
  CG_DEVICE static void init(uint64_t* bar) {
#if defined(CG_ARCH_SM90_ENABLED)
    mbarrier_init(bar, 1);
    fence_mbarrier_init_cluster();
#else
    (void)bar;
#endif
  }

  // After the loop (every wgmma waited for, every copy landed), by every consumer thread `tid`
  // with its accumulators `acc` of the CTA tile at (m0, n0): sends them to their owners, then adds
  // and stores the units this CTA owns. `stages`: the aligned base of shared memory (units land
  // from there, and leave from after them); `bar`: init's barrier. Every CTA of the cluster runs
  // it.
  template <class Slice>
  CG_DEVICE static void add_and_store(Slice const& slice, MixedGemmParams const& p,
                                      float (&acc)[Cfg::kNTiles][Cfg::kAccRegs],
                                      char* stages, uint64_t* bar, int m0, int n0, int tid) {
#if defined(CG_ARCH_SM90_ENABLED)
    namespace cg = cooperative_groups;
    constexpr int kThreads = Cfg::kConsumerThreads;
    constexpr uint32_t kUnitBytes = kThreads * kValues * 4;  // a unit of every thread
    CG_PRAGMA_UNROLL
    for (int r = 0; r < Cfg::kNTiles; ++r) {
      CG_PRAGMA_UNROLL
      for (int v = 0; v < Cfg::kAccRegs; ++v) wgmma_fence_operand(acc[r][v]);  // read below
    }
    const int splits = int(gridDim.z), rank = int(blockIdx.z);
    if (int(cg::this_cluster().num_blocks()) != splits) __trap();  // the launch's contract
    const auto landing = Cfg::template cluster_sums<Gated>(splits);
    constexpr auto leaving = typename Cfg::template ClusterUnitsOut<Gated>{};
    float* const in = reinterpret_cast<float*>(stages);
    float* const out = in + int(cosize(landing));
    __syncthreads();  // every warp is done with the stages
    CG_PRAGMA_UNROLL
    for (int u = 0; u < kUnits; ++u) {
      CG_PRAGMA_UNROLL
      for (int k = 0; k < kValues; ++k) out[leaving(k, tid, u)] = acc[tile(u)][value(u, k)];
    }
    fence_proxy_async_shared();  // the units are read by the bulk copies (the async proxy)
    __syncthreads();
    cluster_arrive_relaxed();
    cluster_wait();  // every CTA of the cluster is done with its stages, its barrier initialized
    const int owned = rank < kUnits ? (kUnits - rank + splits - 1) / splits : 0;
    if (tid == 0 && owned > 0) {
      mbarrier_arrive_expect_tx(bar, uint32_t(splits * owned) * kUnitBytes);  // from each split
    }
    if (tid < kUnits) {  // thread u sends unit u to its owner's slot for this split
      const uint32_t owner = uint32_t(tid % splits);
      const uint32_t to = detail::smem_addr(in + landing(0, 0, tid / splits, rank));
      bulk_copy_to_cluster(map_shared_rank(to, owner),
                           detail::smem_addr(out + leaving(0, 0, tid)), kUnitBytes,
                           map_shared_rank(detail::smem_addr(bar), owner));
    }
    if (owned > 0) mbarrier_wait_parity_suspend(bar, 0);
    cluster_arrive_relaxed();  // every unit sent to this CTA has landed
    const auto thr = slice.thread_coord();
    for (int slot = 0; slot < owned; ++slot) {
      float sum[kValues];
      CG_PRAGMA_UNROLL
      for (int k = 0; k < kValues; ++k) sum[k] = 0.f;
      for (int s = 0; s < splits; ++s) {
        CG_PRAGMA_UNROLL
        for (int k = 0; k < kValues; ++k) sum[k] += in[landing(k, tid, slot, s)];
      }
      // The unit's output: AccTV's row and (logical) column of value(u, 0).
      const int u = rank + splits * slot;
      const auto vr = make_coord(value(u, 0), tile(u));
      const int row = m0 + typename Cfg::AccRowTV{}(thr, vr);
      const int col = n0 + typename Cfg::AccColTV{}(thr, vr);
      if (row < p.m && col < p.n) {
        if constexpr (Gated) {
          store_out_gated<T>(p, row, gated_output_column(col), sum[0], sum[1]);
        } else {
          store_out_one<T>(p, row, col, sum[0]);
        }
      }
    }
    cluster_wait();  // every unit this CTA sent has landed: its shared memory may go
#else
    (void)slice, (void)p, (void)acc, (void)stages, (void)bar, (void)m0, (void)n0, (void)tid;
#endif
  }
};

}  // namespace mixed
}  // namespace cute_gemm
