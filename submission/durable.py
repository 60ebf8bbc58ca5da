"""Files put in place so that a power loss leaves the old one or the new one whole, never an
empty file under the final name: the new file's bytes reach the disk (fsync) before it is
renamed over its place, and the folder's entry after. Every writer that renames what it wrote
into place (a run's result log, the JSON records, a .beton, a package) does it here.

This module imports nothing of the package, so that every writer can use it."""
from __future__ import annotations

import os
from pathlib import Path


def flush(path: Path) -> None:
    """`path`'s bytes (a file) or its entries (a folder) written through to the disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def flush_tree(folder: Path) -> None:
    """Every file under `folder`, then every folder from the deepest up."""
    for parent, _, files in os.walk(folder, topdown=False):
        for name in files:
            flush(Path(parent) / name)
        flush(Path(parent))


def put_in_place(new: Path, final: Path) -> None:
    """`new` (a file, or a folder: each file in it) flushed to the disk, renamed to `final`
    (over a file there; a folder must not be there), then the folder that holds it flushed."""
    new, final = Path(new), Path(final)
    if new.is_dir():
        flush_tree(new)
    else:
        flush(new)
    os.replace(new, final)
    flush(final.parent)
