"""The main job, `python -m cute_gemm` (cute_gemm/demo.py), on its CPU fallback: the tables it
prints, the accuracy numbers it reports (checked against the weights' own quantization error,
computed here independently), its failure path, its option checks and the layout subcommand.

The GPU flow (CUDA-graph timing) is exercised by test_main_job_gpu below.
"""

import os
import re
import subprocess
import sys

import pytest
import torch

import cute_gemm
from cute_gemm import __main__ as entry
from cute_gemm import demo

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LAYER_NAMES = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
NUM = r"([0-9.]+(?:e[-+][0-9]+)?)"


@pytest.fixture
def no_gpu(monkeypatch):
    """Pretend there is no GPU, so the job takes its CPU fallback even on a GPU machine."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)


def _timing_rows(text, batches):
    """{layer: {batch: (fp16_us, quant_us, speedup)}} parsed from the printed timing table."""
    rows = {}
    cell = rf"\|\s+{NUM}\s+{NUM}\s+{NUM}x\s*"
    pattern = re.compile(r"^(\S+)\s+(\S+(?: layer\(s\))?)\s*" + cell * len(batches) + "$")
    for line in text.splitlines():
        m = pattern.match(line)
        if m:
            vals = [float(v) for v in m.groups()[2:]]
            rows[m.group(1)] = {b: tuple(vals[3 * i:3 * i + 3]) for i, b in enumerate(batches)}
    return rows


def _accuracy_rows(text):
    """{layer: (shape, err_fp16, err_dequant)} parsed from the printed accuracy table."""
    rows = {}
    for line in text.splitlines():
        m = re.match(rf"^(\S+)\s+(\d+x\d+)\s+{NUM}\s+{NUM}$", line)
        if m:
            rows[m.group(1)] = (m.group(2), float(m.group(3)), float(m.group(4)))
    return rows


def _weight_rel_err(w, bits, group_size, symmetric):
    qw = cute_gemm.quantize(w, bits=bits, group_size=group_size, symmetric=symmetric)
    return ((qw.dequantize().float() - w.float()).norm() / w.float().norm()).item()


def test_default_cpu_fallback_int4(no_gpu, capsys, tmp_path):
    plot = tmp_path / "speedup.png"
    batches = [1, 5]
    status = demo.main(["--batch", "1,5", "--layers", "2", "--replays", "1", "--plot", str(plot)])
    out = capsys.readouterr().out
    assert status == 0
    assert "no CUDA GPU found" in out and "not of the GPU kernel" in out
    assert "14 of 14 nn.Linear layers converted to INT4 (group 128, symmetric)" in out

    # Accuracy: every layer of the small Llama shape, both columns.
    acc = _accuracy_rows(out)
    dims = demo.CPU_SMALL
    shapes = {name: f"{k}x{n}" for name, k, n in demo.decoder_shapes(**dims)}
    assert {name: row[0] for name, row in acc.items()} == shapes
    # The output error against the fp16 weights tracks the weights' own relative quantization
    # error (random activations see every direction alike); recompute the latter from the same
    # weights (the stack draws them from a fixed seed) and compare, layer by layer.
    ref = demo.LinearStack(demo.decoder_shapes(**dims), 2, True, torch.float16, "cpu")
    for name, (_, err_fp16, err_deq) in acc.items():
        w_err = max(_weight_rel_err(layer[name].weight, 4, 128, True) for layer in ref.layers)
        assert 0.7 * w_err < err_fp16 < 1.3 * w_err, (name, err_fp16, w_err)
        assert 0.05 < err_fp16 < 0.2  # INT4 g128 of Gaussian weights: ~0.12
        assert err_deq < 2e-3  # rounding only: fp16 output of an fp32 product
    stack = re.search(rf"^stack\s+-\s+{NUM}", out, re.M)
    assert stack and 0 < float(stack.group(1)) < 0.2
    # At hidden 256 the random blocks add ~1% to the residual stream (see demo's docstring).
    growth = re.search(rf"stack's output norm is {NUM}x its input's", out)
    assert growth and 0.95 < float(growth.group(1)) < 1.1

    # Timing: one row per layer and the stack, every batch, speedup = fp16 time / INT4 time.
    timing = _timing_rows(out, batches)
    assert list(timing) == LAYER_NAMES + ["stack"]
    for layer, by_batch in timing.items():
        for b, (fp16_us, quant_us, speedup) in by_batch.items():
            assert fp16_us > 0 and quant_us > 0
            assert speedup == pytest.approx(fp16_us / quant_us, rel=0.05, abs=0.01), (layer, b)
    assert "CPU reference path, median of 1 calls" in out

    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"Plot: {plot}" in out


def test_custom_shapes_int8_per_channel_asymmetric(no_gpu, capsys):
    args = demo.parse_args(["--bits", "8", "--group-size", "-1", "--asymmetric", "--shapes",
                            "256x64,96x136", "--batch", "3", "--layers", "1", "--replays", "1",
                            "--dtype", "bf16"])
    res = demo.run(args)
    out = capsys.readouterr().out
    assert res.ok and res.label == "int8-pc-asym" and res.layers == 1
    assert "converted to INT8 (per-channel, asymmetric)" in out
    acc = _accuracy_rows(out)
    assert {name: row[0] for name, row in acc.items()} == {"256x64": "256x64",
                                                          "96x136": "96x136"}
    ref = demo.LinearStack([("256x64", 256, 64), ("96x136", 96, 136)], 1, False,
                           torch.bfloat16, "cpu")
    for name, (_, err_fp16, err_deq) in acc.items():
        w_err = _weight_rel_err(ref.layers[0][name].weight, 8, -1, False)
        # INT8: the weight error (~0.007) is only a few times the bf16 output rounding
        # (~0.002, err_deq), which adds to it in quadrature: hence the additive slack.
        assert 0.8 * w_err < err_fp16 < 1.3 * w_err + 3e-3, (name, err_fp16, w_err)
        assert err_fp16 < 0.02
        assert err_deq < 1e-2  # bf16 output rounding
    timing = _timing_rows(out, [3])
    assert list(timing) == ["256x64", "96x136", "stack"]
    assert [r["layer"] for r in res.timing] == ["256x64", "96x136", "stack"]
    assert all(r["batch"] == 3 and r["speedup"] > 0 for r in res.timing)


def test_wrong_kernel_result_fails_the_job(no_gpu, capsys, monkeypatch):
    """The check against the dequantized weights can fail: a 10% perturbation of the weight it
    compares with must make the job report FAILED and exit 1."""
    real = demo._dequantized_weight
    monkeypatch.setattr(demo, "_dequantized_weight", lambda m: real(m) * 1.1)
    status = demo.main(["--shapes", "128x64", "--batch", "1", "--layers", "1",
                        "--replays", "1"])
    out = capsys.readouterr().out
    assert status == 1
    assert "FAILED: the quantized layers 128x64 differ" in out


@pytest.mark.parametrize("argv, message", [
    (["--shapes", "100x64"], "--shapes: K must be a multiple of --group-size 128; got 100x64"),
    (["--shapes", "64x64", "--group-size", "-1", "--bits", "8", "--shapes", "48x64"],
     "--shapes: K must be a multiple of 32 for per-channel quantization (--group-size -1); "
     "got 48x64"),
    (["--shapes", "128x60"], "--shapes: N must be a multiple of 8"),
    (["--shapes", "128by64"], "expected a comma-separated list of KxN weight shapes"),
    (["--shapes", "0x64"], "K and N must be positive; got '0x64'"),
    (["--batch", "1,0"], "expected a comma-separated list of positive integers"),
    (["--batch", "one"], "expected a comma-separated list of positive integers"),
    (["--layers", "0"], "--layers: expected a positive integer; got '0'"),
    (["--bits", "3"], "--bits: invalid choice: 3"),
    (["--group-size", "16"], "--group-size: invalid choice: 16"),
    (["--symmetric", "--asymmetric"], "not allowed with argument --symmetric"),
])
def test_bad_options_are_refused(argv, message, capsys):
    with pytest.raises(SystemExit) as exc:
        demo.parse_args(argv)
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


def test_old_out_option_points_to_layout_subcommand(capsys):
    assert entry.main(["--out", "pictures"]) == 2
    assert "python -m cute_gemm layout --out DIR" in capsys.readouterr().err


def test_layout_subcommand_writes_pictures(tmp_path, capsys):
    assert entry.main(["layout", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    svgs = sorted(p.name for p in tmp_path.glob("*.svg"))
    assert "layout_2x3_col.svg" in svgs and len(svgs) > 5
    for name in svgs[:3]:
        assert (tmp_path / name).read_text().lstrip().startswith("<")
        assert f"wrote {tmp_path / name}" in out


def test_python_m_cute_gemm_runs_with_no_arguments():
    """The job as CI's main script runs it, with no GPU visible: defaults, exit status 0."""
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
    proc = subprocess.run([sys.executable, "-m", "cute_gemm"], cwd=REPO_ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "no CUDA GPU found" in proc.stdout
    timing = _timing_rows(proc.stdout, [1, 16, 256])
    assert list(timing) == LAYER_NAMES + ["stack"]
    assert "quantize_model" in proc.stderr  # the progress bar


@pytest.mark.gpu
def test_main_job_gpu(capsys):
    status = demo.main(["--layers", "2", "--batch", "1,16", "--replays", "3"])
    out = capsys.readouterr().out
    assert status == 0
    assert "GPU: " in out and "CUDA-graph replays" in out
    acc = _accuracy_rows(out)
    assert list(acc) == LAYER_NAMES
    assert all(0.05 < e < 0.2 and d < 2e-3 for _, e, d in acc.values())
    timing = _timing_rows(out, [1, 16])
    assert list(timing) == LAYER_NAMES + ["stack"]
    # Decode (M=1) on weights streamed from DRAM: INT4 must beat fp16 on the big layers.
    for layer in ("gate_proj", "up_proj", "down_proj", "stack"):
        assert timing[layer][1][2] > 1.2, (layer, timing[layer])
