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

from . import fuse as _fuse
from .nn import QuantLinear, unsupported_reason
from .quant import DEFAULT_FP32_COMPUTE_DTYPE
from .weight_format import PER_CHANNEL, check_bits, check_group_size

__all__ = ["QuantizationSummary", "quantize_model", "save_quantized", "load_quantized"]

_HALF_DTYPES = (torch.float16, torch.bfloat16)
_DTYPE_NAMES = {torch.float16: "float16", torch.bfloat16: "bfloat16"}
_LAYERS_KEY = "cute_gemm.layers"
_ALIASES_KEY = "cute_gemm.aliases"
_FORMAT_KEY = "cute_gemm.format"
_FUSED_KEY = "cute_gemm.fused"
_FORMAT_VERSION = "1"
# Files with fused projections: readers older than the fusion refuse them by their version
# (instead of failing on a layer name the model lacks).
_FUSED_FORMAT_VERSION = "1.1"
_READABLE_VERSIONS = (_FORMAT_VERSION, _FUSED_FORMAT_VERSION)


@dataclass
class QuantizationSummary:
    """What ``quantize_model`` did.

    Attributes:
        converted: names of the ``nn.Linear`` layers quantized (one name per layer; a layer
            reachable under several names is listed under its first). Members of a fused group
            are listed under their own names (see ``fused``).
        skipped: ``{name: reason}`` for every ``nn.Linear`` left as it was.
        bytes_before: bytes of the converted layers' weights and biases before conversion.
        bytes_after: bytes of the same layers' packed weights, scales, zero points and biases.
        bits, group_size, symmetric: the settings used.
        fuse: whether fusion was asked for (``quantize_model(..., fuse=True)``).
        fused: ``{fused layer name: [member names]}``, e.g.
            ``{"model.layers.0.self_attn.qkv_proj": ["model.layers.0.self_attn.q_proj", ...]}``:
            the groups now computed by one ``QuantLinear`` (the members are
            ``cute_gemm.fuse.ProjectionSlice`` modules).
        not_fused: ``{group: reason}`` for the candidate groups left unfused, e.g.
            ``{"model.layers.0.self_attn.{q_proj,k_proj,v_proj}": "k_proj is kept as ..."}``.
        gated: names of the MLPs with fused gate/up projections that compute SiLU(gate) * up
            inside the fused GEMM (``cute_gemm.fuse.gate_mlp``).
        not_gated: ``{MLP name: reason}`` for the fused gate/up groups that keep their MLP's
            own forward (the activation runs apart).
    """

    converted: list = field(default_factory=list)
    skipped: dict = field(default_factory=dict)
    bytes_before: int = 0
    bytes_after: int = 0
    bits: int = 4
    group_size: int = 128
    symmetric: bool = True
    fuse: bool = False
    fused: dict = field(default_factory=dict)
    not_fused: dict = field(default_factory=dict)
    gated: list = field(default_factory=list)
    not_gated: dict = field(default_factory=dict)

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
        if self.fused:
            kinds = {}
            for fused_name, members in self.fused.items():
                key = (tuple(m.rpartition(".")[2] for m in members), fused_name.rpartition(".")[2])
                kinds[key] = kinds.get(key, 0) + 1
            lines.append(f"  fused into one GEMM each ({len(self.fused)} groups): " + ", ".join(
                f"{count} x ({', '.join(members)}) -> {fused}"
                for (members, fused), count in kinds.items()))
        elif self.fuse:
            lines.append(f"  fused: none (fusion covers {_fuse.RECOGNIZED})")
        if self.gated:
            lines.append(f"  SiLU(gate) * up inside the fused GEMM: {len(self.gated)} MLPs")
        if self.not_gated:
            lines.append(f"  fused gate/up with the activation apart ({len(self.not_gated)}):")
            lines.extend(f"    {name}: {reason}" for name, reason in self.not_gated.items())
        if self.not_fused:
            lines.append(f"  not fused ({len(self.not_fused)}):")
            lines.extend(f"    {name}: {reason}" for name, reason in self.not_fused.items())
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


