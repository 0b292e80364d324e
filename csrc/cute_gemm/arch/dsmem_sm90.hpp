#pragma once
// Pushing values into another CTA's shared memory (distributed shared memory, sm_90+).
// st.async (a register value) and the bulk copy (a chunk of this CTA's shared memory) store at a
// shared::cluster address and count their bytes on an mbarrier of the destination CTA
// (complete_tx): the receiver's threads wait for the barrier's
// phase (arrive_expect_tx with the bytes they expect, then a parity wait), which also makes the
// values visible to them. Unlike a cluster barrier with release semantics (which ptxas emits as a
// GPU-scope memory barrier, MEMBAR.ALL.GPU), nothing here waits for the sender's own memory
// operations. A receiver's mbarrier must be initialized, and the init made visible to the cluster
// (fence_mbarrier_init_cluster, then a cluster barrier), before any CTA pushes to it.

#include <cstdint>

#include "cute_gemm/arch/config_arch.hpp"

namespace cute_gemm {

// The shared::cluster address of `smem_addr` (a shared::cta address of this CTA) in the CTA of
// cluster rank `rank`.
CG_DEVICE uint32_t map_shared_rank(uint32_t smem_addr, uint32_t rank) {
#if defined(CG_ARCH_SM90_ENABLED)
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(smem_addr), "r"(rank));
  return remote;
#else
  detail::arch_unsupported(smem_addr, rank);
  return 0;
#endif
}

// Makes this thread's earlier mbarrier inits visible to the cluster (a later cluster barrier,
// relaxed or not, then orders them before other CTAs' use).
CG_DEVICE void fence_mbarrier_init_cluster() {
#if defined(CG_ARCH_SM90_ENABLED)
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#else
  detail::arch_unsupported();
#endif
}

// 4 bytes at `remote` (shared::cluster), counted on `remote_bar` (the destination CTA's mbarrier,
// shared::cluster). `remote` 4-byte aligned.
CG_DEVICE void st_async_b32(uint32_t remote, uint32_t value, uint32_t remote_bar) {
#if defined(CG_ARCH_SM90_ENABLED)
  asm volatile(
      "st.async.shared::cluster.mbarrier::complete_tx::bytes.b32 [%0], %1, [%2];\n" ::"r"(remote),
      "r"(value), "r"(remote_bar)
      : "memory");
#else
  detail::arch_unsupported(remote, value, remote_bar);
#endif
}

// 8 bytes (v0, v1) at `remote`, 8-byte aligned; as st_async_b32.
CG_DEVICE void st_async_v2_b32(uint32_t remote, uint32_t v0, uint32_t v1, uint32_t remote_bar) {
#if defined(CG_ARCH_SM90_ENABLED)
  asm volatile(
      "st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.b32 [%0], {%1, %2}, [%3];\n" ::"r"(
          remote),
      "r"(v0), "r"(v1), "r"(remote_bar)
      : "memory");
#else
  detail::arch_unsupported(remote, v0, v1, remote_bar);
#endif
}

// Copies `bytes` (a multiple of 16) from this CTA's shared memory at `local` (shared::cta) to
// `remote` (shared::cluster, another CTA's or this one's), both 16-byte aligned, by the bulk copy
// engine, counted on `remote_bar` (the destination CTA's mbarrier, shared::cluster). One
// instruction for the whole chunk: st.async's per-value stores each cost the SM a transaction
// (on an H200 ~3 cycles per 4-byte store, NOTES.md session 68). The source must stay unchanged
// and its CTA alive until the copy has landed (the destination's barrier says so).
CG_DEVICE void bulk_copy_to_cluster(uint32_t remote, uint32_t local, uint32_t bytes,
                                    uint32_t remote_bar) {
#if defined(CG_ARCH_SM90_ENABLED)
  asm volatile(
      "cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes [%0], [%1], %2, "
      "[%3];\n" ::"r"(remote),
      "r"(local), "r"(bytes), "r"(remote_bar)
      : "memory");
#else
  detail::arch_unsupported(remote, local, bytes, remote_bar);
#endif
}

}  // namespace cute_gemm
