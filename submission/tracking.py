"""Where people watch runs: TensorBoard event files and Weights & Biases runs, fed the same
records a run writes as its progress (submission.progress).

`tracker=` names the trackers (tensorboard, the default; wandb; none; several joined by commas).
Rank 0 of each run keeps every record's figures in a list while it trains and hands them to
the trackers at each evaluation and at the end, never inside a step. A tracker that fails
(a full disk, a folder it cannot write, a W&B error) prints one line and is dropped; the run
and its MLPerf log go on untouched.

The series, named as Composer's loggers name them, with the training step as x:

    loss/train/total  lr-SGD/group0  throughput/samples_per_sec  trainer/side_px  time/epoch
    time/minutes      (each progress window)
    metrics/eval/top1                                            (each evaluation)
    energy/joules                                                (once, where it was measured)

A tradeoff point's folder also gets its hyperparameters and final figures in TensorBoard's
HParams form (`write_point_hparams`), one session per point under a fixed name, so that
`tensorboard --logdir results/tradeoff/<grid>` shows the grid as one table.
"""
from __future__ import annotations

import functools
import importlib.util
import json
import math
import netrc
import os
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from .energy import Energy
from .progress import ENERGY, EVAL, WINDOW
from .redaction import redacted_settings

# the trackers `tracker=` names (its choices are declared with the settings: settings.py)
TENSORBOARD, WANDB = "tensorboard", "wandb"
WANDB_INSTALL = ".venv/bin/pip install -e '.[wandb]'"
# W&B modes that need no login (WANDB_MODE); any other asks wandb.ai for the account
WANDB_LOCAL_MODES = ("offline", "disabled", "dryrun")
WANDB_PROJECT = "mlperf-resnet"     # unless WANDB_PROJECT names another
# the final figures of a tradeoff point, as its HParams metrics
POINT_FIGURES = {"top1": "grid/top1", "minutes": "grid/minutes", "usd": "grid/usd", "joules": "grid/joules"}
HPARAMS_FILE_SUFFIX = ".hparams"    # the event file the grid writes beside the run's


def problems(trackers: list[str]) -> list[str]:
    """Why these trackers cannot run on this machine (not installed, W&B not logged in),
    decided before anything is written."""
    found = []
    if TENSORBOARD in trackers and importlib.util.find_spec("tensorboard") is None:
        found.append("tracker=tensorboard: the tensorboard package is not installed (set-up "
                     "installs it: scripts/bootstrap.sh, or `.venv/bin/pip install -e .`); "
                     "tracker=none runs without it")
    if WANDB in trackers:
        if importlib.util.find_spec("wandb") is None:
            found.append(f"tracker=wandb: the wandb package is not installed: `{WANDB_INSTALL}`")
        elif not _wandb_can_log_in():
            found.append("tracker=wandb: W&B has no account on this machine: `.venv/bin/wandb login`, "
                         "or WANDB_MODE=offline (synced later with `wandb sync`)")
    return found


def _wandb_can_log_in() -> bool:
    if os.environ.get("WANDB_MODE", "").lower() in WANDB_LOCAL_MODES or os.environ.get("WANDB_API_KEY"):
        return True
    try:
        return netrc.netrc().authenticators("api.wandb.ai") is not None
    except (OSError, netrc.NetrcParseError):
        return False


@dataclass(frozen=True)
class Target:
    """Where one run's tracking goes: its TensorBoard folder, the folder W&B keeps its files
    in, and the run's name and group (its campaign or grid) for W&B."""
    trackers: tuple[str, ...]
    event_dir: str
    wandb_dir: str
    name: str
    group: str

    def to_text(self) -> str:
        """The run's command-line argument (submission.train --track; read by from_text)."""
        return json.dumps(asdict(self))

    @classmethod
    def from_text(cls, text: str) -> Target | None:
        if not text:
            return None
        data = json.loads(text)
        return cls(**{**data, "trackers": tuple(data["trackers"])})


def scalars(record: dict[str, Any]) -> tuple[int, dict[str, float]]:
    """A progress record's step and its figures under the tracked names ({} for a kind
    that has none)."""
    kind, step = record.get("kind"), int(record.get("step") or 0)
    if kind == WINDOW:
        figures = {"loss/train/total": record["loss"], "lr-SGD/group0": record["lr"],
                   "throughput/samples_per_sec": record["img_per_s"], "trainer/side_px": record["side"],
                   "time/epoch": record["epoch"], "time/minutes": record["minutes"]}
    elif kind == EVAL:
        figures = {"metrics/eval/top1": record["accuracy"]}
    elif kind == ENERGY:
        figures = {"energy/joules": Energy.from_dict(record).joules}
    else:
        figures = {}
    return step, {name: float(value) for name, value in figures.items()
                  if value is not None and math.isfinite(float(value))}


