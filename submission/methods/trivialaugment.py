"""TrivialAugment (Müller and Hutter, "TrivialAugment: Tuning-free Yet State-of-the-Art Data
Augmentation", ICCV 2021, arXiv:2103.10158) on PIL images: per image, one operation drawn
uniformly from a set, applied at a magnitude drawn uniformly over that operation's range; no
depth, no severity. `trivialaugment=` names the set and its ranges:

  wide      torchvision's TrivialAugmentWide (torchvision 0.29.1 transforms/autoaugment.py,
            cited as TV:<line>), the paper's TA-wide: 14 operations, identity among them
            (TV:L406-423); one of 31 magnitude bins drawn uniformly (TV:L441-448), negated with
            probability 1/2 where the operation is signed (TV:L449-450); applied as TV's
            `_apply_op` (TV:L13-90) applies it to a PIL image: torchvision.transforms.functional,
            NEAREST interpolation and black fill (the defaults, TV:L395-400).
  composer  randaugment.py's operations (set "all": 13, no identity) with Composer's draws at
            severity 10, its largest: each level U(0.1, 10) over the operation's whole range.
            Draw for draw this is RandAugment at depth 1 and severity 10, what Hot runs: the same
            images from the same generator, at the same cost.
  none      off.

The ranges differ (wide / Composer at severity 10): shear 0-0.99 / 0-0.3, rotation 0-135 /
0-29 degrees, translation 0-32 px whatever the side / up to a third of the side, enhancement
factors 0.01-1.99 / 0.1-10, posterize 2-8 / 1-4 bits, solarize thresholds 0-255 / 1-254;
geometric operations resample NEAREST / BILINEAR (docs/cpu-augment.md).

Randomness comes from numpy's global generator, as RandAugment's (the DataLoader seeds it in
each worker), not from torch's as TV's does. The device loader's batched version is
trivialaugment_batch.py: the same draws, per image, tested against these.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import get_args

import numpy as np
import torch
from PIL import Image
from torchvision.transforms import InterpolationMode
from torchvision.transforms import functional as F

from .declarations.trivialaugment import TrivialAugmentSpace
from .randaugment import AUGMENTATION_SETS, Operation, Random, Values, _signed, randaugment_image

SPACES = tuple(space for space in get_args(TrivialAugmentSpace) if space != "none")   # wide, composer
BINS = 31                       # TV:L397 num_magnitude_bins
COMPOSER_SEVERITY = 10          # randaugment.py's largest: levels over each operation's whole range
NEAREST = InterpolationMode.NEAREST


def _magnitudes(low: float, high: float) -> np.ndarray:
    """TV's bins, torch.linspace in float32 (TV:L410-420), as float64 numbers."""
    return np.array(torch.linspace(low, high, BINS).tolist())


def _bin(magnitudes: np.ndarray, random: Random, size: int | None = None) -> Values:
    return magnitudes[random.choice(BINS, size)]


def _signed_bin(magnitudes: np.ndarray) -> Callable[[float, Random, int | None], Values]:
    def signed(_severity: float, random: Random, size: int | None = None) -> Values:
        return _signed(_bin(magnitudes, random, size), random, size)
    return signed


def _factor_bin(magnitudes: np.ndarray) -> Callable[[float, Random, int | None], Values]:
    """1 + a signed magnitude: the enhancement factor TV applies (TV:L68-75)."""
    def factor(_severity: float, random: Random, size: int | None = None) -> Values:
        return 1.0 + _signed(_bin(magnitudes, random, size), random, size)
    return factor


def _shear(img: Image.Image, degrees_x: float, degrees_y: float) -> Image.Image:
    return F.affine(img, angle=0.0, translate=[0, 0], scale=1.0, shear=[degrees_x, degrees_y],
                    interpolation=NEAREST, fill=None, center=[0, 0])          # TV:L16-45


