#!/usr/bin/env bash
# Tuning run for the mixed-input GEMM on the GPU machine: build (sm_90a), a sweep
# (benchmarks/probe_mixed.py $CUTE_GEMM_SWEEP: --sweep (default) split-K counts, --sweep-m the
# fused kernel vs the dense path over M, --kernels mma.sync vs wgmma vs decode vs dense,
# --decode-shapes the decode kernel's k slices, --wgmma-tiles every wgmma instance; M values
# narrowed by CUTE_GEMM_KERNEL_MS), the mixed GPU tests (CUTE_GEMM_TESTS=0 skips them; at most 10
# failures shown) and ncu counters of the mixed kernels at M=1 and M=16 (8192x8192 INT4 g128;
# skipped with CUTE_GEMM_NCU=0; CUTE_GEMM_NCU_SOURCE=1 adds the hottest SASS instructions).
# Usage: scripts/tune_mixed.sh OUTDIR
set -uo pipefail
export PYTHONUNBUFFERED=1 CXX=g++ CC=gcc  # see gpu_check.sh for why the system compiler
OUTDIR="$1"; mkdir -p "$OUTDIR"
cd "$(dirname "$0")/.."
t0=$(date +%s)
if ! MAX_JOBS=16 TORCH_CUDA_ARCH_LIST=9.0a CUTE_GEMM_PTXAS_VERBOSE=1 \
    python3 -m pip install --no-build-isolation --no-deps -v -e . >"$OUTDIR/build.log" 2>&1; then
  tail -n 60 "$OUTDIR/build.log"; exit 1
fi
echo "[tune] build $(( $(date +%s) - t0 )) s"
if [ "${CUTE_GEMM_SWEEP:-}" != none ]; then
  timeout 300 python3 benchmarks/probe_mixed.py ${CUTE_GEMM_SWEEP:---sweep} 2>&1 | \
    tee "$OUTDIR/sweep.txt"
fi
if [ "${CUTE_GEMM_TESTS:-1}" != 0 ]; then
  timeout 400 python3 -m pytest -q -p no:cacheprovider --maxfail=10 tests/test_mixed_gemm_gpu.py \
    2>&1 | tail -n 40
fi
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null |
  head -n 1)
[ -z "$NCU" ] && { echo "ncu not found"; exit 0; }
[ "${CUTE_GEMM_NCU:-1}" = 0 ] && exit 0
# The third launch of a mixed kernel (one of each script's three calls), unthrottled clocks.
NCU_KERNEL=(--clock-control none -k regex:"mixed_(gemm|wgmma|wgmma_ws|decode)_kernel" -s 2 -c 1)
# CUTE_GEMM_NCU_MS: the M values (default "1 16"); CUTE_GEMM_NCU_SCHEDULE: a mixed_gemm schedule,
# e.g. "kernel=decode,warps=8,col_warps=2" or "kernel=wgmma,tile_m=128,splits=2" (default: the
# planner's choice); CUTE_GEMM_NCU_KERNEL: mma, wgmma or decode (shorthand for kernel=...);
# CUTE_GEMM_NCU_EXTRA: more ncu arguments (e.g. --metrics). The fused kernel runs at every M
# (mma.sync where the plan would be the dense path). The plan is printed first.
for m in ${CUTE_GEMM_NCU_MS:-1 16}; do
  cat >/tmp/cute_gemm_tune.py <<PY
import torch, cute_gemm
w = torch.randn(8192, 8192, device="cuda", dtype=torch.float16) * 0.02
qw = cute_gemm.quantize(w, bits=4, group_size=128)
a = torch.randn($m, 8192, device="cuda", dtype=torch.float16)
kernel = "${CUTE_GEMM_NCU_KERNEL:-}"
schedule = "${CUTE_GEMM_NCU_SCHEDULE:-}" or (f"kernel={kernel}" if kernel else None)
if cute_gemm.mixed_plan($m, 8192, 8192, 4, 128, schedule=schedule).kernel == "dense":
    schedule = "kernel=mma"  # the fused kernel at every M
print("plan:", cute_gemm.mixed_plan($m, 8192, 8192, 4, 128, schedule=schedule), flush=True)
for _ in range(3):
    cute_gemm.mixed_gemm(a, qw, schedule=schedule)
torch.cuda.synchronize()
PY
  timeout 120 "$NCU" "${NCU_KERNEL[@]}" \
    --section SpeedOfLight --section WarpStateStats --section Occupancy \
    --section SchedulerStats --section LaunchStats --section MemoryWorkloadAnalysis \
    --section ComputeWorkloadAnalysis ${CUTE_GEMM_NCU_EXTRA:-} \
    python3 /tmp/cute_gemm_tune.py >"$OUTDIR/ncu_m$m.txt" 2>&1
  echo "== ncu M=$m"
  grep -m 1 "^plan:" "$OUTDIR/ncu_m$m.txt"
  grep -E "Duration|DRAM Throughput|Memory Throughput|L2 Cache Throughput|Achieved Occupancy|\
Theoretical Occupancy|Issued Warp|No Eligible|Active Warps Per|Eligible Warps|Warp Cycles Per Issued|\
Block Limit|Waves Per SM|Cluster|Registers Per|Stall|Pipe|Compute \(SM\)|L1/TEX Hit|L2 Hit|stalled" \
    "$OUTDIR/ncu_m$m.txt" | head -90
  # CUTE_GEMM_NCU_SOURCE=1: also the hottest SASS instructions by stall samples.
  if [ "${CUTE_GEMM_NCU_SOURCE:-0}" = 1 ]; then
    timeout 150 "$NCU" "${NCU_KERNEL[@]}" \
      --section WarpStateStats --section SourceCounters --page source --print-source sass --csv \
      python3 /tmp/cute_gemm_tune.py >"$OUTDIR/ncu_source_m$m.csv" 2>&1
    echo "== hottest SASS, M=$m"
    python3 scripts/hot_sass.py "$OUTDIR/ncu_source_m$m.csv" 45
  fi
done
