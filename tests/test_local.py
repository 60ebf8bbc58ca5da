"""system=local and honest descriptions, with a faked GPU inventory (no GPU here)."""
from __future__ import annotations

import pytest

from submission import campaign, inventory
from submission.config import ConfigError, resolve

H100 = inventory.GPU("NVIDIA H100 80GB HBM3", 85_520_000_000, "1980 MHz (max SM clock)",
                     "PCIe Gen5 x16", nvlink=False)
A100_40 = inventory.GPU("NVIDIA A100-SXM4-40GB", 42_298_000_000, "1410 MHz (max SM clock)",
                        "PCIe Gen4 x16", nvlink=True)
A100_80 = inventory.GPU("NVIDIA A100-SXM4-80GB", 85_100_000_000)


@pytest.fixture
def gpus(monkeypatch):
    found: list[inventory.GPU] = []
    monkeypatch.setattr(inventory, "probe", lambda: list(found))
    return found


def test_local_describes_the_gpus_found_and_runs_one_process_each(gpus):
    gpus.extend([H100])
    cfg = resolve("local", {"data_dir": "/data/imagenet"})
    assert cfg.system_name == "local_1xH100-80GB"
    assert (cfg.device_type, cfg.processes_per_node, cfg.accelerators_per_node) == ("cuda", 1, 1)
    assert cfg.dataset == "imagenet" and cfg.global_batch_size == 256
    written = campaign.run_description(cfg)
    assert written["accelerator_model_name"] == "NVIDIA H100 80GB HBM3"
    assert written["accelerator_memory_capacity"] == "80 GB"
    assert written["accelerator_frequency"] == "1980 MHz (max SM clock)"
    assert written["accelerator_host_interconnect"] == "PCIe Gen5 x16"
    assert written["accelerators_per_node"] == "1" and written["number_of_nodes"] == "1"
    assert written["host_processor_model_name"] and written["host_memory_capacity"]
    assert "ImageNet" in written["sw_notes"] and not cfg.price_usd_per_hour


def test_local_without_data_runs_the_embedded_campaign_on_what_it_finds(gpus):
    cpu = resolve("local", {})
    assert cpu.system_name.startswith("local_cpu_") and cpu.device_type == "cpu"
    assert cpu.dataset == "fashion-mnist" and cpu.target_accuracy == 0.65
    gpus.extend([A100_40] * 8)
    gpu = resolve("local", {})
    assert gpu.system_name == "local_8xA100-40GB" and gpu.device_type == "cuda"
    assert gpu.dataset == "fashion-mnist" and gpu.world_size == 8
    assert campaign.run_description(gpu)["accelerator_interconnect"].startswith("NVLink")
    assert "not an ImageNet result" in campaign.run_description(gpu)["sw_notes"]


@pytest.mark.parametrize("found, overrides, message", [
    ([H100], {}, "describes 8 GPU(s) per node, this machine has 1 visible"),
    ([H100] * 8, {}, "describes NVIDIA A100-SXM4-40GB, this machine has NVIDIA H100"),
    ([A100_80] * 8, {}, "with 40 GB, this machine has NVIDIA A100-SXM4-80GB (80 GB)"),
    ([A100_40] * 8, {"procs_per_node": "1"}, "procs_per_node=1, but systems/p4d.json describes 8 GPUs per node; to train on fewer, hide the others with CUDA_VISIBLE_DEVICES"),
    ([A100_40] * 8, {"device": "cpu"}, "device=cpu, but systems/p4d.json describes 8 GPU(s)"),
])
def test_a_named_system_that_is_not_this_machine_is_refused(gpus, tmp_path, found, overrides, message):
    gpus.extend(found)
    cfg = resolve("p4d", {"data_dir": str(tmp_path), "workers_per_device": "1",
                          "results_dir": str(tmp_path / "results"), **overrides})
    with pytest.raises(ConfigError) as refused:
        campaign.run_campaign(cfg)
    assert message in str(refused.value) and "system=local" in str(refused.value)
    assert not (tmp_path / "results").exists()


