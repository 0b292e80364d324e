#!/usr/bin/env python3
"""A small program that launches every cute_gemm kernel family, for compute-sanitizer.

    PYTORCH_NO_CUDA_MEMORY_CACHING=1 compute-sanitizer --tool memcheck --error-exitcode 1 \\
        python3 scripts/sanitizer_probe.py [--quick] [--only FAMILY,...] [--list]

Run it with PYTORCH_NO_CUDA_MEMORY_CACHING=1 under the sanitizer (scripts/gpu_check.sh does; the
script also sets it itself when it is unset, before torch is imported): with torch's caching
allocator every tensor lives inside a larger pooled cudaMalloc block, so an out-of-bounds access
that stays inside the pool is invisible to memcheck. Without caching each tensor is its own
allocation.

Families (each launch is checked against an fp64 matmul of the dequantized weight, computed on
the CPU, so the only kernels on the GPU are cute_gemm's own and torch's copies):

    decode       the decode kernel (M <= 8): default CTA shapes and scheduled k slices of 1, 2,
                 4 warps, fine groups (group < the packed k block), INT4/INT8
    mma          the mma.sync kernel: scheduled at M 9-64 (16-, 32- and 64-row tiles; INT4
                 M 9-16 on long K slices by default)
    wgmma        the wgmma kernel without a producer warpgroup (Hopper): INT4's 16-row tiles
                 (exact scales at g128, rounded weights at g32-64, either by schedule), 32-row
                 tiles (rounded weights, and exact scales by schedule), INT4's 64-row tiles;
                 INT4's 16- and 32-row tiles TMA-filled, the others by cp.async
    wgmma_ws     the warp-specialized TMA wgmma kernel (Hopper): 128-, 160-, 192- and 256-row
                 tiles, INT8's 64-row tiles, a raster order of 3 M tiles
    splitk       scheduled k splits > 1: the decode and mma.sync kernels and both wgmma kernels,
                 the splits' partial sums added by the reduce kernel from the workspace
    gated        activation="silu_mul" (N = gate and up halves, 16-column multiples): the decode
                 kernel's gated instantiations (one-warp and shared k slices, gating in
                 registers; split, through the reduce kernel), mma.sync's 16-row tile and wgmma's
                 exact 16-row tile gating in registers, mma.sync, both wgmma kernels and the
                 dense path through the fp32 workspace and the gating reduce kernel
    dense        the dense path (schedule kernel=dense): the dequantize kernel, then
                 at::linear (cuBLAS; scripts/gpu_check.sh's racecheck run leaves cuBLAS's
                 kernels out, see there)
    gemm         cute_gemm.gemm in each of its configurations (its config argument), fp16/bf16;
                 the Hopper kernel's also split-K

Each mixed launch passes its schedule (gpu_sweep.schedule_for of its force string) to
cute_gemm.mixed_gemm and first checks that the plan (cute_gemm.mixed_plan) is the one the family
wants, so a change in the planner cannot silently drop a kernel from the probe
(tests/test_gpu_scripts.py checks those plans on the built-in H100 spec without a GPU). The wgmma
families are skipped (and say so) where the build or device has no wgmma kernels. --quick runs
one launch per kernel instance kind (the whole probe took 11 s under racecheck on an H100, so
scripts/gpu_check.sh runs it whole under every tool). Prints one line per launch (family, shape,
configuration, plan, max error); exits 1 if any launch fails or mismatches, 2 without a GPU.
"""

import argparse
import os
import sys
import time
import traceback

if __name__ == "__main__":  # not on import (tests import this module): it is process-wide
    os.environ.setdefault("PYTORCH_NO_CUDA_MEMORY_CACHING", "1")

_HERE = os.path.dirname(os.path.abspath(__file__))
for _path in (_HERE, os.path.dirname(_HERE)):  # gpu_sweep; cute_gemm from a source checkout
    if _path not in sys.path:
        sys.path.insert(0, _path)

import torch  # noqa: E402

import cute_gemm  # noqa: E402
# The accuracy criterion (tests/helpers.py::assert_accurate), the schedules and the plan helpers.
from gpu_sweep import (  # noqa: E402
    check_accurate, exact_weight, plan_label, schedule_for)

