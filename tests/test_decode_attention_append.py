"""cute_gemm.decode_attention_append (a decode step's rotary embedding, cache update and attention
in one kernel) and the attention forward that calls it (cute_gemm.attention, append=True).

Results are compared with a reference written here: the rotary embedding in fp32 (transformers'
rotate_half form, rounded once), the cache rows written by hand, then test_decode_attention's fp32
attention. The caches are compared exactly (the kernel rounds the rotary embedding as the
reference does); GPU outputs land in NaN-poisoned memory. The model tests compare whole decode
loops against transformers' own code (sdpa) and the unfused cute_gemm attention.
"""

import copy
import math
import os
import pickle
import subprocess
import sys

import pytest
import torch

import cute_gemm
import cute_gemm.attention as cga
from test_decode_attention import (_decode_logits, _llama, _poisoned_allocator, make_mask,
                                   needs_transformers, reference, tolerance, transformers)

gpu = pytest.mark.gpu


def rotate(x, cos, sin):
    """x [B, h, 1, D] by cos, sin [B or 1, 1, D]: x * cos + rotate_half(x) * sin in fp32."""
    half = x.shape[-1] // 2
    xf = x.float()
    turned = torch.cat((-xf[..., half:], xf[..., :half]), -1)
    return (xf * cos.float().unsqueeze(1) + turned * sin.float().unsqueeze(1)).to(x.dtype)


def append_reference(q, k_new, v_new, k_cache, v_cache, position, mask, cos, sin, scale):
    """(out [B, 1, H, D] fp32, k_cache, v_cache after the append), on copies."""
    if cos is not None:
        q, k_new = rotate(q, cos, sin), rotate(k_new, cos, sin)
    k_cache, v_cache = k_cache.clone(), v_cache.clone()
    k_cache[:, :, position] = k_new[:, :, 0]
    v_cache[:, :, position] = v_new[:, :, 0]
    return reference(q, k_cache, v_cache, mask, scale), k_cache, v_cache


