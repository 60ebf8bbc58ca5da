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
each worker process from its base seed, so a seeded loader is deterministic. Each operation
is its value's draw and its PIL application at that value (`Operation`): the device loader's
batched version (randaugment_batch.py) draws the same values and is tested against these.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import numpy.typing as npt
from PIL import Image, ImageEnhance, ImageOps

from .declarations.randaugment import RandAugmentSet

BILINEAR = Image.Resampling.BILINEAR
AFFINE = Image.Transform.AFFINE


# ---- the draws (Composer's, P:L87-104): from `random`, numpy's global generator (one value,
# size None) or a numpy Generator (`size` values at once, the device version's batches) ----
Values = float | np.ndarray      # a draw: one value (size None) or `size` values


class Random(Protocol):
    """Where draws come from: numpy's global generator (the np.random module) or a Generator."""
    def uniform(self, low: float = ..., high: float = ..., size: int | None = ...) -> Values: ...

    def choice(self, a: int, size: int | None = ...) -> int | npt.NDArray[np.int64]: ...


def _level(severity: float, random: Random, size: int | None = None) -> Values:
    return random.uniform(0.1, severity, size)


def _int_level(severity: float, maxval: float, random: Random, size: int | None = None) -> Values:
    return np.trunc(_level(severity, random, size) * maxval / 10).astype(np.int64)


def _float_level(severity: float, maxval: float, random: Random, size: int | None = None) -> Values:
    return _level(severity, random, size) * maxval / 10.0


def _signed(value: Values, random: Random, size: int | None = None) -> Values:
    return np.where(random.uniform(0.0, 1.0, size) > 0.5, -value, value)


def _factor(severity: float, random: Random = np.random, size: int | None = None) -> Values:
    """An enhancement factor around 1 (1 = unchanged): U(1, s) or U(1 - 0.09 s, 1), each with
    probability 1/2 (P:L92-104)."""
    if size is None:        # Composer's draws, one by one
        if random.uniform() > 0.5:
            return random.uniform(1, severity)
        return random.uniform(1 - 0.09 * severity, 1)
    above, within = random.uniform(0.0, 1.0, size) > 0.5, random.uniform(0.0, 1.0, size)
    return np.where(above, 1 + within * (severity - 1), 1 - 0.09 * severity * (1 - within))


def _brightness_factor(severity: float, random: Random, size: int | None = None) -> Values:
    factor = _factor(severity, random, size)
    return np.where(factor > 1, factor * 0.75, factor)            # P:L298-311


def _original_factor(severity: float, random: Random, size: int | None = None) -> Values:
    """The ImageNet-C style enhancement: 0.1 + U(0.1, s) x 1.8 / 10 (P:L254-355)."""
    return _float_level(severity, 1.8, random, size) + 0.1


def _translation(severity: float, random: Random, size: int | None = None) -> Values:
    """A signed level: the pixels are int(level x side / 3 / 10), from the image's side."""
    return _signed(_level(severity, random, size), random, size)


def translation_pixels(level: Values, side: int) -> Values:
    """Composer's translate: int(U(0.1, s) x (side / 3) / 10), with the level's sign."""
    return np.sign(level) * np.trunc(np.abs(level) * (side / 3) / 10)


@dataclass(frozen=True)
class Operation:
    """One operation: `kind` (what it does, as the device version names it), the value it
    applies drawn from the severity as Composer draws it, and that value applied to a PIL
    image (the reference). Called as Composer calls its operations: op(image, severity)."""
    kind: str
    draw: Callable | None   # (severity, random, size) -> value(s); None: no value
    apply: Callable         # (PIL image, value) -> PIL image

    def __call__(self, img: Image.Image, severity: float) -> Image.Image:
        return self.apply(img, self.draw(severity, np.random) if self.draw is not None else None)


def _affine(img: Image.Image, matrix: tuple[Values, ...]) -> Image.Image:
    return img.transform(img.size, AFFINE, tuple(float(v) for v in matrix), resample=BILINEAR)


def _enhance(enhancement: Callable[[Image.Image], ImageEnhance._Enhance]) -> Callable:
    return lambda img, factor: enhancement(img).enhance(float(factor))


autocontrast = Operation("autocontrast", None, lambda img, _: ImageOps.autocontrast(img))
equalize = Operation("equalize", None, lambda img, _: ImageOps.equalize(img))
posterize = Operation("posterize", lambda s, r, n=None: 4 - _int_level(s, 4, r, n),   # keeps 4..1 bits
                      lambda img, bits: ImageOps.posterize(img, int(bits)))
rotate = Operation("rotate", lambda s, r, n=None: _signed(_int_level(s, 30, r, n), r, n),
                   lambda img, degrees: img.rotate(float(degrees), resample=BILINEAR))
solarize = Operation("solarize", lambda s, r, n=None: 256 - _int_level(s, 256, r, n),
                     lambda img, threshold: ImageOps.solarize(img, int(threshold)))
shear_x = Operation("shear_x", lambda s, r, n=None: _signed(_float_level(s, 0.3, r, n), r, n),
                    lambda img, m: _affine(img, (1, m, 0, 0, 1, 0)))
shear_y = Operation("shear_y", lambda s, r, n=None: _signed(_float_level(s, 0.3, r, n), r, n),
                    lambda img, m: _affine(img, (1, 0, 0, m, 1, 0)))
translate_x = Operation("translate_x", _translation,
                        lambda img, level: _affine(img, (1, 0, translation_pixels(level, img.size[0]), 0, 1, 0)))
translate_y = Operation("translate_y", _translation,
                        lambda img, level: _affine(img, (1, 0, 0, 0, 1, translation_pixels(level, img.size[1]))))
color = Operation("color", _factor, _enhance(ImageEnhance.Color))
contrast = Operation("contrast", _factor, _enhance(ImageEnhance.Contrast))
brightness = Operation("brightness", _brightness_factor, _enhance(ImageEnhance.Brightness))
sharpness = Operation("sharpness", _factor, _enhance(ImageEnhance.Sharpness))

GEOMETRIC = [autocontrast, equalize, posterize, rotate, solarize, shear_x, shear_y, translate_x,
             translate_y]
AUGMENTATION_SETS: dict[RandAugmentSet, list[Operation]] = {          # P:L359 on
    "all": GEOMETRIC + [color, contrast, brightness, sharpness],
    "safe": GEOMETRIC,
    "original": GEOMETRIC + [Operation(kind, _original_factor, _enhance(enhancement)) for kind, enhancement in (
        ("color", ImageEnhance.Color), ("contrast", ImageEnhance.Contrast),
        ("brightness", ImageEnhance.Brightness), ("sharpness", ImageEnhance.Sharpness))],
}


def randaugment_image(img: Image.Image, severity: int = 10, depth: int = 1,
                      augmentation_set: RandAugmentSet = "all") -> Image.Image:
    """`img` after `depth` operations, each drawn from the set and applied at `severity`."""
    operations = AUGMENTATION_SETS[augmentation_set]
    for _ in range(depth):
        img = operations[np.random.choice(len(operations))](img, severity)
    return img


class RandAugment:
    """The per-image transform (PIL in, PIL out), for a torchvision Compose."""

    def __init__(self, severity: int = 10, depth: int = 1, augmentation_set: RandAugmentSet = "all"):
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
