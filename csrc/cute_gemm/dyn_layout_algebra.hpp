#pragma once
// The layout algebra, written once over DynLayout (constexpr, host and device).
// Definitions follow CuTe's documentation ("CuTe Layout Algebra"); the code is our own.
//
//   coalesce(L)          same function of the 1-D index, fewest modes
//   filter(L)            coalesce after dropping stride-0 modes (the distinct offsets)
//   composition(A, B)    R(i) = A(B(i)); R has B's shape
//   complement(A, M)     the layout that fills the offsets [0, M) A leaves out, ordered
//   right_inverse(L)     R with L(R(i)) == i on R's domain
//   left_inverse(L)      R with R(L(i)) == i on L's domain (L injective)
//   logical_divide       A o (B, complement(B, size(A))): (tile, rest)
//   zipped/tiled/flat_divide   the same modes, regrouped
//   logical_product      (A, complement(A, size(A)*cosize(B)) o B)
//   blocked/raked_product     the product, modes zipped so tiles are blocked / interleaved
//   tile_to_shape        repeat a block to cover a shape

#include "cute_gemm/dyn_layout.hpp"

namespace cute_gemm {

// A flat list of (shape, stride) modes: the working form of most algorithms below.
// `origin` records which leaf of a source layout a mode's stride was derived from (-1: none, the
// stride is 0); composition_symbolic uses it to rebuild strides the algebra never saw.
struct FlatModes {
  int n = 0;
  int64_t shape[DynTuple::kCapacity] = {};
  int64_t stride[DynTuple::kCapacity] = {};
  int origin[DynTuple::kCapacity] = {};

