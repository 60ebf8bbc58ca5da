"""The torchvision loader (Hot's per-image CPU augmentation) on .beton files written by the
harness's own preparation (data/prepare.py) from a small image folder: it decodes the
stored images, shards as FFCV's distributed order does, plans as sharding.steps_per_epoch, and
hands the loop the FFCV loader's kind of batches, reproducibly from the seed.

Images: 3 classes, 23 training PNGs of 56x40 px (smooth gradients, different in each
image and channel, so that JPEG keeps them close and a channel swap shows)."""
from __future__ import annotations

import pickle
import random
from collections import Counter
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from PIL import Image
from torch.utils.data import Subset

from submission.config import resolve
from submission.data import sources
from submission.data.beton_samples import JPEG
from submission.data.prepare import prepare
from submission.data.sharding import steps_per_epoch
from submission.loaders.torchvision_loader import BetonImages, TrainLoader, image_transform, train_loader

CPU = torch.device("cpu")
TRAIN_COUNTS, VAL_COUNT = (8, 8, 7), 2
WIDTH, HEIGHT = 56, 40
# numba's dispatcher finalizer can raise KeyError when FFCV's functions are collected
pytestmark = pytest.mark.filterwarnings(
    "ignore:Exception ignored in. <finalize object:pytest.PytestUnraisableExceptionWarning")


def gradient(serial: int) -> Image.Image:
    y, x = np.mgrid[0:HEIGHT, 0:WIDTH]
    pixels = np.stack([x * 4 + serial, y * 5 + 2 * serial, 255 - 2 * (x + y) - serial], axis=-1)
    return Image.fromarray(pixels.astype(np.uint8), "RGB")


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    """The training images in the order prepare writes them, and the prepared data of each
    write mode."""
    root, cache = tmp_path_factory.mktemp("images"), tmp_path_factory.mktemp("cache")
    serial = 0
    for label, name in enumerate(("ant", "bee", "cow")):
        for split, count in (("train", TRAIN_COUNTS[label]), ("val", VAL_COUNT)):
            (root / split / name).mkdir(parents=True, exist_ok=True)
            for i in range(count):
                serial += 1
                gradient(serial).save(root / split / name / f"{i}.png")
    train, _ = sources.scan_image_folder(root)
    sources_in_order = [(np.asarray(Image.open(path).convert("RGB")), label)
                        for path, label in train.samples]
    data = {mode: prepare(resolve("cpu", {
        "dataset": "imagenet", "data_dir": str(root), "cache_dir": str(cache), "write_mode": mode,
        "write_max_resolution": "64"})) for mode in ("raw", "jpg", "proportion")}
    assert all(d.train_samples == sum(TRAIN_COUNTS) for d in data.values())
    return sources_in_order, data


def test_raw_entries_are_the_source_images_exactly(prepared):
    sources_in_order, data = prepared
    images = BetonImages(data["raw"].train_path)
    assert len(images) == len(sources_in_order) == 23
    assert not (images.samples.modes == JPEG).any()
    for i, (pixels, label) in enumerate(sources_in_order):
        image, stored_label = images[i]
        assert image.mode == "RGB" and image.size == (WIDTH, HEIGHT)
        assert stored_label == label and np.array_equal(np.asarray(image), pixels)


def test_jpeg_entries_decode_close_to_the_source_images(prepared):
    sources_in_order, data = prepared
    images = BetonImages(data["jpg"].train_path)
    assert (images.samples.modes == JPEG).all()
    for i, (pixels, label) in enumerate(sources_in_order):
        image, stored_label = images[i]
        decoded = np.asarray(image).astype(int)
        assert stored_label == label and decoded.shape == pixels.shape
        error = np.abs(decoded - pixels).mean()
        assert error < 2                                                # quality 90
        assert error < np.abs(decoded - pixels[..., ::-1]).mean() / 10    # RGB, not BGR


def test_proportion_mode_mixes_both_and_each_decodes(prepared):
    sources_in_order, data = prepared
    images = BetonImages(data["proportion"].train_path)
    jpeg = images.samples.modes == JPEG
    assert 0 < jpeg.sum() < len(images)     # 0.5 each: all 23 alike with p = 2.4e-7
    for i, (pixels, _) in enumerate(sources_in_order):
        decoded = np.asarray(images[i][0]).astype(int)
        assert (np.abs(decoded - pixels).mean() < 2) if jpeg[i] else np.array_equal(decoded, pixels)


