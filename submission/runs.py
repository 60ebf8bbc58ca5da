"""One run, launched as a campaign and a tradeoff launch it, and the records they share.

  torchrun_command  python -m torch.distributed.run ... -m submission.train (one node or several)
  run_once          the page cache cleared, torchrun started, its output kept, its end checked
  launch            one torchrun job; Ctrl-C (or SIGTERM) stops it cleanly, saying how to resume
  Lock              one writer per results folder (a campaign's, a tradeoff point's)
  set_aside         an interrupted run's log moved to attempts/, never deleted
  training_changes  the settings that change what a run computes, compared with a record
  hardware_changes  the machine of a launch compared with the system.json of earlier runs
"""
from __future__ import annotations

import contextlib
import dataclasses
import datetime
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import TextIO

from . import file_lock, page_cache, said
from . import settings as declared
from .config import REPO_ROOT, Config
from .heartbeat import NODE_LOST_EXIT
from .inventory import cpu_threads
from .preflight import LaunchPlan, launch_plan
from .results import CampaignError, read_json
from .run_folder import KeptAttempt, RunFiles
from .stop_signals import FirstSignal, first_signal_interrupts
from .system_json import run_description
from .train_args import TrainArgs

STOP_GRACE_S = 60     # after Ctrl-C, how long the workers get to log run_stop and exit


def stamp() -> str:
    return datetime.datetime.now().strftime("%Y%m%d-%H%M%S")


def torchrun_command(config: Config, train_args: TrainArgs, shown: dict[str, str] | None = None) -> list[str]:
    """torchrun (through submission.launcher: the same, quiet when interrupted) running
    submission.train with `train_args` on this node (`shown`: TrainArgs.to_argv's)."""
    launcher = [sys.executable, "-m", "submission.launcher",
                f"--nproc_per_node={config.processes_per_node}", "--max_restarts=0"]
    if config.num_nodes == 1:
        launcher.append("--standalone")
    else:
        launcher += [f"--nnodes={config.num_nodes}", f"--node_rank={config.node_rank}",
                     f"--master_addr={config.master_addr}", f"--master_port={config.master_port}"]
    return launcher + ["-m", "submission.train", *train_args.to_argv(shown)]


def clear_cache(config: Config, say: str = "[campaign]") -> bool:
    """Run cache_clear_cmd (from the system descriptor or the command line only), without a
    shell (page_cache), saying so."""
    if not config.cache_clear_cmd:
        return False
    print(f"{say} clearing the page cache: `{config.cache_clear_cmd}` (cache_clear_cmd, "
          f"from {config.origin('cache_clear_cmd')})", flush=True)
    try:
        done = subprocess.run(page_cache.words(config.cache_clear_cmd), capture_output=True, text=True)
    except OSError as error:        # no such program, not executable
        done = subprocess.CompletedProcess(config.cache_clear_cmd, 127, "", str(error))
    if done.returncode:
        raise CampaignError(
            f"cache_clear_cmd `{config.cache_clear_cmd}` failed ({done.stderr.strip() or done.returncode}); "
            "MLPerf clears the page cache before each run, which usually needs root. Run as root, "
            "or pass cache_clear_cmd= to skip it (the logs then say cache_clear false).")
    return True


def plan_launch(config: Config, say: str = "[campaign]") -> LaunchPlan:
    """What preflight decided about `config`: what will run, then each change it made and each
    note, on lines that start with `say`."""
    plan = launch_plan(config)
    launched = plan.config
    origin = launched.origin("workers_per_device")
    threads = (f"{launched.workers_per_device} loader threads each (workers_per_device "
               f"{origin if origin.startswith('derived') else 'from ' + origin})")
    said.say(f"{say} system {launched.system_id} ({launched.system_name}): {launched.dataset} on "
             f"{launched.device_type}, {launched.world_size} process(es)"
             + (f", {launched.descriptor.accelerator_model_name}, {threads}" if launched.device_type == "cuda" else
                f", {cpu_threads(launched)} torch and {threads}"))
    for note in plan.notes:
        said.say(f"{say} {note}")
    return plan


def terminate_as_interrupt() -> contextlib.AbstractContextManager[FirstSignal]:
    """SIGTERM (SLURM's signal, a `kill`) stops what runs inside as Ctrl-C does; only the first
    of them raises KeyboardInterrupt (stop_signals.first_signal_interrupts)."""
    return first_signal_interrupts()


