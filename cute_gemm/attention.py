"""The decode attention kernel (``cute_gemm.decode_attention``) as a transformers attention
implementation.

transformers' ``"sdpa"`` implementation copies a model's whole key/value cache to the query heads
at every layer of every step (``repeat_kv``, G times the cache's bytes for G query heads per
key/value head) whenever there is a mask, which a static cache always has, and always under
torch.compile (transformers 5.24 folds the heads of a single query position instead, in eager
mode only). At batch 16 on a Llama-3-8B shape that copy is most of a decode step.
``cute_gemm.decode_attention`` reads the cache where it lies and skips the positions the mask
excludes.

    import cute_gemm.attention
    cute_gemm.attention.use_decode_attention(model)   # any transformers model on AttentionInterface

registers the implementation ``"cute_gemm"`` (its mask is sdpa's) and switches the model to it.
Calls it does not take go to transformers' sdpa function unchanged: a prefill (more than
``MAX_QUERY_LEN`` query positions, or several with no mask: causal), dropout, soft-capping or
attention sinks, a head dim that is not a multiple of 8 up to 256, a key/value layout whose rows
are not 16-byte vectors. ``decode_attention_reason`` says which of those applies to a call.
transformers is imported only when these functions run.

The decode step in one kernel (``append=True``, the default): a decode step's attention block is
the q/k/v projections, the rotary embedding of q and k, the static cache's update (its position
counter, the key and value rows) and the attention: at batch 1 the four small kernels between the
projections and the attention cost about as much as the attention. Attention modules of the
recognized families (``APPEND_FAMILIES``) whose forward, rotary embedding and ``rotate_half`` are
exactly a known transformers version's (compared by ``ast``, ``append_reason``) get an instance
forward that runs ``cute_gemm.decode_attention_append`` when a call is one query position per
sequence on a ``StaticLayer`` of a static cache (``append_call_reason``), and the class's forward
otherwise (prefill, other caches, training). The class and other models are untouched.
"""

import ast
import functools
import hashlib
import inspect
import sys
import textwrap

import torch

from .ops import decode_attention, decode_attention_append

__all__ = ["NAME", "MAX_QUERY_LEN", "APPEND_FAMILIES", "append_call_reason", "append_reason",
           "attention_forward", "decode_attention_reason", "register", "use_decode_attention"]

NAME = "cute_gemm"
# Query positions per call up to which the kernel runs (decode, speculative verification): each
# position is a CTA of its own, so a prefill goes to sdpa.
MAX_QUERY_LEN = 16
_MASK_DTYPES = (torch.bool, torch.float16, torch.bfloat16, torch.float32)
# Keyword arguments of attention functions that change the formula (Gemma 2's soft-capping,
# gpt-oss's sinks): with a value other than None the call goes to sdpa.
_FORMULA_KWARGS = ("softcap", "s_aux", "sinks")


def _rows_are_vectors(t):
    """Whether the kernel's 16-byte row loads fit t [B, Hkv, L, D] (its alignment is torch's:
    caches are allocated, not offset views)."""
    return (t.stride(3) == 1 or t.shape[3] == 1) and all(
        t.shape[d] == 1 or t.stride(d) % 8 == 0 for d in range(3))


def decode_attention_reason(query, key, value, attention_mask, dropout=0.0, **kwargs):
    """None when ``attention_forward`` runs the decode kernel for this call, otherwise why it
    calls transformers' sdpa function instead."""
    q_len, head_dim = query.shape[2], query.shape[3]
    if q_len > MAX_QUERY_LEN:
        return f"{q_len} query positions (a prefill: more than {MAX_QUERY_LEN})"
    if attention_mask is None and q_len > 1:
        return "several query positions without a mask (causal)"
    if dropout:
        return f"dropout {dropout}"
    for name in _FORMULA_KWARGS:
        if kwargs.get(name) is not None:
            return f"{name} (not in the kernel's formula)"
    if head_dim % 8 != 0 or head_dim > 256 or value.shape[-1] != head_dim:
        return f"head dim {head_dim} / value dim {value.shape[-1]} (the kernel: equal, a " \
               "multiple of 8 up to 256)"
    if query.dtype not in (torch.float16, torch.bfloat16) or key.dtype != query.dtype:
        return f"dtype {query.dtype} (the kernel: float16 or bfloat16)"
    if attention_mask is not None and (attention_mask.dtype not in _MASK_DTYPES
                                       or attention_mask.dim() != 4):
        return f"a {attention_mask.dim()}-D {attention_mask.dtype} mask"
    if key.dim() != 4 or not (_rows_are_vectors(key) and _rows_are_vectors(value)):
        return "key/value rows that are not contiguous 16-byte vectors"
    return None


