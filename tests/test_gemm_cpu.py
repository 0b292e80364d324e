"""cute_gemm.gemm on CPU (no GPU needed): the reference kernel, the argument checks shared with the
CUDA kernel, the fake kernel and the op's registration (opcheck)."""

import itertools
import re

import pytest
import torch
from helpers import DTYPES

import cute_gemm

GEMM = torch.ops.cute_gemm.gemm.default


def _randn(*shape, dtype=torch.float16, device="cpu", seed=None):
    g = None
    if seed is not None:
        g = torch.Generator(device=device).manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=torch.float32, device=device).to(dtype)


def _reference(a, b, bias=None):
    out = torch.matmul(a.float(), b.float().t())
    if bias is not None:
        out = out + bias.float()
    return out


def _operands(m, n, k, dtype, with_bias, seed=0):
    a = _randn(m, k, dtype=dtype, seed=seed)
    b = _randn(n, k, dtype=dtype, seed=seed + 1)
    bias = _randn(n, dtype=dtype, seed=seed + 2) if with_bias else None
    return a, b, bias


# ------------------------------------------------------------------------------------ numerics


@pytest.mark.parametrize("with_bias", [False, True], ids=["nobias", "bias"])
@pytest.mark.parametrize("dtype", DTYPES, ids=["fp16", "bf16"])
@pytest.mark.parametrize("m,n,k", list(itertools.product([1, 7, 33, 128, 1000], [1, 9, 130, 257],
                                                         [8, 24, 136])))
def test_matches_matmul(m, n, k, dtype, with_bias):
    a, b, bias = _operands(m, n, k, dtype, with_bias, seed=m * 7919 + n * 31 + k)
    out = cute_gemm.gemm(a, b, bias)
    assert out.shape == (m, n) and out.dtype == dtype and out.is_contiguous()
    ref = _reference(a, b, bias)
    assert ref.abs().max() > 0  # random data, never all zeros
    # The CPU kernel is fp32 matmul + one rounding: within half an ulp of the fp32 reference.
    eps = torch.finfo(dtype).eps
    torch.testing.assert_close(out.float(), ref, rtol=eps, atol=eps)


def test_matches_functional_linear():
    a, b, bias = _operands(40, 24, 64, torch.bfloat16, True)
    ref = torch.nn.functional.linear(a.float(), b.float(), bias.float()).to(torch.bfloat16)
    torch.testing.assert_close(cute_gemm.gemm(a, b, bias), ref, rtol=0, atol=0)


def test_strided_rows_accepted():
    # Column slices of wider tensors: stride(0) = K + 8 (a multiple of 8), start aligned.
    m, n, k = 17, 12, 40
    a_wide = _randn(m, k + 8, seed=1)
    b_wide = _randn(n, k + 16, seed=2)
    a, b = a_wide[:, :k], b_wide[:, 8:8 + k]
    assert not a.is_contiguous() and not b.is_contiguous()
    torch.testing.assert_close(cute_gemm.gemm(a, b), cute_gemm.gemm(a.contiguous(),
                                                                    b.contiguous()),
                               rtol=0, atol=0)


def test_single_row_any_leading_stride():
    # For one row torch leaves stride(0) arbitrary (here 1, from a transpose); it is never used.
    k = 16
    a = _randn(k, 1, seed=3).t()
    assert a.shape == (1, k) and a.stride() == (1, 1)
    b = _randn(5, k, seed=4)
    torch.testing.assert_close(cute_gemm.gemm(a, b).float(), _reference(a, b), rtol=1e-3,
                               atol=1e-3)


@pytest.mark.parametrize("m,n", [(0, 9), (5, 0), (0, 0)])
@pytest.mark.parametrize("with_bias", [False, True], ids=["nobias", "bias"])
def test_empty_m_or_n(m, n, with_bias):
    a, b, bias = _operands(m, n, 16, torch.float16, with_bias)
    out = cute_gemm.gemm(a, b, bias)
    assert out.shape == (m, n) and out.dtype == torch.float16
    assert torch.matmul(a, b.t()).shape == out.shape


