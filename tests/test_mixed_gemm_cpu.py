"""cute_gemm.mixed_gemm on CPU (no GPU needed): the reference kernel against torch.matmul on the
dequantized weight, its bit-exact agreement with cute_gemm.dequantize, the argument checks shared
with the CUDA kernel, the fake kernel, autograd, the op's registration (opcheck) and its schedule
argument (parsed and checked on CPU; the planner's rules are in tests/test_mixed_plan.py)."""

import itertools

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from helpers import DTYPE_IDS, DTYPES, GROUPS, MIXED_CONFIGS, mixed_config_id

import cute_gemm

MIXED = torch.ops.cute_gemm.mixed_gemm.default


def _randn(*shape, dtype=torch.float16, seed=0, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=g) * scale).to(dtype)


def _qweight(n, k, bits, group, symmetric, dtype, seed=0):
    return cute_gemm.quantize(_randn(n, k, dtype=dtype, seed=seed, scale=0.1), bits, group,
                              symmetric)


def _reference(a, qw, bias=None):
    out = torch.matmul(a.float(), qw.dequantize().float().t())
    if bias is not None:
        out = out + bias.float()
    return out


def _call(a, qw, bias=None):
    return MIXED(a, qw.packed, qw.scales, qw.zeros, qw.bits, qw.group_size, qw.shape[1], bias)


def _assert_matches_reference(out, a, qw, bias):
    ref = _reference(a, qw, bias)
    assert out.shape == ref.shape and out.dtype == a.dtype and out.is_contiguous()
    # The CPU kernel is the same fp32 matmul + one rounding: within an ulp of the fp32 reference.
    eps = torch.finfo(a.dtype).eps
    torch.testing.assert_close(out.float(), ref, rtol=eps, atol=eps)


# ------------------------------------------------------------------------------------ numerics

@pytest.mark.parametrize("bits,group,symmetric,dtype",
                         [pytest.param(*c, id=mixed_config_id(*c)) for c in MIXED_CONFIGS])
def test_matches_matmul_on_dequantized(bits, group, symmetric, dtype):
    # Every (M, N, K) of the sweep for this configuration, fresh random inputs each, bias on for
    # every other shape.
    shapes = itertools.product([1, 2, 7, 16, 33], [(8, 128), (24, 256), (136, 384)])
    for i, (m, (n, k)) in enumerate(shapes):
        seed = hash((bits, group, symmetric, m, n, k)) % 100000
        qw = _qweight(n, k, bits, group, symmetric, dtype, seed=seed)
        a = _randn(m, k, dtype=dtype, seed=seed + 1)
        bias = _randn(n, dtype=dtype, seed=seed + 2) if i % 2 else None
        _assert_matches_reference(cute_gemm.mixed_gemm(a, qw, bias), a, qw, bias)


@pytest.mark.parametrize("with_bias", [False, True], ids=["nobias", "bias"])
@pytest.mark.parametrize("bits", [4, 8])
def test_large_k_padding(bits, with_bias):
    # K = 10944 = 85.5 * 128: the INT4 packing pads K to 11008.
    n, k = 8, 10944
    qw = _qweight(n, k, bits, 64, bits == 4, torch.float16, seed=3)
    a = _randn(3, k, seed=4)
    bias = _randn(n, seed=5) if with_bias else None
    _assert_matches_reference(cute_gemm.mixed_gemm(a, qw, bias), a, qw, bias)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("symmetric", [True, False], ids=["sym", "asym"])
@pytest.mark.parametrize("bits", [4, 8])
def test_dequantized_weights_bit_exact(bits, symmetric, dtype):
    # With a = I the output is exactly dequant(W)^T: the C++ unpack/dequantization agrees bit for
    # bit with cute_gemm.dequantize.
    for n, k, group in [(24, 256, 32), (16, 384, 128), (8, 160, -1), (40, 192, 64)]:
        qw = _qweight(n, k, bits, group, symmetric, dtype, seed=n + k)
        eye = torch.eye(k, dtype=dtype)
        assert torch.equal(_call(eye, qw).t(), qw.dequantize())


def test_matches_functional_linear_on_dequantized():
    qw = _qweight(24, 256, 4, 128, True, torch.bfloat16, seed=6)
    a = _randn(9, 256, dtype=torch.bfloat16, seed=7)
    bias = _randn(24, dtype=torch.bfloat16, seed=8)
    ref = torch.nn.functional.linear(a.float(), qw.dequantize().float(), bias.float())
    torch.testing.assert_close(cute_gemm.mixed_gemm(a, qw, bias), ref.to(torch.bfloat16),
                               rtol=0, atol=0)


