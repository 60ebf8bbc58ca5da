"""A system descriptor, systems/<name>.json, as one typed record: `SystemDescriptor`.

A descriptor holds the MLPerf system-description fields of one machine (hardware facts, which
the logs and system.json repeat), plus a `harness` block of settings for it (launch settings,
price). `load_descriptor` is its one reader: it checks what the harness computes with and what an MLPerf
checker would refuse, and parses the figures the harness computes with once (accelerators per
node, nodes, vCPUs, accelerator memory). `fields` keeps the MLPerf fields in the file's order,
as a checker wants them; `to_json`/`from_json` are the record as config.json and system.json
hold it (no harness block).

Reading is pure: a field left empty stays empty here. The accelerators of a descriptor that
leaves them empty (system=local) are read from this machine by `inventory.described_here`,
and host facts by `system_json.fill_from_host`, where a description of this machine is
written or checked.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import ConfigError

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

# `status` in the MLPerf Training 2.x vocabulary (as systems/*.json write it) and in the
# availability wording of rulesets 4.0.0 and later (system_json.for_ruleset maps them)
STATUS_4X = {
    "onprem": "Available on-premise",
    "cloud": "Available cloud",
    "preview": "Preview",
    "research": "Research, Development, or Internal (RDI)",
}
STATUS_2X = {long: short for short, long in STATUS_4X.items()}


def _count(value: Any) -> int | None:
    """A whole number written as a JSON number or a string of digits; None otherwise."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    text = str(value or "").strip()
    return int(text) if text.isascii() and text.isdigit() else None


def _text(value: Any) -> str:
    return "" if value is None else str(value)


@dataclass(frozen=True)
class SystemDescriptor:
    """One machine's MLPerf system description and the harness's settings for it. Built from
    `fields` and `harness`; the typed figures below are parsed from `fields` once, here."""
    fields: dict[str, Any]                          # MLPerf fields, in order, no harness block
    harness: dict[str, Any] = field(default_factory=dict)   # settings for this system (launch, price)
    # parsed from `fields`:
    system_name: str = field(init=False)
    division: str = field(init=False)
    status: str = field(init=False)
    number_of_nodes: int = field(init=False)        # 1 where the field states no count
    accelerators_per_node: int | None = field(init=False)   # None: left to this machine (system=local)
    accelerator_model_name: str = field(init=False)
    accelerator_memory_gb: int | None = field(init=False)   # the number in accelerator_memory_capacity
    host_processor_model_name: str = field(init=False)
    host_processors_per_node: int | None = field(init=False)
    host_processor_core_count: int | None = field(init=False)   # of one processor
    host_vcpus: int | None = field(init=False)      # host_processor_vcpu_count: the node's logical CPUs
    host_memory_capacity: str = field(init=False)   # as written: "1152 GiB"
    framework: str = field(init=False)
    other_software_stack: str = field(init=False)
    sw_notes: str = field(init=False)

    def __post_init__(self) -> None:
        fields = {key: value for key, value in self.fields.items() if key != "harness"}
        memory = re.search(r"(\d+)", _text(fields.get("accelerator_memory_capacity")))
        accelerators = fields.get("accelerators_per_node", "")
        parsed = {
            "fields": fields, "harness": dict(self.harness),
            "system_name": _text(fields.get("system_name")),
            "division": _text(fields.get("division")),
            "status": _text(fields.get("status")),
            "number_of_nodes": _count(fields.get("number_of_nodes")) or 1,
            "accelerators_per_node": None if _text(accelerators).strip() == "" else _count(accelerators) or 0,
            "accelerator_model_name": _text(fields.get("accelerator_model_name")),
            "accelerator_memory_gb": int(memory.group(1)) if memory else None,
            "host_processor_model_name": _text(fields.get("host_processor_model_name")).strip(),
            "host_processors_per_node": _count(fields.get("host_processors_per_node")),
            "host_processor_core_count": _count(fields.get("host_processor_core_count")),
            "host_vcpus": _count(fields.get("host_processor_vcpu_count")),
            "host_memory_capacity": _text(fields.get("host_memory_capacity")),
            "framework": _text(fields.get("framework")),
            "other_software_stack": _text(fields.get("other_software_stack")),
            "sw_notes": _text(fields.get("sw_notes")),
        }
        for name, value in parsed.items():
            object.__setattr__(self, name, value)

    @property
    def accelerators(self) -> int:
        """Accelerators per node, 0 where the descriptor leaves them to this machine."""
        return self.accelerators_per_node or 0

    @property
    def of_this_machine(self) -> bool:
        """The descriptor leaves its accelerators to the machine it runs on (system=local)."""
        return self.accelerators_per_node is None

    @property
    def price_usd_per_hour(self) -> float:
        return float(self.harness.get("price_usd_per_hour") or 0.0)

    def replaced(self, **updates: Any) -> SystemDescriptor:
        """This descriptor with the MLPerf fields `updates` set (a field whose name is not a
        Python word: `replaced(**{"accelerator_on-chip_memories": ...})`)."""
        return SystemDescriptor({**self.fields, **updates}, self.harness)

    def to_json(self) -> dict[str, Any]:
        """The MLPerf fields, in order (config.json's system_description, system.json)."""
        return dict(self.fields)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SystemDescriptor:
        return cls(dict(data))


def available_systems() -> list[str]:
    return sorted(p.stem for p in SYSTEMS_DIR.glob("*.json"))


def load_descriptor(system: str) -> SystemDescriptor:
    """systems/<system>.json, checked: the MLPerf fields all there, and the ones the harness
    computes with (or a checker would refuse) well formed."""
    path = SYSTEMS_DIR / f"{system}.json"
    if not path.is_file():
        raise ConfigError(f"unknown system {system!r}: no {path}. "
                          f"Known systems: {', '.join(available_systems())}")
    try:
        descriptor = json.loads(path.read_bytes().decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path} is not UTF-8 (byte {exc.start}): save it as UTF-8 and run again") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path} is not valid JSON (line {exc.lineno}, column {exc.colno}: "
                          f"{exc.msg}): fix the file and run again") from None
    if not isinstance(descriptor, dict):
        held = "a list" if isinstance(descriptor, list) else json.dumps(descriptor)
        raise ConfigError(f"{path} holds {held}, not an object of MLPerf system-description fields: "
                          "fix the file and run again")
    missing = [f for f in MLPERF_REQUIRED_FIELDS if f not in descriptor]
    if missing:
        raise ConfigError(f"{path} lacks MLPerf system-description fields: {', '.join(missing)}")
    problems = _descriptor_problems(descriptor)
    if problems:
        raise ConfigError(f"{path}: " + "; ".join(problems) + ". Fix the file and run again")
    harness = descriptor.pop("harness", {})
    return SystemDescriptor(descriptor, harness)


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
    """A whole number >= lowest, as a JSON number (not 8.0) or a string of digits."""
    count = None if isinstance(value, float) else _count(value)
    return count is not None and count >= lowest
