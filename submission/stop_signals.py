"""Stopping a run on SIGTERM or SIGINT: what the trainer does when torchrun, SLURM or the
user asks it to stop, so that the run ends logging run_stop aborted "interrupted (...)"
instead of a crash, and a campaign that resumes redoes it.

Who sends what: the campaign stops torchrun with SIGTERM (Ctrl-C reaches only the
campaign: submission.launcher), torchrun passes the signal it got to each trainer's
process group (`os.killpg`), and SLURM's `scancel` or `--signal=TERM@120` sends SIGTERM
to every process of the job, the loader's worker processes included.
"""
from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Iterator
from types import FrameType

# The exit status of a trainer that stopped on a signal after logging run_stop "interrupted"
# (128 + SIGINT, the shells' status for a process Ctrl-C ended); torchrun's launcher reads it.
INTERRUPTED_EXIT = 130


class Interrupted(Exception):
    """SIGTERM/SIGINT reached the run (torchrun stopping the job, or the user)."""


def is_loader_worker_death(exc: BaseException) -> bool:
    """Whether `exc` is torch's DataLoader reporting a worker process that died (killed by
    a signal, or gone): torch's messages "DataLoader worker (pid N) is killed by signal:
    ..." and "DataLoader worker (pid(s) N) exited unexpectedly" (torch/utils/data)."""
    return isinstance(exc, RuntimeError) and str(exc).startswith("DataLoader worker (pid")


class StopRequests:
    """SIGTERM/SIGINT, noted when they arrive and acted on between training steps: raising
    from the handler could land inside a lock or a collective and turn an interruption
    into a crash. Before the training loop (set-up), a signal stops the run at once."""

    def __init__(self) -> None:
        self.signal_name = ""
        self.in_loop = False

    def install(self) -> None:
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, self._noted)

    def _noted(self, signum: int, frame: FrameType | None) -> None:
        first = not self.signal_name
        self.signal_name = self.signal_name or signal.Signals(signum).name
        if first and not self.in_loop:
            raise Interrupted(self.signal_name)

    def check(self) -> None:
        if self.signal_name:
            raise Interrupted(self.signal_name)

    def explains(self, exc: BaseException) -> bool:
        """Whether `exc` is the stop this process was asked for, not a crash: a loader
        worker that died once a stop signal was noted (the signal that reached the
        trainer reached its loader's workers too, and one of them died of it before the
        trainer's next check)."""
        return bool(self.signal_name) and is_loader_worker_death(exc)


STOP = StopRequests()


class FirstSignal:
    """The first SIGTERM or SIGINT a command received (first_signal_interrupts), and whether it
    still raises: a command writing its record after an interruption holds them."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self.held = False

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name if self.signum else ""

    @property
    def exit_status(self) -> int:
        """128 + the signal's number, as a shell reports a process the signal ended: 130, 143."""
        return 128 + (self.signum or signal.SIGINT)

    def hold(self) -> None:
        """From now on a first signal is noted and raises nothing."""
        self.held = True


@contextlib.contextmanager
def first_signal_interrupts() -> Iterator[FirstSignal]:
    """SIGTERM (SLURM's signal, a `kill`, `timeout`) stops what runs inside as Ctrl-C does: the
    first SIGTERM or SIGINT raises KeyboardInterrupt (until `hold()`), and the ones after it are
    ignored: SLURM signals every process of a job, the command's more than once (its process
    group, then each process), and a second signal while the first is being handled would cut
    the clean stop short."""
    first = FirstSignal()

    def noted(signum: int, frame: FrameType | None) -> None:
        if first.signum is None:
            first.signum = signum
            if not first.held:
                raise KeyboardInterrupt

    previous = {sig: signal.signal(sig, noted) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield first
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def die_with_parent() -> None:
    """Have the kernel send this process SIGTERM when its parent dies, so that a launcher
    killed outright (SIGKILL) does not leave its children running orphaned: torchrun's
    workers would train on and rename their log when done. torchrun starts each worker in
    a session of its own, and the campaign starts torchrun in one, so neither is reached by
    a signal to its parent's process group. Raises Interrupted if the parent is already
    gone."""
    if sys.platform.startswith("linux"):
        import ctypes
        PR_SET_PDEATHSIG = 1
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() == 1:          # the parent died before prctl took effect
            raise Interrupted("parent gone")
