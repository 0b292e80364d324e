#pragma once
// Named barriers (bar.sync id, threads): a barrier among `threads` threads of a CTA (a multiple of
// 32, whole warps) on hardware barrier `id` (0..15; __syncthreads() uses 0). Several groups of
// warps can synchronize independently, each on its own id, without waiting for the whole CTA.
// Like __syncthreads() it orders the group's shared memory accesses (and the cp.async copies each
// thread waited for before arriving) across the barrier.

#include "cute_gemm/arch/config_arch.hpp"

namespace cute_gemm {

// @pre 0 <= id < 16, threads % 32 == 0, and exactly `threads` threads (whole warps) arrive at id.
CG_DEVICE void named_barrier_sync(int id, int threads) {
#if defined(__CUDA_ARCH__)
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
#endif
}

}  // namespace cute_gemm
