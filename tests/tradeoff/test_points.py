"""submission.tradeoff.points on hand-written MLPerf logs: which points count as finished, and
what a point's folder must hold to be reused."""
from __future__ import annotations

import json

import pytest

from submission.jsonfile import write_json
from submission.results import CampaignError
from submission.tradeoff import grid_report
from submission.tradeoff import points as grid_points
from submission.tradeoff.grid import load_grid

try:
    from tests.mlperf_logs import mlperf_log
except ImportError:   # tests/ on sys.path instead of the repository root
    from mlperf_logs import mlperf_log

GRID = """name: small
budget: scale_schedule_ratio
budgets: [0.5, 1.0]
seeds: [3]
baseline: plain
settings: {epochs: 0.1}
configurations:
  plain: {recipe: baseline}
"""


def _log(reason: str, accuracies=(0.41, 0.62)) -> str:
    """A log whose run_stop is aborted with `reason`, as train.py ends a run without a target."""
    lines = mlperf_log(1.0, 3, status="aborted", accuracies=accuracies).splitlines()
    record = json.loads(lines[-1].removeprefix(":::MLLOG "))
    assert record["key"] == "run_stop"
    record["metadata"]["reason"] = reason
    return "\n".join(lines[:-1] + [":::MLLOG " + json.dumps(record)]) + "\n"


@pytest.fixture
def grid(tmp_path):
    path = tmp_path / "grid.yaml"
    path.write_text(GRID)
    return load_grid(str(path))


def test_a_point_stopped_before_the_end_of_its_budget_is_left_out_and_named(grid, tmp_path):
    whole, diverged = grid.points()
    folder = tmp_path / "results"
    for point, reason in ((whole, "no target (target_accuracy=none): the whole budget trained"),
                          (diverged, "diverged: non-finite loss at step 40")):
        where = grid_points.point_folder(folder, point)
        where.path.mkdir(parents=True)
        where.run.result.write_text(_log(reason))

    configs = {p.index: grid_points.point_config(grid, p, {"system": "cpu"}) for p in grid.points()}
    found, left_out = grid_points.finished_points(grid, folder, 0.0, configs)
    assert [(p.configuration, p.budget, p.top1) for p in found] == [("plain", 0.5, 0.62)]
    # a run of 60,000 ms with two evaluations of 9,999 ms each, starting at 10,000 and 30,000 ms
    # (tests/mlperf_logs.py): minutes with the evaluations left out, at each evaluation and in all
    assert [e.minutes for e in found[0].evaluations] == pytest.approx([10_000 / 60_000, 20_001 / 60_000])
    assert found[0].minutes == pytest.approx(40_002 / 60_000)
    assert len(left_out) == 1 and "point 1 (plain at 1, seed 3) stopped before the end of its budget " \
        "(diverged: non-finite loss at step 40)" in left_out[0]
    assert not grid_points.point_folder(folder, diverged).record.exists()

    measured = grid_report.Measured(grid, "cpu", "here", "a CPU", "fashion-mnist", 0.0, found, 2, left_out=left_out)
    text = grid_report.write_report(folder, measured).read_text()
    assert "1 of 2 points finished" in text and "Left out: point 1 (plain at 1, seed 3)" in text


def test_a_finished_point_of_other_settings_is_refused_not_reused(grid, tmp_path):
    point = grid.points()[0]
    folder = tmp_path / "results"
    where = grid_points.point_folder(folder, point)
    where.path.mkdir(parents=True)
    where.run.result.write_text(_log("no target (target_accuracy=none): the whole budget trained"))
    recorded = grid_points.point_config(grid, point, {"system": "cpu", "lr": "0.5"})
    write_json(where.config, recorded.to_dict())

    config = grid_points.point_config(grid, point, {"system": "cpu"})
    with pytest.raises(CampaignError, match=r"holds a run of this point with other settings \(lr"):
        grid_points.run_point(grid, point, config, folder, 2)
    grid_points.run_point(grid, point, recorded, folder, 2)        # the same settings: kept, not rerun
    assert where.run.result.read_text().count("run_stop") == 1
    # and the report leaves it out of the curves, saying why, rather than mixing it in
    found, left_out = grid_points.finished_points(grid, folder, 0.0, {0: config, 1: config})
    assert found == [] and len(left_out) == 1
    assert "point 0 (plain at 0.5, seed 3) ran with other settings than the grid's (lr: " in left_out[0]
    found, left_out = grid_points.finished_points(grid, folder, 0.0, {0: recorded, 1: recorded})
    assert [p.top1 for p in found] == [0.62] and left_out == []
