#pragma once
// Attention for decode: a few query positions against a long key/value cache, grouped-query heads,
// an optional boolean or additive mask (decode_attention_config.hpp states the contract and the
// mma shapes).
//   - A CTA serves one (batch b, query position i, key/value head, chunk of up to 16 of its query
//     heads: the mma's M) and a share of the positions. It reads each key and value row once for
//     all its query heads: the cache is never expanded to the query heads (transformers' repeat_kv
//     copies it, G times its size, at every layer).
//   - Its 4 warps work apart: warp w takes tiles w, w + 4, ... of 16 positions through a ring of
//     kStages tiles of shared memory filled by cp.async, and keeps its own online softmax (running
//     max and sum per head, fp32). No CTA barrier inside the loop; the warps' results meet once,
//     at the end, like the splits' do.
//   - The mask decides which rows are copied: a tile's mask values are read one tile before its
//     copies are issued, rows that no head of the CTA takes are zero-filled instead of read, and a
//     tile with no such row is neither copied nor computed. A long split under one mask for
//     every head first finds its last row that takes part, so a static cache's unfilled tail
//     costs one read of its mask values, not a warp iteration per tile.
//   - Per tile: S = Q K^T (ldmatrix, mma.sync m16n8k16), scaled and masked in registers; P = the
//     exponentials, S's accumulators reused as the A operand of O += P V (V by ldmatrix.trans).
//   - The warps' partial results (max, sum, unnormalized output) meet in shared memory. On sm_90
//     the positions of one (b, i, head chunk) are split over a thread block cluster of `splits`
//     CTAs, whose results meet through distributed shared memory, each CTA writing its share of
//     the output: a small batch fills the GPU without a workspace or a second kernel. Each CTA
//     pushes its results to the CTAs that own them (st.async, counted on the owner's mbarrier),
//     so the only cluster barrier is a relaxed one (no CTA pushes into another's rings before
//     that one is done with its positions): a cluster barrier with release semantics costs a
//     GPU-scope memory barrier. Elsewhere splits is 1.
//   - fp32 scores, softmax and sums; P is rounded to the 16-bit type for the mma, the output once.
//     Programmatic dependent launch: the kernel waits for the previous kernel before its first
//     read and lets the next one (the output projection's GEMM, which streams its weights before
//     its own wait) launch at once, or after its positions where its grid is large enough that
//     the two streams would compete (p.early_dependents, decode_attention_early_dependents).

#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "cute_gemm/arch/cluster_barrier_sm90.hpp"
#include "cute_gemm/arch/config_arch.hpp"
#include "cute_gemm/arch/copy_sm75.hpp"
#include "cute_gemm/arch/copy_sm80.hpp"
#include "cute_gemm/arch/dsmem_sm90.hpp"
#include "cute_gemm/arch/exp2_approx.hpp"
#include "cute_gemm/arch/grid_dependency_sm90.hpp"
#include "cute_gemm/arch/mbarrier_sm80.hpp"
#include "cute_gemm/arch/tma_sm90.hpp"  // mbarrier_arrive_expect_tx, mbarrier_wait_parity_suspend
#include "kernels/attention/decode_attention_config.hpp"
#include "kernels/device_info.hpp"
#include "kernels/half_traits.cuh"

