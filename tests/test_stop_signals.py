"""Stopping a run on a signal: what the trainer counts as an interruption and not a crash."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from submission.stop_signals import Interrupted, StopRequests, first_signal_interrupts, is_loader_worker_death

from conftest import GPUS_HIDDEN, REPO

WORKER_DEATH_PROBE = '''
import json, multiprocessing, os, signal, time
import torch
from torch.utils.data import DataLoader, Dataset


class Slow(Dataset):
    def __len__(self):
        return 64

    def __getitem__(self, index):
        time.sleep(0.05)
        return index


batches = iter(DataLoader(Slow(), batch_size=2, num_workers=1))
next(batches)
os.kill(multiprocessing.active_children()[0].pid, signal.SIGKILL)
try:
    for _ in batches:
        time.sleep(0.05)
    error = None
except RuntimeError as exc:
    error = str(exc)
print(json.dumps({"error": error}))
'''


@pytest.mark.e2e
def test_a_loader_workers_death_is_recognised_from_torchs_own_error(tmp_path):
    """torch's DataLoader reports a worker killed under it with its own message; the check
    reads that message, so it is tested against the installed torch's."""
    (tmp_path / "probe.py").write_text(WORKER_DEATH_PROBE)
    done = subprocess.run([sys.executable, str(tmp_path / "probe.py")], cwd=REPO, capture_output=True,
                          text=True, timeout=120,
                          env={"PYTHONPATH": str(REPO), "PATH": os.environ["PATH"], **GPUS_HIDDEN})
    assert done.returncode == 0, done.stderr[-3000:]
    error = json.loads(done.stdout.strip().splitlines()[-1])["error"]
    assert error and ("killed by signal" in error or "exited unexpectedly" in error), error
    assert is_loader_worker_death(RuntimeError(error))
    assert not is_loader_worker_death(RuntimeError("CUDA error: an illegal memory access"))
    assert not is_loader_worker_death(ValueError(error))


def test_a_workers_death_is_an_interruption_only_after_a_stop_signal():
    worker_death = RuntimeError("DataLoader worker (pid 4242) is killed by signal: Terminated. ")
    stop = StopRequests()
    assert not stop.explains(worker_death)            # no signal noted: a crash
    stop.in_loop = True
    stop._noted(signal.SIGTERM, None)                 # in the loop: noted, acted on later
    assert stop.signal_name == "SIGTERM"
    assert stop.explains(worker_death)
    assert not stop.explains(RuntimeError("shapes do not match"))
    with pytest.raises(Interrupted, match="SIGTERM"):
        stop.check()


def test_a_signal_during_set_up_stops_at_once_and_the_first_signal_is_kept():
    stop = StopRequests()
    with pytest.raises(Interrupted, match="SIGINT"):
        stop._noted(signal.SIGINT, None)
    stop._noted(signal.SIGTERM, None)                 # a second one: noted already, no raise
    assert stop.signal_name == "SIGINT"


def test_the_first_stop_signal_interrupts_once_and_a_held_command_only_notes_it():
    """What qualify stops on: the first SIGTERM raises KeyboardInterrupt as Ctrl-C does (exit
    status 143, a shell's for SIGTERM), the signals after it are ignored; once the command holds
    them (its record being written), a first signal is noted and raises nothing."""
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    with first_signal_interrupts() as first:
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGINT)           # ignored: SLURM signals a job more than once
        assert first.name == "SIGTERM" and first.exit_status == 143
    with first_signal_interrupts() as held:
        held.hold()
        os.kill(os.getpid(), signal.SIGINT)
        assert held.name == "SIGINT" and held.exit_status == 130
    assert {sig: signal.getsignal(sig) for sig in before} == before      # the handlers before, again
