#pragma once
// The typed layout algebra: the DynLayout algebra (dyn_layout_algebra.hpp) lifted to Layout types.
//
// Static operands: the Dyn algorithm runs in the constant evaluator on to_dyn(operands) and its
// result is lifted back into Int<N> types, so the result is a compile-time constant:
//   using L = Layout<Shape<_2, Shape<_1, _6>>, Stride<_1, Stride<_6, _2>>>;
//   decltype(coalesce(L{}))  is  Layout<_12, _1>;   static_assert(size(coalesce(L{})) == 12);
// There is one implementation of each algorithm (the Dyn one); this header only converts.
//
// Dynamic operands, for tiling global-memory tensors whose extents and leading dimensions are run
// time values (the only cases a kernel needs):
//   (a) static shape, run-time strides, static tiler: composition and the divides. The Dyn core
//       composes the shape symbolically (composition_symbolic): each result stride is one of A's
//       strides times a static multiplier, rebuilt here as get<k>(flatten(stride(A))) * Int<m>.
//   (b) run-time shape: zipped/logical/tiled_divide (and local_tile, local_partition) by a tuple of
//       static sizes. Mode s:d divided by b is ((b):(d), ceil_div(s, b):(b*d)): the rest mode
//       rounds up (CuTe's semantics); the caller predicates the ragged last tile.
// Any other mix of static and dynamic operands is a compile error naming the operation.
//
// Tilers (the right operand of the by-mode operations) are a Layout (applied to the whole layout)
// or a tuple (Tile<...>, Shape<...>) whose entries are Layouts or static sizes Int<N> (= N:_1),
// entry i applied to mode i.

#include "cute_gemm/dyn_layout_algebra.hpp"
#include "cute_gemm/layout.hpp"

