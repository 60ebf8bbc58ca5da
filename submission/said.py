"""Lines that a command repeating one step (a grid's points, each preparing its data and
launching its run) says once: inside `once_each()`, `say(line)` prints a line it has not
printed before and drops one it has; outside, it prints every line."""
from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import TextIO

_said: set[str] | None = None


def say(line: str, file: TextIO | None = None) -> None:
    """Print `line` (to `file`, default stdout), unless once_each() is on and it was said."""
    if _said is not None:
        if line in _said:
            return
        _said.add(line)
    print(line, file=file or sys.stdout, flush=True)


@contextlib.contextmanager
def once_each() -> Iterator[None]:
    global _said
    previous, _said = _said, set()
    try:
        yield
    finally:
        _said = previous
