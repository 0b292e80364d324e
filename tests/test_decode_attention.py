"""cute_gemm.decode_attention (csrc/ops/attention_op.cpp, kernels/attention/) and its transformers
implementation (cute_gemm.attention).

Every result is compared with an fp32 reference written here (scores, mask, softmax and sums
over the keys and values repeated to the query heads), not with the op's own CPU kernel: the CPU
kernel is checked against it too. Fresh random inputs per case; GPU outputs land in memory that
was filled with NaN just before (the caching allocator hands the block back), so a row the kernel
does not write fails. The GPU sweep covers head dims 8-256 (each instance: 64, 128, 256, and
dims with half a k-step), groups of 1-20 query heads (two CTAs per group above 16), one and
several query positions, lengths around the 16-row warp tile and long enough for every cluster
size, each mask kind (bool, additive fp16, bf16, fp32, per head, broadcast), a static cache's
excluded tail, and fully excluded rows.
"""

import math
import os
import sys

import pytest
import torch

import cute_gemm
import cute_gemm.attention as cga

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "benchmarks"))
import bench_decode  # noqa: E402  (its static cache, for whichever transformers is installed)

gpu = pytest.mark.gpu
try:
    import transformers
except ImportError:  # the kernel's tests run without it
    transformers = None
needs_transformers = pytest.mark.skipif(transformers is None, reason="needs transformers")


def reference(q, k, v, mask=None, scale=None):
    """fp32 attention, [B, Lq, H, D]; rows with no position taking part are 0."""
    group = q.shape[1] // k.shape[1]
    qf, kf, vf = (t.float() for t in (q, k, v))
    kf, vf = kf.repeat_interleave(group, 1), vf.repeat_interleave(group, 1)
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    scores = qf @ kf.transpose(-1, -2) * scale
    if mask is not None:
        if mask.dtype == torch.bool:
            scores = scores.masked_fill(~mask, float("-inf"))
        else:
            scores = scores + mask.float()
    top = scores.amax(-1, keepdim=True)
    top = torch.where(torch.isinf(top) & (top < 0), torch.zeros_like(top), top)
    probs = torch.exp(scores - top)
    sums = probs.sum(-1, keepdim=True)
    out = (probs @ vf) / torch.where(sums > 0, sums, torch.ones_like(sums))
    return out.transpose(1, 2)


def make_inputs(batch, heads, kv_heads, q_len, length, dim, dtype, device, gen, q_transposed=True):
    def rand(*shape):
        return torch.randn(*shape, generator=gen).to(dtype).to(device)
    # q as transformers makes it: [B, Lq, H, D] projected, viewed [B, H, Lq, D].
    q = rand(batch, q_len, heads, dim).transpose(1, 2) if q_transposed else \
        rand(batch, heads, q_len, dim)
    return q, rand(batch, kv_heads, length, dim), rand(batch, kv_heads, length, dim)


def make_mask(kind, batch, heads, q_len, length, gen, device):
    """kind: None, 'bool' (random, per batch), 'bool-head' (per head), 'prefix' (a static
    cache: positions < a per-batch length take part), 'add-<dtype>' (additive, -inf holes)."""
    if kind is None:
        return None
    if kind == "prefix":
        valid = torch.randint(1, length + 1, (batch,), generator=gen)
        return (torch.arange(length)[None, :] < valid[:, None]).view(batch, 1, 1, length) \
            .expand(batch, 1, q_len, length).to(device)
    if kind.startswith("bool"):
        h = heads if kind == "bool-head" else 1
        keep = torch.rand(batch, h, q_len, length, generator=gen) > 0.3
        keep[..., 0] = True  # every row has a position (fully excluded rows: their own test)
        return keep.to(device)
    dtype = {"add-f16": torch.float16, "add-bf16": torch.bfloat16, "add-f32": torch.float32}[kind]
    add = torch.randn(batch, 1, q_len, length, generator=gen) * 2
    add[torch.rand(add.shape, generator=gen) < 0.2] = float("-inf")
    add[..., 0] = 0.0
    return add.to(dtype).to(device)


def tolerance(dtype):
    # The output is rounded once from fp32: half an ulp of values up to ~4, plus the exp2 and
    # summation order differences of fp32.
    return dict(atol=2e-3 if dtype == torch.float16 else 1.6e-2, rtol=4e-3)