FAMILIES = ["decode", "mma", "wgmma", "wgmma_ws", "splitk", "gated", "dense", "gemm",
            "attention"]
DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}


def _mixed(family, m, n, k, bits, group, sym, dtype, bias=False, force=None, quick=False,
           activation=None, **expect):
    """A mixed_gemm launch: force is a gpu_sweep.FORCE_KINDS string ("+"-joined combinations
    allowed), run as the schedule gpu_sweep.schedule_for makes of it; expect holds plan fields
    the launch must have (kernel, tile_m, warp_groups, splits, col_warps, k_slices, producer;
    dense=True for the dense path). The wgmma families say which wgmma kernel runs: no producer
    warpgroup (cp.async, "wgmma") or a TMA producer (warp-specialized, "wgmma_ws")."""
    if family in ("wgmma", "wgmma_ws"):
        expect.setdefault("producer", family == "wgmma_ws")
    return dict(op="mixed", family=family, m=m, n=n, k=k, bits=bits, group=group, sym=sym,
                dtype=dtype, bias=bias, force=force, quick=quick, activation=activation,
                expect=expect)


def launches():
    """Every launch of the probe; those with quick=True make up --quick."""
    L = []
    # decode (M <= 8, the default kernel there)
    L += [
        _mixed("decode", 1, 136, 640, 4, 128, True, "fp16", quick=True, kernel="decode"),
        _mixed("decode", 5, 264, 1408, 4, 32, False, "bf16", True, "decode:4:2", quick=True,
               kernel="decode", col_warps=2),
        _mixed("decode", 8, 136, 640, 8, -1, True, "bf16", True, "decode:8:4", quick=True,
               kernel="decode", col_warps=4),
        _mixed("decode", 3, 8, 128, 8, 64, False, "fp16", False, "decode:1:1", kernel="decode",
               col_warps=1),
        _mixed("decode", 2, 136, 1408, 8, 32, True, "fp16", True, kernel="decode"),
        _mixed("decode", 7, 392, 2112, 4, 64, False, "fp16", False, "decode:12:4",
               kernel="decode", col_warps=4),
    ]
    # mma.sync (by schedule; 16-, 32- and 64-row tiles)
    L += [
        _mixed("mma", 16, 136, 640, 4, 128, True, "fp16", False, "mma", quick=True, kernel="mma",
               tile_m=16),
        _mixed("mma", 9, 264, 1408, 8, 32, False, "bf16", True, "mma", kernel="mma", tile_m=16),
        _mixed("mma", 12, 136, 640, 4, 32, False, "bf16", True, "mma", kernel="mma", tile_m=16),
        _mixed("mma", 16, 264, 1408, 4, 128, True, "fp16", False, "mma-slices", quick=True,
               kernel="mma", tile_m=16, k_slices=2),
        _mixed("mma", 11, 136, 640, 4, 64, False, "bf16", True, "mma-slices+mma-splits:2",
               kernel="mma", tile_m=16, k_slices=2, splits=2),
        _mixed("mma", 20, 136, 640, 4, 32, False, "bf16", False, "mma", quick=True,
               kernel="mma", tile_m=32),
        _mixed("mma", 40, 264, 640, 8, -1, True, "fp16", True, "mma", quick=True, kernel="mma",
               tile_m=64),
        _mixed("mma", 64, 136, 1408, 8, 64, False, "bf16", False, "mma", kernel="mma",
               tile_m=64),
    ]
    # wgmma without a producer (INT4's 16-row tiles in 128 and 64 columns, rounded and exact
    # (paired k blocks at g128, turns per group at g32), 32-row tiles rounded and exact (INT8's
    # unforced M = 9 case takes exact scales by default: mixed_plan's default_wgmma_scales), INT4's
    # 64-row tiles; INT4's 16- and 32-row tiles TMA-filled, INT8's and the 64-row by cp.async)
    L += [
        _mixed("wgmma", 16, 136, 640, 4, 128, True, "fp16", quick=True, kernel="wgmma",
               tile_m=16, warp_groups=1),
        _mixed("wgmma", 11, 264, 1408, 4, 32, False, "bf16", True, "wgmma:16", quick=True,
               kernel="wgmma", tile_m=16),
        _mixed("wgmma", 16, 200, 1408, 4, 128, True, "bf16", True, "wgmma:16:n64+splits:3",
               quick=True, kernel="wgmma", tile_m=16, tile_n=64, splits=3,
               reduce_in_cluster=True),
        _mixed("wgmma", 7, 136, 640, 4, 64, False, "fp16", False, "wgmma:16:n64", kernel="wgmma",
               tile_m=16, tile_n=64),
        _mixed("wgmma", 13, 264, 1408, 4, 128, False, "bf16", True, "wgmma:16:exact", quick=True,
               kernel="wgmma", tile_m=16, exact_scales=True),
        _mixed("wgmma", 16, 136, 1408, 4, 32, True, "fp16", False, "wgmma:16:exact",
               kernel="wgmma", tile_m=16, exact_scales=True),
        _mixed("wgmma", 9, 136, 640, 8, -1, True, "fp16", True, quick=True, kernel="wgmma",
               tile_m=32, exact_scales=True),  # INT8's default where its grid fills better
        _mixed("wgmma", 27, 136, 1408, 4, 64, False, "fp16", True, "wgmma:32:exact", quick=True,
               kernel="wgmma", tile_m=32, exact_scales=True),
        _mixed("wgmma", 20, 264, 640, 8, 128, False, "bf16", False, "wgmma:32:exact",
               kernel="wgmma", tile_m=32, exact_scales=True),
        _mixed("wgmma", 17, 136, 640, 4, 128, True, "fp16", quick=True, kernel="wgmma",
               tile_m=32, warp_groups=1),
        _mixed("wgmma", 33, 264, 1408, 4, 32, False, "bf16", True, quick=True, kernel="wgmma",
               tile_m=64, warp_groups=1),
        _mixed("wgmma", 20, 136, 640, 8, 64, False, "bf16", True, "wgmma:32", quick=True,
               kernel="wgmma", tile_m=32, warp_groups=1),
        _mixed("wgmma", 5, 136, 640, 4, -1, False, "fp16", False, "wgmma:32", kernel="wgmma",
               tile_m=32),
        _mixed("wgmma", 64, 136, 640, 4, 64, True, "fp16", False, "wgmma:64", kernel="wgmma",
               tile_m=64, warp_groups=1),
        # the 64-row tile's activation box fitted to M (48 rows at M = 41); two M tiles at
        # M = 70, the second's whole box with its rows past M zero-filled
        _mixed("wgmma", 41, 264, 640, 4, 128, True, "fp16", True, "wgmma:64", kernel="wgmma",
               tile_m=64, warp_groups=1),
        _mixed("wgmma", 70, 136, 640, 4, 128, False, "bf16", False, "wgmma:64", kernel="wgmma",
               tile_m=64, warp_groups=1),
        # its cp.async form: forced, and the planner's at M <= 40 with 32 k blocks a split (K =
        # 4096 unsplit)
        _mixed("wgmma", 57, 136, 640, 4, 128, True, "fp16", True, "wgmma:64:cp_async",
               kernel="wgmma", tile_m=64, tma_loads=False),
        _mixed("wgmma", 37, 136, 4096, 4, 128, False, "bf16", False, "splits:1", kernel="wgmma",
               tile_m=64, tma_loads=False),
    ]
    # wgmma, warp-specialized TMA (128-, 160-, 192- and 256-row tiles; INT8's 64-row tiles)
    L += [
        _mixed("wgmma_ws", 50, 136, 640, 8, 128, True, "fp16", True, "wgmma:64", quick=True,
               kernel="wgmma", tile_m=64),
        _mixed("wgmma_ws", 100, 136, 640, 4, 128, False, "fp16", True, quick=True,
               kernel="wgmma", tile_m=128, warp_groups=2),
        _mixed("wgmma_ws", 200, 264, 640, 4, 32, True, "bf16", False, "wgmma:256", quick=True,
               kernel="wgmma", tile_m=256, warp_groups=2),
        _mixed("wgmma_ws", 70, 136, 1408, 8, -1, False, "bf16", False, "wgmma:128",
               quick=True, kernel="wgmma", tile_m=128, warp_groups=2),
        _mixed("wgmma_ws", 130, 136, 640, 8, 32, True, "fp16", True, "wgmma:256", quick=True,
               kernel="wgmma", tile_m=256, warp_groups=2),
        _mixed("wgmma_ws", 300, 136, 640, 4, 64, False, "bf16", True, "wgmma:256",
               kernel="wgmma", tile_m=256, warp_groups=2),
        # one-group k blocks with zero points (the zero constants once per block)
        _mixed("wgmma_ws", 290, 136, 1408, 4, 128, False, "fp16", True, "wgmma:256",
               kernel="wgmma", tile_m=256, warp_groups=2),
        _mixed("wgmma_ws", 200, 136, 640, 4, 128, True, "fp16", False, "wgmma:192", quick=True,
               kernel="wgmma", tile_m=192, warp_groups=2),
        # tiles in raster groups of 3 M tiles (6 M tiles x 12 N tiles, the last N tile cut)
        _mixed("wgmma_ws", 700, 1416, 640, 4, 128, True, "fp16", True, "wgmma:128+raster:3",
               quick=True, kernel="wgmma", tile_m=128, warp_groups=2, raster_m=3),
        _mixed("wgmma_ws", 450, 264, 1408, 8, -1, False, "bf16", True, "wgmma:192",
               kernel="wgmma", tile_m=192, warp_groups=2),
        _mixed("wgmma_ws", 170, 136, 640, 4, 64, False, "bf16", True, "wgmma:160", quick=True,
               kernel="wgmma", tile_m=160, warp_groups=2),
        # stream-K past the full waves: 72 tiles, 2 waves of 28 and 16 tiles shared by 28 CTAs;
        # 16 tiles, a wave of 10 and 6 shared by 10
        _mixed("wgmma_ws", 700, 1416, 1152, 4, 128, True, "fp16", True, "wgmma:128+sk:128:25",
               quick=True, kernel="wgmma", tile_m=128, warp_groups=2, stream_k_ctas=28),
        _mixed("wgmma_ws", 450, 1000, 1408, 8, -1, False, "bf16", False, "wgmma:256+sk:256:15",
               quick=True, kernel="wgmma", tile_m=256, warp_groups=2, stream_k_ctas=10),
    ]
    # split-K: scheduled splits, their partial sums added by the reduce kernel or, on the
    # cp.async wgmma kernel, in a cluster of the splits
    L += [
        _mixed("splitk", 1, 136, 4224, 4, 64, True, "fp16", True, "splits:3", quick=True,
               kernel="decode", splits=3),
        _mixed("splitk", 6, 136, 1408, 8, 32, False, "bf16", False, "splits:5",
               kernel="decode", splits=5),
        _mixed("splitk", 16, 136, 1408, 4, 128, False, "fp16", True, "mma-splits:3", quick=True,
               kernel="mma", splits=3),
        _mixed("splitk", 12, 136, 1408, 4, 64, True, "bf16", False,
               "wgmma:16+splits:3+tile_n:128", kernel="wgmma", tile_m=16, tile_n=128, splits=3,
               reduce_in_cluster=False),
        _mixed("splitk", 12, 136, 1408, 4, 64, True, "bf16", False, "wgmma:16:n64+splits:3",
               quick=True, kernel="wgmma", tile_m=16, tile_n=64, splits=3,
               reduce_in_cluster=True),
        _mixed("splitk", 12, 136, 1408, 4, 64, True, "bf16", False,
               "wgmma:16:n64+splits:3+reduce:kernel", quick=True, kernel="wgmma", tile_m=16,
               tile_n=64, splits=3, reduce_in_cluster=False),
        _mixed("splitk", 14, 264, 2048, 4, 128, False, "fp16", True, "wgmma:16:n64+splits:8",
               quick=True, kernel="wgmma", tile_m=16, tile_n=64, splits=8,
               reduce_in_cluster=True),
        _mixed("splitk", 16, 1000, 1152, 4, 128, False, "bf16", True, "stream_k:15", quick=True,
               kernel="wgmma", tile_m=16, tile_n=128, splits=1, stream_k_ctas=12),
        _mixed("splitk", 9, 520, 1408, 4, -1, True, "fp16", False, "stream_k:35", quick=True,
               kernel="wgmma", tile_m=16, tile_n=128, splits=1, stream_k_ctas=17),
        _mixed("splitk", 40, 136, 1408, 8, 64, True, "bf16", False, "mma-splits:4",
               kernel="mma", tile_m=64, splits=4),
        _mixed("splitk", 33, 136, 1408, 4, 32, True, "bf16", True, "wgmma:64+splits:4",
               quick=True, kernel="wgmma", tile_m=64, splits=4, reduce_in_cluster=False),
        _mixed("splitk", 100, 136, 1408, 8, 128, False, "fp16", False, "wgmma:128+splits:2",
               quick=True, kernel="wgmma", tile_m=128, splits=2, producer=True),
        # INT8 per-channel on the warp-specialized 64-row tile (exact scales), 3 splits: two whole
        # column tiles through WgmmaWarpSlice::store's row pointers, the last (8 columns) value
        # by value
        _mixed("splitk", 50, 264, 1408, 8, -1, False, "bf16", True, "wgmma:64+splits:3",
               quick=True, kernel="wgmma", tile_m=64, splits=3, producer=True,
               exact_scales=True),
    ]
    # gated (activation="silu_mul"): N = 2 x 136, so CTA tiles straddle the two halves
    L += [
        _mixed("gated", 1, 272, 640, 4, 128, True, "bf16", True, "decode:2:1", quick=True,
               activation="silu_mul", kernel="decode", col_warps=1, gated=True),
        _mixed("gated", 5, 272, 1408, 8, 32, False, "fp16", False, "decode:4:2", quick=True,
               activation="silu_mul", kernel="decode", col_warps=2, gated=True),
        _mixed("gated", 3, 272, 4224, 4, 64, False, "fp16", True, "splits:3", quick=True,
               activation="silu_mul", kernel="decode", splits=3, gated=True),
        _mixed("gated", 16, 272, 640, 8, -1, True, "bf16", True, "mma", quick=True,
               activation="silu_mul", kernel="mma", gated=True),
        _mixed("gated", 13, 272, 1408, 4, 128, False, "bf16", True, "mma+splits:1", quick=True,
               activation="silu_mul", kernel="mma", splits=1, gated=True),
        _mixed("gated", 16, 272, 1408, 4, 32, True, "fp16", True, "mma-slices", quick=True,
               activation="silu_mul", kernel="mma", k_slices=2, gated=True),
        _mixed("gated", 14, 272, 1408, 4, 128, False, "bf16", True, "wgmma:16:exact+splits:1",
               quick=True, activation="silu_mul", kernel="wgmma", tile_m=16, exact_scales=True,
               splits=1, gated=True),
        _mixed("gated", 11, 272, 1408, 4, 128, True, "fp16", True,
               "wgmma:16:exact+splits:4+tile_n:64", quick=True, activation="silu_mul",
               kernel="wgmma", tile_m=16, tile_n=64, exact_scales=True, splits=4,
               reduce_in_cluster=True, gated=True),
        _mixed("gated", 12, 1024, 1408, 4, 128, False, "fp16", True, "stream_k:20", quick=True,
               activation="silu_mul", kernel="wgmma", tile_m=16, tile_n=128, stream_k_ctas=16,
               gated=True),
        _mixed("gated", 29, 272, 640, 4, 32, False, "bf16", False, "wgmma:32:exact",
               quick=True, activation="silu_mul", kernel="wgmma", tile_m=32,
               exact_scales=True, gated=True),
        _mixed("gated", 27, 272, 1408, 4, 128, True, "fp16", True, "wgmma:32:exact+splits:1",
               quick=True, activation="silu_mul", kernel="wgmma", tile_m=32, exact_scales=True,
               splits=1, gated=True),
        _mixed("gated", 130, 272, 1408, 8, 128, True, "fp16", True, "wgmma:128+splits:2",
               quick=True, activation="silu_mul", kernel="wgmma", tile_m=128, splits=2,
               producer=True, gated=True),
        _mixed("gated", 20, 272, 640, 4, 128, False, "bf16", True, "dense", quick=True,
               activation="silu_mul", dense=True, gated=True),
    ]
    # the dense path: the dequantize kernel, then cute_gemm.gemm
    L += [
        _mixed("dense", 20, 136, 640, 4, 128, False, "fp16", True, "dense", quick=True,
               dense=True),
        _mixed("dense", 3, 264, 1408, 8, 32, True, "bf16", False, "dense", dense=True),
        _mixed("dense", 70, 136, 640, 4, -1, True, "bf16", True, "dense", dense=True),
    ]
    # cute_gemm.gemm, every configuration (the list exists in every build; main() stops before a
    # launch where there is no GPU)
    for name in cute_gemm._C._gemm_configs():
        for dtype in DTYPES:
            L.append(dict(op="gemm", family="gemm", m=33, n=136, k=264, dtype=dtype,
                          bias=dtype == "fp16", config=name, quick=dtype == "fp16",
                          expect={}))
        if name.startswith("wgmma_"):  # the Hopper kernel's split-K path: 10 splits + reduce
            L.append(dict(op="gemm", family="gemm", m=200, n=1000, k=3000, dtype="bf16",
                          bias=True, config=name, quick=False, expect={}))
            # Whole column tiles (448 = 2 x 224 = 7 x 64): the TMA-store epilogue, or the 224
            # tile's row stores from registers.
            L.append(dict(op="gemm", family="gemm", m=130, n=448, k=320, dtype="fp16",
                          bias=True, config=name, quick=False, expect={}))
    # cute_gemm.decode_attention: each head-dim instance (64, 128, 256; D = 72 with half a k-step),
    # a group of 20 over two CTAs, clusters of 2 to 8 splits (on 132 SMs, in order: 4, 6, 3, 8,
    # 5, 8, 2), each mask kind, a static cache's unread tail (tile by tile, and found by the long
    # splits' scan)
    for batch, heads, kv_heads, q_len, length, dim, dtype, mask, quick in (
            (1, 32, 8, 1, 229, 128, "bf16", "prefix", True),
            (2, 12, 1, 2, 700, 64, "fp16", "add", True),
            (3, 8, 8, 1, 130, 256, "bf16", None, False),
            (1, 4, 2, 3, 4096, 32, "fp16", "head", False),
            (1, 40, 2, 1, 300, 72, "bf16", "head", False),
            (1, 8, 8, 1, 4096, 128, "bf16", "tail", False),
            (8, 32, 8, 1, 256, 128, "fp16", "prefix", False)):
        L.append(dict(op="attention", family="attention", batch=batch, heads=heads,
                      kv_heads=kv_heads, q_len=q_len, length=length, dim=dim, dtype=dtype,
                      mask=mask, quick=quick, expect={}))
    return L


