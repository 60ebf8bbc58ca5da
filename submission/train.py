"""One time-to-accuracy run: the training loop. Started by torchrun, one process per device
(the campaign runs torchrun through submission.launcher, with torchrun's own arguments):

    python -m torch.distributed.run ... -m submission.train --config C --data D \
        --run-index I --seed S --result results/<system>/resnet/result_I.txt

(its arguments: submission.train_args.TrainArgs, which the campaign writes them with)

Rank 0 writes the MLPerf log to `<result>.partial` and renames it to `<result>` once
run_stop is written (status success, or aborted when the epoch budget ends below the
target). An interrupted or crashed run logs run_stop aborted with the reason and keeps
the .partial name, so it is never taken for a finished run.

SIGTERM or SIGINT ends the run as interrupted (submission.stop_signals). Processes on
nodes other than node 0 start with --follow: rank 0 tells them which run to do (or that
the campaign is over, --finish) and with which settings (submission.followers).
"""
from __future__ import annotations

import contextlib
import json
import random
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn

from . import distributed as dist_utils
from . import energy, inventory, out_of_memory, tracking
from .config import Config
from .data import fingerprint
from .data.data_json import PreparedData
from .data.prepare import cache_folder
from .data.sharding import eval_batch_sizes
from .durable import put_in_place
from .followers import RunSpec, agree_on_run
from .loaders import compile_cache, ffcv_threads
from .loaders.protocol import Loader, one_epoch
from .loaders.run_loaders import run_loaders
from .mlperf_log import RunLog
from .private_folder import numba_folder
from .progress import Reporter
from .run_folder import partial_of
from .run_plan import RunPlan
from .step import Normalizer, RecipeStep, build_step
from .stop_signals import INTERRUPTED_EXIT, STOP, Interrupted, die_with_parent
from .train_args import TrainArgs
from .warmup import compiled, compiled_graphs, warm_up, warm_up_loaders


@dataclass
class RunOutcome:
    success: bool
    accuracy: float
    epochs: float
    minutes: float
    model: torch.nn.Module          # the trained weights
    eval_model: torch.nn.Module     # what evaluation scored: the EMA copy when EMA is on


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


@torch.no_grad()
def evaluate(model: nn.Module, loader: Loader, normalize: Normalizer,
             autocast: Callable[[], contextlib.AbstractContextManager], expected_samples: int) -> float:
    was_training = model.training
    model.eval()
    totals = torch.zeros(2, dtype=torch.float64, device=normalize.mean.device)
    with autocast():
        for images, labels in one_epoch(loader):
            logits = model(normalize(images))
            totals[0] += (logits.argmax(dim=1) == labels.view(-1)).sum()
            totals[1] += labels.numel()
    dist_utils.all_reduce_sum(totals)
    model.train(was_training)
    correct, count = totals.tolist()
    if int(count) != expected_samples:
        raise RuntimeError(f"evaluation scored {int(count)} samples, expected {expected_samples}")
    return correct / count


def set_up(config: Config, data: PreparedData, ctx: dist_utils.Context, seed: int, log: RunLog,
           say: Callable[[str], None]) -> tuple[RunPlan, RecipeStep]:
    """Everything before run_start: the plan, the recipe step (compiled with compile=true),
    the MLPerf log's set-up entries and, with warmup=true, the warm-ups."""
    seed_everything(seed)
    # before FFCV's first import, which compiles numba code: kept for the campaign's next runs
    compile_cache.install(numba_folder(cache_folder(config)))
    ffcv_threads.install()      # else FFCV's Loaders set torch's threads to their worker count
    if ctx.device.type == "cpu":
        torch.set_num_threads(inventory.cpu_threads(config))
    torch.backends.cudnn.benchmark = config.cudnn_benchmark

    plan = RunPlan.of(config, data.train_samples, ctx.world_size)
    step_fn = build_step(config, data.num_classes, ctx.device, ddp=ctx.distributed,
                         local_rank=ctx.local_rank)
    log.weights_initialization(step_fn.model)
    if config.compile:
        step_fn = step_fn.with_net(compiled(step_fn.net, cache_folder(config), len(plan.sides()),
                                            config.cuda_graphs, config.compile_dynamic))
    log.hyperparameters(config, seed, data.train_samples, data.eval_samples)
    if config.warmup:
        warm_up(step_fn, plan, eval_batch_sizes(data.eval_samples, config.eval_batch, ctx.rank, ctx.world_size),
                ctx.device, log=say, calls_per_side=3 if config.cuda_graphs else 1,
                net_is_compiled=config.compile, dynamic_shapes=config.compile_dynamic)
        if data.synthetic_train_path:
            synthetic_train, synthetic_val = run_loaders(config, ctx, seed, data.synthetic_train_path,
                                                         data.synthetic_val_path, data.synthetic_samples,
                                                         shard=False)
            warm_up_loaders(synthetic_train, synthetic_val, log=say)
    return plan, step_fn


