"""CUDA-graph timing shared by the main job (cute_gemm.demo) and benchmarks/.

``time_graph(fn)`` captures ``fn(0), fn(1), ...`` back to back in one CUDA graph (as many calls as
take about ``target_ms``), replays it ``replays`` times with CUDA events around each replay, and
returns the median time of one call in microseconds with the number of calls per graph. Graph
replays leave out Python and launch overhead, which would otherwise dominate kernels of a few
microseconds. ``fn(i)`` gets the call's index so it can rotate through several copies of its
operands (``operands[i % len(operands)]``) that together exceed the L2 cache, so each call reads
from DRAM as a real layer would.
"""

import statistics

import torch

__all__ = ["time_graph"]


def _event_ms(fn, reps):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for i in range(reps):
        fn(i)
    end.record()
    end.synchronize()
    return start.elapsed_time(end)


def time_graph(fn, target_ms=20.0, max_calls=500, replays=10, warmup=3):
    """Median microseconds of one ``fn(i)`` call from CUDA-graph replays, and calls per graph."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm up (lazy init, autotuning, allocator) off the capture
        for i in range(warmup):
            fn(i)
        # Rough per-call estimate from eager launches, to size the graph.
        est_ms = _event_ms(fn, 3) / 3
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    calls = int(max(1, min(max_calls, target_ms / max(est_ms, 1e-4))))

    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for i in range(calls):
            fn(i)
    graph.replay()  # warm replay
    torch.cuda.synchronize()

    times = []
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(replays):
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3 / calls)
    del graph
    return statistics.median(times), calls
