"""The worker's command line: what a campaign and a tradeoff hand torchrun to start
`python -m submission.train`, as one type that writes it (`to_argv`) and reads it (`parse`).

    --config C --data D [--run-index I --runs N --seed S] [--label L] [--remaining R]
    [--progress FILE] [--track JSON] [--finish] [--follow --state FILE] [--result FILE]
    [--cache-cleared 0|1] [--save-weights FOLDER]

A field left at None (False for a switch) is not on the command line, and `parse` reads an
absent option back as None: what was written is what is read. The worker takes an absent
number as run 0 of 1, seed 0, no run after it, the page cache not cleared (`RunSpec`).
"""
from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from .tracking import Target


def _option(meaning: str, read: Callable[[str], Any] = str, metavar: str | None = None,
            required: bool = False) -> Any:
    """A field of the command line: its meaning (--help), how its text is read, its name there;
    a field not required is None when the command line leaves it out."""
    metadata = {"help": meaning, "read": read, "metavar": metavar, "required": required}
    return field(metadata=metadata) if required else field(default=None, metadata=metadata)


def _switch(meaning: str) -> Any:
    return field(default=False, metadata={"help": meaning, "switch": True})


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


@dataclass(frozen=True)
class TrainArgs:
    """One torchrun job's worker arguments, in the order they are written."""
    config: Path = _option("resolved configuration (JSON)", Path, required=True)
    data: Path = _option("prepared data description (JSON)", Path, required=True)
    run_index: int | None = _option("the run's index in its campaign (0-based)", int)
    runs: int | None = _option("runs in the campaign (for labels)", int)
    seed: int | None = _option("the run's seed", int)
    label: str | None = _option("what the run's lines start with (default: [run I/N seed S])")
    remaining: int | None = _option("runs left after this one", int)
    progress: Path | None = _option("rank 0 writes machine-readable progress (JSON lines) here", Path, "FILE")
    track: Target | None = _option("where rank 0's trackers write (submission.tracking.Target)",
                                   Target.from_arg, "JSON")
    finish: bool = _switch("tell followers the campaign is over")
    follow: bool = _switch("node > 0: take the run from rank 0")
    state: Path | None = _option("follower: where to record runs remaining", Path)
    result: Path | None = _option("final result file path (rank 0)", Path)
    cache_cleared: bool | None = _option("1: the page cache was cleared before the run",
                                         lambda text: bool(int(text)), "0|1")
    save_weights: Path | None = _option("folder: each rank saves its final weights", Path)

    def to_argv(self, shown: Mapping[str, str] | None = None) -> list[str]:
        """The command line; `shown` writes a field's value as given text instead (a dry run's
        "<seed>", a seed not drawn yet)."""
        shown = shown or {}
        argv: list[str] = []
        for each in dataclasses.fields(self):
            value = getattr(self, each.name)
            if each.metadata.get("switch"):
                argv += [_flag(each.name)] if value else []
            elif each.name in shown:
                argv += [_flag(each.name), shown[each.name]]
            elif value is not None:
                argv += [_flag(each.name), _text(value)]
        return argv

    @classmethod
    def parse(cls, argv: Sequence[str] | None, description: str = "") -> "TrainArgs":
        """The worker's arguments from its command line (sys.argv's when None); --help says
        what each one means."""
        parser = argparse.ArgumentParser(prog="python -m submission.train", description=description,
                                         formatter_class=argparse.RawDescriptionHelpFormatter)
        for each in dataclasses.fields(cls):
            meta = each.metadata
            if meta.get("switch"):
                parser.add_argument(_flag(each.name), dest=each.name, action="store_true", help=meta["help"])
            else:
                parser.add_argument(_flag(each.name), dest=each.name, type=meta["read"], help=meta["help"],
                                    metavar=meta["metavar"], required=meta["required"])
        return cls(**vars(parser.parse_args(argv)))


def _text(value: Any) -> str:
    if isinstance(value, Target):
        return value.to_arg()
    if isinstance(value, bool):
        return str(int(value))
    return str(value)
