"""The bench's power row: the energy counters (submission.energy) read around the recipe step
at full size for a few seconds, in watts per process (NVML on a GPU, RAPL on a CPU host), or
why they could not be read."""
from __future__ import annotations

import time

import torch

from .. import energy
from ..bench_profile import Power
from ..config import Config
from ..step import RecipeStep
from .rows import say
from .step_rows import Batch
from .timing import sync

POWER_SECONDS = 4.0       # long enough for NVML's counter (updated every few 10 ms) and RAPL's
IDLE_SECONDS = 2.0


def power(config: Config, step: RecipeStep, full: Batch, device: torch.device) -> Power:
    """Watts of this process's device (or the CPU packages) with nothing running for
    IDLE_SECONDS, then while the recipe step runs at full size for about POWER_SECONDS; or
    why the counters could not be read."""
    meter = energy.meter_for(device.type, device.index or 0)
    try:
        if meter.problem:
            say(f"\n  power while training: not measured: {meter.problem}")
            return Power(not_measured=meter.problem)
        sync(device)
        meter.start()
        time.sleep(IDLE_SECONDS)
        idle = meter.stop()
        step(*full)
        sync(device)
        meter.start()
        began, images = time.perf_counter(), 0
        while time.perf_counter() - began < POWER_SECONDS:
            step(*full)
            images += config.batch_per_device
            if device.type == "cuda" and images % (8 * config.batch_per_device) == 0:
                sync(device)     # keep the queue short: the clock must see the work done
        sync(device)
        used = meter.stop()
    finally:
        meter.close()
    if not used.measured:
        say(f"\n  power while training: not measured: {used.not_measured}")
        return Power(not_measured=used.not_measured)
    assert used.joules is not None        # measured
    found = Power(watts=used.watts, joules_per_image=used.joules / images, seconds=used.seconds,
                  side=config.train_resolution, source=used.source, power_limit_watts=used.power_limit_watts,
                  idle_watts=idle.watts)
    say(f"\n  power while training at {config.train_resolution} px: {used.watts:.0f} W, idle "
        f"{idle.watts or 0:.0f} W ({found.joules_per_image:.3g} J per image; {used.source})")
    return found
