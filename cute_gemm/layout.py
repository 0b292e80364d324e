"""CuTe-style layout algebra (Python view of the cute_gemm._C.layout extension submodule).

A layout is a shape and a congruent stride: a function from coordinates to offsets. Everything
here runs the same C++ layout core that the kernels' static layouts use.

    from cute_gemm.layout import Layout, Swizzle, _, composition, logical_divide, print_layout

    A = Layout((8, (2, 2)), (2, (1, 16)))       # or Layout("(8,(2,2)):(2,(1,16))")
    A(17), A(1, 2), A(1, (0, 1))                # 18, 18, 18: 1-D index or (hierarchical) coord
    A(3, _)                                     # [6, 7, 22, 23]: offsets of a slice
    print_layout(Layout((2, 3), (3, 1)))        # row-major 2x3 table
    logical_divide(Layout(24), Layout(4, 2))    # (4,(2,3)):(2,(1,8))
    sw = composition(Swizzle(3, 3, 3), Layout((8, 64), (64, 1)))
    sw.offsets()                                # a permutation of range(512)
    open("a.svg", "w").write(to_svg(A[1]))      # pictures: to_svg / to_latex / to_svg_tv

Sizes, strides and offsets are 64-bit integers in the core: a Layout whose size or cosize exceeds
2^63 - 1 cannot be made, and any algebra result that would not fit (or a left_inverse of a layout
that is not injective) raises ValueError naming the function and its operands instead of returning
a wrapped-around value.

`from cute_gemm.layout import *` exports `_` (the slicing wildcard, as in CuTe) but not `filter`
and `slice`, which would shadow Python builtins; use `cute_gemm.layout.filter(L)`.
`python -m cute_gemm layout [--out DIR]` runs walkthrough(). cute_gemm.atoms builds and draws the
GEMM kernel's thread-value maps.
"""

import os

from ._C import layout as _layout_ext
from ._C.layout import *  # noqa: F401,F403
from ._C.layout import _  # noqa: F401  (the wildcard; `import *` skips underscore names)
from ._C.layout import filter, slice  # noqa: F401,A004

_SHADOWS_BUILTINS = {"filter", "slice"}

__all__ = sorted(
    [n for n in dir(_layout_ext) if not n.startswith("_") and n not in _SHADOWS_BUILTINS]
    + ["_", "walkthrough"]
)


def _heading(text):
    print()
    print(text)
    print("-" * len(text))


