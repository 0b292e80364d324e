"""Fused projections: ``cute_gemm.quantize_model(model, fuse=True)`` on transformers' Llama,
Mistral, Qwen2 and Qwen3 decoders (tiny random configs, CPU), ``cute_gemm.fuse``'s slices, and
the save/load round trip of fused models.

Exactness: the fused layer's columns are quantized exactly as the separate layers' (groups run
along K within one column), and the CPU reference of ``mixed_gemm`` computes every output as the
fp32 dot product of the same dequantized column with the same input row, rounded once. With
K = 128 (below any BLAS K-blocking) each of those dot products is the same sequential fp32 sum
whatever N is, so fused and unfused models give bit-identical logits, and the tests say so
(``rtol=0, atol=0``). On a GPU the kernel may tile (and split K) differently for the wider
fused N; that comparison lives in the GPU tests with a tolerance. torch.compile changes the
order of the *other* ops (inductor fuses the norms and rotary embeddings), so the compiled model
is compared with the compiled unfused one in fp32.
"""

import copy
import json
import pickle

import pytest
import torch
from torch import nn

import cute_gemm
from cute_gemm.fuse import ProjectionSlice
from cute_gemm.nn import QuantLinear

transformers = pytest.importorskip("transformers")

VOCAB = 256
FAMILIES = ("Llama", "Mistral", "Qwen2", "Qwen3")
EXACT = dict(rtol=0, atol=0)


def _config(family, **extra):
    kwargs = dict(hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, head_dim=32, vocab_size=VOCAB,
                  max_position_embeddings=64, tie_word_embeddings=False)
    if family == "Llama":
        kwargs.update(attention_bias=True, mlp_bias=True)  # biases through the fused layers
    kwargs.update(extra)
    return getattr(transformers, family + "Config")(**kwargs)


_MODELS = {}


def _model(family, dtype=torch.float32, **extra):
    """A fresh copy of the family's tiny random model (built once per configuration)."""
    key = (family, tuple(sorted(extra.items())))
    if key not in _MODELS:
        torch.manual_seed(0)
        _MODELS[key] = getattr(transformers, family + "ForCausalLM")(
            _config(family, **extra)).eval()
    return copy.deepcopy(_MODELS[key]).to(dtype)


def _ids(batch=2, seq=12, seed=1):
    return torch.randint(0, VOCAB, (batch, seq), generator=torch.Generator().manual_seed(seed))


def _logits(model, ids):
    with torch.no_grad():
        return model(ids).logits


def _quantized(model, **kwargs):
    kwargs.setdefault("group_size", 32)
    summary = cute_gemm.quantize_model(model, progress=False, **kwargs)
    return model, summary


def _structure(model):
    """Modules by name, and which of them have a forward of their own (a gated MLP)."""
    return [(name, type(m).__name__, id(m), "forward" in m.__dict__)
            for name, m in model.named_modules()]


def _ungate(model):
    """The fused model with its MLPs' own forwards again (the activation apart): its logits are
    then the unfused model's bit for bit."""
    for module in model.modules():
        cute_gemm.fuse.ungate_mlp(module)
    return model


def _assert_near(out, ref, tol):
    """Norm-wise relative difference below tol (the gated MLPs round once, not three times)."""
    rel = ((out.float() - ref.float()).norm() / ref.float().norm()).item()
    assert rel < tol, f"relative difference {rel:.2e} >= {tol:.0e}"


# Relative logit differences allowed between the gated and ungated models: a few roundings of
# the MLP's intermediate values, carried through two layers.
GATED_TOL = {torch.float16: 5e-3, torch.bfloat16: 3e-2, torch.float32: 3e-2}


