"""tradeoff.md, tradeoff.json and the plots of a grid: what its finished points show.

Measured: top-1 (mean and spread over seeds) against training minutes (run_start to run_stop,
evaluations left out, as the write-ups count) and, at a price, dollars; the Pareto frontier
over every configuration; the cheapest point to each target; each point's speed-up over the
baseline at matched top-1; the time to each target from the evaluations a run took.
Projected (an ImageNet grid with bench profiles): the same points' minutes and dollars on
each system, one frontier each, and where a system changes which point is cheapest.
Published points (ImageNet grids) are drawn beside, never joined to these curves.
"""
from __future__ import annotations

import datetime
from dataclasses import dataclass, field
from pathlib import Path

from .. import published
from ..jsonfile import write_json
from . import analysis, tables
from .analysis import CurvePoint, Point
from .grid import Grid
from .plots import plot_tradeoff

REPORT, NUMBERS = "tradeoff.md", "tradeoff.json"


@dataclass
class Measured:
    """What the report is made of: the grid, where it ran, its finished points."""
    grid: Grid
    system: str                         # the descriptor's short name (p4d, local)
    system_name: str
    machine: str                        # in words: the accelerator or the CPU that ran them
    dataset: str
    price_usd_per_hour: float
    points: list[Point]
    expected: int                       # the grid's points, finished or not
    # system -> the curve points with minutes and cost projected for it (same top-1)
    projected: dict[str, list[CurvePoint]] = field(default_factory=dict)
    projection_notes: list[str] = field(default_factory=list)
    left_out: list[str] = field(default_factory=list)     # points that stopped before their budget's end
    spread_limit: float = analysis.SPREAD_LIMIT          # a run slower than this is flagged
    command_line: dict[str, str] = field(default_factory=dict)   # the settings given to every point

    def disturbed(self) -> list[analysis.Disturbed]:
        return analysis.disturbed(self.points, self.spread_limit)

    def flagged(self) -> frozenset:
        """(configuration, budget) of every point with a disturbed run."""
        return frozenset((d.configuration, d.budget) for d in self.disturbed())

    def redo_commands(self) -> dict[tuple[str, float, int], str]:
        """The command that runs each point of the grid again (its old run kept under attempts/)."""
        given = " ".join(f"{k}={v}" for k, v in self.command_line.items())
        shipped = Path(self.grid.source).parent == Path("submission/grids")
        grid = self.grid.name if shipped else self.grid.source
        return {(p.configuration, p.budget, p.seed):
                f"python -m submission tradeoff grid={grid} point={p.index} redo=true"
                + (f" {given}" if given else "") for p in self.grid.points()}


def _axis(curve_points: list[CurvePoint]) -> str:
    """Cost where every point has one, else minutes."""
    return "cost" if curve_points and all(p.cost_mean is not None for p in curve_points) else "minutes"


def write_report(folder: Path, measured: Measured) -> Path:
    """Write tradeoff.md, tradeoff.json and the PNGs into folder; return the report's path."""
    folder = Path(folder)
    curves = analysis.curve_points(measured.points)
    lines = _header(measured)
    if not curves:
        lines += ["No point has finished yet: nothing to draw."]
    else:
        lines += _measured_sections(folder, measured, curves)
    for system, projected in measured.projected.items():
        if projected:
            lines += _system_section(folder, measured, system, projected)
    if measured.projected and measured.points:
        lines += _order_section(measured)
    lines += _published_section(measured)
    (folder / REPORT).write_text("\n".join(lines) + "\n")
    write_json(folder / NUMBERS, _numbers(measured, curves))
    return folder / REPORT


def _header(measured: Measured) -> list[str]:
    grid = measured.grid
    finished = len(measured.points)
    return [f"# Tradeoff: grid {grid.name} on {measured.system_name}", "",
            f"Written {datetime.datetime.now().isoformat(timespec='seconds')} from `{grid.source}`: "
            f"{len(grid.configurations)} configurations x budgets ({grid.budget_key}) x {len(grid.seeds)} seeds; "
            f"{finished} of {measured.expected} points finished"
            + ("" if finished == measured.expected else
               f" (re-run the same command for the other {measured.expected - finished})") + ".",
            f"Measured on {measured.machine} (system={measured.system}), {measured.dataset}. Each point "
            "trained its whole budget (no target); minutes are run_start to run_stop with the "
            "evaluations left out, dollars those minutes at "
            + (f"${measured.price_usd_per_hour:g}/hour." if measured.price_usd_per_hour else
               "a price, which this system has none of (price_usd_per_hour=)."),
            "These are not MLPerf results: no point has a target, none is scored or packaged.", ""] \
        + [f"Left out: {why}." for why in measured.left_out] + ([""] if measured.left_out else [])


