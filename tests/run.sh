#!/usr/bin/env bash
# The test command: set up this machine if needed, then run the whole test suite.
# Extra arguments go to pytest (e.g. ./tests/run.sh -k config -x).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SETUP_EXTRAS=test,wandb "$ROOT/scripts/bootstrap.sh"       # wandb: to test tracker=wandb
cd "$ROOT"
echo "[tests] running pytest (on the CPU, as CI does: tests/conftest.py hides any GPU)" >&2
exec "${VENV:-$ROOT/.venv}/bin/python" -m pytest "$@"
