"""The bench's first rows: the run's loaders after run_start in a fresh process (numba's work
is per process), without and with the warm-up on the synthetic files: seconds to the first
training batch and through the first evaluation pass (the profile's `loader_setup_s`)."""
from __future__ import annotations

import time

import torch

from .. import distributed
from ..bench_profile import LoaderProbe, LoaderSetup
from ..config import Config
from ..data.data_json import PreparedData
from ..loaders import ffcv_threads
from ..loaders.protocol import one_epoch
from ..loaders.run_loaders import run_loaders
from ..warmup import warm_up_loaders
from .rows import say
from .timing import sync


def _probe_child(config_dict: dict, data_dict: dict, warm: bool) -> LoaderProbe:
    """In a fresh process: seconds to the first training batch and through the first
    evaluation pass of the run's loaders, after warm_up_loaders or not; of the first,
    building both loaders and starting the training epoch."""
    config, data = Config.from_dict(config_dict), PreparedData(**data_dict)
    ffcv_threads.install()      # imports FFCV, as a run does before run_start
    device = torch.device("cuda" if config.device_type == "cuda" else "cpu")
    ctx = distributed.Context(0, 0, 1, device)
    warm_up_s = 0.0
    if warm:
        train_loader, val_loader = run_loaders(
            config, ctx, 0, data.synthetic_train_path, data.synthetic_val_path, data.synthetic_samples,
            shard=False)
        warm_up_s = warm_up_loaders(train_loader, val_loader, log=lambda line: None)
    start = time.perf_counter()
    train, val = run_loaders(config, ctx, 0, data.train_path, data.val_path, data.eval_samples,
                             shard=True)
    build_s = time.perf_counter() - start
    batches = one_epoch(train)     # FFCV allocates the epoch's buffers (pinned on a GPU) here
    epoch_start_s = time.perf_counter() - start - build_s
    next(batches)
    sync(device)
    train_first_batch_s = time.perf_counter() - start
    batches.close()
    start = time.perf_counter()
    for _ in one_epoch(val):
        pass
    sync(device)
    return LoaderProbe(train_first_batch_s=train_first_batch_s, val_first_pass_s=time.perf_counter() - start,
                       warm_up_s=warm_up_s, build_s=build_s, epoch_start_s=epoch_start_s)


def loader_setup(config: Config, data: PreparedData) -> LoaderSetup:
    """The cold and warm _probe_child, each in a new process."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    probes = []
    for warm in (False, True):
        with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
            probes.append(pool.submit(_probe_child, config.to_dict(), data.to_dict(), warm).result())
    return LoaderSetup(cold=probes[0], warm=probes[1])


def loader_setup_rows(config: Config, data: PreparedData) -> LoaderSetup:
    """The run's loaders after run_start in a fresh process, without and with the warm-up."""
    say("\n  the run's loaders after run_start, in a fresh process (two processes, one after "
        "the other)...")
    setup = loader_setup(config, data)
    cold, warm = setup.cold, setup.warm
    for line in (
            f"  {'':<54}{'no warm-up':>9}  {'after warm-up':>13}",
            f"  {'first training batch':<54}{cold.train_first_batch_s:7.2f} s  {warm.train_first_batch_s:9.2f} s",
            f"  {'  of which: both loaders built':<54}{cold.build_s:7.2f} s  {warm.build_s:9.2f} s",
            f"  {'            training epoch started (buffers)':<54}{cold.epoch_start_s:7.2f} s"
            f"  {warm.epoch_start_s:9.2f} s",
            f"  {'first evaluation pass':<54}{cold.val_first_pass_s:7.2f} s  {warm.val_first_pass_s:9.2f} s",
            f"  {'loader warm-up on the synthetic files, before run_start':<54}{'':>9}  {warm.warm_up_s:9.2f} s"):
        say(line)
    return setup
