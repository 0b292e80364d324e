"""The packed weight format's rulebook, as the kernels are compiled with it.

Every rule lives once, in ``csrc/kernels/mixed/weight_format.hpp`` (the header the kernels and the
op's C++ checks include), and reaches Python through ``cute_gemm._C.weight_format``; this module
adds the argument checks (with the messages the rest of the package uses) and pack/unpack on top.
Every Python check and loader reads it: ``cute_gemm.quant`` (quantize, pack/unpack,
``QuantizedWeight``), ``cute_gemm.nn``, ``cute_gemm.convert``, ``cute_gemm.checkpoints`` and the
fake kernel in ``cute_gemm.ops``.

The rules:

* bits: ``VALID_BITS`` (4, 8); group sizes: ``VALID_GROUP_SIZES`` (32, 64, 128 and
  ``PER_CHANNEL`` = -1, one group per output channel);
* ``effective_group_size(group_size, k)``: the G the scales are indexed with, K for per-channel;
* K: ``k >= 1`` and a multiple of ``k_multiple(group_size)`` (the group size, or 32 for
  per-channel); N: a multiple of ``BLOCK_N`` (8);
* ``block_k(bits)``: K per packed block (128 for INT4, 64 for INT8); the packed int32 tensor is
  ``packed_shape(n, k, bits)`` = ``(N/8, ceil(K/bk), 32, 4)``;
* the format itself: ``block_layout(bits)``, ``(n, k)`` in one 8 x bk block -> the index of its
  nibble/byte in the block's 512 bytes, and ``tv_layout(bits)``, ``(lane, value)`` -> ``n + 8 k``.
  ``pack_fields`` / ``unpack_fields`` move between ``q[N, Kp]`` and the packed words with one view
  and one permutation read off that layout (``_C.weight_format.packed_views``), as the C++ op's
  unpacking does.
"""

import functools
import operator

import torch

from ._C import weight_format as _wf

__all__ = [
    "BLOCK_N", "LANES", "PER_CHANNEL", "PER_CHANNEL_K_MULTIPLE", "VALID_BITS", "VALID_BITS_TEXT",
    "VALID_GROUP_SIZES", "VALID_GROUP_SIZES_TEXT", "WORDS_PER_LANE", "block_k", "block_layout",
    "check_bits", "check_group_size", "check_k", "check_n", "effective_group_size",
    "fields_per_word", "is_int", "k_blocks", "k_multiple", "pack_fields", "packed_shape",
    "tv_layout", "unpack_fields", "valid_bits", "valid_group_size", "valid_k", "valid_n",
]

VALID_BITS = tuple(_wf.VALID_BITS)                   # (4, 8)
VALID_BITS_TEXT = _wf.VALID_BITS_TEXT                # "4 or 8"
VALID_GROUP_SIZES = tuple(_wf.VALID_GROUP_SIZES)     # (32, 64, 128, -1)
VALID_GROUP_SIZES_TEXT = _wf.VALID_GROUP_SIZES_TEXT  # "32, 64, 128 or -1 (per-channel)"
PER_CHANNEL = _wf.PER_CHANNEL                        # -1
PER_CHANNEL_K_MULTIPLE = _wf.PER_CHANNEL_K_MULTIPLE  # 32
BLOCK_N = _wf.BLOCK_N                                # 8 output channels per packed block
LANES = _wf.LANES                                    # 32
WORDS_PER_LANE = _wf.WORDS_PER_LANE                  # 4

valid_bits = _wf.valid_bits
valid_group_size = _wf.valid_group_size
effective_group_size = _wf.effective_group_size
k_multiple = _wf.k_multiple
valid_k = _wf.valid_k
valid_n = _wf.valid_n
block_k = _wf.block_k
fields_per_word = _wf.fields_per_word
k_blocks = _wf.k_blocks
block_layout = _wf.block_layout
tv_layout = _wf.tv_layout

_INT64_MAX = (1 << 63) - 1


def packed_shape(n, k, bits):
    """Shape of the packed int32 tensor for an ``[n, k]`` weight: ``(n/8, ceil(k/bk), 32, 4)``."""
    return tuple(_wf.packed_shape(n, k, bits))


# ------------------------------------------------------------------------------- argument checks


def is_int(value):
    """A Python or NumPy integer (``operator.index`` works), not a bool. ``4.0`` is not an int:
    a float that happens to equal a valid value is refused rather than silently accepted."""
    if isinstance(value, bool):
        return False
    try:
        operator.index(value)
    except TypeError:
        return False
    return True


