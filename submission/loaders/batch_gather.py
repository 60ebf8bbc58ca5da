"""The host's part of a device-loader batch: one compiled call (numba, `nogil`, `prange` over the
batch's images) that fills a `HostSlot`'s buffers, pinned on a GPU, while the interpreter is free
for the step's thread (docs/gpu-data.md: the loader's Python per batch does not grow with it).

The call, for the batch's samples of one .beton (beton_samples.BetonSamples):
  - the draws, in order: each image's crop and flip with FFCV's own `get_random_crop` from numba's
    generator seeded for the batch (training), or FFCV's centre crop (evaluation);
  - the TABLE the device resizes from: rows of `row_bytes` = 3 x the .beton's widest image,
    each image's pixel rows one table row each (its width's bytes used, the rest left as they
    were). Raw images are copied there; JPEGs are decoded there with FFCV's own `imdecode`
    (libjpeg-turbo, what FFCV decodes with) where the device is the CPU, or their bytes are
    gathered back to back (`jpeg_bytes`, `jpeg_lengths`) for the device's decoder, which pads
    each decoded image to a canvas of `canvas_rows` x the widest: the canvases follow the raw
    rows in the table, in the batch's JPEG order;
  - the resize's taps (area_resize.axis_taps: OpenCV's INTER_AREA weights) with each image's
    place folded in: row taps name table rows, column taps rows of the column table the device
    makes of the rows' sums (image n's column x at n x widest + x);
  - the labels, and the number libjpeg-turbo returned for each JPEG decoded here (0: decoded).
"""
from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from ..data.beton_samples import JPEG, BetonSamples
from . import area_resize

GROWTH = 1.25       # a slot outgrown by a batch is made this much larger than the batch needs

Array = np.ndarray       # the compiled gather's arguments: numpy arrays, and a few numbers

# numba's "workqueue" threading layer (where neither TBB nor OpenMP is installed) aborts the
# process when two threads launch parallel regions at once: the training and evaluation
# loaders' threads take turns
_PARALLEL = threading.Lock()


@functools.cache
def crop_drawer() -> Callable[..., None]:
    """FFCV's crop draw and a flip draw for each image of a batch, from the generator of
    numba's thread (or numpy's, where FFCV's compilation is off) seeded for the batch."""
    from ffcv.fields.rgb_image import get_random_crop
    from ffcv.pipeline.compiler import Compiler
    crop = Compiler.compile(get_random_crop)

    def draw(heights: np.ndarray, widths: np.ndarray, scale: np.ndarray, ratio: np.ndarray, seed: np.uint32,
             boxes: np.ndarray, flips: np.ndarray) -> None:
        np.random.seed(seed)
        for n in range(len(heights)):
            top, left, height, width = crop(heights[n], widths[n], scale, ratio)
            boxes[n, 0] = top
            boxes[n, 1] = left
            boxes[n, 2] = height
            boxes[n, 3] = width
            flips[n] = np.random.rand() < 0.5
    return Compiler.compile(draw)


def random_crops(heights: np.ndarray, widths: np.ndarray, crop_scale_min: float,
                 seed: int) -> tuple[np.ndarray, np.ndarray]:
    """((n, 4) boxes (top, left, height, width), (n,) flips) of RandomResizedCrop as FFCV draws
    it, and a horizontal flip with probability 1/2."""
    boxes, flips = np.empty((len(heights), 4), np.int64), np.empty(len(heights), np.bool_)
    crop_drawer()(np.asarray(heights, np.int64), np.asarray(widths, np.int64),
                  np.array((crop_scale_min, 1.0)), np.array((3 / 4, 4 / 3)), np.uint32(seed), boxes, flips)
    return boxes, flips


@dataclass(frozen=True)
class Crops:
    """How a batch's crops are drawn: FFCV's RandomResizedCrop and a flip (train), or its
    centre crop of `center_ratio` x the short side (evaluation)."""
    train: bool
    crop_scale_min: float = 0.08
    center_ratio: float = 1.0