@pytest.mark.parametrize("with_bias", [False, True], ids=["nobias", "bias"])
def test_k_zero_gives_zeros_plus_bias(with_bias):
    a, b, bias = _operands(3, 5, 0, torch.bfloat16, with_bias)
    out = cute_gemm.gemm(a, b, bias)
    expected = torch.matmul(a, b.t())  # zeros
    if with_bias:
        expected = expected + bias
    assert out.shape == (3, 5)
    torch.testing.assert_close(out, expected, rtol=0, atol=0)


# ------------------------------------------------------------------------------ argument checks


def _a(m=4, k=16, dtype=torch.float16):
    return _randn(m, k, dtype=dtype, seed=10)


def _b(n=6, k=16, dtype=torch.float16):
    return _randn(n, k, dtype=dtype, seed=11)


def _misaligned(m, k):
    # Element offset 1 (2 bytes) into a wider tensor: stride(0) = k + 8 is fine, data_ptr is not.
    return _randn(m, k + 8, seed=12)[:, 1:k + 1]


BAD_ARGS = {
    "a_float32": (lambda: (_a(dtype=torch.float32), _b(), None),
                  r"a must have dtype torch\.float16 or torch\.bfloat16; got torch\.float32"),
    "a_int8": (lambda: (torch.ones(4, 16, dtype=torch.int8), _b(), None),
               r"a must have dtype torch\.float16 or torch\.bfloat16; got torch\.int8"),
    "dtype_mismatch": (lambda: (_a(), _b(dtype=torch.bfloat16), None),
                       r"b must have the same dtype as a \(torch\.float16\); got torch\.bfloat16"),
    "b_float32": (lambda: (_a(), _b(dtype=torch.float32), None),
                  r"b must have the same dtype as a \(torch\.float16\); got torch\.float32"),
    "bias_wrong_size": (lambda: (_a(), _b(n=6), _randn(7)),
                        r"bias must be a 1-D tensor of size N=6 \(b\.size\(0\)\); got shape "
                        r"\[7\]"),
    "bias_2d": (lambda: (_a(), _b(n=6), _randn(1, 6)),
                r"bias must be a 1-D tensor of size N=6 .*got shape \[1, 6\]"),
    "bias_wrong_dtype": (lambda: (_a(), _b(), _randn(6, dtype=torch.bfloat16)),
                         r"bias must have the same dtype as a \(torch\.float16\); got "
                         r"torch\.bfloat16"),
    "a_1d": (lambda: (_randn(16), _b(), None), r"a must be a 2-D tensor \[M, K\]; got 1-D"),
    "a_3d": (lambda: (_randn(2, 4, 16), _b(), None), r"a must be a 2-D tensor \[M, K\]; got 3-D"),
    "b_1d": (lambda: (_a(), _randn(16), None), r"b must be a 2-D tensor \[N, K\]; got 1-D"),
    "b_3d": (lambda: (_a(), _randn(1, 6, 16), None), r"b must be a 2-D tensor \[N, K\]; got 3-D"),
    "k_mismatch": (lambda: (_a(k=16), _b(k=24), None),
                   r"b\.size\(1\) must equal a\.size\(1\) \(K;.*got a of shape \[4, 16\] and b "
                   r"of shape \[6, 24\]"),
    "k_not_multiple_of_8": (lambda: (_a(k=12), _b(k=12), None),
                            r"K must be a multiple of 8 \(16-byte rows\); got K=12"),
    "k_odd": (lambda: (_a(k=1), _b(k=1), None), r"K must be a multiple of 8 .*got K=1"),
}

