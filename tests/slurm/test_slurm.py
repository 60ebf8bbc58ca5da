"""scripts/slurm/run.sbatch on a one-host SLURM cluster (tests/slurm/start.sh): the embedded
campaign submitted with sbatch, on the CPU over gloo, cancelled and resubmitted."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from pathlib import Path

import pytest

from submission.compliance import check_path

from conftest import (
    QUICK_BATCH,
    REPO,
    cannot_set_up,
    child_env,
    free_port,
    mllog_events,
    one_worker_at_a_time,
    quick_settings,
)

pytestmark = [pytest.mark.e2e, pytest.mark.loaders_interpreted, pytest.mark.timeout(600)]

SBATCH = REPO / "scripts" / "slurm" / "run.sbatch"
HERE = Path(__file__).resolve().parent          # start.sh and stop.sh


def _two_free_ports() -> int:
    """A port P with P+1 free too: slurmctld and slurmd of the test cluster."""
    for _ in range(50):
        port = free_port()
        if port >= 65535:
            continue
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
        return port
    raise RuntimeError("no two consecutive free ports")


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    """The environment (SLURM_CONF) of a one-host cluster of its own, stopped at the end."""
    if os.geteuid() != 0:
        cannot_set_up("the one-host SLURM cluster runs its daemons as root (CI runs as root)")
    folder = tmp_path_factory.mktemp("slurm")
    env = {**os.environ, "SLURM_TEST_PORT": str(_two_free_ports())}
    # one worker installs SLURM (apt-get) while the others wait, then find it installed
    with one_worker_at_a_time(tmp_path_factory, "apt-get"):
        started = subprocess.run(["bash", HERE / "start.sh", folder], env=env,
                                 capture_output=True, text=True, timeout=900)
    if started.returncode == 3:
        cannot_set_up(f"SLURM cannot be installed here: {started.stderr.strip()}")
    try:
        assert started.returncode == 0, started.stdout + started.stderr
        yield {**os.environ, "SLURM_CONF": str(folder / "slurm.conf")}
    finally:
        subprocess.run(["bash", HERE / "stop.sh", folder], capture_output=True,
                       timeout=120)


def sbatch(env, output: Path, *args: str, wait: bool = True) -> subprocess.CompletedProcess:
    """The job gets sbatch's environment: the cluster's, and this test's own (conftest.py)."""
    options = ["--wait"] if wait else ["--parsable"]
    return subprocess.run(["sbatch", *options, f"--output={output}", *args], cwd=REPO,
                          env=child_env(SLURM_CONF=env["SLURM_CONF"]),
                          capture_output=True, text=True, timeout=600)


def mllog(path: Path, key: str) -> list:
    return [event["value"] for event in mllog_events(path) if event["key"] == key]


def test_sbatch_runs_the_campaign_on_one_node_with_two_processes(tmp_path, cache_dir, slurm):
    """One node, one task, torchrun with two gloo processes: node 0 writes a result the
    official checker accepts, logged with the world that trained."""
    results = tmp_path / "results"
    job = sbatch(slurm, tmp_path / "job.out", "-N1", str(SBATCH), *quick_settings(
        results, cache_dir, procs_per_node=2, runs=1, seeds="21", target_accuracy=0.05,
        master_port=free_port()))
    output = (tmp_path / "job.out").read_text()
    assert job.returncode == 0, job.stdout + job.stderr + output
    assert "[slurm] job " in output and "1 task(s) on 1 node(s)" in output
    assert "0: [campaign] system cpu (local_cpu): fashion-mnist on cpu, 2 process(es)" in output
    folder = results / "local_cpu"
    assert sorted(p.name for p in (folder / "resnet").iterdir()) == ["result_0.txt"]
    result = folder / "resnet" / "result_0.txt"
    assert all(verdict.passed for verdict in check_path(result, ("2.0.0",)))
    assert json.loads((folder / "config.json").read_text())["derived"]["world_size"] == 2
    assert mllog(result, "global_batch_size") == [2 * QUICK_BATCH]    # 2 processes
    assert mllog(result, "number_of_nodes") == [1]
    assert len(mllog(result, "run_start")) == 1                  # rank 1 logs nothing
    assert not list(folder.glob("*.node*.json"))                 # no follower ran


