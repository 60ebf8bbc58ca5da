"""BlurPool's declaration (its code: methods/blurpool.py)."""
from dataclasses import dataclass

from ...setting_declaration import RECIPE, setting
from ..method import Method


@dataclass(frozen=True, kw_only=True)
class BlurPoolSettings:
    blurpool: bool = setting(RECIPE, "anti-aliased stride-2 convs and stem max-pool")


BLURPOOL = Method("blurpool", False, lambda c: "BlurPool", without="without BlurPool", settings=BlurPoolSettings)