def test_wrapper_leading_dims():
    qw = _qweight(16, 128, 4, 32, False, torch.float16, seed=9)
    a = _randn(2, 3, 5, 128, seed=10)
    out = cute_gemm.mixed_gemm(a, qw)
    assert out.shape == (2, 3, 5, 16)
    assert torch.equal(out.reshape(30, 16), cute_gemm.mixed_gemm(a.reshape(30, 128), qw))
    vec = cute_gemm.mixed_gemm(a[0, 0, 0], qw)
    assert vec.shape == (16,) and torch.equal(vec, out[0, 0, 0])
    # Leading dims that cannot be flattened as a view are copied by reshape; rows must still be
    # contiguous (as for cute_gemm.gemm): a transposed a is rejected, not silently copied.
    perm = a.permute(1, 0, 2, 3)
    assert torch.equal(cute_gemm.mixed_gemm(perm, qw), out.permute(1, 0, 2, 3))
    with pytest.raises(RuntimeError, match=r"a must have contiguous rows"):
        cute_gemm.mixed_gemm(_randn(128, 7, seed=11).t(), qw)


def test_wrapper_bad_args():
    qw = _qweight(16, 128, 4, 32, True, torch.float16)
    with pytest.raises(ValueError, match=r"cute_gemm\.mixed_gemm: a must have shape \[\.\.\., K\] "
                                         r"with K=128 \(qw\.shape\[1\]\); got \[4, 64\]"):
        cute_gemm.mixed_gemm(_randn(4, 64), qw)
    with pytest.raises(TypeError, match=r"qw must be a cute_gemm\.QuantizedWeight"):
        cute_gemm.mixed_gemm(_randn(4, 128), qw.dequantize())


def test_strided_rows_accepted():
    qw = _qweight(16, 128, 8, 64, True, torch.float16, seed=12)
    wide = _randn(9, 136, seed=13)
    a = wide[:, :128]
    assert not a.is_contiguous()
    assert torch.equal(_call(a, qw), _call(a.contiguous(), qw))


@pytest.mark.parametrize("with_bias", [False, True], ids=["nobias", "bias"])
def test_empty_m(with_bias):
    qw = _qweight(24, 128, 4, 128, True, torch.float16)
    bias = _randn(24, seed=1) if with_bias else None
    out = cute_gemm.mixed_gemm(_randn(0, 128), qw, bias)
    assert out.shape == (0, 24) and out.dtype == torch.float16


# ------------------------------------------------------------------------------ argument checks


def _args(m=4, n=16, k=128, bits=4, group=64, symmetric=False, dtype=torch.float16,
          with_bias=True):
    qw = _qweight(n, k, bits, group, symmetric, dtype, seed=20)
    a = _randn(m, k, dtype=dtype, seed=21)
    bias = _randn(n, dtype=dtype, seed=22) if with_bias else None
    return [a, qw.packed, qw.scales, qw.zeros, bits, group, k, bias]


def _with(**changes):
    """_args() with some arguments replaced: a, qweight, scales, zeros, bits, group, k, bias."""
    names = ["a", "qweight", "scales", "zeros", "bits", "group", "k", "bias"]

    def make():
        args = _args()
        for name, fn in changes.items():
            i = names.index(name)
            args[i] = fn(args[i]) if callable(fn) else fn
        return args

    return make


