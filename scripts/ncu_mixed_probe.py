"""Launches the mixed GEMM on a few (K, N, bits, M) cases, three times each, for Nsight Compute
to profile side by side (no timing here; ncu replays each kernel). Cases: argv, each
"KxN:bits:M" (bits 4 = INT4 g128, 8 = INT8 per-channel), e.g.

    ncu --section SpeedOfLight --section WarpStateStats -k regex:"mixed_" -s 2 ... \\
        python3 scripts/ncu_mixed_probe.py 4096x28672:8:4096 8192x8192:8:64
"""
import sys

import torch

import cute_gemm

torch.manual_seed(0)
for case in sys.argv[1:]:
    kn, bits, m = case.split(":")
    k, n = (int(x) for x in kn.split("x"))
    bits, m = int(bits), int(m)
    w = torch.randn(n, k, device="cuda", dtype=torch.float16) * 0.02
    qw = cute_gemm.quantize(w, bits=bits, group_size=128 if bits == 4 else -1)
    a = torch.randn(m, k, device="cuda", dtype=torch.float16)
    print(case, cute_gemm.mixed_plan(m, n, k, bits, 128 if bits == 4 else -1), flush=True)
    for _ in range(3):
        cute_gemm.mixed_gemm(a, qw)
    torch.cuda.synchronize()
