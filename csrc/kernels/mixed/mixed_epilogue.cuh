#pragma once
// The output side of the mixed-input GEMM kernels (mixed_gemm_kernel.cuh, mixed_wgmma_kernel.cuh,
// mixed_decode_kernel.cuh): rounding with the bias, the split-K reduction kernel that adds the
// splits' fp32 partial sums in split order (deterministic), and the launch of a kernel with it.

#include <cuda_runtime.h>

#include "cute_gemm/arch/grid_dependency_sm90.hpp"
#include "cute_gemm/numeric.hpp"
#include "kernels/gemm/gemm_kernel.cuh"
#include "kernels/mixed/dequant.cuh"
#include "kernels/mixed/mixed_gemm_launch.hpp"
#include "kernels/mixed/mixed_mma_config.hpp"
#include "kernels/mixed/weight_format.hpp"

namespace cute_gemm {
namespace mixed {

// The output [M, N], row stride ldo: (row, col) -> element.
CG_DEVICE auto out_layout(MixedGemmParams const& p) {
  return make_layout(make_shape(p.m, p.n), make_stride(int64_t(p.ldo), _1{}));
}

// out[row, col .. col + 1] = v0, v1 (+ bias[col .. col + 1]) rounded once to the output dtype, one
// 4-byte store (col is even; N % 8 == 0): the mma.sync kernel's direct write and
// split_k_reduce_kernel's.
template <class T>
CG_DEVICE void store_out_pair(MixedGemmParams const& p, int row, int col, float v0, float v1) {
  T const* bias = static_cast<T const*>(p.bias);
  if (bias != nullptr) {
    v0 += HalfTraits<T>::to_float(bias[col]);
    v1 += HalfTraits<T>::to_float(bias[col + 1]);
  }
  typename Dequant<T>::T2 o;
  o.x = HalfTraits<T>::from_float(v0);
  o.y = HalfTraits<T>::from_float(v1);
  *reinterpret_cast<typename Dequant<T>::T2*>(static_cast<T*>(p.out) + out_layout(p)(row, col)) = o;
}

CG_DEVICE void add_f32x4(float4& acc, float4 const& v) {
  acc.x += v.x;
  acc.y += v.y;
  acc.z += v.z;
  acc.w += v.w;
}

// out[row, col] = v (+ bias[col]) rounded once to the output dtype (one 2-byte store): for
// fragments whose neighbouring values lie in other rows (the transposed tiles of the wgmma and
// decode kernels).
template <class T>
CG_DEVICE void store_out_one(MixedGemmParams const& p, int row, int col, float v) {
  T const* bias = static_cast<T const*>(p.bias);
  if (bias != nullptr) v += HalfTraits<T>::to_float(bias[col]);
  static_cast<T*>(p.out)[int64_t(row) * p.ldo + col] = HalfTraits<T>::from_float(v);
}

// Gated GEMMs (MixedGemmParams::gated): a kernel that gates in registers computes logical n8
// block 2j + h from the weight's block h * N / 16 + j (h = 0: the gate half, 1: the up half), so
// that the gate and up sums of output column 8 j + c lie in one thread (the decode kernel's row
// tiles hold blocks 2r and 2r + 1). The weight's block of logical block b, in the kernel compiled
// for gated GEMMs (Gated; the ungated kernel's blocks are the weight's):
template <bool Gated>
CG_DEVICE int weight_block(MixedGemmParams const& p, int b) {
  return Gated ? (b & 1) * (p.n / (2 * kBlockN)) + (b >> 1) : b;
}
// The weight's column of logical column `col` (its block's weight_block, the same column in it).
template <bool Gated>
CG_DEVICE int weight_column(MixedGemmParams const& p, int col) {
  return weight_block<Gated>(p, col / kBlockN) * kBlockN + col % kBlockN;
}
// The output column of logical column `col` of a gate block (logical block 2j, column c of it) in
// the gated output [M, N/2]: 8 j + c.
CG_DEVICE int gated_output_column(int col) {
  return col / (2 * kBlockN) * kBlockN + col % kBlockN;
}

// SiLU(g) * u in fp32: g / (1 + e^-g) * u (e^-g overflows to inf for g < -88: -0 * u, the limit).
CG_DEVICE float silu_mul(float g, float u) { return g / (1.f + expf(-g)) * u; }

// out[row, col] = SiLU(g + bias[col]) * (u + bias[col + N/2]) rounded once (bias if given), col a
// column of the gated output [M, N/2].
template <class T>
CG_DEVICE void store_out_gated(MixedGemmParams const& p, int row, int col, float g, float u) {
  T const* bias = static_cast<T const*>(p.bias);
  if (bias != nullptr) {
    g += HalfTraits<T>::to_float(bias[col]);
    u += HalfTraits<T>::to_float(bias[col + p.n / 2]);
  }
  static_cast<T*>(p.out)[int64_t(row) * p.ldo + col] = HalfTraits<T>::from_float(silu_mul(g, u));
}

// The sum over `splits` of the 16-byte units ws[workspace(0, s)], in split order. The loads of 8
// splits are issued together and then added in order: a split-by-split loop would wait out one L2
// round trip per split, and the fixed order keeps the sum deterministic.
template <class Workspace>
CG_DEVICE float4 sum_splits(float4 const* ws, Workspace const& workspace, int splits) {
  float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
  constexpr int kBatch = 8;
  int s = 0;
  for (; s + kBatch <= splits; s += kBatch) {
    float4 v[kBatch];
    CG_PRAGMA_UNROLL
    for (int j = 0; j < kBatch; ++j) v[j] = __ldcg(ws + workspace(0, s + j));
    CG_PRAGMA_UNROLL
    for (int j = 0; j < kBatch; ++j) add_f32x4(acc, v[j]);
  }
  for (; s < splits; ++s) add_f32x4(acc, __ldcg(ws + workspace(0, s)));
  return acc;
}

// out = sum over splits (in split order) of the partial sums in p.workspace ([splits][M][N] fp32),
// + bias, rounded: thread i writes the four outputs of SplitKReduceConfig::tv. Gated, the outputs
// are [M, N/2] and each is SiLU of its gate column's sum times its up column's (N/2 further on).
template <class T>
__global__ void split_k_reduce_kernel(MixedGemmParams p, int splits) {
  using Cfg = SplitKReduceConfig;
  // A programmatic dependent of the GEMM kernel: wait for its partial sums. The next layer's
  // kernel may start streaming its weights meanwhile (it reads nothing this kernel writes before
  // its own wait).
  grid_dependency_wait();
  grid_launch_dependents();
  const int n_out = output_columns(p);
  const int64_t total4 = int64_t(p.m) * n_out / Cfg::kValues;
  const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= total4) return;
  const auto workspace = Cfg::workspace(int64_t(p.m) * p.n / Cfg::kValues, splits);
  // The row-major index of the thread's first output, split into (row, col) by its width.
  const int64_t e = Cfg::tv(total4)(idx, 0);
  const int row = int(e / n_out), col = int(e % n_out);
  float4 const* ws = static_cast<float4 const*>(p.workspace);
  const int64_t unit = (int64_t(row) * p.n + col) / Cfg::kValues;  // idx unless gated
  const float4 acc = sum_splits(ws + workspace(unit, 0), workspace, splits);
  if (!p.gated) {
    store_out_pair<T>(p, row, col, acc.x, acc.y);
    store_out_pair<T>(p, row, col + 2, acc.z, acc.w);
    return;
  }
  const float4 up = sum_splits(ws + workspace(unit + n_out / Cfg::kValues, 0), workspace, splits);
  store_out_gated<T>(p, row, col, acc.x, up.x);
  store_out_gated<T>(p, row, col + 1, acc.y, up.y);
  store_out_gated<T>(p, row, col + 2, acc.z, up.z);
  store_out_gated<T>(p, row, col + 3, acc.w, up.w);
}

// Launches split_k_reduce_kernel over p.workspace ([splits][M][N] fp32) on `stream`; with `pdl`
// as a programmatic dependent of the kernel before it.
template <class T>
cudaError_t launch_split_k_reduce(MixedGemmParams const& p, int splits, bool pdl,
                                  cudaStream_t stream) {
  const int64_t total4 = int64_t(p.m) * output_columns(p) / SplitKReduceConfig::kValues;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  constexpr int kThreads = SplitKReduceConfig::kThreads;
  config.gridDim = dim3(unsigned((total4 + kThreads - 1) / kThreads));
  config.blockDim = dim3(kThreads);
  config.stream = stream;
  config.attrs = attr;
  config.numAttrs = pdl ? 1 : 0;
  return cudaLaunchKernelEx(&config, split_k_reduce_kernel<T>, p, splits);
}

// Launches kernel(p, per_split, plan.via_workspace, extra...) on a (ceil(N / tile_n),
// ceil(M / tile_m), plan.splits) grid of `threads` blocks (a programmatic dependent of the
// previous kernel in the stream when pdl, i.e. on sm_90), then, via the workspace,
// split_k_reduce_kernel. The kernel writes its fp32 sums to p.workspace when the plan says so
// (MixedPlan::via_workspace), otherwise `out` itself; a plan for partial sums
// (MixedPlan::partials) leaves them there, for the caller. A plan that reduces in a cluster
// (MixedPlan::reduce_in_cluster) launches the grid in clusters of (1, 1, splits), a tile's
// splits. A stream-K plan (MixedPlan::stream_k_ctas > 0) launches its grid (that many CTAs along
// x; the warp-specialized kernel's full waves and stream-K row along y), unsplit.
// `extra`: further kernel parameters (the wgmma kernels' tensor maps).
template <class T, class... Extra>
cudaError_t launch_split_k(void (*kernel)(MixedGemmParams, int, bool, Extra...),
                           MixedGemmParams const& p, MixedPlan const& plan, int tile_m, int tile_n,
                           dim3 threads, int smem, bool pdl, cudaStream_t stream,
                           Extra const&... extra) {
  const int splits = plan.splits, k_blocks = mixed::k_blocks(p.k, p.bits);
  const int per_split = (k_blocks + splits - 1) / splits;
  cudaLaunchAttribute attr[3];
  unsigned attrs = 0;
  if (pdl) {
    attr[attrs].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[attrs++].val.programmaticStreamSerializationAllowed = 1;
  }
  if (plan.reduce_in_cluster) {
    attr[attrs].id = cudaLaunchAttributeClusterDimension;
    attr[attrs].val.clusterDim.x = 1;
    attr[attrs].val.clusterDim.y = 1;
    attr[attrs++].val.clusterDim.z = unsigned(splits);
    // Load balancing lets the hardware place a cluster's CTAs on the SMs as it likes; the
    // default (spread) cost the 16-row 64-column tile (4 CTAs per SM) 40% on an H200 (bf16 M =
    // 16, 8 splits, o 4096x4096 8.65 against 5.56 us; NOTES.md session 68).
    attr[attrs].id = cudaLaunchAttributeClusterSchedulingPolicyPreference;
    attr[attrs++].val.clusterSchedulingPolicyPreference = cudaClusterSchedulingPolicyLoadBalancing;
  }
  cudaLaunchConfig_t config{};
  config.gridDim = plan.stream_k_ctas > 0
                       ? dim3(unsigned(plan.grid[0]), unsigned(plan.grid[1]), 1)
                       : dim3((p.n + tile_n - 1) / tile_n, (p.m + tile_m - 1) / tile_m, splits);
  config.blockDim = threads;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  config.attrs = attr;
  config.numAttrs = attrs;
  const cudaError_t e =
      cudaLaunchKernelEx(&config, kernel, p, per_split, plan.via_workspace, extra...);
  if (e != cudaSuccess || !plan.via_workspace || plan.partials) return e;
  return launch_split_k_reduce<T>(p, splits, pdl, stream);
}

}  // namespace mixed
}  // namespace cute_gemm
