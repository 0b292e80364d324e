"""Fused projections: one quantized GEMM for a decoder layer's q/k/v projections, one for its
gate/up projections (``cute_gemm.quantize_model(model, fuse=True)``).

At batch 1 a weight-only GEMM is bound by reading its weight and by the fixed cost of a launch;
three GEMMs ``[M, K] x [K, Nq]``, ``[K, Nk]``, ``[K, Nv]`` on the same input cost more than one
``[M, K] x [K, Nq + Nk + Nv]`` (about 10% of a layer, measured). The fused layer is a plain
``QuantLinear`` whose output columns are the members' in order (q rows, then k, then v; gate, then
up). Its weight is quantized from the concatenated float weights; quantization groups run along
K within one output column, so every column's integers, scales and zero points are exactly those
of the member quantized on its own: the fused model computes the same numbers as the unfused
quantized one (up to the accumulation order of the GEMM).

How the fused layer is called (the design, and why):

* The model's own code is not touched: ``LlamaAttention.forward`` still calls
  ``self.q_proj(hidden_states)``, ``self.k_proj(hidden_states)``, ``self.v_proj(hidden_states)``
  and ``LlamaMLP.forward`` ``self.gate_proj(x)`` and ``self.up_proj(x)``. No transformers code is
  copied or patched, so the fusion follows the model's forward wherever transformers takes it
  (caches, attention backends, Qwen3's q/k norms). The one exception is the gated activation
  below: an MLP instance whose forward is the known formula gets a forward of its own.
* The members become ``ProjectionSlice`` modules under their old names (``q_proj`` ...), and the
  fused ``QuantLinear`` is registered beside them (``qkv_proj``, ``gate_up_proj``), so it is in
  ``state_dict`` once and moves with ``.to()``. The module paths ``...self_attn.q_proj`` keep
  existing (forward hooks on them still fire, with the right outputs); the state-dict keys change
  (``...q_proj.qweight`` -> ``...qkv_proj.qweight``), which ``save_quantized`` records so that
  ``load_quantized`` rebuilds the same structure.
* The first slice called with an input computes the fused GEMM and keeps the result, together
  with the input tensor itself, for its siblings. A sibling returns its columns of that result
  only when it is called with the *very same* tensor object (identity, plus, in eager mode, the
  same version counter, i.e. not modified in place since, and the same grad mode); any other
  call computes the fused GEMM again on its own input (never a wrong answer, only slower: a slice
  called alone costs the whole fused GEMM). The kept result is dropped once every sibling has
  taken its part, so nothing outlives the forward. Order does not matter (k before q works).
* Why not replace the MLP module by a fused one, or wrap the attention's forward: that changes the
  module's class and depends on the exact formula of each family's forward (it would have to be
  re-checked for every transformers release); a slice needs neither. Why not precompute in a
  forward pre-hook: hooks and their kwargs vary with transformers versions and accelerate
  installs its own; the slice design has one mechanism for every group.
* ``torch.compile(fullgraph=True)``: the bookkeeping is plain Python on a plain object (tuple
  reads, ``is`` tests, attribute writes); dynamo traces it into one graph with no break, the
  identity test is decided at trace time and the fused GEMM appears once per group. The version
  counter is not read while compiling (dynamo would treat it as data) -- inside a graph, the
  input's identity is the test. CUDA-graph capture: no host synchronisation, no data-dependent
  control flow; the result is consumed within the captured forward.
* Threads: the kept entry is one tuple, read once; two threads sharing a model at worst miss each
  other's entry and recompute.

The gated activation (``gate_mlp``): a recognized MLP whose forward is exactly
``down_proj(act_fn(gate_proj(x)) * up_proj(x))`` (read with ``ast``) and whose ``act_fn`` is
SiLU (``nn.SiLU`` or transformers' ``SiLUActivation``) gets, on the instance, the forward
``down_proj(gate_up_proj(x, activation="silu_mul"))``: SiLU(gate) * up is computed inside the
fused GEMM (``cute_gemm.mixed_gemm``'s ``activation``), which saves a kernel and the
``[M, 2 * intermediate]`` round trip per layer. The class and its other instances are
untouched; ``gate_proj``/``up_proj`` (and ``act_fn``) are then not called by that MLP, so hooks
on them do not fire. Any other MLP keeps its forward and uses the slices.

Which modules are fused (``find_groups``): modules of the recognized families (class names in
``FAMILIES``: Llama, Mistral, Qwen2, Qwen3 attention and MLP) whose forward (read with ``ast``)
calls each member exactly once on the same plain argument, never rebound nor modified in place --
so the cached result is always used. The members must all be quantized with the same settings:
``nn.Linear`` layers, not skipped, of one input size, dtype and device, all with or all without a
bias, each registered under one name. Anything else stays unfused, with the reason in the
``QuantizationSummary``.
"""

