"""submission.inventory: what a GPU's name and memory make of its kind and folder name,
the links nvidia-smi reports between the visible GPUs, and ranks on unlike nodes."""
from __future__ import annotations

import pytest

from submission import inventory

from conftest import A100_40


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
    monkeypatch.setattr(inventory, "no_gpu_driver", lambda: False)
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
    monkeypatch.setattr(inventory, "no_gpu_driver", lambda: True)     # torch is not asked
    assert inventory._torch_probe() == []


def test_ranks_on_unlike_nodes_are_named_before_a_run_describes_only_node_0():
    import torch
    here = inventory.rank_hardware(torch.device("cpu"))
    assert inventory.unlike_ranks([here, here]) == ""
    seen = [("node-a", "NVIDIA A100-SXM4-80GB, 79 GiB")] * 8 + [("node-b", "NVIDIA A100-SXM4-40GB, 40 GiB")] * 8
    problem = inventory.unlike_ranks(seen)
    assert problem.startswith("the nodes differ: rank 0 on node-a trains on NVIDIA A100-SXM4-80GB, 79 GiB, "
                              "but rank 8 on node-b: NVIDIA A100-SXM4-40GB, 40 GiB")
    assert "rank 12" not in problem and problem.count("rank ") == 5 and " ..." in problem
