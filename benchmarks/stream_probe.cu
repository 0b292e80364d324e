// stream_probe: how fast can the decode kernel's weight access patterns stream from DRAM, with no
// arithmetic at all? A ceiling for mixed_gemm at M <= 16, and a way to tell a memory-side limit
// from an instruction-side one. Standalone (no torch): nvcc -O3 -std=c++17
// -gencode=arch=compute_90a,code=sm_90a -o stream_probe benchmarks/stream_probe.cu
//
// The weight bytes are laid out as the INT4 packed format (weight_format.hpp): n8 block -> k block
// (512 bytes: 32 lanes x 16 bytes). Each pattern reads every byte once and folds it into an XOR
// that is stored only if it hits an impossible value (so nothing is optimized away).
//   cpasync   the mma.sync kernel's pattern: CTAs of 4 warps own 16 n8 blocks and a K split; per
//             k block each lane copies 16 bytes of each of its warp's 4 blocks (cp.async,
//             evict-first), a kStages pipeline with __syncthreads.
//   bulkwarp  each warp streams its 4 n8 blocks on its own: lane 0 issues one cp.async.bulk per
//             block and stage (KB k blocks contiguous), completion on a per-warp mbarrier; no CTA
//             barrier.
//   bulktile  as bulkwarp, but as if the format put a warp's 4 blocks of a k block next to each
//             other: one contiguous copy per stage.
//   ldg       no shared memory: each lane loads its 16 bytes of 4 blocks x D k blocks ahead into
//             registers (ld.global.nc, no L1 allocation).
//   linear    a grid-stride read of the whole buffer, 16 bytes per lane (the plain ceiling).
// Times are the median of 7 runs of 20 back-to-back launches each, buffers rotated past the L2.

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "cuda_check.cuh"

__device__ __forceinline__ uint32_t smem_u32(void const* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ uint64_t evict_first() {
  uint64_t pol;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
  return pol;
}
__device__ __forceinline__ void mbar_init(uint64_t* b, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(b)), "r"(count));
}
__device__ __forceinline__ void mbar_expect_tx(uint64_t* b, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(b)),
               "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void mbar_wait(uint64_t* b, uint32_t parity) {
  asm volatile(
      "{\n .reg .pred p;\n WAIT:\n"
      " mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
      " @!p bra WAIT;\n}\n" ::"r"(smem_u32(b)),
      "r"(parity)
      : "memory");
}
__device__ __forceinline__ void bulk_g2s(void* dst, void const* src, uint32_t bytes, uint64_t* bar,
                                         uint64_t pol) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint"
      " [%0], [%1], %2, [%3], %4;" ::"r"(smem_u32(dst)),
      "l"(src), "r"(bytes), "r"(smem_u32(bar)), "l"(pol)
      : "memory");
}
__device__ __forceinline__ void cp_async16(void* dst, void const* src, uint64_t pol) {
  asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2;" ::"r"(smem_u32(dst)),
               "l"(src), "l"(pol)
               : "memory");
}
__device__ __forceinline__ uint4 ldg_stream(uint4 const* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}
__device__ __forceinline__ uint32_t fold(uint4 v) { return v.x ^ v.y ^ v.z ^ v.w; }

struct Problem {
  uint4 const* w;  // [n_blocks][k_blocks][32]
  int k_blocks;
  int per_split;
  uint32_t* sink;
};

// --- cpasync: the current kernel's pipeline
template <int S>
__global__ void __launch_bounds__(128, 4) k_cpasync(Problem p) {
  extern __shared__ uint4 sm[];  // [S][16 blocks][32]
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int kb0 = blockIdx.y * p.per_split;
  const int n = min(p.per_split, p.k_blocks - kb0);
  const uint64_t pol = evict_first();
  uint4 const* src[4];
  for (int b = 0; b < 4; ++b)
    src[b] = p.w + (int64_t(blockIdx.x * 16 + warp * 4 + b) * p.k_blocks + kb0) * 32 + lane;
  auto load = [&](int i) {
    if (i < n) {
      for (int b = 0; b < 4; ++b)
        cp_async16(&sm[((i % S) * 16 + warp * 4 + b) * 32 + lane], src[b] + int64_t(i) * 32, pol);
    }
    asm volatile("cp.async.commit_group;");
  };
  for (int s = 0; s < S - 1; ++s) load(s);
  uint32_t acc = 0;
  for (int i = 0; i < n; ++i) {
    asm volatile("cp.async.wait_group %0;" ::"n"(S - 2));
    __syncthreads();
    load(i + S - 1);
    for (int b = 0; b < 4; ++b) acc ^= fold(sm[((i % S) * 16 + warp * 4 + b) * 32 + lane]);
  }
  if (acc == 0x9e3779b9u) *p.sink = acc;
}

