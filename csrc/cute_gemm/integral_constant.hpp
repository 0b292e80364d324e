#pragma once
// Int<N>: an integer known at compile time, the leaf type of static shapes and strides.
//
// Arithmetic keeps whatever is static static, so layouts built from Int<N> compute their offsets
// at compile time and layouts that mix Int<N> with run-time ints fold the static parts:
//   Int<3>{} * Int<4>{}  -> Int<12>          (a type: the value costs nothing at run time)
//   Int<3>{} * ld        -> int (3 * ld)     (ld a run-time int; the result is dynamic)
//   Int<3>{} == Int<3>{} -> Bool<true>       (usable in `if constexpr` and static_assert)
// Static ints are `int` (CuTe's default); a dynamic operand keeps its own type, so an int64_t
// stride stays int64_t.
//
// `_` (Underscore) is the slicing wildcard: layout(_, 3) keeps mode 0 and fixes mode 1 at 3.

#include <cstddef>
#include <type_traits>

#include "cute_gemm/config.hpp"

namespace cute_gemm {

template <int N>
struct Int {
  static constexpr int value = N;
  using value_type = int;
  using type = Int<N>;
  CG_HOST_DEVICE constexpr operator int() const { return N; }
  CG_HOST_DEVICE constexpr int operator()() const { return N; }
};

// The result of comparing two Int: a static bool.
template <bool B>
struct Bool {
  static constexpr bool value = B;
  using value_type = bool;
  using type = Bool<B>;
  CG_HOST_DEVICE constexpr operator bool() const { return B; }
  CG_HOST_DEVICE constexpr bool operator()() const { return B; }
};

using true_type = Bool<true>;
using false_type = Bool<false>;

// The static ints used most, named as in CuTe: _8 is Int<8> (a type; _8{} is the value).
using _m1 = Int<-1>;
using _0 = Int<0>;
using _1 = Int<1>;
using _2 = Int<2>;
using _3 = Int<3>;
using _4 = Int<4>;
using _5 = Int<5>;
using _6 = Int<6>;
using _7 = Int<7>;
using _8 = Int<8>;
using _9 = Int<9>;
using _10 = Int<10>;
using _11 = Int<11>;
using _12 = Int<12>;
using _13 = Int<13>;
using _14 = Int<14>;
using _15 = Int<15>;
using _16 = Int<16>;
using _20 = Int<20>;
using _24 = Int<24>;
using _32 = Int<32>;
using _40 = Int<40>;
using _48 = Int<48>;
using _64 = Int<64>;
using _80 = Int<80>;
using _96 = Int<96>;
using _128 = Int<128>;
using _160 = Int<160>;
using _192 = Int<192>;
using _256 = Int<256>;
using _384 = Int<384>;
using _512 = Int<512>;
using _768 = Int<768>;
using _1024 = Int<1024>;
using _2048 = Int<2048>;
using _4096 = Int<4096>;
using _8192 = Int<8192>;

// ------------------------------------------------------------------------------------------------
// Traits

template <class T>
struct is_int_constant : std::false_type {};
template <int N>
struct is_int_constant<Int<N>> : std::true_type {};

// is_integral<T>: a run-time integer type or an Int<N> (the leaves of int tuples).
template <class T>
struct is_integral
    : std::integral_constant<bool, std::is_integral<T>::value || is_int_constant<T>::value> {};

// is_static<T>: T carries its whole value in its type (Int<N>, tuples of them, static layouts).
// Static types are empty and default-constructible: T{} is the value. Headers that define
// compound types (tuple, Layout, ...) specialise this.
template <class T>
struct is_static : std::false_type {};
template <int N>
struct is_static<Int<N>> : std::true_type {};
template <bool B>
struct is_static<Bool<B>> : std::true_type {};

// is_constant<N, T>: T is the static int N.
template <int N, class T>
struct is_constant : std::false_type {};
template <int N>
struct is_constant<N, Int<N>> : std::true_type {};

template <class T>
constexpr bool is_integral_v = is_integral<T>::value;
template <class T>
constexpr bool is_static_v = is_static<T>::value;

// ------------------------------------------------------------------------------------------------
// Arithmetic: Int op Int -> Int; Int op integer (either side) -> the integer expression.

#define CG_INT_BINARY_OP(OP)                                                      \
  template <int A, int B>                                                         \
  CG_HOST_DEVICE constexpr Int<(A OP B)> operator OP(Int<A>, Int<B>) {            \
    return {};                                                                    \
  }                                                                               \
  template <int A, class T, class = std::enable_if_t<std::is_integral<T>::value>> \
  CG_HOST_DEVICE constexpr auto operator OP(Int<A>, T b) {                        \
    return A OP b;                                                                \
  }                                                                               \
  template <class T, int B, class = std::enable_if_t<std::is_integral<T>::value>> \
  CG_HOST_DEVICE constexpr auto operator OP(T a, Int<B>) {                        \
    return a OP B;                                                                \
  }

CG_INT_BINARY_OP(+)
CG_INT_BINARY_OP(-)
CG_INT_BINARY_OP(*)
CG_INT_BINARY_OP(&)
CG_INT_BINARY_OP(|)
CG_INT_BINARY_OP(^)
CG_INT_BINARY_OP(<<)
CG_INT_BINARY_OP(>>)
#undef CG_INT_BINARY_OP

// Division and remainder: a static zero divisor is a compile error, not undefined behaviour.
template <int A, int B>
CG_HOST_DEVICE constexpr Int<A / B> operator/(Int<A>, Int<B>) {
  return {};
}
template <int A, int B>
CG_HOST_DEVICE constexpr Int<A % B> operator%(Int<A>, Int<B>) {
  return {};
}
template <int A, class T, class = std::enable_if_t<std::is_integral<T>::value>>
CG_HOST_DEVICE constexpr auto operator/(Int<A>, T b) {
  return A / b;
}
template <int A, class T, class = std::enable_if_t<std::is_integral<T>::value>>
CG_HOST_DEVICE constexpr auto operator%(Int<A>, T b) {
  return A % b;
}
template <class T, int B, class = std::enable_if_t<std::is_integral<T>::value>>
CG_HOST_DEVICE constexpr auto operator/(T a, Int<B>) {
  static_assert(B != 0, "division by Int<0>");
  return a / B;
}
template <class T, int B, class = std::enable_if_t<std::is_integral<T>::value>>
CG_HOST_DEVICE constexpr auto operator%(T a, Int<B>) {
  static_assert(B != 0, "remainder by Int<0>");
  return a % B;
}

template <int A>
CG_HOST_DEVICE constexpr Int<-A> operator-(Int<A>) {
  return {};
}

// Comparisons: Int op Int -> Bool<...> (static); with a run-time integer -> bool.
#define CG_INT_COMPARE_OP(OP)                                                     \
  template <int A, int B>                                                         \
  CG_HOST_DEVICE constexpr Bool<(A OP B)> operator OP(Int<A>, Int<B>) {           \
    return {};                                                                    \
  }                                                                               \
  template <int A, class T, class = std::enable_if_t<std::is_integral<T>::value>> \
  CG_HOST_DEVICE constexpr bool operator OP(Int<A>, T b) {                        \
    return A OP b;                                                                \
  }                                                                               \
  template <class T, int B, class = std::enable_if_t<std::is_integral<T>::value>> \
  CG_HOST_DEVICE constexpr bool operator OP(T a, Int<B>) {                        \
    return a OP B;                                                                \
  }

CG_INT_COMPARE_OP(==)
CG_INT_COMPARE_OP(!=)
CG_INT_COMPARE_OP(<)
CG_INT_COMPARE_OP(<=)
CG_INT_COMPARE_OP(>)
CG_INT_COMPARE_OP(>=)
#undef CG_INT_COMPARE_OP

template <bool A, bool B>
CG_HOST_DEVICE constexpr Bool<(A && B)> operator&&(Bool<A>, Bool<B>) {
  return {};
}
template <bool A, bool B>
CG_HOST_DEVICE constexpr Bool<(A || B)> operator||(Bool<A>, Bool<B>) {
  return {};
}
template <bool A>
CG_HOST_DEVICE constexpr Bool<!A> operator!(Bool<A>) {
  return {};
}

// ------------------------------------------------------------------------------------------------
// Helpers that keep static operands static.

// ceil_div(a, b) = (a + b - 1) / b for positive operands: ceil_div(Int<100>, Int<32>) -> Int<4>.
template <class A, class B,
          class = std::enable_if_t<is_integral<A>::value && is_integral<B>::value &&
                                   (is_int_constant<A>::value || is_int_constant<B>::value)>>
CG_HOST_DEVICE constexpr auto ceil_div(A const& a, B const& b) {
  return (a + b - Int<1>{}) / b;
}

// |a|, static for an Int.
template <int A>
CG_HOST_DEVICE constexpr Int<(A < 0 ? -A : A)> abs_value(Int<A>) {
  return {};
}

// The wrapped value of an integral: N for Int<N>, the integer itself otherwise.
template <class T>
CG_HOST_DEVICE constexpr auto to_int(T const& t) {
  if constexpr (is_int_constant<T>::value) {
    return T::value;
  } else {
    return t;
  }
}

// ------------------------------------------------------------------------------------------------
// The slicing wildcard.

struct Underscore {};

template <>
struct is_static<Underscore> : std::true_type {};

template <class T>
struct is_underscore : std::false_type {};
template <>
struct is_underscore<Underscore> : std::true_type {};

// `_` must be usable in device code. A namespace-scope constexpr object of class type is a host
// object to nvcc, so the device pass sees a __device__ constant instead (both are empty).
#if defined(__CUDA_ARCH__)
static const __device__ Underscore _{};
#else
inline constexpr Underscore _{};
#endif

}  // namespace cute_gemm
