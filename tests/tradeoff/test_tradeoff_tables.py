"""submission.tradeoff.tables: the markdown rows of each table, written out by hand."""
from __future__ import annotations

from submission.tradeoff.analysis import CurvePoint, Point, Speedup, TimeToAccuracy, curve_points
from submission.tradeoff.tables import (
    cheapest_table,
    curve_table,
    frontier_table,
    speedup_table,
    time_to_accuracy_table,
)

HEADER_AND_RULE = 2


def test_curve_table_shows_the_spread_over_seeds_and_a_dash_without_cost():
    points = [Point("mild", 0.5, 0, 0.70, 10.0, 1.0, joules=1000.0),
              Point("mild", 0.5, 1, 0.74, 12.0, 1.2, joules=1500.0),
              Point("mild", 0.5, 2, 0.72, 11.0, 1.1, joules=2000.0), Point("hot", 2.6, 0, 0.80, 250.0, None)]
    lines = curve_table(curve_points(points))
    assert lines[0].startswith("| configuration | budget | seeds |")
    assert lines[HEADER_AND_RULE:] == [
        "| hot | 2.6 | 1 | 80.00% ± 0.00 [80.00–80.00] | 250.000 | — | not measured |",
        "| mild | 0.5 | 3 | 72.00% ± 2.00 [70.00–74.00] | 11.000 [10.000–12.000] | $1.10 | 1.5 |",
    ]


def test_a_curve_point_has_no_energy_unless_every_seed_was_measured():
    measured = Point("mild", 0.5, 0, 0.70, 10.0, None, joules=1000.0)
    assert curve_points([measured])[0].kj_mean == 1.0
    assert curve_points([measured, Point("mild", 0.5, 1, 0.74, 12.0, None)])[0].kj_mean is None


def one_seed(configuration, budget, top1, minutes, cost=None):
    return CurvePoint(configuration, budget, 1, top1, 0.0, top1, top1, minutes, minutes, minutes, cost)


def test_frontier_and_cheapest_tables():
    points = [one_seed("fast", 1, 0.75, 20, 2.0), one_seed("long", 2, 0.79, 50, 2.5)]
    assert frontier_table(points)[HEADER_AND_RULE:] == ["| fast | 1 | 75.00% | 20.000 | $2.00 |",
                                                        "| long | 2 | 79.00% | 50.000 | $2.50 |"]
    lines = cheapest_table(points, [0.759, 0.80], by="cost")
    assert "cheapest by cost" in lines[0]
    assert lines[HEADER_AND_RULE:] == ["| 75.90% | long | 2 | 79.00% | 50.000 | $2.50 |",
                                       "| 80.00% | none reaches it | — | — | — | — |"]


def test_speedup_table_marks_extrapolation_and_shows_refusals_with_their_note():
    rows = [Speedup("mild", 0.32, 0.766, 25.3, 180.0, 180.0 / 25.3, False, ""),
            Speedup("mild", 0.75, 0.781, 52.4, 240.0, 240.0 / 52.4, True, "extrapolated: above"),
            Speedup("hot", 2.6, 0.799, 255.0, None, None, False,
                    "the baseline reaches at most 0.7670 top-1 | longer")]
    lines = speedup_table(rows, "nvidia baseline")
    assert "nvidia baseline minutes to that top-1" in lines[0]
    assert lines[HEADER_AND_RULE:HEADER_AND_RULE + 3] == [
        "| mild | 0.32 | 76.60% | 25.300 | 180.000 | 7.11x |  |",
        "| mild | 0.75 | 78.10% | 52.400 | 240.000* | 4.58x* | extrapolated: above |",
        "| hot | 2.6 | 79.90% | 255.000 | — | — | the baseline reaches at most 0.7670 top-1 / longer |",
    ]
    assert lines[-1].startswith("* extrapolated: the top-1 lies outside nvidia baseline's")
    assert not any(line.startswith("*") for line in speedup_table(rows[:1], "b"))


def test_time_to_accuracy_table():
    rows = [TimeToAccuracy("mild", 0.5, 0.759, 5, 4, 23.79), TimeToAccuracy("mild", 0.5, 0.78, 5, 0, None)]
    assert time_to_accuracy_table(rows)[HEADER_AND_RULE:] == ["| mild | 0.5 | 75.90% | 4/5 | 23.790 |",
                                                              "| mild | 0.5 | 78.00% | 0/5 | — |"]
