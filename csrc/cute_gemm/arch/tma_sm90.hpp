#pragma once
// The Tensor Memory Accelerator (sm_90+): one thread's one instruction copies a whole box of a
// 2-D tensor from global to shared memory, as a tensor map (built on the host, passed to the
// kernel as a __grid_constant__ parameter) describes it: sizes, strides, box and swizzle. Boxes
// that hang over the tensor's edges are filled with zeros. The copy reports its bytes to an
// mbarrier (complete_tx): a consumer waits for the phase in which the barrier's expected
// transaction count (arrive_expect_tx) has arrived, which also makes the data visible to it.
//
// A pipeline stage filled this way needs no copy instructions in the consumer warps and no CTA
// barrier: a "full" mbarrier per stage (one arrive_expect_tx by the issuing thread plus the TMA
// bytes) and an "empty" one (an arrive per consumer warp once its reads of the stage are done)
// that the issuing thread waits on before it refills the stage.

#include <cstdint>

#include <cuda.h>  // CUtensorMap (a 128-byte opaque struct; no driver library needed to include)

#include "cute_gemm/arch/config_arch.hpp"

namespace cute_gemm {

// Arrives on `bar` (one of its expected arrivals) and raises the phase's expected transaction
// count by `bytes`: the phase completes once every arrival and that many bytes have landed.
CG_DEVICE void mbarrier_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
#if defined(CG_ARCH_SM90_ENABLED)
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(
                   detail::smem_addr(bar)),
               "r"(bytes)
               : "memory");
#else
  detail::arch_unsupported(bar, bytes);
#endif
}

// Returns once the phase of parity `parity` of `bar` has completed. try_wait lets the hardware
// suspend the thread for a while instead of spinning on the shared-memory word.
CG_DEVICE void mbarrier_wait_parity_suspend(uint64_t* bar, uint32_t parity) {
#if defined(CG_ARCH_SM90_ENABLED)
  asm volatile(
      "{\n .reg .pred done;\n"
      "retry:\n"
      " mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      " @!done bra retry;\n}\n" ::"r"(detail::smem_addr(bar)),
      "r"(parity)
      : "memory");
#else
  detail::arch_unsupported(bar, parity);
#endif
}

// A stage check issued early and used late, for a loop over TMA-filled stages: test_wait (which
// never suspends the thread) on the next stage while this one's data is worked on, and at the
// next stage a try_wait only where that check found the stage still in flight. The check's result
// must stay a predicate register until then: an inline asm output is a general register, and
// converting the predicate right after the check would wait for the check there. So the result
// lives in one predicate register declared at the kernel's scope: mbarrier_early_check_declare
// once per kernel (where the loop's kernel starts, outside any loop), which also clears it.
CG_DEVICE void mbarrier_early_check_declare() {
#if defined(CG_ARCH_SM90_ENABLED)
  asm volatile(
      ".reg .pred cg_stage_landed;\n"
      "setp.ne.u32 cg_stage_landed, 0, 0;\n" ::
          : "memory");
#endif
}

// The early check: whether the phase of parity `parity` of `bar` has completed, if `valid` (false
// records "not landed"). True acquires what the phase released, as a completed wait does.
CG_DEVICE void mbarrier_early_check(uint64_t* bar, uint32_t parity, bool valid) {
#if defined(CG_ARCH_SM90_ENABLED)
  asm volatile(
      "{\n .reg .pred v;\n"
      " setp.ne.u32 v, %2, 0;\n"
      " setp.ne.u32 cg_stage_landed, 0, 0;\n"
      " @v mbarrier.test_wait.parity.shared::cta.b64 cg_stage_landed, [%0], %1;\n}\n" ::"r"(
          detail::smem_addr(bar)),
      "r"(parity), "r"(uint32_t(valid))
      : "memory");
#else
  detail::arch_unsupported(bar, parity, valid);
#endif
}

// Returns once the phase of parity `parity` of `bar` has completed: at once where the last early
// check found it so, else as mbarrier_wait_parity_suspend; then clears the check.
CG_DEVICE void mbarrier_wait_parity_after_check(uint64_t* bar, uint32_t parity) {
#if defined(CG_ARCH_SM90_ENABLED)
  asm volatile(
      "{\n .reg .pred done;\n"
      " @cg_stage_landed bra landed;\n"
      "retry:\n"
      " mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      " @!done bra retry;\n"
      "landed:\n"
      " setp.ne.u32 cg_stage_landed, 0, 0;\n}\n" ::"r"(detail::smem_addr(bar)),
      "r"(parity)
      : "memory");
#else
  detail::arch_unsupported(bar, parity);
#endif
}

