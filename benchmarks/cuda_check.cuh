#pragma once
// CHECK(call): the standalone CUDA probes' error check (stream_probe.cu, l2_prefetch_probe.cu):
// a failed CUDA runtime call prints where and why, then exits 1.

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#define CHECK(x)                                                                          \
  do {                                                                                    \
    cudaError_t e_ = (x);                                                                 \
    if (e_ != cudaSuccess) {                                                              \
      std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_));    \
      std::exit(1);                                                                       \
    }                                                                                     \
  } while (0)
