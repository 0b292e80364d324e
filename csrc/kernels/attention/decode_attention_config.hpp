#pragma once
// Configuration of the decode attention kernel (decode_attention_kernel.cuh): its parameters, the
// layouts and lane maps it indexes through and the split rule, in a header free of CUDA, so that
// the op (plain C++) sizes launches with it and tests/cpp/test_decode_attention_maps.cpp checks
// the maps on the host.
//
//   out[b, i, h, :] = softmax_j(scale * q[b, h, i, :] . k[b, h / G, j, :] + mask[b, h, i, j])
//                     @ v[b, h / G, :, :]
//
// for G = heads / kv_heads query heads per key/value head (grouped-query attention). The keys and
// values are read where they lie, e.g. a transformers static cache [B, kv_heads, L, D]: no copy
// expands them to the query heads, and a CTA reads each key and value row once for all the query
// heads of its group that it serves.
//
// Words: a row is one key or value position (a D-element vector); a tile is the kTileRows rows a
// warp takes at once; a chunk is 16 bytes (kVec elements) of a row.
//
// Tensor cores (mma.sync m16n8k16, fp32 accumulators), the heads as the mma's M:
//   S[heads, rows] = Q[heads, D] K[rows, D]^T     A = Q (ldmatrix), B = K (ldmatrix)
//   O[heads, D]   += P[heads, rows] V[rows, D]     A = P (S's accumulators), B = V (ldmatrix.trans)
// S's accumulators of two n8 tiles are P's A fragment in register order (the host test checks
// it), so the probabilities never leave the registers.

#include <cstdint>

#include "cute_gemm/composed_layout.hpp"
#include "cute_gemm/config.hpp"
#include "cute_gemm/mma_traits_sm80.hpp"
#include "cute_gemm/tv_coords.hpp"
#include "kernels/gemm/gemm_config.hpp"  // log2_of

namespace cute_gemm {
namespace attention {

// How the kernel reads mask[b, h, i, j] (the op converts nothing: the mask is read where it lies).
enum class MaskKind : int {
  kNone = 0,      // every position takes part
  kBool = 1,      // torch.bool: True takes part (torch's scaled_dot_product_attention convention)
  kFloat16 = 2,   // additive, -inf excludes a position
  kBFloat16 = 3,  // additive
  kFloat32 = 4,   // additive
};

struct DecodeAttentionParams {
  void const* q = nullptr;     // [B, heads, Lq, D], any strides, elements of the dtype
  void const* k = nullptr;     // [B, kv_heads, L, D], rows 16-byte aligned, d stride 1
  void const* v = nullptr;     // as k
  void const* mask = nullptr;  // [B, heads, Lq, L] as strides (0 where broadcast), or nullptr
  void* out = nullptr;         // [B, Lq, heads, D], contiguous
  int batch = 0, q_len = 0, kv_len = 0, heads = 0, kv_heads = 0, head_dim = 0;
  int64_t q_stride[3] = {};     // b, h, i (d's stride is 1)
  int64_t k_stride[3] = {};     // b, h, j
  int64_t v_stride[3] = {};     // b, h, j
  int64_t mask_stride[4] = {};  // b, h, i, j
  MaskKind mask_kind = MaskKind::kNone;
  float scale_log2 = 0.f;  // the softmax scale times log2(e): the kernel's exponentials are exp2
  int splits = 1;          // CTAs that share one (b, i, head chunk)'s positions: the cluster size
  // Where the kernel lets the next kernel launch (programmatic dependent launch): at its start
  // (true), or once its positions are done (decode_attention_early_dependents).
  bool early_dependents = true;
};

// Whether the mask differs between query heads (its head stride is not 0): the kernel instance
// that reads a mask value per head and row; the other reads one per row.
CG_HOST_DEVICE bool mask_per_head(DecodeAttentionParams const& p) {
  return p.mask_kind != MaskKind::kNone && p.mask_stride[1] != 0;
}

struct DecodeAttentionConfig {
  static constexpr int kWarps = 4;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kVec = 8;           // 16-bit elements per 16-byte chunk of a row
  static constexpr int kMaxHeadDim = 256;  // the largest instance
  static constexpr int kMaxHeads = 16;     // query heads per CTA: the mma's M
  static constexpr int kTileRows = 16;     // rows per tile: S's two n8 tiles, P V's k16
  // Tiles in a warp's cp.async ring: two in flight while the warp computes the third.
  static constexpr int kStages = 3;
  static constexpr int kMaxSplits = 8;                      // the portable cluster size
  static constexpr int kMinSplitRows = kWarps * kTileRows;  // no split shorter than a tile a warp
  // A split at least this long under one mask for every head first finds its last row that takes
  // part (the CTA reads the split's mask values at once) and skips the tiles past it. Shorter
  // splits (under 8 tiles a warp) skip tile by tile: the scan's memory latency would cost about
  // what it saves.
  static constexpr int kScanMinRows = 8 * kWarps * kTileRows;

