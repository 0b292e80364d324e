"""The main job: quantize a Llama-3-8B-shaped stack of linear layers, check it, time it.

    python -m cute_gemm [--bits 4] [--group-size 128] [--symmetric | --asymmetric]
                        [--batch 1,16,256] [--layers N] [--shapes KxN,...] [--plot FILE.png]

What it does, in order:

1. Builds ``--layers`` decoder layers of linear layers with Llama-3-8B's shapes (per layer:
   q_proj 4096->4096, k_proj and v_proj 4096->1024, o_proj 4096->4096, gate_proj and up_proj
   4096->14336, down_proj 14336->4096), fp16 weights drawn from N(0, 0.02^2) as Llama's
   initializer does. ``--shapes`` replaces them with a custom list of K x N weights.
2. Converts a copy with ``cute_gemm.quantize_model`` (progress bar) and prints what it converted.
3. Accuracy, per layer type (max over the decoder layers) on random activations: the relative
   error ``||y - y_ref|| / ||y_ref||`` of the quantized layer's output against the fp32 product
   with the original fp16 weights (the quantization error, expected ~0.1 for INT4 g128 and ~0.01
   for INT8) and against the fp32 product with the dequantized weights (the kernel's own error,
   rounding only: it must stay below 2e-2 or the job exits 1). The whole stack's output is
   compared with the fp16 stack's.
4. Times every layer type and the whole stack, fp16 ``nn.Linear`` against the quantized layer,
   at each ``--batch`` size (M rows of activations), and prints the speedups.

Timing on a GPU: CUDA-graph replays timed with CUDA events, the median over ``--replays``
replays divided by the calls in the graph. A per-layer measurement cycles through the decoder
layers' distinct copies of that layer (plus extra copies when those are fewer than twice the L2
cache size), so every call reads its weight from DRAM as in a real model, not from L2. The
stack's measurement runs all layers once per call; its weights together exceed the L2 cache
(the job says so when they do not).

Without a GPU the same flow runs through the CPU reference path of ``cute_gemm.mixed_gemm``
(dequantize, then an fp32 matmul) on a small model with the same proportions (hidden 256, kv 64,
intermediate 896), timed with ``time.perf_counter``: those times show the flow works and say
nothing about the GPU kernel.

The stack is not a transformer: the attention itself is left out (``o_proj`` reads ``q_proj``'s
output in its place), because only the linear layers change when the weights are quantized. Each
layer is ``h += o_proj(q_proj(n(h)))`` (k_proj and v_proj computed alongside) then
``h += down_proj(silu(gate_proj(n(h))) * up_proj(n(h)))``, ``n`` an RMS normalization, so the
activations keep a realistic scale through the layers. With N(0, 0.02^2) weights at hidden 4096
each block's output outweighs its input (the stack's output norm is 4-6x its input's after 2-4
layers), so the per-layer errors compound in the stack's; at hidden 256 the blocks add ~1% and
the stack's error stays far below a layer's. The job prints that norm ratio.
"""

import argparse
import copy
import math
import statistics
import sys
import time
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from . import weight_format as wf
from .timing import time_graph

__all__ = ["main", "run", "parse_args", "LinearStack", "decoder_shapes"]

LLAMA3_8B = {"hidden": 4096, "kv": 1024, "intermediate": 14336}
# The CPU fallback: Llama-3-8B's proportions divided by 16, multiples of 128 so every group size
# divides K.
CPU_SMALL = {"hidden": 256, "kv": 64, "intermediate": 896}
INIT_STD = 0.02          # Llama's initializer_range
KERNEL_ERR_LIMIT = 2e-2  # vs the dequantized weights: above this the kernel is wrong (exit 1)
ACCURACY_BATCH = 16      # rows of activations for the accuracy check
DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}


def decoder_shapes(hidden, kv, intermediate):
    """The linear layers of one Llama decoder layer as (name, K, N): weight [N, K]."""
    return [("q_proj", hidden, hidden), ("k_proj", hidden, kv), ("v_proj", hidden, kv),
            ("o_proj", hidden, hidden), ("gate_proj", hidden, intermediate),
            ("up_proj", hidden, intermediate), ("down_proj", intermediate, hidden)]


