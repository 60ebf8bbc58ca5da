"""Timing primitives of the bench: seconds per call, steps in turns, the loader alone,
the matmul peak; and the device a bench times on, set up as a run sets it up."""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

import torch

from .. import inventory
from ..config import Config, ConfigError
from ..loader_kinds import LoaderKind
from ..loaders import ffcv_threads
from ..loaders.protocol import Loader, one_epoch


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(step: Callable[[], object], calls: int, device: torch.device, warmup: int = 2) -> float:
    """Seconds per call of step() after warm-up calls (first calls compile or allocate)."""
    for _ in range(warmup):
        step()
    sync(device)                      # warm-up work must not leak into the timed calls
    start = time.perf_counter()
    for _ in range(calls):
        step()
    sync(device)
    return (time.perf_counter() - start) / calls


def first_call(step: Callable[[], object], device: torch.device) -> float:
    """Seconds of one call of step(), its set-up included."""
    sync(device)
    start = time.perf_counter()
    step()
    sync(device)
    return time.perf_counter() - start


def in_turns(steps_of: dict[str, Callable[[], object]], images_per_call: int, calls: int, rounds: int,
             device: torch.device, warmup: int = 3) -> dict[str, float]:
    """{name: img/s} of each step(), the steps taking turns: `warmup` untimed calls of each
    (first calls allocate, pick kernels, record CUDA graphs), then `rounds` rounds of
    `calls` timed calls of each in turn; each its best round. A machine whose speed drifts
    moves steps timed side by side alike, and their ratio holds."""
    for step in steps_of.values():
        for _ in range(warmup):
            step()
    best = dict.fromkeys(steps_of, 0.0)
    for _ in range(rounds):
        for name, step in steps_of.items():
            best[name] = max(best[name], images_per_call / timed(step, calls, device, warmup=0))
    return best


def loader_alone(loader: Loader, batches: int, device: torch.device, restarts: int = 3) -> tuple[float, float | None]:
    """The train loader alone (FFCV's, torchvision's, the device loader's): its steady img/s
    inside an epoch, and the seconds an epoch's start adds over a steady batch (FFCV starts
    its threads and fills its pipeline again; a run pays it once an epoch). Each epoch's
    first batch is left out of the steady rate, so a small data set, whose epochs are a few
    batches long, is measured as a large one's; then `restarts` fresh epochs time their
    first batch. The very first epoch's first batch (compiling, allocating) counts for
    neither."""
    if len(loader) < 2:
        raise ConfigError(f"the loader has {len(loader)} batch(es) an epoch: timing it needs at "
                          "least 2 (more images, or a smaller batch_per_device)")
    steady_s, steady_batches, images = 0.0, 0, 0
    starts: list[float] = []
    while steady_batches < batches or len(starts) <= restarts:
        last = time.perf_counter()         # the epoch starts here: its work is the start's
        epoch = one_epoch(loader)
        try:
            for position, (batch, _) in enumerate(epoch):
                now = time.perf_counter()
                if position == 0:
                    starts.append(now - last)
                elif steady_batches < batches:
                    steady_s, steady_batches, images = steady_s + now - last, steady_batches + 1, images + len(batch)
                last = now
                if steady_batches >= batches:
                    break
        finally:
            epoch.close()
            sync(device)
    rate, later_starts = images / steady_s, starts[1:]
    if not later_starts:
        return rate, None
    return rate, max(0.0, sum(later_starts) / len(later_starts) - steady_s / steady_batches)


@dataclass(frozen=True)
class BatchCosts:
    """What one batch of a loader measured alone costs the host (per_batch_costs): `torch_ops`
    its device work calls from Python and `augmentation_ops` its augmentation's (the device
    loader's, counted with torch.profiler; None for the others: their kind's `uncounted_ops`),
    `host_s` its host work (the device loader's compiled gather, median; FFCV's and
    torchvision's whole batch at their rate alone: all of their work is host work). The device
    loader's stages measured apart, medians (None for the others): `decode_s` its device's JPEG
    decode, `device_s` the rest of its device part (on a GPU the Python that queues it, on a CPU
    the work itself), `slot_wait_s` its gather's wait for a free ring slot, `batch_wait_s` the
    step's wait for a made batch; `host_waits` its host's waits for the device per batch (0 on the
    steady path)."""
    torch_ops: int | None
    augmentation_ops: int | None
    host_s: float | None
    device_s: float | None
    decode_s: float | None
    slot_wait_s: float | None = None
    batch_wait_s: float | None = None
    host_waits: float | None = None


