"""A campaign: prepare the data once, then N runs with distinct seeds, each one torchrun job.

State lives in results/<system_name>/ (its layout and JSON: submission.results):
  campaign.json       seeds and the settings the campaign was started with
  config.json         the resolved configuration the runs read; data.json: the .beton files
  system.json         the MLPerf system description as run (host fields filled)
  resnet/result_I.txt complete runs only (renamed from .partial after run_stop)
  progress/run_I.log  each run's printed output; run_I.jsonl: rank 0's progress records
  attempts/           logs of interrupted runs, kept aside, never deleted
Before anything is written, submission.preflight decides whether this machine can run
the configuration (and with how many loader threads).
Re-running the same command resumes: complete runs are kept byte for byte, an
incomplete run is moved to attempts/ and redone. Changed training settings are
refused unless new_campaign=true, which archives the old campaign first.
"""
from __future__ import annotations

import datetime
import fcntl
import json
import os
import secrets
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from .config import REPO_ROOT, Config, ConfigError
from .preflight import LaunchPlan, launch_plan
from .results import (CampaignError, progress_log, progress_records, read_json, result_path,
                      results_root, system_dir, write_json)
from .step import RunPlan
from .system_description import run_description

# Settings that do not change what a run computes: they may differ on resume.
# workers_per_device: loader threads, fitted to the CPUs this process may use (which may
# change between resumes); the images and their order come from the seed.
# eval_batch_size: evaluation runs in eval mode (BatchNorm from its running statistics),
# so each image's logits do not depend on its batch; only float rounding may differ, and
# nothing of training reads the evaluation (lowering it is the answer to an evaluation
# out of memory, which must not cost the complete runs).
OPERATIONAL_SETTINGS = {
    "runs", "seeds", "new_campaign", "package", "results_dir", "node_rank", "master_addr",
    "master_port", "progress_every_steps", "price_usd_per_hour", "price_source", "price_date",
    "org", "data_dir", "cache_dir", "val_labels", "cache_clear_cmd", "warmup", "eval_batch_size",
    "workers_per_device",
}


STOP_GRACE_S = 60     # after Ctrl-C, how long the workers get to log run_stop and exit


def _stamp() -> str:
    return datetime.datetime.now().strftime("%Y%m%d-%H%M%S")


def torchrun_command(config: Config, train_args: list[str]) -> list[str]:
    """torchrun (through submission.launcher: the same, quiet when interrupted) running
    submission.train with `train_args` on this node."""
    launcher = [sys.executable, "-m", "submission.launcher",
                f"--nproc_per_node={config.processes_per_node}", "--max_restarts=0"]
    if config.num_nodes == 1:
        launcher.append("--standalone")
    else:
        launcher += [f"--nnodes={config.num_nodes}", f"--node_rank={config.node_rank}",
                     f"--master_addr={config.master_addr}", f"--master_port={config.master_port}"]
    return launcher + ["-m", "submission.train", *train_args]


def clear_cache(config: Config) -> bool:
    """Run cache_clear_cmd (from the system descriptor or the command line only), saying so."""
    if not config.cache_clear_cmd:
        return False
    print(f"[campaign] clearing the page cache: `{config.cache_clear_cmd}` (cache_clear_cmd, "
          f"from {config.origin('cache_clear_cmd')})", flush=True)
    done = subprocess.run(config.cache_clear_cmd, shell=True, capture_output=True, text=True)
    if done.returncode:
        raise CampaignError(
            f"cache_clear_cmd `{config.cache_clear_cmd}` failed ({done.stderr.strip() or done.returncode}); "
            "MLPerf clears the page cache before each run, which usually needs root. Run as root, "
            "or pass cache_clear_cmd= to skip it (the logs then say cache_clear false).")
    return True


