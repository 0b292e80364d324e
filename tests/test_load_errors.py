"""Loading is correct or refused, never silently wrong (issue 17):

1. load_quantized with strict=False names missing/unexpected keys in one UserWarning, and refuses
   (strict or not) a file that lacks what a layer it creates needs (qweight, scales, zeros, ...).
2. Missing, truncated, corrupted and foreign safetensors files, files of an unknown cute_gemm
   format version or made for another model, and bad JSON configs raise errors naming the file
   (load_quantized, load_state_dict_files, load_gptq_model, load_awq_model).
3. Loading into a meta-device model leaves every QuantLinear buffer 16-byte aligned, whatever the
   file's header length.
4. A failing load_quantized leaves the model exactly as it was.

Small random nn.Sequential models on the CPU; files in tmp_path.
"""

import json
import re
import struct
import warnings

import pytest
import torch
from torch import nn

import cute_gemm
from cute_gemm import QuantLinear
from cute_gemm.checkpoints import load_awq_model, load_gptq_model, load_state_dict_files

pytest.importorskip("safetensors")

X = torch.randn(3, 128, generator=torch.Generator().manual_seed(7)).half()


def _model(seed=0, head=128, hidden=256, dtype=torch.float16, device=None):
    """Linear(128, hidden) -> LayerNorm -> Linear(hidden, 128, no bias) -> Linear(128, head);
    the last one stays dense when quantized (skip "3")."""
    torch.manual_seed(seed)
    with torch.device(device or "cpu"):
        model = nn.Sequential(nn.Linear(128, hidden), nn.LayerNorm(hidden),
                              nn.Linear(hidden, 128, bias=False), nn.Linear(128, head))
    if device != "meta":
        with torch.no_grad():
            for p in model.parameters():
                p.normal_(0, 0.2)
    return model.to(dtype).eval()


def _quantized(seed=0, symmetric=True, bits=4, **kwargs):
    model = _model(seed, **kwargs)
    cute_gemm.quantize_model(model, bits=bits, group_size=64, symmetric=symmetric, skip=("3",),
                             progress=False)
    return model


def _saved(tmp_path, name="model.safetensors", pad=None, **kwargs):
    path = tmp_path / name
    model = _quantized(**kwargs)
    cute_gemm.save_quantized(model, path, metadata=None if pad is None else {"pad": "x" * pad})
    return model, path


def _split(path):
    """(header dict, data bytes) of a safetensors file."""
    data = path.read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    return json.loads(data[8:8 + n]), data[8 + n:]


def _join(path, header, body):
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + body)


def _resave(src, dst, drop=(), add=None, metadata=None):
    """Rewrites the safetensors file ``src`` to ``dst`` without the keys ``drop``, with the
    tensors ``add`` and the metadata entries ``metadata`` (None values delete)."""
    from safetensors import safe_open
    from safetensors.torch import save_file

    with safe_open(str(src), framework="pt") as f:
        meta = dict(f.metadata() or {})
        tensors = {k: f.get_tensor(k).clone() for k in f.keys() if k not in drop}
    tensors.update(add or {})
    for key, value in (metadata or {}).items():
        if value is None:
            meta.pop(key, None)
        else:
            meta[key] = value
    save_file(tensors, str(dst), metadata=meta)
    return dst


def _snapshot(model):
    return ({name: m for name, m in model.named_modules()},
            {k: v.clone() for k, v in model.state_dict().items()},
            {name: p for name, p in model.named_parameters()})


def _assert_unchanged(model, snapshot):
    modules, state, params = snapshot
    assert {name: m for name, m in model.named_modules()} == modules
    assert all(model.get_submodule(name) is m for name, m in modules.items())
    now = model.state_dict()
    assert now.keys() == state.keys()
    for key, value in state.items():
        assert now[key].dtype == value.dtype and torch.equal(now[key], value), key
    assert all(dict(model.named_parameters())[n] is p for n, p in params.items())


def _named(path):
    """A pattern for the file's name as error messages quote it."""
    return re.escape(repr(str(path)))