def _randn(*shape, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g).to(dtype)


def _describe(spec):
    if spec["op"] == "attention":
        return (f"{spec['family']:<9} B={spec['batch']} H={spec['heads']}/{spec['kv_heads']} "
                f"Lq={spec['q_len']} L={spec['length']} D={spec['dim']} {spec['dtype']} "
                f"mask={spec['mask']}")
    text = f"{spec['family']:<9} M={spec['m']:<4d} N={spec['n']:<4d} K={spec['k']:<5d}"
    if spec["op"] == "mixed":
        g = "pc" if spec["group"] == -1 else f"g{spec['group']}"
        text += f" int{spec['bits']} {g:<4} {'sym ' if spec['sym'] else 'asym'}"
        if spec.get("activation"):
            text += f" {spec['activation']}"
    text += f" {spec['dtype']}{' bias' if spec['bias'] else '     '}"
    if spec.get("force"):
        text += f" force={spec['force']}"
    if spec.get("config"):
        text += f" config={spec['config']}"
    return text


def mixed_schedule(spec, device=None):
    """The schedule of a mixed launch on `device` (a cute_gemm.device_spec argument; default the
    current GPU)."""
    return schedule_for(spec["force"], spec["m"], spec["n"], spec["k"], spec["bits"],
                        spec["group"], DTYPES[spec["dtype"]], cute_gemm.device_spec(device))


