"""A grid's points projected to the systems: the top-1 measured here, the minutes and dollars
`project`'s model gives each (configuration, budget) on each system from bench profiles.

The system's own launch settings (batch, processes, loader threads) and price apply; only the
recipe's settings of a configuration, and its budget, go along. Minutes are the projected
training parts (evaluation left out, as the measured points count them), dollars those
minutes at the system's price.
"""
from __future__ import annotations

from .. import settings as declared
from ..config import Config, resolve
from ..descriptor import available_systems, load_descriptor
from ..errors import ConfigError
from ..profile import BenchProfile, read
from ..projection import bench_command, project
from .analysis import CurvePoint, Point, curve_points
from .grid import Grid


def systems_with_accelerators() -> list[str]:
    return [name for name in available_systems()
            if str(load_descriptor(name).get("accelerators_per_node", "")).strip() not in ("", "0")]


def recipe_settings(grid: Grid, configuration: str, budget: float) -> dict:
    """What a configuration at a budget changes of its recipe (harness settings left to the system)."""
    spec = next(c for c in grid.configurations if c.name == configuration)
    chosen = {**grid.settings, **spec.settings, grid.budget_key: budget}
    return {key: value for key, value in chosen.items()
            if key == "recipe" or declared.kind(key) == declared.RECIPE}


def system_config(grid: Grid, system: str, configuration: str, budget: float) -> Config:
    try:
        return resolve(system, {}, layers=((f"grid {grid.source}", recipe_settings(grid, configuration, budget)),))
    except ConfigError as exc:
        raise ConfigError(f"{configuration} at {budget:g} on {system}: {exc}") from None


def profiles_of(options: dict) -> tuple[BenchProfile, dict[str, BenchProfile], BenchProfile | None]:
    """profile=FILE (every recipe), profile_<recipe>=FILE (that recipe's, where its sides or
    methods differ: the baseline trains at 224 px), loader_profile=FILE (the recipes whose
    loader is of its kind)."""
    by_recipe = {key.removeprefix("profile_"): read(path, key) for key, path in options.items()
                 if key.startswith("profile_")}
    loader = read(options["loader_profile"], "loader_profile") if options.get("loader_profile") else None
    return read(options["profile"], "profile"), by_recipe, loader


def project_points(grid: Grid, points: list[Point], options: dict) -> tuple[dict[str, list[CurvePoint]], list[str]]:
    """system -> the curve points of `points` with that system's projected minutes and cost;
    and notes on what was assumed."""
    profile, by_recipe, loader = profiles_of(options)
    dp = float(options["dp_efficiency"]) if options.get("dp_efficiency") else None
    systems = options["systems"].split(",") if options.get("systems") else systems_with_accelerators()
    curves = curve_points(points)
    projected = {}
    for system in systems:
        projected[system] = []
        for curve in curves:
            config = system_config(grid, system, curve.configuration, curve.budget)
            own = loader if loader is not None and loader.loader.kind == config.train_loader else None
            projected[system].append(_projected(config, curve, by_recipe.get(config.recipe, profile), own, dp))
    files = [f"profile {profile.file}"] + [f"profile_{r} {p.file}" for r, p in by_recipe.items()] \
        + ([f"loader_profile {loader.file} ({loader.loader.kind} loaders)"] if loader else [])
    notes = [f"top-1 measured on this machine; minutes and dollars projected from {', '.join(files)}: "
             "`python -m submission project system=NAME recipe=R scale_schedule_ratio=B profile=...` "
             "prints any of them in full, with every assumption"]
    return projected, notes


def _projected(config: Config, curve: CurvePoint, profile: BenchProfile, loader: BenchProfile | None,
               dp: float | None) -> CurvePoint:
    if config.train_loader == "torchvision" and loader is None:
        raise ConfigError(f"{curve.configuration} loads with torchvision (CPU-bound): projecting it needs "
                          f"loader_profile=FILE, measured with `{bench_command(config)}` on a CPU host")
    minutes = project(config, profile, loader, dp, infer_sides=True).training_minutes
    cost = minutes / 60 * config.price_usd_per_hour if config.price_usd_per_hour else None
    return CurvePoint(curve.configuration, curve.budget, curve.seeds, curve.top1_mean, curve.top1_std,
                      curve.top1_min, curve.top1_max, minutes, minutes, minutes, cost)
