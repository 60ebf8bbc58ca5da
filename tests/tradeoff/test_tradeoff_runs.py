"""`python -m submission tradeoff` on the real pipeline: a grid of two points (Fashion-MNIST
subset, a few steps each) trained to the end of their budgets, one interrupted and redone, the
report and the published points drawn."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request

import pytest

from submission.config import ConfigError, resolve
from submission.options import TradeoffOptions
from submission.run_plan import RunPlan
from submission.tradeoff.grid import load_grid

from conftest import campaign_from_a_terminal, free_port, mllog_events, quick_settings, run_submission, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.loaders_interpreted]

GRID = """name: tiny
budget: scale_schedule_ratio
budgets: [0.5, 1.0]
seeds: [5]
baseline: mild
targets: [0.3]
configurations:
  mild: {recipe: mild}
"""


def _settings(tmp_path, cache_dir) -> list[str]:
    grid = tmp_path / "grid.yaml"
    grid.write_text(GRID)
    return [f"grid={grid}", *quick_settings(tmp_path / "results", cache_dir)]


def _folder(tmp_path):
    return tmp_path / "results" / "tradeoff" / "tiny" / "local_cpu"


def _mllog(path, key):
    return [event for event in mllog_events(path) if event["key"] == key]


def _points_trained_their_whole_budget_and_logged_every_evaluation(tmp_path, cache_dir, output: str):
    """Each point's log and record, and the grid's report (and again at a price), read from the
    grid trained by the test below (training a grid of its own cost the suite 50-60 s)."""
    folder = _folder(tmp_path)
    for budget in (0.5, 1.0):
        where = folder / "points" / f"mild-budget{budget:g}-seed5"
        log = where / "log.txt"
        config = resolve("cpu", {**dict(w.split("=", 1) for w in quick_settings(tmp_path, cache_dir)),
                                 "scale_schedule_ratio": str(budget), "target_accuracy": "none"})
        plan = RunPlan.of(config, json.loads((where / "data.json").read_text())["train_samples"])
        accuracies = [line["value"] for line in _mllog(log, "eval_accuracy")]
        assert len(accuracies) == plan.evaluations_until(plan.total_steps), (budget, accuracies)
        stop = _mllog(log, "run_stop")[0]["metadata"]
        assert stop["status"] == "aborted" and stop["reason"].startswith("no target")
        assert stop["epoch_num"] == pytest.approx(plan.epoch(plan.total_steps), abs=1e-4)
        point = json.loads((where / "point.json").read_text())
        assert point["top1"] == accuracies[-1] and len(point["evaluations"]) == len(accuracies)
        assert point["minutes"] > 0 and point["cost_usd"] is None
    numbers = json.loads((folder / "tradeoff.json").read_text())
    assert [p["budget"] for p in numbers["curve_points"]] == [0.5, 1.0]
    report = (folder / "tradeoff.md").read_text()
    assert "2 of 2 points finished" in report and (folder / "tradeoff-minutes.png").stat().st_size > 0
    assert "trained its whole budget (no target)" in output

    # the report alone, at a price: every point costed at it (a dollar a minute)
    priced = run_submission("tradeoff", *_settings(tmp_path, cache_dir), "--report", "price_usd_per_hour=60")
    assert priced.returncode == 0, priced.stderr
    points = json.loads((folder / "tradeoff.json").read_text())["points"]
    assert [p["cost_usd"] for p in points] == pytest.approx([p["minutes"] for p in points])
    assert (folder / "tradeoff-cost.png").is_file()


def _tensorboard_serves_each_points_series_and_the_grid_as_an_hparams_table(tmp_path):
    """The real `tensorboard` server on the grid's folder, asked over its HTTP data API."""
    grid = tmp_path / "results" / "tradeoff" / "tiny"
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "tensorboard.main", "--logdir", str(grid),
                               "--host", "127.0.0.1", "--port", str(port), "--reload_interval", "1"],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    base = f"http://127.0.0.1:{port}/data"
    try:
        runs = [f"local_cpu/points/mild-budget{budget}-seed5/tensorboard" for budget in ("0.5", "1")]
        # an interrupted attempt's series, kept aside under attempts/, is served too
        wait_for(lambda: [r for r in _asked(f"{base}/runs") or [] if "/points/" in r] == runs, 120,
                 "tensorboard to load both points")
        for run in runs:
            point = json.loads((grid / run).parent.joinpath("point.json").read_text())
            top1 = _asked(f"{base}/plugin/scalars/scalars?" + urllib.parse.urlencode(
                {"run": run, "tag": "metrics/eval/top1"}))
            assert [value for _, _, value in top1] == pytest.approx(
                [e["top1"] for e in point["evaluations"]], abs=1e-6)
        wait_for(lambda: len(_points_sessions(base)) == 2, 60, "both points' HParams sessions")
        table = {group["hparams"]["budget"]: group for group in _points_sessions(base)}
        assert sorted(table) == [0.5, 1.0]
        for budget, group in table.items():
            assert group["hparams"] == {"configuration": "mild", "recipe": "mild", "budget": budget, "seed": 5.0}
            figures = {m["name"]["tag"]: m["value"] for m in group["metricValues"]}
            point_file = grid / "local_cpu" / "points" / f"mild-budget{budget:g}-seed5" / "point.json"
            point = json.loads(point_file.read_text())
            assert figures["grid/top1"] == pytest.approx(point["top1"], abs=1e-6)
            assert figures["grid/minutes"] == pytest.approx(point["minutes"], rel=1e-6)
            assert group["sessions"][0]["status"] == "STATUS_SUCCESS"
    finally:
        server.terminate()
        server.wait(timeout=30)


