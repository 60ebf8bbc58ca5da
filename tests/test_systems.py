"""systems/*.json: every descriptor resolves, passes the official system description
checker (2.0.0 as written, 4.0.0 through for_ruleset), and fill_from_host reads the
empty host fields from this machine without touching set ones."""
from __future__ import annotations

import importlib.metadata
import json
from pathlib import Path

import psutil
import pytest
from mlperf_logging.system_desc_checker.system_desc_checker import check_system_desc

from submission import config, inventory, system_descriptor
from submission import settings as declared
from submission.config import resolve
from submission.preflight import resolve_here
from submission.system_json import STATUS_4X, fill_from_host, for_ruleset, run_description

SYSTEMS = system_descriptor.available_systems()
HOST_FIELDS = ("host_processor_model_name", "host_processors_per_node", "host_processor_core_count",
               "host_processor_vcpu_count", "host_memory_capacity", "host_storage_capacity",
               "framework", "operating_system", "other_software_stack")


def _official_check(description: dict, ruleset: str, tmp_path: Path, caplog) -> tuple[bool, str]:
    path = tmp_path / f"{description['system_name'] or 'system'}_{ruleset}.json"
    path.write_text(json.dumps(description))
    caplog.clear()
    with caplog.at_level("INFO"):
        try:
            valid, name, _, _ = check_system_desc(str(path), "training", ruleset)
        except TypeError as exc:   # the checker joins some fields as strings
            pytest.fail(f"the official checker crashed on {description['system_name']}: {exc} "
                        "(MLPerf description fields must be strings, e.g. \"8\", not 8)")
    assert name == description["system_name"]
    return valid, caplog.text


def test_the_target_systems_exist():
    assert {"cpu", "local", "p4d", "p3", "a2", "n1-v100", "bm-gpu4", "a100-80gb"} <= set(SYSTEMS)
    assert {"p5", "p5en", "a3", "a3-ultra", "nd-h100-v5", "nd-h200-v5"} <= set(SYSTEMS)   # H100, H200


def test_docs_systems_md_has_a_row_with_its_sources_for_every_named_system():
    table = (config.REPO_ROOT / "docs" / "systems.md").read_text()
    rows = {line.split("|")[1].strip(" `") for line in table.splitlines() if line.startswith("| `")}
    assert set(SYSTEMS) - {"cpu", "local"} <= rows


@pytest.mark.parametrize("system", SYSTEMS)
def test_descriptor_resolves(system):
    fields = config.resolve(system, {}).descriptor.to_json()
    assert "harness" not in fields
    assert set(system_descriptor.MLPERF_REQUIRED_FIELDS) <= set(fields)
    assert fields["division"] == "open"
    assert fields["status"] in STATUS_4X          # written in the 2.0.0 vocabulary
    assert fields["submitter"] == ""                # filled from `org` when packaging


def test_cloud_systems_are_8_gpu_single_nodes_with_a_priced_source():
    for system in set(SYSTEMS) - {"cpu", "local"}:
        cfg = config.resolve(system, {})
        assert cfg.descriptor.status == "cloud", system
        assert (cfg.num_nodes, cfg.processes_per_node, cfg.device_type) == (1, 8, "cuda"), system
        assert cfg.price_source, f"{system}: a price needs its source"
        if cfg.price_usd_per_hour:
            assert cfg.price_date, f"{system}: a price needs its date"
        # the harness block holds only what differs from the defaults (submission/settings.py)
        harness = json.loads((system_descriptor.SYSTEMS_DIR / f"{system}.json").read_text())["harness"]
        defaults = declared.defaults()
        same = [k for k, v in harness.items() if k in defaults and v == defaults[k]]
        assert not same, f"systems/{system}.json repeats defaults: {same}"
    names = [resolve_here(s, {}).system_name for s in SYSTEMS]
    assert len(names) == len(set(names)), "two descriptors share a system_name"


@pytest.mark.parametrize("system", SYSTEMS)
def test_passes_official_checker_2_0_0_as_written(system, tmp_path, caplog):
    description = run_description(resolve_here(system, {}))      # what a run's system.json holds
    valid, log = _official_check(description, "2.0.0", tmp_path, caplog)
    assert valid, log


@pytest.mark.parametrize("system", SYSTEMS)
def test_passes_official_checker_4_0_0_only_after_status_mapping(system, tmp_path, caplog):
    description = run_description(resolve_here(system, {}))
    mapped = for_ruleset(description, "4.0.0")
    assert mapped["status"] == STATUS_4X[description["status"]]
    valid, log = _official_check(mapped, "4.0.0", tmp_path, caplog)
    assert valid, log
    # the same description in the 2.0.0 vocabulary is refused by 4.0.0: the mapping matters
    unmapped = for_ruleset(description, "2.0.0")
    assert unmapped["status"] == description["status"]
    valid, log = _official_check(unmapped, "4.0.0", tmp_path, caplog)
    assert not valid
    assert "status" in log


def test_for_ruleset_maps_status_and_drops_the_harness_block():
    base = {"status": "cloud", "system_name": "x", "accelerators_per_node": 8, "number_of_nodes": 1.0,
            "harness": {"runs": 3}}
    assert for_ruleset(base, "2.0.0") == {"status": "cloud", "system_name": "x",
                                          "accelerators_per_node": "8", "number_of_nodes": "1"}
    expected = {"onprem": "Available on-premise", "cloud": "Available cloud", "preview": "Preview",
                "research": "Research, Development, or Internal (RDI)"}
    for short, long in expected.items():
        assert for_ruleset({"status": short}, "4.0.0")["status"] == long
        assert for_ruleset({"status": short}, "4.1.0")["status"] == long
        assert for_ruleset({"status": short}, "2.1.0")["status"] == short
        assert for_ruleset({"status": long}, "2.0.0")["status"] == short   # and back
    assert base["harness"] == {"runs": 3} and base["status"] == "cloud"   # input untouched


