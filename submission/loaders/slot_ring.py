"""The device loader's ring of host slots (batch_gather.HostSlot, pinned on a GPU), owned by the
loader for as long as it lives, with the event of each slot's last device read: every writer
(an epoch's gather, a batch gathered outside an epoch: `ops_per_batch`, a measurement) waits on
that event before it writes, whichever epoch, error or measurement queued the read. Ownership
that each epoch's start reset was a race at the epoch boundary: the first gathers of an epoch
overwrote pinned memory the copies of the last epoch's batches were still reading
(docs/gpu-data.md).

A slot is free (in order of its release, the oldest first), or held by an epoch's stages from
its gather until its batch's device work is queued (`release`); reads are noted as they are
queued (`read`), so a slot handed back by a stopped epoch (`return_held`) keeps the event of
the last read queued on it. Host waits (a writer finding its slot's event not yet passed) are
counted: on the steady path there are none, the ring holding more slots than the stages do.
"""
from __future__ import annotations

import threading
from collections import deque

from .batch_gather import HostSlot
from .device_streams import UNSAFE, Event, Streams


class SlotRing:
    """`slots`, their last reads' events, which are free."""

    def __init__(self, slots: list[HostSlot], streams: Streams):
        self.slots, self.streams = slots, streams
        self._free: deque[HostSlot] = deque(slots)
        self._held: list[HostSlot] = []
        self._last_read: dict[int, Event] = {}
        self._changed = threading.Condition()
        self.host_waits = 0          # writers that waited for the device, since the ring was made

    def claim(self, stopping: threading.Event) -> HostSlot | None:
        """The oldest free slot, held, once the device has passed its last read (None: stopping)."""
        with self._changed:
            while not self._free:
                if stopping.is_set():
                    return None
                self._changed.wait(0.1)
            slot = self._free.popleft()
            self._held.append(slot)
        self._wait_last_read(slot)
        return slot

    def borrow(self) -> HostSlot:
        """A slot for a batch gathered outside an epoch (it stays free: no epoch runs meanwhile),
        once the device has passed its last read."""
        with self._changed:
            if not self._free:
                raise RuntimeError("a batch gathered outside an epoch while an epoch of the same loader holds every "
                                   "ring slot: close that epoch first")
            slot = self._free[0]
            self._free.rotate(-1)
        self._wait_last_read(slot)
        return slot

    def read(self, slot: HostSlot, event: Event) -> None:
        """The device reads `slot` in work queued before `event` (after its earlier reads)."""
        with self._changed:
            self._last_read[id(slot)] = event

    def release(self, slot: HostSlot) -> None:
        """`slot`'s batch has all its reads queued: free again (nothing where it was not held)."""
        with self._changed:
            if slot in self._held:
                self._held.remove(slot)
                self._free.append(slot)
                self._changed.notify_all()

    def return_held(self) -> None:
        """An epoch's stages have stopped: the slots they held are free, first in line, each with
        the event of its last read."""
        with self._changed:
            self._free.extendleft(reversed(self._held))
            self._held.clear()
            self._changed.notify_all()

    def forget(self) -> None:
        """Every slot free, in ring order, with no event: what each epoch did before issue 67
        (the race; UNSAFE.forget_slots, a test's control)."""
        assert UNSAFE.forget_slots, "only a test's control forgets the slots' reads"
        with self._changed:
            self._free, self._held = deque(self.slots), []
            self._last_read.clear()

    def _wait_last_read(self, slot: HostSlot) -> None:
        with self._changed:
            event = self._last_read.get(id(slot))
        if not self.streams.done(event):
            self.host_waits += 1
            self.streams.synchronize(event)
