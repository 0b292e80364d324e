#pragma once
// Attention for decode: a few query positions against a long key/value cache, grouped-query heads,
// an optional boolean or additive mask (decode_attention_config.hpp states the contract).
//   - A CTA serves one (batch b, query position i, key/value head, chunk of up to kMaxHeads of its
//     query heads) and a share of the positions. It reads each key and value row once for all its
//     query heads: the cache is never expanded to the query heads (transformers' repeat_kv copies
//     it, G times its size, at every layer).
//   - Positions go by tiles (64 rows at D = 128) with an online softmax (running max and sum per
//     head, the sums rescaled when the max grows). Rows whose mask excludes every head of the CTA
//     are not read, and tiles of such rows are not computed: the unfilled tail of a static cache
//     costs its mask bytes only.
//   - Each thread holds kRowsPerThread key and value rows of a tile in registers (kVec elements
//     of each, one 16-byte load), and loads the next tile's while it computes this one: every
//     load of a tile is in flight at once, and the loads overlap the arithmetic. The mask of a
//     tile is read one tile earlier still, since it decides which rows are loaded.
//   - Scores: a team of lanes holds a row; shuffles within the team add the dot products with the
//     scaled query heads (shared memory). Sums: the same thread map over the value rows; the
//     slices' partial sums meet in shared memory.
//   - On sm_90 the positions of one (b, i, head chunk) are split over a thread block cluster of
//     `splits` CTAs; their partial results (max, sum, unnormalized output) meet through
//     distributed shared memory, so a small batch fills the GPU without a workspace or a second
//     kernel. Elsewhere splits is 1.
//   - fp32 scores, softmax and sums; the output is rounded once. Programmatic dependent launch:
//     the kernel waits for the previous kernel before its first read and lets the next one (the
//     output projection's GEMM, which streams its weights before its own wait) start at once.

#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "cute_gemm/arch/config_arch.hpp"
#include "cute_gemm/arch/grid_dependency_sm90.hpp"
#include "kernels/attention/decode_attention_config.hpp"
#include "kernels/device_info.hpp"
#include "kernels/half_traits.cuh"