namespace cute_gemm {
namespace attention {

// mask[b, h, i, j]'s element offset.
CG_DEVICE int64_t mask_at(DecodeAttentionParams const& p, int b, int h, int i, int j) {
  return b * p.mask_stride[0] + h * p.mask_stride[1] + i * p.mask_stride[2] + j * p.mask_stride[3];
}

// The bits of mask element `at` (a mask is present). Loaded apart from their conversion
// (mask_log2), so that a warp issues several loads before it waits for any.
CG_DEVICE uint32_t mask_bits(DecodeAttentionParams const& p, int64_t at) {
  switch (p.mask_kind) {
    case MaskKind::kBool:
      return static_cast<uint8_t const*>(p.mask)[at];
    case MaskKind::kFloat16:
    case MaskKind::kBFloat16:
      return static_cast<uint16_t const*>(p.mask)[at];
    default:
      return static_cast<uint32_t const*>(p.mask)[at];
  }
}

// A mask element's contribution to a score, in log2 units: 0 (takes part), -inf (excluded) or
// an additive value times log2(e).
CG_DEVICE float mask_log2(MaskKind kind, uint32_t bits) {
  constexpr float kLog2e = 1.4426950408889634f;
  switch (kind) {
    case MaskKind::kNone:
      return 0.f;
    case MaskKind::kBool:
      return bits != 0 ? 0.f : -INFINITY;
    case MaskKind::kFloat16:
      return __half2float(__ushort_as_half(static_cast<unsigned short>(bits))) * kLog2e;
    case MaskKind::kBFloat16:
      return __bfloat162float(__ushort_as_bfloat16(static_cast<unsigned short>(bits))) * kLog2e;
    default:
      return __uint_as_float(bits) * kLog2e;
  }
}

template <class T>
CG_DEVICE uint128_t const& as_chunk(T const* p) {
  return *reinterpret_cast<uint128_t const*>(p);
}
template <class T>
CG_DEVICE uint128_t& as_chunk(T* p) {
  return *reinterpret_cast<uint128_t*>(p);
}

// A head's output value: its weighted sum over its softmax sum, 0 where the sum is 0 (every
// position excluded).
CG_DEVICE float normalized_output(float acc, float sum) {
  return sum > 0.f ? __fdividef(acc, sum) : 0.f;
}

// grid: (splits, kv_heads * head_chunks(G), B * Lq), 128 threads, Tile::kSmemBytes of dynamic
// shared memory; with splits > 1 launched as clusters of (splits, 1, 1).
// kPerHead: the mask differs between query heads (mask_per_head(p)). Compiled apart, so that the
// common kernel (no mask, or one mask for every head: a causal or static-cache mask) carries one
// mask value per row instead of the per-head loads and conversions: at a small batch the kernel
// runs its code once per call, and its instruction fetches were ~30% of its stalls (ncu, H200).
template <class T, int kDim, bool kPerHead>
__global__ void __launch_bounds__(DecodeAttentionConfig::kThreads)
    decode_attention_kernel(DecodeAttentionParams p) {
  using Cfg = DecodeAttentionConfig;
  using Tile = DecodeAttentionTile<kDim>;
  using Mma = typename HalfTraits<T>::MmaOp;
  constexpr int kWarps = Cfg::kWarps, kStages = Cfg::kStages, kRows = Cfg::kTileRows;
  constexpr int kHeads = Cfg::kMaxHeads, kBiasHeads = Cfg::kBiasHeadsPerLane;
  constexpr unsigned kFull = 0xffffffffu;
  typename Tile::SmemRows const smem_rows{};

  // The queries (16 heads x kDim, zero past the CTA's heads and D), then each warp's ring.
  extern __shared__ uint128_t smem_raw[];
  T* const q_s = reinterpret_cast<T*>(smem_raw);
  T* const rings = q_s + Tile::kTileElems;
  // Per warp and stage: the mask's contribution of each row (one for every head, or 0 / -inf
  // with a mask per head: whether any head takes the row) and the rows copied (a bit each).
  __shared__ float row_bias_s[kWarps][kStages][kRows];
  __shared__ uint32_t rows_copied_s[kWarps][kStages];
  // After the positions: each warp's running max and sum per head.
  __shared__ float max_s[kWarps][kHeads], sum_s[kWarps][kHeads];

  int const tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  int const dim = p.head_dim, group = p.heads / p.kv_heads, chunks = Cfg::head_chunks(group);
  int const kv_head = blockIdx.y / chunks, chunk = blockIdx.y % chunks;
  int const b = blockIdx.z / p.q_len, i = blockIdx.z % p.q_len;
  int const head0 = kv_head * group + chunk * kHeads;  // the CTA's first query head
  int const heads = min(kHeads, group - chunk * kHeads);
  int const per_split = Cfg::split_rows(p.kv_len, p.splits);
  int const row_begin = blockIdx.x * per_split, row_end = min(p.kv_len, row_begin + per_split);
  int tiles = Cfg::warp_tiles(max(0, row_end - row_begin), warp);  // after the scan: see there
  constexpr bool per_head = kPerHead;

  // ---- the warp's tiles: tile t covers rows [tile_row(t), tile_row(t) + 16) of the split.
  auto tile_row = [&](int t) { return row_begin + (warp + t * kWarps) * kRows; };
  T* const ring = rings + warp * kStages * Tile::kStageElems;
  T const* const k_rows = static_cast<T const*>(p.k) + b * p.k_stride[0] +
                          kv_head * p.k_stride[1];
  T const* const v_rows = static_cast<T const*>(p.v) + b * p.v_stride[0] +
                          kv_head * p.v_stride[1];

  // The lane's copies (Tile::copy_row / copy_d): its column of chunks in the tile, the byte offset
  // of each copy's chunk in a stage's key (or value) tile, and the pointer step between copies.
  int const lane_d = Tile::copy_d(lane);
  bool const lane_d_in = lane_d < dim;
  int64_t const lane_k = Tile::copy_row(lane, 0) * p.k_stride[2] + lane_d;
  int64_t const lane_v = Tile::copy_row(lane, 0) * p.v_stride[2] + lane_d;
  int64_t const k_step = Tile::kCopyRowStep * p.k_stride[2];
  int64_t const v_step = Tile::kCopyRowStep * p.v_stride[2];
  uint32_t copy_dst[Tile::kCopiesPerLane];
  CG_PRAGMA_UNROLL
  for (int c = 0; c < Tile::kCopiesPerLane; ++c) {
    copy_dst[c] = uint32_t(smem_rows(Tile::copy_row(lane, c), lane_d) * sizeof(T));
  }
  uint32_t const ring_addr = uint32_t(__cvta_generic_to_shared(ring));

  // The lane's mask values of tile t: row Cfg::bias_row of the tile, heads Cfg::bias_head (one
  // value, h = 0, with a mask for every head). A value takes part where the row is in the split
  // and the warp's tiles and the head is the CTA's; the others are -inf. load_bias issues the
  // loads (bits 0 where none); issue converts them, a tile later.
  auto bias_row_of = [&](int t) { return t < tiles ? tile_row(t) + Cfg::bias_row(lane) : row_end; };
  auto bias_taken = [&](int r, int h) {
    return r < row_end && (per_head ? Cfg::bias_head(lane, h) < heads : h == 0);
  };
  auto load_bias = [&](int t, uint32_t (&bits)[kBiasHeads]) {
    int const r = bias_row_of(t);
    CG_PRAGMA_UNROLL
    for (int h = 0; h < kBiasHeads; ++h) {
      bits[h] = 0;
      if (p.mask_kind != MaskKind::kNone && bias_taken(r, h)) {
        bits[h] = mask_bits(p, mask_at(p, b, head0 + Cfg::bias_head(lane, h), i, r));
      }
    }
  };
  // Issues tile t's copies into its stage (one cp.async group, empty past the warp's tiles) from
  // its mask values: rows no head takes are zero-filled, not read.
  auto issue = [&](int t, uint32_t const (&bits)[kBiasHeads]) {
    int const stage = t % kStages;
    int const r = bias_row_of(t);
    float bias[kBiasHeads];
    bool taken = false;
    CG_PRAGMA_UNROLL
    for (int h = 0; h < kBiasHeads; ++h) {
      bias[h] = bias_taken(r, h) ? mask_log2(p.mask_kind, bits[h]) : -INFINITY;
      taken |= bias[h] != -INFINITY;
    }
    if constexpr (per_head) taken |= __shfl_xor_sync(kFull, taken, 16);  // the other 8 heads
    uint32_t const rows = __ballot_sync(kFull, taken) & ((1u << kRows) - 1);
    if (lane < kRows) {
      row_bias_s[warp][stage][lane] = per_head ? (taken ? 0.f : -INFINITY) : bias[0];
    }
    if (lane == 0) rows_copied_s[warp][stage] = rows;
    if (rows != 0) {
      // From the lane's pointers into the tile's first row (lane_k / lane_v, fixed columns),
      // stepping kCopyRowStep rows per copy; a row not read gets the tile's first row as its
      // (valid, unread) source.
      int64_t const row0 = tile_row(t);
      T const* k_src = k_rows + row0 * p.k_stride[2];
      T const* v_src = v_rows + row0 * p.v_stride[2];
      T const* k_lane = k_src + lane_k;
      T const* v_lane = v_src + lane_v;
      uint32_t const k_dst = ring_addr + uint32_t(stage * Tile::kStageElems * sizeof(T));
      uint32_t const v_dst = k_dst + uint32_t(Tile::kTileElems * sizeof(T));
      CG_PRAGMA_UNROLL
      for (int c = 0; c < Tile::kCopiesPerLane; ++c) {
        bool const read = (rows >> Tile::copy_row(lane, c) & 1u) && lane_d_in;
        SM80_CP_ASYNC_CACHEGLOBAL_ZFILL::copy(as_chunk(read ? k_lane : k_src),
                                              k_dst + copy_dst[c], read);
        SM80_CP_ASYNC_CACHEGLOBAL_ZFILL::copy(as_chunk(read ? v_lane : v_src),
                                              v_dst + copy_dst[c], read);
        k_lane += k_step;
        v_lane += v_step;
      }
    }
    cp_async_fence();
  };

  // The splits' combine barrier (several splits): what this CTA receives from the cluster's CTAs
  // (theirs and its own) counts on it; the init is made visible to them before any pushes
  // (the cluster barrier after the positions).
  __shared__ uint64_t combine_bar;
#if defined(CG_ARCH_SM90_ENABLED)
  if (p.splits > 1 && tid == 0) {
    mbarrier_init(&combine_bar, 1);
    fence_mbarrier_init_cluster();
  }
#endif

  grid_dependency_wait();  // q, the cache and the mask come from the kernels before
  if (p.early_dependents) grid_launch_dependents();

  // A long split under one mask for every head (a static cache's unfilled tail): the CTA finds
  // the last row that takes part first, and the warps' tiles end there; the rows after it cost
  // neither a copy nor a mask read per tile. The threads read kScanLoads values each before
  // they convert any (one memory latency per kScanLoads * 128 rows).
  if (p.mask_kind != MaskKind::kNone && !per_head && row_end - row_begin >= Cfg::kScanMinRows) {
    constexpr int kScanLoads = 8;
    __shared__ int last_row_s;
    if (tid == 0) last_row_s = row_begin - 1;
    __syncthreads();
    int last = row_begin - 1;
    for (int r0 = row_begin + tid; r0 < row_end; r0 += kScanLoads * Cfg::kThreads) {
      uint32_t scan_bits[kScanLoads];
      CG_PRAGMA_UNROLL
      for (int u = 0; u < kScanLoads; ++u) {
        int const r = r0 + u * Cfg::kThreads;
        scan_bits[u] = r < row_end ? mask_bits(p, mask_at(p, b, head0, i, r)) : 0;
      }
      CG_PRAGMA_UNROLL
      for (int u = 0; u < kScanLoads; ++u) {
        int const r = r0 + u * Cfg::kThreads;
        if (r < row_end && mask_log2(p.mask_kind, scan_bits[u]) != -INFINITY) last = r;
      }
    }
    last = __reduce_max_sync(kFull, last);
    if (lane == 0) atomicMax(&last_row_s, last);
    __syncthreads();
    tiles = Cfg::warp_tiles(last_row_s + 1 - row_begin, warp);
  }

  // The prologue is a chain of memory latencies at a small batch (a warp has a tile or two): the
  // mask values of every prologue tile are loaded at once, the queries copied while they come.
  uint32_t prologue_bits[kStages - 1][kBiasHeads];
  CG_PRAGMA_UNROLL
  for (int t = 0; t < kStages - 1; ++t) load_bias(t, prologue_bits[t]);
  uint32_t bits[kBiasHeads];  // the mask values of the next tile to issue
  load_bias(kStages - 1, bits);
  // The queries: chunk (g, d) of q_s for g < 16, heads past the CTA's and d past D zero-filled
  // (the op passes q with 16-byte aligned rows, strides multiples of 8). The first cp.async group.
  constexpr int kQCopies = kHeads * Tile::kChunks / Cfg::kThreads;
  static_assert(kHeads * Tile::kChunks % Cfg::kThreads == 0, "whole Q copies per thread");
  CG_PRAGMA_UNROLL
  for (int c = 0; c < kQCopies; ++c) {
    int const idx = tid + Cfg::kThreads * c, g = idx / Tile::kChunks;
    int const d = idx % Tile::kChunks * Cfg::kVec;
    bool const read = g < heads && d < dim;
    int64_t const at = read ? b * p.q_stride[0] + (head0 + g) * p.q_stride[1] +
                                  i * p.q_stride[2] + d
                            : 0;
    SM80_CP_ASYNC_CACHEGLOBAL_ZFILL::copy(as_chunk(static_cast<T const*>(p.q) + at),
                                          as_chunk(q_s + smem_rows(g, d)), read);
  }
  cp_async_fence();
  CG_PRAGMA_UNROLL
  for (int t = 0; t < kStages - 1; ++t) issue(t, prologue_bits[t]);
  cp_async_wait<kStages - 1>();  // this thread's queries (the tiles' groups may be pending) ...
  __syncthreads();               // ... and every thread's

  // The lane's accumulator coordinates: value c of an n8 tile is head acc_head[c], column
  // acc_col[c] (AccHeadTV / AccColTV); heads acc_head[0] and acc_head[2] are the lane's two.
  int acc_head[4], acc_col[4];
  CG_PRAGMA_UNROLL
  for (int c = 0; c < 4; ++c) {
    acc_head[c] = AccHeadTV{}(lane, c);
    acc_col[c] = AccColTV{}(lane, c);
  }
  int const q_ld_row = Cfg::ldsm_rows_first_row(lane);
  int const q_ld_chunk = Cfg::ldsm_rows_first_chunk(lane);
  int const k_ld_row = Cfg::ldsm_chunks_first_row(lane);
  int const k_ld_chunk = Cfg::ldsm_chunks_first_chunk(lane);
  float o[Tile::kDTiles][4] = {};  // O[heads, D] per n8 slice of D
  float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.f, 0.f};  // heads acc_head[0, 2]
  for (int t = 0; t < tiles; ++t) {
    cp_async_wait<kStages - 2>();  // tile t has landed (this lane's copies) ...
    __syncwarp();                  // ... and every lane's; the stage of tile t - 1 is free
    // Past the warp's last tile there is nothing to issue, only an empty group to commit (the
    // wait above counts groups). At a small batch a warp has a tile or two, and issue's mask
    // classification would sit between the tile's landing and its math.
    if (t + kStages - 1 < tiles) {
      issue(t + kStages - 1, bits);
      load_bias(t + kStages, bits);  // converted at the next iteration's issue
    } else {
      cp_async_fence();
    }

    int const stage = t % kStages;
    uint32_t const rows = rows_copied_s[warp][stage];
    if (rows == 0) continue;  // no head takes a row of the tile
    T const* const k_tile = ring + stage * Tile::kStageElems;
    T const* const v_tile = k_tile + Tile::kTileElems;

    // S = Q K^T over D: n8 tile n covers the tile's rows 8n .. 8n + 7.
    float s[2][4] = {};
    CG_PRAGMA_UNROLL
    for (int ks = 0; ks < Tile::kKSteps; ++ks) {
      uint32_t a[4], kb[4];
      SM75_U32x4_LDSM_N::copy(as_chunk(q_s + smem_rows(q_ld_row, (2 * ks + q_ld_chunk) * 8)),
                              a[0], a[1], a[2], a[3]);
      SM75_U32x4_LDSM_N::copy(as_chunk(k_tile + smem_rows(k_ld_row, (2 * ks + k_ld_chunk) * 8)),
                              kb[0], kb[1], kb[2], kb[3]);
      CG_PRAGMA_UNROLL
      for (int n = 0; n < 2; ++n) {
        Mma::fma(s[n][0], s[n][1], s[n][2], s[n][3], a[0], a[1], a[2], a[3], kb[2 * n],
                 kb[2 * n + 1], s[n][0], s[n][1], s[n][2], s[n][3]);
      }
    }

    // Scale and mask (log2 units); -inf where a row is not taken by the head. A mask per head
    // is read here: every value's load issued before any is converted.
    int const row0 = tile_row(t);
    float bias_s[2][4];
    CG_PRAGMA_UNROLL
    for (int n = 0; n < 2; ++n) {
      CG_PRAGMA_UNROLL
      for (int c = 0; c < 4; ++c) bias_s[n][c] = row_bias_s[warp][stage][8 * n + acc_col[c]];
    }
    if constexpr (per_head) {
      uint32_t head_bits[2][4];
      CG_PRAGMA_UNROLL
      for (int n = 0; n < 2; ++n) {
        CG_PRAGMA_UNROLL
        for (int c = 0; c < 4; ++c) {
          head_bits[n][c] = 0;
          if (bias_s[n][c] != -INFINITY && acc_head[c] < heads) {
            head_bits[n][c] =
                mask_bits(p, mask_at(p, b, head0 + acc_head[c], i, row0 + 8 * n + acc_col[c]));
          }
        }
      }
      CG_PRAGMA_UNROLL
      for (int n = 0; n < 2; ++n) {
        CG_PRAGMA_UNROLL
        for (int c = 0; c < 4; ++c) {
          if (bias_s[n][c] == -INFINITY) continue;
          bias_s[n][c] = acc_head[c] < heads ? mask_log2(p.mask_kind, head_bits[n][c]) : -INFINITY;
        }
      }
    }
    CG_PRAGMA_UNROLL
    for (int n = 0; n < 2; ++n) {
      CG_PRAGMA_UNROLL
      for (int c = 0; c < 4; ++c) {
        s[n][c] = bias_s[n][c] == -INFINITY ? -INFINITY : s[n][c] * p.scale_log2 + bias_s[n][c];
      }
    }

    // Online softmax per head: the tile's max over the 4 lanes that share the head, the rescale
    // of what came before, the probabilities in place of the scores.
    float rescale[2];
    // O changes under the rescale only where it holds something: a head whose max was -inf has
    // O = 0 (its earlier probabilities were all 0), so a warp's first tile skips the multiply.
    bool rescale_o = false;
    CG_PRAGMA_UNROLL
    for (int hh = 0; hh < 2; ++hh) {
      float top = fmaxf(fmaxf(s[0][2 * hh], s[0][2 * hh + 1]),
                        fmaxf(s[1][2 * hh], s[1][2 * hh + 1]));
      top = fmaxf(top, __shfl_xor_sync(kFull, top, 1));
      top = fmaxf(top, __shfl_xor_sync(kFull, top, 2));
      float const new_max = fmaxf(row_max[hh], top);
      // Nothing taken part yet (new_max == -inf): no rescale, and every probability is 0.
      rescale[hh] = new_max == -INFINITY ? 1.f : exp2_approx_ftz(row_max[hh] - new_max);
      float sum = 0.f;
      CG_PRAGMA_UNROLL
      for (int n = 0; n < 2; ++n) {
        CG_PRAGMA_UNROLL
        for (int c = 2 * hh; c < 2 * hh + 2; ++c) {
          s[n][c] = s[n][c] == -INFINITY ? 0.f : exp2_approx_ftz(s[n][c] - new_max);
          sum += s[n][c];
        }
      }
      // The lane's share of the sum; the head's 4 lanes add theirs at the end.
      row_sum[hh] = row_sum[hh] * rescale[hh] + sum;
      rescale_o |= row_max[hh] != -INFINITY && rescale[hh] != 1.f;
      row_max[hh] = new_max;
    }
    if (__any_sync(kFull, rescale_o)) {
      CG_PRAGMA_UNROLL
      for (int nd = 0; nd < Tile::kDTiles; ++nd) {
        CG_PRAGMA_UNROLL
        for (int c = 0; c < 4; ++c) o[nd][c] *= rescale[c / 2];
      }
    }

    // O += P V: P's A fragment is S's accumulators in order (n8 tile, value pair).
    uint32_t const pa[4] = {HalfTraits<T>::pack2(s[0][0], s[0][1]),
                            HalfTraits<T>::pack2(s[0][2], s[0][3]),
                            HalfTraits<T>::pack2(s[1][0], s[1][1]),
                            HalfTraits<T>::pack2(s[1][2], s[1][3])};
    CG_PRAGMA_UNROLL
    for (int j = 0; j < Tile::kKSteps; ++j) {
      uint32_t vb[4];
      SM75_U16x8_LDSM_T::copy(as_chunk(v_tile + smem_rows(q_ld_row, (2 * j + q_ld_chunk) * 8)),
                              vb[0], vb[1], vb[2], vb[3]);
      CG_PRAGMA_UNROLL
      for (int n = 0; n < 2; ++n) {
        float(&acc)[4] = o[2 * j + n];
        Mma::fma(acc[0], acc[1], acc[2], acc[3], pa[0], pa[1], pa[2], pa[3], vb[2 * n],
                 vb[2 * n + 1], acc[0], acc[1], acc[2], acc[3]);
      }
    }
  }

