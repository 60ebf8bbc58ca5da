"""End to end: real campaigns (FFCV, torchrun, mllog, the official checkers) on
Fashion-MNIST subsets, scaled to seconds per run."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from submission import campaign, runs
from submission.config import resolve
from submission.errors import ConfigError
from submission.jsonfile import write_json
from submission.results import CampaignError, campaign_folder
from submission.system_json import run_description

from conftest import (
    REPO,
    campaign_from_a_terminal,
    child_env,
    descendants,
    first_run_of,
    mllog_events,
    quick_settings,
    run_submission,
    running,
    wait_for,
)

pytestmark = pytest.mark.timeout(900)


@pytest.mark.e2e
@pytest.mark.loaders_interpreted     # FFCV's compiled threads are stopped in data/test_ffcv_loaders.py
def test_interrupted_campaign_resumes_and_packages(tmp_path, cache_dir):
    """Ctrl-C (SIGINT to the process group, as a terminal sends it) inside run 3, while FFCV's
    threads load: its log ends run_stop aborted with the reason, the campaign exits non-zero
    saying how to resume, neither the console nor the run's transcript shows a traceback,
    and nothing of the job is left running. Re-run: runs 1-2 untouched, the partial log kept
    aside, five complete runs, a package the official checker accepts, and our olympic score
    equal to the official result summarizer's. The campaign is Medium's: its runs are also the
    suite's end-to-end check of that recipe (its methods in the logs, both rulesets' checkers)."""
    results = tmp_path / "results"
    # a gate the scaled-down run passes at its first evaluation: this test is about
    # campaign mechanics, test_train.py is about learning
    # (a progress record every step: run 3 is stopped after its first, long before its evaluation)
    args = ["run", *quick_settings(results, cache_dir, recipe="medium", target_accuracy=0.05, package="true",
                                   org="TestOrg", seeds="11,12,13,14,15", progress_every_steps=1)]
    folder = results / "local_cpu"
    resnet, progress = folder / "resnet", folder / "progress"
    with campaign_from_a_terminal(*args) as first:
        wait_for(lambda: (progress / "run_2.jsonl").is_file()
                 and '"window"' in (progress / "run_2.jsonl").read_text(), 400,
                 "run 3's first steps")
        job = descendants(first.pid)
        assert "run_stop" not in (resnet / "result_2.txt.partial").read_text()
        os.killpg(first.pid, signal.SIGINT)      # Ctrl-C: the campaign, which stops torchrun
        output, _ = first.communicate(timeout=120)
    assert first.returncode != 0
    assert (f"error: interrupted: the run in progress was stopped and its partial log kept "
            f"(its output: {progress / 'run_2.log'}); re-run the same command to resume") in output
    assert "Traceback" not in output, output
    transcript = (progress / "run_2.log").read_text()  # what the job printed while it stopped
    records = (progress / "run_2.jsonl").read_text()
    assert "[run 3/5 seed 13] interrupted; partial log kept at" in transcript
    assert "Traceback" not in transcript, transcript
    partial = (resnet / "result_2.txt.partial").read_text().splitlines()
    assert '"key": "run_stop"' in partial[-1] and '"status": "aborted"' in partial[-1]
    assert "interrupted" in partial[-1]
    kept = {i: (resnet / f"result_{i}.txt").read_bytes() for i in (0, 1)}
    assert not (resnet / "result_2.txt").exists()
    # torchrun, the trainer and FFCV's threads have all ended with the campaign
    wait_for(lambda: not any(running(pid) for pid in job), 30, "the job's processes to end")

    second = run_submission(*args)
    assert second.returncode == 0, second.stdout + second.stderr
    assert "run 1/5 already complete" in second.stdout and "run 2/5 already complete" in second.stdout
    assert "run 3 was incomplete" in second.stdout
    for i, data in kept.items():
        assert (resnet / f"result_{i}.txt").read_bytes() == data, f"run {i + 1} was rewritten"
    assert sorted(p.name for p in resnet.iterdir()) == [f"result_{i}.txt" for i in range(5)]
    attempts = list((results / "local_cpu" / "attempts").iterdir())
    logs = [a for a in attempts if a.suffix == ".txt"]
    assert len(logs) == 1 and logs[0].name.startswith("result_2-")
    # its printed output (what it said when it stopped) and progress records beside it, as they were
    assert sorted(a.name for a in attempts if a.is_file()) == [logs[0].stem + s for s in (".jsonl", ".log", ".txt")]
    assert logs[0].with_suffix(".log").read_text() == transcript
    assert logs[0].with_suffix(".jsonl").read_text() == records
    assert "[run 3/5 seed 13] interrupted" not in (progress / "run_2.log").read_text()    # the redo's own
    assert "run_start" in logs[0].read_text()
    # its TensorBoard series (where it wrote one) kept beside it, not mixed into the redone run's
    assert [a.name for a in attempts if a.is_dir()] in ([], [logs[0].stem + "-tensorboard"])

    seeds = set()
    for i in range(5):
        seeds |= {e["value"] for e in mllog_events(resnet / f"result_{i}.txt") if e["key"] == "seed"}
        assert '"status": "success"' in (resnet / f"result_{i}.txt").read_text()
    assert seeds == {11, 12, 13, 14, 15}
    _medium_end_to_end(results / "local_cpu")

    # the package: official package checker and result summarizer
    package = results / "package" / "TestOrg"
    assert (package / "systems" / "local_cpu.json").is_file()
    checker = subprocess.run([sys.executable, "-m", "mlperf_logging.package_checker", str(package),
                              "training", "2.0.0", "--log_output", str(tmp_path / "pc.log")],
                             capture_output=True, text=True, cwd=tmp_path)
    assert "PACKAGE CHECKER FOUND NO ERRORS" in checker.stdout + checker.stderr
    subprocess.run([sys.executable, "-m", "mlperf_logging.result_summarizer", str(package),
                    "training", "2.0.0"], capture_output=True, text=True, cwd=tmp_path, check=True)
    row = json.loads((tmp_path / "summary.json").read_text())[0]
    official = row.get("resnet", row.get("resnet:time_to_train"))
    ours = json.loads((results / "local_cpu" / "summary.json").read_text())
    assert ours["valid"] is True
    assert ours["score_minutes"] == pytest.approx(official, abs=1e-3)

    # resuming a complete campaign with other training settings is refused, nothing lost
    changed = run_submission("run", *quick_settings(results, cache_dir, recipe="medium", target_accuracy=0.06,
                                                    seeds="11,12,13,14,15"))
    assert changed.returncode == 1 and "target_accuracy: 0.05 -> 0.06" in changed.stderr
    for i, data in kept.items():
        assert (resnet / f"result_{i}.txt").read_bytes() == data


def _medium_end_to_end(folder: Path):
    """Medium's run as the recipe defines it: MixUp and SAM named in the logs, SAM's interval in
    the campaign's settings, the logs accepted by both rulesets' checkers."""
    methods, settings = first_run_of(folder, "medium")
    assert "MixUp (alpha 0.2)" in methods and "SAM (rho 0.5, every 10th step)" in methods
    assert settings["sam_interval"] == 10


@pytest.mark.e2e
def test_second_campaign_on_the_same_results_is_locked_out(tmp_path, cache_dir):
    results = tmp_path / "results"
    folder = results / "local_cpu"
    folder.mkdir(parents=True)
    import fcntl
    with open(folder / ".lock", "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        handle.write("4242")
        handle.flush()
        blocked = run_submission("run", *quick_settings(results, cache_dir, runs=1, seeds="1"))
    assert blocked.returncode == 1 and "another campaign or tradeoff is writing" in blocked.stderr


def record(config):
    from submission import campaign
    state = campaign.new_campaign_state(config)
    campaign_folder(config).path.mkdir(parents=True, exist_ok=True)
    write_json(campaign_folder(config).path / "campaign.json", state.to_dict())
    return state


def test_new_campaign_archives_instead_of_overwriting(tmp_path):
    from submission import campaign
    from submission.config import resolve
    first = resolve("cpu", {"results_dir": str(tmp_path), "runs": "2", "seeds": "1,2"})
    assert campaign.load_campaign(first) is None
    assert record(first).seeds == [1, 2]
    done = campaign_folder(first).result(0)
    done.parent.mkdir(parents=True)
    done.write_text("a finished run\n")
    # same settings: resumed, seeds kept; other seeds without new_campaign: refused
    assert campaign.load_campaign(first).seeds == [1, 2]
    with pytest.raises(CampaignError, match="new_campaign=true"):
        campaign.load_campaign(resolve("cpu", {"results_dir": str(tmp_path), "runs": "2",
                                               "seeds": "3,4"}))
    # the same command with new_campaign=true, run again on the unfinished campaign: resumed
    again = resolve("cpu", {"results_dir": str(tmp_path), "runs": "2", "seeds": "1,2",
                            "new_campaign": "true"})
    assert campaign.load_campaign(again).seeds == [1, 2] and done.exists()
    fresh = resolve("cpu", {"results_dir": str(tmp_path), "runs": "2", "seeds": "3,4",
                            "new_campaign": "true"})
    assert campaign.load_campaign(fresh) is None
    archived = list((tmp_path / "archive").glob("local_cpu-*/resnet/result_0.txt"))
    assert len(archived) == 1 and archived[0].read_text() == "a finished run\n"
    assert not done.exists()


def test_runs_made_on_other_hardware_are_not_resumed_under_a_new_description(tmp_path):
    """An A100 PCIe card gets the same folder name as an SXM4 one (local_1xA100-40GB): a
    campaign begun on one is not continued on the other, whose system.json would then
    describe both machines' runs."""
    from submission import campaign
    from submission.config import resolve
    config = resolve("cpu", {"results_dir": str(tmp_path), "runs": "2", "seeds": "1,2"})
    record(config)
    recorded = run_description(config)
    write_json(campaign_folder(config).path / "system.json", {**recorded, "host_processor_vcpu_count": "64"})
    assert campaign.load_campaign(config).seeds == [1, 2]     # no complete run yet
    done = campaign_folder(config).result(0)
    done.parent.mkdir(parents=True)
    done.write_text("a finished run\n")
    with pytest.raises(CampaignError) as refused:
        campaign.load_campaign(config)
    assert f"host_processor_vcpu_count: '64' -> '{recorded['host_processor_vcpu_count']}'" in str(refused.value)
    anew = resolve("cpu", {"results_dir": str(tmp_path), "runs": "2", "seeds": "1,2", "new_campaign": "true"})
    assert campaign.load_campaign(anew) is None and not done.exists()


