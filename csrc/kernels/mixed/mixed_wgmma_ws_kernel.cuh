#pragma once
// The warp-specialized wgmma kernel (sm_90a): the product of mixed_wgmma_kernel.cuh (weights
// dequantized into wgmma's register operand, activations through a 128-byte-swizzle descriptor,
// rounded weights) with its copies taken out of the consumer warps.
//
// Why: in the cp.async kernel every thread copies part of each stage, so before a stage is refilled
// every warp must be done with it, and the warps meet at a CTA barrier once per k block, where a
// warpgroup waits for the other's wgmmas. Here one more warpgroup produces: one thread issues each
// stage as TMA copies (cute_gemm/arch/tma_sm90.hpp) from tensor maps built on the host, whose
// boxes are read off the shared-memory layouts of MixedWgmmaConfig:
//   - the activation tile SmemA, (kTileM rows, 64 k) boxes with the 128-byte swizzle, one per
//     128-byte line of K, rows past M and columns past K filled with zeros;
//   - the weights: the packed tensor seen as [N / 8 blocks][k_blocks * 128 words], one box of
//     (kTileN / 8 blocks, 128 words) = the stage's SmemW [block][32 lanes][16 B] exactly;
//   - the scales (and zeros): one (1 group, kTileN columns) box per row of SmemScales.
// Stage s has a "full" mbarrier (the producer's arrive with the stage's byte count, plus the TMA
// bytes) and an "empty" one (one arrive per consumer warp once its wgmmas on the stage are done).
// Only the producer waits on "empty"; a consumer warp waits only for its data and its own wgmmas.
// setmaxnreg moves registers from the producer (24) to the consumers (WgmmaRegisterSplit), which
// hold the accumulators (128 for a 256-row M tile) and two register sets of a k block.

#include "cute_gemm/arch/gpu_flag.hpp"
#include "cute_gemm/arch/mbarrier_sm80.hpp"
#include "cute_gemm/arch/named_barrier.hpp"
#include "cute_gemm/arch/setmaxnreg_sm90.hpp"
#include "cute_gemm/arch/tma_sm90.hpp"
#include "kernels/mixed/mixed_wgmma_kernel.cuh"
#include "kernels/mixed/stream_k.hpp"

namespace cute_gemm {
namespace mixed {

// The tensor maps of one launch (kernel parameters, __grid_constant__).
struct MixedWgmmaMaps {
  CUtensorMap a;       // activations [M, K], (kABoxRows, kABoxK) boxes, 128-byte swizzle
  CUtensorMap w;       // packed weights [N / 8, k_blocks * 128] 32-bit words,
                       // (kWBoxBlocks, kWBoxWords) boxes
  CUtensorMap scales;  // [groups, N], (1, kScaleBoxCols) boxes
  CUtensorMap zeros;   // as scales; unused (not encoded) for symmetric weights
};

// Registers per thread after setmaxnreg: what the producer keeps, and what each consumer takes
// of the rest of the registers the CTA was launched with (kLaunch per thread, the most that
// kMinCtasPerSm CTAs get of the 64K-register file, in 8s). setmaxnreg.inc waits until the CTA's
// pool has the registers, so asking for more than the producer gave back (computed from the
// per-thread count before rounding, for instance) hangs the CTA. Examples:
//   two consumer warpgroups, one CTA per SM: 384 x 168 - 128 x 24 = 61440 -> 240 per consumer;
//   one consumer warpgroup, two CTAs: 256 x 128 - 3072 = 29696 -> 232.
template <class Cfg>
struct WgmmaRegisterSplit {
  static constexpr int kProducer = 24;
  static constexpr int kLaunch = Cfg::kLaunchRegisters;
  static constexpr int kFree =
      (Cfg::kThreads * kLaunch - 128 * kProducer) / Cfg::kConsumerThreads / 8 * 8;
  static constexpr int kConsumer = kFree > 240 ? 240 : kFree;
  static_assert(kConsumer >= kLaunch, "the consumers must not lose registers");
};

// The k blocks one CTA computes for one output tile.
struct WgmmaWork {
  int m_tile = 0, n_tile = 0;
  int kb_begin = 0, kb_end = 0;
  bool partial = false;  // stream-K: part of the tile's K (the owner's if kb_begin == 0)
  int tile = 0;
};

// A CTA's work, one tile after the other: in a grid of tiles (sk.ctas == 0) the tile of
// (blockIdx.y, blockIdx.x) over split blockIdx.z's k blocks; with stream-K the segments of CTA
// blockIdx.x (StreamKPartition). The producer and the consumers each walk their own copy.
struct WgmmaWorkWalker {
  StreamKPartition sk;
  int64_t unit, end;  // stream-K: the next unit and the end of the CTA's units
  int kb_begin, kb_end;  // grid of tiles: the split's k blocks (kb_begin >= kb_end: taken)

