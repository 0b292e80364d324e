"""benchmarks/bench_model.py on the CPU (--cpu-smoke): the code path of the whole-model benchmark
(variants built, decode steps run, agreement checked, results written) and its kernel-kind
classification for --profile. Timing numbers are not checked (a smoke run measures nothing)."""

import functools
import json
import os
import sys

import pytest

pytest.importorskip("transformers")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "benchmarks"))

import bench_decode  # noqa: E402
import bench_model  # noqa: E402
import cute_gemm.inductor  # noqa: E402


def test_cpu_smoke_writes_every_variant(tmp_path):
    variants = ["bf16", "int4", "int4-fused", "int8-fused-head8"]
    status = bench_model.main(["--cpu-smoke", "--variants", ",".join(variants), "--modes", "graph",
                               "--no-plot",
                               "--out", str(tmp_path)])
    assert status == 0
    rows = json.load(open(tmp_path / "model_cpu-smoke.json"))["results"]
    assert [r["variant"] for r in rows] == variants
    for r in rows:
        assert r["status"] == "ok" and r["ms_per_step"] > 0 and 0.0 <= r["agree"] <= 1.0
        assert r["speedup"] is not None
    by = {r["variant"]: r for r in rows}
    assert "fused groups" in by["int4-fused"]["note"] and "head INT8" in by["int8-fused-head8"][
        "note"]
    assert by["int4-fused"]["vs_unfused"] is not None and by["int4"]["vs_unfused"] is None


def test_cpu_smoke_both_attentions(tmp_path):
    # Every variant with each attention implementation; ratios to 16-bit within one attention.
    status = bench_model.main(["--cpu-smoke", "--variants", "bf16,int4-fused", "--modes", "graph",
                               "--attention", "sdpa,cute_gemm", "--no-plot", "--out",
                               str(tmp_path)])
    assert status == 0
    rows = json.load(open(tmp_path / "model_cpu-smoke.json"))["results"]
    assert [(r["variant"], r["attention"]) for r in rows] == [
        ("bf16", "sdpa"), ("int4-fused", "sdpa"), ("bf16", "cute_gemm"),
        ("int4-fused", "cute_gemm")]
    by = {(r["variant"], r["attention"]): r for r in rows}
    assert all(r["status"] == "ok" and r["speedup"] is not None for r in rows)
    assert by[("bf16", "cute_gemm")]["speedup"] == 1.0
    assert by[("int4-fused", "cute_gemm")]["vs_sdpa"] is not None
    assert by[("int4-fused", "sdpa")]["vs_sdpa"] is None


def test_add_ratios_pairs_rows_of_one_attention():
    rows = [dict(variant=v, mode="compile", batch=1, attention=a, status="ok", ms_per_step=ms)
            for v, a, ms in (("bf16", "sdpa", 8.0), ("int4", "sdpa", 4.0),
                             ("bf16", "cute_gemm", 6.0), ("int4", "cute_gemm", 2.0),
                             ("int4-fused", "cute_gemm", 1.5))]
    bench_model.add_ratios(rows)
    assert [r["speedup"] for r in rows] == [1.0, 2.0, 1.0, 3.0, 4.0]
    assert [r["vs_sdpa"] for r in rows] == [None, None, 8.0 / 6.0, 2.0, None]
    assert rows[4]["vs_unfused"] == 2.0 / 1.5 and rows[3]["vs_unfused"] is None


def test_inductor_pdl_option(monkeypatch, capsys):
    # --inductor-pdl sets torch's inductor option for the run (recorded in the results); a torch
    # without it is refused by name.
    import types

    import torch._inductor.config as inductor_config
    assert not bench_model.parse_args([]).inductor_pdl
    if hasattr(inductor_config.triton, "enable_pdl"):
        assert bench_model.parse_args(["--inductor-pdl"]).inductor_pdl
        with inductor_config.patch({"triton.enable_pdl": False}):
            bench_model.set_inductor_pdl(True)
            assert inductor_config.triton.enable_pdl
    # A torch whose inductor has no such option.
    monkeypatch.setattr(bench_model, "inductor_config",
                        types.SimpleNamespace(triton=types.SimpleNamespace()))
    assert not bench_model.parse_args([]).inductor_pdl
    with pytest.raises(SystemExit):
        bench_model.parse_args(["--inductor-pdl"])
    assert "--inductor-pdl: this torch" in capsys.readouterr().err


