"""Benchmark cute_gemm.gemm (C = A @ B^T, fp16/bf16) against torch.matmul in the same dtype.

    python benchmarks/bench_gemm.py [--quick] [--dtype fp16|bf16] [--out DIR]
    python benchmarks/bench_gemm.py --all-configs [--dtype ...] [--shapes ...]

For each shape (M, N, K): A is [M, K], B is [N, K] (nn.Linear weight layout), and both libraries
compute A @ B^T without bias. Times are per call, from CUDA-graph replays (see common.py), with
the operands rotated through enough copies to exceed twice the L2 cache when they are small. A
correctness spot check per shape compares our output with torch's: max|ours - torch| / max|torch|,
flagged WRONG above 4 epsilon of the dtype (and the script then exits 1), so a fast-but-wrong
kernel cannot hide in the table.

Writes gemm_<gpu>_<dtype>.json, .md and .png (the plot needs matplotlib) under --out
(default benchmarks/results/).

--all-configs times every compiled kernel configuration, forced (cute_gemm.gemm's config argument),
on the quick shapes (or --shapes) instead, with the same spot check per configuration, and prints
one row per shape: each configuration's time, the heuristic's choice and the fastest. Writes
gemm_configs_<gpu>_<dtype>.json and .md.
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

import common  # noqa: E402

DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}

QUICK_SHAPES = [
    (1, 4096, 4096), (16, 4096, 4096), (128, 4096, 4096), (1024, 4096, 4096),
    (4096, 4096, 4096),
    (1, 8192, 8192), (16, 8192, 8192), (512, 8192, 8192), (8192, 8192, 8192),
    (256, 256, 256), (1024, 1024, 1024), (2048, 2048, 2048),
]


def sweep_shapes():
    shapes = []
    for nk in (4096, 8192):
        shapes += [(m, nk, nk) for m in (1, 16, 128, 512, 1024, 2048, 4096, 8192)]
    shapes += [(s, s, s) for s in (256, 512, 1024, 2048, 4096, 8192)]
    shapes += [(m, n, k) for k, n in common.DECODER_SHAPES_KN
               for m in (256, 1024, 4096)]  # the 16-bit baseline at serving / prefill sizes
    return list(dict.fromkeys(shapes))  # drop repeats (4096^3, 8192^3), keep order


def parse_shapes(text):
    shapes = []
    for item in text.split(","):
        try:
            m, n, k = (int(x) for x in item.lower().split("x"))
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"bad shape {item!r}; expected MxNxK, e.g. 16x4096x4096")
        shapes.append((m, n, k))
    return shapes


def parse_args(argv=None):
    p = argparse.ArgumentParser(
        description="Benchmark cute_gemm.gemm against torch.matmul (same dtype) on a CUDA GPU.",
        epilog="Full sweep: M in {1,16,128,512,1024,2048,4096,8192} with N=K in {4096,8192}, plus "
               "square 256..8192, plus M in {256,1024,4096} on the decoder shapes (K x N) "
               "4096x4096, 4096x28672, 14336x4096, 8192x8192, 28672x8192. --quick: 12 "
               "representative shapes (under a minute on an H100).")
    p.add_argument("--quick", action="store_true", help="run 12 representative shapes only")
    p.add_argument("--dtype", choices=sorted(DTYPES), default="fp16", help="default: fp16")
    p.add_argument("--out", default=common.DEFAULT_OUT_DIR,
                   help="output directory (default: benchmarks/results/)")
    p.add_argument("--shapes", type=parse_shapes, default=None,
                   help="comma-separated MxNxK list; overrides the sweep, e.g. 16x4096x4096")
    p.add_argument("--replays", type=int, default=10,
                   help="timed graph replays per measurement; the median is reported")
    p.add_argument("--rounds", type=int, default=1,
                   help="measurements of ours and torch per shape, interleaved; the median is "
                        "reported (3 or more where the GPU's clocks drift under its power limit)")
    p.add_argument("--no-plot", action="store_true", help="skip the PNG plot")
    p.add_argument("--all-configs", action="store_true",
                   help="time each kernel configuration (forced) on the quick shapes, or --shapes")
    return p.parse_args(argv)


def operand_sets(m, n, k, dtype):
    """Operand sets (a, b) for L2 rotation (see common.make_rotation)."""
    elem = torch.finfo(dtype).bits // 8
    gen = torch.Generator(device="cuda").manual_seed(m * 1_000_003 + n * 1009 + k)

    def make(_):
        a = torch.randn(m, k, device="cuda", dtype=torch.float32, generator=gen).to(dtype)
        b = torch.randn(n, k, device="cuda", dtype=torch.float32, generator=gen).to(dtype)
        return a, b

    return common.make_rotation(make, (m * k + n * k) * elem, max_copies=1024)


def spot_check(gemm, a, b, dtype):
    """(max|ours - torch| / max|torch|, ok): ok unless above 4 eps or non-finite."""
    ours = gemm(a, b).float()
    ref = torch.matmul(a, b.t()).float()
    err = ((ours - ref).abs().max() / ref.abs().max().clamp_min(1e-30)).item()
    return err, bool(torch.isfinite(ours).all().item()) and err <= 4 * torch.finfo(dtype).eps


def _config_for(m, n, k):
    """The configuration that runs: the heuristic's pick (cute_gemm.gemm with config=None)."""
    import cute_gemm
    return cute_gemm._C._gemm_config_for(m, n, k)


