"""submission/loaders/ffcv_loaders.py: FFCV's training and validation loaders over a prepared
folder: batches, shards, threads, and epochs left early."""
from __future__ import annotations

import threading
from collections import Counter

import pytest
import torch

from submission.data.sharding import eval_batch_sizes
from submission.loaders import ffcv_loaders
from submission.loaders.protocol import one_epoch
from submission.step import IMAGENET_MEAN, IMAGENET_STD, Normalizer

from image_folders import (
    CPU,
    FFCV_FINALIZER_NOISE,
    nested,  # noqa: F401 - a module-scoped fixture, used by name
    read_val,
)

pytestmark = FFCV_FINALIZER_NOISE


@pytest.mark.timeout(120)
def test_train_loader_iterates_an_epoch(nested):
    _, _, labels, data = nested
    loader = ffcv_loaders.train_loader(data.train_path, resolution=32, batch_size=4, workers=1, seed=0,
                                  device=CPU, distributed=False)
    seen = []
    for images, batch_labels in loader:
        assert images.dtype == torch.uint8
        assert tuple(images.shape) == (4, 3, 32, 32)
        assert images.is_contiguous(memory_format=torch.channels_last)
        batch_labels = batch_labels.reshape(-1)
        assert len(batch_labels) == 4
        assert all(0 <= int(label) < data.num_classes for label in batch_labels)
        seen += batch_labels.tolist()
    assert len(seen) == (len(labels["train"]) // 4) * 4            # drop_last
    assert not Counter(seen) - Counter(labels["train"])             # a sample at most once

    normalized = Normalizer(CPU)(images)
    assert normalized.dtype == torch.float32
    assert normalized.is_contiguous(memory_format=torch.channels_last)
    expected = (images[:, 1].float() - IMAGENET_MEAN[1]) / IMAGENET_STD[1]
    assert torch.allclose(normalized[:, 1], expected, atol=1e-5)


@pytest.mark.timeout(120)
def test_cpu_batches_are_not_copied_in_the_loaders_thread(nested, monkeypatch):
    """On the CPU the step gets the batch FFCV decoded. A copy in FFCV's thread (ToDevice
    onto the CPU) is a parallel torch op there, whose OpenMP team, with the step's,
    outnumbers the cores: libgomp then stops spin-waiting and the step's threads sleep at
    every op (0.73x the step's rate while a loader thread lived, on 2 vCPUs)."""
    _, _, _, data = nested
    copies, real_copy = [], torch.Tensor.copy_

    def copy_seen(tensor, *args, **kwargs):
        if threading.current_thread() is not threading.main_thread():
            copies.append(tuple(tensor.shape))
        return real_copy(tensor, *args, **kwargs)

    monkeypatch.setattr(torch.Tensor, "copy_", copy_seen)
    train = ffcv_loaders.train_loader(data.train_path, resolution=32, batch_size=4, workers=1, seed=0,
                                 device=CPU, distributed=False)
    val = ffcv_loaders.val_loader(data.val_path, resolution=32, resize=36, batch_size=4, workers=1,
                             device=CPU, rank=0, world_size=1, num_samples=data.eval_samples)
    for loader in (train, val):
        batches = 0
        for images, labels in one_epoch(loader):
            assert images.dtype == torch.uint8 and images.is_contiguous(memory_format=torch.channels_last)
            assert labels.shape == (len(images), 1)
            batches += 1
        assert batches == len(loader) > 0
    assert copies == []


THREADS_PROBE = """
import json, os, sys
import torch
import ffcv.reader                     # (prepare reads a .beton's metadata): torch's threads at 1
from submission.bench.timing import bench_device
from submission.config import resolve
from submission.loaders import ffcv_loaders
from submission.loaders.protocol import one_epoch
seen = {"ffcv imported": torch.get_num_threads()}
bench_device(resolve("cpu", {}))       # the run's count: cpu_threads=0, the usable cores
seen["bench"] = torch.get_num_threads() == len(os.sched_getaffinity(0))
torch.set_num_threads(3)
path, val_path, samples = sys.argv[1], sys.argv[2], int(sys.argv[3])
train = ffcv_loaders.train_loader(path, resolution=32, batch_size=4, workers=1, seed=0, device=torch.device("cpu"),
                             distributed=False)
val = ffcv_loaders.val_loader(val_path, resolution=32, resize=36, batch_size=4, workers=1,
                         device=torch.device("cpu"), rank=0, world_size=1, num_samples=samples)
seen["built"] = torch.get_num_threads()
for loader in (train, val):
    for _ in one_epoch(loader):
        pass
seen["epochs"] = torch.get_num_threads()
print(json.dumps(seen))
"""


@pytest.mark.e2e
def test_ffcv_leaves_torch_threads_to_the_run(nested, tmp_path):
    """FFCV sets torch's intra-op threads when it is imported (to 1) and when a Loader is
    built or starts an epoch (to its worker count): the CPU step ran on the loader's
    threads, not the cpu_threads (or cores per process) the run had set. In a fresh
    process: FFCV imported, the bench's device set up (the usable cores), then 3 threads
    set and loaders of 1 worker built and read."""
    import json
    import subprocess
    import sys

    from conftest import GPUS_HIDDEN, LOADERS_INTERPRETED, REPO
    _, _, _, data = nested
    (tmp_path / "probe.py").write_text(THREADS_PROBE)
    # FFCV sets the threads in Python (Compiler.set_num_threads), whether numba compiles or not
    done = subprocess.run([sys.executable, str(tmp_path / "probe.py"), data.train_path, data.val_path,
                           str(data.eval_samples)], cwd=REPO, capture_output=True, text=True, timeout=300,
                          env={"PYTHONPATH": str(REPO), "PATH": "", **GPUS_HIDDEN, **LOADERS_INTERPRETED})
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {
        "ffcv imported": 1, "bench": True, "built": 3, "epochs": 3}


@pytest.mark.timeout(120)
def test_an_epoch_left_early_leaves_no_decoding_thread(nested):
    """A run that reaches its target mid-epoch drops its batches: FFCV's thread would
    block forever on its full queue at the epoch's end (and a process exiting while it
    decodes aborts). The epoch (ffcv_loaders.FfcvEpoch) finishes it when the loop is left."""
    import threading
    _, _, _, data = nested
    loader = ffcv_loaders.train_loader(data.train_path, resolution=32, batch_size=2, workers=1, seed=0,
                                  device=CPU, distributed=False)
    assert len(loader) == 7                       # more batches than FFCV's queue holds
    for _ in one_epoch(loader):
        break
    assert not [t for t in threading.enumerate() if type(t).__name__ == "EpochIterator"]
    abandoned = iter(loader.loader)               # what a plain loop over FFCV's Loader leaves behind
    next(abandoned)
    abandoned.join(timeout=5)
    assert abandoned.is_alive()                   # still there: blocked on its full queue
    ffcv_loaders.finish(abandoned)
    assert not abandoned.is_alive()


@pytest.mark.timeout(120)
def test_an_epoch_left_while_its_thread_decodes_stops_there(nested):
    """Left at once, with FFCV's thread still filling its queue: it stops at its next
    full-queue timeout, batches before the epoch's end. Freeing queue slots while it
    still had batches to make kept it decoding to the epoch's end, half a second a batch
    (45-113 s on Fashion-MNIST's 937 batches)."""
    import operator
    _, _, _, data = nested
    loader = ffcv_loaders.train_loader(data.train_path, resolution=32, batch_size=1, workers=1, seed=0,
                                  device=CPU, distributed=False)
    assert len(loader) >= 14
    for trial in range(3):
        left = iter(loader.loader)
        next(left)
        ffcv_loaders.finish(left)
        assert not left.is_alive()
        assert operator.length_hint(left.iter_ixes) >= len(loader) - 8, trial


def test_val_loader_yields_each_sample_once_and_shards_partition(nested):
    _, _, labels, data = nested
    n = data.eval_samples
    full_labels, full_images = read_val(data.val_path, n)
    assert full_labels == labels["val"]                              # sequential order
    assert len(set(full_images)) == n                                # every image, once

    shards = [read_val(data.val_path, n, rank=rank, world_size=2) for rank in (0, 1)]
    (labels0, images0), (labels1, images1) = shards
    assert (len(images0), len(images1)) == ((n + 1) // 2, n // 2)
    assert not set(images0) & set(images1)
    assert sorted(images0 + images1) == sorted(full_images)
    assert Counter(labels0 + labels1) == Counter(labels["val"])
    assert labels0 == labels["val"][0::2] and labels1 == labels["val"][1::2]


def test_eval_batch_sizes_are_those_the_val_loader_gives_a_last_batch_of_one_included(nested):
    """The warm-up runs evaluation at these batch sizes before run_start. A last batch of
    one image used to stop FFCV's loader thread (Squeeze made its labels 0-d) and hang."""
    n = nested[3].eval_samples
    seen = []
    for rank, world_size, batch_size in ((0, 1, 4), (1, 2, 4), (0, 2, 3)):
        loader = ffcv_loaders.val_loader(nested[3].val_path, resolution=32, resize=36,
                                    batch_size=batch_size, workers=1, device=CPU, rank=rank,
                                    world_size=world_size, num_samples=n)
        sizes = [len(labels.reshape(-1)) for _, labels in loader]
        assert list(dict.fromkeys(sizes)) == eval_batch_sizes(n, batch_size, rank, world_size)
        seen += sizes
    assert 1 in seen
