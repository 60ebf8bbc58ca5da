"""Shared fixtures: small real data (Fashion-MNIST subsets), the settings that keep
integration runs short on a 2-core machine, and a faked machine (GPUs, host, usable CPUs)."""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn

import pytest

from submission import inventory

REPO = Path(__file__).resolve().parent.parent

# The suite checks what CI checks, on the CPU: on a GPU machine the GPUs are hidden from it
# and from every process it starts (before torch looks for them), so that `system=local`,
# a dry run of `system=p4d` and the like meet the machine the tests were written for. The
# GPU path is measured with `python -m submission bench` and a campaign (docs/gpu-h100.md);
# the tests marked `gpu` (skipped without CUDA) see the GPUs when a run selects them alone:
# `python -m pytest -m gpu tests/...` (docs/gpu-data.md).
GPUS_HIDDEN = {"CUDA_VISIBLE_DEVICES": "", "HIP_VISIBLE_DEVICES": ""}   # for a child's own env=


def pytest_configure(config):
    if config.option.markexpr.strip() != "gpu":
        os.environ.update(GPUS_HIDDEN)

# Under pytest-xdist (tests/run.sh) each worker runs on its own share of this process's CPUs,
# and so does every process its tests start (they inherit it): the harness fits torch's threads
# and the loaders' to the CPUs a process may use, and two campaigns given both CPUs each would
# fight over them (OpenMP threads that spin while they wait for each other).
_WORKER, _WORKERS = os.environ.get("PYTEST_XDIST_WORKER"), int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
if _WORKER and _WORKERS > 1 and hasattr(os, "sched_setaffinity"):
    _CPUS = sorted(os.sched_getaffinity(0))
    if len(_CPUS) >= _WORKERS:
        os.sched_setaffinity(0, _CPUS[int(_WORKER.removeprefix("gw")) % _WORKERS::_WORKERS])

# The suite checks behaviour, not speed: LLVM's optimisation of the pipelines FFCV compiles
# with numba costs seconds in every process that loads data (docs/test-suite.md), and no
# assertion depends on how fast a loader runs. The bench and the campaigns users run keep
# numba's default.
os.environ.setdefault("NUMBA_OPT", "0")

# A test marked `loaders_interpreted` is about what surrounds the loader (campaigns, torchrun,
# signals, SLURM, trackers): the processes it starts (given `child_env()`) run FFCV's pipelines
# as plain Python (numba's NUMBA_DISABLE_JIT, the mode FFCV's Compiler offers), which saves
# each trainer the ~20 s numba spends compiling them and FFCV's import on one CPU
# (docs/test-suite.md). The pytest process keeps its own environment: numba re-reads it
# whenever it compiles, and a dispatcher made while it is set would stay uncompiled. Numba
# compiles, as in every user's run, for the tests in this process (the loaders' threads,
# epochs left early) and in the processes of the tests about what it compiles and runs (the
# warm-up's compiled pipelines and buffers, the one-CPU tests).
LOADERS_INTERPRETED = {"NUMBA_DISABLE_JIT": "1"}
_started_interpreted = False     # the test running now is marked loaders_interpreted


@pytest.fixture(autouse=True)
def _loaders_interpreted_where_marked(request):
    global _started_interpreted
    _started_interpreted = request.node.get_closest_marker("loaders_interpreted") is not None
    yield
    _started_interpreted = False


def child_env(**extra: str) -> dict[str, str]:
    """The environment of a process the running test starts: this one's, loaders interpreted
    where the test is so marked, and `extra`."""
    return {**os.environ, **(LOADERS_INTERPRETED if _started_interpreted else {}), **extra}


def pytest_collection_modifyitems(items):
    """The end-to-end tests first: under pytest-xdist (tests/run.sh) the minutes-long ones
    start while the quick ones are left to fill the workers' last minutes."""
    items.sort(key=lambda item: item.get_closest_marker("e2e") is None)


def _session_folder(tmp_path_factory) -> Path:
    """The folder every pytest-xdist worker of this session shares (its own base without them)."""
    root = tmp_path_factory.getbasetemp()
    return root.parent if _WORKER else root


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory) -> Path:
    """One .beton cache for the whole session, shared by its pytest-xdist workers (a file is
    written under a lock beside it, data/beton_cache.py): each subset is converted once."""
    shared = _session_folder(tmp_path_factory) / "beton-cache"
    shared.mkdir(exist_ok=True)
    return shared


# ---- what a test needs set up: skipped where a person runs the suite, a failure in CI --------
# In CI (CI=true) a skip goes unnoticed among a thousand passes: a test whose set-up fails there
# (a package its fixture installs, a daemon it starts, the data scripts/bootstrap.sh installs)
# fails, saying what. Only a GPU, an optional extra or external data its module names skip in CI
# too, with pytest.skip or skipif directly (tests/test_setup_skips.py holds the list).
def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")


def cannot_set_up(what: str) -> NoReturn:
    """The running test cannot set up what it needs (`what`: what and why): it skips, or in
    CI fails."""
    if in_ci():
        pytest.fail(f"set-up failed, and CI (CI=true) does not skip it: {what}", pytrace=False)
    pytest.skip(what)


def set_up_needed(present: bool, what: str) -> pytest.MarkDecorator:
    """A mark for a test that needs `what`: where it is not `present`, cannot_set_up(what)
    before the test runs (pytest_runtest_setup)."""
    return pytest.mark.set_up_needed(present=present, what=what)


def pytest_runtest_setup(item):
    for mark in item.iter_markers("set_up_needed"):
        if not mark.kwargs["present"]:
            cannot_set_up(mark.kwargs["what"])


