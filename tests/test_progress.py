"""submission.progress: the Reporter prints progress lines for people and writes the same
figures as JSON-line records, which read_progress gives back (also from a killed run)."""
from __future__ import annotations

import json
import re

import pytest

from submission import progress
from submission.progress import Reporter, read_progress

LINE = re.compile(r"epoch\s+(?P<epoch>[\d.]+) step (?P<step>\d+)/(?P<total>\d+) loss (?P<loss>[\d.]+) "
                  r"lr (?P<lr>[\d.]+) (?P<side>\d+)px (?P<rate>\d+) img/s \|.*\| (?P<minutes>[\d.]+) min")
EVAL_LINE = re.compile(r"eval at epoch (?P<epoch>[\d.]+): top-1 (?P<accuracy>[\d.]+) .* in (?P<seconds>[\d.]+) s")


class Clock:
    """time.monotonic for the reporter: moves only when the test says."""

    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch):
    fake = Clock()
    monkeypatch.setattr(progress.time, "monotonic", fake)
    return fake


def _run(path, clock, enabled=True, steps=20, step_s=0.5, eval_at=(10,), eval_s=3.0):
    """A run of `steps` steps, batch 64, a line every 5 steps, side 16 then 32, evaluations
    at `eval_at` taking `eval_s` seconds each (on the fake clock)."""
    reporter = Reporter("[run 1/5 seed 7]", 20, 10, 64, 5, enabled, path)
    for step in range(1, steps + 1):
        clock.now += step_s
        reporter.step(step, 2.0 / step, 0.1 * step / 20, 16 if step <= 10 else 32)
        if step in eval_at:
            clock.now += eval_s
            reporter.evaluated(step / 10, 0.3 + step / 100, 0.65, eval_s)
    return reporter


def test_window_records_are_what_was_printed(tmp_path, clock, capsys):
    path = tmp_path / "progress" / "run_0.jsonl"       # the folder does not exist yet
    _run(path, clock).close()
    printed = [m for m in map(LINE.search, capsys.readouterr().out.splitlines()) if m]
    windows = progress.windows(read_progress(path))
    assert len(printed) == len(windows) == 4
    for line, record in zip(printed, windows):
        assert record["step"] == int(line["step"]) and record["total_steps"] == int(line["total"])
        assert record["side"] == int(line["side"])
        assert f"{record['img_per_s']:.0f}" == line["rate"]
        assert f"{record['epoch']:5.2f}".strip() == line["epoch"]
        assert f"{record['loss']:.4f}" == line["loss"] and f"{record['lr']:.4f}" == line["lr"]
        assert f"{record['minutes']:.2f}" == line["minutes"]
    assert [w["step"] for w in windows] == [5, 10, 15, 20]
    assert [w["side"] for w in windows] == [16, 16, 32, 32]
    # 5 steps of 64 images in 2.5 s, the evaluation's 3 s left out of the window after it
    assert [w["window_steps"] for w in windows] == [5, 5, 5, 5]
    assert [w["window_s"] for w in windows] == pytest.approx([2.5] * 4)
    assert [w["img_per_s"] for w in windows] == pytest.approx([128.0] * 4)
    assert windows[-1]["minutes"] == pytest.approx((20 * 0.5 + 3.0) / 60)


def test_evaluation_records_lie_between_their_windows(tmp_path, clock, capsys):
    path = tmp_path / "run_0.jsonl"
    _run(path, clock, eval_at=(7, 20), eval_s=1.5).close()
    records = read_progress(path)
    assert [(r["kind"], r["step"]) for r in records] == [
        ("window", 5), ("eval", 7), ("window", 10), ("window", 15), ("window", 20), ("eval", 20)]
    printed = [m for m in map(EVAL_LINE.search, capsys.readouterr().out.splitlines()) if m]
    evals = [r for r in records if r["kind"] == "eval"]
    assert len(printed) == len(evals) == 2
    for line, record in zip(printed, evals):
        assert f"{record['epoch']:.2f}" == line["epoch"]
        assert f"{record['accuracy']:.4f}" == line["accuracy"]
        assert f"{record['seconds']:.2f}" == line["seconds"]
    assert evals[0] == {"kind": "eval", "step": 7, "epoch": 0.7, "accuracy": pytest.approx(0.37),
                        "target": 0.65, "seconds": 1.5,
                        "minutes": pytest.approx((7 * 0.5 + 1.5) / 60)}
    assert records[2]["window_s"] == pytest.approx(2.5)          # the evaluation left out


