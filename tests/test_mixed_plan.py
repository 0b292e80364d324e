"""The mixed GEMM's planner (csrc/kernels/mixed/mixed_plan.cpp) through cute_gemm.mixed_plan and
the built-in device specs: which kernel and instance runs at each M on an H100, H200 and A100,
split-K filling one wave, the workspace, the 256 -> 128 token tile rule, schedule parsing and
validation, bad problems, custom device specs and the reachability of every instance.

Plain C++ behind it: everything here runs without a GPU. Exact values are asserted only where the
rules make them certain (the kernel kinds by M, token tiles, fine groups); the rest (split counts,
CTAs per SM, decode CTA shapes) as properties, so that a re-tuned occupancy model or instance
does not break these tests while a broken rule does.
"""

import functools
import itertools

import pytest
import torch

import cute_gemm
from cute_gemm import _C

DEVICES = ["h100", "h200", "a100"]
HOPPER = ["h100", "h200"]
MS = [1, 8, 9, 16, 17, 32, 33, 64, 128, 160, 192, 256, 4096]
# (N, K): square, wide (an MLP up projection), deep (its down projection), small, off the k block
SHAPES = [(4096, 4096), (28672, 8192), (4096, 14336), (512, 8192), (136, 4224)]
# (bits, group_size)
QUANTS = [(4, 128), (8, -1), (4, 32), (8, 64)]
MAX_SPLITS = 64
RASTER_BYTES_SHARE = 0.7  # kRasterBytesShare: a raster group replaces row-major where it cuts a
                         # wave's modelled DRAM bytes to this share
EARLY_DEPENDENTS_FILL = 0.75  # kEarlyDependentsFill: decode grids of this share of the resident
                             # CTA slots let the next kernel launch after their dependency wait
EARLY_DEPENDENTS_GATED16 = True  # kEarlyDependentsGated16: so do gated 16-row wgmma grids,
                                 # unsplit, of fewer CTAs than resident slots
SHORT_SPLIT_K = 2048  # kWgmmaShortSplitK: a wide tile whose K slices are this short -> 128
ROWS_SHARE = 0.8  # kWgmmaRowsShare: a smaller wide tile computing this share of the rows per SM
WGMMA16_MAX_SLICE_K = 2048  # kWgmma16MaxSliceK: INT4 M <= 16 on Hopper runs wgmma's 16-row tile
                            # where its K slices are at most this long, mma.sync otherwise
DECODE_MAX_M = 8
FUSED = ("decode", "mma", "wgmma")
PLAN_FIELDS = {"kernel", "instance", "tile_m", "tile_n", "stages", "threads", "smem_bytes",
               "splits", "warps", "col_warps", "k_slices", "warp_groups", "producer", "tma_loads",
               "fine_groups", "exact_scales", "ctas_per_sm", "grid", "workspace_bytes", "gated",
               "via_workspace", "reduce_in_cluster", "raster_m", "partials", "early_dependents",
               "single_row", "stream_k_ctas"}


def plan(m, n=4096, k=4096, bits=4, group=128, dtype=torch.float16, device="h100",
         schedule=None):
    return cute_gemm.mixed_plan(m, n, k, bits, group, dtype, device=device, schedule=schedule)


def block_k(bits):
    return 128 if bits == 4 else 64


