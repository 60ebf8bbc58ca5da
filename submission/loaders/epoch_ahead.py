"""An epoch of the device loader's batches (device_loader.DeviceLoader), made ahead of the step by
three stages on threads of their own, so that the step's thread only takes them and a batch
costs about its slowest stage, not their sum (docs/gpu-data.md, with a diagram):

  gather     (host)   a slot claimed from the loader's ring (slot_ring: once the device has
                      passed its last read), the batch gathered into it by one compiled call
                      that leaves the interpreter free;
  decode     the batch's JPEGs decoded on a stream that runs nothing but the decoder (nvJPEG;
                      on a CPU no JPEG is left to decode: the gather decoded them), an event
                      after it; a slot read, noted on the ring;
  transform  on the loader's compute stream, after the decode's event: the copies out of the
                      slot, the crops' resize, the augmentation; an event after it, noted on the
                      ring as the slot's last read, the slot released, the batch handed on.

No stage waits on the host for another's kernels: the streams wait for each other's events,
the decoded images are recorded on the compute stream that reads them (their blocks are not
handed to the decoder again before it is done), and the step's stream waits for the batch's
event and records its tensors. The streams and events are the loader's seam
(device_streams.Streams: nothing on a CPU). An exception in any stage is handed down the
stages to the step's thread, which raises it; leaving the epoch stops all three threads and
hands the slots they held back to the ring.
"""
from __future__ import annotations

import queue
import threading
import time
from collections.abc import Iterator
from typing import Any, Generic, Protocol, TypeVar

import numpy as np
import torch

from .batch_gather import HostSlot
from .device_streams import UNSAFE, Event, Stream, Streams
from .slot_ring import SlotRing


class _Gathered(Protocol):
    """A batch gathered on the host (device_loader.HostBatch)."""
    @property
    def slot(self) -> HostSlot: ...


class _Timings(Protocol):
    """What the stages measure (device_loader.BatchTimings)."""
    def took(self, part: str, seconds: float) -> None: ...

    def claimed(self, seconds: float, host_waits: int) -> None: ...


Host = TypeVar("Host", bound=_Gathered)
Batch = tuple[torch.Tensor, torch.Tensor]     # images, labels on the device
# what the stages hand on: ("host", a gathered batch, decoded JPEGs or None, the decode's event),
# ("batch", a Batch, its event), ("end",) or ("error", the exception), padded with None to four
Item = tuple[str, Any, Any, Event]
END: Item = ("end", None, None, None)


class Source(Protocol[Host]):
    """What an epoch takes of its loader (device_loader.DeviceLoader, which imports this module)."""
    @property
    def batches_ahead(self) -> int: ...

    @property
    def seed(self) -> int: ...

    @property
    def rank(self) -> int: ...

    @property
    def streams(self) -> Streams: ...

    @property
    def timings(self) -> _Timings: ...

    def slot_ring(self) -> SlotRing: ...

    def stage_streams(self) -> tuple[Stream, Stream]: ...     # decode, compute

    def host(self, indices: np.ndarray, seed: int, slot: HostSlot | None = ...) -> Host: ...

    def decode(self, host: Host, synchronize: bool) -> list[torch.Tensor] | None: ...

    def transform(self, host: Host, decoded: list[torch.Tensor] | None) -> Batch: ...


def batch_seed(seed: int, rank: int, epoch: int, number: int) -> int:
    """The seed of one batch's draws (crops, flips, RandAugment)."""
    return int(np.random.SeedSequence([seed, rank, epoch, number]).generate_state(1)[0])


