"""Inductor heuristics for compiled decode steps around cute_gemm's kernels (opt-in, scoped).

cute_gemm's kernels launch as programmatic dependents (PDL): a GEMM streams its first weights
before it waits for its input. Behind one of inductor's Triton kernels that pays only once that
kernel triggers its dependents, which inductor (``torch._inductor.config.triton.enable_pdl``)
does after the kernel's last load. A decoder layer's residual add + RMSNorm over a row of more
than 1024 elements (Llama-3-8B: 4096) is a *looped* reduction in inductor: its last load is the
second pass over the row, at the kernel's end, so the q/k/v or gate/up GEMM behind it starts its
weights only when the norm ends. As a *persistent* reduction (the row held in registers, one
pass) every load comes first, and the GEMM streams during the norm's arithmetic and stores.

    model = torch.compile(model, fullgraph=True)
    with cute_gemm.inductor.persistent_reductions():
        model(**inputs)             # the calls that compile (one per new shape)

Inside the ``with`` block, inner reductions (along a row: norms, softmax) of up to
``max_elements`` elements compile as persistent reductions where inductor's own rule would allow
them at its larger multi-kernel threshold; every other choice is inductor's. The block also
switches inductor's caches off for the compilations inside it, since the handler is not part of
their keys: a graph compiled inside is never reused outside, nor the reverse. It changes how
inductor schedules a kernel, not what it computes. The handler is thread-local and the previous
one is back when the block ends; graphs compiled later (a new batch size) compile as inductor
would unless they compile inside the block too.

``decode_compilation()`` adds to that block inductor's combo kernels
(``torch._inductor.config.combo_kernels``): independent small kernels of a step become one launch.
A decoder layer's attention block has four after the q/k/v projection (the rotary embedding of
q, of k with its cache row, v's cache row, the cache position); each of them, behind the one
before it, pays a launch and a dependency wait of about a microsecond, and as one they pay it
once:

    with cute_gemm.inductor.decode_compilation():
        model(**inputs)

and, with ``split_partials`` (default True), a graph pass that leaves split-K sums to the kernel
that consumes them: a ``cute_gemm::mixed_gemm`` call whose plan for partial sums splits K
(``ops.partial_sums_count``: batch 16's q/k/v, o and down projections, batch 1's down
projection on Hopper) writes its fp32 partial sums (``mixed_gemm_partials``) and
the graph adds them, in split order, with the bias, and rounds once: the arithmetic of the op's
reduce kernel, now pointwise work that inductor fuses into the next kernel's loads (the residual
add + RMSNorm, the rotary embedding), so the reduce kernel and its launch go away. Calls with an
activation, a symbolic M or an unsplit plan stay as they are. ``batch_increments`` (on by
default) also rewrites the step's in-place increments of its inputs, a static cache's per-layer
lengths (``copy_(x, x + 1)`` in the graph, one kernel each, ~1 us of a step's critical path each
on an H100: 31 per step of a 32-layer Llama), as one foreach add, which inductor lowers as one
kernel: on an H200 (one machine, two processes, benchmarks/results/model_nvidia-h200_s46-
increments-*.md) the bf16 step 5.310 instead of 5.343 ms at batch 1 and 5.566 / 5.593 at batch
16, the INT4 fused + INT8-head one 2.150 / 2.173 and 2.642 / 2.675. On an H100 (one machine, two
processes, benchmarks/results/model_nvidia-h100-80gb-hbm3_s42-partials-*.md) the INT4 fused +
INT8-head model steps 2.847 instead of 2.897 ms at batch 16 and 4.611 instead of 4.760 at batch
64; the INT8 model 3.906 / 3.910 and 5.148 / 5.244; nothing split at batch 1 then. The partials
plan of an INT4 decode grid of wide CTAs on a long K is 4-warp CTAs in splits (the planner's
kPartialsCtaWarps): at batch 1 the down projection, after gate/up's grid has filled every SM,
starts as that grid's CTAs leave, and its 4 partial sums go into the residual + norm kernel (H200,
one machine: the INT4 step 1.940 instead of 1.984 ms). Above M =
``partials_into_reductions_max_m`` (default ``DEFAULT_PARTIALS_INTO_REDUCTIONS_MAX_M`` = 8) the
GEMMs whose sums reach a norm keep their reduce kernel: at batch 16 the norm would read 8 fp32
partial sums per row in one CTA per row (H200: 2.298 instead of 2.321 ms; 1.749 instead of 1.682
at batch 1, which keeps them). ``early_triggers`` (on by default) moves
each Triton kernel's ``gdc_launch_dependents()`` to right after its ``gdc_wait()``
(``trigger_after_wait``), so that under inductor's PDL the GEMM behind a norm launches while the
norm loads (H200, one machine, benchmarks/results/model_nvidia-h200_s58-call{1,2}-*.md: the INT4
fused + INT8-head step 1.701-1.705 instead of 1.745-1.748 ms at batch 1, 2.363 / 2.366 at 16).
``realize_reads`` (default ``DEFAULT_REALIZE_READS`` = 5) raises inductor's threshold for storing
a value that several kernels read, so that batch 16's q/k/v partial sums (5 splits) are added in
the kernel that applies the rotary embedding and writes the cache instead of in one before it
(H200, one machine: 2.292 / 2.303 instead of 2.348 / 2.353 ms at batch 16; batch 1 unchanged).
``split_argmax`` (on by default) takes a long argmax over few rows, the step's greedy pick over
the vocabulary, in chunks spread over the GPU instead of inductor's one CTA a row (H200,
benchmarks/results/argmax_split_nvidia-h200_s87.md: 128256 logits 3.2 instead of 20.4 us at
batch 1, 5.3 instead of 22.0 at batch 16), with the same result.

Measured (``bench_model.py --modes compile,compile-pr --inductor-pdl``, each in one run;
benchmarks/results/model_*_s38-pr.md): the compiled 32-layer Llama-3-8B-shaped model, INT4 fused
with an INT8 head, steps 2.474 instead of 2.531 ms at batch 1 on an H100 (2.78x its bf16 model
compiled the same way instead of 2.72x) and 3.013 instead of 3.076 ms at batch 16; on an H200
2.297 instead of 2.380 and 2.867 instead of 2.920 ms. The bf16 model gains 0.2-0.6%.
With ``decode_compilation()`` (``--modes compile-pr,compile-decode``, one H100 run,
model_nvidia-h100-80gb-hbm3_s39-decode.md): INT4 2.368 instead of 2.485 ms at batch 1 (2.87x
instead of 2.76x bf16, itself 6.789 instead of 6.865), 2.959 instead of 3.043 at batch 16; the
INT8 model 3.661 instead of 3.747 ms (1.85x) and 3.962 instead of 4.097.
"""