def bench_shape(gemm, m, n, k, dtype, replays, rounds=1):
    sets = operand_sets(m, n, k, dtype)

    # Correctness spot check (first operand set) before timing.
    err, ok = spot_check(gemm, *sets[0], dtype)

    ours, theirs = common.time_interleaved(
        [lambda i: gemm(*sets[i % len(sets)]),
         lambda i: torch.matmul(sets[i % len(sets)][0], sets[i % len(sets)][1].t())],
        rounds, replays)
    for res in (ours, theirs):
        if res["error"] is not None:
            raise res["error"]
    ours_us, torch_us, calls = ours["us"], theirs["us"], ours["calls"]
    flops = 2.0 * m * n * k
    ours_tf, torch_tf = common.tflops(flops, ours_us), common.tflops(flops, torch_us)
    return {
        "m": m, "n": n, "k": k,
        "config": _config_for(m, n, k),
        "ours_us": ours_us, "torch_us": torch_us,
        "ours_tflops": ours_tf, "torch_tflops": torch_tf,
        "ratio": ours_tf / torch_tf if torch_tf > 0 else float("nan"),
        "max_rel_err": err, "check": "ok" if ok else "WRONG",
        "l2_copies": len(sets), "calls_per_graph": calls,
        "ours_us_rounds": ours["us_rounds"], "torch_us_rounds": theirs["us_rounds"],
        "spread": max(ours["spread"], theirs["spread"]) if rounds > 1 else None,
    }


COLUMNS = [
    ("m", "M"), ("n", "N"), ("k", "K"),
    ("ours_us", "ours us"), ("torch_us", "torch us"),
    ("ours_tflops", "ours TFLOP/s"), ("torch_tflops", "torch TFLOP/s"),
    ("ratio", "ours/torch"), ("spread", "spread"), ("max_rel_err", "max rel err"),
    ("check", "check"), ("l2_copies", "L2 copies"), ("config", "kernel (config)"),
]

NOTES = [
    "- ours/torch: throughput ratio (torch us / ours us); > 1 means cute_gemm is faster.",
    "- max rel err: max|ours - torch| / max|torch| on one operand set; WRONG above 4 eps of the "
    "dtype or on a non-finite output.",
    "- With --rounds R (meta 'rounds') ours and torch are timed R times each, interleaved; the "
    "times are the medians of the rounds and spread the larger (max - min) / median of the two.",
    "- Times are medians of CUDA-graph replays (calls per graph sized to ~20 ms), per call; "
    "operands rotate through 'L2 copies' sets so that together they exceed 2x the L2 cache.",
]


