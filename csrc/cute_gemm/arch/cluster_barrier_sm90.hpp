#pragma once
// The thread block cluster's barrier in two halves (sm_90+): every thread of every CTA of the
// cluster arrives, then waits until all have. cooperative_groups' cluster.sync() is an arrive with
// release semantics and a wait with acquire semantics: what a CTA wrote to its shared memory
// before it is visible to the others after it. The relaxed arrive orders nothing: it is for the
// barrier that only keeps a CTA's shared memory alive while the others still read it, once the
// reads' values have been used (so they have completed), and lets the CTA arrive without
// waiting for its own global stores to be performed.

#include "cute_gemm/arch/config_arch.hpp"

namespace cute_gemm {

CG_DEVICE void cluster_arrive_relaxed() {
#if defined(CG_ARCH_SM90_ENABLED)
  asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory");
#else
  detail::arch_unsupported();
#endif
}

CG_DEVICE void cluster_wait() {
#if defined(CG_ARCH_SM90_ENABLED)
  asm volatile("barrier.cluster.wait.aligned;\n" ::: "memory");
#else
  detail::arch_unsupported();
#endif
}

}  // namespace cute_gemm