class Lock:
    """One campaign per results folder at a time."""

    def __init__(self, folder: Path):
        self.created_folder = not folder.exists()
        folder.mkdir(parents=True, exist_ok=True)
        self.path = folder / ".lock"
        self.handle = open(self.path, "a+")

    def __enter__(self):
        try:
            fcntl.flock(self.handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self.handle.seek(0)
            holder = self.handle.read().strip() or "?"
            self.handle.close()
            raise CampaignError(f"another campaign is writing {self.path.parent} "
                                f"(pid {holder}); wait for it to end") from None
        self.handle.seek(0)
        self.handle.truncate()
        self.handle.write(str(os.getpid()))
        self.handle.flush()
        return self

    def __exit__(self, *exc):
        # a campaign that failed before recording anything leaves no folder behind
        if self.created_folder and [p.name for p in self.path.parent.iterdir()] == [".lock"]:
            self.path.unlink()
            self.path.parent.rmdir()
        fcntl.flock(self.handle, fcntl.LOCK_UN)
        self.handle.close()


def _training_settings(settings: dict) -> dict:
    return {k: v for k, v in settings.items() if k not in OPERATIONAL_SETTINGS}


# The system.json fields that say which machine and software ran a campaign's runs
RUN_IDENTITY_FIELDS = (
    "accelerators_per_node", "accelerator_model_name", "accelerator_memory_capacity",
    "number_of_nodes", "host_processor_model_name", "host_processors_per_node",
    "host_processor_core_count", "host_processor_vcpu_count", "host_memory_capacity",
    "framework")


def _hardware_changes(config: Config) -> list[str]:
    """How this launch's description differs from the system.json of the campaign's
    earlier runs ([] when it does not, or there is none)."""
    recorded_file = system_dir(config) / "system.json"
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
    sizes = stated_bytes(before), stated_bytes(after)
    if not all(sizes):
        return before == after
    return abs(sizes[0] - sizes[1]) <= max(2**30, 0.03 * sizes[0])


def _archive(config: Config, why: str) -> None:
    folder = system_dir(config)
    archive = results_root(config) / "archive" / f"{config.system_name}-{_stamp()}"
    archive.mkdir(parents=True)
    for entry in list(folder.iterdir()):
        if entry.name != ".lock":
            shutil.move(str(entry), archive / entry.name)
    print(f"[campaign] new campaign ({why}): previous results moved to {archive}", flush=True)


def load_campaign(config: Config) -> dict | None:
    """The campaign recorded in results/<system>/campaign.json to resume, or None.

    A campaign with other training settings is refused, unless new_campaign=true, which
    archives it. new_campaign=true on an unfinished campaign with the same settings (the
    same command run again after an interruption) resumes it instead of archiving runs.
    """
    folder = system_dir(config)
    state_file = folder / "campaign.json"
    if not state_file.is_file():
        return None
    state = read_json(state_file)
    before, now = _training_settings(state["config"]["settings"]), _training_settings(config.settings)
    for settings in (before, now):      # device="" (the descriptor's choice) vs named alike
        settings["device"] = settings.get("device") or config.device_type
    changed = sorted(k for k in before.keys() | now.keys() if before.get(k) != now.get(k))
    seeds_differ = len(state["seeds"]) != config.runs or bool(
        config.seed_list and config.seed_list != state["seeds"])
    done = [result_path(config, i).is_file() for i in range(len(state["seeds"]))]
    finished = all(done)
    other_hardware = _hardware_changes(config) if any(done) else []
    if config.new_campaign:
        if changed or seeds_differ or finished or other_hardware:
            _archive(config, "new_campaign=true")
            return None
        print(f"[campaign] new_campaign=true, but {folder} holds an unfinished campaign with the "
              "same settings: resuming it (move the folder away to discard it)", flush=True)
    if changed:
        details = ", ".join(f"{k}: {before.get(k)!r} -> {now.get(k)!r}" for k in changed)
        raise CampaignError(
            f"{folder} holds a campaign run with other settings ({details}). Its complete runs "
            "are kept; to start a new campaign with these settings pass new_campaign=true "
            "(the old one is archived under results/archive/), or change results_dir.")
    if other_hardware:
        raise CampaignError(
            f"{folder} holds runs made on other hardware or software "
            f"({'; '.join(other_hardware)}): one campaign's runs share one system description. "
            "Its complete runs are kept; pass new_campaign=true to archive them and start anew "
            "here, or give this machine another results_dir.")
    if seeds_differ:
        raise CampaignError(f"{folder} was started with runs={len(state['seeds'])} and seeds "
                            f"{state['seeds']}; pass new_campaign=true to change them")
    return state


def new_campaign_state(config: Config) -> dict:
    return {"system": config.system_id, "system_name": config.system_name,
            "seeds": config.seed_list or _draw_seeds(config.runs), "config": config.to_dict(),
            "created": datetime.datetime.now().isoformat(timespec="seconds")}


def _draw_seeds(count: int) -> list[int]:
    seeds: list[int] = []
    while len(seeds) < count:
        seed = secrets.randbelow(2**31 - 1) + 1
        if seed not in seeds:
            seeds.append(seed)
    return seeds


def _write_system_description(config: Config) -> None:
    write_json(system_dir(config) / "system.json", run_description(config))


def _set_aside(partial: Path, index: int) -> None:
    attempts = partial.parent.parent / "attempts"
    attempts.mkdir(exist_ok=True)
    kept = attempts / f"result_{index}-{_stamp()}.txt"
    partial.rename(kept)
    print(f"[campaign] run {index + 1} was incomplete: its log is kept at {kept}; redoing it",
          flush=True)


def _launch(config: Config, train_args: list[str], progress: Path | None = None) -> int:
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
    try:
        try:
            return _relay(job, copy)
        except KeyboardInterrupt:
            # further signals (Ctrl-C again; SLURM signals every process of a job) are
            # ignored while the job stops: it has its SIGTERM, and the killer bounds the wait
            previous = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGTERM)}
            try:
                job.send_signal(signal.SIGTERM)
                killer = threading.Timer(STOP_GRACE_S, job.kill)
                killer.start()
                try:
                    _relay(job, copy, console=False)    # its last lines: the run_stop it logs
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


