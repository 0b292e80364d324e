"""Importing GPTQ and AWQ checkpoints into cute_gemm's weight format.

GPTQ and AWQ files hold the same kind of quantization cute_gemm uses (``w = (q - z) * s`` per
group of input rows and output column) but pack the integers differently. The converters here
unpack a checkpoint's tensors to plain integers ``q[N, K]`` and zero points, then repack them with
``cute_gemm.pack_weight``, so the imported layer computes exactly what the checkpoint's own
kernels compute.

Formats (``K`` input features, ``N`` output features, ``G`` the group size):

* GPTQ (AutoGPTQ / GPTQModel, ``quantize_config.json``: ``bits``, ``group_size``, ``desc_act``,
  ``sym``, ``checkpoint_format``):
  ``qweight`` int32 ``[K * bits / 32, N]`` packed along K, low bits first
  (4 bits: ``q[k, n] = (qweight[k // 8, n] >> 4 * (k % 8)) & 0xF``);
  ``qzeros`` int32 ``[ceil(K / G), N * bits / 32]`` packed the same way along N;
  ``scales`` ``[ceil(K / G), N]``; ``g_idx`` int ``[K]``, the group of each input row (not
  monotonic with act-order, ``desc_act``). The original format (``checkpoint_format: gptq``,
  "v1") stores ``z - 1`` and kernels add the 1 back; ``gptq_v2`` stores ``z``.
* AWQ (AutoAWQ, "GEMM" version): ``qweight`` int32 ``[K, N / 8]`` packed along N, nibble ``i``
  of word ``c`` holding column ``8 c + [0, 2, 4, 6, 1, 3, 5, 7][i]``; ``qzeros`` int32
  ``[K / G, N / 8]`` packed the same way (true zero points); ``scales`` ``[K / G, N]``.

What the conversion does beyond repacking:

* Zero points that are all ``2^(bits-1)`` give a symmetric ``QuantizedWeight`` (no zeros
  tensor: the kernel then reads one tensor less), otherwise the zero points are kept as float
  values. A v1 zero point stored as ``2^bits - 1`` becomes ``2^bits`` (v1 cannot store a true
  zero of 0: ``0 - 1`` wraps around); the kernels that read v1 files do the same and so does
  cute_gemm, whose dequantization is exact for zero points up to ``2^bits``.
* Act-order (``g_idx`` not ``k // G``): the input rows are sorted by group (stably) so each
  group is contiguous, as the kernel needs; the returned ``input_perm`` reorders the activations
  to match: ``x[..., input_perm] @ W_sorted^T == x @ W^T``.
* Group sizes the kernel lacks (it has 32, 64, 128 and per-channel) are expressed exactly with a
  smaller one that divides both ``G`` and ``K``, repeating each group's scale and zero point:
  GPTQ's group 256 or 1024 becomes 128, and a last partial group (``K % G != 0``, which GPTQ
  allows) is covered when ``K`` is a multiple of the smaller group. A single group over all of K
  becomes per-channel.
"""

import operator
import os
from dataclasses import dataclass, field

import torch

from ._files import load_safetensors, read_json, read_safetensors_header
from . import weight_format as _wf
from .quant import QuantizedWeight, pack_weight
from .weight_format import VALID_BITS, check_bits, is_int

__all__ = [
    "CheckpointLoadReport",
    "awq_linear",
    "awq_to_quantized",
    "gptq_linear",
    "gptq_to_quantized",
    "load_awq_model",
    "load_gptq_model",
    "load_state_dict_files",
]

GPTQ_FORMATS = ("gptq", "gptq_v2")
AWQ_ORDER = (0, 2, 4, 6, 1, 3, 5, 7)  # nibble i of an AWQ word holds column 8c + AWQ_ORDER[i]
# The kernel's group sizes (the rulebook's, per-channel aside), largest (fewest scales) first.
_KERNEL_GROUPS = tuple(sorted((g for g in _wf.VALID_GROUP_SIZES if g != _wf.PER_CHANNEL),
                              reverse=True))
_KERNEL_GROUPS_TEXT = ", ".join(map(str, sorted(_KERNEL_GROUPS)))  # "32, 64, 128"
_MIN_GROUP = min(_KERNEL_GROUPS)
_HALF_DTYPES = (torch.float16, torch.bfloat16)
_FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
_INDEX_DTYPES = (torch.int16, torch.int32, torch.int64)
GPTQ_SUFFIXES = ("qweight", "qzeros", "scales", "g_idx", "bias")
AWQ_SUFFIXES = ("qweight", "qzeros", "scales", "bias")


