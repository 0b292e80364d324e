#pragma once
// The half-precision GEMM's compiled configurations as plain C++ (no CUDA, no torch): their tile
// shapes, names and the lookup by name. The op's `config` argument (csrc/ops/gemm_op.cpp) is
// checked against this list on every backend, so the CPU reference and a CPU-only build refuse
// exactly the names the CUDA kernel refuses; cute_gemm._C._gemm_configs() lists it.
//
// The list is generated/gemm_configs.inc, written by scripts/generate_kernels.py together with
// the kernels' instance table (generated/gemm_instances.hpp); gemm_dispatch.cu checks at compile
// time that both hold the same configurations in the same order, so an index means the same
// configuration here and in the launcher.

#include <string>
#include <string_view>

namespace cute_gemm {

struct GemmConfigShape {
  int bm, bn, bk, stages, warps_m, warps_n;
};

// Largest tiles first, as the heuristic (gemm_dispatch.cu) walks them.
inline constexpr GemmConfigShape kGemmConfigs[] = {
#define CG_GEMM_CONFIG(bm, bn, bk, s, wm, wn) {bm, bn, bk, s, wm, wn},
#include "kernels/gemm/generated/gemm_configs.inc"
#undef CG_GEMM_CONFIG
};

inline constexpr int kGemmConfigCount = int(sizeof(kGemmConfigs) / sizeof(kGemmConfigs[0]));

// The Hopper kernel (gemm_wgmma_kernel.cuh, sm_90a builds on compute capability 9.0): more
// configurations, indices kGemmWgmmaFirst.., after the mma.sync ones, the widest tile first.
struct GemmWgmmaShape {
  int bm, bn, bk, stages;
};
inline constexpr GemmWgmmaShape kGemmWgmmaConfigs[] = {
#define CG_GEMM_WGMMA_CONFIG(bm, bn, bk, s) {bm, bn, bk, s},
#include "kernels/gemm/generated/gemm_wgmma_config.inc"
#undef CG_GEMM_WGMMA_CONFIG
};
inline constexpr int kGemmWgmmaCount =
    int(sizeof(kGemmWgmmaConfigs) / sizeof(kGemmWgmmaConfigs[0]));
inline constexpr int kGemmWgmmaFirst = kGemmConfigCount;
// Every configuration the config argument can name.
inline constexpr int kGemmNamedConfigCount = kGemmConfigCount + kGemmWgmmaCount;
inline constexpr bool is_gemm_wgmma_config(int index) {
  return index >= kGemmWgmmaFirst && index < kGemmNamedConfigCount;
}

// "BMxBNxBK_sS_wWMxWN", e.g. "128x128x64_s3_w2x2"; the Hopper kernel's "wgmma_BMxBNxBK_sS".
// @pre 0 <= index < kGemmNamedConfigCount
inline std::string gemm_config_name(int index) {
  if (is_gemm_wgmma_config(index)) {
    GemmWgmmaShape const& w = kGemmWgmmaConfigs[index - kGemmWgmmaFirst];
    return "wgmma_" + std::to_string(w.bm) + "x" + std::to_string(w.bn) + "x" +
           std::to_string(w.bk) + "_s" + std::to_string(w.stages);
  }
  GemmConfigShape const& c = kGemmConfigs[index];
  return std::to_string(c.bm) + "x" + std::to_string(c.bn) + "x" + std::to_string(c.bk) + "_s" +
         std::to_string(c.stages) + "_w" + std::to_string(c.warps_m) + "x" +
         std::to_string(c.warps_n);
}

// The index of the configuration called `name`; -1 when none is (names are exact: no trimming,
// no case folding, so "" and " 64x64x32_s3_w2x2" are unknown).
inline int find_gemm_config(std::string_view name) {
  for (int i = 0; i < kGemmNamedConfigCount; ++i) {
    if (gemm_config_name(i) == name) return i;
  }
  return -1;
}

// Every name quoted, for messages: "'256x128x32_s4_w4x2', '128x128x64_s3_w2x2', ...".
inline std::string gemm_config_names_text() {
  std::string out;
  for (int i = 0; i < kGemmNamedConfigCount; ++i) {
    out += (i == 0 ? "'" : ", '") + gemm_config_name(i) + "'";
  }
  return out;
}

}  // namespace cute_gemm
