"""A run's progress, printed for people and written once as data for the report.

`Reporter` prints the progress lines on rank 0 (step, loss, lr, side, img/s, accuracy so
far, minutes, budget ETA) and an evaluation line after each evaluation. Given a file, it
also writes the same figures there as JSON lines, one object per line, flushed as each is
written, so that a run that is killed keeps every record up to its last complete line.
Campaigns keep it as `results/<system>/progress/run_<i>.jsonl`; `read_progress` reads it
back for `report.plots` and `report.steadiness`. Nothing reads the printed lines back.
Given a submission.tracking.Tracking (which reads these records, so it is not imported
here), it hands it every record and flushes it at each evaluation; whoever opened the
trackers closes them.

Records, in the order things happened (a reader skips kinds it does not know):

  {"kind": "window", ...}   at each progress line: the training steps since the previous one
      step          int    steps done so far in the run (1-based: the window's last step)
      total_steps   int    the run's step budget
      epoch         float  step / steps_per_epoch
      loss          float  loss of the window's last step; null when not finite (diverged)
      lr            float  learning rate of the window's last step
      side          int    training side (px) of the window's last step; a window in which
                           the side changed mixes two sides' rates
      img_per_s     float  window_steps * global batch / window_s (whole system)
      window_steps  int    training steps in the window
      window_s      float  seconds of the window, evaluation time left out
      minutes       float  minutes since the reporter started (just after run_start)

  {"kind": "eval", ...}     after each evaluation
      step          int    the step after which the model was evaluated
      epoch         float  the evaluation's epoch (as in the MLPerf log)
      accuracy      float  top-1
      target        float  the quality target
      seconds       float  how long the evaluation took
      minutes       float  minutes since the reporter started, at the evaluation's end

  {"kind": "energy", ...}   once, after run_stop: the run's energy, all ranks added
                           (submission.energy.Energy: joules or not_measured and why,
                           seconds, source, power_limit_watts, devices)

An evaluation record lies between the windows whose gap it fell into: its seconds are
left out of the next window's window_s, which is what lets every window be held against
the steady rate of its side.
"""
from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import IO, Any, SupportsFloat

from .energy import Energy

WINDOW, EVAL, ENERGY = "window", "eval", "energy"


class Reporter:
    """Progress lines on rank 0 and, given a file, the same figures as JSON-line records.

    A line's img/s covers the training steps since the previous line, evaluation time
    left out (each evaluation line gives its own seconds). Only the rank with `enabled`
    prints or writes; `close()` ends the file and may be called any number of times."""

    def __init__(self, label: str, total_steps: int, steps_per_epoch: int, global_batch: int,
                 every: int, enabled: bool, progress_file: Path | str | None = None,
                 every_seconds: float = float("inf"), tracking: Any = None):
        self.label, self.total, self.per_epoch = label, total_steps, steps_per_epoch
        self.batch, self.every, self.enabled = global_batch, every, enabled
        self.every_seconds = every_seconds
        self.start = time.monotonic()
        self.window_start, self.window_steps = self.start, 0
        self.accuracy: float | None = None
        self.last_step = 0
        self.file: IO[str] | None = None
        self.tracking = tracking if enabled else None
        if enabled and progress_file is not None:
            path = Path(progress_file)
            path.parent.mkdir(parents=True, exist_ok=True)
            self.file = open(path, "w", buffering=1)

    def _write(self, record: dict[str, Any]) -> None:
        if self.file is not None:
            self.file.write(json.dumps(record) + "\n")
            self.file.flush()
        if self.tracking is not None:
            self.tracking.record(record)

    def step(self, step: int, loss: SupportsFloat, lr: float, side: int) -> None:
        """After each training step (loss: a 0-d tensor or a number); on every `every`-th
        step, the last one, and the first after `every_seconds` without a line, a line and a
        window record."""
        self.window_steps += 1
        self.last_step = step
        if not self.enabled:
            return
        now = time.monotonic()
        if step % self.every and step != self.total and now - self.window_start < self.every_seconds:
            return
        window_s = max(now - self.window_start, 1e-9)
        rate = self.window_steps * self.batch / window_s
        window_steps = self.window_steps
        self.window_start, self.window_steps = now, 0
        elapsed = (now - self.start) / 60
        eta = elapsed / step * (self.total - step)
        loss_value = float(loss.item() if hasattr(loss, "item") else loss)   # a tensor: one sync
        acc = f"top-1 {self.accuracy:.4f}" if self.accuracy is not None else "top-1 -"
        print(f"{self.label} epoch {step / self.per_epoch:5.2f} step {step}/{self.total} "
              f"loss {loss_value:.4f} lr {lr:.4f} {side}px {rate:.0f} img/s | {acc} | "
              f"{elapsed:.2f} min, budget ETA {eta:.1f} min", flush=True)
        self._write({"kind": WINDOW, "step": step, "total_steps": self.total,
                     "epoch": step / self.per_epoch,
                     "loss": loss_value if math.isfinite(loss_value) else None,
                     "lr": float(lr), "side": int(side), "img_per_s": rate,
                     "window_steps": window_steps, "window_s": window_s, "minutes": elapsed})

    def evaluated(self, epoch: float, accuracy: float, target: float | None, seconds: float) -> None:
        """After each evaluation: a line, and its seconds left out of the current window
        (target None: a run without a target, which trains its whole budget)."""
        self.accuracy = accuracy
        self.window_start += seconds
        if self.enabled:
            mark = ("no target" if target is None else
                    f"{'reached' if accuracy >= target else 'below'} target {target}")
            print(f"{self.label} eval at epoch {epoch:.2f}: top-1 {accuracy:.4f} ({mark}) "
                  f"in {seconds:.2f} s", flush=True)
            self._write({"kind": EVAL, "step": self.last_step, "epoch": float(epoch),
                         "accuracy": float(accuracy), "target": None if target is None else float(target),
                         "seconds": float(seconds),
                         "minutes": (time.monotonic() - self.start) / 60})
            if self.tracking is not None:
                self.tracking.flush()

    def energy(self, used: Energy) -> None:
        """After run_stop: the run's energy (all ranks added), a line and a record."""
        if self.enabled:
            print(f"{self.label} energy from run_start to run_stop: {used.describe()}", flush=True)
            self._write({"kind": ENERGY, **used.to_dict()})

    def close(self) -> None:
        if self.file is not None:
            self.file.close()
            self.file = None


def read_progress(path: Path | str) -> list[dict[str, Any]]:
    """The records of one progress file, in order.

    A last line that is not a whole JSON object (a run killed while writing it) is left
    out; a damaged line before the last is an error (ValueError naming the file and line),
    as no run writes one."""
    path = Path(path)
    lines = path.read_text(errors="replace").splitlines()
    records = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            if number == len(lines):
                break
            raise ValueError(f"{path} line {number} is not a JSON object: {exc}") from None
        if not isinstance(record, dict):
            if number == len(lines):
                break
            raise ValueError(f"{path} line {number} is not a JSON object: {line[:80]!r}")
        records.append(record)
    return records


def run_energy(records: list[dict[str, Any]]) -> Energy | None:
    """The run's energy record among its records (None: the run wrote none: it did not
    finish, or ran before energy was measured)."""
    found = [r for r in records if r.get("kind") == ENERGY]
    return Energy.from_dict(found[-1]) if found else None


def windows(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The window records among a run's records, in order."""
    return [r for r in records if r.get("kind") == WINDOW]


def evaluations(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The evaluation records among a run's records, in order."""
    return [r for r in records if r.get("kind") == EVAL]
