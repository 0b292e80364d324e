"""cute_gemm.quantize_model / save_quantized / load_quantized: conversion of a nested model, skip
patterns, layers the kernel cannot take (kept, one warning), fp32 layers, the summary's numbers,
the progress bar, shared layers, the empty-skeleton path (weights=False) with torch.save and
safetensors, and the metadata round trip of save_quantized/load_quantized (also onto a
meta-device model and with tied weights)."""

import copy
import io
import json
import warnings

import pytest
import torch
from torch import nn

import cute_gemm
from cute_gemm import QuantLinear

pytest.importorskip("safetensors")
pytest.importorskip("tqdm")


def _gen(seed):
    return torch.Generator().manual_seed(seed)


def _randn(*shape, dtype=torch.float16, seed=0, scale=1.0):
    return (torch.randn(*shape, generator=_gen(seed)) * scale).to(dtype)


class Block(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.attn = nn.ModuleDict({"q_proj": nn.Linear(dim, dim, bias=False),
                                   "o_proj": nn.Linear(dim, dim)})
        self.mlp = nn.Sequential(nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, dim))

    def forward(self, x):
        x = x + self.attn["o_proj"](torch.tanh(self.attn["q_proj"](x)))
        return x + self.mlp(x)


class Tiny(nn.Module):
    """Embedding, two blocks, an odd-sized side head (N=10) and an output head tied to the
    embedding."""

    def __init__(self, dim=64, hidden=128, vocab=32, tie=False):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.blocks = nn.ModuleList([Block(dim, hidden) for _ in range(2)])
        self.side = nn.Linear(dim, 10)
        self.lm_head = nn.Linear(dim, vocab, bias=False)
        if tie:
            self.lm_head.weight = self.embed.weight

    def forward(self, tokens):
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x)
        return self.lm_head(x), self.side(x)


def _tiny(dtype=torch.float16, seed=0, **kwargs):
    torch.manual_seed(seed)
    model = Tiny(**kwargs)
    with torch.no_grad():
        for i, p in enumerate(model.parameters()):
            p.copy_(_randn(*p.shape, dtype=torch.float32, seed=seed * 100 + i, scale=0.2))
    return model.to(dtype).eval()


TOKENS = torch.randint(0, 32, (2, 5), generator=_gen(1))
BLOCK_LINEARS = [f"blocks.{b}.{name}" for b in range(2)
                 for name in ("attn.q_proj", "attn.o_proj", "mlp.0", "mlp.2")]