def test_a_campaign_resumes_across_what_does_not_change_its_runs(tmp_path):
    """device="" then device=cpu on the same CPU machine, other loader threads (fitted to
    the CPUs this process may use), host memory rounded a GiB apart: all the same campaign."""
    from submission import campaign
    from submission.config import resolve
    config = resolve("cpu", {"results_dir": str(tmp_path), "runs": "2", "seeds": "1,2"})
    record(config)
    recorded = run_description(config)
    memory = int(recorded["host_memory_capacity"].split()[0])
    write_json(campaign_folder(config).path / "system.json", {**recorded, "host_memory_capacity": f"{memory - 1} GiB"})
    assert runs.hardware_changes(campaign_folder(config).path / "system.json", config) == []
    for old, new in (("86 GB", "80 GiB"), ("25 GB", "24 GiB"), ("80 GB", "80 GB")):   # H100 PCIe, RTX 4090
        assert runs._same_size(old, new)
    assert not runs._same_size("40 GB", "80 GB")
    done = campaign_folder(config).result(0)
    done.parent.mkdir(parents=True)
    done.write_text("a finished run\n")
    again = resolve("cpu", {"results_dir": str(tmp_path), "runs": "2", "seeds": "1,2",
                            "device": "cpu", "workers_per_device": "1"})
    assert campaign.load_campaign(again).seeds == [1, 2]