BAD_ARGS = {
    "a_float32": (_with(a=lambda a: a.float()),
                  r"a must have dtype torch\.float16 or torch\.bfloat16; got torch\.float32"),
    "a_1d": (_with(a=lambda a: a[0]), r"a must be a 2-D tensor \[M, K\]; got 1-D"),
    "a_3d": (_with(a=lambda a: a.unsqueeze(0)), r"a must be a 2-D tensor \[M, K\]; got 3-D"),
    "bits_3": (_with(bits=3), r"bits must be 4 or 8; got bits=3"),
    "group_48": (_with(group=48), r"group_size must be 32, 64, 128 or -1 \(per-channel\); got "
                                  r"group_size=48"),
    "k_mismatch": (_with(k=256), r"k must equal a\.size\(1\) \(K, the unpadded reduction size\); "
                                 r"got k=256 and a of shape \[4, 128\]"),
    "k_not_multiple_of_group": (
        _with(a=lambda a: a[:, :96].contiguous(), k=96),
        r"K must be a multiple of group_size; got K=96, group_size=64"),
    "k_per_channel": (_with(a=lambda a: a[:, :72].contiguous(), k=72, group=-1),
                      r"K must be a multiple of 32 for per-channel quantization "
                      r"\(group_size=-1\); got K=72"),
    "qweight_int64": (_with(qweight=lambda q: q.long()),
                      r"qweight must have dtype torch\.int32 \(the packed weight\); got "
                      r"torch\.int64"),
    "qweight_uint8": (_with(qweight=lambda q: q.to(torch.uint8)),
                      r"qweight must have dtype torch\.int32 .*got torch\.uint8"),
    "qweight_unpacked_shape": (_with(qweight=torch.zeros(16, 128, dtype=torch.int32)),
                               r"qweight must have shape \[N/8, ceil\(K/128\), 32, 4\] = "
                               r"\[N/8, 1, 32, 4\] for bits=4 and K=128; got \[16, 128\]"),
    "qweight_int8_shape_for_int4": (
        _with(qweight=lambda q: torch.zeros(2, 2, 32, 4, dtype=torch.int32)),
        r"qweight must have shape .*= \[N/8, 1, 32, 4\] .*got \[2, 2, 32, 4\]"),
    "qweight_bits_mismatch": (_with(bits=8),
                              r"qweight must have shape \[N/8, ceil\(K/64\), 32, 4\] = "
                              r"\[N/8, 2, 32, 4\] for bits=8 and K=128; got \[2, 1, 32, 4\]"),
    "scales_dtype": (_with(scales=lambda s: s.to(torch.bfloat16)),
                     r"scales must have the same dtype as a \(torch\.float16\); got "
                     r"torch\.bfloat16"),
    "scales_float32": (_with(scales=lambda s: s.float()),
                       r"scales must have the same dtype as a .*got torch\.float32"),
    "scales_transposed_shape": (_with(scales=lambda s: s.t().contiguous()),
                                r"scales must have shape \[K/G, N\] = \[2, 16\] \(K=128, G=64, "
                                r"N=16 = qweight\.size\(0\) \* 8\); got \[16, 2\]"),
    "scales_wrong_group": (_with(scales=lambda s: torch.ones(4, 16, dtype=torch.float16)),
                           r"scales must have shape \[K/G, N\] = \[2, 16\].*got \[4, 16\]"),
    "zeros_shape": (_with(zeros=lambda z: z[:1]),
                    r"zeros must have shape \[K/G, N\] = \[2, 16\].*got \[1, 16\]"),
    "zeros_dtype": (_with(zeros=lambda z: z.to(torch.int32)),
                    r"zeros must have the same dtype as a \(torch\.float16\); got torch\.int32"),
    "bias_size": (_with(bias=lambda b: b[:8]),
                  r"bias must be a 1-D tensor of size N=16 \(qweight\.size\(0\) \* 8\); got "
                  r"shape \[8\]"),
    "bias_dtype": (_with(bias=lambda b: b.to(torch.bfloat16)),
                   r"bias must have the same dtype as a \(torch\.float16\); got torch\.bfloat16"),
    "k_zero": (_with(a=torch.zeros(4, 0, dtype=torch.float16), k=0, group=-1),
               r"K must be >= 1; got K=0"),
}

LAYOUT_BAD_ARGS = {
    "a_transposed": (_with(a=lambda a: a.t().contiguous().t()),
                     r"a must have contiguous rows \(a\.stride\(1\) == 1\); got strides \[1, 4\]"
                     r".*call a\.contiguous\(\)"),
    "a_leading_stride": (_with(a=lambda a: torch.zeros(4, 132, dtype=a.dtype)[:, :128]),
                         r"a's leading stride \(a\.stride\(0\)\) must be >= K and a multiple of 8 "
                         r"elements \(16 bytes\); got a\.stride\(0\)=132 with K=128"),
    "a_misaligned": (_with(a=lambda a: torch.zeros(4, 136, dtype=a.dtype)[:, 1:129]),
                     r"a must start at a 16-byte aligned address; got data_ptr % 16 == 2"),
    "qweight_noncontiguous": (_with(qweight=lambda q: q.transpose(2, 3).contiguous()
                                    .transpose(2, 3)),
                              r"qweight must be contiguous"),
    "scales_noncontiguous": (_with(scales=lambda s: s.t().contiguous().t()),
                             r"scales must be contiguous; .*call scales\.contiguous\(\)"),
    "zeros_noncontiguous": (_with(zeros=lambda z: z.t().contiguous().t()),
                            r"zeros must be contiguous"),
    "bias_strided": (_with(bias=lambda b: torch.zeros(32, dtype=b.dtype)[::2]),
                     r"bias must be contiguous \(bias\.stride\(0\) == 1\); got "
                     r"bias\.stride\(0\)=2"),
    "bias_misaligned": (_with(bias=lambda b: torch.zeros(17, dtype=b.dtype)[1:]),
                        r"bias must start at a 16-byte aligned address"),
}


