"""The qualification's folder: its files, its record (qualify.json, one type, written and read
here) and the record for people (qualify.md).

    <out>/qualify.md             every figure beside the command that measured it
    <out>/qualify.json           the same figures as data (Qualification)
    <out>/qualify.log            every part's output, in order
    <out>/profile_<recipe>.json  each recipe's eager bench profile (`project`, `tradeoff` read them)
    <out>/profile_<recipe>-compiled[-graphs].json   a compiled bench's (on a GPU): `project` reads
                                 it with the eager profile beside it
    <out>/campaign-report.md     the short campaign's report (steadiness, energy)

At most 11 files (4 on a CPU besides the profiles), none over a few MiB: small enough to copy
back from a rented machine.
"""
from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..bench_profile import file_name
from ..jsonfile import record_from_dict, write_json
from .plan import LEARNED_OVER_CHANCE, NOT_COMPILED, RECORD_RESERVE_S

RECORD, MARKDOWN, LOG, REPORT = "qualify.json", "qualify.md", "qualify.log", "campaign-report.md"
DONE, FAILED, LEFT_OUT, STOPPED = "done", "failed", "left out", "stopped at the budget's end"
INTERRUPTED, NOT_RUN = "interrupted", "not run"     # the part a stop signal stopped; those after it
profile_name = file_name     # each bench's profile in the folder: profile_mild.json, profile_mild-compiled-graphs.json


@dataclass
class PartOutcome:
    name: str
    command: str
    status: str                  # DONE, FAILED, LEFT_OUT, STOPPED
    estimate_s: float
    seconds: float | None = None
    note: str = ""               # why it failed or was left out


def outcomes_line(parts: list[PartOutcome]) -> str:
    """What was measured and what was not, by status: "measured: a, b; FAILED: c; left out: d"."""
    words = {DONE: "measured", FAILED: "FAILED", INTERRUPTED: "interrupted", STOPPED: "stopped at the budget's end",
             LEFT_OUT: "left out for the budget", NOT_RUN: "not run"}
    named = {status: [p.name for p in parts if p.status == status] for status in words}
    found = [f"{words[status]}: {', '.join(names)}" for status, names in named.items() if names]
    return "; ".join(found) if named[DONE] else "nothing measured; " + "; ".join(found)


@dataclass
class LoaderFigures:
    """One loader of a recipe's bench (the run's, or the one measured beside it)."""
    kind: str
    img_per_s: float             # alone
    threads: int
    fed_ratio: dict[str, float]  # side -> the step fed by it over the synthetic step
    eval_img_per_s: float
    device_memory_mib: float | None


@dataclass
class RecipeFigures:
    """One recipe's eager bench, at the full training side."""
    recipe: str
    profile: str                 # its file in the folder
    side: int
    step_img_per_s: float
    eval_img_per_s: float
    loader_img_per_s: float
    mfu: float | None
    watts: float | None
    idle_watts: float | None
    power_note: str              # what read the watts, or why they were not measured
    project_command: str
    loaders: list[LoaderFigures] = field(default_factory=list)   # the run's first


@dataclass
class CompiledFigures:
    """A compiled bench against the eager step at the same sides."""
    recipe: str
    cuda_graphs: bool
    sides: dict[str, dict[str, float]]         # side -> img_per_s, eager_img_per_s, first_step_s
    side_changes: dict[str, float]             # "176->88" -> seconds lost
    profile: str = ""                          # its file in the folder
    project_command: str = ""


@dataclass
class CampaignRun:
    run: str
    status: str
    minutes: float | None
    joules: float | None
    first_window_ratio: float | None
    first_eval_ratio: float | None
    side_changes: list[dict[str, Any]]         # before, after, ratio, lost_s, next_ratio, evaluated
    first_top1: float | None = None            # the run's first evaluation; None: it made none
    last_top1: float | None = None
    evaluations: int = 0
    steps: int = 0                             # the run's step budget


@dataclass
class CampaignFigures:
    folder: str
    runs: list[CampaignRun]
    kwh: float | None
    energy_note: str
    energy_check: str            # joules within idle x time and the power limit x time, in words
    classes: int = 0
    ema: str = ""                # how the campaign scales the EMA to its length, in words
    learned: bool | None = None  # every run's last top-1 at least LEARNED_OVER_CHANCE x chance; None: none evaluated
    verdict: str = ""            # the one line on whether the recipe learned here, and what to check if not

    @property
    def chance(self) -> float:
        return 1 / self.classes if self.classes else 0.0