def test_campaign_record_cut_mid_write_is_named_with_its_line(tmp_path):
    from submission import campaign
    from submission.config import resolve
    config = resolve("cpu", {"results_dir": str(tmp_path), "runs": "2", "seeds": "1,2"})
    record(config)
    state_file = campaign_folder(config).path / "campaign.json"
    text = state_file.read_text()
    state_file.write_text(text[: len(text) // 2])
    with pytest.raises(CampaignError, match=r"campaign.json is not valid JSON \(line \d+"):
        campaign.load_campaign(config)


def test_atomic_write_leaves_the_old_file_when_writing_fails(tmp_path):
    target = tmp_path / "campaign.json"
    write_json(target, {"seeds": [1]})
    with pytest.raises(TypeError):
        write_json(target, {"seeds": object()})     # fails mid-serialisation
    assert json.loads(target.read_text()) == {"seeds": [1]}
    assert [p.name for p in tmp_path.iterdir()] == ["campaign.json"]


@pytest.mark.e2e
def test_failed_preparation_records_no_campaign_and_too_few_images_are_caught_early(tmp_path, cache_dir):
    results = tmp_path / "results"
    # 100 images cannot fill one batch of 128: refused before the data is written
    small = run_submission("run", *quick_settings(results, cache_dir, train_limit=100,
                                                  batch_per_device=128, runs=1, seeds="1"))
    assert small.returncode == 2, small.stdout + small.stderr
    assert "100 training images are fewer than one global batch (128" in small.stderr
    assert "Traceback" not in small.stderr
    folder = results / "local_cpu"
    assert not (folder / "campaign.json").exists() and not (folder / "resnet").exists()
    assert not (folder / "attempts").exists()


def test_malformed_descriptor_names_the_file_and_line(tmp_path, monkeypatch):
    from submission import config as config_module
    from submission import system_descriptor
    systems = tmp_path / "systems"
    systems.mkdir()
    (systems / "broken.json").write_text('{\n  "submitter": "",\n  "division": "open"\n  "status": 1\n}\n')
    monkeypatch.setattr(system_descriptor, "SYSTEMS_DIR", systems)
    with pytest.raises(config_module.ConfigError, match=r"broken.json is not valid JSON.*line 4"):
        config_module.resolve("broken")


@pytest.mark.loaders_interpreted
@pytest.mark.e2e
def test_full_disk_during_a_run_fails_clearly_and_keeps_earlier_results(tmp_path, cache_dir):
    """RLIMIT_FSIZE (a full disk for files past 20 kB) while run 2 writes its log: the run
    fails with a clear message, run 1's result file is byte-identical, no result_1.txt."""
    import resource

    from submission.config import parse_overrides, resolve
    from submission.data.prepare import prepare
    results = tmp_path / "results"
    settings = quick_settings(results, cache_dir, runs=2, seeds="1,2")
    config = resolve(None, parse_overrides(settings))
    prepare(config)                                  # the .beton files exist beforehand
    record(config)
    first = campaign_folder(config).result(0)
    first.parent.mkdir(parents=True)
    first.write_text("a finished run, written before the disk filled up\n")
    limit = 20_000                                   # the run's log passes it during init
    done = subprocess.run([sys.executable, "-m", "submission", "run", *settings], cwd=REPO,
                          capture_output=True, text=True, timeout=600, env=child_env(),
                          preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit)))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "File too large" in done.stdout + done.stderr
    assert "run 2 failed" in done.stderr and "re-run the same command" in done.stderr
    assert first.read_text() == "a finished run, written before the disk filled up\n"
    assert not campaign_folder(config).result(1).exists()


