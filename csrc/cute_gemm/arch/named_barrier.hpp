#pragma once
// Named barriers (bar.sync id, threads): a CTA has 16 hardware barriers; barrier 0 is
// __syncthreads. A barrier with an id and a thread count synchronizes only that many threads
// (whole warps), so a group of warps (the consumer warpgroups of a warp-specialized kernel, while
// the producer warps run on or have exited) can meet without the rest of the CTA. The id is a
// compile-time constant: with an id known only at run time ptxas reserves all 16 barriers for the
// kernel, which can limit the CTAs an SM holds.

#include "cute_gemm/arch/config_arch.hpp"

namespace cute_gemm {

// Waits until `Threads` threads (whole warps) have arrived at barrier `Id` (1..15); like
// __syncthreads it also orders their shared-memory accesses.
template <int Id, int Threads>
CG_DEVICE void named_barrier_sync() {
  static_assert(Id >= 1 && Id < 16, "barrier 0 is __syncthreads; 16 barriers per CTA");
  static_assert(Threads % 32 == 0 && Threads > 0, "whole warps");
#if defined(__CUDA_ARCH__)
  asm volatile("bar.sync %0, %1;\n" ::"n"(Id), "n"(Threads) : "memory");
#endif
}

}  // namespace cute_gemm
