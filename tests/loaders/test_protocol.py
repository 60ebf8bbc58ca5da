"""submission/loaders/protocol.py and run_loaders.py: FFCV's, torchvision's and the device loader
are one protocol (kind, length, epochs, close, figures), built from the configuration's kind,
and an epoch left early leaves no thread or process of theirs behind."""
from __future__ import annotations

import multiprocessing
import threading

import numpy as np
import pytest
import torch

from submission.config import resolve
from submission.data.sharding import steps_per_epoch
from submission.distributed import Context
from submission.loader_kinds import KINDS, kind_of
from submission.loaders.protocol import LoaderFigures, cycle, one_epoch
from submission.loaders.run_loaders import EVALUATE, TRAIN, batch_augmentation_of, run_loaders
from submission.methods import randaugment_batch, trivialaugment_batch

from image_folders import (
    CPU,
    FFCV_FINALIZER_NOISE,
    config,
    nested,  # noqa: F401 - a module-scoped fixture, used by name
)

# torchvision 0.29 announces that its decoders move to TorchCodec (docs/gpu-data.md)
DECODERS_MOVING = pytest.mark.filterwarnings("ignore:The image decoding and encoding capabilities:DeprecationWarning")
pytestmark = [FFCV_FINALIZER_NOISE, DECODERS_MOVING, pytest.mark.timeout(300)]


def loader_threads() -> list[str]:
    """The loaders' live threads: FFCV's epochs, the device loader's."""
    return [t.name for t in threading.enumerate()
            if type(t).__name__ == "EpochIterator" or t.name.startswith("device-loader")]


def test_every_kind_is_built_and_evaluated_by_a_loader_of_the_protocol():
    assert set(TRAIN) == set(KINDS)
    assert set(EVALUATE) == {kind.evaluation for kind in KINDS.values()}
    assert all(kind_of(word) for kind in KINDS.values() for word in kind.beside)


@pytest.mark.parametrize("word", list(KINDS))
def test_each_loader_hands_its_epochs_through_the_protocol_and_leaves_nothing_running(nested, word):
    root, cache, _, data = nested
    before = set(multiprocessing.active_children())   # another test's, if it left any
    # the pipelines of test_ffcv_loaders.py (numba compiles them once per process: compile_cache)
    cfg = config(root, cache, train_loader=word, batch_per_device=4, eval_batch_size=4, workers_per_device=1,
                 train_resolution=32, eval_resolution=32, eval_resize=36)
    train, val = run_loaders(cfg, Context(0, 0, 1, CPU), 0, data.train_path, data.val_path, data.eval_samples,
                             shard=True)
    assert train.kind is kind_of(word) and val.kind is kind_of(kind_of(word).evaluation)
    assert len(train) == steps_per_epoch(data.train_samples, 4, 1) > 2
    assert train.figures().threads == 1 and train.figures().batches_ahead >= 0
    assert isinstance(train.figures(), LoaderFigures)

    for images, labels in one_epoch(train):          # left at its first batch
        assert images.dtype == torch.uint8 and images.shape == (4, 3, 32, 32)
        assert images.is_contiguous(memory_format=torch.channels_last) and labels.shape == (4, 1)
        break
    assert loader_threads() == []
    assert sum(len(labels) for _, labels in one_epoch(val)) == data.eval_samples
    stream = cycle(train)                             # across the epoch's end, then closed
    assert sum(len(next(stream)[1]) for _ in range(len(train) + 1)) == 4 * (len(train) + 1)
    stream.close()
    assert loader_threads() == []
    workers = set(multiprocessing.active_children()) - before     # torchvision's persistent workers
    assert len(workers) == (1 if train.kind.pil_workers else 0)
    train.close()
    val.close()
    assert set(multiprocessing.active_children()) - before == set()


def test_the_device_loaders_augmentation_is_built_from_the_settings():
    assert batch_augmentation_of(resolve("cpu", {"recipe": "mild", "train_loader": "device"})) is None
    hot = resolve("cpu", {"recipe": "hot", "train_loader": "device", "randaugment_severity": "7",
                          "randaugment_set": "safe"})
    drawn = batch_augmentation_of(hot).draw(5, np.random.default_rng(1))
    expected = randaugment_batch.draw(5, 7, hot.randaugment_depth, "safe", np.random.default_rng(1))
    assert [[a.tolist() for a in step] for step in drawn] == [[a.tolist() for a in step] for step in expected]
    trivial = resolve("cpu", {"recipe": "hot", "train_loader": "device", "randaugment_depth": "0",
                              "trivialaugment": "composer"})
    augment = batch_augmentation_of(trivial)
    drawn = augment.draw(5, np.random.default_rng(2))
    expected = trivialaugment_batch.draw(5, "composer", np.random.default_rng(2))
    assert [[a.tolist() for a in step] for step in drawn] == [[a.tolist() for a in step] for step in expected]
    images = torch.randint(0, 256, (5, 3, 12, 12), dtype=torch.uint8, generator=torch.Generator().manual_seed(0))
    assert torch.equal(augment.apply(images, drawn), trivialaugment_batch.apply(images, expected, "composer"))
