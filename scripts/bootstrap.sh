#!/usr/bin/env bash
# One-time, idempotent set-up shared by run_and_time.sh and tests/run.sh:
#   1. the Debian packages FFCV builds against, plus the Fashion-MNIST data set;
#   2. a virtual environment (.venv, or $VENV) with the pinned Python packages.
# Each step says what it does; a step that is already done is skipped quickly.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=${VENV:-$ROOT/.venv}
PYTHON=${PYTHON:-python3}
APT_PACKAGES=(pkg-config libopencv-dev libturbojpeg0-dev dataset-fashion-mnist)

say() { printf '[setup] %s\n' "$*" >&2; }

# SLURM array tasks (a tradeoff grid) may start together on a shared file system: one sets up,
# the others wait for it and then find everything done.
exec 9>>"$ROOT/.bootstrap.lock"
if command -v flock >/dev/null && ! flock -n 9; then
    say "another set-up of $ROOT is running: waiting for it"
    flock 9
fi

missing=()
for package in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed' \
        || missing+=("$package")
done
if ((${#missing[@]})); then
    if ! command -v apt-get >/dev/null; then
        say "missing system packages: ${missing[*]}"
        say "this set-up needs a Debian/Ubuntu machine (apt-get); install the equivalents by hand and re-run"
        exit 1
    fi
    sudo=()
    if [[ $(id -u) != 0 ]]; then
        command -v sudo >/dev/null || { say "need root (or sudo) to install: ${missing[*]}"; exit 1; }
        sudo=(sudo)
    fi
    say "installing Debian packages: ${missing[*]} (FFCV's build needs the first three)"
    "${sudo[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
    say "Debian packages present: ${APT_PACKAGES[*]}"
fi

# The extras of setup.cfg to install (SETUP_EXTRAS): test always; tests/run.sh adds wandb, to test tracker=wandb.
EXTRAS=${SETUP_EXTRAS:-test}
# The stamp names the hash of setup.cfg (changing a pin re-runs the install) and holds the
# extras installed: asking for one it lacks installs again, asking for fewer does not.
stamp="$VENV/.installed-$(sha256sum "$ROOT/setup.cfg" | cut -c1-16)"
lacking=()
for extra in ${EXTRAS//,/ }; do
    grep -qx "$extra" "$stamp" 2>/dev/null || lacking+=("$extra")
done
if [[ ! -f $stamp ]] || ((${#lacking[@]})); then
    if [[ ! -x $VENV/bin/python ]]; then
        say "creating virtual environment $VENV"
        "$PYTHON" -m venv "$VENV"
    fi
    installed=$(cat "$stamp" 2>/dev/null || true)
    EXTRAS=$(printf '%s\n' $installed ${EXTRAS//,/ } | sort -u | paste -sd, -)
    say "installing pinned Python packages into $VENV, extras $EXTRAS (torch, torchvision, ffcv from source, mlperf-logging, tensorboard; first time takes a few minutes)"
    # (grep drops pip's notes about package-index folders this machine may not have)
    "$VENV/bin/python" -m pip install --quiet --upgrade pip 2>&1 | { grep -v "is ignored: it is neither" || true; } >&2
    "$VENV/bin/python" -m pip install --quiet --progress-bar off -e "$ROOT[$EXTRAS]" 2>&1 \
        | { grep -v "is ignored: it is neither" || true; } >&2
    [[ ${PIPESTATUS[0]} == 0 ]] || { say "pip install failed: see the messages above"; exit 1; }
    "$VENV/bin/python" -c 'import torch, torchvision, ffcv, mlperf_logging, tensorboard' \
        || { say "the installed packages do not import: see the error above"; exit 1; }
    rm -f "$VENV"/.installed-*
    printf '%s\n' ${EXTRAS//,/ } > "$stamp"
    say "virtual environment ready"
else
    say "virtual environment up to date: $VENV"
fi
