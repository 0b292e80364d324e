#pragma once
// Tensor<Engine, Layout>: a layout over storage. t(c) is the element at offset layout(c).
//
// Engines:
//   ViewEngine<Ptr>     a non-owning pointer: T*, or a tagged gmem_ptr<T> / smem_ptr<T> (from
//                       make_gmem_ptr / make_smem_ptr) so that code can tell the memory space.
//   ArrayEngine<T, N>   an owning array (registers in a kernel): make_tensor<T>(static_layout),
//                       make_fragment_like(x).
// Slicing t(_, k) returns a view: the pointer advanced by the slice's offset and the sub-layout
// (for a swizzled ComposedLayout the offset stays inside the swizzle, the pointer does not move).
// Example (host):
//   float buf[6 * 4];
//   auto t = make_tensor(buf, make_layout(Shape<_6, _4>{}, LayoutRight{}));   // row-major 6x4
//   t(2, 3) = 1.f;          // buf[11]
//   auto row = t(2, _);     // 4 elements, view of buf + 8, layout _4:_1
//   auto tile = local_tile(t, Shape<_3, _2>{}, make_coord(1, 1));   // rows 3..5, cols 2..3

#include "cute_gemm/composed_layout.hpp"

#if defined(__CUDA_ARCH__)
#define CG_UNROLL _Pragma("unroll")
#else
#define CG_UNROLL
#endif

namespace cute_gemm {

// ------------------------------------------------------------------------------------------------
// Tagged pointers

struct gmem_tag {};
struct smem_tag {};

// A raw pointer tagged with its memory space. Arithmetic keeps the tag.
template <class T, class Space>
struct MemPtr {
  using value_type = T;
  using space = Space;
  T* ptr_ = nullptr;

  CG_HOST_DEVICE constexpr T* get() const { return ptr_; }
  CG_HOST_DEVICE constexpr T& operator*() const { return *ptr_; }
  template <class I>
  CG_HOST_DEVICE constexpr T& operator[](I const& i) const {
    return ptr_[to_int(i)];
  }
  template <class I, std::enable_if_t<is_integral<I>::value, int> = 0>
  CG_HOST_DEVICE constexpr MemPtr operator+(I const& i) const {
    return MemPtr{ptr_ + to_int(i)};
  }
};

template <class T>
using gmem_ptr = MemPtr<T, gmem_tag>;
template <class T>
using smem_ptr = MemPtr<T, smem_tag>;

template <class T>
CG_HOST_DEVICE constexpr gmem_ptr<T> make_gmem_ptr(T* p) {
  return gmem_ptr<T>{p};
}
template <class T>
CG_HOST_DEVICE constexpr smem_ptr<T> make_smem_ptr(T* p) {
  return smem_ptr<T>{p};
}

namespace detail {
template <class P>
struct pointee;
template <class T>
struct pointee<T*> {
  using type = T;
};
template <class T, class Space>
struct pointee<MemPtr<T, Space>> {
  using type = T;
};
}  // namespace detail

// ------------------------------------------------------------------------------------------------
// Engines

template <class Ptr>
struct ViewEngine {
  using iterator = Ptr;
  using value_type = std::remove_cv_t<typename detail::pointee<Ptr>::type>;
  Ptr ptr_;
  CG_HOST_DEVICE constexpr Ptr begin() const { return ptr_; }
};

template <class T, int N>
struct ArrayEngine {
  static_assert(N > 0, "ArrayEngine: the size must be positive");
  using iterator = T*;
  using value_type = T;
  T storage_[N];
  CG_HOST_DEVICE constexpr T* begin() { return storage_; }
  CG_HOST_DEVICE constexpr T const* begin() const { return storage_; }
};

// Memory-space traits of a pointer, an engine or a tensor (defined below for tensors).
template <class T>
struct is_smem : std::false_type {};
template <class T>
struct is_gmem : std::false_type {};
template <class T>
struct is_smem<MemPtr<T, smem_tag>> : std::true_type {};
template <class T>
struct is_gmem<MemPtr<T, gmem_tag>> : std::true_type {};
template <class P>
struct is_smem<ViewEngine<P>> : is_smem<P> {};
template <class P>
struct is_gmem<ViewEngine<P>> : is_gmem<P> {};

// ------------------------------------------------------------------------------------------------
// Tensor

template <class Engine, class Layout_>
struct Tensor;

template <class T>
struct is_tensor : std::false_type {};
template <class E, class L>
struct is_tensor<Tensor<E, L>> : std::true_type {};
template <class E, class L>
struct is_smem<Tensor<E, L>> : is_smem<E> {};
template <class E, class L>
struct is_gmem<Tensor<E, L>> : is_gmem<E> {};

template <class Ptr, class L>
CG_HOST_DEVICE constexpr auto make_tensor(Ptr p, L const& l);

template <class Engine, class Layout_>
struct Tensor : private tuple<Layout_, Engine> {
  static_assert(is_layout<Layout_>::value || is_composed_layout<Layout_>::value,
                "Tensor: the layout must be a Layout or a ComposedLayout");
  using engine_type = Engine;
  using layout_type = Layout_;
  using value_type = typename Engine::value_type;

