"""The torch operations a piece of work calls from Python, counted with torch.profiler: what a
loader's per-batch device work costs the interpreter (docs/gpu-data.md). The profiler sees on a
CPU the same operators a CUDA run calls (their kernels differ, the calls do not); it sees only
the thread that counts.

An operator is counted where Python calls it: those it calls in turn (aten::to's aten::copy_)
are its own work. A named part of the work (a `torch.profiler.record_function` range) in
`parts` is counted apart; one in `as_one` counts as one operator, under its own name, for a
call that is one operator on the device it stands for (torchvision's decode_jpeg: one
`image::decode_jpegs_cuda` on a GPU, one call per image on a CPU).

The profiler's own library (kineto, C++) writes to the process's stderr as it starts and
stops: `USDT ... profiler_start`/`profiler_stop`, and on a machine without CUDA `ERROR ...
gpuGetDeviceCount failed with code 35` (no device: nothing wrong for a CPU count). Those lines
are dropped (file descriptor 2 caught around the start and the stop, anything else caught
there written back), so that the bench's output carries only its own."""
from __future__ import annotations

import os
import re
import sys
import tempfile
from collections import Counter
from collections.abc import Callable, Generator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

# kineto's log lines: LEVEL:date time pid:tid file:line] message
KINETO_LINE = re.compile(r"(USDT:.*\] profiler_(start|stop)|ERROR:.*\] gpuGetDeviceCount failed with code \d+)$")


@dataclass(frozen=True)
class OpCount:
    """Operators called from Python outside the parts counted apart, in order (a part counted as
    one under its name), and how many each part counted apart called."""
    names: tuple[str, ...]
    parts: dict[str, int] = field(default_factory=dict)

    @property
    def ops(self) -> int:
        return len(self.names)


def count_ops(work: Callable[[], object], parts: tuple[str, ...] = (),
              as_one: tuple[str, ...] = ()) -> tuple[object, OpCount]:
    """(what `work()` returned, the operators it called from Python), `parts` counted apart."""
    from torch.profiler import ProfilerActivity, profile
    profiler = profile(activities=[ProfilerActivity.CPU])
    with kineto_lines_dropped():
        profiler.start()
    try:
        result = work()
    finally:
        with kineto_lines_dropped():
            profiler.stop()
    names: list[str] = []
    counted: Counter = Counter({part: 0 for part in parts})
    for event in profiler.events():
        if event.name in as_one:
            names.append(event.name)
        if "::" not in event.name:
            continue
        ancestors = []
        parent = event.cpu_parent
        while parent is not None:
            ancestors.append(parent.name)
            parent = parent.cpu_parent
        if any("::" in name for name in ancestors):
            continue                    # called by an operator, not by Python
        part = next((name for name in ancestors if name in parts or name in as_one), None)
        if part is None:
            names.append(event.name)
        elif part in parts:
            counted[part] += 1
    return result, OpCount(tuple(names), dict(counted))


@contextmanager
def kineto_lines_dropped() -> Generator[None, Any, None]:
    """File descriptor 2 caught while the block runs, then written back without kineto's
    start, stop and no-device lines (KINETO_LINE): C++ writes there, past sys.stderr."""
    sys.stderr.flush()
    kept = os.dup(2)
    with tempfile.TemporaryFile() as caught:
        os.dup2(caught.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(kept, 2)
            os.close(kept)
            caught.seek(0)
            lines = caught.read().decode(errors="replace").splitlines(keepends=True)
            others = "".join(line for line in lines if not KINETO_LINE.search(line.rstrip("\n")))
            if others:
                sys.stderr.write(others)
                sys.stderr.flush()