def name_patterns(value, where, name):
    """``value`` (None, one pattern string, or a sequence of them) as a tuple of module-name
    patterns; TypeError naming ``where`` and the argument ``name`` otherwise."""
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)  # a single pattern, not its characters
    try:
        patterns = tuple(value)
    except TypeError:
        raise TypeError(f"{where}: {name} must be a string, a sequence of strings or None; got "
                        f"{type(value).__name__}") from None
    for p in patterns:
        if not isinstance(p, str):
            raise TypeError(f"{where}: {name} must contain strings (module names or patterns); "
                            f"got {type(p).__name__}")
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
                   progress=True, dtype=None, weights=True, fuse=False):
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

    Fused projections (``fuse=True``): in the decoder layers of transformers' Llama, Mistral,
    Qwen2 and Qwen3 models, q/k/v become one quantized GEMM (``self_attn.qkv_proj``) and gate/up
    another (``mlp.gate_up_proj``), computing the same numbers (each output column is quantized
    exactly as before) about 10% faster per layer at batch 1. ``q_proj``, ``k_proj``, ...
    remain as ``cute_gemm.fuse.ProjectionSlice`` modules returning their columns of the fused
    output; the attention's forward is unchanged (see ``cute_gemm.fuse`` for the design). An MLP
    whose forward is ``down_proj(act_fn(gate_proj(x)) * up_proj(x))`` with SiLU also computes the
    activation inside the fused GEMM (its instance's forward becomes
    ``down_proj(gate_up_proj(x, activation="silu_mul"))``: one kernel fewer per layer; g and u
    are no longer rounded to 16 bits before the product, so results differ from the unfused
    model by rounding; ``summary.gated`` / ``not_gated``). A group is fused only when all its
    members are converted with the same settings (not skipped, same input size, dtype, device,
    bias presence); the summary's ``fused`` and ``not_fused`` say what happened and why. The
    default is ``False`` because fusion changes the module tree and the state-dict keys
    (``q_proj.qweight`` -> ``qkv_proj.qweight``): tools that address ``q_proj``'s weights or
    load state dicts saved unfused expect the plain layout.
    ``save_quantized`` records the fusion and ``load_quantized`` rebuilds it, so loading needs
    no option.

    The output head: ``skip=("lm_head",)`` keeps it 16-bit by default, but it is often the
    largest single weight (128256 x 4096 in Llama 3). To give it its own settings, call
    ``quantize_model`` twice: ``quantize_model(model, bits=4, group_size=128)`` for the body,
    then ``quantize_model(model, bits=8, group_size=-1, skip=())``, which converts only what is
    still an ``nn.Linear`` (the head; the ``QuantLinear`` layers are left alone). A head tied to
    the input embedding (``tie_word_embeddings=True``) becomes a ``QuantLinear`` of its own,
    quantized from the shared weight; the ``nn.Embedding`` keeps the 16-bit weight, unchanged
    (the tie is dropped, so the head no longer shares memory with the embedding).
    ``save_quantized`` / ``load_quantized`` round-trip such a model, the embedding stored once.
    After this, transformers' ``model.tie_weights()`` raises (a ``QuantLinear`` refuses a
    dense ``weight``); ``generate`` does not call it. The vocabulary must be a multiple of 8
    (else the head is kept and named in the warning). Accuracy, measured against the fp16 head
    on a real tied head (MiniLM's, ``benchmarks/results/head_accuracy_cpu.md``): INT8
    per-channel agrees on 99.1% of top-1 tokens (the bf16 head: 99.1%), relative logit error
    0.7%, at half the bytes; INT4 g128 on 87% (11% logit error), at a quarter.

    All or nothing: every layer (fused or not) is quantized before the first one is swapped in,
    so an error (a layer that cannot be quantized, an interrupt) leaves the model as it was.

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
        fuse: fuse q/k/v and gate/up projections (see "Fused projections" above).

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
    if not isinstance(fuse, bool):
        raise TypeError(f"{where}: fuse must be a bool; got {type(fuse).__name__}")
    patterns = name_patterns(skip, where, "skip")

    summary = QuantizationSummary(bits=bits, group_size=group_size, symmetric=symmetric,
                                  fuse=fuse)
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

    # Fused groups take the place of their members' entries (at the first member's position).
    work = [(name, linear, places, None) for name, linear, places in plan]
    if fuse:
        groups, summary.not_fused = _fuse.find_groups(
            model, {id(linear): [full for _, _, full in places] for _, linear, places in plan},
            summary.skipped)
        member_of = {id(lin): group for group in groups for lin in group.linears}
        work = []
        for name, linear, places in plan:
            group = member_of.get(id(linear))
            if group is None:
                work.append((name, linear, places, None))
            elif linear is group.linears[0]:
                work.append((group.fused_name, None, None, group))

    # Build every layer first; the model changes only once all of them exist.
    built = []
    bar = _progress(work, progress)
    try:
        for name, linear, places, group in bar:
            like = group.linears[0] if group is not None else linear
            layer_dtype = dtype
            if layer_dtype is None:
                layer_dtype = (like.weight.dtype if like.weight.dtype in _HALF_DTYPES
                               else DEFAULT_FP32_COMPUTE_DTYPE)
            if weights:
                if group is not None:
                    # The members' weights stacked (one group at a time: a temporary copy).
                    linear = _fuse.fused_linear(group)
                try:
                    layer = QuantLinear.from_linear(linear, bits=bits, group_size=group_size,
                                                    symmetric=symmetric, dtype=layer_dtype)
                except (ValueError, TypeError) as e:
                    raise type(e)(f"{where}: layer {name!r}: {e}") from e
            else:
                out_features = like.out_features if group is None else sum(group.sizes)
                layer = QuantLinear(like.in_features, out_features,
                                    bias=like.bias is not None, bits=bits,
                                    group_size=group_size, symmetric=symmetric,
                                    dtype=layer_dtype, device=like.weight.device)
                layer.train(like.training)
            slices = None
            if group is not None:
                slices = _fuse.make_slices(layer, group.sizes, group.fused_attr)
                for piece, member in zip(slices, group.linears):
                    piece.train(member.training)
            built.append((name, None if group is not None else linear, places, group, layer,
                          slices))
    finally:
        if hasattr(bar, "close"):
            bar.close()
    for name, linear, places, group, layer, slices in built:
        if group is None:
            for parent, attr, _ in places:
                setattr(parent, attr, layer)
            summary.converted.append(name)
            summary.bytes_before += _linear_bytes(linear)
        else:
            setattr(group.parent, group.fused_attr, layer)
            for attr, piece in zip(group.members, slices):
                setattr(group.parent, attr, piece)
            summary.converted.extend(group.member_names)
            summary.fused[group.fused_name] = group.member_names
            if group.kind == "gate/up":
                reason = _fuse.gate_mlp(group.parent)
                if reason is None:
                    summary.gated.append(group.parent_name)
                else:
                    summary.not_gated[group.parent_name] = reason
            summary.bytes_before += sum(_linear_bytes(lin) for lin in group.linears)
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
    metadata, so that ``load_quantized`` can rebuild the layers without being told them. Fused
    projections (``quantize_model(..., fuse=True)``) are recorded too (``cute_gemm.fused``:
    each fused layer's member names and sizes; such files have format version 1.1, which
    versions of cute_gemm without fusion refuse by their version check).

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
    try:
        groups = _fuse.slice_groups(model)
    except ValueError as e:
        raise ValueError(f"{where}: cannot describe the model's fused projections: {e}") from e
    fused = {name: {"members": members, "sizes": sizes}
             for name, (_, _, members, sizes) in groups.items()}
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
        _FORMAT_KEY: _FUSED_FORMAT_VERSION if fused else _FORMAT_VERSION,
        _LAYERS_KEY: json.dumps(layers),  # in module order
        _ALIASES_KEY: json.dumps(aliases),
    })
    if fused:
        extra[_FUSED_KEY] = json.dumps(fused)
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
    if version not in _READABLE_VERSIONS:
        raise ValueError(f"{where}: {path!r} is a cute_gemm file of format version {version!r}, "
                         f"which this version of cute_gemm cannot read (it reads version "
                         f"{_FORMAT_VERSION!r}); load it with the cute_gemm that wrote it, or "
                         f"upgrade")
    parsed = {}
    for key, default in ((_LAYERS_KEY, None), (_ALIASES_KEY, "{}"), (_FUSED_KEY, "{}")):
        try:
            value = json.loads(metadata.get(key, default))
        except ValueError as e:
            raise ValueError(f"{where}: {path!r} has corrupted cute_gemm metadata: {key!r} is not "
                             f"valid JSON: {e}") from e
        if not isinstance(value, dict):
            raise ValueError(f"{where}: {path!r} has corrupted cute_gemm metadata: {key!r} must "
                             f"be a JSON object; got {type(value).__name__}")
        parsed[key] = value
    layers, aliases, fused = parsed[_LAYERS_KEY], parsed[_ALIASES_KEY], parsed[_FUSED_KEY]
    for name, cfg in layers.items():
        why = _check_layer_config(name, cfg)
        if why is not None:
            raise ValueError(f"{where}: {path!r} has corrupted cute_gemm metadata for layer "
                             f"{name!r}: {why}")
    if fused and version != _FUSED_FORMAT_VERSION:
        raise ValueError(f"{where}: {path!r} has corrupted cute_gemm metadata: fused layers "
                         f"({_FUSED_KEY!r}) in a file of format version {version!r}")
    for name, group in fused.items():
        why = _check_fused_group(name, group, layers)
        if why is not None:
            raise ValueError(f"{where}: {path!r} has corrupted cute_gemm metadata for fused "
                             f"layer {name!r}: {why}")
    for alias, source in aliases.items():
        if not isinstance(source, str) or source not in header.tensors or \
                alias in header.tensors:
            raise ValueError(f"{where}: {path!r} has corrupted cute_gemm metadata: alias "
                             f"{alias!r} -> {source!r} must name a tensor of the file (and not "
                             f"be one itself)")
    return header, layers, aliases, fused


