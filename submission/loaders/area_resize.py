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
column of a few columns. `taps` computes those index/weight pairs (compiled by numba) as
resize.cpp computes them; `resize` copies the rows and columns they name from images padded
to the batch's largest (the padding is never named) and sums them, in float32, on the device:
a few row copies and multiply-adds per batch, whatever the crops' sizes.
"""
from __future__ import annotations

import functools
import math

import numpy as np
import torch

AREA_EPSILON = 1e-3             # resize.cpp's threshold for a partial pixel at a cell's edge


def _axis_taps(source: int, output: int, start: int, area: bool, flip: bool,
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


@functools.cache
def _compiled_batch_taps():
    """The taps of every image of a batch, compiled by numba (plain Python where numba's JIT is
    disabled); without fastmath, so that the floors fall where OpenCV's do."""
    import numba
    axis = numba.njit(_axis_taps)

    @numba.njit
    def batch_taps(boxes, flips, output, rows_index, rows_weight, cols_index, cols_weight):
        for n in range(boxes.shape[0]):
            top, left, height, width = boxes[n, 0], boxes[n, 1], boxes[n, 2], boxes[n, 3]
            area = height >= output and width >= output
            axis(height, output, top, area, False, rows_index[n], rows_weight[n])
            axis(width, output, left, area, flips[n], cols_index[n], cols_weight[n])
    return batch_taps


def most_taps(boxes: np.ndarray, output: int) -> int:
    """Taps per output pixel the batch needs: ceil(scale) + 1 when shrinking, 2 otherwise."""
    if not len(boxes):
        return 2
    return max(2, int(math.ceil(boxes[:, 2:].max() / output)) + 1)


def taps(boxes: np.ndarray, flips: np.ndarray, output: int):
    """(rows_index, rows_weight, cols_index, cols_weight), each (n, output, most_taps): the
    source rows and columns, in image coordinates, and weights of each output row and column
    of every image's crop `boxes[n]` (top, left, height, width) resized to output x output."""
    count, width = len(boxes), most_taps(boxes, output)
    rows_index, cols_index = (np.zeros((count, output, width), np.int64) for _ in range(2))
    rows_weight, cols_weight = (np.zeros((count, output, width), np.float32) for _ in range(2))
    _compiled_batch_taps()(np.ascontiguousarray(boxes, np.int64), np.ascontiguousarray(flips, np.bool_),
                           output, rows_index, rows_weight, cols_index, cols_weight)
    return rows_index, rows_weight, cols_index, cols_weight


def resize(canvas: torch.Tensor, taps_on_device) -> torch.Tensor:
    """(n, output, output, 3) float32 crops of `canvas` (n, H, W, 3 uint8, contiguous: each image
    at its top left, padded), with the taps of `taps` (already on canvas's device): each output
    row a weighted sum of a few whole source rows (copied as rows), then each output column of a
    few columns of those (the rows turned to columns first). Channels last, as the step takes."""
    rows_index, rows_weight, cols_index, cols_weight = taps_on_device
    count, height, width, channels = canvas.shape
    output = rows_index.shape[1]
    images = torch.arange(count, device=canvas.device).view(count, 1)
    flat = canvas.view(count * height, width * channels)
    rows = torch.zeros((count * output, width * channels), dtype=torch.float32, device=canvas.device)
    for k in range(rows_index.shape[2]):
        picked = flat.index_select(0, (images * height + rows_index[:, :, k]).view(-1))
        rows.addcmul_(picked.float(), rows_weight[:, :, k].reshape(-1, 1))
    columns = rows.view(count, output, width, channels).transpose(1, 2).reshape(count * width, output * channels)
    crops = torch.zeros((count * output, output * channels), dtype=torch.float32, device=canvas.device)
    for k in range(cols_index.shape[2]):
        picked = columns.index_select(0, (images * width + cols_index[:, :, k]).view(-1))
        crops.addcmul_(picked, cols_weight[:, :, k].reshape(-1, 1))
    return crops.view(count, output, output, channels).transpose(1, 2)       # (n, y, x, c)