@contextlib.contextmanager
def one_worker_at_a_time(tmp_path_factory, name: str) -> Iterator[None]:
    """Inside, no other pytest-xdist worker of this session is inside with the same `name` (a
    package manager's install: two apt-get at once, one fails on dpkg's lock); the second waits."""
    with open(_session_folder(tmp_path_factory) / f"{name}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield               # closing the file releases the lock


# quick_settings' data and batch: 10 steps of a run at 0.5 epochs, 0.7 s each on one core of
# the 2-vCPU build machine (1.4 s at batch 64, where most of a quick run's seconds went:
# docs/test-suite.md)
QUICK_TRAIN_IMAGES, QUICK_EVAL_IMAGES, QUICK_BATCH = 640, 200, 32


def quick_settings(results: Path, cache: Path, **extra) -> list[str]:
    """A real Mild run, scaled to seconds: Fashion-MNIST subset, small batch, short budget."""
    settings = {
        "system": "cpu", "results_dir": results, "cache_dir": cache,
        "train_limit": QUICK_TRAIN_IMAGES, "eval_limit": QUICK_EVAL_IMAGES, "batch_per_device": QUICK_BATCH,
        "epochs": 0.5, "warmup_epochs": 0.1, "eval_every_epochs": 0.25,
        "ema_half_life_batches": 4, "ema_update_every_batches": 2,
        "workers_per_device": 1, "progress_every_steps": 5, "package": "false",
        # tests/test_warmup.py covers the warm-up; test_train.py's learning test runs it
        "warmup": "false",
    }
    settings.update(extra)
    return [f"{key}={value}" for key, value in settings.items()]


def mild_model(**overrides):
    """ResNet-50 built as the Mild recipe builds it (BlurPool, its initialisation, channels last)."""
    from submission.model import build_model
    options = dict(blurpool=True, init_conv="kaiming_normal", init_bn_gamma="uniform",
                   logit_bias_init="log_prior", zero_init_residual=False, channels_last=True)
    options.update(overrides)
    return build_model(1000, **options)


def mllog_events(path: Path) -> list[dict]:
    """The events of an MLPerf result file, in order (each `:::MLLOG` line's JSON)."""
    return [json.loads(line.split(":::MLLOG ", 1)[1])
            for line in path.read_text().splitlines() if ":::MLLOG " in line]


def first_run_of(folder: Path, recipe: str) -> tuple[list[str], dict]:
    """A campaign's first run as its recipe defines it: a log both rulesets' checkers accept,
    naming `recipe`. Its methods as logged, and the campaign's settings."""
    from submission.compliance import check_path
    from submission.results import read_campaign
    result = folder / "resnet" / "result_0.txt"
    assert all(verdict.passed for verdict in check_path(result, ("2.0.0", "4.0.0")))
    (event,) = [e for e in mllog_events(result) if e["key"] == "recipe"]
    assert event["value"] == recipe, event
    return event["metadata"]["methods"], read_campaign(folder).settings


def run_submission(*args: str, timeout: float = 600, **kwargs) -> subprocess.CompletedProcess:
    kwargs.setdefault("env", child_env())
    return subprocess.run([sys.executable, "-m", "submission", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=timeout, **kwargs)


@contextlib.contextmanager
def campaign_from_a_terminal(*args: str):
    """`python -m submission ARGS` as a terminal runs it, in a process group of its own
    (Ctrl-C: os.killpg(campaign.pid, signal.SIGINT)), its output piped (stdout and stderr
    together); killed with its group if it is still running at the end. A shell's
    background job (CI started with `&`) inherits SIGINT ignored, and Python then never
    raises KeyboardInterrupt: the default is restored for it."""
    campaign = subprocess.Popen([sys.executable, "-m", "submission", *args], cwd=REPO,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                start_new_session=True, env=child_env(),
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        yield campaign
    finally:
        if campaign.poll() is None:
            os.killpg(campaign.pid, signal.SIGKILL)
            campaign.wait()


def descendants(pid: int) -> list[int]:
    """`pid` and every process below it, whatever session or process group it is in."""
    found = [pid]
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as children:
                for child in children.read().split():
                    found += descendants(int(child))
    except FileNotFoundError:
        pass
    return found


def running(pid: int) -> bool:
    """Whether process `pid` still runs (a zombie left for its parent to reap has ended)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for(predicate, timeout: float, what: str) -> None:
    """Poll `predicate` every half second until it holds; an AssertionError after `timeout` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


# A faked machine for system=local and the preflight checks (no GPU here)
H100 = inventory.GPU("NVIDIA H100 80GB HBM3", 85_520_000_000, "1980 MHz (max SM clock)",
                     "PCIe Gen5 x16", nvlink=False)
A100_40 = inventory.GPU("NVIDIA A100-SXM4-40GB", 42_298_000_000, "1410 MHz (max SM clock)",
                        "PCIe Gen4 x16", nvlink=True)
A100_80 = inventory.GPU("NVIDIA A100-SXM4-80GB", 85_100_000_000)
A100_PCIE = inventory.GPU("NVIDIA A100-PCIE-40GB", 42_298_000_000)
T4 = inventory.GPU("Tesla T4", 15_828_000_000)
P4D_HOST = (96, 1_121 * 2**30)     # a p4d.24xlarge's 1152 GiB, less what the kernel keeps


@pytest.fixture
def gpus(monkeypatch):
    """A faked machine: the GPUs the test adds, on a host with a p4d.24xlarge's CPUs and memory."""
    found: list[inventory.GPU] = []
    monkeypatch.setattr(inventory, "probe", lambda: list(found))
    monkeypatch.setattr(inventory, "host", lambda: P4D_HOST)
    return found


@pytest.fixture
def cpus(monkeypatch):
    """The CPUs this process may run on (its affinity)."""
    import os
    usable = {"count": 96}
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(usable["count"])))
    return usable
