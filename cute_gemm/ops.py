"""Python side of the cute_gemm torch ops: fake (meta) kernels and the public wrappers.

The ops' schemas and their CPU/CUDA/Autograd kernels are registered in C++ (csrc/ops/); the C++
library names this module (``set_python_module``), so torch imports it whenever it needs a fake
kernel.
"""

import torch

from . import _C  # noqa: F401  (loads the extension, which registers the ops' schemas/kernels)

__all__ = ["gemm"]

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
