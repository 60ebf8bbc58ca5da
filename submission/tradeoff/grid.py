"""A tradeoff grid: configurations x budgets x seeds, from a YAML file.

    name: embedded                  # results in <results_dir>/tradeoff/<name>/<system_name>/
    budget: scale_schedule_ratio    # what a budget is: scale_schedule_ratio, or epochs (B epochs:
                                    # the recipe's schedule dilated to B, ratio B / its 90 epochs)
    budgets: [0.25, 0.5, 1.0]       # of every configuration that names none of its own
    seeds: [1, 2]
    baseline: baseline              # the configuration each speed-up is measured against
    targets: [0.6, 0.65, 0.7]       # top-1 asked for: the cheapest point, the time to reach it
    settings: {epochs: 0.16}        # settings of every point (key: value, as key=value)
    configurations:                 # one curve each: a recipe, as published or with settings changed
      baseline: {recipe: baseline}
      mild: {recipe: mild}
      mild, no label smoothing: {recipe: mild, label_smoothing: 0.0}
      medium: {recipe: medium, budgets: [0.75, 1.0]}

`grid=NAME` reads submission/grids/NAME.yaml; any other value is a path. Every point trains its
whole budget (target_accuracy=none) with its seed; the points run in the order seed, budget,
configuration, so that an interrupted grid has whole curves of its first seeds.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from .. import settings as declared
from ..config import load_recipe
from ..errors import ConfigError
from ..setting_declaration import SEED_RANGE

GRIDS_DIR = Path(__file__).resolve().parent.parent / "grids"
# what a budget is, and the settings it sets (which the grid's settings may then not set)
BUDGET_SETS = {"scale_schedule_ratio": ("scale_schedule_ratio",),
               "epochs": ("epochs", "scale_schedule_ratio")}
BUDGET_KEYS = tuple(BUDGET_SETS)
GRID_KEYS = ("name", "budget", "budgets", "seeds", "baseline", "targets", "settings", "configurations")
# what every point sets itself: the grid's settings and configurations must leave them alone
POINT_KEYS = ("target_accuracy", "runs", "seeds")
# what is the same for every point of a grid by construction, and given on the command line
COMMAND_LINE_KEYS = ("system", "results_dir", "new_campaign", "package")
# what runs a command: taken from the system descriptor or the command line only, never a grid file
COMMAND_KEYS = ("cache_clear_cmd",)


@dataclass(frozen=True)
class Configuration:
    name: str
    settings: dict[str, Any]        # the recipe and the settings it changes
    budgets: tuple[float, ...]


@dataclass(frozen=True)
class GridPoint:
    index: int                      # its place in the grid: point=INDEX runs it alone
    configuration: str
    budget: float
    seed: int
    settings: dict[str, Any]        # everything the point sets (before the command line's)

    @property
    def slug(self) -> str:
        """The point's folder name: its configuration, budget and seed."""
        return f"{folder_name(self.configuration)}-budget{self.budget:g}-seed{self.seed}"

    @property
    def label(self) -> str:
        return f"{self.configuration} at {self.budget:g}, seed {self.seed}"


def folder_name(configuration: str) -> str:
    """A configuration's name as the start of its points' folder names."""
    return re.sub(r"[^a-z0-9.]+", "-", configuration.lower()).strip("-") or "configuration"


@dataclass(frozen=True)
class Grid:
    name: str
    source: str                     # the file it was read from
    budget_key: str
    seeds: tuple[int, ...]
    baseline: str
    targets: tuple[float, ...]
    settings: dict[str, Any]
    configurations: tuple[Configuration, ...]

    def points(self) -> list[GridPoint]:
        ordered = sorted(((seed, budget, position, configuration)
                          for position, configuration in enumerate(self.configurations)
                          for budget in configuration.budgets for seed in self.seeds),
                         key=lambda point: point[:3])
        return [GridPoint(index, configuration.name, budget, seed,
                          {**self.settings, **configuration.settings,
                           **self.budget_settings(configuration, budget),
                           "target_accuracy": "none", "runs": 1, "seeds": str(seed)})
                for index, (seed, budget, _, configuration) in enumerate(ordered)]

    def budget_settings(self, configuration: Configuration, budget: float) -> dict[str, Any]:
        """What `budget` sets: the ratio itself; or B epochs as the recipe's schedule dilated to
        B (its epochs, ratio B / them), so that the recipe's published ratio range still holds
        (Mild at 40 epochs: ratio 0.444 of 90)."""
        if self.budget_key == "scale_schedule_ratio":
            return {"scale_schedule_ratio": budget}
        epochs = load_recipe(configuration.settings["recipe"])["epochs"]
        return {"epochs": epochs, "scale_schedule_ratio": budget / epochs}

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "source": self.source, "budget": self.budget_key,
                "seeds": list(self.seeds), "baseline": self.baseline, "targets": list(self.targets),
                "settings": dict(self.settings),
                "configurations": {c.name: {**c.settings, "budgets": list(c.budgets)}
                                   for c in self.configurations}}


def grid_file(name: str) -> Path:
    """The file `grid=NAME` means: a shipped grid by name, else a path."""
    shipped = GRIDS_DIR / f"{name}.yaml"
    if shipped.is_file():
        return shipped
    path = Path(name)
    if path.is_file():
        return path
    known = ", ".join(sorted(p.stem for p in GRIDS_DIR.glob("*.yaml")))
    raise ConfigError(f"grid={name}: no such grid file and no shipped grid of that name (shipped: {known}, "
                      f"in {GRIDS_DIR.relative_to(GRIDS_DIR.parent.parent)}/)")