LAYOUT_BAD_ARGS = {
    "a_transposed": (lambda: (_randn(16, 4).t(), _b(), None),
                     r"a must have contiguous rows \(a\.stride\(1\) == 1\); got strides \[1, 4\]"
                     r".*call a\.contiguous\(\)"),
    "b_transposed": (lambda: (_a(), _randn(16, 6).t(), None),
                     r"b must have contiguous rows \(b\.stride\(1\) == 1\).*call "
                     r"b\.contiguous\(\)"),
    "a_leading_stride_not_multiple_of_8": (
        lambda: (_randn(4, 20)[:, :16], _b(), None),
        r"a's leading stride \(a\.stride\(0\)\) must be >= K and a multiple of 8 elements "
        r"\(16 bytes\); got a\.stride\(0\)=20 with K=16; call a\.contiguous\(\)"),
    "b_leading_stride_not_multiple_of_8": (
        lambda: (_a(), _randn(6, 17)[:, :16], None),
        r"b's leading stride .*got b\.stride\(0\)=17 with K=16"),
    "a_leading_stride_too_small": (
        lambda: (_randn(1, 16).expand(4, 16), _b(), None),
        r"a's leading stride .*got a\.stride\(0\)=0 with K=16"),
    "a_misaligned": (lambda: (_misaligned(4, 16), _b(), None),
                     r"a must start at a 16-byte aligned address; got data_ptr % 16 == 2 .*"
                     r"a\.clone\(\)"),
    "b_misaligned": (lambda: (_a(), _misaligned(6, 16), None),
                     r"b must start at a 16-byte aligned address; got data_ptr % 16 == 2"),
    "b_contiguous_but_misaligned": (
        lambda: (_a(), _randn(6 * 16 + 1)[1:].view(6, 16), None),
        r"b must start at a 16-byte aligned address; got data_ptr % 16 == 2"),
    "bias_misaligned": (lambda: (_a(), _b(), _randn(7)[1:]),
                        r"bias must start at a 16-byte aligned address; got data_ptr % 16 == 2 "
                        r".*bias\.clone\(\)"),
    "bias_strided": (lambda: (_a(), _b(), _randn(12)[::2]),
                     r"bias must be contiguous \(bias\.stride\(0\) == 1\); got "
                     r"bias\.stride\(0\)=2; call bias\.contiguous\(\)"),
}


@pytest.mark.parametrize("case", list(BAD_ARGS) + list(LAYOUT_BAD_ARGS))
def test_bad_args_raise(case):
    make, match = {**BAD_ARGS, **LAYOUT_BAD_ARGS}[case]
    a, b, bias = make()
    with pytest.raises(RuntimeError, match=r"cute_gemm\.gemm: " + match):
        cute_gemm.gemm(a, b, bias)


@pytest.mark.parametrize("case", list(BAD_ARGS))
def test_bad_shapes_raise_in_fake_kernel(case):
    # The fake kernel (meta tensors, torch.compile tracing) reports the same shape/dtype errors.
    make, match = BAD_ARGS[case]
    a, b, bias = (None if t is None else t.to("meta") for t in make())
    with pytest.raises(RuntimeError, match=r"cute_gemm\.gemm: " + match):
        cute_gemm.gemm(a, b, bias)


def test_layout_checks_skipped_when_result_is_empty():
    # With M == 0 there is nothing to compute: b's layout is irrelevant (torch.matmul agrees).
    a = _randn(0, 16)
    out = cute_gemm.gemm(a, _randn(16, 6).t())
    assert out.shape == (0, 6)


# --------------------------------------------------------------------- fake kernel, registration


def test_fake_kernel_shape_dtype_device():
    with torch.device("meta"):
        a = torch.empty(33, 136, dtype=torch.bfloat16)
        b = torch.empty(257, 136, dtype=torch.bfloat16)
        bias = torch.empty(257, dtype=torch.bfloat16)
    out = cute_gemm.gemm(a, b, bias)
    assert out.device.type == "meta"
    assert out.shape == (33, 257) and out.dtype == torch.bfloat16 and out.is_contiguous()


