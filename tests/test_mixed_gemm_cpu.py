"""cute_gemm.mixed_gemm on CPU (no GPU needed): the reference kernel against torch.matmul on the
dequantized weight, its bit-exact agreement with cute_gemm.dequantize, the argument checks shared
with the CUDA kernel, the fake kernel, autograd and the op's registration (opcheck)."""

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


# ------------------------------------------------------------------ kernel plan (no GPU needed)

@pytest.mark.parametrize("m,bits,group,k,mt,fine", [
    (1, 4, 128, 4096, 1, False), (16, 4, 32, 4096, 1, True), (17, 4, 64, 4096, 2, True),
    (33, 8, 64, 4096, 4, False), (255, 8, 32, 4096, 4, True), (7, 8, -1, 4224, 1, False),
    (1, 4, 32, 32, 1, False)])
def test_mixed_plan_instance_choice(m, bits, group, k, mt, fine):
    # M tile: 16 rows up to M=16, 32 up to 32, else 64. Scales every 2 k16 steps ("fine") only
    # for groups shorter than the packed k block (128 INT4, 64 INT8) and shorter than K.
    with cute_gemm.ops._forced_mixed_kernel("mma"):  # the default on Hopper is wgmma
        got = cute_gemm._C._mixed_plan(m, 4096, k, bits, group)
    assert got["kernel"] == "mma"
    assert (got["m_tiles"], got["tile_m"], got["fine_groups"]) == (mt, 16 * mt, fine)
    assert got["exact_scales"]
    assert 1 <= got["splits"] <= 64 and got["reduce"] in (0, 1, 2)
    # Only the decode kernel splits a CTA's k range among k groups of warps.
    assert got["warps"] == 0 and got["col_warps"] == 0


def test_mixed_split_override_round_trip_and_errors():
    assert cute_gemm._C._mixed_get_split() == (-1, -1)
    with cute_gemm.ops._forced_mixed_split(5, "workspace"):
        assert cute_gemm._C._mixed_get_split() == (5, 1)
        plan = cute_gemm._C._mixed_plan(1, 4096, 4096, 4, 128)
        assert (plan["splits"], plan["reduce"]) == (5, 1)
        with cute_gemm.ops._forced_mixed_split(3):
            assert cute_gemm._C._mixed_get_split() == (3, -1)
        assert cute_gemm._C._mixed_get_split() == (5, 1)
    assert cute_gemm._C._mixed_get_split() == (-1, -1)
    # 4096 / 128 = 32 k blocks: 40 splits clamp to 32, and then the decode kernel's CTAs have one
    # warp (one k block each).
    with cute_gemm.ops._forced_mixed_split(40, "workspace"):
        plan = cute_gemm._C._mixed_plan(1, 4096, 4096, 4, 128)
        assert (plan["kernel"], plan["splits"], plan["warps"]) == ("decode", 32, 1)
    # 5 splits of at most 7 k blocks: at most 7 warps per CTA.
    with cute_gemm.ops._forced_mixed_split(5):
        plan = cute_gemm._C._mixed_plan(1, 4096, 4096, 4, 128)
        assert plan["splits"] == 5 and 1 <= plan["warps"] <= 7
    for bad in [(0, -1), (65, -1), (-2, -1), (4, 0), (4, 3)]:
        with pytest.raises(ValueError, match="_mixed_set_split: splits must be"):
            cute_gemm._C._mixed_set_split(*bad)
    with pytest.raises(ValueError, match="reduce must be"):
        with cute_gemm.ops._forced_mixed_split(2, "atomics"):
            pass
    with pytest.raises(ValueError, match="_mixed_plan: need"):
        cute_gemm._C._mixed_plan(1, 4096, 4096, 5, 128)
    assert cute_gemm._C._mixed_get_split() == (-1, -1)


def test_mixed_kernel_override_round_trip_and_errors():
    assert cute_gemm._C._mixed_set_kernel(-1) == -1  # returns the previous setting
    with cute_gemm.ops._forced_mixed_kernel("wgmma"):
        assert cute_gemm._C._mixed_set_kernel(1) == 1
        with cute_gemm.ops._forced_mixed_kernel("mma"):
            assert cute_gemm._C._mixed_set_kernel(0) == 0
        assert cute_gemm._C._mixed_set_kernel(1) == 1
        # Without an sm_90 device (and sm_90a build) the override cannot pick wgmma.
        want = "wgmma" if cute_gemm._C._mixed_wgmma_usable() else "mma"
        assert cute_gemm._C._mixed_plan(1, 4096, 4096, 4, 128)["kernel"] == want
    assert cute_gemm._C._mixed_set_kernel(-1) == -1
    # The default, on every device: the decode kernel up to M = 8, mma.sync up to M = 16.
    assert cute_gemm._C._mixed_plan(1, 4096, 4096, 4, 128)["kernel"] == "decode"
    assert cute_gemm._C._mixed_plan(1, 4096, 4096, 8, 128)["kernel"] == "decode"
    assert cute_gemm._C._mixed_plan(8, 4096, 4096, 4, 128)["kernel"] == "decode"
    assert cute_gemm._C._mixed_plan(9, 4096, 4096, 4, 128)["kernel"] == "mma"
    with cute_gemm.ops._forced_mixed_kernel("decode"):
        assert cute_gemm._C._mixed_set_kernel(2) == 2
        # The decode kernel takes M <= 8 only (one 8-row token tile); above, the default kernel
        # runs.
        plan = cute_gemm._C._mixed_plan(8, 4096, 4096, 8, 128)
        assert (plan["kernel"], plan["tile_m"]) == ("decode", 8)
        assert plan["warps"] >= plan["col_warps"] >= 1 and plan["warps"] % plan["col_warps"] == 0
        assert cute_gemm._C._mixed_plan(9, 4096, 4096, 4, 128)["kernel"] == "mma"
        assert cute_gemm._C._mixed_plan(17, 4096, 4096, 4, 128)["kernel"] == want
    assert cute_gemm._C._mixed_set_kernel(-1) == -1
    for bad in (-2, 3):
        with pytest.raises(ValueError, match="_mixed_set_kernel: kernel must be"):
            cute_gemm._C._mixed_set_kernel(bad)
    with pytest.raises(ValueError, match="kernel must be 'mma', 'wgmma', 'decode' or None"):
        with cute_gemm.ops._forced_mixed_kernel("tensor cores"):
            pass
    assert cute_gemm._C._mixed_set_kernel(-1) == -1


