"""cute_gemm.nn.QuantLinear: outputs against cute_gemm.mixed_gemm and an fp32 matmul on the
dequantized weight, the quantization error against the original nn.Linear, leading dims, the
input permutation, argument checks, dtype/device moves, state_dict round trips (torch.save and
safetensors), autograd (to the input only), torch.compile and opcheck; on a GPU the same checks
plus a CUDA graph replay."""

import io

import pytest
import torch
from helpers import DTYPE_IDS, DTYPES, MIXED_CONFIGS, assert_accurate, capture_graph
from helpers import mixed_config_id

import cute_gemm
from cute_gemm import QuantLinear

# K per group size: awkward sizes (INT4 pads 160 and 192 to 256; 384 is three INT4 blocks).
K_FOR_GROUP = {32: 160, 64: 192, 128: 384, -1: 96}


def _gen(seed):
    return torch.Generator().manual_seed(seed)


def _randn(*shape, dtype=torch.float16, seed=0, scale=1.0):
    return (torch.randn(*shape, generator=_gen(seed)) * scale).to(dtype)


def _linear(k, n, dtype=torch.float16, bias=True, seed=0):
    linear = torch.nn.Linear(k, n, bias=bias)
    with torch.no_grad():
        linear.weight.copy_(_randn(n, k, dtype=torch.float32, seed=seed, scale=0.1))
        if bias:
            linear.bias.copy_(_randn(n, dtype=torch.float32, seed=seed + 1))
    return linear.to(dtype)


def _layer(k=128, n=24, dtype=torch.float16, bias=True, bits=4, group=32, symmetric=True,
           seed=0):
    return QuantLinear.from_linear(_linear(k, n, dtype, bias, seed), bits=bits,
                                   group_size=group, symmetric=symmetric)


def _reference(x, layer):
    """fp32 matmul on the dequantized weight, in the permuted K order when there is one."""
    if layer.input_perm is not None:
        x = x[..., layer.input_perm]
    out = torch.matmul(x.float(), layer.quantized_weight.dequantize().float().t())
    if layer.bias is not None:
        out = out + layer.bias.float()
    return out


def _assert_matches_reference(out, x, layer):
    ref = _reference(x, layer)
    assert out.shape == ref.shape and out.dtype == x.dtype
    # The CPU op is the same fp32 matmul plus one rounding: within an ulp of the fp32 result.
    eps = torch.finfo(x.dtype).eps
    torch.testing.assert_close(out.float(), ref, rtol=eps, atol=eps)


def _quantization_error_bound(x, layer, ref, out):
    """Elementwise bound on |layer(x) - x @ W.T| for the W the layer was quantized from:
    sum_k |x_k| |W - Wq|[n, k] plus roundings, with |W - Wq| <= s/2 (half a quantization step of
    the element's group) + one rounding of Wq to the half dtype."""
    eps = torch.finfo(x.dtype).eps
    g = layer.in_features if layer.group_size == -1 else layer.group_size
    wq = layer.quantized_weight.dequantize().float()
    step = layer.scales.float().t().repeat_interleave(g, dim=1)  # [N, K]
    w_err = step / 2 + eps * wq.abs()
    if layer.input_perm is not None:
        x = x[..., layer.input_perm]
    return x.float().abs() @ w_err.t() + eps * (ref.abs() + out.abs()) + 1e-6


# ------------------------------------------------------------------------------------ numerics


@pytest.mark.parametrize("with_bias", [True, False], ids=["bias", "nobias"])
@pytest.mark.parametrize("bits,group,symmetric,dtype",
                         [pytest.param(*c, id=mixed_config_id(*c)) for c in MIXED_CONFIGS])
def test_forward_matches_mixed_gemm_and_matmul(bits, group, symmetric, dtype, with_bias):
    k, n = K_FOR_GROUP[group], 40
    seed = hash((bits, group, symmetric, with_bias)) % 10000
    layer = _layer(k, n, dtype, with_bias, bits, group, symmetric, seed)
    assert (layer.bits, layer.group_size, layer.symmetric) == (bits, group, symmetric)
    assert layer.scales.dtype == dtype and (layer.zeros is None) == symmetric
    x = _randn(3, 5, k, dtype=dtype, seed=seed + 7)
    out = layer(x)
    assert out.shape == (3, 5, n)
    assert torch.equal(out, cute_gemm.mixed_gemm(x, layer.quantized_weight, layer.bias))
    _assert_matches_reference(out, x, layer)


