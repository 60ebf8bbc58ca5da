"""A synthetic ImageNet-format folder: learnable JPEGs of ImageNet-like sizes, made here.

    train/<wnid>/*.JPEG and val/<wnid>/*.JPEG

Class k has its own background hue, stripe angle and frequency, and a filled shape (disc,
square or triangle) in its own colour; size (`sides` px a side), position, brightness and
noise vary per image, drawn from a generator seeded by (class, image, split), so the same
call writes the same bytes. It is what `qualify` profiles a machine on when no data_dir is
given: the pipeline (decode, crop, convert) does the work it does on ImageNet, and a few
epochs separate the classes.
"""
from __future__ import annotations

import colorsys
import os
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:       # for the annotations only: PIL is imported where pictures are made
    from PIL import Image

SPLITS = ("train", "val")
JPEG_QUALITY = 90        # ImageNet's own JPEGs are mostly quality 90-96


@dataclass(frozen=True)
class FolderShape:
    """How many images of which size the folder holds."""
    classes: int
    train_per_class: int
    val_per_class: int
    sides: tuple[int, int] = (256, 400)     # ImageNet's median image is about 400x350 px

    def count(self, split: str) -> int:
        return self.classes * (self.train_per_class if split == "train" else self.val_per_class)

    def describe(self) -> str:
        return (f"{self.classes} classes x ({self.train_per_class} train + {self.val_per_class} val) "
                f"synthetic JPEGs, {self.sides[0]}-{self.sides[1]} px a side")


def _colour(hue: float, saturation: float, value: float) -> tuple[int, int, int]:
    r, g, b = colorsys.hsv_to_rgb(hue % 1.0, saturation, value)
    return int(255 * r), int(255 * g), int(255 * b)


def class_folder(label: int) -> str:
    return f"n{label + 1:08d}"       # shaped like a WordNet id, as ImageNet's folders are


def picture(label: int, index: int, split: str, shape: FolderShape) -> Image.Image:
    """One image of class `label` (a PIL image)."""
    from PIL import Image, ImageDraw

    rng = np.random.default_rng([label, index, SPLITS.index(split)])
    low, high = shape.sides
    width, height = (int(rng.integers(low, high + 1)) for _ in range(2))
    rows, cols = np.mgrid[0:height, 0:width].astype(np.float32)
    angle = np.pi * label / shape.classes
    period = 12 + 4 * (label % 4)
    stripes = np.sin((cols * np.cos(angle) + rows * np.sin(angle)) * 2 * np.pi / period
                     + rng.uniform(0, 2 * np.pi))
    background = np.array(_colour(label / shape.classes, 0.6, 0.8), np.float32)
    pixels = background * (0.75 + 0.25 * stripes[..., None]) * rng.uniform(0.8, 1.2)
    pixels += rng.normal(0, 18, pixels.shape)
    image = Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8))
    draw, fill = ImageDraw.Draw(image), _colour(0.5 + label / shape.classes, 0.9, 1.0)
    for _ in range(3):
        r = int(rng.integers(min(width, height) // 9, min(width, height) // 4))
        x, y = int(rng.integers(r, width - r)), int(rng.integers(r, height - r))
        if label % 3 == 0:
            draw.ellipse([x - r, y - r, x + r, y + r], fill=fill)
        elif label % 3 == 1:
            draw.rectangle([x - r, y - r, x + r, y + r], fill=fill)
        else:
            draw.polygon([(x, y - r), (x - r, y + r), (x + r, y + r)], fill=fill)
    return image


def _write_one(job: tuple[str, str, int, int, FolderShape]) -> None:
    root, split, label, index, shape = job
    path = Path(root) / split / class_folder(label) / f"{split}_{label}_{index:05d}.JPEG"
    picture(label, index, split, shape).save(path, "JPEG", quality=JPEG_QUALITY)


def write_folder(root: Path, shape: FolderShape, processes: int | None = None) -> Path:
    """Write the folder under `root` (made if needed); images already there are rewritten.
    Returns `root`."""
    root = Path(root)
    jobs = []
    for split in SPLITS:
        per_class = shape.train_per_class if split == "train" else shape.val_per_class
        for label in range(shape.classes):
            (root / split / class_folder(label)).mkdir(parents=True, exist_ok=True)
            jobs += [(str(root), split, label, index, shape) for index in range(per_class)]
    processes = max(1, min(processes or os.cpu_count() or 1, len(jobs) // 16 or 1))
    if processes == 1:
        for job in jobs:
            _write_one(job)
    else:
        with ProcessPoolExecutor(processes) as pool:
            list(pool.map(_write_one, jobs, chunksize=16))
    return root
