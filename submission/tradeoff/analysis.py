"""The points of a tradeoff (one per run), their curves over seeds, and what is read off them.

A configuration is a curve's name: a recipe, or a recipe with settings changed (an ablation
is one more curve). Each is trained at several budgets and seeds; a `Point` is one run, a
`CurvePoint` one budget of one configuration over its seeds. Top-1 is a fraction (0.759).

Read off the curves: the Pareto frontier (by minutes or by cost), the cheapest point that
reaches a target, each point's speed-up against a baseline configuration (the baseline's
minutes at the same top-1, read along the baseline's own frontier), and time to accuracy
from the evaluations a run took on its way. Read off the runs: timings that look disturbed
(a seed far slower than the point's others, or a run far slower per unit of budget than its
configuration's other budgets), flagged, never averaged in silence.
"""
from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, TypeVar

from ..jsonfile import record_from_dict

AXES = ("minutes", "cost")      # what a frontier, a cheapest point or a plot is measured by
# a run slower than this many times its point's fastest seed, or its configuration's other
# budgets per unit of budget, is flagged: seeds of one point trained the same images in about
# the same time on a quiet machine (docs/tradeoff.md); the report's `spread_limit=` changes it
SPREAD_LIMIT = 1.5


def _check_fraction(what: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
        raise ValueError(f"{what} is {value!r}: top-1 is a fraction in [0, 1] (0.759, not 75.9)")


def _check_number(what: str, value: Any, positive: bool) -> None:
    """A finite number, above 0 when positive (a budget's minutes), else at least 0."""
    if (isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)
            or value < 0 or (positive and value == 0)):
        raise ValueError(f"{what} is {value!r}: it must be a {'positive' if positive else 'non-negative'} "
                         "finite number")


Recorded = TypeVar("Recorded", bound="_Record")


