"""Issue 17: every input is computed correctly or refused with an error that says why.

One section per class of silent wrong answer the library used to give (each test here failed
before the fix: it either saw no error or a wrong value):

* packed weights that do not match their metadata (QuantLinear's format tag, qweight's dtype,
  zeros' and input_perm's values);
* quantization that broke its own error bound on small-magnitude groups (fp16 scales that went
  subnormal or to zero);
* non-integer settings (4.0, 128.0) that were accepted or failed with an unrelated message;
* conversions that left the model half converted when they failed part way;
* fp32 models, whose layers were all skipped: now a drop-in with a 16-bit compute dtype.

The loaders' classes (files, strict=False reports) are in test_load_errors.py, the layout
algebra's overflow and inverse checks in test_layout_overflow.py.
"""

import copy

import pytest
import torch

import cute_gemm
from cute_gemm.nn import QuantLinear
from cute_gemm.quant import PACKED_FORMAT_MAGIC, format_tag


def _gen(seed):
    return torch.Generator().manual_seed(seed)


def _randn(*shape, dtype=torch.float32, seed=0, scale=1.0):
    return (torch.randn(*shape, generator=_gen(seed)) * scale).to(dtype)


def _layer(k, n, bits=4, group=32, symmetric=True, dtype=torch.float16, seed=0, bias=True):
    linear = torch.nn.Linear(k, n, bias=bias)
    with torch.no_grad():
        linear.weight.copy_(_randn(n, k, seed=seed, scale=0.05))
        if bias:
            linear.bias.copy_(_randn(n, seed=seed + 1))
    return QuantLinear.from_linear(linear.to(dtype), bits=bits, group_size=group,
                                   symmetric=symmetric)


# ------------------------------------------------------------------ packed buffers and metadata


@pytest.mark.parametrize("k", [32, 64])
@pytest.mark.parametrize("src_bits,dst_bits", [(4, 8), (8, 4)])
def test_state_dict_packed_for_another_bit_width_is_refused(k, src_bits, dst_bits):
    # For K <= 64 the INT4 and INT8 packed shapes coincide ([N/8, 1, 32, 4]): only the format tag
    # tells them apart. Before the tag, this loaded and computed garbage.
    src = _layer(k, 16, bits=src_bits, group=32, seed=1)
    dst = QuantLinear(k, 16, bits=dst_bits, group_size=32)
    assert src.qweight.shape == dst.qweight.shape
    before = {name: t.clone() for name, t in dst.state_dict().items()}
    with pytest.raises(RuntimeError, match=rf"'qformat' does not match this layer: the buffer was "
                                           rf"packed for bits={src_bits}, group_size=32, "
                                           rf"symmetric=True, not bits={dst_bits}"):
        dst.load_state_dict(src.state_dict())
    for name, t in dst.state_dict().items():  # nothing of the layer was loaded
        assert torch.equal(t, before[name]), name


@pytest.mark.parametrize("convert", ["half", "float", "bfloat16"])
def test_state_dict_with_converted_dtypes_is_refused(convert):
    # {k: v.half()} turned the packed int32 words into floats; loading copied them back as
    # rounded integers: garbage weights without a word.
    src = _layer(128, 16, seed=2)
    state = {name: getattr(t, convert)() for name, t in src.state_dict().items()}
    with pytest.raises(RuntimeError, match=r"qweight must be an int32 tensor of shape \[2, 1, 32, "
                                           r"4\] \(the packed 4-bit weight\); got a torch\."):
        QuantLinear(128, 16, group_size=32).load_state_dict(state)


def test_state_dict_with_a_foreign_format_tag_is_refused():
    src = _layer(128, 16, seed=3)
    state = src.state_dict()
    state["qformat"] = torch.tensor([0x1234, 4, 32, 1], dtype=torch.int32)
    with pytest.raises(RuntimeError, match=r"the format tag's magic is 0x1234, not cute_gemm's"):
        QuantLinear(128, 16, group_size=32).load_state_dict(state)
    state["qformat"] = torch.ones(3, dtype=torch.int32)
    with pytest.raises(RuntimeError, match=r"the format tag must be an int32 tensor of 4 values"):
        QuantLinear(128, 16, group_size=32).load_state_dict(state)


