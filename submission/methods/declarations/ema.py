"""EMA's declaration (its code: methods/ema.py)."""
from dataclasses import dataclass

from ...setting_declaration import AT_LEAST_0, AT_LEAST_1, RECIPE, declare
from ..method import Method


@dataclass(frozen=True, kw_only=True)
class EMASettings:
    ema_half_life_batches: float = declare("EMA half-life in batches; 0: no EMA", admits=AT_LEAST_0, kind=RECIPE)
    ema_update_every_batches: int = declare("EMA update cadence in batches", admits=AT_LEAST_1, kind=RECIPE)


def smoothing_per_update(half_life_batches: float, update_every_batches: int) -> float:
    """What each update keeps of the average (0.5 ** (U / H)): 0.8706 for Mild's H=100, U=20."""
    return 0.5 ** (update_every_batches / half_life_batches)


EMA = Method("ema_half_life_batches", 0.0, lambda c: f"EMA (half-life {c.ema_half_life_batches:g} steps)",
             settings=EMASettings)
