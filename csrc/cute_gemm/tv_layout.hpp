#pragma once
// Thread-value layouts of tiled MMAs and tiled copies, built with the layout algebra.
//
// A TV layout maps (thread, value) to the column-major index of an element of a tile:
//   (T, V) -> r + R * s  for a tile of R rows and S columns.
// TiledMMA and TiledCopy (mma_atom.hpp, copy_atom.hpp) lift these constexpr results into static
// layouts; the Python API binds them so the same maps can be drawn.

#include "cute_gemm/dyn_layout_algebra.hpp"

namespace cute_gemm {

// Which operand of D = A * B + C a TV layout describes. Rows/columns of each operand's tile:
// A (M, K), B (N, K), C (M, N).
enum class MmaOperand { kA = 0, kB = 1, kC = 2 };

// The TV layout of a tiled MMA for one operand.
//
// A warp-level atom with TV layout `atom_tv` : (T, V) -> (AR, AS) tile index is replicated over a
// grid of warps (warps_m x warps_n) and repeated (in values) to cover a tile of
// size(perm_r) x size(perm_s); perm_r / perm_s then permute the tile's rows / columns (CuTe's
// permutation Tile; compact n:1 layouts mean "no permutation").
//
// Natural order before the permutation, for operand C:
//   thread = (t_atom, wm, wn)        value = (v_atom, rep_m, rep_n)
//   row = atom_row(t_atom, v_atom) + AR * (wm + WM * rep_m)
//   col = atom_col(t_atom, v_atom) + AS * (wn + WN * rep_n)
// For A the column (K) has no warps and wn is a broadcast mode (stride 0); for B the rows are N
// (warps_n) and wm is the broadcast mode.
//
// @post thread mode is (T_atom, WM, WN), value mode (V_atom, rep_r, rep_s); for C every tile
// element is owned by exactly one (thread, value).
// Example: the m16n8k16 C atom ((4,8),(2,2)):((32,1),(16,8)) with 2x2 warps on a 32x32 tile
// gives threads ((4,8),2,2) and values ((2,2),1,2).
CG_HOST_DEVICE constexpr DynLayout tiled_mma_tv(DynLayout const& atom_tv, int64_t atom_r,
                                                int64_t atom_s, int64_t warps_m, int64_t warps_n,
                                                DynLayout const& perm_r, DynLayout const& perm_s,
                                                MmaOperand op) {
  const int64_t tile_r = size(perm_r), tile_s = size(perm_s);
  const int64_t warps_r = op == MmaOperand::kB ? warps_n : warps_m;
  const int64_t warps_s = op == MmaOperand::kC ? warps_n : 1;
  CG_REQUIRE(tile_r % (atom_r * warps_r) == 0,
             "tiled_mma: tile rows {a} are not a multiple of atom rows x warps ({b})", tile_r,
             atom_r * warps_r);
  CG_REQUIRE(tile_s % (atom_s * warps_s) == 0,
             "tiled_mma: tile columns {a} are not a multiple of atom columns x warps ({b})",
             tile_s, atom_s * warps_s);
  const int64_t rep_r = tile_r / (atom_r * warps_r);
  const int64_t rep_s = tile_s / (atom_s * warps_s);

  // The atom's (AR, AS) index embedded into the tile's natural column-major index.
  const DynLayout embed = make_dyn_layout_pair(make_dyn_layout(atom_r, 1),
                                               make_dyn_layout(atom_s, tile_r));
  const DynLayout atom_in_tile = composition(embed, atom_tv);

  // Warp modes: (wm, wn); the one that does not move this operand is broadcast (stride 0).
  const DynLayout wm = make_dyn_layout(warps_m, op == MmaOperand::kB ? 0 : atom_r);
  const DynLayout wn = make_dyn_layout(
      warps_n, op == MmaOperand::kA ? 0 : (op == MmaOperand::kB ? atom_r : atom_s * tile_r));

  DynLayout thr = append(make_dyn_layout_empty(), mode(atom_in_tile, 0));
  thr = append(append(thr, wm), wn);
  DynLayout val = append(make_dyn_layout_empty(), mode(atom_in_tile, 1));
  val = append(val, make_dyn_layout(rep_r, atom_r * warps_r));
  val = append(val, make_dyn_layout(rep_s, atom_s * warps_s * tile_r));
  const DynLayout natural = make_dyn_layout_pair(thr, val);

  // The permutation: natural (r, s) -> (perm_r(r), perm_s(s)) in the column-major tile index.
  DynLayout perm_s_scaled = perm_s;
  for (int i = 0; i < perm_s_scaled.stride.n; ++i)
    if (perm_s_scaled.stride.kind[i] == DynTuple::kLeaf) perm_s_scaled.stride.value[i] *= tile_r;
  const DynLayout perm = make_dyn_layout_pair(perm_r, perm_s_scaled);
  return composition(perm, natural);
}

// The TV layout of a tiled copy from a thread arrangement and a value arrangement, both over the
// (rows, columns) of the copy tile: thr_layout (TR, TS) -> thread id, val_layout (VR, VS) ->
// value id. The tile is (TR*VR, TS*VS); each thread owns a VR x VS block of values.
// Computed as CuTe defines it: invert the (row, col) -> thread + T * value map of the raked
// product, viewed with shape (T, V).
// Example: threads (32,4):(4,1), values (1,8):(1,1) -> (128,8):((4,32)->...) with thread t
// owning row t/4, columns 8*(t%4) .. +7 of a 32x32 tile.
CG_HOST_DEVICE constexpr DynLayout tiled_copy_tv(DynLayout const& thr_layout,
                                                 DynLayout const& val_layout) {
  const DynLayout mn = raked_product(thr_layout, val_layout);
  const DynLayout inv = right_inverse(mn);
  CG_REQUIRE(size(inv) == size(mn),
             "tiled_copy: the thread/value arrangement is not a bijection onto the tile ({a} of "
             "{b} elements reachable)",
             size(inv), size(mn));
  DynTuple tv_shape = make_dyn_tuple();
  tv_shape = append(tv_shape, make_dyn_int(size(thr_layout)));
  tv_shape = append(tv_shape, make_dyn_int(size(val_layout)));
  return composition(inv, make_dyn_layout(tv_shape));
}

// The (rows, columns) of the tile a tiled copy covers.
CG_HOST_DEVICE constexpr DynTuple tiled_copy_tile(DynLayout const& thr_layout,
                                                  DynLayout const& val_layout) {
  DynTuple t = make_dyn_tuple();
  for (int i = 0; i < 2; ++i) {
    const int64_t tr = rank(thr_layout) > i ? size(mode(thr_layout, i)) : 1;
    const int64_t vr = rank(val_layout) > i ? size(mode(val_layout, i)) : 1;
    t = append(t, make_dyn_int(tr * vr));
  }
  return t;
}

// Maps an atom's source (thread, value) to its reference (thread, value) index: the reference is
// the layout a tiled copy is expressed in (the destination registers of an ldmatrix are the MMA
// fragment), the source what each thread must address.
// ref2src = right_inverse(ref) o src.
CG_HOST_DEVICE constexpr DynLayout copy_ref_to_src(DynLayout const& ref_tv,
                                                   DynLayout const& src_tv) {
  return composition(right_inverse(ref_tv), src_tv);
}

// The source-side TV layout of a copy that fills a tiled MMA's fragments (ldmatrix into A or B).
//
// `mma_tv` is the MMA operand's TV layout from tiled_mma_tv: threads (T_atom, WM, WN), values
// (V_atom, rep_r, rep_s). One copy instruction serves `atom_threads` threads and moves
// `atom_values` values per thread, i.e. f = atom_values / V_atom MMA atoms along the rows (an
// ldmatrix.x4 of B fills two n8 atoms). Within an instruction, source (t, v) and reference (t, v)
// differ (ldmatrix's lanes address rows, its registers receive fragments); `ref2src` renumbers
// them. The result has the same top-level shape as mma_tv, with values
// (atom_values, rep_r / f, rep_s), so partitioning a tile with it walks copy instructions in the
// order of the MMA fragments: instruction (i, j) fills fragment atoms f*i .. f*i+f-1 of column j.
CG_HOST_DEVICE constexpr DynLayout tiled_mma_copy_src_tv(DynLayout const& mma_tv,
                                                         int64_t atom_threads,
                                                         int64_t atom_values,
                                                         DynLayout const& ref2src) {
  const DynLayout thr = mode(mma_tv, 0), val = mode(mma_tv, 1);
  const int64_t threads = size(thr);
  const int64_t v_atom = size(mode(val, 0));
  const int64_t rep_r = size(mode(val, 1)), rep_s = size(mode(val, 2));
  CG_REQUIRE(atom_values % v_atom == 0 && rep_r % (atom_values / v_atom) == 0,
             "copy atom of {a} values does not cover whole MMA atoms of {b} values", atom_values,
             v_atom);
  CG_REQUIRE(size(mode(thr, 0)) == atom_threads,
             "copy atom threads ({a}) differ from the MMA atom's ({b})", atom_threads,
             size(mode(thr, 0)));
  const int64_t f = atom_values / v_atom;
  // (t_src, v_src) of one instruction -> t_ref + threads * v_ref in mma_tv's domain.
  const DynLayout ref_index = make_dyn_layout_pair(make_dyn_layout(atom_threads, 1),
                                                   make_dyn_layout(atom_values, threads));
  const DynLayout h = composition(ref_index, ref2src);
  DynLayout g_thr = append(make_dyn_layout_empty(), mode(h, 0));
  g_thr = append(g_thr, make_dyn_layout(threads / atom_threads, atom_threads));
  DynLayout g_val = append(make_dyn_layout_empty(), mode(h, 1));
  g_val = append(g_val, make_dyn_layout(rep_r / f, threads * atom_values));
  g_val = append(g_val, make_dyn_layout(rep_s, threads * atom_values * (rep_r / f)));
  return composition(mma_tv, make_dyn_layout_pair(g_thr, g_val));
}

}  // namespace cute_gemm
