"""How the images are shared among the processes of a run, as step counts and batch sizes.

Training: FFCV's distributed order (and the torchvision and device loaders, which follow it)
gives each of `world_size` processes ceil(samples / world_size) images, padding with repeats,
and drops the last incomplete batch. run_plan.RunPlan plans with these numbers, and `prepare`
refuses a training set too small for one step before it writes anything. Evaluation: every
loader gives each rank every world_size-th image, the last batch kept (`eval_batch_sizes`,
which the warm-up meets before run_start).
"""
from __future__ import annotations

import math

from ..config import ConfigError


def steps_per_epoch(samples: int, batch_per_device: int, world_size: int) -> int:
    """Training steps of one epoch: each of `world_size` processes gets ceil(samples /
    world_size) images in whole batches of `batch_per_device`."""
    return math.ceil(samples / world_size) // batch_per_device


def refuse_fewer_than_one_batch(samples: int, batch_per_device: int, world_size: int) -> None:
    """A ConfigError, saying what to change, when `samples` training images make no step."""
    if steps_per_epoch(samples, batch_per_device, world_size) == 0:
        raise ConfigError(
            f"{samples} training images are fewer than one global batch "
            f"({batch_per_device * world_size} = {batch_per_device} per process x "
            f"{world_size} process(es)): lower batch_per_device or add images")


def eval_batch_sizes(num_samples: int, batch_size: int, rank: int, world_size: int) -> list[int]:
    """The batch sizes an evaluation loader gives this rank: full batches, then the remainder."""
    count = len(range(rank, num_samples, world_size))
    return [size for size in dict.fromkeys((min(batch_size, count), count % batch_size)) if size]