namespace cute_gemm {
namespace attention {

// The kVec elements of a 16-byte load as floats.
template <class T>
CG_DEVICE void unpack_row_chunk(uint4 raw, float (&x)[DecodeAttentionConfig::kVec]) {
  T const* e = reinterpret_cast<T const*>(&raw);
  CG_PRAGMA_UNROLL
  for (int v = 0; v < DecodeAttentionConfig::kVec; ++v) x[v] = HalfTraits<T>::to_float(e[v]);
}

// The mask's contribution to a score, in log2 units: 0 (takes part), -inf (excluded) or an
// additive value times log2(e).
CG_DEVICE float mask_log2(DecodeAttentionParams const& p, int b, int h, int i, int j) {
  if (p.mask_kind == MaskKind::kNone) return 0.f;
  int64_t const at = b * p.mask_stride[0] + h * p.mask_stride[1] + i * p.mask_stride[2] +
                     j * p.mask_stride[3];
  constexpr float kLog2e = 1.4426950408889634f;
  switch (p.mask_kind) {
    case MaskKind::kBool:
      return static_cast<uint8_t const*>(p.mask)[at] ? 0.f : -INFINITY;
    case MaskKind::kFloat16:
      return __half2float(static_cast<__half const*>(p.mask)[at]) * kLog2e;
    case MaskKind::kBFloat16:
      return __bfloat162float(static_cast<__nv_bfloat16 const*>(p.mask)[at]) * kLog2e;
    default:
      return static_cast<float const*>(p.mask)[at] * kLog2e;
  }
}

// The mask's contribution to row r for the CTA: per row when the mask is the same for its heads;
// with a mask per head, the largest over them (-inf: no head takes the row, which is not read).
CG_DEVICE float row_bias(DecodeAttentionParams const& p, bool per_head, int b, int head0,
                         int heads, int i, int r) {
  if (!per_head) return mask_log2(p, b, head0, i, r);
  float best = -INFINITY;
  for (int g = 0; g < heads; ++g) best = fmaxf(best, mask_log2(p, b, head0 + g, i, r));
  return best;
}

// grid: (splits, kv_heads * head_chunks(G), B * Lq), 256 threads; with splits > 1 launched as
// clusters of (splits, 1, 1).
template <class T>
__global__ void __launch_bounds__(DecodeAttentionConfig::kThreads, 1)
    decode_attention_kernel(DecodeAttentionParams p) {
  using Cfg = DecodeAttentionConfig;
  constexpr int kVec = Cfg::kVec, kMaxHeads = Cfg::kMaxHeads, kRows = Cfg::kRowsPerThread;
  constexpr int kMaxTile = Cfg::kMaxTile;
  static_assert(kMaxHeads * kMaxTile <= Cfg::kReduceFloats, "the scores fit the reduce buffer");
  static_assert(kMaxHeads <= Cfg::kThreads / 32, "a warp per head in the softmax");

  // The query heads times scale * log2(e); after the positions, the CTA's unnormalized output.
  __shared__ __align__(16) float q_s[kMaxHeads][Cfg::kMaxHeadDim];
  // A tile's scores, then probabilities ([head][kMaxTile]); after the positions, the slices'
  // sums (reduce_index).
  __shared__ __align__(16) float work_s[Cfg::kReduceFloats];
  __shared__ float max_s[kMaxHeads], sum_s[kMaxHeads], rescale_s[kMaxHeads];
  float* const p_s = work_s;

  int const tid = threadIdx.x;
  int const dim = p.head_dim, group = p.heads / p.kv_heads, chunks = Cfg::head_chunks(group);
  int const kv_head = blockIdx.y / chunks, chunk = blockIdx.y % chunks;
  int const b = blockIdx.z / p.q_len, i = blockIdx.z % p.q_len;
  int const head0 = kv_head * group + chunk * kMaxHeads;  // the CTA's first query head
  int const heads = min(kMaxHeads, group - chunk * kMaxHeads);
  int const per_split = Cfg::split_rows(p.kv_len, p.splits);
  int const row_begin = blockIdx.x * per_split, row_end = min(p.kv_len, row_begin + per_split);

  int const team = Cfg::team_lanes(dim), slices = Cfg::slices(dim);
  int const tile_rows = Cfg::tile_rows(dim);
  int const lane_chunk = Cfg::thread_chunk(tid, dim), slice = Cfg::thread_slice(tid, dim);
  bool const holds = lane_chunk * kVec < dim;  // lanes past D / kVec hold no elements
  bool const per_head = p.mask_kind != MaskKind::kNone && p.mask_stride[1] != 0;

  grid_dependency_wait();  // q, the cache and the mask come from the kernels before
  grid_launch_dependents();

  T const* k_rows = static_cast<T const*>(p.k) + b * p.k_stride[0] + kv_head * p.k_stride[1] +
                    lane_chunk * kVec;
  T const* v_rows = static_cast<T const*>(p.v) + b * p.v_stride[0] + kv_head * p.v_stride[1] +
                    lane_chunk * kVec;
  // The thread's rows of a tile: tile + slice + j * slices, j < kRows. Each tile's rows are
  // loaded while the tile before is computed, and each tile's mask one tile earlier still (the
  // mask decides which rows are read).
  auto load_bias = [&](int tile, float (&bias)[kRows]) {
    CG_PRAGMA_UNROLL
    for (int j = 0; j < kRows; ++j) {
      int const r = tile + slice + j * slices;
      bias[j] = r < row_end ? row_bias(p, per_head, b, head0, heads, i, r) : -INFINITY;
    }
  };
  auto load_rows = [&](int tile, float const (&bias)[kRows], uint4 (&k)[kRows],
                       uint4 (&v)[kRows]) {
    CG_PRAGMA_UNROLL
    for (int j = 0; j < kRows; ++j) {
      k[j] = v[j] = make_uint4(0, 0, 0, 0);
      if (holds && bias[j] != -INFINITY) {
        int64_t const r = tile + slice + j * slices;
        k[j] = *reinterpret_cast<uint4 const*>(k_rows + r * p.k_stride[2]);
        v[j] = *reinterpret_cast<uint4 const*>(v_rows + r * p.v_stride[2]);
      }
    }
  };

  // The first tile's mask and the queries are read side by side, then the first tile's rows.
  float bias[kRows], bias_next[kRows];
  uint4 k_next[kRows], v_next[kRows];
  load_bias(row_begin, bias);
  for (int e = tid; e < kMaxHeads * dim; e += Cfg::kThreads) {
    int const g = e / dim, d = e % dim;
    float x = 0.f;
    if (g < heads) {
      T const* q = static_cast<T const*>(p.q) + b * p.q_stride[0] + (head0 + g) * p.q_stride[1] +
                   i * p.q_stride[2];
      x = HalfTraits<T>::to_float(q[d]) * p.scale_log2;
    }
    q_s[g][d] = x;
  }
  if (tid < kMaxHeads) {
    max_s[tid] = -INFINITY;
    sum_s[tid] = 0.f;
  }

  load_rows(row_begin, bias, k_next, v_next);
  load_bias(row_begin + tile_rows, bias_next);
  __syncthreads();  // q_s

  float acc[kMaxHeads][kVec] = {};  // this thread's elements of sum_j p_j v_j, per head
  for (int tile = row_begin; tile < row_end; tile += tile_rows) {
    int const rows = min(tile_rows, row_end - tile);
    float bias_now[kRows];
    uint4 k_now[kRows], v_now[kRows];
    CG_PRAGMA_UNROLL
    for (int j = 0; j < kRows; ++j) {
      bias_now[j] = bias[j];
      k_now[j] = k_next[j];
      v_now[j] = v_next[j];
      bias[j] = bias_next[j];
    }
    if (tile + tile_rows < row_end) {
      load_rows(tile + tile_rows, bias, k_next, v_next);
      load_bias(tile + 2 * tile_rows, bias_next);
    }
    // A tile that no head takes a row of (a static cache's unfilled tail) adds nothing.
    bool any_row = false;
    CG_PRAGMA_UNROLL
    for (int j = 0; j < kRows; ++j) any_row |= bias_now[j] != -INFINITY;
    if (!__syncthreads_or(any_row)) continue;

    // Scores of the thread's rows for every head (a head's query chunk read once per tile); the
    // team's shuffles add the chunks, all the thread's sums side by side at each step.
    float k[kRows][kVec];
    CG_PRAGMA_UNROLL
    for (int j = 0; j < kRows; ++j) unpack_row_chunk<T>(k_now[j], k[j]);
    float dot[kMaxHeads][kRows] = {};
    CG_PRAGMA_UNROLL
    for (int g = 0; g < kMaxHeads; ++g) {
      if (g >= heads) break;  // the same for the whole CTA
      float4 const qa = *reinterpret_cast<float4 const*>(&q_s[g][lane_chunk * kVec]);
      float4 const qb = *reinterpret_cast<float4 const*>(&q_s[g][lane_chunk * kVec + 4]);
      CG_PRAGMA_UNROLL
      for (int j = 0; j < kRows; ++j) {
        dot[g][j] = qa.x * k[j][0] + qa.y * k[j][1] + qa.z * k[j][2] + qa.w * k[j][3] +
                    qb.x * k[j][4] + qb.y * k[j][5] + qb.z * k[j][6] + qb.w * k[j][7];
      }
    }
    for (int offset = team / 2; offset > 0; offset /= 2) {
      CG_PRAGMA_UNROLL
      for (int g = 0; g < kMaxHeads; ++g) {
        if (g >= heads) break;
        CG_PRAGMA_UNROLL
        for (int j = 0; j < kRows; ++j)
          dot[g][j] += __shfl_xor_sync(0xffffffffu, dot[g][j], offset);
      }
    }
    if (lane_chunk == 0) {
      CG_PRAGMA_UNROLL
      for (int j = 0; j < kRows; ++j) {
        int const r = slice + j * slices;
        CG_PRAGMA_UNROLL
        for (int g = 0; g < kMaxHeads; ++g) {
          float bias_g = bias_now[j];
          if (per_head && bias_g != -INFINITY) {
            bias_g = g < heads ? mask_log2(p, b, head0 + g, i, tile + r) : -INFINITY;
          }
          p_s[g * kMaxTile + r] = dot[g][j] + bias_g;  // -inf where excluded
        }
      }
    }
    __syncthreads();

    // Online softmax, a warp per head: the tile's max, the rescale of the sums so far, the
    // probabilities in place of the scores.
    int const warp = tid / 32, lane = tid % 32;
    if (warp < heads) {
      int const g = warp;
      float tile_max = -INFINITY;
      for (int r = lane; r < rows; r += 32) tile_max = fmaxf(tile_max, p_s[g * kMaxTile + r]);
      for (int offset = 16; offset > 0; offset /= 2)
        tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, offset));
      float const old_max = max_s[g], new_max = fmaxf(old_max, tile_max);
      // Nothing taken part yet (new_max == -inf): no rescale, and every probability is 0.
      float const rescale = new_max == -INFINITY ? 1.f : exp2f(old_max - new_max);
      float sum = 0.f;
      for (int r = lane; r < tile_rows; r += 32) {
        float const s = r < rows ? p_s[g * kMaxTile + r] : -INFINITY;
        float const prob = s == -INFINITY ? 0.f : exp2f(s - new_max);
        p_s[g * kMaxTile + r] = prob;
        sum += prob;
      }
      for (int offset = 16; offset > 0; offset /= 2)
        sum += __shfl_xor_sync(0xffffffffu, sum, offset);
      __syncwarp();  // every lane has read max_s[g] before lane 0 writes it
      if (lane == 0) {
        max_s[g] = new_max;
        sum_s[g] = sum_s[g] * rescale + sum;
        rescale_s[g] = rescale;
      }
    }
    __syncthreads();

