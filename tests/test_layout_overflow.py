"""The layout algebra never returns a wrapped int64 or a non-inverse: it raises ValueError.

Sizes, cosizes, strides and offsets are int64 in the C++ core. Every product and sum of them is
checked there, and so is every result of the algebra (its size and cosize must fit), so a value
that does not fit is a ValueError naming the function and its operands. Layouts that do fit, up to
2^63 - 1, keep working. Inverses either satisfy their defining equation or raise.

- Regression cases: each returned a wrong value (or failed for the wrong reason) before the checks;
  what it returned is noted with the case.
- Randomized cases compare the algebra on huge layouts with Python's exact integers: the call
  raises exactly when the exact result does not fit in int64, and otherwise agrees with it.
- Inverse cases check R(L(i)) == i / L(R(i)) == i by brute force on random small layouts.
"""

import math
import pickle

import pytest
from hypothesis import assume, event, given
from hypothesis import strategies as st

from cute_gemm import layout as cl
from cute_gemm.layout import (
    ComposedLayout, Layout, Swizzle, blocked_product, coalesce, complement, composition, cosize,
    crd2idx, idx2crd, left_inverse, logical_divide, logical_product, raked_product, right_inverse,
    size, tile_to_shape, tiled_divide, zipped_divide)
from test_layout_properties import SETTINGS, leaves, unflatten  # the shared tuple helpers

MAX = 2 ** 63 - 1
SW = Swizzle(0, 0, 0)  # the identity swizzle: a ComposedLayout that is just offset + layout



# ------------------------------------------------------------------------------------------------
# Exact (Python int) reference


def ref_size(shape):
    return math.prod(leaves(shape))


def ref_cosize(shape, stride):
    return 1 + sum((s - 1) * abs(d) for s, d in zip(leaves(shape), leaves(stride)))


def ref_eval(shape, stride, i):
    off = 0
    for s, d in zip(leaves(shape), leaves(stride)):
        off += (i % s) * d
        i //= s
    return off


def fits(shape, stride):
    """A Layout can hold it: every stride an int64, size and cosize at most 2^63 - 1."""
    return (all(-MAX - 1 <= d <= MAX for d in leaves(stride)) and ref_size(shape) <= MAX
            and ref_cosize(shape, stride) <= MAX)


def scaled(L, k):
    """L with every stride multiplied by k (exact, possibly beyond int64)."""
    return L.shape, unflatten(L.stride, [k * d for d in leaves(L.stride)])