@pytest.mark.parametrize("bits,group_size", [(4, 32), (8, -1)])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
@pytest.mark.parametrize("family", FAMILIES)
def test_fused_logits_equal_unfused(family, dtype, bits, group_size):
    base = _model(family, dtype)
    unfused, _ = _quantized(copy.deepcopy(base), bits=bits, group_size=group_size)
    fused, summary = _quantized(base, bits=bits, group_size=group_size, fuse=True)
    prefix = "model.layers.0."
    assert summary.fused[prefix + "self_attn.qkv_proj"] == [
        prefix + "self_attn." + p for p in ("q_proj", "k_proj", "v_proj")]
    assert summary.fused[prefix + "mlp.gate_up_proj"] == [prefix + "mlp.gate_proj",
                                                          prefix + "mlp.up_proj"]
    assert len(summary.fused) == 4 and summary.not_fused == {}
    assert "fused into one GEMM each (4 groups): 2 x (q_proj, k_proj, v_proj) -> qkv_proj, " \
           "2 x (gate_proj, up_proj) -> gate_up_proj" in str(summary)
    # Same layers converted, same bytes as the unfused conversion.
    assert len(summary.converted) == 14 and "lm_head" in summary.skipped
    attn, mlp = fused.model.layers[0].self_attn, fused.model.layers[0].mlp
    assert isinstance(attn.qkv_proj, QuantLinear) and attn.qkv_proj.out_features == 128 + 64 + 64
    assert isinstance(attn.k_proj, ProjectionSlice) and attn.k_proj.fused is attn.qkv_proj
    assert (attn.k_proj.start, attn.k_proj.stop, attn.k_proj.out_features) == (128, 192, 64)
    assert isinstance(mlp.up_proj, ProjectionSlice) and mlp.up_proj.fused is mlp.gate_up_proj
    assert type(mlp).__name__ == family + "MLP"  # the model's own modules and classes stay
    # The MLPs compute SiLU(gate) * up inside the gate/up GEMM (a forward of the instance).
    assert summary.gated == ["model.layers.0.mlp", "model.layers.1.mlp"]
    assert summary.not_gated == {} and "inside the fused GEMM: 2 MLPs" in str(summary)
    assert "forward" in mlp.__dict__ and "forward" not in attn.__dict__
    assert "forward" not in _model(family).model.layers[0].mlp.__dict__  # one instance only
    # The fused buffers are the separate ones, stacked along N (the same quantized numbers).
    ref = unfused.model.layers[0].self_attn
    assert torch.equal(attn.qkv_proj.quantized_weight.dequantize(), torch.cat(
        [getattr(ref, p).quantized_weight.dequantize() for p in ("q_proj", "k_proj", "v_proj")]))
    assert sorted(fused.state_dict()) != sorted(unfused.state_dict())  # keys: qkv_proj.*
    ids = _ids()
    ref = _logits(unfused, ids)
    out = _logits(fused, ids)
    assert out.dtype == dtype
    _assert_near(out, ref, GATED_TOL[dtype])
    # With the activation apart, the same numbers as the unfused model.
    torch.testing.assert_close(_logits(_ungate(fused), ids), ref, **EXACT)
    assert attn.q_proj._shared.entry is None  # nothing kept once every sibling took its part


@pytest.mark.parametrize("family", ["Llama", "Qwen3"])
def test_generate_greedy_same_tokens(family):
    base = _model(family, torch.float16)
    unfused, _ = _quantized(copy.deepcopy(base))
    fused, _ = _quantized(base, fuse=True)
    ids = _ids(batch=1, seq=6)
    kwargs = dict(max_new_tokens=8, do_sample=False, pad_token_id=0)
    with torch.no_grad():
        a = unfused.generate(ids, **kwargs)
        b = fused.generate(ids, **kwargs)
    assert a.shape == (1, 14)
    assert torch.equal(a, b)


