"""system=local and honest descriptions, with a faked GPU inventory (no GPU here)."""
from __future__ import annotations

import pytest

from submission import campaign, inventory, preflight, runs
from submission.config import ConfigError, resolve
from submission.results import CampaignError, system_dir
from submission.system_description import run_description

H100 = inventory.GPU("NVIDIA H100 80GB HBM3", 85_520_000_000, "1980 MHz (max SM clock)",
                     "PCIe Gen5 x16", nvlink=False)
A100_40 = inventory.GPU("NVIDIA A100-SXM4-40GB", 42_298_000_000, "1410 MHz (max SM clock)",
                        "PCIe Gen4 x16", nvlink=True)
A100_80 = inventory.GPU("NVIDIA A100-SXM4-80GB", 85_100_000_000)


A100_PCIE = inventory.GPU("NVIDIA A100-PCIE-40GB", 42_298_000_000)
T4 = inventory.GPU("Tesla T4", 15_828_000_000)
P4D_HOST = (96, 1_121 * 2**30)     # a p4d.24xlarge's 1152 GiB, less what the kernel keeps


@pytest.fixture
def gpus(monkeypatch):
    """A faked machine: the GPUs the test adds, on a host with a p4d.24xlarge's CPUs and memory."""
    found: list[inventory.GPU] = []
    monkeypatch.setattr(inventory, "probe", lambda: list(found))
    monkeypatch.setattr(inventory, "host", lambda: P4D_HOST)
    return found


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


