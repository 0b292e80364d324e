"""Hugging Face transformers integration: ``quant_method="cute_gemm"``.

``import cute_gemm`` registers (when transformers >= 5 is installed) a quantization config and a
quantizer with transformers, so that::

    model = AutoModelForCausalLM.from_pretrained(
        path, quantization_config=cute_gemm.CuteGemmConfig(bits=4, group_size=128),
        dtype=torch.float16, device_map="cuda")
    model.save_pretrained(out)            # packed weights + quantization_config in config.json
    model = AutoModelForCausalLM.from_pretrained(out)   # after import cute_gemm: pre-quantized

This module imports transformers (~1.5 s), so ``import cute_gemm`` imports it only when
transformers already is, else on first use of ``cute_gemm.hf`` (or ``CuteGemmConfig`` and the
loaders) or right after transformers is imported (``cute_gemm._hf_hook``), registering each time.

Quantization happens while loading, one weight at a time: before the weights load, every
targeted ``nn.Linear`` is replaced by an empty ``QuantLinear`` (on the meta device) that holds a
meta placeholder ``weight`` so that the checkpoint's ``<name>.weight`` is routed to it; each 16-bit
weight, as it is read (on its target device), is quantized by ``cute_gemm.quantize`` and only the
packed ``qweight``/``scales``/``zeros``/``qformat`` are kept (transformers loads synchronously when
quantizing on the fly). Peak memory is the quantized model plus about one 16-bit weight; the
16-bit model is never materialized. The result is the same as ``from_pretrained`` in 16 bits
followed by ``cute_gemm.quantize_model`` with the same settings (identical buffers).

Which layers: every ``nn.Linear`` except those named by ``modules_to_not_convert`` (default: what
transformers keeps for every quantizer -- the output head, tied weights, the last module), layers
whose shape the kernel cannot take (kept, as ``quantize_model`` does) and layers tied to another
weight. Compute dtype: the load dtype for fp16/bf16, else bf16 (as ``quantize_model``).

``fuse=True`` fuses q/k/v and gate/up (``cute_gemm.fuse``) after loading: the members are
quantized one by one as they arrive and then concatenated exactly (the packed format is blocked
by 8 output rows, so the fused buffers are the members' concatenation). ``save_pretrained``
stores the fused layers (``qkv_proj``, ``gate_up_proj``) and the config says ``fuse: true``, so a
reload builds the same structure.

Pre-quantized reloads take the scales' dtype from the load dtype (``dtype=`` of
``from_pretrained``, by default the saved one): reload with the dtype you saved with to get
identical outputs.

GPTQ / AWQ checkpoint directories: ``load_gptq_pretrained(directory)`` and
``load_awq_pretrained(directory)`` build the model from the directory's ``config.json`` with its
parameters on the meta device and load the checkpoint into ``QuantLinear`` layers
(``cute_gemm.load_gptq_model`` / ``load_awq_model``).
"""

import contextlib

import torch

from . import fuse as _fuse
from .convert import _linear_sites, name_patterns
from .nn import QuantLinear, _kernel_ready, unsupported_reason
from .quant import (DEFAULT_FP32_COMPUTE_DTYPE, QuantizedWeight, format_tag, format_tag_mismatch,
                    quantize)
from .weight_format import check_bits, check_group_size

__all__ = ["CuteGemmConfig", "QUANT_METHOD", "load_awq_pretrained", "load_gptq_pretrained",
           "register", "transformers_available"]

QUANT_METHOD = "cute_gemm"
_HALF = (torch.float16, torch.bfloat16)
_WHERE = "CuteGemmConfig"


def _transformers_api():
    """The transformers pieces the integration needs, or None when transformers is absent or too
    old (before 5.0: no per-weight conversion ops)."""
    try:
        import transformers
        from transformers.core_model_loading import ConversionOps
        from transformers.quantizers import HfQuantizer
        from transformers.quantizers import auto as _auto
        from transformers.utils.quantization_config import QuantizationConfigMixin
    except Exception:  # noqa: BLE001 - any failure means: no integration
        return None
    try:
        major = int(transformers.__version__.split(".")[0])
    except ValueError:
        return None
    if major < 5 or not hasattr(_auto, "register_quantizer") or not hasattr(
            HfQuantizer, "get_quantize_ops"):
        return None
    return ConversionOps, HfQuantizer, _auto, QuantizationConfigMixin


