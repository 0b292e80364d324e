#!/usr/bin/env python3
"""Bounded-time, seeded random sweep of cute_gemm.mixed_gemm against an fp64 reference on the GPU.

    python3 scripts/gpu_sweep.py [--seconds 60] [--seed S] [--max-cases N] [-v]
    python3 scripts/gpu_sweep.py --case '{"m": 33, "n": 136, ...}'   # rerun one case
    python3 scripts/gpu_sweep.py --list 20 --seed S                   # print cases, no GPU

Each case draws M (1..~1100, biased towards the kernels' boundaries: the decode kernel up to 8
rows, mma.sync 9-16, the wgmma token tiles 32/64/128/256, the dense-path threshold 192 of
non-Hopper builds, several tiles at 512), N (multiples of 8, awkward ones like 8, 24, 136, 1032,
up to 4104), K (a multiple of the group size, of 32 per-channel; awkward ones like 32, 96, 160,
1408, up to 8192), bits, group size, symmetry, dtype and bias. The (bits, group, symmetric,
dtype) combinations and the M regions are drawn in shuffled rounds, so every combination appears
in every 32 cases and every M region in every len(M_REGIONS) cases. About a third of the cases
force a kernel, token tile, split-K plan, decode CTA shape or the dense path through the
schedule argument of cute_gemm.mixed_gemm (schedule_for; the rest take the default plan), and
about a fifth have a 3-D input: through cute_gemm.QuantLinear, or, when forced (the layer takes
no schedule), cute_gemm.mixed_gemm on the 3-D input.

Every output is checked against ``a @ W^T (+ bias)`` in fp64 with the criterion of
tests/helpers.py::assert_accurate (copied below). W is the weight the path computes with, chosen
as tests/test_mixed_gemm_gpu.py::_reference does: the exact ``dequantize(qw, torch.float32)``
where the fused kernel applies the scales in fp32 after exact integer products (the plan's
``exact_scales`` in cute_gemm.mixed_plan: decode, mma.sync, the exact wgmma 16- and 32-row
tiles), else the weight rounded to the activation dtype (``dequantize(qw)``: the other wgmma
tiles and the dense path). The output block is poisoned with NaN beforehand
(tests/helpers.py::poison_allocator), so an element the kernel never writes fails the check.

Prints the seed first; exits 1 at the first failure, printing the case as JSON with the command
line that reruns it alone (--case), 0 when the time is up with no failure, 2 without a GPU.
"""

import argparse
import dataclasses
import json
import math
import os
import random
import sys
import time
import traceback

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

import torch  # noqa: E402

import cute_gemm  # noqa: E402
from cute_gemm import weight_format as wf  # noqa: E402

DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}
BITS = list(wf.VALID_BITS)
GROUPS = list(wf.VALID_GROUP_SIZES)
# Every (bits, group_size, symmetric, dtype) configuration of mixed_gemm.
COMBOS = [(b, g, s, d) for b in BITS for g in GROUPS for s in (True, False) for d in DTYPES]

M_MAX = 1100
# Regions of M around the kernel boundaries (inclusive), plus "boundary" (exactly one of
# BOUNDARY_MS, in a shuffled cycle) and "any" (1..M_MAX, half uniform, half log-uniform).
M_REGIONS = {
    "decode": (1, 8),        # the decode kernel
    "mma": (9, 16),          # mma.sync, or wgmma's 16-row tiles (INT4) / 32-row tiles (INT8)
    "wgmma32": (17, 33),     # wgmma 32-row tiles, 33 takes 64 rows
    "m64": (60, 68),         # 64-row tiles (INT8: the TMA kernel) / 128-row tiles from 65
    "m128": (124, 132),      # 128-row tiles / 160-row tiles from 129
    "m192": (188, 196),      # the dense path from 192 where there is no wgmma kernel
    "m256": (252, 260),      # one 256-row tile / two 160-row tiles
    "m512": (508, 516),      # several 256-row tiles
    "boundary": None,
    "any": (1, M_MAX),
}
BOUNDARY_MS = [1, 2, 8, 9, 16, 17, 32, 33, 64, 65, 128, 129, 160, 161, 191, 192, 193, 256, 257,
               320, 321, 512, 513, 1024]