def test_compile_fullgraph_no_graph_breaks():
    base = _model("Qwen2")  # fp32 model (bf16 compute in the quantized layers), q/k/v biases
    unfused, _ = _quantized(copy.deepcopy(base))
    fused, _ = _quantized(base, fuse=True)
    ids = _ids()
    explained = torch._dynamo.explain(fused)(ids)
    assert explained.graph_break_count == 0 and explained.graph_count == 1
    gemms = [node for graph in explained.graphs for node in graph.graph.nodes
             if node.op == "call_function" and "mixed_gemm" in str(node.target)]
    assert len(gemms) == 2 * 4  # per layer: qkv, o, gate_up, down (lm_head stays nn.Linear)
    assert sum(node.args[-1] == "silu_mul" for node in gemms) == 2  # the gated gate_up GEMMs
    torch._dynamo.reset()
    with torch.no_grad():
        out = torch.compile(fused, fullgraph=True)(ids).logits
        torch.testing.assert_close(out, _logits(fused, ids))  # fp32: inductor's op order only
        torch._dynamo.reset()
        apart = torch.compile(_ungate(fused), fullgraph=True)(ids).logits
        ref = torch.compile(unfused, fullgraph=True)(ids).logits
    torch.testing.assert_close(apart, ref, **EXACT)  # same graphs but for the GEMMs' widths
    torch._dynamo.reset()


def test_slice_fallback_and_order():
    base = _model("Llama", torch.float16)
    unfused, _ = _quantized(copy.deepcopy(base))
    fused, _ = _quantized(base, fuse=True)
    attn, ref = fused.model.layers[1].self_attn, unfused.model.layers[1].self_attn
    gen = torch.Generator().manual_seed(3)
    x1 = torch.randn(3, 5, 128, generator=gen).half()
    x2 = torch.randn(3, 5, 128, generator=gen).half()
    with torch.no_grad():
        # A slice called alone, and one called with another tensor than its sibling's.
        torch.testing.assert_close(attn.k_proj(x2), ref.k_proj(x2), **EXACT)
        attn.q_proj(x1)
        torch.testing.assert_close(attn.k_proj(x2), ref.k_proj(x2), **EXACT)
        torch.testing.assert_close(attn.v_proj(x1.clone()), ref.v_proj(x1), **EXACT)
        # Any order; an input modified in place in between is not served from the cache.
        attn.v_proj(x1)
        torch.testing.assert_close(attn.q_proj(x1), ref.q_proj(x1), **EXACT)
        x1.mul_(2)
        torch.testing.assert_close(attn.k_proj(x1), ref.k_proj(x1), **EXACT)
        torch.testing.assert_close(attn.v_proj(x1), ref.v_proj(x1), **EXACT)
        # Inference tensors (no version counter) work too.
        with torch.inference_mode():
            x3 = torch.randn(2, 128, generator=gen).half()
            for p in ("up_proj", "gate_proj", "gate_proj"):
                got = getattr(fused.model.layers[0].mlp, p)(x3)
                torch.testing.assert_close(got, getattr(unfused.model.layers[0].mlp, p)(x3),
                                           **EXACT)
    # The cached result follows the grad mode it was computed in.
    x4 = torch.randn(2, 128, generator=gen).half().requires_grad_()
    with torch.no_grad():
        attn.q_proj(x4)
    out = attn.k_proj(x4)
    assert out.requires_grad
    out.float().sum().backward()
    assert x4.grad is not None and torch.isfinite(x4.grad).all()
    assert attn.k_proj.bias.shape == (64,)  # the fused bias' part
    with pytest.raises(AttributeError, match="columns 128:192 of the fused quantized layer"):
        attn.k_proj.weight
    # A deep copy keeps its own fused layer and slices.
    twin = copy.deepcopy(fused)
    t_attn = twin.model.layers[1].self_attn
    assert t_attn.q_proj.fused is t_attn.qkv_proj and t_attn.qkv_proj is not attn.qkv_proj
    assert t_attn.q_proj._shared is t_attn.v_proj._shared is not attn.q_proj._shared
    ids = _ids()
    assert twin.model.layers[1].mlp.forward.args[0] is twin.model.layers[1].mlp  # its own MLP
    torch.testing.assert_close(_logits(twin, ids), _logits(fused, ids), **EXACT)
    pickled = pickle.loads(pickle.dumps(fused))
    p_attn = pickled.model.layers[1].self_attn
    assert p_attn.k_proj.fused is p_attn.qkv_proj and p_attn.k_proj._shared.entry is None
    assert pickled.model.layers[1].mlp.forward.args[0] is pickled.model.layers[1].mlp
    torch.testing.assert_close(_logits(pickled, ids), _logits(fused, ids), **EXACT)


