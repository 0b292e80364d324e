"""Diagnostic: how much of a compiled decode step the decoder layer's glue costs (the RMSNorms
and the residual adds that inductor fuses into one single-CTA kernel before each of q/k/v and
gate/up), and the attention between q/k/v and o (rotary embedding, KV-cache update, SDPA). Not a
benchmark of a feature: the ablated models compute garbage, their time is the upper bound of what
fusing that work into the GEMMs (or removing it) could save.

    python benchmarks/probe_layer_glue.py [--variants bf16,int4-fused-head8] [--batch 1]

For each variant (bench_model.VARIANTS) and ablation, compile + CUDA graph (bench_model's
timing, --inductor-pdl on by default), ms per step:
  full          the model as bench_model runs it
  no-norms      both RMSNorms of every decoder layer replaced by nn.Identity
  no-glue       no norms and no residual adds (the layer is attention then MLP)
  no-attention  the attention's core skipped: o_proj(q_proj(x)) (the fused q/k/v GEMM still
                runs whole; for unfused 16-bit weights the k and v GEMMs do not)
  gemms-only    no-glue and no-attention: the layer's GEMMs back to back, as the model runs them
Prints a table and writes probe_layer_glue_<gpu>[_tag].json / .md under --out.
"""

import argparse
import copy
import inspect
import os
import sys
import textwrap
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

import bench_decode  # noqa: E402
import bench_model  # noqa: E402
import common  # noqa: E402
from cute_gemm.demo import int_list  # noqa: E402

ABLATIONS = ("full", "no-norms", "no-glue", "no-attention", "gemms-only")


def strip_residual_adds(layer):
    """Give ``layer`` (one decoder layer instance) a forward without its residual adds: the
    class forward's source with ``hidden_states = residual + hidden_states`` made a plain
    ``hidden_states = hidden_states``. Raises when the source has no such line."""
    cls = type(layer)
    src = textwrap.dedent(inspect.getsource(cls.forward))
    add = "hidden_states = residual + hidden_states"
    if src.count(add) != 2:
        raise RuntimeError(f"{cls.__name__}.forward: expected two residual adds, found "
                           f"{src.count(add)}")
    src = src.replace(add, "hidden_states = hidden_states")
    scope = dict(vars(sys.modules[cls.__module__]))
    exec(compile(src, f"<{cls.__name__}.forward without residual adds>", "exec"), scope)
    layer.forward = scope["forward"].__get__(layer, cls)


def strip_attention(layer):
    """Give ``layer.self_attn`` a forward that is its two projections only:
    ``o_proj(q_proj(hidden_states))`` (no rotary embedding, cache or SDPA)."""
    attn = layer.self_attn

    def forward(hidden_states, *args, **kwargs):
        return attn.o_proj(attn.q_proj(hidden_states)), None

    attn.forward = forward


def ablate(model, ablation):
    layers = model.model.layers
    if ablation not in ABLATIONS:
        raise ValueError(f"ablation: expected one of {ABLATIONS}, got {ablation!r}")
    for layer in layers:
        if ablation in ("no-norms", "no-glue", "gemms-only"):
            layer.input_layernorm = torch.nn.Identity()
            layer.post_attention_layernorm = torch.nn.Identity()
        if ablation in ("no-glue", "gemms-only"):
            strip_residual_adds(layer)
        if ablation in ("no-attention", "gemms-only"):
            strip_attention(layer)
    return model


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--variants", default="bf16,int4-fused-head8")
    p.add_argument("--ablations", default=",".join(ABLATIONS))
    p.add_argument("--batch", type=int_list, default=[1])
    p.add_argument("--layers", type=int, default=32)
    p.add_argument("--steps", type=int, default=32)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--no-inductor-pdl", action="store_true")
    p.add_argument("--tag", default="")
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    common.require_cuda("probe_layer_glue.py")
    import transformers

    import cute_gemm

    bench_model.set_inductor_pdl(not args.no_inductor_pdl)
    device, dims = torch.device("cuda"), dict(bench_model.LLAMA3_8B)
    base = bench_decode.build_model(transformers, dims, args.layers, device, torch.bfloat16)
    step_args = argparse.Namespace(prompt=32, steps=args.steps, repeats=args.repeats,
                                   mode="graph")
    rows = []
    for name in args.variants.split(","):
        kind, settings = bench_model.VARIANTS[name]
        model, note = bench_model.make_variant(cute_gemm, base, kind, settings, copy.deepcopy)
        for ablation in args.ablations.split(","):
            ablated = ablate(copy.deepcopy(model), ablation)
            next_token = bench_model.compiled_next_token(ablated)
            for batch in args.batch:
                t0 = time.perf_counter()
                row = bench_decode.bench_variant(transformers, ablated, batch, step_args,
                                                 device, next_token=next_token)
                row.update(variant=name, ablation=ablation, note=note,
                           wall_s=round(time.perf_counter() - t0, 1))
                rows.append(row)
                print(f"{name:<18} {ablation:<9} B={batch:<3} {row['ms_per_step']:8.3f} ms/step",
                      flush=True)
            del next_token, ablated
            torch._dynamo.reset()
            torch.cuda.empty_cache()
        if model is not base:
            del model
    full = {(r["variant"], r["batch"]): r["ms_per_step"] for r in rows if r["ablation"] == "full"}
    for r in rows:
        ref = full.get((r["variant"], r["batch"]))
        r["saved_ms"] = ref - r["ms_per_step"] if ref else None
    meta = bench_decode.model_meta(transformers, device, args.layers, dims, "bfloat16")
    meta["inductor_pdl"] = not args.no_inductor_pdl
    stem = "probe_layer_glue_" + common.slug(meta["gpu_name"]) + (f"_{args.tag}" if args.tag
                                                                    else "")
    columns = [("variant", "weights"), ("ablation", "ablation"), ("batch", "batch"),
               ("ms_per_step", "ms/step"), ("saved_ms", "saved vs full (ms)"), ("mode", "step")]
    notes = ["- compile (fullgraph) + CUDA graph; ablated models compute garbage: their time is "
             "an upper bound of what fusing the glue could save.",
             "- no-norms: both RMSNorms of each decoder layer are nn.Identity; no-glue: also no "
             "residual adds; no-attention: the attention is o_proj(q_proj(x)); gemms-only: "
             "no-glue and no-attention."]
    out = args.out or common.DEFAULT_OUT_DIR
    paths = common.write_results(out, stem, meta, columns, rows,
                                 f"Decoder-layer glue, ablated ({meta['gpu_name']})", notes)
    print("wrote " + " ".join(paths))


if __name__ == "__main__":
    main()
