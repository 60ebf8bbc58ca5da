"""Energy used between two moments, read from the hardware's own counters, never estimated.

  GPU   each process reads its GPU's total-energy counter through NVML (the nvidia-ml-py
        package; millijoules since the driver loaded, on Volta and later boards): the
        board's energy only, the host's CPUs and memory not counted.
  CPU   the node's first process reads the kernel's RAPL package counters
        (/sys/class/powercap/intel-rapl:N/energy_uj, AMD's too), sampled every second in a
        thread so that a counter that wraps at max_energy_range_uj is followed across it.

Where nothing can be read (no NVML, a board without the counter, no readable RAPL) the
figure is "not measured" with the reason in the library's or the kernel's own words:
never 0, never a figure from a TDP table. `Energy` is one reading of one process or the
ranks' sum (`added`), written into a run's progress records by submission.progress.
"""
from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from .jsonfile import record_from_dict

POWERCAP = Path("/sys/class/powercap")
RAPL_SAMPLE_S = 1.0      # the smallest wrap range seen (2^32 uJ) lasts 20 s at 200 W


@dataclass(frozen=True)
class Energy:
    """Joules used over `seconds`, and what counted them; or why they were not measured."""
    joules: float | None
    seconds: float
    source: str = ""                         # what counted them, for people
    not_measured: str = ""                   # why joules is None
    power_limit_watts: float | None = None   # the boards' enforced power limits, summed (NVML)
    devices: int = 1                         # counters added up

    @property
    def measured(self) -> bool:
        return self.joules is not None

    @property
    def watts(self) -> float | None:
        return self.joules / self.seconds if self.joules is not None and self.seconds > 0 else None

    def describe(self) -> str:
        if self.joules is None:
            return f"not measured: {self.not_measured}"
        return f"{self.joules / 1000:.3g} kJ over {self.seconds:.1f} s ({self.watts:.0f} W; {self.source})"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Energy:
        return record_from_dict(cls, data)


def not_measured(why: str, seconds: float = 0.0) -> Energy:
    return Energy(None, seconds, not_measured=why)


def added(parts: list[Energy]) -> Energy:
    """The ranks' readings added up: not measured when any one is (a sum missing a rank
    would understate the run), with that rank's reason; `seconds` is the longest."""
    seconds = max((p.seconds for p in parts), default=0.0)
    missing = [(rank, p) for rank, p in enumerate(parts) if not p.measured]
    if not parts or missing:
        why = (f"rank {missing[0][0]}: {missing[0][1].not_measured}" if len(parts) > 1 and missing
               else missing[0][1].not_measured if missing else "no reading")
        return not_measured(why, seconds)
    counted = [p for p in parts if p.devices]
    sources = list(dict.fromkeys(p.source for p in counted))
    limits = [p.power_limit_watts for p in counted]
    return Energy(sum(p.joules for p in parts if p.joules is not None), seconds, "; ".join(sources),
                  power_limit_watts=_sum_if_known(limits) if limits else None,
                  devices=sum(p.devices for p in parts))


def wrapped_delta(before: int, after: int, wrap: int) -> int:
    """How far a counter that starts again from 0 after `wrap - 1` went from `before` to
    `after`, at most one wrap apart."""
    return after - before if after >= before else after + wrap - before


# ---- counters ----------------------------------------------------------------
class Counter:
    """A cumulative energy counter: `read()` in joules since some origin, `name` for people."""
    name = ""
    power_limit_watts: float | None = None

    def read(self) -> float:
        raise NotImplementedError

    def close(self) -> None:
        pass


