"""Hand-written bench profiles for the projection's tests, read as `python -m submission
project` reads profile files, and the configurations they are projected for."""
from __future__ import annotations

from submission import bench_profile as profile_module
from submission import config as config_module
from submission import projection


def _profile(sides, img_per_s=100.0, *, loader=1e6, threads=2, eval_rate=200.0, setup=None,
             system="cpu", batch=64, first_step_s=None, device="cpu"):
    steps = {str(s): {"img_per_s": img_per_s(s) if callable(img_per_s) else img_per_s,
                      "first_step_s": first_step_s if first_step_s is not None else 0.0}
             for s in sides}
    profile = {"schema": 2,
               "measured": {"date": "2026-11-22", "host": "test host, 2 cores", "device": device,
                            "device_name": "test device", "torch": "2.14.1"},
               "settings": {"system": system, "recipe": "mild", "batch_per_device": batch,
                            "precision": "fp32", "amp_dtype": "fp16", "workers_per_device": threads,
                            "compile": False, "train_resolution": 32, "eval_resolution": 32,
                            "sam_interval": 0, "train_loader": "ffcv"},
               "train_step": steps, "eval_img_per_s": eval_rate,
               "loader": {"kind": "ffcv", "img_per_s": loader, "threads": threads, "resolution": 32},
               "fed_step_by_side": {}}
    if setup is not None:
        profile["setup_s"] = setup
    return profile


def _project(config, profile, name, dp_efficiency=None, loader_profile=None, loader_profile_name=""):
    """projection.project from hand-written profiles, read as the command reads their files."""
    loader = (None if loader_profile is None
              else profile_module.parse(loader_profile, loader_profile_name, "loader_profile"))
    return projection.project(config, profile_module.parse(profile, name), loader, dp_efficiency)


def _cpu(**overrides):
    return config_module.resolve("cpu", {k: str(v) for k, v in overrides.items()})


H100_SIDES = [88, 96, 104, 112, 116, 124, 132, 140, 148, 156, 164, 172, 176]


def _gpu_mild(sides=H100_SIDES, **changes):
    """A Mild profile of one GPU: FFCV's loader, step rates with the area of the side."""
    profile = _profile(sides, lambda side: 1000.0 * (176 / side) ** 2, eval_rate=3000.0,
                       system="local", batch=256, device="cuda", loader=4000.0, threads=12)
    profile["settings"].update(precision="amp", train_resolution=176, eval_resolution=224, **changes)
    return profile


def _torchvision_loader(per_thread=160.0, threads=2):
    """A bench of recipe=hot on a CPU host: its torchvision loader and the augmentation."""
    profile = _profile([16, 20, 24, 28, 30], 5.0, loader=per_thread * threads, threads=threads)
    profile["settings"].update(recipe="hot", sam_interval=5, train_loader="torchvision")
    profile["loader"].update(kind="torchvision", resolution=176)
    profile["measured"].update(date="2026-11-24", host="cpu host, 2 vCPUs")
    profile["augmentation_ms_per_image"] = {"decode": 0.5, "crop_flip": 1.0, "randaugment": 3.0,
                                            "to_tensor": 0.25, "total": 4.75, "images": 300}
    return profile
