"""Reading checkpoint files so that a damaged or foreign file is refused with an error that names
the file and says what is wrong, never loaded into garbage and never reported only by the
safetensors/json library's own message.

``read_safetensors_header(path, where)`` checks a ``.safetensors`` file's framing without reading
any tensor data: the 8-byte little-endian header length, the JSON header, every tensor's dtype,
shape and ``data_offsets`` (inside the data section, the size the dtype and shape need, tensors
back to back) and that the file is exactly ``8 + header length + end of the last tensor`` bytes
long. ``load_safetensors(path, where)`` checks the header, then loads the tensors. ``read_json``
reads a JSON config file. All raise ``ValueError`` (``MissingFileError``, which is also a
``FileNotFoundError``, for a path that does not exist).
"""

import json
import math
import os
import struct
from dataclasses import dataclass, field

__all__ = ["MissingFileError", "SafetensorsHeader", "read_safetensors_header",
           "load_safetensors", "read_json"]

# Bits per element of every dtype safetensors writes.
_DTYPE_BITS = {
    "BOOL": 8, "U8": 8, "I8": 8, "F8_E5M2": 8, "F8_E4M3": 8, "F8_E4M3FNUZ": 8, "F8_E5M2FNUZ": 8,
    "F8_E8M0": 8, "I16": 16, "U16": 16, "F16": 16, "BF16": 16, "I32": 32, "U32": 32, "F32": 32,
    "I64": 64, "U64": 64, "F64": 64, "C64": 64, "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6,
}
# safetensors refuses larger headers; a larger length is a damaged length field.
_MAX_HEADER_BYTES = 100 * 1024 * 1024


class MissingFileError(FileNotFoundError, ValueError):
    """A checkpoint path that does not exist (both a ``FileNotFoundError`` and a
    ``ValueError``)."""


@dataclass
class SafetensorsHeader:
    """A checked safetensors header.

    Attributes:
        path: the file.
        header_length: the JSON header's length in bytes (the first 8 bytes of the file).
        tensors: ``{name: (dtype string, shape tuple, (begin, end))}`` in file order (offsets
            relative to the data section, which starts at byte ``8 + header_length``).
        metadata: the ``__metadata__`` string entries (``{}`` when there are none).
    """

    path: str
    header_length: int
    tensors: dict = field(default_factory=dict)
    metadata: dict = field(default_factory=dict)

    def shape(self, name):
        return self.tensors[name][1]

    def dtype(self, name):
        return self.tensors[name][0]


def _fail(where, path, what, cause=None):
    error = ValueError(f"{where}: {path!r} {what}")
    if cause is not None:
        raise error from cause
    raise error