// Box (x, y) of the 2-D tensor `map` (x the contiguous dimension, in elements) into shared memory
// at `dst`, its bytes reported to `bar`. @pre dst is aligned as the map's swizzle requires (1024
// bytes for the 128-byte swizzle); map is a kernel parameter (__grid_constant__) or in global
// memory.
CG_DEVICE void tma_load_2d(void* dst, CUtensorMap const* map, uint64_t* bar, int x, int y) {
#if defined(CG_ARCH_SM90_ENABLED)
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4}], [%2];\n" ::"r"(detail::smem_addr(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(detail::smem_addr(bar)), "r"(x), "r"(y)
      : "memory");
#else
  detail::arch_unsupported(dst, map, bar, x, y);
#endif
}

// As tma_load_2d, with an L2 cache policy (e.g. make_l2_evict_first_policy for data read once).
CG_DEVICE void tma_load_2d(void* dst, CUtensorMap const* map, uint64_t* bar, int x, int y,
                           uint64_t policy) {
#if defined(CG_ARCH_SM90_ENABLED)
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      ".L2::cache_hint [%0], [%1, {%3, %4}], [%2], %5;\n" ::"r"(detail::smem_addr(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(detail::smem_addr(bar)), "r"(x), "r"(y),
      "l"(policy)
      : "memory");
#else
  detail::arch_unsupported(dst, map, bar, x, y, policy);
#endif
}

// Box (x, y, z) of the 3-D tensor `map` (x contiguous) into shared memory at `dst`, as
// tma_load_2d (the box lands x fastest, then y, then z), with an L2 cache policy or without
// (the overload without one leaves the hint out).
CG_DEVICE void tma_load_3d(void* dst, CUtensorMap const* map, uint64_t* bar, int x, int y, int z) {
#if defined(CG_ARCH_SM90_ENABLED)
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4, %5}], [%2];\n" ::"r"(detail::smem_addr(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(detail::smem_addr(bar)), "r"(x), "r"(y), "r"(z)
      : "memory");
#else
  detail::arch_unsupported(dst, map, bar, x, y, z);
#endif
}

CG_DEVICE void tma_load_3d(void* dst, CUtensorMap const* map, uint64_t* bar, int x, int y, int z,
                           uint64_t policy) {
#if defined(CG_ARCH_SM90_ENABLED)
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      ".L2::cache_hint [%0], [%1, {%3, %4, %5}], [%2], %6;\n" ::"r"(detail::smem_addr(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(detail::smem_addr(bar)), "r"(x), "r"(y), "r"(z),
      "l"(policy)
      : "memory");
#else
  detail::arch_unsupported(dst, map, bar, x, y, z, policy);
#endif
}

// Box (x, y) of the 2-D tensor `map` from shared memory at `src` (laid out as the map's box and
// swizzle say) to global memory; the parts of the box past the tensor's edges are not written.
// Asynchronous: tma_store_commit() closes the thread's stores so far into a group, and
// tma_store_wait_read<N>() returns once at most N groups still read shared memory (the source may
// then be reused, and the CTA may exit). @pre the source was written by the generic proxy and
// fenced (fence_proxy_async_shared) before a barrier the issuing thread passed.
CG_DEVICE void tma_store_2d(CUtensorMap const* map, void const* src, int x, int y) {
#if defined(CG_ARCH_SM90_ENABLED)
  asm volatile(
      "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];\n" ::"l"(
          reinterpret_cast<uint64_t>(map)),
      "r"(detail::smem_addr(src)), "r"(x), "r"(y)
      : "memory");
#else
  detail::arch_unsupported(map, src, x, y);
#endif
}

CG_DEVICE void tma_store_commit() {
#if defined(CG_ARCH_SM90_ENABLED)
  asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
#endif
}

template <int N>
CG_DEVICE void tma_store_wait_read() {
#if defined(CG_ARCH_SM90_ENABLED)
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
#endif
}

// Fetches the tensor map into the TMA unit's descriptor cache ahead of the first copy.
CG_DEVICE void tma_prefetch_map(CUtensorMap const* map) {
#if defined(CG_ARCH_SM90_ENABLED)
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
#else
  detail::arch_unsupported(map);
#endif
}

}  // namespace cute_gemm