def test_the_dataset_pickles_without_its_memory_map(prepared):
    _, data = prepared
    images = BetonImages(data["raw"].train_path)
    first = np.asarray(images[5][0])              # maps the file in this process
    copy = pickle.loads(pickle.dumps(images))
    assert copy.samples._data is None and np.array_equal(np.asarray(copy[5][0]), first)


@pytest.mark.parametrize("samples, batch, world",
                         [(23, 4, 1), (23, 4, 2), (23, 3, 3), (20, 5, 2), (22, 2, 4), (23, 12, 2)])
def test_batches_an_epoch_are_the_run_plans(prepared, samples, batch, world):
    _, data = prepared
    subset = Subset(BetonImages(data["raw"].train_path, image_transform(16, 0.08, None)),
                    range(samples))
    for rank in range(world):
        loader = TrainLoader(subset, batch, 0, 1, CPU, rank, world)
        assert len(loader) == steps_per_epoch(samples, batch, world)
        assert len(list(loader)) == len(loader)


def test_ranks_share_each_epoch_as_ffcv_distributed_order_does(prepared, monkeypatch):
    _, data = prepared
    path, n = data["raw"].train_path, 23
    ranks = [train_loader(path, 16, 5, 0, 7, CPU, rank, 2) for rank in range(2)]
    from ffcv.traversal_order.random import Random
    orders = []
    for epoch in range(2):
        for rank, loader in enumerate(ranks):
            loader.sampler.set_epoch(epoch)
            orders.append(list(loader.sampler))
            # FFCV's distributed RANDOM order, as each rank of the FFCV path builds it
            monkeypatch.setattr(torch.distributed, "is_available", lambda: True)
            monkeypatch.setattr(torch.distributed, "get_world_size", lambda group=None: 2)
            monkeypatch.setattr(torch.distributed, "get_rank", lambda group=None, rank=rank: rank)
            ffcv = Random(SimpleNamespace(indices=np.arange(n), seed=7, distributed=True))
            assert list(ffcv.sample_order(epoch)) == orders[-1]
        first, second = orders[-2:]
        assert len(first) == len(second) == 12                          # ceil(23 / 2) each
        counts = Counter(first + second)
        assert set(counts) == set(range(n)) and sorted(counts.values()) == [1] * 22 + [2]
    assert orders[0] != orders[2]                                       # a new order each epoch

    # the batches of each iteration are the next epoch's order, the incomplete batch dropped
    loader, images = train_loader(path, 16, 5, 0, 7, CPU, 1, 2), BetonImages(path)
    for epoch in range(2):
        labels = torch.cat([batch_labels for _, batch_labels in loader]).view(-1)
        assert labels.tolist() == [images.samples.labels[i] for i in orders[2 * epoch + 1][:10]]
    assert loader.epoch == 2


def painted(image: Image.Image) -> Image.Image:
    """An augmentation whose output shows the worker's three generators' draws."""
    colour = (random.randrange(256), int(np.random.randint(256)), int(torch.randint(256, ())))
    return Image.new("RGB", image.size, colour)


def test_batches_are_the_loops_and_repeat_from_the_seed(prepared):
    _, data = prepared
    path = data["jpg"].train_path

    def epochs(seed, rank=0, count=1):
        loader = train_loader(path, 16, 4, 2, seed, CPU, rank, 1 if rank == 0 else 2,
                              crop_scale_min=0.25, augment=painted)
        try:
            return [list(loader) for _ in range(count)]
        finally:
            loader.close()                              # its persistent workers stop here

    first, second = epochs(5, count=2)
    assert len(first) == len(second) == steps_per_epoch(23, 4, 1) == 5
    images, labels = first[0]
    assert images.dtype == torch.uint8 and images.shape == (4, 3, 16, 16)
    assert images.is_contiguous(memory_format=torch.channels_last)
    assert labels.dtype == torch.int64 and labels.shape == (4, 1)
    # each image the augmentation's: one colour, drawn from all three generators
    flat = images.flatten(2)
    assert torch.equal(flat, flat[:, :, :1].expand_as(flat))
    colours = torch.cat([batch.flatten(2)[:, :, 0] for batch, _ in first])
    assert len({tuple(c) for c in colours.tolist()}) == 23 // 4 * 4

    def same(a, b):
        return all(torch.equal(x[0], y[0]) and torch.equal(x[1], y[1]) for x, y in zip(a, b))
    assert same(epochs(5)[0], first)                    # the same seed, the same batches
    assert not torch.equal(epochs(6)[0][0][0], images)  # another seed, other draws
    assert not torch.equal(second[0][0], images)        # the next epoch, other draws
    assert not same(second, first)
    other_rank = epochs(5, rank=1)[0]                   # another rank, draws of its own
    assert not torch.equal(other_rank[0][0], images)