def test_the_machine_the_descriptor_describes_is_accepted(gpus, tmp_path):
    gpus.extend([A100_40] * 8)
    cfg = resolve("p4d", {"data_dir": str(tmp_path), "workers_per_device": "1"})
    assert campaign.hardware_differences(cfg) == []


def test_cpu_system_names_no_gpu_even_where_there_is_one(gpus):
    gpus.extend([H100])
    cfg = resolve("cpu", {})
    written = campaign.run_description(cfg)
    assert written["accelerators_per_node"] == "0" and written["accelerator_model_name"] == ""
    with pytest.raises(ConfigError, match="describes a machine without accelerators"):
        campaign.check_launchable(resolve("cpu", {"device": "cuda"}))


def test_the_logged_world_is_the_launched_one():
    cfg = resolve("cpu", {"procs_per_node": "2", "nodes": "2", "master_addr": "10.0.0.1"})
    written = campaign.run_description(cfg)
    assert written["number_of_nodes"] == "2" and written["accelerators_per_node"] == "0"
    assert written["system_name"] == cfg.system_name == "2xlocal_cpu"
    assert cfg.global_batch_size == 4 * 64


def test_device_cuda_on_a_local_machine_without_gpu_says_so(gpus):
    with pytest.raises(ConfigError, match="this machine has no GPU that torch can see"):
        campaign.check_launchable(resolve("local", {"device": "cuda", "workers_per_device": "1"}))


@pytest.fixture
def cuda(monkeypatch):
    """torch.cuda as it reads on a machine with these (name, capability) GPUs: the
    hardware boundary gpu_problems queries."""
    import torch
    found: list[tuple[str, tuple[int, int]]] = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: bool(found))
    monkeypatch.setattr(torch.cuda, "device_count", lambda: len(found))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda i=0: found[i][0])
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda i=0: found[i][1])
    monkeypatch.setattr(torch.version, "hip", None)
    return found


T4 = inventory.GPU("Tesla T4", 15_835_000_000)


def test_bf16_on_a_gpu_without_bf16_tensor_cores_is_refused_before_anything_is_written(
        gpus, cuda, tmp_path):
    gpus.extend([T4, T4])
    cuda.extend([("Tesla T4", (7, 5))] * 2)
    settings = {"data_dir": str(tmp_path), "results_dir": str(tmp_path / "results"),
                "workers_per_device": "1"}
    with pytest.raises(ConfigError) as refused:
        campaign.run_campaign(resolve("local", {**settings, "amp_dtype": "bf16"}))
    assert ("amp_dtype=bf16, but Tesla T4 (GPU 0, 1) has compute capability 7.5: bf16 tensor "
            "cores need 8.0") in str(refused.value)
    assert "use amp_dtype=fp16" in str(refused.value)
    assert not (tmp_path / "results").exists()
    campaign.check_launchable(resolve("local", settings))                  # fp16: fine
    campaign.check_launchable(resolve("local", {**settings, "amp_dtype": "bf16",
                                                "precision": "fp32"}))     # no autocast


def test_bf16_is_accepted_on_ampere_and_not_judged_on_rocm(gpus, cuda, tmp_path, monkeypatch):
    import torch
    gpus.append(A100_40)
    cuda.append(("NVIDIA A100-SXM4-40GB", (8, 0)))
    settings = {"data_dir": str(tmp_path), "workers_per_device": "1", "amp_dtype": "bf16"}
    campaign.check_launchable(resolve("local", settings))
    cuda[0] = ("AMD Instinct MI210", (9, 0))
    monkeypatch.setattr(torch.version, "hip", "6.2")
    monkeypatch.setattr(torch.cuda, "get_device_capability",
                        lambda i=0: pytest.fail("a ROCm capability is not a CUDA one"))
    campaign.check_launchable(resolve("local", settings))


def test_several_gpus_without_nccl_are_refused(gpus, tmp_path, monkeypatch):
    import torch.distributed
    monkeypatch.setattr(torch.distributed, "is_nccl_available", lambda: False)
    gpus.extend([A100_40] * 2)
    settings = {"data_dir": str(tmp_path), "workers_per_device": "1"}
    with pytest.raises(ConfigError) as refused:
        campaign.check_launchable(resolve("local", settings))
    assert ("2 processes (2 per node x 1 node(s)) on cuda talk through NCCL, and this torch "
            "build") in str(refused.value)
    assert "install a torch build with NCCL, or train on one GPU (CUDA_VISIBLE_DEVICES=0" in str(refused.value)
    gpus[:] = [A100_40]                       # one process needs no process group
    campaign.check_launchable(resolve("local", settings))


