"""A campaign: prepare the data once, then N runs with distinct seeds, each one torchrun job.

State lives in results/<system_name>/:
  campaign.json       seeds and the settings the campaign was started with
  config.json         the resolved configuration the runs read; data.json: the .beton files
  system.json         the MLPerf system description as run (host fields filled)
  resnet/result_I.txt complete runs only (renamed from .partial after run_stop)
  attempts/           logs of interrupted runs, kept aside, never deleted
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
import subprocess
import sys
import time
from pathlib import Path

from .config import REPO_ROOT, Config, ConfigError

# Settings that do not change what a run computes: they may differ on resume.
OPERATIONAL_SETTINGS = {
    "runs", "seeds", "new_campaign", "package", "results_dir", "node_rank", "master_addr",
    "master_port", "progress_every_steps", "price_usd_per_hour", "price_source", "price_date",
    "org", "data_dir", "cache_dir", "val_labels", "cache_clear_cmd",
}


class CampaignError(RuntimeError):
    """A campaign cannot go on; the message says what happened and what to do."""


def _stamp() -> str:
    return datetime.datetime.now().strftime("%Y%m%d-%H%M%S")


def results_root(config: Config) -> Path:
    root = Path(config.results_dir)
    return root if root.is_absolute() else REPO_ROOT / root


def system_dir(config: Config) -> Path:
    return results_root(config) / config.system_name


def result_path(config: Config, index: int) -> Path:
    return system_dir(config) / "resnet" / f"result_{index}.txt"


def check_launchable(config: Config) -> None:
    """Fail before touching results/ when this machine cannot run the configuration."""
    problems = []
    if config.device_type == "cuda":
        import torch
        visible = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if visible < config.processes_per_node:
            problems.append(
                f"system {config.system_id} runs {config.processes_per_node} GPU processes per node, "
                f"but this machine has {visible} visible GPU(s). Run it on the machine the "
                f"descriptor describes, or try the recipe here with device=cpu procs_per_node=1.")
    cpus = os.cpu_count() or 1
    if config.workers_per_device > cpus:
        problems.append(f"workers_per_device={config.workers_per_device} exceeds this machine's "
                        f"{cpus} CPUs (FFCV takes 1..{cpus}); pass workers_per_device={cpus}.")
    if config.dataset == "imagenet":
        if not config.data_dir:
            problems.append("dataset=imagenet needs data_dir=FOLDER holding train/ and val/ "
                            f"(systems/{config.system_id}.json sets none).")
        elif not Path(config.data_dir).is_dir():
            problems.append(f"data_dir={config.data_dir} does not exist on this machine.")
    if problems:
        raise ConfigError("cannot start this campaign:\n  - " + "\n  - ".join(problems))


def torchrun_command(config: Config, train_args: list[str]) -> list[str]:
    launcher = [sys.executable, "-m", "torch.distributed.run",
                f"--nproc_per_node={config.processes_per_node}", "--max_restarts=0"]
    if config.num_nodes == 1:
        launcher.append("--standalone")
    else:
        launcher += [f"--nnodes={config.num_nodes}", f"--node_rank={config.node_rank}",
                     f"--master_addr={config.master_addr}", f"--master_port={config.master_port}"]
    return launcher + ["-m", "submission.train", *train_args]


def clear_cache(config: Config) -> bool:
    if not config.cache_clear_cmd:
        return False
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
        folder.mkdir(parents=True, exist_ok=True)
        self.path = folder / ".lock"
        self.handle = open(self.path, "a+")

    def __enter__(self):
        try:
            fcntl.flock(self.handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self.handle.seek(0)
            raise CampaignError(f"another campaign is writing {self.path.parent} "
                                f"(pid {self.handle.read().strip() or '?'}); wait for it to end") from None
        self.handle.seek(0)
        self.handle.truncate()
        self.handle.write(str(os.getpid()))
        self.handle.flush()
        return self

    def __exit__(self, *exc):
        fcntl.flock(self.handle, fcntl.LOCK_UN)
        self.handle.close()


def _training_settings(settings: dict) -> dict:
    return {k: v for k, v in settings.items() if k not in OPERATIONAL_SETTINGS}


def open_campaign(config: Config) -> dict:
    """Load or create campaign.json; refuse a resume with different training settings."""
    folder = system_dir(config)
    state_file = folder / "campaign.json"
    if state_file.is_file() and config.new_campaign:
        archive = results_root(config) / "archive" / f"{config.system_name}-{_stamp()}"
        archive.parent.mkdir(parents=True, exist_ok=True)
        for entry in list(folder.iterdir()):
            if entry.name != ".lock":
                archive.mkdir(exist_ok=True)
                shutil.move(str(entry), archive / entry.name)
        print(f"[campaign] new campaign: previous results moved to {archive}", flush=True)
    if state_file.is_file():
        state = json.loads(state_file.read_text())
        before, now = _training_settings(state["config"]["settings"]), _training_settings(config.settings)
        changed = sorted(k for k in before.keys() | now.keys() if before.get(k) != now.get(k))
        if changed:
            details = ", ".join(f"{k}: {before.get(k)!r} -> {now.get(k)!r}" for k in changed)
            raise CampaignError(
                f"{folder} holds a campaign run with other settings ({details}). Its complete runs "
                "are kept; to start a new campaign with these settings pass new_campaign=true "
                "(the old one is archived under results/archive/), or change results_dir.")
        if len(state["seeds"]) != config.runs or (config.seed_list and config.seed_list != state["seeds"]):
            raise CampaignError(f"{folder} was started with runs={len(state['seeds'])} and seeds "
                                f"{state['seeds']}; pass new_campaign=true to change them")
        return state
    seeds = config.seed_list or _draw_seeds(config.runs)
    state = {"system": config.system_id, "system_name": config.system_name, "seeds": seeds,
             "config": config.to_dict(), "created": datetime.datetime.now().isoformat(timespec="seconds")}
    folder.mkdir(parents=True, exist_ok=True)
    state_file.write_text(json.dumps(state, indent=1))
    return state


def _draw_seeds(count: int) -> list[int]:
    seeds: list[int] = []
    while len(seeds) < count:
        seed = secrets.randbelow(2**31 - 1) + 1
        if seed not in seeds:
            seeds.append(seed)
    return seeds


def _write_system_description(config: Config) -> None:
    from .system_description import fill_from_host
    description = fill_from_host(dict(config.description))
    description["number_of_nodes"] = config.num_nodes
    (system_dir(config) / "system.json").write_text(json.dumps(description, indent=2) + "\n")


def _set_aside(partial: Path, index: int) -> None:
    attempts = partial.parent.parent / "attempts"
    attempts.mkdir(exist_ok=True)
    kept = attempts / f"result_{index}-{_stamp()}.txt"
    partial.rename(kept)
    print(f"[campaign] run {index + 1} was incomplete: its log is kept at {kept}; redoing it",
          flush=True)


def _launch(config: Config, train_args: list[str], progress: Path | None = None) -> int:
    """Run one torchrun job; with `progress`, its output also goes to that file (the
    progress lines the plots read: results/<system>/progress/run_<i>.log)."""
    command = torchrun_command(config, train_args)
    if progress is None:
        return subprocess.call(command, cwd=REPO_ROOT)
    progress.parent.mkdir(parents=True, exist_ok=True)

    def relay(job, copy):
        for line in job.stdout:
            sys.stdout.write(line)
            sys.stdout.flush()
            copy.write(line)
            copy.flush()

    with open(progress, "w") as copy, subprocess.Popen(
            command, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True, bufsize=1) as job:
        try:
            relay(job, copy)
        except KeyboardInterrupt:   # Ctrl-C reaches the job too: keep reading while it stops,
            relay(job, copy)        # so its last lines (and its log's run_stop) are not cut off
            raise
    return job.returncode


def run_campaign(config: Config) -> int:
    check_launchable(config)
    if config.node_rank > 0:
        return follow_campaign(config)
    from .data.prepare import prepare

    folder = system_dir(config)
    with Lock(folder):
        state = open_campaign(config)
        _write_system_description(config)
        config_file = folder / "config.json"
        config_file.write_text(json.dumps(config.to_dict(), indent=1))
        data_file = folder / "data.json"
        prepare(config).save(data_file)
        (folder / "resnet").mkdir(exist_ok=True)
        seeds = state["seeds"]
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
            rc = _launch(config, [
                "--config", str(config_file), "--data", str(data_file), "--run-index", str(index),
                "--runs", str(len(seeds)), "--seed", str(seeds[index]), "--result", str(final),
                "--cache-cleared", str(int(cleared)), "--remaining", str(len(todo) - position - 1)],
                progress=folder / "progress" / f"run_{index}.log")
            if rc != 0 or not final.is_file():
                kept = f"its partial log is {partial}" if partial.exists() else "no log was written"
                raise CampaignError(
                    f"run {index + 1} failed (torchrun exit code {rc}); {kept}. Fix the cause and "
                    "re-run the same command: complete runs are kept, this one is redone.")
            durations.append((time.monotonic() - started) / 60)
        if not todo and config.num_nodes > 1:
            _launch(config, ["--config", str(config_file), "--data", str(data_file), "--finish"])
    return finish_campaign(config)


def follow_campaign(config: Config) -> int:
    """Nodes other than 0: join each run that node 0 starts until it says the campaign is over."""
    from .data.prepare import prepare

    folder = system_dir(config)
    folder.mkdir(parents=True, exist_ok=True)
    data_file = folder / "data.follower.json"
    prepare(config).save(data_file)
    config_file, state_file = folder / "config.follower.json", folder / "follower-state.json"
    config_file.write_text(json.dumps(config.to_dict(), indent=1))
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
    built = package.build_package(results_root(config), [config.system_name], config.org,
                                  results_root(config) / "package", REPO_ROOT)
    print(f"[campaign] package: {built.path} ({'passes' if built.passed else 'FAILS'} the MLPerf checkers)")
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
