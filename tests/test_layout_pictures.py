"""Pictures of layouts: SVG (parsed as XML) and standalone TikZ documents."""

import re
import xml.etree.ElementTree as ET

import pytest

from cute_gemm.layout import (
    Layout, Swizzle, composition, size, to_latex, to_latex_tv, to_svg, to_svg_tv, to_table)

SVG = "{http://www.w3.org/2000/svg}"

# mma.sync.m16n8k16 accumulator fragment (PTX ISA, "Matrix Fragments for mma.m16n8k16", C/D):
# lane t holds c0..c3 at row = groupID + 8*(i >= 2), col = 2*threadID_in_group + (i & 1), with
# groupID = t // 4 and threadID_in_group = t % 4. As a (thread, value) -> m + 16*n layout:
#   t = t0 + 4*t1 (t0 = t % 4 -> column 2*t0 -> element stride 32; t1 = t // 4 -> row, stride 1)
#   v = v0 + 2*v1 (v0 -> column +1 -> stride 16; v1 -> row +8 -> stride 8)
MMA_C_TV = Layout(((4, 8), (2, 2)), ((32, 1), (16, 8)))


def mma_c_row_col(t, v):
    return t // 4 + 8 * (v // 2), 2 * (t % 4) + v % 2


def grid_cells(svg_text):
    """{(row, col): (rect, text or None)} from an SVG picture, rows/columns found by position."""
    root = ET.fromstring(svg_text)
    assert root.tag == SVG + "svg"
    rects = [r for r in root.iter(SVG + "rect") if r.get("class") == "cell"]
    texts = [t for t in root.iter(SVG + "text") if t.get("class") == "cell"]
    xs = sorted({float(r.get("x")) for r in rects})
    ys = sorted({float(r.get("y")) for r in rects})
    w, h = float(rects[0].get("width")), float(rects[0].get("height"))
    cells = {}
    for r in rects:
        cells[(ys.index(float(r.get("y"))), xs.index(float(r.get("x"))))] = [r, None]
    for t in texts:
        x, y = float(t.get("x")), float(t.get("y"))
        col = next(j for j, x0 in enumerate(xs) if x0 <= x < x0 + w)
        row = next(i for i, y0 in enumerate(ys) if y0 <= y < y0 + h)
        assert cells[(row, col)][1] is None, "two texts in one cell"
        cells[(row, col)][1] = t
    return cells, len(ys), len(xs)


def text_of(t):
    return "".join(t.itertext())


@pytest.mark.parametrize("L", [
    Layout((2, 3), (1, 2)),
    Layout((2, 3), (3, 1)),
    Layout("(8,(2,2)):(2,(1,16))"),
    Layout(((2, 2), (3, 2)), ((1, 12), (2, 4))),
    Layout(6, 2),               # rank 1: one column
    Layout((4, 2), (0, 1)),     # broadcast: equal offsets share a color
])
def test_svg_layout(L):
    svg = to_svg(L)
    cells, rows, cols = grid_cells(svg)
    if L.rank() == 1:
        assert (rows, cols) == (size(L), 1)
    else:
        assert (rows, cols) == (size(L[0]), size(L[1]))
    assert len(cells) == size(L)
    colors = {}
    for (i, j), (rect, text) in cells.items():
        v = L(i + j * rows)
        assert text is not None and int(text_of(text)) == v
        colors.setdefault(v % 8, set()).add(rect.get("fill"))
    # one color per offset class, different classes different colors
    assert all(len(c) == 1 for c in colors.values())
    assert len({next(iter(c)) for c in colors.values()}) == len(colors)
    root = ET.fromstring(svg)
    titles = [t for t in root.iter(SVG + "text") if t.get("class") == "title"]
    assert [text_of(t) for t in titles] == [str(L)]
    index = [text_of(t) for t in root.iter(SVG + "text") if t.get("class") == "index"]
    assert sorted(index, key=int) == sorted([str(j) for j in range(cols)]
                                            + [str(i) for i in range(rows)], key=int)


def test_svg_swizzled_layout():
    S = composition(Swizzle(3, 3, 3), Layout((8, 64), (64, 1)))
    svg = to_svg(S)
    cells, rows, cols = grid_cells(svg)
    assert (rows, cols) == (8, 64)
    for (i, j), (_, text) in cells.items():
        assert int(text_of(text)) == S(i, j)
    root = ET.fromstring(svg)  # "Sw<3,3,3>" in the title must be escaped to stay valid XML
    title = next(t for t in root.iter(SVG + "text") if t.get("class") == "title")
    assert text_of(title) == str(S)


