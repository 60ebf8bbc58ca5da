"""The device loader's slot protocol on the CPU, with a stand-in for the device's streams and
events (device_streams.Streams, the loader's one seam): the stand-in's streams run nothing until
the host waits for them, as a busy GPU would, so a writer that does not wait for the event of a
ring slot's last read writes while the read is still queued; the stand-in records the order of
the operations and every such write. Checked across epochs (run out, left early), after an error
in a stage (the decode's included, whose outputs torchvision lets go without waiting), after
`ops_per_batch`; each with a control that turns the fix off (device_streams.UNSAFE) and must be
caught."""
from __future__ import annotations

import threading
from collections import Counter, defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import pytest
import torch

from submission.config import resolve
from submission.data.prepare import prepare
from submission.data.synthetic_images import FolderShape, write_folder
from submission.loaders import batch_gather, device_loader, device_streams
from submission.loaders.device_loader import DeviceLoader, UndecodableSample
from submission.loaders.protocol import one_epoch

from image_folders import FFCV_FINALIZER_NOISE

DECODERS_MOVING = pytest.mark.filterwarnings("ignore:The image decoding and encoding capabilities:DeprecationWarning")
NESTED_PROTOTYPE = pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors:UserWarning")
pytestmark = [FFCV_FINALIZER_NOISE, DECODERS_MOVING, NESTED_PROTOTYPE, pytest.mark.timeout(300)]
CPU = torch.device("cpu")
DEFAULT = "default"         # the stand-in's stream of a thread outside `using`, as CUDA's default stream


@dataclass(frozen=True)
class Event:
    stream: str
    position: int           # the stream's operations before it


class StandIn:
    """Streams whose work completes only when the host waits for it (an event synchronized, or
    the device): a wait between streams carries completion across (a stream that waited for an
    event has passed it once it passes the wait). Reads and writes of ring slots are noted by
    the test's hooks: a write while a read of the slot is still queued is a violation."""

    def __init__(self) -> None:
        self.lock, self.local = threading.RLock(), threading.local()
        self.queued: dict[str, int] = defaultdict(int)           # operations queued on each stream
        self.passed: dict[str, int] = defaultdict(int)           # ... the device has passed
        self.waits: dict[str, list[tuple[int, Event]]] = defaultdict(list)
        self.reads: dict[int, list[Event]] = defaultdict(list)   # a slot's reads since its last write
        self.log: list[tuple[str, str, str]] = []                # (thread, operation, stream)
        self.violations: list[str] = []
        self.made = 0                                            # streams made

    def _queue(self, stream: str, what: str) -> Event:
        with self.lock:
            self.queued[stream] += 1
            self.log.append((threading.current_thread().name, what, stream))
            return Event(stream, self.queued[stream])

    def _pass(self, event: Event) -> None:
        if self.passed[event.stream] >= event.position:
            return
        self.passed[event.stream] = event.position
        for position, waited in self.waits[event.stream]:
            if position <= event.position:
                self._pass(waited)

    def new(self) -> str:
        with self.lock:
            self.made += 1
            return f"stream{self.made}"

    def current(self) -> str:
        return getattr(self.local, "stream", DEFAULT)

    @contextmanager
    def using(self, stream: str) -> Iterator[None]:
        before, self.local.stream = self.current(), stream
        try:
            yield
        finally:
            self.local.stream = before

    def record(self, stream: str) -> Event:
        return self._queue(stream, "record")

    def wait(self, stream: str, event: Event | None) -> None:
        if event is not None:
            with self.lock:
                self.waits[stream].append((self._queue(stream, "wait").position, event))

    def done(self, event: Event | None) -> bool:
        with self.lock:
            return event is None or self.passed[event.stream] >= event.position

    def synchronize(self, event: Event | None) -> None:
        with self.lock:
            self.log.append((threading.current_thread().name, "synchronize", event.stream if event else "-"))
            if event is not None:
                self._pass(event)

    def synchronize_device(self) -> None:
        with self.lock:
            self.log.append((threading.current_thread().name, "synchronize_device", "-"))
            for stream, count in list(self.queued.items()):
                self._pass(Event(stream, count))

    def hand_over(self, tensors, stream: str) -> None:
        self._queue(stream, "hand_over")

    # the test's hooks
    def read(self, slot: object) -> None:
        with self.lock:
            self.reads[id(slot)].append(self._queue(self.current(), "read"))

    def write(self, slot: object) -> None:
        with self.lock:
            pending = [read for read in self.reads[id(slot)] if self.passed[read.stream] < read.position]
            if pending:
                self.violations.append(f"{threading.current_thread().name} wrote a slot whose reads {pending} "
                                       "were still queued")
            self.reads[id(slot)] = []
            self.log.append((threading.current_thread().name, "write", "-"))