_API = _transformers_api()


def transformers_available():
    """Whether the transformers integration is active (transformers >= 5 importable)."""
    return _API is not None


def _check_config(bits, group_size, symmetric, modules_to_not_convert, fuse):
    bits = check_bits(bits, _WHERE)
    group_size = check_group_size(group_size, _WHERE)
    if not isinstance(symmetric, bool):
        raise TypeError(f"{_WHERE}: symmetric must be a bool; got {type(symmetric).__name__}")
    if not isinstance(fuse, bool):
        raise TypeError(f"{_WHERE}: fuse must be a bool; got {type(fuse).__name__}")
    if modules_to_not_convert is not None:
        modules_to_not_convert = list(name_patterns(modules_to_not_convert, _WHERE,
                                                    "modules_to_not_convert"))
    return bits, group_size, modules_to_not_convert


if _API is None:
    class CuteGemmConfig:
        """Quantization config for ``from_pretrained`` (needs transformers >= 5, not installed)."""

        quant_method = QUANT_METHOD

        def __init__(self, *args, **kwargs):
            raise ImportError("cute_gemm.CuteGemmConfig needs transformers >= 5.0 (pip install "
                              "'transformers>=5'); it is not installed or too old")
else:
    _ConversionOps, _HfQuantizer, _auto, _QuantizationConfigMixin = _API

    class CuteGemmConfig(_QuantizationConfigMixin):
        """Quantization config of ``quant_method="cute_gemm"`` for ``from_pretrained``.

        Args:
            bits: 4 or 8.
            group_size: 32, 64, 128, or -1 (one scale per output channel).
            symmetric: symmetric quantization (no zero points) or asymmetric.
            modules_to_not_convert: module names (or transformers' patterns) kept as
                ``nn.Linear``; None: transformers' default (output head, tied weights).
            fuse: fuse q/k/v and gate/up projections (see ``cute_gemm.fuse``).
        """

        def __init__(self, bits=4, group_size=128, symmetric=True, modules_to_not_convert=None,
                     fuse=False, **kwargs):
            kwargs.pop("quant_method", None)
            if kwargs:
                raise TypeError(f"{_WHERE}: unexpected argument(s) {sorted(kwargs)} (takes bits, "
                                f"group_size, symmetric, modules_to_not_convert, fuse)")
            bits, group_size, modules_to_not_convert = _check_config(
                bits, group_size, symmetric, modules_to_not_convert, fuse)
            self.quant_method = QUANT_METHOD
            self.bits = bits
            self.group_size = group_size
            self.symmetric = symmetric
            self.modules_to_not_convert = modules_to_not_convert
            self.fuse = fuse

        def post_init(self):
            _check_config(self.bits, self.group_size, self.symmetric,
                          self.modules_to_not_convert, self.fuse)

    class _CuteGemmQuantize(_ConversionOps):
        """Quantizes one ``<layer>.weight`` as it is loaded into the layer's empty
        ``QuantLinear``; returns its packed buffers (the 16-bit weight is dropped)."""

        def __init__(self, hf_quantizer):
            self.hf_quantizer = hf_quantizer

        def convert(self, input_dict, full_layer_name=None, model=None, missing_keys=None,
                    **kwargs):
            (_, value), = input_dict.items()
            value = value[0] if isinstance(value, (list, tuple)) else value
            prefix = full_layer_name.rpartition(".")[0]
            layer = model.get_submodule(prefix)
            with torch.no_grad():
                qw = quantize(value.detach(), bits=layer.bits, group_size=layer.group_size,
                              symmetric=layer.symmetric, dtype=layer.scales.dtype)
            layer._parameters.pop("weight", None)  # the placeholder that routed the weight here
            if missing_keys is not None:
                missing_keys.discard(full_layer_name)
            out = {f"{prefix}.qweight": _kernel_ready(qw.packed),
                   f"{prefix}.scales": _kernel_ready(qw.scales),
                   f"{prefix}.qformat": format_tag(qw.bits, qw.group_size, qw.symmetric,
                                                   device=value.device)}
            if qw.zeros is not None:
                out[f"{prefix}.zeros"] = _kernel_ready(qw.zeros)
            return out

    class CuteGemmHfQuantizer(_HfQuantizer):
        """transformers quantizer for ``CuteGemmConfig`` (see the module docstring)."""

        requires_calibration = False

        def __init__(self, quantization_config, **kwargs):
            super().__init__(quantization_config, **kwargs)
            self._targets = set()
            self._pending_groups = []
            self.not_fused = {}

        def validate_environment(self, *args, device_map=None, **kwargs):
            if isinstance(device_map, dict) and "disk" in device_map.values():
                raise ValueError("cute_gemm: disk offload (device_map with 'disk') is not "
                                 "supported for quantized layers")

        def param_needs_quantization(self, model, param_name, **kwargs):
            if self.pre_quantized:
                return False
            prefix, _, tensor = param_name.rpartition(".")
            return tensor == "weight" and prefix in self._targets

        def param_element_size(self, model, param_name, param):
            # transformers pre-allocates each GPU's share of the model from the state dict's
            # sizes. An empty layer's packed buffers are in it with their own sizes; its
            # 16-bit placeholder weight must count nothing, or the 16-bit model is reserved.
            if self.param_needs_quantization(model, param_name):
                return 0
            return super().param_element_size(model, param_name, param)

        def get_quantize_ops(self):
            return _CuteGemmQuantize(self)

        def _process_model_before_weight_loading(self, model, **kwargs):
            cfg = self.quantization_config
            skip = self.get_modules_to_not_convert(model, cfg.modules_to_not_convert,
                                                   getattr(model, "_keep_in_fp32_modules", None))
            from transformers.quantizers.quantizers_utils import should_convert_module

            tied = set()
            for k, v in (getattr(model, "all_tied_weights_keys", None) or {}).items():
                tied.update((k.rpartition(".")[0], v.rpartition(".")[0]))
            plan, kept = [], {}
            for linear, places in _linear_sites(model).values():
                names = [full for _, _, full in places]
                name = names[0]
                if not all(should_convert_module(n, skip) for n in names):
                    kept[name] = "in modules_to_not_convert"
                elif any(n in tied for n in names):
                    kept[name] = "tied to another weight"
                elif isinstance(linear, torch.nn.modules.linear.NonDynamicallyQuantizableLinear):
                    kept[name] = "output projection of nn.MultiheadAttention"
                else:
                    reason = unsupported_reason(linear.out_features, linear.in_features,
                                                cfg.group_size)
                    if reason is not None:
                        kept[name] = reason
                    else:
                        plan.append((linear, places))
            self.kept = kept
            odd = {n: r for n, r in kept.items() if r.startswith(("out_features", "in_features"))}
            if odd:
                import warnings

                warnings.warn("cute_gemm: kept %d nn.Linear layer(s) unquantized (shape): %s" % (
                    len(odd), "; ".join(f"{n} ({r})" for n, r in odd.items())), UserWarning,
                    stacklevel=2)
            groups = []
            if cfg.fuse:
                groups, self.not_fused = _fuse.find_groups(
                    model, {id(lin): [f for _, _, f in places] for lin, places in plan}, kept)
            in_group = {id(lin) for g in groups for lin in g.linears}
            for linear, places in plan:
                if self.pre_quantized and id(linear) in in_group:
                    continue  # built fused below
                layer = self._empty_layer(linear, linear.out_features)
                for parent, attr, full in places:
                    setattr(parent, attr, layer)
                    self._targets.add(full)
            for g in groups:
                if self.pre_quantized:
                    fused = self._empty_layer(g.linears[0], sum(g.sizes))
                    setattr(g.parent, g.fused_attr, fused)
                    for attr, piece in zip(g.members, _fuse.make_slices(fused, g.sizes,
                                                                        g.fused_attr)):
                        setattr(g.parent, attr, piece)
                    if g.kind == "gate/up":
                        _fuse.gate_mlp(g.parent)
                else:
                    self._pending_groups.append(g)
            return model

        def _empty_layer(self, linear, out_features):
            cfg = self.quantization_config
            dtype = linear.weight.dtype
            dtype = dtype if dtype in _HALF else DEFAULT_FP32_COMPUTE_DTYPE
            layer = QuantLinear(linear.in_features, out_features, bias=linear.bias is not None,
                                bits=cfg.bits, group_size=cfg.group_size,
                                symmetric=cfg.symmetric, dtype=dtype, device="meta")
            if not self.pre_quantized:
                # Routes the checkpoint's "<name>.weight" here; removed when it is quantized.
                layer._parameters["weight"] = torch.nn.Parameter(
                    torch.empty(out_features, linear.in_features, dtype=linear.weight.dtype,
                                device="meta"), requires_grad=False)
            return layer

        def _process_model_after_weight_loading(self, model, **kwargs):
            problems = []
            for name, module in model.named_modules():
                if not isinstance(module, QuantLinear):
                    continue
                if "weight" in module._parameters:
                    problems.append(f"{name}: no weight in the checkpoint")
                    continue
                if any(t is not None and t.device.type == "meta"
                       for t in module._buffers.values()):
                    problems.append(f"{name}: buffers not loaded")
                    continue
                why = format_tag_mismatch(module.qformat, module.bits, module.group_size,
                                          module.symmetric)
                if why is not None:
                    problems.append(f"{name}: {why}")
                    continue
                # Tensors read from a memory-mapped file may sit at any offset; the kernel
                # needs contiguous, 16-byte aligned buffers.
                for key in ("qweight", "scales", "zeros", "bias"):
                    t = module._buffers.get(key)
                    if t is not None:
                        module._buffers[key] = _kernel_ready(t)
            if problems:
                raise ValueError("cute_gemm: quantized layers not loaded correctly: "
                                 + "; ".join(problems))
            for g in self._pending_groups:
                _fuse_quantized(g)
            self._pending_groups = []
            return model

        def is_serializable(self, *args, **kwargs):
            return True

        @property
        def is_trainable(self):
            return False

        @property
        def is_compileable(self):
            return True