def test_for_ruleset_rejects_an_unknown_status():
    with pytest.raises(ValueError) as excinfo:
        for_ruleset({"status": "available"}, "4.0.0")
    message = str(excinfo.value)
    assert "available" in message
    for allowed in ("onprem", "cloud", "preview", "research", "Available cloud"):
        assert allowed in message


def test_fill_from_host_fills_the_empty_fields_of_cpu_json():
    description = system_descriptor.load_descriptor("cpu").to_json()
    empty = [f for f in HOST_FIELDS if description[f] == ""]
    assert empty, "cpu.json should leave host fields to be read from the machine"
    filled = fill_from_host(description)
    for field in empty:
        assert filled[field] not in ("", None), f"{field} was not filled"
    assert description[empty[0]] == ""   # a copy, the input is unchanged
    assert filled["host_processor_vcpu_count"] == str(psutil.cpu_count())
    assert filled["host_memory_capacity"] == f"{round(psutil.virtual_memory().total / 2**30)} GiB"
    sockets = int(filled["host_processors_per_node"])
    assert sockets >= 1
    assert int(filled["host_processor_core_count"]) * sockets <= psutil.cpu_count(logical=False)
    import torch
    assert filled["framework"] == f"PyTorch {torch.__version__}"
    assert f"mlperf-logging {importlib.metadata.version('mlperf-logging')}" in filled["other_software_stack"]
    assert filled["operating_system"]
    freq = psutil.cpu_freq()
    assert bool(filled["host_processor_frequency"]) == bool(freq and freq.max)
    # a CPU system names no accelerator, even on a machine that has one
    assert filled["accelerator_model_name"] == "" and filled["accelerator_memory_capacity"] == ""
    # untouched: fields fill_from_host has no probe for
    for field in ("hw_notes", "sw_notes", "status", "system_name", "cooling"):
        assert filled[field] == description[field]


def test_fill_from_host_never_overwrites_a_set_field():
    description = {field: f"set by hand: {field}" for field in system_descriptor.MLPERF_REQUIRED_FIELDS}
    description["host_processors_per_node"] = "4"
    filled = fill_from_host(description)
    assert filled == description


def test_fill_from_host_survives_failing_probes(monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("probe failed")
    monkeypatch.setattr(psutil, "cpu_count", broken)
    monkeypatch.setattr(psutil, "virtual_memory", broken)
    filled = fill_from_host({"host_processor_vcpu_count": "", "host_memory_capacity": None,
                             "host_processor_core_count": "", "host_storage_capacity": ""})
    assert filled["host_processor_vcpu_count"] == ""
    assert filled["host_memory_capacity"] is None
    assert filled["host_processor_core_count"] == ""
    assert filled["host_storage_capacity"].endswith("GiB")   # its probe still works


def test_software_names_rocm_and_miopen_on_a_rocm_torch(monkeypatch):
    import torch

    from submission import system_json
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.version, "cuda", None)
    monkeypatch.setattr(torch.version, "hip", "6.2.41133")
    monkeypatch.setattr(torch.backends.cudnn, "is_available", lambda: True)
    monkeypatch.setattr(torch.backends.cudnn, "version", lambda: 3002000)
    monkeypatch.setattr(inventory, "no_gpu_driver", lambda: False)
    software = system_json._software()
    assert "ROCm 6.2.41133" in software and "MIOpen 3002000" in software and "CUDA" not in software


@pytest.mark.e2e
def test_a_host_without_a_gpu_driver_is_described_without_importing_torch():
    """A configuration resolved for this machine names the recipe's methods, its run's
    description reads the host, and its run plan is drawn (`settings`, `project`): torch's version
    is read from its version.py, no GPU driver means no GPU or CUDA to ask torch about, the
    methods' table is read without their code, and the plan's arithmetic needs none of it
    (torch's import: seconds)."""
    import subprocess
    import sys

    from conftest import REPO
    if not inventory.no_gpu_driver():
        pytest.skip("a GPU driver is loaded here: torch is asked for the GPUs and the CUDA version")
    probe = ("import json, sys; from submission.preflight import resolve_here; "
             "from submission.run_plan import RunPlan; "
             "c = resolve_here('local', {'recipe': 'hot', 'dataset': 'imagenet', 'scale_schedule_ratio': '3'}); "
             "sides = RunPlan.of(c, 1_281_167, 8).sides(); "
             "from submission.system_json import run_description; "
             "print(json.dumps([run_description(c)['framework'], len(c.methods), sides[-1], 'torch' in sys.modules]))")
    done = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True,
                          timeout=120, check=True)
    import torch
    assert json.loads(done.stdout) == [f"PyTorch {torch.__version__}", 10, 167, False]


def test_the_logged_world_is_the_launched_one():
    cfg = resolve("cpu", {"procs_per_node": "2", "nodes": "2", "master_addr": "10.0.0.1"})
    written = run_description(cfg)
    assert written["number_of_nodes"] == "2" and written["accelerators_per_node"] == "0"
    assert written["system_name"] == cfg.system_name == "2xlocal_cpu"
    assert cfg.global_batch_size == 4 * 64
