"""How one setting is declared: its kind, what it means, the values it admits, whether a bench
profile records it. submission/settings.py declares the harness's settings with it, and each
method module under submission/methods/ its own (collected without importing torch).

  recipe       a value of the published recipe: it lives in submission/recipes/*.yaml (each
               line citing its source), not in code; every recipe file defines every one.
  harness      a harness default that changes what a run computes (batch, data, devices):
               a campaign resumed with another value is refused.
  operational  a harness default that leaves what a run computes alone (paths, price, loader
               threads, the warm-up): it may change when a campaign resumes.
"""
import dataclasses
from dataclasses import dataclass
from typing import Any

RECIPE, HARNESS, OPERATIONAL = "recipe", "harness", "operational"
KINDS = (RECIPE, HARNESS, OPERATIONAL)
# A bench profile records the settings marked RECORDED or COMPARED; `project` warns when the
# projected run's value of a COMPARED one differs from the profile's (the step's rate depends on it).
RECORDED, COMPARED = "recorded", "compared"


@dataclass(frozen=True)
class Range:
    """The numbers a setting admits: low and/or high, each end closed unless marked open."""
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False

    def admits(self, value: float) -> bool:
        return ((self.low is None or (value > self.low if self.low_open else value >= self.low))
                and (self.high is None or (value < self.high if self.high_open else value <= self.high)))

    def __str__(self) -> str:
        def number(value: float) -> str:
            return str(int(value)) if float(value).is_integer() else f"{value:g}"
        if self.high is None:
            return f"{'above' if self.low_open else 'at least'} {number(self.low)}"
        return (f"in {'(' if self.low_open else '['}{number(self.low)}, "
                f"{number(self.high)}{')' if self.high_open else ']'}")


AT_LEAST_0, AT_LEAST_1, ABOVE_0 = Range(0), Range(1), Range(0, low_open=True)
FRACTION, BELOW_1 = Range(0, 1), Range(0, 1, high_open=True)
# Seeds reach numpy's and FFCV's generators, which take unsigned 32-bit seeds.
SEED_RANGE = Range(0, 2**32, high_open=True)


def setting(kind: str, meaning: str, default: Any = dataclasses.MISSING, *,
            admits: Range | tuple[str, ...] | None = None, also: tuple[str, ...] = (),
            profile: str = "", type: type | None = None) -> Any:
    """One setting's declaration: a dataclass field of `Settings` with its facts as metadata.
    admits: a Range for numbers, or the words a text setting takes; also: words accepted where
    the setting is given that config.resolve turns into one of `admits` (dataset=auto);
    type: the value's type where no annotation gives it (a method module's settings)."""
    if kind == RECIPE and default is not dataclasses.MISSING:
        raise ValueError("a recipe setting's value lives in the recipe files, not here")
    return dataclasses.field(default=default, metadata={
        "kind": kind, "meaning": meaning, "admits": admits, "also": also, "profile": profile,
        "type": type})