def test_skip_part_of_a_group_keeps_it_unfused():
    base = _model("Mistral", torch.float16)
    unfused, _ = _quantized(copy.deepcopy(base), skip=("lm_head", "k_proj"))
    fused, summary = _quantized(base, skip=("lm_head", "k_proj"), fuse=True)
    assert list(summary.fused) == ["model.layers.0.mlp.gate_up_proj",
                                   "model.layers.1.mlp.gate_up_proj"]
    assert summary.not_fused == {
        f"model.layers.{i}.self_attn.{{q_proj,k_proj,v_proj}}":
            "k_proj is kept as nn.Linear (matches skip pattern 'k_proj')" for i in (0, 1)}
    text = str(summary)
    assert "not fused (2):" in text and "2 x (gate_proj, up_proj) -> gate_up_proj" in text
    attn = fused.model.layers[0].self_attn
    assert isinstance(attn.q_proj, QuantLinear) and type(attn.k_proj) is nn.Linear
    assert not hasattr(attn, "qkv_proj")
    ids = _ids()
    _assert_near(_logits(fused, ids), _logits(unfused, ids), GATED_TOL[torch.float16])
    torch.testing.assert_close(_logits(_ungate(fused), ids), _logits(unfused, ids), **EXACT)


def test_members_that_disagree_stay_unfused():
    model = _model("Qwen3", torch.float16)
    layers = model.model.layers
    layers[0].self_attn.v_proj = nn.Linear(128, 64, bias=True, dtype=torch.float16)  # bias
    layers[1].mlp.up_proj = layers[1].mlp.up_proj.to(torch.bfloat16)  # dtype
    layers[1].self_attn.o_proj = layers[1].self_attn.v_proj  # a layer under two names
    _, summary = _quantized(model, fuse=True)
    assert summary.not_fused == {
        "model.layers.0.self_attn.{q_proj,k_proj,v_proj}": "bias differs (q_proj: False, "
                                                          "v_proj: True)",
        "model.layers.1.self_attn.{q_proj,k_proj,v_proj}":
            "v_proj is also registered as 'model.layers.1.self_attn.o_proj' (a shared layer)",
        "model.layers.1.mlp.{gate_proj,up_proj}": "dtypes differ (gate_proj: torch.float16, "
                                                  "up_proj: torch.bfloat16)"}
    assert list(summary.fused) == ["model.layers.0.mlp.gate_up_proj"]
    assert layers[1].self_attn.v_proj is layers[1].self_attn.o_proj  # still shared, quantized
    assert isinstance(layers[1].self_attn.v_proj, QuantLinear)