def run_once(config: Config, train_args: TrainArgs, files: RunFiles, what: str, say: str = "[campaign]") -> None:
    """One run, as a campaign and a tradeoff launch it: the page cache cleared, torchrun
    started on submission.train with `train_args` (its result is `files.result`), the output
    kept in `files.transcript`; a CampaignError saying what to do when it does not end with
    its result file."""
    cleared = clear_cache(config, say)
    rc = launch(config, dataclasses.replace(train_args, result=files.result, cache_cleared=cleared),
                progress=files.transcript)
    if rc == 0 and files.result.is_file():
        return
    from .out_of_memory import reported
    partial, transcript = files.partial, files.transcript
    kept = f"its partial log is {partial}" if partial.exists() else "no log was written"
    if rc == NODE_LOST_EXIT:
        raise CampaignError(f"{what} stopped: a node was lost (the line above names it); {kept}. "
                            "Re-run the same command on every node to resume: complete runs are "
                            "kept, this one is redone.")
    memory = reported(transcript.read_text(errors="replace") if transcript.is_file() else "")
    if memory:
        raise CampaignError(
            f"{what} failed (torchrun exit code {rc}): out of memory; {kept}. "
            "The same command would fail the same way; change the setting named here:\n"
            f"  {memory}")
    raise CampaignError(
        f"{what} failed (torchrun exit code {rc}); {kept}. Fix the cause and "
        "re-run the same command: complete runs are kept, this one is redone.")


def launch(config: Config, train_args: TrainArgs, progress: Path | None = None) -> int:
    """One torchrun job; with `progress`, its output also goes to that file (the run's
    transcript: results/<system>/progress/run_<i>.log). Ctrl-C (or SIGTERM) stops it
    cleanly: torchrun, in a session of its own so that the signal reaches the campaign
    alone (submission.launcher says why), gets one SIGTERM and passes it to the workers,
    which log run_stop aborted with the reason; then the campaign stops saying how to
    resume, in one line: what the job prints while it stops goes to the transcript alone."""
    copy = None
    if progress is not None:
        progress.parent.mkdir(parents=True, exist_ok=True)
        copy = open(progress, "w")
    job = subprocess.Popen(torchrun_command(config, train_args), cwd=REPO_ROOT, text=True, bufsize=1,
                           stdout=subprocess.PIPE if copy else None,
                           stderr=subprocess.STDOUT if copy else None, start_new_session=True)
    relay = Relay(job, copy) if copy else None
    try:
        try:
            return finish(job, relay)
        except KeyboardInterrupt:
            # further signals (Ctrl-C again; SLURM signals every process of a job) are
            # ignored while the job stops: it has its SIGTERM, and the killer bounds the wait
            previous = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGTERM)}
            try:
                if relay:
                    relay.console = False          # its last lines (the run_stop it logs): transcript only
                job.send_signal(signal.SIGTERM)
                killer = threading.Timer(STOP_GRACE_S, job.kill)
                killer.start()
                try:
                    finish(job, relay)
                finally:
                    killer.cancel()
            finally:
                for sig, handler in previous.items():
                    signal.signal(sig, handler)
            output = f" (its output: {progress})" if progress else ""
            raise CampaignError(f"interrupted: the run in progress was stopped and its partial "
                                f"log kept{output}; re-run the same command to resume (complete "
                                "runs are kept, the interrupted one is redone)") from None
    finally:
        if copy:
            copy.close()


class Relay(threading.Thread):
    """The job's output into `copy` (the run's transcript) and, while `console`, to stdout."""

    def __init__(self, job: subprocess.Popen, copy: TextIO) -> None:
        super().__init__(daemon=True, name="relay")
        self.job, self.copy, self.console = job, copy, True
        self.start()

    def run(self) -> None:
        assert self.job.stdout is not None, "the job is started with stdout=PIPE"
        for line in self.job.stdout:
            if self.console:
                sys.stdout.write(line)
                sys.stdout.flush()
            self.copy.write(line)
            self.copy.flush()


# The main thread waits in steps this short rather than in one blocking read or wait: a
# signal that the kernel hands to another thread of this process (torch starts one at import)
# runs its Python handler only when the main thread next runs Python code. Seen: a blocking
# read of the job's output left Ctrl-C unnoticed until the job ended by itself.
WAIT_STEP_S = 0.2


def finish(job: subprocess.Popen, relay: Relay | None) -> int:
    """The job's exit status once it has ended and all its output is relayed."""
    while True:
        try:
            rc = job.wait(timeout=WAIT_STEP_S)
            break
        except subprocess.TimeoutExpired:
            pass
    while relay is not None and relay.is_alive():
        relay.join(WAIT_STEP_S)
    return rc


