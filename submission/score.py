"""Scores of a campaign: per-run figures and the MLPerf olympic mean.

Result files are read with mlperf_logging's own parser, the olympic mean is the
official result summarizer's `_compute_olympic_average`, and the score is multiplied by
the benchmark folder's `scaling.json` factor with the summarizer's `_get_scaling_factor`
(review committees add that file), so the score printed here is the one
`python -m mlperf_logging.result_summarizer` prints for the same files.

A run counts as converged when the summarizer's own reader accepts it (the official
compliance checker passes and every line parses: submission.compliance
.summarizer_rejection) and its run_stop says `status: success`. A run that stopped
`aborted`, one without run_stop (`incomplete`) and one the summarizer rejects count as
dropped (non-converged) runs: the olympic mean then drops only the fastest converged
run (the dropped run stands for the slowest). MLPerf ResNet needs exactly 5 result
files and allows 1 dropped run. One difference is deliberate: in the open division the
official summarizer does not look at run_stop's status and would time an aborted run
as if it had converged; here it is dropped.
"""
from __future__ import annotations

import dataclasses
import statistics
from pathlib import Path
from typing import Any

from .costs import usd
from .energy import Energy
from .progress import read_progress, run_energy
from .results import RULESET, RunResult, Summary, read_campaign
from .results import write_summary as write_summary_files
from .run_folder import BENCHMARK, CampaignFolder

REQUIRED_RUNS = 5           # mlperf_logging.benchmark_meta: training resnet
MAX_DROPPED = 1             # the summarizer: 1 for every training benchmark but unet3d
IMG_S_LABEL = "img/s (run_start→run_stop, eval included)"
SCORE_RULE = (f"MLPerf olympic mean of {REQUIRED_RUNS} runs (run_stop - run_start, minutes): drop the "
              f"fastest and the slowest; at most {MAX_DROPPED} non-converged run, which counts as the slowest")

# ---------------------------------------------------------------------------
def require_result_files(system_dir: Path) -> list[Path]:
    """system_dir's result files, or a ValueError saying which folder to give instead."""
    system_dir = Path(system_dir)
    files = CampaignFolder(system_dir).result_files()
    if files:
        return files
    hint = "give a results/<system_name> folder"
    if system_dir.name == BENCHMARK and CampaignFolder(system_dir.parent).result_files():
        hint = f"give the folder above it, {system_dir.parent}"
    elif systems := sorted(d.name for d in system_dir.glob("*/") if CampaignFolder(d).result_files()):
        hint = (f"it holds the systems {', '.join(systems)}: give one of them, "
                f"e.g. {system_dir / systems[0]}")
    raise ValueError(f"{system_dir} holds no {BENCHMARK}/result_*.txt: {hint}")


def read_run(path: Path, price_usd_per_hour: float = 0.0, ruleset: str = RULESET) -> RunResult:
    """One result file -> its figures (nothing raised for a partial or odd file)."""
    from mlperf_logging.compliance_checker.mlp_parser import parse_file

    from .compliance import summarizer_rejection

    loglines, failed = parse_file(str(path), ruleset=ruleset)
    first: dict[str, Any] = {}
    seed = train_samples = accuracy = last_epoch = None
    for line in loglines:
        value = line.value.get("value")
        metadata = line.value.get("metadata") or {}
        first.setdefault(line.key, line)
        if line.key == "seed" and seed is None:
            seed = _as_int(value)
        elif line.key == "train_samples" and train_samples is None:
            train_samples = _as_int(value)
        elif line.key == "eval_accuracy":
            accuracy = _as_float(value)
        if "epoch_num" in metadata and line.key != "run_stop":
            last_epoch = _as_float(metadata["epoch_num"])

    start, stop = first.get("run_start"), first.get("run_stop")
    reason = ""
    if stop is None:
        status = "incomplete"
        reason = "no run_stop" if start is not None else "no run_start"
        epochs = last_epoch
    else:
        stop_meta = stop.value.get("metadata") or {}
        status = "success" if str(stop_meta.get("status", "")).lower() == "success" else "aborted"
        reason = str(stop_meta.get("reason", ""))
        epochs = _as_float(stop_meta["epoch_num"]) if "epoch_num" in stop_meta else last_epoch
    minutes = (stop.timestamp - start.timestamp) / 60000 if start and stop else None
    if failed:
        reason = "; ".join(filter(None, [reason, f"{len(failed)} line(s) the MLPerf parser cannot read"]))

    img_per_s = None
    if minutes and train_samples and epochs is not None:
        img_per_s = train_samples * epochs / (minutes * 60)
    cost = usd(minutes, price_usd_per_hour) if minutes is not None else None
    return RunResult(file=Path(path).name, seed=seed, status=status, epochs=epochs,
                     accuracy=accuracy, minutes=minutes, train_samples=train_samples,
                     img_per_s=img_per_s, cost_usd=cost, reason=reason,
                     unreadable_lines=len(failed), rejected=summarizer_rejection(path, ruleset))