def _translate(img: Image.Image, x: int, y: int) -> Image.Image:
    return F.affine(img, angle=0.0, translate=[x, y], scale=1.0, interpolation=NEAREST,
                    shear=[0.0, 0.0], fill=None)                              # TV:L46-65

SHEAR = ENHANCE = _magnitudes(0.0, 0.99)
TRANSLATE = _magnitudes(0.0, 32.0)
ROTATE = _magnitudes(0.0, 135.0)
# 8 - round(bin / 5): 8 bits down to 2, rounded half to even as torch rounds (TV:L419)
POSTERIZE = (8 - torch.round(torch.arange(BINS) / ((BINS - 1) / 6)).int()).numpy().astype(np.float64)
SOLARIZE = _magnitudes(255.0, 0.0)


def _pixels(severity: float, random: Random, size: int | None = None) -> Values:
    """TV translates by int(magnitude) px, the sign applied first (TV:L50): truncated towards 0."""
    return np.trunc(_signed_bin(TRANSLATE)(severity, random, size))


# The wide set in TV's order (TV:L408-422); each value is what the PIL application takes: a
# shear factor, whole pixels, degrees, an enhancement factor, bits, a threshold
WIDE = [
    Operation("identity", None, lambda img, _: img),
    Operation("shear_x_nearest", _signed_bin(SHEAR),
              lambda img, m: _shear(img, math.degrees(math.atan(m)), 0.0)),
    Operation("shear_y_nearest", _signed_bin(SHEAR),
              lambda img, m: _shear(img, 0.0, math.degrees(math.atan(m)))),
    Operation("translate_x_pixels", _pixels, lambda img, pixels: _translate(img, int(pixels), 0)),
    Operation("translate_y_pixels", _pixels, lambda img, pixels: _translate(img, 0, int(pixels))),
    Operation("rotate_nearest", _signed_bin(ROTATE),
              lambda img, degrees: F.rotate(img, float(degrees), interpolation=NEAREST, fill=None)),
    Operation("brightness", _factor_bin(ENHANCE), lambda img, f: F.adjust_brightness(img, float(f))),
    Operation("color", _factor_bin(ENHANCE), lambda img, f: F.adjust_saturation(img, float(f))),
    Operation("contrast", _factor_bin(ENHANCE), lambda img, f: F.adjust_contrast(img, float(f))),
    Operation("sharpness", _factor_bin(ENHANCE), lambda img, f: F.adjust_sharpness(img, float(f))),
    Operation("posterize", lambda _s, r, n=None: _bin(POSTERIZE, r, n),
              lambda img, bits: F.posterize(img, int(bits))),
    Operation("solarize", lambda _s, r, n=None: _bin(SOLARIZE, r, n),
              lambda img, threshold: F.solarize(img, float(threshold))),
    Operation("autocontrast", None, lambda img, _: F.autocontrast(img)),
    Operation("equalize", None, lambda img, _: F.equalize(img)),
]
OPERATIONS = {"wide": WIDE, "composer": AUGMENTATION_SETS["all"]}


def trivialaugment_image(img: Image.Image, space: str = "wide") -> Image.Image:
    """`img` after one operation drawn from the space's set, at a magnitude drawn over its range."""
    if space == "composer":
        return randaugment_image(img, COMPOSER_SEVERITY, 1, "all")
    return WIDE[np.random.choice(len(WIDE))](img, COMPOSER_SEVERITY)


class TrivialAugment:
    """The per-image transform (PIL in, PIL out), for a torchvision Compose."""

    def __init__(self, space: str = "wide"):
        if space not in SPACES:
            raise ValueError(f"TrivialAugment space must be one of {', '.join(SPACES)}, got {space!r}")
        self.space = space

    def __call__(self, img: Image.Image) -> Image.Image:
        return trivialaugment_image(img, self.space)

    def __repr__(self) -> str:
        return f"TrivialAugment(space={self.space!r})"
