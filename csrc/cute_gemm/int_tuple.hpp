#pragma once
// Typed int tuples: the leaves are integers (Int<N> or run-time ints), the nesting is the tuple
// type. Every function here keeps static parts static:
//   product(Shape<_4, Shape<_2, _8>>{})          -> Int<64>
//   product(make_shape(m, _8{}))                 -> int (m * 8)
//   crd2idx(make_coord(_1{}, _2{}), Shape<_4,_8>{}, Stride<_1,_4>{}) -> Int<9>
// and the bridge to the value form of the algebra (dyn_tuple.hpp):
//   to_dyn(t)            the DynTuple of a typed tuple (constexpr when t is static)
//   lift_int_tuple<H>()  the typed static tuple of a DynTuple constant H::value

#include <cstdint>
#include <utility>

#include "cute_gemm/dyn_tuple.hpp"
#include "cute_gemm/tuple.hpp"

namespace cute_gemm {

// ------------------------------------------------------------------------------------------------
// Type-level queries

template <class T>
struct contains_underscore : is_underscore<T> {};
template <class... Ts>
struct contains_underscore<tuple<Ts...>>
    : std::integral_constant<bool, (contains_underscore<Ts>::value || ...)> {};

// A and B have the same nesting (leaf values free).
template <class A, class B>
struct is_congruent;
// A's nesting is a prefix of B's: an integer in A may stand for a whole subtree of B (how a
// coordinate relates to its shape).
template <class A, class B>
struct is_weakly_congruent;

namespace detail {
// Element-wise checks, only instantiated for tuples of equal rank (a pack expansion over packs of
// different lengths is ill-formed, even behind a short-circuit).
template <bool SameRank, class A, class B>
struct congruent_elements : std::false_type {};
template <class... As, class... Bs>
struct congruent_elements<true, tuple<As...>, tuple<Bs...>>
    : std::integral_constant<bool, (is_congruent<As, Bs>::value && ...)> {};
template <bool SameRank, class A, class B>
struct weakly_congruent_elements : std::false_type {};
template <class... As, class... Bs>
struct weakly_congruent_elements<true, tuple<As...>, tuple<Bs...>>
    : std::integral_constant<bool, (is_weakly_congruent<As, Bs>::value && ...)> {};
}  // namespace detail

template <class A, class B>
struct is_congruent : std::integral_constant<bool, !is_tuple<A>::value && !is_tuple<B>::value> {};
template <class... As, class... Bs>
struct is_congruent<tuple<As...>, tuple<Bs...>>
    : detail::congruent_elements<sizeof...(As) == sizeof...(Bs), tuple<As...>, tuple<Bs...>> {};

template <class A, class B>
struct is_weakly_congruent : std::integral_constant<bool, !is_tuple<A>::value> {};
template <class... As, class... Bs>
struct is_weakly_congruent<tuple<As...>, tuple<Bs...>>
    : detail::weakly_congruent_elements<sizeof...(As) == sizeof...(Bs), tuple<As...>,
                                        tuple<Bs...>> {};

template <class A, class B>
CG_HOST_DEVICE constexpr Bool<is_congruent<A, B>::value> congruent(A const&, B const&) {
  return {};
}
template <class A, class B>
CG_HOST_DEVICE constexpr Bool<is_weakly_congruent<A, B>::value> weakly_congruent(A const&,
                                                                                 B const&) {
  return {};
}

// ------------------------------------------------------------------------------------------------
// rank, depth, product

// Number of top-level modes; an integer has rank 1.
template <class T, std::enable_if_t<is_tuple<T>::value || is_integral<T>::value, int> = 0>
CG_HOST_DEVICE constexpr auto rank(T const&) {
  if constexpr (is_tuple<T>::value) {
    return Int<int(tuple_size<T>::value)>{};
  } else {
    return Int<1>{};
  }
}

namespace detail {
template <class T>
struct depth_of : std::integral_constant<int, 0> {};
template <class... Ts>
struct depth_of<tuple<Ts...>> {
  static constexpr int max_child() {
    int m = 0;
    ((m = depth_of<Ts>::value > m ? depth_of<Ts>::value : m), ...);
    return m;
  }
  static constexpr int value = 1 + max_child();
};
}  // namespace detail

// An integer has depth 0, a tuple one more than its deepest element.
template <class T, std::enable_if_t<is_tuple<T>::value || is_integral<T>::value, int> = 0>
CG_HOST_DEVICE constexpr Int<detail::depth_of<T>::value> depth(T const&) {
  return {};
}

namespace detail {
template <class T, std::size_t... Is>
CG_HOST_DEVICE constexpr auto product_impl(T const& t, std::index_sequence<Is...>);
}

// Product of the leaves; Int when every leaf is static. product(()) == _1.
template <class T, std::enable_if_t<is_tuple<T>::value || is_integral<T>::value, int> = 0>
CG_HOST_DEVICE constexpr auto product(T const& t) {
  if constexpr (is_tuple<T>::value) {
    return detail::product_impl(t, std::make_index_sequence<tuple_size<T>::value>{});
  } else {
    return t;
  }
}

namespace detail {
template <class T, std::size_t... Is>
CG_HOST_DEVICE constexpr auto product_impl(T const& t, std::index_sequence<Is...>) {
  return (Int<1>{} * ... * product(get<Is>(t)));
}
}  // namespace detail

// The size of a shape is its product; size<I...>(t) is the size of mode get<I...>(t).
template <std::size_t... Is, class T,
          std::enable_if_t<is_tuple<T>::value || is_integral<T>::value, int> = 0>
CG_HOST_DEVICE constexpr auto size(T const& t) {
  if constexpr (sizeof...(Is) == 0) {
    return product(t);
  } else {
    return product(get<Is...>(t));
  }
}

// Per-mode products: product_each((2,(3,4))) == (2,12).
template <class T>
CG_HOST_DEVICE constexpr auto product_each(T const& t) {
  if constexpr (is_tuple<T>::value) {
    return transform(t, [](auto const& m) { return product(m); });
  } else {
    return t;
  }
}

// ------------------------------------------------------------------------------------------------
// flatten

namespace detail {
template <class T>
CG_HOST_DEVICE constexpr auto flatten_to_tuple(T const& t);
template <class T, std::size_t... Is>
CG_HOST_DEVICE constexpr auto flatten_children(T const& t, std::index_sequence<Is...>) {
  if constexpr (sizeof...(Is) == 0) {
    return tuple<>{};
  } else {
    return tuple_cat(flatten_to_tuple(get<Is>(t))...);
  }
}
template <class T>
CG_HOST_DEVICE constexpr auto flatten_to_tuple(T const& t) {
  if constexpr (is_tuple<T>::value) {
    return flatten_children(t, std::make_index_sequence<tuple_size<T>::value>{});
  } else {
    return make_tuple(t);
  }
}
}  // namespace detail

// flatten((8,(2,2))) == (8,2,2); flatten(7) == 7.
template <class T>
CG_HOST_DEVICE constexpr auto flatten(T const& t) {
  if constexpr (is_tuple<T>::value) {
    return detail::flatten_to_tuple(t);
  } else {
    return t;
  }
}

// ------------------------------------------------------------------------------------------------
// Coordinates

namespace detail {
template <std::size_t I, class C, class S, class D>
CG_HOST_DEVICE constexpr auto crd2idx_split(C const& c, S const& s, D const& d);
template <class C, class S, class D, std::size_t... Is>
CG_HOST_DEVICE constexpr auto crd2idx_modes(C const& c, S const& s, D const& d,
                                            std::index_sequence<Is...>);
}  // namespace detail

// crd2idx(c, shape, stride): the offset of a (hierarchical, possibly partial) coordinate: the inner
// product with the strides, where an integer standing for a sub-tuple is first split
// colexicographically, and `_` contributes 0. Static when c, shape and stride are.
// Example: shape (8,(2,2)), stride (2,(1,16)): crd2idx(17) == crd2idx((1,2)) ==
// crd2idx((1,(0,1))) == 18.
// @pre c weakly congruent with shape, each integer coordinate < the size of its mode.
template <class C, class S, class D, std::enable_if_t<!std::is_same<S, DynTuple>::value, int> = 0>
CG_HOST_DEVICE constexpr auto crd2idx(C const& c, S const& s, D const& d) {
  static_assert(is_congruent<S, D>::value, "crd2idx: shape and stride are not congruent");
  if constexpr (is_tuple<C>::value) {
    static_assert(is_tuple<S>::value, "crd2idx: a tuple coordinate needs a tuple shape");
    static_assert(tuple_size<C>::value == tuple_size<S>::value,
                  "crd2idx: coordinate rank differs from the shape's rank");
    return detail::crd2idx_modes(c, s, d, std::make_index_sequence<tuple_size<C>::value>{});
  } else if constexpr (is_underscore<C>::value) {
    return Int<0>{};
  } else if constexpr (is_tuple<S>::value) {
    if constexpr (tuple_size<S>::value == 0) {
      return Int<0>{};
    } else {
      return detail::crd2idx_split<0>(c, s, d);
    }
  } else {
    return c * d;
  }
}

namespace detail {
template <class C, class S, class D, std::size_t... Is>
CG_HOST_DEVICE constexpr auto crd2idx_modes(C const& c, S const& s, D const& d,
                                            std::index_sequence<Is...>) {
  return (Int<0>{} + ... + crd2idx(get<Is>(c), get<Is>(s), get<Is>(d)));
}
// An integer coordinate against a tuple shape: mode I takes c % size(mode I), the rest c / that.
// The last mode takes what is left, so a too-large coordinate runs on along it (as in CuTe).
template <std::size_t I, class C, class S, class D>
CG_HOST_DEVICE constexpr auto crd2idx_split(C const& c, S const& s, D const& d) {
  if constexpr (I + 1 == tuple_size<S>::value) {
    return crd2idx(c, get<I>(s), get<I>(d));
  } else {
    const auto si = product(get<I>(s));
    return crd2idx(c % si, get<I>(s), get<I>(d)) + crd2idx_split<I + 1>(c / si, s, d);
  }
}
}  // namespace detail

// idx2crd(idx, shape, stride): the coordinate c (congruent with shape) with c_k = (idx / d_k) %
// s_k: for a compact layout, the coordinate that the layout maps to idx (CuTe's get_hier_coord).
template <class I, class S, class D, std::enable_if_t<!std::is_same<S, DynTuple>::value, int> = 0>
CG_HOST_DEVICE constexpr auto idx2crd(I const& idx, S const& s, D const& d) {
  static_assert(is_congruent<S, D>::value, "idx2crd: shape and stride are not congruent");
  if constexpr (is_tuple<S>::value) {
    return transform(s, d, [&](auto const& si, auto const& di) { return idx2crd(idx, si, di); });
  } else {
    return (idx / d) % s;
  }
}

// compact_col_major(shape): column-major strides congruent with shape, the prefix products
// (first leaf fastest): compact_col_major((2,(3,4))) == (1,(2,6)). Static where the shape
// prefix is static: compact_col_major((_4, m, _2)) == (_1, _4, 4*m).
template <class S, class Cur = Int<1>>
CG_HOST_DEVICE constexpr auto compact_col_major(S const& s, Cur const& cur = {});
// compact_row_major(shape): row-major strides (last leaf fastest), the suffix products:
// compact_row_major((2,(3,4))) == (12,(4,1)).
template <class S, class Cur = Int<1>>
CG_HOST_DEVICE constexpr auto compact_row_major(S const& s, Cur const& cur = {});

namespace detail {
template <class S, class Cur, std::size_t... Is>
CG_HOST_DEVICE constexpr auto col_major_modes(S const& s, Cur const& cur,
                                              std::index_sequence<Is...>) {
  return make_tuple(compact_col_major(get<Is>(s), cur * product(take<0, Is>(s)))...);
}
template <class S, class Cur, std::size_t... Is>
CG_HOST_DEVICE constexpr auto row_major_modes(S const& s, Cur const& cur,
                                              std::index_sequence<Is...>) {
  constexpr std::size_t N = sizeof...(Is);
  return make_tuple(compact_row_major(get<Is>(s), cur * product(take<Is + 1, N>(s)))...);
}
}  // namespace detail

template <class S, class Cur>
CG_HOST_DEVICE constexpr auto compact_col_major(S const& s, Cur const& cur) {
  if constexpr (is_tuple<S>::value) {
    return detail::col_major_modes(s, cur, std::make_index_sequence<tuple_size<S>::value>{});
  } else {
    return cur;
  }
}

template <class S, class Cur>
CG_HOST_DEVICE constexpr auto compact_row_major(S const& s, Cur const& cur) {
  if constexpr (is_tuple<S>::value) {
    return detail::row_major_modes(s, cur, std::make_index_sequence<tuple_size<S>::value>{});
  } else {
    return cur;
  }
}

// idx2crd(idx, shape): the colexicographic coordinate of a 1-D index, congruent with shape (the
// inverse of crd2idx against compact_col_major(shape)): idx2crd(17, (8,(2,2))) == (1,(0,1)).
// @pre 0 <= idx < size(shape) (the index is reduced modulo every mode, the last one included).
template <class I, class S, std::enable_if_t<!std::is_same<S, DynTuple>::value, int> = 0>
CG_HOST_DEVICE constexpr auto idx2crd(I const& idx, S const& s) {
  if constexpr (is_tuple<S>::value) {
    return idx2crd(idx, s, compact_col_major(s));
  } else {
    return idx;
  }
}

// ------------------------------------------------------------------------------------------------
// Bridge to DynTuple

namespace detail {
template <class T>
CG_HOST_DEVICE constexpr void push_dyn(DynTuple& r, T const& t);
template <class T, std::size_t... Is>
CG_HOST_DEVICE constexpr void push_dyn_children(DynTuple& r, T const& t,
                                                std::index_sequence<Is...>) {
  (push_dyn(r, get<Is>(t)), ...);
}
template <class T>
CG_HOST_DEVICE constexpr void push_dyn(DynTuple& r, T const& t) {
  if constexpr (is_tuple<T>::value) {
    r.push_node(int(tuple_size<T>::value), 0);
    push_dyn_children(r, t, std::make_index_sequence<tuple_size<T>::value>{});
  } else if constexpr (is_underscore<T>::value) {
    r.push_node(DynTuple::kUnderscore, 0);
  } else {
    static_assert(is_integral<T>::value, "to_dyn: int tuple leaves must be integers");
    r.push_node(DynTuple::kLeaf, int64_t(to_int(t)));
  }
}
}  // namespace detail

// The DynTuple of a typed int tuple (or integer, or `_`). Same nesting, same values.
template <class T,
          std::enable_if_t<is_tuple<T>::value || is_integral<T>::value || is_underscore<T>::value,
                           int> = 0>
CG_HOST_DEVICE constexpr DynTuple to_dyn(T const& t) {
  DynTuple r;
  detail::push_dyn(r, t);
  return r;
}

namespace detail {
template <class H, int Node>
CG_HOST_DEVICE constexpr auto lift_node();
template <class H, int Node, int... Is>
CG_HOST_DEVICE constexpr auto lift_children(std::integer_sequence<int, Is...>) {
  return tuple<decltype(lift_node<H, child_node(H::value, Node, Is)>())...>{};
}
template <class H, int Node>
CG_HOST_DEVICE constexpr auto lift_node() {
  constexpr int kind = H::value.kind[Node];
  if constexpr (kind == DynTuple::kLeaf) {
    constexpr int64_t v = H::value.value[Node];
    static_assert(v >= INT32_MIN && v <= INT32_MAX, "lift: a static value does not fit in int");
    return Int<int(v)>{};
  } else if constexpr (kind == DynTuple::kUnderscore) {
    return Underscore{};
  } else {
    return lift_children<H, Node>(std::make_integer_sequence<int, kind>{});
  }
}
}  // namespace detail

// lift_int_tuple<H>(): the static typed tuple of the DynTuple constant H::value. A leaf becomes
// Int<v>, a tuple node tuple<...> of its lifted children, `_` Underscore.
// Example: H::value == (8,(2,2)) -> tuple<_8, tuple<_2, _2>>{}.
// @pre H::value is a constant expression (a static constexpr member).
template <class H>
CG_HOST_DEVICE constexpr auto lift_int_tuple() {
  return detail::lift_node<H, 0>();
}

}  // namespace cute_gemm
