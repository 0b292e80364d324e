#pragma once
// Which instruction families this compilation pass may emit. Host passes and older device passes
// see the wrappers as declarations whose bodies trap, so headers stay includable everywhere.

#include "cute_gemm/config.hpp"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 750
#define CG_ARCH_LDSM_ENABLED 1  // ldmatrix (sm_75+)
#endif

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define CG_ARCH_MMA_SM80_ENABLED 1  // mma.sync m16n8k16 with bf16 (sm_80+)
#define CG_ARCH_CP_ASYNC_ENABLED 1  // cp.async (sm_80+)
#endif

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
// thread block clusters, distributed shared memory, griddepcontrol (sm_90+)
#define CG_ARCH_SM90_ENABLED 1
#endif

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
// wgmma.mma_async and the other architecture-specific features of sm_90a (not plain sm_90)
#define CG_ARCH_WGMMA_ENABLED 1
#endif

namespace cute_gemm {
namespace detail {
// Reached only when a wrapper is called on an architecture that lacks the instruction; takes the
// wrapper's operands so the fallback pass sees them used.
template <class... Ts>
CG_DEVICE void arch_unsupported(Ts const&...) {
#if defined(__CUDA_ARCH__)
  __trap();
#endif
}

// Shared-memory address of a generic pointer, as the 32-bit operand PTX wants.
CG_DEVICE uint32_t smem_addr(void const* p) {
#if defined(__CUDA_ARCH__)
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
#else
  return static_cast<uint32_t>(reinterpret_cast<uintptr_t>(p));
#endif
}
}  // namespace detail

// x itself, opaque to the compiler: a loop-invariant address passed through it before a loop is
// kept in a register there, not recomputed from its parts in every iteration (NVVM
// rematerializes cheap expressions to shorten live ranges, which costs instructions per k block).
CG_DEVICE uint32_t pinned(uint32_t x) {
#if defined(__CUDA_ARCH__)
  asm("" : "+r"(x));
#endif
  return x;
}
}  // namespace cute_gemm
