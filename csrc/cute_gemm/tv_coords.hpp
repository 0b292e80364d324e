#pragma once
// The row and the column of a tile element as layouts of their own.
//
// A TV layout (tv_layout.hpp, the MMA and copy traits) maps (thread, value) to the column-major
// index r + R * s of an (R, S) tile. A kernel that needs r and s themselves (to test them against
// the problem's edges, or to address a buffer laid out otherwise) would divide that index by R.
// Where every leaf of the layout moves only the row (stride d < R, all such leaves together
// staying below R) or only the column (d a multiple of R), r and s are layouts of (thread, value)
// too, with the same shape and the strides d % R and d / R: evaluating them costs no division,
// and with a static layout a thread's part and a value's part fold apart.
//   tile_row_layout<R>(tv)   strides d % R        tile_col_layout<R>(tv)   strides d / R
//   tile_coord<R>(tv, thr, v)   (row, column) of value v of thread thr
// Example: the m16n8k16 C layout ((4,8),(2,2)):((32,1),(16,8)) over (M16, N8) has rows
// ((4,8),(2,2)):((0,1),(0,8)) (g + 8 * (v / 2)) and columns ((4,8),(2,2)):((2,0),(1,0))
// (2 t + v % 2), lane = 4 g + t.
// They are what composing the projections (R, S):(1, 0) and (R, S):(0, 1) with the TV layout
// gives, the very same types for the kernels' TV layouts (a size-1 leaf aside, whose unused stride
// composition zeroes; tests/cpp/test_tv_coords.cpp), so the kernels use this one form: it needs no
// S and keeps the TV layout's shape, so the TV layout's hierarchical coordinates evaluate them.

#include "cute_gemm/layout.hpp"

namespace cute_gemm {

// The row (col == false) or column (col == true) part of `tv` over a tile of `rows` rows.
// @pre every stride is >= 0 and each leaf moves the row or the column, never both, and the row
// leaves together reach below `rows` (a CG_REQUIRE failure otherwise; a compile error when static).
CG_HOST_DEVICE constexpr DynLayout tile_coord_layout(DynLayout const& tv, int64_t rows, bool col) {
  CG_REQUIRE(rows >= 1, "tile_coord_layout: a tile of {a} rows", rows, 0);
  DynLayout out = tv;
  int64_t reach = 0;
  for (int i = 0; i < tv.stride.n; ++i) {
    if (tv.stride.kind[i] != DynTuple::kLeaf) continue;
    const int64_t d = tv.stride.value[i];
    CG_REQUIRE(d >= 0, "tile_coord_layout: negative stride {a}", d, 0);
    if (d % rows != 0) {
      CG_REQUIRE(d < rows,
                 "tile_coord_layout: stride {a} moves both the row and the column of a tile of "
                 "{b} rows",
                 d, rows);
      reach += (tv.shape.value[i] - 1) * d;
    }
    out.stride.value[i] = col ? d / rows : d % rows;
  }
  CG_REQUIRE(reach < rows, "tile_coord_layout: the row leaves reach row {a} of {b}", reach, rows);
  return out;
}

namespace detail {
template <class L, int Rows, bool Col>
struct TileCoordLayout {
  static constexpr DynLayout value = tile_coord_layout(to_dyn(L{}), Rows, Col);
};
}  // namespace detail

// (thread, value) -> row of the tile, for a static TV layout over a tile of Rows rows.
template <int Rows, class S, class D>
CG_HOST_DEVICE constexpr auto tile_row_layout(Layout<S, D> const&) {
  static_assert(is_static<Layout<S, D>>::value, "tile_row_layout: a static layout");
  return lift_layout<detail::TileCoordLayout<Layout<S, D>, Rows, false>>();
}

// (thread, value) -> column of the tile, for a static TV layout over a tile of Rows rows.
template <int Rows, class S, class D>
CG_HOST_DEVICE constexpr auto tile_col_layout(Layout<S, D> const&) {
  static_assert(is_static<Layout<S, D>>::value, "tile_col_layout: a static layout");
  return lift_layout<detail::TileCoordLayout<Layout<S, D>, Rows, true>>();
}

// (row, column) in the tile of value v of thread thr, coordinates of the modes of a static TV
// layout over a tile of Rows rows (flat or hierarchical, as the layout's modes take them).
// Example: tile_coord<16>(C{}, make_coord(1, 2), 3) == (10, 3) for the C layout above.
template <int Rows, class TV, class Thr, class V>
CG_HOST_DEVICE constexpr auto tile_coord(TV const& tv, Thr const& thr, V const& v) {
  return make_coord(tile_row_layout<Rows>(tv)(make_coord(thr, v)),
                    tile_col_layout<Rows>(tv)(make_coord(thr, v)));
}

}  // namespace cute_gemm