def _check_fused_group(name, group, layers):
    """Why the file's fusion record ``group`` for layer ``name`` is unusable, or None."""
    if not isinstance(group, dict) or set(group) != {"members", "sizes"}:
        return f"the record must be an object with 'members' and 'sizes'; got {group!r}"
    members, sizes = group["members"], group["sizes"]
    if (not isinstance(members, list) or len(members) < 2 or len(set(members)) != len(members)
            or not all(isinstance(m, str) and m.isidentifier() for m in members)):
        return f"'members' must list two or more distinct attribute names; got {members!r}"
    if (not isinstance(sizes, list) or len(sizes) != len(members)
            or not all(isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in sizes)):
        return f"'sizes' must list one positive int per member; got {sizes!r}"
    cfg = layers.get(name)
    if cfg is None:
        return "it is not one of the file's quantized layers"
    if sum(sizes) != cfg["out_features"]:
        return f"the sizes {sizes} do not add up to its out_features={cfg['out_features']}"
    parent = name.rpartition(".")[0]
    for m in members:
        full = f"{parent}.{m}" if parent else m
        if full in layers:
            return f"its member {full!r} is also a quantized layer of the file"
    return None


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


def _plan_layers(model, layers, path, where, created=frozenset()):
    """``[(name, cfg, old module, new QuantLinear or None when the old one is reused)]``; builds
    the new layers (detached: nothing in the model changes). The layers whose ids are in
    ``created`` (empty fused layers ``_plan_fusion`` made for this load) count as new ones
    (``(name, cfg, layer, layer)``): the file must fill them."""
    plan = []
    for name, cfg in layers.items():
        parent, attr, module = _resolve(model, name, path, where)
        if id(module) in created:
            plan.append((name, cfg, module, module))
            continue
        if isinstance(module, _fuse.ProjectionSlice):
            raise ValueError(f"{where}: {name!r} is a separate quantized layer in {path!r} but is "
                             f"fused into {module.fused_name!r} in the model (quantize_model(..., "
                             f"fuse=True)); load the file into a model without fused projections "
                             f"(the original model, or one converted with fuse=False); nothing "
                             f"was changed")
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