def _quantize(model, **kwargs):
    kwargs.setdefault("progress", False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the side head's warning; tested on its own
        return cute_gemm.quantize_model(model, **kwargs)


def _dequantized_copy(original, quantized):
    """``original`` with every layer that ``quantized`` holds as QuantLinear given its
    dequantized weight, in fp32: the function the quantized model should compute."""
    ref = copy.deepcopy(original).float()
    for name, module in quantized.named_modules():
        if isinstance(module, QuantLinear):
            with torch.no_grad():
                ref.get_submodule(name).weight.copy_(module.quantized_weight.dequantize().float())
    return ref


def _rel(out, ref):
    """Norm-wise relative error."""
    return ((out.float() - ref.float()).norm() / ref.float().norm()).item()


def _assert_outputs_equal(a, b):
    for x, y in zip(a, b):
        assert torch.equal(x, y)


# ---------------------------------------------------------------------------------- convert


@pytest.mark.parametrize("bits,group,symmetric,dtype", [
    (4, 64, True, torch.float16), (8, 32, False, torch.bfloat16), (4, -1, False, torch.float16)])
def test_converts_nested_model(bits, group, symmetric, dtype):
    original = _tiny(dtype, seed=2)
    model = copy.deepcopy(original)
    summary = _quantize(model, bits=bits, group_size=group, symmetric=symmetric)
    assert summary.converted == BLOCK_LINEARS
    assert set(summary.skipped) == {"side", "lm_head"}
    for name in BLOCK_LINEARS:
        layer = model.get_submodule(name)
        assert isinstance(layer, QuantLinear)
        assert (layer.bits, layer.group_size, layer.symmetric) == (bits, group, symmetric)
        assert layer.scales.dtype == dtype
        assert (layer.bias is None) == (original.get_submodule(name).bias is None)
    assert type(model.side) is nn.Linear and type(model.lm_head) is nn.Linear
    # The quantized model computes the original function on the dequantized weights (up to
    # the roundings of a half-precision forward, ~1 eps norm-wise)...
    eps = torch.finfo(dtype).eps
    outputs = model(TOKENS)
    for out, ref in zip(outputs, _dequantized_copy(original, model)(TOKENS)):
        assert _rel(out, ref) < 4 * eps
    # ...which is further from the original model's (the weights really are quantized).
    for out, ref_q, ref_orig in zip(outputs, _dequantized_copy(original, model)(TOKENS),
                                    copy.deepcopy(original).float()(TOKENS)):
        assert _rel(out, ref_orig) > _rel(out, ref_q)


def test_skip_patterns():
    model = _tiny(seed=3)
    summary = _quantize(model, skip=("blocks.*.mlp.*", "q_proj"), group_size=32)
    assert summary.converted == ["blocks.0.attn.o_proj", "blocks.1.attn.o_proj", "lm_head"]
    assert summary.skipped["blocks.1.mlp.2"] == "matches skip pattern 'blocks.*.mlp.*'"
    assert summary.skipped["blocks.0.attn.q_proj"] == "matches skip pattern 'q_proj'"
    assert summary.skipped["side"] == "out_features=10 is not a multiple of 8"
    # A string is one pattern (not a sequence of one-letter patterns); None skips nothing.
    model = _tiny(seed=3)
    summary = _quantize(model, skip="mlp.2", group_size=32)
    assert [n for n in summary.skipped if "mlp" in n] == ["blocks.0.mlp.2", "blocks.1.mlp.2"]
    assert "blocks.0.mlp.0" in summary.converted
    model = _tiny(seed=3)
    summary = _quantize(model, skip=None, group_size=32)
    assert "lm_head" in summary.converted and list(summary.skipped) == ["side"]


def test_unsupported_shapes_stay_linear_with_one_warning():
    model = nn.Sequential(nn.Linear(128, 64), nn.Linear(64, 12), nn.Linear(12, 96),
                          nn.Sequential(nn.Linear(96, 32))).half()
    with pytest.warns(UserWarning) as record:
        summary = cute_gemm.quantize_model(model, group_size=64, progress=False)
    assert len(record) == 1
    message = str(record[0].message)
    assert "kept 3 nn.Linear layer(s) unquantized" in message
    assert "1 (out_features=12 is not a multiple of 8)" in message
    assert "2 (in_features=12 is not a multiple of group_size=64)" in message
    assert "3.0 (in_features=96 is not a multiple of group_size=64)" in message
    assert summary.converted == ["0"]
    assert [type(m) for m in model] == [QuantLinear, nn.Linear, nn.Linear, nn.Sequential]
    assert type(model[3][0]) is nn.Linear
    # Nothing to warn about: no warning at all.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cute_gemm.quantize_model(nn.Sequential(nn.Linear(64, 16)).half(), group_size=64,
                                 progress=False)


def test_fp32_model_is_converted_with_a_compute_dtype():
    # An fp32 model: every eligible layer is converted (it used to be skipped, all of them), with
    # bf16 compute by default (DEFAULT_FP32_COMPUTE_DTYPE) or the dtype= asked for, and the layers
    # keep the fp32 call contract: fp32 in, fp32 out.
    for dtype, want in ((None, torch.bfloat16), (torch.float16, torch.float16)):
        model = _tiny(torch.float32, seed=4)
        x = _randn(2, 3, 64, seed=5).float()
        summary = _quantize(model, group_size=32, dtype=dtype)
        assert summary.converted == BLOCK_LINEARS
        assert set(summary.skipped) == {"lm_head", "side"}  # by name and by shape, not dtype
        layer = model.blocks[0].mlp[0]
        assert layer.scales.dtype == layer.bias.dtype == want
        out = layer(x)
        assert out.dtype == torch.float32
        # The contract: the input rounded to the compute dtype, the product of the CPU
        # reference (weight dequantized to the compute dtype, fp32 sums), rounded to the compute
        # dtype, then returned in fp32.
        w = layer.quantized_weight.dequantize().double()
        ref = (x.to(want).double() @ w.t() + layer.bias.double()).to(want).float()
        eps = torch.finfo(want).eps
        torch.testing.assert_close(out, ref, rtol=eps, atol=eps)


