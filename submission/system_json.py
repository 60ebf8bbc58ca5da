"""The MLPerf system description of a run: one ruleset's vocabulary, gaps filled from the host.

`status` is written in the MLPerf Training 2.x vocabulary in systems/*.json. Rulesets
4.0.0 and later (mlperf_logging.system_desc_checker) only accept the availability
wording, so `for_ruleset` maps it:

    onprem   -> "Available on-premise"
    cloud    -> "Available cloud"
    preview  -> "Preview"
    research -> "Research, Development, or Internal (RDI)"

Rulesets before 4.0.0 keep onprem / cloud / preview / research (a description already
in the 4.x wording is mapped back). Numbers become strings: MLPerf descriptions are
all-string, and the official checker fails on a number in e.g. accelerators_per_node.

`run_description` is the description of what a configuration trains: the world
launched (nodes, accelerators per node, system name) over the descriptor's fields, with
the host facts it leaves empty read from this machine (a run's system.json, `describe`).

`fill_from_host` fills EMPTY fields ("" or None) that this machine can tell (processor,
memory, disk, software versions) and never overwrites a field that is set. Accelerator
fields come from inventory.described_here, and only for a descriptor that leaves them empty
(system=local): a CPU descriptor on a GPU machine must not name the GPU.
host_processor_core_count is the core count of ONE processor (the MLPerf convention:
host_processors_per_node says how many there are); host_processor_vcpu_count is the
node's total of logical CPUs.
"""
from __future__ import annotations

import copy
import importlib.metadata
import importlib.util
import platform
import runpy
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import inventory
from .config import Config
from .loader_kinds import recipe_loader_if_replaced
from .system_descriptor import STATUS_2X, STATUS_4X

REPO_ROOT = Path(__file__).resolve().parent.parent

SOFTWARE_PACKAGES = ("torchvision", "ffcv", "mlperf-logging", "numpy")


def _ruleset_version(ruleset: str) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in str(ruleset).split("."))
    except ValueError:
        raise ValueError(f"ruleset {ruleset!r} is not a version such as 2.0.0 or 4.0.0") from None


def uses_availability_status(ruleset: str) -> bool:
    """True when the ruleset wants the 4.x status wording ("Available cloud", ...)."""
    return _ruleset_version(ruleset) >= (4, 0, 0)


def _as_mlperf_value(value: Any) -> Any:
    if isinstance(value, bool) or value is None:
        return "" if value is None else str(value).lower()
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, (int, float)):
        return str(value)
    return value


def for_ruleset(description: dict, ruleset: str) -> dict:
    """The MLPerf fields of `description` (no "harness" block) with `status` in the
    vocabulary of `ruleset`. Raises ValueError for a status neither vocabulary knows."""
    fields = {key: _as_mlperf_value(value) for key, value in description.items() if key != "harness"}
    status = fields.get("status", "")
    short = status if status in STATUS_4X else STATUS_2X.get(status)
    if short is None:
        allowed = ", ".join(f"{short!r} ({long!r})" for short, long in STATUS_4X.items())
        raise ValueError(f"unknown system status {status!r}: use one of {allowed}")
    fields["status"] = STATUS_4X[short] if uses_availability_status(ruleset) else short
    return fields


def run_description(config: Config) -> dict:
    """The MLPerf system description of what trains under `config` (a resolved
    submission.config.Config): the world actually launched (nodes, accelerators per node,
    name), notes saying what ran, and the host facts the descriptor leaves empty read from
    this machine. It is what system.json records and `describe` prints."""
    descriptor = config.descriptor
    notes = run_notes(config)
    launched = {"system_name": config.system_name, "number_of_nodes": str(config.num_nodes),
                "accelerators_per_node": str(config.accelerators_per_node),
                "sw_notes": f"{descriptor.sw_notes}; {notes}" if descriptor.sw_notes else notes}
    if config.accelerators_per_node == 0:
        launched.update({key: "" for key in (
            "accelerator_model_name", "accelerator_memory_capacity", "accelerator_frequency",
            "accelerator_host_interconnect", "accelerator_interconnect")})
    return fill_from_host(descriptor.replaced(**launched).to_json())


def run_notes(config: Config) -> str:
    """What ran, in words: recipe and methods, data, device, processes, batch, precision, and a
    loader other than the recipe's."""
    data = ("ImageNet" if config.dataset == "imagenet" else
            "Fashion-MNIST, scaled down (submission/embedded.yaml); not an ImageNet result")
    precision = f"amp ({config.amp_dtype})" if config.precision == "amp" else config.precision
    published_loader = recipe_loader_if_replaced(config)
    loader = (f"; train_loader {config.train_loader} (the recipe's: {published_loader.word})"
              if published_loader is not None else "")
    return (f"{config.recipe} recipe ({', '.join(config.methods) or 'no methods'}) on {data}; "
            f"{config.device_type}, {config.world_size} process(es), global batch "
            f"{config.global_batch_size}, precision {precision}{loader}")


