"""The L2 prefetch hint on the CPU: mixed_gemm's prefetch argument (checked, never changing the
result), QuantLinear.set_prefetch, and cute_gemm.prefetch.chain's recorded call order, caps,
reports, copies and torch.compile. The kernels' side runs in tests/test_mixed_gemm_gpu.py."""

import copy
import pickle

import pytest
import torch

import cute_gemm
from cute_gemm.prefetch import PrefetchLink

MIXED = torch.ops.cute_gemm.mixed_gemm.default


def _layer(k, n, bits=4, seed=0):
    torch.manual_seed(seed)
    return cute_gemm.QuantLinear.from_linear(torch.nn.Linear(k, n), bits=bits,
                                             group_size=128 if bits == 4 else -1)


class Net(torch.nn.Module):
    """Registered in one order, called in another; `unused` is never called."""

    def __init__(self):
        super().__init__()
        self.first_registered = _layer(256, 128, seed=1)
        self.unused = _layer(128, 64, seed=2)
        self.called_first = _layer(128, 256, bits=8, seed=3)
        self.head = torch.nn.Linear(256, 32)

    def forward(self, x):
        h = self.called_first(x)
        h = self.first_registered(torch.relu(h))
        h = self.called_first(h)  # called twice: its first call fixes its place
        return self.head(h)


def _bytes(layer):
    return layer.qweight.numel() * layer.qweight.element_size()


def test_op_ignores_prefetch_on_cpu():
    torch.manual_seed(0)
    qw = cute_gemm.quantize(torch.randn(64, 256), bits=4, group_size=128, dtype=torch.float16)
    a = torch.randn(3, 256, dtype=torch.float16)
    other = torch.arange(1001, dtype=torch.int32)
    plain = cute_gemm.mixed_gemm(a, qw)
    assert torch.equal(cute_gemm.mixed_gemm(a, qw, prefetch=other), plain)
    assert torch.equal(cute_gemm.mixed_gemm(a, qw, prefetch=other[5:17]), plain)
    ref = a.float() @ qw.dequantize(torch.float32).t()
    assert torch.allclose(plain.float(), ref, rtol=1e-2, atol=5e-2)
    assert torch.equal(other, torch.arange(1001, dtype=torch.int32))


def test_prefetch_refusals():
    torch.manual_seed(0)
    qw = cute_gemm.quantize(torch.randn(64, 256), bits=4, group_size=128, dtype=torch.float16)
    a = torch.randn(3, 256, dtype=torch.float16)
    with pytest.raises(TypeError, match=r"prefetch must be None or a torch.Tensor .*; got list"):
        cute_gemm.mixed_gemm(a, qw, prefetch=[1, 2])
    with pytest.raises(RuntimeError, match="prefetch must be contiguous"):
        cute_gemm.mixed_gemm(a, qw, prefetch=torch.zeros(8, 8).t())
    # The op itself (the C++ check), below the Python wrapper.
    with pytest.raises(RuntimeError, match="prefetch must be contiguous"):
        MIXED(a, qw.packed, qw.scales, None, 4, 128, 256, None, None, None,
              torch.zeros(8, 8).t())
    meta = torch.zeros(8, device="meta")
    with pytest.raises(RuntimeError, match="prefetch must be on the same device"):
        MIXED(a, qw.packed, qw.scales, None, 4, 128, 256, None, None, None, meta)


def test_schema_fake_and_opcheck():
    schema = MIXED._schema
    arg = schema.arguments[-1]
    assert arg.name == "prefetch" and str(arg.type) == "Optional[Tensor]"
    assert not any(a.alias_info is not None and a.alias_info.is_write for a in schema.arguments)
    torch.manual_seed(0)
    qw = cute_gemm.quantize(torch.randn(64, 256), bits=8, group_size=-1, dtype=torch.bfloat16)
    a = torch.randn(2, 256, dtype=torch.bfloat16)
    other = torch.arange(77, dtype=torch.int32)
    args = (a, qw.packed, qw.scales, None, 8, -1, 256, None, None, None, other)
    torch.library.opcheck(MIXED, args)
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode() as mode:
        fake = [mode.from_tensor(t) if isinstance(t, torch.Tensor) else t for t in args]
        assert MIXED(*fake).shape == (2, 64)
        bad = list(fake)
        bad[-1] = mode.from_tensor(torch.zeros(4, 4)).t()
        with pytest.raises(RuntimeError, match="prefetch must be contiguous"):
            MIXED(*bad)


def test_gradients_with_prefetch():
    torch.manual_seed(0)
    qw = cute_gemm.quantize(torch.randn(64, 256), bits=4, group_size=128, dtype=torch.float16)
    a = torch.randn(3, 256, dtype=torch.float16, requires_grad=True)
    cute_gemm.mixed_gemm(a, qw, prefetch=torch.zeros(64, dtype=torch.int32)).float().sum() \
        .backward()
    expected = torch.ones(3, 64) @ qw.dequantize(torch.float32)
    assert torch.allclose(a.grad.float(), expected, rtol=1e-2, atol=1e-2)


