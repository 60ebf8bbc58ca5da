"""The commands that make the files a projection needs, as its errors name them."""
from __future__ import annotations

from ..config import Config
from ..loader_kinds import recipe_loader_if_replaced

BENCH_HINT = ("measure one on the target machine: `python -m submission bench system={system} "
              "json=profile-{system}.json`, then `python -m submission project system={system} "
              "profile=profile-{system}.json`")


def bench_command(config: Config) -> str:
    """The bench of `config`'s recipe and loader over an ImageNet-format folder DIR, whose
    profile holds the loader that configuration trains with."""
    ratio = (f" scale_schedule_ratio={config.scale_schedule_ratio:g}"
             if config.recipe != "mild" else "")
    loader = f" train_loader={config.train_loader}" if recipe_loader_if_replaced(config) is not None else ""
    return (f"python -m submission bench recipe={config.recipe}{ratio}{loader} data_dir=DIR "
            f"json=loader-{config.recipe}.json")


def loader_remedy(config: Config) -> str:
    """What to do when the loader figures are not those of the loader `config` trains with."""
    return (f"measure the {config.train_loader} loader with `{bench_command(config)}` (DIR: "
            "ImageNet-format images; on a host without a GPU add device=cpu precision=fp32) "
            f"and pass loader_profile=loader-{config.recipe}.json")
