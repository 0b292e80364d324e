"""Weight-only quantization for the mixed-input GEMM: quantize, pack, unpack, dequantize.

A weight ``W[N, K]`` (``nn.Linear`` layout) is quantized per group of ``G`` consecutive elements
along K (``G`` in 32, 64, 128; ``-1`` means one group per output channel, ``G = K``) to integers
``q`` in ``[0, 2^bits)``, bits 4 or 8, with a scale ``s`` (and, asymmetric only, an integer zero
point ``z``) per group and column:

    dequantize:  w = (q - z) * s    computed in fp32 (exact), rounded once to the activation dtype

Quantization rules (all arithmetic in fp32; ``s`` is computed in fp32, rounded *up* to the
scales' dtype, and the stored value is the one used to compute ``q`` and ``z``, so the stored
tensors are consistent):

* symmetric (``zeros`` is ``None``, ``z = 2^(bits-1)``, i.e. 8 or 128):
  ``s = max|w| / (2^(bits-1) - 1)`` rounded up, ``q = clamp(round(w / s) + z, 0, 2^bits - 1)``.
  ``round(w / s)`` lies in ``[-(2^(bits-1) - 1), 2^(bits-1) - 1]`` (-7..7 for INT4), so the grid is
  symmetric around 0, ``+-max|w|`` map to ``+-(2^(bits-1) - 1)`` and nothing is clipped: every
  element is within ``s / 2`` of its dequantized value. (``q = 0`` is never produced but is
  valid.)
* asymmetric (``zeros`` holds ``z`` as a float value): the range is widened to include 0,
  ``lo = min(min(w), 0)``, ``hi = max(max(w), 0)``, ``s = (hi - lo) / (2^bits - 1)`` rounded
  *up* to the scales' dtype, ``z = clamp(round(-lo / s), 0, 2^bits - 1)``,
  ``q = clamp(round(w / s) + z, 0, 2^bits - 1)``. Including 0 keeps ``z`` inside ``[0, 2^bits)``
  (a group of all-positive weights would otherwise need a negative zero point) and makes 0
  exactly representable; rounding ``s`` up keeps the ``2^bits - 1`` steps wide enough for the
  range, so the clamp never costs more than half a step: the error is ``<= s / 2``.
* an all-zero group gets ``s = 0`` (``q = z``), which dequantizes to exact zeros, never NaN.
  ``round`` is round-half-to-even (``torch.round``).

The bound ``|w - dequantize(w)| <= s / 2`` holds for every group, with ``s`` the stored scale.
Rounding up is what keeps it where the exact scale is not representable: fp16 scales below
``2^-14`` are subnormal (coarser steps) and the smallest positive one is ``2^-24`` (about 6e-8),
so an fp16 group whose ``max|w|`` is far below that dequantizes to zeros, within ``s / 2``. bf16
scales have fp32's range; use ``dtype=torch.bfloat16`` for weights that small. A range that
overflows the scales' dtype (fp16: ``max|w|`` above about 4.6e5 for INT4) is refused with an error
naming the row.

The packed format (``pack_weight``) is the one the CUDA kernel reads; its authoritative
description is ``csrc/kernels/mixed/weight_format.hpp``, which also holds every rule above (valid
bits and group sizes, ``-1`` -> K, the K/N multiples, ``block_k``, the packed shape); they reach
Python through ``cute_gemm.weight_format``. ``packed_layout`` and ``packed_tv_layout`` are the
header's layouts of the format as ``cute_gemm.layout.Layout`` objects, for pictures
(``cute_gemm.layout.to_svg`` / ``to_svg_tv``); pack and unpack are derived from them.
"""

import operator
from dataclasses import dataclass

import torch

from . import weight_format as _wf
from .weight_format import (  # noqa: F401  (re-exported: the checks every module imports)
    BLOCK_N, LANES, WORDS_PER_LANE, block_k, check_bits, check_group_size, packed_shape)
from .weight_format import check_k as _check_k  # noqa: F401
from .weight_format import check_n as _check_n  # noqa: F401
from .weight_format import is_int as _is_int  # noqa: F401

__all__ = [
    "QuantizedWeight",
    "format_tag",
    "quantize",
    "dequantize",
    "pack_weight",
    "unpack_weight",
    "packed_layout",
    "packed_tv_layout",
    "packed_shape",
]

