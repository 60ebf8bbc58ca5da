"""The loaders a run of a configuration trains and evaluates with, built in one place for
the training loop, the warm-up and the bench.

Training: the loader of the configuration's kind (loader_kinds.py): FFCV's loader
(`ffcv_loaders.train_loader`); torchvision's DataLoader (`torchvision_loader`) with the
configuration's RandAugment (Hot's per-image CPU augmentation) or TrivialAugment as PIL
transforms; or the device loader (`device_loader`: decoding, crops and RandAugment or
TrivialAugment on the run's device, in their batched form). Evaluation: the loader of the
kind's `evaluation` (FFCV's sequential loader, or the device loader's); each rank every
world_size-th image. Each is a loader of the protocol (protocol.py).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ..config import Config, ConfigError
from ..distributed import Context
from ..loader_kinds import kind_of
from . import device_loader, ffcv_loaders
from .device_loader import BatchAugment
from .protocol import Loader

if TYPE_CHECKING:       # imported where asked for: PIL's transforms, for the torchvision loader
    from ..methods.randaugment import RandAugment
    from ..methods.trivialaugment import TrivialAugment

TrainBuilder = Callable[[Config, Context, int, str, int, int, bool], Loader]    # seed, path, rank, world, shard
EvalBuilder = Callable[[Config, Context, str, int, int, int], Loader]           # path, rank, world, samples


def randaugment_of(config: Config) -> RandAugment | None:
    """The configuration's RandAugment (a PIL -> PIL callable), or None without one."""
    if not config.randaugment_depth:
        return None
    from ..methods.randaugment import RandAugment
    return RandAugment(config.randaugment_severity, config.randaugment_depth, config.randaugment_set)


def augmentation_of(config: Config) -> RandAugment | TrivialAugment | None:
    """The configuration's per-image augmentation (a PIL -> PIL callable): its TrivialAugment or
    its RandAugment (never both: config refuses them together), or None without either."""
    if config.trivialaugment != "none":
        from ..methods.trivialaugment import TrivialAugment
        return TrivialAugment(config.trivialaugment)
    return randaugment_of(config)


def batch_augmentation_of(config: Config) -> BatchAugment | None:
    """The same augmentation in its batched form, for the device loader (its draws on the host,
    their application on the device: methods/randaugment_batch.py, trivialaugment_batch.py), or
    None without one. Its parameters reach the device through a staging of its own, reused
    batch after batch (methods/batch_parameters.py)."""
    from ..methods import randaugment_batch, trivialaugment_batch
    from ..methods.batch_parameters import ParameterStaging
    staging = ParameterStaging()
    if config.trivialaugment != "none":
        space = config.trivialaugment
        return BatchAugment(lambda count, random: trivialaugment_batch.draw(count, space, random),
                            lambda images, steps: trivialaugment_batch.apply(images, steps, space, staging))
    if not config.randaugment_depth:
        return None
    severity, depth, chosen = config.randaugment_severity, config.randaugment_depth, config.randaugment_set
    return BatchAugment(lambda count, random: randaugment_batch.draw(count, severity, depth, chosen, random),
                        lambda images, steps: randaugment_batch.apply(images, steps, chosen, staging))


def _ffcv_train(config: Config, ctx: Context, seed: int, path: str, rank: int, world: int, shard: bool) -> Loader:
    return ffcv_loaders.train_loader(path, config.train_resolution, config.batch_per_device,
                                     config.workers_per_device, seed, ctx.device, ctx.distributed and shard,
                                     config.crop_scale_min)


def _torchvision_train(config: Config, ctx: Context, seed: int, path: str, rank: int, world: int,
                       shard: bool) -> Loader:
    from . import torchvision_loader
    return torchvision_loader.train_loader(path, config.train_resolution, config.batch_per_device,
                                           config.workers_per_device, seed, ctx.device, rank, world,
                                           config.crop_scale_min, augmentation_of(config))


def _device_train(config: Config, ctx: Context, seed: int, path: str, rank: int, world: int, shard: bool) -> Loader:
    return device_loader.train_loader(path, config.train_resolution, config.batch_per_device,
                                      config.workers_per_device, seed, ctx.device, rank, world,
                                      config.crop_scale_min, batch_augmentation_of(config))


def _ffcv_val(config: Config, ctx: Context, path: str, rank: int, world: int, samples: int) -> Loader:
    return ffcv_loaders.val_loader(path, config.eval_resolution, config.eval_resize, config.eval_batch,
                                   config.workers_per_device, ctx.device, rank, world, samples)


def _device_val(config: Config, ctx: Context, path: str, rank: int, world: int, samples: int) -> Loader:
    return device_loader.val_loader(path, config.eval_resolution, config.eval_resize, config.eval_batch,
                                    config.workers_per_device, ctx.device, rank, world)


# each kind's builders, by the kind's word (loader_kinds.KINDS)
TRAIN: dict[str, TrainBuilder] = {"ffcv": _ffcv_train, "torchvision": _torchvision_train, "device": _device_train}
EVALUATE: dict[str, EvalBuilder] = {"ffcv": _ffcv_val, "device": _device_val}


def run_loaders(config: Config, ctx: Context, seed: int, train_path: str, val_path: str,
                eval_samples: int, shard: bool) -> tuple[Loader, Loader]:
    """The run's training and evaluation loaders; shard=False builds the same pipelines
    unsharded (the warm-up, on synthetic files of one batch)."""
    if config.workers_per_device < 1:
        raise ConfigError("workers_per_device is unset (0) here: the loader threads are derived from "
                          "the CPUs by preflight.launch_plan (or bench's fitted) before loaders are built")
    rank, world = (ctx.rank, ctx.world_size) if shard else (0, 1)
    kind = kind_of(config.train_loader)
    return (TRAIN[kind.word](config, ctx, seed, train_path, rank, world, shard),
            EVALUATE[kind.evaluation](config, ctx, val_path, rank, world, eval_samples))