def _fuse_quantized(group):
    """Replaces a group's quantized members by one fused ``QuantLinear`` and its slices; exact:
    the packed weight is blocked by 8 output rows (dim 0), scales/zeros are [groups, N]."""
    parent = group.parent
    layers = [getattr(parent, m) for m in group.members]
    first = layers[0]
    cat = lambda ts, dim: torch.cat(ts, dim=dim)  # noqa: E731
    qw = QuantizedWeight(cat([lay.qweight for lay in layers], 0),
                         cat([lay.scales for lay in layers], 1),
                         None if first.zeros is None else cat([lay.zeros for lay in layers], 1),
                         first.bits, first.group_size,
                         (sum(lay.out_features for lay in layers), first.in_features))
    bias = None if first.bias is None else cat([lay.bias for lay in layers], 0)
    fused = QuantLinear.from_quantized(qw, bias=bias)
    fused.train(first.training)
    setattr(parent, group.fused_attr, fused)
    for attr, piece in zip(group.members, _fuse.make_slices(
            fused, [lay.out_features for lay in layers], group.fused_attr)):
        piece.train(first.training)
        setattr(parent, attr, piece)
    if group.kind == "gate/up":
        _fuse.gate_mlp(parent)


def register():
    """Registers ``quant_method="cute_gemm"`` with transformers (idempotent; a no-op without
    transformers >= 5). Called when this module is first used or transformers is imported after
    ``import cute_gemm``, or by ``import cute_gemm`` when transformers already is. Returns whether
    it is registered."""
    if _API is None:
        return False
    configs, quantizers = _auto.AUTO_QUANTIZATION_CONFIG_MAPPING, _auto.AUTO_QUANTIZER_MAPPING
    if configs.get(QUANT_METHOD) is not CuteGemmConfig:
        configs.pop(QUANT_METHOD, None)  # e.g. a reloaded cute_gemm: the newest classes win
        _auto.register_quantization_config(QUANT_METHOD)(CuteGemmConfig)
    if quantizers.get(QUANT_METHOD) is not CuteGemmHfQuantizer:
        quantizers.pop(QUANT_METHOD, None)
        _auto.register_quantizer(QUANT_METHOD)(CuteGemmHfQuantizer)
    return True


