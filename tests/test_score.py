"""submission.score on hand-written MLPerf logs with known run_start / run_stop times."""
from __future__ import annotations

import json
import random

import pytest

from submission import score
from submission.run_folder import CampaignFolder

try:
    from tests.mlperf_logs import TRAIN_SAMPLES, mlperf_log, write_runs
except ImportError:   # tests/ on sys.path instead of the repository root
    from mlperf_logs import TRAIN_SAMPLES, mlperf_log, write_runs


def _system(tmp_path, minutes, statuses=None, **kwargs):
    folder = tmp_path / "test_system"
    write_runs(folder, minutes, statuses, **kwargs)
    return folder


def test_per_run_figures_are_exact(tmp_path):
    minutes = [10.0, 12.5, 20.0, 7.25, 30.0]
    folder = _system(tmp_path, minutes, seeds=[11, 22, 33, 44, 55])
    summary = score.summarize(folder, price_usd_per_hour=6.0)

    assert [r.file for r in summary.runs] == [f"result_{i}.txt" for i in range(5)]
    assert [r.minutes for r in summary.runs] == minutes          # exactly, no rounding
    assert [r.seed for r in summary.runs] == [11, 22, 33, 44, 55]
    assert all(r.status == "success" for r in summary.runs)
    assert all(r.epochs == 2 for r in summary.runs)
    assert all(r.accuracy == 0.86 for r in summary.runs)        # the last eval_accuracy
    for run, m in zip(summary.runs, minutes):
        assert run.img_per_s == pytest.approx(TRAIN_SAMPLES * 2 / (m * 60))
        assert run.cost_usd == pytest.approx(m / 60 * 6.0)
    assert summary.cost_per_run_usd == pytest.approx(sum(minutes) / 5 / 60 * 6.0)
    assert summary.price_usd_per_hour == 6.0


def test_result_files_in_run_order(tmp_path):
    folder = _system(tmp_path, [1.0] * 12)
    (folder / "resnet" / "result_3.txt.partial").write_text("not a result\n")
    names = [p.name for p in CampaignFolder(folder).result_files()]
    assert names == [f"result_{i}.txt" for i in range(12)]


def test_five_runs_olympic_mean(tmp_path):
    minutes = [16.0, 11.0, 100.0, 12.0, 13.0]          # fastest 11 and slowest 100 dropped
    summary = score.summarize(_system(tmp_path, minutes))
    assert summary.score_minutes == pytest.approx((12 + 13 + 16) / 3)
    assert summary.valid is True
    assert summary.reasons == []
    assert summary.dropped == 0


def test_score_does_not_depend_on_run_order(tmp_path):
    minutes = [10.0, 20.0, 30.0, 40.0, 50.0]
    random.Random(0).shuffle(minutes)
    assert score.summarize(_system(tmp_path, minutes)).score_minutes == pytest.approx(30.0)


@pytest.mark.parametrize("minutes, expected, reason", [
    ([10.0, 20.0, 30.0], 20.0, "only 3 runs: MLPerf ResNet needs exactly 5"),
    ([10.0, 20.0, 30.0, 40.0], 25.0, "only 4 runs: MLPerf ResNet needs exactly 5"),
    ([10.0, 20.0, 30.0, 40.0, 50.0, 60.0], 35.0, "6 runs: MLPerf ResNet needs exactly 5"),
])
def test_wrong_number_of_runs_is_scored_but_invalid(tmp_path, minutes, expected, reason):
    summary = score.summarize(_system(tmp_path, minutes))
    assert summary.score_minutes == pytest.approx(expected)
    assert summary.valid is False
    assert summary.reasons == [reason]


def test_no_runs(tmp_path):
    (tmp_path / "empty" / "resnet").mkdir(parents=True)
    summary = score.summarize(tmp_path / "empty")
    assert summary.runs == [] and summary.score_minutes is None and summary.valid is False
    assert "no result files" in summary.reasons[0]


