"""Whole-model conversion: ``quantize_model`` swaps a model's ``nn.Linear`` layers for
``cute_gemm.nn.QuantLinear`` in place; ``save_quantized`` / ``load_quantized`` store a quantized
model in a safetensors file together with each layer's quantization settings, so that loading
needs only the original (unquantized) model definition.

Typical use::

    model = AutoModelForCausalLM.from_pretrained(name, torch_dtype=torch.float16)
    print(cute_gemm.quantize_model(model, bits=4, group_size=128))   # the summary
    cute_gemm.save_quantized(model, "model-int4.safetensors")

    model = AutoModelForCausalLM.from_pretrained(name, torch_dtype=torch.float16)  # or on meta
    cute_gemm.load_quantized(model, "model-int4.safetensors")        # no re-quantization
"""

import fnmatch
import json
import warnings
from dataclasses import dataclass, field

import torch

from .nn import QuantLinear, unsupported_reason
from .quant import DEFAULT_FP32_COMPUTE_DTYPE, check_bits, check_group_size

__all__ = ["QuantizationSummary", "quantize_model", "save_quantized", "load_quantized"]

_HALF_DTYPES = (torch.float16, torch.bfloat16)
_DTYPE_NAMES = {torch.float16: "float16", torch.bfloat16: "bfloat16"}
_LAYERS_KEY = "cute_gemm.layers"
_ALIASES_KEY = "cute_gemm.aliases"
_FORMAT_KEY = "cute_gemm.format"
_FORMAT_VERSION = "1"


@dataclass
class QuantizationSummary:
    """What ``quantize_model`` did.

    Attributes:
        converted: names of the layers now ``QuantLinear`` (one name per layer; a layer reachable
            under several names is listed under its first).
        skipped: ``{name: reason}`` for every ``nn.Linear`` left as it was.
        bytes_before: bytes of the converted layers' weights and biases before conversion.
        bytes_after: bytes of the same layers' packed weights, scales, zero points and biases.
        bits, group_size, symmetric: the settings used.
    """

    converted: list = field(default_factory=list)
    skipped: dict = field(default_factory=dict)
    bytes_before: int = 0
    bytes_after: int = 0
    bits: int = 4
    group_size: int = 128
    symmetric: bool = True

    @property
    def compression(self):
        """``bytes_before / bytes_after`` (1.0 when nothing was converted)."""
        return self.bytes_before / self.bytes_after if self.bytes_after else 1.0

    def __str__(self):
        group = "per-channel" if self.group_size == -1 else f"group {self.group_size}"
        kind = "symmetric" if self.symmetric else "asymmetric"
        total = len(self.converted) + len(self.skipped)
        lines = [f"quantize_model: {len(self.converted)} of {total} nn.Linear layers converted "
                 f"to INT{self.bits} ({group}, {kind})"]
        if self.converted:
            lines.append(f"  converted layers: {_format_bytes(self.bytes_before)} -> "
                         f"{_format_bytes(self.bytes_after)} ({self.compression:.2f}x smaller)")
        if self.skipped:
            lines.append(f"  kept as nn.Linear ({len(self.skipped)}):")
            lines.extend(f"    {name}: {reason}" for name, reason in self.skipped.items())
        return "\n".join(lines)


def _format_bytes(nbytes):
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= size:
            return f"{nbytes / size:.2f} {unit}"
    return f"{nbytes} B"


def _linear_bytes(linear):
    total = linear.weight.nbytes
    if linear.bias is not None:
        total += linear.bias.nbytes
    return total


def _quant_bytes(layer):
    return sum(t.nbytes for t in (layer.qweight, layer.scales, layer.zeros, layer.bias)
               if t is not None)


def _normalize_skip(skip):
    if skip is None:
        return ()
    if isinstance(skip, str):
        return (skip,)  # a single pattern, not its characters
    try:
        patterns = tuple(skip)
    except TypeError:
        raise TypeError(f"quantize_model: skip must be a string, a sequence of strings or None; "
                        f"got {type(skip).__name__}") from None
    for p in patterns:
        if not isinstance(p, str):
            raise TypeError(f"quantize_model: skip must contain strings (name patterns); got "
                            f"{type(p).__name__}")
    return patterns


def _matching_pattern(name, patterns):
    """The first pattern that matches ``name``: as an fnmatch pattern against the whole dotted
    name, or as a substring of it."""
    for p in patterns:
        if p in name or fnmatch.fnmatchcase(name, p):
            return p
    return None


