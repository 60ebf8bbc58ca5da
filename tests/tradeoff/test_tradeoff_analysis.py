"""submission.tradeoff.analysis against hand computations on tiny point sets."""
from __future__ import annotations

import json

import pytest

from submission.tradeoff.analysis import (
    CurvePoint,
    Evaluation,
    Point,
    Speedup,
    TimeToAccuracy,
    cheapest,
    curve_points,
    frontier,
    speedups,
    time_to_accuracy,
    times_to_accuracy,
)


def curve(configuration: str, budget: float, top1: float, minutes: float,
          cost: float | None = None) -> CurvePoint:
    """A curve point of one seed."""
    return CurvePoint(configuration, budget, 1, top1, 0.0, top1, top1, minutes, minutes, minutes, cost)


# ---------------------------------------------------------------------------
# grouping over seeds

def test_curve_points_group_seeds_with_mean_sample_std_min_max():
    points = [Point("mild", 0.5, seed, top1, minutes, cost)
              for seed, top1, minutes, cost in ((0, 0.70, 10.0, 1.0), (1, 0.74, 12.0, 1.2),
                                                (2, 0.72, 11.0, 1.1))]
    points.append(Point("baseline", 1.0, 0, 0.65, 30.0, 3.0))
    found = curve_points(points)
    assert [(p.configuration, p.budget) for p in found] == [("baseline", 1.0), ("mild", 0.5)]
    one_seed, mild = found
    assert one_seed.seeds == 1 and one_seed.top1_std == 0.0
    assert mild.seeds == 3
    assert mild.top1_mean == pytest.approx(0.72)
    # sample std: deviations -0.02, +0.02, 0 -> sqrt((0.0004 + 0.0004 + 0) / (3 - 1)) = 0.02
    assert mild.top1_std == pytest.approx(0.02)
    assert (mild.top1_min, mild.top1_max) == (0.70, 0.74)
    assert mild.minutes_mean == pytest.approx(11.0)
    assert (mild.minutes_min, mild.minutes_max) == (10.0, 12.0)
    assert mild.cost_mean == pytest.approx(1.1)


def test_curve_points_refuse_a_repeated_seed_and_a_half_priced_curve():
    with pytest.raises(ValueError, match="seed 3: each seed counts once"):
        curve_points([Point("mild", 0.5, 3, 0.7, 10.0, None), Point("mild", 0.5, 3, 0.71, 10.0, None)])
    with pytest.raises(ValueError, match="1 of 2 runs have a cost"):
        curve_points([Point("mild", 0.5, 0, 0.7, 10.0, 1.0), Point("mild", 0.5, 1, 0.71, 10.0, None)])
    assert curve_points([Point("mild", 0.5, 0, 0.7, 10.0, None)])[0].cost_mean is None


def test_a_point_refuses_top1_in_percent_and_no_minutes():
    with pytest.raises(ValueError, match="fraction in \\[0, 1\\]"):
        Point("mild", 0.5, 0, 75.9, 10.0, None)
    with pytest.raises(ValueError, match="minutes is 0"):
        Point("mild", 0.5, 0, 0.759, 0, None)


def test_records_round_trip_through_json():
    point = Point("mild, no label smoothing", 0.5, 2, 0.7, 12.5, None,
                  (Evaluation(4.0, 0.5), Evaluation(12.5, 0.7)))
    assert Point.from_dict(json.loads(json.dumps(point.to_dict()))) == point
    grouped = curve_points([point])[0]
    assert CurvePoint.from_dict(json.loads(json.dumps(grouped.to_dict()))) == grouped
    speedup = Speedup("mild", 0.5, 0.7, 10.0, None, None, False, "why")
    assert Speedup.from_dict(speedup.to_dict()) == speedup
    row = TimeToAccuracy("mild", 0.5, 0.7, 3, 2, 11.0)
    assert TimeToAccuracy.from_dict(row.to_dict()) == row
    with pytest.raises(ValueError, match="missing keys \\['seed'\\]"):
        Point.from_dict({k: v for k, v in point.to_dict().items() if k != "seed"})


# ---------------------------------------------------------------------------
# frontier and cheapest point: 3 configurations x 3 budgets, "slow" dominated everywhere.
# "long" runs on a machine at half the price per minute, so the frontier by cost differs.

