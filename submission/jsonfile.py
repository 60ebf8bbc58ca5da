"""JSON files written atomically: a kill or a full disk mid-write leaves the old file or
the new one, never half of one.

The campaign's records (results.py) and the data preparation's (data.json, the image
manifests of data/image_checks.py) are written here. This module imports nothing of the
package, so that every writer can use it.
"""
from __future__ import annotations

import json
import os
from pathlib import Path


def write_json(path: Path, data, *, compact: bool = False) -> None:
    """Write `data` as JSON to `path` under a temporary name, flushed to disk, then renamed
    over it. Indented one space a level (for people) unless `compact`: no whitespace at
    all, for a file too large to be read by eye (an entry per image, 1.3 M on ImageNet)."""
    path = Path(path)
    text = json.dumps(data, separators=(",", ":")) if compact else json.dumps(data, indent=1)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "w") as f:
            f.write(text + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