  // The instance for a head dim (a multiple of 8 up to 256): the smallest of 64, 128 and 256 that
  // holds it. Chunks past D are zero-filled in shared memory, so the k-steps past D add zeros:
  // the loops run the class's whole D without a branch per step.
  CG_HOST_DEVICE static constexpr int head_dim_class(int head_dim) {
    return head_dim <= 64 ? 64 : head_dim <= 128 ? 128 : 256;
  }
  // Query-head chunks per key/value head: a CTA serves at most kMaxHeads of a group.
  CG_HOST_DEVICE static constexpr int head_chunks(int group) {
    return (group + kMaxHeads - 1) / kMaxHeads;
  }
  // Positions [split * split_rows, min(L, (split + 1) * split_rows)) of a split.
  CG_HOST_DEVICE static constexpr int split_rows(int kv_len, int splits) {
    return (kv_len + splits - 1) / splits;
  }
  // Tiles of a split of `rows` positions that warp w takes: w, w + kWarps, ...
  CG_HOST_DEVICE static constexpr int warp_tiles(int rows, int warp) {
    const int tiles = (rows + kTileRows - 1) / kTileRows;
    return tiles > warp ? (tiles - warp + kWarps - 1) / kWarps : 0;
  }
  // The tiles of the busiest warp (warp 0 of split 0) where L positions are split `splits` ways:
  // a split's latency follows them (~0.7 us a tile at batch 1, ~1.3 at batch 16 on an H200).
  CG_HOST_DEVICE static constexpr int warp_depth(int kv_len, int splits) {
    return warp_tiles(split_rows(kv_len, splits), 0);
  }

  // The mask values a lane reads for a tile before its rows are copied: row lane % 16 of the
  // tile; with a mask per head, heads lane / 16 + 2 h for h < kBiasHeadsPerLane (the 16 heads
  // over the two half-warps); with one mask for every head, one value (h = 0).
  static constexpr int kBiasHeadsPerLane = kMaxHeads / 2;
  CG_HOST_DEVICE static constexpr int bias_row(int lane) { return lane % kTileRows; }
  CG_HOST_DEVICE static constexpr int bias_head(int lane, int h) { return lane / 16 + 2 * h; }

  // ldmatrix.x4 row addresses over a 16 x 16 block of 16-bit elements, lane -> (row, chunk);
  // lanes 8m .. 8m + 7 address matrix m, whose registers land in the lane's register m.
  //   A operand (Q: rows = heads, chunks = d) and B operand from rows (V through .trans:
  //   rows = positions, chunks = d): matrices (rows 0-7, c0), (8-15, c0), (0-7, c1), (8-15, c1).
  CG_HOST_DEVICE static constexpr int ldsm_rows_first_row(int lane) { return lane % 16; }
  CG_HOST_DEVICE static constexpr int ldsm_rows_first_chunk(int lane) { return lane / 16; }
  //   B operand from columns (K: rows = positions as n, chunks = d as k): matrices
  //   (rows 0-7, c0), (0-7, c1), (8-15, c0), (8-15, c1): n8 tile 0's b0 b1, then n8 tile 1's.
  CG_HOST_DEVICE static constexpr int ldsm_chunks_first_row(int lane) {
    return lane % 8 + 8 * (lane / 16);
  }
  CG_HOST_DEVICE static constexpr int ldsm_chunks_first_chunk(int lane) { return lane / 8 % 2; }