def mixed_plan(spec, device=None, schedule=None):
    """The plan of a mixed launch on `device` (default the current GPU) with `schedule` (default
    mixed_schedule(spec, device))."""
    if schedule is None:
        schedule = mixed_schedule(spec, device)
    return cute_gemm.mixed_plan(spec["m"], spec["n"], spec["k"], spec["bits"], spec["group"],
                                DTYPES[spec["dtype"]], device=device, schedule=schedule,
                                activation=spec.get("activation"))


def _check_plan(plan, expect):
    """Mismatches between a plan (cute_gemm.MixedPlan) and the family's expectations ('' when
    none)."""
    bad = []
    for key, want in expect.items():
        got = plan.kernel == "dense" if key == "dense" else getattr(plan, key)
        if got != want:
            bad.append(f"{key}={got} (want {want})")
    return ", ".join(bad)


def run_mixed(spec, seed):
    dtype = DTYPES[spec["dtype"]]
    m, n, k = spec["m"], spec["n"], spec["k"]
    w = _randn(n, k, dtype=dtype, seed=seed)
    qw_cpu = cute_gemm.quantize(w, spec["bits"], spec["group"], spec["sym"])
    a_cpu = _randn(m, k, dtype=dtype, seed=seed + 1)
    bias_cpu = _randn(n, dtype=dtype, seed=seed + 2) if spec["bias"] else None
    qw = qw_cpu.to("cuda")
    a = a_cpu.cuda()
    bias = None if bias_cpu is None else bias_cpu.cuda()
    schedule = mixed_schedule(spec)
    activation = spec.get("activation")
    plan = mixed_plan(spec, schedule=schedule)
    label = plan_label(plan)
    mismatch = _check_plan(plan, spec["expect"])
    if mismatch:
        return f"plan mismatch: {mismatch}", label, None
    out = cute_gemm.mixed_gemm(a, qw, bias, schedule=schedule, activation=activation)
    torch.cuda.synchronize()
    # The reference on the CPU: fp64 product with the weight the path computes with.
    w_ref = cute_gemm.dequantize(qw_cpu, torch.float32 if exact_weight(plan) else None)
    ref = a_cpu.double() @ w_ref.double().t()
    if bias_cpu is not None:
        ref += bias_cpu.double()
    if activation is not None:  # SiLU(gate) * up of the halves (the dense path rounds both)
        if plan.kernel == "dense":
            ref = ref.to(dtype).double()
        gate, up = ref.chunk(2, dim=-1)
        ref = torch.nn.functional.silu(gate) * up
    msg, max_err, _ = check_accurate(out.cpu(), ref, dtype, k)
    return msg, label, max_err