def check_bits(bits, where):
    """Returns ``bits`` as an int; TypeError for a non-integer, ValueError for a width the format
    lacks (``VALID_BITS``)."""
    if not is_int(bits):
        raise TypeError(f"{where}: bits must be an int ({VALID_BITS_TEXT}); got "
                        f"{type(bits).__name__} {bits!r}")
    bits = operator.index(bits)
    if bits not in VALID_BITS:
        raise ValueError(f"{where}: bits must be {VALID_BITS_TEXT}; got bits={bits!r}")
    return bits


def check_group_size(group_size, where):
    """Returns ``group_size`` as an int; TypeError for a non-integer, ValueError for a size the
    format lacks (``VALID_GROUP_SIZES``)."""
    if not is_int(group_size):
        raise TypeError(f"{where}: group_size must be an int ({VALID_GROUP_SIZES_TEXT}); got "
                        f"{type(group_size).__name__} {group_size!r}")
    group_size = operator.index(group_size)
    if group_size not in VALID_GROUP_SIZES:
        raise ValueError(f"{where}: group_size must be one of {VALID_GROUP_SIZES_TEXT}; got "
                         f"group_size={group_size!r}")
    return group_size


def check_k(k, group_size, where):
    """K >= 1 and whole groups along K (a multiple of ``k_multiple(group_size)``), for a valid
    ``group_size``. Returns the effective group size G."""
    if k < 1:
        raise ValueError(f"{where}: K must be >= 1; got K={k}")
    if k > _INT64_MAX:
        raise ValueError(f"{where}: K must fit in 64 bits; got K={k}")
    if not valid_k(k, group_size):
        if group_size == PER_CHANNEL:
            raise ValueError(f"{where}: K must be a multiple of {k_multiple(group_size)} for "
                             f"per-channel quantization (group_size={PER_CHANNEL}); got K={k}")
        raise ValueError(f"{where}: K must be a multiple of group_size; got K={k}, "
                         f"group_size={group_size} (K % group_size = {k % group_size})")
    return effective_group_size(group_size, k)


def check_n(n, where):
    """N a multiple of ``BLOCK_N`` (whole packed blocks)."""
    if not (0 <= n <= _INT64_MAX and valid_n(n)):
        raise ValueError(f"{where}: N (the number of output channels, weight.shape[0]) must be a "
                         f"multiple of {BLOCK_N}; got N={n}")


# ------------------------------------------------------------------------------- pack / unpack


@functools.lru_cache(maxsize=None)
def _views(bits):
    """``(fields, q, kb_dim, q_from_fields, fields_from_q)`` of ``_C.weight_format.packed_views``
    (nb and kb left 0)."""
    v = _wf.packed_views(bits)
    return (tuple(v["fields"]), tuple(v["q"]), v["kb_dim"], tuple(v["q_from_fields"]),
            tuple(v["fields_from_q"]))


def _with_blocks(view, nb, kb, kb_dim):
    view = list(view)
    view[0], view[kb_dim] = nb, kb
    return view


def pack_fields(q, bits):
    """Packs ``q[N, Kp]`` (int64, values in ``[0, 2^bits)``, N a multiple of 8, Kp of
    ``block_k(bits)``; no checks) into the kernel's contiguous int32 ``packed_shape(N, Kp,
    bits)`` tensor."""
    fields, q_view, kb_dim, _, fields_from_q = _views(bits)
    n, kp = q.shape
    nb, kb = n // BLOCK_N, kp // block_k(bits)
    per_word = fields_per_word(bits)
    x = q.reshape(_with_blocks(q_view, nb, kb, kb_dim)).permute(fields_from_q)
    x = x.reshape(nb, kb, LANES, WORDS_PER_LANE, per_word)
    shifts = torch.arange(0, 32, bits, dtype=torch.int64, device=q.device)
    words = (x << shifts).sum(dim=-1)  # disjoint bit fields: the sum is the OR
    words = torch.where(words >= (1 << 31), words - (1 << 32), words)  # to two's complement
    return words.to(torch.int32).contiguous()


def unpack_fields(packed, bits):
    """The int32 ``q[N, Kp]`` of a packed ``[N/8, Kp/bk, 32, 4]`` int32 tensor (no checks)."""
    fields, _, kb_dim, q_from_fields, _ = _views(bits)
    nb, kb = packed.shape[0], packed.shape[1]
    shifts = torch.arange(0, 32, bits, dtype=torch.int32, device=packed.device)
    # Arithmetic shifts of negative words bring in ones from the left; the mask removes them.
    x = (packed.unsqueeze(-1) >> shifts) & ((1 << bits) - 1)
    x = x.reshape(_with_blocks(fields, nb, kb, 1)).permute(q_from_fields)
    return x.reshape(nb * BLOCK_N, kb * block_k(bits))
