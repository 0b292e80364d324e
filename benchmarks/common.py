"""Shared benchmark utilities: CUDA-graph replay timing, L2 rotation, environment info and result
writing (JSON + markdown + optional PNG plot). Used by benchmarks/bench_*.py.

Timing method (time_graph): the operation is captured N times back to back in one CUDA graph;
each replay is timed with CUDA events and the per-call time is the median over several replays
divided by N. Graph replay removes Python and launch overhead, which otherwise dominates
microsecond-scale GEMMs. Operands smaller than the L2 cache would stay resident between calls and
flatter the memory-bound shapes, so make_rotation() builds enough independent copies of the
operands to exceed twice the L2 size and the captured calls cycle through them.
"""

import datetime
import json
import math
import os
import platform
import re
import statistics
import subprocess
import sys
import warnings

import torch

# The CUDA-graph timer lives in the package, so the main job (cute_gemm.demo) uses the same one.
from cute_gemm.timing import time_graph  # noqa: F401  (re-exported for the benchmarks)

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_OUT_DIR = os.path.join(REPO_ROOT, "benchmarks", "results")

# The Llama-style decoder layer shapes (K x N) the GEMM benchmarks and probes share: attention
# projection, MLP up / down, and the 8192-wide and 28672x8192 layers of larger models.
DECODER_SHAPES_KN = [(4096, 4096), (4096, 28672), (14336, 4096), (8192, 8192), (28672, 8192)]


def require_cuda(script):
    """Exit with a clear message (exit status 1) when no CUDA GPU is usable."""
    if not torch.cuda.is_available():
        sys.exit(f"{script}: needs a CUDA GPU, but torch.cuda.is_available() is False "
                 f"(torch {torch.__version__}, built for CUDA {torch.version.cuda}). Run it on a "
                 f"machine with an NVIDIA GPU.")


