"""train_loader=device: batches decoded, cropped, resized, flipped (and RandAugmented) on the
run's device, from the .beton files prepare writes for FFCV, so that on a GPU the step, not a
CPU JPEG decoder, sets a run's pace (docs/gpu-data.md).

Per batch, on the host, one compiled call that leaves the interpreter free (batch_gather: numba,
parallel over the images): each image's crop and flip drawn with FFCV's own `get_random_crop`
(scale (crop_scale_min, 1), ratio (3/4, 4/3), its ten tries and its centre fallback) from a
generator seeded by (seed, rank, epoch, batch), so a seed gives the same batches; the resize's
taps (area_resize: OpenCV's INTER_AREA weights, what FFCV resizes with); and a slot of the
loader's ring of host buffers (pinned on a GPU) filled: a table of pixel rows (the raw images;
on a CPU the JPEGs too, decoded with FFCV's own decoder), the JPEGs' bytes for the device.
Then on the device, the same few torch operations whatever the batch's size (torch_ops counts
them): the table copied over, the JPEGs decoded as one batch (torchvision's decode_jpeg: nvJPEG)
and padded into it, every crop resized by two weighted sums of the table rows and columns its
taps name (area_resize.resize; the flip is in the column taps), RandAugment or TrivialAugment
where the configuration has one (methods/randaugment_batch.py, trivialaugment_batch.py).
Batches leave as FFCV's do: uint8 N x 3 x side x side in channels-last memory on the device,
labels int64 (N, 1). epoch_ahead.EpochAhead makes them AHEAD of the step in three stages on
threads of their own (gather, decode, transform), on a GPU on two CUDA streams of the loader's
own (the decoder's, the compute's); the ring of host slots and the event of each one's last
read live as long as the loader (slot_ring.SlotRing).

Order and sharding are FFCV's RANDOM order (traversal_order/random.py): one process, a
permutation from default_rng(seed + epoch); several, a DistributedSampler(seed) per epoch
(each rank ceil(samples / ranks) images, padded with repeats); the last incomplete batch is
dropped (data/sharding.py). Evaluation: each rank every world_size-th image in order, the
centre crop of FFCV's CenterCropRGBImageDecoder (side eval_resolution / eval_resize of the
short side, resized to eval_resolution), the last batch kept.
"""
from __future__ import annotations

import math
import time
import warnings
from collections import deque
from collections.abc import Callable, Generator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ..data.beton_samples import JPEG, BetonSamples
from ..loader_kinds import DEVICE
from . import area_resize, batch_gather
from .batch_gather import Crops, Gathered, HostSlot, Layout
from .device_streams import UNSAFE, Stream, streams_of
from .epoch_ahead import EpochAhead
from .protocol import Batch, LoaderFigures
from .slot_ring import SlotRing
from .torch_ops import OpCount, count_ops

AHEAD = 2        # batches made ahead of the one the step takes
STAGE_SLOTS = 5  # ring slots the stages and the queues between them hold at most (epoch_ahead)
RECENT = 200     # batches whose timings BatchTimings keeps
DECODE, AUGMENT = "device_loader.decode", "device_loader.augment"    # named parts of a batch's device work
# the decoded JPEGs are padded in one operation by a (strided) nested tensor, which torch calls
# a prototype; it is used for that one operation only
warnings.filterwarnings("ignore", message="The PyTorch API of nested tensors is in prototype stage")


class UndecodableSample(RuntimeError):
    """A sample's JPEG does not decode: the .beton is damaged."""


def decode_jpegs(jpegs: list[torch.Tensor], device: torch.device, synchronize: bool = True) -> list[torch.Tensor]:
    """`jpegs` (CPU uint8 tensors of JPEG files) decoded by torchvision on `device`: (3, H, W)
    uint8 each, nvJPEG on a GPU. There torchvision allocates the outputs on the current stream
    and nvJPEG's hardware engine writes them from a stream of its own without waiting for the
    current one: a block the current stream has freed while kernels queued on it still read it
    would be overwritten under them (pytorch/vision#9606, meta-pytorch/torchcodec#1634). Unless
    the current stream runs nothing but the decoder (the pipeline's decode stage: `synchronize`
    False), it is synchronized first, so that no freed block has a reader left (docs/gpu-data.md)."""
    from torchvision.io import ImageReadMode, decode_jpeg
    if synchronize and device.type == "cuda":
        torch.cuda.current_stream(device).synchronize()
    return decode_jpeg(jpegs, device=device, mode=ImageReadMode.RGB)


