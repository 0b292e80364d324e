#pragma once
// L2 prefetch of a contiguous range (sm_90+): cp.async.bulk.prefetch.L2 asks the L2 for `bytes`
// bytes from `src` and returns at once; nothing lands in the SM and no barrier tracks it. A later
// read of the range finds it in L2 instead of DRAM. L2 is the point of coherence for global
// memory, so a prefetch never makes a later read stale: a line another kernel writes after the
// prefetch is that write's line in L2. Useful before griddepcontrol.wait, for inputs that the
// kernel before this one does not write (a decode step's older cache rows), whose DRAM latency
// then overlaps the previous kernel's tail. A hint: below sm_90 it does nothing.

#include <cstdint>

#include "cute_gemm/arch/config_arch.hpp"

namespace cute_gemm {

// src 16-byte aligned, bytes a multiple of 16.
CG_DEVICE void prefetch_l2_bulk(void const* src, uint32_t bytes) {
#if defined(CG_ARCH_SM90_ENABLED)
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(src), "r"(bytes) : "memory");
#else
  (void)src;
  (void)bytes;
#endif
}

}  // namespace cute_gemm
