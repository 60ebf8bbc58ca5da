"""`python -m submission qualify` at CPU scale: each recipe's profile inside the budget, in a
folder small enough to copy back from a rented machine; the short campaign, whose recipe learns
the synthetic classes and whose record says so beside chance; a stop signal (Ctrl-C, SIGTERM)
that stops the part running, keeps what was measured, and a last line that says qualify was
interrupted.

qualify runs here in this process (its parts as processes of their own, as a user runs it), on
data made once for the module, with its parts limited to those each test is about (the default
plan's parts: test_plan.py), and a signal sent to this process as a terminal's Ctrl-C or a `kill`
sends it to qualify's."""
from __future__ import annotations

import json
import os
import shlex
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

from conftest import LOADERS_INTERPRETED, run_submission

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

# the parts took 6.7-6.9 min on a slow 2-vCPU build machine (docs/qualify.md): a budget twice
# that lets every part fit on a machine as slow, busy with something else besides
BUDGET_MINUTES = 15
# Hot: SAM's stretches, the torchvision loader and the device loader beside it. Mild's bench is
# tests/bench/test_bench.py's (the same code), Medium's is Hot's on FFCV's loader; test_plan.py
# checks that the default plan has all three
PROFILED = ("hot",)


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
    assert q.campaign.learned is True and len(q.campaign.runs) == 2
    assert all(run.minutes and run.minutes > 0 and run.first_window_ratio for run in q.campaign.runs)
    for run in q.campaign.runs:   # measured where RAPL is readable, else not measured and why
        assert (run.joules is None) == q.campaign.energy_note.startswith("not measured: ")
        assert run.joules is None or run.joules > 0
    assert "RAPL" in q.campaign.energy_note and "| energy (kJ) |" in (out / record.REPORT).read_text()
    assert q.campaign.verdict.startswith("the recipe learned on this machine (top-1 at the first -> last evaluation")
    text = (out / record.MARKDOWN).read_text()
    assert f"**Verdict: {q.campaign.verdict}.**" in text and "## The short campaign" in text
    assert q.campaign.energy_note.split(":")[0] in text
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


def test_qualify_profiles_the_recipes_asked_inside_its_budget(cache, tmp_path, monkeypatch, capsys,
                                                              interpreted_children):
    """Hot's bench (what is measured is not asserted; the bench's tests compile): its profile
    projects a run, its loader and the device loader beside it."""
    _only(monkeypatch, *PROFILED)
    out = tmp_path / "out"
    began = time.monotonic()
    assert cli_main(["qualify", f"minutes={BUDGET_MINUTES}", f"out={out}", f"recipes={','.join(PROFILED)}",
                     f"cache_dir={cache}"]) == 0
    elapsed = time.monotonic() - began
    assert elapsed < BUDGET_MINUTES * 60 + 30, f"took {elapsed:.0f} s of a {BUDGET_MINUTES}-min budget"
    assert _last_line(capsys.readouterr().out).endswith(f"The record: {out / record.MARKDOWN}")

    files = {p.name: p.stat().st_size for p in out.iterdir()}
    assert len(files) <= 8 and max(files.values()) < 4 * 2**20, files
    assert {record.MARKDOWN, record.RECORD, record.LOG, *(record.profile_name(r) for r in PROFILED)} <= set(files)
    assert not {record.profile_name("mild"), record.profile_name("medium")} & set(files)

    q = record.read(out)
    assert [(part.name, part.status) for part in q.parts] == [(f"bench {r}", record.DONE) for r in PROFILED]
    assert not q.compiled and plan.NOT_COMPILED["cpu"] in (out / record.MARKDOWN).read_text()
    assert [r.recipe for r in q.recipes] == list(PROFILED)
    for recipe in q.recipes:                                      # each profile projects a run
        words = shlex.split(recipe.project_command)[3:]
        projected = run_submission(*words, timeout=180)
        assert projected.returncode == 0, projected.stderr
        assert f"# Projection: recipe {recipe.recipe}" in projected.stdout
        assert json.loads((out / recipe.profile).read_text())["settings"]["recipe"] == recipe.recipe

    # each recipe's loader and the device loader beside it, side by side in qualify.md
    assert [[loader.kind for loader in r.loaders] for r in q.recipes] == [["torchvision", "device"]]
    assert all(loader.img_per_s > 0 and loader.eval_img_per_s > 0 and loader.fed_ratio
               for r in q.recipes for loader in r.loaders)
    text = (out / record.MARKDOWN).read_text()
    assert "| hot | torchvision |" in text and "| hot | device |" in text
    _hot_profile_measures_its_loader_and_its_sam_steps(out)


def _hot_profile_measures_its_loader_and_its_sam_steps(out):
    """Hot's part is the bench of Hot (scale_schedule_ratio 3): its torchvision loader, the CPU
    work of its transforms, and timed stretches holding whole SAM steps (read here rather than
    from a bench of its own: the suite's time, docs/test-suite.md)."""
    data = json.loads((out / record.profile_name("hot")).read_text())
    log = (out / record.LOG).read_text()
    loader = data["loader"]
    assert loader["kind"] == "torchvision" and loader["img_per_s"] > 0 and loader["threads"] >= 1
    assert loader["img_per_s_per_thread"] == pytest.approx(loader["img_per_s"] / loader["threads"])
    augmentation = data["augmentation_ms_per_image"]
    stages = ("decode", "crop_flip", "randaugment", "to_tensor")
    assert all(augmentation[stage] > 0 for stage in stages), augmentation
    assert augmentation["total"] == sum(augmentation[stage] for stage in stages)
    assert augmentation["images"] >= 100 and augmentation["threads"] == 1
    assert "torchvision train loader alone" in log and "per loader thread:" in log
    assert "RandAugment (all, depth 1, severity 10)" in log
    # qualify's steps=3 is raised to 5, a multiple of sam_interval: each side's mean holds one SAM step
    assert data["settings"]["sam_interval"] == 5 and data["measured"]["steps"] == 5
    assert "each timed stretch is 5 steps (raised from 3, a multiple of sam_interval)" in log
    for side in data["train_step"].values():
        assert side["timed_steps"] == 5 and side["sam_steps"] == 1 and side["img_per_s"] > 0
    assert "(mean of 5 steps, 1 of them SAM)" in log