@dataclass(frozen=True)
class BatchAugment:
    """The configuration's per-image augmentation on a batch: its draws for `count` images from
    a generator, on the host, and their application to a uint8 batch, on the device (built
    from the configuration's settings: run_loaders.batch_augmentation_of)."""
    draw: Callable[[int, np.random.Generator], list]
    apply: Callable[[torch.Tensor, list], torch.Tensor]


@dataclass
class HostBatch:
    """One batch gathered on the host into a slot of the loader's ring, before the device's work."""
    indices: np.ndarray                  # sample indices, in batch order
    slot: HostSlot
    gathered: Gathered
    boxes: np.ndarray                    # (n, 4) crops: top, left, height, width
    flips: np.ndarray                    # (n,) horizontal flips
    augment: list | None                 # the augmentation's draws (BatchAugment.draw)

    def jpeg_samples(self, samples: BetonSamples) -> np.ndarray:
        """The samples of the JPEGs the device decodes, in the batch's order."""
        return self.indices[samples.modes[self.indices] == JPEG] if self.gathered.jpegs else self.indices[:0]


class BatchTimings:
    """What the loader measured of its own work, each part apart, batch by batch (the last RECENT
    batches): the compiled gather on the host (the interpreter free), the device's JPEG decode
    (nvJPEG's call on a GPU, which returns once its images are written; none where the host
    decodes), the rest of the device part (on a GPU the Python that queues it; on a CPU the work
    itself), the gather's wait for a free ring slot (`slot`) and the step's for a made batch
    (`batch`); and the host's waits for the device (a ring slot whose last read the device had
    not passed), per batch gathered."""
    PARTS = ("gather", "decode", "device", "slot", "batch")

    def __init__(self) -> None:
        self.seconds: dict[str, deque[float]] = {part: deque(maxlen=RECENT) for part in self.PARTS}
        self.host_waits: deque[int] = deque(maxlen=RECENT)

    def took(self, part: str, seconds: float) -> None:
        """`seconds` of one batch's `part` (one of PARTS)."""
        self.seconds[part].append(seconds)

    def claimed(self, seconds: float, host_waits: int) -> None:
        """A slot claimed for a batch's gather after `seconds`, `host_waits` of them for the device."""
        self.seconds["slot"].append(seconds)
        self.host_waits.append(host_waits)

    def per_batch_ms(self) -> dict[str, float | None]:
        """Median milliseconds per batch of each part (None: not measured yet)."""
        return {part: float(np.median(list(values))) * 1e3 if values else None
                for part, values in self.seconds.items()}

    def host_waits_per_batch(self) -> float | None:
        """The host's waits for the device per batch gathered (None: none gathered yet)."""
        return float(np.mean(list(self.host_waits))) if self.host_waits else None


