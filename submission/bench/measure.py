"""The bench's measurements of one process, on the run's own recipe step and plan, each
row printed as soon as it is measured; and the profile JSON that `project` reads.

Rows, in the order they are measured:
  - the loaders' set-up inside the timed region: first training batch and first
    evaluation pass of the run's loaders in a fresh process, without and with the
    warm-up on the synthetic files (each in its own process: numba's work is per process);
  - the recipe step on synthetic batches, and a plain torchvision loop (cross-entropy,
    torch.optim.SGD, a GradScaler with fp16) at the same batch, size and precision, the
    two taking turns (`rounds` rounds of `steps` steps);
  - per progressive-resizing side of the run's plan: the first step (set-up: cuDNN/oneDNN
    plans) and the steady rate;
  - the loop's work around a step at the smallest side (normalise, resize, EMA update), and
    the trackers' (tracker=: a progress record kept every progress_every_steps, written to
    TensorBoard at an evaluation);
  - the evaluation forward alone on synthetic batches at the evaluation size;
  - with compile=true, the compiled step at full size and at the smallest side, in turns
    with the eager one, and each change between the two sides (the first steps at the new
    side against its steady rate: what a compiled run loses at a side change);
  - MFU: FLOPs of forward+backward counted with torch.utils.flop_counter at full size,
    over a matmul peak measured on the same device and dtype in the same run;
  - the run's train loader alone (FFCV's, torchvision's or the device loader's, with its rate
    per thread and, on a GPU, its device memory), the step fed by the loader (in turns with
    the synthetic step, at full size and at the smallest side: what the loader costs the
    step), and evaluation through the loader; then the same for the loader beside it (the
    device loader beside FFCV's or torchvision's, or the recipe's own beside the device
    loader), and one row per loader side by side;
  - with train_loader=torchvision: the CPU work per image of its transforms, on one thread
    over a few hundred images of the run's .beton (decode, crop + flip, RandAugment, to
    tensor): what a CPU-bound recipe's loader costs per image.
  - power: the energy counters (submission.energy) read around the recipe step at full
    size for a few seconds, in watts per process (NVML on a GPU, RAPL on a CPU host), or
    why they could not be read.
quick=true keeps what a profile needs and `qualify` asks for: it leaves out the loaders'
fresh-process probes, the plain loop, and the fed step at the smallest side; with
compile=true, also the eager step at the sides other than the compiled rows' two.
With SAM (sam_interval N), every timed stretch is a multiple of N steps, so each mean holds
the recipe's share of two-pass SAM steps.
Ratios between rows survive a noisy machine better than absolute figures.
"""
from __future__ import annotations

import datetime
import platform
import time
from functools import partial
from pathlib import Path

import torch
import torchvision

from .. import distributed, energy, methods
from ..bench_profile import (Augmentation, BenchProfile, FedStep, Loader, LoaderBeside, LoaderProbe,
                             LoaderSetup, LoopOverhead, Measured, Power, SetupExtra, SideStep,
                             recorded_settings)
from ..data.prepare import cache_folder, prepare
from ..data.pillow_build import pillow_build
from ..loader_kinds import kind_of
from ..loaders import ffcv_threads
from ..loaders.protocol import cycle, one_epoch
from ..loaders.run_loaders import augmentation_of, run_loaders
from ..methods.loss import LOSSES
from ..methods.progressive_resize import resize_batch
from ..run_plan import RunPlan
from ..step import autocast_dtype, autocast_for, build_step, grad_scaler, optimizer_step
from ..system_json import fill_from_host
from ..warmup import compiled, warm_up_loaders
from .timing import (describe_costs, first_call, in_turns, loader_alone, matmul_peak, per_batch_costs,
                     synthetic_batch, sync, timed)

def say(line: str = "") -> None:
    print(line, flush=True)


def train_flops(step, images, labels) -> float:
    """FLOPs of one forward and backward of the recipe's model on this batch."""
    from torch.utils.flop_counter import FlopCounterMode
    with FlopCounterMode(display=False) as counter:
        step.loss_fn(step.model(step.normalize(images)), labels, step.config.label_smoothing).backward()
    step.model.zero_grad(set_to_none=True)
    return float(counter.get_total_flops())


