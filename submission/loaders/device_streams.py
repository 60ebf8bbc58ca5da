"""The device loader's streams and events, behind one seam: every place the loader orders work
between its stages, or waits for the device, goes through a `Streams` (docs/gpu-data.md: the
pipeline's stages and what each waits for). On CUDA they are CUDA streams and events
(`CudaStreams`); on a CPU work is done when its call returns, and the seam does nothing
(`HostStreams`). A test puts its own stand-in in its place (tests/loaders/test_slot_protocol.py
records the order of the operations and checks that no ring slot is written before the event
of its last read completed).

`UNSAFE` holds the switches that turn the fixes of issue 67 off, for the tests' controls only
(a test that must fail without the fix sets them; no setting reaches them).
"""
from __future__ import annotations

from collections.abc import Iterable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any, Protocol

import torch

Stream = Any        # a torch.cuda.Stream, or what a stand-in makes
Event = Any         # a torch.cuda.Event, None (a CPU's: done), or what a stand-in records


class Streams(Protocol):
    def new(self) -> Stream: ...                                  # a stream of the loader's own

    def current(self) -> Stream: ...                              # this thread's current stream

    def using(self, stream: Stream) -> AbstractContextManager: ...    # `stream` current in the block

    def record(self, stream: Stream) -> Event: ...                # an event after the work queued on it

    def wait(self, stream: Stream, event: Event) -> None: ...     # later work on `stream` after `event`

    def done(self, event: Event) -> bool: ...                     # has the device passed `event`?

    def synchronize(self, event: Event) -> None: ...              # the host waits for `event`

    def synchronize_device(self) -> None: ...                     # the host waits for every stream

    def hand_over(self, tensors: Iterable[torch.Tensor], stream: Stream) -> None: ...
    # `tensors`, made on another stream, are read on `stream`: their blocks are not reused
    # before `stream` has passed its work on them (Tensor.record_stream)


class CudaStreams:
    """CUDA streams and events of one device."""

    def __init__(self, device: torch.device):
        self.device = device

    def new(self) -> torch.cuda.Stream:
        return torch.cuda.Stream(self.device)

    def current(self) -> torch.cuda.Stream:
        return torch.cuda.current_stream(self.device)

    def using(self, stream: torch.cuda.Stream) -> AbstractContextManager:
        return torch.cuda.stream(stream)

    def record(self, stream: torch.cuda.Stream) -> torch.cuda.Event:
        event = torch.cuda.Event()
        event.record(stream)
        return event

    def wait(self, stream: torch.cuda.Stream, event: Event) -> None:
        if event is not None:
            stream.wait_event(event)

    def done(self, event: Event) -> bool:
        return event is None or bool(event.query())

    def synchronize(self, event: Event) -> None:
        if event is not None:
            event.synchronize()

    def synchronize_device(self) -> None:
        torch.cuda.synchronize(self.device)

    def hand_over(self, tensors: Iterable[torch.Tensor], stream: torch.cuda.Stream) -> None:
        for tensor in tensors:
            tensor.record_stream(stream)


class HostStreams:
    """A CPU's: each operation is done when its call returns; nothing to order or wait for."""

    def new(self) -> None:
        return None

    def current(self) -> None:
        return None

    def using(self, stream: Stream) -> AbstractContextManager:
        return nullcontext()

    def record(self, stream: Stream) -> None:
        return None

    def wait(self, stream: Stream, event: Event) -> None:
        pass

    def done(self, event: Event) -> bool:
        return True

    def synchronize(self, event: Event) -> None:
        pass

    def synchronize_device(self) -> None:
        pass

    def hand_over(self, tensors: Iterable[torch.Tensor], stream: Stream) -> None:
        pass


def streams_of(device: torch.device) -> Streams:
    """The seam for `device`: CUDA's streams, or a CPU's none."""
    return CudaStreams(device) if device.type == "cuda" else HostStreams()


@dataclass
class Unsafe:
    """The fixes of issue 67, each turned off (True) by a test's control, never by a run:
    `forget_slots` puts every ring slot back as free with no event at each epoch's start (the race
    at epoch boundaries); `shared_decode_stream` decodes on the loader's compute stream,
    unsynchronized, its outputs handed over unrecorded (nvJPEG writing blocks that queued kernels
    still read); `no_error_sync` lets a failed decode's outputs go without waiting for the device."""
    forget_slots: bool = False
    shared_decode_stream: bool = False
    no_error_sync: bool = False


UNSAFE = Unsafe()
