"""The device loader's cost per training batch on a CPU, measured the same way on any commit
that has DeviceLoader.host and .on_device (docs/gpu-data.md: before and after issue 61):

    PYTHONPATH=. python scripts/device_loader_costs.py BETON SIDE BATCH THREADS ROUNDS

host ms: `host()`, the batch gathered on the host; device ms: `on_device()`, its device work (on
this CPU); torch ops: the operators on_device calls from Python (torch.profiler; one that an
operator calls is its own work; the device's JPEG decode, a range named device_loader.decode,
counts once: one operator on a GPU). Medians of ROUNDS batches after a first one. JPEGS_ON_DEVICE=1
has the loader decode JPEGs on the device (torchvision's CPU decoder here, a GPU's path) where it
can choose."""
import os
import sys
import time

import numpy as np
import torch
from torch.profiler import ProfilerActivity, profile

from submission.loaders import device_loader

DECODE = "device_loader.decode"


def called_from_python(event) -> bool:
    parent = event.cpu_parent
    while parent is not None:
        if "::" in parent.name or parent.name == DECODE:
            return False
        parent = parent.cpu_parent
    return "::" in event.name or event.name == DECODE


def main(path: str, side: int, batch: int, threads: int, rounds: int) -> None:
    loader = device_loader.train_loader(path, side, batch, threads, 0, torch.device("cpu"), 0, 1)
    if os.environ.get("JPEGS_ON_DEVICE"):
        loader.jpegs_on_device = True
    order = loader.order(0)
    batches = [order[k * batch:(k + 1) * batch] for k in range(len(loader))]
    loader.on_device(loader.host(batches[0], 0))          # compiled, allocated
    host_s, device_s = [], []
    for n in range(rounds):
        start = time.perf_counter()
        made = loader.host(batches[1 + n % (len(batches) - 1)], n)
        middle = time.perf_counter()
        loader.on_device(made)
        host_s.append(middle - start)
        device_s.append(time.perf_counter() - middle)
    with profile(activities=[ProfilerActivity.CPU]) as profiler:
        loader.on_device(made)
    ops = sum(called_from_python(event) for event in profiler.events())
    print(f"{os.path.basename(path)} side {side} batch {batch} threads {threads}: host {np.median(host_s) * 1e3:.1f} "
          f"ms, device {np.median(device_s) * 1e3:.0f} ms, {ops} torch ops per batch")


if __name__ == "__main__":
    main(sys.argv[1], *(int(word) for word in sys.argv[2:6]))
