"""The mixed GEMM's L2 prefetch hint (``l2_prefetch``: bytes a later kernel reads, asked of L2
before the kernel waits for the one before it), ``QuantLinear.set_l2_prefetch`` and
``cute_gemm.chain_l2_prefetch``. A hint never changes a result, so every check compares against
the same call without it, bit for bit. On the CPU: the ops' checks and fake kernels, opcheck, the
layer's link (validation, not a submodule, not saved) and the model-level chaining of a tiny
Llama. On a GPU: every kernel kind with prefetch ranges of awkward sizes and offsets, the
partials op, a compiled linked model against eager, and a CUDA graph."""

import copy
import io

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

import cute_gemm
from cute_gemm.nn import QuantLinear

transformers = pytest.importorskip("transformers")

MIXED = torch.ops.cute_gemm.mixed_gemm.default
PARTIALS = torch.ops.cute_gemm.mixed_gemm_partials.default
GPU = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def _randn(*shape, dtype=torch.float16, seed=0, device="cpu"):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g).to(dtype=dtype, device=device)


def _qweight(n, k, bits=4, group=128, symmetric=True, dtype=torch.float16, seed=0, device="cpu"):
    return cute_gemm.quantize(_randn(n, k, dtype=dtype, seed=seed, device=device), bits, group,
                              symmetric)


def _args(qw, a, bias=None):
    return (a, qw.packed, qw.scales, qw.zeros, qw.bits, qw.group_size, qw.shape[1], bias)


def _llama(layers=2, dtype=torch.float16):
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        hidden_size=128, intermediate_size=256, num_hidden_layers=layers, num_attention_heads=4,
        num_key_value_heads=2, head_dim=32, vocab_size=256, max_position_embeddings=64)
    return transformers.LlamaForCausalLM(config).eval().to(dtype)


# ------------------------------------------------------------------------------------------ CPU


def test_cpu_op_ignores_the_hint():
    qw = _qweight(24, 256, seed=1)
    a, bias = _randn(5, 256, seed=2), _randn(24, seed=3)
    ref = MIXED(*_args(qw, a, bias))
    nxt = torch.randint(0, 100, (1000,), dtype=torch.int32)
    assert torch.equal(MIXED(*_args(qw, a, bias), None, None, nxt), ref)
    assert torch.equal(cute_gemm.mixed_gemm(a, qw, bias, l2_prefetch=nxt), ref)
    parts = PARTIALS(*_args(qw, a)[:-1], None, nxt)
    assert torch.equal(parts, PARTIALS(*_args(qw, a)[:-1]))


@pytest.mark.parametrize("op", [MIXED, PARTIALS], ids=["mixed_gemm", "partials"])
def test_non_contiguous_prefetch_refused(op):
    qw = _qweight(16, 128, seed=4)
    a = _randn(3, 128, seed=5)
    strided = torch.zeros(64, 4, dtype=torch.int32)[:, 0]
    extra = (None, None, strided) if op is MIXED else (None, strided)
    args = _args(qw, a) if op is MIXED else _args(qw, a)[:-1]
    with pytest.raises(RuntimeError, match="l2_prefetch must be contiguous.*strides"):
        op(*args, *extra)
    with FakeTensorMode(allow_non_fake_inputs=True):  # the fake kernel's own check
        with pytest.raises(RuntimeError, match="l2_prefetch must be contiguous"):
            op(*(torch.empty_like(t) if isinstance(t, torch.Tensor) else t for t in args),
               *extra)


def test_prefetch_on_another_device_refused():
    qw = _qweight(16, 128, seed=6)
    a = _randn(3, 128, seed=7)
    with pytest.raises(RuntimeError, match="l2_prefetch must be on the same device as a"):
        MIXED(*_args(qw, a), None, None, torch.empty(64, device="meta"))


def test_cpu_opcheck_with_prefetch():
    qw = _qweight(24, 256, bits=4, group=64, symmetric=False, seed=8)
    a, bias = _randn(7, 256, seed=9), _randn(24, seed=10)
    nxt = torch.zeros(4096, dtype=torch.uint8)
    torch.library.opcheck(MIXED, _args(qw, a, bias) + (None, None, nxt))
    torch.library.opcheck(PARTIALS, _args(qw, a)[:-1] + (None, nxt))


def test_layer_link_validation_and_state():
    first = QuantLinear.from_linear(torch.nn.Linear(128, 64, dtype=torch.float16), group_size=32)
    second = QuantLinear.from_linear(torch.nn.Linear(64, 256, dtype=torch.float16), group_size=32)
    with pytest.raises(TypeError, match="layer must be a QuantLinear or None; got Linear"):
        first.set_l2_prefetch(torch.nn.Linear(2, 2), 1024)
    for bad in (0, 15, 1.5, True, "1024"):
        with pytest.raises(ValueError, match="max_bytes must be an int >= 16"):
            first.set_l2_prefetch(second, bad)
    keys = set(first.state_dict())
    assert first.set_l2_prefetch(second, 4096) is first
    assert first.l2_prefetch == (second, 4096)
    assert set(first.state_dict()) == keys  # not saved
    assert [name for name, _ in first.named_modules()] == [""]  # not a submodule
    # The op's view: the first max_bytes of the linked packed weight, no copy; only on CUDA.
    x = _randn(2, 128, seed=11)
    assert first._l2_prefetch_bytes(x) is None
    buf = io.BytesIO()
    torch.save(first, buf)
    first.set_l2_prefetch(None, 0)
    assert first.l2_prefetch is None


