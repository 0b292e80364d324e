"""``QuantLinear``: a drop-in replacement for ``torch.nn.Linear`` whose weight is stored as INT4 or
INT8 in the mixed-input GEMM's packed format and multiplied by ``cute_gemm.mixed_gemm``.

The layer is an inference layer: everything it holds (packed weight, scales, zero points, bias,
input permutation) is a *buffer*, so it has no parameters, ``state_dict`` saves and loads it like
any module, and ``.to()``/``.cuda()``/``.half()`` move it. Gradients flow to the layer's *input*,
so adapters trained on top of a frozen quantized model (LoRA and the like) work; the quantized
weight itself cannot be trained (there is no ``weight`` to train: see ``QuantLinear.__getattr__``).

Dtype rule (nn.Linear's call contract, as bitsandbytes' compute dtype): the layer *computes* in
its compute dtype, the dtype of its scales (torch.float16 or torch.bfloat16), and takes any
floating input: an fp16/bf16/fp32/fp64 input is cast to the compute dtype, multiplied, and the
output is cast back, so the output has the input's dtype. An input in the compute dtype goes to
the kernel as it is (no copies). ``.half()`` and ``.bfloat16()`` (and ``.to(dtype)`` with either)
change the compute dtype; ``.float()``, ``.double()`` and ``.to(torch.float32)`` leave it as it is
(the kernel has no fp32 path), so ``model.float()`` on a model with quantized layers converts
every other layer and these ones keep computing in 16 bits, with fp32 inputs and outputs.

The packed ``qweight`` is plain int32 words; the ``qformat`` buffer beside it (``[magic, bits,
group_size, symmetric]``, see ``cute_gemm.quant.format_tag``) says how they were packed, and
``load_state_dict`` checks it together with every buffer's dtype, shape and, for ``zeros`` and
``input_perm``, values: a state dict that does not match the layer is refused, never loaded into
garbage.
"""

import types

import torch

from . import weight_format as _wf
from .quant import (
    DEFAULT_FP32_COMPUTE_DTYPE, QuantizedWeight, check_bits, check_group_size, format_tag,
    format_tag_mismatch, packed_shape, quantize)

__all__ = ["QuantLinear", "unsupported_reason"]

_HALF_DTYPES = (torch.float16, torch.bfloat16)
_INT_DTYPES = (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64)
_WHERE = "QuantLinear"


def unsupported_reason(out_features, in_features, group_size):
    """Why the kernel cannot take an ``[out_features, in_features]`` weight with this group size,
    or ``None`` when it can.

    The mixed-input kernel works on blocks of 8 output channels (N % 8 == 0) and needs whole
    quantization groups along K (K % group_size == 0; per-channel, group_size=-1, needs
    K % 32 == 0): the rules of ``cute_gemm.weight_format``. ``group_size`` must be valid
    (``check_group_size``). ``cute_gemm.quantize_model`` uses the reason to explain the layers
    it keeps.
    """
    if not _wf.valid_n(out_features):
        return f"out_features={out_features} is not a multiple of {_wf.BLOCK_N}"
    multiple = _wf.k_multiple(group_size)
    if in_features % multiple != 0:  # in_features >= 1 is QuantLinear's own check
        if group_size == _wf.PER_CHANNEL:
            return (f"in_features={in_features} is not a multiple of {multiple} (needed for "
                    f"per-channel quantization, group_size={_wf.PER_CHANNEL})")
        return f"in_features={in_features} is not a multiple of group_size={group_size}"
    return None


def _check_int(value, name, minimum=1):
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{_WHERE}: {name} must be an int; got {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"{_WHERE}: {name} must be >= {minimum}; got {name}={value}")


def _check_config(in_features, out_features, bits, group_size, dtype):
    _check_int(in_features, "in_features")
    _check_int(out_features, "out_features")
    bits = check_bits(bits, _WHERE)
    group_size = check_group_size(group_size, _WHERE)
    if dtype not in _HALF_DTYPES:
        raise ValueError(f"{_WHERE}: dtype must be torch.float16 or torch.bfloat16 (the "
                         f"activation dtype the kernel computes in); got {dtype}")
    reason = unsupported_reason(out_features, in_features, group_size)
    if reason is not None:
        raise ValueError(f"{_WHERE}: the kernel cannot take this shape: {reason}")
    return bits, group_size


