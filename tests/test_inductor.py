"""cute_gemm.inductor.persistent_reductions: the heuristic it adds to inductor's (on the CPU, with
stand-ins for a kernel's features and the graph's size reasoning), its scope (the handler and the
cache switch restored on exit, exceptions included), its argument checks, and on a GPU the Triton
code of a compiled residual add + RMSNorm (one pass inside the block, looped outside) and its
results. cute_gemm.inductor.decode_compilation: its scope and checks, on the CPU a split GEMM's
partial sums added where several kernels read them (realize_reads), and on a GPU a decode step's
rotary embedding and cache rows compiled into fewer kernels with the same results.
cute_gemm.inductor.batch_increments: the rewrite on hand-built graphs (what it batches, what it
leaves), a compiled static-cache decode on the CPU against eager, and on a GPU a compiled step
with and without the rewrite against eager. cute_gemm.inductor.split_argmax: the rewrite on traced
graphs against torch.argmax (-inf rows, NaN, ties, the padded chunk; what it leaves), compiled on
the CPU and, on a GPU, in two Triton kernels instead of one, against eager."""

import contextlib
import functools
import operator
import os
import sys
import types

import pytest
import sympy
import torch

import cute_gemm
from cute_gemm import inductor as ci
from helpers import rotary_append

config = pytest.importorskip("torch._inductor.config")
from torch._inductor.runtime.hints import ReductionHint  # noqa: E402
from torch._inductor.virtualized import V  # noqa: E402


class _Features:
    """What inductor's persistence rule reads of a kernel: its reduction hint and length."""

    def __init__(self, numel, hint=ReductionHint.INNER, rows=64):
        self.reduction_numel = sympy.Integer(numel)
        self.numel = sympy.Integer(rows)
        self._hint = hint

    def get_reduction_hint(self):
        return self._hint

    def strict_sum_rblock(self):
        return None

    def has_strict_sum_multirow_reduction(self):
        return False


class _Graph:
    """The graph's size reasoning for constant sizes."""

    sizevars = types.SimpleNamespace(
        statically_known_leq=lambda a, b: bool(sympy.Integer(a) <= sympy.Integer(b)),
        statically_known_geq=lambda a, b: bool(sympy.Integer(a) >= sympy.Integer(b)),
        optimization_hint=lambda e, fallback=None: int(e))


def _persistent(numel, hint=ReductionHint.INNER, cooperative=False):
    return bool(V.choices.should_use_persistent_reduction(_Features(numel, hint), cooperative))


@pytest.fixture
def graph():
    with V.set_graph_handler(_Graph()), config.patch({"triton.persistent_reductions": True,
                                                      "triton.multi_kernel": 0}):
        yield


def test_inductor_alone_loops_rows_past_1024(graph):
    # The premise: inductor's own rule keeps a 4096-element row (Llama-3-8B's norm) looped.
    assert _persistent(1024) and not _persistent(4096)


@pytest.mark.parametrize("max_elements, numel, expected", [
    (16384, 1024, True), (16384, 4096, True), (16384, 16384, True), (16384, 16385, False),
    (16384, 32768, False), (4096, 4096, True), (4096, 8192, False), (1024, 4096, False)])
def test_inner_rows_up_to_max_elements_go_persistent(graph, max_elements, numel, expected):
    with cute_gemm.inductor.persistent_reductions(max_elements):
        assert _persistent(numel) is expected
    assert _persistent(numel) is (numel <= 1024)  # inductor's rule again after the block


def test_other_reductions_keep_inductors_rule(graph):
    with cute_gemm.inductor.persistent_reductions():
        # Not along a row (a column sum: inductor's threshold 64), cooperative (64 rows: its
        # threshold stays 1024), or with persistent reductions switched off: inductor's answer
        # stands.
        assert not _persistent(4096, ReductionHint.DEFAULT)
        assert _persistent(64, ReductionHint.DEFAULT)
        assert not _persistent(4096, cooperative=True)
        with config.patch({"triton.persistent_reductions": False}):
            assert not _persistent(4096) and not _persistent(512)


def test_scope_restores_handler_and_caches():
    before, caches = V.choices, config.force_disable_caches
    with ci.persistent_reductions():
        assert V.choices is not before and config.force_disable_caches
        assert V.choices.get_config_heuristics is not None  # the wrapped handler's other choices
        with ci.persistent_reductions(4096):  # nested: wraps the outer block's handler
            inner = V.choices
            assert inner._base is not before
        assert V.choices is not inner
    assert V.choices is before and config.force_disable_caches == caches
    with pytest.raises(KeyError):
        with ci.persistent_reductions():
            raise KeyError("inside")
    assert V.choices is before and config.force_disable_caches == caches


