"""What the harness knows of a method besides its code: its own settings, the setting that turns
it on, the value that turns it off (the plain loop's), how a configuration's use of it is named,
and what its settings cannot do with others.

Each method module declares its own (`DECLARATIONS`); submission/methods/__init__.py collects
them, without importing the modules' torch code, into the table that settings.py (the methods'
settings), config (their names and problems), the `settings` verb and `bench compare=methods`
read: a new method is its module, its recipe lines, the one call where it acts (step.py or the
loader) and its test (docs/layout.md).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable


@dataclass(frozen=True)
class Method:
    setting: str                        # the setting that turns it on
    off: Any                            # that setting's value without the method
    named: Callable[[Any], str] | None  # the words for a configuration that uses it; None: not named
    without: str = ""                   # bench compare=methods: the row of the step without it
    swapped_in_code: bool = False       # the step without it is built in code, not by the setting
    # its own settings, name -> setting_declaration.setting(..., type=...): settings.py adds them
    settings: dict[str, Any] = field(default_factory=dict)
    # what a configuration that uses it cannot do with its other settings (None: nothing)
    problem: Callable[[Any], str | None] | None = None

    def on(self, config) -> bool:
        return config.settings[self.setting] != self.off

    def problem_of(self, config) -> str | None:
        return self.problem(config) if self.problem and self.on(config) else None
