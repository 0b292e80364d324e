#pragma once
// Bulk prefetch from global memory into L2 (sm_90+). cp.async.bulk.prefetch.L2 asks the memory
// system to bring `bytes` bytes at `src` into L2 and returns at once: nothing waits for it and
// nothing says when, or whether, the lines arrived. A hint, so a later load of those bytes may
// hit L2 or go to DRAM; no result may depend on it. src 16-byte aligned, bytes a non-zero
// multiple of 16. A no-op on older architectures (the hint is dropped, not emulated).

#include <cstdint>

#include "cute_gemm/arch/config_arch.hpp"

namespace cute_gemm {

CG_DEVICE void l2_prefetch_bulk(void const* src, uint32_t bytes) {
#if defined(CG_ARCH_SM90_ENABLED)
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(src), "r"(bytes) : "memory");
#endif
}

}  // namespace cute_gemm