  CG_HOST_DEVICE constexpr void push(int64_t s, int64_t d, int from = -1) {
    CG_REQUIRE(n < DynTuple::kCapacity, "layout too large: more than {a} modes",
               DynTuple::kCapacity, 0);
    shape[n] = s;
    stride[n] = d;
    origin[n] = from;
    ++n;
  }
};

CG_HOST_DEVICE constexpr FlatModes flat_modes(DynLayout const& l) {
  FlatModes m;
  int leaf = 0;
  for (int i = 0; i < l.shape.n; ++i)
    if (l.shape.kind[i] == DynTuple::kLeaf) m.push(l.shape.value[i], l.stride.value[i], leaf++);
  return m;
}

// No modes -> 1:0; one mode -> s:d; else the flat tuple (s0,s1,..):(d0,d1,..).
CG_HOST_DEVICE constexpr DynLayout make_dyn_layout(FlatModes const& m) {
  if (m.n == 0) return make_dyn_layout(1, 0);
  if (m.n == 1) return make_dyn_layout(m.shape[0], m.stride[0]);
  DynLayout l = make_dyn_layout_empty();
  for (int i = 0; i < m.n; ++i) l = append(l, make_dyn_layout(m.shape[i], m.stride[i]));
  return l;
}

// ------------------------------------------------------------------------------------------------
// coalesce, filter

// Merges adjacent modes where s0 * d0 == d1 and drops size-1 modes.
// @post coalesce(L)(i) == L(i) for all i < size(L); size unchanged; depth <= 1.
// Example: (2,(1,6)):(1,(6,2)) -> 12:1.
CG_HOST_DEVICE constexpr FlatModes coalesce_modes(FlatModes const& in) {
  FlatModes out;
  for (int i = 0; i < in.n; ++i) {
    const int64_t s = in.shape[i], d = in.stride[i];
    if (s == 1) continue;
    // s0 * d0 must be compared without wrapping: a wrapped product can equal d1 by accident
    // ((2,2):(INT64_MIN,0) would merge into 4:INT64_MIN).
    const bool merge = out.n > 0 && !mul_overflows(out.shape[out.n - 1], out.stride[out.n - 1]) &&
                       out.shape[out.n - 1] * out.stride[out.n - 1] == d;
    if (merge) {
      out.shape[out.n - 1] =
          checked_mul(out.shape[out.n - 1], s, "coalesce: the size overflows int64 ({a} * {b})");
    } else {
      out.push(s, d, in.origin[i]);
    }
  }
  return out;
}

CG_HOST_DEVICE constexpr DynLayout coalesce(DynLayout const& l) {
  return make_dyn_layout(coalesce_modes(flat_modes(l)));
}

// Coalesces each top-level mode on its own: the rank is kept.
// Example: ((2,3),(4,1)):((1,2),(6,9)) -> (6,4):(1,6).
CG_HOST_DEVICE constexpr DynLayout coalesce_by_mode(DynLayout const& l) {
  if (!l.shape.is_tuple()) return coalesce(l);
  DynLayout r = make_dyn_layout_empty();
  for (int i = 0; i < rank(l); ++i) r = append(r, coalesce(mode(l, i)));
  return r;
}

// Drops stride-0 and size-1 modes, then coalesces: the distinct offsets of L, in order.
// Example: (4,2,3):(0,1,2) -> 6:1.
CG_HOST_DEVICE constexpr DynLayout filter(DynLayout const& l) {
  FlatModes m = flat_modes(l);
  for (int i = 0; i < m.n; ++i)
    if (m.stride[i] == 0) m.shape[i] = 1;
  return make_dyn_layout(coalesce_modes(m));
}

// ------------------------------------------------------------------------------------------------
// composition

namespace detail {

// A o (s:d) for a coalesced A, as flat modes. With coalesce_result false the result keeps every
// mode (and its origin), which composition_symbolic needs.
// Step 1 divides the stride d out of A's modes from the left; step 2 keeps the first s elements.
// A's last mode is unbounded: composition may reach past size(A), as CuTe allows.
// Example: A = (6,2):(8,2), B = 4:3  ->  step 1: (2,2):(24,2), step 2: (2,2):(24,2).
CG_HOST_DEVICE constexpr FlatModes compose_mode(FlatModes const& a, int64_t s, int64_t d,
                                               bool coalesce_result = true) {
  FlatModes out;
  if (s == 1) return out;  // one element at offset A(0) = 0
  if (d == 0) {
    out.push(s, 0);
    return out;
  }
  CG_REQUIRE(d > 0, "composition: negative strides in the right operand are not supported ({a})",
             d, 0);
  // Step 1: A / d.
  FlatModes divided;
  int64_t rest = d;
  for (int i = 0; i + 1 < a.n; ++i) {
    const int64_t si = a.shape[i], di = a.stride[i];
    if (rest == 1) {
      divided.push(si, di, a.origin[i]);
    } else if (rest % si == 0) {
      rest /= si;  // the whole mode is stepped over
    } else if (si % rest == 0) {
      divided.push(si / rest,
                   checked_mul(di, rest, "composition: stride {a} of the left layout times {b} "
                                         "overflows int64"),
                   a.origin[i]);
      rest = 1;
    } else {
      CG_REQUIRE(false,
                 "composition: stride divisibility condition violated: stride {a} neither divides "
                 "nor is divided by shape {b} of the left layout",
                 rest, si);
    }
  }
  // Step 2: keep the first s elements (A / d) % s.
  int64_t left = s;
  for (int i = 0; i < divided.n && left > 1; ++i) {
    const int64_t si = divided.shape[i];
    if (si >= left) {
      CG_REQUIRE(si % left == 0,
                 "composition: shape divisibility condition violated: {a} does not divide mode "
                 "size {b} of the left layout",
                 left, si);
      out.push(left, divided.stride[i], divided.origin[i]);
      left = 1;
    } else {
      CG_REQUIRE(left % si == 0,
                 "composition: shape divisibility condition violated: mode size {b} of the left "
                 "layout does not divide {a}",
                 left, si);
      out.push(si, divided.stride[i], divided.origin[i]);
      left /= si;
    }
  }
  // The last mode of A is unbounded: it takes whatever stride is left over. An empty A (size 1)
  // maps every index to 0. Formed only when used: a stride nothing reaches may not fit.
  if (left > 1) {
    const int64_t last_stride =
        a.n > 0 ? checked_mul(a.stride[a.n - 1], rest,
                              "composition: stride {a} of the left layout times {b} overflows "
                              "int64")
                : 0;
    out.push(left, last_stride, a.n > 0 ? a.origin[a.n - 1] : -1);
  }
  return coalesce_result ? coalesce_modes(out) : out;
}

// Composes A with every leaf of B (node bi), writing B's nesting with leaves replaced. When
// `origin` is given, the modes are not coalesced and it receives, congruent with the result, the
// A-leaf each stride came from (-1 for stride 0).
CG_HOST_DEVICE constexpr void compose_tree(FlatModes const& a, DynLayout const& b, int bi,
                                           DynLayout& out, DynTuple* origin = nullptr) {
  if (b.shape.kind[bi] >= 0) {
    out.shape.push_node(b.shape.kind[bi], 0);
    out.stride.push_node(b.shape.kind[bi], 0);
    if (origin) origin->push_node(b.shape.kind[bi], 0);
    int c = bi + 1;
    for (int k = 0; k < b.shape.kind[bi]; ++k) {
      compose_tree(a, b, c, out, origin);
      c = subtree_end(b.shape, c);
    }
    return;
  }
  const FlatModes m = compose_mode(a, b.shape.value[bi], b.stride.value[bi], origin == nullptr);
  if (m.n <= 1) {
    out.shape.push_node(DynTuple::kLeaf, m.n == 0 ? 1 : m.shape[0]);
    out.stride.push_node(DynTuple::kLeaf, m.n == 0 ? 0 : m.stride[0]);
    if (origin) origin->push_node(DynTuple::kLeaf, m.n == 0 ? -1 : m.origin[0]);
    return;
  }
  out.shape.push_node(m.n, 0);
  out.stride.push_node(m.n, 0);
  if (origin) origin->push_node(m.n, 0);
  for (int i = 0; i < m.n; ++i) {
    out.shape.push_node(DynTuple::kLeaf, m.shape[i]);
    out.stride.push_node(DynTuple::kLeaf, m.stride[i]);
    if (origin) origin->push_node(DynTuple::kLeaf, m.origin[i]);
  }
}

}  // namespace detail

// composition(A, B): R(c) = A(B(c)) for every coordinate c of B; R has B's shape (each leaf of B
// may become a sub-tuple). Requires the divisibility conditions of CuTe's definition.
// B may reach past size(A) along A's last mode, so R's offsets can leave int64 even when every
// stride fits (2:2^61 o 8:1 = 8:2^61): R's size and cosize are checked.
// Example: (6,2):(8,2) o (4,3):(3,1)  ->  ((2,2),3):((24,2),8).
CG_HOST_DEVICE constexpr DynLayout composition(DynLayout const& a, DynLayout const& b) {
  const FlatModes fa = coalesce_modes(flat_modes(a));
  DynLayout out;
  detail::compose_tree(fa, b, 0, out);
  return require_fits(out, "composition: the result's size overflows int64",
                      "composition: the result's cosize overflows int64");
}

// composition with a left operand known only by its shape: its strides are left symbolic.
// The result's strides are multipliers: leaf k of the real composition has stride
// A_stride[origin_k] * layout.stride_k, or 0 where origin_k == -1. Size-1 modes of A are never
// stepped into, and A is not coalesced (that would need its stride values), so a few compositions
// that coalescing would allow are refused here.
// Example: A = (128,32):(ld,1) known by its shape, B = (8,4):(32,1) ->
//   layout ((4,2),4):((32,1),1), origin ((0,1),0): the real strides are ((32*ld,1),ld).
struct DynSymbolicComposition {
  DynLayout layout;
  DynTuple origin;
};

CG_HOST_DEVICE constexpr DynSymbolicComposition composition_symbolic(DynTuple const& a_shape,
                                                                     DynLayout const& b) {
  FlatModes a;
  int leaf = 0;
  for (int i = 0; i < a_shape.n; ++i) {
    if (a_shape.kind[i] != DynTuple::kLeaf) continue;
    if (a_shape.value[i] != 1) a.push(a_shape.value[i], 1, leaf);
    ++leaf;
  }
  DynSymbolicComposition r;
  detail::compose_tree(a, b, 0, r.layout, &r.origin);
  return r;
}

// By-mode composition with a tiler (a tuple of layouts, one per leading mode of A): mode i of the
// result is composition(mode(A, i), tiler_i); the remaining modes of A are kept.
// The tiler is passed as a DynLayout whose top-level modes are the tiler's layouts.
CG_HOST_DEVICE constexpr DynLayout composition_by_mode(DynLayout const& a,
                                                       DynLayout const& tiler) {
  const int r = rank(tiler);
  CG_REQUIRE(r <= rank(a), "by-mode tiler of rank {a} is longer than the layout's rank {b}", r,
             rank(a));
  if (!a.shape.is_tuple()) return composition(a, mode(tiler, 0));
  DynLayout out = make_dyn_layout_empty();
  for (int i = 0; i < rank(a); ++i)
    out = append(out, i < r ? composition(mode(a, i), mode(tiler, i)) : mode(a, i));
  return require_fits(out, "composition: the result's size overflows int64",
                      "composition: the result's cosize overflows int64");
}

// ------------------------------------------------------------------------------------------------
// complement

// complement(A, M): the layout C, ordered and with disjoint image from A, such that (A, C) covers
// [0, M) (rounded up to whole copies of A). Requires A's nonzero strides, sorted, to each be a
// multiple of the previous mode's s*d (A injective).
// Example: complement(4:2, 24) == (2,3):(1,8).
CG_HOST_DEVICE constexpr DynLayout complement(DynLayout const& a, int64_t cotarget) {
  CG_REQUIRE(cotarget >= 1, "complement: the cotarget must be positive, got {a}", cotarget, 0);
  FlatModes m;
  {
    const FlatModes all = flat_modes(a);
    for (int i = 0; i < all.n; ++i) {
      if (all.shape[i] == 1) continue;  // reaches no offset whatever its stride
      CG_REQUIRE(all.stride[i] >= 0, "complement: negative stride {a} is not supported",
                 all.stride[i], 0);
      if (all.stride[i] != 0) m.push(all.shape[i], all.stride[i]);
    }
  }
  // Insertion sort by stride, then shape.
  for (int i = 1; i < m.n; ++i) {
    for (int j = i; j > 0; --j) {
      const bool less = m.stride[j] < m.stride[j - 1] ||
                        (m.stride[j] == m.stride[j - 1] && m.shape[j] < m.shape[j - 1]);
      if (!less) break;
      const int64_t ts = m.shape[j], td = m.stride[j];
      m.shape[j] = m.shape[j - 1];
      m.stride[j] = m.stride[j - 1];
      m.shape[j - 1] = ts;
      m.stride[j - 1] = td;
    }
  }
  FlatModes out;
  int64_t current = 1;
  // Set once the extent of the modes so far passes INT64_MAX: no stride can then lie beyond it,
  // and no cotarget needs a copy of it (the rest mode below would have size 1).
  bool beyond = false;
  for (int i = 0; i < m.n; ++i) {
    // Below `current` the modes so far already cover every offset they can: a stride inside
    // that extent either repeats an offset (not injective, (2,2):(1,1)) or interleaves with
    // them ((2,2):(2,3)); either way no layout fills the gaps.
    CG_REQUIRE(!beyond && m.stride[i] >= current,
               "complement: the layout is not injective or its offsets interleave: stride {a} "
               "falls inside the extent {b} of the modes below it",
               m.stride[i], beyond ? INT64_MAX : current);
    CG_REQUIRE(m.stride[i] % current == 0,
               "complement: the layout has no complement: stride {a} is not a multiple of the "
               "extent {b} of the modes below it",
               m.stride[i], current);
    out.push(m.stride[i] / current, current);
    if (mul_overflows(m.shape[i], m.stride[i])) {
      beyond = true;
    } else {
      current = m.shape[i] * m.stride[i];
    }
  }
  if (!beyond) out.push(ceil_div(cotarget, current), current);
  return require_fits(make_dyn_layout(coalesce_modes(out)),
                      "complement: the result's size overflows int64",
                      "complement: the result's cosize overflows int64");
}

CG_HOST_DEVICE constexpr DynLayout complement(DynLayout const& a) {
  return complement(a, cosize(a));
}

// ------------------------------------------------------------------------------------------------
// inverses

// right_inverse(L): the largest R of the form found by chaining L's modes whose strides run
// 1, s0, s0*s1, ...; L(R(i)) == i for i < size(R). Example: (4,2):(2,1) -> (2,4):(4,1).
// Defined for every layout: modes that are not reached by the chain (stride 0, negative, or
// repeating an offset, as in (2,2):(1,1) -> 2:1) are left out, so R is a true right inverse on
// its (possibly trivial, 1:0) domain. R(i) is an index of L, so R fits whenever size(L) does
// (checked all the same: left_inverse passes a pair whose size may not fit).
CG_HOST_DEVICE constexpr DynLayout right_inverse(DynLayout const& l) {
  const FlatModes m = coalesce_modes(flat_modes(l));
  // Column-major index strides of L's (coalesced) modes: where mode k sits in L's domain. The
  // product past the last mode is not a stride, so it may overflow unused.
  int64_t domain_stride[DynTuple::kCapacity] = {};
  {
    int64_t acc = 1;
    for (int i = 0; i < m.n; ++i) {
      domain_stride[i] = checked_mul(acc, i > 0 ? m.shape[i - 1] : 1,
                                     "right_inverse: the size of the layout overflows int64 "
                                     "({a} * {b})");
      acc = domain_stride[i];
    }
  }
  FlatModes out;
  int64_t current = 1;
  for (bool found = true; found;) {
    found = false;
    for (int i = 0; i < m.n; ++i) {
      if (m.stride[i] == current) {
        out.push(m.shape[i], domain_stride[i]);
        found = true;
        // An extent past int64 cannot be any mode's stride: the chain ends here (a wrapped
        // `current` could match an unrelated stride).
        if (mul_overflows(current, m.shape[i])) found = false;
        else current *= m.shape[i];
        break;
      }
    }
  }
  return require_fits(make_dyn_layout(coalesce_modes(out)),
                      "right_inverse: the result's size overflows int64",
                      "right_inverse: the result's cosize overflows int64");
}

// left_inverse(L): R with R(L(i)) == i for every i < size(L). Only an injective L has one, and an
// offset below 0 cannot be an index of R, so a mode of size > 1 with stride 0 or a negative stride
// is refused (CuTe would return a pseudo-inverse there, which silently fails R(L(i)) == i).
// R = right_inverse((L, complement(L))): complement checks the rest (L's sorted strides must
// each be a multiple of the extent below them), after which (L, complement(L)) is a bijection
// onto [0, N) and its right inverse is a two-sided one.
CG_HOST_DEVICE constexpr DynLayout left_inverse(DynLayout const& l) {
  const FlatModes m = flat_modes(l);
  for (int i = 0; i < m.n; ++i) {
    if (m.shape[i] == 1) continue;
    CG_REQUIRE(m.stride[i] != 0,
               "left_inverse: the layout is not injective: a mode of size {a} has stride 0",
               m.shape[i], 0);
    CG_REQUIRE(m.stride[i] > 0,
               "left_inverse: negative stride {a}: the layout reaches offsets below 0, which no "
               "left inverse can take as indices",
               m.stride[i], 0);
  }
  // (L, complement(L)) covers [0, extent of L), which may pass int64 although cosize(L) does
  // not (2:2^62): R's size is then refused (a smaller left inverse may exist; this one is not it).
  return require_fits(right_inverse(make_dyn_layout_pair(l, complement(l))),
                      "left_inverse: the result's size overflows int64",
                      "left_inverse: the result's cosize overflows int64");
}

// ------------------------------------------------------------------------------------------------
// divides

// logical_divide(A, B) = A o (B, complement(B, size(A))): mode 0 is the tile, mode 1 the tiles.
// Example: 24:1 / 4:2 -> (4,(2,3)):(2,(1,8)).
CG_HOST_DEVICE constexpr DynLayout logical_divide(DynLayout const& a, DynLayout const& b) {
  return require_fits(composition(a, make_dyn_layout_pair(b, complement(b, size(a)))),
                      "logical_divide: the result's size overflows int64",
                      "logical_divide: the result's cosize overflows int64");
}

// By-mode logical_divide: mode i of A divided by layout i of the tiler.
CG_HOST_DEVICE constexpr DynLayout logical_divide_by_mode(DynLayout const& a,
                                                          DynLayout const& tiler) {
  const int r = rank(tiler);
  CG_REQUIRE(r <= rank(a), "by-mode tiler of rank {a} is longer than the layout's rank {b}", r,
             rank(a));
  if (!a.shape.is_tuple()) return logical_divide(a, mode(tiler, 0));
  DynLayout out = make_dyn_layout_empty();
  for (int i = 0; i < rank(a); ++i)
    out = append(out, i < r ? logical_divide(mode(a, i), mode(tiler, i)) : mode(a, i));
  return require_fits(out, "logical_divide: the result's size overflows int64",
                      "logical_divide: the result's cosize overflows int64");
}

namespace detail {
// From a by-mode divided layout ((t0,r0),(t1,r1),..,rest..) with r tiled modes, gathers the tile
// modes into one layout and returns the rest modes appended after it in `out`, flattened one level
// (tiled) or kept as one mode (zipped).
CG_HOST_DEVICE constexpr DynLayout gather_divided(DynLayout const& d, int r, bool rest_as_one_mode) {
  DynLayout tile = make_dyn_layout_empty();
  DynLayout rest = make_dyn_layout_empty();
  for (int i = 0; i < rank(d); ++i) {
    const DynLayout m = mode(d, i);
    if (i < r) {
      tile = append(tile, mode(m, 0));
      rest = append(rest, mode(m, 1));
    } else {
      rest = append(rest, m);
    }
  }
  DynLayout out = make_dyn_layout_empty();
  out = append(out, tile);
  if (rest_as_one_mode) return append(out, rest);
  for (int i = 0; i < rank(rest); ++i) out = append(out, mode(rest, i));
  return out;
}

// logical_divide_by_mode as a tuple of divided modes: an integral A gives the bare (tile, rest)
// pair, which is its single divided mode, so it is wrapped as one.
CG_HOST_DEVICE constexpr DynLayout divided_modes(DynLayout const& a, DynLayout const& tiler) {
  const DynLayout d = logical_divide_by_mode(a, tiler);
  return a.shape.is_tuple() ? d : append(make_dyn_layout_empty(), d);
}
}  // namespace detail

// zipped_divide(A, tiler) = ((tile modes), (rest modes)).
// Example: (8,6):(1,8) zipped by (2:1, 3:1) -> ((2,3),(4,2)):((1,8),(2,24)).
CG_HOST_DEVICE constexpr DynLayout zipped_divide_by_mode(DynLayout const& a,
                                                         DynLayout const& tiler) {
  return detail::gather_divided(detail::divided_modes(a, tiler), rank(tiler), true);
}

// tiled_divide(A, tiler) = ((tile modes), rest0, rest1, ...).
CG_HOST_DEVICE constexpr DynLayout tiled_divide_by_mode(DynLayout const& a,
                                                        DynLayout const& tiler) {
  return detail::gather_divided(detail::divided_modes(a, tiler), rank(tiler), false);
}

// ------------------------------------------------------------------------------------------------
// products

// logical_product(A, B) = (A, complement(A, size(A)*cosize(B)) o B): B's layout of copies of A.
// Example: (2,2):(4,1) x 6:1 -> ((2,2),(2,3)):((4,1),(2,8)).
// size(A) * cosize(B) is checked (a wrapped cotarget gives a plausible but wrong complement),
// and so is the result: with a stride-0 B its size size(A) * size(B) can exceed that cotarget.
CG_HOST_DEVICE constexpr DynLayout logical_product(DynLayout const& a, DynLayout const& b) {
  const int64_t cotarget = checked_mul(size(a), cosize(b),
                                       "logical_product: size(A) * cosize(B) = {a} * {b} "
                                       "overflows int64");
  return require_fits(make_dyn_layout_pair(a, composition(complement(a, cotarget), b)),
                      "logical_product: the result's size overflows int64",
                      "logical_product: the result's cosize overflows int64");
}

namespace detail {
// Pads a layout to rank r with 1:0 modes (an integral layout becomes a rank-r tuple).
CG_HOST_DEVICE constexpr DynLayout pad_rank(DynLayout const& l, int r) {
  DynLayout out = make_dyn_layout_empty();
  const int have = l.shape.is_tuple() ? rank(l) : 1;
  for (int i = 0; i < r; ++i) out = append(out, i < have ? mode(l, i) : make_dyn_layout(1, 0));
  return out;
}

// Mode i of the result is (A_i, P_i) (blocked) or (P_i, A_i) (raked), P the logical product's
// second mode, both operands padded to the larger rank.
CG_HOST_DEVICE constexpr DynLayout zip_product(DynLayout const& a, DynLayout const& b, bool raked) {
  const int r = rank(a) > rank(b) ? rank(a) : rank(b);
  const DynLayout pa = pad_rank(a, r);
  const DynLayout pb = pad_rank(b, r);
  const int64_t cotarget =
      checked_mul(size(pa), cosize(pb),
                  raked ? "raked_product: size(A) * cosize(B) = {a} * {b} overflows int64"
                        : "blocked_product: size(A) * cosize(B) = {a} * {b} overflows int64");
  const DynLayout p = composition(complement(pa, cotarget), pb);
  DynLayout out = make_dyn_layout_empty();
  for (int i = 0; i < r; ++i) {
    out = append(out, raked ? make_dyn_layout_pair(mode(p, i), mode(pa, i))
                            : make_dyn_layout_pair(mode(pa, i), mode(p, i)));
  }
  return require_fits(out,
                      raked ? "raked_product: the result's size overflows int64"
                            : "blocked_product: the result's size overflows int64",
                      raked ? "raked_product: the result's cosize overflows int64"
                            : "blocked_product: the result's cosize overflows int64");
}
}  // namespace detail

// blocked_product(A, B): B's arrangement of contiguous copies of A; mode i = (A_i, B'_i).
// Example: (2,2):(1,2) blocked by (2,3):(1,2) -> ((2,2),(2,3)):((1,4),(2,8)).
CG_HOST_DEVICE constexpr DynLayout blocked_product(DynLayout const& a, DynLayout const& b) {
  return detail::zip_product(a, b, false);
}

// raked_product(A, B): the copies of A interleaved ("raked") across B; mode i = (B'_i, A_i).
CG_HOST_DEVICE constexpr DynLayout raked_product(DynLayout const& a, DynLayout const& b) {
  return detail::zip_product(a, b, true);
}

// tile_to_shape(block, shape): copies of `block` arranged column-major to cover `shape`, each mode
// coalesced. @pre every mode of shape is a multiple of the block's mode size.
// Example: tile_to_shape((8,8):(8,1), (32,64)) == (32,(8,8)):(8,(1,256)): 4x8 copies of the block.
CG_HOST_DEVICE constexpr DynLayout tile_to_shape(DynLayout const& block, DynTuple const& shape) {
  const int r = rank(shape);
  CG_REQUIRE(rank(block) <= r, "tile_to_shape: block rank {a} exceeds target rank {b}",
             rank(block), r);
  const DynLayout pb = detail::pad_rank(block, r);
  DynTuple reps = make_dyn_tuple();
  for (int i = 0; i < r; ++i) {
    const int64_t target = product(get(shape, i));
    const int64_t have = size(mode(pb, i));
    CG_REQUIRE(target % have == 0,
               "tile_to_shape: target mode size {a} is not a multiple of the block's {b}", target,
               have);
    reps = append(reps, make_dyn_int(target / have));
  }
  return coalesce_by_mode(blocked_product(pb, make_dyn_layout(reps)));
}

}  // namespace cute_gemm