# ------------------------------------------------------------- GPTQ / AWQ checkpoint dirs


@contextlib.contextmanager
def _parameters_on_meta():
    """Parameters created inside go to the meta device; buffers (rotary tables, ...) stay real."""
    original = torch.nn.Module.register_parameter

    def register_parameter(module, name, param):
        original(module, name, param)
        if param is not None:
            p = module._parameters[name]
            module._parameters[name] = type(p)(p.to("meta"), requires_grad=p.requires_grad)

    torch.nn.Module.register_parameter = register_parameter
    try:
        yield
    finally:
        torch.nn.Module.register_parameter = original


def _skeleton(directory, dtype, auto_class, where):
    if _API is None:
        raise ImportError(f"cute_gemm.{where} needs transformers >= 5.0 (pip install "
                          f"'transformers>=5')")
    if dtype is not None and dtype not in _HALF:
        raise ValueError(f"{where}: dtype must be None, torch.float16 or torch.bfloat16; got "
                         f"{dtype!r}")
    import transformers

    config = transformers.AutoConfig.from_pretrained(directory)
    if hasattr(config, "quantization_config"):
        del config.quantization_config  # the skeleton is plain; the layers come from our loader
    if dtype is None:
        dtype = getattr(config, "dtype", None)
        dtype = dtype if dtype in _HALF else torch.float16
    auto_class = auto_class or transformers.AutoModelForCausalLM
    with _parameters_on_meta():
        model = auto_class.from_config(config, dtype=dtype)
    return model, dtype