@pytest.mark.parametrize("bad, error, words", [
    (4096.0, TypeError, "max_elements must be an int; got float"),
    (True, TypeError, "max_elements must be an int; got bool"),
    ("4096", TypeError, "got str"),
    (512, ValueError, "must be in [1024, 16384]"),
    (16385, ValueError, "got 16385")])
def test_bad_max_elements_refused(bad, error, words):
    before = V.choices
    with pytest.raises(error, match=words.replace("[", r"\[").replace("]", r"\]")):
        with ci.persistent_reductions(bad):
            pass
    assert V.choices is before


def test_torch_without_the_pieces_refused_by_name(monkeypatch):
    import torch._inductor.config as cfg
    monkeypatch.delattr(cfg.triton, "multi_kernel")
    with pytest.raises(RuntimeError, match="lacks triton.multi_kernel|lacks multi_kernel"):
        with ci.persistent_reductions():
            pass


def _add_rms_norm(residual, delta, weight):
    hidden = residual + delta
    h32 = hidden.float()
    normed = h32 * torch.rsqrt(h32.pow(2).mean(-1, keepdim=True) + 1e-5)
    return hidden, weight * normed.to(hidden.dtype)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (Triton kernels)")
@pytest.mark.parametrize("rows, hidden", [(1, 4096), (16, 4096), (3, 8192)])
def test_gpu_norm_compiles_in_one_pass_inside_the_block(rows, hidden):
    from torch._inductor.utils import run_and_get_code
    torch.manual_seed(rows)
    dt = torch.bfloat16
    residual = torch.randn(rows, hidden, device="cuda", dtype=dt)
    delta = torch.randn(rows, hidden, device="cuda", dtype=dt)
    weight = torch.rand(hidden, device="cuda", dtype=dt) + 0.5
    want = _add_rms_norm(residual, delta, weight)

    def compiled_code(inside):
        torch._dynamo.reset()
        fn = torch.compile(_add_rms_norm, fullgraph=True, dynamic=False)
        block = ci.persistent_reductions() if inside else config.patch(
            {"force_disable_caches": True})
        with block:
            got, code = run_and_get_code(fn, residual, delta, weight)
        return got, "\n".join(code)

    for inside in (False, True):
        got, code = compiled_code(inside)
        # Outside: inductor's looped reduction; inside: one pass (a persistent reduction).
        assert ("triton_per_" in code) is inside and ("triton_red_" in code) is not inside
        torch.testing.assert_close(got[0], want[0], rtol=0, atol=0)
        torch.testing.assert_close(got[1].float(), want[1].float(), rtol=1.6e-2, atol=1e-2)
    torch._dynamo.reset()


def test_decode_compilation_scope():
    def state():
        return (V.choices, config.force_disable_caches, config.combo_kernels,
                config.realize_reads_threshold)

    before = state()
    reads = before[3]
    assert reads != ci.DEFAULT_REALIZE_READS  # else the checks below could not tell
    with ci.decode_compilation():
        assert config.combo_kernels and config.force_disable_caches
        assert isinstance(V.choices, ci._PersistentRowReductions)
        assert V.choices._max_elements == ci.DEFAULT_MAX_ELEMENTS
        assert config.realize_reads_threshold == ci.DEFAULT_REALIZE_READS
    assert state() == before
    with ci.decode_compilation(4096, combo_kernels=False, realize_reads=None):
        assert config.combo_kernels == before[2] and V.choices._max_elements == 4096
        assert config.realize_reads_threshold == reads
    with ci.decode_compilation(realize_reads=9):
        assert config.realize_reads_threshold == 9
    with pytest.raises(KeyError):
        with ci.decode_compilation():
            raise KeyError("inside")
    assert state() == before


@pytest.mark.parametrize("kwargs, error, words", [
    ({"combo_kernels": 1}, TypeError, "combo_kernels must be a bool; got int"),
    ({"combo_kernels": None}, TypeError, "got NoneType"),
    ({"max_elements": 100}, ValueError, "max_elements must be in"),
    ({"max_elements": 2.5}, TypeError, "max_elements must be an int"),
    ({"realize_reads": True}, TypeError, "realize_reads must be an int or None; got bool"),
    ({"realize_reads": 5.0}, TypeError, "realize_reads must be an int or None; got float"),
    ({"realize_reads": 0}, ValueError, "realize_reads must be >= 1; got 0")])
def test_decode_compilation_bad_arguments_refused(kwargs, error, words):
    before = V.choices, config.combo_kernels, config.realize_reads_threshold
    with pytest.raises(error, match=words):
        with ci.decode_compilation(**kwargs):
            pass
    assert (V.choices, config.combo_kernels, config.realize_reads_threshold) == before