def check_file(path, where, kind="file"):
    """``os.fspath(path)`` when it is an existing regular file, else a ``MissingFileError`` (or a
    ``ValueError`` for a directory)."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise MissingFileError(2, f"{where}: {kind} {path!r} does not exist", path)
    if not os.path.isfile(path):
        raise ValueError(f"{where}: {kind} {path!r} is not a regular file")
    return path


def read_safetensors_header(path, where):
    """Reads and checks the header of the safetensors file ``path`` (see the module docstring);
    returns a ``SafetensorsHeader``. ``where`` starts every error message."""
    path = check_file(path, where, "safetensors file")
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            prefix = f.read(8)
            if len(prefix) < 8:
                _fail(where, path, f"is truncated or not a safetensors file: it is {size} bytes "
                                   f"long, shorter than the 8-byte header length that starts "
                                   f"every safetensors file")
            (n,) = struct.unpack("<Q", prefix)
            if n > size - 8:
                _fail(where, path, f"is truncated or its header is corrupted: the header length "
                                   f"field says {n} bytes of JSON header, but only {size - 8} "
                                   f"bytes follow it (file size {size})")
            if n > _MAX_HEADER_BYTES:
                _fail(where, path, f"has a corrupted header: header length {n} bytes is larger "
                                   f"than safetensors allows ({_MAX_HEADER_BYTES})")
            raw = f.read(n)
    except OSError as e:
        raise ValueError(f"{where}: cannot read {path!r}: {e}") from e
    if len(raw) != n:
        _fail(where, path, f"is truncated: the header is {n} bytes but only {len(raw)} could be "
                           f"read")
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        _fail(where, path, f"has a corrupted header (not a safetensors file, or damaged): its "
                           f"{n}-byte header is not valid UTF-8 JSON: {e}", e)
    if not isinstance(header, dict):
        _fail(where, path, f"has a corrupted header: the JSON header must be an object; got "
                           f"{type(header).__name__}")
    metadata = header.pop("__metadata__", None) or {}
    if not isinstance(metadata, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
        _fail(where, path, "has a corrupted header: __metadata__ must map strings to strings")
    data_size = size - 8 - n
    tensors, spans = {}, []
    for name, info in header.items():
        what = f"has a corrupted header: tensor {name!r}"
        if not isinstance(info, dict) or set(info) != {"dtype", "shape", "data_offsets"}:
            _fail(where, path, f"{what} must have exactly 'dtype', 'shape' and 'data_offsets'; "
                               f"got {info!r}")
        dtype, shape, offsets = info["dtype"], info["shape"], info["data_offsets"]
        if dtype not in _DTYPE_BITS:
            _fail(where, path, f"{what} has an unknown dtype {dtype!r}")
        if not isinstance(shape, list) or not all(
                isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
            _fail(where, path, f"{what} has an invalid shape {shape!r}")
        if (not isinstance(offsets, list) or len(offsets) != 2
                or not all(isinstance(o, int) and not isinstance(o, bool) for o in offsets)
                or not 0 <= offsets[0] <= offsets[1]):
            _fail(where, path, f"{what} has invalid data_offsets {offsets!r} (want [begin, end] "
                               f"with 0 <= begin <= end)")
        begin, end = offsets
        bits = math.prod(shape) * _DTYPE_BITS[dtype]
        if bits != 8 * (end - begin):
            _fail(where, path, f"{what} has data_offsets {offsets!r} ({end - begin} bytes) but "
                               f"its dtype {dtype} and shape {shape} need {bits / 8:g} bytes")
        if end > data_size:
            _fail(where, path, f"is truncated or its header is corrupted: tensor {name!r} ends "
                               f"at byte {end} of the data section, but the file holds only "
                               f"{data_size} data bytes after its {n}-byte header")
        tensors[name] = (dtype, tuple(shape), (begin, end))
        spans.append((begin, end, name))
    position = 0
    for begin, end, name in sorted(spans):
        if begin != position:
            _fail(where, path, f"has a corrupted header: the tensors' data_offsets "
                               f"{'overlap' if begin < position else 'leave a gap'} at tensor "
                               f"{name!r} (data_offsets [{begin}, {end}], previous tensor ends "
                               f"at {position})")
        position = end
    if position != data_size:
        _fail(where, path, f"is corrupted: the header's tensors end at data byte {position} but "
                           f"the file has {data_size} data bytes (file size {size} = 8 + "
                           f"{n} + {data_size}); extra bytes after the last tensor")
    return SafetensorsHeader(path, n, tensors, metadata)


def load_safetensors(path, where, device="cpu", header=None):
    """The tensors of the safetensors file ``path`` (checked with ``read_safetensors_header``
    first unless its ``header`` is given), loaded to ``device``."""
    from safetensors.torch import load_file

    if header is None:
        header = read_safetensors_header(path, where)
    try:
        return load_file(header.path, device=str(device))
    except Exception as e:  # the header was fine; what safetensors found, with the file named
        raise ValueError(f"{where}: cannot load the tensors of {header.path!r}: "
                         f"{type(e).__name__}: {e}") from e


def read_json(path, where, what="JSON file"):
    """The JSON object (a dict) in the file ``path``; errors name the file."""
    path = check_file(path, where, what)
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"{where}: cannot read {what} {path!r}: {e}") from e
    try:
        value = json.loads(text)
    except ValueError as e:
        raise ValueError(f"{where}: {what} {path!r} is not valid JSON: {e}") from e
    if not isinstance(value, dict):
        raise ValueError(f"{where}: {what} {path!r} must hold a JSON object; got "
                         f"{type(value).__name__}")
    return value
