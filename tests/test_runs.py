"""submission.runs: a run's launch keeps its progress transcript, and a second signal while
the run stops still ends the campaign with how to resume."""
from __future__ import annotations

import signal
import sys

import pytest

from submission import runs
from submission.results import CampaignError


def test_launch_keeps_the_progress_lines(tmp_path, monkeypatch, capsys):
    script = "import sys; print('line one'); print('line two', flush=True); sys.exit(3)"
    monkeypatch.setattr(runs, "torchrun_command", lambda config, args: [sys.executable, "-c", script])
    log = tmp_path / "progress" / "run_0.log"
    assert runs.launch(None, [], progress=log) == 3
    assert log.read_text() == "line one\nline two\n"
    assert "line one\nline two\n" in capsys.readouterr().out


def test_a_second_signal_while_the_run_stops_still_ends_with_how_to_resume(tmp_path, monkeypatch):
    # the job signals the campaign once running, and again when it is asked to stop: as
    # SLURM does, signalling every process of a job, or a user pressing Ctrl-C twice
    script = ("import os, signal, sys, time\n"
              "def stop(*_):\n"
              "    os.kill(os.getppid(), signal.SIGTERM)\n"
              "    time.sleep(0.5)\n"
              "    print('run_stop aborted', flush=True)\n"
              "    sys.exit(130)\n"
              "signal.signal(signal.SIGTERM, stop)\n"
              "print('running', flush=True)\n"
              "time.sleep(0.5)\n"                  # the campaign has relayed the line
              "os.kill(os.getppid(), signal.SIGTERM)\n"
              "time.sleep(30)\n")
    monkeypatch.setattr(runs, "torchrun_command", lambda config, args: [sys.executable, "-c", script])
    log = tmp_path / "progress" / "run_0.log"
    previous = signal.signal(signal.SIGTERM, signal.default_int_handler)   # as run_campaign
    try:
        with pytest.raises(CampaignError, match="re-run the same command to resume"):
            runs.launch(None, [], progress=log)
    except KeyboardInterrupt:
        pytest.fail("the second signal escaped _launch as KeyboardInterrupt")
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert log.read_text() == "running\nrun_stop aborted\n"
