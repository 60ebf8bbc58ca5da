"""submission/data: image folders and Fashion-MNIST -> cached .beton files -> FFCV loaders.

Image data is generated in tmp_path (3 classes, 20-40 px JPEG/PNG, a colour and a stripe
pattern per class, a grey level per image so that every sample can be told apart after a
center crop). Fashion-MNIST comes from the Debian package dataset-fashion-mnist.
FFCV compiles its pipelines with numba on first use and 1.0.2 can hang: the loader tests
carry a timeout, and the prepared folders are shared through module-scoped fixtures.
"""
from __future__ import annotations

import hashlib
import logging
import os
import signal
import threading
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from submission.config import ConfigError, resolve
from submission.data import loaders, sources
from submission.data.prepare import PreparedData, prepare

CPU = torch.device("cpu")
CLASSES = ("cat", "dog", "fox")
COLOURS = ((220, 40, 30), (30, 190, 50), (40, 60, 230), (230, 200, 20))
SIZES = ((32, 28), (20, 24), (40, 32), (28, 40), (36, 20), (24, 36))
EXTENSIONS = (".JPEG", ".png", ".jpg")
FASHION_DIR = Path("/usr/share/datasets/fashion-mnist")
# numba's dispatcher finalizer raises KeyError when FFCV's re-jitted pipeline functions are
# garbage-collected: noise from the libraries, not a failure of this code.
pytestmark = pytest.mark.filterwarnings(
    "ignore:Exception ignored in. <finalize object:pytest.PytestUnraisableExceptionWarning")
needs_fashion = pytest.mark.skipif(not (FASHION_DIR / "train-images-idx3-ubyte.gz").is_file(),
                                   reason="Debian package dataset-fashion-mnist not installed")