def train_run(config: Config, data: PreparedData, ctx: dist_utils.Context, seed: int,
              log: RunLog, label: str, progress_file: Path | None = None,
              trackers: tracking.Tracking | None = None) -> RunOutcome:
    """Build, then train until the target or the epoch budget; return the outcome."""
    def say(line: str) -> None:
        if ctx.is_main:
            print(f"{label} {line}", flush=True)

    plan, step_fn = set_up(config, data, ctx, seed, log, say)
    meter = energy.meter_for(ctx.device.type, ctx.device.index or 0, ctx.local_rank)
    synchronize(ctx.device)
    log.init_stop_run_start()   # ---- timed region starts: MLPerf run_start ----
    meter.start()
    run_start, graphs_at_start = time.monotonic(), compiled_graphs()
    report = Reporter(label, plan.total_steps, plan.steps_per_epoch, config.global_batch_size,
                      config.progress_every_steps, ctx.is_main, progress_file,
                      every_seconds=config.progress_every_seconds, tracking=trackers)
    train_loader, val_loader = open_loaders(config, ctx, seed, data, plan)
    STOP.in_loop = True
    last_step = plan.total_steps        # lowered when the ranks agree to stop early
    step, epoch, accuracy, reached = 0, 0, 0.0, False
    reason = ("epoch budget exhausted" if config.target_accuracy is not None else
              "no target (target_accuracy=none): the whole budget trained")
    while step < last_step and not reached:
        epoch += 1
        log.epoch_start(epoch)
        for images, labels in one_epoch(train_loader):
            STOP.check()
            scheduled = plan.at(step)
            with out_of_memory.At("training", scheduled.side, config.batch_per_device, step + 1):
                loss = step_fn.train_on(images, labels, scheduled)
            step += 1
            step_fn.update_average(step)
            report.step(step, loss, scheduled.lr, scheduled.side)

            evaluated = plan.evaluates_after(step)
            if evaluated:
                accuracy = evaluation(step_fn, val_loader, plan, step, data.eval_samples, log, report)
                reached = config.target_accuracy is not None and accuracy >= config.target_accuracy
            if step % config.progress_every_steps == 0 or evaluated:
                stop_reason = agreed_stop(config, loss, run_start, reached, step, ctx.device)
                if stop_reason:
                    reason, last_step, reached = stop_reason, step, False
            if reached or step >= last_step:
                break
        log.epoch_stop(epoch)       # also for a partial last epoch: the checker needs one
    minutes = (time.monotonic() - run_start) / 60
    if config.compile and compiled_graphs() > graphs_at_start:
        say(f"torch.compile compiled {compiled_graphs() - graphs_at_start} graph(s) after run_start: "
            f"their compile time is inside this run's {minutes:.2f} min"
            + ("" if config.warmup else " (warmup=false)"))
    dist_utils.average_buffers(step_fn.model)       # one model, the same on every rank
    details = {"epoch_num": round(plan.epoch(step), 4), **({} if reached else {"reason": reason})}
    stop_timing(ctx.device, meter, log, report, reached, details)
    return RunOutcome(reached, accuracy, plan.epoch(step), minutes, step_fn.model, step_fn.eval_model)


def open_loaders(config: Config, ctx: dist_utils.Context, seed: int, data: PreparedData,
                 plan: RunPlan) -> tuple[Loader, Loader]:
    """The run's training and evaluation loaders, opened inside the timed region (FFCV's
    Loader reads the labels when it is built)."""
    train_loader, val_loader = run_loaders(config, ctx, seed, data.train_path, data.val_path,
                                           data.eval_samples, shard=True)
    if len(train_loader) != plan.steps_per_epoch:
        raise RuntimeError(f"the training loader has {len(train_loader)} batches an epoch, "
                           f"{plan.steps_per_epoch} were planned from data.json: was the .beton replaced?")
    return train_loader, val_loader


def stop_timing(device: torch.device, meter: energy.Meter, log: RunLog, report: Reporter, reached: bool,
                details: dict) -> None:
    """MLPerf run_stop once the device's work is done, the energy read around it, added over
    the ranks and reported; the reporter closed (main closes the trackers it opened)."""
    synchronize(device)
    used = meter.stop()
    log.run_stop(reached, **details)   # ---- timed region ends: MLPerf run_stop ----
    meter.close()
    report.energy(energy.added([energy.Energy.from_dict(part) for part in
                                dist_utils.all_gather_object(used.to_dict())]))
    report.close()


