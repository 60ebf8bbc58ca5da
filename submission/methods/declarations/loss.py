"""The loss's declarations, label smoothing and the loss function (their code: methods/loss.py)."""
from dataclasses import dataclass
from typing import Literal

from ...setting_declaration import BELOW_1, RECIPE, declare
from ..method import Method

LossFunction = Literal["bce", "cross_entropy"]


@dataclass(frozen=True, kw_only=True)
class LossSettings:
    label_smoothing: float = declare("label smoothing of the targets", admits=BELOW_1, kind=RECIPE)
    loss: LossFunction = declare("bce (sum over classes / batch) or cross_entropy", kind=RECIPE)


LABEL_SMOOTHING = Method("label_smoothing", 0.0, lambda c: f"label smoothing {c.label_smoothing:g}",
                         settings=LossSettings)
LOSS = Method("loss", "cross_entropy", None, without="cross-entropy instead of BCE", settings=LossSettings)
