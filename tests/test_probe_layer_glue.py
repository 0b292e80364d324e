"""benchmarks/probe_layer_glue.py's ablations on the CPU: each removes what it names from every
decoder layer of a small Llama (16-bit, and quantized with fused projections as bench_model
builds it), the model still runs, and names or forwards it cannot handle are refused."""

import copy
import os
import sys

import pytest
import torch

transformers = pytest.importorskip("transformers")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "benchmarks"))

import bench_decode  # noqa: E402
import bench_model  # noqa: E402
import probe_layer_glue  # noqa: E402

import cute_gemm  # noqa: E402


def _model(variant):
    base = bench_decode.build_model(transformers, dict(bench_decode.SMOKE), 2, torch.device("cpu"),
                                    torch.float32)
    kind, settings = bench_model.VARIANTS[variant]
    model, _ = bench_model.make_variant(cute_gemm, base, kind, settings, copy.deepcopy)
    return model


def _logits(model, ids):
    with torch.no_grad():
        return model(input_ids=ids, use_cache=False).logits


@pytest.mark.parametrize("variant", ["bf16", "int4-fused"])
def test_each_ablation_removes_what_it_names(variant):
    model = _model(variant)
    ids = torch.randint(0, 1000, (1, 6), generator=torch.Generator().manual_seed(0))
    full = _logits(model, ids)
    calls = {}
    for ablation in probe_layer_glue.ABLATIONS:
        ablated = probe_layer_glue.ablate(copy.deepcopy(model), ablation)
        layer = ablated.model.layers[0]
        norms_gone = isinstance(layer.input_layernorm, torch.nn.Identity)
        assert norms_gone == (ablation in ("no-norms", "no-glue", "gemms-only")), ablation
        seen = []
        hook = layer.self_attn.o_proj.register_forward_hook(lambda *a: seen.append(1))
        out = _logits(ablated, ids)
        hook.remove()
        assert out.shape == full.shape and torch.isfinite(out).all(), ablation
        assert seen, f"{ablation}: o_proj not called"  # the GEMMs always run
        calls[ablation] = out
    assert torch.equal(calls["full"], full)
    for ablation in probe_layer_glue.ABLATIONS[1:]:
        assert not torch.allclose(calls[ablation], full), ablation


def test_refusals():
    model = _model("bf16")
    with pytest.raises(ValueError, match="ablation"):
        probe_layer_glue.ablate(model, "no-mlp")

    class Layer(torch.nn.Module):  # a forward without the two residual adds
        def forward(self, hidden_states):
            return hidden_states

    with pytest.raises(RuntimeError, match="two residual adds"):
        probe_layer_glue.strip_residual_adds(Layer())