def sample_indices(n, data):
    idx = {0, n - 1, n // 2}
    idx.update(data.draw(st.lists(st.integers(0, n - 1), max_size=8)))
    return sorted(idx)


def raises_named(fn, call, *words):
    with pytest.raises(ValueError) as e:
        call()
    msg = str(e.value)
    assert msg.startswith(fn + ":"), msg
    for w in words:
        assert w in msg, (w, msg)
    return msg


def must_raise(fn, call, *words):
    """raises_named inside a property test, counted in the hypothesis statistics
    (pytest --hypothesis-show-statistics) so that both outcomes are seen to be exercised."""
    event("raises")
    return raises_named(fn, call, *words)


# ------------------------------------------------------------------------------------------------
# Regression cases: each one wrapped (or failed for an unrelated reason) before the checks.

OVERFLOW_CASES = [
    # (function named in the message, call, what it did before)
    ("size", lambda: size((2 ** 40, 2 ** 40))),  # returned 0
    ("size", lambda: size((2 ** 33, 2 ** 31 + 1))),  # returned 2**33
    # IndexError "out of range for a shape of size 4294967296" (the wrapped size)
    ("idx2crd", lambda: idx2crd(2 ** 33, (2 ** 32 + 1, 2 ** 32))),
    ("composition", lambda: composition(Layout(2, 2 ** 40), Layout(2, 2 ** 30))),  # 2:0
    # 8:2**61, whose L(7) was -2**61
    ("composition", lambda: composition(Layout(2, 2 ** 61), Layout(8, 1))),
    # by mode: ((4:1 o 2^32:1), (4:4 o 2^32:1)) = (2^32,2^32):(1,4), whose size() was 0
    ("composition", lambda: composition(Layout((4, 4)), (Layout(2 ** 32), Layout(2 ** 32)))),
    # complement((4:2), 2^33 * (2^31+1)) used the wrapped cotarget 2^33: (2,2^30):(1,8)
    ("complement", lambda: complement(Layout(4, 2), (2 ** 33, 2 ** 31 + 1))),
    # (2,2^43):(-2^63,2^20): the stride 2^20 * 2^43 wrapped to INT64_MIN
    ("logical_divide", lambda: logical_divide(Layout(2 ** 40, 2 ** 20), Layout(2, 2 ** 43))),
    ("zipped_divide", lambda: zipped_divide(Layout(2 ** 40, 2 ** 20), Layout(2, 2 ** 43))),
    ("tiled_divide", lambda: tiled_divide(Layout(2 ** 40, 2 ** 20), Layout(2, 2 ** 43))),
    # size(A) * cosize(B) wrapped to 2^33: (2^33,2^31+1):(1,0) (a stride-0 mode, silently)
    ("logical_product", lambda: logical_product(Layout(2 ** 33), Layout(2 ** 31 + 1))),
    # (2^30,2^40):(1,0), whose size() was 0
    ("logical_product", lambda: logical_product(Layout(2 ** 30), Layout(2 ** 40, 0))),
    ("blocked_product", lambda: blocked_product(Layout(2 ** 33), Layout(2 ** 31 + 1))),  # (1,0)
    ("raked_product", lambda: raked_product(Layout(2 ** 33), Layout(2 ** 31 + 1))),  # (0,1)
    # ValueError for the wrong reason: "complement: the cotarget must be positive, got 0"
    ("tile_to_shape", lambda: tile_to_shape(Layout(2), (2 ** 32, 2 ** 32))),
    # returned (2**33, 1): the tile's 2^33 * (2^31+1) rows wrapped
    ("tiled_copy_tile", lambda: cl.tiled_copy_tile(Layout((2 ** 33, 1)), Layout((2 ** 31 + 1, 1)))),
    # crashed the interpreter: atom rows x warps = 4 * 2^62 wrapped to 0, then tile % 0 (SIGFPE)
    ("tiled_mma_tv", lambda: cl.tiled_mma_tv(Layout((1, 4), (0, 1)), (4, 1), (2 ** 62, 1), (4, 1),
                                             "C")),
]


@pytest.mark.parametrize("fn, call", OVERFLOW_CASES,
                         ids=[f"{fn}-{i}" for i, (fn, _) in enumerate(OVERFLOW_CASES)])
def test_overflow_raises_value_error_naming_the_function(fn, call):
    msg = raises_named(fn, call, "overflows int64", " for ")
    assert "=" in msg.split(" for ")[-1]  # the operands are named


def test_layout_construction_limit_is_int64():
    # Layouts whose size or cosize reaches 2^63 are refused. Layout(2, -2**63) was accepted before
    # (|INT64_MIN| wrapped) and its cosize() was -2**63 + 1.
    for shape, stride in [(2, -2 ** 63), (2 ** 63 - 1, 2), ((2, 2), (-2 ** 63, 0)),
                          ((2 ** 32, 2 ** 31), (1, 2 ** 32))]:
        with pytest.raises(ValueError, match="too large"):
            Layout(shape, stride)
    # ... and those below 2^63 work: before, anything above 2^62 was refused ("too large").
    L = Layout(2 ** 63 - 1)
    assert size(L) == cosize(L) == 2 ** 63 - 1 and L(2 ** 63 - 2) == 2 ** 63 - 2
    L = Layout((2, 2 ** 62 - 1), (2 ** 62, -1))
    assert cosize(L) == 2 ** 63 - 1 and L(1, 2 ** 62 - 2) == 2 ** 62 - (2 ** 62 - 2)
    assert Layout(1, -2 ** 63)(0) == 0 and cosize(Layout(1, -2 ** 63)) == 1
    assert crd2idx(1, 2, 2 ** 62) == 2 ** 62  # was "too large" (cosize 2^62 + 1)
    assert size((2 ** 31, 2 ** 32 - 1)) == 2 ** 63 - 2 ** 31


def test_unpickled_layout_is_checked():
    L = Layout.__new__(Layout)
    with pytest.raises(ValueError, match="too large"):  # was accepted; its size() wrapped to 0
        L.__setstate__(("(4294967296,4294967296):(1,4294967296)",))
    big = Layout((2, 2 ** 61), (2 ** 61, 1))
    assert pickle.loads(pickle.dumps(big)) == big


def test_composed_layout_offsets():
    # offset + L(1) wrapped: ComposedLayout(SW, 2**63 - 1, Layout(2))(1) was -2**63.
    raises_named("ComposedLayout", lambda: ComposedLayout(SW, 2 ** 63 - 1, Layout(2)),
                 "overflows int64", "layout=2:1")
    C = ComposedLayout(SW, 2 ** 62, Layout(2, 2 ** 61))
    assert C.offsets() == [2 ** 62, 2 ** 62 + 2 ** 61]
    # B reaching past the inner layout: the result's (3) was -6917529027641081856.
    raises_named("composition", lambda: composition(C, Layout(4, 1)), "overflows int64")
    assert ComposedLayout(SW, -2 ** 63, Layout(2, 2 ** 62))(1) == -2 ** 62
    sw = Swizzle(3, 3, 3)
    assert composition(sw, Layout(2 ** 62, 1))(2 ** 62 - 1) == sw(2 ** 62 - 1) == 2 ** 62 - 57


def test_complement_with_cotarget_near_int64_max():
    # ceil_div(cotarget, 8) formed cotarget + 7, which wrapped: "shape entries must be positive,
    # got -1152921504606846975". The result fits and is now returned.
    assert complement(Layout(4, 2), 2 ** 63 - 1) == Layout((2, 2 ** 60), (1, 8))
    # The gap (2^62-1):1 and the rest 2:(2^63-2) reach past int64 together.
    raises_named("complement", lambda: complement(Layout(2, 2 ** 62 - 1), 2 ** 63 - 1),
                 "overflows int64", "layout=2:4611686018427387903", "cotarget=")
    # The extent 4 * 2^61 passes int64, but cotarget 2^63 - 1 needs no copy of it.
    assert complement(Layout(4, 2 ** 61), 2 ** 63 - 1) == Layout(2 ** 61, 1)


def test_idx2crd_needs_positive_shape():
    # idx2crd(5, (-2, -3)) returned (1, -2), which is no coordinate of 5.
    raises_named("idx2crd", lambda: idx2crd(5, (-2, -3)), "must be positive")
    assert idx2crd(2 ** 63 - 2 ** 31 - 1, (2 ** 31, 2 ** 32 - 1)) == (2 ** 31 - 1, 2 ** 32 - 2)


def test_left_inverse_of_non_injective_layout_raises():
    # left_inverse((2,2):(0,1)) returned 2:2, with R(L(i)) == [0, 0, 2, 2] for i = 0..3.
    raises_named("left_inverse", lambda: left_inverse(Layout((2, 2), (0, 1))), "not injective")
    raises_named("left_inverse", lambda: left_inverse(Layout(4, -1)), "negative stride")
    raises_named("left_inverse", lambda: left_inverse(Layout((2, 2), (1, 1))), "not injective")
    # Size-1 modes reach nothing whatever their stride: no reason to refuse.
    R = left_inverse(Layout((1, 4, 1), (-3, 2, 0)))
    assert [R(2 * i) for i in range(4)] == [0, 1, 2, 3]


def test_inverses_of_huge_layouts():
    L = Layout((2 ** 61, 2), (2, 1))
    R = right_inverse(L)
    assert R == Layout((2, 2 ** 61), (2 ** 61, 1))
    for i in [0, 1, 2, 2 ** 62 - 1, 2 ** 61 + 5]:
        assert L(R(i)) == i
    L = Layout((2 ** 31, 2 ** 31), (2 ** 31, 1))
    R = left_inverse(L)
    for i in [0, 1, 2 ** 31, 2 ** 62 - 1, 12345678901234]:
        assert R(L(i)) == i
    # (L, complement(L)) = (2:2^62, 2^62:1) has size 2^63: refused rather than returned with a
    # size that does not fit.
    must_not_wrap = lambda: left_inverse(Layout(2, 2 ** 62))  # noqa: E731
    raises_named("left_inverse", must_not_wrap, "overflows int64", "L=2:4611686018427387904")
    assert complement(Layout(2, 2 ** 63 - 2), 1) == Layout(2 ** 63 - 2, 1)
    assert coalesce(Layout((2 ** 30, 2 ** 32 - 1, 2), (1, 2 ** 30, 0))) == \
        Layout((2 ** 62 - 2 ** 30, 2), (1, 0))


# ------------------------------------------------------------------------------------------------
# Randomized: huge values against Python's exact integers

BIG = st.one_of(st.integers(1, 4), st.integers(1, 2 ** 40), st.sampled_from(
    [2 ** 31, 2 ** 32, 2 ** 32 - 1, 2 ** 61, 2 ** 62, 2 ** 63 - 1]))
BIG_STRIDE = st.one_of(st.integers(-4, 4), st.integers(-2 ** 50, 2 ** 50), st.sampled_from(
    [2 ** 62, -2 ** 62, 2 ** 63 - 1, -2 ** 63, 3 * 2 ** 60]))


def big_shapes(leaf=BIG):
    tree = st.recursive(leaf, lambda ch: st.lists(ch, min_size=1, max_size=3).map(tuple),
                        max_leaves=4)
    return tree.filter(lambda s: len(leaves(s)) <= 4)


@st.composite
def big_layout_args(draw):
    s = draw(big_shapes())
    d = unflatten(s, draw(st.lists(BIG_STRIDE, min_size=len(leaves(s)), max_size=len(leaves(s)))))
    return s, d


@SETTINGS
@given(big_layout_args(), st.data())
def test_layout_fits_exactly_when_size_and_cosize_fit(args, data):
    shape, stride = args
    if not fits(shape, stride):
        event("raises")
        with pytest.raises(ValueError, match="too large"):
            Layout(shape, stride)
        return
    L = Layout(shape, stride)
    assert size(L) == ref_size(shape) and cosize(L) == ref_cosize(shape, stride)
    for i in sample_indices(size(L), data):
        assert L(i) == ref_eval(shape, stride, i)
        crd = idx2crd(i, shape)
        assert L(crd) == crd2idx(crd, shape, stride) == L(i)
        assert crd2idx(crd, shape) == i


@SETTINGS
@given(big_shapes())
def test_size_of_a_shape(shape):
    if ref_size(shape) > MAX:
        must_raise("size", lambda: size(shape), "overflows int64", "shape=")
    else:
        assert size(shape) == ref_size(shape)


# Small layouts whose composition / divide is defined (power-of-two shapes and strides), then
# scaled: the algebra is linear in A's strides, so op(A * k, B) == op(A, B) * k exactly, and must
# raise exactly when that does not fit.
POW2 = st.sampled_from([1, 2, 4, 8])
POW2_STRIDE = st.sampled_from([0, 1, 2, 4, 8, 16])
# A scale k > 0, or -e: the largest scale that keeps a layout's cosize in int64 (A's, or in
# check_scaled R's for e in {9, 10}: the result right at its limit, and one past it).
SCALE = st.one_of(st.integers(0, 62).map(lambda e: 2 ** e), st.integers(1, 2 ** 61),
                  st.integers(0, 8).map(lambda e: -e), st.sampled_from([-9, -10]))


def largest_scale(L):
    return (MAX - 1) // max(1, cosize(L) - 1)


def scale_for(A, k, R=None):
    if k > 0:
        return k
    if R is not None and k <= -9:
        return largest_scale(R) + (1 if k == -10 else 0)
    return max(1, largest_scale(A) >> -k)


@st.composite
def small_layouts(draw, leaf=POW2, stride=POW2_STRIDE, max_leaves=4):
    tree = st.recursive(leaf, lambda ch: st.lists(ch, min_size=1, max_size=3).map(tuple),
                        max_leaves=max_leaves)
    s = draw(tree.filter(lambda t: len(leaves(t)) <= max_leaves))
    n = len(leaves(s))
    return Layout(s, unflatten(s, draw(st.lists(stride, min_size=n, max_size=n))))


def check_scaled(fn, op, A, B, k):
    try:
        R = op(A, B)
    except ValueError:
        event("undefined")
        return  # a divisibility condition: nothing to scale
    k = scale_for(A, k, R)
    shape_k, stride_k = scaled(A, k)
    assume(fits(shape_k, stride_k))
    Ak = Layout(shape_k, stride_k)
    expect_shape, expect_stride = scaled(R, k)
    if fits(expect_shape, expect_stride):
        event("fits")
        got = op(Ak, B)
        assert got == Layout(expect_shape, expect_stride), (A, B, k)
    else:
        must_raise(fn, lambda: op(Ak, B), "overflows int64", "A=", "and")


@SETTINGS
@given(small_layouts(), small_layouts(), SCALE)
def test_composition_of_scaled_layouts(A, B, k):
    check_scaled("composition", composition, A, B, k)


@SETTINGS
@given(small_layouts(), small_layouts(), SCALE)
def test_divides_of_scaled_layouts(A, B, k):
    check_scaled("logical_divide", logical_divide, A, B, k)
    check_scaled("zipped_divide", zipped_divide, A, B, k)
    check_scaled("tiled_divide", tiled_divide, A, B, k)


@st.composite
def compact_big(draw):
    s = draw(big_shapes(st.one_of(st.integers(1, 8), st.integers(0, 40).map(lambda e: 2 ** e))))
    assume(ref_size(s) <= MAX)
    return Layout(s)


@st.composite
def nonneg_big(draw):
    s = draw(big_shapes(st.one_of(st.integers(1, 8), st.integers(0, 40).map(lambda e: 2 ** e))))
    n = len(leaves(s))
    d = unflatten(s, draw(st.lists(st.one_of(st.integers(0, 8), st.integers(0, 2 ** 40)),
                                   min_size=n, max_size=n)))
    assume(fits(s, d))
    return Layout(s, d)


@SETTINGS
@given(compact_big(), nonneg_big())
def test_logical_product_of_compact_layouts(A, B):
    # For a compact A, complement(A, size(A) * cosize(B)) is cosize(B):size(A), so the product is
    # (A, B with strides * size(A)) (size-1 modes of B get stride 0).
    n = size(A)
    b_stride = [0 if s == 1 else d * n for s, d in zip(leaves(B.shape), leaves(B.stride))]
    shape = (A.shape, B.shape)
    stride = (A.stride, unflatten(B.shape, b_stride))
    if n * cosize(B) > MAX or not fits(shape, stride):
        must_raise("logical_product", lambda: logical_product(A, B), "overflows int64")
    else:
        assert logical_product(A, B) == Layout(shape, stride)


@SETTINGS
@given(st.integers(0, 62), st.integers(0, 62))
def test_blocked_raked_product_and_tile_to_shape_near_2_63(i, j):
    A, B = Layout(2 ** i), Layout(2 ** j)
    if i + j > 62:
        must_raise("blocked_product", lambda: blocked_product(A, B), "overflows int64")
        must_raise("raked_product", lambda: raked_product(A, B), "overflows int64")
        must_raise("tile_to_shape", lambda: tile_to_shape(A, (2 ** i, 2 ** j)),
                     "overflows int64")
        return
    da, db = 1, (2 ** i if j else 0)  # a size-1 mode of B comes back with stride 0
    assert blocked_product(A, B) == Layout(((2 ** i, 2 ** j),), ((da, db),))
    assert raked_product(A, B) == Layout(((2 ** j, 2 ** i),), ((db, da),))
    T = tile_to_shape(A, (2 ** i, 2 ** j))  # column-major over the whole shape
    assert T.shape == (2 ** i, 2 ** j)
    assert all(T(x) == x for x in {0, 2 ** (i + j) - 1, 2 ** (i + j) // 3})


def ref_complement_gaps(A):
    """CuTe's construction of complement(A, m) in exact integers, without the cotarget: the gap
    modes (shape, stride) and the extent of A that the rest mode repeats."""
    modes = sorted((d, s) for s, d in zip(leaves(A.shape), leaves(A.stride)) if s > 1 and d)
    gaps, current = [], 1
    for d, s in modes:
        gaps.append((d // current, current))
        current = s * d
    return gaps, current


def ref_complement(A, m):
    gaps, current = ref_complement_gaps(A)
    # Size-1 modes are dropped (coalesce): a rest mode of one copy may have any extent.
    kept = [(s, d) for s, d in gaps + [(-(-m // current), current)] if s > 1] or [(1, 0)]
    return [s for s, d in kept], [d for s, d in kept]


def cotarget_at_limit(A):
    """The largest cotarget whose complement of A still fits: the rest mode (q : extent) may
    reach MAX - 1 - (the gaps' reach)."""
    gaps, current = ref_complement_gaps(A)
    q = (MAX - 1 - sum((s - 1) * d for s, d in gaps)) // current + 1
    return min(MAX, q * current)


@SETTINGS
@given(small_layouts(stride=st.sampled_from([1, 2, 4, 8, 16])),
       st.one_of(SCALE, st.integers(0, 3).map(lambda e: -e)),
       st.one_of(st.integers(1, MAX), st.integers(MAX - 2 ** 20, MAX), st.sampled_from([0, -1])),
       st.data())
def test_complement_with_huge_strides_and_cotargets(A, k, m, data):
    try:
        complement(A)
    except ValueError:
        event("no complement")
        return  # not injective / no complement: not what this test is about
    k = scale_for(A, k)
    shape_k, stride_k = scaled(A, k)
    assume(fits(shape_k, stride_k))
    Ak = Layout(shape_k, stride_k)
    if m <= 0:  # the cotarget right at the limit (0) or one past it (-1)
        m = min(MAX, cotarget_at_limit(Ak) - m)
    shape, stride = ref_complement(Ak, m)
    if not fits(shape, stride):
        must_raise("complement", lambda: complement(Ak, m), "overflows int64", "cotarget=")
        return
    event("fits")
    C = complement(Ak, m)
    assert size(C) == ref_size(shape) and cosize(C) == ref_cosize(shape, stride)
    for i in sample_indices(size(C), data):
        assert C(i) == ref_eval(shape, stride, i)


# ------------------------------------------------------------------------------------------------
# Inverses: a true inverse or a ValueError, checked by brute force

SHAPE_LEAF = st.integers(1, 4)
STRIDE_ANY = st.one_of(st.integers(-6, 12), st.sampled_from([0, 1, 2, 4, 8]))


@st.composite
def any_small_layout(draw):
    s = draw(st.recursive(SHAPE_LEAF, lambda ch: st.lists(ch, min_size=1, max_size=3).map(tuple),
                          max_leaves=5).filter(lambda t: len(leaves(t)) <= 5))
    n = len(leaves(s))
    kind = draw(st.sampled_from(["any", "permutation", "gaps"]))
    if kind == "any":
        d = draw(st.lists(STRIDE_ANY, min_size=n, max_size=n))
    else:  # injective: modes in a random order, each past the extent of the previous ones
        order = draw(st.permutations(range(n)))
        d, acc = [0] * n, 1
        for m in order:
            d[m] = acc
            acc *= leaves(s)[m] * (1 if kind == "permutation" else draw(st.sampled_from([1, 2])))
        if draw(st.booleans()):  # a few zero, repeated or negative strides
            j = draw(st.integers(0, n - 1))
            d[j] = draw(st.sampled_from([0, -d[j], d[(j + 1) % n]]))
    return Layout(s, unflatten(s, d))


@SETTINGS
@given(any_small_layout())
def test_right_inverse_is_a_right_inverse(L):
    R = right_inverse(L)
    for i in range(size(R)):
        j = R(i)
        assert 0 <= j < size(L) and L(j) == i, (L, R, i)


@SETTINGS
@given(any_small_layout())
def test_left_inverse_is_a_left_inverse_or_raises(L):
    offs = L.offsets()
    injective = len(set(offs)) == len(offs) and min(offs) >= 0
    try:
        R = left_inverse(L)
    except ValueError as e:
        assert str(e).startswith("left_inverse:"), str(e)
        return
    assert injective, (L, R)
    for i, x in enumerate(offs):
        assert x < size(R) and R(x) == i, (L, R, i)


@SETTINGS
@given(any_small_layout())
def test_left_inverse_refuses_every_non_injective_layout(L):
    offs = L.offsets()
    if len(set(offs)) < len(offs) or min(offs) < 0:
        must_raise("left_inverse", lambda: left_inverse(L), "L=")
