#!/usr/bin/env bash
# GPU check for an H100/H200 machine with torch, pytest and pybind11 preinstalled and no network.
# Usage: scripts/gpu_check.sh OUTDIR
# Steps: build, kernels.txt, the tests, compute-sanitizer memcheck/racecheck/synccheck on
# scripts/sanitizer_probe.py (every kernel family, small shapes), a seeded random sweep against
# the fp64 reference (scripts/gpu_sweep.py), the benchmarks, the main job.
# Writes env.txt, build.log, build_time.txt, kernels.txt, pytest.log, sanitizer_memcheck.log,
# sanitizer_racecheck.log, sanitizer_synccheck.log, gpu_sweep.log and benchmark output into OUTDIR.
# Exits nonzero if the build, the tests, a sanitizer run (any reported error, or a probe
# mismatch), the sweep, a benchmark or the main job fail, but runs every step.
# Environment: CUTE_GEMM_BENCHES="bench_mixed_gemm bench_decode" picks benchmarks (default all;
# "none" runs none), CUTE_GEMM_BENCH_ARGS the GEMM benchmarks' arguments (default --quick; "" for
# the full sweep), CUTE_GEMM_MAIN_JOB=0 skips the main job, CUTE_GEMM_SANITIZER=0 skips the
# compute-sanitizer runs, CUTE_GEMM_SWEEP_SECONDS the sweep's time (default 60; 0 skips it),
# CUTE_GEMM_SWEEP_SEED its seed (default random; the log prints it), CUTE_GEMM_TESTS=0 skips
# pytest (for reruns of the other steps), CUTE_GEMM_MODEL_ARGS bench_model.py's arguments,
# CUTE_GEMM_HF_PROBE=1 runs scripts/hf_load_probe.py (from_pretrained's peak memory),
# CUTE_GEMM_PYTEST_ARGS extra pytest arguments as shell words (e.g. '-n 8 --dist loadfile -m "not
# slow"': pytest-xdist workers sharing the GPU; on an H200 ~99% of the suite ran in 9.5 min with 8,
# still too long for one call).
set -uo pipefail
export PYTHONUNBUFFERED=1
# The device image points CXX at its own gcc build, whose libstdc++ then ends up inside _C.so
# next to the system one torch uses; exceptions carrying formatted numbers crash across the two.
# Build with the system compiler torch was built against.
export CXX=g++ CC=gcc

