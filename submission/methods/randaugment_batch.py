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
"""
from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import torch
import torch.nn.functional as F
from numpy.typing import ArrayLike
from torchvision.transforms.v2 import functional as tvf

from .declarations.randaugment import RandAugmentSet
from .randaugment import AUGMENTATION_SETS, Operation, translation_pixels

# a kind's batched function: (uint8 images (m, 3, H, W), the value of each (m,)) -> uint8 images
Kind = Callable[[torch.Tensor, np.ndarray], torch.Tensor]
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
          augmentation_set: RandAugmentSet) -> torch.Tensor:
    """`images` (uint8, N x 3 x H x W) after the drawn steps, each image's own."""
    return apply_operations(images, steps, AUGMENTATION_SETS[augmentation_set])


def apply_operations(images: torch.Tensor, steps: list[tuple[np.ndarray, np.ndarray]],
                     operations: list[Operation], kinds: dict[str, Kind] | None = None) -> torch.Tensor:
    """`apply` over any list of operations, each run by its kind's batched function in
    `kinds` (these KINDS unless given)."""
    kinds = KINDS if kinds is None else kinds
    for chosen, values in steps:
        images = images.clone()
        # every operation runs, on the images that drew it (none, at times): the same torch
        # operations whatever the batch and its draws (docs/gpu-data.md)
        for k, operation in enumerate(operations):
            where = np.flatnonzero(chosen == k)
            rows = torch.from_numpy(where).to(images.device)
            done = kinds[operation.kind](images.index_select(0, rows), values[where])
            images.index_copy_(0, rows, done)
    return images


def randaugment(images: torch.Tensor, severity: float, depth: int, augmentation_set: RandAugmentSet,
                random: np.random.Generator) -> torch.Tensor:
    """RandAugment on a batch: draw, then apply."""
    return apply(images, draw(len(images), severity, depth, augmentation_set, random), augmentation_set)