@pytest.mark.parametrize("case", list(BAD_ARGS) + list(LAYOUT_BAD_ARGS))
def test_bad_args_raise(case):
    make, match = {**BAD_ARGS, **LAYOUT_BAD_ARGS}[case]
    with pytest.raises(RuntimeError, match=r"cute_gemm\.mixed_gemm: " + match):
        MIXED(*make())


@pytest.mark.parametrize("case", list(BAD_ARGS))
def test_bad_shapes_raise_in_fake_kernel(case):
    # The fake kernel (meta tensors, torch.compile tracing) reports the same shape/dtype errors.
    make, match = BAD_ARGS[case]
    args = [t.to("meta") if isinstance(t, torch.Tensor) else t for t in make()]
    with pytest.raises(RuntimeError, match=r"cute_gemm\.mixed_gemm: " + match):
        MIXED(*args)


def test_layout_checks_skipped_when_result_is_empty():
    args = _with(a=torch.zeros(0, 128, dtype=torch.float16))()
    assert MIXED(*args).shape == (0, 16)


# --------------------------------------------------------------------- fake kernel, registration


def test_fake_kernel_shape_dtype_device():
    args = [t.to("meta") if isinstance(t, torch.Tensor) else t
            for t in _args(m=33, n=136, k=384, bits=8, group=128, dtype=torch.bfloat16)]
    out = MIXED(*args)
    assert out.device.type == "meta"
    assert out.shape == (33, 136) and out.dtype == torch.bfloat16 and out.is_contiguous()


@pytest.mark.parametrize("bits,group,symmetric,with_bias,dtype", [
    (4, 128, True, False, torch.float16), (4, 32, False, True, torch.bfloat16),
    (8, -1, True, True, torch.float16), (8, 64, False, False, torch.bfloat16)])
def test_opcheck(bits, group, symmetric, with_bias, dtype):
    args = _args(m=7, n=24, k=256, bits=bits, group=group, symmetric=symmetric, dtype=dtype,
                 with_bias=with_bias)
    torch.library.opcheck(MIXED, tuple(args))


@pytest.mark.parametrize("with_bias", [False, True], ids=["nobias", "bias"])
def test_opcheck_requires_grad(with_bias):
    args = _args(m=5, n=16, k=128, with_bias=with_bias)
    args[0].requires_grad_()
    if with_bias:
        args[7].requires_grad_()
    torch.library.opcheck(MIXED, tuple(args))


@pytest.mark.parametrize("symmetric", [True, False], ids=["sym", "asym"])
@pytest.mark.parametrize("with_bias", [False, True], ids=["nobias", "bias"])
def test_backward_matches_linear_on_dequantized(with_bias, symmetric):
    dtype = torch.bfloat16
    qw = _qweight(24, 128, 4, 32, symmetric, dtype, seed=30)
    a = _randn(7, 128, dtype=dtype, seed=31)
    bias = _randn(24, dtype=dtype, seed=32) if with_bias else None
    ours = [t.clone().requires_grad_() if t is not None else None for t in (a, bias)]
    ref = [t.clone().requires_grad_() if t is not None else None for t in (a, bias)]
    grad_out = _randn(7, 24, dtype=dtype, seed=33)
    cute_gemm.mixed_gemm(ours[0], qw, ours[1]).backward(grad_out)
    torch.nn.functional.linear(ref[0], qw.dequantize(), ref[1]).backward(grad_out)
    for got, want in zip(ours, ref):
        if got is not None:
            assert got.grad is not None
            torch.testing.assert_close(got.grad, want.grad, rtol=2e-2, atol=2e-2)


def test_backward_only_bias():
    qw = _qweight(16, 128, 8, 64, True, torch.float16, seed=34)
    bias = _randn(16, seed=35).requires_grad_()
    out = cute_gemm.mixed_gemm(_randn(3, 128, seed=36), qw, bias)
    out.sum().backward()
    torch.testing.assert_close(bias.grad, torch.full((16,), 3.0, dtype=torch.float16))


def test_scales_requiring_grad_rejected():
    args = _args()
    args[2] = args[2].clone().requires_grad_()
    with pytest.raises(RuntimeError, match=r"cute_gemm\.mixed_gemm: gradients w\.r\.t\. "
                                           r"scales/zeros are not supported"):
        MIXED(*args)
    with torch.no_grad():  # fine without autograd
        assert MIXED(*args).shape == (4, 16)
    args = _args()
    args[3] = args[3].clone().requires_grad_()
    with pytest.raises(RuntimeError, match=r"gradients w\.r\.t\. scales/zeros"):
        MIXED(*args)


