"""The loaders a run of a configuration trains and evaluates with, built in one place for
the training loop, the warm-up and the bench.

Training: FFCV's loader (`ffcv_loaders.train_loader`); with train_loader=torchvision the
DataLoader of `torchvision_loader` with the configuration's RandAugment (Hot's per-image
CPU augmentation) or TrivialAugment; with train_loader=device `device_loader` (decoding,
crops and RandAugment or TrivialAugment on the run's device). Evaluation: FFCV's sequential
loader, or the device loader's with train_loader=device; each rank every world_size-th image.
"""
from __future__ import annotations

from ..config import Config
from ..distributed import Context
from . import ffcv_loaders


def randaugment_of(config: Config):
    """The configuration's RandAugment (a PIL -> PIL callable), or None without one."""
    if not config.randaugment_depth:
        return None
    from ..methods.randaugment import RandAugment
    return RandAugment(config.randaugment_severity, config.randaugment_depth, config.randaugment_set)


def augmentation_of(config: Config):
    """The configuration's per-image augmentation (a PIL -> PIL callable): its TrivialAugment or
    its RandAugment (never both: config refuses them together), or None without either."""
    if config.trivialaugment != "none":
        from ..methods.trivialaugment import TrivialAugment
        return TrivialAugment(config.trivialaugment)
    return randaugment_of(config)


def run_loaders(config: Config, ctx: Context, seed: int, train_path: str, val_path: str,
                eval_samples: int, shard: bool):
    """The run's training and evaluation loaders; shard=False builds the same pipelines
    unsharded (the warm-up, on synthetic files of one batch)."""
    rank, world = (ctx.rank, ctx.world_size) if shard else (0, 1)
    if config.train_loader == "device":
        from . import device_loader
        return (device_loader.train_loader(
                    train_path, config.train_resolution, config.batch_per_device, config.workers_per_device,
                    seed, ctx.device, rank, world, config.crop_scale_min, augmentation_of(config)),
                device_loader.val_loader(
                    val_path, config.eval_resolution, config.eval_resize, config.eval_batch,
                    config.workers_per_device, ctx.device, rank, world))
    if config.train_loader == "torchvision":
        from . import torchvision_loader
        train = torchvision_loader.train_loader(
            train_path, config.train_resolution, config.batch_per_device,
            config.workers_per_device, seed, ctx.device, rank, world, config.crop_scale_min,
            augmentation_of(config))
    else:
        train = ffcv_loaders.train_loader(
            train_path, config.train_resolution, config.batch_per_device,
            config.workers_per_device, seed, ctx.device, ctx.distributed and shard,
            config.crop_scale_min)
    val = ffcv_loaders.val_loader(
        val_path, config.eval_resolution, config.eval_resize,
        config.eval_batch, config.workers_per_device,
        ctx.device, rank, world, eval_samples)
    return train, val