  // ---- the warps' partial results: max and sum per head, the unnormalized output (in the rings'
  // place once every copy has landed and every warp is done with its ring).
  CG_PRAGMA_UNROLL
  for (int hh = 0; hh < 2; ++hh) {
    row_sum[hh] += __shfl_xor_sync(kFull, row_sum[hh], 1);
    row_sum[hh] += __shfl_xor_sync(kFull, row_sum[hh], 2);
  }
  cp_async_wait<0>();
  if (!p.early_dependents) grid_launch_dependents();  // every copy of this thread has landed
  __syncthreads();
  // Several splits: this CTA is done with its queries and rings (every copy landed, every value
  // read from them used), where the cluster's CTAs push their results (Tile::kCombine*); relaxed,
  // as no write of this CTA needs to be ordered before their pushes.
  if (p.splits > 1) cluster_arrive_relaxed();
  float* const partial = reinterpret_cast<float*>(rings);
  CG_PRAGMA_UNROLL
  for (int nd = 0; nd < Tile::kDTiles; ++nd) {
    if (nd * 8 >= dim) break;
    CG_PRAGMA_UNROLL
    for (int c = 0; c < 4; c += 2) {
      *reinterpret_cast<float2*>(
          &partial[Tile::partial_index(warp, acc_head[c], nd * 8 + acc_col[c])]) =
          make_float2(o[nd][c], o[nd][c + 1]);
    }
  }
  if (lane % 4 == 0) {
    CG_PRAGMA_UNROLL
    for (int hh = 0; hh < 2; ++hh) {
      max_s[warp][acc_head[2 * hh]] = row_max[hh];
      sum_s[warp][acc_head[2 * hh]] = row_sum[hh];
    }
  }

