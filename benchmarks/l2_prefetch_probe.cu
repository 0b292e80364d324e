// l2_prefetch_probe: can a weight read that follows DRAM-idle work (attention, norms) start from
// the L2 instead of DRAM, if its bytes are prefetched into the L2 before that work runs?
// Standalone (no torch): nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a
// -o l2_prefetch_probe benchmarks/l2_prefetch_probe.cu
//
// A decode step alternates weight streams (the GEMMs) with kernels that barely touch DRAM. Each
// scenario is a CUDA graph of R steps over R copies of the weight (R x S > 2 x L2, so nothing is
// left in the L2 by the previous step), replayed; times are per step, median of 9 replays.
//   base   [spin T] [read W]
//   pre    [prefetch W] [spin T] [read W]          a separate kernel issues the prefetches
//   tail0  [read X] [spin T] [read W]              X is the previous GEMM's weight (same size)
//   tail   [read X, then prefetch W] [spin T] [read W]   the previous GEMM prefetches at its end
//   twice  [read W] [spin T] [read W]              the second read finds W in the L2 (the ceiling)
//   spin   [spin T]
//   read   [read W]
// spin is a kernel that keeps every SM busy for T us without memory traffic (attention and norms
// at batch 1 move a few MB at most). Three ways to prefetch are compared (PrefetchMode).

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "cuda_check.cuh"

// How the calling CTA prefetches its share of [p, p + bytes) (each CTA an equal contiguous slice):
//   kBulk   one cp.async.bulk.prefetch.L2 per thread of a 16-byte-aligned sub-slice
//   kLine   prefetch.global.L2 of every 128-byte line, dealt round-robin to the threads
//   kLast   as kLine with prefetch.global.L2::evict_last
enum PrefetchMode { kBulk, kLine, kLast };
char const* kModeNames[] = {"bulk", "line", "last"};

__device__ __forceinline__ void prefetch_share(char const* p, size_t bytes, int mode) {
  size_t slice = (bytes / gridDim.x + 127) & ~size_t(127);
  size_t begin = size_t(blockIdx.x) * slice;
  if (begin >= bytes) return;
  size_t end = begin + slice < bytes ? begin + slice : bytes;
  if (mode == kBulk) {
    size_t sub = ((end - begin) / blockDim.x + 15) & ~size_t(15);
    size_t b = begin + threadIdx.x * sub;
    if (b < end) {
      uint32_t n = uint32_t(end - b < sub ? end - b : sub) & ~15u;
      if (n > 0) {
        asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p + b), "r"(n) : "memory");
      }
    }
    return;
  }
  for (size_t o = begin + threadIdx.x * 128; o < end; o += blockDim.x * 128) {
    if (mode == kLine) {
      asm volatile("prefetch.global.L2 [%0];" ::"l"(p + o));
    } else {
      asm volatile("prefetch.global.L2::evict_last [%0];" ::"l"(p + o));
    }
  }
}

