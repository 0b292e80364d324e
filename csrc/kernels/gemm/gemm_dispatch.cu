// Chooses a GEMM tile configuration and launches it. No kernel is instantiated here: the
// configurations live one per translation unit under generated/.

#include <cstdint>

#include "kernels/device_info.hpp"
#include "kernels/gemm/gemm_configs.hpp"
#include "kernels/gemm/gemm_launch.hpp"
#include "kernels/gemm/generated/gemm_instances.hpp"
#include "kernels/tma_map.hpp"

namespace cute_gemm {

namespace {

constexpr int kCount = sizeof(kGemmInstances) / sizeof(kGemmInstances[0]);

// The op checks `config` names against kGemmConfigs (gemm_configs.hpp, from gemm_configs.inc)
// and passes their index here: both tables must list the same configurations in the same order,
// and every configuration must run both dtypes (gemm_launch never falls back to another one).
constexpr bool same_tables() {
  if (kCount != kGemmConfigCount) return false;
  for (int i = 0; i < kCount; ++i) {
    GemmInstance const& g = kGemmInstances[i];
    GemmConfigShape const& c = kGemmConfigs[i];
    if (g.bm != c.bm || g.bn != c.bn || g.bk != c.bk || g.stages != c.stages ||
        g.warps_m != c.warps_m || g.warps_n != c.warps_n || g.f16 == nullptr ||
        g.bf16 == nullptr)
      return false;
  }
  return true;
}
static_assert(same_tables(), "generated/gemm_instances.hpp and generated/gemm_configs.inc "
                             "disagree: rerun scripts/generate_kernels.py");
static_assert(kGemmWgmmaInstance.bm == kGemmWgmma.bm && kGemmWgmmaInstance.bn == kGemmWgmma.bn &&
                  kGemmWgmmaInstance.bk == kGemmWgmma.bk &&
                  kGemmWgmmaInstance.stages == kGemmWgmma.stages && kGemmWgmmaConfig == kCount,
              "generated/gemm_instances.hpp and generated/gemm_wgmma_config.inc disagree");

int64_t tiles_of(int m, int n, int bm, int bn) {
  return int64_t((m + bm - 1) / bm) * ((n + bn - 1) / bn);
}

// The Hopper kernel where it runs and its tiles give every SM a CTA; otherwise the largest
// mma.sync tile that still does, the smallest when none does.
int heuristic(int m, int n, int sms, bool wgmma) {
  if (wgmma && tiles_of(m, n, kGemmWgmma.bm, kGemmWgmma.bn) >= sms) return kGemmWgmmaConfig;
  for (int i = 0; i < kCount; ++i) {
    GemmInstance const& g = kGemmInstances[i];
    if (tiles_of(m, n, g.bm, g.bn) >= sms) return i;
  }
  return kCount - 1;
}

}  // namespace

bool gemm_wgmma_usable() {
#if defined(CUTE_GEMM_WITH_SM90A)
  return current_cc_major() == 9 && current_cc_minor() == 0 && tensor_map_encoder() != nullptr;
#else
  return false;
#endif
}

cudaError_t gemm_launch(GemmParams const& params, cudaStream_t stream, int config) {
  if (config < -1 || config > kGemmWgmmaConfig) return cudaErrorInvalidValue;
  if (config == -1) config = gemm_heuristic_config(params.m, params.n, params.k);
  if (config == kGemmWgmmaConfig) {
    if (!gemm_wgmma_usable()) return cudaErrorNoKernelImageForDevice;
    return params.dtype == HalfType::kFloat16 ? kGemmWgmmaInstance.f16(params, stream)
                                              : kGemmWgmmaInstance.bf16(params, stream);
  }
  GemmInstance const& g = kGemmInstances[config];
  return params.dtype == HalfType::kFloat16 ? g.f16(params, stream) : g.bf16(params, stream);
}

int gemm_heuristic_config(int m, int n, int k) {
  (void)k;  // the tile choice depends on the output's tiles only
  return heuristic(m, n, current_sm_count(), gemm_wgmma_usable());
}

}  // namespace cute_gemm
