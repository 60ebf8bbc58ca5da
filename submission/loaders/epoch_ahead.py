"""An epoch of the device loader's batches (device_loader.DeviceLoader), made ahead of the step
by threads of their own, so that the step's thread only takes them.

One thread gathers each batch on the host (the loader's `host`: one compiled call that leaves
the interpreter free) into a free slot of the loader's ring of host buffers. On a GPU a second
thread queues each batch's device work (`on_device`) on a CUDA stream of the loader's, records
an event after it, and hands the slot back with that event: the slot is refilled only once the
GPU has passed it (its copies done); the step's stream waits for the event before it reads the
batch, whose tensors are recorded on the step's stream (freed, they are not reused before the
step is done with them). On a CPU the step's thread does the device work when it takes a batch
(a torch operation in another thread would start an OpenMP team of its own beside the step's:
docs/ffcv-notes.md) and then hands the slot back. Exceptions reach the step's thread; leaving
the epoch stops the threads.
"""
from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from typing import Any, Generic, Protocol, TypeVar

import numpy as np
import torch

from .batch_gather import HostSlot


class _Gathered(Protocol):
    """A batch gathered on the host (device_loader.HostBatch)."""
    @property
    def slot(self) -> HostSlot: ...


Host = TypeVar("Host", bound=_Gathered)
Batch = tuple[torch.Tensor, torch.Tensor]     # images, labels on the device
# what the threads hand on: ("host", a gathered batch), ("batch", a Batch, its event), ("end",) or
# ("error", the exception), each padded with None to three
Item = tuple[str, Any, torch.cuda.Event | None]


class Source(Protocol[Host]):
    """What an epoch takes of its loader (device_loader.DeviceLoader, which imports this module)."""
    @property
    def device(self) -> torch.device: ...

    @property
    def batches_ahead(self) -> int: ...

    @property
    def seed(self) -> int: ...

    @property
    def rank(self) -> int: ...

    def ring(self) -> list[HostSlot]: ...

    def cuda_stream(self) -> torch.cuda.Stream: ...

    def host(self, indices: np.ndarray, seed: int, slot: HostSlot | None = ...) -> Host: ...

    def on_device(self, host: Host) -> Batch: ...


def batch_seed(seed: int, rank: int, epoch: int, number: int) -> int:
    """The seed of one batch's draws (crops, flips, RandAugment)."""
    return int(np.random.SeedSequence([seed, rank, epoch, number]).generate_state(1)[0])


class EpochAhead(Generic[Host]):
    """The batches `batches` (sample indices) of the loader's epoch `epoch`, `batches_ahead` of
    them made before the step takes them."""

    def __init__(self, loader: Source[Host], epoch: int, batches: list[np.ndarray]) -> None:
        self.loader, self.cuda = loader, loader.device.type == "cuda"
        self.stopping = threading.Event()
        self.made: queue.Queue = queue.Queue(maxsize=loader.batches_ahead)
        self.free: queue.Queue = queue.Queue()
        for slot in loader.ring():
            self.free.put((slot, None))
        self.threads = [threading.Thread(target=self._gather, args=(epoch, batches, self.made), daemon=True,
                                         name="device-loader")]
        if self.cuda:
            gathered: queue.Queue = queue.Queue(maxsize=1)
            self.stream = loader.cuda_stream()
            self.threads = [threading.Thread(target=self._gather, args=(epoch, batches, gathered), daemon=True,
                                             name="device-loader"),
                            threading.Thread(target=self._device, args=(gathered,), daemon=True,
                                             name="device-loader-device")]
        for thread in self.threads:
            thread.start()

    def _gather(self, epoch: int, batches: list[np.ndarray], out: queue.Queue) -> None:
        loader = self.loader
        try:
            for number, indices in enumerate(batches):
                taken = self._take(self.free)
                if taken is None:
                    return
                slot, copied = taken
                if copied is not None:
                    copied.synchronize()        # the device's copies out of this slot are done
                host = loader.host(indices, batch_seed(loader.seed, loader.rank, epoch, number), slot)
                if not self._put(out, ("host", host, None)):
                    return
            self._put(out, ("end", None, None))
        except BaseException as exc:  # noqa: BLE001 - handed to the step's thread, which raises it
            self._put(out, ("error", exc, None))

    def _device(self, gathered: queue.Queue) -> None:
        try:
            with torch.cuda.stream(self.stream):
                while (item := self._take(gathered)) is not None and item[0] == "host":
                    host = item[1]
                    made = self.loader.on_device(host)
                    event = torch.cuda.Event()
                    event.record(self.stream)
                    self.free.put((host.slot, event))
                    if not self._put(self.made, ("batch", made, event)):
                        return
            if item is not None:
                self._put(self.made, item)
        except BaseException as exc:  # noqa: BLE001 - handed to the step's thread, which raises it
            self._put(self.made, ("error", exc, None))

    def _put(self, out: queue.Queue, item: Item) -> bool:
        while not self.stopping.is_set():
            try:
                out.put(item, timeout=0.1)
                return True
            except queue.Full:
                pass
        return False

    def _take(self, source: queue.Queue) -> Any:             # an Item, or a free slot and its event
        while not self.stopping.is_set():
            try:
                return source.get(timeout=0.1)
            except queue.Empty:
                pass
        return None

    def _get(self) -> Item:
        while True:
            try:
                return self.made.get(timeout=1.0)
            except queue.Empty:
                if not any(t.is_alive() for t in self.threads) and self.made.empty():
                    raise RuntimeError("the device loader's threads ended without its batch") from None

    def __iter__(self) -> Iterator[Batch]:
        while True:
            kind, made, event = self._get()
            if kind == "end":
                return
            if kind == "error":
                raise made
            if kind == "host":
                host = made
                made = self.loader.on_device(host)
                self.free.put((host.slot, None))
            else:
                assert event is not None, "a batch made on the device carries its event"
                stream = torch.cuda.current_stream(self.loader.device)
                stream.wait_event(event)
                for tensor in made:
                    tensor.record_stream(stream)
            yield made

    def stop(self) -> None:
        self.stopping.set()
        for thread in self.threads:
            thread.join()
