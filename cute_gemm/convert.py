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
from .quant import DEFAULT_FP32_COMPUTE_DTYPE
from .weight_format import PER_CHANNEL, check_bits, check_group_size

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
        group = "per-channel" if self.group_size == PER_CHANNEL else f"group {self.group_size}"
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
    your own (keys starting with ``cute_gemm.`` are reserved). The file is written under a
    temporary name and renamed into place, so an interrupted save never leaves a truncated
    ``path`` behind.
    """
    import os

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
    path = os.fspath(path)
    partial = f"{path}.partial-{os.getpid()}"
    try:
        save_file(tensors, partial, metadata=extra)
        os.replace(partial, path)
    finally:
        if os.path.exists(partial):
            os.remove(partial)


_CONFIG_TYPES = {"in_features": int, "out_features": int, "bias": bool, "bits": int,
                 "group_size": int, "symmetric": bool, "dtype": str, "input_perm": bool}
_FILE_DTYPES = {torch.float16: "F16", torch.bfloat16: "BF16", torch.int32: "I32"}
_FILE_INT_DTYPES = ("I8", "I16", "I32", "I64", "U8", "U16", "U32", "U64")


def _check_layer_config(name, cfg):
    """Why the file's settings ``cfg`` for layer ``name`` are unusable, or None."""
    if not isinstance(cfg, dict):
        return f"settings must be a JSON object; got {cfg!r}"
    for key, kind in _CONFIG_TYPES.items():
        value = cfg.get(key)
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            return f"settings need {key!r} as a {kind.__name__}; got {cfg!r}"
    if cfg["dtype"] not in ("float16", "bfloat16"):
        return f"dtype must be 'float16' or 'bfloat16'; got {cfg['dtype']!r}"
    try:
        QuantLinear(cfg["in_features"], cfg["out_features"], bias=cfg["bias"],
                    bits=cfg["bits"], group_size=cfg["group_size"], symmetric=cfg["symmetric"],
                    dtype=getattr(torch, cfg["dtype"]), device="meta")
    except (TypeError, ValueError) as e:
        return f"settings {cfg!r} do not describe a valid layer: {e}"
    return None


def _read_metadata(path, where="load_quantized"):
    """``(header, layers, aliases)`` of a ``save_quantized`` file, every part checked: the
    safetensors framing (``cute_gemm._files``), the cute_gemm metadata and its format version,
    each layer's settings, and that every alias names a tensor of the file. Reads no tensor
    data."""
    from ._files import read_safetensors_header

    header = read_safetensors_header(path, where)
    path, metadata = header.path, header.metadata
    if _LAYERS_KEY not in metadata:
        raise ValueError(f"{where}: {path!r} is not a cute_gemm file: it has no cute_gemm layer "
                         f"metadata ({_LAYERS_KEY!r}); was it written by "
                         f"cute_gemm.save_quantized? (GPTQ and AWQ checkpoints load with "
                         f"cute_gemm.load_gptq_model / load_awq_model)")
    version = metadata.get(_FORMAT_KEY)
    if version is None:
        raise ValueError(f"{where}: {path!r} has cute_gemm layer metadata but no format version "
                         f"({_FORMAT_KEY!r}), which save_quantized always writes: the file is "
                         f"damaged or was not written by cute_gemm")
    if version != _FORMAT_VERSION:
        raise ValueError(f"{where}: {path!r} is a cute_gemm file of format version {version!r}, "
                         f"which this version of cute_gemm cannot read (it reads version "
                         f"{_FORMAT_VERSION!r}); load it with the cute_gemm that wrote it, or "
                         f"upgrade")
    parsed = {}
    for key, default in ((_LAYERS_KEY, None), (_ALIASES_KEY, "{}")):
        try:
            value = json.loads(metadata.get(key, default))
        except ValueError as e:
            raise ValueError(f"{where}: {path!r} has corrupted cute_gemm metadata: {key!r} is not "
                             f"valid JSON: {e}") from e
        if not isinstance(value, dict):
            raise ValueError(f"{where}: {path!r} has corrupted cute_gemm metadata: {key!r} must "
                             f"be a JSON object; got {type(value).__name__}")
        parsed[key] = value
    layers, aliases = parsed[_LAYERS_KEY], parsed[_ALIASES_KEY]
    for name, cfg in layers.items():
        why = _check_layer_config(name, cfg)
        if why is not None:
            raise ValueError(f"{where}: {path!r} has corrupted cute_gemm metadata for layer "
                             f"{name!r}: {why}")
    for alias, source in aliases.items():
        if not isinstance(source, str) or source not in header.tensors or \
                alias in header.tensors:
            raise ValueError(f"{where}: {path!r} has corrupted cute_gemm metadata: alias "
                             f"{alias!r} -> {source!r} must name a tensor of the file (and not "
                             f"be one itself)")
    return header, layers, aliases