def attention_forward(module, query, key, value, attention_mask, dropout=0.0, scaling=None,
                      is_causal=None, **kwargs):
    """A transformers attention function (``AttentionInterface``): ``query`` [B, H, Lq, D],
    ``key`` / ``value`` [B, Hkv, L, D] (the cache), returns ([B, Lq, H, D], None). Runs
    ``cute_gemm.decode_attention`` where ``decode_attention_reason`` finds nothing, otherwise
    transformers' sdpa function with the same arguments."""
    if decode_attention_reason(query, key, value, attention_mask, dropout, **kwargs) is None:
        return decode_attention(query, key, value, attention_mask, scale=scaling), None
    from transformers.integrations.sdpa_attention import sdpa_attention_forward
    return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout,
                                  scaling=scaling, is_causal=is_causal, **kwargs)


def register():
    """Registers ``NAME`` with transformers' AttentionInterface (this module's function) and
    AttentionMaskInterface (sdpa's mask: bool, True takes part). Idempotent."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask
    AttentionInterface.register(NAME, attention_forward)
    AttentionMaskInterface.register(NAME, sdpa_mask)


def use_decode_attention(model, append=True):
    """Switches a transformers model (and its sub-models) to the ``"cute_gemm"`` attention
    implementation; returns the model. Raises ValueError, leaving the model as it was, when the
    model does not take attention implementations through AttentionInterface (its attention
    modules would keep their own code).

    append: give the attention modules that ``append_reason`` accepts the forward that runs a
    decode step's rotary embedding, cache update and attention in one kernel (see the module
    docstring); False leaves every forward as it is (and removes this function's earlier ones).
    """
    register()
    config = getattr(model, "config", None)
    setter = getattr(model, "set_attn_implementation", None)
    if config is None or setter is None:
        raise ValueError("use_decode_attention needs a transformers PreTrainedModel (with .config "
                         f"and set_attn_implementation); got {type(model).__name__}")
    before = config._attn_implementation
    can_set = getattr(model, "_can_set_attn_implementation", None)
    if can_set is not None and not can_set():
        raise ValueError(f"{type(model).__name__} does not dispatch attention through "
                         "transformers' AttentionInterface, so it cannot use the cute_gemm "
                         f"attention; it stays on '{before}'")
    setter(NAME)
    if config._attn_implementation != NAME:
        setter(before)
        raise ValueError(f"{type(model).__name__} did not switch to the cute_gemm attention "
                         f"(it reports '{config._attn_implementation}'); it stays on '{before}'")
    for module in model.modules():
        if getattr(module.__dict__.get("forward"), "func", None) is _append_forward:
            del module.__dict__["forward"]
        if append and append_reason(module) is None:
            from transformers.cache_utils import StaticLayer
            # A partial, not a bound method: it pickles and deep-copies with its module.
            module.forward = functools.partial(_append_forward, module,
                                               _cache_arg=_cache_arg(type(module)),
                                               _static_layer=StaticLayer)
    return model


# ------------------------------------------------------------------- the decode step in one kernel

# Attention classes whose decode step can run in decode_attention_append, and the fingerprints
# (_fingerprint) of the forwards of the transformers versions checked to compute
#   q, k, v = projections of hidden_states viewed [B, heads, L, D]; q, k rotated by
#   position_embeddings (apply_rotary_pos_emb); k, v appended by the cache's update;
#   attention_interface(...) with the module's scaling; o_proj of the result reshaped
# (transformers 5.17 and 5.24; Mistral and Qwen2 add the sliding window argument, which the mask
# already encodes). Qwen3 normalizes q and k first: not covered.
APPEND_FAMILIES = {
    "LlamaAttention": frozenset({"0e59d76292b5dc3e", "1b08c1cc014b2e25"}),
    "MistralAttention": frozenset({"fb7a65d9e7d01555", "ede8b27a08686cb6"}),
    "Qwen2Attention": frozenset({"034e3524820fa6e7", "a74264824724ab88"}),
}
# The rotary embedding those forwards call (x * cos + rotate_half(x) * sin, rotate_half turning
# the two halves of D): the kernel's formula. The same in both versions.
_ROTARY_FINGERPRINTS = {"apply_rotary_pos_emb": "f84c6b5c15d2838e",
                        "rotate_half": "37585229fef0335d"}


def _fingerprint(function):
    """A digest of a function's parameter names and body (ast, without docstring, decorators or
    annotations), or None where its source cannot be read."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    except (OSError, TypeError, SyntaxError):
        return None
    fn = tree.body[0] if tree.body else None
    if not isinstance(fn, ast.FunctionDef):
        return None
    body = list(fn.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    names = [a.arg for a in fn.args.args] + (["**" + fn.args.kwarg.arg] if fn.args.kwarg else [])
    text = repr(names) + "".join(ast.dump(node, annotate_fields=False) for node in body)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@functools.lru_cache(maxsize=None)
def _class_reason(cls):
    known = APPEND_FAMILIES.get(cls.__name__)
    if known is None:
        return f"{cls.__name__} is not a recognized attention module ({', '.join(APPEND_FAMILIES)})"
    if _fingerprint(cls.forward) not in known:
        return (f"{cls.__name__}.forward is not a known transformers version's (read from its "
                f"source)")
    module = sys.modules.get(cls.__module__)
    for name, digest in _ROTARY_FINGERPRINTS.items():
        if _fingerprint(getattr(module, name, None)) != digest:
            return f"{cls.__module__}.{name} is not the known rotary embedding"
    if _cache_arg(cls) is None:
        return f"{cls.__name__}.forward's parameters are not the known ones"
    return None


@functools.lru_cache(maxsize=None)
def _cache_arg(cls):
    """The name of the forward's cache parameter (past_key_values, or cache in newer versions),
    after (self, hidden_states, position_embeddings, attention_mask); None for other lists."""
    try:
        names = list(inspect.signature(cls.forward).parameters)
    except (TypeError, ValueError):
        return None
    head = ["self", "hidden_states", "position_embeddings", "attention_mask"]
    if names[:4] != head or len(names) < 5 or names[4] not in ("past_key_values", "cache"):
        return None
    return names[4]


def append_reason(module):
    """None when ``use_decode_attention`` gives ``module`` the one-kernel decode step, otherwise
    why not."""
    reason = _class_reason(type(module))
    if reason is not None:
        return reason
    for name in ("q_proj", "k_proj", "v_proj", "o_proj"):
        if not callable(getattr(module, name, None)):
            return f"it has no {name}"
    if not isinstance(getattr(module, "head_dim", None), int):
        return "it has no integer head_dim"
    if not isinstance(getattr(module, "scaling", None), float):
        return "it has no float scaling"
    forward = module.__dict__.get("forward")
    if forward is not None and getattr(forward, "func", None) is not _append_forward:
        return "its forward is already replaced on the instance"
    return None


def append_call_reason(module, hidden_states, position_embeddings, attention_mask, cache,
                       kwargs):
    """None when this call of a module with the one-kernel forward (the forward's arguments:
    ``kwargs`` those past the cache) runs ``decode_attention_append``, otherwise why it runs the
    class's forward."""
    from transformers.cache_utils import StaticLayer
    return _call_reason(module, hidden_states, position_embeddings, attention_mask, cache, kwargs,
                        StaticLayer)


def _call_reason(module, hidden_states, position_embeddings, attention_mask, cache, kwargs,
                 static_layer):
    if module.training:
        return "training mode"
    if module.config._attn_implementation != NAME:
        return f"the attention implementation is {module.config._attn_implementation!r}"
    if hidden_states.dim() != 3 or hidden_states.shape[1] != 1:
        return f"hidden_states {list(hidden_states.shape)} (one position per sequence: [B, 1, E])"
    if position_embeddings is None:
        return "no position_embeddings"
    if cache is None or getattr(cache, "offloading", False):
        return "no cache" if cache is None else "an offloading cache"
    layers = getattr(cache, "layers", None)
    layer_idx = getattr(module, "layer_idx", None)
    if not isinstance(layer_idx, int) or layers is None or not 0 <= layer_idx < len(layers):
        return "no cache layer for this module"
    layer = layers[layer_idx]
    if type(layer) is not static_layer:
        return f"a {type(layer).__name__} (the kernel appends to a StaticLayer)"
    if not getattr(layer, "is_initialized", False):
        return "the cache layer is not allocated yet"
    count = getattr(layer, "cumulative_length", None)
    if not isinstance(count, torch.Tensor) or count.dtype != torch.int64 or count.numel() != 1 \
            or count.device != hidden_states.device:
        return "the cache layer has no int64 position count on the model's device"
    for name in _FORMULA_KWARGS:
        if kwargs.get(name) is not None:
            return f"{name} (not in the kernel's formula)"
    keys, values, dtype = layer.keys, layer.values, hidden_states.dtype
    head_dim = module.head_dim
    if dtype not in (torch.float16, torch.bfloat16) or keys.dtype != dtype \
            or values.dtype != dtype:
        return f"dtype {dtype} / cache {keys.dtype} (the kernel: one of float16, bfloat16)"
    if head_dim % 8 != 0 or head_dim > 256 or keys.dim() != 4 or keys.shape[3] != head_dim \
            or values.shape != keys.shape or keys.shape[0] != hidden_states.shape[0]:
        return f"head dim {head_dim} with a cache of shape {list(keys.shape)}"
    if not (_rows_are_vectors(keys) and _rows_are_vectors(values)):
        return "key/value rows that are not contiguous 16-byte vectors"
    if attention_mask is not None and (attention_mask.dtype not in _MASK_DTYPES
                                       or attention_mask.dim() != 4):
        return f"a {attention_mask.dim()}-D {attention_mask.dtype} mask"
    cos, sin = position_embeddings
    expected = (hidden_states.shape[0], 1, head_dim)
    for t in (cos, sin):
        if t.dtype != dtype or t.dim() != 3 or t.shape[1:] != expected[1:] \
                or t.shape[0] not in (1, expected[0]):
            return f"position_embeddings {list(t.shape)} {t.dtype} (expected [B, 1, D] {dtype})"
    return None


def _append_forward(module, *args, _cache_arg, _static_layer, **kwargs):
    """The one-kernel forward (a ``functools.partial`` of it on the instance): a decode step runs
    ``decode_attention_append``, any other call the class's forward with the same arguments.
    _cache_arg: the forward's cache parameter; _static_layer: transformers' StaticLayer class."""
    names = ("hidden_states", "position_embeddings", "attention_mask", _cache_arg)
    given = dict(zip(names, args))
    if len(args) > len(names) or any(name in kwargs for name in given):
        return type(module).forward(module, *args, **kwargs)
    given.update({n: kwargs[n] for n in names if n in kwargs})
    rest = {n: v for n, v in kwargs.items() if n not in names}
    hidden_states = given.get("hidden_states")
    cache = given.get(_cache_arg)
    if not isinstance(hidden_states, torch.Tensor) or _call_reason(
            module, hidden_states, given.get("position_embeddings"), given.get("attention_mask"),
            cache, rest, _static_layer) is not None:
        return type(module).forward(module, *args, **kwargs)
    batch = hidden_states.shape[0]
    shape = (batch, 1, -1, module.head_dim)
    q = module.q_proj(hidden_states).view(shape).transpose(1, 2)
    k = module.k_proj(hidden_states).view(shape).transpose(1, 2)
    v = module.v_proj(hidden_states).view(shape).transpose(1, 2)
    cos, sin = given["position_embeddings"]
    layer = cache.layers[module.layer_idx]
    out = decode_attention_append(q, k, v, layer.keys, layer.values, layer.cumulative_length,
                                  given.get("attention_mask"), cos=cos, sin=sin,
                                  scale=module.scaling)
    layer.cumulative_length.add_(1)  # the StaticLayer's count of positions, as update() does
    return module.o_proj(out.reshape(batch, 1, -1)), None