def run_attention(spec, seed):
    """decode_attention on the GPU against its CPU reference (max abs error <= 2e-2)."""
    dtype = DTYPES[spec["dtype"]]
    b, h, hkv, lq, length, d = (spec[k] for k in ("batch", "heads", "kv_heads", "q_len",
                                                   "length", "dim"))
    q = _randn(b, h, lq, d, dtype=dtype, seed=seed)
    k = _randn(b, hkv, length, d, dtype=dtype, seed=seed + 1)
    v = _randn(b, hkv, length, d, dtype=dtype, seed=seed + 2)
    g = torch.Generator().manual_seed(seed + 3)
    mask = None
    if spec["mask"] == "prefix":
        mask = (torch.arange(length) < length - 37).view(1, 1, 1, length).expand(b, 1, lq, length)
    elif spec["mask"] == "tail":  # splits of 512 positions: one full, one partial, six empty
        mask = (torch.arange(length) < 700).view(1, 1, 1, length).expand(b, 1, lq, length)
    elif spec["mask"] == "add":
        mask = torch.randn(b, 1, lq, length, generator=g)
        mask[:, :, :, 1::3] = float("-inf")
    elif spec["mask"] == "head":
        mask = torch.rand(b, h, lq, length, generator=g) > 0.5
        mask[..., 0] = True
    out = cute_gemm.decode_attention(q.cuda(), k.cuda(), v.cuda(),
                                     None if mask is None else mask.cuda())
    torch.cuda.synchronize()
    # The op's CPU kernel is the reference (fp32, rounded once; tests/test_decode_attention.py
    # checks it against an independent fp32 formula).
    ref = cute_gemm.decode_attention(q, k, v, mask).float()
    max_err = (out.cpu().float() - ref).abs().max().item()
    msg = None if max_err <= 2e-2 else f"max abs error {max_err:.3e} > 2e-2"
    return msg, f"{length} positions", max_err


