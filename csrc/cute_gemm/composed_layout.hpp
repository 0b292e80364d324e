#pragma once
// ComposedLayout<Swizzle<B,M,S>, Offset, Layout>: the swizzled layout of shared memory,
//   CL(c) = swizzle(offset + layout(c)).
// The swizzle is a bijection on offsets, applied last, so everything that only reshapes the
// domain (composition with a layout on the right, the divides, slicing) acts on the inner layout:
//   composition(CL, B) == swizzle o (offset + inner o B)
// Slicing cannot move the base pointer past the swizzle (swizzle(o + x) != o + swizzle(x) in
// general), so a slice's offset is folded into Offset instead:
//   CL(_, k) == ComposedLayout(swizzle, offset + inner(0, k), inner(_, k)), pointer unchanged.
// Example: Swizzle<3,3,3> o _0 o (8,64):(64,1) (half precision, 128-byte rows): element (r, c) is
// at r*64 + c with its 8-element unit c/8 XORed by r%8, so one column of units read by ldmatrix
// touches 8 distinct 16-byte bank groups.

#include "cute_gemm/layout_algebra.hpp"
#include "cute_gemm/swizzle.hpp"

namespace cute_gemm {

template <class SwizzleFn, class Offset, class Inner>
struct ComposedLayout;

template <class T>
struct is_composed_layout : std::false_type {};
template <class Sw, class O, class L>
struct is_composed_layout<ComposedLayout<Sw, O, L>> : std::true_type {};

template <int B, int M, int S>
struct is_static<Swizzle<B, M, S>> : std::true_type {};

template <class Sw, class O, class L>
struct is_static<ComposedLayout<Sw, O, L>>
    : std::integral_constant<bool, is_static<O>::value && is_static<L>::value> {};

namespace detail {
// swizzle(x) for a typed offset: an Int stays an Int, a run-time integer is swizzled at run time.
template <int B, int M, int S, class T>
CG_HOST_DEVICE constexpr auto apply_swizzle(Swizzle<B, M, S> sw, T const& x) {
  if constexpr (is_int_constant<T>::value) {
    constexpr int64_t v = Swizzle<B, M, S>::kValue(int64_t(T::value));
    return Int<int(v)>{};
  } else {
    return sw(x);
  }
}
}  // namespace detail

template <class SwizzleFn, class Offset, class Inner>
struct ComposedLayout : private tuple<SwizzleFn, Offset, Inner> {
  static_assert(is_layout<Inner>::value, "ComposedLayout: the inner layout must be a Layout");
  static_assert(is_integral<Offset>::value, "ComposedLayout: the offset must be an integer");

  ComposedLayout() = default;
  CG_HOST_DEVICE constexpr ComposedLayout(SwizzleFn const& sw, Offset const& off, Inner const& l)
      : tuple<SwizzleFn, Offset, Inner>(sw, off, l) {}

  // CuTe's names: layout_a() is the outer function (the swizzle), layout_b() the inner layout.
  CG_HOST_DEVICE constexpr SwizzleFn layout_a() const { return get<0>(storage()); }
  CG_HOST_DEVICE constexpr decltype(auto) offset() const { return get<1>(storage()); }
  CG_HOST_DEVICE constexpr decltype(auto) layout_b() const { return get<2>(storage()); }
  CG_HOST_DEVICE constexpr decltype(auto) shape() const { return layout_b().shape(); }

  // CL(c) = swizzle(offset + inner(c)); a coordinate with `_` slices (see slice below).
  template <class Coord>
  CG_HOST_DEVICE constexpr auto operator()(Coord const& c) const {
    if constexpr (contains_underscore<Coord>::value) {
      return slice(c, *this);
    } else {
      return detail::apply_swizzle(layout_a(), offset() + layout_b()(c));
    }
  }
  template <class C0, class C1, class... Cs>
  CG_HOST_DEVICE constexpr auto operator()(C0 const& c0, C1 const& c1, Cs const&... cs) const {
    return (*this)(make_coord(c0, c1, cs...));
  }

