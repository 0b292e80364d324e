#pragma once
// The row and the column of a layout into a tile, as two layouts: for L mapping into the
// column-major index r + Rows * c of a (Rows, Cols) tile,
//   tile_rows<Rows>(L) : x -> r        tile_cols<Rows>(L) : x -> c
// with L's shape and the strides d % Rows and d / Rows. A kernel evaluates them at its thread index
// and gets each coordinate of its values without a division or remainder at run time (the value
// part of a static layout folds to a constant).
// @pre every stride of L moves along one axis only (d < Rows or d % Rows == 0), so that
//      L(x) == tile_rows(L)(x) + Rows * tile_cols(L)(x); static_asserted, with
//      cosize(tile_rows(L)) <= Rows.
// Example: the m16n8k16 C map ((4,8),(2,2)) : ((32,1),(16,8)) on the (16, 8) tile has rows
// ((4,8),(2,2)) : ((0,1),(0,8)) and columns ((4,8),(2,2)) : ((2,0),(1,0)).

#include "cute_gemm/layout.hpp"

namespace cute_gemm {

namespace detail {
template <int Rows, bool Cols, class D>
CG_HOST_DEVICE constexpr auto tile_axis_stride(D const& d) {
  if constexpr (is_tuple<D>::value) {
    return transform(d, [](auto const& di) { return tile_axis_stride<Rows, Cols>(di); });
  } else {
    static_assert(is_int_constant<D>::value, "tile_rows / tile_cols: a static layout");
    static_assert(D::value >= 0 && (D::value < Rows || D::value % Rows == 0),
                  "tile_rows / tile_cols: a stride moves along both axes of the tile");
    return Int<Cols ? D::value / Rows : D::value % Rows>{};
  }
}
}  // namespace detail

template <int Rows, class S, class D>
CG_HOST_DEVICE constexpr auto tile_rows(Layout<S, D> const& l) {
  const auto r = make_layout(l.shape(), detail::tile_axis_stride<Rows, false>(l.stride()));
  static_assert(decltype(cosize(r))::value <= Rows, "tile_rows: the rows overflow the tile");
  return r;
}

template <int Rows, class S, class D>
CG_HOST_DEVICE constexpr auto tile_cols(Layout<S, D> const& l) {
  (void)tile_rows<Rows>(l);  // the same precondition
  return make_layout(l.shape(), detail::tile_axis_stride<Rows, true>(l.stride()));
}

}  // namespace cute_gemm