@pytest.mark.parametrize("with_bias", [False, True], ids=["nobias", "bias"])
@pytest.mark.parametrize("dtype", DTYPES, ids=["fp16", "bf16"])
def test_opcheck(dtype, with_bias):
    a, b, bias = _operands(33, 24, 136, dtype, with_bias)
    torch.library.opcheck(GEMM, (a, b, bias))


@pytest.mark.parametrize("with_bias", [False, True], ids=["nobias", "bias"])
def test_opcheck_requires_grad(with_bias):
    a, b, bias = _operands(7, 9, 24, torch.float16, with_bias)
    args = [t.requires_grad_() if t is not None else None for t in (a, b, bias)]
    torch.library.opcheck(GEMM, tuple(args))


@pytest.mark.parametrize("with_bias", [False, True], ids=["nobias", "bias"])
def test_backward_matches_linear(with_bias):
    a, b, bias = _operands(7, 9, 24, torch.bfloat16, with_bias)
    ours = [t.clone().requires_grad_() if t is not None else None for t in (a, b, bias)]
    ref = [t.clone().requires_grad_() if t is not None else None for t in (a, b, bias)]
    grad_out = _randn(7, 9, dtype=torch.bfloat16, seed=99)
    cute_gemm.gemm(*ours).backward(grad_out)
    torch.nn.functional.linear(*ref).backward(grad_out)
    for got, want in zip(ours, ref):
        if got is not None:
            assert got.grad is not None
            torch.testing.assert_close(got.grad, want.grad, rtol=2e-2, atol=2e-2)


def test_no_grad_output_does_not_require_grad():
    a, b, _ = _operands(4, 8, 16, torch.float16, False)
    b.requires_grad_()
    with torch.no_grad():
        assert not cute_gemm.gemm(a, b).requires_grad
    assert cute_gemm.gemm(a, b).requires_grad


def test_compile_traces_with_dynamic_shapes():
    # aot_eager runs the fake kernel under dynamic shapes without needing a C++ toolchain.
    def f(a, b, bias):
        return torch.relu(cute_gemm.gemm(a, b, bias)) * 2

    compiled = torch.compile(f, backend="aot_eager", fullgraph=True, dynamic=True)
    for m, n in [(5, 8), (9, 24)]:
        a, b, bias = _operands(m, n, 32, torch.float16, True)
        torch.testing.assert_close(compiled(a, b, bias), f(a, b, bias), rtol=0, atol=0)


# ------------------------------------------------- the config argument (no GPU needed)

# The compiled configurations, as the op names them. The list is plain C++ (gemm_configs.hpp), so
# it exists in every build, CPU-only included.
CONFIG_NAMES = cute_gemm._C._gemm_configs()
# The message's list of valid names, as a regex.
NAMES_RE = r", ".join(re.escape(f"'{name}'") for name in CONFIG_NAMES)


def test_config_names():
    # The mma.sync tiles, then the Hopper kernel's (named wgmma_..., last).
    assert len(CONFIG_NAMES) >= 3 and len(set(CONFIG_NAMES)) == len(CONFIG_NAMES)
    hopper = [name for name in CONFIG_NAMES if name.startswith("wgmma_")]
    assert hopper and CONFIG_NAMES[-len(hopper):] == hopper
    for name in CONFIG_NAMES[:-len(hopper)]:
        assert re.fullmatch(r"\d+x\d+x\d+_s\d+_w\d+x\d+", name), name
    for name in hopper:
        assert re.fullmatch(r"wgmma_(64|128)x\d+x64_s\d+", name), name


def test_no_process_wide_config_override():
    # The configuration is an argument of the op: the setters/getters and the context manager
    # that forced one for the whole process are gone, and must not come back.
    for name in ("_gemm_set_config", "_gemm_get_config"):
        assert not hasattr(cute_gemm._C, name), name
    assert not hasattr(cute_gemm.ops, "_forced_gemm_config")
    assert not hasattr(cute_gemm.ops, "_swapped")


