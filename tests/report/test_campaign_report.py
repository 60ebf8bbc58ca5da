"""submission.report: plots and report.md from result logs alone (foreign folders too), with
every number equal to submission.score's; throughput and steadiness from each run's progress
records (progress/run_<i>.jsonl), never from its printed lines."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch

from submission import score
from submission.cli import main as cli_main
from submission.progress import Reporter
from submission.report import campaign_report, plots
from submission.run_folder import CampaignFolder

try:
    from tests.mlperf_logs import write_runs
except ImportError:   # tests/ on sys.path instead of the repository root
    from mlperf_logs import write_runs

PNG = b"\x89PNG\r\n\x1a\n"


def _foreign(root: Path, name: str = "vendor_system", minutes=(20.0, 22.5, 21.0, 25.0, 23.0)) -> Path:
    folder = root / name
    write_runs(folder, list(minutes), epochs=4, accuracies=(0.5, 0.7, 0.76, 0.77))
    return folder


def _progress_records(path: Path) -> None:
    """Progress records as the Reporter writes them (it also prints its lines)."""
    reporter = Reporter("[run 1/5 seed 7]", total_steps=20, steps_per_epoch=10, global_batch=64,
                        every=5, enabled=True, progress_file=path)
    for step in range(1, 21):
        reporter.step(step, torch.tensor(0.5), 0.01, 16 if step <= 10 else 32)
        if step == 10:
            reporter.evaluated(1.0, 0.55, 0.65, 2.5)
    reporter.close()


def test_foreign_logs_give_plots_and_a_report(tmp_path):
    folder = _foreign(tmp_path)
    _foreign(tmp_path, "other_system", (30.0, 31.0, 32.0, 33.0, 34.0))
    assert cli_main(["report", str(folder)]) == 0
    text = (folder / "report.md").read_text()
    assert "No campaign.json" in text and "75.9%" in text
    for name in ("accuracy", "systems"):
        png = folder / f"{name}.png"
        assert png.read_bytes()[:8] == PNG and png.stat().st_size > 10_000
        assert f"]({name}.png)" in text
    assert not (folder / "throughput.png").exists() and "no throughput plot" in text
    assert "| other_system | 5 | 32.000 | yes |" in text
    assert "*published* Mild (MLPerf v2.0 open entry)" in text
    assert "No bench profile" in text and "No price" in text


def test_every_number_in_the_report_is_the_scoring_codes(tmp_path):
    folder = _foreign(tmp_path)
    (folder / "resnet" / "scaling.json").write_text(json.dumps({"scaling_factor": 1.01}))
    text, _ = campaign_report.build_report(folder, price=12.0)
    summary = score.summarize(folder, 12.0)
    rows = [line for line in text.splitlines() if line.startswith("| result_")]
    assert len(rows) == len(summary.runs) == 5
    for row, run in zip(rows, summary.runs):
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert cells[0] == run.file and cells[1] == str(run.seed)
        assert float(cells[4].rstrip("%")) == pytest.approx(run.accuracy * 100, abs=0.005)
        assert float(cells[5]) == pytest.approx(run.minutes, abs=5e-4)
        assert float(cells[6].replace(",", "")) == pytest.approx(run.img_per_s, abs=0.5)
        assert float(cells[7]) == pytest.approx(run.cost_usd, abs=0.005)
    [score_text] = re.findall(r"\*\*Score: ([\d.]+) minutes\*\*", text)
    assert float(score_text) == pytest.approx(summary.score_minutes, abs=5e-4)
    assert summary.score_minutes == pytest.approx(22.166666 * 1.01, abs=1e-4)
    [system_row] = [line for line in text.splitlines() if line.startswith(f"| {folder.name} |")]
    assert f"| {summary.score_minutes:.3f} | yes | ${summary.cost_per_run_usd:.2f} |" in system_row
    assert f"${summary.cost_per_run_usd:.2f} per run on average" in text


def test_eval_points_are_minutes_since_run_start(tmp_path):
    folder = _foreign(tmp_path, minutes=(20.0,))
    points = plots.eval_points(CampaignFolder(folder).result_files()[0])
    # tests/mlperf_logs.py: 4 epochs in 20 min, an evaluation ends each fifth, 1 ms early
    assert [a for _, a in points] == [0.5, 0.7, 0.76, 0.77]
    assert [m for m, _ in points] == pytest.approx([4.0, 8.0, 12.0, 16.0], abs=1e-4)


def test_progress_records_of_the_reporter_are_read(tmp_path):
    path = tmp_path / "progress" / "run_0.jsonl"
    _progress_records(path)
    points = plots.progress_points(path)
    assert [side for _, _, side in points] == [16, 16, 32, 32]
    assert all(rate > 0 for _, rate, _ in points)
    assert [m for m, _, _ in points] == sorted(m for m, _, _ in points)


def test_throughput_plot_and_campaign_target(tmp_path):
    folder = _foreign(tmp_path)
    _progress_records(folder / "progress" / "run_0.jsonl")
    (folder / "campaign.json").write_text(json.dumps({
        "system": "cpu", "created": "2026-11-22T10:00:00",
        "config": {"settings": {"recipe": "mild", "target_accuracy": 0.65, "price_usd_per_hour": 2.0,
                                "price_source": "test list price", "price_date": "2026-11"}}}))
    assert plots.target_of(folder).accuracy == 0.65
    path = campaign_report.write_report(folder)
    text = path.read_text()
    assert (folder / "throughput.png").read_bytes()[:8] == PNG and "](throughput.png)" in text
    assert "recipe `mild`, target 65.0% top-1" in text
    assert "$2 per hour for the whole system (test list price; 2026-11)" in text
    assert "progress/run_<i>.jsonl`; each point is one window" in text and "Missing" not in text


def test_printed_progress_lines_alone_are_not_read(tmp_path, capsys):
    """A campaign from before the records: its printed lines give no throughput plot nor
    steadiness windows, and the report names the records it lacks."""
    folder = _foreign(tmp_path)
    _progress_records(tmp_path / "records.jsonl")
    printed = capsys.readouterr().out
    assert "step 20/20" in printed
    for index in (0, 3):
        (folder / "progress").mkdir(exist_ok=True)
        (folder / "progress" / f"run_{index}.log").write_text(printed)
    assert plots.progress_files(folder) == {}
    text, drawn = campaign_report.build_report(folder)
    assert "throughput" not in drawn and not (folder / "throughput.png").exists()
    [line] = [line for line in text.splitlines() if line.startswith("Missing ")]
    assert "`progress/run_0.jsonl`, `progress/run_3.jsonl`" in line and "no throughput plot" in line
    assert "progress/run_1.jsonl" not in line
    assert "No progress records (`progress/run_<i>.jsonl`) with windows: nothing to check." in text

    _progress_records(folder / "progress" / "run_0.jsonl")    # one run with records: its plot
    text, drawn = campaign_report.build_report(folder)
    assert "throughput" in drawn
    [line] = [line for line in text.splitlines() if line.startswith("Missing ")]
    assert "`progress/run_3.jsonl`: this run has only" in line and "run_0" not in line


def _profile(loader_kind: str) -> dict:
    return {
        "schema": 2, "measured": {"date": "2026-11-22", "host": "h", "device": "cpu",
                                  "device_name": "d", "torch": "t"},
        "settings": {"sam_interval": 0, "batch_per_device": 64, "precision": "fp32",
                     "workers_per_device": 2, "eval_resolution": 32},
        "train_step": {"32": {"img_per_s": 91.25, "first_step_s": 1.0},
                       "16": {"img_per_s": 140.5, "first_step_s": 1.0}},
        "eval_img_per_s": 230.0, "loader": {"kind": loader_kind, "img_per_s": 70000.0, "threads": 2,
                                            "resolution": 32},
        "fed_step_by_side": {}}


def test_bench_profile_is_shown_with_the_loader_it_measured(tmp_path):
    folder = _foreign(tmp_path)
    (folder / "profile.json").write_text(json.dumps(_profile("ffcv")))
    (folder / "profile-torchvision.json").write_text(json.dumps(_profile("torchvision")))
    (folder / "profile-broken.json").write_text(json.dumps({**_profile("ffcv"), "eval_img_per_s": -1}))
    text, _ = campaign_report.build_report(folder)
    assert "| training step at 16 px (synthetic batches) | 140.5 |" in text
    assert text.index("at 16 px") < text.index("at 32 px")
    assert "| FFCV train loader alone, 2 threads | 70,000.0 |" in text
    assert "| torchvision train loader alone, 2 threads | 70,000.0 |" in text
    assert re.search(r"profile-broken.json: not a readable bench profile \(.*eval_img_per_s is -1", text)


def test_report_of_a_folder_without_logs_is_refused(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    assert cli_main(["report", str(tmp_path / "empty")]) == 2
    assert "holds no resnet/result_*.txt" in capsys.readouterr().err


def _windows(path: Path, windows: list[tuple[int, float]], eval_before: int = 0) -> None:
    """Progress records (submission.progress) with the given (side, img/s) windows of 5
    steps of 64 images, and an evaluation record before window number eval_before."""
    records = []
    for i, (side, rate) in enumerate(windows, start=1):
        if i == eval_before:
            records.append({"kind": "eval", "step": 5 * (i - 1), "epoch": (i - 1) / 10,
                            "accuracy": 0.5, "target": 0.65, "seconds": 2.0, "minutes": i / 10})
        records.append({"kind": "window", "step": 5 * i, "total_steps": 5 * len(windows),
                        "epoch": i / 10, "loss": 0.5, "lr": 0.01, "side": side, "img_per_s": rate,
                        "window_steps": 5, "window_s": 5 * 64 / rate, "minutes": i / 10})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(record) + "\n" for record in records))


def test_steadiness_flags_a_slow_first_window_and_a_slow_first_evaluation(tmp_path):
    """Windows against the campaign's median window of their side; the first evaluation
    (eval_start to eval_stop in the MLPerf log) against the later ones. Windows with an
    evaluation or a side change in them are not judged."""
    from submission.report import steadiness

    folder = tmp_path / "sys"
    results = write_runs(folder, [10.0, 10.0], epochs=3)
    _windows(folder / "progress" / "run_0.jsonl", [(16, 100), (16, 100), (16, 40), (32, 10), (32, 50)],
             eval_before=3)
    _windows(folder / "progress" / "run_1.jsonl", [(16, 60), (16, 100), (16, 100), (32, 50), (32, 46)])
    lines = results[1].read_text().splitlines()      # run 1: its first evaluation 3x as long
    first = next(i for i, line in enumerate(lines) if '"eval_start"' in line)
    record = json.loads(lines[first].split(":::MLLOG ", 1)[1])
    seconds = steadiness.eval_seconds(results[0])
    assert len(seconds) == 3 and max(seconds) == pytest.approx(min(seconds))
    record["time_ms"] -= round(2 * seconds[0] * 1000)
    lines[first] = ":::MLLOG " + json.dumps(record)
    results[1].write_text("\n".join(lines) + "\n")

    steady, slow = steadiness.campaign_steadiness(folder)
    assert steady.flat and steady.judged == 3 and steady.slowest_ratio == pytest.approx(1.0)
    assert steady.first_eval_ratio == pytest.approx(1.0, abs=0.01)
    assert not slow.flat
    assert slow.slowest_ratio == pytest.approx(0.6) and slow.slowest_at == "window 1 (16 px)"
    assert slow.first_eval_ratio == pytest.approx(3.0, abs=0.01)
    table = "\n".join(steadiness.markdown(folder))
    assert "| result_1 | 5 (4) | 0.60x | window 1 (16 px) |" in table and "| NO |" in table


def test_side_changes_are_held_against_the_new_sides_steady_rate(tmp_path):
    """The window in which the side changed: its rate over the new side's steady rate, the
    seconds it lost against that rate, and the window after it; and each run's first window."""
    from submission.report import steadiness

    folder = tmp_path / "sys"
    write_runs(folder, [10.0, 10.0], epochs=3)
    _windows(folder / "progress" / "run_0.jsonl", [(16, 100), (16, 100), (16, 100), (32, 10), (32, 50)])
    _windows(folder / "progress" / "run_1.jsonl", [(16, 60), (16, 100), (16, 100), (32, 50), (32, 46)],
             eval_before=4)
    slow, quick = steadiness.campaign_steadiness(folder)
    assert slow.first_window_ratio == pytest.approx(1.0) and quick.first_window_ratio == pytest.approx(0.6)
    [change] = slow.side_changes
    steady_32 = 48.0                     # the median of the judged 32-px windows: 50 and 46
    assert (change.before, change.after, change.evaluated) == (16, 32, False)
    assert change.ratio == pytest.approx(10 / steady_32)
    assert change.lost_s == pytest.approx(5 * 64 / 10 - 5 * 64 / steady_32)
    assert change.next_ratio == pytest.approx(50 / steady_32)
    [other] = quick.side_changes
    assert other.lost_s == 0.0 and other.evaluated
    table = "\n".join(steadiness.markdown(folder))
    assert f"| result_0 | 16 -> 32 px | 0.21x | {change.lost_s:.2f} | 1.04x |  |" in table
    assert "| result_1 | 16 -> 32 px | 1.04x | 0.00 | 0.96x | an evaluation in it too |" in table


def test_report_of_a_damaged_campaign_json_is_refused(tmp_path, capsys):
    folder = _foreign(tmp_path)
    (folder / "campaign.json").write_text('{"config": {"settings": {"target_accuracy": 0.65,}}}')
    before = sorted(folder.rglob("*"))
    assert cli_main(["report", str(folder)]) == 1
    err = capsys.readouterr().err
    assert re.search(re.escape(f"{folder / 'campaign.json'} is not valid JSON (") + r"line 1, column \d+", err)
    assert "restore it from a backup" in err
    assert sorted(folder.rglob("*")) == before                 # no report.md, no plot