import ast
import functools
import inspect
import textwrap
from dataclasses import dataclass

import torch

from .nn import QuantLinear

__all__ = ["FAMILIES", "FusedGroup", "ProjectionSlice", "find_groups", "gate_mlp", "ungate_mlp"]

# (kind, recognized module class names, member attributes in fused-column order, fused attribute)
FAMILIES = (
    ("q/k/v", frozenset({"LlamaAttention", "MistralAttention", "Qwen2Attention",
                         "Qwen3Attention"}), ("q_proj", "k_proj", "v_proj"), "qkv_proj"),
    ("gate/up", frozenset({"LlamaMLP", "MistralMLP", "Qwen2MLP", "Qwen3MLP"}),
     ("gate_proj", "up_proj"), "gate_up_proj"),
)
RECOGNIZED = "Llama, Mistral, Qwen2 and Qwen3 attention (q/k/v) and MLP (gate/up) modules"


class _Shared:
    """The state one group's slices share: ``entry`` is ``None`` or ``(input, version,
    grad_enabled, fused output, indices of the slices still to take their part)``."""

    __slots__ = ("entry",)

    def __init__(self):
        self.entry = None

    def __reduce__(self):
        return (_Shared, ())  # copies and pickles start with nothing kept


class ProjectionSlice(torch.nn.Module):
    """One member of a fused projection: ``x -> fused(x)[..., start:stop]``, computed once per
    input for all members (see the module docstring).

    Attributes: ``in_features``, ``out_features`` (the member's), ``start``, ``stop`` (its columns
    of the fused layer), ``index`` (its position in the group), ``fused_name`` (the fused layer's
    attribute on the parent module), ``fused`` (the fused ``QuantLinear``; not a submodule, so it
    is registered, saved and moved once, under the parent).
    """

    def __init__(self, fused, shared, index, count, start, stop, fused_name):
        super().__init__()
        # Plain attributes, not submodules: the fused layer belongs to the parent module.
        self.__dict__["fused"] = fused
        self.__dict__["_shared"] = shared
        self.index = index
        self.count = count
        self.start = start
        self.stop = stop
        self.fused_name = fused_name
        self.in_features = fused.in_features
        self.out_features = stop - start

    @property
    def bias(self):
        """The member's part of the fused bias (a view), or None."""
        bias = self.fused.bias
        return None if bias is None else bias[self.start:self.stop]

    def __getattr__(self, name):
        if name == "weight":
            raise AttributeError(
                f"ProjectionSlice has no 'weight': this projection is columns {self.start}:"
                f"{self.stop} of the fused quantized layer {self.fused_name!r} beside it "
                f"(cute_gemm.quantize_model(..., fuse=True)); use fuse=False to keep the "
                f"projections separate")
        return super().__getattr__(name)

    def extra_repr(self):
        return (f"{self.fused_name}[{self.start}:{self.stop}], in_features={self.in_features}, "
                f"out_features={self.out_features}")

    def forward(self, x):
        shared = self._shared
        if not isinstance(x, torch.Tensor):
            return self.fused(x)  # raises QuantLinear's error
        compiling = torch.compiler.is_compiling()
        # The version counter says whether x was modified in place since the fused GEMM read it;
        # inference tensors have none, and under torch.compile the graph's identity is the test.
        version = 0 if compiling or x.is_inference() else x._version
        grad = torch.is_grad_enabled()
        entry = shared.entry  # read once: another thread may replace it
        if (entry is not None and entry[0] is x and entry[1] == version and entry[2] == grad
                and self.index in entry[4]):
            waiting = tuple(i for i in entry[4] if i != self.index)
            shared.entry = (entry[0], version, grad, entry[3], waiting) if waiting else None
            out = entry[3]
        else:
            out = self.fused(x)
            waiting = tuple(i for i in range(self.count) if i != self.index)
            shared.entry = (x, version, grad, out, waiting)
        return out[..., self.start:self.stop]