# ---- the kinds: (uint8 images (m, 3, H, W), values (m,) numpy) -> uint8 images -------------
def _per_image(values: np.ndarray, images: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.as_tensor(np.asarray(values), dtype=dtype, device=images.device).view(-1, 1, 1, 1)


def autocontrast(images: torch.Tensor, _: np.ndarray) -> torch.Tensor:
    """Each channel stretched to 0-255: int(i x scale + offset), in float64 (ImageOps)."""
    low = images.amin(dim=(-2, -1), keepdim=True).double()
    high = images.amax(dim=(-2, -1), keepdim=True).double()
    flat = high <= low
    # a tensor over a tensor: a scalar over a tensor is a product with the reciprocal on the
    # CPU (10.200000000000001 for 255 / 25), which truncates 25 x scale to 255, not PIL's 254
    scale = torch.where(flat, 1.0, torch.full_like(high, 255.0) / (high - low).clamp(min=1))
    offset = torch.where(flat, 0.0, -low * scale)
    return (images.double() * scale + offset).clamp(0, 255).to(torch.uint8)


def equalize(images: torch.Tensor, _: np.ndarray) -> torch.Tensor:
    # torchvision returns an empty batch at once; one blank image more keeps its operations
    # the same whether or not an image drew it
    return tvf.equalize(torch.cat((images, images.new_zeros((1, *images.shape[1:])))))[:-1]


def posterize(images: torch.Tensor, bits: np.ndarray) -> torch.Tensor:
    masks = (0xFF << (8 - np.asarray(bits, np.int64))) & 0xFF
    return images & _per_image(masks, images, torch.uint8)


def solarize(images: torch.Tensor, thresholds: np.ndarray) -> torch.Tensor:
    # PIL solarizes the levels at or above the threshold (ImageOps.solarize: i < threshold
    # stays); a threshold between two levels starts at the next whole one
    return torch.where(images >= _per_image(np.ceil(thresholds), images, torch.int16), 255 - images, images)


def _warp(images: torch.Tensor, matrices: np.ndarray) -> torch.Tensor:
    """PIL's AFFINE transform with BILINEAR resampling: each output pixel centre (x + 0.5,
    y + 0.5) maps to (a x + b y + c, d x + e y + f) in the image; outside [0, W) x [0, H) it is
    black, inside a bilinear sample with the edge pixels repeated, truncated (Geometry.c)."""
    count, _, height, width = images.shape
    m = torch.as_tensor(matrices, dtype=torch.float64, device=images.device).view(count, 6, 1, 1)
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


def rotate(images: torch.Tensor, degrees: np.ndarray) -> torch.Tensor:
    """PIL's Image.rotate(degrees) about the centre (w / 2, h / 2), counter-clockwise."""
    return _warp(images, rotation_matrices(degrees, *images.shape[-2:]))


def affine_matrices(count: int, **entries: ArrayLike) -> np.ndarray:
    """Identity affine matrices (a, b, c, d, e, f) with the named entries set per image."""
    matrices = np.tile(np.array([1.0, 0, 0, 0, 1, 0]), (count, 1))
    for name, values in entries.items():
        matrices[:, "abcdef".index(name)] = values
    return matrices


def shear_x(images: torch.Tensor, shears: np.ndarray) -> torch.Tensor:
    return _warp(images, affine_matrices(len(images), b=shears))


def shear_y(images: torch.Tensor, shears: np.ndarray) -> torch.Tensor:
    return _warp(images, affine_matrices(len(images), d=shears))


def translate_x(images: torch.Tensor, levels: np.ndarray) -> torch.Tensor:
    return _warp(images, affine_matrices(len(images), c=translation_pixels(np.asarray(levels), images.shape[-1])))


def translate_y(images: torch.Tensor, levels: np.ndarray) -> torch.Tensor:
    return _warp(images, affine_matrices(len(images), f=translation_pixels(np.asarray(levels), images.shape[-2])))


def _grey(images: torch.Tensor) -> torch.Tensor:
    """PIL's convert("L"): (19595 R + 38470 G + 7471 B + 32768) >> 16, (m, 1, H, W) int32."""
    weights = torch.tensor(GREY, dtype=torch.int32, device=images.device).view(1, 3, 1, 1)
    return ((images.to(torch.int32) * weights).sum(dim=1, keepdim=True) + 32768) >> 16


def _blend(degenerate: torch.Tensor, images: torch.Tensor, factors: np.ndarray) -> torch.Tensor:
    """PIL's Image.blend(degenerate, image, factor), in float32, truncated (Blend.c)."""
    factor = _per_image(factors, images)
    degenerate = degenerate.float()
    return (degenerate + factor * (images.float() - degenerate)).clamp_(0, 255).to(torch.uint8)


def color(images: torch.Tensor, factors: np.ndarray) -> torch.Tensor:
    return _blend(_grey(images), images, factors)


def contrast(images: torch.Tensor, factors: np.ndarray) -> torch.Tensor:
    mean = _grey(images).double().mean(dim=(-3, -2, -1), keepdim=True)
    return _blend(torch.floor(mean + 0.5), images, factors)


def brightness(images: torch.Tensor, factors: np.ndarray) -> torch.Tensor:
    return _blend(torch.zeros_like(images), images, factors)


SMOOTH = (1.0, 1.0, 1.0, 1.0, 5.0, 1.0, 1.0, 1.0, 1.0)      # ImageFilter.SMOOTH, over 13


def sharpness(images: torch.Tensor, factors: np.ndarray) -> torch.Tensor:
    """Blend with PIL's SMOOTH filter of the image; the filter leaves the edge pixels as
    they are (Filter.c), so they keep their value."""
    kernel = torch.tensor(SMOOTH, device=images.device).view(1, 1, 3, 3).repeat(3, 1, 1, 1) / 13
    smooth = F.conv2d(images.float(), kernel, groups=3)
    degenerate = images.float().clone()
    degenerate[..., 1:-1, 1:-1] = smooth.add_(0.5).floor_()
    return _blend(degenerate, images, factors)


KINDS: dict[str, Kind] = {"autocontrast": autocontrast, "equalize": equalize, "posterize": posterize, "rotate": rotate,
         "solarize": solarize, "shear_x": shear_x, "shear_y": shear_y, "translate_x": translate_x,
         "translate_y": translate_y, "color": color, "contrast": contrast, "brightness": brightness,
         "sharpness": sharpness}