def test_state_dict_without_the_tag():
    # State dicts saved before the tag: loaded where the packed shape pins the bit width
    # (K > 64), refused where it does not.
    src = _layer(128, 16, seed=4)
    state = {k: v for k, v in src.state_dict().items() if k != "qformat"}
    dst = QuantLinear(128, 16, group_size=32)
    result = dst.load_state_dict(state)
    assert not result.missing_keys and not result.unexpected_keys
    assert torch.equal(dst.qweight, src.qweight)
    assert dst.qformat.tolist() == [PACKED_FORMAT_MAGIC, 4, 32, 1]
    small = _layer(64, 16, seed=5)
    state = {k: v for k, v in small.state_dict().items() if k != "qformat"}
    with pytest.raises(RuntimeError, match=r"no 'qformat' format tag, and with in_features=64 "
                                           r"\(<= 64\) INT4 and INT8 packed buffers have the same "
                                           r"shape"):
        QuantLinear(64, 16, group_size=32).load_state_dict(state)


PERM_BAD = {
    "all_zeros": (torch.zeros(128, dtype=torch.int64), r"must be a permutation of 0..127"),
    "out_of_range": (torch.arange(128) + 1, r"must be a permutation of 0..127"),
    "negative": (torch.arange(128) - 1, r"must be a permutation of 0..127"),
    "repeated": (torch.arange(128) // 2, r"must be a permutation of 0..127"),
    "short": (torch.arange(64), r"must have shape \[K\] = \[128\]; got \[64\]"),
    "float": (torch.arange(128.0), r"must be an integer torch.Tensor; got a torch.float32"),
}


@pytest.mark.parametrize("case", list(PERM_BAD))
def test_loaded_input_perm_is_validated(case):
    # A loaded input_perm was copied as it came: all zeros silently fed column 0 to every row,
    # out-of-range values failed later with an index error from deep inside index_select.
    perm, match = PERM_BAD[case]
    qw = cute_gemm.quantize(_randn(16, 128, seed=6), 4, 32)
    src = QuantLinear.from_quantized(qw, input_perm=torch.randperm(128, generator=_gen(7)))
    state = src.state_dict()
    state["input_perm"] = perm
    with pytest.raises(RuntimeError, match=r"QuantLinear '': input_perm " + match):
        QuantLinear(128, 16, bias=False, group_size=32).load_state_dict(state)


@pytest.mark.parametrize("value,what", [(0.5, "fraction"), (16.0, "above 15"), (-1.0, "negative"),
                                        (float("nan"), "nan")])
def test_loaded_zero_points_are_validated(value, what):
    # The kernel subtracts integer zero points; a fraction or an out-of-range value computed a
    # weight no dequantize() reproduces.
    src = _layer(128, 16, symmetric=False, seed=8)
    state = src.state_dict()
    state["zeros"] = state["zeros"].clone()
    state["zeros"][1, 3] = value
    with pytest.raises(RuntimeError, match=r"zeros must hold integer zero points in \[0, 15\] for "
                                           r"bits=4"):
        QuantLinear(128, 16, group_size=32, symmetric=False).load_state_dict(state)


def test_loaded_scales_must_be_finite():
    src = _layer(128, 16, seed=9)
    state = src.state_dict()
    state["scales"] = state["scales"].clone()
    state["scales"][0, 0] = float("inf")
    with pytest.raises(RuntimeError, match=r"scales must be finite"):
        QuantLinear(128, 16, group_size=32).load_state_dict(state)


def test_state_dict_roundtrip_keeps_the_tag():
    for bits, group, symmetric in [(4, 128, True), (8, -1, False), (4, 32, False)]:
        src = _layer(128, 24, bits=bits, group=group, symmetric=symmetric, seed=10)
        assert torch.equal(src.qformat, format_tag(bits, group, symmetric))
        dst = QuantLinear(128, 24, bits=bits, group_size=group, symmetric=symmetric)
        dst.load_state_dict(src.state_dict())
        x = _randn(3, 128, dtype=torch.float16, seed=11)
        assert torch.equal(dst(x), src(x))


# ---------------------------------------------------------------- quantization error bound


def _bound_violation(w, qw):
    """max(|w - dequantize(w)| - s/2) over the weight (<= 0 when the bound holds), with the exact
    (fp32) dequantized weight and the stored scale of each element's group."""
    n, k = qw.shape
    g = qw.effective_group_size
    s = qw.scales.float().t().repeat_interleave(g, dim=1)  # [N, K]
    err = (w.float() - qw.dequantize(torch.float32)).abs()
    return float((err - s / 2 * (1 + 2**-20)).max())


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("symmetric", [True, False], ids=["sym", "asym"])
@pytest.mark.parametrize("bits", [4, 8])
@pytest.mark.parametrize("magnitude", [1e-1, 1e-3, 1e-4, 2e-5, 1e-6, 1e-7, 1e-9, 1e-12])
def test_error_bound_holds_for_small_groups(magnitude, bits, symmetric, dtype):
    # fp16 scales below 2^-14 are subnormal and below 2^-24 round to 0: rounding the scale to
    # nearest clipped whole groups (error up to ~half the group's range) or zeroed them (error
    # = |w|, bound 0). Rounded up, the bound |w - dequant(w)| <= s/2 holds for every group.
    w = _randn(16, 256, seed=12) * magnitude
    w[0] = 0.0  # an all-zero row: s = 0, exact zeros
    w[1] *= 1e3  # rows of other magnitudes beside
    qw = cute_gemm.quantize(w, bits, 64, symmetric, dtype=dtype)
    assert _bound_violation(w, qw) <= 0
    assert torch.equal(qw.dequantize(torch.float32)[0], torch.zeros(256))
    if dtype == torch.bfloat16 or magnitude >= 1e-5:
        # Where the scale is representable with some precision, the quantization keeps the
        # weight's information: the relative error is that of the grid, not 100%.
        rel = (w[2:] - qw.dequantize(torch.float32)[2:]).norm() / w[2:].norm()
        assert float(rel) < (0.15 if bits == 4 else 0.01)


def test_error_bound_with_a_mixture_of_group_magnitudes():
    gen = _gen(13)
    w = torch.randn(64, 512, generator=gen) * torch.logspace(-10, 1, 64).unsqueeze(1)
    for dtype in (torch.float16, torch.bfloat16):
        for bits in (4, 8):
            for symmetric in (True, False):
                qw = cute_gemm.quantize(w, bits, 32, symmetric, dtype=dtype)
                assert _bound_violation(w, qw) <= 0, (dtype, bits, symmetric)


# --------------------------------------------------------------------- non-integer settings

def _w():
    return _randn(16, 128, seed=14)


NON_INTEGER = {
    "quantize_bits": (lambda: cute_gemm.quantize(_w(), bits=4.0), "quantize: bits"),
    "quantize_group": (lambda: cute_gemm.quantize(_w(), group_size=128.0), "quantize: group_size"),
    "quantize_bits_str": (lambda: cute_gemm.quantize(_w(), bits="4"), "quantize: bits"),
    "pack_bits": (lambda: cute_gemm.pack_weight(torch.zeros(8, 32, dtype=torch.int32), 4.0),
                  "pack_weight: bits"),
    "unpack_bits": (lambda: cute_gemm.unpack_weight(cute_gemm.quantize(_w(), 4, 32).packed, 8.0,
                                                    128), "unpack_weight: bits"),
    "layer_bits": (lambda: QuantLinear(128, 16, bits=4.0), "QuantLinear: bits"),
    "layer_group": (lambda: QuantLinear(128, 16, group_size=32.0), "QuantLinear: group_size"),
    "from_linear_bits": (lambda: QuantLinear.from_linear(torch.nn.Linear(128, 16), bits=8.0),
                         "QuantLinear: bits"),
    "quantize_model_group": (
        lambda: cute_gemm.quantize_model(torch.nn.Sequential(torch.nn.Linear(128, 16)),
                                         group_size=64.0, progress=False),
        "quantize_model: group_size"),
    "quantized_weight_bits": (
        lambda: cute_gemm.QuantizedWeight(*_parts(), bits=4.0, group_size=32, shape=(16, 128)),
        "QuantizedWeight: bits"),
    "quantized_weight_shape": (
        lambda: cute_gemm.QuantizedWeight(*_parts(), bits=4, group_size=32, shape=(16.5, 128)),
        "QuantizedWeight: shape must be two ints"),
    "format_tag": (lambda: format_tag(4, 128.0, True), "format_tag: group_size"),
}


def _parts():
    qw = cute_gemm.quantize(_w(), 4, 32)
    return qw.packed, qw.scales, qw.zeros


@pytest.mark.parametrize("case", list(NON_INTEGER))
def test_non_integer_settings_are_type_errors(case):
    # 4.0 == 4, so `bits in (4, 8)` accepted floats, which then failed in `1 << bits` or made a
    # shape of floats, far from the call; (16.5, 128) was truncated to (16, 128).
    call, prefix = NON_INTEGER[case]
    with pytest.raises(TypeError, match=prefix):
        call()


def test_numpy_integers_are_ints():
    np = pytest.importorskip("numpy")
    qw = cute_gemm.quantize(_w(), bits=np.int64(8), group_size=np.int32(64))
    assert qw.bits == 8 and type(qw.bits) is int and qw.group_size == 64


# ------------------------------------------------------------------------- all or nothing


def test_quantize_model_failure_leaves_the_model_as_it_was():
    # A non-finite weight in the third layer: the first two used to stay converted.
    model = torch.nn.Sequential(*[torch.nn.Linear(128, 128) for _ in range(4)]).half()
    with torch.no_grad():
        model[2].weight[5, 7] = float("nan")
    modules = dict(model.named_modules())
    state = {k: v.clone() for k, v in model.state_dict().items()}
    with pytest.raises(ValueError, match=r"quantize_model: layer '2': quantize: weight must be "
                                         r"finite; got 1 NaN/inf value"):
        cute_gemm.quantize_model(model, progress=False)
    assert dict(model.named_modules()) == modules
    assert all(isinstance(m, torch.nn.Linear) for m in model)
    for k, v in model.state_dict().items():
        torch.testing.assert_close(v, state[k], rtol=0, atol=0, equal_nan=True)


# ------------------------------------------------------------------------- fp32 as a drop-in


@pytest.mark.parametrize("compute", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("in_dtype", [torch.float32, torch.float64, torch.float16,
                                      torch.bfloat16])
def test_layer_takes_any_floating_input(in_dtype, compute):
    layer = _layer(128, 24, dtype=compute, seed=15)
    x = _randn(2, 5, 128, dtype=in_dtype, seed=16)
    out = layer(x)
    assert out.dtype == in_dtype and out.shape == (2, 5, 24)
    # The contract: computed in the compute dtype, exactly as a compute-dtype input would be.
    assert torch.equal(out, layer(x.to(compute)).to(in_dtype))


def test_fp32_input_gradient():
    layer = _layer(128, 24, dtype=torch.bfloat16, seed=17)
    x = _randn(4, 128, seed=18).requires_grad_()
    layer(x).sum().backward()
    assert x.grad.dtype == torch.float32
    w = layer.quantized_weight.dequantize().float()
    torch.testing.assert_close(x.grad, w.sum(0).expand(4, -1), rtol=1e-2, atol=1e-2)


class _TwinLinear(torch.nn.Module):
    """What a converted layer computes, written with torch ops: the input rounded to the compute
    dtype, the weight dequantized to it, fp32 sums, the output rounded to it, cast back."""

    def __init__(self, layer):
        super().__init__()
        self.compute = layer.scales.dtype
        self.weight = layer.quantized_weight.dequantize().float()
        self.bias = None if layer.bias is None else layer.bias.float()

    def forward(self, x):
        y = x.to(self.compute).float() @ self.weight.t()
        if self.bias is not None:
            y = y + self.bias
        return y.to(self.compute).to(x.dtype)


def _fp32_llama():
    """A tiny random-weight fp32 transformers Llama (nothing downloaded)."""
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(
        hidden_size=256, intermediate_size=512, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, vocab_size=500, max_position_embeddings=64,
        tie_word_embeddings=False)
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(config).eval()


def _twin(model):
    """A copy of a converted model with every QuantLinear replaced by its _TwinLinear."""
    twin = copy.deepcopy(model)
    for module in list(twin.modules()):
        for attr, child in list(module.named_children()):
            if isinstance(child, QuantLinear):
                setattr(module, attr, _TwinLinear(child))
    return twin


def test_fp32_transformers_model_generates_like_its_dequantized_twin():
    model = _fp32_llama()
    summary = cute_gemm.quantize_model(model, progress=False)
    assert len(summary.converted) == 14 and list(summary.skipped) == ["lm_head"]
    twin = _twin(model)
    ids = torch.randint(0, 500, (2, 6), generator=_gen(19))
    with torch.no_grad():
        logits = model(ids).logits
        twin_logits = twin(ids).logits
        assert logits.dtype == torch.float32
        torch.testing.assert_close(logits, twin_logits, rtol=1e-4, atol=1e-4)
        kwargs = dict(max_new_tokens=8, do_sample=False, pad_token_id=0)
        out = model.generate(ids, **kwargs)
        assert torch.equal(out, twin.generate(ids, **kwargs))
    assert out.shape == (2, 14)


@pytest.mark.gpu
def test_fp32_transformers_model_on_gpu():
    model = _fp32_llama().cuda()
    cute_gemm.quantize_model(model, progress=False)
    twin = _twin(model)
    ids = torch.randint(0, 500, (2, 6), generator=_gen(20)).cuda()
    with torch.no_grad():
        logits = model(ids).logits
        ref = twin(ids).logits
    assert logits.dtype == torch.float32 and torch.isfinite(logits).all()
    # The kernel rounds differently from the twin's fp32 sums (bf16 outputs per layer): a few
    # bf16 ulps per layer through two blocks.
    rel = float((logits - ref).norm() / ref.norm())
    assert rel < 2e-2, rel
    out = model.generate(ids, max_new_tokens=8, do_sample=False, pad_token_id=0)
    assert out.shape == (2, 14)


def test_assign_load_gives_kernel_ready_buffers():
    # load_state_dict(assign=True) keeps the given tensors: views at 8-byte offsets (as in a
    # safetensors memory map) or non-contiguous ones must not reach the kernel as they are.
    src = _layer(128, 16, symmetric=False, seed=21)
    state = dict(src.state_dict())
    for name in ("qweight", "scales", "zeros"):
        # one element past a (16-byte aligned) fresh allocation: 4- or 2-byte aligned only
        t = state[name]
        state[name] = torch.empty(t.numel() + 1, dtype=t.dtype)[1:].view(t.shape).copy_(t)
    state["bias"] = torch.stack([state["bias"], state["bias"]], 1)[:, 0]  # non-contiguous
    assert state["qweight"].data_ptr() % 16 != 0 and state["scales"].data_ptr() % 16 != 0
    assert not state["bias"].is_contiguous()
    dst = QuantLinear(128, 16, group_size=32, symmetric=False, device="meta")
    dst.load_state_dict(state, assign=True)
    for name in ("qweight", "scales", "zeros", "bias"):
        t = getattr(dst, name)
        assert t.is_contiguous() and t.data_ptr() % 16 == 0, name
        assert torch.equal(t, src.state_dict()[name])
    x = _randn(3, 128, dtype=torch.float16, seed=22)
    assert torch.equal(dst(x), src(x))