@pytest.fixture(scope="module")
def proportion(tmp_path_factory):
    """36 photo-like images of 40-90 px, about half stored raw, half JPEG."""
    root = tmp_path_factory.mktemp("slots")
    write_folder(root / "images", FolderShape(classes=3, train_per_class=12, val_per_class=2, sides=(40, 90)))
    return prepare(resolve("cpu", {"dataset": "imagenet", "data_dir": str(root / "images"),
                                   "cache_dir": str(root / "cache"), "write_mode": "proportion"}))


@pytest.fixture
def watched(monkeypatch):
    """A stand-in whose hooks see every write of a slot (the compiled gather) and every read
    (the decode's of its JPEGs, the transform's copies)."""
    stand_in = StandIn()
    gather, decode, transform = batch_gather.gather, DeviceLoader.decode, DeviceLoader.transform

    def gathering(samples, indices, crops, seed, slot, threads):
        stand_in.write(slot)
        return gather(samples, indices, crops, seed, slot, threads)

    def decoding(self, host, synchronize):
        if host.gathered.jpegs:
            stand_in.read(host.slot)
        return decode(self, host, synchronize)

    def transforming(self, host, decoded):
        stand_in.read(host.slot)
        return transform(self, host, decoded)

    monkeypatch.setattr(batch_gather, "gather", gathering)
    monkeypatch.setattr(DeviceLoader, "decode", decoding)
    monkeypatch.setattr(DeviceLoader, "transform", transforming)
    return stand_in


def loader_on(stand_in: StandIn, path: str) -> DeviceLoader:
    """A training loader of 4-image batches (9 an epoch, the ring's 7 slots wrapping inside an
    epoch and across its end), its JPEGs decoded by the decode stage, on the stand-in."""
    loader = device_loader.train_loader(path, 24, 4, 1, 3, CPU, 0, 1)
    loader.jpegs_on_device = True
    loader.streams = stand_in
    return loader


def epochs_of_every_kind(loader: DeviceLoader) -> int:
    """Epochs run out, one left early, one after ops_per_batch, and ops_per_batch after one:
    the batches taken."""
    taken = sum(1 for _ in loader) + sum(1 for _ in loader)
    for taken_early, _ in enumerate(one_epoch(loader)):
        if taken_early == 2:
            break
    loader.ops_per_batch()
    taken += 3 + sum(1 for _ in loader)
    loader.ops_per_batch()
    return taken + sum(1 for _ in loader)


