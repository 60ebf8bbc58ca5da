"""FFCV sets torch's thread count; with `install()` it sets only its own.

FFCV 1.0.2's `Compiler.set_num_threads(n)` sets numba's threads and torch's intra-op
threads alike. FFCV calls it when it is imported (n = 1), when a Loader is built and at
every epoch's start (n = the Loader's worker threads, in the calling thread). So the
training step on a CPU ran on `workers_per_device` threads, not on the `cpu_threads`
(or the cores over the processes) that train.py had set: the same count on the 2-core
machine the embedded campaign was calibrated on, 2 of 8 cores on an 8-core laptop. And a
process that imports FFCV after setting torch's threads (the bench, whose `prepare`
reads a .beton's metadata) would run its torch work on one thread until it built a Loader.

`install()` imports FFCV's compiler, keeping torch's thread count through that first
import, and makes `Compiler.set_num_threads` set numba's threads only. train.py and the
bench call it, then set torch's threads; the loaders call it before importing FFCV.
"""
from __future__ import annotations

import sys
from multiprocessing import cpu_count

import torch


def install() -> None:
    """Leave torch's threads to this project (idempotent)."""
    first_import = "ffcv.pipeline.compiler" not in sys.modules
    threads = torch.get_num_threads()
    from ffcv.pipeline.compiler import Compiler
    if first_import:
        torch.set_num_threads(threads)         # the import set it to 1
    if getattr(Compiler.set_num_threads, "_leaves_torch_alone", False):
        return
    import numba

    def numba_threads_only(cls: type[Compiler], n: int) -> None:
        cls.num_threads = n if n >= 1 else cpu_count()      # as FFCV's
        numba.set_num_threads(cls.num_threads)

    numba_threads_only._leaves_torch_alone = True  # type: ignore[attr-defined]  # a mark: installed
    Compiler.set_num_threads = classmethod(numba_threads_only)
