#pragma once
// cp.async (sm_80+): global -> shared copies that bypass registers and complete asynchronously.
// Groups: every copy issued before cp_async_fence() belongs to one group; cp_async_wait<N>()
// blocks until at most N groups are still in flight. A multi-stage pipeline keeps N = stages - 2
// groups in flight while it computes on the oldest stage.
//
// Zero-fill: with src_size 0 the 16 destination bytes are written as zeros and the source is not
// read, so tiles hanging over a matrix edge need no separate clearing pass (the pointer must still
// be a valid-looking address; callers clamp it to the tile origin).
//
// Cache policy: weights and one-pass operands are read exactly once; an L2 evict-first policy
// keeps them from evicting data that is reused (activations, the other operand's tiles).

#include "cute_gemm/arch/config_arch.hpp"
#include "cute_gemm/numeric.hpp"

namespace cute_gemm {

// .cg: cache in L2 only (the data goes to shared memory, L1 would only be polluted).
// Each copy also takes its destination as a 32-bit shared-memory address (detail::smem_addr): a
// loop that computes that address once and advances it issues no generic-to-shared conversion
// per copy.
struct SM80_CP_ASYNC_CACHEGLOBAL_ZFILL {
  using SRegisters = uint128_t[1];
  using DRegisters = uint128_t[1];
  CG_DEVICE static void copy(uint128_t const& gmem_src, uint32_t smem_dst, bool pred) {
#if defined(CG_ARCH_CP_ASYNC_ENABLED)
    const int src_size = pred ? 16 : 0;
    asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16, %2;\n" ::"r"(smem_dst),
                 "l"(&gmem_src), "r"(src_size));
#else
    detail::arch_unsupported(gmem_src, smem_dst, pred);
#endif
  }
  CG_DEVICE static void copy(uint128_t const& gmem_src, uint128_t& smem_dst, bool pred) {
    copy(gmem_src, detail::smem_addr(&smem_dst), pred);
  }
  // The copy only where `issue` (a guarded cp.async; where not, nothing is written).
  CG_DEVICE static void copy_if(bool issue, uint128_t const& gmem_src, uint32_t smem_dst,
                                bool pred) {
#if defined(CG_ARCH_CP_ASYNC_ENABLED)
    const int src_size = pred ? 16 : 0;
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %3, 0;\n"
        "@p cp.async.cg.shared.global.L2::128B [%0], [%1], 16, %2;\n}\n" ::"r"(smem_dst),
        "l"(&gmem_src), "r"(src_size), "r"(int(issue)));
#else
    detail::arch_unsupported(issue, gmem_src, smem_dst, pred);
#endif
  }
};

// The same copy with an L2 cache-eviction policy (see make_l2_evict_first_policy).
struct SM80_CP_ASYNC_CACHEGLOBAL_ZFILL_POLICY {
  using SRegisters = uint128_t[1];
  using DRegisters = uint128_t[1];
  CG_DEVICE static void copy(uint128_t const& gmem_src, uint32_t smem_dst, bool pred,
                             uint64_t policy) {
#if defined(CG_ARCH_CP_ASYNC_ENABLED)
    const int src_size = pred ? 16 : 0;
    asm volatile(
        "cp.async.cg.shared.global.L2::cache_hint.L2::256B [%0], [%1], 16, %2, %3;\n" ::"r"(
            smem_dst),
        "l"(&gmem_src), "r"(src_size), "l"(policy));
#else
    detail::arch_unsupported(gmem_src, smem_dst, pred, policy);
#endif
  }
  CG_DEVICE static void copy(uint128_t const& gmem_src, uint128_t& smem_dst, bool pred,
                             uint64_t policy) {
    copy(gmem_src, detail::smem_addr(&smem_dst), pred, policy);
  }
};

// An opaque L2 policy: lines touched with it are the first to be evicted.
CG_DEVICE uint64_t make_l2_evict_first_policy() {
  uint64_t policy = 0;
#if defined(CG_ARCH_CP_ASYNC_ENABLED)
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(policy));
#endif
  return policy;
}

// An opaque L2 policy for data read again by other CTAs (activations at small M).
CG_DEVICE uint64_t make_l2_evict_last_policy() {
  uint64_t policy = 0;
#if defined(CG_ARCH_CP_ASYNC_ENABLED)
  asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;\n" : "=l"(policy));
#endif
  return policy;
}

CG_DEVICE void cp_async_fence() {
#if defined(CG_ARCH_CP_ASYNC_ENABLED)
  asm volatile("cp.async.commit_group;\n" ::);
#endif
}

template <int N>
CG_DEVICE void cp_async_wait() {
#if defined(CG_ARCH_CP_ASYNC_ENABLED)
  if constexpr (N == 0) {
    asm volatile("cp.async.wait_all;\n" ::);
  } else {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
  }
#endif
}

}  // namespace cute_gemm