def run_gemm(spec, seed):
    dtype = DTYPES[spec["dtype"]]
    m, n, k = spec["m"], spec["n"], spec["k"]
    a_cpu = _randn(m, k, dtype=dtype, seed=seed)
    b_cpu = _randn(n, k, dtype=dtype, seed=seed + 1)
    bias_cpu = _randn(n, dtype=dtype, seed=seed + 2) if spec["bias"] else None
    a, b = a_cpu.cuda(), b_cpu.cuda()
    bias = None if bias_cpu is None else bias_cpu.cuda()
    name = spec["config"]
    out = cute_gemm.gemm(a, b, bias, config=name)  # refuses (ValueError) a name not compiled
    torch.cuda.synchronize()
    ref = a_cpu.double() @ b_cpu.double().t()
    if bias_cpu is not None:
        ref += bias_cpu.double()
    msg, max_err, _ = check_accurate(out.cpu(), ref, dtype, k)
    return msg, name, max_err


def build_parser():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true",
                   help="a subset: one launch per kernel instance kind")
    p.add_argument("--only", default=None,
                   help=f"comma-separated families to run, of: {','.join(FAMILIES)}")
    p.add_argument("--list", action="store_true", help="print the launches and exit (no GPU)")
    return p


def select(quick=False, only=None):
    """The launches of a run (see build_parser)."""
    if only:
        unknown = set(only) - set(FAMILIES)
        if unknown:
            raise ValueError(f"unknown families {sorted(unknown)}; choose from {FAMILIES}")
    return [s for s in launches()
            if (not quick or s["quick"]) and (not only or s["family"] in only)]


