"""How one value is declared, for a setting, a command option or a bench profile figure:
its type, what it means, its default, the values it admits, and whether it is a comma list
(`many`). submission/settings.py declares the harness's settings with it (and each method its
own, in submission/methods/declarations/), submission/options.py each command's options, and
submission/bench_profile.py each profile figure; none of them imports torch.

A setting also has a kind:
  recipe       a value of the published recipe: it lives in submission/recipes/*.yaml (each
               line citing its source), not in code; every recipe file defines every one.
  harness      a harness default that changes what a run computes (batch, data, devices):
               a campaign resumed with another value is refused.
  operational  a harness default that leaves what a run computes alone (paths, price, loader
               threads, the warm-up): it may change when a campaign resumes.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import MISSING, dataclass
from typing import Any, Callable

RECIPE, HARNESS, OPERATIONAL = "recipe", "harness", "operational"
KINDS = (RECIPE, HARNESS, OPERATIONAL)
# A bench profile records the settings marked RECORDED or COMPARED; `project` warns when the
# projected run's value of a COMPARED one differs from the profile's (the step's rate depends on it).
RECORDED, COMPARED = "recorded", "compared"
# the word of a comma list (many=True) that names no item; it goes with no other
NONE = "none"


@dataclass(frozen=True)
class Range:
    """The numbers a value admits: low and/or high, each end closed unless marked open."""
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False

    def admits(self, value: float) -> bool:
        return ((self.low is None or (value > self.low if self.low_open else value >= self.low))
                and (self.high is None or (value < self.high if self.high_open else value <= self.high)))

    def __str__(self) -> str:
        assert self.low is not None, "every Range declared has a low end"
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

Admits = Range | tuple[str, ...] | Callable[[], tuple[str, ...]] | None
# what a value of each type is called where a wrong one is refused ("lr takes a number")
TYPE_WORDS: dict[type, str] = {bool: "true or false", int: "a whole number", float: "a number", str: "a text",
                               dict: "an object"}
BOOL_WORDS = {"true": True, "false": False}


class NotAValue(ValueError):
    """A text or value that is not of its declaration's type; the message says what the type
    takes ("a whole number")."""


@dataclass(frozen=True)
class Declaration:
    """One declared value. type: bool, int, float, str (or dict: a JSON object, a profile's
    part); admits: a Range for numbers, the words a text takes, or a function giving them
    (looked up when asked); many: a text of comma-separated words, each one admitted
    (`none` alone: no word); optional: None is a value too."""
    meaning: str
    default: Any = None              # MISSING: none (a recipe setting, whose value is in the recipes)
    type: type = str
    admits: Admits = None
    many: bool = False
    optional: bool = False
    # a setting's: its kind, the words resolve turns into an admitted one (dataset=auto), its
    # mark in a bench profile
    kind: str = ""
    also: tuple[str, ...] = ()
    profile: str = ""
    # a command option's: the --flag(s) of earlier versions, read with a notice
    flag: str | tuple[str, ...] = ""

    def choices(self) -> Range | tuple[str, ...] | None:
        return self.admits() if callable(self.admits) else self.admits

    def is_a(self, value: Any) -> bool:
        """Whether `value` (a JSON or Python value) is of the declared type (None where optional)."""
        if value is None:
            return self.optional
        if self.type is bool:
            return isinstance(value, bool)
        if self.type is int:
            return isinstance(value, int) and not isinstance(value, bool)
        if self.type is float:
            return (isinstance(value, (int, float)) and not isinstance(value, bool)
                    and math.isfinite(value))
        return isinstance(value, self.type)

    def read(self, raw: Any) -> Any:
        """`raw`, a text (the command line's) or a YAML or JSON value, as a value of the declared
        type: `none` (or None) is None where optional; NotAValue when it is none of its type.
        Whether the value is admitted is `problem`'s question."""
        if self.optional and (raw is None or (isinstance(raw, str) and raw.strip().lower() == NONE)):
            return None
        if self.type is str:
            return "" if raw is None else str(raw)
        value = _from_text(self.type, raw) if isinstance(raw, str) else raw
        if not self.is_a(value):
            raise NotAValue(TYPE_WORDS.get(self.type, f"a {self.type.__name__}"))
        return float(value) if self.type is float else value

    def text(self, value: Any) -> str:
        """`value` as the text `read` takes back."""
        if value is None:
            return NONE
        if isinstance(value, bool):
            return "true" if value else "false"
        to_text = getattr(value, "to_text", None)
        return to_text() if callable(to_text) else str(value)

    def what(self) -> str:
        """What a value of it is, in words: "a whole number above 0", "one of amp, fp32"."""
        allowed = self.choices()
        if isinstance(allowed, tuple) and allowed:
            return self.admits_text()
        words = TYPE_WORDS.get(self.type, "a value")
        if isinstance(allowed, Range):
            words += " above 0" if self.type is int and allowed == AT_LEAST_1 else f" {allowed}"
        return words

    def admitted(self, value: Any) -> bool:
        """Whether `value` is of the declared type and admitted (a profile figure's JSON value)."""
        return self.is_a(value) and self.problem(value) is None

    def words(self, value: Any) -> list[str]:
        """The words of a comma list (many=True), in order, once each; [] for none."""
        return [word for word in dict.fromkeys(_comma_words(value)) if word != NONE]

    def problem(self, value: Any) -> str | None:
        """Why `value` (of the declared type) is not admitted, in words, or None."""
        allowed = self.choices()
        if isinstance(allowed, Range):
            if value is not None and not allowed.admits(value):
                return f"must be {allowed}"
        elif allowed and self.many:
            words = _comma_words(value)
            unknown = [word for word in words if word not in allowed]
            if unknown:
                return f"must be one of {', '.join(c for c in allowed if c)}, or several joined by commas"
            if NONE in words and len(words) > 1:
                return f"must be {NONE} alone, or words without {NONE}"
        elif allowed and value not in allowed:
            return (f"must be one of {', '.join(c for c in allowed if c)}"
                    f"{' (or empty)' if '' in allowed else ''}")
        return None

    def admits_text(self) -> str:
        """What it admits, in words ("" when any value of its type)."""
        allowed = self.choices()
        if isinstance(allowed, Range):
            return str(allowed)
        if allowed:
            words = [word for word in allowed + self.also if word]
            return ("one of " + ", ".join(words) + (" (or empty)" if "" in allowed else "")
                    + (", or several joined by commas" if self.many else ""))
        return ""


def _from_text(kind: type, text: str) -> Any:
    """A text as a value of `kind` (bool, int, float, or a type with `from_text`, or one built
    from its text, as Path), or NotAValue saying what `kind` takes."""
    try:
        if kind is bool:
            return BOOL_WORDS[text.strip().lower()]
        from_text = getattr(kind, "from_text", None)
        return from_text(text) if callable(from_text) else kind(text)
    except (KeyError, ValueError, TypeError):
        raise NotAValue(TYPE_WORDS.get(kind, f"a {kind.__name__}")) from None


def _comma_words(value: Any) -> list[str]:
    """The words of a comma-separated text, lower case, as written (repeats and `none` kept)."""
    return [word.strip().lower() for word in str(value).split(",") if word.strip()]


def setting(kind: str, meaning: str, default: Any = MISSING, *, admits: Admits = None,
            also: tuple[str, ...] = (), profile: str = "", many: bool = False) -> Any:
    """One setting: a field of a settings class (its type is the field's annotation), its
    declaration in the field's metadata (settings.py reads it)."""
    if kind not in KINDS:
        raise ValueError(f"a setting's kind is one of {', '.join(KINDS)}, not {kind!r}")
    if kind == RECIPE and default is not MISSING:
        raise ValueError("a recipe setting's value lives in the recipe files, not here")
    declaration = Declaration(meaning, default, kind=kind, admits=admits, also=also, profile=profile,
                              many=many)
    return dataclasses.field(default=default, metadata={"declaration": declaration})


def declaration_of(field: dataclasses.Field) -> Declaration:
    """A settings field's declaration."""
    return field.metadata["declaration"]
