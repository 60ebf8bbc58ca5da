"""Which run the processes of one torchrun job do: rank 0 decides, every other rank follows.

Node 0's campaign starts each run with its index, seed and the runs left after it. The
campaigns of the other nodes (node_rank > 0) start torchrun with --follow and no run of
their own: rank 0 broadcasts the run and its configuration to them, and local rank 0 of
each such node writes the runs still to come to its --state file, which tells its
campaign whether to start another job. When node 0 finds every run complete it starts
one job with --finish, so that the followers waiting for a next run learn that the
campaign is over.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from . import distributed as dist_utils
from .config import Config
from .jsonfile import write_json
from .train_args import TrainArgs


@dataclass(frozen=True)
class RunSpec:
    """The run every rank of the job does, as rank 0 decided it."""
    run_index: int
    runs: int
    seed: int
    config: Config
    cache_cleared: bool
    finish: bool            # no run: the campaign is over
    named: str = ""         # what the run's lines start with, when the launcher names it

    @property
    def label(self) -> str:
        return self.named or f"[run {self.run_index + 1}/{self.runs} seed {self.seed}]"


def agree_on_run(args: TrainArgs, config: Config, local_rank: int) -> RunSpec:
    """Rank 0's run (from its command line: run index, runs, seed, cache cleared, finish,
    remaining; run 0 of 1 with seed 0 where it names none) on every rank. A follower takes
    rank 0's configuration, and its local rank 0 records in its state file how many runs
    remain (0 once the campaign is over)."""
    sent: dict[str, Any] = {
        "run_index": args.run_index or 0, "runs": args.runs or 1, "seed": args.seed or 0,
        "finish": args.finish, "remaining": args.remaining or 0, "config": config.to_dict(),
        "cache_cleared": bool(args.cache_cleared), "label": args.label or ""}
    spec = dist_utils.broadcast_object(sent)
    if args.follow:
        config = Config.from_dict(spec["config"])
        if args.state and local_rank == 0:
            remaining = 0 if spec["finish"] else spec["remaining"]
            write_json(args.state, {"remaining": remaining})
    return RunSpec(spec["run_index"], spec["runs"], spec["seed"], config,
                   bool(spec["cache_cleared"]), bool(spec["finish"]), spec["label"])