  __syncthreads();

  // ---- the warps' results meet in the CTA: per head, the warps' weights against their common
  // max (thread g for head g, into weight_s in place of max_s), the CTA's max and sum; then per
  // element, the warps' outputs weighted. One split: that is the output (divided by the sum).
  // Several: the CTA pushes its max and sum per head to every CTA of the cluster and each
  // element's output (unnormalized) to the element's owner (Cfg::combine_*, st.async counted on
  // the owner's combine_bar), once every CTA has left its positions (the cluster barrier).
  __shared__ float cta_max_s[kHeads], cta_sum_s[kHeads];
  float(&weight_s)[kWarps][kHeads] = max_s;  // after the per-head pass: the warps' weights
  if (tid < heads) {
    int const g = tid;
    float top = -INFINITY;
    CG_PRAGMA_UNROLL
    for (int w = 0; w < kWarps; ++w) top = fmaxf(top, max_s[w][g]);
    float sum = 0.f;
    CG_PRAGMA_UNROLL
    for (int w = 0; w < kWarps; ++w) {
      // 0 where the warp took nothing, and for every warp where the CTA took nothing.
      float const weight = top == -INFINITY ? 0.f : exp2_approx_ftz(max_s[w][g] - top);
      sum += weight * sum_s[w][g];
      weight_s[w][g] = weight;  // only this thread reads head g's max_s
    }
    cta_max_s[g] = top;
    cta_sum_s[g] = sum;
  }
  __syncthreads();
  T* const out = static_cast<T*>(p.out) + ((int64_t(b) * p.q_len + i) * p.heads + head0) * dim;
  int const total = heads * dim;  // the outputs of the CTA's heads
  // The CTA's unnormalized output of head g, element d: the warps' outputs weighted.
  auto cta_output = [&](int g, int d) {
    float acc = 0.f;
    CG_PRAGMA_UNROLL
    for (int w = 0; w < kWarps; ++w) acc += weight_s[w][g] * partial[Tile::partial_index(w, g, d)];
    return acc;
  };
  if (p.splits == 1) {
    for (int g = 0; g < heads; ++g) {
      for (int d = tid; d < dim; d += Cfg::kThreads) {
        out[int64_t(g) * dim + d] =
            HalfTraits<T>::from_float(normalized_output(cta_output(g, d), cta_sum_s[g]));
      }
    }
    return;
  }

#if defined(CG_ARCH_SM90_ENABLED)
  namespace cg = cooperative_groups;
  int const rank = int(cg::this_cluster().block_rank());
  int const slots = Cfg::combine_slots(total, p.splits);
  uint32_t const smem_addr = detail::smem_addr(smem_raw);
  uint32_t const bar_addr = detail::smem_addr(&combine_bar);
  // (max, sum) of head g from split s, and split s's output of slot j of thread t, as byte
  // offsets of this CTA's shared memory (and, mapped, of every other's).
  auto stats_at = [&](int s, int g) {
    return smem_addr + uint32_t(Tile::kCombineStatsOffset + 4 * Cfg::combine_stats_index(s, g));
  };
  auto out_at = [&](int s, int j, int t) {
    return smem_addr +
           uint32_t(Tile::kCombineOutOffset + 4 * Cfg::combine_out_index(s, j, t, slots));
  };
  cluster_wait();  // every CTA is done with its positions and has initialized its combine_bar
  if (tid < heads) {
    uint32_t const max_bits = __float_as_uint(cta_max_s[tid]);
    uint32_t const sum_bits = __float_as_uint(cta_sum_s[tid]);
    CG_PRAGMA_NO_UNROLL
    for (int q = 0; q < p.splits; ++q) {
      st_async_v2_b32(map_shared_rank(stats_at(rank, tid), uint32_t(q)), max_bits, sum_bits,
                      map_shared_rank(bar_addr, uint32_t(q)));
    }
  }
  // Element e = k kThreads + tid (block k): owner k % splits, slot k / splits, its thread tid.
  CG_PRAGMA_NO_UNROLL
  for (int k = 0; k * Cfg::kThreads + tid < total; ++k) {
    int const e = k * Cfg::kThreads + tid;
    uint32_t const owner = uint32_t(k % p.splits);
    st_async_b32(map_shared_rank(out_at(rank, k / p.splits, tid), owner),
                 __float_as_uint(cta_output(e / dim, e % dim)), map_shared_rank(bar_addr, owner));
  }
  // What this CTA receives: every split's stats of each head and output of each element it owns.
  if (tid == 0) {
    mbarrier_arrive_expect_tx(
        &combine_bar,
        uint32_t(p.splits * (8 * heads + 4 * Cfg::combine_owned(total, p.splits, rank))));
  }
  mbarrier_wait_parity_suspend(&combine_bar, 0);

