"""cute_gemm::mixed_gemm_partials (a GEMM's fp32 partial sums along K, left to the caller) and
cute_gemm.inductor.split_partials (the post-grad pass of decode_compilation() that adds them in
the consumer's kernel). On the CPU: the op's reference, fake kernel, registration and refusals,
the planner's partial-sums plans, and the pass's rewrite of FX graphs on fake CUDA tensors with
the H100's plans. On a GPU: the partials of every kernel kind against the op's own output (the
sum in split order, + bias, rounded, is the reduce kernel's result bit for bit), and a compiled
projection + residual add + RMSNorm whose norm kernel adds the partials, against eager, and a
fused q/k/v projection whose partials the rotary / cache kernel adds under decode_compilation's
realize_reads (one Triton kernel fewer than at inductor's threshold where K splits in 5)."""

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

import cute_gemm
from cute_gemm import inductor as ci
from cute_gemm import ops
from helpers import rotary_append

PARTIALS = torch.ops.cute_gemm.mixed_gemm_partials.default
MIXED = torch.ops.cute_gemm.mixed_gemm.default
GPU = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def _randn(*shape, dtype=torch.float16, seed=0, scale=1.0, device="cpu"):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=g) * scale).to(dtype=dtype, device=device)


def _qweight(n, k, bits=4, group=128, symmetric=True, dtype=torch.float16, seed=0, device="cpu"):
    w = _randn(n, k, dtype=dtype, seed=seed, scale=0.1, device=device)
    return cute_gemm.quantize(w, bits, group, symmetric)