def test_layer_schedule_pins_the_named_layers(tmp_path):
    # --layer-schedule NAME@M=SCHEDULE pins QuantLinear.set_schedule on the quantized variants'
    # layers named NAME (the row notes what); a NAME that matches no layer fails the variant.
    args = bench_model.parse_args(["--layer-schedule", "self_attn.o_proj@1=kernel=decode,warps=4",
                                   "--layer-schedule", "mlp.down_proj@16=kernel=mma,splits=2"])
    assert args.layer_schedule == [("self_attn.o_proj", 1, "kernel=decode,warps=4"),
                                   ("mlp.down_proj", 16, "kernel=mma,splits=2")]
    status = bench_model.main(["--cpu-smoke", "--variants", "bf16,int4-fused", "--modes", "graph",
                               "--no-plot", "--out", str(tmp_path), "--layer-schedule",
                               "self_attn.o_proj@1=kernel=decode,warps=4"])
    assert status == 0
    result = json.load(open(tmp_path / "model_cpu-smoke.json"))
    assert result["meta"]["layer_schedules"] == ["self_attn.o_proj@1=kernel=decode,warps=4"]
    by = {r["variant"]: r for r in result["results"]}
    assert by["int4-fused"]["status"] == "ok"
    assert "pinned: 2 x self_attn.o_proj at M=1: kernel=decode,warps=4" in by["int4-fused"]["note"]
    assert "pinned" not in by["bf16"]["note"]
    status = bench_model.main(["--cpu-smoke", "--variants", "int4-fused", "--modes", "graph",
                               "--no-plot", "--out", str(tmp_path), "--layer-schedule",
                               "attn.oproj@1=kernel=decode"])
    assert status == 1
    row = json.load(open(tmp_path / "model_cpu-smoke.json"))["results"][0]
    assert "no quantized layer named 'attn.oproj'" in row["status"]


def test_bad_arguments_are_refused():
    for argv in (["--variants", "int3"], ["--modes", "fast"], ["--batch", "0"], ["--steps", "0"],
                 ["--attention", "flash"], ["--layer-schedule", "o_proj=kernel=decode"],
                 ["--layer-schedule", "o_proj@0=kernel=decode"],
                 ["--layer-schedule", "o_proj@1"], ["--layer-schedule", "@1=kernel=mma"]):
        with pytest.raises(SystemExit):
            bench_model.parse_args(argv)


@pytest.mark.parametrize("name, kind", [
    ("void cute_gemm::mixed::mixed_wgmma_ws_kernel<...>(...)", "cute_gemm mixed GEMM"),
    ("void cute_gemm::mixed::split_k_reduce_kernel<__half>(...)", "cute_gemm mixed GEMM"),
    ("nvjet_hsh_64x8_64x16_2x1_v_bz_splitK_TNT", "dense GEMM (cuBLAS)"),
    ("void at::native::tinygemm_m16n8k16_chunk_kernel<...>", "torch int4 GEMM"),
    ("void pytorch_flash::flash_fwd_kernel<...>", "attention"),
    ("void cute_gemm::attention::decode_attention_kernel<__nv_bfloat16>(...)",
     "cute_gemm decode attention"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>",
     bench_model.OTHER_KIND),
    ("triton_red_fused__to_copy_add_mean_mixed_gemm_mul_pow_rsqrt_view_15", bench_model.OTHER_KIND),
    ("triton_poi_fused__scaled_dot_product_cudnn_attention__to_copy_add_arange",
     bench_model.OTHER_KIND),
    ("cudnn_generated_fort_native_sdpa_sm80_flash_fprop_wmma_f16_knob_3", "attention"),
    ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
     "collectives (NCCL)"),
])
def test_kernel_kinds(name, kind):
    assert bench_model.kernel_kind(name) == kind


