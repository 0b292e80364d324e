#pragma once
// mbarrier (sm_80+): a 64-bit barrier object in shared memory that counts arrivals. Once the
// expected number of threads have arrived its phase completes (the parity flips) and the count
// resets, so one object serves a loop: in iteration i every participant arrives, then waits for
// phase i to complete (parity i % 2). Unlike bar.sync it holds no hardware barrier, so a kernel
// may keep one per group of warps without limiting how many CTAs an SM holds (a bar.sync with a
// run-time id reserves all 16 of the CTA's hardware barriers).
// Ordering: an arrive releases the thread's earlier shared memory writes (including cp.async
// copies it has waited for) and a completed wait acquires those of every participant.

#include <cstdint>

#include "cute_gemm/arch/config_arch.hpp"

namespace cute_gemm {

// @pre `bar` is in shared memory, 8-byte aligned; no thread uses it before a CTA barrier that
// follows the init.
CG_DEVICE void mbarrier_init(uint64_t* bar, int count) {
#if defined(CG_ARCH_CP_ASYNC_ENABLED)
  const uint32_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(bar));
  asm volatile("mbarrier.init.shared.b64 [%0], %1;\n" ::"r"(addr), "r"(count) : "memory");
#endif
}

CG_DEVICE void mbarrier_arrive(uint64_t* bar) {
#if defined(CG_ARCH_CP_ASYNC_ENABLED)
  const uint32_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(bar));
  asm volatile(
      "{\n .reg .b64 state;\n mbarrier.arrive.shared.b64 state, [%0];\n}\n" ::"r"(addr)
      : "memory");
#endif
}

// Returns once the phase of parity `parity` has completed.
CG_DEVICE void mbarrier_wait_parity(uint64_t* bar, uint32_t parity) {
#if defined(CG_ARCH_CP_ASYNC_ENABLED)
  const uint32_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(bar));
  asm volatile(
      "{\n .reg .pred done;\n"
      "wait:\n"
      " mbarrier.test_wait.parity.shared.b64 done, [%0], %1;\n"
      " @!done bra wait;\n}\n" ::"r"(addr),
      "r"(parity)
      : "memory");
#endif
}

}  // namespace cute_gemm
