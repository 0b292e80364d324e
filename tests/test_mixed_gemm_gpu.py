"""cute_gemm.mixed_gemm and cute_gemm.quant on CUDA: numerics against an fp64 matmul of the
dequantized weight, exact dequantization, memory safety (poisoned outputs), streams, CUDA graphs,
torch.compile and determinism.

Every test is marked `gpu`; tests/conftest.py skips them when CUDA is not available.
"""

import itertools
import math

import pytest
import torch
from helpers import (DTYPE_IDS, DTYPES, MIXED_CONFIGS, assert_accurate, call_behind_sleep,
                     capture_graph, mixed_config_id, poison_allocator)

import cute_gemm

pytestmark = pytest.mark.gpu

MIXED = torch.ops.cute_gemm.mixed_gemm.default


def _randn(*shape, dtype=torch.float16, seed=0, scale=1.0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    return (torch.randn(*shape, generator=g, device="cuda") * scale).to(dtype)


def _qweight(n, k, bits, group, symmetric, dtype, seed=0):
    # Unit-variance weights, so the products have the magnitude the tolerances assume.
    return cute_gemm.quantize(_randn(n, k, dtype=dtype, seed=seed), bits, group, symmetric)


# From this many rows of A the CUDA op dequantizes the weight once and runs a dense GEMM
# (csrc/ops/mixed_policy.hpp: 192 with the mma.sync kernel, never with wgmma); below it a fused
# kernel runs.
DENSE_FROM_M = cute_gemm._C._mixed_dense_from_m()


def _plan(m, qw):
    n, k = qw.shape
    return cute_gemm._C._mixed_plan(m, n, k, qw.bits, qw.group_size, qw.dtype == torch.bfloat16)


def _reference(a, qw, bias=None, fused=None):
    """fp64 product with the weight the path computes with. A fused kernel (M < DENSE_FROM_M unless
    `fused` says otherwise) that applies the scales in fp32 after exact integer products
    (`exact_scales` in its plan: the mma.sync kernel, and the wgmma kernel up to 32 rows) uses the
    exact (q - z) * s; the wgmma kernel's larger tiles and the dense path use it rounded to the
    activation dtype (cute_gemm.dequantize's default)."""
    m = a.reshape(-1, a.shape[-1]).shape[0]
    fused = m < DENSE_FROM_M if fused is None else fused
    exact = fused and _plan(m, qw)["exact_scales"]
    w = qw.dequantize(torch.float32 if exact else None)
    out = a.double() @ w.double().t()
    if bias is not None:
        out += bias.double()
    return out


def _run_case(m, n, k, bits, group, symmetric, dtype, with_bias, seed):
    qw = _qweight(n, k, bits, group, symmetric, dtype, seed=seed)
    a = _randn(m, k, dtype=dtype, seed=seed + 1)
    bias = _randn(n, dtype=dtype, seed=seed + 2) if with_bias else None
    out = cute_gemm.mixed_gemm(a, qw, bias)
    assert_accurate(out, _reference(a, qw, bias), dtype, k)
    return out


# ------------------------------------------------------------------------------------ numerics

@pytest.mark.parametrize("bits,group,symmetric,dtype",
                         [pytest.param(*c, id=mixed_config_id(*c)) for c in MIXED_CONFIGS])
def test_configs(bits, group, symmetric, dtype):
    # Every configuration on a spread of small and awkward shapes; bias on every other one.
    shapes = itertools.product([1, 2, 7, 16, 33, 64, 255], [(8, 128), (136, 640)])
    for i, (m, (n, k)) in enumerate(shapes):
        _run_case(m, n, k, bits, group, symmetric, dtype, i % 2 == 1,
                  seed=hash((bits, group, symmetric, m, n, k)) % 100000)


MS = [1, 2, 7, 16, 33, 64, 255, 1024]
NS = [8, 136, 4104]
KS = [128, 640, 4224]


def _shape_cases():
    # Every (M, N, K) of the sweep, each with a configuration chosen by rotation so all 32 appear.
    for i, (m, n, k) in enumerate(itertools.product(MS, NS, KS)):
        bits, group, symmetric, dtype = MIXED_CONFIGS[(i * 7) % len(MIXED_CONFIGS)]
        yield pytest.param(m, n, k, bits, group, symmetric, dtype, i % 2 == 0,
                           id=f"{m}x{n}x{k}-{mixed_config_id(bits, group, symmetric, dtype)}")


@pytest.mark.parametrize("m,n,k,bits,group,symmetric,dtype,with_bias", list(_shape_cases()))
def test_shapes(m, n, k, bits, group, symmetric, dtype, with_bias):
    _run_case(m, n, k, bits, group, symmetric, dtype, with_bias, seed=m + n + k)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("symmetric", [True, False], ids=["sym", "asym"])
@pytest.mark.parametrize("bits", [4, 8])
@pytest.mark.parametrize("m", [1, 33])
def test_large_k_padding(m, bits, symmetric, dtype):
    # K = 10944 = 85.5 * 128: the INT4 packing pads K to 11008; the kernel must not use the pad.
    _run_case(m, 136, 10944, bits, 64, symmetric, dtype, True, seed=m + bits)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("symmetric", [True, False], ids=["sym", "asym"])
@pytest.mark.parametrize("bits", [4, 8])
def test_dequantization_exact(bits, symmetric, dtype):
    # a = I: each output is one product (q - z) * s rounded to the dtype, times 1, plus exact
    # zeros, so the kernel's dequantization must agree bit for bit with cute_gemm.dequantize.
    for n, k, group in [(24, 256, 32), (136, 384, 128), (8, 640, -1), (40, 192, 64)]:
        qw = _qweight(n, k, bits, group, symmetric, dtype, seed=n + k)
        eye = torch.eye(k, dtype=dtype, device="cuda")
        out = cute_gemm.mixed_gemm(eye, qw)
        assert torch.equal(out.t(), qw.dequantize())


def test_matches_cpu_reference():
    for bits, group, symmetric in [(4, 128, True), (8, 32, False), (4, -1, False)]:
        qw = _qweight(136, 640, bits, group, symmetric, torch.bfloat16, seed=bits)
        a = _randn(33, 640, dtype=torch.bfloat16, seed=5)
        bias = _randn(136, dtype=torch.bfloat16, seed=6)
        out = cute_gemm.mixed_gemm(a, qw, bias)
        ref = cute_gemm.mixed_gemm(a.cpu(), qw.to("cpu"), bias.cpu())
        torch.testing.assert_close(out.cpu(), ref, rtol=1e-2, atol=1e-2 * math.sqrt(640))


# ------------------------------------------------------------------------ quantization on CUDA


@pytest.mark.parametrize("symmetric", [True, False], ids=["sym", "asym"])
@pytest.mark.parametrize("bits", [4, 8])
def test_quantize_on_cuda_matches_cpu(bits, symmetric):
    w = _randn(136, 4224, dtype=torch.bfloat16, seed=7)
    qg = cute_gemm.quantize(w, bits, 64, symmetric)
    qc = cute_gemm.quantize(w.cpu(), bits, 64, symmetric)
    assert qg.device.type == "cuda" and qg.packed.is_cuda and qg.scales.is_cuda
    assert torch.equal(qg.packed.cpu(), qc.packed)
    assert torch.equal(qg.scales.cpu(), qc.scales)
    if not symmetric:
        assert torch.equal(qg.zeros.cpu(), qc.zeros)
    assert torch.equal(qg.dequantize().cpu(), qc.dequantize())


@pytest.mark.parametrize("bits", [4, 8])
def test_pack_unpack_on_cuda(bits):
    q = torch.randint(0, 1 << bits, (4104, 10944), device="cuda", dtype=torch.int32)
    packed = cute_gemm.pack_weight(q, bits)
    assert packed.is_cuda
    assert torch.equal(packed.cpu(), cute_gemm.pack_weight(q.cpu(), bits))
    assert torch.equal(cute_gemm.unpack_weight(packed, bits, 10944), q)


def test_quantized_weight_to_cuda_and_back():
    qw = cute_gemm.quantize(_randn(24, 256, seed=8).cpu(), 4, 32, symmetric=False)
    qg = qw.to("cuda")
    assert qg.device.type == "cuda" and qg.zeros.is_cuda and qg.to("cuda") is qg
    back = qg.cpu()
    assert torch.equal(back.packed, qw.packed) and torch.equal(back.zeros, qw.zeros)


# ------------------------------------------------------------------------------- memory safety

@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("m,n,k,bits", [(1, 8, 128, 4), (7, 136, 640, 8), (33, 4104, 4224, 4),
                                        (255, 136, 10944, 4), (1024, 264, 640, 8),
                                        (64, 8, 4224, 8)])
def test_poisoned_output_fully_written(m, n, k, bits, dtype):
    qw = _qweight(n, k, bits, 64, False, dtype, seed=11)
    a = _randn(m, k, dtype=dtype, seed=12)
    bias = _randn(n, dtype=dtype, seed=13)
    ref = _reference(a, qw, bias)
    torch.cuda.synchronize()
    if m >= DENSE_FROM_M:
        # The dense path first allocates the dequantized [N, K] weight, then the output: poison
        # both, so an element the dequantize kernel skips shows up as NaN in the result too.
        ptrs = poison_allocator(n * k, m * n, dtype=dtype)
    else:
        ptrs = poison_allocator(m * n, dtype=dtype)
    out = cute_gemm.mixed_gemm(a, qw, bias)
    assert out.data_ptr() in ptrs, "the allocator did not reuse the poisoned block"
    assert_accurate(out, ref, dtype, k)


def test_strided_leading_dimension():
    qw = _qweight(136, 640, 4, 128, True, torch.float16, seed=21)
    wide = _randn(65, 648, seed=22)
    for a in (wide[:, :640], wide[:, 8:]):
        assert a.stride(0) == 648 and not a.is_contiguous()
        out = cute_gemm.mixed_gemm(a, qw)
        assert_accurate(out, _reference(a, qw), torch.float16, 640)
        assert torch.equal(out, cute_gemm.mixed_gemm(a.contiguous(), qw))


def test_different_devices_rejected():
    qw = _qweight(16, 128, 4, 64, False, torch.float16)
    a = _randn(4, 128)
    with pytest.raises(RuntimeError, match=r"qweight must be on the same device as a \(cpu\); "
                                           r"got cuda:0"):
        MIXED(a.cpu(), qw.packed, qw.scales, qw.zeros, 4, 64, 128, None)
    with pytest.raises(RuntimeError, match=r"scales must be on the same device as a \(cuda:0\); "
                                           r"got cpu"):
        MIXED(a, qw.packed, qw.scales.cpu(), qw.zeros, 4, 64, 128, None)
    with pytest.raises(RuntimeError, match=r"zeros must be on the same device as a"):
        MIXED(a, qw.packed, qw.scales, qw.zeros.cpu(), 4, 64, 128, None)
    with pytest.raises(RuntimeError, match=r"bias must be on the same device as a \(cuda:0\); "
                                           r"got cpu"):
        cute_gemm.mixed_gemm(a, qw, torch.zeros(16, dtype=torch.float16))


def test_empty_m():
    qw = _qweight(24, 128, 4, 64, True, torch.float16)
    out = cute_gemm.mixed_gemm(_randn(0, 128), qw)
    assert out.shape == (0, 24) and out.is_cuda


# ------------------------------------------------------------------- streams, devices, graphs


def test_runs_on_current_stream_without_host_sync():
    m, n, k = 64, 4104, 4224
    qw = _qweight(n, k, 4, 128, True, torch.float16, seed=31)
    a = _randn(m, k, seed=32)
    a_new = _randn(m, k, seed=33)
    out, still_busy = call_behind_sleep(lambda: cute_gemm.mixed_gemm(a, qw), a, a_new)
    assert still_busy, "the side stream was idle right after the call: did the op sync the host?"
    assert_accurate(out, _reference(a_new, qw), torch.float16, k)


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 GPUs")
def test_second_device():
    qw = _qweight(136, 640, 4, 64, False, torch.bfloat16).to("cuda:1")
    a = _randn(33, 640, dtype=torch.bfloat16).to("cuda:1")
    with torch.cuda.device(0):
        out = cute_gemm.mixed_gemm(a, qw)
    assert out.device == torch.device("cuda:1")
    assert_accurate(out, _reference(a, qw), torch.bfloat16, 640)


@pytest.mark.parametrize("m", [1, 100])
def test_cuda_graph_replay_matches_eager(m):
    n, k = 4104, 4224
    qw = _qweight(n, k, 4, 128, False, torch.bfloat16, seed=41)
    a = _randn(m, k, dtype=torch.bfloat16, seed=42)
    bias = _randn(n, dtype=torch.bfloat16, seed=43)
    graph, out = capture_graph(lambda: cute_gemm.mixed_gemm(a, qw, bias))
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(out, cute_gemm.mixed_gemm(a, qw, bias))
    a.copy_(_randn(m, k, dtype=torch.bfloat16, seed=44))
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(out, cute_gemm.mixed_gemm(a, qw, bias))
    assert_accurate(out, _reference(a, qw, bias), torch.bfloat16, k)


@pytest.mark.parametrize("m", [1, 16, 255])
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_repeated_runs_bit_identical(dtype, m):
    qw = _qweight(4104, 4224, 4, 64, True, dtype, seed=51)
    a = _randn(m, 4224, dtype=dtype, seed=52)
    bias = _randn(4104, dtype=dtype, seed=53)
    first = cute_gemm.mixed_gemm(a, qw, bias)
    for _ in range(4):
        assert torch.equal(cute_gemm.mixed_gemm(a, qw, bias), first)


# --------------------------------------------------------------- torch.compile, registration


@pytest.mark.parametrize("bits,group,symmetric,with_bias,dtype", [
    (4, 128, True, False, torch.float16), (4, 32, False, True, torch.bfloat16),
    (8, -1, True, True, torch.float16), (8, 64, False, False, torch.bfloat16)])
def test_opcheck(bits, group, symmetric, with_bias, dtype):
    qw = _qweight(136, 640, bits, group, symmetric, dtype, seed=61)
    a = _randn(33, 640, dtype=dtype, seed=62)
    bias = _randn(136, dtype=dtype, seed=63) if with_bias else None
    torch.library.opcheck(MIXED, (a, qw.packed, qw.scales, qw.zeros, bits, group, 640, bias))


def test_opcheck_requires_grad():
    qw = _qweight(24, 128, 4, 32, False, torch.float16, seed=64)
    a = _randn(7, 128, seed=65).requires_grad_()
    bias = _randn(24, seed=66).requires_grad_()
    torch.library.opcheck(MIXED, (a, qw.packed, qw.scales, qw.zeros, 4, 32, 128, bias))


def test_backward_on_cuda():
    qw = _qweight(136, 256, 4, 64, True, torch.bfloat16, seed=67)
    a = _randn(9, 256, dtype=torch.bfloat16, seed=68).requires_grad_()
    ref_a = a.detach().clone().requires_grad_()
    grad = _randn(9, 136, dtype=torch.bfloat16, seed=69)
    cute_gemm.mixed_gemm(a, qw).backward(grad)
    torch.nn.functional.linear(ref_a, qw.dequantize()).backward(grad)
    torch.testing.assert_close(a.grad, ref_a.grad, rtol=2e-2, atol=2e-2)


def test_torch_compile_fullgraph():
    qw = _qweight(264, 640, 4, 128, False, torch.float16, seed=70)

    def f(a, bias):
        return torch.nn.functional.gelu(cute_gemm.mixed_gemm(a, qw, bias)) + 1

    compiled = torch.compile(f, fullgraph=True)
    for m in (64, 33):  # a second shape exercises recompilation / dynamic shapes
        a = _randn(m, 640, seed=71 + m)
        bias = _randn(264, seed=72 + m)
        torch.testing.assert_close(compiled(a, bias), f(a, bias), rtol=2e-3, atol=2e-3)


def test_torch_compile_with_weight_argument():
    def f(a, qw):
        return cute_gemm.mixed_gemm(a, qw) * 2

    compiled = torch.compile(f, fullgraph=True)
    for bits in (4, 8):
        qw = _qweight(136, 640, bits, 64, True, torch.bfloat16, seed=73 + bits)
        a = _randn(3, 5, 640, dtype=torch.bfloat16, seed=74)
        torch.testing.assert_close(compiled(a, qw), f(a, qw), rtol=0, atol=0)


def test_torch_compile_rejects_bad_shapes_at_trace_time():
    qw = _qweight(16, 128, 4, 64, True, torch.float16)
    compiled = torch.compile(lambda a, s: MIXED(a, qw.packed, s, None, 4, 64, 128, None),
                             fullgraph=True)
    with pytest.raises(Exception, match=r"scales must have shape \[K/G, N\]"):
        compiled(_randn(4, 128), qw.scales.t().contiguous())


# ------------------------------------------------------------------------- split-K reductions

@pytest.mark.parametrize("m,n,k,bits,group", [(1, 4104, 4224, 4, 128), (7, 136, 4224, 8, -1),
                                              (33, 264, 2048, 4, 32), (64, 4096, 1024, 8, 32),
                                              (16, 8, 8192, 4, 64)])
@pytest.mark.parametrize("splits", [1, 3, 8])
def test_split_reductions_agree(m, n, k, bits, group, splits):
    # The mma.sync kernel's two reductions add the splits' fp32 partial sums in split order, so
    # for the same split count they must agree bit for bit, and both must be accurate. The wgmma
    # kernel (Hopper builds) with the same forced split count must be accurate too.
    qw = _qweight(n, k, bits, group, False, torch.float16, seed=21)
    a = _randn(m, k, seed=22)
    bias = _randn(n, seed=23)
    k_blocks = -(-k // (128 if bits == 4 else 64))
    per_split = -(-k_blocks // min(splits, k_blocks))
    outs = {}
    with cute_gemm.ops._forced_mixed_kernel("mma"):
        ref = _reference(a, qw, bias)
        for reduce in ("workspace", "cluster"):
            with cute_gemm.ops._forced_mixed_split(splits, reduce):
                plan = _plan(m, qw)
                assert plan["kernel"] == "mma"
                # No empty split: ceil(k_blocks / splits) blocks each, so maybe fewer splits.
                assert plan["splits"] == -(-k_blocks // per_split)
                if plan["splits"] == 1:
                    assert plan["reduce"] == 0
                elif reduce == "workspace" or torch.cuda.get_device_capability()[0] < 9:
                    assert plan["reduce"] == 1
                else:
                    assert plan["reduce"] == 2
                outs[reduce] = cute_gemm.mixed_gemm(a, qw, bias)
            assert_accurate(outs[reduce], ref, torch.float16, k)
    assert torch.equal(outs["workspace"], outs["cluster"])
    if cute_gemm._C._mixed_wgmma_usable():
        with cute_gemm.ops._forced_mixed_kernel("wgmma"), \
                cute_gemm.ops._forced_mixed_split(splits, "cluster"):
            plan = _plan(m, qw)
            assert plan["kernel"] == "wgmma" and plan["splits"] == -(-k_blocks // per_split)
            assert plan["reduce"] == (0 if plan["splits"] == 1 else 1)  # no cluster reduction
            out = cute_gemm.mixed_gemm(a, qw, bias)
            assert_accurate(out, _reference(a, qw, bias), torch.float16, k)


def test_default_plan_on_this_device():
    # The heuristic: one full wave of CTAs at decode sizes, splits added through the workspace
    # (the cluster reduction only on request); the decode kernel up to M = 8, mma.sync up to
    # M = 16, then the wgmma kernel on Hopper builds and devices.
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    # Decode: CTAs of k groups (1, 2 or 4 warps sharing the activations) that split the k range,
    # one wave; a split-K grid (and the second kernel) only where the CTAs cannot fill the GPU and
    # each split keeps K >= 8192. On a 132-SM Hopper (227 KB of shared memory per SM), the
    # shapes measured best in benchmarks/results/NOTES.md (session 7).
    hopper_132 = sms == 132 and torch.cuda.get_device_capability() == (9, 0)
    for m, bits, k, n, want in ((1, 4, 8192, 8192, (8, 1, 1)), (1, 8, 8192, 8192, (8, 1, 1)),
                                (1, 4, 4096, 4096, (16, 1, 1)), (5, 4, 4096, 4096, (12, 1, 1)),
                                (5, 4, 4096, 28672, (8, 4, 1)), (8, 4, 8192, 8192, (12, 2, 1)),
                                (5, 4, 28672, 8192, (16, 4, 2)), (8, 8, 14336, 4096, (13, 1, 1)),
                                (4, 4, 8192, 8192, None)):
        plan = cute_gemm._C._mixed_plan(m, n, k, bits, 128)
        assert (plan["kernel"], plan["tile_m"], plan["fine_groups"]) == ("decode", 8, False)
        assert plan["exact_scales"] and plan["warps"] >= plan["col_warps"] >= 1
        assert plan["warps"] % plan["col_warps"] == 0
        assert plan["reduce"] == (0 if plan["splits"] == 1 else 1)
        assert plan["splits"] == 1 or k // plan["splits"] >= 8192
        if hopper_132 and want is not None:
            assert (plan["warps"], plan["col_warps"], plan["splits"]) == want, (m, bits, k, n)
    plan = cute_gemm._C._mixed_plan(1, 512, 8192, 4, 128)  # 16 column tiles
    assert plan["splits"] > 1 and plan["reduce"] == 1
    for m, bits in ((9, 4), (16, 4), (9, 8)):
        plan = cute_gemm._C._mixed_plan(m, 8192, 8192, bits, 128)
        assert plan["reduce"] == 1 and plan["exact_scales"]
        assert (plan["kernel"], plan["m_tiles"], plan["fine_groups"]) == ("mma", 1, False)
        ctas = 4 if bits == 4 else 5
        assert 64 * plan["splits"] <= ctas * sms < 64 * (plan["splits"] + 1)
    # From M = 17 the wgmma kernel where usable: exact scales up to 32 rows, rounded above; one
    # warpgroup per CTA up to 64 rows, two above; 256-row token tiles from 129 rows.
    for m, tile_m, exact, groups in ((17, 32, True, 1), (64, 64, False, 1), (65, 128, False, 2),
                                     (128, 128, False, 2), (129, 256, False, 2),
                                     (300, 256, False, 2)):
        plan = cute_gemm._C._mixed_plan(m, 8192, 8192, 4, 128)
        if cute_gemm._C._mixed_wgmma_usable():
            assert torch.cuda.get_device_capability() == (9, 0)
            assert (plan["kernel"], plan["tile_m"], plan["exact_scales"], plan["warp_groups"]) == \
                ("wgmma", tile_m, exact, groups)
        else:
            assert plan["kernel"] == "mma" and plan["exact_scales"]
    # 256-row tiles whose grid would split K into slices of <= 2048 take 128-row tiles instead:
    # 4096^2 at M=256 (32 column tiles, ~4 splits of 1024), not 14336x4096 (slices of ~3584).
    if cute_gemm._C._mixed_wgmma_usable():
        assert cute_gemm._C._mixed_plan(256, 4096, 4096, 4, 128)["tile_m"] == 128
        assert cute_gemm._C._mixed_plan(256, 4096, 14336, 4, 128)["tile_m"] == 256


@pytest.mark.parametrize("bits,group,symmetric,dtype",
                         [pytest.param(*c, id=mixed_config_id(*c)) for c in MIXED_CONFIGS])
def test_mma_kernel_on_every_config(bits, group, symmetric, dtype):
    # On Hopper builds the wgmma kernel is the default, so the mma.sync kernel (the one sm_80 GPUs
    # run) gets its own sweep here; elsewhere this repeats test_configs' kernel.
    with cute_gemm.ops._forced_mixed_kernel("mma"):
        for i, (m, (n, k)) in enumerate(itertools.product([1, 7, 16, 33, 64, 130],
                                                          [(8, 128), (136, 640)])):
            assert _plan(m, cute_gemm.quantize(torch.zeros(n, k, dtype=dtype), bits, group,
                                               symmetric))["kernel"] == "mma"
            _run_case(m, n, k, bits, group, symmetric, dtype, i % 2 == 0,
                      seed=hash((bits, group, symmetric, m, n, k, "mma")) % 100000)


@pytest.mark.parametrize("bits,group,symmetric,dtype",
                         [pytest.param(*c, id=mixed_config_id(*c)) for c in MIXED_CONFIGS])
def test_decode_kernel_on_every_config(bits, group, symmetric, dtype):
    # The decode kernel (the default at small M) at every M it takes, N not a multiple of its
    # 32-column warp tiles, K off the k block, k groups of 1, 2 and 4 warps in turn.
    cases = itertools.product([1, 2, 5, 8], [(8, 128), (136, 640), (264, 1408)])
    for i, (m, (n, k)) in enumerate(cases):
        cw = (1, 2, 4)[i % 3]
        with cute_gemm.ops._forced_mixed_kernel("decode"), \
                cute_gemm.ops._forced_decode_shape(-1, cw):
            plan = _plan(m, cute_gemm.quantize(torch.zeros(n, k, dtype=dtype), bits, group,
                                               symmetric))
            assert (plan["kernel"], plan["col_warps"]) == ("decode", cw)
            _run_case(m, n, k, bits, group, symmetric, dtype, i % 2 == 0,
                      seed=hash((bits, group, symmetric, m, n, k, "decode")) % 100000)


# (token tile, warpgroups per CTA) of each instance
WGMMA_TILES = [(32, 1), (64, 1), (128, 2), (256, 2)]


@pytest.mark.parametrize("bits,group,symmetric,dtype",
                         [pytest.param(*c, id=mixed_config_id(*c)) for c in MIXED_CONFIGS])
def test_wgmma_kernel_on_every_tile(bits, group, symmetric, dtype):
    # Every wgmma instance (token tile, with its warpgroups per CTA) on every configuration: M off
    # the token tile and across several of them, N off the CTA's 128 columns, K off the k block;
    # poisoned output, bit-identical repeats.
    if not cute_gemm._C._mixed_wgmma_usable():
        pytest.skip("the wgmma kernel needs an sm_90a build on a compute capability 9.0 device")
    cases = itertools.product([17, 64, 130, 290], [(136, 640), (392, 1408)])
    for i, (m, (n, k)) in enumerate(cases):
        qw = _qweight(n, k, bits, group, symmetric, dtype, seed=i)
        a = _randn(m, k, dtype=dtype, seed=100 + i)
        bias = _randn(n, dtype=dtype, seed=200 + i) if i % 2 else None
        refs = {}  # by the tile's exact_scales: the 32-token tile scales in fp32, the others not
        for tile_m, groups in WGMMA_TILES:
            with cute_gemm.ops._forced_mixed_kernel("wgmma"), \
                    cute_gemm.ops._forced_wgmma_tile(tile_m):
                plan = _plan(m, qw)
                assert (plan["kernel"], plan["tile_m"], plan["warp_groups"]) == \
                    ("wgmma", tile_m, groups)
                exact = plan["exact_scales"]
                if exact not in refs:
                    refs[exact] = _reference(a, qw, bias, fused=True)
                ref = refs[exact]
                torch.cuda.synchronize()
                ptrs = poison_allocator(m * n, dtype=dtype)
                out = cute_gemm.mixed_gemm(a, qw, bias)
                assert out.data_ptr() in ptrs, "the allocator did not reuse the poisoned block"
                assert_accurate(out, ref, dtype, k)
                assert torch.equal(out, cute_gemm.mixed_gemm(a, qw, bias))


@pytest.mark.parametrize("m", [1, 3, 8])
@pytest.mark.parametrize("warps,col_warps", [(1, 1), (7, 1), (16, 1), (2, 2), (6, 2), (12, 2),
                                             (4, 4), (8, 4), (12, 4)])
def test_decode_kernel_cta_shapes(m, warps, col_warps):
    # Every CTA shape the decode kernel can run: k groups of 1, 2 or 4 warps side by side (sharing
    # the activations, at a named barrier per k block), 1..16 warps per CTA, their k groups' sums
    # added in shared memory; N off the CTA's columns (32 col_warps), fine groups, K % 128 != 0.
    # The forced warps are rounded down to whole k groups that fit in shared memory.
    n, k = 392, 4224  # 33 k blocks
    qw = _qweight(n, k, 4, 64, False, torch.bfloat16, seed=51)
    a = _randn(m, k, dtype=torch.bfloat16, seed=52 + m)
    with cute_gemm.ops._forced_mixed_kernel("decode"), \
            cute_gemm.ops._forced_decode_shape(warps, col_warps):
        plan = _plan(m, qw)
        assert plan["kernel"] == "decode" and plan["col_warps"] == col_warps
        assert plan["warps"] % col_warps == 0 and col_warps <= plan["warps"] <= warps
        out = cute_gemm.mixed_gemm(a, qw)
        assert torch.equal(out, cute_gemm.mixed_gemm(a, qw))
    assert_accurate(out, _reference(a, qw, None), torch.bfloat16, k)


@pytest.mark.parametrize("splits", [1, 3, 64])
@pytest.mark.parametrize("m", [1, 5, 8])
def test_decode_kernel_forced_splits(m, splits):
    # Every split count, down to one k block per split (the reduction adds 64 partial sums), and
    # repeated runs bit-identical.
    n, k = 200, 4224  # 33 k blocks of 128 (INT4): the last split is short; K % 128 != 0
    qw = _qweight(n, k, 4, 64, True, torch.float16, seed=31)
    a = _randn(m, k, seed=32)
    with cute_gemm.ops._forced_mixed_kernel("decode"), cute_gemm.ops._forced_mixed_split(splits):
        plan = _plan(m, qw)
        assert plan["kernel"] == "decode" and plan["splits"] == min(splits, 33)
        # Each k group of a CTA gets a slice of the split's k blocks: never more k groups than
        # blocks.
        assert 1 <= plan["warps"] // plan["col_warps"] <= -(-33 // plan["splits"])
        out = cute_gemm.mixed_gemm(a, qw)
        assert torch.equal(out, cute_gemm.mixed_gemm(a, qw))
    assert_accurate(out, _reference(a, qw, None), torch.float16, k)


@pytest.mark.parametrize("kernel", ["decode", "mma"])
@pytest.mark.parametrize("bits,symmetric,dtype", [(4, True, torch.float16),
                                                  (4, False, torch.float16),
                                                  (4, True, torch.bfloat16),
                                                  (4, False, torch.bfloat16),
                                                  (8, True, torch.float16),
                                                  (8, False, torch.float16)])
def test_same_sign_activations(kernel, bits, symmetric, dtype):
    # The decode kernel keeps the weights' magic offset (128 + q in bf16 INT4, 1024 + q in fp16
    # INT8) through the mma and subtracts (off + z) * sum(a) afterwards (dequant.cuh), so its fp32
    # sums cancel off * sum(a). Activations of one sign make sum(a) as large as it gets: the result
    # must still be as accurate as the exact path's (fp16 INT4, the mma.sync kernel). Large K, so
    # the rounding of many groups adds up.
    n, k = 264, 8192
    qw = _qweight(n, k, bits, 128 if bits == 4 else -1, symmetric, dtype, seed=41)
    for m in (1, 3, 8):
        a = (1.0 + 0.25 * _randn(m, k, dtype=torch.float32, seed=42 + m)).to(dtype)
        with cute_gemm.ops._forced_mixed_kernel(kernel):
            assert _plan(m, qw)["kernel"] == kernel
            out = cute_gemm.mixed_gemm(a, qw)
        assert_accurate(out, _reference(a, qw, None), dtype, k)


def test_kernel_override_round_trip():
    usable = cute_gemm._C._mixed_wgmma_usable()
    default = cute_gemm._C._mixed_plan(64, 4096, 4096, 4, 128)["kernel"]
    assert default == ("wgmma" if usable else "mma")
    assert cute_gemm._C._mixed_plan(1, 4096, 4096, 4, 128)["kernel"] == "decode"
    with cute_gemm.ops._forced_mixed_kernel("mma"):
        assert cute_gemm._C._mixed_plan(64, 4096, 4096, 4, 128)["kernel"] == "mma"
        assert cute_gemm._C._mixed_plan(1, 4096, 4096, 4, 128)["kernel"] == "mma"
        with cute_gemm.ops._forced_mixed_kernel("wgmma"):
            assert cute_gemm._C._mixed_plan(64, 4096, 4096, 4, 128)["kernel"] == default
            # Forced, wgmma also takes M <= 16 (in 32-row token tiles).
            plan = cute_gemm._C._mixed_plan(1, 4096, 4096, 4, 128)
            assert plan["kernel"] == default and plan["tile_m"] == (32 if usable else 16)
        assert cute_gemm._C._mixed_plan(64, 4096, 4096, 4, 128)["kernel"] == "mma"
    assert cute_gemm._C._mixed_plan(64, 4096, 4096, 4, 128)["kernel"] == default


@pytest.mark.parametrize("m,n,k,bits,group,dtype", [
    (100, 264, 640, 4, 128, torch.float16), (255, 4104, 4224, 4, 32, torch.bfloat16),
    (300, 136, 2048, 8, -1, torch.float16), (1000, 520, 1024, 4, 64, torch.float16),
    (1000, 264, 640, 8, 32, torch.bfloat16)])
def test_fused_kernel_at_large_m(m, n, k, bits, group, dtype):
    # The fused kernel's M tiling (several token tiles) at sizes where the op takes the dense path
    # without the wgmma kernel; poisoned output, exact-weight reference.
    qw = _qweight(n, k, bits, group, False, dtype, seed=31)
    a = _randn(m, k, dtype=dtype, seed=32)
    bias = _randn(n, dtype=dtype, seed=33)
    ref = _reference(a, qw, bias, fused=True)
    torch.cuda.synchronize()
    with cute_gemm.ops._forced_mixed_dense_from_m(1 << 30):
        ptrs = poison_allocator(m * n, dtype=dtype)
        out = cute_gemm.mixed_gemm(a, qw, bias)
        assert out.data_ptr() in ptrs, "the allocator did not reuse the poisoned block"
    assert_accurate(out, ref, dtype, k)
    # And the dense path for the same problem agrees within the weight rounding.
    with cute_gemm.ops._forced_mixed_dense_from_m(1):
        dense = cute_gemm.mixed_gemm(a, qw, bias)
    assert_accurate(dense, _reference(a, qw, bias, fused=False), dtype, k)
