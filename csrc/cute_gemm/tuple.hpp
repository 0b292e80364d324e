#pragma once
// tuple<Ts...>: a minimal host/device tuple, the container of typed shapes, strides and
// coordinates.
//
// Empty element types (Int<N>, Underscore, tuples of them, static layouts) are not stored: get<I>
// returns a fresh T{}. So a tuple of static ints is an empty type, and a static Layout built on it
// costs no registers. Example:
//   tuple<_8, int> t{_8{}, 5};   // sizeof(t) == sizeof(int); get<0>(t) is _8, get<1>(t) == 5
// std::tuple is not used: it is host-only and not guaranteed empty for empty elements.

#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>

#include "cute_gemm/integral_constant.hpp"

namespace cute_gemm {

namespace detail {

// Stateless element types are recreated on demand instead of stored. (A closure type is empty
// but not default-constructible in C++17, so it is stored.)
template <class T>
struct is_stateless : std::integral_constant<bool, std::is_empty<T>::value &&
                                                       std::is_default_constructible<T>::value> {};

template <std::size_t I, class T, bool Stateless = is_stateless<T>::value>
struct TupleLeaf {
  T value_;
  // Default-initialised like an aggregate (T{} zero-initialises; a plain declaration leaves a
  // register fragment's elements uninitialised, as kernels want).
  TupleLeaf() = default;
  CG_HOST_DEVICE constexpr TupleLeaf(T const& v) : value_(v) {}
  CG_HOST_DEVICE constexpr T& get() { return value_; }
  CG_HOST_DEVICE constexpr T const& get() const { return value_; }
};

template <std::size_t I, class T>
struct TupleLeaf<I, T, true> {
  TupleLeaf() = default;
  CG_HOST_DEVICE constexpr TupleLeaf(T const&) {}
  CG_HOST_DEVICE constexpr T get() const { return T{}; }
};

template <class Seq, class... Ts>
struct TupleBase;

template <std::size_t... Is, class... Ts>
struct TupleBase<std::index_sequence<Is...>, Ts...> : TupleLeaf<Is, Ts>... {
  TupleBase() = default;
  CG_HOST_DEVICE constexpr TupleBase(Ts const&... ts) : TupleLeaf<Is, Ts>(ts)... {}
};

}  // namespace detail

template <class... Ts>
struct tuple : detail::TupleBase<std::index_sequence_for<Ts...>, Ts...> {
  tuple() = default;
  CG_HOST_DEVICE constexpr tuple(Ts const&... ts)
      : detail::TupleBase<std::index_sequence_for<Ts...>, Ts...>(ts...) {}
};

template <>
struct tuple<> {};

// The names CuTe gives tuples by role; all are the same type.
template <class... Ts>
using Shape = tuple<Ts...>;
template <class... Ts>
using Stride = tuple<Ts...>;
template <class... Ts>
using Coord = tuple<Ts...>;
template <class... Ts>
using Tile = tuple<Ts...>;
template <class... Ts>
using Step = tuple<Ts...>;

// ------------------------------------------------------------------------------------------------
// Traits

template <class T>
struct is_tuple : std::false_type {};
template <class... Ts>
struct is_tuple<tuple<Ts...>> : std::true_type {};

template <class T>
constexpr bool is_tuple_v = is_tuple<T>::value;

// tuple_size<T>: the number of elements of a tuple.
template <class T>
struct tuple_size;
template <class... Ts>
struct tuple_size<tuple<Ts...>> : std::integral_constant<std::size_t, sizeof...(Ts)> {};
template <class T>
struct tuple_size<T const> : tuple_size<T> {};

template <std::size_t I, class T>
struct tuple_element;
template <std::size_t I, class... Ts>
struct tuple_element<I, tuple<Ts...>> {
  using type = std::tuple_element_t<I, std::tuple<Ts...>>;  // a type computation only
};
template <std::size_t I, class T>
using tuple_element_t = typename tuple_element<I, T>::type;

// A tuple is static when every element is.
template <class... Ts>
struct is_static<tuple<Ts...>> : std::integral_constant<bool, (is_static<Ts>::value && ...)> {};

// ------------------------------------------------------------------------------------------------
// Access

template <std::size_t I, class... Ts>
CG_HOST_DEVICE constexpr decltype(auto) get(tuple<Ts...> const& t) {
  static_assert(I < sizeof...(Ts), "get<I>: index out of range");
  using T = std::tuple_element_t<I, std::tuple<Ts...>>;
  return static_cast<detail::TupleLeaf<I, T> const&>(t).get();
}

template <std::size_t I, class... Ts>
CG_HOST_DEVICE constexpr decltype(auto) get(tuple<Ts...>& t) {
  static_assert(I < sizeof...(Ts), "get<I>: index out of range");
  using T = std::tuple_element_t<I, std::tuple<Ts...>>;
  return static_cast<detail::TupleLeaf<I, T>&>(t).get();
}

// An integer is its own mode 0, so rank-1 code can treat a leaf like a 1-tuple.
template <std::size_t I, class T, std::enable_if_t<is_integral<T>::value, int> = 0>
CG_HOST_DEVICE constexpr T get(T const& t) {
  static_assert(I == 0, "get<I> of an integer: only I == 0 exists");
  return t;
}

// Nested access: get<1, 0>(t) == get<0>(get<1>(t)).
template <std::size_t I0, std::size_t I1, std::size_t... Is, class T>
CG_HOST_DEVICE constexpr decltype(auto) get(T&& t) {
  return get<I1, Is...>(get<I0>(static_cast<T&&>(t)));
}

// ------------------------------------------------------------------------------------------------
// Construction

template <class... Ts>
CG_HOST_DEVICE constexpr tuple<Ts...> make_tuple(Ts const&... ts) {
  return tuple<Ts...>(ts...);
}
template <class... Ts>
CG_HOST_DEVICE constexpr tuple<Ts...> make_shape(Ts const&... ts) {
  return tuple<Ts...>(ts...);
}
template <class... Ts>
CG_HOST_DEVICE constexpr tuple<Ts...> make_stride(Ts const&... ts) {
  return tuple<Ts...>(ts...);
}
template <class... Ts>
CG_HOST_DEVICE constexpr tuple<Ts...> make_coord(Ts const&... ts) {
  return tuple<Ts...>(ts...);
}
template <class... Ts>
CG_HOST_DEVICE constexpr tuple<Ts...> make_tile(Ts const&... ts) {
  return tuple<Ts...>(ts...);
}
template <class... Ts>
CG_HOST_DEVICE constexpr tuple<Ts...> make_step(Ts const&... ts) {
  return tuple<Ts...>(ts...);
}

// ------------------------------------------------------------------------------------------------
// Algorithms (each an index_sequence expansion, so everything stays constexpr and inlinable)

namespace detail {
template <class T, class F, std::size_t... Is>
CG_HOST_DEVICE constexpr void for_each_impl(T&& t, F&& f, std::index_sequence<Is...>) {
  (f(get<Is>(t)), ...);
}
template <class T, class F, std::size_t... Is>
CG_HOST_DEVICE constexpr auto transform_impl(T const& t, F&& f, std::index_sequence<Is...>) {
  return make_tuple(f(get<Is>(t))...);
}
template <class T, class U, class F, std::size_t... Is>
CG_HOST_DEVICE constexpr auto transform_impl(T const& t, U const& u, F&& f,
                                             std::index_sequence<Is...>) {
  return make_tuple(f(get<Is>(t), get<Is>(u))...);
}
template <std::size_t I, std::size_t N, class T, class V, class F>
CG_HOST_DEVICE constexpr auto fold_impl(T const& t, V const& v, F& f) {
  if constexpr (I == N) {
    return v;
  } else {
    return fold_impl<I + 1, N>(t, f(v, get<I>(t)), f);
  }
}
template <std::size_t B, class T, std::size_t... Is>
CG_HOST_DEVICE constexpr auto take_impl(T const& t, std::index_sequence<Is...>) {
  return make_tuple(get<B + Is>(t)...);
}
template <class T, class U, std::size_t... Is, std::size_t... Js>
CG_HOST_DEVICE constexpr auto cat2(T const& t, U const& u, std::index_sequence<Is...>,
                                   std::index_sequence<Js...>) {
  return make_tuple(get<Is>(t)..., get<Js>(u)...);
}
}  // namespace detail

template <class T, class F, std::enable_if_t<is_tuple<std::decay_t<T>>::value, int> = 0>
CG_HOST_DEVICE constexpr void for_each(T&& t, F&& f) {
  detail::for_each_impl(t, f, std::make_index_sequence<tuple_size<std::decay_t<T>>::value>{});
}

// transform(t, f) = (f(t0), f(t1), ...); transform(t, u, f) = (f(t0, u0), ...).
template <class T, class F, std::enable_if_t<is_tuple<T>::value, int> = 0>
CG_HOST_DEVICE constexpr auto transform(T const& t, F&& f) {
  return detail::transform_impl(t, f, std::make_index_sequence<tuple_size<T>::value>{});
}
template <class T, class U, class F, std::enable_if_t<is_tuple<T>::value, int> = 0>
CG_HOST_DEVICE constexpr auto transform(T const& t, U const& u, F&& f) {
  static_assert(tuple_size<T>::value == tuple_size<U>::value, "transform: ranks differ");
  return detail::transform_impl(t, u, f, std::make_index_sequence<tuple_size<T>::value>{});
}

// fold(t, v, f) = f(...f(f(v, t0), t1)..., tN-1): the left fold.
template <class T, class V, class F, std::enable_if_t<is_tuple<T>::value, int> = 0>
CG_HOST_DEVICE constexpr auto fold(T const& t, V const& v, F&& f) {
  return detail::fold_impl<0, tuple_size<T>::value>(t, v, f);
}

// take<B, E>(t) = (tB, ..., tE-1).
template <std::size_t B, std::size_t E, class T>
CG_HOST_DEVICE constexpr auto take(T const& t) {
  static_assert(B <= E && E <= tuple_size<T>::value, "take<B, E>: range out of bounds");
  return detail::take_impl<B>(t, std::make_index_sequence<E - B>{});
}

template <class... Ts, class... Us, class... Rest>
CG_HOST_DEVICE constexpr auto tuple_cat(tuple<Ts...> const& t, tuple<Us...> const& u,
                                        Rest const&... rest) {
  auto tu = detail::cat2(t, u, std::index_sequence_for<Ts...>{}, std::index_sequence_for<Us...>{});
  if constexpr (sizeof...(Rest) == 0) {
    return tu;
  } else {
    return tuple_cat(tu, rest...);
  }
}
template <class... Ts>
CG_HOST_DEVICE constexpr tuple<Ts...> tuple_cat(tuple<Ts...> const& t) {
  return t;
}

// append(t, x) = (t0, ..., x); prepend(t, x) = (x, t0, ...).
template <class... Ts, class X>
CG_HOST_DEVICE constexpr auto append(tuple<Ts...> const& t, X const& x) {
  return tuple_cat(t, make_tuple(x));
}
template <class... Ts, class X>
CG_HOST_DEVICE constexpr auto prepend(tuple<Ts...> const& t, X const& x) {
  return tuple_cat(make_tuple(x), t);
}

// repeat<N>(x) = (x, x, ..., x).
namespace detail {
template <class X, std::size_t... Is>
CG_HOST_DEVICE constexpr auto repeat_impl(X const& x, std::index_sequence<Is...>) {
  return make_tuple(((void)Is, x)...);
}
}  // namespace detail
template <std::size_t N, class X>
CG_HOST_DEVICE constexpr auto repeat(X const& x) {
  return detail::repeat_impl(x, std::make_index_sequence<N>{});
}

}  // namespace cute_gemm
