"""Quick look at the mixed kernel's speed (a subset of bench_mixed_gemm.py, for tuning runs).

    python3 benchmarks/probe_mixed.py             INT4 / INT8 vs fp16 at a few M
    python3 benchmarks/probe_mixed.py --sweep     split-K counts at M = 1, 16
                                                  (M values: CUTE_GEMM_KERNEL_MS)
    python3 benchmarks/probe_mixed.py --sweep-m   the fused kernel vs the dense path over M
    python3 benchmarks/probe_mixed.py --kernels   mma.sync vs wgmma kernels vs dense over M
    python3 benchmarks/probe_mixed.py --decode-shapes
                                                  the decode kernel's k slices of 1, 2, 4 warps
                                                  vs mma.sync vs the default, M = 1..8
    python3 benchmarks/probe_mixed.py --layer-shapes [--int8]
                                                  a fused Llama-3-8B layer's shapes and its head
                                                  (bf16): default vs nearby schedules, GB/s;
                                                  --int8: the layers in INT8 per-channel
    python3 benchmarks/probe_mixed.py --decode-warps
                                                  decode CTAs of 2/4/8/16 warps vs the default
                                                  plan, M = 1..8 (bf16)
    python3 benchmarks/probe_mixed.py --wgmma-tiles
                                                  every wgmma instance (token tile) vs the
                                                  default, M = 32..384
    python3 benchmarks/probe_mixed.py --tile-overhead
                                                  large M: a CTA tile's cost that does not grow
                                                  with K (INT4 wgmma vs dense vs cuBLAS)
    python3 benchmarks/probe_mixed.py --raster [--steady]
                                                  large M: the warp-specialized kernel's tile
                                                  order (raster_m) vs fp16
    python3 benchmarks/probe_mixed.py --int8-wide  INT8 at M = 9 / 12 / 16 on wide N (fp16, bf16;
                                                  gate/up also gated): the default vs wgmma and
                                                  mma.sync in 2 / 4 splits
    python3 benchmarks/probe_mixed.py --small-tiles
                                                  M = 9..32: mma.sync vs the 16- and 32-row
                                                  wgmma tiles (exact scales / rounded weights)

Every variant is a schedule passed to cute_gemm.mixed_gemm (schedule=...); cute_gemm.mixed_plan
with the same schedule says what ran.
"""
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

import common  # noqa: E402  (benchmarks/ is the script's directory)
import cute_gemm


def time_graph(fn):
    """Median us of one fn(i) call from CUDA-graph replays (common.time_graph)."""
    return common.time_graph(fn)[0]


def kernel_ms(default):
    """The M values of a sweep: CUTE_GEMM_KERNEL_MS (space-separated) or `default`."""
    return [int(x) for x in os.environ.get("CUTE_GEMM_KERNEL_MS", default).split()]


SHAPES_KN = common.DECODER_SHAPES_KN