# ------------------------------------------------------------------------------ argument checks


def _check_tensor(t, name, where, dtypes, dims):
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{where}: {name} must be a torch.Tensor; got {type(t).__name__}")
    if t.dtype not in dtypes:
        want = " or ".join(str(d) for d in dtypes)
        raise ValueError(f"{where}: {name} must have dtype {want}; got {t.dtype}")
    if t.dim() != dims:
        raise ValueError(f"{where}: {name} must be a {dims}-D tensor; got shape {list(t.shape)}")


def _check_bits(bits, allowed, where):
    """Returns ``bits`` as an int: one of the kernel's widths (``check_bits``) within
    ``allowed``."""
    bits = check_bits(bits, where)
    if bits not in allowed:
        raise ValueError(f"{where}: bits must be {' or '.join(map(str, allowed))} (what "
                         f"cute_gemm's kernel reads); got bits={bits!r}")
    return bits


def _check_group_size(group_size, where):
    """A checkpoint's group size, as an int: -1 (per-channel) or a positive multiple of 32 (the
    kernel's smallest group; other sizes cannot be expressed with the kernel's groups)."""
    if not is_int(group_size):
        raise TypeError(f"{where}: group_size must be an int ({_wf.PER_CHANNEL} or a positive "
                        f"multiple of {_MIN_GROUP}); got {type(group_size).__name__} "
                        f"{group_size!r}")
    group_size = operator.index(group_size)
    if not (group_size == _wf.PER_CHANNEL or (group_size > 0 and group_size % _MIN_GROUP == 0)):
        raise ValueError(f"{where}: group_size must be {_wf.PER_CHANNEL} (per-channel) or a "
                         f"positive multiple of {_MIN_GROUP} (the kernel's groups are "
                         f"{_KERNEL_GROUPS_TEXT}); got group_size={group_size!r}")
    return group_size


def _resolve_dtype(dtype, scales, where):
    if dtype is None:
        return scales.dtype if scales.dtype in _HALF_DTYPES else torch.float16
    if dtype not in _HALF_DTYPES:
        raise ValueError(f"{where}: dtype must be None, torch.float16 or torch.bfloat16 (the "
                         f"activation dtype); got {dtype!r}")
    return dtype


def _check_same_device(where, **tensors):
    devices = {name: t.device for name, t in tensors.items() if t is not None}
    if len(set(devices.values())) > 1:
        listed = ", ".join(f"{name} on {d}" for name, d in devices.items())
        raise ValueError(f"{where}: all tensors must be on one device; got {listed}")


# ----------------------------------------------------------------------------------- unpacking


def _unpack_words(words, bits):
    """int32 ``[..., W]`` -> int32 ``[..., W, 32 / bits]``: field i is bits ``bits*i`` and up
    (low bits first). The arithmetic shift of a negative word brings in ones; the mask drops
    them."""
    shifts = torch.arange(0, 32, bits, dtype=torch.int32, device=words.device)
    return (words.unsqueeze(-1) >> shifts) & ((1 << bits) - 1)


