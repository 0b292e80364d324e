"""Python side of the cute_gemm torch ops: fake (meta) kernels and the public wrappers.

The ops' schemas and their CPU/CUDA/Autograd kernels are registered in C++ (csrc/ops/); the C++
library names this module (``set_python_module``), so torch imports it whenever it needs a fake
kernel.
"""

import contextlib

import torch

from . import _C  # noqa: F401  (loads the extension, which registers the ops' schemas/kernels)
from .quant import QuantizedWeight

__all__ = ["gemm", "mixed_gemm"]

_HALF_DTYPES = (torch.float16, torch.bfloat16)


def _check_gemm_shapes(a, b, bias):
    """The shape/dtype checks of csrc/ops/gemm_op.cpp that need no data (same messages).

    Used by the fake kernel, so torch.compile and meta tensors report bad shapes at trace time.
    Layout and alignment checks (strides, data_ptr) need real memory and stay in C++.
    """
    torch._check(a.dim() == 2, lambda: "cute_gemm.gemm: a must be a 2-D tensor [M, K]; got "
                 f"{a.dim()}-D with shape {list(a.shape)}")
    torch._check(b.dim() == 2, lambda: "cute_gemm.gemm: b must be a 2-D tensor [N, K]; got "
                 f"{b.dim()}-D with shape {list(b.shape)}")
    torch._check(a.dtype in _HALF_DTYPES, lambda: "cute_gemm.gemm: a must have dtype "
                 f"torch.float16 or torch.bfloat16; got {a.dtype}")
    torch._check(b.dtype == a.dtype, lambda: "cute_gemm.gemm: b must have the same dtype as a "
                 f"({a.dtype}); got {b.dtype}")
    torch._check(b.device == a.device, lambda: "cute_gemm.gemm: a and b must be on the same "
                 f"device; got a on {a.device} and b on {b.device}")
    m, k = a.shape
    n = b.shape[0]
    torch._check(b.shape[1] == k, lambda: "cute_gemm.gemm: b.size(1) must equal a.size(1) (K; a "
                 f"is [M, K], b is [N, K] and C = a @ b.T); got a of shape {list(a.shape)} and b "
                 f"of shape {list(b.shape)}")
    torch._check(k % 8 == 0, lambda: f"cute_gemm.gemm: K must be a multiple of 8 (16-byte rows); "
                 f"got K={k}")
    if bias is not None:
        torch._check(bias.dim() == 1 and bias.shape[0] == n, lambda: "cute_gemm.gemm: bias must "
                     f"be a 1-D tensor of size N={n} (b.size(0)); got shape {list(bias.shape)}")
        torch._check(bias.dtype == a.dtype, lambda: "cute_gemm.gemm: bias must have the same "
                     f"dtype as a ({a.dtype}); got {bias.dtype}")
        torch._check(bias.device == a.device, lambda: "cute_gemm.gemm: bias must be on the same "
                     f"device as a ({a.device}); got {bias.device}")
    return m, n


@torch.library.register_fake("cute_gemm::gemm")
def _gemm_fake(a, b, bias=None):
    m, n = _check_gemm_shapes(a, b, bias)
    return a.new_empty((m, n))


