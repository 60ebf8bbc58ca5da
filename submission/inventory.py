"""What accelerators this machine has, and whether a system descriptor describes it.

`gpus()` lists the GPUs this process can use (CUDA_VISIBLE_DEVICES respected), read
through torch.cuda, with nvidia-smi's extra facts (clocks, links) where it is installed.
Tests replace `probe` with a fake inventory: `monkeypatch.setattr(inventory, "probe", ...)`.

`system=local` describes the machine from this inventory; a named descriptor (p4d, ...)
describes fixed hardware, and `mismatch` says how this machine differs from it.
"""
from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass


@dataclass(frozen=True)
class GPU:
    name: str                 # as the driver reports it: "NVIDIA A100-SXM4-40GB"
    memory_bytes: int
    max_clock_mhz: str = ""   # nvidia-smi clocks.max.sm, where available
    pcie: str = ""            # "PCIe Gen4 x16", where available
    nvlink: bool = False      # nvidia-smi topo -m shows NV# links between GPUs

    @property
    def family(self) -> str:
        """A100, V100, H100, ... (the first token with a letter followed by digits)."""
        for token in re.split(r"[\s\-_]+", self.name.replace("NVIDIA", "").replace("Tesla", "")):
            if re.fullmatch(r"[A-Za-z]+\d+[A-Za-z]*", token):
                return token.upper()
        return self.name.strip()

    @property
    def memory_gb(self) -> int:
        """The marketed size: the "80GB" in the name, else the memory rounded to GB."""
        found = re.search(r"(\d+)\s*GB", self.name, re.IGNORECASE)
        return int(found.group(1)) if found else round(self.memory_bytes / 1e9)


def _nvidia_smi(*args: str) -> str:
    if not shutil.which("nvidia-smi"):
        return ""
    try:
        done = subprocess.run(["nvidia-smi", *args], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout if done.returncode == 0 else ""


def _torch_probe() -> list[GPU]:
    import torch
    if not torch.cuda.is_available():
        return []
    rows = _nvidia_smi("--query-gpu=clocks.max.sm,pcie.link.gen.max,pcie.link.width.max",
                       "--format=csv,noheader,nounits").strip().splitlines()
    nvlink = bool(re.search(r"\bNV\d+\b", _nvidia_smi("topo", "-m")))
    found = []
    for index in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(index)
        clock = pcie = ""
        # nvidia-smi lists every GPU, torch only the visible ones: use its rows only when
        # nothing is hidden
        if len(rows) == torch.cuda.device_count():
            parts = [p.strip() for p in rows[index].split(",")]
            if len(parts) == 3:
                clock = f"{parts[0]} MHz (max SM clock)" if parts[0].isdigit() else ""
                pcie = f"PCIe Gen{parts[1]} x{parts[2]}" if parts[1].isdigit() else ""
        found.append(GPU(props.name, props.total_memory, clock, pcie, nvlink))
    return found


probe = _torch_probe


def gpus() -> list[GPU]:
    return list(probe())


def local_system_name(found: list[GPU], vcpus: int) -> str:
    """local_1xH100-80GB, local_8xA100-40GB, local_cpu_2c: machines never share a folder."""
    if not found:
        return f"local_cpu_{vcpus}c"
    kinds = sorted({f"{g.family}-{g.memory_gb}GB" for g in found})
    return f"local_{len(found)}x{'+'.join(kinds)}"


def accelerator_fields(found: list[GPU]) -> dict[str, str]:
    """The MLPerf accelerator fields of these GPUs (empty strings without GPUs)."""
    if not found:
        return {"accelerators_per_node": "0", "accelerator_model_name": "",
                "accelerator_memory_capacity": "", "accelerator_frequency": "",
                "accelerator_host_interconnect": "", "accelerator_interconnect": ""}
    first = found[0]
    names = sorted({g.name for g in found})
    return {
        "accelerators_per_node": str(len(found)),
        "accelerator_model_name": " + ".join(names),
        "accelerator_memory_capacity": f"{first.memory_gb} GB",
        "accelerator_frequency": first.max_clock_mhz,
        "accelerator_host_interconnect": first.pcie,
        "accelerator_interconnect": ("NVLink (nvidia-smi topo -m)" if first.nvlink
                                     else "PCIe" if len(found) > 1 else ""),
    }


def mismatch(description: dict, found: list[GPU]) -> list[str]:
    """How this machine differs from a descriptor's fixed accelerators ([] when it matches)."""
    wanted = int(description.get("accelerators_per_node") or 0)
    if wanted == 0:
        return []
    model = str(description.get("accelerator_model_name", ""))
    expected = GPU(model, 0)
    capacity = re.search(r"(\d+)", str(description.get("accelerator_memory_capacity", "")))
    problems = []
    if len(found) != wanted:
        problems.append(f"it describes {wanted} GPU(s) per node, this machine has {len(found)} visible")
    kinds = sorted({f"{g.name} ({g.memory_gb} GB)" for g in found})
    if found and any(g.family != expected.family for g in found):
        problems.append(f"it describes {model}, this machine has {', '.join(kinds)}")
    elif found and capacity and any(g.memory_gb != int(capacity.group(1)) for g in found):
        problems.append(f"it describes {model} with {capacity.group(1)} GB, this machine has "
                        f"{', '.join(kinds)}")
    return problems
