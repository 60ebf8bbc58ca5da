"""ColOut, batch-wise, as Composer v0.8.0 (composer/algorithms/colout/colout.py).

With `batch: true` (the Hot recipe) ColOut runs on the device batch (Event.AFTER_DATALOADER)
and removes the same rows and columns from every image of the batch: it keeps
int((1 - p_row) * H) rows and int((1 - p_col) * W) columns (floor), chosen as the first
entries of a torch.randperm of each axis, in increasing order. Nothing is resized back:
the batch simply gets smaller (176 -> 167 with p = 0.05), which also saves compute.
The targets are class labels, so `resize_target: auto` leaves them alone (it crops
targets only when they have the images' spatial size, e.g. segmentation masks).
Hot: p_row 0.05, p_col 0.05 (the algorithm's defaults are 0.15).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:        # the run plan reads kept_size without torch (run_plan.py)
    import torch


def kept_size(size: int, drop_fraction: float) -> int:
    """Rows (or columns) left of `size` once ColOut drops `drop_fraction` of them."""
    return int((1.0 - drop_fraction) * size)


def kept_indices(size: int, drop_fraction: float,
                 generator: torch.Generator | None = None) -> torch.Tensor:
    """The sorted indices kept along an axis of `size`: int((1 - p) * size) of them."""
    import torch
    if not 0.0 <= drop_fraction <= 1.0:
        raise ValueError(f"drop fraction must be in [0, 1], got {drop_fraction}")
    return torch.randperm(size, generator=generator)[:kept_size(size, drop_fraction)].sort().values


def colout_batch(images: torch.Tensor, p_row: float = 0.05, p_col: float = 0.05,
                 generator: torch.Generator | None = None) -> torch.Tensor:
    """`images` (..., H, W) without the same random p_row of rows and p_col of columns
    in every image (rows drawn first, then columns, on the CPU generator)."""
    rows = kept_indices(images.shape[-2], p_row, generator).to(images.device)
    cols = kept_indices(images.shape[-1], p_col, generator).to(images.device)
    return images.index_select(-2, rows).index_select(-1, cols)
