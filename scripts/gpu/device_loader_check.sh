#!/usr/bin/env bash
# The device loader's checks on a lent GPU machine (docs/gpu-data.md, issue 61), one prepared
# command: the two GPU tests (the nvJPEG hazard, a thousand batches against the CPU path), then
# `bench sweep=loader` at 176 px (write modes proportion, raw, jpg and the 350-px variants side
# by side, FFCV's loader beside the device loader) with 2, 4 and 8 host threads. At most 8
# files under $OUT: device.txt, gpu-tests.log, sweep-threads-N.log; each part has a time limit
# of its own, the most important first, so that a part that fails or runs long leaves the others'.
#
# Here, once per checkout, after the GPU kit (../shared/gpu/README.md: .gpukit, carried):
#     bash scripts/gpu/device_loader_check.sh --prepare   # pytest for the device, into .gpukit
#     (VENV=/path/to/.venv where the checkout's own .venv is elsewhere)
# On the GPU machine, from the repository root (carry: [".gpukit"]):
#     bash scripts/gpu/device_loader_check.sh
# Rehearsed on a CPU at a small scale (the GPU tests skip there), e.g.:
#     PYTHON=.venv/bin/python OUT=/tmp/out SCALE=small bash scripts/gpu/device_loader_check.sh
set -u
cd "$(dirname "$0")/../.."
PYTHON=${PYTHON:-python3}
if [ "${1:-}" = "--prepare" ]; then
  # pytest and its plugins are pure Python: this machine's copies import on the device's 3.12
  site=$(ls -d "${VENV:-.venv}"/lib/python3*/site-packages | head -1)
  rm -rf .gpukit/tests-site && mkdir -p .gpukit/tests-site
  for p in pytest _pytest pluggy iniconfig packaging pytest_timeout.py py.py; do
    [ -e "$site/$p" ] && cp -r "$site/$p" .gpukit/tests-site/
  done
  find .gpukit/tests-site -name '__pycache__' -prune -exec rm -rf {} +
  du -sh .gpukit/tests-site
  exit 0
fi

OUT=${OUT:?set OUT: the folder whose files come back}
mkdir -p "$OUT"
if [ "${SCALE:-gpu}" = small ]; then        # a CPU rehearsal: the same parts, minutes smaller
  per_class=40; limit=320; batch=32; side=64; steps=2; threads="1 2"; system=system=cpu
else
  per_class=300; limit=2560; batch=256; side=176; steps=5; threads="2 4 8"; system=
fi
[ -f .gpukit/env.sh ] && source .gpukit/env.sh
if ! "$PYTHON" -c "import pytest" 2>/dev/null && [ -d .gpukit/tests-site ]; then
  export PYTHONPATH=".gpukit/tests-site${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
work=/tmp/device-loader-check; mkdir -p "$work"
t0=$(date +%s)
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1; nproc
  "$PYTHON" -c "import torch, torchvision, numba, numpy; print('torch', torch.__version__, 'torchvision', torchvision.__version__, 'numba', numba.__version__, 'numpy', numpy.__version__, 'cuda', torch.cuda.is_available())"
  git log --oneline -1 2>/dev/null; } > "$OUT/device.txt" 2>&1

# 1. the GPU tests (skipped without CUDA): their own data, written under pytest's tmp folder
timeout 240 "$PYTHON" -m pytest -m gpu -p no:cacheprovider -q tests/loaders/test_device_loader_gpu.py \
  > "$OUT/gpu-tests.log" 2>&1
echo "gpu tests: rc=$? after $(( $(date +%s) - t0 )) s" | tee -a "$OUT/gpu-tests.log"

# 2. images for the sweep (this repository's synthetic photos, 256-400 px), then the sweep at
#    each host thread count; the .beton variants are written by the first and reused after
timeout 120 "$PYTHON" -c "
from pathlib import Path
from submission.data.synthetic_images import FolderShape, write_folder
write_folder(Path('$work/images'), FolderShape(classes=10, train_per_class=$per_class, val_per_class=2))
" > "$work/images.log" 2>&1 || { echo "images: failed"; tail -5 "$work/images.log"; }
for n in $threads; do
  timeout 170 "$PYTHON" -m submission bench sweep=loader $system dataset=imagenet data_dir="$work/images" \
    cache_dir="$work/cache" train_limit=$limit train_resolution=$side batch_per_device=$batch \
    workers_per_device=$n steps=$steps > "$OUT/sweep-threads-$n.log" 2>&1
  echo "sweep, $n threads: rc=$? after $(( $(date +%s) - t0 )) s" | tee -a "$OUT/sweep-threads-$n.log"
done
tail -n 4 "$OUT/gpu-tests.log"
for n in $threads; do grep -E "write_mode|KiB/image|rc=" "$OUT/sweep-threads-$n.log"; done