@dataclass(frozen=True)
class Layout:
    """The shapes every batch of one loader shares: output side, taps per output pixel, the
    table's row bytes (3 x the .beton's widest image), a decoded JPEG's canvas rows (its
    tallest), and whether JPEGs are decoded on the host (a CPU device) or by the device."""
    side: int
    taps: int
    width: int
    canvas_rows: int
    decode_here: bool

    @property
    def row_bytes(self) -> int:
        return 3 * self.width

    @classmethod
    def of(cls, samples: BetonSamples, side: int, decode_here: bool) -> Layout:
        height, width = int(samples.heights.max()), int(samples.widths.max())
        return cls(side, area_resize.most_taps(np.array([[0, 0, height, width]]), side), width, height,
                   decode_here)


class HostSlot:
    """One batch's host buffers, reused batch after batch (grown when a batch needs more):
    the table's rows, the JPEGs' bytes, taps and weights (rows, columns), labels, draws."""

    def __init__(self, layout: Layout, batch_size: int, pin: bool):
        self.layout, self.pin = layout, pin
        taps = 2 * batch_size * layout.side * layout.taps
        self.index = torch.empty(taps, dtype=torch.int64, pin_memory=pin)
        self.weights = torch.empty(taps, dtype=torch.float32, pin_memory=pin)
        self.labels = torch.empty((batch_size, 1), dtype=torch.int64, pin_memory=pin)
        self.boxes, self.flips = np.empty((batch_size, 4), np.int64), np.empty(batch_size, np.bool_)
        self.jpeg_lengths, self.failed = np.empty(batch_size, np.int64), np.zeros(batch_size, np.int32)
        self.pixels = torch.empty((0, layout.row_bytes), dtype=torch.uint8)
        self.jpeg_bytes = torch.empty(0, dtype=torch.uint8)
        self._views: dict[int, tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = {}

    def views(self, count: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(index, weights) (2, count x side x taps) and labels (count, 1) of a batch of `count`
        images: views of the slot's buffers, made once per count."""
        if count not in self._views:
            taps = 2 * count * self.layout.side * self.layout.taps
            self._views[count] = (self.index[:taps].view(2, -1), self.weights[:taps].view(2, -1),
                                  self.labels[:count])
        return self._views[count]

    def fit(self, rows: int, jpeg_bytes: int) -> None:
        """Room for `rows` table rows and `jpeg_bytes` bytes of JPEGs."""
        if rows > len(self.pixels):
            self.pixels = torch.empty((int(rows * GROWTH), self.layout.row_bytes), dtype=torch.uint8,
                                      pin_memory=self.pin)
        if jpeg_bytes > len(self.jpeg_bytes):
            self.jpeg_bytes = torch.empty(int(jpeg_bytes * GROWTH), dtype=torch.uint8, pin_memory=self.pin)


@dataclass
class Gathered:
    """What the compiled call filled for a batch of `count` images: `rows` table rows, `jpegs`
    JPEGs of `jpeg_used` bytes for the device's decoder (none where they were decoded here)."""
    count: int
    rows: int
    jpegs: int
    jpeg_used: int


def gather(samples: BetonSamples, indices: np.ndarray, crops: Crops, seed: int, slot: HostSlot,
           threads: int) -> Gathered:
    """Fill `slot` with the batch of samples `indices` (its draws from `seed`) in one compiled
    call on `threads` of numba's threads."""
    import numba
    layout, count = slot.layout, len(indices)
    indices = np.ascontiguousarray(indices, np.int64)
    jpeg = samples.modes[indices] == JPEG
    on_device = jpeg & (not layout.decode_here)
    rows = int(samples.heights[indices][~on_device].sum())
    jpegs = int(on_device.sum())
    jpeg_used = int(samples.sizes[indices][on_device].sum())
    slot.fit(rows, jpeg_used)
    index, weights, labels = (view.numpy() for view in slot.views(count))
    taps = (2, count, layout.side, layout.taps)
    # numba's config sets NUMBA_NUM_THREADS from the environment, out of mypy's sight
    numba.set_num_threads(max(1, min(threads, numba.config.NUMBA_NUM_THREADS)))  # type: ignore[attr-defined]
    with _PARALLEL:
        _compiled()(samples.data(), samples.modes, samples.heights, samples.widths, samples.ptrs, samples.sizes,
                    samples.labels, indices, crops.train, np.uint32(seed),
                    np.array((crops.crop_scale_min, 1.0)), np.array((3 / 4, 4 / 3)), crops.center_ratio,
                    layout.side, layout.width, layout.canvas_rows, layout.decode_here, rows,
                    slot.pixels.numpy(), slot.jpeg_bytes.numpy(), slot.jpeg_lengths, index.reshape(taps),
                    weights.reshape(taps), labels, slot.boxes, slot.flips, slot.failed)
    return Gathered(count, rows, jpegs, jpeg_used)


@functools.cache
def _compiled() -> Callable[..., None]:
    """The gather, compiled once a process (Python where numba's JIT is off); taps without fastmath: OpenCV's floors."""
    import numba
    from ffcv.libffcv import imdecode
    draw, taps, decode = crop_drawer(), numba.njit(area_resize.axis_taps), numba.njit(nogil=True)(imdecode)

    @numba.njit(nogil=True, parallel=True)
    def batch(data: Array, modes: Array, heights: Array, widths: Array, ptrs: Array, sizes: Array, all_labels: Array,
              indices: Array, train: bool, seed: np.uint32, scale: Array, ratio: Array, center_ratio: float, side: int,
              width: int, canvas_rows: int, decode_here: bool, raw_rows: int, pixels: Array, jpeg_bytes: Array,
              jpeg_lengths: Array, index: Array, weights: Array, labels: Array, boxes: Array, flips: Array,
              failed: Array) -> None:
        count = len(indices)
        if train:
            draw(heights[indices], widths[indices], scale, ratio, seed, boxes, flips)
        starts, offsets = np.empty(count, np.int64), np.empty(count, np.int64)
        rows, jpegs, used = 0, 0, 0
        for n in range(count):             # each image's first table row, each JPEG's bytes
            sample = indices[n]
            labels[n, 0] = all_labels[sample]
            if not train:                  # FFCV's get_center_crop
                short = min(heights[sample], widths[sample])
                crop = int(center_ratio * short)
                boxes[n, 0] = (heights[sample] - crop) // 2
                boxes[n, 1] = (widths[sample] - crop) // 2
                boxes[n, 2] = crop
                boxes[n, 3] = crop
                flips[n] = False
            if modes[sample] == JPEG and not decode_here:
                starts[n] = raw_rows + jpegs * canvas_rows
                offsets[n] = used
                jpeg_lengths[jpegs] = sizes[sample]
                used += sizes[sample]
                jpegs += 1
            else:
                starts[n] = rows
                rows += heights[sample]
        for n in numba.prange(count):
            sample = indices[n]
            height, width_n = heights[sample], widths[sample]
            top, left, crop_height, crop_width = boxes[n, 0], boxes[n, 1], boxes[n, 2], boxes[n, 3]
            area = crop_height >= side and crop_width >= side
            taps(crop_height, side, starts[n] + top, area, False, index[0, n], weights[0, n])
            taps(crop_width, side, n * width + left, area, flips[n], index[1, n], weights[1, n])
            stored = data[ptrs[sample]:ptrs[sample] + sizes[sample]]
            failed[n] = 0
            if modes[sample] != JPEG:
                pixels[starts[n]:starts[n] + height, :3 * width_n] = stored.reshape(height, 3 * width_n)
            elif decode_here:
                decoded = np.empty(height * width_n * 3, np.uint8)
                failed[n] = decode(stored, decoded, height, width_n, height, width_n, 0, 0, 1, 1, False, False)
                pixels[starts[n]:starts[n] + height, :3 * width_n] = decoded.reshape(height, 3 * width_n)
            else:
                jpeg_bytes[offsets[n]:offsets[n] + sizes[sample]] = stored
    return batch