def _linear_sites(model):
    """``{id(linear): (linear, [(parent, attribute, full name), ...])}`` in module order. A
    module registered under several names (shared layers) appears once with all its sites."""
    sites, by_name = {}, {}
    for name, module in model.named_modules(remove_duplicate=False):
        by_name[name] = module  # parents come before their children
        if name and isinstance(module, torch.nn.Linear):
            parent_name, _, attr = name.rpartition(".")
            sites.setdefault(id(module), (module, []))[1].append((by_name[parent_name], attr,
                                                                  name))
    return sites


def _check_settings(where, bits, group_size, symmetric, dtype):
    """Returns ``(bits, group_size)`` as ints after checking every setting."""
    bits = check_bits(bits, where)
    group_size = check_group_size(group_size, where)
    if not isinstance(symmetric, bool):
        raise TypeError(f"{where}: symmetric must be a bool; got {type(symmetric).__name__}")
    if dtype is not None and dtype not in _HALF_DTYPES:
        raise ValueError(f"{where}: dtype must be None, torch.float16 or torch.bfloat16; got "
                         f"{dtype}")
    return bits, group_size


def quantize_model(model, bits=4, group_size=128, symmetric=True, skip=("lm_head",),
                   progress=True, dtype=None, weights=True):
    """Replaces ``model``'s ``nn.Linear`` layers (recursively, in place) with ``QuantLinear``.

    A layer is kept as ``nn.Linear`` (and listed in the summary's ``skipped`` with the reason)
    when:

    * its name matches a ``skip`` pattern (default: the output head ``lm_head``, whose accuracy
      matters most and which is often tied to the embedding);
    * the kernel cannot take its shape: out_features not a multiple of 8, in_features not a
      multiple of ``group_size`` (of 32 for per-channel);
    * it is the output projection of an ``nn.MultiheadAttention``, which reads ``.weight``
      directly instead of calling the layer.

    The layers kept for the last two reasons are named in a single ``UserWarning``.

    Compute dtype: a ``QuantLinear`` computes in fp16 or bf16 and takes and returns whatever
    floating dtype its caller uses (see ``cute_gemm.nn``). With ``dtype=None`` an fp16/bf16
    layer keeps its dtype, and an fp32 (or fp64) layer is quantized from its full-precision
    weight and computes in bf16 (``cute_gemm.quant.DEFAULT_FP32_COMPUTE_DTYPE``: bf16 has fp32's
    range, so no activation overflows when it is cast, where fp16 would turn values above 65504
    into inf); an fp32 model stays an fp32 model to its caller. ``dtype=torch.float16`` picks
    fp16 (3 more mantissa bits) for models whose activations are known to fit.

    All or nothing: every layer is quantized before the first one is swapped in, so an error
    (a layer that cannot be quantized, an interrupt) leaves the model as it was.

    Args:
        model: the ``nn.Module`` to convert (not itself an ``nn.Linear``: use
            ``QuantLinear.from_linear`` for a single layer).
        bits, group_size, symmetric: as for ``cute_gemm.quantize``.
        skip: name patterns (fnmatch against the dotted name, e.g. ``"*.mlp.down_proj"``, or a
            plain substring, e.g. ``"lm_head"``); a string, a sequence of strings or None.
        progress: show a tqdm progress bar (on stderr) while quantizing.
        dtype: the compute dtype of every converted layer, torch.float16 or torch.bfloat16;
            None (default): each fp16/bf16 layer keeps its dtype, other floating layers get
            bf16 (see "Compute dtype" above).
        weights: True quantizes the weights. False builds empty ``QuantLinear`` layers of the
            right shapes and settings (no quantization, works on meta-device models) into which
            a saved quantized ``state_dict`` can be loaded with ``model.load_state_dict``.

    Returns:
        A ``QuantizationSummary`` (``print`` it for a readable report).
    """
    where = "quantize_model"
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"{where}: model must be a torch.nn.Module; got {type(model).__name__}")
    if isinstance(model, torch.nn.Linear):
        raise TypeError(f"{where}: model is itself an nn.Linear, which cannot be replaced in "
                        f"place; use cute_gemm.QuantLinear.from_linear(layer) instead")
    bits, group_size = _check_settings(where, bits, group_size, symmetric, dtype)
    patterns = _normalize_skip(skip)

    summary = QuantizationSummary(bits=bits, group_size=group_size, symmetric=symmetric)
    plan, unsupported = [], []
    for linear, places in _linear_sites(model).values():
        name = places[0][2]
        matched = None
        for _, _, full in places:
            matched = matched or _matching_pattern(full, patterns)
        reason = None
        if matched is not None:
            summary.skipped[name] = f"matches skip pattern {matched!r}"
            continue
        if isinstance(linear, torch.nn.modules.linear.NonDynamicallyQuantizableLinear):
            reason = "output projection of nn.MultiheadAttention (it reads .weight directly)"
        else:
            reason = unsupported_reason(linear.out_features, linear.in_features, group_size)
        if reason is None and weights and linear.weight.device.type == "meta":
            raise ValueError(f"{where}: layer {name!r} is on the meta device, so there is no "
                             f"weight to quantize; pass weights=False to build empty quantized "
                             f"layers for loading a checkpoint")
        if reason is not None:
            summary.skipped[name] = reason
            unsupported.append(name)
            continue
        plan.append((name, linear, places))

    # Build every layer first; the model changes only once all of them exist.
    built = []
    bar = _progress(plan, progress)
    try:
        for name, linear, places in bar:
            layer_dtype = dtype
            if layer_dtype is None:
                layer_dtype = (linear.weight.dtype if linear.weight.dtype in _HALF_DTYPES
                               else DEFAULT_FP32_COMPUTE_DTYPE)
            if weights:
                try:
                    layer = QuantLinear.from_linear(linear, bits=bits, group_size=group_size,
                                                    symmetric=symmetric, dtype=layer_dtype)
                except (ValueError, TypeError) as e:
                    raise type(e)(f"{where}: layer {name!r}: {e}") from e
            else:
                layer = QuantLinear(linear.in_features, linear.out_features,
                                    bias=linear.bias is not None, bits=bits,
                                    group_size=group_size, symmetric=symmetric,
                                    dtype=layer_dtype, device=linear.weight.device)
                layer.train(linear.training)
            built.append((name, linear, places, layer))
    finally:
        if hasattr(bar, "close"):
            bar.close()
    for name, linear, places, layer in built:
        for parent, attr, _ in places:
            setattr(parent, attr, layer)
        summary.converted.append(name)
        summary.bytes_before += _linear_bytes(linear)
        summary.bytes_after += _quant_bytes(layer)

    if unsupported:
        warnings.warn(f"{where}: kept {len(unsupported)} nn.Linear layer(s) unquantized: "
                      + "; ".join(f"{n} ({summary.skipped[n]})" for n in unsupported),
                      UserWarning, stacklevel=2)
    return summary