class LinearStack(nn.Module):
    """``num_layers`` decoder layers of bias-free ``nn.Linear`` layers.

    With ``decoder=True`` the shapes must be ``decoder_shapes(...)`` and ``forward`` runs the
    decoder layers' data flow (see the module docstring); otherwise each layer's linear layers
    run independently on inputs of their own K, as a plain list of weights. ``forward`` takes
    ``inputs``, a dict from K to an ``[M, K]`` activation, and returns one tensor: the final
    hidden state, or (independent layers) every output concatenated along the columns.
    """

    def __init__(self, shapes, num_layers, decoder, dtype, device, seed=0):
        super().__init__()
        self.shapes = [tuple(s) for s in shapes]
        self.decoder = decoder
        gen = torch.Generator(device="cpu").manual_seed(seed)
        self.layers = nn.ModuleList()
        for _ in range(num_layers):
            layer = nn.ModuleDict()
            for name, k, n in self.shapes:
                lin = nn.Linear(k, n, bias=False, device="meta")
                # Drawn on the CPU with a fixed generator (the same weights on every device),
                # then moved: Llama's N(0, 0.02^2) initialization.
                w = torch.randn(n, k, generator=gen) * INIT_STD
                lin.weight = nn.Parameter(w.to(device=device, dtype=dtype), requires_grad=False)
                layer[name] = lin
            self.layers.append(layer)

    @staticmethod
    def _rms_norm(h):
        scale = torch.rsqrt(h.float().pow(2).mean(-1, keepdim=True) + 1e-5)
        return (h.float() * scale).to(h.dtype)

    def forward(self, inputs):
        if not self.decoder:
            outs = [layer[name](inputs[k]) for layer in self.layers for name, k, _ in self.shapes]
            return torch.cat(outs, dim=-1)
        h = inputs[self.shapes[0][1]]
        for layer in self.layers:
            x = self._rms_norm(h)
            q = layer["q_proj"](x)
            layer["k_proj"](x)
            layer["v_proj"](x)
            h = h + layer["o_proj"](q)
            x = self._rms_norm(h)
            h = h + layer["down_proj"](F.silu(layer["gate_proj"](x)) * layer["up_proj"](x))
        return h


# ------------------------------------------------------------------------------------ options


def int_list(text):
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        values = []
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(
            f"expected a comma-separated list of positive integers, e.g. 1,16,256; got {text!r}")
    return values


def _shape_list(text):
    shapes = []
    for item in text.split(","):
        parts = item.strip().lower().split("x")
        try:
            k, n = (int(p) for p in parts)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected a comma-separated list of KxN weight shapes (the nn.Linear weight is "
                f"[N, K]), e.g. 4096x4096,4096x14336; got {item.strip()!r}")
        if k < 1 or n < 1:
            raise argparse.ArgumentTypeError(f"K and N must be positive; got {item.strip()!r}")
        shapes.append((k, n))
    return shapes


def _positive_int(text):
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer; got {text!r}")
    return value


def build_parser(prog="python -m cute_gemm"):
    p = argparse.ArgumentParser(
        prog=prog,
        description="Quantize a Llama-3-8B-shaped stack of linear layers with "
                    "cute_gemm.quantize_model, check its accuracy against fp16 and time it "
                    "(per layer and end to end) against fp16 nn.Linear. Without a CUDA GPU it "
                    "runs the same flow through the CPU reference path on a small model.",
        epilog="The layout walkthrough (pictures of the layout algebra) is "
               "`python -m cute_gemm layout [--out DIR]`.")
    p.add_argument("--bits", type=int, choices=wf.VALID_BITS, default=4,
                   help="weight bits (default 4)")
    p.add_argument("--group-size", type=int, choices=wf.VALID_GROUP_SIZES, default=128,
                   help="quantization group along K; -1 = one group per output channel "
                        "(default 128)")
    sym = p.add_mutually_exclusive_group()
    sym.add_argument("--symmetric", dest="symmetric", action="store_true", default=True,
                     help="symmetric quantization, no zero points (default)")
    sym.add_argument("--asymmetric", dest="symmetric", action="store_false",
                     help="asymmetric quantization with a zero point per group")
    p.add_argument("--batch", type=int_list, default=[1, 16, 256], metavar="M,M,...",
                   help="activation rows to time (default 1,16,256)")
    p.add_argument("--layers", type=_positive_int, default=None, metavar="N",
                   help="decoder layers of distinct weights (default 4 on a GPU, 2 on the CPU)")
    p.add_argument("--shapes", type=_shape_list, default=None, metavar="KxN,...",
                   help="custom weight shapes instead of the decoder layer's (K inputs, N "
                        "outputs), e.g. 4096x4096,4096x14336")
    p.add_argument("--dtype", choices=sorted(DTYPES), default="fp16",
                   help="activation and baseline weight dtype (default fp16)")
    p.add_argument("--replays", type=_positive_int, default=None, metavar="R",
                   help="timed repetitions, the median is reported (default 10 CUDA-graph "
                        "replays on a GPU, 3 calls on the CPU)")
    p.add_argument("--plot", default=None, metavar="FILE.png",
                   help="also draw the speedups over fp16 per layer and batch (needs matplotlib)")
    p.add_argument("--cpu", action="store_true",
                   help="run the CPU reference flow even when a GPU is present")
    return p


