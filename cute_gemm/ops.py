"""Python side of the cute_gemm torch ops: fake (meta) kernels and the public wrappers.

The ops' schemas and their CPU/CUDA/Autograd kernels are registered in C++ (csrc/ops/); the C++
library names this module (``set_python_module``), so torch imports it whenever it needs a fake
kernel.
"""

import math
from collections.abc import Mapping

import torch

from . import _C  # noqa: F401  (loads the extension, which registers the ops' schemas/kernels)
from .quant import QuantizedWeight

DeviceSpec = _C.DeviceSpec
MixedPlan = _C.MixedPlan

__all__ = ["gemm", "mixed_gemm", "mixed_plan", "device_spec", "decode_attention", "DeviceSpec",
           "MixedPlan", "partial_sums_count"]

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


def _check_gemm_config(config):
    """The op's check of its config argument (csrc/ops/gemm_op.cpp, same message), for the fake
    kernel: a name that is not compiled is a ValueError at trace time, as it is on every backend."""
    if config is None:
        return
    names = _C._gemm_configs()
    if config not in names:
        listed = ", ".join(f"'{name}'" for name in names)
        raise ValueError(f"cute_gemm.gemm: config must be None (the heuristic) or one of the "
                         f"compiled configurations {listed}; got '{config}'")


@torch.library.register_fake("cute_gemm::gemm")
def _gemm_fake(a, b, bias=None, config=None):
    m, n = _check_gemm_shapes(a, b, bias)
    _check_gemm_config(config)
    return a.new_empty((m, n))


def gemm(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor | None = None, *,
         config: str | None = None) -> torch.Tensor:
    """Half-precision GEMM with the weight in ``nn.Linear`` layout: ``a @ b.T (+ bias)``.

    Computes ``C[M, N] = a[M, K] @ b[N, K]^T (+ bias[N])`` with fp32 accumulation and one rounding
    to the output dtype. Equivalent to ``torch.nn.functional.linear(a, b, bias)`` for 2-D ``a``.

    Args:
        a: ``[M, K]`` activations, ``torch.float16`` or ``torch.bfloat16``.
        b: ``[N, K]`` weight, same dtype and device as ``a`` (row ``n`` holds output column
            ``n``'s weights, as in ``nn.Linear.weight``).
        bias: optional ``[N]``, same dtype and device as ``a``.
        config: optional name of one compiled tile configuration for the CUDA kernel to run
            instead of the heuristic's choice, e.g. ``"128x128x64_s3_w2x2"``;
            ``cute_gemm._C._gemm_configs()`` lists them and ``cute_gemm._C._gemm_config_for(m, n,
            k)`` names the heuristic's. Every configuration runs every dtype and shape the op
            accepts, so the result is the same up to fp32 summation order. The ``"wgmma_..."``
            configurations are the Hopper kernel (sm_90a builds on compute capability 9.0, where
            the heuristic picks them); naming one on another GPU raises ``ValueError``. A name
            that is not compiled raises ``ValueError`` on every device (the CPU reference checks
            it too and otherwise ignores it); a non-string raises ``TypeError``.

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
        >>> c = cute_gemm.gemm(a, w, config="64x64x32_s3_w2x2")  # one kernel, forced
    """
    if config is not None and not isinstance(config, str):
        raise TypeError("cute_gemm.gemm: config must be None or a configuration name (a str, one "
                        f"of cute_gemm._C._gemm_configs()); got {type(config).__name__}")
    return torch.ops.cute_gemm.gemm.default(a, b, bias, config)


# ----------------------------------------------------------------------------------- mixed_gemm

_MIXED = "cute_gemm.mixed_gemm: "


