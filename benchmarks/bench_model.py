"""Whole-model decode tokens/s: a Llama-3-8B-shaped transformers model (32 layers by default,
random weights, bf16) with 16-bit weights vs cute_gemm INT4 g128 / INT8 per-channel, unfused and
fused (q/k/v and gate/up as one GEMM each), with a 16-bit or quantized output head, and PyTorch's
own int4 kernel (torch._weight_int4pack_mm) in the same model as the peer; each in eager mode
and compiled (torch.compile), every decode step replayed as one CUDA graph.

    python benchmarks/bench_model.py [--layers 32] [--batch 1,16,64] [--modes graph,compile,...]
                                     [--variants bf16,int4,int4-fused,...] [--steps 32]
    python benchmarks/bench_model.py --cpu-smoke     # tiny model on the CPU: checks the code path

The decode loop, the static cache and the agreement check are bench_decode.py's (its docstring
says how a step is captured and how "agree" is computed). Per variant and batch size B: a prompt is
prefilled, then ``--repeats`` runs of ``--steps`` greedy steps are timed with CUDA events around
graph replays; the median run gives ms per step and tokens/s (B tokens per step). The ratio to
the 16-bit model is taken in the same run and the same mode.

Modes:

* ``graph``: the eager model; one decode step captured in a CUDA graph.
* ``compile``: the decode step's forward and its argmax over the vocabulary through
  ``torch.compile(fullgraph=True, dynamic=False)`` (prefill and the agreement check stay eager,
  so each batch size compiles one graph), then captured in a CUDA graph. ``fullgraph=True``
  means a graph break in our ops fails the run instead of hiding a fallback.
* ``compile-pr``: ``compile`` with its graphs compiled inside
  ``cute_gemm.inductor.persistent_reductions()``: the norms are one-pass (persistent) Triton
  reductions, whose PDL trigger (``--inductor-pdl``) comes after their loads instead of at
  their end. Its rows' ratios are to the 16-bit model compiled the same way.
* ``compile-decode``: ``compile`` inside ``cute_gemm.inductor.decode_compilation()``: the
  norms as in ``compile-pr``, and inductor's combo kernels (a layer's rotary embedding and cache
  rows in one launch). Ratios to the 16-bit model compiled the same way.
* ``compile-cdt``: ``compile-decode`` with inductor's ``coordinate_descent_tuning`` on (gpt-fast's
  setting): inductor then decomposes a matmul with one row (the 16-bit model at batch 1) into a
  Triton reduction instead of calling cuBLAS, and tunes every Triton kernel's block sizes. The
  strongest 16-bit baseline at batch 1 we know of; compiles take about twice as long.

Variants (VARIANTS below): ``bf16``; ``int4`` / ``int8`` (``quantize_model`` with the head kept
16-bit); ``-fused`` (``fuse=True``, SiLU(gate) * up inside the gate/up GEMM); ``-apart`` (fused,
but the MLPs keep their own forward: the activation in a kernel of its own, for the A/B);
``-head8`` (the output head INT8 per-channel too);
``torch-int4`` (every decoder linear replaced by a module calling ``torch._weight_int4pack_mm``,
group 128, bf16 only). ``--layer-schedule NAME@M=SCHEDULE`` pins a mixed GEMM schedule on the
quantized variants' layers of that name at that M (``QuantLinear.set_schedule``), to try plans
inside the model.

Writes model_<gpu>.json / .md / .png under --out (default benchmarks/results/) with the GPU name and
the torch, CUDA and transformers versions, and prints the table.
"""

import argparse
import ast
import contextlib
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
import torch._inductor.config as inductor_config  # noqa: E402

import bench_decode  # noqa: E402
import common  # noqa: E402
from cute_gemm.demo import int_list  # noqa: E402

LLAMA3_8B = bench_decode.LLAMA3_8B
SMOKE = bench_decode.SMOKE
INT4 = dict(bits=4, group_size=128, symmetric=True)
INT8 = dict(bits=8, group_size=-1, symmetric=True)
HEAD8 = dict(bits=8, group_size=-1, symmetric=True)
# name -> (kind, settings): kind "dense" (the 16-bit model), "cute" (quantize_model settings,
# plus "fuse", "head" and "gate": False to undo the gated MLP forward), "torch_int4" (the peer).
VARIANTS = {
    "bf16": ("dense", {}),
    "int4": ("cute", dict(INT4, fuse=False, head=None)),
    "int4-fused": ("cute", dict(INT4, fuse=True, head=None)),
    "int4-fused-head8": ("cute", dict(INT4, fuse=True, head=HEAD8)),
    "int4-fused-apart-head8": ("cute", dict(INT4, fuse=True, head=HEAD8, gate=False)),
    "int8": ("cute", dict(INT8, fuse=False, head=None)),
    "int8-fused": ("cute", dict(INT8, fuse=True, head=None)),
    "int8-fused-head8": ("cute", dict(INT8, fuse=True, head=HEAD8)),
    "int8-fused-apart-head8": ("cute", dict(INT8, fuse=True, head=HEAD8, gate=False)),
    "torch-int4": ("torch_int4", dict(group_size=128, inner_k_tiles=8)),
}
DEFAULT_VARIANTS = ["bf16", "int4", "int4-fused", "int4-fused-head8", "int8-fused", "torch-int4"]
# The modes are described in the module docstring; --modes picks, DEFAULT_MODES by default.
MODES = ("graph", "compile", "compile-pr", "compile-decode", "compile-cdt")
DEFAULT_MODES = ("graph", "compile")
# Attention implementations (--attention): transformers' "sdpa", or cute_gemm.attention's
# decode kernel ("cute_gemm"), set on every variant's model alike.
ATTENTIONS = ("sdpa", "cute_gemm")