// --- bulkwarp / bulktile: per-warp pipelines of cp.async.bulk
template <int S, int KB, bool Tile>
__global__ void __launch_bounds__(128, 4) k_bulk(Problem p) {
  extern __shared__ uint4 sm[];  // [4 warps][S][4 blocks][KB][32]
  __shared__ uint64_t full[4][S];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  constexpr int kStageVec = 4 * KB * 32;
  uint4* mine = sm + warp * S * kStageVec;
  if (lane == 0)
    for (int s = 0; s < S; ++s) mbar_init(&full[warp][s], 1);
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  __syncwarp();
  const int kb0 = blockIdx.y * p.per_split;
  const int chunks = (min(p.per_split, p.k_blocks - kb0)) / KB;  // per_split % KB == 0 here
  const uint64_t pol = evict_first();
  const int nb0 = blockIdx.x * 16 + warp * 4;
  auto load = [&](int c) {
    if (lane != 0 || c >= chunks) return;
    const int s = c % S;
    mbar_expect_tx(&full[warp][s], kStageVec * 16);
    if (Tile) {
      // as if [n_blocks / 4][k_blocks][4][32]: the warp's 4 blocks of KB k blocks, contiguous
      uint4 const* src = p.w + (int64_t(nb0 / 4) * p.k_blocks + kb0 + c * KB) * 128;
      bulk_g2s(mine + s * kStageVec, src, kStageVec * 16, &full[warp][s], pol);
    } else {
      for (int b = 0; b < 4; ++b) {
        uint4 const* src = p.w + (int64_t(nb0 + b) * p.k_blocks + kb0 + c * KB) * 32;
        bulk_g2s(mine + s * kStageVec + b * KB * 32, src, KB * 512, &full[warp][s], pol);
      }
    }
  };
  for (int s = 0; s < S; ++s) load(s);
  uint32_t acc = 0;
  for (int c = 0; c < chunks; ++c) {
    const int s = c % S;
    mbar_wait(&full[warp][s], (c / S) & 1);
    for (int v = 0; v < 4 * KB; ++v) acc ^= fold(mine[s * kStageVec + v * 32 + lane]);
    __syncwarp();
    load(c + S);
  }
  if (acc == 0x9e3779b9u) *p.sink = acc;
}

// --- ldg: straight into registers, D k blocks ahead
template <int D>
__global__ void __launch_bounds__(128, 4) k_ldg(Problem p) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int kb0 = blockIdx.y * p.per_split;
  const int n = min(p.per_split, p.k_blocks - kb0);
  uint4 const* src[4];
  for (int b = 0; b < 4; ++b)
    src[b] = p.w + (int64_t(blockIdx.x * 16 + warp * 4 + b) * p.k_blocks + kb0) * 32 + lane;
  uint32_t acc = 0;
  for (int i = 0; i < n; i += D) {
    uint4 v[D][4];
#pragma unroll
    for (int d = 0; d < D; ++d)
#pragma unroll
      for (int b = 0; b < 4; ++b) v[d][b] = i + d < n ? ldg_stream(src[b] + int64_t(i + d) * 32)
                                                      : make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int d = 0; d < D; ++d)
#pragma unroll
      for (int b = 0; b < 4; ++b) acc ^= fold(v[d][b]);
  }
  if (acc == 0x9e3779b9u) *p.sink = acc;
}

__global__ void k_linear(uint4 const* w, int64_t n_vec, uint32_t* sink) {
  uint32_t acc = 0;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n_vec;
       i += int64_t(gridDim.x) * blockDim.x)
    acc ^= fold(ldg_stream(w + i));
  if (acc == 0x9e3779b9u) *sink = acc;
}

