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
"""

import torch

from .ops import decode_attention

__all__ = ["NAME", "MAX_QUERY_LEN", "attention_forward", "decode_attention_reason", "register",
           "use_decode_attention"]

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


def use_decode_attention(model):
    """Switches a transformers model (and its sub-models) to the ``"cute_gemm"`` attention
    implementation; returns the model. Raises ValueError, leaving the model as it was, when the
    model does not take attention implementations through AttentionInterface (its attention
    modules would keep their own code)."""
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
    return model