def make_slices(fused, sizes, fused_name):
    """The ``ProjectionSlice`` modules of one group, in member order, over ``fused``."""
    shared = _Shared()
    slices, start = [], 0
    for index, size in enumerate(sizes):
        slices.append(ProjectionSlice(fused, shared, index, len(sizes), start, start + size,
                                      fused_name))
        start += size
    if start != fused.out_features:
        raise ValueError(f"fused layer {fused_name!r}: member sizes {list(sizes)} add up to "
                         f"{start}, not its out_features={fused.out_features}")
    return slices


def slice_groups(model):
    """``{fused layer name: (parent name, fused attribute, [member attributes], [sizes])}`` for
    the fused groups of ``model`` (read from its ``ProjectionSlice`` modules). Raises
    ``ValueError`` for a structure ``save_quantized`` cannot describe."""
    names = {}
    for name, module in model.named_modules():
        names.setdefault(id(module), name)
    groups = {}
    for name, module in model.named_modules():
        if not isinstance(module, ProjectionSlice):
            continue
        parent_name, _, attr = name.rpartition(".")
        fused_name = f"{parent_name}.{module.fused_name}" if parent_name else module.fused_name
        if names.get(id(module.fused)) != fused_name:
            raise ValueError(f"{name!r} is a slice of a fused layer that is not registered as "
                             f"{fused_name!r}")
        group = groups.setdefault(fused_name, (parent_name, module.fused_name,
                                               [None] * module.count, [None] * module.count))
        group[2][module.index] = attr
        group[3][module.index] = module.out_features
    for fused_name, (_, _, members, _) in groups.items():
        if None in members:
            raise ValueError(f"fused layer {fused_name!r} is missing some of its member slices "
                             f"(found {members})")
    return groups


def _forward_tree(cls):
    """The ``ast`` of ``cls.forward``'s source, or None where the source cannot be read."""
    try:
        return ast.parse(textwrap.dedent(inspect.getsource(cls.forward)))
    except (OSError, TypeError, SyntaxError):
        return None


@functools.lru_cache(maxsize=None)
def _forward_calls_members_once(cls, members):
    """Whether ``cls.forward`` calls ``self.<member>(arg)`` once per member, all with one plain
    argument name that the forward never rebinds or modifies in place (``arg.x_(...)``,
    ``arg[...] = ...``): then every sibling gets the very tensor the first one got."""
    tree = _forward_tree(cls)
    if tree is None:
        return False
    args = {}
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "self"
                and node.func.attr in members):
            if (len(node.args) != 1 or node.keywords or not isinstance(node.args[0], ast.Name)
                    or node.func.attr in args):
                return False
            args[node.func.attr] = node.args[0].id
    if set(args) != set(members) or len(set(args.values())) != 1:
        return False
    arg = next(iter(args.values()))
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id == arg and not isinstance(node.ctx, ast.Load):
            return False
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id == arg and node.attr.endswith("_")
                and not node.attr.startswith("__")):
            return False  # an in-place method
        if (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name)
                and node.value.id == arg and not isinstance(node.ctx, ast.Load)):
            return False
    return True


@dataclass
class FusedGroup:
    """A group of projections that ``quantize_model`` fuses."""

    kind: str            # "q/k/v" or "gate/up"
    parent: torch.nn.Module
    parent_name: str
    fused_attr: str      # "qkv_proj" / "gate_up_proj"
    members: tuple       # member attributes, in column order
    linears: list        # the member nn.Linear modules

    @property
    def fused_name(self):
        return f"{self.parent_name}.{self.fused_attr}" if self.parent_name else self.fused_attr

    @property
    def member_names(self):
        prefix = f"{self.parent_name}." if self.parent_name else ""
        return [prefix + m for m in self.members]

    @property
    def sizes(self):
        return [lin.out_features for lin in self.linears]


