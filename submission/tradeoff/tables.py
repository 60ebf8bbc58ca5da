"""Markdown tables of tradeoff curves, returned as lists of lines.

Numbers as the report and summary.md write them: top-1 in percent to 2 decimals, minutes
to 3 (a point's mean, then [min–max] over its seeds where they differ), costs in dollars to
the cent, "—" where there is no value. A point with a disturbed timing among its runs is
marked DISTURBED wherever it is an input.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from .analysis import CurvePoint, Disturbed, Speedup, TimeToAccuracy, cheapest

EXTRAPOLATED = "*"      # marks a speed-up read off the baseline's curve extended beyond its range
DISTURBED = "†"         # marks a point one of whose runs has a disturbed timing
Flagged = frozenset     # of (configuration, budget)
NOTHING_FLAGGED: Flagged = frozenset()


def _fmt(value: Any, spec: str) -> str:
    return "—" if value is None else spec.format(value)


def _percent(fraction: float) -> str:
    return f"{fraction * 100:.2f}%"


def _row(cells: Iterable[Any]) -> str:
    return "| " + " | ".join(str(cell).replace("|", "/") for cell in cells) + " |"


def _table(header: Sequence[str], rows: list[list[Any]]) -> list[str]:
    return [_row(header), "|" + "---|" * len(header)] + [_row(cells) for cells in rows]


def _minutes(point: CurvePoint) -> str:
    """Mean minutes, and their [min–max] over the seeds where they differ."""
    if point.minutes_min == point.minutes_max:
        return f"{point.minutes_mean:.3f}"
    return f"{point.minutes_mean:.3f} [{point.minutes_min:.3f}–{point.minutes_max:.3f}]"


def _name(configuration: str, budget: float, flagged: Flagged) -> str:
    return configuration + (f" {DISTURBED}" if (configuration, budget) in flagged else "")


def _footnote(marked: bool) -> list[str]:
    return (["", f"{DISTURBED} a run of this point has a disturbed timing (Disturbed timings): its "
                 "minutes are in the mean; redo it for a clean one."] if marked else [])


def _point_cells(point: CurvePoint, flagged: Flagged = NOTHING_FLAGGED) -> list[str]:
    """configuration, budget, mean top-1, minutes (mean [min–max]), mean cost."""
    return [_name(point.configuration, point.budget, flagged), f"{point.budget:g}",
            _percent(point.top1_mean), _minutes(point), _fmt(point.cost_mean, "${:.2f}")]


POINT_COLUMNS = ("configuration", "budget", "top-1 (mean)", "minutes: mean [min–max]", "cost per run (mean)")


def _marked(points: Iterable[CurvePoint | None], flagged: Flagged) -> bool:
    return any(p is not None and (p.configuration, p.budget) in flagged for p in points)


def curve_table(curve_points: Iterable[CurvePoint], flagged: Flagged = NOTHING_FLAGGED) -> list[str]:
    """Every configuration at every budget, with the spread of top-1 and of minutes over its seeds."""
    curve_points = list(curve_points)
    rows = [[_name(p.configuration, p.budget, flagged), f"{p.budget:g}", p.seeds,
             f"{_percent(p.top1_mean)} ± {p.top1_std * 100:.2f} "
             f"[{p.top1_min * 100:.2f}–{p.top1_max * 100:.2f}]",
             _minutes(p), _fmt(p.cost_mean, "${:.2f}"),
             _fmt(p.kj_mean, "{:.4g}") if p.kj_mean is not None else "not measured"] for p in curve_points]
    return _table(("configuration", "budget", "seeds", "top-1: mean ± std [min–max] (%)",
                   "minutes: mean [min–max]", "cost per run (mean)", "energy per run (kJ, mean)"),
                  rows) + _footnote(_marked(curve_points, flagged))


def frontier_table(frontier_points: Iterable[CurvePoint], flagged: Flagged = NOTHING_FLAGGED) -> list[str]:
    """The Pareto frontier as analysis.frontier returns it (least minutes or cost first)."""
    frontier_points = list(frontier_points)
    return (_table(POINT_COLUMNS, [_point_cells(p, flagged) for p in frontier_points])
            + _footnote(_marked(frontier_points, flagged)))


def cheapest_table(curve_points: Iterable[CurvePoint], targets: Sequence[float],
                   by: str = "minutes", flagged: Flagged = NOTHING_FLAGGED) -> list[str]:
    """For each target, the cheapest point (by minutes or cost) whose mean top-1 reaches it."""
    curve_points = list(curve_points)
    rows, chosen = [], []
    for target in targets:
        point = cheapest(curve_points, target, by)
        chosen.append(point)
        rows.append([_percent(target)] + (_point_cells(point, flagged) if point else
                                          ["none reaches it", "—", "—", "—", "—"]))
    return (_table((f"target top-1 (cheapest by {by})",) + POINT_COLUMNS, rows)
            + _footnote(_marked(chosen, flagged)))


def speedup_table(speedups: Sequence[Speedup], baseline: str, flagged: Flagged = NOTHING_FLAGGED,
                  baseline_flagged: bool = False) -> list[str]:
    """Each point's speed-up over the baseline; extrapolated ones marked, refusals as "—",
    both with their note; points with a disturbed run marked, and whether the baseline's
    curve has one."""
    rows = []
    for s in speedups:
        mark = EXTRAPOLATED if s.extrapolated else ""
        rows.append([_name(s.configuration, s.budget, flagged), f"{s.budget:g}", _percent(s.top1),
                     f"{s.minutes:.3f}",
                     _fmt(s.baseline_minutes, "{:.3f}") + mark, _fmt(s.ratio, "{:.2f}x") + mark,
                     s.note])
    lines = _table(("configuration", "budget", "top-1 (mean)", "minutes (mean)",
                    f"{baseline} minutes to that top-1", "speed-up", "note"), rows)
    if any(s.extrapolated for s in speedups):
        lines += ["", f"{EXTRAPOLATED} extrapolated: the top-1 lies outside {baseline}'s measured "
                      "range; its curve is extended along its nearest two frontier points."]
    lines += _footnote(any((s.configuration, s.budget) in flagged for s in speedups))
    if baseline_flagged:
        lines += ["", f"{baseline}'s own curve has a disturbed timing ({DISTURBED} in the curves): "
                      "every speed-up here is read along it."]
    return lines


def disturbed_table(found: Sequence[Disturbed], redo: dict[tuple[str, float, int], str]) -> list[str]:
    """Each run with a disturbed timing, why, and the command that runs it again."""
    rows = [[d.configuration, f"{d.budget:g}", d.seed, f"{d.minutes:.3f}", f"{d.expected_minutes:.3f}",
             f"{d.factor:.1f}x", d.reason, f"`{redo[(d.configuration, d.budget, d.seed)]}`"] for d in found]
    return _table(("configuration", "budget", "seed", "minutes", "expected minutes", "factor", "why",
                   "redo"), rows)


def time_to_accuracy_table(times: Iterable[TimeToAccuracy]) -> list[str]:
    """Seeds that reached each target and their mean minutes to it."""
    rows = [[t.configuration, f"{t.budget:g}", _percent(t.target), f"{t.reached}/{t.seeds}",
             _fmt(t.minutes_mean, "{:.3f}")] for t in times]
    return _table(("configuration", "budget", "target top-1", "seeds that reached it",
                   "minutes to target (mean of those)"), rows)
