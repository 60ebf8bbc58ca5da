#!/usr/bin/env bash
# The main job: set up this machine if needed, then run a time-to-accuracy campaign.
#   ./run_and_time.sh                      default: system=local, without data_dir the embedded
#                                          Fashion-MNIST campaign
#   ./run_and_time.sh system=p4d data_dir=/data/imagenet
#   ./run_and_time.sh system=p4d dry_run=true  resolved configuration + torchrun command
# Settings are key=value (python -m submission settings lists them).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
"$ROOT/scripts/bootstrap.sh"
cd "$ROOT"
exec "${VENV:-$ROOT/.venv}/bin/python" -m submission run "$@"