def parse_args(argv=None):
    p = argparse.ArgumentParser(
        description="Decode tokens/s of a Llama-3-8B-shaped transformers model: 16-bit vs "
                    "cute_gemm INT4/INT8 (unfused, fused, quantized head) vs torch's int4 kernel, "
                    "eager and compiled, CUDA-graph replays.")
    p.add_argument("--layers", type=int, default=32, help="decoder layers (default 32)")
    p.add_argument("--batch", type=int_list, default=[1, 16, 64],
                   help="batch sizes (default 1,16,64)")
    p.add_argument("--prompt", type=int, default=32, help="prompt tokens (default 32)")
    p.add_argument("--steps", type=int, default=32, help="decode steps per timed run (32)")
    p.add_argument("--repeats", type=int, default=5, help="timed runs; the median is reported")
    p.add_argument("--modes", default=",".join(DEFAULT_MODES),
                   help=f"comma-separated subset of {', '.join(MODES)} (the module docstring "
                        f"describes them); default {','.join(DEFAULT_MODES)}")
    p.add_argument("--variants", default=",".join(DEFAULT_VARIANTS),
                   help="comma-separated subset of " + ", ".join(VARIANTS))
    p.add_argument("--attention", default="sdpa",
                   help="attention implementations, comma-separated, each run on every variant: "
                        "sdpa (transformers') and/or cute_gemm (cute_gemm.attention's decode "
                        "kernel); default sdpa")
    p.add_argument("--dtype", choices=("bfloat16", "float16"), default="bfloat16",
                   help="model dtype (default bfloat16; torch-int4 needs bfloat16)")
    p.add_argument("--deadline-s", type=float, default=0,
                   help="skip (and record as skipped) the variants that would start after this "
                        "many seconds (0: none), so that a time-limited run still writes its "
                        "results")
    p.add_argument("--profile", type=int, default=0, metavar="STEPS",
                   help="also profile STEPS decode steps per variant and batch (torch.profiler "
                        "over CUDA-graph replays of the step, as timed) and report GPU time per "
                        "step by kernel kind and by launch: busy (durations) and exposed (what "
                        "each kernel adds past the ones before it, which under programmatic "
                        "dependent launch overlap), and two decoder layers of the middle step "
                        "kernel by kernel (start, duration, exposed, lead)")
    p.add_argument("--inductor-pdl", action="store_true",
                   help="compile mode: torch._inductor.config.triton.enable_pdl = True, so that "
                        "inductor's Triton kernels launch as programmatic dependents and let the "
                        "next kernel (a cute_gemm GEMM streaming its weights) start early; for "
                        "every variant of the run, the 16-bit one included")
    p.add_argument("--no-batch-increments", dest="batch_increments", action="store_false",
                   help="compile-decode / compile-cdt: decode_compilation(batch_increments=False), "
                        "the static cache's per-layer length increments in a kernel each (the "
                        "default batches them in one); for every variant of the run")
    p.add_argument("--no-early-triggers", dest="early_triggers", action="store_false",
                   help="compile-decode / compile-cdt: decode_compilation(early_triggers=False), "
                        "each Triton kernel letting the next one launch after its last load (the "
                        "default, with --inductor-pdl, lets it launch right after the kernel's "
                        "dependency wait); for every variant of the run")
    p.add_argument("--no-split-argmax", dest="split_argmax", action="store_false",
                   help="compile-decode / compile-cdt: decode_compilation(split_argmax=False), "
                        "the step's greedy pick over the vocabulary as inductor's one CTA a row "
                        "(the default takes it in chunks over the GPU); for every variant of the "
                        "run")
    p.add_argument("--partials-into-reductions-max-m", default=None, metavar="M",
                   help="compile-decode / compile-cdt: decode_compilation("
                        "partials_into_reductions_max_m=M): the split GEMMs whose sums reach a "
                        "reduction (o / down before the residual add + RMSNorm) leave their "
                        "partial sums to the norm up to this M and keep their reduce kernel "
                        "above it; an int >= 0, or 'none' for every M (default: "
                        "cute_gemm.inductor.DEFAULT_PARTIALS_INTO_REDUCTIONS_MAX_M); for every "
                        "variant of the run")
    p.add_argument("--realize-reads", type=int, default=None, metavar="N",
                   help="compile-decode / compile-cdt: decode_compilation(realize_reads=N), "
                        "inductor's realize_reads_threshold inside the block (default: "
                        "decode_compilation's, cute_gemm.inductor.DEFAULT_REALIZE_READS; 4 is "
                        "inductor's own); for every variant of the run")
    p.add_argument("--inductor-config", action="append", default=[], metavar="KEY=VALUE",
                   help="set torch._inductor.config's KEY (dotted, e.g. "
                        "triton.force_cooperative_reductions) to VALUE (a Python literal) for "
                        "every compilation of the run, every variant; repeatable. A KEY inductor "
                        "does not have fails the run. Inside compile-decode / compile-cdt, what "
                        "decode_compilation sets wins (its realize_reads_threshold: use "
                        "--realize-reads; combo_kernels)")
    p.add_argument("--layer-schedule", action="append", default=[], metavar="NAME@M=SCHEDULE",
                   help="pin a mixed GEMM schedule in the quantized variants: every QuantLinear "
                        "whose module name is NAME or ends with '.NAME' runs SCHEDULE (the op's "
                        "text, e.g. kernel=decode,warps=16,col_warps=2,splits=1) on inputs of M "
                        "rows (QuantLinear.set_schedule); repeatable. A NAME that matches no "
                        "layer fails the variant")
    p.add_argument("--tag", default="", help="suffix of the output files' stem")
    p.add_argument("--out", default=None, help="output directory (default benchmarks/results/)")
    p.add_argument("--no-plot", action="store_true", help="skip the PNG plot")
    p.add_argument("--cpu-smoke", action="store_true",
                   help="a tiny model on the CPU, eager, few steps: checks the code path only "
                        "(results go to benchmarks/results/tmp/)")
    args = p.parse_args(argv)
    args.variants = common.choice_list(p, args.variants, "--variants", list(VARIANTS))
    args.modes = common.choice_list(p, args.modes, "--modes", list(MODES))
    args.attention = common.choice_list(p, args.attention, "--attention", list(ATTENTIONS))
    for name in ("layers", "prompt", "steps", "repeats"):
        if getattr(args, name) < 1:
            p.error(f"--{name} must be >= 1; got {getattr(args, name)}")
    text = args.partials_into_reductions_max_m
    if text is None:
        from cute_gemm.inductor import DEFAULT_PARTIALS_INTO_REDUCTIONS_MAX_M
        args.partials_into_reductions_max_m = DEFAULT_PARTIALS_INTO_REDUCTIONS_MAX_M
    elif text == "none":
        args.partials_into_reductions_max_m = None
    elif not text.isdigit():
        p.error(f"--partials-into-reductions-max-m: expected an int >= 0 or 'none'; got {text!r}")
    else:
        args.partials_into_reductions_max_m = int(text)
    if any(b < 1 for b in args.batch):
        p.error(f"--batch: sizes must be >= 1; got {args.batch}")
    args.layer_schedule = [parse_layer_schedule(p, text) for text in args.layer_schedule]
    args.inductor_config = dict(parse_inductor_setting(p, text) for text in args.inductor_config)
    args.dtype = getattr(torch, args.dtype)
    if args.inductor_pdl and not hasattr(inductor_config.triton, "enable_pdl"):
        p.error(f"--inductor-pdl: this torch ({torch.__version__}) has no "
                "torch._inductor.config.triton.enable_pdl")
    return args


