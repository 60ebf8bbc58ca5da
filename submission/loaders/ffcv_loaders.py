"""FFCV loaders: the same pipelines for ImageNet and the embedded data set.

train: RandomResizedCrop decode -> horizontal flip -> tensor on the device (uint8, NCHW
       view of channels-last memory).
val:   center-crop decode at eval_resolution from a crop of ratio eval_resolution /
       eval_resize (FixRes: 224 out of 232 on ImageNet).
Normalisation runs in torch on the device (the step's `Normalizer`), which keeps the
pipelines numba-only before ToTensor (FFCV 1.0.2 hangs on jitted -> plain -> jitted chains)
and needs no cupy on GPUs.

Each Loader is handed out as the loaders' protocol (`FfcvLoader`, loaders/protocol.py): an
epoch left early stops FFCV's thread and waits for it (`finish`).

Distributed: training shards with FFCV's distributed mode (a DistributedSampler per
epoch); validation gives each rank every world_size-th sample, so that each
validation image is scored exactly once across ranks (FFCV's distributed sequential
order pads the last batch with repeats).
"""
from __future__ import annotations

import operator
import queue
from typing import TYPE_CHECKING

import numpy as np
import torch

if TYPE_CHECKING:       # for the annotations only: FFCV is imported where it runs (ffcv_threads.install)
    import ffcv.loader
    from ffcv.loader.epoch_iterator import EpochIterator

from ..loader_kinds import FFCV
from . import compile_cache, ffcv_threads
from .protocol import Batch, LoaderFigures


def to_device(device: torch.device) -> list:
    """The pipeline's last move: FFCV's ToDevice onto a GPU, nothing on the CPU, where it
    would only copy each batch with a parallel torch op in FFCV's thread, whose OpenMP team
    would put the training step's threads to sleep between ops (docs/ffcv-notes.md)."""
    if device.type == "cpu":
        return []
    from ffcv.transforms import ToDevice
    return [ToDevice(device, non_blocking=True)]


def train_loader(path: str, resolution: int, batch_size: int, workers: int, seed: int,
                 device: torch.device, distributed: bool, crop_scale_min: float = 0.08) -> FfcvLoader:
    ffcv_threads.install()      # first: importing FFCV sets torch's threads
    compile_cache.install()
    from ffcv.fields.decoders import IntDecoder, RandomResizedCropRGBImageDecoder
    from ffcv.loader import Loader, OrderOption
    from ffcv.transforms import RandomHorizontalFlip, ToTensor, ToTorchImage
    image_pipeline = [
        RandomResizedCropRGBImageDecoder((resolution, resolution), scale=(crop_scale_min, 1.0)),
        RandomHorizontalFlip(),
        ToTensor(), *to_device(device), ToTorchImage(channels_last=True),
    ]
    label_pipeline = [IntDecoder(), ToTensor(), *to_device(device)]
    return FfcvLoader(Loader(path, batch_size=batch_size, num_workers=workers, order=OrderOption.RANDOM,
                             distributed=distributed, seed=seed, drop_last=True, os_cache=True,
                             pipelines={"image": image_pipeline, "label": label_pipeline}))


def val_loader(path: str, resolution: int, resize: int, batch_size: int, workers: int,
               device: torch.device, rank: int, world_size: int, num_samples: int) -> FfcvLoader:
    ffcv_threads.install()      # first: importing FFCV sets torch's threads
    compile_cache.install()
    from ffcv.fields.decoders import CenterCropRGBImageDecoder, IntDecoder
    from ffcv.loader import Loader, OrderOption
    from ffcv.transforms import ToTensor, ToTorchImage
    image_pipeline = [
        CenterCropRGBImageDecoder((resolution, resolution), ratio=resolution / resize),
        ToTensor(), *to_device(device), ToTorchImage(channels_last=True),
    ]
    # labels stay (N, 1), used as labels.view(-1): FFCV's Squeeze turns a last batch of
    # one image into a 0-d array, on which ToDevice (on a GPU) raises in the loader thread,
    # and the run then waits forever for the batch
    label_pipeline = [IntDecoder(), ToTensor(), *to_device(device)]
    shard = np.arange(rank, num_samples, world_size)
    return FfcvLoader(Loader(path, batch_size=batch_size, num_workers=workers, order=OrderOption.SEQUENTIAL,
                             indices=shard, drop_last=False, os_cache=True,
                             pipelines={"image": image_pipeline, "label": label_pipeline}))


def finish(batches: EpochIterator) -> None:
    """Stop an FFCV epoch iterator left before its end, and wait for its thread. After
    close() the thread stops at its next full-queue timeout (0.5 s); a process that exits
    while it is inside a parallel numba kernel aborts ("terminate called without an active
    exception"). Only at the epoch's end, with every batch made, does it block on a full
    queue with no timeout: a slot is freed then, and only then (freed earlier, each slot
    lets it decode one more batch, to the epoch's end: docs/ffcv-notes.md)."""
    batches.close()
    while batches.is_alive():
        batches.join(timeout=0.5)
        if batches.is_alive() and operator.length_hint(batches.iter_ixes) == 0:
            try:
                batches.output_queue.get_nowait()
            except queue.Empty:
                pass


class FfcvEpoch:
    """One epoch of an FFCV Loader, started when made (FFCV's thread, its buffers); closed or
    dropped, its thread is stopped and waited for (`finish`)."""

    def __init__(self, batches: EpochIterator) -> None:
        self.batches = batches          # a thread

    def __iter__(self) -> FfcvEpoch:
        return self

    def __next__(self) -> Batch:
        return next(self.batches)

    def close(self) -> None:
        finish(self.batches)

    def __del__(self) -> None:
        self.close()


class FfcvLoader:
    """An FFCV Loader as the loaders' protocol (loaders/protocol.py)."""
    kind = FFCV

    def __init__(self, loader: ffcv.loader.Loader) -> None:
        self.loader = loader

    def __len__(self) -> int:
        return len(self.loader)

    def __iter__(self) -> FfcvEpoch:
        return FfcvEpoch(iter(self.loader))

    def close(self) -> None:
        """Nothing stays open between epochs: each epoch's thread ends with it."""

    def figures(self) -> LoaderFigures:
        return LoaderFigures(threads=self.loader.num_workers, batches_ahead=self.loader.batches_ahead)
