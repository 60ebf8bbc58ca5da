"""submission.system_descriptor on system=local: the machine described from the GPUs found (a
faked inventory: no GPU here), the embedded campaign without data, and unlike GPUs refused."""
from __future__ import annotations

import pytest

from conftest import A100_40, A100_80, A100_PCIE, H100, T4
from submission import preflight
from submission.config import ConfigError, resolve
from submission.system_json import run_description


def test_local_describes_the_gpus_found_and_runs_one_process_each(gpus):
    gpus.extend([H100])
    cfg = resolve("local", {"data_dir": "/data/imagenet"})
    assert cfg.system_name == "local_1xH100-80GB"
    assert (cfg.device_type, cfg.processes_per_node, cfg.accelerators_per_node) == ("cuda", 1, 1)
    assert cfg.dataset == "imagenet" and cfg.global_batch_size == 256
    written = run_description(cfg)
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
    assert run_description(gpu)["accelerator_interconnect"].startswith("NVLink")
    assert "not an ImageNet result" in run_description(gpu)["sw_notes"]


def test_cpu_system_names_no_gpu_even_where_there_is_one(gpus):
    gpus.extend([H100])
    cfg = resolve("cpu", {})
    written = run_description(cfg)
    assert written["accelerators_per_node"] == "0" and written["accelerator_model_name"] == ""
    with pytest.raises(ConfigError, match="describes a machine without accelerators"):
        preflight.launch_plan(resolve("cpu", {"device": "cuda"})).approved()


@pytest.mark.parametrize("found, visible", [([A100_80, T4], "0"), ([A100_40, A100_PCIE, A100_40], "0,2")])
def test_a_machine_with_unlike_gpus_is_refused_with_the_ones_to_keep(gpus, found, visible):
    gpus.extend(found)
    with pytest.raises(ConfigError) as refused:
        resolve("local", {"data_dir": "/data/imagenet"})
    assert "not all alike" in str(refused.value) and f"CUDA_VISIBLE_DEVICES={visible}" in str(refused.value)
    assert f"1: {found[1].name}" in str(refused.value)
