"""The bench's rows of the recipe step on synthetic batches: the step and a plain torchvision
loop in turns, each progressive-resizing side of the run's plan, the loop's work around a step,
the evaluation forward, and MFU. Each returns its part of the profile (bench_profile.py)."""
from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import torch
import torchvision

from ..bench_profile import LoopOverhead, SideStep
from ..config import Config
from ..methods.loss import LOSSES
from ..methods.progressive_resize import resize_batch
from ..run_plan import RunPlan
from ..step import RecipeStep, autocast_dtype, autocast_for, grad_scaler, optimizer_step
from .rows import rate_row, say
from .timing import first_call, in_turns, matmul_peak, synthetic_batch, timed

Batch = tuple[torch.Tensor, torch.Tensor]          # uint8 images, labels (timing.synthetic_batch)
TrainStep = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]    # a step on a batch: its loss


def train_flops(step: RecipeStep, images: torch.Tensor, labels: torch.Tensor) -> float:
    """FLOPs of one forward and backward of the recipe's model on this batch."""
    from torch.utils.flop_counter import FlopCounterMode
    with FlopCounterMode(display=False) as counter:
        step.loss_fn(step.model(step.normalize(images)), labels, step.config.label_smoothing).backward()
    step.model.zero_grad(set_to_none=True)
    return float(counter.get_total_flops())


def plain_loop(config: Config, classes: int, device: torch.device,
               normalize: Callable[[torch.Tensor], torch.Tensor]) -> TrainStep:
    """step(images, labels) of a plain torchvision loop: ResNet-50 (channels last),
    cross-entropy, torch.optim.SGD, with fp16 a GradScaler as in PyTorch's AMP recipe."""
    plain = torchvision.models.resnet50(num_classes=classes).to(device, memory_format=torch.channels_last)
    optimizer = torch.optim.SGD(plain.parameters(), lr=0.1, momentum=0.875)
    scaler, autocast = grad_scaler(config, device), autocast_for(config, device)
    return lambda images, labels: optimizer_step(plain, optimizer, scaler, autocast,
                                                 LOSSES["cross_entropy"], normalize(images), labels, 0.0)


def step_rows(config: Config, step: RecipeStep, full: Batch, device: torch.device, steps: int, rounds: int,
              plain: bool = True) -> tuple[float, float | None]:
    """img/s of the recipe step and (plain) of a plain torchvision loop on synthetic batches,
    in turns (None: the plain loop not timed)."""
    batch = config.batch_per_device
    if not plain:
        rate = in_turns({"step": lambda: step(*full)}, batch, steps, rounds, device)["step"]
        say("\n" + rate_row("recipe step, synthetic batches", rate, rate))
        return rate, None
    plain_step = plain_loop(config, step.classes, device, step.normalize)
    rates = in_turns({"step": lambda: step(*full), "plain_loop": lambda: plain_step(*full)},
                     batch, steps, rounds, device)
    base = rates["step"]
    own = ["the compiled step", "the fed step"] if config.compile else ["the fed step"]
    say(f"\n  (timed in turns, the best of {rounds} rounds each: the plain loop with the first row; "
        f"{' and '.join(own)} with a recipe step of {'their' if len(own) > 1 else 'its'} own, "
        f"shown beside {'them' if len(own) > 1 else 'it'})")
    say(rate_row("recipe step, synthetic batches", base, base))
    say(rate_row("plain torchvision loop (CE, SGD)", rates["plain_loop"], base))
    return base, rates["plain_loop"]


