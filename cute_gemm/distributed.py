"""Tensor parallelism for quantized models: ``ColwiseParallel`` and ``RowwiseParallel`` styles for
``torch.distributed.tensor.parallel.parallelize_module`` that also take ``QuantLinear``.

Use: swap torch's styles for these in the plan you already have for the 16-bit model, by name::

    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import parallelize_module
    from cute_gemm.distributed import ColwiseParallel, RowwiseParallel

    mesh = init_device_mesh("cuda", (world_size,))
    parallelize_module(model, mesh, {
        "model.layers.*.self_attn.q_proj": ColwiseParallel(),
        "model.layers.*.self_attn.k_proj": ColwiseParallel(),
        "model.layers.*.self_attn.v_proj": ColwiseParallel(),
        "model.layers.*.self_attn.o_proj": RowwiseParallel(),
        "model.layers.*.mlp.gate_proj": ColwiseParallel(),
        "model.layers.*.mlp.up_proj": ColwiseParallel(),
        "model.layers.*.mlp.down_proj": RowwiseParallel(),
    })

On an ``nn.Linear`` or ``nn.Embedding`` the styles *are* torch's (they delegate to the parent
class), so a plan can mix quantized and 16-bit layers. ``tp_plan`` turns transformers'
``config.base_model_tp_plan`` strings ("colwise"/"rowwise") into these styles, and
``parallelize_module`` here is torch's with error messages that name the layer.

Why subclasses of torch's styles and not a ``QuantLinear`` the stock styles accept: torch's styles
take only ``nn.Linear``/``nn.Embedding`` and shard them by calling ``distribute_tensor`` on
``weight``/``bias`` and running ``F.linear`` on DTensors. Making that work would need an
``nn.Linear`` subclass whose ``weight`` is a quantized tensor subclass (packed words + scales +
zeros) that DTensor can shard along N and K with the packed format's block rules, plus DTensor
sharding rules for ``cute_gemm.mixed_gemm`` -- a large, fragile surface (DTensor's op dispatch,
``state_dict``, ``torch.compile``), and ``QuantLinear`` deliberately has no ``weight``. The styles
here instead shard the packed buffers by slicing them and run the unmodified ``QuantLinear``
forward on plain local tensors, with the same input/output DTensor conventions as torch's styles
(``input_layouts``, ``output_layouts``, ``use_local_output``, ``src_data_rank``).

Semantics (a 1-D mesh of ``W`` ranks, rank ``r``):

* ``ColwiseParallel`` shards the output features N: rank ``r`` keeps packed column blocks
  ``qweight[r*N/(8W):(r+1)*N/(8W)]`` (whole blocks of 8 columns), the same columns of
  ``scales``/``zeros`` and of ``bias``; ``input_perm`` (act-order) is kept whole. The input is
  annotated with ``input_layouts`` (default ``Replicate()``) and redistributed to replicated;
  the output is ``Shard(-1)``, redistributed to ``output_layouts`` and returned as a local tensor
  when ``use_local_output`` (the default). Needs ``N % (8 W) == 0``.
* ``RowwiseParallel`` shards the input features K: rank ``r`` keeps the K range
  ``[r K/W, (r+1) K/W)``: whole quantization groups (``scales``/``zeros`` rows of its groups;
  per-channel scales are kept whole, they cover every K) and, when ``K/W`` is a multiple of
  ``block_k`` (128 for INT4, 64 for INT8), whole packed k blocks ``qweight[:, r*kb:(r+1)*kb]``.
  The input is annotated with ``input_layouts`` (default ``Shard(-1)``); the local product is a
  ``Partial`` DTensor, redistributed to ``output_layouts`` (default ``Replicate()``: an
  all-reduce; ``Shard(d)``: a reduce-scatter), and the bias, kept whole (replicated), is added
  once, after the reduction, as torch's style does. Needs ``K % W == 0`` and ``K/W`` a multiple
  of the group size (of 32 for per-channel).
  When ``K/W`` is not a multiple of ``block_k`` (small layers: e.g. K=128 on 2 ranks with INT4)
  the k blocks cannot be split by slicing, and the shard's integer codes are re-packed instead:
  unpacked, sliced and packed again (lossless: the same integers, never dequantized; the layer
  records ``tp_repacked = True``). Real model widths (multiples of 128 W) take the slicing path.
* Act-order layers (``input_perm``) in row-parallel: the permutation reorders the input features,
  so rank ``r``'s K range needs the input columns ``input_perm[r K/W:(r+1) K/W]``, which in
  general lie on every rank. The style then asks for a *replicated* input (an all-gather of a
  ``Shard(-1)`` input, one collective of the size of the input) and gathers its columns locally
  (a non-persistent buffer ``tp_input_index``); when each rank's slice of the permutation stays
  inside its own K range the input stays sharded and a local permutation is kept as
  ``input_perm``.
* Shapes that cannot be sharded raise a ``ValueError`` naming the layer (its module name when
  sharded through ``cute_gemm.distributed.parallelize_module``), the world size and the rule.
  Fused projections (``quantize_model(fuse=True)``, ``ProjectionSlice``) are refused: quantize
  with ``fuse=False`` for tensor parallelism.

Data: as with torch's styles, ``src_data_rank`` (``parallelize_module``'s argument, default 0)
says whose values are used: rank ``src_data_rank`` scatters the shards (and broadcasts the
replicated bias/scales/permutation); ``None`` takes every rank's own copy (each rank has loaded
the same checkpoint), with no communication. After sharding the layer's buffers are plain local
tensors (``in_features``/``out_features`` are the local sizes, ``tp_rank``/``tp_world_size``/
``tp_style`` say which shard it is), so its ``state_dict`` is the rank's shard; save checkpoints
from the unsharded model.
"""

