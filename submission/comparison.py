"""results/comparison.md: every system with results in one results folder, side by side,
with the published figures beside them (labelled, with their sources)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from . import published, score
from .results import CampaignError, read_campaign, read_summary
from .run_folder import CampaignFolder


def compare_systems(results_dir: Path, prices: dict[str, float] | None = None) -> str:
    """Markdown table over every results/<system_name>/ with result files or a summary.
    prices: USD per hour by folder name, used instead of campaign.json's price."""
    rows, unreadable = [], []
    for system_dir in sorted(p for p in Path(results_dir).iterdir() if p.is_dir()):
        try:
            summary = (score.summarize(system_dir, (prices or {}).get(system_dir.name))
                       if CampaignFolder(system_dir).result_files() else read_summary(system_dir))
            if summary is None:
                continue
            campaign = read_campaign(system_dir)
        except CampaignError:       # one damaged system must not hide the others
            unreadable.append(system_dir)
            continue
        short = campaign.system if campaign else ""
        name = system_dir.name + (f" ({short})" if short and short != system_dir.name else "")
        rows.append("| " + " | ".join([
            name, str(len(summary.runs)), _fmt(summary.score_minutes, "{:.3f}"),
            "yes" if summary.valid else "no", _fmt(summary.cost_per_run_usd, "${:.2f}"),
            _fmt(summary.mean_img_per_s, "{:,.0f}"),
            _fmt(summary.campaign_kwh, "{:.4g}", "not measured")]) + " |")
    header = ["# ResNet-50: systems compared", "",
              "| system | runs | score (min) | valid | mean cost per run | mean img/s | energy of the campaign (kWh) |",
              "|---|---|---|---|---|---|---|"]
    published_rows, notes = published_table_rows()
    footer = ["", "Score: MLPerf olympic mean of run_stop - run_start over 5 runs. "
              f"Throughput: {score.IMG_S_LABEL}. Energy: run_start to run_stop, all ranks, as "
              "the hardware's counters read it (summary.md names them, or why not measured). "
              "Per-system details: <system>/summary.md.",
              "", "Rows marked *published* were not run by this project (their img/s is the "
              "write-up's training throughput, not run_start→run_stop); their sources:", ""] + notes
    if not rows:
        header.insert(2, "No system has results here yet; published figures only.\n")
    if unreadable:
        footer += ["", "Left out, their campaign.json cannot be read (or, in a folder of a summary alone, "
                   "its summary.json; `python -m submission score FOLDER` says why): "
                   + ", ".join(str(d) for d in unreadable)]
    return "\n".join(header + rows + published_rows + footer) + "\n"


def published_table_rows() -> tuple[list[str], list[str]]:
    """Rows of the published figures in the comparison table's columns, and the
    numbered source notes they cite."""
    sources = published.sources() + [r.source for r in published.CLOSED_RECORDS]
    cite = {source: f"[{i}]" for i, source in enumerate(sources, start=1)}
    rows = [f"| *published* {t.label}, to {t.target:.1%} top-1, {t.hardware} {cite[t.source]} | "
            f"{t.runs} | {t.minutes:.2f} | (published) | — | — | — |" for t in published.TIMES]
    rows += [f"| *published* {t.label} throughput, {t.hardware} {cite[t.source]} | — | — | — | — | "
             f"{t.img_per_s:,.0f} | — |" for t in published.THROUGHPUTS]
    rows += [f"| *published*, *another recipe* MLPerf {r.round} closed, {r.system}, to {r.target:.1%} "
             f"top-1, {r.hardware} {cite[r.source]} | {r.runs} | {r.minutes:.2f} | (published) | — | — | — |"
             for r in published.CLOSED_RECORDS]
    return rows, [f"{cite[s]} {s}" for s in sources] + [
        "", f"Rows marked *another recipe* ran {published.ANOTHER_RECIPE}: beside the other rows, "
            "joined to none of them."]


def write_comparison(results_dir: Path) -> Path:
    path = Path(results_dir) / "comparison.md"
    path.write_text(compare_systems(results_dir))
    return path


def _fmt(value: Any, spec: str, none: str = "—") -> str:
    return none if value is None else spec.format(value)
