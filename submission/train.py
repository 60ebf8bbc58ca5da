"""One time-to-accuracy run: the training loop. Started by torchrun, one process per device.

    python -m torch.distributed.run ... -m submission.train --config C --data D \
        --run-index I --seed S --result results/<system>/resnet/result_I.txt

Rank 0 writes the MLPerf log to `<result>.partial` and renames it to `<result>` once
run_stop is written (status success, or aborted when the epoch budget ends below the
target). An interrupted or crashed run logs run_stop aborted with the reason and keeps
the .partial name, so it is never taken for a finished run.

Processes on nodes other than node 0 start with --follow: rank 0 tells them which run
to do (or that the campaign is over, --finish) and with which settings.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from . import distributed as dist_utils
from . import inventory, out_of_memory
from .config import Config
from .data import ffcv_threads, fingerprint, loaders
from .data.prepare import cache_folder
from .data.prepared_data import PreparedData
from .mlperf_log import RunLog
from .progress import Reporter
from .step import RunPlan, build_step
from .warmup import compiled, compiled_graphs, warm_up, warm_up_loaders


@dataclass
class RunOutcome:
    success: bool
    accuracy: float
    epochs: float
    minutes: float
    model: torch.nn.Module          # the trained weights
    eval_model: torch.nn.Module     # what evaluation scored: the EMA copy when EMA is on


class Interrupted(Exception):
    """SIGTERM/SIGINT reached the run (torchrun stopping the job, or the user)."""


class StopRequests:
    """SIGTERM/SIGINT, noted when they arrive and acted on between training steps: raising
    from the handler could land inside a lock or a collective and turn an interruption
    into a crash. Before the training loop (set-up), a signal stops the run at once."""

    def __init__(self):
        self.signal_name = ""
        self.in_loop = False

    def install(self) -> None:
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, self._noted)

    def _noted(self, signum, frame) -> None:
        first = not self.signal_name
        self.signal_name = self.signal_name or signal.Signals(signum).name
        if first and not self.in_loop:
            raise Interrupted(self.signal_name)

    def check(self) -> None:
        if self.signal_name:
            raise Interrupted(self.signal_name)


STOP = StopRequests()


def die_with_parent() -> None:
    """torchrun starts workers in their own session: if torchrun itself is killed (a
    SIGKILLed campaign), have the kernel send this process SIGTERM, so the run ends as
    interrupted instead of training on, orphaned, and renaming its log when done."""
    if sys.platform.startswith("linux"):
        import ctypes
        PR_SET_PDEATHSIG = 1
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() == 1:          # the parent died before prctl took effect
            raise Interrupted("parent gone")


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


@torch.no_grad()
def evaluate(model, loader, normalize, autocast, expected_samples: int) -> float:
    was_training = model.training
    model.eval()
    totals = torch.zeros(2, dtype=torch.float64, device=normalize.mean.device)
    with autocast():
        for images, labels in loader:
            logits = model(normalize(images))
            totals[0] += (logits.argmax(dim=1) == labels.view(-1)).sum()
            totals[1] += labels.numel()
    dist_utils.all_reduce_sum(totals)
    model.train(was_training)
    correct, count = totals.tolist()
    if int(count) != expected_samples:
        raise RuntimeError(f"evaluation scored {int(count)} samples, expected {expected_samples}")
    return correct / count


def run_loaders(config: Config, ctx: dist_utils.Context, seed: int, train_path: str,
                val_path: str, eval_samples: int, shard: bool):
    """The run's training and evaluation loaders; shard=False builds the same pipelines
    unsharded (the warm-up, on synthetic files of one batch)."""
    rank, world = (ctx.rank, ctx.world_size) if shard else (0, 1)
    if config.train_loader == "torchvision":
        from .data import torchvision_loader
        from .methods.randaugment import RandAugment
        augment = (RandAugment(config.randaugment_severity, config.randaugment_depth,
                               config.randaugment_set) if config.randaugment_depth else None)
        train = torchvision_loader.train_loader(
            train_path, config.train_resolution, config.batch_per_device,
            config.workers_per_device, seed, ctx.device, rank, world, config.crop_scale_min, augment)
    else:
        train = loaders.train_loader(
            train_path, config.train_resolution, config.batch_per_device,
            config.workers_per_device, seed, ctx.device, ctx.distributed and shard,
            config.crop_scale_min)
    val = loaders.val_loader(
        val_path, config.eval_resolution, config.eval_resize,
        config.eval_batch, config.workers_per_device,
        ctx.device, rank, world, eval_samples)
    return train, val


def train_run(config: Config, data: PreparedData, ctx: dist_utils.Context, seed: int,
              log: RunLog, label: str, progress_file: Path | None = None) -> RunOutcome:
    """Build, then train until the target or the epoch budget; return the outcome."""
    seed_everything(seed)
    ffcv_threads.install()      # else FFCV's Loaders set torch's threads to their worker count
    if ctx.device.type == "cpu":
        torch.set_num_threads(dist_utils.cpu_threads(config))
    torch.backends.cudnn.benchmark = config.cudnn_benchmark

    plan = RunPlan.of(config, data.train_samples, ctx.world_size)
    step_fn = build_step(config, data.num_classes, ctx.device, ddp=ctx.distributed,
                         local_rank=ctx.local_rank)
    log.weights_initialization(step_fn.model)
    if config.compile:
        step_fn = step_fn.with_net(compiled(step_fn.net, cache_folder(config), len(plan.sides()),
                                            config.cuda_graphs, config.compile_dynamic))
    log.hyperparameters(config, seed, data.train_samples, data.eval_samples)

    def say(line: str) -> None:
        if ctx.is_main:
            print(f"{label} {line}", flush=True)

    eval_batch = config.eval_batch
    if config.warmup:
        warm_up(step_fn.net, step_fn.model, train_sides=plan.sides(),
                eval_side=config.eval_resolution, batch=config.batch_per_device,
                eval_batches=loaders.eval_batch_sizes(data.eval_samples, eval_batch, ctx.rank,
                                                      ctx.world_size),
                num_classes=data.num_classes, loss_fn=step_fn.loss_fn,
                smoothing=config.label_smoothing, autocast=step_fn.autocast,
                normalize=step_fn.normalize, device=ctx.device, log=say,
                calls_per_side=3 if config.cuda_graphs else 1, net_is_compiled=config.compile,
                dynamic_shapes=config.compile_dynamic)
        if data.synthetic_train_path:
            warm_up_loaders(*run_loaders(config, ctx, seed, data.synthetic_train_path,
                                         data.synthetic_val_path, data.synthetic_samples,
                                         shard=False), log=say)

    log.init_stop_run_start()   # ---- timed region starts: MLPerf run_start ----
    run_start, graphs_at_start = time.monotonic(), compiled_graphs()
    report = Reporter(label, plan.total_steps, plan.steps_per_epoch, config.global_batch_size,
                      config.progress_every_steps, ctx.is_main, progress_file,
                      every_seconds=config.progress_every_seconds)
    # the data sets are opened only now: FFCV's Loader reads the labels when it is built
    train_loader, val_loader = run_loaders(config, ctx, seed, data.train_path, data.val_path,
                                           data.eval_samples, shard=True)
    if len(train_loader) != plan.steps_per_epoch:
        raise RuntimeError(f"the training loader has {len(train_loader)} batches an epoch, "
                           f"{plan.steps_per_epoch} were planned from data.json: was the .beton replaced?")
    STOP.in_loop = True
    last_step = plan.total_steps        # lowered when the ranks agree to stop early
    step, epoch, accuracy, reached = 0, 0, 0.0, False
    reason = ("epoch budget exhausted" if config.target_accuracy is not None else
              "no target (target_accuracy=none): the whole budget trained")
    while step < last_step and not reached:
        epoch += 1
        log.epoch_start(epoch)
        for images, labels in loaders.one_epoch(train_loader):
            STOP.check()
            lr, side = plan.lr(step), plan.side(step)
            step_fn.set_lr(lr)
            with out_of_memory.At("training", side, config.batch_per_device, step + 1):
                loss = step_fn(images, labels, side)
            step += 1
            step_fn.update_average(step)
            report.step(step, loss, lr, side)

            evaluated = plan.evaluates_after(step)
            if evaluated:
                eval_epoch, eval_began = round(plan.epoch(step), 4), time.monotonic()
                log.eval_start(eval_epoch)
                dist_utils.average_buffers(step_fn.eval_model)
                with out_of_memory.At("evaluation", config.eval_resolution, eval_batch, step):
                    accuracy = evaluate(step_fn.eval_model, val_loader, step_fn.normalize,
                                        step_fn.autocast, data.eval_samples)
                log.eval_result(eval_epoch, accuracy)
                report.evaluated(eval_epoch, accuracy, config.target_accuracy,
                                 time.monotonic() - eval_began)
                reached = config.target_accuracy is not None and accuracy >= config.target_accuracy
            if step % config.progress_every_steps == 0 or evaluated:
                # one decision for all ranks: they must leave the loop at the same step
                diverged, out_of_time = dist_utils.agree_to_stop(
                    not bool(torch.isfinite(loss)),
                    bool(config.max_run_minutes)
                    and (time.monotonic() - run_start) / 60 > config.max_run_minutes,
                    ctx.device)
                if diverged:
                    reason = (f"diverged: non-finite loss at step {step} (lower lr, or "
                              "precision=fp32 if autocast is on)")
                    reached, last_step = False, step
                elif out_of_time and not reached:
                    reason = f"max_run_minutes={config.max_run_minutes:g} exceeded"
                    last_step = step
            if reached or step >= last_step:
                break
        log.epoch_stop(epoch)       # also for a partial last epoch: the checker needs one
    minutes = (time.monotonic() - run_start) / 60
    report.close()
    if config.compile and compiled_graphs() > graphs_at_start:
        say(f"torch.compile compiled {compiled_graphs() - graphs_at_start} graph(s) after run_start: "
            f"their compile time is inside this run's {minutes:.2f} min"
            + ("" if config.warmup else " (warmup=false)"))
    dist_utils.average_buffers(step_fn.model)       # one model, the same on every rank
    details = {"epoch_num": round(plan.epoch(step), 4)}
    if not reached:
        details["reason"] = reason
    log.run_stop(reached, **details)   # ---- timed region ends: MLPerf run_stop ----
    return RunOutcome(reached, accuracy, plan.epoch(step), minutes, step_fn.model, step_fn.eval_model)


# ---------------------------------------------------------------------------
def parse_args(argv):
    parser = argparse.ArgumentParser(prog="python -m submission.train", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", required=True, help="resolved configuration (JSON)")
    parser.add_argument("--data", required=True, help="prepared data description (JSON)")
    parser.add_argument("--run-index", type=int, default=0)
    parser.add_argument("--runs", type=int, default=1, help="runs in the campaign (for labels)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--result", default="", help="final result file path (rank 0)")
    parser.add_argument("--cache-cleared", type=int, default=0)
    parser.add_argument("--follow", action="store_true", help="node > 0: take the run from rank 0")
    parser.add_argument("--finish", action="store_true", help="tell followers the campaign is over")
    parser.add_argument("--remaining", type=int, default=0, help="runs left after this one")
    parser.add_argument("--state", default="", help="follower: where to record runs remaining")
    parser.add_argument("--save-weights", default="", help="folder: each rank saves its final weights")
    parser.add_argument("--label", default="", help="what the run's lines start with "
                        "(default: [run I/N seed S])")
    parser.add_argument("--progress", default="", metavar="FILE",
                        help="rank 0 writes machine-readable progress (JSON lines) here")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    STOP.install()
    die_with_parent()
    config = Config.from_dict(json.loads(Path(args.config).read_text()))
    ctx = dist_utils.setup(config.device_type)

    spec = dist_utils.broadcast_object({
        "run_index": args.run_index, "runs": args.runs, "seed": args.seed,
        "finish": args.finish, "remaining": args.remaining, "config": config.to_dict(),
        "cache_cleared": args.cache_cleared})
    prepared_with = config      # this node's own settings: those its data was prepared with
    if args.follow:
        config = Config.from_dict(spec["config"])
        if args.state and ctx.local_rank == 0:
            Path(args.state).write_text(json.dumps({"remaining": 0 if spec["finish"] else spec["remaining"]}))
    if spec["finish"]:
        dist_utils.cleanup()
        return 0

    partial = Path(args.result + ".partial") if ctx.is_main and args.result else None
    log = RunLog(str(partial) if partial else None)
    label = args.label or f"[run {spec['run_index'] + 1}/{spec['runs']} seed {spec['seed']}]"
    try:
        log.init_start(cache_cleared=bool(spec["cache_cleared"]))
        log.submission(config)
        unlike = inventory.unlike_ranks(dist_utils.all_gather_object(inventory.rank_hardware(ctx.device)))
        if unlike:
            raise RuntimeError(unlike)
        # on every rank at this point: all stop here, in no training collective, if one differs
        unlike = fingerprint.unlike_data(dist_utils.all_gather_object(
            fingerprint.of_rank(args.data, prepared_with)))
        if unlike:
            raise RuntimeError(unlike)
        data = PreparedData.load(Path(args.data))
        outcome = train_run(config, data, ctx, spec["seed"], log, label,
                            progress_file=Path(args.progress) if args.progress else None)
        if args.save_weights:
            Path(args.save_weights).mkdir(parents=True, exist_ok=True)
            torch.save({"model": outcome.model.state_dict(), "eval_model": outcome.eval_model.state_dict()},
                       Path(args.save_weights) / f"rank{ctx.rank}.pt")
    except (Interrupted, KeyboardInterrupt) as exc:
        log.run_stop(False, reason=f"interrupted ({exc or 'SIGINT'})")
        log.close()
        print(f"{label} interrupted" + (f"; partial log kept at {partial}" if partial else ""),
              file=sys.stderr, flush=True)
        return 130
    except Exception as exc:
        if out_of_memory.is_out_of_memory(exc):
            print(f"{label} {out_of_memory.advice(exc, config, ctx.device, ctx.rank)}",
                  file=sys.stderr, flush=True)
            log.run_stop(False, reason=f"crashed: {out_of_memory.reason(exc)}")
        else:
            log.run_stop(False, reason=f"crashed: {type(exc).__name__}: {exc}")
        log.close()
        raise
    log.close()
    if partial:
        partial.rename(args.result)
        verdict = ("reached the target" if outcome.success else "trained its whole budget (no target)"
                   if config.target_accuracy is None else "ABORTED: target not reached")
        print(f"{label} {verdict}: top-1 {outcome.accuracy:.4f} after {outcome.epochs:.2f} "
              f"epochs, {outcome.minutes:.2f} min -> {args.result}", flush=True)
    dist_utils.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
