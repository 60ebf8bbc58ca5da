"""The bench's loader rows, in this process: the run's train loader alone (FFCV's,
torchvision's or the device loader's, with its rate per thread and, on a GPU, its device
memory), the step fed by it (in turns with the synthetic step, at full size and at the
smallest side: what the loader costs the step), with compile=true the compiled step fed by it
likewise (at the compiled rows' two sides), and evaluation through the loader; then the same
for the loader beside it, and one row per loader side by side. With the torchvision
loader, its CPU work per image (augmentation_rows.py) after its own rows."""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import torch

from .. import distributed
from ..bench_profile import Augmentation, FedStep, Loader, LoaderBeside, SetupExtra
from ..config import Config
from ..data.data_json import PreparedData
from ..data.pillow_build import pillow_build
from ..loader_kinds import TrainLoader, kind_of
from ..loaders.protocol import Loader as RunLoader
from ..loaders.protocol import cycle, one_epoch
from ..loaders.run_loaders import augmentation_of, run_loaders
from ..step import RecipeStep
from .augmentation_rows import augmentation_cost
from .compiled_rows import CompiledStep
from .rows import rate_row, say
from .step_rows import Batch
from .timing import describe_costs, loader_alone, per_batch_costs, sync, synthetic_batch, timed


@dataclass(frozen=True)
class LoaderRows:
    """The profile's parts the loader rows measure: the run's loader (BenchProfile's `loader`,
    `fed_step_by_side` and `eval_img_per_s`, here as one LoaderBeside), the first evaluation
    pass's extra (`setup_s`), its augmentation's CPU work, and the loader beside it."""
    own: LoaderBeside
    setup_s: SetupExtra
    augmentation: Augmentation | None
    beside: LoaderBeside


def beside(config: Config) -> TrainLoader:
    """The loader measured beside the run's (its kind's `beside`, loader_kinds.py): the device
    loader beside FFCV's or torchvision's; beside the device loader, the one the recipe would
    use without it, the first that runs the configuration's augmentation."""
    augmented = augmentation_of(config) is not None
    return next(word for word in kind_of(config.train_loader).beside if kind_of(word).runs(augmented))


def loader_rows(config: Config, step: RecipeStep, data: PreparedData, device: torch.device, steps: int,
                rounds: int, full: Batch, base: float, sides: tuple[int, ...],
                compiled: CompiledStep | None = None) -> LoaderRows:
    """The run's own loaders in this process: the loader alone, the step fed by it at each of
    `sides` in turns with the synthetic step (and the `compiled` step at its sides, in turns
    with itself on synthetic batches), evaluation through the loader (epochs cycle on small
    sets); then the same for the loader `beside` the run's, and both side by side."""
    fed = Feeding(step, full, base, sides, compiled)
    own, eval_first = _one_loader(config, fed, data, device, steps, rounds)
    augmentation = augmentation_cost(config, data) if kind_of(config.train_loader).pil_workers else None
    other = config.replaced({"train_loader": beside(config)}, "the bench: the loader beside the run's")
    other_part, _ = _one_loader(other, fed, data, device, steps, rounds)
    _side_by_side(config, (own, other_part), sides)
    first_eval_extra = max(0.0, 1 / eval_first - 1 / own.eval_img_per_s)
    return LoaderRows(own=own, setup_s=SetupExtra(first_eval_extra=first_eval_extra), augmentation=augmentation,
                      beside=other_part)


@dataclass(frozen=True)
class Feeding:
    """What each loader feeds: the recipe step at `sides` (`full`: its synthetic full-size
    batch; `base`: its img/s on it, the rows' reference), and the compiled step, if any."""
    step: RecipeStep
    full: Batch
    base: float
    sides: tuple[int, ...]
    compiled: CompiledStep | None


