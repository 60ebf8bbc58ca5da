"""A lock held on a file (flock: the kernel releases it when its holder ends, however it ends),
with the holder's pid written in it for the one who finds it taken. One campaign or tradeoff
point per results folder (runs.Lock), one qualify per scratch folder (qualify/claim.py),
and one build of a package at a time (package.py: a lock on the folder itself).

This module imports nothing of the package, so that every writer can use it."""
from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TextIO


class Held(Exception):
    """Another process holds the lock: `holder` is its pid as written there ("?": not written yet)."""

    def __init__(self, holder: str) -> None:
        super().__init__(f"held by pid {holder}")
        self.holder = holder


def take(path: Path) -> TextIO:
    """`path` (made if need be) locked by this process, its pid written in it: the open file,
    which holds the lock until it is closed. Held when another process holds it."""
    handle = open(path, "a+")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _written(handle)
        handle.close()
        raise Held(holder) from None
    handle.seek(0)
    handle.truncate()
    handle.write(str(os.getpid()))
    handle.flush()
    return handle


@contextlib.contextmanager
def folder_held(folder: Path, wait: Callable[[], None]) -> Iterator[None]:
    """`folder` itself locked while inside, no file made in it (a folder that lists only what
    it holds: package/); another holder: `wait()` is called, then this waits for it."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            wait()
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)        # which releases the lock


def holder(path: Path) -> str | None:
    """The pid written in the lock `path` while another process holds it, else None; nothing is
    created or written (a command about to refuse writes nothing)."""
    if not Path(path).is_file():
        return None
    with open(path) as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _written(handle)
        fcntl.flock(handle, fcntl.LOCK_UN)
    return None


def _written(handle: TextIO) -> str:
    handle.seek(0)
    return handle.read().strip() or "?"
