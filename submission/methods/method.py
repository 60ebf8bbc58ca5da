"""What the harness knows of a method besides its code: its settings class, the setting that
turns it on, the value that turns it off (the plain loop's), how a configuration's use of it is
named, and what its settings cannot do with others.

Each method's record and settings class are declared in its torch-free module under
submission/methods/declarations/; methods/__init__.py lists the records (`ALL`) and settings.py
the settings classes, read by config (the methods' names and problems), the `settings` verb and
`bench compare=methods` without torch: a new method is its module, its declaration, its recipe
lines, the one call where it acts (step.py or the loader) and its test (docs/layout.md).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Method:
    setting: str                        # the setting that turns it on
    off: Any                            # that setting's value without the method
    named: Callable[[Any], str] | None  # the words for a configuration that uses it; None: not named
    without: str = ""                   # bench compare=methods: the row of the step without it
    swapped_in_code: bool = False       # the step without it is built in code, not by the setting
    settings: type | None = None        # the class declaring its own settings (settings.Settings lists it)
    # what a configuration that uses it cannot do with its other settings (None: nothing)
    problem: Callable[[Any], str | None] | None = None

    # a configuration is a config.Config, which imports the methods: any object with the settings read
    def on(self, config: object) -> bool:
        return getattr(config, self.setting) != self.off

    def problem_of(self, config: object) -> str | None:
        return self.problem(config) if self.problem and self.on(config) else None