 private:
  CG_HOST_DEVICE constexpr tuple<SwizzleFn, Offset, Inner> const& storage() const { return *this; }
};

template <class Sw, class O, class L>
CG_HOST_DEVICE constexpr ComposedLayout<Sw, O, L> make_composed_layout(Sw const& sw, O const& off,
                                                                       L const& l) {
  return ComposedLayout<Sw, O, L>(sw, off, l);
}

// composition(swizzle, L) = swizzle o L (offset 0).
template <int B, int M, int S, class LS, class LD>
CG_HOST_DEVICE constexpr auto composition(Swizzle<B, M, S> const& sw, Layout<LS, LD> const& l) {
  return make_composed_layout(sw, Int<0>{}, l);
}

// composition(CL, B) = swizzle o (offset + inner o B): B reshapes the domain only.
template <class Sw, class O, class L, class B, std::enable_if_t<is_tiler<B>::value, int> = 0>
CG_HOST_DEVICE constexpr auto composition(ComposedLayout<Sw, O, L> const& cl, B const& b) {
  return make_composed_layout(cl.layout_a(), cl.offset(), composition(cl.layout_b(), b));
}

// The divides act on the inner layout (each is a composition on the right).
template <class Sw, class O, class L, class B>
CG_HOST_DEVICE constexpr auto logical_divide(ComposedLayout<Sw, O, L> const& cl, B const& b) {
  return make_composed_layout(cl.layout_a(), cl.offset(), logical_divide(cl.layout_b(), b));
}
template <class Sw, class O, class L, class B>
CG_HOST_DEVICE constexpr auto zipped_divide(ComposedLayout<Sw, O, L> const& cl, B const& b) {
  return make_composed_layout(cl.layout_a(), cl.offset(), zipped_divide(cl.layout_b(), b));
}
template <class Sw, class O, class L, class B>
CG_HOST_DEVICE constexpr auto tiled_divide(ComposedLayout<Sw, O, L> const& cl, B const& b) {
  return make_composed_layout(cl.layout_a(), cl.offset(), tiled_divide(cl.layout_b(), b));
}

// Slicing folds the sliced-away part into the offset, inside the swizzle.
template <class C, class Sw, class O, class L>
CG_HOST_DEVICE constexpr auto slice(C const& c, ComposedLayout<Sw, O, L> const& cl) {
  const auto so = slice_and_offset(c, cl.layout_b());
  return make_composed_layout(cl.layout_a(), cl.offset() + get<1>(so), get<0>(so));
}

// (slice, _0): a ComposedLayout's slice never moves the base pointer.
template <class C, class Sw, class O, class L>
CG_HOST_DEVICE constexpr auto slice_and_offset(C const& c, ComposedLayout<Sw, O, L> const& cl) {
  return make_tuple(slice(c, cl), Int<0>{});
}

// Queries forward to the inner layout (the swizzle permutes offsets within aligned blocks of
// 2^(B+M+|S|), so cosize is the inner layout's for the tile sizes swizzles are used with).
template <std::size_t... Is, class Sw, class O, class L>
CG_HOST_DEVICE constexpr auto shape(ComposedLayout<Sw, O, L> const& cl) {
  return shape<Is...>(cl.layout_b());
}
template <std::size_t... Is, class Sw, class O, class L>
CG_HOST_DEVICE constexpr auto size(ComposedLayout<Sw, O, L> const& cl) {
  return size<Is...>(cl.layout_b());
}
template <std::size_t... Is, class Sw, class O, class L>
CG_HOST_DEVICE constexpr auto rank(ComposedLayout<Sw, O, L> const& cl) {
  return rank<Is...>(cl.layout_b());
}
template <std::size_t... Is, class Sw, class O, class L>
CG_HOST_DEVICE constexpr auto depth(ComposedLayout<Sw, O, L> const& cl) {
  return depth<Is...>(cl.layout_b());
}
template <class Sw, class O, class L>
CG_HOST_DEVICE constexpr auto cosize(ComposedLayout<Sw, O, L> const& cl) {
  return cosize(cl.layout_b());
}

// local_tile / local_partition on a swizzled layout: (composed layout, _0), as for Layout.
template <class Sw, class O, class L, class T, class C>
CG_HOST_DEVICE constexpr auto local_tile(ComposedLayout<Sw, O, L> const& cl, T const& tiler,
                                         C const& coord) {
  const auto z = zipped_divide(cl, tiler);
  return slice_and_offset(local_tile_coord(z.layout_b(), tiler, coord), z);
}
template <class Sw, class O, class L, class TS, class TD, class I>
CG_HOST_DEVICE constexpr auto local_partition(ComposedLayout<Sw, O, L> const& cl,
                                              Layout<TS, TD> const& thr, I const& idx) {
  const auto z = zipped_divide(cl, thread_tiler(thr));
  return slice_and_offset(local_partition_coord(z.layout_b(), thr, idx), z);
}

// The DynComposedLayout of a typed one (constexpr when static).
template <int B, int M, int S, class O, class L>
CG_HOST_DEVICE constexpr DynComposedLayout to_dyn(
    ComposedLayout<Swizzle<B, M, S>, O, L> const& cl) {
  DynComposedLayout r;
  r.swizzle = Swizzle<B, M, S>::kValue;
  r.offset = int64_t(to_int(cl.offset()));
  r.layout = to_dyn(cl.layout_b());
  return r;
}

// print: "Sw<3,3,3> o 0 o (8,64):(64,1)", the Dyn core's text form.
template <int B, int M, int S, class O, class L>
CG_HOST_DEVICE void print(ComposedLayout<Swizzle<B, M, S>, O, L> const& cl) {
  printf("Sw<%d,%d,%d> o ", B, M, S);
  print(cl.offset());
  printf(" o ");
  print(cl.layout_b());
}

template <class Sw, class O, class L>
inline std::string to_string(ComposedLayout<Sw, O, L> const& cl) {
  return to_string(to_dyn(cl));
}

}  // namespace cute_gemm
