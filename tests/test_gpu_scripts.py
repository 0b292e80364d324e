"""scripts/gpu_sweep.py and scripts/sanitizer_probe.py (run by scripts/gpu_check.sh): their
argument parsing, the sweep's case generator (coverage of the kernels' M boundaries and of every
configuration, valid shapes), the schedules both pass to cute_gemm.mixed_gemm (valid on an H100
and an A100, planned as the probe expects on the built-in H100 spec), the accuracy check and the
sweep's run path on the CPU reference ops; the GPU runs themselves are marked `gpu`.
"""

import json
import math
import os
import re
import subprocess
import sys

import pytest
import torch

import cute_gemm

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPTS = os.path.join(REPO_ROOT, "scripts")
if SCRIPTS not in sys.path:
    sys.path.insert(0, SCRIPTS)

import gpu_sweep  # noqa: E402
import ncu_mixed_probe  # noqa: E402
import sanitizer_probe  # noqa: E402

N_CASES = 300
SEEDS = [0, 1, 12345]


def _cases(seed, count=N_CASES):
    gen = gpu_sweep.generate_cases(seed)
    return [next(gen) for _ in range(count)]


# ------------------------------------------------------------------------------- arguments


def test_ncu_probe_cases():
    """ncu_mixed_probe's "KxN:bits:M[:dtype[:silu_mul]]" cases: fp16 by default, bf16 by name,
    gated by name; a malformed case is refused naming it."""
    assert ncu_mixed_probe.parse_case("4096x28672:4:1") == (4096, 28672, 4, 1, torch.float16,
                                                             None)
    assert ncu_mixed_probe.parse_case("14336x4096:8:16:bf16") == (14336, 4096, 8, 16,
                                                                   torch.bfloat16, None)
    assert ncu_mixed_probe.parse_case("4096x28672:4:16:bf16:silu_mul") == (
        4096, 28672, 4, 16, torch.bfloat16, "silu_mul")
    for bad, words in (("4096x28672:4", "expected KxN"), ("4096:4:1", "expected KxN"),
                       ("4096xabc:4:1", "must be integers"),
                       ("4096x4096:4:one", "must be integers"),
                       ("4096x4096:3:1", "bits must be 4 or 8"),
                       ("4096x4096:4:1:fp32", "dtype must be one of"),
                       ("4096x4096:4:1:bf16:gelu", "fifth field must be silu_mul"),
                       ("4096x4100:4:1:bf16:silu_mul", "multiple of 16"),
                       ("4096x4096:4:1:bf16:silu_mul:x", "expected KxN")):
        with pytest.raises(ValueError, match=words) as info:
            ncu_mixed_probe.parse_case(bad)
        assert repr(bad) in str(info.value)
    # --launches before the cases: a positive integer, 3 without it; every case parsed up front.
    assert ncu_mixed_probe.parse_args(["4096x4096:4:1"]) == (
        3, [("4096x4096:4:1", (4096, 4096, 4, 1, torch.float16, None))])
    assert ncu_mixed_probe.parse_args(["--launches", "1", "8192x8192:8:16:bf16"]) == (
        1, [("8192x8192:8:16:bf16", (8192, 8192, 8, 16, torch.bfloat16, None))])
    for bad in (["--launches"], ["--launches", "0", "4096x4096:4:1"],
                ["--launches", "two", "4096x4096:4:1"]):
        with pytest.raises(ValueError, match="--launches needs a positive integer"):
            ncu_mixed_probe.parse_args(bad)
    with pytest.raises(ValueError, match="'4096x4096:3:1': bits must be 4 or 8"):
        ncu_mixed_probe.parse_args(["4096x4096:4:1", "4096x4096:3:1"])