  // ---- the splits' results meet: the elements this CTA owns, from what every split pushed.
  float const* const stats = reinterpret_cast<float const*>(
      reinterpret_cast<char const*>(smem_raw) + Tile::kCombineStatsOffset);
  float const* const outs = reinterpret_cast<float const*>(
      reinterpret_cast<char const*>(smem_raw) + Tile::kCombineOutOffset);
  for (int j = 0; j < slots; ++j) {
    int const e = (j * p.splits + rank) * Cfg::kThreads + tid;
    if (e >= total) break;
    int const g = e / dim, d = e % dim;
    float split_max[Cfg::kMaxSplits], split_sum[Cfg::kMaxSplits], split_out[Cfg::kMaxSplits];
    CG_PRAGMA_UNROLL
    for (int s = 0; s < Cfg::kMaxSplits; ++s) {
      split_max[s] = -INFINITY;
      split_sum[s] = split_out[s] = 0.f;
      if (s < p.splits) {
        split_max[s] = stats[Cfg::combine_stats_index(s, g)];
        split_sum[s] = stats[Cfg::combine_stats_index(s, g) + 1];
        split_out[s] = outs[Cfg::combine_out_index(s, j, tid, slots)];
      }
    }
    float top = -INFINITY;
    CG_PRAGMA_UNROLL
    for (int s = 0; s < Cfg::kMaxSplits; ++s) top = fmaxf(top, split_max[s]);
    float acc = 0.f, sum = 0.f;
    if (top != -INFINITY) {
      CG_PRAGMA_UNROLL
      for (int s = 0; s < Cfg::kMaxSplits; ++s) {
        float const weight = exp2_approx_ftz(split_max[s] - top);  // 0 where the split took nothing
        sum += weight * split_sum[s];
        acc += weight * split_out[s];
      }
    }
    out[int64_t(g) * dim + d] = HalfTraits<T>::from_float(normalized_output(acc, sum));
  }
  // Every byte pushed to this CTA has landed (combine_bar) and no CTA reads another's shared
  // memory: the CTAs leave without another cluster barrier.
#else
  __trap();  // the launcher splits only where there are clusters
#endif
}

// Launches the kernel for p (p.splits CTAs per cluster) on `stream` as a programmatic dependent
// of the kernel before it when `pdl`: the instance for p's mask (mask_per_head).
template <class T, int kDim, bool kPerHead>
cudaError_t launch_decode_attention_as(DecodeAttentionParams const& p, bool pdl,
                                       cudaStream_t stream) {
  using Cfg = DecodeAttentionConfig;
  using Tile = DecodeAttentionTile<kDim>;
  auto* const kernel = decode_attention_kernel<T, kDim, kPerHead>;
  // The shared memory attribute, set once per device; its error (if any) is what the launch
  // returns, every time.
  static int prepared[64] = {};
  cudaError_t const set = cudaError_t(cached_per_device(prepared, int(cudaErrorNoDevice), [](int) {
    cudaError_t const e = cudaFuncSetAttribute(decode_attention_kernel<T, kDim, kPerHead>,
                                               cudaFuncAttributeMaxDynamicSharedMemorySize,
                                               Tile::kSmemBytes);
    cudaGetLastError();  // returned below; not left for the caller's next check
    return int(e);
  }));
  if (set != cudaSuccess) return set;
  int const group = p.heads / p.kv_heads;
  cudaLaunchAttribute attr[2];
  int n = 0;
  if (pdl) {
    attr[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[n].val.programmaticStreamSerializationAllowed = 1;
    ++n;
  }
  if (p.splits > 1) {
    attr[n].id = cudaLaunchAttributeClusterDimension;
    attr[n].val.clusterDim.x = unsigned(p.splits);
    attr[n].val.clusterDim.y = 1;
    attr[n].val.clusterDim.z = 1;
    ++n;
  }
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(unsigned(p.splits), unsigned(p.kv_heads * Cfg::head_chunks(group)),
                        unsigned(p.batch * p.q_len));
  config.blockDim = dim3(Cfg::kThreads);
  config.dynamicSmemBytes = Tile::kSmemBytes;
  config.stream = stream;
  config.attrs = attr;
  config.numAttrs = n;
  return cudaLaunchKernelEx(&config, kernel, p);
}

template <class T, int kDim>
cudaError_t launch_decode_attention(DecodeAttentionParams const& p, bool pdl,
                                    cudaStream_t stream) {
  return mask_per_head(p) ? launch_decode_attention_as<T, kDim, true>(p, pdl, stream)
                          : launch_decode_attention_as<T, kDim, false>(p, pdl, stream);
}

// Whether this build's kernel for (T, kDim) can run in clusters on the current device (its code
// there is sm_90 or later); asked once per device.
template <class T, int kDim>
bool decode_attention_has_clusters() {
  static int cached[64] = {};
  return cached_per_device(cached, 0, [](int) {
    cudaFuncAttributes attr{};
    auto* const kernel = decode_attention_kernel<T, kDim, false>;  // as the other's
    if (cudaFuncGetAttributes(&attr, kernel) != cudaSuccess) return -1;
    return attr.binaryVersion >= 90 ? 1 : 0;
  }) == 1;
}

}  // namespace attention
}  // namespace cute_gemm