def parse_args(argv=None):
    """The options as an ``argparse.Namespace``; checks that the shapes suit the quantization
    (N a multiple of 8, K a multiple of the group size) before anything is built."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.shapes is not None:
        g = wf.k_multiple(args.group_size)
        for k, n in args.shapes:
            if not wf.valid_n(n):
                parser.error(f"--shapes: N must be a multiple of {wf.BLOCK_N} (the kernel's "
                             f"column block); got {k}x{n}")
            if not wf.valid_k(k, args.group_size):
                what = (f"{g} for per-channel quantization (--group-size {wf.PER_CHANNEL})"
                        if args.group_size == wf.PER_CHANNEL else f"--group-size {g}")
                parser.error(f"--shapes: K must be a multiple of {what}; got {k}x{n}")
    return args


# ------------------------------------------------------------------------------------ timing


def _cuda_us(fn, replays, target_ms=10.0, max_calls=200):
    """Median microseconds of one fn(i) call from CUDA-graph replays (cute_gemm.timing)."""
    return time_graph(fn, target_ms=target_ms, max_calls=max_calls, replays=replays)[0]


def _cpu_us(fn, replays):
    """Median microseconds of fn(i) over ``replays`` calls after one warm-up call."""
    fn(0)
    times = []
    for i in range(replays):
        t0 = time.perf_counter()
        fn(i)
        times.append((time.perf_counter() - t0) * 1e6)
    return statistics.median(times)


def _module_bytes(module):
    """Bytes of a module's weights as stored: its parameters and buffers (a QuantLinear keeps
    its packed weight, scales and zero points in buffers)."""
    tensors = {t.data_ptr(): t for t in list(module.parameters()) + list(module.buffers())}
    return sum(t.numel() * t.element_size() for t in tensors.values())


def _rotation(modules, min_bytes, max_copies=64):
    """The modules, plus deep copies of them in turn until the set holds at least min_bytes of
    weights (at most max_copies modules), so calls that cycle through it miss the L2 cache."""
    out = list(modules)
    per = max(1, _module_bytes(modules[0]))
    while len(out) < max_copies and len(out) * per < min_bytes:
        out.append(copy.deepcopy(modules[len(out) % len(modules)]))
    return out


# ------------------------------------------------------------------------------------ accuracy


def _rel_err(out, ref):
    out = out.float()
    if not bool(torch.isfinite(out).all()):
        return math.inf
    return ((out - ref).norm() / ref.norm().clamp_min(1e-30)).item()


def _dequantized_weight(module):
    """The [N, K] weight a converted layer (a ``cute_gemm.QuantLinear``) computes with."""
    return module.quantized_weight.dequantize()


# ------------------------------------------------------------------------------------ results


@dataclass
class DemoResult:
    """What the main job measured (also printed). ``accuracy``: rows with keys layer, shape,
    err_fp16, err_dequant. ``timing``: rows with keys layer, shape, batch, fp16_us, quant_us,
    speedup; the whole stack's rows have layer ``"stack"``."""
    device: str
    label: str
    layers: int
    accuracy: list = field(default_factory=list)
    timing: list = field(default_factory=list)
    stack_err: float = float("nan")
    stack_growth: float = float("nan")
    ok: bool = True


def _label(args):
    g = "pc" if args.group_size == wf.PER_CHANNEL else f"g{args.group_size}"
    return f"int{args.bits}-{g}-{'sym' if args.symmetric else 'asym'}"


def _fmt_us(us):
    return f"{us:.1f}" if us >= 100 else f"{us:.2f}"


def _print_accuracy(res, batch):
    print(f"\nAccuracy: relative error ||y - y_ref|| / ||y_ref|| of the {res.label} layers at "
          f"batch {batch}, max over {res.layers} decoder layer(s); y_ref in fp32")
    print(f"{'layer':<12}{'K x N':>13}{'vs fp16 weights':>18}{'vs dequantized':>17}")
    for r in res.accuracy:
        print(f"{r['layer']:<12}{r['shape']:>13}{r['err_fp16']:>18.3e}{r['err_dequant']:>17.3e}")
    print(f"{'stack':<12}{'-':>13}{res.stack_err:>18.3e}{'-':>17}   (output of all layers vs "
          f"the fp16 stack)")
    if not math.isnan(res.stack_growth):
        print(f"The stack's output norm is {res.stack_growth:.2f}x its input's: the more the "
              f"layers' outputs outweigh the residual input, the more of their errors reach the "
              f"output (random N(0, {INIT_STD}^2) weights: ~1.0x at hidden 256, 4-6x at hidden "
              f"4096 with 2-4 layers).")


