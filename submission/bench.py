"""Throughput figures of one process, measured side by side in one run.

    python -m submission.bench [system=...] [key=value ...] [steps=N] [rounds=R] [json=FILE]
    python -m submission.bench sweep=loader [system=...] data_dir=FOLDER [key=value ...]
    python -m submission.bench compare=composer [system=...] [key=value ...] [steps=N]
    python -m submission.bench compare=methods [system=...] [key=value ...] [steps=N] [rounds=R]

Prints, for the resolved configuration (batch, resolution, precision, workers, device):
  - the recipe's training step on synthetic batches (model + loss + SGDW), and a plain
    torchvision loop (cross-entropy, torch.optim.SGD, a GradScaler with fp16) at the same
    batch, size and precision, the two taking turns (`rounds` rounds of `steps` steps);
  - per progressive-resizing size: the first step (set-up: cuDNN/oneDNN plans) and the
    steady rate;
  - the loop's work around a step at the smallest size (normalise, resize, EMA update);
  - with compile=true, the compiled step (torch.compile, static shapes or with
    compile_dynamic=true one graph for all sizes; cuda_graphs=true: replayed as CUDA
    graphs) at full size and at the smallest side, in turns with the eager one;
  - MFU: FLOPs of forward+backward counted with torch.utils.flop_counter at full size,
    over a matmul peak measured on the same device and dtype in the same run;
  - the evaluation forward alone on synthetic batches at the evaluation size;
  - the FFCV train loader alone, the step fed by the loader (in turns with the synthetic
    step, at full size and at the smallest side: what the loader costs the step), and
    evaluation;
  - the loaders' set-up inside the timed region: first training batch and first
    evaluation pass of the run's loaders in a fresh process, without and with the
    warm-up on the synthetic files (each in its own process: numba's work is per process).
`sweep=loader` instead times the FFCV train loader alone on the same images written with
each of a few .beton write options (mode, max resolution, JPEG quality).
`compare=composer` instead times the recipe's step beside MosaicML Composer's Trainer with
the Mild methods (bench_composer.py; Composer installed by hand, as its docstring says).
`compare=methods` instead times the recipe's step beside the same step with each of its
methods swapped for the plain loop's, one at a time (bench_methods.py): where the gap is.
Ratios between rows survive a noisy machine better than absolute figures. `json=FILE`
writes the figures as a profile that `python -m submission project` reads.
"""
from __future__ import annotations

import datetime
import json
import platform
import sys
import time
from pathlib import Path

import torch
import torchvision

from . import distributed
from .config import ConfigError, parse_overrides, resolve
from .data import ffcv_threads, loaders
from .data.prepare import cache_folder, prepare
from .methods.ema import EMA
from .methods.loss import LOSSES
from .methods.progressive_resize import resize_batch, schedule_sides
from .model import model_from_config
from .train import autocast_for, grad_scaler, optimizer_step, recipe_optimizer, run_loaders
from .warmup import compiled

PROFILE_SCHEMA = 1


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _timed(step, calls: int, device: torch.device, warmup: int = 2) -> float:
    """Seconds per call of step() after warm-up calls (first calls compile or allocate)."""
    for _ in range(warmup):
        step()
    _sync(device)                      # warm-up work must not leak into the timed calls
    start = time.perf_counter()
    for _ in range(calls):
        step()
    _sync(device)
    return (time.perf_counter() - start) / calls


def in_turns(steps_of: dict, images_per_call: int, calls: int, rounds: int, device: torch.device,
             warmup: int = 3) -> dict:
    """{name: img/s} of each step(), the steps taking turns: `warmup` untimed calls of each
    (first calls allocate, pick kernels, record CUDA graphs), then `rounds` rounds of
    `calls` timed calls of each in turn; each its best round. A machine whose speed drifts
    moves steps timed side by side alike, and their ratio holds."""
    for step in steps_of.values():
        for _ in range(warmup):
            step()
    best = dict.fromkeys(steps_of, 0.0)
    for _ in range(rounds):
        for name, step in steps_of.items():
            best[name] = max(best[name], images_per_call / _timed(step, calls, device, warmup=0))
    return best


