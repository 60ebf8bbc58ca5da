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


def _stopped_with_how_to_resume(monkeypatch, job_script: str, log) -> None:
    """Launch `job_script` in torchrun's place, as run_campaign does (SIGTERM an interrupt):
    it must end in the CampaignError that says how to resume, never a KeyboardInterrupt."""
    monkeypatch.setattr(runs, "torchrun_command", lambda config, args: [sys.executable, "-c", job_script])
    try:
        with runs.terminate_as_interrupt(), pytest.raises(CampaignError, match="re-run the same command to resume"):
            runs.launch(None, [], progress=log)
    except KeyboardInterrupt:
        pytest.fail("a second signal escaped as KeyboardInterrupt: the stop was cut short")


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
    log = tmp_path / "progress" / "run_0.log"
    _stopped_with_how_to_resume(monkeypatch, script, log)
    assert log.read_text() == "running\nrun_stop aborted\n"


@pytest.mark.parametrize("signals", [(signal.SIGTERM, signal.SIGTERM), (signal.SIGINT, signal.SIGTERM)])
def test_signals_back_to_back_stop_the_run_cleanly_once(tmp_path, monkeypatch, signals):
    # SLURM's SIGTERM to the campaign's process group and then to each of its processes: the
    # second arrives while the first is still being raised, before the launch can ignore it
    first, second = signals
    script = ("import os, signal, sys, time\n"
              "def stop(*_):\n"
              "    print('run_stop aborted', flush=True)\n"
              "    sys.exit(130)\n"
              "signal.signal(signal.SIGTERM, stop)\n"
              "print('running', flush=True)\n"
              "time.sleep(0.5)\n"
              f"os.kill(os.getppid(), {int(first)}); os.kill(os.getppid(), {int(second)})\n"
              "time.sleep(30)\n")
    log = tmp_path / "progress" / "run_0.log"
    for _ in range(5):      # the race is narrow: give it several chances
        _stopped_with_how_to_resume(monkeypatch, script, log)
        assert log.read_text() == "running\nrun_stop aborted\n"
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL          # restored on the way out
