"""transformers integration (cute_gemm.hf): quant_method "cute_gemm" in from_pretrained, quantized
while loading, save_pretrained round trips, fusion, and the GPTQ/AWQ directory one-call loaders.
CPU only (the ops' reference implementations), tiny random models, nothing downloaded."""

import json
import os
import subprocess
import sys

import pytest
import torch

transformers = pytest.importorskip("transformers")

import cute_gemm  # noqa: E402
from cute_gemm import CuteGemmConfig  # noqa: E402
from cute_gemm.fuse import ProjectionSlice  # noqa: E402
from cute_gemm.nn import QuantLinear  # noqa: E402

pytestmark = pytest.mark.skipif(not cute_gemm.hf.transformers_available(),
                                reason="needs transformers >= 5")

TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def _config(family):
    common = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, vocab_size=256,
                  tie_word_embeddings=False, max_position_embeddings=64)
    cls = {"llama": transformers.LlamaConfig, "qwen2": transformers.Qwen2Config,
           "mistral": transformers.MistralConfig}[family]
    return cls(**common)


def _save_base(tmp_path, family, dtype, seed=0):
    torch.manual_seed(seed)
    model_cls = {"llama": transformers.LlamaForCausalLM, "qwen2": transformers.Qwen2ForCausalLM,
                 "mistral": transformers.MistralForCausalLM}[family]
    model = model_cls(_config(family)).to(dtype)
    path = tmp_path / f"{family}-base"
    model.save_pretrained(path)
    return path


def _tokens():
    return torch.randint(0, 256, (2, 7), generator=torch.Generator().manual_seed(5))


def _logits(model):
    with torch.no_grad():
        return model(_tokens()).logits


def _load(path, **kwargs):
    model, info = transformers.AutoModelForCausalLM.from_pretrained(
        path, output_loading_info=True, **kwargs)
    for key in ("missing_keys", "unexpected_keys", "mismatched_keys"):
        assert not info.get(key), (key, info[key])
    return model


def _assert_quantized(model, bits, group_size, symmetric, dtype):
    for i, layer in enumerate(model.model.layers):
        for attr in TARGETS:
            parent = layer.self_attn if attr in TARGETS[:4] else layer.mlp
            mod = getattr(parent, attr)
            assert isinstance(mod, QuantLinear), (i, attr, type(mod))
            assert (mod.bits, mod.group_size, mod.symmetric) == (bits, group_size, symmetric)
            assert mod.scales.dtype == dtype
            assert "weight" not in mod._parameters
            assert all(t.device.type == "cpu" for t in mod.buffers())
    assert type(model.lm_head) is torch.nn.Linear  # the default modules_to_not_convert


def test_registered_and_idempotent():
    from transformers.quantizers import auto

    assert auto.AUTO_QUANTIZATION_CONFIG_MAPPING["cute_gemm"] is CuteGemmConfig
    assert auto.AUTO_QUANTIZER_MAPPING["cute_gemm"] is cute_gemm.hf.CuteGemmHfQuantizer
    assert cute_gemm.hf.register() and cute_gemm.hf.register()  # again: no error
    assert auto.AUTO_QUANTIZATION_CONFIG_MAPPING["cute_gemm"] is CuteGemmConfig


@pytest.mark.parametrize("family,bits,group_size,symmetric,dtype", [
    ("llama", 4, 32, True, torch.float16),
    ("llama", 8, 64, True, torch.float16),
    ("qwen2", 4, 64, False, torch.bfloat16),   # q/k/v biases
    ("qwen2", 8, 32, True, torch.float16),
    ("mistral", 4, 32, True, torch.bfloat16),
])
def test_from_pretrained_quantizes_like_quantize_model_and_round_trips(
        tmp_path, family, bits, group_size, symmetric, dtype):
    base = _save_base(tmp_path, family, dtype)
    config = CuteGemmConfig(bits=bits, group_size=group_size, symmetric=symmetric)
    model = _load(base, quantization_config=config, dtype=dtype)  # device_map needs accelerate
    _assert_quantized(model, bits, group_size, symmetric, dtype)
    if family == "qwen2":
        assert model.model.layers[0].self_attn.q_proj.bias is not None

    reference = transformers.AutoModelForCausalLM.from_pretrained(base, dtype=dtype)
    cute_gemm.quantize_model(reference, bits=bits, group_size=group_size, symmetric=symmetric,
                             progress=False)
    ref_state = reference.state_dict()
    for key, value in model.state_dict().items():
        assert torch.equal(value, ref_state[key]), key  # the very same quantized buffers
    assert model.state_dict().keys() == ref_state.keys()
    logits = _logits(model)
    assert torch.equal(logits, _logits(reference))

    out = tmp_path / "quantized"
    model.save_pretrained(out)
    saved = json.loads((out / "config.json").read_text())["quantization_config"]
    assert saved == {"quant_method": "cute_gemm", "bits": bits, "group_size": group_size,
                     "symmetric": symmetric, "modules_to_not_convert": None, "fuse": False}
    again = _load(out)  # pre-quantized: the config comes from config.json
    assert isinstance(again.config.quantization_config, CuteGemmConfig)
    _assert_quantized(again, bits, group_size, symmetric, dtype)
    assert torch.equal(_logits(again), logits)


_CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@_CUDA
@pytest.mark.parametrize("family,bits,group_size,symmetric,dtype,fuse", [
    ("llama", 4, 32, True, torch.float16, False),
    ("llama", 4, 64, True, torch.bfloat16, True),  # (hidden 64: a group of 128 does not fit)
    ("qwen2", 4, 64, False, torch.bfloat16, True),   # q/k/v biases, zero points
    ("mistral", 8, 32, True, torch.float16, False),
])
def test_from_pretrained_device_map_cuda(tmp_path, family, bits, group_size, symmetric, dtype,
                                         fuse):
    # The GPU path users take: quantized while loading onto the GPU, the same buffers as
    # quantize_model on the CPU (quantize is exact on both), the GPU kernels' logits, and a
    # save / reload onto the GPU with identical logits.
    pytest.importorskip("accelerate")
    base = _save_base(tmp_path, family, dtype)
    config = CuteGemmConfig(bits=bits, group_size=group_size, symmetric=symmetric, fuse=fuse)
    model = _load(base, quantization_config=config, dtype=dtype, device_map="cuda")
    quantized = [m for m in model.modules() if isinstance(m, QuantLinear)]
    assert len(quantized) == (8 if fuse else 14)
    assert all(t.device.type == "cuda" for m in quantized for t in m.buffers())

    reference = transformers.AutoModelForCausalLM.from_pretrained(base, dtype=dtype)
    cute_gemm.quantize_model(reference, bits=bits, group_size=group_size, symmetric=symmetric,
                             fuse=fuse, progress=False)
    ref_state = reference.state_dict()
    assert model.state_dict().keys() == ref_state.keys()
    for key, value in model.state_dict().items():
        assert torch.equal(value.cpu(), ref_state[key]), key
    tokens = _tokens().cuda()
    with torch.no_grad():
        logits = model(tokens).logits
        assert torch.equal(logits, reference.cuda()(tokens).logits)
    torch.testing.assert_close(logits.float().cpu(), _logits(reference.cpu()).float(),
                               atol=3e-2, rtol=3e-2)  # GPU kernels vs the CPU reference op

    out = tmp_path / "quantized"
    model.save_pretrained(out)
    again = _load(out, device_map="cuda")
    with torch.no_grad():
        assert torch.equal(again(tokens).logits, logits)


@_CUDA
@pytest.mark.parametrize("kind", ["gptq", "awq"])
def test_checkpoint_directory_one_call_then_cuda(tmp_path, kind):
    path, _ = _quantized_checkpoint(tmp_path, kind)
    load = cute_gemm.load_gptq_pretrained if kind == "gptq" else cute_gemm.load_awq_pretrained
    model, _ = load(path, dtype=torch.float16)
    on_cpu = _logits(model)
    model.cuda()
    with torch.no_grad():
        on_gpu = model(_tokens().cuda()).logits
    torch.testing.assert_close(on_gpu.float().cpu(), on_cpu.float(), atol=3e-2, rtol=3e-2)


