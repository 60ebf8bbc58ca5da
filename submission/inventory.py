"""What accelerators this machine has, and whether a system descriptor describes it.

`gpus()` lists the GPUs this process can use (CUDA_VISIBLE_DEVICES respected), read
through torch.cuda, with nvidia-smi's extra facts (clocks, links), matched to torch's
devices by UUID, where it is installed. `host()` gives the host facts a named descriptor
states (vCPUs, memory); `usable_cpus()` the CPUs this process may use (affinity, cgroup CPU quota), and `cpu_threads`
torch's threads for each process of a CPU run from them. Tests replace `probe` and `host` with a fake machine:
`monkeypatch.setattr(inventory, "probe", ...)`.

`system=local` describes the machine from this inventory; a named descriptor (p4d, ...)
describes fixed hardware, and `mismatch` says how this machine differs from it.
"""
from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .errors import ConfigError
from .system_descriptor import SystemDescriptor

if TYPE_CHECKING:       # for the annotations only: torch is imported where a rank asks
    import torch

    from .config import Config

# Words of a GPU's name that say who made it or which product line, not which GPU it is
_BRANDS = {"NVIDIA", "TESLA", "GEFORCE", "QUADRO", "AMD", "INSTINCT", "RADEON"}


# A GPU's memory as a descriptor states it, against this machine's: an H200 is sold as 141 GB
# and its driver reports 140 GiB (143,771 MiB), with no size in its name
GPU_MEMORY_MARGIN = 0.02


def _model_words(name: str) -> list[str]:
    """The words of a GPU's name without the maker's: "NVIDIA A100-SXM4-40GB" -> A100, SXM4, 40GB."""
    return [word for word in re.split(r"[\s\-_]+", name) if word and word.upper() not in _BRANDS]


@dataclass(frozen=True)
class GPU:
    name: str                 # as the driver reports it: "NVIDIA A100-SXM4-40GB"
    memory_bytes: int
    max_clock_mhz: str = ""   # nvidia-smi clocks.max.sm, where available
    pcie: str = ""            # "PCIe Gen4 x16", where available
    # NVLink to every other visible GPU (nvidia-smi topo -m); None: not known
    nvlink: bool | None = None

    @property
    def mig_profile(self) -> str:
        """"1g.5gb" for a MIG slice ("NVIDIA A100-SXM4-40GB MIG 1g.5gb"), else ""."""
        found = re.search(r"\bMIG\s+(\S+)", self.name)
        return found.group(1) if found else ""

    @property
    def family(self) -> str:
        """A100, V100, H100, L4, MI250X, RTX4090, GTX1080Ti: the model without the maker's
        words, usable in a folder name."""
        tokens = _model_words(re.sub(r"\bMIG\s+\S+", "", self.name))
        for token in tokens:
            if re.fullmatch(r"[A-Za-z]+\d+[A-Za-z]*", token):
                return token.upper()
        return re.sub(r"[^A-Za-z0-9.]", "", "".join(tokens[:3])) or "GPU"

    @property
    def memory_gb(self) -> int:
        """The marketed size: the "80GB" of the name where it agrees with the memory torch
        reports (within 15%: a GH200's "480GB" is its CPU's), else that memory in GiB; a MIG
        slice's own memory, never the whole GPU's of its name."""
        measured = self.memory_bytes / 2**30
        named = re.search(r"(\d+)\s*GB", self.name, re.IGNORECASE)
        if named and not self.mig_profile and abs(int(named.group(1)) - measured) <= 0.15 * measured:
            return int(named.group(1))
        return round(measured)

    @property
    def memory_label(self) -> str:
        """"80 GB" as named, or "22 GiB" as measured."""
        named = str(self.memory_gb) in re.findall(r"(\d+)\s*GB", self.name, re.IGNORECASE)
        return f"{self.memory_gb} GB" if named and not self.mig_profile else f"{self.memory_gb} GiB"

    @property
    def kind(self) -> str:
        """H100-80GB, A100-MIG-1g.5gb: the part of a system name that says which GPU."""
        return f"{self.family}-MIG-{self.mig_profile}" if self.mig_profile else f"{self.family}-{self.memory_gb}GB"


