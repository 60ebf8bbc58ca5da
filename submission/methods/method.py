"""What the harness knows of a method besides its code: the setting that turns it on, the
value that turns it off (the plain loop's), and how a configuration's use of it is named.

Each method module declares its own (`DECLARATIONS`); `submission.methods.ALL` collects them in
the order the logs name them. `Config.methods` (the MLPerf log's recipe event, the system
description's notes, `settings`) and `bench compare=methods` read that table and nothing
else: a new method is its module, its settings and recipe lines, the one call where it acts
(step.py or the loader), and its test (docs/layout.md).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable


@dataclass(frozen=True)
class Method:
    setting: str                        # the setting that turns it on
    off: Any                            # that setting's value without the method
    named: Callable[[Any], str] | None  # the words for a configuration that uses it; None: not named
    without: str = ""                   # bench compare=methods: the row of the step without it
    swapped_in_code: bool = False       # the step without it is built in code, not by the setting

    def on(self, config) -> bool:
        return config.settings[self.setting] != self.off