SUPPORTED_BITS = _wf.VALID_BITS                 # (4, 8)
SUPPORTED_GROUP_SIZES = _wf.VALID_GROUP_SIZES   # (32, 64, 128, -1)
_HALF_DTYPES = (torch.float16, torch.bfloat16)
# The compute dtype fp32 weights and models get unless told otherwise: bf16 has fp32's exponent
# range, so casting an fp32 activation to it never overflows (fp16 overflows above 65504); its
# coarser mantissa (8 bits) is far below the 4/8-bit weight's own error.
DEFAULT_FP32_COMPUTE_DTYPE = torch.bfloat16
_INT_DTYPES = (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64)


# --------------------------------------------------------------------------------- packing


def pack_weight(q, bits, pad_value=None):
    """Packs quantized values ``q[N, K]`` (integers in ``[0, 2^bits)``) into the kernel's format.

    Returns a contiguous int32 tensor on ``q``'s device of shape

        INT4: ``[N/8, Kp/128, 32, 4]``, Kp = K rounded up to 128
        INT8: ``[N/8, Kp/64, 32, 4]``,  Kp = K rounded up to 64

    walked as n8 block -> k block -> lane -> word. Lane ``l = 4 g + t`` holds column
    ``n = 8 nb + g``; with ``k0 = kb * bk + 16 j`` the mma B fragment of k16 step ``j`` is
    ``r0 = (W[n, k0+2t], W[n, k0+2t+1])``, ``r1 = (W[n, k0+2t+8], W[n, k0+2t+9])``.

    * INT4: word ``w`` holds steps ``2w`` and ``2w+1``; nibble ``i`` (bits ``4i..4i+3``) is
      ``[r0(2w).x, r1(2w).x, r0(2w+1).x, r1(2w+1).x, r0(2w).y, r1(2w).y, r0(2w+1).y,
      r1(2w+1).y][i]``.
    * INT8: word ``w`` holds step ``j = w``; byte ``i`` is ``[r0.x, r1.x, r0.y, r1.y][i]``.

    (``x``/``y`` are the low/high halves of a register.) See csrc/kernels/mixed/weight_format.hpp.

    Args:
        q: ``[N, K]`` integer tensor (uint8, int8, int16, int32 or int64), N a multiple of 8.
        bits: 4 or 8.
        pad_value: the value for the padded columns ``K..Kp-1``: an int, or a ``[N]`` integer
            tensor (one value per row, e.g. each row's last zero point so the padding dequantizes
            to 0). Default ``2^(bits-1)``, the symmetric zero point.
    """
    where = "pack_weight"
    bits = check_bits(bits, where)
    if not isinstance(q, torch.Tensor):
        raise TypeError(f"{where}: q must be a torch.Tensor; got {type(q).__name__}")
    if q.dtype not in _INT_DTYPES:
        raise ValueError(f"{where}: q must have an integer dtype (torch.uint8, torch.int8, "
                         f"torch.int16, torch.int32 or torch.int64); got {q.dtype}")
    if q.dim() != 2:
        raise ValueError(f"{where}: q must be a 2-D tensor [N, K]; got shape {list(q.shape)}")
    n, k = q.shape
    _check_n(n, where)
    if k < 1:
        raise ValueError(f"{where}: K must be >= 1; got K={k}")
    qmax = (1 << bits) - 1
    if n > 0:
        lo, hi = int(q.min()), int(q.max())
        if lo < 0 or hi > qmax:
            raise ValueError(f"{where}: q must hold values in [0, {qmax}] for bits={bits}; got "
                             f"values in [{lo}, {hi}]")
    if pad_value is None:
        pad_value = 1 << (bits - 1)
    if isinstance(pad_value, torch.Tensor):
        if pad_value.dtype not in _INT_DTYPES or pad_value.shape != (n,):
            raise ValueError(f"{where}: pad_value must be an int or a [N] integer tensor "
                             f"(N={n}); got a {pad_value.dtype} tensor of shape "
                             f"{list(pad_value.shape)}")
        pad = pad_value.to(device=q.device, dtype=torch.int64).reshape(n, 1)
        pad_ok = n == 0 or (int(pad.min()) >= 0 and int(pad.max()) <= qmax)
    else:
        if not _is_int(pad_value):
            raise TypeError(f"{where}: pad_value must be None, an int or a [N] integer tensor; "
                            f"got {type(pad_value).__name__} {pad_value!r}")
        pad = operator.index(pad_value)
        pad_ok = 0 <= pad <= qmax
    if not pad_ok:
        raise ValueError(f"{where}: pad_value must lie in [0, {qmax}] for bits={bits}")

    kp = _wf.k_blocks(k, bits) * block_k(bits)
    full = torch.empty((n, kp), dtype=torch.int64, device=q.device)
    full[:, :k] = q
    if kp > k:
        full[:, k:] = pad
    return _wf.pack_fields(full, bits)