AWKWARD_NS = [8, 16, 24, 40, 56, 120, 136, 248, 264, 392, 520, 1032, 2056, 4104]
N_MAX = 4096
AWKWARD_KS = [32, 64, 96, 128, 160, 192, 640, 1408, 2080, 4224, 8192]
K_MAX = 8192
# Forced paths (schedules, see schedule_for), drawn in a shuffled cycle for about a third of the
# cases: "mma" (mma.sync at any M), "wgmma:T" (the wgmma kernel with T-row token tiles; Hopper
# sm_90a builds, mma.sync elsewhere; "wgmma:16" runs INT8 in 32-row tiles, INT4's only; rounded
# weights in the 16- and 32-row tiles, or with an ":exact" suffix the tile with exact scales,
# the default scales from 64 rows (exact in INT8's per-channel tiles); ":n64" INT4's 16-row tile
# in 64 columns per CTA),
# "dense" (dequantize + dense GEMM), "splits:S" (S k
# splits of the default kernel, mma.sync where that is the dense path), "mma-splits:S" (mma.sync
# with S splits), "mma-slices" (mma.sync in CTAs of 2 k slices where the 16-row INT4 tile runs
# them, M <= 16; plain mma.sync elsewhere), "decode:W:C" (the decode kernel with W warps per CTA
# in k slices of C; only for M <= 8), "raster:R" (joined to a warp-specialized wgmma tile: its
# tiles in groups of R M tiles; in WGMMA_FORCES joined to 128- and 256-row tiles), "sk:T:D"
# (joined to the warp-specialized T-row tile: stream-K over about 10 / D of a wave per tile, so
# full waves of whole tiles and the rest shared; in WGMMA_FORCES with D 2.5 and 1.5). The splits
# always meet in the workspace (fp32 partial sums, then the reduce kernel). The wgmma tiles share
# four places of the cycle (WGMMA_FORCES, in shuffled rounds).
FORCE_KINDS = ["mma", "wgmma", "wgmma", "wgmma", "wgmma", "dense", "splits", "mma-splits",
               "mma-slices", "decode", "stream_k"]
WGMMA_FORCES = ["wgmma:16", "wgmma:16:n64", "wgmma:16:exact", "wgmma:32", "wgmma:32:exact",
                "wgmma:64", "wgmma:64:cp_async", "wgmma:128", "wgmma:160", "wgmma:192",
                "wgmma:256",
                "wgmma:128+raster:3", "wgmma:256+raster:2", "wgmma:128+sk:128:25",
                "wgmma:256+sk:256:15"]
FORCED_FRACTION = 0.35
LAYER_FRACTION = 0.2
# Cases above this many multiply-adds get a smaller N (keeps each case in the milliseconds).
MAX_MNK = 1 << 34


@dataclasses.dataclass
class Case:
    m: int
    n: int
    k: int
    bits: int
    group: int
    symmetric: bool
    dtype: str             # "fp16" or "bf16"
    bias: bool
    seed: int              # the tensors' generator seed
    force: str | None = None
    region: str = "case"   # where M was drawn from (for the coverage report)
    layer_lead: list | None = None  # run through QuantLinear with input [*layer_lead, K]

    def to_json(self):
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text):
        return cls(**json.loads(text))

    def describe(self):
        g = "pc" if self.group == -1 else f"g{self.group}"
        text = (f"M={self.m} N={self.n} K={self.k} int{self.bits} {g} "
                f"{'sym' if self.symmetric else 'asym'} {self.dtype}"
                f"{' bias' if self.bias else ''}")
        if self.force:
            text += f" force={self.force}"
        if self.layer_lead:
            text += f" QuantLinear{tuple(self.layer_lead) + (self.k,)}"
        return text


# --------------------------------------------------------------------------- case generation


class _Cycle:
    """Draws from `items` in shuffled rounds: every item once per len(items) draws."""

    def __init__(self, rng, items):
        self.rng, self.items, self.pending = rng, list(items), []

    def next(self):
        if not self.pending:
            self.pending = list(self.items)
            self.rng.shuffle(self.pending)
        return self.pending.pop()