def _asked(url: str, body: dict | None = None):
    """TensorBoard's answer to a GET (or, with a body, a POST of JSON); None until it answers."""
    request = urllib.request.Request(url, data=None if body is None else json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return json.loads(answer.read())
    except (urllib.error.URLError, ConnectionError):
        return None


def _points_sessions(base: str) -> list[dict]:
    """The HParams session groups of the points' own series (not an attempt's, kept aside)."""
    return [group for group in _session_groups(base)
            if all("/points/" in session["name"] for session in group["sessions"])]


def _session_groups(base: str) -> list[dict]:
    asked = _asked(f"{base}/plugin/hparams/session_groups", {
        "experimentName": "", "allowedStatuses": ["STATUS_UNKNOWN", "STATUS_SUCCESS", "STATUS_FAILURE",
                                                  "STATUS_RUNNING"],
        "colParams": [], "startIndex": 0, "sliceSize": 100})
    return (asked or {}).get("sessionGroups", [])


def test_an_interrupted_point_is_redone_and_a_finished_one_kept_byte_for_byte(tmp_path, cache_dir):
    """Ctrl-C in the grid's second point, the same command again: the first point kept, the second
    redone; then the finished grid read as a user reads it (every point's budget and evaluations,
    the report, at a price, and in the real `tensorboard` server)."""
    args = ["tradeoff", *_settings(tmp_path, cache_dir)]
    points = _folder(tmp_path) / "points"
    first_log, second_log = points / "mild-budget0.5-seed5" / "log.txt", points / "mild-budget1-seed5" / "log.txt"
    partial = second_log.with_name("log.txt.partial")
    with campaign_from_a_terminal(*args) as job:
        wait_for(lambda: partial.is_file() and "run_start" in partial.read_text(), 400, "point 1 to start")
        os.killpg(job.pid, signal.SIGINT)
        output, _ = job.communicate(timeout=120)
    assert job.returncode == 1 and "interrupted" in output and "Traceback" not in output, output
    assert "interrupted" in _mllog(partial, "run_stop")[0]["metadata"]["reason"]
    kept = first_log.read_bytes()

    again = run_submission(*args)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "point 1 of 2 (point=0): mild at 0.5, seed 5, already finished" in again.stdout
    assert first_log.read_bytes() == kept
    assert second_log.is_file() and not partial.exists()
    attempts = list((_folder(tmp_path) / "attempts").iterdir())
    # its partial log, printed output and progress records, side by side
    assert sorted((a.name.split("-2")[0], a.suffix) for a in attempts if a.is_file()) == [
        ("mild-budget1-seed5", ".jsonl"), ("mild-budget1-seed5", ".log"), ("mild-budget1-seed5", ".txt")]
    # the interrupted run's TensorBoard series went with its log: the redone run's starts anew
    assert [a.name.endswith("-tensorboard") for a in attempts if a.is_dir()] in ([], [True])
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    events = EventAccumulator(str(second_log.parent / "tensorboard"))
    events.Reload()
    steps = [e.step for e in events.Scalars("throughput/samples_per_sec")]
    assert steps == sorted(set(steps)), steps
    _points_trained_their_whole_budget_and_logged_every_evaluation(tmp_path, cache_dir, again.stdout)
    _tensorboard_serves_each_points_series_and_the_grid_as_an_hparams_table(tmp_path)


def test_a_campaign_keeps_its_target():
    from submission import campaign
    with pytest.raises(ConfigError, match="target_accuracy=none trains whole budgets .* `python -m "
                                          "submission tradeoff`"):
        campaign.run_campaign(resolve("cpu", {"target_accuracy": "none"}))


def test_the_published_points_are_drawn_per_system_without_a_run(tmp_path):
    done = run_submission("tradeoff", "published", f"results_dir={tmp_path}")
    assert done.returncode == 0, done.stderr
    folder = tmp_path / "tradeoff" / "published"
    report = (folder / "tradeoff.md").read_text()
    for system in ("a100-80gb", "p4d"):
        assert (folder / f"published-{system}.png").stat().st_size > 0
        assert f"## {system}" in report
    assert "Medium 79.4% $32.99" in report          # 60.4 min at p4d's $32.7726/hour
    # the two points on an 8x A100 the write-up does not name, and the ablations as a table
    assert (folder / "published-unnamed-8xa100.png").stat().st_size > 0
    assert "| Hot | 8x A100 (not specified further) | 80.0% | 284 |" in report
    assert "| Hot, SAM every 5 vs every 10 steps | 450 | SAM every 10 steps | 80.69% | 532 | - |" in report
    assert "Nothing here was measured by this harness" in report


def test_the_list_names_every_point_and_the_array_command(tmp_path, cache_dir):
    done = run_submission("tradeoff", *_settings(tmp_path, cache_dir), "--list")
    assert done.returncode == 0, done.stderr
    assert "| 1 | mild | 1 (scale_schedule_ratio) | 5 | no |" in done.stdout
    assert "sbatch --array=0-1 scripts/slurm/run.sbatch tradeoff grid=" in done.stdout
    assert len(load_grid(str(tmp_path / "grid.yaml")).points()) == 2


def test_a_point_runs_on_one_node():
    """A point has no followers: on several nodes torchrun would wait at its rendezvous forever."""
    from submission.tradeoff import command
    with pytest.raises(ConfigError, match=r"2 nodes: a tradeoff point runs on one node .* job array"):
        command.main(TradeoffOptions(), ["nodes=2"])
