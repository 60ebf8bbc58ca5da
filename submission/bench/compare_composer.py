"""The bench's Composer row: MosaicML Composer's own Trainer running the Mild methods,
beside this project's training step, at the same batch, size and precision.

    python -m submission bench compare=composer [system=...] [key=value ...] [steps=N]

Both sides get the same synthetic uint8 batches, already on the device, and the same
torchvision ResNet-50 with the recipe's initialisation; each normalises on the device.
Composer adds BlurPool, ChannelsLast, LabelSmoothing and EMA (its algorithms), its BCE
loss and its DecoupledSGDW; this project's side is the training loop's per-step work at
full size: normalise, the step (BlurPool, BCE, SGDW) and the EMA update at the recipe's
cadence. Progressive resizing is left out of both: at full size it resizes nothing.
This project's step is timed before and after Composer's and averaged, so that a machine
that drifts during the comparison is seen (the two figures) and evened out.

Composer is not a dependency of this project. Composer 0.32.1 declares torch < 2.7.1, but
its Trainer runs on this project's torch; install it without its pins:
    .venv/bin/pip install --no-deps mosaicml==0.32.1 mosaicml-cli torchmetrics lightning-utilities \\
        coolname tabulate py-cpuinfo torch-optimizer pytorch-ranger
    .venv/bin/pip install requests importlib-metadata
"""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import torch
from torch import nn

from ..config import Config, ConfigError
from ..model import build_model
from ..step import Normalizer, build_step
from .step_rows import Batch
from .timing import bench_device, sync, synthetic_batch

if TYPE_CHECKING:       # for the annotations only: Composer is optional, imported where it runs
    from composer import Logger, State

WARM_UP_STEPS = 3               # first steps allocate and pick kernels: not timed


def _batches(config: Config, classes: int, device: torch.device, count: int) -> list[Batch]:
    return [synthetic_batch(config.batch_per_device, config.train_resolution, classes, device,
                            torch.Generator().manual_seed(0))] * count


def our_mild_step(config: Config, classes: int, device: torch.device, steps: int) -> float:
    """img/s of the training loop's work per step at full size (EMA included)."""
    step = build_step(config, classes, device)
    batches = _batches(config, classes, device, WARM_UP_STEPS + steps)
    for number, (images, labels) in enumerate(batches, start=1):
        if number == WARM_UP_STEPS + 1:
            sync(device)
            start = time.perf_counter()
        step(images, labels)
        step.update_average(number)
    sync(device)
    return config.batch_per_device * steps / (time.perf_counter() - start)


class _Normalized(nn.Module):
    """uint8 batches in, as this project's loop gets them from FFCV."""

    def __init__(self, net: nn.Module, device: torch.device):
        super().__init__()
        self.net, self.normalize = net, Normalizer(device)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.net(self.normalize(images))


def require_composer() -> None:
    try:
        import composer  # noqa: F401 - whether it is installed
    except ImportError as exc:
        raise ConfigError(f"compare=composer needs MosaicML Composer in this environment ({exc}); "
                          "`python -m submission.bench.compare_composer` shows how to install it") from exc


