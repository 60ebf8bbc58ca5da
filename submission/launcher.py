"""torchrun as the campaign starts it: torch.distributed.run's own main, ending quietly when
the run was interrupted.

    python -m submission.launcher <torchrun's arguments>

runs `python -m torch.distributed.run <the same arguments>`; only the end differs.

What torchrun does on a signal (torch 2.14.1): once its workers are started, SIGTERM,
SIGINT, SIGHUP and SIGQUIT raise a SignalException in the agent
(elastic/multiprocessing/api.py, `_terminate_process_handler`); the agent catches it,
sends the same signal to each worker's process group, waits for them (30 s, then SIGKILL;
elastic/agent/server/api.py, `run` and `_shutdown`) and raises it again, and
torch/distributed/run.py's main lets it out: a traceback for every stopped run, printed
before the campaign's one-line message. A worker that exits with an error makes the
agent raise a ChildFailedError, which torchrun reports with the worker's error.

Here a SignalException ends this process with status 128 + the signal's number and no
traceback, and so does a ChildFailedError whose failures are all workers that stopped on
a signal (the trainer logs run_stop "interrupted" and exits with
stop_signals.INTERRUPTED_EXIT): its workers were stopped as torchrun stops them; and
likewise one whose workers all ended because a node was lost (heartbeat.NODE_LOST_EXIT,
after a line naming the node), with that status. A
ChildFailedError with any other failure (a crash) is raised as torchrun raises it: the
trainer's traceback and torchrun's report still show.

The campaign starts this process in a session of its own (runs.launch), so that the
terminal's Ctrl-C, and any signal to the campaign's process group, reaches the campaign
alone; it stops torchrun with one SIGTERM and ignores further signals until the run has
stopped. When torchrun shared the campaign's process group it got the terminal's SIGINT
and then the campaign's SIGTERM, and the second SignalException, raised inside the
agent's handling of the first, cut its shutdown short. SLURM still signals every process
of the job, torchrun included, and the campaign's SIGTERM then arrives second: raised while
the agent logged the first ("Received 15 death signal"), it printed logging's traceback. So
only the first signal raises here (`first_signal_only`); the agent stops its workers once,
and waits for them (30 s, then SIGKILL). In its own session torchrun is not reached by a SIGKILL to the
campaign's process group either, so it has the kernel send it SIGTERM when the campaign
dies (stop_signals.die_with_parent), and stops its workers then.

Not chosen: torchrun in the campaign's process group with its output filtered (a crash's
traceback is text like any other), or a launcher of the project's own in place of
torchrun.
"""
from __future__ import annotations

import sys
from types import FrameType

from .heartbeat import NODE_LOST_EXIT
from .stop_signals import INTERRUPTED_EXIT, Interrupted, die_with_parent


def first_signal_only() -> None:
    """torchrun's stop-signal handler, raising on the first signal only: it installs the
    module's handler by name when it starts its workers, so the one found there is used."""
    from torch.distributed.elastic.multiprocessing import api

    original, seen = api._terminate_process_handler, list[int]()

    def handler(signum: int, frame: FrameType | None) -> None:
        if not seen:
            seen.append(signum)
            original(signum, frame)

    api._terminate_process_handler = handler


def main(argv: list[str] | None = None) -> int:
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import main as torchrun

    try:
        die_with_parent()
        first_signal_only()
        torchrun(sys.argv[1:] if argv is None else argv)
    except SignalException as stop:
        return 128 + stop.sigval
    except (Interrupted, KeyboardInterrupt):   # before torchrun's handlers: nothing started
        return INTERRUPTED_EXIT
    except ChildFailedError as failed:
        codes = {failure.exitcode for failure in failed.failures.values()}
        if codes in ({INTERRUPTED_EXIT}, {NODE_LOST_EXIT}):    # each worker said why in a line
            return codes.pop()
        raise
    return 0


if __name__ == "__main__":
    sys.exit(main())