def load_grid(name: str) -> Grid:
    path = grid_file(name)
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path} is not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a grid is a mapping of {', '.join(GRID_KEYS)}")
    problems = _grid_problems(data)
    if problems:
        raise ConfigError(f"{path} is not a grid the harness can run:\n  - " + "\n  - ".join(problems))
    budgets = _numbers(data["budgets"])
    configurations = tuple(
        Configuration(str(name), {k: v for k, v in spec.items() if k != "budgets"},
                      _numbers(spec.get("budgets", budgets)))
        for name, spec in data["configurations"].items())
    return Grid(str(data["name"]), _shown(path), data["budget"], tuple(int(s) for s in data["seeds"]),
                str(data["baseline"]), _numbers(data.get("targets") or ()), dict(data.get("settings") or {}),
                configurations)


def _shown(path: Path) -> str:
    """The grid file as reports name it: inside the repository, relative to it."""
    repository = GRIDS_DIR.parent.parent
    resolved = path.resolve()
    return str(resolved.relative_to(repository)) if resolved.is_relative_to(repository) else str(path)


def _numbers(values: Any) -> tuple[float, ...]:
    return tuple(float(v) for v in values)


def _is_numbers(values: Any, positive: bool = True) -> bool:
    return (isinstance(values, list) and bool(values)
            and all(isinstance(v, (int, float)) and not isinstance(v, bool) and (v > 0 or not positive)
                    for v in values))


def _grid_problems(data: dict) -> list[str]:
    """What keeps `data` from being a grid, each problem in words."""
    problems = [f"unknown key {key!r} (a grid has {', '.join(GRID_KEYS)})" for key in data if key not in GRID_KEYS]
    problems += [f"{key} is missing" for key in GRID_KEYS if key not in data and key not in ("targets", "settings")]
    if problems:
        return problems
    if not isinstance(data["name"], str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", data["name"]):
        problems.append(f"name {data['name']!r} names a folder: letters, digits, '.', '_' and '-'")
    if data["budget"] not in BUDGET_KEYS:
        problems.append(f"budget {data['budget']!r}: a budget sets {' or '.join(BUDGET_KEYS)}")
    if not _is_numbers(data["budgets"]):
        problems.append("budgets must be a list of numbers above 0")
    elif len(set(data["budgets"])) != len(data["budgets"]):
        problems.append(f"budgets {data['budgets']} name a budget twice")
    if not (isinstance(data["seeds"], list) and data["seeds"]
            and all(isinstance(s, int) and not isinstance(s, bool) and SEED_RANGE.admits(s)
                    for s in data["seeds"]) and len(set(data["seeds"])) == len(data["seeds"])):
        problems.append(f"seeds must be a list of distinct whole numbers {SEED_RANGE}")
    if data.get("targets") is not None and not (
            _is_numbers(data["targets"]) and all(t <= 1 for t in data["targets"])):
        problems.append("targets must be a list of top-1 fractions in (0, 1], e.g. [0.759, 0.781]")
    problems += _settings_problems("settings", data.get("settings") or {}, data["budget"])
    configurations = data["configurations"]
    if not isinstance(configurations, dict) or not configurations:
        return problems + ["configurations must map each curve's name to its settings ({recipe: mild, ...})"]
    for name, spec in configurations.items():
        if not isinstance(spec, dict) or "recipe" not in spec:
            problems.append(f"configuration {name!r} needs a recipe ({{recipe: mild, ...}})")
            continue
        if "budgets" in spec and not _is_numbers(spec["budgets"]):
            problems.append(f"configuration {name!r}: budgets must be a list of numbers above 0")
        elif "budgets" in spec and len(set(spec["budgets"])) != len(spec["budgets"]):
            problems.append(f"configuration {name!r}: budgets {spec['budgets']} name a budget twice")
        problems += _settings_problems(f"configuration {name!r}",
                                       {k: v for k, v in spec.items() if k not in ("recipe", "budgets")},
                                       data["budget"])
    folders: dict[str, str] = {}
    for name in configurations:
        other = folders.setdefault(folder_name(str(name)), str(name))
        if other != str(name):
            problems.append(f"configurations {other!r} and {name!r} share a folder name "
                            f"({folder_name(str(name))!r}): rename one")
    if data["baseline"] not in configurations:
        problems.append(f"baseline {data['baseline']!r} is not one of the configurations "
                        f"({', '.join(map(str, configurations))})")
    return problems


def _settings_problems(where: str, settings: Any, budget_key: str) -> list[str]:
    if not isinstance(settings, dict):
        return [f"{where}: settings are a mapping (key: value)"]
    problems = []
    for key in settings:
        if key in COMMAND_KEYS:
            problems.append(f"{where}: {key} runs a command: it is taken from the system descriptor "
                            "or the command line only, never from a grid file; remove it from the grid")
        elif key not in declared.DECLARED and key not in COMMAND_LINE_KEYS:
            problems.append(f"{where}: unknown setting {key!r} (`python -m submission settings` lists them)")
        elif (key in POINT_KEYS or key in BUDGET_SETS.get(budget_key, ()) or key in COMMAND_LINE_KEYS
              or key == "recipe"):
            problems.append(f"{where}: {key} is set " + (
                "by each point (every point trains its whole budget with its own seed)" if key in POINT_KEYS
                else "by the budgets" if key in BUDGET_SETS.get(budget_key, ())
                else "by each configuration" if key == "recipe"
                else "on the command line, for the whole grid"))
    return problems