_ABSENT = object()


def _plan_fusion(model, fused, layers, path, where):
    """``(swaps, created)`` that give ``model`` the file's fused projections: ``swaps`` is
    ``[(parent, attribute, old module or _ABSENT, new module)]``, ``created`` the ids of the new
    (empty) fused ``QuantLinear`` layers. Builds the new modules detached (nothing in the model
    changes); a group the model already has with the file's settings needs nothing. Raises
    ``ValueError`` when the model cannot take a group."""
    sites = _module_sites(model) if fused else {}
    swaps, created = [], set()
    for name, group in fused.items():
        cfg, members, sizes = layers[name], group["members"], group["sizes"]
        parent_name, _, fused_attr = name.rpartition(".")
        what = f"{where}: {path!r} fuses {members} into {name!r}, but"
        try:
            parent = model.get_submodule(parent_name) if parent_name else model
        except AttributeError:
            raise ValueError(f"{what} the model has no module {parent_name!r} (is the file for "
                             f"another model?); nothing was changed") from None
        children = [parent._modules.get(m) for m in members]
        existing = parent._modules.get(fused_attr)
        if all(isinstance(c, _fuse.ProjectionSlice) and c.fused is existing and c.index == i
               and c.count == len(members) and c.out_features == sizes[i]
               for i, c in enumerate(children)) and isinstance(existing, QuantLinear):
            if _layer_config(existing) == cfg:
                continue  # already fused like this: the load fills the layer
            device = existing.qweight.device
        else:
            for m, child, size in zip(members, children, sizes):
                full = f"{parent_name}.{m}" if parent_name else m
                if child is None:
                    raise ValueError(f"{what} the model has no layer {full!r} (is the file for "
                                     f"another model?); nothing was changed")
                if isinstance(child, _fuse.ProjectionSlice):
                    raise ValueError(f"{what} {full!r} is fused differently in the model (a "
                                     f"slice of {child.fused_name!r}); load the file into the "
                                     f"original model; nothing was changed")
                if not isinstance(child, (torch.nn.Linear, QuantLinear)):
                    raise ValueError(f"{what} {full!r} is a {type(child).__name__} in the model "
                                     f"(expected nn.Linear); nothing was changed")
                if (child.out_features, child.in_features) != (size, cfg["in_features"]):
                    raise ValueError(f"{what} layer {full!r} is [out={child.out_features}, in="
                                     f"{child.in_features}] in the model and [out={size}, in="
                                     f"{cfg['in_features']}] in the file (is the file for another "
                                     f"model?); nothing was changed")
                if len(sites.get(id(child), ())) > 1:
                    raise ValueError(f"{what} {full!r} is shared with "
                                     f"{sites[id(child)][1][2]!r} in the model, which would lose "
                                     f"it; nothing was changed")
            if existing is not None or hasattr(parent, fused_attr):
                raise ValueError(f"{what} the model's {parent_name!r} already has an attribute "
                                 f"{fused_attr!r}; nothing was changed")
            first = children[0]
            device = (first.qweight if isinstance(first, QuantLinear) else first.weight).device
        layer = QuantLinear(cfg["in_features"], cfg["out_features"], bias=cfg["bias"],
                            bits=cfg["bits"], group_size=cfg["group_size"],
                            symmetric=cfg["symmetric"], dtype=getattr(torch, cfg["dtype"]),
                            device=device)
        layer.train(children[0].training)
        created.add(id(layer))
        swaps.append((parent, fused_attr, existing if existing is not None else _ABSENT, layer))
        for m, child, piece in zip(members, children,
                                   _fuse.make_slices(layer, sizes, fused_attr)):
            piece.train(child.training)
            swaps.append((parent, m, child, piece))
    return swaps, created


