"""The training loader for per-image CPU augmentation (Hot's RandAugment): a PyTorch
DataLoader with worker processes and torchvision transforms, as Composer ran Hot. FFCV's
pipeline runs numba-compiled stages only, so a PIL augmentation cannot run inside it.

It reads the same `.beton` files the FFCV path reads, not an ImageFolder, so every recipe
trains on the very images prepared once: the train_limit subset, without the images
skipped as unusable, from the files whose sizes and head hashes the ranks compare before
run_start. Each sample is decoded here (`BetonImages`): a JPEG entry with PIL, a raw entry
as the stored HxWx3 array.

Per image (`image_transform`): RandomResizedCrop (area crop_scale_min-1, ratio 3/4-4/3),
horizontal flip, the augmentation (RandAugment), to a uint8 tensor. Batches leave it as
the FFCV loader's do: uint8 NCHW in channels-last memory on the device, labels int64 (N, 1).

Stop signals are the trainer's (`leave_stop_signals_to_the_trainer`): a SIGINT or SIGTERM
meant for the run, which reaches the workers too, leaves them running, so that the trainer
stops between steps and logs run_stop "interrupted" rather than a worker's death.

Sharding is FFCV's distributed order: a DistributedSampler (shuffled from the seed, a new
order each epoch, the same on every rank) gives each rank ceil(samples / ranks) images,
padded with repeats, and the last incomplete batch is dropped: sharding.steps_per_epoch
batches an epoch.

What differs from FFCV's decoder: torchvision's crop resizes with PIL (bilinear,
antialiased), FFCV's with OpenCV (INTER_AREA); PIL's and FFCV's (libjpeg-turbo) JPEG
decoders may differ by a grey level here and there. From Composer's Hot, which decoded an
ImageFolder's original JPEGs: here the images are as stored, longest side at most
write_max_resolution, and in the default `proportion` mode about half of them raw (never
JPEG-compressed); `write_mode=jpg` makes every one a JPEG to decode, as in an ImageFolder
(compressed once more, at write_jpeg_quality).
"""
from __future__ import annotations

import contextlib
import functools
import io
import os
import signal
import threading
from collections.abc import Callable, Generator, Iterator

import numpy as np
import torch
from PIL import Image
from torch.utils.data import DataLoader, Dataset, DistributedSampler
from torch.utils.data.dataloader import _MultiProcessingDataLoaderIter
from torchvision import transforms

from ..data.beton_samples import JPEG, BetonSamples
from ..loader_kinds import TORCHVISION
from .protocol import Batch, Epoch, LoaderFigures


class BetonImages(Dataset):
    """(PIL RGB image, int label) of each sample of a .beton written by data/prepare.py,
    `transform` applied to the image (beton_samples.BetonSamples: the file is memory-mapped
    on first use in each process, so the workers map it themselves and the dataset pickles as
    its path and tables, under spawn and forkserver too)."""

    def __init__(self, path: str, transform: Callable | None = None):
        self.samples, self.transform = BetonSamples(path, "torchvision"), transform

    def __len__(self) -> int:
        return len(self.samples)

    def image(self, index: int) -> Image.Image:
        if self.samples.modes[index] == JPEG:
            return Image.open(io.BytesIO(self.samples.stored(index).tobytes())).convert("RGB")
        return Image.fromarray(np.asarray(self.samples.pixels(index)), "RGB")

    def __getitem__(self, index: int) -> tuple:
        image = self.image(index)
        return (self.transform(image) if self.transform else image), int(self.samples.labels[index])


def image_transform(resolution: int, crop_scale_min: float,
                    augment: Callable | None) -> transforms.Compose:
    """What each training image goes through, in the worker processes (PIL in, uint8 CHW out)."""
    return transforms.Compose([
        transforms.RandomResizedCrop(resolution, scale=(crop_scale_min, 1.0), ratio=(3 / 4, 4 / 3)),
        transforms.RandomHorizontalFlip(),
        *([augment] if augment is not None else []),
        transforms.PILToTensor(),
    ])