def test_set_prefetch():
    a, b = _layer(256, 128), _layer(128, 64, bits=8)
    assert a.prefetch is None and a._prefetch_tensor() is None
    a.set_prefetch(b)
    assert a.prefetch == (b, _bytes(b))
    assert a._prefetch_tensor().numel() * 4 == _bytes(b)
    a.set_prefetch(b, 1000)  # rounded down to 16 bytes
    assert a.prefetch == (b, 992)
    assert a._prefetch_tensor().data_ptr() == b.qweight.data_ptr()
    assert a._prefetch_tensor().numel() == 248
    a.set_prefetch(b, 10 ** 12)  # capped at the weight
    assert a.prefetch[1] == _bytes(b)
    a.set_prefetch(b, 15)  # nothing left: no link
    assert a.prefetch is None
    a.set_prefetch(b)
    a.set_prefetch(None)
    assert a.prefetch is None
    with pytest.raises(TypeError, match="layer must be a QuantLinear or None; got Linear"):
        a.set_prefetch(torch.nn.Linear(2, 2))
    with pytest.raises(TypeError, match="nbytes must be an int or None; got float"):
        a.set_prefetch(b, 1.5)
    with pytest.raises(TypeError, match="nbytes must be an int or None; got bool"):
        a.set_prefetch(b, True)
    with pytest.raises(ValueError, match="nbytes must be >= 0; got -1"):
        a.set_prefetch(b, -1)


def test_link_is_not_state_and_not_copied():
    a, b = _layer(256, 128), _layer(128, 64)
    keys = set(a.state_dict())
    a.set_prefetch(b)
    assert set(a.state_dict()) == keys
    assert list(a.children()) == []
    for clone in (copy.deepcopy(a), pickle.loads(pickle.dumps(a))):
        assert clone.prefetch is None  # the copy does not drag b along
        assert torch.equal(clone.qweight, a.qweight)
    assert a.prefetch == (b, _bytes(b))  # the original keeps its link


def test_chain_records_the_call_order():
    net = Net()
    x = torch.randn(2, 128)
    expected = net(x)
    chain = cute_gemm.prefetch.chain(net, x, max_bytes=4096)
    assert chain.links == [PrefetchLink("called_first", "first_registered", 4096)]
    assert chain.not_linked == {"unused": "not called by the forward",
                                "first_registered": "called last (nothing follows it)"}
    assert net.called_first.prefetch == (net.first_registered, 4096)
    assert cute_gemm.prefetch.links(net) == chain.links
    assert "called_first -> first_registered" in str(chain)
    # The forward is unchanged, and the recording hooks are gone.
    assert torch.equal(net(x), expected)
    assert not net.called_first._forward_pre_hooks
    # A cap above the weight links all of it; chaining again replaces the links.
    chain = cute_gemm.prefetch.chain(net, x)
    assert chain.links[0].nbytes == _bytes(net.first_registered)
    assert cute_gemm.prefetch.chain(net, x, max_bytes=0).links == []
    assert net.called_first.prefetch is None
    cute_gemm.prefetch.chain(net, x)
    assert cute_gemm.prefetch.unchain(net) == 1
    assert cute_gemm.prefetch.links(net) == []


def test_chain_refusals_and_failed_forward():
    net = Net()
    x = torch.randn(2, 128)
    with pytest.raises(ValueError, match="max_bytes must be an int >= 0; got -1"):
        cute_gemm.prefetch.chain(net, x, max_bytes=-1)
    with pytest.raises(ValueError, match="no QuantLinear layers"):
        cute_gemm.prefetch.chain(torch.nn.Linear(4, 4), torch.randn(1, 4))
    with pytest.raises(TypeError, match="model must be a torch.nn.Module; got function"):
        cute_gemm.prefetch.chain(lambda x: x, x)
    cute_gemm.prefetch.chain(net, x)
    before = cute_gemm.prefetch.links(net)
    with pytest.raises(ValueError, match="input must have shape"):
        cute_gemm.prefetch.chain(net, torch.randn(2, 7))  # the forward fails
    assert cute_gemm.prefetch.links(net) == before  # left as it was
    assert not net.called_first._forward_pre_hooks and not net.first_registered._forward_pre_hooks


def test_chained_model_compiles_without_breaks():
    net = Net()
    x = torch.randn(2, 128)
    expected = net(x)
    cute_gemm.prefetch.chain(net, x)
    torch._dynamo.reset()
    compiled = torch.compile(net, fullgraph=True, backend="aot_eager")
    assert torch.equal(compiled(x), expected)
