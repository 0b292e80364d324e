"""Decode attention: cute_gemm.decode_attention against what a transformers model runs today and
against torch's best grouped-query kernel, Llama-3-8B heads (32 query, 8 key/value, D = 128).

    python benchmarks/bench_attention.py [--batch 1,16,64] [--dtype bfloat16]

Per case (batch B, a static cache of L_cache positions of which the first L_valid take part, one
query position):

* ``transformers sdpa``: transformers' ``sdpa_attention_forward`` as a Llama layer calls it with a
  static cache: ``repeat_kv`` copies the whole cache to the 32 query heads, then
  ``scaled_dot_product_attention`` with the boolean mask, then the output transposed.
* ``torch gqa (valid)``: ``scaled_dot_product_attention(enable_gqa=True)`` without a mask over the
  first L_valid positions only (a slice the host must know: not what a static cache under a CUDA
  graph can do; the lower bound of torch's kernels).
* ``cute_gemm``: ``cute_gemm.decode_attention`` with the mask, reading the cache in place.

Timing: CUDA-graph replays (common.time_graph), median; the caches rotate through copies past
twice the L2 size. GB/s counts the key and value bytes of the L_valid positions. Writes
attention_<gpu>.json / .md / .png under --out (default benchmarks/results/).
"""

import argparse
import math
import os
import sys
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import common  # noqa: E402
from cute_gemm.demo import int_list  # noqa: E402

HEADS, KV_HEADS, DIM = 32, 8, 128
# (L_cache, L_valid): bench_model's static cache; long caches, full and mostly empty.
CACHES = [(256, 229), (1024, 1024), (4096, 512), (4096, 4096), (16384, 16384)]
CANDIDATES = ("transformers sdpa", "torch gqa (valid)", "cute_gemm")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description="Decode attention: cute_gemm.decode_attention vs "
                                            "transformers' sdpa path and torch's GQA kernel.")
    p.add_argument("--batch", type=int_list, default=[1, 16, 64])
    p.add_argument("--dtype", choices=("bfloat16", "float16"), default="bfloat16")
    p.add_argument("--max-cache-bytes", type=float, default=8e9,
                   help="skip cases whose key/value cache exceeds this (default 8e9)")
    p.add_argument("--out", default=None)
    p.add_argument("--no-plot", action="store_true")
    args = p.parse_args(argv)
    args.dtype = getattr(torch, args.dtype)
    return args


def candidates(batch, l_cache, l_valid, dtype):
    """{name: fn(i)} over rotated operand sets, and the key/value bytes of the valid positions."""
    import cute_gemm
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    cache_bytes = 2 * batch * KV_HEADS * l_cache * DIM * 2

    def make(i):
        q = torch.randn(batch, 1, HEADS, DIM, dtype=dtype, device="cuda").transpose(1, 2)
        k = torch.randn(batch, KV_HEADS, l_cache, DIM, dtype=dtype, device="cuda")
        v = torch.randn_like(k)
        return q, k, v
    sets = common.make_rotation(make, cache_bytes)
    mask = (torch.arange(l_cache, device="cuda") < l_valid).view(1, 1, 1, l_cache) \
        .expand(batch, 1, 1, l_cache)
    module = types.SimpleNamespace(num_key_value_groups=HEADS // KV_HEADS, is_causal=True,
                                   training=False)
    scale = 1.0 / math.sqrt(DIM)

    def transformers_sdpa(i):
        q, k, v = sets[i % len(sets)]
        return sdpa_attention_forward(module, q, k, v, mask, scaling=scale)[0]

    def torch_gqa(i):
        q, k, v = sets[i % len(sets)]
        out = F.scaled_dot_product_attention(q, k[:, :, :l_valid], v[:, :, :l_valid], scale=scale,
                                             enable_gqa=True)
        return out.transpose(1, 2).contiguous()

    def cute(i):
        q, k, v = sets[i % len(sets)]
        return cute_gemm.decode_attention(q, k, v, mask, scale=scale)

    # The three agree before anything is timed.
    ref = transformers_sdpa(0).float()
    for fn in (torch_gqa, cute):
        err = (fn(0).float() - ref).abs().max().item()
        if not err <= 2e-2:
            raise RuntimeError(f"{fn.__name__} differs from transformers' sdpa by {err}")
    fns = dict(zip(CANDIDATES, (transformers_sdpa, torch_gqa, cute)))
    return fns, 2 * batch * KV_HEADS * l_valid * DIM * 2


