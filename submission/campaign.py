"""A campaign: prepare the data once, then N runs with distinct seeds, each one torchrun job.

State lives in results/<system_name>/ (its files, by name: submission.run_folder.CampaignFolder;
its records: submission.results; its JSON, written atomically: submission.jsonfile): the
campaign's record, the configuration and data the runs read, the system description as run,
complete runs' result files, each run's progress, and interrupted runs kept under attempts/.
Before anything is written, submission.preflight decides whether this machine can run
the configuration (and with how many loader threads).
Re-running the same command resumes: complete runs are kept byte for byte, an
incomplete run is moved to attempts/ and redone. Changed training settings are
refused unless new_campaign=true, which archives the old campaign first.
"""
from __future__ import annotations

import datetime
import json
import os
import secrets
import shlex
import shutil
import time

from . import runs
from .config import REPO_ROOT, Config, ConfigError
from .heartbeat import NODE_LOST_EXIT
from .jsonfile import write_json
from .results import CampaignError, CampaignRecord, campaign_folder, read_campaign, results_root, write_campaign
from .run_folder import CampaignFolder
from .system_json import run_description
from .tracking import Target
from .train_args import TrainArgs


def _archive(config: Config, why: str) -> None:
    folder = campaign_folder(config).path
    archive = results_root(config).archive(config.system_name, runs.stamp())
    archive.mkdir(parents=True)
    for entry in list(folder.iterdir()):
        if entry.name != ".lock":
            shutil.move(str(entry), archive / entry.name)
    print(f"[campaign] new campaign ({why}): previous results moved to {archive}", flush=True)


def load_campaign(config: Config) -> CampaignRecord | None:
    """The campaign recorded in results/<system>/campaign.json to resume, or None.

    A campaign with other training settings is refused, unless new_campaign=true, which
    archives it. new_campaign=true on an unfinished campaign with the same settings (the
    same command run again after an interruption) resumes it instead of archiving runs.
    """
    files = campaign_folder(config)
    folder = files.path
    state = read_campaign(folder)
    if state is None:
        return None
    changed = runs.training_changes(state.settings, config)
    seeds_differ = len(state.seeds) != config.runs or bool(
        config.seed_list and config.seed_list != state.seeds)
    done = [files.result(i).is_file() for i in range(len(state.seeds))]
    finished = all(done)
    other_hardware = runs.hardware_changes(files.system, config) if any(done) else []
    if config.new_campaign:
        if changed or seeds_differ or finished or other_hardware:
            _archive(config, "new_campaign=true")
            return None
        print(f"[campaign] new_campaign=true, but {folder} holds an unfinished campaign with the "
              "same settings: resuming it (move the folder away to discard it)", flush=True)
    if changed:
        details = ", ".join(changed)
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
        raise CampaignError(f"{folder} was started with runs={len(state.seeds)} and seeds "
                            f"{state.seeds}; pass new_campaign=true to change them")
    return state


def new_campaign_state(config: Config) -> CampaignRecord:
    return CampaignRecord(config.system_id, config.system_name, config.seed_list or _draw_seeds(config.runs),
                          config.to_dict(), datetime.datetime.now().isoformat(timespec="seconds"))


def _draw_seeds(count: int) -> list[int]:
    seeds: list[int] = []
    while len(seeds) < count:
        seed = secrets.randbelow(2**31 - 1) + 1
        if seed not in seeds:
            seeds.append(seed)
    return seeds


def _write_system_description(config: Config) -> None:
    write_json(campaign_folder(config).system, run_description(config))


def require_target(config: Config) -> None:
    """A campaign measures time to a target: a configuration without one is a tradeoff point."""
    if config.target_accuracy is None:
        raise ConfigError("target_accuracy=none trains whole budgets without a target: that is what "
                          "`python -m submission tradeoff` runs (points of a curve, never scored); a "
                          "campaign times each run to its target (MLPerf: 0.759)")


def run_campaign(config: Config) -> int:
    require_target(config)
    plan = runs.plan_launch(config)
    config = plan.approved()
    os.environ.update(plan.environment)     # for torchrun and its workers (node_network: why)
    if config.node_rank > 0:
        return follow_campaign(config)
    from .data.prepare import prepare

    files = campaign_folder(config)
    folder = files.path
    with runs.terminate_as_interrupt():
        with runs.Lock(folder):
            state = load_campaign(config)
            # before anything is recorded: it may fail, and it refuses a training set
            # smaller than one step before it writes any .beton
            data = prepare(config, world_size=config.world_size)
            if state is None:
                state = new_campaign_state(config)
                write_campaign(folder, state)
            _write_system_description(config)
            write_json(files.config, config.to_dict())
            write_json(files.data, data.to_dict())
            _run_all(config, state.seeds, files)
            return finish_campaign(config)


