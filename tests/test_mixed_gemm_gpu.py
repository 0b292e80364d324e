"""cute_gemm.mixed_gemm and cute_gemm.quant on CUDA: numerics against an fp64 matmul of the
dequantized weight, exact dequantization, memory safety (poisoned outputs), streams, CUDA graphs,
torch.compile and determinism; every kernel, token tile, split count and decode CTA shape reached
through the schedule argument (cute_gemm.mixed_gemm(..., schedule=...)), and the default plan on
this GPU.

Every test is marked `gpu`; tests/conftest.py skips them when CUDA is not available.
"""

import itertools
import math

import pytest
import torch
from helpers import (DTYPE_IDS, DTYPES, MIXED_CONFIGS, assert_accurate, assert_poisoned_run,
                     call_behind_sleep, capture_graph, mixed_config_id, poison_allocator)

import cute_gemm

pytestmark = pytest.mark.gpu

MIXED = torch.ops.cute_gemm.mixed_gemm.default


def _randn(*shape, dtype=torch.float16, seed=0, scale=1.0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    return (torch.randn(*shape, generator=g, device="cuda") * scale).to(dtype)


def _qweight(n, k, bits, group, symmetric, dtype, seed=0):
    # Unit-variance weights, so the products have the magnitude the tolerances assume.
    return cute_gemm.quantize(_randn(n, k, dtype=dtype, seed=seed), bits, group, symmetric)


def _plan(m, qw, schedule=None):
    """What mixed_gemm runs on the current GPU for M rows with this weight and schedule."""
    n, k = qw.shape
    device = qw.device if qw.device.type == "cuda" else None  # a CPU weight: the current GPU
    return cute_gemm.mixed_plan(m, n, k, qw.bits, qw.group_size, qw.dtype, device=device,
                                schedule=schedule)


def _wgmma():
    """Whether this build and GPU run the wgmma kernels (Hopper, sm_90a)."""
    return cute_gemm.device_spec().wgmma


def _reference(a, qw, bias=None, schedule=None):
    """fp64 product with the weight the path computes with. A fused kernel that applies the
    scales in fp32 after exact integer products (`exact_scales` in its plan: the decode and
    mma.sync kernels, the wgmma kernel's exact 16- and 32-row tiles and INT8's exact
    warp-specialized tiles) uses the exact (q - z) * s; the wgmma kernel's other tiles and the
    dense path use it rounded to the activation dtype (cute_gemm.dequantize's default)."""
    m = a.reshape(-1, a.shape[-1]).shape[0]
    plan = _plan(m, qw, schedule)
    exact = plan.kernel != "dense" and plan.exact_scales
    w = qw.dequantize(torch.float32 if exact else None)
    out = a.double() @ w.double().t()
    if bias is not None:
        out += bias.double()
    return out


def _run_case(m, n, k, bits, group, symmetric, dtype, with_bias, seed, schedule=None):
    qw = _qweight(n, k, bits, group, symmetric, dtype, seed=seed)
    a = _randn(m, k, dtype=dtype, seed=seed + 1)
    bias = _randn(n, dtype=dtype, seed=seed + 2) if with_bias else None
    out = cute_gemm.mixed_gemm(a, qw, bias, schedule=schedule)
    assert_accurate(out, _reference(a, qw, bias, schedule), dtype, k)
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
    if _plan(m, qw).kernel == "dense":
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


@pytest.mark.parametrize("schedule", [None, "splits=3", "kernel=dense"])
@pytest.mark.parametrize("m", [1, 100])
def test_cuda_graph_replay_matches_eager(m, schedule):
    # The default plan, a split-K plan (its workspace from the caching allocator and the reduce
    # kernel, inside the graph) and the dense path (its temporary weight).
    n, k = 4104, 4224
    qw = _qweight(n, k, 4, 128, False, torch.bfloat16, seed=41)
    a = _randn(m, k, dtype=torch.bfloat16, seed=42)
    bias = _randn(n, dtype=torch.bfloat16, seed=43)
    if schedule == "splits=3":
        assert _plan(m, qw, schedule).workspace_bytes == 3 * m * n * 4

    def call():
        return cute_gemm.mixed_gemm(a, qw, bias, schedule=schedule)

    graph, out = capture_graph(call)
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(out, call())
    a.copy_(_randn(m, k, dtype=torch.bfloat16, seed=44))
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(out, call())
    assert_accurate(out, _reference(a, qw, bias, schedule), torch.bfloat16, k)


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
    schedule = "kernel=wgmma,tile_m=64,splits=2" if _wgmma() else "kernel=mma,splits=2"
    torch.library.opcheck(MIXED, (a, qw.packed, qw.scales, qw.zeros, bits, group, 640, bias,
                                  schedule))


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


def _has_inductor_pdl():
    import torch._inductor.config as inductor_config
    return hasattr(inductor_config.triton, "enable_pdl") and \
        torch.cuda.get_device_capability()[0] >= 9


@pytest.mark.skipif(not torch.cuda.is_available() or not _has_inductor_pdl(),
                    reason="inductor's programmatic dependent launch needs torch with "
                           "triton.enable_pdl and a compute capability 9.0+ GPU")
def test_torch_compile_with_inductor_pdl_chain():
    # Inductor's Triton kernels as programmatic dependents (triton.enable_pdl): a decoder-like
    # chain of norms, activations and residuals around mixed GEMMs, each GEMM launched while the
    # kernel before it may still run. The GEMMs wait for their inputs and order their writes
    # (grid_dependency_wait), so every call matches the chain compiled without PDL on fresh
    # inputs (a read of a stale input would not), in plain launches and in CUDA-graph replays, at
    # the decode kernel's, mma.sync's and wgmma's M.
    from torch._inductor.utils import run_and_get_code
    hidden, inter = 1024, 2816
    w_up = _qweight(2 * inter, hidden, 4, 128, False, torch.bfloat16, seed=80)
    w_down = _qweight(hidden, inter, 4, 128, False, torch.bfloat16, seed=81)
    w_qkv = _qweight(1536, hidden, 8, -1, True, torch.bfloat16, seed=82)

    def norm(x):
        return x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6).to(x.dtype)

    def chain(x):  # unit-variance weights: each product scaled back to O(1) values
        for _ in range(3):
            h = cute_gemm.mixed_gemm(norm(x), w_qkv) * hidden ** -0.5
            x = x + h[:, :hidden] * torch.tanh(h[:, hidden:hidden + 1])
            gate, up = (cute_gemm.mixed_gemm(norm(x), w_up) * hidden ** -0.5).chunk(2, dim=-1)
            x = x + cute_gemm.mixed_gemm(torch.nn.functional.silu(gate) * up, w_down) * \
                inter ** -0.5
        return x

    def compiled(pdl):
        torch._dynamo.reset()
        with torch._inductor.config.patch({"triton.enable_pdl": pdl, "fx_graph_cache": False}):
            fn = torch.compile(chain, fullgraph=True, dynamic=False)
            codes = []
            for m in (1, 16, 64):
                codes += run_and_get_code(fn, _randn(m, hidden, dtype=torch.bfloat16))[1]
        return fn, codes

    with_pdl, codes = compiled(True)
    assert any("gdc_launch_dependents" in c for c in codes), "no PDL in inductor's kernels"
    plain, codes = compiled(False)
    assert not any("gdc_launch_dependents" in c for c in codes)

    def check(got, x):  # the same inductor code but PDL: differences of reduction order only
        torch.testing.assert_close(got, plain(x.clone()), rtol=1e-2, atol=1e-2)

    for m in (1, 16, 64):
        # Inductor keeps fp32 inside its fused kernels where eager rounds each op to bf16.
        x = _randn(m, hidden, dtype=torch.bfloat16, seed=m)
        torch.testing.assert_close(plain(x), chain(x), rtol=0.1, atol=0.15)
        for trial in range(3):
            x = _randn(m, hidden, dtype=torch.bfloat16, seed=100 * m + trial)
            check(with_pdl(x), x)
        x_static = _randn(m, hidden, dtype=torch.bfloat16, seed=7)
        graph, out = capture_graph(lambda: with_pdl(x_static))
        for trial in range(3):
            x_static.copy_(_randn(m, hidden, dtype=torch.bfloat16, seed=200 * m + trial))
            out.fill_(float("nan"))
            graph.replay()
            torch.cuda.synchronize()
            check(out, x_static)


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


# ------------------------------------------------------------------------------------ split-K

