"""Exponential moving average of a model's weights and BatchNorm statistics.

The average is kept in a separate copy of the model, which is what evaluation uses.
With a half-life of H batches and an update every U batches, each update keeps
0.5 ** (U / H) of the average (Mild: H=100, U=20, so 0.8706).
"""
from __future__ import annotations

import copy

import torch
from torch import nn

from .declarations.ema import smoothing_per_update

__all__ = ["EMA", "smoothing_per_update"]


class EMA:
    def __init__(self, model: nn.Module, half_life_batches: float, update_every_batches: int):
        self.model = copy.deepcopy(model).eval()
        for p in self.model.parameters():
            p.requires_grad_(False)
        self.every = update_every_batches
        self.smoothing = smoothing_per_update(half_life_batches, update_every_batches)

    @torch.no_grad()
    def update(self, model: nn.Module, step: int) -> bool:
        """Call after every optimiser step (step counts from 1); averages every `every` steps."""
        if step % self.every:
            return False
        averaged = list(self.model.parameters()) + list(self.model.buffers())
        current = list(model.parameters()) + list(model.buffers())
        floats = [(a, c) for a, c in zip(averaged, current) if a.is_floating_point()]
        torch._foreach_lerp_([a for a, _ in floats], [c for _, c in floats], 1.0 - self.smoothing)
        for a, c in zip(averaged, current):
            if not a.is_floating_point():        # BN num_batches_tracked: copy
                a.copy_(c)
        return True