GRID = [curve("fast", b, t, m, m * 0.1) for b, t, m in ((1, 0.70, 10), (2, 0.75, 20), (4, 0.78, 40))] + \
       [curve("slow", b, t, m, m * 0.1) for b, t, m in ((1, 0.68, 15), (2, 0.73, 30), (4, 0.77, 60))] + \
       [curve("long", b, t, m, m * 0.05) for b, t, m in ((1, 0.74, 25), (2, 0.79, 50), (4, 0.80, 100))]


def names(points):
    return [(p.configuration, p.budget) for p in points]


def test_frontier_by_minutes_leaves_out_the_dominated_points():
    # slow (15, .68) < fast (10, .70); (30, .73) < fast (20, .75); (60, .77) < fast (40, .78);
    # long (25, .74) < fast (20, .75); long (50, .79) beats every faster point
    assert names(frontier(GRID)) == [("fast", 1), ("fast", 2), ("fast", 4), ("long", 2), ("long", 4)]


def test_frontier_by_cost_differs():
    # costs: fast 1.0/2.0/4.0, slow 1.5/3.0/6.0, long 1.25/2.5/5.0:
    # long (1.25, .74) is cheaper than fast (2.0, .75); long (2.5, .79) beats fast (4.0, .78)
    assert names(frontier(GRID, by="cost")) == [("fast", 1), ("long", 1), ("fast", 2),
                                                ("long", 2), ("long", 4)]


def test_frontier_keeps_the_better_of_equal_x_and_one_of_exact_twins():
    points = [curve("a", 1, 0.75, 20), curve("b", 1, 0.77, 20), curve("c", 1, 0.77, 20),
              curve("d", 1, 0.70, 10)]
    assert names(frontier(points)) == [("d", 1), ("b", 1)]
    assert frontier([]) == []


def test_frontier_by_cost_without_a_cost_says_which_point_lacks_it():
    with pytest.raises(ValueError, match="'nocost' at budget 1 has no cost"):
        frontier(GRID + [curve("nocost", 1, 0.9, 5)], by="cost")
    with pytest.raises(ValueError, match="choose one of minutes, cost"):
        frontier(GRID, by="hours")


def test_cheapest_point_to_each_target():
    assert names([cheapest(GRID, 0.75)]) == [("fast", 2)]
    assert names([cheapest(GRID, 0.76)]) == [("fast", 4)]            # 40 min beats long's 50
    assert names([cheapest(GRID, 0.76, by="cost")]) == [("long", 2)]  # $2.50 beats fast's $4.00
    assert cheapest(GRID, 0.81) is None
    tie = [curve("a", 1, 0.75, 20), curve("b", 1, 0.77, 20)]
    assert cheapest(tie, 0.74).configuration == "b"
    with pytest.raises(ValueError, match="fraction"):
        cheapest(GRID, 76.0)


# ---------------------------------------------------------------------------
# speed-ups against a baseline's curve

# The baseline's frontier: (20 min, .70), (40, .74), (80, .76); (60, .73) is noise that
# would make the curve go back, and is not on the frontier.
BASE = [curve("base", 1, 0.70, 20), curve("base", 2, 0.74, 40), curve("base", 3, 0.73, 60),
        curve("base", 4, 0.76, 80)]


def speedup_of(point: CurvePoint, baseline=BASE, name="base") -> Speedup:
    (found,) = speedups(baseline + [point], name)
    return found


def test_speedup_interpolates_along_the_baseline_frontier():
    found = speedup_of(curve("new", 1, 0.72, 10))
    # between (20, .70) and (40, .74): 20 + (.72 - .70) * (40 - 20) / (.74 - .70) = 30 min
    assert found.baseline_minutes == pytest.approx(30.0)
    assert found.ratio == pytest.approx(3.0)
    assert not found.extrapolated and found.note == ""
    found = speedup_of(curve("new", 2, 0.75, 20))
    # between (40, .74) and (80, .76), past the noisy (60, .73): 40 + .01 * 40 / .02 = 60 min
    assert found.baseline_minutes == pytest.approx(60.0)
    assert found.ratio == pytest.approx(3.0)
    at_end = speedup_of(curve("new", 3, 0.76, 40))
    assert at_end.baseline_minutes == pytest.approx(80.0) and not at_end.extrapolated


