"""train_loader=device: batches decoded, cropped, resized, flipped (and RandAugmented) on the
run's device, from the .beton files prepare writes for FFCV, so that on a GPU the step, not a
CPU JPEG decoder, sets a run's pace (docs/gpu-data.md).

Per batch, on the host (the loader's thread, `workers_per_device` threads copying bytes):
the samples of the batch's indices (beton_samples.BetonSamples); each image's crop and flip,
drawn with FFCV's own `get_random_crop` (scale (crop_scale_min, 1), ratio (3/4, 4/3), its ten
tries and its centre fallback; compiled as FFCV compiles it) from a generator seeded by
(seed, rank, epoch, batch), so a seed gives the same batches; the resize's taps
(area_resize: OpenCV's INTER_AREA weights, what FFCV resizes with); raw images copied into one
padded array and each JPEG's bytes gathered, in pinned memory on a GPU. Then on the device:
the raw array copied over, the JPEGs decoded as one batch (torchvision's decode_jpeg: nvJPEG
on a GPU), every crop resized by gathering and summing the rows and columns its taps name
(the flip is in the column taps), RandAugment or TrivialAugment where the configuration has
one (methods/randaugment_batch.py, trivialaugment_batch.py). Batches leave as
FFCV's do: uint8 N x 3 x side x side in channels-last memory on the device, labels int64 (N, 1).

On a GPU the device work is queued on a CUDA stream of the loader's own, AHEAD batches before
the step takes them; on a CPU the loader's thread only gathers, and the batch is finished in
the step's thread when it is taken (a torch op in another thread would start an OpenMP team
of its own beside the step's: docs/ffcv-notes.md).

Order and sharding are FFCV's RANDOM order (traversal_order/random.py): one process, a
permutation from default_rng(seed + epoch); several, a DistributedSampler(seed) per epoch
(each rank ceil(samples / ranks) images, padded with repeats); the last incomplete batch is
dropped (data/sharding.py). Evaluation: each rank every world_size-th image in order, the
centre crop of FFCV's CenterCropRGBImageDecoder (side eval_resolution / eval_resize of the
short side, resized to eval_resolution), the last batch kept.
"""
from __future__ import annotations

import contextlib
import functools
import math
import queue
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from ..data.beton_samples import JPEG, BetonSamples
from ..loader_kinds import DEVICE
from . import area_resize
from .protocol import LoaderFigures

AHEAD = 2        # batches made ahead of the one the step takes
CHUNK = 64       # images resized together: bounds their rows' float32 sums (64 x 176 x 500 x 3)


class UndecodableSample(RuntimeError):
    """A sample's JPEG does not decode: the .beton is damaged."""


@dataclass(frozen=True)
class BatchAugment:
    """The configuration's per-image augmentation on a batch: its draws for `count` images from
    a generator, on the host, and their application to a uint8 batch, on the device (built
    from the configuration's settings: run_loaders.batch_augmentation_of)."""
    draw: Callable[[int, np.random.Generator], list]
    apply: Callable[[torch.Tensor, list], torch.Tensor]


@functools.cache
def _crop_drawer():
    """FFCV's crop draw and a flip draw for each image of a batch, from the generator of
    numba's thread (or numpy's, where FFCV's compilation is off) seeded for the batch."""
    from ffcv.fields.rgb_image import get_random_crop
    from ffcv.pipeline.compiler import Compiler
    crop = Compiler.compile(get_random_crop)

    def draw(heights, widths, scale, ratio, seed, boxes, flips):
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
    _crop_drawer()(np.asarray(heights, np.int64), np.asarray(widths, np.int64),
                   np.array((crop_scale_min, 1.0)), np.array((3 / 4, 4 / 3)), np.uint32(seed), boxes, flips)
    return boxes, flips


def center_crops(heights: np.ndarray, widths: np.ndarray, ratio: float) -> np.ndarray:
    """(n, 4) boxes of FFCV's centre crop (get_center_crop): a square of ratio x the short side."""
    from ffcv.fields.rgb_image import get_center_crop
    return np.array([get_center_crop(int(h), int(w), None, ratio) for h, w in zip(heights, widths)],
                    np.int64).reshape(-1, 4)


def batch_seed(seed: int, rank: int, epoch: int, number: int) -> int:
    """The seed of one batch's draws (crops, flips, RandAugment)."""
    return int(np.random.SeedSequence([seed, rank, epoch, number]).generate_state(1)[0])


