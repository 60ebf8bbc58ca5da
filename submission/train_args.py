"""The worker's command line: what a campaign and a tradeoff hand torchrun to start
`python -m submission.train`, as one type that writes it (`to_argv`) and reads it (`parse`).

    --config C --data D [--run-index I --runs N --seed S] [--label L] [--remaining R]
    [--progress FILE] [--track JSON] [--finish] [--follow --state FILE] [--result FILE]
    [--cache-cleared true|false] [--save-weights FOLDER]

Each argument is declared as a setting is (`declare`, setting_declaration.py), its type its
annotation, its text written and read by its Declaration (`text`, `read`). One without a default
must be given; a bool that cannot be None is a switch. A field left at None (False for a
switch) is not on the command line, and `parse` reads an absent option back as None: what was
written is what is read. The worker takes an absent number as run 0 of 1, seed 0, no run after
it, the page cache not cleared (`RunSpec`).
"""
from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from dataclasses import MISSING, dataclass
from pathlib import Path

from .setting_declaration import Declaration, declarations, declare
from .tracking import Target


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _is_switch(declared: Declaration) -> bool:
    return declared.type is bool and not declared.optional


@dataclass(frozen=True)
class TrainArgs:
    """One torchrun job's worker arguments, in the order they are written."""
    config: Path = declare("resolved configuration (JSON)")
    data: Path = declare("prepared data description (JSON)")
    run_index: int | None = declare("the run's index in its campaign (0-based)", None)
    runs: int | None = declare("runs in the campaign (for labels)", None)
    seed: int | None = declare("the run's seed", None)
    label: str | None = declare("what the run's lines start with (default: [run I/N seed S])", None)
    remaining: int | None = declare("runs left after this one", None)
    progress: Path | None = declare("rank 0 writes machine-readable progress (JSON lines) here", None)
    track: Target | None = declare("where rank 0's trackers write (submission.tracking.Target, as JSON)", None)
    finish: bool = declare("tell followers the campaign is over", False)
    follow: bool = declare("node > 0: take the run from rank 0", False)
    state: Path | None = declare("follower: where to record runs remaining", None)
    result: Path | None = declare("final result file path (rank 0)", None)
    cache_cleared: bool | None = declare("whether the page cache was cleared before the run", None)
    save_weights: Path | None = declare("folder: each rank saves its final weights", None)

    def to_argv(self, shown: Mapping[str, str] | None = None) -> list[str]:
        """The command line; `shown` writes a field's value as given text instead (a dry run's
        "<seed>", a seed not drawn yet)."""
        shown = shown or {}
        argv: list[str] = []
        for name, declared in declarations(type(self)).items():
            value = getattr(self, name)
            if _is_switch(declared):
                argv += [_flag(name)] if value else []
            elif name in shown:
                argv += [_flag(name), shown[name]]
            elif value is not None:
                argv += [_flag(name), declared.text(value)]
        return argv

    @classmethod
    def parse(cls, argv: Sequence[str] | None, description: str = "") -> TrainArgs:
        """The worker's arguments from its command line (sys.argv's when None); --help says
        what each one means."""
        parser = argparse.ArgumentParser(prog="python -m submission.train", description=description,
                                         formatter_class=argparse.RawDescriptionHelpFormatter)
        for name, declared in declarations(cls).items():
            if _is_switch(declared):
                parser.add_argument(_flag(name), dest=name, action="store_true", help=declared.meaning)
            else:
                parser.add_argument(_flag(name), dest=name, type=declared.read, help=declared.meaning,
                                    required=declared.default is MISSING)
        return cls(**vars(parser.parse_args(argv)))