def test_cancelled_job_resumes_when_resubmitted_two_tasks_as_two_nodes(tmp_path, cache_dir, slurm):
    """Two tasks on one host, each one "node" (node_rank from SLURM_PROCID). scancel during
    the run: SLURM's SIGTERM stops it as Ctrl-C does (run_stop aborted). The same sbatch
    again: the interrupted run is set aside and redone; only node 0 wrote results."""
    results = tmp_path / "results"
    args = ["-N1", "--ntasks-per-node=2", str(SBATCH), *quick_settings(
        results, cache_dir, procs_per_node=1, cpu_threads=1, runs=1, seeds="22",
        target_accuracy=0.05, master_port=free_port())]
    folder = results / "2xlocal_cpu"
    partial = folder / "resnet" / "result_0.txt.partial"
    submitted = sbatch(slurm, tmp_path / "first.out", *args, wait=False)
    assert submitted.returncode == 0, submitted.stderr
    job = submitted.stdout.strip().split(";")[0]
    deadline = time.monotonic() + 300
    while not (partial.is_file() and "run_start" in partial.read_text()):
        assert time.monotonic() < deadline, "the run did not start: " + (tmp_path / "first.out").read_text()
        time.sleep(0.5)
    subprocess.run(["scancel", job], env=slurm, check=True, timeout=60)
    deadline = time.monotonic() + 120
    while subprocess.run(["squeue", "-h", "-j", job], env=slurm, capture_output=True,
                         text=True).stdout.strip():
        assert time.monotonic() < deadline, "the cancelled job did not end"
        time.sleep(0.5)
    # SLURM's SIGTERM reached the run and left it the time to log its end (a SIGKILL would
    # leave no run_stop); its reason is "interrupted (SIGTERM)" unless one rank left a
    # collective before the other saw the signal ("crashed: ..."): resumable either way
    last = partial.read_text().splitlines()[-1]
    assert '"key": "run_stop"' in last and '"status": "aborted"' in last, (tmp_path / "first.out").read_text()

    second = sbatch(slurm, tmp_path / "second.out", *args)
    output = (tmp_path / "second.out").read_text()
    assert second.returncode == 0, second.stdout + second.stderr + output
    assert "0: [campaign] run 1 was incomplete" in output
    assert "1: [campaign] node 1: campaign complete" in output
    result = folder / "resnet" / "result_0.txt"
    assert all(verdict.passed for verdict in check_path(result, ("2.0.0",)))
    assert mllog(result, "number_of_nodes") == [2] and mllog(result, "global_batch_size") == [2 * QUICK_BATCH]
    assert mllog(result, "submission_platform") == ["2xlocal_cpu"]
    assert [p.name for p in (folder / "attempts").iterdir()][0].startswith("result_0-")
    # node 1 wrote only its own settings and state beside node 0's results
    assert sorted(p.name for p in folder.glob("*.node*")) == [
        "config.node1.json", "data.node1.json", "state.node1.json"]
    assert sorted(p.name for p in (folder / "resnet").iterdir()) == ["result_0.txt"]


def test_a_two_task_job_array_runs_two_points_of_a_tradeoff_grid(tmp_path, cache_dir, slurm):
    """`sbatch --array=0-1 run.sbatch tradeoff ...`: each array task runs its own point
    (point=SLURM_ARRAY_TASK_ID) to the end of its budget; the last to finish writes the report
    of both."""
    grid = tmp_path / "grid.yaml"
    grid.write_text("name: pair\nbudget: scale_schedule_ratio\nbudgets: [0.5, 1.0]\nseeds: [8]\n"
                    "baseline: mild\nconfigurations:\n  mild: {recipe: mild}\n")
    results = tmp_path / "results"
    job = sbatch(slurm, tmp_path / "task-%a.out", "--array=0-1", str(SBATCH), "tradeoff", f"grid={grid}",
                 *quick_settings(results, cache_dir))
    outputs = [(tmp_path / f"task-{task}.out").read_text() for task in (0, 1)]
    assert job.returncode == 0, job.stdout + job.stderr + "".join(outputs)
    folder = results / "tradeoff" / "pair" / "local_cpu"
    for task, budget in ((0, "0.5"), (1, "1")):
        assert f"array task {task}: point {task} of the grid" in outputs[task]
        log = folder / "points" / f"mild-budget{budget}-seed8" / "log.txt"
        assert '"reason": "no target' in log.read_text().splitlines()[-1]
    assert "2 of 2 points finished" in (folder / "tradeoff.md").read_text()
