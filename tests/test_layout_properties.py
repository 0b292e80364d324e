"""Property tests of the layout algebra: each operation's defining postcondition on random layouts.

Random layouts have hierarchical shapes (depth <= 3, at most 5 leaves, small sizes) and strides of
several kinds: compact column-major, compact with permuted mode order, injective with gaps, with
stride-0 modes, and arbitrary (negative included where the operation allows it). Operations whose
preconditions are divisibility conditions use power-of-two shapes and strides, where those
conditions always hold, so every example exercises the operation instead of being discarded.
"""

import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cute_gemm import layout as cl
from cute_gemm.layout import (
    Layout, _, blocked_product, coalesce, coalesce_by_mode, complement, composition, cosize,
    crd2idx, depth, idx2crd, left_inverse, logical_divide, logical_product, make_layout, rank,
    raked_product, right_inverse, size, tile_to_shape, tiled_divide, zipped_divide)

# Deterministic (no example database, fixed seed) and bounded: the whole file runs in seconds.
SETTINGS = settings(max_examples=200, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


# ------------------------------------------------------------------------------------------------
# Nested-tuple helpers (plain Python, independent of the extension)


def leaves(t):
    return [t] if isinstance(t, int) else [x for c in t for x in leaves(c)]


def unflatten(t, values):
    """A tuple congruent with t holding `values` in preorder."""
    it = iter(values)

    def build(node):
        return next(it) if isinstance(node, int) else tuple(build(c) for c in node)

    return build(t)


def tuple_depth(t):
    return 0 if isinstance(t, int) else 1 + max((tuple_depth(c) for c in t), default=0)


def product(t):
    return math.prod(leaves(t))


def weakly_congruent_sizes(b, r):
    """r has b's nesting down to b's leaves, where r may hold a sub-tuple of the same size."""
    if isinstance(b, int):
        return product(r) == b
    return (not isinstance(r, int) and len(b) == len(r)
            and all(weakly_congruent_sizes(x, y) for x, y in zip(b, r)))


# ------------------------------------------------------------------------------------------------
# Strategies

SMALL = st.integers(1, 4)
POW2 = st.sampled_from([1, 2, 4])


def shapes(leaf=SMALL, max_leaves=5):
    tree = st.recursive(leaf, lambda ch: st.lists(ch, min_size=1, max_size=3).map(tuple),
                        max_leaves=max_leaves)
    return tree.filter(lambda s: tuple_depth(s) <= 3 and len(leaves(s)) <= max_leaves)


def _ordered_strides(draw, sizes, gaps):
    """Strides that visit the modes in a random order, each starting past the previous ones'
    extent times a gap factor: an injective layout whose complement exists."""
    order = draw(st.permutations(range(len(sizes))))
    strides = [0] * len(sizes)
    acc = draw(gaps)
    for k in order:
        strides[k] = acc
        acc *= sizes[k] * draw(gaps)
    return strides


@st.composite
def layouts(draw, kind=None, leaf=SMALL, stride_values=st.integers(-8, 16), max_leaves=5,
            shape=None):
    s = draw(shapes(leaf, max_leaves)) if shape is None else shape
    sizes = leaves(s)
    kind = kind or draw(st.sampled_from(["compact", "permuted", "injective", "zeros",
                                         "arbitrary"]))
    if kind == "compact":
        return Layout(s)
    if kind == "permuted":
        strides = _ordered_strides(draw, sizes, st.just(1))
    elif kind == "injective":
        strides = _ordered_strides(draw, sizes, st.sampled_from([1, 2, 3])
                                   if leaf is SMALL else st.sampled_from([1, 2, 4]))
    elif kind == "zeros":
        strides = _ordered_strides(draw, sizes, st.just(1))
        zero = draw(st.lists(st.booleans(), min_size=len(sizes), max_size=len(sizes)))
        strides = [0 if z else d for z, d in zip(zero, strides)]
    else:
        strides = draw(st.lists(stride_values, min_size=len(sizes), max_size=len(sizes)))
    return Layout(s, unflatten(s, strides))


any_layout = layouts()
nonneg_layout = layouts(stride_values=st.integers(0, 16))
compact_permuted = layouts(kind="permuted")
injective = layouts(kind="injective")
pow2_stride = st.sampled_from([0, 1, 2, 4, 8, 16])
pow2_layout = layouts(leaf=POW2, stride_values=pow2_stride)
pow2_injective = layouts(kind="injective", leaf=POW2)


@st.composite
def rank2(draw, kind=None, leaf=POW2, max_leaves=2):
    """A rank-2 layout (s0, s1) whose strides are drawn jointly, so kind="injective" or
    "permuted" holds for the whole layout, not just each mode."""
    s = (draw(shapes(leaf, max_leaves)), draw(shapes(leaf, max_leaves)))
    return draw(layouts(kind=kind, leaf=leaf, stride_values=pow2_stride, shape=s))


def offsets(L):
    return L.offsets()


# ------------------------------------------------------------------------------------------------
# Evaluation, printing, coordinates


@SETTINGS
@given(any_layout)
def test_index_and_coordinate_evaluation_agree(L):
    shape, stride = L.shape, L.stride
    for i in range(size(L)):
        crd = idx2crd(i, shape)
        expect = sum(c * d for c, d in zip(leaves(crd), leaves(stride)))
        assert L(i) == L(crd) == expect
        if rank(L) > 1:
            assert L(*crd) == expect


@SETTINGS
@given(any_layout)
def test_print_parse_round_trip(L):
    assert Layout(str(L)) == L
    assert eval(repr(L), {"Layout": Layout}) == L
    assert cl.parse_int_tuple(str(L).split(":")[0]) == L.shape


@SETTINGS
@given(shapes(), st.data())
def test_idx2crd_crd2idx_inverse(shape, data):
    n = product(shape)
    for i in range(n):
        assert crd2idx(idx2crd(i, shape), shape) == i
    crd = unflatten(shape, [data.draw(st.integers(0, s - 1)) for s in leaves(shape)])
    assert idx2crd(crd2idx(crd, shape), shape) == crd


@SETTINGS
@given(any_layout, st.data())
def test_slice_is_fixed_offset_plus_sublayout(L, data):
    if rank(L) < 2:
        return
    k = data.draw(st.integers(0, rank(L) - 1))
    crd = [data.draw(st.integers(0, size(L[m]) - 1)) for m in range(rank(L))]
    crd[k] = _
    got = L(*crd)
    expect = [L(*(crd[:k] + [j] + crd[k + 1:])) for j in range(size(L[k]))]
    assert got == expect
    sub, off = cl.slice_and_offset(L, tuple(crd))
    assert sub == L[k] and [off + x for x in sub.offsets()] == expect


# ------------------------------------------------------------------------------------------------
# coalesce, filter


@SETTINGS
@given(any_layout)
def test_coalesce(L):
    C = coalesce(L)
    assert size(C) == size(L)
    assert depth(C) <= 1
    assert offsets(C) == offsets(L)
    B = coalesce_by_mode(L)
    assert offsets(B) == offsets(L)
    assert rank(B) == rank(L) and all(size(B[m]) == size(L[m]) for m in range(rank(L)))


@SETTINGS
@given(any_layout)
def test_filter(L):
    F = cl.filter(L)
    assert set(offsets(F)) == set(offsets(L))
    assert 0 not in leaves(F.stride) or size(F) == 1


@SETTINGS
@given(nonneg_layout)
def test_filter_of_injective_is_injective(L):
    F = cl.filter(L)
    if len(set(offsets(L))) == size(F):
        assert len(set(offsets(F))) == size(F)


# ------------------------------------------------------------------------------------------------
# composition


def check_composition(A, B, R):
    """Composition distributes over B's modes (CuTe's definition): each mode of R is A composed
    with that mode of B, so R(c) == A(B(c)) along every mode. For the whole function that takes an
    injective B: with overlapping modes, e.g. B = (2,2):(1,1), two modes together reach an offset
    whose digits in A carry (B(1,1) = 2 while R(1,1) = A(1) + A(1))."""
    assert size(R) == size(B)
    assert weakly_congruent_sizes(B.shape, R.shape)
    # An integral B is a single mode whose composition may split into several (R = (2,2):(4,0)).
    modes = [(B, R)] if isinstance(B.shape, int) else [(B[m], R[m]) for m in range(rank(B))]
    for Bm, Rm in modes:
        for i in range(size(Bm)):
            if Bm(i) < size(A):
                assert Rm(i) == A(Bm(i)), (A, B, R, m, i)
    if len(set(B.offsets())) == size(B):
        for i in range(size(B)):
            if B(i) < size(A):
                assert R(i) == A(B(i)), (A, B, R, i)


@SETTINGS
@given(pow2_layout, layouts(leaf=POW2, stride_values=pow2_stride, max_leaves=4))
def test_composition_pow2(A, B):
    check_composition(A, B, composition(A, B))


@SETTINGS
@given(any_layout, layouts(stride_values=st.integers(0, 12), max_leaves=3))
def test_composition_general_or_clear_error(A, B):
    try:
        R = composition(A, B)
    except ValueError as e:
        assert "divisibility" in str(e)
        return
    check_composition(A, B, R)


@SETTINGS
@given(rank2(),
       st.lists(layouts(leaf=POW2, stride_values=pow2_stride, max_leaves=2), min_size=1,
                max_size=2))
def test_composition_by_mode(A, tiler):
    R = composition(A, tuple(tiler))
    assert rank(R) == rank(A)
    for m in range(rank(A)):
        expect = composition(A[m], tiler[m]) if m < len(tiler) else A[m]
        assert R[m] == expect


# ------------------------------------------------------------------------------------------------
# complement, inverses


@SETTINGS
@given(injective, st.integers(1, 300))
def test_complement(A, M):
    C = complement(A, M)
    co = offsets(C)
    assert all(x < y for x, y in zip(co, co[1:]))  # ordered
    both = offsets(make_layout(A, C))
    assert len(set(both)) == len(both)  # (A, C) injective: C avoids A's image (but for 0)
    assert set(both) == set(range(size(A) * size(C)))  # and together they are compact
    assert size(A) * size(C) >= M


@SETTINGS
@given(injective)
def test_complement_default_cotarget(A):
    assert complement(A) == complement(A, cosize(A))


@SETTINGS
@given(compact_permuted)
def test_right_inverse_of_bijection(L):
    R = right_inverse(L)
    assert size(R) == size(L)
    assert all(L(R(i)) == i for i in range(size(R)))


@SETTINGS
@given(any_layout)
def test_right_inverse_general(L):
    R = right_inverse(L)
    assert all(R(i) < size(L) and L(R(i)) == i for i in range(size(R)))


@SETTINGS
@given(injective)
def test_left_inverse(L):
    R = left_inverse(L)
    assert all(R(L(i)) == i for i in range(size(L)))


# ------------------------------------------------------------------------------------------------
# divides


# Tiles: compact in a permuted order (cosize == size, so most of (B, complement) lands inside A)
# or injective with gaps.
tiles = st.sampled_from(["permuted", "injective", "permuted"]).flatmap(
    lambda k: layouts(kind=k, leaf=POW2, max_leaves=3))


@SETTINGS
@given(pow2_layout, tiles)
def test_logical_divide(A, B):
    R = logical_divide(A, B)
    D = make_layout(B, complement(B, size(A)))
    assert weakly_congruent_sizes(B.shape, R[0].shape)
    assert size(R[0]) == size(B) and size(R) == size(D)
    for i in range(size(D)):
        if D(i) < size(A):
            assert R(i) == A(D(i))


def _mode_grid(*layouts_):
    """All tuples of 1-D indices into each layout."""
    grid = [()]
    for L in layouts_:
        grid = [g + (i,) for g in grid for i in range(size(L))]
    return grid


@SETTINGS
@given(rank2(),
       st.lists(layouts(kind="injective", leaf=POW2, max_leaves=2), min_size=1, max_size=2))
def test_zipped_and_tiled_divide_regroup_logical_divide(A, tiler):
    L = logical_divide(A, tuple(tiler))
    Z = zipped_divide(A, tuple(tiler))
    T = tiled_divide(A, tuple(tiler))
    if len(tiler) == 2:
        t0, r0, t1, r1 = L[0][0], L[0][1], L[1][0], L[1][1]
        assert Z.shape == ((t0.shape, t1.shape), (r0.shape, r1.shape))
        assert T.shape == ((t0.shape, t1.shape), r0.shape, r1.shape)
        for a, b, c, d in _mode_grid(t0, r0, t1, r1):
            v = L((a, b), (c, d))
            assert Z((a, c), (b, d)) == v and T((a, c), b, d) == v
    else:
        t0, r0, a1 = L[0][0], L[0][1], L[1]
        assert Z.shape == ((t0.shape,), (r0.shape, a1.shape))
        assert T.shape == ((t0.shape,), r0.shape, a1.shape)
        for a, b, c in _mode_grid(t0, r0, a1):
            v = L((a, b), c)
            assert Z((a,), (b, c)) == v and T((a,), b, c) == v


# ------------------------------------------------------------------------------------------------
# products


@SETTINGS
@given(pow2_injective, layouts(leaf=POW2, stride_values=pow2_stride, max_leaves=3))
def test_logical_product(A, B):
    # By definition P = (A, C o B) with C = complement(A, size(A) * cosize(B)), composition
    # distributing over B's modes.
    P = logical_product(A, B)
    C = complement(A, size(A) * cosize(B))
    assert P[0] == A and P[1] == composition(C, B) and size(P) == size(A) * size(B)


@SETTINGS
@given(pow2_injective, pow2_injective)
def test_logical_product_function(A, B):
    # For injective power-of-two B, C o B is the function j -> C(B(j)) (B's modes touch disjoint
    # bits, over which C is additive). A non-injective B, e.g. (2,2):(1,1), is not: its two modes
    # reach offset 2 together, and C(2) need not be C(1) + C(1).
    P = logical_product(A, B)
    C = complement(A, size(A) * cosize(B))
    for j in range(size(B)):
        for i in range(size(A)):
            assert P(i + size(A) * j) == A(i) + C(B(j))


@SETTINGS
@given(rank2(kind="injective"),
       rank2())
def test_blocked_and_raked_products_regroup_logical_product(A, B):
    P = logical_product(A, B)
    K = blocked_product(A, B)
    Q = raked_product(A, B)
    assert size(K) == size(Q) == size(P)
    for i0, i1, j0, j1 in _mode_grid(A[0], A[1], B[0], B[1]):
        v = P((i0, i1), (j0, j1))
        assert K((i0, j0), (i1, j1)) == v
        assert Q((j0, i0), (j1, i1)) == v


@SETTINGS
@given(rank2(kind="permuted"), st.integers(1, 4),
       st.integers(1, 4))
def test_tile_to_shape(block, k0, k1):
    target = (size(block[0]) * k0, size(block[1]) * k1)
    T = tile_to_shape(block, target)
    assert size(T) == target[0] * target[1]
    assert rank(T) == 2 and (size(T[0]), size(T[1])) == target
    # block is a bijection onto [0, size), so are its tiled copies
    assert sorted(offsets(T)) == list(range(size(T)))
    # the first copy is the block itself
    for i in range(size(block[0])):
        for j in range(size(block[1])):
            assert T(i, j) == block(i, j)


# ------------------------------------------------------------------------------------------------
# swizzles


@SETTINGS
@given(st.integers(0, 4), st.integers(0, 4), st.integers(-6, 6))
def test_swizzle_is_an_involution_permutation(b, m, s):
    if abs(s) < b:
        return
    sw = cl.Swizzle(b, m, s)
    n = 1 << (b + m + abs(s) + 1)
    image = [sw(x) for x in range(n)]
    assert sorted(image) == list(range(n))
    assert all(sw(sw(x)) == x for x in range(n))
