// Microbenchmark: SM cycles per RS wgmma m64nNk16 (bf16, f32 accumulators) on Hopper, by N, by the
// number of independent accumulator chains per warpgroup and by warpgroups (CTAs) per SM. Each
// warpgroup issues `chains` accumulators x 8 k16 steps per round (one commit group, then
// wait_group 0), as the mixed 16-row tile does per k block (chains = its n64 tiles). The B tile
// (zeros) sits in shared memory without swizzle. Prints cycles per wgmma per warpgroup and per
// SM (all warpgroups' wgmmas counted). Build and run on an sm_90 GPU:
//   nvcc -O3 -std=c++17 --expt-relaxed-constexpr -Icsrc -gencode=arch=compute_90a,code=sm_90a \
//       benchmarks/wgmma_cycles.cu -o /tmp/wgmma_cycles && /tmp/wgmma_cycles
// Session 65's output on an H200: benchmarks/results/wgmma_cycles_nvidia-h200_s65.txt.
#include <cstdio>
#include <vector>
#include <cuda_bf16.h>
#include "cute_gemm/arch/mma_sm90.hpp"
#include "cute_gemm/arch/wgmma_desc_sm90.hpp"
using namespace cute_gemm;

template <int N, int Chains>
__global__ void bench(int rounds, long long* cycles, float* sink) {
  using W = SM90_64xNx16_F32_RS<__nv_bfloat16, N>;
  __shared__ alignas(128) uint16_t b_tile[N * 16];
  for (int i = threadIdx.x; i < N * 16; i += blockDim.x) b_tile[i] = 0;
  fence_proxy_async_shared();  // the tile is read by the async proxy (wgmma)
  __syncthreads();
  // K-major, no swizzle: core matrices of 8 rows x 16 bytes; k neighbours 128 bytes apart (LBO),
  // row-group neighbours 256 (SBO).
  const uint64_t desc =
      make_wgmma_desc(detail::smem_addr(b_tile), 128, 256, WgmmaSwizzle::kNone);
  uint32_t a[4] = {threadIdx.x, threadIdx.x * 3u, 7u, 9u};
  float acc[Chains][N / 2];
  for (int c = 0; c < Chains; ++c)
    for (int v = 0; v < N / 2; ++v) acc[c][v] = 0.f;
  __syncthreads();
  const long long t0 = clock64();
  for (int r = 0; r < rounds; ++r) {
    wgmma_fence();
#pragma unroll
    for (int j = 0; j < 8; ++j) {
#pragma unroll
      for (int c = 0; c < Chains; ++c) W::fma(acc[c], a, desc, 1);
    }
    wgmma_commit_group();
    wgmma_wait_group<0>();
  }
  const long long t1 = clock64();
  float s = 0.f;
  for (int c = 0; c < Chains; ++c)
    for (int v = 0; v < N / 2; ++v) s += acc[c][v];
  sink[blockIdx.x * blockDim.x + threadIdx.x] = s;
  if (threadIdx.x == 0) cycles[blockIdx.x] = t1 - t0;
}

// Launches ctas_per_sm CTAs per SM (all resident at once: checked against the occupancy the
// runtime reports) and prints the mean cycles per wgmma; false on a CUDA error or if they do
// not fit.
template <int N, int Chains>
bool run(int ctas_per_sm, int sms) {
  const int rounds = 2000, ctas = ctas_per_sm * sms;
  int resident = 0;
  cudaOccupancyMaxActiveBlocksPerMultiprocessor(&resident, bench<N, Chains>, 128, 0);
  if (resident < ctas_per_sm) {
    std::printf("N=%3d chains=%d CTAs/SM=%d: only %d CTAs fit an SM\n", N, Chains, ctas_per_sm,
                resident);
    return false;
  }
  long long* d_cycles = nullptr;
  float* sink = nullptr;
  cudaMalloc(&d_cycles, ctas * sizeof(long long));
  cudaMalloc(&sink, ctas * 128 * sizeof(float));
  bench<N, Chains><<<ctas, 128>>>(10, d_cycles, sink);  // warm-up
  bench<N, Chains><<<ctas, 128>>>(rounds, d_cycles, sink);
  std::vector<long long> h(ctas);
  cudaMemcpy(h.data(), d_cycles, ctas * sizeof(long long), cudaMemcpyDeviceToHost);
  const cudaError_t e = cudaGetLastError();
  cudaFree(d_cycles);
  cudaFree(sink);
  if (e != cudaSuccess) {
    std::printf("N=%3d chains=%d CTAs/SM=%d: %s\n", N, Chains, ctas_per_sm, cudaGetErrorString(e));
    return false;
  }
  double mean = 0;
  for (long long c : h) mean += double(c) / ctas;
  const double per_wgmma_cta = mean / (rounds * 8.0 * Chains);
  std::printf("N=%3d chains=%d CTAs/SM=%d: %6.1f cycles per wgmma per warpgroup, %6.1f per SM\n",
              N, Chains, ctas_per_sm, per_wgmma_cta, per_wgmma_cta / ctas_per_sm);
  return true;
}

int main() {
  int sms = 0;
  if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0) != cudaSuccess) {
    std::printf("no CUDA device\n");
    return 1;
  }
  bool ok = true;
  for (int cps : {1, 2, 4}) {
    ok &= run<16, 1>(cps, sms) & run<16, 2>(cps, sms) & run<16, 3>(cps, sms);
    ok &= run<32, 1>(cps, sms) & run<32, 2>(cps, sms);
    ok &= run<64, 1>(cps, sms) & run<64, 2>(cps, sms);
    ok &= run<128, 1>(cps, sms);
  }
  return ok ? 0 : 1;
}