    // Sums: acc += p_j * v_j over the thread's rows of the tile.
    CG_PRAGMA_UNROLL
    for (int g = 0; g < kMaxHeads; ++g) {
      if (g >= heads) break;
      float const rescale = rescale_s[g];
      CG_PRAGMA_UNROLL
      for (int e = 0; e < kVec; ++e) acc[g][e] *= rescale;
    }
    CG_PRAGMA_UNROLL
    for (int j = 0; j < kRows; ++j) {
      if (bias_now[j] == -INFINITY) continue;  // no head takes the row (and v_now is 0)
      int const r = slice + j * slices;
      float v[kVec];
      unpack_row_chunk<T>(v_now[j], v);
      CG_PRAGMA_UNROLL
      for (int g = 0; g < kMaxHeads; ++g) {
        if (g >= heads) break;
        float const prob = p_s[g * kMaxTile + r];
        CG_PRAGMA_UNROLL
        for (int e = 0; e < kVec; ++e) acc[g][e] += prob * v[e];
      }
    }
    __syncthreads();  // p_s is the next tile's
  }

  // The slices' sums meet, kReduceHeads heads at a time; the CTA's unnormalized output goes to
  // q_s (the queries are no longer needed).
  CG_PRAGMA_UNROLL
  for (int pass = 0; pass < kMaxHeads; pass += Cfg::kReduceHeads) {
    if (pass < heads) {  // the same for the whole CTA
      if (holds) {
        CG_PRAGMA_UNROLL
        for (int h = 0; h < Cfg::kReduceHeads; ++h) {
          CG_PRAGMA_UNROLL
          for (int e = 0; e < kVec; ++e)
            work_s[Cfg::reduce_index(slice, h, lane_chunk * kVec + e, dim)] = acc[pass + h][e];
        }
      }
      __syncthreads();
      int const count = min(Cfg::kReduceHeads, heads - pass);
      for (int e = tid; e < count * dim; e += Cfg::kThreads) {
        int const h = e / dim, d = e % dim;
        float total = 0.f;
        for (int s = 0; s < slices; ++s) total += work_s[Cfg::reduce_index(s, h, d, dim)];
        q_s[pass + h][d] = total;
      }
      __syncthreads();
    }
  }

