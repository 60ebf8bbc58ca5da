"""results/<system>/report.md: the plots and tables of one system's campaign.

    python -m submission report RESULTS/<system_name> [price_usd_per_hour=USD_PER_HOUR]

Tables come from submission.score (the same Summary and formatting as summary.md and
comparison.md), so every number here is the scoring code's. Works on any MLPerf ResNet
results folder (`<system>/resnet/result_*.txt`), with or without the harness's
campaign.json, progress records (`progress/run_<i>.jsonl`) or bench profile.
"""
from __future__ import annotations

import datetime
from pathlib import Path

from .. import bench_profile, comparison, score
from ..loader_kinds import kind_of
from ..options import ReportOptions
from ..results import Summary, read_campaign
from ..run_folder import CampaignFolder
from . import plots, steadiness

PROFILE_GLOB = "profile*.json"   # bench profiles (`python -m submission bench ... json=FILE`) kept here


def sibling_summaries(system_dir: Path, price: float | None) -> list[Summary]:
    """This system's summary first, then every other system in the same results folder."""
    system_dir = Path(system_dir).resolve()
    own = score.summarize(system_dir, price)
    others = [score.summarize(d) for d in sorted(system_dir.parent.iterdir())
              if d.is_dir() and d != system_dir and CampaignFolder(d).result_files()]
    return [own] + others


def _body(markdown: str) -> list[str]:
    """A markdown document without its title line."""
    lines = markdown.rstrip("\n").splitlines()
    return lines[2:] if lines and lines[0].startswith("# ") else lines


def _bench_section(system_dir: Path) -> list[str]:
    profiles = sorted(Path(system_dir).glob(PROFILE_GLOB))
    if not profiles:
        return [f"No bench profile in this folder. `python -m submission bench system=NAME "
                f"json={Path(system_dir) / 'profile.json'}` measures one; `python -m submission "
                "project system=NAME profile=FILE` projects a run from it."]
    lines = []
    for path in profiles:
        try:
            profile = bench_profile.read(path)
        except bench_profile.ProfileError as exc:
            lines += [f"{path.name}: not a readable bench profile ({exc})", ""]
            continue
        measured, settings, loader = profile.measured, profile.settings, profile.loader
        lines += [f"`{path.name}`: measured {measured.date or '?'} on {measured.host or '?'}, "
                  f"device {measured.device_name or '?'}, torch {measured.torch or '?'}; "
                  f"batch {settings.get('batch_per_device')} per process, precision "
                  f"{settings.get('precision')}, {settings.get('workers_per_device')} loader threads.", "",
                  "| what (per process) | img/s |", "|---|---|"]
        lines += [f"| training step at {side} px (synthetic batches) | {step.img_per_s:,.1f} |"
                  for side, step in sorted(profile.train_step.items())]
        lines.append(f"| evaluation at {settings.get('eval_resolution')} px | {profile.eval_img_per_s:,.1f} |")
        lines += [f"| {kind_of(loader.kind).name} train loader alone, {loader.threads} threads | "
                  f"{loader.img_per_s:,.1f} |", ""]
    return lines


def _cost_section(system_dir: Path, summary: Summary, price: float | None) -> list[str]:
    campaign = read_campaign(system_dir)
    settings = campaign.settings if campaign else {}
    if not summary.price_usd_per_hour:
        return ["No price: pass `price_usd_per_hour=USD_PER_HOUR` here, or to the campaign "
                "(with `price_source=` and `price_date=`)."]
    source = settings.get("price_source") or "source not given"
    date = settings.get("price_date") or "date not given"
    if price and price != settings.get("price_usd_per_hour"):
        source, date = "given explicitly, not campaign.json's price", "no source or date given"
    mean = "—" if summary.cost_per_run_usd is None else f"${summary.cost_per_run_usd:.2f}"
    return [f"${summary.price_usd_per_hour:g} per hour for the whole system ({source}; {date}): "
            f"{mean} per run on average (run_start→run_stop only)."]


def build_report(system_dir: Path, price: float | None = None) -> tuple[str, dict[str, Path]]:
    system_dir = Path(system_dir)
    summaries = sibling_summaries(system_dir, price)
    summary = summaries[0]
    drawn = plots.draw_all(system_dir, summaries)
    campaign = read_campaign(system_dir)
    target = plots.target_of(system_dir)
    if campaign:
        origin = (f"Campaign of system `{campaign.system}`, recipe `{campaign.settings.get('recipe')}`, "
                  f"target {target.accuracy:.1%} top-1, started {campaign.created or '?'}.")
    else:
        origin = ("No campaign.json: MLPerf result logs read as they are (drawn target: "
                  f"{target.source}, {target.accuracy:.1%}).")
    lines = [f"# ResNet-50 report: {summary.system_name}", "", origin,
             f"Written {datetime.datetime.now().isoformat(timespec='seconds')} by "
             f"`python -m submission report {system_dir}`.", "", "## Runs and score", ""]
    lines += _body(score.summary_markdown(summary))
    lines += ["", "## Accuracy over time", ""]
    lines.append("![top-1 vs minutes](accuracy.png)" if "accuracy" in drawn else "No evaluation in the logs.")
    lines += ["", "## Throughput over the run", ""]
    text_only = plots.text_only_note(system_dir)     # runs with printed lines alone
    if "throughput" in drawn:
        lines.append("![img/s vs minutes](throughput.png)")
        lines.append("From the progress records kept in `progress/run_<i>.jsonl`; each point is one "
                     "window of progress_every_steps steps, evaluation time left out.")
        lines += ["", text_only] if text_only else []
    else:
        lines.append(text_only or "No progress records (`progress/run_<i>.jsonl`) with windows: "
                                  "no throughput plot.")
    lines += ["", "## Steadiness of the timed region", ""] + steadiness.markdown(system_dir)
    lines += ["", "## Systems compared", ""]
    if "systems" in drawn:
        lines += ["![minutes and cost per system](systems.png)", ""]
    lines += _body(comparison.compare_systems(system_dir.parent, {system_dir.resolve().name: price} if price else None))
    lines += ["", "## Bench figures", ""] + _bench_section(system_dir)
    lines += ["", "## Cost", ""] + _cost_section(system_dir, summary, price)
    return "\n".join(lines) + "\n", drawn


def write_report(system_dir: Path, price: float | None = None) -> Path:
    text, _ = build_report(system_dir, price)
    path = CampaignFolder(Path(system_dir)).report
    path.write_text(text)
    return path


def main(options: ReportOptions, words: list[str]) -> int:
    if len(words) != 1 or "=" in words[0]:
        raise ValueError("report takes one results folder, results/<system_name> (any folder with "
                         f"resnet/result_*.txt), and price_usd_per_hour=P, not {' '.join(words) or 'none'}")
    folder = Path(words[0])
    score.require_result_files(folder)
    path = write_report(folder, options.price_usd_per_hour or None)
    print("\n".join(steadiness.markdown(folder)) + "\n")
    print(f"report: {path}")
    for png in sorted(folder.glob("*.png")):
        print(f"plot: {png}")
    return 0
