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
from .batch_parameters import HostArray, ParameterStaging
from .randaugment_batch import Kind, Parameters, affine_matrices, rotation_matrices
from .trivialaugment import COMPOSER_SEVERITY, OPERATIONS

FIXED_ONE = 65536.0             # PIL's 16.16 fixed point (Geometry.c affine_fixed)


def draw(count: int, space: str, random: np.random.Generator) -> list[tuple[np.ndarray, np.ndarray]]:
    """One step: (each image's operation, as an index into the space's set; the value it
    applies), drawn as trivialaugment.py draws them (randaugment_batch.apply's steps)."""
    return randaugment_batch.draw_operations(count, OPERATIONS[space], COMPOSER_SEVERITY, 1, random)


def apply(images: torch.Tensor, steps: list[tuple[np.ndarray, np.ndarray]], space: str,
          staging: ParameterStaging | None = None) -> torch.Tensor:
    """`images` (uint8, N x 3 x H x W) after the drawn step, each image's own operation; the
    parameters sent to the device by `staging` (a loader's, reused; a new one unless given)."""
    return randaugment_batch.apply_operations(images, steps, OPERATIONS[space], KINDS, staging)


def trivialaugment(images: torch.Tensor, space: str, random: np.random.Generator) -> torch.Tensor:
    """TrivialAugment on a batch: draw, then apply."""
    return apply(images, draw(len(images), space, random), space)


# ---- the new kinds: their parameters on the host, then their work on the device ------------
def identity(images: torch.Tensor) -> torch.Tensor:
    return images


def _fixed(values: ArrayLike) -> np.ndarray:
    """PIL's FIX(v): floor(v x 65536 + 0.5), a 16.16 fixed-point number."""
    return np.floor(np.asarray(values, np.float64) * FIXED_ONE + 0.5).astype(np.int64)


def _nearest(matrices: np.ndarray) -> Parameters:
    """_warp_nearest's parameters of each image's matrix (a, b, c, d, e, f), in 16.16 fixed
    point, each (m, 1, 1): X at the first pixel centre, its steps in y and in x; Y likewise."""
    a, b, c, d, e, f = np.asarray(matrices, np.float64).reshape(-1, 6).T
    return tuple(HostArray.of(_fixed(values), torch.int64, -1, 1, 1)
                 for values in (c + a * 0.5 + b * 0.5, b, a, f + d * 0.5 + e * 0.5, e, d))


def _warp_nearest(images: torch.Tensor, x_start: torch.Tensor, x_per_y: torch.Tensor, x_per_x: torch.Tensor,
                  y_start: torch.Tensor, y_per_y: torch.Tensor, y_per_x: torch.Tensor) -> torch.Tensor:
    """PIL's AFFINE transform with NEAREST resampling: the output pixel (x, y) takes the source
    pixel (floor(X), floor(Y)), X = a (x + 0.5) + b (y + 0.5) + c in 16.16 fixed point (Y
    likewise with d, e, f: _nearest), black where that lies outside the image (Geometry.c
    affine_fixed, which PIL takes for every image under 32768 px; its scaling path, for
    b = d = 0, gives the same pixels)."""
    count, channels, height, width = images.shape
    device = images.device
    y = torch.arange(height, dtype=torch.int64, device=device).view(1, height, 1)
    x = torch.arange(width, dtype=torch.int64, device=device).view(1, 1, width)
    source_x = (x_start + y * x_per_y + x * x_per_x) >> 16
    source_y = (y_start + y * y_per_y + x * y_per_x) >> 16
    inside = (source_x >= 0) & (source_x < width) & (source_y >= 0) & (source_y < height)
    index = source_y.clamp(0, height - 1) * width + source_x.clamp(0, width - 1)
    taken = images.reshape(count, channels, height * width).gather(
        2, index.view(count, 1, height * width).expand(-1, channels, -1)).view(images.shape)
    return torch.where(inside.unsqueeze(1), taken, torch.zeros_like(taken))


def shear_x_nearest_parameters(shears: np.ndarray, height: int, width: int) -> Parameters:
    """torchvision's affine with shear atan(m) in degrees about (0, 0): the matrix
    (1, tan(sx), 0, 0, 1, 0) of its _get_inverse_affine_matrix, sx back in radians."""
    tangents = [math.tan(math.radians(math.degrees(math.atan(m)))) for m in np.asarray(shears, np.float64)]
    return _nearest(affine_matrices(len(shears), b=tangents))


def shear_y_nearest_parameters(shears: np.ndarray, height: int, width: int) -> Parameters:
    """As shear_x_nearest_parameters, in y: (1, 0, 0, sin(sy) / cos(sy), 1, 0) (its _get_inverse_affine_matrix)."""
    radians = [math.radians(math.degrees(math.atan(m))) for m in np.asarray(shears, np.float64)]
    return _nearest(affine_matrices(len(shears), d=[math.sin(r) / math.cos(r) for r in radians]))


def translate_x_pixels_parameters(pixels: np.ndarray, height: int, width: int) -> Parameters:
    """torchvision's affine translation by whole pixels: the image moves right for positive ones."""
    return _nearest(affine_matrices(len(pixels), c=-np.asarray(pixels, np.float64)))


def translate_y_pixels_parameters(pixels: np.ndarray, height: int, width: int) -> Parameters:
    return _nearest(affine_matrices(len(pixels), f=-np.asarray(pixels, np.float64)))


def _shortcuts(height: int, width: int) -> list[tuple[float, int]]:
    """Image.rotate's shortcuts: (an angle, its quarter turns) that copy, flip or transpose."""
    return [(angle, turns) for angle, turns in ((0.0, 0), (90.0, 1), (180.0, 2), (270.0, 3))
            if turns % 2 == 0 or height == width]


def rotate_nearest_parameters(degrees: np.ndarray, height: int, width: int) -> Parameters:
    """The warp's parameters, then for each shortcut the images whose angle takes it."""
    angles = np.asarray(degrees, np.float64) % 360.0
    return (*_nearest(rotation_matrices(degrees, height, width)),
            *(HostArray.of(np.flatnonzero(angles == angle), torch.int64, -1) for angle, _ in _shortcuts(height, width)))


def rotate_nearest(images: torch.Tensor, *parameters: torch.Tensor) -> torch.Tensor:
    """PIL's Image.rotate(degrees, NEAREST), with its shortcuts (Image.py): an angle of 0 modulo
    360 copies, 180 flips both ways, 90 and 270 transpose a square image; others warp. Each
    shortcut runs whether or not an image takes it (the same operations whatever the draws)."""
    out = _warp_nearest(images, *parameters[:6])
    for (_, turns), rows in zip(_shortcuts(*images.shape[-2:]), parameters[6:]):
        out.index_copy_(0, rows, torch.rot90(images.index_select(0, rows), turns, dims=(-2, -1)))
    return out


KINDS: dict[str, Kind] = {
    **randaugment_batch.KINDS, "identity": Kind(identity),
    "shear_x_nearest": Kind(_warp_nearest, shear_x_nearest_parameters),
    "shear_y_nearest": Kind(_warp_nearest, shear_y_nearest_parameters),
    "translate_x_pixels": Kind(_warp_nearest, translate_x_pixels_parameters),
    "translate_y_pixels": Kind(_warp_nearest, translate_y_pixels_parameters),
    "rotate_nearest": Kind(rotate_nearest, rotate_nearest_parameters)}
