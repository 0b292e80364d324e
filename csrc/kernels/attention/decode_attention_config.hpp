#pragma once
// Configuration of the decode attention kernel (decode_attention_kernel.cuh): its parameters, the
// thread maps it indexes through and the split rule, in a header free of CUDA, so that the op
// (plain C++) sizes launches with it and tests/cpp/test_decode_attention_maps.cpp checks the maps
// on the host.
//
//   out[b, i, h, :] = softmax_j(scale * q[b, h, i, :] . k[b, h / G, j, :] + mask[b, h, i, j])
//                     @ v[b, h / G, :, :]
//
// for G = heads / kv_heads query heads per key/value head (grouped-query attention). The keys and
// values are read where they lie, e.g. a transformers static cache [B, kv_heads, L, D]: no copy
// expands them to the query heads, and a CTA reads each key and value row once for all the query
// heads of its group that it serves.
//
// Words: a row is one key or value position (a D-element vector); a team is the lanes of a warp
// that share one row, each holding kVec of its elements; a slice is the rows one team walks.

#include <cstdint>

#include "cute_gemm/config.hpp"

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
};

struct DecodeAttentionConfig {
  static constexpr int kThreads = 256;
  static constexpr int kVec = 8;             // elements per 16-byte load of a row
  static constexpr int kMaxHeadDim = 256;    // 32 lanes x kVec: a team is at most a warp
  static constexpr int kMinTeam = 4;         // narrower teams would make tiles past kMaxTile
  static constexpr int kMaxHeads = 8;        // query heads per CTA; a larger group takes chunks
  static constexpr int kRowsPerThread = 4;   // rows a thread holds per tile (and prefetches)
  static constexpr int kMaxSplits = 8;       // the portable cluster size
  static constexpr int kMinSplitRows = 64;   // no more splits than pieces of this many positions
  // The slices' sums meet in shared memory kReduceHeads heads at a time: kThreads * kVec floats
  // per head whatever the team width (slices * team == kThreads).
  static constexpr int kReduceHeads = 4;
  static constexpr int kReduceFloats = kThreads * kVec * kReduceHeads;

  // Lanes per row: the power of two >= D / kVec (kMinTeam..32), so that a team's shuffles stay
  // in its warp; lanes past D / kVec hold no elements.
  CG_HOST_DEVICE static constexpr int team_lanes(int head_dim) {
    int lanes = kMinTeam;
    while (lanes * kVec < head_dim) lanes *= 2;
    return lanes;
  }
  // Rows the CTA works on at once: one per team.
  CG_HOST_DEVICE static constexpr int slices(int head_dim) {
    return kThreads / team_lanes(head_dim);
  }
  // Positions per tile of the online softmax: kRowsPerThread rows per slice (64 at D = 128).
  CG_HOST_DEVICE static constexpr int tile_rows(int head_dim) {
    return kRowsPerThread * slices(head_dim);
  }
  static constexpr int kMaxTile = kRowsPerThread * kThreads / kMinTeam;
  // Thread t -> (chunk, slice): its kVec elements [chunk * kVec, chunk * kVec + kVec) of the rows
  // slice + r * slices (r < kRowsPerThread) of a tile; (T256) -> (team lane T % team, slice
  // T / team), the same map for the keys (q . k) and the values (p @ v).
  CG_HOST_DEVICE static constexpr int thread_chunk(int t, int head_dim) {
    return t % team_lanes(head_dim);
  }
  CG_HOST_DEVICE static constexpr int thread_slice(int t, int head_dim) {
    return t / team_lanes(head_dim);
  }
  // Where the partial sum of (slice, head h of a reduce pass, element d) lies in the reduce
  // buffer: a row of team * kVec >= D elements per (slice, head).
  CG_HOST_DEVICE static constexpr int reduce_index(int slice, int head, int d, int head_dim) {
    return (slice * kReduceHeads + head) * (team_lanes(head_dim) * kVec) + d;
  }
  // Query-head chunks per key/value head: a CTA serves at most kMaxHeads of a group.
  CG_HOST_DEVICE static constexpr int head_chunks(int group) {
    return (group + kMaxHeads - 1) / kMaxHeads;
  }
  // Positions [split * split_rows, min(L, (split + 1) * split_rows)) of a split.
  CG_HOST_DEVICE static constexpr int split_rows(int kv_len, int splits) {
    return (kv_len + splits - 1) / splits;
  }
};

// CTAs per (b, i, head chunk): enough to give every SM a CTA where the grid is small (batch 1
// decode has kv_heads CTAs), at most a cluster's kMaxSplits, and no more than the pieces of
// kMinSplitRows positions (one tile each) that L makes: a split's latency is its tiles, and a
// split of a few rows would cost its share of the combine for nothing. 1 where the device or the
// build has no thread block clusters (sm_80).
inline int decode_attention_splits(int64_t ctas, int kv_len, int sm_count, bool clusters) {
  using Cfg = DecodeAttentionConfig;
  if (!clusters || ctas <= 0 || kv_len <= 0) return 1;
  int64_t splits = (sm_count + ctas - 1) / ctas;
  const int64_t by_rows = (kv_len + Cfg::kMinSplitRows - 1) / Cfg::kMinSplitRows;
  if (splits > by_rows) splits = by_rows;
  if (splits > Cfg::kMaxSplits) splits = Cfg::kMaxSplits;
  return splits < 1 ? 1 : int(splits);
}

}  // namespace attention
}  // namespace cute_gemm