@pytest.mark.parametrize("missing, options, off", [
    ("combo_kernels", ("combo_kernels",), False),
    ("post_grad_custom_post_pass", ("split_partials", "batch_increments", "split_argmax"),
     False),
    ("realize_reads_threshold", ("realize_reads",), None)])
def test_decode_compilation_without_a_piece_refused_by_name(monkeypatch, missing, options, off):
    import torch._inductor.config as cfg
    monkeypatch.delattr(cfg, missing)
    with pytest.raises(RuntimeError, match=f"lacks {missing}"):
        with ci.decode_compilation():
            pass
    with ci.decode_compilation(**dict.fromkeys(options, off)):  # not asked for: not needed
        pass


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (Triton kernels)")
def test_gpu_decode_compilation_fuses_the_attention_prologue():
    from torch._inductor.utils import run_and_get_code
    torch.manual_seed(7)
    dt, dev, dim, length = torch.bfloat16, "cuda", 128, 48
    q = torch.randn(1, 32, 1, dim, device=dev, dtype=dt)
    k = torch.randn(1, 8, 1, dim, device=dev, dtype=dt)
    v = torch.randn(1, 8, 1, dim, device=dev, dtype=dt)
    angle = torch.rand(1, 1, 1, dim, device=dev) * 6.0
    cos, sin = angle.cos().to(dt), angle.sin().to(dt)
    position = torch.tensor([29], device=dev)
    caches = [torch.randn(1, 8, length, dim, device=dev, dtype=dt) for _ in range(2)]

    def compiled(inside):
        torch._dynamo.reset()
        k_cache, v_cache = (c.clone() for c in caches)
        fn = torch.compile(rotary_append, fullgraph=True, dynamic=False)
        block = ci.decode_compilation() if inside else config.patch({"force_disable_caches": True})
        with block:
            got, code = run_and_get_code(fn, q, k, v, cos, sin, k_cache, v_cache, position)
        return got, k_cache, v_cache, "\n".join(code).count("@triton.jit")

    k_cache, v_cache = (c.clone() for c in caches)
    want = rotary_append(q, k, v, cos, sin, k_cache, v_cache, position)
    (q_out, k_out, v_out, apart), (q_in, k_in, v_in, fused) = compiled(False), compiled(True)
    assert fused < apart, (fused, apart)
    for got in (q_out, q_in):  # inductor rounds once in fp32, eager after each op
        torch.testing.assert_close(got.float(), want.float(), rtol=1.6e-2, atol=2e-2)
    assert torch.equal(q_in, q_out) and torch.equal(k_in, k_out) and torch.equal(v_in, v_out)
    torch.testing.assert_close(k_in.float(), k_cache.float(), rtol=1.6e-2, atol=2e-2)
    assert torch.equal(v_in, v_cache)  # a copy
    rows = torch.arange(length, device=dev) != 29
    assert torch.equal(k_in[:, :, rows], caches[0][:, :, rows])  # only the position's row moved
    torch._dynamo.reset()


def _partials_prologue(parts, cos, sin, k_cache, v_cache, position):
    """A batch-16 decode step's attention prologue after ``split_partials``, in small: the fused
    q/k/v GEMM's partial sums added in split order and rounded once, its q, k and v slices, then
    rotary_append (2 sequences, 4 query heads and 1 key/value head of 16)."""
    total = parts[0]
    for s in range(1, parts.shape[0]):
        total = total + parts[s]
    q, k, v = total.to(torch.bfloat16).split([64, 16, 16], dim=-1)
    q, k, v = (x.view(2, 1, -1, 16).transpose(1, 2) for x in (q, k, v))
    return rotary_append(q, k, v, cos, sin, k_cache, v_cache, position)