def _resolve(model, name, path="the file", where="load_quantized"):
    parent_name, _, attr = name.rpartition(".")
    try:
        parent = model.get_submodule(parent_name) if parent_name else model
    except AttributeError:
        parent = None
    if parent is None or attr not in parent._modules:
        raise ValueError(f"{where}: {path!r} has a quantized layer {name!r} that the model does "
                         f"not have (is the file for another model?)")
    return parent, attr, parent._modules[attr]


def _module_sites(model):
    """``{id(module): [(parent, attribute, full name), ...]}``: every name of every submodule
    (shared modules have several)."""
    sites, by_name = {}, {}
    for name, module in model.named_modules(remove_duplicate=False):
        by_name[name] = module
        if name:
            parent_name, _, attr = name.rpartition(".")
            sites.setdefault(id(module), []).append((by_name[parent_name], attr, name))
    return sites


def _plan_layers(model, layers, path, where):
    """``[(name, cfg, old module, new QuantLinear or None when the old one is reused)]``; builds
    the new layers (detached: nothing in the model changes)."""
    plan = []
    for name, cfg in layers.items():
        parent, attr, module = _resolve(model, name, path, where)
        if isinstance(module, QuantLinear):
            if _layer_config(module) == cfg:
                plan.append((name, cfg, module, None))
                continue
            old_device = module.qweight.device
        elif isinstance(module, torch.nn.Linear):
            old_device = module.weight.device
        else:
            raise TypeError(f"{where}: {name!r} is quantized in {path!r} but is a "
                            f"{type(module).__name__} in the model (expected nn.Linear; is the "
                            f"file for another model?)")
        if (module.in_features, module.out_features) != (cfg["in_features"],
                                                         cfg["out_features"]):
            raise ValueError(f"{where}: layer {name!r} is [out={module.out_features}, in="
                             f"{module.in_features}] in the model but [out={cfg['out_features']}"
                             f", in={cfg['in_features']}] in the file {path!r} (is the file for "
                             f"another model?)")
        layer = QuantLinear(cfg["in_features"], cfg["out_features"], bias=cfg["bias"],
                            bits=cfg["bits"], group_size=cfg["group_size"],
                            symmetric=cfg["symmetric"], dtype=getattr(torch, cfg["dtype"]),
                            device=old_device)
        layer.train(module.training)
        plan.append((name, cfg, module, layer))
    return plan


def _expected_state(model, plan, sites):
    """``({key: (shape, file dtypes allowed or None)}, optional keys, quantized layers' sites)``:
    the state dict the model will have once ``plan`` is applied, read from the model's and the
    new layers' tensors' shapes (no data)."""
    from torch.nn.parameter import is_lazy

    replaced = {}
    for _, _, module, layer in plan:
        for _, _, site in sites.get(id(module), []):
            replaced[site] = layer or module
    prefixes = tuple(site + "." for site, _ in replaced.items())
    expected = {key: (None if is_lazy(t) else tuple(t.shape), None)
                for key, t in model.state_dict(keep_vars=True).items()
                if not key.startswith(prefixes)}
    optional = set()
    for site, layer in replaced.items():
        for suffix, t in layer.state_dict(keep_vars=True).items():
            if suffix == "qformat":
                allowed = _FILE_INT_DTYPES
            elif suffix == "input_perm":
                continue  # below
            else:
                allowed = (_FILE_DTYPES[t.dtype],)
            expected[f"{site}.{suffix}"] = (tuple(t.shape), allowed)
        # An act-order layer's permutation: created by the load when the file has one.
        expected[f"{site}.input_perm"] = ((layer.in_features,), _FILE_INT_DTYPES)
        if layer.input_perm is None:
            optional.add(f"{site}.input_perm")
        optional.add(f"{site}.qformat")  # files written before the tag: added from metadata
    return expected, optional, replaced