class EpochAhead(Generic[Host]):
    """The batches `batches` (sample indices) of the loader's epoch `epoch`, `batches_ahead` of
    them made before the step takes them."""

    def __init__(self, loader: Source[Host], epoch: int, batches: list[np.ndarray]) -> None:
        self.loader, self.streams, self.ring = loader, loader.streams, loader.slot_ring()
        if UNSAFE.forget_slots:
            self.ring.forget()
        self.decode_stream, self.compute_stream = loader.stage_streams()
        if UNSAFE.shared_decode_stream:
            self.decode_stream = self.compute_stream
        self.stopping = threading.Event()
        gathered: queue.Queue = queue.Queue(maxsize=1)
        decoded: queue.Queue = queue.Queue(maxsize=1)
        self.made: queue.Queue = queue.Queue(maxsize=max(1, loader.batches_ahead))
        self.threads = [
            threading.Thread(target=self._gather, args=(epoch, batches, gathered), daemon=True,
                             name="device-loader-gather"),
            threading.Thread(target=self._decode, args=(gathered, decoded), daemon=True,
                             name="device-loader-decode"),
            threading.Thread(target=self._transform, args=(decoded,), daemon=True, name="device-loader-transform")]
        for thread in self.threads:
            thread.start()

    def _gather(self, epoch: int, batches: list[np.ndarray], out: queue.Queue) -> None:
        loader = self.loader
        try:
            for number, indices in enumerate(batches):
                start, waits = time.perf_counter(), self.ring.host_waits
                slot = self.ring.claim(self.stopping)
                if slot is None:
                    return
                loader.timings.claimed(time.perf_counter() - start, self.ring.host_waits - waits)
                host = loader.host(indices, batch_seed(loader.seed, loader.rank, epoch, number), slot)
                if not self._put(out, ("host", host, None, None)):
                    return
            self._put(out, END)
        except BaseException as exc:  # noqa: BLE001 - handed down the stages to the step's thread
            self._put(out, ("error", exc, None, None))

    def _decode(self, gathered: queue.Queue, out: queue.Queue) -> None:
        streams, stream = self.streams, self.decode_stream
        try:
            with streams.using(stream):
                while (item := self._take(gathered)) is not None and item[0] == "host":
                    host = item[1]
                    decoded = self.loader.decode(host, synchronize=False)
                    event = None
                    if decoded is not None:
                        event = streams.record(stream)
                        self.ring.read(host.slot, event)
                    if not self._put(out, ("host", host, decoded, event)):
                        return
            if item is not None:
                self._put(out, item)
        except BaseException as exc:  # noqa: BLE001 - handed down the stages to the step's thread
            self._put(out, ("error", exc, None, None))

    def _transform(self, decoded: queue.Queue) -> None:
        streams, stream = self.streams, self.compute_stream
        try:
            with streams.using(stream):
                while (item := self._take(decoded)) is not None and item[0] == "host":
                    _, host, images, decode_event = item
                    streams.wait(stream, decode_event)
                    try:
                        made = self.loader.transform(host, images)
                    finally:        # whatever was queued of the batch: its reads end before this event
                        event = streams.record(stream)
                        self.ring.read(host.slot, event)
                        self.ring.release(host.slot)
                    if images is not None and not UNSAFE.shared_decode_stream:
                        streams.hand_over(images, stream)
                    del images
                    if not self._put(self.made, ("batch", made, None, event)):
                        return
            if item is not None:
                self._put(self.made, item)
        except BaseException as exc:  # noqa: BLE001 - handed to the step's thread, which raises it
            self._put(self.made, ("error", exc, None, None))

    def _put(self, out: queue.Queue, item: Item) -> bool:
        while not self.stopping.is_set():
            try:
                out.put(item, timeout=0.1)
                return True
            except queue.Full:
                pass
        return False

    def _take(self, source: queue.Queue) -> Item | None:
        while not self.stopping.is_set():
            try:
                return source.get(timeout=0.1)
            except queue.Empty:
                pass
        return None

    def _get(self) -> Item:
        start = time.perf_counter()
        while True:
            try:
                item = self.made.get(timeout=1.0)
                self.loader.timings.took("batch", time.perf_counter() - start)
                return item
            except queue.Empty:
                if not any(t.is_alive() for t in self.threads) and self.made.empty():
                    raise RuntimeError("the device loader's threads ended without its batch") from None

    def __iter__(self) -> Iterator[Batch]:
        streams = self.streams
        while True:
            kind, made, _, event = self._get()
            if kind == "end":
                return
            if kind == "error":
                raise made
            stream = streams.current()
            streams.wait(stream, event)
            streams.hand_over(made, stream)
            yield made

    def stop(self) -> None:
        self.stopping.set()
        for thread in self.threads:
            thread.join()
        self.ring.return_held()
