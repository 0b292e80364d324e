#pragma once
// Layout<Shape, Stride>: the typed layout, a function from coordinates to offsets,
// L(c) = sum_k c_k * d_k over the leaves (an integer coordinate is split colexicographically).
//
// A static layout (every shape and stride entry an Int<N>) is an empty type: its offsets are
// computed at compile time and it costs no registers. Dynamic entries are stored.
//   Layout<Shape<_8, _4>, Stride<_4, _1>> l;      // 8x4 row-major, empty
//   l(_3{}, _2{})                                 // Int<14>
//   l(17)                                         // 17 -> (1,2) -> 1*4 + 2*1 == 6
//   make_layout(make_shape(m, _32{}), make_stride(ld, _1{}))(i, j)   // i*ld + j, run time
//   l(_, 2)                                       // the sub-layout _8:_4 (a slice)
// The algebra (layout_algebra.hpp) lifts the DynLayout algebra to these types.

#include <cstdio>

#include "cute_gemm/dyn_layout.hpp"
#include "cute_gemm/int_tuple.hpp"
#include "cute_gemm/layout_print.hpp"

namespace cute_gemm {

// Tags for make_layout(shape, LayoutLeft{}) (column-major) and LayoutRight{} (row-major).
struct LayoutLeft {};
struct LayoutRight {};

template <class Shape, class Stride = decltype(compact_col_major(std::declval<Shape>()))>
struct Layout;

template <class T>
struct is_layout : std::false_type {};
template <class S, class D>
struct is_layout<Layout<S, D>> : std::true_type {};

template <class S, class D>
struct is_static<Layout<S, D>>
    : std::integral_constant<bool, is_static<S>::value && is_static<D>::value> {};

template <class C, class S, class D>
CG_HOST_DEVICE constexpr auto slice(C const& c, Layout<S, D> const& l);

template <class Shape, class Stride>
struct Layout : private tuple<Shape, Stride> {
  static_assert(is_congruent<Shape, Stride>::value, "Layout: shape and stride are not congruent");
  static_assert(!contains_underscore<Shape>::value && !contains_underscore<Stride>::value,
                "Layout: `_` is not allowed in a shape or stride");

  using shape_type = Shape;
  using stride_type = Stride;
  static constexpr int rank = is_tuple<Shape>::value ? int(tuple_size<Shape>::value) : 1;

  Layout() = default;
  CG_HOST_DEVICE constexpr Layout(Shape const& s, Stride const& d) : tuple<Shape, Stride>(s, d) {}

  CG_HOST_DEVICE constexpr decltype(auto) shape() const { return get<0>(storage()); }
  CG_HOST_DEVICE constexpr decltype(auto) stride() const { return get<1>(storage()); }

  // L(c): the offset of a coordinate (static when c and the layout are). A coordinate with `_`
  // slices instead: L(_, 2) is the sub-layout of the modes under `_`.
  template <class Coord>
  CG_HOST_DEVICE constexpr auto operator()(Coord const& c) const {
    if constexpr (contains_underscore<Coord>::value) {
      return slice(c, *this);
    } else {
      return crd2idx(c, shape(), stride());
    }
  }
  template <class C0, class C1, class... Cs>
  CG_HOST_DEVICE constexpr auto operator()(C0 const& c0, C1 const& c1, Cs const&... cs) const {
    return (*this)(make_coord(c0, c1, cs...));
  }

  // The coordinate (congruent with the shape) that a compact layout maps to idx: for a thread
  // layout (32,4):(4,1), get_hier_coord(6) == (1,2). CuTe's name.
  template <class I>
  CG_HOST_DEVICE constexpr auto get_hier_coord(I const& idx) const {
    return idx2crd(idx, shape(), stride());
  }

