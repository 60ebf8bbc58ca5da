"""The walk over a run's schedule (run_plan.RunPlan, the one the training loop follows): the
parts of a run that ends after a given step, each at the rates of the rate model."""
from __future__ import annotations

import math

from ..bench_profile import BenchProfile
from ..config import Config
from ..data.sources import PUBLISHED_SPLIT_SIZES
from ..run_plan import RunPlan
from .rates import Rates
from .result import EPOCH_STARTS, EVALUATION, SET_UP, TRAINING, Part, minutes


def dataset_images(config: Config) -> tuple[int, int]:
    """Training and evaluation images of the run."""
    train, val = PUBLISHED_SPLIT_SIZES[config.dataset]
    return (min(train, config.train_limit or train), min(val, config.eval_limit or val))


def training_parts(config: Config, plan: RunPlan, rates: Rates, stop: int) -> list[Part]:
    """One part for each stretch of steps at one side, up to step `stop`."""
    parts = []
    for side, first, steps in plan.side_runs():
        steps = min(steps, stop - first)
        if steps <= 0:
            break
        rate, limit = rates.training(side)
        images = steps * config.global_batch_size
        parts.append(Part(TRAINING, f"train {side} px, epochs {plan.epoch(first):.3g}-"
                                    f"{plan.epoch(first + steps):.3g}",
                          images, rate, limit, images / rate, side))
    return parts


def evaluation_part(plan: RunPlan, rates: Rates, eval_images: int, stop: int) -> Part:
    count = plan.evaluations_until(stop)
    return Part(EVALUATION, f"evaluation, {count} x {eval_images:,} images", count * eval_images,
                rates.eval_rate, "eval", count * eval_images / rates.eval_rate)


def set_up_part(config: Config, plan: RunPlan, profile: BenchProfile, stop: int) -> Part:
    """The set-up inside the timed region: the loaders' first batch and first evaluation
    pass as the bench's fresh-process probe measured them (else its first-epoch and
    first-evaluation extra time), and without the warm-up the first step at each side."""
    # with the warm-up, the first step at each side is paid before run_start
    first_steps = 0.0 if config.warmup else sum(
        max(0.0, profile.train_step[side].first_step_s
            - config.batch_per_device / profile.train_step[side].img_per_s)
        for side, first, _ in plan.side_runs() if first < stop and side in profile.train_step)
    probes = profile.loader_setup_s
    if probes is not None:
        probe = probes.warm if config.warmup else probes.cold
        in_run = probe.train_first_batch_s + probe.val_first_pass_s
        what = ("in-run set-up: the loaders' first batch and first evaluation pass "
                + ("(pipelines compiled by the warm-up before run_start)" if config.warmup
                   else "(FFCV compiling: warmup=false), first step at each side"))
    else:
        setup = profile.setup_s
        in_run = (setup.in_run_first_epoch_extra or 0.0) + setup.first_eval_extra if setup else 0.0
        what = "in-run set-up: FFCV first epoch and first evaluation, first step at each side"
    return Part(SET_UP, what, 0, 0.0, "set-up", in_run + first_steps)


def epoch_start_parts(plan: RunPlan, rates: Rates, stop: int) -> list[Part]:
    """The loader's start at every epoch after the first (whose start is in the set-up)."""
    start_s = rates.loader.figures.epoch_start_s
    restarts = math.ceil(stop / plan.steps_per_epoch) - 1
    if start_s is None or restarts <= 0:
        return []
    return [Part(EPOCH_STARTS, f"the loader's start at each of {restarts} later epochs, "
                               f"{start_s:.2f} s each", 0, 0.0, "loader", restarts * start_s)]


def parts_until(config: Config, plan: RunPlan, profile: BenchProfile, rates: Rates,
                eval_images: int, stop: int) -> list[Part]:
    """The run's parts when it ends after step `stop` (an evaluation step, or the budget)."""
    return (training_parts(config, plan, rates, stop) + [evaluation_part(plan, rates, eval_images, stop),
                                                         set_up_part(config, plan, profile, stop)]
            + epoch_start_parts(plan, rates, stop))


def early_stop(config: Config, plan: RunPlan, profile: BenchProfile, rates: Rates,
               eval_images: int) -> tuple[float, float] | None:
    """(epoch, minutes) of a run that reaches the target at the last evaluation before the
    end of its budget; None when there is no such evaluation."""
    last_regular = plan.last_regular_evaluation()
    if not last_regular:
        return None
    return plan.epoch(last_regular), minutes(parts_until(config, plan, profile, rates, eval_images,
                                                         last_regular))
