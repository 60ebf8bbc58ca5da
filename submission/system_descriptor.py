"""A system descriptor, systems/<name>.json: read, checked, and completed from this machine.

A descriptor holds the MLPerf system-description fields of one machine (hardware facts, which
the logs and system.json repeat), plus a `harness` block of settings for it (launch settings,
price). `load_descriptor` checks what the harness computes with and what an MLPerf checker would
refuse; `describe_machine` fills the fields a descriptor leaves empty from this machine (host
facts always; the accelerators and the name only for a descriptor that leaves them empty:
system=local).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from . import inventory
from .errors import ConfigError
from .system_json import STATUS_2X, STATUS_4X, fill_from_host

SYSTEMS_DIR = Path(__file__).resolve().parent.parent / "systems"

MLPERF_REQUIRED_FIELDS = (
    "submitter", "division", "status", "system_name", "number_of_nodes",
    "host_processors_per_node", "host_processor_model_name", "host_processor_core_count",
    "host_processor_vcpu_count", "host_processor_frequency", "host_processor_caches",
    "host_processor_interconnect", "host_memory_capacity", "host_storage_type",
    "host_storage_capacity", "host_networking", "host_networking_topology",
    "host_memory_configuration", "accelerators_per_node", "accelerator_model_name",
    "accelerator_host_interconnect", "accelerator_frequency", "accelerator_on-chip_memories",
    "accelerator_memory_configuration", "accelerator_memory_capacity",
    "accelerator_interconnect", "accelerator_interconnect_topology", "cooling", "hw_notes",
    "framework", "other_software_stack", "operating_system", "sw_notes",
)


def available_systems() -> list[str]:
    return sorted(p.stem for p in SYSTEMS_DIR.glob("*.json"))


def load_descriptor(system: str) -> dict[str, Any]:
    path = SYSTEMS_DIR / f"{system}.json"
    if not path.is_file():
        raise ConfigError(f"unknown system {system!r}: no {path}. "
                          f"Known systems: {', '.join(available_systems())}")
    try:
        descriptor = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path} is not valid JSON (line {exc.lineno}, column {exc.colno}: "
                          f"{exc.msg}): fix the file and run again") from None
    missing = [f for f in MLPERF_REQUIRED_FIELDS if f not in descriptor]
    if missing:
        raise ConfigError(f"{path} lacks MLPerf system-description fields: {', '.join(missing)}")
    problems = _descriptor_problems(descriptor)
    if problems:
        raise ConfigError(f"{path}: " + "; ".join(problems) + ". Fix the file and run again")
    return descriptor


def _descriptor_problems(descriptor: dict[str, Any]) -> list[str]:
    """The fields the harness computes with, or that a checker would refuse, checked."""
    problems = []
    if not isinstance(descriptor.get("harness", {}), dict):
        problems.append('"harness" must be an object of settings ({"key": value, ...})')
    if not _is_count(descriptor["number_of_nodes"], lowest=1):
        problems.append(f'"number_of_nodes" must be a whole number of at least 1, '
                        f'not {descriptor["number_of_nodes"]!r}')
    accelerators = descriptor["accelerators_per_node"]
    if accelerators != "" and not _is_count(accelerators, lowest=0):
        problems.append(f'"accelerators_per_node" must be a whole number, or empty to read it '
                        f"from this machine, not {accelerators!r}")
    if descriptor["status"] not in {**STATUS_4X, **STATUS_2X}:
        problems.append(f'"status" {descriptor["status"]!r} is not one of '
                        f"{', '.join(repr(s) for s in STATUS_4X)} (or the 4.x wording)")
    if descriptor["division"] not in ("open", "closed"):
        problems.append(f'"division" must be "open" or "closed", not {descriptor["division"]!r}')
    return problems


def _is_count(value: Any, lowest: int) -> bool:
    """A whole number >= lowest, as a JSON number or a string of digits."""
    if isinstance(value, bool):
        return False
    if isinstance(value, str):
        return value.strip().isascii() and value.strip().isdigit() and int(value) >= lowest
    return isinstance(value, int) and value >= lowest


def describe_machine(description: dict[str, Any]) -> dict[str, Any]:
    """The descriptor with its empty fields read from this machine: host facts always;
    accelerators and the system name too for a descriptor that leaves them empty
    (system=local)."""
    described = dict(description)
    if str(described.get("accelerators_per_node", "")) == "":
        found = inventory.gpus()
        problem = inventory.mixed(found)
        if problem:
            raise ConfigError(problem)
        described.update({k: v for k, v in inventory.accelerator_fields(found).items()
                          if described.get(k, "") == ""})
        if not described.get("system_name"):
            described["system_name"] = inventory.local_system_name(found, inventory.host()[0])
    return fill_from_host(described)