@dataclass(frozen=True)
class _Record:
    """to_dict / from_dict of the frozen dataclasses below (written as JSON and read back)."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls: type[Recorded], data: dict[str, Any]) -> Recorded:
        return record_from_dict(cls, data, strict=True)


@dataclass(frozen=True)
class Evaluation(_Record):
    minutes: float          # training minutes (evaluation excluded) when it was taken
    top1: float

    def __post_init__(self) -> None:
        _check_number("an evaluation's minutes", self.minutes, positive=False)
        _check_fraction("an evaluation's top1", self.top1)


@dataclass(frozen=True)
class Point(_Record):
    """One run: a configuration at one budget and seed."""
    configuration: str      # the curve's name, e.g. "mild", "mild, no label smoothing"
    budget: float           # the budget's value (a scale_schedule_ratio, or epochs)
    seed: int
    top1: float             # top-1 at the end of the budget
    minutes: float          # training minutes of the whole budget (evaluation excluded)
    cost_usd: float | None  # at the system's price; None without a price
    evaluations: tuple[Evaluation, ...] = ()
    joules: float | None = None     # run_start to run_stop, evaluations in; None: not measured

    def __post_init__(self) -> None:
        run = f"the run of {self.configuration!r} at budget {self.budget!r}, seed {self.seed}:"
        _check_number(f"{run} budget", self.budget, positive=True)
        _check_fraction(f"{run} top1", self.top1)
        _check_number(f"{run} minutes", self.minutes, positive=True)
        if self.cost_usd is not None:
            _check_number(f"{run} cost_usd", self.cost_usd, positive=False)
        if not all(isinstance(e, Evaluation) for e in self.evaluations):
            raise ValueError(f"{run} evaluations must be Evaluation objects "
                             "(Point.from_dict reads them from dicts)")

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["evaluations"] = [e.to_dict() for e in self.evaluations]
        return data


@dataclass(frozen=True)
class CurvePoint(_Record):
    """A configuration at one budget, over its seeds."""
    configuration: str
    budget: float
    seeds: int
    top1_mean: float
    top1_std: float         # sample standard deviation; 0 for one seed
    top1_min: float
    top1_max: float
    minutes_mean: float
    minutes_min: float
    minutes_max: float
    cost_mean: float | None     # None without a price
    kj_mean: float | None = None    # energy per run over the seeds; None unless every one was measured

    def __post_init__(self) -> None:
        where = f"the curve point of {self.configuration!r} at budget {self.budget!r}:"
        _check_fraction(f"{where} top1_mean", self.top1_mean)
        _check_number(f"{where} minutes_mean", self.minutes_mean, positive=True)


@dataclass(frozen=True)
class Speedup(_Record):
    """A point against the baseline's curve: the baseline's minutes to the same top-1."""
    configuration: str
    budget: float
    top1: float
    minutes: float
    baseline_minutes: float | None
    ratio: float | None         # baseline_minutes / minutes; None where no time can be read
    extrapolated: bool          # top-1 outside the baseline's measured range
    note: str                   # why extrapolated, or why there is no ratio ("" otherwise)


@dataclass(frozen=True)
class TimeToAccuracy(_Record):
    configuration: str
    budget: float
    target: float
    seeds: int
    reached: int                # seeds whose evaluations reached the target
    minutes_mean: float | None  # mean over the seeds that reached it; None when none did


@dataclass(frozen=True)
class Disturbed(_Record):
    """A run whose timing looks disturbed: the machine was likely shared or throttled."""
    configuration: str
    budget: float
    seed: int
    minutes: float
    expected_minutes: float     # what the comparison says it should have taken
    factor: float               # minutes / expected_minutes
    reason: str


# ---------------------------------------------------------------------------
def _grouped(points: Iterable[Point]) -> dict[tuple[str, float], list[Point]]:
    """(configuration, budget) -> its runs, sorted by key; a seed repeated is an error."""
    groups: dict[tuple[str, float], list[Point]] = {}
    for point in points:
        runs = groups.setdefault((point.configuration, point.budget), [])
        if any(run.seed == point.seed for run in runs):
            raise ValueError(f"two runs of {point.configuration!r} at budget {point.budget:g} with "
                             f"seed {point.seed}: each seed counts once; leave the repeated run out")
        runs.append(point)
    return dict(sorted(groups.items()))


def _curve_point(configuration: str, budget: float, runs: list[Point]) -> CurvePoint:
    top1 = [run.top1 for run in runs]
    minutes = [run.minutes for run in runs]
    costs = [run.cost_usd for run in runs if run.cost_usd is not None]
    joules = [run.joules for run in runs if run.joules is not None]
    if costs and len(costs) != len(runs):
        raise ValueError(f"{configuration!r} at budget {budget:g}: {len(costs)} of {len(runs)} runs "
                         "have a cost: price every run of a tradeoff (one price_usd_per_hour) or none")
    return CurvePoint(configuration, budget, len(runs),
                      statistics.fmean(top1), statistics.stdev(top1) if len(top1) > 1 else 0.0,
                      min(top1), max(top1),
                      statistics.fmean(minutes), min(minutes), max(minutes),
                      statistics.fmean(costs) if costs else None,
                      statistics.fmean(joules) / 1000 if len(joules) == len(runs) else None)


def curve_points(points: Iterable[Point]) -> list[CurvePoint]:
    """One CurvePoint per (configuration, budget), over its seeds, sorted by both."""
    return [_curve_point(configuration, budget, runs)
            for (configuration, budget), runs in _grouped(points).items()]


def disturbed(points: Iterable[Point], limit: float = SPREAD_LIMIT) -> list[Disturbed]:
    """The runs whose minutes are more than `limit` times (a) their point's fastest seed's,
    or (b) for their minutes per unit of budget, the median of their configuration's runs
    at other budgets; each once, the first rule that holds, sorted by configuration, budget
    and seed."""
    if not limit > 1:
        raise ValueError(f"spread_limit={limit!r}: give a factor above 1 (default {SPREAD_LIMIT})")
    groups = _grouped(points)
    found: dict[tuple[str, float, int], Disturbed] = {}
    for (configuration, budget), runs in groups.items():
        fastest = min(runs, key=lambda run: run.minutes)
        for run in runs:
            if run.minutes > limit * fastest.minutes:
                found[(configuration, budget, run.seed)] = Disturbed(
                    configuration, budget, run.seed, run.minutes, fastest.minutes,
                    run.minutes / fastest.minutes,
                    f"{run.minutes / fastest.minutes:.1f}x its fastest seed's minutes ({fastest.minutes:.3g} "
                    f"min, seed {fastest.seed}): the machine was likely shared or throttled while it ran")
    for (configuration, budget), runs in groups.items():
        others = [other.minutes / other.budget for (name, other_budget), group in groups.items()
                  if name == configuration and other_budget != budget for other in group]
        if not others:
            continue
        per_budget = statistics.median(others)
        for run in runs:
            expected = per_budget * run.budget
            if (configuration, budget, run.seed) not in found and run.minutes > limit * expected:
                found[(configuration, budget, run.seed)] = Disturbed(
                    configuration, budget, run.seed, run.minutes, expected, run.minutes / expected,
                    f"{run.minutes / expected:.1f}x the minutes its configuration's other budgets "
                    f"take per unit of budget ({expected:.3g} min at this budget): the machine was "
                    "likely shared or throttled while it ran")
    return [found[key] for key in sorted(found)]


def check_axis(curve_points: Sequence[CurvePoint], by: str) -> None:
    """A ValueError unless every point has a value on axis `by`."""
    if by not in AXES:
        raise ValueError(f"by={by!r}: choose one of {', '.join(AXES)}")
    unpriced = [f"{p.configuration!r} at budget {p.budget:g}" for p in curve_points
                if by == "cost" and p.cost_mean is None]
    if unpriced:
        raise ValueError(f"by cost, but {', '.join(unpriced)} has no cost: give the runs a price "
                         "(price_usd_per_hour) or measure by minutes")


def x_value(point: CurvePoint, by: str) -> float:
    """The point's mean minutes or mean cost (check_axis first)."""
    if by == "minutes":
        return point.minutes_mean
    assert point.cost_mean is not None, "check_axis first"
    return point.cost_mean