def test_decode_shape_override_round_trip_and_errors():
    # Forced k groups of 1, 2 or 4 warps and warps per CTA; the plan rounds the warps down to
    # whole k groups (at least one) and -1 leaves either to the heuristic.
    assert cute_gemm._C._mixed_set_decode_shape(-1, -1) == (-1, -1)
    with cute_gemm.ops._forced_decode_shape(6, 4):
        assert cute_gemm._C._mixed_set_decode_shape(6, 4) == (6, 4)
        plan = cute_gemm._C._mixed_plan(1, 4096, 4096, 4, 128)
        assert (plan["kernel"], plan["col_warps"]) == ("decode", 4)
        assert plan["warps"] in (4,)  # 6 rounds down to one k group of 4
        with cute_gemm.ops._forced_decode_shape(-1, 2):
            plan = cute_gemm._C._mixed_plan(1, 4096, 4096, 4, 128)
            assert plan["col_warps"] == 2 and plan["warps"] % 2 == 0
        assert cute_gemm._C._mixed_set_decode_shape(6, 4) == (6, 4)
        with cute_gemm.ops._forced_mixed_kernel("mma"):  # no effect on the other kernels
            plan = cute_gemm._C._mixed_plan(1, 4096, 4096, 4, 128)
            assert (plan["kernel"], plan["warps"], plan["col_warps"]) == ("mma", 0, 0)
    assert cute_gemm._C._mixed_set_decode_shape(-1, -1) == (-1, -1)
    for bad in [(0, -1), (17, -1), (-2, -1), (4, 0), (4, 3), (4, 8), (4, -2)]:
        with pytest.raises(ValueError, match="_mixed_set_decode_shape: warps must be"):
            cute_gemm._C._mixed_set_decode_shape(*bad)
    assert cute_gemm._C._mixed_set_decode_shape(-1, -1) == (-1, -1)


def test_wgmma_tile_override_round_trip_and_errors():
    # A forced token tile of the wgmma kernel; -1 leaves it to the heuristic.
    assert cute_gemm._C._mixed_set_wgmma_tile(-1) == -1
    with cute_gemm.ops._forced_wgmma_tile(64):
        assert cute_gemm._C._mixed_set_wgmma_tile(128) == 64
        with cute_gemm.ops._forced_wgmma_tile(-1):
            assert cute_gemm._C._mixed_set_wgmma_tile(-1) == -1
        assert cute_gemm._C._mixed_set_wgmma_tile(64) == 128
        plan = cute_gemm._C._mixed_plan(300, 4096, 4096, 4, 128)
        if plan["kernel"] == "wgmma":
            assert (plan["tile_m"], plan["warp_groups"]) == (64, 1)
        else:  # no wgmma on this build or device: the override changes nothing else
            assert plan["warp_groups"] == 0
    assert cute_gemm._C._mixed_set_wgmma_tile(-1) == -1
    for bad in (0, 16, 96, 192, 512, -2):
        with pytest.raises(ValueError, match="_mixed_set_wgmma_tile: tile_m must be"):
            cute_gemm._C._mixed_set_wgmma_tile(bad)
    assert cute_gemm._C._mixed_set_wgmma_tile(-1) == -1


def test_mixed_dense_from_m_override():
    # The default depends on the kernel the device runs: 192 (mma.sync), never (2^31 - 1) with the
    # Hopper wgmma kernel.
    default = 2**31 - 1 if cute_gemm._C._mixed_wgmma_usable() else 192
    assert cute_gemm._C._mixed_dense_from_m() == default
    previous = cute_gemm._C._mixed_set_dense_from_m(77)
    try:
        assert previous == -1  # the default
        assert cute_gemm._C._mixed_dense_from_m() == 77
        with cute_gemm.ops._forced_mixed_dense_from_m(5):
            assert cute_gemm._C._mixed_set_dense_from_m(5) == 5
            assert cute_gemm._C._mixed_dense_from_m() == 5
        assert cute_gemm._C._mixed_set_dense_from_m(77) == 77
        for bad in (0, -2):
            with pytest.raises(ValueError, match="_mixed_set_dense_from_m: m must be >= 1, or -1"):
                cute_gemm._C._mixed_set_dense_from_m(bad)
    finally:
        cute_gemm._C._mixed_set_dense_from_m(previous)
    assert cute_gemm._C._mixed_dense_from_m() == default