@pytest.mark.parametrize("splits, stored_apart", [(4, False), (5, True)])
def test_cpu_realize_reads_adds_the_partials_where_they_are_read(splits, stored_apart):
    """Inductor stores a value that several kernels read in a buffer of its own once it reads
    more than realize_reads_threshold inputs: 5 partial sums at its own 4, none at
    decode_compilation's default 5; 4 partial sums are not stored at either. Added where they are
    read, the sums reach the rotary embedding unrounded (inductor's fp32 inside a kernel), stored
    they are rounded to bf16 first: both within bf16 rounding of eager, the copied v rows equal."""
    from torch._inductor.utils import run_and_get_code
    torch.manual_seed(splits)
    parts = torch.randn(splits, 2, 96)
    angle = torch.rand(1, 1, 1, 16) * 6.0
    cos, sin = angle.cos().bfloat16(), angle.sin().bfloat16()
    caches = [torch.randn(2, 1, 8, 16, dtype=torch.bfloat16) for _ in range(2)]
    position = torch.tensor([5])

    def compiled(realize_reads):
        torch._dynamo.reset()
        k_cache, v_cache = (c.clone() for c in caches)
        fn = torch.compile(_partials_prologue, fullgraph=True, dynamic=False)
        with ci.decode_compilation(realize_reads=realize_reads):
            q, code = run_and_get_code(fn, parts, cos, sin, k_cache, v_cache, position)
        return (q, k_cache, v_cache), "empty_strided_cpu((2, 96)" in "\n".join(code)

    ours, ours_stored = compiled(ci.DEFAULT_REALIZE_READS)
    theirs, theirs_stored = compiled(None)
    assert (ours_stored, theirs_stored) == (False, stored_apart)
    k_cache, v_cache = (c.clone() for c in caches)
    want = _partials_prologue(parts, cos, sin, k_cache, v_cache, position)
    for got in (ours, theirs):
        torch.testing.assert_close(got[0].float(), want.float(), rtol=1.6e-2, atol=2e-2)
        torch.testing.assert_close(got[1].float(), k_cache.float(), rtol=1.6e-2, atol=2e-2)
        assert torch.equal(got[2], v_cache)
    rows = torch.arange(8) != 5
    assert torch.equal(ours[1][:, :, rows], caches[0][:, :, rows])  # only the position's row moved
    torch._dynamo.reset()


# ------------------------------------------------------------------------- batch_increments

