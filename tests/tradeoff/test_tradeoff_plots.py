"""submission.tradeoff.plots: the PNG is written for our curves with published points, and
for published points alone."""
from __future__ import annotations

import pytest

from submission import published
from submission.tradeoff.analysis import Point, curve_points, frontier
from submission.tradeoff.plots import plot_tradeoff, wants_log_axis

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def grid():
    """mild and a 4x slower baseline at three budgets, three seeds each, priced."""
    runs = []
    for name, slower in (("mild", 1.0), ("baseline", 4.0)):
        for budget, top1, minutes in ((0.32, 0.755, 24.0), (0.5, 0.77, 36.0), (0.75, 0.781, 53.0)):
            runs += [Point(name, budget, seed, top1 + 0.004 * seed, minutes * slower + seed,
                           cost_usd=minutes * slower * 0.5) for seed in range(3)]
    return curve_points(runs)


def assert_png(path):
    data = path.read_bytes()
    assert data.startswith(PNG_SIGNATURE) and len(data) > 1000


def test_plot_of_curves_frontier_and_published_points(tmp_path):
    points = grid()
    path = plot_tradeoff(points, tmp_path / "tradeoff.png", frontier=frontier(points),
                         published=published.points_for("a100-80gb"), title="mild vs baseline")
    assert path == tmp_path / "tradeoff.png"
    assert_png(path)


def test_plot_by_cost_and_of_published_points_only(tmp_path):
    points = grid()
    assert_png(plot_tradeoff(points, tmp_path / "cost.png", x="cost", frontier=frontier(points, "cost")))
    assert_png(plot_tradeoff([], tmp_path / "p4d.png", published=published.points_for("p4d")))


def test_plot_refuses_what_it_cannot_draw(tmp_path):
    with pytest.raises(ValueError, match="nothing to draw"):
        plot_tradeoff([], tmp_path / "empty.png")
    with pytest.raises(ValueError, match="published points have minutes, not costs"):
        plot_tradeoff(grid(), tmp_path / "x.png", x="cost", published=published.points_for("p4d"))
    unpriced = curve_points([Point("mild", 0.5, 0, 0.7, 10.0, None)])
    with pytest.raises(ValueError, match="has no cost"):
        plot_tradeoff(unpriced, tmp_path / "x.png", x="cost")
    assert not list(tmp_path.iterdir())


def test_log_axis_beyond_a_tenfold_span():
    assert wants_log_axis([14.9, 880.0])           # the published points: 59x
    assert not wants_log_axis([24.0, 212.0])       # 8.8x
    assert not wants_log_axis([])
