"""Throughput figures of one process, measured side by side in one run.

    python -m submission.bench [system=cpu] [key=value ...] [steps=N]

Prints img/s of: the training step on synthetic batches (model + loss + SGDW), the FFCV
train loader alone, the real step fed by the loader, and evaluation; and the ratios
between them, which survive a noisy machine better than the absolute figures. Uses
the resolved configuration (batch, resolution, precision, workers, device) and the
prepared .beton files of the system.
"""
from __future__ import annotations

import sys
import time

import torch

from .config import ConfigError, parse_overrides, resolve
from .data import loaders
from .data.prepare import prepare
from .methods.loss import LOSSES
from .methods.sgdw import DecoupledSGDW
from .model import model_from_config
from .train import autocast_for, grad_scaler, optimizer_step


def _timed(step, batches: int, warmup: int = 2) -> float:
    """Seconds per call of step() after warm-up calls (first calls compile or allocate)."""
    for _ in range(warmup):
        step()
    if torch.cuda.is_available():
        torch.cuda.synchronize()       # warm-up work must not leak into the timed calls
    start = time.perf_counter()
    for _ in range(batches):
        step()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return (time.perf_counter() - start) / batches


def measure(config, steps: int) -> dict[str, float]:
    device = torch.device("cuda" if config.device_type == "cuda" else "cpu")
    if device.type == "cpu":
        torch.set_num_threads(config.cpu_threads or torch.get_num_threads())
    data = prepare(config)
    model = model_from_config(config, data.num_classes).to(device)
    optimizer = DecoupledSGDW(model.parameters(), lr=config.peak_lr, momentum=config.momentum,
                              weight_decay=config.effective_weight_decay)
    loss_fn, autocast = LOSSES[config.loss], autocast_for(config, device)
    scaler = grad_scaler(config, device)
    normalize = loaders.Normalizer(device)
    batch, res = config.batch_per_device, config.train_resolution

    def train_step(images, labels):
        optimizer_step(model, optimizer, scaler, autocast, loss_fn, normalize(images), labels,
                       config.label_smoothing)

    synthetic = (torch.randint(0, 255, (batch, 3, res, res), dtype=torch.uint8, device=device)
                 .contiguous(memory_format=torch.channels_last),
                 torch.randint(0, data.num_classes, (batch,), device=device))
    figures = {"step, synthetic batches": batch / _timed(lambda: train_step(*synthetic), steps)}

    train_loader = loaders.train_loader(data.train_path, res, batch, config.workers_per_device, 0,
                                        device, False, config.crop_scale_min)
    stream = iter(train_loader)
    figures["FFCV train loader alone"] = batch / _timed(lambda: next(stream), steps * 3)
    figures["step fed by the loader"] = batch / _timed(lambda: train_step(*next(stream)), steps)

    eval_batch = config.eval_batch_size or batch
    val_loader = loaders.val_loader(data.val_path, config.eval_resolution, config.eval_resize,
                                    eval_batch, config.workers_per_device, device, 0, 1,
                                    data.eval_samples)
    model.eval()
    start, seen = time.perf_counter(), 0
    with torch.no_grad(), autocast():
        for images, _ in val_loader:
            model(normalize(images))
            seen += images.shape[0]
    figures["evaluation (first pass, compile included)"] = seen / (time.perf_counter() - start)
    return figures


def main(argv=None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    steps = 10
    for word in list(words):
        if word.startswith("steps="):
            steps = int(word.split("=", 1)[1])
            words.remove(word)
    try:
        config = resolve(None, parse_overrides(words))
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    figures = measure(config, steps)
    base = figures["step, synthetic batches"]
    print(f"\nsystem {config.system_id}, device {config.device_type}, batch {config.batch_per_device}, "
          f"{config.train_resolution}px train / {config.eval_resolution}px eval, precision "
          f"{config.precision}{'/' + config.amp_dtype if config.precision == 'amp' else ''}, "
          f"{config.workers_per_device} loader workers, {steps} timed steps")
    for name, value in figures.items():
        print(f"  {name:<45} {value:9.1f} img/s   {value / base:5.2f}x the synthetic step")
    return 0


if __name__ == "__main__":
    sys.exit(main())
