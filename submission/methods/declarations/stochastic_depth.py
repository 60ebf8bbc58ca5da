"""Stochastic depth's declaration (its code: methods/stochastic_depth.py)."""
from dataclasses import dataclass
from typing import Literal

from ...setting_declaration import BELOW_1, RECIPE, declare
from ..method import Method

StochasticDepthMethod = Literal["sample", "block"]
StochasticDepthDistribution = Literal["linear", "uniform"]


@dataclass(frozen=True, kw_only=True)
class StochasticDepthSettings:
    stochastic_depth_rate: float = declare("stochastic depth: drop rate of the last residual block; "
                                           "0: none", admits=BELOW_1, kind=RECIPE)
    stochastic_depth_method: StochasticDepthMethod = declare("stochastic depth: sample (per image) or block "
                                                             "(per batch)", kind=RECIPE)
    stochastic_depth_distribution: StochasticDepthDistribution = declare("stochastic depth: rates linear in "
                                                                         "depth, or uniform", kind=RECIPE)


STOCHASTIC_DEPTH = Method("stochastic_depth_rate", 0.0,
                          lambda c: f"stochastic depth ({c.stochastic_depth_method}, "
                                    f"{c.stochastic_depth_distribution} to {c.stochastic_depth_rate:g})",
                          without="without stochastic depth", settings=StochasticDepthSettings)