def find_groups(model, quantized, kept):
    """``(groups, not_fused)``: the ``FusedGroup``s of ``model`` to fuse and ``{label: reason}``
    for candidate groups left unfused.

    Args:
        model: the model (unchanged).
        quantized: ``{id(linear): [names]}`` of the ``nn.Linear`` layers about to be quantized
            (a layer registered under several names has them all).
        kept: ``{name: reason}`` of the layers kept as ``nn.Linear`` (skip patterns, shapes).
    """
    groups, not_fused = [], {}
    for parent_name, parent in model.named_modules():
        for kind, classes, members, fused_attr in FAMILIES:
            children = [parent._modules.get(m) for m in members]
            if any(c is None for c in children):
                continue
            prefix = f"{parent_name}." if parent_name else ""
            label = prefix + "{" + ",".join(members) + "}"
            cls = type(parent)
            if cls.__name__ not in classes:
                if all(isinstance(c, torch.nn.Linear) for c in children):
                    not_fused[label] = (f"{cls.__name__} is not a recognized module (fusion "
                                        f"covers {RECOGNIZED})")
                continue
            reason = _group_reason(parent, cls, prefix, members, fused_attr, children, quantized,
                                   kept)
            if reason is not None:
                not_fused[label] = reason
                continue
            groups.append(FusedGroup(kind, parent, parent_name, fused_attr, members, children))
    return groups, not_fused


def _group_reason(parent, cls, prefix, members, fused_attr, children, quantized, kept):
    for attr, child in zip(members, children):
        name = prefix + attr
        if name in kept:
            return f"{attr} is kept as nn.Linear ({kept[name]})"
        if isinstance(child, (QuantLinear, ProjectionSlice)):
            return f"{attr} is already quantized ({type(child).__name__})"
        if not isinstance(child, torch.nn.Linear):
            return f"{attr} is a {type(child).__name__}, not an nn.Linear"
        if id(child) not in quantized:
            return f"{attr} is not converted"
        others = [n for n in quantized[id(child)] if n != name]
        if others:
            return f"{attr} is also registered as {others[0]!r} (a shared layer)"
    if hasattr(parent, fused_attr):
        return f"{cls.__name__} already has an attribute {fused_attr!r}"
    if len({id(c) for c in children}) != len(children):
        return "the same layer is registered under several member names"
    first = children[0]
    for attr, child in zip(members[1:], children[1:]):
        if child.in_features != first.in_features:
            return (f"in_features differ ({members[0]}: {first.in_features}, {attr}: "
                    f"{child.in_features})")
        if (child.bias is None) != (first.bias is None):
            return f"bias differs ({members[0]}: {first.bias is not None}, {attr}: " \
                   f"{child.bias is not None})"
        if child.weight.dtype != first.weight.dtype:
            return f"dtypes differ ({members[0]}: {first.weight.dtype}, {attr}: " \
                   f"{child.weight.dtype})"
        if child.weight.device != first.weight.device:
            return f"devices differ ({members[0]}: {first.weight.device}, {attr}: " \
                   f"{child.weight.device})"
        if child.training != first.training:
            return "training modes differ"
    if not _forward_calls_members_once(cls, members):
        return (f"{cls.__name__}.forward does not call {', '.join(members)} once each on one "
                f"unchanged input (read from its source), so a fused GEMM would not be shared")
    return None


def fused_linear(group):
    """A temporary ``nn.Linear`` (no copy of anything but the concatenation) whose weight and bias
    are the members' stacked in column order, for ``QuantLinear.from_linear``."""
    linears = group.linears
    first = linears[0]
    with torch.no_grad():
        weight = torch.cat([lin.weight.detach() for lin in linears], dim=0)
        bias = (None if first.bias is None
                else torch.cat([lin.bias.detach() for lin in linears], dim=0))
    out = torch.nn.Linear(first.in_features, weight.shape[0], bias=bias is not None,
                          device="meta", dtype=weight.dtype)
    out.weight = torch.nn.Parameter(weight, requires_grad=False)
    if bias is not None:
        out.bias = torch.nn.Parameter(bias, requires_grad=False)
    out.train(first.training)
    return out


