"""cute_gemm.gemm on CUDA: numerics against an fp64 reference, memory safety (poisoned outputs,
strided and offset operands), streams, CUDA graphs, torch.compile and determinism.

Every test is marked `gpu`; tests/conftest.py skips them when CUDA is not available.
"""

import itertools
import math

import pytest
import torch
from helpers import (DTYPE_IDS, DTYPES, assert_accurate, assert_poisoned_run, call_behind_sleep,
                     capture_graph, poison_allocator)

import cute_gemm

pytestmark = pytest.mark.gpu

GEMM = torch.ops.cute_gemm.gemm.default


def _randn(*shape, dtype=torch.float16, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    return torch.randn(*shape, generator=g, device="cuda", dtype=torch.float32).to(dtype)


def _operands(m, n, k, dtype, with_bias, seed=0):
    a = _randn(m, k, dtype=dtype, seed=seed)
    b = _randn(n, k, dtype=dtype, seed=seed + 1)
    bias = _randn(n, dtype=dtype, seed=seed + 2) if with_bias else None
    return a, b, bias


def _reference(a, b, bias=None):
    """fp64 on the GPU: exact products of the half inputs, no TF32 question."""
    out = a.double() @ b.double().t()
    if bias is not None:
        out += bias.double()
    return out


# ------------------------------------------------------------------------------------ numerics

MS = [1, 7, 33, 128, 1000, 4096]
NKS = [(1, 8), (9, 24), (130, 136), (257, 520), (4096, 4096)]


def _shape_cases():
    for m, (n, k), dtype, with_bias in itertools.product(MS, NKS, DTYPES, [False, True]):
        if (m, n, k) == (4096, 4096, 4096) and (dtype, with_bias) != (torch.float16, True):
            continue  # the largest problem once (fp16 + bias) keeps the suite quick
        yield pytest.param(m, n, k, dtype, with_bias,
                           id=f"{m}x{n}x{k}-{'fp16' if dtype == torch.float16 else 'bf16'}"
                              f"-{'bias' if with_bias else 'nobias'}")


@pytest.mark.parametrize("m,n,k,dtype,with_bias", list(_shape_cases()))
def test_matches_reference(m, n, k, dtype, with_bias):
    a, b, bias = _operands(m, n, k, dtype, with_bias, seed=m * 7919 + n * 31 + k)
    out = cute_gemm.gemm(a, b, bias)
    assert out.device == a.device and out.is_contiguous()
    assert_accurate(out, _reference(a, b, bias), dtype, k)


CONFIGS = cute_gemm._C._gemm_configs()
WGMMA_CONFIGS = [c for c in CONFIGS if c.startswith("wgmma_")]  # gemm_wgmma_kernel.cuh, largest
WGMMA_WIDE = WGMMA_CONFIGS[0]



FORCED_SHAPES = list(itertools.product([1, 33, 1000], [9, 130, 257], [8, 136, 520]))


def _wgmma():
    """Whether this build and GPU run the Hopper kernel (sm_90a on compute capability 9.0)."""
    return cute_gemm.device_spec().wgmma


@pytest.mark.parametrize("m,n,k", FORCED_SHAPES, ids=[f"{m}x{n}x{k}" for m, n, k in FORCED_SHAPES])
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("config", CONFIGS)
def test_each_config_matches_reference(config, dtype, m, n, k):
    # Every instantiated kernel, forced through the op's config argument, on awkward shapes
    # (partial tiles in M, N and K), with bias, against torch.matmul of the half inputs in fp32
    # (the op's CPU reference: fp32 products and sums, one rounding), on the CPU.
    a, b, bias = _operands(m, n, k, dtype, True, seed=CONFIGS.index(config) * 101 + m * 7 + n * 3
                           + k)
    if config in WGMMA_CONFIGS and not _wgmma():
        with pytest.raises(ValueError, match=r"cute_gemm\.gemm: config 'wgmma_.*' needs a compute "
                                             r"capability 9\.0 GPU"):
            cute_gemm.gemm(a, b, bias, config=config)
        return
    ref = torch.matmul(a.cpu().float(), b.cpu().float().t()) + bias.cpu().float()
    out = cute_gemm.gemm(a, b, bias, config=config)
    assert out.shape == (m, n) and out.dtype == dtype and out.is_contiguous()
    assert_accurate(out, ref.to(device=out.device, dtype=torch.float64), dtype, k)
    # The op straight, positionally: the same kernel, the same bits.
    assert torch.equal(GEMM(a, b, bias, config), out)


def test_config_is_per_call():
    # Forcing a configuration in one call leaves the next call's choice to the heuristic: the
    # heuristic's pick and an explicit config naming it give the same bits, and forcing another
    # configuration in between changes nothing afterwards.
    a, b, bias = _operands(1000, 257, 520, torch.float16, True, seed=3)
    chosen = cute_gemm._C._gemm_config_for(1000, 257, 520)
    assert chosen in CONFIGS
    first = cute_gemm.gemm(a, b, bias)
    assert torch.equal(cute_gemm.gemm(a, b, bias, config=chosen), first)
    for config in CONFIGS:
        cute_gemm.gemm(a, b, bias, config=config)
        assert cute_gemm._C._gemm_config_for(1000, 257, 520) == chosen
    assert torch.equal(cute_gemm.gemm(a, b, bias), first)


def test_unknown_config_raises_on_cuda():
    a, b, bias = _operands(5, 16, 24, torch.float16, True)
    with pytest.raises(ValueError, match=r"cute_gemm\.gemm: config must be None \(the heuristic\) "
                                         r"or one of the compiled configurations .*; got '1x1x1'"):
        cute_gemm.gemm(a, b, bias, config="1x1x1")


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_matches_torch_linear(dtype):
    # Against torch's own half GEMM (cuBLAS): both are fp32-accumulated, so they agree closely.
    a, b, bias = _operands(257, 520, 136, dtype, True, seed=5)
    out = cute_gemm.gemm(a, b, bias)
    ref = torch.nn.functional.linear(a, b, bias)
    eps = torch.finfo(dtype).eps
    torch.testing.assert_close(out, ref, rtol=2 * eps, atol=2 * eps * math.sqrt(136))


# ------------------------------------------------------------------------------- memory safety


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("m,n,k", [(1, 8, 8), (7, 136, 24), (33, 264, 136), (1000, 520, 520),
                                   (129, 257, 72), (7, 9, 24)])
def test_poisoned_output_fully_written(m, n, k, dtype):
    a, b, bias = _operands(m, n, k, dtype, True, seed=11)
    ref = _reference(a, b, bias)
    torch.cuda.synchronize()
    # For N % 8 != 0 the op runs the kernel on a padded [M, round_up(N, 8)] buffer: poison both.
    n_padded = (n + 7) // 8 * 8
    ptrs = poison_allocator(m * n, m * n_padded, dtype=dtype)
    out = cute_gemm.gemm(a, b, bias)
    if n % 8 == 0:
        assert out.data_ptr() in ptrs, "the allocator did not reuse the poisoned block"
    assert_accurate(out, ref, dtype, k)


WGMMA_SHAPES = [(128, 256, 64), (300, 520, 2056), (1000, 257, 4104), (2048, 2048, 2048),
                (4100, 1000, 520)]


@pytest.mark.parametrize("config", WGMMA_CONFIGS)
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("m,n,k", WGMMA_SHAPES, ids=[f"{m}x{n}x{k}" for m, n, k in WGMMA_SHAPES])
def test_wgmma_kernel_pipeline(m, n, k, dtype, config):
    # The Hopper kernel over many k tiles (its stages refill several times: the full / empty
    # barriers' phases wrap), whole and partial (M, N) tiles, an odd N (element stores), with and
    # without bias; the output block poisoned first; repeated runs bit-identical.
    if not _wgmma():
        pytest.skip("the Hopper kernel needs an sm_90a build on a compute capability 9.0 GPU")
    for with_bias in (False, True):
        a, b, bias = _operands(m, n, k, dtype, with_bias, seed=m + n + k)
        assert_poisoned_run(lambda: cute_gemm.gemm(a, b, bias, config=config),
                            _reference(a, b, bias), dtype, k)


def test_heuristic_takes_wgmma_wherever_it_runs():
    # The Hopper kernel at every M where it runs: its largest tile whose tiles keep half the SMs
    # busy, else its smallest (splitting K where even those leave half the SMs idle), the
    # wave-fill tile where it runs in no more rounds. On a 132-SM GPU, the cases the rule was
    # measured on (benchmarks/results/NOTES.md, sessions 16, 21 and 72).
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    want = {(4096, 4096, 4096): "128x256x64_s4", (1024, 4096, 4096): "128x256x64_s4",
            (256, 8192, 8192): "128x128x64_s6", (512, 4096, 4096): "128x128x64_s6",
            (256, 4096, 14336): "64x128x64_s8", (256, 4096, 4096): "64x128x64_s8",
            (1, 512, 4096): "64x128x64_s8", (1024, 1024, 1024): "64x128x64_s8",
            # The wave-fill tile (gemm_wgmma_heuristic): 512 tiles of 128x224 in 3.88 waves
            # instead of 448 of 128x256 in 3.39.
            (512, 28672, 4096): "128x224x64_s5", (1024, 28672, 4096): "128x256x64_s4"}
    for (m, n, k), tile in want.items():
        chosen = cute_gemm._C._gemm_config_for(m, n, k)
        assert (chosen in WGMMA_CONFIGS) == _wgmma(), (m, n, k, chosen)
        if _wgmma():
            if sms == 132:
                assert chosen == f"wgmma_{tile}", (m, n, k, chosen)
            a, b, bias = _operands(m, n, k, torch.bfloat16, True, seed=5)
            assert torch.equal(cute_gemm.gemm(a, b, bias), cute_gemm.gemm(a, b, bias,
                                                                          config=chosen))


SPLIT_SHAPES = [(65, 256, 4096), (256, 4096, 4096), (200, 1000, 3000), (129, 257, 14336)]


@pytest.mark.parametrize("config", WGMMA_CONFIGS)
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("m,n,k", SPLIT_SHAPES, ids=[f"{m}x{n}x{k}" for m, n, k in SPLIT_SHAPES])
def test_wgmma_split_k(m, n, k, dtype, config):
    # Grids of few tiles split K (a workspace of fp32 partial sums, then the reduce kernel, which
    # adds the splits in order and the bias): accurate, poisoned output fully written, odd N,
    # repeated runs bit-identical, and the same under CUDA-graph replay.
    if not _wgmma():
        pytest.skip("the Hopper kernel needs an sm_90a build on a compute capability 9.0 GPU")
    a, b, bias = _operands(m, n, k, dtype, True, seed=m * 3 + n + k)
    out = assert_poisoned_run(lambda: cute_gemm.gemm(a, b, bias, config=config),
                              _reference(a, b, bias), dtype, k)
    graph, static_out = capture_graph(lambda: cute_gemm.gemm(a, b, bias, config=config))
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(static_out, out)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_strided_leading_dimension(dtype):
    # a and b as column slices of wider tensors: ld = K + 8 (16-byte multiple), rows contiguous.
    m, n, k = 130, 257, 136
    a_wide = _randn(m, k + 8, dtype=dtype, seed=21)
    b_wide = _randn(n, k + 8, dtype=dtype, seed=22)
    for a, b in [(a_wide[:, :k], b_wide[:, :k]), (a_wide[:, 8:], b_wide[:, 8:])]:
        assert a.stride(0) == k + 8 and not a.is_contiguous()
        out = cute_gemm.gemm(a, b)
        assert_accurate(out, _reference(a, b), dtype, k)
        assert torch.equal(out, cute_gemm.gemm(a.contiguous(), b.contiguous()))
        if _wgmma():  # the Hopper kernel's tensor maps take the row stride
            out = cute_gemm.gemm(a, b, config=WGMMA_WIDE)
            assert_accurate(out, _reference(a, b), dtype, k)
            assert torch.equal(out, cute_gemm.gemm(a.contiguous(), b.contiguous(),
                                                   config=WGMMA_WIDE))


def test_misaligned_view_rejected():
    a = _randn(4, 24)[:, 1:17]
    with pytest.raises(RuntimeError, match=r"a must start at a 16-byte aligned address"):
        cute_gemm.gemm(a, _randn(8, 16))


def test_different_devices_rejected():
    a, b, bias = _operands(4, 8, 16, torch.float16, True)
    with pytest.raises(RuntimeError, match=r"a and b must be on the same device; got a on cuda:0 "
                                           r"and b on cpu"):
        cute_gemm.gemm(a, b.cpu())
    with pytest.raises(RuntimeError, match=r"a and b must be on the same device; got a on cpu"):
        cute_gemm.gemm(a.cpu(), b)
    with pytest.raises(RuntimeError, match=r"bias must be on the same device as a \(cuda:0\); "
                                           r"got cpu"):
        cute_gemm.gemm(a, b, bias.cpu())


@pytest.mark.parametrize("m,n", [(0, 16), (16, 0)])
def test_empty_output(m, n):
    a, b, bias = _operands(m, n, 32, torch.bfloat16, True)
    out = cute_gemm.gemm(a, b, bias)
    assert out.shape == (m, n) and out.device == a.device


def test_k_zero():
    a, b, bias = _operands(5, 16, 0, torch.float16, True)
    torch.testing.assert_close(cute_gemm.gemm(a, b, bias), bias.expand(5, 16), rtol=0, atol=0)


@pytest.mark.slow
def test_offsets_beyond_int32():
    # a has more than 2^31 elements: row offsets need 64-bit arithmetic in the kernel.
    k, n = 4096, 16
    m = (1 << 31) // k + 64
    a = torch.empty(m, k, dtype=torch.float16, device="cuda").normal_(generator=torch.Generator(
        device="cuda").manual_seed(3))
    b = _randn(n, k, seed=4)
    out = cute_gemm.gemm(a, b)
    for rows in (slice(0, 16), slice(m - 80, m)):
        assert_accurate(out[rows], _reference(a[rows], b), torch.float16, k)
    del a, out
    torch.cuda.empty_cache()


# ------------------------------------------------------------------- streams, devices, graphs


def test_runs_on_current_stream_without_host_sync():
    # On a side stream: a long sleep, then an update of `a`, then the GEMM. If the op launched on
    # another stream it would read `a` before the update; if it synchronized the host, the side
    # stream would be idle when the call returns.
    m, n, k = 256, 264, 512
    a, b, bias = _operands(m, n, k, torch.float16, True, seed=31)
    a_new = _randn(m, k, seed=32)
    out, still_busy = call_behind_sleep(lambda: cute_gemm.gemm(a, b, bias), a, a_new)
    assert still_busy, "the side stream was idle right after the call: did the op sync the host?"
    assert_accurate(out, _reference(a_new, b, bias), torch.float16, k)


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 GPUs")
def test_second_device():
    a, b, bias = (t.to("cuda:1") for t in _operands(33, 136, 72, torch.bfloat16, True))
    with torch.cuda.device(0):
        out = cute_gemm.gemm(a, b, bias)
    assert out.device == torch.device("cuda:1")
    assert_accurate(out, _reference(a, b, bias), torch.bfloat16, 72)


def test_cuda_graph_replay_matches_eager():
    m, n, k = 100, 257, 136
    a, b, bias = _operands(m, n, k, torch.bfloat16, True, seed=41)
    graph, out = capture_graph(lambda: cute_gemm.gemm(a, b, bias))
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(out, cute_gemm.gemm(a, b, bias))
    a.copy_(_randn(m, k, dtype=torch.bfloat16, seed=42))
    b.copy_(_randn(n, k, dtype=torch.bfloat16, seed=43))
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(out, cute_gemm.gemm(a, b, bias))
    assert_accurate(out, _reference(a, b, bias), torch.bfloat16, k)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_repeated_runs_bit_identical(dtype):
    a, b, bias = _operands(1000, 257, 520, dtype, True, seed=51)
    first = cute_gemm.gemm(a, b, bias)
    for _ in range(4):
        assert torch.equal(cute_gemm.gemm(a, b, bias), first)


# --------------------------------------------------------------- torch.compile, registration


@pytest.mark.parametrize("with_bias", [False, True], ids=["nobias", "bias"])
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_opcheck(dtype, with_bias):
    a, b, bias = _operands(33, 136, 72, dtype, with_bias, seed=61)
    torch.library.opcheck(GEMM, (a, b, bias))


def test_opcheck_requires_grad():
    a, b, bias = _operands(7, 24, 16, torch.float16, True, seed=62)
    torch.library.opcheck(GEMM, (a.requires_grad_(), b.requires_grad_(), bias.requires_grad_()))


def test_torch_compile_fullgraph():
    def f(a, b, bias):
        return torch.nn.functional.gelu(cute_gemm.gemm(a, b, bias)) + 1

    compiled = torch.compile(f, fullgraph=True)
    for m in (64, 33):  # a second shape exercises recompilation / dynamic shapes
        a, b, bias = _operands(m, 264, 136, torch.float16, True, seed=70 + m)
        torch.testing.assert_close(compiled(a, b, bias), f(a, b, bias), rtol=2e-3, atol=2e-3)


def test_torch_compile_rejects_bad_shapes_at_trace_time():
    compiled = torch.compile(lambda a, b: cute_gemm.gemm(a, b), fullgraph=True)
    with pytest.raises(Exception, match=r"K must be a multiple of 8"):
        compiled(_randn(4, 12), _randn(8, 12))