def _key_list(keys, limit=20):
    keys = sorted(keys)
    text = ", ".join(repr(k) for k in keys[:limit])
    return "[" + text + (f", ... ({len(keys)} in all)" if len(keys) > limit else "") + "]"


def _required_suffixes(cfg):
    """The tensors a layer built from ``cfg`` cannot do without (zero-filled otherwise)."""
    required = ["qweight", "scales"]
    if not cfg["symmetric"]:
        required.append("zeros")
    if cfg["bias"]:
        required.append("bias")
    if cfg["input_perm"]:
        required.append("input_perm")
    return required


def _check_against_file(model, header, aliases, plan, sites, strict, where):
    """Raises, before anything changes, when the file cannot fill the planned model: a layer
    that load_quantized creates (empty) whose packed weight, scales, zero points, bias or input
    permutation the file lacks (whatever ``strict`` is); a tensor whose shape differs from the
    model's; a quantized layer's tensor of the wrong dtype; with ``strict``, missing or
    unexpected keys. Reads only the header. Returns the quantized layers' sites
    ``{name: layer}``."""
    path = header.path
    expected, optional, replaced = _expected_state(model, plan, sites)
    in_file = {key: (header.dtype(key), header.shape(key)) for key in header.tensors}
    for alias, source in aliases.items():
        in_file[alias] = in_file[source]
    for name, cfg, module, layer in plan:
        if layer is None:
            continue  # an existing layer: with strict=False, what the file lacks stays as it is
        names = [site for _, _, site in sites.get(id(module), [(None, None, name)])]
        lacking = [f"{name}.{suffix}" for suffix in _required_suffixes(cfg)
                   if not any(f"{site}.{suffix}" in in_file for site in names)]
        if lacking:
            raise ValueError(
                f"{where}: {path!r} quantizes layer {name!r} but lacks {_key_list(lacking)}; "
                f"the layer load_quantized builds for it would stay zero-filled (computing only "
                f"its bias), so the file is refused, strict or not (it is incomplete or damaged); "
                f"nothing was changed")
    mismatched = []
    for key, (file_dtype, file_shape) in in_file.items():
        if key not in expected:
            continue
        shape, allowed = expected[key]
        owner, _, suffix = key.rpartition(".")
        if shape is not None and file_shape != shape:
            mismatched.append(f"layer {owner!r}: {suffix!r} is {list(shape)} in the model but "
                              f"{list(file_shape)} in the file")
        elif allowed is not None and file_dtype not in allowed:
            mismatched.append(f"layer {owner!r}: {suffix!r} is {file_dtype} in the file but the "
                              f"quantized layer needs {' or '.join(allowed)}")
    if mismatched:
        raise ValueError(f"{where}: {path!r} does not fit the model (is it for another model?); "
                         f"nothing was changed:\n  " + "\n  ".join(mismatched))
    provided = set(in_file) | {f"{site}.qformat" for site in replaced}
    missing = set(expected) - provided - optional
    unexpected = provided - set(expected)
    if strict and (missing or unexpected):
        raise ValueError(f"{where}: {path!r} does not match the model (nothing was changed; "
                         f"pass strict=False to load what matches): missing keys "
                         f"{_key_list(missing)}, unexpected keys {_key_list(unexpected)}")
    return replaced


def _dry_run(site, cfg, state, path, where):
    """Runs QuantLinear's own load checks (format tag, value ranges, permutation, finite scales)
    for layer ``site`` on a data-less twin, so that a bad value is refused before the model is
    touched."""
    twin = QuantLinear(cfg["in_features"], cfg["out_features"], bias=cfg["bias"],
                       bits=cfg["bits"], group_size=cfg["group_size"], symmetric=cfg["symmetric"],
                       dtype=getattr(torch, cfg["dtype"]), device="meta")
    missing, unexpected, errors = [], [], []
    twin._load_from_state_dict(state, site + ".", {"assign_to_params_buffers": True}, True,
                               missing, unexpected, errors)
    if errors:
        raise ValueError(f"{where}: {path!r} cannot be loaded into layer {site!r}; nothing was "
                         f"changed: " + "; ".join(errors))