if [ $# -ne 1 ]; then
  echo "usage: $0 OUTDIR" >&2
  exit 2
fi
mkdir -p "$1"
OUTDIR="$(cd "$1" && pwd)"
cd "$(dirname "$0")/.."
status=0

{
  echo "== date"; date -u
  echo "== nvidia-smi"; nvidia-smi 2>&1
  echo "== nvcc --version"; nvcc --version 2>&1
  echo "== ninja --version"; ninja --version 2>&1
  echo "== python / torch"
  python3 -c "import sys, torch; print(sys.version); print('torch', torch.__version__, \
'cuda', torch.version.cuda, 'available', torch.cuda.is_available()); \
print([torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())])" 2>&1
} >"$OUTDIR/env.txt"

echo "[gpu_check] building (log: $OUTDIR/build.log)"
t0=$(date +%s)
MAX_JOBS=16 TORCH_CUDA_ARCH_LIST=9.0a CUTE_GEMM_PTXAS_VERBOSE=1 \
  python3 -m pip install --no-build-isolation --no-deps -v -e . >"$OUTDIR/build.log" 2>&1
build_rc=$?
echo $(( $(date +%s) - t0 )) >"$OUTDIR/build_time.txt"
if [ $build_rc -ne 0 ]; then
  echo "[gpu_check] build FAILED (rc=$build_rc)"; tail -n 50 "$OUTDIR/build.log"; status=1
else
  echo "[gpu_check] build ok in $(cat "$OUTDIR/build_time.txt") s"
fi

# Register / spill report of every kernel, and the instruction mix of the GEMM kernels' SASS.
{
  echo "== ptxas (registers, spills) per kernel"
  grep -E "Compiling entry|Used [0-9]+ registers|spill" "$OUTDIR/build.log" | sed 's/^ *//' | \
    grep -B1 -E "Used [0-9]+ registers" | grep -v "^--" || true
  so=$(ls cute_gemm/_C*.so 2>/dev/null | head -n 1)
  if [ -n "$so" ] && command -v cuobjdump >/dev/null; then
    cuobjdump --dump-sass "$so" >"$OUTDIR/sass.txt" 2>/dev/null
    echo "== SASS instruction mix per kernel (HMMA LDSM LDGSTS LDL STL BAR)"
    awk '/Function :/ {if (name) print name, h, l, g, ld, st, b; name=$3; h=l=g=ld=st=b=0}
         /HMMA/ {h++} /LDSM/ {l++} /LDGSTS/ {g++} /LDL/ {ld++} /STL/ {st++} /BAR.SYNC/ {b++}
         END {if (name) print name, h, l, g, ld, st, b}' "$OUTDIR/sass.txt"
    rm -f "$OUTDIR/sass.txt"
  fi
} >"$OUTDIR/kernels.txt" 2>&1

if [ "${CUTE_GEMM_TESTS:-1}" != 0 ]; then
  eval "pytest_args=(${CUTE_GEMM_PYTEST_ARGS:-})"  # shell words: -m "not slow" stays one argument
  python3 -m pytest -q -ra --durations=10 "${pytest_args[@]}" tests 2>&1 | tee "$OUTDIR/pytest.log"
  test_rc=${PIPESTATUS[0]}
  if [ $test_rc -ne 0 ]; then
    echo "[gpu_check] tests FAILED (rc=$test_rc)"; status=1
  fi
fi

# compute-sanitizer on a probe that launches every kernel family (decode, mma.sync, both wgmma
# kernels, split-K reductions, dequantize + dense, every GEMM configuration) on small shapes.
# PYTORCH_NO_CUDA_MEMORY_CACHING=1: inside torch's caching allocator's pooled blocks an
# out-of-bounds access is invisible to memcheck. Each tool takes 5-11 s on an H100.
# racecheck runs twice: every family but the dense path; then the dense path, whose GEMM is
# cuBLAS's (at::linear). racecheck reports a shared-memory race inside cuBLAS's TMA/mbarrier
# Hopper kernel (nvjet_sm90_*, both accesses in it) on every run, and with a kernel filter that
# leaves cuBLAS uninstrumented the sanitizer itself fails on a hardware exception (H100, CUDA
# 13.0; benchmarks/results/NOTES.md). So the dense run is whole, and a report counts as a failure
# unless both of its accesses lie in cuBLAS's kernel: any hazard in our dequantize kernel fails.
sanitize() {  # sanitize TOOL LOGNAME [sanitizer options --] [probe options]
  local tool=$1 log="$OUTDIR/sanitizer_$2.log" tool_args=() t0 rc
  shift 2
  if [ "${1:-}" = --sanitizer-args ]; then
    shift
    while [ "$1" != -- ]; do tool_args+=("$1"); shift; done
    shift
  fi
  echo "[gpu_check] compute-sanitizer --tool $tool ${tool_args[*]} on scripts/sanitizer_probe.py" \
    "$* (log: $log)"
  t0=$(date +%s)
  PYTORCH_NO_CUDA_MEMORY_CACHING=1 "$sanitizer" --tool "$tool" --error-exitcode 1 \
    "${tool_args[@]}" python3 scripts/sanitizer_probe.py "$@" >"$log" 2>&1
  rc=$?
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY|\[probe\] (PASS|FAILED|no CUDA)" "$log"
  if [ $rc -ne 0 ] && [ "${SANITIZE_CUBLAS_RACES_ONLY:-0}" = 1 ]; then
    local races ours
    # A report is two lines: "Race reported between <access> at <kernel>+<pc>" and
    # "and <access> at <kernel>+<pc> [N hazards]".
    read -r races ours < <(awk '/Race reported between/ {r++; a = ($0 ~ / at nvjet_/); getline;
      if (!(a && $0 ~ / at nvjet_/)) o++} END {print r + 0, o + 0}' "$log")
    if [ "$races" -gt 0 ] && [ "$ours" = 0 ] && grep -q "\[probe\] PASS" "$log" && \
       ! grep -q "Internal Sanitizer Error" "$log"; then
      echo "[gpu_check] compute-sanitizer $tool: $races report(s), all inside cuBLAS's kernels" \
        "(not ours), accepted"
      rc=0
    fi
  fi
  if [ $rc -ne 0 ]; then
    echo "[gpu_check] compute-sanitizer $tool FAILED (rc=$rc, $(( $(date +%s) - t0 )) s)"
    grep -m 20 -E "^========= (Invalid|Race|Barrier|Error|Internal|Program hit)|\[probe\] +FAIL" \
      "$log"
    status=1
  else
    echo "[gpu_check] compute-sanitizer $tool ok ($(( $(date +%s) - t0 )) s)"
  fi
}
if [ "${CUTE_GEMM_SANITIZER:-1}" != 0 ]; then
  sanitizer=$(command -v compute-sanitizer || true)
  for c in "${CUDA_HOME:-/usr/local/cuda}/bin/compute-sanitizer" \
           /usr/local/cuda/bin/compute-sanitizer; do
    if [ -z "$sanitizer" ] && [ -x "$c" ]; then sanitizer="$c"; fi
  done
  if [ -z "$sanitizer" ]; then
    echo "[gpu_check] compute-sanitizer not found (CUTE_GEMM_SANITIZER=0 skips this step)"
    status=1
  else
    sanitize memcheck memcheck
    sanitize racecheck racecheck --only decode,mma,wgmma,wgmma_ws,splitk,gated,gemm,attention
    SANITIZE_CUBLAS_RACES_ONLY=1 sanitize racecheck racecheck_dense --only dense
    # synccheck tracks a fixed number of mbarriers by default; on the decode kernel's k slices
    # that table overflows and the instrumented launch fails (session 49), so it gets a larger one.
    sanitize synccheck synccheck --sanitizer-args --num-cuda-barriers 1024 --
  fi
fi

# A seeded random sweep of M, N, K, bits, group, symmetry, dtype and bias against the fp64
# reference (the log prints the seed, and a failing case with the command that reruns it).
sweep_seconds="${CUTE_GEMM_SWEEP_SECONDS:-60}"
if [ "$sweep_seconds" != 0 ]; then
  sweep_args=(--seconds "$sweep_seconds")
  if [ -n "${CUTE_GEMM_SWEEP_SEED:-}" ]; then sweep_args+=(--seed "$CUTE_GEMM_SWEEP_SEED"); fi
  echo "[gpu_check] running scripts/gpu_sweep.py ${sweep_args[*]}"
  python3 scripts/gpu_sweep.py "${sweep_args[@]}" 2>&1 | tee "$OUTDIR/gpu_sweep.log"
  rc=${PIPESTATUS[0]}
  if [ $rc -ne 0 ]; then
    echo "[gpu_check] gpu_sweep FAILED (rc=$rc)"; status=1
  fi
fi

shopt -s nullglob
# CUTE_GEMM_BENCHES="bench_gemm bench_mixed_gemm" limits the run to those benchmarks.
if [ "${CUTE_GEMM_BENCHES:-}" = none ]; then
  benches=()
elif [ -n "${CUTE_GEMM_BENCHES:-}" ]; then
  benches=()
  for b in $CUTE_GEMM_BENCHES; do benches+=("benchmarks/$b.py"); done
else
  benches=(benchmarks/bench_*.py)
fi
if [ ${#benches[@]} -eq 0 ]; then
  echo "[gpu_check] no benchmarks to run (CUTE_GEMM_BENCHES=${CUTE_GEMM_BENCHES:-}); skipping them"
fi
# The GEMM benchmarks run --quick unless CUTE_GEMM_BENCH_ARGS says otherwise ("" = full);
# bench_decode takes its defaults; bench_model CUTE_GEMM_MODEL_ARGS (default: eager + graph,
# batch 1 and 16, three variants, a profile by kernel kind, at most ~4 min; its full run with
# both modes takes longer than one device call).
for b in "${benches[@]}"; do
  name="$(basename "$b" .py)"
  echo "[gpu_check] running $b"
  case "$name" in
    bench_decode) args=() ;;
    bench_model) read -r -a args <<<"${CUTE_GEMM_MODEL_ARGS:---modes graph --batch 1,16 \
--variants bf16,int4,int4-fused --deadline-s 240 --profile 4}" ;;
    *) read -r -a args <<<"${CUTE_GEMM_BENCH_ARGS---quick}" ;;
  esac
  python3 "$b" "${args[@]}" --out "$OUTDIR" 2>&1 | tee "$OUTDIR/$name.log"
  rc=${PIPESTATUS[0]}
  if [ $rc -ne 0 ]; then
    echo "[gpu_check] $b FAILED (rc=$rc)"; status=1
  fi
