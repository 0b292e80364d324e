"""Peak memory and round trip of `from_pretrained(..., quantization_config=CuteGemmConfig(...))`.

    python3 scripts/hf_load_probe.py [--layers 32] [--bits 4] [--group-size 128] [--out DIR]
    python3 scripts/hf_load_probe.py --cpu-smoke      # a tiny model on the CPU: the code path only

Saves a Llama-3-8B-shaped LlamaForCausalLM (random weights, bf16; ``--layers`` decoder layers) with
``save_pretrained`` to a temporary directory, frees it, then loads it with
``AutoModelForCausalLM.from_pretrained(dir, quantization_config=cute_gemm.CuteGemmConfig(...),
dtype=torch.bfloat16, device_map="cuda")`` and reports the GPU's peak allocated memory during the
load against the quantized model's own bytes and the 16-bit model's (quantizing while loading must
stay near the first, never the second). Then ``save_pretrained`` of the quantized model and a
reload must give identical logits. Writes hf_load_<gpu>.json / .md under --out (default
benchmarks/results/) and exits 1 if the round trip differs.
"""

import argparse
import os
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

import torch  # noqa: E402

import common  # noqa: E402

LLAMA3_8B = dict(hidden_size=4096, intermediate_size=14336, num_attention_heads=32,
                 num_key_value_heads=8, vocab_size=128256)
SMOKE = dict(hidden_size=256, intermediate_size=512, num_attention_heads=4,
             num_key_value_heads=2, vocab_size=512)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--layers", type=int, default=32)
    p.add_argument("--bits", type=int, default=4)
    p.add_argument("--group-size", type=int, default=128)
    p.add_argument("--out", default=None)
    p.add_argument("--cpu-smoke", action="store_true")
    return p.parse_args(argv)


def module_bytes(model):
    return sum(t.numel() * t.element_size()
               for t in list(model.parameters()) + list(model.buffers()))


def main(argv=None):
    args = parse_args(argv)
    import transformers

    import cute_gemm

    smoke = args.cpu_smoke
    if not smoke:
        common.require_cuda("hf_load_probe.py")
    device = "cpu" if smoke else "cuda"
    dims = SMOKE if smoke else LLAMA3_8B
    layers = min(args.layers, 2) if smoke else args.layers
    config = transformers.LlamaConfig(num_hidden_layers=layers, tie_word_embeddings=False,
                                      max_position_embeddings=4096, **dims)
    qconfig = cute_gemm.CuteGemmConfig(bits=args.bits, group_size=args.group_size)
    row = {"layers": layers, "bits": args.bits, "group_size": args.group_size}
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = os.path.join(tmp, "bf16"), os.path.join(tmp, "quantized")
        torch.manual_seed(0)
        with torch.device(device):
            model = transformers.LlamaForCausalLM(config).to(torch.bfloat16)
        row["bf16_model_gb"] = module_bytes(model) / 1e9
        t0 = time.perf_counter()
        model.save_pretrained(src)
        row["save_s"] = time.perf_counter() - t0
        del model
        load = dict(dtype=torch.bfloat16, quantization_config=qconfig)
        if not smoke:
            load["device_map"] = "cuda"
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
            base = torch.cuda.memory_allocated()
        t0 = time.perf_counter()
        qmodel = transformers.AutoModelForCausalLM.from_pretrained(src, **load)
        row["load_s"] = time.perf_counter() - t0
        row["quantized_model_gb"] = module_bytes(qmodel) / 1e9
        if not smoke:
            row["peak_gpu_gb"] = (torch.cuda.max_memory_allocated() - base) / 1e9
            row["peak_over_quantized"] = row["peak_gpu_gb"] / row["quantized_model_gb"]
        row["quant_linears"] = sum(isinstance(m, cute_gemm.QuantLinear)
                                   for m in qmodel.modules())
        ids = torch.randint(0, dims["vocab_size"], (1, 16), generator=torch.Generator()
                            .manual_seed(1)).to(device)
        with torch.no_grad():
            logits = qmodel(ids).logits
        qmodel.save_pretrained(dst)
        del qmodel
        reload = dict(dtype=torch.bfloat16)
        if not smoke:
            reload["device_map"] = "cuda"
        again = transformers.AutoModelForCausalLM.from_pretrained(dst, **reload)
        with torch.no_grad():
            row["round_trip_identical"] = bool(torch.equal(again(ids).logits, logits))
    meta = (common.env_info() if not smoke else
            {"gpu_name": "cpu (smoke test: not a GPU measurement)",
             "torch_version": torch.__version__})
    meta["transformers_version"] = transformers.__version__
    stem = "hf_load_cpu-smoke" if smoke else "hf_load_" + common.slug(meta["gpu_name"])
    out = args.out or (os.path.join(common.DEFAULT_OUT_DIR, "tmp") if smoke
                       else common.DEFAULT_OUT_DIR)
    columns = [(k, k) for k in row]
    notes = ["- peak_gpu_gb: torch.cuda.max_memory_allocated() during from_pretrained, above what "
             "was allocated before; the 16-bit model alone would be bf16_model_gb."]
    json_path, md_path = common.write_results(out, stem, meta, columns, [row],
                                              "from_pretrained with CuteGemmConfig", notes)
    for k, v in row.items():
        print(f"{k:>22}: {v:.3f}" if isinstance(v, float) else f"{k:>22}: {v}")
    print(f"wrote {json_path}\nwrote {md_path}")
    return 0 if row["round_trip_identical"] else 1


if __name__ == "__main__":
    sys.exit(main())