@pytest.mark.parametrize("minutes, expected", [
    ([20.0, 20.0, 20.0, 10.0, 30.0], 20.0),
    ([10.0, 10.0, 20.0, 30.0, 30.0], 20.0),            # ties at both ends: one of each dropped
    ([15.0, 15.0, 15.0, 15.0, 15.0], 15.0),
    ([10.0, 10.0, 10.0, 40.0, 40.0], 20.0),
])
def test_ties(tmp_path, minutes, expected):
    summary = score.summarize(_system(tmp_path, minutes))
    assert summary.score_minutes == pytest.approx(expected)
    assert summary.valid is True


def test_one_aborted_run_is_dropped_as_the_slowest(tmp_path):
    # The aborted run stopped early (5 min) but counts as non-converged: the summarizer
    # drops only the fastest converged run and averages the 3 slowest.
    minutes = [10.0, 20.0, 5.0, 30.0, 40.0]
    statuses = ["success", "success", "aborted", "success", "success"]
    summary = score.summarize(_system(tmp_path, minutes, statuses))
    assert [r.status for r in summary.runs] == statuses
    assert summary.runs[2].minutes == 5.0
    assert summary.dropped == 1
    assert summary.score_minutes == pytest.approx((20 + 30 + 40) / 3)
    assert summary.valid is True


def test_two_aborted_runs_are_invalid(tmp_path):
    statuses = ["success", "aborted", "success", "aborted", "success"]
    summary = score.summarize(_system(tmp_path, [10.0, 20.0, 30.0, 40.0, 50.0], statuses))
    assert summary.dropped == 2
    assert summary.score_minutes is None                 # the summarizer reports no score
    assert summary.valid is False
    assert summary.reasons == ["2 runs did not reach the target: at most 1 may be dropped"]


def test_incomplete_run(tmp_path):
    folder = _system(tmp_path, [10.0, 20.0, 30.0, 40.0])
    (folder / "resnet" / "result_4.txt").write_text(mlperf_log(50.0, 9, with_run_stop=False))
    summary = score.summarize(folder)
    run = summary.runs[4]
    assert run.status == "incomplete"
    assert run.minutes is None and run.img_per_s is None
    assert run.epochs == 2                               # the last epoch_num seen
    assert summary.dropped == 1
    assert summary.score_minutes == pytest.approx((20 + 30 + 40) / 3)
    assert summary.valid is True


def test_unreadable_line_drops_the_run(tmp_path):
    folder = _system(tmp_path, [10.0, 20.0, 30.0, 40.0, 50.0])
    with open(folder / "resnet" / "result_0.txt", "a") as f:
        f.write(":::MLLOG {not json\n")
    summary = score.summarize(folder)
    assert summary.runs[0].unreadable_lines == 1
    assert summary.dropped == 1
    assert summary.score_minutes == pytest.approx((30 + 40 + 50) / 3)
    assert summary.valid is False
    assert any("result_0.txt has 1 line" in r for r in summary.reasons)


def test_repeated_seed_is_invalid(tmp_path):
    summary = score.summarize(_system(tmp_path, [1.0, 2.0, 3.0, 4.0, 5.0], seeds=[7, 7, 8, 9, 10]))
    assert summary.valid is False
    assert any("same seed" in r for r in summary.reasons)


def test_price_from_campaign(tmp_path):
    folder = _system(tmp_path, [30.0, 60.0, 60.0, 60.0, 90.0])
    (folder / "campaign.json").write_text(json.dumps(
        {"system": "cpu", "config": {"settings": {"price_usd_per_hour": 4.0}}}))
    summary = score.summarize(folder)
    assert summary.price_usd_per_hour == 4.0
    assert [r.cost_usd for r in summary.runs] == pytest.approx([2.0, 4.0, 4.0, 4.0, 6.0])
    assert summary.cost_per_run_usd == pytest.approx(4.0)
    # an explicit price wins; no price anywhere: no cost
    assert score.summarize(folder, 8.0).runs[0].cost_usd == pytest.approx(4.0)
    (folder / "campaign.json").unlink()
    assert score.summarize(folder).cost_per_run_usd is None