done

# from_pretrained with CuteGemmConfig: peak GPU memory while quantizing a 32-layer
# Llama-3-8B-shaped checkpoint as it loads, and the save/reload round trip (CUTE_GEMM_HF_PROBE=1;
# it writes a 16 GB checkpoint to a temporary directory).
if [ "${CUTE_GEMM_HF_PROBE:-0}" = 1 ]; then
  echo "[gpu_check] running scripts/hf_load_probe.py"
  python3 scripts/hf_load_probe.py --out "$OUTDIR" 2>&1 | tee "$OUTDIR/hf_load_probe.log"
  rc=${PIPESTATUS[0]}
  if [ $rc -ne 0 ]; then
    echo "[gpu_check] hf_load_probe FAILED (rc=$rc)"; status=1
  fi
fi

# The main job (README): per-layer and stack speedups of a Llama-3-8B-shaped stack.
if [ "${CUTE_GEMM_MAIN_JOB:-1}" = 1 ]; then
  echo "[gpu_check] running the main job (python3 -m cute_gemm)"
  python3 -m cute_gemm --plot "$OUTDIR/main_job.png" 2>&1 | tee "$OUTDIR/main_job.txt"
  rc=${PIPESTATUS[0]}
  if [ $rc -ne 0 ]; then
    echo "[gpu_check] main job FAILED (rc=$rc)"; status=1
  fi
fi

echo "[gpu_check] done, status=$status, results in $OUTDIR"
exit $status