def _log_uniform(rng, lo, hi):
    return min(hi, max(lo, int(math.exp(rng.uniform(math.log(lo), math.log(hi + 1))))))


def _draw_m(rng, region, boundary):
    if region == "boundary":
        return boundary.next()
    lo, hi = M_REGIONS[region]
    if region == "any" and rng.random() < 0.5:
        return _log_uniform(rng, lo, hi)
    return rng.randint(lo, hi)


def _draw_n(rng):
    if rng.random() < 0.4:
        return rng.choice(AWKWARD_NS)
    if rng.random() < 0.5:
        return wf.BLOCK_N * _log_uniform(rng, 1, N_MAX // wf.BLOCK_N)
    return wf.BLOCK_N * rng.randint(1, N_MAX // wf.BLOCK_N)


def _draw_k(rng, group):
    unit = wf.k_multiple(group)  # the op needs K % G == 0 (K % 32 == 0 for per-channel)
    awkward = [k for k in AWKWARD_KS if k % unit == 0]
    if rng.random() < 0.4:
        return rng.choice(awkward)
    if rng.random() < 0.5:
        return unit * _log_uniform(rng, 1, K_MAX // unit)
    return unit * rng.randint(1, K_MAX // unit)


def _draw_force(rng, m, kinds, wgmma_tiles):
    kind = kinds.next()
    if kind == "decode" and m > 8:
        # The decode kernel runs M <= 8 only: this case takes the next kind, the next forced case
        # decode (so every round's decode is run).
        kind = kinds.next()
        kinds.pending.append("decode")
    if kind == "splits":
        return f"splits:{rng.choice([2, 3, 5, 8, 64])}"
    if kind == "mma-splits":
        return f"mma-splits:{rng.randint(2, 8)}"
    if kind == "wgmma":
        return wgmma_tiles.next()
    if kind == "stream_k":
        return f"stream_k:{rng.choice([10, 12, 15, 20, 35])}"
    if kind == "decode":
        if m > 8:
            return "mma"  # a new round's decode drawn right after a deferred one
        col_warps = rng.choice([1, 2, 4])
        return f"decode:{col_warps * rng.randint(1, 16 // col_warps)}:{col_warps}"
    return kind


def generate_cases(seed):
    """An endless generator of Cases, determined by `seed`."""
    rng = random.Random(seed)
    combos = _Cycle(rng, COMBOS)
    regions = _Cycle(rng, list(M_REGIONS))
    boundary = _Cycle(rng, BOUNDARY_MS)
    forces = _Cycle(rng, FORCE_KINDS)
    wgmma_tiles = _Cycle(rng, WGMMA_FORCES)
    while True:
        bits, group, symmetric, dtype = combos.next()
        region = regions.next()
        m = _draw_m(rng, region, boundary)
        n = _draw_n(rng)
        k = _draw_k(rng, group)
        while m * n * k > MAX_MNK and n > 8:
            n = max(8, (n // 2) // 8 * 8)
        force = _draw_force(rng, m, forces, wgmma_tiles) if rng.random() < FORCED_FRACTION else None
        lead = None
        if rng.random() < LAYER_FRACTION:
            b = rng.choice([d for d in range(1, min(m, 16) + 1) if m % d == 0])
            lead = [b, m // b]
        yield Case(m=m, n=n, k=k, bits=bits, group=group, symmetric=symmetric, dtype=dtype,
                   bias=rng.random() < 0.5, seed=rng.randrange(1 << 31), force=force,
                   region=region, layer_lead=lead)


# ------------------------------------------------------------------- accuracy (tests/helpers.py)

# Norm-wise relative error bound against an fp64 reference of the (exact) half inputs: fp32
# accumulation leaves essentially only the final rounding (unit roundoff 2^-11 for fp16, 2^-8 for
# bf16), so these have a few x of headroom. (tests/helpers.py: REL_ERR, assert_accurate.)
REL_ERR = {torch.float16: 2e-3, torch.bfloat16: 1e-2}


def check_accurate(out, ref, dtype, k):
    """tests/helpers.py::assert_accurate as a function: returns (failure message or None,
    max |out - ref|, norm-wise relative error). Norm-wise relative error below REL_ERR, and
    elementwise |out - ref| <= eps * sqrt(K) + eps * |ref| (one ulp of rtol; an atol of one eps
    times sqrt(K), the typical magnitude of a sum of K unit-variance products, so entries near
    zero get the same absolute slack as typical ones)."""
    if out.dtype != dtype or tuple(out.shape) != tuple(ref.shape):
        return (f"output dtype/shape {out.dtype} {list(out.shape)}, want {dtype} "
                f"{list(ref.shape)}"), math.inf, math.inf
    nan = int(out.isnan().sum())
    if nan:
        return f"{nan} NaN element(s) in the output (never written, or computed NaN)", \
            math.inf, math.inf
    diff = out.double() - ref
    max_err = diff.abs().max().item() if diff.numel() else 0.0
    rel = (diff.norm() / ref.norm().clamp_min(1e-30)).item()
    if not rel < REL_ERR[dtype]:
        return f"relative error {rel:.3e} >= {REL_ERR[dtype]:.0e}", max_err, rel
    eps = torch.finfo(dtype).eps
    atol = eps * math.sqrt(max(k, 1))
    bad = diff.abs() > atol + eps * ref.abs()
    if bad.any():
        i, j = (int(x) for x in bad.nonzero()[0])
        return (f"{int(bad.sum())} elements out of tolerance, e.g. [{i}, {j}]: got "
                f"{out[i, j].item()}, want {ref[i, j].item()} (atol {atol:.2e}, rtol "
                f"{eps:.2e})"), max_err, rel
    return None, max_err, rel


def reference(a2d, qw, bias, exact):
    """fp64 ``a @ W^T (+ bias)``: W exact (``dequantize(qw, torch.float32)``) or rounded to the
    activation dtype (``dequantize(qw)``)."""
    w = cute_gemm.dequantize(qw, torch.float32 if exact else None)
    out = a2d.double() @ w.double().t()
    if bias is not None:
        out += bias.double()
    return out


def _schedule_part(part, m, n, k, bits, group, dtype, spec):
    kind, *args = part.split(":")
    if kind == "mma":
        return "kernel=mma"
    if kind == "wgmma":
        if not spec.wgmma:
            return "kernel=mma"
        int4_16 = int(args[0]) == 16 and bits == 4  # 16 rows (and 64 columns): INT4 only
        tile_m = int(args[0]) if int4_16 or int(args[0]) != 16 else 32
        # Rounded weights unless ":exact": the 16- and 32-row tiles' default depends on the
        # groups. ":cp_async": the cp.async form of INT4's 64-row tile (INT8's is TMA-filled).
        exact = args[1:] == ["exact"]
        return (f"kernel=wgmma,tile_m={tile_m}" +
                (",scales=exact" if exact else ",scales=rounded" if tile_m <= 32 else "") +
                (",tile_n=64" if args[1:] == ["n64"] and int4_16 else "") +
                (",loads=cp_async" if args[1:] == ["cp_async"] and bits == 4 else ""))
    if kind == "dense":
        return "kernel=dense"
    if kind == "splits":
        # The dense path has no splits: there the fused mma.sync kernel takes them.
        dense = cute_gemm.mixed_plan(m, n, k, bits, group, dtype, device=spec).kernel == "dense"
        return ("kernel=mma," if dense else "") + f"splits={int(args[0])}"
    if kind == "mma-splits":
        return f"kernel=mma,splits={int(args[0])}"
    if kind == "mma-slices":
        return "kernel=mma" + (",k_slices=2" if bits == 4 and m <= 16 else "")
    if kind == "decode":
        return f"kernel=decode,warps={int(args[0])},col_warps={int(args[1])}"
    if kind == "raster":  # only joined to a warp-specialized wgmma tile ("wgmma:128+raster:3")
        return f"raster_m={int(args[0])}" if spec.wgmma else ""  # mma.sync runs row-major
    if kind == "tile_n":  # joined to INT4's 16-row tile ("wgmma:16:exact+tile_n:64")
        return f"tile_n={int(args[0])}" if spec.wgmma and bits == 4 else ""
    if kind == "stream_k":  # CTAs per tile, tenths ("stream_k:15": 1.5 x the tiles; INT4's
        # 16-row exact tile in 128 columns, unsplit, groups of whole k blocks, M <= 16)
        if not (spec.wgmma and bits == 4 and m <= 16 and (group == -1 or group % 128 == 0)):
            return ""
        tiles = -(-n // 128)
        k_blocks = -(-k // 128)
        ctas = min(tiles * k_blocks, max(tiles, tiles * int(args[0]) // 10))
        return f"kernel=wgmma,tile_m=16,tile_n=128,scales=exact,splits=1,stream_k={ctas}"
    if kind == "sk":  # joined to a warp-specialized tile ("wgmma:128+sk:128:25")
        if not spec.wgmma:
            return ""
        tile_m, tenths = int(args[0]), int(args[1])
        tiles = -(-n // 128) * -(-m // tile_m)
        k_blocks = -(-k // (128 if bits == 4 else 64))
        ctas = max(1, tiles * 10 // tenths)
        # A count that leaves tiles past the full waves, each CTA of them a k block.
        while ctas > 1 and (tiles % ctas == 0 or ctas > tiles % ctas * k_blocks):
            ctas -= 1
        return f"splits=1,stream_k={ctas}" if tiles % ctas else ""
    if kind == "reduce":  # joined to split-K ("wgmma:16:n64+splits:3+reduce:kernel")
        return f"reduce={args[0]}" if spec.wgmma or args[0] != "cluster" else ""
    raise ValueError(f"unknown force {part!r}")


def schedule_for(force, m, n, k, bits, group, dtype, spec):
    """The mixed_gemm schedule (a string, or None) of a Case.force string (FORCE_KINDS; several
    joined by "+", e.g. "wgmma:64+splits:4") for an [m, k] x [n, k] problem on device `spec` (a
    cute_gemm.DeviceSpec): "wgmma:T" runs mma.sync where the device has no wgmma kernels."""
    if not force:
        return None
    items = {}
    for part in force.split("+"):
        for item in filter(None, _schedule_part(part, m, n, k, bits, group, dtype,
                                                spec).split(",")):
            key, value = item.split("=")
            items[key] = value
    return cute_gemm._C._mixed_schedule(",".join(f"{k}={v}" for k, v in items.items()))


def plan_of(m, qw, schedule=None, device=None):
    """What a mixed_gemm call of M rows with this weight and schedule runs: a
    cute_gemm.MixedPlan, on `device` (a spec or a built-in name; default the weight's GPU)."""
    n, k = qw.shape
    return cute_gemm.mixed_plan(m, n, k, qw.bits, qw.group_size, qw.dtype,
                                device=qw.device if device is None else device,
                                schedule=schedule)


def exact_weight(plan):
    """Whether the path computes with the exact dequantized weight (see the module docstring)."""
    return plan.kernel != "dense" and bool(plan.exact_scales)


def plan_label(plan):
    if plan.kernel == "dense":
        return "dense"
    label = f"{plan.kernel}/t{plan.tile_m}"
    if plan.kernel == "wgmma" and plan.tile_n == 64:
        label += "/n64"
    if plan.kernel == "decode":
        label += f"/w{plan.warps}x{plan.col_warps}"
    if plan.splits > 1:
        label += f"/s{plan.splits}"
    return label


# ---------------------------------------------------------------------------------- running


def _randn(*shape, dtype, seed, device):
    g = torch.Generator(device=device).manual_seed(seed)
    return torch.randn(*shape, generator=g, device=device).to(dtype)


def poison_allocator(*numels, dtype):
    """tests/helpers.py::poison_allocator: leave NaN-filled blocks of these sizes in torch's
    caching allocator, which hands them back for the next allocations of the same size on the
    stream, so the op's output starts as NaN wherever the kernel fails to write. Returns their
    pointers."""
    blocks = [torch.full((n,), float("nan"), dtype=dtype, device="cuda") for n in numels]
    ptrs = [t.data_ptr() for t in blocks]
    del blocks
    return ptrs


def run_case(case, device="cuda"):
    """Runs one case. Returns (failure message or None, plan label, max error, whether the
    output landed in a poisoned block). device="cpu" runs the ops' CPU reference implementations
    (which compute with the weight rounded to the activation dtype and only check the schedule,
    here the one for an H100): a self-test of this script without a GPU, not a test of the
    kernels."""
    dtype = DTYPES[case.dtype]
    m, n, k = case.m, case.n, case.k
    cuda = torch.device(device).type == "cuda"
    spec = cute_gemm.device_spec(torch.device(device) if cuda else "h100")
    schedule = schedule_for(case.force, m, n, k, case.bits, case.group, dtype, spec)
    # Unit-variance weights and activations, as the tolerances assume.
    w = _randn(n, k, dtype=dtype, seed=case.seed, device=device)
    qw = cute_gemm.quantize(w, case.bits, case.group, case.symmetric)
    a = _randn(m, k, dtype=dtype, seed=case.seed + 1, device=device)
    bias = _randn(n, dtype=dtype, seed=case.seed + 2, device=device) if case.bias else None
    plan = plan_of(m, qw, schedule, spec)
    if cuda:
        label = plan_label(plan)
        if plan.kernel != "dense" and plan.tile_m == 0:
            return "the plan found no kernel instance (tile_m 0)", label, math.inf, False
        ref = reference(a, qw, bias, exact_weight(plan))
    else:
        label = "cpu"
        ref = reference(a, qw, bias, False)
    ptrs = []
    if cuda:
        torch.cuda.synchronize()
        # The dense path first allocates the dequantized [N, K] weight, then the output; poison
        # both (the output size twice: a split-K workspace may take one block of the same size).
        sizes = ([n * k] if plan.kernel == "dense" else []) + [m * n, m * n]
        ptrs = poison_allocator(*sizes, dtype=dtype)
    if case.layer_lead:
        a3 = a.reshape(*case.layer_lead, k)
        if schedule is None:
            layer = cute_gemm.QuantLinear.from_quantized(qw, bias=bias)
            with torch.inference_mode():
                out3 = layer(a3)
        else:  # the layer takes no schedule: the op with the same 3-D input
            out3 = cute_gemm.mixed_gemm(a3, qw, bias, schedule=schedule)
        if list(out3.shape) != list(case.layer_lead) + [n]:
            return f"3-D output shape {list(out3.shape)}", label, math.inf, False
        out = out3.reshape(m, n)
    else:
        out = cute_gemm.mixed_gemm(a, qw, bias, schedule=schedule)
    poisoned = out.data_ptr() in ptrs
    if cuda:
        torch.cuda.synchronize()
    msg, max_err, _ = check_accurate(out, ref, dtype, k)
    if msg is None and not bool(torch.isfinite(out).all()):
        msg = "non-finite output"
    return msg, label, max_err, poisoned


def _report_failure(index, case, msg, seed, device):
    print(f"[sweep] FAIL case {index} (seed {seed}): {case.describe()}", flush=True)
    print(f"[sweep]   {msg}", flush=True)
    print(f"[sweep]   case: {case.to_json()}", flush=True)
    extra = "" if device == "cuda" else f" --device {device}"
    print(f"[sweep]   rerun: python3 scripts/gpu_sweep.py{extra} --case '{case.to_json()}'",
          flush=True)


def _run_guarded(case, device):
    try:
        return run_case(case, device)
    except Exception:  # noqa: BLE001 -- an op error or a CUDA fault is a failure of this case
        return "exception:\n" + traceback.format_exc(), "?", math.inf, False


def build_parser():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seconds", type=float, default=60.0,
                   help="stop starting new cases after this many seconds (default 60)")
    p.add_argument("--seed", type=int, default=None,
                   help="the case generator's seed (default: random, printed)")
    p.add_argument("--max-cases", type=int, default=None, help="stop after this many cases")
    p.add_argument("--case", default=None, help="run one case given as the JSON a failure prints")
    p.add_argument("--list", type=int, default=None, metavar="N",
                   help="print the first N cases of --seed as JSON and exit (no GPU needed)")
    p.add_argument("--device", default="cuda",
                   help="cuda (default); cpu runs the ops' CPU reference implementations, a "
                        "self-test of this script without a GPU")
    p.add_argument("-v", "--verbose", action="store_true", help="print every case")
    return p


def main(argv=None):
    args = build_parser().parse_args(argv)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 31)
    if args.list is not None:
        gen = generate_cases(seed)
        for _ in range(args.list):
            print(next(gen).to_json())
        return 0
    cuda = torch.device(args.device).type == "cuda"
    if cuda and not torch.cuda.is_available():
        print("[sweep] no CUDA device: nothing to sweep", flush=True)
        return 2
    torch.backends.cuda.matmul.allow_tf32 = False
    if args.case is not None:
        case = Case.from_json(args.case)
        msg, label, max_err, poisoned = _run_guarded(case, args.device)
        if msg:
            _report_failure(0, case, msg, None, args.device)
            return 1
        print(f"[sweep] ok: {case.describe()} plan={label} max_abs_err={max_err:.3e} "
              f"poisoned={poisoned}", flush=True)
        return 0

    caching = os.environ.get("PYTORCH_NO_CUDA_MEMORY_CACHING", "0") in ("", "0")
    where = "CPU (self-test)"
    if cuda:
        spec = cute_gemm.device_spec()
        kernels = ", ".join(f"M={m} {cute_gemm.mixed_plan(m, 4096, 4096, device=spec).kernel}"
                            for m in (1, 16, 64, 256))
        where = (f"device {torch.cuda.get_device_name()}; wgmma kernels: {spec.wgmma}; default "
                 f"plans at 4096x4096: {kernels}")
    print(f"[sweep] seed {seed} (rerun: python3 scripts/gpu_sweep.py --seed {seed}); "
          f"{args.seconds:g} s; {where}", flush=True)
    if cuda and not caching:
        print("[sweep] note: PYTORCH_NO_CUDA_MEMORY_CACHING is set, so outputs are not poisoned",
              flush=True)
    t0 = time.monotonic()
    last_report = t0
    by_plan, by_region = {}, {}
    poisoned_count = layer_count = lead_count = forced_count = 0
    index = 0
    for index, case in enumerate(generate_cases(seed)):
        if args.max_cases is not None and index >= args.max_cases:
            break
        if time.monotonic() - t0 >= args.seconds:
            break
        msg, label, max_err, poisoned = _run_guarded(case, args.device)
        if msg:
            _report_failure(index, case, msg, seed, args.device)
            return 1
        kernel = label.split("/")[0] + ("/" + label.split("/")[1] if "/" in label else "")
        by_plan[kernel] = by_plan.get(kernel, 0) + 1
        by_region[case.region] = by_region.get(case.region, 0) + 1
        poisoned_count += poisoned
        layer_count += bool(case.layer_lead) and not case.force
        lead_count += bool(case.layer_lead)
        forced_count += bool(case.force)
        if args.verbose:
            print(f"[sweep] {index:5d} ok {case.describe()} plan={label} "
                  f"max_abs_err={max_err:.3e}", flush=True)
        elif time.monotonic() - last_report > 10:
            last_report = time.monotonic()
            print(f"[sweep] {index + 1} cases ok after {last_report - t0:.0f} s", flush=True)
    cases = index  # the generator is endless: the loop ends at a break, before case `index`
    print(f"[sweep] PASS: {cases} cases in {time.monotonic() - t0:.1f} s, seed {seed}; "
          f"{forced_count} forced (a schedule), {lead_count} with a 3-D input ({layer_count} "
          f"through QuantLinear), "
          f"{poisoned_count} with a poisoned output block", flush=True)
    print("[sweep] cases per kernel/tile: " +
          ", ".join(f"{k} {v}" for k, v in sorted(by_plan.items())), flush=True)
    print("[sweep] cases per M region: " +
          ", ".join(f"{k} {v}" for k, v in sorted(by_region.items())), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
