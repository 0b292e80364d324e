"""cute_gemm: weight-only quantized GEMM for PyTorch on NVIDIA GPUs."""

__version__ = "0.1.0"

import importlib  # noqa: E402
import sys  # noqa: E402

import torch  # noqa: F401,E402  (load torch's shared libraries before the extension)

try:
    from . import _C  # noqa: E402
except ImportError as e:
    raise ImportError(
        "cute_gemm's native extension (cute_gemm._C) could not be imported. Build it from the "
        "repository root with: pip install --no-build-isolation -e .  (A non-editable install is "
        "shadowed by the source tree when imported from the repository root.) Original error: %s"
        % e
    ) from e

from . import layout  # noqa: E402
from .ops import (  # noqa: E402
    DeviceSpec, MixedPlan, decode_attention, device_spec, gemm, mixed_gemm, mixed_plan)
from .quant import (  # noqa: E402
    QuantizedWeight, dequantize, pack_weight, quantize, unpack_weight)
from . import nn  # noqa: E402
from .nn import QuantLinear  # noqa: E402
from .convert import (  # noqa: E402
    QuantizationSummary, load_quantized, quantize_model, save_quantized)
from . import fuse  # noqa: E402
from .fuse import ProjectionSlice  # noqa: E402
from . import checkpoints  # noqa: E402
from .checkpoints import (  # noqa: E402
    awq_linear, awq_to_quantized, gptq_linear, gptq_to_quantized, load_awq_model,
    load_gptq_model)
from . import attention  # noqa: E402
from . import inductor  # noqa: E402
from . import _hf_hook  # noqa: E402

# cute_gemm.hf imports transformers (~1.5 s, more than the rest of cute_gemm), so it is imported
# on first use (__getattr__ below) or right after transformers is: either way it registers
# quant_method "cute_gemm" with transformers >= 5 before from_pretrained can need it.
_HF_NAMES = ("CuteGemmConfig", "load_awq_pretrained", "load_gptq_pretrained")
if sys.modules.get("transformers") is not None:
    from . import hf  # noqa: E402
    hf.register()
else:
    _hf_hook.install()


def __getattr__(name):
    if name != "hf" and name not in _HF_NAMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    # (import_module: "from . import hf" would come back here through hasattr(cute_gemm, "hf").)
    hf = importlib.import_module(".hf", __name__)
    hf.register()
    globals().update({n: getattr(hf, n) for n in _HF_NAMES}, hf=hf)
    return globals()[name]


def __dir__():
    return sorted(set(globals()) | set(__all__))


__all__ = ["__version__", "attention", "awq_linear", "awq_to_quantized", "checkpoints",
           "CuteGemmConfig", "decode_attention", "dequantize", "device_spec", "DeviceSpec", "fuse",
           "gemm", "gptq_linear", "gptq_to_quantized", "hf", "inductor", "layout", "load_awq_model",
           "load_awq_pretrained", "load_gptq_model", "load_gptq_pretrained", "load_quantized",
           "mixed_gemm", "mixed_plan", "MixedPlan", "nn", "pack_weight", "ProjectionSlice",
           "QuantizationSummary", "quantize", "quantize_model", "QuantizedWeight", "QuantLinear",
           "save_quantized", "unpack_weight"]