  // Not `= default`: Tensor() then value-initialises to nothing, so an owning tensor's elements
  // stay uninitialised (registers are written before they are read) instead of being zeroed.
  CG_HOST_DEVICE Tensor() {}
  CG_HOST_DEVICE constexpr Tensor(Engine const& e, Layout_ const& l)
      : tuple<Layout_, Engine>(l, e) {}

  CG_HOST_DEVICE constexpr decltype(auto) layout() const { return get<0>(storage()); }
  CG_HOST_DEVICE constexpr decltype(auto) shape() const { return layout().shape(); }
  CG_HOST_DEVICE constexpr decltype(auto) engine() { return get<1>(storage()); }
  CG_HOST_DEVICE constexpr decltype(auto) engine() const { return get<1>(storage()); }
  // The base iterator: T* (or a tagged pointer) for a view, the array's T* for an owning tensor.
  CG_HOST_DEVICE constexpr auto data() { return engine().begin(); }
  CG_HOST_DEVICE constexpr auto data() const { return engine().begin(); }

  // t(c): the element at layout(c); with `_` in c, a view of the sub-tensor.
  template <class Coord>
  CG_HOST_DEVICE constexpr decltype(auto) operator()(Coord const& c) {
    if constexpr (contains_underscore<Coord>::value) {
      return sliced(c, data());
    } else {
      return data()[layout()(c)];
    }
  }
  template <class Coord>
  CG_HOST_DEVICE constexpr decltype(auto) operator()(Coord const& c) const {
    if constexpr (contains_underscore<Coord>::value) {
      return sliced(c, data());
    } else {
      return data()[layout()(c)];
    }
  }
  template <class C0, class C1, class... Cs>
  CG_HOST_DEVICE constexpr decltype(auto) operator()(C0 const& c0, C1 const& c1, Cs const&... cs) {
    return (*this)(make_coord(c0, c1, cs...));
  }
  template <class C0, class C1, class... Cs>
  CG_HOST_DEVICE constexpr decltype(auto) operator()(C0 const& c0, C1 const& c1,
                                                     Cs const&... cs) const {
    return (*this)(make_coord(c0, c1, cs...));
  }
  template <class I>
  CG_HOST_DEVICE constexpr decltype(auto) operator[](I const& i) {
    return (*this)(i);
  }
  template <class I>
  CG_HOST_DEVICE constexpr decltype(auto) operator[](I const& i) const {
    return (*this)(i);
  }

