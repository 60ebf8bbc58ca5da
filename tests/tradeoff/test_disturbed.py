"""Disturbed timings: runs far slower than their point's other seeds, or than their
configuration's other budgets, flagged in tradeoff.md and tradeoff.json with the command that
redoes them; the redo keeps the old run; the grid's progress line."""
from __future__ import annotations

import json

import pytest

from submission.tradeoff import analysis, grid_report
from submission.tradeoff import points as grid_points
from submission.tradeoff.analysis import Point
from submission.tradeoff.grid import load_grid
from submission.tradeoff.grid_progress import GridProgress

GRID = """name: small
budget: scale_schedule_ratio
budgets: [0.25, 0.5]
seeds: [1, 2]
baseline: plain
settings: {epochs: 0.1}
configurations:
  plain: {recipe: baseline}
  hot: {recipe: hot}
"""


@pytest.fixture
def grid(tmp_path):
    path = tmp_path / "grid.yaml"
    path.write_text(GRID)
    return load_grid(str(path))


def quiet_grid(hot_minutes=(0.28, 0.30)):
    """plain and hot at two budgets and two seeds; hot at 0.25 with the given minutes."""
    return [Point("plain", 0.25, 1, 0.60, 0.30, None), Point("plain", 0.25, 2, 0.61, 0.31, None),
            Point("plain", 0.5, 1, 0.70, 0.60, None), Point("plain", 0.5, 2, 0.71, 0.62, None),
            Point("hot", 0.25, 1, 0.55, hot_minutes[0], None), Point("hot", 0.25, 2, 0.56, hot_minutes[1], None),
            Point("hot", 0.5, 1, 0.66, 0.58, None), Point("hot", 0.5, 2, 0.67, 0.60, None)]


def test_a_quiet_grid_has_nothing_flagged():
    assert analysis.disturbed(quiet_grid()) == []


def test_a_seed_six_times_its_twins_minutes_is_flagged_against_the_fastest():
    [flagged] = analysis.disturbed(quiet_grid((0.28, 1.72)))
    assert (flagged.configuration, flagged.budget, flagged.seed) == ("hot", 0.25, 2)
    assert flagged.factor == pytest.approx(1.72 / 0.28) and flagged.expected_minutes == 0.28
    assert "its fastest seed's minutes" in flagged.reason and "shared or throttled" in flagged.reason


def test_a_point_slow_in_every_seed_is_flagged_against_its_other_budgets():
    points = quiet_grid((0.90, 0.95))          # both seeds: 3x what hot takes per unit of budget
    found = analysis.disturbed(points)
    assert [(d.configuration, d.budget, d.seed) for d in found] == [("hot", 0.25, 1), ("hot", 0.25, 2)]
    assert found[0].expected_minutes == pytest.approx(0.59 / 0.5 * 0.25)
    assert "other budgets take per unit of budget" in found[0].reason
    assert analysis.disturbed(points, limit=4.0) == []
    with pytest.raises(ValueError, match="above 1"):
        analysis.disturbed(points, limit=1.0)


def test_the_report_flags_the_run_with_its_redo_command_and_marks_its_point(grid, tmp_path):
    points = quiet_grid((0.28, 1.72))
    measured = grid_report.Measured(grid, "cpu", "here", "a CPU", "fashion-mnist", 0.0, points, 8,
                               command_line={"results_dir": "/tmp/r"})
    text = grid_report.write_report(tmp_path, measured).read_text()
    hot_seed_2 = next(p for p in grid.points() if (p.configuration, p.budget, p.seed) == ("hot", 0.25, 2))
    redo = f"python -m submission tradeoff grid={grid.source} point={hot_seed_2.index} redo=true results_dir=/tmp/r"
    section = text.split("## Disturbed timings")[1].split("##")[0]
    assert "| hot | 0.25 | 2 | 1.720 | 0.280 | 6.1x |" in section and f"`{redo}`" in section
    assert "| hot † | 0.25 | 2 |" in text                     # the curve table marks the point
    assert "1.000 [0.280–1.720]" in text                      # and shows its minutes' spread
    numbers = json.loads((tmp_path / grid_report.NUMBERS).read_text())
    assert numbers["spread_limit"] == analysis.SPREAD_LIMIT
    assert [(d["configuration"], d["budget"], d["seed"], d["redo"]) for d in numbers["disturbed"]] == \
        [("hot", 0.25, 2, redo)]
    quiet = grid_report.Measured(grid, "cpu", "here", "a CPU", "fashion-mnist", 0.0, quiet_grid(), 8)
    assert "## Disturbed timings\n\nNone" in grid_report.write_report(tmp_path, quiet).read_text()