template <class Launch>
float time_us(Launch launch, int copies) {
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  std::vector<float> runs;
  for (int r = 0; r < 8; ++r) {
    CHECK(cudaEventRecord(a));
    for (int i = 0; i < 20; ++i) launch(i % copies);
    CHECK(cudaEventRecord(b));
    CHECK(cudaEventSynchronize(b));
    float ms;
    CHECK(cudaEventElapsedTime(&ms, a, b));
    if (r > 0) runs.push_back(ms * 1000.f / 20);
  }
  CHECK(cudaGetLastError());
  std::sort(runs.begin(), runs.end());
  return runs[runs.size() / 2];
}

int main() {
  int sms;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  uint32_t* sink;
  CHECK(cudaMalloc(&sink, 4));
  struct Shape { int k, n; };
  const Shape shapes[] = {{4096, 4096}, {8192, 8192}, {14336, 4096}, {4096, 28672}, {28672, 8192}};
  std::printf("pattern,K,N,ctas_per_sm,us,GBps\n");
  for (Shape sh : shapes) {
    const int k_blocks = sh.k / 128, n_blocks = sh.n / 8;
    const size_t bytes = size_t(n_blocks) * k_blocks * 512;
    const int copies = int(std::max<size_t>(2, (400u << 20) / bytes + 1));
    std::vector<uint4*> bufs(copies);
    for (auto& b : bufs) {
      CHECK(cudaMalloc(&b, bytes));
      CHECK(cudaMemset(b, 0x5a, bytes));
    }
    auto report = [&](char const* name, int ctas, float us) {
      std::printf("%s,%d,%d,%d,%.2f,%.0f\n", name, sh.k, sh.n, ctas, us, bytes / us / 1e3);
    };
    const int col_tiles = sh.n / 128;
    for (int ctas : {4, 6, 8}) {
      // splits as the dispatcher picks them: one wave of `ctas` CTAs per SM, a multiple of 8 k
      // blocks per split so every pattern sees the same work
      int splits = std::max(1, ctas * sms / col_tiles);
      int per = (k_blocks + splits - 1) / splits;
      per = (per + 7) / 8 * 8;
      splits = (k_blocks + per - 1) / per;
      dim3 grid(col_tiles, splits);
      auto prob = [&](int c) { return Problem{bufs[c], k_blocks, per, sink}; };
      if (ctas == 4) {
        const int smem4 = 4 * 16 * 512;
        CHECK(cudaFuncSetAttribute(k_cpasync<4>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   smem4));
        report("cpasync_s4", ctas, time_us([&](int c) {
                 k_cpasync<4><<<grid, 128, smem4>>>(prob(c));
               }, copies));
      }
      auto bulk = [&](auto kernel, int S, int KB, char const* name) {
        const int smem = 4 * S * 4 * KB * 512;
        CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
        report(name, ctas, time_us([&](int c) { kernel<<<grid, 128, smem>>>(prob(c)); }, copies));
      };
      bulk(k_bulk<4, 1, false>, 4, 1, "bulkwarp_s4_kb1");
      bulk(k_bulk<2, 2, false>, 2, 2, "bulkwarp_s2_kb2");
      bulk(k_bulk<4, 2, false>, 4, 2, "bulkwarp_s4_kb2");
      bulk(k_bulk<2, 4, false>, 2, 4, "bulkwarp_s2_kb4");
      bulk(k_bulk<4, 1, true>, 4, 1, "bulktile_s4_kb1");
      bulk(k_bulk<4, 2, true>, 4, 2, "bulktile_s4_kb2");
      report("ldg_d2", ctas, time_us([&](int c) { k_ldg<2><<<grid, 128>>>(prob(c)); }, copies));
      report("ldg_d4", ctas, time_us([&](int c) { k_ldg<4><<<grid, 128>>>(prob(c)); }, copies));
    }
    report("linear", 0, time_us([&](int c) {
             k_linear<<<sms * 8, 256>>>(bufs[c], int64_t(bytes / 16), sink);
           }, copies));
    for (auto& b : bufs) CHECK(cudaFree(b));
  }
  return 0;
}
