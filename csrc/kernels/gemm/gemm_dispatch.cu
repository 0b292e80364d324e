// Chooses a GEMM tile configuration and launches it. No kernel is instantiated here: the
// configurations live one per translation unit under generated/.

#include <cstdio>

#include "kernels/gemm/gemm_launch.hpp"
#include "kernels/gemm/generated/gemm_instances.hpp"

namespace cute_gemm {

namespace {

int sm_count() {
  // Per device: the first query's answer for the current device.
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

// The largest tile that still gives every SM a CTA; the smallest tile when none does.
GemmInstance const& choose(int m, int n, int sms) {
  constexpr int count = sizeof(kGemmInstances) / sizeof(kGemmInstances[0]);
  for (int i = 0; i < count; ++i) {
    GemmInstance const& g = kGemmInstances[i];
    const long long tiles = (long long)((m + g.bm - 1) / g.bm) * ((n + g.bn - 1) / g.bn);
    if (tiles >= sms) return g;
  }
  return kGemmInstances[count - 1];
}

}  // namespace

cudaError_t gemm_launch(GemmParams const& params, cudaStream_t stream) {
  GemmInstance const& g = choose(params.m, params.n, sm_count());
  return params.dtype == HalfType::kFloat16 ? g.f16(params, stream) : g.bf16(params, stream);
}

char const* gemm_config_name(int m, int n, int k) {
  (void)k;
  static thread_local char buf[64];
  GemmInstance const& g = choose(m, n, sm_count());
  std::snprintf(buf, sizeof(buf), "%dx%dx%d_s%d_w%dx%d", g.bm, g.bn, g.bk, g.stages, g.warps_m,
                g.warps_n);
  return buf;
}

}  // namespace cute_gemm