def k_blocks(k, bits):
    return -(-k // block_k(bits))


def whole_block_groups(bits, group, k):
    """Whether every packed k block lies within one group (per-channel, or one group over K)."""
    return group == -1 or group >= k or group % block_k(bits) == 0


@functools.lru_cache(maxsize=None)
def _instance_table():
    return {inst["name"]: inst for inst in _C._mixed_instances()}


def instances():
    """The instantiated kernels by name (_C._mixed_instances())."""
    return dict(_instance_table())


def expected_kernel(device, m, n=4096, k=4096, bits=4, group=128, dtype=torch.float16):
    """The default rules: decode up to M = 8; with wgmma, wgmma from M = 9 except up to M = 16
    INT4 with groups shorter than a k block where wgmma's 16-row tile would split K into slices
    longer than WGMMA16_MAX_SLICE_K and INT8 where mma.sync's 128-column tiles give the SMs 0.55
    CTAs each or more (mma.sync there; ungated problems, which these are); without, mma.sync below
    192 and the dense path from there."""
    if m <= DECODE_MAX_M:
        return "decode"
    if device in HOPPER:
        whole_blocks = whole_block_groups(bits, group, k)
        if m <= 16 and bits == 4 and not whole_blocks:
            w16 = plan(m, n, k, bits, group, dtype, device, schedule="kernel=wgmma,tile_m=16")
            slice_k = -(-k_blocks(k, bits) // w16.splits) * block_k(bits)
            return "wgmma" if slice_k <= WGMMA16_MAX_SLICE_K else "mma"
        if m <= 16 and bits == 8 and -(-n // 128) >= 0.55 * cute_gemm.device_spec(device).sm_count:
            return "mma"
        return "wgmma"
    return "mma" if m < 192 else "dense"


def slot_share(device, p):
    """A plan's CTAs over its resident slots (CTAs per SM times the SMs)."""
    slots = p.ctas_per_sm * cute_gemm.device_spec(device).sm_count
    return p.grid[0] * p.grid[1] * p.grid[2] / slots


def int8_exact_fills_better(device, m, n, k, group, dtype, activation=None):
    """INT8's default scales in the 32-row wgmma tile: exact where the exact tile's grid (2 CTAs
    per SM) is one wave and fills its slots better than the rounded tile's grid (3 per SM)."""
    forced = [cute_gemm.mixed_plan(m, n, k, 8, group, dtype, device=device, activation=activation,
                                   schedule=f"kernel=wgmma,tile_m=32,scales={scales}")
              for scales in ("exact", "rounded")]
    exact, rounded = (slot_share(device, f) for f in forced)
    return exact <= 1 and exact > rounded


def all_default_plans():
    for device, m, (n, k), (bits, group), dtype in itertools.product(
            DEVICES, MS, SHAPES, QUANTS, (torch.float16, torch.bfloat16)):
        yield (device, m, n, k, bits, group, dtype), plan(m, n, k, bits, group, dtype, device)


# ------------------------------------------------------------------------------ device specs


def test_builtin_device_specs():
    h100, h200, a100 = (cute_gemm.device_spec(name) for name in DEVICES)
    assert isinstance(h100, cute_gemm.DeviceSpec) and isinstance(a100, _C.DeviceSpec)
    assert (h100.sm_count, h100.cc_major, h100.cc_minor, h100.wgmma) == (132, 9, 0, True)
    assert (a100.sm_count, a100.cc_major, a100.cc_minor, a100.wgmma) == (108, 8, 0, False)
    assert "H100" in h100.name and "H200" in h200.name and "A100" in a100.name
    for spec in (h100, h200, a100):
        assert 0 < spec.smem_per_block_optin <= spec.smem_per_sm
        assert spec.regs_per_sm > 0 and spec.max_threads_per_sm > 0 and spec.max_ctas_per_sm > 0
        assert spec.name in repr(spec)
    # The H200 is an H100 with more memory: the same SMs, so the same plans.
    for field in ("sm_count", "cc_major", "smem_per_sm", "smem_per_block_optin", "regs_per_sm",
                  "wgmma"):
        assert getattr(h200, field) == getattr(h100, field)
    assert cute_gemm.device_spec("H100").name == h100.name  # case-insensitive
    assert cute_gemm.device_spec(h100) is h100  # a DeviceSpec passes through
    assert _C._device_spec("a100").sm_count == 108


def test_device_spec_errors():
    for bad in ("v100", "h100x", "cpu", 1.5):
        with pytest.raises(ValueError, match="h100"):
            cute_gemm.device_spec(bad)
    with pytest.raises(ValueError, match="'h100', 'h200' and 'a100'"):
        _C._device_spec("b200")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="no CUDA device"):
            cute_gemm.device_spec()
        with pytest.raises(ValueError, match="no CUDA device"):
            cute_gemm.mixed_plan(1, 4096, 4096)


# --------------------------------------------------------------------------- kernel by M


@pytest.mark.parametrize("device", DEVICES)
def test_kernel_choice_by_m(device):
    for m, (n, k), (bits, group), dtype in itertools.product(
            MS, SHAPES, QUANTS, (torch.float16, torch.bfloat16)):
        p = plan(m, n, k, bits, group, dtype, device)
        want = expected_kernel(device, m, n, k, bits, group, dtype)
        assert p.kernel == want, (device, m, n, k, bits, group)
        inst = instances().get(p.instance)
        if want == "dense":
            assert p.instance is None and p.splits == 1 and p.workspace_bytes == 0
            continue
        assert inst["kernel"] == want and inst["bits"] == bits
        assert inst["bf16"] == (dtype == torch.bfloat16)
        if want == "decode":
            assert p.tile_m == 8
        elif want == "mma":
            assert p.tile_m == (16 if m <= 16 else 32 if m <= 32 else 64)
        else:
            # Exact scales in INT4's 16- and 32-row tiles where the groups are whole k blocks (or
            # all of K), in INT8's 32-row tile there where its grid fills one wave better
            # (int8_exact_fills_better), in INT8's warp-specialized tiles (64 rows and up) where
            # K is one group; every other default wgmma plan rounds the weights.
            whole_blocks = whole_block_groups(bits, group, k)
            one_group = group == -1 or group >= k
            exact = whole_blocks and p.tile_m <= 32 and (
                bits == 4 or int8_exact_fills_better(device, m, n, k, group, dtype)) or (
                bits == 8 and p.tile_m >= 64 and one_group)
            assert p.exact_scales == exact, (m, n, k, bits, group)
            if m <= 16 and bits == 4:
                assert p.tile_m == 16
            elif m <= 128:
                assert p.tile_m == (32 if m <= 32 else 64 if m <= 64 else 128)
            else:
                assert p.tile_m in (128, 160, 192, 256)  # fitted to the grid (fitted_wide_tile)
            assert p.warp_groups == (1 if p.tile_m <= 64 else 2)
        assert p.tile_m == inst["tile_m"] and p.stages == inst["stages"]


@pytest.mark.parametrize("device", DEVICES)
def test_decode_kernel_everywhere_up_to_m8(device):
    for m in range(1, DECODE_MAX_M + 1):
        assert plan(m, device=device).kernel == "decode"
    assert plan(DECODE_MAX_M + 1, device=device).kernel == expected_kernel(device,
                                                                           DECODE_MAX_M + 1)


def test_a100_never_picks_wgmma_and_refuses_it():
    # sm_80: no wgmma at any M, mma.sync below 192 rows and the dense path from there.
    for m in list(range(1, 300, 7)) + MS:
        for (n, k), (bits, group) in itertools.product(SHAPES, QUANTS):
            got = plan(m, n, k, bits, group, device="a100").kernel
            assert got != "wgmma" and got == expected_kernel("a100", m)
    for schedule in ("kernel=wgmma", "tile_m=64", {"kernel": "wgmma", "tile_m": 256},
                     "kernel=wgmma,splits=2"):
        for m in (1, 17, 256):
            with pytest.raises(ValueError, match=r"kernel=wgmma.*NVIDIA A100.*sm_80"):
                plan(m, device="a100", schedule=schedule)
    # The same for a custom spec without wgmma.
    spec = cute_gemm.device_spec("h100")
    spec.wgmma = False
    spec.name = "no-wgmma H100"
    assert plan(300, device=spec).kernel == "dense"
    with pytest.raises(ValueError, match="no-wgmma H100"):
        plan(300, device=spec, schedule="kernel=wgmma")
    # What an A100 can be asked to run.
    assert plan(1, device="a100", schedule="kernel=mma").kernel == "mma"
    assert plan(300, device="a100", schedule="kernel=mma").kernel == "mma"
    assert plan(17, device="a100", schedule="kernel=dense").kernel == "dense"


@pytest.mark.parametrize("device", DEVICES)
def test_mma_instance_choice(device):
    # M tile: 16 rows up to M=16, 32 up to 32, else 64. Scales every 2 k16 steps ("fine") only for
    # groups shorter than the packed k block (128 INT4, 64 INT8) and shorter than K.
    for m, bits, group, k, tile_m, fine in [
            (1, 4, 128, 4096, 16, False), (16, 4, 32, 4096, 16, True),
            (17, 4, 64, 4096, 32, True), (33, 8, 64, 4096, 64, False),
            (255, 8, 32, 4096, 64, True), (7, 8, -1, 4224, 16, False),
            (1, 4, 32, 32, 16, False), (4096, 4, 64, 4096, 64, True)]:
        p = plan(m, 4096, k, bits, group, device=device, schedule="kernel=mma")
        assert (p.kernel, p.tile_m, p.fine_groups, p.exact_scales) == ("mma", tile_m, fine, True)
        inst = instances()[p.instance]
        assert (inst["tile_m"], inst["fine_groups"]) == (tile_m, fine)
        # One k slice of the tile's warps (these grids take more than 2 splits, or K is short).
        assert p.k_slices == 1 and p.threads == inst["threads"] and p.warps == p.threads // 32
        assert p.col_warps == 0 and p.warp_groups == 0 and p.smem_bytes == inst["smem_bytes"]
        assert p.ctas_per_sm >= 1


def test_wgmma_tiles_and_scales():
    # Exact fp32 scales in INT4's 16- and 32-row tiles at g128 and by schedule in INT8's 32-row
    # tile, rounded weights otherwise and by schedule in INT4's (mixed_gemm's docstring); the
    # 16-row tile for INT4 only; one consumer warpgroup up to 64 rows, two above; each as its
    # instance says.
    for tile_m, groups, scales in ((16, 1, "rounded"), (16, 1, "exact"), (32, 1, "rounded"),
                                   (32, 1, "exact"), (64, 1, "rounded"), (128, 2, "rounded"),
                                   (256, 2, "rounded")):
        for bits, dtype in itertools.product((4, 8), (torch.float16, torch.bfloat16)):
            # the scales taken by default
            default = (scales == "exact") == (tile_m == 16 or tile_m == 32 and bits == 4)
            schedule = f"tile_m={tile_m}" + ("" if default else f",scales={scales}")
            if tile_m == 16 and bits == 8:
                with pytest.raises(ValueError, match="no wgmma instance with tile_m=16"):
                    plan(300, bits=bits, group=128, dtype=dtype, schedule=schedule)
                continue
            p = plan(300, bits=bits, group=128, dtype=dtype, schedule=schedule)
            inst = instances()[p.instance]
            assert (p.kernel, p.tile_m, p.warp_groups) == ("wgmma", tile_m, groups)
            assert p.exact_scales == (scales == "exact") == inst["exact_scales"]
            assert plan(300, bits=bits, group=128, dtype=dtype,
                        schedule=f"tile_m={tile_m},scales={scales}").as_dict() == p.as_dict()
            assert (p.producer, p.threads, p.smem_bytes) == \
                (inst["producer"], inst["threads"], inst["smem_bytes"])
            assert p.col_warps == 0 and p.k_slices == 0 and p.ctas_per_sm >= 1
            assert p.ctas_per_sm * p.smem_bytes <= cute_gemm.device_spec("h100").smem_per_sm
    # Forced, wgmma also takes M <= 8 (INT4 in 16-row token tiles, INT8 in 32).
    assert plan(1, schedule="kernel=wgmma").tile_m == 16
    assert plan(1, bits=8, group=-1, schedule="kernel=wgmma").tile_m == 32
    # scales=exact picks the wgmma kernel and its exact 16-row (INT4, M <= 16) or 32-row tile up
    # to M = 32, and is refused where no tile of that size has exact scales. The exact 16-row
    # tiles have the rounded ones' occupancy, so they take the same columns and splits.
    for m, bits, tile_m in ((5, 4, 16), (16, 4, 16), (17, 4, 32), (5, 8, 32), (32, 8, 32)):
        p = plan(m, bits=bits, group=128, schedule="scales=exact")
        assert (p.kernel, p.tile_m, p.exact_scales) == ("wgmma", tile_m, True), (m, bits)
        if tile_m == 16:
            rounded = plan(m, bits=bits, group=128,
                           schedule="kernel=wgmma,tile_m=16,scales=rounded")
            assert (p.tile_n, p.splits, p.ctas_per_sm) == \
                (rounded.tile_n, rounded.splits, rounded.ctas_per_sm)
    assert plan(16, 4096, 4096, schedule="scales=exact").tile_n == 64
    with pytest.raises(ValueError, match="no wgmma instance with tile_m=64 and exact scales"):
        plan(64, schedule="scales=exact")
    with pytest.raises(ValueError, match="scales applies to the wgmma kernel; this plan runs mma"):
        plan(9, schedule="kernel=mma,scales=exact")


def test_ws_exact_scales_plans():
    # INT8's warp-specialized tiles (64-256 rows) scale exactly by default where K is one group
    # (per-channel): the same tile, grid, splits and stream-K as the rounded tile (same occupancy);
    # rounded by schedule; groups finer than K keep rounded weights, and scales=exact is refused
    # there, as on INT4's warp-specialized tiles (which have no exact instance).
    for device, m, dtype in itertools.product(("h100", "h200"), (33, 64, 65, 129, 200, 384, 640,
                                                                 4096),
                                              (torch.float16, torch.bfloat16)):
        for n, k in ((4096, 4096), (28672, 4096), (4096, 14336), (1000, 1440)):
            p = plan(m, n, k, 8, -1, dtype, device)
            inst = instances()[p.instance]
            assert (p.kernel, p.producer, p.exact_scales) == ("wgmma", True, True), p
            assert inst["exact_scales"] and inst["tile_m"] == p.tile_m >= 64
            rounded = plan(m, n, k, 8, -1, dtype, device, schedule="scales=rounded")
            assert not rounded.exact_scales
            for key in ("tile_m", "tile_n", "grid", "splits", "ctas_per_sm", "stream_k_ctas",
                        "workspace_bytes", "smem_bytes", "threads"):
                assert getattr(rounded, key) == getattr(p, key), (key, m, n, k, p, rounded)
            assert not plan(m, n, k, 8, 128, dtype, device).exact_scales
    assert plan(1000, 4096, 128, 8, 128, device="h100").exact_scales  # one group: all of K
    for tile_m in (64, 128, 160, 192, 256):
        with pytest.raises(ValueError, match=f"scales=exact on the warp-specialized wgmma tiles "
                                             f"\\(tile_m={tile_m}\\) needs one group over K"):
            plan(300, 4096, 4096, 8, 128, schedule=f"tile_m={tile_m},scales=exact")
        with pytest.raises(ValueError, match=f"no wgmma instance with tile_m={tile_m} and exact "
                                             f"scales for INT4"):
            plan(300, 4096, 4096, 4, -1, schedule=f"tile_m={tile_m},scales=exact")


def test_small_m_on_hopper():
    # INT4 at M = 9..16: the 16-row wgmma tile with exact scales where the groups are whole k
    # blocks (g128, per-channel), gated in registers where it runs unsplit; with finer groups
    # (the H100 probe's shapes, NOTES.md session 19) that tile where its K slices are short,
    # mma.sync where they are long. INT8 takes wgmma's 32-row tile.
    wgmma_exact, wgmma_rounded, mma = ("wgmma", 16, True), ("wgmma", 16, False), ("mma", 16, True)
    for m, (n, k), group, want in [
            (16, (4096, 4096), 128, wgmma_exact), (9, (4096, 14336), 32, wgmma_rounded),
            (16, (8192, 28672), 128, wgmma_exact), (16, (8192, 28672), 64, mma),
            (12, (28672, 4096), 128, wgmma_exact), (12, (28672, 4096), -1, wgmma_exact),
            (12, (28672, 4096), 32, mma)]:
        p = plan(m, n, k, group=group)
        assert (p.kernel, p.tile_m, p.exact_scales) == want, (m, n, k, group, p)
    gated = cute_gemm.mixed_plan(16, 28672, 4096, 4, 128, torch.bfloat16, device="h100",
                                 activation="silu_mul")
    assert (gated.kernel, gated.tile_n, gated.splits, gated.via_workspace) == ("wgmma", 128, 1,
                                                                               False)
    assert "SiLU(gate) * up in registers" in gated.describe()
    for m in (9, 16):
        p = plan(m, 8192, 8192, bits=8, group=-1)
        assert (p.kernel, p.tile_m, p.exact_scales) == ("wgmma", 32, False)


def test_int8_exact_scales_by_wave_fill():
    # INT8's 32-row wgmma tile takes exact scales by default where the exact tile's grid (2 CTAs
    # per SM) is one wave and fills its slots better than the rounded tile's (3 per SM); the cases
    # measured on an H200 (NOTES.md, session 76). Groups finer than a k block, grids of more than
    # a wave and a scheduled scales= keep theirs.
    for device, dtype in itertools.product(HOPPER, (torch.float16, torch.bfloat16)):
        for m, n, k, act, want in (
                (16, 4096, 4096, None, (True, 8)), (32, 4096, 4096, None, (True, 8)),
                (24, 28672, 4096, None, (True, 1)), (32, 28672, 4096, "silu_mul", (True, 1)),
                (16, 6144, 4096, None, (False, 8)), (32, 8192, 8192, None, (False, 6)),
                (16, 4096, 14336, None, (False, 12)), (24, 8192, 28672, None, (False, 6)),
                (32, 128256, 4096, None, (False, 1))):  # the exact grid: 1002 CTAs, 4 waves
            p = cute_gemm.mixed_plan(m, n, k, 8, -1, dtype, device=device, activation=act)
            assert (p.kernel, p.tile_m, p.exact_scales, p.splits) == ("wgmma", 32, *want), \
                (device, m, n, k, act, p)
            assert p.exact_scales == int8_exact_fills_better(device, m, n, k, -1, dtype, act)
            for scales in ("exact", "rounded"):
                forced = cute_gemm.mixed_plan(m, n, k, 8, -1, dtype, device=device, activation=act,
                                              schedule=f"scales={scales}")
                assert forced.exact_scales == (scales == "exact")
        # Per group: g64 (whole INT8 k blocks) as per channel, g32 rounded.
        assert cute_gemm.mixed_plan(16, 4096, 4096, 8, 64, device=device).exact_scales
        assert not cute_gemm.mixed_plan(16, 4096, 4096, 8, 32, device=device).exact_scales
    # M = 16 on wide N stays on mma.sync (int8_on_mma_unsplit); the A100 has no wgmma.
    assert cute_gemm.mixed_plan(16, 28672, 4096, 8, -1, device="h200").kernel == "mma"
    assert cute_gemm.mixed_plan(32, 4096, 4096, 8, -1, device="a100").kernel == "mma"


def test_int4_64_row_tile_loads():
    # INT4's 64-row tile runs its cp.async form where M <= 40 and each split runs at least 32 k
    # blocks (long loops: there TMA was 1-6% slower on an H200, NOTES.md session 83), its TMA form
    # elsewhere (kCpAsyncMaxRows, mixed_plan.cpp); loads= forces either, with the same grid.
    for device, dtype in itertools.product(HOPPER, (torch.float16, torch.bfloat16)):
        for m, n, k, tma in ((33, 28672, 4096, False), (40, 28672, 4096, False),
                             (41, 28672, 4096, True), (64, 28672, 4096, True),
                             (33, 8192, 28672, False), (36, 8192, 28672, False),
                             (33, 4096, 4096, True), (40, 6144, 4096, True),
                             (33, 4096, 14336, True), (40, 8192, 8192, True)):
            for activation in (None, "silu_mul"):
                p = cute_gemm.mixed_plan(m, n, k, 4, 128, dtype, device=device,
                                         activation=activation)
                assert (p.kernel, p.tile_m, p.tma_loads) == ("wgmma", 64, tma), \
                    (device, m, n, k, activation, p)
                blocks_per_split = -(-(-(-k // 128)) // p.splits)
                assert tma == (m > 40 or blocks_per_split < 32), (m, n, k, p.splits)
                assert p.instance.endswith("_cp_async") == (not tma)
                for loads in ("tma", "cp_async"):
                    forced = cute_gemm.mixed_plan(m, n, k, 4, 128, dtype, device=device,
                                                  activation=activation,
                                                  schedule=f"loads={loads}")
                    assert forced.tma_loads == (loads == "tma")
                    assert (forced.tile_m, forced.splits, forced.grid, forced.ctas_per_sm) == \
                        (p.tile_m, p.splits, p.grid, p.ctas_per_sm)
    # INT8 fills its 32-row tiles by cp.async and its 64-row (warp-specialized) ones by TMA, so
    # loads= only confirms them; the A100 has no wgmma.
    assert not cute_gemm.mixed_plan(33, 4096, 4096, 4, 128, device="h100",
                                    schedule="loads=cp_async").tma_loads
    assert not cute_gemm.mixed_plan(24, 4096, 4096, 8, -1, device="h100",
                                    schedule="loads=cp_async").tma_loads
    assert cute_gemm.mixed_plan(64, 4096, 4096, 8, -1, device="h100",
                                schedule="loads=tma").producer
    with pytest.raises(ValueError, match="no wgmma instance with tile_m=32.* filled by TMA for "
                                         "INT8"):
        cute_gemm.mixed_plan(24, 4096, 4096, 8, -1, device="h100", schedule="loads=tma")


def test_int8_wide_n_on_mma_sync():
    # INT8 at M = 9..16 on Hopper: wgmma's 32-row tile, but mma.sync's 16-row tile unsplit (gated
    # in registers where gated) where that tile's 128-column tiles alone give the SMs 1.5 CTAs
    # each; the wave model alone would give mma.sync 2 splits there (session 61: bf16 45.6
    # against 37.1 us).
    for device in ("h100", "h200"):
        sms = cute_gemm.device_spec(device).sm_count
        wide = -(-3 * sms // 2) * 128  # the fewest columns that take the rule
        for n, k in ((28672, 4096), (128256, 4096), (28672, 8192), (wide, 640)):
            for m in (9, 12, 16):
                for activation in (None, "silu_mul"):
                    p = cute_gemm.mixed_plan(m, n, k, 8, -1, torch.bfloat16, device=device,
                                             activation=activation)
                    assert (p.kernel, p.tile_m, p.splits) == ("mma", 16, 1), (device, n, m, p)
                    assert p.via_workspace is False
                    if activation:
                        assert "in registers" in p.describe()
                # Scheduled as mma.sync without splits, too; scheduled splits stay.
                assert plan(m, n, k, bits=8, group=-1, device=device,
                            schedule="kernel=mma").splits == 1
                assert plan(m, n, k, bits=8, group=-1, device=device,
                            schedule="kernel=mma,splits=2").splits == 2
        # Fewer columns, down to 0.55 of a 16-row tile per SM: mma.sync in the wave model's
        # splits, ungated (session 62: 13-17% faster than wgmma's split grid at 14336x17024,
        # where unsplit lost 27%); gated, and below 0.55 (N = 8192 on these SMs), wgmma in splits.
        lowest = -(-55 * sms // 100) * 128  # the fewest columns that take the split rule
        for n, k in ((17024, 14336), (10240, 8192), (wide - 128, 640), (lowest, 4096)):
            for m in (9, 16):
                p = plan(m, n, k, bits=8, group=-1, device=device)
                assert (p.kernel, p.tile_m) == ("mma", 16) and p.splits > 1, (device, n, k, m, p)
                gated = cute_gemm.mixed_plan(m, 2 * (n // 2), k, 8, -1, torch.bfloat16,
                                             device=device, activation="silu_mul")
                assert gated.kernel == "wgmma", (device, n, k, m, gated)
        for n, k in ((4096, 4096), (6144, 4096), (4096, 14336), (8192, 28672), (8192, 8192),
                     (lowest - 128, 4096)):
            for m in (9, 16):
                p = plan(m, n, k, bits=8, group=-1, device=device)
                assert (p.kernel, p.tile_m) == ("wgmma", 32) and p.splits > 1, (device, n, k, m)
        # Outside M = 9..16, and INT4, the rule does not apply.
        assert plan(8, 28672, 4096, bits=8, group=-1, device=device).kernel == "decode"
        assert plan(17, 28672, 4096, bits=8, group=-1, device=device).kernel == "wgmma"
        assert plan(4, 28672, 4096, bits=8, group=-1, device=device,
                    schedule="kernel=mma").splits > 1
        assert plan(16, 28672, 4096, group=32, device=device).kernel == "mma"
    # Without wgmma (A100) INT8 keeps mma.sync's wave-filling splits: 200 column tiles on 108 SMs.
    p = plan(16, 25600, 4096, bits=8, group=-1, device="a100")
    assert p.kernel == "mma" and p.splits > 1


# ------------------------------------------------------------------------------- split-K


def test_splits_fill_one_wave():
    checked = set()
    for (device, m, n, k, bits, group, dtype), p in all_default_plans():
        if p.kernel == "dense":
            continue
        spec = cute_gemm.device_spec(device)
        kb = k_blocks(k, bits)
        s = p.splits
        assert 1 <= s <= MAX_SPLITS and p.grid[2] == s
        # No empty split: each gets ceil(k_blocks / splits) k blocks.
        per_split = -(-kb // s)
        assert per_split * (s - 1) < kb, (device, m, n, k, bits, s)
        assert s == 1 or s <= kb // 2  # at least 2 k blocks per split
        tiles = -(-n // p.tile_n)
        m_tiles = -(-m // p.tile_m)
        if p.stream_k_ctas and p.producer:  # full waves, then a stream-K row (test_ws_stream_k_plans)
            c = p.stream_k_ctas
            assert tuple(p.grid) == (c, tiles * m_tiles // c + 1, 1), p
        else:
            assert p.grid[0] == (p.stream_k_ctas or tiles) and p.grid[1] == m_tiles
        assert p.ctas_per_sm >= 1
        base = tiles * m_tiles
        wave = p.ctas_per_sm * spec.sm_count
        if s > 1:
            assert base * s <= wave, (device, m, n, k, bits)  # never past one wave
        if p.kernel == "decode":
            continue  # its splits are a cost trade-off (test_decode_plans)
        if base >= wave:
            assert s == 1
            checked.add("full")
        elif wave // base <= min(MAX_SPLITS, kb // 2):
            # Not capped: close to one wave (the most splits that fit, then lowered by at most a
            # third so that none is empty).
            assert 3 * base * s > wave, (device, m, n, k, bits, s, base, wave)
            checked.add("filled" if s > 1 else "one")
        else:
            checked.add("capped")
    assert checked >= {"full", "filled", "capped"}


def test_reduce_in_cluster():
    # Split-K on INT4's 16-row tile in 64 columns (4 CTAs per SM, the only tile that did so faster
    # on an H200): its splits run as one thread block cluster per output tile and add their sums
    # in distributed shared memory (up to 8 splits: the portable cluster size); reduce=kernel
    # keeps the workspace and the reduce kernel; reduce=cluster is refused where it cannot run,
    # naming the key.
    h100 = cute_gemm.device_spec("h100")
    for device in HOPPER:
        for m, n, k in ((16, 4096, 4096), (9, 4096, 14336), (16, 8192, 8192), (12, 6144, 4096)):
            p = plan(m, n, k, device=device)
            assert (p.kernel, p.tile_m, p.tile_n) == ("wgmma", 16, 64) and 1 < p.splits <= 8, p
            assert p.reduce_in_cluster and not p.via_workspace and p.workspace_bytes == 0, p
            assert "sums added in a cluster of the splits" in str(p)
            pinned = plan(m, n, k, device=device, schedule="reduce=kernel")
            assert {**pinned.as_dict(), "reduce_in_cluster": True, "via_workspace": False,
                    "workspace_bytes": 0} == p.as_dict()
            assert pinned.via_workspace and pinned.workspace_bytes == p.splits * m * n * 4
            assert plan(m, n, k, device=device,
                        schedule="reduce=cluster").as_dict() == p.as_dict()
        # The other tiles split through the workspace.
        for m, bits, group in ((32, 4, 128), (48, 4, 128), (16, 8, -1), (32, 8, -1)):
            p = plan(m, 4096, 4096, bits=bits, group=group, device=device)
            assert p.splits > 1 and p.via_workspace and not p.reduce_in_cluster, p
    # Any split count up to 8, scheduled; 9 and more through the workspace.
    for splits in range(2, 12):  # K = 16384: 128 k blocks, every count stays
        p = plan(16, 4096, 16384, device="h100", schedule=f"tile_m=16,tile_n=64,splits={splits}")
        assert p.reduce_in_cluster == (splits <= 8) and p.via_workspace == (splits > 8), p
        assert tuple(p.grid) == (4096 // 64, 1, splits)
    # Refusals: the kernels and tiles without it, unsplit plans, more than 8 splits, partials.
    for m, schedule in ((16, "kernel=mma,splits=2,reduce=cluster"),
                        (1, "kernel=decode,splits=2,reduce=cluster"),
                        (128, "tile_m=128,splits=2,reduce=cluster"),
                        (16, "tile_m=16,tile_n=128,splits=2,reduce=cluster"),
                        (32, "tile_m=32,splits=2,reduce=cluster"),
                        (64, "tile_m=64,splits=2,reduce=cluster"),
                        (16, "tile_m=16,tile_n=64,splits=1,reduce=cluster"),
                        (16, "tile_m=16,tile_n=64,splits=9,reduce=cluster")):
        with pytest.raises(ValueError, match="reduce=cluster needs split-K"):
            plan(m, 4096, 16384, device="h100", schedule=schedule)
    with pytest.raises(ValueError, match="reduce=cluster needs split-K"):
        cute_gemm.ops._C._mixed_plan(16, 4096, 4096, 4, 128, True, h100, "reduce=cluster", False,
                                     True)
    partials = cute_gemm.ops._C._mixed_plan(16, 4096, 4096, 4, 128, True, h100, "", False, True)
    assert partials.splits > 1 and partials.via_workspace and not partials.reduce_in_cluster
    # Gated: in a cluster on the exact tile (it gates in registers), through the workspace (the
    # reduce kernel gates) with rounded weights.
    for scales, cluster in (("exact", True), ("rounded", False)):
        p = cute_gemm.mixed_plan(16, 4096, 4096, 4, 128, torch.float16, device="h100",
                                 schedule=f"tile_m=16,tile_n=64,splits=4,scales={scales}",
                                 activation="silu_mul")
        assert (p.reduce_in_cluster, p.via_workspace) == (cluster, not cluster), p
    # The schedule's text round-trips; bad values and the dense path are refused.
    assert plan(16, schedule={"reduce": "kernel"}).via_workspace
    with pytest.raises(ValueError, match="reduce must be cluster or kernel; got 'both'"):
        plan(16, schedule="reduce=both")
    with pytest.raises(ValueError, match="reduce applies to the fused kernels"):
        plan(4096, schedule="kernel=dense,reduce=kernel")
    # Only INT4's 16-row tile in 64 columns can (8 splits).
    for inst in instances().values():
        can = inst["kernel"] == "wgmma" and inst["tile_m"] == 16 and inst["tile_n"] == 64
        assert inst["max_cluster_splits"] == (8 if can else 0), inst["name"]


def test_workspace_bytes():
    seen_split = False
    seen_cluster = False
    for (device, m, n, k, bits, group, dtype), p in all_default_plans():
        # Split-K sums meet in a cluster of the splits where the kernel can (the cp.async wgmma
        # kernel, up to 8 splits), through the workspace elsewhere.
        cluster = (p.splits > 1 and p.kernel == "wgmma" and (p.tile_m, p.tile_n) == (16, 64) and
                   p.splits <= 8)
        assert p.reduce_in_cluster == cluster, p
        via = p.splits > 1 and not cluster
        if p.stream_k_ctas:  # its partial sums and flags (test_stream_k_plans, _ws_stream_k_)
            sums = ((256 * p.tile_m // 2, 8) if p.producer else (128 * 16, 4))
            assert not via and p.workspace_bytes == stream_k_bytes(p.stream_k_ctas, *sums), p
            continue
        assert p.workspace_bytes == (p.splits * m * n * 4 if via else 0)
        assert p.via_workspace == via
        assert ("cluster" in str(p)) == cluster, p
        seen_split |= via
        seen_cluster |= cluster
    assert seen_split and seen_cluster
    # Gated: decode and mma.sync's 16-row tile gate in registers and need the workspace only to
    # split K; the other tiles gate in the reduce kernel, through one workspace slice per split.
    # The launchers read plan.via_workspace (the rule is the planner's alone).
    for schedule, m, via in (("kernel=decode,splits=1", 1, False),
                             ("kernel=decode,splits=2", 1, True),
                             ("kernel=mma,splits=1", 16, False), ("kernel=mma,splits=2", 16, True),
                             ("kernel=mma,splits=1", 64, True), ("kernel=mma,splits=3", 64, True),
                             ("kernel=wgmma,tile_m=64,splits=1", 64, True),
                             # the 16-row exact tile gates in registers, its splits in a cluster
                             ("kernel=wgmma,tile_m=16,splits=1", 16, False),
                             ("kernel=wgmma,tile_m=16,tile_n=64,splits=3", 16, False),
                             ("kernel=wgmma,tile_m=16,tile_n=128,splits=3", 16, True),
                             ("kernel=wgmma,tile_m=16,tile_n=64,splits=3,reduce=kernel", 16, True),
                             ("kernel=wgmma,tile_m=64,splits=2", 64, True)):
        p = cute_gemm.mixed_plan(m, 4096, 4096, 4, 128, torch.float16, device="h100",
                                 schedule=schedule, activation="silu_mul")
        assert p.gated and p.via_workspace == via, (schedule, m)
        assert p.workspace_bytes == (p.splits * m * 4096 * 4 if via else 0), (schedule, m)
        assert ("in registers" in p.describe()) == (not via), (schedule, m)
    p = plan(1, 4096, 4096, schedule="kernel=mma,splits=4")
    assert (p.splits, p.workspace_bytes) == (4, 4 * 1 * 4096 * 4)
    p = plan(1, 4096, 4096, schedule="kernel=mma,splits=1")
    assert (p.splits, p.workspace_bytes) == (1, 0)


def stream_k_bytes(ctas, partial_floats=128 * 16, warps=4):
    """stream_k.hpp's stream_k_workspace_bytes: each CTA's partial sums (16-byte aligned), then a
    64-bit flag per CTA and warp."""
    return -(-ctas * partial_floats * 4 // 16) * 16 + ctas * warps * 8


def test_stream_k_plans():
    # By default (kStreamKCostBlocks 6): INT4's 16-row exact tile in 128 columns, unsplit, where
    # its tiles are more than the SMs and at most 1 - 6 / k_blocks of the resident slots (2 per
    # SM): one CTA per slot, the workspace for their partial sums and flags. Llama-2-7B's gate/up
    # (4096 -> 2 x 11008: 172 tiles) and a 4096x20480 projection (160), M = 9-16, either dtype,
    # H100 and H200.
    for device, dtype, m, (n, act) in itertools.product(
            ("h100", "h200"), (torch.float16, torch.bfloat16), (9, 16),
            ((22016, "silu_mul"), (20480, None))):
        p = cute_gemm.mixed_plan(m, n, 4096, 4, 128, dtype, device=device, activation=act)
        assert (p.kernel, p.tile_m, p.tile_n, p.splits) == ("wgmma", 16, 128, 1), p
        assert p.stream_k_ctas == 264 and tuple(p.grid) == (264, 1, 1), p
        assert p.workspace_bytes == stream_k_bytes(264) and not p.via_workspace, p
        assert "stream-K over 264 CTAs" in str(p) and p.as_dict()["stream_k_ctas"] == 264
        assert p.gated == (act is not None)
        assert ("in registers" in str(p)) == (act is not None)
        off = cute_gemm.mixed_plan(m, n, 4096, 4, 128, dtype, device=device, activation=act,
                                   schedule="stream_k=off")
        assert off.stream_k_ctas == 0 and tuple(off.grid) == (n // 128, 1, 1), off
        assert off.workspace_bytes == 0 and "stream-K" not in str(off)
    # The fill limit follows K: at K = 4096 (32 k blocks) 214 of 264 tiles, not 215 nor
    # Llama-3-8B's gate/up (224); at K = 8192 (64) 224 tiles, at K = 14336 192.
    for n, k, act, expect in ((214 * 128, 4096, None, 264), (215 * 128, 4096, None, 0),
                              (28672, 4096, "silu_mul", 0), (28672, 4096, None, 0),
                              (28672, 8192, None, 264), (24576, 14336, None, 264),
                              (239 * 128, 8192, None, 264), (240 * 128, 8192, None, 0)):
        p = cute_gemm.mixed_plan(16, n, k, 4, 128, torch.bfloat16, device="h200", activation=act)
        assert p.stream_k_ctas == expect, (n, k, act, p)
    # Not by default: at most the SMs (16384: 128 tiles, split instead), 32 rows, groups finer
    # than a k block, INT8, and schedules that fix the splits.
    for m, n, bits, group, schedule in ((16, 16384, 4, 128, None), (32, 20480, 4, 128, None),
                                        (16, 20480, 4, 32, None), (16, 20480, 8, -1, None),
                                        (16, 20480, 4, 128, "splits=1")):
        p = cute_gemm.mixed_plan(m, n, 4096, bits, group, torch.bfloat16, device="h200",
                                 schedule=schedule)
        assert p.stream_k_ctas == 0, (m, n, bits, group, schedule, p)
    # A schedule's CTAs: from the tiles to the tiles' k blocks, on the tile that can.
    for ctas in (224, 250, 300, 224 * 32):
        p = cute_gemm.mixed_plan(16, 28672, 4096, 4, 128, torch.float16, device="h100",
                                 schedule=f"stream_k={ctas}")
        assert (p.stream_k_ctas, p.grid[0], p.workspace_bytes) == (ctas, ctas,
                                                                   stream_k_bytes(ctas)), p
    p = cute_gemm.mixed_plan(16, 4096, 4096, 4, 128, torch.float16, device="h100",
                             schedule="tile_n=128,splits=1,stream_k=40")
    assert (p.tile_n, p.stream_k_ctas, tuple(p.grid)) == (128, 40, (40, 1, 1)), p
    for m, n, group, schedule in ((16, 28672, 128, "stream_k=223"),
                                  (16, 28672, 128, f"stream_k={224 * 32 + 1}"),
                                  (32, 28672, 128, "stream_k=264"),
                                  (16, 28672, 32, "stream_k=264"),
                                  (16, 28672, 128, "splits=2,stream_k=264"),
                                  (16, 28672, 128, "tile_n=64,stream_k=500"),
                                  (1, 28672, 128, "stream_k=264")):
        with pytest.raises(ValueError, match=r"stream_k=\d+ needs INT4's 16-row wgmma tile in 128"):
            cute_gemm.mixed_plan(m, n, 4096, 4, group, torch.float16, device="h100",
                                 schedule=schedule)
    with pytest.raises(ValueError, match="stream_k must be"):
        cute_gemm.mixed_plan(16, 28672, 4096, device="h100", schedule="stream_k=0")
    with pytest.raises(ValueError, match="stream_k must be"):
        cute_gemm.mixed_plan(16, 28672, 4096, device="h100", schedule="stream_k=all")
    # Only INT4's 16-row exact tile in 128 columns can, handing 128 threads x 16 sums over.
    # INT4's 16-row exact tile in 128 columns hands 128 threads x 16 sums over; the warp-
    # specialized tiles (test_ws_stream_k_plans) 256 threads x tile_m / 2.
    for inst in instances().values():
        can = (inst["kernel"] == "wgmma" and inst["tile_m"] == 16 and inst["tile_n"] == 128 and
               inst["exact_scales"] and inst["bits"] == 4)
        floats = 256 * inst["tile_m"] // 2 if inst["kernel"] == "wgmma" and inst["producer"] else 0
        assert inst["stream_k_partial_floats"] == (128 * 16 if can else floats), inst["name"]


def test_ws_stream_k_plans():
    # The warp-specialized tiles (M >= 128 on Hopper) run full waves of one CTA per SM on whole
    # tiles and share the tiles past them as stream-K work of one CTA per SM, where those tiles
    # fill at most 1 - 512 / K of the SMs (kWsStreamKCostK): grid (132, full waves + 1).
    h200 = cute_gemm.device_spec("h200")
    assert h200.sm_count == 132
    for device, dtype in itertools.product(HOPPER, (torch.float16, torch.bfloat16)):
        # 4096x28672 at M = 512 (INT4: the 256-row tile, 448 tiles = 3 x 132 + 52).
        p = cute_gemm.mixed_plan(512, 28672, 4096, 4, 128, dtype, device=device)
        assert p.producer and (p.tile_m, p.splits) == (256, 1), p
        assert p.stream_k_ctas == 132 and tuple(p.grid) == (132, 4, 1), p
        assert p.workspace_bytes == stream_k_bytes(132, 256 * 128, 8) and not p.via_workspace, p
        assert "3 full waves of 132 tiles, then stream-K over 132 CTAs" in str(p), p
        off = cute_gemm.mixed_plan(512, 28672, 4096, 4, 128, dtype, device=device,
                                   schedule="stream_k=off")
        assert off.stream_k_ctas == 0 and tuple(off.grid) == (224, 2, 1), off
        assert off.workspace_bytes == 0 and "stream-K" not in str(off)
    # By default only past a full wave, and where the tiles past the full waves fill at most half
    # of the 132 slots (kWsStreamKMaxFill). INT4, the 256-row tile: M = 1024 (4 M tiles) x 49 / 50
    # column tiles: tails of 64 (yes) and 68 (no); 4096x28672 at M = 768 (672 tiles, a tail of 12)
    # and 4096x22016 at M = 1024 (688, 28): yes; whole waves (M = 1024 x 33 column tiles), one
    # partial wave (M = 512 x 60) and a tail of 72 (M = 768, N = 14336): no.
    for m, n, k, sched, expect in ((1024, 49 * 128, 4096, "tile_m=256", 132),
                                   (1024, 50 * 128, 4096, "tile_m=256", 0),
                                   (768, 28672, 4096, None, 132), (1024, 22016, 4096, None, 132),
                                   (1024, 33 * 128, 4096, None, 0), (512, 60 * 128, 8192, None, 0),
                                   (768, 14336, 4096, None, 0)):
        p = cute_gemm.mixed_plan(m, n, k, 4, 128, torch.float16, device="h200", schedule=sched)
        assert p.producer and p.splits == 1 and p.tile_m == 256, (m, n, k, p)
        assert p.stream_k_ctas == expect, (m, n, k, p)
    # A schedule's CTAs: any count that leaves tiles past the full waves with a k block per CTA.
    for ctas in (100, 131, 300, 448 * 32 - 1):
        p = cute_gemm.mixed_plan(512, 28672, 4096, 4, 128, torch.float16, device="h100",
                                 schedule=f"stream_k={ctas}")
        tail = 448 % ctas
        assert (p.stream_k_ctas, tuple(p.grid)) == (ctas, (ctas, 448 // ctas + 1, 1)), p
        assert p.workspace_bytes == stream_k_bytes(ctas, 256 * 128, 8), p
        assert ctas <= tail * 32
    # Refused: whole waves (no tiles past them), more CTAs than the tail's k blocks, split-K,
    # gated (these tiles gate in the reduce kernel) and partial sums.
    for schedule, act in (("stream_k=112", None), ("stream_k=64", None),
                          (f"stream_k={448 * 32 + 1}", None),
                          ("splits=2,stream_k=132", None), ("stream_k=132", "silu_mul")):
        with pytest.raises(ValueError, match=r"stream_k=\d+ on a warp-specialized wgmma tile"):
            cute_gemm.mixed_plan(512, 28672, 4096, 4, 128, torch.float16, device="h100",
                                 schedule=schedule, activation=act)


def test_scheduled_splits_lowered_so_none_is_empty():
    # 4096 / 128 = 32 k blocks (INT4), 4224 / 64 = 66 (INT8).
    for kernel, m in (("decode", 1), ("mma", 16), ("wgmma", 64)):
        for bits, k in ((4, 4096), (8, 4224)):
            kb = k_blocks(k, bits)
            for splits in (1, 2, 3, 5, 7, 33, 64):
                p = plan(m, 4096, k, bits, 128 if bits == 4 else -1,
                         schedule=f"kernel={kernel},splits={splits}")
                per_split = -(-kb // min(splits, kb))
                assert p.kernel == kernel and p.splits == -(-kb // per_split), (kernel, splits)
                assert p.splits <= splits and per_split * (p.splits - 1) < kb
    # 40 splits of 32 k blocks: 32, one k block each, so the decode CTAs have one warp.
    p = plan(1, 4096, 4096, schedule="splits=40")
    assert (p.kernel, p.splits, p.warps, p.col_warps) == ("decode", 32, 1, 1)
    # 5 splits of at most 7 k blocks: at most 7 k slices (of 1 warp at M=1) per CTA.
    p = plan(1, 4096, 4096, schedule="splits=5")
    assert p.splits == 5 and 1 <= p.warps <= 7


def rows_per_sm(m, n, p, device):
    """Rows each SM computes in plan p's grid, in units of the whole K (mixed_plan.cpp's
    rows_per_sm): its waves of resident CTAs times the token tile, over its k splits."""
    ctas = -(-n // p.tile_n) * -(-m // p.tile_m) * p.splits
    resident = p.ctas_per_sm * cute_gemm.device_spec(device).sm_count
    return -(-ctas // resident) * p.tile_m / p.splits


@pytest.mark.parametrize("device", HOPPER)
def test_wide_wgmma_tile_fits_the_grid(device):
    # From M = 129: 256 rows, then down through 192, 160 and 128, each tile replaces the choice so
    # far where it computes no more rows per SM in as many M tiles, or at most ROWS_SHARE of them
    # in more; then 128 where the choice splits K into short slices and 128 rows pad M no further.
    outcomes = set()
    for m, (n, k), (bits, group) in itertools.product(
            [129, 144, 160, 176, 192, 256, 257, 300, 320, 384, 448, 512, 640, 768, 1024, 4096],
            SHAPES + [(14336, 4096), (8192, 8192)], QUANTS):
        p = plan(m, n, k, bits, group, device=device)
        assert p.kernel == "wgmma"
        tiles = {t: plan(m, n, k, bits, group, device=device, schedule=f"tile_m={t}")
                 for t in (128, 160, 192, 256)}
        for t, forced in tiles.items():
            assert forced.tile_m == t  # a scheduled tile is never changed
        rows = {t: rows_per_sm(m, n, forced, device) for t, forced in tiles.items()}
        want = 256
        for t in (192, 160, 128):
            share = 1.0 if -(-m // t) == -(-m // want) else ROWS_SHARE
            if rows[t] <= share * rows[want]:
                want = t
        slice_k = -(-k_blocks(k, bits) // tiles[want].splits) * block_k(bits)
        if slice_k <= SHORT_SPLIT_K and -(-m // 128) * 128 <= -(-m // want) * want:
            want = 128
        assert p.tile_m == want, (m, n, k, bits, rows)
        assert p.as_dict() == tiles[want].as_dict()
        outcomes.add(want)
    assert outcomes == {128, 160, 192, 256}  # every side of the rule is exercised
    # 8192² M = 320: one wave of 256, 192 or 160 rows (2 M tiles each); 128 rows take 2 waves.
    assert plan(320, 8192, 8192, device=device).tile_m == 160
    # M = 384: 2 tiles of 192 rows; 160 rows need 3 (2 waves on 8192², 320 rows per SM).
    assert plan(384, 8192, 8192, device=device).tile_m == 192
    # 4096x14336 M = 384: 2 waves of 256 rows vs 3 of 128 (384 rows, 0.75) vs 2 of 192 (384).
    assert plan(384, 14336, 4096, device=device).tile_m == 192
    # 4096x28672 M = 640: 7 waves of 160 rows (1120) vs 6 of 256 (1536, 0.73).
    assert plan(640, 28672, 4096, device=device).tile_m == 160
    # M = 512 on 4096x28672: 4 waves of 256 rows (1024) vs 7 of 128 (896, 0.875): 256 rows.
    assert plan(512, 28672, 4096, device=device).tile_m == 256


def raster_bytes(m, n, k, bits, group, p, device, g):
    """mixed_plan.cpp's raster_rows model: the DRAM bytes of plan p's grid when a wave of resident
    CTAs in groups of g M tiles (g = 1: row-major) reads each operand tile it covers once."""
    tiles_n, tiles_m = -(-n // p.tile_n), -(-m // p.tile_m)  # (a stream-K grid has other rows)
    wave = p.ctas_per_sm * cute_gemm.device_spec(device).sm_count
    group = k if group == -1 else group
    weight = n * k * bits / 8 + n * -(-k // group) * 2
    act = m * k * 2
    rows, cols = (wave / tiles_n, wave) if g == 1 else (g, wave / g)
    rows, cols = min(max(rows, 1.0), tiles_m), min(max(cols, 1.0), tiles_n)
    return weight * tiles_m / rows + act * tiles_n / cols


@pytest.mark.parametrize("device", HOPPER)
def test_raster_group_cuts_dram_bytes(device):
    # The warp-specialized kernel takes its tiles in groups of raster_m M tiles where that models
    # at most RASTER_BYTES_SHARE of row-major's DRAM bytes: the smallest of 2, 4, 8, 16 (no more
    # than the M tiles) with the fewest. Other kernels and one-M-tile grids: row-major (1).
    outcomes = set()
    for m, (n, k), (bits, group) in itertools.product(
            [16, 64, 200, 256, 320, 512, 640, 1024, 2048, 4096, 8192],
            SHAPES + [(28672, 4096), (14336, 4096), (128256, 4096), (8192, 8192), (4096, 14336)],
            QUANTS):
        p = plan(m, n, k, bits, group, device=device)
        if p.kernel != "wgmma" or not p.producer or -(-m // p.tile_m) < 2:
            assert p.raster_m == 1, (m, n, k, bits)
            continue
        row_major = raster_bytes(m, n, k, bits, group, p, device, 1)
        want, best = 1, row_major
        for g in (2, 4, 8, 16):
            if g <= -(-m // p.tile_m) and raster_bytes(m, n, k, bits, group, p, device, g) < best:
                want, best = g, raster_bytes(m, n, k, bits, group, p, device, g)
        if best > RASTER_BYTES_SHARE * row_major:
            want = 1
        assert p.raster_m == want, (m, n, k, bits, group)
        outcomes.add(want)
        # The order changes nothing else in the plan.
        forced = plan(m, n, k, bits, group, device=device, schedule="raster_m=1")
        assert {**forced.as_dict(), "raster_m": p.raster_m} == p.as_dict()
    assert 1 in outcomes and len(outcomes) >= 3  # both sides of the rule, several group sizes
    # Llama-3's fused gate/up (N = 28672 in 224 tiles of 128, more than a wave of 132): the
    # weights would stream from DRAM once per M tile.
    assert plan(4096, 28672, 4096, 8, -1, device=device).raster_m == 8
    assert plan(512, 28672, 4096, 4, 128, device=device).raster_m == 2
    # 4096²: two M tiles' worth of N tiles per wave already share the weights.
    assert plan(4096, 4096, 4096, 4, 128, device=device).raster_m == 1
    # A schedule's raster_m is kept as given, even past the grid's M tiles.
    assert plan(4096, 4096, 4096, device=device, schedule="raster_m=64").raster_m == 64
    assert "in groups of 8 M tiles" in str(plan(4096, 28672, 4096, 8, -1, device=device))


def test_fewer_sms_fewer_splits():
    # A custom spec: the same GPU with fewer SMs has a smaller wave, so no more splits, and with
    # more SMs no fewer; a decode-sized problem with a small grid gets more splits on more SMs.
    def spec(sm_count, base="h100"):
        d = cute_gemm.device_spec(base)
        d.sm_count = sm_count
        d.name = f"{base} with {sm_count} SMs"
        return d

    grew = shrank = False
    for base, m, (n, k), (bits, group) in itertools.product(
            ("h100", "a100"), (9, 16, 33, 64, 128), SHAPES, QUANTS[:2]):
        counts = [plan(m, n, k, bits, group, device=spec(sms, base)).splits
                  for sms in (16, 66, 132, 264)]
        assert counts == sorted(counts), (base, m, n, k, counts)
        grew |= counts[-1] > counts[2]
        shrank |= counts[0] < counts[2]
    assert grew and shrank
    p_small = plan(16, 512, 8192, device=spec(16), schedule="kernel=mma")
    p_big = plan(16, 512, 8192, device=spec(264), schedule="kernel=mma")
    assert p_small.splits < p_big.splits
    assert p_small.kernel == p_big.kernel == "mma"
    # INT4 at M <= 16 on Hopper with groups shorter than a k block: fewer SMs, fewer splits,
    # longer K slices: mma.sync, not wgmma's 16-row tile (which g128 takes either way).
    assert (plan(16, 4096, 8192, group=32, device=spec(16)).kernel,
            plan(16, 4096, 8192, group=32, device=spec(264)).kernel) == ("mma", "wgmma")
    assert (plan(16, 4096, 8192, device=spec(16)).kernel,
            plan(16, 4096, 8192, device=spec(264)).kernel) == ("wgmma", "wgmma")
    # The built-in spec and a copy of it plan alike.
    assert plan(16, device=spec(132)).as_dict() == plan(16).as_dict()


def test_custom_device_spec_validation():
    empty = cute_gemm.DeviceSpec()
    assert empty.sm_count == 0 and not empty.wgmma
    with pytest.raises(ValueError, match="lacks its SM count or shared memory"):
        plan(1, device=empty)
    d = cute_gemm.DeviceSpec()
    d.name, d.sm_count, d.smem_per_sm, d.smem_per_block_optin = "tiny", 4, 100 * 1024, 99 * 1024
    d.cc_major = 8
    for m in (1, 8, 9, 100, 191, 192):
        assert plan(m, device=d).kernel == expected_kernel("a100", m)
    # A CTA of 2 k slices needs twice a slice's shared memory: refused where it does not fit.
    one = plan(16, device=d, schedule="kernel=mma")
    assert one.k_slices == 1 and one.ctas_per_sm >= 1
    two = instances()[one.instance]["sliced_smem_bytes"]
    with pytest.raises(ValueError, match=f"schedule: k_slices=2 does not fit device 'tiny' "
                                         f"\\({two} B of shared memory per CTA\\)"):
        plan(16, device=d, schedule="kernel=mma,k_slices=2")


# --------------------------------------------------------------------------------- decode


@pytest.mark.parametrize("device", DEVICES)
def test_decode_plans(device):
    spec = cute_gemm.device_spec(device)
    for m, (n, k), (bits, group) in itertools.product(range(1, 9), SHAPES, QUANTS):
        p = plan(m, n, k, bits, group, device=device)
        assert (p.kernel, p.tile_m) == ("decode", 8)
        assert p.col_warps in (1, 2, 4) and p.warps % p.col_warps == 0
        assert p.k_slices * p.col_warps == p.warps and 1 <= p.warps <= 16
        assert p.threads == 32 * p.warps and p.tile_n == 32 * p.col_warps
        assert p.exact_scales and p.warp_groups == 0
        assert p.fine_groups == (0 < group < k and group < block_k(bits))
        assert 0 < p.smem_bytes <= spec.smem_per_block_optin and p.ctas_per_sm >= 1
        if m < 5:
            assert p.col_warps == 1  # k slices share the activations only from M = 5
        # Each k slice takes at least 2 k blocks of the split (or the one there is).
        assert p.k_slices <= max(1, k_blocks(k, bits) // p.splits // 2)
        # A split-K grid only where it pays: each split keeps K >= 8192, or no unsplit grid has
        # CTAs for half the SMs.
        if p.splits > 1:
            unsplit_ctas = -(-n // 32)  # 32-column k slices: the grid with the most CTAs
            assert k // p.splits >= 8192 or 2 * unsplit_ctas < spec.sm_count, (m, n, k, p)


@pytest.mark.parametrize("device", DEVICES)
def test_decode_many_waves_takes_4_warp_ctas(device):
    # A vocabulary-sized N is more than one wave even in 1-warp CTAs: 1-warp k slices come 4 to a
    # CTA (each >= 4 k blocks), where the busiest-wave rule would pick 1-warp CTAs. N just
    # inside one wave keeps that rule's choice.
    spec = cute_gemm.device_spec(device)
    for bits, group in QUANTS:
        for m in (1, 4):
            for n, k in ((128256, 4096), (151936, 3584), (128256, 2048)):
                p = plan(m, n, k, bits, group, device=device)
                blocks = k_blocks(k, bits)
                assert (p.kernel, p.col_warps, p.splits) == ("decode", 1, 1), p
                assert p.k_slices == min(4, blocks // 4) and p.warps == p.k_slices, (
                    m, n, k, bits, p)
                assert p.grid[0] == -(-n // 32)
            n = 32 * spec.sm_count  # one 1-warp CTA per SM: one wave
            assert plan(m, n, 4096, bits, group, device=device).warps > 1


@pytest.mark.parametrize("device", DEVICES)
def test_decode_int4_short_slices_lengthened_past_one_cta_per_sm(device):
    # INT4 at M <= 2 in a grid of more 1-warp-slice CTAs than SMs: where the busiest wave would
    # cut the k slices shorter than 5 k blocks, they get 8 (q/k/v 4096x6144 on an H100: 4 warps,
    # not 8). INT8, M >= 3 and grids of at most one CTA per SM keep the busiest wave's choice.
    spec = cute_gemm.device_spec(device)
    sms = spec.sm_count
    shapes = ((6144, 4096), (5120, 5120), (8192, 8192), (12288, 4096), (28672, 4096),
              (8192, 28672), (32 * sms + 32, 4096), (64 * sms, 8192))
    for (n, k), m in itertools.product(shapes, (1, 2)):
        p = plan(m, n, k, 4, 128, device=device)
        assert p.kernel == "decode" and -(-n // 32) > sms, (m, n, k, p)
        if p.col_warps == 1 and p.splits == 1:
            assert k_blocks(k, 4) >= 5 * p.k_slices, (m, n, k, p)
    if device == "h100":
        assert plan(1, 6144, 4096, 4, 128, device=device).warps == 4
        assert plan(2, 6144, 4096, 4, 128, device=device).warps == 4
        assert plan(3, 6144, 4096, 4, 128, device=device).warps > 4
        assert plan(1, 6144, 4096, 8, -1, device=device).warps > 4
        assert plan(1, 12288, 4096, 4, 128, device=device).warps == 5  # 6.4 blocks: kept
    assert plan(1, 32 * sms, 4096, 4, 128, device=device).warps > 4  # one CTA per SM


@pytest.mark.parametrize("device", DEVICES)
def test_decode_on_hopper_takes_4_warp_ctas(device):
    # On Hopper a decode grid of 1-warp k slices in CTAs of fewer than 4 takes CTAs of 4 (each
    # warp half the k blocks) where they make one to two waves (kSlicedCtaWarps): INT8 at M <= 4,
    # gated or not, and gated bf16 INT4 at M <= 2. Measured on an H200 for 4096x28672 (NOTES.md,
    # sessions 52 and 74); fp16 INT4, INT4 from M = 3, ungated INT4, scheduled CTAs and the A100
    # keep their plans.
    spec = cute_gemm.device_spec(device)
    hopper = device in HOPPER
    wave = 4 * spec.sm_count  # 4-warp CTAs per wave at these shapes (4 per SM)

    def gated(m, n, k, bits, group, dtype, schedule=None):
        return cute_gemm.mixed_plan(m, n, k, bits, group, dtype, device=device, schedule=schedule,
                                    activation="silu_mul")

    for (n, k), (bits, group), dtype, m in itertools.product(
            ((28672, 4096), (17408, 1152), (22016, 4096)), ((4, 128), (8, -1), (8, 64)),
            (torch.bfloat16, torch.float16), (1, 2, 3, 4)):
        p = gated(m, n, k, bits, group, dtype)
        ruled = hopper and (bits == 8 or (dtype == torch.bfloat16 and m <= 2))
        assert wave <= p.grid[0] <= 2 * wave or not hopper, (n, p)
        if ruled:
            assert (p.kernel, p.warps, p.col_warps, p.splits, p.ctas_per_sm) == (
                "decode", 4, 1, 1, 4), (device, m, n, k, bits, dtype, p)
            assert p.early_dependents  # 4 CTAs per SM: the grid fills every slot of a wave
        else:
            assert p.kernel == "decode" and p.warps != 4 or not hopper, (device, m, n, bits, p)
        # Ungated, INT8 takes the same CTAs on Hopper; INT4 keeps the busiest wave's plan.
        plain = cute_gemm.mixed_plan(m, n, k, bits, group, dtype, device=device)
        if hopper and bits == 8:
            assert (plain.kernel, plain.warps, plain.col_warps, plain.splits,
                    plain.ctas_per_sm) == ("decode", 4, 1, 1, 4), (device, m, n, k, plain)
        else:
            assert plain.warps < 4 or plain.splits > 1 or plain.col_warps > 1, (device, m, n,
                                                                               plain)
        # Scheduled warps are taken as they come.
        assert gated(m, n, k, bits, group, dtype, schedule="warps=2").warps == 2
        assert cute_gemm.mixed_plan(m, n, k, bits, group, dtype, device=device,
                                    schedule="warps=2").warps == 2
    if hopper:
        # Fewer CTAs than a wave of 4-warp CTAs (11264x2048: 352), or more than two waves
        # (40960x4096: 1280 of 1056), are not the rule's; nor fp16 INT4 (measured slower).
        for n, k, bits, group in ((11264, 2048, 4, 128), (40960, 4096, 4, 128),
                                  (40960, 4096, 8, -1)):
            p = gated(1, n, k, bits, group, torch.bfloat16)
            assert p.warps != 4 and p.ctas_per_sm != 4, (n, k, bits, p)
            if bits == 8:
                p = cute_gemm.mixed_plan(1, n, k, bits, group, torch.bfloat16, device=device)
                assert p.warps != 4 and p.ctas_per_sm != 4, (n, k, bits, p)
        # INT8 from M = 5 is not the rule's.
        assert cute_gemm.mixed_plan(5, 28672, 4096, 8, -1, torch.bfloat16, device=device).warps != 4
        assert gated(1, 28672, 4096, 4, 128, torch.float16).warps == 2


@pytest.mark.parametrize("device", DEVICES)
def test_decode_on_hopper_fills_sms(device):
    # On Hopper an unscheduled, unsplit decode plan is reshaped (kWideToSlicedWarps,
    # kSlicedCapWarps; H200 measurements in NOTES.md, session 75): from M = 5, 2- or 4-warp-wide
    # CTAs that leave more than a tenth of the SMs idle, where 1-warp-wide CTAs number one to 1.5
    # per SM, become CTAs of 4 one-warp k slices; 1-warp-wide CTAs, one per SM, keep 8 k slices at
    # most where CTAs of 8 stay one per SM (INT4 only where they leave at most a tenth of the SMs
    # idle).
    spec = cute_gemm.device_spec(device)
    hopper = device in HOPPER
    sms = spec.sm_count
    for (bits, group), dtype, act, m in itertools.product(
            ((4, 128), (8, -1), (8, 64)), (torch.bfloat16, torch.float16), (None, "silu_mul"),
            (5, 6, 7, 8)):
        def plan(n, k, schedule=None):
            return cute_gemm.mixed_plan(m, n, k, bits, group, dtype, device=device,
                                        schedule=schedule, activation=act)
        for n, k in ((4608, 1664), (6144, 4096), (5120, 5120), (6144, 2048)):
            p = plan(n, k)
            assert p.kernel == "decode" and p.splits == 1, p
            if hopper:
                assert sms <= n // 32 <= 1.5 * sms
                assert (p.warps, p.col_warps, p.k_slices) == (4, 1, 4), (device, m, n, k, p)
                assert p.grid[0] == n // 32 and p.ctas_per_sm >= 2, p
                # The planner's busiest wave without the rule: wide CTAs with idle SMs.
                wide = plan(n, k, schedule="kernel=decode,col_warps=2")
                assert wide.col_warps == 2 and wide.grid[0] < 0.9 * sms, wide
            else:
                assert (p.warps, p.col_warps) != (4, 1), (device, m, n, k, p)  # not the rule's
        for n, k in ((4096, 4224), (4096, 14336), (3072, 3072)):
            p = plan(n, k)
            assert p.kernel == "decode" and p.splits == 1, p
            capped = hopper and (bits == 8 or n // 32 >= 0.9 * sms)  # INT4 3072²: 96 CTAs
            if capped:
                assert (p.warps, p.col_warps, p.ctas_per_sm) == (8, 1, 1), (device, m, n, k, p)
            elif hopper:
                assert p.col_warps == 1 and p.warps > 8, (device, m, n, k, p)
            # Without the cap more slices fit (the busiest wave took them).
            assert plan(n, k, schedule="kernel=decode,col_warps=1").warps > 8 or not hopper
        # Where wide CTAs keep nearly every SM busy (8192²: 128 CTAs), or 1-warp-wide CTAs
        # would be more than 1.5 per SM (7168: 224; 4096x14336: 448), the plan stays.
        for n, k in ((8192, 8192), (7168, 5120), (14336, 4096)):
            p = plan(n, k)
            assert p.col_warps > 1 and p.warps >= 12 or not hopper, (device, m, n, k, p)
        # Scheduled plans are taken as they come.
        p = plan(6144, 4096, schedule="kernel=decode,warps=8,col_warps=2")
        assert (p.warps, p.col_warps) == (8, 2), p
    # Below 5 rows (1-warp-wide CTAs only) the cap holds where CTAs of 8 warps stay one per SM:
    # INT4 at M = 3-4, not M = 1-2 nor INT8 (two fit).
    for (bits, group), m, dtype, act in itertools.product(
            ((4, 128), (8, -1)), (1, 2, 3, 4), (torch.bfloat16, torch.float16),
            (None, "silu_mul")):
        for n, k in ((4096, 4224), (4096, 14336)):
            p = cute_gemm.mixed_plan(m, n, k, bits, group, dtype, device=device, activation=act)
            eight = cute_gemm.mixed_plan(m, n, k, bits, group, dtype, device=device,
                                         activation=act, schedule="kernel=decode,warps=8")
            assert p.kernel == "decode" and p.col_warps == 1 and p.splits == 1, p
            if hopper and bits == 4 and m >= 3:
                assert (p.warps, p.ctas_per_sm) == (8, 1) == (eight.warps, eight.ctas_per_sm), p
            else:
                assert p.warps > 8 or not hopper, (device, m, n, k, bits, p)
                assert eight.ctas_per_sm >= 2 or not hopper, eight


@pytest.mark.parametrize("device", DEVICES)
def test_decode_few_columns_on_hopper(device):
    # On Hopper an ungated decode grid of few columns (N / 32 CTAs at most a quarter of the SMs)
    # runs the splits that make one CTA per SM, in CTAs of 8 one-warp k slices, fewer where a
    # split has under 2 k blocks a slice, INT4 only where that leaves 3 or more (kFewColumns*;
    # NOTES.md, session 75). Partial sums, gated GEMMs, schedules and the A100 keep the busiest
    # wave's plan.
    spec = cute_gemm.device_spec(device)
    hopper = device in HOPPER
    sms = spec.sm_count
    for (bits, group), m, (n, k) in itertools.product(
            ((4, 128), (8, -1), (4, 32)), range(1, 9),
            ((512, 4096), (1024, 14336), (768, 3584), (256, 2048), (1056, 8192), (64, 4096))):
        p = cute_gemm.mixed_plan(m, n, k, bits, group, torch.bfloat16, device=device)
        assert p.kernel == "decode", p
        narrow = n // 32
        blocks = k_blocks(k, bits)
        want_splits = min(sms // narrow, blocks // 2, 64)
        per_split = -(-blocks // want_splits)
        want_splits = -(-blocks // per_split)  # none empty
        want_warps = max(1, min(8, per_split // 2))
        if hopper and (bits == 8 or want_warps >= 3):
            assert narrow * 4 <= sms
            assert (p.col_warps, p.splits, p.warps) == (1, want_splits, want_warps), (
                device, m, n, k, bits, p)
            assert p.grid[0] * p.grid[2] <= sms, p
        elif hopper:  # INT4 in 1-2 warps: the busiest wave's plan (1-2 splits of 8-16 warps)
            assert p.warps > want_warps and p.splits < want_splits, (device, m, n, k, bits, p)
        # Not a scheduled shape (gated GEMMs and partial sums keep their plans too).
        forced = cute_gemm.mixed_plan(m, n, k, bits, group, torch.bfloat16, device=device,
                                      schedule="kernel=decode,splits=1")
        assert forced.splits == 1, forced
    # 2048 columns (64 CTAs, half the SMs) keep the busiest wave's plan.
    if hopper:
        p = cute_gemm.mixed_plan(4, 2048, 14336, 8, -1, torch.bfloat16, device=device)
        assert (p.warps, p.splits) == (16, 2), p


def early_by_rule(p, sm_count):
    """mixed_plan.cpp's plan_trigger without a schedule: decode grids that take at least
    EARLY_DEPENDENTS_FILL of the resident CTA slots, and gated 16-row wgmma grids (gating in the
    kernel), unsplit and not stream-K, of fewer CTAs than slots."""
    ctas = p.grid[0] * p.grid[1] * p.grid[2]
    slots = p.ctas_per_sm * sm_count
    if p.kernel == "decode":
        return ctas >= EARLY_DEPENDENTS_FILL * slots
    return (EARLY_DEPENDENTS_GATED16 and p.kernel == "wgmma" and not p.producer and p.gated and
            not p.via_workspace and p.tile_m == 16 and p.splits == 1 and p.stream_k_ctas == 0
            and ctas < slots)


@pytest.mark.parametrize("device", DEVICES)
def test_early_dependents_where_the_rules_say(device):
    # Decode plans whose grid takes at least EARLY_DEPENDENTS_FILL of the resident CTA slots, and
    # gated 16-row wgmma grids of one partial wave, let the next kernel launch at their start;
    # every other plan triggers after its loop.
    spec = cute_gemm.device_spec(device)
    seen = set()
    for (bits, group), (n, k), m in itertools.product(
            QUANTS, SHAPES + [(28672, 4096), (6144, 4096), (128256, 4096)], MS):
        for activation in ((None, "silu_mul") if n % 16 == 0 else (None,)):
            p = cute_gemm.mixed_plan(m, n, k, bits, group, device=device, activation=activation)
            assert p.early_dependents == early_by_rule(p, spec.sm_count), (m, n, k, bits, p)
            assert ("next kernel launched at its start" in str(p)) == p.early_dependents
            seen.add((p.kernel, p.early_dependents))
    assert ("decode", True) in seen and ("decode", False) in seen
    if spec.wgmma:
        assert ("wgmma", True) in seen and ("wgmma", False) in seen
        # Llama-3-8B's gate/up at M = 16: 224 CTAs on 264 slots (2 per SM).
        g = cute_gemm.mixed_plan(16, 28672, 4096, 4, 128, torch.bfloat16, device=device,
                                 activation="silu_mul")
        assert g.early_dependents and g.tile_m == 16 and g.grid[0] == 224, g
        # Ungated, or stream-K, or filling the slots: after the loop.
        assert not cute_gemm.mixed_plan(16, 28672, 4096, 4, 128, torch.bfloat16,
                                        device=device).early_dependents
        assert not cute_gemm.mixed_plan(16, 28672, 4096, 4, 128, torch.bfloat16, device=device,
                                        activation="silu_mul",
                                        schedule="stream_k=264").early_dependents
        assert not cute_gemm.mixed_plan(16, 33792, 4096, 4, 128, torch.bfloat16, device=device,
                                        activation="silu_mul",
                                        schedule="stream_k=off").early_dependents  # 264 CTAs
    if device == "h100":
        # Measured (NOTES.md, session 43): gate/up at M = 1 (2-warp CTAs, 0.85 of the slots)
        # gains; at M = 4 in 1-warp CTAs (0.52) it lost 42%; q/k/v at M = 1 fills 0.36.
        assert plan(1, 28672, 4096).early_dependents
        assert not plan(4, 28672, 4096).early_dependents
        assert not plan(1, 6144, 4096).early_dependents
        assert plan(1, 4096, 4096).early_dependents and plan(1, 4096, 14336).early_dependents


def test_trigger_schedules():
    # trigger=early / late pins where the kernel lets the next one launch, both ways, on the
    # kernels that can (decode, the wgmma tiles without a producer warpgroup); the others refuse.
    assert _C._mixed_schedule("trigger=early") == "trigger=early"
    assert _C._mixed_schedule(" trigger=late ,splits=2") == "splits=2,trigger=late"
    for m, n, k, act in ((1, 28672, 4096, None), (4, 28672, 4096, None),
                         (16, 28672, 4096, "silu_mul"), (16, 4096, 4096, None),
                         (32, 8192, 8192, None)):
        auto = cute_gemm.mixed_plan(m, n, k, 4, 128, torch.bfloat16, device="h200",
                                    activation=act)
        assert auto.kernel in ("decode", "wgmma") and not auto.producer, auto
        for trigger, early in (("early", True), ("late", False)):
            p = cute_gemm.mixed_plan(m, n, k, 4, 128, torch.bfloat16, device="h200",
                                     activation=act, schedule=f"trigger={trigger}")
            assert p.early_dependents == early, (m, n, trigger, p)
            # Nothing else of the plan changes.
            assert {f: getattr(p, f) for f in PLAN_FIELDS - {"early_dependents", "grid"}} == \
                {f: getattr(auto, f) for f in PLAN_FIELDS - {"early_dependents", "grid"}}
            assert tuple(p.grid) == tuple(auto.grid)
    for m, schedule, runs in ((16, "kernel=mma,trigger=early", "mma"),
                              (16, "kernel=dense,trigger=late", "dense"),
                              (512, "trigger=early", "wgmma mixed_wgmma_bf16_int4_m256_wg2")):
        with pytest.raises(ValueError, match="trigger applies to the decode kernel and the wgmma "
                                             f"tiles without a producer warpgroup; this plan runs "
                                             f"{runs}"):
            cute_gemm.mixed_plan(m, 8192, 8192, 4, 128, torch.bfloat16, device="h200",
                                 schedule=schedule)
    with pytest.raises(ValueError, match="trigger applies to the decode kernel"):
        cute_gemm.mixed_plan(16, 8192, 8192, 4, 128, torch.bfloat16, device="a100",
                             schedule="trigger=early")  # mma.sync on an A100


def test_decode_schedules():
    # Scheduled warps are rounded down to whole k slices: 6 warps in slices of 4 -> 4.
    p = plan(1, schedule="warps=6,col_warps=4")
    assert (p.kernel, p.warps, p.col_warps, p.k_slices) == ("decode", 4, 4, 1)
    for m, cw in itertools.product((1, 3, 5, 8), (1, 2, 4)):
        p = plan(m, schedule={"col_warps": cw})
        assert p.kernel == "decode" and p.col_warps == cw and p.warps % cw == 0
        for warps in (1, 3, 7, 12, 16):
            p = plan(m, 392, 4224, schedule=f"kernel=decode,warps={warps},col_warps={cw}")
            assert p.col_warps == cw and p.warps % cw == 0
            rounded = max(cw, warps - warps % cw)  # whole k slices, at least one
            assert cw <= p.warps <= rounded and p.k_slices == p.warps // cw
            if rounded <= 4:  # a few warps always fit in shared memory
                assert p.warps == rounded, (m, warps, cw, p.warps)
    # warps alone imply the decode kernel.
    assert plan(4, schedule="warps=8").kernel == "decode"
    # Decode never takes more than 8 rows, scheduled or implied.
    for schedule in ("kernel=decode", "warps=4", "col_warps=2", "kernel=decode,splits=2"):
        with pytest.raises(ValueError, match=r"kernel=decode runs up to M=8; got M=9"):
            plan(9, schedule=schedule)


# ---------------------------------------------------------------------------- determinism


def test_plan_is_deterministic():
    cases = [(1, 4096, 4096, 4, 128), (16, 28672, 8192, 8, -1), (300, 4096, 14336, 4, 32),
             (5, 136, 4224, 8, 64)]
    for device in DEVICES:
        first = [plan(*c, device=device).as_dict() for c in cases]
        for _ in range(3):
            assert [plan(*c, device=device).as_dict() for c in reversed(cases)][::-1] == first
    # Plans for other devices and schedules in between change nothing.
    before = plan(33, device="h100").as_dict()
    plan(33, device="a100")
    plan(33, device="h100", schedule="kernel=mma,splits=3")
    assert plan(33, device="h100").as_dict() == before


# ---------------------------------------------------------------------- the MixedPlan object


def test_plan_object():
    p = plan(300, schedule="tile_m=128,splits=2")
    d = p.as_dict()
    assert set(d) == PLAN_FIELDS
    for key, value in d.items():
        assert getattr(p, key) == value
    assert isinstance(p.grid, tuple) and len(p.grid) == 3
    assert isinstance(p, cute_gemm.MixedPlan)
    with pytest.raises(AttributeError):
        p.kernel = "mma"
    with pytest.raises(AttributeError):
        p.splits = 3


def test_describe_names_kernel_and_instance():
    for m, schedule in ((1, None), (16, None), (64, None), (300, "tile_m=256,splits=3"),
                        (4, "kernel=decode,warps=8,col_warps=2"), (64, "kernel=mma")):
        p = plan(m, schedule=schedule)
        text = p.describe()
        assert text.startswith(p.kernel + " " + p.instance), text
        assert str(p) == text and text in repr(p)
        assert ("split-K" in text) == (p.splits > 1)
        assert f"{p.grid[0]}x{p.grid[1]}x{p.grid[2]}" in text
    p = plan(1, device="a100", schedule="kernel=dense")
    assert p.instance is None and p.describe().startswith("dense")


def test_bf16_and_dtype():
    p = plan(64, dtype=torch.bfloat16)
    assert "bf16" in p.instance and instances()[p.instance]["bf16"]
    assert "_f16_" in plan(64).instance and not instances()[plan(64).instance]["bf16"]
    with pytest.raises(ValueError, match="dtype must be torch.float16 or torch.bfloat16"):
        plan(1, dtype=torch.float32)


# -------------------------------------------------------------------------------- schedules


@pytest.mark.parametrize("text,canonical", [
    ("", ""), ("kernel=auto", ""), (" , ", ""),
    ("kernel=wgmma", "kernel=wgmma"), ("tile_m=128,kernel=wgmma", "kernel=wgmma,tile_m=128"),
    (" splits=2 , kernel=mma ,", "kernel=mma,splits=2"),
    ("col_warps=2,warps=8,kernel=decode", "kernel=decode,warps=8,col_warps=2"),
    ("kernel=dense", "kernel=dense"), ("splits=64", "splits=64"), ("tile_m=32", "tile_m=32"),
    ("tile_m=16", "tile_m=16"), ("scales=exact,tile_m=32", "tile_m=32,scales=exact"),
    ("scales=rounded", "scales=rounded"),
    ("warps=16,col_warps=4", "warps=16,col_warps=4"),
    ("k_slices=2,kernel=mma", "kernel=mma,k_slices=2"),
    ("splits=3,k_slices=1", "splits=3,k_slices=1"),
    ("raster_m=4,tile_m=256", "tile_m=256,raster_m=4"), ("raster_m=64", "raster_m=64"),
    ("tile_n=64,splits=4,tile_m=16", "tile_m=16,tile_n=64,splits=4"), ("tile_n=128", "tile_n=128"),
    ("reduce=kernel,splits=4", "splits=4,reduce=kernel"), ("reduce=cluster", "reduce=cluster"),
    ("loads=cp_async,tile_m=64", "tile_m=64,loads=cp_async"), ("loads=tma", "loads=tma"),
    ("splits=2,loads=tma,scales=rounded", "scales=rounded,loads=tma,splits=2"),
])
def test_schedule_canonical_form(text, canonical):
    assert _C._mixed_schedule(text) == canonical
    assert _C._mixed_schedule(canonical) == canonical  # idempotent


@pytest.mark.parametrize("text,key", [
    ("kernel=tensor_cores", "kernel"), ("kernel=", "kernel"), ("kernel=WGMMA", "kernel"),
    ("tile_m=96", "tile_m"), ("tile_m=8", "tile_m"), ("tile_m=512", "tile_m"),
    ("scales=fp32", "scales"), ("scales=", "scales"), ("scales=Exact", "scales"),
    ("tile_m=abc", "tile_m"), ("tile_m=", "tile_m"), ("tile_m=128.0", "tile_m"),
    ("splits=0", "splits"), ("splits=65", "splits"), ("splits=-1", "splits"),
    ("splits=2.5", "splits"), ("splits=two", "splits"),
    ("warps=0", "warps"), ("warps=17", "warps"), ("warps=x", "warps"),
    ("col_warps=3", "col_warps"), ("col_warps=0", "col_warps"), ("col_warps=8", "col_warps"),
    ("k_slices=0", "k_slices"), ("k_slices=3", "k_slices"), ("k_slices=x", "k_slices"),
    ("raster_m=0", "raster_m"), ("raster_m=65", "raster_m"), ("raster_m=x", "raster_m"),
    ("tile_n=96", "tile_n"), ("tile_n=0", "tile_n"), ("tile_n=512", "tile_n"),
    ("tile_n=x", "tile_n"), ("bogus=1", "bogus"), ("reduce=both", "reduce"),
    ("reduce=Cluster", "reduce"), ("reduce=", "reduce"),
    ("trigger=now", "trigger"), ("trigger=Early", "trigger"), ("trigger=", "trigger"),
    ("loads=cpasync", "loads"), ("loads=TMA", "loads"), ("loads=", "loads"),
    ("kernel", "kernel"),
    ("kernel:mma", "kernel:mma"),
])
def test_schedule_parse_errors_name_the_key(text, key):
    with pytest.raises(ValueError, match="schedule: .*" + key):
        _C._mixed_schedule(text)
    with pytest.raises(ValueError, match="schedule: .*" + key):
        plan(1, schedule=text)


def test_schedule_tile_m_is_a_built_token_tile():
    # The tiles a schedule may name are the wgmma instances' (the generated table), all of them.
    tiles = sorted({i["tile_m"] for i in _C._mixed_instances() if i["kernel"] == "wgmma"})
    listed = ", ".join(map(str, tiles[:-1])) + f" or {tiles[-1]}"
    with pytest.raises(ValueError, match=f"schedule: tile_m must be {listed}; got 224$"):
        _C._mixed_schedule("tile_m=224")
    for t in tiles:
        assert _C._mixed_schedule(f"tile_m={t}") == f"tile_m={t}"


def test_schedule_tile_n_is_a_built_width():
    # The CTA widths a schedule may name are the wgmma instances' (64 and 128 columns).
    widths = sorted({i["tile_n"] for i in _C._mixed_instances() if i["kernel"] == "wgmma"})
    assert widths == [64, 128]
    with pytest.raises(ValueError, match="schedule: tile_n must be 64 or 128; got 256$"):
        _C._mixed_schedule("tile_n=256")


@pytest.mark.parametrize("device", ["h100", "h200"])
def test_wgmma_16_row_tile_in_64_columns(device):
    # INT4's 16-row tile has a 64-column form (one n64 tile per warpgroup, 4 CTAs per SM). The
    # planner takes it where the 128-column grid would split K 8 ways or more to fill a wave
    # (N = 4096 on 132 SMs: 32 column tiles), in as many splits, or would give each split at most
    # 16 k blocks of 128 (short loops: 4096x6144, 8192x8192); 128 columns where each split's loop
    # is long (28672x8192 in 4 splits, 4096x28672 unsplit). tile_n pins either width.
    narrow_shapes = {(4096, 4096), (4096, 14336), (6144, 4096), (2048, 4096), (8192, 8192)}
    for m, (n, k), dtype in itertools.product(
            (9, 16), sorted(narrow_shapes | {(8192, 28672), (28672, 4096)}),
            (torch.float16, torch.bfloat16)):
        default = plan(m, n, k, dtype=dtype, device=device)
        wide = plan(m, n, k, dtype=dtype, device=device, schedule="tile_m=16,tile_n=128")
        p = plan(m, n, k, dtype=dtype, device=device, schedule="tile_n=64")
        assert (default.kernel, wide.tile_n, wide.ctas_per_sm) == ("wgmma", 128, 2)
        blocks_per_split = -(-(k // 128) // wide.splits)
        narrow = wide.splits >= 8 or blocks_per_split <= 16
        assert narrow == ((n, k) in narrow_shapes), (m, n, k, wide.describe())
        assert default.tile_n == (64 if narrow else 128), (m, n, k, default.describe())
        assert default.instance == (p.instance if default.tile_n == 64 else wide.instance)
        if n <= 4096:  # 32 or 16 column tiles of 128: 8 or 16 splits, as many in 64 columns
            assert default.tile_n == 64 and wide.splits == 8 * 4096 // n
            assert default.splits == wide.splits
            assert tuple(default.grid) == (n // 64, 1, wide.splits)
        inst = instances()[p.instance]
        assert (p.kernel, p.tile_m, p.tile_n, p.warp_groups) == ("wgmma", 16, 64, 1)
        # Exact scales at g128 (default_wgmma_scales).
        assert inst["tile_n"] == 64 and inst["exact_scales"] and inst["name"].endswith("_n64_exact")
        assert p.ctas_per_sm == 4 and p.threads == 128
        assert tuple(p.grid) == (n // 64, 1, p.splits)
        assert wide.instance != p.instance
        pinned = plan(m, n, k, dtype=dtype, device=device, schedule="tile_n=64,splits=4")
        assert pinned.splits == 4 and tuple(pinned.grid) == (n // 64, 1, 4)
    # The decode kernel (M <= 8), the other tiles and INT8 are not affected.
    assert plan(8, device=device).kernel == "decode"
    assert plan(17, device=device).tile_n == 128
    assert plan(16, bits=8, group=-1, device=device).tile_n == 128
    # A gated GEMM on it: with rounded weights through the workspace, split or not (the reduce
    # kernel gates); with exact scales (the default at g128) gated in registers, its splits added
    # in a cluster.
    for scales, splits in itertools.product(("rounded", "exact"), (1, 2)):
        p = cute_gemm.mixed_plan(16, 28672, 4096, 4, 128, torch.bfloat16, device=device,
                                 schedule=f"tile_n=64,splits={splits},scales={scales}",
                                 activation="silu_mul")
        in_registers = scales == "exact"
        assert p.reduce_in_cluster == (in_registers and splits > 1)
        assert (p.tile_n, p.splits, p.via_workspace) == (64, splits, not in_registers)
        assert ("in registers" in p.describe()) == in_registers
        assert p.workspace_bytes == (0 if in_registers else splits * 16 * 28672 * 4)
    # Only INT4's 16-row tile has it.
    with pytest.raises(ValueError, match="no wgmma instance with tile_m=16, tile_n=64.*INT8"):
        plan(16, bits=8, group=-1, device=device, schedule="tile_m=16,tile_n=64")
    with pytest.raises(ValueError, match="no wgmma instance with tile_m=32, tile_n=64"):
        plan(17, device=device, schedule="tile_n=64")
    with pytest.raises(ValueError, match="tile_n applies to the wgmma kernel; this plan runs mma"):
        plan(16, device=device, schedule="kernel=mma,tile_n=64")


@pytest.mark.parametrize("device,m,schedule,match", [
    ("h100", 9, "kernel=decode", r"kernel=decode runs up to M=8"),
    ("h100", 64, "kernel=mma,tile_m=64", r"tile_m applies to the wgmma kernel; this plan runs "
                                         r"mma"),
    ("h100", 1, "kernel=decode,tile_m=32", r"tile_m applies to the wgmma kernel"),
    ("h100", 64, "tile_m=64,warps=4", r"warps applies to the decode kernel; this plan runs wgmma"),
    ("h100", 1, "kernel=mma,col_warps=2", r"col_warps applies to the decode kernel"),
    ("h100", 1, "kernel=decode,k_slices=2", r"k_slices applies to the mma kernel; this plan "
                                            r"runs decode"),
    ("h100", 64, "tile_m=64,k_slices=2", r"k_slices applies to the mma kernel; this plan runs "
                                         r"wgmma"),
    ("h100", 17, "k_slices=2", r"k_slices=2 exceeds the 1 of mixed_f16_int4_m32 \(2 only in "
                               r"INT4's 16-row tile\)"),
    ("h100", 1, "kernel=dense,splits=2", r"splits applies to the fused kernels; this plan runs "
                                         r"dense"),
    ("a100", 300, "splits=2", r"splits applies to the fused kernels; this plan runs dense"),
    ("h100", 16, "raster_m=2", r"raster_m applies to the warp-specialized wgmma tiles.*this "
                               r"plan runs wgmma mixed_wgmma_f16_int4_m16"),
    ("h100", 4096, "kernel=mma,raster_m=2", r"raster_m applies to the wgmma kernel; this plan "
                                            r"runs mma"),
    ("h100", 1, "raster_m=2", r"raster_m applies to the wgmma kernel; this plan runs decode"),
    ("h100", 4096, "kernel=dense,raster_m=2", r"raster_m applies to the wgmma kernel; this plan "
                                              r"runs dense"),
    ("a100", 4096, "raster_m=2", r"raster_m applies to the wgmma kernel; this plan runs dense"),
    ("a100", 64, "kernel=wgmma", r"kernel=wgmma needs a Hopper GPU.*NVIDIA A100"),
    ("a100", 40, "loads=cp_async", r"kernel=wgmma needs a Hopper GPU.*NVIDIA A100"),
    ("h100", 1, "kernel=decode,loads=tma", r"loads applies to the wgmma kernel; this plan runs "
                                           r"decode"),
    ("h100", 16, "loads=cp_async", r"no wgmma instance with tile_m=16.* filled by cp.async for "
                                   r"INT4 \(loads=cp_async: INT4's 64-row tile and INT8's 32-row "
                                   r"tiles\)"),
    ("h100", 300, "loads=cp_async", r"no wgmma instance with tile_m=256.* filled by cp.async"),
    ("a100", 1, "tile_m=32", r"kernel=wgmma needs a Hopper GPU.*NVIDIA A100"),
])
def test_schedules_the_plan_cannot_run(device, m, schedule, match):
    with pytest.raises(ValueError, match=match):
        plan(m, device=device, schedule=schedule)


def test_schedule_string_and_mapping_agree():
    pairs = [("kernel=wgmma,tile_m=64,splits=2", {"kernel": "wgmma", "tile_m": 64, "splits": 2}),
             ("kernel=decode,warps=8,col_warps=2", {"kernel": "decode", "warps": 8,
                                                    "col_warps": 2}),
             ("kernel=mma", {"kernel": "mma"}), ("", {})]
    for text, mapping in pairs:
        m = 4 if "decode" in text else 64
        assert plan(m, schedule=text).as_dict() == plan(m, schedule=mapping).as_dict()
    assert plan(64, schedule="").as_dict() == plan(64).as_dict()
    assert plan(64, schedule="kernel=auto").as_dict() == plan(64).as_dict()
    with pytest.raises(ValueError, match="unknown key 'tile'"):
        plan(64, schedule={"tile": 64})
    with pytest.raises(TypeError, match="schedule must be None, a string"):
        plan(64, schedule=64)
    with pytest.raises(TypeError, match="schedule must be None, a string"):
        plan(64, schedule=[("kernel", "mma")])


def test_schedule_implied_kernels():
    # tile_m alone implies wgmma; warps / col_warps alone imply decode; splits alone keep the
    # default kernel.
    assert plan(1, schedule="tile_m=64").kernel == "wgmma"
    assert plan(4, schedule="col_warps=4").kernel == "decode"
    for m in (1, 16, 64):
        assert plan(m, schedule="splits=2").kernel == plan(m).kernel
        assert plan(m, schedule="splits=2").splits == 2


# ------------------------------------------------------------------------------ bad problems


@pytest.mark.parametrize("kwargs,match", [
    (dict(bits=3), r"bits must be 4 or 8; got bits=3"),
    (dict(bits=5), r"bits must be 4 or 8"),
    (dict(bits=16), r"bits must be 4 or 8"),
    (dict(bits=100), r"bits must be 4 or 8"),
    (dict(bits=-4), r"bits must be 4 or 8"),
    (dict(group=48), r"group_size must be 32, 64, 128 or -1 \(per-channel\); got group_size=48"),
    (dict(group=16), r"group_size must be 32, 64, 128 or -1"),
    (dict(group=256), r"group_size must be 32, 64, 128 or -1"),
    (dict(group=0), r"group_size must be 32, 64, 128 or -1"),
    (dict(group=-2), r"group_size (must be )?32, 64, 128 or -1"),
    (dict(n=12), r"N must be a multiple of 8; got N=12"),
    (dict(n=4100), r"N must be a multiple of 8; got N=4100"),
    (dict(n=0), r"need 1 <= M, N, K < 2\^31"),
    (dict(m=0), r"need 1 <= M, N, K < 2\^31; got M=0"),
    (dict(k=0), r"need 1 <= M, N, K < 2\^31"),
    (dict(m=2**31), r"need 1 <= M, N, K < 2\^31"),
])
def test_bad_problems_raise(kwargs, match):
    args = dict(m=1, n=4096, k=4096, bits=4, group=128)
    args.update(kwargs)
    for device in DEVICES:
        with pytest.raises(ValueError, match=match):
            plan(args["m"], args["n"], args["k"], args["bits"], args["group"], device=device)


# ------------------------------------------------------------------------------- instances


def test_instances_table():
    table = _C._mixed_instances()
    names = [inst["name"] for inst in table]
    assert len(names) == len(set(names)) and names
    kinds = {inst["kernel"] for inst in table}
    assert kinds == {"decode", "mma", "wgmma"}
    for inst in table:
        assert inst["bits"] in (4, 8) and inst["threads"] > 0 and inst["stages"] > 0
        assert inst["smem_bytes"] > 0 and inst["registers"] > 0
        assert ("bf16" in inst["name"]) == inst["bf16"]
        assert f"int{inst['bits']}" in inst["name"]
    # Every token tile of the wgmma kernel for each bit width and dtype (16 rows, in 128 and 64
    # columns, rounded and exact: INT4 only), the 32-row tile with exact scales, and INT8's
    # warp-specialized tiles (64 rows and up) with exact scales; 128 columns per CTA but for the
    # 16-row tiles' 64.
    for bits, bf16 in itertools.product((4, 8), (False, True)):
        tiles = sorted((i["tile_m"], i["exact_scales"], i["tile_n"]) for i in table
                       if (i["kernel"], i["bits"], i["bf16"]) == ("wgmma", bits, bf16))
        assert tiles == sorted([(16, False, 64), (16, False, 128), (16, True, 64),
                                (16, True, 128), (64, False, 128)] * (bits == 4) + [
            (t, e, 128) for t, e in ((32, False), (32, True), (64, False), (128, False),
                                     (160, False), (192, False), (256, False))] + [
            (t, True, 128) for t in (64, 128, 160, 192, 256)] * (bits == 8))
        # Filled by TMA: INT4's tiles and the warp-specialized ones; by cp.async: INT8's tiles
        # without a producer (32 rows) and the second form of INT4's 64-row tile, which is the
        # same tile otherwise.
        for i in table:
            if (i["kernel"], i["bits"], i["bf16"]) == ("wgmma", bits, bf16):
                want = i["producer"] or (bits == 4 and not i["name"].endswith("_cp_async"))
                assert i["tma_loads"] == want, i["name"]
        pair = [i for i in table if (i["kernel"], i["bits"], i["bf16"], i["tile_m"],
                                     i["producer"]) == ("wgmma", bits, bf16, 64, False)]
        if bits == 4:
            assert sorted(i["tma_loads"] for i in pair) == [False, True]
            assert len({(i["threads"], i["tile_n"], i["exact_scales"], i["min_ctas_per_sm"])
                        for i in pair}) == 1
        else:
            assert pair == []  # INT8's 64-row tiles are warp-specialized
        tiles = {(i["tile_m"], i["fine_groups"]) for i in table
                 if (i["kernel"], i["bits"], i["bf16"]) == ("mma", bits, bf16)}
        assert tiles == {(t, f) for t in (16, 32, 64) for f in (False, True)}
        assert {i["fine_groups"] for i in table
                if (i["kernel"], i["bits"], i["bf16"]) == ("decode", bits, bf16)} == {False, True}


def _schedule_reaching(inst):
    """A problem and schedule whose plan runs `inst` (on an H100)."""
    kernel, tile_m = inst["kernel"], inst["tile_m"]
    fine = inst["fine_groups"] and kernel != "wgmma"
    # INT8's warp-specialized tiles with exact scales: one group over K (per-channel) only
    ws_exact = kernel == "wgmma" and inst["exact_scales"] and tile_m >= 64
    group = 32 if fine else (-1 if ws_exact else 128)
    m = {"decode": 8, "mma": tile_m, "wgmma": tile_m}[kernel]
    schedule = {"kernel": kernel}
    if kernel == "wgmma":
        schedule["tile_m"] = tile_m
        schedule["scales"] = "exact" if inst["exact_scales"] else "rounded"
        schedule["tile_n"] = inst["tile_n"]
        schedule["loads"] = "tma" if inst["tma_loads"] else "cp_async"
    return dict(m=m, n=4096, k=4096, bits=inst["bits"], group=group,
                dtype=torch.bfloat16 if inst["bf16"] else torch.float16), schedule


def test_every_instance_is_reachable():
    reached = set()
    for name, inst in instances().items():
        problem, schedule = _schedule_reaching(inst)
        for device in HOPPER if inst["kernel"] == "wgmma" else DEVICES:
            p = plan(**problem, device=device, schedule=schedule)
            assert p.instance == name, (name, problem, schedule, p.instance)
            assert p.kernel == inst["kernel"]
        reached.add(name)
    assert reached == set(instances())
    # The default plans (no schedule) reach every kind of kernel and every wgmma token tile.
    default = {p.instance for _, p in all_default_plans() if p.instance}
    assert {instances()[n]["kernel"] for n in default} == {"decode", "mma", "wgmma"}
    assert {instances()[n]["tile_m"] for n in default
            if instances()[n]["kernel"] == "wgmma"} >= {16, 32, 64, 128, 160, 192, 256}


def test_occupancy_query_needs_a_gpu():
    # _C._mixed_occupancy asks the current GPU how many CTAs of a plan's launch fit on an SM
    # (tests/test_mixed_gemm_gpu.py holds every instance's plans against it). A plan that runs no
    # instance (the dense path) is refused in every build; without a GPU, or in a build without
    # CUDA, the query says so instead of answering.
    dense = plan(4096, device="a100")
    assert dense.kernel == "dense"
    with pytest.raises(ValueError, match="_mixed_occupancy: the plan runs no mixed kernel"):
        _C._mixed_occupancy(dense)
    if not torch.cuda.is_available():
        with pytest.raises(RuntimeError, match=r"_mixed_occupancy: (no CUDA device|cute_gemm was "
                                               r"built without CUDA)"):
            _C._mixed_occupancy(plan(1))


def test_gated_mma_16_row_tile_unsplit_where_a_wave_takes_two_splits():
    # Llama-3-8B's fused gate/up (4096x28672) at M = 9-16 on mma.sync's 16-row tile (the A100's
    # default; on Hopper by schedule, or with groups shorter than a k block): one wave of the tile
    # would take 2 splits; gating in registers takes one and no reduce kernel (the A100), on
    # Hopper 4 splits gated in the reduce kernel (kGatedHopperSplits). Where a wave takes more
    # splits (N = 4096), the plan keeps them and gates in the reduce kernel; ungated plans are
    # unchanged.
    for device in ("h100", "h200", "a100"):
        for m in (9, 16):
            for dtype in (torch.float16, torch.bfloat16):
                mma = "kernel=mma"
                gated = cute_gemm.mixed_plan(m, 28672, 4096, 4, 128, dtype, device=device,
                                             activation="silu_mul", schedule=mma)
                plain = cute_gemm.mixed_plan(m, 28672, 4096, 4, 128, dtype, device=device,
                                             schedule=mma)
                assert (gated.kernel, gated.tile_m, gated.k_slices) == ("mma", 16, 1), gated
                if device == "a100":
                    assert gated.splits == 1 and not gated.via_workspace, gated
                    assert gated.workspace_bytes == 0
                else:
                    assert gated.splits == 4 and gated.via_workspace, gated
                    assert gated.workspace_bytes == 4 * m * 28672 * 4
                    assert tuple(gated.grid) == (224, 1, 4) and gated.warps == 4, gated
                    assert "SiLU(gate) * up in the reduce kernel" in str(gated)
                    assert (plain.splits, plain.k_slices) == (2, 1), plain
                # Each split keeps at least 8 k blocks: a shorter K takes fewer splits, and one
                # with too few for 3 takes 2 k slices unsplit on Hopper.
                short = cute_gemm.mixed_plan(m, 28672, 3072, 4, 128, dtype, device=device,
                                             activation="silu_mul", schedule=mma)
                assert short.splits == (1 if device == "a100" else 3), short
                shorter = cute_gemm.mixed_plan(m, 28672, 2304, 4, 128, dtype, device=device,
                                               activation="silu_mul", schedule=mma)
                assert (shorter.splits, shorter.k_slices) == \
                    ((1, 1) if device == "a100" else (1, 2)), shorter
                small = cute_gemm.mixed_plan(m, 4096, 4096, 4, 128, dtype, device=device,
                                             activation="silu_mul", schedule="kernel=mma")
                assert small.splits > 2 and small.via_workspace, small
    forced = cute_gemm.mixed_plan(16, 28672, 4096, 4, 128, torch.float16, device="h100",
                                  activation="silu_mul", schedule="kernel=mma,splits=2")
    assert forced.splits == 2 and forced.via_workspace and forced.k_slices == 1


def test_mma_two_k_slices():
    # On Hopper a gated GEMM that INT4's 16-row mma.sync tile gates in registers unsplit, and
    # whose K is too short for kGatedHopperSplits splits of 8 k blocks, runs 2 k slices of 4 warps
    # per CTA (plan_mma): gate/up 2304x28672 at M = 9-16 (on Hopper by schedule at g128, which
    # runs wgmma's exact tile by default). The plain GEMM keeps its splits; the A100 (not
    # measured there) and every other tile keep one slice.
    for device, m, dtype, activation in itertools.product(
            DEVICES, (9, 16), (torch.float16, torch.bfloat16), (None, "silu_mul")):
        p = cute_gemm.mixed_plan(m, 28672, 2304, 4, 128, dtype, device=device,
                                 activation=activation, schedule="kernel=mma")
        inst = instances()[p.instance]
        assert (p.kernel, p.tile_m) == ("mma", 16), p
        if activation or device == "a100":
            assert p.splits == 1, p
        else:
            assert p.splits == 2, p
        want = 2 if device in HOPPER and activation else 1
        assert p.k_slices == want and inst["max_k_slices"] == 2, p
        assert inst["sliced_smem_bytes"] == 2 * inst["smem_bytes"]  # each slice its stages
        assert (p.threads, p.warps, p.smem_bytes) == \
            (inst["threads"] * want, inst["threads"] * want // 32,
             inst["smem_bytes"] if want == 1 else inst["sliced_smem_bytes"])
        assert p.via_workspace == (p.splits > 1) and not p.reduce_in_cluster  # mma.sync
        spec = cute_gemm.device_spec(device)
        assert 1 <= p.ctas_per_sm and p.ctas_per_sm * p.smem_bytes <= spec.smem_per_sm
        assert ("2 k slices of 4" in str(p)) == (want == 2), str(p)
    # Gated with more than 2 splits in a wave (N = 4096) keeps one slice and the reduce kernel.
    small = cute_gemm.mixed_plan(16, 4096, 4096, 4, 128, device="h200", activation="silu_mul",
                                 schedule="kernel=mma")
    assert small.k_slices == 1 and small.splits > 2
    # Every instance says how many k slices it runs: 2 only in INT4's 16-row mma.sync tile.
    for inst in instances().values():
        two = inst["kernel"] == "mma" and inst["tile_m"] == 16 and inst["bits"] == 4
        assert inst["max_k_slices"] == (2 if two else 1), inst["name"]
    # By schedule, with splits, on any device; k_slices alone implies the mma.sync kernel.
    for device in DEVICES:
        p = plan(16, 4096, 4096, device=device, schedule="kernel=mma,k_slices=2,splits=3")
        assert (p.kernel, p.k_slices, p.splits, p.via_workspace) == ("mma", 2, 3, True)
        p = plan(12, 28672, 4096, device=device, schedule="k_slices=1")
        assert (p.kernel, p.k_slices, p.splits) == ("mma", 1, 1 if device == "a100" else 2)
    assert plan(1, schedule="k_slices=2").k_slices == 2
    with pytest.raises(ValueError, match=r"k_slices=2 exceeds the 1 of mixed_f16_int8_m16"):
        plan(16, bits=8, group=-1, schedule="kernel=mma,k_slices=2")
