// Chooses a GEMM tile configuration and launches it. No kernel is instantiated here: the
// configurations live one per translation unit under generated/.

#include <atomic>
#include <cstdio>

#include "kernels/device_info.hpp"
#include "kernels/gemm/gemm_launch.hpp"
#include "kernels/gemm/generated/gemm_instances.hpp"

namespace cute_gemm {

namespace {

constexpr int kCount = sizeof(kGemmInstances) / sizeof(kGemmInstances[0]);

// -1: the heuristic; otherwise the index of the configuration every launch uses.
std::atomic<int> g_override{-1};

// The largest tile that still gives every SM a CTA; the smallest tile when none does.
GemmInstance const& heuristic(int m, int n, int sms) {
  constexpr int count = kCount;
  for (int i = 0; i < count; ++i) {
    GemmInstance const& g = kGemmInstances[i];
    const long long tiles = (long long)((m + g.bm - 1) / g.bm) * ((n + g.bn - 1) / g.bn);
    if (tiles >= sms) return g;
  }
  return kGemmInstances[count - 1];
}

GemmInstance const& choose(int m, int n) {
  const int forced = g_override.load(std::memory_order_relaxed);
  if (forced >= 0 && forced < kCount) return kGemmInstances[forced];
  return heuristic(m, n, current_sm_count());
}

// "BMxBNxBK_sS_wWMxWN" of each configuration, written once.
struct ConfigNames {
  char names[kCount][64];
  ConfigNames() {
    for (int i = 0; i < kCount; ++i) {
      GemmInstance const& g = kGemmInstances[i];
      std::snprintf(names[i], sizeof(names[i]), "%dx%dx%d_s%d_w%dx%d", g.bm, g.bn, g.bk,
                    g.stages, g.warps_m, g.warps_n);
    }
  }
};

ConfigNames const& config_names() {
  static const ConfigNames names;
  return names;
}

int index_of(GemmInstance const& g) { return int(&g - kGemmInstances); }

}  // namespace

cudaError_t gemm_launch(GemmParams const& params, cudaStream_t stream) {
  GemmInstance const& g = choose(params.m, params.n);
  return params.dtype == HalfType::kFloat16 ? g.f16(params, stream) : g.bf16(params, stream);
}

char const* gemm_config_name(int m, int n, int k) {
  (void)k;
  return config_names().names[index_of(choose(m, n))];
}

int gemm_config_count() { return kCount; }

char const* gemm_config_name_at(int index) {
  return index >= 0 && index < kCount ? config_names().names[index] : nullptr;
}

bool gemm_set_config_override(int index) {
  if (index < -1 || index >= kCount) return false;
  g_override.store(index, std::memory_order_relaxed);
  return true;
}

int gemm_config_override() { return g_override.load(std::memory_order_relaxed); }

}  // namespace cute_gemm
