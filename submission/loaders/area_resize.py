"""Crop-and-resize of a batch of images of different sizes, with the weights of OpenCV's
INTER_AREA, which FFCV's decoders resize with (`resize_crop` in FFCV's libffcv calls
`cv::resize(..., INTER_AREA)`): the device loader's crops then match FFCV's to a grey level.

OpenCV's INTER_AREA (modules/imgproc/src/resize.cpp, 4.x):
  - where the crop is at least the output in both directions: each output pixel is the mean
    of the source area it covers, partial pixels weighted by the part covered
    (`computeResizeAreaTab`);
  - otherwise (an enlargement in either direction): two taps per output pixel in each
    direction, at floor(d * scale) and the next, the second weighted
    fx = (d + 1) - (floor(d * scale) + 1) / scale in float32, less its floor (0 when <= 0),
    clamped to the image at both ends (the `area_mode` branch of the linear resize).
Both are separable: each output row is a weighted sum of a few source rows, then each output
column of a few columns. `axis_taps` computes those index/weight pairs along one direction as
resize.cpp computes them (compiled by numba inside the device loader's gather, batch_gather.py);
`resize` sums the rows and then the columns they name, in float32, on the device: two
embedding_bag sums and one copy per batch, whatever the crops' sizes and their number.
"""
from __future__ import annotations

import math

import numpy as np
import torch

AREA_EPSILON = 1e-3             # resize.cpp's threshold for a partial pixel at a cell's edge


def axis_taps(source: int, output: int, start: int, area: bool, flip: bool,
               index: np.ndarray, weight: np.ndarray) -> None:
    """Fill index[d, :], weight[d, :] (zeros past the taps used) with the source pixels
    (offset by `start`, the crop's first pixel) and weights of output pixel d along one
    direction; `flip` reverses the outputs (a horizontal flip of the resized crop)."""
    inverse = output / source          # as cv::resize computes them, to the last bit
    scale = 1.0 / inverse
    for d in range(output):
        row = output - 1 - d if flip else d
        for k in range(index.shape[1]):
            index[row, k] = start
            weight[row, k] = 0.0
        if area:                # computeResizeAreaTab
            low = d * scale
            high = low + scale
            cell = min(scale, source - low)
            first = min(math.ceil(low), source - 1)
            last = min(math.floor(high), source - 1)
            first = min(first, last)
            k = 0
            if first - low > AREA_EPSILON:
                index[row, k] = start + first - 1
                weight[row, k] = (first - low) / cell
                k += 1
            for s in range(first, last):
                index[row, k] = start + s
                weight[row, k] = 1.0 / cell
                k += 1
            if high - last > AREA_EPSILON:
                index[row, k] = start + last
                weight[row, k] = min(min(high - last, 1.0), cell) / cell
        else:                   # the linear resize's area_mode coefficients
            s = math.floor(d * scale)
            fraction = np.float32((d + 1) - (s + 1) * inverse)    # a float in resize.cpp
            fraction = 0.0 if fraction <= 0 else fraction - math.floor(fraction)
            if s < 0:
                s, fraction = 0, 0.0
            if s >= source - 1:
                s, fraction = source - 1, 0.0
            index[row, 0] = start + s
            weight[row, 0] = 1.0 - fraction
            index[row, 1] = start + min(s + 1, source - 1)
            weight[row, 1] = fraction


def most_taps(boxes: np.ndarray, output: int) -> int:
    """Taps per output pixel the batch needs: ceil(scale) + 1 when shrinking, 2 otherwise."""
    if not len(boxes):
        return 2
    return max(2, int(math.ceil(boxes[:, 2:].max() / output)) + 1)


def resize(table: torch.Tensor, index: torch.Tensor, weights: torch.Tensor, offsets: torch.Tensor,
           count: int, width: int) -> torch.Tensor:
    """(count, side, side, 3) float32 crops, each image's columns first: [n, x, y, c]. `table`:
    float32 rows of 3 x `width` values (an image's pixel rows, channels interleaved); `index`,
    `weights`: (2, count x side x taps) row taps (table rows) and column taps (n x width + x),
    `offsets` every taps-th position (a bag of taps per output row or column). Each output row is
    the weighted sum of the table rows its taps name, each output column of the columns its taps
    name in those rows: two embedding_bag sums, between them one copy turning rows to columns."""
    rows_index, columns_index = index.unbind(0)
    rows_weight, columns_weight = weights.unbind(0)
    rows = torch.embedding_bag(table, rows_index, offsets, False, 0, False, rows_weight)[0]
    del table           # the caller's was the argument: its memory goes back before the next copy
    side = rows.shape[0] // count
    columns = rows.view(count, side, width, 3).transpose(1, 2).reshape(count * width, side * 3)
    del rows
    crops = torch.embedding_bag(columns, columns_index, offsets, False, 0, False, columns_weight)[0]
    return crops.view(count, side, side, 3)