@dataclass
class HostBatch:
    """One batch gathered on the host, before the device's work."""
    indices: np.ndarray                  # sample indices, in batch order
    labels: torch.Tensor                 # (n, 1) int64
    boxes: np.ndarray                    # (n, 4) crops: top, left, height, width
    flips: np.ndarray                    # (n,) horizontal flips
    taps: tuple                          # area_resize.taps of every image
    raw_rows: np.ndarray                 # where the raw images go in the batch
    raw: torch.Tensor | None             # (r, H, W, 3) uint8: each raw image at its top left
    jpeg_rows: np.ndarray
    jpegs: list                          # each JPEG's bytes, CPU uint8 tensors
    augment: list | None                 # the augmentation's draws (BatchAugment.draw)


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
        self.crop_scale_min, self.center_ratio = crop_scale_min, center_ratio
        self.augment = augment
        self.batches_ahead, self.epoch = ahead, 0
        self._pool: ThreadPoolExecutor | None = None

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

    def __iter__(self):
        epoch, self.epoch = self.epoch, self.epoch + 1
        return self._batches(epoch)

    def _batches(self, epoch: int):
        order = self.order(epoch)
        batches = [order[k * self.batch_size:(k + 1) * self.batch_size] for k in range(len(self))]
        ahead = _Ahead(self, epoch, batches)
        try:
            yield from ahead
        finally:
            ahead.stop()

    # ---- the host's part ---------------------------------------------------------------
    def host(self, indices: np.ndarray, seed: int) -> HostBatch:
        """The batch of samples `indices` gathered on the host, its draws made from `seed`."""
        samples = self.samples
        heights, widths = samples.heights[indices], samples.widths[indices]
        if self.train:
            boxes, flips = random_crops(heights, widths, self.crop_scale_min, seed)
        else:
            boxes, flips = center_crops(heights, widths, self.center_ratio), np.zeros(len(indices), np.bool_)
        jpeg = samples.modes[indices] == JPEG
        raw_rows, jpeg_rows = np.flatnonzero(~jpeg), np.flatnonzero(jpeg)
        pin = self.device.type == "cuda"
        raw = (torch.empty((len(raw_rows), int(heights[raw_rows].max()), int(widths[raw_rows].max()), 3),
                           dtype=torch.uint8, pin_memory=pin) if len(raw_rows) else None)
        canvas = raw.numpy() if raw is not None else None
        jpegs: list[torch.Tensor | None] = [None] * len(jpeg_rows)

        def gather(part: range) -> None:      # raw images first, then the JPEGs
            for k in part:
                if k < len(raw_rows):
                    pixels = samples.pixels(indices[raw_rows[k]])
                    assert canvas is not None      # there are raw rows
                    canvas[k, :pixels.shape[0], :pixels.shape[1]] = pixels
                else:
                    j = k - len(raw_rows)
                    jpegs[j] = torch.from_numpy(np.array(samples.stored(indices[jpeg_rows[j]])))
        share = math.ceil(len(indices) / self.threads)
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="device-loader-gather")
        list(self._pool.map(gather, [range(start, min(start + share, len(indices)))
                                     for start in range(0, len(indices), share)]))
        labels = torch.from_numpy(samples.labels[indices]).view(-1, 1)
        augment = self.augment.draw(len(indices), np.random.default_rng(seed)) if self.augment else None
        return HostBatch(indices, labels.pin_memory() if pin else labels, boxes, flips,
                         area_resize.taps(boxes, flips, self.side), raw_rows, raw, jpeg_rows, jpegs, augment)

    # ---- the device's part ---------------------------------------------------------------
    def on_device(self, host: HostBatch) -> tuple[torch.Tensor, torch.Tensor]:
        """The batch the step takes: (uint8 images, channels last; labels (n, 1))."""
        device, cuda = self.device, self.device.type == "cuda"
        out = torch.empty((len(host.indices), self.side, self.side, 3), dtype=torch.float32, device=device)
        taps = [torch.from_numpy(t).to(device, non_blocking=cuda) for t in host.taps]
        if host.raw is not None:
            self._resize_into(out, host.raw_rows, host.raw.to(device, non_blocking=cuda), taps)
        if host.jpegs:
            decoded = self._decode(host)
            canvas = torch.empty((len(decoded), max(d.shape[1] for d in decoded),
                                  max(d.shape[2] for d in decoded), 3), dtype=torch.uint8, device=device)
            for k, image in enumerate(decoded):
                canvas[k, :image.shape[1], :image.shape[2]].copy_(image.permute(1, 2, 0))
            self._resize_into(out, host.jpeg_rows, canvas, taps)
        images = out.round_().clamp_(0, 255).to(torch.uint8).permute(0, 3, 1, 2)   # channels last
        if host.augment is not None:
            assert self.augment is not None       # which drew host.augment
            images = self.augment.apply(images, host.augment)
        return (images.contiguous(memory_format=torch.channels_last),
                host.labels.to(device, non_blocking=cuda))

    def _resize_into(self, out: torch.Tensor, rows: np.ndarray, canvas: torch.Tensor, taps) -> None:
        """out[rows] = each image of canvas resized by its taps, CHUNK images at a time."""
        for start in range(0, len(rows), CHUNK):
            where = torch.from_numpy(rows[start:start + CHUNK]).to(out.device)
            chunk_taps = [t.index_select(0, where) for t in taps]
            out.index_copy_(0, where, area_resize.resize(canvas[start:start + CHUNK], chunk_taps))

    def _decode(self, host: HostBatch) -> list[torch.Tensor]:
        """The batch's JPEGs decoded on the device (nvJPEG on a GPU), each checked against its
        stored size; a sample that does not decode is named."""
        from torchvision.io import ImageReadMode, decode_jpeg
        try:
            decoded = decode_jpeg(host.jpegs, device=self.device, mode=ImageReadMode.RGB)
        except RuntimeError as exc:
            self._name_undecodable(host)
            raise UndecodableSample(f"a JPEG of {self.samples.path} does not decode: {exc}") from exc
        for k, image in enumerate(decoded):
            index = int(host.indices[host.jpeg_rows[k]])
            stored = (int(self.samples.heights[index]), int(self.samples.widths[index]))
            if tuple(image.shape[1:]) != stored:
                raise UndecodableSample(self._damaged(index, f"decodes to {image.shape[2]}x{image.shape[1]} px, "
                                                            f"stored as {stored[1]}x{stored[0]}"))
        return decoded

    def _name_undecodable(self, host: HostBatch) -> None:
        """Decode the batch's JPEGs one by one on the CPU and raise for the first that fails."""
        from torchvision.io import ImageReadMode, decode_jpeg
        for k, data in enumerate(host.jpegs):
            index = int(host.indices[host.jpeg_rows[k]])
            try:
                decode_jpeg(data, mode=ImageReadMode.RGB)
            except RuntimeError as exc:
                raise UndecodableSample(self._damaged(index, f"does not decode ({exc})")) from exc

    def _damaged(self, index: int, what: str) -> str:
        samples = self.samples
        return (f"sample {index} of {samples.path} (a JPEG of {samples.widths[index]}x{samples.heights[index]} "
                f"px, {samples.sizes[index]} bytes) {what}: the file is damaged; delete it (or give "
                "another cache_dir=) so that prepare writes it again from the images, then run again")

    def figures(self) -> LoaderFigures:
        return LoaderFigures(threads=self.threads, batches_ahead=self.batches_ahead)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False)
            self._pool = None


