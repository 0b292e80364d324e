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

// out = sum over splits (in split order) of the partial sums, + bias, rounded: thread i adds the
// four outputs of SplitKReduceConfig::tv, 16-byte loads. The loads of 8 splits are issued together
// and then added in order: a split-by-split loop would wait out one L2 round trip per split, and
// the fixed order keeps the sum deterministic.
template <class T>
__global__ void split_k_reduce_kernel(MixedGemmParams p, int splits) {
  using Cfg = SplitKReduceConfig;
  // A programmatic dependent of the GEMM kernel: wait for its partial sums. The next layer's
  // kernel may start streaming its weights meanwhile (it reads nothing this kernel writes before
  // its own wait).
  grid_dependency_wait();
  grid_launch_dependents();
  const int64_t total4 = int64_t(p.m) * p.n / Cfg::kValues;
  const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= total4) return;
  const auto workspace = Cfg::workspace(total4, splits);  // (U, split) -> 16-byte unit
  float4 const* ws = static_cast<float4 const*>(p.workspace) + workspace(idx, 0);
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
  // The row-major index of the thread's first output, split into (row, col) by N.
  const int64_t e = Cfg::tv(total4)(idx, 0);
  const int row = int(e / p.n), col = int(e % p.n);
  store_out_pair<T>(p, row, col, acc.x, acc.y);
  store_out_pair<T>(p, row, col + 2, acc.z, acc.w);
}

// Launches split_k_reduce_kernel over p.workspace ([splits][M][N] fp32) on `stream`; with `pdl`
// as a programmatic dependent of the kernel before it.
template <class T>
cudaError_t launch_split_k_reduce(MixedGemmParams const& p, int splits, bool pdl,
                                  cudaStream_t stream) {
  const int64_t total4 = int64_t(p.m) * p.n / SplitKReduceConfig::kValues;
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

// Launches kernel(p, per_split, splits > 1, extra...) on a (ceil(N / tile_n), ceil(M / tile_m),
// splits) grid of `threads` blocks (a programmatic dependent of the previous kernel in the stream
// when pdl, i.e. on sm_90), then, with split-K, split_k_reduce_kernel. The kernel writes `out`
// itself when splits == 1 and the fp32 partial sums to p.workspace otherwise. `extra`: further
// kernel parameters (the warp-specialized wgmma kernel's tensor maps).
template <class T, class... Extra>
cudaError_t launch_split_k(void (*kernel)(MixedGemmParams, int, bool, Extra...),
                           MixedGemmParams const& p, int tile_m, int tile_n, dim3 threads,
                           int smem, int splits, bool pdl, cudaStream_t stream,
                           Extra const&... extra) {
  const int k_blocks = mixed::k_blocks(p.k, p.bits);
  const int per_split = (k_blocks + splits - 1) / splits;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = dim3((p.n + tile_n - 1) / tile_n, (p.m + tile_m - 1) / tile_m, splits);
  config.blockDim = threads;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  config.attrs = attr;
  config.numAttrs = pdl ? 1 : 0;
  const cudaError_t e = cudaLaunchKernelEx(&config, kernel, p, per_split, splits > 1, extra...);
  if (e != cudaSuccess || splits == 1) return e;
  return launch_split_k_reduce<T>(p, splits, pdl, stream);
}

}  // namespace mixed
}  // namespace cute_gemm