def _cheaper_first(by: str) -> Callable[[CurvePoint], tuple[float, float, str, float]]:
    """Sort key: least x first, then the higher top-1, then by name for a stable order."""
    return lambda p: (x_value(p, by), -p.top1_mean, p.configuration, p.budget)


def frontier(curve_points: Iterable[CurvePoint], by: str = "minutes") -> list[CurvePoint]:
    """The Pareto frontier over all configurations, sorted by x: a point is on it unless
    another has x <= and top-1 >= with one of them strict. Along it top-1 rises strictly;
    of points with the same x and the same top-1, the first by configuration and budget
    stands for them all."""
    curve_points = list(curve_points)
    check_axis(curve_points, by)
    kept: list[CurvePoint] = []
    for point in sorted(curve_points, key=_cheaper_first(by)):
        if not kept or point.top1_mean > kept[-1].top1_mean:
            kept.append(point)
    return kept


def cheapest(curve_points: Iterable[CurvePoint], target: float, by: str = "minutes") -> CurvePoint | None:
    """The point of least x whose mean top-1 reaches target (ties: the higher top-1); None
    when none does."""
    curve_points = list(curve_points)
    _check_fraction("target", target)
    check_axis(curve_points, by)
    reaching = [p for p in curve_points if p.top1_mean >= target]
    return min(reaching, key=_cheaper_first(by), default=None)


# ---------------------------------------------------------------------------
def _at(point: CurvePoint) -> str:
    return f"{point.top1_mean:.4f} in {point.minutes_mean:.4g} min"


def _along(a: CurvePoint, b: CurvePoint, top1: float) -> float:
    """Minutes at top1 on the straight line through a and b (b.top1_mean > a.top1_mean)."""
    slope = (b.minutes_mean - a.minutes_mean) / (b.top1_mean - a.top1_mean)
    return a.minutes_mean + (top1 - a.top1_mean) * slope


def _above(top1: float, curve: list[CurvePoint], longest: CurvePoint) -> tuple[float | None, bool, str]:
    best = curve[-1]
    if longest.minutes_mean > best.minutes_mean:
        return None, False, (f"the baseline reaches at most {best.top1_mean:.4f} top-1 ({_at(best)}); "
                             f"its longest run reaches {_at(longest)}: its curve ends flat or falling, "
                             f"so it gives no time for {top1:.4f}")
    if len(curve) == 1:
        return None, False, (f"the baseline has a single point ({_at(best)}): no slope to extend "
                             f"up to {top1:.4f}")
    minutes = _along(curve[-2], curve[-1], top1)
    return minutes, True, (f"extrapolated: {top1:.4f} is above the baseline's best ({_at(best)}); "
                           f"extended along its last two frontier points ({_at(curve[-2])}; {_at(best)})")