class DeviceLoader:
    """Batches of one epoch per iteration (each iteration starts the next epoch). The loaders'
    protocol (loaders/protocol.py)."""
    kind = DEVICE

    def __init__(self, path: str | Path, *, side: int, batch_size: int, device: torch.device,
                 threads: int, train: bool, seed: int = 0, rank: int = 0, world_size: int = 1,
                 crop_scale_min: float = 0.08, center_ratio: float = 1.0, augment: BatchAugment | None = None,
                 ahead: int = AHEAD):
        self.samples = BetonSamples(path, "device")
        self.side, self.batch_size, self.device, self.threads = side, batch_size, device, threads
        self.train, self.seed, self.rank, self.world_size = train, seed, rank, world_size
        self.crops = Crops(train, crop_scale_min, center_ratio)
        self.augment = augment
        self.batches_ahead, self.epoch = ahead, 0
        # where JPEGs are decoded: on a GPU by the device (nvJPEG), on a CPU on the host with
        # FFCV's own decoder; a CPU test may decode on the "device" (torchvision's CPU decoder)
        # to run the GPU's path
        self.jpegs_on_device = device.type == "cuda"
        self.timings = BatchTimings()
        self.streams = streams_of(device)        # the seam a CPU test replaces (device_streams)
        self._ring: SlotRing | None = None
        self._offsets: dict[int, torch.Tensor] = {}
        self._stage_streams: tuple[Stream, Stream] | None = None

    def order(self, epoch: int) -> np.ndarray:
        """This rank's sample indices of `epoch`, in order."""
        count = len(self.samples)
        if not self.train:
            return np.arange(self.rank, count, self.world_size)
        if self.world_size == 1:
            return np.random.default_rng(self.seed + epoch).permutation(count)
        from torch.utils.data import DistributedSampler
        sampler: DistributedSampler = DistributedSampler(
            range(count),       # type: ignore[arg-type]  # it takes only the len() of a data set
            num_replicas=self.world_size, rank=self.rank, shuffle=True, seed=self.seed, drop_last=False)
        sampler.set_epoch(epoch)
        return np.fromiter(sampler, np.int64)

    def __len__(self) -> int:
        count = len(self.samples)
        if self.train:
            return math.ceil(count / self.world_size) // self.batch_size
        return math.ceil(len(range(self.rank, count, self.world_size)) / self.batch_size)

    def __iter__(self) -> Generator[Batch, None, None]:
        epoch, self.epoch = self.epoch, self.epoch + 1
        return self._batches(epoch)

    def _batches(self, epoch: int) -> Generator[Batch, None, None]:
        order = self.order(epoch)
        batches = [order[k * self.batch_size:(k + 1) * self.batch_size] for k in range(len(self))]
        ahead = EpochAhead(self, epoch, batches)
        try:
            yield from ahead
        finally:
            ahead.stop()

    def stage_streams(self) -> tuple[Stream, Stream]:
        """The loader's own streams, the decoder's and the compute's, the same every epoch (the
        blocks each frees are cached for its own later batches, not for a stream of another epoch)."""
        if self._stage_streams is None:
            self._stage_streams = (self.streams.new(), self.streams.new())
        return self._stage_streams

    def ring(self) -> list[HostSlot]:
        """The host slots batches are gathered into, pinned on a GPU: as many as the stages hold
        (STAGE_SLOTS) and as the batches made ahead, so that a slot released is written again
        only after as many others, by when the device has long passed its reads."""
        return self.slot_ring().slots

    def slot_ring(self) -> SlotRing:
        """The ring, which owns the slots and the events of their last reads for as long as the
        loader lives (every epoch, measurement and batch gathered outside an epoch)."""
        decode_here = not self.jpegs_on_device
        if self._ring is None or self._ring.slots[0].layout.decode_here != decode_here:
            if self._ring is not None:         # its reads passed before its slots are let go
                self.streams.synchronize_device()
            layout = Layout.of(self.samples, self.side, decode_here)
            self._ring = SlotRing([HostSlot(layout, self.batch_size, pin=self.device.type == "cuda")
                                   for _ in range(STAGE_SLOTS + self.batches_ahead)], self.streams)
        return self._ring

    # ---- the host's part ---------------------------------------------------------------
    def host(self, indices: np.ndarray, seed: int, slot: HostSlot | None = None) -> HostBatch:
        """The batch of samples `indices` gathered on the host into `slot` (outside an epoch, a
        slot of the ring once the device has passed its last read), its draws made from `seed`."""
        if slot is None:
            slot = self.slot_ring().borrow()
        start = time.perf_counter()
        gathered = batch_gather.gather(self.samples, indices, self.crops, seed, slot, self.threads)
        self.timings.took("gather", time.perf_counter() - start)
        count = gathered.count
        augment = self.augment.draw(count, np.random.default_rng(seed)) if self.augment else None
        return HostBatch(np.asarray(indices), slot, gathered, slot.boxes[:count].copy(),
                         slot.flips[:count].copy(), augment)

    # ---- the device's part ---------------------------------------------------------------
    def on_device(self, host: HostBatch) -> tuple[torch.Tensor, torch.Tensor]:
        """The batch the step takes: (uint8 images, channels last; labels (n, 1)), its JPEGs
        decoded and its work queued on the current stream, which is synchronized before the
        decode (decode_jpegs), and the event of its reads noted on the ring; the same torch
        operations whatever the batch's size (docs/gpu-data.md)."""
        made = self.transform(host, self.decode(host, synchronize=True))
        self.slot_ring().read(host.slot, self.streams.record(self.streams.current()))
        return made

    def transform(self, host: HostBatch, decoded: list[torch.Tensor] | None) -> tuple[torch.Tensor, torch.Tensor]:
        """The batch's device work after its decode (`decoded`: its JPEGs' images, on the
        device), queued on the current stream: the slot's copies, the crops' resize, the
        augmentation."""
        start = time.perf_counter()
        self._refuse_undecoded(host)
        device, cuda, got, layout = self.device, self.device.type == "cuda", host.gathered, host.slot.layout
        index, weights, labels = host.slot.views(got.count)
        crops = area_resize.resize(self._table(host, decoded), index.to(device, non_blocking=cuda),
                                   weights.to(device, non_blocking=cuda), self._bags(got.count),
                                   got.count, layout.width)
        images = crops.round_().clamp_(0, 255).permute(0, 3, 2, 1).to(dtype=torch.uint8,
                                                                      memory_format=torch.channels_last)
        labels = labels.to(device, non_blocking=cuda, copy=True)
        if host.augment is not None:
            assert self.augment is not None       # which drew host.augment
            with torch.profiler.record_function(AUGMENT):
                images = self.augment.apply(images, host.augment).contiguous(memory_format=torch.channels_last)
        self.timings.took("device", time.perf_counter() - start)
        return images, labels

    def ops_per_batch(self) -> OpCount:
        """The torch operations one training batch's device work calls from Python (its
        augmentation's counted apart, the device's JPEG decode as the one call it is on a GPU),
        from a batch gathered outside an epoch."""
        indices = self.order(0)[:self.batch_size]
        self.on_device(self.host(indices, seed=0))       # the batch size's first: its bags made
        host = self.host(indices, seed=1)
        return count_ops(lambda: self.on_device(host), parts=(AUGMENT,), as_one=(DECODE,))[1]

    def _table(self, host: HostBatch, decoded: list[torch.Tensor] | None) -> torch.Tensor:
        """The batch's table on the device, in float32: raw (and host-decoded) images' rows, then
        the canvases of the JPEGs the device decoded."""
        slot, got = host.slot, host.gathered
        table = slot.pixels[:got.rows].to(self.device, non_blocking=self.device.type == "cuda")
        if decoded is not None:
            table = torch.cat((table, self._canvases(host, decoded)))
        return table.float()

    def _bags(self, count: int) -> torch.Tensor:
        """Where each output row's (and column's) taps start in the taps of `count` images."""
        if count not in self._offsets:
            taps = self.ring()[0].layout.taps
            self._offsets[count] = torch.arange(0, count * self.side * taps, taps).to(self.device)
            # made once, read by batches on any stream after
            self.streams.synchronize(self.streams.record(self.streams.current()))
        return self._offsets[count]

    def decode(self, host: HostBatch, synchronize: bool) -> list[torch.Tensor] | None:
        """The batch's JPEGs decoded on the device (nvJPEG on a GPU), each (3, H, W), on the
        current stream, synchronized first where it runs more than the decoder (decode_jpegs);
        None where the batch has none for the device. A sample that does not decode is named,
        once the device has stopped writing (torchvision lets a failed decode's outputs go
        without waiting for nvJPEG)."""
        slot, got = host.slot, host.gathered
        if not got.jpegs:
            return None
        jpegs = torch.split(slot.jpeg_bytes[:got.jpeg_used], slot.jpeg_lengths[:got.jpegs].tolist())
        start = time.perf_counter()
        try:
            with torch.profiler.record_function(DECODE):
                decoded = decode_jpegs(list(jpegs), self.device, synchronize)
        except RuntimeError as exc:
            if not UNSAFE.no_error_sync:
                self.streams.synchronize_device()
            self._name_undecodable(host)
            raise UndecodableSample(f"a JPEG of {self.samples.path} does not decode: {exc}") from exc
        self.timings.took("decode", time.perf_counter() - start)
        return decoded

    def _canvases(self, host: HostBatch, decoded: list[torch.Tensor]) -> torch.Tensor:
        """The decoded images padded to canvases of the layout's rows and width, as table rows
        (channels interleaved), each checked against its stored size."""
        layout, count = host.slot.layout, len(decoded)
        nested = torch._nested_tensor_from_tensor_list(decoded)
        sizes = np.array(nested._nested_tensor_size().tolist()).reshape(count, 3)[:, 1:]
        jpegs = host.jpeg_samples(self.samples)
        stored = np.stack((self.samples.heights[jpegs], self.samples.widths[jpegs]), axis=1)
        wrong = np.flatnonzero((sizes != stored).any(axis=1))
        if len(wrong):
            index, (height, width) = int(jpegs[wrong[0]]), sizes[wrong[0]]
            raise UndecodableSample(self._damaged(index, f"decodes to {width}x{height} px, stored as "
                                                         f"{stored[wrong[0], 1]}x{stored[wrong[0], 0]}"))
        canvas = torch.nested.to_padded_tensor(nested, 0, (count, 3, layout.canvas_rows, layout.width))
        return canvas.permute(0, 2, 3, 1).reshape(count * layout.canvas_rows, layout.row_bytes)

    def _refuse_undecoded(self, host: HostBatch) -> None:
        """UndecodableSample for the first JPEG the host's decoder could not decode."""
        failed = np.flatnonzero(host.slot.failed[:host.gathered.count])
        if len(failed):
            raise UndecodableSample(self._damaged(int(host.indices[failed[0]]), "does not decode (libjpeg-turbo "
                                                  f"returned {host.slot.failed[failed[0]]})"))

    def _name_undecodable(self, host: HostBatch) -> None:
        """Decode the batch's JPEGs one by one on the CPU and raise for the first that fails."""
        from torchvision.io import ImageReadMode, decode_jpeg
        for index in host.jpeg_samples(self.samples):
            try:
                decode_jpeg(torch.from_numpy(np.array(self.samples.stored(index))), mode=ImageReadMode.RGB)
            except RuntimeError as exc:
                raise UndecodableSample(self._damaged(int(index), f"does not decode ({exc})")) from exc

    def _damaged(self, index: int, what: str) -> str:
        samples = self.samples
        return (f"sample {index} of {samples.path} (a JPEG of {samples.widths[index]}x{samples.heights[index]} "
                f"px, {samples.sizes[index]} bytes) {what}: the file is damaged; delete it (or give "
                "another cache_dir=) so that prepare writes it again from the images, then run again")

    def figures(self) -> LoaderFigures:
        return LoaderFigures(threads=self.threads, batches_ahead=self.batches_ahead)

    def close(self) -> None:
        if self._ring is not None:          # its reads passed before its slots are let go
            self.streams.synchronize_device()
        self._ring = None


def train_loader(path: str, resolution: int, batch_size: int, workers: int, seed: int,
                 device: torch.device, rank: int, world_size: int, crop_scale_min: float = 0.08,
                 augment: BatchAugment | None = None) -> DeviceLoader:
    """The training loader of a .beton: FFCV's train loader's batches, with `augment` (the
    configuration's RandAugment or TrivialAugment: run_loaders.batch_augmentation_of) on each
    image of the batch."""
    return DeviceLoader(path, side=resolution, batch_size=batch_size, device=device, threads=workers,
                        train=True, seed=seed, rank=rank, world_size=world_size,
                        crop_scale_min=crop_scale_min, augment=augment)


def val_loader(path: str, resolution: int, resize: int, batch_size: int, workers: int,
               device: torch.device, rank: int, world_size: int) -> DeviceLoader:
    """The evaluation loader: FFCV's val loader's batches (ffcv_loaders.val_loader)."""
    return DeviceLoader(path, side=resolution, batch_size=batch_size, device=device, threads=workers,
                        train=False, rank=rank, world_size=world_size, center_ratio=resolution / resize)
