#pragma once
// Bulk prefetch into the L2 (sm_90+). cp.async.bulk.prefetch.L2 hands the copy engine (TMA) the
// byte range [p, p + bytes) to bring into the L2 and returns at once: nothing lands in shared
// memory or registers, and nothing waits for it. The issuing CTA does not retire before the bytes
// have arrived, so a kernel issues it early, while its own loads leave DRAM time to spare.
// p must be 16-byte aligned and bytes a multiple of 16. A no-op on older architectures.

#include <cstdint>

#include "cute_gemm/arch/config_arch.hpp"

namespace cute_gemm {

CG_DEVICE void l2_prefetch_bulk(void const* p, uint32_t bytes) {
#if defined(CG_ARCH_SM90_ENABLED)
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(p), "r"(bytes) : "memory");
#else
  (void)p, (void)bytes;
#endif
}

}  // namespace cute_gemm
