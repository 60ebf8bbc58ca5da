"""What every loader is: FFCV's (`ffcv_loaders`), torchvision's DataLoader (`torchvision_loader`)
and the device loader (`device_loader`) hand the step the same batches (uint8 N x 3 x side x
side in channels-last memory on the run's device, int64 labels (N, 1)) through one protocol,
so that the loop, the warm-up and the bench never ask which one they hold.

A loader's iteration is one epoch (each starts the next epoch's order). An epoch left early,
closed or dropped (the target reached mid-epoch, an exception, a bench's timed stretch) stops
the loader's work for it at once: FFCV's thread is stopped and waited for, the device loader's
thread stopped, a DataLoader's queue dropped; a process may then exit safely.
"""
from __future__ import annotations

from collections.abc import Generator, Iterator
from dataclasses import dataclass
from typing import Protocol

import torch

from ..loader_kinds import LoaderKind

Batch = tuple[torch.Tensor, torch.Tensor]       # (images, labels)


class Epoch(Protocol):
    """One epoch's batches; close() stops the loader's work for it (dropping it does too)."""

    def __iter__(self) -> Iterator[Batch]: ...

    def __next__(self) -> Batch: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class LoaderFigures:
    """What a loader runs with, for the bench's rows and warm-up."""
    threads: int            # host threads, or DataLoader worker processes, that make its batches
    batches_ahead: int      # batches it makes before the step takes them


class Loader(Protocol):
    @property
    def kind(self) -> LoaderKind: ...

    def __len__(self) -> int: ...           # batches an epoch

    def __iter__(self) -> Epoch: ...        # the next epoch

    def close(self) -> None: ...            # its threads or processes ended; later epochs may start them again

    def figures(self) -> LoaderFigures: ...


def one_epoch(loader: Loader) -> Epoch:
    """The batches of the next epoch of `loader`. A loop that leaves early drops it, and
    CPython's reference counting then stops its work at once, before the process can exit."""
    return iter(loader)


def cycle(loader: Loader) -> Generator[Batch, None, None]:
    """Batches of `loader`, epoch after epoch, for measurements on small data sets; closing it
    closes the epoch it is in."""
    while True:
        yield from one_epoch(loader)