class RaplPackage(Counter):
    """One RAPL domain's energy_uj, followed across wraps by sampling (`sample`)."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self.name = (self.folder / "name").read_text().strip()
        self.wrap = int((self.folder / "max_energy_range_uj").read_text()) + 1
        self.last = self._raw()
        self.total_uj = 0
        self.lock = threading.Lock()

    def _raw(self) -> int:
        return int((self.folder / "energy_uj").read_text())

    def sample(self) -> None:
        with self.lock:
            now = self._raw()
            self.total_uj += wrapped_delta(self.last, now, self.wrap)
            self.last = now

    def read(self) -> float:
        self.sample()
        return self.total_uj / 1e6


def rapl_packages(root: Path = POWERCAP) -> list[RaplPackage]:
    """The RAPL package domains under `root` (their sub-domains, core and dram, are parts of
    a package's or are not on every machine); an OSError saying what is missing or unreadable."""
    if not root.is_dir():
        raise FileNotFoundError(f"{root} does not exist (no powercap driver: a VM or container "
                                "hides the RAPL counters)")
    folders = sorted(p for p in root.glob("intel-rapl:*") if p.name.count(":") == 1)
    if not folders:
        raise FileNotFoundError(f"{root} has no intel-rapl:N package domains")
    return [RaplPackage(folder) for folder in folders]


class NvmlBoard(Counter):
    """One GPU's total energy through NVML (millijoules since the driver loaded)."""

    def __init__(self, index: int, uuid: str = ""):
        import pynvml
        self.nvml = pynvml
        pynvml.nvmlInit()
        try:
            self.handle = _nvml_handle(pynvml, index, uuid)
            self.name = f"NVML total energy of {pynvml.nvmlDeviceGetName(self.handle)}"
            self.read()                  # a board without the counter says so here
            try:
                self.power_limit_watts = pynvml.nvmlDeviceGetEnforcedPowerLimit(self.handle) / 1000
            except pynvml.NVMLError:
                self.power_limit_watts = None
        except BaseException:
            pynvml.nvmlShutdown()
            raise

    def read(self) -> float:
        try:
            return self.nvml.nvmlDeviceGetTotalEnergyConsumption(self.handle) / 1000
        except self.nvml.NVMLError as exc:
            raise OSError(f"NVML: {exc}") from None

    def close(self) -> None:
        self.nvml.nvmlShutdown()


def _nvml_handle(pynvml: ModuleType, index: int, uuid: str) -> object:
    """NVML's handle of torch's CUDA device `index`: by its UUID; else, where no
    CUDA_VISIBLE_DEVICES renumbers the devices, by the same index."""
    if uuid:
        try:
            return pynvml.nvmlDeviceGetHandleByUUID(uuid if uuid.startswith("GPU-") else f"GPU-{uuid}")
        except pynvml.NVMLError:
            if os.environ.get("CUDA_VISIBLE_DEVICES"):
                raise
    return pynvml.nvmlDeviceGetHandleByIndex(index)


def _cuda_uuid(index: int) -> str:
    import torch
    uuid = getattr(torch.cuda.get_device_properties(index), "uuid", None)
    return str(uuid) if uuid else ""


def nvml_board(index: int) -> NvmlBoard:
    """The NVML counter of torch's CUDA device `index` (found by its UUID, so that
    CUDA_VISIBLE_DEVICES cannot make it another board)."""
    try:
        import pynvml  # noqa: F401 - only whether it imports
    except ImportError:
        raise OSError("the nvidia-ml-py package is not installed (pip install nvidia-ml-py)") from None
    try:
        return NvmlBoard(index, _cuda_uuid(index))
    except OSError:
        raise
    except Exception as exc:   # noqa: BLE001 - pynvml.NVMLError and its many subclasses
        raise OSError(f"NVML: {exc}") from None



def _sum_if_known(values: list[float | None]) -> float | None:
    """The sum, or None where any value is unknown."""
    known = [value for value in values if value is not None]
    return sum(known) if len(known) == len(values) else None

# ---- a meter: counters read at a start and a stop ------------------------------
class Meter:
    """Reads its counters at `start()` and `stop()`; RAPL counters are also sampled every
    RAPL_SAMPLE_S in a thread between the two, so that no wrap is missed."""

    def __init__(self, counters: list[Counter], source: str, problem: str = "", devices: int = 1,
                 clock: Callable[[], float] = time.monotonic):
        self.counters, self.source, self.problem, self.devices = counters, source, problem, devices
        self.clock = clock
        self.started: tuple[float, list[float]] | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self.started = (self.clock(), [c.read() for c in self.counters])
        if any(isinstance(c, RaplPackage) for c in self.counters):
            self._stop.clear()
            self._thread = threading.Thread(target=self._sample, name="rapl-sampler", daemon=True)
            self._thread.start()

    def _sample(self) -> None:
        while not self._stop.wait(RAPL_SAMPLE_S):
            for counter in self.counters:
                if isinstance(counter, RaplPackage):
                    counter.sample()

    def stop(self) -> Energy:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
        if self.started is None:
            return not_measured(self.problem or "the meter was never started")
        began, before = self.started
        seconds = self.clock() - began
        if self.problem:
            return not_measured(self.problem, seconds)
        if not self.counters:            # another process of this node counts its energy
            return Energy(0.0, seconds, self.source, devices=0)
        try:
            after = [c.read() for c in self.counters]
        except OSError as exc:
            return not_measured(f"{self.source}: {exc}", seconds)
        limits = [c.power_limit_watts for c in self.counters]
        return Energy(sum(a - b for a, b in zip(after, before)), seconds, self.source,
                      power_limit_watts=_sum_if_known(limits),
                      devices=self.devices)

    def close(self) -> None:
        for counter in self.counters:
            counter.close()


def meter_for(device_type: str, device_index: int = 0, local_rank: int = 0,
              powercap: Path = POWERCAP) -> Meter:
    """The meter of one process: its GPU's NVML counter on CUDA; on the CPU, the node's
    RAPL packages, read by local rank 0 only (the packages hold every process of the node;
    the others count 0). A meter that cannot read says why when it stops."""
    if device_type == "cuda":
        try:
            board = nvml_board(device_index)
        except OSError as exc:
            return Meter([], "", problem=str(exc))
        return Meter([board], f"{board.name} (board only; host CPUs and memory not counted)")
    if local_rank != 0:
        return Meter([], "counted by the node's local rank 0", devices=0)
    try:
        packages = rapl_packages(powercap)
        for package in packages:
            package.read()
    except OSError as exc:   # PermissionError: energy_uj is root-only on kernels since 5.10
        return Meter([], "", problem=f"RAPL: {exc}")
    return Meter(list(packages), f"RAPL {', '.join(p.name for p in packages)} (CPU packages; "
                                 "memory and accelerators not counted)", devices=len(packages))


def idle_watts(device_type: str, seconds: float = 3.0, device_index: int = 0) -> Energy:
    """The energy of `seconds` with nothing running, as a reading (its watts: the idle power)."""
    meter = meter_for(device_type, device_index)
    try:
        meter.start()
        time.sleep(seconds)
        return meter.stop()
    finally:
        meter.close()