def test_speedup_extrapolated_above_and_below_the_baseline_range():
    above = speedup_of(curve("new", 1, 0.77, 50))
    # along (40, .74)-(80, .76): 80 + (.77 - .76) * 40 / .02 = 100 min
    assert above.baseline_minutes == pytest.approx(100.0)
    assert above.ratio == pytest.approx(2.0)
    assert above.extrapolated and "above the baseline's best" in above.note
    below = speedup_of(curve("new", 1, 0.69, 5))
    # along (20, .70)-(40, .74): 20 + (.69 - .70) * 20 / .04 = 15 min
    assert below.baseline_minutes == pytest.approx(15.0)
    assert below.ratio == pytest.approx(3.0)
    assert below.extrapolated and "below the baseline's lowest" in below.note


def test_speedup_refused_where_the_extension_gives_no_time():
    # 20 + (.65 - .70) * 20 / .04 = -5 min
    found = speedup_of(curve("new", 1, 0.65, 1))
    assert found.baseline_minutes is None and found.ratio is None and not found.extrapolated
    assert "gives -5 min, not a time" in found.note


def test_speedup_refused_above_a_flat_or_falling_baseline_end():
    flat = [curve("base", 1, 0.70, 20), curve("base", 2, 0.74, 40), curve("base", 3, 0.74, 80)]
    found = speedup_of(curve("new", 1, 0.75, 20), flat)
    assert found.ratio is None and found.baseline_minutes is None
    assert "the baseline reaches at most 0.7400 top-1" in found.note
    assert "ends flat or falling" in found.note
    falling = flat[:2] + [curve("base", 3, 0.72, 80)]
    assert speedup_of(curve("new", 1, 0.75, 20), falling).ratio is None
    # within the range the flat end does not matter: 20 + .02 * 20 / .04 = 30 min
    assert speedup_of(curve("new", 1, 0.72, 10), flat).baseline_minutes == pytest.approx(30.0)


def test_speedup_refused_against_a_single_baseline_point():
    single = [curve("base", 1, 0.70, 20)]
    found = speedup_of(curve("new", 1, 0.72, 10), single)
    assert found.ratio is None and "single point" in found.note
    assert speedup_of(curve("new", 1, 0.70, 10), single).ratio == pytest.approx(2.0)


def test_speedups_one_per_point_of_the_others_and_an_unknown_baseline_named():
    found = speedups(GRID, "slow")
    assert names(found) == [("fast", 1), ("fast", 2), ("fast", 4), ("long", 1), ("long", 2), ("long", 4)]
    with pytest.raises(ValueError, match="'nvidia' is not among .*'fast', 'long', 'slow'"):
        speedups(GRID, "nvidia")


# ---------------------------------------------------------------------------
# time to accuracy

EVALS_0 = (Evaluation(1.0, 0.50), Evaluation(2.0, 0.70), Evaluation(3.0, 0.69), Evaluation(4.0, 0.75))
EVALS_1 = (Evaluation(1.5, 0.60), Evaluation(3.0, 0.71), Evaluation(4.5, 0.72))


def test_time_to_accuracy_is_the_first_evaluation_at_or_above_target():
    assert time_to_accuracy(EVALS_0, 0.70) == 2.0      # reached exactly, then dips: the first counts
    assert time_to_accuracy(EVALS_0, 0.72) == 4.0
    assert time_to_accuracy(EVALS_0, 0.80) is None
    assert time_to_accuracy((), 0.5) is None


def test_times_to_accuracy_average_over_the_seeds_that_reached_it():
    points = [Point("mild", 0.5, 0, 0.75, 4.0, None, EVALS_0),
              Point("mild", 0.5, 1, 0.72, 4.5, None, EVALS_1)]
    found = times_to_accuracy(points, [0.70, 0.75, 0.80])
    assert found == [TimeToAccuracy("mild", 0.5, 0.70, 2, 2, pytest.approx(2.5)),  # (2 + 3) / 2
                     TimeToAccuracy("mild", 0.5, 0.75, 2, 1, 4.0),
                     TimeToAccuracy("mild", 0.5, 0.80, 2, 0, None)]
    with pytest.raises(ValueError, match="no evaluations in 'mild' at budget 0.5, seed 2"):
        times_to_accuracy(points + [Point("mild", 0.5, 2, 0.7, 4.0, None)], [0.7])