def bench_configs(cute_gemm, args, meta):
    """--all-configs: every configuration, forced, on each shape. Returns the exit status."""
    dtype = DTYPES[args.dtype]
    shapes = args.shapes or QUICK_SHAPES
    names = cute_gemm._C._gemm_configs()
    meta.update({"benchmark": "cute_gemm.gemm per kernel configuration (forced), C = A @ B^T",
                 "dtype": args.dtype, "configs": names})
    print(f"bench_gemm --all-configs: {meta['gpu_name']}, torch {meta['torch_version']}, "
          f"{args.dtype}, {len(shapes)} shapes x {len(names)} configurations (us per call)",
          flush=True)
    width = max(len(x) for x in names + ["heuristic"])
    print(f"{'M':>6} {'N':>6} {'K':>6} " + " ".join(f"{x:>{width}}" for x in names) +
          f" {'heuristic':>{width}} {'fastest':>{width}} {'heur/best':>9}", flush=True)
    t0 = time.time()
    rows, wrong = [], []
    for m, n, k in shapes:
        sets = operand_sets(m, n, k, dtype)
        row = {"m": m, "n": n, "k": k, "heuristic": cute_gemm._C._gemm_config_for(m, n, k)}
        cells = []
        for name in names:
            def forced(a, b, config=name):
                return cute_gemm.gemm(a, b, config=config)

            err, ok = spot_check(forced, *sets[0], dtype)
            us, _ = common.time_graph(lambda j: forced(*sets[j % len(sets)]),
                                      replays=args.replays)
            row[name + "_us"] = us
            row[name + "_max_rel_err"] = err
            if not ok:
                wrong.append(f"{m}x{n}x{k} {name}")
            cells.append(f"{us:>{width}.2f}" + ("" if ok else " WRONG"))
        best = min(names, key=lambda x: row[x + "_us"])
        row["fastest"] = best
        row["heuristic_over_best"] = row[row["heuristic"] + "_us"] / row[best + "_us"]
        rows.append(row)
        print(f"{m:>6} {n:>6} {k:>6} " + " ".join(cells) + f" {row['heuristic']:>{width}} "
              f"{best:>{width}} {row['heuristic_over_best']:>9.2f}", flush=True)
        del sets
        torch.cuda.empty_cache()
    meta["elapsed_s"] = round(time.time() - t0, 1)
    columns = ([("m", "M"), ("n", "N"), ("k", "K")] + [(x + "_us", x + " us") for x in names] +
               [("heuristic", "heuristic"), ("fastest", "fastest"),
                ("heuristic_over_best", "heuristic / fastest time")])
    stem = f"gemm_configs_{common.slug(meta['gpu_name'])}_{args.dtype}"
    paths = common.write_results(
        args.out, stem, meta, columns, rows,
        f"cute_gemm.gemm per configuration ({args.dtype}) on {meta['gpu_name']}",
        ["- Each configuration forced for every call; times as in gemm_<gpu>_<dtype>.md.",
         "- heuristic: the configuration cute_gemm.gemm picks unforced; heuristic / fastest > 1 "
         "means it leaves time on the table."])
    print("wrote " + ", ".join(paths))
    if wrong:
        print(f"bench_gemm: WRONG results for {', '.join(wrong)}", file=sys.stderr)
        return 1
    return 0


def main(argv=None):
    args = parse_args(argv)
    common.require_cuda("bench_gemm.py")
    import cute_gemm  # after the CUDA check: --help and the no-GPU message need no extension

    if args.all_configs:
        return bench_configs(cute_gemm, args, common.env_info())

    dtype = DTYPES[args.dtype]
    shapes = args.shapes or (QUICK_SHAPES if args.quick else sweep_shapes())
    meta = common.env_info()
    meta.update({
        "benchmark": "cute_gemm.gemm vs torch.matmul, C = A @ B^T",
        "dtype": args.dtype, "quick": args.quick, "rounds": args.rounds,
        "torch_allow_fp16_reduced_precision_reduction":
            torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction,
        "torch_allow_bf16_reduced_precision_reduction":
            torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction,
    })
    print(f"bench_gemm: {meta['gpu_name']}, torch {meta['torch_version']}, "
          f"CUDA {meta['cuda_version']}, {args.dtype}, {len(shapes)} shapes, "
          f"L2 {meta['gpu_l2_cache_bytes'] / 2**20:.0f} MiB", flush=True)
    header = (f"{'M':>6} {'N':>6} {'K':>6} {'ours us':>10} {'torch us':>10} {'ours TF':>8} "
              f"{'torch TF':>8} {'ratio':>6} {'max rel err':>11} check kernel")
    print(header, flush=True)

    t0 = time.time()
    rows = []
    for m, n, k in shapes:
        row = bench_shape(cute_gemm.gemm, m, n, k, dtype, args.replays, args.rounds)
        rows.append(row)
        print(f"{m:>6} {n:>6} {k:>6} {row['ours_us']:>10.2f} {row['torch_us']:>10.2f} "
              f"{row['ours_tflops']:>8.1f} {row['torch_tflops']:>8.1f} {row['ratio']:>6.2f} "
              f"{row['max_rel_err']:>11.2e} {row['check']} {row['config']}", flush=True)
        torch.cuda.empty_cache()
    meta["elapsed_s"] = round(time.time() - t0, 1)

    stem = f"gemm_{common.slug(meta['gpu_name'])}_{args.dtype}"
    title = f"cute_gemm.gemm vs torch.matmul ({args.dtype}) on {meta['gpu_name']}"
    paths = list(common.write_results(args.out, stem, meta, COLUMNS, rows, title, NOTES))
    if not args.no_plot:
        labels = [f"{r['m']}x{r['n']}x{r['k']}" for r in rows]
        png = common.plot_series(os.path.join(args.out, stem + ".png"), labels,
                                 {"cute_gemm": [r["ours_tflops"] for r in rows],
                                  "torch.matmul": [r["torch_tflops"] for r in rows]},
                                 title + " (MxNxK)")
        if png:
            paths.append(png)
    print("wrote " + ", ".join(paths))
    wrong = [f"{r['m']}x{r['n']}x{r['k']}" for r in rows if r["check"] != "ok"]
    if wrong:
        print(f"bench_gemm: WRONG results for {', '.join(wrong)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