def test_write_summary(tmp_path):
    folder = _system(tmp_path, [10.0, 20.0, 30.0, 40.0, 50.0], seeds=[101, 102, 103, 104, 105])
    md_path, json_path = score.write_summary(folder, score.summarize(folder, 3.0))
    md = md_path.read_text()
    assert md_path == folder / "summary.md" and json_path == folder / "summary.json"
    assert "| run | seed | status | epochs | top-1 | minutes |" in md
    assert "| result_2.txt | 103 | success | 2 | 86.00% | 30.000 |" in md
    assert "**Score: 30.000 minutes**" in md
    assert "Valid MLPerf ResNet score" in md
    data = json.loads(json_path.read_text())
    assert data["score_minutes"] == pytest.approx(30.0)
    assert data["valid"] is True
    assert [r["minutes"] for r in data["runs"]] == [10.0, 20.0, 30.0, 40.0, 50.0]
    assert data["cost_per_run_usd"] == pytest.approx(1.5)


def test_write_summary_states_why_invalid(tmp_path):
    folder = _system(tmp_path, [10.0, 20.0, 30.0])
    md_path, _ = score.write_summary(folder, score.summarize(folder))
    md = md_path.read_text()
    assert "**Not a valid MLPerf ResNet score:**" in md
    assert "- only 3 runs: MLPerf ResNet needs exactly 5" in md


# ---- equal to the official result summarizer ---------------------------------------
def _official_score(folder):
    """The score of the summarizer's own function for one benchmark folder."""
    from mlperf_logging.result_summarizer.result_summarizer import _compute_strong_score_standalone
    official, _, factor = _compute_strong_score_standalone(
        "resnet", folder.name, False, str(folder / "resnet"), "training", score.RULESET)
    return official, factor


def _break_compliance(path):
    """Drop the submission_benchmark line: the official compliance checker then fails the
    file, although its run_stop still says success."""
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(line for line in lines if '"submission_benchmark"' not in line))


def test_scaling_json_is_multiplied_in_as_the_summarizer_does(tmp_path):
    folder = _system(tmp_path, [28.0, 28.5, 29.1, 27.9, 30.2])
    unscaled = score.summarize(folder).score_minutes
    (folder / "resnet" / "scaling.json").write_text(json.dumps({"scaling_factor": 1.0044}))
    summary = score.summarize(folder)
    official, factor = _official_score(folder)
    assert factor == 1.0044 and summary.scaling_factor == 1.0044
    assert summary.score_minutes == pytest.approx(official, abs=1e-12)
    assert summary.score_minutes == pytest.approx(unscaled * 1.0044)
    assert "x 1.0044 from resnet/scaling.json" in score.summary_markdown(summary)


def test_bad_scaling_json_is_a_clear_error(tmp_path):
    folder = _system(tmp_path, [10.0] * 5)
    (folder / "resnet" / "scaling.json").write_text(json.dumps({"factor": 2}))
    with pytest.raises(ValueError, match="scaling.json.*scaling_factor"):
        score.summarize(folder)


def test_a_non_compliant_run_is_dropped_as_the_summarizer_does(tmp_path):
    folder = _system(tmp_path, [10.0, 20.0, 5.0, 30.0, 40.0])
    _break_compliance(folder / "resnet" / "result_2.txt")
    summary = score.summarize(folder)
    run = summary.runs[2]
    assert run.status == "success" and not run.converged
    assert run.rejected.startswith("Compliance check failed")
    assert summary.dropped == 1 and summary.valid is True
    assert summary.score_minutes == pytest.approx((20 + 30 + 40) / 3)
    assert summary.score_minutes == pytest.approx(_official_score(folder)[0], abs=1e-12)
    assert "dropped by the official summarizer: Compliance check failed" in score.summary_markdown(summary)


def test_two_non_compliant_runs_leave_no_score_in_either(tmp_path):
    folder = _system(tmp_path, [10.0, 20.0, 30.0, 40.0, 50.0])
    for i in (0, 3):
        _break_compliance(folder / "resnet" / f"result_{i}.txt")
    summary = score.summarize(folder)
    assert summary.dropped == 2 and summary.score_minutes is None and not summary.valid
    assert _official_score(folder)[0] is None


