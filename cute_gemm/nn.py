"""``QuantLinear``: a drop-in replacement for ``torch.nn.Linear`` whose weight is stored as INT4 or
INT8 in the mixed-input GEMM's packed format and multiplied by ``cute_gemm.mixed_gemm``.

The layer is an inference layer: everything it holds (packed weight, scales, zero points, bias,
input permutation) is a *buffer*, so it has no parameters, ``state_dict`` saves and loads it like
any module, and ``.to()``/``.cuda()``/``.half()`` move it. Gradients flow to the layer's *input*,
so adapters trained on top of a frozen quantized model (LoRA and the like) work; the quantized
weight itself cannot be trained (there is no ``weight`` to train: see ``QuantLinear.__getattr__``).

Dtype rule: the layer computes in the dtype of its scales, torch.float16 or torch.bfloat16, and
its input must have that dtype. ``.half()`` and ``.bfloat16()`` (and ``.to(dtype)`` with either)
convert the scales, zero points and bias; ``.float()``, ``.double()`` and ``.to(torch.float32)``
leave the layer in its half dtype (the kernel has no fp32 path, and converting only the
metadata would produce a layer that fails at its next call), so ``model.float()`` on a model with
quantized layers converts every other layer and keeps these ones working in half precision.
"""

import torch

from .quant import (
    SUPPORTED_BITS, SUPPORTED_GROUP_SIZES, QuantizedWeight, packed_shape, quantize)

__all__ = ["QuantLinear", "unsupported_reason"]

_HALF_DTYPES = (torch.float16, torch.bfloat16)
_WHERE = "QuantLinear"


