"""What a process does to put files in place, in order: each fsync (the path its descriptor
names) and each rename (os.rename, os.replace and pathlib's, which call them). For the tests of
submission/durable.py: `recording()` in this process, or `sitecustomize()` for every process a
test starts (a campaign, torchrun, its workers), each appending its lines to one file."""
from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from pathlib import Path

ENV = "FSYNC_RECORD"          # the file a started process appends its lines to


def install(write) -> None:
    """Wrap os.fsync, os.rename and os.replace so that each call is passed to `write` first."""
    fsync, rename, replace = os.fsync, os.rename, os.replace

    def recorded_fsync(fd):
        write(["fsync", os.readlink(f"/proc/self/fd/{fd if isinstance(fd, int) else fd.fileno()}")])
        return fsync(fd)

    def recorded(name, call):
        def move(src, dst, *args, **kwargs):
            write([name, os.path.abspath(src), os.path.abspath(dst)])
            return call(src, dst, *args, **kwargs)
        return move
    os.fsync, os.rename, os.replace = recorded_fsync, recorded("rename", rename), recorded("rename", replace)


@contextlib.contextmanager
def recording(monkeypatch) -> Iterator[list]:
    """The calls of this process while inside, as lists ["fsync", path] / ["rename", src, dst]."""
    calls: list = []
    for name in ("fsync", "rename", "replace"):
        monkeypatch.setattr(os, name, getattr(os, name))      # restored when the test ends
    install(calls.append)
    yield calls


def sitecustomize(folder: Path, record: Path) -> dict[str, str]:
    """A sitecustomize.py in `folder` that records every process started with the returned
    environment into `record`."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sitecustomize.py").write_text(
        f"import sys\nsys.path.insert(0, {str(Path(__file__).parent)!r})\n"
        "import fsync_recorder\nfsync_recorder.install_from_env()\n")
    return {ENV: str(record), "PYTHONPATH": os.pathsep.join(
        p for p in (str(folder), os.environ.get("PYTHONPATH", "")) if p)}


def install_from_env() -> None:
    path = os.environ.get(ENV)
    if not path:
        return

    def write(call: list) -> None:
        with open(path, "a") as f:
            f.write(json.dumps([os.getpid(), *call]) + "\n")
    install(write)


def read(record: Path) -> list[list]:
    """The lines a sitecustomize recorder wrote: [pid, "fsync", path] or [pid, "rename", src, dst]."""
    return [json.loads(line) for line in record.read_text().splitlines()]


def flushed_before_renamed(calls: list[list], final: str) -> tuple[bool, bool]:
    """For the last rename onto `final`: (its source was fsynced before it, the folder after it)."""
    renames = [i for i, call in enumerate(calls) if call[0] == "rename" and call[2] == final]
    assert renames, f"nothing was renamed onto {final}"
    at = renames[-1]
    source = calls[at][1]
    before = any(call == ["fsync", source] for call in calls[:at])
    after = any(call == ["fsync", os.path.dirname(final)] for call in calls[at + 1:])
    return before, after
