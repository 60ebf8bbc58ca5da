"""`bench sweep=loader`: the FFCV train loader and the device loader (train_loader=device), each
alone, on the same images written with each of a few .beton write options (mode, max
resolution, JPEG quality), on the configuration's device (CUDA on a GPU machine): their rates,
and per batch of the device loader, stage by stage, its torch operations and the milliseconds
of its host's compiled gather, its device's JPEG decode and the rest of its device part (on a
GPU the Python that queues it; on a CPU the work itself), its gather's wait for a free ring
slot, the wait for its batch, and its host's synchronizations with the device (timing.per_batch_costs)."""
from __future__ import annotations

from collections.abc import Callable

import torch

from ..config import Config
from ..data.prepare import prepare
from ..loaders import device_loader, ffcv_loaders
from .timing import loader_alone, per_batch_costs

# .beton write options against loader rate; the first row is the published conversion
LOADER_SWEEP = (  # (write_mode, write_max_resolution, write_jpeg_quality)
    ("proportion", 500, 90),      # Composer's create_ffcv_datasets.py: half JPEG, 500 px, q90
    ("raw", 500, 90),
    ("jpg", 500, 90),
    ("proportion", 350, 90),
    ("jpg", 350, 75),
)
SWEEP_TRAIN_LIMIT = 5000          # images per variant, unless train_limit is given


def loader_sweep(config: Config, device: torch.device, steps: int, say: Callable[[str], None] = print) -> None:
    """FFCV's train loader and the device loader alone, at the configuration's size and
    threads, on the same images written with each LOADER_SWEEP variant (each a .beton of its
    own, cached); a row printed as each is measured."""
    from ffcv.reader import Reader

    batch = config.batch_per_device
    say(f"the train loaders alone: {config.train_resolution} px crops, batch {batch}, "
        f"{config.workers_per_device} threads, on {device.type}, images of "
        f"{config.data_dir or config.dataset} (train_limit={config.train_limit})\n")
    say("  write_mode  max res  quality  stored size            FFCV loader     device loader"
        "  ops/batch  host ms  decode ms  device ms  slot wait ms  batch wait ms  syncs/batch")
    for mode, max_resolution, quality in LOADER_SWEEP:
        variant = config.replaced({"write_mode": mode, "write_max_resolution": max_resolution,
                                   "write_jpeg_quality": quality}, "bench sweep=loader")
        data = prepare(variant)
        rates = []
        for loader in (ffcv_loaders.train_loader(data.train_path, variant.train_resolution, batch,
                                                 variant.workers_per_device, 0, device, False,
                                                 variant.crop_scale_min),
                       device_loader.train_loader(data.train_path, variant.train_resolution, batch,
                                                  variant.workers_per_device, 0, device, 0, 1,
                                                  variant.crop_scale_min)):
            rates.append(loader_alone(loader, steps * 3, device, restarts=0)[0])
        costs = per_batch_costs(loader, batch, rates[1])
        stored = Reader(data.train_path).alloc_table["size"].sum()   # without page padding
        say(f"  {mode:<11} {max_resolution:>6} px  q{quality:<4} "
            f"{stored / data.train_samples / 1024:9.1f} KiB/image {rates[0]:10.1f} img/s {rates[1]:10.1f} img/s"
            f"{costs.torch_ops:>11}{_ms(costs.host_s):>9}{_ms(costs.decode_s):>11}{_ms(costs.device_s):>11}"
            f"{_ms(costs.slot_wait_s):>14}{_ms(costs.batch_wait_s):>15}{_count(costs.host_waits):>13}")
    say(f"  ({data.train_samples} images in each variant; the device loader's milliseconds are medians per "
        "batch, each stage measured apart; decode: its JPEGs on the device, none where it decodes them on the "
        "host (a CPU); slot wait: its gather's for a free ring slot; batch wait: the taker's for a made batch; "
        "syncs: its host's waits for the device, 0 on the steady path)")


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.1f}"


def _count(per_batch: float | None) -> str:
    return "-" if per_batch is None else f"{per_batch:.2f}"