def _disturbed_section(measured: Measured) -> list[str]:
    found = measured.disturbed()
    lines = ["## Disturbed timings", ""]
    if not found:
        return lines + [f"None: no run took more than {measured.spread_limit:g}x its point's fastest seed, "
                        "nor its configuration's other budgets per unit of budget (`spread_limit=` "
                        "changes the factor).", ""]
    return lines + [f"Runs more than {measured.spread_limit:g}x slower than their point's fastest seed, "
                    "or than their configuration's other budgets per unit of budget: the machine was "
                    "likely shared or throttled while they ran. Their minutes are still in the means "
                    f"above, marked {tables.DISTURBED}; each command below runs the point again, its "
                    "old log kept under attempts/.", ""] \
        + tables.disturbed_table(found, measured.redo_commands()) + [""]


def _measured_sections(folder: Path, measured: Measured, curves: list[CurvePoint]) -> list[str]:
    grid, by, flagged = measured.grid, _axis(curves), measured.flagged()
    own = published.points_for(measured.system) if measured.dataset == "imagenet" else []
    lines = ["## Curves (top-1 over the seeds of each point)", ""] + tables.curve_table(curves, flagged) + [""]
    plot_tradeoff(curves, folder / "tradeoff-minutes.png", "minutes", analysis.frontier(curves, "minutes"),
                  own, f"{grid.name} on {measured.system_name}: top-1 against minutes", flagged)
    lines += ["![top-1 against minutes](tradeoff-minutes.png)", ""]
    if by == "cost":
        plot_tradeoff(curves, folder / "tradeoff-cost.png", "cost", analysis.frontier(curves, "cost"),
                      title=f"{grid.name} on {measured.system_name}: top-1 against dollars", flagged=flagged)
        lines += ["![top-1 against dollars](tradeoff-cost.png)", ""]
    lines += _disturbed_section(measured)
    lines += [f"## Pareto frontier (by {by})", "", "Points no other point beats on both top-1 and "
              f"{by}:", ""] + tables.frontier_table(analysis.frontier(curves, by), flagged) + [""]
    if grid.targets:
        lines += [f"## Cheapest point to each target (by {by})", ""]
        lines += tables.cheapest_table(curves, grid.targets, by, flagged) + [""]
    lines += [f"## Speed-up over {grid.baseline} at matched top-1", "",
              f"{grid.baseline}'s minutes to each point's top-1, read along {grid.baseline}'s own "
              "frontier (linear between its points), over the point's minutes:", ""]
    lines += tables.speedup_table(analysis.speedups(curves, grid.baseline), grid.baseline, flagged,
                                  any(name == grid.baseline for name, _ in flagged)) \
        if any(p.configuration == grid.baseline for p in curves) else \
        [f"{grid.baseline} has no finished point yet."]
    if grid.targets:
        times = analysis.times_to_accuracy(measured.points, grid.targets)
        reached = [t for t in times if t.reached]
        lines += ["", "## Time to each target (from the evaluations each run took)", ""]
        lines += (tables.time_to_accuracy_table(reached) + ["", "Points no run of which reached a "
                                                             "target are left out."]
                  if reached else ["No run reached any of the targets."])
    return lines + [""]


def _system_section(folder: Path, measured: Measured, system: str, projected: list[CurvePoint]) -> list[str]:
    by = _axis(projected)
    path = folder / f"tradeoff-{system}.png"
    plot_tradeoff(projected, path, "minutes", analysis.frontier(projected, "minutes"),
                  published.points_for(system), f"{measured.grid.name} projected on {system}")
    lines = [f"## Projected on {system}", "", f"The measured top-1 of each point, its minutes and dollars "
             f"projected for {system} from the bench profiles (`project`'s model):", "",
             f"![projected on {system}]({path.name})", "",
             f"Pareto frontier (by {by}):", ""] + tables.frontier_table(analysis.frontier(projected, by))
    if measured.grid.targets:
        lines += ["", f"Cheapest to each target (by {by}):", ""]
        lines += tables.cheapest_table(projected, measured.grid.targets, by)
    return lines + [""]


def systems_axis(measured: Measured) -> str:
    """The one axis the systems are compared on: dollars where every system has a price, else
    minutes."""
    return _axis([p for projected in measured.projected.values() for p in projected])


def cheapest_by_system(measured: Measured) -> dict[float, dict[str, str]]:
    """target -> system -> "configuration @budget" of its cheapest point ("none" where none
    reaches the target), every system on one axis (systems_axis)."""
    table: dict[float, dict[str, str]] = {}
    by = systems_axis(measured)
    for target in measured.grid.targets:
        for system, projected in measured.projected.items():
            point = analysis.cheapest(projected, target, by)
            table.setdefault(target, {})[system] = (f"{point.configuration} @{point.budget:g}"
                                                    if point else "none")
    return table


