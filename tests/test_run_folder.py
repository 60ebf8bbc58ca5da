"""submission.run_folder: the results folder's files by name, as the README and docs/layout.md
describe them."""
from __future__ import annotations

from pathlib import Path

from submission.run_folder import CampaignFolder, GridFolder, ResultsRoot


def test_a_campaigns_run_is_named_as_the_readme_describes_it(tmp_path):
    folder = ResultsRoot(tmp_path).campaign("local_cpu_2c")
    run = folder.run(3)
    names = {path.relative_to(tmp_path).as_posix() for path in (
        run.result, run.partial, run.records, run.transcript, run.events, folder.config, folder.data,
        folder.system, folder.record, folder.summary_text, folder.summary_record, folder.attempts)}
    assert names == {f"local_cpu_2c/{name}" for name in (
        "resnet/result_3.txt", "resnet/result_3.txt.partial", "progress/run_3.jsonl", "progress/run_3.log",
        "tensorboard/run_3", "config.json", "data.json", "system.json", "campaign.json", "summary.md",
        "summary.json", "attempts")}
    assert folder.progress_of(run.result, ".log") == run.transcript
    assert folder.progress_of(folder.benchmark / "scaling.json") is None


def test_result_files_are_complete_runs_in_run_order(tmp_path):
    folder = CampaignFolder(tmp_path)
    assert folder.result_files() == []
    folder.benchmark.mkdir()
    for index in (10, 2, 9):
        folder.result(index).write_text("")
    folder.run(11).partial.write_text("")
    (folder.benchmark / "scaling.json").write_text("{}")
    assert [p.name for p in folder.result_files()] == ["result_2.txt", "result_9.txt", "result_10.txt"]


def test_a_points_run_is_what_a_redo_moves_and_leaves_its_inputs(tmp_path):
    point = ResultsRoot(tmp_path).grid("embedded", "local_cpu_2c").point("plain-b0.5-s3")
    assert point.path == tmp_path / "tradeoff" / "embedded" / "local_cpu_2c" / "points" / "plain-b0.5-s3"
    assert {p.name for p in point.run_paths()} == {
        "log.txt", "log.txt.partial", "point.json", "progress.jsonl", "run.log", "tensorboard"}
    assert {point.config, point.data}.isdisjoint(point.run_paths())
    assert point.run.wandb == point.path and GridFolder(point.path.parent.parent).attempts.name == "attempts"


def test_followers_each_keep_their_own_files(tmp_path):
    folder = CampaignFolder(Path(tmp_path))
    assert [p.name for p in folder.follower_files(2)] == ["config.node2.json", "data.node2.json", "state.node2.json"]
