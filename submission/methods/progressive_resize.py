"""Progressive resizing: train on downscaled batches early, full size at the end.

Scale `initial` until `start` of training, a linear ramp to 1.0 at `finish`, then 1.0
(Mild: 0.5 for the first 40%, ramp to 1.0 by 80%). The batch is resized on its
device; the side is rounded to a multiple of `multiple` (4).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F


def resize_scale(progress: float, initial: float, start: float, finish: float) -> float:
    if progress <= start:
        return initial
    if progress >= finish:
        return 1.0
    return initial + (1.0 - initial) * (progress - start) / (finish - start)


def scaled_side(side: int, scale: float, multiple: int) -> int:
    return max(multiple, int(round(side * scale / multiple)) * multiple)


def resize_batch(images: torch.Tensor, scale: float, multiple: int) -> torch.Tensor:
    side = scaled_side(images.shape[-1], scale, multiple)
    if side == images.shape[-1]:
        return images
    resized = F.interpolate(images, size=(side, side), mode="bilinear", align_corners=False,
                            antialias=True)
    return resized.contiguous(memory_format=torch.channels_last)