@pytest.mark.parametrize("bits", [4, 8])
@pytest.mark.parametrize("symmetric", [True, False], ids=["sym", "asym"])
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_from_linear_error_bound(dtype, symmetric, bits):
    # |y_quant - y| <= sum_k |x_k| |W - Wq|[n, k] + roundings, with |W - Wq| <= s/2 (the
    # quantization step) + one rounding of Wq to the half dtype: a bound from the scales, not a
    # hard-coded tolerance. It must also be tight enough to fail for a wrong weight.
    k, n, group = 256, 24, 64
    linear = _linear(k, n, dtype, True, seed=bits + 10 * symmetric)
    layer = QuantLinear.from_linear(linear, bits=bits, group_size=group, symmetric=symmetric)
    x = _randn(7, k, dtype=dtype, seed=3)
    ref = torch.nn.functional.linear(x.float(), linear.weight.float(), linear.bias.float())
    out = layer(x).float()
    bound = _quantization_error_bound(x, layer, ref, out)
    assert ((out - ref).abs() <= bound).all()
    # The bound is not vacuous: the layer's error is a sizeable fraction of it...
    assert (out - ref).abs().max() > 0.05 * bound.max()
    # ...and a layer built from a different linear breaks it.
    other = QuantLinear.from_linear(_linear(k, n, dtype, True, seed=99), bits=bits,
                                    group_size=group, symmetric=symmetric)
    assert not ((other(x).float() - ref).abs() <= bound).all()


@pytest.mark.parametrize("lead", [(), (0,), (2, 0), (1, 1, 1), (4,), (2, 3)],
                         ids=lambda s: "x".join(map(str, s)) or "vector")
def test_leading_dims(lead):
    layer = _layer(128, 16, torch.bfloat16, group=64, seed=4)
    x = _randn(*lead, 128, dtype=torch.bfloat16, seed=5)
    out = layer(x)
    assert out.shape == (*lead, 16) and out.dtype == torch.bfloat16
    if x.numel():
        _assert_matches_reference(out, x, layer)
        assert torch.equal(out.reshape(-1, 16), layer(x.reshape(-1, 128)))


def test_noncontiguous_and_misaligned_inputs_are_copied():
    # nn.Linear takes any strides; so does the layer (the kernel needs contiguous, aligned rows).
    layer = _layer(128, 16, seed=6)
    wide = _randn(6, 256, seed=7)
    for x in (wide[:, 64:192], _randn(128, 6, seed=8).t(), _randn(4 * 128 + 1, seed=9)[1:]
              .view(4, 128)):
        out = layer(x)
        assert torch.equal(out, layer(x.clone().contiguous()))
        _assert_matches_reference(out, x, layer)


def test_input_perm():
    k, n = 256, 24
    linear = _linear(k, n, seed=10)
    perm = torch.randperm(k, generator=_gen(11))
    # The weight's K rows stored permuted (act-order): layer(x) = x[..., perm] @ Wq_perm.T.
    qw = cute_gemm.quantize(linear.weight.detach()[:, perm], bits=4, group_size=128)
    layer = QuantLinear.from_quantized(qw, bias=linear.bias.detach(), input_perm=perm.int())
    assert layer.input_perm.dtype == torch.int64 and torch.equal(layer.input_perm, perm)
    x = _randn(2, 3, k, seed=12)
    out = layer(x)
    assert torch.equal(out, cute_gemm.mixed_gemm(x[..., perm], qw, layer.bias))
    _assert_matches_reference(out, x, layer)
    # Same function as the unpermuted linear, up to the quantization error.
    plain = QuantLinear.from_linear(linear, bits=4, group_size=128)
    assert not torch.equal(out, plain(x))
    ref = torch.nn.functional.linear(x.float(), linear.weight.float(), linear.bias.float())
    assert ((out.float() - ref).abs() <= _quantization_error_bound(x, layer, ref, out)).all()
    # Without the permutation the same weights compute something else entirely.
    layer.input_perm = None
    assert not ((layer(x).float() - ref).abs() <= _quantization_error_bound(
        x, layer, ref, layer(x).float())).all()
    layer.input_perm = perm
    assert "input_perm=True" in repr(layer)


def test_from_quantized_uses_the_tensors():
    qw = cute_gemm.quantize(_randn(16, 64, seed=13), bits=8, group_size=32, symmetric=False)
    layer = QuantLinear.from_quantized(qw)
    assert layer.qweight is qw.packed and layer.scales is qw.scales and layer.zeros is qw.zeros
    assert layer.bias is None and layer.input_perm is None
    view = layer.quantized_weight
    assert view.packed is layer.qweight and view.shape == (16, 64) and view.bits == 8
    bias = _randn(16, dtype=torch.float32, seed=14)
    with_bias = QuantLinear.from_quantized(qw, bias=bias)
    assert with_bias.bias.dtype == torch.float16 and torch.equal(with_bias.bias, bias.half())


def test_from_linear_dtype_rule():
    # fp16/bf16 linears keep their dtype; fp32 ones compute in bf16 (quantized from fp32
    # values; DEFAULT_FP32_COMPUTE_DTYPE); dtype= overrides. The bias follows.
    for src, want in [(torch.float16, torch.float16), (torch.bfloat16, torch.bfloat16),
                      (torch.float32, torch.bfloat16)]:
        layer = QuantLinear.from_linear(_linear(64, 8, src, seed=15), group_size=32)
        assert layer.scales.dtype == want and layer.bias.dtype == want
    linear32 = _linear(64, 8, torch.float32, seed=16)
    layer = QuantLinear.from_linear(linear32, group_size=32, dtype=torch.float16)
    assert layer.scales.dtype == torch.float16 and layer.bias.dtype == torch.float16
    want = cute_gemm.quantize(linear32.weight.detach(), 4, 32, dtype=torch.float16)
    assert torch.equal(layer.qweight, want.packed) and torch.equal(layer.scales, want.scales)
    layer = QuantLinear.from_linear(linear32.eval(), group_size=32)
    assert not layer.training