def parse_inductor_setting(parser, text):
    """--inductor-config's KEY=VALUE as (key, value): KEY one of torch._inductor.config's
    settings, VALUE a Python literal."""
    key, eq, value = text.partition("=")
    key = key.strip()
    if not eq or not key:
        parser.error(f"--inductor-config: expected KEY=VALUE; got {text!r}")
    if key not in inductor_config.get_config_copy():
        parser.error(f"--inductor-config: torch {torch.__version__} has no inductor setting "
                     f"{key!r}")
    try:
        parsed = ast.literal_eval(value.strip())
    except (ValueError, SyntaxError):
        parser.error(f"--inductor-config {key}: VALUE must be a Python literal (True, 4, "
                     f"'name'); got {value.strip()!r}")
    return key, parsed


def parse_layer_schedule(parser, text):
    """--layer-schedule's NAME@M=SCHEDULE as (name, m, schedule text)."""
    name, at, rest = text.partition("@")
    m, eq, schedule = rest.partition("=")
    if not (at and eq and name and schedule) or not m.isdigit() or int(m) < 1:
        parser.error(f"--layer-schedule: expected NAME@M=SCHEDULE (e.g. "
                     f"self_attn.o_proj@1=kernel=decode,warps=16); got {text!r}")
    return name, int(m), schedule


def pin_layer_schedules(cute_gemm, model, pins):
    """QuantLinear.set_schedule on the layers --layer-schedule names; a note of what was pinned.
    Raises ValueError for a name that matches no quantized layer (and for a malformed schedule)."""
    notes = []
    for name, m, schedule in pins:
        layers = [module for path, module in model.named_modules()
                  if isinstance(module, cute_gemm.QuantLinear)
                  and (path == name or path.endswith("." + name))]
        if not layers:
            raise ValueError(f"--layer-schedule: no quantized layer named {name!r} (or ending "
                             f"with '.{name}')")
        for layer in layers:
            layer.set_schedule(m, schedule)
        notes.append(f"{len(layers)} x {name} at M={m}: {layers[0].schedules[m]}")
    return notes


# ------------------------------------------------------------------------------------ the peer


class TorchInt4Linear(torch.nn.Module):
    """y = x @ W^T through torch._weight_int4pack_mm (PyTorch's own int4 kernel): W quantized
    asymmetrically per group of K as bench_mixed_gemm.py's torch_int4 candidate does (gpt-fast's
    format). bf16 activations only; inputs of other dtypes are refused."""

    def __init__(self, linear, group_size=128, inner_k_tiles=8):
        super().__init__()
        from bench_mixed_gemm import torch_int4_pack, torch_int4_quantize

        if linear.bias is not None:
            raise ValueError("TorchInt4Linear: layers with a bias are not supported")
        q, sz, _ = torch_int4_quantize(linear.weight.detach(), group_size)
        packed, _ = torch_int4_pack(q, inner_k_tiles)
        self.group_size = group_size
        self.out_features = linear.out_features
        self.register_buffer("packed", packed)
        self.register_buffer("scales_and_zeros", sz)

    def forward(self, x):
        if x.dtype != torch.bfloat16:
            raise TypeError(f"TorchInt4Linear: x must be bfloat16; got {x.dtype}")
        y = torch._weight_int4pack_mm(x.reshape(-1, x.shape[-1]), self.packed, self.group_size,
                                      self.scales_and_zeros)
        return y.reshape(*x.shape[:-1], self.out_features)


def to_torch_int4(model, group_size, inner_k_tiles):
    """Replaces every nn.Linear of the decoder layers by TorchInt4Linear (the head stays)."""
    sites = [(parent, name, child) for parent in model.model.layers.modules()
             for name, child in parent.named_children() if isinstance(child, torch.nn.Linear)]
    for parent, name, child in sites:
        setattr(parent, name, TorchInt4Linear(child, group_size, inner_k_tiles))
    return len(sites)


# ------------------------------------------------------------------------------------ variants