def composer_mild_step(config: Config, classes: int, device: torch.device, steps: int) -> tuple[float, str]:
    """img/s of Composer's Trainer with the Mild methods; and Composer's version."""
    import composer
    from composer import Callback, Trainer
    from composer.algorithms import EMA as ComposerEMA
    from composer.algorithms import BlurPool, ChannelsLast, LabelSmoothing
    from composer.loss import binary_cross_entropy_with_logits, soft_cross_entropy
    from composer.models import ComposerClassifier
    from composer.optim import DecoupledSGDW as ComposerSGDW

    times: list[float] = []

    class StepTimes(Callback):
        def batch_end(self, state: State, logger: Logger) -> None:
            sync(device)
            times.append(time.perf_counter())

    net = build_model(classes, blurpool=False, init_conv=config.init_conv,    # Composer's surgery
                      init_bn_gamma=config.init_bn_gamma, logit_bias_init=config.logit_bias_init,
                      zero_init_residual=config.zero_init_residual, channels_last=False)
    model = ComposerClassifier(_Normalized(net, device), num_classes=classes,
                               loss_fn=binary_cross_entropy_with_logits if config.loss == "bce"
                               else soft_cross_entropy)
    algorithms = [BlurPool(replace_convs=True, replace_maxpools=True, blur_first=True),
                  LabelSmoothing(smoothing=config.label_smoothing)]
    if config.channels_last:
        algorithms.append(ChannelsLast())
    if config.ema_half_life_batches > 0:
        algorithms.append(ComposerEMA(half_life=f"{config.ema_half_life_batches}ba",
                                      update_interval=f"{config.ema_update_every_batches}ba"))
    precision = ("fp32" if config.precision != "amp"
                 else "amp_bf16" if config.amp_dtype == "bf16" else "amp_fp16")
    trainer = Trainer(
        model=model, train_dataloader=_batches(config, classes, device, WARM_UP_STEPS + steps),
        max_duration=f"{WARM_UP_STEPS + steps}ba", algorithms=algorithms,
        optimizers=ComposerSGDW(model.parameters(), lr=config.peak_lr, momentum=config.momentum,
                                weight_decay=config.effective_weight_decay),
        device="gpu" if device.type == "cuda" else "cpu", precision=precision,
        device_train_microbatch_size=config.batch_per_device,      # one microbatch a step
        callbacks=[StepTimes()], loggers=[], progress_bar=False, log_to_console=False, seed=0)
    from composer.algorithms.blurpool import BlurConv2d, BlurMaxPool2d
    surgery = [type(m) for m in trainer.state.model.modules() if isinstance(m, (BlurConv2d, BlurMaxPool2d))]
    if surgery.count(BlurConv2d) != 6 or surgery.count(BlurMaxPool2d) != 1:
        raise RuntimeError(f"Composer's BlurPool replaced {surgery.count(BlurConv2d)} convs and "
                           f"{surgery.count(BlurMaxPool2d)} pools, not 6 and 1: not the Mild model")
    trainer.fit()
    trainer.close()
    if len(times) != WARM_UP_STEPS + steps:
        raise RuntimeError(f"Composer's Trainer ran {len(times)} batches, "
                           f"{WARM_UP_STEPS + steps} were asked for")
    seconds = times[-1] - times[WARM_UP_STEPS - 1]
    return config.batch_per_device * steps / seconds, composer.__version__


def header(config: Config, steps: int) -> str:
    return (f"Mild step against Composer's Trainer with the Mild methods: batch "
            f"{config.batch_per_device}, {config.train_resolution} px, {config.precision}"
            + (f" ({config.amp_dtype})" if config.precision == "amp" else "")
            + f", {config.device_type}, {steps} timed steps after {WARM_UP_STEPS}\n")


def comparison(config: Config, classes: int, steps: int, say: Callable[[str], None] = print) -> dict:
    """This project's step, Composer's Trainer, this project's step again: each row said
    as it is measured, then the ratio (the mean of before and after over Composer)."""
    device = bench_device(config)
    before = our_mild_step(config, classes, device, steps)
    say(f"  this project's step, before Composer   {before:10.1f} img/s")
    composer_rate, version = composer_mild_step(config, classes, device, steps)
    say(f"  Composer {version} Trainer{'':<{max(0, 23 - len(version))}}{composer_rate:10.1f} img/s")
    after = our_mild_step(config, classes, device, steps)
    say(f"  this project's step, after Composer    {after:10.1f} img/s")
    ours = (before + after) / 2
    say(f"  this project / Composer                {ours / composer_rate:10.2f}x "
        "(the mean of before and after)")
    return {"ours_before": before, "ours_after": after, "ours": ours, "composer": composer_rate,
            "composer_version": version, "ratio": ours / composer_rate}


if __name__ == "__main__":
    print(__doc__)
