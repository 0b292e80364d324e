#pragma once
// Pushing values into another CTA's shared memory (distributed shared memory, sm_90+).
// st.async stores a register value at a shared::cluster address and counts its bytes on an
// mbarrier of the destination CTA (complete_tx): the receiver's threads wait for the barrier's
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

}  // namespace cute_gemm
