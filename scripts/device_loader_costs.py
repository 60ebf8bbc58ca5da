"""The device loader's cost per training batch on a CPU, measured the same way on any commit
that has DeviceLoader.host and .on_device (docs/gpu-data.md: before and after issues 61 and 67):

    PYTHONPATH=. python scripts/device_loader_costs.py BETON SIDE BATCH THREADS ROUNDS [fed]

host ms: `host()`, the batch gathered on the host; device ms: `on_device()`, its device work (on
this CPU); torch ops: the operators on_device calls from Python (torch.profiler; one that an
operator calls is its own work; the device's JPEG decode, a range named device_loader.decode,
counts once: one operator on a GPU). Medians of ROUNDS batches after a first one. JPEGS_ON_DEVICE=1
has the loader decode JPEGs on the device (torchvision's CPU decoder here, a GPU's path) where it
can choose.

With `fed`, also through the loader's epochs (its own threads): its rate alone (img/s inside
epochs, timing.loader_alone) and the fed ratio: a small convolutional step (three strided
convolutions and a linear layer, forward, backward, SGD) fed by the loader against the same step
on one synthetic batch, in turns (timing.in_turns, the best of ROUNDS rounds of 3 steps each).
"""
import os
import sys
import time

import numpy as np
import torch
from torch.profiler import ProfilerActivity, profile

from submission.bench.timing import in_turns, loader_alone
from submission.loaders import device_loader
from submission.loaders.protocol import cycle

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
    if "fed" in sys.argv[6:]:
        fed(loader, batch, side, rounds)


def fed(loader, batch: int, side: int, rounds: int) -> None:
    """The loader's rate alone and the small step's fed ratio (the module's docstring)."""
    cpu = torch.device("cpu")
    alone, _ = loader_alone(loader, 2 * rounds, cpu, restarts=0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 5, stride=4), torch.nn.ReLU(), torch.nn.Conv2d(16, 32, 3, stride=2), torch.nn.ReLU(),
        torch.nn.Conv2d(32, 64, 3, stride=2), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
        torch.nn.Linear(64, 10)).to(memory_format=torch.channels_last)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

    def step(images: torch.Tensor, labels: torch.Tensor) -> None:
        loss = torch.nn.functional.cross_entropy(model(images.float() / 255), labels.view(-1) % 10)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    synthetic = (torch.randint(0, 256, (batch, 3, side, side), dtype=torch.uint8).contiguous(
        memory_format=torch.channels_last), torch.randint(0, 10, (batch, 1)))
    stream = cycle(loader)
    rates = in_turns({"synthetic": lambda: step(*synthetic), "fed": lambda: step(*next(stream))},
                     batch, 3, rounds, cpu, warmup=2)
    stream.close()
    print(f"  through its epochs: alone {alone:.1f} img/s; the small step fed {rates['fed']:.1f} img/s, "
          f"synthetic {rates['synthetic']:.1f} img/s: fed ratio {rates['fed'] / rates['synthetic']:.2f}")


if __name__ == "__main__":
    main(sys.argv[1], *(int(word) for word in sys.argv[2:6]))
