"""The tradeoff plot: top-1 against training minutes or cost, a line per configuration.

Our curves carry vertical bars from the lowest to the highest top-1 over their seeds and
horizontal ones from the fewest to the most minutes (or dollars); a point with a disturbed
timing among its runs is ringed in red; the Pareto frontier is a dashed line; published
points (submission.published.PublishedPoint) are hollow markers with a legend entry per
source and hardware, each labelled and never joined to our curves. With published points
only, the plot shows them alone.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib import ticker
from matplotlib.axes import Axes

from ..published import PublishedPoint
from .analysis import CurvePoint, check_axis, x_value

LOG_SPAN = 10           # a log x axis when the largest x is more than this times the smallest
PUBLISHED_MARKERS = ("s", "D", "^", "v", "P", "X")
X_LABELS = {"minutes": "training minutes (evaluation excluded)",
            "cost": "cost per run (USD, training minutes at the system's price)"}


def wants_log_axis(values: Sequence[float]) -> bool:
    """Whether x values span more than LOG_SPAN times (all of them positive)."""
    return bool(values) and min(values) > 0 and max(values) > LOG_SPAN * min(values)


def _x_spread(point: CurvePoint, x: str) -> tuple[float, float]:
    """How far the fewest and the most minutes (or dollars: the same runs at one price) lie
    from the mean."""
    scale = x_value(point, x) / point.minutes_mean
    return ((point.minutes_mean - point.minutes_min) * scale, (point.minutes_max - point.minutes_mean) * scale)


def _draw_curves(ax: Axes, curve_points: list[CurvePoint], x: str,
                 flagged: frozenset = frozenset()) -> list[float]:
    """A line with markers and min-max bars both ways per configuration, disturbed points
    ringed; returns the x values drawn."""
    drawn, ringed = [], []
    for configuration in sorted({p.configuration for p in curve_points}):
        own = sorted((p for p in curve_points if p.configuration == configuration),
                     key=lambda p: x_value(p, x))
        xs = [x_value(p, x) for p in own]
        spread = [[(p.top1_mean - p.top1_min) * 100 for p in own],
                  [(p.top1_max - p.top1_mean) * 100 for p in own]]
        x_spread = [list(side) for side in zip(*(_x_spread(p, x) for p in own))]
        seeds = "/".join(sorted({str(p.seeds) for p in own}))
        ax.errorbar(xs, [p.top1_mean * 100 for p in own], yerr=spread, xerr=x_spread, marker="o",
                    capsize=3, label=f"{configuration} (mean of {seeds} seeds, bars: min-max)")
        ringed += [p for p in own if (p.configuration, p.budget) in flagged]
        drawn += xs
    if ringed:
        ax.scatter([x_value(p, x) for p in ringed], [p.top1_mean * 100 for p in ringed], s=160,
                   facecolors="none", edgecolors="red", linewidths=1.5, zorder=4,
                   label="a run's timing disturbed (tradeoff.md: Disturbed timings)")
    return drawn


def _draw_published(ax: Axes, published: list[PublishedPoint]) -> list[float]:
    groups: dict[tuple[str, str], list[PublishedPoint]] = defaultdict(list)
    for point in published:
        groups[(point.source, point.hardware)].append(point)
    for i, ((source, hardware), points) in enumerate(groups.items()):
        color = plt.cm.Dark2(i % 8)
        ax.scatter([p.minutes for p in points], [p.top1 * 100 for p in points],
                   marker=PUBLISHED_MARKERS[i % len(PUBLISHED_MARKERS)], s=40,
                   facecolors="none", edgecolors=color, label=f"published, {hardware}: {source}")
        for p in points:
            ax.annotate(p.configuration, (p.minutes, p.top1 * 100), fontsize=6, color=color,
                        xytext=(4, 3), textcoords="offset points")
    return [p.minutes for p in published]


def plot_tradeoff(curve_points: Iterable[CurvePoint], path: Path, x: str = "minutes",
                  frontier: Sequence[CurvePoint] | None = None,
                  published: Iterable[PublishedPoint] = (), title: str = "",
                  flagged: frozenset = frozenset()) -> Path:
    """Draw the plot to path (a PNG) and return path."""
    curve_points, frontier, published = list(curve_points), list(frontier or ()), list(published)
    check_axis(curve_points + frontier, x)
    if published and x != "minutes":
        raise ValueError("published points have minutes, not costs: draw them with x='minutes', "
                         "or leave them out of a plot by cost")
    if not curve_points and not published:
        raise ValueError("nothing to draw: no curve points and no published points")
    fig, ax = plt.subplots(figsize=(8, 5))
    xs = _draw_curves(ax, curve_points, x, flagged)
    if frontier:
        ax.plot([x_value(p, x) for p in frontier], [p.top1_mean * 100 for p in frontier],
                linestyle="--", color="black", linewidth=1, zorder=3, label=f"Pareto frontier (by {x})")
    xs += _draw_published(ax, published)
    if wants_log_axis(xs):
        ax.set_xscale("log")
        plain = ticker.LogFormatter(labelOnlyBase=False, minor_thresholds=(1.5, 0.5))
        ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda value, _: f"{value:g}"))
        ax.xaxis.set_minor_formatter(plain)
    ax.set_xlabel(X_LABELS[x])
    ax.set_ylabel("top-1 accuracy (%)")
    ax.set_title(title or f"top-1 against {x}")
    ax.grid(alpha=0.3, which="both")
    # below the axes: published sources make long labels
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(0.0, -0.13))
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return Path(path)
