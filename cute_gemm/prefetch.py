"""L2 prefetch chains: while one quantized layer's GEMM runs, the GPU's L2 cache fetches the start
of the next layer's weight.

Why: at batch 1 a decoder layer alternates weight streams (its GEMMs) with kernels that barely
touch DRAM (rotary embedding, the KV-cache update, attention, norms). Each GEMM after such a gap
waits for DRAM from its first byte, and a small GEMM is mostly that wait. A GEMM that streams its
own weight below the DRAM's rate has time to spare for the next GEMM's bytes; with them in the L2
the next GEMM starts from the L2. ``cute_gemm.mixed_gemm``'s ``prefetch`` argument carries the
bytes, ``QuantLinear.set_prefetch`` links one layer to the next, and ``chain`` links a whole model
in the order its forward calls its layers.

    >>> cute_gemm.quantize_model(model, bits=4, fuse=True)
    >>> chain = cute_gemm.prefetch.chain(model, input_ids[:, :1])  # one recorded forward
    >>> print(chain)   # which layer prefetches which, and how many bytes

The links are plain references, outside ``state_dict``; a copy of the model (``deepcopy``,
pickling) drops them, so chain the copy again. Chain the eager model, before ``torch.compile``:
the compiled graph reads the links like any attribute.
"""

from dataclasses import dataclass, field

import torch

from .nn import QuantLinear

__all__ = ["DEFAULT_MAX_BYTES", "PrefetchChain", "PrefetchLink", "chain", "links", "unchain"]

# How much of the next layer's weight a layer asks for, at most. A CTA retires only once its
# share has arrived, so the prefetch must fit in what the GEMM's own run leaves of the DRAM's
# time; the value is the one measured best in the 32-layer model at batch 1 (NOTES.md, session 26).
DEFAULT_MAX_BYTES = 16 << 20


@dataclass(frozen=True)
class PrefetchLink:
    """``layer`` asks the L2 for the first ``nbytes`` of ``next``'s weight (module names)."""
    layer: str
    next: str
    nbytes: int


@dataclass
class PrefetchChain:
    """What ``chain`` did: the links in call order, and the quantized layers left out with why."""
    links: list = field(default_factory=list)
    not_linked: dict = field(default_factory=dict)  # name -> reason

    def __str__(self):
        lines = [f"{len(self.links)} prefetch links"]
        lines += [f"  {link.layer} -> {link.next}: {link.nbytes / 2**20:.1f} MiB"
                  for link in self.links]
        lines += [f"  {name}: {why}" for name, why in self.not_linked.items()]
        return "\n".join(lines)


def _quantized_layers(model):
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"cute_gemm.prefetch: model must be a torch.nn.Module; got "
                        f"{type(model).__name__}")
    layers = {}
    for name, module in model.named_modules():
        if isinstance(module, QuantLinear) and module not in layers:
            layers[module] = name
    return layers


def unchain(model):
    """Removes every prefetch link of the model's ``QuantLinear`` layers; returns how many."""
    removed = 0
    for layer in _quantized_layers(model):
        if layer.prefetch is not None:
            layer.set_prefetch(None)
            removed += 1
    return removed


def links(model):
    """The model's current links (``PrefetchLink``), in ``named_modules`` order."""
    layers = _quantized_layers(model)
    out = []
    for layer, name in layers.items():
        link = layer.prefetch
        if link is not None:
            out.append(PrefetchLink(name, layers.get(link[0], "<not in this model>"), link[1]))
    return out


def chain(model, *args, max_bytes=DEFAULT_MAX_BYTES, **kwargs):
    """Links each ``QuantLinear`` of ``model`` to the one its forward calls next.

    Runs ``model(*args, **kwargs)`` once under ``torch.no_grad()`` and records the order in which
    the quantized layers are first called (forward pre-hooks, removed afterwards); then each layer
    prefetches the first ``min(max_bytes, weight bytes)`` of the next one's weight while its own
    GEMM runs (``QuantLinear.set_prefetch``). The last layer called links to nothing. Existing
    links are replaced. If the forward raises, the model is left as it was and the error
    propagates.

    Args:
        model: the module holding the quantized layers (e.g. a transformers model after
            ``cute_gemm.quantize_model``), on the GPU it will run on.
        *args, **kwargs: inputs for one forward; a one-token batch is enough (the call order of
            a decoder's layers does not depend on the length). Pass ``use_cache=False`` to a
            transformers model if its cache must not see this call.
        max_bytes: the cap per link (int >= 0); 0 removes every link.

    Returns:
        A ``PrefetchChain``: ``links`` (``PrefetchLink(layer, next, nbytes)`` in call order) and
        ``not_linked`` (name -> reason: not called by the forward, called last, or its
        successor on another device). On the CPU the links exist but do nothing.
    """
    if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 0:
        raise ValueError(f"cute_gemm.prefetch.chain: max_bytes must be an int >= 0; got "
                         f"{max_bytes!r}")
    layers = _quantized_layers(model)
    if not layers:
        raise ValueError("cute_gemm.prefetch.chain: the model has no QuantLinear layers (quantize "
                         "it first: cute_gemm.quantize_model)")
    order = []
    seen = set()

    def record(module, inputs):
        if module not in seen:
            seen.add(module)
            order.append(module)

    hooks = [layer.register_forward_pre_hook(record) for layer in layers]
    try:
        with torch.no_grad():
            model(*args, **kwargs)
    finally:
        for hook in hooks:
            hook.remove()

    result = PrefetchChain()
    unchain(model)
    for layer, name in layers.items():
        if layer not in seen:
            result.not_linked[name] = "not called by the forward"
    if max_bytes == 0:
        return result
    for layer, nxt in zip(order, order[1:]):
        device = layer.qweight.device
        if nxt.qweight.device != device:
            result.not_linked[layers[layer]] = (f"the next layer ({layers[nxt]}) is on "
                                                f"{nxt.qweight.device}, this one on {device}")
            continue
        layer.set_prefetch(nxt, max_bytes)
        link = layer.prefetch
        if link is not None:
            result.links.append(PrefetchLink(layers[layer], layers[nxt], link[1]))
    if order:
        result.not_linked.setdefault(layers[order[-1]], "called last (nothing follows it)")
    return result