def unpack_weight(packed, bits, k):
    """Inverse of ``pack_weight``: the int32 ``[N, k]`` values (the K padding dropped)."""
    where = "unpack_weight"
    bits = check_bits(bits, where)
    if not isinstance(packed, torch.Tensor):
        raise TypeError(f"{where}: packed must be a torch.Tensor; got {type(packed).__name__}")
    if packed.dtype != torch.int32:
        raise ValueError(f"{where}: packed must have dtype torch.int32; got {packed.dtype}")
    bk = block_k(bits)
    kb = packed_shape(0, k, bits)[1] if _is_int(k) and 1 <= k < (1 << 62) else None
    if (packed.dim() != 4 or kb is None
            or tuple(packed.shape[1:]) != packed_shape(0, k, bits)[1:]):
        raise ValueError(f"{where}: packed must have shape [N/8, ceil(K/{bk}), {LANES}, "
                         f"{WORDS_PER_LANE}] for bits={bits} and K={k} (= [N/8, "
                         f"{'?' if kb is None else kb}, {LANES}, {WORDS_PER_LANE}]); got "
                         f"{list(packed.shape)}")
    return _wf.unpack_fields(packed, bits)[:, :k].contiguous()


def packed_layout(bits, n=None, k=None):
    """The packed format as a layout from weight coordinates ``(n, k)`` to nibble/byte index.

    Without ``n``/``k``: one ``8 x bk`` block (bk 128 for INT4, 64 for INT8), ``(n, k)`` ->
    index of the nibble (INT4) or byte (INT8) within the block's 512 bytes, the header's
    ``PackedFormat<bits>::BlockLayout`` (``cute_gemm.weight_format.block_layout``):

        INT4: ``(8,(2,4,2,2,4)):(128,(4,32,1,2,8))``   k = e + 2t + 8h + 16s + 32w
        INT8: ``(8,(2,4,2,4)):(64,(2,16,1,4))``        k = e + 2t + 8h + 16w

    With ``n`` and ``k``: the whole ``[n, Kp]`` padded weight, ``(n, k)`` -> nibble/byte index in
    the flattened packed tensor; int32 element ``index // (32 // bits)``, field
    ``index % (32 // bits)`` (bits ``bits * field`` and up). The mapping is affine in the
    hierarchical coordinates, so it is a single ``Layout``; draw it with
    ``cute_gemm.layout.to_svg(packed_layout(4))``.
    """
    from .layout import Layout, size

    bits = check_bits(bits, "packed_layout")
    block = _wf.block_layout(bits)
    if n is None and k is None:
        return block
    if n is None or k is None:
        raise ValueError("packed_layout: give both n and k, or neither")
    _check_n(n, "packed_layout")
    nb, kb, _, _ = packed_shape(n, k, bits)
    (block_n, k_shape), (n_stride, k_stride) = block.shape, block.stride
    fields = size(block)  # fields per (nb, kb) block
    return Layout(((block_n, max(nb, 1)), (k_shape, kb)),
                  ((n_stride, kb * fields), (k_stride, fields)))


def packed_tv_layout(bits):
    """Thread-value layout of one packed block: ``(lane, value)`` -> ``n + 8 k`` in the 8 x bk
    block, value = ``field + (32 // bits) * word`` (the lane's nibbles/bytes in memory order);
    the header's ``PackedFormat<bits>::TV``, the block layout's inverse:

        INT4: ``((4,8),(4,2,4)):((16,1),(64,8,256))`` over an (8, 128) tile
        INT8: ``((4,8),(2,2,4)):((16,1),(64,8,128))`` over an (8, 64) tile

    Draw it with ``cute_gemm.layout.to_svg_tv(packed_tv_layout(4), (8, 128))``.
    """
    return _wf.tv_layout(check_bits(bits, "packed_tv_layout"))