def load_quantized(model, path, strict=True, device=None):
    """Loads a file written by ``save_quantized`` into ``model``, quantizing nothing.

    ``model`` is the original architecture (its ``nn.Linear`` layers are replaced by empty
    ``QuantLinear`` layers with the settings stored in the file) or an already converted one.
    Models on the meta device are supported: their tensors are replaced by the file's
    (``load_state_dict(assign=True)``), loaded to ``device`` (default "cpu"); otherwise the
    values are copied into the model's tensors, wherever they are. Every ``QuantLinear``'s
    buffers end up contiguous and 16-byte aligned, as the kernel needs (its
    ``_load_from_state_dict`` sees to that for ``assign=True``).

    The load is all-or-nothing: the file's header (framing, cute_gemm metadata and format
    version, keys, shapes, dtypes) and the quantized layers' values are checked before the model
    is changed, and a failure leaves the model's modules as they were. A missing, truncated,
    corrupted or foreign file, or one made for another model, raises a ``ValueError`` that names
    the file and says what is wrong.

    ``strict`` is ``load_state_dict``'s: with ``strict=True`` missing or unexpected keys raise a
    ``ValueError``; with ``strict=False`` they are named in one ``UserWarning``. Either way a
    layer that this function creates must get its packed weight, scales (and zero points, bias,
    input permutation where its settings have them) from the file, else the file is refused.

    Returns ``model``.
    """
    from ._files import load_safetensors
    from .quant import format_tag

    where = "load_quantized"
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"{where}: model must be a torch.nn.Module; got {type(model).__name__}")
    header, layers, aliases = _read_metadata(path, where)
    path = header.path
    # 1. Plan and check against the header: nothing in the model changes.
    plan = _plan_layers(model, layers, path, where)
    sites = _module_sites(model)
    replaced = _check_against_file(model, header, aliases, plan, sites, strict, where)
    on_meta = any(t.device.type == "meta"
                  for t in list(model.parameters()) + list(model.buffers()))
    # 2. The tensors, with the format tags of files written before the tag existed, and the
    #    quantized layers' own checks on the values.
    target = torch.device(str(device or "cpu"))
    state = load_safetensors(path, where, device=target, header=header)
    for alias, source in aliases.items():
        state[alias] = state[source]
    config = {}
    for name, cfg, module, _ in plan:
        for _, _, site in sites.get(id(module), []):
            config[site] = cfg
    for site in replaced:
        cfg = config[site]
        state.setdefault(f"{site}.qformat", format_tag(cfg["bits"], cfg["group_size"],
                                                       cfg["symmetric"], device=target))
        _dry_run(site, cfg, state, path, where)
    # 3. Swap and load; on failure put the original modules and tensors back.
    swaps = [(parent, attr, module, layer) for _, _, module, layer in plan if layer is not None
             for parent, attr, _ in sites.get(id(module), [])]
    saved = [(m, dict(m._parameters), dict(m._buffers)) for m in model.modules()]
    for parent, attr, _, layer in swaps:
        setattr(parent, attr, layer)
    try:
        result = model.load_state_dict(state, strict=strict, assign=on_meta)
    except Exception as e:
        for parent, attr, module, _ in swaps:
            setattr(parent, attr, module)
        for m, params, buffers in saved:
            m._parameters.clear()
            m._parameters.update(params)
            m._buffers.clear()
            m._buffers.update(buffers)
        raise ValueError(f"{where}: loading {path!r} failed; the model's original modules were "
                         f"put back: {e}") from e
    if on_meta:
        # assign=True gives every name its own Parameter object (sharing the storage); tie them
        # again, as they were when saved.
        for alias, source in aliases.items():
            _retie(model, alias, source)
    if result.missing_keys or result.unexpected_keys:
        warnings.warn(f"{where}: {path!r} does not match the model (loaded with strict=False): "
                      f"missing keys (left as they were) {_key_list(result.missing_keys)}, "
                      f"unexpected keys (ignored) {_key_list(result.unexpected_keys)}",
                      UserWarning, stacklevel=2)
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