def test_followers_on_one_results_dir_keep_separate_state(tmp_path, cache_dir, monkeypatch):
    """Nodes 1 and 2 sharing results_dir: each keeps its own config, data and state files."""
    from submission import campaign
    from submission.config import parse_overrides, resolve
    launched = []

    def fake_launch(config, args, progress=None):      # node 0 says: no run left
        launched.append(config.node_rank)
        args.state.write_text(json.dumps({"remaining": 0}))
        return 0
    monkeypatch.setattr(runs, "launch", fake_launch)
    for rank in (1, 2):
        config = resolve(None, parse_overrides(quick_settings(
            tmp_path, cache_dir, nodes=3, node_rank=rank, master_addr="127.0.0.1")))
        assert campaign.follow_campaign(config) == 0
    folder = campaign_folder(config).path
    names = sorted(p.name for p in folder.iterdir())
    for rank in (1, 2):
        assert {f"config.node{rank}.json", f"data.node{rank}.json", f"state.node{rank}.json"} <= set(names)
    assert launched == [1, 2]


def test_cache_clearing_command_is_printed_with_its_origin_before_it_runs(tmp_path, capsys):
    from submission.config import resolve
    marker = tmp_path / "ran"
    config = resolve("cpu", {"cache_clear_cmd": f"touch {marker}"})
    assert runs.clear_cache(config) and marker.is_file()
    assert f"`touch {marker}` (cache_clear_cmd, from the command line)" in capsys.readouterr().out
    assert resolve("p4d").origin("cache_clear_cmd") == "the harness defaults"


