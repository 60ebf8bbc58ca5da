"""SAM's declaration (its code: methods/sam.py)."""
from dataclasses import dataclass

from ...setting_declaration import ABOVE_0, AT_LEAST_0, RECIPE, RECORDED, declare
from ..method import Method


@dataclass(frozen=True, kw_only=True)
class SAMSettings:
    sam_interval: int = declare("SAM: every Nth step is a two-pass SAM step; 0: no SAM",
                                admits=AT_LEAST_0, profile=RECORDED, kind=RECIPE)
    sam_rho: float = declare("SAM: radius of the ascent step", admits=AT_LEAST_0, kind=RECIPE)
    sam_epsilon: float = declare("SAM: added to the gradient norm of the ascent", admits=ABOVE_0, kind=RECIPE)


SAM = Method("sam_interval", 0, lambda c: f"SAM (rho {c.sam_rho:g}, every {c.sam_interval}th step)",
             without="without SAM", settings=SAMSettings)