class Tracking:
    """The trackers of one run on rank 0: `record` keeps a record's figures, `flush` hands
    what was kept to each tracker, `close` flushes and ends them. A tracker that raises is
    named in one line and dropped."""

    def __init__(self, writers: list[Any], label: str = ""):
        self.writers, self.label = list(writers), label
        self.kept: list[tuple[int, dict[str, float]]] = []
        self.last_step = 0

    def record(self, record: dict[str, Any]) -> None:
        step, figures = scalars(record)
        self.last_step = step = max(step, self.last_step)   # W&B refuses a step that goes back
        if figures:
            self.kept.append((step, figures))

    def flush(self) -> None:
        kept, self.kept = self.kept, []
        for writer in list(self.writers):
            self._guarded(writer, functools.partial(writer.write, kept))

    def close(self) -> None:
        self.flush()
        for writer in list(self.writers):
            self._guarded(writer, writer.close)
        self.writers = []

    def _guarded(self, writer: TensorBoardWriter | WandbWriter, call: Callable[[], object]) -> None:
        try:
            call()
        except Exception as exc:    # noqa: BLE001 - a tracker never stops a run
            self.writers.remove(writer)
            print(f"{self.label} {writer.name} stopped tracking this run ({type(exc).__name__}: {exc}); "
                  "the run goes on, its MLPerf log untouched", file=sys.stderr, flush=True)


class TensorBoardWriter:
    """One run's event folder, made at the first flush (the first evaluation)."""
    name = "TensorBoard"

    def __init__(self, folder: Path):
        from torch.utils.tensorboard import SummaryWriter  # imported before run_start
        self.folder, self._make = Path(folder), SummaryWriter
        self.writer: SummaryWriter | None = None

    def write(self, kept: list[tuple[int, dict[str, float]]]) -> None:
        if not kept and self.writer is None:
            return
        if self.writer is None:
            self.writer = self._make(log_dir=str(self.folder), max_queue=1_000_000, flush_secs=3600)
        for step, figures in kept:
            for tag, value in figures.items():
                self.writer.add_scalar(tag, value, step)
        self.writer.flush()

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


class WandbWriter:
    """One W&B run, started before run_start (its service takes seconds to start)."""
    name = "W&B"

    def __init__(self, target: Target, config: dict[str, Any]):
        import wandb
        Path(target.wandb_dir).mkdir(parents=True, exist_ok=True)
        self.run = wandb.init(project=os.environ.get("WANDB_PROJECT") or WANDB_PROJECT,
                              dir=target.wandb_dir, name=target.name, group=target.group,
                              config=config, reinit="create_new", settings=wandb.Settings(quiet=True))

    def write(self, kept: list[tuple[int, dict[str, float]]]) -> None:
        for step, figures in kept:
            self.run.log(figures, step=step)

    def close(self) -> None:
        self.run.finish()


def open_tracking(target: Target | None, config: dict[str, Any], label: str) -> Tracking | None:
    """Rank 0's trackers for one run (None without any); a tracker that cannot start is named
    in one line and left out."""
    if target is None or not target.trackers:
        return None
    tracking = Tracking([], label)
    makers = {TENSORBOARD: lambda: TensorBoardWriter(Path(target.event_dir)),
              WANDB: lambda: WandbWriter(target, redacted_settings(config))}
    for name in target.trackers:
        try:
            tracking.writers.append(makers[name]())
        except Exception as exc:    # noqa: BLE001 - a tracker never stops a run
            print(f"{label} tracker={name} could not start ({type(exc).__name__}: {exc}); "
                  "the run goes on without it", file=sys.stderr, flush=True)
    return tracking


def write_point_hparams(folder: Path, hparams: dict[str, Any], figures: dict[str, float | None]) -> None:
    """A finished tradeoff point's HParams session in its event folder: its hyperparameters
    and its final figures (POINT_FIGURES' keys: top1, minutes, usd, joules; None where not
    measured). A failure is one line: the point's own records are written already."""
    try:
        from torch.utils.tensorboard import SummaryWriter
        from torch.utils.tensorboard.summary import hparams as hparams_summaries
        metrics = {POINT_FIGURES[key]: float(value) for key, value in figures.items() if value is not None}
        _, start, end = hparams_summaries(redacted_settings(hparams), metrics)
        with SummaryWriter(log_dir=str(folder), filename_suffix=HPARAMS_FILE_SUFFIX) as writer:
            writer.file_writer.add_summary(start)
            writer.file_writer.add_summary(end)
            for tag, value in metrics.items():
                writer.add_scalar(tag, value)
    except Exception as exc:    # noqa: BLE001 - the point's own records are written already
        print(f"[tradeoff] TensorBoard could not record this point's HParams in {folder} "
              f"({type(exc).__name__}: {exc})", file=sys.stderr, flush=True)