def _increments_graph(specs, readers=(), extra=None):
    """A post-grad-like graph: per spec (name, dtype, c) a placeholder x and copy_(x, x + c) at
    the end; ``readers``: names read by a non-mutating add before; ``extra(graph, nodes,
    increments)`` adds more nodes (before the copies)."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    aten = torch.ops.aten
    g, nodes = torch.fx.Graph(), {}
    with FakeTensorMode():
        for name, dtype, _ in specs:
            nodes[name] = g.placeholder(name)
            nodes[name].meta["val"] = torch.empty((), dtype=dtype)
    for name in readers:
        g.call_function(aten.add.Tensor, (nodes[name], nodes[name]))
    increments = {name: g.call_function(aten.add.Tensor, (nodes[name], c))
                  for name, _, c in specs}
    if extra is not None:
        extra(g, nodes, increments)
    for name, _, _ in specs:
        g.call_function(aten.copy_.default, (nodes[name], increments[name]))
    g.output(None)
    return g


def _foreach_nodes(g):
    return [n for n in g.nodes if n.target is torch.ops.aten._foreach_add.Scalar]


def test_increments_batched_per_dtype_and_number():
    i64 = torch.int64
    g = _increments_graph([("a", i64, 1), ("b", i64, 1), ("c", i64, 1), ("d", i64, 2),
                           ("e", torch.float32, 1), ("f", torch.float32, 1)], readers=("a", "c"))
    assert ci.batch_increments(g) == 5  # a, b, c with 1; e, f; d alone stays
    g.lint()
    groups = sorted([x.name for x in n.args[0]] for n in _foreach_nodes(g))
    assert groups == [["a", "b", "c"], ["e", "f"]]
    for node in _foreach_nodes(g):
        assert node.args[1] == 1 and len(node.meta["val"]) == len(node.args[0])
    copies = {n.args[0].name: n.args[1] for n in g.nodes
              if n.target is torch.ops.aten.copy_.default}
    for name in "abcef":
        item = copies[name]
        assert item.target is operator.getitem and item.meta["val"].dtype == item.args[0].meta[
            "val"][item.args[1]].dtype
        assert item.args[0].args[0][item.args[1]].name == name  # the input's own increment
    assert copies["d"].target is torch.ops.aten.add.Tensor and copies["d"].args[1] == 2
    adds = [n for n in g.nodes if n.target is torch.ops.aten.add.Tensor]
    assert len(adds) == 3  # the two readers and d's increment


def test_increments_left_where_unsafe():
    aten, i64 = torch.ops.aten, torch.int64

    def mutated_elsewhere(g, nodes, increments):  # b written by another op: its value moves
        g.call_function(aten.add_.Tensor, (nodes["b"], 1))

    def read_twice(g, nodes, increments):  # c's increment has a second user
        g.call_function(aten.mul.Tensor, (increments["c"], 2))

    g = _increments_graph([("a", i64, 1), ("b", i64, 1), ("c", i64, 1)],
                          extra=lambda g, n, i: (mutated_elsewhere(g, n, i), read_twice(g, n, i)))
    before = [n.format_node() for n in g.nodes]
    assert ci.batch_increments(g) == 0  # a alone is left too
    assert [n.format_node() for n in g.nodes] == before


def test_decode_compilation_runs_batch_increments_by_default(monkeypatch):
    before = config.post_grad_custom_post_pass
    ran = []
    monkeypatch.setattr(ci, "batch_increments", lambda graph: ran.append("inc") or 0)
    monkeypatch.setattr(ci, "split_partials",
                        lambda graph, partials_into_reductions_max_m: ran.append("partials")
                        or 0)
    monkeypatch.setattr(ci, "split_argmax", lambda graph: ran.append("argmax") or 0)
    g = torch.fx.Graph()
    g.output(None)
    for kwargs, want in (({}, ["partials", "inc", "argmax"]),
                         ({"batch_increments": False}, ["partials", "argmax"]),
                         ({"split_partials": False}, ["inc", "argmax"]),
                         ({"split_argmax": False}, ["partials", "inc"])):
        ran.clear()
        with ci.decode_compilation(**kwargs):
            config.post_grad_custom_post_pass(g)
        assert ran == want, kwargs
    with ci.decode_compilation(split_partials=False, batch_increments=False, split_argmax=False):
        assert config.post_grad_custom_post_pass is before
    for name in ("batch_increments", "split_argmax"):
        with pytest.raises(TypeError, match=f"{name} must be a bool; got str"):
            with ci.decode_compilation(**{name: "yes"}):
                pass


def test_cpu_static_cache_decode_with_batched_increments_matches_eager(monkeypatch):
    transformers = pytest.importorskip("transformers")
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "benchmarks"))
    import bench_decode
    torch.manual_seed(11)
    cfg = transformers.LlamaConfig(hidden_size=64, intermediate_size=128, num_attention_heads=4,
                                   num_key_value_heads=2, vocab_size=256, num_hidden_layers=3)
    model = transformers.LlamaForCausalLM(cfg).eval()
    batched = []
    real = ci.batch_increments
    monkeypatch.setattr(ci, "batch_increments", lambda graph: batched.append(real(graph)))

    def decode(compiled):
        cache = bench_decode.make_static_cache(transformers, model, 2, 12, torch.device("cpu"),
                                               torch.float32)
        prompt = torch.randint(0, 256, (2, 4), generator=torch.Generator().manual_seed(3))
        positions = torch.arange(4)
        tokens = []
        with torch.no_grad():
            logits = model(input_ids=prompt, position_ids=positions.expand(2, 4),
                           cache_position=positions, past_key_values=cache, use_cache=True).logits
            tok = logits[:, -1].argmax(-1, keepdim=True)
            step = functools.partial(bench_decode.greedy_next_token, model)
            if compiled:
                torch._dynamo.reset()
                step = torch.compile(step, fullgraph=True, dynamic=False)
            block = ci.decode_compilation(batch_increments=True) if compiled else (
                contextlib.nullcontext())
            with block:
                for n in range(4, 8):
                    tok = step(input_ids=tok, position_ids=torch.full((2, 1), n),
                               cache_position=torch.tensor([n]), past_key_values=cache)
                    tokens.append(tok)
        if not all(hasattr(layer, "cumulative_length") for layer in cache.layers):
            pytest.skip(f"transformers {transformers.__version__}: a static cache without "
                        f"per-layer length tensors (the increments this rewrite batches)")
        lengths = [int(layer.cumulative_length) for layer in cache.layers]
        return torch.cat(tokens, 1), lengths, [layer.keys.clone() for layer in cache.layers]

    want, got = decode(False), decode(True)
    torch._dynamo.reset()
    assert batched and batched[0] == cfg.num_hidden_layers, batched  # every layer's length
    assert torch.equal(got[0], want[0]) and got[1] == want[1] == [8] * cfg.num_hidden_layers
    for k_got, k_want in zip(got[2], want[2]):
        torch.testing.assert_close(k_got, k_want, rtol=1e-5, atol=1e-5)


def _layers_with_lengths(x, lengths, rows, weights=None):
    """A decode step's shape of work: per layer, a row written at the layer's cache length, which
    the layer then increments in place (transformers' StaticLayer); with `weights`, each layer
    also multiplies by its matrix (an extern kernel between the layers' Triton kernels, as a
    model's GEMMs are)."""
    for i, (n, row) in enumerate(zip(lengths, rows)):
        x = torch.sin(x + row.index_select(0, n.view(1)).squeeze(0))
        if weights is not None:
            x = x @ weights[i]
        n.add_(1)
    return x


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (Triton kernels)")
def test_gpu_batched_increments_match_apart(monkeypatch):
    # The rewrite batches all 8 lengths and the compiled step computes what eager and the
    # unbatched compilation do. (Not asserted: fewer kernels. On this small graph inductor made
    # as many kernels either way on an H200 -- 2 with pointwise layers, 3 with a matmul between
    # them -- while in the 32-layer model the increments were a kernel each and batching them
    # saved 23-33 us a step: benchmarks/results/NOTES.md, session 46.)
    torch.manual_seed(5)
    layers, dev = 8, "cuda"
    x = torch.randn(4, 64, device=dev)
    rows = [torch.randn(16, 64, device=dev) for _ in range(layers)]
    # Scaled so that the product of the 8 layers' matrices keeps x near unit size.
    weights = [torch.randn(64, 64, device=dev) / 8 for _ in range(layers)]
    start = torch.randint(0, 8, (layers,)).tolist()
    rewrite, batched = ci.batch_increments, []
    monkeypatch.setattr(ci, "batch_increments", lambda g: batched.append(rewrite(g)) or batched[-1])

    def compiled(batch):
        torch._dynamo.reset()
        lengths = [torch.tensor(s, device=dev) for s in start]
        fn = torch.compile(_layers_with_lengths, fullgraph=True, dynamic=False)
        with ci.decode_compilation(batch_increments=batch):
            got = fn(x, lengths, rows, weights)
        return got, [int(n) for n in lengths]

    lengths = [torch.tensor(s, device=dev) for s in start]
    want = _layers_with_lengths(x, lengths, rows, weights)
    (out_apart, len_apart), (out_batched, len_batched) = compiled(False), compiled(True)
    assert batched == [layers]
    assert len_apart == len_batched == [s + 1 for s in start]
    torch.testing.assert_close(out_batched, want, rtol=1e-5, atol=1e-5)
    assert torch.equal(out_batched, out_apart)
    torch._dynamo.reset()


W, L = "tl.extra.cuda.gdc_wait()", "tl.extra.cuda.gdc_launch_dependents()"


def test_trigger_moves_to_right_after_the_first_wait():
    # A persistent norm as inductor writes it: wait, loads, trigger, arithmetic, stores.
    lines = ["    xoffset = tl.program_id(0)", "    " + W, "    tmp0 = tl.load(in_ptr0 + r0)",
             "    tmp1 = tl.load(in_ptr1 + r0)", "    " + L, "    tmp2 = tmp0 + tmp1",
             "    tl.store(out_ptr0 + r0, tmp2)"]
    assert ci.trigger_after_wait(lines, W, L)
    assert lines == ["    xoffset = tl.program_id(0)", "    " + W, "    " + L,
                     "    tmp0 = tl.load(in_ptr0 + r0)", "    tmp1 = tl.load(in_ptr1 + r0)",
                     "    tmp2 = tmp0 + tmp1", "    tl.store(out_ptr0 + r0, tmp2)"]
    # The trigger takes the wait's indentation (a looped reduction's trigger sits deeper).
    lines = ["  " + W, "  for r in range(0, 4096, 1024):", "      tmp = tl.load(p + r)",
             "      " + L]
    assert ci.trigger_after_wait(lines, W, L) and lines[:2] == ["  " + W, "  " + L]


@pytest.mark.parametrize("lines", [
    ["    tmp0 = tl.load(p)", "    " + L],                            # no wait: no dependency
    ["    " + W, "    " + L, "    tmp0 = tl.load(p)"],                  # already right after
    ["    " + W, "    tmp0 = tl.load(p)", "    " + L, "    " + L],       # two triggers
    ["    " + L, "    " + W, "    tmp0 = tl.load(p)"]])                 # trigger before the wait
def test_trigger_left_where_it_cannot_move_safely(lines):
    before = list(lines)
    assert not ci.trigger_after_wait(lines, W, L) and lines == before


def test_early_triggers_only_inside_the_block(monkeypatch):
    from torch._inductor.codegen.triton import TritonKernel

    calls = []

    class Code:
        def __init__(self):
            self._lines = ["    " + W, "    tmp0 = tl.load(p)", "    " + L]

    def fake_filter(self, code):  # inductor's own pass: here, nothing to filter
        calls.append(code)

    monkeypatch.setattr(TritonKernel, "_filter_pdl", fake_filter)
    with ci.decode_compilation():  # the default moves the trigger
        inside = Code()
        TritonKernel._filter_pdl(TritonKernel.__new__(TritonKernel), inside)
    outside = Code()
    TritonKernel._filter_pdl(TritonKernel.__new__(TritonKernel), outside)
    with ci.decode_compilation(early_triggers=False):  # inductor's placement
        kept = Code()
        TritonKernel._filter_pdl(TritonKernel.__new__(TritonKernel), kept)
    assert len(calls) == 3  # inductor's pass ran each time
    assert inside._lines == ["    " + W, "    " + L, "    tmp0 = tl.load(p)"]
    assert outside._lines[-1] == "    " + L and kept._lines[-1] == "    " + L


def test_early_triggers_refused_by_name_without_inductors_pass(monkeypatch):
    from torch._inductor.codegen.triton import TritonKernel
    monkeypatch.delattr(TritonKernel, "_filter_pdl")
    with pytest.raises(RuntimeError, match="lacks TritonKernel._filter_pdl"):
        with ci.decode_compilation(early_triggers=True):
            pass
    with pytest.raises(TypeError, match="early_triggers must be a bool; got int"):
        with ci.decode_compilation(early_triggers=1):
            pass


@pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] < 9,
                    reason="needs a CUDA GPU with programmatic dependent launch (sm_90+)")
