#!/usr/bin/env bash
# The device loader's checks on a lent GPU machine (docs/gpu-data.md, issues 61 and 67), in two
# prepared calls of at most 8 minutes each, worst case (every step's time limit and grace,
# summed, plus the kit's set-up: `step` below):
#   call 1: the GPU tests (tests/loaders/test_device_loader_gpu.py, the pinned parameter
#           buffer's in tests/methods/test_batch_parameters.py), then the loader alone by write
#           mode at 176 px (`bench sweep=loader`) with 2 and 4 host threads;
#   call 2: Mild fed by the device loader, eager and compiled (+ CUDA graphs), at 176 and 88 px,
#           FFCV's loader beside it (`bench quick=true compile=true`: the loader's device memory
#           is in its rows), then Hot fed (RandAugment on the device; torchvision's loader beside).
# Each step runs under `timeout -s INT` (pytest and the bench print what they have on SIGINT),
# its exit status is collected (124: its time ran out), and the last line is the verdict; the
# script exits 1 when any step failed or ran out of time. Everything goes to one folder,
# $OUT/device-loader-check-call<N>/ (at most 8 files, the verdict in verdict.txt); the data and
# every cache live in a private `mktemp -d` folder, removed at the end.
#
# Here, once per checkout, after the GPU kit (../shared/gpu/README.md: .gpukit, carried):
#     bash scripts/gpu/device_loader_check.sh --prepare   # pytest for the device, into .gpukit
#     (VENV=/path/to/.venv where the checkout's own .venv is elsewhere)
# On the GPU machine, from the repository root (carry: [".gpukit"]), one call each:
#     bash scripts/gpu/device_loader_check.sh 1
#     bash scripts/gpu/device_loader_check.sh 2
# Rehearsed on a CPU (a few minutes each: small data and sides, system=cpu, the GPU tests
# skipped, no compiling: compile=true is minutes of Inductor's C++ build there; limits x3):
#     OUT=/tmp/out bash scripts/gpu/device_loader_check.sh 1 --rehearse
set -u
cd "$(dirname "$0")/../.."
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
call=${1:-}; rehearse=false
[ "${2:-}" = "--rehearse" ] && rehearse=true
case "$call" in 1|2) ;; *) echo "usage: $0 1|2 [--rehearse]   (or --prepare)" >&2; exit 2 ;; esac

OUT=${OUT:?set OUT: the folder whose files come back}
rec="$OUT/device-loader-check-call$call"; mkdir -p "$rec"
work=$(mktemp -d /tmp/device-loader-check.XXXXXX)
trap 'rm -rf "$work"' EXIT
if $rehearse; then
  # a CPU: the same steps, minutes smaller; each limit as on the GPU
  PYTHON=${PYTHON:-.venv/bin/python}; classes=4; per_class=24; val=4; limit=64; batch=8; side=32
  steps=2; threads="1 2"; system="system=cpu"; compiled="compile=false"; slower=3   # a CPU's limits x3
  small_eval="eval_resolution=32 eval_resize=36"     # a 224-px evaluation on a CPU takes minutes
else
  PYTHON=${PYTHON:-python3}; classes=10; per_class=300; val=10; limit=2560; batch=256; side=176
  steps=10; threads="2 4"; system=""; compiled="compile=true cuda_graphs=true"; slower=1; small_eval=""
fi
[ -f .gpukit/env.sh ] && source .gpukit/env.sh
if ! "$PYTHON" -c "import pytest" 2>/dev/null && [ -d .gpukit/tests-site ]; then
  export PYTHONPATH=".gpukit/tests-site${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
t0=$(date +%s)
: > "$rec/verdict.txt"