def test_empty_layer_buffers():
    layer = QuantLinear(192, 24, bias=True, bits=8, group_size=64, symmetric=False,
                        dtype=torch.bfloat16)
    assert layer.qweight.shape == cute_gemm.quant.packed_shape(24, 192, 8)
    assert layer.qweight.dtype == torch.int32
    assert layer.scales.shape == (3, 24) and layer.zeros.shape == (3, 24)
    assert layer.scales.dtype == layer.zeros.dtype == layer.bias.dtype == torch.bfloat16
    assert set(layer.state_dict()) == {"qweight", "scales", "zeros", "bias", "qformat"}
    pc = QuantLinear(96, 8, bias=False, group_size=-1)
    assert pc.scales.shape == (1, 8) and pc.zeros is None and pc.bias is None
    assert set(pc.state_dict()) == {"qweight", "scales", "qformat"}
    meta = QuantLinear(128, 16, device="meta")
    assert meta.qweight.device.type == "meta"


# ------------------------------------------------------------------------------------ checks


@pytest.mark.parametrize("kwargs,exc,pattern", [
    (dict(out_features=20), ValueError, r"out_features=20 is not a multiple of 8"),
    (dict(in_features=100), ValueError, r"in_features=100 is not a multiple of group_size=32"),
    (dict(in_features=80, group_size=-1), ValueError, r"in_features=80 is not a multiple of 32"),
    (dict(in_features=0), ValueError, r"in_features must be >= 1; got in_features=0"),
    (dict(in_features=128.0), TypeError, r"in_features must be an int; got float"),
    (dict(out_features=True), TypeError, r"out_features must be an int; got bool"),
    (dict(bits=3), ValueError, r"bits must be 4 or 8; got bits=3"),
    (dict(group_size=16), ValueError, r"group_size must be one of 32, 64, 128 or -1"),
    (dict(dtype=torch.float32), ValueError, r"dtype must be torch.float16 or torch.bfloat16 "
                                            r"\(.*\); got torch.float32"),
    (dict(bias="yes"), TypeError, r"bias must be a bool"),
    (dict(symmetric=1), TypeError, r"symmetric must be a bool; got int"),
])
def test_constructor_errors(kwargs, exc, pattern):
    args = dict(in_features=128, out_features=16, group_size=32)
    args.update(kwargs)
    with pytest.raises(exc, match=r"QuantLinear: .*" + pattern):
        QuantLinear(**args)