class Busy(CampaignError):
    """Another process holds the folder's lock: nothing was done."""


def lock_holder(folder: Path) -> str | None:
    """The pid written in `folder`'s lock while another process holds it, else None; nothing
    is created or written (a command about to refuse writes nothing)."""
    return file_lock.holder(Path(folder) / ".lock")


class Lock:
    """One campaign per results folder at a time."""

    def __init__(self, folder: Path):
        # the folders this lock creates, outermost last: a campaign that records nothing removes them
        self.created = [path for path in (folder, *folder.parents) if not path.exists()]
        folder.mkdir(parents=True, exist_ok=True)
        self.path = folder / ".lock"

    def __enter__(self) -> Lock:
        try:
            self.handle = file_lock.take(self.path)
        except file_lock.Held as held:
            raise Busy(f"another campaign or tradeoff is writing {self.path.parent} "
                       f"(pid {held.holder}); wait for it to end") from None
        return self

    def __exit__(self, *exc: object) -> None:
        # a campaign that failed before recording anything leaves no folder behind
        if self.created and [p.name for p in self.path.parent.iterdir()] == [".lock"]:
            self.path.unlink()
            for folder in self.created:
                if any(folder.iterdir()):
                    break
                folder.rmdir()
        self.handle.close()          # which releases the lock


def training_settings(settings: dict) -> dict:
    """The settings that change what a run computes (all but the operational ones: they may
    differ when a campaign resumes)."""
    operational = set(declared.names(declared.OPERATIONAL))
    return {k: v for k, v in settings.items() if k not in operational}


def training_changes(recorded: dict, config: Config) -> list[str]:
    """"setting: before -> now" for each setting that changes what a run computes and differs
    between `recorded` (settings a run was started with) and `config`."""
    before, now = training_settings(recorded), training_settings(config.settings)
    for settings in (before, now):      # device="" (the descriptor's choice) vs named alike
        settings["device"] = settings.get("device") or config.device_type
    return [f"{k}: {before.get(k)!r} -> {now.get(k)!r}"
            for k in sorted(before.keys() | now.keys()) if before.get(k) != now.get(k)]


# The system.json fields that say which machine and software ran a campaign's runs
RUN_IDENTITY_FIELDS = (
    "accelerators_per_node", "accelerator_model_name", "accelerator_memory_capacity",
    "number_of_nodes", "host_processor_model_name", "host_processors_per_node",
    "host_processor_core_count", "host_processor_vcpu_count", "host_memory_capacity",
    "framework")


def hardware_changes(recorded_file: Path, config: Config) -> list[str]:
    """How this launch's description differs from `recorded_file`, the system.json of earlier
    runs ([] when it does not, or there is none)."""
    if not recorded_file.is_file():
        return []
    recorded, now = read_json(recorded_file), run_description(config)

    def same(key: str) -> bool:
        before, after = str(recorded.get(key, "")), str(now.get(key, ""))
        return _same_size(before, after) if key.endswith("memory_capacity") else before == after
    return [f"{key}: {recorded.get(key, '')!r} -> {now.get(key, '')!r}"
            for key in RUN_IDENTITY_FIELDS if not same(key)]


def _same_size(before: str, after: str) -> bool:
    """Two memory sizes as system.json writes them, alike within rounding: the host's moves
    by a GiB with a kernel update, and earlier versions of this harness wrote a GPU's
    measured memory in GB where it is now in GiB ("86 GB" then, "80 GiB" now)."""
    from .inventory import stated_bytes
    old, new = stated_bytes(before), stated_bytes(after)
    if not old or not new:
        return before == after
    return abs(old - new) <= max(2**30, 0.03 * old)


def set_aside(run: RunFiles, attempts: Path, stem: str, what: str, say: str = "[campaign]") -> Path:
    """Move what the unfinished attempt of `what` ("run 2") left into `attempts`, as
    <stem>-<time>.txt (its partial log), .log (what it printed, its advice with it), .jsonl
    (its progress records) and -tensorboard (the run again would add to its series), kept,
    never deleted, and say so on a line. The place of its log, or of what it left."""
    attempts.mkdir(parents=True, exist_ok=True)
    kept = KeptAttempt(attempts, f"{stem}-{stamp()}")
    moved = [(path, kept.place_of(run)[path]) for path in run.left_by_an_attempt()]
    for path, place in moved:
        path.rename(place)
    print(f"{say} {what} was incomplete: what it left is kept in {attempts}: "
          f"{', '.join(place.name for _, place in moved)}; redoing it", flush=True)
    return moved[0][1] if moved else attempts