def test_kernel_table_groups_launches_by_grid():
    # Two launches of one kernel on different grids stay apart; repeats add up per step.
    name = "void cute_gemm::mixed::mixed_decode_kernel<Cfg, false>(Params, int, bool)"
    events = [
        {"cat": "kernel", "name": name, "dur": 4.0, "args": {"grid": [128, 1, 1],
                                                              "block": [512, 1, 1]}},
        {"cat": "kernel", "name": name, "dur": 6.0, "args": {"grid": [128, 1, 1],
                                                              "block": [512, 1, 1]}},
        {"cat": "kernel", "name": name, "dur": 30.0, "args": {"grid": [896, 1, 1],
                                                               "block": [64, 1, 1]}},
        {"cat": "cpu_op", "name": "aten::mm", "dur": 100.0},
        {"cat": "kernel", "name": "x" * 120, "dur": 1.0, "args": {}},
    ]
    rows = bench_model.kernel_table(events, steps=2, top=2)
    assert [r["grid"] for r in rows] == ["896x1x1", "128x1x1"]
    big, small = rows
    assert big["ms_per_step"] == pytest.approx(0.015) and big["calls_per_step"] == 0.5
    assert small["us_per_call"] == pytest.approx(5.0) and small["calls_per_step"] == 1.0
    assert small["kind"] == "cute_gemm mixed GEMM" and small["block"] == "512x1x1"
    assert len(bench_model.kernel_table(events, steps=1)[2]["kernel"]) == 90


def test_exposed_times_under_overlap():
    # A: 0-10; B starts early (PDL) at 4, ends at 13: exposed 3, lead -6; C inside B: exposed 0;
    # D after an idle gap of 2: exposed its duration and the gap, lead +2. Exposed times add up
    # to the span (0-20).
    def ev(name, ts, dur, cat="kernel"):
        return {"cat": cat, "name": name, "ts": ts, "dur": dur, "args": {"grid": [1, 1, 1]}}
    events = [ev("D_gemv", 15.0, 5.0), ev("A_gemm", 0.0, 10.0), ev("B_flash", 4.0, 9.0),
              ev("C_memcpy", 6.0, 1.0, cat="gpu_memcpy"), ev("aten::mm", 0.0, 50.0, cat="cpu_op")]
    got = [(e["name"], exposed, lead) for e, exposed, lead in bench_model.exposed_times(events)]
    assert got == [("A_gemm", 10.0, 0.0), ("B_flash", 3.0, -6.0), ("C_memcpy", 0.0, -7.0),
                   ("D_gemv", 7.0, 2.0)]
    kinds = bench_model.kind_table(events, steps=1)
    assert kinds["total"][1] * 1e3 == pytest.approx(20.0)  # exposed: the span
    assert kinds["total"][0] * 1e3 == pytest.approx(25.0)  # busy: the durations
    assert kinds["attention"][1] * 1e3 == pytest.approx(3.0)
    assert kinds["copies / memset"][2] == 1
    rows = bench_model.kernel_table(events, steps=1)
    assert [r["kernel"] for r in rows] == ["A_gemm", "D_gemv", "B_flash", "C_memcpy"]
    assert rows[2]["lead_us"] == -6.0 and rows[2]["exposed_us_per_call"] == 3.0


def test_repeat_period():
    keys = list("xyABCABCABCz")
    assert bench_model.repeat_period(keys, 2) == 3
    assert bench_model.repeat_period(keys, 3) == 3  # any phase of the layer
    assert bench_model.repeat_period(list("ABCDEFG"), 0) is None
    assert bench_model.repeat_period(list("AAAA"), 0) == 2  # never a period of 1
    assert bench_model.repeat_period(keys, 2, longest=2) is None


