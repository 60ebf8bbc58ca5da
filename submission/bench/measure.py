"""The main bench of one process, on the run's own recipe step and plan: each row printed as
soon as it is measured, each measurement returning its part of the profile (bench_profile.py)
that `project` reads, assembled here.

Rows, in the order they are measured, by the module that measures them:
  - loader_setup_rows.py: the loaders' set-up inside the timed region: first training batch
    and first evaluation pass of the run's loaders in a fresh process, without and with the
    warm-up on the synthetic files (each in its own process: numba's work is per process);
  - step_rows.py: the recipe step on synthetic batches, and a plain torchvision loop
    (cross-entropy, torch.optim.SGD, a GradScaler with fp16) at the same batch, size and
    precision, the two taking turns (`rounds` rounds of `steps` steps); per
    progressive-resizing side of the run's plan, the first step (set-up: cuDNN/oneDNN plans)
    and the steady rate; the loop's work around a step at the smallest side (normalise,
    resize, EMA update), and the trackers' (tracker=: a progress record kept every
    progress_every_steps, written to TensorBoard at an evaluation); the evaluation forward
    alone on synthetic batches at the evaluation size;
  - compiled_rows.py, with compile=true: the compiled step at full size and at the smallest
    side, in turns with the eager one, and each change between the two sides (the first steps
    at the new side against its steady rate: what a compiled run loses at a side change);
  - step_rows.py: MFU: FLOPs of forward+backward counted with torch.utils.flop_counter at full
    size, over a matmul peak measured on the same device and dtype in the same run;
  - power_rows.py: the energy counters (submission.energy) read around the recipe step at
    full size for a few seconds, in watts per process (NVML on a GPU, RAPL on a CPU host), or
    why they could not be read;
  - loader_rows.py: the run's train loader alone (FFCV's, torchvision's or the device
    loader's, with its rate per thread and, on a GPU, its device memory), the step fed by the
    loader (in turns with the synthetic step, at full size and at the smallest side: what the
    loader costs the step), and evaluation through the loader; with train_loader=torchvision
    (augmentation_rows.py) the CPU work per image of its transforms, on one thread over a few
    hundred images of the run's .beton (decode, crop + flip, RandAugment, to tensor); then the
    same for the loader beside it (the device loader beside FFCV's or torchvision's, or the
    recipe's own beside the device loader), and one row per loader side by side;
  - thread_rows.py: the run's train loader alone at 1, 2, 4, ... threads up to the CPUs this
    process may use (sweep_threads=N: up to N; 0: none), the profile's `loader_sweep`.
quick=true keeps what a profile needs and `qualify` asks for: it leaves out the loaders'
fresh-process probes, the plain loop, the fed step at the smallest side and the thread sweep
(unless sweep_threads= is given); with compile=true, also the eager step at the sides other
than the compiled rows' two (the eager step is fed at those two, as the compiled one is).
With SAM (sam_interval N), every timed stretch is a multiple of N steps, so each mean holds
the recipe's share of two-pass SAM steps.
Ratios between rows survive a noisy machine better than absolute figures.
"""
from __future__ import annotations

import datetime
import platform

import torch

from ..bench_profile import BenchProfile, Measured, recorded_settings
from ..config import Config
from ..data.pillow_build import pillow_build
from ..data.prepare import prepare
from ..inventory import usable_cpus
from ..run_plan import RunPlan
from ..step import build_step
from ..system_json import fill_from_host
from .compiled_rows import compile_step, compiled_rows
from .loader_rows import loader_rows
from .loader_setup_rows import loader_setup_rows
from .power_rows import power
from .rows import say
from .step_rows import eval_forward, loop_overhead, mfu, side_rows, step_rows
from .thread_rows import loader_thread_sweep
from .timing import synthetic_batch


def header(config: Config, steps: int) -> str:
    return (f"system {config.system_id}, device {config.device_type}, batch {config.batch_per_device}, "
            f"{config.train_resolution}px train / {config.eval_resolution}px eval, precision "
            f"{config.precision}{'/' + config.amp_dtype if config.precision == 'amp' else ''}, "
            f"{config.workers_per_device} loader workers, {steps} timed steps")