def _dry_run(capsys, *words) -> tuple[int, str, str]:
    from submission import cli
    code = cli.main(["run", *words, "--dry-run"])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def cpus(monkeypatch):
    """The CPUs this process may run on (its affinity)."""
    import os
    usable = {"count": 96}
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(usable["count"])))
    return usable


@pytest.fixture
def host_of_96(monkeypatch):
    """A 96-CPU machine (only where nothing starts a process per CPU)."""
    import os
    monkeypatch.setattr(os, "cpu_count", lambda: 96)


def test_default_loader_workers_are_fitted_to_the_usable_cpus(gpus, cpus, host_of_96, tmp_path,
                                                              capsys):
    import json
    gpus.extend([A100_40] * 8)
    cpus["count"] = 12                      # e.g. taskset or a cgroup cpuset on a 96-CPU host
    code, out, _ = _dry_run(capsys, "system=local", f"data_dir={tmp_path}")
    assert code == 0
    assert "[campaign] workers_per_device=1: 12 usable CPUs / 8 process(es) (was 8)" in out
    printed = json.loads(out[out.index("{"):out.index("\n\ntorchrun command")])
    assert printed["settings"]["workers_per_device"] == 1      # what config.json records
    # the user's own value is refused with the one that fits
    code, out, err = _dry_run(capsys, "system=local", f"data_dir={tmp_path}", "workers_per_device=4")
    assert code == 2
    assert ("workers_per_device=4 (the command line) x 8 process(es) per node is 32 loader "
            "threads, but this process may run on 12 CPUs; pass workers_per_device=1.") in err
    assert "[campaign] workers_per_device=" not in out


def test_loader_workers_that_fit_are_left_as_they_are(gpus, cpus, host_of_96, tmp_path, capsys):
    import json
    gpus.extend([A100_40] * 8)              # p4d: 8 GPUs, 96 vCPUs, 8 workers each
    code, out, err = _dry_run(capsys, "system=p4d", f"data_dir={tmp_path}")
    assert code == 0, err
    assert "[campaign] workers_per_device=" not in out
    assert json.loads(out[out.index("{"):out.index("\n\ntorchrun command")])["settings"][
        "workers_per_device"] == 8
    gpus.clear()
    cpus["count"] = 2                       # the embedded campaign as calibrated: 2 on 2 CPUs
    cfg = resolve("cpu", {})
    campaign.check_launchable(cfg)
    assert cfg.workers_per_device == 2 and cfg.origin("workers_per_device") == "submission/embedded.yaml"
    cpus["count"] = 1                       # its preset is the harness's choice too
    campaign.check_launchable(cfg)
    assert cfg.workers_per_device == 1 and cfg.origin("workers_per_device").startswith("derived: 1 usable")


def test_the_fitted_loader_workers_are_what_the_campaign_records(cpus, tmp_path, cache_dir, monkeypatch):
    """Through run_campaign: config.json (which the runs read) and campaign.json hold the
    fitted value."""
    import json
    from conftest import quick_settings
    from submission.config import parse_overrides
    cpus["count"] = 1
    settings = [s for s in quick_settings(tmp_path / "results", cache_dir, runs=1, seeds="1")
                if not s.startswith("workers_per_device=")]
    launched = []

    def fake_launch(config, args, progress=None):
        launched.append(json.loads(open(args[args.index("--config") + 1]).read()))
        return 1
    monkeypatch.setattr(campaign, "_launch", fake_launch)
    cfg = resolve(None, parse_overrides(settings))
    with pytest.raises(campaign.CampaignError, match="run 1 failed .* Fix the cause"):
        campaign.run_campaign(cfg)
    assert launched[0]["settings"]["workers_per_device"] == 1
    state = json.loads((campaign.system_dir(cfg) / "campaign.json").read_text())
    assert state["config"]["settings"]["workers_per_device"] == 1