def _progress(items, enabled):
    if not enabled:
        return items
    from tqdm.auto import tqdm  # imported only when a bar is wanted

    return tqdm(items, desc="quantize_model", unit="layer")


# ---------------------------------------------------------------------------- save / load


def _layer_config(layer):
    return {
        "in_features": layer.in_features,
        "out_features": layer.out_features,
        "bias": layer.bias is not None,
        "bits": layer.bits,
        "group_size": layer.group_size,
        "symmetric": layer.symmetric,
        "dtype": _DTYPE_NAMES[layer.scales.dtype],
        "input_perm": layer.input_perm is not None,
    }


def _storage_key(t):
    return (t.device, t.untyped_storage().data_ptr(), t.storage_offset(), tuple(t.shape),
            tuple(t.stride()), t.dtype)


def save_quantized(model, path, metadata=None):
    """Saves ``model.state_dict()`` to the safetensors file ``path``, with each ``QuantLinear``'s
    settings (bits, group size, symmetric, dtype, bias, input permutation) in the file's
    metadata, so that ``load_quantized`` can rebuild the layers without being told them.

    Tensors shared under several names (tied weights) are stored once; the other names are
    recorded as aliases and restored by ``load_quantized``. ``metadata`` adds string entries of
    your own (keys starting with ``cute_gemm.`` are reserved).
    """
    from safetensors.torch import save_file

    where = "save_quantized"
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"{where}: model must be a torch.nn.Module; got {type(model).__name__}")
    extra = dict(metadata or {})
    for key, value in extra.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise TypeError(f"{where}: metadata must map str to str; got {key!r}: "
                            f"{type(value).__name__}")
        if key.startswith("cute_gemm."):
            raise ValueError(f"{where}: metadata key {key!r} is reserved (cute_gemm.*)")
    layers = {name: _layer_config(m) for name, m in model.named_modules()
              if isinstance(m, QuantLinear)}
    tensors, aliases, first = {}, {}, {}
    for name, t in model.state_dict().items():
        if t.device.type == "meta":
            raise ValueError(f"{where}: {name!r} is on the meta device (no data to save)")
        key = _storage_key(t)
        if key in first:
            aliases[name] = first[key]
            continue
        first[key] = name
        tensors[name] = t.detach().contiguous()
    extra.update({
        "format": "pt",
        _FORMAT_KEY: _FORMAT_VERSION,
        _LAYERS_KEY: json.dumps(layers),  # in module order
        _ALIASES_KEY: json.dumps(aliases),
    })
    save_file(tensors, str(path), metadata=extra)