# ------------------------------------------------------------------------- the gated activation

# The recognized MLP classes (FAMILIES' gate/up entry).
GATED_MLPS = next(classes for kind, classes, _, _ in FAMILIES if kind == "gate/up")


@functools.lru_cache(maxsize=None)
def _forward_is_gated_mlp(cls):
    """Whether ``cls.forward(self, x)`` is exactly ``return self.down_proj(self.act_fn(
    self.gate_proj(x)) * self.up_proj(x))``, directly or through one local name (a docstring
    allowed)."""
    tree = _forward_tree(cls)
    fn = tree.body[0] if tree is not None and tree.body else None
    if not isinstance(fn, ast.FunctionDef) or len(fn.args.args) != 2 or fn.args.vararg \
            or fn.args.kwarg or fn.args.kwonlyargs or fn.decorator_list:
        return False
    arg = fn.args.args[1].arg
    body = list(fn.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # the docstring
    expected = ast.dump(ast.parse(f"self.down_proj(self.act_fn(self.gate_proj({arg})) * "
                                  f"self.up_proj({arg}))", mode="eval").body)
    if len(body) == 1 and isinstance(body[0], ast.Return) and body[0].value is not None:
        return ast.dump(body[0].value) == expected
    if (len(body) == 2 and isinstance(body[0], ast.Assign) and len(body[0].targets) == 1
            and isinstance(body[0].targets[0], ast.Name) and isinstance(body[1], ast.Return)
            and isinstance(body[1].value, ast.Name)
            and body[1].value.id == body[0].targets[0].id):
        return ast.dump(body[0].value) == expected
    return False


def _is_silu(module):
    """``nn.SiLU`` or transformers' ``SiLUActivation`` (hidden_act "silu" / "swish"), exactly."""
    cls = type(module)
    return cls is torch.nn.SiLU or (cls.__name__ == "SiLUActivation"
                                    and cls.__module__ == "transformers.activations")


def _gated_mlp_forward(self, x):
    """``down_proj(SiLU(gate) * up)`` with the activation inside the fused gate/up GEMM
    (``cute_gemm.fuse.gate_mlp``)."""
    return self.down_proj(self.gate_up_proj(x, activation="silu_mul"))


def gate_reason(mlp):
    """None when ``mlp`` (a module with a fused ``gate_up_proj``) can compute SiLU(gate) * up inside
    the fused GEMM, else why not."""
    cls = type(mlp)
    if cls.__name__ not in GATED_MLPS:
        return f"{cls.__name__} is not a recognized gated MLP"
    if not isinstance(mlp._modules.get("gate_up_proj"), QuantLinear):
        return "it has no fused gate_up_proj"
    act = mlp._modules.get("act_fn")
    if not _is_silu(act):
        return f"its act_fn is {type(act).__name__}, not SiLU"
    if not _forward_is_gated_mlp(cls):
        return (f"{cls.__name__}.forward is not down_proj(act_fn(gate_proj(x)) * up_proj(x)) "
                f"(read from its source)")
    if "forward" in mlp.__dict__:
        return "its forward is already replaced on the instance"
    return None


def gate_mlp(mlp):
    """Gives ``mlp`` (a module whose gate/up projections were just fused) the gated forward when
    ``gate_reason`` finds nothing against it. Returns None when it did, else the reason."""
    reason = gate_reason(mlp)
    if reason is None:
        # A partial, not a bound method: it pickles (by the function's name) and deep-copies
        # with its module.
        mlp.forward = functools.partial(_gated_mlp_forward, mlp)
    return reason


def ungate_mlp(mlp):
    """Undoes ``gate_mlp`` (the class's forward again)."""
    if getattr(mlp.__dict__.get("forward"), "func", None) is _gated_mlp_forward:
        del mlp.__dict__["forward"]
