"""Benchmark cute_gemm.mixed_gemm (INT4/INT8 weight, fp16 activations) against torch.

    python benchmarks/bench_mixed_gemm.py [--quick] [--out DIR] [--shapes KxN,...] [--ms 1,16,...]

For each weight shape K x N (the nn.Linear weight is [N, K]) and each M, four kernels compute
out[M, N] = a[M, K] @ W^T:

    fp16        torch.nn.functional.linear(a, w), a and w fp16 (cuBLAS): the baseline
    ours_int4   cute_gemm.mixed_gemm(a, qw), qw = quantize(w, bits=4, group_size=128, symmetric)
    ours_int8   cute_gemm.mixed_gemm(a, qw), qw = quantize(w, bits=8, group_size=-1 (per channel))
    torch_int4  torch._weight_int4pack_mm(a_bf16, packed, 128, scales_and_zeros), torch's own
                int4 format (asymmetric, group 128, inner_k_tiles 8; bf16 activations). If the
                installed torch lacks this API or packs differently, its rows say "n/a (reason)"
                and the run goes on.

Times are per call, from CUDA-graph replays (common.time_graph): the graph calls the kernel on each
of several weight copies in turn, enough copies that together they exceed twice the L2 cache, so
every call streams its weight from DRAM as in a real decoder layer (the activation stays the
same). Reported per (shape, M, kernel): us, speedup over fp16 (fp16 us / us), weight GB/s (the
bytes of the weight as stored: packed + scales (+ zeros) for ours, N*K*2 for fp16, packed +
scales_and_zeros for torch int4, divided by the time), that as a fraction of the device copy
bandwidth (a large device-to-device copy, bytes read + written, measured once), and TFLOP/s
(2 M N K / t).

Each row names the kernel that ran ("kernel run"): for ours the plan of the call
(cute_gemm.mixed_plan: kernel and instance, split-K; its describe() line in the JSON as
"plan_detail"), for the baselines the torch function.

Correctness spot check for every (shape, M, kernel): max|out - ref| / max|ref|, ref the fp32
matmul of the same activations with the dequantized weight. Ours: ok below 1e-2, warn up to 2e-2,
WRONG above (or non-finite output, or an exception) and the script exits 1 at the end. The
baselines' errors are reported only ("suspect" above 2e-2).

Writes mixed_gemm_<gpu>.json, .md and .png (speedup over fp16 vs M, one panel per shape; needs
matplotlib) under --out (default benchmarks/results/), and prints a compact table at the end.
"""

import argparse
import contextlib
import math
import os
import sys
import time
import warnings
from dataclasses import dataclass, field

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import common  # noqa: E402

SHAPES = common.DECODER_SHAPES_KN  # (K, N)
# Issue 20's M values, and 160 / 320 / 640 where the 160-row token tile runs (the tiles fit M
# between 256 and 640 worst; NOTES sessions 22-23).
MS = [1, 2, 4, 8, 16, 32, 64, 128, 160, 256, 320, 384, 512, 640, 1024, 4096]
QUICK_SHAPES = [(4096, 4096), (8192, 8192), (28672, 8192)]
QUICK_MS = [1, 16, 64, 256, 1024]

GROUP_SIZE = 128
TORCH_INT4_INNER_K_TILES = 8
ERR_OK = 1e-2      # ours: ok below this
ERR_WRONG = 2e-2   # ours: WRONG above this (exit status 1)

# (key, short label for tables, plot label)
KERNELS = [
    ("fp16", "fp16", "torch fp16 (F.linear)"),
    ("ours_int4", "int4", "ours INT4 g128"),
    ("ours_int8", "int8", "ours INT8 per-channel"),
    ("torch_int4", "t-int4", "torch int4 g128 (bf16)"),
]
OURS = ("ours_int4", "ours_int8")


# ------------------------------------------------------------------------------ arguments


def _int_list(text):
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad list {text!r}; expected e.g. 1,16,64")


def _shape_list(text):
    shapes = []
    for item in text.split(","):
        try:
            k, n = (int(x) for x in item.lower().split("x"))
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"bad shape {item!r}; expected KxN (weight K x N, nn.Linear weight [N, K]), "
                f"e.g. 4096x28672")
        shapes.append((k, n))
    return shapes


