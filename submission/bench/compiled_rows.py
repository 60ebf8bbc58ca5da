"""The bench's rows of the compiled step (compile=true): at full size and at the smallest
side, in turns with the eager one, and each change between the two sides (the first steps at
the new side against its steady rate: what a compiled run loses at a side change)."""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any

import torch

from ..config import Config
from ..data.prepare import cache_folder
from ..step import RecipeStep
from ..warmup import compiled
from .rows import say
from .timing import first_call, in_turns, synthetic_batch, timed

SIDE_CHANGE_STEPS = 3     # the first steps after a change that are timed one by one


@dataclass(frozen=True)
class CompiledStep:
    """The recipe step calling the compiled model (compile=true), how it was compiled in words,
    and the two sides it is timed at: full size and the smallest side of the run's plan (the
    loaders feed it at both too: loader_rows.py)."""
    step: RecipeStep
    how: str
    sides: tuple[int, ...]


def compile_step(config: Config, step: RecipeStep, smallest: int) -> CompiledStep:
    """The recipe step compiled as a run compiles it, for full size and `smallest`."""
    net = compiled(step.model, cache_folder(config), 2, config.cuda_graphs,  # full size, smallest
                   config.compile_dynamic)
    how = ("compiled" + (" + CUDA graphs" if config.cuda_graphs else "")
           + (" (dynamic)" if config.compile_dynamic else ""))
    return CompiledStep(step.with_net(net), how, tuple(dict.fromkeys((config.train_resolution, smallest))))


def compiled_rows(config: Config, step: RecipeStep, compiled: CompiledStep, device: torch.device, steps: int,
                  rounds: int) -> dict[str, Any]:
    """The profile's `compiled` (recorded for people): per side, as a string, its first call,
    img/s and the eager step's beside it; with two sides, `side_changes`."""
    compiled_step = compiled.step
    shapes = "symbolic sizes" if config.compile_dynamic else "static shapes"
    say(f"\n  {compiled.how} ({shapes}), in turns with the eager step at the same size:")
    rates = {}
    rows: dict[str, Any] = {}
    for side in compiled.sides:             # compute-, then launch-bound
        synthetic = synthetic_batch(config.batch_per_device, side, step.classes, device)
        first = first_call(partial(compiled_step, *synthetic), device)
        pair = in_turns({"compiled": partial(compiled_step, *synthetic),
                         "eager": partial(step, *synthetic)}, config.batch_per_device, steps, rounds, device)
        rates[side] = pair["compiled"]
        rows[str(side)] = {"first_step_s": first, "img_per_s": pair["compiled"], "eager_img_per_s": pair["eager"]}
        say(f"  {side:>5} px  first call {first:6.1f} s  {pair['compiled']:10.1f} img/s"
            f"  {pair['compiled'] / pair['eager']:5.2f}x eager")
    if len(rates) == 2:
        rows["side_changes"] = _side_changes(config, compiled_step, rates, device, steps)
    return rows


def _side_changes(config: Config, compiled_step: RecipeStep, rates: dict[int, float], device: torch.device,
                  steps: int) -> dict[str, dict[str, Any]]:
    """Each change between the two compiled sides (`rates`: their steady img/s), both ways, as
    a run makes it: steady steps at one side, then the first SIDE_CHANGE_STEPS steps at the
    other, each timed; their seconds beyond that many steady steps of the new side are what
    the change loses."""
    batch, classes = config.batch_per_device, compiled_step.classes
    sides = list(rates)
    batches = {side: synthetic_batch(batch, side, classes, device) for side in sides}
    changes = {}
    say(f"  side changes of the compiled step (the first {SIDE_CHANGE_STEPS} steps at the new side "
        "against its steady rate):")
    for old, new in ((sides[0], sides[1]), (sides[1], sides[0])):
        timed(partial(compiled_step, *batches[old]), steps, device, warmup=1)
        firsts = [first_call(partial(compiled_step, *batches[new]), device) for _ in range(SIDE_CHANGE_STEPS)]
        steady = batch / rates[new]
        lost = max(0.0, sum(firsts) - SIDE_CHANGE_STEPS * steady)
        changes[f"{old}->{new}"] = {"lost_s": lost, "first_steps_s": firsts, "steady_step_s": steady}
        say(f"  {old:>5} -> {new} px  first steps {', '.join(f'{t:.3f}' for t in firsts)} s against "
            f"{steady:.3f} s steady: {lost:.2f} s lost")
    return changes