import contextlib
import functools
import operator
import threading

import torch

__all__ = ["DEFAULT_MAX_ELEMENTS", "DEFAULT_PARTIALS_INTO_REDUCTIONS_MAX_M",
           "DEFAULT_REALIZE_READS", "SPLIT_ARGMAX_CHUNK", "SPLIT_ARGMAX_MAX_ROWS",
           "SPLIT_ARGMAX_MIN_ELEMENTS", "batch_increments", "decode_compilation",
           "persistent_reductions", "reaches_reduction", "split_argmax", "split_partials",
           "trigger_after_wait"]

# Rows up to this many elements (Llama-3-405B's hidden size) go persistent; inductor's own
# persistent threshold for inner reductions is 1024, 16 times that under its multi-kernel mode.
DEFAULT_MAX_ELEMENTS = 16384
# Inputs a pointwise value with several consumers may read and still be recomputed inside each
# of them (inductor's realize_reads_threshold, 4 of its own): 5 takes in the sum of the 5 split-K
# partial sums of batch 16's q/k/v GEMM on Hopper, whose slices the rotary embedding and the
# cache writes read (see decode_compilation).
DEFAULT_REALIZE_READS = 5
# The largest M at which a split GEMM whose value reaches a reduction (the residual add + RMSNorm
# after the output and down projections) leaves its partial sums to it: the norm reads each row's
# in one CTA, the GEMM's reduce kernel adds them over the whole GPU. H200, the compiled
# Llama-3-8B-shaped step, INT4 fused + INT8 head, alternating on one machine each (NOTES.md,
# session 61): batch 1 (down's 4 splits) 1.685 / 1.679 ms with the norm adding them against
# 1.749 / 1.749 with the reduce kernel; batch 16 (o / down in 8 splits, the norms in 16 CTAs of
# 8 fp32 rows each) 2.318 / 2.324 against 2.298 / 2.299. Batches 2-15 were not measured; 8 is
# the decode kernel's largest token tile.
DEFAULT_PARTIALS_INTO_REDUCTIONS_MAX_M = 8
# split_argmax: an argmax along the last dim of at least this many elements, over at most
# SPLIT_ARGMAX_MAX_ROWS rows, is taken in chunks of at most SPLIT_ARGMAX_CHUNK elements (see there).
SPLIT_ARGMAX_MIN_ELEMENTS = 16384
SPLIT_ARGMAX_MAX_ROWS = 1024
SPLIT_ARGMAX_CHUNK = 1024
_MULTI_KERNEL_FACTOR = 16
_INNER_THRESHOLD = 1024


