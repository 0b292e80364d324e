"""Launches the mixed GEMM on a few (K, N, bits, M, dtype) cases, three times each, for Nsight
Compute to profile side by side (no timing here; ncu replays each kernel). Cases: argv, each
"KxN:bits:M" or "KxN:bits:M:dtype" (bits 4 = INT4 g128, 8 = INT8 per-channel; dtype fp16, the
default, or bf16), e.g. the bf16 and fp16 decode instances on one shape:

    ncu --section SpeedOfLight --section WarpStateStats -k regex:"mixed_" -s 2 ... \\
        python3 scripts/ncu_mixed_probe.py 4096x28672:4:1 4096x28672:4:1:bf16
"""
import sys

import torch

import cute_gemm

DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}


def parse_case(case):
    """(k, n, bits, m, dtype) of "KxN:bits:M[:dtype]"; ValueError naming the case otherwise."""
    parts = case.split(":")
    if len(parts) not in (3, 4) or parts[0].count("x") != 1:
        raise ValueError(f"case {case!r}: expected KxN:bits:M or KxN:bits:M:dtype")
    try:
        k, n = (int(x) for x in parts[0].split("x"))
        bits, m = int(parts[1]), int(parts[2])
    except ValueError:
        raise ValueError(f"case {case!r}: K, N, bits and M must be integers") from None
    name = parts[3] if len(parts) == 4 else "fp16"
    if bits not in (4, 8):
        raise ValueError(f"case {case!r}: bits must be 4 or 8, got {bits}")
    if name not in DTYPES:
        raise ValueError(f"case {case!r}: dtype must be one of {sorted(DTYPES)}, got {name!r}")
    return k, n, bits, m, DTYPES[name]


def main(cases):
    torch.manual_seed(0)
    for case in cases:
        k, n, bits, m, dtype = parse_case(case)
        group = 128 if bits == 4 else -1
        w = torch.randn(n, k, device="cuda", dtype=dtype) * 0.02
        qw = cute_gemm.quantize(w, bits=bits, group_size=group, dtype=dtype)
        a = torch.randn(m, k, device="cuda", dtype=dtype)
        print(case, cute_gemm.mixed_plan(m, n, k, bits, group, dtype=dtype), flush=True)
        for _ in range(3):
            cute_gemm.mixed_gemm(a, qw)
        torch.cuda.synchronize()


if __name__ == "__main__":
    main(sys.argv[1:])