def test_chain_links_every_layer_and_keeps_logits():
    model = _llama()
    ids = torch.randint(0, 256, (2, 9), generator=torch.Generator().manual_seed(12))
    for fuse, target in ((True, "gate_up_proj"), (False, "gate_proj")):
        m = copy.deepcopy(model)
        cute_gemm.quantize_model(m, group_size=32, fuse=fuse, progress=False)
        with torch.no_grad():
            ref = m(ids).logits
        assert cute_gemm.chain_l2_prefetch(m) == []  # no default size off CUDA
        links = cute_gemm.chain_l2_prefetch(m, 1 << 20)
        assert links == [(f"model.layers.{i}.self_attn.o_proj", f"model.layers.{i}.mlp.{target}")
                         for i in range(2)]
        for i, layer in enumerate(m.model.layers):
            assert layer.self_attn.o_proj.l2_prefetch == (getattr(layer.mlp, target), 1 << 20)
        with torch.no_grad():
            assert torch.equal(m(ids).logits, ref)
        # A copy links its own layers, not the original's.
        c = copy.deepcopy(m)
        copied = c.model.layers[0]
        assert copied.self_attn.o_proj.l2_prefetch[0] is getattr(copied.mlp, target)
        assert len(cute_gemm.chain_l2_prefetch(m, 0)) == 2
        assert all(layer.self_attn.o_proj.l2_prefetch is None for layer in m.model.layers)


def test_chain_leaves_models_without_quantized_pairs():
    model = _llama(layers=1)
    assert cute_gemm.chain_l2_prefetch(model, 1 << 20) == []  # nothing quantized
    with pytest.raises(TypeError, match="model must be a torch.nn.Module"):
        cute_gemm.chain_l2_prefetch("model")
    with pytest.raises(ValueError, match="max_bytes must be None, 0"):
        cute_gemm.chain_l2_prefetch(model, 8)


# ------------------------------------------------------------------------------------------ GPU


def _kernel_schedules():
    schedules = ["kernel=decode", "kernel=decode,splits=3", "kernel=mma", "kernel=mma,splits=2"]
    if torch.cuda.is_available() and cute_gemm.device_spec().wgmma:
        schedules += ["kernel=wgmma,tile_m=16,splits=4", "kernel=wgmma,tile_m=64",
                      "kernel=wgmma,tile_m=128"]
    return schedules


@GPU
@pytest.mark.gpu
@pytest.mark.parametrize("schedule", _kernel_schedules())
def test_gpu_every_kernel_bit_identical_with_the_hint(schedule):
    dev = "cuda"
    qw = _qweight(4104, 4224, bits=4, group=128, seed=13, device=dev)
    m = 5 if "decode" in schedule else 33
    a, bias = _randn(m, 4224, seed=14, device=dev), _randn(4104, seed=15, device=dev)
    nxt = _qweight(8192, 4096, seed=16, device=dev).packed
    ref = cute_gemm.mixed_gemm(a, qw, bias, schedule=schedule)
    flat = nxt.view(torch.uint8).view(-1)
    ranges = [nxt,                      # 16 MB: several pieces per lane
              flat[3:1003],             # unaligned both ends: rounded inward
              flat[5:17],               # less than one 16-byte unit after rounding: nothing
              flat[:0],                 # empty
              a]                        # the kernel's own input
    for hint in ranges:
        out = cute_gemm.mixed_gemm(a, qw, bias, schedule=schedule, l2_prefetch=hint)
        assert torch.equal(out, ref), (schedule, hint.numel())
    plan = cute_gemm.mixed_plan(m, 4104, 4224, 4, 128, torch.float16, schedule=schedule)
    if plan.kernel != "dense":
        parts = PARTIALS(*_args(qw, a)[:-1], schedule, nxt)
        assert torch.equal(parts, PARTIALS(*_args(qw, a)[:-1], schedule))
    torch.cuda.synchronize()


@GPU
@pytest.mark.gpu
def test_gpu_linked_model_compiled_and_graphed_matches_eager():
    # A 2-layer fused Llama with each o_proj prefetching its gate/up weight: eager logits equal
    # the unlinked model's; compiled (fullgraph) with the link equals compiled without it.
    model = _llama().cuda()
    cute_gemm.quantize_model(model, group_size=32, fuse=True, progress=False)
    ids = torch.randint(0, 256, (1, 7), device="cuda",
                        generator=torch.Generator(device="cuda").manual_seed(17))
    with torch.no_grad():
        ref = model(ids).logits
        assert len(cute_gemm.chain_l2_prefetch(model)) == 2
        size = model.model.layers[0].self_attn.o_proj.l2_prefetch[1]
        assert size == torch.cuda.get_device_properties(0).L2_cache_size // 2
        assert torch.equal(model(ids).logits, ref)
        torch._dynamo.reset()
        compiled = torch.compile(model, fullgraph=True)
        linked = compiled(ids).logits
        cute_gemm.chain_l2_prefetch(model, 0)
        torch._dynamo.reset()
        unlinked = torch.compile(model, fullgraph=True)(ids).logits
        assert torch.equal(linked, unlinked)
        torch._dynamo.reset()

        # One layer's MLP input through o_proj + gate/up in a CUDA graph, linked.
        cute_gemm.chain_l2_prefetch(model, 1 << 16)
        layer = model.model.layers[0]
        x = torch.randn(1, 1, 128, device="cuda", dtype=torch.float16)

        def step():
            return layer.mlp(layer.self_attn.o_proj(x))

        eager = step()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            step()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static = step()
        graph.replay()
        assert torch.equal(static, eager)
