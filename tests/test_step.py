"""submission.step: one run plan and one recipe step, used by the loop, the bench, project
and settings alike."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.utils.data import DistributedSampler

from submission import projection
from submission.bench_profile import parse as read_profile
from submission.config import ConfigError, resolve
from submission.run_plan import RunPlan, StepPlan
from submission.show_settings import describe_settings
from submission.step import build_step

CPU = torch.device("cpu")


def _ffcv_batches_per_rank(samples: int, world: int, batch: int) -> set[int]:
    """What FFCV's training loader gives each rank: its Random order shards with torch's
    DistributedSampler (drop_last=False pads with repeats) when distributed, and the
    loader drops the last incomplete batch."""
    if world == 1:
        return {samples // batch}
    return {len(DistributedSampler(range(samples), num_replicas=world, rank=rank, shuffle=True,
                                   drop_last=False)) // batch for rank in range(world)}


@pytest.mark.parametrize("samples", [1_024, 4_095, 4_096, 10_000, 60_000, 1_281_167])
@pytest.mark.parametrize("world", [1, 2, 3, 8])
@pytest.mark.parametrize("batch", [1, 64, 256, 1_024])
def test_steps_per_epoch_are_the_training_loaders_batches(samples, world, batch):
    config = resolve("cpu", {"batch_per_device": str(batch)})
    expected = _ffcv_batches_per_rank(samples, world, batch)
    assert len(expected) == 1                      # every rank the same number of steps
    if expected == {0}:
        with pytest.raises(ConfigError, match="fewer than one global batch"):
            RunPlan.of(config, samples, world)
        return
    assert RunPlan.of(config, samples, world).steps_per_epoch == expected.pop()


@pytest.mark.parametrize("train_limit, procs, batch", [
    (4_095, 2, 1_024),          # the loop trains 2 steps an epoch, not 4095 // 2048 = 1
    (60_000, 1, 64), (60_000, 3, 100), (10_000, 2, 256), (5_000, 4, 64)])
def test_project_trains_and_evaluates_what_the_loop_would(train_limit, procs, batch):
    config = resolve("cpu", {"train_limit": str(train_limit), "procs_per_node": str(procs),
                             "batch_per_device": str(batch), "epochs": "20"})
    plan = RunPlan.of(config, train_limit)
    if (train_limit, procs, batch) == (4_095, 2, 1_024):
        assert plan.steps_per_epoch == 2
    profile = {"schema": 2, "measured": {}, "settings": {"batch_per_device": batch, "sam_interval": 0},
               "train_step": {str(side): {"img_per_s": 100.0, "first_step_s": 0.0} for side in plan.sides()},
               "eval_img_per_s": 100.0, "loader": {"kind": "ffcv", "img_per_s": 1e9, "threads": 1},
               "fed_step_by_side": {}}
    result = projection.project(config, read_profile(profile, "p.json"))
    trained = sum(p.images for p in result.parts if p.what.startswith("train"))
    assert trained == plan.total_steps * config.global_batch_size
    evaluation = next(p for p in result.parts if p.what.startswith("evaluation"))
    assert evaluation.what.startswith(f"evaluation, {plan.evaluations_until(plan.total_steps)} x ")
    assert f"{plan.steps_per_epoch} steps per epoch" in projection.format_projection(result)


def test_the_plan_evaluates_on_its_cadence_and_at_the_end():
    config = resolve("p4d", {})
    plan = RunPlan.of(config, 1_281_167)
    assert (plan.steps_per_epoch, plan.total_steps, plan.warmup_steps, plan.eval_every) == (625, 17_500, 5_000, 1_875)
    evaluated = [s for s in range(1, plan.total_steps + 1) if plan.evaluates_after(s)]
    assert len(evaluated) == plan.evaluations_until(plan.total_steps) == 10
    assert evaluated[-2:] == [9 * 1_875, 17_500]     # epoch 27 (the 9th), then the budget's end
    assert plan.last_regular_evaluation() == 9 * 1_875
    assert plan.lr(0) == 0 and plan.lr(5_000) == pytest.approx(config.peak_lr)
    assert plan.sides()[0] == 88 and plan.side(plan.total_steps - 1) == 176
    assert plan.at(0) == StepPlan(lr=0.0, side=88)
    assert plan.at(plan.total_steps - 1) == StepPlan(lr=plan.lr(plan.total_steps - 1), side=176)


def test_settings_print_the_plan_of_the_published_run():
    text = describe_settings("mild")
    assert ("625 steps an epoch, 17,500 steps, warm-up 5,000 steps, 10 evaluations "
            "(every 1,875 steps)") in text


def test_the_recipe_step_trains_with_its_step_plan_and_averages_on_its_cadence():
    config = resolve("cpu", {})
    torch.manual_seed(0)
    step = build_step(config, 10, CPU)
    assert step.ema is not None and step.eval_model is step.ema.model
    seen = []
    step.model.conv1.register_forward_pre_hook(lambda m, args: seen.append(args[0].shape[-1]))
    images = torch.randint(0, 256, (4, 3, 32, 32), dtype=torch.uint8).contiguous(
        memory_format=torch.channels_last)
    labels = torch.randint(0, 10, (4,))
    before = step.model.fc.weight.detach().clone()
    averaged = step.ema.model.fc.weight.detach().clone()
    loss = step.train_on(images, labels, StepPlan(lr=0.1, side=16))
    assert seen == [16] and torch.isfinite(loss)
    assert [group["lr"] for group in step.optimizer.param_groups] == [0.1]
    assert not torch.equal(step.model.fc.weight, before)         # the weights moved
    step.update_average(1)                                       # not on the cadence: unchanged
    assert torch.equal(step.ema.model.fc.weight, averaged)
    step.update_average(config.ema_update_every_batches)
    assert not torch.equal(step.ema.model.fc.weight, averaged)


class _Recorder:
    """Wraps one of submission.step's functions, keeping each call's arguments and result."""

    def __init__(self, function):
        self.function, self.calls = function, []

    def __call__(self, *args, **kwargs):
        result = self.function(*args, **kwargs)
        self.calls.append((args, result))
        return result


@pytest.mark.parametrize("sam_interval, passes", [(1, 2), (10, 1)])
def test_each_forward_pass_draws_its_own_mixup_and_colout_resize_run_once_a_step(
        monkeypatch, sam_interval, passes):
    """Composer v0.8.0 runs SAM's closure (the trainer's _train_microbatches) from the
    un-mixed tuple batch, so MixUp (BEFORE_FORWARD) draws a coefficient and a permutation
    for each pass; ColOut and progressive resizing (AFTER_DATALOADER) run once a step."""
    import submission.step as step_module
    recorders = {name: _Recorder(getattr(step_module, name))
                 for name in ("mixing_coefficient", "mixup_batch", "colout_batch", "resize_batch")}
    for name, recorder in recorders.items():
        monkeypatch.setattr(step_module, name, recorder)
    config = resolve("cpu", {"recipe": "hot", "batch_per_device": "8",
                             "sam_interval": str(sam_interval)})
    assert config.mixup_alpha > 0 and config.colout_fraction > 0
    torch.manual_seed(0)
    np.random.seed(0)
    step = build_step(config, 10, CPU)
    seen: list[torch.Tensor] = []
    step.model.register_forward_pre_hook(lambda module, args: seen.append(args[0].detach().clone()))
    images = torch.randint(0, 256, (8, 3, 32, 32), dtype=torch.uint8)
    labels = torch.randint(0, 10, (8, 1))
    assert torch.isfinite(step(images, labels, 24))

    assert len(recorders["colout_batch"].calls) == len(recorders["resize_batch"].calls) == 1
    draws = recorders["mixup_batch"].calls
    assert len(recorders["mixing_coefficient"].calls) == len(draws) == len(seen) == passes
    unmixed = recorders["resize_batch"].calls[0][1]
    for (args, (mixed, _, permutation)), net_input in zip(draws, seen):
        assert args[0] is unmixed                      # every pass mixes the un-mixed batch
        mixing = args[2]
        assert torch.allclose(net_input, unmixed * (1 - mixing) + unmixed[permutation] * mixing)
        assert torch.equal(net_input, mixed)
    if passes == 2:
        assert not torch.equal(seen[0], seen[1])       # the second pass saw a new mix
        assert recorders["mixing_coefficient"].calls[0][1] != recorders["mixing_coefficient"].calls[1][1]


@pytest.mark.parametrize("overrides, floored", [
    ({}, {}),                                                          # Mild: no side floors
    ({"recipe": "medium", "scale_schedule_ratio": "1"}, {120: 119}),
    ({"recipe": "hot", "scale_schedule_ratio": "3"}, {100: 99})])      # ColOut: 167-px batches
def test_the_plan_trains_at_the_floored_side_and_keeps_the_pinned_one(overrides, floored):
    from submission.config import resolve
    plan = RunPlan.of(resolve("p4d", overrides), 1_281_167)
    assert set(floored) <= set(plan.sides())
    for side, first, steps in plan.side_runs():
        assert plan.side(first) == side                     # the pinned side, as the bench keys it
        assert plan.trained_side(first) == plan.trained_side(first + steps - 1) == floored.get(side, side)


@pytest.mark.filterwarnings("ignore:torch.cuda.amp.GradScaler is enabled, but CUDA")
def test_amp_is_fp16_with_a_grad_scaler_and_bf16_is_refused_on_an_emulating_gpu(monkeypatch):
    from submission.config import resolve
    from submission.step import autocast_for, grad_scaler
    cuda, cpu = torch.device("cuda", 0), torch.device("cpu")
    published = resolve("p4d")
    assert isinstance(grad_scaler(published, cuda), torch.amp.GradScaler)
    assert grad_scaler(published, cpu) is None
    assert grad_scaler(resolve("p4d", {"amp_dtype": "bf16"}), cuda) is None
    with autocast_for(published, cpu)():
        assert torch.get_autocast_dtype("cpu") == torch.float16
    # a V100 without a V100 descriptor (system=local): bf16 only by emulation
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True: including_emulation)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "Tesla V100-SXM2-16GB")
    with pytest.raises(RuntimeError, match="V100.*no bf16 support"):
        autocast_for(resolve("p4d", {"amp_dtype": "bf16"}), cuda)


@pytest.mark.parametrize("system, overrides", [
    ("p4d", {}), ("p4d", {"recipe": "medium", "scale_schedule_ratio": "0.75"}),
    ("p4d", {"recipe": "hot", "scale_schedule_ratio": "3"}), ("p4d", {"recipe": "baseline"}),
    ("cpu", {}), ("cpu", {"recipe": "hot"}), ("cpu", {"resize_granularity": "epoch", "epochs": "2"})])
def test_the_side_runs_found_by_bisection_are_those_of_every_step(system, overrides):
    plan = RunPlan.of(resolve(system, overrides), 40_000)
    every_step = []
    for step in range(plan.total_steps):
        side = plan.side(step)
        if every_step and every_step[-1][0] == side:
            every_step[-1][2] += 1
        else:
            every_step.append([side, step, 1])
    assert [tuple(run) for run in every_step] == plan.side_runs()
    assert len(plan.side_runs()) > 1 or overrides.get("recipe") == "baseline"