def test_config_in_the_op_schema():
    schema = GEMM._schema
    assert [a.name for a in schema.arguments] == ["a", "b", "bias", "config"]
    assert str(schema.arguments[-1].type) == "Optional[str]"
    assert schema.arguments[-1].default_value is None


def test_config_for_names_a_compiled_config_or_needs_cuda():
    try:
        chosen = cute_gemm._C._gemm_config_for(4096, 4096, 4096)
    except RuntimeError as e:
        assert "built without CUDA" in str(e)
        return
    assert chosen in CONFIG_NAMES
    with pytest.raises(ValueError, match=r"need 1 <= M, N"):
        cute_gemm._C._gemm_config_for(0, 8, 8)


@pytest.mark.parametrize("with_bias", [False, True], ids=["nobias", "bias"])
@pytest.mark.parametrize("dtype", DTYPES, ids=["fp16", "bf16"])
@pytest.mark.parametrize("config", CONFIG_NAMES)
def test_cpu_op_accepts_every_config(config, dtype, with_bias):
    # The CPU reference has no kernels to choose: every compiled name is accepted (through the
    # wrapper and the op, positionally and by keyword) and changes nothing.
    a, b, bias = _operands(33, 24, 136, dtype, with_bias)
    want = cute_gemm.gemm(a, b, bias)
    assert torch.equal(cute_gemm.gemm(a, b, bias, config=config), want)
    assert torch.equal(GEMM(a, b, bias, config), want)
    assert torch.equal(GEMM(a, b, bias, config=config), want)
    assert torch.equal(GEMM(a, b, bias, None), want)


# Names that are not compiled configurations: empty, near misses, other spellings.
BAD_CONFIG_NAMES = ["", " ", "1x1x1", "heuristic", "auto", "None", "0",
                    "64x64x32", "64x64x32_s3_w2x2 ", " 64x64x32_s3_w2x2", "64X64X32_S3_W2X2",
                    "64x64x32_s4_w2x2", "gemm_f16_64x64x32_s3_w2x2"]


@pytest.mark.parametrize("config", BAD_CONFIG_NAMES, ids=repr)
def test_unknown_config_raises_value_error(config):
    a, b, bias = _operands(5, 16, 24, torch.float16, True)
    match = (r"cute_gemm\.gemm: config must be None \(the heuristic\) or one of the compiled "
             r"configurations " + NAMES_RE + r"; got '" + re.escape(config) + r"'$")
    with pytest.raises(ValueError, match=match):
        cute_gemm.gemm(a, b, bias, config=config)
    with pytest.raises(ValueError, match=match):
        GEMM(a, b, bias, config)
    # Checked whatever the shape: also when no kernel would run (M == 0, K == 0).
    with pytest.raises(ValueError, match=match):
        cute_gemm.gemm(_randn(0, 16), _randn(8, 16), config=config)
    with pytest.raises(ValueError, match=match):
        cute_gemm.gemm(_randn(3, 0), _randn(8, 0), config=config)
    # The fake kernel (meta tensors, torch.compile tracing) refuses it with the same message.
    meta = [t.to("meta") for t in (a, b, bias)]
    with pytest.raises(ValueError, match=match):
        GEMM(*meta, config)
    with pytest.raises(ValueError, match=match):
        cute_gemm.gemm(*meta, config=config)


@pytest.mark.parametrize("config", [0, 1, -1, 2.0, b"64x64x32_s3_w2x2", ["64x64x32_s3_w2x2"],
                                    ("64x64x32_s3_w2x2",), True],
                         ids=lambda c: type(c).__name__ + "-" + repr(c))
