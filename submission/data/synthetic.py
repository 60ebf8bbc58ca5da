"""The synthetic .beton files the loaders are warmed up on before run_start.

Beside the data, `prepare` writes a small .beton of random images for each split, with
the same write settings and the split's largest stored height and width
(warmup.warm_up_loaders reads them).
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ..jsonfile import write_json
from .beton_cache import cached_beton


class SyntheticSplit:
    """Random-noise images with labels in the data set's class range: the file a split's
    loader is warmed up on before run_start (warmup.py). Its first image has the split's
    largest stored height and width, the others are no larger: FFCV sizes a decoder's
    scratch buffer by the file's largest height and width, so the warm-up's buffers come
    out the size of the run's (on a GPU they are pinned, and torch's host cache hands a
    freed block on only to a request of its power-of-two size)."""
    SMALL_SHAPE = (48, 64)

    def __init__(self, count: int, num_classes: int, largest: tuple[int, int]):
        self.count, self.num_classes, self.largest = count, num_classes, tuple(largest)

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, index: int) -> tuple[np.ndarray, int]:
        shape = self.largest if index == 0 else tuple(map(min, self.SMALL_SHAPE, self.largest))
        image = np.random.default_rng(index).integers(0, 256, (*shape, 3), dtype=np.uint8)
        return image, index % self.num_classes

    def fingerprint(self) -> str:
        return f"synthetic {self.count} images, largest {self.largest}, classes {self.num_classes}"


def largest_stored_image(path: str | Path) -> tuple[int, int]:
    """The largest stored height and width among a .beton's images, from its metadata (no
    image is decoded), read by `prepare` before any run starts. Kept beside the file
    (`<name>.largest.json`, for this file's size and modification time): reading it again
    means importing FFCV, whose first typed dict compiles for seconds in every process
    (docs/test-suite.md), where a campaign that reuses its data needs no FFCV otherwise."""
    path = Path(path)
    memo = path.with_name(path.name + ".largest.json")
    stat = path.stat()
    stamp = [stat.st_size, stat.st_mtime_ns]
    try:
        known = json.loads(memo.read_text())
        if known["file"] == stamp:
            return int(known["height"]), int(known["width"])
    except (OSError, ValueError, KeyError, TypeError):
        pass                                # absent, or written by something else: read the file
    from ffcv.reader import Reader
    reader = Reader(str(path))
    images = reader.metadata[f"f{reader.field_names.index('image')}"]
    height, width = int(images["height"].max()), int(images["width"].max())
    try:
        write_json(memo, {"file": stamp, "height": height, "width": width})
    except OSError:
        pass                                # a read-only cache: read the file next time too
    return height, width


def synthetic_beton_like(path: Path, count: int, num_classes: int, folder: Path,
                         settings: dict, workers: int) -> Path:
    """The cached synthetic .beton of `count` images shaped like the .beton at `path`."""
    split = SyntheticSplit(count, num_classes, largest_stored_image(path))
    return cached_beton(split, folder, "synthetic", settings, workers)
