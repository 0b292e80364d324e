"""Cross-layer L2 prefetch: a decoder layer's attention output projection asks L2 for part of its
MLP's gate/up weights (``QuantLinear.set_l2_prefetch``).

Why there: at decode batch sizes the decode attention kernel is bound by latency (a few tiles of
cached positions per warp, ~10 us a layer on an H100 at batch 1) and lets the next kernel, the
output projection, launch at its start. That GEMM streams its own small weight and then waits on
the attention, so DRAM idles for most of the attention. The next large read is the MLP's gate/up
weight (58 MB for Llama-3-8B in INT4); asking L2 for its first part from the projection's CTAs,
before they wait, moves that part of the layer's largest stream into the idle window. L2 holds
it until the gate/up GEMM reads it a few microseconds later (that GEMM streams with an
evict-first policy, so its own lines leave L2 before the prefetched ones).

``max_bytes`` trades the bytes moved against what L2 keeps: the default is half of the device's
L2 (25 MB on an H100, 30 MB on an H200). A hint only: the outputs are bit-identical with or
without it.
"""

import torch

from .nn import QuantLinear

__all__ = ["chain_l2_prefetch", "default_l2_prefetch_bytes"]


def default_l2_prefetch_bytes(device):
    """Half of ``device``'s L2 cache (a CUDA device), in bytes."""
    return torch.cuda.get_device_properties(torch.device(device)).L2_cache_size // 2


def _first_quant(module, names):
    for name in names:
        layer = getattr(module, name, None)
        if isinstance(layer, QuantLinear):
            return name, layer
    return None, None


def chain_l2_prefetch(model, max_bytes=None):
    """Links, in every decoder layer of ``model`` (a module with ``self_attn`` and ``mlp``
    children, as transformers' Llama, Mistral and Qwen2/Qwen3 layers have), the attention's
    ``o_proj`` to the MLP's ``gate_up_proj`` (``quantize_model(..., fuse=True)``), or to its
    ``gate_proj`` when unfused, when both are ``QuantLinear`` on one device: the projection
    then prefetches the first ``max_bytes`` of that weight (default, on a CUDA device:
    ``default_l2_prefetch_bytes``; off CUDA only an explicit ``max_bytes`` links, and the
    forward ignores the link there). ``max_bytes=0`` removes every link instead.

    Returns the ``(o_proj path, target path)`` pairs linked (or unlinked); layers of other
    shapes are left as they are. A runtime setting (``QuantLinear.set_l2_prefetch``): not saved
    with the model; call it again after ``load_quantized``."""
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"chain_l2_prefetch: model must be a torch.nn.Module; got "
                        f"{type(model).__name__}")
    if max_bytes is not None and (isinstance(max_bytes, bool) or not isinstance(max_bytes, int)
                                  or (max_bytes != 0 and max_bytes < 16)):
        raise ValueError(f"chain_l2_prefetch: max_bytes must be None, 0 (unlink) or an int >= 16;"
                         f" got {max_bytes!r}")
    links = []
    for path, layer in model.named_modules():
        attn, mlp = getattr(layer, "self_attn", None), getattr(layer, "mlp", None)
        if not isinstance(attn, torch.nn.Module) or not isinstance(mlp, torch.nn.Module):
            continue
        o_proj = getattr(attn, "o_proj", None)
        name, target = _first_quant(mlp, ("gate_up_proj", "gate_proj"))
        if not isinstance(o_proj, QuantLinear) or target is None:
            continue
        device = o_proj.qweight.device
        if target.qweight.device != device:
            continue
        if max_bytes == 0:
            o_proj.set_l2_prefetch(None, 0)
        elif max_bytes is not None:
            o_proj.set_l2_prefetch(target, max_bytes)
        elif device.type == "cuda":
            o_proj.set_l2_prefetch(target, default_l2_prefetch_bytes(device))
        else:
            continue  # no default off CUDA (the forward ignores the link there anyway)
        prefix = f"{path}." if path else ""
        links.append((f"{prefix}self_attn.o_proj", f"{prefix}mlp.{name}"))
    return links