def sam_steps(config: Config, steps: int) -> int:
    """`steps` rounded up to a multiple of sam_interval: a stretch of timed steps then holds
    the recipe's share of two-pass SAM steps whichever step it starts at."""
    interval = config.sam_interval
    return -(-steps // interval) * interval if interval else steps


def measure(config: Config, device: torch.device, steps: int, rounds: int, quick: bool = False,
            thread_counts: tuple[int, ...] | list[int] = ()) -> BenchProfile:
    """The profile of the main bench (quick: the parts a profile needs), each row printed as
    soon as it is measured; the train loader alone at each of `thread_counts` threads last."""
    asked, steps = steps, sam_steps(config, steps)
    say(header(config, steps) + (", quick (qualify's parts)" if quick else ""))
    if config.sam_interval:
        say(f"  SAM every {config.sam_interval}th step: each timed stretch is {steps} steps "
            f"({'raised from ' + str(asked) + ', ' if steps != asked else ''}a multiple of "
            f"sam_interval), {steps // config.sam_interval} of them two-pass SAM steps, in every mean")
    data = prepare(config, world_size=config.world_size)
    plan = RunPlan.of(config, data.train_samples)
    setup = None if quick else loader_setup_rows(config, data)   # first: nothing else running

    step = build_step(config, data.num_classes, device)
    full = synthetic_batch(config.batch_per_device, config.train_resolution, data.num_classes, device)
    base, plain = step_rows(config, step, full, device, steps, rounds, plain=not quick)
    # a compiled quick bench (qualify's) is about the compiled rows: the eager step at their two sides
    sides = side_rows(config, step, plan, device, steps,
                      only=(config.train_resolution, min(plan.sides())) if quick and config.compile else None)
    smallest = min(sides)
    overhead = loop_overhead(config, step, full, sides[smallest], smallest, device, steps)
    forward = eval_forward(config, step, data.num_classes, device, steps, base)
    compiled_step = compile_step(config, step, smallest) if config.compile else None
    compiled = compiled_rows(config, step, compiled_step, device, steps, rounds) if compiled_step else None
    utilisation = mfu(config, step, full, base, device, rounds)
    used = power(config, step, full, device)
    fed_sides = ((config.train_resolution,) if quick and not compiled_step
                 else tuple(dict.fromkeys((config.train_resolution, smallest))))
    loaders = loader_rows(config, step, data, device, steps, rounds, full, base, fed_sides, compiled_step)
    own = loaders.own
    swept = (loader_thread_sweep(config, data.train_path, usable_cpus(), list(thread_counts), device, steps)
             if thread_counts else None)
    return BenchProfile(
        measured=measured(config, steps, rounds), settings=recorded_settings(config), train_step=sides,
        eval_img_per_s=own.eval_img_per_s, loader=own.loader, fed_step_by_side=own.fed_step_by_side,
        compiled_fed_step_by_side=own.compiled_fed_step_by_side, loader_sweep=swept,
        loader_beside=loaders.beside, setup_s=loaders.setup_s, loader_setup_s=setup, loop_overhead=overhead,
        augmentation_ms_per_image=loaders.augmentation, eval_forward_img_per_s=forward, step_img_per_s=base,
        plain_loop_img_per_s=plain, mfu=utilisation, compiled=compiled, power=used)


def measured(config: Config, steps: int, rounds: int) -> Measured:
    """Where, when and with what the bench measured: the profile's `measured`."""
    host = fill_from_host({"host_processor_model_name": "", "host_processor_vcpu_count": ""})
    device_name = (torch.cuda.get_device_name(0) if config.device_type == "cuda"
                   else host["host_processor_model_name"])
    return Measured(date=datetime.date.today().isoformat(),
                    host=f"{host['host_processor_model_name']}, {host['host_processor_vcpu_count']} vCPUs",
                    device=config.device_type, device_name=device_name, torch=torch.__version__,
                    python=platform.python_version(), pillow=pillow_build(), steps=steps, rounds=rounds)
