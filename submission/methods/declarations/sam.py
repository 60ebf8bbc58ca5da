"""SAM's declaration (its code: methods/sam.py)."""
from dataclasses import dataclass

from ...setting_declaration import ABOVE_0, AT_LEAST_0, RECIPE, RECORDED, setting
from ..method import Method


@dataclass(frozen=True, kw_only=True)
class SAMSettings:
    sam_interval: int = setting(RECIPE, "SAM: every Nth step is a two-pass SAM step; 0: no SAM",
                                admits=AT_LEAST_0, profile=RECORDED)
    sam_rho: float = setting(RECIPE, "SAM: radius of the ascent step", admits=AT_LEAST_0)
    sam_epsilon: float = setting(RECIPE, "SAM: added to the gradient norm of the ascent", admits=ABOVE_0)


SAM = Method("sam_interval", 0, lambda c: f"SAM (rho {c.sam_rho:g}, every {c.sam_interval}th step)",
             without="without SAM", settings=SAMSettings)