  CG_DEVICE WgmmaWorkWalker(StreamKPartition const& sk_, int blocks_per_split, int k_blocks)
      : sk(sk_), unit(0), end(0), kb_begin(0), kb_end(0) {
    if (sk.ctas > 0) {
      unit = sk.begin(blockIdx.x);
      end = sk.begin(blockIdx.x + 1);
    } else {
      kb_begin = blockIdx.z * blocks_per_split;
      kb_end = min(kb_begin + blocks_per_split, k_blocks);
    }
  }

  // Whether a further tile follows.
  CG_DEVICE bool more() const { return sk.ctas > 0 ? unit < end : kb_begin < kb_end; }

  CG_DEVICE WgmmaWork next() {
    WgmmaWork w;
    if (sk.ctas > 0) {
      const StreamKPartition::Segment s = sk.segment_at(blockIdx.x, unit);
      unit += s.kb_end - s.kb_begin;
      w.m_tile = sk.m_tile(s.tile);
      w.n_tile = sk.n_tile(s.tile);
      w.kb_begin = s.kb_begin;
      w.kb_end = s.kb_end;
      w.partial = s.partial;
      w.tile = s.tile;
    } else {
      w.m_tile = blockIdx.y;
      w.n_tile = blockIdx.x;
      w.kb_begin = kb_begin;
      w.kb_end = kb_end;
      kb_begin = kb_end;
    }
    return w;
  }
};

// Stream-K's fixup of a partial tile (stream_k.hpp), by the consumer threads. A peer writes its
// partial sums to its slot and counts itself in the tile's counter, and returns false. The owner
// waits for the peers' count, adds their slots to acc in contributor order and returns true: it
// stores the tile.
template <class Cfg>
CG_DEVICE bool stream_k_fixup(MixedGemmParams const& p, StreamKPartition const& sk,
                              WgmmaWork const& work, int tid,
                              float (&acc)[Cfg::kNTiles][Cfg::kAccRegs]) {
  constexpr auto partial = typename Cfg::PartialTV{};  // (T, V) -> float in the slot
  constexpr int kUnits = Cfg::kPartialValues / 4;      // 16-byte units per thread
  constexpr int kA = Cfg::kAccRegs;                    // unit j: acc[4j / kA][4j % kA ..]
  constexpr int64_t kSlotFloats = int64_t(Cfg::kTileM) * Cfg::kTileN;
  static_assert(decltype(cosize(partial))::value == kSlotFloats, "a slot holds one tile");
  int* const counter = static_cast<int*>(p.workspace) + work.tile;
  float* const slots = reinterpret_cast<float*>(static_cast<char*>(p.workspace) +
                                                StreamKPartition::counter_bytes(sk.tiles()));
  if (work.kb_begin > 0) {  // a peer
    float4* const mine = reinterpret_cast<float4*>(slots + blockIdx.x * kSlotFloats);
    CG_PRAGMA_UNROLL
    for (int j = 0; j < kUnits; ++j) {
      float const* a = &acc[4 * j / kA][4 * j % kA];
      __stcg(mine + partial(tid, make_coord(0, j)) / 4, make_float4(a[0], a[1], a[2], a[3]));
    }
    named_barrier_sync(1, Cfg::kConsumerThreads);  // every thread's partial sums are written
    if (tid == 0) gpu_counter_add_release(counter, 1);
    return false;
  }
  const int first = blockIdx.x, peers = sk.last_cta(work.tile) - first;
  if (tid == 0) {
    while (gpu_counter_load_acquire(counter) < peers) __nanosleep(64);
  }
  named_barrier_sync(1, Cfg::kConsumerThreads);  // the peers' partial sums are visible
  for (int c = 1; c <= peers; ++c) {
    float4 const* src = reinterpret_cast<float4 const*>(slots + (first + c) * kSlotFloats);
    // In chunks of 8 units, so the loads in flight fit beside the accumulators.
    CG_PRAGMA_UNROLL
    for (int j0 = 0; j0 < kUnits; j0 += 8) {
      float4 x[8];
      CG_PRAGMA_UNROLL
      for (int j = 0; j < 8 && j0 + j < kUnits; ++j)
        x[j] = __ldcg(src + partial(tid, make_coord(0, j0 + j)) / 4);
      CG_PRAGMA_UNROLL
      for (int j = 0; j < 8 && j0 + j < kUnits; ++j) {
        float* a = &acc[4 * (j0 + j) / kA][4 * (j0 + j) % kA];
        a[0] += x[j].x, a[1] += x[j].y, a[2] += x[j].z, a[3] += x[j].w;
      }
    }
  }
  return true;
}

// grid and splits as mixed_wgmma_kernel, or with stream-K (sk.ctas > 0) sk.ctas CTAs sharing
// the tiles' k blocks (stream_k.hpp; p.workspace: the tile counters, zeroed, then the partial
// sums' slots); blockDim = kThreads (consumer warpgroups, then the producer warpgroup).
// The stages form one ring over all of a CTA's tiles: the producer runs on into the next tile
// while the consumers finish one.
template <class Cfg>
__global__ void __launch_bounds__(Cfg::kThreads, Cfg::kMinCtasPerSm)
    mixed_wgmma_ws_kernel(MixedGemmParams p, int blocks_per_split, bool to_workspace,
                          const __grid_constant__ MixedWgmmaMaps maps,
                          const StreamKPartition sk) {
#if defined(CG_ARCH_WGMMA_ENABLED)
  using T = typename Cfg::Element;
  using Wgmma = SM90_64xNx16_F32_RS<T, Cfg::kTileM>;
  constexpr int BM = Cfg::kTileM, BK = Cfg::kBlockK, S = Cfg::kStages;
  constexpr int NT = Cfg::kNTiles;
  constexpr auto sA = typename Cfg::SmemA{};
  constexpr auto sS = typename Cfg::SmemScales{};
  static_assert(Cfg::kProducer, "a configuration with a producer warpgroup");
  extern __shared__ uint128_t smem_raw[];
  // The swizzle atoms must start on 1024-byte boundaries of the shared address space.
  const uint32_t raw_addr = detail::smem_addr(smem_raw);
  char* smem = reinterpret_cast<char*>(smem_raw) + (((raw_addr + 1023u) & ~1023u) - raw_addr);
  char* smem_w = smem + Cfg::kWeightsOffset;
  uint64_t* const full = reinterpret_cast<uint64_t*>(smem + Cfg::kBarrierOffset);
  uint64_t* const empty = full + S;

  const int tid = threadIdx.x;
  const int k_blocks = mixed::k_blocks(p.k, Cfg::kBits);

  if (tid == 0) {
    CG_PRAGMA_UNROLL
    for (int s = 0; s < S; ++s) {
      mbarrier_init(full + s, 1);
      mbarrier_init(empty + s, Cfg::kConsumerThreads / 32);
    }
    fence_proxy_async_shared();  // the initialized barriers are seen by the TMA unit
  }
  __syncthreads();

  if (tid >= Cfg::kConsumerThreads) {
    // ---- producer warpgroup: one thread issues every copy.
    warpgroup_reg_dealloc<WgmmaRegisterSplit<Cfg>::kProducer>();
    if (tid != Cfg::kConsumerThreads) return;
    const GroupShape groups(p);
    const bool asymmetric = p.zeros != nullptr;
    constexpr uint32_t kScaleRowBytes = Cfg::kScaleBoxCols * sizeof(T);
    const uint32_t stage_bytes = Cfg::kAStageBytes + Cfg::kWeightBytes +
                                 Cfg::kScaleRows * kScaleRowBytes * (asymmetric ? 2 : 1);
    tma_prefetch_map(&maps.a);
    tma_prefetch_map(&maps.w);
    tma_prefetch_map(&maps.scales);
    const uint64_t policy = make_l2_evict_first_policy();  // the weights are read once
    // Weights, scales and zeros of k block kb of N tile n0 (no dependence on the previous kernel)
    // into stage s, with the stage's whole byte count announced.
    auto load_weights = [&](int n0, int kb, int s) {
      mbarrier_arrive_expect_tx(full + s, stage_bytes);
      char* st = smem_w + s * Cfg::kStageBytes;
      tma_load_2d(st, &maps.w, full + s, kb * Cfg::kWBoxWords, n0 / kBlockN, policy);
      CG_PRAGMA_UNROLL
      for (int r = 0; r < Cfg::kScaleRows; ++r) {
        const int grp = min(groups.of(kb * BK + 32 * r), groups.last);
        char* dst = st + Cfg::kWeightBytes + sS(r, 0, 0) * int(sizeof(T));
        tma_load_2d(dst, &maps.scales, full + s, n0, grp);
        if (asymmetric) {
          tma_load_2d(dst + sS(0, 0, 1) * int(sizeof(T)), &maps.zeros, full + s, n0, grp);
        }
      }
    };
    auto load_activations = [&](int m0, int kb, int s) {
      CG_PRAGMA_UNROLL
      for (int h = 0; h < Cfg::kABoxes; ++h) {
        T* dst = reinterpret_cast<T*>(smem + s * Cfg::kAStageBytes) + sA(0, Cfg::kABoxK * h);
        tma_load_2d(dst, &maps.a, full + s, kb * BK + Cfg::kABoxK * h, m0);
      }
    };
    WgmmaWorkWalker walker(sk, blocks_per_split, k_blocks);
    int loaded = 0;  // k blocks issued so far, over all of the CTA's tiles: the ring position
    while (walker.more()) {
      const WgmmaWork work = walker.next();
      const int m0 = work.m_tile * BM, n0 = work.n_tile * Cfg::kTileN;
      int kb = work.kb_begin;
      if (loaded == 0) {
        // Programmatic dependent launch: the first stages' weights before the wait, the
        // activations (written by the previous kernel) after it. These stages are free.
        const int first = min(work.kb_end - kb, S);
        for (int j = 0; j < first; ++j) load_weights(n0, kb + j, j);
        grid_dependency_wait();
        for (int j = 0; j < first; ++j) load_activations(m0, kb + j, j);
        kb += first;
        loaded = first;
      }
      for (; kb < work.kb_end; ++kb, ++loaded) {
        const int s = loaded % S;
        // Use u = loaded / S of stage s: every consumer warp is done with use u - 1.
        if (loaded >= S) mbarrier_wait_parity_suspend(empty + s, uint32_t(loaded / S - 1) & 1u);
        load_weights(n0, kb, s);
        load_activations(m0, kb, s);
      }
    }
    return;
  }

  // ---- consumer warpgroups: dequantize and multiply.
  warpgroup_reg_alloc<WgmmaRegisterSplit<Cfg>::kConsumer>();
  WgmmaWarpSlice<Cfg> slice(tid, p.zeros == nullptr);
  using BlockRegs = typename WgmmaWarpSlice<Cfg>::BlockRegs;

  // Descriptor of stage 0's activation tile, derived from its layout; stage s adds
  // s * kAStageBytes.
  const uint64_t desc0 = make_wgmma_desc(sA, detail::smem_addr(smem));
  auto desc_at = [&](int stage) { return desc0 + uint64_t((stage * Cfg::kAStageBytes) >> 4); };
  // Accumulators: acc[r][v] is value (v, r) of AccTV, (T, V) -> (M kTileM, N kTileN).
  float acc[NT][Cfg::kAccRegs];

  // As in the cp.async kernel's rounded loop: block i - 1's wgmmas run while block i is
  // dequantized, so only block i - 2's must be done (wait_group 1) before its register set is
  // rewritten; then this warp releases block i - 2's stage to the producer. The ring position
  // (stage, phase) runs on over the CTA's tiles; release_stage trails it by two blocks.
  BlockRegs regs[2];
  int stage = 0, release_stage = S - 2;  // the ring position of block i and of block i - 2
  uint32_t phase = 0;                    // of the full barriers at `stage`
  auto release = [&](int st) {
    __syncwarp();
    if (slice.lane == 0) mbarrier_arrive(empty + st);
  };
  WgmmaWorkWalker walker(sk, blocks_per_split, k_blocks);
  while (walker.more()) {
    const WgmmaWork work = walker.next();
    CG_PRAGMA_UNROLL
    for (int r = 0; r < NT; ++r) {
      CG_PRAGMA_UNROLL
      for (int v = 0; v < Cfg::kAccRegs; ++v) acc[r][v] = 0.f;
    }
    auto step = [&](int i, auto set) {
      BlockRegs& a = regs[decltype(set)::value];
      wgmma_wait_group<1>();  // block i - 2's wgmmas are done (this warp's view)
      if (i >= 2) release(release_stage);
      mbarrier_wait_parity_suspend(full + stage, phase);  // block i landed
      slice.dequantize_block(smem_w + stage * Cfg::kStageBytes, a);
      wgmma_fence();  // the registers just written feed the wgmmas
      WgmmaWarpSlice<Cfg>::template mma_block<Wgmma>(a, desc_at(stage), acc);
      wgmma_commit_group();
      if (++stage == S) stage = 0, phase ^= 1;
      if (++release_stage == S) release_stage = 0;
    };
    const int n_kb = work.kb_end - work.kb_begin;
    for_blocks_in_pairs<true>(n_kb, step);
    wgmma_wait_group<0>();
    // The tile's last one or two blocks are done too: release their stages.
    if (n_kb >= 2) release(release_stage);
    if (n_kb >= 1) release(release_stage + 1 == S ? 0 : release_stage + 1);
    if (!walker.more()) grid_launch_dependents();
    const int m0 = work.m_tile * BM, n0 = work.n_tile * Cfg::kTileN;
    // A whole tile, or the owner's of a partial one once the fixup has added the peers' sums.
    if (!work.partial || stream_k_fixup<Cfg>(p, sk, work, tid, acc))
      slice.store(p, acc, m0, n0, to_workspace);
  }
#else
  (void)p, (void)blocks_per_split, (void)to_workspace, (void)maps, (void)sk;
#endif
}

}  // namespace mixed
}  // namespace cute_gemm
