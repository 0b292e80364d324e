#pragma once
// Named CTA barriers (bar.sync / bar.red with a thread count): a barrier among some of a CTA's
// warps, e.g. the consumer warpgroups of a warp-specialized kernel while its producer runs on.
// Barrier 0 is __syncthreads()'s; `threads` is a multiple of 32, the same in every warp that
// arrives. PTX ISA: "Parallel Synchronization and Communication Instructions: bar, barrier".

#include "cute_gemm/arch/config_arch.hpp"

namespace cute_gemm {

// Waits until `threads` threads (whole warps) have arrived at barrier `id`.
CG_DEVICE void named_barrier_sync(int id, int threads) {
#if defined(__CUDA_ARCH__)
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
#else
  detail::arch_unsupported(id, threads);
#endif
}

// named_barrier_sync that also returns, in every arriving thread, whether `pred` held in any
// of them.
CG_DEVICE bool named_barrier_or(int id, int threads, bool pred) {
#if defined(__CUDA_ARCH__)
  uint32_t any;
  asm volatile(
      "{\n"
      "  .reg .pred p, q;\n"
      "  setp.ne.u32 p, %1, 0;\n"
      "  bar.red.or.pred q, %2, %3, p;\n"
      "  selp.u32 %0, 1, 0, q;\n"
      "}\n"
      : "=r"(any)
      : "r"(uint32_t(pred)), "r"(id), "r"(threads)
      : "memory");
  return any != 0;
#else
  detail::arch_unsupported(id, threads, pred);
  return false;
#endif
}

}  // namespace cute_gemm
