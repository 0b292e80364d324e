#pragma once
// DynLayout: a layout (shape:stride, congruent int tuples) held as data. The layout algebra
// (dyn_layout_algebra.hpp) is written once over this type; typed layouts lift its results.
//
// A layout is a function from coordinates to offsets: L(c) = sum_k c_k * d_k over the leaves.
// A 1-D index i is first turned into a coordinate with idx2crd (colexicographic order).
// Example: (8,(2,2)):(2,(1,16)) maps 17 -> (1,(0,1)) -> 1*2 + 0*1 + 1*16 = 18.

#include "cute_gemm/dyn_tuple.hpp"

namespace cute_gemm {

struct DynLayout {
  DynTuple shape;
  DynTuple stride;

  CG_HOST_DEVICE constexpr int64_t operator()(int64_t idx) const {
    CG_REQUIRE_IN_RANGE(idx >= 0 && idx < product(shape),
                        "index {a} out of range for a layout of size {b}", idx, product(shape));
    int64_t off = 0;
    for (int i = 0; i < shape.n; ++i) {
      if (shape.kind[i] == DynTuple::kLeaf) {
        off = checked_add(off,
                          checked_mul(idx % shape.value[i], stride.value[i],
                                      "L(i): coordinate {a} times stride {b} overflows int64"),
                          "L(i): the offset overflows int64 ({a} + {b})");
        idx /= shape.value[i];
      }
    }
    return off;
  }
  CG_HOST_DEVICE constexpr int64_t operator()(DynTuple const& crd) const {
    return crd2idx(crd, shape, stride);
  }
};

// @pre shape and stride congruent, every shape entry >= 1, no `_` in either.
CG_HOST_DEVICE constexpr DynLayout make_dyn_layout(DynTuple const& shape, DynTuple const& stride) {
  CG_REQUIRE(congruent(shape, stride),
             "shape and stride are not congruent (shape has {a} nodes, stride has {b})", shape.n,
             stride.n);
  for (int i = 0; i < shape.n; ++i) {
    CG_REQUIRE(shape.kind[i] != DynTuple::kUnderscore && stride.kind[i] != DynTuple::kUnderscore,
               "`_` is not allowed in a shape or stride", 0, 0);
    CG_REQUIRE(shape.kind[i] != DynTuple::kLeaf || shape.value[i] >= 1,
               "shape entries must be positive, got {a}", shape.value[i], 0);
  }
  DynLayout l;
  l.shape = shape;
  l.stride = stride;
  return l;
}

// Compact column-major layout of a shape: (2,(3,4)) -> (2,(3,4)):(1,(2,6)).
CG_HOST_DEVICE constexpr DynLayout make_dyn_layout(DynTuple const& shape) {
  return make_dyn_layout(shape, prefix_product(shape));
}

// Compact row-major layout of a shape: (2,3) -> (2,3):(3,1).
CG_HOST_DEVICE constexpr DynLayout make_dyn_layout_row_major(DynTuple const& shape) {
  return make_dyn_layout(shape, suffix_product(shape));
}

CG_HOST_DEVICE constexpr DynLayout make_dyn_layout(int64_t s, int64_t d) {
  return make_dyn_layout(make_dyn_int(s), make_dyn_int(d));
}

// (a, b): a rank-2 layout whose modes are the two layouts.
CG_HOST_DEVICE constexpr DynLayout make_dyn_layout_pair(DynLayout const& a, DynLayout const& b) {
  DynLayout l;
  l.shape = make_dyn_pair(a.shape, b.shape);
  l.stride = make_dyn_pair(a.stride, b.stride);
  return l;
}

// Concatenates modes: append(l, m) has rank(l)+1 modes (an integral l first becomes (l)).
CG_HOST_DEVICE constexpr DynLayout append(DynLayout const& l, DynLayout const& m) {
  DynLayout r;
  if (l.shape.is_tuple()) {
    r.shape = append(l.shape, m.shape);
    r.stride = append(l.stride, m.stride);
  } else {
    r = make_dyn_layout_pair(l, m);
  }
  return r;
}

// The empty layout () : (), the start of mode-by-mode construction.
CG_HOST_DEVICE constexpr DynLayout make_dyn_layout_empty() {
  DynLayout l;
  l.shape = make_dyn_tuple();
  l.stride = make_dyn_tuple();
  return l;
}

CG_HOST_DEVICE constexpr int64_t size(DynLayout const& l) { return product(l.shape); }
CG_HOST_DEVICE constexpr int rank(DynLayout const& l) { return rank(l.shape); }
CG_HOST_DEVICE constexpr int depth(DynLayout const& l) { return depth(l.shape); }

namespace detail {
// (s - 1) * |d|: how far one mode reaches, or -1 when that does not fit in int64. |d| is never
// formed on its own, so a size-1 mode with stride INT64_MIN reaches 0 as it should.
CG_HOST_DEVICE constexpr int64_t mode_reach(int64_t s, int64_t d) {
  if (mul_overflows(s - 1, d)) return -1;
  const int64_t r = (s - 1) * d;
  return r == INT64_MIN ? -1 : (r < 0 ? -r : r);
}
}  // namespace detail

// cosize: one past the largest offset, 1 + sum (s_k - 1) * |d_k|.
CG_HOST_DEVICE constexpr int64_t cosize(DynLayout const& l) {
  int64_t c = 1;
  for (int i = 0; i < l.shape.n; ++i) {
    if (l.shape.kind[i] != DynTuple::kLeaf) continue;
    const int64_t reach = detail::mode_reach(l.shape.value[i], l.stride.value[i]);
    CG_REQUIRE(reach >= 0, "cosize: mode {a}:{b} reaches past int64", l.shape.value[i],
               l.stride.value[i]);
    c = checked_add(c, reach, "cosize: the cosize overflows int64 ({a} + {b})");
  }
  return c;
}

// Why a layout cannot be used with int64 sizes and offsets: kFits, or which of size(L) and
// cosize(L) leaves int64. When both fit, every offset L(c) and every partial sum of
// c_k * d_k fits as well (each is at most cosize(L) - 1 in magnitude), so evaluation cannot
// overflow.
enum class LayoutRange { kFits = 0, kSizeOverflows = 1, kCosizeOverflows = 2 };

CG_HOST_DEVICE constexpr LayoutRange layout_range(DynLayout const& l) {
  int64_t sz = 1, co = 1;
  for (int i = 0; i < l.shape.n; ++i) {
    if (l.shape.kind[i] != DynTuple::kLeaf) continue;
    const int64_t s = l.shape.value[i];
    if (mul_overflows(sz, s)) return LayoutRange::kSizeOverflows;
    sz *= s;
    const int64_t reach = detail::mode_reach(s, l.stride.value[i]);
    if (reach < 0 || add_overflows(co, reach)) return LayoutRange::kCosizeOverflows;
    co += reach;
  }
  return LayoutRange::kFits;
}

// The algebra's results go through this: `size_what` / `cosize_what` name the function ("fn: the
// result's size overflows int64"). A result that fits is returned unchanged.
CG_HOST_DEVICE constexpr DynLayout require_fits(DynLayout const& l, char const* size_what,
                                                char const* cosize_what) {
  (void)size_what;
  (void)cosize_what;
  const LayoutRange r = layout_range(l);
  CG_REQUIRE(r != LayoutRange::kSizeOverflows, size_what, 0, 0);
  CG_REQUIRE(r != LayoutRange::kCosizeOverflows, cosize_what, 0, 0);
  return l;
}

// Mode i as a layout of its own.
CG_HOST_DEVICE constexpr DynLayout mode(DynLayout const& l, int i) {
  DynLayout r;
  r.shape = get(l.shape, i);
  r.stride = get(l.stride, i);
  return r;
}

CG_HOST_DEVICE constexpr bool operator==(DynLayout const& a, DynLayout const& b) {
  return a.shape == b.shape && a.stride == b.stride;
}
CG_HOST_DEVICE constexpr bool operator!=(DynLayout const& a, DynLayout const& b) { return !(a == b); }

// ------------------------------------------------------------------------------------------------
// Slicing: a coordinate with `_` selects the modes it leaves free.

struct DynSlice {
  DynLayout layout;  // the modes under `_`, in order (flattened one level per wildcard)
  int64_t offset;    // the offset of the fixed part of the coordinate
};

namespace detail {
// Walks crd (node ci) against the layout (node si), appending the modes under `_` to `out`.
CG_HOST_DEVICE constexpr void slice_collect(DynTuple const& crd, int ci, DynLayout const& l, int si,
                                            DynLayout& out) {
  if (crd.kind[ci] == DynTuple::kUnderscore) {
    out.shape.kind[0] += 1;
    out.stride.kind[0] += 1;
    const int end = subtree_end(l.shape, si);
    out.shape.push_nodes(l.shape, si, end);
    out.stride.push_nodes(l.stride, si, end);
    return;
  }
  if (crd.kind[ci] == DynTuple::kLeaf) return;
  CG_REQUIRE(l.shape.kind[si] == crd.kind[ci],
             "slice coordinate of rank {a} does not match a mode of rank {b}", crd.kind[ci],
             l.shape.kind[si] < 0 ? 1 : l.shape.kind[si]);
  int c = ci + 1, s = si + 1;
  for (int k = 0; k < crd.kind[ci]; ++k) {
    slice_collect(crd, c, l, s, out);
    c = subtree_end(crd, c);
    s = subtree_end(l.shape, s);
  }
}
}  // namespace detail

// slice_and_offset((3,_), (8,(2,2)):(2,(1,16))) == { (2,2):(1,16), 6 }.
// The free modes keep their nesting; a single free mode is returned unwrapped.
// @pre crd weakly congruent with l.shape.
CG_HOST_DEVICE constexpr DynSlice slice_and_offset(DynTuple const& crd, DynLayout const& l) {
  CG_REQUIRE(weakly_congruent(crd, l.shape) || crd.is_underscore() || crd.is_leaf(),
             "slice coordinate is not weakly congruent with the shape", 0, 0);
  DynSlice r{make_dyn_layout_empty(), crd2idx(crd, l.shape, l.stride)};
  detail::slice_collect(crd, 0, l, 0, r.layout);
  if (r.layout.shape.kind[0] == 1) r.layout = mode(r.layout, 0);
  if (r.layout.shape.kind[0] == 0) r.layout = make_dyn_layout(1, 0);
  return r;
}

}  // namespace cute_gemm
