#pragma once
// Thread block clusters (sm_90+): the CTAs of a cluster run at the same time on one GPC and can
// read each other's shared memory (distributed shared memory). A kernel launched with the
// cudaLaunchAttributeClusterDimension attribute reads its cluster shape here; without it every
// CTA is a cluster of one.
//   cluster_ctarank()        this CTA's rank in its cluster, 0 .. cluster_size() - 1 (x fastest)
//   cluster_size()           the CTAs in the cluster
//   cluster_sync()           every non-exited thread of the cluster arrives (release) and waits
//                            (acquire): shared memory written before it by any CTA of the cluster
//                            is visible after it to all of them
//   cluster_smem_addr(a, r)  the address of CTA r's copy of this CTA's shared address a
//   ld_cluster_f32x4(addr)   16 bytes from such an address
// A CTA must not exit while another CTA may still read its shared memory: end with cluster_sync.

#include <cstdint>

#include <vector_types.h>

#include "cute_gemm/arch/config_arch.hpp"

namespace cute_gemm {

CG_DEVICE uint32_t cluster_ctarank() {
#if defined(CG_ARCH_SM90_ENABLED)
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
#else
  return 0;
#endif
}

CG_DEVICE uint32_t cluster_size() {
#if defined(CG_ARCH_SM90_ENABLED)
  uint32_t n;
  asm volatile("mov.u32 %0, %%cluster_nctarank;\n" : "=r"(n));
  return n;
#else
  return 1;
#endif
}

// Every thread of every warp that reaches it must execute it (the .aligned forms).
CG_DEVICE void cluster_sync() {
#if defined(CG_ARCH_SM90_ENABLED)
  asm volatile(
      "barrier.cluster.arrive.release.aligned;\n"
      "barrier.cluster.wait.acquire.aligned;\n" ::
          : "memory");
#endif
}

CG_DEVICE uint32_t cluster_smem_addr(uint32_t smem_addr, uint32_t rank) {
#if defined(CG_ARCH_SM90_ENABLED)
  uint32_t out;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(out) : "r"(smem_addr), "r"(rank));
  return out;
#else
  detail::arch_unsupported(smem_addr, rank);
  return 0;
#endif
}

CG_DEVICE float4 ld_cluster_f32x4(uint32_t cluster_addr) {
  float4 v{0.f, 0.f, 0.f, 0.f};
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