 private:
  CG_HOST_DEVICE constexpr tuple<Layout_, Engine> const& storage() const { return *this; }
  CG_HOST_DEVICE constexpr tuple<Layout_, Engine>& storage() { return *this; }
  template <class Coord, class P>
  CG_HOST_DEVICE constexpr auto sliced(Coord const& c, P const& p) const {
    const auto so = slice_and_offset(c, layout());
    return make_tensor(p + get<1>(so), get<0>(so));
  }
};

// ------------------------------------------------------------------------------------------------
// Construction

// make_tensor(ptr, layout): a view. ptr is T*, gmem_ptr<T> or smem_ptr<T>.
// make_tensor(ptr, shape[, stride or LayoutLeft/LayoutRight]): make_layout(...) first.
template <class Ptr, class L>
CG_HOST_DEVICE constexpr auto make_tensor(Ptr p, L const& l) {
  if constexpr (is_layout<L>::value || is_composed_layout<L>::value) {
    return Tensor<ViewEngine<Ptr>, L>(ViewEngine<Ptr>{p}, l);
  } else {
    return make_tensor(p, make_layout(l));
  }
}
template <class Ptr, class S, class D>
CG_HOST_DEVICE constexpr auto make_tensor(Ptr p, S const& s, D const& d) {
  return make_tensor(p, make_layout(s, d));
}

// make_tensor<T>(layout): an owning tensor (a register array in a kernel) of cosize(layout)
// elements, left uninitialised (clear() zeroes it). @pre layout static.
template <class T, class L>
CG_HOST_DEVICE auto make_tensor(L const&) {
  static_assert(is_layout<L>::value && is_static<L>::value,
                "make_tensor<T>(layout): an owning tensor needs a static Layout");
  constexpr int n = decltype(cosize(L{}))::value;
  return Tensor<ArrayEngine<T, n>, L>();  // no stores until the caller writes
}

// make_fragment_like<T>(x): an owning tensor with x's shape, compact column-major (whatever x's
// strides), of element type T (default: x's). x is a tensor or a layout with a static shape.
template <class T = void, class X>
CG_HOST_DEVICE auto make_fragment_like(X const& x) {
  if constexpr (is_tensor<X>::value) {
    using V = std::conditional_t<std::is_void<T>::value, typename X::value_type, T>;
    return make_fragment_like<V>(x.layout());
  } else {
    static_assert(!std::is_void<T>::value, "make_fragment_like(layout) needs an element type");
    static_assert(is_static<std::decay_t<decltype(x.shape())>>::value,
                  "make_fragment_like: the shape must be static");
    return make_tensor<T>(make_layout(x.shape()));
  }
}

// ------------------------------------------------------------------------------------------------
// Queries (as for layouts)

template <std::size_t... Is, class E, class L>
CG_HOST_DEVICE constexpr auto shape(Tensor<E, L> const& t) {
  return shape<Is...>(t.layout());
}
template <std::size_t... Is, class E, class L>
CG_HOST_DEVICE constexpr auto stride(Tensor<E, L> const& t) {
  return stride<Is...>(t.layout());
}
template <std::size_t... Is, class E, class L>
CG_HOST_DEVICE constexpr auto size(Tensor<E, L> const& t) {
  return size<Is...>(t.layout());
}
template <std::size_t... Is, class E, class L>
CG_HOST_DEVICE constexpr auto rank(Tensor<E, L> const& t) {
  return rank<Is...>(t.layout());
}
template <class E, class L>
CG_HOST_DEVICE constexpr auto cosize(Tensor<E, L> const& t) {
  return cosize(t.layout());
}

// ------------------------------------------------------------------------------------------------
// Tiling and partitioning

// local_tile(t, tiler, coord): the tile of t at `coord` over the tiles, a view.
// zipped_divide(t, tiler) sliced at (tile modes: _, tiles: coord padded with _). The tile count
// rounds up (ceil_div), so the last tile of a ragged extent reaches past it: predicate it.
// Example: gA (M,K):(K,1), local_tile(gA, Shape<_128,_32>{}, make_coord(m, k)) is the 128x32 tile
// at rows 128m.., columns 32k..; make_coord(m, _) keeps the k tiles as a third mode.
template <class E, class L, class T, class C>
CG_HOST_DEVICE constexpr auto local_tile(Tensor<E, L> const& t, T const& tiler, C const& coord) {
  const auto so = local_tile(t.layout(), tiler, coord);
  return make_tensor(t.data() + get<1>(so), get<0>(so));
}

// local_partition(t, thr, idx): the elements of t owned by thread idx of thread layout thr
// (static). t is cut into thr-shaped tiles (zipped_divide by the per-mode sizes of thr); thread idx
// takes, in every tile, the element at thr.get_hier_coord(idx) (the coordinate thr maps to idx).
// The result's modes run over the tiles. This is CuTe's local_partition(tensor, Layout, index):
// each thread owns every size(thr)-th element in thr's order. Example: t 8x8, thr (4,2):(2,1)
// (row-major threads): thread 3 is at (1,1) and owns t(1+4i, 1+2j) for i < 2, j < 4.
template <class E, class L, class TS, class TD, class I>
CG_HOST_DEVICE constexpr auto local_partition(Tensor<E, L> const& t, Layout<TS, TD> const& thr,
                                              I const& idx) {
  const auto so = local_partition(t.layout(), thr, idx);
  return make_tensor(t.data() + get<1>(so), get<0>(so));
}

// ------------------------------------------------------------------------------------------------
// Element-wise algorithms (generic, host and device)

// copy(src, dst): dst(i) = src(i) for every 1-D index i (each tensor's own layout order).
// @pre size(src) == size(dst) (checked at compile time when both are static).
template <class ES, class LS, class ED, class LD>
CG_HOST_DEVICE constexpr void copy(Tensor<ES, LS> const& src, Tensor<ED, LD>& dst) {
  using N = decltype(size(dst));
  if constexpr (is_static<N>::value && is_static<decltype(size(src))>::value) {
    static_assert(decltype(size(src))::value == N::value, "copy: the tensors differ in size");
  }
  const auto n = size(dst);
  CG_UNROLL
  for (int i = 0; i < int(n); ++i) dst(i) = src(i);
}
// A view passed as a temporary (copy(a, b(_, k))) is still written through.
template <class ES, class LS, class ED, class LD>
CG_HOST_DEVICE constexpr void copy(Tensor<ES, LS> const& src, Tensor<ED, LD>&& dst) {
  copy(src, dst);
}

// fill(t, v): every element of t set to v; clear(t): to T{}.
template <class E, class L, class V>
CG_HOST_DEVICE constexpr void fill(Tensor<E, L>& t, V const& v) {
  const auto n = size(t);
  CG_UNROLL
  for (int i = 0; i < int(n); ++i) t(i) = v;
}
template <class E, class L, class V>
CG_HOST_DEVICE constexpr void fill(Tensor<E, L>&& t, V const& v) {
  fill(t, v);
}
template <class E, class L>
CG_HOST_DEVICE constexpr void clear(Tensor<E, L>& t) {
  fill(t, typename Tensor<E, L>::value_type{});
}
template <class E, class L>
CG_HOST_DEVICE constexpr void clear(Tensor<E, L>&& t) {
  clear(t);
}

// print(t): "ptr o layout" (the layout only; the data is the caller's to print).
template <class E, class L>
CG_HOST_DEVICE void print(Tensor<E, L> const& t) {
  printf("tensor ");
  print(t.layout());
}

}  // namespace cute_gemm
