#pragma once
// DynTuple: a hierarchical integer tuple held as data (values and nesting both in arrays).
//
// This is the representation the layout algebra is written over. Every function is constexpr and
// host/device, so the one implementation serves three callers:
//   - typed static layouts (Layout<Shape<_8,_4>, ...>) run it at compile time and lift the result
//     back into Int<N> types (layout_algebra.hpp), so results are compile-time constants;
//   - the Python API (cute_gemm.layout) runs it at run time on arbitrary nestings;
//   - host tests run it under plain g++.
//
// Encoding: nodes in preorder. kind[i] >= 0 is a tuple node with that many children, which follow
// in preorder; kLeaf is an integer value[i]; kUnderscore is the slicing wildcard `_`.
// Example: (8,(2,2)) is  kind = [2, L, 2, L, L], value = [-, 8, -, 2, 2].

#include "cute_gemm/config.hpp"

namespace cute_gemm {

struct DynTuple {
  static constexpr int kCapacity = 64;
  static constexpr int kLeaf = -1;
  static constexpr int kUnderscore = -2;

  int n = 0;  // number of nodes; 0 only while a tuple is being built
  int kind[kCapacity] = {};
  int64_t value[kCapacity] = {};

  CG_HOST_DEVICE constexpr bool is_leaf() const { return kind[0] == kLeaf; }
  CG_HOST_DEVICE constexpr bool is_underscore() const { return kind[0] == kUnderscore; }
  CG_HOST_DEVICE constexpr bool is_tuple() const { return kind[0] >= 0; }
  // Value of a leaf.
  CG_HOST_DEVICE constexpr int64_t leaf_value() const { return value[0]; }