def plain_loop(config, classes: int, device: torch.device, normalize):
    """step(images, labels) of a plain torchvision loop: ResNet-50 (channels last),
    cross-entropy, torch.optim.SGD, with fp16 a GradScaler as in PyTorch's AMP recipe."""
    plain = torchvision.models.resnet50(num_classes=classes).to(device, memory_format=torch.channels_last)
    optimizer = torch.optim.SGD(plain.parameters(), lr=0.1, momentum=0.875)
    scaler, autocast = grad_scaler(config, device), autocast_for(config, device)
    return lambda images, labels: optimizer_step(plain, optimizer, scaler, autocast,
                                                 LOSSES["cross_entropy"], normalize(images), labels, 0.0)


def _loader_setup_child(config_dict: dict, data_dict: dict, warm: bool) -> dict:
    """In a fresh process: seconds to the first training batch and through the first
    evaluation pass of the run's loaders, after warm_up_loaders or not; of the first,
    building both loaders and starting the training epoch."""
    from ..config import Config
    from ..data.data_json import PreparedData

    config, data = Config.from_dict(config_dict), PreparedData(**data_dict)
    ffcv_threads.install()      # imports FFCV, as a run does before run_start
    device = torch.device("cuda" if config.device_type == "cuda" else "cpu")
    ctx = distributed.Context(0, 0, 1, device)
    figures = {"warm_up_s": 0.0}
    if warm:
        train_loader, val_loader = run_loaders(
            config, ctx, 0, data.synthetic_train_path, data.synthetic_val_path, data.synthetic_samples,
            shard=False)
        figures["warm_up_s"] = warm_up_loaders(train_loader, val_loader, log=lambda line: None)
    start = time.perf_counter()
    train, val = run_loaders(config, ctx, 0, data.train_path, data.val_path, data.eval_samples,
                             shard=True)
    figures["build_s"] = time.perf_counter() - start
    batches = one_epoch(train)     # FFCV allocates the epoch's buffers (pinned on a GPU) here
    figures["epoch_start_s"] = time.perf_counter() - start - figures["build_s"]
    next(batches)
    sync(device)
    figures["train_first_batch_s"] = time.perf_counter() - start
    batches.close()
    start = time.perf_counter()
    for _ in one_epoch(val):
        pass
    sync(device)
    figures["val_first_pass_s"] = time.perf_counter() - start
    return figures