def test_unrecognized_models_stay_unfused_and_are_reported():
    class Attention(nn.Module):  # q/k/v linears, but not a recognized family
        def __init__(self):
            super().__init__()
            self.q_proj, self.k_proj, self.v_proj = (nn.Linear(64, 64) for _ in range(3))

        def forward(self, x):
            return self.q_proj(x) + self.k_proj(x) * self.v_proj(x)

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), Attention(), nn.Linear(64, 32)).half()
    ref = copy.deepcopy(model)
    cute_gemm.quantize_model(ref, group_size=32, progress=False)
    _, summary = _quantized(model, fuse=True)
    assert summary.fused == {}
    assert summary.not_fused == {"2.{q_proj,k_proj,v_proj}": (
        "Attention is not a recognized module (fusion covers Llama, Mistral, Qwen2 and Qwen3 "
        "attention (q/k/v) and MLP (gate/up) modules)")}
    assert "fused: none" in str(summary) and len(summary.converted) == 5
    assert not any(isinstance(m, ProjectionSlice) for m in model.modules())
    x = torch.randn(4, 64).half()
    torch.testing.assert_close(model(x), ref(x), **EXACT)

    plain = nn.Sequential(nn.Linear(64, 64), nn.Linear(64, 64))
    _, summary = _quantized(plain, fuse=True)
    assert summary.fused == {} and summary.not_fused == {} and "fused: none" in str(summary)
    assert "fused" not in str(_quantized(nn.Sequential(nn.Linear(64, 64)))[1])
    with pytest.raises(TypeError, match="fuse must be a bool"):
        cute_gemm.quantize_model(nn.Sequential(nn.Linear(64, 64)), fuse="yes")


def test_gated_activation_only_where_the_forward_is_known():
    # A GELU MLP: gate/up fused, its forward (and the activation) kept, with the reason.
    base = _model("Llama", torch.float16, hidden_act="gelu")
    unfused, _ = _quantized(copy.deepcopy(base))
    fused, summary = _quantized(base, fuse=True)
    assert len(summary.fused) == 4 and summary.gated == []
    assert summary.not_gated == {f"model.layers.{i}.mlp": "its act_fn is GELUActivation, not SiLU"
                                 for i in range(2)}
    assert "with the activation apart (2)" in str(summary)
    assert not any("forward" in m.__dict__ for m in fused.modules())
    ids = _ids()
    torch.testing.assert_close(_logits(fused, ids), _logits(unfused, ids), **EXACT)

    # A subclass whose forward differs (read from its source) keeps it too.
    class ScaledMLP(transformers.models.llama.modeling_llama.LlamaMLP):
        def forward(self, x):
            return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x) * 2)

    ScaledMLP.__name__ = "LlamaMLP"  # a recognized class name, another formula
    model = _model("Llama", torch.float16)
    for layer in model.model.layers:
        layer.mlp.__class__ = ScaledMLP
    _, summary = _quantized(model, fuse=True)
    assert summary.gated == [] and len(summary.not_gated) == 2
    assert "LlamaMLP.forward is not down_proj(act_fn(gate_proj(x)) * up_proj(x))" in \
        summary.not_gated["model.layers.0.mlp"]


def test_gated_layer_matches_activation_apart():
    # QuantLinear(x, activation="silu_mul") against silu(gate) * up of its own output, on CPU.
    torch.manual_seed(3)
    gate_up = QuantLinear.from_linear(nn.Linear(128, 2 * 96).half(), bits=4, group_size=32)
    x = torch.randn(5, 128).half()
    full = gate_up(x).float()
    want = torch.nn.functional.silu(full[:, :96]) * full[:, 96:]
    _assert_near(gate_up(x, activation="silu_mul"), want, 2e-3)
    with pytest.raises(ValueError,
                       match=r"activation must be None or 'silu_mul' \(SiLU.*got 'relu'"):
        gate_up(x, activation="relu")


def test_failure_leaves_model_unchanged(monkeypatch):
    model = _model("Qwen2", torch.float16)
    before = _structure(model)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    original = QuantLinear.from_linear.__func__
    calls = []

    def failing(cls, linear, **kwargs):
        calls.append(linear.out_features)
        if len(calls) == 2:
            raise ValueError("injected failure")
        return original(cls, linear, **kwargs)

    monkeypatch.setattr(QuantLinear, "from_linear", classmethod(failing))
    with pytest.raises(ValueError, match="layer 'model.layers.0.self_attn.o_proj': injected"):
        cute_gemm.quantize_model(model, group_size=32, progress=False, fuse=True)
    assert calls == [256, 128]  # the fused q/k/v layer was built, then o_proj failed
    assert _structure(model) == before
    after = model.state_dict()
    assert sorted(after) == sorted(state) and all(torch.equal(after[k], v)
                                                  for k, v in state.items())