import torch
from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor
from torch.distributed.tensor.parallel import parallelize_module as _torch_parallelize_module
from torch.distributed.tensor.parallel import style as _style

from . import weight_format as _wf
from .nn import QuantLinear, _kernel_ready
from .quant import pack_weight

__all__ = ["ColwiseParallel", "RowwiseParallel", "parallelize_module", "tp_plan"]

_NAME_ATTR = "_cute_gemm_tp_name"


# --------------------------------------------------------------------------------- helpers


def _describe(module):
    name = getattr(module, _NAME_ATTR, None)
    group = "per-channel" if module.group_size == _wf.PER_CHANNEL else module.group_size
    what = (f"QuantLinear(in_features={module.in_features}, out_features={module.out_features}, "
            f"bits={module.bits}, group_size={group})")
    return f"{what} {name!r}" if name else what


def _check_mesh(style, module, mesh):
    if mesh.ndim != 1:
        raise ValueError(f"cute_gemm.distributed.{style}: {_describe(module)}: tensor parallelism "
                         f"needs a 1-D device mesh; got a {mesh.ndim}-D mesh (pass the TP "
                         f"sub-mesh, e.g. mesh['tp'])")
    if getattr(module, "tp_style", None) is not None:
        raise RuntimeError(f"cute_gemm.distributed.{style}: {_describe(module)} is already "
                           f"sharded ({module.tp_style}, world size {module.tp_world_size})")
    if module.qweight.device.type == "meta":
        raise ValueError(f"cute_gemm.distributed.{style}: {_describe(module)} is on the meta "
                         f"device (no values to shard); load its weights first")


def _norm(placements, ndim):
    """Placements with negative shard dims made positive, for comparisons."""
    return tuple(Shard(p.dim % ndim) if isinstance(p, Shard) else p for p in placements)


def _local(t, mesh, placement, src_data_rank):
    """This rank's piece of ``t`` under ``placement`` on the 1-D ``mesh`` (torch.chunk's even
    split), as a fresh contiguous, kernel-aligned tensor. ``src_data_rank`` as in torch:
    whose copy is scattered/broadcast (``None``: the local copy, no communication)."""
    local = distribute_tensor(t, mesh, [placement], src_data_rank=src_data_rank).to_local()
    local = local.contiguous()
    if local.data_ptr() == t.data_ptr() or local.data_ptr() % 16 != 0:
        local = local.clone()
    return _kernel_ready(local)


def _to_input(x, mesh, input_layouts, desired):
    """The module input as a local tensor with ``desired`` placement, torch's convention: a plain
    tensor is taken to be ``input_layouts``."""
    if not isinstance(x, DTensor):
        x = DTensor.from_local(x, mesh, input_layouts, run_check=False)
    if _norm(x.placements, x.ndim) != _norm(desired, x.ndim):
        x = x.redistribute(placements=desired)
    return x.to_local()


def _to_output(out, mesh, placements, output_layouts, use_local_output, bias=None):
    out = DTensor.from_local(out, mesh, placements, run_check=False)
    if _norm(out.placements, out.ndim) != _norm(output_layouts, out.ndim):
        out = out.redistribute(placements=output_layouts)
    if bias is not None:  # after the reduction: added once
        out = out + DTensor.from_local(bias.to(out.dtype), mesh, [Replicate()], run_check=False)
    return out.to_local() if use_local_output else out