  // Raw preorder append of one node (building only).
  CG_HOST_DEVICE constexpr void push_node(int k, int64_t v) {
    CG_REQUIRE(n < kCapacity, "int tuple too large: more than {a} nodes", kCapacity, 0);
    kind[n] = k;
    value[n] = v;
    ++n;
  }
  // Raw preorder append of the nodes [first, last) of another tuple (building only).
  CG_HOST_DEVICE constexpr void push_nodes(DynTuple const& src, int first, int last) {
    for (int i = first; i < last; ++i) push_node(src.kind[i], src.value[i]);
  }
  CG_HOST_DEVICE constexpr void push_tree(DynTuple const& src) { push_nodes(src, 0, src.n); }
};

// ------------------------------------------------------------------------------------------------
// Arithmetic helpers

// Overflow-checked int64 arithmetic. Sizes, cosizes, strides and offsets are int64; wherever the
// algebra multiplies or adds them it goes through these, so a value that does not fit is a
// CG_REQUIRE failure (ValueError in Python, a compile error for static layouts) instead of a
// wrapped-around size. Written out by hand: __builtin_mul_overflow is not usable in nvcc's device
// pass, and these must stay constexpr on host and device alike.

// True when a * b does not fit in int64. None of the divisions can overflow: each divides by a
// positive operand, or divides INT64_MAX.
CG_HOST_DEVICE constexpr bool mul_overflows(int64_t a, int64_t b) {
  if (a == 0 || b == 0) return false;
  if (a > 0) return b > 0 ? a > INT64_MAX / b : b < INT64_MIN / a;
  return b > 0 ? a < INT64_MIN / b : a < INT64_MAX / b;
}

// True when a + b does not fit in int64.
CG_HOST_DEVICE constexpr bool add_overflows(int64_t a, int64_t b) {
  return b > 0 ? a > INT64_MAX - b : a < INT64_MIN - b;
}

// a * b, or a CG_REQUIRE failure with `what` ("fn: ... {a} * {b} overflows int64").
CG_HOST_DEVICE constexpr int64_t checked_mul(int64_t a, int64_t b, char const* what) {
  (void)what;  // unused by the device pass of CG_REQUIRE
  CG_REQUIRE(!mul_overflows(a, b), what, a, b);
  return a * b;
}

// a + b, or a CG_REQUIRE failure with `what` ("fn: ... {a} + {b} overflows int64").
CG_HOST_DEVICE constexpr int64_t checked_add(int64_t a, int64_t b, char const* what) {
  (void)what;
  CG_REQUIRE(!add_overflows(a, b), what, a, b);
  return a + b;
}

// The ceiling of a / b for b != 0, for any signs and without forming a + b - 1 (which overflows
// for a near INT64_MAX, e.g. a complement's cotarget). Integer division truncates toward zero,
// which already is the ceiling when the exact quotient is negative.
CG_HOST_DEVICE constexpr int64_t ceil_div(int64_t a, int64_t b) {
  return a / b + ((a % b != 0 && (a > 0) == (b > 0)) ? 1 : 0);
}

CG_HOST_DEVICE constexpr int64_t abs_value(int64_t a) { return a < 0 ? -a : a; }

// shape_div(a, b): a / b where one divides the other; 1 when b is a multiple of a.
// @pre a % b == 0 || b % a == 0.   Example: shape_div(6, 3) == 2, shape_div(3, 6) == 1.
CG_HOST_DEVICE constexpr int64_t shape_div(int64_t a, int64_t b) {
  CG_REQUIRE(b != 0 && a != 0, "shape_div: zero operand ({a}, {b})", a, b);
  // INT64_MIN / -1 and INT64_MIN % -1 trap on x86 rather than wrap.
  CG_REQUIRE(!(a == INT64_MIN && b == -1) && !(b == INT64_MIN && a == -1),
             "shape_div: {a} / {b} overflows int64", a, b);
  CG_REQUIRE(a % b == 0 || b % a == 0,
             "divisibility condition violated: neither {a} nor {b} divides the other", a, b);
  return a % b == 0 ? a / b : 1;
}

// ------------------------------------------------------------------------------------------------
// Construction

CG_HOST_DEVICE constexpr DynTuple make_dyn_int(int64_t v) {
  DynTuple t;
  t.push_node(DynTuple::kLeaf, v);
  return t;
}

CG_HOST_DEVICE constexpr DynTuple make_dyn_underscore() {
  DynTuple t;
  t.push_node(DynTuple::kUnderscore, 0);
  return t;
}

// The empty tuple ().
CG_HOST_DEVICE constexpr DynTuple make_dyn_tuple() {
  DynTuple t;
  t.push_node(0, 0);
  return t;
}

// One past the last node of the subtree rooted at `node`.
CG_HOST_DEVICE constexpr int subtree_end(DynTuple const& t, int node) {
  int pending = 1;
  int i = node;
  while (pending > 0) {
    --pending;
    if (t.kind[i] > 0) pending += t.kind[i];
    ++i;
  }
  return i;
}

// Node index of the i-th child of tuple node `node`.
CG_HOST_DEVICE constexpr int child_node(DynTuple const& t, int node, int i) {
  int c = node + 1;
  for (int j = 0; j < i; ++j) c = subtree_end(t, c);
  return c;
}

// The subtree rooted at `node`, as a tuple of its own.
CG_HOST_DEVICE constexpr DynTuple subtree(DynTuple const& t, int node) {
  DynTuple r;
  r.push_nodes(t, node, subtree_end(t, node));
  return r;
}

// @pre t is a tuple.  @post rank(result) == rank(t) + 1, get(result, rank(t)) == c.
CG_HOST_DEVICE constexpr DynTuple append(DynTuple const& t, DynTuple const& c) {
  CG_REQUIRE(t.is_tuple(), "append: expected a tuple, got an integer", 0, 0);
  DynTuple r = t;
  r.kind[0] += 1;
  r.push_tree(c);
  return r;
}

// (a, b) as a new rank-2 tuple.
CG_HOST_DEVICE constexpr DynTuple make_dyn_pair(DynTuple const& a, DynTuple const& b) {
  return append(append(make_dyn_tuple(), a), b);
}

// ------------------------------------------------------------------------------------------------
// Queries

// Rank: number of top-level modes; an integer has rank 1.
CG_HOST_DEVICE constexpr int rank(DynTuple const& t) { return t.is_tuple() ? t.kind[0] : 1; }

// Mode i. For an integer, mode 0 is the integer itself.
CG_HOST_DEVICE constexpr DynTuple get(DynTuple const& t, int i) {
  CG_REQUIRE_IN_RANGE(i >= 0 && i < rank(t), "mode index {a} out of range for rank {b}", i,
                      rank(t));
  if (!t.is_tuple()) return t;
  return subtree(t, child_node(t, 0, i));
}

// Depth: an integer has depth 0, a tuple one more than its deepest child ((): 1).
CG_HOST_DEVICE constexpr int depth(DynTuple const& t) {
  // Depth of node i = number of open ancestors; track with a stack of remaining child counts.
  int best = 0;
  int stack[DynTuple::kCapacity] = {};
  int top = 0;
  for (int i = 0; i < t.n; ++i) {
    const int d = top + (t.kind[i] >= 0 ? 1 : 0);
    if (d > best) best = d;
    // Pop finished tuples, then push this one if it has children.
    if (top > 0) --stack[top - 1];
    if (t.kind[i] > 0) stack[top++] = t.kind[i];
    while (top > 0 && stack[top - 1] == 0) --top;
  }
  return best;
}

// Number of integer leaves (the rank after flatten).
CG_HOST_DEVICE constexpr int leaf_count(DynTuple const& t) {
  int c = 0;
  for (int i = 0; i < t.n; ++i) c += (t.kind[i] < 0) ? 1 : 0;
  return c;
}

// The k-th leaf value in preorder.
CG_HOST_DEVICE constexpr int64_t leaf_at(DynTuple const& t, int k) {
  for (int i = 0; i < t.n; ++i) {
    if (t.kind[i] < 0) {
      if (k == 0) return t.value[i];
      --k;
    }
  }
  CG_REQUIRE_IN_RANGE(false, "leaf index {a} out of range", k, 0);
  return 0;
}

CG_HOST_DEVICE constexpr bool has_underscore(DynTuple const& t) {
  for (int i = 0; i < t.n; ++i)
    if (t.kind[i] == DynTuple::kUnderscore) return true;
  return false;
}

// Product of all leaves (the size of a shape). () has product 1.
// A product that does not fit in int64 is an error, not a wrapped (possibly 0 or negative) size.
CG_HOST_DEVICE constexpr int64_t product(DynTuple const& t) {
  int64_t p = 1;
  for (int i = 0; i < t.n; ++i)
    if (t.kind[i] == DynTuple::kLeaf)
      p = checked_mul(p, t.value[i], "size: the product of the shape's entries overflows int64 "
                                     "({a} * {b})");
  return p;
}

// flatten((8,(2,2))) == (8,2,2); flatten(7) == 7.
CG_HOST_DEVICE constexpr DynTuple flatten(DynTuple const& t) {
  if (!t.is_tuple()) return t;
  DynTuple r = make_dyn_tuple();
  for (int i = 0; i < t.n; ++i) {
    if (t.kind[i] < 0) {
      r.kind[0] += 1;
      r.push_node(t.kind[i], t.value[i]);
    }
  }
  return r;
}

// Same nesting, values free.
CG_HOST_DEVICE constexpr bool congruent(DynTuple const& a, DynTuple const& b) {
  if (a.n != b.n) return false;
  for (int i = 0; i < a.n; ++i) {
    const bool la = a.kind[i] < 0, lb = b.kind[i] < 0;
    if (la != lb) return false;
    if (!la && a.kind[i] != b.kind[i]) return false;
  }
  return true;
}

// Same nesting and values.
CG_HOST_DEVICE constexpr bool operator==(DynTuple const& a, DynTuple const& b) {
  if (a.n != b.n) return false;
  for (int i = 0; i < a.n; ++i) {
    if (a.kind[i] != b.kind[i]) return false;
    if (a.kind[i] == DynTuple::kLeaf && a.value[i] != b.value[i]) return false;
  }
  return true;
}
CG_HOST_DEVICE constexpr bool operator!=(DynTuple const& a, DynTuple const& b) { return !(a == b); }

// a is weakly congruent to b: a's nesting is a prefix of b's (an integer in a may stand for a whole
// subtree of b). Coordinates must be weakly congruent with their shape.
CG_HOST_DEVICE constexpr bool weakly_congruent(DynTuple const& a, DynTuple const& b) {
  int i = 0, j = 0;
  while (i < a.n && j < b.n) {
    if (a.kind[i] < 0) {
      j = subtree_end(b, j);
    } else {
      if (b.kind[j] != a.kind[i]) return false;
      ++j;
    }
    ++i;
  }
  return i == a.n && j == b.n;
}

// ------------------------------------------------------------------------------------------------
// Coordinates

namespace detail {
// Compact strides congruent with `shape`, leaves visited first-to-last (column-major) or
// last-to-first (row-major). The running product past the last leaf is never stored, so it may
// overflow without harm: (2^62, 2) has the compact strides (1, 2^62) although its size does not
// fit. Only a stride that is actually stored must fit.
CG_HOST_DEVICE constexpr DynTuple compact_strides(DynTuple const& shape, int64_t init,
                                                  bool reverse) {
  DynTuple r = shape;
  int64_t acc = init;
  int64_t prev = 1;  // the previous leaf's shape, multiplied in only once a stride needs it
  for (int k = 0; k < shape.n; ++k) {
    const int i = reverse ? shape.n - 1 - k : k;
    if (shape.kind[i] != DynTuple::kLeaf) continue;
    acc = checked_mul(acc, prev, "compact strides of the shape overflow int64 ({a} * {b})");
    r.value[i] = acc;
    prev = shape.value[i];
  }
  return r;
}
}  // namespace detail

// Compact column-major strides congruent with `shape`: prefix_product((2,(3,4))) == (1,(2,6)).
CG_HOST_DEVICE constexpr DynTuple prefix_product(DynTuple const& shape, int64_t init = 1) {
  return detail::compact_strides(shape, init, false);
}

// Compact row-major strides congruent with `shape` (last leaf fastest).
CG_HOST_DEVICE constexpr DynTuple suffix_product(DynTuple const& shape) {
  return detail::compact_strides(shape, 1, true);
}

// idx2crd: the colexicographic coordinate of a 1-D index within `shape`, congruent with it.
// @pre every entry of shape >= 1, 0 <= idx < product(shape) (which must fit in int64).
// Example: idx2crd(17, (8,(2,2))) == (1,(0,1)).
CG_HOST_DEVICE constexpr DynTuple idx2crd(int64_t idx, DynTuple const& shape) {
  // A zero or negative entry would give coordinates that do not map back to idx.
  for (int i = 0; i < shape.n; ++i)
    CG_REQUIRE(shape.kind[i] != DynTuple::kLeaf || shape.value[i] >= 1,
               "idx2crd: shape entries must be positive, got {a}", shape.value[i], 0);
  const int64_t n = product(shape);
  CG_REQUIRE_IN_RANGE(idx >= 0 && idx < n, "index {a} out of range for a shape of size {b}", idx,
                      n);
  DynTuple r = shape;
  for (int i = 0; i < shape.n; ++i) {
    if (shape.kind[i] == DynTuple::kLeaf) {
      r.value[i] = idx % shape.value[i];
      idx /= shape.value[i];
    }
  }
  return r;
}

namespace detail {
// Accumulates sum(crd_k * stride_k) over the subtree of crd at node ci against shape/stride at
// node si. A leaf coordinate against a tuple shape is a 1-D index into that sub-shape.
CG_HOST_DEVICE constexpr int64_t crd2idx_node(DynTuple const& crd, int ci, DynTuple const& shape,
                                              DynTuple const& stride, int si) {
  if (crd.kind[ci] == DynTuple::kUnderscore) return 0;
  if (crd.kind[ci] == DynTuple::kLeaf) {
    int64_t c = crd.value[ci];
    const int end = subtree_end(shape, si);
    int64_t size = 1;
    for (int i = si; i < end; ++i)
      if (shape.kind[i] == DynTuple::kLeaf)
        size = checked_mul(size, shape.value[i],
                           "crd2idx: the size of a mode overflows int64 ({a} * {b})");
    CG_REQUIRE_IN_RANGE(c >= 0 && c < size, "coordinate {a} out of range for a mode of size {b}",
                        c, size);
    int64_t off = 0;
    for (int i = si; i < end; ++i) {
      if (shape.kind[i] == DynTuple::kLeaf) {
        off = checked_add(off,
                          checked_mul(c % shape.value[i], stride.value[i],
                                      "crd2idx: coordinate {a} times stride {b} overflows int64"),
                          "crd2idx: the offset overflows int64 ({a} + {b})");
        c /= shape.value[i];
      }
    }
    return off;
  }
  // Tuple coordinate: needs a tuple shape of the same rank.
  CG_REQUIRE(shape.kind[si] == crd.kind[ci],
             "coordinate of rank {a} does not match a mode of rank {b}", crd.kind[ci],
             shape.kind[si] < 0 ? 1 : shape.kind[si]);
  int64_t off = 0;
  int c = ci + 1, s = si + 1;
  for (int k = 0; k < crd.kind[ci]; ++k) {
    off = checked_add(off, crd2idx_node(crd, c, shape, stride, s),
                      "crd2idx: the offset overflows int64 ({a} + {b})");
    c = subtree_end(crd, c);
    s = subtree_end(shape, s);
  }
  return off;
}
}  // namespace detail

// crd2idx: the offset of a (hierarchical, possibly partial) coordinate: inner product with the
// strides, where an integer standing for a sub-tuple is first split with idx2crd. `_` counts 0.
// Example: shape (8,(2,2)), stride (2,(1,16)): crd2idx(17) == crd2idx((1,2)) ==
// crd2idx((1,(0,1))) == 18.
CG_HOST_DEVICE constexpr int64_t crd2idx(DynTuple const& crd, DynTuple const& shape,
                                         DynTuple const& stride) {
  return detail::crd2idx_node(crd, 0, shape, stride, 0);
}

}  // namespace cute_gemm
