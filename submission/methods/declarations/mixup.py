"""MixUp's declaration (its code: methods/mixup.py)."""
from dataclasses import dataclass

from ...setting_declaration import AT_LEAST_0, RECIPE, declare
from ..method import Method


@dataclass(frozen=True, kw_only=True)
class MixUpSettings:
    mixup_alpha: float = declare("MixUp: mixing weight min(z, 1-z), z ~ Beta(alpha, alpha); "
                                 "0: no MixUp", admits=AT_LEAST_0, kind=RECIPE)


MIXUP = Method("mixup_alpha", 0.0, lambda c: f"MixUp (alpha {c.mixup_alpha:g})", without="without MixUp",
               settings=MixUpSettings)
