"""A grid's points projected to the systems: the top-1 measured here, the minutes and dollars
`project`'s model gives each (configuration, budget) on each system from bench profiles.

The system's own launch settings (batch, processes, loader threads) and price apply; only the
recipe's settings of a configuration, and its budget, go along. Minutes are the projected
run with its evaluations left out (as the measured points count them: training, set-up inside
the timed region and epoch starts), dollars those minutes at the system's price.
"""
from __future__ import annotations

from dataclasses import dataclass

from .. import settings as declared
from ..bench_profile import BenchProfile, read
from ..config import Config, resolve
from ..costs import usd
from ..errors import ConfigError
from ..loader_kinds import kind_of
from ..options import TradeoffOptions
from ..projection import BENCH_HINT, loader_remedy, project
from ..system_descriptor import available_systems, load_descriptor
from .analysis import CurvePoint, Point, curve_points
from .grid import Grid


def systems_with_accelerators() -> list[str]:
    return [name for name in available_systems()
            if load_descriptor(name).accelerators > 0]


def recipe_settings(grid: Grid, configuration: str, budget: float) -> dict:
    """What a configuration at a budget changes of its recipe (harness settings left to the system)."""
    spec = next(c for c in grid.configurations if c.name == configuration)
    chosen = {**grid.settings, **spec.settings, **grid.budget_settings(spec, budget)}
    return {key: value for key, value in chosen.items()
            if key == "recipe" or declared.kind(key) == declared.RECIPE}


def system_config(grid: Grid, system: str, configuration: str, budget: float) -> Config:
    try:
        return resolve(system, {}, layers=((f"grid {grid.source}", recipe_settings(grid, configuration, budget)),))
    except ConfigError as exc:
        raise ConfigError(f"{configuration} at {budget:g} on {system}: {exc}") from None


@dataclass(frozen=True)
class ProjectionInputs:
    """What projecting a grid's points needs, read and checked before any point runs."""
    profile: BenchProfile
    by_recipe: dict[str, BenchProfile]          # profile_<recipe>=FILE
    loader: BenchProfile | None                 # loader_profile=FILE
    dp_efficiency: float | None
    systems: list[str]


def inputs_of(options: TradeoffOptions, by_recipe: dict[str, str] | None = None) -> ProjectionInputs:
    """profile=FILE (every recipe), by_recipe: profile_<recipe>=FILE (that recipe's, where its
    sides or methods differ: the baseline trains at 224 px), loader_profile=FILE (the recipes
    whose loader is of its kind), dp_efficiency=F, systems=A,B (default: every one with
    accelerators), each file read and checked."""
    remedy = BENCH_HINT.format(system="NAME")
    recipes = {key.removeprefix("profile_"): read(path, key, remedy) for key, path in (by_recipe or {}).items()}
    loader = read(options.loader_profile, "loader_profile", remedy) if options.loader_profile else None
    known = available_systems()
    systems = options.systems.split(",") if options.systems else systems_with_accelerators()
    unknown = [name for name in systems if name not in known]
    if unknown:
        raise ConfigError(f"systems={options.systems}: no descriptor {', '.join(unknown)} "
                          f"(systems/*.json: {', '.join(known)})")
    return ProjectionInputs(read(options.profile, "profile", remedy), recipes, loader, options.dp_efficiency,
                            systems)


def project_points(grid: Grid, points: list[Point],
                   given: ProjectionInputs) -> tuple[dict[str, list[CurvePoint]], list[str]]:
    """system -> the curve points of `points` with that system's projected minutes and cost
    (from `given`'s profiles); and notes on what was assumed."""
    curves = curve_points(points)
    projected: dict[str, list[CurvePoint]] = {}
    for system in given.systems:
        projected[system] = []
        for curve in curves:
            config = system_config(grid, system, curve.configuration, curve.budget)
            loader = (given.loader if given.loader is not None and given.loader.loader.kind == config.train_loader
                      else None)
            profile = given.by_recipe.get(config.recipe, given.profile)
            projected[system].append(_projected(config, curve, profile, loader, given.dp_efficiency))
    files = [f"profile {given.profile.file}"] + [f"profile_{r} {p.file}" for r, p in given.by_recipe.items()] \
        + ([f"loader_profile {given.loader.file} ({given.loader.loader.kind} loaders)"] if given.loader else [])
    notes = [f"top-1 measured on this machine; minutes and dollars projected from {', '.join(files)}: "
             "`python -m submission project system=NAME recipe=R scale_schedule_ratio=B profile=...` "
             "prints any of them in full, with every assumption"]
    return projected, notes


def _projected(config: Config, curve: CurvePoint, profile: BenchProfile, loader: BenchProfile | None,
               dp: float | None) -> CurvePoint:
    if kind_of(config.train_loader).pil_workers and loader is None:
        raise ConfigError(f"{curve.configuration} loads with torchvision (CPU-bound): projecting it needs "
                          f"loader figures: {loader_remedy(config)}")
    projection = project(config, profile, loader, dp, infer_sides=True)
    minutes = projection.run_minutes - projection.evaluation_minutes    # as a measured point counts them
    cost = usd(minutes, config.price_usd_per_hour)
    kwh = projection.run_kwh
    return CurvePoint(curve.configuration, curve.budget, curve.seeds, curve.top1_mean, curve.top1_std,
                      curve.top1_min, curve.top1_max, minutes, minutes, minutes, cost,
                      None if kwh is None else kwh * 3600)