def make_step(batch, heads, kv_heads, length, dim, dtype, device, gen, rotary=True,
              cos_batch=None):
    """q, k_new, v_new as a transformers projection makes them (views of [B, 1, h, D]), caches
    [B, Hkv, L, D], cos and sin (rotary: a real rotary table's values, or None)."""
    def rand(*shape):
        return torch.randn(*shape, generator=gen).to(dtype).to(device)
    q = rand(batch, 1, heads, dim).transpose(1, 2)
    k_new = rand(batch, 1, kv_heads, dim).transpose(1, 2)
    v_new = rand(batch, 1, kv_heads, dim).transpose(1, 2)
    k_cache, v_cache = rand(batch, kv_heads, length, dim), rand(batch, kv_heads, length, dim)
    cos = sin = None
    if rotary:
        rows = batch if cos_batch is None else cos_batch
        angle = torch.rand(rows, 1, dim // 2, generator=gen) * 40
        angle = torch.cat((angle, angle), -1)
        cos, sin = angle.cos().to(dtype).to(device), angle.sin().to(dtype).to(device)
    return q, k_new, v_new, k_cache, v_cache, cos, sin


def run_append(step, position, mask, scale):
    q, k_new, v_new, k_cache, v_cache, cos, sin = step
    pos = torch.tensor(position, device=q.device)
    return cute_gemm.decode_attention_append(q, k_new, v_new, k_cache, v_cache, pos, mask,
                                             cos=cos, sin=sin, scale=scale)


# ---------------------------------------------------------------------------------------------
# CPU: the reference kernel, the checks, the fake kernel.

@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("heads,kv_heads,dim", [(4, 4, 8), (8, 2, 64), (12, 1, 72), (4, 2, 256)])
@pytest.mark.parametrize("rotary", [True, False])
@pytest.mark.parametrize("mask_kind", [None, "bool-head", "add-f32"])
def test_cpu_append_matches_reference(dtype, heads, kv_heads, dim, rotary, mask_kind):
    gen = torch.Generator().manual_seed(hash((str(dtype), heads, dim, rotary, str(mask_kind)))
                                        % 2**31)
    batch, length, position = 2, 37, 21
    step = make_step(batch, heads, kv_heads, length, dim, dtype, "cpu", gen, rotary)
    mask = make_mask(mask_kind, batch, heads, 1, length, gen, "cpu")
    ref, k_ref, v_ref = append_reference(*step[:5], position, mask, *step[5:], 0.3)
    out = run_append(step, position, mask, 0.3)
    assert out.shape == (batch, 1, heads, dim) and out.dtype == dtype and out.is_contiguous()
    torch.testing.assert_close(out.float(), ref, **tolerance(dtype))
    assert torch.equal(step[3], k_ref) and torch.equal(step[4], v_ref)


def test_cpu_append_broadcast_cos_and_position_bounds():
    gen = torch.Generator().manual_seed(11)
    step = make_step(3, 8, 2, 16, 64, torch.bfloat16, "cpu", gen, cos_batch=1)
    for position in (0, 15):
        ref, k_ref, v_ref = append_reference(*step[:5], position, None, *step[5:], None)
        out = run_append(step, position, None, None)
        torch.testing.assert_close(out.float(), ref, **tolerance(torch.bfloat16))
        assert torch.equal(step[3], k_ref) and torch.equal(step[4], v_ref)
    k_before = step[3].clone()
    for position in (16, -1):
        with pytest.raises(IndexError, match=f"position {position} is outside the cache's 16"):
            run_append(step, position, None, None)
    assert torch.equal(step[3], k_before)  # refused before anything is written


def _append_args(**change):
    def z(*shape, dtype=torch.float16):
        return torch.zeros(*shape, dtype=dtype)
    args = dict(q=z(1, 8, 1, 64), k_new=z(1, 2, 1, 64), v_new=z(1, 2, 1, 64),
                k_cache=z(1, 2, 16, 64), v_cache=z(1, 2, 16, 64),
                position=torch.tensor(3), mask=None, cos=z(1, 1, 64), sin=z(1, 1, 64),
                scale=None)
    args.update(change)
    return args


@pytest.mark.parametrize("change,error,text", [
    (dict(q=torch.zeros(1, 8, 2, 64, dtype=torch.float16)), ValueError, "one query position"),
    (dict(k_cache=torch.zeros(2, 16, 64, dtype=torch.float16)), RuntimeError,
     "k_cache must be a 4-D"),
    (dict(v_cache=torch.zeros(1, 2, 15, 64, dtype=torch.float16)), RuntimeError,
     "v_cache must have k_cache's shape"),
    (dict(k_cache=torch.zeros(1, 3, 16, 64, dtype=torch.float16),
          v_cache=torch.zeros(1, 3, 16, 64, dtype=torch.float16)), RuntimeError,
     "Hkv dividing q's heads"),
    (dict(v_cache=torch.zeros(1, 2, 16, 64, dtype=torch.bfloat16)), RuntimeError,
     "v_cache must have q's dtype"),
    (dict(k_new=torch.zeros(1, 2, 2, 64, dtype=torch.float16)), RuntimeError,
     r"k_new must be \[B, Hkv, 1, D\]"),
    (dict(v_new=torch.zeros(1, 1, 1, 64, dtype=torch.float16)), RuntimeError,
     r"v_new must be \[B, Hkv, 1, D\]"),
    (dict(v_new=torch.zeros(1, 2, 1, 64)), RuntimeError, "v_new must have q's dtype"),
    (dict(sin=None), RuntimeError, "cos without sin"),
    (dict(cos=None), RuntimeError, "sin without cos"),
    (dict(cos=torch.zeros(1, 64, dtype=torch.float16)), RuntimeError, r"cos must be \[B, 1, D\]"),
    (dict(sin=torch.zeros(1, 1, 32, dtype=torch.float16)), RuntimeError,
     r"sin must be \[B, 1, D\]"),
    (dict(sin=torch.zeros(1, 1, 64, dtype=torch.bfloat16)), RuntimeError,
     "sin must have q's dtype"),
    (dict(position=torch.tensor(3, dtype=torch.int32)), RuntimeError,
     "position must be one torch.int64"),
    (dict(position=torch.tensor([3, 4])), RuntimeError, "position must be one torch.int64"),
    (dict(mask=torch.zeros(1, 1, 1, 17, dtype=torch.bool)), RuntimeError, "broadcast to"),
    (dict(scale=float("nan")), ValueError, "scale must be finite"),
])
@pytest.mark.parametrize("where", ["cpu", "meta"])
def test_append_bad_arguments_are_refused(change, error, text, where):
    args = {name: (t.to(where) if isinstance(t, torch.Tensor) else t)
            for name, t in _append_args(**change).items()}
    with pytest.raises(error, match="decode_attention_append: .*" + text):
        cute_gemm.decode_attention_append(
            args["q"], args["k_new"], args["v_new"], args["k_cache"], args["v_cache"],
            args["position"], args["mask"], cos=args["cos"], sin=args["sin"],
            scale=args["scale"])


def test_append_opcheck():
    gen = torch.Generator().manual_seed(12)
    q, k_new, v_new, k_cache, v_cache, cos, sin = make_step(2, 8, 2, 24, 64, torch.float16,
                                                            "cpu", gen)
    mask = make_mask("add-f16", 2, 8, 1, 24, gen, "cpu")
    position = torch.tensor(5)
    for args in ((q, k_new, v_new, cos, sin, k_cache, v_cache, position, None, None),
                 (q, k_new, v_new, None, None, k_cache, v_cache, position, mask, 0.2)):
        torch.library.opcheck(torch.ops.cute_gemm.decode_attention_append.default, args,
                              test_utils=("test_schema", "test_faketensor"))


def test_append_meta_shape():
    def e(*shape):
        return torch.empty(*shape, device="meta", dtype=torch.bfloat16)
    out = cute_gemm.decode_attention_append(
        e(3, 12, 1, 128), e(3, 4, 1, 128), e(3, 4, 1, 128), e(3, 4, 99, 128), e(3, 4, 99, 128),
        torch.empty((), dtype=torch.int64, device="meta"), cos=e(3, 1, 128), sin=e(1, 1, 128))
    assert out.shape == (3, 1, 12, 128)


# ---------------------------------------------------------------------------------------------
# transformers: the one-kernel attention forward.

def _count_append(monkeypatch):
    calls = []
    real = cga.decode_attention_append

    def counted(*args, **kwargs):
        calls.append(args[0].shape)
        return real(*args, **kwargs)
    monkeypatch.setattr(cga, "decode_attention_append", counted)
    return calls


def _attention_modules(model):
    return [m for m in model.modules() if type(m).__name__.endswith("Attention")]


@needs_transformers
def test_transformers_append_matches_sdpa_cpu(monkeypatch):
    model = _llama(torch.bfloat16, "cpu")
    prompt = torch.randint(0, 500, (2, 9), generator=torch.Generator().manual_seed(13))
    ref = _decode_logits(model, prompt, 5, "cpu", torch.bfloat16)
    cga.use_decode_attention(model, append=False)
    assert all("forward" not in m.__dict__ for m in _attention_modules(model))
    apart = _decode_logits(model, prompt, 5, "cpu", torch.bfloat16)
    calls = _count_append(monkeypatch)
    cga.use_decode_attention(model)
    assert all(cga.append_reason(m) is None and "forward" in m.__dict__
               for m in _attention_modules(model))
    got = _decode_logits(model, prompt, 5, "cpu", torch.bfloat16)
    # The prefill went to the class's forward; every decode step's two layers to the kernel.
    assert len(calls) == 5 * 2 and all(shape[2] == 1 for shape in calls)
    for other in (ref, apart):
        assert (got - other).abs().max() <= 0.02 * other.abs().max()
        assert torch.equal(got.argmax(-1), other.argmax(-1))
    # append=False takes the forward back off.
    cga.use_decode_attention(model, append=False)
    assert all("forward" not in m.__dict__ for m in _attention_modules(model))


@needs_transformers
def test_transformers_append_with_fused_quantized_projections_cpu(monkeypatch):
    """q/k/v as slices of one fused quantized GEMM (quantize_model(fuse=True)): the same logits
    with the one-kernel forward as with transformers' code over the same quantized model."""
    model = _llama(torch.bfloat16, "cpu")
    cute_gemm.quantize_model(model, bits=4, group_size=64, fuse=True, progress=False)
    prompt = torch.randint(0, 500, (1, 7), generator=torch.Generator().manual_seed(14))
    cga.use_decode_attention(model, append=False)
    apart = _decode_logits(model, prompt, 4, "cpu", torch.bfloat16)
    calls = _count_append(monkeypatch)
    cga.use_decode_attention(model)
    got = _decode_logits(model, prompt, 4, "cpu", torch.bfloat16)
    assert len(calls) == 4 * 2
    assert (got - apart).abs().max() <= 0.02 * apart.abs().max()
    assert torch.equal(got.argmax(-1), apart.argmax(-1))


@needs_transformers
def test_transformers_append_falls_back_where_it_must(monkeypatch):
    """A dynamic cache, training mode and another attention implementation run the class's
    forward (and give transformers' numbers); append_call_reason says why."""
    model = _llama(torch.float32, "cpu").to(torch.bfloat16)
    prompt = torch.randint(0, 500, (1, 6), generator=torch.Generator().manual_seed(15))
    cga.use_decode_attention(model)
    calls = _count_append(monkeypatch)
    with torch.no_grad():
        model(input_ids=prompt, use_cache=True)  # a DynamicCache: prefill and ...
        out = model(input_ids=prompt[:, :1], use_cache=True)
        model.generate(prompt, max_new_tokens=3, do_sample=False)  # ... decode steps
    assert out.logits.shape[1] == 1 and calls == []
    attn = _attention_modules(model)[0]
    hidden = torch.zeros(1, 1, 256, dtype=torch.bfloat16)
    cache = transformers.DynamicCache(config=model.config)
    assert "no position_embeddings" in cga.append_call_reason(attn, hidden, None, None, cache, {})
    rope = (torch.zeros(1, 1, 32, dtype=torch.bfloat16),) * 2
    assert "DynamicLayer" in cga.append_call_reason(attn, hidden, rope, None, cache, {}) \
        or "no cache layer" in cga.append_call_reason(attn, hidden, rope, None, cache, {})
    assert "one position" in cga.append_call_reason(attn, hidden.expand(1, 2, 256), rope, None,
                                                    cache, {})
    model.train()
    assert cga.append_call_reason(attn, hidden, rope, None, cache, {}) == "training mode"
    model.eval()
    model.set_attn_implementation("sdpa")
    assert "'sdpa'" in cga.append_call_reason(attn, hidden, rope, None, cache, {})


@needs_transformers
def test_append_reason_refuses_unknown_forwards():
    model = _llama(torch.float32, "cpu")
    attn = _attention_modules(model)[0]
    assert cga.append_reason(attn) is None

    class ChangedAttention(type(attn)):
        def forward(self, hidden_states, position_embeddings=None, attention_mask=None,
                    past_key_values=None, **kwargs):
            return super().forward(hidden_states * 2, position_embeddings, attention_mask,
                                   past_key_values, **kwargs)
    ChangedAttention.__name__ = type(attn).__name__
    changed = copy.deepcopy(attn)
    changed.__class__ = ChangedAttention
    assert "not a known transformers version" in cga.append_reason(changed)
    assert "not a recognized attention module" in cga.append_reason(torch.nn.Linear(2, 2))
    own = copy.deepcopy(attn)
    own.forward = lambda *a, **k: None
    assert "already replaced" in cga.append_reason(own)
    if hasattr(transformers, "Qwen3Config"):
        config = transformers.Qwen3Config(hidden_size=64, num_attention_heads=4,
                                          num_key_value_heads=2, head_dim=16,
                                          num_hidden_layers=1, intermediate_size=64)
        qwen3 = transformers.Qwen3ForCausalLM(config)
        reasons = [cga.append_reason(m) for m in _attention_modules(qwen3)]
        assert reasons and all("not a recognized attention module" in r for r in reasons)


@needs_transformers
def test_append_forward_survives_copy_and_pickle():
    model = _llama(torch.float32, "cpu")
    cga.use_decode_attention(model)
    for clone in (copy.deepcopy(model), pickle.loads(pickle.dumps(model))):
        attns = _attention_modules(clone)
        assert attns and all(m.forward.args[0] is m for m in attns)


# ---------------------------------------------------------------------------------------------
# GPU: the kernel.

GPU_APPEND_CASES = [
    # (batch, heads, kv_heads, length, dim, position)
    (1, 32, 8, 229, 128, 57),     # Llama-3-8B decode: the new row inside a split
    (1, 32, 8, 4096, 128, 4095),  # the last row of a long cache (clusters of 8)
    (16, 32, 8, 300, 128, 0),     # the first row
    (3, 28, 4, 517, 128, 300),    # Qwen2.5-7B's group of 7
    (2, 40, 2, 333, 72, 191),     # two CTAs per group (16 + 4 heads); D = 72
    (1, 8, 8, 65, 256, 64),       # the 256 instance, the last row of a partial tile
    (2, 4, 2, 64, 8, 17),         # D = 8
    (1, 16, 2, 1, 128, 0),        # a one-row cache
]


@gpu
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("case", GPU_APPEND_CASES)
@pytest.mark.parametrize("rotary", [True, False])
@pytest.mark.parametrize("mask_kind", [None, "prefix", "bool-head", "add-f32"])
def test_gpu_append_matches_reference(dtype, case, rotary, mask_kind):
    batch, heads, kv_heads, length, dim, position = case
    gen = torch.Generator().manual_seed(hash((case, str(dtype), rotary, str(mask_kind))) % 2**31)
    step = make_step(batch, heads, kv_heads, length, dim, dtype, "cuda", gen, rotary)
    mask = make_mask(mask_kind, batch, heads, 1, length, gen, "cuda")
    if mask is not None and mask.dtype == torch.bool:
        mask[..., position] = True  # the new position takes part (as a causal mask has it)
    cpu = [None if t is None else t.cpu() for t in step]
    ref, k_ref, v_ref = append_reference(*cpu[:5], position, None if mask is None else mask.cpu(),
                                         *cpu[5:], 0.7 / math.sqrt(dim))
    _poisoned_allocator(batch * heads * dim * 2)
    out = run_append(step, position, mask, 0.7 / math.sqrt(dim))
    assert out.shape == (batch, 1, heads, dim) and out.is_contiguous()
    torch.testing.assert_close(out.float().cpu(), ref, **tolerance(dtype))
    assert torch.equal(step[3].cpu(), k_ref) and torch.equal(step[4].cpu(), v_ref)


@gpu
def test_gpu_append_never_reads_the_stale_row():
    """The new row's old cache contents (NaN here) are never read: the kernel uses k_new and
    v_new for it, whichever CTA writes the cache."""
    gen = torch.Generator().manual_seed(16)
    step = make_step(2, 32, 8, 1000, 128, torch.bfloat16, "cuda", gen)
    position = 600
    cpu = [t.cpu() for t in step]
    ref, k_ref, v_ref = append_reference(*cpu[:5], position, None, *cpu[5:], None)
    step[3][:, :, position], step[4][:, :, position] = float("nan"), float("nan")
    out = run_append(step, position, None, None)
    torch.testing.assert_close(out.float().cpu(), ref, **tolerance(torch.bfloat16))
    assert torch.equal(step[3].cpu(), k_ref) and torch.equal(step[4].cpu(), v_ref)


@gpu
def test_gpu_append_layout_of_new_rows_and_errors():
    """k_new / v_new / cos of other layouts (copied by the op); the caches' layout refused."""
    gen = torch.Generator().manual_seed(17)
    q, k_new, v_new, k_cache, v_cache, cos, sin = make_step(2, 8, 2, 50, 64, torch.float16,
                                                            "cuda", gen)
    odd = torch.empty(2, 2, 1, 65, dtype=torch.float16, device="cuda")[..., 1:]
    odd.copy_(k_new)  # an unaligned start
    ref, k_ref, _ = append_reference(*(t.cpu() for t in (q, k_new, v_new, k_cache, v_cache)), 9,
                                     None, cos.cpu(), sin.cpu(), None)
    out = cute_gemm.decode_attention_append(q, odd, v_new, k_cache, v_cache,
                                            torch.tensor(9, device="cuda"), cos=cos, sin=sin)
    torch.testing.assert_close(out.float().cpu(), ref, **tolerance(torch.float16))
    assert torch.equal(k_cache.cpu(), k_ref)
    strided = torch.zeros(2, 2, 50, 68, dtype=torch.float16, device="cuda")[..., :64]
    with pytest.raises(RuntimeError, match="decode_attention_append: k_cache must have "
                                           "contiguous rows"):
        cute_gemm.decode_attention_append(q, k_new, v_new, strided, v_cache,
                                          torch.tensor(9, device="cuda"), cos=cos, sin=sin)
    with pytest.raises(RuntimeError, match="position must be on q's device"):
        cute_gemm.decode_attention_append(q, k_new, v_new, k_cache, v_cache, torch.tensor(9),
                                          cos=cos, sin=sin)


@gpu
def test_gpu_append_position_out_of_range_stops_the_kernel():
    """Read on the device, an out-of-range position cannot be refused before the launch: the
    kernel stops with a device-side error and a message (in a child process: the error ends the
    process's CUDA context)."""
    code = ("import torch, cute_gemm\n"
            "z = lambda *s: torch.zeros(*s, dtype=torch.float16, device='cuda')\n"
            "out = cute_gemm.decode_attention_append(z(1, 8, 1, 64), z(1, 2, 1, 64), "
            "z(1, 2, 1, 64), z(1, 2, 16, 64), z(1, 2, 16, 64), "
            "torch.tensor(16, device='cuda'))\n"
            "torch.cuda.synchronize()\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300, env=dict(os.environ))
    assert done.returncode != 0
    assert "position 16 is outside the cache's 16 rows" in done.stdout + done.stderr


@gpu
def test_gpu_append_cuda_graph_and_compile():
    """The position read on the device: a compiled function captured in a CUDA graph appends at
    whatever row the position tensor holds at each replay, and the caches (graph inputs mutated
    in place) hold every appended row."""
    gen = torch.Generator().manual_seed(18)
    q, k_new, v_new, k_cache, v_cache, cos, sin = make_step(4, 32, 8, 700, 128, torch.bfloat16,
                                                            "cuda", gen)
    position = torch.tensor(0, device="cuda")
    k_expected, v_expected = k_cache.cpu(), v_cache.cpu()

    def step(q, k_new, v_new, position):
        mask = (torch.arange(700, device=q.device) <= position).view(1, 1, 1, 700)
        out = cute_gemm.decode_attention_append(q, k_new, v_new, k_cache, v_cache, position,
                                                mask, cos=cos, sin=sin)
        position.add_(1)
        return out * 2

    compiled = torch.compile(step, fullgraph=True)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        compiled(q, k_new, v_new, position)  # appends row 0
    torch.cuda.current_stream().wait_stream(stream)
    _, k_expected, v_expected = append_reference(
        *(t.cpu() for t in (q, k_new, v_new)), k_expected, v_expected, 0, None, cos.cpu(),
        sin.cpu(), None)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = compiled(q, k_new, v_new, position)
    position.fill_(1)
    for row in (1, 2, 3):
        for t in (q, k_new, v_new):
            t.copy_(torch.randn(t.shape, generator=gen).to(t.dtype))
        mask = (torch.arange(700) <= row).view(1, 1, 1, 700)
        ref, k_expected, v_expected = append_reference(
            *(t.cpu() for t in (q, k_new, v_new)), k_expected, v_expected, row, mask, cos.cpu(),
            sin.cpu(), None)
        graph.replay()
        torch.testing.assert_close(out.float().cpu(), ref * 2, atol=3.2e-2, rtol=8e-3)
        assert int(position) == row + 1
    assert torch.equal(k_cache.cpu(), k_expected) and torch.equal(v_cache.cpu(), v_expected)


@gpu
@needs_transformers
@pytest.mark.parametrize("compiled", [False, True])
def test_gpu_transformers_append_matches_sdpa(monkeypatch, compiled):
    model = _llama(torch.bfloat16, "cuda")
    prompt = torch.randint(0, 500, (3, 11), generator=torch.Generator().manual_seed(19)).cuda()
    ref = _decode_logits(model, prompt, 6, "cuda", torch.bfloat16)
    calls = [] if compiled else _count_append(monkeypatch)
    cga.use_decode_attention(model)
    step = torch.compile(model, fullgraph=True) if compiled else None
    got = _decode_logits(model, prompt, 6, "cuda", torch.bfloat16, step_fn=step)
    assert compiled or len(calls) == 6 * 2
    assert (got - ref).abs().max() <= 0.02 * ref.abs().max()
    assert (got.argmax(-1) == ref.argmax(-1)).float().mean() >= 0.9
