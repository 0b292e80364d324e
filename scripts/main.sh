#!/usr/bin/env bash
# Runs the main job (python3 -m cute_gemm); does all set-up (prerequisites + build) first.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup_env.sh
python3 -m cute_gemm "$@"
