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
//   - the activation tile SmemA, (kABoxRows rows, 64 k) boxes with the 128-byte swizzle,
//     kARowBoxes per 128-byte line of K, rows past M and columns past K filled with zeros; the
//     boxes wholly past M are not loaded (their rows feed only accumulators never stored);
//   - the weights: the packed tensor seen as [N / 8 blocks][k_blocks * 128 words], one box of
//     (kTileN / 8 blocks, 128 words) = the stage's SmemW [block][32 lanes][16 B] exactly;
//   - the scales (and zeros): one (1 group, kTileN columns) box per row of SmemScales.
// Stage s has a "full" mbarrier (the producer's arrive with the stage's byte count, plus the TMA
// bytes) and an "empty" one (one arrive per consumer warp once its wgmmas on the stage are done).
// Only the producer waits on "empty"; a consumer warp waits only for its data and its own wgmmas.
// setmaxnreg moves registers from the producer (24) to the consumers (WgmmaRegisterSplit), which
// hold the accumulators (128 for a 256-row M tile) and two register sets of a k block.
// The output leaves the same way it came: the consumers round their accumulators into SmemOut
// tiles laid over the drained stages, and one thread stores each (kTileM, 64) tile with a TMA
// store of the output's tensor map (split-K and gated plans write fp32 sums to the workspace
// directly instead: WgmmaWarpSlice::store).
//
// StreamK form (MixedPlan::stream_k_ctas): the tiles run as full waves of gridDim.x CTAs, one tile
// each (grid rows 0 .. gridDim.y - 2), and the tiles past them, fewer than a wave, as stream-K
// work of the last row's gridDim.x CTAs (stream_k.hpp, WgmmaStreamK): instead of a last wave
// that leaves SMs idle (448 256-row tiles on 132 SMs: 3.39 waves run as 4), every SM runs the
// same share of the remaining tiles' k blocks.

#include "cute_gemm/arch/mbarrier_sm80.hpp"
#include "cute_gemm/arch/named_barrier.hpp"
#include "cute_gemm/arch/setmaxnreg_sm90.hpp"
#include "cute_gemm/arch/tma_sm90.hpp"
#include "kernels/mixed/mixed_wgmma_kernel.cuh"
#include "kernels/mixed/mixed_wgmma_stream_k.cuh"
#include "kernels/mixed/stream_k.hpp"
#include "kernels/tile_raster.hpp"
#include "kernels/tma_store_tile.cuh"