def make_variant(cute_gemm, base, kind, settings, copy_module):
    """The variant's model (a converted copy of ``base``, or ``base`` itself) and a note."""
    if kind == "dense":
        return base, "16-bit weights"
    model = copy_module(base)
    if kind == "torch_int4":
        n = to_torch_int4(model, settings["group_size"], settings["inner_k_tiles"])
        return model, f"{n} decoder linears on torch._weight_int4pack_mm, head 16-bit"
    options = {k: v for k, v in settings.items() if k not in ("fuse", "head", "gate")}
    summary = cute_gemm.quantize_model(model, skip=("lm_head",), progress=False,
                                       fuse=settings["fuse"], **options)
    fused = getattr(summary, "fused", None)
    note = f"{len(summary.converted)} layers quantized"
    if settings["fuse"]:
        note += f", {len(fused) if fused is not None else '?'} fused groups"
        if not settings.get("gate", True):
            for module in model.modules():
                cute_gemm.fuse.ungate_mlp(module)
            note += ", SiLU(gate) * up apart"
        else:
            note += f", {len(getattr(summary, 'gated', []))} MLPs gated in the GEMM"
    head = settings["head"]
    if head is not None:
        model.lm_head = cute_gemm.QuantLinear.from_linear(model.lm_head, **head)
        note += f", head INT{head['bits']}"
    else:
        note += ", head 16-bit"
    return model, note


def compiled_next_token(model):
    """The decode step's forward and greedy pick (bench_decode.greedy_next_token) through
    torch.compile(fullgraph=True, dynamic=False): one graph per batch size (the decode step's
    shape); a graph break fails the run. The argmax over the vocabulary is in the graph, where
    inductor splits it over CTAs: eager, it is aten's one-CTA reduce (~30 us per step on an
    H100 in every variant)."""
    torch._dynamo.reset()

    def next_token(**inputs):
        return bench_decode.greedy_next_token(model, **inputs)

    return torch.compile(next_token, fullgraph=True, dynamic=False)


def set_inductor_pdl(enabled):
    """torch._inductor.config.triton.enable_pdl for this run's compilations (--inductor-pdl)."""
    if enabled:
        inductor_config.triton.enable_pdl = True


def set_inductor_settings(settings):
    """torch._inductor.config's dotted KEYs set to their values for this run's compilations
    (--inductor-config)."""
    for key, value in settings.items():
        *path, name = key.split(".")
        owner = inductor_config
        for part in path:
            owner = getattr(owner, part)
        setattr(owner, name, value)


# Kernel kinds for --profile: the first pattern (lower-case substring of the kernel name) that
# matches names the kind.
KERNEL_KINDS = (
    ("cute_gemm mixed GEMM", ("mixed_gemm_kernel", "mixed_wgmma", "mixed_decode",
                              "split_k_reduce")),
    ("cute_gemm dequantize / dense", ("dequantize_weight", "cute_gemm::gemm_kernel")),
    ("torch int4 GEMM", ("tinygemm", "int4pack", "int4_mm")),
    ("cute_gemm decode attention", ("decode_attention_kernel",)),
    ("dense GEMM (cuBLAS)", ("nvjet", "gemm", "cutlass", "xmma", "gemv")),
    ("attention", ("flash", "fmha", "attention", "sdpa", "softmax")),
    ("collectives (NCCL)", ("nccl",)),
    ("copies / memset", ("memcpy", "memset", "copy_kernel", "catarray", "cat_")),
)
OTHER_KIND = "other (norms, rope, activations, elementwise, inductor's fused kernels)"


def kernel_kind(name):
    low = name.lower()
    if low.startswith("triton_"):
        # inductor's fused kernels are named after the ops they fuse ("..._mixed_gemm_mul_silu",
        # "..._scaled_dot_product_cudnn_attention_..."), not after a GEMM or attention kernel.
        return OTHER_KIND
    for kind, patterns in KERNEL_KINDS:
        if any(p in low for p in patterns):
            return kind
    return OTHER_KIND


_GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")


def exposed_times(trace_events):
    """The GPU events of a chrome trace (kernels, copies, memsets) in start order, each with its
    exposed time: its end minus the latest end of the events before it (0 if it ends inside
    them). Under programmatic dependent launch a kernel starts before the one ahead of it ends,
    so durations overlap and add up to more than the step; exposed times add up to the span
    that ends with the last event. Returns [(event, exposed us, lead us)]: lead is the start
    minus that latest end (negative: started early, positive: an idle gap before it)."""
    gpu = sorted((e for e in trace_events if e.get("cat") in _GPU_CATS and "dur" in e),
                 key=lambda e: float(e.get("ts", 0.0)))
    out = []
    latest = float(gpu[0].get("ts", 0.0)) if gpu else 0.0  # the first event: exposed = duration
    for e in gpu:
        start, dur = float(e.get("ts", 0.0)), float(e["dur"])
        out.append((e, max(0.0, start + dur - latest), start - latest))
        latest = max(latest, start + dur)
    return out


def _short(name, width=90):
    return name if len(name) <= width else name[:width - 3] + "..."


def _dims(values):
    """A launch's grid or block as "XxYxZ"."""
    return "x".join(map(str, values))


def kernel_table(trace_events, steps, top=16):
    """The ``top`` GPU events by exposed time (exposed_times) from a chrome trace's events
    (``traceEvents`` of torch.profiler's export): one entry per (name, grid, block) with its
    kind, calls, GPU ms per step (busy: the sum of durations; exposed) and mean us per call.
    The grid tells apart the launches of one kernel on different layer shapes."""
    by_launch = {}
    for e, exposed, lead in exposed_times(trace_events):
        args = e.get("args", {})
        key = (e["name"], tuple(args.get("grid", ())), tuple(args.get("block", ())))
        us, exp, ahead, calls = by_launch.get(key, (0.0, 0.0, 0.0, 0))
        by_launch[key] = (us + float(e["dur"]), exp + exposed, ahead + lead, calls + 1)
    rows = []
    for (name, grid, block), (us, exp, ahead, calls) in by_launch.items():
        rows.append({"kernel": _short(name),
                     "kind": kernel_kind(name), "grid": _dims(grid),
                     "block": _dims(block), "calls_per_step": calls / steps,
                     "ms_per_step": us / 1e3 / steps, "exposed_ms_per_step": exp / 1e3 / steps,
                     "us_per_call": us / calls, "exposed_us_per_call": exp / calls,
                     "lead_us": ahead / calls})
    rows.sort(key=lambda r: -r["exposed_ms_per_step"])
    return rows[:top]


