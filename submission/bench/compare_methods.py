"""Where the recipe's step loses to a plain loop: each method swapped out, one at a time.

    python -m submission bench compare=methods [system=...] [key=value ...] [steps=N] [rounds=R]

The recipe's step (BlurPool, BCE with label smoothing, DecoupledSGDW, at the recipe's
initialisation) is timed beside the same step with one method replaced by what a plain
torchvision loop uses, and beside the plain loop itself (the main bench's row), all at full
size on the same synthetic batches. A variant that runs faster than the recipe's step by
some share is what that method costs; the plain loop's lead is the whole gap (issue 9's
target: the recipe's step at 0.95x the plain loop or better). The EMA update is not in
the step: the main bench prints its cost beside the loop's other work.
Machines drift, so the variants take turns: R rounds of `steps` timed steps each, in
turn, and each variant's figure is its best round.
"""
from __future__ import annotations

import functools

import torch

from ..data import loaders
from ..step import build_step
from .measure import plain_loop
from .timing import bench_device, in_turns, synthetic_batch

WARM_UP_STEPS = 3                 # first steps allocate and pick kernels: not timed

# (row, settings changed, optimizer): one method swapped for the plain loop's in each
VARIANTS = (
    ("recipe step (BlurPool, BCE, DecoupledSGDW)", {}, "sgdw"),
    ("without BlurPool", {"blurpool": False}, "sgdw"),
    ("cross-entropy instead of BCE", {"loss": "cross_entropy"}, "sgdw"),
    ("torch.optim.SGD instead of DecoupledSGDW", {}, "sgd"),
)
PLAIN_ROW = "plain torchvision loop (CE, SGD)"


def _coupled_sgd(config):
    """torch.optim.SGD as the plain loop uses it: torch's default implementation, the
    weight decay coupled to the gradient."""
    return lambda model: torch.optim.SGD(model.parameters(), lr=config.peak_lr,
                                         momentum=config.momentum,
                                         weight_decay=config.effective_weight_decay)


def comparison(config, classes: int, steps: int, rounds: int) -> dict:
    """{row: img/s} for every variant and the plain loop, each its best of `rounds`."""
    device = bench_device(config)
    normalize = loaders.Normalizer(device)
    steps_of = {}
    for row, changes, optimizer in VARIANTS:
        changed = config.replaced(changes, f"bench compare=methods: {row}") if changes else config
        steps_of[row] = build_step(changed, classes, device,
                                   optimizer=_coupled_sgd(changed) if optimizer == "sgd" else None)
    steps_of[PLAIN_ROW] = plain_loop(config, classes, device, normalize)

    images, labels = synthetic_batch(config.batch_per_device, config.train_resolution, classes, device)
    return in_turns({row: functools.partial(step, images, labels) for row, step in steps_of.items()},
                    config.batch_per_device, steps, rounds, device, warmup=WARM_UP_STEPS)


def header(config, steps: int, rounds: int) -> str:
    return (f"the recipe's step with one method swapped for the plain loop's: batch "
            f"{config.batch_per_device}, {config.train_resolution} px, {config.precision}"
            + (f" ({config.amp_dtype})" if config.precision == "amp" else "")
            + f", {config.device_type}; best of {rounds} rounds of {steps} steps, taken in turn\n")


def table(figures: dict) -> str:
    recipe = figures[VARIANTS[0][0]]
    lines = [f"  {row:<44} {rate:10.1f} img/s   {rate / recipe:5.2f}x the recipe step"
             for row, rate in figures.items()]
    lines += ["", f"  the recipe step is {recipe / figures[PLAIN_ROW]:.2f}x the plain loop"]
    return "\n".join(lines)
