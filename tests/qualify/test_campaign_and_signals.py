"""qualify's short campaign at CPU scale: the recipe learns the synthetic classes, and the record
says so beside chance; a stop signal (Ctrl-C, SIGTERM) stops the part running, the record keeps
what was measured, and the last line says qualify was interrupted.

qualify runs here in this process (its parts as processes of their own, as a user runs it), with
its parts limited to those each test is about, and the signal sent to this process as a terminal's
Ctrl-C or a `kill` sends it to qualify's."""
from __future__ import annotations

import os
import shutil
import signal
import threading
import time
from pathlib import Path

import pytest

from submission.cli import main as cli_main
from submission.options import QualifyOptions
from submission.qualify import plan, record
from submission.qualify.command import Qualify

from conftest import LOADERS_INTERPRETED

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    """qualify's CPU data, written and converted once, as qualify does, for the module's tests."""
    folder = tmp_path_factory.mktemp("qualify-cache")
    q = Qualify(QualifyOptions(), {"cache_dir": str(folder)})
    q.make_data()
    q.check_data()
    return folder


@pytest.fixture
def interpreted_children(monkeypatch):
    """The parts' processes run FFCV's pipelines as plain Python (conftest.LOADERS_INTERPRETED:
    the ~20 s numba spends in each of them); this process has compiled its own (the data fixture)."""
    for key, value in LOADERS_INTERPRETED.items():
        monkeypatch.setenv(key, value)


def _only(monkeypatch, *keys: str) -> list[plan.Part]:
    """qualify's CPU parts limited to those of `keys` (plan.Part.key), in that order."""
    every = {part.key: part for part in plan.parts("cpu")}
    chosen = [every[key] for key in keys]
    monkeypatch.setattr(plan, "parts", lambda device_type, recipes=plan.RECIPES: chosen)
    return chosen


def _signal_once(condition, signum: int, timeout: float = 600) -> threading.Thread:
    """A thread that sends this process `signum` once `condition()` holds."""
    def watch() -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                return
            time.sleep(0.2)
        os.kill(os.getpid(), signum)
    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


def _last_line(said: str) -> str:
    return said.strip().splitlines()[-1]


def test_the_campaign_learns_and_a_sigterm_after_it_keeps_its_figures(cache, tmp_path, monkeypatch, capsys,
                                                                       interpreted_children):
    """The campaign (2 runs) evaluates a model that learned: each run's last top-1 at least 1.5x
    chance, the verdict in qualify.md and the last line; SIGTERM in the next part (what `kill`,
    `timeout` and SLURM send) stops it, and the record keeps the campaign: exit status 143."""
    campaign, bench = _only(monkeypatch, "campaign", "mild")
    out = tmp_path / "out"
    log = out / record.LOG
    _signal_once(lambda: log.is_file() and f"===== {bench.name}:" in log.read_text(), signal.SIGTERM)
    assert cli_main(["qualify", "minutes=30", f"out={out}", f"cache_dir={cache}"]) == 143
    said = capsys.readouterr().out

    q = record.read(out)
    assert [(p.name, p.status) for p in q.parts] == [(campaign.name, record.DONE), (bench.name, record.INTERRUPTED)]
    assert q.interrupted == "SIGTERM" and q.campaign is not None
    assert q.campaign.classes == plan.SCALES["cpu"].data.classes and q.campaign.chance == 1 / q.campaign.classes
    for run in q.campaign.runs:
        assert run.last_top1 is not None and run.last_top1 >= plan.LEARNED_OVER_CHANCE * q.campaign.chance, run
        assert run.evaluations >= 2 and run.steps > 0
    assert q.campaign.learned is True
    assert q.campaign.verdict.startswith("the recipe learned on this machine (top-1 at the first -> last evaluation")
    text = (out / record.MARKDOWN).read_text()
    assert f"**Verdict: {q.campaign.verdict}.**" in text
    assert "The EMA the evaluations score is scaled to the campaign's length" in text
    assert "- INTERRUPTED by SIGTERM after" in text and f"| {bench.name} | interrupted: by SIGTERM |" in text
    last = _last_line(said)
    assert last.startswith("[qualify] interrupted by SIGTERM after") and "The recipe learned here" in last, last
    assert last.endswith(f"The record: {out / record.MARKDOWN}")


def test_ctrl_c_in_the_campaign_stops_it_and_the_last_line_says_so(cache, tmp_path, monkeypatch, capsys,
                                                                   interpreted_children):
    """Ctrl-C while the campaign trains: the campaign is stopped (its own "re-run the same command
    to resume" goes to qualify.log only: qualify redoes its campaign), the part after it is not
    run, the record is written, and the last line says qualify was interrupted: exit status 130."""
    campaign, bench = _only(monkeypatch, "campaign", "hot")
    out = tmp_path / "out"
    progress = cache / "qualify" / Qualify(QualifyOptions(), {"cache_dir": str(cache)}).system_name \
        / "campaign"
    shutil.rmtree(progress, ignore_errors=True)          # another test's campaign
    _signal_once(lambda: any('"window"' in p.read_text() for p in progress.glob("*/progress/run_0.jsonl")),
                 signal.SIGINT)
    assert cli_main(["qualify", "minutes=30", f"out={out}", f"cache_dir={cache}"]) == 130
    said = capsys.readouterr().out

    q = record.read(out)
    assert [(p.name, p.status) for p in q.parts] == [(campaign.name, record.INTERRUPTED), (bench.name, record.NOT_RUN)]
    assert q.interrupted == "Ctrl-C" and q.campaign is None
    assert "re-run the same command" not in said and "interrupted: the run in progress was stopped" in \
        (out / record.LOG).read_text()
    assert "- INTERRUPTED by Ctrl-C after" in (out / record.MARKDOWN).read_text()
    last = _last_line(said)
    assert last.startswith("[qualify] interrupted by Ctrl-C after"), last
    assert (f"nothing measured; interrupted: {campaign.name}; not run: {bench.name}. The same command again "
            "redoes every part") in last, last
