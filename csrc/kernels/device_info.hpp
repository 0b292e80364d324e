#pragma once
// Facts about the current device, cached per device: launchers size their grids (split-K, tile
// choice) from them on every call, so they must not cost a driver query each time.

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

// The current device's compute capability major version (9 for Hopper), cached per device.
inline int current_cc_major() {
  static int cached[64] = {};
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= 64) return 0;
  if (cached[device] == 0) {
    int v = 0;
    cudaDeviceGetAttribute(&v, cudaDevAttrComputeCapabilityMajor, device);
    cached[device] = v > 0 ? v : -1;
  }
  return cached[device];
}

}  // namespace cute_gemm
