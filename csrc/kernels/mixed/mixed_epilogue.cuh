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
#include "kernels/mixed/weight_format.hpp"

namespace cute_gemm {
namespace mixed {

// Epilogue pieces shared by the kernel's direct write, its cluster reduction and
// split_k_reduce_kernel: out[row, col .. col + 1] = v0, v1 (+ bias[col .. col + 1]) rounded once
// to the output dtype, one 4-byte store (col is even; N % 8 == 0).
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
  *reinterpret_cast<typename Dequant<T>::T2*>(static_cast<T*>(p.out) + int64_t(row) * p.ldo +
                                               col) = o;
}

CG_DEVICE void add_f32x4(float4& acc, float4 const& v) {
  acc.x += v.x;
  acc.y += v.y;
  acc.z += v.z;
  acc.w += v.w;
}

// out[row, col] = v (+ bias[col]) rounded once to the output dtype (one 2-byte store): for
// fragments whose neighbouring values lie in other rows (the wgmma kernel's transposed tile).
template <class T>
CG_DEVICE void store_out_one(MixedGemmParams const& p, int row, int col, float v) {
  T const* bias = static_cast<T const*>(p.bias);
  if (bias != nullptr) v += HalfTraits<T>::to_float(bias[col]);
  static_cast<T*>(p.out)[int64_t(row) * p.ldo + col] = HalfTraits<T>::from_float(v);
}

// out = sum over splits (in split order) of the partial sums, + bias, rounded. One thread per 4
// adjacent outputs (N % 8 == 0), 16-byte loads. The loads of 8 splits are issued together and
// then added in order: a split-by-split loop would wait out one L2 round trip per split (16
// splits of a small layer add up to microseconds), and the fixed order keeps the sum
// deterministic and identical to the cluster reduction's.
template <class T>
__global__ void split_k_reduce_kernel(MixedGemmParams p, int splits) {
  // A programmatic dependent of mixed_gemm_kernel: wait for its partial sums. The next layer's
  // kernel may start streaming its weights meanwhile (it reads nothing this kernel writes before
  // its own wait).
  grid_dependency_wait();
  grid_launch_dependents();
  const int64_t total4 = int64_t(p.m) * p.n / 4;
  const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= total4) return;
  float4 const* ws = static_cast<float4 const*>(p.workspace) + idx;
  float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
  constexpr int kBatch = 8;
  int s = 0;
  for (; s + kBatch <= splits; s += kBatch) {
    float4 v[kBatch];
    CG_PRAGMA_UNROLL
    for (int j = 0; j < kBatch; ++j) v[j] = __ldcg(ws + (s + j) * total4);
    CG_PRAGMA_UNROLL
    for (int j = 0; j < kBatch; ++j) add_f32x4(acc, v[j]);
  }
  for (; s < splits; ++s) add_f32x4(acc, __ldcg(ws + s * total4));
  const int64_t e = idx * 4;
  const int row = int(e / p.n), col = int(e % p.n);
  store_out_pair<T>(p, row, col, acc.x, acc.y);
  store_out_pair<T>(p, row, col + 2, acc.z, acc.w);
}

// Launches split_k_reduce_kernel over p.workspace ([splits][M][N] fp32) on `stream`; with `pdl`
// as a programmatic dependent of the kernel before it.
template <class T>
cudaError_t launch_split_k_reduce(MixedGemmParams const& p, int splits, bool pdl,
                                  cudaStream_t stream) {
  const int64_t total4 = int64_t(p.m) * p.n / 4;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(unsigned((total4 + 255) / 256));
  config.blockDim = dim3(256);
  config.stream = stream;
  config.attrs = attr;
  config.numAttrs = pdl ? 1 : 0;
  return cudaLaunchKernelEx(&config, split_k_reduce_kernel<T>, p, splits);
}

// CTAs of `kernel` resident per SM at `threads` threads and `smem` bytes of dynamic shared memory
// (the occupancy calculator; the caller has raised the kernel's shared memory limit). 1 when it
// cannot tell, e.g. without a device.
template <class Kernel>
int resident_ctas_per_sm(Kernel kernel, int threads, int smem) {
  int n = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, threads, smem) != cudaSuccess ||
      n < 1) {
    cudaGetLastError();  // clear the error this query may have left
    return 1;
  }
  return n;
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
  const int k_blocks = (p.k + block_k(p.bits) - 1) / block_k(p.bits);
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
