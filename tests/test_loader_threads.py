"""The loader threads a process gets (submission/loader_threads.py), from stand-in CPU counts:
this process's affinity, a cgroup's CPU quota, several processes a node, a value given."""
from __future__ import annotations

import pytest

from submission import inventory, preflight
from submission.loader_threads import CPU_DEFAULT, STEP_THREAD_CPUS, LoaderThreads, loader_threads
from submission.preflight import resolve_here

from conftest import A100_40, H100


@pytest.fixture
def quota(tmp_path, monkeypatch):
    """A cgroup v2 cpu.max file the test writes ("max" until it does)."""
    path = tmp_path / "cpu.max"
    path.write_text("max 100000\n")
    monkeypatch.setattr(inventory, "CPU_QUOTA_FILE", str(path))
    return path


def _decided(tmp_path, **overrides: str) -> LoaderThreads:
    return preflight.loader_workers(resolve_here("local", {"data_dir": str(tmp_path), **overrides}))


def test_on_a_gpu_the_default_is_the_cpus_of_the_process_less_the_steps_thread(gpus, cpus, quota, tmp_path):
    gpus.append(H100)
    cpus["count"] = 16                      # the H200 machine's 16 vCPUs, all of them usable
    decided = _decided(tmp_path)
    assert decided == LoaderThreads(16 - STEP_THREAD_CPUS,
                                    "derived: 16 usable CPUs / 1 process(es) - 1 for the step's thread")
    cpus["count"] = 4                       # taskset -c 0-3
    assert _decided(tmp_path).threads == 3
    cpus["count"] = 1                       # never fewer than one
    assert _decided(tmp_path).threads == 1


def test_a_cgroup_quota_caps_the_cpus_the_affinity_allows(gpus, cpus, quota, tmp_path):
    gpus.append(H100)
    cpus["count"] = 16
    quota.write_text("450000 100000\n")     # docker --cpus=4.5: four whole CPUs
    assert inventory.usable_cpus() == 4 and not inventory.one_cpu_to_run_on()
    decided = _decided(tmp_path)
    assert decided.threads == 3
    assert decided.origin == ("derived: 4 usable CPUs (cgroup CPU quota 4.5 of 16 by affinity) / "
                              "1 process(es) - 1 for the step's thread")
    quota.write_text("150000 100000\n")     # 1.5 CPUs: one (numba's threading layer too)
    assert inventory.usable_cpus() == 1 and inventory.one_cpu_to_run_on()
    quota.write_text("6400000 100000\n")    # a quota above the affinity leaves the affinity
    assert inventory.usable_cpus() == 16
    assert _decided(tmp_path).origin.startswith("derived: 16 usable CPUs / 1")


def test_the_node_s_processes_share_the_cpus(gpus, cpus, quota, tmp_path, monkeypatch):
    gpus.extend([A100_40] * 8)              # a p4d's 8 GPUs and 96 vCPUs
    monkeypatch.setattr("os.cpu_count", lambda: 96)
    assert _decided(tmp_path).threads == 96 // 8 - STEP_THREAD_CPUS
    cpus["count"] = 12                      # a cpuset of 12 for the 8 processes
    assert _decided(tmp_path).threads == 1


def test_a_value_given_is_kept_where_it_fits_and_refused_where_it_does_not(gpus, cpus, quota, tmp_path):
    gpus.append(H100)
    cpus["count"] = 16
    assert _decided(tmp_path, workers_per_device="8") == LoaderThreads(8, "the command line")
    assert _decided(tmp_path, workers_per_device="16").threads == 16     # the user's choice: all of them
    refused = _decided(tmp_path, workers_per_device="20")
    assert refused.problem.endswith("this process may run on 16 CPUs; pass workers_per_device=16.")


def test_on_a_cpu_today_s_rule_stays(cpus, quota, tmp_path):
    """torch's threads and the loader's share the cores: 8, lowered to the CPUs each process has."""
    cpus["count"] = 2
    decided = _decided(tmp_path, device="cpu")
    assert decided == LoaderThreads(2, "derived: min(8, 2 usable CPUs / 1 process(es))")
    cpus["count"] = 64
    assert _decided(tmp_path, device="cpu").threads == CPU_DEFAULT
    assert _decided(tmp_path, device="cpu", procs_per_node="16").threads == 4


def test_the_rule_alone():
    """The rule, from the numbers project gives it too (a descriptor's vCPUs)."""
    vcpus = "192 vCPUs (systems/p5en.json)"
    assert loader_threads(0, "the harness defaults", True, "cuda", 192, vcpus, 8) == LoaderThreads(
        23, "derived: 192 vCPUs (systems/p5en.json) / 8 process(es) - 1 for the step's thread")
    preset = loader_threads(4, "submission/embedded.yaml", True, "cuda", 8, "8 usable CPUs", 8)
    assert preset.threads == 1 and preset.derived and "(was 4, submission/embedded.yaml)" in preset.note
    given = loader_threads(4, "systems/x.json", False, "cpu", 4, "4 usable CPUs", 1)
    assert given == LoaderThreads(4, "systems/x.json")