def test_fuse_quantizes_fused_layers_and_round_trips(tmp_path):
    base = _save_base(tmp_path, "llama", torch.float16, seed=3)
    model = _load(base, quantization_config=CuteGemmConfig(bits=4, group_size=32, fuse=True),
                  dtype=torch.float16)
    attn, mlp = model.model.layers[1].self_attn, model.model.layers[1].mlp
    assert isinstance(attn.qkv_proj, QuantLinear) and attn.qkv_proj.out_features == 128
    assert isinstance(attn.q_proj, ProjectionSlice) and isinstance(mlp.up_proj, ProjectionSlice)
    assert isinstance(mlp.gate_up_proj, QuantLinear) and isinstance(attn.o_proj, QuantLinear)

    reference = transformers.AutoModelForCausalLM.from_pretrained(base, dtype=torch.float16)
    summary = cute_gemm.quantize_model(reference, bits=4, group_size=32, fuse=True,
                                       progress=False)
    assert len(summary.fused) == 4
    ref_state = reference.state_dict()
    assert model.state_dict().keys() == ref_state.keys()
    for key, value in model.state_dict().items():
        assert torch.equal(value, ref_state[key]), key
    logits = _logits(model)
    assert torch.equal(logits, _logits(reference))

    out = tmp_path / "fused"
    model.save_pretrained(out)
    assert json.loads((out / "config.json").read_text())["quantization_config"]["fuse"] is True
    again = _load(out)
    assert isinstance(again.model.layers[0].self_attn.k_proj, ProjectionSlice)
    assert torch.equal(_logits(again), logits)


def test_modules_to_not_convert(tmp_path):
    base = _save_base(tmp_path, "llama", torch.float16)
    model = _load(base, dtype=torch.float16, quantization_config=CuteGemmConfig(
        bits=8, group_size=32, modules_to_not_convert=["down_proj", "lm_head"]))
    assert type(model.model.layers[0].mlp.down_proj) is torch.nn.Linear
    assert isinstance(model.model.layers[0].mlp.up_proj, QuantLinear)
    assert type(model.lm_head) is torch.nn.Linear
    assert torch.isfinite(_logits(model)).all()


@pytest.mark.parametrize("kwargs,error,text", [
    (dict(bits=3), ValueError, "bits"),
    (dict(bits="4"), TypeError, "bits"),
    (dict(group_size=100), ValueError, "group_size"),
    (dict(symmetric="yes"), TypeError, "symmetric"),
    (dict(fuse=1), TypeError, "fuse"),
    (dict(modules_to_not_convert=[1]), TypeError, "modules_to_not_convert"),
    (dict(modules_to_not_convert=3), TypeError, "modules_to_not_convert"),
    (dict(bitz=4), TypeError, "bitz"),
])
def test_bad_config_arguments_raise(kwargs, error, text):
    with pytest.raises(error, match=text):
        CuteGemmConfig(**kwargs)


def test_config_dict_round_trip():
    config = CuteGemmConfig(bits=8, group_size=-1, symmetric=False, modules_to_not_convert="x")
    again = transformers.quantizers.AutoQuantizationConfig.from_dict(config.to_dict())
    assert isinstance(again, CuteGemmConfig) and again.to_dict() == config.to_dict()
    assert again.modules_to_not_convert == ["x"]


def test_import_without_transformers_is_silent_and_config_raises():
    code = ("import sys; sys.modules['transformers'] = None\n"
            "import cute_gemm\n"
            "assert not cute_gemm.hf.transformers_available() and not cute_gemm.hf.register()\n"
            "try:\n    cute_gemm.CuteGemmConfig(bits=4)\nexcept ImportError as e:\n"
            "    assert 'transformers' in str(e); print('ok')\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [os.path.dirname(os.path.dirname(cute_gemm.__file__)), os.environ.get("PYTHONPATH", "")]))
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                            timeout=120)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr


# ----------------------------------------------------------------- GPTQ / AWQ directories


def _quantized_checkpoint(tmp_path, kind, seed=11):
    """A tiny Llama's directory with GPTQ or AWQ tensors for every decoder Linear."""
    from safetensors.torch import save_file
    from test_checkpoints import _gptq_tensors, _known_layer, _pack_awq

    torch.manual_seed(seed)
    config = _config("llama")
    model = transformers.LlamaForCausalLM(config).to(torch.float16)
    tensors = {k: v.clone() for k, v in model.state_dict().items()}
    for name, module in model.named_modules():
        if not isinstance(module, torch.nn.Linear) or name == "lm_head":
            continue
        seed += 1
        q, z, s, g_idx, _ = _known_layer(module.out_features, module.in_features, 4, 32,
                                         False, torch.float16, seed, act_order=kind == "gptq")
        del tensors[f"{name}.weight"]
        if kind == "gptq":
            tensors[f"{name}.qweight"], tensors[f"{name}.qzeros"] = _gptq_tensors(q, z, 4, "gptq")
            tensors[f"{name}.g_idx"] = g_idx.to(torch.int32)
        else:
            tensors[f"{name}.qweight"], tensors[f"{name}.qzeros"] = _pack_awq(q.t()), _pack_awq(z)
        tensors[f"{name}.scales"] = s
    path = tmp_path / kind
    if kind == "gptq":
        config.quantization_config = {"quant_method": "gptq", "bits": 4, "group_size": 32,
                                      "sym": False, "desc_act": True,
                                      "checkpoint_format": "gptq"}
    else:
        config.quantization_config = {"quant_method": "awq", "bits": 4, "group_size": 32,
                                      "version": "gemm", "zero_point": True}
    config.save_pretrained(path)
    save_file(tensors, str(path / "model.safetensors"))
    return path, config


