"""The per-image parameters of a batched augmentation (randaugment_batch.py,
trivialaugment_batch.py), drawn and computed on the host, sent to the device in one copy.

Each parameter is a numpy array with the dtype and shape its device tensor takes (`HostArray`).
`ParameterStaging.send` packs a batch's parameters into one host buffer, each at an offset
aligned to 8 bytes, copies the buffer to the device once and returns a view of it per
parameter. On a GPU the buffer is pinned and reused, and the copy is non-blocking: the host
queues it and goes on, and before the next batch rewrites the buffer it waits for the event
recorded after the copy (the copy reads the buffer until then). Many small
`torch.as_tensor(..., device=)` copies from pageable memory would each make the host wait.
On a CPU the "copy" is the buffer itself (`.to` of a CPU tensor returns it), so each batch
gets a buffer of its own: its views are read only while the batch is augmented.

The device operations are the same on both: one `.to`, one view of the buffer per dtype,
one `as_strided` per parameter (torch_ops counts them)."""
from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np
import torch
from numpy.typing import ArrayLike

ALIGN = 8              # bytes: every parameter starts at a multiple of the largest itemsize
SMALLEST_BUFFER = 4096
NUMPY_DTYPES = {torch.uint8: np.uint8, torch.int16: np.int16, torch.int32: np.int32, torch.int64: np.int64,
                torch.float32: np.float32, torch.float64: np.float64}


@dataclass(frozen=True)
class HostArray:
    """A parameter on the host: its values, and the dtype and shape of its device tensor."""
    values: np.ndarray
    dtype: torch.dtype
    shape: tuple[int, ...]

    @staticmethod
    def of(values: ArrayLike, dtype: torch.dtype, *shape: int) -> HostArray:
        """`values` (as many as the shape holds; -1 in the shape: as many as there are) as
        `dtype`, converted as torch.as_tensor converts them."""
        array = np.ascontiguousarray(np.asarray(values).astype(NUMPY_DTYPES[dtype])).reshape(shape)
        return HostArray(array, dtype, tuple(array.shape))


def _layout(arrays: list[HostArray]) -> tuple[list[int], int]:
    """Each array's byte offset in the buffer, and the bytes the buffer needs."""
    offsets, end = [], 0
    for array in arrays:
        offsets.append(end)
        end += -(-array.values.nbytes // ALIGN) * ALIGN
    return offsets, max(end, ALIGN)


def _contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(size, 1)
    return tuple(reversed(strides))


class ParameterStaging:
    """One batch's parameters to the device at a time (see the module's note); a loader keeps
    one, so that its pinned buffer is reused batch after batch."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pinned: torch.Tensor | None = None
        self._raw = np.empty(0, np.uint8)                 # the pinned buffer's bytes, to numpy
        self._copied: torch.cuda.Event | None = None     # recorded after the last copy from _pinned

    def send(self, arrays: list[HostArray], device: torch.device) -> list[torch.Tensor]:
        """`arrays` on `device`, in one copy: a view of the copy for each."""
        offsets, size = _layout(arrays)
        if device.type != "cuda":
            raw = _fill(np.empty(size, np.uint8), arrays, offsets)
            return _views(torch.from_numpy(raw).to(device), arrays, offsets)
        with self._lock:
            host = self._buffer(size)
            _fill(self._raw, arrays, offsets)
            on_device = host.to(device, non_blocking=True)
            self._copied = torch.cuda.Event()
            self._copied.record(torch.cuda.current_stream(device))
        return _views(on_device, arrays, offsets)

    def _buffer(self, size: int) -> torch.Tensor:
        """The pinned buffer, once the last copy from it is done; a larger one where `size`
        bytes do not fit."""
        if self._copied is not None:
            self._copied.synchronize()
        if self._pinned is None or self._pinned.numel() < size:
            capacity = max(SMALLEST_BUFFER, 1 << (size - 1).bit_length())
            self._pinned = torch.empty(capacity, dtype=torch.uint8, pin_memory=True)
            self._raw = self._pinned.numpy()
        return self._pinned


def _fill(raw: np.ndarray, arrays: list[HostArray], offsets: list[int]) -> np.ndarray:
    """`raw` (bytes) with each array's bytes at its offset."""
    for array, offset in zip(arrays, offsets):
        raw[offset:offset + array.values.nbytes] = array.values.reshape(-1).view(np.uint8)
    return raw


def _views(buffer: torch.Tensor, arrays: list[HostArray], offsets: list[int]) -> list[torch.Tensor]:
    """A tensor of each array's dtype and shape over its bytes of `buffer`."""
    typed = {dtype: buffer.view(dtype) for dtype in dict.fromkeys(array.dtype for array in arrays)}
    return [typed[array.dtype].as_strided(array.shape, _contiguous_strides(array.shape),
                                          offset // array.values.itemsize)
            for array, offset in zip(arrays, offsets)]
