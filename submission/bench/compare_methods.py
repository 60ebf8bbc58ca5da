"""Where the recipe's step loses to a plain loop: each method swapped out, one at a time.

    python -m submission bench compare=methods [system=...] [key=value ...] [steps=N] [rounds=R]

The recipe's step (BlurPool, BCE with label smoothing, DecoupledSGDW, at the recipe's
initialisation; with Medium and Hot also MixUp and SAM, stochastic depth and ColOut) is
timed beside the same step with one method replaced by what a plain torchvision loop uses
(or left out, for the methods a plain loop has no counterpart of), and beside the plain
loop itself (the main bench's row), all at full size on the same synthetic batches. SAM's
share is only right when each round's `steps` is a multiple of its interval (steps=10
for Medium's every 10th step and Hot's every 5th). A variant that runs faster than the recipe's step by
some share is what that method costs; the plain loop's lead is the whole gap (issue 9's
target: the recipe's step at 0.95x the plain loop or better). The EMA update is not in
the step: the main bench prints its cost beside the loop's other work.
Machines drift, so the variants take turns: R rounds of `steps` timed steps each, in
turn, and each variant's figure is its best round.
"""
from __future__ import annotations

import functools
from collections.abc import Callable

import torch
from torch import nn

from ..config import Config
from ..methods import ALL
from ..methods.sam import SAM
from ..step import Normalizer, Optimizer, build_step
from .step_rows import TrainStep, plain_loop
from .timing import bench_device, in_turns, synthetic_batch

WARM_UP_STEPS = 3                 # first steps allocate and pick kernels: not timed

RECIPE_ROW = "the recipe's step"
# each method the plain loop does without or does otherwise, swapped for the plain loop's in a
# row of its own (methods/method.py: `without`)
VARIANTS = tuple(method for method in ALL if method.without)
PLAIN_ROW = "plain torchvision loop (CE, SGD)"


def _coupled_sgd(config: Config) -> Callable[[nn.Module], Optimizer]:
    """torch.optim.SGD as the plain loop uses it: torch's default implementation, the
    weight decay coupled to the gradient (inside SAM when the recipe has it)."""
    def optimizer(model: nn.Module) -> Optimizer:
        sgd = torch.optim.SGD(model.parameters(), lr=config.peak_lr, momentum=config.momentum,
                              weight_decay=config.effective_weight_decay)
        if not config.sam_interval:
            return sgd
        return SAM(sgd, rho=config.sam_rho, epsilon=config.sam_epsilon, interval=config.sam_interval)
    return optimizer


def comparison(config: Config, classes: int, steps: int, rounds: int) -> dict[str, float]:
    """{row: img/s} for every variant and the plain loop, each its best of `rounds`."""
    device = bench_device(config)
    normalize = Normalizer(device)
    steps_of: dict[str, TrainStep] = {RECIPE_ROW: build_step(config, classes, device)}
    for method in VARIANTS:
        if not method.on(config):
            continue                  # the recipe does not have this method
        if method.swapped_in_code:    # the optimizer: torch.optim.SGD, built here
            steps_of[method.without] = build_step(config, classes, device, optimizer=_coupled_sgd(config))
            continue
        changed = config.replaced({method.setting: method.off}, f"bench compare=methods: {method.without}")
        steps_of[method.without] = build_step(changed, classes, device)
    steps_of[PLAIN_ROW] = plain_loop(config, classes, device, normalize)

    images, labels = synthetic_batch(config.batch_per_device, config.train_resolution, classes, device)
    return in_turns({row: functools.partial(step, images, labels) for row, step in steps_of.items()},
                    config.batch_per_device, steps, rounds, device, warmup=WARM_UP_STEPS)


def header(config: Config, steps: int, rounds: int) -> str:
    return (f"the {config.recipe} recipe's step ({', '.join(config.methods)}) with one method "
            f"swapped for the plain loop's or left out: batch "
            f"{config.batch_per_device}, {config.train_resolution} px, {config.precision}"
            + (f" ({config.amp_dtype})" if config.precision == "amp" else "")
            + f", {config.device_type}; best of {rounds} rounds of {steps} steps, taken in turn\n")


def table(figures: dict) -> str:
    recipe = figures[RECIPE_ROW]
    lines = [f"  {row:<44} {rate:10.1f} img/s   {rate / recipe:5.2f}x the recipe step"
             for row, rate in figures.items()]
    lines += ["", f"  the recipe step is {recipe / figures[PLAIN_ROW]:.2f}x the plain loop"]
    return "\n".join(lines)