def test_each_record_is_on_disk_before_close(tmp_path, clock):
    path = tmp_path / "run_0.jsonl"
    reporter = _run(path, clock, steps=12)                        # a run that stops short
    assert [r["step"] for r in progress.windows(read_progress(path))] == [5, 10]
    reporter.close()
    reporter.close()                                              # idempotent


def test_read_progress_leaves_out_a_torn_last_line(tmp_path, clock):
    path = tmp_path / "run_0.jsonl"
    _run(path, clock).close()
    whole = path.read_text()
    torn = json.dumps({"kind": "window", "step": 25, "side": 32})[:23]
    path.write_text(whole + torn)
    assert read_progress(path) == [json.loads(line) for line in whole.splitlines()]
    assert len(read_progress(path)) == 5


def test_read_progress_refuses_a_damaged_line_before_the_last(tmp_path):
    path = tmp_path / "run_0.jsonl"
    path.write_text('{"kind": "window", "step": 5}\n{"kind": "win\n{"kind": "window", "step": 10}\n')
    with pytest.raises(ValueError, match=r"run_0.jsonl line 2"):
        read_progress(path)


def test_only_the_main_rank_writes_and_without_a_file_nothing_is_written(tmp_path, clock, capsys):
    path = tmp_path / "rank1" / "run_0.jsonl"
    _run(path, clock, enabled=False).close()
    assert not path.parent.exists() and capsys.readouterr().out == ""
    reporter = _run(None, clock)
    reporter.close()
    assert "step 20/20" in capsys.readouterr().out and list(tmp_path.iterdir()) == []


def test_a_diverged_loss_is_written_as_null_in_strict_json(tmp_path, clock):
    path = tmp_path / "run_0.jsonl"
    reporter = Reporter("[run 1/1 seed 0]", 5, 5, 8, 5, True, path)
    for step in range(1, 6):
        clock.now += 1.0
        reporter.step(step, float("nan"), 0.1, 16)
    reporter.close()
    [line] = path.read_text().splitlines()
    record = json.loads(line, parse_constant=lambda name: pytest.fail(f"{name} in the record"))
    assert record["loss"] is None and record["img_per_s"] == pytest.approx(8.0)


def test_a_slow_run_shows_progress_after_every_seconds_not_only_every_steps(tmp_path, clock, capsys):
    """14 steps of 39 s against a line every 50 steps: without the time bound the first line
    would come at the end, after 9 minutes; with every_seconds=30 after each slow step."""
    reporter = Reporter("[run]", 14, 7, 8, 50, True, tmp_path / "p.jsonl", every_seconds=30)
    for step in range(1, 4):
        clock.now += 39.0
        reporter.step(step, 2.3, 0.1, 88)
    windows = progress.windows(read_progress(tmp_path / "p.jsonl"))
    assert [w["step"] for w in windows] == [1, 2, 3]
    assert [round(w["window_s"], 6) for w in windows] == [39.0, 39.0, 39.0]
    assert len(LINE.findall(capsys.readouterr().out)) == 3


def test_fast_steps_keep_their_every_steps_windows(tmp_path, clock):
    reporter = Reporter("[run]", 20, 10, 64, 5, True, tmp_path / "p.jsonl", every_seconds=30)
    for step in range(1, 21):
        clock.now += 0.5
        reporter.step(step, 1.0, 0.1, 32)
    assert [w["step"] for w in progress.windows(read_progress(tmp_path / "p.jsonl"))] == [5, 10, 15, 20]


def test_the_runs_energy_is_a_record_after_run_stop_and_read_back(tmp_path, clock, capsys):
    from submission.energy import Energy
    path = tmp_path / "run_0.jsonl"
    _run(path, clock)
    reporter = Reporter("[run 1/5 seed 7]", 20, 10, 64, 5, True, path)
    assert progress.run_energy(read_progress(path)) is None       # a run that wrote none
    used = Energy(1850.0, 6.2, "NVML total energy of NVIDIA H200", power_limit_watts=700.0)
    reporter.energy(used)
    reporter.close()
    assert "energy from run_start to run_stop: 1.85 kJ over 6.2 s (298 W" in capsys.readouterr().out
    assert progress.run_energy(read_progress(path)) == used
