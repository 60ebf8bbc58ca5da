"""A .beton's samples without FFCV's pipeline, for the loaders that decode themselves
(torchvision_loader: PIL in DataLoader workers; device_loader: on the run's device): where
each image's bytes lie, how they are stored, and its label.

The layout read is the one data/prepare.py writes with FFCV 1.0 (its file format 2): a field
"image" (RGBImageField: per sample its mode, 0 a JPEG or 1 raw HxWx3 uint8 pixels, its width,
height and data_ptr) and a field "label" (IntField); the allocation table gives the size of
the bytes at each data_ptr (what FFCV's memory managers read).

`layout_problem` reads only the file's header and field descriptors, no sample and no label,
so that prepare can refuse a file before run_start; `BetonSamples` reads the per-sample table
(labels among it), which a run does after run_start, as FFCV's Loader does.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import ConfigError

JPEG, RAW = 0, 1             # ffcv.fields.rgb_image.IMAGE_MODES["jpg"], ["raw"]
FIELDS = (("image", "RGBImageField"), ("label", "IntField"))


def layout_problem(path: str | Path) -> str | None:
    """Why `path` is not a .beton of FIELDS in the FFCV format this FFCV reads, or None."""
    from ffcv.types import CURRENT_VERSION, TYPE_ID_HANDLER, FieldDescType, HeaderType
    from ffcv.utils import decode_null_terminated_string
    try:
        header = np.fromfile(path, dtype=HeaderType, count=1)
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    if len(header) < 1:
        return "is empty or cut short (no FFCV header)"
    version = int(header[0]["version"])
    if version != CURRENT_VERSION:
        return f"is FFCV file format {version}; this FFCV reads format {CURRENT_VERSION}"
    descriptors = np.fromfile(path, dtype=FieldDescType, count=int(header[0]["num_fields"]),
                              offset=HeaderType.itemsize)
    found = tuple((decode_null_terminated_string(d["name"]),
                   getattr(TYPE_ID_HANDLER.get(int(d["type_id"])), "__name__", f"type {int(d['type_id'])}"))
                  for d in descriptors)
    if found != FIELDS:
        return ("holds the fields " + (", ".join(f"{name} ({kind})" for name, kind in found) or "none")
                + ", not " + " and ".join(f"{name} ({kind})" for name, kind in FIELDS))
    return None


def refuse_unreadable(path: str | Path, loader: str) -> None:
    """A ConfigError saying what to do when `loader` cannot read the .beton at `path`."""
    problem = layout_problem(path)
    if problem:
        raise ConfigError(
            f"the {loader} loader cannot read {path}: it {problem}. It reads the .beton files this "
            "harness's prepare writes; delete this one (or give another cache_dir=) so that prepare "
            "writes it again from the images, or train with train_loader=ffcv")


class BetonSamples:
    """Every sample's storage (mode, height, width, data_ptr, byte size) and label, as arrays
    indexed by sample; the bytes through a memory map opened on first use in each process (a
    copy pickled to a worker process maps the file itself)."""

    def __init__(self, path: str | Path, loader: str = "device"):
        from ffcv.reader import Reader
        refuse_unreadable(path, loader)
        reader = Reader(str(path))
        self.path = str(path)
        images = reader.metadata["f0"]
        self.modes = np.array(images["mode"], dtype=np.uint8)
        self.heights = np.array(images["height"], dtype=np.int64)
        self.widths = np.array(images["width"], dtype=np.int64)
        self.ptrs = np.array(images["data_ptr"], dtype=np.int64)
        self.labels = np.array(reader.metadata["f1"], dtype=np.int64)
        table = np.sort(reader.alloc_table, order="ptr")
        self.sizes = np.array(table["size"][np.searchsorted(table["ptr"], self.ptrs)], dtype=np.int64)
        self._data: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.labels)

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_data": None}

    def data(self) -> np.ndarray:
        """The whole file's bytes, a read-only memory map (as a plain array: numba reads it)."""
        if self._data is None:
            self._data = np.memmap(self.path, dtype=np.uint8, mode="r").view(np.ndarray)
        return self._data

    def stored(self, index: int) -> np.ndarray:
        """Sample `index`'s bytes as stored: a JPEG's file, or raw HxWx3 pixels (flat)."""
        start = int(self.ptrs[index])
        return self.data()[start:start + int(self.sizes[index])]

    def pixels(self, index: int) -> np.ndarray:
        """A raw sample's HxWx3 uint8 pixels (a view of the file)."""
        return self.stored(index).reshape(int(self.heights[index]), int(self.widths[index]), 3)