def test_no_grad_output_does_not_require_grad():
    qw = _qweight(16, 128, 4, 64, True, torch.float16)
    a = _randn(4, 128).requires_grad_()
    with torch.no_grad():
        assert not cute_gemm.mixed_gemm(a, qw).requires_grad
    assert cute_gemm.mixed_gemm(a, qw).requires_grad
    assert not cute_gemm.mixed_gemm(a.detach(), qw).requires_grad


def test_compile_traces_with_dynamic_shapes():
    # aot_eager runs the fake kernel under dynamic shapes without needing a C++ toolchain; the
    # QuantizedWeight is an argument of the compiled function.
    def f(a, qw, bias):
        return torch.relu(cute_gemm.mixed_gemm(a, qw, bias)) * 2

    compiled = torch.compile(f, backend="aot_eager", fullgraph=True, dynamic=True)
    for m, n in [(5, 16), (9, 24)]:
        qw = _qweight(n, 128, 4, 32, False, torch.float16, seed=m)
        a = _randn(m, 128, seed=m + 1)
        bias = _randn(n, seed=m + 2)
        torch.testing.assert_close(compiled(a, qw, bias), f(a, qw, bias), rtol=0, atol=0)


# ----------------------------------------------------------------------------------- hypothesis


@settings(max_examples=30, deadline=None)
@given(m=st.integers(0, 20), nb=st.integers(1, 5), groups=st.integers(1, 4),
       bits=st.sampled_from([4, 8]), group=st.sampled_from(GROUPS), symmetric=st.booleans(),
       with_bias=st.booleans(), bf16=st.booleans(), seed=st.integers(0, 2 ** 16))
def test_random_small_shapes(m, nb, groups, bits, group, symmetric, with_bias, bf16, seed):
    dtype = torch.bfloat16 if bf16 else torch.float16
    n = 8 * nb
    k = 32 * groups if group == -1 else group * groups
    qw = _qweight(n, k, bits, group, symmetric, dtype, seed=seed)
    a = _randn(m, k, dtype=dtype, seed=seed + 1)
    bias = _randn(n, dtype=dtype, seed=seed + 2) if with_bias else None
    out = cute_gemm.mixed_gemm(a, qw, bias)
    if m == 0:
        assert out.shape == (0, n)
        return
    _assert_matches_reference(out, a, qw, bias)
    assert torch.equal(cute_gemm.unpack_weight(cute_gemm.pack_weight(
        cute_gemm.unpack_weight(qw.packed, bits, k), bits), bits, k),
        cute_gemm.unpack_weight(qw.packed, bits, k))


# ------------------------------------------------------- schedule argument (no GPU needed)

# The process-wide overrides that the schedule argument replaced: none may come back.
REMOVED_C = ["_mixed_set_kernel", "_mixed_set_split", "_mixed_get_split", "_mixed_set_decode_shape",
             "_mixed_set_wgmma_tile", "_mixed_wgmma_usable", "_mixed_set_dense_from_m",
             "_mixed_dense_from_m"]
REMOVED_OPS = ["_forced_mixed_kernel", "_forced_mixed_split", "_forced_decode_shape",
               "_forced_wgmma_tile", "_forced_mixed_dense_from_m"]


def test_no_process_wide_overrides():
    for name in REMOVED_C:
        assert not hasattr(cute_gemm._C, name), name
    for name in REMOVED_OPS:
        assert not hasattr(cute_gemm.ops, name), name
    # Nor the dense GEMM's: its configuration is the op's `config` argument too.
    for name in ("_gemm_set_config", "_gemm_get_config"):
        assert not hasattr(cute_gemm._C, name), name
    assert not hasattr(cute_gemm.ops, "_forced_gemm_config")
    assert [a.name for a in torch.ops.cute_gemm.gemm.default._schema.arguments][-1] == "config"


def test_schedule_in_the_op_schema():
    schema = torch.ops.cute_gemm.mixed_gemm.default._schema
    assert [a.name for a in schema.arguments][-3:] == ["bias", "schedule", "activation"]
    for arg in schema.arguments[-2:]:
        assert str(arg.type) == "Optional[str]" and arg.default_value is None


# ------------------------------------------------------------- activation="silu_mul" (gated)

@pytest.mark.parametrize("bits,group,symmetric,dtype", [(4, 32, False, torch.float16),
                                                         (8, -1, True, torch.bfloat16)])
