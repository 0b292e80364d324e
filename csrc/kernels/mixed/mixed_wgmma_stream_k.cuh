#pragma once
// Stream-K's partial sums for the cp.async wgmma kernel (mixed_wgmma_kernel.cuh, StreamK form):
// stream_k.hpp says which CTA runs which segment and owns which tile. A CTA that contributes to a
// tile stores its accumulators to its slot of the workspace and each warp raises its flag (the
// launch's id); each warp of the tile's owner waits for its counterparts' flags in the tile's
// other CTAs (all of lower index), adds their sums in CTA order, i.e. k order, and then its own,
// and writes 0 back to the flags, so that the sums are deterministic and a replayed CUDA graph
// starts from lowered flags. No CTA barrier: the warps hand over and take their sums apart. The workspace
// comes uninitialized: a flag that held the id before its contributor raised it would need the
// 64-bit id there by chance.

#include "cute_gemm/arch/global_flag.hpp"
#include "kernels/mixed/mixed_gemm_launch.hpp"
#include "kernels/mixed/stream_k.hpp"

namespace cute_gemm {
namespace mixed {

template <class Cfg>
struct WgmmaStreamK {
  static constexpr int NT = Cfg::kNTiles, NACC = Cfg::kAccRegs;
  static constexpr int kThreads = Cfg::kConsumerThreads, kWarps = kThreads / 32;
  static constexpr int kPartialFloats = Cfg::kStreamKPartialFloats;
  static_assert(kPartialFloats == kThreads * NT * NACC, "a slot holds every thread's sums");
  // A contributor that has not raised its flag after this long is a bug: the launch traps.
  static constexpr uint64_t kWaitLimitNs = 2000000000ull;

  // CTA cta's slot: value v of thread t at v * kThreads + t (a warp's stores coalesce), so warp w
  // of the owner reads exactly what warp w of the contributor wrote.
  CG_DEVICE static float* slot(MixedGemmParams const& p, int cta) {
    return static_cast<float*>(p.workspace) + int64_t(cta) * kPartialFloats;
  }
  CG_DEVICE static uint64_t* flag(MixedGemmParams const& p, int ctas, int cta, int warp) {
    return reinterpret_cast<uint64_t*>(static_cast<char*>(p.workspace) +
                                       stream_k_partials_bytes(ctas, kPartialFloats)) +
           cta * kWarps + warp;
  }

  // By every thread of CTA `cta` (of `ctas`): its sums to the slot, then its warp's flag. No CTA
  // barrier: each warp hands its own sums over.
  CG_DEVICE static void contribute(MixedGemmParams const& p, float const (&acc)[NT][NACC],
                                   int cta, int ctas, int tid) {
    float* const dst = slot(p, cta);
    CG_PRAGMA_UNROLL
    for (int r = 0; r < NT; ++r) {
      CG_PRAGMA_UNROLL
      for (int v = 0; v < NACC; ++v) __stcg(dst + (r * NACC + v) * kThreads + tid, acc[r][v]);
    }
    __syncwarp();  // the warp's sums are stored ...
    if (tid % 32 == 0) {
      __threadfence();  // ... and visible to the GPU before the flag
      flag_store_release(flag(p, ctas, cta, tid / 32), p.stream_k_id);
    }
  }

  // Lane 0 of each warp of the owner `cta` waits for its counterparts' flags in CTAs first ..
  // cta - 1 and lowers them; then their sums are visible to the warp.
  CG_DEVICE static void acquire_contributions(MixedGemmParams const& p, int first, int cta,
                                              int ctas, int tid) {
    if (tid % 32 == 0) {
      for (int c = first; c < cta; ++c) {
        uint64_t* const f = flag(p, ctas, c, tid / 32);
        flag_wait_equal(f, p.stream_k_id, kWaitLimitNs);
        *f = 0;  // lowered for the next launch (the sums stay until this grid ends)
      }
    }
    __syncwarp();  // lane 0 acquired the flags: the sums are visible to the warp
  }

  // By every thread of the owner `cta`: acc = the sums of CTAs first .. cta - 1, then acc. Each
  // warp waits only for its own counterparts' flags.
  CG_DEVICE static void add_contributions(MixedGemmParams const& p, float (&acc)[NT][NACC],
                                          int first, int cta, int ctas, int tid) {
    if (first == cta) return;  // the whole tile was this CTA's
    acquire_contributions(p, first, cta, ctas, tid);
    float sum[NT][NACC];
    CG_PRAGMA_UNROLL
    for (int r = 0; r < NT; ++r) {
      CG_PRAGMA_UNROLL
      for (int v = 0; v < NACC; ++v) sum[r][v] = 0.f;
    }
    for (int c = first; c < cta; ++c) {
      float const* const src = slot(p, c);
      CG_PRAGMA_UNROLL
      for (int r = 0; r < NT; ++r) {
        CG_PRAGMA_UNROLL
        for (int v = 0; v < NACC; ++v) sum[r][v] += __ldcg(src + (r * NACC + v) * kThreads + tid);
      }
    }
    CG_PRAGMA_UNROLL
    for (int r = 0; r < NT; ++r) {
      CG_PRAGMA_UNROLL
      for (int v = 0; v < NACC; ++v) acc[r][v] = sum[r][v] + acc[r][v];
    }
  }

  // As add_contributions without a second set of sums (the warp-specialized 256-row tile holds
  // 128 accumulators and has no registers for another 128): acc += the sums of CTAs first ..
  // cta - 1, one CTA after another; the order is fixed, so the result is deterministic.
  CG_DEVICE static void add_contributions_in_place(MixedGemmParams const& p,
                                                   float (&acc)[NT][NACC], int first, int cta,
                                                   int ctas, int tid) {
    if (first == cta) return;  // the whole tile was this CTA's
    acquire_contributions(p, first, cta, ctas, tid);
    for (int c = first; c < cta; ++c) {
      float const* const src = slot(p, c);
      CG_PRAGMA_UNROLL
      for (int r = 0; r < NT; ++r) {
        CG_PRAGMA_UNROLL
        for (int v = 0; v < NACC; ++v) acc[r][v] += __ldcg(src + (r * NACC + v) * kThreads + tid);
      }
    }
  }
};

}  // namespace mixed
}  // namespace cute_gemm