def test_step_timeline_of_the_middle_step():
    # 3 graph replays of a 2-layer step: embed, (gemm, norm) x 2, head; 1 us apart, each kernel
    # 2 us long and launched 1 us before the previous one ends (PDL), the last one after a gap.
    def ev(name, ts, grid):
        return {"cat": "kernel", "name": name, "ts": ts, "dur": 2.0,
                "args": {"grid": [grid, 1, 1], "block": [128, 1, 1]}}

    layer = [("mixed_decode_kernel", 128), ("triton_per_fused_norm", 1)]
    step = [("embed", 1)] + layer * 2 + [("gemv_head", 64)]
    events, t = [], 0.0
    for _ in range(3):
        for i, (name, grid) in enumerate(step):
            t += 1.0 if i else 10.0  # a gap between steps
            events.append(ev(name, t, grid))
    events.append({"cat": "cpu_op", "name": "aten::mm", "ts": 0.0, "dur": 99.0})
    rows = bench_model.step_timeline(events, steps=3)
    # The middle step starts at its first event; its middle is event 3; the names repeat with
    # period 2 there, so two layers are 4 events, clipped to the step's end (from event 2).
    assert [r["index"] for r in rows] == [2, 3, 4, 5]
    assert [r["kernel"] for r in rows] == ["triton_per_fused_norm", "mixed_decode_kernel",
                                           "triton_per_fused_norm", "gemv_head"]
    assert [r["start_us"] for r in rows] == [2.0, 3.0, 4.0, 5.0]
    assert all(r["lead_us"] == -1.0 and r["exposed_us"] == 1.0 for r in rows)
    assert rows[1]["kind"] == "cute_gemm mixed GEMM" and rows[1]["grid"] == "128x1x1"
    assert rows[0]["block"] == "128x1x1" and rows[0]["us"] == 2.0
    # Unequal steps (uncaptured calls): the whole profile (17 events) is one sequence, whose
    # shortest repeat is the 6-event step: 12 events, clipped to the end.
    rows = bench_model.step_timeline(events[:-2], steps=3)
    assert [r["index"] for r in rows] == list(range(5, 17))
    # No repeat: a window from the middle.
    odd = [ev(f"k{i}", float(i), 1) for i in range(50)]
    rows = bench_model.step_timeline(odd, steps=1, default_window=8)
    assert [r["index"] for r in rows] == list(range(25, 33))
    assert bench_model.step_timeline([], steps=2) == []


def test_write_profiles_files(tmp_path):
    # The three --profile files from rows as profile_rows makes them (one variant, batch 1).
    args = bench_model.parse_args(["--profile", "4"])
    tag = {"variant": "int4-fused", "mode": "compile", "batch": 1, "attention": "sdpa",
           "steps": "graph replays"}
    profiles = [dict(tag, kind="total", ms_per_step=3.0, exposed_ms_per_step=2.5,
                     kernels_per_step=40.0)]
    kernels = [dict(tag, kernel="mixed_decode_kernel", kind="cute_gemm mixed GEMM",
                    grid="128x1x1", block="512x1x1", calls_per_step=2.0, ms_per_step=0.02,
                    exposed_ms_per_step=0.015, us_per_call=10.0, exposed_us_per_call=7.5,
                    lead_us=-2.0)]
    timelines = [dict(tag, index=i, kernel=f"k{i}", kind="other", grid="1x1x1", block="32x1x1",
                      start_us=float(i), us=2.0, exposed_us=1.0, lead_us=-1.0) for i in range(3)]
    meta = {"gpu_name": "test GPU"}
    bench_model.write_profiles(str(tmp_path), "model_x", meta, args,
                               {"_profile": profiles, "_kernels": kernels, "_timeline": timelines})
    for suffix, count in (("_profile", 1), ("_kernels", 1), ("_timeline", 3)):
        data = json.load(open(tmp_path / f"model_x{suffix}.json"))
        assert len(data["results"]) == count, suffix
        assert (tmp_path / f"model_x{suffix}.md").read_text().count("| int4-fused |") == count
    timeline = (tmp_path / "model_x_timeline.md").read_text()
    assert "Two decoder layers" in timeline and "lead us" in timeline
    for f in tmp_path.iterdir():
        f.unlink()
    bench_model.write_profiles(str(tmp_path), "model_x", meta, args, {"_profile": [],
                                                                      "_kernels": []})
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("mode, manager", [("compile-pr", "persistent_reductions"),
                                           ("compile-decode", "decode_compilation"),
                                           ("compile-cdt", "decode_compilation")])