@pytest.mark.parametrize("with_bias", [False, True], ids=["nobias", "bias"])
def test_gated_matches_reference(bits, group, symmetric, dtype, with_bias):
    # SiLU(g) * u of the fp32 sums' halves (+ bias), rounded once; leading dims kept.
    qw = _qweight(48, 256, bits, group, symmetric, dtype, seed=50)
    a = _randn(2, 3, 256, dtype=dtype, seed=51)
    bias = _randn(48, dtype=dtype, seed=52) if with_bias else None
    out = cute_gemm.mixed_gemm(a, qw, bias, activation="silu_mul")
    pre = _reference(a.reshape(6, 256), qw, bias)
    want = torch.nn.functional.silu(pre[:, :24]) * pre[:, 24:]
    assert out.shape == (2, 3, 24) and out.dtype == dtype
    eps = torch.finfo(dtype).eps
    torch.testing.assert_close(out.reshape(6, 24).float(), want, rtol=eps, atol=eps)
    plan = cute_gemm.mixed_plan(6, 48, 256, bits, group, dtype, device="h100",
                                activation="silu_mul")
    assert plan.gated and plan.as_dict()["gated"] and "SiLU(gate) * up in registers" in str(plan)
    one = "kernel=mma,splits=1"
    mma = cute_gemm.mixed_plan(64, 48, 256, bits, group, dtype, device="a100", schedule=one,
                               activation="silu_mul")
    assert mma.workspace_bytes == 64 * 48 * 4 and "in the reduce kernel" in str(mma)
    assert cute_gemm.mixed_plan(64, 48, 256, bits, group, dtype, device="a100",
                                schedule=one).workspace_bytes == 0


def test_gated_refusals():
    qw = _qweight(40, 128, 4, 32, True, torch.float16, seed=53)  # N = 40: halves of 20 columns
    a = _randn(2, 128, seed=54)
    with pytest.raises(ValueError, match=r"activation='silu_mul' needs N \(the gate and up "
                                         r"halves\) a multiple of 16; got N=40"):
        cute_gemm.mixed_gemm(a, qw, activation="silu_mul")
    with pytest.raises(ValueError, match="multiple of 16; got N=40"):
        cute_gemm.mixed_plan(2, 40, 128, activation="silu_mul", device="h100")
    with pytest.raises(ValueError, match="mixed_plan: activation must be None or 'silu_mul'; "
                                         "got 'gelu'"):
        cute_gemm.mixed_plan(2, 32, 128, activation="gelu", device="h100")
    qw = _qweight(32, 128, 4, 32, True, torch.float16, seed=53)
    for bad in ("gelu", "SILU_MUL", ""):
        with pytest.raises(ValueError, match="activation must be None or 'silu_mul'"):
            cute_gemm.mixed_gemm(a, qw, activation=bad)
    fake = torch._subclasses.fake_tensor.FakeTensorMode()
    with fake:
        fa = torch.empty(2, 128, dtype=torch.float16)
        fq = torch.empty(qw.packed.shape, dtype=torch.int32)
        fs = torch.empty(qw.scales.shape, dtype=torch.float16)
        assert MIXED(fa, fq, fs, None, 4, 32, 128, None, None, "silu_mul").shape == (2, 16)
        with pytest.raises(ValueError, match="activation must be None or 'silu_mul'"):
            MIXED(fa, fq, fs, None, 4, 32, 128, None, None, "relu")


@pytest.mark.parametrize("with_bias", [False, True], ids=["nobias", "bias"])
def test_gated_opcheck_and_backward(with_bias):
    dtype = torch.bfloat16
    qw = _qweight(32, 128, 4, 32, False, dtype, seed=55)
    a = _randn(5, 128, dtype=dtype, seed=56)
    bias = _randn(32, dtype=dtype, seed=57) if with_bias else None
    args = (a.clone().requires_grad_(), qw.packed, qw.scales, qw.zeros, 4, 32, 128,
            None if bias is None else bias.clone().requires_grad_(), None, "silu_mul")
    torch.library.opcheck(MIXED, args)
    ours = [t.clone().requires_grad_() if t is not None else None for t in (a, bias)]
    ref = [t.float().requires_grad_() if t is not None else None for t in (a, bias)]
    grad_out = _randn(5, 16, dtype=dtype, seed=58)
    cute_gemm.mixed_gemm(ours[0], qw, ours[1], activation="silu_mul").backward(grad_out)
    pre = torch.nn.functional.linear(ref[0], qw.dequantize(torch.float32), ref[1])
    (torch.nn.functional.silu(pre[:, :16]) * pre[:, 16:]).backward(grad_out.float())
    for got, want in zip(ours, ref):
        if got is not None:
            assert got.grad is not None and got.grad.dtype == dtype
            torch.testing.assert_close(got.grad.float(), want.grad, rtol=2e-2, atol=2e-2)


