"""The packed weight format's rulebook (csrc/kernels/mixed/weight_format.hpp through
cute_gemm._C.weight_format and cute_gemm.weight_format), CPU only:

- the Python rulebook is the C++ one: the sets in the header's source equal the binding's, and
  every module's constants and checks are the rulebook's;
- the format layout is a bijection onto a block's fields, its TV layout inverts it, and the
  pack/unpack views derived from it are inverse permutations;
- pack -> unpack round trips (random shapes, bits 4/8, awkward K), against the format written
  out independently, and the C++ op's unpacking (the CPU reference) agrees with Python's;
- every entry point refuses what the rulebook refuses.
"""

import os
import re

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import cute_gemm
from cute_gemm import _C, checkpoints, nn, quant
from cute_gemm import layout as L
from cute_gemm import weight_format as wf

HEADER = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "csrc",
                      "kernels", "mixed", "weight_format.hpp")


def _header_array(name):
    text = open(HEADER).read()
    m = re.search(r"constexpr int " + name + r"\[\] = \{([^}]*)\};", text)
    assert m, name
    return tuple(-1 if v.strip() == "kPerChannel" else int(v) for v in m.group(1).split(","))


# ---------------------------------------------------------------------- one rulebook, C++ = Py


def test_sets_are_the_headers():
    # The extension was built from this header (a stale build would disagree).
    assert wf.VALID_BITS == _header_array("kValidBits") == (4, 8)
    assert wf.VALID_GROUP_SIZES == _header_array("kValidGroupSizes") == (32, 64, 128, -1)
    assert wf.PER_CHANNEL == -1 and wf.PER_CHANNEL_K_MULTIPLE == 32
    assert (wf.BLOCK_N, wf.LANES, wf.WORDS_PER_LANE) == (8, 32, 4)
    assert wf.VALID_BITS_TEXT == "4 or 8"
    assert wf.VALID_GROUP_SIZES_TEXT == "32, 64, 128 or -1 (per-channel)"


def test_predicates_accept_exactly_the_sets():
    for v in range(-300, 300):
        assert wf.valid_bits(v) == (v in wf.VALID_BITS), v
        assert wf.valid_group_size(v) == (v in wf.VALID_GROUP_SIZES), v
    assert not wf.valid_bits((1 << 32) + 4)  # no truncation to int in C++
    assert not wf.valid_group_size((1 << 32) + 32)


def test_scalar_rules():
    for k in (32, 96, 128, 4224, 1 << 40):
        assert wf.effective_group_size(-1, k) == k
        for g in (32, 64, 128):
            assert wf.effective_group_size(g, k) == (g if g <= k else k)
        assert wf.effective_group_size(k, k) == k  # a resolved size maps to itself
    assert wf.k_multiple(-1) == 32 and [wf.k_multiple(g) for g in (32, 64, 128)] == [32, 64, 128]
    assert wf.valid_k(96, -1) and not wf.valid_k(80, -1) and not wf.valid_k(0, 32)
    assert wf.valid_k(256, 128) and not wf.valid_k(192, 128)
    assert wf.valid_n(0) and wf.valid_n(24) and not wf.valid_n(12) and not wf.valid_n(-8)
    assert (wf.block_k(4), wf.block_k(8)) == (128, 64)
    assert (wf.fields_per_word(4), wf.fields_per_word(8)) == (8, 4)
    assert wf.packed_shape(24, 200, 4) == (3, 2, 32, 4)
    assert wf.packed_shape(24, 200, 8) == (3, 4, 32, 4)
    assert wf.packed_shape(8, 1, 8) == (1, 1, 32, 4) and wf.k_blocks(129, 4) == 2
    for fn, args in [(wf.block_k, (5,)), (wf.packed_shape, (8, 64, 2)), (wf.block_layout, (16,)),
                     (wf.tv_layout, (0,)), (wf.fields_per_word, (3,)), (wf.k_blocks, (64, 6))]:
        with pytest.raises(ValueError, match="bits must be 4 or 8"):
            fn(*args)


