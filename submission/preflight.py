"""What this machine can run, decided before anything is written.

Each check returns what it decided (problems in words, or a value to use) and leaves the
configuration it checks as it was. `launch_plan` gathers them: the configuration to
launch (workers_per_device derived from the CPUs where unset: loader_threads.py), what was changed,
every reason this machine cannot run it, and on several nodes the interface they meet over
(node_network: the variable to set for the processes the campaign launches). The campaign and the dry run launch
`plan.approved()`; bench asks `loader_workers` for its loader threads. `resolve_here`
resolves a configuration for this machine: the one place where system=local learns which
GPUs it has.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import inventory, node_network, page_cache, tracking
from .config import HARNESS_ORIGINS, Config, ConfigError, in_repository, resolve
from .loader_kinds import recipe_loader_if_replaced
from .loader_threads import LoaderThreads, loader_threads
from .private_folder import cache_dir_problems


@dataclass(frozen=True)
class LaunchPlan:
    """What preflight decided about one configuration."""
    config: Config                    # the configuration to launch (a new one when changed)
    notes: tuple[str, ...] = ()       # what was changed, to say before launching
    problems: tuple[str, ...] = ()    # why this machine cannot run it
    # variables for the processes the campaign launches (node_network: the nodes' interface)
    environment: dict[str, str] = field(default_factory=dict)

    def approved(self) -> Config:
        """The configuration to launch; a ConfigError naming every problem when there is one."""
        if self.problems:
            raise ConfigError("cannot start this campaign:\n  - " + "\n  - ".join(self.problems))
        return self.config


def resolve_here(system: str | None = None, overrides: dict[str, str] | None = None,
                 layers: tuple[tuple[str, dict[str, Any]], ...] = ()) -> Config:
    """config.resolve for a run on this machine: a descriptor that leaves its accelerators
    to the machine it runs on (system=local) takes this machine's GPUs, and its name from
    them; a named descriptor is used as written."""
    return resolve(system, overrides, layers, described=inventory.described_here)


def launch_plan(config: Config) -> LaunchPlan:
    """Fail before touching results/ when this machine cannot run the configuration, or
    when the descriptor would describe hardware other than what runs. An unset
    workers_per_device is derived from the CPUs, a preset's lowered to fit them (in the
    returned configuration, which config.json records, with where the count came from)."""
    problems = hardware_differences(config) + gpu_problems(config) + precision_problems(config)
    workers = loader_workers(config)
    notes: list[str] = []
    if workers.problem:
        problems.append(workers.problem)
    elif workers.threads != config.workers_per_device:
        config = config.replaced({"workers_per_device": workers.threads}, workers.origin)
        notes += [workers.note] if workers.note else []
    problems += data_dir_problems(config) + tracking.problems(config.trackers)
    problems += cache_dir_problems(in_repository(config.cache_dir), config.compile)
    problems += [p for p in [page_cache.problem(config.cache_clear_cmd)] if p]
    notes += recipe_changes(config)
    meeting = node_network.meeting(config)
    problems += [meeting.problem] if meeting.problem else []
    notes += [meeting.note] if meeting.note else []
    return LaunchPlan(config, tuple(notes), tuple(problems), meeting.environment)


def recipe_changes(config: Config) -> list[str]:
    """Published choices of the recipe that this launch changes, said once before it (the
    run's system description records them too: system_description.run_notes)."""
    published = recipe_loader_if_replaced(config)
    if published is None:
        return []
    return [f"train_loader={config.train_loader} ({config.origin('train_loader')}): the {config.recipe} "
            f"recipe's published loader is {published.word} (submission/recipes/{config.recipe}.yaml); "
            "the run's system description records the change"]


def data_dir_problems(config: Config) -> list[str]:
    """An ImageNet campaign needs a data_dir that is a folder on this machine."""
    if config.dataset != "imagenet":
        return []
    if not config.data_dir:
        return ["dataset=imagenet needs data_dir=FOLDER holding train/ and val/ "
                f"(systems/{config.system_id}.json sets none)."]
    if not Path(config.data_dir).is_dir():
        return [f"data_dir={config.data_dir} "
                + ("is a file, not a folder holding train/ and val/."
                   if Path(config.data_dir).exists() else "does not exist on this machine.")]
    return []


def hardware_differences(config: Config) -> list[str]:
    """How the world to launch differs from the descriptor's fixed hardware, or from this
    machine ([] when a log of this run would describe it truthfully)."""
    described = config.descriptor.accelerators
    local = config.system_id == "local"
    use_local = "use system=local, which describes this machine as it is"
    problems = []
    if config.device_type == "cuda" and described == 0:
        problems.append("device=cuda, but this machine has no GPU that torch can see "
                        f"({_why_no_gpu()}); drop device=cuda to train on the CPU"
                        if local else
                        f"device=cuda, but systems/{config.system_id}.json describes a machine "
                        f"without accelerators; {use_local}")
    if config.device_type == "cpu" and described > 0:
        problems.append(f"device=cpu, but systems/{config.system_id}.json describes "
                        f"{described} GPU(s) per node; "
                        + (("use system=cpu" + (f" dataset=imagenet data_dir={config.data_dir}"
                                                 if config.dataset == "imagenet" else "")
                            + ", which describes this machine's CPU and no GPU") if local else use_local))
    if config.device_type == "cuda" and described and config.processes_per_node != described:
        problems.append(f"procs_per_node={config.processes_per_node}, but systems/"
                        f"{config.system_id}.json describes {described} GPUs per node; to train "
                        "on fewer, hide the others with CUDA_VISIBLE_DEVICES"
                        + (f" (e.g. CUDA_VISIBLE_DEVICES={','.join(map(str, range(config.processes_per_node)))})"
                           if local else " and use system=local"))
    if (local and config.dataset == "imagenet" and config.device_type == "cpu"
            and not config.device):
        problems.append(f"no GPU that torch can see ({_why_no_gpu()}), so this campaign would "
                        f"train on {config.data_dir} on the CPU (on ImageNet: weeks): make the "
                        "GPUs visible, or pass device=cpu to train on the CPU all the same")
    if not problems:
        found = inventory.gpus() if config.device_type == "cuda" else []
        # what the file states, not the facts of this machine that fill its empty fields
        differences = inventory.mismatch(config.descriptor, found)
        if differences and not local:
            problems.append(f"systems/{config.system_id}.json does not describe this machine: "
                            + "; ".join(differences) + f"; {use_local}")
    return problems


def _why_no_gpu() -> str:
    import torch
    if not torch.version.cuda and not torch.version.hip:
        return f"this torch ({torch.__version__}) was built without CUDA"
    variable, tool = (("HIP_VISIBLE_DEVICES", "rocm-smi") if torch.version.hip
                      else ("CUDA_VISIBLE_DEVICES", "nvidia-smi"))
    visible = os.environ.get(variable)
    if visible is not None and not visible.strip():
        return f"{variable} is empty"
    return f"torch.cuda.is_available() is False: check the driver ({tool})" + (
        f" and {variable}={visible}" if visible else "")


def gpu_problems(config: Config) -> list[str]:
    """What the visible GPUs and this torch build cannot do for the configuration: bf16
    without bf16 tensor cores (compute capability below 8.0), several processes without
    NCCL (gloo on the CPU)."""
    bf16 = config.precision == "amp" and config.amp_dtype == "bf16"
    if not (bf16 and config.device_type == "cuda") and config.world_size == 1:
        return []       # nothing to ask torch (whose import takes seconds on one CPU)
    import torch
    import torch.distributed as dist
    problems = []
    # ROCm reports capabilities of its own (gfx versions): nothing is claimed there
    if bf16 and config.device_type == "cuda" and torch.version.hip is None and torch.cuda.is_available():
        older: dict[tuple[str, str], list[str]] = {}
        for index in range(torch.cuda.device_count()):
            major_minor = torch.cuda.get_device_capability(index)
            if major_minor < (8, 0):
                kind = (torch.cuda.get_device_name(index), f"{major_minor[0]}.{major_minor[1]}")
                older.setdefault(kind, []).append(str(index))
        for (name, capability), indices in older.items():
            problems.append(f"amp_dtype=bf16, but {name} (GPU {', '.join(indices)}) has compute "
                            f"capability {capability}: bf16 tensor cores need 8.0 (A100, H100) or "
                            "newer; use amp_dtype=fp16 (with a GradScaler, the published setting)")
    if config.world_size > 1:
        backend = "NCCL" if config.device_type == "cuda" else "gloo"
        available = dist.is_available() and (
            dist.is_nccl_available() if backend == "NCCL" else dist.is_gloo_available())
        if not available:
            one = ("one GPU (CUDA_VISIBLE_DEVICES=0 with system=local)" if backend == "NCCL"
                   else "procs_per_node=1")
            problems.append(
                f"{config.world_size} processes ({config.processes_per_node} per node x "
                f"{config.num_nodes} node(s)) on {config.device_type} talk through {backend}, "
                f"and this torch build ({torch.__version__}) has no {backend}: install a torch "
                f"build with {backend}, or train on {one}")
    return problems


def precision_problems(config: Config) -> list[str]:
    """Autocast on a CPU that would be slow: fp16 has no fast kernels on CPUs, and bf16 is
    emulated on a CPU without bf16 instructions. (On GPUs, gpu_problems.)"""
    if config.device_type != "cpu" or config.precision != "amp":
        return []
    bf16 = inventory.cpu_bf16()
    if config.amp_dtype == "fp16":
        instead = (f"or amp_dtype=bf16 (this CPU has {' and '.join(bf16)}; on the build machine of "
                   "docs/cpu-precision.md a bf16 step ran 2x fp32's rate at 88 px, the same at 32 px)"
                   if bf16 else
                   "(this CPU has no bf16 instructions, so amp_dtype=bf16 would be emulated too)")
        return [f"precision=amp amp_dtype=fp16 ({config.origin('amp_dtype')}) on the CPU: fp16 autocast "
                "has no fast kernels on CPUs (a ResNet-50 step ran 84x slower than in fp32, "
                f"docs/cpu-precision.md); pass precision=fp32, {instead}"]
    if not bf16:
        return [f"precision=amp amp_dtype=bf16 ({config.origin('amp_dtype')}) on a CPU without bf16 "
                f"instructions ({' or '.join(inventory.BF16_FLAGS)}): bf16 would be emulated, slower "
                "than fp32; pass precision=fp32"]
    return []


def loader_workers(config: Config) -> LoaderThreads:
    """Loader threads per process on this node's CPUs (loader_threads.loader_threads, with the
    CPUs this process may use): derived where workers_per_device is unset, a preset's value
    lowered to fit (with a note), a user's that does not fit refused with the value that fits."""
    from .inventory import usable_cpus, usable_cpus_source
    cpus = usable_cpus()
    origin = config.origin("workers_per_device")
    return loader_threads(config.workers_per_device, origin, origin in HARNESS_ORIGINS, config.device_type,
                          cpus, usable_cpus_source(cpus), config.processes_per_node)
