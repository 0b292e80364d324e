"""cute_gemm.checkpoints on CPU: GPTQ and AWQ tensors built here from known integer weights, zero
points and scales by packers written from the formats' descriptions (word by word, with plain
shifts; nothing shared with the importer), imported, and checked against ``(q - z) * s`` computed
in fp32 from those integers: the dequantized weight bit for bit, and the product through
cute_gemm.mixed_gemm / QuantLinear against an fp64 matmul. Then model-level loading from a dict
and from safetensors files, and every argument check."""

import json

import pytest
import torch
from helpers import DTYPE_IDS, DTYPES, assert_accurate

import cute_gemm
from cute_gemm.checkpoints import (
    CheckpointLoadReport, awq_linear, awq_to_quantized, gptq_linear, gptq_to_quantized,
    load_awq_model, load_gptq_model, load_state_dict_files)
from cute_gemm.nn import QuantLinear


def _gen(seed):
    return torch.Generator().manual_seed(seed)


# -------------------------------------------------------------------------------------- packers


def _to_int32(words):
    """int64 words holding unsigned 32-bit values -> int32 with the same bits."""
    return torch.where(words >= 2**31, words - 2**32, words).to(torch.int32)


def _pack_gptq_along_k(q, bits):
    """q[N, K] -> GPTQ qweight [K * bits / 32, N]: row k // per_word, bits (k % per_word) * bits."""
    n, k = q.shape
    per_word = 32 // bits
    words = torch.zeros(k // per_word, n, dtype=torch.int64)
    for kk in range(k):
        words[kk // per_word] |= q[:, kk].to(torch.int64) << (bits * (kk % per_word))
    return _to_int32(words)


def _pack_gptq_along_n(z, bits):
    """z[groups, N] -> GPTQ qzeros [groups, N * bits / 32], low bits first along N."""
    groups, n = z.shape
    per_word = 32 // bits
    words = torch.zeros(groups, n // per_word, dtype=torch.int64)
    for nn_ in range(n):
        words[:, nn_ // per_word] |= z[:, nn_].to(torch.int64) << (bits * (nn_ % per_word))
    return _to_int32(words)


AWQ_COLUMN_OF_NIBBLE = [0, 2, 4, 6, 1, 3, 5, 7]


def _pack_awq(v):
    """v[R, N] (4-bit values) -> AWQ [R, N / 8]: nibble i of word c holds column
    8 c + AWQ_COLUMN_OF_NIBBLE[i]."""
    rows, n = v.shape
    words = torch.zeros(rows, n // 8, dtype=torch.int64)
    for c in range(n // 8):
        for i, col in enumerate(AWQ_COLUMN_OF_NIBBLE):
            words[:, c] |= v[:, 8 * c + col].to(torch.int64) << (4 * i)
    return _to_int32(words)


# ------------------------------------------------------------------------------------ the cases


def _group_of_rows(k, group, act_order, seed):
    """g_idx[K]: k // G, or for act-order the group of each row when the rows are visited in a
    random order (the i-th visited row is in group i // G), as GPTQ's desc_act produces."""
    g = k if group == -1 else group
    if not act_order:
        return torch.arange(k) // g
    visit = torch.randperm(k, generator=_gen(seed))
    g_idx = torch.empty(k, dtype=torch.int64)
    g_idx[visit] = torch.arange(k) // g
    return g_idx


def _known_layer(n, k, bits, group, symmetric, dtype, seed, act_order=False):
    """Random integers q[N, K], zero points z[groups, N] and scales s[groups, N] (in ``dtype``),
    with g_idx; and the weight W[N, K] = (q - z[g_idx]) * s[g_idx] computed in fp32."""
    g = k if group == -1 else group
    groups = -(-k // g)
    gen = _gen(seed)
    q = torch.randint(0, 1 << bits, (n, k), generator=gen)
    if symmetric:
        z = torch.full((groups, n), 1 << (bits - 1))
    else:
        z = torch.randint(1, 1 << bits, (groups, n), generator=gen)  # 1..: v1 can store z - 1
    # Scales of either sign are legal values; keep |W| near 1 so the products are of unit size.
    s = ((torch.rand(groups, n, generator=gen) + 0.5) * 2.0 / (1 << bits)).to(dtype)
    g_idx = _group_of_rows(k, group, act_order, seed + 1)
    w = (q.float() - z.float()[g_idx].t()) * s.float()[g_idx].t()
    return q, z, s, g_idx, w


def _gptq_tensors(q, z, bits, fmt):
    stored_z = z - 1 if fmt == "gptq" else z
    return _pack_gptq_along_k(q, bits), _pack_gptq_along_n(stored_z % (1 << bits), bits)


def _check_product(qw, input_perm, w, dtype, m=5, seed=7):
    """mixed_gemm of the imported weight (inputs permuted when act-order) against the fp64 product
    with the known weight, rounded to the activation dtype as the op's dequantization is."""
    n, k = w.shape
    x = torch.randn(m, k, generator=_gen(seed)).to(dtype)
    xp = x if input_perm is None else x[..., input_perm]
    out = cute_gemm.mixed_gemm(xp, qw)
    ref = x.double() @ w.to(dtype).double().t()
    assert_accurate(out, ref, dtype, k)


def _assert_same_weight(qw, input_perm, w, dtype):
    """The imported weight, un-permuted, equals the known one rounded once to ``dtype``."""
    deq = qw.dequantize()
    if input_perm is not None:
        restored = torch.empty_like(deq)
        restored[:, input_perm] = deq
        deq = restored
    assert torch.equal(deq, w.to(dtype))


GPTQ_SHAPES = {32: (24, 96), 64: (24, 192), 128: (16, 384), -1: (24, 160)}  # group: (N, K)


# ----------------------------------------------------------------------------------------- GPTQ


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("act_order", [False, True], ids=["ordered", "act_order"])
@pytest.mark.parametrize("fmt", ["gptq", "gptq_v2"])
@pytest.mark.parametrize("symmetric", [True, False], ids=["sym", "asym"])
@pytest.mark.parametrize("group", [32, 64, 128, -1], ids=["g32", "g64", "g128", "pc"])
@pytest.mark.parametrize("bits", [4, 8], ids=["int4", "int8"])
def test_gptq_reproduces_known_weight(bits, group, symmetric, fmt, act_order, dtype):
    n, k = GPTQ_SHAPES[group]
    seed = bits * 1000 + group + 7 * symmetric + 3 * act_order
    q, z, s, g_idx, w = _known_layer(n, k, bits, group, symmetric, dtype, seed, act_order)
    qweight, qzeros = _gptq_tensors(q, z, bits, fmt)
    qw, input_perm = gptq_to_quantized(qweight, qzeros, s, g_idx.to(torch.int32), bits=bits,
                                       group_size=group, sym=symmetric, checkpoint_format=fmt)
    assert qw.shape == (n, k) and qw.bits == bits and qw.dtype == dtype
    assert qw.group_size == group
    assert qw.symmetric == symmetric
    # Per-channel has a single group: act-order changes nothing there.
    if act_order and group != -1:
        assert input_perm is not None and input_perm.dtype == torch.int64
        # Sorted by group: each kernel group reads rows of one checkpoint group.
        sorted_groups = g_idx[input_perm]
        assert torch.equal(sorted_groups, torch.arange(k) // group)
    else:
        assert input_perm is None
    _assert_same_weight(qw, input_perm, w, dtype)
    _check_product(qw, input_perm, w, dtype)


def test_gptq_without_g_idx_equals_trivial_g_idx():
    q, z, s, g_idx, w = _known_layer(16, 128, 4, 32, False, torch.float16, seed=3)
    qweight, qzeros = _gptq_tensors(q, z, 4, "gptq")
    with_idx, perm = gptq_to_quantized(qweight, qzeros, s, g_idx, bits=4, group_size=32)
    without, perm_none = gptq_to_quantized(qweight, qzeros, s, None, bits=4, group_size=32)
    assert perm is None and perm_none is None
    assert torch.equal(with_idx.packed, without.packed)
    assert torch.equal(without.dequantize(), w.half())


def test_gptq_v1_zero_of_zero_wraps_to_2_pow_bits():
    """v1 stores z - 1, so a true zero point of 0 is stored as 15 (4 bits); GPTQ v1 kernels read
    it back as 16 and so does the importer (it stays exact: q - 16 is in [-16, -1])."""
    n, k, g = 8, 64, 32
    q = torch.randint(0, 16, (n, k), generator=_gen(11))
    stored = torch.randint(0, 16, (k // g, n), generator=_gen(12))
    stored[0, :4] = 15  # the wrapped values
    s = (torch.rand(k // g, n, generator=_gen(13)) * 0.1 + 0.05).half()
    qweight = _pack_gptq_along_k(q, 4)
    qzeros = _pack_gptq_along_n(stored, 4)
    qw, _ = gptq_to_quantized(qweight, qzeros, s, bits=4, group_size=g, checkpoint_format="gptq")
    z = (stored + 1).float()
    assert float(z.max()) == 16.0
    w = (q.float() - z.repeat_interleave(g, 0).t()) * s.float().repeat_interleave(g, 0).t()
    assert torch.equal(qw.zeros.float(), z)
    assert torch.equal(qw.dequantize(), w.half())
    _check_product(qw, None, w, torch.float16)


def test_gptq_asym_flag_with_centred_zeros_gives_symmetric_weight():
    """sym=False only allows any zero point; when they are all 2^(bits-1) the cheaper symmetric
    form (no zeros tensor) is exactly the same weight."""
    q, z, s, g_idx, w = _known_layer(16, 128, 4, 64, True, torch.float16, seed=5)
    qweight, qzeros = _gptq_tensors(q, z, 4, "gptq_v2")
    qw, _ = gptq_to_quantized(qweight, qzeros, s, g_idx, bits=4, group_size=64, sym=False,
                              checkpoint_format="gptq_v2")
    assert qw.zeros is None
    assert torch.equal(qw.dequantize(), w.half())


@pytest.mark.parametrize("act_order", [False, True], ids=["ordered", "act_order"])
@pytest.mark.parametrize("group,n,k,kernel_group", [
    (256, 16, 512, 128),   # a group size the kernel lacks: groups of 128 with repeated scales
    (128, 16, 160, 32),    # K % G != 0: a last group of 32 rows
    (96, 8, 192, 32),      # G a multiple of 32 only
    (1024, 16, 256, -1),   # one group over all of K: per-channel
], ids=["g256", "partial_last_group", "g96", "g1024_single_group"])
def test_gptq_group_sizes_the_kernel_lacks(group, n, k, kernel_group, act_order):
    dtype = torch.float16
    q, z, s, g_idx, w = _known_layer(n, k, 4, group, False, dtype, seed=group + k,
                                     act_order=act_order)
    qweight, qzeros = _gptq_tensors(q, z, 4, "gptq")
    qw, input_perm = gptq_to_quantized(qweight, qzeros, s, g_idx, bits=4, group_size=group)
    assert qw.group_size == kernel_group
    assert (input_perm is not None) == (act_order and kernel_group != -1)
    _assert_same_weight(qw, input_perm, w, dtype)
    _check_product(qw, input_perm, w, dtype)


def test_gptq_dtype_argument_converts_scales():
    """fp32 scales default to fp16 activations; dtype= picks bf16 (scales rounded once)."""
    q, z, s, g_idx, _ = _known_layer(16, 128, 4, 64, False, torch.float32, seed=9)
    qweight, qzeros = _gptq_tensors(q, z, 4, "gptq")
    default, _ = gptq_to_quantized(qweight, qzeros, s, bits=4, group_size=64)
    assert default.dtype == torch.float16
    qw, _ = gptq_to_quantized(qweight, qzeros, s, bits=4, group_size=64, dtype=torch.bfloat16)
    assert qw.dtype == torch.bfloat16 and qw.zeros.dtype == torch.bfloat16
    w = (q.float() - z.float()[g_idx].t()) * s.bfloat16().float()[g_idx].t()
    assert torch.equal(qw.dequantize(), w.bfloat16())


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("bits", [4, 8], ids=["int4", "int8"])
def test_gptq_v1_act_order_on_cuda(bits, dtype):
    """The CUDA kernel on an imported act-order v1 layer whose zero points include the wrapped
    2^bits (stored 2^bits - 1) and 1 (stored 0), the ends of the range v1 files can hold."""
    n, k, g = 64, 512, 128
    q, z, s, g_idx, _ = _known_layer(n, k, bits, g, False, dtype, seed=bits, act_order=True)
    z[0, :8], z[1, :8] = 1 << bits, 1
    w = (q.float() - z.float()[g_idx].t()) * s.float()[g_idx].t()
    qweight, qzeros = _gptq_tensors(q, z, bits, "gptq")
    qw, input_perm = gptq_to_quantized(qweight.cuda(), qzeros.cuda(), s.cuda(), g_idx.cuda(),
                                       bits=bits, group_size=g)
    assert qw.device.type == "cuda" and input_perm.device.type == "cuda"
    for m in (1, 16, 300):  # the fused kernels (M=300: wgmma on Hopper) or the dense path
        x = torch.randn(m, k, generator=_gen(m)).to(dtype)
        out = cute_gemm.mixed_gemm(x.cuda()[..., input_perm], qw)
        ref = x.double() @ w.to(dtype).double().t()
        assert_accurate(out.cpu(), ref, dtype, k)


# ------------------------------------------------------------------------------------------ AWQ


AWQ_SHAPES = {32: (24, 96), 64: (24, 192), 128: (16, 256), -1: (24, 160)}


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("symmetric", [True, False], ids=["centred_zeros", "asym"])
@pytest.mark.parametrize("group", [32, 64, 128, -1], ids=["g32", "g64", "g128", "pc"])
def test_awq_reproduces_known_weight(group, symmetric, dtype):
    n, k = AWQ_SHAPES[group]
    q, z, s, _, w = _known_layer(n, k, 4, group, symmetric, dtype, seed=group + 50 + symmetric)
    qw = awq_to_quantized(_pack_awq(q.t()), _pack_awq(z), s, group_size=group)
    assert qw.shape == (n, k) and qw.dtype == dtype and qw.group_size == group
    assert qw.symmetric == symmetric
    _assert_same_weight(qw, None, w, dtype)
    _check_product(qw, None, w, dtype)


def test_awq_interleaved_column_order():
    """A single nonzero value in each packed nibble position lands in the column the AWQ order
    names (and no other): the interleave is undone, not merely some permutation of it."""
    k, n = 32, 16
    for i, col in enumerate(AWQ_COLUMN_OF_NIBBLE):
        word = torch.zeros(k, n // 8, dtype=torch.int64)
        word[:, 1] = 5 << (4 * i)  # nibble i of word 1: column 8 + col
        zeros = _pack_awq(torch.zeros(1, n, dtype=torch.int64))
        scales = torch.ones(1, n, dtype=torch.float16)
        qw = awq_to_quantized(_to_int32(word), zeros, scales, group_size=-1)
        deq = qw.dequantize()
        expected = torch.zeros(n, k, dtype=torch.float16)
        expected[8 + col] = 5
        assert torch.equal(deq, expected), f"nibble {i}"


# -------------------------------------------------------------------------------- layer builders


@pytest.mark.parametrize("with_bias", [False, True], ids=["no_bias", "bias"])
def test_gptq_linear_act_order_layer(with_bias):
    n, k, g, dtype = 24, 192, 64, torch.float16
    q, z, s, g_idx, w = _known_layer(n, k, 4, g, False, dtype, seed=21, act_order=True)
    qweight, qzeros = _gptq_tensors(q, z, 4, "gptq")
    bias = torch.randn(n, generator=_gen(22)).float() if with_bias else None
    layer = gptq_linear(qweight, qzeros, s, g_idx.to(torch.int32), bias, bits=4, group_size=g,
                        sym=False)
    assert isinstance(layer, QuantLinear) and layer.input_perm is not None
    x = torch.randn(2, 3, k, generator=_gen(23)).to(dtype)
    out = layer(x)
    ref = x.double() @ w.half().double().t()
    if with_bias:
        ref = ref + bias.half().double()
    assert out.shape == (2, 3, n)
    assert_accurate(out.reshape(-1, n), ref.reshape(-1, n), dtype, k)


def test_awq_linear_layer_bf16_with_bias():
    n, k, g, dtype = 24, 128, 32, torch.bfloat16
    q, z, s, _, w = _known_layer(n, k, 4, g, False, dtype, seed=31)
    bias = torch.randn(n, generator=_gen(32)).to(dtype)
    layer = awq_linear(_pack_awq(q.t()), _pack_awq(z), s, bias, group_size=g)
    assert isinstance(layer, QuantLinear) and layer.input_perm is None
    x = torch.randn(4, k, generator=_gen(33)).to(dtype)
    ref = x.double() @ w.to(dtype).double().t() + bias.double()
    assert_accurate(layer(x), ref, dtype, k)


# ---------------------------------------------------------------------------------- model loads


class _Block(torch.nn.Module):
    def __init__(self, k, h):
        super().__init__()
        self.norm = torch.nn.LayerNorm(k)
        self.up = torch.nn.Linear(k, h, bias=True)
        self.down = torch.nn.Linear(h, k, bias=False)

    def forward(self, x):
        return x + self.down(torch.relu(self.up(self.norm(x))))


def _tiny_model(k=64, h=96, dtype=torch.float16, device=None):
    """An embedding, two blocks in a ModuleList and a head that stays dense."""
    model = torch.nn.Module()
    model.embed = torch.nn.Embedding(10, k)
    model.layers = torch.nn.ModuleList([_Block(k, h), _Block(k, h)])
    model.head = torch.nn.Linear(k, 8)
    return model.to(device=device, dtype=dtype)


def _forward(model, tokens):
    x = model.embed(tokens)
    for block in model.layers:
        x = block(x)
    return model.head(x)


def _checkpoint(kind, k=64, h=96, dtype=torch.float16, seed=40):
    """(state dict of a quantized _tiny_model, the same model with dense weights (q - z) * s
    rounded to ``dtype``, the quantized layers' names)."""
    reference = _tiny_model(k, h, dtype)
    with torch.no_grad():
        for p in reference.parameters():
            p.copy_(torch.randn(p.shape, generator=_gen(seed)) * 0.5)
            seed += 1
    tensors = {key: t.clone() for key, t in reference.state_dict().items()}
    names = []
    for i in range(2):
        for part, (n, kk) in (("up", (h, k)), ("down", (k, h))):
            name = f"layers.{i}.{part}"
            names.append(name)
            seed += 10
            act_order = kind == "gptq" and i == 1
            q, z, s, g_idx, w = _known_layer(n, kk, 4, 32, part == "up", dtype, seed, act_order)
            del tensors[f"{name}.weight"]
            if kind == "gptq":
                tensors[f"{name}.qweight"], tensors[f"{name}.qzeros"] = _gptq_tensors(
                    q, z, 4, "gptq")
                tensors[f"{name}.g_idx"] = g_idx.to(torch.int32)
            else:
                tensors[f"{name}.qweight"] = _pack_awq(q.t())
                tensors[f"{name}.qzeros"] = _pack_awq(z)
            tensors[f"{name}.scales"] = s
            with torch.no_grad():
                reference.get_submodule(name).weight.copy_(w.to(dtype))
    return tensors, reference, sorted(names)


GPTQ_CONFIG = {"bits": 4, "group_size": 32, "desc_act": True, "sym": False,
               "checkpoint_format": "gptq"}


def _assert_loaded_like_reference(model, reference, report, names, tensors):
    assert isinstance(report, CheckpointLoadReport)
    assert report.quantized == names
    assert report.missing == [] and report.unexpected == []
    assert "embed.weight" in report.loaded and "layers.1.norm.weight" in report.loaded
    assert "layers.0.up.bias" not in report.loaded  # it went into the quantized layer
    for name in names:
        assert isinstance(model.get_submodule(name), QuantLinear)
    assert torch.equal(model.layers[1].norm.weight, tensors["layers.1.norm.weight"])
    assert torch.equal(model.head.weight, tensors["head.weight"])
    assert model.layers[1].up.input_perm is not None  # act-order layer (GPTQ)
    tokens = torch.randint(0, 10, (3, 5), generator=_gen(99))
    with torch.no_grad():
        out, ref = _forward(model, tokens), _forward(reference, tokens)
    torch.testing.assert_close(out.float(), ref.float(), rtol=2e-2, atol=2e-2)


def test_load_gptq_model_from_state_dict():
    tensors, reference, names = _checkpoint("gptq")
    model = _tiny_model()
    report = load_gptq_model(model, tensors, GPTQ_CONFIG)
    _assert_loaded_like_reference(model, reference, report, names, tensors)
    assert "4 quantized layer(s)" in str(report)


@pytest.mark.parametrize("layout", ["file", "directory", "shards"])
def test_load_gptq_model_from_safetensors(tmp_path, layout):
    from safetensors.torch import save_file

    tensors, reference, names = _checkpoint("gptq", seed=60)
    keys = sorted(tensors)
    if layout == "shards":
        save_file({key: tensors[key] for key in keys[::2]}, str(tmp_path / "model-1.safetensors"))
        save_file({key: tensors[key] for key in keys[1::2]}, str(tmp_path / "model-2.safetensors"))
    else:
        save_file(tensors, str(tmp_path / "model.safetensors"))
    (tmp_path / "quantize_config.json").write_text(json.dumps(GPTQ_CONFIG))
    source = tmp_path / "model.safetensors" if layout == "file" else tmp_path
    model = _tiny_model()
    report = load_gptq_model(model, source)  # the config comes from the directory
    _assert_loaded_like_reference(model, reference, report, names, tensors)


def test_load_gptq_model_on_meta_device_model():
    """A model built without memory (device="meta") gets the checkpoint's tensors assigned."""
    tensors, reference, names = _checkpoint("gptq", seed=70)
    model = _tiny_model(device="meta")
    report = load_gptq_model(model, tensors, GPTQ_CONFIG)
    assert all(p.device.type == "cpu" for p in model.parameters())
    assert all(b.device.type == "cpu" for b in model.buffers())
    _assert_loaded_like_reference(model, reference, report, names, tensors)


def test_load_awq_model_from_safetensors_with_config(tmp_path):
    from safetensors.torch import save_file

    tensors, reference, names = _checkpoint("awq", seed=80)
    save_file(tensors, str(tmp_path / "model.safetensors"))
    (tmp_path / "config.json").write_text(json.dumps({"quantization_config": {
        "quant_method": "awq", "bits": 4, "group_size": 32, "version": "gemm",
        "zero_point": True}}))
    model = _tiny_model()
    report = load_awq_model(model, tmp_path)
    assert report.quantized == names and report.missing == [] and report.unexpected == []
    assert model.layers[0].up.group_size == 32 and model.layers[1].up.input_perm is None
    tokens = torch.randint(0, 10, (2, 7), generator=_gen(98))
    with torch.no_grad():
        out, ref = _forward(model, tokens), _forward(reference, tokens)
    torch.testing.assert_close(out.float(), ref.float(), rtol=2e-2, atol=2e-2)


def test_load_awq_model_bf16_model_from_dict():
    tensors, reference, names = _checkpoint("awq", dtype=torch.bfloat16, seed=90)
    model = _tiny_model(dtype=torch.bfloat16)
    report = load_awq_model(model, tensors, group_size=32, bits=4)
    assert report.quantized == names
    assert model.layers[0].down.scales.dtype == torch.bfloat16
    tokens = torch.randint(0, 10, (2, 3), generator=_gen(97))
    with torch.no_grad():
        out, ref = _forward(model, tokens), _forward(reference, tokens)
    torch.testing.assert_close(out.float(), ref.float(), rtol=5e-2, atol=5e-2)


def test_load_reports_missing_and_unexpected_keys():
    tensors, _, names = _checkpoint("gptq", seed=100)
    del tensors["layers.0.norm.bias"]
    tensors["extra.weight"] = torch.ones(3)
    tensors["layers.0.up.weight"] = torch.ones(96, 64, dtype=torch.float16)  # beside a qweight
    model = _tiny_model()
    before = model.layers[0].norm.weight.clone()
    with pytest.raises(ValueError, match=r"load_gptq_model: the checkpoint does not match the "
                       r"model \(nothing was changed") as info:
        load_gptq_model(model, tensors, GPTQ_CONFIG)
    assert "layers.0.norm.bias" in str(info.value) and "extra.weight" in str(info.value)
    assert isinstance(model.layers[0].up, torch.nn.Linear)  # nothing was changed
    assert torch.equal(model.layers[0].norm.weight, before)
    report = load_gptq_model(model, tensors, GPTQ_CONFIG, strict=False)
    assert report.quantized == names
    assert report.missing == ["layers.0.norm.bias"]
    assert report.unexpected == ["extra.weight", "layers.0.up.weight"]
    assert torch.equal(model.layers[0].norm.weight, tensors["layers.0.norm.weight"])


def test_load_state_dict_files_rejects_repeated_keys(tmp_path):
    from safetensors.torch import save_file

    save_file({"a": torch.ones(2)}, str(tmp_path / "x.safetensors"))
    save_file({"a": torch.zeros(2)}, str(tmp_path / "y.safetensors"))
    with pytest.raises(ValueError, match="key 'a' appears in more than one file"):
        load_state_dict_files(tmp_path)


# ---------------------------------------------------------------------------------------- errors


def _gptq_args(n=16, k=128, bits=4, group=64):
    q, z, s, g_idx, _ = _known_layer(n, k, bits, group, False, torch.float16, seed=1)
    qweight, qzeros = _gptq_tensors(q, z, bits, "gptq")
    return dict(qweight=qweight, qzeros=qzeros, scales=s, g_idx=g_idx.to(torch.int32)), \
        dict(bits=bits, group_size=group)


def _replaced(args, **changes):
    out = dict(args)
    out.update(changes)
    return out


GPTQ_ERRORS = [
    # (id, tensor changes, option changes, exception, message regex)
    ("bits3", {}, {"bits": 3}, ValueError, r"bits must be 4 or 8.*got bits=3"),
    ("bits_bool", {}, {"bits": True}, TypeError, r"bits must be an int \(4 or 8\); got bool"),
    ("bits_float", {}, {"bits": 4.0}, TypeError, r"bits must be an int \(4 or 8\); got float"),
    ("group_float", {}, {"group_size": 128.0}, TypeError,
     r"group_size must be an int \(-1 or a positive multiple of 32\); got float 128.0"),
    ("group48", {}, {"group_size": 48}, ValueError,
     r"group_size must be -1 \(per-channel\) or a positive multiple of 32.*got group_size=48"),
    ("group0", {}, {"group_size": 0}, ValueError, r"group_size must be -1"),
    ("format", {}, {"checkpoint_format": "gptq_v3"}, ValueError,
     r"checkpoint_format must be 'gptq' \(v1\) or 'gptq_v2'; got checkpoint_format='gptq_v3'"),
    ("sym_str", {}, {"sym": "yes"}, ValueError, r"sym must be None, True or False"),
    ("dtype", {}, {"dtype": torch.float32}, ValueError,
     r"dtype must be None, torch.float16 or torch.bfloat16"),
    ("qweight_list", {"qweight": [[1]]}, {}, TypeError,
     r"qweight must be a torch.Tensor; got list"),
    ("qweight_int64", {"qweight": torch.zeros(16, 16, dtype=torch.int64)}, {}, ValueError,
     r"qweight must have dtype torch.int32; got torch.int64"),
    ("qweight_3d", {"qweight": torch.zeros(1, 16, 16, dtype=torch.int32)}, {}, ValueError,
     r"qweight must be a 2-D tensor; got shape \[1, 16, 16\]"),
    ("qzeros_float", {"qzeros": torch.zeros(2, 2)}, {}, ValueError,
     r"qzeros must have dtype torch.int32; got torch.float32"),
    ("scales_int", {"scales": torch.zeros(2, 16, dtype=torch.int32)}, {}, ValueError,
     r"scales must have dtype torch.float16 or torch.bfloat16 or torch.float32"),
    ("scales_shape", {"scales": torch.ones(3, 16, dtype=torch.float16)}, {}, ValueError,
     r"scales must have shape \[ceil\(K/G\), N\] = \[2, 16\].*got \[3, 16\]"),
    ("qzeros_shape", {"qzeros": torch.zeros(2, 4, dtype=torch.int32)}, {}, ValueError,
     r"qzeros must have shape \[ceil\(K/G\), N\*bits/32\] = \[2, 2\].*got \[2, 4\]"),
    ("g_idx_length", {"g_idx": torch.zeros(100, dtype=torch.int32)}, {}, ValueError,
     r"g_idx must have one entry per input row \(K=128, from qweight\); got shape \[100\]"),
    ("g_idx_float", {"g_idx": torch.zeros(128)}, {}, ValueError,
     r"g_idx must have dtype torch.int16 or torch.int32 or torch.int64; got torch.float32"),
    ("g_idx_range", {"g_idx": torch.arange(128, dtype=torch.int32) // 32}, {}, ValueError,
     r"g_idx values must lie in \[0, 2\).*got values in \[0, 3\]"),
    ("g_idx_counts", {"g_idx": (torch.arange(128) >= 100).to(torch.int32)}, {}, ValueError,
     r"each group must have group_size=64 rows in g_idx.*got 100 rows in group 0"),
    ("scales_nan", {"scales": torch.full((2, 16), float("nan"), dtype=torch.float16)}, {},
     ValueError, r"scales must be finite; got 32 NaN/inf value\(s\)"),
    ("scales_overflow", {"scales": torch.full((2, 16), 1e6)}, {"dtype": torch.float16},
     ValueError, r"scales overflow dtype torch.float16; pass dtype=torch.bfloat16"),
    # fp32 scales too small for fp16 would have zeroed their groups without a word.
    ("scales_underflow", {"scales": torch.full((2, 16), 1e-9)}, {"dtype": torch.float16},
     ValueError, r"scales underflow to 0 in dtype torch.float16 \(the checkpoint has scales as "
     r"small as 1e-09\), which would zero their groups; pass dtype=torch.bfloat16"),
    ("device", {"g_idx": torch.zeros(128, dtype=torch.int32, device="meta")}, {}, ValueError,
     r"all tensors must be on one device; got qweight on cpu, .* g_idx on meta"),
]


@pytest.mark.parametrize("tensors,options,exc,message", [e[1:] for e in GPTQ_ERRORS],
                         ids=[e[0] for e in GPTQ_ERRORS])
def test_gptq_errors(tensors, options, exc, message):
    args, opts = _gptq_args()
    with pytest.raises(exc, match="gptq_to_quantized: " + message):
        gptq_to_quantized(**_replaced(args, **tensors), **_replaced(opts, **options))


def test_gptq_error_sym_with_wrong_format():
    """A gptq_v2 symmetric file (zeros stored as 8) read as v1 would give zeros of 9."""
    q, z, s, _, _ = _known_layer(16, 64, 4, 32, True, torch.float16, seed=2)
    qweight, qzeros = _gptq_tensors(q, z, 4, "gptq_v2")
    with pytest.raises(ValueError, match=r"sym=True but the zero points \(checkpoint_format="
                       r"'gptq'\) are not all 8: found \[9\]; the checkpoint_format is probably "
                       r"wrong"):
        gptq_to_quantized(qweight, qzeros, s, bits=4, group_size=32, sym=True)


def test_gptq_error_n_not_multiple_of_8():
    q, z, s, _, _ = _known_layer(12, 64, 8, 32, False, torch.float16, seed=4)
    qweight, qzeros = _gptq_tensors(q, z, 8, "gptq")  # 8 bits: N * 8 / 32 = 3 words of zeros
    with pytest.raises(ValueError, match=r"N \(output features\) must be a multiple of 8 for the "
                       r"kernel; got N=12"):
        gptq_to_quantized(qweight, qzeros, s, bits=8, group_size=32)


def test_gptq_error_k_not_expressible_with_kernel_groups():
    # K = 200 (25 words of 8 nibbles), G = 128: groups of 128 and 72 rows; 8 is the largest
    # common divisor, below the kernel's smallest group.
    q, z, s, _, _ = _known_layer(8, 200, 4, 128, False, torch.float16, seed=6)
    qweight, qzeros = _gptq_tensors(q, z, 4, "gptq")
    with pytest.raises(ValueError, match=r"K=200 with group_size=128 cannot be expressed with the "
                       r"kernel's groups \(32, 64, 128\)"):
        gptq_to_quantized(qweight, qzeros, s, bits=4, group_size=128)
    q, z, s, _, _ = _known_layer(8, 200, 4, -1, False, torch.float16, seed=6)
    qweight, qzeros = _gptq_tensors(q, z, 4, "gptq")
    with pytest.raises(ValueError, match=r"K must be a multiple of 32 for a single group over all "
                       r"of K \(per-channel, group_size=-1\); got K=200"):
        gptq_to_quantized(qweight, qzeros, s, bits=4, group_size=-1)


def _awq_args(n=16, k=128, group=64):
    q, z, s, _, _ = _known_layer(n, k, 4, group, False, torch.float16, seed=8)
    return dict(qweight=_pack_awq(q.t()), qzeros=_pack_awq(z), scales=s), dict(group_size=group)


AWQ_ERRORS = [
    ("bits8", {}, {"bits": 8}, ValueError, r"bits must be 4 \(what cute_gemm's kernel reads\); "
     r"got bits=8"),
    ("group_str", {}, {"group_size": "128"}, TypeError, r"group_size must be an int"),
    ("qweight_float", {"qweight": torch.zeros(128, 2)}, {}, ValueError,
     r"qweight must have dtype torch.int32; got torch.float32"),
    ("scales_none", {"scales": None}, {}, TypeError,
     r"scales must be a torch.Tensor; got NoneType"),
    ("scales_shape", {"scales": torch.ones(2, 24, dtype=torch.float16)}, {}, ValueError,
     r"scales must have shape \[K/G, N\] = \[2, 16\] \(K=128, N=16 from qweight \[128, 2\], "
     r"G=64\); got \[2, 24\]"),
    ("qzeros_shape", {"qzeros": torch.zeros(1, 2, dtype=torch.int32)}, {}, ValueError,
     r"qzeros must have shape \[K/G, N/8\] = \[2, 2\].*got \[1, 2\]"),
    ("empty", {"qweight": torch.zeros(0, 2, dtype=torch.int32)}, {}, ValueError,
     r"qweight must be non-empty; got shape \[0, 2\]"),
]


@pytest.mark.parametrize("tensors,options,exc,message", [e[1:] for e in AWQ_ERRORS],
                         ids=[e[0] for e in AWQ_ERRORS])
def test_awq_errors(tensors, options, exc, message):
    args, opts = _awq_args()
    with pytest.raises(exc, match="awq_to_quantized: " + message):
        awq_to_quantized(**_replaced(args, **tensors), **_replaced(opts, **options))


def test_layer_errors_bias():
    args, opts = _gptq_args()
    with pytest.raises(ValueError, match=r"gptq_linear: bias must have N=16 entries \(the output "
                       r"features\); got shape \[8\]"):
        gptq_linear(**args, bias=torch.zeros(8), **opts)
    awq, awq_opts = _awq_args()
    with pytest.raises(ValueError, match=r"awq_linear: bias must have dtype torch.float16 or "
                       r"torch.bfloat16 or torch.float32; got torch.int64"):
        awq_linear(**awq, bias=torch.zeros(16, dtype=torch.int64), **awq_opts)


def test_loader_errors(tmp_path):
    tensors, _, _ = _checkpoint("gptq", seed=110)
    with pytest.raises(TypeError, match=r"load_gptq_model: model must be a torch.nn.Module; got "
                       r"dict"):
        load_gptq_model({}, tensors, GPTQ_CONFIG)
    with pytest.raises(TypeError, match=r"load_gptq_model: state_dict must be a dict of tensors "
                       r"or a path .*; got list"):
        load_gptq_model(_tiny_model(), [tensors], GPTQ_CONFIG)
    with pytest.raises(ValueError,
                       match=r"load_gptq_model: quantize_config must have 'group_size'"):
        load_gptq_model(_tiny_model(), tensors, {"bits": 4})
    with pytest.raises(ValueError, match=r"load_gptq_model: quantize_config must be a dict or a "
                       r"path to a JSON file"):
        load_gptq_model(_tiny_model(), tensors)
    with pytest.raises(ValueError, match=r"load_gptq_model: quantize_config is for "
                       r"quant_method='awq', not 'gptq'"):
        load_gptq_model(_tiny_model(), tensors, dict(GPTQ_CONFIG, quant_method="awq"))
    with pytest.raises(ValueError, match=r"load_gptq_model: layer 'layers.0.down': "
                       r"gptq_to_quantized: bits must be 4 or 8"):
        load_gptq_model(_tiny_model(), tensors, dict(GPTQ_CONFIG, bits=2))
    with pytest.raises(ValueError, match=r"load_gptq_model: dtype must be None, torch.float16 or "
                       r"torch.bfloat16; got torch.float32"):
        load_gptq_model(_tiny_model(), tensors, GPTQ_CONFIG, dtype=torch.float32)

    model = _tiny_model()
    model.layers[0].up = torch.nn.Conv1d(64, 96, 1)
    with pytest.raises(ValueError, match=r"load_gptq_model: the checkpoint quantizes "
                       r"'layers.0.up', but the model's module there is a Conv1d, not a "
                       r"torch.nn.Linear"):
        load_gptq_model(model, tensors, GPTQ_CONFIG)
    with pytest.raises(ValueError, match=r"load_gptq_model: layer 'layers.0.down' is "
                       r"nn.Linear\(in_features=128, out_features=64\) in the model but the "
                       r"checkpoint holds a weight of in_features=96, out_features=64"):
        load_gptq_model(_tiny_model(h=128), tensors, GPTQ_CONFIG)
    partial = {key: t for key, t in tensors.items() if key != "layers.1.down.qzeros"}
    with pytest.raises(ValueError, match=r"load_gptq_model: layers.1.down.qweight has no "
                       r"layers.1.down.qzeros in the checkpoint"):
        load_gptq_model(_tiny_model(), partial, GPTQ_CONFIG)

    with pytest.raises(ValueError, match=r"load_state_dict_files: no \*.safetensors file in "
                       r"directory"):
        load_gptq_model(_tiny_model(), tmp_path, GPTQ_CONFIG)
    with pytest.raises(ValueError, match=r"load_state_dict_files: path must be a .safetensors "
                       r"file or a directory holding them; .* does not exist"):
        load_gptq_model(_tiny_model(), tmp_path / "nothing.safetensors", GPTQ_CONFIG)

    from safetensors.torch import save_file

    awq, _, _ = _checkpoint("awq", seed=120)
    save_file(awq, str(tmp_path / "model.safetensors"))
    (tmp_path / "quant_config.json").write_text(json.dumps({"w_bit": 4, "q_group_size": 32,
                                                            "version": "GEMV"}))
    with pytest.raises(ValueError, match=r"load_awq_model: only AWQ's 'gemm' packing is "
                       r"supported; the checkpoint's config says version='GEMV'"):
        load_awq_model(_tiny_model(), tmp_path)
