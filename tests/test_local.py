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
