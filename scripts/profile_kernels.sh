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
cat >/tmp/cute_gemm_profile_mixed.py <<'PY'
import torch, cute_gemm
torch.manual_seed(0)
w = torch.randn(8192, 8192, device="cuda", dtype=torch.float16) * 0.02
qw = cute_gemm.quantize(w, bits=4, group_size=128)
a = torch.randn(1, 8192, device="cuda", dtype=torch.float16)
for _ in range(3):
    cute_gemm.mixed_gemm(a, qw)
torch.cuda.synchronize()
PY
"$NCU" --clock-control none -k regex:mixed_gemm_kernel -s 2 -c 1 \
  --section SpeedOfLight --section WarpStateStats --section Occupancy --section InstructionStats \
  --section SchedulerStats \
  python3 /tmp/cute_gemm_profile_mixed.py >"$OUTDIR/ncu_mixed.txt" 2>&1
echo "ncu mixed rc=$?"
grep -E "Compute \(SM\) Throughput|Memory Throughput|Duration|Achieved Occupancy|Stall|Warp Cycles|Bank" \
  "$OUTDIR/ncu_gemm.txt" | head -40
echo "== mixed (M=1, 8192x8192 INT4 g128)"
grep -E "Throughput|Duration|Occupancy|Stall|Warp Cycles|Issue|Executed Ipc|Eligible|Active Warps" \
  "$OUTDIR/ncu_mixed.txt" | head -40
