"""TrivialAugment on a batch of uint8 images (N, 3, H, W) on any device: the device loader's
(train_loader=device). Each image gets its own operation and magnitude, drawn as
trivialaugment.py draws them for one image (one step of randaugment_batch's draws).

The kinds the wide set shares with RandAugment run as randaugment_batch.KINDS runs them
(enhancement blends, posterize, solarize, autocontrast, equalize: PIL's arithmetic in both).
New here, where TrivialAugmentWide differs:
  - identity;
  - shear, rotation and translation with NEAREST resampling, torchvision's default: PIL's
    affine transform in 16.16 fixed point (Geometry.c affine_fixed: the source of each output
    pixel centre, floored; black outside the image), with Image.rotate's shortcuts (0 degrees
    copies, 180 flips, 90 and 270 transpose a square image); translations in whole pixels.
tests/methods/test_trivialaugment_batch.py holds each against its PIL operation.
"""
from __future__ import annotations

import math

import numpy as np
import torch
from numpy.typing import ArrayLike

from . import randaugment_batch
from .randaugment_batch import affine_matrices, rotation_matrices
from .trivialaugment import COMPOSER_SEVERITY, OPERATIONS

FIXED_ONE = 65536.0             # PIL's 16.16 fixed point (Geometry.c affine_fixed)


def draw(count: int, space: str, random: np.random.Generator) -> list[tuple[np.ndarray, np.ndarray]]:
    """One step: (each image's operation, as an index into the space's set; the value it
    applies), drawn as trivialaugment.py draws them (randaugment_batch.apply's steps)."""
    return randaugment_batch.draw_operations(count, OPERATIONS[space], COMPOSER_SEVERITY, 1, random)


def apply(images: torch.Tensor, steps: list[tuple[np.ndarray, np.ndarray]], space: str) -> torch.Tensor:
    """`images` (uint8, N x 3 x H x W) after the drawn step, each image's own operation."""
    return randaugment_batch.apply_operations(images, steps, OPERATIONS[space], KINDS)


def trivialaugment(images: torch.Tensor, space: str, random: np.random.Generator) -> torch.Tensor:
    """TrivialAugment on a batch: draw, then apply."""
    return apply(images, draw(len(images), space, random), space)


# ---- the new kinds: (uint8 images (m, 3, H, W), values (m,) numpy) -> uint8 images ---------
def identity(images: torch.Tensor, _: np.ndarray) -> torch.Tensor:
    return images


def _fixed(values: ArrayLike) -> np.ndarray:
    """PIL's FIX(v): floor(v x 65536 + 0.5), a 16.16 fixed-point number."""
    return np.floor(np.asarray(values, np.float64) * FIXED_ONE + 0.5).astype(np.int64)


def _warp_nearest(images: torch.Tensor, matrices: np.ndarray) -> torch.Tensor:
    """PIL's AFFINE transform with NEAREST resampling: the output pixel (x, y) takes the source
    pixel (floor(X), floor(Y)), X = a (x + 0.5) + b (y + 0.5) + c in 16.16 fixed point (Y
    likewise with d, e, f), black where that lies outside the image (Geometry.c affine_fixed,
    which PIL takes for every image under 32768 px; its scaling path, for b = d = 0, gives the
    same pixels)."""
    count, channels, height, width = images.shape
    a, b, c, d, e, f = np.asarray(matrices, np.float64).reshape(count, 6).T
    device = images.device

    def per_image(values: np.ndarray) -> torch.Tensor:
        return torch.as_tensor(values, device=device).view(count, 1, 1)

    y = torch.arange(height, dtype=torch.int64, device=device).view(1, height, 1)
    x = torch.arange(width, dtype=torch.int64, device=device).view(1, 1, width)
    source_x = (per_image(_fixed(c + a * 0.5 + b * 0.5)) + y * per_image(_fixed(b))
                + x * per_image(_fixed(a))) >> 16
    source_y = (per_image(_fixed(f + d * 0.5 + e * 0.5)) + y * per_image(_fixed(e))
                + x * per_image(_fixed(d))) >> 16
    inside = (source_x >= 0) & (source_x < width) & (source_y >= 0) & (source_y < height)
    index = source_y.clamp(0, height - 1) * width + source_x.clamp(0, width - 1)
    taken = images.reshape(count, channels, height * width).gather(
        2, index.view(count, 1, height * width).expand(-1, channels, -1)).view(images.shape)
    return torch.where(inside.unsqueeze(1), taken, torch.zeros_like(taken))


def shear_x_nearest(images: torch.Tensor, shears: np.ndarray) -> torch.Tensor:
    """torchvision's affine with shear atan(m) in degrees about (0, 0): the matrix
    (1, tan(sx), 0, 0, 1, 0) of its _get_inverse_affine_matrix, sx back in radians."""
    tangents = [math.tan(math.radians(math.degrees(math.atan(m)))) for m in np.asarray(shears, np.float64)]
    return _warp_nearest(images, affine_matrices(len(images), b=tangents))


def shear_y_nearest(images: torch.Tensor, shears: np.ndarray) -> torch.Tensor:
    """As shear_x_nearest, in y: (1, 0, 0, sin(sy) / cos(sy), 1, 0) (its _get_inverse_affine_matrix)."""
    radians = [math.radians(math.degrees(math.atan(m))) for m in np.asarray(shears, np.float64)]
    return _warp_nearest(images, affine_matrices(len(images), d=[math.sin(r) / math.cos(r) for r in radians]))


def translate_x_pixels(images: torch.Tensor, pixels: np.ndarray) -> torch.Tensor:
    """torchvision's affine translation by whole pixels: the image moves right for positive ones."""
    return _warp_nearest(images, affine_matrices(len(images), c=-np.asarray(pixels, np.float64)))


def translate_y_pixels(images: torch.Tensor, pixels: np.ndarray) -> torch.Tensor:
    return _warp_nearest(images, affine_matrices(len(images), f=-np.asarray(pixels, np.float64)))


def rotate_nearest(images: torch.Tensor, degrees: np.ndarray) -> torch.Tensor:
    """PIL's Image.rotate(degrees, NEAREST), with its shortcuts (Image.py): an angle of 0 modulo
    360 copies, 180 flips both ways, 90 and 270 transpose a square image; others warp. Each
    shortcut runs whether or not an image takes it (the same operations whatever the draws)."""
    height, width = images.shape[-2:]
    angles = np.asarray(degrees, np.float64) % 360.0
    out = _warp_nearest(images, rotation_matrices(degrees, height, width))
    for angle, turns in ((0.0, 0), (90.0, 1), (180.0, 2), (270.0, 3)):
        if turns % 2 == 0 or height == width:
            rows = torch.from_numpy(np.flatnonzero(angles == angle)).to(images.device)
            out.index_copy_(0, rows, torch.rot90(images.index_select(0, rows), turns, dims=(-2, -1)))
    return out


KINDS: dict[str, randaugment_batch.Kind] = {
    **randaugment_batch.KINDS, "identity": identity, "shear_x_nearest": shear_x_nearest,
    "shear_y_nearest": shear_y_nearest, "translate_x_pixels": translate_x_pixels,
    "translate_y_pixels": translate_y_pixels, "rotate_nearest": rotate_nearest}
