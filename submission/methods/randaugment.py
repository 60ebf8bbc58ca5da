"""RandAugment (Cubuk et al. 2019) on PIL images, as Composer v0.8.0 runs it in the Hot recipe.

Per image, `depth` times: one operation drawn uniformly from the set (np.random.choice,
with replacement), applied at `severity` (composer/algorithms/randaugment/randaugment.py
L65-70). Each operation draws its own magnitude per call, so severity is an upper bound,
not a fixed strength (composer/algorithms/utils/augmentation_primitives.py, cited below as
P:<line>):
  - `_sample_level(s)`: U(0.1, s) (P:L87-89); int / float parameters scale it by maxval / 10;
  - enhancements (color, contrast, brightness, sharpness): a factor from
    `_symmetric_sample(s)`, U(1, s) or U(1 - 0.09 s, 1) with probability 1/2 each
    (P:L92-104); brightness multiplies factors above 1 by 0.75 (P:L298-311);
  - geometric ones flip their sign with probability 1/2 (P:L147-230).
Hot: augmentation_set "all", depth 1, severity 10 (resnet50_spicy.yaml H:30-32).
Randomness comes from numpy's global generator, as in Composer: a DataLoader seeds it in
each worker process from its base seed, so a seeded loader is deterministic.
"""
from __future__ import annotations

from typing import Callable

import numpy as np
from PIL import Image, ImageEnhance, ImageOps

from ..setting_declaration import AT_LEAST_0, RECIPE, Range, setting
from .method import Method

DECLARATIONS = (   # what the harness knows of this method (method.py)
    Method("randaugment_depth", 0, lambda c: f"RandAugment ({c.randaugment_set}, depth "
                                             f"{c.randaugment_depth}, severity {c.randaugment_severity})",
           settings={
               "randaugment_depth": setting(RECIPE, "RandAugment: operations per image; 0: no RandAugment",
                                            type=int, admits=AT_LEAST_0),
               "randaugment_severity": setting(RECIPE, "RandAugment: magnitude, 0-10", type=int,
                                               admits=Range(0, 10)),
               "randaugment_set": setting(RECIPE, "RandAugment: augmentation set (all, safe, original)",
                                          type=str, admits=("all", "safe", "original")),
           },
           # it works on each image in the loader's worker processes, which FFCV's compiled
           # pipeline cannot run
           problem=lambda c: None if c.train_loader == "torchvision" else (
               f"randaugment_depth={c.randaugment_depth} needs train_loader=torchvision: RandAugment "
               "works on each image in the loader's worker processes, which FFCV's compiled "
               "pipeline cannot run")),
)

BILINEAR = Image.Resampling.BILINEAR
AFFINE = Image.Transform.AFFINE


def _level(severity: float) -> float:
    return np.random.uniform(low=0.1, high=severity)


def _int_level(severity: float, maxval: float) -> int:
    return int(_level(severity) * maxval / 10)


def _float_level(severity: float, maxval: float) -> float:
    return float(_level(severity)) * maxval / 10.0


def _signed(value: float) -> float:
    return -value if np.random.uniform() > 0.5 else value


def _factor(severity: float) -> float:
    """An enhancement factor around 1 (1 = unchanged): P:L92-104."""
    if np.random.uniform() > 0.5:
        return np.random.uniform(1, severity)
    return np.random.uniform(1 - 0.09 * severity, 1)


def autocontrast(img, severity):
    return ImageOps.autocontrast(img)


def equalize(img, severity):
    return ImageOps.equalize(img)


def posterize(img, severity):
    return ImageOps.posterize(img, 4 - _int_level(severity, 4))            # keeps 4..1 bits


def rotate(img, severity):
    return img.rotate(_signed(_int_level(severity, 30)), resample=BILINEAR)


def solarize(img, severity):
    return ImageOps.solarize(img, 256 - _int_level(severity, 256))


def shear_x(img, severity):
    return img.transform(img.size, AFFINE, (1, _signed(_float_level(severity, 0.3)), 0, 0, 1, 0),
                         resample=BILINEAR)


def shear_y(img, severity):
    return img.transform(img.size, AFFINE, (1, 0, 0, _signed(_float_level(severity, 0.3)), 1, 0),
                         resample=BILINEAR)


def translate_x(img, severity):
    return img.transform(img.size, AFFINE, (1, 0, _signed(_int_level(severity, img.size[0] / 3)), 0, 1, 0),
                         resample=BILINEAR)


def translate_y(img, severity):
    return img.transform(img.size, AFFINE, (1, 0, 0, 0, 1, _signed(_int_level(severity, img.size[1] / 3))),
                         resample=BILINEAR)


def color(img, severity):
    return ImageEnhance.Color(img).enhance(_factor(severity))


def contrast(img, severity):
    return ImageEnhance.Contrast(img).enhance(_factor(severity))


def brightness(img, severity):
    factor = _factor(severity)
    return ImageEnhance.Brightness(img).enhance(factor * 0.75 if factor > 1 else factor)


def sharpness(img, severity):
    return ImageEnhance.Sharpness(img).enhance(_factor(severity))


def _original(enhancement) -> Callable:
    """The ImageNet-C style enhancement: factor 0.1 + U(0.1, s) x 1.8 / 10 (P:L254-355)."""
    def enhance(img, severity):
        return enhancement(img).enhance(_float_level(severity, 1.8) + 0.1)
    return enhance


GEOMETRIC = [autocontrast, equalize, posterize, rotate, solarize, shear_x, shear_y, translate_x,
             translate_y]
AUGMENTATION_SETS: dict[str, list[Callable]] = {          # P:L359 on
    "all": GEOMETRIC + [color, contrast, brightness, sharpness],
    "safe": GEOMETRIC,
    "original": GEOMETRIC + [_original(e) for e in (ImageEnhance.Color, ImageEnhance.Contrast,
                                                    ImageEnhance.Brightness, ImageEnhance.Sharpness)],
}


def randaugment_image(img: Image.Image, severity: int = 10, depth: int = 1,
                      augmentation_set: str = "all") -> Image.Image:
    """`img` after `depth` operations, each drawn from the set and applied at `severity`."""
    operations = AUGMENTATION_SETS[augmentation_set]
    for _ in range(depth):
        img = operations[np.random.choice(len(operations))](img, severity)
    return img


class RandAugment:
    """The per-image transform (PIL in, PIL out), for a torchvision Compose."""

    def __init__(self, severity: int = 10, depth: int = 1, augmentation_set: str = "all"):
        if not 0 <= severity <= 10:
            raise ValueError(f"RandAugment severity must be in [0, 10], got {severity}")
        if depth < 0:
            raise ValueError(f"RandAugment depth must be >= 0, got {depth}")
        if augmentation_set not in AUGMENTATION_SETS:
            raise ValueError(f"RandAugment augmentation_set must be one of "
                             f"{', '.join(AUGMENTATION_SETS)}, got {augmentation_set!r}")
        self.severity, self.depth, self.augmentation_set = severity, depth, augmentation_set

    def __call__(self, img: Image.Image) -> Image.Image:
        return randaugment_image(img, self.severity, self.depth, self.augmentation_set)

    def __repr__(self) -> str:
        return (f"RandAugment(severity={self.severity}, depth={self.depth}, "
                f"augmentation_set={self.augmentation_set!r})")