# ---------------------------------------------------------------- data generation
def picture(label: int, serial: int, size: tuple[int, int]) -> Image.Image:
    """Class colour + class pattern, and a central block whose grey level is `serial`."""
    w, h = size
    pixels = np.empty((h, w, 3), np.uint8)
    pixels[:] = COLOURS[label % len(COLOURS)]
    if label % 3 == 0:
        pixels[::4] = 255                      # horizontal stripes
    elif label % 3 == 1:
        pixels[:, ::4] = 0                     # vertical stripes
    else:
        pixels[(np.indices((h, w)).sum(0) // 4) % 2 == 1] = 128   # checkerboard
    cy, cx = h // 2, w // 2
    pixels[cy - 5:cy + 5, cx - 5:cx + 5] = (serial * 9) % 256
    return Image.fromarray(pixels)


def write_image(path: Path, label: int, serial: int, size=(32, 28)) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    image = picture(label, serial, size)
    if path.suffix.lower() == ".png":
        image.save(path, "PNG")
    else:
        image.save(path, "JPEG", quality=95)
    return path


def make_nested(root: Path, train_counts=(5, 5, 5), val_counts=(2, 2, 3),
                classes=CLASSES) -> dict[str, list[int]]:
    """root/train/<class>/ and root/val/<class>/; returns the labels of each split."""
    labels: dict[str, list[int]] = {"train": [], "val": []}
    serial = 0
    for split, counts in (("train", train_counts), ("val", val_counts)):
        for label, (name, count) in enumerate(zip(classes, counts)):
            for i in range(count):
                serial += 1
                ext = EXTENSIONS[serial % len(EXTENSIONS)]
                write_image(root / split / name / f"{split}_{name}_{i}{ext}", label, serial,
                            SIZES[serial % len(SIZES)])
                labels[split].append(label)
    return labels


def config(data_dir, cache_dir, **extra):
    overrides = {"dataset": "imagenet", "data_dir": str(data_dir), "cache_dir": str(cache_dir),
                 "write_mode": "raw", "write_max_resolution": "64"}
    overrides.update({key: str(value) for key, value in extra.items()})
    return resolve("cpu", overrides)


def read_val(path: str, num_samples: int, rank=0, world_size=1, resolution=32, resize=36,
             batch_size=4) -> tuple[list[int], list[str]]:
    """Labels and image digests, in loader order, of one validation shard."""
    loader = loaders.val_loader(path, resolution=resolution, resize=resize, batch_size=batch_size,
                                workers=1, device=CPU, rank=rank, world_size=world_size,
                                num_samples=num_samples)
    labels, digests = [], []
    for images, batch_labels in loader:
        assert images.dtype == torch.uint8
        assert tuple(images.shape[1:]) == (3, resolution, resolution)
        batch_labels = batch_labels.reshape(-1)
        assert len(batch_labels) == len(images)
        labels += batch_labels.tolist()
        digests += [hashlib.sha1(image.contiguous().numpy().tobytes()).hexdigest()
                    for image in images]
    return labels, digests


def cache_contents(cache_dir: Path, data_dir: Path) -> list[str]:
    folder = cache_dir / data_dir.resolve().name
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


# ---------------------------------------------------------------- 1. nested folder, loaders
@pytest.fixture(scope="module")
def nested(tmp_path_factory):
    root = tmp_path_factory.mktemp("nested") / "images"
    labels = make_nested(root)
    (root / "train" / "cat" / "notes.txt").write_text("not an image")
    (root / "train" / "dog" / ".DS_Store").write_bytes(b"\0\1\2junk")
    (root / "val" / "fox" / "README").write_text("not an image either")
    cache = tmp_path_factory.mktemp("nested_cache")
    data = prepare(config(root, cache))
    return root, cache, labels, data


def test_nested_folder_prepares_both_splits(nested):
    root, cache, labels, data = nested
    assert isinstance(data, PreparedData)
    assert Path(data.train_path).is_file() and Path(data.val_path).is_file()
    assert data.train_path != data.val_path
    assert Path(data.train_path).name.startswith("train-") and data.train_path.endswith(".beton")
    assert Path(data.val_path).name.startswith("val-") and data.val_path.endswith(".beton")
    assert Path(data.train_path).parent == cache / root.name
    assert (data.num_classes, data.train_samples, data.eval_samples) == (3, 15, 7)
    assert data.skipped_images == 0
    assert not [n for n in cache_contents(cache, root) if ".tmp" in n]


def test_non_image_files_are_ignored_not_counted(nested):
    root, _, labels, data = nested
    train, val = sources.scan_image_folder(root)
    assert [p.name for p in train.ignored] == ["notes.txt"]        # hidden files are skipped
    assert [p.name for p in val.ignored] == ["README"]
    assert [label for _, label in train.samples] == labels["train"]
    assert data.train_samples == len(labels["train"])


@pytest.mark.timeout(120)
def test_train_loader_iterates_an_epoch(nested):
    _, _, labels, data = nested
    loader = loaders.train_loader(data.train_path, resolution=32, batch_size=4, workers=1, seed=0,
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

    normalized = loaders.Normalizer(CPU)(images)
    assert normalized.dtype == torch.float32
    assert normalized.is_contiguous(memory_format=torch.channels_last)
    expected = (images[:, 1].float() - loaders.IMAGENET_MEAN[1]) / loaders.IMAGENET_STD[1]
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
    train = loaders.train_loader(data.train_path, resolution=32, batch_size=4, workers=1, seed=0,
                                 device=CPU, distributed=False)
    val = loaders.val_loader(data.val_path, resolution=32, resize=36, batch_size=4, workers=1,
                             device=CPU, rank=0, world_size=1, num_samples=data.eval_samples)
    for loader in (train, val):
        batches = 0
        for images, labels in loaders.one_epoch(loader):
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
from submission.data import loaders
seen = {"ffcv imported": torch.get_num_threads()}
bench_device(resolve("cpu", {}))       # the run's count: cpu_threads=0, the usable cores
seen["bench"] = torch.get_num_threads() == len(os.sched_getaffinity(0))
torch.set_num_threads(3)
path, val_path, samples = sys.argv[1], sys.argv[2], int(sys.argv[3])
train = loaders.train_loader(path, resolution=32, batch_size=4, workers=1, seed=0, device=torch.device("cpu"),
                             distributed=False)
val = loaders.val_loader(val_path, resolution=32, resize=36, batch_size=4, workers=1,
                         device=torch.device("cpu"), rank=0, world_size=1, num_samples=samples)
seen["built"] = torch.get_num_threads()
for loader in (train, val):
    for _ in loaders.one_epoch(loader):
        pass
seen["epochs"] = torch.get_num_threads()
print(json.dumps(seen))
"""


def test_ffcv_leaves_torch_threads_to_the_run(nested, tmp_path):
    """FFCV sets torch's intra-op threads when it is imported (to 1) and when a Loader is
    built or starts an epoch (to its worker count): the CPU step ran on the loader's
    threads, not the cpu_threads (or cores per process) the run had set. In a fresh
    process: FFCV imported, the bench's device set up (the usable cores), then 3 threads
    set and loaders of 1 worker built and read."""
    import json
    import subprocess
    import sys
    from conftest import GPUS_HIDDEN, REPO
    _, _, _, data = nested
    (tmp_path / "probe.py").write_text(THREADS_PROBE)
    done = subprocess.run([sys.executable, str(tmp_path / "probe.py"), data.train_path, data.val_path,
                           str(data.eval_samples)], cwd=REPO, capture_output=True, text=True,
                          timeout=300, env={"PYTHONPATH": str(REPO), "PATH": "", **GPUS_HIDDEN})
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {
        "ffcv imported": 1, "bench": True, "built": 3, "epochs": 3}


@pytest.mark.timeout(120)
def test_an_epoch_left_early_leaves_no_decoding_thread(nested):
    """A run that reaches its target mid-epoch drops its batches: FFCV's thread would
    block forever on its full queue at the epoch's end (and a process exiting while it
    decodes aborts). loaders.one_epoch finishes it when the loop is left."""
    import threading
    _, _, _, data = nested
    loader = loaders.train_loader(data.train_path, resolution=32, batch_size=2, workers=1, seed=0,
                                  device=CPU, distributed=False)
    assert len(loader) == 7                       # more batches than FFCV's queue holds
    for _ in loaders.one_epoch(loader):
        break
    assert not [t for t in threading.enumerate() if type(t).__name__ == "EpochIterator"]
    abandoned = iter(loader)                      # what a plain loop left early leaves behind
    next(abandoned)
    abandoned.join(timeout=5)
    assert abandoned.is_alive()                   # still there: blocked on its full queue
    loaders.finish(abandoned)
    assert not abandoned.is_alive()


@pytest.mark.timeout(120)
def test_an_epoch_left_while_its_thread_decodes_stops_there(nested):
    """Left at once, with FFCV's thread still filling its queue: it stops at its next
    full-queue timeout, batches before the epoch's end. Freeing queue slots while it
    still had batches to make kept it decoding to the epoch's end, half a second a batch
    (45-113 s on Fashion-MNIST's 937 batches)."""
    import operator
    _, _, _, data = nested
    loader = loaders.train_loader(data.train_path, resolution=32, batch_size=1, workers=1, seed=0,
                                  device=CPU, distributed=False)
    assert len(loader) >= 14
    for trial in range(3):
        left = iter(loader)
        next(left)
        loaders.finish(left)
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
        loader = loaders.val_loader(nested[3].val_path, resolution=32, resize=36,
                                    batch_size=batch_size, workers=1, device=CPU, rank=rank,
                                    world_size=world_size, num_samples=n)
        sizes = [len(labels.reshape(-1)) for _, labels in loader]
        assert list(dict.fromkeys(sizes)) == loaders.eval_batch_sizes(n, batch_size, rank, world_size)
        seen += sizes
    assert 1 in seen


# ---------------------------------------------------------------- 2. caching
def test_cache_reuses_and_rekeys_per_split(tmp_path):
    root = tmp_path / "cached"
    make_nested(root, train_counts=(3, 3, 3), val_counts=(2, 2, 2))
    cache = tmp_path / "cache"
    first = prepare(config(root, cache))
    stamps = {p: os.stat(p).st_mtime_ns for p in (first.train_path, first.val_path)}

    again = prepare(config(root, cache))
    assert (again.train_path, again.val_path) == (first.train_path, first.val_path)
    assert {p: os.stat(p).st_mtime_ns for p in stamps} == stamps     # not rewritten

    # touching an image (same bytes, newer mtime) -> new train file, same val file
    image = next((root / "train" / "dog").iterdir())
    st = image.stat()
    os.utime(image, ns=(st.st_atime_ns, st.st_mtime_ns + 2_000_000_000))
    touched = prepare(config(root, cache))
    assert touched.train_path != first.train_path
    assert touched.val_path == first.val_path
    assert os.stat(first.val_path).st_mtime_ns == stamps[first.val_path]

    # new content in one image -> another train file
    write_image(image, 1, 99, size=(40, 40))
    replaced = prepare(config(root, cache))
    assert replaced.train_path not in (first.train_path, touched.train_path)
    assert replaced.val_path == first.val_path
    assert replaced.train_samples == 9

    # another eval subset -> only the val file changes
    stamp = os.stat(replaced.train_path).st_mtime_ns
    subset = prepare(config(root, cache, eval_limit=4))
    assert subset.train_path == replaced.train_path
    assert os.stat(subset.train_path).st_mtime_ns == stamp
    assert subset.val_path != replaced.val_path
    assert (subset.train_samples, subset.eval_samples) == (9, 4)
    assert not [n for n in cache_contents(cache, root) if ".tmp" in n]


# ---------------------------------------------------------------- 3. flat val + label file
def make_flat(root: Path, classes: list[str], val_labels: list[int]) -> list[Path]:
    make_nested(root, train_counts=(2, 2, 2), val_counts=(), classes=classes)
    (root / "val").mkdir()
    return [write_image(root / "val" / f"ILSVRC2012_val_{i:08d}.JPEG", label, 50 + i,
                        SIZES[i % len(SIZES)])
            for i, label in enumerate(val_labels, start=1)]


FLAT_LABELS = [2, 0, 1, 1, 0, 2, 2]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("style", ["kaggle", "generic"])
def test_flat_val_with_label_file(tmp_path, style):
    root = tmp_path / f"flat_{style}"
    classes = ["n01440764", "n01443537", "n01484850"]
    files = make_flat(root, classes, FLAT_LABELS)
    if style == "kaggle":
        label_file = tmp_path / "LOC_val_solution.csv"
        rows = [f"{f.stem},{classes[label]} 10 10 20 20 {classes[label]} 1 2 3 4"
                for f, label in zip(files, FLAT_LABELS)]
        label_file.write_text("ImageId,PredictionString\n" + "\n".join(reversed(rows)) + "\n")
    else:   # generic, with a blank line, as editors leave them
        label_file = tmp_path / "val_labels.csv"
        label_file.write_text("filename,label\n" + "".join(
            f"{f.name},{classes[label]}\n" for f, label in zip(files, FLAT_LABELS)) + "\n")

    train, val = sources.scan_image_folder(root, str(label_file))
    assert train.classes == classes
    assert [(p.name, label) for p, label in val.samples] == \
        [(f.name, label) for f, label in zip(files, FLAT_LABELS)]

    data = prepare(config(root, tmp_path / "cache", val_labels=label_file))
    assert (data.num_classes, data.train_samples, data.eval_samples) == (3, 6, len(FLAT_LABELS))
    labels, _ = read_val(data.val_path, data.eval_samples)
    assert labels == FLAT_LABELS


# ---------------------------------------------------------------- 4. bad inputs
def error_of(cfg) -> str:
    with pytest.raises(ConfigError) as info:
        prepare(cfg)
    return str(info.value)


def test_missing_data_dir(tmp_path):
    missing = tmp_path / "no_such_folder"
    message = error_of(config(missing, tmp_path / "cache"))
    assert str(missing) in message and "not a directory" in message
    assert "supported layouts" in message
    assert "data_dir" in error_of(config("", tmp_path / "cache"))
    assert not (tmp_path / "cache").exists() or not list((tmp_path / "cache").rglob("*.beton"))


def test_data_dir_without_train_and_val_lists_the_layouts(tmp_path):
    root = tmp_path / "loose"
    write_image(root / "a.JPEG", 0, 1)
    (root / "train").mkdir()
    message = error_of(config(root, tmp_path / "cache"))
    assert "train/ and val/" in message and str(root) in message
    assert "supported layouts" in message
    assert "nested" in message and "val_labels" in message


def test_empty_class_folder_is_named(tmp_path):
    root = tmp_path / "empty_class"
    make_nested(root, train_counts=(2, 2, 2), val_counts=(1, 1, 1))
    (root / "train" / "zebra").mkdir()
    (root / "train" / "zebra" / "notes.txt").write_text("no images here")
    message = error_of(config(root, tmp_path / "cache"))
    assert str(root / "train" / "zebra") in message
    assert "without a single image" in message


def test_flat_val_without_val_labels(tmp_path):
    root = tmp_path / "flat_unlabelled"
    make_flat(root, list(CLASSES), [0, 1, 2])
    message = error_of(config(root, tmp_path / "cache"))
    assert str(root / "val") in message and "val_labels" in message


def test_label_file_naming_an_unknown_class(tmp_path):
    root = tmp_path / "flat_unknown"
    files = make_flat(root, list(CLASSES), [0, 1, 2])
    label_file = tmp_path / "labels.csv"
    label_file.write_text("filename,label\n" + "".join(
        f"{f.name},{name}\n" for f, name in zip(files, ["cat", "wolf", "fox"])))
    message = error_of(config(root, tmp_path / "cache", val_labels=label_file))
    assert "'wolf'" in message and str(label_file) in message
    assert files[1].name in message


def test_devkit_ground_truth_is_refused_with_the_way_out(tmp_path):
    # its ids follow the devkit's meta.mat order, not the class folders: reading it
    # without meta.mat would mislabel almost every image
    root = tmp_path / "flat_devkit"
    make_flat(root, list(CLASSES), [0, 1, 2])
    label_file = tmp_path / "ILSVRC2012_validation_ground_truth.txt"
    label_file.write_text("1\n2\n3\n")
    message = error_of(config(root, tmp_path / "cache", val_labels=label_file))
    assert str(label_file) in message and "image,label" in message and "meta.mat" in message


def test_one_column_label_row_is_named(tmp_path):
    root = tmp_path / "flat_one_column"
    files = make_flat(root, list(CLASSES), [0, 1, 2])
    label_file = tmp_path / "labels.csv"
    label_file.write_text(f"filename,label\n{files[0].name},cat\n{files[1].name}\n")
    message = error_of(config(root, tmp_path / "cache", val_labels=label_file))
    assert "row 2" in message and files[1].name in message


def test_missing_label_file_and_unlabelled_images(tmp_path):
    root = tmp_path / "flat_partial"
    files = make_flat(root, list(CLASSES), [0, 1, 2])
    missing = tmp_path / "nope.csv"
    assert str(missing) in error_of(config(root, tmp_path / "cache", val_labels=missing))
    label_file = tmp_path / "partial.csv"
    label_file.write_text(f"filename,label\n{files[0].name},cat\n")
    message = error_of(config(root, tmp_path / "cache", val_labels=label_file))
    assert "2 images" in message and files[1].name in message


@pytest.fixture(scope="module")
def corrupt(tmp_path_factory):
    root = tmp_path_factory.mktemp("corrupt") / "images"
    make_nested(root, train_counts=(3, 3, 3), val_counts=(1, 1, 1))
    garbage = root / "train" / "dog" / "x.JPEG"
    garbage.write_bytes(np.random.default_rng(0).integers(0, 256, 3000, dtype=np.uint8).tobytes())
    truncated = root / "val" / "fox" / "cut.JPEG"
    whole = write_image(tmp_path_factory.mktemp("whole") / "whole.JPEG", 2, 7, size=(40, 40))
    blob = whole.read_bytes()
    truncated.write_bytes(blob[:len(blob) // 2])
    return root, [garbage, truncated]


def test_corrupt_images_fail_listing_paths_and_leave_nothing(corrupt, tmp_path):
    root, bad = corrupt
    cache = tmp_path / "cache"
    message = error_of(config(root, cache))
    for path in bad:
        assert str(path) in message
    assert "2 unusable images" in message and "skip_bad_images" in message
    left = cache_contents(cache, root)
    assert not [n for n in left if ".beton" in n or ".tmp" in n]
    assert "skipped_images.txt" not in left


def test_skip_bad_images_leaves_them_out_and_lists_them(corrupt, tmp_path):
    root, bad = corrupt
    cache = tmp_path / "cache"
    data = prepare(config(root, cache, skip_bad_images="true"))
    assert (data.train_samples, data.eval_samples, data.skipped_images) == (9, 3, 2)
    assert data.num_classes == 3
    assert Path(data.train_path).is_file() and Path(data.val_path).is_file()
    listing = (cache / root.name / "skipped_images.txt").read_text().splitlines()
    assert sorted(line.split("\t")[0] for line in listing) == sorted(str(p) for p in bad)


# ---------------------------------------------------------------- 5. odd but valid images
def odd_images(folder: Path) -> dict[str, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = {}
    grey = Image.new("L", (24, 30), 77)
    grey.save(paths.setdefault("grey", folder / "grey.JPEG"), "JPEG", quality=95)
    cmyk = Image.new("CMYK", (30, 24), (0, 255, 255, 0))            # pure red
    cmyk.save(paths.setdefault("cmyk", folder / "cmyk.jpg"), "JPEG", quality=95)
    rgba = np.zeros((20, 28, 4), np.uint8)
    rgba[:, :14] = (10, 200, 30, 255)                                 # opaque green left
    rgba[:, 14:] = (0, 0, 0, 0)                                       # transparent black right
    Image.fromarray(rgba, "RGBA").save(paths.setdefault("rgba", folder / "alpha.png"))
    palette = Image.new("P", (26, 22), 1)
    palette.putpalette([0, 0, 0, 200, 100, 50] + [0] * (256 * 3 - 6))
    palette.save(paths.setdefault("palette", folder / "palette.png"))
    with_transparency = Image.new("P", (22, 26), 1)
    with_transparency.putpalette([0, 0, 0, 40, 50, 60] + [0] * (256 * 3 - 6))
    with_transparency.save(paths.setdefault("palette_alpha", folder / "palette_alpha.png"),
                           transparency=1)
    deep = Image.fromarray(np.full((18, 20), 20000, np.uint16))    # 16-bit grey (mode I;16)
    deep.save(paths.setdefault("grey16", folder / "grey16.png"))
    return paths


def test_odd_images_decode_to_rgb(tmp_path):
    paths = odd_images(tmp_path / "odd")
    with Image.open(paths["grey"]) as im:
        assert im.mode == "L"
    with Image.open(paths["cmyk"]) as im:
        assert im.mode == "CMYK"
    with Image.open(paths["palette"]) as im:
        assert im.mode == "P"
    decoded = {name: sources.load_rgb(path) for name, path in paths.items()}
    for name, image in decoded.items():
        assert image.dtype == np.uint8 and image.ndim == 3 and image.shape[2] == 3, name
    assert decoded["grey"].shape == (30, 24, 3)
    assert np.abs(decoded["grey"].astype(int) - 77).max() <= 2
    assert decoded["cmyk"].shape == (24, 30, 3)
    assert np.abs(decoded["cmyk"].astype(int) - (255, 0, 0)).max() <= 8
    assert decoded["rgba"].shape == (20, 28, 3)
    assert (decoded["rgba"][:, :14] == (10, 200, 30)).all()
    assert (decoded["rgba"][:, 14:] == 255).all()                    # transparent -> white
    assert (decoded["palette"] == (200, 100, 50)).all()
    assert (decoded["palette_alpha"] == 255).all()
    assert np.abs(decoded["grey16"].astype(int) - round(20000 / 65535 * 255)).max() <= 1


def test_odd_images_prepare(tmp_path):
    root = tmp_path / "odd_set"
    for split in ("train", "val"):
        for name, path in odd_images(root / split / "misc").items():
            path.rename(root / split / "misc" / f"{split}_{path.name}")
        write_image(root / split / "plain" / "plain.JPEG", 0, 3)
    data = prepare(config(root, tmp_path / "cache"))
    assert (data.num_classes, data.train_samples, data.eval_samples) == (2, 7, 7)
    assert data.skipped_images == 0
    assert Path(data.train_path).is_file() and Path(data.val_path).is_file()


# ---------------------------------------------------------------- 6. Fashion-MNIST
@pytest.fixture(scope="module")
def fashion():
    return sources.load_fashion_mnist("")


@needs_fashion
def test_fashion_mnist_loads_from_the_package(fashion):
    train, val = fashion
    assert (len(train), len(val)) == (60000, 10000)
    assert train.images.shape == (60000, 28, 28, 3) and val.images.shape == (10000, 28, 28, 3)
    assert train.images.dtype == np.uint8
    assert len(train.classes) == 10 and train.classes == val.classes
    assert set(np.unique(train.labels)) == set(range(10)) == set(np.unique(val.labels))
    assert (train.images[..., 0] == train.images[..., 2]).all()      # grey in three channels
    image, label = train[123]
    assert image.shape == (28, 28, 3) and 0 <= label < 10
    assert train.fingerprint() != val.fingerprint()


@needs_fashion
@pytest.mark.timeout(120)
def test_fashion_mnist_subset_keeps_every_class(fashion, tmp_path):
    cfg = resolve("cpu", {"dataset": "fashion-mnist", "data_dir": "", "cache_dir": str(tmp_path / "cache"),
                          "train_limit": "600", "eval_limit": "200", "write_mode": "raw",
                          "write_max_resolution": "28"})
    data = prepare(cfg)
    assert (data.num_classes, data.train_samples, data.eval_samples) == (10, 600, 200)
    assert Path(data.train_path).parent == tmp_path / "cache" / "fashion-mnist"
    for path, source, limit in ((data.train_path, fashion[0], 600), (data.val_path, fashion[1], 200)):
        labels, _ = read_val(path, limit, resolution=28, resize=28, batch_size=100)
        spaced = np.linspace(0, len(source) - 1, limit).round().astype(int)
        assert labels == source.labels[spaced].tolist()              # evenly spaced subset
        assert set(labels) == set(range(10))


def test_fashion_mnist_missing_files_are_named(tmp_path):
    empty = tmp_path / "idx"
    empty.mkdir()
    cfg = resolve("cpu", {"dataset": "fashion-mnist", "data_dir": str(empty),
                          "cache_dir": str(tmp_path / "cache")})
    with pytest.raises(ConfigError) as info:
        prepare(cfg)
    assert str(empty / "train-images-idx3-ubyte") in str(info.value)


# ---------------------------------------------------------------- 6. bad input, named
def test_empty_val_folder_says_it_is_empty(tmp_path):
    make_nested(tmp_path / "d", val_counts=(0, 0, 0))
    (tmp_path / "d" / "val").mkdir()
    assert "val is empty" in error_of(config(tmp_path / "d", tmp_path / "cache"))


def test_loose_images_beside_class_folders_are_refused(tmp_path):
    make_nested(tmp_path / "d")
    write_image(tmp_path / "d" / "val" / "stray.JPEG", 0, 1)
    message = error_of(config(tmp_path / "d", tmp_path / "cache"))
    assert "1 images lie directly in" in message and "stray.JPEG" in message


def test_val_labels_with_class_folders_is_refused(tmp_path):
    make_nested(tmp_path / "d")
    (tmp_path / "labels.csv").write_text("val_cat_0,wolf\n")
    message = error_of(config(tmp_path / "d", tmp_path / "cache", val_labels=tmp_path / "labels.csv"))
    assert "has class folders" in message and "drop val_labels=" in message


def test_label_rows_without_an_image_are_reported(tmp_path, capfd):
    make_nested(tmp_path / "d", val_counts=(0, 0, 0))
    val = tmp_path / "d" / "val"
    write_image(val / "img_1.JPEG", 0, 1)
    write_image(val / "img_2.JPEG", 1, 2)
    (tmp_path / "labels.csv").write_text("image,label\nimg_1,cat\nimg_2,dog\nimg_3,fox\nimg_4,fox\n")
    data = prepare(config(tmp_path / "d", tmp_path / "cache", val_labels=tmp_path / "labels.csv"))
    assert data.eval_samples == 2
    assert "2 rows of" in capfd.readouterr().err


def test_exif_orientation_is_not_applied(tmp_path):
    """As torchvision's ImageFolder and the MLPerf reference: pixels as stored."""
    image = Image.new("RGB", (40, 20), (200, 10, 10))
    exif = Image.Exif()
    exif[0x0112] = 6                        # "rotate 90 degrees clockwise to display"
    image.save(tmp_path / "rotated.jpg", "JPEG", exif=exif)
    assert sources.load_rgb(tmp_path / "rotated.jpg").shape == (20, 40, 3)


def test_verified_images_are_not_decoded_again_and_a_changed_one_is(tmp_path, capfd):
    make_nested(tmp_path / "d")
    cache = tmp_path / "cache"
    prepare(config(tmp_path / "d", cache))
    assert "checking" in capfd.readouterr().err
    prepare(config(tmp_path / "d", cache))
    second = capfd.readouterr().err
    assert "checking" not in second and "15 images of" in second and "not decoded again" in second
    changed = next((tmp_path / "d" / "train" / "cat").iterdir())
    changed.write_bytes(b"not an image any more")
    message = error_of(config(tmp_path / "d", cache))
    assert "1 unusable images" in message and changed.name in message


def test_skipped_listing_does_not_outlive_the_bad_images(tmp_path):
    make_nested(tmp_path / "d")
    bad = tmp_path / "d" / "train" / "cat" / "broken.JPEG"
    bad.write_bytes(b"\xff\xd8 cut")
    cache = tmp_path / "cache"
    prepare(config(tmp_path / "d", cache, skip_bad_images="true"))
    listing = cache / "d" / "skipped_images.txt"
    assert listing.is_file()
    bad.unlink()
    assert prepare(config(tmp_path / "d", cache, skip_bad_images="true")).skipped_images == 0
    assert not listing.exists()


def test_truncated_beton_is_rebuilt_not_loaded(tmp_path, capfd):
    make_nested(tmp_path / "d")
    cache = tmp_path / "cache"
    first = prepare(config(tmp_path / "d", cache))
    whole = Path(first.train_path).read_bytes()
    Path(first.train_path).write_bytes(whole[: len(whole) // 2])
    again = prepare(config(tmp_path / "d", cache))
    assert "damaged, rebuilding it" in capfd.readouterr().err
    assert again.train_path == first.train_path
    assert Path(again.train_path).read_bytes() == whole
    # a file from before sizes were recorded: read by FFCV once, kept when whole, rebuilt when cut
    record = Path(first.train_path + ".size")
    record.unlink()
    prepare(config(tmp_path / "d", cache))
    assert "reusing" in capfd.readouterr().err and record.is_file()
    record.unlink()
    Path(first.train_path).write_bytes(whole[: len(whole) // 2])
    prepare(config(tmp_path / "d", cache))
    assert "damaged, rebuilding it" in capfd.readouterr().err
    assert Path(first.train_path).read_bytes() == whole


@pytest.mark.timeout(180)
def test_odd_names_tiny_images_and_folders_named_like_images(tmp_path):
    """A non-UTF-8 file name and a 1x1-pixel image are images like any other; a folder
    named like an image inside a class folder is not an image (listed as ignored)."""
    root = tmp_path / "d"
    make_nested(root)
    odd_name = os.fsdecode(b"caf\xe9_latin1.JPEG")          # not valid UTF-8
    write_image(root / "train" / "cat" / odd_name, 0, 3)
    Image.new("RGB", (1, 1), (10, 20, 30)).save(root / "train" / "dog" / "pixel.png")
    (root / "train" / "fox" / "nested.JPEG").mkdir()
    data = prepare(config(root, tmp_path / "cache"))
    assert data.train_samples == 17
    loader = loaders.train_loader(data.train_path, resolution=32, batch_size=17, workers=1,
                                  seed=0, device=CPU, distributed=False)
    (images, labels), = list(loader)
    assert tuple(images.shape) == (17, 3, 32, 32)


def test_images_too_small_for_the_pipeline_are_refused_then_skippable(tmp_path):
    """A 1x1 validation image (its center crop is 0 px) and a 200x1 training image (0 px
    high once stored at write_max_resolution=64) would abort the process inside OpenCV:
    they are named with their sizes, and skip_bad_images=true leaves them out."""
    root = tmp_path / "d"
    make_nested(root)
    Image.new("RGB", (1, 1), (10, 20, 30)).save(root / "val" / "cat" / "pixel.png")
    Image.new("RGB", (200, 1), (10, 20, 30)).save(root / "train" / "dog" / "line.png")
    cfg = config(root, tmp_path / "cache")
    assert cfg.eval_resolution < cfg.eval_resize          # a crop ratio below 1
    message = error_of(cfg)
    assert "2 unusable images" in message
    assert "pixel.png: 1x1 px: the evaluation center crop" in message
    assert "line.png: 200x1 px: stored with its long side at write_max_resolution=64" in message

    data = prepare(config(root, tmp_path / "cache", skip_bad_images="true"))
    assert (data.train_samples, data.eval_samples, data.skipped_images) == (15, 7, 2)
    labels, _ = read_val(data.val_path, data.eval_samples, resolution=cfg.eval_resolution,
                         resize=cfg.eval_resize)
    assert len(labels) == 7


# ---------------------------------------------------------------- 7. traps of real folders
def zero_fill_keeping_size_and_mtime(path: Path) -> None:
    stat = path.stat()
    path.write_bytes(bytes(stat.st_size))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))


@pytest.mark.timeout(120)
def test_an_image_changed_after_its_check_fails_the_write_instead_of_hanging(tmp_path):
    """The check remembers verdicts by size and mtime: an image broken while keeping both
    reaches FFCV's writer, whose worker used to die on it and leave the writer waiting."""
    root, cache = tmp_path / "d", tmp_path / "cache"
    make_nested(root)
    prepare(config(root, cache))
    victim = sorted((root / "train" / "dog").glob("*.JPEG"))[0]
    zero_fill_keeping_size_and_mtime(victim)
    message = error_of(config(root, cache, write_jpeg_quality=80))
    assert "1 images could not be decoded while writing" in message
    assert str(victim) in message and "UnidentifiedImageError" in message
    assert "skip_bad_images=true" in message
    assert not [n for n in cache_contents(cache, root) if ".tmp" in n]
    # its verdict was forgotten: checked again, so skip_bad_images=true leaves it out
    data = prepare(config(root, cache, write_jpeg_quality=80, skip_bad_images="true"))
    assert (data.train_samples, data.skipped_images) == (14, 1)


def converted_once_then_rewritten_with(tmp_path, monkeypatch, at_the_third_image):
    """A folder converted once; then the configuration of a second conversion (a new write
    setting: a new .beton) whose writer processes, forked from this one, run
    `at_the_third_image()` when they reach image 2."""
    root, cache = tmp_path / "d", tmp_path / "cache"
    make_nested(root)
    prepare(config(root, cache))
    real_item = sources.FolderSplit.__getitem__

    def item(split, index):
        if index == 2:
            at_the_third_image()
        return real_item(split, index)

    monkeypatch.setattr(sources.FolderSplit, "__getitem__", item)
    return root, cache, config(root, cache, write_jpeg_quality=80)


@pytest.mark.timeout(120)
def test_a_writer_process_that_dies_ends_the_conversion_instead_of_hanging(tmp_path, monkeypatch):
    root, cache, rewrite = converted_once_then_rewritten_with(
        tmp_path, monkeypatch, lambda: os.kill(os.getpid(), signal.SIGKILL))  # as the OOM killer
    message = error_of(rewrite)
    assert "an FFCV writer process died while writing" in message
    assert "was killed by SIGKILL" in message and "out-of-memory killer" in message
    assert not [n for n in cache_contents(cache, root) if ".tmp" in n]
    monkeypatch.undo()
    assert prepare(rewrite).train_samples == 15


@pytest.mark.timeout(120)
def test_ctrl_c_while_writing_stops_the_conversion_and_its_workers(tmp_path, monkeypatch):
    import psutil

    def ctrl_c_then_a_long_image():
        os.kill(os.getppid(), signal.SIGINT)      # the writer's parent: this test
        time.sleep(60)                            # a worker busy on a large image

    root, cache, rewrite = converted_once_then_rewritten_with(tmp_path, monkeypatch,
                                                              ctrl_c_then_a_long_image)
    before = {child.pid for child in psutil.Process().children()}
    with pytest.raises(KeyboardInterrupt):
        prepare(rewrite)
    workers = [child for child in psutil.Process().children() if child.pid not in before]
    _, still_running = psutil.wait_procs(workers, timeout=10)   # killed, not left running
    assert workers and not still_running
    assert not [n for n in cache_contents(cache, root) if ".tmp" in n]
    # an interrupt raised in logging's at-fork callback would have left its lock held:
    # the next log call of any thread, anywhere in this process, would wait forever
    taken = []

    def take_and_give_back() -> None:
        taken.append(logging._lock.acquire(timeout=5))
        if taken[-1]:
            logging._lock.release()

    other = threading.Thread(target=take_and_give_back)
    other.start()
    other.join()
    assert taken == [True]


def test_dangling_links_are_refused(tmp_path):
    root = tmp_path / "d"
    make_nested(root)
    (root / "train" / "wolf").symlink_to(tmp_path / "unmounted" / "wolf")
    (root / "train" / "cat" / "x.JPEG").symlink_to("/nonexistent/x.JPEG")
    message = error_of(config(root, tmp_path / "cache"))
    assert "2 symbolic links" in message and "point to nothing" in message
    assert str(root / "train" / "wolf") in message
    assert str(root / "train" / "cat" / "x.JPEG") in message
    assert "/nonexistent/x.JPEG" in message and "remove the links" in message


def test_label_file_giving_one_image_two_labels_is_refused(tmp_path):
    root = tmp_path / "flat"
    files = make_flat(root, list(CLASSES), [0, 1, 2])
    rows = "".join(f"{f.name},{CLASSES[label]}\n" for f, label in zip(files, [0, 1, 2]))
    same_twice = tmp_path / "same.csv"
    same_twice.write_text(f"filename,label\n{rows}{files[1].name},dog\n")
    _, val = sources.scan_image_folder(root, str(same_twice))
    assert [label for _, label in val.samples] == [0, 1, 2]
    conflicting = tmp_path / "conflicting.csv"
    conflicting.write_text(f"filename,label\n{rows}{files[1].stem},fox\n")
    message = error_of(config(root, tmp_path / "cache", val_labels=conflicting))
    assert f"image {files[1].stem!r} is listed twice" in message
    assert "'dog'" in message and "'fox'" in message and str(conflicting) in message


def test_label_file_encodings_and_unknown_headers(tmp_path):
    root = tmp_path / "flat"
    files = make_flat(root, list(CLASSES), [0, 1, 2])
    rows = "".join(f"{f.stem},{CLASSES[label]}\n" for f, label in zip(files, [0, 1, 2]))
    excel = tmp_path / "excel.csv"
    excel.write_text("ImageId,PredictionString\n" + rows, encoding="utf-8-sig")
    _, val = sources.scan_image_folder(root, str(excel))
    assert [label for _, label in val.samples] == [0, 1, 2]

    latin1 = tmp_path / "latin1.csv"
    latin1.write_bytes(("ImageId,PredictionString\n" + rows + "caf\xe9,cat\n").encode("latin-1"))
    message = error_of(config(root, tmp_path / "cache", val_labels=latin1))
    assert str(latin1) in message and "not UTF-8" in message and "save it as UTF-8" in message

    odd_header = tmp_path / "odd_header.csv"
    odd_header.write_text("image_id,label\n" + rows)
    message = error_of(config(root, tmp_path / "cache", val_labels=odd_header))
    assert "looks like a header" in message and "not recognised" in message
    assert "ImageId, image, filename" in message and "is not a class folder" not in message


@pytest.mark.parametrize("off_by_one", ["images_in_a_subfolder", "data_dir_one_level_up"])
def test_class_folders_with_images_one_level_down_say_so(tmp_path, off_by_one):
    root = tmp_path / "d"
    if off_by_one == "images_in_a_subfolder":
        make_nested(root)
        write_image(root / "train" / "wolf" / "imgs" / "w.JPEG", 0, 1)
        deeper = root / "train" / "wolf" / "imgs"
    else:
        make_nested(root / "train")                     # d/train/train/<class>/...
        make_nested(root, train_counts=(), val_counts=(1, 1, 1))
        deeper = root / "train" / "train" / "cat"
    message = error_of(config(root, tmp_path / "cache"))
    assert "without a single image" in message
    assert f"{deeper} holds images" in message and "one level off" in message


def test_val_holding_only_an_archive_says_extract_it(tmp_path):
    import tarfile
    root = tmp_path / "d"
    make_nested(root, val_counts=())
    (root / "val").mkdir()
    image = write_image(tmp_path / "ILSVRC2012_val_00000001.JPEG", 0, 1)
    with tarfile.open(root / "val" / "ILSVRC2012_img_val.tar", "w") as archive:
        archive.add(image, arcname=image.name)
    message = error_of(config(root, tmp_path / "cache"))
    assert "holds no images" in message and "ILSVRC2012_img_val.tar" in message
    assert "extract it" in message and "without class folders" not in message


def test_train_holding_only_class_archives_says_extract_them(tmp_path):
    import tarfile
    root = tmp_path / "d"
    make_nested(root, train_counts=())
    (root / "train").mkdir(exist_ok=True)
    image = write_image(tmp_path / "n01_1.JPEG", 0, 1)
    with tarfile.open(root / "train" / "n01.tar", "w") as archive:
        archive.add(image, arcname=image.name)
    message = error_of(config(root, tmp_path / "cache"))
    assert "train has no class folders, only the archive n01.tar: extract it" in message


def test_an_archive_beside_class_folders_is_named_as_not_read(tmp_path, capfd):
    root = tmp_path / "d"
    make_nested(root)
    (root / "train" / "n03.tar").write_bytes(b"\0" * 1024)
    data = prepare(config(root, tmp_path / "cache"))
    assert data.train_samples == 15
    err = capfd.readouterr().err
    assert "ignoring 1 entries" in err and "n03.tar" in err and "archives" in err
    assert "extract them" in err


def test_jfif_and_gif_images_are_read(tmp_path):
    root = tmp_path / "d"
    make_nested(root)
    picture(1, 5, (30, 26)).save(root / "train" / "dog" / "photo.jfif", "JPEG", quality=95)
    frames = [Image.new("RGB", (28, 22), colour) for colour in ((250, 0, 0), (0, 0, 250))]
    gif = root / "train" / "fox" / "anim.gif"
    frames[0].save(gif, save_all=True, append_images=frames[1:])
    first = sources.load_rgb(gif)
    assert first.shape == (22, 28, 3) and np.abs(first.astype(int) - (250, 0, 0)).max() <= 8
    data = prepare(config(root, tmp_path / "cache"))
    assert (data.train_samples, data.skipped_images) == (17, 0)


def test_images_over_pils_decompression_bomb_limit_are_read(tmp_path, monkeypatch):
    """A limit lowered to 10,000 pixels stands for PIL's ~179 M (an image that large takes
    seconds to decode): over twice the limit PIL refuses the image, over it PIL warns."""
    import warnings
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 10_000)
    root = tmp_path / "d"
    make_nested(root)
    huge = root / "train" / "cat" / "huge.png"
    Image.new("RGB", (300, 200), (30, 60, 90)).save(huge)            # 60,000 pixels
    with pytest.raises(Image.DecompressionBombError):
        Image.open(huge)
    data = prepare(config(root, tmp_path / "cache"))
    assert (data.train_samples, data.skipped_images) == (16, 0)
    Image.new("RGB", (120, 100), (30, 60, 90)).save(tmp_path / "large.png")   # 12,000
    with warnings.catch_warnings():
        warnings.simplefilter("error", Image.DecompressionBombWarning)
        assert sources.load_rgb(tmp_path / "large.png").shape == (100, 120, 3)
    assert Image.MAX_IMAGE_PIXELS == 10_000                           # restored after decoding


def test_an_image_folder_given_to_the_fashion_mnist_campaign_says_what_to_pass(tmp_path):
    make_nested(tmp_path / "d", train_counts=(1, 1, 1), val_counts=(1, 1, 1))
    cfg = resolve("cpu", {"data_dir": str(tmp_path / "d"), "cache_dir": str(tmp_path / "cache")})
    assert cfg.dataset == "fashion-mnist"
    message = error_of(cfg)
    assert "is an image folder" in message and "embedded Fashion-MNIST campaign" in message
    assert "dataset=imagenet" in message and f"system=local data_dir={tmp_path / 'd'}" in message


def test_temp_files_of_dead_conversions_are_removed(tmp_path, capfd):
    import socket
    import subprocess
    root, cache = tmp_path / "d", tmp_path / "cache"
    make_nested(root)
    finished = subprocess.Popen(["true"])
    finished.wait()
    folder = cache / root.name
    folder.mkdir(parents=True)
    dead = folder / f"train-0123456789abcdef.beton.tmp-{finished.pid}"
    dead_here = folder / f"val-0123456789abcdef.beton.tmp-{finished.pid}@{socket.gethostname()}"
    live = folder / f"train-fedcba9876543210.beton.tmp-{os.getpid()}"
    other_host = folder / f"train-0123456789abcdef.beton.tmp-{finished.pid}@another-node"
    for path in (dead, dead_here, live, other_host):
        path.write_bytes(b"\0" * 2_000_000)
    prepare(config(root, cache))
    assert not dead.exists() and not dead_here.exists()
    assert live.exists() and other_host.exists()
    err = capfd.readouterr().err
    assert f"removed {dead} (2.0 MB), left by process {finished.pid}" in err