def test_save_load_round_trip(tmp_path):
    base = _model("Qwen3", torch.bfloat16)
    fused, _ = _quantized(copy.deepcopy(base), bits=8, group_size=-1, fuse=True)
    path = tmp_path / "fused.safetensors"
    cute_gemm.save_quantized(fused, path)
    from safetensors import safe_open
    with safe_open(str(path), "pt") as f:
        meta = f.metadata()
        keys = set(f.keys())
    assert meta["cute_gemm.format"] == "1.1"
    assert json.loads(meta["cute_gemm.fused"])["model.layers.1.self_attn.qkv_proj"] == {
        "members": ["q_proj", "k_proj", "v_proj"], "sizes": [128, 64, 64]}
    assert "model.layers.0.mlp.gate_up_proj.qweight" in keys
    assert not any(".q_proj." in k or ".gate_proj." in k for k in keys)
    ids = _ids()
    want = _logits(fused, ids)

    # Into a fresh unquantized model, into empty fused layers (weights=False), into an unfused
    # quantized model: all rebuild the same fused structure and logits.
    fresh = cute_gemm.load_quantized(copy.deepcopy(base), path)
    empty = copy.deepcopy(base)
    _, summary = _quantized(empty, bits=8, group_size=-1, fuse=True, weights=False)
    assert len(summary.fused) == 4
    assert not empty.model.layers[0].self_attn.qkv_proj.scales.any()
    cute_gemm.load_quantized(empty, path)
    unfused, _ = _quantized(copy.deepcopy(base))  # other settings: replaced by the file's
    cute_gemm.load_quantized(unfused, path)
    for model in (fresh, empty, unfused):
        assert [n for n, *_ in _structure(model)] == [n for n, *_ in _structure(fused)]
        attn = model.model.layers[1].self_attn
        assert isinstance(attn.v_proj, ProjectionSlice) and attn.v_proj.fused is attn.qkv_proj
        torch.testing.assert_close(_logits(model, ids), want, **EXACT)

    # An unfused file loads into an unquantized model as before, not into a fused one.
    plain, _ = _quantized(copy.deepcopy(base), bits=8, group_size=-1)
    plain_path = tmp_path / "plain.safetensors"
    cute_gemm.save_quantized(plain, plain_path)
    assert "cute_gemm.fused" not in safe_open(str(plain_path), "pt").metadata()
    torch.testing.assert_close(
        _logits(cute_gemm.load_quantized(copy.deepcopy(base), plain_path), ids),
        _logits(plain, ids), **EXACT)
    before = _structure(fresh)
    with pytest.raises(ValueError, match=r"'model.layers.0.self_attn.q_proj' is a separate "
                                         r"quantized layer in .* but is fused into 'qkv_proj' in "
                                         r"the model"):
        cute_gemm.load_quantized(fresh, plain_path)
    assert _structure(fresh) == before

    # A fused file that does not fit: the fusion built for the load is taken out again.
    other = _model("Qwen3", torch.bfloat16, vocab_size=VOCAB * 2)
    before = _structure(other)
    with pytest.raises(ValueError, match="does not fit the model"):
        cute_gemm.load_quantized(other, path)
    assert _structure(other) == before
    narrow = _model("Qwen3", torch.bfloat16, num_key_value_heads=1)
    before = _structure(narrow)
    with pytest.raises(ValueError, match=r"fuses \['q_proj', 'k_proj', 'v_proj'\] into "
                                         r"'model.layers.0.self_attn.qkv_proj', but layer "
                                         r"'model.layers.0.self_attn.k_proj' is \[out=32, "
                                         r"in=128\] in the model and \[out=64, in=128\]"):
        cute_gemm.load_quantized(narrow, path)
    assert _structure(narrow) == before


