"""A watchdog over FFCV's .beton writer, which a dead worker process or Ctrl-C would
otherwise leave waiting forever (interrupted_if_a_writer_dies), and the release of the
shared memory an interrupted writer keeps (release_shared_memory)."""
from __future__ import annotations

import _thread
import contextlib
import logging
import os
import signal
import threading
import time
from collections.abc import Iterator
from multiprocessing import resource_tracker
from types import FrameType
from typing import TYPE_CHECKING

import psutil

if TYPE_CHECKING:       # for the annotations only: FFCV is imported where it writes
    from ffcv.writer import DatasetWriter


class _Watch:
    """What the watchdog shares between the main thread and its watcher thread."""

    def __init__(self) -> None:
        self.me, self.parent = psutil.Process(), os.getpid()
        self.existing = {child.pid for child in self.me.children()}
        self.deaths: list[str] = []
        self.finished = threading.Event()
        self.interrupted_at: list[float] = []     # when the main thread was last interrupted

    def interrupt(self) -> None:
        self.interrupted_at.append(time.monotonic())
        _thread.interrupt_main()

    def workers(self) -> list[psutil.Process]:
        return [child for child in self.me.children() if child.pid not in self.existing]

    def watch(self) -> None:
        while not self.finished.wait(0.2):
            if self.interrupted_at:
                # still running a second later: the KeyboardInterrupt was deferred (on_ctrl_c)
                if time.monotonic() - self.interrupted_at[-1] > 1.0:
                    self.interrupt()
                continue
            died = next(((child, how) for child in self.workers()
                         if (how := abnormal_exit(child.pid))), None)
            if died:
                self.deaths.append(f"process {died[0].pid} {died[1]}")
                self.interrupt()

    def on_ctrl_c(self, signum: int, frame: FrameType | None) -> None:
        if os.getpid() != self.parent:
            return
        self.interrupted_at.append(time.monotonic())
        if frame is not None and frame.f_code.co_filename == logging.__file__:
            # inside logging's at-fork lock handling (FFCV starting a worker): raised there,
            # the exception is dropped and leaves logging's lock held for good; the watcher
            # raises it again a second later
            return
        raise KeyboardInterrupt


@contextlib.contextmanager
def interrupted_if_a_writer_dies() -> Iterator[list[str]]:
    """FFCV's writer waits until its worker processes have written every sample: one that
    dies (killed for memory, an error outside DecodeFailureRecorder) leaves it waiting
    forever. A thread watches this process's new children while the writer runs and,
    when one has exited with an error, records how and interrupts the wait (a
    KeyboardInterrupt in the main thread). Yields the list of deaths recorded.
    Ctrl-C stops this process only (the workers, forked with a handler that ignores it,
    would each print a traceback); the workers left are killed on the way out."""
    resource_tracker.ensure_running()    # a child of ours as well, which must live on
    state = _Watch()
    if threading.current_thread() is not threading.main_thread():
        yield state.deaths      # signals and interrupt_main reach the main thread only
        return
    previous = signal.signal(signal.SIGINT, state.on_ctrl_c)
    watcher = threading.Thread(target=state.watch, name="ffcv-writer-watch", daemon=True)
    watcher.start()
    try:
        try:
            yield state.deaths
        finally:
            state.finished.set()
            watcher.join()
            signal.signal(signal.SIGINT, previous)
    except BaseException:
        for child in state.workers():     # they would go on writing, or wait on a queue forever
            child.kill()
        raise


def abnormal_exit(pid: int) -> str | None:
    """How the child `pid` ended, if it has ended with an error (it stays unreaped)."""
    try:
        ended = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return None
    if ended is None or (ended.si_code == os.CLD_EXITED and ended.si_status == 0):
        return None
    if ended.si_code == os.CLD_EXITED:
        return f"exited with status {ended.si_status}"
    return f"was killed by {signal.Signals(ended.si_status).name}"


def release_shared_memory(writer: DatasetWriter) -> None:
    """The shared memory an interrupted DatasetWriter allocated (it frees it only on success)."""
    memory = getattr(writer, "metadata_sm", None)
    if memory is not None:
        memory.close()
        memory.unlink()