def test_builder_errors():
    with pytest.raises(TypeError, match=r"from_linear: linear must be a torch.nn.Linear; got "
                                        r"Conv1d"):
        QuantLinear.from_linear(torch.nn.Conv1d(8, 8, 1))
    with pytest.raises(ValueError, match=r"out_features=12 is not a multiple of 8"):
        QuantLinear.from_linear(torch.nn.Linear(128, 12))
    with pytest.raises(ValueError, match=r"in_features=96 is not a multiple of group_size=64"):
        QuantLinear.from_linear(torch.nn.Linear(96, 16), group_size=64)
    with pytest.raises(ValueError, match=r"meta device"):
        QuantLinear.from_linear(torch.nn.Linear(128, 16, device="meta"))
    with pytest.raises(ValueError, match=r"dtype must be torch.float16 or torch.bfloat16"):
        QuantLinear.from_linear(torch.nn.Linear(128, 16), dtype=torch.float64)
    qw = cute_gemm.quantize(_randn(16, 128, seed=17), group_size=64)
    with pytest.raises(TypeError, match=r"from_quantized: qw must be a "
                                        r"cute_gemm.QuantizedWeight; got Tensor"):
        QuantLinear.from_quantized(qw.dequantize())
    with pytest.raises(ValueError, match=r"bias must have shape \[N\] = \[16\]; got \[8\]"):
        QuantLinear.from_quantized(qw, bias=_randn(8))
    with pytest.raises(TypeError, match=r"bias must be None or a floating-point torch.Tensor; "
                                        r"got a torch.int64 tensor"):
        QuantLinear.from_quantized(qw, bias=torch.arange(16))
    with pytest.raises(ValueError, match=r"input_perm must have shape \[K\] = \[128\]; got "
                                         r"\[64\]"):
        QuantLinear.from_quantized(qw, input_perm=torch.arange(64))
    with pytest.raises(ValueError, match=r"input_perm must be a permutation of 0..127"):
        QuantLinear.from_quantized(qw, input_perm=torch.arange(128) // 2)
    with pytest.raises(TypeError, match=r"input_perm must be an integer torch.Tensor; "
                                        r"got a torch.float32 tensor"):
        QuantLinear.from_quantized(qw, input_perm=torch.arange(128.0))


def test_forward_errors():
    layer = _layer(128, 16, torch.float16, seed=18)
    with pytest.raises(ValueError, match=r"QuantLinear: input must have shape \[\.\.\., "
                                         r"in_features\] with in_features=128; got \[4, 64\]"):
        layer(_randn(4, 64))
    with pytest.raises(ValueError, match=r"got \[\]"):
        layer(torch.tensor(1.0, dtype=torch.float16))
    with pytest.raises(TypeError, match=r"QuantLinear: input must be a floating-point tensor "
                                        r"\(fp16, bf16, fp32 or fp64; computed in the layer's "
                                        r"torch.float16\); got torch.int32"):
        layer(torch.ones(4, 128, dtype=torch.int32))
    with pytest.raises(ValueError, match=r"QuantLinear: input must be on the layer's device cpu; "
                                         r"got meta"):
        layer(torch.empty(4, 128, dtype=torch.float16, device="meta"))
    with pytest.raises(TypeError, match=r"QuantLinear: input must be a torch.Tensor; got list"):
        layer([1.0] * 128)


def test_extra_repr():
    text = repr(_layer(128, 16, torch.bfloat16, bias=False, bits=8, group=64, symmetric=False))
    assert text == ("QuantLinear(in_features=128, out_features=16, bias=False, bits=8, "
                    "group_size=64, symmetric=False, dtype=torch.bfloat16)")
    pc = QuantLinear(96, 8, group_size=-1)
    assert "in_features=96, out_features=8, bias=True, bits=4, group_size=per-channel, " \
           "symmetric=True, dtype=torch.float16" in repr(pc)


# ------------------------------------------------------------------------- dtype and device


def test_half_and_bfloat16_convert_the_metadata():
    layer = _layer(128, 16, torch.bfloat16, bits=8, group=32, symmetric=False, seed=19)
    packed, scales, zeros, bias = (t.clone() for t in (layer.qweight, layer.scales, layer.zeros,
                                                       layer.bias))
    assert layer.half() is layer
    assert layer.qweight.dtype == torch.int32 and torch.equal(layer.qweight, packed)
    for name, before in (("scales", scales), ("zeros", zeros), ("bias", bias)):
        after = getattr(layer, name)
        assert after.dtype == torch.float16 and torch.equal(after, before.half())
    x = _randn(3, 128, dtype=torch.float16, seed=20)
    _assert_matches_reference(layer(x), x, layer)
    layer.bfloat16()
    assert layer.scales.dtype == layer.zeros.dtype == layer.bias.dtype == torch.bfloat16
    layer.to(torch.float16)
    assert layer.scales.dtype == torch.float16


@pytest.mark.parametrize("convert", [lambda m: m.float(), lambda m: m.double(),
                                     lambda m: m.to(torch.float32),
                                     lambda m: m.to("cpu", torch.float64)],
                         ids=["float", "double", "to_float32", "to_cpu_float64"])
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_float_and_double_keep_half_precision(dtype, convert):
    # The documented rule: the layer never leaves its half dtype (it has no fp32 path), so
    # converting a whole model converts the other layers and leaves this one working.
    layer = _layer(128, 16, dtype, bits=4, group=64, symmetric=False, seed=21)
    x = _randn(2, 128, dtype=dtype, seed=22)
    before = layer(x)
    model = torch.nn.Sequential(torch.nn.Linear(32, 128).to(dtype), layer)
    convert(model)
    assert model[0].weight.dtype in (torch.float32, torch.float64)
    assert layer.scales.dtype == layer.zeros.dtype == layer.bias.dtype == dtype
    assert layer.qweight.dtype == torch.int32
    assert torch.equal(layer(x), before)


def test_device_move_keeps_dtypes():
    layer = _layer(128, 16, torch.bfloat16, bits=4, group=32, symmetric=False, seed=23)
    layer.input_perm = torch.randperm(128, generator=_gen(24))
    layer.to("meta")
    for name in ("qweight", "scales", "zeros", "bias", "input_perm"):
        assert getattr(layer, name).device.type == "meta"
    assert layer.qweight.dtype == torch.int32 and layer.input_perm.dtype == torch.int64
    assert layer.scales.dtype == torch.bfloat16


# ------------------------------------------------------------------------------ state_dict


def _torch_roundtrip(state):
    buf = io.BytesIO()
    torch.save(state, buf)
    buf.seek(0)
    return torch.load(buf, weights_only=True)


def _safetensors_roundtrip(state, tmp_path):
    from safetensors.torch import load_file, save_file

    path = tmp_path / "layer.safetensors"
    save_file({k: v.contiguous() for k, v in state.items()}, str(path))
    return load_file(str(path))


@pytest.mark.parametrize("fmt", ["torch", "safetensors"])
@pytest.mark.parametrize("bits,group,symmetric,bias,dtype", [
    (4, 128, True, True, torch.float16), (8, 32, False, False, torch.bfloat16),
    (4, -1, False, True, torch.bfloat16), (8, 64, True, True, torch.float16)])
def test_state_dict_roundtrip(bits, group, symmetric, bias, dtype, fmt, tmp_path):
    pytest.importorskip("safetensors")
    k, n = (96 if group == -1 else 256), 24
    layer = _layer(k, n, dtype, bias, bits, group, symmetric, seed=25)
    state = layer.state_dict()
    expected = {"qweight", "scales", "qformat"} | ({"bias"} if bias else set()) | \
        (set() if symmetric else {"zeros"})
    assert set(state) == expected
    loaded = _torch_roundtrip(state) if fmt == "torch" else _safetensors_roundtrip(state, tmp_path)
    fresh = QuantLinear(k, n, bias=bias, bits=bits, group_size=group, symmetric=symmetric,
                        dtype=dtype)
    x = _randn(5, k, dtype=dtype, seed=26)
    assert not torch.equal(fresh(x), layer(x))  # the empty layer computes something else
    fresh.load_state_dict(loaded)
    assert torch.equal(fresh(x), layer(x))


def test_state_dict_with_input_perm(tmp_path):
    pytest.importorskip("safetensors")
    k, n = 128, 16
    perm = torch.randperm(k, generator=_gen(27))
    qw = cute_gemm.quantize(_randn(n, k, seed=28, scale=0.1), bits=4, group_size=32)
    layer = QuantLinear.from_quantized(qw, bias=_randn(n, seed=29), input_perm=perm)
    assert set(layer.state_dict()) == {"qweight", "scales", "bias", "input_perm", "qformat"}
    x = _randn(3, k, seed=30)
    for loaded in (_torch_roundtrip(layer.state_dict()),
                   _safetensors_roundtrip(layer.state_dict(), tmp_path)):
        fresh = QuantLinear(k, n, group_size=32)  # no input_perm: the load creates it
        fresh.load_state_dict(loaded)
        assert torch.equal(fresh.input_perm, perm) and torch.equal(fresh(x), layer(x))


def test_load_state_dict_mismatches():
    asym = _layer(128, 16, torch.float16, group=32, symmetric=False, seed=31)
    with pytest.raises(RuntimeError, match=r"the checkpoint's layer is asymmetric but this layer "
                                           r"is symmetric; build it with symmetric=False"):
        QuantLinear(128, 16, group_size=32).load_state_dict(asym.state_dict())
    with pytest.raises(RuntimeError, match=r"the checkpoint's layer is symmetric but this layer "
                                           r"is asymmetric"):
        QuantLinear(128, 16, group_size=32, symmetric=False).load_state_dict(
            _layer(128, 16, group=32, seed=32).state_dict())
    with pytest.raises(RuntimeError, match=r"scales in the checkpoint is torch.float16 but this "
                                           r"layer's is torch.bfloat16"):
        QuantLinear(128, 16, group_size=32, symmetric=False,
                    dtype=torch.bfloat16).load_state_dict(asym.state_dict())
    with pytest.raises(RuntimeError, match=r"'qformat' does not match this layer: the buffer was "
                                           r"packed for bits=4, group_size=32, symmetric=False, "
                                           r"not bits=4, group_size=64"):
        QuantLinear(128, 16, group_size=64, symmetric=False).load_state_dict(asym.state_dict())
    with pytest.raises(RuntimeError, match=r"qweight must be an int32 tensor of shape \[2, 2, 32, "
                                           r"4\] \(the packed 8-bit weight\); got a torch.int32 "
                                           r"tensor of shape \[2, 1, 32, 4\]"):
        QuantLinear(128, 16, bits=8, group_size=32, symmetric=False).load_state_dict(
            asym.state_dict())


# -------------------------------------------------------------------------------- autograd


@pytest.mark.parametrize("with_perm", [False, True], ids=["plain", "perm"])
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_gradient_flows_to_input(dtype, with_perm):
    k, n = 128, 24
    qw = cute_gemm.quantize(_randn(n, k, dtype=dtype, seed=33, scale=0.1), 8, 64)
    perm = torch.randperm(k, generator=_gen(34)) if with_perm else None
    layer = QuantLinear.from_quantized(qw, bias=_randn(n, dtype=dtype, seed=35), input_perm=perm)
    x = _randn(2, 3, k, dtype=dtype, seed=36).requires_grad_()
    grad_out = _randn(2, 3, n, dtype=dtype, seed=37)
    layer(x).backward(grad_out)
    w = qw.dequantize().double()  # [N, K] in the permuted K order
    ref = grad_out.double() @ w
    if perm is not None:
        ref = torch.zeros_like(ref).index_copy_(-1, perm, ref)  # scatter back to x's order
    assert_accurate(x.grad.reshape(-1, k), ref.reshape(-1, k), dtype, n)
    assert layer.bias.grad is None  # the bias is frozen unless asked for


def test_lora_style_adapter_trains_on_top():
    k, n, r = 128, 16, 4
    base = _layer(k, n, torch.float16, seed=38)
    frozen = {name: t.clone() for name, t in base.state_dict().items()}
    down = torch.nn.Linear(k, r, bias=False).half()
    up = torch.nn.Linear(r, n, bias=False).half()
    torch.nn.init.normal_(up.weight, std=0.1)
    opt = torch.optim.SGD(list(down.parameters()) + list(up.parameters()), lr=0.5)
    x = _randn(8, k, seed=39)
    target = _randn(8, n, seed=40)

    def loss():
        return (base(x) + up(down(x)) - target).float().pow(2).mean()

    first = loss()
    first.backward()
    assert down.weight.grad is not None and down.weight.grad.abs().sum() > 0
    opt.step()
    assert loss() < first
    for name, t in base.state_dict().items():
        assert torch.equal(t, frozen[name])


def test_training_the_weight_fails_clearly():
    layer = _layer(128, 16, seed=41)
    assert list(layer.parameters()) == []
    assert not hasattr(layer, "weight")
    with pytest.raises(AttributeError, match=r"QuantLinear has no 'weight': the weight is stored "
                                             r"quantized \(4-bit.*quantized_weight.dequantize"):
        layer.weight
    with pytest.raises(AttributeError, match=r"cannot set 'weight'"):
        layer.weight = torch.nn.Parameter(torch.randn(16, 128))
    with pytest.raises(RuntimeError, match=r"QuantLinear: the quantized layer has no trainable "
                                           r"parameters"):
        layer.requires_grad_()
    assert layer.requires_grad_(False) is layer
    with pytest.raises(RuntimeError, match=r"only Tensors of floating point"):
        layer.qweight.requires_grad_()
    x = _randn(3, 128, seed=42)
    layer.scales.requires_grad_()
    with pytest.raises(RuntimeError, match=r"QuantLinear: scales/zeros require grad, but the "
                                           r"quantized weight cannot be trained"):
        layer(x)
    with torch.no_grad():  # outside of autograd nothing is trained, so it runs
        out = layer(x)
    layer.scales.requires_grad_(False)
    assert torch.equal(out, layer(x))
    # The one opt-in: the bias (a buffer) can be made to take gradients.
    layer.bias.requires_grad_()
    grad_out = _randn(3, 16, seed=43)
    layer(x).backward(grad_out)
    torch.testing.assert_close(layer.bias.grad.float(), grad_out.float().sum(0), rtol=1e-3,
                               atol=1e-3)


def test_no_grad_and_inference_mode():
    layer = _layer(128, 16, torch.bfloat16, group=64, seed=44)
    x = _randn(4, 128, dtype=torch.bfloat16, seed=45)
    out = layer(x)
    with torch.no_grad():
        assert torch.equal(layer(x), out)
    with torch.inference_mode():
        inf = layer(x)
        assert torch.equal(inf, out) and inf.is_inference()
    with torch.inference_mode():
        xi = x.clone()  # an inference tensor as input
        assert torch.equal(layer(xi), out)


# ----------------------------------------------------------------------- torch.compile, opcheck


def _small_model(dtype=torch.float16, device="cpu"):
    model = torch.nn.Sequential(
        torch.nn.Linear(128, 64), torch.nn.GELU(), torch.nn.Linear(64, 32), torch.nn.ReLU(),
        torch.nn.Linear(32, 16)).to(dtype)
    with torch.no_grad():
        for i, m in enumerate(model):
            if isinstance(m, torch.nn.Linear):
                m.weight.copy_(_randn(*m.weight.shape, dtype=dtype, seed=50 + i, scale=0.1))
    model[0] = QuantLinear.from_linear(model[0], bits=4, group_size=32, symmetric=False)
    model[2] = QuantLinear.from_linear(model[2], bits=8, group_size=-1)
    perm = torch.randperm(32, generator=_gen(51))
    qw = cute_gemm.quantize(model[4].weight.detach()[:, perm], bits=4, group_size=32)
    model[4] = QuantLinear.from_quantized(qw, bias=model[4].bias.detach(), input_perm=perm)
    return model.to(device)


def test_torch_compile_fullgraph():
    torch._dynamo.reset()
    model = _small_model()
    compiled = torch.compile(model, fullgraph=True, backend="aot_eager", dynamic=False)
    for seed, lead in enumerate([(4,), (2, 3)]):
        x = _randn(*lead, 128, seed=52 + seed)
        with torch.no_grad():
            assert torch.equal(compiled(x), model(x))
    # Gradients through the compiled graph reach the input.
    x = _randn(3, 128, seed=55).requires_grad_()
    compiled(x).float().sum().backward()
    x_ref = x.detach().clone().requires_grad_()
    model(x_ref).float().sum().backward()
    assert torch.equal(x.grad, x_ref.grad)


class _MixedGemmSchedules(torch.utils._python_dispatch.TorchDispatchMode):
    """Records the schedule argument of every cute_gemm::mixed_gemm call, by rows of a."""

    def __init__(self):
        super().__init__()
        self.seen = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func is torch.ops.cute_gemm.mixed_gemm.default:
            # (The dispatcher drops trailing arguments that equal their defaults.)
            schedule = args[8] if len(args) > 8 else (kwargs or {}).get("schedule")
            self.seen.append((args[0].shape[0], schedule))
        return func(*args, **(kwargs or {}))


def test_set_schedule_pins_the_plan_per_row_count():
    layer = _layer(128, 24, torch.bfloat16, seed=80)
    plain = {m: layer(_randn(m, 128, dtype=torch.bfloat16, seed=81 + m)) for m in (1, 3)}
    assert layer.set_schedule(1, "kernel=decode,warps=4") is layer
    layer.set_schedule(3, {"kernel": "decode", "col_warps": 2})
    assert dict(layer.schedules) == {1: "kernel=decode,warps=4", 3: "kernel=decode,col_warps=2"}
    with pytest.raises(TypeError):
        layer.schedules[2] = "kernel=mma"  # a read-only view
    assert "schedules={1: 'kernel=decode,warps=4'" in repr(layer)
    with _MixedGemmSchedules() as mode:
        for m in (1, 2, 3):
            out = layer(_randn(m, 128, dtype=torch.bfloat16, seed=81 + m))
            if m in plain:
                assert torch.equal(out, plain[m])  # the CPU op computes the same either way
    assert mode.seen == [(1, "kernel=decode,warps=4"), (2, None), (3, "kernel=decode,col_warps=2")]
    # Not part of the saved state; None removes a pin.
    assert set(layer.state_dict()) == set(_layer(128, 24, torch.bfloat16).state_dict())
    layer.set_schedule(3, None).set_schedule(5, None)
    assert dict(layer.schedules) == {1: "kernel=decode,warps=4"}


def test_set_schedule_errors():
    layer = _layer(128, 24)
    for m in (0, -1, True, 1.0, "1", None):
        with pytest.raises(TypeError, match="QuantLinear.set_schedule: m must be a positive int"):
            layer.set_schedule(m, "kernel=decode")
    with pytest.raises(ValueError, match=r"QuantLinear.set_schedule: schedule: warps"):
        layer.set_schedule(1, "warps=x")
    with pytest.raises(ValueError, match="QuantLinear.set_schedule: schedule: unknown key"):
        layer.set_schedule(1, "stages=3")
    with pytest.raises(TypeError, match="QuantLinear.set_schedule: schedule must be None"):
        layer.set_schedule(1, 5)
    with pytest.raises(ValueError, match="makes no choice"):
        layer.set_schedule(1, "")
    assert dict(layer.schedules) == {}


def test_set_schedule_under_torch_compile():
    # Static shapes: the pin is a constant of the graph; dynamic: a guard on the row count. The
    # graph that runs each call (dynamo hands it to the backend) shows the schedule it passes.
    layer = _layer(128, 24, torch.bfloat16, seed=82).set_schedule(2, "kernel=decode,warps=4")
    for dynamic in (False, True):
        torch._dynamo.reset()
        ran = []

        def backend(gm, example_inputs):
            def run(*args):
                ran.append(gm)
                return gm.forward(*args)
            return run

        compiled = torch.compile(layer, fullgraph=True, backend=backend, dynamic=dynamic)
        for m in (1, 2, 3):
            x = _randn(m, 128, dtype=torch.bfloat16, seed=83 + m)
            with torch.no_grad():
                assert torch.equal(compiled(x), layer(x))
            calls = [node for node in ran[-1].graph.nodes
                     if node.target is torch.ops.cute_gemm.mixed_gemm.default]
            assert len(calls) == 1
            args = calls[0].args
            assert (args[8] if len(args) > 8 else calls[0].kwargs.get("schedule")) == (
                "kernel=decode,warps=4" if m == 2 else None), (dynamic, m)


def test_opcheck_with_layer_arguments():
    model = _small_model()
    x = _randn(5, 128, seed=56)
    for layer in (model[0], model[2]):
        args = (x if layer is model[0] else _randn(5, 64, seed=57), layer.qweight, layer.scales,
                layer.zeros, layer.bits, layer.group_size, layer.in_features, layer.bias)
        torch.library.opcheck(torch.ops.cute_gemm.mixed_gemm.default, args)
        grad_args = (args[0].clone().requires_grad_(),) + args[1:]
        torch.library.opcheck(torch.ops.cute_gemm.mixed_gemm.default, grad_args)


# ------------------------------------------------------------------------------------- GPU


@pytest.mark.gpu
@pytest.mark.parametrize("bits,group,symmetric,dtype",
                         [pytest.param(*c, id=mixed_config_id(*c)) for c in MIXED_CONFIGS])
def test_gpu_forward_accuracy(bits, group, symmetric, dtype):
    k, n = K_FOR_GROUP[group] * 4 if group != -1 else 512, 136
    layer = _layer(k, n, dtype, True, bits, group, symmetric, seed=60).cuda()
    assert layer.qweight.is_cuda and layer.qweight.dtype == torch.int32
    for m in (1, 7, 300):  # the fused kernels (M=300: wgmma on Hopper) or the dense path
        x = _randn(m, k, dtype=dtype, seed=61 + m).cuda()
        out = layer(x)
        ref = torch.matmul(x.double(), layer.quantized_weight.dequantize().double().t())
        ref = ref + layer.bias.double()
        assert_accurate(out, ref, dtype, k)
        assert torch.equal(out, cute_gemm.mixed_gemm(x, layer.quantized_weight, layer.bias))


@pytest.mark.gpu
def test_gpu_matches_cpu_layer_and_moves():
    layer = _layer(256, 40, torch.bfloat16, bits=4, group=64, symmetric=False, seed=62)
    x = _randn(2, 5, 256, dtype=torch.bfloat16, seed=63)
    ref = _reference(x, layer).double().reshape(10, 40)
    layer.cuda()
    for name in ("qweight", "scales", "zeros", "bias"):
        assert getattr(layer, name).is_cuda
    gpu_out = layer(x.cuda())
    assert gpu_out.is_cuda
    assert_accurate(gpu_out.reshape(10, 40).cpu(), ref, torch.bfloat16, 256)
    layer.cuda().half()
    assert layer.scales.dtype == torch.float16 and layer.qweight.dtype == torch.int32
    assert layer(x.cuda().half()).dtype == torch.float16
    with pytest.raises(ValueError, match=r"input must be on the layer's device cuda:0; got cpu"):
        layer(x.half())


@pytest.mark.gpu
def test_gpu_state_dict_roundtrip(tmp_path):
    pytest.importorskip("safetensors")
    layer = _layer(256, 24, torch.float16, bits=8, group=128, symmetric=False, seed=64).cuda()
    x = _randn(3, 256, seed=65).cuda()
    loaded = _safetensors_roundtrip(layer.state_dict(), tmp_path)
    fresh = QuantLinear(256, 24, bits=8, group_size=128, symmetric=False, device="cuda")
    fresh.load_state_dict(loaded)
    assert torch.equal(fresh(x), layer(x))


@pytest.mark.gpu
def test_gpu_cuda_graph_replay():
    model = _small_model(torch.float16, "cuda")
    x = _randn(4, 128, seed=66).cuda()
    with torch.no_grad():
        graph, out = capture_graph(lambda: model(x))
        for seed in (67, 68):
            x.copy_(_randn(4, 128, seed=seed).cuda())
            graph.replay()
            torch.cuda.synchronize()
            assert torch.equal(out, model(x))


@pytest.mark.gpu
def test_gpu_torch_compile_inductor():
    torch._dynamo.reset()
    model = _small_model(torch.float16, "cuda")
    compiled = torch.compile(model, fullgraph=True)
    with torch.no_grad():
        for m in (1, 16):
            x = _randn(m, 128, seed=69 + m).cuda()
            out, ref = compiled(x), model(x)
            # Inductor may fuse the elementwise ops (GELU) differently: compare with tolerance.
            torch.testing.assert_close(out, ref, rtol=2e-3, atol=2e-3)


@pytest.mark.gpu
def test_gpu_set_schedule_runs_the_pinned_plan():
    # A pinned plan computes the product as accurately as the planner's; a pin the problem cannot
    # run is refused at the call (kernel=decode above M = 8), not ignored.
    layer = _layer(512, 136, torch.bfloat16, seed=84).cuda()
    for m, schedule in ((1, "kernel=decode,warps=4"), (4, "kernel=decode,warps=8,col_warps=2"),
                        (16, "kernel=mma,splits=2")):
        layer.set_schedule(m, schedule)
        x = _randn(m, 512, dtype=torch.bfloat16, seed=85 + m).cuda()
        ref = torch.matmul(x.double(), layer.quantized_weight.dequantize().double().t())
        assert_accurate(layer(x), ref + layer.bias.double(), torch.bfloat16, 512)
    layer.set_schedule(32, "kernel=decode")
    with pytest.raises(ValueError, match="kernel=decode runs up to M=8"):
        layer(_randn(32, 512, dtype=torch.bfloat16, seed=90).cuda())


@pytest.mark.gpu
def test_gpu_opcheck():
    model = _small_model(torch.float16, "cuda")
    layer = model[0]
    x = _randn(5, 128, seed=72).cuda()
    torch.library.opcheck(torch.ops.cute_gemm.mixed_gemm.default,
                          (x, layer.qweight, layer.scales, layer.zeros, layer.bits,
                           layer.group_size, layer.in_features, layer.bias))


def test_from_quantized_copies_misaligned_tensors():
    # Tensors from a memory-mapped safetensors file can sit at 8-byte offsets; the kernel needs 16.
    qw = cute_gemm.quantize(torch.randn(16, 128, dtype=torch.float16), bits=4, group_size=64,
                            symmetric=False)
    def misaligned(t):
        buf = torch.empty(t.numel() + 8, dtype=t.dtype)
        view = buf[4:4 + t.numel()].view(t.shape)  # 8 bytes in for 2-byte dtypes
        view.copy_(t)
        assert view.data_ptr() % 16 != 0
        return view
    qw2 = cute_gemm.QuantizedWeight(qw.packed, misaligned(qw.scales), misaligned(qw.zeros),
                                    qw.bits, qw.group_size, qw.shape)
    layer = cute_gemm.QuantLinear.from_quantized(qw2, bias=misaligned(torch.randn(16).half()))
    for name in ("scales", "zeros", "bias"):
        assert getattr(layer, name).data_ptr() % 16 == 0, name
    assert torch.equal(layer.scales, qw.scales) and torch.equal(layer.zeros, qw.zeros)
    aligned = cute_gemm.QuantLinear.from_quantized(qw)
    assert aligned.scales.data_ptr() == qw.scales.data_ptr()  # no copy when already fine