def _expected_bytes(linear, bits, group, symmetric):
    """The packed weight, scales, zeros and bias from the format's definition (independent of
    QuantLinear): N*Kp*bits/8 bytes of weight (K padded to the block), 2 bytes per scale/zero."""
    n, k = linear.out_features, linear.in_features
    bk = 128 if bits == 4 else 64
    kp = -(-k // bk) * bk
    groups = 1 if group == -1 else k // group
    meta = groups * n * 2 * (1 if symmetric else 2)
    return n * kp * bits // 8 + meta + (2 * n if linear.bias is not None else 0)


@pytest.mark.parametrize("bits,group,symmetric", [(4, 128, True), (8, 32, False),
                                                  (4, 32, False), (4, -1, True)])
def test_summary_numbers(bits, group, symmetric):
    model = _tiny(seed=6, dim=128, hidden=192)  # K = 192 for mlp.2: INT4 pads it to 256
    before = {name: m for name, m in model.named_modules() if isinstance(m, nn.Linear)}
    summary = _quantize(model, bits=bits, group_size=group, symmetric=symmetric)
    converted = [before[n] for n in summary.converted]
    assert summary.bytes_before == sum(2 * m.weight.numel() + (2 * m.bias.numel() if m.bias
                                                               is not None else 0)
                                       for m in converted)
    assert summary.bytes_after == sum(_expected_bytes(m, bits, group, symmetric)
                                      for m in converted)
    assert summary.compression == summary.bytes_before / summary.bytes_after
    text = str(summary)
    group_text = "per-channel" if group == -1 else f"group {group}"
    kind = "symmetric" if symmetric else "asymmetric"
    assert text.splitlines()[0] == (f"quantize_model: {len(summary.converted)} of 10 nn.Linear "
                                    f"layers converted to INT{bits} ({group_text}, {kind})")
    assert f"({summary.compression:.2f}x smaller)" in text
    assert "    lm_head: matches skip pattern 'lm_head'" in text
    assert "    side: out_features=10 is not a multiple of 8" in text


def test_progress_bar(capsys):
    _quantize(_tiny(seed=7), progress=False, group_size=32)
    assert capsys.readouterr().err == ""
    _quantize(_tiny(seed=7), progress=True, group_size=32)
    err = capsys.readouterr().err
    assert "quantize_model" in err and "8/8" in err


def test_shared_layer_replaced_everywhere():
    shared = nn.Linear(64, 64).half()
    model = nn.Sequential(shared, nn.ReLU(), shared)
    summary = _quantize(model, group_size=32)
    assert summary.converted == ["0"]  # one layer, counted once
    assert isinstance(model[0], QuantLinear) and model[2] is model[0]
    # A shared layer is skipped when any of its names matches.
    model = nn.Sequential(nn.ModuleDict({"keep": shared}), nn.ModuleDict({"head": shared}))
    summary = _quantize(model, group_size=32, skip=("head",))
    assert summary.converted == [] and type(model[0]["keep"]) is nn.Linear


def test_multihead_attention_out_proj_is_kept():
    model = nn.ModuleDict({"attn": nn.MultiheadAttention(64, 4), "proj": nn.Linear(64, 64)})
    model = model.half()
    with pytest.warns(UserWarning, match=r"attn.out_proj \(output projection of "
                                         r"nn.MultiheadAttention"):
        summary = cute_gemm.quantize_model(model, group_size=32, progress=False)
    assert summary.converted == ["proj"]
    x = _randn(5, 2, 64, seed=8).float()
    model.float()  # the attention in fp32 (CPU half MHA is not the point here)
    out, _ = model["attn"](x, x, x)
    assert out.shape == (5, 2, 64)


def test_argument_errors():
    model = _tiny(seed=9)
    with pytest.raises(TypeError, match=r"quantize_model: model must be a torch.nn.Module; got "
                                        r"dict"):
        cute_gemm.quantize_model({}, progress=False)
    with pytest.raises(TypeError, match=r"model is itself an nn.Linear.*from_linear"):
        cute_gemm.quantize_model(nn.Linear(64, 64), progress=False)
    with pytest.raises(ValueError, match=r"quantize_model: bits must be 4 or 8; got bits=2"):
        cute_gemm.quantize_model(model, bits=2, progress=False)
    with pytest.raises(ValueError, match=r"group_size must be one of 32, 64, 128 or -1 .*got "
                                         r"group_size=256"):
        cute_gemm.quantize_model(model, group_size=256, progress=False)
    with pytest.raises(TypeError, match=r"symmetric must be a bool; got str"):
        cute_gemm.quantize_model(model, symmetric="yes", progress=False)
    with pytest.raises(ValueError, match=r"dtype must be None, torch.float16 or torch.bfloat16; "
                                         r"got torch.float32"):
        cute_gemm.quantize_model(model, dtype=torch.float32, progress=False)
    with pytest.raises(TypeError,
                       match=r"skip must contain strings \(module names or patterns\); got int"):
        cute_gemm.quantize_model(model, skip=["lm_head", 3], progress=False)
    with pytest.raises(TypeError, match=r"skip must be a string, a sequence of strings or None; "
                                        r"got int"):
        cute_gemm.quantize_model(model, skip=3, progress=False)
    assert all(type(m) is not QuantLinear for m in model.modules())  # nothing half-done
    with torch.device("meta"):
        meta = Tiny().half()
    with pytest.raises(ValueError, match=r"layer 'blocks.0.attn.q_proj' is on the meta device.*"
                                         r"weights=False"):
        _quantize(meta, group_size=32)
    bad = nn.Sequential(nn.Linear(64, 64)).half()
    with torch.no_grad():
        bad[0].weight[3, 5] = float("nan")
    with pytest.raises(ValueError, match=r"quantize_model: layer '0': quantize: weight must be "
                                         r"finite"):
        _quantize(bad, group_size=32)


# ------------------------------------------------------------------------- skeleton and files


@pytest.mark.parametrize("fmt", ["torch", "safetensors"])
def test_skeleton_loads_a_state_dict(fmt, tmp_path):
    source = _tiny(seed=10)
    _quantize(source, bits=8, group_size=32, symmetric=False)
    state = source.state_dict()
    if fmt == "torch":
        buf = io.BytesIO()
        torch.save(state, buf)
        buf.seek(0)
        loaded = torch.load(buf, weights_only=True)
    else:
        from safetensors.torch import load_file, save_file

        save_file({k: v.contiguous() for k, v in state.items()}, str(tmp_path / "m.safetensors"))
        loaded = load_file(str(tmp_path / "m.safetensors"))
    target = _tiny(seed=11)  # different weights everywhere
    summary = _quantize(target, bits=8, group_size=32, symmetric=False, weights=False)
    assert summary.converted == BLOCK_LINEARS
    assert summary.bytes_after == _quantize(_tiny(seed=10), bits=8, group_size=32,
                                            symmetric=False).bytes_after
    assert not torch.equal(target(TOKENS)[0], source(TOKENS)[0])
    target.load_state_dict(loaded)
    _assert_outputs_equal(target(TOKENS), source(TOKENS))


def test_skeleton_on_meta_device():
    with torch.device("meta"):
        model = Tiny().half()
    summary = _quantize(model, group_size=64, weights=False)
    assert summary.converted == BLOCK_LINEARS
    assert model.blocks[0].mlp[0].qweight.device.type == "meta"


def _mixed_settings_model(seed, tie=False):
    """Attention layers INT4 symmetric g64, MLP layers INT8 asymmetric g32 bf16, lm_head kept."""
    model = _tiny(torch.bfloat16, seed=seed, tie=tie)
    _quantize(model, bits=8, group_size=32, symmetric=False, skip=("attn", "lm_head"))
    _quantize(model, bits=4, group_size=64, symmetric=True, skip=("lm_head",))
    return model


def test_save_and_load_quantized(tmp_path):
    path = tmp_path / "model.safetensors"
    model = _mixed_settings_model(seed=12)
    cute_gemm.save_quantized(model, path, metadata={"note": "test"})
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as f:
        meta = f.metadata()
    assert meta["note"] == "test"
    layers = json.loads(meta["cute_gemm.layers"])
    assert layers["blocks.1.mlp.2"] == {"in_features": 128, "out_features": 64, "bias": True,
                                        "bits": 8, "group_size": 32, "symmetric": False,
                                        "dtype": "bfloat16", "input_perm": False}
    assert layers["blocks.0.attn.q_proj"]["bits"] == 4 and "lm_head" not in layers
    # A fresh copy of the original architecture, with other weights: no settings passed.
    fresh = _tiny(torch.bfloat16, seed=13)
    assert cute_gemm.load_quantized(fresh, path) is fresh
    for name, module in model.named_modules():
        if isinstance(module, QuantLinear):
            loaded = fresh.get_submodule(name)
            assert isinstance(loaded, QuantLinear) and repr(loaded) == repr(module)
    _assert_outputs_equal(fresh(TOKENS), model(TOKENS))
    # Loading into an already converted model (matching layers are reused).
    cute_gemm.load_quantized(fresh, path)
    _assert_outputs_equal(fresh(TOKENS), model(TOKENS))


def test_load_quantized_onto_meta_model_with_tied_weights(tmp_path):
    path = tmp_path / "tied.safetensors"
    model = _mixed_settings_model(seed=14, tie=True)
    assert model.lm_head.weight is model.embed.weight
    cute_gemm.save_quantized(model, path)
    with torch.device("meta"):
        fresh = Tiny(tie=True).to(torch.bfloat16)
    cute_gemm.load_quantized(fresh, path)
    assert fresh.lm_head.weight is fresh.embed.weight  # still tied
    assert all(t.device.type == "cpu" for t in fresh.state_dict().values())
    _assert_outputs_equal(fresh.eval()(TOKENS), model(TOKENS))


def test_save_and_load_input_perm(tmp_path):
    path = tmp_path / "perm.safetensors"
    model = nn.Sequential(nn.Linear(128, 32), nn.ReLU(), nn.Linear(32, 16)).half()
    perm = torch.randperm(128, generator=_gen(15))
    qw = cute_gemm.quantize(_randn(32, 128, seed=16, scale=0.1)[:, perm], group_size=32)
    model[0] = QuantLinear.from_quantized(qw, bias=_randn(32, seed=17), input_perm=perm)
    cute_gemm.save_quantized(model, path)
    fresh = nn.Sequential(nn.Linear(128, 32), nn.ReLU(), nn.Linear(32, 16)).half()
    fresh[2].load_state_dict(model[2].state_dict())
    cute_gemm.load_quantized(fresh, path)
    assert torch.equal(fresh[0].input_perm, perm)
    x = _randn(4, 128, seed=18)
    assert torch.equal(fresh(x), model(x))


def test_save_and_load_errors(tmp_path):
    from safetensors.torch import save_file

    model = _mixed_settings_model(seed=19)
    with pytest.raises(ValueError, match=r"save_quantized: metadata key 'cute_gemm.layers' is "
                                         r"reserved"):
        cute_gemm.save_quantized(model, tmp_path / "x.safetensors",
                                 metadata={"cute_gemm.layers": "{}"})
    with pytest.raises(TypeError, match=r"save_quantized: metadata must map str to str; got "
                                        r"'n': int"):
        cute_gemm.save_quantized(model, tmp_path / "x.safetensors", metadata={"n": 1})
    plain = tmp_path / "plain.safetensors"
    save_file({"w": torch.zeros(2)}, str(plain))
    with pytest.raises(ValueError, match=r"has no cute_gemm layer metadata"):
        cute_gemm.load_quantized(_tiny(seed=20), plain)
    path = tmp_path / "model.safetensors"
    cute_gemm.save_quantized(model, path)
    other = nn.Sequential(nn.Linear(64, 64))
    with pytest.raises(ValueError, match=r"model.safetensors' has a quantized layer "
                                         r"'blocks.0.attn.q_proj' that the model does not have"):
        cute_gemm.load_quantized(other, path)
    wrong = _tiny(torch.bfloat16, seed=21, hidden=256)
    with pytest.raises(ValueError, match=r"layer 'blocks.0.mlp.0' is \[out=256, in=64\] in the "
                                         r"model but \[out=128, in=64\] in the file"):
        cute_gemm.load_quantized(wrong, path)
    swapped = _tiny(torch.bfloat16, seed=22)
    swapped.blocks[0].mlp[0] = nn.Identity()
    with pytest.raises(TypeError, match=r"'blocks.0.mlp.0' is quantized in '.*model.safetensors' "
                                        r"but is a Identity in the model"):
        cute_gemm.load_quantized(swapped, path)
    with torch.device("meta"):
        meta = Tiny().to(torch.bfloat16)
    with pytest.raises(ValueError, match=r"save_quantized: 'embed.weight' is on the meta device"):
        cute_gemm.save_quantized(meta, tmp_path / "meta.safetensors")


@pytest.mark.gpu
def test_gpu_quantize_model_and_reload(tmp_path):
    original = _tiny(torch.float16, seed=23).cuda()
    model = copy.deepcopy(original)
    summary = _quantize(model, bits=4, group_size=64)
    assert summary.converted == BLOCK_LINEARS
    assert model.blocks[0].mlp[0].qweight.is_cuda
    eps = torch.finfo(torch.float16).eps
    for out, ref in zip(model(TOKENS.cuda()), _dequantized_copy(original, model)(TOKENS.cuda())):
        assert _rel(out, ref) < 4 * eps
    path = tmp_path / "gpu.safetensors"
    cute_gemm.save_quantized(model, path)
    fresh = _tiny(torch.float16, seed=24).cuda()
    cute_gemm.load_quantized(fresh, path)
    assert fresh.blocks[1].mlp[2].qweight.is_cuda
    _assert_outputs_equal(fresh(TOKENS.cuda()), model(TOKENS.cuda()))