def _below(top1: float, curve: list[CurvePoint]) -> tuple[float | None, bool, str]:
    lowest = curve[0]
    if len(curve) == 1:
        return None, False, (f"the baseline has a single point ({_at(lowest)}): no slope to extend "
                             f"down to {top1:.4f}")
    minutes = _along(curve[0], curve[1], top1)
    extension = f"its first two frontier points ({_at(curve[0])}; {_at(curve[1])})"
    if minutes <= 0:
        return None, False, (f"the baseline's lowest top-1 is {lowest.top1_mean:.4f} ({_at(lowest)}); "
                             f"extending {extension} down to {top1:.4f} gives {minutes:.4g} min, "
                             "not a time")
    return minutes, True, (f"extrapolated: {top1:.4f} is below the baseline's lowest ({_at(lowest)}); "
                           f"extended along {extension}")


def baseline_minutes(top1: float, curve: list[CurvePoint],
                     longest: CurvePoint) -> tuple[float | None, bool, str]:
    """(minutes, extrapolated, note): the baseline's minutes at top1, read linearly along its
    frontier `curve` (sorted by minutes, top-1 rising); `longest` is its run of most minutes,
    which tells whether the curve ends flat or falling beyond the frontier's end."""
    if top1 > curve[-1].top1_mean:
        return _above(top1, curve, longest)
    if top1 < curve[0].top1_mean:
        return _below(top1, curve)
    if len(curve) == 1:
        return curve[0].minutes_mean, False, ""
    upper = next(i for i in range(1, len(curve)) if curve[i].top1_mean >= top1)
    return _along(curve[upper - 1], curve[upper], top1), False, ""


def speedups(curve_points: Iterable[CurvePoint], baseline: str) -> list[Speedup]:
    """One Speedup per point of every configuration but the baseline (sorted by configuration
    and budget): the baseline's minutes at the same top-1 on its own Pareto frontier (so that
    noise cannot make its curve go back), and their ratio to the point's minutes."""
    curve_points = list(curve_points)
    names = sorted({p.configuration for p in curve_points})
    if baseline not in names:
        raise ValueError(f"baseline {baseline!r} is not among the configurations of these points: "
                         f"{', '.join(repr(n) for n in names) or 'there are none'}")
    own = [p for p in curve_points if p.configuration == baseline]
    curve = frontier(own, "minutes")
    longest = max(own, key=lambda p: p.minutes_mean)
    found = []
    for point in sorted((p for p in curve_points if p.configuration != baseline),
                        key=lambda p: (p.configuration, p.budget)):
        minutes, extrapolated, note = baseline_minutes(point.top1_mean, curve, longest)
        found.append(Speedup(point.configuration, point.budget, point.top1_mean, point.minutes_mean,
                             minutes, None if minutes is None else minutes / point.minutes_mean,
                             extrapolated, note))
    return found


# ---------------------------------------------------------------------------
def time_to_accuracy(evaluations: Iterable[Evaluation], target: float) -> float | None:
    """Minutes of the first evaluation at or above target; None when none reaches it."""
    _check_fraction("target", target)
    return min((e.minutes for e in evaluations if e.top1 >= target), default=None)


def times_to_accuracy(points: Iterable[Point], targets: Sequence[float]) -> list[TimeToAccuracy]:
    """Per (configuration, budget) and target: how many seeds reached it, and their mean
    minutes to it (evaluation time excluded)."""
    groups = _grouped(points)
    if not targets:
        raise ValueError("no targets: give the top-1 fractions to time, e.g. 0.759")
    unevaluated = [f"{p.configuration!r} at budget {p.budget:g}, seed {p.seed}"
                   for runs in groups.values() for p in runs if not p.evaluations]
    if unevaluated:
        raise ValueError(f"no evaluations in {', '.join(unevaluated)}: time to accuracy is read "
                         "from the evaluations a run took on its way (Point.evaluations)")
    rows = []
    for (configuration, budget), runs in groups.items():
        for target in targets:
            times = [t for t in (time_to_accuracy(run.evaluations, target) for run in runs)
                     if t is not None]
            rows.append(TimeToAccuracy(configuration, budget, target, len(runs), len(times),
                                       statistics.fmean(times) if times else None))
    return rows