def _kernel_ready(t):
    """``t`` itself when contiguous and 16-byte aligned (the kernel's loads), else a copy that is
    (fresh allocations from torch are aligned)."""
    if t.is_contiguous() and t.data_ptr() % 16 == 0:
        return t
    return t.contiguous().clone()


class QuantLinear(torch.nn.Module):
    """``y = x @ W.T + bias`` with ``W`` quantized to INT4/INT8 (``cute_gemm.quantize``'s format).

    Build one from a trained layer with ``QuantLinear.from_linear(linear, bits=4)``, from an
    existing ``QuantizedWeight`` with ``QuantLinear.from_quantized(qw, bias)``, or empty with the
    constructor (zero-filled buffers of the right shapes and dtypes, so that ``load_state_dict``
    of a saved quantized layer fills it).

    Args:
        in_features: K, the input size. A multiple of ``group_size`` (of 32 for per-channel).
        out_features: N, the output size. A multiple of 8.
        bias: whether the layer adds a bias (a buffer, see below).
        bits: 4 or 8.
        group_size: 32, 64, 128, or -1 for one scale per output channel.
        symmetric: symmetric quantization (no zero points stored) or asymmetric (``zeros``).
        dtype: the compute dtype, torch.float16 or torch.bfloat16: the dtype of the scales,
            zero points and bias, in which the product is computed. Inputs of other floating
            dtypes are cast to it and the output cast back (see the module docstring).
        device: where the buffers live.

    Buffers (all in ``state_dict``):
        qweight: int32 ``packed_shape(out_features, in_features, bits)``, the packed weight.
        scales: ``[K/G, N]`` (per-channel ``[1, N]``) in ``dtype``.
        zeros: ``[K/G, N]`` in ``dtype`` holding integer zero points; ``None`` (and not saved)
            when symmetric.
        bias: ``[N]`` in ``dtype``, or ``None`` (and not saved).
        input_perm: ``None`` (not saved) or int64 ``[K]``: the forward computes
            ``x.index_select(-1, input_perm)`` first. Used for weights whose K rows were permuted
            at quantization time (GPTQ with act-order: sorting the rows makes the groups
            contiguous). ``load_state_dict`` of a checkpoint that has it creates it.
        qformat: int32 ``[4]``, the packed format's tag ``[magic, bits, group_size, symmetric]``
            (``cute_gemm.quant.format_tag``), checked on load. State dicts saved before the tag
            existed load without it where the packed shape is unambiguous (K > 64).

    Training: the layer has no parameters. Gradients flow to the input. ``.weight`` does not
    exist (reading it raises an ``AttributeError`` that says why; assigning it is refused, so a
    weight tied or copied into the layer cannot be silently ignored), ``requires_grad_(True)``
    on the layer raises, and the forward refuses scales/zero points that require grad. ``bias``
    is frozen by default; ``layer.bias.requires_grad_()`` opts in to gradients for it (the op
    supports them), but as a buffer it is not in ``parameters()``, so hand it to the optimizer
    yourself.
    """

    def __init__(self, in_features, out_features, bias=True, bits=4, group_size=128,
                 symmetric=True, dtype=torch.float16, device=None):
        super().__init__()
        bits, group_size = _check_config(in_features, out_features, bits, group_size, dtype)
        if not isinstance(bias, bool):
            raise TypeError(f"{_WHERE}: bias must be a bool (whether the layer has a bias); got "
                            f"{type(bias).__name__}")
        if not isinstance(symmetric, bool):
            raise TypeError(f"{_WHERE}: symmetric must be a bool; got "
                            f"{type(symmetric).__name__}")
        self.in_features = in_features
        self.out_features = out_features
        self.bits = bits
        self.group_size = group_size
        self.symmetric = symmetric
        groups = in_features // _wf.effective_group_size(group_size, in_features)
        self.register_buffer("qweight", torch.zeros(
            packed_shape(out_features, in_features, bits), dtype=torch.int32, device=device))
        self.register_buffer("scales", torch.zeros(
            (groups, out_features), dtype=dtype, device=device))
        zeros = None
        if not symmetric:
            zeros = torch.zeros((groups, out_features), dtype=dtype, device=device)
        self.register_buffer("zeros", zeros)
        self.register_buffer(
            "bias", torch.zeros(out_features, dtype=dtype, device=device) if bias else None)
        self.register_buffer("input_perm", None)
        self.register_buffer("qformat", format_tag(bits, group_size, symmetric, device=device))
        self._schedules = {}  # rows of the flattened input -> schedule text (set_schedule)

    # ------------------------------------------------------------------------------ builders

    @classmethod
    def from_linear(cls, linear, bits=4, group_size=128, symmetric=True, dtype=None):
        """Quantizes ``linear``'s weight with ``cute_gemm.quantize``; keeps its bias.

        The layer's compute dtype (of scales and bias) is ``dtype`` when given, else the weight's
        dtype when it is fp16 or bf16, else torch.bfloat16 (an fp32 layer's weight is quantized
        from its fp32 values; the layer takes the same fp32 inputs as before and returns fp32,
        computing in bf16, whose range is fp32's, so no activation overflows in the cast). The
        result is on the weight's device and in ``linear``'s training mode.
        """
        if not isinstance(linear, torch.nn.Linear):
            raise TypeError(f"{_WHERE}.from_linear: linear must be a torch.nn.Linear; got "
                            f"{type(linear).__name__}")
        weight = linear.weight
        if dtype is None:
            dtype = weight.dtype if weight.dtype in _HALF_DTYPES else DEFAULT_FP32_COMPUTE_DTYPE
        n, k = weight.shape
        bits, group_size = _check_config(k, n, bits, group_size, dtype)
        if weight.device.type == "meta":
            raise ValueError(f"{_WHERE}.from_linear: linear's weight is on the meta device (it has "
                             f"no values to quantize); build an empty layer with QuantLinear("
                             f"{k}, {n}, ...) and load a checkpoint into it instead")
        with torch.no_grad():
            qw = quantize(weight.detach(), bits=bits, group_size=group_size, symmetric=symmetric,
                          dtype=dtype)
            bias = None if linear.bias is None else linear.bias.detach().to(dtype).clone()
        layer = cls.from_quantized(qw, bias=bias)
        layer.train(linear.training)
        return layer

    @classmethod
    def from_quantized(cls, qw, bias=None, input_perm=None):
        """A layer over an existing ``QuantizedWeight`` (its tensors are used, not copied, unless
        one is not contiguous or not 16-byte aligned as the kernel needs -- e.g. a tensor from a
        memory-mapped safetensors file -- which gets an aligned contiguous copy).

        Args:
            qw: the ``QuantizedWeight`` (``cute_gemm.quantize`` or an importer).
            bias: optional ``[N]`` floating tensor; converted to ``qw.dtype`` and ``qw.device``.
            input_perm: optional permutation of ``range(K)`` (integer tensor ``[K]``), stored as
                int64 on ``qw.device``: the forward gathers ``x[..., input_perm]`` first.
        """
        if not isinstance(qw, QuantizedWeight):
            raise TypeError(f"{_WHERE}.from_quantized: qw must be a cute_gemm.QuantizedWeight; "
                            f"got {type(qw).__name__}")
        n, k = qw.shape
        layer = cls(k, n, bias=bias is not None, bits=qw.bits, group_size=qw.group_size,
                    symmetric=qw.symmetric, dtype=qw.dtype, device="meta")
        layer.qweight = _kernel_ready(qw.packed)
        layer.scales = _kernel_ready(qw.scales)
        layer.zeros = None if qw.zeros is None else _kernel_ready(qw.zeros)
        layer.qformat = format_tag(qw.bits, qw.group_size, qw.symmetric, device=qw.device)
        if bias is not None:
            if not isinstance(bias, torch.Tensor) or not bias.is_floating_point():
                raise TypeError(f"{_WHERE}.from_quantized: bias must be None or a floating-point "
                                f"torch.Tensor; got {_describe(bias)}")
            if tuple(bias.shape) != (n,):
                raise ValueError(f"{_WHERE}.from_quantized: bias must have shape [N] = [{n}]; "
                                 f"got {list(bias.shape)}")
            layer.bias = _kernel_ready(bias.detach().to(device=qw.device, dtype=qw.dtype))
        if input_perm is not None:
            layer.input_perm = _check_perm(input_perm, k, qw.device)
        return layer

    # --------------------------------------------------------------------------------- views

    @property
    def quantized_weight(self):
        """The buffers as a ``QuantizedWeight`` (no copy). Its K order is the permuted one when
        ``input_perm`` is set (``x[..., input_perm] @ qw.dequantize().T`` is the layer)."""
        return QuantizedWeight(self.qweight, self.scales, self.zeros, self.bits, self.group_size,
                               (self.out_features, self.in_features))

    def __getattr__(self, name):
        if name == "weight" and "weight" not in self._parameters:
            # (A "weight" parameter exists only while transformers loads a checkpoint into an
            # empty layer: cute_gemm.hf's placeholder, replaced by the packed buffers.)
            raise AttributeError(
                f"{_WHERE} has no 'weight': the weight is stored quantized ({self.bits}-bit, "
                f"packed in the int32 buffer 'qweight', with 'scales'"
                f"{'' if self.symmetric else ' and zeros'}) and cannot be read or trained as a "
                f"dense tensor. Use layer.quantized_weight.dequantize() for a dense copy, and "
                f"train adapters on top of the layer (gradients flow to its input)")
        return super().__getattr__(name)

    def __setattr__(self, name, value):
        if name == "weight":
            raise AttributeError(
                f"{_WHERE}: cannot set 'weight': the layer multiplies by its quantized buffers "
                f"and would ignore a dense weight (tied weights cannot be shared with a "
                f"quantized layer). Build a new layer with QuantLinear.from_linear instead")
        super().__setattr__(name, value)

    def requires_grad_(self, requires_grad=True):
        """Refuses ``requires_grad_(True)``: the quantized weight is frozen (there is nothing
        to train in this layer); ``requires_grad_(False)`` is a no-op."""
        if requires_grad:
            raise RuntimeError(
                f"{_WHERE}: the quantized layer has no trainable parameters (its weight is "
                f"packed {self.bits}-bit integers); train adapters on top of it instead (gradients "
                f"flow to the layer's input)")
        return self

    def extra_repr(self):
        group = "per-channel" if self.group_size == _wf.PER_CHANNEL else str(self.group_size)
        text = (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}, bits={self.bits}, group_size={group}, "
                f"symmetric={self.symmetric}, dtype={self.scales.dtype}")
        if self.input_perm is not None:
            text += ", input_perm=True"
        if self.schedules:
            text += f", schedules={dict(self.schedules)}"
        return text

    # ------------------------------------------------------------------------------ schedules

    def set_schedule(self, m, schedule):
        """Pins the mixed GEMM's schedule (``cute_gemm.mixed_gemm``'s ``schedule``: e.g.
        ``"kernel=decode,warps=16,col_warps=2,splits=1"`` or a mapping) for the calls whose
        flattened input has exactly ``m`` rows; other row counts keep the planner's plan.
        ``schedule=None`` removes the pin. The text is checked here (a malformed key or value
        raises ``ValueError`` naming it); whether the plan can run that problem is checked at the
        call, which raises where it cannot (e.g. ``kernel=decode`` needs ``m <= 8``).

        For trying plans inside a model (``benchmarks/bench_model.py --layer-schedule``). A
        runtime setting: not part of ``state_dict``. Under ``torch.compile`` a layer with pins
        specializes its graph on the row count."""
        if isinstance(m, bool) or not isinstance(m, int) or m < 1:
            raise TypeError(f"{_WHERE}.set_schedule: m must be a positive int (rows of the "
                            f"flattened input); got {m!r}")
        pins = self.__dict__.setdefault("_schedules", {})  # (unpickled from before pins existed)
        if schedule is None:
            pins.pop(m, None)
            return self
        from .ops import _schedule_text
        try:
            text = _schedule_text(schedule)
        except (TypeError, ValueError) as e:
            raise type(e)(f"{_WHERE}.set_schedule: {e}") from None
        if text is None:
            raise ValueError(f"{_WHERE}.set_schedule: schedule {schedule!r} makes no choice; "
                             f"pass None to remove the pin for m={m}")
        pins[m] = text
        return self

    @property
    def schedules(self):
        """The pinned schedules (``set_schedule``), a read-only ``{m: text}`` view."""
        return types.MappingProxyType(getattr(self, "_schedules", {}))

    # ------------------------------------------------------------------------------- forward

    def forward(self, x, activation=None):
        """``x[..., K] -> [..., N]`` in ``x``'s dtype; ``x`` any floating dtype (computed in the
        layer's compute dtype, see the module docstring), on the layer's device, any leading dims
        (including empty ones). Non-contiguous or misaligned inputs are copied first.

        ``activation="silu_mul"``: the layer is a gate projection's rows followed by an up
        projection's (``cute_gemm.quantize_model(..., fuse=True)`` builds such ``gate_up_proj``
        layers) and the result is ``silu(gate) * up``, ``[..., N/2]``, gated inside the GEMM
        (``cute_gemm.mixed_gemm``'s ``activation``)."""
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"{_WHERE}: input must be a torch.Tensor; got {type(x).__name__}")
        k = self.in_features
        if x.dim() < 1 or x.shape[-1] != k:
            raise ValueError(f"{_WHERE}: input must have shape [..., in_features] with "
                             f"in_features={k}; got {list(x.shape)}")
        if not x.is_floating_point():
            raise TypeError(f"{_WHERE}: input must be a floating-point tensor (fp16, bf16, fp32 "
                            f"or fp64; computed in the layer's {self.scales.dtype}); got "
                            f"{x.dtype}")
        scales = self.scales
        out_dtype = x.dtype
        if x.dtype != scales.dtype:
            x = x.to(scales.dtype)
        if x.device != self.qweight.device:
            raise ValueError(f"{_WHERE}: input must be on the layer's device "
                             f"{self.qweight.device}; got {x.device}")
        if torch.is_grad_enabled() and (scales.requires_grad or (
                self.zeros is not None and self.zeros.requires_grad)):
            raise RuntimeError(
                f"{_WHERE}: scales/zeros require grad, but the quantized weight cannot be "
                f"trained (it is rounded to {self.bits}-bit integers); call "
                f"layer.scales.requires_grad_(False) and train adapters on top of the layer")
        if self.input_perm is not None:
            x = x.index_select(-1, self.input_perm)
        lead = x.shape[:-1]
        x2d = x.reshape(-1, k).contiguous()
        if not torch.compiler.is_compiling() and x2d.data_ptr() % 16 != 0:
            x2d = x2d.clone()  # a view at an odd element offset; the kernel needs 16-byte rows
        schedule = None
        # (getattr: layers unpickled from before pins existed.) Compared, not looked up, so that
        # a symbolic row count under torch.compile becomes a guard rather than a dict key.
        for rows, text in getattr(self, "_schedules", {}).items():
            if x2d.shape[0] == rows:
                schedule = text
        out = torch.ops.cute_gemm.mixed_gemm.default(
            x2d, self.qweight, scales, self.zeros, self.bits, self.group_size, k, self.bias,
            schedule, activation)
        return out.reshape(*lead, out.shape[-1]).to(out_dtype)

    # ---------------------------------------------------------------------- dtype and device

    def _apply(self, fn, recurse=True):
        """Moves and converts like any module, except that the layer never leaves half
        precision: a conversion to fp32/fp64 (``.float()``, ``.double()``, ``.to(torch.float32)``)
        is undone for the scales, zero points and bias (exactly: half -> fp32 -> half is
        lossless), so the layer keeps working with half inputs."""
        dtype = self.scales.dtype
        super()._apply(fn, recurse)
        if self.scales.dtype not in _HALF_DTYPES:
            for name in ("scales", "zeros", "bias"):
                t = self._buffers.get(name)
                if t is not None:
                    self._buffers[name] = t.to(dtype)
        return self

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs):
        """Checks the layer's entries before anything is copied: the format tag, ``qweight``'s
        dtype and shape, the symmetric/asymmetric kind, the scales'/zeros'/bias' dtypes, the
        values of ``zeros`` (integers in ``[0, 2^bits)``) and of ``input_perm`` (a permutation
        of ``range(K)``) and that the scales are finite. Any mismatch is reported through torch's
        ``error_msgs`` (``load_state_dict`` raises, whatever ``strict`` is) and nothing of this
        layer is loaded."""
        errors = []
        tag_key = prefix + "qformat"
        n, k = self.out_features, self.in_features
        tag = state_dict.get(tag_key)
        if tag is None:
            if packed_shape(n, k, 4) == packed_shape(n, k, 8):
                errors.append(
                    f"the state dict has no {tag_key!r} format tag, and with in_features={k} "
                    f"(<= 64) INT4 and INT8 packed buffers have the same shape, so the bit width "
                    f"of its qweight cannot be checked; save the layer again with this version "
                    f"of cute_gemm, or load the file with cute_gemm.load_quantized (which reads "
                    f"the settings from the file's metadata)")
        else:
            why = format_tag_mismatch(tag, self.bits, self.group_size, self.symmetric)
            if why is not None:
                errors.append(f"{tag_key!r} does not match this layer: {why}. Build the layer "
                              f"with the checkpoint's settings (cute_gemm.load_quantized reads "
                              f"them from the file)")
        saved = state_dict.get(prefix + "qweight")
        want = packed_shape(n, k, self.bits)
        if saved is not None and (not isinstance(saved, torch.Tensor)
                                  or saved.dtype != torch.int32 or tuple(saved.shape) != want):
            errors.append(
                f"qweight must be an int32 tensor of shape {list(want)} (the packed "
                f"{self.bits}-bit weight); got {_describe(saved)}. Packed words converted to "
                f"another dtype (e.g. by .half() or .float() on the state dict) cannot be "
                f"recovered")
        zeros_key = prefix + "zeros"
        if (zeros_key in state_dict) != (self.zeros is not None):
            kind = "asymmetric" if zeros_key in state_dict else "symmetric"
            errors.append(
                f"the checkpoint's layer is {kind} but this layer is "
                f"{'symmetric' if self.zeros is None else 'asymmetric'}; build it with "
                f"symmetric={kind == 'symmetric'} (cute_gemm.load_quantized reads the settings "
                f"from the file)")
        assign = local_metadata.get("assign_to_params_buffers", False)
        for name in ("scales", "zeros", "bias"):
            own, value = self._buffers.get(name), state_dict.get(prefix + name)
            if own is None or value is None:
                continue
            if not isinstance(value, torch.Tensor) or not value.is_floating_point():
                errors.append(f"{name} must be a floating-point tensor; got {_describe(value)}")
            elif not assign and value.dtype != own.dtype:
                errors.append(
                    f"{name} in the checkpoint is {value.dtype} but this layer's is {own.dtype}; "
                    f"build the layer with dtype={value.dtype} (converting on load would change "
                    f"the dequantized weight)")
            elif name == "scales" and not bool(torch.isfinite(value).all()):
                errors.append("scales must be finite; the checkpoint's hold NaN or inf")
            elif name == "zeros":
                qmax = (1 << self.bits) - 1
                z = value.float()
                if not bool(((z == z.round()) & (z >= 0) & (z <= qmax)).all()):
                    errors.append(f"zeros must hold integer zero points in [0, {qmax}] for "
                                  f"bits={self.bits}; the checkpoint's do not")
        perm_key = prefix + "input_perm"
        perm = state_dict.get(perm_key)
        if perm is not None:
            mismatch = _perm_mismatch(perm, k)
            if mismatch is not None:
                errors.append(f"input_perm {mismatch[1]}")
        if errors:
            error_msgs.extend(f"{_WHERE} {prefix[:-1]!r}: {e}" for e in errors)
            return  # nothing of this layer is copied
        if perm is not None and self.input_perm is None:
            # An act-order checkpoint: create the buffer so that the load fills it.
            self.input_perm = torch.empty((k,), dtype=torch.int64, device=self.qweight.device)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys,
                                      unexpected_keys, error_msgs)
        if assign:
            # assign=True keeps the state dict's tensors, which may be views into a file's
            # memory map (safetensors aligns tensor data to 8 bytes only) or non-contiguous; the
            # kernel reads 16-byte aligned contiguous buffers.
            for name, t in list(self._buffers.items()):
                if t is not None and t.device.type != "meta":
                    self._buffers[name] = _kernel_ready(t)
        if tag is None and tag_key in missing_keys:
            # Saved before the tag existed; qweight's shape is unambiguous, so the layer's own
            # tag stands.
            missing_keys.remove(tag_key)


def _describe(value):
    if isinstance(value, torch.Tensor):
        return f"a {value.dtype} tensor of shape {list(value.shape)}"
    return type(value).__name__


def _perm_mismatch(perm, k):
    """``(exception type, why)`` when ``perm`` is not a permutation of ``range(k)`` held in an
    integer tensor, else None."""
    if not isinstance(perm, torch.Tensor) or perm.dtype not in _INT_DTYPES:
        return TypeError, f"must be an integer torch.Tensor; got {_describe(perm)}"
    if tuple(perm.shape) != (k,):
        return ValueError, f"must have shape [K] = [{k}]; got {list(perm.shape)}"
    if not torch.equal(perm.detach().to(torch.int64).sort().values,
                       torch.arange(k, device=perm.device)):
        return ValueError, f"must be a permutation of 0..{k - 1} (each index exactly once)"
    return None


def _check_perm(perm, k, device):
    mismatch = _perm_mismatch(perm, k)
    if mismatch is not None:
        error, why = mismatch
        raise error(f"{_WHERE}.from_quantized: input_perm {why}")
    return perm.detach().to(device=device, dtype=torch.int64).contiguous()
