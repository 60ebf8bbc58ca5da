"""EMA's declaration (its code: methods/ema.py)."""
from dataclasses import dataclass

from ...setting_declaration import AT_LEAST_0, AT_LEAST_1, RECIPE, declare
from ..method import Method


@dataclass(frozen=True, kw_only=True)
class EMASettings:
    ema_half_life_batches: float = declare("EMA half-life in batches; 0: no EMA", admits=AT_LEAST_0, kind=RECIPE)
    ema_update_every_batches: int = declare("EMA update cadence in batches", admits=AT_LEAST_1, kind=RECIPE)


EMA = Method("ema_half_life_batches", 0.0, lambda c: f"EMA (half-life {c.ema_half_life_batches:g} steps)",
             settings=EMASettings)
