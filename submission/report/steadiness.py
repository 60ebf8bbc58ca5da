"""Is the timed region flat? Set-up that leaks past run_start shows as slow windows.

For each run of a campaign:
  - every progress window (a "window" record of progress/run_<i>.jsonl: the img/s of the
    training steps between two progress lines, evaluation time left out) against the
    steady rate of its training side: the median of the campaign's windows at that side;
  - the first evaluation's seconds (eval_start to eval_stop in the MLPerf log) against
    the median of the run's later evaluations.
The targets (issue 9): no window without an evaluation in it below 0.8x the steady
rate of its side, and a first evaluation no slower than 1.5x a later one. A window with
an evaluation in it (an "eval" record before it), or in which the side changed (its
record names the side of its last step, but it mixes two sides' rates), is shown but not
judged, nor counted in a steady rate; the first window of a run is always judged, as
set-up left in the timed region would slow it. Runs with only printed progress lines
(`progress/run_<i>.log`) have no windows here.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path

from ..progress import EVAL, WINDOW, read_progress
from ..results import RULESET
from ..run_folder import CampaignFolder
from . import plots

SLOW_WINDOW = 0.8         # a window below this share of its side's steady rate is slow
SLOW_FIRST_EVAL = 1.5     # a first evaluation above this multiple of the later ones is slow


@dataclass
class Window:
    rate: float
    side: int
    judged: bool         # no evaluation in it and no side change (or the run's first window)
    seconds: float = 0.0                 # the window's training seconds (evaluations left out)
    changed_from: int | None = None      # the side before, in a window in which the side changed
    evaluated: bool = False              # an evaluation fell into it


def windows_of(progress_file: Path) -> list[Window]:
    """The progress windows of one run, in order, from its progress records."""
    found: list[Window] = []
    evaluated, previous_side = False, None
    for record in read_progress(progress_file):
        if record.get("kind") == EVAL:
            evaluated = True
        elif record.get("kind") == WINDOW:
            side = int(record["side"])
            first = previous_side is None
            changed = previous_side if not first and side != previous_side else None
            found.append(Window(float(record["img_per_s"]), side,
                                first or (not evaluated and side == previous_side),
                                float(record.get("window_s", 0.0)), changed, evaluated))
            evaluated, previous_side = False, side
    return found


@dataclass
class SideChange:
    """The window in which a run's side changed, against the new side's steady rate (its
    first steps at the new side: cuDNN plans, a compiled graph's first call; the old side's
    last steps are in it too), and the window after it."""
    before: int
    after: int
    ratio: float               # the change's window / the new side's steady rate
    lost_s: float              # its seconds beyond that window's images at the steady rate
    next_ratio: float | None   # the window after it / the steady rate
    evaluated: bool            # an evaluation (and the loader's epoch start) fell into it too


def side_changes(run: list[Window], steady: dict[int, float]) -> list[SideChange]:
    found = []
    for i, window in enumerate(run):
        if window.changed_from is None or not steady.get(window.side):
            continue
        rate = steady[window.side]
        after = run[i + 1] if i + 1 < len(run) and run[i + 1].side == window.side else None
        found.append(SideChange(window.changed_from, window.side, window.rate / rate,
                                max(0.0, window.seconds * (1 - window.rate / rate)),
                                after.rate / rate if after else None, window.evaluated))
    return found


@dataclass
class RunSteadiness:
    run: str
    windows: int
    judged: int
    slowest_ratio: float | None     # slowest window / steady rate of its side
    slowest_at: str                 # "window 1 (16 px)"
    first_eval_s: float | None
    later_eval_s: float | None      # median of the later evaluations
    first_window_ratio: float | None = None     # the run's first window / steady rate of its side
    side_changes: list[SideChange] | None = None

    @property
    def first_eval_ratio(self) -> float | None:
        if self.first_eval_s is None or not self.later_eval_s:
            return None
        return self.first_eval_s / self.later_eval_s

    @property
    def flat(self) -> bool:
        return ((self.slowest_ratio is None or self.slowest_ratio >= SLOW_WINDOW)
                and (self.first_eval_ratio is None or self.first_eval_ratio <= SLOW_FIRST_EVAL))


def eval_seconds(result: Path) -> list[float]:
    """Seconds from each eval_start to its eval_stop in one MLPerf result log."""
    from mlperf_logging.compliance_checker.mlp_parser import parse_file

    loglines, _ = parse_file(str(result), ruleset=RULESET)
    started, seconds = None, []
    for line in loglines:
        if line.key == "eval_start":
            started = line.timestamp
        elif line.key == "eval_stop" and started is not None:
            seconds.append((line.timestamp - started) / 1000)
            started = None
    return seconds


def campaign_steadiness(system_dir: Path) -> list[RunSteadiness]:
    system_dir = Path(system_dir)
    windows = {name: windows_of(path) for name, path in plots.progress_files(system_dir).items()}
    by_side: dict[int, list[float]] = {}
    for run in windows.values():
        for window in run:
            if window.judged:
                by_side.setdefault(window.side, []).append(window.rate)
    steady = {side: statistics.median(rates) for side, rates in by_side.items()}

    found = []
    for result in CampaignFolder(system_dir).result_files():
        run = windows.get(result.name, [])
        ratios = [(w.rate / steady[w.side], f"window {i + 1} ({w.side} px)")
                  for i, w in enumerate(run) if w.judged and steady[w.side] > 0]
        slowest = min(ratios, default=(None, ""))
        evals = eval_seconds(result)
        found.append(RunSteadiness(
            run=result.stem, windows=len(run), judged=len(ratios), slowest_ratio=slowest[0],
            slowest_at=slowest[1], first_eval_s=evals[0] if evals else None,
            later_eval_s=statistics.median(evals[1:]) if len(evals) > 1 else None,
            first_window_ratio=(run[0].rate / steady[run[0].side]
                                if run and steady.get(run[0].side) else None),
            side_changes=side_changes(run, steady)))
    return found


def markdown(system_dir: Path) -> list[str]:
    runs = campaign_steadiness(system_dir)
    if not any(r.windows for r in runs):
        return ["No progress records (`progress/run_<i>.jsonl`) with windows: nothing to check."]

    def ratio(value: float | None, fmt: str = "{:.2f}x") -> str:
        return "—" if value is None else fmt.format(value)

    lines = [f"Each progress window without an evaluation or a side change in it (and every run's "
             f"first) against the median of such windows of its training side across the campaign "
             f"(target: none below {SLOW_WINDOW}x), and the first evaluation against the median of "
             f"the later ones (target: at most {SLOW_FIRST_EVAL}x).", "",
             "| run | windows (judged) | slowest window / steady | where | first eval (s) | later evals (s) "
             "| ratio | flat |",
             "|---|---|---|---|---|---|---|---|"]
    for r in runs:
        lines.append(f"| {r.run} | {r.windows} ({r.judged}) | {ratio(r.slowest_ratio)} | {r.slowest_at or '—'} | "
                     f"{ratio(r.first_eval_s, '{:.2f}')} | {ratio(r.later_eval_s, '{:.2f}')} | "
                     f"{ratio(r.first_eval_ratio)} | {'yes' if r.flat else 'NO'} |")
    changes = [(r.run, c) for r in runs for c in r.side_changes or []]
    if changes:
        lines += ["", "Each side change: the window in which the side changed and the one after it, "
                      "against the new side's steady rate; seconds lost: the change's window beyond "
                      "its images at that rate (its first steps at the new side, and the old side's "
                      "last ones).", "",
                  "| run | side change | its window / steady | seconds lost | next window / steady | note |",
                  "|---|---|---|---|---|---|"]
        lines += [f"| {run} | {c.before} -> {c.after} px | {c.ratio:.2f}x | {c.lost_s:.2f} | "
                  f"{ratio(c.next_ratio)} | {'an evaluation in it too' if c.evaluated else ''} |"
                  for run, c in changes]
    return lines