def _inductor(combo_kernels=False, post_grad_pass=False, realize_reads=False):
    """torch's inductor pieces this module uses, or a RuntimeError naming the missing one."""
    try:
        from torch._inductor import config
        from torch._inductor.runtime.hints import ReductionHint
        from torch._inductor.virtualized import V
    except ImportError as e:
        raise RuntimeError(
            f"cute_gemm.inductor: this torch ({torch.__version__}) has no inductor heuristics "
            f"handler to extend ({e})") from e
    missing = [name for owner, name in ((V, "set_choices_handler"), (V, "choices"),
                                        (config.triton, "persistent_reductions"),
                                        (config.triton, "multi_kernel"),
                                        (config, "force_disable_caches"))
               if not hasattr(owner, name)]
    if combo_kernels and not hasattr(config, "combo_kernels"):
        missing.append("combo_kernels")
    if realize_reads and not hasattr(config, "realize_reads_threshold"):
        missing.append("realize_reads_threshold")
    if post_grad_pass:
        try:
            from torch._inductor.custom_graph_pass import CustomGraphPass  # noqa: F401
        except ImportError:
            missing.append("custom_graph_pass.CustomGraphPass")
        if not hasattr(config, "post_grad_custom_post_pass"):
            missing.append("post_grad_custom_post_pass")
    if missing:
        raise RuntimeError(f"cute_gemm.inductor: this torch ({torch.__version__}) lacks "
                           f"{', '.join(missing)} in torch._inductor")
    return config, ReductionHint, V


class _PersistentRowReductions:
    """The heuristics handler in force, with inner reductions of up to ``max_elements`` made
    persistent where inductor's rule allows them at its multi-kernel threshold. Every other
    attribute is the wrapped handler's."""

    def __init__(self, base, max_elements, config, reduction_hint, virtualized):
        self._base = base
        self._max_elements = max_elements
        self._config = config
        self._inner = reduction_hint.INNER
        self._v = virtualized

    def __getattr__(self, name):
        return getattr(self._base, name)

    def should_use_persistent_reduction(self, features, cooperative_reduction):
        base = self._base.should_use_persistent_reduction
        if base(features, cooperative_reduction):
            return True
        if cooperative_reduction or features.get_reduction_hint() != self._inner:
            return False
        # Inductor's own rule (its block-size and static-size checks) at the threshold its
        # multi-kernel mode uses, then ours.
        with self._config.patch({"triton.multi_kernel": 1}):
            if not base(features, cooperative_reduction):
                return False
        return bool(self._v.graph.sizevars.statically_known_leq(features.reduction_numel,
                                                                self._max_elements))


@contextlib.contextmanager
def persistent_reductions(max_elements=DEFAULT_MAX_ELEMENTS):
    """Within the block, inductor compiles inner reductions (norms) of up to ``max_elements``
    elements as persistent (one-pass) reductions, so that their PDL trigger comes right after
    their loads; see the module's docstring. ``max_elements``: an int, 1024 (inductor's own
    threshold) to 16384 (the most its rule allows)."""
    if isinstance(max_elements, bool) or not isinstance(max_elements, int):
        raise TypeError(f"persistent_reductions: max_elements must be an int; got "
                        f"{type(max_elements).__name__}")
    top = _INNER_THRESHOLD * _MULTI_KERNEL_FACTOR
    if not _INNER_THRESHOLD <= max_elements <= top:
        raise ValueError(f"persistent_reductions: max_elements must be in [{_INNER_THRESHOLD}, "
                         f"{top}] (inductor's threshold to its multi-kernel one); got "
                         f"{max_elements}")
    config, reduction_hint, virtualized = _inductor()
    handler = _PersistentRowReductions(virtualized.choices, max_elements, config,
                                       reduction_hint, virtualized)
    with config.patch({"force_disable_caches": True}), virtualized.set_choices_handler(handler):
        yield


