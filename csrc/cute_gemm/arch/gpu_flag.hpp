#pragma once
// A counter in global memory through which CTAs of one grid hand each other data (PTX memory
// model, GPU scope): the writing CTA's threads store, meet at a barrier, and one thread adds to
// the counter with release semantics (fence.acq_rel.gpu, then a relaxed red); the reading CTA has
// one thread load the counter with acquire semantics until it reaches the count it waits for, and
// then meets its other threads at a barrier before they read. PTX ISA: "Memory Consistency
// Model", "red", "ld" (.acquire), "fence".

#include "cute_gemm/arch/config_arch.hpp"

namespace cute_gemm {

// *counter += value, ordered after every memory access the calling thread has observed
// (including those a preceding barrier made it observe).
CG_DEVICE void gpu_counter_add_release(int* counter, int value) {
#if defined(CG_ARCH_SM90_ENABLED)
  asm volatile(
      "fence.acq_rel.gpu;\n"
      "red.relaxed.gpu.global.add.s32 [%0], %1;\n" ::"l"(counter),
      "r"(value)
      : "memory");
#else
  detail::arch_unsupported(counter, value);
#endif
}

// *counter, ordered before every later memory access of the calling thread.
CG_DEVICE int gpu_counter_load_acquire(int const* counter) {
#if defined(CG_ARCH_SM90_ENABLED)
  int value;
  asm volatile("ld.acquire.gpu.global.b32 %0, [%1];\n" : "=r"(value) : "l"(counter) : "memory");
  return value;
#else
  detail::arch_unsupported(counter);
  return 0;
#endif
}

}  // namespace cute_gemm
