"""ColOut's declaration (its code: methods/colout.py)."""
from dataclasses import dataclass

from ...setting_declaration import BELOW_1, RECIPE, declare
from ..method import Method


@dataclass(frozen=True, kw_only=True)
class ColOutSettings:
    colout_fraction: float = declare("ColOut: share of rows and of columns dropped from each batch; "
                                     "0: none", admits=BELOW_1, kind=RECIPE)


COLOUT = Method("colout_fraction", 0.0, lambda c: f"ColOut ({c.colout_fraction:g} of rows and columns)",
                without="without ColOut", settings=ColOutSettings)