def _fake_value(target, args, fake_mode):
    """target(*args) on the args' fake values (an FX node's meta["val"])."""
    values = [a.meta["val"] if isinstance(a, torch.fx.Node) else a for a in args]
    with fake_mode:
        return target(*values)


def _add_call(graph, fake_mode, target, *args, value=None):
    """A ``target(*args)`` node at ``graph``'s insertion point, its meta["val"] ``value`` or, by
    default, the call on the args' fake values (``_fake_value``)."""
    new = graph.call_function(target, args)
    new.meta["val"] = _fake_value(target, args, fake_mode) if value is None else value
    return new


# The reshapes a value may pass through on its way from a projection to a reduction.
_VIEWS = (torch.ops.aten.view.default, torch.ops.aten._unsafe_view.default,
          torch.ops.aten.reshape.default, torch.ops.aten.unsqueeze.default,
          torch.ops.aten.squeeze.dim, torch.ops.aten.expand.default)


def reaches_reduction(node, depth=8):
    """Whether FX ``node``'s value reaches a reduction (an op tagged ``torch.Tag.reduction``: the
    mean of an RMSNorm) through at most ``depth`` pointwise ops and reshapes."""
    frontier, seen = [node], set()
    for _ in range(depth):
        following = []
        for n in frontier:
            for user in n.users:
                target = user.target
                if user in seen or not isinstance(target, torch._ops.OpOverload):
                    continue
                seen.add(user)
                if torch.Tag.reduction in target.tags:
                    return True
                if torch.Tag.pointwise in target.tags or target in _VIEWS:
                    following.append(user)
        frontier = following
    return False


def _pins_sums_in_the_gemm(schedule):
    """Whether a call's schedule (the op's text, or None) pins a plan whose partial sums meet
    inside the GEMM: ``reduce=cluster`` (split-K in a cluster) or ``stream_k`` with a number of
    CTAs. The partials op refuses both."""
    if not isinstance(schedule, str):
        return False
    items = schedule.replace(" ", "").split(",")
    return "reduce=cluster" in items or any(
        item.startswith("stream_k=") and item != "stream_k=off" for item in items)