def test_corrupted_fusion_metadata_is_refused(tmp_path):
    from safetensors import safe_open
    from safetensors.torch import load_file, save_file

    base = _model("Mistral", torch.float16)
    fused, _ = _quantized(copy.deepcopy(base), fuse=True)
    path = tmp_path / "fused.safetensors"
    cute_gemm.save_quantized(fused, path)
    meta = safe_open(str(path), "pt").metadata()
    tensors = load_file(str(path))
    record = json.loads(meta["cute_gemm.fused"])
    name = "model.layers.0.mlp.gate_up_proj"
    for change, why in (({"sizes": [256, 128]}, "do not add up to its out_features=512"),
                        ({"members": ["gate_proj"], "sizes": [512]}, "two or more distinct"),
                        ({"members": ["gate_proj", "down_proj"]},
                         "'model.layers.0.mlp.down_proj' is also a quantized layer")):
        bad = dict(record, **{name: dict(record[name], **change)})
        bad_path = tmp_path / "bad.safetensors"
        save_file(tensors, str(bad_path), metadata=dict(meta, **{
            "cute_gemm.fused": json.dumps(bad)}))
        model = copy.deepcopy(base)
        before = _structure(model)
        with pytest.raises(ValueError, match=f"corrupted cute_gemm metadata for fused layer "
                                             f"'{name}': .*{why}"):
            cute_gemm.load_quantized(model, bad_path)
        assert _structure(model) == before
    save_file(tensors, str(bad_path), metadata=dict(meta, **{"cute_gemm.format": "1"}))
    with pytest.raises(ValueError, match="fused layers .* in a file of format version '1'"):
        cute_gemm.load_quantized(copy.deepcopy(base), bad_path)


@pytest.mark.gpu
def test_gpu_fused_matches_unfused_and_replays_in_a_cuda_graph():
    """On the GPU the planner may pick another tiling or split-K for the wider fused N, so the
    accumulation order (not the math) can differ: a GEMM output can move by an fp16 rounding
    step, which the two decoder layers carry to the logits. Measured on an H100 at these sizes:
    bit-identical for all four families, INT4 g32 and INT8 per-channel; the bound, 5e-3
    relative, leaves room for other plans and stays far below INT4's own error (~0.25).
    Replaying a CUDA graph of the fused attention + MLP runs the same kernels as eager:
    bit-identical."""
    base = _model("Llama", torch.float16).cuda()
    unfused, _ = _quantized(copy.deepcopy(base))
    fused, _ = _quantized(base, fuse=True)
    ids = _ids().cuda()
    out, ref = _logits(fused, ids).float(), _logits(unfused, ids).float()
    assert ((out - ref).norm() / ref.norm()).item() < 5e-3
    with torch.no_grad():
        b = fused.generate(ids[:1, :6], max_new_tokens=8, do_sample=False, pad_token_id=0)
        a = unfused.generate(ids[:1, :6], max_new_tokens=8, do_sample=False, pad_token_id=0)
    assert a.shape == b.shape == (1, 14)

    layer = fused.model.layers[0]
    gen = torch.Generator(device="cuda").manual_seed(5)
    x = torch.randn(1, 4, 128, device="cuda", dtype=torch.float16, generator=gen)
    cos, sin = fused.model.rotary_emb(x, torch.arange(4, device="cuda")[None])

    def step():
        h, _ = layer.self_attn(x, position_embeddings=(cos, sin), attention_mask=None)
        return layer.mlp(h)

    with torch.no_grad():
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            step()  # warm-up outside the capture
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static = step()
        for seed in (6, 7):
            x.copy_(torch.randn(x.shape, device="cuda", dtype=x.dtype,
                                generator=gen.manual_seed(seed)))
            graph.replay()
            torch.testing.assert_close(static, step(), **EXACT)
    assert layer.self_attn.q_proj._shared.entry is None
