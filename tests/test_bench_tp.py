"""benchmarks/bench_tp.py on the CPU (--cpu-smoke: 2 gloo ranks, a tiny model): the code path of
the tensor-parallel decode benchmark (the model built and quantized on every rank, sharded with
cute_gemm.distributed's styles, decoded, results written). Timing numbers are not checked."""

import json
import os
import sys

import pytest

pytest.importorskip("transformers")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "benchmarks"))

import bench_tp  # noqa: E402


def test_cpu_smoke_runs_one_and_two_ranks(tmp_path):
    assert bench_tp.main(["--cpu-smoke", "--out", str(tmp_path)]) == 0
    data = json.load(open(tmp_path / "tp_cpu-smoke.json"))
    rows = data["results"]
    assert [(r["variant"], r["world"]) for r in rows] == [
        ("bf16", 1), ("int4", 1), ("bf16", 2), ("int4", 2)]
    for r in rows:
        assert r["ms_per_step"] > 0 and 0.0 <= r["agree"] <= 1.0 and r["step_mode"] == "eager"
        assert r["vs_one_gpu"] == pytest.approx(
            next(o["ms_per_step"] for o in rows if o["world"] == 1
                 and o["variant"] == r["variant"]) / r["ms_per_step"])
    assert "tensor parallel over 2" in rows[3]["note"] and "quantized" in rows[3]["note"]
    assert "NCCL_NVLS_ENABLE=0" in data["meta"]["multicast"]
    # The ranks inherit the parent's environment with multicast off, whatever it was before.
    assert os.environ["NCCL_NVLS_ENABLE"] == "0"
    assert os.environ["TORCH_SYMM_MEM_DISABLE_MULTICAST"] == "1"
    pytest.importorskip("matplotlib")
    assert (tmp_path / "tp_cpu-smoke.png").stat().st_size > 0


def test_bad_arguments_are_refused():
    for argv in (["--world", "0"], ["--variants", "int3"], ["--batch", "0"], ["--steps", "0"]):
        with pytest.raises(SystemExit):
            bench_tp.parse_args(argv)
    assert bench_tp.parse_args(["--world", "1"]).world == 1


def test_plan_shards_every_decoder_linear():
    # The plan the benchmark applies: transformers' decoder-layer entries as cute_gemm's styles,
    # the embedding row-wise and the head column-wise with replicated output.
    import transformers

    from cute_gemm.distributed import ColwiseParallel, RowwiseParallel

    config = transformers.LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=1,
                                      num_attention_heads=4, num_key_value_heads=2,
                                      vocab_size=128)
    model = transformers.LlamaForCausalLM(config)
    plan = bench_tp.tp_model_plan(model)
    for name in ("q_proj", "k_proj", "v_proj"):
        assert isinstance(plan[f"model.layers.*.self_attn.{name}"], ColwiseParallel)
    assert isinstance(plan["model.layers.*.self_attn.o_proj"], RowwiseParallel)
    assert isinstance(plan["model.layers.*.mlp.down_proj"], RowwiseParallel)
    assert isinstance(plan["lm_head"], ColwiseParallel)
    assert isinstance(plan["model.embed_tokens"], RowwiseParallel)


def test_all_reduce_kind_is_bench_models():
    # The all-reduce time is bench_model.profile_steps' kind for NCCL kernels, by that name.
    import bench_model

    assert bench_tp.NCCL_KIND in [kind for kind, _ in bench_model.KERNEL_KINDS]
    assert bench_model.kernel_kind("ncclDevKernel_AllReduce_Sum_bf16_RING_LL") == bench_tp.NCCL_KIND


def test_nccl_ms_per_step_reads_profile_steps(monkeypatch):
    # profile_steps returns (kinds, kernels, replayed); the NCCL kind's busy ms and the total's.
    import bench_model

    kinds = {bench_tp.NCCL_KIND: (0.25, 0.125, 2.0), "total": (3.0, 2.5, 40.0)}
    seen = []
    monkeypatch.setattr(bench_model, "profile_steps",
                        lambda dec, steps: seen.append((dec, steps)) or (kinds, [], True))
    assert bench_tp.nccl_ms_per_step("dec", 4) == (0.25, 3.0)
    assert seen == [("dec", 4)]
    del kinds[bench_tp.NCCL_KIND]  # one GPU: no collectives
    assert bench_tp.nccl_ms_per_step("dec", 4) == (0.0, 3.0)