def split_partials(graph, spec_for=None,
                   partials_into_reductions_max_m=DEFAULT_PARTIALS_INTO_REDUCTIONS_MAX_M):
    """Rewrites, in the post-grad FX ``graph``, each ``cute_gemm::mixed_gemm`` call without an
    activation whose M is static and whose plan splits K into S > 1 parts, as
    ``mixed_gemm_partials`` followed by ``((p[0] + p[1]) + ...) + bias`` in fp32 and one rounding
    (the reduce kernel's order and arithmetic). ``spec_for(device)``: the planner's device spec
    for a fake tensor's device (default ``cute_gemm.device_spec``).
    ``partials_into_reductions_max_m`` (an int >= 0, or None for every M; default
    ``DEFAULT_PARTIALS_INTO_REDUCTIONS_MAX_M``): the calls whose value reaches a reduction
    (``reaches_reduction``: the residual add + RMSNorm after an output or down projection) are
    rewritten only up to this M, and above it left to the op's reduce kernel, which adds the
    partial sums over the whole GPU where a row reduction reads each row's in one CTA. A call
    whose schedule pins ``reduce=cluster`` or ``stream_k=N`` stays (its sums meet inside the
    GEMM).
    Returns the number of calls rewritten."""
    from . import ops
    from . import weight_format as wf

    aten, prims = torch.ops.aten, torch.ops.prims
    mixed_gemm = torch.ops.cute_gemm.mixed_gemm.default
    partials_op = torch.ops.cute_gemm.mixed_gemm_partials.default
    names = [arg.name for arg in mixed_gemm._schema.arguments]
    defaults = {arg.name: arg.default_value for arg in mixed_gemm._schema.arguments
                if arg.has_default_value()}
    spec_for = ops.device_spec if spec_for is None else spec_for
    rewritten = 0
    for node in list(graph.nodes):
        if node.op != "call_function" or node.target is not mixed_gemm:
            continue
        call = dict(defaults)
        call.update(zip(names, node.args))
        call.update(node.kwargs)
        a = call["a"]
        a_val = a.meta.get("val") if isinstance(a, torch.fx.Node) else None
        qweight = call["qweight"]
        qweight_val = qweight.meta.get("val") if isinstance(qweight, torch.fx.Node) else None
        if call["activation"] is not None or a_val is None or qweight_val is None:
            continue
        if _pins_sums_in_the_gemm(call["schedule"]):
            continue  # its sums meet inside the GEMM: no partial sums to hand on
        m, n = a_val.shape[0], qweight_val.shape[0] * wf.BLOCK_N
        if a_val.device.type != "cuda" or not isinstance(m, int) or not isinstance(n, int):
            continue
        splits = ops.partial_sums_count(m, n, call["k"], call["bits"], call["group_size"],
                                        a_val.dtype, spec_for(a_val.device), call["schedule"])
        max_m = partials_into_reductions_max_m
        if splits < 2 or (max_m is not None and m > max_m and reaches_reduction(node)):
            continue
        fake_mode = a_val.fake_mode
        add = functools.partial(_add_call, graph, fake_mode)
        with graph.inserting_before(node):
            with fake_mode:  # the op's fake kernel would plan for the same device
                parts_val = torch.empty((splits, m, n), dtype=torch.float32,
                                        device=a_val.device)
            parts = add(partials_op, a, call["qweight"], call["scales"], call["zeros"],
                        call["bits"], call["group_size"], call["k"], call["schedule"],
                        value=parts_val)
            total = add(aten.select.int, parts, 0, 0)
            for s in range(1, splits):
                total = add(aten.add.Tensor, total, add(aten.select.int, parts, 0, s))
            if call["bias"] is not None:
                bias = add(prims.convert_element_type.default, call["bias"], torch.float32)
                total = add(aten.add.Tensor, total, bias)
            out = add(prims.convert_element_type.default, total, a_val.dtype)
        node.replace_all_uses_with(out)
        graph.erase_node(node)
        rewritten += 1
    return rewritten


def _mutates(node):
    """Whether an FX node may write to its arguments: an op whose schema says so, or anything
    that is not an op overload (a higher-order op, a Python function)."""
    target = node.target
    if node.op == "output" or target is operator.getitem:
        return False
    if isinstance(target, torch._ops.OpOverload):
        return target._schema.is_mutable
    return True


def batch_increments(graph):
    """Rewrites, in the post-grad FX ``graph``, the in-place increments of graph inputs (a
    placeholder ``x`` written back as ``copy_(x, x + c)``, c a number, and mutated nowhere else:
    transformers' ``StaticLayer.cumulative_length``, one per decoder layer) as one
    ``_foreach_add`` per group of inputs of one dtype, device and c, whose results the ``copy_``
    nodes write back. Inductor lowers a foreach op as one kernel; apart, every increment is a
    kernel of its own (31 one-element kernels per step of a 32-layer Llama on an H100, ~1 us of
    the step each under PDL). The increments are computed where the first of their ``copy_``
    nodes was, which changes no value: nothing writes to those inputs before their own
    ``copy_``. Returns the number of increments batched."""
    aten = torch.ops.aten
    groups = {}
    for node in graph.nodes:
        if (node.op != "call_function" or node.target is not aten.copy_.default or node.kwargs
                or len(node.args) != 2):
            continue
        dst, src = node.args
        if not (isinstance(dst, torch.fx.Node) and dst.op == "placeholder"
                and isinstance(src, torch.fx.Node)
                and src.target is aten.add.Tensor and not src.kwargs and src.args[0] is dst
                and len(src.users) == 1 and type(src.args[1]) in (int, float)):
            continue
        val = dst.meta.get("val")
        if not isinstance(val, torch.Tensor) or any(_mutates(user) for user in dst.users
                                                    if user is not node):
            continue
        c = src.args[1]
        groups.setdefault((val.dtype, val.device, type(c), c), []).append(node)
    batched = 0
    for (_, _, _, c), copies in groups.items():
        if len(copies) < 2:
            continue
        inputs = [copy.args[0] for copy in copies]
        with graph.inserting_before(copies[0]):  # graph order: the group's first copy_
            total = graph.call_function(aten._foreach_add.Scalar, (inputs, c))
            fake_mode = getattr(inputs[0].meta["val"], "fake_mode", None)
            with fake_mode if fake_mode is not None else contextlib.nullcontext():
                total.meta["val"] = aten._foreach_add.Scalar([x.meta["val"] for x in inputs], c)
            for i, copy in enumerate(copies):
                item = graph.call_function(operator.getitem, (total, i))
                item.meta["val"] = total.meta["val"][i]
                increment = copy.args[1]
                copy.args = (copy.args[0], item)
                graph.erase_node(increment)
        batched += len(copies)
    return batched


