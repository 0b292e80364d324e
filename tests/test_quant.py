"""cute_gemm.quant on CPU: the packed weight format (against the spec in
csrc/kernels/mixed/weight_format.hpp, written out independently here), pack/unpack round trips,
the quantization rules and their error bounds, the layouts that describe the format, and the
argument checks."""

import dataclasses
import re

import pytest
import torch
from helpers import DTYPES, GROUPS

import cute_gemm
from cute_gemm import layout as L
from cute_gemm.quant import packed_layout, packed_shape, packed_tv_layout


def _gen(seed):
    return torch.Generator().manual_seed(seed)


def _random_q(n, k, bits, dtype=torch.int32, seed=0):
    return torch.randint(0, 1 << bits, (n, k), generator=_gen(seed)).to(dtype)


def _weight(n, k, dtype=torch.float16, seed=0, scale=1.0):
    return (torch.randn(n, k, generator=_gen(seed)) * scale).to(dtype)


# ------------------------------------------------------------------------ the spec, written out


def _spec_pack(q, bits, pad):
    """The packed tensor built element by element from the format's definition, with plain index
    math (no reshapes shared with the implementation)."""
    n, k = q.shape
    bk = 128 if bits == 4 else 64
    kb_count = -(-k // bk)
    rows = q.tolist()

    def value(row, col):
        return rows[row][col] if col < k else pad

    out = torch.zeros(n // 8, kb_count, 32, 4, dtype=torch.int64)
    for nb in range(n // 8):
        for kb in range(kb_count):
            for lane in range(32):
                g, t = lane // 4, lane % 4
                row = 8 * nb + g
                for w in range(4):
                    word = 0
                    if bits == 4:
                        # nibble i: [r0(2w).x, r1(2w).x, r0(2w+1).x, r1(2w+1).x, then the .y]
                        for i in range(8):
                            step = 2 * w + (i // 2) % 2
                            reg = i % 2  # r0: k0 + 2t (+1), r1: k0 + 2t + 8 (+1)
                            half = i // 4  # x: +0, y: +1
                            col = kb * bk + 16 * step + 2 * t + 8 * reg + half
                            word |= value(row, col) << (4 * i)
                    else:
                        # byte i: [r0.x, r1.x, r0.y, r1.y] of k16 step w
                        for i in range(4):
                            reg, half = i % 2, i // 2
                            col = kb * bk + 16 * w + 2 * t + 8 * reg + half
                            word |= value(row, col) << (8 * i)
                    out[nb, kb, lane, w] = word - (1 << 32) if word >= (1 << 31) else word
    return out.to(torch.int32)


@pytest.mark.parametrize("bits,n,k", [(4, 16, 256), (4, 8, 200), (8, 16, 128), (8, 8, 100)])
def test_pack_matches_spec(bits, n, k):
    q = _random_q(n, k, bits, seed=bits * 100 + k)
    pad = 3 if bits == 4 else 77
    packed = cute_gemm.pack_weight(q, bits, pad_value=pad)
    assert packed.dtype == torch.int32 and packed.is_contiguous()
    assert packed.shape == packed_shape(n, k, bits)
    assert torch.equal(packed, _spec_pack(q, bits, pad))


def test_pack_hand_checked_words():
    # INT4, q[n, k] = k % 16. Lane 0, word 0 (steps 0, 1): nibbles 0..7 are W[0, k] for
    # k = 0, 8, 16, 24, 1, 9, 17, 25 -> 0, 8, 0, 8, 1, 9, 1, 9 -> 0x91918080.
    k = torch.arange(128)
    q = (k % 16).repeat(8, 1)
    packed = cute_gemm.pack_weight(q, 4)
    as_u32 = packed.to(torch.int64) & 0xFFFFFFFF
    assert int(as_u32[0, 0, 0, 0]) == 0x91918080
    # Lane 5 (g 1, t 1), word 1 (steps 2, 3: k0 = 32, 48): k = 34, 42, 50, 58, 35, 43, 51, 59.
    assert int(as_u32[0, 0, 5, 1]) == 0xB3B3A2A2
    # INT8, q[n, k] = (k + 64 n) % 256. Lane 0, word 0: W[0, 0], W[0, 8], W[0, 1], W[0, 9].
    q8 = (torch.arange(64) + 64 * torch.arange(8).unsqueeze(1)) % 256
    packed8 = cute_gemm.pack_weight(q8, 8).to(torch.int64) & 0xFFFFFFFF
    assert int(packed8[0, 0, 0, 0]) == 0x09010800
    # Lane 6 (g 1, t 2), word 3 (k0 = 48): W[1, 52], W[1, 60], W[1, 53], W[1, 61] = 116, 124, ...
    assert int(packed8[0, 0, 6, 3]) == 0x7D757C74


@pytest.mark.parametrize("qdtype", [torch.uint8, torch.int16, torch.int32, torch.int64])
@pytest.mark.parametrize("bits", [4, 8])
@pytest.mark.parametrize("n,k", [(8, 10944), (8, 1), (16, 63), (24, 128), (40, 200), (8, 4224)])
def test_pack_unpack_round_trip(n, k, bits, qdtype):
    q = _random_q(n, k, bits, dtype=qdtype, seed=n + k + bits)
    packed = cute_gemm.pack_weight(q, bits)
    assert packed.shape == packed_shape(n, k, bits)
    back = cute_gemm.unpack_weight(packed, bits, k)
    assert back.dtype == torch.int32 and back.shape == (n, k)
    assert torch.equal(back, q.to(torch.int32))


@pytest.mark.parametrize("bits", [4, 8])
def test_padding_value(bits):
    n, k = 16, 70
    q = _random_q(n, k, bits, seed=5)
    bk = 128 if bits == 4 else 64
    kp = -(-k // bk) * bk
    for pad in (None, 0, (1 << bits) - 1):
        packed = cute_gemm.pack_weight(q, bits, pad_value=pad)
        full = cute_gemm.unpack_weight(packed, bits, kp)
        want = (1 << (bits - 1)) if pad is None else pad
        assert torch.equal(full[:, :k], q) and bool((full[:, k:] == want).all())
    per_row = torch.arange(n) % (1 << bits)
    full = cute_gemm.unpack_weight(cute_gemm.pack_weight(q, bits, pad_value=per_row), bits, kp)
    assert torch.equal(full[:, k:], per_row.to(torch.int32).unsqueeze(1).expand(n, kp - k))


def test_extreme_values_round_trip():
    # All ones in every bit: words of -1 (sign bit set), then all zeros.
    for bits in (4, 8):
        q = torch.full((8, 128), (1 << bits) - 1)
        packed = cute_gemm.pack_weight(q, bits)
        assert bool((packed == -1).all())
        assert torch.equal(cute_gemm.unpack_weight(packed, bits, 128), q.int())
        assert bool((cute_gemm.pack_weight(torch.zeros(8, 128, dtype=torch.uint8), bits) == 0)
                    .all())


# --------------------------------------------------------------------------------- the layouts


@pytest.mark.parametrize("bits", [4, 8])
def test_block_layout_is_a_bijection(bits):
    lay = packed_layout(bits)
    bk = 128 if bits == 4 else 64
    assert L.size(lay) == 8 * bk and L.cosize(lay) == 8 * bk
    assert sorted(lay.offsets()) == list(range(8 * bk))
    expected = {4: "(8,(2,4,2,2,4)):(128,(4,32,1,2,8))", 8: "(8,(2,4,2,4)):(64,(2,16,1,4))"}
    assert str(lay) == expected[bits]


@pytest.mark.parametrize("bits,n,k", [(4, 16, 200), (4, 8, 128), (8, 24, 100), (8, 8, 64)])
def test_packed_layout_matches_pack_weight(bits, n, k):
    q = _random_q(n, k, bits, seed=17 + bits)
    packed = cute_gemm.pack_weight(q, bits, pad_value=1)
    bk = 128 if bits == 4 else 64
    kp = -(-k // bk) * bk
    q_full = torch.ones(n, kp, dtype=torch.int64)
    q_full[:, :k] = q
    lay = packed_layout(bits, n, k)
    # offsets() lists L(i) for the 1-D index i = n + N * k (column-major over (N, Kp)).
    idx = torch.tensor(lay.offsets(), dtype=torch.int64).view(kp, n).t()
    assert lay(3, 5) == int(idx[3, 5]) and lay(n - 1, kp - 1) == int(idx[n - 1, kp - 1])
    assert sorted(idx.flatten().tolist()) == list(range(n * kp))
    per_word = 32 // bits
    words = packed.flatten().to(torch.int64)[idx // per_word] & 0xFFFFFFFF
    fields = (words >> (bits * (idx % per_word))) & ((1 << bits) - 1)
    assert torch.equal(fields, q_full)
    # The block layout is the full layout's first block.
    block = packed_layout(bits)
    for nn, kk in [(0, 0), (3, 17), (7, bk - 1), (5, 42)]:
        assert block(nn, kk) == lay(nn, kk)


@pytest.mark.parametrize("bits", [4, 8])
def test_tv_layout_matches_block_layout(bits):
    tv = packed_tv_layout(bits)
    block = packed_layout(bits)
    bk = 128 if bits == 4 else 64
    values = 4 * (32 // bits)  # fields per lane
    assert L.size(tv) == 32 * values
    seen = set()
    for lane in range(32):
        for v in range(values):
            pos = tv(lane, v)  # n + 8 k
            nn, kk = pos % 8, pos // 8
            assert kk < bk
            # The field at (lane, v) in memory order is index lane * values + v of the block.
            assert block(nn, kk) == lane * values + v
            seen.add(pos)
    assert len(seen) == 8 * bk


def test_layout_pictures():
    for bits in (4, 8):
        bk = 128 if bits == 4 else 64
        svg = L.to_svg(packed_layout(bits))
        assert svg.startswith("<?xml") and "</svg>" in svg
        assert "</svg>" in L.to_svg_tv(packed_tv_layout(bits), (8, bk))


# ------------------------------------------------------------------------------- quantization


def _group_scale_per_element(qw):
    n, k = qw.shape
    g = qw.effective_group_size
    return qw.scales.float().t().repeat_interleave(g, dim=1)  # [N, K]


@pytest.mark.parametrize("wdtype", [torch.float16, torch.bfloat16, torch.float32],
                         ids=["fp16", "bf16", "fp32"])
@pytest.mark.parametrize("symmetric", [True, False], ids=["sym", "asym"])
@pytest.mark.parametrize("group", GROUPS)
@pytest.mark.parametrize("bits", [4, 8])
def test_quantize_error_bound(bits, group, symmetric, wdtype):
    n, k = 24, 256
    w = _weight(n, k, wdtype, seed=bits + group, scale=0.05)
    w[3] += 0.2  # an all-positive-ish row
    qw = cute_gemm.quantize(w, bits, group, symmetric)
    act = torch.bfloat16 if wdtype == torch.float32 else wdtype  # DEFAULT_FP32_COMPUTE_DTYPE
    assert qw.dtype == act and qw.scales.dtype == act
    assert qw.bits == bits and qw.group_size == group and qw.shape == (n, k)
    g = k if group == -1 else group
    assert qw.scales.shape == (k // g, n)
    assert (qw.zeros is None) == symmetric
    deq = qw.dequantize()
    assert deq.dtype == act and deq.shape == (n, k)
    s = _group_scale_per_element(qw)
    err = (deq.float() - w.float()).abs()
    # Half a step, plus the final rounding of the dequantized value to the activation dtype.
    bound = s / 2 * (1 + 1e-6) + deq.float().abs() * torch.finfo(act).eps / 2
    assert bool((err <= bound).all()), f"max excess {(err - bound).max().item():.3e}"

    q = cute_gemm.unpack_weight(qw.packed, bits, k)
    assert int(q.min()) >= 0 and int(q.max()) < (1 << bits)
    wg = w.float().reshape(n, k // g, g)
    if symmetric:
        # The documented rule: s = max|w| / (2^(bits-1) - 1), rounded up to the activation dtype.
        exact = (wg.abs().amax(-1) / ((1 << (bits - 1)) - 1)).t()
        assert int(q.min()) >= 1  # round(w/s) in [-(2^(b-1)-1), 2^(b-1)-1], shifted by 2^(b-1)
    else:
        z = qw.zeros.float()
        assert bool((z == z.round()).all()) and float(z.min()) >= 0
        assert float(z.max()) <= (1 << bits) - 1
        lo = wg.amin(-1).clamp(max=0)
        hi = wg.amax(-1).clamp(min=0)
        # s = (hi - lo) / (2^bits - 1), rounded up to the activation dtype.
        exact = ((hi - lo) / ((1 << bits) - 1)).t()
    s_stored = qw.scales.float()
    assert bool((s_stored >= exact).all())
    below = torch.nextafter(s_stored.to(act), torch.tensor(0.0, dtype=act)).float()
    assert bool(((below < exact) | (s_stored == 0)).all())


@pytest.mark.parametrize("symmetric", [True, False], ids=["sym", "asym"])
@pytest.mark.parametrize("bits", [4, 8])
def test_quantize_zero_and_constant_rows(bits, symmetric):
    n, k = 16, 128
    w = torch.zeros(n, k, dtype=torch.float16)
    w[1] = 0.5
    w[2] = -3.0
    w[3, :64] = 1e-3
    w[4, 5] = 2.0  # one nonzero in an otherwise zero row
    qw = cute_gemm.quantize(w, bits, 64, symmetric)
    deq = qw.dequantize()
    assert not bool(deq.isnan().any()) and not bool(qw.scales.isnan().any())
    assert bool((deq[0] == 0).all()) and bool((deq[5:] == 0).all())
    assert bool((deq[3, 64:] == 0).all()) and bool((deq[4, 6:] == 0).all())
    s = _group_scale_per_element(qw)
    err = (deq.float() - w.float()).abs()
    assert bool((err <= s / 2 + deq.float().abs() * 2 ** -11 + 1e-7).all())


@pytest.mark.parametrize("dtype", DTYPES, ids=["fp16", "bf16"])
@pytest.mark.parametrize("symmetric", [True, False], ids=["sym", "asym"])
@pytest.mark.parametrize("group", GROUPS)
@pytest.mark.parametrize("bits", [4, 8])
def test_exactly_representable_weights_round_trip(bits, group, symmetric, dtype):
    # w = (q - z) * s with s a power of two and each group reaching the ends of the grid, so the
    # rules recover exactly s and z, and dequantize(quantize(w)) == w.
    n, k = 16, 256
    g = k if group == -1 else group
    groups = k // g
    gen = _gen(bits * 1000 + g)
    qmax = (1 << bits) - 1
    s = 2.0 ** torch.randint(-12, -2, (n, groups), generator=gen).float()
    if symmetric:
        z = torch.full((n, groups), float(1 << (bits - 1)))
        q = torch.randint(1, qmax + 1, (n, groups, g), generator=gen).float()
        q[..., 0] = 1.0  # |q - z| reaches 2^(bits-1) - 1: max|w| = (2^(bits-1) - 1) s
    else:
        z = torch.randint(0, qmax + 1, (n, groups), generator=gen).float()
        q = torch.randint(0, qmax + 1, (n, groups, g), generator=gen).float()
        q[..., 0], q[..., 1] = 0.0, float(qmax)  # the range of the group is exactly qmax * s
    w = ((q - z.unsqueeze(-1)) * s.unsqueeze(-1)).reshape(n, k).to(dtype)
    assert torch.equal(w.float().reshape(n, groups, g), (q - z.unsqueeze(-1)) * s.unsqueeze(-1))
    qw = cute_gemm.quantize(w, bits, group, symmetric)
    assert torch.equal(qw.scales, s.t().to(dtype))
    if not symmetric:
        assert torch.equal(qw.zeros, z.t().to(dtype))
    assert torch.equal(cute_gemm.unpack_weight(qw.packed, bits, k), q.reshape(n, k).int())
    assert torch.equal(qw.dequantize(), w)
    assert torch.equal(cute_gemm.dequantize(qw), w)


@pytest.mark.parametrize("bits,symmetric", [(4, True), (4, False), (8, True), (8, False)])
@pytest.mark.parametrize("dtype", DTYPES)
def test_dequantize_exact_in_fp32_and_rounded_once(bits, symmetric, dtype):
    # dtype=torch.float32 is the exact (q - z) * s (what the fused CUDA kernel computes with);
    # the default rounds that once to the activation dtype.
    n, k, g = 16, 256, 64
    qw = cute_gemm.quantize(_weight(n, k, dtype, seed=5), bits, g, symmetric)
    q = cute_gemm.unpack_weight(qw.packed, bits, k).double().reshape(n, k // g, g)
    z = (float(1 << (bits - 1)) if symmetric
         else qw.zeros.double().t().unsqueeze(-1))
    exact = ((q - z) * qw.scales.double().t().unsqueeze(-1)).reshape(n, k)
    w32 = qw.dequantize(torch.float32)
    assert w32.dtype == torch.float32 and torch.equal(w32.double(), exact)
    assert torch.equal(qw.dequantize(), exact.to(dtype))
    assert torch.equal(cute_gemm.dequantize(qw, torch.float64), exact)
    with pytest.raises(ValueError, match=r"dtype must be .*got torch.int32"):
        qw.dequantize(torch.int32)


def test_quantize_dtype_override_and_fp32_default():
    w = _weight(8, 64, torch.float32, seed=3)
    # fp32 weights default to bf16 scales (DEFAULT_FP32_COMPUTE_DTYPE: fp32's range).
    assert cute_gemm.quantize(w, group_size=32).dtype == torch.bfloat16
    qw = cute_gemm.quantize(w, group_size=32, dtype=torch.float16)
    assert qw.dtype == torch.float16 and qw.dequantize().dtype == torch.float16
    assert cute_gemm.quantize(w.half(), group_size=32).dtype == torch.float16


def test_quantize_pads_with_the_last_zero_point():
    # K = 160 pads to 256 for INT4: the padding holds each row's last zero point (asymmetric) or
    # the symmetric zero, so it dequantizes to 0 with the last group's scale.
    w = _weight(8, 160, seed=4) + 0.3
    for symmetric in (True, False):
        qw = cute_gemm.quantize(w, 4, 32, symmetric)
        full = cute_gemm.unpack_weight(qw.packed, 4, 256)
        want = torch.full((8,), 8) if symmetric else qw.zeros[-1].int()
        assert bool((full[:, 160:] == want.int().unsqueeze(1)).all())


# ------------------------------------------------------------------------- QuantizedWeight


def test_quantized_weight_attributes():
    qw = cute_gemm.quantize(_weight(16, 256, torch.bfloat16, seed=6), 4, 64, symmetric=False)
    assert isinstance(qw, cute_gemm.QuantizedWeight)
    assert qw.shape == (16, 256) and qw.dtype == torch.bfloat16 and qw.device.type == "cpu"
    assert not qw.symmetric and qw.effective_group_size == 64
    assert qw.nbytes == 16 * 256 // 2 + 2 * (4 * 16 * 2)
    r = repr(qw)
    assert "shape=(16, 256)" in r and "bits=4" in r and "group_size=64" in r
    assert "symmetric=False" in r and "torch.bfloat16" in r
    assert "per-channel" in repr(cute_gemm.quantize(_weight(8, 64), 8, -1))
    with pytest.raises(dataclasses.FrozenInstanceError):
        qw.bits = 8


def test_quantized_weight_to():
    qw = cute_gemm.quantize(_weight(8, 128, seed=7), 4, 128, symmetric=False)
    assert qw.to("cpu") is qw and qw.to(torch.device("cpu")) is qw and qw.cpu() is qw
    meta = qw.to("meta")
    assert meta is not qw and meta.device.type == "meta"
    assert meta.packed.device.type == meta.scales.device.type == meta.zeros.device.type == "meta"
    assert meta.shape == qw.shape and meta.bits == qw.bits and meta.dtype == qw.dtype
    assert meta.packed.shape == qw.packed.shape


def _valid_parts(n=16, k=256, bits=4, group=64):
    qw = cute_gemm.quantize(_weight(n, k, seed=8), bits, group, symmetric=False)
    return dict(packed=qw.packed, scales=qw.scales, zeros=qw.zeros, bits=bits, group_size=group,
                shape=(n, k))


QW_BAD = {
    "bits": (dict(bits=3), r"bits must be 4 or 8; got bits=3"),
    "group": (dict(group_size=48), r"group_size must be one of 32, 64, 128 or -1"),
    "shape_rank": (dict(shape=(16,)), r"shape must be \(N, K\)"),
    "n": (dict(shape=(12, 256)), r"N .* must be a multiple of 8; got N=12"),
    "k_group": (dict(shape=(16, 96)), r"K must be a multiple of group_size; got K=96, "
                                      r"group_size=64"),
    "packed_dtype": (dict(packed=torch.zeros(2, 2, 32, 4, dtype=torch.int64)),
                     r"packed must have dtype torch\.int32; got torch\.int64"),
    "packed_shape": (dict(packed=torch.zeros(2, 1, 32, 4, dtype=torch.int32)),
                     r"packed must have shape \[2, 2, 32, 4\] .*got \[2, 1, 32, 4\]"),
    "scales_dtype": (dict(scales=torch.ones(4, 16)),
                     r"scales must have dtype torch\.float16 or torch\.bfloat16; got "
                     r"torch\.float32"),
    "scales_shape": (dict(scales=torch.ones(16, 4, dtype=torch.float16)),
                     r"scales must have shape \[K/G, N\] = \[4, 16\] \(G=64\); got \[16, 4\]"),
    "zeros_dtype": (dict(zeros=torch.ones(4, 16, dtype=torch.bfloat16)),
                    r"zeros must match scales"),
    "devices": (dict(zeros=torch.ones(4, 16, dtype=torch.float16, device="meta")),
                r"packed, scales and zeros must be on one device; got \['cpu', 'meta'\]"),
}


@pytest.mark.parametrize("case", list(QW_BAD))
def test_quantized_weight_validation(case):
    change, match = QW_BAD[case]
    parts = {**_valid_parts(), **change}
    with pytest.raises(ValueError, match=r"QuantizedWeight: " + match):
        cute_gemm.QuantizedWeight(**parts)


# ----------------------------------------------------------------------------- bad arguments

QUANTIZE_BAD = {
    "bits_3": (lambda: (_weight(16, 128), dict(bits=3)), r"bits must be 4 or 8; got bits=3"),
    "group_48": (lambda: (_weight(16, 192), dict(group_size=48)),
                 r"group_size must be one of 32, 64, 128 or -1 \(per-channel\); got "
                 r"group_size=48"),
    "n_12": (lambda: (_weight(12, 128), {}),
             r"N \(the number of output channels, weight\.shape\[0\]\) must be a multiple of 8; "
             r"got N=12"),
    "k_not_multiple_of_group": (lambda: (_weight(16, 160), dict(group_size=128)),
                                r"K must be a multiple of group_size; got K=160, "
                                r"group_size=128 \(K % group_size = 32\)"),
    "k_per_channel": (lambda: (_weight(16, 40), dict(group_size=-1)),
                      r"K must be a multiple of 32 for per-channel quantization "
                      r"\(group_size=-1\); got K=40"),
    "k_zero": (lambda: (_weight(16, 0), dict(group_size=-1)), r"K must be >= 1; got K=0"),
    "nan": (lambda: (_weight(16, 128).index_fill_(1, torch.tensor([5]), float("nan")), {}),
            r"weight must be finite; got 16 NaN/inf value\(s\)"),
    "inf": (lambda: (_weight(16, 128).index_fill_(0, torch.tensor([2]), float("inf")), {}),
            r"weight must be finite; got 128 NaN/inf value\(s\)"),
    "int_dtype": (lambda: (torch.ones(16, 128, dtype=torch.int32), {}),
                  r"weight must have dtype torch\.float16, torch\.bfloat16 or torch\.float32; "
                  r"got torch\.int32"),
    "float64": (lambda: (torch.ones(16, 128, dtype=torch.float64), {}),
                r"weight must have dtype .*got torch\.float64"),
    "one_d": (lambda: (torch.ones(128, dtype=torch.float16), {}),
              r"weight must be a 2-D tensor \[N, K\]; got shape \[128\]"),
    "scales_dtype": (lambda: (_weight(16, 128), dict(dtype=torch.float32)),
                     r"dtype must be torch\.float16 or torch\.bfloat16; got torch\.float32"),
    "scale_overflow": (lambda: (torch.full((8, 128), 1e6), dict(dtype=torch.float16)),
                       r"the weight's range overflows the scales' dtype torch\.float16 in row 0 "
                       r"\(max \|w\| in that row = 1e\+06\); quantize with dtype=torch\.bfloat16"),
    # bf16 scales overflow only where hi - lo overflows fp32 itself: the advice is not "bf16".
    "scale_overflow_bf16": (
        lambda: (torch.cat([torch.zeros(8, 128), torch.tensor([[3e38, -3e38] * 64] * 8)]),
                 dict(dtype=torch.bfloat16, symmetric=False)),
        r"the weight's range overflows the scales' dtype torch\.bfloat16 in row 8 "
        r".*rescale the weight \(its range exceeds fp32's"),
}


@pytest.mark.parametrize("case", list(QUANTIZE_BAD))
def test_quantize_bad_args(case):
    make, match = QUANTIZE_BAD[case]
    w, kwargs = make()
    with pytest.raises(ValueError, match=r"quantize: " + match):
        cute_gemm.quantize(w, **kwargs)


def test_quantize_not_a_tensor():
    with pytest.raises(TypeError, match=r"quantize: weight must be a torch\.Tensor; got list"):
        cute_gemm.quantize([[1.0] * 32] * 8)


PACK_BAD = {
    "too_large": (lambda: (torch.full((8, 16), 16), 4), r"q must hold values in \[0, 15\] for "
                                                        r"bits=4; got values in \[16, 16\]"),
    "negative": (lambda: (torch.full((8, 16), -1), 8), r"q must hold values in \[0, 255\] for "
                                                       r"bits=8; got values in \[-1, -1\]"),
    "n_12": (lambda: (torch.zeros(12, 16, dtype=torch.int32), 4),
             r"N .* must be a multiple of 8; got N=12"),
    "float": (lambda: (torch.zeros(8, 16), 4), r"q must have an integer dtype .*got "
                                               r"torch\.float32"),
    "bits": (lambda: (torch.zeros(8, 16, dtype=torch.int32), 2), r"bits must be 4 or 8"),
    "one_d": (lambda: (torch.zeros(16, dtype=torch.int32), 4), r"q must be a 2-D tensor"),
    "k_zero": (lambda: (torch.zeros(8, 0, dtype=torch.int32), 4), r"K must be >= 1"),
}


@pytest.mark.parametrize("case", list(PACK_BAD))
def test_pack_bad_args(case):
    make, match = PACK_BAD[case]
    q, bits = make()
    with pytest.raises(ValueError, match=r"pack_weight: " + match):
        cute_gemm.pack_weight(q, bits)


def test_pack_bad_pad_value():
    q = torch.zeros(8, 16, dtype=torch.int32)
    with pytest.raises(ValueError, match=r"pad_value must lie in \[0, 15\] for bits=4"):
        cute_gemm.pack_weight(q, 4, pad_value=16)
    with pytest.raises(ValueError, match=r"pad_value must be an int or a \[N\] integer tensor"):
        cute_gemm.pack_weight(q, 4, pad_value=torch.zeros(4, dtype=torch.int32))
    with pytest.raises(ValueError, match=r"pad_value must be an int or a \[N\] integer tensor"):
        cute_gemm.pack_weight(q, 4, pad_value=torch.full((8,), 7.5))  # was truncated to 7
    with pytest.raises(TypeError, match=r"pad_value must be None, an int or"):
        cute_gemm.pack_weight(q, 4, pad_value=7.5)  # was truncated to 7


def test_unpack_bad_args():
    packed = cute_gemm.pack_weight(torch.zeros(8, 200, dtype=torch.int32), 4)
    with pytest.raises(ValueError, match=re.escape(
            "unpack_weight: packed must have shape [N/8, ceil(K/128), 32, 4] for bits=4 and "
            "K=300 (= [N/8, 3, 32, 4]); got [1, 2, 32, 4]")):
        cute_gemm.unpack_weight(packed, 4, 300)
    with pytest.raises(ValueError, match=r"unpack_weight: packed must have dtype torch\.int32"):
        cute_gemm.unpack_weight(packed.long(), 4, 200)
    with pytest.raises(ValueError, match=r"bits must be 4 or 8"):
        cute_gemm.unpack_weight(packed, 5, 200)


@pytest.mark.parametrize("bits,group_size,symmetric", [(4, 32, True), (4, 128, False),
                                                       (8, -1, False)])
def test_quantize_in_row_blocks_equals_whole(monkeypatch, bits, group_size, symmetric):
    # quantize works through blocks of rows (bounded temporaries); the result must not depend on
    # the block size: whole-weight quantization as the reference, and a block size that leaves a
    # ragged last block.
    from cute_gemm import quant

    torch.manual_seed(3)
    w = torch.randn(200, 256, dtype=torch.float16)
    w[37] *= 0  # an all-zero row inside a later block
    whole = cute_gemm.quantize(w, bits, group_size, symmetric)
    monkeypatch.setattr(quant, "_QUANTIZE_CHUNK", 24 * 256)  # 24 rows a block: 9 blocks
    blocks = cute_gemm.quantize(w, bits, group_size, symmetric)
    assert torch.equal(blocks.packed, whole.packed)
    assert torch.equal(blocks.scales, whole.scales)
    assert (blocks.zeros is None) == symmetric
    if not symmetric:
        assert torch.equal(blocks.zeros, whole.zeros)
    assert blocks.scales.is_contiguous() and blocks.packed.is_contiguous()


def test_quantize_overflow_names_the_row_across_blocks(monkeypatch):
    from cute_gemm import quant

    w = torch.randn(64, 128, dtype=torch.float32)
    w[45, 3] = 1e30  # beyond fp16 scales' range
    monkeypatch.setattr(quant, "_QUANTIZE_CHUNK", 16 * 128)
    with pytest.raises(ValueError, match=r"in row 45 \(max \|w\| in that row = 1e\+30\)"):
        cute_gemm.quantize(w, 4, 128, dtype=torch.float16)