def per_batch_costs(loader: Loader, batch: int, img_per_s: float) -> BatchCosts:
    """The BatchCosts of `loader`, measured alone at `img_per_s`."""
    if loader.kind.uncounted_ops is not None:
        return BatchCosts(torch_ops=None, augmentation_ops=None, host_s=batch / img_per_s, device_s=None,
                          decode_s=None)
    from ..loaders.device_loader import AUGMENT, DeviceLoader
    counting = cast(DeviceLoader, loader)       # the one kind whose operations are counted (loader_kinds.py)
    timings = counting.timings                  # of the batches timed: before the count's two
    seconds = {part: None if ms is None else ms / 1e3 for part, ms in timings.per_batch_ms().items()}
    host_waits = timings.host_waits_per_batch()
    counted = counting.ops_per_batch()
    return BatchCosts(torch_ops=counted.ops, augmentation_ops=counted.parts[AUGMENT] if counting.augment else None,
                      host_s=seconds["gather"], device_s=seconds["device"], decode_s=seconds["decode"],
                      slot_wait_s=seconds["slot"], batch_wait_s=seconds["batch"], host_waits=host_waits)


def describe_costs(kind: LoaderKind, costs: BatchCosts, threads: int) -> str:
    """One line of what per_batch_costs found, for people."""
    if costs.torch_ops is None:
        return (f"per batch: torch operations n/a ({kind.uncounted_ops}); host {_in_ms(costs.host_s):.1f} ms "
                f"(its whole batch with {threads} thread(s): all of its work is on the host)")
    augmentation = (f", its augmentation's {costs.augmentation_ops} apart"
                    if costs.augmentation_ops is not None else "")
    decode = f", the device's JPEG decode {_in_ms(costs.decode_s):.1f} ms" if costs.decode_s is not None else ""
    waits = "n/a" if costs.host_waits is None else f"{costs.host_waits:.2f}"
    return (f"per batch: {costs.torch_ops} torch operations called from Python{augmentation}, {waits} host "
            f"synchronizations; host {_in_ms(costs.host_s):.1f} ms (the compiled gather, {threads} thread(s), the "
            f"interpreter free), the rest of its device part {_in_ms(costs.device_s):.1f} ms{decode}; waits: "
            f"the gather's for a free slot {_in_ms(costs.slot_wait_s):.1f} ms, the step's for a batch "
            f"{_in_ms(costs.batch_wait_s):.1f} ms")


def _in_ms(seconds: float | None) -> float:
    return float("nan") if seconds is None else seconds * 1e3


def matmul_peak(device: torch.device, dtype: torch.dtype, n: int, rounds: int) -> float:
    """FLOP/s of an n x n matmul on this device and dtype (the MFU denominator), the best
    of `rounds` timings: a peak caught in a slow minute would put MFU above 100%."""
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    seconds = min(timed(lambda: a @ b, 5, device) for _ in range(rounds))
    return 2 * n ** 3 / seconds


def bench_device(config: Config) -> torch.device:
    """The device a bench times on, with the run's CPU threads and cuDNN setting."""
    device = torch.device("cuda" if config.device_type == "cuda" else "cpu")
    ffcv_threads.install()      # else FFCV's Loaders set torch's threads to their worker count
    if device.type == "cpu":
        torch.set_num_threads(inventory.cpu_threads(config))
    torch.backends.cudnn.benchmark = config.cudnn_benchmark
    return device


def synthetic_batch(batch: int, side: int, classes: int, device: torch.device,
                    generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(uint8 images NCHW in channels-last memory, labels) as the loaders give them."""
    images = torch.randint(0, 256, (batch, 3, side, side), dtype=torch.uint8, generator=generator)
    labels = torch.randint(0, classes, (batch,), generator=generator)
    return images.to(device).contiguous(memory_format=torch.channels_last), labels.to(device)