def loader_setup(config, data) -> dict:
    """{"cold": ..., "warm": ...} from _loader_setup_child, each in a new process."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    figures = {}
    for name, warm in (("cold", False), ("warm", True)):
        with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
            figures[name] = pool.submit(_loader_setup_child, config.to_dict(), data.to_dict(),
                                        warm).result()
    return figures


def _row(name: str, value: float, reference: float, beside: float | None = None) -> str:
    """One img/s row with its ratio to the recipe step (`beside`: a recipe step timed in
    turns with this row, printed beside it and used for the ratio)."""
    return (f"  {name:<40} {value:10.1f} img/s   {value / (beside or reference):6.2f}x the recipe step"
            + (f" beside it ({beside:.1f} img/s)" if beside else ""))


def header(config, steps: int) -> str:
    return (f"system {config.system_id}, device {config.device_type}, batch {config.batch_per_device}, "
            f"{config.train_resolution}px train / {config.eval_resolution}px eval, precision "
            f"{config.precision}{'/' + config.amp_dtype if config.precision == 'amp' else ''}, "
            f"{config.workers_per_device} loader workers, {steps} timed steps")


def sam_steps(config, steps: int) -> int:
    """`steps` rounded up to a multiple of sam_interval: a stretch of timed steps then holds
    the recipe's share of two-pass SAM steps whichever step it starts at."""
    interval = config.sam_interval
    return -(-steps // interval) * interval if interval else steps


def measure(config, device: torch.device, steps: int, rounds: int, quick: bool = False) -> dict:
    """Every figure of the main bench (quick: those a profile needs), each section printed
    as soon as it is measured."""
    asked, steps = steps, sam_steps(config, steps)
    say(header(config, steps) + (", quick (qualify's parts)" if quick else ""))
    if config.sam_interval:
        say(f"  SAM every {config.sam_interval}th step: each timed stretch is {steps} steps "
            f"({'raised from ' + str(asked) + ', ' if steps != asked else ''}a multiple of "
            f"sam_interval), {steps // config.sam_interval} of them two-pass SAM steps, in every mean")
    data = prepare(config, world_size=config.world_size)
    plan = RunPlan.of(config, data.train_samples)
    figures: dict = {"timed_steps": steps}
    if not quick:
        figures["loader_setup"] = _loader_setup_rows(config, data)   # first: nothing else running

    step = build_step(config, data.num_classes, device)
    full = synthetic_batch(config.batch_per_device, config.train_resolution, data.num_classes, device)
    figures.update(_step_rows(config, step, full, device, steps, rounds, plain=not quick))
    base = figures["step"]
    # a compiled quick bench (qualify's) is about the compiled rows: the eager step at their two sides
    figures["sizes"] = _side_rows(config, step, plan, device, steps,
                                  only=(config.train_resolution, min(plan.sides()))
                                  if quick and config.compile else None)
    smallest = min(figures["sizes"])
    figures["loop_overhead"] = _loop_overhead(config, step, full, figures["sizes"], smallest, device, steps)
    figures["eval_forward"] = _eval_forward(config, step, data.num_classes, device, steps, base)
    if config.compile:
        figures["compiled"] = _compiled_rows(config, step, plan, device, steps, rounds, smallest)
    figures["mfu"] = _mfu(config, step, full, base, device, rounds)
    figures["power"] = _power(config, step, full, device)
    figures.update(_loader_rows(config, step, data, device, steps, rounds, full, smallest, base,
                                fed_sides=(config.train_resolution,) if quick else None))
    return figures


def _loader_setup_rows(config, data) -> dict:
    """The run's loaders after run_start in a fresh process, without and with the warm-up."""
    say("\n  the run's loaders after run_start, in a fresh process (two processes, one after "
        "the other)...")
    cold_warm = loader_setup(config, data)
    cold, warm = cold_warm["cold"], cold_warm["warm"]
    for line in (
            f"  {'':<54}{'no warm-up':>9}  {'after warm-up':>13}",
            f"  {'first training batch':<54}{cold['train_first_batch_s']:7.2f} s  {warm['train_first_batch_s']:9.2f} s",
            f"  {'  of which: both loaders built':<54}{cold['build_s']:7.2f} s  {warm['build_s']:9.2f} s",
            f"  {'            training epoch started (buffers)':<54}{cold['epoch_start_s']:7.2f} s"
            f"  {warm['epoch_start_s']:9.2f} s",
            f"  {'first evaluation pass':<54}{cold['val_first_pass_s']:7.2f} s  {warm['val_first_pass_s']:9.2f} s",
            f"  {'loader warm-up on the synthetic files, before run_start':<54}{'':>9}  {warm['warm_up_s']:9.2f} s"):
        say(line)
    return cold_warm


def _step_rows(config, step, full, device, steps: int, rounds: int, plain: bool = True) -> dict:
    """The recipe step and (plain) a plain torchvision loop on synthetic batches, in turns."""
    batch = config.batch_per_device
    if not plain:
        figures = in_turns({"step": lambda: step(*full)}, batch, steps, rounds, device)
        say("\n" + _row("recipe step, synthetic batches", figures["step"], figures["step"]))
        return figures
    plain_step = plain_loop(config, step.model.fc.out_features, device, step.normalize)
    figures = in_turns({"step": lambda: step(*full), "plain_loop": lambda: plain_step(*full)},
                       batch, steps, rounds, device)
    base = figures["step"]
    own = ["the compiled step", "the fed step"] if config.compile else ["the fed step"]
    say(f"\n  (timed in turns, the best of {rounds} rounds each: the plain loop with the first row; "
        f"{' and '.join(own)} with a recipe step of {'their' if len(own) > 1 else 'its'} own, "
        f"shown beside {'them' if len(own) > 1 else 'it'})")
    say(_row("recipe step, synthetic batches", base, base))
    say(_row("plain torchvision loop (CE, SGD)", figures["plain_loop"], base))
    return figures


def _side_rows(config, step, plan, device, steps: int, only: tuple[int, ...] | None = None) -> dict:
    """Per progressive-resizing side of the run's plan (or `only` these): the first step
    (set-up) and the steady rate."""
    say("\n  progressive-resizing sizes of the run's plan: first step (s), steady img/s")
    batch, classes = config.batch_per_device, step.model.fc.out_features
    sizes = {}
    for side in sorted(set(only)) if only else plan.sides():
        synthetic = synthetic_batch(batch, side, classes, device)
        first = first_call(partial(step, *synthetic), device)
        sizes[side] = {"first_step_s": first,
                       "img_per_s": batch / timed(partial(step, *synthetic), steps, device, 1)}
        if config.sam_interval:
            sizes[side].update(timed_steps=steps, sam_steps=steps // config.sam_interval)
        say(f"  {side:>5} px  {first:7.2f} s  {sizes[side]['img_per_s']:10.1f} img/s"
            + (f"  (mean of {steps} steps, {steps // config.sam_interval} of them SAM)"
               if config.sam_interval else ""))
    return sizes


def _loop_overhead(config, step, full, sizes: dict, smallest: int, device, steps: int) -> dict:
    """The loop's own work around a step at the smallest side: normalising the loader's
    full-size batch, resizing it, and the EMA update (every ema_update_every_batches)."""
    prepare_s = timed(lambda: resize_batch(step.normalize(full[0]), smallest, config.resize_mode),
                      steps, device)
    ema_s = (timed(lambda: step.ema.update(step.model, step.ema.every), steps, device) / step.ema.every
             if step.ema else 0.0)
    step_s = config.batch_per_device / sizes[smallest]["img_per_s"]
    overhead = {"side": smallest, "normalize_resize_s": prepare_s, "ema_s": ema_s,
                "share_of_step": (prepare_s + ema_s) / step_s, "tracking_s": tracking_per_step(config, steps)}
    say(f"\n  around each step at {smallest} px: normalise + resize {prepare_s * 1000:.1f} ms, EMA "
        f"update {ema_s * 1000:.1f} ms (per step, updating every {config.ema_update_every_batches}) = "
        f"{overhead['share_of_step'] * 100:.1f}% of a step at that size")
    if overhead["tracking_s"] is not None:
        say(f"  tracker={config.tracker}: {overhead['tracking_s'] * 1000:.3f} ms per step "
            f"= {overhead['tracking_s'] / step_s * 100:.3f}% of a step at that size (target under 1%)")
    return overhead


def tracking_per_step(config, steps: int) -> float | None:
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


def _eval_forward(config, step, classes: int, device, steps: int, base: float) -> float:
    """The evaluation forward alone, at its size, on synthetic batches (no loader)."""
    eval_images = synthetic_batch(config.eval_batch, config.eval_resolution, classes, device)[0]
    step.model.eval()
    with torch.no_grad(), step.autocast():
        rate = config.eval_batch / timed(lambda: step.model(step.normalize(eval_images)), steps, device)
    step.model.train()
    say("\n" + _row(f"evaluation forward, synthetic, {config.eval_resolution} px", rate, base))
    return rate


def _mfu(config, step, full, base: float, device, rounds: int) -> dict:
    """FLOPs of forward+backward at full size over a matmul peak measured on the same device
    and dtype (fp16 autocast is refused on CPUs by preflight)."""
    dtype = autocast_dtype(config) or torch.float32
    flops = train_flops(step, *full) / config.batch_per_device
    peak = matmul_peak(device, dtype, 4096 if device.type == "cuda" else 2048, rounds)
    mfu = {"flops_per_image": flops, "peak_flops": peak, "dtype": str(dtype), "mfu": base * flops / peak}
    say(f"\n  MFU: {flops / 1e9:.2f} GFLOP per image (fwd+bwd, {config.train_resolution} px) x {base:.1f} "
        f"img/s / {peak / 1e9:.0f} GFLOP/s measured matmul peak ({dtype}) = {mfu['mfu'] * 100:.1f}%")
    return mfu


def _compiled_rows(config, step, plan, device, steps: int, rounds: int, smallest: int) -> dict:
    """The compiled step at full size and at the smallest side, in turns with the eager one,
    and what each change between the two costs the compiled step."""
    net = compiled(step.model, cache_folder(config), 2, config.cuda_graphs,  # full size, smallest
                   config.compile_dynamic)
    compiled_step = step.with_net(net)
    how = ("compiled" + (" + CUDA graphs" if config.cuda_graphs else "")
           + (" (dynamic)" if config.compile_dynamic else ""))
    shapes = "symbolic sizes" if config.compile_dynamic else "static shapes"
    say(f"\n  {how} ({shapes}), in turns with the eager step at the same size:")
    rows = {}
    for side in dict.fromkeys((config.train_resolution, smallest)):   # compute-, then launch-bound
        synthetic = synthetic_batch(config.batch_per_device, side, step.model.fc.out_features, device)
        first = first_call(partial(compiled_step, *synthetic), device)
        pair = in_turns({"compiled": partial(compiled_step, *synthetic),
                         "eager": partial(step, *synthetic)}, config.batch_per_device, steps, rounds, device)
        rows[side] = {"first_step_s": first, "img_per_s": pair["compiled"], "eager_img_per_s": pair["eager"]}
        say(f"  {side:>5} px  first call {first:6.1f} s  {pair['compiled']:10.1f} img/s"
            f"  {pair['compiled'] / pair['eager']:5.2f}x eager")
    if len(rows) == 2:
        rows["side_changes"] = _side_changes(config, compiled_step, rows, device, steps)
    return rows


SIDE_CHANGE_STEPS = 3     # the first steps after a change that are timed one by one


def _side_changes(config, compiled_step, rows: dict, device, steps: int) -> dict:
    """Each change between the two compiled sides, both ways, as a run makes it: steady
    steps at one side, then the first SIDE_CHANGE_STEPS steps at the other, each timed;
    their seconds beyond that many steady steps of the new side are what the change loses."""
    batch, classes = config.batch_per_device, compiled_step.model.fc.out_features
    sides = [side for side in rows if isinstance(side, int)]
    batches = {side: synthetic_batch(batch, side, classes, device) for side in sides}
    changes = {}
    say(f"  side changes of the compiled step (the first {SIDE_CHANGE_STEPS} steps at the new side "
        "against its steady rate):")
    for old, new in ((sides[0], sides[1]), (sides[1], sides[0])):
        timed(partial(compiled_step, *batches[old]), steps, device, warmup=1)
        firsts = [first_call(partial(compiled_step, *batches[new]), device) for _ in range(SIDE_CHANGE_STEPS)]
        steady = batch / rows[new]["img_per_s"]
        lost = max(0.0, sum(firsts) - SIDE_CHANGE_STEPS * steady)
        changes[f"{old}->{new}"] = {"lost_s": lost, "first_steps_s": firsts, "steady_step_s": steady}
        say(f"  {old:>5} -> {new} px  first steps {', '.join(f'{t:.3f}' for t in firsts)} s against "
            f"{steady:.3f} s steady: {lost:.2f} s lost")
    return changes


POWER_SECONDS = 4.0       # long enough for NVML's counter (updated every few 10 ms) and RAPL's
IDLE_SECONDS = 2.0


def _power(config, step, full, device) -> dict:
    """Watts of this process's device (or the CPU packages) with nothing running for
    IDLE_SECONDS, then while the recipe step runs at full size for about POWER_SECONDS; or
    why the counters could not be read."""
    meter = energy.meter_for(device.type, device.index or 0)
    try:
        if meter.problem:
            say(f"\n  power while training: not measured: {meter.problem}")
            return {"not_measured": meter.problem}
        sync(device)
        meter.start()
        time.sleep(IDLE_SECONDS)
        idle = meter.stop()
        step(*full)
        sync(device)
        meter.start()
        began, images = time.perf_counter(), 0
        while time.perf_counter() - began < POWER_SECONDS:
            step(*full)
            images += config.batch_per_device
            if device.type == "cuda" and images % (8 * config.batch_per_device) == 0:
                sync(device)     # keep the queue short: the clock must see the work done
        sync(device)
        used = meter.stop()
    finally:
        meter.close()
    if not used.measured:
        say(f"\n  power while training: not measured: {used.not_measured}")
        return {"not_measured": used.not_measured}
    assert used.joules is not None        # measured
    figures = {"watts": used.watts, "joules_per_image": used.joules / images, "seconds": used.seconds,
               "side": config.train_resolution, "source": used.source,
               "power_limit_watts": used.power_limit_watts, "idle_watts": idle.watts}
    say(f"\n  power while training at {config.train_resolution} px: {used.watts:.0f} W, idle "
        f"{idle.watts or 0:.0f} W ({figures['joules_per_image']:.3g} J per image; {used.source})")
    return figures


def beside(config) -> str:
    """The loader measured beside the run's (its kind's `beside`, loader_kinds.py): the device
    loader beside FFCV's or torchvision's; beside the device loader, the one the recipe would
    use without it, the first that runs the configuration's augmentation."""
    augmented = augmentation_of(config) is not None
    return next(word for word in kind_of(config.train_loader).beside if kind_of(word).runs(augmented))


def _loader_rows(config, step, data, device, steps: int, rounds: int, full, smallest: int,
                 base: float, fed_sides: tuple[int, ...] | None = None) -> dict:
    """The run's own loaders in this process: the loader alone, the step fed by it in turns
    with the synthetic step, evaluation through the loader (epochs cycle on small sets); then
    the same for the loader `beside` the run's, and both side by side."""
    sides = fed_sides or tuple(dict.fromkeys((config.train_resolution, smallest)))
    own = _one_loader(config, step, data, device, steps, rounds, full, base, sides)
    figures = {"loader": own["img_per_s"], "loader_epoch_start": own["epoch_start_s"], "fed": own["fed"],
               "eval_first": own["eval_first"], "eval": own["eval"], "loader_memory": own["memory"],
               "loader_per_batch": own["per_batch"]}
    if kind_of(config.train_loader).pil_workers:
        figures["augmentation"] = augmentation_cost(config, data)
    other = config.replaced({"train_loader": beside(config)}, "the bench: the loader beside the run's")
    figures["beside"] = {"kind": other.train_loader,
                         **_one_loader(other, step, data, device, steps, rounds, full, base, sides)}
    _side_by_side(config, {config.train_loader: own, other.train_loader: figures["beside"]}, sides)
    return figures


def _one_loader(config, step, data, device, steps: int, rounds: int, full, base: float,
                sides: tuple[int, ...]) -> dict:
    """One loader kind (config.train_loader) in this process: alone, feeding the step at each
    of `sides` in turns with the synthetic step, two evaluation passes; its device memory."""
    batch, memory = config.batch_per_device, _memory_probe(device)
    train_loader, val_loader = run_loaders(config, distributed.Context(0, 0, 1, device), 0,
                                           data.train_path, data.val_path, data.eval_samples,
                                           shard=True)
    kind, figures = train_loader.kind, train_loader.figures()
    name = kind.name
    found: dict = {"threads": figures.threads}
    found["img_per_s"], found["epoch_start_s"] = loader_alone(train_loader, steps * 3, device)
    found["memory"] = memory()
    say(f"\n{_row(f'{name} train loader alone', found['img_per_s'], base)}")
    say(f"  per loader thread: {found['img_per_s'] / figures.threads:.1f} img/s ({figures.threads} "
        f"{kind.threads_are}" + (f", {pillow_build()})" if kind.pil_workers else ")")
        + (f"; its device memory at most {found['memory'] / 2**20:,.0f} MiB" if found["memory"] else ""))
    found["per_batch"] = per_batch_costs(train_loader, batch, found["img_per_s"])
    say("  " + describe_costs(kind, found["per_batch"], config.workers_per_device))
    say(f"  the loader alone is timed inside epochs; each epoch's start costs "
        f"{found['epoch_start_s'] or 0:.2f} s more than a steady batch (threads started, "
        "pipeline filled)")
    # the step fed by the loader in turns with the synthetic step, best round of each: their
    # difference is the loader's work the step does not hide (project's loader cost); at
    # full size, then at the smallest side, resized as the loop does (a launch-bound step
    # may suffer more from the loader's threads than a compute-bound one)
    say(f"  the step fed by the {name} loader, in turns with the synthetic step (loader work the "
        "step does not hide):")
    found["fed"] = {}
    for side in sides:
        fed, synthetic = [], []
        for _ in range(rounds):
            # a stream of its own for each fed turn, its thread stopped before the synthetic
            # turn, which a live loader thread would slow too (ffcv_loaders.to_device); the
            # warm-up takes the epoch's start and the batches the loader makes ahead
            stream = cycle(train_loader)
            fed.append(batch / timed(lambda: step(*next(stream), side), steps, device,  # noqa: B023 - timed here
                                     warmup=figures.batches_ahead + 2))
            stream.close()
            synthetic.append(batch / timed(partial(step, *full, side), steps, device))
        v = found["fed"][side] = {"fed_img_per_s": max(fed), "synthetic_img_per_s": max(synthetic)}
        if side == config.train_resolution:
            say(_row(f"step fed by the {name} loader", v["fed_img_per_s"], base, v["synthetic_img_per_s"]))
        say(f"  {side:>5} px  {v['fed_img_per_s']:10.1f} img/s against {v['synthetic_img_per_s']:.1f}: "
            f"{v['fed_img_per_s'] / v['synthetic_img_per_s']:.2f}x, "
            f"{max(0.0, 1 / v['fed_img_per_s'] - 1 / v['synthetic_img_per_s']) * 1000:.2f} ms per image")
    found["eval_first"], found["eval"] = _eval_passes(step, val_loader, device)
    say(_row(f"evaluation through the {name} loader, first pass", found["eval_first"], base))
    say(_row(f"evaluation through the {name} loader, second pass", found["eval"], base))
    train_loader.close()
    val_loader.close()
    return found


def _memory_probe(device):
    """A function that returns the bytes of device memory allocated above what was in use when
    the probe was made (its peak since then), on a GPU; None elsewhere."""
    if device.type != "cuda":
        return lambda: None
    sync(device)
    torch.cuda.reset_peak_memory_stats(device)
    before = torch.cuda.memory_allocated(device)
    return lambda: max(0, torch.cuda.max_memory_allocated(device) - before)


def _side_by_side(config, loaders: dict, sides: tuple[int, ...]) -> None:
    """One row per loader: delivered img/s and CPU threads, the step fed at each side as a
    ratio of the synthetic step, evaluation, device memory."""
    say("\n  the loaders side by side (the step fed: its rate over the synthetic step's at that side):")
    say(f"  {'loader':<24}{'img/s alone':>12}{'threads':>9}" + "".join(f"{f'fed {side} px':>12}" for side in sides)
        + f"{'eval img/s':>12}{'device MiB':>12}{'ops/batch':>11}{'host ms':>9}")
    for kind, v in loaders.items():
        label = kind_of(kind).name + (" (the run's)" if kind == config.train_loader else "")
        ratios = "".join(f"{v['fed'][side]['fed_img_per_s'] / v['fed'][side]['synthetic_img_per_s']:>11.2f}x"
                         for side in sides)
        memory = f"{v['memory'] / 2**20:>12,.0f}" if v["memory"] is not None else f"{'-':>12}"
        ops = v["per_batch"]["torch_ops"]
        say(f"  {label:<24}{v['img_per_s']:>12,.1f}{v['threads']:>9}{ratios}{v['eval']:>12,.1f}{memory}"
            f"{'n/a' if ops is None else ops:>11}{v['per_batch']['host_s'] * 1e3:>9.1f}")


def _eval_passes(step, val_loader, device) -> list[float]:
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
    return passes


AUGMENTATION_IMAGES = 300


def augmentation_cost(config, data, images: int = AUGMENTATION_IMAGES) -> dict:
    """ms per image of the torchvision loader's CPU work, in this process on one thread,
    over `images` images of the run's training .beton (cycled when it holds fewer): decode
    (torchvision_loader.BetonImages), crop + flip (RandomResizedCrop, flip), the augmentation
    (RandAugment or TrivialAugment: the profile's `randaugment` stage), to tensor (the
    transforms of torchvision_loader.image_transform, each timed alone)."""
    from ..loaders import torchvision_loader

    augment = augmentation_of(config)
    augmentation = next((m.named(config) for m in methods.ALL if m.on(config) and m.named is not None
                         and m.setting in ("randaugment_depth", "trivialaugment")), "no augmentation")
    transforms = list(torchvision_loader.image_transform(
        config.train_resolution, config.crop_scale_min, augment).transforms)
    at = next((i for i, t in enumerate(transforms) if augment is not None and t is augment), None)
    if at is None:   # no RandAugment, or wrapped: by name; else everything but the last is the crop
        at = next((i for i, t in enumerate(transforms) if "randaug" in type(t).__name__.lower()), None)
    crop = transforms[:at] if at is not None else transforms[:-1]
    randaugment = [transforms[at]] if at is not None else []
    to_tensor = transforms[at + 1:] if at is not None else transforms[-1:]
    source = torchvision_loader.BetonImages(data.train_path)
    count = len(source)
    seconds = dict.fromkeys(("decode", "crop_flip", "randaugment", "to_tensor"), 0.0)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for i in range(images):
            start = time.perf_counter()
            image, _ = source[i % count]
            now = time.perf_counter()
            seconds["decode"] += now - start
            for name, stage in (("crop_flip", crop), ("randaugment", randaugment), ("to_tensor", to_tensor)):
                start = now
                for transform in stage:
                    image = transform(image)
                now = time.perf_counter()
                seconds[name] += now - start
    finally:
        torch.set_num_threads(threads)
    ms = {name: value / images * 1e3 for name, value in seconds.items()}
    ms["total"] = sum(ms.values())
    figures: dict[str, float | str] = {
        **ms, "images": images, "threads": 1, "resolution": config.train_resolution,
        "source": f"{Path(str(data.train_path)).name} ({count} images)", "augmentation": augmentation}
    say(f"\n  the torchvision loader's CPU work per image, one thread, {images} images of the run's "
        f".beton (ms per image, {pillow_build()}):")
    for name, label in (("decode", "decode (BetonImages)"), ("crop_flip", "random resized crop + flip"),
                        ("randaugment", augmentation),
                        ("to_tensor", "to tensor"), ("total", "total")):
        say(f"  {label:<54}{ms[name]:8.3f} ms")
    say(f"  = at most {1e3 / ms['total']:.0f} img/s per thread from the transforms alone")
    return figures


def _per_batch_part(costs: dict) -> dict:
    """The profile's Loader fields of per_batch_costs's figures."""
    return {"torch_ops_per_batch": costs["torch_ops"], "augmentation_ops_per_batch": costs["augmentation_ops"],
            "host_s_per_batch": costs["host_s"], "device_part_s_per_batch": costs["device_s"]}


def _beside_part(found: dict, resolution: int) -> LoaderBeside:
    return LoaderBeside(
        loader=Loader(kind=found["kind"], img_per_s=found["img_per_s"], threads=found["threads"],
                      resolution=resolution, epoch_start_s=found["epoch_start_s"],
                      device_memory_bytes=found["memory"], **_per_batch_part(found["per_batch"])),
        fed_step_by_side={side: FedStep(**v, in_turns=True) for side, v in found["fed"].items()},
        eval_img_per_s=found["eval"])


def profile(config, figures: dict, steps: int, rounds: int) -> BenchProfile:
    """The bench profile `python -m submission project` reads (submission.bench_profile)."""
    host = fill_from_host({"host_processor_model_name": "", "host_processor_vcpu_count": ""})
    device_name = (torch.cuda.get_device_name(0) if config.device_type == "cuda"
                   else host["host_processor_model_name"])
    probes = figures.get("loader_setup")
    return BenchProfile(
        measured=Measured(date=datetime.date.today().isoformat(),
                          host=f"{host['host_processor_model_name']}, {host['host_processor_vcpu_count']} vCPUs",
                          device=config.device_type, device_name=device_name, torch=torch.__version__,
                          python=platform.python_version(), pillow=pillow_build(),
                          steps=figures.get("timed_steps", steps),
                          rounds=rounds),
        settings=recorded_settings(config),
        train_step={side: SideStep(**v) for side, v in figures["sizes"].items()},
        eval_img_per_s=figures["eval"],
        loader=Loader(kind=config.train_loader, img_per_s=figures["loader"],
                      threads=config.workers_per_device, resolution=config.train_resolution,
                      epoch_start_s=figures["loader_epoch_start"], device_memory_bytes=figures.get("loader_memory"),
                      **_per_batch_part(figures["loader_per_batch"])),
        fed_step_by_side={side: FedStep(**v, in_turns=True) for side, v in figures["fed"].items()},
        loader_beside=(_beside_part(figures["beside"], config.train_resolution) if "beside" in figures
                       else None),
        setup_s=SetupExtra(first_eval_extra=max(0.0, 1 / figures["eval_first"] - 1 / figures["eval"])),
        loader_setup_s=(LoaderSetup(LoaderProbe(**probes["cold"]), LoaderProbe(**probes["warm"]))
                        if probes else None),
        loop_overhead=LoopOverhead(**figures["loop_overhead"]),
        augmentation_ms_per_image=(Augmentation(**figures["augmentation"])
                                   if "augmentation" in figures else None),
        eval_forward_img_per_s=figures["eval_forward"], step_img_per_s=figures["step"],
        plain_loop_img_per_s=figures.get("plain_loop"), mfu=figures["mfu"],
        power=Power(**figures["power"]) if "power" in figures else None,
        compiled={str(side): v for side, v in figures["compiled"].items()} if "compiled" in figures else None)