def _install_hooks(style, module, mesh, local_placements, add_bias):
    """The style's hooks on a sharded QuantLinear: its input to the style's desired layout, its
    local output (``local_placements``: Shard(-1) column shards, Partial() row-shard sums) to the
    style's output layout, adding the whole bias after the reduction where ``add_bias``."""
    input_layouts, desired = style.input_layouts, style.desired_input_layouts
    output_layouts, use_local = style.output_layouts, style.use_local_output

    def prepare_input(mod, inputs):
        return (_to_input(inputs[0], mesh, input_layouts, desired), *inputs[1:])

    def prepare_output(mod, inputs, output):
        return _to_output(output, mesh, local_placements, output_layouts, use_local,
                          bias=mod.bias if add_bias else None)

    module.register_forward_pre_hook(prepare_input)
    module.register_forward_hook(prepare_output)
    return module


def _refuse_unsupported(style, module):
    from .fuse import ProjectionSlice

    if isinstance(module, ProjectionSlice):
        raise NotImplementedError(
            f"cute_gemm.distributed.{style}: cannot shard a fused projection slice "
            f"({type(module).__name__}; the model was quantized with fuse=True, so q/k/v and "
            f"gate/up share one QuantLinear). Quantize with cute_gemm.quantize_model(..., "
            f"fuse=False) for tensor parallelism")


def _mark(module, style, rank, world, full_in, full_out, repacked=False):
    module.tp_style = style
    module.tp_rank = rank
    module.tp_world_size = world
    module.tp_full_shape = (full_out, full_in)
    module.tp_repacked = repacked
    module._distribute_module_applied = True  # as torch's distribute_module marks modules


# ----------------------------------------------------------------------------------- styles


class ColwiseParallel(_style.ColwiseParallel):
    """torch's ``ColwiseParallel`` (same arguments) that also shards ``cute_gemm.QuantLinear``
    along its output features: see the module docstring."""

    def _apply(self, module, device_mesh):
        if not isinstance(module, QuantLinear):
            _refuse_unsupported("ColwiseParallel", module)
            return super()._apply(module, device_mesh)
        _check_mesh("ColwiseParallel", module, device_mesh)
        world = device_mesh.size()
        rank = device_mesh.get_local_rank()
        n, k = module.out_features, module.in_features
        if n % (_wf.BLOCK_N * world) != 0:
            raise ValueError(
                f"cute_gemm.distributed.ColwiseParallel: cannot shard {_describe(module)} across "
                f"world size {world}: out_features/world = {n}/{world} must be a multiple of "
                f"{_wf.BLOCK_N} (each rank keeps whole packed blocks of {_wf.BLOCK_N} output "
                f"columns), i.e. out_features a multiple of {_wf.BLOCK_N * world}")
        src = self.src_data_rank
        with torch.no_grad():
            module.qweight = _local(module.qweight, device_mesh, Shard(0), src)
            module.scales = _local(module.scales, device_mesh, Shard(1), src)
            if module.zeros is not None:
                module.zeros = _local(module.zeros, device_mesh, Shard(1), src)
            if module.bias is not None:
                module.bias = _local(module.bias, device_mesh, Shard(0), src)
            if module.input_perm is not None:
                module.input_perm = _local(module.input_perm, device_mesh, Replicate(), src)
        module.out_features = n // world
        _mark(module, "colwise", rank, world, k, n)
        return _install_hooks(self, module, device_mesh, (Shard(-1),), add_bias=False)


class RowParallelQuantLinear(QuantLinear):
    """A row-parallel ``QuantLinear`` shard: the forward computes the partial product without
    the bias (kept whole in ``bias``, added once after the reduction by the style's output
    hook), after gathering its input columns (``tp_input_index``) for act-order layers."""

    def forward(self, x):
        index = self._buffers.get("tp_input_index")
        if index is not None:
            x = x.index_select(-1, index)
        bias = self._buffers["bias"]
        self._buffers["bias"] = None
        try:
            return super().forward(x)
        finally:
            self._buffers["bias"] = bias

    def extra_repr(self):
        return (super().extra_repr() + f", tensor_parallel=rowwise (rank {self.tp_rank} of "
                f"{self.tp_world_size}, full in_features={self.tp_full_shape[1]})")