  // ---- The splits' combine (clusters, sm_90): the `total` = heads x D outputs of a (b, i, head
  // chunk) in blocks of kThreads, element e = k kThreads + t in block k; the CTA of cluster rank
  // r owns blocks r, r + splits, ...: block k is slot k / splits (< combine_slots) of rank
  // k % splits, element t of it thread t's. Every CTA pushes its unnormalized output of each
  // element to the element's owner, where split s's value of slot j, thread t lands at
  // combine_out_index(s, j, t), and its max and sum of every head to every CTA, where split s's
  // (max, sum) of head g are floats combine_stats_index(s, g) and the one after it.
  CG_HOST_DEVICE static constexpr int combine_stats_index(int split, int head) {
    return 2 * (split * kMaxHeads + head);
  }
  CG_HOST_DEVICE static constexpr int combine_slots(int total, int splits) {
    return (total + splits * kThreads - 1) / (splits * kThreads);
  }
  CG_HOST_DEVICE static constexpr int combine_out_index(int split, int slot, int thread,
                                                        int slots) {
    return (split * slots + slot) * kThreads + thread;
  }
  // How many elements rank r owns (the bytes its CTA expects from each split: 4 each).
  CG_HOST_DEVICE static constexpr int combine_owned(int total, int splits, int rank) {
    int owned = 0;
    for (int block = rank; block * kThreads < total; block += splits) {
      owned += total - block * kThreads < kThreads ? total - block * kThreads : kThreads;
    }
    return owned;
  }
  // The most output floats a CTA receives: over split counts 2..kMaxSplits at `total` outputs.
  CG_HOST_DEVICE static constexpr int combine_out_floats(int total) {
    int most = 0;
    for (int splits = 2; splits <= kMaxSplits; ++splits) {
      const int floats = splits * combine_slots(total, splits) * kThreads;
      most = floats > most ? floats : most;
    }
    return most;
  }
};

// The layouts of one head-dim instance.
template <int kDim>
struct DecodeAttentionTile {
  using Cfg = DecodeAttentionConfig;
  static_assert(kDim == 64 || kDim == 128 || kDim == 256, "head dim classes 64, 128, 256");
  static constexpr int kChunks = kDim / Cfg::kVec;        // chunks per row
  static constexpr int kKSteps = kDim / 16;               // k16 steps of Q K^T over D
  static constexpr int kDTiles = kDim / 8;                // n8 tiles of P V over D
  static constexpr int kTileElems = Cfg::kTileRows * kDim;
  static constexpr int kCopiesPerLane = kTileElems / Cfg::kVec / 32;  // per tile, keys or values
  // A lane's copies of a tile (keys or values alike): copy c is row copy_row(lane, c), elements
  // [copy_d(lane), + kVec): the chunks lane + 32 c in row order, so a lane keeps one column of
  // chunks and steps kCopyRowStep rows per copy (one pointer advanced by a stride).
  static_assert(32 % kChunks == 0, "a warp's 32 chunks are whole rows");
  static constexpr int kCopyRowStep = 32 / kChunks;
  CG_HOST_DEVICE static constexpr int copy_row(int lane, int c) {
    return lane / kChunks + c * kCopyRowStep;
  }
  CG_HOST_DEVICE static constexpr int copy_d(int lane) { return lane % kChunks * Cfg::kVec; }
  static_assert(Cfg::kMaxHeads == Cfg::kTileRows, "Q's block has a tile's shape");

  // (row, d) -> element of a 16-row block in shared memory (a warp's key or value tile, and the
  // CTA's queries): d contiguous, the chunk index XORed with row % 8, so the 8 rows one ldmatrix
  // matrix reads (one logical chunk) lie in 8 different 16-byte bank groups.
  using SmemRows = decltype(composition(
      Swizzle<3, 3, log2_of(kDim) - 3>{},
      make_layout(make_shape(Int<Cfg::kTileRows>{}, Int<kDim>{}), make_stride(Int<kDim>{}, _1{}))));

  // A warp's stage: its key tile, then its value tile.
  static constexpr int kStageElems = 2 * kTileElems;
  // Dynamic shared memory: the queries, then each warp's ring of kStages stages.
  static constexpr int kQueryBytes = kTileElems * 2;
  static constexpr int kRingBytes = Cfg::kWarps * Cfg::kStages * kStageElems * 2;
  static constexpr int kSmemBytes = kQueryBytes + kRingBytes;

