#pragma once
// Thread block clusters (sm_90+): the CTAs of a cluster run at the same time on one GPC and can
// read each other's shared memory (distributed shared memory, "DSMEM").
//
// A cluster barrier with release/acquire semantics orders shared-memory writes of every CTA before
// the reads of every other CTA after it: the pattern is
//   write own smem;  cluster_sync();  read peers' smem;  cluster_sync();  exit
// (the second barrier keeps each CTA, and so its shared memory, alive until its peers are done).
// A kernel launched without a cluster dimension is a cluster of one: the same code still runs.

#include "cute_gemm/arch/config_arch.hpp"

namespace cute_gemm {

// This CTA's rank in its cluster (0 .. cluster size - 1).
CG_DEVICE uint32_t cluster_cta_rank() {
#if defined(CG_ARCH_SM90_ENABLED)
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
#else
  detail::arch_unsupported();
  return 0;
#endif
}

// barrier.cluster: every thread of every CTA of the cluster arrives (release), then waits
// (acquire).
CG_DEVICE void cluster_sync() {
#if defined(CG_ARCH_SM90_ENABLED)
  asm volatile(
      "barrier.cluster.arrive.release.aligned;\n"
      "barrier.cluster.wait.acquire.aligned;\n" ::
          : "memory");
#else
  detail::arch_unsupported();
#endif
}

// The shared::cluster address of the variable at `smem_addr` (a shared::cta address of this CTA)
// in the CTA of rank `rank`.
CG_DEVICE uint32_t map_shared_rank(uint32_t smem_addr, uint32_t rank) {
#if defined(CG_ARCH_SM90_ENABLED)
  uint32_t r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(r) : "r"(smem_addr), "r"(rank));
  return r;
#else
  detail::arch_unsupported(smem_addr, rank);
  return 0;
#endif
}

// 16-byte load from distributed shared memory (an address from map_shared_rank).
CG_DEVICE float4 ld_shared_cluster_f32x4(uint32_t cluster_addr) {
  float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
#if defined(CG_ARCH_SM90_ENABLED)
  asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];\n"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "r"(cluster_addr)
               : "memory");
#else
  detail::arch_unsupported(cluster_addr);
#endif
  return v;
}

}  // namespace cute_gemm