# ------------------------------------------------------------------------------ format tag
#
# A packed buffer is plain int32 words; nothing in it says how it was packed, and the INT4 and
# INT8 packed shapes coincide for K <= 64. Containers that carry packed buffers without a
# QuantizedWeight around them (QuantLinear's state_dict, files) carry this tag beside them.

PACKED_FORMAT_MAGIC = 0x43470001  # "CG" and the packed format's version, 1


def format_tag(bits, group_size, symmetric, device=None):
    """The int32 tensor ``[PACKED_FORMAT_MAGIC, bits, group_size, symmetric]`` that names a packed
    buffer's format (QuantLinear's ``qformat`` buffer)."""
    bits = check_bits(bits, "format_tag")
    group_size = check_group_size(group_size, "format_tag")
    return torch.tensor([PACKED_FORMAT_MAGIC, bits, group_size, int(bool(symmetric))],
                        dtype=torch.int32, device=device)


def format_tag_mismatch(tag, bits, group_size, symmetric):
    """Why ``tag`` does not describe a ``(bits, group_size, symmetric)`` packed buffer, or
    ``None`` when it does."""
    if not isinstance(tag, torch.Tensor) or tag.dtype not in _INT_DTYPES or tag.shape != (4,):
        return (f"the format tag must be an int32 tensor of 4 values [magic, bits, group_size, "
                f"symmetric]; got {_describe_tensor(tag)}")
    magic, t_bits, t_group, t_sym = (int(v) for v in tag.tolist())
    if magic != PACKED_FORMAT_MAGIC:
        return (f"the format tag's magic is {magic:#x}, not cute_gemm's packed format "
                f"{PACKED_FORMAT_MAGIC:#x} (another format or version)")
    if (t_bits, t_group, bool(t_sym)) != (bits, group_size, bool(symmetric)):
        return (f"the buffer was packed for bits={t_bits}, group_size={t_group}, "
                f"symmetric={bool(t_sym)}, not bits={bits}, group_size={group_size}, "
                f"symmetric={bool(symmetric)}")
    return None


def _describe_tensor(value):
    if isinstance(value, torch.Tensor):
        return f"a {value.dtype} tensor of shape {list(value.shape)}"
    return type(value).__name__


# --------------------------------------------------------------------------- quantized weight