def verdict(runs: list[CampaignRun], classes: int) -> tuple[bool | None, str]:
    """Whether the recipe learned on this machine (every run's last evaluation at least
    LEARNED_OVER_CHANCE x chance), in one line that says what to check when it did not."""
    chance = 1 / classes
    judged = [(r.run, r.first_top1, r.last_top1) for r in runs
              if r.first_top1 is not None and r.last_top1 is not None]
    if not judged:
        return None, "not judged: no run of the campaign evaluated its model"
    against = ("top-1 at the first -> last evaluation: "
               + "; ".join(f"{run} {first:.3f} -> {last:.3f}" for run, first, last in judged)
               + f"; chance {chance:.3f} ({classes} classes)")
    below = [run for run, _, last in judged if last < LEARNED_OVER_CHANCE * chance]
    if not below:
        return True, f"the recipe learned on this machine ({against})"
    return False, (f"the recipe did NOT learn on this machine: {', '.join(below)} ended below "
                   f"{LEARNED_OVER_CHANCE:g}x chance ({against}). Check the data (qualify.log's prepare lines: "
                   "its classes and images), the driver (nvidia-smi; torch's CUDA against the driver's) and "
                   "the precision (precision=fp32 rules out fp16 overflow)")


@dataclass
class Qualification:
    device: str
    device_type: str
    host: str
    date: str
    commit: str
    torch: str
    budget_minutes: float
    elapsed_minutes: float
    data: str
    settings: dict[str, str]
    parts: list[PartOutcome] = field(default_factory=list)
    recipes: list[RecipeFigures] = field(default_factory=list)
    compiled: list[CompiledFigures] = field(default_factory=list)
    campaign: CampaignFigures | None = None
    interrupted: str = ""        # the stop signal that ended it early (SIGINT, SIGTERM); "": none

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Qualification:
        return record_from_dict(cls, data, strict=True)


def write(folder: Path, record: Qualification) -> Path:
    write_json(folder / RECORD, record.to_dict())
    path = folder / MARKDOWN
    path.write_text(markdown(record))
    return path


def read(folder: Path) -> Qualification:
    return Qualification.from_dict(json.loads((Path(folder) / RECORD).read_text()))


# ---- for people ------------------------------------------------------------------
def _num(value: float | None, fmt: str = "{:,.1f}", none: str = "—") -> str:
    return none if value is None else fmt.format(value)


def markdown(q: Qualification) -> str:
    lines = [f"# Qualification of {q.device}", "",
             f"- device: {q.device} ({q.device_type}); host: {q.host}; torch {q.torch}",
             f"- date: {q.date}; commit: {q.commit}",
             f"- budget {q.budget_minutes:g} min, took {q.elapsed_minutes:.2f} min; data: {q.data}",
             *([f"- INTERRUPTED by {q.interrupted} after {q.elapsed_minutes:.2f} min: the parts marked "
                f"{INTERRUPTED} or {NOT_RUN} were not measured (the same command again measures them)"]
               if q.interrupted else []),
             "- settings of every part: " + (" ".join(f"{k}={v}" for k, v in q.settings.items()) or "the recipes' own"),
             "", "## Parts", "", "| part | status | seconds (estimate) | command |", "|---|---|---|---|"]
    for p in q.parts:
        status = p.status + (f": {p.note}" if p.note else "")
        lines.append(f"| {p.name} | {status.replace('|', '/')} | {_num(p.seconds, '{:.0f}')} "
                     f"({p.estimate_s:.0f}) | `{p.command}` |")
    lines += ["", "## Each recipe, eager, at its full training side (per process)", ""]
    if q.recipes:
        lines += ["| recipe | side | step img/s | MFU | eval img/s | loader img/s | watts training (idle) | profile |",
                  "|---|---|---|---|---|---|---|---|"]
        for r in q.recipes:
            watts = (f"{r.watts:.0f} W ({_num(r.idle_watts, '{:.0f} W')})" if r.watts is not None
                     else "not measured")
            lines.append(f"| {r.recipe} | {r.side} px | {r.step_img_per_s:,.1f} | {_num(r.mfu, '{:.1%}')} | "
                         f"{r.eval_img_per_s:,.1f} | {r.loader_img_per_s:,.1f} | {watts} | `{r.profile}` |")
        lines += ["", "The loaders side by side (the step fed by each: its rate over the synthetic "
                      "step's at that side; the first of each recipe is the one it trains with):", "",
                  "| recipe | loader | img/s alone | CPU threads | step fed | eval img/s | device MiB |",
                  "|---|---|---|---|---|---|---|"]
        lines += [f"| {r.recipe} | {loader.kind} | {loader.img_per_s:,.1f} | {loader.threads} | "
                  + ", ".join(f"{side} px {ratio:.2f}x" for side, ratio in loader.fed_ratio.items())
                  + f" | {loader.eval_img_per_s:,.1f} | {_num(loader.device_memory_mib, '{:,.0f}')} |"
                  for r in q.recipes for loader in r.loaders]
        lines += ["", "Power: " + "; ".join(dict.fromkeys(r.power_note for r in q.recipes)), "",
                  "Each profile projects a run with `project` (and `tradeoff`'s `profile_<recipe>=`):", ""]
        lines += [f"    {r.project_command}" for r in q.recipes]
    else:
        lines.append("No recipe's bench finished (the parts above say why).")
    return "\n".join(lines + _compiled_lines(q) + _campaign_lines(q.campaign)) + "\n"