# ---------------------------------------------------------------------------------------------
# CPU: the reference kernel, the checks, the fake kernel.

@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("heads,kv_heads,dim", [(4, 4, 8), (8, 2, 64), (12, 1, 96), (4, 2, 256)])
@pytest.mark.parametrize("mask_kind", [None, "bool", "bool-head", "prefix", "add-f32", "add-bf16"])
def test_cpu_kernel_matches_reference(dtype, heads, kv_heads, dim, mask_kind):
    gen = torch.Generator().manual_seed(hash((str(dtype), heads, dim, str(mask_kind))) % 2**31)
    batch, q_len, length = 2, 3, 37
    q, k, v = make_inputs(batch, heads, kv_heads, q_len, length, dim, dtype, "cpu", gen)
    mask = make_mask(mask_kind, batch, heads, q_len, length, gen, "cpu")
    out = cute_gemm.decode_attention(q, k, v, mask, scale=0.3)
    assert out.shape == (batch, q_len, heads, dim) and out.dtype == dtype and out.is_contiguous()
    torch.testing.assert_close(out.float(), reference(q, k, v, mask, 0.3), **tolerance(dtype))


def test_cpu_reference_agrees_with_torch_sdpa():
    gen = torch.Generator().manual_seed(3)
    q, k, v = make_inputs(2, 8, 2, 1, 50, 64, torch.float32, "cpu", gen)
    mask = make_mask("bool", 2, 8, 1, 50, gen, "cpu")
    sdpa = torch.nn.functional.scaled_dot_product_attention(
        q, k.repeat_interleave(4, 1), v.repeat_interleave(4, 1), attn_mask=mask).transpose(1, 2)
    torch.testing.assert_close(reference(q, k, v, mask), sdpa, atol=1e-5, rtol=1e-5)


def test_cpu_default_scale_and_rows_without_positions():
    gen = torch.Generator().manual_seed(4)
    q, k, v = make_inputs(2, 4, 2, 2, 20, 32, torch.bfloat16, "cpu", gen)
    mask = torch.ones(2, 1, 2, 20, dtype=torch.bool)
    mask[1, :, 1] = False  # batch 1, query 1: no position takes part
    out = cute_gemm.decode_attention(q, k, v, mask)
    torch.testing.assert_close(out.float(), reference(q, k, v, mask), **tolerance(torch.bfloat16))
    assert torch.count_nonzero(out[1, 1]) == 0 and torch.count_nonzero(out[0]) > 0
    empty = cute_gemm.decode_attention(q, k[:, :, :0], v[:, :, :0])
    assert empty.shape == (2, 2, 4, 32) and torch.count_nonzero(empty) == 0
    assert cute_gemm.decode_attention(q[:0], k[:0], v[:0]).shape == (0, 2, 4, 32)


def _args(**change):
    args = dict(q=torch.zeros(1, 8, 1, 64, dtype=torch.float16),
                k=torch.zeros(1, 2, 16, 64, dtype=torch.float16),
                v=torch.zeros(1, 2, 16, 64, dtype=torch.float16), mask=None, scale=None)
    args.update(change)
    return args