def _finish(model, where):
    if getattr(model.config, "tie_word_embeddings", False):
        out = model.get_output_embeddings()
        if isinstance(out, torch.nn.Linear) and out.weight.device.type == "meta":
            model.tie_weights()
    left = [n for n, p in model.named_parameters() if p.device.type == "meta"]
    if left:
        raise ValueError(f"{where}: the checkpoint did not provide {left}")
    return model.eval()


def load_gptq_pretrained(directory, *, dtype=None, auto_class=None, strict=True):
    """A GPTQ checkpoint directory (``config.json`` + ``*.safetensors`` + quantize config) as a
    transformers model on cute_gemm's kernels, in one call.

    Builds the model from ``config.json`` (``auto_class.from_config``, default
    ``AutoModelForCausalLM``) with its parameters on the meta device (nothing 16-bit is
    allocated), then ``cute_gemm.load_gptq_model(model, directory, dtype=dtype)``. ``dtype``
    (fp16/bf16; default the config's, else fp16) is the compute dtype. Returns ``(model,
    report)``; the model is on the CPU in eval mode (``model.cuda()`` next)."""
    from .checkpoints import load_gptq_model

    model, dtype = _skeleton(directory, dtype, auto_class, "load_gptq_pretrained")
    report = load_gptq_model(model, directory, dtype=dtype, strict=strict)
    return _finish(model, "load_gptq_pretrained"), report


def load_awq_pretrained(directory, *, dtype=None, auto_class=None, strict=True):
    """As ``load_gptq_pretrained`` for an AWQ ("gemm") checkpoint directory
    (``cute_gemm.load_awq_model``)."""
    from .checkpoints import load_awq_model

    model, dtype = _skeleton(directory, dtype, auto_class, "load_awq_pretrained")
    report = load_awq_model(model, directory, dtype=dtype, strict=strict)
    return _finish(model, "load_awq_pretrained"), report