def loader_alone(loader, batches: int, device: torch.device, restarts: int = 3) -> tuple[float, float | None]:
    """The FFCV loader alone: its steady img/s inside an epoch, and the seconds an epoch's
    start adds over a steady batch (FFCV starts its threads and fills its pipeline again;
    a run pays it once an epoch). Each epoch's first batch is left out of the steady rate,
    so a small data set, whose epochs are a few batches long, is measured as a large
    one's; then `restarts` fresh epochs time their first batch. The very first epoch's
    first batch (compiling, allocating) counts for neither."""
    if len(loader) < 2:
        raise ConfigError(f"the loader has {len(loader)} batch(es) an epoch: timing it needs at "
                          "least 2 (more images, or a smaller batch_per_device)")
    steady_s, steady_batches, images, starts = 0.0, 0, 0, []
    while steady_batches < batches or len(starts) <= restarts:
        last = time.perf_counter()         # iter() starts the epoch: its work is the start's
        epoch = iter(loader)
        try:
            for position, (batch, _) in enumerate(epoch):
                now = time.perf_counter()
                if position == 0:
                    starts.append(now - last)
                elif steady_batches < batches:
                    steady_s, steady_batches, images = steady_s + now - last, steady_batches + 1, images + len(batch)
                last = now
                if steady_batches >= batches:
                    break
        finally:
            loaders.finish(epoch)
            _sync(device)
    rate, later_starts = images / steady_s, starts[1:]
    if not later_starts:
        return rate, None
    return rate, max(0.0, sum(later_starts) / len(later_starts) - steady_s / steady_batches)


def _first_call(step, device: torch.device) -> float:
    _sync(device)
    start = time.perf_counter()
    step()
    _sync(device)
    return time.perf_counter() - start


def bench_device(config) -> torch.device:
    """The device a bench times on, with the run's CPU threads and cuDNN setting."""
    device = torch.device("cuda" if config.device_type == "cuda" else "cpu")
    ffcv_threads.install()      # else FFCV's Loaders set torch's threads to their worker count
    if device.type == "cpu":
        torch.set_num_threads(distributed.cpu_threads(config))
    torch.backends.cudnn.benchmark = config.cudnn_benchmark
    return device


def _synthetic(batch: int, side: int, classes: int, device: torch.device):
    images = torch.randint(0, 256, (batch, 3, side, side), dtype=torch.uint8, device=device)
    return (images.contiguous(memory_format=torch.channels_last),
            torch.randint(0, classes, (batch,), device=device))


def matmul_peak(device: torch.device, dtype: torch.dtype, n: int, rounds: int) -> float:
    """FLOP/s of an n x n matmul on this device and dtype (the MFU denominator), the best
    of `rounds` timings: a peak caught in a slow minute would put MFU above 100%."""
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    seconds = min(_timed(lambda: a @ b, 5, device) for _ in range(rounds))
    return 2 * n ** 3 / seconds


def train_flops(model, batch, normalize, loss_fn, smoothing) -> float:
    from torch.utils.flop_counter import FlopCounterMode
    images, labels = batch
    with FlopCounterMode(display=False) as counter:
        loss_fn(model(normalize(images)), labels, smoothing).backward()
    model.zero_grad(set_to_none=True)
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
    from .config import Config
    from .data.prepare import PreparedData
    from .warmup import warm_up_loaders

    config, data = Config.from_dict(config_dict), PreparedData(**data_dict)
    ffcv_threads.install()      # imports FFCV, as a run does before run_start
    device = torch.device("cuda" if config.device_type == "cuda" else "cpu")
    ctx = distributed.Context(0, 0, 1, device)
    figures = {"warm_up_s": 0.0}
    if warm:
        figures["warm_up_s"] = warm_up_loaders(*run_loaders(
            config, ctx, 0, data.synthetic_train_path, data.synthetic_val_path, data.synthetic_samples,
            shard=False), log=lambda line: None)
    start = time.perf_counter()
    train, val = run_loaders(config, ctx, 0, data.train_path, data.val_path, data.eval_samples,
                             shard=True)
    figures["build_s"] = time.perf_counter() - start
    batches = iter(train)          # FFCV allocates the epoch's buffers (pinned on a GPU) here
    figures["epoch_start_s"] = time.perf_counter() - start - figures["build_s"]
    next(batches)
    _sync(device)
    figures["train_first_batch_s"] = time.perf_counter() - start
    loaders.finish(batches)
    start = time.perf_counter()
    for _ in val:
        pass
    _sync(device)
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