def _one_loader(config: Config, feeding: Feeding, data: PreparedData, device: torch.device, steps: int,
                rounds: int) -> tuple[LoaderBeside, float]:
    """One loader kind (config.train_loader) in this process: alone, feeding the step at each
    of its sides in turns with the synthetic step (the compiled step too), two evaluation
    passes (the second's img/s in the part, the first's beside it); its device memory."""
    step, base = feeding.step, feeding.base
    batch, memory = config.batch_per_device, _memory_probe(device)
    train_loader, val_loader = run_loaders(config, distributed.Context(0, 0, 1, device), 0,
                                           data.train_path, data.val_path, data.eval_samples,
                                           shard=True)
    kind, figures = train_loader.kind, train_loader.figures()
    img_per_s, epoch_start_s = loader_alone(train_loader, steps * 3, device)
    memory_bytes = memory()
    say(f"\n{rate_row(f'{kind.name} train loader alone', img_per_s, base)}")
    say(f"  per loader thread: {img_per_s / figures.threads:.1f} img/s ({figures.threads} "
        f"{kind.threads_are}" + (f", {pillow_build()})" if kind.pil_workers else ")")
        + (f"; its device memory at most {memory_bytes / 2**20:,.0f} MiB" if memory_bytes else ""))
    costs = per_batch_costs(train_loader, batch, img_per_s)
    say("  " + describe_costs(kind, costs, config.workers_per_device))
    say(f"  the loader alone is timed inside epochs; each epoch's start costs "
        f"{epoch_start_s or 0:.2f} s more than a steady batch (threads started, "
        "pipeline filled)")
    loader = Loader(kind=config.train_loader, img_per_s=img_per_s, threads=figures.threads,
                    resolution=config.train_resolution, epoch_start_s=epoch_start_s,
                    device_memory_bytes=memory_bytes, torch_ops_per_batch=costs.torch_ops,
                    augmentation_ops_per_batch=costs.augmentation_ops, host_s_per_batch=costs.host_s,
                    device_part_s_per_batch=costs.device_s)
    fed = _fed_rows(config, step, train_loader, device, steps, rounds, feeding.full, base, feeding.sides)
    compiled_fed = _compiled_fed_rows(config, feeding.compiled, train_loader, device, steps, rounds)
    eval_first, eval_second = _eval_passes(step, val_loader, device)
    say(rate_row(f"evaluation through the {kind.name} loader, first pass", eval_first, base))
    say(rate_row(f"evaluation through the {kind.name} loader, second pass", eval_second, base))
    train_loader.close()
    val_loader.close()
    return LoaderBeside(loader=loader, fed_step_by_side=fed, eval_img_per_s=eval_second,
                        compiled_fed_step_by_side=compiled_fed), eval_first


def _fed_rows(config: Config, step: RecipeStep, train_loader: RunLoader, device: torch.device, steps: int,
              rounds: int, full: Batch, base: float, sides: tuple[int, ...]) -> dict[int, FedStep]:
    """The step fed by the loader in turns with the synthetic step, best round of each: their
    difference is the loader's work the step does not hide (project's loader cost); at full
    size, then at the smallest side, resized as the loop does (a launch-bound step may suffer
    more from the loader's threads than a compute-bound one)."""
    name = train_loader.kind.name
    say(f"  the step fed by the {name} loader, in turns with the synthetic step (loader work the "
        "step does not hide):")
    found = {}
    for side in sides:
        v = found[side] = _fed_in_turns(config, step, train_loader, device, steps, rounds, full, side)
        if side == config.train_resolution:
            say(rate_row(f"step fed by the {name} loader", v.fed_img_per_s, base, v.synthetic_img_per_s))
        _say_fed(side, v)
    return found


def _compiled_fed_rows(config: Config, compiled: CompiledStep | None, train_loader: RunLoader,
                       device: torch.device, steps: int, rounds: int) -> dict[int, FedStep] | None:
    """The compiled step fed by the loader in turns with the compiled step on synthetic
    batches, at the compiled rows' two sides, as _fed_rows; None (said) without compile=true."""
    name = train_loader.kind.name
    if compiled is None:
        why = ("; on a CPU too, where Inductor's C++ build of the step takes minutes"
               if device.type == "cpu" else "")
        say(f"  the compiled step fed by the {name} loader: not measured (compile=false: the bench "
            f"compiles the step only with compile=true{why})")
        return None
    say(f"  the {compiled.how} step fed by the {name} loader, in turns with it on synthetic batches:")
    full = synthetic_batch(config.batch_per_device, config.train_resolution, compiled.step.classes, device)
    found = {}
    for side in compiled.sides:
        found[side] = _fed_in_turns(config, compiled.step, train_loader, device, steps, rounds, full, side)
        _say_fed(side, found[side])
    return found


