"""benchmarks/bench_mixed_gemm.py's timing rounds on the CPU (the timer replaced by a fake whose
results depend on when each kernel is timed): the kernels of a case are interleaved, forward then
backward, the median of the rounds is reported with its spread, and a kernel that fails while
timed is marked as the benchmark marks it."""

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "benchmarks"))

import bench_mixed_gemm  # noqa: E402


class Cand:
    def __init__(self, key):
        self.key = key


def make_case(keys):
    return [({"kernel": k, "status": "ok", "check": "ok", "us": None, "us_rounds": None,
              "calls_per_graph": None}, Cand(k), (lambda k: lambda i: k)(k)) for k in keys]


def test_rounds_interleave_and_take_the_median(monkeypatch):
    order = []
    # A clock that drifts: the n-th measurement of the run takes 10 + n us, whichever kernel.
    def fake_time_graph(fn, replays=10):
        order.append(fn(0))
        return 10.0 + len(order), 7
    monkeypatch.setattr(bench_mixed_gemm.common, "time_graph", fake_time_graph)
    case = make_case(["fp16", "ours_int4", "ours_int8"])
    bench_mixed_gemm.time_rounds(case, 3, replays=5)
    assert order == ["fp16", "ours_int4", "ours_int8", "ours_int8", "ours_int4", "fp16",
                     "fp16", "ours_int4", "ours_int8"]
    rows = {row["kernel"]: row for row, _, _ in case}
    assert rows["fp16"]["us_rounds"] == [11.0, 16.0, 17.0]
    assert rows["fp16"]["us"] == 16.0 and rows["ours_int8"]["us"] == 14.0
    # Interleaving keeps a drift from favouring a kernel: the medians are close, unlike the
    # rounds taken one kernel after another (11-13 against 17-19).
    assert max(r["us"] for r in rows.values()) - min(r["us"] for r in rows.values()) <= 2.0
    row = bench_mixed_gemm.derive(dict(rows["fp16"], m=4, n=8, k=16, weight_bytes=256),
                                  16.0, 1000.0)
    assert row["rounds_spread"] == pytest.approx((17.0 - 11.0) / 16.0)
    assert row["speedup_vs_fp16"] == 1.0


def test_one_round_has_no_spread(monkeypatch):
    monkeypatch.setattr(bench_mixed_gemm.common, "time_graph", lambda fn, replays=10: (5.0, 3))
    case = make_case(["fp16"])
    bench_mixed_gemm.time_rounds(case, 1, replays=5)
    row = case[0][0]
    assert row["us"] == 5.0 and row["us_rounds"] == [5.0]
    row = bench_mixed_gemm.derive(dict(row, m=1, n=8, k=16, weight_bytes=256), 5.0, 1000.0)
    assert row["rounds_spread"] is None


def test_a_kernel_that_fails_while_timed_is_marked(monkeypatch):
    def fake_time_graph(fn, replays=10):
        if fn(0) != "fp16":
            raise RuntimeError("launch failed")
        return 4.0, 2
    monkeypatch.setattr(bench_mixed_gemm.common, "time_graph", fake_time_graph)
    case = make_case(["fp16", "ours_int4", "torch_int4"])
    bench_mixed_gemm.time_rounds(case, 2, replays=5)
    rows = {row["kernel"]: row for row, _, _ in case}
    assert rows["fp16"]["us"] == 4.0
    assert rows["ours_int4"]["us"] is None and rows["ours_int4"]["check"] == "ERROR"
    assert rows["ours_int4"]["status"].startswith("ERROR (RuntimeError: launch failed")
    assert rows["torch_int4"]["us"] is None and rows["torch_int4"]["status"].startswith("n/a")
    assert rows["torch_int4"]["check"] == "ok"  # a baseline's error is reported, not judged


def test_rounds_argument():
    assert bench_mixed_gemm.parse_args([]).rounds == 1
    assert bench_mixed_gemm.parse_args(["--rounds", "3"]).rounds == 3


def test_git_info_states_the_commit_given_or_git_head(monkeypatch, tmp_path):
    # The results' source commit: CUTE_GEMM_GIT_COMMIT where a copied tree's .git cannot say it,
    # else this checkout's HEAD; outside any checkout, nothing.
    import subprocess

    import common

    monkeypatch.setenv("CUTE_GEMM_GIT_COMMIT", "abc1234")
    assert common.git_info() == {"git_commit": "abc1234", "git_commit_from": "CUTE_GEMM_GIT_COMMIT"}
    monkeypatch.delenv("CUTE_GEMM_GIT_COMMIT")
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=common.REPO_ROOT,
                          capture_output=True, text=True)
    if head.returncode != 0:
        pytest.skip("not a git checkout")
    info = common.git_info()
    assert info["git_commit"] == head.stdout.strip() and isinstance(info["git_dirty"], bool)
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))
    monkeypatch.setattr(common, "REPO_ROOT", str(tmp_path))
    assert common.git_info() == {}