@dataclass(frozen=True, eq=False, repr=False)
class QuantizedWeight:
    """A quantized ``[N, K]`` weight in the mixed-input GEMM's format.

    The constructor checks every tensor's dtype, shape and device against ``bits``,
    ``group_size`` and ``shape``; ``packed``'s words themselves carry no format, so building one
    from raw buffers asserts that they were packed for ``bits`` (for K <= 64 the INT4 and INT8
    packed shapes coincide). ``quantize`` and the checkpoint importers build consistent ones;
    ``QuantLinear`` stores the format as a tag beside the buffer and checks it on load.

    Attributes:
        packed: int32 ``[N/8, ceil(K/bk), 32, 4]`` (bk = 128 for INT4, 64 for INT8), the kernel's
            layout (see ``pack_weight``).
        scales: ``[K/G, N]`` (per-channel: ``[1, N]``) in the activation dtype.
        zeros: ``None`` (symmetric, zero point ``2^(bits-1)``) or ``[K/G, N]`` in the activation
            dtype, holding each group's integer zero point.
        bits: 4 or 8.
        group_size: 32, 64, 128 or -1 (per-channel), as given to ``quantize``.
        shape: ``(N, K)`` of the original weight.
        dtype: the activation dtype (that of ``scales``), torch.float16 or torch.bfloat16.
    """

    packed: torch.Tensor
    scales: torch.Tensor
    zeros: torch.Tensor | None
    bits: int
    group_size: int
    shape: tuple

    def __post_init__(self):
        where = "QuantizedWeight"
        if not isinstance(self.shape, (tuple, list, torch.Size)) or len(self.shape) != 2:
            raise ValueError(f"{where}: shape must be (N, K); got {self.shape!r}")
        if not all(_is_int(d) for d in self.shape):
            raise TypeError(f"{where}: shape must be two ints (N, K); got {self.shape!r}")
        shape = (operator.index(self.shape[0]), operator.index(self.shape[1]))
        object.__setattr__(self, "shape", shape)
        n, k = shape
        object.__setattr__(self, "bits", check_bits(self.bits, where))
        object.__setattr__(self, "group_size", check_group_size(self.group_size, where))
        _check_n(n, where)
        g = _check_k(k, self.group_size, where)
        for name in ("packed", "scales"):
            if not isinstance(getattr(self, name), torch.Tensor):
                raise TypeError(f"{where}: {name} must be a torch.Tensor; got "
                                f"{type(getattr(self, name)).__name__}")
        if self.packed.dtype != torch.int32:
            raise ValueError(f"{where}: packed must have dtype torch.int32; got "
                             f"{self.packed.dtype}")
        want = packed_shape(n, k, self.bits)
        if tuple(self.packed.shape) != want:
            raise ValueError(f"{where}: packed must have shape {list(want)} for shape (N, K)="
                             f"{shape} and bits={self.bits}; got {list(self.packed.shape)}")
        if self.scales.dtype not in _HALF_DTYPES:
            raise ValueError(f"{where}: scales must have dtype torch.float16 or torch.bfloat16; "
                             f"got {self.scales.dtype}")
        groups = (k // g, n)
        if tuple(self.scales.shape) != groups:
            raise ValueError(f"{where}: scales must have shape [K/G, N] = {list(groups)} "
                             f"(G={g}); got {list(self.scales.shape)}")
        tensors = [self.packed, self.scales]
        if self.zeros is not None:
            if not isinstance(self.zeros, torch.Tensor):
                raise TypeError(f"{where}: zeros must be None or a torch.Tensor; got "
                                f"{type(self.zeros).__name__}")
            if self.zeros.dtype != self.scales.dtype or tuple(self.zeros.shape) != groups:
                raise ValueError(f"{where}: zeros must match scales ({list(groups)}, "
                                 f"{self.scales.dtype}); got {list(self.zeros.shape)}, "
                                 f"{self.zeros.dtype}")
            tensors.append(self.zeros)
        devices = {t.device for t in tensors}
        if len(devices) != 1:
            raise ValueError(f"{where}: packed, scales and zeros must be on one device; got "
                             f"{sorted(str(d) for d in devices)}")

    @property
    def dtype(self):
        """The activation dtype (that of ``scales``)."""
        return self.scales.dtype

    @property
    def device(self):
        return self.packed.device

    @property
    def symmetric(self):
        return self.zeros is None

    @property
    def effective_group_size(self):
        """G as the kernel sees it: ``group_size``, or K for per-channel."""
        return _wf.effective_group_size(self.group_size, self.shape[1])

    @property
    def nbytes(self):
        """Bytes of the packed weight, scales and zero points together."""
        total = self.packed.nbytes + self.scales.nbytes
        if self.zeros is not None:
            total += self.zeros.nbytes
        return total

    def to(self, device, non_blocking=False):
        """A copy on ``device`` (the same object when it is already there)."""
        def move(t):
            return None if t is None else t.to(device, non_blocking=non_blocking)

        packed, scales, zeros = move(self.packed), move(self.scales), move(self.zeros)
        if packed is self.packed and scales is self.scales and zeros is self.zeros:
            return self  # Tensor.to returns the tensor itself when nothing changes
        return QuantizedWeight(packed, scales, zeros, self.bits, self.group_size, self.shape)

    def cuda(self, device=None):
        return self.to("cuda" if device is None else device)

    def cpu(self):
        return self.to("cpu")

    def dequantize(self, dtype=None):
        """The ``[N, K]`` weight: ``(q - z) * s`` rounded to ``dtype``, default ``self.dtype``
        (see ``dequantize``)."""
        return dequantize(self, dtype)

    def __repr__(self):
        n, k = self.shape
        group = "per-channel" if self.group_size == _wf.PER_CHANNEL else str(self.group_size)
        return (f"QuantizedWeight(shape=({n}, {k}), bits={self.bits}, group_size={group}, "
                f"symmetric={self.symmetric}, dtype={self.dtype}, device={self.device}, "
                f"nbytes={self.nbytes})")


# ------------------------------------------------------------------------ quantize / dequantize


def _const(value, like):
    """A 0-dim fp32 tensor on ``like``'s device."""
    return torch.full((), value, dtype=torch.float32, device=like.device)


def _round_up(x, dtype):
    """Non-negative fp32 ``x`` rounded up to ``dtype`` (fp16/bf16): the nearest value, bumped to
    the next representable one where rounding went down (positive floats order like their bit
    patterns, so the bump is +1 on the bits)."""
    y = x.to(dtype)
    return (y.view(torch.int16) + (y.float() < x).to(torch.int16)).view(dtype)


_QUANTIZE_CHUNK = 1 << 22


def _quantize_rows(weight, row0, bits, g, symmetric, dtype, where):
    """quantize's arithmetic on the rows of one block (``row0``: the first one's index, for
    messages): its packed rows, scales [groups, rows] and zeros [groups, rows] (or None)."""
    qmax = (1 << bits) - 1
    n, k = weight.shape
    w = weight.detach().float().reshape(n, k // g, g)
    # Divisions by a constant go through a tensor divisor: torch's CUDA kernels multiply by the
    # (inexact) reciprocal of a Python scalar, which would make CUDA and CPU results differ.
    if symmetric:
        scale = w.abs().amax(dim=-1) / _const(float((1 << (bits - 1)) - 1), w)
    else:
        lo = w.amin(dim=-1).clamp(max=0.0)
        hi = w.amax(dim=-1).clamp(min=0.0)
        scale = (hi - lo) / _const(float(qmax), w)
    # The scale is computed in fp32 and rounded *up* to the scales' dtype: with the stored scale
    # s >= the exact one, every |w| / s stays inside the integer grid, so nothing is clipped and
    # |w - dequantize(w)| <= s / 2 holds for every group, also where the exact scale is subnormal
    # or below the dtype's smallest value (fp16: 2^-24), where rounding to nearest could shrink
    # it by up to half or to 0 and clip the whole group.
    scale_stored = _round_up(scale, dtype)
    overflow = ~torch.isfinite(scale_stored)
    if bool(overflow.any()):
        row = int(overflow.nonzero()[0, 0])
        w_row = float(w[row].abs().max())
        row += row0
        if dtype == torch.float16:
            fix = ("quantize with dtype=torch.bfloat16 (bf16 scales have fp32's range) or rescale "
                   "the weight")
        else:
            fix = "rescale the weight (its range exceeds fp32's even before rounding)"
        raise ValueError(f"{where}: the weight's range overflows the scales' dtype {dtype} in "
                         f"row {row} (max |w| in that row = {w_row:.4g}); "
                         f"{fix}")
    s = scale_stored.float()
    s_div = torch.where(s == 0, torch.ones_like(s), s)  # all-zero groups: q = z, w = 0
    if symmetric:
        z = torch.full_like(s, float(1 << (bits - 1)))
    else:
        z = torch.round(-lo / s_div).clamp(0, qmax)
    q = (torch.round(w / s_div.unsqueeze(-1)) + z.unsqueeze(-1)).clamp(0, qmax)
    q = q.to(torch.int32).reshape(n, k)
    # Padding columns get the last group's zero point, so a kernel that reads them (with the last
    # group's scale) dequantizes them to 0.
    pad = z[:, -1].to(torch.int64) if n > 0 else None
    packed = pack_weight(q, bits, pad_value=pad)
    return packed, scale_stored.t(), None if symmetric else z.to(dtype).t()


def quantize(weight, bits=4, group_size=128, symmetric=True, dtype=None):
    """Quantizes an ``[N, K]`` weight for ``cute_gemm.mixed_gemm``; see the module docstring for
    the exact rules.

    Args:
        weight: ``[N, K]`` float tensor (fp16, bf16 or fp32) on CPU or CUDA, ``nn.Linear``
            layout. N must be a multiple of 8, K a multiple of ``group_size`` (of 32 for
            per-channel); all values finite.
        bits: 4 or 8.
        group_size: 32, 64, 128, or -1 for one group per output channel.
        symmetric: symmetric (no zero points stored) or asymmetric quantization.
        dtype: the activation (compute) dtype, which the scales/zero points use: torch.float16
            or torch.bfloat16. Default: the weight's dtype, or torch.bfloat16 for an fp32 weight
            (``DEFAULT_FP32_COMPUTE_DTYPE``: bf16 keeps fp32's range).

    Returns:
        A ``QuantizedWeight`` on the weight's device.
    """
    where = "quantize"
    if not isinstance(weight, torch.Tensor):
        raise TypeError(f"{where}: weight must be a torch.Tensor; got {type(weight).__name__}")
    if weight.dtype not in _HALF_DTYPES + (torch.float32,):
        raise ValueError(f"{where}: weight must have dtype torch.float16, torch.bfloat16 or "
                         f"torch.float32; got {weight.dtype}")
    if weight.dim() != 2:
        raise ValueError(f"{where}: weight must be a 2-D tensor [N, K]; got shape "
                         f"{list(weight.shape)}")
    bits = check_bits(bits, where)
    group_size = check_group_size(group_size, where)
    if dtype is None:
        dtype = weight.dtype if weight.dtype in _HALF_DTYPES else DEFAULT_FP32_COMPUTE_DTYPE
    if dtype not in _HALF_DTYPES:
        raise ValueError(f"{where}: dtype must be torch.float16 or torch.bfloat16; got {dtype}")
    n, k = weight.shape
    _check_n(n, where)
    g = _check_k(k, group_size, where)
    finite = torch.isfinite(weight)
    if not bool(finite.all()):
        bad = int((~finite).sum())
        raise ValueError(f"{where}: weight must be finite; got {bad} NaN/inf value(s)")

    # Row blocks of about _QUANTIZE_CHUNK elements (whole 8-row packing blocks): the fp32
    # temporaries of one block, not of the whole weight, are what quantizing adds to memory (a
    # layer quantized on the GPU while a checkpoint loads, or a large head).
    rows = max(8, _QUANTIZE_CHUNK // max(k, 1) // 8 * 8)
    parts = [_quantize_rows(weight[r:r + rows], r, bits, g, symmetric, dtype, where)
             for r in range(0, n, rows)] if n > 0 else [
        _quantize_rows(weight, 0, bits, g, symmetric, dtype, where)]
    packed = parts[0][0] if len(parts) == 1 else torch.cat([p[0] for p in parts], 0)
    scales = torch.cat([p[1] for p in parts], 1).contiguous()
    zeros = None if symmetric else torch.cat([p[2] for p in parts], 1).contiguous()
    return QuantizedWeight(packed, scales, zeros, bits, group_size, (n, k))


def dequantize(qw, dtype=None):
    """``[N, K]`` weight of a ``QuantizedWeight``: ``(q - z) * s`` computed in fp32 and rounded
    once to ``dtype`` (default ``qw.dtype``). The fp32 product is exact (``q - z`` has at most 9
    bits and ``s`` at most 11 significant bits), so ``dtype=torch.float32`` gives the exact
    dequantized weight, and the default is also what a half-precision ``(q - z) * s`` gives.

    The fused CUDA kernel (``mixed_gemm`` below 192 rows) multiplies by the scales after its
    integer products, so it computes with the exact weight (``dtype=torch.float32``); the CPU
    reference and the dense path from 192 rows use the weight rounded to ``qw.dtype``. The two
    differ by at most half an ulp per weight.
    """
    if not isinstance(qw, QuantizedWeight):
        raise TypeError(f"dequantize: expected a QuantizedWeight; got {type(qw).__name__}")
    n, k = qw.shape
    g = qw.effective_group_size
    q = unpack_weight(qw.packed, qw.bits, k).float().reshape(n, k // g, g)
    s = qw.scales.float().t().unsqueeze(-1)
    if qw.zeros is None:
        z = float(1 << (qw.bits - 1))
    else:
        z = qw.zeros.float().t().unsqueeze(-1)
    if dtype is None:
        dtype = qw.dtype
    if dtype not in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
        raise ValueError(f"dequantize: dtype must be torch.float16, torch.bfloat16, torch.float32 "
                         f"or torch.float64 (or None for qw.dtype); got {dtype}")
    return ((q - z) * s).reshape(n, k).to(dtype)