def measure(config, steps: int, rounds: int) -> dict:
    device = bench_device(config)
    data = prepare(config)
    figures: dict = {"loader_setup": loader_setup(config, data)}   # first: nothing else running
    classes = data.num_classes
    model = model_from_config(config, classes).to(device)
    optimizer = recipe_optimizer(config, model, device)
    loss_fn, autocast = LOSSES[config.loss], autocast_for(config, device)
    scaler = grad_scaler(config, device)
    normalize = loaders.Normalizer(device)
    batch, res = config.batch_per_device, config.train_resolution

    def train_step(images, labels):
        optimizer_step(model, optimizer, scaler, autocast, loss_fn, normalize(images), labels,
                       config.label_smoothing)

    full = _synthetic(batch, res, classes, device)
    plain_step = plain_loop(config, classes, device, normalize)
    side_by_side = in_turns({"step": lambda: train_step(*full), "plain_loop": lambda: plain_step(*full)},
                            batch, steps, rounds, device)
    figures["step"], figures["plain_loop"] = side_by_side["step"], side_by_side["plain_loop"]
    del plain_step

    # progressive-resizing sizes: set-up cost of the first step, then the steady rate
    per_epoch = max(1, data.train_samples // config.global_batch_size)
    sizes = {}
    for side in schedule_sides(per_epoch, max(1, round(config.train_epochs * per_epoch)), config):
        synthetic = _synthetic(batch, side, classes, device)
        first = _first_call(lambda: train_step(*synthetic), device)
        sizes[side] = {"first_step_s": first,
                       "img_per_s": batch / _timed(lambda: train_step(*synthetic), steps, device, 1)}
    figures["sizes"] = sizes

    # the loop's own work around a step at the smallest side: normalising the loader's
    # full-size batch, resizing it, and the EMA update (every ema_update_every_batches)
    smallest = min(sizes)
    ema = EMA(model, config.ema_half_life_batches or 100, 1)
    every = config.ema_update_every_batches if config.ema_half_life_batches > 0 else 0
    prepare_s = _timed(lambda: resize_batch(normalize(full[0]), smallest, config.resize_mode),
                       steps, device)
    ema_s = _timed(lambda: ema.update(model, 1), steps, device) / every if every else 0.0
    step_s = batch / sizes[smallest]["img_per_s"]
    figures["loop_overhead"] = {"side": smallest, "normalize_resize_s": prepare_s, "ema_s": ema_s,
                                "share_of_step": (prepare_s + ema_s) / step_s}
    del ema

    # the evaluation forward alone, at its size, on synthetic batches (no loader)
    eval_batch = config.eval_batch_size or batch
    eval_images = _synthetic(eval_batch, config.eval_resolution, classes, device)[0]
    model.eval()
    with torch.no_grad(), autocast():
        figures["eval_forward"] = eval_batch / _timed(lambda: model(normalize(eval_images)), steps, device)
    model.train()

    if config.compile:
        net = compiled(model, cache_folder(config), 2, config.cuda_graphs,  # full size, smallest
                       config.compile_dynamic)

        def compiled_step(images, labels):
            optimizer_step(net, optimizer, scaler, autocast, loss_fn, normalize(images), labels,
                           config.label_smoothing)
        figures["compiled"] = {}
        for side in dict.fromkeys((res, smallest)):   # compute-bound, then launch-bound
            synthetic = _synthetic(batch, side, classes, device)
            first = _first_call(lambda: compiled_step(*synthetic), device)
            pair = in_turns({"compiled": lambda: compiled_step(*synthetic),
                             "eager": lambda: train_step(*synthetic)}, batch, steps, rounds, device)
            figures["compiled"][side] = {"first_step_s": first, "img_per_s": pair["compiled"],
                                         "eager_img_per_s": pair["eager"]}

    dtype = (torch.bfloat16 if config.amp_dtype == "bf16" else torch.float16) \
        if config.precision == "amp" else torch.float32
    if device.type == "cpu" and dtype == torch.float16:
        dtype = torch.float32
    flops = train_flops(model, full, normalize, loss_fn, config.label_smoothing) / batch
    peak = matmul_peak(device, dtype, 4096 if device.type == "cuda" else 2048, rounds)
    figures["mfu"] = {"flops_per_image": flops, "peak_flops": peak, "dtype": str(dtype),
                      "mfu": figures["step"] * flops / peak}

    # the run's own loaders, in one process; the loader alone, then the step fed by it;
    # epochs cycle for small data sets
    train_loader, val_loader = run_loaders(config, distributed.Context(0, 0, 1, device), 0,
                                           data.train_path, data.val_path, data.eval_samples,
                                           shard=True)
    if len(train_loader) == 0:
        raise ConfigError(f"{data.train_samples} training images are fewer than one batch ({batch})")
    figures["loader"], figures["loader_epoch_start"] = loader_alone(train_loader, steps * 3, device)
    # the step fed by the loader in turns with the synthetic step, best round of each: their
    # difference is the loader's work the step does not hide (project's loader cost); the
    # recipe step, timed a minute earlier on a machine whose speed moves, is no reference.
    # At full size, then at the smallest side, resized as the loop does (a launch-bound step
    # may suffer more from the loader's threads than a compute-bound one)
    figures["fed"] = {}
    for side in dict.fromkeys((res, smallest)):
        def step_at(images, labels):
            x = normalize(images)
            x = x if side == res else resize_batch(x, side, config.resize_mode)
            optimizer_step(model, optimizer, scaler, autocast, loss_fn, x, labels, config.label_smoothing)
        fed, synthetic = [], []
        for _ in range(rounds):
            # a stream of its own for each fed turn, its thread stopped before the synthetic
            # turn, which a live loader thread would slow too (an OpenMP team left in it on
            # the CPU did: loaders.to_device); the warm-up takes the epoch's start and the
            # batches the loader makes ahead
            stream = loaders.cycle(train_loader)
            fed.append(batch / _timed(lambda: step_at(*next(stream)), steps, device,
                                      warmup=train_loader.batches_ahead + 2))
            stream.close()
            synthetic.append(batch / _timed(lambda: step_at(*full), steps, device))
        figures["fed"][side] = {"fed_img_per_s": max(fed), "synthetic_img_per_s": max(synthetic)}

    model.eval()
    passes = []
    with torch.no_grad(), autocast():
        for _ in range(2):                    # the first pass carries FFCV's compilation
            start, seen = time.perf_counter(), 0
            for images, _ in val_loader:
                model(normalize(images))
                seen += images.shape[0]
            _sync(device)
            passes.append(seen / (time.perf_counter() - start))
    figures["eval_first"], figures["eval"] = passes
    return figures


def profile(config, figures: dict, steps: int, rounds: int) -> dict:
    """The profile JSON that `python -m submission project` reads (schema 1)."""
    from .system_description import fill_from_host
    host = fill_from_host({"host_processor_model_name": "", "host_processor_vcpu_count": ""})
    device_name = (torch.cuda.get_device_name(0) if config.device_type == "cuda"
                   else host["host_processor_model_name"])
    return {
        "schema": PROFILE_SCHEMA,
        "measured": {"date": datetime.date.today().isoformat(),
                     "host": f"{host['host_processor_model_name']}, {host['host_processor_vcpu_count']} vCPUs",
                     "device": config.device_type, "device_name": device_name,
                     "torch": torch.__version__, "python": platform.python_version(),
                     "steps": steps, "rounds": rounds},
        "settings": {"system": config.system_id, "recipe": config.recipe,
                     "batch_per_device": config.batch_per_device, "precision": config.precision,
                     "amp_dtype": config.amp_dtype, "workers_per_device": config.workers_per_device,
                     "compile": config.compile, "cuda_graphs": config.cuda_graphs,
                     "compile_dynamic": config.compile_dynamic,
                     "cudnn_benchmark": config.cudnn_benchmark,
                     "train_resolution": config.train_resolution,
                     "eval_resolution": config.eval_resolution},
        "train_step": {str(side): v for side, v in figures["sizes"].items()},
        "eval_img_per_s": figures["eval"],
        "eval_forward_img_per_s": figures["eval_forward"],
        "loader": {"img_per_s": figures["loader"], "threads": config.workers_per_device,
                   "resolution": config.train_resolution, "epoch_start_s": figures["loader_epoch_start"]},
        "setup_s": {"first_eval_extra": max(0.0, 1 / figures["eval_first"] - 1 / figures["eval"])},
        "plain_loop_img_per_s": figures["plain_loop"],
        "step_img_per_s": figures["step"],
        "fed_step_img_per_s": figures["fed"][config.train_resolution]["fed_img_per_s"],
        "fed_step_by_side": {str(side): v for side, v in figures["fed"].items()},
        "mfu": figures["mfu"],
        "loader_setup_s": figures["loader_setup"],
        "loop_overhead": figures["loop_overhead"],
        "compiled": figures.get("compiled"),
    }


def report(config, figures: dict, steps: int, rounds: int) -> str:
    base = figures["step"]
    lines = [f"system {config.system_id}, device {config.device_type}, batch {config.batch_per_device}, "
             f"{config.train_resolution}px train / {config.eval_resolution}px eval, precision "
             f"{config.precision}{'/' + config.amp_dtype if config.precision == 'amp' else ''}, "
             f"{config.workers_per_device} loader workers, {steps} timed steps", ""]
    fed = figures["fed"][config.train_resolution]
    # (row, img/s, a recipe step timed in turns with it, printed beside it; None: the first row)
    rows = [("recipe step, synthetic batches", base, None),
            ("plain torchvision loop (CE, SGD)", figures["plain_loop"], None),
            ("FFCV train loader alone", figures["loader"], None),
            ("step fed by the loader", fed["fed_img_per_s"], fed["synthetic_img_per_s"]),
            (f"evaluation forward, synthetic, {config.eval_resolution} px", figures["eval_forward"], None),
            ("evaluation, first pass (FFCV compile)", figures["eval_first"], None),
            ("evaluation, second pass", figures["eval"], None)]
    own = ["the fed step"]
    if "compiled" in figures:
        compiled_rows = figures["compiled"]
        how = ("compiled" + (" + CUDA graphs" if config.cuda_graphs else "")
               + (" (dynamic)" if config.compile_dynamic else ""))
        first_side = next(iter(compiled_rows))
        rows.insert(1, (f"{how} (first call {compiled_rows[first_side]['first_step_s']:.0f} s)",
                        compiled_rows[first_side]["img_per_s"], compiled_rows[first_side]["eager_img_per_s"]))
        own.insert(0, "the compiled step")
    lines += [f"  {name:<40} {value:10.1f} img/s   {value / (beside or base):6.2f}x the recipe step"
              + (f" beside it ({beside:.1f} img/s)" if beside else "")
              for name, value, beside in rows]
    lines += [f"  (timed in turns, the best of {rounds} rounds each: the plain loop with the first row; "
              f"{' and '.join(own)} with a recipe step of {'their' if len(own) > 1 else 'its'} own, "
              f"shown beside {'them' if len(own) > 1 else 'it'})"]
    lines += ["", "  the step fed by the loader, in turns with the synthetic step (loader work the step "
              "does not hide):"]
    lines += [f"  {side:>5} px  {v['fed_img_per_s']:10.1f} img/s against {v['synthetic_img_per_s']:.1f}: "
              f"{v['fed_img_per_s'] / v['synthetic_img_per_s']:.2f}x, "
              f"{max(0.0, 1 / v['fed_img_per_s'] - 1 / v['synthetic_img_per_s']) * 1000:.2f} ms per image"
              for side, v in figures["fed"].items()]
    lines += [f"  the loader alone is timed inside epochs; each epoch's start costs "
              f"{figures['loader_epoch_start']:.2f} s more than a steady batch (threads started, "
              "pipeline filled)"]
    overhead = figures["loop_overhead"]
    lines += ["", f"  around each step at {overhead['side']} px: normalise + resize "
              f"{overhead['normalize_resize_s'] * 1000:.1f} ms, EMA update {overhead['ema_s'] * 1000:.1f} ms "
              f"(per step, updating every {config.ema_update_every_batches}) = "
              f"{overhead['share_of_step'] * 100:.1f}% of a step at that size"]
    mfu = figures["mfu"]
    lines += ["", f"  MFU: {mfu['flops_per_image'] / 1e9:.2f} GFLOP per image (fwd+bwd, "
              f"{config.train_resolution} px) x {base:.1f} img/s / {mfu['peak_flops'] / 1e9:.0f} "
              f"GFLOP/s measured matmul peak ({mfu['dtype']}) = {mfu['mfu'] * 100:.1f}%", "",
              "  progressive-resizing sizes: first step (s), steady img/s"]
    lines += [f"  {side:>5} px  {v['first_step_s']:7.2f} s  {v['img_per_s']:10.1f} img/s"
              for side, v in figures["sizes"].items()]
    if "compiled" in figures:
        shapes = "symbolic sizes" if config.compile_dynamic else "static shapes"
        lines += ["", f"  {how} ({shapes}), in turns with the eager step at the same size:"]
        lines += [f"  {side:>5} px  first call {v['first_step_s']:6.1f} s  {v['img_per_s']:10.1f} img/s"
                  f"  {v['img_per_s'] / v['eager_img_per_s']:5.2f}x eager"
                  for side, v in figures["compiled"].items()]
    cold, warm = figures["loader_setup"]["cold"], figures["loader_setup"]["warm"]
    lines += ["", "  the run's loaders after run_start, in a fresh process:   no warm-up   after warm-up",
              f"  {'first training batch':<54}{cold['train_first_batch_s']:7.2f} s  {warm['train_first_batch_s']:9.2f} s",
              f"  {'  of which: both loaders built':<54}{cold['build_s']:7.2f} s  {warm['build_s']:9.2f} s",
              f"  {'            training epoch started (buffers)':<54}{cold['epoch_start_s']:7.2f} s  {warm['epoch_start_s']:9.2f} s",
              f"  {'first evaluation pass':<54}{cold['val_first_pass_s']:7.2f} s  {warm['val_first_pass_s']:9.2f} s",
              f"  {'loader warm-up on the synthetic files, before run_start':<54}{'':>9}  {warm['warm_up_s']:9.2f} s"]
    return "\n".join(lines)


# .beton write options against loader rate; the first row is the published conversion
LOADER_SWEEP = (  # (write_mode, write_max_resolution, write_jpeg_quality)
    ("proportion", 500, 90),      # Composer's create_ffcv_datasets.py: half JPEG, 500 px, q90
    ("raw", 500, 90),
    ("jpg", 500, 90),
    ("proportion", 350, 90),
    ("jpg", 350, 75),
)
SWEEP_TRAIN_LIMIT = 5000          # images per variant, unless train_limit is given


def loader_sweep(overrides: dict, steps: int) -> str:
    """The FFCV train loader alone, at the configuration's size and threads, on the same
    images written with each LOADER_SWEEP variant (each a .beton of its own, cached)."""
    from ffcv.reader import Reader

    overrides = {"train_limit": str(SWEEP_TRAIN_LIMIT), **overrides}
    rows = []
    for mode, max_resolution, quality in LOADER_SWEEP:
        config = resolve(None, {**overrides, "write_mode": mode, "write_max_resolution": str(max_resolution),
                                "write_jpeg_quality": str(quality)})
        device = torch.device("cuda" if config.device_type == "cuda" else "cpu")
        data = prepare(config)
        batch = config.batch_per_device
        loader = loaders.train_loader(data.train_path, config.train_resolution, batch,
                                      config.workers_per_device, 0, device, False, config.crop_scale_min)
        if len(loader) == 0:
            raise ConfigError(f"{data.train_samples} training images are fewer than one batch ({batch})")
        rate, _ = loader_alone(loader, steps * 3, device, restarts=0)
        stored = Reader(data.train_path).alloc_table["size"].sum()   # without page padding
        rows.append(f"  {mode:<11} {max_resolution:>6} px  q{quality:<4} "
                    f"{stored / data.train_samples / 1024:9.1f} KiB/image {rate:10.1f} img/s")
    return "\n".join([f"FFCV train loader alone: {config.train_resolution} px crops, batch {batch}, "
                      f"{config.workers_per_device} threads, {data.train_samples} images of "
                      f"{config.data_dir or config.dataset}", "",
                      "  write_mode  max res  quality  stored size       loader"] + rows)


def _whole_number(key: str, value: str, example: str) -> int:
    if not (value.isdigit() and int(value) > 0):
        raise ConfigError(f"{key}={value}: give a whole number above 0, e.g. {example}")
    return int(value)


COMPARISONS = {"composer": "MosaicML Composer's Trainer with the Mild methods",
               "methods": "the recipe's step with each method swapped for the plain loop's"}


def main(argv=None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    options = {"steps": "10", "rounds": "3", "json": "", "sweep": "", "compare": ""}
    for word in list(words):
        key, sep, value = word.partition("=")
        if key in options:
            if not sep:
                print(f"error: {key} takes a value ({key}=...): the bench's options are "
                      "steps=N, rounds=N, json=FILE, sweep=loader, compare="
                      + "|".join(COMPARISONS), file=sys.stderr)
                return 2
            words.remove(word)
            options[key] = value
    out, sweep, compare = options["json"], options["sweep"], options["compare"]
    try:
        steps = _whole_number("steps", options["steps"], "steps=10 (timed steps)")
        rounds = _whole_number("rounds", options["rounds"], "rounds=3 (turns of the steps timed side by side)")
        if sweep and sweep != "loader":
            raise ConfigError(f"sweep={sweep}: the bench knows sweep=loader (the .beton write options)")
        if compare and compare not in COMPARISONS:
            raise ConfigError(f"compare={compare}: the bench knows "
                              + "; ".join(f"compare={k} ({v})" for k, v in COMPARISONS.items()))
        if out and (sweep or compare):
            raise ConfigError(f"json={out} writes the main bench's profile; sweep= and compare= "
                              "only print their table")
        config = resolve(None, parse_overrides(words))
        if sweep:
            print("\n" + loader_sweep(parse_overrides(words), steps))
            return 0
        if compare == "composer":
            from . import bench_composer
            bench_composer.require_composer()
            figures = bench_composer.comparison(config, prepare(config).num_classes, steps)
            print("\n" + bench_composer.report(config, figures, steps))
            return 0
        if compare == "methods":
            from . import bench_methods
            figures = bench_methods.comparison(config, prepare(config).num_classes, steps, rounds)
            print("\n" + bench_methods.report(config, figures, steps, rounds))
            return 0
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    figures = measure(config, steps, rounds)
    print("\n" + report(config, figures, steps, rounds))
    if out:
        Path(out).write_text(json.dumps(profile(config, figures, steps, rounds), indent=1) + "\n")
        print(f"\nprofile written to {out} (python -m submission project ... profile={out})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
