"""Images -> FFCV .beton files, cached by content (docs/data.md).

The steps, each a module of its own: the source is scanned (sources) and subset; folder
images are checked (image_checks); each split's .beton is written or reused
(beton_cache); a synthetic .beton shaped like each split is written for the loaders'
warm-up (synthetic); what was made is described by a PreparedData (data_json), saved
as data.json for the training processes.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from ..config import Config, ConfigError, in_repository
from ..loader_kinds import kind_of
from ..private_folder import make_private
from . import sources
from .beton_cache import cached_beton, head_sha256, write_settings
from .beton_samples import refuse_unreadable
from .data_json import PreparedData
from .image_checks import drop_unusable
from .sharding import refuse_fewer_than_one_batch
from .synthetic import synthetic_beton_like


def _subset_indices(total: int, limit: int) -> np.ndarray:
    """Evenly spaced indices, so a subset keeps every class (sources are class-sorted)."""
    if not limit or limit >= total:
        return np.arange(total)
    return np.linspace(0, total - 1, limit).round().astype(np.int64)


def _subset(split: sources.FolderSplit | sources.ArraySplit, limit: int) -> sources.FolderSplit | sources.ArraySplit:
    keep = _subset_indices(len(split), limit)
    if isinstance(split, sources.ArraySplit):
        return sources.ArraySplit(split.images[keep], split.labels[keep], split.classes,
                                  split.source_digest)
    split.samples = [split.samples[i] for i in keep]
    return split


def cache_folder(config: Config) -> Path:
    return in_repository(config.cache_dir)


def _source_splits(config: Config) -> tuple:
    """(train, val, the cache subfolder's name) of the configured source, subset; nothing
    is written."""
    train: sources.ArraySplit | sources.FolderSplit
    val: sources.ArraySplit | sources.FolderSplit
    if config.dataset == "fashion-mnist":
        train, val = sources.load_fashion_mnist(config.data_dir)
        name = "fashion-mnist"
    else:
        if not config.data_dir:
            raise ConfigError("dataset=imagenet needs data_dir=FOLDER (with train/ and val/).\n"
                              + sources.SUPPORTED_LAYOUTS)
        train, val = sources.scan_image_folder(Path(config.data_dir), config.val_labels)
        name = Path(config.data_dir).resolve().name or "images"
    return _subset(train, config.train_limit), _subset(val, config.eval_limit), name


def refuse_unreadable_by_the_loaders(config: Config, train_path: Path, val_path: Path) -> None:
    """A ConfigError before run_start for a .beton that the run's loaders read with their own
    reader (data/beton_samples.py) and whose layout it cannot read; its header and fields only:
    no sample is read, and nothing when FFCV's Loader reads both."""
    train = kind_of(config.train_loader)
    for kind, path in ((train, train_path), (kind_of(train.evaluation), val_path)):
        if kind.reads_beton_itself:
            refuse_unreadable(path, kind.word)


def prepare(config: Config, world_size: int | None = None) -> PreparedData:
    """Return the .beton pair for this configuration, writing what is missing.

    Each split is cached on its own, so a new eval subset does not rewrite the training
    set. The returned description is also saved as JSON (`PreparedData.save`), which
    is what the training processes read. world_size: the processes that will train on
    the data, config.batch_per_device images each a step; given, a training set that
    makes no step is refused before anything is written (sharding).
    """
    workers = max(os.cpu_count() or 1, 1)
    train, val, name = _source_splits(config)
    if world_size:
        refuse_fewer_than_one_batch(len(train), config.batch_per_device, world_size)
    folder = make_private(cache_folder(config)) / name
    folder.mkdir(exist_ok=True)
    skipped = 0
    if isinstance(train, sources.FolderSplit):
        skipped = drop_unusable((train, val), folder, config, workers)
    if not len(train) or not len(val):
        raise ConfigError("no images left to write after filtering")
    if world_size and skipped:
        refuse_fewer_than_one_batch(len(train), config.batch_per_device, world_size)
    settings = write_settings(config)
    train_path = cached_beton(train, folder, "train", settings, workers)
    val_path = cached_beton(val, folder, "val", settings, workers)
    refuse_unreadable_by_the_loaders(config, train_path, val_path)
    # one batch for each loader: enough to compile its pipeline (warmup.warm_up_loaders)
    count = max(config.batch_per_device, config.eval_batch)
    synthetic_folder = cache_folder(config) / "synthetic"
    synthetic_folder.mkdir(exist_ok=True)
    synthetic_train, synthetic_val = (
        synthetic_beton_like(path, count, len(train.classes), synthetic_folder, settings, workers)
        for path in (train_path, val_path))
    return PreparedData(str(train_path), str(val_path), num_classes=len(train.classes),
                        train_samples=len(train), eval_samples=len(val), skipped_images=skipped,
                        synthetic_train_path=str(synthetic_train),
                        synthetic_val_path=str(synthetic_val), synthetic_samples=count,
                        train_head_sha256=head_sha256(train_path),
                        val_head_sha256=head_sha256(val_path), write_settings=settings)