@pytest.mark.parametrize("found, overrides, message", [
    ([H100], {}, "describes 8 GPU(s) per node, this machine has 1 visible"),
    ([H100] * 8, {}, "describes NVIDIA A100-SXM4-40GB, this machine has NVIDIA H100"),
    ([A100_80] * 8, {}, "describes NVIDIA A100-SXM4-40GB, this machine has NVIDIA A100-SXM4-80GB (80 GB)"),
    ([A100_PCIE] * 8, {}, "describes NVIDIA A100-SXM4-40GB, this machine has NVIDIA A100-PCIE-40GB (40 GB)"),
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
    assert preflight.hardware_differences(cfg) == []


def test_cpu_system_names_no_gpu_even_where_there_is_one(gpus):
    gpus.extend([H100])
    cfg = resolve("cpu", {})
    written = run_description(cfg)
    assert written["accelerators_per_node"] == "0" and written["accelerator_model_name"] == ""
    with pytest.raises(ConfigError, match="describes a machine without accelerators"):
        preflight.launch_plan(resolve("cpu", {"device": "cuda"})).approved()


def test_the_logged_world_is_the_launched_one():
    cfg = resolve("cpu", {"procs_per_node": "2", "nodes": "2", "master_addr": "10.0.0.1"})
    written = run_description(cfg)
    assert written["number_of_nodes"] == "2" and written["accelerators_per_node"] == "0"
    assert written["system_name"] == cfg.system_name == "2xlocal_cpu"
    assert cfg.global_batch_size == 4 * 64


def test_device_cuda_on_a_local_machine_without_gpu_says_so(gpus):
    with pytest.raises(ConfigError, match="this machine has no GPU that torch can see"):
        preflight.launch_plan(resolve("local", {"device": "cuda", "workers_per_device": "1"})).approved()


@pytest.mark.parametrize("host, message", [
    ((2, 1_121 * 2**30), "it describes 96 vCPUs, this machine has 2"),
    ((96, 24 * 2**30), "it describes 1152 GiB of host memory, this machine has 24 GiB"),
])
def test_a_named_system_on_another_host_is_refused(gpus, monkeypatch, tmp_path, host, message):
    """The descriptor's host facts are what system.json will say: they must be this host's."""
    gpus.extend([A100_40] * 8)
    monkeypatch.setattr(inventory, "host", lambda: host)
    cfg = resolve("p4d", {"data_dir": str(tmp_path), "workers_per_device": "1"})
    assert any(message in problem for problem in preflight.hardware_differences(cfg))


@pytest.mark.parametrize("name, memory, family, memory_gb, kind", [
    ("NVIDIA GeForce RTX 4090", 25_393_692_672, "RTX4090", 24, "RTX4090-24GB"),
    ("NVIDIA RTX A6000", 51_041_271_808, "A6000", 48, "A6000-48GB"),
    ("NVIDIA L4", 23_580_639_232, "L4", 22, "L4-22GB"),
    ("NVIDIA H100 NVL", 100_485_349_376, "H100", 94, "H100-94GB"),
    ("NVIDIA H100 80GB HBM3", 85_520_000_000, "H100", 80, "H100-80GB"),
    ("Tesla V100-SXM2-16GB", 16_935_419_904, "V100", 16, "V100-16GB"),
    ("NVIDIA GeForce GTX 1080 Ti", 11_721_506_816, "GTX1080Ti", 11, "GTX1080Ti-11GB"),
    ("NVIDIA A100-SXM4-40GB MIG 1g.5gb", 5_100_000_000, "A100", 5, "A100-MIG-1g.5gb"),
    ("NVIDIA GH200 480GB", 102_005_473_280, "GH200", 95, "GH200-95GB"),
    ("AMD Instinct MI250X", 68_702_699_520, "MI250X", 64, "MI250X-64GB"),
])
def test_gpu_names_become_folder_safe_kinds_with_their_own_memory(name, memory, family, memory_gb, kind):
    gpu = inventory.GPU(name, memory)
    assert (gpu.family, gpu.memory_gb, gpu.kind) == (family, memory_gb, kind)
    assert gpu.memory_label == (f"{memory_gb} GB" if f"{memory_gb}GB" in name else f"{memory_gb} GiB")
    assert inventory.local_system_name([gpu], 16) == f"local_1x{kind}"


@pytest.mark.parametrize("found, visible", [([A100_80, T4], "0"), ([A100_40, A100_PCIE, A100_40], "0,2")])
def test_a_machine_with_unlike_gpus_is_refused_with_the_ones_to_keep(gpus, found, visible):
    gpus.extend(found)
    with pytest.raises(ConfigError) as refused:
        resolve("local", {"data_dir": "/data/imagenet"})
    assert "not all alike" in str(refused.value) and f"CUDA_VISIBLE_DEVICES={visible}" in str(refused.value)
    assert f"1: {found[1].name}" in str(refused.value)


def test_imagenet_on_a_local_machine_without_gpu_needs_device_cpu(gpus, tmp_path):
    cfg = resolve("local", {"data_dir": str(tmp_path), "workers_per_device": "1"})
    assert cfg.device_type == "cpu"
    with pytest.raises(ConfigError, match="would train on .* on the CPU \\(on ImageNet: weeks\\).*pass device=cpu"):
        preflight.launch_plan(cfg).approved()
    chosen = resolve("local", {"data_dir": str(tmp_path), "workers_per_device": "1", "device": "cpu",
                               "precision": "fp32"})
    preflight.launch_plan(chosen).approved()


def test_local_refusals_point_to_what_fits_not_back_to_local(gpus):
    gpus.extend([A100_40] * 8)
    with pytest.raises(ConfigError, match="use system=cpu, which describes this machine's CPU"):
        preflight.launch_plan(resolve("local", {"device": "cpu", "workers_per_device": "1"})).approved()
    with pytest.raises(ConfigError, match=r"CUDA_VISIBLE_DEVICES \(e.g. CUDA_VISIBLE_DEVICES=0,1,2,3\)"):
        preflight.launch_plan(resolve("local", {"procs_per_node": "4", "workers_per_device": "1"})).approved()


TOPOLOGY = """\
\tGPU0\tGPU1\tGPU2\tGPU3\tCPU Affinity
GPU0\t X \tNV12\tSYS\tNV12\t0-47
GPU1\tNV12\t X \tSYS\tNV12\t0-47
GPU2\tSYS\tSYS\t X \tSYS\t48-95
GPU3\tNV12\tNV12\tSYS\t X \t0-47
"""


def test_nvlink_is_claimed_only_between_the_visible_gpus_it_joins():
    assert inventory.nvlinked(TOPOLOGY, ["0", "1", "3"]) is True
    assert inventory.nvlinked(TOPOLOGY, ["0", "2"]) is False
    assert inventory.nvlinked(TOPOLOGY, ["0", "7"]) is None and inventory.nvlinked("", ["0", "1"]) is None


def test_an_interconnect_nobody_measured_is_left_empty():
    unknown = inventory.accelerator_fields([inventory.GPU("NVIDIA A100-SXM4-40GB", 42_298_000_000)] * 2)
    assert unknown["accelerator_interconnect"] == ""
    known = inventory.accelerator_fields([A100_40] * 2)
    assert known["accelerator_interconnect"] == "NVLink (nvidia-smi topo -m)"
    pcie = inventory.accelerator_fields([inventory.GPU("NVIDIA A100-PCIE-40GB", 1, nvlink=False)] * 2)
    assert pcie["accelerator_interconnect"].startswith("PCIe")


SMI_LISTING = """\
0, GPU-aaaa0000-0000-0000-0000-000000000000, 1410, 4, 16
1, GPU-bbbb1111-0000-0000-0000-000000000000, 1410, 4, 16
2, GPU-cccc2222-0000-0000-0000-000000000000, 1275, 3, 8
3, GPU-dddd3333-0000-0000-0000-000000000000, 1410, 4, 16
"""


def test_nvidia_smi_facts_follow_each_visible_gpu_by_uuid(monkeypatch):
    """torch numbers the visible GPUs its own way (CUDA_VISIBLE_DEVICES=3,0 makes GPU 3
    torch's device 0); nvidia-smi numbers all of them by bus: rows are matched by UUID."""
    import types
    import torch
    visible = [types.SimpleNamespace(name="NVIDIA A100-SXM4-40GB", total_memory=42_298_000_000, uuid=u)
               for u in ("dddd3333-0000-0000-0000-000000000000", "aaaa0000-0000-0000-0000-000000000000")]
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: len(visible))
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: visible[i])
    answers = {"--query-gpu": SMI_LISTING, "topo": TOPOLOGY}
    monkeypatch.setattr(inventory, "_nvidia_smi", lambda *args: answers[args[0].split("=")[0]])
    found = inventory._torch_probe()
    assert [g.pcie for g in found] == ["PCIe Gen4 x16", "PCIe Gen4 x16"]
    assert all(g.nvlink is True for g in found)           # GPU3 and GPU0: NV12
    visible[1].uuid = "cccc2222-0000-0000-0000-000000000000"
    found = inventory._torch_probe()
    assert found[1].pcie == "PCIe Gen3 x8" and found[1].max_clock_mhz.startswith("1275")
    assert all(g.nvlink is False for g in found)          # GPU3 and GPU2: SYS
    monkeypatch.setattr(inventory, "_nvidia_smi", lambda *args: "")   # no nvidia-smi
    assert [(g.pcie, g.nvlink) for g in inventory._torch_probe()] == [("", None), ("", None)]


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
    preflight.launch_plan(resolve("local", settings)).approved()                  # fp16: fine
    preflight.launch_plan(resolve("local", {**settings, "amp_dtype": "bf16",
                                            "precision": "fp32"})).approved()     # no autocast