namespace cute_gemm {

// ------------------------------------------------------------------------------------------------
// Tilers

template <class T>
struct is_tiler_entry
    : std::integral_constant<bool, is_int_constant<T>::value || is_layout<T>::value> {};

template <class T>
struct is_tiler : std::integral_constant<bool, is_layout<T>::value || is_int_constant<T>::value> {};
template <class... Ts>
struct is_tiler<tuple<Ts...>> : std::integral_constant<bool, (is_tiler_entry<Ts>::value && ...)> {};

namespace detail {

// A tiler entry as a layout: Int<N> is N:_1.
template <class T>
CG_HOST_DEVICE constexpr auto tiler_entry_layout(T const& t) {
  static_assert(is_tiler_entry<T>::value,
                "tiler: each entry must be a Layout or a static size Int<N> (nested tilers are "
                "not supported)");
  if constexpr (is_layout<T>::value) {
    return t;
  } else {
    return make_layout(t, Int<1>{});
  }
}

// A by-mode tiler (a tuple) as the DynLayout whose top-level modes are its layouts: the form
// composition_by_mode and the *_divide_by_mode functions take.
template <class T, std::size_t... Is>
CG_HOST_DEVICE constexpr DynLayout tiler_to_dyn(T const& t, std::index_sequence<Is...>) {
  DynLayout r = make_dyn_layout_empty();
  ((r = append(r, to_dyn(tiler_entry_layout(get<Is>(t))))), ...);
  return r;
}
template <class T>
CG_HOST_DEVICE constexpr DynLayout tiler_to_dyn(T const& t) {
  return tiler_to_dyn(t, std::make_index_sequence<tuple_size<T>::value>{});
}

// The Dyn form of a whole-layout right operand (a Layout, or Int<N> meaning N:_1).
template <class B>
CG_HOST_DEVICE constexpr DynLayout operand_to_dyn(B const& b) {
  return to_dyn(tiler_entry_layout(b));
}

// The lifted result of a constexpr Dyn computation: Op::apply(Args{}...) runs at compile time.
// Ops are structs (a lambda cannot be a template argument in C++17).
template <class Op, class... Args>
struct DynResult {
  static constexpr DynLayout value = Op::apply(Args{}...);
};
template <class Op, class... Args>
CG_HOST_DEVICE constexpr auto lift_result() {
  return lift_layout<DynResult<Op, Args...>>();
}

struct CoalesceOp {
  template <class L>
  static constexpr DynLayout apply(L const& l) {
    return coalesce(to_dyn(l));
  }
};
struct CoalesceByModeOp {
  template <class L>
  static constexpr DynLayout apply(L const& l) {
    return coalesce_by_mode(to_dyn(l));
  }
};
struct FilterOp {
  template <class L>
  static constexpr DynLayout apply(L const& l) {
    return filter(to_dyn(l));
  }
};
struct CompositionOp {
  template <class A, class B>
  static constexpr DynLayout apply(A const& a, B const& b) {
    if constexpr (is_tuple<B>::value) {
      return composition_by_mode(to_dyn(a), tiler_to_dyn(b));
    } else {
      return composition(to_dyn(a), operand_to_dyn(b));
    }
  }
};
struct ComplementOp {
  template <class A, class M>
  static constexpr DynLayout apply(A const& a, M const&) {
    return complement(to_dyn(a), M::value);
  }
};
struct RightInverseOp {
  template <class L>
  static constexpr DynLayout apply(L const& l) {
    return right_inverse(to_dyn(l));
  }
};
struct LeftInverseOp {
  template <class L>
  static constexpr DynLayout apply(L const& l) {
    return left_inverse(to_dyn(l));
  }
};

enum class DivideKind { kLogical, kZipped, kTiled };

template <DivideKind K>
struct DivideOp {
  template <class A, class B>
  static constexpr DynLayout apply(A const& a, B const& b) {
    if constexpr (!is_tuple<B>::value) {
      // A whole-layout tiler: (tile, rest) is already the zipped and the tiled form.
      return logical_divide(to_dyn(a), operand_to_dyn(b));
    } else if constexpr (K == DivideKind::kLogical) {
      return logical_divide_by_mode(to_dyn(a), tiler_to_dyn(b));
    } else if constexpr (K == DivideKind::kZipped) {
      return zipped_divide_by_mode(to_dyn(a), tiler_to_dyn(b));
    } else {
      return tiled_divide_by_mode(to_dyn(a), tiler_to_dyn(b));
    }
  }
};

struct LogicalProductOp {
  template <class A, class B>
  static constexpr DynLayout apply(A const& a, B const& b) {
    return logical_product(to_dyn(a), to_dyn(b));
  }
};
struct BlockedProductOp {
  template <class A, class B>
  static constexpr DynLayout apply(A const& a, B const& b) {
    return blocked_product(to_dyn(a), to_dyn(b));
  }
};
struct RakedProductOp {
  template <class A, class B>
  static constexpr DynLayout apply(A const& a, B const& b) {
    return raked_product(to_dyn(a), to_dyn(b));
  }
};
struct TileToShapeOp {
  template <class A, class S>
  static constexpr DynLayout apply(A const& a, S const& s) {
    return tile_to_shape(to_dyn(a), to_dyn(s));
  }
};

}  // namespace detail

// ------------------------------------------------------------------------------------------------
// Static-only operations

// coalesce(L): the same function of the 1-D index with the fewest modes.
// Example: (2,(1,6)):(1,(6,2)) -> 12:1.
template <class S, class D>
CG_HOST_DEVICE constexpr auto coalesce(Layout<S, D> const&) {
  static_assert(is_static<Layout<S, D>>::value,
                "coalesce: the typed layer supports static layouts "
                "only (use the Dyn algebra at run time)");
  return detail::lift_result<detail::CoalesceOp, Layout<S, D>>();
}

// coalesce_by_mode(L): each top-level mode coalesced on its own, the rank kept.
template <class S, class D>
CG_HOST_DEVICE constexpr auto coalesce_by_mode(Layout<S, D> const&) {
  static_assert(is_static<Layout<S, D>>::value,
                "coalesce_by_mode: the typed layer supports static layouts only");
  return detail::lift_result<detail::CoalesceByModeOp, Layout<S, D>>();
}

// filter(L): drops stride-0 and size-1 modes, then coalesces. Example: (4,2,3):(0,1,2) -> 6:1.
template <class S, class D>
CG_HOST_DEVICE constexpr auto filter(Layout<S, D> const&) {
  static_assert(is_static<Layout<S, D>>::value,
                "filter: the typed layer supports static layouts "
                "only");
  return detail::lift_result<detail::FilterOp, Layout<S, D>>();
}

// complement(A, M): the ordered layout, disjoint in image from A, with (A, complement) covering
// [0, M). M defaults to cosize(A). Example: complement(4:2, _24) == (2,3):(1,8).
template <class S, class D, int M>
CG_HOST_DEVICE constexpr auto complement(Layout<S, D> const&, Int<M>) {
  static_assert(is_static<Layout<S, D>>::value,
                "complement: the typed layer supports static layouts only");
  return detail::lift_result<detail::ComplementOp, Layout<S, D>, Int<M>>();
}
template <class S, class D>
CG_HOST_DEVICE constexpr auto complement(Layout<S, D> const& a) {
  static_assert(is_static<Layout<S, D>>::value,
                "complement: the typed layer supports static layouts only");
  return complement(a, cosize(a));
}

// right_inverse(L): R with L(R(i)) == i for i < size(R). Example: (4,2):(2,1) -> (2,4):(4,1).
template <class S, class D>
CG_HOST_DEVICE constexpr auto right_inverse(Layout<S, D> const&) {
  static_assert(is_static<Layout<S, D>>::value,
                "right_inverse: the typed layer supports static layouts only");
  return detail::lift_result<detail::RightInverseOp, Layout<S, D>>();
}

// left_inverse(L): R with R(L(i)) == i for i < size(L). @pre L injective.
template <class S, class D>
CG_HOST_DEVICE constexpr auto left_inverse(Layout<S, D> const&) {
  static_assert(is_static<Layout<S, D>>::value,
                "left_inverse: the typed layer supports static layouts only");
  return detail::lift_result<detail::LeftInverseOp, Layout<S, D>>();
}

// logical_product(A, B) = (A, complement(A, size(A)*cosize(B)) o B).
// Example: (2,2):(4,1) x 6:1 -> ((2,2),(2,3)):((4,1),(2,8)).
template <class SA, class DA, class SB, class DB>
CG_HOST_DEVICE constexpr auto logical_product(Layout<SA, DA> const&, Layout<SB, DB> const&) {
  static_assert(is_static<Layout<SA, DA>>::value && is_static<Layout<SB, DB>>::value,
                "logical_product: the typed layer supports static layouts only");
  return detail::lift_result<detail::LogicalProductOp, Layout<SA, DA>, Layout<SB, DB>>();
}

// blocked_product(A, B): mode i = (A_i, B'_i): B's arrangement of contiguous copies of A.
// Example: (2,5):(5,1) x (3,4):(1,3) -> ((2,3),(5,4)):((5,10),(1,30)).
template <class SA, class DA, class SB, class DB>
CG_HOST_DEVICE constexpr auto blocked_product(Layout<SA, DA> const&, Layout<SB, DB> const&) {
  static_assert(is_static<Layout<SA, DA>>::value && is_static<Layout<SB, DB>>::value,
                "blocked_product: the typed layer supports static layouts only");
  return detail::lift_result<detail::BlockedProductOp, Layout<SA, DA>, Layout<SB, DB>>();
}

// raked_product(A, B): mode i = (B'_i, A_i): the copies of A interleaved across B.
template <class SA, class DA, class SB, class DB>
CG_HOST_DEVICE constexpr auto raked_product(Layout<SA, DA> const&, Layout<SB, DB> const&) {
  static_assert(is_static<Layout<SA, DA>>::value && is_static<Layout<SB, DB>>::value,
                "raked_product: the typed layer supports static layouts only");
  return detail::lift_result<detail::RakedProductOp, Layout<SA, DA>, Layout<SB, DB>>();
}

// tile_to_shape(block, shape): copies of block, column-major, covering shape; modes coalesced.
// Example: tile_to_shape((8,8):(8,1), (_32,_64)) == (32,(8,8)):(8,(1,256)).
template <class S, class D, class T>
CG_HOST_DEVICE constexpr auto tile_to_shape(Layout<S, D> const&, T const&) {
  static_assert(is_static<Layout<S, D>>::value && is_static<T>::value,
                "tile_to_shape: the typed layer supports a static block and a static shape only");
  return detail::lift_result<detail::TileToShapeOp, Layout<S, D>, T>();
}

// ------------------------------------------------------------------------------------------------
// Symbolic strides: path (a), a static shape with run-time strides

namespace detail {

// A layout whose strides are symbolic: leaf k's stride is A_stride[origin_k] * mult_k (0 where
// origin_k == -1). Both are kept as DynLayouts of the same shape so that the Dyn regrouping
// (gather_divided) can rearrange them in step.
struct DynSymbolicLayout {
  DynLayout mult;
  DynLayout origin;
};

// Adds `base` to every non-negative origin: the leaf numbering of a mode inside the whole of A.
CG_HOST_DEVICE constexpr DynTuple offset_origin(DynTuple o, int base) {
  for (int i = 0; i < o.n; ++i)
    if (o.kind[i] == DynTuple::kLeaf && o.value[i] >= 0) o.value[i] += base;
  return o;
}

// A composed symbolically with b, origins renumbered from `base`.
CG_HOST_DEVICE constexpr DynSymbolicLayout symbolic_compose(DynTuple const& a_shape,
                                                            DynLayout const& b, int base) {
  const DynSymbolicComposition c = composition_symbolic(a_shape, b);
  DynSymbolicLayout r;
  r.mult = c.layout;
  r.origin.shape = c.layout.shape;
  r.origin.stride = offset_origin(c.origin, base);
  return r;
}

// A mode kept as it is: multipliers 1, origins its own leaves.
CG_HOST_DEVICE constexpr DynSymbolicLayout symbolic_identity(DynTuple const& a_shape, int base) {
  DynSymbolicLayout r;
  r.mult.shape = a_shape;
  r.mult.stride = a_shape;
  r.origin.shape = a_shape;
  r.origin.stride = a_shape;
  int leaf = base;
  for (int i = 0; i < a_shape.n; ++i) {
    if (a_shape.kind[i] == DynTuple::kLeaf) {
      r.mult.stride.value[i] = 1;
      r.origin.stride.value[i] = leaf++;
    }
  }
  return r;
}

// One mode (or the whole of A) composed with b (compose) or divided by b (divide).
CG_HOST_DEVICE constexpr DynSymbolicLayout symbolic_apply(DynTuple const& a_shape,
                                                          DynLayout const& b, bool divide,
                                                          int base) {
  if (!divide) return symbolic_compose(a_shape, b, base);
  return symbolic_compose(a_shape, make_dyn_layout_pair(b, complement(b, product(a_shape))), base);
}

CG_HOST_DEVICE constexpr void append_symbolic(DynSymbolicLayout& r, DynSymbolicLayout const& m) {
  r.mult = append(r.mult, m.mult);
  r.origin = append(r.origin, m.origin);
}

// The by-mode operation on a shape-only A, mirroring composition_by_mode and the
// *_divide_by_mode functions of the Dyn core (same result shapes).
CG_HOST_DEVICE constexpr DynSymbolicLayout symbolic_by_mode(DynTuple const& a_shape,
                                                            DynLayout const& tiler, bool divide,
                                                            int regroup /*0: none, 1: zipped,
                                                                          2: tiled*/) {
  const int r = rank(tiler);
  CG_REQUIRE(r <= rank(a_shape), "by-mode tiler of rank {a} is longer than the layout's rank {b}",
             r, rank(a_shape));
  DynSymbolicLayout out;
  if (!a_shape.is_tuple()) {
    out = symbolic_apply(a_shape, mode(tiler, 0), divide, 0);
    if (regroup == 0) return out;
    out.mult = append(make_dyn_layout_empty(), out.mult);
    out.origin = append(make_dyn_layout_empty(), out.origin);
  } else {
    out.mult = make_dyn_layout_empty();
    out.origin = make_dyn_layout_empty();
    int base = 0;
    for (int i = 0; i < rank(a_shape); ++i) {
      const DynTuple mi = get(a_shape, i);
      append_symbolic(out, i < r ? symbolic_apply(mi, mode(tiler, i), divide, base)
                                 : symbolic_identity(mi, base));
      base += leaf_count(mi);
    }
    if (regroup == 0) return out;
  }
  out.mult = gather_divided(out.mult, r, regroup == 1);
  out.origin = gather_divided(out.origin, r, regroup == 1);
  return out;
}

// regroup: 0 none (composition, logical_divide), 1 zipped, 2 tiled.
template <bool Divide, int Regroup>
struct SymbolicOp {
  template <class AShape, class B>
  static constexpr DynSymbolicLayout apply(AShape const& s, B const& b) {
    if constexpr (is_tuple<B>::value) {
      return symbolic_by_mode(to_dyn(s), tiler_to_dyn(b), Divide, Regroup);
    } else {
      return symbolic_apply(to_dyn(s), operand_to_dyn(b), Divide, 0);
    }
  }
};

template <class Op, class AShape, class B>
struct SymbolicResult {
  static constexpr DynSymbolicLayout sym = Op::apply(AShape{}, B{});
  struct Shape {
    static constexpr DynTuple value = sym.mult.shape;
  };
  struct Mult {
    static constexpr DynTuple value = sym.mult.stride;
  };
  struct Origin {
    static constexpr DynTuple value = sym.origin.stride;
  };
};

// The stride of one result leaf: A's stride `origin` scaled by the static multiplier.
template <class M, class O, class FlatStride>
CG_HOST_DEVICE constexpr auto build_symbolic_stride(M const& m, O const& o, FlatStride const& fd) {
  if constexpr (is_tuple<M>::value) {
    return transform(
        m, o, [&](auto const& mi, auto const& oi) { return build_symbolic_stride(mi, oi, fd); });
  } else if constexpr (O::value < 0) {
    return Int<0>{};
  } else if constexpr (M::value == 1) {
    return get<O::value>(fd);
  } else {
    return get<O::value>(fd) * m;
  }
}

template <bool Divide, int Regroup, class S, class D, class B>
CG_HOST_DEVICE constexpr auto symbolic_layout(Layout<S, D> const& a, B const&) {
  using R = SymbolicResult<SymbolicOp<Divide, Regroup>, S, B>;
  const auto shape = lift_int_tuple<typename R::Shape>();
  const auto mult = lift_int_tuple<typename R::Mult>();
  const auto origin = lift_int_tuple<typename R::Origin>();
  const auto fd = as_tuple(flatten(a.stride()));
  return make_layout(shape, build_symbolic_stride(mult, origin, fd));
}

// ------------------------------------------------------------------------------------------------
// Path (b): run-time shape divided by static sizes

template <class T>
struct is_static_size : is_int_constant<T> {};
template <int N>
struct is_static_size<Layout<Int<N>, Int<1>>> : std::true_type {};

template <class T>
CG_HOST_DEVICE constexpr auto static_size_of(T const& t) {
  if constexpr (is_layout<T>::value) {
    return t.shape();
  } else {
    return t;
  }
}

// One mode s:d divided by b: ((b, ceil_div(s, b)):(d, b*d)) as (tile layout, rest layout).
template <class S, class D, class B>
CG_HOST_DEVICE constexpr auto divide_mode(S const& s, D const& d, B const& b) {
  static_assert(!is_tuple<S>::value,
                "divide: a mode with a run-time shape must be a single integer to be divided "
                "(nested run-time modes are not supported)");
  return make_tuple(make_layout(b, d), make_layout((s + b - Int<1>{}) / b, b * d));
}

template <int Regroup, class S, class D, class T, std::size_t... Is, std::size_t... Js>
CG_HOST_DEVICE constexpr auto dynamic_divide_modes(Layout<S, D> const& a, T const& t,
                                                   std::index_sequence<Is...>,
                                                   std::index_sequence<Js...>) {
  constexpr std::size_t R = sizeof...(Is);
  const auto parts = make_tuple(
      divide_mode(get<Is>(a.shape()), get<Is>(a.stride()), static_size_of(get<Is>(t)))...);
  if constexpr (Regroup == 0) {
    return make_layout(make_layout(get<0>(get<Is>(parts)), get<1>(get<Is>(parts)))...,
                       layout<R + Js>(a)...);
  } else if constexpr (Regroup == 1) {
    return make_layout(make_layout(get<0>(get<Is>(parts))...),
                       make_layout(get<1>(get<Is>(parts))..., layout<R + Js>(a)...));
  } else {
    return make_layout(make_layout(get<0>(get<Is>(parts))...), get<1>(get<Is>(parts))...,
                       layout<R + Js>(a)...);
  }
}

template <int Regroup, class S, class D, class T>
CG_HOST_DEVICE constexpr auto dynamic_divide(Layout<S, D> const& a, T const& t) {
  static_assert(is_tuple<T>::value,
                "divide of a layout with a run-time shape: the tiler must be a tuple of static "
                "sizes, e.g. Shape<_128, _32>");
  constexpr std::size_t R = tuple_size<T>::value;
  if constexpr (is_tuple<S>::value) {
    constexpr std::size_t N = tuple_size<S>::value;
    static_assert(R <= N, "divide: the tiler has more modes than the layout");
    return dynamic_divide_modes<Regroup>(a, t, std::make_index_sequence<R>{},
                                         std::make_index_sequence<N - R>{});
  } else {
    static_assert(R == 1, "divide: a rank-1 layout takes a rank-1 tiler");
    const auto p = divide_mode(a.shape(), a.stride(), static_size_of(get<0>(t)));
    if constexpr (Regroup == 0) {
      return make_layout(get<0>(p), get<1>(p));
    } else {
      return make_layout(make_layout(get<0>(p)), make_layout(get<1>(p)));
    }
  }
}

template <class T>
struct all_static_sizes : std::false_type {};
template <class... Ts>
struct all_static_sizes<tuple<Ts...>>
    : std::integral_constant<bool, (is_static_size<Ts>::value && ...)> {};

// Dispatch of the divides (Regroup 0: logical, 1: zipped, 2: tiled).
template <int Regroup, class S, class D, class B>
CG_HOST_DEVICE constexpr auto divide(Layout<S, D> const& a, B const& b) {
  static_assert(is_tiler<B>::value,
                "divide: the tiler must be a Layout, an Int<N>, or a tuple of "
                "Layouts and Int<N>");
  static_assert(is_static<B>::value, "divide: the tiler must be static");
  if constexpr (is_static<S>::value && is_static<D>::value) {
    constexpr DivideKind K = Regroup == 0   ? DivideKind::kLogical
                             : Regroup == 1 ? DivideKind::kZipped
                                            : DivideKind::kTiled;
    return lift_result<DivideOp<K>, Layout<S, D>, B>();
  } else if constexpr (is_static<S>::value) {
    return symbolic_layout<true, Regroup>(a, b);
  } else {
    static_assert(all_static_sizes<B>::value,
                  "divide of a layout with a run-time shape: the tiler must be a tuple of static "
                  "sizes Int<N> (or N:_1 layouts)");
    return dynamic_divide<Regroup>(a, b);
  }
}

}  // namespace detail

// ------------------------------------------------------------------------------------------------
// composition and the divides: static, or path (a), or (divides only) path (b)

// composition(A, B): R(c) = A(B(c)); R has B's shape. B a Layout or Int<N> (N:_1): whole-layout;
// B a tuple of Layouts / Int<N>: by mode (mode i of A composed with entry i, the rest kept).
// Example: (6,2):(8,2) o (4,3):(3,1) == ((2,2),3):((24,2),8).
// A with a static shape and run-time strides: the strides are A's times static multipliers, e.g.
// (128,32):(ld,_1) o (8,4):(32,1) == ((4,2),4):((32*ld,1),ld).
template <class S, class D, class B, std::enable_if_t<is_tiler<B>::value, int> = 0>
CG_HOST_DEVICE constexpr auto composition(Layout<S, D> const& a, B const& b) {
  static_assert(is_static<B>::value, "composition: the right operand must be static");
  if constexpr (is_static<S>::value && is_static<D>::value) {
    return detail::lift_result<detail::CompositionOp, Layout<S, D>, B>();
  } else {
    static_assert(is_static<S>::value,
                  "composition: the left operand needs a static shape (its strides may be run-time "
                  "values); for a run-time shape use zipped_divide / local_tile");
    return detail::symbolic_layout<false, 0>(a, b);
  }
}

// logical_divide(A, B) = A o (B, complement(B, size(A))), by mode for a tuple tiler:
// mode i becomes (tile_i, rest_i). Example: 24:1 / 4:2 == (4,(2,3)):(2,(1,8)).
template <class S, class D, class B>
CG_HOST_DEVICE constexpr auto logical_divide(Layout<S, D> const& a, B const& b) {
  return detail::divide<0>(a, b);
}

// zipped_divide(A, tiler) = ((tile modes), (rest modes)): mode 0 indexes inside a tile, mode 1
// picks the tile. Example: (8,6):(1,8) by (2, 3) == ((2,3),(4,2)):((1,8),(2,24)).
template <class S, class D, class B>
CG_HOST_DEVICE constexpr auto zipped_divide(Layout<S, D> const& a, B const& b) {
  return detail::divide<1>(a, b);
}

// tiled_divide(A, tiler) = ((tile modes), rest0, rest1, ...).
template <class S, class D, class B>
CG_HOST_DEVICE constexpr auto tiled_divide(Layout<S, D> const& a, B const& b) {
  return detail::divide<2>(a, b);
}

// ------------------------------------------------------------------------------------------------
// Tiling and partitioning coordinates (the tensor versions in tensor.hpp use these)

namespace detail {
template <std::size_t N, class C>
CG_HOST_DEVICE constexpr auto pad_coord(C const& c) {
  const auto t = as_tuple(c);
  constexpr std::size_t K = tuple_size<decltype(t)>::value;
  static_assert(K <= N, "local_tile: the coordinate has more modes than there are tiles modes");
  return tuple_cat(t, repeat<N - K>(_));
}

// The 1-D position, inside its mode, of thread idx of a thread layout: mode i of
// thr.get_hier_coord(idx), linearised column-major within the mode.
template <class S, class D, class I, std::size_t... Is>
CG_HOST_DEVICE constexpr auto thread_coord(Layout<S, D> const& thr, I const& idx,
                                           std::index_sequence<Is...>) {
  const auto s = as_tuple(thr.shape());
  const auto d = as_tuple(thr.stride());
  return make_coord(
      crd2idx(idx2crd(idx, get<Is>(s), get<Is>(d)), get<Is>(s), compact_col_major(get<Is>(s)))...);
}
}  // namespace detail

// The slicing coordinate of local_tile: (_ for each tile mode, coord padded with _ for the rest
// modes). local_tile(A, tiler, coord) = zipped_divide(A, tiler)(local_tile_coord(...)).
// Example: zipped ((128,32),(mt,kt)) sliced at ((_,_),(m,k)) -> (128,32), the tile (m,k);
// at ((_,_),(m,_)) -> (128,32,kt): the m-th row of tiles.
template <class Z, class T, class C>
CG_HOST_DEVICE constexpr auto local_tile_coord(Z const& zipped, T const&, C const& coord) {
  static_assert(is_tuple<T>::value, "local_tile: the tiler must be a tuple (Shape<_128, _32>)");
  constexpr std::size_t R = tuple_size<T>::value;
  using RestShape = std::decay_t<decltype(get<1>(zipped.shape()))>;
  constexpr std::size_t N = is_tuple<RestShape>::value ? tuple_size<RestShape>::value : 1;
  return make_coord(repeat<R>(_), detail::pad_coord<N>(coord));
}

// local_tile(A, tiler, coord) for a layout: the tile at `coord` (a coordinate over the tiles,
// possibly with `_` to keep a tile mode). Tensors: see tensor.hpp.
template <class S, class D, class T, class C>
CG_HOST_DEVICE constexpr auto local_tile(Layout<S, D> const& a, T const& tiler, C const& coord) {
  const auto z = zipped_divide(a, tiler);
  return slice_and_offset(local_tile_coord(z, tiler, coord), z);
}

// The slicing coordinate of local_partition: thread idx of thr fixes the position inside each
// thr-shaped tile; every tile is kept. See local_partition in tensor.hpp.
template <class S, class D, class I, class Z>
CG_HOST_DEVICE constexpr auto local_partition_coord(Z const& zipped, Layout<S, D> const& thr,
                                                    I const& idx) {
  using RestShape = std::decay_t<decltype(get<1>(zipped.shape()))>;
  constexpr std::size_t N = is_tuple<RestShape>::value ? tuple_size<RestShape>::value : 1;
  constexpr std::size_t R = is_tuple<S>::value ? tuple_size<S>::value : 1;
  return make_coord(detail::thread_coord(thr, idx, std::make_index_sequence<R>{}), repeat<N>(_));
}

// The by-mode tiler of a thread layout: its per-mode sizes, always a tuple.
template <class S, class D>
CG_HOST_DEVICE constexpr auto thread_tiler(Layout<S, D> const& thr) {
  return as_tuple(product_each(thr.shape()));
}

// local_partition(A, thr, idx) for a layout: (layout, offset) of the elements of thread idx.
template <class S, class D, class TS, class TD, class I>
CG_HOST_DEVICE constexpr auto local_partition(Layout<S, D> const& a, Layout<TS, TD> const& thr,
                                              I const& idx) {
  static_assert(is_static<Layout<TS, TD>>::value,
                "local_partition: the thread layout must be "
                "static");
  const auto z = zipped_divide(a, thread_tiler(thr));
  return slice_and_offset(local_partition_coord(z, thr, idx), z);
}

}  // namespace cute_gemm
