"""submission.energy: counters read at run_start and run_stop, wraps followed, the ranks'
readings added, and "not measured" with the reason whenever nothing can be read."""
from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest

from submission import energy


def rapl_domain(root: Path, name: str, start_uj: int, wrap_uj: int) -> Path:
    """A powercap package domain as the kernel lays it out."""
    folder = root / f"intel-rapl:{name[-1]}"
    folder.mkdir(parents=True)
    (folder / "name").write_text(f"{name}\n")
    (folder / "energy_uj").write_text(f"{start_uj}\n")
    (folder / "max_energy_range_uj").write_text(f"{wrap_uj - 1}\n")
    sub = root / f"intel-rapl:{name[-1]}:0"          # a sub-domain (core): a part of the package
    sub.mkdir()
    return folder


def set_counter(folder: Path, value_uj: int) -> None:
    (folder / "energy_uj").write_text(f"{value_uj}\n")


def test_wrapped_delta_counts_across_one_wrap():
    assert energy.wrapped_delta(100, 350, 1000) == 250
    assert energy.wrapped_delta(900, 50, 1000) == 150


def test_rapl_packages_are_added_and_followed_across_wraps_by_sampling(tmp_path):
    wrap = 1_000_000
    first = rapl_domain(tmp_path, "package-0", 900_000, wrap)
    second = rapl_domain(tmp_path, "package-1", 10_000, wrap)
    meter = energy.meter_for("cpu", powercap=tmp_path)
    assert not meter.problem and meter.devices == 2
    meter.start()
    set_counter(first, 400_000)          # wrapped once: 500,000 uJ
    set_counter(second, 510_000)         # 500,000 uJ
    for counter in meter.counters:       # what the sampling thread does every second
        counter.sample()
    set_counter(first, 300_000)          # wrapped again: 900,000 uJ more
    used = meter.stop()
    assert used.measured and used.devices == 2
    assert used.joules == pytest.approx(0.5 + 0.5 + 0.9)
    assert "package-0" in used.source and "package-1" in used.source


def test_the_sampling_thread_catches_a_wrap_between_start_and_stop(tmp_path, monkeypatch):
    monkeypatch.setattr(energy, "RAPL_SAMPLE_S", 0.02)
    folder = rapl_domain(tmp_path, "package-0", 0, 1_000_000)
    meter = energy.meter_for("cpu", powercap=tmp_path)
    meter.start()
    set_counter(folder, 800_000)
    import time
    time.sleep(0.2)                      # sampled at 800,000
    set_counter(folder, 100_000)         # then wrapped: 300,000 more
    assert meter.stop().joules == pytest.approx(1.1)


def test_no_powercap_is_not_measured_with_the_reason(tmp_path):
    used = energy.meter_for("cpu", powercap=tmp_path / "absent")
    used.start()
    reading = used.stop()
    assert reading.joules is None and not reading.measured
    assert "RAPL" in reading.not_measured and "does not exist" in reading.not_measured
    assert reading.describe().startswith("not measured: RAPL")


def test_an_unreadable_counter_is_not_measured_with_the_kernels_words(tmp_path):
    folder = rapl_domain(tmp_path, "package-0", 0, 1000)
    (folder / "energy_uj").unlink()
    (folder / "energy_uj").mkdir()       # what a read refused by the kernel looks like to us: an OSError
    reading = energy.meter_for("cpu", powercap=tmp_path)
    reading.start()
    why = reading.stop().not_measured
    assert why.startswith("RAPL: ") and "Is a directory" in why


def test_other_local_ranks_count_nothing_and_the_sum_is_rank_zeros(tmp_path):
    rapl_domain(tmp_path, "package-0", 0, 10**9)
    zero, one = energy.meter_for("cpu", powercap=tmp_path), energy.meter_for("cpu", local_rank=1, powercap=tmp_path)
    for meter in (zero, one):
        meter.start()
    set_counter(tmp_path / "intel-rapl:0", 2_000_000)
    total = energy.added([zero.stop(), one.stop()])
    assert total.joules == pytest.approx(2.0) and total.devices == 1


def test_ranks_add_up_and_one_unmeasured_rank_makes_the_sum_unmeasured():
    a = energy.Energy(100.0, 10.0, "NVML total energy of X", power_limit_watts=700.0)
    b = energy.Energy(150.0, 11.0, "NVML total energy of X", power_limit_watts=700.0)
    total = energy.added([a, b])
    assert total.joules == 250.0 and total.seconds == 11.0 and total.power_limit_watts == 1400.0
    assert total.devices == 2 and total.source == "NVML total energy of X"
    missing = energy.added([a, energy.not_measured("NVML: Not Supported", 10.0)])
    assert missing.joules is None and missing.not_measured == "rank 1: NVML: Not Supported"
    assert energy.Energy.from_dict(total.to_dict()) == total


class FakeNvml(types.ModuleType):
    """The few calls of nvidia-ml-py the meter makes, on a board whose counter the test moves."""

    class NVMLError(Exception):
        pass

    def __init__(self, supported: bool = True):
        super().__init__("pynvml")
        self.millijoules, self.supported, self.shut = 5_000_000, supported, 0

    def nvmlInit(self): pass
    def nvmlShutdown(self): self.shut += 1
    def nvmlDeviceGetHandleByUUID(self, uuid): raise self.NVMLError("Not Found")
    def nvmlDeviceGetHandleByIndex(self, index): return ("board", index)
    def nvmlDeviceGetName(self, handle): return "NVIDIA H200"
    def nvmlDeviceGetEnforcedPowerLimit(self, handle): return 700_000

    def nvmlDeviceGetTotalEnergyConsumption(self, handle):
        if not self.supported:
            raise self.NVMLError("Not Supported")
        return self.millijoules


def test_an_nvml_board_counts_millijoules_and_its_power_limit(monkeypatch):
    fake = FakeNvml()
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    monkeypatch.setattr(energy, "_cuda_uuid", lambda index: "0f0f")   # found by index instead
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    meter = energy.meter_for("cuda", 0)
    meter.start()
    fake.millijoules += 1_234_000
    used = meter.stop()
    meter.close()
    assert used.joules == pytest.approx(1234.0) and used.power_limit_watts == 700.0
    assert "NVIDIA H200" in used.source and fake.shut == 1


def test_a_board_without_the_counter_is_not_measured_with_nvmls_words(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", FakeNvml(supported=False))
    monkeypatch.setattr(energy, "_cuda_uuid", lambda index: "")
    meter = energy.meter_for("cuda", 0)
    meter.start()
    assert meter.stop().not_measured == "NVML: Not Supported"


def test_without_nvidia_ml_py_the_reason_names_the_package(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)      # import pynvml raises ImportError
    meter = energy.meter_for("cuda", 0)
    meter.start()
    assert "nvidia-ml-py" in meter.stop().not_measured