def _non_empty(splits, k_blocks):
    """The split count a plan runs for `splits` scheduled over `k_blocks` k blocks: lowered so
    that none is empty (ceil(k_blocks / splits) blocks each)."""
    per_split = -(-k_blocks // min(splits, k_blocks))
    return -(-k_blocks // per_split)


@pytest.mark.parametrize("m,n,k,bits,group", [(1, 4104, 4224, 4, 128), (7, 136, 4224, 8, -1),
                                              (33, 264, 2048, 4, 32), (64, 4096, 1024, 8, 32),
                                              (16, 8, 8192, 4, 64)])
@pytest.mark.parametrize("splits", [1, 3, 8])
def test_scheduled_splits_on_every_kernel(m, n, k, bits, group, splits):
    # Every fused kernel that takes M rows (decode up to 8, mma.sync, wgmma on Hopper) with a
    # scheduled split count: the splits' fp32 partial sums meet in the workspace and the reduce
    # kernel adds them in split order (INT4's 16-row wgmma tile in 64 columns: in a cluster of
    # the splits, in the same order), so repeated runs are bit-identical and accurate.
    qw = _qweight(n, k, bits, group, False, torch.float16, seed=21)
    a = _randn(m, k, seed=22)
    bias = _randn(n, seed=23)
    k_blocks = -(-k // (128 if bits == 4 else 64))
    kernels = (["decode"] if m <= 8 else []) + ["mma"] + (["wgmma"] if _wgmma() else [])
    for kernel in kernels:
        schedule = f"kernel={kernel},splits={splits}"
        plan = _plan(m, qw, schedule)
        assert plan.kernel == kernel
        # No empty split: ceil(k_blocks / splits) blocks each, so maybe fewer splits.
        assert plan.splits == _non_empty(splits, k_blocks) and plan.grid[2] == plan.splits
        via = plan.splits > 1 and not plan.reduce_in_cluster
        assert plan.workspace_bytes == (plan.splits * m * n * 4 if via else 0)
        out = cute_gemm.mixed_gemm(a, qw, bias, schedule=schedule)
        assert_accurate(out, _reference(a, qw, bias, schedule), torch.float16, k)
        assert torch.equal(out, cute_gemm.mixed_gemm(a, qw, bias, schedule=schedule))
        if plan.reduce_in_cluster:  # the reduce kernel gives the same bits
            assert torch.equal(out, cute_gemm.mixed_gemm(a, qw, bias,
                                                         schedule=schedule + ",reduce=kernel"))


# The tiles with their split-K sums added in a cluster: INT4's 16-row tile in 64 columns, exact or
# rounded: (tile_m, exact, tile_n, bits); each with 2..8 splits, M rows past the tile's, N
# cutting the last column tile.
CLUSTER_TILES = [(16, True, 64, 4), (16, False, 64, 4)]


@pytest.mark.parametrize("tile_m,exact,tile_n,bits", CLUSTER_TILES)
@pytest.mark.parametrize("splits", [2, 5, 8])
@pytest.mark.parametrize("symmetric,dtype", [(True, torch.bfloat16), (False, torch.float16)])
def test_splits_reduced_in_cluster(tile_m, exact, tile_n, bits, splits, symmetric, dtype):
    if not _wgmma():
        pytest.skip("the wgmma kernels need an sm_90a build on a compute capability 9.0 device")
    group = 128 if bits == 4 else -1
    # 520: a last column tile of 8 columns; K = 3072: 24 (INT4) or 48 (INT8) k blocks, which
    # 2, 5 and 8 splits divide into non-empty splits of equal length but the last.
    m, n, k = tile_m - 3, 520, 3072
    qw = _qweight(n, k, bits, group, symmetric, dtype, seed=splits)
    a = _randn(m, k, dtype=dtype, seed=splits + 1, scale=1 / math.sqrt(k))
    bias = _randn(n, dtype=dtype, seed=splits + 2)
    schedule = f"{_tile_schedule(tile_m, exact, tile_n)},splits={splits}"
    plan = _plan(m, qw, schedule)
    assert plan.reduce_in_cluster and plan.splits == splits and plan.workspace_bytes == 0, plan
    run = lambda: cute_gemm.mixed_gemm(a, qw, bias, schedule=schedule)  # noqa: E731
    out = assert_poisoned_run(run, _reference(a, qw, bias, schedule), dtype, k)
    assert torch.equal(out, cute_gemm.mixed_gemm(a, qw, bias, schedule=schedule + ",reduce=kernel"))
    # In a CUDA graph: the cluster launch is captured and replays on new activations.
    graph, replayed = capture_graph(run)
    a.copy_(_randn(m, k, dtype=dtype, seed=splits + 3, scale=1 / math.sqrt(k)))
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(replayed, run())


# Stream-K (the 16-row exact tile in 128 columns): CTAs that share the tiles' k blocks, each
# tile's sums added by the CTA holding its last k block from the others' partial sums. N = 1000:
# 8 tiles, the last of 104 columns; K = 1152: 9 k blocks. CTAs from one per tile to 9 per tile
# (every k block its own CTA), and counts where tiles have 2 and 3 contributors.
@pytest.mark.parametrize("ctas", [8, 9, 11, 17, 30, 72])
@pytest.mark.parametrize("gated", [False, True])
@pytest.mark.parametrize("m,group,symmetric,dtype", [(16, 128, True, torch.bfloat16),
                                                     (9, -1, False, torch.float16),
                                                     (13, 128, False, torch.bfloat16)])
def test_stream_k(ctas, gated, m, group, symmetric, dtype):
    if not _wgmma():
        pytest.skip("the wgmma kernels need an sm_90a build on a compute capability 9.0 device")
    n, k = (1024 if gated else 1000), 1152  # gated: halves of whole n8 blocks
    qw = _qweight(n, k, 4, group, symmetric, dtype, seed=ctas)
    a = _randn(m, k, dtype=dtype, seed=ctas + 1, scale=1 / math.sqrt(k))
    bias = _randn(n, dtype=dtype, seed=ctas + 2)
    schedule = f"{_tile_schedule(16, True)},splits=1,stream_k={ctas}"
    act = "silu_mul" if gated else None
    plan = cute_gemm.mixed_plan(m, n, k, 4, group, dtype, schedule=schedule, activation=act)
    assert plan.stream_k_ctas == ctas and plan.grid[0] == ctas and not plan.via_workspace, plan
    run = lambda: cute_gemm.mixed_gemm(a, qw, bias, schedule=schedule, activation=act)  # noqa
    plain = lambda: cute_gemm.mixed_gemm(a, qw, bias, activation=act,  # noqa: E731
                                         schedule=schedule.replace(f"stream_k={ctas}",
                                                                   "stream_k=off"))
    ref = (_gated_reference if gated else _reference)(a, qw, bias, schedule)
    _check_stream_k_run(run, plain, ref, a, dtype, seed=100)


def _check_stream_k_run(run, plain, ref, a, dtype, seed):
    """A stream-K run (run()): accurate into a poisoned output against ref, the unsplit kernel's
    result (plain()) up to fp32 rounding (the sums are added in another order), and in a CUDA
    graph on new activations (seeds seed..) the same bits as a direct call: the flags the owners
    lowered let every replay start over."""
    m, k = a.shape
    out = assert_poisoned_run(run, ref, dtype, k)
    torch.testing.assert_close(out.float(), plain().float(), rtol=2e-2, atol=2e-2)
    graph, replayed = capture_graph(run)
    for s in range(3):
        a.copy_(_randn(m, k, dtype=dtype, seed=seed + s, scale=1 / math.sqrt(k)))
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(replayed, run())


def test_stream_k_default_plan():
    # Llama-2-7B's gate/up (4096 -> 2 x 11008: 172 tiles) and a 4096x20480 projection (160) at
    # M = 16: stream-K by default where the GPU has 132 SMs; the result is the unsplit kernel's to
    # rounding, and bit-identical from call to call.
    if not _wgmma():
        pytest.skip("the wgmma kernels need an sm_90a build on a compute capability 9.0 device")
    k, m, dtype = 4096, 16, torch.bfloat16
    for n, act in ((22016, "silu_mul"), (20480, None)):
        qw = _qweight(n, k, 4, 128, True, dtype, seed=7)
        a = _randn(m, k, dtype=dtype, seed=8, scale=1 / math.sqrt(k))
        plan = cute_gemm.mixed_plan(m, n, k, 4, 128, dtype, activation=act)
        if cute_gemm.device_spec().sm_count == 132:
            assert plan.stream_k_ctas == 264, plan
        run = lambda: cute_gemm.mixed_gemm(a, qw, activation=act)  # noqa: E731
        ref = _gated_reference(a, qw, None, None) if act else _reference(a, qw)
        out = assert_poisoned_run(run, ref, dtype, k)
        plain = cute_gemm.mixed_gemm(a, qw, activation=act, schedule="stream_k=off")
        torch.testing.assert_close(out.float(), plain.float(), rtol=2e-2, atol=2e-2)


# Stream-K on the warp-specialized tiles (tile_m >= 128): full waves of `ctas` CTAs run whole
# tiles, and the tiles past them are shared by `ctas` CTAs. M = 3 tiles - 5 rows (the last M tile
# short), N = 1000 (8 column tiles, the last of 104 columns): 24 tiles; K = 1152: 9 (INT4) or 18
# (INT8) k blocks. ctas = 5: 4 full waves and 4 tiles shared by 5 CTAs; 7: 3 waves, 3 tiles over 7
# (tiles of 3 contributors); 10: 2 waves, 4 over 10; 25: no full wave, all 24 tiles shared.
@pytest.mark.parametrize("ctas", [5, 7, 10, 25])
@pytest.mark.parametrize("tile_m,bits,group,symmetric,dtype", [
    (128, 4, 128, True, torch.float16),
    (160, 8, -1, True, torch.bfloat16),
    (192, 4, 64, False, torch.bfloat16),
    (256, 4, 128, True, torch.bfloat16),
    (256, 8, 128, False, torch.float16),
    (128, 8, -1, False, torch.float16),
])
def test_ws_stream_k(ctas, tile_m, bits, group, symmetric, dtype):
    if not _wgmma():
        pytest.skip("the wgmma kernels need an sm_90a build on a compute capability 9.0 device")
    m, n, k = 3 * tile_m - 5, 1000, 1152
    qw = _qweight(n, k, bits, group, symmetric, dtype, seed=ctas + tile_m)
    a = _randn(m, k, dtype=dtype, seed=ctas + 1, scale=1 / math.sqrt(k))
    bias = _randn(n, dtype=dtype, seed=ctas + 2)
    schedule = f"kernel=wgmma,tile_m={tile_m},splits=1,stream_k={ctas}"
    plan = _plan(m, qw, schedule)
    assert plan.producer and plan.stream_k_ctas == ctas and not plan.via_workspace, plan
    assert tuple(plan.grid) == (ctas, 24 // ctas + 1, 1), plan
    run = lambda: cute_gemm.mixed_gemm(a, qw, bias, schedule=schedule)  # noqa: E731
    plain = lambda: cute_gemm.mixed_gemm(  # noqa: E731
        a, qw, bias, schedule=f"kernel=wgmma,tile_m={tile_m},splits=1,stream_k=off")
    _check_stream_k_run(run, plain, _reference(a, qw, bias, schedule), a, dtype, seed=200)


@pytest.mark.parametrize("tile_m", [64, 128, 160, 192, 256])
@pytest.mark.parametrize("symmetric,dtype", [(False, torch.float16), (True, torch.bfloat16),
                                             (True, torch.float16), (False, torch.bfloat16)])
def test_ws_exact_scales(tile_m, symmetric, dtype):
    # INT8 per-channel on the warp-specialized tiles with exact scales (the default there): sums
    # of a (q - z) over the whole K, scaled once per column after the loop, stored whole, through
    # the split-K workspace (2 and 3 splits) or as stream-K; M past the tile, N cutting the last
    # column tile (1000 = 7 x 128 + 104), K off the k block (1440: 22 blocks and a half), bias.
    # Poisoned output against the fp64 product of the exact weights (q - z) * s; the rounded
    # tile's result to its rounding.
    if not _wgmma():
        pytest.skip("the wgmma kernels need an sm_90a build on a compute capability 9.0 device")
    m, n, k = tile_m + 37, 1000, 1440
    qw = _qweight(n, k, 8, -1, symmetric, dtype, seed=tile_m)
    a = _randn(m, k, dtype=dtype, seed=tile_m + 1, scale=1 / math.sqrt(k))
    bias = _randn(n, dtype=dtype, seed=tile_m + 2)
    for split in ("splits=1", "splits=2", "splits=3", "splits=1,stream_k=11"):
        schedule = f"kernel=wgmma,tile_m={tile_m},{split}"
        plan = _plan(m, qw, schedule)
        assert plan.producer and plan.exact_scales and plan.tile_m == tile_m, plan
        run = lambda: cute_gemm.mixed_gemm(a, qw, bias, schedule=schedule)  # noqa: E731
        out = assert_poisoned_run(run, _reference(a, qw, bias, schedule), dtype, k)
        rounded = cute_gemm.mixed_gemm(a, qw, bias, schedule=schedule + ",scales=rounded")
        assert not _plan(m, qw, schedule + ",scales=rounded").exact_scales
        torch.testing.assert_close(out.float(), rounded.float(), rtol=2e-2, atol=2e-2)


def test_ws_stream_k_default_plan():
    # Large M where the warp-specialized tiles leave a partial last wave: 4096x28672 at M = 512
    # (the 256-row tile: 448 tiles, 3 full waves of 132 and 52 tiles) and M = 768 (672 tiles: 5
    # waves and 12), on a 132-SM GPU; the result is the reference's, and the unsplit kernel's to
    # rounding.
    if not _wgmma():
        pytest.skip("the wgmma kernels need an sm_90a build on a compute capability 9.0 device")
    dtype = torch.bfloat16
    for m, n, k, bits, group in ((512, 28672, 4096, 4, 128), (768, 28672, 4096, 8, -1)):
        qw = _qweight(n, k, bits, group, True, dtype, seed=m)
        a = _randn(m, k, dtype=dtype, seed=m + 1, scale=1 / math.sqrt(k))
        plan = _plan(m, qw)
        if cute_gemm.device_spec().sm_count == 132:
            assert plan.producer and plan.stream_k_ctas == 132, plan
        run = lambda: cute_gemm.mixed_gemm(a, qw)  # noqa: E731
        out = assert_poisoned_run(run, _reference(a, qw), dtype, k)
        plain = cute_gemm.mixed_gemm(a, qw, schedule="stream_k=off")
        torch.testing.assert_close(out.float(), plain.float(), rtol=2e-2, atol=2e-2)


# The split-K sums of the wgmma tiles of 64 rows and more, into the workspace [splits][M][N]
# (WgmmaWarpSlice::store: row pointers for the column tiles inside N, value by value for the last):
# read back through mixed_gemm_partials from a NaN-poisoned block. M = 2 tiles - 7 rows, N = 392
# (the last column tile of 8), K = 896 in 3 splits: every element of every split written, the rows
# past M skipped (not spilled into the next split's first rows), each split the product over its
# own k blocks, and mixed_gemm's result their sum.
@pytest.mark.parametrize("bits,group,symmetric,dtype", [(4, 128, True, torch.float16),
                                                        (8, -1, False, torch.bfloat16),
                                                        (8, 64, True, torch.float16)])
def test_wgmma_split_sums_every_tile(bits, group, symmetric, dtype):
    if not _wgmma():
        pytest.skip("the wgmma kernel needs an sm_90a build on a compute capability 9.0 device")
    n, k, splits = 392, 896, 3
    block_k = 128 if bits == 4 else 64
    qw = _qweight(n, k, bits, group, symmetric, dtype, seed=bits + group)
    for tile_m, _, exact, tile_n, loads in _wgmma_tiles(bits):
        if tile_m < 64 or (_ws_exact(tile_m, exact) and group != -1):
            continue
        m = 2 * tile_m - 7
        a = _randn(m, k, dtype=dtype, seed=tile_m, scale=1 / math.sqrt(k))
        schedule = _tile_schedule(tile_m, exact, tile_n, loads) + f",splits={splits}"
        plan = _plan(m, qw, schedule)
        assert (plan.tile_m, plan.splits, plan.exact_scales) == (tile_m, splits, exact), plan
        torch.cuda.synchronize()
        ptrs = poison_allocator(splits * m * n, dtype=torch.float32)
        parts = torch.ops.cute_gemm.mixed_gemm_partials(a, qw.packed, qw.scales, qw.zeros, bits,
                                                        group, k, schedule)
        assert parts.data_ptr() in ptrs, "the allocator did not reuse the poisoned block"
        assert parts.shape == (splits, m, n) and not parts.isnan().any(), schedule
        w = qw.dequantize(torch.float32 if exact else None).double()
        per_split = -(-k // block_k // splits) * block_k
        for s in range(splits):
            ks = slice(s * per_split, min(k, (s + 1) * per_split))
            ref = a[:, ks].double() @ w[:, ks].t()
            torch.testing.assert_close(parts[s].double(), ref, rtol=1e-3,
                                       atol=1e-3 * ref.abs().max().item(), msg=schedule)
        out = cute_gemm.mixed_gemm(a, qw, schedule=schedule)
        assert_accurate(out, _reference(a, qw, None, schedule), dtype, k)


@pytest.mark.parametrize("trigger", ["early", "late"])
def test_trigger_chain(trigger):
    # A gated 16-row GEMM (Llama-3-8B's gate/up at M = 16, whose default plan lets the next kernel
    # launch at its start on a 132-SM GPU) and the down projection reading its output, back to
    # back and in a CUDA graph: with either trigger the chain's result is the reference's, and the
    # same bit for bit (the trigger moves when down's CTAs launch, never what they read).
    if not _wgmma():
        pytest.skip("the wgmma kernels need an sm_90a build on a compute capability 9.0 device")
    m, k, n_up, dtype = 16, 4096, 28672, torch.bfloat16
    gate_up = _qweight(n_up, k, 4, 128, True, dtype, seed=21)
    down = _qweight(k, n_up // 2, 4, 128, True, dtype, seed=22)
    x = _randn(m, k, dtype=dtype, seed=23, scale=1 / math.sqrt(k))
    sched = f"trigger={trigger}"
    plan = cute_gemm.mixed_plan(m, n_up, k, 4, 128, dtype, activation="silu_mul", schedule=sched)
    assert plan.early_dependents == (trigger == "early") and plan.tile_m == 16, plan

    def chain():
        h = cute_gemm.mixed_gemm(x, gate_up, activation="silu_mul", schedule=sched)
        return h, cute_gemm.mixed_gemm(h, down)

    h, out = chain()  # back to back on the stream; checked once both are done
    assert_accurate(h, _gated_reference(x, gate_up, None, None), dtype, k)
    assert_accurate(out, _reference(h, down), dtype, n_up // 2)
    h_late = cute_gemm.mixed_gemm(x, gate_up, activation="silu_mul", schedule="trigger=late")
    assert torch.equal(h, h_late) and torch.equal(out, cute_gemm.mixed_gemm(h_late, down))
    graph, replayed = capture_graph(lambda: chain()[1])
    for seed in range(3):
        x.copy_(_randn(m, k, dtype=dtype, seed=200 + seed, scale=1 / math.sqrt(k)))
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(replayed, chain()[1])


def test_default_plan_on_this_device():
    # The heuristic on this GPU's spec: one full wave of CTAs at decode sizes, splits meeting in
    # the workspace; the decode kernel up to M = 8, mma.sync up to M = 16, then the wgmma kernel
    # on Hopper builds and devices (elsewhere mma.sync below M = 192 and the dense path above).
    spec = cute_gemm.device_spec()
    props = torch.cuda.get_device_properties(0)
    sms = spec.sm_count
    assert sms == props.multi_processor_count
    assert (spec.cc_major, spec.cc_minor) == (props.major, props.minor)
    assert not spec.wgmma or torch.cuda.get_device_capability() == (9, 0)
    assert cute_gemm.device_spec(0).sm_count == sms
    hopper_132 = sms == 132 and torch.cuda.get_device_capability() == (9, 0)
    if hopper_132 and spec.wgmma:
        # The built-in H100 spec (what CPU-only tests plan for) is this GPU as the planner sees
        # it, so its plans are this GPU's.
        h100 = cute_gemm.device_spec("h100")
        for field in ("sm_count", "cc_major", "cc_minor", "smem_per_sm", "smem_per_block_optin",
                      "regs_per_sm", "max_threads_per_sm", "max_ctas_per_sm", "wgmma"):
            assert getattr(spec, field) == getattr(h100, field), (field, spec, h100)
        for m in (1, 5, 8, 9, 16, 17, 64, 128, 256, 1024):
            assert cute_gemm.mixed_plan(m, 8192, 8192).as_dict() == \
                cute_gemm.mixed_plan(m, 8192, 8192, device="h100").as_dict()

    def plan(m, n, k, bits, group=128):
        return cute_gemm.mixed_plan(m, n, k, bits, group)

    # Decode: CTAs of k slices (1, 2 or 4 warps sharing the activations) that split the k range,
    # one wave; a split-K grid (and the reduce kernel) only where the CTAs cannot fill the GPU and
    # each split keeps K >= 8192. On a 132-SM Hopper (227 KB of shared memory per SM), the
    # shapes measured best in benchmarks/results/NOTES.md (sessions 7 and 75: from M = 5 at most
    # 8 one-warp k slices where their CTAs are one per SM).
    for m, bits, k, n, want in ((1, 4, 8192, 8192, (8, 1, 1)), (1, 8, 8192, 8192, (8, 1, 1)),
                                (1, 4, 4096, 4096, (16, 1, 1)), (5, 4, 4096, 4096, (8, 1, 1)),
                                (5, 4, 4096, 28672, (8, 4, 1)), (8, 4, 8192, 8192, (12, 2, 1)),
                                (5, 4, 28672, 8192, (16, 4, 2)), (8, 8, 14336, 4096, (8, 1, 1)),
                                (4, 4, 8192, 8192, None)):
        p = plan(m, n, k, bits)
        assert (p.kernel, p.tile_m, p.fine_groups) == ("decode", 8, False)
        assert p.exact_scales and p.warps >= p.col_warps >= 1
        assert p.warps % p.col_warps == 0 and p.k_slices == p.warps // p.col_warps
        assert p.workspace_bytes == (0 if p.splits == 1 else p.splits * m * n * 4)
        assert p.splits == 1 or k // p.splits >= 8192
        if hopper_132 and want is not None:
            assert (p.warps, p.col_warps, p.splits) == want, (m, bits, k, n)
    p = plan(1, 512, 8192, 4)  # 16 column tiles
    assert p.splits > 1 and p.workspace_bytes > 0
    # M = 9..16: mma.sync without wgmma; with it, INT4 g128 takes wgmma's 16-row tile with exact
    # scales (8192^2: 4 splits of 2048, 28672 x 8192: 4 of 7168), INT8 wgmma's 32-row tile
    # (rounded weights); one wave of split-K CTAs each way.
    for m, bits, k in ((9, 4, 8192), (16, 4, 8192), (16, 4, 28672), (9, 8, 8192)):
        p = plan(m, 8192, k, bits)
        assert p.splits > 1
        if not spec.wgmma:
            assert (p.kernel, p.tile_m, p.fine_groups, p.exact_scales) == ("mma", 16, False, True)
        else:
            want = ("wgmma", 16, True) if bits == 4 else ("wgmma", 32, False)
            assert (p.kernel, p.tile_m, p.exact_scales) == want
        base = p.grid[0] * p.grid[1]
        assert base * p.splits <= p.ctas_per_sm * sms < base * (p.splits + 1)
    # From M = 17 the wgmma kernel where usable, INT4 g128 with exact scales in the 32-row tile,
    # rounded weights from 33 rows; one warpgroup per CTA up to 64 rows, two above; from 129 rows
    # the wide tile whose grid computes the fewest rows per SM (8192^2: one wave of 160 rows at
    # M = 129-160 and 257-320, of 192 at 161-192 and 321-384, 256 rows at 448).
    for m, tile_m, exact, groups in ((17, 32, True, 1), (64, 64, False, 1), (65, 128, False, 2),
                                     (128, 128, False, 2), (129, 160, False, 2),
                                     (300, 160, False, 2), (384, 192, False, 2),
                                     (448, 256, False, 2)):
        p = plan(m, 8192, 8192, 4)
        if spec.wgmma:
            assert (p.kernel, p.tile_m, p.exact_scales, p.warp_groups) == \
                ("wgmma", tile_m, exact, groups)
        elif m < 192:
            assert p.kernel == "mma" and p.exact_scales
        else:
            assert p.kernel == "dense" and p.instance is None
    # 256-row tiles whose grid would split K into slices of <= 2048 take 128-row tiles instead:
    # 4096^2 at M=256 (32 column tiles, ~4 splits of 1024), not 14336x4096 (slices of ~3584).
    if spec.wgmma:
        assert plan(256, 4096, 4096, 4).tile_m == 128
        assert plan(256, 4096, 14336, 4).tile_m == 256


@pytest.mark.parametrize("m", [9, 16])
@pytest.mark.parametrize("gated", [False, True])
@pytest.mark.parametrize("group,symmetric,dtype", [(-1, True, torch.bfloat16),
                                                   (-1, True, torch.float16),
                                                   (64, False, torch.float16)])
def test_int8_wide_default_plan(m, gated, group, symmetric, dtype):
    # INT8 at M = 9..16 where mma.sync's 16-row column tiles give the SMs 1.5 CTAs each: on
    # Hopper the default plan is that tile unsplit (gated in registers where gated), written
    # straight to the poisoned output; elsewhere whatever the planner picks. The last column tile
    # ragged.
    sms = cute_gemm.device_spec().sm_count
    n, k = 128 * (3 * sms // 2) + 144, 640
    qw = _qweight(n, k, 8, group, symmetric, dtype, seed=m)
    a = _randn(m, k, dtype=dtype, seed=m + 1, scale=1 / math.sqrt(k))
    activation = "silu_mul" if gated else None
    plan = cute_gemm.mixed_plan(m, n, k, 8, group, dtype, activation=activation)
    if _wgmma():
        assert (plan.kernel, plan.tile_m, plan.splits, plan.via_workspace) == \
            ("mma", 16, 1, False), plan
    ref = _gated_reference(a, qw, None, None) if gated else _reference(a, qw)
    run = lambda: cute_gemm.mixed_gemm(a, qw, activation=activation)  # noqa: E731
    out = assert_poisoned_run(run, ref, dtype, k)
    assert out.shape == (m, n // 2 if gated else n)


@pytest.mark.parametrize("m", [9, 16])
@pytest.mark.parametrize("group,symmetric,dtype", [(-1, True, torch.bfloat16),
                                                   (64, False, torch.float16)])
def test_int8_near_filling_default_plan(m, group, symmetric, dtype):
    # INT8 at M = 9..16 where mma.sync's 16-row column tiles give the SMs 0.55 to 1.5 CTAs each
    # (ungated): on Hopper the default plan is that tile in the wave model's splits, summed by the
    # reduce kernel into the poisoned output; elsewhere whatever the planner picks. The last
    # column tile ragged.
    sms = cute_gemm.device_spec().sm_count
    n, k = 128 * sms + 72, 1280
    qw = _qweight(n, k, 8, group, symmetric, dtype, seed=m)
    a = _randn(m, k, dtype=dtype, seed=m + 1, scale=1 / math.sqrt(k))
    plan = cute_gemm.mixed_plan(m, n, k, 8, group, dtype)
    if _wgmma():
        assert (plan.kernel, plan.tile_m) == ("mma", 16) and plan.splits > 1, plan
    out = assert_poisoned_run(lambda: cute_gemm.mixed_gemm(a, qw), _reference(a, qw), dtype, k)
    assert out.shape == (m, n)


# ---------------------------------------------------------------- each kernel, by schedule


def _reaching(inst):
    """(m, group, schedule) whose plan runs instance `inst` (a _C._mixed_instances() entry) on a
    [*, 640] x [136, 640] problem: M off the instance's token tile."""
    kernel, tile_m = inst["kernel"], inst["tile_m"]
    group = 32 if inst["fine_groups"] and kernel != "wgmma" else 128
    if kernel == "wgmma" and _ws_exact(tile_m, inst["exact_scales"]):
        group = -1  # scaled once after the loop: one group over K
    if kernel == "decode":
        return 5, group, "kernel=decode"
    if kernel == "mma":
        return tile_m - 3, group, "kernel=mma"
    return tile_m - 3, group, _wgmma_schedule(inst)


def _wgmma_schedule(inst):
    """The schedule that runs wgmma instance `inst`: its token tile, scales and width."""
    return _tile_schedule(inst["tile_m"], inst["exact_scales"], inst["tile_n"], _loads_of(inst))


@pytest.mark.parametrize("name", [i["name"] for i in cute_gemm._C._mixed_instances()])
def test_every_instance_runs(name):
    # Each instantiated kernel, reached by its schedule: the plan names it, the output block is
    # poisoned beforehand and the result is accurate and repeatable.
    inst = {i["name"]: i for i in cute_gemm._C._mixed_instances()}[name]
    if inst["kernel"] == "wgmma" and not _wgmma():
        pytest.skip("the wgmma kernels need an sm_90a build on a compute capability 9.0 device")
    dtype = torch.bfloat16 if inst["bf16"] else torch.float16
    m, group, schedule = _reaching(inst)
    n, k = 136, 640
    qw = _qweight(n, k, inst["bits"], group, False, dtype, seed=len(name))
    a = _randn(m, k, dtype=dtype, seed=7)
    bias = _randn(n, dtype=dtype, seed=8)
    plan = _plan(m, qw, schedule)
    assert (plan.instance, plan.kernel) == (name, inst["kernel"])
    assert_poisoned_run(lambda: cute_gemm.mixed_gemm(a, qw, bias, schedule=schedule),
                        _reference(a, qw, bias, schedule), dtype, k)


@pytest.mark.parametrize("bits,group,symmetric,dtype",
                         [pytest.param(*c, id=mixed_config_id(*c)) for c in MIXED_CONFIGS])
def test_mma_kernel_on_every_config(bits, group, symmetric, dtype):
    # On Hopper builds the wgmma kernel is the default above M = 16, so the mma.sync kernel (the
    # one sm_80 GPUs run) gets its own sweep here at every M, by schedule.
    for i, (m, (n, k)) in enumerate(itertools.product([1, 7, 16, 33, 64, 130],
                                                      [(8, 128), (136, 640)])):
        assert _plan(m, cute_gemm.quantize(torch.zeros(n, k, dtype=dtype), bits, group,
                                           symmetric), "kernel=mma").kernel == "mma"
        _run_case(m, n, k, bits, group, symmetric, dtype, i % 2 == 0,
                  seed=hash((bits, group, symmetric, m, n, k, "mma")) % 100000,
                  schedule="kernel=mma")


@pytest.mark.parametrize("bits,group,symmetric,dtype",
                         [pytest.param(*c, id=mixed_config_id(*c)) for c in MIXED_CONFIGS
                          if c[0] == 4])
def test_mma_two_k_slices_on_every_config(bits, group, symmetric, dtype):
    # INT4's 16-row mma.sync tile in CTAs of 2 k slices (on Hopper the default for a gated GEMM
    # with groups shorter than a k block whose K is too short for 3 splits of 8 k blocks), every M
    # it takes: K of 1 k block (slice 1
    # empty), 5 (slices of 2 and 3) and 11, N off the 128-column tile, unsplit and split.
    cases = itertools.product([1, 9, 16], [(8, 128), (136, 640), (264, 1408)])
    for i, (m, (n, k)) in enumerate(cases):
        schedule = "kernel=mma,k_slices=2" + (",splits=2" if i % 3 == 2 else "")
        plan = _plan(m, cute_gemm.quantize(torch.zeros(n, k, dtype=dtype), bits, group,
                                           symmetric), schedule)
        assert (plan.kernel, plan.tile_m, plan.k_slices, plan.threads) == ("mma", 16, 2, 256)
        seed = hash((bits, group, symmetric, m, n, k, "mma2")) % 100000
        qw = _qweight(n, k, bits, group, symmetric, dtype, seed=seed)
        a = _randn(m, k, dtype=dtype, seed=seed + 1)
        bias = _randn(n, dtype=dtype, seed=seed + 2) if i % 2 == 0 else None
        assert_poisoned_run(lambda: cute_gemm.mixed_gemm(a, qw, bias, schedule=schedule),
                            _reference(a, qw, bias, schedule), dtype, k)


@pytest.mark.parametrize("bits,group,symmetric,dtype",
                         [pytest.param(*c, id=mixed_config_id(*c)) for c in MIXED_CONFIGS])
def test_decode_kernel_on_every_config(bits, group, symmetric, dtype):
    # The decode kernel (the default at small M) at every M it takes, N not a multiple of its
    # 32-column warp tiles, K off the k block, k slices of 1, 2 and 4 warps in turn.
    cases = itertools.product([1, 2, 5, 8], [(8, 128), (136, 640), (264, 1408)])
    for i, (m, (n, k)) in enumerate(cases):
        cw = (1, 2, 4)[i % 3]
        schedule = {"kernel": "decode", "col_warps": cw}
        plan = _plan(m, cute_gemm.quantize(torch.zeros(n, k, dtype=dtype), bits, group,
                                           symmetric), schedule)
        assert (plan.kernel, plan.col_warps) == ("decode", cw)
        _run_case(m, n, k, bits, group, symmetric, dtype, i % 2 == 0,
                  seed=hash((bits, group, symmetric, m, n, k, "decode")) % 100000,
                  schedule=schedule)


# (token tile, warpgroups per CTA, exact scales, columns per CTA, loads) of each wgmma instance;
# the 16-row tiles are INT4's, the exact ones of 64 rows and up (warp-specialized) INT8's; loads
# names the form of a tile that has two (INT4's 64-row tile: TMA, and cp.async), "" the one form.
WGMMA_TILES = [(16, 1, False, 128, ""), (16, 1, False, 64, ""), (16, 1, True, 128, ""),
               (16, 1, True, 64, ""), (32, 1, False, 128, ""), (32, 1, True, 128, ""),
               (64, 1, False, 128, "tma"), (64, 1, False, 128, "cp_async"),
               (128, 2, False, 128, ""), (160, 2, False, 128, ""),
               (192, 2, False, 128, ""), (256, 2, False, 128, ""),
               (64, 1, True, 128, ""), (128, 2, True, 128, ""), (160, 2, True, 128, ""),
               (192, 2, True, 128, ""), (256, 2, True, 128, "")]


def _ws_exact(tile_m, exact):
    """Whether a wgmma tile is INT8's warp-specialized one with exact scales, which it runs for
    one group over K only (per-channel scales, scaled once after the loop)."""
    return exact and tile_m >= 64


def _wgmma_tiles(bits):
    # INT8's 64-row tile has one form (warp-specialized, filled by TMA): its loads are "".
    return [t[:4] + (t[4] if bits == 4 else "",) for t in WGMMA_TILES
            if (t[0] != 16 or bits == 4) and (not _ws_exact(t[0], t[2]) or bits == 8)
            and (t[4] != "cp_async" or bits == 4)]


def _tile_schedule(tile_m, exact, tile_n=128, loads=""):
    # tile_n always: the 16-row tile's default width depends on the problem; loads where the
    # tile has two forms (the planner picks one by M and k blocks).
    return (f"kernel=wgmma,tile_m={tile_m},scales={'exact' if exact else 'rounded'},"
            f"tile_n={tile_n}" + (f",loads={loads}" if loads else ""))


def _loads_of(inst):
    """WGMMA_TILES' loads of a wgmma instance: the form of INT4's 64-row tile, "" elsewhere."""
    if (inst["bits"], inst["tile_m"], inst["producer"]) != (4, 64, False):
        return ""
    return "tma" if inst["tma_loads"] else "cp_async"


def test_wgmma_tiles_are_the_instances():
    # WGMMA_TILES, which the sweeps below walk, lists every wgmma instance of each dtype and bits.
    for bf16, bits in itertools.product((False, True), (4, 8)):
        built = sorted((i["tile_m"], i["warp_groups"], i["exact_scales"], i["tile_n"],
                        _loads_of(i)) for i in cute_gemm._C._mixed_instances()
                       if i["kernel"] == "wgmma" and i["bf16"] == bf16 and i["bits"] == bits)
        assert built == sorted(_wgmma_tiles(bits)), (bf16, bits)


@pytest.mark.parametrize("bits,group,symmetric,dtype",
                         [pytest.param(*c, id=mixed_config_id(*c)) for c in MIXED_CONFIGS])
def test_wgmma_kernel_on_every_tile(bits, group, symmetric, dtype):
    # Every wgmma instance (token tile, with its warpgroups per CTA) on every configuration: M off
    # the token tile and across several of them (M = 200: the last 160- and 192-row tiles load one
    # or two of their activation row boxes and skip the rest), N off the CTA's 64 or 128 columns,
    # K off the k block; poisoned output, bit-identical repeats.
    if not _wgmma():
        pytest.skip("the wgmma kernel needs an sm_90a build on a compute capability 9.0 device")
    cases = itertools.product([17, 64, 130, 200, 290], [(136, 640), (392, 1408)])
    for i, (m, (n, k)) in enumerate(cases):
        qw = _qweight(n, k, bits, group, symmetric, dtype, seed=i)
        a = _randn(m, k, dtype=dtype, seed=100 + i)
        bias = _randn(n, dtype=dtype, seed=200 + i) if i % 2 else None
        refs = {}  # by the tile's exact_scales: fp32 scales of exact sums, or rounded weights
        for tile_m, groups, exact, tile_n, loads in _wgmma_tiles(bits):
            schedule = _tile_schedule(tile_m, exact, tile_n, loads)
            if _ws_exact(tile_m, exact) and group != -1:  # scaled once: one group over K only
                with pytest.raises(ValueError, match="needs one group over K"):
                    _plan(m, qw, schedule)
                continue
            plan = _plan(m, qw, schedule)
            assert (plan.kernel, plan.tile_m, plan.warp_groups, plan.exact_scales,
                    plan.tile_n) == ("wgmma", tile_m, groups, exact, tile_n)
            assert not loads or plan.tma_loads == (loads == "tma"), (schedule, plan)
            if exact not in refs:
                refs[exact] = _reference(a, qw, bias, schedule)
            ref = refs[exact]
            torch.cuda.synchronize()
            ptrs = poison_allocator(m * n, dtype=dtype)
            out = cute_gemm.mixed_gemm(a, qw, bias, schedule=schedule)
            assert out.data_ptr() in ptrs, "the allocator did not reuse the poisoned block"
            assert_accurate(out, ref, dtype, k)
            assert torch.equal(out, cute_gemm.mixed_gemm(a, qw, bias, schedule=schedule))


@pytest.mark.parametrize("k", [64, 1440, 4160])
@pytest.mark.parametrize("bits,symmetric,dtype", [(4, True, torch.float16),
                                                  (4, False, torch.bfloat16),
                                                  (8, False, torch.float16)])
def test_exact_tiles_per_channel_k_off_blocks(k, bits, symmetric, dtype):
    # Per-channel scales over a K that is no multiple of INT4's 128-wide k block (K = 64, less
    # than one block; 1440 and 4160, a last block of 32 or 64): one group over all of K, so the
    # 16- and 32-row tiles scale each block's sums (mixed::whole_block_groups) and INT4 takes them
    # by default at M = 9-32 on Hopper; INT8 by schedule. Poisoned output, accurate, bit-identical
    # repeats.
    if not _wgmma():
        pytest.skip("the wgmma kernel needs an sm_90a build on a compute capability 9.0 device")
    n = 392
    qw = _qweight(n, k, bits, -1, symmetric, dtype, seed=k + bits)
    for m, schedule in ((9, None), (16, None), (24, None), (32, None),
                        (13, "scales=exact,splits=1"), (29, "scales=exact,splits=2"),
                        (20, "kernel=wgmma,tile_m=32,scales=exact")):
        if bits == 8 and schedule is None:
            continue
        a = _randn(m, k, dtype=dtype, seed=m, scale=1 / math.sqrt(k))
        bias = _randn(n, dtype=dtype, seed=m + 1)
        plan = _plan(m, qw, schedule)
        assert (plan.kernel, plan.exact_scales) == ("wgmma", True), plan
        assert plan.tile_m == (16 if bits == 4 and m <= 16 else 32), plan
        assert_poisoned_run(lambda: cute_gemm.mixed_gemm(a, qw, bias, schedule=schedule),
                            _reference(a, qw, bias, schedule), dtype, k)


@pytest.mark.parametrize("symmetric,dtype", [(False, torch.float16), (True, torch.bfloat16)])
def test_int8_exact_scales_by_default(symmetric, dtype):
    # INT8's 32-row wgmma tile takes exact scales by default where its grid (2 CTAs per SM) is
    # one wave and fills its slots better than the rounded tile's (3 per SM): split K in a ragged
    # last column tile, gated unsplit in registers, and a grid that keeps rounded weights. M off
    # the tile, bias, fresh inputs, poisoned output against the fp64 product of the weights the
    # plan uses (exact (q - z) * s, or rounded to the activation dtype).
    if not _wgmma():
        pytest.skip("the wgmma kernels need an sm_90a build on a compute capability 9.0 device")
    sms = cute_gemm.device_spec().sm_count
    for m, n, k, act, exact, splits in ((24, 4040, 4096, None, True, 8),
                                        (29, 128 * (sms * 8 // 5) - 48, 1408, "silu_mul", True,
                                         1),
                                        (17, 6144, 4096, None, False, 8)):
        qw = _qweight(n, k, 8, -1, symmetric, dtype, seed=m)
        bias = _randn(n, dtype=dtype, seed=m + 2)
        plan = cute_gemm.mixed_plan(m, n, k, 8, -1, dtype, activation=act)
        assert (plan.kernel, plan.tile_m, plan.exact_scales, plan.splits) == \
            ("wgmma", 32, exact, splits), plan
        assert plan.via_workspace == (splits > 1), plan
        # The reference takes the ungated plan's scales: the same grid, the same choice.
        assert _plan(m, qw).exact_scales == exact
        _check_default_plan(m, n, k, qw, dtype, act, bias)


@pytest.mark.parametrize("bits,group,symmetric", [(4, 128, True), (8, -1, False)])
@pytest.mark.parametrize("raster_m", [1, 2, 3, 8, 64])
def test_wgmma_raster_orders(bits, group, symmetric, raster_m):
    # The warp-specialized kernel's tile order (schedule raster_m): every order computes every
    # tile once, including a last group with fewer M tiles than raster_m and N and M tiles cut
    # at the edges; split-K too. Poisoned output, accurate, bit-identical to row-major.
    if not _wgmma():
        pytest.skip("the wgmma kernel needs an sm_90a build on a compute capability 9.0 device")
    for i, (m, n, k, tile_m, splits) in enumerate([(1300, 1416, 1024, 256, 1),
                                                    (700, 2056, 640, 128, 1),
                                                    (530, 904, 2048, 160, 2)]):
        qw = _qweight(n, k, bits, group, symmetric, torch.float16, seed=300 + i)
        a = _randn(m, k, seed=310 + i)
        bias = _randn(n, seed=320 + i)
        base = f"kernel=wgmma,tile_m={tile_m},splits={splits}"
        schedule = f"{base},raster_m={raster_m}"
        plan = _plan(m, qw, schedule)
        assert plan.producer and plan.raster_m == raster_m and plan.splits == splits
        torch.cuda.synchronize()
        ptrs = poison_allocator(m * n, dtype=torch.float16)
        out = cute_gemm.mixed_gemm(a, qw, bias, schedule=schedule)
        assert out.data_ptr() in ptrs, "the allocator did not reuse the poisoned block"
        assert_accurate(out, _reference(a, qw, bias, schedule), torch.float16, k)
        assert torch.equal(out, cute_gemm.mixed_gemm(a, qw, bias, schedule=f"{base},raster_m=1"))


@pytest.mark.parametrize("m", [1, 3, 8])
@pytest.mark.parametrize("warps,col_warps", [(1, 1), (7, 1), (16, 1), (2, 2), (6, 2), (12, 2),
                                             (4, 4), (8, 4), (12, 4)])
def test_decode_kernel_cta_shapes(m, warps, col_warps):
    # Every CTA shape the decode kernel can run: k slices of 1, 2 or 4 warps side by side (sharing
    # the activations, at a named barrier per k block), 1..16 warps per CTA, their k slices' sums
    # added in shared memory; N off the CTA's columns (32 col_warps), fine groups, K % 128 != 0.
    # The scheduled warps are rounded down to whole k slices that fit in shared memory.
    n, k = 392, 4224  # 33 k blocks
    qw = _qweight(n, k, 4, 64, False, torch.bfloat16, seed=51)
    a = _randn(m, k, dtype=torch.bfloat16, seed=52 + m)
    schedule = f"kernel=decode,warps={warps},col_warps={col_warps}"
    plan = _plan(m, qw, schedule)
    assert plan.kernel == "decode" and plan.col_warps == col_warps
    assert plan.warps % col_warps == 0 and col_warps <= plan.warps <= warps
    assert plan.k_slices == plan.warps // col_warps and plan.threads == 32 * plan.warps
    out = cute_gemm.mixed_gemm(a, qw, schedule=schedule)
    assert torch.equal(out, cute_gemm.mixed_gemm(a, qw, schedule=schedule))
    assert_accurate(out, _reference(a, qw, None, schedule), torch.bfloat16, k)


@pytest.mark.parametrize("n,k,bits,group", [
    (400, 4160, 4, 64),    # 33 k blocks, 65 groups: the last block's second scale row is past K
    (400, 4224, 4, 128),   # 33 k blocks of one group row each
    (400, 4224, 8, -1),    # per-channel, K not a power of two: one row throughout
    (400, 4160, 8, 64),    # INT8: 65 k blocks of one group row each
    (400, 4096, 8, 32),    # INT8 fine groups: 2 rows a block
])
@pytest.mark.parametrize("symmetric", [True, False])
def test_decode_single_row(n, k, bits, group, symmetric):
    # M = 1 in one-warp k slices runs the single-row instance (each lane one small copy per k
    # block: a scale, zero-point or activation unit): N off the 32-column tiles, K past its last
    # k block, splits (k slices starting mid-K), gated; poisoned outputs, fp64 reference.
    for dtype in (torch.float16, torch.bfloat16):
        qw = _qweight(n, k, bits, group, symmetric, dtype, seed=k + bits)
        a = _randn(1, k, dtype=dtype, seed=3)
        bias = _randn(n, dtype=dtype, seed=4)
        for schedule in (None, "kernel=decode,warps=5,col_warps=1", "kernel=decode,splits=3"):
            plan = _plan(1, qw, schedule)
            assert plan.kernel == "decode" and plan.single_row, plan
            run = lambda: cute_gemm.mixed_gemm(a, qw, bias, schedule=schedule)  # noqa: E731
            assert_poisoned_run(run, _reference(a, qw, bias, schedule), dtype, k)
        ag = _randn(1, k, dtype=dtype, seed=5, scale=1 / math.sqrt(k))
        plan = cute_gemm.mixed_plan(1, n, k, bits, group, dtype, activation="silu_mul")
        assert plan.single_row
        run = lambda: cute_gemm.mixed_gemm(ag, qw, bias, activation="silu_mul")  # noqa: E731
        assert_poisoned_run(run, _gated_reference(ag, qw, bias, None), dtype, k)
    # INT4 with 32-element groups does not fit one copy per lane (48 units with zero points).
    assert not cute_gemm.mixed_plan(1, 400, 4096, 4, 32, torch.float16).single_row
    assert not cute_gemm.mixed_plan(2, 400, 4096, 4, 128, torch.float16).single_row


@pytest.mark.parametrize("splits", [1, 3, 64])
@pytest.mark.parametrize("m", [1, 5, 8])
def test_decode_kernel_scheduled_splits(m, splits):
    # Every split count, down to one k block per split (the reduction adds 33 partial sums), and
    # repeated runs bit-identical.
    n, k = 200, 4224  # 33 k blocks of 128 (INT4): the last split is short; K % 128 != 0
    qw = _qweight(n, k, 4, 64, True, torch.float16, seed=31)
    a = _randn(m, k, seed=32)
    schedule = f"kernel=decode,splits={splits}"
    plan = _plan(m, qw, schedule)
    assert plan.kernel == "decode" and plan.splits == min(splits, 33)
    # Each k slice of a CTA gets a part of the split's k blocks: never more k slices than blocks.
    assert 1 <= plan.k_slices <= -(-33 // plan.splits)
    out = cute_gemm.mixed_gemm(a, qw, schedule=schedule)
    assert torch.equal(out, cute_gemm.mixed_gemm(a, qw, schedule=schedule))
    assert_accurate(out, _reference(a, qw, None, schedule), torch.float16, k)


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
    schedule = f"kernel={kernel}"
    for m in (1, 3, 8):
        a = (1.0 + 0.25 * _randn(m, k, dtype=torch.float32, seed=42 + m)).to(dtype)
        assert _plan(m, qw, schedule).kernel == kernel
        out = cute_gemm.mixed_gemm(a, qw, schedule=schedule)
        assert_accurate(out, _reference(a, qw, None, schedule), dtype, k)


def test_kernel_schedules_on_this_device():
    usable = _wgmma()
    qw = _qweight(4096, 4096, 4, 128, True, torch.float16, seed=81)
    default = _plan(64, qw).kernel
    assert default == ("wgmma" if usable else "mma")
    assert _plan(1, qw).kernel == "decode"
    assert _plan(64, qw, "kernel=mma").kernel == "mma"
    assert _plan(1, qw, "kernel=mma").kernel == "mma"
    a1, a9 = _randn(1, 4096, seed=82), _randn(9, 4096, seed=83)
    if usable:
        # Scheduled, wgmma also takes M <= 8 (INT4 in 16-row token tiles).
        plan = _plan(1, qw, "kernel=wgmma")
        assert (plan.kernel, plan.tile_m) == ("wgmma", 16)
        out = cute_gemm.mixed_gemm(a1, qw, schedule="kernel=wgmma")
        assert_accurate(out, _reference(a1, qw, None, "kernel=wgmma"), torch.float16, 4096)
    else:
        # No silent fallback: a schedule this device cannot run is refused, before any launch.
        with pytest.raises(ValueError, match="kernel=wgmma needs a Hopper GPU"):
            _plan(64, qw, "kernel=wgmma")
        with pytest.raises(ValueError, match=r"cute_gemm\.mixed_gemm: schedule: kernel=wgmma"):
            cute_gemm.mixed_gemm(a9, qw, schedule="kernel=wgmma")
    with pytest.raises(ValueError, match=r"cute_gemm\.mixed_gemm: schedule: kernel=decode runs "
                                         r"up to M=8; got M=9"):
        cute_gemm.mixed_gemm(a9, qw, schedule="kernel=decode")
    with pytest.raises(ValueError, match=r"cute_gemm\.mixed_gemm: schedule: tile_m applies to "
                                         r"the wgmma kernel; this plan runs mma"):
        MIXED(a9, qw.packed, qw.scales, qw.zeros, 4, 128, 4096, None, "kernel=mma,tile_m=64")
    with pytest.raises(ValueError, match=r"splits applies to the fused kernels"):
        cute_gemm.mixed_gemm(a9, qw, schedule="kernel=dense,splits=2")


def test_schedules_leave_no_state_behind():
    # A schedule is an argument of one call: calls with other schedules before, between and after
    # change neither the default plan nor its output (nothing is process-wide any more).
    qw = _qweight(4104, 4224, 4, 128, False, torch.float16, seed=91)
    for m in (1, 16, 64):
        a = _randn(m, 4224, seed=92 + m)
        plan = _plan(m, qw).as_dict()
        first = cute_gemm.mixed_gemm(a, qw)
        others = ["kernel=mma,splits=5", "kernel=dense"] + \
            (["kernel=decode,warps=4,col_warps=4"] if m <= 8 else []) + \
            (["kernel=wgmma,tile_m=256"] if _wgmma() else [])
        for schedule in others:
            cute_gemm.mixed_gemm(a, qw, schedule=schedule)
            assert torch.equal(cute_gemm.mixed_gemm(a, qw), first), schedule
            assert _plan(m, qw).as_dict() == plan
        # Interleaved on two streams: each call keeps its own plan.
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            scheduled = cute_gemm.mixed_gemm(a, qw, schedule="kernel=mma,splits=2")
        default = cute_gemm.mixed_gemm(a, qw)
        torch.cuda.current_stream().wait_stream(side)
        assert torch.equal(default, first)
        assert torch.equal(scheduled, cute_gemm.mixed_gemm(a, qw, schedule="kernel=mma,splits=2"))


@pytest.mark.parametrize("m,n,k,bits,group,dtype", [
    (100, 264, 640, 4, 128, torch.float16), (255, 4104, 4224, 4, 32, torch.bfloat16),
    (300, 136, 2048, 8, -1, torch.float16), (1000, 520, 1024, 4, 64, torch.float16),
    (1000, 264, 640, 8, 32, torch.bfloat16)])
def test_fused_kernel_at_large_m(m, n, k, bits, group, dtype):
    # The fused kernels' M tiling (several token tiles) at sizes where the op takes the dense path
    # without the wgmma kernel: mma.sync on every GPU, wgmma on Hopper; poisoned output.
    qw = _qweight(n, k, bits, group, False, dtype, seed=31)
    a = _randn(m, k, dtype=dtype, seed=32)
    bias = _randn(n, dtype=dtype, seed=33)
    for kernel in ["mma"] + (["wgmma"] if _wgmma() else []):
        schedule = f"kernel={kernel}"
        assert _plan(m, qw, schedule).kernel == kernel
        ref = _reference(a, qw, bias, schedule)
        torch.cuda.synchronize()
        ptrs = poison_allocator(m * n, dtype=dtype)
        out = cute_gemm.mixed_gemm(a, qw, bias, schedule=schedule)
        assert out.data_ptr() in ptrs, "the allocator did not reuse the poisoned block"
        assert_accurate(out, ref, dtype, k)
    # And the dense path for the same problem agrees within the weight rounding.
    assert _plan(m, qw, "kernel=dense").kernel == "dense"
    torch.cuda.synchronize()
    ptrs = poison_allocator(n * k, m * n, dtype=dtype)
    dense = cute_gemm.mixed_gemm(a, qw, bias, schedule="kernel=dense")
    assert dense.data_ptr() in ptrs, "the allocator did not reuse the poisoned block"
    assert_accurate(dense, _reference(a, qw, bias, "kernel=dense"), dtype, k)



# ------------------------------------------------------------------- the occupancy model

# Decode CTA shapes (warps, col_warps) by schedule: 1-, 2- and 4-warp k slices, from one k slice
# to 16 warps (rounded down to what fits in shared memory at larger M).
OCCUPANCY_DECODE_SHAPES = [(1, 1), (4, 1), (16, 1), (2, 2), (8, 2), (16, 2), (4, 4), (16, 4)]


def _occupancy_plans():
    """(problem, plan) on this GPU for problems and schedules that together select every
    instance it runs: the default plans across M, bits, group sizes (fine and coarse) and dtypes,
    the mma.sync kernel and each wgmma instance by schedule (Hopper's default never picks the
    32- and 64-row mma.sync tiles), and the decode kernel at several CTA shapes and M (its
    shared memory grows with the rows of A it stages)."""
    decode = [f"kernel=decode,warps={w},col_warps={cw}" for w, cw in OCCUPANCY_DECODE_SHAPES]
    for dtype, bits, group, (n, k) in itertools.product(
            DTYPES, (4, 8), (32, 128, -1), ((4096, 4096), (512, 14336))):
        schedules = ["kernel=mma"] + ([_tile_schedule(t, e, w, ld)
                                       for t, _, e, w, ld in _wgmma_tiles(bits)
                                       if not _ws_exact(t, e) or group == -1]
                                      if _wgmma() else [])
        two_slices = ["kernel=mma,k_slices=2"] if bits == 4 else []
        for m in (1, 3, 5, 8, 9, 16, 17, 32, 33, 64, 65, 128, 129, 256, 1024):
            for schedule in [None] + schedules + (decode if m <= 8 else []) + \
                    (two_slices if m <= 16 else []):
                plan = cute_gemm.mixed_plan(m, n, k, bits, group, dtype, schedule=schedule)
                if plan.kernel != "dense":
                    yield (m, n, k, bits, group, dtype, schedule), plan


def test_planned_occupancy_matches_gpu():
    # The planner's occupancy model (registers counted per SM sub-partition from each config's
    # declared registers, shared memory, threads) decides split-K and the decode CTA shape; its
    # ctas_per_sm must be what the GPU keeps resident of the launch the plan makes:
    # cudaOccupancyMaxActiveBlocksPerMultiprocessor on the very kernel, threads and dynamic shared
    # memory its instance's launcher uses (_C._mixed_occupancy). Exact equality: the planner
    # neither caps nor floors the count (every kernel's comes from the occupancy model), so a
    # stale kRegisters / registers(col_warps) in a config, or a wrong rule in the model, fails
    # here.
    instances = {i["name"]: i for i in cute_gemm._C._mixed_instances()}
    supported = {name for name, inst in instances.items()
                 if inst["kernel"] != "wgmma" or _wgmma()}
    seen, gpu, wrong = set(), {}, {}
    for problem, plan in _occupancy_plans():
        seen.add(plan.instance)
        # The GPU's count depends only on what the launch is made of: query each launch once.
        key = (plan.instance, plan.threads, plan.smem_bytes, plan.warps, plan.col_warps,
               plan.gated, plan.single_row)
        if key not in gpu:
            gpu[key] = cute_gemm._C._mixed_occupancy(plan)
        if plan.ctas_per_sm != gpu[key] or gpu[key] < 1:
            wrong.setdefault(key, f"{problem}: planned {plan.ctas_per_sm}, GPU {gpu[key]} "
                                  f"({plan}; registers {instances[plan.instance]['registers']})")
    assert not wrong, "planned CTAs per SM differ from the GPU's (or none fits):\n" + \
        "\n".join(wrong.values())
    assert seen == supported, ("instances no plan selected", sorted(supported - seen))
    # The decode kernel was checked at several CTA shapes, both of its variants among them.
    decode_keys = [key for key in gpu if instances[key[0]]["kernel"] == "decode"]
    decode_shapes = {(w, cw) for _, _, _, w, cw, _, _ in decode_keys}
    assert {cw for _, cw in decode_shapes} == {1, 2, 4} and len(decode_shapes) >= 8
    # ... and with and without single-row copies (another kernel, another register count).
    assert {single_row for *_, single_row in decode_keys} == {False, True}


# ------------------------------------------------------------- activation="silu_mul" (gated)

def _gated_reference(a, qw, bias, schedule):
    """SiLU(g) * u of the fp64 product's halves (the dense path rounds g and u to the activation
    dtype first, as at::linear does)."""
    pre = _reference(a, qw, bias, schedule)
    if _plan(a.shape[0], qw, schedule).kernel == "dense":
        pre = pre.to(a.dtype).double()
    g, u = pre.chunk(2, dim=-1)
    return torch.nn.functional.silu(g) * u


def _check_default_plan(m, n, k, qw, dtype, act, bias=None):
    """The default plan's mixed_gemm (gated where act is given, with bias where given) on fresh
    [m, k] activations into a poisoned output, against the fp64 reference."""
    a = _randn(m, k, dtype=dtype, seed=m + 1, scale=1 / math.sqrt(k))
    run = lambda: cute_gemm.mixed_gemm(a, qw, bias, activation=act)  # noqa: E731
    ref = _gated_reference(a, qw, bias, None) if act else _reference(a, qw, bias)
    out = assert_poisoned_run(run, ref, dtype, k)
    assert out.shape == (m, n // 2 if act else n)


def _gated_schedules():
    """Every way a gated GEMM runs: the decode kernel, mma.sync's 16-row tile and wgmma's exact
    16- and 32-row tiles gating in registers (1-warp and shared k slices, rows past M; wgmma's
    splits in a cluster), through split-K's reduce kernel, and each other kernel through the fp32
    workspace (one slice or split)."""
    return [(1, "kernel=decode"), (5, "kernel=decode,warps=4,col_warps=2"),
            (8, "kernel=decode,splits=3"), (16, "kernel=mma"), (16, "kernel=mma,splits=1"),
            (11, "kernel=mma,splits=1"), (40, "kernel=mma,splits=2"),
            (13, "kernel=mma,k_slices=2"), (16, "kernel=mma,k_slices=2,splits=2"),  # INT4
            (130, "kernel=dense"), (3, None), (100, None),
            (16, _tile_schedule(16, True) + ",splits=1"),  # INT4
            (9, _tile_schedule(16, True, 64) + ",splits=1"),
            (12, _tile_schedule(16, True) + ",splits=2"), (16, _tile_schedule(16, False)),
            (12, _tile_schedule(16, True, 64) + ",splits=3"),
            (12, _tile_schedule(16, True, 64) + ",splits=3,reduce=kernel"),
            (29, _tile_schedule(32, True) + ",splits=2"),
            (29, _tile_schedule(32, True) + ",splits=1"), (24, _tile_schedule(32, False)),
            (61, _tile_schedule(64, False)),
            (125, _tile_schedule(128, False) + ",splits=2"), (250, _tile_schedule(256, False))]


@pytest.mark.parametrize("m,schedule", _gated_schedules())
@pytest.mark.parametrize("bits,group,symmetric,dtype", [(4, 128, True, torch.float16),
                                                         (4, 32, False, torch.bfloat16),
                                                         (8, -1, True, torch.bfloat16),
                                                         (8, 64, False, torch.float16)])
def test_gated_on_every_kernel(m, schedule, bits, group, symmetric, dtype):
    if schedule is not None and "tile_m" in schedule and not _wgmma():
        pytest.skip("the wgmma kernels need an sm_90a build on a compute capability 9.0 device")
    if schedule is not None and "k_slices" in schedule and bits != 4:
        with pytest.raises(ValueError, match="k_slices=2 exceeds the 1 of"):
            cute_gemm.mixed_plan(m, 272, 640, bits, group, dtype, schedule=schedule,
                                 activation="silu_mul")
        return
    if schedule is not None and "tile_m=16" in schedule and bits != 4:
        with pytest.raises(ValueError, match="no wgmma instance with tile_m=16"):
            cute_gemm.mixed_plan(m, 272, 640, bits, group, dtype, schedule=schedule,
                                 activation="silu_mul")
        return
    # N = 2 x 136: each half 17 n8 blocks, so warps and CTA tiles straddle the two halves and N.
    n, k = 272, 640
    qw = _qweight(n, k, bits, group, symmetric, dtype, seed=m)
    a = _randn(m, k, dtype=dtype, seed=m + 1, scale=1 / math.sqrt(k))
    bias = _randn(n, dtype=dtype, seed=m + 2)
    plan = cute_gemm.mixed_plan(m, n, k, bits, group, dtype, schedule=schedule,
                                activation="silu_mul")
    assert plan.gated
    if schedule is not None and ("tile_m=16" in schedule or "tile_m=32" in schedule):
        # The 16- and 32-row tiles gate in registers when exact and unsplit, or split with the
        # 16-row tile in 64 columns, whose splits add their sums in a cluster (unless the
        # schedule asks for the reduce kernel).
        cluster = (plan.splits > 1 and plan.tile_n == 64 and "reduce=kernel" not in schedule)
        in_registers = "scales=exact" in schedule and (plan.splits == 1 or cluster)
        assert plan.via_workspace == (not in_registers), plan
        assert plan.reduce_in_cluster == (in_registers and plan.splits > 1), plan
    run = lambda: cute_gemm.mixed_gemm(a, qw, bias, schedule=schedule,  # noqa: E731
                                       activation="silu_mul")
    ref = _gated_reference(a, qw, bias, schedule)
    if plan.kernel == "dense":
        # ATen gates the dense GEMM's output: its temporaries decide which block the result
        # gets, so the poisoned block is not necessarily it.
        out = run()
        assert_accurate(out, ref, dtype, k)
    else:
        out = assert_poisoned_run(run, ref, dtype, k)
    assert out.shape == (m, n // 2)


@pytest.mark.parametrize("m", [9, 16])
@pytest.mark.parametrize("group,symmetric,dtype", [(128, True, torch.bfloat16),
                                                   (128, False, torch.float16),
                                                   (-1, True, torch.bfloat16)])
def test_gated_int4_default_plan_in_registers(m, group, symmetric, dtype):
    # INT4 at M = 9..16 with groups of whole k blocks: on Hopper the default plan of a wide gated
    # GEMM is wgmma's exact 16-row tile unsplit, SiLU(gate) * up in registers, written straight to
    # the poisoned output; elsewhere whatever the planner picks. Each half of N ends in a ragged
    # column tile, so CTA tiles straddle the halves.
    sms = cute_gemm.device_spec().sm_count
    n, k = 2 * (128 * sms + 72), 1408  # 11 k blocks: the per-block loop's odd last block
    qw = _qweight(n, k, 4, group, symmetric, dtype, seed=m)
    a = _randn(m, k, dtype=dtype, seed=m + 1, scale=1 / math.sqrt(k))
    bias = _randn(n, dtype=dtype, seed=m + 2)
    plan = cute_gemm.mixed_plan(m, n, k, 4, group, dtype, activation="silu_mul")
    if _wgmma():
        assert (plan.kernel, plan.tile_m, plan.exact_scales, plan.splits, plan.via_workspace) == \
            ("wgmma", 16, True, 1, False), plan
    run = lambda: cute_gemm.mixed_gemm(a, qw, bias, activation="silu_mul")  # noqa: E731
    out = assert_poisoned_run(run, _gated_reference(a, qw, bias, None), dtype, k)
    assert out.shape == (m, n // 2)


@pytest.mark.parametrize("bits,group,symmetric,dtype,ms,gated", [
    (4, 128, True, torch.bfloat16, (1, 2), True), (8, -1, True, torch.bfloat16, (1, 4), True),
    (8, 64, False, torch.float16, (3,), True), (8, -1, False, torch.bfloat16, (1, 4), False),
    (8, 64, True, torch.float16, (2, 3), False)])
def test_decode_in_4_warp_ctas(bits, group, symmetric, dtype, ms, gated):
    # On Hopper the planner runs a decode grid of narrow CTAs as CTAs of 4 one-warp k slices
    # where they make one to two waves (kSlicedCtaWarps: INT8 at M <= 4, gated or not, gated bf16
    # INT4 at M <= 2): N = 2 x 8704 is 544 CTAs, K = 1152 is 9 INT4 k blocks (slices of 3, 2, 2, 2)
    # or 18 INT8 ones. The default plan, poisoned output.
    n, k = 17408, 1152
    act = "silu_mul" if gated else None
    qw = _qweight(n, k, bits, group, symmetric, dtype, seed=bits)
    for m in ms:
        plan = cute_gemm.mixed_plan(m, n, k, bits, group, dtype, activation=act)
        assert plan.kernel == "decode"
        if _wgmma():
            assert (plan.warps, plan.k_slices, plan.splits) == (4, 4, 1), plan
        _check_default_plan(m, n, k, qw, dtype, act)


@pytest.mark.parametrize("bits,group,symmetric,dtype,gated", [
    (4, 128, True, torch.bfloat16, False), (4, 64, False, torch.float16, True),
    (8, -1, True, torch.float16, False), (8, 64, False, torch.bfloat16, True)])
def test_decode_reshaped_on_hopper(bits, group, symmetric, dtype, gated):
    # On Hopper from M = 5 the planner runs wide decode CTAs that leave SMs idle as CTAs of 4
    # one-warp k slices (N = 4608: 144 of them, 1-3 per SM; K = 1664 is 13 INT4 k blocks, slices
    # of 4, 3, 3, 3), and caps one-warp-wide CTAs one per SM at 8 k slices where CTAs of 8 stay
    # one per SM (N = 4096, K = 4224: 33 INT4 or 66 INT8 k blocks; INT4 from M = 3). The default
    # plan, poisoned output, M = 3-8.
    act = "silu_mul" if gated else None
    for n, k, shape in ((4608, 1664, (4, 1)), (4096, 4224, (8, 1))):
        qw = _qweight(n, k, bits, group, symmetric, dtype, seed=bits + k)
        for m in (3, 4, 5, 6, 7, 8):
            plan = cute_gemm.mixed_plan(m, n, k, bits, group, dtype, activation=act)
            assert plan.kernel == "decode"
            ruled = m >= 5 or (bits == 4 and shape == (8, 1))
            if _wgmma() and ruled:
                assert (plan.warps, plan.col_warps, plan.splits) == (*shape, 1), plan
            _check_default_plan(m, n, k, qw, dtype, act)


@pytest.mark.parametrize("bits,group,symmetric,dtype", [
    (4, 128, True, torch.bfloat16), (4, 32, False, torch.float16), (8, -1, True, torch.float16),
    (8, 64, False, torch.bfloat16)])
def test_decode_few_columns(bits, group, symmetric, dtype):
    # On Hopper a decode grid of few columns runs the splits that make one CTA per SM, in CTAs of
    # up to 8 one-warp k slices (kFewColumnsShare): N = 768 is 24 CTAs, so 5 splits of K = 3584
    # (28 INT4 k blocks: four splits of 6 and one of 4, 3 slices each; 56 INT8 ones, 6 slices).
    # The default plan, with the reduce kernel and bias, poisoned output, M = 1-8.
    n, k = 768, 3584
    qw = _qweight(n, k, bits, group, symmetric, dtype, seed=bits + group)
    bias = _randn(n, dtype=dtype, seed=3)
    for m in range(1, 9):
        plan = cute_gemm.mixed_plan(m, n, k, bits, group, dtype)
        assert plan.kernel == "decode"
        if _wgmma():
            assert (plan.col_warps, plan.splits) == (1, 5), plan
        _check_default_plan(m, n, k, qw, dtype, None, bias)


def test_gated_refusals():
    qw = _qweight(136, 128, 4, 32, True, torch.float16)
    a = _randn(2, 128)
    with pytest.raises(ValueError, match="multiple of 16; got N=136"):
        cute_gemm.mixed_gemm(a, qw, activation="silu_mul")
    qw = _qweight(144, 128, 4, 32, True, torch.float16)
    with pytest.raises(ValueError, match="activation must be None or 'silu_mul'"):
        cute_gemm.mixed_gemm(a, qw, activation="gelu")


def test_gated_graph_compile_and_backward():
    n, k = 2 * 1024, 512
    qw = _qweight(n, k, 4, 128, True, torch.bfloat16, seed=3)
    a = _randn(4, k, dtype=torch.bfloat16, seed=4, scale=1 / math.sqrt(k))
    bias = _randn(n, dtype=torch.bfloat16, seed=5)
    layer = cute_gemm.QuantLinear.from_quantized(qw, bias=bias)
    eager = layer(a, activation="silu_mul")
    assert_accurate(eager, _gated_reference(a, qw, bias, None), torch.bfloat16, k)
    compiled = torch.compile(lambda x: layer(x, activation="silu_mul"), fullgraph=True)
    assert torch.equal(compiled(a), eager)
    static = a.clone()
    with torch.no_grad():
        graph, graph_out = capture_graph(lambda: layer(static, activation="silu_mul"))
    fresh = _randn(4, k, dtype=torch.bfloat16, seed=6, scale=1 / math.sqrt(k))
    static.copy_(fresh)
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(graph_out, layer(fresh, activation="silu_mul"))
    # Backward against autograd through the reference's formula in fp32.
    x = fresh.float().requires_grad_(True)
    w = qw.dequantize(torch.float32)
    g, u = (x @ w.t() + bias.float()).chunk(2, dim=-1)
    (torch.nn.functional.silu(g) * u).sum().backward()
    y = fresh.clone().requires_grad_(True)
    layer(y, activation="silu_mul").float().sum().backward()
    # dA is a bf16 matmul of K = 2048 terms (|dA| ~ 150): norm-wise within bf16's rounding.
    assert ((y.grad.float() - x.grad).norm() / x.grad.norm()).item() < 1e-2
