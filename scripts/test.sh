#!/usr/bin/env bash
# Runs the test suite; does all set-up (prerequisites + build) first. Args go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup_env.sh
python3 -m pytest -q "$@"