def run_energy_of(result: Path) -> Energy:
    """The energy of the run whose MLPerf log is `result` (resnet/result_<i>.txt), from the
    progress records beside it (progress/run_<i>.jsonl); never a guess: a run without a
    record says why."""
    records = CampaignFolder(Path(result).parent.parent).progress_of(result)
    if records is None or not records.is_file():
        return Energy(None, 0.0, not_measured="no progress records beside the log "
                                              "(progress/run_<i>.jsonl)")
    found = run_energy(read_progress(records))
    return found or Energy(None, 0.0, not_measured=f"{records.name} holds no energy record (a run "
                                                   "from before energy was measured, or one that did not finish)")


def olympic_score(runs: list[RunResult]) -> tuple[float | None, int]:
    """(score, dropped) as the MLPerf result summarizer computes it.

    Converged run times go to the summarizer's `_compute_olympic_average`; every other
    run is a dropped score. With more than MAX_DROPPED dropped runs the summarizer
    reports no score, and neither does this.
    """
    from mlperf_logging.result_summarizer.result_summarizer import _compute_olympic_average

    scores = [r.minutes for r in runs if r.converged and r.minutes is not None]
    dropped = len(runs) - len(scores)
    if dropped > MAX_DROPPED:
        return None, dropped
    return _compute_olympic_average(sorted(scores), dropped, max_dropped_scores=MAX_DROPPED), dropped


def scaling_factor(system_dir: Path) -> float:
    """The summarizer's factor from system_dir/resnet/scaling.json (1.0 without the file)."""
    from mlperf_logging.result_summarizer.result_summarizer import _get_scaling_factor

    folder = CampaignFolder(Path(system_dir)).benchmark
    try:
        return float(_get_scaling_factor(str(folder)))
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{folder / 'scaling.json'} is not a scaling file the MLPerf result "
                         f"summarizer can read ({type(exc).__name__}: {exc}); it must be "
                         '{"scaling_factor": <number>}') from None


def _with_energy(run: RunResult, used: Energy) -> RunResult:
    return dataclasses.replace(run, energy_j=used.joules,
                               energy_note=used.source if used.measured else f"not measured: {used.not_measured}")


def summarize(system_dir: Path, price_usd_per_hour: float | None = 0.0,
              ruleset: str = RULESET) -> Summary:
    """Score the result files of one system (results/<system_name>/).

    price_usd_per_hour: hourly price of the whole system; when 0 or None it is read
    from campaign.json (config settings price_usd_per_hour); 0 there means no cost.
    ruleset: the one the official compliance checker judges each file by.
    """
    system_dir = Path(system_dir)
    price = float(price_usd_per_hour or 0.0) or _campaign_price(system_dir)
    runs = [_with_energy(read_run(p, price, ruleset), run_energy_of(p))
            for p in CampaignFolder(system_dir).result_files()]
    factor = scaling_factor(system_dir)
    score, dropped = olympic_score(runs)
    if score is not None:
        score *= factor

    reasons = []
    n = len(runs)
    if n == 0:
        reasons.append(f"no result files in {CampaignFolder(system_dir).benchmark}")
    elif n < REQUIRED_RUNS:
        reasons.append(f"only {n} run{'s' if n != 1 else ''}: MLPerf ResNet needs exactly {REQUIRED_RUNS}")
    elif n > REQUIRED_RUNS:
        reasons.append(f"{n} runs: MLPerf ResNet needs exactly {REQUIRED_RUNS}")
    if dropped > MAX_DROPPED:
        reasons.append(f"{dropped} runs did not reach the target: at most {MAX_DROPPED} may be dropped")
    for run in runs:
        if run.unreadable_lines:
            reasons.append(f"{run.file} has {run.unreadable_lines} line(s) the MLPerf parser cannot read")
    seeds = [r.seed for r in runs if r.seed is not None]
    if len(set(seeds)) != len(seeds):
        reasons.append("two or more runs used the same seed: each run needs a different seed")
    if n and any(r.seed is None for r in runs):
        reasons.append("a run logged no seed")
    if n and score is None and dropped <= MAX_DROPPED:
        reasons.append("too few converged runs to compute an olympic mean")

    costs = [r.cost_usd for r in runs if r.cost_usd is not None]
    return Summary(system_name=system_dir.name, runs=runs, score_minutes=score,
                   valid=not reasons and score is not None, reasons=reasons,
                   cost_per_run_usd=statistics.fmean(costs) if costs else None,
                   price_usd_per_hour=price, dropped=dropped, scaling_factor=factor,
                   img_per_s_definition=IMG_S_LABEL, score_rule=SCORE_RULE)


