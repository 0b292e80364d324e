"""Decode throughput of a transformers Llama model with Llama-3-8B layers: fp16 vs cute_gemm INT4
g128 vs INT8 per-channel weights.

    python benchmarks/bench_decode.py [--layers 4] [--batch 1,16] [--prompt 32] [--steps 64]
                                      [--mode graph|eager] [--vocab 128256] [--out DIR]
    python benchmarks/bench_decode.py --cpu-smoke     # tiny model on the CPU: checks the code path

The model is transformers' LlamaForCausalLM built from a LlamaConfig with Llama-3-8B's layer
shapes (hidden 4096, intermediate 14336, 32 heads, 8 KV heads, vocabulary 128256), only
``--layers`` decoder layers, random weights (the config's initializer), fp16. The quantized
variants are copies converted with ``cute_gemm.quantize_model`` (``skip=("lm_head",)``: the
output head stays fp16 in all three, as is usual).

For each variant and batch size B: a random prompt of ``--prompt`` tokens is prefilled into a
static KV cache (transformers' StaticCache, sized for the whole run), then greedy decode steps of
one token per sequence are timed with CUDA events: ``--repeats`` runs of ``--steps`` steps, the
median run reported as ms per step and tokens/s (B tokens per step).

Modes (the output says which one ran):

* ``graph`` (default): one decode step (forward with the static cache, argmax, and the update
  of the next step's token and positions, all on the GPU) is captured in a CUDA graph after two
  eager warm-up steps, and each step is a graph replay: no Python or launch overhead, which
  would otherwise dominate a 4-layer model at batch 1. If the capture fails (a transformers
  version whose forward synchronizes the host), the run falls back to ``eager`` and records why.
* ``eager``: every step calls the model from Python (Python and launch overhead included).

Correctness check, per run: the prompt and all generated tokens are fed through the model once
more in a single forward pass without a cache, and the argmax at each generated position is
compared with the token the decode loop produced ("agree": the fraction that match). It checks
the cached, graph-replayed decode path end to end; random weights give nearly flat logits, so a
few near-ties may flip (agree below 0.9 is flagged "suspect").

Writes decode_<gpu>.json and .md under --out (default benchmarks/results/; with --cpu-smoke,
benchmarks/results/tmp/ and the stem decode_cpu-smoke), with the GPU name and the torch, CUDA
and transformers versions, and prints the table.
"""

import argparse
import copy
import functools
import inspect
import os
import platform
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

import common  # noqa: E402
from cute_gemm.demo import int_list  # noqa: E402

LLAMA3_8B = dict(hidden_size=4096, intermediate_size=14336, num_attention_heads=32,
                 num_key_value_heads=8, vocab_size=128256)
SMOKE = dict(hidden_size=256, intermediate_size=512, num_attention_heads=4,
             num_key_value_heads=2, vocab_size=1024)
VARIANTS = [  # (name, quantize_model settings or None for the fp16 baseline)
    ("fp16", None),
    ("int4-g128", dict(bits=4, group_size=128, symmetric=True)),
    ("int8-pc", dict(bits=8, group_size=-1, symmetric=True)),
]
AGREE_SUSPECT = 0.9