def main(argv=None):
    args = parse_args(argv)
    common.require_cuda("bench_attention.py")
    import transformers

    meta = common.env_info()
    meta["transformers_version"] = transformers.__version__
    meta["heads"] = f"{HEADS} query / {KV_HEADS} key-value, D = {DIM}, {args.dtype}"
    rows = []
    for batch in args.batch:
        for l_cache, l_valid in CACHES:
            if 2 * batch * KV_HEADS * l_cache * DIM * 2 > args.max_cache_bytes:
                continue
            fns, valid_bytes = candidates(batch, l_cache, l_valid, args.dtype)
            timed = common.time_interleaved(list(fns.values()), rounds=2)
            base = timed[0]["us"]
            for name, res in zip(fns, timed):
                us = res["us"]
                row = {"batch": batch, "l_cache": l_cache, "l_valid": l_valid, "candidate": name,
                       "us": us, "gbs": valid_bytes / (us * 1e-6) / 1e9 if us else None,
                       "vs_transformers": base / us if us and base else None,
                       "status": "ok" if us else f"ERROR {res['error']}"[:160]}
                rows.append(row)
                print(f"B={batch:<3} L={l_valid}/{l_cache:<6} {name:<18} "
                      + (f"{us:9.2f} us {row['gbs']:8.1f} GB/s {row['vs_transformers']:6.2f}x"
                         if us else row["status"]), flush=True)
            torch.cuda.empty_cache()
    out_dir = args.out or common.DEFAULT_OUT_DIR
    stem = "attention_" + common.slug(meta["gpu_name"])
    columns = [("batch", "B"), ("l_cache", "L cache"), ("l_valid", "L valid"),
               ("candidate", "kernel"), ("us", "us"), ("gbs", "GB/s (valid K/V)"),
               ("vs_transformers", "vs transformers sdpa"), ("status", "status")]
    notes = ["- One query position per sequence (a decode step); the mask lets the first L valid "
             "of the static cache's L cache positions take part.",
             "- transformers sdpa: repeat_kv of the whole cache + SDPA with the mask + transpose "
             "(what a Llama layer runs); torch gqa (valid): SDPA enable_gqa=True over the valid "
             "slice, no mask (needs the length on the host); cute_gemm: decode_attention with "
             "the mask.",
             "- CUDA-graph replays, median of 2 interleaved rounds; caches rotated past 2x L2."]
    title = f"Decode attention, Llama-3-8B heads ({meta['gpu_name']})"
    json_path, md_path = common.write_results(out_dir, stem, meta, columns, rows, title, notes)
    print(f"wrote {json_path}\nwrote {md_path}")
    if not args.no_plot:
        labels = sorted({(r["batch"], r["l_cache"], r["l_valid"]) for r in rows})
        series = {}
        for name in CANDIDATES:
            by = {(r["batch"], r["l_cache"], r["l_valid"]): r["vs_transformers"] for r in rows
                  if r["candidate"] == name}
            series[name] = [by.get(k) or float("nan") for k in labels]
        png = common.plot_series(os.path.join(out_dir, stem + ".png"),
                                 [f"B={b} {v}/{c}" for b, c, v in labels], series, title,
                                 ylabel="speed vs transformers sdpa (same run)")
        if png:
            print(f"wrote {png}")
    return 0 if all(r["status"] == "ok" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