@pytest.mark.parametrize("L", [Layout((2, 3), (3, 1)), Layout("(8,(2,2)):(2,(1,16))")])
def test_latex_layout(L):
    tex = to_latex(L)
    assert tex.count("\\documentclass[convert]{standalone}") == 1
    assert "\\begin{tikzpicture}" in tex and "\\end{tikzpicture}" in tex
    assert tex.rstrip().endswith("\\end{document}")
    cell_nodes = re.findall(r"\\node\[cell[^\]]*\] at \((\d+), (\d+)\) \{(-?\d+)\};", tex)
    assert len(cell_nodes) == size(L)
    rows = size(L[0])
    for x, y, v in cell_nodes:
        assert int(v) == L(int(y) + int(x) * rows)
    assert {int(v) for _, _, v in cell_nodes} == set(L.offsets())


def test_latex_swizzled_title_escaped():
    tex = to_latex(composition(Swizzle(3, 3, 3), Layout((8, 64), (64, 1))))
    assert "Sw$<$3,3,3$>$" in tex


def test_svg_tv_mma_m16n8k16_c():
    # the layout really is the PTX fragment map
    for t in range(32):
        for v in range(4):
            r, c = mma_c_row_col(t, v)
            assert MMA_C_TV(t, v) == r + 16 * c
    cells, rows, cols = grid_cells(to_svg_tv(MMA_C_TV, (16, 8)))
    assert (rows, cols) == (16, 8) and len(cells) == 128
    seen = {}
    for (r, c), (rect, text) in cells.items():
        tspans = [s.text for s in text.iter(SVG + "tspan")]
        assert len(tspans) == 2
        t, v = int(tspans[0][1:]), int(tspans[1][1:])
        assert tspans[0] == "T%d" % t and tspans[1] == "V%d" % v
        assert mma_c_row_col(t, v) == (r, c)
        seen[t] = seen.get(t, 0) + 1
    assert seen == {t: 4 for t in range(32)}
    # colored by thread: threads congruent mod 8 share a color, others differ
    fills = {}
    for (r, c), (rect, text) in cells.items():
        t = int(next(text.iter(SVG + "tspan")).text[1:])
        fills.setdefault(t % 8, set()).add(rect.get("fill"))
    assert all(len(f) == 1 for f in fills.values()) and len(fills) == 8
    assert len({next(iter(f)) for f in fills.values()}) == 8


def test_latex_tv_mma():
    tex = to_latex_tv(MMA_C_TV, (16, 8))
    assert "\\begin{tikzpicture}" in tex
    nodes = re.findall(r"\\node\[cell[^\]]*\] at \((\d+), (\d+)\) \{T(\d+)\\\\V(\d+)\};", tex)
    assert len(nodes) == 128
    for x, y, t, v in nodes:
        assert mma_c_row_col(int(t), int(v)) == (int(y), int(x))


def test_svg_tv_blank_and_broadcast():
    # 2 threads x 1 value over 4 elements: elements 2 and 3 are nobody's
    cells, rows, cols = grid_cells(to_svg_tv(Layout((2, 1), (1, 0)), (4, 1)))
    assert (rows, cols) == (4, 1)
    assert cells[(0, 0)][1] is not None and cells[(1, 0)][1] is not None
    for r in (2, 3):
        rect, text = cells[(r, 0)]
        assert text is None and rect.get("fill") == "#ffffff"
    # 4 threads broadcast over 2 values (thread stride 0): each element has 4 owners
    cells, rows, cols = grid_cells(to_svg_tv(Layout((4, 2), (0, 1)), (2, 1)))
    for r in range(2):
        rect, text = cells[(r, 0)]
        assert [s.text for s in text.iter(SVG + "tspan")] == ["T0", "V%d*" % r]
        assert float(rect.get("stroke-width")) > 1
    tex = to_latex_tv(Layout((4, 2), (0, 1)), (2, 1))
    assert "T0\\\\V1*" in tex and "line width" in tex


def test_table_of_the_empty_layout_is_one_cell():
    table = to_table(Layout(()))
    assert "| 0 |" in table