def _unpack_gptq_qweight(qweight, bits):
    """GPTQ ``[K * bits / 32, N]`` packed along K -> ``q[N, K]``."""
    rows, n = qweight.shape
    fields = _unpack_words(qweight.t(), bits)  # [N, K/pw, pw]: k = pw * row + field
    return fields.reshape(n, rows * (32 // bits))


def _unpack_gptq_qzeros(qzeros, bits):
    """GPTQ ``[groups, N * bits / 32]`` packed along N -> ``[groups, N]``."""
    groups, words = qzeros.shape
    return _unpack_words(qzeros, bits).reshape(groups, words * (32 // bits))


def _unpack_awq(packed):
    """AWQ ``[R, N / 8]`` (columns interleaved by ``AWQ_ORDER``) -> ``[R, N]`` in column order."""
    rows, words = packed.shape
    fields = _unpack_words(packed, 4)  # [R, N/8, 8]; field i is column 8c + AWQ_ORDER[i]
    column_to_field = torch.argsort(torch.tensor(AWQ_ORDER, device=packed.device))
    return fields[..., column_to_field].reshape(rows, words * 8)


# ------------------------------------------------------------------------------ groups, packing


def _kernel_group(k, group, where):
    """The kernel group size that represents a checkpoint's groups of ``group`` rows (``-1``:
    per-channel) over K rows exactly: the checkpoint's own size when the kernel has it and it
    tiles K; per-channel for a single group; otherwise the largest kernel size dividing both.
    """
    if _wf.effective_group_size(group, k) == k:  # per-channel, or one group over all of K
        if not _wf.valid_k(k, _wf.PER_CHANNEL):
            raise ValueError(f"{where}: K must be a multiple of {_wf.k_multiple(_wf.PER_CHANNEL)} "
                             f"for a single group over all of K (per-channel, group_size={group}); "
                             f"got K={k}")
        return _wf.PER_CHANNEL
    if group in _KERNEL_GROUPS and _wf.valid_k(k, group):
        return group
    for g in _KERNEL_GROUPS:
        if group % g == 0 and _wf.valid_k(k, g):
            return g
    raise ValueError(f"{where}: K={k} with group_size={group} cannot be expressed with the "
                     f"kernel's groups ({_KERNEL_GROUPS_TEXT}): K must be a multiple of "
                     f"{_MIN_GROUP} so that groups of {_MIN_GROUP} tile both the checkpoint's "
                     f"groups and K")


def _to_quantized(q, zeros, scales, k_group, bits, dtype, where):
    """Builds a QuantizedWeight from integer ``q[N, K]``, integer ``zeros[groups, N]`` and
    ``scales[groups, N]`` whose group ``j`` covers (sorted) rows ``j*k_group`` to
    ``(j+1)*k_group - 1`` (the last one possibly shorter; ``k_group`` is K for one group)."""
    n, k = q.shape
    if not _wf.valid_n(n):
        raise ValueError(f"{where}: N (output features) must be a multiple of {_wf.BLOCK_N} for "
                         f"the kernel; got N={n}")
    g = _kernel_group(k, k_group if k_group < k else _wf.PER_CHANNEL, where)
    g_eff = _wf.effective_group_size(g, k)
    if g_eff != k_group and scales.shape[0] > 1:
        # Each kernel group lies inside one checkpoint group (g divides k_group): repeat.
        source = torch.arange(0, k, g_eff, device=q.device) // k_group
        scales, zeros = scales.index_select(0, source), zeros.index_select(0, source)
    if not bool(torch.isfinite(scales).all()):
        raise ValueError(f"{where}: scales must be finite; got "
                         f"{int((~torch.isfinite(scales)).sum())} NaN/inf value(s)")
    # Fresh copies: tensors from a safetensors file alias its memory map, which is only 8-byte
    # aligned (the kernel reads scales and zero points from 16-byte aligned addresses).
    source_scales = scales
    scales = scales.to(dtype, copy=True).contiguous()
    advice = ("pass dtype=torch.bfloat16 (bf16 has fp32's range)" if dtype == torch.float16
              else "the checkpoint's scales are out of range")
    if not bool(torch.isfinite(scales).all()):
        raise ValueError(f"{where}: scales overflow dtype {dtype}; {advice}")
    if bool(((scales == 0) & (source_scales != 0)).any()):
        raise ValueError(f"{where}: scales underflow to 0 in dtype {dtype} (the checkpoint has "
                         f"scales as small as {float(source_scales.abs().min()):.3g}), which "
                         f"would zero their groups; {advice}")
    qmax = (1 << bits) - 1
    symmetric = bool((zeros == (1 << (bits - 1))).all())
    # The padding up to the packed block dequantizes to 0 with the last group's zero point (the
    # kernel also treats activations beyond K as zero); a v1 zero point of 2^bits cannot be
    # stored there and is clamped.
    pad = zeros[-1].to(torch.int64).clamp(0, qmax)
    packed = pack_weight(q, bits, pad_value=pad)
    zeros_out = None if symmetric else zeros.to(dtype, copy=True).contiguous()
    return QuantizedWeight(packed, scales, zeros_out, bits, g, (n, k))


def _sort_by_group(g_idx, k, k_group, groups, where):
    """The stable order of the K rows by group (``None`` when already in order), after checking
    that each group has exactly its ``k_group`` rows (the last one ``K - (groups-1)*k_group``)."""
    _check_tensor(g_idx, "g_idx", where, _INDEX_DTYPES, 1)
    if g_idx.shape[0] != k:
        raise ValueError(f"{where}: g_idx must have one entry per input row (K={k}, from "
                         f"qweight); got shape {list(g_idx.shape)}")
    g_idx = g_idx.to(torch.int64)
    lo, hi = int(g_idx.min()), int(g_idx.max())
    if lo < 0 or hi >= groups:
        raise ValueError(f"{where}: g_idx values must lie in [0, {groups}) (the number of groups, "
                         f"scales.shape[0]); got values in [{lo}, {hi}]")
    counts = torch.bincount(g_idx, minlength=groups)
    want = torch.full_like(counts, k_group)
    want[-1] = k - (groups - 1) * k_group
    if not torch.equal(counts, want):
        j = int((counts != want).nonzero()[0])
        raise ValueError(f"{where}: each group must have group_size={k_group} rows in g_idx (the "
                         f"last one {int(want[-1])}); got {int(counts[j])} rows in group {j}")
    order = torch.sort(g_idx, stable=True).indices
    if torch.equal(order, torch.arange(k, device=order.device)):
        return None
    return order


# ----------------------------------------------------------------------------------------- GPTQ


def gptq_to_quantized(qweight, qzeros, scales, g_idx=None, *, bits, group_size, sym=None,
                      checkpoint_format="gptq", dtype=None):
    """Converts one GPTQ-quantized linear layer to a ``QuantizedWeight``.

    Args:
        qweight: int32 ``[K * bits / 32, N]``, packed along K (low bits first).
        qzeros: int32 ``[ceil(K / G), N * bits / 32]``, packed along N.
        scales: ``[ceil(K / G), N]`` fp16, bf16 or fp32.
        g_idx: optional int ``[K]``, each input row's group (act-order when not ``k // G``);
            ``None`` means ``k // G``.
        bits: 4 or 8.
        group_size: the checkpoint's group size G: -1 (per-channel) or a multiple of 32.
        sym: the checkpoint's ``sym`` flag. ``True`` checks that every zero point is
            ``2^(bits-1)`` (a mismatch usually means the wrong ``checkpoint_format``);
            ``None``/``False`` accept any. Zero points that are all ``2^(bits-1)`` give a
            symmetric result either way.
        checkpoint_format: ``"gptq"`` (v1: zero points stored minus one) or ``"gptq_v2"``.
        dtype: the activation dtype for scales/zero points; default the scales' dtype (fp16 for
            fp32 scales).

    Returns:
        ``(qw, input_perm)``: ``input_perm`` is ``None``, or for act-order an int64 ``[K]``
        tensor with ``x[..., input_perm] @ qw.dequantize().T == x @ W.T``.
    """
    where = "gptq_to_quantized"
    bits = _check_bits(bits, VALID_BITS, where)
    group_size = _check_group_size(group_size, where)
    if checkpoint_format not in GPTQ_FORMATS:
        raise ValueError(f"{where}: checkpoint_format must be 'gptq' (v1) or 'gptq_v2'; got "
                         f"checkpoint_format={checkpoint_format!r}")
    if sym not in (None, True, False):
        raise ValueError(f"{where}: sym must be None, True or False; got sym={sym!r}")
    _check_tensor(qweight, "qweight", where, (torch.int32,), 2)
    _check_tensor(qzeros, "qzeros", where, (torch.int32,), 2)
    _check_tensor(scales, "scales", where, _FLOAT_DTYPES, 2)
    _check_same_device(where, qweight=qweight, qzeros=qzeros, scales=scales, g_idx=g_idx)
    dtype = _resolve_dtype(dtype, scales, where)

    per_word = 32 // bits
    k, n = qweight.shape[0] * per_word, qweight.shape[1]
    if k == 0 or n == 0:
        raise ValueError(f"{where}: qweight must be non-empty; got shape {list(qweight.shape)}")
    k_group = _wf.effective_group_size(group_size, k)  # a group larger than K is K
    groups = -(-k // k_group)
    if tuple(scales.shape) != (groups, n):
        raise ValueError(f"{where}: scales must have shape [ceil(K/G), N] = [{groups}, {n}] "
                         f"(K={k}, N={n} from qweight {list(qweight.shape)} with bits={bits}, "
                         f"G={group_size}); got {list(scales.shape)}")
    if (n * bits) % 32 != 0 or tuple(qzeros.shape) != (groups, n * bits // 32):
        raise ValueError(f"{where}: qzeros must have shape [ceil(K/G), N*bits/32] = [{groups}, "
                         f"{n * bits / 32:g}] (K={k}, N={n}, bits={bits}, G={group_size}); got "
                         f"{list(qzeros.shape)}")

    q = _unpack_gptq_qweight(qweight, bits)  # [N, K]
    zeros = _unpack_gptq_qzeros(qzeros, bits)  # [groups, N]
    if checkpoint_format == "gptq":
        zeros = zeros + 1
    if sym:
        centre = 1 << (bits - 1)
        if not bool((zeros == centre).all()):
            found = sorted(set(zeros.unique().tolist()))[:8]
            raise ValueError(f"{where}: sym=True but the zero points (checkpoint_format="
                             f"{checkpoint_format!r}) are not all {centre}: found {found}; the "
                             f"checkpoint_format is probably wrong ('gptq' files store {centre - 1}"
                             f", 'gptq_v2' files {centre})")
    input_perm = None
    if g_idx is not None:
        input_perm = _sort_by_group(g_idx, k, k_group, groups, where)
        if input_perm is not None:
            q = q.index_select(1, input_perm)
    qw = _to_quantized(q, zeros, scales, k_group, bits, dtype, where)
    return qw, input_perm


# ------------------------------------------------------------------------------------------ AWQ


def awq_to_quantized(qweight, qzeros, scales, *, group_size=128, bits=4, dtype=None):
    """Converts one AWQ-quantized ("GEMM" version) linear layer to a ``QuantizedWeight``.

    Args:
        qweight: int32 ``[K, N / 8]``, packed along N in AWQ's interleaved nibble order.
        qzeros: int32 ``[K / G, N / 8]``, packed the same way (true zero points).
        scales: ``[K / G, N]`` fp16, bf16 or fp32.
        group_size: G: -1 (per-channel) or a multiple of 32; AWQ's default is 128.
        bits: 4 (AWQ's GEMM format holds 4-bit weights only).
        dtype: the activation dtype for scales/zero points; default the scales' dtype (fp16 for
            fp32 scales).
    """
    where = "awq_to_quantized"
    bits = _check_bits(bits, (4,), where)
    group_size = _check_group_size(group_size, where)
    _check_tensor(qweight, "qweight", where, (torch.int32,), 2)
    _check_tensor(qzeros, "qzeros", where, (torch.int32,), 2)
    _check_tensor(scales, "scales", where, _FLOAT_DTYPES, 2)
    _check_same_device(where, qweight=qweight, qzeros=qzeros, scales=scales)
    dtype = _resolve_dtype(dtype, scales, where)

    k, n = qweight.shape[0], qweight.shape[1] * 8
    if k == 0 or n == 0:
        raise ValueError(f"{where}: qweight must be non-empty; got shape {list(qweight.shape)}")
    k_group = _wf.effective_group_size(group_size, k)  # a group larger than K is K
    groups = -(-k // k_group)
    if tuple(scales.shape) != (groups, n):
        raise ValueError(f"{where}: scales must have shape [K/G, N] = [{groups}, {n}] (K={k}, "
                         f"N={n} from qweight {list(qweight.shape)}, G={group_size}); got "
                         f"{list(scales.shape)}")
    if tuple(qzeros.shape) != (groups, n // 8):
        raise ValueError(f"{where}: qzeros must have shape [K/G, N/8] = [{groups}, {n // 8}] "
                         f"(K={k}, N={n}, G={group_size}); got {list(qzeros.shape)}")
    q = _unpack_awq(qweight).t()  # [N, K]
    zeros = _unpack_awq(qzeros)  # [groups, N]
    return _to_quantized(q, zeros, scales, k_group, bits, dtype, where)


# -------------------------------------------------------------------------------- layer wrappers


def _bias_for(bias, qw, where):
    if bias is None:
        return None
    _check_tensor(bias, "bias", where, _FLOAT_DTYPES, 1)
    if bias.shape[0] != qw.shape[0]:
        raise ValueError(f"{where}: bias must have N={qw.shape[0]} entries (the output features); "
                         f"got shape {list(bias.shape)}")
    # A fresh (16-byte aligned) copy, as for the scales in _to_quantized.
    return bias.to(device=qw.device, dtype=qw.dtype, copy=True)


def _gptq_layer_parts(qweight, qzeros, scales, g_idx, bias, where, **options):
    qw, input_perm = gptq_to_quantized(qweight, qzeros, scales, g_idx, **options)
    return qw, input_perm, _bias_for(bias, qw, where)


def _awq_layer_parts(qweight, qzeros, scales, bias, where, **options):
    qw = awq_to_quantized(qweight, qzeros, scales, **options)
    return qw, None, _bias_for(bias, qw, where)


def gptq_linear(qweight, qzeros, scales, g_idx=None, bias=None, *, bits, group_size, sym=None,
                checkpoint_format="gptq", dtype=None):
    """A ``cute_gemm.nn.QuantLinear`` from one GPTQ layer's tensors (``gptq_to_quantized``'s
    arguments, plus an optional ``bias[N]``, cast to the activation dtype). Act-order layers
    reorder their input features with the permutation the conversion returns."""
    from .nn import QuantLinear

    qw, input_perm, bias = _gptq_layer_parts(
        qweight, qzeros, scales, g_idx, bias, "gptq_linear", bits=bits, group_size=group_size,
        sym=sym, checkpoint_format=checkpoint_format, dtype=dtype)
    return QuantLinear.from_quantized(qw, bias=bias, input_perm=input_perm)


def awq_linear(qweight, qzeros, scales, bias=None, *, group_size=128, bits=4, dtype=None):
    """A ``cute_gemm.nn.QuantLinear`` from one AWQ layer's tensors (``awq_to_quantized``'s
    arguments, plus an optional ``bias[N]``, cast to the activation dtype)."""
    from .nn import QuantLinear

    qw, _, bias = _awq_layer_parts(qweight, qzeros, scales, bias, "awq_linear",
                                   group_size=group_size, bits=bits, dtype=dtype)
    return QuantLinear.from_quantized(qw, bias=bias)


# ------------------------------------------------------------------------------ model loading


@dataclass
class CheckpointLoadReport:
    """What ``load_gptq_model`` / ``load_awq_model`` did.

    Attributes:
        quantized: module names replaced by a ``QuantLinear``.
        loaded: state-dict keys of the other tensors, copied into the model.
        missing: model keys the checkpoint did not have (outside the replaced modules).
        unexpected: checkpoint keys that matched nothing in the model.
    """

    quantized: list = field(default_factory=list)
    loaded: list = field(default_factory=list)
    missing: list = field(default_factory=list)
    unexpected: list = field(default_factory=list)

    def __str__(self):
        lines = [f"{len(self.quantized)} quantized layer(s), {len(self.loaded)} other tensor(s) "
                 f"loaded, {len(self.missing)} missing, {len(self.unexpected)} unexpected"]
        if self.missing:
            lines.append("missing: " + ", ".join(self.missing))
        if self.unexpected:
            lines.append("unexpected: " + ", ".join(self.unexpected))
        return "\n".join(lines)


def load_state_dict_files(path):
    """The tensors of a ``.safetensors`` file, or of every ``*.safetensors`` file in a directory
    (a sharded checkpoint), as one dict on the CPU. Every file's header is checked first (see
    ``cute_gemm._files``): a missing, truncated or corrupted file raises a ``ValueError`` that
    names it and says what is wrong, before any tensor is read."""
    path = os.fspath(path)
    if os.path.isdir(path):
        files = sorted(os.path.join(path, f) for f in os.listdir(path)
                       if f.endswith(".safetensors"))
        if not files:
            raise ValueError(f"load_state_dict_files: no *.safetensors file in directory {path!r}")
    elif os.path.isfile(path):
        files = [path]
    else:
        raise ValueError(f"load_state_dict_files: path must be a .safetensors file or a directory "
                         f"holding them; {path!r} does not exist")
    where = "load_state_dict_files"
    headers = [read_safetensors_header(f, where) for f in files]  # all checked before loading
    tensors = {}
    for header in headers:
        shard = load_safetensors(header.path, where, header=header)
        repeated = sorted(tensors.keys() & shard.keys())
        if repeated:
            raise ValueError(f"load_state_dict_files: key {repeated[0]!r} appears in more than one "
                             f"file of {path!r}")
        tensors.update(shard)
    return tensors


def _read_json(path, where="load_checkpoint"):
    """The JSON object in the config file ``path``; a missing file, invalid JSON or anything
    but an object raises a ``ValueError`` naming the file."""
    return read_json(path, where, "config file")


def _config_from_dir(directory, names, where="load_checkpoint"):
    """The quantization config next to a checkpoint: the first of ``names`` that exists, else
    ``config.json``'s ``quantization_config`` (Hugging Face's place for it), else ``None``."""
    for name in names:
        p = os.path.join(directory, name)
        if os.path.isfile(p):
            return _read_json(p, where)
    p = os.path.join(directory, "config.json")
    if os.path.isfile(p):
        config = _read_json(p, where).get("quantization_config")
        if config is not None and not isinstance(config, dict):
            raise ValueError(f"{where}: config file {p!r}: quantization_config must be a JSON "
                             f"object; got {type(config).__name__}")
        return config
    return None


def _resolve_state_dict(state_dict, where):
    """(tensors, directory or None) from a dict of tensors or a path."""
    if isinstance(state_dict, (str, os.PathLike)):
        path = os.fspath(state_dict)
        directory = path if os.path.isdir(path) else os.path.dirname(path) or "."
        return load_state_dict_files(path), directory
    if not isinstance(state_dict, dict):
        raise TypeError(f"{where}: state_dict must be a dict of tensors or a path to a "
                        f".safetensors file or a directory; got {type(state_dict).__name__}")
    return state_dict, None


def _replace_and_load(model, tensors, suffixes, layer_parts, dtype, strict, where):
    """Replaces each nn.Linear whose ``<name>.qweight`` is in ``tensors`` with a QuantLinear of
    ``layer_parts(parts, dtype)`` (``(qw, input_perm, bias)``) and loads the remaining tensors
    into the model."""
    from .nn import QuantLinear

    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"{where}: model must be a torch.nn.Module; got {type(model).__name__}")
    if dtype is not None and dtype not in _HALF_DTYPES:
        raise ValueError(f"{where}: dtype must be None, torch.float16 or torch.bfloat16; got "
                         f"{dtype!r}")
    modules = dict(model.named_modules())
    prefixes = sorted(key[:-len(".qweight")] for key in tensors if key.endswith(".qweight"))
    layers, consumed = {}, set()
    # Every layer is built (and checked) before the model is changed.
    for prefix in prefixes:
        keys = {s: f"{prefix}.{s}" for s in suffixes if f"{prefix}.{s}" in tensors}
        module = modules.get(prefix)
        if module is None:
            continue  # its keys are reported as unexpected below
        if not isinstance(module, torch.nn.Linear):
            raise ValueError(f"{where}: the checkpoint quantizes {prefix!r}, but the model's "
                             f"module there is a {type(module).__name__}, not a torch.nn.Linear")
        for required in ("qzeros", "scales"):
            if required not in keys:
                raise ValueError(f"{where}: {prefix}.qweight has no {prefix}.{required} in the "
                                 f"checkpoint")
        # Converted where the layer lives (on a GPU the repacking is much faster than on CPU);
        # the layers of a model on the meta device are built on the CPU.
        device = module.weight.device
        device = torch.device("cpu") if device.type == "meta" else device
        parts = {s: tensors[key].to(device) for s, key in keys.items()}
        layer_dtype = dtype
        if layer_dtype is None and module.weight.dtype in _HALF_DTYPES:
            layer_dtype = module.weight.dtype
        try:
            qw, input_perm, bias = layer_parts(parts, layer_dtype)
        except (TypeError, ValueError) as e:
            raise type(e)(f"{where}: layer {prefix!r}: {e}") from e
        n, k = qw.shape
        if (n, k) != (module.out_features, module.in_features):
            raise ValueError(f"{where}: layer {prefix!r} is nn.Linear(in_features="
                             f"{module.in_features}, out_features={module.out_features}) in the "
                             f"model but the checkpoint holds a weight of in_features={k}, "
                             f"out_features={n}")
        layers[prefix] = QuantLinear.from_quantized(qw, bias=bias, input_perm=input_perm)
        consumed.update(keys.values())

    # The other tensors go into the model's own parameters and buffers, except those of the
    # replaced layers (a dense weight next to a qweight would be dropped with its layer).
    under_replaced = tuple(p + "." for p in layers)
    own = model.state_dict()
    rest = [key for key in tensors if key not in consumed]
    report = CheckpointLoadReport(quantized=sorted(layers))
    report.loaded = sorted(key for key in rest if key in own and not key.startswith(under_replaced))
    report.unexpected = sorted(key for key in rest if key not in report.loaded)
    loaded = set(report.loaded)
    report.missing = sorted(key for key in own
                            if key not in loaded and not key.startswith(under_replaced))
    if strict and (report.missing or report.unexpected):
        raise ValueError(f"{where}: the checkpoint does not match the model (nothing was changed; "
                         f"pass strict=False to load what matches):\n{report}")
    meta = any(t.device.type == "meta" for t in own.values())
    model.load_state_dict({key: tensors[key] for key in report.loaded}, strict=False,
                          assign=meta)
    for prefix, layer in layers.items():
        parent_name, _, child = prefix.rpartition(".")
        setattr(modules[parent_name] if parent_name else model, child, layer)
    return report


def load_gptq_model(model, state_dict, quantize_config=None, *, dtype=None, strict=True):
    """Loads a GPTQ checkpoint into ``model`` in place.

    Every ``torch.nn.Linear`` whose name ``<name>`` has ``<name>.qweight`` in the checkpoint is
    replaced by a ``cute_gemm.nn.QuantLinear`` built from ``<name>.qweight/.qzeros/.scales``
    (``.g_idx`` and ``.bias`` when present); every other tensor (embeddings, norms, unquantized
    layers) is loaded into the model with ``load_state_dict`` (``assign=True`` for a model on the
    meta device). Each quantized layer is converted on, and placed on, the device of the layer it
    replaces (the CPU for a model on the meta device); converting on a GPU is much faster. Nothing
    in the model changes when a layer cannot be converted or, with ``strict``, keys do not match.

    Args:
        model: the model, with the checkpoint's module names (e.g. built from its config).
        state_dict: a dict of tensors, or a path to a ``.safetensors`` file or to a directory of
            ``*.safetensors`` shards.
        quantize_config: a dict with ``bits`` and ``group_size`` (and optionally ``sym``,
            ``checkpoint_format``; ``desc_act`` needs nothing: ``g_idx`` says it all), or a
            path to a JSON file. Default: ``quantize_config.json`` (or ``config.json``'s
            ``quantization_config``) beside the checkpoint path.
        dtype: activation dtype of the quantized layers; default the replaced layer's weight
            dtype when it is fp16/bf16, else the checkpoint scales' dtype.
        strict: raise a ``ValueError`` when keys are missing or unexpected (like
            ``torch.nn.Module.load_state_dict``); otherwise only report them.

    Returns:
        A ``CheckpointLoadReport``.
    """
    where = "load_gptq_model"
    tensors, directory = _resolve_state_dict(state_dict, where)
    if quantize_config is None and directory is not None:
        quantize_config = _config_from_dir(directory, ("quantize_config.json",
                                                       "quant_config.json"), where)
    if isinstance(quantize_config, (str, os.PathLike)):
        quantize_config = _read_json(quantize_config, where)
    if not isinstance(quantize_config, dict):
        raise ValueError(f"{where}: quantize_config must be a dict or a path to a JSON file "
                         f"(with bits and group_size); got {quantize_config!r}")
    method = quantize_config.get("quant_method", "gptq")
    if method != "gptq":
        raise ValueError(f"{where}: quantize_config is for quant_method={method!r}, not 'gptq'")
    for required in ("bits", "group_size"):
        if required not in quantize_config:
            raise ValueError(f"{where}: quantize_config must have {required!r}; got keys "
                             f"{sorted(quantize_config)}")
    options = dict(bits=quantize_config["bits"], group_size=quantize_config["group_size"],
                   sym=quantize_config.get("sym"),
                   checkpoint_format=quantize_config.get("checkpoint_format", "gptq"))

    def layer_parts(parts, layer_dtype):
        return _gptq_layer_parts(parts["qweight"], parts["qzeros"], parts["scales"],
                                 parts.get("g_idx"), parts.get("bias"), where, dtype=layer_dtype,
                                 **options)

    return _replace_and_load(model, tensors, GPTQ_SUFFIXES, layer_parts, dtype, strict, where)


def load_awq_model(model, state_dict, group_size=None, bits=None, *, dtype=None, strict=True):
    """Loads an AWQ ("GEMM" version) checkpoint into ``model`` in place; see
    ``load_gptq_model``. ``group_size`` and ``bits`` default to the config beside a checkpoint
    path (``quant_config.json``, ``quantize_config.json`` or ``config.json``'s
    ``quantization_config``: ``q_group_size``/``group_size``, ``w_bit``/``bits``), else to AWQ's
    defaults 128 and 4."""
    where = "load_awq_model"
    tensors, directory = _resolve_state_dict(state_dict, where)
    config = None
    if directory is not None:
        config = _config_from_dir(directory, ("quant_config.json", "quantize_config.json"),
                                  where)
    config = config or {}
    version = str(config.get("version", "gemm")).lower()
    if version != "gemm":
        raise ValueError(f"{where}: only AWQ's 'gemm' packing is supported; the checkpoint's "
                         f"config says version={config.get('version')!r}")
    if group_size is None:
        group_size = config.get("q_group_size", config.get("group_size", 128))
    if bits is None:
        bits = config.get("w_bit", config.get("bits", 4))

    def layer_parts(parts, layer_dtype):
        return _awq_layer_parts(parts["qweight"], parts["qzeros"], parts["scales"],
                                parts.get("bias"), where, group_size=group_size, bits=bits,
                                dtype=layer_dtype)

    return _replace_and_load(model, tensors, AWQ_SUFFIXES, layer_parts, dtype, strict, where)