namespace cute_gemm {
namespace mixed {

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

// The CTA's work in the StreamK form: a whole tile of the full waves (grid rows 0 .. gridDim.y - 2,
// tile blockIdx.y * gridDim.x + blockIdx.x in raster order), or in the last row CTA blockIdx.x's
// stream-K share of the tiles past them. Segments name tiles in raster order; a whole tile is
// one owned segment with no contributors (first_cta = the CTA itself).
//
// The CTA's coordinates are read as volatile, so that the consumers compute their work again after
// the main loop instead of holding it in registers through it (the 256-row INT4 tile has none to
// spare).
CG_DEVICE StreamKWork ws_stream_k_work(int tiles, int k_blocks) {
  int cta_x, cta_y, wave, rows;
  asm volatile("mov.u32 %0, %%ctaid.x;" : "=r"(cta_x));
  asm volatile("mov.u32 %0, %%ctaid.y;" : "=r"(cta_y));
  asm volatile("mov.u32 %0, %%nctaid.x;" : "=r"(wave));
  asm volatile("mov.u32 %0, %%nctaid.y;" : "=r"(rows));
  const int full = rows - 1;
  StreamKWork w;
  if (cta_y < full) {
    w.seg[0].tile = cta_y * wave + cta_x;
    w.seg[0].blocks = k_blocks;
    w.seg[0].owned = true;
    w.seg[0].first_cta = cta_x;
    w.segments = 1;
    w.blocks = k_blocks;
    return w;
  }
  w = stream_k_work(cta_x, wave, tiles - full * wave, k_blocks);
  w.seg[0].tile += full * wave;
  w.seg[1].tile += full * wave;
  return w;
}

// grid and splits as mixed_wgmma_kernel; blockDim = kThreads (consumer warpgroups, then the
// producer warpgroup). StreamK: grid (CTAs per wave, full waves + 1), unsplit (see above).
template <class Cfg, bool StreamK = false>
__global__ void __launch_bounds__(Cfg::kThreads, Cfg::kMinCtasPerSm)
    mixed_wgmma_ws_kernel(MixedGemmParams p, int blocks_per_split, bool to_workspace,
                          int raster_m, const __grid_constant__ MixedWgmmaMaps maps) {
#if defined(CG_ARCH_WGMMA_ENABLED)
  using T = typename Cfg::Element;
  using Wgmma = SM90_64xNx16_F32_RS<T, Cfg::kTileM>;
  constexpr int BM = Cfg::kTileM, S = Cfg::kStages;
  constexpr int NT = Cfg::kNTiles;
  constexpr auto sA = typename Cfg::SmemA{};
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
  // The launch's contract (the planner's rule): exact scales come in one group over K.
  if (Cfg::kExactScales && GroupShape(p).last != 0) __trap();
  // Whether each k block lies in one group: the producer then loads row 0 of its scales (zeros)
  // alone and the consumers read only that row.
  const bool one_group = whole_block_groups(Cfg::kBits, GroupShape(p).size, p.k);
  const int scale_rows = one_group ? 1 : Cfg::kScaleRows;
  // The CTA's tile: the grid's (x, y) = (N tile, M tile) taken in groups of raster_m M tiles,
  // column by column (tile_raster.hpp; the plan's choice, MixedPlan::raster_m). StreamK: the
  // tiles of its segments, in the same order (ws_stream_k_work).
  const int tiles_n = (p.n + Cfg::kTileN - 1) / Cfg::kTileN;
  const int tiles_m = StreamK ? (p.m + BM - 1) / BM : int(gridDim.y);
  auto tile_origin = [&](int tile) {
    const TileCoord t = raster_tile(tile, tiles_m, StreamK ? tiles_n : int(gridDim.x), raster_m);
    return TileCoord{t.m * BM, t.n * Cfg::kTileN};
  };
  // The tile the CTA stores (StreamK: its last segment's).
  auto stored_tile = [&](StreamKWork const& work) {
    return tile_origin(StreamK ? (work.segments > 1 ? work.seg[1].tile : work.seg[0].tile)
                               : int(blockIdx.y * gridDim.x + blockIdx.x));
  };
  const int kb_begin = StreamK ? 0 : int(blockIdx.z) * blocks_per_split;
  // The k blocks of a whole tile: its split's (kb_begin on), or all of K in the StreamK form.
  const int tile_blocks =
      StreamK ? k_blocks : min(kb_begin + blocks_per_split, k_blocks) - kb_begin;
  // StreamK: whether this CTA shares the tiles past the full waves (the grid's last row); the
  // others run one whole tile each through the same code as the plain form.
  const bool shared_cta = StreamK && blockIdx.y + 1 == gridDim.y;
  // A k block's source: its k block and the origin of its tile.
  struct BlockSource {
    int kb;
    TileCoord at;
  };

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
    tma_prefetch_map(&maps.a);
    tma_prefetch_map(&maps.w);
    tma_prefetch_map(&maps.scales);
    const uint64_t policy = make_l2_evict_first_policy();  // the weights are read once
    // The activation row boxes of the tile at row m_at that hold rows of A (those wholly past M
    // are not loaded).
    auto row_boxes_at = [&](int m_at) {
      return min(Cfg::kARowBoxes, (p.m - m_at + Cfg::kABoxRows - 1) / Cfg::kABoxRows);
    };
    // The copies of n_kb blocks, block j's k block and tile origin from source(j).
    auto produce = [&](int n_kb, auto source) {
      // Weights, scales and zeros of block j (no dependence on the previous kernel) into stage
      // s, with the stage's whole byte count announced.
      auto load_weights = [&](int j, int s) {
        const BlockSource src = source(j);
        mbarrier_arrive_expect_tx(
            full + s, Cfg::tma_stage_bytes(row_boxes_at(src.at.m), scale_rows, asymmetric));
        const WgmmaStageBoxes<Cfg> boxes{maps, src.at.m, src.at.n};
        char* st = smem_w + s * Cfg::kStageBytes;
        boxes.weights(st, full + s, src.kb, policy);
        boxes.scale_rows(boxes.scales_of(st, false), &maps.scales, full + s, src.kb, scale_rows,
                         groups);
        if (asymmetric) {
          boxes.scale_rows(boxes.scales_of(st, true), &maps.zeros, full + s, src.kb, scale_rows,
                           groups);
        }
      };
      auto load_activations = [&](int j, int s) {
        const BlockSource src = source(j);
        const WgmmaStageBoxes<Cfg> boxes{maps, src.at.m, src.at.n};
        boxes.activations(reinterpret_cast<T*>(smem + s * Cfg::kAStageBytes), full + s, src.kb,
                          row_boxes_at(src.at.m));
      };
      // Programmatic dependent launch: the first stages' weights before the wait, the
      // activations (written by the previous kernel) after it.
      const int first = n_kb < S ? n_kb : S;
      for (int j = 0; j < first; ++j) load_weights(j, j);
      grid_dependency_wait();
      for (int j = 0; j < first; ++j) load_activations(j, j);
      int s = 0;
      uint32_t phase = 0;  // of the empty barriers, for the blocks j = S.. (the stages' 2nd use)
      for (int j = S; j < n_kb; ++j) {
        mbarrier_wait_parity_suspend(empty + s, phase);  // every consumer warp is done with j - S
        load_weights(j, s);
        load_activations(j, s);
        if (++s == S) s = 0, phase ^= 1;
      }
    };
    if (!shared_cta) {  // one tile, k blocks kb_begin ..
      const TileCoord origin = tile_origin(int(blockIdx.y * gridDim.x + blockIdx.x));
      produce(tile_blocks, [&](int j) { return BlockSource{kb_begin + j, origin}; });
    } else if constexpr (StreamK) {  // the segments' blocks
      // Each segment's tile origin once (a raster_tile per block cost INT8's producer its lead).
      const StreamKWork work = ws_stream_k_work(tiles_m * tiles_n, k_blocks);
      const int first_blocks = work.seg[0].blocks;
      const BlockSource seg0{work.seg[0].kb_begin, tile_origin(work.seg[0].tile)};
      const BlockSource seg1{work.seg[1].kb_begin - first_blocks, tile_origin(work.seg[1].tile)};
      produce(work.blocks, [&](int j) {
        BlockSource const& seg = j < first_blocks ? seg0 : seg1;
        return BlockSource{seg.kb + j, seg.at};
      });
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
  CG_PRAGMA_UNROLL
  for (int r = 0; r < NT; ++r) {
    CG_PRAGMA_UNROLL
    for (int v = 0; v < Cfg::kAccRegs; ++v) acc[r][v] = 0.f;
  }

  // Block i - 1's wgmmas run while block i is dequantized (into the other register set). A warp
  // hands a stage back to the producer once the wgmmas reading it are done, kReleaseLag blocks
  // after its use (MixedWgmmaConfig):
  //   - lag 2: at the start of step i, block i - 2's (wait_group 1), so block i - 1's wgmmas are
  //     still queued when block i's are issued and the tensor cores never wait for a warp; the
  //     producer fills S - 2 stages ahead;
  //   - lag 1 (3-stage tiles): after dequantizing block i, block i - 1's (wait_group 0), before
  //     issuing block i's; the producer fills S - 1 = 2 stages ahead instead of 1.
  constexpr int kLag = Cfg::kReleaseLag;
  BlockRegs regs[2];
  int stage = 0, release_stage = S - kLag;  // i % S and (i - kLag) % S
  uint32_t phase = 0;                       // of the full barriers: (i / S) % 2
  auto release = [&](int i) {
    wgmma_wait_group<kLag - 1>();  // block i - kLag's wgmmas are done (this warp's view)
    if (i >= kLag) {
      __syncwarp();
      if (slice.lane == 0) mbarrier_arrive(empty + release_stage);
    }
  };
  // StreamK: a shared CTA's blocks run as one loop over its segments. With two, the first is
  // contributed and the second owned (stream_k_work's run order): at the second's first block
  // (second_begin; -1 for none) the first's sums go to the workspace and that block's first wgmma
  // starts acc over (scale_d 0: no other instruction writes the accumulators, which ptxas needs
  // to keep the wgmmas in flight). One loop for every CTA: two (a plain one for the whole
  // tiles) made ptxas serialize the wgmmas of both (C7515).
  int n_kb = tile_blocks, second_begin = -1;
  float col_scales[NT][2];
  {
    StreamKWork work{};
    if constexpr (StreamK) {
      work = ws_stream_k_work(tiles_m * tiles_n, k_blocks);
      n_kb = work.blocks;
      if (work.segments > 1) second_begin = work.seg[0].blocks;
    }
    // Exact scales: the stored tile's column scales (StreamK: its last segment's tile), read here
    // so that their latency hides behind the loop.
    if constexpr (Cfg::kExactScales) {
      slice.template load_columns</*Optional=*/false>(p.scales, p, stored_tile(work).n, col_scales);
    }
  }
  auto step = [&](int i, auto set) {
    BlockRegs& a = regs[decltype(set)::value];
    if constexpr (kLag == 2) release(i);
    mbarrier_wait_parity_suspend(full + stage, phase);  // block i landed
    slice.dequantize_block(smem_w + stage * Cfg::kStageBytes, a, one_group);
    if constexpr (kLag == 1) release(i);
    int scale_first = 1;
    if constexpr (StreamK) {
      if (i == second_begin) {
        wgmma_wait_group<0>();  // the first segment's wgmmas are done
        WgmmaStreamK<Cfg>::contribute(p, acc, int(blockIdx.x), int(gridDim.x), tid);
        scale_first = 0;
      }
    }
    wgmma_fence();  // the registers just written feed the wgmmas
    WgmmaWarpSlice<Cfg>::template mma_block_from<Wgmma>(a, desc_at(stage), scale_first, acc);
    wgmma_commit_group();
    if (++stage == S) stage = 0, phase ^= 1;
    if (++release_stage == S) release_stage = 0;
  };
  for_blocks_in_pairs<true>(n_kb, step);
  wgmma_wait_group<0>();
  grid_launch_dependents();
  StreamKWork work{};
  if constexpr (StreamK) {
    // The last segment: handed to its tile's owner, or (owned) the other CTAs' sums added to
    // acc, which is then stored as an unsplit tile's (a whole tile has no contributors).
    work = ws_stream_k_work(tiles_m * tiles_n, k_blocks);
    const bool two = work.segments > 1;
    if (!(two ? work.seg[1].owned : work.seg[0].owned)) {
      WgmmaStreamK<Cfg>::contribute(p, acc, int(blockIdx.x), int(gridDim.x), tid);
      return;
    }
    WgmmaStreamK<Cfg>::add_contributions_in_place(
        p, acc, two ? work.seg[1].first_cta : work.seg[0].first_cta, int(blockIdx.x),
        int(gridDim.x), tid);
  }
  const TileCoord origin = stored_tile(work);
  const int m0 = origin.m, n0 = origin.n;
  // Exact scales: the tile's sums of a (q - z), stream-K contributions included, scaled once.
  if constexpr (Cfg::kExactScales) WgmmaWarpSlice<Cfg>::scale_columns(col_scales, acc);
  if (to_workspace) {
    slice.store(p, acc, m0, n0, true);
    return;
  }
  // The output through shared memory and TMA stores: whole 128-byte lines, written while the CTA
  // retires instead of ~kAccRegs two-byte stores per thread (a CTA tile's epilogue took ~4.5 us
  // a wave at M = 4096, K = 128 on an H100 with those; NOTES session 28).
  named_barrier_sync<1, Cfg::kConsumerThreads>();  // every consumer's wgmmas are done: no
                                                    // stage is read any more
  slice.stage_out(p, acc, smem, n0);
  tma_store_tile_slabs<Cfg::kConsumerThreads, NT * Cfg::kWarpGroups>(
      tid, &maps.out, smem, Cfg::kOutTileBytes, n0, m0, p.n);
#else
  (void)p, (void)blocks_per_split, (void)to_workspace, (void)raster_m, (void)maps;
#endif
}

}  // namespace mixed
}  // namespace cute_gemm