def side_rows(config: Config, step: RecipeStep, plan: RunPlan, device: torch.device, steps: int,
              only: tuple[int, ...] | None = None) -> dict[int, SideStep]:
    """Per progressive-resizing side of the run's plan (or `only` these): the first step
    (set-up) and the steady rate."""
    say("\n  progressive-resizing sizes of the run's plan: first step (s), steady img/s")
    batch, classes = config.batch_per_device, step.classes
    sam = config.sam_interval
    sizes = {}
    for side in sorted(set(only)) if only else plan.sides():
        synthetic = synthetic_batch(batch, side, classes, device)
        first = first_call(partial(step, *synthetic), device)
        sizes[side] = SideStep(img_per_s=batch / timed(partial(step, *synthetic), steps, device, 1),
                               first_step_s=first, timed_steps=steps if sam else None,
                               sam_steps=steps // sam if sam else None)
        say(f"  {side:>5} px  {first:7.2f} s  {sizes[side].img_per_s:10.1f} img/s"
            + (f"  (mean of {steps} steps, {steps // sam} of them SAM)" if sam else ""))
    return sizes


def loop_overhead(config: Config, step: RecipeStep, full: Batch, at_smallest: SideStep, smallest: int,
                  device: torch.device, steps: int) -> LoopOverhead:
    """The loop's own work around a step at the smallest side: normalising the loader's
    full-size batch, resizing it, and the EMA update (every ema_update_every_batches)."""
    prepare_s = timed(lambda: resize_batch(step.normalize(full[0]), smallest, config.resize_mode),
                      steps, device)
    ema = step.ema
    ema_s = timed(lambda: ema.update(step.model, ema.every), steps, device) / ema.every if ema else 0.0
    step_s = config.batch_per_device / at_smallest.img_per_s
    overhead = LoopOverhead(normalize_resize_s=prepare_s, ema_s=ema_s, side=smallest,
                            share_of_step=(prepare_s + ema_s) / step_s,
                            tracking_s=tracking_per_step(config, steps))
    say(f"\n  around each step at {smallest} px: normalise + resize {prepare_s * 1000:.1f} ms, EMA "
        f"update {ema_s * 1000:.1f} ms (per step, updating every {config.ema_update_every_batches}) = "
        f"{(prepare_s + ema_s) / step_s * 100:.1f}% of a step at that size")
    if overhead.tracking_s is not None:
        say(f"  tracker={config.tracker}: {overhead.tracking_s * 1000:.3f} ms per step "
            f"= {overhead.tracking_s / step_s * 100:.3f}% of a step at that size (target under 1%)")
    return overhead


def tracking_per_step(config: Config, steps: int) -> float | None:
    """Seconds per training step of the trackers' work, as a run does it: a progress record
    kept every progress_every_steps steps, all of them written to TensorBoard at one evaluation
    (into a folder thrown away after). None when no TensorBoard tracker is asked for (W&B's
    writing is its own service's, outside this process)."""
    import tempfile

    from ..tracking import TENSORBOARD, TensorBoardWriter, Tracking
    if TENSORBOARD not in config.trackers:
        return None
    every, count = config.progress_every_steps, max(steps, 10 * config.progress_every_steps)
    with tempfile.TemporaryDirectory() as folder:
        trackers = Tracking([TensorBoardWriter(Path(folder))])
        start = time.perf_counter()
        for step in range(every, count + 1, every):
            trackers.record({"kind": "window", "step": step, "loss": 2.0, "lr": 0.1, "img_per_s": 100.0,
                             "side": 32, "epoch": step / 100, "minutes": step / 600})
        trackers.record({"kind": "eval", "step": count, "accuracy": 0.5})
        trackers.close()
        return (time.perf_counter() - start) / count


def eval_forward(config: Config, step: RecipeStep, classes: int, device: torch.device, steps: int,
                 base: float) -> float:
    """img/s of the evaluation forward alone, at its size, on synthetic batches (no loader)."""
    eval_images = synthetic_batch(config.eval_batch, config.eval_resolution, classes, device)[0]
    step.model.eval()
    with torch.no_grad(), step.autocast():
        rate = config.eval_batch / timed(lambda: step.model(step.normalize(eval_images)), steps, device)
    step.model.train()
    say("\n" + rate_row(f"evaluation forward, synthetic, {config.eval_resolution} px", rate, base))
    return rate


def mfu(config: Config, step: RecipeStep, full: Batch, base: float, device: torch.device,
        rounds: int) -> dict[str, Any]:
    """FLOPs of forward+backward at full size over a matmul peak measured on the same device
    and dtype (fp16 autocast is refused on CPUs by preflight): the profile's `mfu`."""
    dtype = autocast_dtype(config) or torch.float32
    flops = train_flops(step, *full) / config.batch_per_device
    peak = matmul_peak(device, dtype, 4096 if device.type == "cuda" else 2048, rounds)
    utilisation = base * flops / peak
    say(f"\n  MFU: {flops / 1e9:.2f} GFLOP per image (fwd+bwd, {config.train_resolution} px) x {base:.1f} "
        f"img/s / {peak / 1e9:.0f} GFLOP/s measured matmul peak ({dtype}) = {utilisation * 100:.1f}%")
    return {"flops_per_image": flops, "peak_flops": peak, "dtype": str(dtype), "mfu": utilisation}
