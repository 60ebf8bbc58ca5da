"""submission.tracking: the progress records reach TensorBoard (read back with its own
EventAccumulator) and W&B (an offline run of the real wandb package), a failing tracker is one
line and is dropped, and what cannot run here is refused before anything is written."""
from __future__ import annotations

import importlib.util
import math
import os
from pathlib import Path

import pytest

from submission import preflight, tracking
from submission.config import ConfigError, resolve
from submission.energy import Energy
from submission.progress import Reporter, read_progress
from submission.tracking import Target, TensorBoardWriter, Tracking, scalars

from conftest import child_env, first_run_of, mllog_events, quick_settings, run_submission

# tracker=wandb is an extra: the test command installs it, ./run_and_time.sh does not, so plain
# pytest in the environment a campaign set up skips the tests that need it
needs_wandb = pytest.mark.skipif(importlib.util.find_spec("wandb") is None,
                                 reason="the [wandb] extra is not installed: ./tests/run.sh installs it "
                                        "(or .venv/bin/pip install -e '.[wandb]')")


def event_series(folder: Path) -> dict[str, list[tuple[int, float]]]:
    """Every scalar series of a TensorBoard run folder, as TensorBoard's own reader gives it."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    events = EventAccumulator(str(folder))
    events.Reload()
    return {tag: [(e.step, e.value) for e in events.Scalars(tag)] for tag in events.Tags()["scalars"]}


def _report(reporter: Reporter, energy: Energy | None = None, steps=range(1, 13)) -> None:
    """Twelve steps, a line every 4, evaluations after steps 6 and 12 (the second with a NaN
    loss before it), then the energy; `steps`: only these of them (the run ends after 12)."""
    for step in steps:
        reporter.step(step, float("nan") if step == 12 else 2.0 / step, 0.01 * step, 16 if step < 8 else 32)
        if step in (6, 12):
            reporter.evaluated(step / 8, 0.1 * step / 6, 0.65, 0.5)
    if steps[-1] == 12:
        if energy is not None:
            reporter.energy(energy)
        reporter.close()
        if reporter.tracking is not None:
            reporter.tracking.close()       # as train.main closes the trackers it opened


def test_tracker_words_parse_and_a_wrong_one_names_the_choices():
    """tracker= is a comma list of the choices its setting declares (settings.py)."""
    def trackers(value: str) -> list[str]:
        return resolve("cpu", {"tracker": value}).trackers
    assert trackers("tensorboard") == ["tensorboard"] and trackers("none") == [] and trackers("") == []
    assert trackers("TensorBoard, wandb,tensorboard") == ["tensorboard", "wandb"]
    with pytest.raises(ConfigError, match=r"tracker must be one of tensorboard, wandb, none, or several "
                                          r"joined by commas, not 'tensorbord' \(the command line\)"):
        trackers("tensorbord")
    with pytest.raises(ConfigError, match="tracker must be none alone, or words without none, not 'none,wandb'"):
        trackers("none,wandb")
    assert resolve("cpu", {}).trackers == ["tensorboard"]


def test_each_record_kind_gives_its_series_and_a_non_finite_figure_is_left_out():
    window = {"kind": "window", "step": 8, "loss": None, "lr": 0.5, "img_per_s": 100.0, "side": 24,
              "epoch": 0.8, "minutes": 0.1, "window_steps": 4, "window_s": 2.0, "total_steps": 12}
    step, figures = scalars(window)
    assert step == 8 and "loss/train/total" not in figures
    assert figures == {"lr-SGD/group0": 0.5, "throughput/samples_per_sec": 100.0, "trainer/side_px": 24.0,
                       "time/epoch": 0.8, "time/minutes": 0.1}
    assert scalars({"kind": "eval", "step": 9, "accuracy": 0.7}) == (9, {"metrics/eval/top1": 0.7})
    measured = {"kind": "energy", **Energy(1234.5, 60.0, "RAPL").to_dict()}
    assert scalars(measured)[1] == {"energy/joules": 1234.5}
    assert scalars({"kind": "energy", **Energy(None, 60.0, not_measured="no counter").to_dict()})[1] == {}
    assert scalars({"kind": "a kind from a later release", "step": 3}) == (3, {})


def test_event_files_hold_one_point_per_progress_record_and_are_written_only_at_evaluations(tmp_path):
    folder = tmp_path / "tensorboard" / "run_0"
    tracking_ = Tracking([TensorBoardWriter(folder)], "[run 1/1 seed 1]")
    reporter = Reporter("[run 1/1 seed 1]", 12, 8, 64, 4, True, tmp_path / "run_0.jsonl", tracking=tracking_)
    _report(reporter, steps=range(1, 6))
    assert not folder.exists(), "nothing may be written before the first evaluation"
    _report(reporter, Energy(2000.0, 30.0, "RAPL"), steps=range(6, 13))
    records = read_progress(tmp_path / "run_0.jsonl")
    series = event_series(folder)
    windows = [r for r in records if r["kind"] == "window"]
    evals = [r for r in records if r["kind"] == "eval"]
    assert [s for s, _ in series["throughput/samples_per_sec"]] == [r["step"] for r in windows]
    assert [v for _, v in series["trainer/side_px"]] == [r["side"] for r in windows]
    assert [s for s, _ in series["loss/train/total"]] == [r["step"] for r in windows if r["loss"] is not None]
    assert [v for _, v in series["metrics/eval/top1"]] == pytest.approx([r["accuracy"] for r in evals])
    assert series["energy/joules"] == [(12, 2000.0)]


def test_a_tracker_that_fails_mid_run_is_named_once_and_dropped_and_the_others_go_on(tmp_path, capsys):
    class Recording:
        name = "recorder"

        def __init__(self):
            self.written, self.closed = [], False

        def write(self, kept):
            self.written += kept

        def close(self):
            self.closed = True

    blocked = tmp_path / "tensorboard"
    blocked.write_text("a file where the event folder should go")   # as a full or read-only disk fails
    kept = Recording()
    tracking_ = Tracking([TensorBoardWriter(blocked / "run_0"), kept], "[run 2/5 seed 9]")
    _report(Reporter("[run 2/5 seed 9]", 12, 8, 64, 4, True, tmp_path / "run.jsonl", tracking=tracking_))
    err = capsys.readouterr().err
    assert err.count("TensorBoard stopped tracking this run") == 1, err
    assert "[run 2/5 seed 9]" in err and "the run goes on, its MLPerf log untouched" in err
    assert kept.closed and [s for s, f in kept.written if "metrics/eval/top1" in f] == [6, 12]
    assert len(read_progress(tmp_path / "run.jsonl")) == 5          # 3 windows, 2 evaluations


def test_a_tracker_that_cannot_start_is_left_out_with_one_line(tmp_path, capsys, monkeypatch):
    def broken(*args, **kwargs):
        raise OSError("no space left on device")
    monkeypatch.setattr(tracking, "TensorBoardWriter", broken)
    target = Target(("tensorboard",), str(tmp_path / "events"), str(tmp_path), "run_0", "local_cpu")
    opened = tracking.open_tracking(target, {}, "[run 1/1 seed 1]")
    assert opened is not None and opened.writers == []
    assert "tracker=tensorboard could not start (OSError: no space left on device)" in capsys.readouterr().err
    assert tracking.open_tracking(None, {}, "x") is None
    assert Target.from_text(Target(("wandb",), "e", "w", "n", "g").to_text()) == Target(("wandb",), "e", "w", "n", "g")


def test_a_points_hparams_session_is_read_by_tensorboards_hparams_plugin(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.plugins.hparams import metadata
    folder = tmp_path / "points" / "mild-budget0.5-seed1" / "tensorboard"
    tracking.write_point_hparams(folder, {"configuration": "mild", "recipe": "mild", "budget": 0.5, "seed": 1},
                                 {"top1": 0.61, "minutes": 0.3, "usd": None, "joules": 900.0})
    events = EventAccumulator(str(folder))
    events.Reload()
    content = events.PluginTagToContent(metadata.PLUGIN_NAME)
    start = metadata.parse_session_start_info_plugin_data(content[metadata.SESSION_START_INFO_TAG])
    assert {k: (v.string_value or v.number_value) for k, v in start.hparams.items()} == {
        "configuration": "mild", "recipe": "mild", "budget": 0.5, "seed": 1}
    assert metadata.SESSION_END_INFO_TAG in content and metadata.EXPERIMENT_TAG not in content
    figures = {tag: events.Scalars(tag)[-1].value for tag in events.Tags()["scalars"]}
    assert figures == pytest.approx({"grid/top1": 0.61, "grid/minutes": 0.3, "grid/joules": 900.0})


def test_wandb_where_it_is_missing_is_refused_naming_the_install(monkeypatch, tmp_path):
    config = resolve("cpu", {"tracker": "tensorboard,wandb", "results_dir": str(tmp_path)})
    real = tracking.importlib.util.find_spec
    monkeypatch.setattr(tracking.importlib.util, "find_spec",
                        lambda name, *a: None if name == "wandb" else real(name, *a))
    assert any("pip install -e '.[wandb]'" in p for p in preflight.launch_plan(config).problems)


@needs_wandb
def test_wandb_without_an_account_is_refused_naming_what_to_do(monkeypatch, tmp_path):
    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))            # no ~/.netrc: no account
    monkeypatch.setenv("NETRC", str(tmp_path / "none"))
    assert tracking.problems(["wandb"]) == [
        "tracker=wandb: W&B has no account on this machine: `.venv/bin/wandb login`, "
        "or WANDB_MODE=offline (synced later with `wandb sync`)"]
    monkeypatch.setenv("WANDB_MODE", "offline")
    assert tracking.problems(["wandb"]) == []


@needs_wandb
@pytest.mark.e2e
def test_a_campaign_asking_for_wandb_without_an_account_writes_nothing(tmp_path, cache_dir):
    env = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_")}
    env.update(HOME=str(tmp_path), NETRC=str(tmp_path / "none"))
    done = run_submission("run", *quick_settings(tmp_path / "results", cache_dir, tracker="wandb"), env=env)
    assert done.returncode != 0 and "W&B has no account on this machine" in done.stderr + done.stdout
    assert not (tmp_path / "results").exists()


@needs_wandb
def test_wandb_offline_runs_keep_their_config_and_history_and_several_in_one_process_each_finish(
        tmp_path, monkeypatch):
    from wandb_records import offline_run
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_PROJECT", "tracking-test")
    for index in range(2):      # two runs in one process, as a notebook or a grid would
        target = Target(("wandb",), str(tmp_path / "tb"), str(tmp_path), f"run_{index}", "grid-tiny")
        opened = tracking.open_tracking(target, {"recipe": "mild", "seed": index}, f"[run {index}]")
        assert [w.name for w in opened.writers] == ["W&B"]
        _report(Reporter(f"[run {index}]", 12, 8, 64, 4, True, tmp_path / f"run_{index}.jsonl", tracking=opened))
    folders = sorted((tmp_path / "wandb").glob("offline-run-*"))
    assert len(folders) == 2
    runs = sorted((offline_run(folder) for folder in folders), key=lambda run: run["name"])
    for index, run in enumerate(runs):
        assert (run["name"], run["group"], run["project"]) == (f"run_{index}", "grid-tiny", "tracking-test")
        assert run["config"]["seed"] == index and run["config"]["recipe"] == "mild"
        top1 = [row["metrics/eval/top1"] for row in run["history"] if "metrics/eval/top1" in row]
        assert top1 == pytest.approx([0.1, 0.2])
        assert all(math.isfinite(row.get("loss/train/total", 0.0)) for row in run["history"])


@needs_wandb
@pytest.mark.loaders_interpreted
@pytest.mark.e2e
def test_a_campaign_writes_each_runs_events_and_wandb_run_and_a_failed_tracker_leaves_a_compliant_run(
        tmp_path, cache_dir):
    """Two runs to a target, watched by both trackers offline; run 2's event folder cannot be
    made (a dangling link holds its name: a file there would be taken for what an earlier
    attempt left, and set aside), which it finds at its first evaluation, mid-run. The runs are
    the baseline recipe's: the suite's end-to-end check of it (cross-entropy, no EMA or BlurPool,
    both rulesets' checkers)."""
    from submission.compliance import check_path

    from wandb_records import offline_run
    results = tmp_path / "results"
    system = results / "local_cpu"
    (system / "tensorboard").mkdir(parents=True)
    (system / "tensorboard" / "run_1").symlink_to(tmp_path / "nowhere")
    env = child_env(WANDB_MODE="offline")
    # quick_settings scales Mild's EMA down; the baseline has none
    done = run_submission("run", *quick_settings(results, cache_dir, runs=2, seeds="3,4", target_accuracy=0.05,
                                                 progress_every_steps=2, tracker="tensorboard,wandb",
                                                 recipe="baseline", ema_half_life_batches=0, train_resolution=32,
                                                 eval_resolution=32, eval_resize=36), env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    output = done.stdout + done.stderr
    assert output.count("TensorBoard stopped tracking this run") == 1, output
    assert "[run 2/2 seed 4] TensorBoard stopped tracking this run (FileExistsError" in output, output

    records = read_progress(system / "progress" / "run_0.jsonl")
    series = event_series(system / "tensorboard" / "run_0")
    windows = [r for r in records if r["kind"] == "window"]
    top1 = [r["accuracy"] for r in records if r["kind"] == "eval"]
    assert len(windows) >= 2 and top1
    assert [s for s, _ in series["throughput/samples_per_sec"]] == [r["step"] for r in windows]
    assert [v for _, v in series["metrics/eval/top1"]] == pytest.approx(top1)
    logged = [e["value"] for e in mllog_events(system / "resnet" / "result_0.txt") if e["key"] == "eval_accuracy"]
    assert series["metrics/eval/top1"][-1][1] == pytest.approx(logged[-1], abs=1e-6)

    runs = sorted((offline_run(f) for f in (system / "wandb").glob("offline-run-*")), key=lambda r: r["name"])
    assert [(r["name"], r["group"]) for r in runs] == [("run_0", "local_cpu"), ("run_1", "local_cpu")]
    assert runs[1]["config"]["seeds"] == "3,4" and runs[1]["config"]["tracker"] == "tensorboard,wandb"
    assert [row["metrics/eval/top1"] for row in runs[1]["history"] if "metrics/eval/top1" in row] == \
        pytest.approx([r["accuracy"] for r in read_progress(system / "progress" / "run_1.jsonl")
                       if r["kind"] == "eval"])
    assert all(v.passed for v in check_path(system / "resnet" / "result_1.txt", ("2.0.0",)))
    _baseline_end_to_end(system)


def _baseline_end_to_end(system: Path):
    """recipe=baseline (CE loss, no EMA, BlurPool or progressive resizing) is a real path."""
    _, config = first_run_of(system, "baseline")
    # no opt_* keys: they would name an SGD the recipe's decoupled SGDW is not
    assert not [e["key"] for e in mllog_events(system / "resnet" / "result_0.txt") if e["key"].startswith("opt_")]
    assert config["recipe"] == "baseline" and config["loss"] == "cross_entropy"
    assert not config["blurpool"] and config["ema_half_life_batches"] == 0


@needs_wandb
def test_a_grid_asking_for_wandb_without_an_account_is_refused_before_it_writes(tmp_path, monkeypatch, capsys):
    from submission.cli import main as cli_main
    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("NETRC", str(tmp_path / "none"))
    results = tmp_path / "results"
    assert cli_main(["tradeoff", "tracker=tensorboard,wandb", f"results_dir={results}",
                     f"cache_dir={tmp_path / 'cache'}"]) == 2
    assert "cannot run grid embedded:\n  - tracker=wandb: W&B has no account" in capsys.readouterr().err
    assert not results.exists() and not (tmp_path / "cache").exists()
