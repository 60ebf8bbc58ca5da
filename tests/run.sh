#!/usr/bin/env bash
# The test command: set up this machine if needed, then the linters and the whole test suite.
# Extra arguments go to pytest (e.g. ./tests/run.sh -k config -x; -n 0 runs it in one process).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SETUP_EXTRAS=test,wandb "$ROOT/scripts/bootstrap.sh"       # wandb: to test tracker=wandb
cd "$ROOT"
PYTHON=${VENV:-$ROOT/.venv}/bin/python
# The linters first (pyproject.toml [tool.ruff], setup.cfg [mypy]; docs/test-suite.md): a finding
# fails the command before any test runs.
echo "[tests] ruff check submission tests (pyflakes, pycodestyle, bugbear, import order, pyupgrade: pyproject.toml)" >&2
"$PYTHON" -m ruff check --quiet submission tests
echo "[tests] mypy on submission/ (setup.cfg [mypy]; about a minute the first time, seconds after)" >&2
"$PYTHON" -m mypy
# One pytest-xdist worker per usable CPU (at most 4; TEST_WORKERS=N chooses), each on its own
# share of them (tests/conftest.py): an end-to-end test keeps about one core busy, most of it
# in one thread (imports, numba's compiling; docs/test-suite.md).
WORKERS=${TEST_WORKERS:-$("$PYTHON" -c 'import os; print(min(4, len(os.sched_getaffinity(0))))')}
echo "[tests] running pytest in $WORKERS processes (on the CPU, as CI does: tests/conftest.py hides any GPU)" >&2
# --maxschedchunk 1: a worker is handed tests one or two at a time as it finishes them (by
# default each gets an eighth of the suite at once, and one worker would get every end-to-end test)
exec "$PYTHON" -m pytest -n "$WORKERS" --maxschedchunk 1 "$@"