def parse_args(argv=None):
    p = argparse.ArgumentParser(
        description="Decode tokens/s of a Llama-3-8B-shaped transformers model (a few layers, "
                    "random weights): fp16 vs cute_gemm INT4 g128 vs INT8 per-channel.")
    p.add_argument("--layers", type=int, default=4, help="decoder layers (default 4)")
    p.add_argument("--batch", type=int_list, default=[1, 16], help="batch sizes (default 1,16)")
    p.add_argument("--prompt", type=int, default=32, help="prompt tokens (default 32)")
    p.add_argument("--steps", type=int, default=64, help="decode steps per timed run (64)")
    p.add_argument("--repeats", type=int, default=5, help="timed runs; the median is reported")
    p.add_argument("--vocab", type=int, default=None,
                   help="vocabulary size (default 128256, Llama 3's)")
    p.add_argument("--mode", choices=("graph", "eager"), default="graph",
                   help="graph: CUDA-graph replay of each decode step (default); eager: Python "
                        "calls")
    p.add_argument("--variants", default=",".join(v for v, _ in VARIANTS),
                   help="comma-separated subset of " + ", ".join(v for v, _ in VARIANTS))
    p.add_argument("--out", default=None, help="output directory (default benchmarks/results/)")
    p.add_argument("--cpu-smoke", action="store_true",
                   help="a tiny model on the CPU, eager mode, few steps: checks the code path "
                        "only (results go to benchmarks/results/tmp/)")
    args = p.parse_args(argv)
    args.variants = common.choice_list(p, args.variants, "--variants", [v for v, _ in VARIANTS])
    for name in ("layers", "prompt", "steps", "repeats"):
        if getattr(args, name) < 1:
            p.error(f"--{name} must be >= 1; got {getattr(args, name)}")
    if args.cpu_smoke:
        args.mode = "eager"
    return args


# ------------------------------------------------------------------------------------ model


def build_model(transformers, dims, layers, device, dtype, seed=0):
    config = transformers.LlamaConfig(
        num_hidden_layers=layers, max_position_embeddings=8192, rope_theta=500000.0,
        tie_word_embeddings=False, **dims)
    torch.manual_seed(seed)
    with torch.device(device):  # initialize where it runs: fast on the GPU
        model = transformers.LlamaForCausalLM(config)
    return model.to(dtype).eval()


def make_static_cache(transformers, model, batch, max_len, device, dtype):
    """A StaticCache for ``batch`` sequences of up to ``max_len`` tokens, through whichever
    constructor arguments the installed transformers takes (5.x sizes its tensors at the first
    update; 4.x wants the batch size, device and dtype up front)."""
    cls = transformers.StaticCache
    params = inspect.signature(cls.__init__).parameters
    wanted = {"config": model.config, "max_cache_len": max_len, "max_batch_size": batch,
              "batch_size": batch, "device": device, "dtype": dtype}
    return cls(**{k: v for k, v in wanted.items() if k in params})


def linear_weight_bytes(model):
    """Bytes of the decoder layers' linear weights as stored (the head and embeddings left
    out: they are the same in every variant)."""
    total = 0
    for name, module in model.named_modules():
        if ".layers." not in f".{name}":
            continue
        if isinstance(module, torch.nn.Linear):
            total += module.weight.numel() * module.weight.element_size()
        elif type(module).__name__ == "QuantLinear":
            total += sum(b.numel() * b.element_size() for b in module.buffers(recurse=False))
    return total


# ------------------------------------------------------------------------------------ decode


def greedy_next_token(model, **inputs):
    """A decode step's forward and greedy pick: the argmax of the last position's logits,
    [batch, 1]."""
    return model(**inputs, use_cache=True).logits[:, -1].argmax(-1, keepdim=True)