def test_bf16_is_accepted_on_ampere_and_not_judged_on_rocm(gpus, cuda, tmp_path, monkeypatch):
    import torch
    gpus.append(A100_40)
    cuda.append(("NVIDIA A100-SXM4-40GB", (8, 0)))
    settings = {"data_dir": str(tmp_path), "workers_per_device": "1", "amp_dtype": "bf16"}
    preflight.launch_plan(resolve("local", settings)).approved()
    cuda[0] = ("AMD Instinct MI210", (9, 0))
    monkeypatch.setattr(torch.version, "hip", "6.2")
    monkeypatch.setattr(torch.cuda, "get_device_capability",
                        lambda i=0: pytest.fail("a ROCm capability is not a CUDA one"))
    preflight.launch_plan(resolve("local", settings)).approved()


def test_several_gpus_without_nccl_are_refused(gpus, tmp_path, monkeypatch):
    import torch.distributed
    monkeypatch.setattr(torch.distributed, "is_nccl_available", lambda: False)
    gpus.extend([A100_40] * 2)
    settings = {"data_dir": str(tmp_path), "workers_per_device": "1"}
    with pytest.raises(ConfigError) as refused:
        preflight.launch_plan(resolve("local", settings)).approved()
    assert ("2 processes (2 per node x 1 node(s)) on cuda talk through NCCL, and this torch "
            "build") in str(refused.value)
    assert "install a torch build with NCCL, or train on one GPU (CUDA_VISIBLE_DEVICES=0" in str(refused.value)
    gpus[:] = [A100_40]                       # one process needs no process group
    preflight.launch_plan(resolve("local", settings)).approved()


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
    plan = preflight.launch_plan(cfg)
    assert plan.approved() is cfg and not plan.notes
    assert cfg.workers_per_device == 2 and cfg.origin("workers_per_device") == "submission/embedded.yaml"
    cpus["count"] = 1                       # its preset is the harness's choice too
    plan = preflight.launch_plan(cfg)
    fitted = plan.approved()
    assert fitted.workers_per_device == 1 and fitted.origin("workers_per_device").startswith("derived: 1 usable")
    assert plan.notes == ("workers_per_device=1: 1 usable CPUs / 1 process(es) (was 2)",)
    # the check decides; the configuration it checked is left as it was
    assert cfg.workers_per_device == 2 and cfg.origin("workers_per_device") == "submission/embedded.yaml"
    assert preflight.loader_workers(cfg) == preflight.WorkersDecision(
        1, note=plan.notes[0], origin="derived: 1 usable CPUs / 1 process(es)")


