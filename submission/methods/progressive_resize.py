"""Progressive resizing: train on downscaled batches early, full size at the end.

Scale `initial` until `start` of training, a linear ramp to 1.0 at `finish`, then 1.0
(Mild: 0.5 for the first 40%, ramp to 1.0 by 80%). The batch is resized on its
device; the side is rounded to a multiple of `multiple` (4).

The rounded ("pinned") side is what the schedule names; the batch is resized, as Composer
does (v0.7.0-RC1 and v0.8.0 progressive_resizing.py), by the scale factor pinned / width,
whose output side is floor(width * (pinned / width)): one pixel short where the quotient
rounds down in doubles (176 -> 120 trains at 119 px, 167 -> 100 at 99 px).

Granularity: Composer v0.7 (the MLPerf v2.0 entry) measures progress as completed
epochs / max epochs, so the side changes only at epoch boundaries (`epoch`); a run of
less than a few epochs has no boundary to change at and uses `step`.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

from ..settings import Settings

if TYPE_CHECKING:        # the run plan reads the schedule without torch (run_plan.py)
    import torch


def resize_scale(progress: float, initial: float, start: float, finish: float) -> float:
    if progress <= start:
        return initial
    if progress >= finish:
        return 1.0
    return initial + (1.0 - initial) * (progress - start) / (finish - start)


def scaled_side(side: int, scale: float, multiple: int) -> int:
    return max(multiple, int(round(side * scale / multiple)) * multiple)


def training_progress(step: int, steps_per_epoch: int, total_steps: int, granularity: str) -> float:
    """Share of training done before `step` (0-based), as the resize schedule sees it."""
    if granularity == "epoch":
        return (step // steps_per_epoch) * steps_per_epoch / total_steps
    return step / total_steps


def side_at(step: int, steps_per_epoch: int, total_steps: int, config: Settings,
            full_side: int | None = None) -> int:
    """Training side at `step` under the resolved configuration's resize schedule, for
    batches that come to it at `full_side` (default train_resolution; Hot's ColOut crops
    them first). Batches are only ever scaled down: Composer v0.8.0 skips a scale factor
    that the rounding to a multiple takes to 1 or above (progressive_resizing.py L73,
    L225-227), so a 167 px batch stays 167 px at the end, not 168."""
    full_side = full_side or config.train_resolution
    if not config.progressive_resize:
        return full_side
    progress = training_progress(step, steps_per_epoch, total_steps, config.resize_granularity)
    scale = resize_scale(progress, config.resize_initial_scale, config.resize_start_fraction,
                         config.resize_finish_fraction)
    return min(full_side, scaled_side(full_side, scale, config.resize_multiple))


def output_side(width: int, side: int) -> int:
    """The side F.interpolate gives a `width`-px batch scaled by side / width (floor of
    the product in doubles); `width` itself when `side` is not below it (no resize)."""
    if side >= width:
        return width
    return math.floor(width * (side / width))


def resize_batch(images: torch.Tensor, side: int, mode: str = "nearest") -> torch.Tensor:
    """images (N,C,H,W) scaled by side / W, as Composer's `F.interpolate(scale_factor=...,
    recompute_scale_factor=False)`: a square batch comes out output_side(W, side) px a side,
    channels last. `bilinear` is antialiased. A side of W or more returns `images` as they
    are: Composer skips a scale factor >= 1 (progressive_resizing.py L73)."""
    import torch
    import torch.nn.functional as F
    width = images.shape[-1]
    if side >= width:
        return images
    extra = {"align_corners": False, "antialias": True} if mode == "bilinear" else {}
    resized = F.interpolate(images, scale_factor=side / width, mode=mode,
                            recompute_scale_factor=False, **extra)
    return resized.contiguous(memory_format=torch.channels_last)