class Decoder:
    """Greedy decoding of ``batch`` sequences with a static cache; the state (next token,
    positions, generated tokens) lives in device tensors so that one step can be captured in a
    CUDA graph and replayed."""

    def __init__(self, transformers, model, batch, prompt_len, total_steps, device, seed=1,
                 next_token=None):
        self.model = model
        # What step() calls for the next tokens: greedy_next_token on the model, or a compiled
        # version of it (bench_model.py's compile modes; prefill and the agreement check stay
        # eager, so only one shape is compiled).
        self.next_token = (functools.partial(greedy_next_token, model) if next_token is None
                           else next_token)
        self.device = device
        self.prompt_len = prompt_len
        self.max_len = prompt_len + total_steps + 2
        dtype = next(model.parameters()).dtype
        self.cache = make_static_cache(transformers, model, batch, self.max_len, device, dtype)
        gen = torch.Generator().manual_seed(seed)
        vocab = model.config.vocab_size
        self.prompt = torch.randint(0, vocab, (batch, prompt_len), generator=gen).to(device)
        self.tokens = torch.zeros(batch, self.max_len, dtype=torch.long, device=device)
        self.tok = torch.zeros(batch, 1, dtype=torch.long, device=device)
        self.pos = torch.zeros(batch, 1, dtype=torch.long, device=device)
        self.cpos = torch.zeros(1, dtype=torch.long, device=device)
        self.graph = None

    def prefill(self):
        """Prompt into the (reset) cache; leaves the first generated token in ``tok``."""
        batch, n = self.prompt.shape
        self.cache.reset()
        cpos = torch.arange(n, device=self.device)
        logits = self.model(input_ids=self.prompt, position_ids=cpos.expand(batch, n),
                            cache_position=cpos, past_key_values=self.cache,
                            use_cache=True).logits
        nxt = logits[:, -1].argmax(-1, keepdim=True)
        self.tokens.zero_()
        self.tokens[:, :n] = self.prompt
        self.tokens[:, n:n + 1] = nxt
        self.tok.copy_(nxt)
        self.pos.fill_(n)
        self.cpos.fill_(n)

    def step(self):
        """One decode step: token ``tok`` at position ``pos`` in, next token out."""
        nxt = self.next_token(input_ids=self.tok, position_ids=self.pos,
                              cache_position=self.cpos, past_key_values=self.cache)
        self.tokens.scatter_(1, self.pos + 1, nxt)
        self.tok.copy_(nxt)
        self.pos.add_(1)
        self.cpos.add_(1)

    def capture(self):
        """Two eager warm-up steps on a side stream, then one step captured in a CUDA graph."""
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(2):
                self.step()
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            self.step()
        self.graph = graph

    def run(self, steps):
        for _ in range(steps):
            if self.graph is not None:
                self.graph.replay()
            else:
                self.step()

    def generated_length(self):
        return int(self.pos[0].item()) + 1

    def agreement(self):
        """Fraction of generated tokens equal to the argmax of a cache-free forward pass over
        the whole sequence (see the module docstring)."""
        end = self.generated_length()
        seq = self.tokens[:, :end]
        logits = self.model(input_ids=seq, use_cache=False).logits
        pred = logits[:, self.prompt_len - 1:end - 1].argmax(-1)
        return (pred == seq[:, self.prompt_len:end]).float().mean().item()


def _timer(device):
    if device.type == "cuda":
        def measure(fn):
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            return start.elapsed_time(end)
    else:
        def measure(fn):
            t0 = time.perf_counter()
            fn()
            return (time.perf_counter() - t0) * 1e3
    return measure


def head_ms(model, batch, device, calls=20):
    """Milliseconds of the output head alone (final norm + lm_head on [batch, 1, hidden]), the
    part of every decode step that is the same fp16 work in all variants. CUDA: one graph of
    ``calls`` calls, the median of 5 replays."""
    hidden = model.config.hidden_size
    dtype = model.lm_head.weight.dtype
    x = torch.randn(batch, 1, hidden, device=device, dtype=dtype)

    def head():
        return model.lm_head(model.model.norm(x))

    with torch.no_grad():
        if device.type != "cuda":
            head()
            measure = _timer(device)
            return statistics.median(measure(head) for _ in range(3))
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            head()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(calls):
                head()
        graph.replay()
        measure = _timer(device)
        ms = statistics.median(measure(graph.replay) / calls for _ in range(5))
        del graph
        return ms


def timed_steps(steps, repeats):
    """Decode steps past the prompt that bench_variant's cache holds and its timing takes: two
    warm-up steps, a step of capture slack, the warm run and ``repeats`` timed runs of ``steps``."""
    return 2 + 1 + steps * (repeats + 1)