def _fake_weight(n, k, dtype=torch.bfloat16):
    """An INT4 g128 QuantizedWeight of empty tensors on CUDA (under a FakeTensorMode)."""
    from cute_gemm import weight_format as wf
    packed = torch.empty(wf.packed_shape(n, k, 4), dtype=torch.int32, device="cuda")
    scales = torch.empty(k // 128, n, dtype=dtype, device="cuda")
    return cute_gemm.QuantizedWeight(packed, scales, None, 4, 128, (n, k))


def _partials(a, qw, schedule=None):
    return PARTIALS(a, qw.packed, qw.scales, qw.zeros, qw.bits, qw.group_size, qw.shape[1],
                    schedule)


def _in_split_order(parts, bias=None):
    """The reduce kernel's arithmetic: the partial sums added in split order in fp32, + bias,
    one rounding is left to the caller."""
    total = parts[0]
    for s in range(1, parts.shape[0]):
        total = total + parts[s]
    return total if bias is None else total + bias.float()


# ------------------------------------------------------------------------------------------ CPU


@pytest.mark.parametrize("bits,group,symmetric,dtype", [
    (4, 128, True, torch.float16), (4, 32, False, torch.bfloat16), (8, -1, True, torch.bfloat16),
    (8, 64, False, torch.float16)])
def test_cpu_partials_are_the_reference_product(bits, group, symmetric, dtype):
    for m, n, k in [(1, 8, 128), (7, 24, 256), (33, 136, 384)]:
        seed = hash((bits, group, symmetric, m, n, k)) % 10000
        qw = _qweight(n, k, bits, group, symmetric, dtype, seed=seed)
        a = _randn(m, k, dtype=dtype, seed=seed + 1)
        bias = _randn(n, dtype=dtype, seed=seed + 2)
        parts = _partials(a, qw)
        assert parts.shape == (1, m, n) and parts.dtype == torch.float32  # one split on CPU
        ref = a.float() @ qw.dequantize().float().t()
        torch.testing.assert_close(parts[0], ref, rtol=1e-6, atol=1e-5)
        # mixed_gemm's CPU result is that sum + bias, rounded once.
        out = MIXED(a, qw.packed, qw.scales, qw.zeros, bits, group, k, bias)
        assert torch.equal(out, _in_split_order(parts, bias).to(dtype))


def test_cpu_partials_empty_problems():
    qw = _qweight(16, 128)
    assert _partials(torch.zeros(0, 128, dtype=torch.float16), qw).shape == (1, 0, 16)


def test_partials_refusals():
    qw = _qweight(16, 128)
    a = _randn(3, 128)
    prefix = "cute_gemm.mixed_gemm_partials: "
    with pytest.raises(RuntimeError, match=prefix + "a must have dtype torch.float16 or "):
        _partials(a.float(), qw)
    with pytest.raises(RuntimeError, match=prefix + r"k must equal a.size\(1\)"):
        PARTIALS(a, qw.packed, qw.scales, qw.zeros, 4, 128, 256)
    with pytest.raises(ValueError, match=prefix + ".*splits"):
        _partials(a, qw, "splits=0")
    with pytest.raises(ValueError, match="nonsense"):
        _partials(a, qw, "nonsense=1")
    # No gradient: refused by name where autograd would need one, allowed under no_grad.
    with pytest.raises(RuntimeError, match="mixed_gemm_partials: has no gradient"):
        _partials(a.clone().requires_grad_(), qw)
    with torch.no_grad():
        assert _partials(a.clone().requires_grad_(), qw).shape == (1, 3, 16)


def test_partials_fake_kernel_and_opcheck():
    qw = _qweight(24, 256, 8, 64, False, torch.bfloat16, seed=3)
    a = _randn(7, 256, dtype=torch.bfloat16, seed=4)
    args = (a, qw.packed, qw.scales, qw.zeros, 8, 64, 256, None)
    torch.library.opcheck(PARTIALS, args)
    torch.library.opcheck(PARTIALS, args[:-1] + ("splits=2",))
    meta = [t.to("meta") if isinstance(t, torch.Tensor) else t for t in args]
    out = PARTIALS(*meta)
    assert out.shape == (1, 7, 24) and out.dtype == torch.float32 and out.device.type == "meta"
    with pytest.raises(RuntimeError, match=r"cute_gemm.mixed_gemm_partials: k must equal a.size"):
        PARTIALS(*meta[:6], 128, None)


def test_partials_fake_kernel_plans_for_the_device(monkeypatch):
    # On a CUDA (fake) tensor the fake kernel returns the plan's split count for that device.
    monkeypatch.setattr(ops, "device_spec", lambda device=None: cute_gemm.device_spec("h100"))
    plan = cute_gemm.mixed_plan(16, 4096, 4096, 4, 128, torch.bfloat16, device="h100")
    assert plan.splits > 1  # the H100's batch-16 o_proj splits K
    with FakeTensorMode():
        qw = _fake_weight(4096, 4096)
        a = torch.empty(16, 4096, dtype=torch.bfloat16, device="cuda")
        parts = _partials(a, qw)
        assert parts.shape == (plan.splits, 16, 4096) and parts.dtype == torch.float32
        assert parts.device.type == "cuda"
        one = _partials(a[:1], qw)
        assert one.shape == (1, 1, 4096)  # the decode kernel at M = 1: unsplit


def test_partial_sums_count_and_plan():
    h100 = cute_gemm.device_spec("h100")
    for m, n, k in [(1, 4096, 4096), (16, 4096, 4096), (16, 6144, 4096), (16, 4096, 14336),
                    (300, 4096, 4096), (4096, 4096, 4096)]:
        plan = ops._C._mixed_plan(m, n, k, 4, 128, True, h100, "", False, True)
        normal = cute_gemm.mixed_plan(m, n, k, 4, 128, torch.bfloat16, device="h100")
        assert ops.partial_sums_count(m, n, k, 4, 128, torch.bfloat16, "h100") == (
            1 if plan.kernel == "dense" else plan.splits)
        # The same kernel, tile and splits as mixed_gemm's plan; only where the sums go differs
        # (but see test_partials_split_a_long_k_decode_grid_into_small_ctas).
        for field in ("kernel", "instance", "tile_m", "tile_n", "splits", "warps", "grid"):
            assert getattr(plan, field) == getattr(normal, field), (m, n, k, field)
        assert plan.partials and plan.via_workspace and not normal.partials
        assert plan.workspace_bytes == plan.splits * m * n * 4
        assert "partial sum" in str(plan) and "no reduce kernel" in str(plan)
    assert ops.partial_sums_count(16, 4096, 4096, 4, 128, torch.float16,
                                  torch.device("cpu")) == 1
    assert ops.partial_sums_count(0, 4096, 4096, 4, 128, torch.float16, "h100") == 1
    with pytest.raises(ValueError, match="partial sums are for ungated problems"):
        ops._C._mixed_plan(16, 8192, 4096, 4, 128, True, h100, "", True, True)


def _partials_plan(m, n, k, bits, group, dtype, device, schedule=""):
    return ops._C._mixed_plan(m, n, k, bits, group, dtype == torch.bfloat16,
                              cute_gemm.device_spec(device), schedule, False, True)


@pytest.mark.parametrize("device", ["h100", "h200"])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
def test_partials_split_a_long_k_decode_grid_into_small_ctas(device, dtype):
    # INT4 decode with the sums left to the caller, K >= 8192, a one-wave grid of CTAs of more than
    # 4 one-warp k slices (Llama-3-8B's down projection 14336x4096 at M = 1: 128 CTAs of 16
    # warps): CTAs of 4 warps in 4 splits, each warp keeping its 7 k blocks (kPartialsCtaWarps).
    for m in (1, 2):
        normal = cute_gemm.mixed_plan(m, 4096, 14336, 4, 128, dtype, device=device)
        plan = _partials_plan(m, 4096, 14336, 4, 128, dtype, device)
        assert (normal.kernel, normal.warps, normal.splits) == ("decode", 16, 1), normal
        assert (plan.kernel, plan.instance, plan.tile_n) == ("decode", normal.instance, 32)
        assert (plan.warps, plan.col_warps, plan.k_slices, plan.splits) == (4, 1, 4, 4), plan
        assert tuple(plan.grid) == (128, 1, 4) and plan.ctas_per_sm * 132 >= 512, plan
        assert plan.workspace_bytes == 4 * m * 4096 * 4
        assert ops.partial_sums_count(m, 4096, 14336, 4, 128, dtype, device) == 4
        # The same plan as the op's with that schedule (what the GPU test runs).
        same = cute_gemm.mixed_plan(m, 4096, 14336, 4, 128, dtype, device=device,
                                    schedule="kernel=decode,warps=4,splits=4")
        for field in ("instance", "warps", "k_slices", "splits", "grid", "ctas_per_sm"):
            assert getattr(same, field) == getattr(plan, field), field
    # A schedule that names the kernel only leaves the CTA shape to the rule.
    assert _partials_plan(1, 4096, 14336, 4, 128, dtype, device, "kernel=decode").splits == 4
    # Not: K = 4096 (o_proj: no gain measured), INT8, a scheduled CTA shape or split count.
    for n, k, bits, group, schedule in [(4096, 4096, 4, 128, ""), (4096, 14336, 8, -1, ""),
                                        (4096, 14336, 4, 128, "warps=16"),
                                        (4096, 14336, 4, 128, "kernel=decode,splits=1")]:
        plan = _partials_plan(1, n, k, bits, group, dtype, device, schedule)
        normal = cute_gemm.mixed_plan(1, n, k, bits, group, dtype, device=device,
                                      schedule=schedule or None)
        assert (plan.warps, plan.splits) == (normal.warps, normal.splits), (n, k, bits, schedule)
    # The A100's plan there is one wave of 6-warp CTAs: not whole 4-warp CTAs, unchanged.
    a100 = _partials_plan(1, 4096, 14336, 4, 128, dtype, "a100")
    a100_op = cute_gemm.mixed_plan(1, 4096, 14336, 4, 128, dtype, device="a100")
    assert (a100.warps, a100.splits) == (a100_op.warps, a100_op.splits) == (6, 1)
    # M = 5 on Hopper: 12 one-warp slices -> 3 splits of 4.
    m5 = _partials_plan(5, 4096, 14336, 4, 128, dtype, device)
    assert (m5.warps, m5.col_warps, m5.splits) == (4, 1, 3), m5


# ----------------------------------------------------------------------- the pass, on the CPU


def _graph_of(m, n, k, bias=True, activation=None, schedule=None, dtype=torch.bfloat16):
    """A post-grad-like FX graph: out = mixed_gemm(a, W) (+ bias) + residual, on fake CUDA
    tensors."""
    fake_mode = FakeTensorMode()
    with fake_mode:
        qw = _fake_weight(n, k, dtype)
        values = {"a": torch.empty(m, k, dtype=dtype, device="cuda"),
                  "qweight": qw.packed, "scales": qw.scales,
                  "bias": torch.empty(n, dtype=dtype, device="cuda"),
                  "residual": torch.empty(m, n // 2 if activation else n, dtype=dtype,
                                          device="cuda")}
    g = torch.fx.Graph()
    nodes = {}
    for name, value in values.items():
        nodes[name] = g.placeholder(name)
        nodes[name].meta["val"] = value
    with fake_mode:
        out_val = torch.empty(m, n // 2 if activation else n, dtype=dtype, device="cuda")
    gemm = g.call_function(MIXED, (nodes["a"], nodes["qweight"], nodes["scales"], None, 4, 128, k,
                                   nodes["bias"] if bias else None, schedule, activation))
    gemm.meta["val"] = out_val
    add = g.call_function(torch.ops.aten.add.Tensor, (gemm, nodes["residual"]))
    with fake_mode:
        add.meta["val"] = out_val + values["residual"]
    g.output(add)
    return g


def _h100(device):
    return cute_gemm.device_spec("h100")


@pytest.mark.parametrize("bias", [False, True], ids=["nobias", "bias"])
def test_pass_rewrites_a_split_gemm_into_partials_and_adds(bias):
    m, n, k = 16, 4096, 4096
    splits = cute_gemm.mixed_plan(m, n, k, 4, 128, torch.bfloat16, device="h100").splits
    g = _graph_of(m, n, k, bias=bias)
    assert ci.split_partials(g, spec_for=_h100) == 1
    targets = [node.target for node in g.nodes if node.op == "call_function"]
    assert MIXED not in targets and targets.count(PARTIALS) == 1
    aten = torch.ops.aten
    assert targets.count(aten.select.int) == splits
    # splits - 1 adds of partials, one for the bias, the graph's own residual add.
    assert targets.count(aten.add.Tensor) == splits - 1 + bias + 1
    parts = next(node for node in g.nodes if node.target is PARTIALS)
    assert parts.meta["val"].shape == (splits, m, n) and parts.meta["val"].dtype == torch.float32
    selects = [node.args[2] for node in g.nodes if node.target is aten.select.int]
    assert selects == list(range(splits))  # added in split order
    convert = torch.ops.prims.convert_element_type.default
    rounding = [node for node in g.nodes if node.target is convert]
    assert rounding[-1].args[1] == torch.bfloat16
    assert rounding[-1].meta["val"].shape == (m, n)
    g.lint()


def _norm_after(g, node):
    """Appends an RMSNorm's statistics to FX graph ``g`` after ``node`` (a [M, N] value): fp32,
    squared, mean over N; the graph returns it beside its output."""
    aten, convert = torch.ops.aten, torch.ops.prims.convert_element_type.default
    out = next(n for n in g.nodes if n.op == "output")
    with g.inserting_before(out):
        h = g.call_function(convert, (node, torch.float32))
        sq = g.call_function(aten.pow.Tensor_Scalar, (h, 2))
        mean = g.call_function(aten.mean.dim, (sq, [-1], True))
    out.args = ((out.args[0], mean),)
    return mean


def test_pass_leaves_gemms_into_reductions_to_their_reduce_kernel():
    # partials_into_reductions_max_m: a split GEMM whose sum reaches a reduction (the residual
    # add + RMSNorm after o / down) stays a mixed_gemm call above that M (its reduce kernel adds
    # the partial sums over the GPU); one whose sum only meets pointwise ops is rewritten at any
    # M, and None rewrites both. The default is DEFAULT_PARTIALS_INTO_REDUCTIONS_MAX_M.
    n, k = 4096, 4096
    for m, max_m, norm, rewritten in ((16, 8, True, 0), (16, 15, True, 0), (16, 16, True, 1),
                                      (16, 0, False, 1), (16, None, True, 1), (9, 8, True, 0),
                                      (16, 0, True, 0)):
        g = _graph_of(m, n, k)
        if norm:
            residual_add = next(node for node in g.nodes
                                if node.target is torch.ops.aten.add.Tensor)
            _norm_after(g, residual_add)
        got = ci.split_partials(g, spec_for=_h100, partials_into_reductions_max_m=max_m)
        assert got == rewritten, (m, max_m, norm)
        assert (MIXED in [node.target for node in g.nodes]) == (not rewritten)
        g.lint()
    # By default up to M = 8: H100's partials plans split 4096x14336 in 4 at M = 1, in 8 at 16.
    assert ci.DEFAULT_PARTIALS_INTO_REDUCTIONS_MAX_M == 8
    for m, rewritten in ((1, 1), (16, 0)):
        g = _graph_of(m, 4096, 14336)
        _norm_after(g, next(node for node in g.nodes if node.target is torch.ops.aten.add.Tensor))
        assert ci.split_partials(g, spec_for=_h100) == rewritten, m


def test_decode_compilation_passes_partials_into_reductions(monkeypatch):
    # The block's pass leaves the GEMM before a norm to its reduce kernel above M =
    # partials_into_reductions_max_m (DEFAULT_PARTIALS_INTO_REDUCTIONS_MAX_M = 8 by default) and
    # rewrites it up to there. (H100's partials plans split 4096x14336 in 4 at M = 1, in 8 at 16.)
    config = pytest.importorskip("torch._inductor.config")
    monkeypatch.setattr(ops, "device_spec", lambda device=None: _h100(device))
    assert ci.DEFAULT_PARTIALS_INTO_REDUCTIONS_MAX_M == 8
    for m, kwargs, rewritten in ((16, {}, False), (1, {}, True),
                                 (16, {"partials_into_reductions_max_m": None}, True),
                                 (16, {"partials_into_reductions_max_m": 16}, True),
                                 (1, {"partials_into_reductions_max_m": 0}, False)):
        g = _graph_of(m, 4096, 14336)
        _norm_after(g, next(node for node in g.nodes if node.target is torch.ops.aten.add.Tensor))
        with ci.decode_compilation(**kwargs):
            config.post_grad_custom_post_pass(g)
        assert (MIXED in [node.target for node in g.nodes]) == (not rewritten), (m, kwargs)


def test_reaches_reduction():
    # Through pointwise ops and reshapes, within the depth; not through other ops.
    aten = torch.ops.aten
    g = torch.fx.Graph()
    x = g.placeholder("x")
    v = g.call_function(aten.view.default, (x, [16, 4096]))
    y = g.call_function(aten.add.Tensor, (v, 1.0))
    mm = g.call_function(aten.mm.default, (x, x))
    g.output((y, mm))
    assert not ci.reaches_reduction(x)
    _norm_after(g, y)
    assert ci.reaches_reduction(x) and ci.reaches_reduction(v)
    assert not ci.reaches_reduction(x, depth=2)  # view, add, convert, pow, mean: 5 steps
    assert ci.reaches_reduction(x, depth=5)
    g2 = torch.fx.Graph()
    x2 = g2.placeholder("x")
    mm2 = g2.call_function(aten.mm.default, (x2, x2))
    g2.output(g2.call_function(aten.mean.dim, (mm2, [-1])))
    assert not ci.reaches_reduction(x2)  # a matmul stands between


@pytest.mark.parametrize("case", ["decode", "gated", "dense"])
def test_pass_leaves_other_calls(case):
    # M = 1 (the decode kernel, unsplit), a gated call, a large-M plan without split-K.
    m, n, k, activation = {"decode": (1, 4096, 4096, None), "gated": (16, 8192, 4096, "silu_mul"),
                           "dense": (4096, 4096, 4096, None)}[case]
    g = _graph_of(m, n, k, activation=activation)
    before = [node.target for node in g.nodes]
    assert ci.split_partials(g, spec_for=_h100) == 0
    assert [node.target for node in g.nodes] == before


def test_pass_leaves_a_symbolic_m():
    # Under dynamic shapes M has no value to plan for: the call stays (and its plan is the op's).
    from torch.fx.experimental.symbolic_shapes import ShapeEnv
    g = _graph_of(16, 4096, 4096)
    a = next(node for node in g.nodes if node.name == "a")
    env = ShapeEnv()
    with FakeTensorMode(shape_env=env):
        a.meta["val"] = torch.empty(env.create_unbacked_symint(), 4096, dtype=torch.bfloat16,
                                    device="cuda")
    assert ci.split_partials(g, spec_for=_h100) == 0
    assert MIXED in [node.target for node in g.nodes]


def test_pass_honours_the_schedule():
    # The call's schedule is the plan's: splits=3 on a shape the planner would not split.
    g = _graph_of(1, 4096, 4096, schedule="kernel=decode,splits=3")
    assert ci.split_partials(g, spec_for=_h100) == 1
    parts = next(node for node in g.nodes if node.target is PARTIALS)
    assert parts.args[-1] == "kernel=decode,splits=3" and parts.meta["val"].shape[0] == 3


def test_pass_leaves_a_call_pinned_to_sums_in_the_gemm():
    # reduce=cluster (the splits add their sums in the GEMM's cluster) and stream_k=N (the CTAs
    # hand their sums to each tile's owner): the call has no partial sums to hand on, and the
    # partials op would refuse the pin; reduce=kernel and stream_k=off are rewritten.
    m, n, k = 16, 4096, 4096
    assert cute_gemm.mixed_plan(m, n, k, 4, 128, torch.bfloat16, device="h100").reduce_in_cluster
    pinned = "tile_n=128,splits=1,stream_k=40"
    assert cute_gemm.mixed_plan(m, n, k, 4, 128, torch.bfloat16, device="h100",
                                schedule=pinned).stream_k_ctas == 40
    with pytest.raises(ValueError, match="stream_k=40 needs"):
        cute_gemm.ops.partial_sums_count(m, n, k, 4, 128, torch.bfloat16, "h100", pinned)
    for schedule, rewritten in (("reduce=cluster", 0), ("tile_n=64, reduce=cluster", 0),
                                (pinned, 0), ("tile_n=128, stream_k=40", 0),
                                ("stream_k=off", 1), ("reduce=kernel", 1), (None, 1)):
        g = _graph_of(m, n, k, schedule=schedule)
        assert ci.split_partials(g, spec_for=_h100) == rewritten, schedule
        assert (MIXED in [node.target for node in g.nodes]) == (rewritten == 0), schedule


def test_decode_compilation_installs_and_restores_the_pass():
    config = pytest.importorskip("torch._inductor.config")
    before = config.post_grad_custom_post_pass
    with ci.decode_compilation():
        inside = config.post_grad_custom_post_pass
        assert inside is not None and inside.uuid() is None
    assert config.post_grad_custom_post_pass is before
    with ci.decode_compilation(split_partials=False, batch_increments=False, split_argmax=False):
        assert config.post_grad_custom_post_pass is before
    with pytest.raises(TypeError, match="split_partials must be a bool; got int"):
        with ci.decode_compilation(split_partials=1):
            pass
    for bad, error in (("8", TypeError), (True, TypeError), (8.0, TypeError), (-1, ValueError)):
        with pytest.raises(error, match="partials_into_reductions_max_m must be"):
            with ci.decode_compilation(partials_into_reductions_max_m=bad):
                pass
    # A pass set before the block still runs, after ours.
    seen = []
    with config.patch({"post_grad_custom_post_pass": seen.append}):
        with ci.decode_compilation():
            g = torch.fx.Graph()
            g.output(None)
            config.post_grad_custom_post_pass(g)
    assert seen == [g]


# ------------------------------------------------------------------------------------------ GPU


# (M, N, K, bits, group, schedule): every kernel kind, split and unsplit, and the dense path.
GPU_CASES = [
    (1, 4096, 4096, 4, 128, None), (3, 1000 // 8 * 8, 384, 4, 32, None),
    (1, 4096, 14336, 4, 128, None), (2, 4000, 8320, 4, 128, None),
    (5, 4096, 14336, 8, -1, None), (1, 256, 4096, 4, 128, "kernel=decode,splits=4"),
    (16, 4096, 4096, 4, 128, None), (16, 6144, 4096, 4, 128, None),
    (16, 4096, 14336, 4, 128, None), (16, 4096, 4096, 8, -1, None),
    (12, 2048, 2048, 4, 64, "kernel=mma,splits=3"), (33, 512, 1024, 4, 128, "kernel=mma,splits=2"),
    (64, 1024, 4096, 4, 128, "kernel=wgmma,tile_m=64,splits=4"),
    (128, 4096, 4096, 4, 128, None), (256, 1024, 2048, 8, 128, "kernel=wgmma,tile_m=128,splits=2"),
    (100, 512, 1024, 4, 128, "kernel=dense")]


@GPU
@pytest.mark.parametrize("m,n,k,bits,group,schedule", GPU_CASES)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
def test_gpu_partials_add_up_to_the_op(m, n, k, bits, group, schedule, dtype):
    seed = hash((m, n, k, bits, group, schedule)) % 10000
    qw = _qweight(n, k, bits, group, group != 32, dtype, seed=seed, device="cuda")
    a = _randn(m, k, dtype=dtype, seed=seed + 1, device="cuda")
    bias = _randn(n, dtype=dtype, seed=seed + 2, device="cuda")
    parts = _partials(a, qw, schedule)
    splits = ops.partial_sums_count(m, n, k, bits, group, dtype, a.device, schedule)
    assert parts.shape == (splits, m, n) and parts.dtype == torch.float32
    plan = _partials_plan(m, n, k, bits, group, dtype, a.device, schedule or "")
    assert splits == (1 if plan.kernel == "dense" else plan.splits)
    # The op on the same plan (a long K's decode grid differs without the schedule).
    normal = cute_gemm.mixed_plan(m, n, k, bits, group, dtype, schedule=schedule)
    if (normal.warps, normal.splits) != (plan.warps, plan.splits):
        assert plan.kernel == "decode" and schedule is None, (plan, normal)
        schedule = (f"kernel=decode,warps={plan.warps},col_warps={plan.col_warps},"
                    f"splits={plan.splits}")
        assert cute_gemm.mixed_plan(m, n, k, bits, group, dtype, schedule=schedule).grid == \
            plan.grid
    out = MIXED(a, qw.packed, qw.scales, qw.zeros, bits, group, k, bias, schedule)
    if plan.kernel == "dense":
        # Another kernel's sums, + bias in fp32, against the op's rounded output: within 1% or
        # two roundings to the dtype, relative to the output's scale (bf16's step at |out| ~ 8
        # is 1/16, which a fixed atol of 1e-2 failed for some seeds).
        tol = max(1e-2, 2 * torch.finfo(dtype).eps)
        torch.testing.assert_close(parts[0] + bias.float(), out.float(), rtol=tol,
                                   atol=tol * out.abs().max().item())
    else:
        # The reduce kernel's sum, in split order, + bias, one rounding: the same bits.
        assert torch.equal(_in_split_order(parts, bias).to(dtype), out)
    ref = a.float() @ qw.dequantize(torch.float32).t()
    scale = ref.abs().max().item()
    torch.testing.assert_close(parts.sum(0), ref, rtol=2e-2, atol=2e-2 * scale)


class _Block(torch.nn.Module):
    """A projection, the residual add and an RMSNorm: what follows o_proj / down_proj."""

    def __init__(self, linear):
        super().__init__()
        self.proj = linear
        self.weight = torch.nn.Parameter(torch.rand(linear.out_features, dtype=torch.bfloat16,
                                                    device="cuda") + 0.5)

    def forward(self, x, residual):
        h = residual + self.proj(x)
        var = h.float().pow(2).mean(-1, keepdim=True)
        return h, (h.float() * torch.rsqrt(var + 1e-5)).to(h.dtype) * self.weight


@GPU
@pytest.mark.parametrize("m,k", [(1, 4096), (16, 4096), (1, 14336)])
@pytest.mark.parametrize("with_bias", [False, True], ids=["nobias", "bias"])
def test_gpu_compiled_block_adds_the_partials_in_its_norm(m, k, with_bias):
    # (M = 1, K = 14336: a down projection, split only where its sums are consumed.)
    from torch._inductor.utils import run_and_get_code
    torch.manual_seed(m)
    n = 4096
    linear = torch.nn.Linear(k, n, bias=with_bias, dtype=torch.bfloat16, device="cuda")
    block = _Block(cute_gemm.QuantLinear.from_linear(linear)).eval()
    x = torch.randn(m, k, dtype=torch.bfloat16, device="cuda")
    residual = torch.randn(m, n, dtype=torch.bfloat16, device="cuda")
    splits = ops.partial_sums_count(m, n, k, 4, 128, torch.bfloat16, x.device)
    with torch.no_grad():
        want = block(x, residual)
        results = {}
        # (split_partials, partials_into_reductions_max_m): 0 leaves the GEMM before the norm
        # to its reduce kernel, the default (8) does above M = 8.
        for split_partials, max_m in ((False, None), (True, None), (True, 0), (True, 8)):
            torch._dynamo.reset()
            compiled = torch.compile(block, fullgraph=True, dynamic=False)
            with ci.decode_compilation(split_partials=split_partials,
                                       partials_into_reductions_max_m=max_m):
                got, code = run_and_get_code(compiled, x, residual)
            results[split_partials, max_m] = got
            code = "\n".join(code)
            rewritten = split_partials and (max_m is None or m <= max_m) and splits > 1
            assert ("mixed_gemm_partials" in code) == rewritten, (split_partials, splits)
            assert ("cute_gemm.mixed_gemm.default" in code) == (not rewritten)
    torch._dynamo.reset()
    # (Inductor may keep the projection's sum in fp32 into the residual add: within rounding.)
    for got in results.values():
        torch.testing.assert_close(got[0].float(), want[0].float(), rtol=1.6e-2, atol=2e-2)
        torch.testing.assert_close(got[1].float(), want[1].float(), rtol=1.6e-2, atol=3e-2)


def _qkv_prologue(qkv, x, cos, sin, k_cache, v_cache, position):
    """A fused q/k/v projection of a 32 / 8 / 8-head Llama block (head dim 128), its slices as
    heads, the rotary embedding and the cache rows (rotary_append)."""
    q, k, v = qkv(x).split([4096, 1024, 1024], dim=-1)
    rows = x.shape[0]
    q, k, v = (t.view(rows, 1, -1, 128).transpose(1, 2) for t in (q, k, v))
    return rotary_append(q, k, v, cos, sin, k_cache, v_cache, position)


@GPU
def test_gpu_partials_read_by_several_kernels_added_where_read():
    # Batch 16's fused q/k/v projection: its partial sums feed the rotary embedding of q and k
    # and the cache rows of k and v. Inductor stores their sum in a kernel of its own when it
    # reads more than realize_reads_threshold inputs (its own 4); decode_compilation's default
    # lets the rotary / cache kernel add them where the plan splits K in up to that many.
    from torch._inductor.utils import run_and_get_code
    torch.manual_seed(16)
    m, k, n = 16, 4096, 6144
    linear = torch.nn.Linear(k, n, bias=False, dtype=torch.bfloat16, device="cuda")
    qkv = cute_gemm.QuantLinear.from_linear(linear).eval()
    x = torch.randn(m, k, dtype=torch.bfloat16, device="cuda")
    angle = torch.rand(1, 1, 1, 128, device="cuda") * 6.0
    cos, sin = angle.cos().bfloat16(), angle.sin().bfloat16()
    caches = [torch.randn(m, 8, 24, 128, dtype=torch.bfloat16, device="cuda") for _ in range(2)]
    position = torch.tensor([9], device="cuda")
    splits = ops.partial_sums_count(m, n, k, 4, 128, torch.bfloat16, x.device)
    with torch.no_grad():
        k_cache, v_cache = (c.clone() for c in caches)
        want = (_qkv_prologue(qkv, x, cos, sin, k_cache, v_cache, position), k_cache, v_cache)
        kernels = {}
        for realize_reads in (None, ci.DEFAULT_REALIZE_READS):
            torch._dynamo.reset()
            k_cache, v_cache = (c.clone() for c in caches)
            compiled = torch.compile(_qkv_prologue, fullgraph=True, dynamic=False)
            with ci.decode_compilation(realize_reads=realize_reads):
                q_rot, code = run_and_get_code(compiled, qkv, x, cos, sin, k_cache, v_cache,
                                               position)
            kernels[realize_reads] = "\n".join(code).count("@triton.jit")
            torch.testing.assert_close(q_rot.float(), want[0].float(), rtol=1.6e-2, atol=3e-2)
            torch.testing.assert_close(k_cache.float(), want[1].float(), rtol=1.6e-2, atol=3e-2)
            torch.testing.assert_close(v_cache.float(), want[2].float(), rtol=1.6e-2, atol=1e-2)
    torch._dynamo.reset()
    fewer = 4 < splits <= ci.DEFAULT_REALIZE_READS  # the sum stored at 4, not at the default
    assert kernels[ci.DEFAULT_REALIZE_READS] == kernels[None] - fewer, (splits, kernels)