def walkthrough(out_dir=None):
    """Prints a tour of the layout algebra on the seed examples.

    With out_dir, also writes .svg and .tex pictures there (the .tex files are standalone TikZ
    documents: pdflatex FILE.tex) and prints their paths.
    """
    L = _layout_ext

    _heading("1. Two layouts of a 2x3 shape: L(i, j) = i*d0 + j*d1")
    col = L.Layout((2, 3), (1, 2))
    row = L.Layout((2, 3), (3, 1))
    L.print_layout(col)
    L.print_layout(row)

    _heading("2. Hierarchical shape: A = (8,(2,2)):(2,(1,16))")
    A = L.Layout("(8,(2,2)):(2,(1,16))")
    print("A(17) = %d   A(1, 2) = %d   A(1, (0, 1)) = %d   (idx2crd(17) = %s)"
          % (A(17), A(1, 2), A(1, (0, 1)), L.idx2crd(17, A.shape)))
    print("A(3, _) = %s   A(5, (_, 1)) = %s" % (A(3, _), A(5, (_, 1))))
    print("slice_and_offset(A, (3, _)) = (%s, %d)" % L.slice_and_offset(A, (3, _)))
    L.print_layout(A)

    _heading("3. (2,4,2):(1,4,2) is a permutation of 0..15")
    P = L.Layout((2, 4, 2), (1, 4, 2))
    print(" ".join(str(x) for x in P.offsets()))
    print("coalesce: %s   right_inverse: %s" % (L.coalesce(P), L.right_inverse(P)))

    _heading("4. Algebra")
    print("complement(4:2, 24)               = %s" % L.complement(L.Layout(4, 2), 24))
    print("composition((6,2):(8,2), (4,3):(3,1)) = %s"
          % L.composition(L.Layout((6, 2), (8, 2)), L.Layout((4, 3), (3, 1))))
    print("logical_divide(24:1, 4:2)         = %s" % L.logical_divide(L.Layout(24), L.Layout(4, 2)))
    print("zipped_divide((8,6), (2:1, 3:1))  = %s" % L.zipped_divide(L.Layout((8, 6)), (2, 3)))
    print("tiled_divide((8,6), (2:1, 3:1))   = %s" % L.tiled_divide(L.Layout((8, 6)), (2, 3)))
    print("logical_product((2,2):(4,1), 6:1) = %s"
          % L.logical_product(L.Layout((2, 2), (4, 1)), L.Layout(6, 1)))
    tile, grid = L.Layout((2, 5), (5, 1)), L.Layout((3, 4), (1, 3))
    blocked = L.blocked_product(tile, grid)
    raked = L.raked_product(tile, grid)
    print("blocked_product((2,5):(5,1), (3,4):(1,3)):")
    L.print_layout(blocked)
    print("raked_product((2,5):(5,1), (3,4):(1,3)):")
    L.print_layout(raked)

    _heading("5. Swizzle<3,3,3> over an (8,64) row-major tile of halves")
    sw = L.composition(L.Swizzle(3, 3, 3), L.Layout((8, 64), (64, 1)))
    print("Each 8-half (16-byte) unit of row r moves to unit column c ^ r, so the 8 rows an")
    print("ldmatrix reads in one unit column hit 8 different bank groups.")
    L.print_layout(sw)

    tv = L.Layout(((4, 8), (2, 2)), ((32, 1), (16, 8)))
    _heading("6. mma.sync m16n8k16 accumulator: thread-value layout %s on a 16x8 tile" % tv)
    print("thread t, value v -> row t//4 + 8*(v//2), column 2*(t%4) + v%2")

    from . import atoms  # the GEMM kernel's maps, built from the C++ atoms (cute_gemm/atoms.py)
    cfg = min(atoms.gemm_config_maps(), key=lambda c: c["bm"] * c["bn"])
    maps = atoms.gemm_kernel_maps(*(cfg[k] for k in ("bm", "bn", "bk", "stages", "warps_m",
                                                      "warps_n")))
    mma_c, c_tile = maps["mma_c_tv"], maps["mma_c_tile"]
    g2s, g2s_tile = maps["g2s_tv"], maps["g2s_tile"]
    _heading("7. GEMM kernel %s: the tiled MMA's accumulators and the global->shared copy"
             % maps["name"])
    print("mma C: %s on the %dx%d tile" % ((mma_c,) + c_tile))
    print("  thread 0 holds (row, col) %s ..." % ", ".join(
        "(%d, %d)" % (e % c_tile[0], e // c_tile[0]) for e in mma_c(0, L._)[:8]))
    print("G2S:   %s on a %dx%d tile; thread t copies 8 halves (16 bytes) of row t // %d"
          % ((g2s,) + g2s_tile + (g2s_tile[1] // 8,)))

    if out_dir is not None:
        os.makedirs(out_dir, exist_ok=True)
        pictures = [
            ("layout_2x3_col", L.to_svg(col), L.to_latex(col)),
            ("layout_2x3_row", L.to_svg(row), L.to_latex(row)),
            ("layout_8x2x2", L.to_svg(A), L.to_latex(A)),
            ("blocked_product", L.to_svg(blocked), L.to_latex(blocked)),
            ("raked_product", L.to_svg(raked), L.to_latex(raked)),
            ("swizzle_333_8x64", L.to_svg(sw), L.to_latex(sw)),
            ("tv_mma_m16n8k16_c", L.to_svg_tv(tv, (16, 8)), L.to_latex_tv(tv, (16, 8))),
            ("tv_gemm_%s_mma_c" % maps["name"], L.to_svg_tv(mma_c, c_tile),
             L.to_latex_tv(mma_c, c_tile)),
            ("tv_gemm_%s_g2s" % maps["name"], L.to_svg_tv(g2s, g2s_tile),
             L.to_latex_tv(g2s, g2s_tile)),
        ]
        _heading("Pictures")
        for name, svg, tex in pictures:
            for ext, text in (("svg", svg), ("tex", tex)):
                path = os.path.join(out_dir, "%s.%s" % (name, ext))
                with open(path, "w") as f:
                    f.write(text)
                print("wrote %s" % path)
    else:
        print()
        print("(walkthrough(out_dir), or python -m cute_gemm layout --out DIR, also writes SVG and "
              "TikZ pictures)")