# ---- host probes: each returns a value or raises; a failure leaves the field empty --
def _cores_per_processor() -> str:
    import psutil
    cores = psutil.cpu_count(logical=False)
    if not cores:
        return ""
    return str(max(cores // inventory.sockets(), 1))


def _vcpus() -> str:
    import psutil
    return str(psutil.cpu_count() or "")


def _frequency() -> str:
    import psutil
    freq = psutil.cpu_freq()
    return f"{freq.max:.0f} MHz" if freq and freq.max else ""


def _gib(num_bytes: float) -> str:
    return f"{round(num_bytes / 2**30)} GiB"


def _memory() -> str:
    import psutil
    return _gib(psutil.virtual_memory().total)


def _storage() -> str:
    import psutil
    return _gib(psutil.disk_usage(str(REPO_ROOT)).total)


def _framework() -> str:
    return f"PyTorch {_torch_version()}"


def _torch_version() -> str:
    """torch.__version__ (with its build, e.g. 2.14.1+cu130, which the package metadata
    leaves out), read from torch/version.py alone: importing torch takes seconds on one CPU,
    and resolving a configuration needs nothing else of it."""
    if "torch" in sys.modules:
        return sys.modules["torch"].__version__
    spec = importlib.util.find_spec("torch")      # finds the package without importing it
    folder = spec.submodule_search_locations[0] if spec and spec.submodule_search_locations else None
    if folder is None or not (Path(folder) / "version.py").is_file():
        import torch
        return torch.__version__
    return runpy.run_path(str(Path(folder) / "version.py"))["__version__"]


def _operating_system() -> str:
    pretty = ""
    try:
        with open("/etc/os-release", encoding="utf-8") as f:
            for line in f:
                key, _, value = line.strip().partition("=")
                if key == "PRETTY_NAME":
                    pretty = value.strip().strip('"')
    except OSError:
        pass
    kernel = f"{platform.system()} {platform.release()}".strip()
    return ", ".join(part for part in (pretty, f"kernel {kernel}" if pretty else kernel) if part)


def _software() -> str:
    parts = [f"Python {platform.python_version()}"]
    for package in SOFTWARE_PACKAGES:
        try:
            parts.append(f"{package} {importlib.metadata.version(package)}")
        except importlib.metadata.PackageNotFoundError:
            continue
    if inventory.no_gpu_driver():
        return ", ".join(parts)
    try:
        import torch
        if torch.cuda.is_available() and (torch.version.cuda or torch.version.hip):
            parts.append(f"CUDA {torch.version.cuda}" if torch.version.cuda else f"ROCm {torch.version.hip}")
            if torch.backends.cudnn.is_available():
                parts.append(f"{'cuDNN' if torch.version.cuda else 'MIOpen'} {torch.backends.cudnn.version()}")
    except Exception:  # noqa: BLE001 - a broken torch must not stop the description
        pass
    return ", ".join(parts)


def _caches() -> str:
    """L1d 32K, L1i 64K, L2 512K, L3 8192K (per core or shared, as the kernel lists cpu0's)."""
    parts = []
    for index in sorted(Path("/sys/devices/system/cpu/cpu0/cache").glob("index*")):
        level, kind, size = ((index / name).read_text().strip() for name in ("level", "type", "size"))
        suffix = {"Data": "d", "Instruction": "i"}.get(kind, "")
        parts.append(f"L{level}{suffix} {size}")
    return ", ".join(parts)


def _storage_type() -> str:
    """SSD or HDD: the kernel's rotational flag of the disks (loop and zram devices aside)."""
    flags = {p.parent.parent.name: p.read_text().strip()
             for p in Path("/sys/block").glob("*/queue/rotational")
             if not p.parent.parent.name.startswith(("loop", "zram", "ram"))}
    kinds = sorted({"HDD" if flag == "1" else "SSD" for flag in flags.values()})
    return " + ".join(kinds)


PROBES: dict[str, Callable[[], Any]] = {
    "host_processor_model_name": inventory.processor_model,
    "host_processors_per_node": lambda: str(inventory.sockets()),
    "host_processor_core_count": _cores_per_processor,
    "host_processor_vcpu_count": _vcpus,
    "host_processor_frequency": _frequency,
    "host_memory_capacity": _memory,
    "host_storage_capacity": _storage,
    "host_storage_type": _storage_type,
    "host_processor_caches": _caches,
    "framework": _framework,
    "operating_system": _operating_system,
    "other_software_stack": _software,
}


def _empty(value: Any) -> bool:
    return value is None or value == ""


def fill_from_host(description: dict) -> dict:
    """A copy of `description` whose empty fields are read from this machine where it can
    tell; set fields are kept as they are, and a probe that fails leaves its field empty."""
    filled = copy.deepcopy(description)
    for field, probe in PROBES.items():
        if field in filled and not _empty(filled[field]):
            continue
        try:
            value = probe()
        except Exception:  # noqa: BLE001 - any probe may fail on an odd machine
            value = ""
        if not _empty(value):
            filled[field] = value
    return filled


__all__ = ["STATUS_4X", "for_ruleset", "fill_from_host", "run_description", "uses_availability_status"]

if __name__ == "__main__":  # a quick look at what this machine reports
    import json
    print(json.dumps(fill_from_host({field: "" for field in PROBES}), indent=2))
