"""submission.system_descriptor: the typed record a descriptor is read into; resolve reads no
host; on system=local the machine described from the GPUs found where it runs (a faked
inventory: no GPU here), the embedded campaign without data, and unlike GPUs refused."""
from __future__ import annotations

import pytest

from submission import inventory, preflight, system_json
from submission.config import Config, ConfigError, resolve
from submission.preflight import resolve_here
from submission.system_descriptor import MLPERF_REQUIRED_FIELDS, SystemDescriptor, load_descriptor
from submission.system_json import run_description

from conftest import A100_40, A100_80, A100_PCIE, H100, T4


def test_local_describes_the_gpus_found_and_runs_one_process_each(gpus):
    gpus.extend([H100])
    cfg = resolve_here("local", {"data_dir": "/data/imagenet"})
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
    cpu = resolve_here("local", {})
    assert cpu.system_name.startswith("local_cpu_") and cpu.device_type == "cpu"
    assert cpu.dataset == "fashion-mnist" and cpu.target_accuracy == 0.65
    gpus.extend([A100_40] * 8)
    gpu = resolve_here("local", {})
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
        resolve_here("local", {"data_dir": "/data/imagenet"})
    assert "not all alike" in str(refused.value) and f"CUDA_VISIBLE_DEVICES={visible}" in str(refused.value)
    assert f"1: {found[1].name}" in str(refused.value)


def test_a_descriptor_is_read_into_typed_figures_and_written_back_in_the_checkers_order():
    p4d = load_descriptor("p4d")
    assert (p4d.system_name, p4d.number_of_nodes, p4d.accelerators_per_node) == ("aws_p4d.24xlarge", 1, 8)
    assert (p4d.accelerator_memory_gb, p4d.host_vcpus, p4d.host_processor_core_count) == (40, 96, 24)
    assert p4d.price_usd_per_hour > 0 and "harness" not in p4d.to_json()
    assert tuple(p4d.to_json()) == MLPERF_REQUIRED_FIELDS
    assert SystemDescriptor.from_json(p4d.to_json()) == SystemDescriptor(p4d.fields)
    local = load_descriptor("local")
    assert local.of_this_machine and local.accelerators_per_node is None and local.accelerators == 0
    numbers = SystemDescriptor({"number_of_nodes": 2, "accelerators_per_node": 4.0, "host_processor_vcpu_count": "x"})
    assert (numbers.number_of_nodes, numbers.accelerators_per_node, numbers.host_vcpus) == (2, 4, None)


def test_resolving_reads_no_host_and_the_run_description_fills_it(gpus, monkeypatch):
    def probed(*_):
        raise AssertionError("resolve probed the host")
    with monkeypatch.context() as blocked:
        for name in ("probe", "host", "processor_model", "sockets"):
            blocked.setattr(inventory, name, probed)
        blocked.setattr(system_json, "PROBES", {field: probed for field in system_json.PROBES})
        local = resolve("local", {})
        assert local.descriptor == SystemDescriptor(load_descriptor("local").fields)
        assert resolve("p4d", {}).descriptor.host_processor_model_name == "Intel Xeon Platinum 8275CL"
    gpus.extend([H100])
    here = resolve_here("local", {})
    assert here.system_name == "local_1xH100-80GB" and not here.descriptor.host_processor_model_name
    assert system_json.run_description(here)["host_processor_model_name"]
    assert Config.from_dict(here.to_dict()).descriptor == here.descriptor