# ---------------------------------------------------------------------------
def summary_markdown(summary: Summary) -> str:
    lines = [f"# ResNet-50 results: {summary.system_name}", "",
             f"| run | seed | status | epochs | top-1 | minutes | {IMG_S_LABEL} | cost (USD) | energy (kJ) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for run in summary.runs:
        status = run.status + (f" ({run.reason})" if run.reason else "")
        if run.rejected:
            status += f"; dropped by the official summarizer: {run.rejected}"
        lines.append("| " + " | ".join([
            run.file, _fmt(run.seed, "{}"), status.replace("|", "/"), _fmt(run.epochs, "{:.4g}"),
            _fmt(None if run.accuracy is None else run.accuracy * 100, "{:.2f}%"),
            _fmt(run.minutes, "{:.3f}"), _fmt(run.img_per_s, "{:,.0f}"),
            _fmt(run.cost_usd, "{:.2f}"),
            "not measured" if run.energy_j is None else f"{run.energy_j / 1000:.4g}"]) + " |")
    lines.append("")
    if summary.score_minutes is None:
        lines.append("**Score:** none (no olympic mean can be computed from these runs).")
    else:
        how = ("drop the fastest and the slowest, mean of the rest" if summary.dropped == 0 else
               f"{summary.dropped} non-converged run dropped as the slowest, the fastest dropped, "
               "mean of the rest")
        scaled = ("" if summary.scaling_factor == 1.0 else
                  f", x {summary.scaling_factor:g} from {BENCHMARK}/scaling.json")
        lines.append(f"**Score: {summary.score_minutes:.3f} minutes** (MLPerf olympic mean: {how}{scaled}).")
    lines.append("")
    if summary.valid:
        lines.append(f"Valid MLPerf ResNet score: {len(summary.runs)} runs, "
                     f"{summary.dropped} dropped (at most {MAX_DROPPED} allowed).")
    else:
        lines.append("**Not a valid MLPerf ResNet score:**")
        lines += [f"- {reason}" for reason in summary.reasons]
    lines.append("")
    if summary.cost_per_run_usd is not None:
        lines.append(f"Cost at ${summary.price_usd_per_hour:g}/hour for the whole system: "
                     f"${summary.cost_per_run_usd:.2f} per run on average.")
    else:
        lines.append("Cost: no price given (price_usd_per_hour).")
    kwh = summary.campaign_kwh
    lines.append((f"Energy: {kwh:.4g} kWh for the campaign's {len(summary.runs)} runs, run_start to "
                  f"run_stop ({summary.energy_note})." if kwh is not None else
                  f"Energy: {summary.energy_note or 'not measured'}.") if summary.runs else "Energy: no runs.")
    lines.append("Throughput: training samples x epochs / (run_stop - run_start); "
                 "evaluation time is included.")
    return "\n".join(lines) + "\n"


def write_summary(system_dir: Path, summary: Summary) -> tuple[Path, Path]:
    """system_dir/summary.md and system_dir/summary.json."""
    return write_summary_files(system_dir, summary, summary_markdown(summary))


def _campaign_price(system_dir: Path) -> float:
    record = read_campaign(system_dir)
    return record.price_usd_per_hour if record else 0.0


def _as_int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _as_float(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _fmt(value: Any, spec: str) -> str:
    return "—" if value is None else spec.format(value)