def _undo_swaps(swaps):
    for parent, attr, old, _ in reversed(swaps):
        if old is _ABSENT:
            delattr(parent, attr)
        else:
            setattr(parent, attr, old)


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

    Fused projections (files saved from a ``quantize_model(..., fuse=True)`` model): the groups
    the file records are built in the model (its ``q_proj``/``k_proj``/``v_proj`` become slices
    of a new ``qkv_proj``, see ``cute_gemm.fuse``), from unquantized or unfused quantized
    members, or reused where the model is already fused the same way (e.g. by
    ``quantize_model(..., weights=False, fuse=True)``). A layer the file has unfused that is
    fused in the model, or a group the model cannot take, is a ``ValueError``.

    Returns ``model``.
    """
    where = "load_quantized"
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"{where}: model must be a torch.nn.Module; got {type(model).__name__}")
    header, layers, aliases, fused = _read_metadata(path, where)
    path = header.path
    # 0. The file's fused projections: built detached, swapped in, and taken out again if
    #    anything below fails.
    fusion, created = _plan_fusion(model, fused, layers, path, where)
    for parent, attr, _, new in fusion:
        setattr(parent, attr, new)
    gated = [parent for parent, attr, _, _ in fusion if attr == "gate_up_proj"]
    for parent in gated:
        _fuse.gate_mlp(parent)
    try:
        return _load(model, header, layers, aliases, path, strict, device, created, where)
    except BaseException:
        for parent in gated:
            _fuse.ungate_mlp(parent)
        _undo_swaps(fusion)
        raise


def _load(model, header, layers, aliases, path, strict, device, created, where):
    from ._files import load_safetensors
    from .quant import format_tag

    # 1. Plan and check against the header: nothing in the model changes.
    plan = _plan_layers(model, layers, path, where, created)
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
                      UserWarning, stacklevel=3)
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
