// Chooses a GEMM tile configuration and launches it. No kernel is instantiated here: the
// configurations live one per translation unit under generated/.

#include "kernels/device_info.hpp"
#include "kernels/gemm/gemm_configs.hpp"
#include "kernels/gemm/gemm_launch.hpp"
#include "kernels/gemm/generated/gemm_instances.hpp"

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

// The largest tile that still gives every SM a CTA; the smallest tile when none does.
int heuristic(int m, int n, int sms) {
  for (int i = 0; i < kCount; ++i) {
    GemmInstance const& g = kGemmInstances[i];
    const long long tiles = (long long)((m + g.bm - 1) / g.bm) * ((n + g.bn - 1) / g.bn);
    if (tiles >= sms) return i;
  }
  return kCount - 1;
}

}  // namespace

cudaError_t gemm_launch(GemmParams const& params, cudaStream_t stream, int config) {
  if (config < -1 || config >= kCount) return cudaErrorInvalidValue;
  GemmInstance const& g =
      kGemmInstances[config >= 0 ? config : heuristic(params.m, params.n, current_sm_count())];
  return params.dtype == HalfType::kFloat16 ? g.f16(params, stream) : g.bf16(params, stream);
}

int gemm_heuristic_config(int m, int n, int k) {
  (void)k;  // the tile choice depends on the output's tiles only
  return heuristic(m, n, current_sm_count());
}

}  // namespace cute_gemm