SCHEDULES = [None, "", "kernel=auto", "kernel=decode,warps=8,col_warps=2", "kernel=mma,splits=3",
             "kernel=wgmma,tile_m=128", "tile_m=256,splits=64", "kernel=dense", "splits=1",
             {"kernel": "mma", "splits": 2}, {"warps": 4}, {}]


@pytest.mark.parametrize("schedule", SCHEDULES, ids=repr)
def test_cpu_op_checks_the_schedule_and_ignores_it(schedule):
    # The CPU reference has no kernels to choose: a schedule that parses changes nothing (even one
    # that no device could run for this problem: the plan is only made for CUDA tensors).
    qw = _qweight(24, 256, 4, 64, False, torch.float16, seed=40)
    a = _randn(9, 256, seed=41)
    bias = _randn(24, seed=42)
    want = cute_gemm.mixed_gemm(a, qw, bias)
    assert torch.equal(cute_gemm.mixed_gemm(a, qw, bias, schedule=schedule), want)
    if schedule is None or isinstance(schedule, str):
        assert torch.equal(MIXED(a, qw.packed, qw.scales, qw.zeros, 4, 64, 256, bias, schedule),
                           want)
        assert torch.equal(MIXED(a, qw.packed, qw.scales, qw.zeros, 4, 64, 256, bias,
                                 schedule=schedule), want)


# Bad schedule items and the key each error names: the values the removed setters refused
# (_mixed_set_kernel, _mixed_set_split, _mixed_set_decode_shape, _mixed_set_wgmma_tile), a
# reduction that does not exist, and malformed text.
BAD_SCHEDULES = [
    ("kernel=tensor_cores", "kernel"), ("kernel=2", "kernel"),
    ("splits=0", "splits"), ("splits=65", "splits"), ("splits=-1", "splits"),
    ("warps=0", "warps"), ("warps=17", "warps"),
    ("col_warps=3", "col_warps"), ("col_warps=8", "col_warps"), ("col_warps=0", "col_warps"),
    ("tile_m=8", "tile_m"), ("tile_m=96", "tile_m"), ("tile_m=224", "tile_m"),
    ("scales=fp32", "scales"),
    ("tile_m=512", "tile_m"), ("tile_m=-1", "tile_m"),
    ("reduce=both", "reduce"), ("dense_from_m=1", "dense_from_m"), ("kernel", "kernel"),
]


@pytest.mark.parametrize("text,key", BAD_SCHEDULES)
def test_bad_schedule_raises_value_error(text, key):
    args = _args()
    with pytest.raises(ValueError, match=r"cute_gemm\.mixed_gemm: schedule: .*" + key):
        MIXED(*args, text)
    with pytest.raises(ValueError, match=r"schedule: .*" + key):
        cute_gemm.mixed_gemm(args[0], _qweight(16, 128, 4, 64, False, torch.float16, seed=20),
                             schedule=text)
    with pytest.raises(ValueError, match=r"schedule: .*" + key):
        cute_gemm._C._mixed_schedule(text)
    # The fake kernel (meta tensors, torch.compile tracing) refuses it too.
    meta = [t.to("meta") if isinstance(t, torch.Tensor) else t for t in args]
    with pytest.raises(ValueError, match=r"schedule: .*" + key):
        MIXED(*meta, text)


def test_schedule_of_the_wrong_type():
    qw = _qweight(16, 128, 4, 64, False, torch.float16)
    a = _randn(4, 128)
    for bad in (3, ["kernel=mma"], ("kernel", "mma")):
        with pytest.raises(TypeError, match="schedule must be None, a string"):
            cute_gemm.mixed_gemm(a, qw, schedule=bad)
    with pytest.raises(ValueError, match="unknown key 'kernal'"):
        cute_gemm.mixed_gemm(a, qw, schedule={"kernal": "mma"})


def test_schedule_through_fake_kernel_and_opcheck():
    args = _args(m=33, n=136, k=384, bits=8, group=128, dtype=torch.bfloat16)
    meta = [t.to("meta") if isinstance(t, torch.Tensor) else t for t in args]
    out = MIXED(*meta, "kernel=wgmma,tile_m=64")
    assert out.shape == (33, 136) and out.dtype == torch.bfloat16
    for schedule in ("kernel=mma,splits=2", "kernel=decode,warps=4,col_warps=2"):
        torch.library.opcheck(MIXED, tuple(_args(m=7, n=24, k=256)) + (schedule,))
    grad_args = _args(m=5, n=16, k=128)
    grad_args[0].requires_grad_()
    grad_args[7].requires_grad_()
    torch.library.opcheck(MIXED, tuple(grad_args) + ("splits=2",))


