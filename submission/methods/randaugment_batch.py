"""RandAugment on a batch of uint8 images (N, 3, H, W) on any device: the device loader's
(train_loader=device). Each image gets its own operations and its own values, drawn as
randaugment.py draws them for one image (Composer's draws: an operation uniformly from the
set, a level U(0.1, severity) per image and operation, signs and enhancement factors per
image), not one magnitude for the whole batch as DALI's and Kornia's batched versions do.

Each kind of operation is one batched function that reproduces its PIL reference
(randaugment.Operation.apply) on uint8 pixels:
  - autocontrast, posterize, solarize: per image and channel lookups, in integers;
  - equalize: torchvision's tensor equalize, which implements PIL's histogram algorithm;
  - rotate, shear, translate: PIL's affine transform (output pixel centres mapped through the
    image's matrix, bilinear samples clamped to the image, black outside it), as grid_sample;
  - color, contrast, brightness, sharpness: PIL's blend with the enhancement's degenerate image
    (grey, grey mean, black, smoothed), in float32, truncated as ImagingBlend truncates.
tests/methods/test_randaugment_batch.py holds each against PIL with a tolerance per kind.

A kind computes its per-image parameters (lookup masks, thresholds, affine matrices, blend
factors; the images that drew it) on the host from the drawn values, and a batch's parameters
reach the device in one copy (batch_parameters.py); its device work then reads them there.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from numpy.typing import ArrayLike
from torchvision.transforms.v2 import functional as tvf

from .batch_parameters import HostArray, ParameterStaging
from .declarations.randaugment import RandAugmentSet
from .randaugment import AUGMENTATION_SETS, Operation, translation_pixels

GREY = (19595, 38470, 7471)          # PIL's RGB -> L weights, in 1/65536 (Convert.c, L24)
ROUND_OFF = 1e-9


def draw(count: int, severity: float, depth: int, augmentation_set: RandAugmentSet,
         random: np.random.Generator) -> list[tuple[np.ndarray, np.ndarray]]:
    """For each of `depth` steps: (the operation of each image, as an index into the set; the
    value each image's operation applies), drawn as randaugment.py draws them."""
    return draw_operations(count, AUGMENTATION_SETS[augmentation_set], severity, depth, random)


def draw_operations(count: int, operations: list[Operation], severity: float, depth: int,
                    random: np.random.Generator) -> list[tuple[np.ndarray, np.ndarray]]:
    """`draw` over any list of randaugment.Operation (trivialaugment_batch.py's sets too)."""
    steps = []
    for _ in range(depth):
        chosen = random.integers(0, len(operations), count)
        values = np.zeros(count)
        for k, operation in enumerate(operations):
            mine = chosen == k
            if mine.any() and operation.draw is not None:
                values[mine] = operation.draw(severity, random, int(mine.sum()))
        steps.append((chosen, values))
    return steps


def apply(images: torch.Tensor, steps: list[tuple[np.ndarray, np.ndarray]],
          augmentation_set: RandAugmentSet, staging: ParameterStaging | None = None) -> torch.Tensor:
    """`images` (uint8, N x 3 x H x W) after the drawn steps, each image's own; their
    parameters sent to the device by `staging` (a loader's, reused; a new one unless given)."""
    return apply_operations(images, steps, AUGMENTATION_SETS[augmentation_set], staging=staging)


def apply_operations(images: torch.Tensor, steps: list[tuple[np.ndarray, np.ndarray]],
                     operations: list[Operation], kinds: dict[str, Kind] | None = None,
                     staging: ParameterStaging | None = None) -> torch.Tensor:
    """`apply` over any list of operations, each run by its kind in `kinds` (these KINDS unless
    given): every step's parameters prepared on the host, sent in one copy, then applied."""
    kinds = KINDS if kinds is None else kinds
    chosen_kinds = [kinds[operation.kind] for operation in operations]
    arrays, plan = _prepared(images.shape[-2:], steps, chosen_kinds)
    on_device = (staging or ParameterStaging()).send(arrays, images.device)
    for step in range(len(steps)):
        images = images.clone()
        # every operation runs, on the images that drew it (none, at times): the same torch
        # operations whatever the batch and its draws (docs/gpu-data.md)
        for kind, first, count in plan[step * len(operations):(step + 1) * len(operations)]:
            rows = on_device[first]
            done = kind.run(images.index_select(0, rows), *on_device[first + 1:first + 1 + count])
            images.index_copy_(0, rows, done)
    return images


def _prepared(size: tuple[int, ...], steps: list[tuple[np.ndarray, np.ndarray]],
              kinds: list[Kind]) -> tuple[list[HostArray], list[tuple[Kind, int, int]]]:
    """The host parameters of every step and operation, in order: the rows of the images
    that drew it, then its kind's; and for each (the kind, where its rows lie in them, how
    many parameters of its own follow)."""
    height, width = size
    arrays: list[HostArray] = []
    plan = []
    for chosen, values in steps:
        for k, kind in enumerate(kinds):
            where = np.flatnonzero(chosen == k)
            parameters = kind.prepare(values[where], height, width)
            plan.append((kind, len(arrays), len(parameters)))
            arrays += [HostArray.of(where, torch.int64, -1), *parameters]
    return arrays, plan


def randaugment(images: torch.Tensor, severity: float, depth: int, augmentation_set: RandAugmentSet,
                random: np.random.Generator) -> torch.Tensor:
    """RandAugment on a batch: draw, then apply."""
    return apply(images, draw(len(images), severity, depth, augmentation_set, random), augmentation_set)


# ---- the kinds: their parameters on the host, then their work on the device ----------------
Parameters = tuple[HostArray, ...]


def no_parameters(values: np.ndarray, height: int, width: int) -> Parameters:
    return ()


@dataclass(frozen=True)
class Kind:
    """A kind of operation on a batch: `prepare` makes its parameters on the host from the
    value each image drew (m values) and the images' height and width; `run` does its work on
    uint8 images (m, 3, H, W) with those parameters on the device, returning uint8 images."""
    run: Callable[..., torch.Tensor]
    prepare: Callable[[np.ndarray, int, int], Parameters] = no_parameters

    def __call__(self, images: torch.Tensor, values: ArrayLike) -> torch.Tensor:
        """The kind on a batch by itself, each image at its value."""
        parameters = list(self.prepare(np.asarray(values), *images.shape[-2:]))
        return self.run(images, *ParameterStaging().send(parameters, images.device))


def _per_image(values: ArrayLike, dtype: torch.dtype = torch.float32) -> HostArray:
    return HostArray.of(values, dtype, -1, 1, 1, 1)


def autocontrast(images: torch.Tensor) -> torch.Tensor:
    """Each channel stretched to 0-255: int(i x scale + offset), in float64 (ImageOps)."""
    low = images.amin(dim=(-2, -1), keepdim=True).double()
    high = images.amax(dim=(-2, -1), keepdim=True).double()
    flat = high <= low
    # a tensor over a tensor: a scalar over a tensor is a product with the reciprocal on the
    # CPU (10.200000000000001 for 255 / 25), which truncates 25 x scale to 255, not PIL's 254
    scale = torch.where(flat, 1.0, torch.full_like(high, 255.0) / (high - low).clamp(min=1))
    offset = torch.where(flat, 0.0, -low * scale)
    return (images.double() * scale + offset).clamp(0, 255).to(torch.uint8)


def equalize(images: torch.Tensor) -> torch.Tensor:
    # torchvision returns an empty batch at once; one blank image more keeps its operations
    # the same whether or not an image drew it
    return tvf.equalize(torch.cat((images, images.new_zeros((1, *images.shape[1:])))))[:-1]


def posterize_masks(bits: np.ndarray, height: int, width: int) -> Parameters:
    return (_per_image((0xFF << (8 - np.asarray(bits, np.int64))) & 0xFF, torch.uint8),)


def posterize(images: torch.Tensor, masks: torch.Tensor) -> torch.Tensor:
    return images & masks


def solarize_thresholds(thresholds: np.ndarray, height: int, width: int) -> Parameters:
    # PIL solarizes the levels at or above the threshold (ImageOps.solarize: i < threshold
    # stays); a threshold between two levels starts at the next whole one
    return (_per_image(np.ceil(thresholds), torch.int16),)


def solarize(images: torch.Tensor, thresholds: torch.Tensor) -> torch.Tensor:
    return torch.where(images >= thresholds, 255 - images, images)


def _warp(images: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    """PIL's AFFINE transform with BILINEAR resampling: each output pixel centre (x + 0.5,
    y + 0.5) maps to (a x + b y + c, d x + e y + f) in the image (`m`: each image's a-f, float64
    (m, 6, 1, 1)); outside [0, W) x [0, H) it is black, inside a bilinear sample with the edge
    pixels repeated, truncated (Geometry.c)."""
    _, _, height, width = images.shape
    y, x = torch.meshgrid(torch.arange(height, dtype=torch.float64, device=images.device) + 0.5,
                          torch.arange(width, dtype=torch.float64, device=images.device) + 0.5, indexing="ij")
    source_x = m[:, 0] * x + m[:, 1] * y + m[:, 2]
    source_y = m[:, 3] * x + m[:, 4] * y + m[:, 5]
    inside = (source_x >= 0) & (source_x < width) & (source_y >= 0) & (source_y < height)
    # in float64, as PIL computes; grid_sample's coordinates in [-1, 1] and back leave an error
    # of about 1e-13 px, which ROUND_OFF keeps from truncating a whole value (a whole-pixel
    # shift) one grey level down
    grid = torch.stack((2 * source_x / width - 1, 2 * source_y / height - 1), dim=-1)
    sampled = F.grid_sample(images.double(), grid, mode="bilinear", padding_mode="border",
                            align_corners=False)
    return torch.where(inside.unsqueeze(1), sampled + ROUND_OFF, 0.0).clamp_(0, 255).to(torch.uint8)


def _matrices(matrices: np.ndarray) -> Parameters:
    return (HostArray.of(matrices, torch.float64, -1, 6, 1, 1),)


def rotation_matrices(degrees: np.ndarray, height: int, width: int) -> np.ndarray:
    """PIL's Image.rotate(degrees) matrices about the centre (w / 2, h / 2), counter-clockwise:
    the angle taken modulo 360, then its cosine and sine rounded to 15 places (Image.py)."""
    matrices = []
    for value in np.asarray(degrees, np.float64):
        angle = -math.radians(value % 360.0)
        a, b = round(math.cos(angle), 15), round(math.sin(angle), 15)
        d, e = -b, a
        c = a * (-width / 2) + b * (-height / 2) + width / 2
        f = d * (-width / 2) + e * (-height / 2) + height / 2
        matrices.append((a, b, c, d, e, f))
    return np.array(matrices).reshape(-1, 6)


def affine_matrices(count: int, **entries: ArrayLike) -> np.ndarray:
    """Identity affine matrices (a, b, c, d, e, f) with the named entries set per image."""
    matrices = np.tile(np.array([1.0, 0, 0, 0, 1, 0]), (count, 1))
    for name, values in entries.items():
        matrices[:, "abcdef".index(name)] = values
    return matrices


def rotate_parameters(degrees: np.ndarray, height: int, width: int) -> Parameters:
    """PIL's Image.rotate(degrees) about the centre (w / 2, h / 2), counter-clockwise."""
    return _matrices(rotation_matrices(degrees, height, width))


def shear_x_parameters(shears: np.ndarray, height: int, width: int) -> Parameters:
    return _matrices(affine_matrices(len(shears), b=shears))


def shear_y_parameters(shears: np.ndarray, height: int, width: int) -> Parameters:
    return _matrices(affine_matrices(len(shears), d=shears))


def translate_x_parameters(levels: np.ndarray, height: int, width: int) -> Parameters:
    return _matrices(affine_matrices(len(levels), c=translation_pixels(np.asarray(levels), width)))


def translate_y_parameters(levels: np.ndarray, height: int, width: int) -> Parameters:
    return _matrices(affine_matrices(len(levels), f=translation_pixels(np.asarray(levels), height)))


def _grey(images: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """PIL's convert("L"): (19595 R + 38470 G + 7471 B + 32768) >> 16, (m, 1, H, W) int32
    (`weights`: GREY, int32 (1, 3, 1, 1))."""
    return ((images.to(torch.int32) * weights).sum(dim=1, keepdim=True) + 32768) >> 16


def _blend(degenerate: torch.Tensor, images: torch.Tensor, factor: torch.Tensor) -> torch.Tensor:
    """PIL's Image.blend(degenerate, image, factor), in float32, truncated (Blend.c)."""
    degenerate = degenerate.float()
    return (degenerate + factor * (images.float() - degenerate)).clamp_(0, 255).to(torch.uint8)


def blend_factors(factors: np.ndarray, height: int, width: int) -> Parameters:
    return (_per_image(factors),)


def grey_blend_factors(factors: np.ndarray, height: int, width: int) -> Parameters:
    """The blend factors, then PIL's RGB -> L weights (_grey)."""
    return (_per_image(factors), HostArray.of(GREY, torch.int32, 1, 3, 1, 1))


def color(images: torch.Tensor, factors: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    return _blend(_grey(images, weights), images, factors)


def contrast(images: torch.Tensor, factors: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    mean = _grey(images, weights).double().mean(dim=(-3, -2, -1), keepdim=True)
    return _blend(torch.floor(mean + 0.5), images, factors)


def brightness(images: torch.Tensor, factors: torch.Tensor) -> torch.Tensor:
    return _blend(torch.zeros_like(images), images, factors)


SMOOTH = (1.0, 1.0, 1.0, 1.0, 5.0, 1.0, 1.0, 1.0, 1.0)      # ImageFilter.SMOOTH, over 13


def smooth_blend_factors(factors: np.ndarray, height: int, width: int) -> Parameters:
    """The blend factors, then PIL's SMOOTH filter (sharpness)."""
    return (_per_image(factors), HostArray.of(SMOOTH, torch.float32, 1, 1, 3, 3))


def sharpness(images: torch.Tensor, factors: torch.Tensor, smooth_filter: torch.Tensor) -> torch.Tensor:
    """Blend with PIL's SMOOTH filter of the image; the filter leaves the edge pixels as
    they are (Filter.c), so they keep their value."""
    kernel = smooth_filter.repeat(3, 1, 1, 1) / 13
    smooth = F.conv2d(images.float(), kernel, groups=3)
    degenerate = images.float().clone()
    degenerate[..., 1:-1, 1:-1] = smooth.add_(0.5).floor_()
    return _blend(degenerate, images, factors)


KINDS: dict[str, Kind] = {
    "autocontrast": Kind(autocontrast), "equalize": Kind(equalize), "posterize": Kind(posterize, posterize_masks),
    "solarize": Kind(solarize, solarize_thresholds), "rotate": Kind(_warp, rotate_parameters),
    "shear_x": Kind(_warp, shear_x_parameters), "shear_y": Kind(_warp, shear_y_parameters),
    "translate_x": Kind(_warp, translate_x_parameters), "translate_y": Kind(_warp, translate_y_parameters),
    "color": Kind(color, grey_blend_factors), "contrast": Kind(contrast, grey_blend_factors),
    "brightness": Kind(brightness, blend_factors), "sharpness": Kind(sharpness, smooth_blend_factors)}
