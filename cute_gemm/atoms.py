"""The thread-value maps of the GEMM kernel, built in Python from the C++ atoms, and their pictures.

The atoms' layouts come from the C++ traits themselves (``to_dyn`` of the static layouts in
csrc/cute_gemm/mma_traits_sm80.hpp and copy_traits.hpp); the tiled maps are computed with the bound
tv_layout.hpp functions (``cute_gemm.layout.tiled_mma_tv`` and friends) using exactly the formulas
of csrc/kernels/gemm/gemm_config.hpp, and tests/test_atoms.py checks them against the kernel
configurations' own lifted layouts (``gemm_config_maps()``).

    from cute_gemm import atoms
    atoms.mma_atom_layouts()["C"]                 # ((4,8),(2,2)):((32,1),(16,8))
    maps = atoms.gemm_kernel_maps(64, 64, 32, 3, 2, 2)
    maps["mma_c_tv"], maps["mma_c_tile"]          # (thread, value) -> r + 64*c of the 64x64 tile
    atoms.draw_gemm_maps("pictures", "64x64x32_s3_w2x2")   # one SVG per map

Map keys (gemm_kernel_maps and gemm_config_maps): mma_a_tv / mma_b_tv / mma_c_tv (TiledMMA
operands over (BM, BK) / (BN, BK) / (BM, BN)), ldsm_a_src_tv / ldsm_b_src_tv (what each lane of an
ldmatrix addresses, same tiles as A / B), g2s_tv / s2g_tv (cp.async copies, tiles g2s_tile /
s2g_tile), smem_a / smem_b ((rows, BK, stages) swizzled buffers) and smem_c ((BM, BN) epilogue
buffer). TV maps send (thread, value) to the column-major index r + R*s of their (R, S) tile.
"""

import os

from ._C import atoms as _atoms_ext
from ._C import layout as _L

__all__ = [
    "mma_atom_layouts", "ldmatrix_layouts", "gemm_config_maps", "gemm_kernel_maps",
    "config_name", "draw_gemm_maps", "tile_of", "smem_stage", "TV_KEYS", "SMEM_KEYS",
]

# The TV maps of a configuration and the key of the (rows, cols) tile each one covers.
TV_KEYS = ("mma_a_tv", "mma_b_tv", "mma_c_tv", "ldsm_a_src_tv", "ldsm_b_src_tv", "g2s_tv",
           "s2g_tv")
SMEM_KEYS = ("smem_a", "smem_b", "smem_c")

_MMA_ATOM = "m16n8k16"


def mma_atom_layouts(name=_MMA_ATOM):
    """{'A', 'B', 'C', 'MNK', 'threads'} of an MMA atom, from the C++ MMA_Traits."""
    return _atoms_ext.mma_atom_layouts(name)


def ldmatrix_layouts(operand):
    """(src, ref) of the ldmatrix.x4 atom filling m16n8k16 'A' or 'B' fragments (C++ traits)."""
    return _atoms_ext.ldmatrix_layouts(operand)


def gemm_config_maps():
    """The compiled kernel configurations' own layouts (C++ GemmConfig, to_dyn), one dict each."""
    return _atoms_ext.gemm_config_maps()


def config_name(bm, bn, bk, stages, warps_m, warps_n):
    """'BMxBNxBK_sS_wWMxWN', the name the dispatcher and the benchmarks use."""
    return "%dx%dx%d_s%d_w%dx%d" % (bm, bn, bk, stages, warps_m, warps_n)


