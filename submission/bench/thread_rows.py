"""The run's train loader alone at each of a few thread counts: 1, 2, 4, ... up to the CPUs
this process may use, with the count a run of one process per GPU would derive
(loader_threads.py) among them. The main bench records the rates in its profile
(`loader_sweep`), which `project` scales the loader by; `bench sweep=loader` prints them too."""
from __future__ import annotations

from collections.abc import Callable

import torch

from ..bench_profile import LoaderSweep, ThreadsRate
from ..config import Config, ConfigError
from ..distributed import Context
from ..loader_kinds import kind_of
from ..loader_threads import STEP_THREAD_CPUS
from ..loaders.run_loaders import TRAIN
from .rows import say as say_now
from .timing import loader_alone


def thread_counts(cpus: int, most: int | None) -> list[int]:
    """The counts swept: powers of two below the top (`most`, else `cpus`), the count a GPU
    run of one process derives from `cpus` where it is below the top, and the top; [] for 0."""
    top = cpus if most is None else most
    if top < 1:
        return []
    if top > cpus:
        raise ConfigError(f"sweep_threads={top}, but this process may use {cpus} CPUs, and numba starts "
                          f"no more threads than that: pass sweep_threads={cpus} or fewer")
    counts = {1 << power for power in range(top.bit_length()) if 1 << power < top}
    derived = cpus - STEP_THREAD_CPUS
    return sorted(counts | {top} | ({derived} if 1 <= derived < top else set()))


def loader_thread_sweep(config: Config, train_path: str, cpus: int, counts: list[int], device: torch.device,
                        steps: int, say: Callable[[str], None] = say_now) -> LoaderSweep:
    """The run's train loader alone at each of `counts` threads (a fresh loader each, its
    steady rate over `steps` x 3 batches), a row printed as each is measured."""
    kind = kind_of(config.train_loader)
    say(f"\n  the {kind.name} train loader alone by its threads ({kind.threads_are}; "
        f"{cpus} CPUs usable here; {config.train_resolution} px, batch {config.batch_per_device}):")
    say(f"  {'threads':>8}{'img/s':>12}{'per thread':>12}{'of linear':>11}  (linear: the fewest "
        "threads' rate per thread)")
    rates: dict[int, ThreadsRate] = {}
    for threads in counts:
        variant = config.replaced({"workers_per_device": threads}, "the bench's thread sweep")
        loader = TRAIN[kind.word](variant, Context(0, 0, 1, device), 0, train_path, 0, 1, True)
        try:
            rate = loader_alone(loader, steps * 3, device, restarts=0)[0]
        finally:
            loader.close()
        rates[threads] = ThreadsRate(img_per_s=rate)
        first = rates[min(rates)].img_per_s / min(rates)
        say(f"  {threads:>8}{rate:>12,.1f}{rate / threads:>12,.1f}{rate / (first * threads):>11.0%}")
    return LoaderSweep(kind=config.train_loader, cpus=cpus, by_threads=rates, resolution=config.train_resolution)