def _check_mixed_gemm_shapes(a, qweight, scales, zeros, bits, group_size, k, bias,
                             op=_MIXED):
    """The shape/dtype/device checks of csrc/ops/mixed_gemm_op.cpp that need no data (same
    messages, prefixed by ``op``), for the fake kernels. Contiguity and alignment checks stay in
    C++. The format's rules are the rulebook's (cute_gemm.weight_format, from weight_format.hpp)."""
    from . import weight_format as wf

    torch._check(a.dim() == 2, lambda: f"{op}a must be a 2-D tensor [M, K]; got {a.dim()}-D "
                 f"with shape {list(a.shape)}")
    torch._check(a.dtype in _HALF_DTYPES, lambda: f"{op}a must have dtype torch.float16 or "
                 f"torch.bfloat16; got {a.dtype}")
    torch._check(bits in wf.VALID_BITS, lambda: f"{op}bits must be {wf.VALID_BITS_TEXT}; "
                 f"got bits={bits}")
    torch._check(group_size in wf.VALID_GROUP_SIZES, lambda: f"{op}group_size must be "
                 f"{wf.VALID_GROUP_SIZES_TEXT}; got group_size={group_size}")
    torch._check(a.shape[1] == k, lambda: f"{op}k must equal a.size(1) (K, the unpadded "
                 f"reduction size); got k={k} and a of shape {list(a.shape)}")
    torch._check(k >= 1, lambda: f"{op}K must be >= 1; got K={k}")
    if group_size == wf.PER_CHANNEL:
        torch._check(wf.valid_k(k, group_size), lambda: f"{op}K must be a multiple of "
                     f"{wf.k_multiple(group_size)} for per-channel quantization (group_size="
                     f"{wf.PER_CHANNEL}); got K={k}")
    else:
        torch._check(wf.valid_k(k, group_size), lambda: f"{op}K must be a multiple of "
                     f"group_size; got K={k}, group_size={group_size}")
    group = wf.effective_group_size(group_size, k)
    bk = wf.block_k(bits)
    _, kb, lanes, words = wf.packed_shape(0, k, bits)
    torch._check(qweight.dtype == torch.int32, lambda: f"{op}qweight must have dtype "
                 f"torch.int32 (the packed weight); got {qweight.dtype}")
    torch._check(qweight.dim() == 4 and qweight.shape[1] == kb and qweight.shape[2] == lanes
                 and qweight.shape[3] == words, lambda: f"{op}qweight must have shape [N/8, "
                 f"ceil(K/{bk}), 32, 4] = [N/8, {kb}, 32, 4] for bits={bits} and K={k}; got "
                 f"{list(qweight.shape)}")
    torch._check(qweight.device == a.device, lambda: f"{op}qweight must be on the same "
                 f"device as a ({a.device}); got {qweight.device}")
    n = qweight.shape[0] * wf.BLOCK_N
    for name, t in (("scales", scales), ("zeros", zeros)):
        if t is None:
            continue
        torch._check(t.dtype == a.dtype, lambda: f"{op}{name} must have the same dtype as a "
                     f"({a.dtype}); got {t.dtype}")
        torch._check(t.dim() == 2 and t.shape[0] == k // group and t.shape[1] == n,
                     lambda: f"{op}{name} must have shape [K/G, N] = [{k // group}, {n}] "
                     f"(K={k}, G={group}, N={n} = qweight.size(0) * 8); got {list(t.shape)}")
        torch._check(t.device == a.device, lambda: f"{op}{name} must be on the same device "
                     f"as a ({a.device}); got {t.device}")
    if bias is not None:
        torch._check(bias.dim() == 1 and bias.shape[0] == n, lambda: f"{op}bias must be a "
                     f"1-D tensor of size N={n} (qweight.size(0) * 8); got shape "
                     f"{list(bias.shape)}")
        torch._check(bias.dtype == a.dtype, lambda: f"{op}bias must have the same dtype as a "
                     f"({a.dtype}); got {bias.dtype}")
        torch._check(bias.device == a.device, lambda: f"{op}bias must be on the same device "
                     f"as a ({a.device}); got {bias.device}")
    return a.shape[0], n


ACTIVATIONS = ("silu_mul",)


def _check_activation(activation, n):
    """The op's check of its activation argument (csrc/ops/mixed_gemm_op.cpp, same messages):
    whether the GEMM is gated."""
    if activation is None:
        return False
    if activation not in ACTIVATIONS:
        raise ValueError(f"{_MIXED}activation must be None or 'silu_mul' (SiLU(gate) * up of the "
                         f"two halves of N); got '{activation}'")
    if n % 16 != 0:
        raise ValueError(f"{_MIXED}activation='silu_mul' needs N (the gate and up halves) a "
                         f"multiple of 16; got N={n} (qweight.size(0) * 8)")
    return True