def test_every_module_uses_the_rulebook():
    assert quant.SUPPORTED_BITS is wf.VALID_BITS
    assert quant.SUPPORTED_GROUP_SIZES is wf.VALID_GROUP_SIZES
    assert quant.BLOCK_N == wf.BLOCK_N and quant.block_k is wf.block_k
    assert quant.check_bits is wf.check_bits and quant.check_group_size is wf.check_group_size
    assert quant.packed_shape is wf.packed_shape
    assert nn.check_bits is wf.check_bits and nn.check_group_size is wf.check_group_size
    assert cute_gemm.convert.check_bits is wf.check_bits
    assert checkpoints.check_bits is wf.check_bits
    assert checkpoints._KERNEL_GROUPS == (128, 64, 32)
    qw = cute_gemm.quantize(torch.randn(8, 96), 4, -1)
    assert qw.effective_group_size == 96


# ----------------------------------------------------------------------------- the layouts


@pytest.mark.parametrize("bits", [4, 8])
def test_block_layout_is_a_bijection(bits):
    block = wf.block_layout(bits)
    bk = wf.block_k(bits)
    fields = wf.LANES * wf.WORDS_PER_LANE * wf.fields_per_word(bits)
    assert fields * bits == 512 * 8
    assert L.size(block) == wf.BLOCK_N * bk and L.cosize(block) == fields
    assert sorted(block.offsets()) == list(range(fields))
    assert block == quant.packed_layout(bits)
    expected = {4: "(8,(2,4,2,2,4)):(128,(4,32,1,2,8))", 8: "(8,(2,4,2,4)):(64,(2,16,1,4))"}
    assert str(block) == expected[bits]


@pytest.mark.parametrize("bits", [4, 8])
def test_tv_layout_inverts_the_block_layout(bits):
    block, tv = wf.block_layout(bits), wf.tv_layout(bits)
    per_lane = wf.WORDS_PER_LANE * wf.fields_per_word(bits)
    assert L.size(tv) == wf.LANES * per_lane
    seen = set()
    for lane in range(wf.LANES):
        for v in range(per_lane):
            pos = tv(lane, v)
            n, k = pos % wf.BLOCK_N, pos // wf.BLOCK_N
            assert n == lane // 4  # lane 4 g + t holds row g (the mma's groupID)
            assert block(n, k) == lane * per_lane + v
            seen.add(pos)
    assert len(seen) == wf.BLOCK_N * wf.block_k(bits)
    assert quant.packed_tv_layout(bits) == tv


@pytest.mark.parametrize("bits", [4, 8])
def test_packed_views_are_inverse_permutations_read_off_the_layout(bits):
    v = _C.weight_format.packed_views(bits)
    fields, q, kb_dim = v["fields"], v["q"], v["kb_dim"]
    q_from_fields, fields_from_q = v["q_from_fields"], v["fields_from_q"]
    rank = len(fields)
    assert sorted(q_from_fields) == list(range(rank)) == sorted(fields_from_q)
    assert all(fields_from_q[q_from_fields[d]] == d for d in range(rank))
    assert all(q[d] == fields[q_from_fields[d]] for d in range(rank))
    assert fields[:2] == (0, 0) and q[0] == 0 and q[kb_dim] == 0  # nb, kb: the caller's
    # The fields view is the block layout's leaves by decreasing stride (compact row-major).
    block = wf.block_layout(bits)

    def leaves(t):
        return [x for y in t for x in leaves(y)] if isinstance(t, tuple) else [t]

    pairs = sorted(zip(leaves(block.stride), leaves(block.shape)), reverse=True)
    assert tuple(e for _, e in pairs) == fields[2:]
    # q's view: nb, then n's leaves, kb, then k's leaves, each slowest first.
    n_shape, k_shape = block.shape
    assert q[1:kb_dim] == tuple(reversed(leaves(n_shape)))
    assert q[kb_dim + 1:] == tuple(reversed(leaves(k_shape)))


@pytest.mark.parametrize("bits,n,k", [(4, 16, 200), (8, 24, 100), (4, 8, 1), (8, 8, 64)])
def test_whole_packed_layout_is_a_bijection(bits, n, k):
    lay = quant.packed_layout(bits, n, k)
    kp = wf.k_blocks(k, bits) * wf.block_k(bits)
    assert sorted(lay.offsets()) == list(range(n * kp))


# --------------------------------------------------------------------------- pack / unpack