# ------------------------------------------------------------------ 1. what strict=False hides


def test_strict_false_warns_with_missing_and_unexpected_keys(tmp_path):
    source, path = _saved(tmp_path)
    edited = _resave(path, tmp_path / "edited.safetensors", drop=("1.bias",),
                     add={"extra.weight": torch.ones(4)})
    model = _model(seed=1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert cute_gemm.load_quantized(model, edited, strict=False) is model
    messages = [str(w.message) for w in caught if issubclass(w.category, UserWarning)]
    assert len(messages) == 1, messages
    assert "'1.bias'" in messages[0] and "'extra.weight'" in messages[0]
    assert "missing" in messages[0] and "unexpected" in messages[0]
    assert str(edited) in messages[0]
    assert isinstance(model[0], QuantLinear)
    assert torch.equal(model[0](X), source[0](X))
    # The full file loads with no warning.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cute_gemm.load_quantized(_model(seed=2), path, strict=False)


def test_strict_true_names_missing_and_unexpected_keys(tmp_path):
    _, path = _saved(tmp_path)
    edited = _resave(path, tmp_path / "edited.safetensors", drop=("1.bias",),
                     add={"extra.weight": torch.ones(4)})
    model = _model(seed=1)
    with pytest.raises(ValueError, match=_named(edited) + r".*missing keys \['1.bias'\], "
                                         r"unexpected keys \['extra.weight'\]"):
        cute_gemm.load_quantized(model, edited)


@pytest.mark.parametrize("symmetric,dropped", [(True, "0.qweight"), (True, "2.scales"),
                                               (False, "2.zeros"), (True, "0.bias"),
                                               (False, "0.qweight")])
@pytest.mark.parametrize("meta", [False, True], ids=["cpu", "meta"])
def test_refuses_layers_it_would_leave_empty(tmp_path, symmetric, dropped, meta):
    _, path = _saved(tmp_path, symmetric=symmetric)
    edited = _resave(path, tmp_path / "edited.safetensors", drop=(dropped,))
    model = _model(seed=1, device="meta" if meta else None)
    modules = dict(model.named_modules())
    layer = dropped.split(".")[0]
    with pytest.raises(ValueError, match=rf"{_named(edited)} quantizes layer '{layer}' but lacks "
                                         rf"\['{re.escape(dropped)}'\].*zero-filled"):
        cute_gemm.load_quantized(model, edited, strict=False)
    assert dict(model.named_modules()) == modules  # nothing was changed
    assert all(type(model[i]) is nn.Linear for i in (0, 2, 3))


def test_old_files_without_format_tags_load(tmp_path):
    """Files written before QuantLinear's qformat tag existed: the tags come from the metadata
    (with in_features=64 the packed INT4 and INT8 shapes coincide, so QuantLinear alone could
    not tell)."""
    model = nn.Sequential(nn.Linear(64, 128)).half()
    with torch.no_grad():
        model[0].weight.normal_(0, 0.2)
    cute_gemm.quantize_model(model, bits=8, group_size=32, progress=False)
    path = tmp_path / "new.safetensors"
    cute_gemm.save_quantized(model, path)
    old = _resave(path, tmp_path / "old.safetensors", drop=("0.qformat",))
    for device in (None, "meta"):
        with torch.device(device or "cpu"):
            fresh = nn.Sequential(nn.Linear(64, 128)).half()
        cute_gemm.load_quantized(fresh, old)
        assert fresh[0].bits == 8 and torch.equal(fresh[0].qformat, model[0].qformat)
        assert torch.equal(fresh(X[:, :64]), model(X[:, :64]))


# ----------------------------------------------------------------- 2. damaged and foreign files


def test_missing_file(tmp_path):
    path = tmp_path / "nothing.safetensors"
    with pytest.raises(FileNotFoundError, match=_named(path) + " does not exist"):
        cute_gemm.load_quantized(_model(), path)
    with pytest.raises(ValueError, match=_named(path) + " does not exist"):
        cute_gemm.load_quantized(_model(), path)


def test_truncated_files(tmp_path):
    source, path = _saved(tmp_path)
    data = path.read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    for cut in (0, 3, 7, 8, 9, 8 + n // 2, 8 + n - 1, 8 + n, 8 + n + 5, len(data) // 2,
                len(data) - 1):
        cut_path = tmp_path / f"cut{cut}.safetensors"
        cut_path.write_bytes(data[:cut])
        model = _model(seed=1)
        snapshot = _snapshot(model)
        with pytest.raises(ValueError, match=_named(cut_path) + " is truncated"):
            cute_gemm.load_quantized(model, cut_path)
        _assert_unchanged(model, snapshot)
    # A longer file is refused too (data after the last tensor).
    long_path = tmp_path / "long.safetensors"
    long_path.write_bytes(data + b"\0" * 16)
    with pytest.raises(ValueError, match=_named(long_path) + r" is corrupted: .*extra bytes"):
        cute_gemm.load_quantized(_model(seed=1), long_path)


def test_corrupted_headers(tmp_path):
    _, path = _saved(tmp_path)
    data = path.read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    # Bytes of the JSON header replaced by a byte that is never valid UTF-8.
    for position in (8, 9, 8 + n // 3, 8 + n // 2, 8 + n - 1):
        bad = tmp_path / f"flip{position}.safetensors"
        bad.write_bytes(data[:position] + b"\xff" + data[position + 1:])
        with pytest.raises(ValueError, match=_named(bad) + " has a corrupted header"):
            cute_gemm.load_quantized(_model(seed=1), bad)
    # A header length larger than the file.
    for length in (len(data), 2**40, 2**64 - 1):
        bad = tmp_path / f"length{length}.safetensors"
        bad.write_bytes(struct.pack("<Q", length) + data[8:])
        with pytest.raises(ValueError, match=_named(bad) + r" is truncated or its header is "
                                             r"corrupted: the header length field says"):
            cute_gemm.load_quantized(_model(seed=1), bad)
    # A header that is valid JSON but not a safetensors header.
    for text, what in ((b"[1, 2]  ", "must be an object"),
                       (b'{"a": 1}', "must have exactly 'dtype', 'shape' and 'data_offsets'")):
        bad = tmp_path / "notst.safetensors"
        bad.write_bytes(struct.pack("<Q", len(text)) + text)
        with pytest.raises(ValueError, match=_named(bad) + " has a corrupted header.*" + what):
            cute_gemm.load_quantized(_model(seed=1), bad)


def test_bad_offsets(tmp_path):
    _, path = _saved(tmp_path)
    header, body = _split(path)
    last = max((k for k in header if k != "__metadata__"),
               key=lambda k: header[k]["data_offsets"][1])
    first = min((k for k in header if k != "__metadata__"),
                key=lambda k: header[k]["data_offsets"][0])
    cases = {
        "past_end": (last, lambda b, e: [b + 64, e + 64],
                     rf"is truncated or its header is corrupted: tensor '{last}' ends at byte"),
        "wrong_size": (last, lambda b, e: [b, e + 2],
                       rf"has a corrupted header: tensor '{last}' has data_offsets"),
        "reversed": (first, lambda b, e: [e, b],
                     rf"has a corrupted header: tensor '{first}' has invalid data_offsets"),
        "overlap": (last, lambda b, e: [b - 2, e - 2],
                    rf"has a corrupted header: the tensors' data_offsets overlap at tensor "
                    rf"'{last}'"),
    }
    for name, (key, change, message) in cases.items():
        edited = json.loads(json.dumps(header))
        edited[key]["data_offsets"] = change(*header[key]["data_offsets"])
        bad = tmp_path / f"{name}.safetensors"
        _join(bad, edited, body)
        with pytest.raises(ValueError, match=_named(bad) + " " + message):
            cute_gemm.load_quantized(_model(seed=1), bad)
        with pytest.raises(ValueError, match=_named(bad)):
            load_state_dict_files(bad)
    edited = json.loads(json.dumps(header))
    edited[first]["dtype"] = "Q7"
    bad = tmp_path / "dtype.safetensors"
    _join(bad, edited, body)
    with pytest.raises(ValueError, match=_named(bad) + rf" has a corrupted header: tensor "
                                         rf"'{first}' has an unknown dtype 'Q7'"):
        cute_gemm.load_quantized(_model(seed=1), bad)


def test_foreign_and_unknown_version_files(tmp_path):
    from safetensors.torch import save_file

    plain = tmp_path / "plain.safetensors"
    save_file({k: v.contiguous() for k, v in _model().state_dict().items()}, str(plain))
    with pytest.raises(ValueError, match=_named(plain) + " is not a cute_gemm file: it has no "
                                         "cute_gemm layer metadata"):
        cute_gemm.load_quantized(_model(seed=1), plain)
    _, path = _saved(tmp_path)
    future = _resave(path, tmp_path / "future.safetensors", metadata={"cute_gemm.format": "2"})
    with pytest.raises(ValueError, match=_named(future) + " is a cute_gemm file of format "
                                         "version '2', which this version of cute_gemm cannot "
                                         "read"):
        cute_gemm.load_quantized(_model(seed=1), future)
    unversioned = _resave(path, tmp_path / "unversioned.safetensors",
                          metadata={"cute_gemm.format": None})
    with pytest.raises(ValueError, match=_named(unversioned) + " has cute_gemm layer metadata "
                                         "but no format version"):
        cute_gemm.load_quantized(_model(seed=1), unversioned)
    for value, what in (("{not json", "'cute_gemm.layers' is not valid JSON"),
                        ("[]", "'cute_gemm.layers' must be a JSON object"),
                        ('{"0": {"bits": 4}}', "for layer '0': settings need 'in_features'"),
                        (json.dumps({"0": {"in_features": 128, "out_features": 256,
                                           "bias": True, "bits": 3, "group_size": 64,
                                           "symmetric": True, "dtype": "float16",
                                           "input_perm": False}}),
                         "for layer '0': settings .* do not describe a valid layer")):
        broken = _resave(path, tmp_path / "broken.safetensors",
                         metadata={"cute_gemm.layers": value})
        with pytest.raises(ValueError, match=_named(broken) + " has corrupted cute_gemm "
                                             "metadata.*" + what):
            cute_gemm.load_quantized(_model(seed=1), broken)


def test_files_for_another_model(tmp_path):
    _, path = _saved(tmp_path)
    # Quantized layer names the model does not have.
    other = nn.Sequential(nn.Linear(128, 256)).half()
    with pytest.raises(ValueError, match=_named(path) + " has a quantized layer '2' that the "
                                         "model does not have"):
        cute_gemm.load_quantized(other, path)
    # A quantized layer of another shape.
    with pytest.raises(ValueError, match=r"layer '0' is \[out=384, in=128\] in the model but "
                                         r"\[out=256, in=128\] in the file " + _named(path)):
        cute_gemm.load_quantized(_model(hidden=384), path)
    # A dense layer of another shape: named with both shapes, before anything changes.
    model = _model(seed=1, head=256)
    snapshot = _snapshot(model)
    with pytest.raises(ValueError, match=_named(path) + r" does not fit the model(?s:.)*layer "
                                         r"'3': 'weight' is \[256, 128\] in the model but "
                                         r"\[128, 128\] in the file"):
        cute_gemm.load_quantized(model, path)
    _assert_unchanged(model, snapshot)
    # A file whose tensors do not match its own layer settings.
    forged = _resave(path, tmp_path / "forged.safetensors",
                     add={"2.scales": torch.ones(2, 128, dtype=torch.float16)})
    with pytest.raises(ValueError, match=_named(forged) + r" does not fit the model(?s:.)*layer '2': "
                                         r"'scales' is \[4, 128\] in the model but \[2, 128\] in "
                                         r"the file"):
        cute_gemm.load_quantized(_model(seed=1), forged)
    wrong_dtype = _resave(path, tmp_path / "dtype.safetensors",
                          add={"0.qweight": _quantized()[0].qweight.float()})
    with pytest.raises(ValueError, match=_named(wrong_dtype) + r" does not fit the model(?s:.)*layer "
                                         r"'0': 'qweight' is F32 in the file but the quantized "
                                         r"layer needs I32"):
        cute_gemm.load_quantized(_model(seed=1), wrong_dtype)


def _gptq_dir(tmp_path):
    """A two-shard 'GPTQ' directory: a dense model's state (the error tests never reach the
    layer conversion)."""
    from safetensors.torch import save_file

    state = {k: v.contiguous() for k, v in _model().state_dict().items()}
    keys = sorted(state)
    directory = tmp_path / "gptq"
    directory.mkdir()
    save_file({k: state[k] for k in keys[::2]}, str(directory / "model-00001.safetensors"))
    save_file({k: state[k] for k in keys[1::2]}, str(directory / "model-00002.safetensors"))
    (directory / "quantize_config.json").write_text(json.dumps({"bits": 4, "group_size": 64}))
    return directory


def test_gptq_directory_with_a_truncated_shard(tmp_path):
    directory = _gptq_dir(tmp_path)
    shard = directory / "model-00002.safetensors"
    data = shard.read_bytes()
    for cut in (5, 20, len(data) - 3):
        shard.write_bytes(data[:cut])
        model = _model(seed=1)
        snapshot = _snapshot(model)
        with pytest.raises(ValueError, match="load_state_dict_files: " + _named(shard)
                                             + " is truncated"):
            load_gptq_model(model, directory)
        _assert_unchanged(model, snapshot)
        with pytest.raises(ValueError, match=_named(shard) + " is truncated"):
            load_awq_model(model, directory)


@pytest.mark.parametrize("text,what", [("{bits: 4,", "is not valid JSON"),
                                       ('{"bits": 4', "is not valid JSON"),
                                       ("[4, 64]", "must hold a JSON object; got list"),
                                       ("\udcff", "cannot read config file")])
def test_malformed_quantize_config(tmp_path, text, what):
    directory = _gptq_dir(tmp_path)
    config = directory / "quantize_config.json"
    config.write_bytes(text.encode("utf-8", "surrogateescape"))
    def check(call, where, name):
        with pytest.raises(ValueError, match=where) as info:
            call()
        assert repr(str(name)) in str(info.value) and re.search(what, str(info.value))

    check(lambda: load_gptq_model(_model(seed=1), directory), "load_gptq_model: ", config)
    check(lambda: load_gptq_model(_model(seed=1), directory / "model-00001.safetensors",
                                  str(config)), "load_gptq_model: ", config)
    config.unlink()
    hf_config = directory / "config.json"
    hf_config.write_bytes(text.encode("utf-8", "surrogateescape"))
    check(lambda: load_awq_model(_model(seed=1), directory), "load_awq_model: ", hf_config)
    hf_config.write_text(json.dumps({"quantization_config": [1]}))
    with pytest.raises(ValueError, match=_named(hf_config) + ": quantization_config must be a "
                                         "JSON object; got list"):
        load_gptq_model(_model(seed=1), directory)
    missing = tmp_path / "nothing.json"
    with pytest.raises(FileNotFoundError, match=_named(missing) + " does not exist"):
        load_gptq_model(_model(seed=1), directory, str(missing))


# ------------------------------------------------------------------------- 3. alignment


def test_meta_model_buffers_are_aligned_whatever_the_header_length(tmp_path):
    source = _quantized(symmetric=False)
    misaligned = 0
    for pad in range(0, 64, 4):
        path = tmp_path / f"pad{pad}.safetensors"
        cute_gemm.save_quantized(source, path, metadata={"pad": "x" * pad})
        header, _ = _split(path)
        (n,) = struct.unpack("<Q", path.read_bytes()[:8])
        misaligned += sum((8 + n + header[k]["data_offsets"][0]) % 16 != 0
                          for k in header if k.startswith(("0.", "2.")))
        model = _model(device="meta")
        cute_gemm.load_quantized(model, path)
        for name, module in model.named_modules():
            if isinstance(module, QuantLinear):
                for key, t in module.named_buffers():
                    assert t.device.type == "cpu" and t.is_contiguous(), (pad, name, key)
                    assert t.data_ptr() % 16 == 0, (pad, name, key, t.data_ptr() % 16)
        assert torch.equal(model(X), source(X))
    assert misaligned > 0  # the files did put quantized tensors at 8-but-not-16-byte offsets


# -------------------------------------------------------------------- 4. all or nothing


def test_failed_loads_leave_the_model_as_it_was(tmp_path):
    _, path = _saved(tmp_path, symmetric=False)
    cases = {
        # The second quantized layer is another shape (the first would have been swapped).
        "shape": (lambda: _model(seed=1), path,
                  r"layer '2' is \[out=128, in=128\] in the model but \[out=128, in=256\] in "
                  r"the file"),
        "missing_key": (lambda: _model(seed=1),
                        _resave(path, tmp_path / "missing.safetensors", drop=("3.bias",)),
                        r"missing keys \['3.bias'\]"),
        "unexpected_key": (lambda: _model(seed=1),
                           _resave(path, tmp_path / "unexpected.safetensors",
                                   add={"2.weight": torch.ones(128, 256).half()}),
                           r"unexpected keys \['2.weight'\]"),
        "scales_dtype": (lambda: _model(seed=1),
                         _resave(path, tmp_path / "dtype.safetensors",
                                 add={"2.scales": torch.ones(4, 128)}),
                         r"layer '2': 'scales' is F32 in the file but the quantized layer needs "
                         r"F16"),
        "zeros_range": (lambda: _model(seed=1),
                        _resave(path, tmp_path / "zeros.safetensors",
                                add={"2.zeros": torch.full((4, 128), 99.0).half()}),
                        r"cannot be loaded into layer '2'; nothing was changed: QuantLinear "
                        r"'2': zeros must hold integer zero points in \[0, 15\]"),
        "format_tag": (lambda: _model(seed=1),
                       _resave(path, tmp_path / "tag.safetensors",
                               add={"2.qformat": cute_gemm.quant.format_tag(8, 64, False)}),
                       r"cannot be loaded into layer '2'.*'2.qformat' does not match this "
                       r"layer: the buffer was packed for bits=8"),
        "truncated": (lambda: _model(seed=1), None, "is truncated"),
    }
    truncated = tmp_path / "truncated.safetensors"
    truncated.write_bytes(path.read_bytes()[:-10])
    for name, (build, file, message) in cases.items():
        model = build()
        if name == "shape":
            model[2] = nn.Linear(128, 128).half()
        snapshot = _snapshot(model)
        with pytest.raises(ValueError, match=message):
            cute_gemm.load_quantized(model, file or truncated, strict=True)
        _assert_unchanged(model, snapshot)
        if name in ("zeros_range", "format_tag", "scales_dtype"):
            with pytest.raises(ValueError, match=message):
                cute_gemm.load_quantized(model, file, strict=False)
            _assert_unchanged(model, snapshot)


def test_failure_in_the_final_load_puts_the_modules_back(tmp_path):
    _, path = _saved(tmp_path)

    def refuse(*args, **kwargs):
        raise RuntimeError("a hook refused the state dict")

    for device, hook in ((None, "pre"), ("meta", "post")):
        model = _model(seed=1, device=device)
        if hook == "pre":
            model.register_load_state_dict_pre_hook(refuse)
        else:
            model.register_load_state_dict_post_hook(refuse)
        modules = dict(model.named_modules())
        params = dict(model.named_parameters())
        state = {k: v.clone() for k, v in model.state_dict().items()} if device is None else None
        with pytest.raises(ValueError, match=_named(path) + " failed; the model's original "
                                             "modules were put back: a hook refused"):
            cute_gemm.load_quantized(model, path)
        assert dict(model.named_modules()) == modules
        now = dict(model.named_parameters())
        assert now.keys() == params.keys() and all(now[k] is p for k, p in params.items())
        if device == "meta":
            assert all(p.device.type == "meta" for p in model.parameters())
        else:
            assert all(torch.equal(v, state[k]) for k, v in model.state_dict().items())
