"""Pieces shared by the test modules: dtype and mixed_gemm configuration lists, the GPU accuracy
check, the allocator-poison trick, CUDA-graph capture, the stream/host-sync probe and a decode
step's attention prologue.

A plain module, imported as `from helpers import ...`: pytest's default (prepend) import mode puts
tests/ (which has no __init__.py) on sys.path for the test modules and conftest.py.
"""

import itertools
import math

import pytest
import torch

DTYPES = [torch.float16, torch.bfloat16]
DTYPE_IDS = ["fp16", "bf16"]
GROUPS = [32, 64, 128, -1]

# Every cute_gemm.mixed_gemm configuration: (bits, group_size, symmetric, dtype).
MIXED_CONFIGS = list(itertools.product([4, 8], GROUPS, [True, False], DTYPES))


def mixed_config_id(bits, group, symmetric, dtype):
    """The test id of a MIXED_CONFIGS entry, e.g. "int4-g128-sym-fp16" or "int8-pc-asym-bf16"."""
    g = "pc" if group == -1 else f"g{group}"
    return f"int{bits}-{g}-{'sym' if symmetric else 'asym'}-{DTYPE_IDS[DTYPES.index(dtype)]}"


# ------------------------------------------------------------------------------------ accuracy

# Norm-wise relative error bound against an fp64 reference of the (exact) half inputs: fp32
# accumulation leaves essentially only the final rounding (unit roundoff 2^-11 for fp16, 2^-8 for
# bf16), so these have a few x of headroom.
REL_ERR = {torch.float16: 2e-3, torch.bfloat16: 1e-2}


def assert_accurate(out, ref, dtype, k):
    """Norm-wise relative error plus an elementwise bound.

    Elementwise: rtol of one epsilon (one ulp at most) and an atol of one epsilon times sqrt(K),
    the typical magnitude of a sum of K products of unit-variance values, so entries near zero
    (cancellation) get the same absolute slack as typical entries.
    """
    assert out.dtype == dtype and out.shape == ref.shape
    assert not out.isnan().any(), "NaN in the output"
    diff = out.double() - ref
    rel = (diff.norm() / ref.norm().clamp_min(1e-30)).item()
    assert rel < REL_ERR[dtype], f"relative error {rel:.3e} >= {REL_ERR[dtype]:.0e}"
    eps = torch.finfo(dtype).eps
    atol = eps * math.sqrt(max(k, 1))
    bad = diff.abs() > atol + eps * ref.abs()
    if bad.any():
        i, j = (int(x) for x in bad.nonzero()[0])
        pytest.fail(f"{int(bad.sum())} elements out of tolerance, e.g. [{i}, {j}]: "
                    f"got {out[i, j].item()}, want {ref[i, j].item()} (atol {atol:.2e}, "
                    f"rtol {eps:.2e})")


# ------------------------------------------------------------------------------- memory safety


def poison_allocator(*numels, dtype):
    """Leave NaN-filled blocks of the given sizes in torch's caching allocator; return pointers.

    The op allocates its own output, so a test cannot pre-fill it. Instead: allocate tensors of
    the sizes the op will allocate, fill them with NaN and free them. The caching allocator keeps
    the freed blocks and hands them back for the next allocations of the same size on the same
    stream, so the op's output starts out as NaN wherever the kernel fails to write.
    """
    blocks = [torch.full((n,), float("nan"), dtype=dtype, device="cuda") for n in numels]
    ptrs = [t.data_ptr() for t in blocks]
    del blocks
    return ptrs


def assert_poisoned_run(run, ref, dtype, k):
    """Call run() (an op returning a new [M, N] tensor) into an output block poisoned beforehand
    (poison_allocator of ref's size): the op must reuse that block, write all of it accurately
    against ref (assert_accurate), and a second call must give the same bits. Returns the output."""
    torch.cuda.synchronize()
    ptrs = poison_allocator(ref.numel(), dtype=dtype)
    out = run()
    assert out.data_ptr() in ptrs, "the allocator did not reuse the poisoned block"
    assert_accurate(out, ref, dtype, k)
    assert torch.equal(out, run())
    return out


# ------------------------------------------------------------------------------ streams, graphs


def call_behind_sleep(fn, dst, src):
    """On a side stream: ~0.1 s of GPU sleep, then dst.copy_(src), then fn().

    Returns (fn's result, whether the side stream was still busy right after fn returned), after
    synchronizing the side stream. If fn launched on another stream it would read dst before the
    update; if it synchronized the host, the side stream would be idle when it returns.
    """
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        torch.cuda._sleep(200_000_000)  # ~0.1 s of GPU time
        dst.copy_(src)
        out = fn()
        still_busy = not side.query()
    side.synchronize()
    return out, still_busy


def capture_graph(fn):
    """Warm fn up twice on a side stream (off the capture stream, as torch recommends), then
    capture one call of it in a CUDA graph. Returns (graph, output); each graph.replay() rewrites
    output from the current contents of fn's inputs."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = fn()
    return graph, out


# ------------------------------------------------------------------------------- decode steps

def rotary_append(q, k, v, cos, sin, k_cache, v_cache, position):
    """A decode step's attention-block prologue as transformers writes it: the rotary embedding
    of q and k (rotate_half), k and v into a static cache at `position`."""
    def rotate_half(x):
        half = x.shape[-1] // 2
        return torch.cat((-x[..., half:], x[..., :half]), dim=-1)

    q_rot = q * cos + rotate_half(q) * sin
    k_rot = k * cos + rotate_half(k) * sin
    k_cache.index_copy_(2, position, k_rot)
    v_cache.index_copy_(2, position, v)
    return q_rot