def test_schedule_with_autograd():
    qw = _qweight(24, 128, 4, 32, True, torch.bfloat16, seed=43)
    a = _randn(7, 128, dtype=torch.bfloat16, seed=44).requires_grad_()
    ref_a = a.detach().clone().requires_grad_()
    grad = _randn(7, 24, dtype=torch.bfloat16, seed=45)
    cute_gemm.mixed_gemm(a, qw, schedule="kernel=decode,col_warps=4").backward(grad)
    cute_gemm.mixed_gemm(ref_a, qw).backward(grad)
    assert torch.equal(a.grad, ref_a.grad)


def test_op_with_schedule_compiles():
    # The op with a schedule string traces (the fake kernel checks the schedule at trace time).
    def f(x, qw, bias):
        return MIXED(x, qw.packed, qw.scales, qw.zeros, 4, 64, 128, bias, "kernel=mma,splits=2") + 1

    compiled = torch.compile(f, backend="aot_eager", fullgraph=True, dynamic=True)
    for m in (5, 9):
        x = _randn(m, 128, seed=m)
        qw = _qweight(16, 128, 4, 64, False, torch.float16, seed=m)
        bias = _randn(16, seed=m + 1)
        torch.testing.assert_close(compiled(x, qw, bias), f(x, qw, bias), rtol=0, atol=0)


@pytest.mark.parametrize("schedule", ["kernel=mma,splits=2", {"kernel": "mma", "splits": 2}],
                         ids=["text", "mapping"])
def test_wrapper_with_schedule_compiles(schedule):
    def f(x, qw, bias):
        return cute_gemm.mixed_gemm(x, qw, bias, schedule=schedule) + 1

    # dynamic=True makes the mapping's ints symbolic, which torch 2.11's dynamo cannot format
    # into the text (2.14's can); the default (dynamic after a recompile, ints specialized) is
    # what the wrapper documents for mappings.
    dynamic = True if isinstance(schedule, str) else None
    compiled = torch.compile(f, backend="aot_eager", fullgraph=True, dynamic=dynamic)
    for m in (5, 9):
        x = _randn(m, 128, seed=m)
        qw = _qweight(16, 128, 4, 64, False, torch.float16, seed=m)
        bias = _randn(16, seed=m + 1)
        torch.testing.assert_close(compiled(x, qw, bias), f(x, qw, bias), rtol=0, atol=0)


def test_wrapper_with_a_bad_schedule_fails_to_compile():
    # Under torch.compile the wrapper passes the text on unparsed; the fake kernel refuses it.
    def f(x, qw):
        return cute_gemm.mixed_gemm(x, qw, schedule="kernel=fast")

    compiled = torch.compile(f, backend="aot_eager", fullgraph=True)
    x = _randn(5, 128, seed=1)
    qw = _qweight(16, 128, 4, 64, False, torch.float16, seed=1)
    with pytest.raises(Exception, match="kernel must be auto, decode, mma, wgmma or dense"):
        compiled(x, qw)


def test_plans_without_a_gpu():
    # The planner is plain C++: plans for the built-in devices on this machine, and the schedule
    # argument of mixed_gemm is the one mixed_plan takes. (tests/test_mixed_plan.py has the rules.)
    for device in ("h100", "h200", "a100"):
        assert cute_gemm.mixed_plan(1, 4096, 4096, device=device).kernel == "decode"
        assert cute_gemm.mixed_plan(9, 4096, 4096, device=device).kernel == \
            ("mma" if device == "a100" else "wgmma")
        p = cute_gemm.mixed_plan(16, 4096, 4096, 8, -1, torch.bfloat16, device=device,
                                 schedule="kernel=mma,splits=5")
        assert (p.kernel, p.splits, p.workspace_bytes) == ("mma", 5, 5 * 16 * 4096 * 4)
    assert cute_gemm.mixed_plan(300, 4096, 4096, device="h100").kernel == "wgmma"
    assert cute_gemm.mixed_plan(300, 4096, 4096, device="a100").kernel == "dense"
    with pytest.raises(ValueError, match="kernel=wgmma needs a Hopper GPU"):
        cute_gemm.mixed_plan(300, 4096, 4096, device="a100", schedule="kernel=wgmma")