def test_the_augmentation_runs_on_each_cropped_image(prepared):
    _, data = prepared
    seen = []

    def augment(image):
        seen.append(image.size)
        return image.transpose(Image.Transpose.FLIP_TOP_BOTTOM)
    loader = train_loader(data["raw"].train_path, 16, 4, 0, 5, CPU, 0, 1, augment=augment)
    batches = list(loader)
    # 5 batches of 4: the images of the dropped incomplete batch are never loaded
    assert len(batches) == 5 and seen == [(16, 16)] * 20
    # the same draws without it: the augmented images are the plain ones upside down
    path = data["raw"].train_path
    flipped_first, plain_first = (train_loader(path, 16, 4, 0, 5, CPU, 0, 1, augment=chosen)
                                  for chosen in (augment, None))
    torch.manual_seed(0)
    flipped = next(iter(flipped_first))[0]
    torch.manual_seed(0)
    assert torch.equal(flipped, next(iter(plain_first))[0].flip(2))   # NCHW: H is dim 2


WORKER_PROBE = '''
import gc, json, multiprocessing, sys
import torch
from torch.utils.data import Dataset
from submission.loaders.torchvision_loader import TrainLoader


class Images(Dataset):
    def __len__(self):
        return 64

    def __getitem__(self, index):
        return torch.full((3, 4, 4), index, dtype=torch.uint8), index


def say(**figures):
    print(json.dumps(figures), flush=True)


loader = TrainLoader(Images(), 4, 2, 0, torch.device("cpu"), 0, 1)
batches = iter(loader)
next(batches)
workers = multiprocessing.active_children()
say(workers=[w.pid for w in workers])
sys.stdin.readline()                   # the test has signalled the workers
taken = sum(1 for _ in batches) + sum(1 for _ in loader)
say(alive=all(w.is_alive() for w in workers), batches=taken)
ending = sys.stdin.readline().strip()
if ending == "shutdown":               # the DataLoader's own shutdown, the trainer alive
    del batches, loader
    gc.collect()
    for worker in workers:
        worker.join(timeout=30)
    say(alive_after_shutdown=[w.pid for w in workers if w.is_alive()])
elif ending == "crash":                # an uncaught error keeps the loader alive to the exit
    raise RuntimeError("the trainer crashed")
else:                                  # the test kills this process
    sys.stdin.readline()
'''


@pytest.mark.e2e
@pytest.mark.parametrize("ending", ["shutdown", "crash", "killed"])
def test_workers_leave_stop_signals_to_the_trainer_and_still_end_with_it(tmp_path, ending):
    """SIGTERM and SIGINT from another process (torchrun, SLURM, the terminal) leave the
    persistent workers running and the batches coming; the DataLoader's own shutdown
    ends them, an uncaught error in the trainer still lets it exit (the workers ended by
    multiprocessing's SIGTERM at exit, from their parent), and the trainer's death ends
    them (the DataLoader's watchdog)."""
    import json
    import os
    import signal
    import subprocess
    import sys
    import time

    from conftest import GPUS_HIDDEN, REPO, running

    (tmp_path / "probe.py").write_text(WORKER_PROBE)
    probe = subprocess.Popen([sys.executable, str(tmp_path / "probe.py")], cwd=REPO, text=True,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             env={"PYTHONPATH": str(REPO), "PATH": os.environ["PATH"], **GPUS_HIDDEN})
    try:
        workers = json.loads(probe.stdout.readline())["workers"]
        assert len(workers) == 2
        for pid in workers:
            os.kill(pid, signal.SIGTERM)
            os.kill(pid, signal.SIGINT)
        time.sleep(1)
        probe.stdin.write("go\n")
        probe.stdin.flush()
        served = json.loads(probe.stdout.readline())
        assert served == {"alive": True, "batches": 15 + 16}
        probe.stdin.write(ending + "\n")
        probe.stdin.flush()
        if ending == "shutdown":
            assert json.loads(probe.stdout.readline()) == {"alive_after_shutdown": []}
        elif ending == "crash":
            assert probe.wait(timeout=60) == 1
            assert "the trainer crashed" in probe.stderr.read()
        else:
            probe.kill()
            probe.wait(timeout=30)
        deadline = time.monotonic() + 30
        while any(running(pid) for pid in workers):
            assert time.monotonic() < deadline, f"workers left running after '{ending}'"
            time.sleep(0.2)
    finally:
        if probe.poll() is None:
            probe.kill()
            probe.wait()