def _print_timing(res, batches, note):
    print(f"\nTimes in us per call ({note}); speedup = fp16 time / {res.label} time")
    head = f"{'layer':<12}{'K x N':>13}"
    for m in batches:
        head += f" | {'M=' + str(m) + ' fp16':>12} {res.label.split('-')[0]:>9} {'x':>7}"
    print(head)
    rows = {}
    for r in res.timing:
        rows.setdefault((r["layer"], r["shape"]), {})[r["batch"]] = r
    for (layer, shape), by_m in rows.items():
        line = f"{layer:<12}{shape:>13}"
        for m in batches:
            r = by_m[m]
            line += (f" | {_fmt_us(r['fp16_us']):>12} {_fmt_us(r['quant_us']):>9}"
                     f" {r['speedup']:>6.2f}x")
        print(line)


def _print_tokens(res, batches):
    """The stack's decode throughput: batch rows per forward of all its layers."""
    stack = {r["batch"]: r for r in res.timing if r["layer"] == "stack"}
    print(f"\nTokens/s of the {res.layers}-layer stack (one forward = one decode step of every "
          f"sequence in the batch; attention, norms and the head left out)")
    print(f"{'batch':>6}{'fp16 tok/s':>14}{res.label + ' tok/s':>22}{'x':>8}")
    for m in batches:
        r = stack[m]
        fp16, quant = m * 1e6 / r["fp16_us"], m * 1e6 / r["quant_us"]
        print(f"{m:>6}{fp16:>14.1f}{quant:>22.1f}{quant / fp16:>7.2f}x")


