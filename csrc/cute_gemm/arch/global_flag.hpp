#pragma once
// A 64-bit flag in global memory that one CTA raises and another waits for (sm_70+ memory model):
// the raiser's stores before flag_store_release are visible to a waiter once flag_load_acquire
// returns the raised value. Both at GPU scope, for CTAs on different SMs.

#include <cstdint>

#include "cute_gemm/arch/config_arch.hpp"

namespace cute_gemm {

CG_DEVICE void flag_store_release(uint64_t* flag, uint64_t value) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
  asm volatile("st.release.gpu.global.u64 [%0], %1;\n" ::"l"(flag), "l"(value) : "memory");
#else
  detail::arch_unsupported(flag, value);
#endif
}

CG_DEVICE uint64_t flag_load_acquire(uint64_t const* flag) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
  uint64_t value;
  asm volatile("ld.acquire.gpu.global.u64 %0, [%1];\n" : "=l"(value) : "l"(flag) : "memory");
  return value;
#else
  detail::arch_unsupported(flag);
  return 0;
#endif
}

// Nanoseconds of the GPU's global timer (the bound on a wait that must not hang silently).
CG_DEVICE uint64_t global_timer_ns() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;\n" : "=l"(t));
  return t;
#else
  return 0;
#endif
}

// Spins (with a short sleep) until *flag == value. A wait past `limit_ns` traps: the launch fails
// with an error instead of hanging (a peer that never raises the flag is a bug).
CG_DEVICE void flag_wait_equal(uint64_t const* flag, uint64_t value, uint64_t limit_ns) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
  if (flag_load_acquire(flag) == value) return;
  const uint64_t start = global_timer_ns();
  while (flag_load_acquire(flag) != value) {
    __nanosleep(64);
    if (global_timer_ns() - start > limit_ns) __trap();
  }
#else
  detail::arch_unsupported(flag, value, limit_ns);
#endif
}

}  // namespace cute_gemm