class _Ahead:
    """One epoch's batches made by a thread of their own, the loader's `batches_ahead` ahead;
    its exceptions reach the step's thread, which stops it when it leaves the epoch."""

    def __init__(self, loader: DeviceLoader, epoch: int, batches: list[np.ndarray]):
        self.loader, self.cuda = loader, loader.device.type == "cuda"
        self.queue: queue.Queue = queue.Queue(maxsize=loader.batches_ahead)
        self.stopping = threading.Event()
        self.stream = torch.cuda.Stream(loader.device) if self.cuda else None
        self.thread = threading.Thread(target=self._make, args=(epoch, batches), daemon=True,
                                       name="device-loader")
        self.thread.start()

    def _make(self, epoch: int, batches: list[np.ndarray]) -> None:
        loader = self.loader
        try:
            with torch.cuda.stream(self.stream) if self.cuda else contextlib.nullcontext():
                for number, indices in enumerate(batches):
                    if self.stopping.is_set():
                        return
                    host = loader.host(indices, batch_seed(loader.seed, loader.rank, epoch, number))
                    if self.cuda:
                        made = loader.on_device(host)
                        event = torch.cuda.Event()
                        event.record(self.stream)
                        item: tuple[str, object, torch.cuda.Event | None] = ("batch", made, event)
                    else:
                        item = ("host", host, None)
                    if not self._put(item):
                        return
            self._put(("end", None, None))
        except BaseException as exc:  # noqa: BLE001 - handed to the step's thread, which raises it
            self._put(("error", exc, None))

    def _put(self, item) -> bool:
        while not self.stopping.is_set():
            try:
                self.queue.put(item, timeout=0.1)
                return True
            except queue.Full:
                pass
        return False

    def _get(self):
        while True:
            try:
                return self.queue.get(timeout=1.0)
            except queue.Empty:
                if not self.thread.is_alive() and self.queue.empty():
                    raise RuntimeError("the device loader's thread ended without its batch") from None

    def __iter__(self):
        while True:
            kind, made, event = self._get()
            if kind == "end":
                return
            if kind == "error":
                raise made
            if kind == "host":
                made = self.loader.on_device(made)
            else:
                stream = torch.cuda.current_stream(self.loader.device)
                stream.wait_event(event)
                for tensor in made:
                    tensor.record_stream(stream)
            yield made

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join()


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