def test_compile_modes_compile_inside_their_block(tmp_path, monkeypatch, mode, manager):
    # compile-pr / compile-decode / compile-cdt: the rows' decode steps (where the compilations
    # happen) run inside cute_gemm.inductor.persistent_reductions() / decode_compilation()
    # (compile-cdt: with inductor's coordinate_descent_tuning on), and their ratios pair with the
    # 16-bit model of the same mode. (The compile itself is replaced by the eager
    # model: the CPU smoke run checks the code path, not inductor.)
    import contextlib

    import torch._inductor.config as inductor_config

    import cute_gemm
    entered, settings = [], []

    @contextlib.contextmanager
    def recording(*args, **kwargs):
        entered.append("enter")
        settings.append(kwargs)
        yield
        entered.append("exit")

    monkeypatch.setattr(cute_gemm.inductor, manager, recording)
    monkeypatch.setattr(bench_model, "compiled_next_token",
                        lambda model: functools.partial(bench_decode.greedy_next_token, model))
    calls, tuned = [], []
    real = bench_model.bench_decode.bench_variant

    def bench_variant(*args, **kwargs):
        calls.append(list(entered))
        tuned.append(inductor_config.coordinate_descent_tuning)
        return real(*args, **kwargs)

    monkeypatch.setattr(bench_model.bench_decode, "bench_variant", bench_variant)
    status = bench_model.main(["--cpu-smoke", "--variants", "bf16,int4-fused", "--modes",
                               "compile," + mode, "--no-plot", "--out", str(tmp_path)])
    assert status == 0
    rows = json.load(open(tmp_path / "model_cpu-smoke.json"))["results"]
    assert [(r["variant"], r["mode"]) for r in rows] == [
        ("bf16", "compile"), ("int4-fused", "compile"), ("bf16", mode), ("int4-fused", mode)]
    assert all(r["status"] == "ok" and r["speedup"] is not None for r in rows)
    # compile's two variants ran outside the block, the mode's two inside it.
    assert calls == [[], [], ["enter"], ["enter", "exit", "enter"]]
    assert entered == ["enter", "exit", "enter", "exit"]
    cdt = mode == "compile-cdt"
    assert tuned == [False, False, cdt, cdt]
    assert not inductor_config.coordinate_descent_tuning  # restored after the block
    assert bench_model.parse_args([]).modes == ["graph", "compile"]
    if manager == "decode_compilation":  # --no-batch-increments reaches the block
        assert settings == [{"batch_increments": True, "early_triggers": True,
                             "partials_into_reductions_max_m": 8, "split_argmax": True}] * 2
        settings.clear()
        assert bench_model.main(["--cpu-smoke", "--variants", "bf16", "--modes", mode,
                                 "--no-batch-increments", "--no-split-argmax", "--no-plot",
                                 "--out", str(tmp_path)]) == 0
        assert settings == [{"batch_increments": False, "early_triggers": True,
                             "partials_into_reductions_max_m": 8, "split_argmax": False}]
        meta = json.load(open(tmp_path / "model_cpu-smoke.json"))["meta"]
        assert meta["batch_increments"] is False and meta["split_argmax"] is False
        # the defaults of the options test_decode_compilation_options sets
        assert meta["early_triggers"] is True
        assert meta["partials_into_reductions_max_m"] == 8
        assert meta["realize_reads"] == cute_gemm.inductor.DEFAULT_REALIZE_READS


@pytest.mark.parametrize("steps,repeats,profiled", [(32, 5, 8), (32, 5, 160), (4, 2, 3), (8, 1, 50),
                                                    (1, 1, 1)])
def test_profiled_steps_sit_in_the_timed_runs(steps, repeats, profiled):
    # Positions past the prompt: the timed runs take [2 + steps, 2 + steps * (repeats + 1)) (after
    # the capture's two warm-up steps and the warm run); the profiled steps take
    # [2 + warm, 2 + warm + profiled) in a cache of `total` + 2 positions past the prompt.
    import bench_decode
    warm, total = bench_decode.profile_position(steps, repeats, profiled)
    timed_total = bench_decode.timed_steps(steps, repeats)
    t0, t1 = 2 + steps, 2 + steps * (repeats + 1)
    p0, p1 = 2 + warm, 2 + warm + profiled
    assert total >= timed_total and p1 <= total + 2
    if profiled <= steps * repeats:
        assert total == timed_total  # the timed run's cache length, so attention's splits
        assert t0 <= p0 and p1 <= t1
        assert abs((p0 + p1) - (t0 + t1)) <= 1  # centred
    else:
        assert p0 <= t0 and p1 >= t1


