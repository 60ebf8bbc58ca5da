"""submission.comparison: systems side by side, with the published figures beside them."""
from __future__ import annotations

import json
import shutil

from submission import comparison
from submission.results import RunResult, Summary, write_summary

try:
    from tests.mlperf_logs import TRAIN_SAMPLES, write_runs
except ImportError:   # tests/ on sys.path instead of the repository root
    from mlperf_logs import TRAIN_SAMPLES, write_runs


def _system(tmp_path, minutes):
    folder = tmp_path / "test_system"
    write_runs(folder, minutes)
    return folder


def test_compare_systems(tmp_path):
    write_runs(tmp_path / "alpha", [10.0, 20.0, 30.0, 40.0, 50.0])
    (tmp_path / "alpha" / "campaign.json").write_text(json.dumps(
        {"system": "a", "config": {"settings": {"price_usd_per_hour": 60.0}}}))
    write_runs(tmp_path / "beta", [1.0, 2.0, 3.0])
    (tmp_path / "package" / "Org" / "systems").mkdir(parents=True)    # not a system
    (tmp_path / "gamma").mkdir()                                       # summary only
    run = RunResult("result_0.txt", 1, "success", 2.0, 0.76, 7.5, 60000, 1234.0, None, energy_j=180_000.0)
    write_summary(tmp_path / "gamma", Summary("gamma", [run] * 5, 7.5, True), "# gamma\n")

    table = comparison.compare_systems(tmp_path)
    rows = [line for line in table.splitlines()
            if line.startswith("| ") and "---" not in line and "*published*" not in line]
    assert rows[0].startswith("| system | runs | score (min) | valid |")
    mean_img_s = sum(TRAIN_SAMPLES * 2 / (m * 60) for m in (10, 20, 30, 40, 50)) / 5
    assert rows[1] == f"| alpha (a) | 5 | 30.000 | yes | $30.00 | {mean_img_s:,.0f} | not measured |"
    assert rows[2].startswith("| beta | 3 | 2.000 | no | — |")
    assert rows[3] == "| gamma | 5 | 7.500 | yes | — | 1,234 | 0.25 |"
    assert len(rows) == 4

    path = comparison.write_comparison(tmp_path)
    assert path == tmp_path / "comparison.md" and path.read_text() == table


def test_compare_shows_published_figures_labelled_with_their_source(tmp_path):
    write_runs(tmp_path / "alpha", [10.0, 20.0, 30.0, 40.0, 50.0])
    table = comparison.compare_systems(tmp_path)
    published = [line for line in table.splitlines() if "*published*" in line and line.startswith("| ")]
    mild = next(line for line in published if "MLPerf v2.0 open" in line)
    assert "| 5 | 23.79 | (published) |" in mild and "8x A100-80GB" in mild
    assert any("Baseline" in line and "| 110.50 |" in line for line in published)
    assert any("AWS p4d.24xlarge" in line and "| 21,582 |" in line for line in published)
    assert any("Oracle BM.GPU4.8" in line and "| 22,242 |" in line for line in published)
    assert "[1] MosaicML, MLPerf Training v2.0 open division" in table
    # our own system comes first, in the same table
    lines = table.splitlines()
    assert lines.index(next(line for line in lines if line.startswith("| alpha"))) < lines.index(published[0])


def test_compare_leaves_out_a_system_whose_campaign_json_is_damaged_and_says_so(tmp_path):
    healthy = _system(tmp_path / "results", [10.0, 20.0, 30.0, 40.0, 50.0])
    damaged = healthy.parent / "damaged_system"
    shutil.copytree(healthy, damaged)
    (damaged / "campaign.json").write_text('{"system": ')
    table = comparison.compare_systems(healthy.parent)
    assert f"| {healthy.name}" in table and f"| {damaged.name}" not in table
    assert "Left out, their campaign.json cannot be read" in table and str(damaged) in table


def test_compare_shows_the_mlperf_closed_records_on_h100_and_h200_as_another_recipe(tmp_path):
    write_runs(tmp_path / "alpha", [10.0, 20.0, 30.0, 40.0, 50.0])
    table = comparison.compare_systems(tmp_path)
    another = [line for line in table.splitlines() if line.startswith("| *published*, *another recipe*")]
    assert len(another) == 4
    h200 = next(line for line in another if "8x H200-SXM5-141GB" in line)
    assert "MLPerf v4.0 closed" in h200 and "| 5 | 12.08 | (published) |" in h200
    assert sum("8x H100-SXM" in line for line in another) == 3
    cited = h200.split("[")[-1].split("]")[0]
    assert (f"[{cited}] NVIDIA, MLPerf Training v4.0 closed division, ResNet-50 result logs "
            "(mlcommons/training_results_v4.0: NVIDIA/results/h200_ngc24.04_mxnet)") in table
    assert "Rows marked *another recipe* ran the closed division's reference ResNet-50 v1.5 at 224 px" in table
    # the table's own rows come first
    lines = table.splitlines()
    assert lines.index(next(line for line in lines if line.startswith("| alpha"))) < lines.index(another[0])
