#!/usr/bin/env bash
# Same-machine before/after comparison of the mixed GEMM (for refactors that must not change
# speed): builds the baseline source tree (a `git archive` tarball) and this tree in place, then
# runs benchmarks/bench_mixed_gemm.py on each, alternating, ROUNDS times (each tree's own
# benchmark script), and collects registers / spills / SASS counts of both builds.
# Usage: scripts/ab_compare.sh BASELINE.tar.gz OUTDIR [ROUNDS=2]
# AB_BENCH_ARGS (e.g. "--shapes 14336x4096 --ms 32,64") is passed to every benchmark run
# (AB_BENCH=gemm: bench_gemm.py instead of bench_mixed_gemm.py; AB_BENCH=model: this tree's
# bench_model.py on both builds, so that only the library differs, e.g. AB_BENCH_ARGS="--modes
# compile-decode --inductor-pdl --attention cute_gemm --variants bf16,int4-fused-head8");
# AB_SKIP_BUILD=1 reuses both trees' builds from an earlier run in the same place.
# Writes OUTDIR/{base,new}_{round}.json|md, OUTDIR/resources_{base,new}.json,
# OUTDIR/resources_diff.md and OUTDIR/ab.md (ours, per shape and M: the median over rounds of
# each build and their ratio). Needs a GPU, torch, pybind11, ninja.
set -uo pipefail
export PYTHONUNBUFFERED=1 CXX=g++ CC=gcc PATH="$PATH:/usr/local/cuda/bin"
tarball="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
mkdir -p "$2"
OUTDIR="$(cd "$2" && pwd)"
rounds=${3:-2}
cd "$(dirname "$0")/.."
NEW="$(pwd)"
BASE="${AB_BASE_DIR:-$(mktemp -d)/base}"
[ "${AB_SKIP_BUILD:-0}" = 1 ] || { mkdir -p "$BASE" && tar xzf "$tarball" -C "$BASE"; }
status=0
for tree in "$NEW" "$BASE"; do
  name=$([ "$tree" = "$NEW" ] && echo new || echo base)
  [ "${AB_SKIP_BUILD:-0}" = 1 ] && continue
  t0=$(date +%s)
  (cd "$tree" && MAX_JOBS=16 TORCH_CUDA_ARCH_LIST=9.0a python3 setup.py build_ext --inplace \
    >"$OUTDIR/build_$name.log" 2>&1) || { echo "[ab] $name build FAILED"; tail -n 40 \
    "$OUTDIR/build_$name.log"; exit 1; }
  echo "[ab] $name built in $(( $(date +%s) - t0 )) s"
  python3 scripts/kernel_resources.py --build "$tree/build/temp.cute_gemm" \
    --out "$OUTDIR/resources_$name.json" || echo "[ab] no cuobjdump: resources skipped"
done
[ -f "$OUTDIR/resources_base.json" ] && python3 scripts/kernel_resources.py --compare \
  "$OUTDIR/resources_base.json" "$OUTDIR/resources_new.json" \
  --markdown "$OUTDIR/resources_diff.md" >/dev/null
# AB_BENCH=gemm: the dense GEMM's benchmark (bench_gemm.py; AB_BENCH_ARGS e.g. "--dtype bf16
# --shapes 4096x4096x4096,512x28672x4096") instead of the mixed GEMM's.
bench=benchmarks/bench_mixed_gemm.py
[ "${AB_BENCH:-mixed}" = gemm ] && bench=benchmarks/bench_gemm.py
[ "${AB_BENCH:-mixed}" = model ] && bench="$NEW/benchmarks/bench_model.py"
for r in $(seq 1 "$rounds"); do
  for tree in "$BASE" "$NEW"; do
    name=$([ "$tree" = "$NEW" ] && echo new || echo base)
    mkdir -p "$OUTDIR/${name}_$r"
    # shellcheck disable=SC2086  (AB_BENCH_ARGS is a list of words)
    (cd "$tree" && PYTHONPATH="$tree" python3 "$bench" --no-plot \
      ${AB_BENCH_ARGS:-} --out "$OUTDIR/${name}_$r" >"$OUTDIR/${name}_$r/log.txt" 2>&1) || {
      echo "[ab] $name round $r FAILED"; tail -n 20 "$OUTDIR/${name}_$r/log.txt"; status=1; }
  done
done
python3 - "$OUTDIR" "$rounds" <<'PY'
import glob, json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
def load(name):
    times = {}
    for r in range(1, rounds + 1):
        for path in glob.glob(f"{out}/{name}_{r}/*.json"):
            for row in json.load(open(path))["results"]:
                if "ms_per_step" in row:  # bench_model.py: a variant's decode step
                    if row.get("status") == "ok":
                        times.setdefault((f"{row['variant']} {row['mode']} {row['attention']}",
                                          "step", "", row["batch"]),
                                         []).append(row["ms_per_step"] * 1000)
                elif "ours_us" in row:  # bench_gemm.py: ours and torch on one row
                    if row.get("check") == "ok":
                        for kern in ("ours", "torch"):
                            times.setdefault((kern, row["k"], row["n"], row["m"]),
                                             []).append(row[kern + "_us"])
                elif row.get("status") == "ok" and row["kernel"] in ("ours_int4", "ours_int8",
                                                                      "fp16"):
                    times.setdefault((row["kernel"], row["k"], row["n"], row["m"]),
                                     []).append(row["us"])
    return {k: statistics.median(v) for k, v in times.items()}
base, new = load("base"), load("new")
lines = ["| kernel | K x N | M | base us | new us | new / base |", "|---|---|---|---|---|---|"]
worst = 0.0
for key in sorted(set(base) & set(new)):
    kern, k, n, m = key
    ratio = new[key] / base[key]
    if kern not in ("fp16", "torch"):
        worst = max(worst, ratio)
    shape = f"{k}x{n}" if n else k  # a model row: "step", M the batch
    lines.append(f"| {kern} | {shape} | {m} | {base[key]:.2f} | {new[key]:.2f} | {ratio:.3f} |")
lines.append(f"\nWorst ours new/base: {worst:.3f}")
open(f"{out}/ab.md", "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY
exit $status