class RowwiseParallel(_style.RowwiseParallel):
    """torch's ``RowwiseParallel`` (same arguments) that also shards ``cute_gemm.QuantLinear``
    along its input features: see the module docstring."""

    def _apply(self, module, device_mesh):
        if not isinstance(module, QuantLinear):
            _refuse_unsupported("RowwiseParallel", module)
            return super()._apply(module, device_mesh)
        _check_mesh("RowwiseParallel", module, device_mesh)
        world = device_mesh.size()
        rank = device_mesh.get_local_rank()
        n, k, bits = module.out_features, module.in_features, module.bits
        per_channel = module.group_size == _wf.PER_CHANNEL
        group = _wf.k_multiple(module.group_size)  # G, or 32 for per-channel
        bk = _wf.block_k(bits)
        k_local = k // world
        if k % world != 0 or k_local % group != 0:
            what = (f"a multiple of {group} (per-channel quantization)" if per_channel else
                    f"a multiple of group_size={group} (each rank keeps whole quantization "
                    f"groups)")
            raise ValueError(
                f"cute_gemm.distributed.RowwiseParallel: cannot shard {_describe(module)} across "
                f"world size {world}: in_features/world = {k}/{world} must be {what}, i.e. "
                f"in_features a multiple of {group * world}")
        repack = k_local % bk != 0
        src = self.src_data_rank
        perm = module.input_perm
        local_index = local_perm = None
        if perm is not None:
            perm = _local(perm, device_mesh, Replicate(), src)
            slices = perm.view(world, k_local)
            starts = torch.arange(world, device=perm.device).unsqueeze(1) * k_local
            if bool(((slices >= starts) & (slices < starts + k_local)).all()):
                local_perm = (slices[rank] - rank * k_local).contiguous()  # stays sharded
            else:
                local_index = slices[rank].contiguous()  # gather from a replicated input
        with torch.no_grad():
            if repack:
                # k blocks straddle shards: re-pack this rank's integer codes (lossless).
                q = _wf.unpack_fields(module.qweight, bits)[:, :k]
                q = _local(q, device_mesh, Shard(1), src)
            else:
                module.qweight = _local(module.qweight, device_mesh, Shard(1), src)
            scale_placement = Replicate() if per_channel else Shard(0)
            module.scales = _local(module.scales, device_mesh, scale_placement, src)
            if module.zeros is not None:
                module.zeros = _local(module.zeros, device_mesh, scale_placement, src)
            if repack:
                pad = None
                if module.zeros is not None:  # the padding dequantizes to 0, as quantize's
                    pad = module.zeros[-1].to(torch.int64)
                module.qweight = _kernel_ready(pack_weight(q, bits, pad_value=pad))
            if module.bias is not None:
                module.bias = _local(module.bias, device_mesh, Replicate(), src)
        module.input_perm = local_perm
        module.in_features = k_local
        module.__class__ = RowParallelQuantLinear
        module.register_buffer("tp_input_index", local_index, persistent=False)
        _mark(module, "rowwise", rank, world, k, n, repacked=repack)
        self.desired_input_layouts = (Replicate(),) if local_index is not None else (Shard(-1),)
        return _install_hooks(self, module, device_mesh, (Partial(),), add_bias=True)


# ------------------------------------------------------------------------------ plan helpers


_STYLES = {"colwise": ColwiseParallel, "rowwise": RowwiseParallel}


def tp_plan(strings, prefix=""):
    """A ``parallelize_module`` plan from transformers-style strings, e.g.
    ``tp_plan(model.config.base_model_tp_plan, prefix="model.")`` for a ``LlamaForCausalLM``
    (whose base model is ``model.model``). Supports "colwise" and "rowwise" (this module's
    styles); other strings raise a ``ValueError``."""
    plan = {}
    for key, kind in dict(strings).items():
        if kind not in _STYLES:
            raise ValueError(f"cute_gemm.distributed.tp_plan: {key!r}: unsupported style "
                             f"{kind!r}; supported: {sorted(_STYLES)}")
        plan[prefix + key] = _STYLES[kind]()
    return plan


def parallelize_module(module, device_mesh=None, parallelize_plan=None, *, src_data_rank=0):
    """``torch.distributed.tensor.parallel.parallelize_module`` (same arguments), with the module
    names of the ``QuantLinear`` layers recorded first so that an unshardable layer's error
    names it. Use torch's own function if you prefer: only the messages differ."""
    names = []
    for name, sub in module.named_modules():
        if isinstance(sub, QuantLinear):
            setattr(sub, _NAME_ATTR, name)
            names.append(sub)
    try:
        return _torch_parallelize_module(module, device_mesh, parallelize_plan,
                                         src_data_rank=src_data_rank)
    finally:
        for sub in names:
            sub.__dict__.pop(_NAME_ATTR, None)

