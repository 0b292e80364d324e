#pragma once
// Facts about the current device, cached per device: launchers size their grids (split-K, tile
// choice) from them on every call, so they must not cost a driver query each time.

#include <cuda_runtime.h>

namespace cute_gemm {

// query(device) (a non-negative int, or -1 when it fails) for the current device, asked once per
// device and kept in `cache` (one slot per device, 0 = not asked yet); `fallback` when there is no
// usable device or the query fails.
template <class Query>
int cached_per_device(int (&cache)[64], int fallback, Query query) {
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= 64) {
    cudaGetLastError();  // no usable device: clear the error for the caller's next check
    return fallback;
  }
  if (cache[device] == 0) {
    const int v = query(device);
    if (v < 0) cudaGetLastError();
    cache[device] = (v < 0 ? fallback : v) + 1;
  }
  return cache[device] - 1;
}

// The current device's value of `Attr`, queried once per device; `fallback` when there is no
// usable device or the query fails.
template <cudaDeviceAttr Attr>
int cached_device_attribute(int fallback) {
  static int cached[64] = {};
  return cached_per_device(cached, fallback, [](int device) {
    int v = 0;
    return cudaDeviceGetAttribute(&v, Attr, device) == cudaSuccess && v >= 0 ? v : -1;
  });
}

inline int current_sm_count() {
  return cached_device_attribute<cudaDevAttrMultiProcessorCount>(132);
}

// The compute capability's major version (9 for Hopper); -1 without a device.
inline int current_cc_major() {
  return cached_device_attribute<cudaDevAttrComputeCapabilityMajor>(-1);
}

// The compute capability's minor version; -1 without a device.
inline int current_cc_minor() {
  return cached_device_attribute<cudaDevAttrComputeCapabilityMinor>(-1);
}

}  // namespace cute_gemm
