// Chooses a GEMM tile configuration and launches it. No kernel is instantiated here: the
// configurations live one per translation unit under generated/.

#include <algorithm>
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
constexpr int kWgmmaCount = sizeof(kGemmWgmmaInstances) / sizeof(kGemmWgmmaInstances[0]);
constexpr bool same_wgmma_tables() {
  if (kWgmmaCount != kGemmWgmmaCount || kGemmWgmmaFirst != kCount) return false;
  for (int i = 0; i < kWgmmaCount; ++i) {
    GemmWgmmaInstance const& g = kGemmWgmmaInstances[i];
    GemmWgmmaShape const& c = kGemmWgmmaConfigs[i];
    if (g.bm != c.bm || g.bn != c.bn || g.bk != c.bk || g.stages != c.stages ||
        g.f16 == nullptr || g.bf16 == nullptr)
      return false;
  }
  return true;
}
static_assert(same_wgmma_tables(),
              "generated/gemm_instances.hpp and generated/gemm_wgmma_config.inc disagree: rerun "
              "scripts/generate_kernels.py");

// The Hopper kernel's split-K factor for tile g: 1 where its tiles keep at least half the SMs
// busy; otherwise as many splits as make one wave, each at least kMinSplitTiles k tiles, at most
// kMaxSplits, none empty.
constexpr int kMinSplitTiles = 4;
constexpr int kMaxSplits = 16;
int wgmma_splits(GemmWgmmaInstance const& g, int m, int n, int k, int sms) {
  const int64_t tiles = gemm_tiles_of(m, n, g.bm, g.bn);
  if (2 * tiles >= sms) return 1;
  const int k_tiles = (k + g.bk - 1) / g.bk;
  const int64_t splits = std::min<int64_t>({sms / tiles, k_tiles / kMinSplitTiles, kMaxSplits});
  if (splits <= 1) return 1;
  const int per_split = int((k_tiles + splits - 1) / splits);
  return (k_tiles + per_split - 1) / per_split;
}

// With the Hopper kernel: gemm_wgmma_heuristic (gemm_configs.hpp). Otherwise the largest
// mma.sync tile whose tiles give every SM a CTA, the smallest when none does. The smallest Hopper
// tile thus runs at most one tile per SM (64-row tiles are at most twice the 128-row ones, which
// leave half the SMs idle there): what its 8-stage, one-CTA-per-SM configuration is made for.
// Measured on H100 (benchmarks/results/NOTES.md, session 21): 64x128 with 8 stages vs 4 (two
// CTAs per SM) 256x4096x4096 19.5 vs 23.9 us, 256x4096x14336 60.4 vs 75.7 (128x128 in 2 splits
// of 112 k tiles, chosen before: 64.3).
int heuristic(int m, int n, int sms, bool wgmma) {
  if (wgmma) return kGemmWgmmaFirst + gemm_wgmma_heuristic(m, n, sms);
  for (int i = 0; i < kCount; ++i) {
    GemmInstance const& g = kGemmInstances[i];
    if (gemm_tiles_of(m, n, g.bm, g.bn) >= sms) return i;
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
  if (config < -1 || config >= kGemmNamedConfigCount) return cudaErrorInvalidValue;
  if (config == -1) config = gemm_heuristic_config(params.m, params.n, params.k);
  if (is_gemm_wgmma_config(config)) {
    if (!gemm_wgmma_usable()) return cudaErrorNoKernelImageForDevice;
    GemmWgmmaInstance const& g = kGemmWgmmaInstances[config - kGemmWgmmaFirst];
    // The launcher refuses a split launch without a workspace.
    const int splits = wgmma_splits(g, params.m, params.n, params.k, current_sm_count());
    return params.dtype == HalfType::kFloat16 ? g.f16(params, splits, stream)
                                              : g.bf16(params, splits, stream);
  }
  GemmInstance const& g = kGemmInstances[config];
  return params.dtype == HalfType::kFloat16 ? g.f16(params, stream) : g.bf16(params, stream);
}

size_t gemm_workspace_bytes(GemmParams const& params, int config) {
  if (config == -1) config = gemm_heuristic_config(params.m, params.n, params.k);
  if (!is_gemm_wgmma_config(config)) return 0;
  GemmWgmmaInstance const& g = kGemmWgmmaInstances[config - kGemmWgmmaFirst];
  const int splits = wgmma_splits(g, params.m, params.n, params.k, current_sm_count());
  return splits > 1 ? size_t(splits) * size_t(params.m) * size_t(params.n) * sizeof(float) : 0;
}

int gemm_heuristic_config(int m, int n, int k) {
  return heuristic(m, n, current_sm_count(), gemm_wgmma_usable());
}

}  // namespace cute_gemm
