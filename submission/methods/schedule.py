"""Learning rate per optimiser step: linear warmup from 0, then cosine decay to a fraction of
the peak (Composer's CosineAnnealingWithWarmupScheduler: alpha_f + (1 - alpha_f) x cosine)."""
from __future__ import annotations

import math


def lr_at(step: int, total_steps: int, warmup_steps: int, peak_lr: float, final_fraction: float) -> float:
    if step < warmup_steps:
        return peak_lr * step / warmup_steps
    progress = (step - warmup_steps) / max(total_steps - warmup_steps, 1)
    cosine = 0.5 * (1.0 + math.cos(math.pi * min(progress, 1.0)))
    return peak_lr * (final_fraction + (1.0 - final_fraction) * cosine)