def _nvidia_smi(*args: str) -> str:
    if not shutil.which("nvidia-smi"):
        return ""
    try:
        done = subprocess.run(["nvidia-smi", *args], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout if done.returncode == 0 else ""


def _smi_rows() -> dict[str, dict[str, str]]:
    """nvidia-smi's facts per GPU UUID (without the "GPU-" prefix): index, clock, PCIe."""
    rows = {}
    listing = _nvidia_smi("--query-gpu=index,uuid,clocks.max.sm,pcie.link.gen.max,pcie.link.width.max",
                          "--format=csv,noheader,nounits")
    for line in listing.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 5:
            index, uuid, clock, gen, width = parts
            rows[uuid.removeprefix("GPU-").lower()] = {
                "index": index,
                "clock": f"{clock} MHz (max SM clock)" if clock.isdigit() else "",
                "pcie": f"PCIe Gen{gen} x{width}" if gen.isdigit() and width.isdigit() else ""}
    return rows


def nvlinked(topology: str, indices: list[str]) -> bool | None:
    """Whether `nvidia-smi topo -m` shows an NV# link between every two of these GPUs
    (nvidia-smi's indices); None when the matrix does not cover them."""
    lines = [line.split() for line in topology.splitlines() if line.strip()]
    if not lines:
        return None
    header = [cell for cell in lines[0] if cell.startswith("GPU")]
    matrix = {row[0]: dict(zip(header, row[1:])) for row in lines[1:] if row and row[0] in header}
    names = [f"GPU{i}" for i in indices]
    if any(name not in matrix for name in names):
        return None
    return all(re.fullmatch(r"NV\d+", matrix[a].get(b, "")) for a in names for b in names if a != b)


# what NVIDIA's driver (its /proc entry; in a container often only its device nodes) or ROCm's
# (the KFD device) leaves on a machine where torch could find a GPU
GPU_DRIVER_PATHS = ("/proc/driver/nvidia", "/dev/nvidiactl", "/dev/kfd")


def no_gpu_driver() -> bool:
    """Neither NVIDIA's driver nor ROCm's is loaded: torch can see no GPU here."""
    return not any(os.path.exists(path) for path in GPU_DRIVER_PATHS)


def _torch_probe() -> list[GPU]:
    if no_gpu_driver():     # torch's import alone takes seconds on one CPU
        return []
    import torch
    if not torch.cuda.is_available():
        return []
    smi = _smi_rows()
    visible = [torch.cuda.get_device_properties(device) for device in range(torch.cuda.device_count())]
    rows = [smi.get(str(getattr(props, "uuid", "")).lower(), {}) for props in visible]
    links = None
    if len(visible) > 1 and all(rows):
        links = nvlinked(_nvidia_smi("topo", "-m"), [row["index"] for row in rows])
    return [GPU(props.name, props.total_memory, row.get("clock", ""), row.get("pcie", ""), links)
            for props, row in zip(visible, rows)]


def _host_probe() -> tuple[int, int]:
    import psutil
    return psutil.cpu_count() or 1, psutil.virtual_memory().total


def _cpuinfo() -> list[tuple[str, str]]:
    """/proc/cpuinfo's (key, value) lines; OSError where there is none."""
    pairs = []
    with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
        for line in f:
            key, sep, value = line.partition(":")
            if sep:
                pairs.append((key.strip(), value.strip()))
    return pairs


def processor_model() -> str:
    try:
        for key, value in _cpuinfo():
            if key == "model name" and value:
                return value
    except OSError:
        pass
    return platform.processor()


def sockets() -> int:
    try:
        ids = {value for key, value in _cpuinfo() if key == "physical id"}
    except OSError:
        ids = set()
    return len(ids) or 1


def _cpu_flags() -> set[str]:
    """The first processor's flags in /proc/cpuinfo (empty where there is none)."""
    try:
        return set(next((value for key, value in _cpuinfo() if key == "flags"), "").split())
    except OSError:
        return set()


BF16_FLAGS = ("avx512_bf16", "amx_bf16")


def _cpu_bf16() -> list[str]:
    """The bf16 instruction sets this CPU has (x86: AVX-512 BF16, AMX), [] when none."""
    flags = _cpu_flags()
    return [flag for flag in BF16_FLAGS if flag in flags]


probe = _torch_probe
host = _host_probe
cpu_bf16 = _cpu_bf16


def gpus() -> list[GPU]:
    return list(probe())


def mixed(found: list[GPU]) -> str:
    """Why these GPUs cannot be one system's accelerators ("" when they are all one kind):
    a campaign gives every process the same batch, and a description names one kind."""
    if len({(g.name, g.memory_bytes) for g in found}) <= 1:
        return ""
    listing = "; ".join(f"{i}: {g.name} ({g.memory_bytes / 2**30:.0f} GiB)" for i, g in enumerate(found))
    first = [str(i) for i, g in enumerate(found) if (g.name, g.memory_bytes) == (found[0].name, found[0].memory_bytes)]
    return (f"this machine's visible GPUs are not all alike ({listing}); one run trains the same "
            f"batch on every GPU and its description names one kind of GPU: make one kind visible, "
            f"e.g. CUDA_VISIBLE_DEVICES={','.join(first)}")


def rank_hardware(device: torch.device) -> tuple[str, str]:
    """(host, what this rank trains on): the GPU with its memory, or the host's processor."""
    import socket
    if device.type == "cuda":
        import torch
        props = torch.cuda.get_device_properties(device)
        return socket.gethostname(), f"{props.name}, {props.total_memory / 2**30:.0f} GiB"
    return socket.gethostname(), f"{processor_model()}, {host()[0]} vCPUs"


def unlike_ranks(seen: list[tuple[str, str]]) -> str:
    """Why these ranks' hardware (rank_hardware of each, in rank order) cannot be one run's
    description ("" when every rank trains on what rank 0 does): node 0 writes the
    description, from its own machine."""
    other = [(rank, host, what) for rank, (host, what) in enumerate(seen) if what != seen[0][1]]
    if not other:
        return ""
    listing = "; ".join(f"rank {rank} on {host}: {what}" for rank, host, what in other[:4])
    return (f"the nodes differ: rank 0 on {seen[0][0]} trains on {seen[0][1]}, but {listing}"
            f"{' ...' if len(other) > 4 else ''}; the run's description (node 0's) would not "
            "name what the others ran: run on nodes of one kind")


def local_system_name(found: list[GPU], vcpus: int) -> str:
    """local_1xH100-80GB, local_8xA100-40GB, local_cpu_2c: which GPUs, how many. Machines
    of one kind share it (an H100 PCIe and an H100 SXM are both H100-80GB): a campaign is
    not resumed on other hardware (campaign.load_campaign)."""
    if not found:
        return f"local_cpu_{vcpus}c"
    kinds = "_".join(sorted({g.kind for g in found}))
    return f"local_{len(found)}x{re.sub(r'[^A-Za-z0-9._-]', '-', kinds)}"     # a safe name (names.py)


def accelerator_fields(found: list[GPU]) -> dict[str, str]:
    """The MLPerf accelerator fields of these GPUs (empty strings without GPUs, and for
    what could not be read)."""
    if not found:
        return {"accelerators_per_node": "0", "accelerator_model_name": "",
                "accelerator_memory_capacity": "", "accelerator_frequency": "",
                "accelerator_host_interconnect": "", "accelerator_interconnect": ""}
    first = found[0]
    interconnect = ""
    if len(found) > 1 and first.nvlink is not None:
        interconnect = ("NVLink (nvidia-smi topo -m)" if first.nvlink
                        else "PCIe (nvidia-smi topo -m: no NVLink between them)")
    return {
        "accelerators_per_node": str(len(found)),
        "accelerator_model_name": " + ".join(sorted({g.name for g in found})),
        "accelerator_memory_capacity": first.memory_label,
        "accelerator_frequency": first.max_clock_mhz,
        "accelerator_host_interconnect": first.pcie,
        "accelerator_interconnect": interconnect,
    }


def same_model(a: str, b: str) -> bool:
    """The same GPU model, whatever the maker's words (older drivers name an
    "A100-SXM4-40GB" without "NVIDIA") and punctuation."""
    def squeeze(name: str) -> str:
        return re.sub(r"[^a-z0-9]", "", "".join(_model_words(name)).lower())
    return squeeze(a) == squeeze(b)


def stated_bytes(text: str) -> float | None:
    """"1152 GiB", "680 GB" -> bytes; None when the field does not state a size."""
    found = re.fullmatch(r"\s*([\d.]+)\s*(GiB|GB|TiB|TB)\s*", str(text), re.IGNORECASE)
    if not found:
        return None
    unit = {"gib": 2**30, "gb": 1e9, "tib": 2**40, "tb": 1e12}[found.group(2).lower()]
    return float(found.group(1)) * unit


def mismatch(descriptor: SystemDescriptor, found: list[GPU]) -> list[str]:
    """How this machine differs from a named descriptor's fixed hardware ([] when it
    matches): the GPUs (count, model as the driver names it, memory within GPU_MEMORY_MARGIN)
    and the host facts it states (vCPUs; memory from 15% below to 10% above: a machine shows
    a little less than it has, and clouds list GiB as "GB": 680 GB on an a2-highgpu-8g is
    680 GiB)."""
    problems = []
    vcpus, memory = host()
    if descriptor.host_vcpus is not None and descriptor.host_vcpus != vcpus:
        problems.append(f"it describes {descriptor.host_vcpus} vCPUs, this machine has {vcpus}")
    stated_memory = stated_bytes(descriptor.host_memory_capacity)
    if stated_memory and not 0.85 * stated_memory <= memory <= 1.10 * stated_memory:
        problems.append(f"it describes {descriptor.host_memory_capacity} of host memory, "
                        f"this machine has {memory / 2**30:.0f} GiB")
    wanted = descriptor.accelerators
    if wanted == 0:
        return problems
    model = descriptor.accelerator_model_name
    stated_gb = descriptor.accelerator_memory_gb
    if len(found) != wanted:
        problems.append(f"it describes {wanted} GPU(s) per node, this machine has {len(found)} visible")
    kinds = sorted({f"{g.name} ({g.memory_label})" for g in found})
    if found and any(not same_model(g.name, model) for g in found):
        problems.append(f"it describes {model}, this machine has {', '.join(kinds)}")
    elif found and stated_gb and any(abs(g.memory_gb - stated_gb) > GPU_MEMORY_MARGIN * stated_gb
                                     for g in found):
        problems.append(f"it describes {model} with {stated_gb} GB, this machine has "
                        f"{', '.join(kinds)}")
    return problems


def described_here(descriptor: SystemDescriptor) -> SystemDescriptor:
    """`descriptor` with the accelerators it leaves to this machine (system=local) read from
    this machine's GPUs, and its name too where it leaves that empty; a descriptor that states
    its accelerators is returned as it is. Host facts are filled where a description is
    written (system_json.fill_from_host)."""
    if not descriptor.of_this_machine:
        return descriptor
    found = gpus()
    problem = mixed(found)
    if problem:
        raise ConfigError(problem)
    updates = {key: value for key, value in accelerator_fields(found).items()
               if str(descriptor.fields.get(key) or "") == ""}
    if not descriptor.system_name:
        updates["system_name"] = local_system_name(found, host()[0])
    return descriptor.replaced(**updates)


# where a cgroup (v2) states this process's CPU quota: "QUOTA PERIOD" in microseconds, or "max"
CPU_QUOTA_FILE = "/sys/fs/cgroup/cpu.max"


def cpu_quota() -> float | None:
    """The CPUs a cgroup's CPU quota gives this process (1.5: 150 ms of CPU time every 100 ms),
    None where there is no quota or no cgroup v2 file to read."""
    try:
        with open(CPU_QUOTA_FILE) as limit:
            quota, period = limit.read().split()[:2]
        return None if quota == "max" else int(quota) / int(period)
    except (OSError, ValueError):
        return None


def affinity_cpus() -> int:
    """The CPUs this process may run on by its affinity (taskset, cgroup cpusets)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0)) or 1
    return os.cpu_count() or 1


def usable_cpus() -> int:
    """The CPUs this process may use: its affinity, and no more than whole CPUs of its cgroup's
    CPU quota (at least one), which may be fewer than the machine's."""
    quota = cpu_quota()
    affinity = affinity_cpus()
    return affinity if quota is None else max(1, min(affinity, int(quota)))


def usable_cpus_source(usable: int) -> str:
    """`usable` (usable_cpus) in words, with the cgroup's quota where it is what limits them:
    "16 usable CPUs", "4 usable CPUs (cgroup CPU quota 4.5 of 16 by affinity)"."""
    quota, affinity = cpu_quota(), affinity_cpus()
    if quota is not None and int(quota) < affinity:
        return f"{usable} usable CPUs (cgroup CPU quota {quota:g} of {affinity} by affinity)"
    return f"{usable} usable CPUs"


def one_cpu_to_run_on() -> bool:
    """One CPU to run on: by this process's affinity, or by a cgroup's CPU quota under two
    CPUs (usable_cpus; TBB counts that too: submission/__init__.py)."""
    return usable_cpus() == 1


def cpu_threads(config: Config) -> int:
    """torch's threads for each process of a CPU run: cpu_threads, or the usable cores
    shared out between the node's processes."""
    return config.cpu_threads or max(1, usable_cpus() // config.processes_per_node)