def _fed_in_turns(config: Config, step: RecipeStep, train_loader: RunLoader, device: torch.device, steps: int,
                  rounds: int, full: Batch, side: int) -> FedStep:
    """`step` at `side` fed by the loader and on the synthetic batch `full`, in turns, best
    round of each."""
    batch, ahead = config.batch_per_device, train_loader.figures().batches_ahead
    fed, synthetic = [], []
    for _ in range(rounds):
        # a stream of its own for each fed turn, its thread stopped before the synthetic
        # turn, which a live loader thread would slow too (ffcv_loaders.to_device); the
        # warm-up takes the epoch's start and the batches the loader makes ahead
        stream = cycle(train_loader)
        fed.append(batch / timed(lambda: step(*next(stream), side), steps, device,  # noqa: B023 - timed here
                                 warmup=ahead + 2))
        stream.close()
        synthetic.append(batch / timed(partial(step, *full, side), steps, device))
    return FedStep(fed_img_per_s=max(fed), synthetic_img_per_s=max(synthetic), in_turns=True)


def _say_fed(side: int, v: FedStep) -> None:
    say(f"  {side:>5} px  {v.fed_img_per_s:10.1f} img/s against {v.synthetic_img_per_s:.1f}: "
        f"{v.fed_img_per_s / v.synthetic_img_per_s:.2f}x, "
        f"{max(0.0, 1 / v.fed_img_per_s - 1 / v.synthetic_img_per_s) * 1000:.2f} ms per image")


def _memory_probe(device: torch.device) -> Callable[[], int | None]:
    """A function that returns the bytes of device memory allocated above what was in use when
    the probe was made (its peak since then), on a GPU; None elsewhere."""
    if device.type != "cuda":
        return lambda: None
    sync(device)
    torch.cuda.reset_peak_memory_stats(device)
    before = torch.cuda.memory_allocated(device)
    return lambda: max(0, torch.cuda.max_memory_allocated(device) - before)


def _side_by_side(config: Config, loaders: tuple[LoaderBeside, ...], sides: tuple[int, ...]) -> None:
    """One row per loader: delivered img/s and CPU threads, the step fed at each side as a
    ratio of the synthetic step (the compiled step's likewise, where measured), evaluation,
    device memory."""
    compiled_sides = tuple(loaders[0].compiled_fed_step_by_side or ())
    say("\n  the loaders side by side (the step fed: its rate over the synthetic step's at that side"
        + ("; compiled: the compiled step's)" if compiled_sides else ")") + ":")
    say(f"  {'loader':<24}{'img/s alone':>12}{'threads':>9}" + "".join(f"{f'fed {side} px':>12}" for side in sides)
        + "".join(f"{f'compiled {side}':>13}" for side in compiled_sides)
        + f"{'eval img/s':>12}{'device MiB':>12}{'ops/batch':>11}{'host ms':>9}")
    for measured in loaders:
        loader, fed = measured.loader, measured.fed_step_by_side
        label = kind_of(loader.kind).name + (" (the run's)" if loader.kind == config.train_loader else "")
        ratios = "".join(f"{fed[side].fed_img_per_s / fed[side].synthetic_img_per_s:>11.2f}x" for side in sides)
        compiled = measured.compiled_fed_step_by_side or {}
        ratios += "".join(f"{compiled[side].fed_img_per_s / compiled[side].synthetic_img_per_s:>12.2f}x"
                          for side in compiled_sides)
        memory = (f"{loader.device_memory_bytes / 2**20:>12,.0f}" if loader.device_memory_bytes is not None
                  else f"{'-':>12}")
        ops = loader.torch_ops_per_batch
        host_ms = float("nan") if loader.host_s_per_batch is None else loader.host_s_per_batch * 1e3
        say(f"  {label:<24}{loader.img_per_s:>12,.1f}{loader.threads:>9}{ratios}{measured.eval_img_per_s:>12,.1f}"
            f"{memory}{'n/a' if ops is None else ops:>11}{host_ms:>9.1f}")


def _eval_passes(step: RecipeStep, val_loader: RunLoader, device: torch.device) -> tuple[float, float]:
    """img/s of two evaluation passes through the run's loader: the first carries FFCV's
    compilation."""
    step.model.eval()
    passes = []
    with torch.no_grad(), step.autocast():
        for _ in range(2):
            start, seen = time.perf_counter(), 0
            for images, _ in one_epoch(val_loader):
                step.model(step.normalize(images))
                seen += images.shape[0]
            sync(device)
            passes.append(seen / (time.perf_counter() - start))
    step.model.train()
    return passes[0], passes[1]
