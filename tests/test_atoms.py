"""The GEMM kernel's thread-value maps from Python (cute_gemm.atoms, the bound tv_layout.hpp
functions), checked on the CPU:

- the atoms' C++ layouts against the PTX ISA's fragment definitions, computed independently here;
- the Python-built maps of each compiled configuration equal the kernel config's own lifted
  layouts (gemm_config_maps(), instantiated from kernels/gemm/gemm_config.hpp);
- coverage of every TV map and bank-conflict freedom of every shared-memory access: a second,
  independent implementation of tests/cpp/test_gemm_maps.cpp (own swizzle, own address
  arithmetic from the TV maps instead of the typed partitions);
- pictures: valid SVG with one cell per tile element;
- the bindings' argument checks.
"""

import itertools
import re
import xml.etree.ElementTree as ET
from collections import Counter

import pytest

import cute_gemm
from cute_gemm import atoms
from cute_gemm.layout import (
    ComposedLayout, Layout, copy_ref_to_src, mode, size, tiled_copy_tile, tiled_copy_tv,
    tiled_mma_copy_src_tv, tiled_mma_tv)

SVG = "{http://www.w3.org/2000/svg}"

COMPILED = atoms.gemm_config_maps()
COMPILED_IDS = [c["name"] for c in COMPILED]
CFG_KEYS = ("bm", "bn", "bk", "stages", "warps_m", "warps_n")


def cfg_tuple(c):
    return tuple(c[k] for k in CFG_KEYS)


# Configurations the kernel is not built with, whose maps must satisfy the same properties: the
# formulas of gemm_config.hpp are meant for any valid (BM, BN, BK=32, stages, warps) choice.
HYPOTHETICAL = [(64, 128, 32, 3, 2, 2), (256, 128, 32, 3, 4, 2), (128, 64, 32, 3, 4, 1),
                (32, 64, 32, 3, 1, 2)]
ALL_CONFIGS = [cfg_tuple(c) for c in COMPILED] + HYPOTHETICAL
ALL_IDS = COMPILED_IDS + ["hypothetical-" + atoms.config_name(*c) for c in HYPOTHETICAL]


@pytest.fixture(scope="module", params=ALL_CONFIGS, ids=ALL_IDS)
def maps(request):
    return atoms.gemm_kernel_maps(*request.param)


# ---------------------------------------------------------------- PTX fragment definitions
# PTX ISA, "Matrix Fragments for mma.m16n8k16 with floating point type": lane = 4*groupID +
# threadID_in_group; element i of a thread's fragment (register order, 2 halves per register).


def gt(lane):
    return lane // 4, lane % 4


