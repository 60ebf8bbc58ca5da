"""Small data sets for the tests of submission/data and submission/loaders (tests/data/,
tests/loaders/), made in tmp_path.

Image data: 3 classes, 20-40 px JPEG/PNG, a colour and a stripe pattern per class, a grey
level per image so that every sample can be told apart after a center crop. Fashion-MNIST
comes from the Debian package dataset-fashion-mnist. FFCV compiles its pipelines with
numba on first use and 1.0.2 can hang: the loader tests carry a timeout, and the prepared
folders are shared through module-scoped fixtures (import them into the test module).
"""
from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from submission.config import ConfigError, resolve
from submission.data import sources
from submission.data.prepare import prepare
from submission.loaders import ffcv_loaders

from conftest import set_up_needed

CPU = torch.device("cpu")
CLASSES = ("cat", "dog", "fox")
COLOURS = ((220, 40, 30), (30, 190, 50), (40, 60, 230), (230, 200, 20))
SIZES = ((32, 28), (20, 24), (40, 32), (28, 40), (36, 20), (24, 36))
EXTENSIONS = (".JPEG", ".png", ".jpg")
FASHION_DIR = Path("/usr/share/datasets/fashion-mnist")
# numba's dispatcher finalizer raises KeyError when FFCV's re-jitted pipeline functions are
# garbage-collected: noise from the libraries, not a failure of this code.
FFCV_FINALIZER_NOISE = pytest.mark.filterwarnings(
    "ignore:Exception ignored in. <finalize object:pytest.PytestUnraisableExceptionWarning")
# scripts/bootstrap.sh installs it: in CI, a test without it fails (conftest.cannot_set_up)
needs_fashion = set_up_needed((FASHION_DIR / "train-images-idx3-ubyte.gz").is_file(),
                              "Debian package dataset-fashion-mnist not installed (scripts/bootstrap.sh installs it)")


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
    loader = ffcv_loaders.val_loader(path, resolution=resolution, resize=resize, batch_size=batch_size,
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


def error_of(cfg) -> str:
    with pytest.raises(ConfigError) as info:
        prepare(cfg)
    return str(info.value)


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


@pytest.fixture(scope="module")
def fashion():
    return sources.load_fashion_mnist("")