def main(argv=None):
    args = build_parser().parse_args(argv)
    only = args.only.split(",") if args.only else None
    specs = select(args.quick, only)
    if args.list:
        for spec in specs:
            print(_describe(spec))
        return 0
    if not torch.cuda.is_available():
        print("[probe] no CUDA device: nothing to probe", flush=True)
        return 2
    wgmma = cute_gemm.device_spec().wgmma
    print(f"[probe] {torch.cuda.get_device_name()}, wgmma kernels usable: {wgmma}, "
          f"PYTORCH_NO_CUDA_MEMORY_CACHING={os.environ.get('PYTORCH_NO_CUDA_MEMORY_CACHING')}, "
          f"{len(specs)} launches{' (quick)' if args.quick else ''}", flush=True)
    t0 = time.monotonic()
    failures = skipped = 0
    for i, spec in enumerate(specs):
        desc = _describe(spec)
        uses_wgmma = spec["family"].startswith("wgmma") or \
            spec["expect"].get("kernel") == "wgmma"
        if uses_wgmma and not wgmma:
            print(f"[probe] SKIP {desc}: no wgmma kernels in this build/device", flush=True)
            skipped += 1
            continue
        try:
            run = {"mixed": run_mixed, "gemm": run_gemm, "attention": run_attention}[spec["op"]]
            msg, label, max_err = run(spec, seed=1000 + 17 * i)
        except Exception:  # noqa: BLE001 -- a launch error or CUDA fault fails this launch
            msg, label, max_err = "exception:\n" + traceback.format_exc(), "?", None
        err = "n/a" if max_err is None else f"{max_err:.3e}"
        status = "ok  " if msg is None else "FAIL"
        print(f"[probe] {status} {desc}  plan={label}  max_abs_err={err}", flush=True)
        if msg is not None:
            failures += 1
            print(f"[probe]      {msg}", flush=True)
    print(f"[probe] {'FAILED' if failures else 'PASS'}: {len(specs) - skipped - failures} ok, "
          f"{failures} failed, {skipped} skipped in {time.monotonic() - t0:.1f} s", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
