#pragma once
// The layouts of the C++ atom traits and of every GEMM kernel configuration, as DynLayouts for
// the Python API (cute_gemm._C.atoms, cute_gemm/atoms.py).
//
// Everything here is read off the typed, static layouts the kernels are compiled with
// (to_dyn(Traits::Layout), to_dyn(GemmConfig::...)), so Python can check its own constructions of
// the same maps against them. The computation lives in atom_layouts.cpp, the only translation unit
// that instantiates the typed layer for this purpose; this header needs only the Dyn core.

#include <string>
#include <vector>

#include "cute_gemm/dyn_layout.hpp"
#include "cute_gemm/swizzle.hpp"

namespace cute_gemm {

// An MMA atom's fragment layouts: (T, V) -> column-major index of the operand tile
// (A: (M, K), B: (N, K), C: (M, N)).
struct MmaAtomLayouts {
  int m = 0, n = 0, k = 0, threads = 0;
  DynLayout a, b, c;
};

// A copy atom's source and reference layouts, (T, V) -> index of the instruction's tile.
struct CopyAtomLayouts {
  int threads = 0, values = 0;
  int tile_r = 0, tile_s = 0;  // the instruction's tile (rows, cols)
  DynLayout src, ref;
};

// Every map one GemmConfig<uint16_t, SM80_16x8x16_F32F16F16F32_TN, ...> uses.
struct GemmConfigLayouts {
  std::string name;  // "BMxBNxBK_sS_wWMxWN", as gemm_dispatch.cu names configurations
  int bm = 0, bn = 0, bk = 0, stages = 0, warps_m = 0, warps_n = 0, threads = 0;
  DynLayout mma_a_tv, mma_b_tv, mma_c_tv;  // Mma::LayoutA/B/C_TV
  DynLayout ldsm_a_src_tv, ldsm_b_src_tv;  // CopyA/B::LayoutSrcTV
  DynLayout g2s_tv, s2g_tv;                // G2S/S2G::LayoutTV
  int g2s_tile_r = 0, g2s_tile_s = 0, s2g_tile_r = 0, s2g_tile_s = 0;
  DynComposedLayout smem_a, smem_b, smem_c;  // SmemA/B/C
};

// "m16n8k16" (the fp16 and bf16 atoms share their layouts). Throws std::invalid_argument for an
// unknown name.
MmaAtomLayouts mma_atom_layouts(std::string const& name);
std::vector<std::string> mma_atom_names();

// "A" or "B": the ldmatrix.x4 atoms that fill m16n8k16 fragments. Throws std::invalid_argument.
CopyAtomLayouts ldmatrix_layouts(std::string const& operand);

// One entry per CG_GEMM_CONFIG of kernels/gemm/generated/gemm_configs.inc, in that order.
std::vector<GemmConfigLayouts> gemm_config_layouts();

}  // namespace cute_gemm