@pytest.mark.parametrize("change,error,text", [
    (dict(q=torch.zeros(8, 1, 64, dtype=torch.float16)), RuntimeError, "q must be a 4-D"),
    (dict(k=torch.zeros(2, 16, 64, dtype=torch.float16)), RuntimeError, "k must be a 4-D"),
    (dict(v=torch.zeros(1, 2, 15, 64, dtype=torch.float16)), RuntimeError, "v must have k's shape"),
    (dict(q=torch.zeros(1, 8, 1, 64)), RuntimeError, "q must have dtype"),
    (dict(k=torch.zeros(1, 2, 16, 64, dtype=torch.bfloat16)), RuntimeError, "k and v must have"),
    (dict(q=torch.zeros(1, 7, 1, 64, dtype=torch.float16)), RuntimeError, "multiple of k's"),
    (dict(k=torch.zeros(2, 2, 16, 64, dtype=torch.float16),
          v=torch.zeros(2, 2, 16, 64, dtype=torch.float16)), RuntimeError, "with q's B=1"),
    (dict(q=torch.zeros(1, 8, 1, 60, dtype=torch.float16),
          k=torch.zeros(1, 2, 16, 60, dtype=torch.float16),
          v=torch.zeros(1, 2, 16, 60, dtype=torch.float16)), ValueError, "multiple of 8 in"),
    (dict(q=torch.zeros(1, 8, 1, 264, dtype=torch.float16),
          k=torch.zeros(1, 2, 16, 264, dtype=torch.float16),
          v=torch.zeros(1, 2, 16, 264, dtype=torch.float16)), ValueError, "got 264"),
    (dict(scale=float("inf")), ValueError, "scale must be finite"),
    (dict(mask=torch.zeros(1, 1, 1, 16, dtype=torch.int32)), RuntimeError, "mask must have dtype"),
    (dict(mask=torch.zeros(1, 1, 16, dtype=torch.bool)), RuntimeError, "broadcast to"),
    (dict(mask=torch.zeros(1, 1, 1, 17, dtype=torch.bool)), RuntimeError, "broadcast to"),
    (dict(mask=torch.zeros(1, 2, 1, 16, dtype=torch.bool)), RuntimeError, "broadcast to"),
])
@pytest.mark.parametrize("where", ["cpu", "meta"])
def test_bad_arguments_are_refused(change, error, text, where):
    args = {name: (t.to(where) if isinstance(t, torch.Tensor) else t)
            for name, t in _args(**change).items()}
    with pytest.raises(error, match=text):
        cute_gemm.decode_attention(args["q"], args["k"], args["v"], args["mask"],
                                   scale=args["scale"])


def test_opcheck():
    gen = torch.Generator().manual_seed(5)
    q, k, v = make_inputs(2, 8, 2, 2, 24, 64, torch.float16, "cpu", gen)
    mask = make_mask("add-f16", 2, 8, 2, 24, gen, "cpu")
    for args in ((q, k, v, None, None), (q, k, v, mask, 0.2)):
        torch.library.opcheck(torch.ops.cute_gemm.decode_attention.default, args,
                              test_utils=("test_schema", "test_faketensor"))


def test_meta_shape():
    q = torch.empty(3, 12, 2, 128, device="meta", dtype=torch.bfloat16)
    k = torch.empty(3, 4, 99, 128, device="meta", dtype=torch.bfloat16)
    assert cute_gemm.decode_attention(q, k, k).shape == (3, 2, 12, 128)


# ---------------------------------------------------------------------------------------------
# transformers: the "cute_gemm" attention implementation.

def test_reason_routes_each_call():
    q = torch.zeros(1, 8, 1, 64, dtype=torch.float16)
    k = torch.zeros(1, 2, 32, 64, dtype=torch.float16)
    mask = torch.ones(1, 1, 1, 32, dtype=torch.bool)
    assert cga.decode_attention_reason(q, k, k, mask) is None
    assert cga.decode_attention_reason(q, k, k, None) is None
    prefill = torch.zeros(1, 8, cga.MAX_QUERY_LEN + 1, 64, dtype=torch.float16)
    assert "prefill" in cga.decode_attention_reason(prefill, k, k, None)
    assert "causal" in cga.decode_attention_reason(q.expand(1, 8, 2, 64), k, k, None)
    assert "dropout" in cga.decode_attention_reason(q, k, k, mask, dropout=0.1)
    assert "softcap" in cga.decode_attention_reason(q, k, k, mask, softcap=30.0)
    assert cga.decode_attention_reason(q, k, k, mask, softcap=None) is None
    q72 = torch.zeros(1, 8, 1, 72, dtype=torch.float16)
    k72 = torch.zeros(1, 2, 32, 72, dtype=torch.float16)
    assert cga.decode_attention_reason(q72, k72, k72, mask) is None
    q60 = torch.zeros(1, 8, 1, 60, dtype=torch.float16)
    k60 = torch.zeros(1, 2, 32, 60, dtype=torch.float16)
    assert "head dim" in cga.decode_attention_reason(q60, k60, k60, mask)
    assert "dtype" in cga.decode_attention_reason(q.float(), k.float(), k.float(), mask)
    assert "mask" in cga.decode_attention_reason(q, k, k, mask.int())
    strided = torch.zeros(1, 2, 32, 68, dtype=torch.float16)[..., :64]
    assert "16-byte" in cga.decode_attention_reason(q, strided, strided, mask)