def gemm(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """Half-precision GEMM with the weight in ``nn.Linear`` layout: ``a @ b.T (+ bias)``.

    Computes ``C[M, N] = a[M, K] @ b[N, K]^T (+ bias[N])`` with fp32 accumulation and one rounding
    to the output dtype. Equivalent to ``torch.nn.functional.linear(a, b, bias)`` for 2-D ``a``.

    Args:
        a: ``[M, K]`` activations, ``torch.float16`` or ``torch.bfloat16``.
        b: ``[N, K]`` weight, same dtype and device as ``a`` (row ``n`` holds output column
            ``n``'s weights, as in ``nn.Linear.weight``).
        bias: optional ``[N]``, same dtype and device as ``a``.

    Returns:
        A new contiguous ``[M, N]`` tensor with ``a``'s dtype and device.

    Constraints (checked; a ``RuntimeError`` names the argument and the fix):
        * ``K`` is a multiple of 8 (rows of 16 bytes).
        * ``a`` and ``b`` have contiguous rows (``stride(1) == 1``); their leading stride
          (``stride(0)``) is ``>= K`` and a multiple of 8, so a column slice such as
          ``wide[:, :K]`` works without a copy. A transposed view needs ``.contiguous()``.
        * ``a``, ``b`` and ``bias`` start at 16-byte aligned addresses (a view at an odd element
          offset needs ``.clone()``); ``bias`` is contiguous.
        * ``M`` or ``N`` of 0 gives an empty ``[M, N]`` result; ``K`` of 0 gives zeros (+ bias),
          as ``torch.matmul`` does.

    On CUDA the kernel runs on the current stream without synchronizing the host, so it can be
    captured in CUDA graphs and traced by ``torch.compile``. On CPU the op computes the same result
    with ``torch.matmul`` in fp32 (a reference, not a fast path). Gradients are supported; the
    backward uses ``torch.matmul``.

    Example:
        >>> a = torch.randn(32, 4096, dtype=torch.float16, device="cuda")
        >>> w = torch.randn(11008, 4096, dtype=torch.float16, device="cuda")
        >>> c = cute_gemm.gemm(a, w)  # [32, 11008], same as a @ w.T
    """
    return torch.ops.cute_gemm.gemm.default(a, b, bias)


@contextlib.contextmanager
def _forced_gemm_config(config):
    """Runs every cute_gemm.gemm launch inside the block with one particular kernel configuration.

    For tests and benchmarks that must exercise every instantiated kernel, not only the ones the
    heuristic picks. ``config`` is an index into ``_C._gemm_configs()`` or a configuration name
    (e.g. ``"64x64x32_s3_w2x2"``); yields the name. The override is process-wide (every thread,
    every device) and the previous one is restored on exit, so the context managers nest. Launches
    captured in a CUDA graph keep the configuration they were captured with.

        with cute_gemm.ops._forced_gemm_config(2) as name:
            out = cute_gemm.gemm(a, b)          # runs configuration 2 whatever the shape
    """
    names = _C._gemm_configs()  # raises RuntimeError in a build without CUDA
    if isinstance(config, str):
        if config not in names:
            raise ValueError(f"unknown GEMM configuration {config!r}; available: {names}")
        index = names.index(config)
    else:
        index = int(config)
        if not 0 <= index < len(names):
            raise IndexError(f"GEMM configuration index {index} out of range: 0..{len(names) - 1}")
    with _swapped(lambda v: (_C._gemm_get_config(), _C._gemm_set_config(v))[0], index):
        yield names[index]


@contextlib.contextmanager
def _swapped(setter, value):
    """setter(value) returns the setting it replaced; that is restored on exit."""
    previous = setter(value)
    try:
        yield
    finally:
        setter(previous)


def _set_mixed_split(value):
    previous = _C._mixed_get_split()
    _C._mixed_set_split(*value)
    return previous


@contextlib.contextmanager
def _forced_mixed_split(splits=-1, reduce=-1):
    """Runs every cute_gemm.mixed_gemm kernel launch inside the block with a forced split-K plan.

    ``splits``: 1..64 k splits (fewer when K has fewer k blocks), -1 the heuristic. ``reduce``:
    ``"workspace"`` (fp32 partial sums and a second kernel), ``"cluster"`` (a thread block cluster
    per column tile adding through distributed shared memory; the mma.sync kernel on sm_90 with at
    most 8 splits, else the workspace) or -1 / None for the heuristic. Process-wide; the previous
    override is restored on exit. For tests that must cover both reductions and for tuning runs.
    """
    codes = {None: -1, -1: -1, "workspace": 1, "cluster": 2}
    if reduce not in codes:
        raise ValueError(f"reduce must be 'workspace', 'cluster' or None; got {reduce!r}")
    with _swapped(_set_mixed_split, (int(splits), codes[reduce])):
        yield


@contextlib.contextmanager
def _forced_decode_shape(warps=-1, col_warps=-1):
    """Inside the block the decode kernel runs CTAs of ``warps`` warps (1..16, rounded down to
    whole k groups that fit in shared memory) in k groups of ``col_warps`` warps (1, 2 or 4) that
    share the activations; -1 leaves either to the heuristic. For tests and tuning; process-wide,
    the previous override is restored on exit."""
    with _swapped(lambda v: _C._mixed_set_decode_shape(*v), (int(warps), int(col_warps))):
        yield


@contextlib.contextmanager
def _forced_wgmma_tile(tile_m=-1):
    """Inside the block the wgmma kernel (Hopper, M > 16) runs token tiles of ``tile_m`` rows of A
    (32 or 64 in one warpgroup per CTA, 128 or 256 in two); -1 leaves it to the heuristic. For
    tests and tuning; process-wide, the previous override is restored on exit."""
    with _swapped(_C._mixed_set_wgmma_tile, int(tile_m)):
        yield


@contextlib.contextmanager
def _forced_mixed_dense_from_m(m):
    """Inside the block the CUDA mixed_gemm takes the dense path (dequantize once, dense GEMM) from
    ``m`` rows of A instead of the default, e.g. a huge ``m`` runs the fused kernel at every M. For
    tests and tuning; process-wide, restored on exit."""
    with _swapped(_C._mixed_set_dense_from_m, int(m)):
        yield


@contextlib.contextmanager
def _forced_mixed_kernel(kernel):
    """Inside the block the CUDA mixed_gemm runs the given fused kernel: ``"mma"`` (mma.sync, any
    sm_80+ GPU), ``"wgmma"`` (Hopper, where the build and device allow it; mma.sync otherwise),
    ``"decode"`` (up to M = 8, any sm_80+ GPU) or None (the default: decode up to M = 8,
    mma.sync up to M = 16, then wgmma where usable). For tests that must cover
    every kernel and for tuning; process-wide, restored on exit."""
    codes = {None: -1, "mma": 0, "wgmma": 1, "decode": 2}
    if kernel not in codes:
        raise ValueError(f"kernel must be 'mma', 'wgmma', 'decode' or None; got {kernel!r}")
    with _swapped(_C._mixed_set_kernel, codes[kernel]):
        yield


# ----------------------------------------------------------------------------------- mixed_gemm

_MIXED = "cute_gemm.mixed_gemm: "


def _check_mixed_gemm_shapes(a, qweight, scales, zeros, bits, group_size, k, bias):
    """The shape/dtype/device checks of csrc/ops/mixed_gemm_op.cpp that need no data (same
    messages), for the fake kernel. Contiguity and alignment checks stay in C++."""
    torch._check(a.dim() == 2, lambda: f"{_MIXED}a must be a 2-D tensor [M, K]; got {a.dim()}-D "
                 f"with shape {list(a.shape)}")
    torch._check(a.dtype in _HALF_DTYPES, lambda: f"{_MIXED}a must have dtype torch.float16 or "
                 f"torch.bfloat16; got {a.dtype}")
    torch._check(bits in (4, 8), lambda: f"{_MIXED}bits must be 4 or 8; got bits={bits}")
    torch._check(group_size in (32, 64, 128, -1), lambda: f"{_MIXED}group_size must be 32, 64, "
                 f"128 or -1 (per-channel); got group_size={group_size}")
    torch._check(a.shape[1] == k, lambda: f"{_MIXED}k must equal a.size(1) (K, the unpadded "
                 f"reduction size); got k={k} and a of shape {list(a.shape)}")
    torch._check(k >= 1, lambda: f"{_MIXED}K must be >= 1; got K={k}")
    if group_size == -1:
        torch._check(k % 32 == 0, lambda: f"{_MIXED}K must be a multiple of 32 for per-channel "
                     f"quantization (group_size=-1); got K={k}")
        group = k
    else:
        torch._check(k % group_size == 0, lambda: f"{_MIXED}K must be a multiple of group_size; "
                     f"got K={k}, group_size={group_size}")
        group = group_size
    bk = 128 if bits == 4 else 64
    kb = (k + bk - 1) // bk
    torch._check(qweight.dtype == torch.int32, lambda: f"{_MIXED}qweight must have dtype "
                 f"torch.int32 (the packed weight); got {qweight.dtype}")
    torch._check(qweight.dim() == 4 and qweight.shape[1] == kb and qweight.shape[2] == 32
                 and qweight.shape[3] == 4, lambda: f"{_MIXED}qweight must have shape [N/8, "
                 f"ceil(K/{bk}), 32, 4] = [N/8, {kb}, 32, 4] for bits={bits} and K={k}; got "
                 f"{list(qweight.shape)}")
    torch._check(qweight.device == a.device, lambda: f"{_MIXED}qweight must be on the same "
                 f"device as a ({a.device}); got {qweight.device}")
    n = qweight.shape[0] * 8
    for name, t in (("scales", scales), ("zeros", zeros)):
        if t is None:
            continue
        torch._check(t.dtype == a.dtype, lambda: f"{_MIXED}{name} must have the same dtype as a "
                     f"({a.dtype}); got {t.dtype}")
        torch._check(t.dim() == 2 and t.shape[0] == k // group and t.shape[1] == n,
                     lambda: f"{_MIXED}{name} must have shape [K/G, N] = [{k // group}, {n}] "
                     f"(K={k}, G={group}, N={n} = qweight.size(0) * 8); got {list(t.shape)}")
        torch._check(t.device == a.device, lambda: f"{_MIXED}{name} must be on the same device "
                     f"as a ({a.device}); got {t.device}")
    if bias is not None:
        torch._check(bias.dim() == 1 and bias.shape[0] == n, lambda: f"{_MIXED}bias must be a "
                     f"1-D tensor of size N={n} (qweight.size(0) * 8); got shape "
                     f"{list(bias.shape)}")
        torch._check(bias.dtype == a.dtype, lambda: f"{_MIXED}bias must have the same dtype as a "
                     f"({a.dtype}); got {bias.dtype}")
        torch._check(bias.device == a.device, lambda: f"{_MIXED}bias must be on the same device "
                     f"as a ({a.device}); got {bias.device}")
    return a.shape[0], n


@torch.library.register_fake("cute_gemm::mixed_gemm")
def _mixed_gemm_fake(a, qweight, scales, zeros, bits, group_size, k, bias=None):
    m, n = _check_mixed_gemm_shapes(a, qweight, scales, zeros, bits, group_size, k, bias)
    return a.new_empty((m, n))


def mixed_gemm(a: torch.Tensor, qw, bias: torch.Tensor | None = None) -> torch.Tensor:
    """Linear layer with a quantized weight: ``a @ dequantize(qw).T (+ bias)``.

    Computes ``out[..., N] = a[..., K] @ W[N, K]^T (+ bias[N])`` with ``W = (q - z) * s``, fp32
    accumulation and one rounding to the output dtype. On CUDA below 192 rows the fused kernel
    reads the weight in its packed INT4/INT8 form (never materialized) and uses the exact ``W``
    (``qw.dequantize(torch.float32)``); from 192 rows, and on CPU, ``W`` is first rounded to the
    activation dtype (``qw.dequantize()``). The two differ by at most half an ulp per weight.

    Args:
        a: ``[..., K]`` activations, ``qw.dtype`` (torch.float16 or torch.bfloat16), on
            ``qw``'s device. Leading dimensions are flattened to M with ``reshape`` (a copy only
            when they cannot be flattened as a view); the result has the same leading
            dimensions. Rows must be contiguous (``a.stride(-1) == 1``).
        qw: a ``cute_gemm.QuantizedWeight`` from ``cute_gemm.quantize``.
        bias: optional ``[N]``, same dtype and device as ``a``.

    Returns:
        A new ``[..., N]`` tensor with ``a``'s dtype and device.

    Constraints (checked; a ``RuntimeError`` names the argument): ``a``'s rows contiguous with a
    leading stride that is a multiple of 8 elements, ``a`` and ``bias`` 16-byte aligned. On CUDA
    the op runs on the current stream without synchronizing the host (CUDA graphs and
    ``torch.compile`` work); on CPU it computes the reference result (dequantize, then fp32
    matmul). Gradients flow to ``a`` and ``bias``; the quantized weight is frozen.

    Example:
        >>> w = torch.randn(11008, 4096, dtype=torch.float16, device="cuda")
        >>> qw = cute_gemm.quantize(w, bits=4, group_size=128)
        >>> x = torch.randn(2, 7, 4096, dtype=torch.float16, device="cuda")
        >>> y = cute_gemm.mixed_gemm(x, qw)  # [2, 7, 11008], ~ x @ qw.dequantize().T
    """
    if not isinstance(qw, QuantizedWeight):
        raise TypeError(f"{_MIXED}qw must be a cute_gemm.QuantizedWeight (from "
                        f"cute_gemm.quantize); got {type(qw).__name__}")
    n, k = qw.shape
    if a.dim() < 1 or a.shape[-1] != k:
        raise ValueError(f"{_MIXED}a must have shape [..., K] with K={k} (qw.shape[1]); got "
                         f"{list(a.shape)}")
    lead = a.shape[:-1]
    a2d = a.reshape(-1, k)
    out = torch.ops.cute_gemm.mixed_gemm.default(a2d, qw.packed, qw.scales, qw.zeros, qw.bits,
                                                  qw.group_size, k, bias)
    return out.reshape(*lead, n)
