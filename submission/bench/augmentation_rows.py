"""The bench's row of the torchvision loader's CPU work per image (train_loader=torchvision):
on one thread over a few hundred images of the run's .beton (decode, crop + flip, RandAugment,
to tensor): what a CPU-bound recipe's loader costs per image."""
from __future__ import annotations

import time
from pathlib import Path

import torch

from .. import methods
from ..bench_profile import Augmentation
from ..config import Config
from ..data.data_json import PreparedData
from ..data.pillow_build import pillow_build
from ..loaders.run_loaders import augmentation_of
from .rows import say

AUGMENTATION_IMAGES = 300


def augmentation_cost(config: Config, data: PreparedData, images: int = AUGMENTATION_IMAGES) -> Augmentation:
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
    say(f"\n  the torchvision loader's CPU work per image, one thread, {images} images of the run's "
        f".beton (ms per image, {pillow_build()}):")
    for name, label in (("decode", "decode (BetonImages)"), ("crop_flip", "random resized crop + flip"),
                        ("randaugment", augmentation),
                        ("to_tensor", "to tensor"), ("total", "total")):
        say(f"  {label:<54}{ms[name]:8.3f} ms")
    say(f"  = at most {1e3 / ms['total']:.0f} img/s per thread from the transforms alone")
    return Augmentation(decode=ms["decode"], crop_flip=ms["crop_flip"], randaugment=ms["randaugment"],
                        to_tensor=ms["to_tensor"], total=ms["total"], images=images, threads=1,
                        resolution=config.train_resolution,
                        source=f"{Path(str(data.train_path)).name} ({count} images)", augmentation=augmentation)
