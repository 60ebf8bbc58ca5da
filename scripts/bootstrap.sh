#!/usr/bin/env bash
# One-time, idempotent set-up shared by run_and_time.sh and tests/run.sh:
#   1. the Debian packages FFCV builds against, plus the Fashion-MNIST data set;
#   2. a virtual environment (.venv, or $VENV) with the pinned Python packages;
#   3. on request (SETUP_EXTRAS=...,pillow-simd), Pillow-SIMD built in place of Pillow.
# Each step says what it does; a step that is already done is skipped quickly.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=${VENV:-$ROOT/.venv}
PYTHON=${PYTHON:-python3}
APT_PACKAGES=(pkg-config libopencv-dev libturbojpeg0-dev dataset-fashion-mnist)
# Pillow-SIMD: built from source, in place of Pillow; once chosen it stays chosen (this file)
PILLOW_SIMD_VERSION=12.1.1.post0
SIMD_CHOSEN="$VENV/.pillow-simd"

say() { printf '[setup] %s\n' "$*" >&2; }

# SLURM array tasks (a tradeoff grid) may start together on a shared file system: one sets up,
# the others wait for it and then find everything done.
exec 9>>"$ROOT/.bootstrap.lock"
if command -v flock >/dev/null && ! flock -n 9; then
    say "another set-up of $ROOT is running: waiting for it"
    flock 9
fi

# The extras of setup.cfg to install (SETUP_EXTRAS): test always; tests/run.sh adds wandb, to test
# tracker=wandb. pillow-simd is no extra of setup.cfg but the choice of step 3.
EXTRAS=${SETUP_EXTRAS:-test}
want_simd=false
if [[ ,$EXTRAS, == *,pillow-simd,* ]] || [[ -f $SIMD_CHOSEN ]]; then
    want_simd=true
    EXTRAS=$(printf "%s\n" ${EXTRAS//,/ } | { grep -vx pillow-simd || true; } | paste -sd, -)
    EXTRAS=${EXTRAS:-test}
fi
if [[ $want_simd == true ]]; then
    APT_PACKAGES+=(zlib1g-dev libjpeg-dev)      # the least Pillow's build from source needs
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

# 3. Pillow-SIMD in place of Pillow (docs/cpu-augment.md): the same PIL package, with SIMD kernels
# for resizing, filters and colour conversion. Its documented install: uninstall Pillow, then
# CC="cc -mavx2" pip install --force-reinstall pillow-simd. Here the wheel is built first, never
# taken from pip's cache (it may hold a build with other flags), so a build that fails leaves
# Pillow as it was; once installed, torchvision and the harness must import it and resize with
# it, or Pillow is put back. pip installs Pillow again whenever it installs the pinned packages
# (torchvision asks for it): this step then builds Pillow-SIMD again.
pillow_build() { "$VENV/bin/python" -c 'from submission.data.pillow_build import pillow_build; print(pillow_build())'; }
simd_works() {     # torchvision and the harness import it, and a crop resizes with it
    "$VENV/bin/python" -c '
import torchvision.transforms as T
from PIL import Image
from submission.loaders import torchvision_loader
from submission.data.pillow_build import pillow_build
assert pillow_build().startswith("Pillow-SIMD"), pillow_build()
image = T.RandomResizedCrop(32)(Image.new("RGB", (96, 64), (200, 100, 50)))
assert image.size == (32, 32) and abs(sum(image.getpixel((5, 5))) - 350) <= 3, image.getpixel((5, 5))
' >&2
}
if [[ $want_simd == true ]]; then
    running=$(pillow_build)
    if [[ $running == "Pillow-SIMD $PILLOW_SIMD_VERSION" ]]; then
        say "Pillow-SIMD in place of Pillow: $running"
    else
        case $running in "Pillow "*) plain="pillow==${running#Pillow }" ;; *) plain=pillow ;; esac
        flags=""
        grep -qw avx2 /proc/cpuinfo 2>/dev/null && flags="-mavx2"      # else Pillow-SIMD's own -msse4
        say "building Pillow-SIMD $PILLOW_SIMD_VERSION from source in place of $running, CC=\"${CC:-cc} $flags\" (a few minutes)"
        wheels=$(mktemp -d)
        if CC="${CC:-cc} $flags" "$VENV/bin/python" -m pip wheel --quiet --no-cache-dir --no-deps --no-binary pillow-simd \
                -w "$wheels" "pillow-simd==$PILLOW_SIMD_VERSION" > "$wheels/build.log" 2>&1; then
            if "$VENV/bin/python" -m pip uninstall --quiet -y pillow \
                    && "$VENV/bin/python" -m pip install --quiet --no-deps --force-reinstall "$wheels"/pillow_simd-*.whl \
                    && simd_works; then
                touch "$SIMD_CHOSEN"
                say "Pillow-SIMD in place of Pillow: $(pillow_build); torchvision and the harness import it"
                say "(back to Pillow: rm $SIMD_CHOSEN; $VENV/bin/pip uninstall -y pillow-simd; $VENV/bin/pip install $plain)"
            else
                say "Pillow-SIMD built, but did not install or did not work with torchvision or the harness (above): putting $plain back"
                "$VENV/bin/python" -m pip uninstall --quiet -y pillow-simd || true
                "$VENV/bin/python" -m pip install --quiet --force-reinstall "$plain"
                rm -f "$SIMD_CHOSEN"
                say "now: $(pillow_build)"
            fi
        else
            tail -n 25 "$wheels/build.log" >&2
            say "Pillow-SIMD did not build (the build's last lines above): $running stays, and works"
            rm -f "$SIMD_CHOSEN"
        fi
        rm -rf "$wheels"
    fi
fi
