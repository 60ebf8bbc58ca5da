"""Stochastic depth's declaration (its code: methods/stochastic_depth.py)."""
from dataclasses import dataclass

from ...setting_declaration import BELOW_1, RECIPE, setting
from ..method import Method

METHODS = ("sample", "block")
DISTRIBUTIONS = ("linear", "uniform")


@dataclass(frozen=True, kw_only=True)
class StochasticDepthSettings:
    stochastic_depth_rate: float = setting(RECIPE, "stochastic depth: drop rate of the last residual block; "
                                                   "0: none", admits=BELOW_1)
    stochastic_depth_method: str = setting(RECIPE, "stochastic depth: sample (per image) or block (per batch)",
                                           admits=METHODS)
    stochastic_depth_distribution: str = setting(RECIPE, "stochastic depth: rates linear in depth, or uniform",
                                                 admits=DISTRIBUTIONS)


STOCHASTIC_DEPTH = Method("stochastic_depth_rate", 0.0,
                          lambda c: f"stochastic depth ({c.stochastic_depth_method}, "
                                    f"{c.stochastic_depth_distribution} to {c.stochastic_depth_rate:g})",
                          without="without stochastic depth", settings=StochasticDepthSettings)
