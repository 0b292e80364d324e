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

#include <cstdint>
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
// wave_fill: a tile the heuristic takes only in place of the widest one, where it runs in no
// more rounds (gemm_wgmma_heuristic).
struct GemmWgmmaShape {
  int bm, bn, bk, stages;
  bool wave_fill;
};
inline constexpr GemmWgmmaShape kGemmWgmmaConfigs[] = {
#define CG_GEMM_WGMMA_CONFIG(bm, bn, bk, s, wave_fill) {bm, bn, bk, s, wave_fill},
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

// The Hopper kernel's tiles of a (bm, bn) tile over an [m, n] output.
inline constexpr int64_t gemm_tiles_of(int m, int n, int bm, int bn) {
  return int64_t((m + bm - 1) / bm) * ((n + bn - 1) / bn);
}

// Rounds of a grid of one CTA per SM (every Hopper configuration): ceil(tiles / sms).
inline constexpr int64_t gemm_wgmma_rounds(GemmWgmmaShape const& g, int m, int n, int sms) {
  return (gemm_tiles_of(m, n, g.bm, g.bn) + sms - 1) / sms;
}

// The Hopper kernel's configuration for an [m, n] output on `sms` SMs, an index into
// kGemmWgmmaConfigs: the widest tile (wave-fill tiles aside) whose tiles keep at least half the
// SMs busy (a wave of 128 128x256 tiles on 132 SMs beats two of 128x128 ones), else the smallest
// (split-K makes up for the rest: gemm_dispatch.cu); then, where that is the widest tile, a
// wave-fill tile of its rows that runs in no more rounds: each round is then one narrower tile.
// H200, 4096x28672 bf16 (Llama-3-8B's gate/up; NOTES.md session 72): 128x224 against 128x256 at
// M = 256 110.6 / 115.5 us (2 rounds each), M = 512 210.3 / 216.7 (4), M = 768 302.6 / 310.4 (6);
// at M = 1024 it would take 8 rounds to 7.
inline constexpr int gemm_wgmma_heuristic(int m, int n, int sms) {
  int pick = -1, last = 0, widest = -1;
  for (int i = 0; i < kGemmWgmmaCount; ++i) {
    GemmWgmmaShape const& g = kGemmWgmmaConfigs[i];
    if (g.wave_fill) continue;
    if (widest < 0) widest = i;
    last = i;
    if (pick < 0 && 2 * gemm_tiles_of(m, n, g.bm, g.bn) >= sms) pick = i;
  }
  if (pick < 0) return last;
  if (pick != widest) return pick;
  GemmWgmmaShape const& w = kGemmWgmmaConfigs[widest];
  for (int i = 0; i < kGemmWgmmaCount; ++i) {
    GemmWgmmaShape const& g = kGemmWgmmaConfigs[i];
    if (g.wave_fill && g.bm == w.bm && g.bn < w.bn &&
        gemm_wgmma_rounds(g, m, n, sms) <= gemm_wgmma_rounds(w, m, n, sms))
      return i;
  }
  return pick;
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
