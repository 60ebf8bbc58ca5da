"""RandAugment's declaration (its code: methods/randaugment.py, methods/randaugment_batch.py)."""
from dataclasses import dataclass
from typing import Literal, Protocol

from ...loader_kinds import TrainLoader, augmenting_words, kind_of
from ...setting_declaration import AT_LEAST_0, RECIPE, Range, declare
from ..method import Method

RandAugmentSet = Literal["all", "safe", "original"]


@dataclass(frozen=True, kw_only=True)
class RandAugmentSettings:
    randaugment_depth: int = declare("RandAugment: operations per image; 0: no RandAugment",
                                     admits=AT_LEAST_0, kind=RECIPE)
    randaugment_severity: int = declare("RandAugment: magnitude, 0-10", admits=Range(0, 10), kind=RECIPE)
    randaugment_set: RandAugmentSet = declare("RandAugment: augmentation set (all, safe, original)", kind=RECIPE)


class _Reads(Protocol):
    """The settings _problem reads of a configuration (config.Config, which imports this module)."""
    @property
    def train_loader(self) -> TrainLoader: ...

    @property
    def randaugment_depth(self) -> int: ...


def _problem(c: _Reads) -> str | None:
    # it works on each image: in the torchvision loader's worker processes (PIL), or on the
    # device loader's batches (randaugment_batch.py); FFCV's compiled pipeline runs neither
    if kind_of(c.train_loader).augments_each_image:
        return None
    return (f"randaugment_depth={c.randaugment_depth} needs train_loader={augmenting_words()}: "
            "RandAugment works on each image, in the loader's worker processes or on the device, "
            "which FFCV's compiled pipeline cannot do")


RANDAUGMENT = Method("randaugment_depth", 0,
                     lambda c: f"RandAugment ({c.randaugment_set}, depth {c.randaugment_depth}, "
                               f"severity {c.randaugment_severity})",
                     settings=RandAugmentSettings, problem=_problem)