def _compiled_lines(q: Qualification) -> list[str]:
    """The compiled benches' section of qualify.md."""
    lines = ["", "## Compiled (torch.compile, static shapes), against the eager step beside it", ""]
    if not q.compiled:
        return lines + [NOT_COMPILED.get(q.device_type, "No compiled bench finished (the parts above say why)") + "."]
    lines += ["| recipe | CUDA graphs | side | compiled img/s | eager img/s | ratio | first call (s) |",
              "|---|---|---|---|---|---|---|"]
    for c in q.compiled:
        for side, f in c.sides.items():
            lines.append(f"| {c.recipe} | {'yes' if c.cuda_graphs else 'no'} | {side} px | "
                         f"{f['img_per_s']:,.1f} | {f['eager_img_per_s']:,.1f} | "
                         f"{f['img_per_s'] / f['eager_img_per_s']:.2f}x | {f['first_step_s']:.1f} |")
    lines += ["", "Seconds a compiled step loses at a side change (its first steps at the new side "
                  "against that side's steady rate):", ""]
    lines += [f"- {c.recipe}{' + CUDA graphs' if c.cuda_graphs else ''}: "
              + ", ".join(f"{change} px {lost:.2f} s" for change, lost in c.side_changes.items())
              for c in q.compiled if c.side_changes]
    lines += ["", "Each compiled profile projects a compiled run (its sides in between inferred along "
                  "the eager profile beside it):", ""]
    return lines + [f"    {c.project_command}" for c in q.compiled if c.project_command]


def _campaign_lines(c: CampaignFigures | None) -> list[str]:
    """The short campaign's section of qualify.md."""
    lines = ["", "## The short campaign", ""]
    if c is None:
        return lines + ["The campaign did not run (the parts above say why)."]
    lines += [f"**Verdict: {c.verdict}.**", ""] if c.verdict else []      # none in a record before 2026-11-28
    lines += [f"Results: `{c.folder}`; its report: `{REPORT}`."]
    if c.ema:
        lines += ["", c.ema]
    lines += ["", "| run | status | minutes | top-1 first / last eval (chance "
              f"{c.chance:.3f}) | energy (kJ) | first window / steady | first eval / later "
              "| side changes: window / steady, seconds lost |",
              "|---|---|---|---|---|---|---|---|"]
    for r in c.runs:
        changes = "; ".join(f"{s['before']}->{s['after']} px {s['ratio']:.2f}x {s['lost_s']:.2f} s"
                            + (" (an evaluation in it)" if s["evaluated"] else "")
                            for s in r.side_changes) or "—"
        top1 = (f"{r.first_top1:.3f} / {r.last_top1:.3f} ({r.evaluations} evals, {r.steps} steps)"
                if r.first_top1 is not None and r.last_top1 is not None else "not evaluated")
        lines.append(f"| {r.run} | {r.status} | {_num(r.minutes, '{:.3f}')} | {top1} | "
                     f"{_num(None if r.joules is None else r.joules / 1000, '{:.4g}', 'not measured')} | "
                     f"{_num(r.first_window_ratio, '{:.2f}x')} | {_num(r.first_eval_ratio, '{:.2f}x')} "
                     f"| {changes} |")
    lines += ["", "Energy: " + (f"{c.kwh:.4g} kWh for the campaign ({c.energy_note})" if c.kwh is not None
                                else c.energy_note or "not measured"),
              "", f"Energy check: {c.energy_check}"]
    return lines


def closing_line(q: Qualification, path: Path) -> str:
    """qualify's last line: what was measured and what was not, whether the recipe learned,
    what to do next, and where the record is."""
    said = [f"{'interrupted by ' + q.interrupted + ' after' if q.interrupted else 'done in'} "
            f"{q.elapsed_minutes:.2f} min of {q.budget_minutes:g}: {outcomes_line(q.parts)}."]
    if q.campaign is not None and q.campaign.learned is not None:
        lasts = " and ".join(f"{r.last_top1:.3f}" for r in q.campaign.runs if r.last_top1 is not None)
        said.append(f"The recipe learned here (last top-1 {lasts}, chance {q.campaign.chance:.3f})."
                    if q.campaign.learned else "The recipe did NOT learn here: qualify.md's verdict says what "
                                               "to check.")
    failed = [p.name for p in q.parts if p.status == FAILED]
    if failed:
        said.append(f"{', '.join(failed)} failed: {path.parent / LOG} says why.")
    short = [p for p in q.parts if p.status in (LEFT_OUT, STOPPED)]
    if q.interrupted:
        said.append("The same command again redoes every part (the data are reused).")
    elif short:
        # a part stopped at the budget's end took more than its seconds so far
        needed = q.elapsed_minutes * 60 + sum(max(p.estimate_s, p.seconds or 0) for p in short) + RECORD_RESERVE_S
        said.append(f"Give minutes={math.ceil(needed / 60)} to measure {', '.join(p.name for p in short)}.")
    return " ".join(said + [f"The record: {path}"])