def test_redo_moves_the_points_run_aside_and_leaves_the_others(grid, tmp_path):
    first, second = grid.points()[:2]
    folder = tmp_path / "results"
    for point in (first, second):
        where = grid_points.point_folder(folder, point)
        where.path.mkdir(parents=True)
        for path in (where.run.result, where.record, where.run.records, where.run.transcript, where.config):
            path.write_text(f"{point.index} {path.name}\n")
    kept = grid_points.redo(folder, first)
    assert kept.parent == folder / "attempts" and kept.name.startswith(first.slug)
    run = grid_points.point_folder(folder, first).run
    assert sorted(p.name for p in kept.iterdir()) == sorted(["log.txt", "point.json", "progress.jsonl", "run.log"])
    assert (kept / run.result.name).read_text() == f"{first.index} log.txt\n"
    assert not grid_points.is_finished(folder, first) and grid_points.is_finished(folder, second)
    assert grid_points.point_folder(folder, first).config.is_file()
    assert grid_points.redo(folder, first) is None           # nothing left to move


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_the_progress_line_counts_points_and_estimates_the_minutes_left(grid):
    points, clock = grid.points(), Clock()
    progress = GridProgress(points, clock)
    assert [(p.configuration, p.budget, p.seed) for p in points][:4] == [
        ("plain", 0.25, 1), ("hot", 0.25, 1), ("plain", 0.5, 1), ("hot", 0.5, 1)]
    progress.finished(points[0], None)            # finished before: no time measured here
    assert progress.line() == ("[tradeoff] point 1 of 8 done: 0.0 min so far, minutes left: known "
                               "once a point has run here")
    clock.now = 120.0
    progress.finished(points[1], 2.0)             # hot at 0.25 ran for 2 minutes
    # left: hot at 0.25 takes 2 min (its own), hot at 0.5 4 (hot's 8 min per unit of budget), plain
    # at 0.25 and 0.5 2 and 4 (no plain ran: every point's 8 min per unit)
    assert [progress.estimate(p) for p in points[2:]] == pytest.approx([4.0, 4.0, 2.0, 2.0, 4.0, 4.0])
    expected = 20.0
    assert progress.line() == (f"[tradeoff] point 2 of 8 done: 2.0 min so far, about {expected:.1f} min "
                               "left (from the 1 point(s) that ran here: same configuration and budget, "
                               "else minutes per unit of budget)")


def test_the_imagenet_grid_without_its_folder_is_refused_naming_it(tmp_path, capsys):
    from submission.cli import main as cli_main
    assert cli_main(["tradeoff", "grid=imagenet", f"results_dir={tmp_path}"]) == 2
    assert "give its folder, dataset=imagenet data_dir=FOLDER" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


def test_a_tradeoff_refused_because_another_runs_its_point_writes_nothing(tmp_path, capsys):
    from submission import runs
    from submission.cli import main as cli_main
    from submission.preflight import resolve_here
    grid = load_grid("embedded")
    folder = grid_points.grid_folder(grid, resolve_here(None, {"results_dir": str(tmp_path)}))
    busy = grid_points.point_folder(folder, grid.points()[0])
    report_file = folder / grid_report.REPORT
    report_file.parent.mkdir(parents=True)
    report_file.write_text("the report of the first command\n")
    with runs.Lock(busy.path):      # the first command, running point 0
        before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
        assert cli_main(["tradeoff", f"results_dir={tmp_path}"]) == 1
        assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before
    assert "is being run by another tradeoff" in capsys.readouterr().err
    assert report_file.read_text() == "the report of the first command\n"