@pytest.fixture
def decode_settings(monkeypatch):
    """The keyword arguments of every cute_gemm.inductor.decode_compilation call, in order."""
    import cute_gemm
    seen = []
    real = cute_gemm.inductor.decode_compilation

    def recording(**settings):
        seen.append(settings)
        return real(**settings)

    monkeypatch.setattr(cute_gemm.inductor, "decode_compilation", recording)
    return seen


def test_decode_compilation_options(tmp_path, decode_settings):
    # --no-early-triggers, --partials-into-reductions-max-m and --realize-reads pass
    # decode_compilation(early_triggers=False, partials_into_reductions_max_m=, realize_reads=) to
    # the compiled modes (the real block: it must accept them) and are recorded in the results.
    # Their defaults (early triggers on, the library's max M, no realize_reads argument so that
    # decode_compilation's own applies) are test_compile_modes_compile_inside_their_block's.
    # One run for the three: each compiles the model on the CPU.
    import cute_gemm
    assert bench_model.parse_args([]).early_triggers
    assert not bench_model.parse_args(["--no-early-triggers"]).early_triggers
    assert bench_model.parse_args([]).partials_into_reductions_max_m == \
        cute_gemm.inductor.DEFAULT_PARTIALS_INTO_REDUCTIONS_MAX_M
    for text, value in (("0", 0), ("16", 16), ("none", None)):
        assert bench_model.parse_args(["--partials-into-reductions-max-m", text]) \
            .partials_into_reductions_max_m == value
    for bad in ("-1", "x", "1.5"):
        with pytest.raises(SystemExit):
            bench_model.parse_args(["--partials-into-reductions-max-m", bad])
    assert bench_model.parse_args([]).realize_reads is None
    assert bench_model.parse_args(["--realize-reads", "4"]).realize_reads == 4
    seen = decode_settings
    status = bench_model.main(["--cpu-smoke", "--variants", "bf16", "--modes", "compile-decode",
                               "--no-plot", "--out", str(tmp_path), "--no-early-triggers",
                               "--partials-into-reductions-max-m", "none",
                               "--realize-reads", "4"])
    assert status == 0
    meta = json.load(open(tmp_path / "model_cpu-smoke.json"))["meta"]
    assert meta["early_triggers"] is False
    assert meta["partials_into_reductions_max_m"] is None
    assert meta["realize_reads"] == 4
    assert seen and all(s["early_triggers"] is False and s["partials_into_reductions_max_m"] is None
                        and s["realize_reads"] == 4 for s in seen)


def test_inductor_config_option(tmp_path, capsys):
    # --inductor-config KEY=VALUE parses VALUE as a Python literal and sets inductor's dotted KEY
    # for the run; a KEY inductor lacks, a VALUE that is no literal and a missing '=' are refused
    # by name.
    import torch._inductor.config as inductor_config
    args = bench_model.parse_args(["--inductor-config", "triton.force_cooperative_reductions=True",
                                   "--inductor-config", "realize_reads_threshold = 6"])
    assert args.inductor_config == {"triton.force_cooperative_reductions": True,
                                    "realize_reads_threshold": 6}
    assert bench_model.parse_args([]).inductor_config == {}
    with inductor_config.patch({"triton.force_cooperative_reductions": False,
                                "realize_reads_threshold": 4}):
        bench_model.set_inductor_settings(args.inductor_config)
        assert inductor_config.triton.force_cooperative_reductions is True
        assert inductor_config.realize_reads_threshold == 6
    assert inductor_config.realize_reads_threshold != 6
    # The run records what it set.
    with inductor_config.patch({"realize_reads_threshold": 4}):
        status = bench_model.main(["--cpu-smoke", "--variants", "bf16", "--modes", "graph",
                                   "--no-plot", "--out", str(tmp_path), "--inductor-config",
                                   "realize_reads_threshold=6"])
        assert status == 0
    meta = json.load(open(tmp_path / "model_cpu-smoke.json"))["meta"]
    assert meta["inductor_config"] == {"realize_reads_threshold": "6"}
    for text, message in (("triton.no_such_setting=1", "no inductor setting"),
                          ("realize_reads_threshold=five", "must be a Python literal"),
                          ("realize_reads_threshold", "expected KEY=VALUE")):
        with pytest.raises(SystemExit):
            bench_model.parse_args(["--inductor-config", text])
        assert message in capsys.readouterr().err