def _order_section(measured: Measured) -> list[str]:
    if not measured.grid.targets:
        return ["## Where the system changes the order", "", "The grid names no targets: give it "
                "`targets: [...]` to compare the cheapest point to each between the systems.", ""]
    table = cheapest_by_system(measured)
    systems = list(measured.projected)
    by = "dollars" if systems_axis(measured) == "cost" else "minutes (not every system has a price)"
    lines = ["## Where the system changes the order", "", f"The cheapest point to each target, by {by}:", "",
             "| target top-1 | " + " | ".join(systems) + " |", "|---|" + "---|" * len(systems)]
    differs = []
    for target, by_system in table.items():
        lines.append(f"| {target * 100:.2f}% | " + " | ".join(by_system[s] for s in systems) + " |")
        if len(set(by_system.values())) > 1:
            differs.append(f"{target * 100:.2f}%")
    lines += ["", (f"The cheapest point differs between systems for {', '.join(differs)}."
                   if differs else "Every system has the same cheapest point for each target.")]
    lines += [f"- {note}" for note in measured.projection_notes]
    return lines + [""]


def _published_section(measured: Measured) -> list[str]:
    if measured.dataset != "imagenet":
        return ["## Published points", "", "None drawn: this grid ran on "
                f"{measured.dataset}, whose top-1 is not comparable with ImageNet's "
                "(`python -m submission tradeoff published` draws the write-ups' ImageNet points per system)."]
    return published_table(sorted({measured.system, *measured.projected})) + ablations_table()


def ablations_table() -> list[str]:
    """The write-ups' ablations: pairs of variants at matched budgets, on their hardware."""
    lines = ["## Published ablations (not measured here)", "",
             "Each study compares variants at the same budget; a grid with one configuration per "
             "variant (`{recipe: ..., key: value}`) measures the same comparison here.", "",
             "| study | epochs | variant | top-1 | minutes | img/s | hardware | runs |",
             "|---|---|---|---|---|---|---|---|"]
    lines += [f"| {a.study} | {'-' if a.epochs is None else f'{a.epochs:g}'} | {a.variant} | "
              f"{'-' if a.top1 is None else f'{a.top1 * 100:.2f}%'} | "
              f"{'-' if a.minutes is None else f'{a.minutes:g}'} | "
              f"{'-' if a.img_per_s is None else f'{a.img_per_s:,.0f}'} | {a.hardware} | at least {a.runs} |"
              for a in published.ABLATIONS]
    return lines + ["", f"Source: {published.MOSAIC_ABLATIONS}.", ""]


def published_table(systems: list[str]) -> list[str]:
    """The published tradeoff points of `systems`, with their hardware and source."""
    rows = [p for system in systems for p in published.points_for(system)]
    lines = ["## Published points (not measured here)", "",
             "| configuration | hardware | top-1 | minutes | runs | note | source |",
             "|---|---|---|---|---|---|---|"]
    lines += [f"| {p.configuration} | {p.hardware} | {p.top1 * 100:.1f}% | {p.minutes:g} | {p.runs} | "
              f"{p.note} | {p.source} |" for p in rows]
    return lines + [""] if rows else ["## Published points", "", "None for these systems.", ""]


def _numbers(measured: Measured, curves: list[CurvePoint]) -> dict:
    by = _axis(curves)
    return {
        "grid": measured.grid.to_dict(), "system": measured.system, "system_name": measured.system_name,
        "machine": measured.machine, "dataset": measured.dataset,
        "price_usd_per_hour": measured.price_usd_per_hour,
        "points_finished": len(measured.points), "points_expected": measured.expected,
        "points": [p.to_dict() for p in measured.points],
        "curve_points": [p.to_dict() for p in curves],
        "spread_limit": measured.spread_limit,
        "disturbed": [{**d.to_dict(), "redo": measured.redo_commands()[(d.configuration, d.budget, d.seed)]}
                      for d in measured.disturbed()],
        "frontier": {axis: [p.to_dict() for p in analysis.frontier(curves, axis)]
                     for axis in ("minutes", by)} if curves else {},
        "cheapest": {str(t): (lambda p: p.to_dict() if p else None)(analysis.cheapest(curves, t, by))
                     for t in measured.grid.targets} if curves else {},
        "speedups": [s.to_dict() for s in analysis.speedups(curves, measured.grid.baseline)]
        if any(p.configuration == measured.grid.baseline for p in curves) else [],
        "times_to_accuracy": [t.to_dict() for t in analysis.times_to_accuracy(measured.points, measured.grid.targets)]
        if measured.points and measured.grid.targets else [],
        "projected": {system: [p.to_dict() for p in points] for system, points in measured.projected.items()},
        "projected_frontier": {system: [p.to_dict() for p in analysis.frontier(points, _axis(points))]
                               for system, points in measured.projected.items()},
        "cheapest_by_system": {str(t): v for t, v in cheapest_by_system(measured).items()},
    }