def _relay(job: subprocess.Popen, copy, console: bool = True) -> int:
    """The job's output into `copy` (the run's transcript) and, with `console`, to stdout,
    until it ends; its exit status."""
    if copy is not None:
        for line in job.stdout:
            if console:
                sys.stdout.write(line)
                sys.stdout.flush()
            copy.write(line)
            copy.flush()
    return job.wait()


def plan_launch(config: Config) -> LaunchPlan:
    """What preflight decided about `config`, each change it made said on a [campaign] line."""
    plan = launch_plan(config)
    for note in plan.notes:
        print(f"[campaign] {note}", flush=True)
    return plan


def run_campaign(config: Config) -> int:
    config = plan_launch(config).approved()
    if config.node_rank > 0:
        return follow_campaign(config)
    from .data.prepare import prepare

    folder = system_dir(config)
    previous_sigterm = signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        with Lock(folder):
            state = load_campaign(config)
            data = prepare(config)          # before anything is recorded: it may fail
            RunPlan.of(config, data.train_samples)  # refuses a set smaller than one step
            if state is None:
                state = new_campaign_state(config)
                write_json(folder / "campaign.json", state)
            _write_system_description(config)
            config_file, data_file = folder / "config.json", folder / "data.json"
            write_json(config_file, config.to_dict())
            write_json(data_file, data.to_dict())
            _run_all(config, state["seeds"], config_file, data_file)
            return finish_campaign(config)
    finally:
        signal.signal(signal.SIGTERM, previous_sigterm)


def _run_all(config: Config, seeds: list[int], config_file: Path, data_file: Path) -> None:
    (system_dir(config) / "resnet").mkdir(exist_ok=True)
    todo = [i for i in range(len(seeds)) if not result_path(config, i).is_file()]
    for i in range(len(seeds)):
        if i not in todo:
            print(f"[campaign] run {i + 1}/{len(seeds)} already complete: {result_path(config, i)}")
    durations: list[float] = []
    for position, index in enumerate(todo):
        final = result_path(config, index)
        partial = final.with_name(final.name + ".partial")
        if partial.exists():
            _set_aside(partial, index)
        eta = ""
        if durations:
            eta = f"; campaign ETA {sum(durations) / len(durations) * (len(todo) - position):.1f} min"
        print(f"[campaign] run {index + 1}/{len(seeds)}, seed {seeds[index]}{eta}", flush=True)
        started = time.monotonic()
        cleared = clear_cache(config)
        progress = progress_log(config, index)
        rc = _launch(config, [
            "--config", str(config_file), "--data", str(data_file), "--run-index", str(index),
            "--runs", str(len(seeds)), "--seed", str(seeds[index]), "--result", str(final),
            "--cache-cleared", str(int(cleared)), "--remaining", str(len(todo) - position - 1),
            "--progress", str(progress_records(config, index))],
            progress=progress)
        if rc != 0 or not final.is_file():
            from .out_of_memory import reported
            kept = f"its partial log is {partial}" if partial.exists() else "no log was written"
            memory = reported(progress.read_text(errors="replace") if progress.is_file() else "")
            if memory:
                raise CampaignError(
                    f"run {index + 1} failed (torchrun exit code {rc}): out of memory; {kept}. "
                    "The same command would fail the same way; change the setting named here:\n"
                    f"  {memory}")
            raise CampaignError(
                f"run {index + 1} failed (torchrun exit code {rc}); {kept}. Fix the cause and "
                "re-run the same command: complete runs are kept, this one is redone.")
        durations.append((time.monotonic() - started) / 60)
    if not todo and config.num_nodes > 1:
        _launch(config, ["--config", str(config_file), "--data", str(data_file), "--finish"])