@torch.library.register_fake("cute_gemm::mixed_gemm")
def _mixed_gemm_fake(a, qweight, scales, zeros, bits, group_size, k, bias=None, schedule=None,
                     activation=None):
    m, n = _check_mixed_gemm_shapes(a, qweight, scales, zeros, bits, group_size, k, bias)
    gated = _check_activation(activation, n)
    if schedule is not None:
        _C._mixed_schedule(schedule)  # a ValueError at trace time for a schedule that cannot parse
    return a.new_empty((m, n // 2 if gated else n))


@torch.library.register_fake("cute_gemm::mixed_gemm_partials")
def _mixed_gemm_partials_fake(a, qweight, scales, zeros, bits, group_size, k, schedule=None):
    m, n = _check_mixed_gemm_shapes(a, qweight, scales, zeros, bits, group_size, k, None,
                                    op="cute_gemm.mixed_gemm_partials: ")
    if schedule is not None:
        _C._mixed_schedule(schedule)
    if a.device.type != "cuda":
        splits = 1
    elif isinstance(m, torch.SymInt) or isinstance(n, torch.SymInt):
        # The split count depends on M: a size known only when the op has run.
        splits = torch.library.get_ctx().new_dynamic_size()
    else:
        splits = partial_sums_count(m, n, k, bits, group_size, a.dtype, a.device, schedule)
    return a.new_empty((splits, m, n), dtype=torch.float32)


def partial_sums_count(m, n, k, bits, group_size, dtype, device, schedule=None):
    """S, the number of fp32 partial sums ``torch.ops.cute_gemm.mixed_gemm_partials`` returns
    for an ``[m, k] x [n, k]^T`` problem on ``device`` (a ``torch.device``, or anything
    ``device_spec`` takes for a CUDA GPU): the plan's split-K factor there (1 without split-K, on
    the dense path, for an empty problem and off CUDA)."""
    if isinstance(device, torch.device) and device.type != "cuda":
        return 1
    if m == 0 or n == 0:
        return 1
    plan = _C._mixed_plan(int(m), int(n), int(k), int(bits), int(group_size),
                          dtype == torch.bfloat16, device_spec(device),
                          _schedule_text(schedule) or "", False, True)
    return 1 if plan.kernel == "dense" else plan.splits


def _schedule_text(schedule):
    """The op's schedule argument from None, a string ("kernel=wgmma,tile_m=128") or a mapping
    ({"kernel": "wgmma", "tile_m": 128}): the canonical string, or None for no choices. Under
    torch.compile(dynamic=True) a mapping's ints are symbolic, and older dynamo versions (2.11)
    cannot format them into the text: pass a string there."""
    if schedule is None:
        return None
    if isinstance(schedule, str):
        text = schedule
    elif isinstance(schedule, Mapping):
        text = ",".join(f"{key}={value}" for key, value in schedule.items())
    else:
        raise TypeError("schedule must be None, a string such as 'kernel=wgmma,tile_m=128' or a "
                        f"mapping such as {{'kernel': 'wgmma'}}; got {type(schedule).__name__}")
    if torch.compiler.is_compiling():
        # Dynamo cannot trace the C++ parser; the fake kernel checks the text at trace time.
        return text or None
    return _C._mixed_schedule(text) or None


def device_spec(device=None):
    """The device description the mixed GEMM's planner uses (``cute_gemm.DeviceSpec``).

    ``device``: None or a CUDA ``torch.device`` / index for that GPU's spec (its SM count, shared
    memory, registers and whether the wgmma kernels run there), or ``"h100"``, ``"h200"``,
    ``"a100"`` for a built-in spec, which needs no GPU.
    """
    if isinstance(device, _C.DeviceSpec):
        return device
    if isinstance(device, str) and device.lower() in ("h100", "h200", "a100"):
        return _C._device_spec(device.lower())
    if device is None or isinstance(device, (int, torch.device)) or (
            isinstance(device, str) and device.startswith("cuda")):
        if not torch.cuda.is_available():
            raise ValueError("device_spec: no CUDA device here; name a built-in spec: 'h100', "
                             "'h200' or 'a100'")
        index = torch.device("cuda", torch.cuda.current_device()) if device is None else (
            torch.device("cuda", device) if isinstance(device, int) else torch.device(device))
        if index.type != "cuda":
            raise ValueError(f"device_spec: expected a CUDA device; got {device!r}")
        with torch.cuda.device(index):
            return _C._device_spec(None)
    raise ValueError(f"device_spec: expected None, a CUDA device, a DeviceSpec or one of 'h100', "
                     f"'h200', 'a100'; got {device!r}")


def mixed_plan(m, n, k, bits=4, group_size=128, dtype=torch.float16, device=None,
               schedule=None, activation=None):
    """What ``mixed_gemm`` runs for an ``[m, k] x [n, k]^T`` problem: a ``cute_gemm.MixedPlan``.

    The plan names the kernel (``decode``, ``mma``, ``wgmma`` or ``dense``), its instance, tile,
    stages, warps, split-K factor, grid and workspace; ``str(plan)`` is one readable line and
    ``plan.as_dict()`` has every field. ``device`` is as for ``device_spec`` (None: the current
    GPU), so plans for an H100, H200 or A100 can be inspected on any machine. ``schedule`` is the
    same argument ``mixed_gemm`` takes, and so is ``activation`` (the plan says where a gated
    GEMM gates: ``plan.gated``).

    Example:
        >>> print(cute_gemm.mixed_plan(16, 8192, 8192, device="h100"))
        mma mixed_f16_int4_m16: tile 16x128 (M x N), 4 stages, 4 warps, ...
    """
    if dtype not in _HALF_DTYPES:
        raise ValueError(f"mixed_plan: dtype must be torch.float16 or torch.bfloat16; got {dtype}")
    if activation is not None and activation not in ACTIVATIONS:
        raise ValueError(f"mixed_plan: activation must be None or 'silu_mul'; got {activation!r}")
    return _C._mixed_plan(int(m), int(n), int(k), int(bits), int(group_size),
                          dtype == torch.bfloat16, device_spec(device),
                          _schedule_text(schedule) or "", activation is not None)


def mixed_gemm(a: torch.Tensor, qw, bias: torch.Tensor | None = None, *,
               schedule=None, activation: str | None = None) -> torch.Tensor:
    """Linear layer with a quantized weight: ``a @ dequantize(qw).T (+ bias)``.

    Computes ``out[..., N] = a[..., K] @ W[N, K]^T (+ bias[N])`` with ``W = (q - z) * s``, fp32
    accumulation and one rounding to the output dtype. On CUDA a fused kernel reads the weight in
    its packed INT4/INT8 form (never materialized). The plan (``cute_gemm.mixed_plan``, field
    ``exact_scales``) says which ``W`` it uses: the exact ``qw.dequantize(torch.float32)`` with the
    decode and mma.sync kernels (M <= 8 on an H100 / H200, M = 9-16 on some shapes there: INT4
    with groups shorter than 128 where K is long, INT8 where N is wide; below 192 rows on other
    GPUs) and the wgmma tiles that keep exact scales (INT4's 16- and 32-row tiles, M = 9-32 on
    Hopper, where a group is 128 or the whole of a K that 128 divides; INT8's 32-row tile, per
    channel or in groups of 64 or 128, where its grid fills the GPU better than the rounded
    tile's; INT8's tiles of 64 rows and up where K is one group, i.e. per channel, M = 33 and
    up on Hopper; ``scales=exact``), or ``W`` rounded to the activation dtype (``qw.dequantize()``)
    with the other wgmma tiles (the rest of M on Hopper), on the dense path (from 192 rows
    elsewhere) and on CPU. The two differ by at most half an ulp per weight.

    Args:
        a: ``[..., K]`` activations, ``qw.dtype`` (torch.float16 or torch.bfloat16), on
            ``qw``'s device. Leading dimensions are flattened to M with ``reshape`` (a copy only
            when they cannot be flattened as a view); the result has the same leading
            dimensions. Rows must be contiguous (``a.stride(-1) == 1``).
        qw: a ``cute_gemm.QuantizedWeight`` from ``cute_gemm.quantize``.
        bias: optional ``[N]``, same dtype and device as ``a``.
        schedule: optional explicit choices that override the planner's, as a string
            (``"kernel=wgmma,tile_m=128"``) or a mapping (``{"kernel": "decode", "warps": 8}``).
            Keys: ``kernel`` (``decode``, ``mma``, ``wgmma``, ``dense``), ``tile_m`` (wgmma: 16
            (INT4), 32, 64, 128, 160, 192, 256), ``tile_n`` (wgmma: 128 output columns per CTA, or
            64, which INT4's 16-row tile has and takes by default where 128 columns would split K 8
            ways or more or give each split at most 16 k blocks), ``scales`` (wgmma: ``exact``,
            which the 16-row (INT4) and 32-row tiles have and INT4 takes there by default where a
            group is whole k blocks, INT8 where its grid also fills the GPU better, and INT8's
            tiles of 64 rows and up have and take by default for one group over K (per-channel;
            refused there for finer groups), or ``rounded``, the default elsewhere),
            ``loads`` (wgmma: how a tile's stages are filled, ``tma`` (boxes a few threads issue:
            INT4's tiles and the warp-specialized ones) or ``cp_async`` (every thread's copies:
            INT8's 32-row tiles, and INT4's 64-row tile, which has both forms and by default takes
            this one where M <= 40 and each split runs at least 32 k blocks)),
            ``splits`` (1..64),
            ``warps`` (decode: 1..16), ``col_warps`` (decode: 1, 2, 4), ``k_slices`` (mma.sync: 1,
            or 2 in INT4's 16-row tile: two groups of 4 warps per CTA on halves of its k range),
            ``raster_m`` (the warp-specialized wgmma kernel: M tiles per group of its tile order,
            1..64; 1 is row-major), ``reduce`` (where split-K's partial sums are added:
            ``cluster``, the default where it runs, has a tile's splits run as one thread block
            cluster that adds them in distributed shared memory, on INT4's 16-row wgmma tile in
            64 columns with at most 8 splits; ``kernel`` writes them to an fp32 workspace for a
            second, reduce kernel), ``stream_k`` (``off``, or a number of CTAs from the tiles to
            their k blocks: unsplit, the CTAs share the tiles' k blocks evenly and the CTA holding
            a tile's last k block adds the others' partial sums; INT4's 16-row wgmma tile in 128
            columns with exact scales, groups of whole k blocks, M <= 16; by default one CTA per
            resident slot where the tiles are more than the SMs and fill at most 1 - 6 / k_blocks
            of the slots; on the warp-specialized tiles (``tile_m`` >= 128), unsplit and not
            gated, a number of CTAs C that leaves tiles past the full waves: full waves of C
            CTAs run one whole tile each, then C CTAs share the remaining tiles' k blocks; by
            default one CTA per SM where there is a full wave and the tiles past the full waves
            fill at most half of the SMs), ``trigger`` (``early`` or ``late``: where the kernel
            lets the next kernel in the stream launch under programmatic dependent launch, right
            after its own dependency wait or after its main loop; the decode kernel and the wgmma
            tiles without a producer warpgroup (INT4 up to 64 rows, INT8 up to 32); by default
            early for decode grids that fill the SMs and for gated 16-row wgmma grids of fewer
            CTAs than resident slots).
            A choice the device or problem cannot run raises ``ValueError``;
            ``cute_gemm.mixed_plan`` shows what a schedule runs.
        activation: None, or ``"silu_mul"`` for a gate/up projection (a gated MLP's
            ``act_fn(gate_proj(x)) * up_proj(x)`` with SiLU): ``qw``'s rows are the gate
            projection's ``N/2`` rows, then the up projection's, and the result is
            ``silu(g) * u`` of the two ``[..., N/2]`` halves of the product (+ bias), computed in
            fp32 and rounded once (the dense path rounds ``g`` and ``u`` first). ``N`` must be a
            multiple of 16. The decode kernel (M <= 8), mma.sync's and INT4 wgmma's 16-row tiles
            and INT4 wgmma's 32-row tile gate in registers (unsplit, or split in a cluster in
            the 16-row wgmma tile of 64 columns); the other kernels gate in the split-K reduce
            kernel, through an fp32 workspace.

    Returns:
        A new ``[..., N]`` tensor (``[..., N/2]`` with an activation) with ``a``'s dtype and
        device.

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
                                                  qw.group_size, k, bias,
                                                  _schedule_text(schedule), activation)
    return out.reshape(*lead, out.shape[-1])


_ATTN = "cute_gemm.decode_attention: "
_MASK_DTYPES = (torch.bool, torch.float16, torch.bfloat16, torch.float32)


def _check_attention_shapes(q, k, v, mask, scale):
    """The checks of csrc/ops/attention_op.cpp that need no data (same messages), for the fake
    kernel; the k / v row layout and alignment checks need real memory and stay in C++."""
    torch._check(q.dim() == 4, lambda: f"{_ATTN}q must be a 4-D tensor [B, H, Lq, D]; got "
                 f"{q.dim()}-D with shape {list(q.shape)}")
    torch._check(k.dim() == 4, lambda: f"{_ATTN}k must be a 4-D tensor [B, Hkv, L, D]; got "
                 f"{k.dim()}-D with shape {list(k.shape)}")
    torch._check(v.shape == k.shape, lambda: f"{_ATTN}v must have k's shape {list(k.shape)} "
                 f"[B, Hkv, L, D]; got {list(v.shape)}")
    torch._check(q.dtype in _HALF_DTYPES, lambda: f"{_ATTN}q must have dtype torch.float16 or "
                 f"torch.bfloat16; got {q.dtype}")
    torch._check(k.dtype == q.dtype and v.dtype == q.dtype, lambda: f"{_ATTN}k and v must have "
                 f"q's dtype ({q.dtype}); got k {k.dtype} and v {v.dtype}")
    torch._check(k.device == q.device and v.device == q.device, lambda: f"{_ATTN}q, k and v must "
                 f"be on one device; got q on {q.device}, k on {k.device} and v on {v.device}")
    b, h, lq, d = q.shape
    hkv, length = k.shape[1], k.shape[2]
    torch._check(k.shape[0] == b and k.shape[3] == d, lambda: f"{_ATTN}k must be [B, Hkv, L, D] "
                 f"with q's B={b} and D={d}; got q {list(q.shape)} and k {list(k.shape)}")
    torch._check(hkv > 0 and h % hkv == 0, lambda: f"{_ATTN}q's heads must be a multiple of k's "
                 f"(grouped-query attention); got q with {h} heads and k with {hkv}")
    if not (d % 8 == 0 and 0 < d <= 256):
        raise ValueError(f"{_ATTN}the head dim D (q.size(3)) must be a multiple of 8 in [8, 256]; "
                         f"got {d}")
    if scale is not None and not math.isfinite(scale):
        raise ValueError(f"{_ATTN}scale must be finite; got {scale}")
    if mask is not None:
        torch._check(mask.dtype in _MASK_DTYPES, lambda: f"{_ATTN}mask must have dtype torch.bool "
                     "(True takes part) or an additive torch.float16, torch.bfloat16 or "
                     f"torch.float32; got {mask.dtype}")
        torch._check(mask.device == q.device, lambda: f"{_ATTN}mask must be on q's device "
                     f"({q.device}); got {mask.device}")
        full = (b, h, lq, length)
        torch._check(mask.dim() == 4 and all(mask.shape[i] in (full[i], 1) for i in range(4)),
                     lambda: f"{_ATTN}mask must be 4-D and broadcast to [B, H, Lq, L] = "
                     f"{list(full)} (each dim that size or 1); got shape {list(mask.shape)}")
    return b, lq, h, d


@torch.library.register_fake("cute_gemm::decode_attention")
def _decode_attention_fake(q, k, v, mask=None, scale=None):
    return q.new_empty(_check_attention_shapes(q, k, v, mask, scale))


def decode_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                     mask: torch.Tensor | None = None, *, scale: float | None = None
                     ) -> torch.Tensor:
    """Attention of a few query positions against a key/value cache, for decode.

    ``out[b, i, h] = softmax_j(scale * q[b, h, i] . k[b, h // G, j] + mask[b, h, i, j]) @
    v[b, h // G]`` with ``G = H // Hkv`` query heads per key/value head (grouped-query attention).
    The keys and values are read where they lie (e.g. a transformers static cache): nothing is
    expanded to the query heads, and each key and value row is read once per CTA for all the
    query heads of its group.

    Args:
        q: ``[B, H, Lq, D]`` fp16 or bf16, any strides (copied first where its rows are not
            16-byte aligned runs of d).
        k, v: ``[B, Hkv, L, D]``, q's dtype; on CUDA each row contiguous and 16-byte aligned
            (strides multiples of 8 elements), as a contiguous cache is.
        mask: None (every position takes part), ``torch.bool`` (True takes part, as in
            ``scaled_dot_product_attention``) or additive (fp16, bf16 or fp32; ``-inf``
            excludes); 4-D, each dim the size of ``[B, H, Lq, L]`` or 1.
        scale: the factor of ``q . k``; None for ``1 / sqrt(D)``.

    Returns:
        ``[B, Lq, H, D]``, q's dtype, contiguous: the layout a transformers attention function
        returns. A query row that no position takes part in (all excluded, or ``L = 0``) is 0.

    D must be a multiple of 8 up to 256. fp32 scores, softmax and sums, rounded once. Built for
    small ``Lq`` (decode, speculative verification): every query position is a CTA of its own, so
    a long prefill is correct but slow; use ``scaled_dot_product_attention`` there
    (``cute_gemm.attention`` does). Inference only (no autograd). On CPU it computes the
    reference (fp32 matmuls, the keys and values repeated to the query heads).
    """
    return torch.ops.cute_gemm.decode_attention.default(q, k, v, mask, scale)