@pytest.mark.parametrize("kind", ["gptq", "awq"])
def test_checkpoint_directory_one_call(tmp_path, kind):
    path, config = _quantized_checkpoint(tmp_path, kind)
    load = cute_gemm.load_gptq_pretrained if kind == "gptq" else cute_gemm.load_awq_pretrained
    model, report = load(path, dtype=torch.float16)
    assert len(report.quantized) == 14 and not report.missing and not report.unexpected
    assert all(p.device.type == "cpu" for p in model.parameters())
    assert all(b.device.type == "cpu" for b in model.buffers())
    assert isinstance(model.model.layers[0].mlp.down_proj, QuantLinear)
    if kind == "gptq":
        assert model.model.layers[0].mlp.down_proj.input_perm is not None  # act-order

    # Built in fp16 (not .to(fp16), which would also round the fp32 rotary table).
    manual = transformers.LlamaForCausalLM._from_config(_config("llama"), dtype=torch.float16)
    if kind == "gptq":
        cute_gemm.load_gptq_model(manual, path)
    else:
        cute_gemm.load_awq_model(manual, path)
    assert torch.equal(_logits(model), _logits(manual))


@pytest.mark.parametrize("fuse", [False, True])
def test_device_map_warmup_counts_packed_bytes(tmp_path, monkeypatch, fuse):
    # With a device_map that names a GPU, transformers first sizes the model from
    # model.state_dict() (get_parameter_or_buffer of every key, including the placeholder
    # weights of the empty quantized layers) to pre-allocate it. Run that sizing here as if the
    # CPU were the GPU: it must not fail, and must count the packed size, not the 16-bit one.
    pytest.importorskip("accelerate")  # transformers needs it for any device_map
    import transformers.modeling_utils as mu

    path = _save_base(tmp_path, "llama", torch.bfloat16)
    counted = []

    def warmup(model, device_map, hf_quantizer):
        as_gpu = {name: torch.device("cuda") for name in device_map}
        counted.append(sum(mu.get_total_byte_count(model, as_gpu, hf_quantizer).values()))

    monkeypatch.setattr(mu, "caching_allocator_warmup", warmup)
    model = _load(path, dtype=torch.bfloat16, device_map="cpu",
                  quantization_config=CuteGemmConfig(bits=4, group_size=32, fuse=fuse))
    base = transformers.LlamaForCausalLM._from_config(_config("llama"), dtype=torch.bfloat16)
    dense = sum(p.numel() * p.element_size() for p in base.parameters())
    loaded = sum(t.numel() * t.element_size() for t in model.state_dict().values())
    assert len(counted) == 1
    # (Fusing after the load drops some of the layers' 4-byte format tags.)
    assert abs(counted[0] - loaded) <= 0.01 * loaded and loaded < 0.7 * dense, (
        counted[0], loaded, dense)


def test_load_probe_cpu_smoke(tmp_path):
    # scripts/hf_load_probe.py (the device's peak-memory measurement of from_pretrained) on a
    # tiny model: the code path, and its round-trip check, without a GPU.
    import importlib.util

    path = os.path.join(os.path.dirname(os.path.dirname(__file__)), "scripts",
                        "hf_load_probe.py")
    spec = importlib.util.spec_from_file_location("hf_load_probe", path)
    probe = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(probe)
    assert probe.main(["--cpu-smoke", "--out", str(tmp_path)]) == 0
    row = json.load(open(tmp_path / "hf_load_cpu-smoke.json"))["results"][0]
    assert row["round_trip_identical"] and row["quant_linears"] == 14
    assert row["quantized_model_gb"] < row["bf16_model_gb"]
