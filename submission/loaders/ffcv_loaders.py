"""FFCV loaders: the same pipelines for ImageNet and the embedded data set.

train: RandomResizedCrop decode -> horizontal flip -> tensor on the device (uint8, NCHW
       view of channels-last memory).
val:   center-crop decode at eval_resolution from a crop of ratio eval_resolution /
       eval_resize (FixRes: 224 out of 232 on ImageNet).
Normalisation runs in torch on the device (`normalize`), which keeps the pipelines
numba-only before ToTensor (FFCV 1.0.2 hangs on jitted -> plain -> jitted chains) and
needs no cupy on GPUs.

Distributed: training shards with FFCV's distributed mode (a DistributedSampler per
epoch); validation gives each rank every world_size-th sample, so that each
validation image is scored exactly once across ranks (FFCV's distributed sequential
order pads the last batch with repeats).
"""
from __future__ import annotations

import operator
import queue

import numpy as np
import torch

from . import compile_cache, ffcv_threads

IMAGENET_MEAN = (0.485 * 255, 0.456 * 255, 0.406 * 255)
IMAGENET_STD = (0.229 * 255, 0.224 * 255, 0.225 * 255)


def to_device(device: torch.device) -> list:
    """The pipeline's last move: FFCV's ToDevice onto a GPU, nothing on the CPU, where it
    would only copy each batch with a parallel torch op in FFCV's thread, whose OpenMP team
    would put the training step's threads to sleep between ops (docs/ffcv-notes.md)."""
    if device.type == "cpu":
        return []
    from ffcv.transforms import ToDevice
    return [ToDevice(device, non_blocking=True)]


def train_loader(path: str, resolution: int, batch_size: int, workers: int, seed: int,
                 device: torch.device, distributed: bool, crop_scale_min: float = 0.08):
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
    return Loader(path, batch_size=batch_size, num_workers=workers, order=OrderOption.RANDOM,
                  distributed=distributed, seed=seed, drop_last=True, os_cache=True,
                  pipelines={"image": image_pipeline, "label": label_pipeline})


def val_loader(path: str, resolution: int, resize: int, batch_size: int, workers: int,
               device: torch.device, rank: int, world_size: int, num_samples: int):
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
    return Loader(path, batch_size=batch_size, num_workers=workers, order=OrderOption.SEQUENTIAL,
                  indices=shard, drop_last=False, os_cache=True,
                  pipelines={"image": image_pipeline, "label": label_pipeline})


def eval_batch_sizes(num_samples: int, batch_size: int, rank: int, world_size: int) -> list[int]:
    """The batch sizes val_loader(...) gives this rank: full batches, then the remainder."""
    count = len(range(rank, num_samples, world_size))
    return [size for size in dict.fromkeys((min(batch_size, count), count % batch_size)) if size]


def finish(batches) -> None:
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


def one_epoch(loader):
    """The batches of one epoch of `loader`; a loop that leaves early (target reached, an
    exception) drops the generator, and CPython's reference counting then runs `finish`
    at once, before the process can exit. A loader other than FFCV's (torchvision_loader)
    needs no such care: its batches are just iterated."""
    from ffcv.loader.epoch_iterator import EpochIterator
    batches = iter(loader)
    if not isinstance(batches, EpochIterator):
        yield from batches
        return
    try:
        yield from batches
    finally:
        finish(batches)


def cycle(loader):
    """Batches of `loader`, epoch after epoch, for measurements on small data sets."""
    while True:
        yield from one_epoch(loader)


class Normalizer:
    """uint8 NCHW (channels last) -> float, ImageNet mean/std, on the batch's device."""

    def __init__(self, device: torch.device):
        self.mean = torch.tensor(IMAGENET_MEAN, device=device).view(1, 3, 1, 1)
        self.std = torch.tensor(IMAGENET_STD, device=device).view(1, 3, 1, 1)

    def __call__(self, images: torch.Tensor) -> torch.Tensor:
        out = images.float().sub_(self.mean).div_(self.std)
        return out.contiguous(memory_format=torch.channels_last)