# step NAME LIMIT_S LOG COMMAND...: the command under its time limit (SIGINT, then SIGKILL 10 s
# later), its output into LOG, its exit status collected into verdict.txt. The limits, worst
# case with each grace: call 1 30 + 160 + 2 x 110 + 3 x 10 = 440 s, call 2 30 + 250 + 140 +
# 3 x 10 = 450 s (Hot quick took 100 s and Mild 93 s on an H200: gpu/h200-2026-11-28), with the kit's set-up and device.txt's imports under 8 minutes.
step() {
  local name=$1 limit=$(( $2 * slower )) log=$3; shift 3
  timeout -s INT -k 10 "$limit" "$@" >> "$log" 2>&1
  local rc=$?
  local said="rc=$rc"
  [ $rc -eq 124 ] && said="rc=124 (ran out of its $limit s, stopped by SIGINT)"
  [ $rc -eq 137 ] && said="rc=137 (ran out of its $limit s, killed 10 s after SIGINT)"
  echo "$name: $said after $(( $(date +%s) - t0 )) s" | tee -a "$log" "$rec/verdict.txt"
}

{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1; nproc
  "$PYTHON" -c "import torch, torchvision, numba, numpy; print('torch', torch.__version__, 'torchvision', torchvision.__version__, 'numba', numba.__version__, 'numpy', numpy.__version__, 'cuda', torch.cuda.is_available())"
  git log --oneline -1 2>/dev/null; echo "call $call, rehearse=$rehearse, work folder $work"; } > "$rec/device.txt" 2>&1
if ! $rehearse && ! grep -q "cuda True" "$rec/device.txt"; then   # a GPU check without one proves nothing
  echo "cuda: rc=1 (torch sees no GPU: device.txt) after $(( $(date +%s) - t0 )) s" | tee -a "$rec/verdict.txt"
fi

# the data: ImageNet-format synthetic photos, 256-400 px (the kit's make_fakenet.py)
fakenet=.gpukit/make_fakenet.py; [ -f "$fakenet" ] || fakenet=../shared/gpu/make_fakenet.py
step data 30 "$rec/data.log" "$PYTHON" "$fakenet" "$work/images" $classes $per_class $val "$(nproc)"
data="dataset=imagenet data_dir=$work/images cache_dir=$work/cache"

if [ "$call" = 1 ]; then
  step gpu-tests 160 "$rec/gpu-tests.log" "$PYTHON" -m pytest -m gpu -p no:cacheprovider -q -rs \
    tests/loaders/test_device_loader_gpu.py tests/methods/test_batch_parameters.py
  for n in $threads; do      # the .beton variants: written by the first, reused by the second
    step "sweep-threads-$n" 110 "$rec/sweep-threads-$n.log" "$PYTHON" -m submission bench sweep=loader $system \
      $data train_limit=$limit train_resolution=$side batch_per_device=$batch workers_per_device=$n sweep_threads=0 steps=$steps
  done
  summary=$(grep -E "passed|failed|skipped|error|no tests ran" "$rec/gpu-tests.log" | grep -v "^gpu-tests:" | tail -n 1
    for n in $threads; do
    grep -hE "write_mode|KiB/image" "$rec/sweep-threads-$n.log"; done)
else
  step bench-mild 250 "$rec/bench-mild.log" "$PYTHON" -m submission bench $system $data recipe=mild \
    train_loader=device $compiled quick=true train_resolution=$side steps=$steps rounds=1 \
    batch_per_device=$batch $small_eval json="$rec/profile_mild.json"
  step bench-hot 140 "$rec/bench-hot.log" "$PYTHON" -m submission bench $system $data recipe=hot scale_schedule_ratio=3.0 \
    train_loader=device quick=true train_resolution=$side steps=$steps rounds=1 batch_per_device=$batch \
    $small_eval json="$rec/profile_hot.json"
  summary=$(grep -hE " px .*img/s against|loaders side by side|^  (FFCV|device|torchvision) |device memory|not measured" \
    "$rec/bench-mild.log" "$rec/bench-hot.log" 2>/dev/null)
fi

echo "$summary"
failed=$(grep -v ": rc=0 " "$rec/verdict.txt" | cut -d: -f1 | tr '\n' ' ')
if [ -n "$failed" ]; then
  verdict="verdict: FAILED (call $call): $failed- see $rec/verdict.txt and each step's log"
else
  verdict="verdict: PASSED (call $call): $(wc -l < "$rec/verdict.txt") steps, each rc=0, in $(( $(date +%s) - t0 )) s"
fi
echo "$verdict" | tee -a "$rec/verdict.txt"
[ -z "$failed" ]