# ---- bad input to the score and report commands --------------------------------------
def _files(root):
    return sorted(p for p in root.rglob("*") if p.is_file())


def test_score_refuses_a_folder_without_result_files_and_writes_nothing(tmp_path, capsys):
    from submission.cli import main as cli_main
    system = _system(tmp_path, [10.0, 20.0, 30.0, 40.0, 50.0])
    (tmp_path / "empty").mkdir()
    before = _files(tmp_path)
    for folder, hint in ((tmp_path / "empty", "give a results/<system_name> folder"),
                         (tmp_path, "it holds the systems test_system: give one of them"),
                         (system / "resnet", f"give the folder above it, {system}")):
        assert cli_main(["score", str(folder)]) == 2
        assert f"{folder} holds no resnet/result_*.txt: {hint}" in capsys.readouterr().err
    assert _files(tmp_path) == before


@pytest.mark.parametrize("verb", ["score", "report"])
@pytest.mark.parametrize("price", ["-5", "nan", "inf"])
def test_a_price_that_is_not_a_finite_number_of_dollars_is_refused(tmp_path, capsys, verb, price):
    from submission.cli import main as cli_main
    system = _system(tmp_path, [10.0, 20.0, 30.0, 40.0, 50.0])
    before = _files(tmp_path)
    assert cli_main([verb, str(system), f"price_usd_per_hour={price}"]) == 2
    assert f"price_usd_per_hour={price}: give a number at least 0" in capsys.readouterr().err
    assert _files(tmp_path) == before


def test_a_damaged_campaign_json_is_an_error_naming_it(tmp_path, capsys):
    from submission.cli import main as cli_main
    from submission.results import CampaignError
    system = _system(tmp_path, [10.0, 20.0, 30.0, 40.0, 50.0])
    (system / "campaign.json").write_text('{"system": "cpu",\n "config": {')
    before = _files(tmp_path)
    with pytest.raises(CampaignError, match=r"campaign.json is not valid JSON \(line 2, column 13"):
        score.summarize(system)
    assert cli_main(["score", str(system)]) == 1
    err = capsys.readouterr().err
    assert f"{system / 'campaign.json'} is not valid JSON (line 2, column 13" in err
    assert "restore it from a backup" in err
    assert _files(tmp_path) == before


def _energy_record(folder, index, joules=None, why="", seconds=60.0):
    from submission.energy import Energy
    record = Energy(joules, seconds, "RAPL package-0" if joules is not None else "", not_measured=why)
    path = folder / "progress" / f"run_{index}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"kind": "window", "step": 1, "img_per_s": 10.0}) + "\n"
                    + json.dumps({"kind": "energy", **record.to_dict()}) + "\n")


def test_each_runs_energy_and_the_campaigns_kwh_come_from_the_progress_records(tmp_path):
    folder = _system(tmp_path, [10.0, 12.0])
    _energy_record(folder, 0, 1.8e6)
    _energy_record(folder, 1, 1.8e6)
    summary = score.summarize(folder)
    assert [r.energy_j for r in summary.runs] == [1.8e6, 1.8e6]
    assert summary.campaign_kwh == pytest.approx(1.0)
    text = score.summary_markdown(summary)
    assert "| energy (kJ) |" in text and "| 1800 |" in text
    assert "Energy: 1 kWh for the campaign's 2 runs, run_start to run_stop (RAPL package-0)." in text
    assert score.summarize(folder).to_dict()["campaign_kwh"] == pytest.approx(1.0)


def test_energy_not_measured_says_why_and_is_never_zero(tmp_path):
    folder = _system(tmp_path, [10.0, 12.0])
    _energy_record(folder, 0, why="RAPL: /sys/class/powercap does not exist")   # run 1 has no records
    summary = score.summarize(folder)
    assert [r.energy_j for r in summary.runs] == [None, None] and summary.campaign_kwh is None
    text = score.summary_markdown(summary)
    assert text.count("| not measured |") == 2
    assert "not measured: RAPL: /sys/class/powercap does not exist" in text
    assert "not measured: no progress records beside the log" in text