def _read_metadata(path):
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as f:
        metadata = f.metadata() or {}
    if _LAYERS_KEY not in metadata:
        raise ValueError(f"load_quantized: {str(path)!r} has no cute_gemm layer metadata (was "
                         f"it written by cute_gemm.save_quantized?)")
    return json.loads(metadata[_LAYERS_KEY]), json.loads(metadata.get(_ALIASES_KEY, "{}"))


def _resolve(model, name):
    parent_name, _, attr = name.rpartition(".")
    try:
        parent = model.get_submodule(parent_name) if parent_name else model
    except AttributeError:
        parent = None
    if parent is None or attr not in parent._modules:
        raise ValueError(f"load_quantized: the file has a quantized layer {name!r} that the "
                         f"model does not have (is it the same architecture?)")
    return parent, attr, parent._modules[attr]


def load_quantized(model, path, strict=True, device=None):
    """Loads a file written by ``save_quantized`` into ``model``, quantizing nothing.

    ``model`` is the original architecture (its ``nn.Linear`` layers are replaced by empty
    ``QuantLinear`` layers with the settings stored in the file) or an already converted one.
    Models on the meta device are supported: their tensors are replaced by the file's
    (``load_state_dict(assign=True)``), loaded to ``device`` (default "cpu"); otherwise the
    values are copied into the model's tensors, wherever they are.

    Returns ``model``.
    """
    from safetensors.torch import load_file

    where = "load_quantized"
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"{where}: model must be a torch.nn.Module; got {type(model).__name__}")
    layers, aliases = _read_metadata(path)
    for name, cfg in layers.items():
        parent, attr, module = _resolve(model, name)
        dtype = getattr(torch, cfg["dtype"])
        if isinstance(module, QuantLinear):
            if _layer_config(module) == cfg:
                continue
            old_device = module.qweight.device
        elif isinstance(module, torch.nn.Linear):
            old_device = module.weight.device
        else:
            raise TypeError(f"{where}: {name!r} is quantized in the file but is a "
                            f"{type(module).__name__} in the model (expected nn.Linear)")
        if (module.in_features, module.out_features) != (cfg["in_features"],
                                                         cfg["out_features"]):
            raise ValueError(f"{where}: layer {name!r} is [out={module.out_features}, in="
                             f"{module.in_features}] in the model but [out={cfg['out_features']}"
                             f", in={cfg['in_features']}] in the file")
        layer = QuantLinear(cfg["in_features"], cfg["out_features"], bias=cfg["bias"],
                            bits=cfg["bits"], group_size=cfg["group_size"],
                            symmetric=cfg["symmetric"], dtype=dtype, device=old_device)
        layer.train(module.training)
        setattr(parent, attr, layer)
        # Shared layers: every other name under which the same module was registered.
        for _, other in model.named_modules(remove_duplicate=False):
            for child_attr, child in list(other._modules.items()):
                if child is module:
                    setattr(other, child_attr, layer)
    on_meta = any(t.device.type == "meta"
                  for t in list(model.parameters()) + list(model.buffers()))
    state = load_file(str(path), device=str(device or "cpu"))
    for alias, source in aliases.items():
        state[alias] = state[source]
    model.load_state_dict(state, strict=strict, assign=on_meta)
    if on_meta:
        # assign=True gives every name its own Parameter object (sharing the storage); tie them
        # again, as they were when saved.
        for alias, source in aliases.items():
            _retie(model, alias, source)
    return model


def _retie(model, alias, source):
    def split(name):
        owner, _, attr = name.rpartition(".")
        return model.get_submodule(owner) if owner else model, attr

    owner, attr = split(alias)
    src_owner, src_attr = split(source)
    for table in ("_parameters", "_buffers"):
        src = getattr(src_owner, table)
        dst = getattr(owner, table)
        if src_attr in src and attr in dst:
            dst[attr] = src[src_attr]