def leave_stop_signals_to_the_trainer(worker_id: int, trainer: int) -> None:
    """The workers' worker_init_fn: they ignore SIGINT, and SIGTERM unless the trainer sends it.

    Ctrl-C, torchrun's stop (SIGTERM or SIGINT to each trainer's process group) and SLURM's
    (SIGTERM to every process of the job) reach the workers with the trainer, which notes
    the signal and stops after its step. A worker killed first made the trainer's next
    batch fail ("DataLoader worker (pid N) is killed by signal"), a crash in the log. The
    trainer's own SIGTERM (the DataLoader's shutdown, multiprocessing's at exit) must still
    end a worker: ignored, it would leave the trainer waiting for the worker at exit
    forever. So SIGTERM is blocked and a thread waits for it, ending the worker, as torch's
    handler does, when it comes from the trainer (the sender's pid, which a Python signal
    handler cannot see). A trainer that dies ends its workers through the DataLoader's
    watchdog (each worker checks its parent every 5 s). Without sigwaitinfo (macOS) SIGTERM
    keeps torch's handler: the trainer then tells a worker's death after its own stop
    signal from a crash (stop_signals.StopRequests.explains). `trainer` is the trainer's pid,
    bound when the loader is built: under the forkserver and spawn start methods a worker's
    parent is not the trainer."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    waits_for_sigterm = hasattr(signal, "sigwaitinfo")
    if waits_for_sigterm:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
        threading.Thread(target=_end_on_sigterm_from, args=(trainer,), daemon=True,
                         name="sigterm-from-trainer").start()
    # forked with both blocked (TrainLoader._batches): what came before this point is now
    # ignored (SIGINT) or waited for (SIGTERM)
    unblocked = {signal.SIGINT} if waits_for_sigterm else {signal.SIGINT, signal.SIGTERM}
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, unblocked)


@contextlib.contextmanager
def _stop_signals_held() -> Iterator[None]:
    """SIGINT and SIGTERM held back from this thread while the DataLoader forks its workers:
    a worker inherits them blocked until its worker_init_fn has chosen how to take them (a
    signal in between killed a worker still starting); this process gets them after."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    before = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


def _end_on_sigterm_from(trainer: int) -> None:
    while signal.sigwaitinfo({signal.SIGTERM}).si_pid != trainer:
        pass
    os._exit(0)


class TrainLoader:
    """Batches of one epoch per iteration; each iteration starts the next epoch (the
    sampler's set_epoch: a new order, reproducible from the seed). The loaders' protocol
    (loaders/protocol.py)."""
    kind = TORCHVISION

    def __init__(self, dataset: Dataset, batch_size: int, workers: int, seed: int,
                 device: torch.device, rank: int, world_size: int):
        self.device, self.epoch = device, 0
        self.sampler: DistributedSampler = DistributedSampler(dataset, num_replicas=world_size, rank=rank,
                                          shuffle=True, seed=seed, drop_last=False)
        # The workers' generators (torch, random, numpy: torch seeds all three in each worker
        # from a base seed drawn from `generator`) come from the seed and the rank: each
        # rank augments its images with draws of its own, the same in every run (mixed by
        # SeedSequence: a CPU torch.Generator keeps only the low 32 bits of its seed).
        # Persistent workers, as Composer's Hot (persistent_workers: true): forked once, at
        # the first epoch, not at each epoch's start; their generators run on from epoch to
        # epoch, so epoch e's draws follow from (seed, rank) and the epochs before it, each
        # run to its end, as the training loop runs them. With workers=0 the transforms
        # draw from this process's global generators (train.seed_everything).
        generator = torch.Generator().manual_seed(
            int(np.random.SeedSequence((seed, rank)).generate_state(1)[0]))
        self.loader = DataLoader(dataset, batch_size=batch_size, sampler=self.sampler,
                                 num_workers=workers, drop_last=True,
                                 pin_memory=device.type == "cuda",
                                 persistent_workers=workers > 0, generator=generator,
                                 worker_init_fn=functools.partial(leave_stop_signals_to_the_trainer,
                                                                  trainer=os.getpid()))

    def __len__(self) -> int:
        return len(self.loader)

    def __iter__(self) -> Epoch:
        self.sampler.set_epoch(self.epoch)
        self.epoch += 1
        return self._batches()

    def figures(self) -> LoaderFigures:
        workers = self.loader.num_workers
        return LoaderFigures(threads=workers, batches_ahead=workers * (self.loader.prefetch_factor or 0))

    def close(self) -> None:
        """End the persistent worker processes (a later epoch forks new ones)."""
        workers, self.loader._iterator = self.loader._iterator, None
        if isinstance(workers, _MultiProcessingDataLoaderIter):
            workers._shutdown_workers()

    def _batches(self) -> Generator[Batch, None, None]:
        cuda = self.device.type == "cuda"
        with _stop_signals_held():
            batches = iter(self.loader)
        for images, labels in batches:
            images = images.to(self.device, non_blocking=cuda)
            yield (images.contiguous(memory_format=torch.channels_last),
                   labels.to(self.device, non_blocking=cuda).view(-1, 1))


def train_loader(path: str, resolution: int, batch_size: int, workers: int, seed: int,
                 device: torch.device, rank: int, world_size: int, crop_scale_min: float = 0.08,
                 augment: Callable | None = None) -> TrainLoader:
    """The training loader of a .beton: the FFCV train loader's batches, with `augment`
    (a PIL -> PIL callable such as RandAugment) applied to each image after crop and flip."""
    dataset = BetonImages(path, image_transform(resolution, crop_scale_min, augment))
    return TrainLoader(dataset, batch_size, workers, seed, device, rank, world_size)
