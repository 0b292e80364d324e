#pragma once
// The current device's multiprocessor count, cached per device: launchers size their grids
// (split-K, tile choice) from it on every call, so it must not cost a driver query each time.

#include <cuda_runtime.h>

namespace cute_gemm {

inline int current_sm_count() {
  static int cached[64] = {};
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= 64) return 132;
  if (cached[device] == 0) {
    int n = 0;
    cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device);
    cached[device] = n > 0 ? n : 132;
  }
  return cached[device];
}

}  // namespace cute_gemm