def _llama(dtype, device):
    config = transformers.LlamaConfig(
        hidden_size=256, intermediate_size=512, num_hidden_layers=2, num_attention_heads=8,
        num_key_value_heads=2, vocab_size=500, max_position_embeddings=256,
        tie_word_embeddings=False)
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(config).to(device=device, dtype=dtype).eval()


def _decode_logits(model, prompt, steps, device, dtype, step_fn=None):
    """Logits of a prefill and `steps` greedy decode steps through a static cache."""
    batch, n = prompt.shape
    cache = bench_decode.make_static_cache(transformers, model, batch, n + steps + 3, device,
                                           dtype)
    forward = model if step_fn is None else step_fn
    with torch.no_grad():
        pos = torch.arange(n, device=device)
        logits = model(input_ids=prompt, position_ids=pos.expand(batch, n), cache_position=pos,
                       past_key_values=cache, use_cache=True).logits[:, -1]
        out = [logits.float()]
        for s in range(steps):
            tok = out[-1].argmax(-1, keepdim=True)
            pos = torch.tensor([n + s], device=device)
            logits = forward(input_ids=tok, position_ids=pos.expand(batch, 1), cache_position=pos,
                             past_key_values=cache, use_cache=True).logits[:, -1]
            out.append(logits.float())
    return torch.stack(out)


def _counting(monkeypatch):
    calls = []
    real = cga.decode_attention

    def counted(*args, **kwargs):
        calls.append(args[0].shape)
        return real(*args, **kwargs)
    monkeypatch.setattr(cga, "decode_attention", counted)
    return calls


@needs_transformers
def test_transformers_decode_matches_sdpa_cpu(monkeypatch):
    model = _llama(torch.bfloat16, "cpu")
    prompt = torch.randint(0, 500, (2, 9), generator=torch.Generator().manual_seed(6))
    ref = _decode_logits(model, prompt, 4, "cpu", torch.bfloat16)
    calls = _counting(monkeypatch)
    assert cga.use_decode_attention(model) is model
    assert model.config._attn_implementation == cga.NAME
    got = _decode_logits(model, prompt, 4, "cpu", torch.bfloat16)
    # The prefill went to sdpa; each decode step's two layers to the kernel.
    assert len(calls) == 4 * 2 and all(shape[2] == 1 for shape in calls)
    assert (got - ref).abs().max() <= 0.02 * ref.abs().max()
    assert torch.equal(got.argmax(-1), ref.argmax(-1))


def test_use_decode_attention_refuses_other_objects():
    with pytest.raises(ValueError, match="PreTrainedModel"):
        cga.use_decode_attention(torch.nn.Linear(4, 4))


@needs_transformers
def test_use_decode_attention_refuses_a_model_without_the_interface(monkeypatch):
    # A model whose attention modules keep their own code: refused, left on its implementation.
    model = _llama(torch.float32, "cpu")
    before = model.config._attn_implementation
    monkeypatch.setattr(model, "_can_set_attn_implementation", lambda: False)
    with pytest.raises(ValueError, match="AttentionInterface"):
        cga.use_decode_attention(model)
    assert model.config._attn_implementation == before
    # One that reports another implementation after the switch: switched back, refused.
    monkeypatch.setattr(model, "_can_set_attn_implementation", lambda: True)
    monkeypatch.setattr(model, "set_attn_implementation", lambda name: None)
    with pytest.raises(ValueError, match="did not switch"):
        cga.use_decode_attention(model)
    assert model.config._attn_implementation == before


# ---------------------------------------------------------------------------------------------
# GPU: the kernel.