def _run_all(config: Config, seeds: list[int], files: CampaignFolder) -> None:
    files.benchmark.mkdir(exist_ok=True)
    todo = [i for i in range(len(seeds)) if not files.result(i).is_file()]
    for i in range(len(seeds)):
        if i not in todo:
            print(f"[campaign] run {i + 1}/{len(seeds)} already complete: {files.result(i)}")
    durations: list[float] = []
    for position, index in enumerate(todo):
        run = files.run(index)
        if run.left_by_an_attempt():
            runs.set_aside(run, files.attempts, run.result.stem, f"run {index + 1}")
        eta = ""
        if durations:
            eta = f"; campaign ETA {sum(durations) / len(durations) * (len(todo) - position):.1f} min"
        print(f"[campaign] run {index + 1}/{len(seeds)}, seed {seeds[index]}{eta}", flush=True)
        started = time.monotonic()
        args = TrainArgs(files.config, files.data, run_index=index, runs=len(seeds), seed=seeds[index],
                         remaining=len(todo) - position - 1, progress=run.records,
                         track=tracking_target(config, index))
        runs.run_once(config, args, run, f"run {index + 1}")
        durations.append((time.monotonic() - started) / 60)
    if not todo and config.num_nodes > 1:
        runs.launch(config, TrainArgs(files.config, files.data, finish=True))


def tracking_target(config: Config, index: int) -> Target | None:
    """Where run `index`'s trackers write: its TensorBoard folder, W&B's files in the system
    folder, the campaign as W&B's group; None without a tracker."""
    run = campaign_folder(config).run(index)
    return Target(tuple(config.trackers), str(run.events), str(run.wandb), f"run_{index}",
                  config.system_name) if config.trackers else None


def follow_campaign(config: Config) -> int:
    """Nodes other than 0: join each run that node 0 starts until it says the campaign is over."""
    from .data.prepare import prepare

    files = campaign_folder(config)
    files.path.mkdir(parents=True, exist_ok=True)
    config_file, data_file, state_file = files.follower_files(config.node_rank)
    write_json(data_file, prepare(config, world_size=config.world_size).to_dict())
    write_json(config_file, config.to_dict())
    while True:
        state_file.unlink(missing_ok=True)
        cleared = runs.clear_cache(config)
        rc = runs.launch(config, TrainArgs(config_file, data_file, follow=True, state=state_file,
                                           cache_cleared=cleared))
        if rc == NODE_LOST_EXIT:
            raise CampaignError(f"node {config.node_rank}: the run stopped, a node was lost (the line "
                                "above names it). Re-run the same command on every node to resume.")
        if rc != 0 or not state_file.is_file():
            raise CampaignError(f"node {config.node_rank}: a run failed (torchrun exit code {rc}); "
                                "node 0's log says which. Re-run the same command on every node.")
        if json.loads(state_file.read_text())["remaining"] == 0:
            print(f"[campaign] node {config.node_rank}: campaign complete", flush=True)
            return 0


def finish_campaign(config: Config) -> int:
    """Score, compare systems, and package; print where everything is."""
    from . import comparison, package, score

    files = campaign_folder(config)
    folder = files.path
    summary = score.summarize(folder, config.price_usd_per_hour)
    score.write_summary(folder, summary)
    comparison.write_comparison(results_root(config).path)
    from .report.campaign_report import write_report
    print(f"[campaign] results: {files.benchmark}\n[campaign] summary: {files.summary_text}\n"
          f"[campaign] report with plots: {write_report(folder, config.price_usd_per_hour)}")
    print(files.summary_text.read_text())
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
    packages = results_root(config).packages
    # the systems packaged already are built in again: another campaign's package is kept
    built = package.build_package(results_root(config).path, [config.system_name], config.org,
                                  packages, REPO_ROOT, keep_packaged=True)
    for left_out in built.left_out:
        print(f"[campaign] package: left out {left_out}")
    print(f"[campaign] package: {built.path} (passes the MLPerf checkers): systems {', '.join(sorted(built.systems))}"
          if built.passed else "[campaign] package: " + package.failure_text(built, packages / config.org))
    return 0 if (all_reached and built.passed) else 1


def dry_run(config: Config) -> str:
    """The resolved configuration and the torchrun command a run would use."""
    files = campaign_folder(config)
    args = TrainArgs(files.config, files.data, run_index=0, runs=config.runs, result=files.result(0))
    resolved = json.dumps(config.to_dict(), indent=2)
    command = " ".join(shlex.quote(part) for part in runs.torchrun_command(config, args, {"seed": "<seed>"}))
    return (f"{resolved}\n\ntorchrun command for run 1 (on node {config.node_rank}):\n{command}\n\n"
            "system_description: the fields it leaves empty are read from this machine when a run "
            "writes system.json (`python -m submission describe` prints it)")
