"""TrivialAugment's declaration (its code: methods/trivialaugment.py, methods/trivialaugment_batch.py)."""
from dataclasses import dataclass
from typing import Literal, Protocol

from ...loader_kinds import TrainLoader, augmenting_words, kind_of
from ...setting_declaration import RECIPE, declare
from ..method import Method

TrivialAugmentSpace = Literal["none", "wide", "composer"]


@dataclass(frozen=True, kw_only=True)
class TrivialAugmentSettings:
    trivialaugment: TrivialAugmentSpace = declare("TrivialAugment: one operation per image at a magnitude drawn "
                                                  "over its whole range; wide: torchvision's TrivialAugmentWide, "
                                                  "composer: RandAugment's operations and draws at severity 10; "
                                                  "none: off", kind=RECIPE)


class _Reads(Protocol):
    """The settings _problem reads of a configuration (config.Config, which imports this module)."""
    @property
    def train_loader(self) -> TrainLoader: ...

    @property
    def randaugment_depth(self) -> int: ...

    @property
    def trivialaugment(self) -> TrivialAugmentSpace: ...


def _problem(c: _Reads) -> str | None:
    # it augments each image as RandAugment does, in the same places; one or the other
    if c.randaugment_depth:
        return (f"trivialaugment={c.trivialaugment} with randaugment_depth={c.randaugment_depth}: "
                "TrivialAugment replaces RandAugment (one operation per image); set randaugment_depth=0")
    if kind_of(c.train_loader).augments_each_image:
        return None
    return (f"trivialaugment={c.trivialaugment} needs train_loader={augmenting_words()}: it works on "
            "each image, in the loader's worker processes or on the device, which FFCV's compiled "
            "pipeline cannot do")


TRIVIALAUGMENT = Method("trivialaugment", "none", lambda c: f"TrivialAugment ({c.trivialaugment})",
                        settings=TrivialAugmentSettings, problem=_problem)