def profile_position(steps, repeats, profiled):
    """Steps to run after the capture's two warm-up steps so that ``profiled`` steps then sit in
    the middle of bench_variant's timed runs (the same cache positions, hence the same attention
    lengths); and the cache's steps past the prompt (the timed run's, or more if the profiled
    steps need them)."""
    warm = max(0, steps + (steps * repeats - profiled) // 2)
    return warm, max(timed_steps(steps, repeats), 2 + warm + profiled + 1)


def bench_variant(transformers, model, batch, args, device, next_token=None):
    """Returns a result row (without the speedup) for one model and batch size; ``next_token``
    (default: greedy_next_token on ``model``) runs the decode steps."""
    measure = _timer(device)
    total = timed_steps(args.steps, args.repeats)
    dec = Decoder(transformers, model, batch, args.prompt, total, device, next_token=next_token)
    with torch.no_grad():
        dec.prefill()  # warm-up: lazy cache allocation, kernels' first calls
        prefill_ms = statistics.median(measure(dec.prefill) for _ in range(3))
        mode = args.mode
        if mode == "graph":
            try:
                dec.capture()
            except Exception as e:  # noqa: BLE001 - any capture failure: measure eagerly
                msg = str(e).strip().splitlines()[0][:160] if str(e).strip() else ""
                mode = f"eager (graph capture failed: {type(e).__name__}: {msg})"
                torch.cuda.synchronize()
                dec = Decoder(transformers, model, batch, args.prompt, total, device,
                              next_token=next_token)
                dec.prefill()
        if mode == "eager" or mode.startswith("eager ("):
            dec.run(2)
        dec.run(args.steps)  # warm run
        timed_run = functools.partial(dec.run, args.steps)
        runs = [measure(timed_run) / args.steps for _ in range(args.repeats)]
        agree = dec.agreement()
    ms = statistics.median(runs)
    del dec, timed_run
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return {"batch": batch, "mode": mode, "ms_per_step": ms, "tokens_per_s": batch * 1e3 / ms,
            "prefill_ms": prefill_ms, "agree": agree,
            "check": "ok" if agree >= AGREE_SUSPECT else "suspect"}


# ------------------------------------------------------------------------------------ main


def model_meta(transformers, device, layers, dims, dtype_name):
    """The results' metadata shared by the model benchmarks: GPU and versions, the model."""
    if device.type == "cuda":
        meta = common.env_info()
    else:
        meta = {"gpu_name": "cpu (smoke test: not a GPU measurement)",
                "torch_version": torch.__version__, "cuda_version": torch.version.cuda,
                "python_version": platform.python_version()}
    meta.update({
        "transformers_version": transformers.__version__,
        "model": (f"LlamaForCausalLM, {layers} layers, hidden {dims['hidden_size']}, "
                  f"intermediate {dims['intermediate_size']}, heads {dims['num_attention_heads']}"
                  f" (kv {dims['num_key_value_heads']}), vocab {dims['vocab_size']}, "
                  f"{dtype_name}, random weights"),
    })
    return meta


def _meta(args, transformers, device, dims, base):
    meta = model_meta(transformers, device, args.layers, dims, "fp16")
    meta.update({
        "attention": getattr(base.config, "_attn_implementation", "n/a"),
        "prompt_tokens": args.prompt, "decode_steps": args.steps, "repeats": args.repeats,
        "requested_mode": args.mode,
        "quantized": "cute_gemm.quantize_model, lm_head kept fp16",
    })
    return meta


def main(argv=None):
    args = parse_args(argv)
    if not args.cpu_smoke:
        common.require_cuda("bench_decode.py")  # before the imports: --help needs neither
    import transformers

    import cute_gemm

    if args.cpu_smoke:
        device, dims = torch.device("cpu"), dict(SMOKE)
        args.layers = min(args.layers, 2)
        args.prompt, args.steps, args.repeats = min(args.prompt, 8), min(args.steps, 4), 2
        args.batch = [b for b in args.batch if b <= 2] or [1]
        out_dir = args.out or os.path.join(common.DEFAULT_OUT_DIR, "tmp")
    else:
        device, dims = torch.device("cuda"), dict(LLAMA3_8B)
        out_dir = args.out or common.DEFAULT_OUT_DIR
    if args.vocab:
        dims["vocab_size"] = args.vocab

    print(f"building LlamaForCausalLM ({args.layers} layers, {dims}) on {device} ...",
          flush=True)
    base = build_model(transformers, dims, args.layers, device, torch.float16)
    meta = _meta(args, transformers, device, dims, base)
    rows = []
    for name, settings in VARIANTS:
        if name not in args.variants:
            continue
        if settings is None:
            model = base
        else:
            model = copy.deepcopy(base)
            cute_gemm.quantize_model(model, skip=("lm_head",), progress=False, **settings)
        wbytes = linear_weight_bytes(model)
        for batch in args.batch:
            row = bench_variant(transformers, model, batch, args, device)
            row.update(variant=name, weight_mb=wbytes / 1e6)
            rows.append(row)
            print(f"  {name:<10} B={batch:<3} {row['ms_per_step']:8.3f} ms/step "
                  f"{row['tokens_per_s']:10.1f} tok/s  prefill {row['prefill_ms']:.2f} ms  "
                  f"agree {row['agree']:.3f}  [{row['mode']}]", flush=True)
        if model is not base:
            del model
            if device.type == "cuda":
                torch.cuda.empty_cache()

    heads = {b: head_ms(base, b, device) for b in args.batch}
    base_ms = {r["batch"]: r["ms_per_step"] for r in rows if r["variant"] == "fp16"}
    for r in rows:
        b = r["batch"]
        r["head_ms"] = heads[b]
        r["ms_without_head"] = r["ms_per_step"] - heads[b]
        r["speedup"] = base_ms[b] / r["ms_per_step"] if b in base_ms else None
        r["speedup_without_head"] = ((base_ms[b] - heads[b]) / r["ms_without_head"]
                                     if b in base_ms and r["ms_without_head"] > 0 else None)

    stem = "decode_cpu-smoke" if args.cpu_smoke else "decode_" + common.slug(meta["gpu_name"])
    columns = [("variant", "weights"), ("batch", "batch"), ("ms_per_step", "ms/step"),
               ("tokens_per_s", "tokens/s"), ("speedup", "speedup vs fp16"),
               ("ms_without_head", "ms/step w/o head"),
               ("speedup_without_head", "speedup w/o head"),
               ("prefill_ms", f"prefill ms ({args.prompt} tok)"),
               ("weight_mb", "layer weights MB"), ("agree", "agree"), ("check", "check"),
               ("mode", "mode")]
    modes = sorted({r["mode"] for r in rows})
    notes = [
        f"- Decode: greedy, one token per sequence per step, static KV cache; ms/step is the "
        f"median of {args.repeats} runs of {args.steps} steps. Mode(s): {', '.join(modes)} "
        f"(graph = each step one CUDA-graph replay; eager = Python calls, launch overhead "
        f"included).",
        "- layer weights: the decoder layers' linear weights as stored (packed + scales for the "
        "quantized ones); embeddings and the fp16 lm_head come on top in every variant.",
        "- w/o head: ms/step minus the time of the output head alone (final norm + the "
        "fp16 lm_head, the same in every variant: "
        + ", ".join(f"{heads[b]:.3f} ms at batch {b}" for b in args.batch)
        + "), i.e. the decoder layers plus the embedding lookup; with only "
        f"{args.layers} layers the head is a large share of a step, which a 32-layer model "
        "would dilute.",
        "- prefill: median of 3 eager calls after a warm-up call.",
        "- agree: fraction of generated tokens equal to the argmax of a cache-free forward pass "
        "over the whole sequence (random weights: near-ties may flip a few).",
    ]
    title = f"Decode throughput, Llama-3-8B layers x {args.layers} ({meta['gpu_name']})"
    json_path, md_path = common.write_results(out_dir, stem, meta, columns, rows, title, notes)
    print(f"\nwrote {json_path}\nwrote {md_path}")
    print(f"\n{'weights':<10}{'batch':>6}{'ms/step':>10}{'tokens/s':>11}{'speedup':>9}"
          f"{'w/o head':>10}  mode")
    for r in rows:
        sp = "-" if r["speedup"] is None else f"{r['speedup']:.2f}x"
        sp2 = "-" if r["speedup_without_head"] is None else f"{r['speedup_without_head']:.2f}x"
        print(f"{r['variant']:<10}{r['batch']:>6}{r['ms_per_step']:>10.3f}"
              f"{r['tokens_per_s']:>11.1f}{sp:>9}{sp2:>10}  {r['mode']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
