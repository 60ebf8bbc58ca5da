"""SGDW's declaration (its code: methods/sgdw.py)."""
from dataclasses import dataclass
from typing import Literal

from ...setting_declaration import RECIPE, declare
from ..method import Method

Optimizer = Literal["sgdw"]


@dataclass(frozen=True, kw_only=True)
class SGDWSettings:
    optimizer: Optimizer = declare("sgdw: SGD with decoupled weight decay", kind=RECIPE)


# the only optimizer setting is sgdw: the plain loop's torch.optim.SGD is built in code
SGDW = Method("optimizer", None, None, without="torch.optim.SGD instead of DecoupledSGDW", swapped_in_code=True,
              settings=SGDWSettings)
