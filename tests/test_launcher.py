"""submission.launcher: torchrun, quiet when the run was interrupted and as loud as torchrun
when a worker crashed, on real torchrun jobs of one small worker script."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import GPUS_HIDDEN, REPO

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

# A worker as the trainer stops: on SIGTERM or SIGINT it takes a moment (logging run_stop),
# records the signal and exits with the trainer's status for an interruption.
WORKER = '''
import os, signal, sys, time
from pathlib import Path
from submission.stop_signals import INTERRUPTED_EXIT

def stop(signum, frame):
    time.sleep(1.5)
    Path(sys.argv[1]).write_text(signal.Signals(signum).name)
    sys.exit(INTERRUPTED_EXIT)

signal.signal(signal.SIGTERM, stop)
signal.signal(signal.SIGINT, stop)
if sys.argv[2] == "crash":
    raise RuntimeError("the worker crashed")
if sys.argv[2] == "interrupted":
    sys.exit(INTERRUPTED_EXIT)
Path(sys.argv[1] + ".started").write_text("")
time.sleep(120)
'''


def _launcher(tmp_path: Path, mode: str, **popen) -> subprocess.Popen:
    (tmp_path / "worker.py").write_text(WORKER)
    return subprocess.Popen(
        [sys.executable, "-m", "submission.launcher", "--standalone", "--nproc_per_node=1",
         "--max_restarts=0", str(tmp_path / "worker.py"), str(tmp_path / "stopped"), mode],
        cwd=REPO, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONPATH": str(REPO), **GPUS_HIDDEN}, **popen)


def _wait_for(path: Path, job: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert job.poll() is None, job.stdout.read()
        assert time.monotonic() < deadline, f"no {path.name}"
        time.sleep(0.1)


def test_a_crashed_worker_shows_its_traceback_and_torchruns_report(tmp_path):
    job = _launcher(tmp_path, "crash")
    output, _ = job.communicate(timeout=120)
    assert job.returncode == 1
    assert "RuntimeError: the worker crashed" in output            # the worker's traceback
    assert "worker.py FAILED" in output and "exitcode  : 1" in output   # torchrun's report


def test_workers_that_stopped_on_a_signal_end_it_quietly(tmp_path):
    job = _launcher(tmp_path, "interrupted")
    output, _ = job.communicate(timeout=120)
    assert job.returncode == 130
    assert "Traceback" not in output and "FAILED" not in output, output


@pytest.mark.parametrize("signals", [1, 2], ids=["one-sigterm", "sigterm-twice-as-slurm-and-the-campaign"])
def test_a_stopped_torchrun_stops_its_worker_and_ends_quietly(tmp_path, signals):
    """SIGTERM to torchrun (the campaign's; with SLURM, SLURM's too, a moment apart, while
    torchrun is stopping its worker): the worker gets the signal and has the time it takes
    to stop; torchrun ends with 128 + SIGTERM and no traceback."""
    job = _launcher(tmp_path, "run")
    _wait_for(tmp_path / "stopped.started", job)
    for _ in range(signals):
        job.send_signal(signal.SIGTERM)
        time.sleep(0.5)
    output, _ = job.communicate(timeout=120)
    assert job.returncode == 128 + signal.SIGTERM
    assert (tmp_path / "stopped").read_text() == "SIGTERM"
    assert "Traceback" not in output, output


def test_torchrun_stops_its_worker_when_the_campaign_is_killed(tmp_path):
    """torchrun runs in a session of its own, out of reach of a SIGKILL to the campaign's
    process group: when its parent dies it stops its worker by itself."""
    (tmp_path / "worker.py").write_text(WORKER)
    # the launcher's parent: a shell standing in for the campaign
    shell = subprocess.Popen(
        ["bash", "-c", f'"{sys.executable}" -m submission.launcher --standalone --nproc_per_node=1 '
                       f'--max_restarts=0 "{tmp_path / "worker.py"}" "{tmp_path / "stopped"}" run & wait'],
        cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO), **GPUS_HIDDEN}, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not (tmp_path / "stopped.started").exists():
            assert time.monotonic() < deadline, "the worker did not start"
            time.sleep(0.1)
        shell.kill()                     # the launcher's parent, killed outright
        shell.wait()
        deadline = time.monotonic() + 60
        while not (tmp_path / "stopped").exists():
            assert time.monotonic() < deadline, "the worker was not stopped"
            time.sleep(0.1)
        assert (tmp_path / "stopped").read_text() == "SIGTERM"
    finally:
        try:
            os.killpg(shell.pid, signal.SIGKILL)     # whatever of it is left
        except ProcessLookupError:
            pass


def test_torchruns_stop_handler_raises_on_the_first_signal_only(monkeypatch):
    # SLURM's SIGTERM and then the campaign's reach torchrun: the second, raised while the agent
    # logs the first, printed logging's traceback into the run's transcript
    from torch.distributed.elastic.multiprocessing import api

    from submission import launcher

    monkeypatch.setattr(api, "_terminate_process_handler", api._terminate_process_handler)
    launcher.first_signal_only()
    with pytest.raises(api.SignalException, match="got signal: 15"):
        api._terminate_process_handler(signal.SIGTERM, None)
    assert api._terminate_process_handler(signal.SIGTERM, None) is None
    assert api._terminate_process_handler(signal.SIGINT, None) is None