@pytest.mark.parametrize("rows", [1, 16])
def test_gpu_early_triggers_follow_the_wait_and_change_no_value(rows):
    # A residual add + RMSNorm behind a GEMM and in front of one, as in a decoder layer: with
    # early_triggers every Triton kernel's trigger directly follows its wait; the results are
    # bit-identical to inductor's own placement.
    from torch._inductor.utils import run_and_get_code
    torch.manual_seed(rows)
    dt = torch.bfloat16
    x = torch.randn(rows, 4096, device="cuda", dtype=dt)
    residual = torch.randn(rows, 4096, device="cuda", dtype=dt)
    w1 = torch.randn(4096, 4096, device="cuda", dtype=dt) / 64
    w2 = torch.randn(1024, 4096, device="cuda", dtype=dt) / 64
    weight = torch.rand(4096, device="cuda", dtype=dt) + 0.5

    def layer(x, residual, weight):
        hidden, normed = _add_rms_norm(residual, x @ w1.t(), weight)
        return hidden, normed @ w2.t()

    def compiled(early):
        torch._dynamo.reset()
        fn = torch.compile(layer, fullgraph=True, dynamic=False)
        with config.patch({"triton.enable_pdl": True}), \
                ci.decode_compilation(early_triggers=early):
            got, code = run_and_get_code(fn, x, residual, weight)
        return got, "\n".join(code)

    base, base_code = compiled(False)
    got, code = compiled(True)

    def triggers_after_waits(code):  # each trigger right after a wait; how many triggers
        lines = [line.strip() for line in code.splitlines()]
        launches = [i for i, line in enumerate(lines) if line == L]
        return all(lines[i - 1] == W for i in launches), len(launches)

    moved, triggers = triggers_after_waits(code)
    placed, base_triggers = triggers_after_waits(base_code)
    assert moved and triggers > 0, code
    assert triggers == base_triggers
    assert not placed, "inductor already triggers after its wait"
    for g, b in zip(got, base):
        torch.testing.assert_close(g, b, rtol=0, atol=0)
    torch._dynamo.reset()