  // After the positions, each warp's unnormalized output [warp][head][d] in fp32 takes the rings'
  // place; a row of kDim + 4 floats, so the 8 heads of one accumulator register land in 8 banks.
  static constexpr int kPartialRow = kDim + 4;
  CG_HOST_DEVICE static constexpr int partial_index(int warp, int head, int d) {
    return (warp * Cfg::kMaxHeads + head) * kPartialRow + d;
  }
  static_assert(Cfg::kWarps * Cfg::kMaxHeads * kPartialRow * 4 <= kRingBytes,
                "the partial outputs fit the rings");

  // What a CTA receives from the splits of its cluster (Cfg::combine_*), in shared memory its
  // positions no longer use: every split's (max, sum) of each head as float2 [split][head] in the
  // queries' place, the output values after the partial outputs in the rings.
  static constexpr int kCombineStatsOffset = 0;
  static constexpr int kCombineOutOffset =
      kQueryBytes + Cfg::kWarps * Cfg::kMaxHeads * kPartialRow * 4;
  static_assert(kCombineStatsOffset + 4 * Cfg::combine_stats_index(Cfg::kMaxSplits, 0) <=
                    kQueryBytes,
                "the splits' max and sum per head fit the queries' place");
  static_assert(kCombineOutOffset + 4 * Cfg::combine_out_floats(Cfg::kMaxHeads * kDim) <=
                    kSmemBytes,
                "the splits' outputs fit the rings after the partial outputs");
};

// The m16n8k16 accumulator of one n8 tile: (T32, V4) -> head (M) and column (N). For S the column
// is a position of the tile's n8 half, for O an element of the n8 slice of D.
using AccHeadTV = decltype(tile_row_layout<16>(MMA_Traits_16x8x16_Layouts::CLayout{}));
using AccColTV = decltype(tile_col_layout<16>(MMA_Traits_16x8x16_Layouts::CLayout{}));

// CTAs per (b, i, head chunk): enough to give every SM a CTA where the grid is small (batch 1
// decode has kv_heads CTAs), at most a cluster's kMaxSplits, and no more than the pieces of
// kMinSplitRows positions (a tile per warp) that L makes: a split's latency is its tiles, and a
// split of a few rows would cost its share of the combine for nothing. Then the fewest splits
// that leave the busiest warp as few tiles: a split that does not shorten it costs its share of
// the cluster's combine and a CTA more on some SMs for nothing (H200, bf16, 8 sequences of 32 /
// 8 heads at 256 positions, 48-229 of them valid: 2 splits 4.4-6.3 us against 3 splits'
// 5.0-7.2, whose warps take 2 tiles either way; NOTES.md session 71). 1 where the device or the
// build has no thread block clusters (sm_80).
inline int decode_attention_splits(int64_t ctas, int kv_len, int sm_count, bool clusters) {
  using Cfg = DecodeAttentionConfig;
  if (!clusters || ctas <= 0 || kv_len <= 0) return 1;
  int64_t splits = (sm_count + ctas - 1) / ctas;
  const int64_t by_rows = (kv_len + Cfg::kMinSplitRows - 1) / Cfg::kMinSplitRows;
  if (splits > by_rows) splits = by_rows;
  if (splits > Cfg::kMaxSplits) splits = Cfg::kMaxSplits;
  int chosen = splits < 1 ? 1 : int(splits);
  while (chosen > 1 && Cfg::warp_depth(kv_len, chosen - 1) == Cfg::warp_depth(kv_len, chosen)) {
    --chosen;
  }
  return chosen;
}

// Whether a grid of `ctas` CTAs (splits included) lets the next kernel launch at its start. The
// next kernel is the output projection's GEMM, which streams its weights before its own wait. A
// grid on at most half the SMs leaves the others idle, and the GEMM's weight stream there costs
// the attention nothing (batch 1: 32 CTAs for a few tiles each, latency-bound). A larger grid
// streams the cache with most of the SMs (batch 16: 256 CTAs reading ~15 MB), and the GEMM's
// stream would compete with it for DRAM: it lets the GEMM launch once its positions are done.
inline bool decode_attention_early_dependents(int64_t ctas, int sm_count) {
  return 2 * ctas <= sm_count;
}

}  // namespace attention
}  // namespace cute_gemm