def test_config_of_the_wrong_type(config):
    # The old index-based override took integers: the argument takes names only.
    a, b, _ = _operands(5, 16, 24, torch.float16, False)
    with pytest.raises(TypeError, match=r"cute_gemm\.gemm: config must be None or a configuration "
                                        r"name \(a str, one of cute_gemm\._C\._gemm_configs\(\)\); "
                                        r"got " + type(config).__name__ + "$"):
        cute_gemm.gemm(a, b, config=config)
    # The op itself refuses a non-string through its schema (torch's argument parser takes bytes
    # as a str there, so only the wrapper refuses those).
    if not isinstance(config, bytes):
        with pytest.raises((TypeError, RuntimeError)):
            GEMM(a, b, None, config)


def test_config_must_be_a_keyword():
    # Positional after bias it would be easy to confuse with another tensor argument.
    a, b, bias = _operands(5, 16, 24, torch.float16, True)
    with pytest.raises(TypeError):
        cute_gemm.gemm(a, b, bias, CONFIG_NAMES[0])


def test_config_through_fake_kernel_and_opcheck():
    with torch.device("meta"):
        a = torch.empty(33, 136, dtype=torch.bfloat16)
        b = torch.empty(257, 136, dtype=torch.bfloat16)
    for config in CONFIG_NAMES:
        out = GEMM(a, b, None, config)
        assert out.shape == (33, 257) and out.dtype == torch.bfloat16 and out.device.type == "meta"
    for config in CONFIG_NAMES:
        torch.library.opcheck(GEMM, _operands(33, 24, 136, torch.float16, True) + (config,))
    a, b, bias = _operands(7, 9, 24, torch.float16, True)
    args = tuple(t.requires_grad_() for t in (a, b, bias)) + (CONFIG_NAMES[-1],)
    torch.library.opcheck(GEMM, args)


def test_config_with_autograd():
    a, b, bias = _operands(7, 9, 24, torch.bfloat16, True)
    ours = [t.clone().requires_grad_() for t in (a, b, bias)]
    ref = [t.clone().requires_grad_() for t in (a, b, bias)]
    grad_out = _randn(7, 9, dtype=torch.bfloat16, seed=99)
    cute_gemm.gemm(*ours, config=CONFIG_NAMES[0]).backward(grad_out)
    cute_gemm.gemm(*ref).backward(grad_out)
    for got, want in zip(ours, ref):
        assert torch.equal(got.grad, want.grad)


def test_op_with_config_compiles():
    # The op with a config name traces (the fake kernel checks the name at trace time).
    config = CONFIG_NAMES[1]

    def f(a, b, bias):
        return torch.relu(GEMM(a, b, bias, config)) * 2

    compiled = torch.compile(f, backend="aot_eager", fullgraph=True, dynamic=True)
    for m, n in [(5, 8), (9, 24)]:
        a, b, bias = _operands(m, n, 32, torch.float16, True)
        torch.testing.assert_close(compiled(a, b, bias), f(a, b, bias), rtol=0, atol=0)


@pytest.mark.parametrize("config", [None] + CONFIG_NAMES)
def test_wrapper_with_config_compiles(config):
    def f(a, b, bias):
        return cute_gemm.gemm(a, b, bias, config=config) + 1

    compiled = torch.compile(f, backend="aot_eager", fullgraph=True, dynamic=True)
    for m, n in [(5, 8), (9, 24)]:
        a, b, bias = _operands(m, n, 32, torch.float16, True)
        torch.testing.assert_close(compiled(a, b, bias), f(a, b, bias), rtol=0, atol=0)


def test_wrapper_with_an_unknown_config_fails_to_compile():
    # Under torch.compile the fake kernel refuses the name at trace time.
    def f(a, b):
        return cute_gemm.gemm(a, b, config="1x1x1")

    compiled = torch.compile(f, backend="aot_eager", fullgraph=True)
    a, b, _ = _operands(5, 16, 24, torch.float16, False)
    with pytest.raises(Exception, match=r"config must be None \(the heuristic\) or one of the "
                                        r"compiled configurations .*; got '1x1x1'"):
        compiled(a, b)