def slug(text):
    """'NVIDIA H100 80GB HBM3' -> 'nvidia-h100-80gb-hbm3'."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "unknown"


def choice_list(parser, text, option, allowed):
    """The comma-separated names in ``text`` (an option's value), each one of ``allowed``;
    ``parser.error`` naming ``option`` otherwise (or when none is given)."""
    names = [v.strip() for v in text.split(",") if v.strip()]
    bad = [v for v in names if v not in allowed]
    if bad or not names:
        parser.error(f"{option}: expected names from {list(allowed)}; got {bad or names}")
    return names


def l2_cache_bytes(device=0):
    return int(torch.cuda.get_device_properties(device).L2_cache_size)


def env_info(device=0):
    """Everything needed to interpret a result file later."""
    props = torch.cuda.get_device_properties(device)
    info = {
        "date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "gpu_name": props.name,
        "gpu_compute_capability": f"{props.major}.{props.minor}",
        "gpu_sm_count": props.multi_processor_count,
        "gpu_l2_cache_bytes": int(props.L2_cache_size),
        "gpu_memory_bytes": int(props.total_memory),
        "torch_version": torch.__version__,
        "cuda_version": torch.version.cuda,
        "python_version": platform.python_version(),
        "hostname": platform.node(),
    }
    try:
        import cute_gemm
        info["cute_gemm_version"] = cute_gemm.__version__
    except ImportError:
        pass
    info.update(git_info())
    return info


def git_info():
    """Which source a results file came from: ``CUTE_GEMM_GIT_COMMIT`` where set (a copy of the
    tree whose .git is stale or missing, e.g. one copied to a GPU machine, says its commit that
    way), else git's HEAD and whether tracked files differ from it; {} where neither is known."""
    stated = os.environ.get("CUTE_GEMM_GIT_COMMIT", "").strip()
    if stated:
        return {"git_commit": stated, "git_commit_from": "CUTE_GEMM_GIT_COMMIT"}
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=REPO_ROOT, capture_output=True,
            text=True, timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=REPO_ROOT, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return {}
    return {"git_commit": commit, "git_dirty": bool(dirty.stdout.strip())}


def make_rotation(make_operands, bytes_per_set, min_bytes=None, max_copies=64):
    """Copies of the operands for L2 rotation.

    make_operands(i) returns one independent set of operands (any object); bytes_per_set is its
    size. Returns a list of enough sets that together they exceed min_bytes (default: twice the
    L2 size), so consecutive calls that cycle through them find nothing useful in L2. A single
    set is returned when it alone is that large.
    """
    if min_bytes is None:
        min_bytes = 2 * l2_cache_bytes()
    copies = max(1, min(max_copies, math.ceil(min_bytes / max(1, bytes_per_set))))
    return [make_operands(i) for i in range(copies)]


def clone_quantized(qw):
    """An independent copy of a ``cute_gemm.QuantizedWeight`` (a rotation set's weight)."""
    from cute_gemm import QuantizedWeight
    zeros = None if qw.zeros is None else qw.zeros.clone()
    return QuantizedWeight(qw.packed.clone(), qw.scales.clone(), zeros, qw.bits,
                           qw.group_size, qw.shape)


def copy_bandwidth_gbs(nbytes=1 << 30, replays=10):
    """Device memory bandwidth in GB/s (1e9 bytes/s) from a device-to-device copy of nbytes,
    counting the bytes read and the bytes written (2 * nbytes per copy), timed by time_graph.
    The buffers are far larger than the L2 cache, so this is what DRAM can stream."""
    src = torch.empty(nbytes, dtype=torch.uint8, device="cuda").fill_(1)
    dst = torch.empty_like(src)
    us, _ = time_graph(lambda i: dst.copy_(src), replays=replays)
    del src, dst
    torch.cuda.empty_cache()
    return 2.0 * nbytes / (us * 1e-6) / 1e9


def time_interleaved(fns, rounds=1, replays=10):
    """Times each fn(i) of ``fns`` ``rounds`` times with time_graph, the functions interleaved
    (forward in even rounds, backward in odd ones), so that a drift of the GPU's clocks during a
    run (its power limit at large M) reaches them alike. Returns one dict per fn: ``us`` the
    median of its rounds, ``us_rounds`` each round's median, ``spread`` (max - min) / ``us`` over
    the rounds (None below two), ``calls`` per graph and ``error`` (the exception that stopped it,
    after which it is not timed again; ``us`` None then)."""
    results = [{"us": None, "us_rounds": [], "spread": None, "calls": None, "error": None}
               for _ in fns]
    order = list(range(len(fns)))
    for r in range(rounds):
        for j in (order if r % 2 == 0 else order[::-1]):
            res = results[j]
            if res["error"] is not None:
                continue
            try:
                us, res["calls"] = time_graph(fns[j], replays=replays)
            except Exception as e:  # noqa: BLE001  (the caller reports it)
                res["error"], res["us"], res["us_rounds"] = e, None, []
                continue
            res["us_rounds"].append(us)
    for res in results:
        times = res["us_rounds"]
        if times:
            res["us"] = statistics.median(times)
        if len(times) > 1:
            res["spread"] = (max(times) - min(times)) / res["us"]
    return results


def tflops(flops, us):
    return flops / (us * 1e-6) / 1e12 if us > 0 else float("nan")


def _fmt(value):
    if value is None:
        return "n/a"
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if abs(value) >= 100:
            return f"{value:.1f}"
        if abs(value) >= 1:
            return f"{value:.2f}"
        return f"{value:.3g}"
    return str(value)


def write_results(out_dir, stem, meta, columns, rows, title, notes=()):
    """Write <out_dir>/<stem>.json and <out_dir>/<stem>.md; return their paths.

    columns: list of (key, header) pairs; rows: list of dicts with those keys (and possibly more,
    all of which go to the JSON).
    """
    os.makedirs(out_dir, exist_ok=True)
    json_path = os.path.join(out_dir, stem + ".json")
    md_path = os.path.join(out_dir, stem + ".md")
    with open(json_path, "w") as f:
        json.dump({"meta": meta, "results": rows}, f, indent=2)
        f.write("\n")
    lines = [f"# {title}", ""]
    for key in ("gpu_name", "torch_version", "cuda_version", "date_utc", "git_commit"):
        if key in meta:
            lines.append(f"- {key}: {meta[key]}")
    for key, value in meta.items():
        if key not in ("gpu_name", "torch_version", "cuda_version", "date_utc", "git_commit"):
            lines.append(f"- {key}: {value}")
    lines += ["", "| " + " | ".join(h for _, h in columns) + " |",
              "|" + "|".join("---:" for _ in columns) + "|"]
    for row in rows:
        lines.append("| " + " | ".join(_fmt(row.get(k, "")) for k, _ in columns) + " |")
    if notes:
        lines.append("")
        lines += list(notes)
    with open(md_path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return json_path, md_path


def plot_series(path, labels, series, title, ylabel="TFLOP/s"):
    """Line plot of several series over categorical x labels. Skips with a warning (returns None)
    when matplotlib is not installed."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        warnings.warn(f"matplotlib is not installed; skipping the plot {path}")
        return None
    fig, ax = plt.subplots(figsize=(max(8, 0.45 * len(labels) + 3), 5))
    x = list(range(len(labels)))
    for name, values in series.items():
        ax.plot(x, values, marker="o", label=name)
    ax.set_xticks(x)
    ax.set_xticklabels(labels, rotation=60, ha="right", fontsize=8)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
