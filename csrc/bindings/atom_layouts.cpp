// The typed (static) layouts of the atom traits and of each GEMM configuration, converted with
// to_dyn for the Python API. See atom_layouts.hpp.
//
// kernels/gemm/gemm_config.hpp is CUDA-free, so the kernels' own GemmConfig is instantiated here
// for each configuration in generated/gemm_configs.inc: Python compares its constructions with
// what the kernels are actually compiled with. Kept out of layout_bindings.cpp (and free of
// pybind11) so that the template-heavy part compiles in parallel with it.

#include "bindings/atom_layouts.hpp"

#include <stdexcept>

#include "cute_gemm/copy_traits.hpp"
#include "cute_gemm/mma_traits_sm80.hpp"
#include "kernels/gemm/gemm_config.hpp"

namespace cute_gemm {
namespace {

template <class Traits>
MmaAtomLayouts mma_layouts_of() {
  MmaAtomLayouts r;
  using MNK = typename Traits::Shape_MNK;
  r.m = int(decltype(size<0>(MNK{}))::value);
  r.n = int(decltype(size<1>(MNK{}))::value);
  r.k = int(decltype(size<2>(MNK{}))::value);
  r.threads = int(decltype(size(typename Traits::ThrID{}))::value);
  r.a = to_dyn(typename Traits::ALayout{});
  r.b = to_dyn(typename Traits::BLayout{});
  r.c = to_dyn(typename Traits::CLayout{});
  return r;
}

template <class Atom>
CopyAtomLayouts copy_layouts_of(int tile_r, int tile_s) {
  CopyAtomLayouts r;
  r.threads = Atom::kThreads;
  r.values = Atom::kValues;
  r.tile_r = tile_r;
  r.tile_s = tile_s;
  r.src = to_dyn(typename Atom::SrcLayout{});
  r.ref = to_dyn(typename Atom::RefLayout{});
  return r;
}

template <int BM, int BN, int BK, int S, int WM, int WN>
GemmConfigLayouts config_layouts() {
  using Cfg = GemmConfig<uint16_t, SM80_16x8x16_F32F16F16F32_TN, BM, BN, BK, S, WM, WN>;
  using Mma = typename Cfg::Mma;
  GemmConfigLayouts r;
  r.name = std::to_string(BM) + "x" + std::to_string(BN) + "x" + std::to_string(BK) + "_s" +
           std::to_string(S) + "_w" + std::to_string(WM) + "x" + std::to_string(WN);
  r.bm = BM, r.bn = BN, r.bk = BK, r.stages = S, r.warps_m = WM, r.warps_n = WN;
  r.threads = Cfg::kThreads;
  r.mma_a_tv = to_dyn(typename Mma::LayoutA_TV{});
  r.mma_b_tv = to_dyn(typename Mma::LayoutB_TV{});
  r.mma_c_tv = to_dyn(typename Mma::LayoutC_TV{});
  r.ldsm_a_src_tv = to_dyn(typename Cfg::CopyA::LayoutSrcTV{});
  r.ldsm_b_src_tv = to_dyn(typename Cfg::CopyB::LayoutSrcTV{});
  r.g2s_tv = to_dyn(typename Cfg::G2S::LayoutTV{});
  r.s2g_tv = to_dyn(typename Cfg::S2G::LayoutTV{});
  r.g2s_tile_r = Cfg::G2S::kTileR, r.g2s_tile_s = Cfg::G2S::kTileS;
  r.s2g_tile_r = Cfg::S2G::kTileR, r.s2g_tile_s = Cfg::S2G::kTileS;
  r.smem_a = to_dyn(typename Cfg::SmemA{});
  r.smem_b = to_dyn(typename Cfg::SmemB{});
  r.smem_c = to_dyn(typename Cfg::SmemC{});
  return r;
}

}  // namespace

std::vector<std::string> mma_atom_names() { return {"m16n8k16"}; }

MmaAtomLayouts mma_atom_layouts(std::string const& name) {
  if (name == "m16n8k16") return mma_layouts_of<MMA_Traits<SM80_16x8x16_F32F16F16F32_TN>>();
  throw std::invalid_argument("mma_atom_layouts: unknown MMA atom '" + name +
                              "' (known: 'm16n8k16')");
}

CopyAtomLayouts ldmatrix_layouts(std::string const& operand) {
  if (operand == "A") return copy_layouts_of<LdsmA_x4>(16, 16);
  if (operand == "B") return copy_layouts_of<LdsmB_x4>(16, 16);
  throw std::invalid_argument("ldmatrix_layouts: operand must be 'A' or 'B', got '" + operand +
                              "'");
}

std::vector<GemmConfigLayouts> gemm_config_layouts() {
  std::vector<GemmConfigLayouts> out;
#define CG_GEMM_CONFIG(bm, bn, bk, s, wm, wn) \
  out.push_back(config_layouts<bm, bn, bk, s, wm, wn>());
#include "kernels/gemm/generated/gemm_configs.inc"
#undef CG_GEMM_CONFIG
  return out;
}

}  // namespace cute_gemm
