"""Markdown tables of tradeoff curves, returned as lists of lines.

Numbers as the report and summary.md write them: top-1 in percent to 2 decimals, minutes
to 3, costs in dollars to the cent, "—" where there is no value.
"""
from __future__ import annotations

from typing import Any, Iterable, Sequence

from .analysis import CurvePoint, Speedup, TimeToAccuracy, cheapest

EXTRAPOLATED = "*"      # marks a speed-up read off the baseline's curve extended beyond its range


def _fmt(value: Any, spec: str) -> str:
    return "—" if value is None else spec.format(value)


def _percent(fraction: float) -> str:
    return f"{fraction * 100:.2f}%"


def _row(cells: Iterable[Any]) -> str:
    return "| " + " | ".join(str(cell).replace("|", "/") for cell in cells) + " |"


def _table(header: Sequence[str], rows: list[list[Any]]) -> list[str]:
    return [_row(header), "|" + "---|" * len(header)] + [_row(cells) for cells in rows]


def _point_cells(point: CurvePoint) -> list[str]:
    """configuration, budget, mean top-1, mean minutes, mean cost."""
    return [point.configuration, f"{point.budget:g}", _percent(point.top1_mean),
            f"{point.minutes_mean:.3f}", _fmt(point.cost_mean, "${:.2f}")]


POINT_COLUMNS = ("configuration", "budget", "top-1 (mean)", "minutes (mean)", "cost per run (mean)")


def curve_table(curve_points: Iterable[CurvePoint]) -> list[str]:
    """Every configuration at every budget, with the spread of top-1 over its seeds."""
    rows = [[p.configuration, f"{p.budget:g}", p.seeds,
             f"{_percent(p.top1_mean)} ± {p.top1_std * 100:.2f} "
             f"[{p.top1_min * 100:.2f}–{p.top1_max * 100:.2f}]",
             f"{p.minutes_mean:.3f}", _fmt(p.cost_mean, "${:.2f}"),
             _fmt(p.kj_mean, "{:.4g}") if p.kj_mean is not None else "not measured"] for p in curve_points]
    return _table(("configuration", "budget", "seeds", "top-1: mean ± std [min–max] (%)",
                   "minutes (mean)", "cost per run (mean)", "energy per run (kJ, mean)"), rows)


def frontier_table(frontier_points: Iterable[CurvePoint]) -> list[str]:
    """The Pareto frontier as analysis.frontier returns it (least minutes or cost first)."""
    return _table(POINT_COLUMNS, [_point_cells(p) for p in frontier_points])


def cheapest_table(curve_points: Iterable[CurvePoint], targets: Sequence[float],
                   by: str = "minutes") -> list[str]:
    """For each target, the cheapest point (by minutes or cost) whose mean top-1 reaches it."""
    curve_points = list(curve_points)
    rows = []
    for target in targets:
        point = cheapest(curve_points, target, by)
        rows.append([_percent(target)] + (_point_cells(point) if point else
                                          ["none reaches it", "—", "—", "—", "—"]))
    return _table((f"target top-1 (cheapest by {by})",) + POINT_COLUMNS, rows)


def speedup_table(speedups: Sequence[Speedup], baseline: str) -> list[str]:
    """Each point's speed-up over the baseline; extrapolated ones marked, refusals as "—",
    both with their note."""
    rows = []
    for s in speedups:
        mark = EXTRAPOLATED if s.extrapolated else ""
        rows.append([s.configuration, f"{s.budget:g}", _percent(s.top1), f"{s.minutes:.3f}",
                     _fmt(s.baseline_minutes, "{:.3f}") + mark, _fmt(s.ratio, "{:.2f}x") + mark,
                     s.note])
    lines = _table(("configuration", "budget", "top-1 (mean)", "minutes (mean)",
                    f"{baseline} minutes to that top-1", "speed-up", "note"), rows)
    if any(s.extrapolated for s in speedups):
        lines += ["", f"{EXTRAPOLATED} extrapolated: the top-1 lies outside {baseline}'s measured "
                      "range; its curve is extended along its nearest two frontier points."]
    return lines


def time_to_accuracy_table(times: Iterable[TimeToAccuracy]) -> list[str]:
    """Seeds that reached each target and their mean minutes to it."""
    rows = [[t.configuration, f"{t.budget:g}", _percent(t.target), f"{t.reached}/{t.seeds}",
             _fmt(t.minutes_mean, "{:.3f}")] for t in times]
    return _table(("configuration", "budget", "target top-1", "seeds that reached it",
                   "minutes to target (mean of those)"), rows)