def unsupported_reason(out_features, in_features, group_size):
    """Why the kernel cannot take an ``[out_features, in_features]`` weight with this group size,
    or ``None`` when it can.

    The mixed-input kernel works on blocks of 8 output channels (N % 8 == 0) and needs whole
    quantization groups along K (K % group_size == 0; per-channel, group_size=-1, needs
    K % 32 == 0). ``cute_gemm.quantize_model`` uses the reason to explain the layers it keeps.
    """
    if out_features % 8 != 0:
        return f"out_features={out_features} is not a multiple of 8"
    if group_size == -1:
        if in_features % 32 != 0:
            return (f"in_features={in_features} is not a multiple of 32 (needed for per-channel "
                    f"quantization, group_size=-1)")
    elif in_features % group_size != 0:
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
    if isinstance(bits, bool) or bits not in SUPPORTED_BITS:
        raise ValueError(f"{_WHERE}: bits must be 4 or 8; got bits={bits!r}")
    if isinstance(group_size, bool) or group_size not in SUPPORTED_GROUP_SIZES:
        raise ValueError(f"{_WHERE}: group_size must be one of 32, 64, 128 or -1 (per-channel); "
                         f"got group_size={group_size!r}")
    if dtype not in _HALF_DTYPES:
        raise ValueError(f"{_WHERE}: dtype must be torch.float16 or torch.bfloat16 (the "
                         f"activation dtype the kernel computes in); got {dtype}")
    reason = unsupported_reason(out_features, in_features, group_size)
    if reason is not None:
        raise ValueError(f"{_WHERE}: the kernel cannot take this shape: {reason}")


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
        dtype: the activation dtype, torch.float16 or torch.bfloat16: the dtype of the scales,
            zero points, bias, the input and the output.
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
        _check_config(in_features, out_features, bits, group_size, dtype)
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
        groups = in_features // (in_features if group_size == -1 else group_size)
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

    # ------------------------------------------------------------------------------ builders

    @classmethod
    def from_linear(cls, linear, bits=4, group_size=128, symmetric=True, dtype=None):
        """Quantizes ``linear``'s weight with ``cute_gemm.quantize``; keeps its bias.

        The layer's dtype (of scales, bias and the expected input) is ``dtype`` when given, else
        the weight's dtype when it is fp16 or bf16, else torch.float16 (an fp32 layer's weight
        is quantized from its fp32 values, its bias rounded to fp16; feed the result fp16
        inputs). The result is on the weight's device and in ``linear``'s training mode.
        """
        if not isinstance(linear, torch.nn.Linear):
            raise TypeError(f"{_WHERE}.from_linear: linear must be a torch.nn.Linear; got "
                            f"{type(linear).__name__}")
        weight = linear.weight
        if dtype is None:
            dtype = weight.dtype if weight.dtype in _HALF_DTYPES else torch.float16
        n, k = weight.shape
        _check_config(k, n, bits, group_size, dtype)
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
        if name == "weight":
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
        group = "per-channel" if self.group_size == -1 else str(self.group_size)
        text = (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}, bits={self.bits}, group_size={group}, "
                f"symmetric={self.symmetric}, dtype={self.scales.dtype}")
        if self.input_perm is not None:
            text += ", input_perm=True"
        return text

    # ------------------------------------------------------------------------------- forward

    def forward(self, x):
        """``x[..., K] -> [..., N]``; ``x`` in the layer's dtype, on its device, any leading
        dims (including empty ones). Non-contiguous or misaligned inputs are copied first."""
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"{_WHERE}: input must be a torch.Tensor; got {type(x).__name__}")
        k = self.in_features
        if x.dim() < 1 or x.shape[-1] != k:
            raise ValueError(f"{_WHERE}: input must have shape [..., in_features] with "
                             f"in_features={k}; got {list(x.shape)}")
        scales = self.scales
        if x.dtype != scales.dtype:
            raise TypeError(
                f"{_WHERE}: input must have the layer's dtype {scales.dtype}; got {x.dtype}. "
                f"Cast the input (x.to({scales.dtype})) or the layer (.half() / .bfloat16()); "
                f"the layer has no fp32 path (.float() leaves it in half precision)")
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
        out = torch.ops.cute_gemm.mixed_gemm.default(
            x2d, self.qweight, scales, self.zeros, self.bits, self.group_size, k, self.bias)
        return out.reshape(*lead, self.out_features)

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
        perm_key = prefix + "input_perm"
        if perm_key in state_dict and self.input_perm is None:
            # An act-order checkpoint: create the buffer so that the load fills it.
            perm = state_dict[perm_key]
            self.input_perm = torch.empty(tuple(perm.shape), dtype=torch.int64,
                                          device=self.qweight.device)
        zeros_key = prefix + "zeros"
        if (zeros_key in state_dict) != (self.zeros is not None):
            saved = "asymmetric" if zeros_key in state_dict else "symmetric"
            error_msgs.append(
                f"{_WHERE} {prefix[:-1]!r}: the checkpoint's layer is {saved} but this layer is "
                f"{'symmetric' if self.zeros is None else 'asymmetric'}; build it with "
                f"symmetric={saved == 'symmetric'} (cute_gemm.load_quantized reads the settings "
                f"from the file)")
        assign = local_metadata.get("assign_to_params_buffers", False)
        for name in ("scales", "zeros", "bias"):
            key, own = prefix + name, self._buffers.get(name)
            saved = state_dict.get(key)
            if (not assign and own is not None and isinstance(saved, torch.Tensor)
                    and saved.dtype != own.dtype):
                error_msgs.append(
                    f"{_WHERE} {prefix[:-1]!r}: {name} in the checkpoint is {saved.dtype} but "
                    f"this layer's is {own.dtype}; build the layer with dtype={saved.dtype} "
                    f"(converting on load would change the dequantized weight)")
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys,
                                      unexpected_keys, error_msgs)


def _describe(value):
    if isinstance(value, torch.Tensor):
        return f"a {value.dtype} tensor"
    return type(value).__name__


def _check_perm(perm, k, device):
    where = f"{_WHERE}.from_quantized"
    if not isinstance(perm, torch.Tensor) or perm.is_floating_point() or perm.is_complex() \
            or perm.dtype == torch.bool:
        raise TypeError(f"{where}: input_perm must be None or an integer torch.Tensor; got "
                        f"{_describe(perm)}")
    if tuple(perm.shape) != (k,):
        raise ValueError(f"{where}: input_perm must have shape [K] = [{k}]; got "
                         f"{list(perm.shape)}")
    perm = perm.detach().to(device=device, dtype=torch.int64)
    if not torch.equal(perm.sort().values, torch.arange(k, device=device)):
        raise ValueError(f"{where}: input_perm must be a permutation of 0..{k - 1} (each index "
                         f"exactly once)")
    return perm.contiguous()
