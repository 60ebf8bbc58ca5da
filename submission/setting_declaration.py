"""How a value is declared, the one form for the settings, each command's options, the bench
profile's figures and the worker's command line: a field of a frozen dataclass, its annotation
its type, `declare(...)` the rest (what it means, its default, what it admits):

    batch_per_device: int = declare("batch per process", 256, kind=HARNESS, admits=AT_LEAST_1)
    precision: Precision = declare("amp (autocast) or fp32", kind=RECIPE)    # Precision = Literal["amp", "fp32"]

`declarations(cls)` reads each field back as a `Declaration` typed from its annotation: `X |
None` may be None, a `Literal` admits its words (typing.get_args: the words are written once,
where mypy reads them too), a dataclass of declared values is a part (a JSON object) and
`dict[int, X]` a part per side. `Declaration.read` turns a text (or a YAML or JSON value) into
a value of that type: the one parser of the command line, the recipes, the grids and the
worker's arguments.
submission/settings.py declares the harness's settings with it (each method its own, in
submission/methods/declarations/), submission/options.py each command's options,
submission/bench_profile.py the profile's figures, submission/train_args.py the worker's
arguments; none of them imports torch.

A setting also has a kind:
  recipe       a value of the published recipe: it lives in submission/recipes/*.yaml (each
               line citing its source), not in code; every recipe file defines every one.
  harness      a harness default that changes what a run computes (batch, data, devices):
               a campaign resumed with another value is refused.
  operational  a harness default that leaves what a run computes alone (paths, price, loader
               threads, the warm-up): it may change when a campaign resumes.
"""
from __future__ import annotations

import builtins
import dataclasses
import math
import typing
from collections.abc import Callable
from dataclasses import MISSING, dataclass
from typing import Any, Literal, get_args, get_origin

RECIPE, HARNESS, OPERATIONAL = "recipe", "harness", "operational"
KINDS = (RECIPE, HARNESS, OPERATIONAL)
HOST = "host"       # what a setting's value names (declare's `names=`): a machine
# A bench profile records the settings marked RECORDED or COMPARED; `project` warns when the
# projected run's value of a COMPARED one differs from the profile's (the step's rate depends on it).
RECORDED, COMPARED = "recorded", "compared"
# the word of a comma list (many=True) that names no item; it goes with no other
NONE = "none"
DECLARATION = "declaration"        # the key of a declared field's metadata


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

# what a value admits: a Range, the words a text takes (a Literal's, or a function's looked up
# when asked), or None (any value of its type)
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
    """One declared value, as `declarations` reads it from its field. type: bool, int, float,
    str, dict (a JSON object), or a type read from its text (Path, or one with `from_text`);
    admits: what it admits (Admits); many: a text of comma-separated words, each one admitted
    (`none` alone: no word); optional: None is a value too; part, sides: the dataclass of a
    part, or of each side's part (profile figures)."""
    meaning: str = ""
    # MISSING: none, the value must be given (a recipe setting's is in the recipe files)
    default: Any = dataclasses.field(default_factory=lambda: MISSING)
    type: type = str
    admits: Admits = None
    many: bool = False
    optional: bool = False
    part: builtins.type | None = None
    sides: builtins.type | None = None
    # a setting's: its kind, the words resolve turns into an admitted one (dataset=auto), its
    # mark in a bench profile
    kind: str = ""
    also: tuple[str, ...] = ()
    profile: str = ""
    # a command option's: the --flag(s) of earlier versions, read with a notice
    flag: str | tuple[str, ...] = ""
    # a setting that names a machine (HOST): redacted where records leave it (redaction.py)
    names: str = ""

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


def _is_part(annotation: Any) -> bool:
    """Whether `annotation` is a dataclass of declared values (a part: a JSON object)."""
    return (isinstance(annotation, type) and dataclasses.is_dataclass(annotation)
            and any(DECLARATION in field.metadata for field in dataclasses.fields(annotation)))


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


def declare(meaning: str = "", default: Any = MISSING, *, admits: Admits | object = None, many: bool = False,
            kind: str = "", also: tuple[str, ...] = (), profile: str = "",
            flag: str | tuple[str, ...] = "", names: str = "") -> Any:
    """One declared value: a dataclass field (its annotation is its type), what it means, its
    default (none: it must be given), what it admits (a Range, a Literal type of the words of
    a comma list, a function giving words); a setting's kind (and `also`, `profile`, and
    `names=HOST` for one that names a machine), a command option's earlier --flag(s). `declarations` reads it back."""
    if kind and kind not in KINDS:
        raise ValueError(f"a setting's kind is one of {', '.join(KINDS)}, not {kind!r}")
    if kind == RECIPE and default is not MISSING:
        raise ValueError("a recipe setting's value lives in the recipe files, not here")
    words = get_args(admits) if get_origin(admits) is Literal else admits
    declaration = Declaration(meaning, default, admits=typing.cast(Admits, words), many=many, kind=kind,
                              also=also, profile=profile, flag=flag, names=names)
    return dataclasses.field(default=default, metadata={DECLARATION: declaration})


_READ: dict[type, dict[str, Declaration]] = {}      # each class's, read once


def declarations(cls: type) -> dict[str, Declaration]:
    """Each declared field of the dataclass `cls`, in order, with its Declaration typed from
    its annotation (fields not made by `declare` are left out)."""
    if cls not in _READ:
        hints = typing.get_type_hints(cls)
        _READ[cls] = {field.name: _typed(field.metadata[DECLARATION], hints[field.name], field.name)
                      for field in dataclasses.fields(cls) if DECLARATION in field.metadata}
    return _READ[cls]


def _typed(declared: Declaration, annotation: Any, name: str) -> Declaration:
    """`declared` with what its annotation says: its type, whether None is a value, the words of
    a Literal, the dataclass of a part or of each side's part."""
    among = get_args(annotation)
    optional = type(None) in among and get_origin(annotation) is not Literal
    if optional:
        (annotation,) = [each for each in among if each is not type(None)]
    admits, part, sides = declared.admits, None, None
    kind: type
    if get_origin(annotation) is Literal:
        if admits is not None:
            raise TypeError(f"{name}: a Literal admits its own words; give no admits= beside it")
        admits, kind = get_args(annotation), str
    elif get_origin(annotation) is dict:
        kind, held = dict, get_args(annotation)[1]
        sides = held if _is_part(held) else None
    elif _is_part(annotation):
        kind, part = dict, annotation
    else:
        kind = annotation
    return dataclasses.replace(declared, type=kind, optional=optional, admits=admits, part=part, sides=sides)