def _poisoned_allocator(nbytes):
    """Fills the caching allocator's next block with NaN, so an output the kernel does not fully
    write shows it."""
    junk = torch.full((nbytes // 2 + 4096,), float("nan"), dtype=torch.float16, device="cuda")
    del junk


GPU_CASES = [
    # (batch, heads, kv_heads, q_len, length, dim)
    (1, 32, 8, 1, 229, 128),   # Llama-3-8B decode
    (16, 32, 8, 1, 300, 128),
    (8, 32, 8, 1, 256, 128),   # 2 splits, not the 3 that fill the SMs (warp 0 takes 2 tiles)
    (1, 32, 8, 1, 4096, 128),  # long: the full cluster of 8
    (1, 8, 4, 1, 2048, 256),   # the 256 instance (one CTA per SM): 4 tiles a warp, the ring wraps
    (1, 8, 8, 1, 1500, 64),    # the 64 instance, splits of 188 rows
    (3, 28, 4, 1, 517, 128),   # Qwen2.5-7B's group of 7
    (2, 12, 1, 2, 130, 64),    # group of 12 in one CTA; several query positions
    (2, 40, 2, 1, 333, 72),    # group of 20: two CTAs (16 + 4 heads); D = 72: half a k-step
    (1, 8, 8, 4, 65, 256),     # the 256 instance
    (2, 4, 2, 1, 64, 8),       # D = 8 in the 64 instance: one half k-step
    (1, 4, 1, 3, 63, 96),      # D = 96 in the 128 instance
    (1, 16, 2, 1, 1, 128),
    (5, 8, 2, 16, 200, 128),   # speculative verification
]


@gpu
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("case", GPU_CASES)
@pytest.mark.parametrize("mask_kind", [None, "prefix", "bool-head", "add-bf16", "add-f32"])
def test_gpu_matches_reference(dtype, case, mask_kind):
    batch, heads, kv_heads, q_len, length, dim = case
    gen = torch.Generator().manual_seed(hash((case, str(dtype), str(mask_kind))) % 2**31)
    q, k, v = make_inputs(batch, heads, kv_heads, q_len, length, dim, dtype, "cuda", gen)
    mask = make_mask(mask_kind, batch, heads, q_len, length, gen, "cuda")
    if mask_kind == "add-bf16" and dtype == torch.float16:
        mask = mask.to(torch.float16)
    _poisoned_allocator(batch * q_len * heads * dim * 2)
    out = cute_gemm.decode_attention(q, k, v, mask, scale=0.7 / math.sqrt(dim))
    ref = reference(q.cpu(), k.cpu(), v.cpu(), None if mask is None else mask.cpu(),
                    0.7 / math.sqrt(dim))
    assert out.shape == (batch, q_len, heads, dim) and out.is_contiguous()
    torch.testing.assert_close(out.float().cpu(), ref, **tolerance(dtype))


@gpu
def test_gpu_rows_without_positions_are_zero():
    gen = torch.Generator().manual_seed(7)
    q, k, v = make_inputs(2, 32, 8, 2, 1000, 128, torch.bfloat16, "cuda", gen)
    mask = torch.ones(2, 1, 2, 1000, dtype=torch.bool, device="cuda")
    mask[0, :, 1] = False
    mask[1, :, 0, 500:] = False  # whole splits without a position, others with
    out = cute_gemm.decode_attention(q, k, v, mask)
    ref = reference(q.cpu(), k.cpu(), v.cpu(), mask.cpu())
    torch.testing.assert_close(out.float().cpu(), ref, **tolerance(torch.bfloat16))
    assert torch.count_nonzero(out[0, 1]) == 0
    # NaN in an excluded position's key or value does not leak in: it is never read.
    k[1, :, 900], v[1, :, 900] = float("nan"), float("nan")
    mask[1, :, :, 900] = False
    out = cute_gemm.decode_attention(q, k, v, mask)
    assert not torch.isnan(out).any()


@gpu
@pytest.mark.parametrize("valid", [1, 700, 1040, 4095])
@pytest.mark.parametrize("kind", ["bool", "add-f16"])
def test_gpu_static_cache_tail(valid, kind):
    """A static cache's unfilled tail at batch 1: long splits (8 of 512 positions) find their
    last position that takes part before the loop and skip the rest. Positions after a hole, one
    on a split's last row and one alone in a split are not lost; NaN in every position that takes
    no part is never read."""
    gen = torch.Generator().manual_seed(valid)
    length = 4096
    q, k, v = make_inputs(1, 32, 8, 1, length, 128, torch.float16, "cuda", gen)
    keep = torch.arange(length) < valid
    keep[min(valid + 300, length - 1)] = True  # alone after a hole
    keep[1023] = True                          # split 1's last row
    keep[2600] = True                          # alone in split 5
    if kind == "bool":
        mask = keep.view(1, 1, 1, length).cuda()
    else:
        add = torch.randn(length, generator=gen) * 2
        mask = torch.where(keep, add, float("-inf")).half().view(1, 1, 1, length).cuda()
    ref = reference(q.cpu(), k.cpu(), v.cpu(), mask.cpu())
    k[:, :, ~keep.cuda()], v[:, :, ~keep.cuda()] = float("nan"), float("nan")
    out = cute_gemm.decode_attention(q, k, v, mask)
    torch.testing.assert_close(out.float().cpu(), ref, **tolerance(torch.float16))


def excluded_rows_case(batch, length, kind, device):
    """Inputs whose excluded positions (holes, a static cache's unfilled tail, whole splits with
    no position at short lengths) hold NaN in keys and values, and the reference from the same
    inputs before the NaN went in."""
    gen = torch.Generator().manual_seed(batch * 10000 + length)
    dtype = torch.bfloat16 if kind == "bool" else torch.float16
    q, k, v = make_inputs(batch, 32, 8, 1, length, 128, dtype, "cpu", gen)
    valid = torch.randint(length // 3, length, (batch,), generator=gen)
    keep = (torch.rand(batch, length, generator=gen) > 0.3) & \
        (torch.arange(length)[None, :] < valid[:, None])
    keep[:, 0] = True
    if kind == "bool":
        mask = keep.view(batch, 1, 1, length)
    else:
        add = torch.randn(batch, length, generator=gen) * 2
        mask = torch.where(keep, add, float("-inf")).half().view(batch, 1, 1, length)
    ref = reference(q, k, v, mask)
    for b in range(batch):
        k[b, :, ~keep[b]], v[b, :, ~keep[b]] = float("nan"), float("nan")
    return (q.to(device), k.to(device), v.to(device), mask.to(device)), ref, dtype


@pytest.mark.parametrize("batch,length", [(1, 100), (3, 130)])
@pytest.mark.parametrize("kind", ["bool", "add-f16"])
def test_cpu_excluded_rows_take_no_part(batch, length, kind):
    # The CPU reference as the GPU kernel: NaN in a position the mask excludes is ignored.
    args, ref, dtype = excluded_rows_case(batch, length, kind, "cpu")
    out = cute_gemm.decode_attention(*args)
    assert not torch.isnan(out).any()
    torch.testing.assert_close(out.float(), ref, **tolerance(dtype))
    # A NaN in a position that takes part still reaches its rows.
    q, k, v, mask = args
    v[0, 0, 0, 0] = float("nan")
    out = cute_gemm.decode_attention(q, k, v, mask)
    assert torch.isnan(out[0, 0, :4, 0]).all() and not torch.isnan(out[0, 0, :4, 1:]).any()


@gpu
@pytest.mark.parametrize("batch,length", [(1, 256), (1, 100), (2, 1000), (16, 256), (3, 130)])
@pytest.mark.parametrize("kind", ["bool", "add-f16"])
def test_gpu_excluded_rows_take_no_part(batch, length, kind):
    """Batch 1 and 16 at a few hundred positions (short splits), and longer splits: the rows the
    mask excludes hold NaN here and must not reach the output."""
    args, ref, dtype = excluded_rows_case(batch, length, kind, "cuda")
    out = cute_gemm.decode_attention(*args)
    assert not torch.isnan(out).any()
    torch.testing.assert_close(out.float().cpu(), ref, **tolerance(dtype))


@gpu
def test_gpu_layout_errors():
    q = torch.zeros(1, 8, 1, 64, dtype=torch.float16, device="cuda")
    k = torch.zeros(1, 2, 16, 68, dtype=torch.float16, device="cuda")[..., :64]
    with pytest.raises(RuntimeError, match="k must have contiguous rows"):
        cute_gemm.decode_attention(q, k, k.contiguous())
    base = torch.zeros(1 * 2 * 16 * 64 + 1, dtype=torch.float16, device="cuda")
    shifted = base[1:].view(1, 2, 16, 64)
    with pytest.raises(RuntimeError, match="v must have contiguous rows.*16-byte aligned start"):
        cute_gemm.decode_attention(q, k.contiguous(), shifted)


@gpu
@pytest.mark.parametrize("layout", ["d_strided", "unaligned", "odd_strides"])
def test_gpu_q_of_any_layout(layout):
    """q of any strides and start (the op copies q where its rows are not 16-byte chunks): d not
    contiguous, a start off 16 bytes, head strides not multiples of 8."""
    gen = torch.Generator().manual_seed(9)
    batch, heads, kv_heads, q_len, length, dim = 2, 12, 4, 2, 77, 72
    _, k, v = make_inputs(batch, heads, kv_heads, q_len, length, dim, torch.float16, "cuda", gen)
    values = torch.randn(batch, heads, q_len, dim, generator=gen).half().cuda()
    if layout == "d_strided":  # stride(3) == q_len
        q = values.transpose(2, 3).contiguous().transpose(2, 3)
    elif layout == "unaligned":  # one element past an aligned start
        base = torch.empty(values.numel() + 1, dtype=torch.float16, device="cuda")
        q = base[1:].view_as(values)
        q.copy_(values)
    else:  # rows padded to 73 elements
        q = torch.empty(batch, heads, q_len, dim + 1, dtype=torch.float16, device="cuda")
        q = q[..., :dim]
        q.copy_(values)
    assert not q.is_contiguous() or q.data_ptr() % 16 != 0
    mask = torch.rand(batch, 1, q_len, length, generator=gen).cuda() > 0.3
    out = cute_gemm.decode_attention(q, k, v, mask)
    ref = reference(values.cpu(), k.cpu(), v.cpu(), mask.cpu())
    torch.testing.assert_close(out.float().cpu(), ref, **tolerance(torch.float16))


@gpu
def test_gpu_grid_limit_is_refused():
    q = torch.zeros(65536, 1, 1, 8, dtype=torch.float16, device="cuda")
    k = torch.zeros(65536, 1, 1, 8, dtype=torch.float16, device="cuda")
    with pytest.raises(RuntimeError, match="B \\* Lq and the key/value heads' CTAs"):
        cute_gemm.decode_attention(q, k, k)


@gpu
def test_gpu_cuda_graph_and_compile():
    """A static cache's mask made inside the compiled function from a length on the GPU, the
    whole call captured in a CUDA graph and replayed with other lengths and queries."""
    gen = torch.Generator().manual_seed(8)
    q, k, v = make_inputs(4, 32, 8, 1, 700, 128, torch.bfloat16, "cuda", gen)
    valid = torch.tensor([700], device="cuda")

    def step(q, k, v, valid):
        mask = (torch.arange(700, device=q.device) < valid).view(1, 1, 1, 700)
        return cute_gemm.decode_attention(q, k, v, mask) * 2

    compiled = torch.compile(step, fullgraph=True)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        compiled(q, k, v, valid)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = compiled(q, k, v, valid)
    for n in (700, 1, 333):
        valid.fill_(n)
        q.copy_(torch.randn(q.shape, generator=gen).to(q.dtype))
        graph.replay()
        mask = (torch.arange(700) < n).view(1, 1, 1, 700)
        ref = reference(q.cpu(), k.cpu(), v.cpu(), mask) * 2
        torch.testing.assert_close(out.float().cpu(), ref, atol=3.2e-2, rtol=8e-3)


@gpu
@needs_transformers
@pytest.mark.parametrize("compiled", [False, True, "decode_compilation"])
def test_gpu_transformers_decode_matches_sdpa(monkeypatch, compiled):
    # "decode_compilation": compiled inside cute_gemm.inductor.decode_compilation() (one-pass
    # norms, the rotary embedding and cache rows as combo kernels).
    import contextlib

    import cute_gemm.inductor
    model = _llama(torch.bfloat16, "cuda")
    prompt = torch.randint(0, 500, (3, 11), generator=torch.Generator().manual_seed(9)).cuda()
    ref = _decode_logits(model, prompt, 6, "cuda", torch.bfloat16)
    # (Counting calls through a wrapper would be a side effect inside the compiled graph.)
    calls = [] if compiled else _counting(monkeypatch)
    cga.use_decode_attention(model)
    torch._dynamo.reset()
    step = torch.compile(model, fullgraph=True) if compiled else None
    block = (cute_gemm.inductor.decode_compilation() if compiled == "decode_compilation"
             else contextlib.nullcontext())
    with block:  # the compilations happen at the first steps
        got = _decode_logits(model, prompt, 6, "cuda", torch.bfloat16, step_fn=step)
    assert compiled or len(calls) == 6 * 2
    assert (got - ref).abs().max() <= 0.02 * ref.abs().max()
    assert (got.argmax(-1) == ref.argmax(-1)).float().mean() >= 0.9