def parse_args(argv=None):
    p = argparse.ArgumentParser(
        description="Benchmark cute_gemm.mixed_gemm (INT4 g128 and INT8 per-channel weights, fp16 "
                    "activations) against torch fp16 F.linear and torch._weight_int4pack_mm on a "
                    "CUDA GPU.",
        epilog="Full run: weight K x N in {4096x4096, 4096x28672, 14336x4096, 8192x8192, "
               "28672x8192}, M in {1,2,4,8,16,32,64,128,160,256,320,384,512,640,1024,4096} "
               "(about a minute on an H100). --quick: 4096x4096, 8192x8192, 28672x8192 and M "
               "up to 1024. Exits 1 if one of our results is WRONG (relative error above 2e-2) "
               "or our kernel raised.")
    p.add_argument("--quick", action="store_true", help="3 shapes, M up to 1024")
    p.add_argument("--out", default=common.DEFAULT_OUT_DIR,
                   help="output directory (default: benchmarks/results/)")
    p.add_argument("--shapes", type=_shape_list, default=None,
                   help="comma-separated weight shapes KxN; overrides the sweep's shapes")
    p.add_argument("--ms", type=_int_list, default=None,
                   help="comma-separated M values; overrides the sweep's M values")
    p.add_argument("--replays", type=int, default=10,
                   help="timed graph replays per measurement; the median is reported")
    p.add_argument("--rounds", type=int, default=1,
                   help="measurements per kernel, interleaved across the kernels of each case; "
                        "the median is reported (use 3 or more where the GPU's clocks drift, "
                        "as at large M under its power limit)")
    p.add_argument("--no-plot", action="store_true", help="skip the PNG plot")
    return p.parse_args(argv)


# ------------------------------------------------------------------------------ kernels


def _short(exc, limit=160):
    text = str(exc).strip().splitlines()
    text = text[0] if text else ""
    text = f"{type(exc).__name__}: {text}"
    return text if len(text) <= limit else text[:limit - 3] + "..."


@contextlib.contextmanager
def _no_tf32():
    old = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old


def rel_err(out, a, w_ref):
    """max|out - a @ w_ref^T| / max|a @ w_ref^T|, the reference in fp32 (no TF32); inf when out
    has a non-finite value."""
    out = out.float()
    if not bool(torch.isfinite(out).all()):
        return math.inf
    with _no_tf32():
        ref = torch.matmul(a.float(), w_ref.float().t())
    return ((out - ref).abs().max() / ref.abs().max().clamp_min(1e-30)).item()


def classify(err, ours):
    if err is None:
        return "n/a"
    if err <= ERR_OK:
        return "ok"
    if err <= ERR_WRONG:
        return "warn"
    return "WRONG" if ours else "suspect"


@dataclass
class Candidate:
    """One kernel on one weight shape: the rotated weight copies and how to call it."""
    key: str
    call: object = None                 # call(a, weight_copy) -> out [M, N]
    copies: list = field(default_factory=list)
    weight_bytes: int = 0               # bytes of one weight copy as stored
    act_dtype: torch.dtype = torch.float16
    ref_weight: torch.Tensor = None     # [N, K] (dequantized) weight for the spot check
    na: str = None                      # set when the kernel is unavailable: "n/a (reason)"
    bits: int = None                    # ours: the weight's bits and group size (for the plan)
    group: int = None
    runs: str = None                    # the baselines: what runs ("kernel run" column)


def _rotation(first, clone, nbytes, min_bytes):
    return common.make_rotation(lambda i: first if i == 0 else clone(first), nbytes,
                                min_bytes=min_bytes, max_copies=256)


