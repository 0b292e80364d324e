#pragma once
// Split-K sums that meet in a thread block cluster, for the cp.async wgmma kernel
// (mixed_wgmma_kernel.cuh). Launched in clusters of its splits (MixedPlan::reduce_in_cluster:
// cluster dims (1, 1, splits), so a tile's splits are one cluster and cluster rank = split), the
// CTAs of an output tile add their partial sums through distributed shared memory instead of an
// fp32 workspace and split_k_reduce_kernel: no second kernel, no workspace, no round trip
// through L2 for the next kernel to wait out.
//
// Each thread pushes its accumulators, unit by unit (MixedWgmmaConfig::cluster_sums: one value,
// or a gated tile's gate and up sums of one output, of every thread), to the CTA that owns the
// unit with st.async, counted on the owner's mbarrier. The units land over the owner's stages, so
// a cluster barrier first waits for every CTA of the cluster to leave its loop; it is relaxed (no
// write needs ordering across CTAs: a release would cost a GPU-scope memory barrier). The owner
// adds the splits' values in split order, starting from 0, as split_k_reduce_kernel does, so the
// two give the same bits, and stores the output (+ bias; gated, SiLU(gate) * up). The 16-row
// 64-column tile that uses it pushes 8 values a thread. Bulk copies of whole units from shared
// memory (one instruction per unit) measured the same at 16 rows, and compute-sanitizer's memcheck
// reports their shared::cluster destinations as outside the peer CTA although every result is
// right (NOTES.md sessions 68-69): st.async keeps the sanitizers' word.

#include <cooperative_groups.h>

#include "cute_gemm/arch/cluster_barrier_sm90.hpp"
#include "cute_gemm/arch/dsmem_sm90.hpp"
#include "cute_gemm/arch/mbarrier_sm80.hpp"
#include "cute_gemm/arch/mma_sm90.hpp"  // wgmma_fence_operand
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
  // from there); `bar`: init's barrier. Every CTA of the cluster runs it.
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
    float const* const in = reinterpret_cast<float const*>(stages);
    const uint32_t in_addr = detail::smem_addr(stages), bar_addr = detail::smem_addr(bar);
    cluster_arrive_relaxed();
    cluster_wait();  // every CTA of the cluster is done with its stages, its barrier initialized
    CG_PRAGMA_UNROLL
    for (int u = 0; u < kUnits; ++u) {  // unit u to its owner's slot u / splits for this split
      const uint32_t owner = uint32_t(u % splits);
      const uint32_t to = map_shared_rank(in_addr + 4 * uint32_t(landing(0, tid, u / splits, rank)),
                                          owner);
      const uint32_t to_bar = map_shared_rank(bar_addr, owner);
      const float v0 = acc[tile(u)][value(u, 0)];
      if constexpr (Gated) {
        st_async_v2_b32(to, __float_as_uint(v0), __float_as_uint(acc[tile(u)][value(u, 1)]),
                        to_bar);
      } else {
        st_async_b32(to, __float_as_uint(v0), to_bar);
      }
    }
    const int owned = rank < kUnits ? (kUnits - rank + splits - 1) / splits : 0;
    if (owned == 0) return;  // nothing lands here
    if (tid == 0) mbarrier_arrive_expect_tx(bar, uint32_t(splits * owned) * kUnitBytes);
    mbarrier_wait_parity_suspend(bar, 0);
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
    // Every unit pushed here has landed, and the pushes came from registers: the CTAs leave
    // without another cluster barrier (as decode attention's combine).
#else
    (void)slice, (void)p, (void)acc, (void)stages, (void)bar, (void)m0, (void)n0, (void)tid;
#endif
  }
};

}  // namespace mixed
}  // namespace cute_gemm
