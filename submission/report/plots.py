"""PNG plots of a campaign, drawn from its MLPerf result logs (and progress records where kept).

They need nothing the harness alone writes, so they work on anybody's MLPerf ResNet
folders: `<system>/resnet/result_*.txt`, optionally `<system>/progress/run_<i>.jsonl` (the
progress records train.py writes, see submission.progress) and `campaign.json` (for the
target; without it the MLPerf ResNet target 75.9% is drawn).

  accuracy.png    top-1 at each evaluation vs minutes since run_start, every run, target line
  throughput.png  training img/s over the run, from the progress window records
  systems.png     the systems beside this one: olympic minutes and cost per run

A run with only the text log `progress/run_<i>.log` (campaigns made before the records)
has no throughput figures: the printed lines are for people and are not read back.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from ..progress import read_progress, windows
from ..results import RULESET, Summary, read_campaign
from ..run_folder import CampaignFolder

MLPERF_RESNET_TARGET = 0.759     # MLPerf Training ResNet-50 quality target (top-1)


@dataclass
class Target:
    accuracy: float
    source: str          # where the value comes from, for legends and the report


def target_of(system_dir: Path) -> Target:
    campaign = read_campaign(system_dir)
    settings = campaign.settings if campaign else {}
    if isinstance(settings.get("target_accuracy"), (int, float)):
        return Target(float(settings["target_accuracy"]), "campaign.json target_accuracy")
    return Target(MLPERF_RESNET_TARGET, "MLPerf ResNet-50 target (no campaign.json)")


def eval_points(path: Path) -> list[tuple[float, float]]:
    """(minutes since run_start, top-1) of every eval_accuracy line of one result file."""
    from mlperf_logging.compliance_checker.mlp_parser import parse_file

    loglines, _ = parse_file(str(path), ruleset=RULESET)
    start = next((line.timestamp for line in loglines if line.key == "run_start"), None)
    if start is None:
        return []
    return [((line.timestamp - start) / 60000, float(line.value["value"]))
            for line in loglines if line.key == "eval_accuracy"]


def progress_points(path: Path) -> list[tuple[float, float, int]]:
    """(minutes since the run's reporter started, img/s, side px) of each window of one
    progress file."""
    return [(w["minutes"], w["img_per_s"], w["side"]) for w in windows(read_progress(path))]


def progress_files(system_dir: Path) -> dict[str, Path]:
    """result file name -> its progress records, for the runs that have them."""
    folder = CampaignFolder(Path(system_dir))
    found = {}
    for result in folder.result_files():
        path = folder.progress_of(result)
        if path is not None and path.is_file():
            found[result.name] = path
    return found


def text_only_note(system_dir: Path) -> str | None:
    """One line naming the progress records missing beside printed logs (runs made before
    the records), or None when no run is in that state."""
    folder = CampaignFolder(Path(system_dir))
    progress = [(folder.progress_of(result), folder.progress_of(result, ".log")) for result in folder.result_files()]
    missing = [records for records, printed in progress
               if records and printed and printed.is_file() and not records.is_file()]
    if not missing:
        return None
    names = ", ".join(f"`{path.relative_to(system_dir)}`" for path in missing)
    return (f"Missing {names}: {'this run has' if len(missing) == 1 else 'these runs have'} only "
            "the printed progress lines (`.log`, a campaign from before the progress records), "
            "which are not read back: no throughput plot or steadiness check for "
            f"{'it' if len(missing) == 1 else 'them'}.")


def _save(fig: Figure, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def accuracy_plot(system_dir: Path, out: Path) -> Path | None:
    system_dir = Path(system_dir)
    files = CampaignFolder(system_dir).result_files()
    if not files:
        return None
    target = target_of(system_dir)
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for path in files:
        points = eval_points(path)
        if points:
            ax.plot([m for m, _ in points], [a * 100 for _, a in points], marker="o", label=path.stem)
    ax.axhline(target.accuracy * 100, color="black", linestyle="--",
               label=f"target {target.accuracy:.1%} ({target.source})")
    ax.set_xlabel("minutes since run_start")
    ax.set_xlim(left=0)
    ax.set_ylabel("top-1 accuracy (%)")
    ax.set_title(f"{system_dir.name}: evaluation accuracy of every run")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return _save(fig, out)


def throughput_plot(system_dir: Path, out: Path) -> Path | None:
    files = progress_files(system_dir)
    series = {name: progress_points(path) for name, path in files.items()}
    series = {name: points for name, points in series.items() if points}
    if not series:
        return None
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for name, points in series.items():
        ax.plot([m for m, _, _ in points], [r for _, r, _ in points], marker=".",
                label=Path(name).stem)
    first = next(iter(series.values()))
    previous = None
    for minutes, rate, side in first:     # where the training side changes, on one run
        if side != previous:
            ax.annotate(f"{side}px", (minutes, rate), fontsize=7, textcoords="offset points",
                        xytext=(0, 5), ha="center")
        previous = side
    ax.set_xlabel("minutes since the start of training")
    ax.set_ylabel("training throughput (img/s, whole system)")
    ax.set_title(f"{Path(system_dir).name}: throughput per progress window\n"
                 "(training steps only: evaluation time is left out)", fontsize=10)
    ax.set_ylim(bottom=0)
    ax.set_xlim(left=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return _save(fig, out)


def systems_plot(summaries: list[Summary], out: Path) -> Path | None:
    scored = [s for s in summaries if s.score_minutes is not None]
    if not scored:
        return None
    names = [s.system_name for s in scored]
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.2 + 0.3 * len(names)))
    minutes = [s.score_minutes for s in scored if s.score_minutes is not None]
    bars = left.barh(names, minutes, color="tab:blue")
    left.set_xlim(0, max(minutes) * 1.3)
    left.bar_label(bars, labels=[f"{s.score_minutes:.3f} min" for s in scored], fontsize=8, padding=2)
    left.set_xlabel("olympic score (minutes, run_start→run_stop)")
    left.set_title("time to target")
    costs = [s.cost_per_run_usd or 0.0 for s in scored]
    bars = right.barh(names, costs, color="tab:green")
    right.bar_label(bars, labels=["" if s.cost_per_run_usd is None else f"${s.cost_per_run_usd:.2f}"
                                  for s in scored], fontsize=8, padding=2)
    right.set_xlim(0, max(costs) * 1.3 if any(costs) else 1.0)
    for y, s in enumerate(scored):
        if s.cost_per_run_usd is None:
            right.annotate("no price given", (0, y), xytext=(3, -3), textcoords="offset points", fontsize=8)
    right.set_xlabel("mean cost per run (USD)")
    right.set_title("cost per run")
    for ax in (left, right):
        ax.grid(axis="x", alpha=0.3)
    return _save(fig, out)


def draw_all(system_dir: Path, summaries: list[Summary]) -> dict[str, Path]:
    """Every plot that the folder's logs allow, next to summary.md: name -> path."""
    system_dir = Path(system_dir)
    drawn = {
        "accuracy": accuracy_plot(system_dir, system_dir / "accuracy.png"),
        "throughput": throughput_plot(system_dir, system_dir / "throughput.png"),
        "systems": systems_plot(summaries, system_dir / "systems.png"),
    }
    return {name: path for name, path in drawn.items() if path is not None}
