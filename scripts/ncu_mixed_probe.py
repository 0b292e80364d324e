"""Launches the mixed GEMM on a few (K, N, bits, M, dtype) cases, three times each, for Nsight
Compute to profile side by side (no timing here; ncu replays each kernel). Cases: argv, each
"KxN:bits:M", "KxN:bits:M:dtype" or "KxN:bits:M:dtype:silu_mul" (bits 4 = INT4 g128, 8 = INT8
per-channel; dtype fp16, the default, or bf16; silu_mul: a gated gate/up GEMM, N its two halves),
e.g. the bf16 and fp16 decode instances on one shape, and the model's gated gate/up at batch 16:

    ncu --section SpeedOfLight --section WarpStateStats -k regex:"mixed_" -s 2 ... \\
        python3 scripts/ncu_mixed_probe.py 4096x28672:4:1 4096x28672:4:1:bf16 \\
        4096x28672:4:16:bf16:silu_mul

--launches L (before the cases) launches each case L times instead of 3.
"""
import sys

import torch

import cute_gemm

DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}


def parse_case(case):
    """(k, n, bits, m, dtype, activation) of "KxN:bits:M[:dtype[:silu_mul]]"; ValueError naming
    the case otherwise."""
    parts = case.split(":")
    if len(parts) not in (3, 4, 5) or parts[0].count("x") != 1:
        raise ValueError(f"case {case!r}: expected KxN:bits:M, KxN:bits:M:dtype or "
                         "KxN:bits:M:dtype:silu_mul")
    try:
        k, n = (int(x) for x in parts[0].split("x"))
        bits, m = int(parts[1]), int(parts[2])
    except ValueError:
        raise ValueError(f"case {case!r}: K, N, bits and M must be integers") from None
    name = parts[3] if len(parts) >= 4 else "fp16"
    activation = parts[4] if len(parts) == 5 else None
    if bits not in (4, 8):
        raise ValueError(f"case {case!r}: bits must be 4 or 8, got {bits}")
    if name not in DTYPES:
        raise ValueError(f"case {case!r}: dtype must be one of {sorted(DTYPES)}, got {name!r}")
    if activation not in (None, "silu_mul"):
        raise ValueError(f"case {case!r}: the fifth field must be silu_mul, got {activation!r}")
    if activation and n % 16:
        raise ValueError(f"case {case!r}: a gated N (two halves) must be a multiple of 16, got {n}")
    return k, n, bits, m, DTYPES[name], activation


def parse_args(args):
    """(launches per case, [(case text, parse_case of it)]) of the command line; ValueError naming
    what is wrong, before anything runs."""
    launches = 3
    if args[:1] == ["--launches"]:
        if len(args) < 2 or not args[1].isdigit() or int(args[1]) < 1:
            raise ValueError(f"--launches needs a positive integer, got {args[1:2]}")
        launches, args = int(args[1]), args[2:]
    return launches, [(case, parse_case(case)) for case in args]


def main(args):
    launches, cases = parse_args(args)
    torch.manual_seed(0)
    for case, (k, n, bits, m, dtype, activation) in cases:
        group = 128 if bits == 4 else -1
        w = torch.randn(n, k, device="cuda", dtype=dtype) * 0.02
        qw = cute_gemm.quantize(w, bits=bits, group_size=group, dtype=dtype)
        a = torch.randn(m, k, device="cuda", dtype=dtype)
        print(case, cute_gemm.mixed_plan(m, n, k, bits, group, dtype=dtype, activation=activation),
              flush=True)
        for _ in range(launches):
            cute_gemm.mixed_gemm(a, qw, activation=activation)
        torch.cuda.synchronize()


if __name__ == "__main__":
    main(sys.argv[1:])