def plot_speedups(path, res, batches):
    """Grouped bars: the speedup over fp16 of each layer type and the stack, one bar per batch."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    layers = []
    for r in res.timing:
        if r["layer"] not in layers:
            layers.append(r["layer"])
    speed = {(r["layer"], r["batch"]): r["speedup"] for r in res.timing}
    fig, ax = plt.subplots(figsize=(max(7, 1.1 * len(layers) + 2), 4.5))
    width = 0.8 / len(batches)
    for j, m in enumerate(batches):
        xs = [i + (j - (len(batches) - 1) / 2) * width for i in range(len(layers))]
        ax.bar(xs, [speed[(name, m)] for name in layers], width, label=f"M={m}")
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(layers)))
    ax.set_xticklabels(layers, rotation=30, ha="right")
    ax.set_ylabel(f"speedup over {res.device} fp16")
    ax.set_title(f"cute_gemm {res.label} vs fp16 ({res.device}, {res.layers} layer(s))")
    ax.legend()
    ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


# ------------------------------------------------------------------------------------ the job


def run(args):
    """Runs the main job with parsed options (see ``parse_args``); prints everything and returns
    a ``DemoResult``."""
    from .convert import quantize_model

    use_cuda = torch.cuda.is_available() and not args.cpu
    dtype = DTYPES[args.dtype]
    if use_cuda:
        device = torch.device("cuda")
        name = torch.cuda.get_device_name()
        print(f"GPU: {name} (torch {torch.__version__}, CUDA {torch.version.cuda})")
        dims, layers = LLAMA3_8B, args.layers or 4
        replays = args.replays or 10
    else:
        device = torch.device("cpu")
        name = "cpu"
        why = ("--cpu was given" if torch.cuda.is_available() else
               "no CUDA GPU found (torch.cuda.is_available() is False)")
        print(f"{why}: running the same flow through the CPU reference path of "
              f"cute_gemm.mixed_gemm (dequantize, then an fp32 matmul) on a small model. The times "
              f"below are of that reference path, not of the GPU kernel.")
        dims, layers = CPU_SMALL, args.layers or 2
        replays = args.replays or 3

    if args.shapes is not None:
        shapes = [(f"{k}x{n}", k, n) for k, n in args.shapes]
        decoder = False
        what = f"{len(shapes)} custom linear layer(s)"
    else:
        shapes = decoder_shapes(**dims)
        decoder = True
        what = (f"Llama-shaped decoder layers (hidden {dims['hidden']}, kv {dims['kv']}, "
                f"intermediate {dims['intermediate']}; attention left out)")
    print(f"Model: {layers} x {what}, {args.dtype} weights ~ N(0, {INIT_STD}^2)")

    torch.manual_seed(0)
    ref_model = LinearStack(shapes, layers, decoder, dtype, device)
    model = copy.deepcopy(ref_model)
    sys.stdout.flush()  # the progress bar goes to stderr: keep the order on a terminal
    summary = quantize_model(model, bits=args.bits, group_size=args.group_size,
                             symmetric=args.symmetric, skip=(), progress=True)
    print(summary)

    res = DemoResult(device=name, label=_label(args), layers=layers)
    ks = sorted({k for _, k, _ in shapes})
    gen = torch.Generator(device="cpu").manual_seed(1)

    def inputs_for(m):
        return {k: torch.randn(m, k, generator=gen).to(device=device, dtype=dtype) for k in ks}

    # Accuracy, per layer type and for the stack.
    with torch.no_grad():
        acc_in = inputs_for(ACCURACY_BATCH)
        for lname, k, n in shapes:
            x = acc_in[k]
            err_fp16 = err_deq = 0.0
            for ref_layer, q_layer in zip(ref_model.layers, model.layers):
                y = q_layer[lname](x)
                w = ref_layer[lname].weight
                err_fp16 = max(err_fp16, _rel_err(y, x.float() @ w.float().t()))
                w_deq = _dequantized_weight(q_layer[lname])
                err_deq = max(err_deq, _rel_err(y, x.float() @ w_deq.float().t()))
            res.accuracy.append({"layer": lname, "shape": f"{k}x{n}", "err_fp16": err_fp16,
                                 "err_dequant": err_deq})
            if not err_deq < KERNEL_ERR_LIMIT:
                res.ok = False
        ref_out = ref_model(acc_in).float()
        res.stack_err = _rel_err(model(acc_in), ref_out)
        if decoder:
            h_in = acc_in[shapes[0][1]].float()
            res.stack_growth = (ref_out.norm() / h_in.norm()).item()
    _print_accuracy(res, ACCURACY_BATCH)

    # Timing.
    if use_cuda:
        l2 = int(torch.cuda.get_device_properties(device).L2_cache_size)
        timer = lambda fn: _cuda_us(fn, replays)  # noqa: E731
        note = (f"median of {replays} CUDA-graph replays; per-layer calls rotate over copies "
                f"holding >= 2x the {l2 / 1e6:.0f} MB L2")
        stack_bytes = _module_bytes(model)
        if stack_bytes < 2 * l2:
            note += (f"; the quantized stack's {stack_bytes / 1e6:.1f} MB of weights fit in L2, "
                     f"so its times are L2-resident (more --layers avoids that)")
    else:
        l2 = 0
        timer = lambda fn: _cpu_us(fn, replays)  # noqa: E731
        note = f"CPU reference path, median of {replays} calls"
    with torch.no_grad():
        for m in args.batch:
            x_in = inputs_for(m)
            for lname, k, n in shapes:
                x = x_in[k]
                times = []
                for stack in (ref_model, model):
                    mods = _rotation([layer[lname] for layer in stack.layers], 2 * l2)
                    times.append(timer(lambda i, mods=mods: mods[i % len(mods)](x)))
                    del mods
                res.timing.append({"layer": lname, "shape": f"{k}x{n}", "batch": m,
                                   "fp16_us": times[0], "quant_us": times[1],
                                   "speedup": times[0] / times[1]})
            times = [timer(lambda i, s=stack: s(x_in)) for stack in (ref_model, model)]
            res.timing.append({"layer": "stack", "shape": f"{layers} layer(s)", "batch": m,
                               "fp16_us": times[0], "quant_us": times[1],
                               "speedup": times[0] / times[1]})
            if use_cuda:
                torch.cuda.empty_cache()
    _print_timing(res, args.batch, note)
    _print_tokens(res, args.batch)

    if args.plot:
        plot_speedups(args.plot, res, args.batch)
        print(f"\nPlot: {args.plot}")
    if not res.ok:
        bad = [r["layer"] for r in res.accuracy if not r["err_dequant"] < KERNEL_ERR_LIMIT]
        print(f"\nFAILED: the quantized layers {', '.join(bad)} differ from the product with "
              f"their dequantized weights by more than {KERNEL_ERR_LIMIT:g} (relative)")
    return res


def main(argv=None):
    """Entry point of ``python -m cute_gemm`` (without the ``layout`` subcommand): returns the
    exit status, 0 or 1 (a layer's result is wrong)."""
    args = parse_args(argv)
    return 0 if run(args).ok else 1
