"""A redo keeps what the failed attempt left: its partial log, its printed output (with what it
said when it stopped) and its progress records, all moved to attempts/ beside one another."""
from __future__ import annotations

import os
import signal

import pytest

from conftest import campaign_from_a_terminal, quick_settings, run_submission, wait_for

pytestmark = pytest.mark.timeout(900)


@pytest.mark.e2e
@pytest.mark.loaders_interpreted
def test_a_redo_keeps_the_failed_attempts_transcript_and_progress_records(tmp_path, cache_dir):
    """The first attempt is stopped with Ctrl-C after its first progress record; the same
    command again redoes the run. The first attempt's transcript (its last line: stopped, the
    partial log kept) and its progress records are in attempts/ beside its partial log, and
    the redone run's own are in progress/."""
    results = tmp_path / "results"
    args = ["run", *quick_settings(results, cache_dir, runs=1, seeds="5", progress_every_steps=1)]
    folder = results / "local_cpu"
    progress = folder / "progress"
    with campaign_from_a_terminal(*args) as first:
        wait_for(lambda: '"window"' in ((progress / "run_0.jsonl").read_text()
                                        if (progress / "run_0.jsonl").is_file() else ""), 400,
                 "the run's first progress record")
        os.killpg(first.pid, signal.SIGINT)
        output, _ = first.communicate(timeout=120)
    assert first.returncode != 0, output
    transcript = (progress / "run_0.log").read_text()
    records = (progress / "run_0.jsonl").read_text()
    assert "[run 1/1 seed 5] interrupted; partial log kept at" in transcript, transcript

    second = run_submission(*args)
    assert second.returncode in (0, 1), second.stdout + second.stderr      # 1: missed its target
    assert "run 1 was incomplete" in second.stdout
    attempts = folder / "attempts"
    kept = sorted(p.name for p in attempts.iterdir() if not p.name.endswith("-tensorboard"))
    stem = kept[0].rsplit(".", 1)[0]
    assert stem.startswith("result_0-") and kept == [f"{stem}.jsonl", f"{stem}.log", f"{stem}.txt"], kept
    assert (attempts / f"{stem}.log").read_text() == transcript
    assert (attempts / f"{stem}.jsonl").read_text() == records
    assert "interrupted" not in (progress / "run_0.log").read_text()
    assert (progress / "run_0.jsonl").read_text().startswith('{"kind": "window", "step": 1,')
    assert (folder / "resnet" / "result_0.txt").is_file()