def synchronize(device: torch.device) -> None:
    """Wait for the device's queued work: the energy counters are read after it."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def evaluation(step_fn: RecipeStep, val_loader: Loader, plan: RunPlan, step: int, eval_samples: int,
               log: RunLog, report: Reporter) -> float:
    """The evaluation after `step` steps, logged and reported; returns the top-1 accuracy."""
    config = plan.config
    eval_epoch, eval_began = round(plan.epoch(step), 4), time.monotonic()
    log.eval_start(eval_epoch)
    dist_utils.average_buffers(step_fn.eval_model)
    with out_of_memory.At("evaluation", config.eval_resolution, config.eval_batch, step):
        accuracy = evaluate(step_fn.eval_model, val_loader, step_fn.normalize, step_fn.autocast,
                            eval_samples)
    log.eval_result(eval_epoch, accuracy)
    report.evaluated(eval_epoch, accuracy, config.target_accuracy, time.monotonic() - eval_began)
    return accuracy


def agreed_stop(config: Config, loss: torch.Tensor, run_start: float, reached: bool, step: int,
                device: torch.device) -> str:
    """Why every rank leaves the loop after `step` ("" to go on), one decision for all
    ranks: they must leave the loop at the same step."""
    diverged, out_of_time = dist_utils.agree_to_stop(
        not bool(torch.isfinite(loss)),
        bool(config.max_run_minutes) and (time.monotonic() - run_start) / 60 > config.max_run_minutes,
        device)
    if diverged:
        return (f"diverged: non-finite loss at step {step} (lower lr, or "
                "precision=fp32 if autocast is on)")
    if out_of_time and not reached:
        return f"max_run_minutes={config.max_run_minutes:g} exceeded"
    return ""


# ---------------------------------------------------------------------------
def main(argv: Sequence[str] | None = None) -> int:
    args = TrainArgs.parse(argv, __doc__)
    STOP.install()
    die_with_parent()
    prepared_with = Config.from_dict(json.loads(args.config.read_text()))
    ctx = dist_utils.setup(prepared_with.device_type, prepared_with.lost_node_seconds)
    # prepared_with: this node's own settings, those its data was prepared with
    spec = agree_on_run(args, prepared_with, ctx.local_rank)
    if spec.finish:
        dist_utils.cleanup()
        return 0
    config = spec.config
    partial = partial_of(args.result) if ctx.is_main and args.result else None
    log = RunLog(str(partial) if partial else None)
    trackers = None
    try:
        log.init_start(cache_cleared=spec.cache_cleared)
        log.submission(config)
        check_ranks_alike(ctx, str(args.data), prepared_with)
        data = PreparedData.load(args.data)
        if ctx.is_main:
            trackers = tracking.open_tracking(args.track, config.settings, spec.label)
        outcome = train_run(config, data, ctx, spec.seed, log, spec.label, progress_file=args.progress,
                            trackers=trackers)
        if args.save_weights:
            args.save_weights.mkdir(parents=True, exist_ok=True)
            torch.save({"model": outcome.model.state_dict(), "eval_model": outcome.eval_model.state_dict()},
                       args.save_weights / f"rank{ctx.rank}.pt")
    except (Interrupted, KeyboardInterrupt) as exc:
        return interrupted(log, spec, partial, str(exc) or "SIGINT")
    except Exception as exc:
        if STOP.explains(exc):
            return interrupted(log, spec, partial, f"{STOP.signal_name}; {str(exc).strip()}")
        if out_of_memory.is_out_of_memory(exc):
            print(f"{spec.label} {out_of_memory.advice(exc, config, ctx.device, ctx.rank)}",
                  file=sys.stderr, flush=True)
            log.run_stop(False, reason=f"crashed: {out_of_memory.reason(exc)}")
        else:
            log.run_stop(False, reason=f"crashed: {type(exc).__name__}: {exc}")
        log.close()
        raise
    finally:
        if trackers is not None:
            trackers.close()        # what was kept until the run ended, even when it did not finish
    log.close()
    if partial and args.result:
        put_in_place(partial, args.result)       # on the disk before it counts as a finished run
        verdict = ("reached the target" if outcome.success else "trained its whole budget (no target)"
                   if config.target_accuracy is None else "ABORTED: target not reached")
        print(f"{spec.label} {verdict}: top-1 {outcome.accuracy:.4f} after {outcome.epochs:.2f} "
              f"epochs, {outcome.minutes:.2f} min -> {args.result}", flush=True)
    dist_utils.cleanup()
    return 0


def check_ranks_alike(ctx: dist_utils.Context, data_file: str, prepared_with: Config) -> None:
    """Raise, on every rank at once and in no training collective, if the ranks differ in
    hardware or in the data they would train on."""
    hardware = inventory.unlike_ranks(dist_utils.all_gather_object(inventory.rank_hardware(ctx.device)))
    if hardware:
        raise RuntimeError(hardware)
    data = fingerprint.unlike_data(dist_utils.all_gather_object(
        fingerprint.of_rank(data_file, prepared_with)))
    if data:
        raise RuntimeError(data)


def interrupted(log: RunLog, spec: RunSpec, partial: Path | None, why: str) -> int:
    """Log run_stop aborted "interrupted (why)", keep the partial log; the exit status."""
    log.run_stop(False, reason=f"interrupted ({why})")
    log.close()
    print(f"{spec.label} interrupted" + (f"; partial log kept at {partial}" if partial else ""),
          file=sys.stderr, flush=True)
    return INTERRUPTED_EXIT


if __name__ == "__main__":
    sys.exit(main())