__global__ void read_kernel(uint4 const* w, size_t n16, uint32_t* sink, char const* pf,
                            size_t pf_bytes, int mode) {
  uint32_t acc = 0;
  size_t stride = size_t(gridDim.x) * blockDim.x;
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; i + 3 * stride < n16; i += 4 * stride) {
    uint4 v[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) v[u] = __ldg(w + i + u * stride);
#pragma unroll
    for (int u = 0; u < 4; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  for (; i < n16; i += stride) {
    uint4 v = __ldg(w + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x9e3779b9u) *sink = acc;
  if (pf_bytes > 0) prefetch_share(pf, pf_bytes, mode);
}

__global__ void prefetch_kernel(char const* p, size_t bytes, int mode) {
  prefetch_share(p, bytes, mode);
}

__global__ void spin_kernel(uint64_t ns, uint32_t* sink) {
  uint64_t t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  uint32_t x = threadIdx.x;
  do {
    x = x * 1664525u + 1013904223u;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (t - t0 < ns);
  if (x == 0x12345u) *sink = x;
}

struct Setup {
  int sms;
  size_t bytes;  // one weight copy
  int copies;
  std::vector<char*> w, x;
  uint32_t* sink;
};

enum Scenario { kBase, kPre, kTail0, kTail, kTwice, kSpin, kRead, kNum };
char const* kNames[] = {"base", "pre", "tail0", "tail", "twice", "spin", "read"};

float time_scenario(Setup& s, Scenario sc, uint64_t spin_ns, int mode, cudaStream_t st) {
  int read_blocks = s.sms * 4, threads = 512;
  size_t n16 = s.bytes / 16;
  cudaGraph_t g;
  CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
  for (int r = 0; r < s.copies; ++r) {
    char* w = s.w[r];
    char* x = s.x[r];
    if (sc == kPre) prefetch_kernel<<<s.sms, 128, 0, st>>>(w, s.bytes, mode);
    if (sc == kTail0 || sc == kTail || sc == kTwice) {
      char* first = sc == kTwice ? w : x;
      read_kernel<<<read_blocks, threads, 0, st>>>(reinterpret_cast<uint4 const*>(first), n16,
                                                   s.sink, w, sc == kTail ? s.bytes : 0, mode);
    }
    if (sc != kRead) spin_kernel<<<s.sms, 128, 0, st>>>(spin_ns, s.sink);
    if (sc != kSpin) {
      read_kernel<<<read_blocks, threads, 0, st>>>(reinterpret_cast<uint4 const*>(w), n16, s.sink,
                                                   nullptr, 0, mode);
    }
  }
  CHECK(cudaStreamEndCapture(st, &g));
  cudaGraphExec_t ge;
  CHECK(cudaGraphInstantiate(&ge, g, 0));
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  std::vector<float> ms;
  for (int rep = 0; rep < 11; ++rep) {
    CHECK(cudaEventRecord(a, st));
    CHECK(cudaGraphLaunch(ge, st));
    CHECK(cudaEventRecord(b, st));
    CHECK(cudaEventSynchronize(b));
    float t;
    CHECK(cudaEventElapsedTime(&t, a, b));
    if (rep >= 2) ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  CHECK(cudaGraphExecDestroy(ge));
  CHECK(cudaGraphDestroy(g));
  return ms[ms.size() / 2] * 1000.f / s.copies;  // us per step
}

int main() {
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("%s, %d SMs, L2 %d MB\n", prop.name, prop.multiProcessorCount,
              prop.l2CacheSize >> 20);
  cudaStream_t st;
  CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  for (double mb : {4.4, 8.7, 13.0, 20.0, 30.0}) {
    Setup s;
    s.sms = prop.multiProcessorCount;
    s.bytes = size_t(mb * 1e6) / 4096 * 4096;
    s.copies = std::max(8, int(2 * 4 * double(prop.l2CacheSize) / s.bytes) + 1);
    CHECK(cudaMalloc(&s.sink, 4));
    for (int r = 0; r < s.copies; ++r) {
      char *w, *x;
      CHECK(cudaMalloc(&w, s.bytes));
      CHECK(cudaMalloc(&x, s.bytes));
      CHECK(cudaMemset(w, r + 1, s.bytes));
      CHECK(cudaMemset(x, r + 7, s.bytes));
      s.w.push_back(w);
      s.x.push_back(x);
    }
    for (int mode : {kBulk, kLine, kLast})
    for (uint64_t spin_us : {4, 10}) {
      float t[kNum];
      for (int sc = 0; sc < kNum; ++sc) {
        t[sc] = time_scenario(s, Scenario(sc), spin_us * 1000, mode, st);
      }
      std::printf("W %5.1f MB %s spin %2llu us |", mb, kModeNames[mode],
                  (unsigned long long)spin_us);
      for (int sc = 0; sc < kNum; ++sc) std::printf(" %s %6.2f", kNames[sc], t[sc]);
      // What the read of W costs inside each sequence, with the other kernels' times taken off.
      std::printf(" | W after spin: base %5.2f pre %5.2f L2-hot %5.2f | tail %5.2f vs tail0 "
                  "%5.2f us",
                  t[kBase] - t[kSpin], t[kPre] - t[kSpin], t[kTwice] - t[kSpin] - t[kRead],
                  t[kTail] - t[kSpin] - t[kRead], t[kTail0] - t[kSpin] - t[kRead]);
      std::printf(" (%.0f GB/s alone)\n", s.bytes / (t[kRead] * 1e3));
    }
    for (int r = 0; r < s.copies; ++r) {
      CHECK(cudaFree(s.w[r]));
      CHECK(cudaFree(s.x[r]));
    }
    CHECK(cudaFree(s.sink));
  }
  return 0;
}