def _spec_words(q_full, bits):
    """Packed words from the format's prose (weight_format.hpp), element by element."""
    n, kp = q_full.shape
    bk = 128 if bits == 4 else 64
    out = torch.zeros(n // 8, kp // bk, 32, 4, dtype=torch.int64)
    rows = q_full.tolist()
    for nb in range(n // 8):
        for kb in range(kp // bk):
            for lane in range(32):
                g, t = divmod(lane, 4)
                for w in range(4):
                    word = 0
                    for i in range(32 // bits):
                        if bits == 4:
                            h, s, e = i % 2, (i // 2) % 2, i // 4
                            k = e + 2 * t + 8 * h + 16 * s + 32 * w
                        else:
                            h, e = i % 2, i // 2
                            k = e + 2 * t + 8 * h + 16 * w
                        word |= rows[8 * nb + g][kb * bk + k] << (bits * i)
                    out[nb, kb, lane, w] = word - (1 << 32) if word >= (1 << 31) else word
    return out.to(torch.int32)


@settings(max_examples=25, deadline=None)
@given(bits=st.sampled_from([4, 8]), nb=st.integers(1, 3), k=st.integers(1, 300),
       seed=st.integers(0, 2 ** 16))
def test_pack_unpack_round_trip(bits, nb, k, seed):
    n = 8 * nb
    gen = torch.Generator().manual_seed(seed)
    q = torch.randint(0, 1 << bits, (n, k), generator=gen)
    packed = cute_gemm.pack_weight(q, bits, pad_value=(1 << bits) - 1)
    assert packed.shape == wf.packed_shape(n, k, bits) and packed.dtype == torch.int32
    assert torch.equal(cute_gemm.unpack_weight(packed, bits, k), q.int())
    kp = wf.k_blocks(k, bits) * wf.block_k(bits)
    full = torch.full((n, kp), (1 << bits) - 1, dtype=torch.int64)
    full[:, :k] = q
    assert torch.equal(wf.unpack_fields(packed, bits), full.int())
    if n * kp <= 8 * 256:
        assert torch.equal(packed, _spec_words(full, bits))


@settings(max_examples=20, deadline=None)
@given(bits=st.sampled_from([4, 8]), nb=st.integers(1, 3), groups=st.integers(1, 5),
       group=st.sampled_from([32, 64, 128, -1]), symmetric=st.booleans(),
       seed=st.integers(0, 2 ** 16))
def test_cpp_unpack_matches_python(bits, nb, groups, group, symmetric, seed):
    # The op's CPU reference unpacks in C++ (unpack_q, from the same header): with the identity
    # as activations it returns dequantize(W)^T, which Python computes from its own unpack.
    n = 8 * nb
    k = wf.k_multiple(group) * groups
    gen = torch.Generator().manual_seed(seed)
    w = torch.randn(n, k, generator=gen).to(torch.float16)
    qw = cute_gemm.quantize(w, bits, group, symmetric)
    eye = torch.eye(k, dtype=torch.float16)
    out = cute_gemm.mixed_gemm(eye, qw)
    assert torch.equal(out, qw.dequantize().t())


def test_cpp_unpack_backward_under_dynamic_shapes():
    # unpack_q runs in the backward on fake tensors with a symbolic N.
    def f(a, qw):
        return cute_gemm.mixed_gemm(a, qw).sum()

    compiled = torch.compile(f, backend="aot_eager", fullgraph=True, dynamic=True)
    for n in (16, 24):
        qw = cute_gemm.quantize(torch.randn(n, 160), 4, 32, dtype=torch.float16)
        a = torch.randn(3, 160, dtype=torch.float16, requires_grad=True)
        compiled(a, qw).backward()
        a2 = a.detach().clone().requires_grad_()
        f(a2, qw).backward()
        assert torch.equal(a.grad, a2.grad)


# ------------------------------------------------------------------ every entry point refuses

BAD_BITS = [2, 3, 16, 0, -4]
BAD_GROUPS = [0, 16, 48, 256, -2]


@pytest.mark.parametrize("bits", BAD_BITS)
def test_bad_bits_refused_everywhere(bits):
    w = torch.randn(8, 128)
    q = torch.zeros(8, 128, dtype=torch.int32)
    qw = cute_gemm.quantize(w, 4, 32)
    a = torch.randn(2, 128, dtype=qw.dtype)
    for call in [lambda: cute_gemm.quantize(w, bits, 32),
                 lambda: cute_gemm.pack_weight(q, bits),
                 lambda: cute_gemm.unpack_weight(qw.packed, bits, 128),
                 lambda: quant.QuantizedWeight(qw.packed, qw.scales, None, bits, 32, (8, 128)),
                 lambda: quant.format_tag(bits, 32, True),
                 lambda: nn.QuantLinear(128, 8, bits=bits),
                 lambda: cute_gemm.quantize_model(torch.nn.Sequential(torch.nn.Linear(128, 8)),
                                                  bits=bits)]:
        with pytest.raises(ValueError, match="bits must be 4 or 8"):
            call()
    for device in ("cpu", "meta"):  # the C++ checks and the fake kernel's
        args = [t.to(device) for t in (a, qw.packed, qw.scales)]
        with pytest.raises(RuntimeError, match="bits must be 4 or 8"):
            torch.ops.cute_gemm.mixed_gemm(*args, None, bits, 32, 128)


@pytest.mark.parametrize("group", BAD_GROUPS)
def test_bad_group_sizes_refused_everywhere(group):
    w = torch.randn(8, 256)
    qw = cute_gemm.quantize(w, 4, 32)
    a = torch.randn(2, 256, dtype=qw.dtype)
    for call in [lambda: cute_gemm.quantize(w, 4, group),
                 lambda: quant.QuantizedWeight(qw.packed, qw.scales, None, 4, group, (8, 256)),
                 lambda: quant.format_tag(4, group, True),
                 lambda: nn.QuantLinear(256, 8, group_size=group),
                 lambda: cute_gemm.quantize_model(torch.nn.Sequential(torch.nn.Linear(256, 8)),
                                                  group_size=group)]:
        with pytest.raises(ValueError, match=r"group_size must be one of 32, 64, 128 or -1"):
            call()
    for device in ("cpu", "meta"):
        args = [t.to(device) for t in (a, qw.packed, qw.scales)]
        with pytest.raises(RuntimeError, match=r"group_size must be 32, 64, 128 or -1"):
            torch.ops.cute_gemm.mixed_gemm(*args, None, 4, group, 256)


@pytest.mark.parametrize("group,k", [(-1, 80), (64, 96), (128, 192), (32, 48)])
def test_bad_k_refused_everywhere(group, k):
    assert not wf.valid_k(k, group)
    multiple = wf.k_multiple(group)
    w = torch.randn(8, k)
    with pytest.raises(ValueError, match="K must be a multiple of"):
        cute_gemm.quantize(w, 4, group)
    with pytest.raises(ValueError, match=f"is not a multiple of {multiple}|group_size={group}"):
        nn.QuantLinear(k, 8, group_size=group)
    with pytest.warns(UserWarning, match="kept 1 nn.Linear layer"):
        summary = cute_gemm.quantize_model(torch.nn.Sequential(torch.nn.Linear(k, 8)),
                                           group_size=group)
    assert list(summary.skipped) == ["0"]
    # The op (C++ and fake) with a weight packed for K's blocks and whatever scales.
    a = torch.randn(2, k, dtype=torch.float16)
    packed = torch.zeros(wf.packed_shape(8, k, 4), dtype=torch.int32)
    scales = torch.ones(1, 8, dtype=torch.float16)
    for device in ("cpu", "meta"):
        args = [t.to(device) for t in (a, packed, scales)]
        with pytest.raises(RuntimeError, match="K must be a multiple of"):
            torch.ops.cute_gemm.mixed_gemm(*args, None, 4, group, k)


def test_bad_n_refused_everywhere():
    w = torch.randn(12, 128)
    with pytest.raises(ValueError, match="must be a multiple of 8"):
        cute_gemm.quantize(w, 4, 32)
    with pytest.raises(ValueError, match="must be a multiple of 8"):
        cute_gemm.pack_weight(torch.zeros(12, 128, dtype=torch.int32), 4)
    with pytest.raises(ValueError, match="out_features=12 is not a multiple of 8"):
        nn.QuantLinear(128, 12)
    assert nn.unsupported_reason(12, 128, 32) == "out_features=12 is not a multiple of 8"
    assert nn.unsupported_reason(16, 128, 32) is None
