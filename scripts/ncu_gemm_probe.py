"""Launches cute_gemm.gemm and torch.matmul (cuBLAS) on two large fp16 problems, three times each,
for Nsight Compute to profile side by side (no timing here; ncu replays each kernel):

    ncu --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats \\
        -k regex:"gemm_wgmma_kernel|nvjet" -c 4 python3 scripts/ncu_gemm_probe.py

benchmarks/results/NOTES.md (session 16) has what it showed for the Hopper kernel.
"""
import torch

import cute_gemm

torch.manual_seed(0)
for m, n, k in ((4096, 4096, 4096), (4096, 28672, 4096)):
    a = torch.randn(m, k, device="cuda", dtype=torch.float16)
    b = torch.randn(n, k, device="cuda", dtype=torch.float16)
    for _ in range(3):
        cute_gemm.gemm(a, b)
        torch.matmul(a, b.t())
torch.cuda.synchronize()