def torch_int4_quantize(w, group_size):
    """w [N, K] in torch's int4 format (as torch's test_linalg and gpt-fast build it):
    asymmetric min/max per group of K, q in [0, 15], w ~ (q - 8) * scale + zero with
    zero = min + 8 * scale. Returns q int32 [N, K], scales_and_zeros bf16 [K/G, N, 2] and the
    dequantized weight (fp32, from the bf16 scales and zeros)."""
    n, k = w.shape
    g = w.float().reshape(n, k // group_size, group_size)
    lo, hi = g.amin(-1, keepdim=True), g.amax(-1, keepdim=True)
    scale = (hi - lo).clamp(min=1e-6) / 15
    zero = lo + 8 * scale
    q = ((g - lo) / scale).round().clamp(0, 15).to(torch.int32)
    sz = torch.cat([scale, zero], dim=-1).to(torch.bfloat16)  # [N, K/G, 2]
    deq = (q.float() - 8) * sz[..., :1].float() + sz[..., 1:].float()
    return q.reshape(n, k), sz.transpose(0, 1).contiguous(), deq.reshape(n, k)


def torch_int4_pack(q, inner_k_tiles):
    """torch's packed int4 weight from q int32 [N, K]. torch >= 2.5 takes uint8 [N, K/2] (two
    nibbles, the even k in the high one); older versions take int32 [N, K]. Returns (packed,
    input variant); raises RuntimeError naming both failures."""
    q_u8 = ((q[:, ::2] << 4) | q[:, 1::2]).to(torch.uint8)
    errors = []
    for variant, arg in (("uint8 [N, K/2]", q_u8), ("int32 [N, K]", q)):
        try:
            return torch.ops.aten._convert_weight_to_int4pack(arg, inner_k_tiles), variant
        except Exception as e:  # noqa: BLE001  (any API difference: report, do not die)
            errors.append(f"{variant} input: {_short(e, 100)}")
    raise RuntimeError("_convert_weight_to_int4pack failed; " + "; ".join(errors))


def make_candidates(cute_gemm, w, min_bytes):
    """The four kernels on weight w [N, K] fp16, each with its rotated weight copies.
    Returns (candidates, torch_int4_variant or None)."""
    n, k = w.shape
    cands = [Candidate("fp16", call=lambda a, b: F.linear(a, b),
                       copies=_rotation(w, torch.clone, n * k * 2, min_bytes),
                       weight_bytes=n * k * 2, ref_weight=w, runs="F.linear (cuBLAS)")]
    for key, bits, group in (("ours_int4", 4, GROUP_SIZE), ("ours_int8", 8, -1)):
        try:
            qw = cute_gemm.quantize(w, bits=bits, group_size=group, symmetric=True)
            nbytes = qw.nbytes
            cands.append(Candidate(key, call=cute_gemm.mixed_gemm,
                                   copies=_rotation(qw, common.clone_quantized, nbytes, min_bytes),
                                   weight_bytes=nbytes, ref_weight=cute_gemm.dequantize(qw),
                                   bits=bits, group=group))
        except Exception as e:  # noqa: BLE001  (reported as ERROR; the run goes on)
            cands.append(Candidate(key, na=f"ERROR ({_short(e)})", bits=bits, group=group))
    variant = None
    try:
        q, sz, deq = torch_int4_quantize(w, GROUP_SIZE)
        packed, variant = torch_int4_pack(q, TORCH_INT4_INNER_K_TILES)
        del q
        nbytes = packed.nbytes + sz.nbytes
        cands.append(Candidate(
            "torch_int4",
            call=lambda a, b: torch._weight_int4pack_mm(a, b[0], GROUP_SIZE, b[1]),
            copies=_rotation((packed, sz), lambda p: (p[0].clone(), p[1].clone()), nbytes,
                             min_bytes),
            weight_bytes=nbytes, act_dtype=torch.bfloat16, ref_weight=deq,
            runs="torch._weight_int4pack_mm"))
    except Exception as e:  # noqa: BLE001
        cands.append(Candidate("torch_int4", na=f"n/a ({_short(e)})"))
    return cands, variant


# ------------------------------------------------------------------------------ the sweep


def plan_label(plan):
    """The kernel a plan runs, short: kernel and instance, with its split count (or the dense
    path)."""
    if plan.kernel == "dense":
        return "dense (dequantize + cuBLAS)"
    label = f"{plan.kernel} {plan.instance}"
    if plan.kernel == "decode":
        label += f" w{plan.warps}x{plan.col_warps}"
    if plan.splits > 1:
        label += f" split-K {plan.splits}"
    return label


def kernel_run(cute_gemm, c, m, n, k):
    """(label, detail) of what candidate c runs at M: ours from cute_gemm.mixed_plan (the plan of
    the current GPU), the baselines' torch function."""
    if c.key not in OURS:
        return c.runs, None
    try:
        plan = cute_gemm.mixed_plan(m, n, k, c.bits, c.group, torch.float16)
    except Exception as e:  # noqa: BLE001  (the call itself reports the error)
        return f"n/a ({_short(e)})", None
    return plan_label(plan), plan.describe()


def derive(row, fp16_us, copy_gbs):
    """Fills the derived columns of a result row from row['us'] (None: not measured)."""
    us = row.get("us")
    m, n, k = row["m"], row["n"], row["k"]
    ok = us is not None and us > 0
    row["speedup_vs_fp16"] = fp16_us / us if ok and fp16_us else None
    row["weight_gbs"] = row["weight_bytes"] / (us * 1e-6) / 1e9 if ok and row.get(
        "weight_bytes") else None
    row["weight_frac_copy_bw"] = (row["weight_gbs"] / copy_gbs
                                  if row["weight_gbs"] is not None and copy_gbs else None)
    row["tflops"] = common.tflops(2.0 * m * n * k, us) if ok else None
    return row


def mark_failed(row, key, exc):
    """A kernel that raised: ours is an ERROR (the run exits 1), a baseline is n/a."""
    if key in OURS:
        row["status"], row["check"] = f"ERROR ({_short(exc)})", "ERROR"
    else:
        row["status"] = f"n/a ({_short(exc)})"


def time_rounds(case, rounds, replays):
    """Times the kernels of one (shape, M) case, interleaved over `rounds`
    (common.time_interleaved): row["us"] is the median of the rounds, row["us_rounds"] each
    round's and row["rounds_spread"] their spread. case: (row, candidate, fn or None); a kernel
    that raises while timed is marked failed."""
    live = [x for x in case if x[2] is not None]
    timed = common.time_interleaved([fn for _, _, fn in live], rounds, replays)
    for (row, c, _), res in zip(live, timed):
        row["us"], row["us_rounds"], row["rounds_spread"], row["calls_per_graph"] = (
            res["us"], res["us_rounds"] or None, res["spread"], res["calls"])
        if res["error"] is not None:
            mark_failed(row, c.key, res["error"])


def bench_shape(cute_gemm, k, n, ms, replays, copy_gbs, device="cuda", min_bytes=None,
                log=print, rounds=1):
    """All kernels on one weight shape for every M. Returns (rows, torch_int4_variant)."""
    gen = torch.Generator(device=device).manual_seed(k * 1009 + n)
    w = torch.randn(n, k, device=device, dtype=torch.float32, generator=gen).to(torch.float16)
    a_full = torch.randn(max(ms), k, device=device, dtype=torch.float32,
                         generator=gen).to(torch.float16)
    a_bf_full = a_full.to(torch.bfloat16)
    t0 = time.time()
    cands, variant = make_candidates(cute_gemm, w, min_bytes)
    log(f"  {k}x{n}: weights ready in {time.time() - t0:.1f} s (L2 copies: " +
        ", ".join(f"{c.key} {len(c.copies)}" for c in cands if not c.na) + ")", flush=True)

    rows = []
    for m in ms:
        case = []  # (row, timed function or None)
        for c in cands:
            row = {"k": k, "n": n, "m": m, "kernel": c.key, "us": None,
                   "weight_bytes": c.weight_bytes or None, "rel_err": None,
                   "check": "n/a", "status": "ok", "l2_copies": len(c.copies) or None,
                   "calls_per_graph": None, "us_rounds": None, "rounds_spread": None}
            row["plan"], row["plan_detail"] = kernel_run(cute_gemm, c, m, n, k)
            fn = None
            if c.na:
                row["status"] = c.na
                row["check"] = "ERROR" if c.key in OURS else "n/a"
            else:
                a = (a_full if c.act_dtype == torch.float16 else a_bf_full)[:m]
                try:
                    out = c.call(a, c.copies[0])
                    row["rel_err"] = rel_err(out, a, c.ref_weight)
                    del out
                    row["check"] = classify(row["rel_err"], c.key in OURS)
                    fn = (lambda c, a, copies: lambda i: c.call(a, copies[i % len(copies)]))(
                        c, a, c.copies)
                except Exception as e:  # noqa: BLE001  (ours: ERROR; baselines: n/a)
                    mark_failed(row, c.key, e)
            case.append((row, c, fn))
        time_rounds(case, rounds, replays)
        fp16_us = next((row["us"] for row, c, _ in case if c.key == "fp16"), None)
        rows += [derive(row, fp16_us, copy_gbs) for row, _, _ in case]
    del cands, w, a_full, a_bf_full
    if device == "cuda":
        torch.cuda.empty_cache()
    return rows, variant


def failures(rows):
    return [f"{r['k']}x{r['n']} M={r['m']} {r['kernel']}: "
            + (r["status"] if r["status"] != "ok" else f"WRONG (rel err {r['rel_err']:.3g})")
            for r in rows if r["kernel"] in OURS and r["check"] in ("WRONG", "ERROR")]


# ------------------------------------------------------------------------------ reporting


COLUMNS = [
    ("k", "K"), ("n", "N"), ("m", "M"), ("kernel", "kernel"), ("plan", "kernel run"),
    ("us", "us"), ("rounds_spread", "spread"),
    ("speedup_vs_fp16", "speedup vs fp16"), ("weight_gbs", "weight GB/s"),
    ("weight_frac_copy_bw", "of copy BW"), ("tflops", "TFLOP/s"), ("rel_err", "rel err"),
    ("check", "check"), ("l2_copies", "L2 copies"), ("status", "status"),
]

NOTES = [
    "- Shapes are the weight's K x N (nn.Linear weight [N, K]); every kernel computes "
    "a[M, K] @ W^T.",
    "- fp16: torch F.linear, fp16. ours_int4: cute_gemm.mixed_gemm, INT4, group 128, symmetric, "
    "fp16 activations. ours_int8: INT8 per channel (group_size=-1), fp16. torch_int4: "
    "torch._weight_int4pack_mm, group 128, inner_k_tiles 8, bf16 activations.",
    "- us: median per-call time of CUDA-graph replays; the calls cycle through 'L2 copies' "
    "copies of the weight, together over 2x the L2 cache.",
    "- With --rounds R (meta 'rounds'), each kernel of a case is timed R times, the kernels "
    "interleaved; us is the median and spread (max - min) / median of the R times.",
    "- speedup vs fp16: fp16 us / us. weight GB/s: stored weight bytes (packed + scales (+ "
    "zeros); N*K*2 for fp16; packed + scales_and_zeros for torch int4) / time; of copy BW: that "
    "over the device-to-device copy bandwidth (copy_bandwidth_gbs, read + write).",
    "- kernel run: ours, the plan of the call on this GPU (cute_gemm.mixed_plan: kernel, "
    "instance, decode warps x warps per k slice, split-K count; the JSON's plan_detail has its "
    "describe() line); the baselines, the torch function.",
    f"- rel err: max|out - ref| / max|ref|, ref = fp32 matmul with the dequantized weight. "
    f"check: ok <= {ERR_OK:g}, warn <= {ERR_WRONG:g}, above: WRONG (ours, exit status 1) or "
    f"suspect (baselines, reported only).",
]


def _cell(row, width=8):
    """'us (speedup)' for the stdout table, 'width' + 9 characters wide."""
    if row is None or row.get("us") is None:
        return f"{'n/a':>{width}} {'':>8}"
    sp = row.get("speedup_vs_fp16")
    sp = f"({sp:.2f}x)" if sp is not None else ""
    return f"{row['us']:>{width}.1f} {sp:>8}"


def _by_case(rows):
    cases = {}
    for r in rows:
        cases.setdefault((r["k"], r["n"], r["m"]), {})[r["kernel"]] = r
    return cases


def _geomean(values):
    values = [v for v in values if v is not None and v > 0]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def summary_lines(rows):
    """The compact stdout table: one line per (shape, M)."""
    head = (f"{'K x N':>11} {'M':>5} {'fp16 us':>8} | " +
            " | ".join(f"{x + ' us':>8} {'vs fp16':>8}" for x in ("int4", "int8", "tint4")) +
            f" | {'int4 %bw':>8} check")
    lines = [head, "-" * len(head)]
    for (k, n, m), by in _by_case(rows).items():
        fp16 = by.get("fp16")
        fp16_us = f"{fp16['us']:>8.1f}" if fp16 and fp16["us"] is not None else f"{'n/a':>8}"
        i4 = by.get("ours_int4") or {}
        frac = i4.get("weight_frac_copy_bw")
        frac = f"{100 * frac:>7.0f}%" if frac is not None else f"{'n/a':>8}"
        checks = [by[x]["check"] for x in OURS if x in by]
        bad = [c for c in checks if c != "ok"]
        lines.append(f"{f'{k}x{n}':>11} {m:>5} {fp16_us} | {_cell(by.get('ours_int4'))} | "
                     f"{_cell(by.get('ours_int8'))} | {_cell(by.get('torch_int4'))} | "
                     f"{frac} {','.join(bad) if bad else 'ok'}")
    geo = []
    for key, short, _ in KERNELS[1:]:
        g = _geomean([r["speedup_vs_fp16"] for r in rows if r["kernel"] == key])
        geo.append(f"{short} {g:.2f}x" if g is not None else f"{short} n/a")
    lines.append("geomean speedup over fp16: " + ", ".join(geo))
    reasons = sorted({r["status"] for r in rows if r["status"] != "ok"})
    for reason in reasons[:5]:
        lines.append(f"note: {reason}")
    return lines


def summary_markdown(rows):
    """Wide markdown table (us and speedup per kernel) for the .md file."""
    lines = ["## Summary: us per call (speedup over fp16)", "",
             "| K x N | M | " + " | ".join(label for _, _, label in KERNELS) +
             " | " + " | ".join(f"{short} kernel run" for key, short, _ in KERNELS
                                if key in OURS) + " |",
             "|---:|---:|" + "---:|" * len(KERNELS) + "---|" * len(OURS)]
    for (k, n, m), by in _by_case(rows).items():
        cells = []
        for key, _, _ in KERNELS:
            r = by.get(key)
            if r is None or r["us"] is None:
                cells.append("n/a")
            elif key == "fp16":
                cells.append(f"{r['us']:.1f}")
            else:
                sp = r["speedup_vs_fp16"]
                cells.append(f"{r['us']:.1f} ({sp:.2f}x)" if sp is not None else
                             f"{r['us']:.1f}")
        cells += [(by.get(key) or {}).get("plan") or "n/a" for key in OURS]
        lines.append(f"| {k}x{n} | {m} | " + " | ".join(cells) + " |")
    return lines


def plot_speedup(path, rows, title):
    """Speedup over fp16 vs M (log x), one panel per shape; None (with a warning) without
    matplotlib."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        warnings.warn(f"matplotlib is not installed; skipping the plot {path}")
        return None
    shapes = list(dict.fromkeys((r["k"], r["n"]) for r in rows))
    cols = min(3, len(shapes))
    nrows = math.ceil(len(shapes) / cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(4.5 * cols, 3.6 * nrows), squeeze=False)
    for ax, (k, n) in zip(axes.flat, shapes):
        for (key, _, label), color in zip(KERNELS[1:], ("tab:blue", "tab:orange", "tab:green")):
            pts = sorted((r["m"], r["speedup_vs_fp16"]) for r in rows
                         if (r["k"], r["n"], r["kernel"]) == (k, n, key)
                         and r["speedup_vs_fp16"] is not None)
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", color=color,
                        label=label)
        ax.axhline(1.0, color="gray", linewidth=0.8, linestyle="--")
        ax.set_xscale("log", base=2)
        ms = sorted({r["m"] for r in rows if (r["k"], r["n"]) == (k, n)})
        ax.set_xticks(ms)
        ax.set_xticklabels([str(m) for m in ms])
        ax.minorticks_off()
        ax.set_title(f"K x N = {k} x {n}", fontsize=10)
        ax.set_xlabel("M")
        ax.set_ylabel("speedup over fp16")
        ax.grid(True, alpha=0.3)
        if ax.get_lines()[1:]:  # more than the 1.0 reference line
            ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(shapes):]:
        ax.set_visible(False)
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def write_outputs(out_dir, meta, rows, plot=True):
    """JSON + markdown (+ PNG) under out_dir; returns the paths written."""
    stem = f"mixed_gemm_{common.slug(meta.get('gpu_name', 'unknown'))}"
    title = f"cute_gemm.mixed_gemm vs torch on {meta.get('gpu_name', 'unknown')}"
    notes = NOTES + [""] + summary_markdown(rows)
    paths = list(common.write_results(out_dir, stem, meta, COLUMNS, rows, title, notes))
    if plot:
        png = plot_speedup(os.path.join(out_dir, stem + ".png"), rows,
                           title + ": speedup over fp16")
        if png:
            paths.append(png)
    return paths


# ------------------------------------------------------------------------------ main


def main(argv=None):
    args = parse_args(argv)
    common.require_cuda("bench_mixed_gemm.py")
    import cute_gemm  # after the CUDA check: --help and the no-GPU message need no extension

    shapes = args.shapes or (QUICK_SHAPES if args.quick else SHAPES)
    ms = args.ms or (QUICK_MS if args.quick else MS)
    meta = common.env_info()
    t0 = time.time()
    copy_gbs = common.copy_bandwidth_gbs()
    meta.update({
        "benchmark": "cute_gemm.mixed_gemm (INT4 g128 / INT8 per-channel) vs torch fp16 "
                     "F.linear and torch._weight_int4pack_mm",
        "copy_bandwidth_gbs": round(copy_gbs, 1),
        "quick": args.quick,
        "rounds": args.rounds,
        "shapes_kxn": [f"{k}x{n}" for k, n in shapes],
        "ms": ms,
        "group_size": GROUP_SIZE,
        "torch_int4_inner_k_tiles": TORCH_INT4_INNER_K_TILES,
        "torch_allow_fp16_reduced_precision_reduction":
            torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction,
    })
    print(f"bench_mixed_gemm: {meta['gpu_name']}, torch {meta['torch_version']}, CUDA "
          f"{meta['cuda_version']}, L2 {meta['gpu_l2_cache_bytes'] / 2**20:.0f} MiB, copy "
          f"bandwidth {copy_gbs:.0f} GB/s; {len(shapes)} shapes x {len(ms)} M", flush=True)
    print("\n".join(summary_lines([])[:2]), flush=True)

    rows, variants = [], set()
    for k, n in shapes:
        try:
            shape_rows, variant = bench_shape(cute_gemm, k, n, ms, args.replays, copy_gbs,
                                                 rounds=args.rounds)
        except Exception as e:  # noqa: BLE001  (e.g. a sticky CUDA error: record, write results)
            print(f"  {k}x{n}: failed: {_short(e)}", file=sys.stderr, flush=True)
            shape_rows, variant = [], None
            for m in ms:
                for key, _, _ in KERNELS:
                    row = {"k": k, "n": n, "m": m, "kernel": key, "us": None,
                           "weight_bytes": None, "rel_err": None,
                           "check": "ERROR" if key in OURS else "n/a",
                           "status": f"ERROR ({_short(e)})", "l2_copies": None,
                           "calls_per_graph": None, "plan": None, "plan_detail": None}
                    shape_rows.append(derive(row, None, copy_gbs))
        rows += shape_rows
        if variant:
            variants.add(variant)
        for line in summary_lines(shape_rows)[2:2 + len(ms)]:
            print(line, flush=True)
    meta["torch_int4_input"] = ", ".join(sorted(variants)) or "n/a"
    meta["elapsed_s"] = round(time.time() - t0, 1)

    paths = write_outputs(args.out, meta, rows, plot=not args.no_plot)
    print()
    print(f"bench_mixed_gemm on {meta['gpu_name']} (us per call; speedup over fp16 F.linear; "
          f"int4 %bw: ours INT4 weight GB/s over the {copy_gbs:.0f} GB/s copy bandwidth), "
          f"{meta['elapsed_s']} s")
    print("\n".join(summary_lines(rows)))
    print("wrote " + ", ".join(paths))
    bad = failures(rows)
    if bad:
        print(f"bench_mixed_gemm: WRONG/ERROR results for {len(bad)} case(s): "
              + "; ".join(bad[:10]), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
