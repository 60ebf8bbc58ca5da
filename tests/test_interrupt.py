"""End to end: a run stopped by Ctrl-C or by SLURM's SIGTERM, on real campaigns (torchrun,
the trainer, Hot's DataLoader worker processes; Mild's FFCV threads: test_campaign.py) scaled
to a few steps: the run's log ends run_stop aborted "interrupted (...)", the console ends with the
campaign's one line, neither the console nor the run's transcript shows a traceback,
nothing of the job is left running, and the same command again completes the campaign."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import pytest

from conftest import campaign_from_a_terminal, descendants, first_run_of, quick_settings, run_submission, running

pytestmark = [pytest.mark.e2e, pytest.mark.loaders_interpreted, pytest.mark.timeout(900)]

# five steps of 32 images, evaluated once at the end: each stopped attempt is stopped after its
# first step, and the campaign run a third time reaches the 5% gate at that evaluation
FEW_STEPS = dict(train_limit=160, batch_per_device=32, epochs=1, eval_every_epochs=1,
                 eval_limit=200, progress_every_steps=1, target_accuracy=0.05, runs=1, seeds="7")


def _ctrl_c(campaign: subprocess.Popen) -> None:
    """What a terminal sends on Ctrl-C: SIGINT to the foreground process group."""
    os.killpg(campaign.pid, signal.SIGINT)


def _slurm_stop(campaign: subprocess.Popen) -> None:
    """What SLURM sends on scancel or --signal=TERM (proctrack linuxproc or cgroup): SIGTERM
    to every process of the job, the campaign's process group and those outside it alike
    (torchrun, the trainer, the loader's workers)."""
    os.killpg(campaign.pid, signal.SIGTERM)
    for pid in descendants(campaign.pid):
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass


# Mild's Ctrl-C inside a run (FFCV's threads) is test_campaign.py's interrupted campaign
def test_a_run_stopped_by_ctrl_c_then_by_slurm_logs_interrupted_each_time_and_resumes(tmp_path, cache_dir):
    """Hot's run stopped by Ctrl-C; the same command again, stopped as SLURM stops a job; the
    same command a third time completes the campaign, both stopped attempts kept aside."""
    results = tmp_path / "results"
    args = ["run", *quick_settings(results, cache_dir, recipe="hot", **FEW_STEPS)]
    folder = results / "local_cpu"
    for stop in (_ctrl_c, _slurm_stop):
        _stopped_after_its_first_step(args, folder, stop)

    again = run_submission(*args)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert "run 1 was incomplete" in again.stdout
    text = (folder / "resnet" / "result_0.txt").read_text()
    assert '"status": "success"' in text
    logs = [p for p in (folder / "attempts").iterdir() if p.suffix == ".txt"]
    assert len(logs) == 2 and all(p.name.startswith("result_0-") for p in logs), logs
    assert all(p.with_suffix(".log").is_file() for p in logs)       # each attempt's printed output
    _hot_ran_end_to_end_on_the_torchvision_loader(folder)


def _stopped_after_its_first_step(args: list[str], folder, stop) -> None:
    """The campaign started as a terminal starts it and stopped by `stop` once its run has made
    its first step: the log ends run_stop aborted "interrupted", the console ends with the
    campaign's one line, neither it nor the run's transcript shows a traceback, and nothing of
    the job is left running."""
    partial = folder / "resnet" / "result_0.txt.partial"
    records = folder / "progress" / "run_0.jsonl"
    before = records.read_text() if records.is_file() else None   # an earlier attempt's
    job: list[int] = []
    with campaign_from_a_terminal(*args) as campaign:
        deadline = time.monotonic() + 400
        while not (records.is_file() and (now := records.read_text()) != before and '"window"' in now):
            assert campaign.poll() is None, campaign.stdout.read()
            assert time.monotonic() < deadline, "the run's first step did not come"
            time.sleep(0.2)
        job = descendants(campaign.pid)
        assert "run_stop" not in partial.read_text(), "the run ended before it could be stopped"
        stop(campaign)
        console, _ = campaign.communicate(timeout=180)
    assert campaign.returncode != 0
    transcript = (folder / "progress" / "run_0.log").read_text()
    assert (f"error: interrupted: the run in progress was stopped and its partial log kept "
            f"(its output: {folder / 'progress' / 'run_0.log'}); re-run the same command") in console
    assert "Traceback" not in console, console
    # what the job printed while it stopped: in the run's transcript, also without a traceback
    assert "[run 1/1 seed 7] interrupted; partial log kept at" in transcript
    assert "Traceback" not in transcript, transcript
    last = json.loads(partial.read_text().splitlines()[-1].split(":::MLLOG ", 1)[1])
    assert last["key"] == "run_stop" and last["metadata"]["status"] == "aborted"
    assert last["metadata"]["reason"].startswith("interrupted"), last["metadata"]["reason"]
    # torchrun, the trainer and the loader's workers have all ended with the campaign
    deadline = time.monotonic() + 30
    while any(running(pid) for pid in job):
        assert time.monotonic() < deadline, f"left running: {[p for p in job if running(p)]}"
        time.sleep(0.2)


def _hot_ran_end_to_end_on_the_torchvision_loader(folder):
    """The resumed run is Hot's whole run to its gate (Mild's is test_train.py's learning run,
    Medium's test_campaign.py's five-run campaign, the baseline's test_tracking.py's): a log
    both rulesets' checkers accept, naming Hot's methods, trained on the torchvision loader
    RandAugment needs."""
    methods, settings = first_run_of(folder, "hot")
    for method in ("RandAugment", "stochastic depth", "ColOut"):
        assert any(m.startswith(method) for m in methods), methods
    assert settings["train_loader"] == "torchvision"
