"""BlurPool's declaration (its code: methods/blurpool.py)."""
from dataclasses import dataclass

from ...setting_declaration import RECIPE, declare
from ..method import Method


@dataclass(frozen=True, kw_only=True)
class BlurPoolSettings:
    blurpool: bool = declare("anti-aliased stride-2 convs and stem max-pool", kind=RECIPE)


BLURPOOL = Method("blurpool", False, lambda c: "BlurPool", without="without BlurPool", settings=BlurPoolSettings)