def _log2_of(x):
    # gemm_config.hpp's log2_of: floor(log2(x)), 0 for x <= 1.
    return 0 if x <= 1 else 1 + _log2_of(x // 2)


def _require(cond, msg):
    if not cond:
        raise ValueError("gemm_kernel_maps: " + msg)


def gemm_kernel_maps(bm, bn, bk, stages, warps_m, warps_n):
    """Every layout the GEMM kernel uses for one configuration, computed as gemm_config.hpp does.

    Returns a dict with the configuration (name, bm, bn, bk, stages, warps_m, warps_n, threads),
    the TV maps of TV_KEYS with their tiles under '<map>_tile' minus '_tv' (e.g. 'mma_c_tile';
    'g2s_tile' and 's2g_tile' for the copies), and the ComposedLayouts of SMEM_KEYS.
    """
    atom = mma_atom_layouts(_MMA_ATOM)
    am, an, ak = atom["MNK"]
    threads = atom["threads"] * warps_m * warps_n
    _require(bm % (am * warps_m) == 0 and bm >= am * warps_m,
             "BM must split into m%d atoms per warp" % am)
    _require(bn % (an * warps_n) == 0, "BN must split into n%d atoms per warp" % an)
    rep_m = bm // (am * warps_m)  # m16 atoms per warp
    rep_n = bn // (an * warps_n)  # n8 atoms per warp
    _require(rep_n % 2 == 0, "B is loaded two n8 atoms per ldmatrix.x4")
    _require(bk % ak == 0 and bk >= 32, "BK: whole k16 steps, 64-byte rows at least")
    _require(stages >= 3, "the pipeline keeps Stages - 2 tiles in flight while computing")

    # Mma: each warp owns a contiguous (BM / WM) x (BN / WN) block; the permutations map the natural
    # (atom, warp, repeat) order to (atom, repeat, warp).
    perm_m = _L.Layout((am, warps_m, rep_m), (1, am * rep_m, am))
    perm_n = _L.Layout((an, warps_n, rep_n), (1, an * rep_n, an))
    perm_k = _L.Layout(bk)
    warps = (warps_m, warps_n)
    mma_a = _L.tiled_mma_tv(atom["A"], (am, ak), warps, (perm_m, perm_k), "A")
    mma_b = _L.tiled_mma_tv(atom["B"], (an, ak), warps, (perm_n, perm_k), "B")
    mma_c = _L.tiled_mma_tv(atom["C"], (am, an), warps, (perm_m, perm_n), "C")

    # ldmatrix into the fragments (TiledMmaCopy<LdsmX_x4, Mma, operand>).
    def ldsm(operand, mma_tv):
        src, ref = ldmatrix_layouts(operand)
        atom_threads = _L.size(_L.mode(src, 0))
        atom_values = _L.size(_L.mode(src, 1))
        return _L.tiled_mma_copy_src_tv(mma_tv, atom_threads, atom_values,
                                        _L.copy_ref_to_src(ref, src))

    # global -> shared: BK / 8 threads per row, 16 bytes (8 values) each.
    chunks = bk // 8
    vals = _L.Layout((1, 8))
    g2s_thr = _L.Layout((threads // chunks, chunks), (chunks, 1))
    g2s_tile = _L.tiled_copy_tile(g2s_thr, vals)
    _require(bm % g2s_tile[0] == 0 and bn % g2s_tile[0] == 0, "G2S tile must divide BM, BN")
    # shared -> global: BN / 8 threads per row.
    s2g_thr = _L.Layout((threads * 8 // bn, bn // 8), (bn // 8, 1))

    sw = _L.Swizzle(3, 3, 3)
    return {
        "name": config_name(bm, bn, bk, stages, warps_m, warps_n),
        "bm": bm, "bn": bn, "bk": bk, "stages": stages, "warps_m": warps_m, "warps_n": warps_n,
        "threads": threads,
        "mma_a_tv": mma_a, "mma_a_tile": (bm, bk),
        "mma_b_tv": mma_b, "mma_b_tile": (bn, bk),
        "mma_c_tv": mma_c, "mma_c_tile": (bm, bn),
        "ldsm_a_src_tv": ldsm("A", mma_a), "ldsm_a_src_tile": (bm, bk),
        "ldsm_b_src_tv": ldsm("B", mma_b), "ldsm_b_src_tile": (bn, bk),
        "g2s_tv": _L.tiled_copy_tv(g2s_thr, vals), "g2s_tile": g2s_tile,
        "s2g_tv": _L.tiled_copy_tv(s2g_thr, vals), "s2g_tile": _L.tiled_copy_tile(s2g_thr, vals),
        # (rows, BK, stages), K contiguous; the stage stride is above the swizzle's bits.
        "smem_a": _L.composition(sw, _L.Layout((bm, bk, stages), (bk, 1, bm * bk))),
        "smem_b": _L.composition(sw, _L.Layout((bn, bk, stages), (bk, 1, bn * bk))),
        # (BM, BN), N contiguous; the row's low 3 bits XOR the 16-byte unit index.
        "smem_c": _L.composition(_L.Swizzle(3, 3, _log2_of(bn) - 3),
                                 _L.Layout((bm, bn), (bn, 1))),
    }


def tile_of(maps, key):
    """The (rows, cols) tile of TV map `key` ('mma_c_tv' -> maps['mma_c_tile'])."""
    return tuple(maps[key[:-3] + "_tile" if key.endswith("_tv") else key])


def smem_stage(smem, stage=0):
    """A (rows, cols) ComposedLayout of one stage of a (rows, cols, stages) smem layout."""
    if _L.rank(smem) == 2:
        return smem
    inner, offset = _L.slice_and_offset(smem.layout, (_L._, _L._, stage))
    return _L.ComposedLayout(smem.swizzle, smem.offset + offset, inner)


def _resolve_config(config):
    """A maps dict from an index into gemm_config_maps(), a name, a 6-tuple or a maps dict."""
    if isinstance(config, dict):
        return config if "mma_c_tile" in config else gemm_kernel_maps(*_config_tuple(config))
    if isinstance(config, (tuple, list)):
        return gemm_kernel_maps(*config)
    compiled = gemm_config_maps()
    if isinstance(config, str):
        for c in compiled:
            if c["name"] == config:
                return gemm_kernel_maps(*_config_tuple(c))
        raise ValueError("unknown GEMM configuration %r; compiled ones: %s"
                         % (config, ", ".join(c["name"] for c in compiled)))
    if isinstance(config, int) and not isinstance(config, bool):
        return gemm_kernel_maps(*_config_tuple(compiled[config]))
    raise TypeError("config must be an index, a name such as %r, a tuple (BM, BN, BK, stages, "
                    "warps_m, warps_n) or a maps dict; got %r" % (compiled[-1]["name"], config))


def _config_tuple(d):
    return tuple(d[k] for k in ("bm", "bn", "bk", "stages", "warps_m", "warps_n"))


def draw_gemm_maps(out_dir, config):
    """Writes one SVG per map of a GEMM configuration to out_dir; returns the paths.

    config: an index into gemm_config_maps(), a configuration name ('64x64x32_s3_w2x2'), a tuple
    (BM, BN, BK, stages, warps_m, warps_n) or a gemm_kernel_maps() dict. TV maps are drawn over
    their tiles with to_svg_tv (each element shows the first thread/value owning it; elements held
    by several threads, as A by the WN warps, are marked); the shared-memory layouts with to_svg,
    stage 0 of the operand buffers, each cell showing the element's swizzled offset.
    Files: <name>_<map>.svg, e.g. 64x64x32_s3_w2x2_mma_c_tv.svg.
    """
    maps = _resolve_config(config)
    os.makedirs(out_dir, exist_ok=True)
    paths = []

    def write(key, text):
        path = os.path.join(out_dir, "%s_%s.svg" % (maps["name"], key))
        with open(path, "w") as f:
            f.write(text)
        paths.append(path)

    for key in TV_KEYS:
        write(key, _L.to_svg_tv(maps[key], tile_of(maps, key)))
    for key in SMEM_KEYS:
        write(key, _L.to_svg(smem_stage(maps[key])))
    return paths