def follow_campaign(config: Config) -> int:
    """Nodes other than 0: join each run that node 0 starts until it says the campaign is over."""
    from .data.prepare import prepare

    folder = system_dir(config)
    folder.mkdir(parents=True, exist_ok=True)
    node = f"node{config.node_rank}"       # followers sharing one results_dir keep apart
    data_file = folder / f"data.{node}.json"
    write_json(data_file, prepare(config).to_dict())
    config_file, state_file = folder / f"config.{node}.json", folder / f"state.{node}.json"
    write_json(config_file, config.to_dict())
    while True:
        state_file.unlink(missing_ok=True)
        cleared = clear_cache(config)
        rc = _launch(config, ["--config", str(config_file), "--data", str(data_file),
                              "--follow", "--state", str(state_file), "--cache-cleared", str(int(cleared))])
        if rc != 0 or not state_file.is_file():
            raise CampaignError(f"node {config.node_rank}: a run failed (torchrun exit code {rc}); "
                                "node 0's log says which. Re-run the same command on every node.")
        if json.loads(state_file.read_text())["remaining"] == 0:
            print(f"[campaign] node {config.node_rank}: campaign complete", flush=True)
            return 0


def finish_campaign(config: Config) -> int:
    """Score, compare systems, and package; print where everything is."""
    from . import package, score

    folder = system_dir(config)
    summary = score.summarize(folder, config.price_usd_per_hour)
    score.write_summary(folder, summary)
    score.write_comparison(results_root(config))
    from .report.report import write_report
    print(f"[campaign] results: {folder / 'resnet'}\n[campaign] summary: {folder / 'summary.md'}\n"
          f"[campaign] report with plots: {write_report(folder, config.price_usd_per_hour)}")
    print((folder / "summary.md").read_text())
    all_reached = all(run.status == "success" for run in summary.runs)
    if not config.package:
        return 0 if all_reached else 1
    if not summary.valid:
        print("[campaign] no package: " + "; ".join(summary.reasons))
        return 0 if all_reached else 1
    if not all_reached:
        print("[campaign] note: in the open division the official result_summarizer does not "
              "check accuracy and would time the aborted run as if it had converged; "
              "summary.md drops it, as MLPerf scores a run that missed its target")
    packages = results_root(config) / "package"
    built = package.build_package(results_root(config), [config.system_name], config.org,
                                  packages, REPO_ROOT)
    print(f"[campaign] package: {built.path} (passes the MLPerf checkers)" if built.passed else
          "[campaign] package: " + package.failure_text(built, packages / config.org))
    return 0 if (all_reached and built.passed) else 1


def dry_run(config: Config) -> str:
    """The resolved configuration and the torchrun command a run would use."""
    folder = system_dir(config)
    args = ["--config", str(folder / "config.json"), "--data", str(folder / "data.json"),
            "--run-index", "0", "--runs", str(config.runs), "--seed", "<seed>",
            "--result", str(result_path(config, 0))]
    resolved = json.dumps(config.to_dict(), indent=2)
    command = " ".join(shlex.quote(part) for part in torchrun_command(config, args))
    return f"{resolved}\n\ntorchrun command for run 1 (on node {config.node_rank}):\n{command}"