def ptx_a(lane, i):  # (row m, col k) of a0..a7 in the 16x16 A tile
    g, t = gt(lane)
    return g + 8 * ((i // 2) % 2), 2 * t + i % 2 + 8 * (i // 4)


def ptx_b(lane, i):  # (n, k) of b0..b3 in the 8x16 (N, K) B tile
    g, t = gt(lane)
    return g, 2 * t + i % 2 + 8 * (i // 2)


def ptx_c(lane, i):  # (row m, col n) of c0..c3 in the 16x8 C tile
    g, t = gt(lane)
    return g + 8 * (i // 2), 2 * t + i % 2


@pytest.mark.parametrize("operand,frag,rows,values", [
    ("A", ptx_a, 16, 8), ("B", ptx_b, 8, 4), ("C", ptx_c, 16, 4)])
def test_mma_atom_matches_ptx(operand, frag, rows, values):
    atom = atoms.mma_atom_layouts("m16n8k16")
    assert atom["MNK"] == (16, 8, 16) and atom["threads"] == 32
    tv = atom[operand]
    assert size(mode(tv, 0)) == 32 and size(mode(tv, 1)) == values
    for lane, i in itertools.product(range(32), range(values)):
        r, c = frag(lane, i)
        assert tv(lane, i) == r + rows * c, (operand, lane, i)


def test_mma_atom_layouts_unknown_name():
    assert atoms._atoms_ext.mma_atom_names() == ["m16n8k16"]
    with pytest.raises(ValueError, match=r"unknown MMA atom 'm16n8k8'"):
        atoms.mma_atom_layouts("m16n8k8")


def ldmatrix_received(src, lane, v):
    """Tile element that ldmatrix.x4 delivers to value v (register v // 2, half v % 2) of a lane.

    PTX: lanes 8j..8j+7 supply the row addresses of matrix j; register j of lane l receives row
    l // 4, columns 2 * (l % 4) and +1 of matrix j. The addressed row of lane 8j + r is src's
    (8j + r, 0..7), so the element is src(8j + l // 4, 2 * (l % 4) + v % 2).
    """
    j = v // 2
    return src(8 * j + lane // 4, 2 * (lane % 4) + v % 2)


@pytest.mark.parametrize("operand", ["A", "B"])
def test_ldmatrix_atoms(operand):
    src, ref = atoms.ldmatrix_layouts(operand)
    assert size(mode(src, 0)) == size(mode(ref, 0)) == 32
    assert size(mode(src, 1)) == size(mode(ref, 1)) == 8
    for lane in range(32):
        # what each lane addresses (copy_traits.hpp): one 8-element row of a 16x16 tile
        if operand == "A":
            r, k = lane % 16, 8 * (lane // 16)
        else:
            r, k = lane % 8 + 8 * (lane // 16), 8 * (lane // 8 % 2)
        assert [src(lane, v) for v in range(8)] == [r + 16 * (k + v) for v in range(8)]
        for v in range(8):
            # the registers receive the MMA fragments (B: two n8 atoms, n 0-7 then 8-15) ...
            if operand == "A":
                m, kk = ptx_a(lane, v)
            else:
                n, kk = ptx_b(lane, v % 4)
                m = n + 8 * (v // 4)
            assert ref(lane, v) == m + 16 * kk
            # ... which is what the instruction delivers from the addressed rows
            assert ref(lane, v) == ldmatrix_received(src, lane, v)
    # ref2src renumbers source (t, v) into reference t + 32 v: ref(ref2src(x)) == src(x)
    r2s = copy_ref_to_src(ref, src)
    assert all(ref(r2s(x)) == src(x) for x in range(size(src)))


def test_ldmatrix_unknown_operand():
    with pytest.raises(ValueError, match=r"operand must be 'A' or 'B', got 'C'"):
        atoms.ldmatrix_layouts("C")


# ------------------------------------------------------------- bound tv_layout.hpp functions


def test_tiled_mma_tv_docstring_example():
    c = atoms.mma_atom_layouts()["C"]
    tv = tiled_mma_tv(c, (16, 8), (2, 2), (32, 32), "C")
    assert tv.shape == (((4, 8), 2, 2), ((2, 2), 1, 2))
    assert sorted(tv.offsets()) == list(range(32 * 32))
    # the atom itself: one warp, no permutation
    one = tiled_mma_tv(c, (16, 8), (1, 1), (Layout(16), Layout(8)), "c")
    assert [one(i) for i in range(128)] == [c(i) for i in range(128)]


def test_tiled_mma_tv_broadcast_modes():
    atom = atoms.mma_atom_layouts()
    a = tiled_mma_tv(atom["A"], (16, 16), (2, 3), (32, 16), "A")
    b = tiled_mma_tv(atom["B"], (8, 16), (2, 3), (24, 16), "B")
    assert mode(mode(a, 0), 2).stride == 0   # A: the WN warps share rows
    assert mode(mode(b, 0), 1).stride == 0   # B: the WM warps share columns
    assert Counter(Counter(a.offsets()).values()) == {3: 32 * 16}
    assert Counter(Counter(b.offsets()).values()) == {2: 24 * 16}


def test_tiled_copy_tv_docstring_example():
    thr, val = Layout((32, 4), (4, 1)), Layout((1, 8))
    tv = tiled_copy_tv(thr, val)
    assert tiled_copy_tile(thr, val) == (32, 32)
    for t, v in itertools.product(range(128), range(8)):
        assert tv(t, v) == t // 4 + 32 * (8 * (t % 4) + v)


def test_tiled_mma_copy_src_tv_matches_fragments():
    atom = atoms.mma_atom_layouts()
    mma_b = tiled_mma_tv(atom["B"], (8, 16), (1, 1), (16, 16), "B")
    src, ref = atoms.ldmatrix_layouts("B")
    tv = tiled_mma_copy_src_tv(mma_b, 32, 8, copy_ref_to_src(ref, src))
    # one warp, two n8 atoms filled by one ldmatrix.x4: the instruction's own source layout
    assert size(tv) == 256 and sorted(tv.offsets()) == sorted(src.offsets())
    assert all(tv(i) == src(i) for i in range(256))


def test_bound_function_errors():
    c = atoms.mma_atom_layouts()["C"]
    with pytest.raises(ValueError, match=r"operand must be 'A', 'B' or 'C', got 'D'"):
        tiled_mma_tv(c, (16, 8), (1, 1), (16, 8), "D")
    with pytest.raises(TypeError, match=r"tiled_mma_tv: operand must be 'A', 'B' or 'C'"):
        tiled_mma_tv(c, (16, 8), (1, 1), (16, 8), 2)
    with pytest.raises(ValueError, match=r"warps\[0\] must be at least 1, got 0"):
        tiled_mma_tv(c, (16, 8), (0, 1), (16, 8), "C")
    with pytest.raises(TypeError, match=r"perm must be a pair"):
        tiled_mma_tv(c, (16, 8), (1, 1), 16, "C")
    with pytest.raises(TypeError, match=r"atom_shape must be a pair of ints"):
        tiled_mma_tv(c, (16, 8, 1), (1, 1), (16, 8), "C")
    with pytest.raises(ValueError, match=r"must be a \(thread, value\) layout of rank 2"):
        tiled_mma_tv(Layout(32), (16, 8), (1, 1), (16, 8), "C")
    with pytest.raises(ValueError, match=r"tile rows 24 are not a multiple"):
        tiled_mma_tv(c, (16, 8), (1, 1), (24, 8), "C")
    with pytest.raises(ValueError, match=r"not injective"):
        tiled_copy_tv(Layout((2, 2), (1, 1)), Layout((1, 2)))
    a = tiled_mma_tv(atoms.mma_atom_layouts()["A"], (16, 16), (1, 1), (16, 16), "A")
    src, ref = atoms.ldmatrix_layouts("A")
    r2s = copy_ref_to_src(ref, src)
    with pytest.raises(ValueError, match=r"atom_values must be at least 1"):
        tiled_mma_copy_src_tv(a, 32, 0, r2s)
    with pytest.raises(ValueError, match=r"copy atom threads \(16\) differ"):
        tiled_mma_copy_src_tv(a, 16, 8, r2s)
    with pytest.raises(ValueError, match=r"mma_tv must come from tiled_mma_tv"):
        tiled_mma_copy_src_tv(src, 32, 8, r2s)


def test_gemm_kernel_maps_rejects_invalid_configs():
    with pytest.raises(ValueError, match=r"BK: whole k16 steps"):
        atoms.gemm_kernel_maps(64, 64, 24, 3, 2, 2)
    with pytest.raises(ValueError, match=r"two n8 atoms per ldmatrix"):
        atoms.gemm_kernel_maps(64, 24, 32, 3, 2, 1)
    with pytest.raises(ValueError, match=r"Stages - 2 tiles"):
        atoms.gemm_kernel_maps(64, 64, 32, 2, 2, 2)


# -------------------------------------------------- Python-built maps == the kernel's own


@pytest.mark.parametrize("cpp", COMPILED, ids=COMPILED_IDS)
def test_python_maps_equal_cpp_config_maps(cpp):
    py = atoms.gemm_kernel_maps(*cfg_tuple(cpp))
    keys = set(atoms.TV_KEYS) | set(atoms.SMEM_KEYS) | {"g2s_tile", "s2g_tile", "threads", "name"}
    assert keys <= set(cpp)
    for key in sorted(cpp):
        assert py[key] == cpp[key], "%s: %s: python %s, C++ %s" % (cpp["name"], key, py[key],
                                                                    cpp[key])


def test_compiled_configs_are_the_dispatched_ones():
    assert COMPILED_IDS and len(set(COMPILED_IDS)) == len(COMPILED_IDS)
    assert COMPILED_IDS == [atoms.config_name(*cfg_tuple(c)) for c in COMPILED]
    try:
        dispatched = cute_gemm._C._gemm_configs()
    except RuntimeError as e:  # a CPU-only build has no kernels
        assert "built without CUDA" in str(e)
        return
    # The mma.sync configurations, then the Hopper kernel's (their own layouts: test_cpp_core.py
    # runs tests/cpp/test_gemm_wgmma_layouts.cpp).
    assert [c for c in dispatched if not c.startswith("wgmma_")] == COMPILED_IDS


# ------------------------------------------------------------------------- coverage


def coverage(tv):
    return Counter(tv.offsets())


def test_mma_maps_cover(maps):
    bm, bn, bk, wm, wn = (maps[k] for k in ("bm", "bn", "bk", "warps_m", "warps_n"))
    assert maps["threads"] == 32 * wm * wn
    for key, tile, times in [("mma_c_tv", (bm, bn), 1), ("mma_a_tv", (bm, bk), wn),
                             ("mma_b_tv", (bn, bk), wm)]:
        assert atoms.tile_of(maps, key) == tile
        tv = maps[key]
        assert size(mode(tv, 0)) == maps["threads"]
        c = coverage(tv)
        assert set(c) == set(range(tile[0] * tile[1])), key
        assert set(c.values()) == {times}, key


def test_each_warp_owns_a_contiguous_block(maps):
    bm, bn, wm, wn, T = (maps[k] for k in ("bm", "bn", "warps_m", "warps_n", "threads"))
    tv = maps["mma_c_tv"]
    values = size(mode(tv, 1))
    for t in range(T):
        w = t // 32
        for v in range(values):
            e = tv(t + T * v)
            r, c = e % bm, e // bm
            assert (r // (bm // wm), c // (bn // wn)) == (w % wm, w // wm)


def test_copy_maps_cover(maps):
    T = maps["threads"]
    for key in ("g2s_tv", "s2g_tv"):
        tv = maps[key]
        R, S = atoms.tile_of(maps, key)
        assert size(mode(tv, 0)) == T and size(mode(tv, 1)) == 8
        c = coverage(tv)
        assert set(c) == set(range(R * S)) and set(c.values()) == {1}, key
        for t in range(T):  # each thread: 8 consecutive columns of one row (16 bytes)
            first = tv(t, 0)
            assert [tv(t, v) for v in range(8)] == [first + R * v for v in range(8)], key
    assert maps["bm"] % maps["g2s_tile"][0] == 0 and maps["bn"] % maps["g2s_tile"][0] == 0
    assert maps["g2s_tile"][1] == maps["bk"] and maps["s2g_tile"][1] == maps["bn"]


def ldsm_instructions(maps, op):
    """{(warp, i, j): [(lane, [tile index of value 0..7])]} of the ldmatrix source map."""
    tv = maps["ldsm_%s_src_tv" % op]
    T = maps["threads"]
    vals = mode(tv, 1)
    R, S = size(mode(vals, 1)), size(mode(vals, 2))
    assert size(mode(vals, 0)) == 8
    out = {}
    for w, i, j in itertools.product(range(T // 32), range(R), range(S)):
        out[(w, i, j)] = [[tv(32 * w + lane + T * (v + 8 * (i + R * j))) for v in range(8)]
                          for lane in range(32)]
    return out


@pytest.mark.parametrize("op", ["a", "b"])
def test_ldmatrix_fills_the_mma_fragments(maps, op):
    """Each instruction's lanes address exactly the elements of the f = 8 / V_atom fragments it
    fills (atoms f*i .. f*i+f-1 of column j), one row of 8 consecutive k per lane."""
    T = maps["threads"]
    tile_r = maps["bm"] if op == "a" else maps["bn"]
    mma = maps["mma_%s_tv" % op]
    v_atom = size(mode(mode(mma, 1), 0))
    f = 8 // v_atom
    rows = size(mode(mode(mma, 1), 1))
    for (w, i, j), lanes in ldsm_instructions(maps, op).items():
        got, want = Counter(), Counter()
        for lane, idx in enumerate(lanes):
            assert idx == [idx[0] + tile_r * v for v in range(8)]
            got.update(idx)
            t = 32 * w + lane
            for u, v in itertools.product(range(f), range(v_atom)):
                want[mma(t + T * (v + v_atom * ((f * i + u) + rows * j)))] += 1
        assert got == want, (op, w, i, j)


# -------------------------------------------------------------------- bank conflicts


def swizzle_fn(sw):
    """The swizzle as a Python function (swizzle.hpp's definition, independent of the binding)."""
    b, m, s = sw.bits, sw.base, sw.shift
    yyy = ((1 << b) - 1) << (m + max(s, 0))
    return (lambda x: x ^ ((x & yyy) >> s)) if s >= 0 else (lambda x: x ^ ((x & yyy) << -s))


def smem_offsets(cl, dims, strides):
    """Offsets of a row-major smem layout recomputed in Python from its documented form, checked
    against the ComposedLayout; returns {coordinate: offset}."""
    assert cl.offset == 0 and cl.shape == dims and cl.layout.stride == strides
    f = swizzle_fn(cl.swizzle)
    out = {}
    for crd in itertools.product(*(range(d) for d in dims)):
        out[crd] = f(sum(c * d for c, d in zip(crd, strides)))
    bound = cl.offsets()
    for idx, crd in enumerate(itertools.product(*(range(d) for d in reversed(dims)))):
        assert bound[idx] == out[tuple(reversed(crd))]  # colexicographic 1-D index
    return out


def conflict_free_16B(byte_addr):
    """16-byte accesses are served 8 threads (128 bytes) at a time: within each group of 8, two
    threads may share a 16-byte bank group (addr // 16 % 8) only by reading the same 16 bytes."""
    for p in range(0, len(byte_addr) - 7, 8):
        unit_of_group = {}
        for a in byte_addr[p:p + 8]:
            if unit_of_group.setdefault(a // 16 % 8, a // 16) != a // 16:
                return False
    return True


def conflict_free_words(byte_addr):
    """Narrow accesses of 32 lanes at once: lanes in one 4-byte bank must hit the same word."""
    word_of_bank = {}
    for a in byte_addr:
        if word_of_bank.setdefault(a // 4 % 32, a // 4) != a // 4:
            return False
    return True


def test_conflict_checkers():
    assert conflict_free_16B([16 * i for i in range(8)])
    assert conflict_free_16B([0] * 8) and conflict_free_16B([16 * i + 128 for i in range(8)])
    assert not conflict_free_16B([0, 128] + [16 * i for i in range(2, 8)])
    assert conflict_free_words([4 * i for i in range(32)]) and conflict_free_words([0, 2] * 16)
    assert not conflict_free_words([0, 128])


@pytest.fixture(scope="module")
def smem(maps):
    bm, bn, bk, st = (maps[k] for k in ("bm", "bn", "bk", "stages"))
    a = smem_offsets(maps["smem_a"], (bm, bk, st), (bk, 1, bm * bk))
    b = smem_offsets(maps["smem_b"], (bn, bk, st), (bk, 1, bn * bk))
    c = smem_offsets(maps["smem_c"], (bm, bn), (bn, 1))
    return {"a": a, "b": b, "c": c}


def test_smem_layouts_are_permutations(maps, smem):
    bm, bn, bk, st = (maps[k] for k in ("bm", "bn", "bk", "stages"))
    assert sorted(smem["a"].values()) == list(range(bm * bk * st))
    assert sorted(smem["b"].values()) == list(range(bn * bk * st))
    assert sorted(smem["c"].values()) == list(range(bm * bn))
    for s in range(st):  # every stage is swizzled alike
        assert all(smem["a"][(r, k, s)] - smem["a"][(r, k, 0)] == s * bm * bk
                   for r in range(bm) for k in range(bk))


@pytest.mark.parametrize("op", ["a", "b"])
def test_g2s_stores_conflict_free(maps, smem, op):
    T = maps["threads"]
    R, S = maps["g2s_tile"]
    tv = maps["g2s_tv"]
    rows = maps["bm"] if op == "a" else maps["bn"]
    for i, j, w in itertools.product(range(rows // R), range(maps["bk"] // S), range(T // 32)):
        addr = []
        for lane in range(32):
            e = [tv(32 * w + lane, v) for v in range(8)]
            byte = [2 * smem[op][(x % R + i * R, x // R + j * S, 0)] for x in e]
            assert byte == [byte[0] + 2 * v for v in range(8)], "G2S vector split"
            addr.append(byte[0])
        assert conflict_free_16B(addr), (op, i, j, w)


@pytest.mark.parametrize("op", ["a", "b"])
def test_ldmatrix_reads_conflict_free(maps, smem, op):
    tile_r = maps["bm"] if op == "a" else maps["bn"]
    for key, lanes in ldsm_instructions(maps, op).items():
        addr = []
        for idx in lanes:
            byte = [2 * smem[op][(x % tile_r, x // tile_r, 0)] for x in idx]
            assert byte == [byte[0] + 2 * v for v in range(8)], "ldmatrix row split"
            addr.append(byte[0])
        assert conflict_free_16B(addr), (op, key)


def test_accumulator_stores_conflict_free(maps, smem):
    T, bm = maps["threads"], maps["bm"]
    tv = maps["mma_c_tv"]
    for w, v in itertools.product(range(T // 32), range(size(mode(tv, 1)))):
        addr = [2 * smem["c"][(e % bm, e // bm)]
                for e in (tv(32 * w + lane + T * v) for lane in range(32))]
        assert conflict_free_words(addr), (w, v)


def test_s2g_loads_conflict_free(maps, smem):
    T = maps["threads"]
    R, S = maps["s2g_tile"]
    tv = maps["s2g_tv"]
    for i, j, w in itertools.product(range(maps["bm"] // R), range(maps["bn"] // S),
                                     range(T // 32)):
        addr = []
        for lane in range(32):
            byte = [2 * smem["c"][(x % R + i * R, x // R + j * S)]
                    for x in (tv(32 * w + lane, v) for v in range(8))]
            assert byte == [byte[0] + 2 * v for v in range(8)], "S2G vector split"
            addr.append(byte[0])
        assert conflict_free_16B(addr), (i, j, w)


# ------------------------------------------------------------------------------ pictures


def svg_cells(path):
    root = ET.parse(path).getroot()
    assert root.tag == SVG + "svg"
    rects = [r for r in root.iter(SVG + "rect") if r.get("class") == "cell"]
    texts = [t for t in root.iter(SVG + "text") if t.get("class") == "cell"]
    return rects, texts


@pytest.mark.parametrize("index", range(len(COMPILED)), ids=COMPILED_IDS)
def test_draw_gemm_maps(tmp_path, index):
    maps = atoms.gemm_kernel_maps(*cfg_tuple(COMPILED[index]))
    paths = atoms.draw_gemm_maps(str(tmp_path), index)
    name = maps["name"]
    assert [p.rsplit("/", 1)[-1] for p in paths] == [
        "%s_%s.svg" % (name, k) for k in atoms.TV_KEYS + atoms.SMEM_KEYS]
    for key, path in zip(atoms.TV_KEYS + atoms.SMEM_KEYS, paths):
        if key in atoms.TV_KEYS:
            R, S = atoms.tile_of(maps, key)
        else:
            R, S = maps["bm"] if key != "smem_b" else maps["bn"], (
                maps["bk"] if key != "smem_c" else maps["bn"])
        rects, texts = svg_cells(path)
        assert len(rects) == R * S == len(texts), key  # one cell per element, all owned
        if key == "mma_a_tv":  # held by the WN warps: heavy borders exactly when WN > 1
            heavy = sum(r.get("stroke-width") == "2.5" for r in rects)
            assert heavy == (R * S if maps["warps_n"] > 1 else 0)


def test_draw_gemm_maps_cells_show_the_owners(tmp_path):
    # smallest compiled configuration: each TV cell names the first (t, v) owning its element, each
    # smem cell the swizzled offset
    cfg = min(COMPILED, key=lambda c: c["bm"] * c["bn"])
    maps = atoms.gemm_kernel_maps(*cfg_tuple(cfg))
    for by in (cfg["name"], cfg_tuple(cfg), maps):
        paths = dict(zip(atoms.TV_KEYS + atoms.SMEM_KEYS, atoms.draw_gemm_maps(str(tmp_path), by)))
    for key in ("mma_c_tv", "g2s_tv", "ldsm_b_src_tv"):
        tv, (R, S) = maps[key], atoms.tile_of(maps, key)
        T = size(mode(tv, 0))
        first = {}
        for x in range(size(tv)):
            first.setdefault(tv(x), (x % T, x // T))
        rects, texts = svg_cells(paths[key])
        xs = sorted({float(r.get("x")) for r in rects})
        ys = sorted({float(r.get("y")) for r in rects})
        assert (len(ys), len(xs)) == (R, S)
        w, h = float(rects[0].get("width")), float(rects[0].get("height"))
        for t in texts:
            col = int((float(t.get("x")) - xs[0]) // w)
            row = int((float(t.get("y")) - ys[0]) // h)
            tt, vv = (s.text for s in t.iter(SVG + "tspan"))
            assert (tt, vv.rstrip("*")) == ("T%d" % first[row + R * col][0],
                                            "V%d" % first[row + R * col][1])
    sc = atoms.smem_stage(maps["smem_a"])
    assert isinstance(sc, ComposedLayout) and sc.shape == (maps["bm"], maps["bk"])
    last = atoms.smem_stage(maps["smem_a"], maps["stages"] - 1)
    assert [x - maps["bm"] * maps["bk"] * (maps["stages"] - 1) for x in last.offsets()] == \
        sc.offsets()
    _, texts = svg_cells(paths["smem_a"])
    assert [int(t.text) for t in texts] == [sc(i, j) for i in range(maps["bm"])
                                            for j in range(maps["bk"])]


def test_draw_gemm_maps_bad_config(tmp_path):
    with pytest.raises(ValueError, match=r"unknown GEMM configuration '1x1x1_s1_w1x1'"):
        atoms.draw_gemm_maps(str(tmp_path), "1x1x1_s1_w1x1")
    with pytest.raises(TypeError, match=r"config must be an index, a name"):
        atoms.draw_gemm_maps(str(tmp_path), 1.5)


def test_walkthrough_draws_gemm_maps(tmp_path, capsys):
    cute_gemm.layout.walkthrough(out_dir=str(tmp_path))
    out = capsys.readouterr().out
    cfg = min(COMPILED, key=lambda c: c["bm"] * c["bn"])
    assert re.search(r"7\. GEMM kernel %s" % cfg["name"], out)
    for what in ("mma_c", "g2s"):
        path = tmp_path / ("tv_gemm_%s_%s.svg" % (cfg["name"], what))
        assert str(path) in out
        rects, _ = svg_cells(str(path))
        tile = (cfg["bm"], cfg["bn"]) if what == "mma_c" else cfg["g2s_tile"]
        assert len(rects) == tile[0] * tile[1]