# ---------------------------------------------------------------------------- split_argmax


def _greedy_inputs(shape, dtype, device="cpu", seed=0):
    """Logits of `shape` (rows x vocab in its last dim) whose rows 1-4, where there are such,
    hold what an argmax must get right: every value -inf (index 0), NaN (its first one), a tie
    inside a chunk and across chunks (the first), the maximum in the last chunk."""
    g = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn(shape, generator=g, device=device).to(dtype)
    rows, v = x.view(-1, shape[-1]), shape[-1]
    if rows.shape[0] > 1:
        rows[1] = float("-inf")
    if rows.shape[0] > 2:
        rows[2, 7] = rows[2, v - 3] = float("nan")
    if rows.shape[0] > 3:
        rows[3, 100] = rows[3, 101] = rows[3, v // 2] = 1e4
    if rows.shape[0] > 4:
        rows[4, v - 1] = 1e4
    return x


def _greedy_pick(logits):
    return logits[:, -1].argmax(-1, keepdim=True)


def _argmax_graph(shape, dtype=torch.float32, dim=-1, keepdim=False):
    from torch.fx.experimental.proxy_tensor import make_fx
    return make_fx(lambda x: torch.argmax(x, dim, keepdim), tracing_mode="fake")(
        torch.empty(shape, dtype=dtype))


@pytest.mark.parametrize("shape, keepdim, chunk, padded", [
    ((1, 128256), True, 1002, False),   # Llama-3's vocabulary, batch 1
    ((16, 128256), False, 1002, False),
    ((5, 32000), True, 1000, False),    # Llama-2's
    ((6, 32771), False, 1024, True),    # a prime length: -inf past the row
    ((2, 3, 50257), True, 1024, True),  # 3-D; GPT-2's vocabulary (29 x 1733: 1024, padded)
    ((4, 152064), False, 864, False),   # Qwen2.5's (176 x 864)
    ((65536,), False, 1024, False),     # one row, 1-D
    ((1024, 16384), True, 1024, False)])  # the most rows, the shortest row rewritten
def test_split_argmax_rewrite_matches_argmax(shape, keepdim, chunk, padded):
    gm = _argmax_graph(shape, keepdim=keepdim)
    assert ci.split_argmax(gm.graph) == 1
    gm.graph.lint()
    gm.recompile()
    targets = [n.target for n in gm.graph.nodes if n.op == "call_function"]
    aten = torch.ops.aten
    assert (aten.constant_pad_nd.default in targets) == padded
    reshape = next(n for n in gm.graph.nodes if n.target is aten.reshape.default)
    assert reshape.args[1][-1] == chunk
    assert targets.count(aten.argmax.default) == 2  # the chunks' and the first chunk at the max
    for seed in range(3):
        x = _greedy_inputs(shape, torch.float32, seed=seed)
        want = torch.argmax(x, -1, keepdim)
        got = gm(x)
        assert got.shape == want.shape and got.dtype == want.dtype
        assert torch.equal(got, want), (seed, got.flatten()[:6], want.flatten()[:6])


@pytest.mark.parametrize("shape, dtype, dim", [
    ((4, 16383), torch.float32, -1),     # a row too short
    ((1025, 16384), torch.float32, -1),  # too many rows
    ((128256, 4), torch.float32, 0),     # not the last dim
    ((4, 128256), torch.int32, -1),      # not floating
    ((4, 128256), torch.float32, None)])  # over every element
def test_split_argmax_leaves_other_argmax(shape, dtype, dim):
    gm = _argmax_graph(shape, dtype=dtype, dim=dim)
    before = [n.format_node() for n in gm.graph.nodes]
    assert ci.split_argmax(gm.graph) == 0
    assert [n.format_node() for n in gm.graph.nodes] == before


def test_argmax_chunk_is_the_largest_divisor_up_to_the_target_or_the_target():
    for length in (128256, 151936, 152064, 32000, 50257, 65536, 256000, 32771, 1 << 20, 3 * 7919):
        c = ci._argmax_chunk(length)
        divisors = [d for d in range(ci.SPLIT_ARGMAX_CHUNK // 2, ci.SPLIT_ARGMAX_CHUNK + 1)
                    if length % d == 0]
        assert c <= ci.SPLIT_ARGMAX_CHUNK
        if divisors:
            assert length % c == 0 and c == max(divisors)
        else:
            assert c == ci.SPLIT_ARGMAX_CHUNK
    assert ci._argmax_chunk(128256) == 1002 and ci._argmax_chunk(152064) == 864
    assert ci._argmax_chunk(151936) == 1024 and ci._argmax_chunk(50257) == 1024  # padded


@pytest.mark.parametrize("shape, dtype", [((16, 1, 128256), torch.bfloat16),
                                          ((3, 1, 32771), torch.float32)])
def test_cpu_compiled_greedy_pick_with_split_argmax_matches_eager(monkeypatch, shape, dtype):
    rewritten = []
    split = ci.split_argmax
    monkeypatch.setattr(ci, "split_argmax", lambda graph: rewritten.append(split(graph))
                        or rewritten[-1])

    torch._dynamo.reset()
    fn = torch.compile(_greedy_pick, fullgraph=True)
    with ci.decode_compilation(split_partials=False):
        for seed in range(2):
            x = _greedy_inputs(shape, dtype, seed=seed)
            assert torch.equal(fn(x), _greedy_pick(x))
    assert rewritten == [1]  # one compilation, one argmax rewritten
    torch._dynamo.reset()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (Triton kernels)")
@pytest.mark.parametrize("shape, dtype", [((1, 1, 128256), torch.bfloat16),
                                          ((16, 1, 128256), torch.float32),
                                          ((8, 1, 32771), torch.bfloat16)])
def test_gpu_compiled_greedy_pick_with_split_argmax_matches_eager(shape, dtype):
    from torch._inductor.utils import run_and_get_code

    for split, kernels in ((False, 1), (True, 2)):
        torch._dynamo.reset()
        fn = torch.compile(_greedy_pick, fullgraph=True)
        with ci.decode_compilation(split_partials=False, split_argmax=split):
            x = _greedy_inputs(shape, dtype, device="cuda")
            got, code = run_and_get_code(fn, x)
            assert torch.equal(got, _greedy_pick(x))
            assert sum(c.count("@triton.jit") for c in code) == kernels
            for seed in (1, 2):
                y = _greedy_inputs(shape, dtype, device="cuda", seed=seed)
                assert torch.equal(fn(y), _greedy_pick(y))
    torch._dynamo.reset()