def _argmax_chunk(length):
    """split_argmax's chunk for a row of ``length`` elements: the largest divisor of ``length``
    within half of SPLIT_ARGMAX_CHUNK to SPLIT_ARGMAX_CHUNK (no padding), else SPLIT_ARGMAX_CHUNK
    (the row padded with -inf to a whole number of chunks). A chunk stays within one
    SPLIT_ARGMAX_CHUNK-wide Triton block: on an H200 at batch 16 Qwen2's 151936 logits in chunks
    of 1187 (a 2048-wide block) took 8.98 us against 5.89 in chunks of 1024 with padding, and
    152064's 1056 10.8 against 864's 6.39 (NOTES.md, session 88)."""
    for c in range(SPLIT_ARGMAX_CHUNK, SPLIT_ARGMAX_CHUNK // 2 - 1, -1):
        if length % c == 0:
            return c
    return SPLIT_ARGMAX_CHUNK


def split_argmax(graph):
    """Rewrites, in the post-grad FX ``graph``, each ``argmax`` along the last dim of a floating
    tensor of static shape whose rows hold at least SPLIT_ARGMAX_MIN_ELEMENTS elements and number
    at most SPLIT_ARGMAX_MAX_ROWS (a decode step's greedy pick over the vocabulary: 128256 logits
    per sequence for Llama-3) as two reductions: each row in chunks of C elements
    (``_argmax_chunk``; -inf past the row where C does not divide it), every chunk's max and the
    index of its first maximum, then the first chunk whose max is the row's (its maximum's index
    plus the chunk's offset). Inductor takes an argmax in one CTA per row, which looped over
    128256 logits costs ~21-31 us of a step on an H200 (NOTES.md, session 87); chunks spread the
    first reduction over rows x (length / C) CTAs. The result is the argmax's: the first maximum,
    NaN counting as the largest value (a chunk's max and its first maximum's index are its first
    NaN's), index 0 for a row of -inf. Returns the number of argmax nodes rewritten."""
    aten = torch.ops.aten
    rewritten = 0
    for node in list(graph.nodes):
        if node.op != "call_function" or node.target is not aten.argmax.default or node.kwargs:
            continue
        x, dim, keepdim = (list(node.args) + [None, False])[:3]
        val = x.meta.get("val") if isinstance(x, torch.fx.Node) else None
        if (val is None or dim is None or not val.is_floating_point() or val.dim() < 1
                or any(not isinstance(d, int) for d in val.shape)):
            continue
        if dim not in (-1, val.dim() - 1):
            continue
        length = val.shape[-1]
        if length < SPLIT_ARGMAX_MIN_ELEMENTS or val.numel() // length > SPLIT_ARGMAX_MAX_ROWS:
            continue
        chunk = _argmax_chunk(length)
        chunks = -(-length // chunk)
        lead = list(val.shape[:-1])
        add = functools.partial(_add_call, graph, val.fake_mode)
        with graph.inserting_before(node):
            padded = x
            if chunks * chunk != length:
                padded = add(aten.constant_pad_nd.default, x, [0, chunks * chunk - length],
                             float("-inf"))
            pieces = add(aten.reshape.default, padded, lead + [chunks, chunk])
            piece_max = add(aten.amax.default, pieces, [-1])
            piece_arg = add(aten.argmax.default, pieces, -1)
            first = add(aten.argmax.default, piece_max, -1, True)    # the first chunk at the max
            inside = add(aten.gather.default, piece_arg, -1, first)  # its first maximum
            out = add(aten.add.Tensor, add(aten.mul.Tensor, first, chunk), inside)
            if not keepdim:
                out = add(aten.squeeze.dim, out, -1)
        node.replace_all_uses_with(out)
        graph.erase_node(node)
        rewritten += 1
    return rewritten


def _rewrites(partials, increments,
              partials_into_reductions_max_m=DEFAULT_PARTIALS_INTO_REDUCTIONS_MAX_M,
              argmax=False):
    """decode_compilation's graph rewrites, in the order they run."""
    partials_pass = functools.partial(split_partials,
                                      partials_into_reductions_max_m=partials_into_reductions_max_m)
    return [rewrite for rewrite, wanted in ((partials_pass, partials),
                                            (batch_increments, increments),
                                            (split_argmax, argmax)) if wanted]


def _post_grad_pass(rewrites, previous):
    """Inductor's post-grad custom pass: each of ``rewrites`` (graph -> count), then
    ``previous`` (the pass set before the block, if any)."""
    from torch._inductor.custom_graph_pass import CustomGraphPass

    class _DecodeRewrites(CustomGraphPass):
        def __call__(self, graph):
            for rewrite in rewrites:
                rewrite(graph)
            if previous is not None:
                previous(graph)

        def uuid(self):
            # Inductor's caches are off inside the block (persistent_reductions).
            return None

    return _DecodeRewrites()


def trigger_after_wait(lines, wait, launch):
    """Moves, in a Triton kernel's body ``lines`` (inductor's ``IndentedBuffer._lines``), the one
    line that lets the next kernel launch (``launch``) to right after the first dependency wait
    (``wait``), at the wait's indentation. Inductor writes it after the kernel's last load, so a
    GEMM behind a norm launches (and starts streaming its weights) only once the norm's loads
    have returned; after the wait, it launches as soon as the kernel before the norm has
    completed. Still after the wait, so the chain's guarantee holds: when a kernel launches, the
    one two places before it has completed (inductor leaves out the wait of a kernel that reads
    nothing its direct predecessor writes). Returns whether it moved the line: not where there
    is no wait, more than one launch line, or the launch already follows the wait directly."""
    waits = [i for i, line in enumerate(lines) if type(line) is str and wait in line]
    launches = [i for i, line in enumerate(lines) if type(line) is str and launch in line]
    if not waits or len(launches) != 1 or launches[0] <= waits[0] + 1:
        return False
    first = lines[waits[0]]
    indent = first[:len(first) - len(first.lstrip())]
    del lines[launches[0]]
    lines.insert(waits[0] + 1, indent + launch)
    return True


# Whether this thread is compiling inside decode_compilation(early_triggers=True); the patched
# TritonKernel._filter_pdl reads it, and does nothing else outside such a block.
_EARLY_TRIGGERS = threading.local()
_PATCH_LOCK = threading.Lock()


def _install_trigger_after_wait():
    """Wraps inductor's TritonKernel._filter_pdl (once per process) so that, in a thread inside
    decode_compilation(early_triggers=True), each kernel's trigger follows its wait."""
    from torch._inductor.codegen.triton import TritonKernel
    missing = [name for name in ("_filter_pdl", "GDC_WAIT", "GDC_LAUNCH")
               if not hasattr(TritonKernel, name)]
    if missing:
        raise RuntimeError(f"cute_gemm.inductor: this torch ({torch.__version__}) lacks "
                           f"TritonKernel.{', TritonKernel.'.join(missing)} "
                           f"(decode_compilation(early_triggers=True))")
    with _PATCH_LOCK:
        original = TritonKernel._filter_pdl
        if getattr(original, "_cute_gemm_trigger_after_wait", False):
            return

        def _filter_pdl(self, code):
            original(self, code)
            if getattr(_EARLY_TRIGGERS, "on", False):
                trigger_after_wait(code._lines, self.GDC_WAIT, self.GDC_LAUNCH)

        _filter_pdl._cute_gemm_trigger_after_wait = True
        TritonKernel._filter_pdl = _filter_pdl


@contextlib.contextmanager
def _early_triggers():
    """This thread's compilations inside the block place each kernel's trigger after its wait."""
    _install_trigger_after_wait()
    before = getattr(_EARLY_TRIGGERS, "on", False)
    _EARLY_TRIGGERS.on = True
    try:
        yield
    finally:
        _EARLY_TRIGGERS.on = before


@contextlib.contextmanager
def decode_compilation(max_elements=DEFAULT_MAX_ELEMENTS, combo_kernels=True,
                       split_partials=True, batch_increments=True, early_triggers=True,
                       realize_reads=DEFAULT_REALIZE_READS,
                       partials_into_reductions_max_m=DEFAULT_PARTIALS_INTO_REDUCTIONS_MAX_M,
                       split_argmax=True):
    """Within the block, inductor compiles for a decode step: inner reductions of up to
    ``max_elements`` elements as persistent reductions (``persistent_reductions``); with
    ``combo_kernels`` (a bool, default True), independent kernels horizontally fused into one
    launch (inductor's combo kernels); with ``split_partials`` (a bool, default True), split-K
    GEMMs' partial sums added inside the kernels that consume them (see the module's docstring),
    inside a reduction (the residual add + RMSNorm after the output and down projections, which
    reads a row in one CTA) only up to M = ``partials_into_reductions_max_m`` (an int >= 0, or
    None for every M; default ``DEFAULT_PARTIALS_INTO_REDUCTIONS_MAX_M``): above it those GEMMs
    keep their reduce kernel (``split_partials``' own argument);
    with ``batch_increments`` (a bool, default True), the step's in-place increments of its
    inputs (a static cache's per-layer lengths) in one kernel (``batch_increments``); with
    ``early_triggers`` (a bool, default True), each Triton kernel lets the next kernel launch
    right after its dependency wait instead of after its last load (``trigger_after_wait``; it
    matters under ``torch._inductor.config.triton.enable_pdl``: a norm then no longer holds back
    the launch of the GEMM behind it); with ``realize_reads`` (an int >= 1, default
    ``DEFAULT_REALIZE_READS``, or None for inductor's own 4), inductor's
    ``realize_reads_threshold``: a pointwise value that several kernels consume gets a kernel and
    a buffer of its own once it reads more inputs than that, and is recomputed inside each
    consumer otherwise. At batch 16 the q/k/v GEMM splits K in 5 on Hopper; the sum of its partial
    sums (``split_partials``) reads 5 inputs, so at 4 it is stored by a kernel before the one that
    applies the rotary embedding and writes the cache, and at 5 that kernel adds them itself
    (H200, one machine, benchmarks/results/model_nvidia-h200_s59-rt*.md: the INT4 fused +
    INT8-head step 2.292 / 2.303 instead of 2.348 / 2.353 ms at batch 16, 1.680 instead of 1.682
    at batch 1). With ``split_argmax`` (a bool, default True), a long argmax over few rows (the
    greedy pick over the vocabulary) in chunks spread over the GPU instead of one CTA a row
    (``split_argmax``).
    Inductor's caches are off inside, as in ``persistent_reductions``; every setting is back
    when the block ends."""
    for name, value in (("combo_kernels", combo_kernels), ("split_partials", split_partials),
                        ("batch_increments", batch_increments),
                        ("early_triggers", early_triggers), ("split_argmax", split_argmax)):
        if not isinstance(value, bool):
            raise TypeError(f"decode_compilation: {name} must be a bool; got "
                            f"{type(value).__name__}")
    for name, value, lowest in (("partials_into_reductions_max_m",
                                 partials_into_reductions_max_m, 0),
                                ("realize_reads", realize_reads, 1)):
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"decode_compilation: {name} must be an int or None; got "
                            f"{type(value).__name__}")
        if value < lowest:
            raise ValueError(f"decode_compilation: {name} must be >= {lowest}; got {value}")
    rewrites = _rewrites(split_partials, batch_increments, partials_into_reductions_max_m,
                         split_argmax)
    config = _inductor(combo_kernels, bool(rewrites), realize_reads is not None)[0]
    combo = config.patch({"combo_kernels": True}) if combo_kernels else contextlib.nullcontext()
    passes = (config.patch({"post_grad_custom_post_pass":
                            _post_grad_pass(rewrites, config.post_grad_custom_post_pass)})
              if rewrites else contextlib.nullcontext())
    triggers = _early_triggers() if early_triggers else contextlib.nullcontext()
    reads = (config.patch({"realize_reads_threshold": realize_reads})
             if realize_reads is not None else contextlib.nullcontext())
    with persistent_reductions(max_elements), combo, passes, triggers, reads:
        yield