def test_no_slot_is_written_before_its_last_read_passed_across_epochs_and_ops_per_batch(proportion, watched):
    loader = loader_on(watched, proportion.train_path)
    taken = epochs_of_every_kind(loader)
    assert watched.violations == []
    threads = {thread for thread, _, _ in watched.log}
    assert {"device-loader-gather", "device-loader-decode", "device-loader-transform"} <= threads
    # no stage but the gather (and a batch gathered outside an epoch) waits on the host: the decode,
    # the transform and the step's thread only queue waits between streams; the transform once, at
    # the loader's first batch (the resize's offsets, made once for every stream after)
    waiting = Counter(thread for thread, what, _ in watched.log if what.startswith("synchronize"))
    assert set(waiting) <= {"device-loader-gather", "device-loader-transform", threading.current_thread().name}
    assert waiting["device-loader-transform"] == 1, waiting
    step_waits = [stream for thread, what, stream in watched.log
                  if thread == threading.current_thread().name and what == "wait"]
    assert len(step_waits) == taken and set(step_waits) == {DEFAULT}      # each batch's event, on the step's stream
    decode_stream, compute_stream = loader.stage_streams()
    assert {stream for _, what, stream in watched.log if what == "read"} == {decode_stream, compute_stream, DEFAULT}


def test_the_control_forgetting_the_slots_at_each_epoch_is_caught(proportion, watched, monkeypatch):
    """What each epoch did before issue 67: every slot free with no event."""
    monkeypatch.setattr(device_streams.UNSAFE, "forget_slots", True)
    epochs_of_every_kind(loader_on(watched, proportion.train_path))
    assert watched.violations, "the stand-in did not catch slots written under queued reads"


@pytest.mark.parametrize("stage", ["decode", "transform"])
@pytest.mark.parametrize("error_sync", [True, False])
def test_after_an_error_in_a_stage_no_slot_is_written_before_its_reads_passed(proportion, watched, monkeypatch,
                                                                            stage, error_sync):
    """A stage raises mid-epoch (the decoder, after nvJPEG was handed the slot's bytes; or the
    transform, after its copies were queued): the step's thread gets that one error, all three
    threads stop, and the next epoch writes no slot whose reads are still queued. Without the
    decode's synchronization on error (the control), the next epoch's gather is caught."""
    monkeypatch.setattr(device_streams.UNSAFE, "no_error_sync", not error_sync)
    loader = loader_on(watched, proportion.train_path)
    calls = []

    def failing_decode(jpegs, device, synchronize=True):
        calls.append(1)
        if len(calls) == 3:
            raise RuntimeError("nvjpegDecodeBatched failed (the test's)")
        return real_decode(jpegs, device, synchronize)

    def failing_resize(*args):
        calls.append(1)
        if len(calls) == 3:
            raise RuntimeError("a kernel failed (the test's)")
        return real_resize(*args)

    real_decode, real_resize = device_loader.decode_jpegs, device_loader.area_resize.resize
    if stage == "decode":
        monkeypatch.setattr(device_loader, "decode_jpegs", failing_decode)
    else:
        monkeypatch.setattr(device_loader.area_resize, "resize", failing_resize)
    expected = UndecodableSample if stage == "decode" else RuntimeError
    with pytest.raises(expected, match="the test's"):
        for _ in loader:
            pass
    assert not [t for t in threading.enumerate() if t.name.startswith("device-loader")]
    assert sum(1 for _ in loader) == len(loader) and sum(1 for _ in loader) == len(loader)
    if error_sync or stage == "transform":
        assert watched.violations == []
    else:
        assert watched.violations, "the stand-in did not catch the slot of the failed decode written under its read"


def test_a_dropped_epoch_and_close_stop_all_three_threads_at_once(proportion):
    loader = device_loader.train_loader(proportion.train_path, 24, 4, 1, 3, CPU, 0, 1)
    loader.jpegs_on_device = True
    epoch = one_epoch(loader)
    next(epoch)
    names = sorted(t.name for t in threading.enumerate() if t.name.startswith("device-loader"))
    assert names == ["device-loader-decode", "device-loader-gather", "device-loader-transform"]
    del epoch
    assert not [t for t in threading.enumerate() if t.name.startswith("device-loader")]
    epoch = one_epoch(loader)
    next(epoch)
    epoch.close()
    loader.close()
    assert not [t for t in threading.enumerate() if t.name.startswith("device-loader")]