def probe_cases(default_ms):
    """For each shape (SHAPES_KN), INT4 g128 and INT8 per-channel weights (copies rotated past L2)
    and each M of CUTE_GEMM_KERNEL_MS (default `default_ms`): yields (k, n, bits, group, m, a,
    run, t16, qw) with run(schedule=None) the function of i that time_graph times (the mixed GEMM
    on weight copy i with that schedule), t16 the fp16 F.linear time (us) and qw weight copy 0."""
    torch.manual_seed(0)
    ms = kernel_ms(default_ms)
    for k, n in SHAPES_KN:
        copies = max(2, int(3 * 60e6 // (n * k * 2)) + 1)
        ws = [torch.randn(n, k, device="cuda", dtype=torch.float16) * 0.02 for _ in range(copies)]
        for bits, group in ((4, 128), (8, -1)):
            qs = [cute_gemm.quantize(w, bits=bits, group_size=group) for w in ws]
            for m in ms:
                a = torch.randn(m, k, device="cuda", dtype=torch.float16)
                t16 = time_graph(lambda i: F.linear(a, ws[i % copies]))
                yield k, n, bits, group, m, a, (
                    lambda schedule=None, a=a, qs=qs: lambda i: cute_gemm.mixed_gemm(
                        a, qs[i % copies], schedule=schedule)), t16, qs[0]
            qs = None  # frees the copies (not del: the timed lambdas name it)
        ws = None
        torch.cuda.empty_cache()


def rotated_quantized(w, bits, group, dtype):
    """Copies of ``w`` quantized, enough to rotate past L2 (common.make_rotation), and the bytes
    of one (packed weight and scales)."""
    q = cute_gemm.quantize(w, bits=bits, group_size=group, dtype=dtype)
    nbytes = sum(t.numel() * t.element_size() for t in (q.packed, q.scales))
    return common.make_rotation(lambda i: q if i == 0 else common.clone_quantized(q),
                                nbytes), nbytes


SPLITS = (1, 2, 4, 6, 8, 12, 16, 24, 32)


def sweep_splits():
    """Times INT4 g128 at M in CUTE_GEMM_KERNEL_MS (default 1 16): the default plan (its kernel
    and split count), then the default kernel with each scheduled split count (the splits meet
    in the workspace; tuning). The planner lowers a split count that would leave a split empty
    (ceil(k_blocks / splits) blocks each), so such a column repeats a smaller count's plan."""
    torch.manual_seed(0)
    ms = kernel_ms("1 16")
    print(f"{'K x N':>12} {'M':>3} {'default':>16} " + " ".join(f"{s:>5}" for s in SPLITS))
    for k, n in [(4096, 4096), (8192, 8192), (28672, 8192), (4096, 28672), (14336, 4096)]:
        copies = max(2, int(3 * 60e6 // (n * k // 2)) + 1)
        qs = [cute_gemm.quantize(torch.randn(n, k, device="cuda", dtype=torch.float16) * 0.02,
                                 bits=4, group_size=128) for _ in range(copies)]
        for m in ms:
            a = torch.randn(m, k, device="cuda", dtype=torch.float16)
            t0 = time_graph(lambda i: cute_gemm.mixed_gemm(a, qs[i % copies]))
            plan = cute_gemm.mixed_plan(m, n, k, 4, 128)
            kernel = "mma" if plan.kernel == "dense" else plan.kernel  # the dense path: no splits
            cells = []
            for s in SPLITS:
                schedule = f"kernel={kernel},splits={s}"
                t = time_graph(lambda i: cute_gemm.mixed_gemm(a, qs[i % copies],
                                                              schedule=schedule))
                cells.append(f"{t:5.1f}")
            default = f"{t0:5.1f} {plan.kernel} s{plan.splits}"
            print(f"{k:>5}x{n:<6} {m:>3} {default:>16} " + " ".join(cells), flush=True)
        qs = None
        torch.cuda.empty_cache()


def fused_schedule(m, n, k, bits, group, dtype=torch.float16):
    """The schedule that runs the default fused kernel at M: none, or mma.sync where the default
    plan is the dense path (no wgmma on this GPU, M >= 192)."""
    dense = cute_gemm.mixed_plan(m, n, k, bits, group, dtype).kernel == "dense"
    return "kernel=mma" if dense else None


def sweep_m():
    """INT4 g128 and INT8 per-channel at M in CUTE_GEMM_KERNEL_MS (default 32 .. 1024): the fused
    kernel vs the dense path vs fp16 (us)."""
    print(f"{'K x N':>12} {'M':>4} {'b':>1} {'fp16':>7} {'fused':>7} {'dense':>7}  fused kernel")
    for k, n, bits, group, m, a, run, t16, qw in probe_cases("32 64 128 192 256 384 512 768 1024"):
        fused = fused_schedule(m, n, k, bits, group)
        times = [time_graph(run(fused)), time_graph(run("kernel=dense"))]
        plan = cute_gemm.mixed_plan(m, n, k, bits, group, schedule=fused)
        print(f"{k:>5}x{n:<6} {m:>4} {bits:>1} {t16:7.1f} {times[0]:7.1f} {times[1]:7.1f}  "
              f"{plan.kernel} {plan.instance} s{plan.splits}", flush=True)


# The M values of --kernels; CUTE_GEMM_KERNEL_MS (space-separated) narrows them for quick runs.
KERNEL_MS = kernel_ms("1 4 8 16 32 64 128 256 512")
# The activation dtype of --kernels (CUTE_GEMM_PROBE_DTYPE=bfloat16 for bf16).
KERNEL_DTYPE = getattr(torch, os.environ.get("CUTE_GEMM_PROBE_DTYPE", "float16"))


def sweep_kernels():
    """The fused kernels (mma.sync at every M, wgmma at every M where the GPU has it, decode up to
    M = 8) and the dense path against fp16, over M; the error is that of the default choice."""
    torch.manual_seed(0)
    kernels = ("mma", "wgmma", "decode")
    wgmma = cute_gemm.device_spec().wgmma
    print(f"{'K x N':>12} {'M':>4} {'fp16':>7} | {'i4 mma':>7} {'wgmma':>7} {'decode':>7} "
          f"{'dense':>7} | {'i8 mma':>7} {'wgmma':>7} {'decode':>7} | {'x i4':>5} {'x i8':>5} "
          "err4 err8")
    for k, n in [(4096, 4096), (4096, 28672), (14336, 4096), (8192, 8192), (28672, 8192)]:
        copies = max(2, int(3 * 60e6 // (n * k * 2)) + 1)
        ws = [torch.randn(n, k, device="cuda", dtype=KERNEL_DTYPE) * 0.02 for _ in range(copies)]
        q4 = [cute_gemm.quantize(w, bits=4, group_size=128) for w in ws]
        q8 = [cute_gemm.quantize(w, bits=8, group_size=-1) for w in ws]
        for m in KERNEL_MS:
            a = torch.randn(m, k, device="cuda", dtype=KERNEL_DTYPE)
            t16 = time_graph(lambda i: F.linear(a, ws[i % copies]))
            row, errs = [], []
            for qs in (q4, q8):
                ref = a.double() @ cute_gemm.dequantize(qs[0], torch.float32).double().t()
                for kernel in kernels:
                    if (kernel == "decode" and m > 8) or (kernel == "wgmma" and not wgmma):
                        row.append(float("nan"))
                        continue
                    row.append(time_graph(lambda i: cute_gemm.mixed_gemm(
                        a, qs[i % copies], schedule=f"kernel={kernel}")))
                out = cute_gemm.mixed_gemm(a, qs[0]).double()
                errs.append(((out - ref).norm() / ref.norm()).item())
                if qs is q4:
                    row.append(time_graph(lambda i: cute_gemm.mixed_gemm(
                        a, qs[i % copies], schedule="kernel=dense")))
            best4 = min(x for x in row[:4] if x == x)
            best8 = min(x for x in row[4:] if x == x)
            print(f"{k:>5}x{n:<6} {m:>4} {t16:7.1f} | {row[0]:7.1f} {row[1]:7.1f} {row[2]:7.1f} "
                  f"{row[3]:7.1f} | {row[4]:7.1f} {row[5]:7.1f} {row[6]:7.1f} | "
                  f"{t16 / best4:5.2f} {t16 / best8:5.2f} {errs[0]:.0e} {errs[1]:.0e}", flush=True)
        ws = q4 = q8 = None
        torch.cuda.empty_cache()


def sweep_decode_shapes():
    """INT4 g128 and INT8 per-channel at M in CUTE_GEMM_KERNEL_MS (default 1 4 5 8): the default
    plan, mma.sync, and the decode kernel with its k slices scheduled 1, 2 and 4 warps wide (the
    planner's warps per CTA for each); each cell is us (warps/col_warps/splits for decode)."""
    print(f"{'K x N':>12} {'M':>3} {'b':>1} {'fp16':>6} | {'default':>16} {'mma':>6} | "
          f"{'decode cw=1':>16} {'cw=2':>16} {'cw=4':>16}")
    for k, n, bits, group, m, a, run, t16, qw in probe_cases("1 4 5 8"):
        def timed(schedule=None):
            plan = cute_gemm.mixed_plan(m, n, k, bits, group, schedule=schedule)
            t = time_graph(run(schedule))
            shape = (f"{plan.warps}/{plan.col_warps}/{plan.splits}"
                     if plan.kernel == "decode" else plan.kernel)
            return f"{t:6.1f} {shape:>9}"
        cells = [timed(), f"{timed('kernel=mma').split()[0]:>6}"]
        for cw in (1, 2, 4):
            cells.append(timed(f"kernel=decode,col_warps={cw}"))
        print(f"{k:>5}x{n:<6} {m:>3} {bits:>1} {t16:6.1f} | {cells[0]:>16} {cells[1]} | "
              + " ".join(f"{c:>16}" for c in cells[2:]), flush=True)


# A Llama-3-8B layer with fused projections, and its output head: (name, K, N, bits, group).
LAYER_SHAPES = [("qkv", 4096, 6144, 4, 128), ("o", 4096, 4096, 4, 128),
                ("gate_up", 4096, 28672, 4, 128), ("down", 14336, 4096, 4, 128),
                ("head", 4096, 128256, 8, -1)]
# The same layers in INT8 per-channel (--layer-shapes --int8; the head is INT8 in both).
LAYER_SHAPES_INT8 = [(name, k, n, 8, -1) for name, k, n, _, _ in LAYER_SHAPES[:-1]]


# --int8-wide: (name, K, N); the last one's 16-row column tiles give 132 SMs one CTA each.
INT8_WIDE_SHAPES = [("gate_up", 4096, 28672), ("head", 4096, 128256),
                    ("k8192_n28672", 8192, 28672), ("down_t", 14336, 17024)]


def sweep_int8_wide():
    """INT8 per-channel at M = 9, 12, 16 on INT8_WIDE_SHAPES, fp16 and bf16 (gate/up also
    gated): the default plan against wgmma's and mma.sync's in 4 and 2 splits. Cells: us and the
    plan that ran (the planner's int8_on_mma_unsplit rule)."""
    torch.manual_seed(0)
    for dt in (torch.float16, torch.bfloat16):
        for name, k, n in INT8_WIDE_SHAPES:
            qs, nbytes = rotated_quantized(torch.randn(n, k, device="cuda", dtype=dt) * 0.02, 8,
                                           -1, dt)
            for act in ((None, "silu_mul") if name == "gate_up" else (None,)):
                for m in (9, 12, 16):
                    a = torch.randn(m, k, device="cuda", dtype=dt)
                    cells = []
                    for sched in (None, "kernel=wgmma", "kernel=mma,splits=4",
                                  "kernel=mma,splits=2"):
                        plan = cute_gemm.mixed_plan(m, n, k, 8, -1, dt, schedule=sched,
                                                    activation=act)
                        t = time_graph(lambda i: cute_gemm.mixed_gemm(
                            a, qs[i % len(qs)], schedule=sched, activation=act))
                        cells.append(f"{sched or 'default'}: {t:6.1f} us ({plan.kernel} "
                                     f"m{plan.tile_m} {plan.splits}s)")
                    print(f"{str(dt)[6:]:>8} {name:>13}{' gated' if act else '      '} M={m:>2} "
                          f"{nbytes / 1e6:6.1f} MB | " + " | ".join(cells), flush=True)
            qs = None
            torch.cuda.empty_cache()


def sweep_layer_shapes():
    """The model's layer shapes (LAYER_SHAPES, bf16) at M in CUTE_GEMM_KERNEL_MS (default 1 16):
    bf16 F.linear, one reduction kernel reading the packed weight's bytes (a read reference),
    the default plan and the schedules around it (decode warps x splits x col_warps at M <= 8;
    mma.sync and wgmma split counts above, and INT4's 16-row tile in 64 columns up to M = 16).
    Cells: us and the weight stream's GB/s. With --int8 the layers in INT8 per-channel
    (LAYER_SHAPES_INT8) instead."""
    torch.manual_seed(0)
    dt = torch.bfloat16
    for name, k, n, bits, group in (LAYER_SHAPES_INT8 if "--int8" in sys.argv else LAYER_SHAPES):
        w = torch.randn(n, k, device="cuda", dtype=dt) * 0.02
        qs, nbytes = rotated_quantized(w, bits, group, dt)
        copies = len(qs)
        wdense = common.make_rotation(lambda i: w if i == 0 else w.clone(), n * k * 2)
        flat = [q.packed.view(torch.bfloat16).view(-1) for q in qs]
        t_read = time_graph(lambda i: flat[i % copies].sum(dtype=torch.float32))
        for m in kernel_ms("1 16"):
            a = torch.randn(m, k, device="cuda", dtype=dt)
            t16 = time_graph(lambda i: F.linear(a, wdense[i % len(wdense)]))
            print(f"\n{name} K={k} N={n} INT{bits} g{group} M={m}: {nbytes / 1e6:.1f} MB; "
                  f"bf16 {t16:.1f} us; read reference {t_read:.1f} us "
                  f"({nbytes / t_read / 1e3:.0f} GB/s)", flush=True)
            if m <= 8:
                schedules = [None] + [f"kernel=decode,warps={w_},splits={s_},col_warps={cw}"
                                      for cw in (1, 2) for w_ in (4, 8, 16)
                                      for s_ in (1, 2, 4)]
            else:
                schedules = [None] + [f"kernel=mma,splits={s_}" for s_ in (1, 2, 4, 8, 16)]
                if cute_gemm.device_spec().wgmma:
                    schedules += [f"kernel=wgmma,splits={s_}" for s_ in (1, 2, 4, 8)]
                    if bits == 4 and m <= 16:  # the 16-row tile's 64-column form
                        schedules += [f"tile_n=64,splits={s_}" for s_ in (1, 2, 4, 8)]
            for sched in schedules:
                try:
                    plan = cute_gemm.mixed_plan(m, n, k, bits, group, dtype=dt, schedule=sched)
                    t = time_graph(lambda i: cute_gemm.mixed_gemm(a, qs[i % copies],
                                                                  schedule=sched))
                except (ValueError, RuntimeError) as e:
                    print(f"  {sched}: refused ({str(e)[:80]})")
                    continue
                shape = (f"{plan.warps}w/{plan.col_warps}cw/{plan.splits}s grid {plan.grid[0]}"
                         f"x{plan.grid[2]} {plan.ctas_per_sm}/SM" if plan.kernel == "decode" else
                         f"{plan.kernel} m{plan.tile_m} n{plan.tile_n} {plan.splits}s grid "
                         f"{plan.grid[0]}x{plan.grid[1]}x{plan.grid[2]}")
                print(f"  {sched or 'default':<40} {t:7.1f} us {nbytes / t / 1e3:6.0f} GB/s "
                      f"x{t16 / t:4.2f}  {shape}", flush=True)
        qs = wdense = flat = None
        torch.cuda.empty_cache()


def sweep_decode_warps():
    """Decode CTAs of 2, 4, 8 and 16 warps (the default plan's k-slice width, unsplit) against
    the default plan: SHAPES_KN plus the fused q/k/v shape and the INT8 head, INT4 g128 and INT8
    per-channel, bf16, M in CUTE_GEMM_KERNEL_MS (default 1 2 4 8); cells are us."""
    torch.manual_seed(0)
    dt = torch.bfloat16
    print(f"{'K x N':>12} {'M':>2} {'b':>1} | {'default':>20} | " +
          " ".join(f"{f'{w}w':>6}" for w in (2, 4, 8, 16)), flush=True)
    for k, n in SHAPES_KN + [(4096, 6144), (4096, 128256)]:
        for bits, group in ((4, 128), (8, -1)):
            w = torch.randn(n, k, device="cuda", dtype=dt) * 0.02
            qs, _ = rotated_quantized(w, bits, group, dt)
            copies = len(qs)
            for m in kernel_ms("1 2 4 8"):
                a = torch.randn(m, k, device="cuda", dtype=dt)

                def timed(sched):
                    return time_graph(lambda i: cute_gemm.mixed_gemm(a, qs[i % copies],
                                                                     schedule=sched))
                plan = cute_gemm.mixed_plan(m, n, k, bits, group, dtype=dt)
                cells = []
                for warps in (2, 4, 8, 16):
                    sched = (f"kernel=decode,warps={warps},col_warps={plan.col_warps},"
                             "splits=1")
                    try:
                        cells.append(f"{timed(sched):6.1f}")
                    except (ValueError, RuntimeError):
                        cells.append(f"{'-':>6}")
                print(f"{k:>5}x{n:<6} {m:>2} {bits:>1} | {timed(None):6.1f} "
                      f"{plan.warps:>2}w/{plan.col_warps}cw/{plan.splits}s g{plan.grid[0]:<5} | "
                      + " ".join(cells), flush=True)
            qs = None
            torch.cuda.empty_cache()


WGMMA_TILES = [32, 64, 128, 160, 192, 256]


def no_wgmma():
    """True (and says so) where this GPU or build has no wgmma kernels to sweep."""
    if cute_gemm.device_spec().wgmma:
        return False
    print("no wgmma kernels on this GPU/build (Hopper, sm_90a): nothing to sweep")
    return True


def sweep_wgmma_tiles():
    """INT4 g128 and INT8 per-channel at M in CUTE_GEMM_KERNEL_MS (default 32 64 128 256 384):
    fp16, the default plan and every wgmma instance (its token tile scheduled); cells are us, the
    default's with tile_m/warp_groups/splits."""
    print(f"{'K x N':>12} {'M':>4} {'b':>1} {'fp16':>6} | {'default':>15} | " +
          " ".join(f"{f'm{t}':>6}" for t in WGMMA_TILES) + " | best x")
    if no_wgmma():
        return
    for k, n, bits, group, m, a, run, t16, qw in probe_cases("32 64 128 256 384"):
        plan = cute_gemm.mixed_plan(m, n, k, bits, group)
        t0 = time_graph(run())
        shape = (f"{plan.tile_m}/{plan.warp_groups}/{plan.splits}"
                 if plan.kernel == "wgmma" else plan.kernel)
        times = [time_graph(run(f"kernel=wgmma,tile_m={tile_m}")) for tile_m in WGMMA_TILES]
        print(f"{k:>5}x{n:<6} {m:>4} {bits:>1} {t16:6.1f} | {t0:6.1f} {shape:>8} | " +
              " ".join(f"{t:6.1f}" for t in times) + f" | {t16 / min(times):5.2f}", flush=True)


SMALL_TILE_SCHEDULES = ("kernel=mma", "kernel=wgmma,tile_m=16",
                        "kernel=wgmma,tile_m=32,scales=exact",
                        "kernel=wgmma,tile_m=32,scales=rounded")


def sweep_small_tiles():
    """INT4 g128 and INT8 per-channel at M in CUTE_GEMM_KERNEL_MS (default 9 16 24 32): fp16, the
    default plan, then each of SMALL_TILE_SCHEDULES (us; the planner's split count), and the
    largest relative error of any schedule against fp32 on the weights each one uses."""
    print(f"{'K x N':>12} {'M':>3} {'b':>1} {'fp16':>6} | {'default':>14} | " +
          " ".join(f"{s.split(',', 1)[-1].replace('kernel=', ''):>22}" for s in
                   SMALL_TILE_SCHEDULES) + " | best x | err")
    if no_wgmma():
        return
    for k, n, bits, group, m, a, run, t16, qw in probe_cases("9 16 24 32"):
        plan = cute_gemm.mixed_plan(m, n, k, bits, group)
        t0 = time_graph(run())
        cells, times, err = [], [t0], 0.0
        for schedule in SMALL_TILE_SCHEDULES:
            if "tile_m=16" in schedule and bits != 4:  # INT4's tile only
                cells.append("-")
                continue
            sp = cute_gemm.mixed_plan(m, n, k, bits, group, schedule=schedule)
            t = time_graph(run(schedule))
            times.append(t)
            cells.append(f"{t:6.1f} s{sp.splits:<2} {sp.ctas_per_sm}/SM")
            out = run(schedule)(0).float()
            w = qw.dequantize(torch.float32 if sp.exact_scales else None).float()
            ref = a.float() @ w.t()
            err = max(err, ((out - ref).abs().max() / ref.abs().max()).item())
        print(f"{k:>5}x{n:<6} {m:>3} {bits:>1} {t16:6.1f} | {t0:6.1f} {plan.kernel:>5} "
              f"s{plan.splits:<2} | " + " ".join(f"{c:>22}" for c in cells) +
              f" | {t16 / min(times):5.2f} | {err:.1e}", flush=True)


def sweep_tile_overhead():
    """Large M: the fixed cost per CTA tile (pipeline fill, epilogue) of the INT4 g128 wgmma
    kernel. For N = 28672 and 8192, M = CUTE_GEMM_OVERHEAD_M (4096) and K in
    CUTE_GEMM_OVERHEAD_KS (128 256 4096 8192 16384): cuBLAS fp16, our dense GEMM and the INT4
    kernel with CUTE_GEMM_OVERHEAD_SCHEDULE (the 256-row tile, unsplit) (us, TFLOP/s); then the
    time per wave of CTA tiles fitted as t0 + c * K over the K >= 4096 points, so t0 is the part of
    a tile that does not grow with K (the smallest K measure it directly)."""
    torch.manual_seed(0)
    m = int(os.environ.get("CUTE_GEMM_OVERHEAD_M", "4096"))
    ks = [int(x) for x in
          os.environ.get("CUTE_GEMM_OVERHEAD_KS", "128 256 4096 8192 16384").split()]
    schedule = os.environ.get("CUTE_GEMM_OVERHEAD_SCHEDULE", "kernel=wgmma,tile_m=256,splits=1")
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    print(f"{'N':>6} {'K':>6} {'M':>5} | {'fp16':>8} {'dense':>8} {'int4':>8} | "
          f"{'TF fp16':>7} {'TF dense':>8} {'TF int4':>7} | {'x int4':>6} | tiles waves "
          f"us/wave plan")
    for n in (28672, 8192):
        fit = []
        for k in ks:
            ws = [torch.randn(n, k, device="cuda", dtype=torch.float16) * 0.02 for _ in range(2)]
            qs = [cute_gemm.quantize(w, bits=4, group_size=128) for w in ws]
            a = torch.randn(m, k, device="cuda", dtype=torch.float16)
            t16, td, t4 = (r["us"] for r in common.time_interleaved([
                lambda i: F.linear(a, ws[i % 2]), lambda i: cute_gemm.gemm(a, ws[i % 2]),
                lambda i: cute_gemm.mixed_gemm(a, qs[i % 2], schedule=schedule)], rounds=3))
            plan = cute_gemm.mixed_plan(m, n, k, 4, 128, schedule=schedule)
            tiles = plan.grid[0] * plan.grid[1] * plan.grid[2]
            waves = -(-tiles // (sms * max(1, plan.ctas_per_sm)))
            if k >= 4096:
                fit.append((k, t4 / waves))
            tf = [2 * m * n * k / t / 1e6 for t in (t16, td, t4)]
            print(f"{n:>6} {k:>6} {m:>5} | {t16:8.1f} {td:8.1f} {t4:8.1f} | {tf[0]:7.0f} "
                  f"{tf[1]:8.0f} {tf[2]:7.0f} | {t16 / t4:6.2f} | {tiles:>5} {waves:>5} "
                  f"{t4 / waves:7.2f} {plan.instance}", flush=True)
            ws = qs = None
            torch.cuda.empty_cache()
        if len(fit) >= 2:
            kk = torch.tensor([f[0] for f in fit], dtype=torch.float64)
            ts = torch.tensor([f[1] for f in fit], dtype=torch.float64)
            x = torch.stack([torch.ones_like(kk), kk], 1)
            t0, c = torch.linalg.lstsq(x, ts[:, None]).solution[:, 0].tolist()
            print(f"N = {n}: us per wave = {t0:.2f} + {c * 1024:.3f} per 1024 of K "
                  f"(t0 is {t0 / (t0 + c * 4096):.1%} of a K = 4096 wave)", flush=True)


def steady_us(fn, seconds=1.5):
    """fn(i) run back to back for `seconds`, then timed (time_graph, us)."""
    end, i = time.time() + seconds, 0
    while time.time() < end:
        for _ in range(20):
            fn(i)
            i += 1
        torch.cuda.synchronize()
    return time_graph(fn)


def sweep_raster():
    """Large M: the warp-specialized wgmma kernel's tile order (schedule raster_m: M tiles per
    group, walked column by column; 1 = row-major) on the decoder shapes plus Llama-3's fused
    gate/up (4096x28672) and head (4096x128256 at M <= 1024), INT4 g128 and INT8 per-channel, M
    in CUTE_GEMM_KERNEL_MS (512 1024 4096): fp16 F.linear and each raster_m of 1, 2, 4, 8, 16
    that the grid has M tiles for, timed interleaved over 3 rounds (us, median); the default
    plan's raster_m is marked *. With --steady each variant first runs alone for 1.5 s before it
    is timed, so the clocks settle to its own power draw (interleaved timing at ~10 ms grain
    averages the clocks of the variants: a raster group's lower DRAM traffic shows up as a higher
    SM clock only in steady state)."""
    torch.manual_seed(0)
    rasters = (1, 2, 4, 8, 16)
    print(f"{'K x N':>12} {'b':>1} {'M':>5} {'fp16':>8} | " +
          " ".join(f"{'r' + str(r):>9}" for r in rasters) + " | best  default x fp16")
    shapes = list(SHAPES_KN) + [(4096, 128256)]
    for k, n in shapes:
        copies = max(2, int(3 * 60e6 // (n * k * 2)) + 1)
        ws = [torch.randn(n, k, device="cuda", dtype=torch.float16) * 0.02 for _ in range(copies)]
        for bits, group in ((4, 128), (8, -1)):
            qs = [cute_gemm.quantize(w, bits=bits, group_size=group) for w in ws]
            for m in kernel_ms("512 1024 4096"):
                if n > 100000 and m > 1024:
                    continue
                a = torch.randn(m, k, device="cuda", dtype=torch.float16)
                plan = cute_gemm.mixed_plan(m, n, k, bits, group)
                if not plan.producer:
                    continue
                fns, labels = [lambda i: F.linear(a, ws[i % copies])], ["fp16"]
                for r in rasters:
                    if r > plan.grid[1]:
                        break
                    fns.append(lambda i, r=r: cute_gemm.mixed_gemm(
                        a, qs[i % copies], schedule=f"raster_m={r}"))
                    labels.append(r)
                if "--steady" in sys.argv:
                    res = [statistics.median(steady_us(fn) for _ in range(3)) for fn in fns]
                else:
                    res = [x["us"] for x in common.time_interleaved(fns, rounds=3)]
                cells = {lab: t for lab, t in zip(labels[1:], res[1:])}
                best = min(cells, key=cells.get)
                print(f"{k:>5}x{n:<6} {bits:>1} {m:>5} {res[0]:8.1f} | " + " ".join(
                    (f"{cells[r]:8.1f}" + ("*" if r == plan.raster_m else " ")) if r in cells
                    else f"{'-':>9}" for r in rasters) +
                    f" | r{best:<3} {cells[best] / cells[plan.raster_m]:5.3f} "
                    f"{res[0] / cells[plan.raster_m]:5.2f}", flush=True)
            qs = None
        ws = None
        torch.cuda.empty_cache()


def main():
    if "--raster" in sys.argv:
        return sweep_raster()
    if "--tile-overhead" in sys.argv:
        return sweep_tile_overhead()
    if "--small-tiles" in sys.argv:
        return sweep_small_tiles()
    if "--decode-warps" in sys.argv:
        return sweep_decode_warps()
    if "--layer-shapes" in sys.argv:
        return sweep_layer_shapes()
    if "--int8-wide" in sys.argv:
        return sweep_int8_wide()
    if "--wgmma-tiles" in sys.argv:
        return sweep_wgmma_tiles()
    if "--decode-shapes" in sys.argv:
        return sweep_decode_shapes()
    if "--kernels" in sys.argv:
        return sweep_kernels()
    if "--sweep" in sys.argv:
        return sweep_splits()
    if "--sweep-m" in sys.argv:
        return sweep_m()
    torch.manual_seed(0)
    print(f"{'K x N':>12} {'M':>5} {'fp16 us':>9} {'int4 us':>9} {'x':>6} {'int8 us':>9} {'x':>6}"
          f" {'int4 GB/s':>9}")
    for k, n in [(4096, 4096), (8192, 8192), (8192, 28672), (28672, 8192)]:
        copies = max(2, int(3 * 60e6 // (n * k * 2)) + 1)
        ws = [torch.randn(n, k, device="cuda", dtype=torch.float16) * 0.02 for _ in range(copies)]
        q4 = [cute_gemm.quantize(w, bits=4, group_size=128) for w in ws]
        q8 = [cute_gemm.quantize(w, bits=8, group_size=-1) for w in ws]
        for m in (1, 16, 64, 256):
            a = torch.randn(m, k, device="cuda", dtype=torch.float16)
            ref = a.float() @ cute_gemm.dequantize(q4[0]).float().t()
            out = cute_gemm.mixed_gemm(a, q4[0])
            err = ((out.float() - ref).norm() / ref.norm()).item()
            t16 = time_graph(lambda i: F.linear(a, ws[i % copies]))
            t4 = time_graph(lambda i: cute_gemm.mixed_gemm(a, q4[i % copies]))
            t8 = time_graph(lambda i: cute_gemm.mixed_gemm(a, q8[i % copies]))
            gbs = (n * k / 2 + n * k / 128 * 2) / t4 / 1e3
            print(f"{k:>5}x{n:<6} {m:>5} {t16:9.2f} {t4:9.2f} {t16 / t4:6.2f} {t8:9.2f} "
                  f"{t16 / t8:6.2f} {gbs:9.0f}  err {err:.1e}")
        ws = q4 = q8 = None
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
