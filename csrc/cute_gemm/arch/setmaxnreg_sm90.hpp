#pragma once
// setmaxnreg (sm_90a): a warpgroup changes how many registers each of its threads holds, in
// multiples of 8 from 24 to 256. A CTA is launched with the kernel's register count for every
// thread; a producer warpgroup that only issues copies gives most of its registers back
// (dec) and the consumer warpgroups take them (inc), so the consumers can hold more than
// 65536 / threads. All threads of the warpgroup execute the same instruction (.sync.aligned).
// Example: 384 threads launched at 168 registers (64512 in all); the producer warpgroup decreases
// to 24 (frees 128 x 144), the two consumer warpgroups increase to 240 (take 256 x 72).

#include "cute_gemm/arch/config_arch.hpp"

namespace cute_gemm {

// Raises this warpgroup's registers per thread to N (blocks until the CTA's pool has them).
template <int N>
CG_DEVICE void warpgroup_reg_alloc() {
  static_assert(N % 8 == 0 && N >= 24 && N <= 256, "setmaxnreg takes 24 .. 256 in 8s");
#if defined(CG_ARCH_WGMMA_ENABLED)
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
#endif
}

// Lowers this warpgroup's registers per thread to N, returning the rest to the CTA's pool.
template <int N>
CG_DEVICE void warpgroup_reg_dealloc() {
  static_assert(N % 8 == 0 && N >= 24 && N <= 256, "setmaxnreg takes 24 .. 256 in 8s");
#if defined(CG_ARCH_WGMMA_ENABLED)
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
#endif
}

}  // namespace cute_gemm
