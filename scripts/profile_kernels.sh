#!/usr/bin/env bash
# Hardware-counter view of the GEMM kernels (ncu, Firecracker machines only; gVisor has no
# counters). Usage: scripts/profile_kernels.sh OUTDIR. Clocks are left as they are
# (--clock-control none): the card's settings are not ours to change.
set -uo pipefail
OUTDIR="$1"; mkdir -p "$OUTDIR"
cd "$(dirname "$0")/.."
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -n 1)
if [ -z "$NCU" ]; then echo "ncu not found"; exit 0; fi
cat >/tmp/cute_gemm_profile.py <<'PY'
import torch, cute_gemm
torch.manual_seed(0)
for m, n, k in [(4096, 4096, 4096)]:
    a = torch.randn(m, k, device="cuda", dtype=torch.float16)
    b = torch.randn(n, k, device="cuda", dtype=torch.float16)
    for _ in range(3):
        cute_gemm.gemm(a, b)
torch.cuda.synchronize()
PY
"$NCU" --clock-control none -k regex:gemm_kernel -s 2 -c 1 \
  --section SpeedOfLight --section WarpStateStats --section Occupancy \
  --section MemoryWorkloadAnalysis_Tables \
  python3 /tmp/cute_gemm_profile.py >"$OUTDIR/ncu_gemm.txt" 2>&1
echo "ncu rc=$? (report: $OUTDIR/ncu_gemm.txt)"
grep -E "Compute \(SM\) Throughput|Memory Throughput|Duration|Achieved Occupancy|Stall|Warp Cycles|Bank" \
  "$OUTDIR/ncu_gemm.txt" | head -40
