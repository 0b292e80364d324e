"""Worked examples of the layout algebra: the seeds' examples and CuTe's documentation examples.

Expected values are computed from the definitions (L(c) = sum c_k * d_k, colexicographic 1-D
indices), not copied from printed output.
"""

import pickle

import pytest

from cute_gemm import layout as cl
from cute_gemm.layout import (
    Layout, Swizzle, ComposedLayout, _, blocked_product, complement, composition, cosize, depth,
    idx2crd, crd2idx, logical_divide, logical_product, make_layout, mode, rank, raked_product,
    size, slice_and_offset, tiled_divide, tile_to_shape, zipped_divide)


def table(L):
    """The 2-D table of a rank-2 layout: t[i][j] = L(i, j)."""
    rows, cols = size(L[0]), size(L[1])
    return [[L(i, j) for j in range(cols)] for i in range(rows)]


@pytest.mark.parametrize("strides", [(1, 2), (3, 1)])
def test_2x3_tables(strides):
    d0, d1 = strides
    L = Layout((2, 3), strides)
    assert table(L) == [[i * d0 + j * d1 for j in range(3)] for i in range(2)]
    # 1-D index i + 2*j is the coordinate (i, j)
    assert [L(k) for k in range(6)] == [(k % 2) * d0 + (k // 2) * d1 for k in range(6)]
    # to_table prints the same numbers, row by row
    rows = [line for line in cl.to_table(L).splitlines() if "|" in line]
    assert [[int(x) for x in r.split("|")[1:-1]] for r in rows] == table(L)


def test_2x2x2_coordinate():
    L = Layout((2, 2, 2), (4, 1, 2))
    assert L(0, 1, 1) == 3
    assert L((0, 1, 1)) == 3
    assert L(6) == 3  # idx2crd(6, (2,2,2)) == (0,1,1)
    assert idx2crd(6, (2, 2, 2)) == (0, 1, 1)


def test_hierarchical_8_2_2():
    A = Layout((8, (2, 2)), (2, (1, 16)))
    assert A == Layout("(8,(2,2)):(2,(1,16))")
    assert str(A) == "(8,(2,2)):(2,(1,16))"
    assert repr(A) == "Layout('(8,(2,2)):(2,(1,16))')"
    assert A.shape == (8, (2, 2)) and A.stride == (2, (1, 16))
    assert (size(A), cosize(A), rank(A), depth(A)) == (32, 32, 2, 2)
    assert (A.size(), A.cosize(), A.rank(), A.depth()) == (32, 32, 2, 2)
    assert A(17) == 18
    assert A(1, 2) == 18
    assert A(1, (0, 1)) == 18
    assert A((1, (0, 1))) == 18
    assert A(3, _) == [6, 7, 22, 23]
    assert A(5, (_, 1)) == [26, 27]
    assert A(_, 0) == [0, 2, 4, 6, 8, 10, 12, 14]
    assert A(_) == A.offsets()
    sub, off = slice_and_offset(A, (3, _))
    assert (sub, off) == (Layout((2, 2), (1, 16)), 6)
    assert cl.slice(A, (5, (_, 1))) == Layout(2, 1)
    assert A[0] == Layout(8, 2) and mode(A, 1) == Layout((2, 2), (1, 16))
    assert A[-1] == A[1]
    assert A[1][1] == Layout(2, 16)


def test_permutation_2_4_2():
    L = Layout((2, 4, 2), (1, 4, 2))
    assert L.offsets() == [0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15]
    assert sorted(L.offsets()) == list(range(16))


def test_column_major_default_and_shape_only_string():
    assert Layout((2, (3, 4))) == Layout((2, (3, 4)), (1, (2, 6)))
    assert Layout("(2,(3,4))") == Layout((2, (3, 4)), (1, (2, 6)))
    assert Layout(8) == Layout(8, 1) == Layout("8:1")
    assert Layout([2, [3, 4]], [1, [2, 6]]).shape == (2, (3, 4))


def test_numpy_style_ints_accepted():
    class Idx:
        def __init__(self, v):
            self.v = v

        def __index__(self):
            return self.v

    assert Layout((Idx(4), 2), (1, Idx(4))) == Layout((4, 2), (1, 4))
    assert Layout((4, 2))(Idx(5)) == 5


def test_make_layout_concatenates():
    a, b = Layout(4, 1), Layout((2, 3), (4, 8))
    assert make_layout(a, b) == Layout((4, (2, 3)), (1, (4, 8)))
    assert make_layout(a) == a
    assert make_layout((2, 3), (3, 1)) == Layout((2, 3), (3, 1))


def test_idx2crd_crd2idx():
    assert idx2crd(17, (8, (2, 2))) == (1, (0, 1))
    assert crd2idx((1, (0, 1)), (8, (2, 2)), (2, (1, 16))) == 18
    assert crd2idx((1, 2), (8, (2, 2)), (2, (1, 16))) == 18
    assert crd2idx((1, 2), (8, (2, 2))) == 17  # column-major by default


def test_hash_eq_pickle():
    A = Layout("(8,(2,2)):(2,(1,16))")
    B = Layout((8, (2, 2)), (2, (1, 16)))
    assert A == B and hash(A) == hash(B) and len({A, B}) == 1
    assert A != Layout((8, 4), (2, 1))
    assert A != "(8,(2,2)):(2,(1,16))"
    assert pickle.loads(pickle.dumps(A)) == A


def test_layout_is_not_iterable():
    with pytest.raises(TypeError):
        iter(Layout((2, 3)))
    with pytest.raises(TypeError):
        len(Layout((2, 3)))


# ------------------------------------------------------------------------------------------------
# Swizzle<3,3,3> on an (8,64) tile of halves


def test_swizzle_333_half_tile():
    sw = Swizzle(3, 3, 3)
    assert (sw.bits, sw.base, sw.shift) == (3, 3, 3)
    assert str(sw) == "Sw<3,3,3>" and repr(sw) == "Swizzle(3, 3, 3)"
    tile = Layout((8, 64), (64, 1))
    S = composition(sw, tile)
    assert isinstance(S, ComposedLayout)
    assert S.swizzle == sw and S.layout == tile and S.offset == 0 and size(S) == 512
    assert str(S) == "Sw<3,3,3> o 0 o (8,64):(64,1)"
    offs = S.offsets()
    assert sorted(offs) == list(range(512))  # a bijection on [0, 512)
    for r in range(8):
        for c in range(64):
            assert S(r, c) == sw(tile(r, c)) == offs[r + 8 * c]
    # One ldmatrix 8x8 matrix: rows r = 0..7, halves at columns 8c..8c+7 (one 16-byte row each).
    for c in range(8):
        groups = set()
        for r in range(8):
            addrs = [2 * S(r, 8 * c + k) for k in range(8)]
            # the 8 halves of a row stay one contiguous, 16-byte-aligned unit
            assert addrs == list(range(addrs[0], addrs[0] + 16, 2)) and addrs[0] % 16 == 0
            groups.add((addrs[0] // 16) % 8)
        assert groups == set(range(8)), (c, groups)
    # without the swizzle all 8 rows of a unit column hit the same bank group
    assert len({(2 * tile(r, 0) // 16) % 8 for r in range(8)}) == 1


def test_swizzle_definition():
    sw = Swizzle(2, 1, 3)
    for x in range(256):
        yyy = (x >> (1 + 3)) & 0b11
        assert sw(x) == x ^ (yyy << 1)
    S = composition(sw, Layout((4, 8)))
    assert S(_, 1) == [sw(4 + i) for i in range(4)]


# ------------------------------------------------------------------------------------------------
# CuTe documentation examples


def test_complement_doc():
    assert complement(Layout(4, 2), 24) == Layout((2, 3), (1, 8))
    assert complement(Layout((2, 4), (1, 6)), 24) == Layout(3, 2)
    assert complement(Layout(4, 2)) == Layout(2, 1)


def test_composition_doc():
    A = Layout((6, 2), (8, 2))
    B = Layout((4, 3), (3, 1))
    R = composition(A, B)
    assert R == Layout(((2, 2), 3), ((24, 2), 8))
    assert [R(i) for i in range(size(B))] == [A(B(i)) for i in range(size(B))]
    # by-mode tiler: mode i of A composed with tiler i
    T = composition(Layout((12, (4, 8)), (59, (13, 1))), (Layout(3, 4), 8))
    assert T == Layout((3, (4, 2)), (236, (13, 1)))
    T = composition(Layout((12, (4, 8)), (59, (13, 1))), (Layout(3, 4), Layout(8, 2)))
    assert T == Layout((3, (2, 4)), (236, (26, 1)))
    # an int n in a tiler means n:1
    assert composition(Layout((8, 6)), 4) == Layout(4, 1)


def test_logical_divide_doc():
    assert logical_divide(Layout(24), Layout(4, 2)) == Layout((4, (2, 3)), (2, (1, 8)))
    A = Layout((9, (4, 8)), (59, (13, 1)))
    tiler = (Layout(3, 3), Layout((2, 4), (1, 8)))
    R = logical_divide(A, tiler)
    assert R == Layout(((3, 3), ((2, 4), (2, 2))), ((177, 59), ((13, 2), (26, 1))))


def test_zipped_tiled_divide_doc():
    A = Layout((8, 6))
    assert zipped_divide(A, (2, 3)) == Layout(((2, 3), (4, 2)), ((1, 8), (2, 24)))
    assert tiled_divide(A, (2, 3)) == Layout(((2, 3), 4, 2), ((1, 8), 2, 24))
    # a single Layout is a one-mode tiler
    Z = zipped_divide(Layout(24), Layout(4, 2))
    assert Z.shape == ((4,), ((2, 3),))
    assert Z(_, 0) == [0, 2, 4, 6]


def test_logical_product_doc():
    A = Layout((2, 2), (4, 1))
    R = logical_product(A, Layout(6, 1))
    assert R == Layout(((2, 2), (2, 3)), ((4, 1), (2, 8)))


def test_blocked_and_raked_product_doc():
    A = Layout((2, 5), (5, 1))  # compact: a 2x5 row-major tile
    B = Layout((3, 4), (1, 3))  # compact: a 3x4 column-major grid of tiles
    R = blocked_product(A, B)
    assert R.shape == ((2, 3), (5, 4))
    # copy (j0, j1) of the tile sits at offset size(A) * B(j0, j1), tile element (i0, i1) within
    for i0 in range(2):
        for i1 in range(5):
            for j0 in range(3):
                for j1 in range(4):
                    assert R((i0, j0), (i1, j1)) == A(i0, i1) + size(A) * B(j0, j1)
    K = raked_product(A, B)
    assert K.shape == ((3, 2), (4, 5))
    for i0 in range(2):
        for i1 in range(5):
            for j0 in range(3):
                for j1 in range(4):
                    assert K((j0, i0), (j1, i1)) == A(i0, i1) + size(A) * B(j0, j1)


def test_tile_to_shape():
    block = Layout((8, 8), (8, 1))
    T = tile_to_shape(block, (32, 64))
    assert size(T) == 32 * 64
    assert sorted(T.offsets()) == list(range(32 * 64))
    # the top-left 8x8 block is the block itself
    assert all(T(i, j) == block(i, j) for i in range(8) for j in range(8))


def test_composed_layout_coordinates_and_slices():
    S = ComposedLayout(Swizzle(1, 0, 1), 0, Layout((2, 2), (2, 1)))
    assert S.offsets() == [0, 3, 1, 2]
    assert S(1, 0) == 3 and S(_, 1) == [1, 2]
    assert composition(S, Layout(2, 2)) == ComposedLayout(Swizzle(1, 0, 1), 0, Layout(2, 1))


# ------------------------------------------------------------------------------------------------
# Module surface: star-import, printing, walkthrough


def test_star_import_exports_underscore_but_not_builtin_shadows():
    ns = {}
    exec("from cute_gemm.layout import *", ns)
    assert ns["_"] is _ and repr(_) == "_"
    assert "Layout" in ns and "walkthrough" in ns
    assert "filter" not in ns and "slice" not in ns  # would shadow Python builtins


def test_print_layout(capsys):
    L = Layout((2, 3), (3, 1))
    assert cl.print_layout(L) is None
    out = capsys.readouterr().out
    assert out == cl.to_table(L) and out.startswith("(2,3):(3,1)\n")


def test_numpy_integers():
    np = pytest.importorskip("numpy")
    L = Layout((np.int64(4), np.int32(2)), (1, np.int64(4)))
    assert L == Layout((4, 2), (1, 4))
    assert L(np.int64(5)) == 5 and L(np.int32(1), np.int64(1)) == 5


def test_walkthrough(tmp_path, capsys):
    import xml.etree.ElementTree as ET

    cl.walkthrough()
    out = capsys.readouterr().out
    assert "0 1 4 5 8 9 12 13 2 3 6 7 10 11 14 15" in out
    assert "A(3, _) = [6, 7, 22, 23]" in out and "Sw<3,3,3> o 0 o (8,64):(64,1)" in out
    cl.walkthrough(out_dir=str(tmp_path))
    out = capsys.readouterr().out
    svgs = sorted(tmp_path.glob("*.svg"))
    texs = sorted(tmp_path.glob("*.tex"))
    assert len(svgs) == len(texs) >= 5
    for p in svgs:
        ET.parse(p)
        assert str(p) in out
    assert all("\\begin{tikzpicture}" in p.read_text() for p in texs)


def test_main_passes_out_dir(tmp_path, capsys):
    # The walkthrough is the main job's `layout` subcommand; a bare --out says where it went.
    from cute_gemm.__main__ import main

    assert main(["--out", str(tmp_path)]) == 2
    assert "python -m cute_gemm layout --out DIR" in capsys.readouterr().err
    assert main(["layout", "--out", str(tmp_path)]) == 0
    assert (tmp_path / "tv_mma_m16n8k16_c.svg").exists()
    assert "wrote" in capsys.readouterr().out