 private:
  CG_HOST_DEVICE constexpr tuple<Shape, Stride> const& storage() const { return *this; }
};

// ------------------------------------------------------------------------------------------------
// Construction

namespace detail {
template <class S, class D>
CG_HOST_DEVICE constexpr Layout<S, D> make_layout_sd(S const& s, D const& d) {
  static_assert(is_congruent<S, D>::value, "make_layout: shape and stride are not congruent");
  return Layout<S, D>(s, d);
}
template <class... Ls>
CG_HOST_DEVICE constexpr auto concat_layouts(Ls const&... ls) {
  return make_layout_sd(make_tuple(ls.shape()...), make_tuple(ls.stride()...));
}
}  // namespace detail

// make_layout(shape)                 column-major (compact, first mode fastest)
// make_layout(shape, LayoutLeft{})   the same
// make_layout(shape, LayoutRight{})  row-major (compact, last mode fastest)
// make_layout(shape, stride)         @pre congruent
// make_layout(l0, l1, ...)           the layout whose modes are l0, l1, ...; make_layout(l) == l
template <class T0, class... Ts>
CG_HOST_DEVICE constexpr auto make_layout(T0 const& t0, Ts const&... ts) {
  if constexpr (is_layout<T0>::value) {
    static_assert((is_layout<Ts>::value && ...),
                  "make_layout(layouts...): every argument must be "
                  "a Layout");
    if constexpr (sizeof...(Ts) == 0) {
      return t0;
    } else {
      return detail::concat_layouts(t0, ts...);
    }
  } else if constexpr (sizeof...(Ts) == 0) {
    return detail::make_layout_sd(t0, compact_col_major(t0));
  } else {
    static_assert(sizeof...(Ts) == 1, "make_layout(shape, stride) takes two arguments");
    using T1 = std::tuple_element_t<0, std::tuple<Ts...>>;
    if constexpr (std::is_same<T1, LayoutLeft>::value) {
      return detail::make_layout_sd(t0, compact_col_major(t0));
    } else if constexpr (std::is_same<T1, LayoutRight>::value) {
      return detail::make_layout_sd(t0, compact_row_major(t0));
    } else {
      return detail::make_layout_sd(t0, ts...);
    }
  }
}

// ------------------------------------------------------------------------------------------------
// Queries. With template arguments they address a mode: shape<1>(l), size<1, 0>(l), layout<0>(l).

template <std::size_t... Is, class S, class D>
CG_HOST_DEVICE constexpr auto shape(Layout<S, D> const& l) {
  if constexpr (sizeof...(Is) == 0) {
    return l.shape();
  } else {
    return get<Is...>(l.shape());
  }
}

template <std::size_t... Is, class S, class D>
CG_HOST_DEVICE constexpr auto stride(Layout<S, D> const& l) {
  if constexpr (sizeof...(Is) == 0) {
    return l.stride();
  } else {
    return get<Is...>(l.stride());
  }
}

template <std::size_t... Is, class S, class D>
CG_HOST_DEVICE constexpr auto layout(Layout<S, D> const& l) {
  if constexpr (sizeof...(Is) == 0) {
    return l;
  } else {
    return make_layout(get<Is...>(l.shape()), get<Is...>(l.stride()));
  }
}

// get<I>(l): mode I as a layout of its own (get<1, 0>(l) nests).
template <std::size_t I, std::size_t... Is, class S, class D>
CG_HOST_DEVICE constexpr auto get(Layout<S, D> const& l) {
  return layout<I, Is...>(l);
}

// Number of coordinates: the product of the shape (Int when the shape is static).
template <std::size_t... Is, class S, class D>
CG_HOST_DEVICE constexpr auto size(Layout<S, D> const& l) {
  return product(shape<Is...>(l));
}

template <std::size_t... Is, class S, class D>
CG_HOST_DEVICE constexpr auto rank(Layout<S, D> const& l) {
  return rank(shape<Is...>(l));
}

template <std::size_t... Is, class S, class D>
CG_HOST_DEVICE constexpr auto depth(Layout<S, D> const& l) {
  return depth(shape<Is...>(l));
}

namespace detail {
template <class T>
CG_HOST_DEVICE constexpr auto as_tuple(T const& t) {
  if constexpr (is_tuple<T>::value) {
    return t;
  } else {
    return make_tuple(t);
  }
}
template <class T>
CG_HOST_DEVICE constexpr auto typed_abs(T const& x) {
  if constexpr (is_int_constant<T>::value) {
    return abs_value(x);
  } else {
    return x < 0 ? -x : x;
  }
}
template <class S, class D, std::size_t... Is>
CG_HOST_DEVICE constexpr auto cosize_impl(S const& fs, D const& fd, std::index_sequence<Is...>) {
  return (Int<1>{} + ... + ((get<Is>(fs) - Int<1>{}) * typed_abs(get<Is>(fd))));
}
}  // namespace detail

// cosize: one past the largest offset, 1 + sum_k (s_k - 1) * |d_k| (as the Dyn core defines it).
template <std::size_t... Is, class S, class D>
CG_HOST_DEVICE constexpr auto cosize(Layout<S, D> const& l) {
  const auto fs = detail::as_tuple(flatten(shape<Is...>(l)));
  const auto fd = detail::as_tuple(flatten(stride<Is...>(l)));
  return detail::cosize_impl(fs, fd, std::make_index_sequence<tuple_size<decltype(fs)>::value>{});
}

// ------------------------------------------------------------------------------------------------
// Slicing

namespace detail {
// The elements of t under the `_` of c, as a flat tuple of (possibly nested) modes.
template <class C, class T>
CG_HOST_DEVICE constexpr auto slice_collect(C const& c, T const& t);
template <class C, class T, std::size_t... Is>
CG_HOST_DEVICE constexpr auto slice_collect_modes(C const& c, T const& t,
                                                  std::index_sequence<Is...>) {
  return tuple_cat(tuple<>{}, slice_collect(get<Is>(c), get<Is>(t))...);
}
template <class C, class T>
CG_HOST_DEVICE constexpr auto slice_collect(C const& c, T const& t) {
  if constexpr (is_underscore<C>::value) {
    return make_tuple(t);
  } else if constexpr (is_tuple<C>::value) {
    static_assert(is_tuple<T>::value && tuple_size<C>::value == tuple_size<T>::value,
                  "slice: the coordinate is not weakly congruent with the shape");
    return slice_collect_modes(c, t, std::make_index_sequence<tuple_size<C>::value>{});
  } else {
    return tuple<>{};
  }
}
template <class T>
CG_HOST_DEVICE constexpr auto unwrap_single(T const& t) {
  if constexpr (tuple_size<T>::value == 1) {
    return get<0>(t);
  } else {
    return t;
  }
}
}  // namespace detail

// slice(c, int_tuple): the entries under the `_` of c. The free modes keep their nesting and are
// concatenated; a single free mode is returned unwrapped (as DynLayout slicing does).
// Example: slice((_,3,_), (8,4,(2,2))) == (8,(2,2)); slice((3,_), (8,(2,2))) == (2,2).
template <class C, class T, std::enable_if_t<is_tuple<T>::value || is_integral<T>::value, int> = 0>
CG_HOST_DEVICE constexpr auto slice(C const& c, T const& t) {
  static_assert(contains_underscore<C>::value, "slice: the coordinate has no `_`");
  return detail::unwrap_single(detail::slice_collect(c, t));
}

// slice(c, L): the sub-layout of the modes under `_`; L(c) with `_` is this.
// Example: slice((3,_), (8,(2,2)):(2,(1,16))) == (2,2):(1,16).
template <class C, class S, class D>
CG_HOST_DEVICE constexpr auto slice(C const& c, Layout<S, D> const& l) {
  return make_layout(slice(c, l.shape()), slice(c, l.stride()));
}

// slice_and_offset(c, L) = (slice(c, L), L(c with `_` as 0)): the sub-layout and the offset of its
// origin; L(c) == offset + slice(c, L)(free part of c).
// Example: slice_and_offset((3,_), (8,(2,2)):(2,(1,16))) == ((2,2):(1,16), 6).
template <class C, class S, class D>
CG_HOST_DEVICE constexpr auto slice_and_offset(C const& c, Layout<S, D> const& l) {
  return make_tuple(slice(c, l), crd2idx(c, l.shape(), l.stride()));
}

// ------------------------------------------------------------------------------------------------
// Bridge to DynLayout

// The DynLayout of a typed layout (constexpr when static). Not validated: a run-time shape of 0
// (an empty problem) is representable here even though make_dyn_layout refuses it.
template <class S, class D>
CG_HOST_DEVICE constexpr DynLayout to_dyn(Layout<S, D> const& l) {
  DynLayout r;
  r.shape = to_dyn(l.shape());
  r.stride = to_dyn(l.stride());
  return r;
}

namespace detail {
template <class H>
struct DynLayoutShape {
  static constexpr DynTuple value = H::value.shape;
};
template <class H>
struct DynLayoutStride {
  static constexpr DynTuple value = H::value.stride;
};
}  // namespace detail

// lift_layout<H>(): the static typed layout of the DynLayout constant H::value.
// Example: H::value == 12:1 -> Layout<_12, _1>{}.
template <class H>
CG_HOST_DEVICE constexpr auto lift_layout() {
  using S = decltype(lift_int_tuple<detail::DynLayoutShape<H>>());
  using D = decltype(lift_int_tuple<detail::DynLayoutStride<H>>());
  return Layout<S, D>{};
}

// ------------------------------------------------------------------------------------------------
// Printing

// print(x) for an int tuple or a layout, with printf (works on the device): "(8,(2,2)):(2,(1,16))".
// Static and dynamic entries print alike, as the Dyn core's to_string does.
template <class T,
          std::enable_if_t<is_tuple<T>::value || is_integral<T>::value || is_underscore<T>::value,
                           int> = 0>
CG_HOST_DEVICE void print(T const& t) {
  if constexpr (is_tuple<T>::value) {
    printf("(");
    std::size_t i = 0;
    for_each(t, [&](auto const& e) {
      if (i++ > 0) printf(",");
      print(e);
    });
    printf(")");
  } else if constexpr (is_underscore<T>::value) {
    printf("_");
  } else {
    printf("%lld", static_cast<long long>(to_int(t)));
  }
}

template <class S, class D>
CG_HOST_DEVICE void print(Layout<S, D> const& l) {
  print(l.shape());
  printf(":");
  print(l.stride());
}

// Host text forms, identical to the Dyn core's: to_string(l) == to_string(to_dyn(l)).
template <class T, std::enable_if_t<is_tuple<T>::value || is_integral<T>::value, int> = 0>
inline std::string to_string(T const& t) {
  return to_string(to_dyn(t));
}
template <class S, class D>
inline std::string to_string(Layout<S, D> const& l) {
  return to_string(to_dyn(l));
}

}  // namespace cute_gemm