  T* out = static_cast<T*>(p.out) + ((int64_t(b) * p.q_len + i) * p.heads + head0) * dim;
  if (p.splits == 1) {
    for (int e = tid; e < heads * dim; e += Cfg::kThreads) {
      int const g = e / dim, d = e % dim;
      float const sum = sum_s[g];  // 0: every position excluded, the output is 0
      out[int64_t(g) * dim + d] = HalfTraits<T>::from_float(sum > 0.f ? q_s[g][d] / sum : 0.f);
    }
    return;
  }
#if defined(CG_ARCH_SM90_ENABLED)
  // The cluster's CTAs combine their results: each takes every splits-th element of the heads'
  // outputs and reads the others' max, sum and output through distributed shared memory.
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  cluster.sync();  // every CTA's results are in its shared memory
  int const rank = int(cluster.block_rank());
  for (int e = rank * Cfg::kThreads + tid; e < heads * dim; e += p.splits * Cfg::kThreads) {
    int const g = e / dim, d = e % dim;
    float top = -INFINITY;
    for (int s = 0; s < p.splits; ++s) top = fmaxf(top, *cluster.map_shared_rank(&max_s[g], s));
    float o = 0.f, sum = 0.f;
    if (top != -INFINITY) {
      for (int s = 0; s < p.splits; ++s) {
        float const weight = exp2f(*cluster.map_shared_rank(&max_s[g], s) - top);
        sum += weight * *cluster.map_shared_rank(&sum_s[g], s);
        o += weight * *cluster.map_shared_rank(&q_s[g][d], s);
      }
    }
    out[int64_t(g) * dim + d] = HalfTraits<T>::from_float(sum > 0.f ? o / sum : 0.f);
  }
  cluster.sync();  // no CTA leaves while another reads its shared memory
#else
  __trap();  // the launcher splits only where there are clusters
#endif
}

// Launches the kernel for p (p.splits CTAs per cluster) on `stream` as a programmatic dependent
// of the kernel before it when `pdl`.
template <class T>
cudaError_t launch_decode_attention(DecodeAttentionParams const& p, bool pdl,
                                    cudaStream_t stream) {
  using Cfg = DecodeAttentionConfig;
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
  config.stream = stream;
  config.attrs = attr;
  config.numAttrs = n;
  return cudaLaunchKernelEx(&config, decode_attention_kernel<T>, p);
}

// Whether this build's kernel for T can run in clusters on the current device (its code there is
// sm_90 or later); asked once per device.
template <class T>
bool decode_attention_has_clusters() {
  static int cached[64] = {};
  return cached_per_device(cached, 0, [](int) {
    cudaFuncAttributes attr{};
    if (cudaFuncGetAttributes(&attr, decode_attention_kernel<T>) != cudaSuccess) return -1;
    return attr.binaryVersion >= 90 ? 1 : 0;
  }) == 1;
}

}  // namespace attention
}  // namespace cute_gemm