def test_the_fitted_loader_workers_are_what_the_campaign_records(cpus, tmp_path, cache_dir, monkeypatch):
    """Through run_campaign: config.json (which the runs read) and campaign.json hold the
    fitted value. The run is told where to write its progress records, beside its transcript."""
    import json

    from submission.config import parse_overrides

    from conftest import quick_settings
    cpus["count"] = 1
    settings = [s for s in quick_settings(tmp_path / "results", cache_dir, runs=1, seeds="1")
                if not s.startswith("workers_per_device=")]
    launched, outputs, argvs = [], [], []

    def fake_launch(config, args, progress=None):
        launched.append(json.loads(args.config.read_text()))
        outputs.append((args.progress, progress))
        argvs.append(args.to_argv())
        return 1
    monkeypatch.setattr(runs, "launch", fake_launch)
    cfg = resolve(None, parse_overrides(settings))
    with pytest.raises(CampaignError, match="run 1 failed .* Fix the cause"):
        campaign.run_campaign(cfg)
    assert launched[0]["settings"]["workers_per_device"] == 1
    state = json.loads((campaign_folder(cfg).path / "campaign.json").read_text())
    assert state["config"]["settings"]["workers_per_device"] == 1
    progress = campaign_folder(cfg).path / "progress"
    assert outputs == [(progress / "run_0.jsonl", progress / "run_0.log")]
    folder = campaign_folder(cfg).path
    assert argvs == [["--config", str(folder / "config.json"), "--data", str(folder / "data.json"),
                      "--run-index", "0", "--runs", "1", "--seed", "1", "--remaining", "0",
                      "--progress", str(progress / "run_0.jsonl"),
                      "--track", campaign.tracking_target(cfg, 0).to_text(),
                      "--result", str(folder / "resnet" / "result_0.txt"), "--cache-cleared", "false"]]


@pytest.mark.parametrize("command, needs", [
    ("touch {a}; touch {b}", "`;`"), ("touch {a} && touch {b}", "`&&`"), ("touch {a} > {b}", "`>`"),
    ("touch $(echo {b})", "`$`"), ("touch {a} | tee {b}", "`|`"),
])
def test_a_cache_clearing_command_that_needs_a_shell_is_refused_before_anything_runs(tmp_path, command, needs):
    from submission import preflight
    from submission.config import resolve
    a, b = tmp_path / "a", tmp_path / "b"
    config = resolve("cpu", {"cache_clear_cmd": command.format(a=a, b=b), "cache_dir": str(tmp_path / "c")})
    (problem,) = [p for p in preflight.launch_plan(config).problems if "cache_clear_cmd" in p]
    assert f"needs a shell ({needs})" in problem and "sysctl -w vm.drop_caches=3" in problem
    with pytest.raises(ConfigError, match="needs a shell"):
        runs.clear_cache(config)
    assert not a.exists() and not b.exists()


def test_the_cache_clearing_command_runs_without_a_shell(tmp_path):
    """Quoted words reach the command whole, and nothing is expanded by a shell."""
    from submission.config import resolve
    config = resolve("cpu", {"cache_clear_cmd": f"touch '{tmp_path}/one file' {tmp_path}/'*'"})
    assert runs.clear_cache(config)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["*", "one file"]


def test_every_shipped_system_clears_the_page_cache_without_a_shell():
    from submission import page_cache
    systems = sorted(p.stem for p in (Path(runs.REPO_ROOT) / "systems").glob("*.json"))
    assert len(systems) > 10
    for system in systems:
        command = resolve(system, {"dataset": "imagenet", "data_dir": "images"}).cache_clear_cmd
        assert page_cache.words(command) == ["sysctl", "-w", "vm.drop_caches=3"], system
    assert resolve("cpu").cache_clear_cmd == ""          # the embedded campaign clears nothing