def kind_table(trace_events, steps):
    """{kind: (busy ms, exposed ms, events)} per step, plus "total" (exposed: the steps' span)."""
    kinds = {}
    for e, exposed, _ in exposed_times(trace_events):
        kind = kernel_kind(e["name"])
        busy, exp, count = kinds.get(kind, (0.0, 0.0, 0))
        kinds[kind] = (busy + float(e["dur"]) / 1e3 / steps, exp + exposed / 1e3 / steps,
                       count + 1 / steps)
    kinds["total"] = tuple(sum(v[i] for v in kinds.values()) for i in range(3))
    return kinds


def repeat_period(keys, start, longest=64):
    """The smallest p in 2..longest whose p keys from ``start`` repeat right after them (one
    decoder layer's kernels, in a step of identical layers); None when none does."""
    for p in range(2, longest + 1):
        if start + 2 * p > len(keys):
            break
        if keys[start:start + p] == keys[start + p:start + 2 * p]:
            return p
    return None


def step_timeline(trace_events, steps, default_window=40):
    """The GPU events of the middle one of ``steps`` profiled steps, two decoder layers of them
    from the step's middle (a layer: the shortest repeating run of (kernel, grid) a quarter into
    the step; ``default_window`` events where none repeats; where inductor names a kernel
    differently in alternate layers, the run is two layers and four are shown), in start order:
    each with its index in the step, start (us after the step's first event), duration, exposed
    time and lead (exposed_times). Shows where a layer's chain waits: a kernel's lead is its start
    against the previous kernels' end (negative: launched early under PDL), its exposed time what
    it adds to the step. The steps are split by count, so they must be replays of one graph
    (equal event counts); otherwise the whole profile is one sequence."""
    events = exposed_times(trace_events)
    if steps > 1 and len(events) % steps == 0:
        per = len(events) // steps
        events = events[per * (steps // 2):per * (steps // 2 + 1)]
    if not events:
        return []
    t0 = float(events[0][0].get("ts", 0.0))
    keys = [(e["name"], tuple(e.get("args", {}).get("grid", ()))) for e, _, _ in events]
    mid = len(events) // 2
    period = repeat_period(keys, len(events) // 4)  # past the step's first layers' ends
    window = 2 * period if period else default_window
    begin = max(0, min(mid, len(events) - window))
    rows = []
    for i in range(begin, min(len(events), begin + window)):
        e, exposed, lead = events[i]
        args = e.get("args", {})
        rows.append({"index": i, "kernel": _short(e["name"], 60), "kind": kernel_kind(e["name"]),
                     "grid": _dims(args.get("grid", ())), "block": _dims(args.get("block", ())),
                     "start_us": float(e.get("ts", 0.0)) - t0, "us": float(e["dur"]),
                     "exposed_us": exposed, "lead_us": lead})
    return rows


def profile_steps(dec, steps, warm=2):
    """Where ``steps`` decode steps of ``dec`` spend GPU time, by kernel kind (kind_table) and by
    launch (kernel_table), and whether the steps were CUDA-graph replays (as timed) or, where
    capture failed, uncaptured calls; ``warm`` steps run (unprofiled) after the capture's two.
    Also the middle step's timeline of two layers (step_timeline), as a fourth result. Needs
    CUDA."""
    import json
    import tempfile

    from torch.profiler import ProfilerActivity, profile

    with torch.no_grad():
        try:
            dec.capture()  # sets dec.graph only once the capture succeeded
            replayed = True
        except Exception:  # noqa: BLE001  (any capture failure: profile uncaptured steps)
            replayed = False
        dec.run(warm)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            dec.run(steps)
            torch.cuda.synchronize()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "trace.json")
        prof.export_chrome_trace(path)
        with open(path) as f:
            events = json.load(f).get("traceEvents", [])
    return (kind_table(events, steps), kernel_table(events, steps), replayed,
            step_timeline(events, steps))


def profile_rows(transformers, model, name, mode, batch, args, device, next_token):
    """A variant's, mode's and batch's profile rows by write_profiles' file: "_profile" one per
    kernel kind (see profile_steps), "_kernels" its top kernels (kernel_table), "_timeline" its
    middle step's two layers (step_timeline)."""
    # The timed run's cache, and the profiled steps at the middle of its timed positions: the
    # attention kernel's length (and so its splits) as timed.
    warm, total = bench_decode.profile_position(args.steps, args.repeats, args.profile)
    dec = bench_decode.Decoder(transformers, model, batch, args.prompt, total, device,
                               next_token=next_token)
    with torch.no_grad():
        dec.prefill()
    kinds, kernels, replayed, timeline = profile_steps(dec, args.profile, warm=warm)
    del dec
    tag = {"variant": name, "mode": mode, "batch": batch,
           "attention": model.config._attn_implementation,
           "steps": "graph replays" if replayed else "uncaptured (capture failed)"}
    return {"_profile": [dict(tag, kind=kind, ms_per_step=busy, exposed_ms_per_step=exposed,
                              kernels_per_step=count)
                         for kind, (busy, exposed, count) in sorted(kinds.items(),
                                                                    key=lambda kv: -kv[1][1])],
            "_kernels": [dict(tag, **k) for k in kernels],
            "_timeline": [dict(tag, **t) for t in timeline]}


def set_attention(cute_gemm, model, attention):
    """The model's attention implementation: transformers' sdpa or cute_gemm's decode kernel."""
    if attention == "cute_gemm":
        cute_gemm.attention.use_decode_attention(model)
    else:
        model.set_attn_implementation(attention)
    if model.config._attn_implementation != attention:
        raise RuntimeError(f"the model reports attention '{model.config._attn_implementation}' "
                           f"after switching to '{attention}'")


@contextlib.contextmanager
def tuned_decode_compilation(cute_gemm, **settings):
    """compile-cdt's block: decode_compilation(**settings) with inductor's coordinate-descent
    tuning."""
    with cute_gemm.inductor.decode_compilation(**settings), \
            inductor_config.patch(coordinate_descent_tuning=True):
        yield


def run_variant(cute_gemm, transformers, base, name, mode, args, step_args, device, copy_module,
                profiled=None, attention="sdpa"):
    """The rows of one variant in one mode with one attention implementation, a row per batch
    size; with --profile, its profile rows are added to ``profiled`` (profile_rows' keys)."""
    kind, settings = VARIANTS[name]
    t0 = time.perf_counter()
    try:
        model, note = make_variant(cute_gemm, base, kind, settings, copy_module)
        if kind == "cute" and args.layer_schedule:
            note += "; pinned: " + "; ".join(
                pin_layer_schedules(cute_gemm, model, args.layer_schedule))
        set_attention(cute_gemm, model, attention)
    except Exception as e:  # noqa: BLE001  (recorded; the other variants still run)
        print(f"  {name}: could not build: {type(e).__name__}: {e}", flush=True)
        return [{"variant": name, "mode": mode, "batch": b, "attention": attention,
                 "status": f"ERROR {type(e).__name__}: {e}"[:200]} for b in args.batch]
    print(f"  {name} [{attention} attention]: {note} ({time.perf_counter() - t0:.1f} s)",
          flush=True)
    next_token = compiled_next_token(model) if mode.startswith("compile") else None
    # The compilations happen at the first calls, inside bench_variant.
    decode = dict(batch_increments=args.batch_increments, early_triggers=args.early_triggers,
                  partials_into_reductions_max_m=args.partials_into_reductions_max_m,
                  split_argmax=args.split_argmax)
    if args.realize_reads is not None:
        decode["realize_reads"] = args.realize_reads
    compiling = {"compile-pr": cute_gemm.inductor.persistent_reductions,
                 "compile-decode": lambda: cute_gemm.inductor.decode_compilation(**decode),
                 "compile-cdt": lambda: tuned_decode_compilation(cute_gemm, **decode)}.get(
                     mode, contextlib.nullcontext)()
    with compiling:
        rows = _batch_rows(transformers, model, name, mode, args, step_args, device, next_token,
                           note, attention, profiled)
    del next_token
    torch._dynamo.reset()
    if model is not base:
        del model
        if device.type == "cuda":
            torch.cuda.empty_cache()
    return rows


def _batch_rows(transformers, model, name, mode, args, step_args, device, next_token, note,
                attention, profiled):
    """run_variant's rows, one per batch size (and its profile with --profile)."""
    rows = []
    for batch in args.batch:
        t0 = time.perf_counter()
        try:
            row = bench_decode.bench_variant(transformers, model, batch, step_args, device,
                                             next_token=next_token)
            row["status"] = "ok"
        except Exception as e:  # noqa: BLE001
            row = {"status": f"ERROR {type(e).__name__}: {str(e)[:160]}"}
            if device.type == "cuda":
                torch.cuda.synchronize()
        row.update(variant=name, step_mode=row.get("mode"), mode=mode, batch=batch, note=note,
                   attention=attention, wall_s=round(time.perf_counter() - t0, 1))
        rows.append(row)
        if row["status"] == "ok":
            print(f"  {name:<17} {mode:<14} {attention:<9} B={batch:<3} "
                  f"{row['ms_per_step']:8.3f} ms/step "
                  f"{row['tokens_per_s']:9.1f} tok/s  agree {row['agree']:.3f}  "
                  f"[{row['step_mode']}, {row['wall_s']} s]", flush=True)
        else:
            print(f"  {name:<17} {mode:<14} {attention:<9} B={batch:<3} {row['status']}",
                  flush=True)
        if profiled is not None and args.profile and device.type == "cuda":
            try:
                found = profile_rows(transformers, model, name, mode, batch, args, device,
                                     next_token)
                for key, found_rows in found.items():
                    profiled.setdefault(key, []).extend(found_rows)
                print("    profile (exposed ms per step): " + "; ".join(
                    f"{r['kind']} {r['exposed_ms_per_step']:.3f} ms ({r['kernels_per_step']:.0f})"
                    for r in found["_profile"]), flush=True)
            except Exception as e:  # noqa: BLE001  (the timing rows stand without it)
                print(f"    profile failed: {type(e).__name__}: {e}", flush=True)
    return rows


# ------------------------------------------------------------------------------------ main


def add_ratios(rows):
    """Each ok row's speedup (the 16-bit model's ms/step over the row's, same mode, batch and
    attention), vs_unfused (the unfused variant of the same weights over the row's) and vs_sdpa
    (the same variant with transformers' sdpa attention over the row's)."""
    ok = [r for r in rows if r.get("status") == "ok"]
    by = {(r["variant"], r["mode"], r["batch"], r.get("attention", "sdpa")): r["ms_per_step"]
          for r in ok}
    for r in ok:
        attention = r.get("attention", "sdpa")
        dense = by.get(("bf16", r["mode"], r["batch"], attention))
        r["speedup"] = dense / r["ms_per_step"] if dense else None
        plain = r["variant"].replace("-fused-head8", "").replace("-fused", "")
        ref = by.get((plain, r["mode"], r["batch"], attention))
        r["vs_unfused"] = ref / r["ms_per_step"] if ref and plain != r["variant"] else None
        sdpa = by.get((r["variant"], r["mode"], r["batch"], "sdpa"))
        r["vs_sdpa"] = sdpa / r["ms_per_step"] if sdpa and attention != "sdpa" else None


def _meta(args, transformers, device, dims):
    from cute_gemm.inductor import DEFAULT_REALIZE_READS
    meta = bench_decode.model_meta(transformers, device, args.layers, dims,
                                   str(args.dtype).replace("torch.", ""))
    meta.update({
        "prompt_tokens": args.prompt, "decode_steps": args.steps, "repeats": args.repeats,
        "inductor_pdl": args.inductor_pdl,
        "batch_increments": args.batch_increments,
        "early_triggers": args.early_triggers,
        "split_argmax": args.split_argmax,
        "partials_into_reductions_max_m": args.partials_into_reductions_max_m,
        "realize_reads": (args.realize_reads if args.realize_reads is not None
                          else DEFAULT_REALIZE_READS),
        "layer_schedules": [f"{n}@{m}={s}" for n, m, s in args.layer_schedule],
        "inductor_config": {k: repr(v) for k, v in args.inductor_config.items()},
    })
    return meta


def plot(path, rows, title):
    labels = sorted({(r["mode"], r["batch"]) for r in rows})
    series = {}
    for variant in dict.fromkeys(r["variant"] for r in rows):
        by = {(r["mode"], r["batch"]): r.get("speedup") for r in rows if r["variant"] == variant}
        series[variant] = [by.get(k) if by.get(k) is not None else float("nan") for k in labels]
    return common.plot_series(path, [f"{m} B={b}" for m, b in labels], series, title,
                              ylabel="tokens/s vs 16-bit (same mode, same run)")


def write_profiles(out_dir, stem, meta, args, profiled):
    """--profile's files next to the results, from ``profiled`` (profile_rows' keys, each a list
    of rows): <stem>_profile (by kernel kind), <stem>_kernels (the largest launches) and
    <stem>_timeline (two layers of the middle step), each JSON + markdown; a missing or empty
    list is skipped."""
    first = args.prompt + 2 + bench_decode.profile_position(args.steps, args.repeats,
                                                            args.profile)[0]
    files = [
        ("_profile", "Where a decode step's GPU time goes",
         [("steps", "profiled"), ("kind", "kernel kind"),
          ("exposed_ms_per_step", "exposed ms/step"), ("ms_per_step", "busy ms/step"),
          ("kernels_per_step", "kernels/step")],
         [f"- torch.profiler over {args.profile} decode steps, each a replay of the CUDA graph the "
          "timing replays (uncaptured calls where capture failed: 'profiled' says which); GPU "
          "time of the kernels, copies and memsets by kind (name patterns in "
          "bench_model.KERNEL_KINDS), per step. The steps are the timed runs' middle ones "
          f"(positions from {first}, in a cache of the timed run's length).",
          "- busy: the sum of the kernels' durations. exposed: each kernel's end minus the latest "
          "end of the kernels before it (0 if inside them). Under programmatic dependent launch a "
          "kernel starts before the one ahead of it ends (a GEMM streams its weights meanwhile), "
          "so busy times overlap; exposed times add up to the profiled span (total), idle gaps "
          "included."]),
        ("_kernels", "The largest kernels of a decode step",
         [("kernel", "kernel"), ("kind", "kind"), ("grid", "grid"), ("block", "block"),
          ("calls_per_step", "calls/step"), ("exposed_us_per_call", "exposed us/call"),
          ("us_per_call", "busy us/call"), ("lead_us", "lead us"),
          ("exposed_ms_per_step", "exposed ms/step"), ("ms_per_step", "busy ms/step")],
         [f"- The same profile ({args.profile} steps) by launch: kernel name, grid and block (one "
          "kernel on different layer shapes has different grids); the 16 largest by exposed time "
          "per variant, mode and batch. lead: the mean start minus the latest end of the kernels "
          "before it (negative: launched early, under PDL)."]),
        ("_timeline", "Two decoder layers of a decode step, kernel by kernel",
         [("index", "#"), ("kernel", "kernel"), ("kind", "kind"), ("grid", "grid"),
          ("block", "block"), ("start_us", "start us"), ("us", "us"), ("exposed_us", "exposed us"),
          ("lead_us", "lead us")],
         [f"- The same profile's middle step ({args.profile} steps profiled): two decoder layers' "
          "GPU events in start order from the step's middle (a layer: the shortest repeating run "
          "of kernel and grid, two layers where inductor names a kernel differently in alternate "
          "layers, and then four are shown; 40 events where none repeats). #: the event's index "
          "in the step; "
          "start: us after the step's first event; exposed and lead as in the kernels file (lead "
          "< 0: launched before the kernels ahead of it ended, under PDL; > 0: the GPU idled that "
          "long before it)."]),
    ]
    tag_columns = [("variant", "weights"), ("mode", "mode"), ("attention", "attention"),
                   ("batch", "batch")]
    for suffix, title, columns, notes in files:
        rows = profiled.get(suffix)
        if rows:
            j, m = common.write_results(out_dir, stem + suffix, meta, tag_columns + columns, rows,
                                        f"{title} ({meta['gpu_name']})", notes)
            print(f"wrote {j}\nwrote {m}")


def main(argv=None):
    args = parse_args(argv)
    if not args.cpu_smoke:
        common.require_cuda("bench_model.py")
    import copy

    import transformers

    import cute_gemm

    if args.cpu_smoke:
        device, dims = torch.device("cpu"), dict(SMOKE)
        args.layers = min(args.layers, 2)
        args.prompt, args.steps, args.repeats = min(args.prompt, 8), min(args.steps, 3), 1
        args.batch = [b for b in args.batch if b <= 2] or [1]
        # On the CPU every step runs eagerly (no capture); compile is kept if asked for.
        args.variants = [v for v in args.variants if v != "torch-int4"]
        out_dir = args.out or os.path.join(common.DEFAULT_OUT_DIR, "tmp")
    else:
        device, dims = torch.device("cuda"), dict(LLAMA3_8B)
        out_dir = args.out or common.DEFAULT_OUT_DIR
    if "torch-int4" in args.variants and args.dtype != torch.bfloat16:
        raise SystemExit("bench_model.py: torch-int4 needs --dtype bfloat16")
    set_inductor_pdl(args.inductor_pdl)
    set_inductor_settings(args.inductor_config)

    print(f"building LlamaForCausalLM ({args.layers} layers, {dims}) on {device} ...",
          flush=True)
    t0 = time.perf_counter()
    base = bench_decode.build_model(transformers, dims, args.layers, device, args.dtype)
    print(f"  built in {time.perf_counter() - t0:.1f} s", flush=True)
    meta = _meta(args, transformers, device, dims)
    step_args = argparse.Namespace(prompt=args.prompt, steps=args.steps, repeats=args.repeats,
                                   mode="graph" if device.type == "cuda" else "eager")
    rows, profiled = [], {}
    started = time.perf_counter()
    # Modes outermost, so that with --deadline-s every variant gets the first mode's rows before
    # any gets the second's (each variant's model is built once per mode).
    for mode in args.modes:
        for attention in args.attention:
            for name in args.variants:
                if args.deadline_s and time.perf_counter() - started > args.deadline_s:
                    rows += [{"variant": name, "mode": mode, "batch": b, "attention": attention,
                              "status": f"skipped (--deadline-s {args.deadline_s:g} passed)"}
                             for b in args.batch]
                    continue
                rows += run_variant(cute_gemm, transformers, base, name, mode, args, step_args,
                                    device, copy.deepcopy, profiled, attention)
    add_ratios(rows)

    stem = "model_cpu-smoke" if args.cpu_smoke else "model_" + common.slug(meta["gpu_name"])
    stem += f"_{args.tag}" if args.tag else ""
    columns = [("variant", "weights"), ("mode", "mode"), ("attention", "attention"),
               ("batch", "batch"), ("ms_per_step", "ms/step"), ("tokens_per_s", "tokens/s"),
               ("speedup", "vs 16-bit"), ("vs_unfused", "vs unfused"),
               ("vs_sdpa", "vs sdpa attention"), ("agree", "agree"),
               ("status", "status"), ("note", "model")]
    notes = [
        f"- Greedy decode, one token per sequence per step, static KV cache; ms/step is the "
        f"median of {args.repeats} runs of {args.steps} steps, each step one CUDA-graph replay "
        f"(on the CPU smoke test: eager calls).",
        "- compile: the decode step's forward and argmax through torch.compile(fullgraph=True, "
        "dynamic=False); prefill and the agreement check eager." +
        (" Inductor's Triton kernels launched as programmatic dependents "
         "(torch._inductor.config.triton.enable_pdl, --inductor-pdl)." if args.inductor_pdl
         else ""),
        "- compile-pr: compile, with the graphs compiled inside "
        "cute_gemm.inductor.persistent_reductions() (norms as one-pass Triton reductions).",
        "- compile-decode: compile, with the graphs compiled inside "
        "cute_gemm.inductor.decode_compilation() (those norms, and inductor's combo kernels).",
        "- compile-cdt: compile-decode with torch._inductor.config.coordinate_descent_tuning "
        "(one-row matmuls of the 16-bit model as tuned Triton reductions instead of cuBLAS).",
        "- vs 16-bit: the 16-bit model's ms/step over this row's, same mode, batch and attention, "
        "same run; vs unfused: the unfused variant of the same weights over this row's; vs sdpa "
        "attention: the same variant with transformers' sdpa attention over this row's.",
        "- attention: transformers' sdpa, or cute_gemm (cute_gemm.attention.use_decode_attention: "
        "decode steps on cute_gemm.decode_attention, the prefill on sdpa).",
        "- agree: generated tokens equal to a cache-free forward's argmax (random weights: "
        "near-ties may flip a few).",
    ]
    title = f"Model decode, Llama-3-8B shapes x {args.layers} layers ({meta['gpu_name']})"
    json_path, md_path = common.write_results(out_dir, stem, meta, columns, rows, title, notes)
    print(f"\nwrote {json_path}\nwrote {md_path}")
    write_profiles(out_dir, stem, meta, args, profiled)
    if not args.no_plot and any(r.get("speedup") for r in rows):
        png = plot(os.path.join(out_dir, stem + ".png"), [r for r in rows
                                                          if r.get("status") == "ok"], title)
        if png:
            print(f"wrote {png}")
    print(f"\n{'weights':<18}{'mode':<15}{'attention':<10}{'batch':>6}{'ms/step':>10}"
          f"{'tokens/s':>11}{'vs 16-bit':>11}{'vs unfused':>12}{'vs sdpa':>9}")
    for r in rows:
        if r.get("status") != "ok":
            print(f"{r['variant']:<18}{r.get('mode', '-'):<15}{r.get('attention', '-'):<10}"
                  f"{r.get('batch', '-'):>6}  {r['status']}")
            continue
        sp, vu, va = ("-" if r[key] is None else f"{r[key]:.2f}x"
                      for key in ("speedup", "vs_unfused", "vs_sdpa"))
        print(f"{r['variant']:<18}{r['mode']:<15}{r['attention']:<10}{r['batch']:>6}"
              f"{r['ms_per_step']:>10.3f}{r['tokens_per_s']:>11.1f}{sp:>11}{vu:>12}{va:>9}")
    return 0 if all(r.get("status") == "ok" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