def test_sweep_arguments():
    args = gpu_sweep.build_parser().parse_args([])
    assert args.seconds == 60 and args.seed is None and args.case is None
    args = gpu_sweep.build_parser().parse_args(["--seconds", "5", "--seed", "7", "--max-cases",
                                                "3", "-v", "--device", "cpu"])
    assert (args.seconds, args.seed, args.max_cases, args.verbose, args.device) == \
        (5, 7, 3, True, "cpu")
    with pytest.raises(SystemExit):
        gpu_sweep.build_parser().parse_args(["--seconds", "soon"])


def test_sweep_list_prints_the_generators_cases(capsys):
    assert gpu_sweep.main(["--list", "12", "--seed", "3"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [gpu_sweep.Case.from_json(line) for line in lines] == _cases(3, 12)


def test_probe_arguments_and_lists(capsys):
    args = sanitizer_probe.build_parser().parse_args(["--quick", "--only", "gemm,dense"])
    assert args.quick and args.only == "gemm,dense"
    assert sanitizer_probe.main(["--list"]) == 0
    full = capsys.readouterr().out.splitlines()
    assert sanitizer_probe.main(["--list", "--quick"]) == 0
    quick = capsys.readouterr().out.splitlines()
    assert 0 < len(quick) < len(full) and set(quick) <= set(full)
    assert sanitizer_probe.main(["--list", "--only", "dense"]) == 0
    assert all(line.startswith("dense") for line in capsys.readouterr().out.splitlines())
    with pytest.raises(ValueError, match="unknown families"):
        sanitizer_probe.main(["--list", "--only", "tensor_cores"])


def test_gpu_check_racechecks_every_family():
    # gpu_check.sh runs racecheck on every family but dense in one run and on dense apart (its
    # cuBLAS reports are filtered): a family added to the probe must be named there too.
    text = open(os.path.join(REPO_ROOT, "scripts", "gpu_check.sh")).read()
    lists = re.findall(r"sanitize racecheck racecheck\S* --only (\S+)", text)
    named = [f for families in lists for f in families.split(",")]
    assert sorted(named) == sorted(sanitizer_probe.FAMILIES)


def test_probe_covers_every_family():
    for quick in (False, True):
        specs = sanitizer_probe.select(quick)
        assert {s["family"] for s in specs} == set(sanitizer_probe.FAMILIES)
    specs = sanitizer_probe.select()
    attention = [s for s in specs if s["op"] == "attention"]
    assert {s["mask"] for s in attention} == {None, "prefix", "add", "head", "tail"}
    # The long splits' scan of a static cache's tail: 8 head CTAs at L = 4096 make 8 splits of
    # 512 positions (the config's kScanMinRows).
    assert any(s["mask"] == "tail" and s["batch"] * s["q_len"] * s["kv_heads"] == 8 and
               s["length"] == 4096 for s in attention)
    assert any(s["heads"] // s["kv_heads"] > 8 for s in attention)  # two CTAs per group
    mixed = [s for s in specs if s["op"] == "mixed"]
    assert {(s["bits"], s["dtype"], s["sym"]) for s in mixed} == \
        {(b, d, sym) for b in (4, 8) for d in ("fp16", "bf16") for sym in (True, False)}
    assert {s["group"] for s in mixed} == {32, 64, 128, -1}
    # Each wgmma token tile of each bit width, every decode k-slice width, split-K on every kernel
    # (both wgmma kernels: the cp.async one and the warp-specialized TMA one).
    wgmma = {(s["bits"], s["expect"].get("tile_m")) for s in mixed
             if s["expect"].get("kernel") == "wgmma"}
    assert wgmma >= {(4, 16), (4, 32), (4, 64), (4, 128), (4, 256), (8, 32), (8, 64), (8, 128),
                     (8, 256)}
    assert {s["bits"] for s in mixed if s["expect"].get("exact_scales") is True} == {4, 8}
    assert {s["expect"].get("col_warps") for s in mixed} >= {1, 2, 4}
    split = [s for s in mixed if s["expect"].get("splits", 1) > 1]
    assert {s["expect"].get("kernel") for s in split} == {"decode", "mma", "wgmma"}
    assert {s["expect"].get("tile_m") for s in split if s["expect"]["kernel"] == "wgmma"} >= \
        {64, 128}
    assert any(s["expect"].get("dense") for s in mixed)
    for s in mixed:  # the shapes the op accepts
        group = s["k"] if s["group"] == -1 else s["group"]
        assert s["n"] % 8 == 0 and s["k"] % 32 == 0 and s["k"] % group == 0
        assert s["m"] <= 8 or s["expect"].get("kernel") != "decode"


# -------------------------------------------------------------------------- case generator


@pytest.mark.parametrize("seed", SEEDS)
def test_generator_covers_kernel_boundaries(seed):
    cases = _cases(seed)
    ms = [c.m for c in cases]
    # Every region of M where a different kernel or token tile runs.
    for lo, hi in [(1, 8), (9, 16), (17, 32), (33, 64), (65, 128), (129, 191), (192, 256),
                   (257, 512), (513, gpu_sweep.M_MAX)]:
        assert any(lo <= m <= hi for m in ms), (lo, hi)
    # Each region the generator aims at, and each boundary value exactly.
    assert {c.region for c in cases} == set(gpu_sweep.M_REGIONS)
    assert set(gpu_sweep.BOUNDARY_MS) <= set(ms)
    for value in (64, 65, 128, 129, 192, 256, 257, 512):
        assert value in ms
    ns, ks = {c.n for c in cases}, {c.k for c in cases}
    assert {8, 24, 136, 1032} <= ns and max(ns) >= 2048
    assert {32, 96, 160, 1408} <= ks and max(ks) >= 4096


@pytest.mark.parametrize("seed", SEEDS)
def test_generator_covers_every_configuration(seed):
    cases = _cases(seed)
    combos = {(c.bits, c.group, c.symmetric, gpu_sweep.DTYPES[c.dtype]) for c in cases}
    assert len(combos) == 32 and combos == {
        (b, g, s, d) for b in (4, 8) for g in (32, 64, 128, -1) for s in (True, False)
        for d in (torch.float16, torch.bfloat16)}
    # Each combination already within every 32 consecutive cases (shuffled rounds).
    assert len({(c.bits, c.group, c.symmetric, c.dtype) for c in cases[:32]}) == 32
    assert {c.bias for c in cases} == {True, False}
    kinds = {c.force.split(":")[0] for c in cases if c.force}
    assert kinds == {"mma", "wgmma", "dense", "splits", "mma-splits", "mma-slices", "decode",
                     "stream_k"}
    assert {c.force for c in cases if c.force and c.force.startswith("wgmma")} == \
        set(gpu_sweep.WGMMA_FORCES)
    assert any(c.force is None for c in cases)
    layer = [c for c in cases if c.layer_lead]
    assert len(layer) >= 20 and any(c.layer_lead[0] > 1 for c in layer)


@pytest.mark.parametrize("seed", SEEDS)
def test_generated_cases_are_valid(seed):
    for c in _cases(seed):
        assert 1 <= c.m <= gpu_sweep.M_MAX
        assert c.n % 8 == 0 and 8 <= c.n <= max(gpu_sweep.AWKWARD_NS)
        assert c.k % 32 == 0 and 32 <= c.k <= gpu_sweep.K_MAX
        assert c.group == -1 or c.k % c.group == 0
        assert c.m * c.n * c.k <= gpu_sweep.MAX_MNK
        if c.layer_lead:
            assert len(c.layer_lead) == 2 and math.prod(c.layer_lead) == c.m
        if c.force and c.force.startswith("decode"):
            _, warps, col_warps = c.force.split(":")
            assert c.m <= 8 and int(col_warps) in (1, 2, 4)
            assert 1 <= int(warps) <= 16 and int(warps) % int(col_warps) == 0
        assert gpu_sweep.Case.from_json(c.to_json()) == c
        json.loads(c.to_json())


# ------------------------------------------------------------------------------- schedules


def _case_schedule(case, device):
    return gpu_sweep.schedule_for(case.force, case.m, case.n, case.k, case.bits, case.group,
                                  gpu_sweep.DTYPES[case.dtype], cute_gemm.device_spec(device))


def test_schedule_for_each_force():
    h100, a100 = cute_gemm.device_spec("h100"), cute_gemm.device_spec("a100")

    def sched(force, m=64, spec=h100):
        return gpu_sweep.schedule_for(force, m, 4096, 4096, 4, 128, torch.float16, spec)

    assert sched(None) is None and sched("") is None
    assert sched("mma") == "kernel=mma"
    assert sched("wgmma:128") == "kernel=wgmma,tile_m=128"
    assert sched("wgmma:128", spec=a100) == "kernel=mma"  # no wgmma there: mma.sync
    assert sched("wgmma:16") == "kernel=wgmma,tile_m=16,scales=rounded"
    assert sched("wgmma:16:exact") == "kernel=wgmma,tile_m=16,scales=exact"
    assert gpu_sweep.schedule_for("wgmma:16", 12, 4096, 4096, 8, -1, torch.float16, h100) == \
        "kernel=wgmma,tile_m=32,scales=rounded"  # INT8 has no 16-row tile
    assert sched("wgmma:32:exact") == "kernel=wgmma,tile_m=32,scales=exact"
    assert sched("wgmma:32") == "kernel=wgmma,tile_m=32,scales=rounded"  # exact by default
    assert sched("wgmma:16:n64", m=16) == "kernel=wgmma,tile_m=16,tile_n=64,scales=rounded"
    assert gpu_sweep.schedule_for("wgmma:16:n64", 12, 4096, 4096, 8, -1, torch.float16, h100) == \
        "kernel=wgmma,tile_m=32,scales=rounded"  # INT8 has no 16-row tile, nor its 64-column form
    assert sched("wgmma:16:n64+splits:3", m=16) == \
        "kernel=wgmma,tile_m=16,tile_n=64,scales=rounded,splits=3"
    assert sched("dense") == "kernel=dense"
    assert sched("splits:5") == "splits=5"
    assert sched("splits:5", m=300) == "splits=5"  # wgmma on an H100
    assert sched("splits:5", m=300, spec=a100) == "kernel=mma,splits=5"  # not the dense path
    assert sched("mma-splits:3") == "kernel=mma,splits=3"
    assert sched("mma-slices", m=16) == "kernel=mma,k_slices=2"
    assert sched("mma-slices", m=17) == "kernel=mma"  # the 32-row tile has one slice
    assert gpu_sweep.schedule_for("mma-slices", 9, 4096, 4096, 8, -1, torch.float16, h100) == \
        "kernel=mma"  # INT8's 16-row tile too
    assert sched("decode:8:2", m=4) == "kernel=decode,warps=8,col_warps=2"
    assert sched("wgmma:64+splits:4") == "kernel=wgmma,tile_m=64,splits=4"
    assert sched("wgmma:64+splits:4", spec=a100) == "kernel=mma,splits=4"
    # stream_k:T: T / 10 CTAs per tile of 128 columns, within the tiles' k blocks, on INT4's
    # 16-row exact tile where it runs (M <= 16, groups of whole k blocks); nothing elsewhere.
    assert sched("stream_k:15", m=16) == \
        "kernel=wgmma,tile_m=16,tile_n=128,scales=exact,splits=1,stream_k=48"
    assert gpu_sweep.schedule_for("stream_k:35", 9, 520, 256, 4, -1, torch.float16, h100) == \
        "kernel=wgmma,tile_m=16,tile_n=128,scales=exact,splits=1,stream_k=10"  # 5 tiles x 2 blocks
    for m, bits, group, spec in ((17, 4, 128, h100), (16, 8, -1, h100), (16, 4, 32, h100),
                                 (16, 4, 128, a100)):
        assert gpu_sweep.schedule_for("stream_k:15", m, 4096, 4096, bits, group, torch.float16,
                                      spec) == ""
    # sk:T:D joined to a warp-specialized tile: about 10 / D waves' worth of tiles per CTA, a count
    # that leaves a tail of tiles past the full waves. M = 300, N = 4096: 3 x 32 = 96 tiles of 128
    # rows, 38 CTAs (2 waves and 20 tiles); 2 x 32 = 64 of 256 rows, 42 CTAs (1 wave and 22).
    assert sched("wgmma:128+sk:128:25", m=300) == "kernel=wgmma,tile_m=128,splits=1,stream_k=38"
    assert sched("wgmma:256+sk:256:15", m=300) == "kernel=wgmma,tile_m=256,splits=1,stream_k=42"
    assert sched("wgmma:256+sk:256:15", m=300, spec=a100) == "kernel=mma"
    with pytest.raises(ValueError, match="unknown force 'mma-cluster:3'"):
        sched("mma-cluster:3")


@pytest.mark.parametrize("seed", SEEDS)
def test_generated_schedules_run_on_h100_and_a100(seed):
    # Every case's schedule parses and plans on both kinds of GPU (no ValueError on the GPU run),
    # and a forced case runs what it asks for.
    for c in _cases(seed):
        for device in ("h100", "a100"):
            spec = cute_gemm.device_spec(device)
            schedule = _case_schedule(c, device)
            assert (schedule is None) == (c.force is None)
            plan = cute_gemm.mixed_plan(c.m, c.n, c.k, c.bits, c.group,
                                        gpu_sweep.DTYPES[c.dtype], device=spec, schedule=schedule)
            kind = c.force.split(":")[0] if c.force else None
            if kind in ("mma", "mma-splits", "mma-slices") or (kind == "wgmma" and
                                                              not spec.wgmma):
                assert plan.kernel == "mma"
            elif kind == "wgmma":
                tile_part, *joined = c.force.split("+")  # "wgmma:128+raster:3", "+sk:128:25"
                _, tile, *exact = tile_part.split(":")
                tile = 32 if tile == "16" and c.bits != 4 else int(tile)  # INT4's 16-row tile
                # From 64 rows the tile's default scales: exact in INT8's per-channel tiles.
                ws_exact = tile >= 64 and c.bits == 8 and (c.group == -1 or c.group >= c.k)
                assert (plan.kernel, plan.tile_m, plan.exact_scales) == (
                    "wgmma", tile, exact == ["exact"] or ws_exact)
                for part in joined:
                    if part.startswith("raster:"):
                        assert plan.producer and plan.raster_m == int(part.split(":")[1])
                    elif part.startswith("sk:"):  # stream-K where the tiles leave a tail
                        assert plan.producer and ("stream_k=" in schedule) == (
                            plan.stream_k_ctas > 0)
            elif kind in ("dense", "decode"):
                assert plan.kernel == kind
            if kind == "mma-slices":
                assert plan.k_slices == (2 if c.bits == 4 and c.m <= 16 else 1)
            if kind in ("splits", "mma-splits"):
                # The scheduled count, lowered so that no split is empty.
                k_blocks = -(-c.k // (128 if c.bits == 4 else 64))
                want = min(int(c.force.split(":")[1]), k_blocks)
                want = -(-k_blocks // -(-k_blocks // want))
                assert plan.kernel != "dense" and plan.splits == want
            if kind == "decode":
                _, warps, col_warps = c.force.split(":")
                assert plan.col_warps == int(col_warps) and plan.warps <= int(warps)


def test_probe_plans_on_h100_spec():
    # The probe's expectations hold for the built-in H100 spec (what the probe runs on), so a
    # planner change that moves a launch off its family fails here, without a GPU.
    for spec in sanitizer_probe.select():
        if spec["op"] != "mixed":
            continue
        plan = sanitizer_probe.mixed_plan(spec, "h100")
        assert sanitizer_probe._check_plan(plan, spec["expect"]) == "", \
            (sanitizer_probe._describe(spec), plan.describe())
    # On an A100 every non-wgmma launch still plans (the wgmma families are skipped there).
    for spec in sanitizer_probe.select():
        uses_wgmma = spec["family"].startswith("wgmma") or spec["expect"].get("kernel") == "wgmma"
        if spec["op"] == "mixed" and not uses_wgmma:
            plan = sanitizer_probe.mixed_plan(spec, "a100")
            assert sanitizer_probe._check_plan(plan, spec["expect"]) == "", \
                (sanitizer_probe._describe(spec), plan.describe())


def test_generator_is_deterministic():
    assert _cases(99, 50) == _cases(99, 50)
    assert _cases(99, 50) != _cases(100, 50)


# ------------------------------------------------------------------------ accuracy, CPU run


def test_check_accurate():
    g = torch.Generator().manual_seed(0)
    a = torch.randn(64, 256, generator=g).half()
    b = torch.randn(64, 256, generator=g).half()
    ref = a.double() @ b.double().t()
    out = ref.half()
    msg, max_err, rel = gpu_sweep.check_accurate(out, ref, torch.float16, 256)
    assert msg is None and max_err < 0.05 and rel < 1e-3
    bad = out.clone()
    bad[3, 7] += 0.25  # far outside the elementwise bound, within the norm-wise one
    msg, _, _ = gpu_sweep.check_accurate(bad, ref, torch.float16, 256)
    assert msg and "[3, 7]" in msg
    nan = out.clone()
    nan[0, 0] = float("nan")
    assert "NaN" in gpu_sweep.check_accurate(nan, ref, torch.float16, 256)[0]
    assert "dtype/shape" in gpu_sweep.check_accurate(out.bfloat16(), ref, torch.float16, 256)[0]
    assert "relative error" in gpu_sweep.check_accurate(-out, ref, torch.float16, 256)[0]


def test_sweep_runs_cases_on_cpu():
    # The run path (quantize, reference, QuantLinear with 3-D input, the check) on the ops' CPU
    # reference implementations: small cases from the generator plus a layer case.
    small = [c for c in _cases(5) if c.m * c.n * c.k <= 1 << 21][:6]
    small.append(gpu_sweep.Case(m=12, n=24, k=96, bits=4, group=32, symmetric=False,
                                dtype="bf16", bias=True, seed=3, layer_lead=[3, 4]))
    for case in small:
        msg, label, max_err, _ = gpu_sweep.run_case(case, "cpu")
        assert msg is None, (case, msg)
        assert label == "cpu" and max_err < math.inf


def test_sweep_main_on_cpu(capsys):
    assert gpu_sweep.main(["--device", "cpu", "--seed", "4", "--max-cases", "3"]) == 0
    out = capsys.readouterr().out
    assert "seed 4" in out and "PASS: 3 cases" in out
    case = gpu_sweep.Case(m=2, n=8, k=64, bits=8, group=-1, symmetric=True, dtype="fp16",
                          bias=False, seed=1)
    assert gpu_sweep.main(["--device", "cpu", "--case", case.to_json()]) == 0
    assert "ok: M=2 N=8 K=64" in capsys.readouterr().out


# ------------------------------------------------------------------------------------- GPU


def _run_script(*argv, timeout=300):
    env = dict(os.environ)
    env.pop("PYTORCH_NO_CUDA_MEMORY_CACHING", None)
    return subprocess.run([sys.executable, *argv], cwd=REPO_ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout)


@pytest.mark.gpu
def test_probe_on_gpu():
    # Without the sanitizer (scripts/gpu_check.sh runs it under memcheck/racecheck/synccheck).
    proc = _run_script(os.path.join("scripts", "sanitizer_probe.py"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "[probe] PASS" in proc.stdout and "FAIL" not in proc.stdout


@pytest.mark.gpu
def test_sweep_on_gpu():
    proc = _run_script(os.path.join("scripts", "gpu_sweep.py"), "--seed", "2024",
                       "--max-cases", "64", "--seconds", "120")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "PASS: 64 cases" in proc.stdout