def test_the_fitted_loader_workers_are_what_the_campaign_records(cpus, tmp_path, cache_dir, monkeypatch):
    """Through run_campaign: config.json (which the runs read) and campaign.json hold the
    fitted value. The run is told where to write its progress records, beside its transcript."""
    import json
    from conftest import quick_settings
    from submission.config import parse_overrides
    cpus["count"] = 1
    settings = [s for s in quick_settings(tmp_path / "results", cache_dir, runs=1, seeds="1")
                if not s.startswith("workers_per_device=")]
    launched, outputs = [], []

    def fake_launch(config, args, progress=None):
        launched.append(json.loads(open(args[args.index("--config") + 1]).read()))
        outputs.append((args[args.index("--progress") + 1], progress))
        return 1
    monkeypatch.setattr(runs, "launch", fake_launch)
    cfg = resolve(None, parse_overrides(settings))
    with pytest.raises(CampaignError, match="run 1 failed .* Fix the cause"):
        campaign.run_campaign(cfg)
    assert launched[0]["settings"]["workers_per_device"] == 1
    state = json.loads((system_dir(cfg) / "campaign.json").read_text())
    assert state["config"]["settings"]["workers_per_device"] == 1
    progress = system_dir(cfg) / "progress"
    assert outputs == [(str(progress / "run_0.jsonl"), progress / "run_0.log")]


def test_a_descriptor_is_matched_by_model_whatever_the_makers_words_and_gib_as_gb(gpus, monkeypatch, tmp_path):
    """Older drivers name an A100 without "NVIDIA"; GCP lists an a2-highgpu-8g's 680 GiB
    as "680 GB", and Linux shows about 98% of it."""
    gpus.extend([inventory.GPU("A100-SXM4-40GB", 42_298_000_000)] * 8)
    monkeypatch.setattr(inventory, "host", lambda: (96, 666 * 2**30))
    cfg = resolve("a2", {"data_dir": str(tmp_path), "workers_per_device": "1"})
    assert preflight.hardware_differences(cfg) == []


def test_ranks_on_unlike_nodes_are_named_before_a_run_describes_only_node_0():
    import torch
    here = inventory.rank_hardware(torch.device("cpu"))
    assert inventory.unlike_ranks([here, here]) == ""
    seen = [("node-a", "NVIDIA A100-SXM4-80GB, 79 GiB")] * 8 + [("node-b", "NVIDIA A100-SXM4-40GB, 40 GiB")] * 8
    problem = inventory.unlike_ranks(seen)
    assert problem.startswith("the nodes differ: rank 0 on node-a trains on NVIDIA A100-SXM4-80GB, 79 GiB, "
                              "but rank 8 on node-b: NVIDIA A100-SXM4-40GB, 40 GiB")
    assert "rank 12" not in problem and problem.count("rank ") == 5 and " ..." in problem
