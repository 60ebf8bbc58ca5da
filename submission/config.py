"""One resolved configuration: a recipe, a system descriptor and key=value overrides.

Precedence, lowest first: the recipe (submission/recipes/<name>.yaml, which may extend
another through `base:`), the harness defaults (submission/settings.py), the embedded preset
for Fashion-MNIST, the `harness` block of the system descriptor (systems/<name>.json), then the
command line.

Recipe keys and harness keys share one flat namespace, so `lr=1.0`, `runs=3` and
`data_dir=/data/imagenet` all read the same way. Each setting is declared once, with its type
and what it admits, in submission/settings.py or (a method's own) in its declaration under
submission/methods/declarations/; unknown keys and values of the wrong type are
rejected with the list of known keys. `Config` is that declaration's dataclass with the system
around it: every setting a typed attribute, the derived values properties computed here.
"""
from __future__ import annotations

import copy
import dataclasses
import difflib
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from . import methods
from . import settings as declared
from .errors import ConfigError
from .names import RECIPE_FILE, folder_name_problem, recipe_path, system_name_problem
from .setting_declaration import SEED_RANGE, Range
from .settings import Settings
from .system_descriptor import SystemDescriptor, load_descriptor

REPO_ROOT = Path(__file__).resolve().parent.parent
EMBEDDED_PRESET = Path(__file__).resolve().parent / "embedded.yaml"
# Where a setting's value came from when the harness chose it, not the user (Config.origin)
DEFAULT_ORIGIN = "the harness defaults"
EMBEDDED_ORIGIN = EMBEDDED_PRESET.relative_to(REPO_ROOT).as_posix()
HARNESS_ORIGINS = {DEFAULT_ORIGIN, EMBEDDED_ORIGIN}
DEFAULT_SYSTEM = "local"
DEFAULT_RECIPE = declared.default("recipe")


@dataclass(frozen=True, kw_only=True)
class Config(Settings):
    """Resolved settings (typed attributes, declared in submission/settings.py) plus the
    system's descriptor."""
    system_id: str                  # the short name the user typed: p4d, cpu
    descriptor: SystemDescriptor    # systems/<system_id>.json's MLPerf fields (its harness block: settings)
    origins: dict = dataclasses.field(default_factory=dict)   # setting -> where its value came from

    @classmethod
    def of(cls, system_id: str, settings: dict[str, Any], descriptor: SystemDescriptor,
           origins: dict[str, str] | None = None) -> Config:
        """A Config of `settings` (every recipe setting, any harness setting; the others take
        their defaults)."""
        unknown = sorted(set(settings) - set(declared.DECLARED))
        missing = [name for name in declared.names(declared.RECIPE) if name not in settings]
        if unknown or missing:
            raise ConfigError("a configuration "
                              + (f"has settings this harness does not know: {', '.join(unknown)}"
                                 if unknown else "")
                              + ("; " if unknown and missing else "")
                              + (f"lacks recipe settings: {', '.join(missing)}" if missing else "")
                              + " (written by another version of the harness?)")
        return cls(system_id=system_id, descriptor=descriptor, origins=dict(origins or {}),
                   **settings)

    @property
    def settings(self) -> dict[str, Any]:
        """Every setting's value, by name."""
        return {name: getattr(self, name) for name in declared.DECLARED}

    def origin(self, key: str) -> str:
        return self.origins.get(key, DEFAULT_ORIGIN)

    def replaced(self, updates: dict[str, Any], origin: str) -> Config:
        """A new Config with `updates` set and `origin` recorded as where each came from;
        this one is left as it was (the values are not validated again)."""
        return dataclasses.replace(self, **updates, origins={**self.origins, **{key: origin for key in updates}})

    # ---- derived values: computed here, never stored twice -------------------
    @property
    def system_name(self) -> str:
        """The descriptor's name; several nodes of a one-node descriptor: Nx<name>."""
        name = self.descriptor.system_name
        if not name and self.descriptor.of_this_machine:
            raise ConfigError(f"systems/{self.system_id}.json is named from the machine it runs on: "
                              "this configuration was resolved without it (preflight.resolve_here)")
        return f"{self.num_nodes}x{name}" if self.num_nodes != self.descriptor.number_of_nodes else name

    @property
    def accelerators_per_node(self) -> int:
        """What trains: one GPU per process on cuda, none on cpu."""
        return self.processes_per_node if self.device_type == "cuda" else 0

    @property
    def num_nodes(self) -> int:
        return self.nodes or self.descriptor.number_of_nodes

    @property
    def device_type(self) -> str:
        if self.device:
            return self.device
        return "cuda" if self.descriptor.accelerators > 0 else "cpu"

    @property
    def processes_per_node(self) -> int:
        if self.procs_per_node:
            return self.procs_per_node
        return max(self.descriptor.accelerators, 1)

    @property
    def world_size(self) -> int:
        return self.num_nodes * self.processes_per_node

    @property
    def global_batch_size(self) -> int:
        return self.batch_per_device * self.world_size

    def recipe_value(self, name: str) -> Any:
        """What the recipe file says of `name`, before presets, the system and the command line."""
        return load_recipe(self.recipe)[name]

    @property
    def eval_batch(self) -> int:
        """Evaluation batch per process: eval_batch_size, or the training batch."""
        return self.eval_batch_size or self.batch_per_device

    @property
    def peak_lr(self) -> float:
        """Linear scaling from the published batch (lr 2.048 at 2048)."""
        return self.lr * self.global_batch_size / self.lr_reference_batch

    @property
    def train_epochs(self) -> float:
        scaled = self.epochs * self.scale_schedule_ratio
        return float(math.floor(scaled + 1e-9)) if self.whole_epochs else scaled

    @property
    def effective_weight_decay(self) -> float:
        """Per-step decay at this global batch: the published decay per epoch is kept."""
        return self.weight_decay * self.global_batch_size / self.lr_reference_batch

    @property
    def methods(self) -> list[str]:
        """The speed-up and regularisation methods the recipe applies, in words (logs,
        system description notes, `settings`), as each method module names itself."""
        return [method.named(self) for method in methods.ALL if method.named and method.on(self)]

    @property
    def warmup_train_epochs(self) -> float:
        return self.warmup_epochs * (self.scale_schedule_ratio if self.scale_warmup else 1.0)

    @property
    def seed_list(self) -> list[int]:
        words = [word.strip() for word in str(self.seeds).split(",") if word.strip()]
        bad = [w for w in words if not (w.isascii() and w.isdigit()) or not SEED_RANGE.admits(int(w))]
        if bad:
            raise ConfigError(f"seeds={self.seeds!r}: not seeds: {', '.join(bad)}; seeds are "
                              f"whole numbers {SEED_RANGE}, comma-separated (seeds=1,2,3,4,5)")
        return [int(w) for w in words]

    @property
    def trackers(self) -> list[str]:
        """The trackers `tracker` names (submission.tracking), in order, [] for none."""
        return declared.words("tracker", self.tracker)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Config:
        """Inverse of to_dict (derived values are recomputed, not read back)."""
        return cls.of(data["system"], dict(data["settings"]),
                      SystemDescriptor.from_json(data["system_description"]),
                      dict(data.get("origins", {})))

    def to_dict(self) -> dict[str, Any]:
        derived = {name: getattr(self, name) for name in (
            "system_name", "num_nodes", "device_type", "processes_per_node",
            "accelerators_per_node", "world_size",
            "global_batch_size", "peak_lr", "effective_weight_decay", "train_epochs",
            "warmup_train_epochs", "methods")}
        return {"system": self.system_id, "settings": self.settings,
                "derived": derived, "system_description": self.descriptor.to_json(),
                "origins": dict(self.origins)}


# ---------------------------------------------------------------------------
def in_repository(path: str | Path) -> Path:
    """`path`, relative to the repository unless absolute (results_dir, cache_dir)."""
    path = Path(path)
    return path if path.is_absolute() else REPO_ROOT / path


def _recipe_file(name: str) -> tuple[Path, dict[str, Any]]:
    path = recipe_path(name)
    try:
        return path, yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path} is not valid YAML: {exc}") from exc


def ratio_range(name: str) -> Range | None:
    """The scale_schedule_ratio range the recipe `name` is published for (its file's own
    `scale_schedule_ratio_range`, not inherited through `base:`), or None."""
    path, recipe = _recipe_file(name)
    text = recipe.get("scale_schedule_ratio_range")
    if text is None:
        return None
    match = re.fullmatch(r"\s*([\[(])\s*([0-9.]+)\s*,\s*([0-9.]+|inf)\s*([\])])\s*", str(text))
    if not match:
        raise ConfigError(f"{path}: scale_schedule_ratio_range {text!r} is not an interval such "
                          "as \"[0.75, 2.6]\" or \"(2.6, inf)\"")
    return Range(float(match[2]), None if match[3] == "inf" else float(match[3]),
                 low_open=match[1] == "(", high_open=match[4] == ")")


def load_recipe(name: str) -> dict[str, Any]:
    """The recipe's settings, checked against their declarations (a `base:` recipe first).
    A setting left empty (the published scale_schedule_ratio of Medium and Hot, which
    each user chooses) is None until the system or the command line sets it."""
    path, recipe = _recipe_file(name)
    base = recipe.pop("base", None)
    for key in ("recipe", "scale_schedule_ratio_range"):
        recipe.pop(key, None)
    for key, value in recipe.items():
        if key not in declared.DECLARED or declared.kind(key) != declared.RECIPE:
            raise ConfigError(f"{path}: unknown recipe setting {key!r}; known: "
                              f"{', '.join(declared.names(declared.RECIPE))}")
        if value is not None:
            recipe[key] = declared.coerce(key, value, origin=str(path))
    merged = {**load_recipe(base), **recipe} if base else recipe
    if not base:
        missing = [key for key in declared.names(declared.RECIPE) if key not in merged]
        if missing:
            raise ConfigError(f"{path} lacks recipe settings: {', '.join(missing)}")
    return merged


def parse_overrides(args: list[str]) -> dict[str, str]:
    overrides: dict[str, str] = {}
    for arg in args:
        key, sep, value = arg.partition("=")
        if not sep or not key:
            raise ConfigError(f"cannot read {arg!r}: settings are given as key=value "
                              "(e.g. system=p4d runs=3 lr=1.0)")
        overrides[key.strip()] = value.strip()
    return overrides


def _apply(settings: dict[str, Any], updates: dict[str, Any], origin: str,
           origins: dict[str, str]) -> None:
    for key, raw in updates.items():
        origins[key] = origin
        if key not in declared.DECLARED:
            close = difflib.get_close_matches(key, declared.DECLARED, n=3)
            hint = f" Did you mean {', '.join(close)}?" if close else ""
            raise ConfigError(f"unknown setting {key!r} (from {origin}).{hint} "
                              "`python -m submission settings` lists them all.")
        settings[key] = declared.coerce(key, raw, origin)
    if "price_usd_per_hour" in updates:
        # a price must not carry the source and date of one given elsewhere (30 USD on the
        # command line is not the descriptor's list price): its source is where it was given
        for key, value in (("price_source", origin), ("price_date", "")):
            if key not in updates:
                settings[key], origins[key] = value, origin


def resolve(system: str | None = None, overrides: dict[str, str] | None = None,
            layers: tuple[tuple[str, dict[str, Any]], ...] = (),
            described: Callable[[SystemDescriptor], SystemDescriptor] | None = None) -> Config:
    """The configuration of `overrides` (the command line) on `system`; `layers`, pairs of
    (origin, settings), apply between the system's harness block and the command line (a
    tradeoff grid's settings). It reads files and words only: `described`, where given,
    completes the descriptor as read (preflight.resolve_here: with this machine's
    accelerators, for a descriptor that leaves them to it)."""
    overrides = dict(overrides or {})
    system = overrides.pop("system", None) or system or DEFAULT_SYSTEM
    descriptor = load_descriptor(system)
    if described is not None:
        descriptor = described(descriptor)
    harness = dict(descriptor.harness)

    recipe_name = (overrides.get("recipe") or next((layer["recipe"] for _, layer in reversed(layers)
                                                    if "recipe" in layer), None)
                   or harness.get("recipe") or DEFAULT_RECIPE)
    settings = load_recipe(recipe_name)
    shown = recipe_path(recipe_name)
    origins = {key: str(shown.relative_to(REPO_ROOT) if shown.is_relative_to(REPO_ROOT) else shown)
               for key in settings}
    for key, default in declared.defaults().items():
        settings.setdefault(key, copy.deepcopy(default))
    above_system = {key: value for _, layer in layers for key, value in layer.items()} | overrides
    dataset = _chosen_dataset(settings, harness, above_system)
    if dataset == "fashion-mnist":
        _apply(settings, _load_preset(recipe_name), EMBEDDED_ORIGIN, origins)
    _apply(settings, harness, f"systems/{system}.json", origins)
    for origin, layer in layers:
        _apply(settings, layer, origin, origins)
    _apply(settings, overrides, "the command line", origins)
    settings["dataset"] = dataset
    settings["recipe"] = str(shown) if recipe_name.endswith(RECIPE_FILE) else recipe_name     # a file: its path
    if settings["scale_schedule_ratio"] is None:
        raise ConfigError(
            f"recipe={recipe_name} leaves scale_schedule_ratio to you, as its published file "
            f"does: choose the run's length with scale_schedule_ratio=R, R {ratio_range(recipe_name)} "
            "(the fraction of its 90 epochs to train)")
    config = Config.of(system, settings, SystemDescriptor(descriptor.fields), origins)
    validate(config)
    return config


def _chosen_dataset(settings: dict, harness: dict, overrides: dict) -> str:
    """The data set, with `auto` decided: ImageNet when a data_dir is given."""
    dataset = str(overrides.get("dataset") or harness.get("dataset") or settings["dataset"])
    if dataset == "auto":
        data_dir = overrides.get("data_dir") or harness.get("data_dir") or settings["data_dir"]
        dataset = "imagenet" if data_dir else "fashion-mnist"
    return dataset


def _load_preset(recipe: str) -> dict[str, Any]:
    """The embedded campaign's settings for `recipe`: the common ones, then the recipe's
    own block under `by_recipe`."""
    try:
        preset = yaml.safe_load(EMBEDDED_PRESET.read_text()) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{EMBEDDED_PRESET} is not valid YAML: {exc}") from exc
    by_recipe = preset.pop("by_recipe", None) or {}
    return {**preset, **(by_recipe.get(recipe) or {})}


def validate(config: Config) -> None:
    """Reject settings that cannot produce a meaningful run, before anything starts."""
    problems = []
    for key, value in config.settings.items():
        problem = declared.problem(key, value)
        if problem and isinstance(declared.admits(key), Range):
            problems.append(f"{key}={value!r} {problem} ({config.origin(key)})")
        elif problem:
            problems.append(f"{key} {problem}, not {value!r} ({config.origin(key)})")
    org, system_name = config.org, config.descriptor.system_name
    found = [(folder_name_problem("org", str(org)), config.origin("org"))]
    if system_name or not config.descriptor.of_this_machine:   # else named from the machine it runs on
        found.append((system_name_problem(str(system_name)), f"systems/{config.system_id}.json"))
    problems += [f"{problem} ({origin})" for problem, origin in found if problem]
    for key in ("results_dir", "cache_dir"):
        if not getattr(config, key).strip():
            problems.append(f"{key} is empty: name a folder (default {declared.default(key)!r})")
    if problems:       # the checks below combine these values
        raise ConfigError("invalid configuration:\n  - " + "\n  - ".join(problems))
    problems = combination_problems(config)
    if problems:
        raise ConfigError("invalid configuration:\n  - " + "\n  - ".join(problems))


def combination_problems(config: Config) -> list[str]:
    """What settings that are each admitted cannot do together."""
    published = ratio_range(config.recipe)
    problems = []
    seeds = config.seed_list
    if seeds and len(seeds) != config.runs:
        problems.append(f"seeds lists {len(seeds)} seeds for runs={config.runs}: give one per run")
    if len(set(seeds)) != len(seeds):
        problems.append("seeds must be distinct (MLPerf: each run uses a different seed)")
    if config.train_epochs <= 0:
        problems.append("epochs x scale_schedule_ratio, truncated to whole epochs "
                        "(whole_epochs=true), is 0: raise epochs or set whole_epochs=false")
    elif config.warmup_train_epochs >= config.train_epochs:
        problems.append(f"warmup ({config.warmup_train_epochs:g} epochs) must be shorter than "
                        f"training ({config.train_epochs:g} epochs)")
    # a named descriptor's V100s, refused where no GPU can be asked (dry-run, project);
    # preflight.gpu_problems asks the GPUs of the launching machine themselves
    accelerator = config.descriptor.accelerator_model_name
    if (config.precision == "amp" and config.amp_dtype == "bf16" and config.device_type == "cuda"
            and "V100" in accelerator.upper()):
        problems.append(f"amp_dtype=bf16: {accelerator} has no bf16 tensor cores; use the "
                        "published amp_dtype=fp16 (with a GradScaler)")
    if config.cuda_graphs and not (config.compile and config.device_type == "cuda"):
        problems.append("cuda_graphs=true needs compile=true and device cuda (it captures the "
                        "compiled step)")
    if config.compile_dynamic and not config.compile:
        problems.append("compile_dynamic=true needs compile=true (it chooses how the step is compiled)")
    if config.cudnn_benchmark and config.device_type != "cuda":
        problems.append(f"cudnn_benchmark=true on device {config.device_type}: it sets cuDNN, "
                        "which only CUDA devices use")
    if config.cuda_graphs and config.world_size > 1:
        problems.append(f"cuda_graphs=true with {config.world_size} processes: CUDA graphs around "
                        "DDP's all-reduce were never measured by this harness; use cuda_graphs=false "
                        "(compile=true alone works with several processes)")
    if (published and config.dataset == "imagenet"
            and not published.admits(config.scale_schedule_ratio)):
        # the ranges are fractions of ImageNet's 90 epochs; the embedded campaign sets its own
        # duration (submission/embedded.yaml)
        problems.append(f"scale_schedule_ratio={config.scale_schedule_ratio:g} is outside the "
                        f"{config.recipe} recipe's published range: it must be {published} "
                        f"(submission/recipes/{config.recipe}.yaml); longer or shorter runs "
                        "belong to another recipe")
    if config.eval_resize < config.eval_resolution:
        problems.append("eval_resize must be at least eval_resolution (resize, then center-crop)")
    problems += methods.problems(config)
    if config.node_rank >= config.num_nodes:
        problems.append(f"node_rank={config.node_rank} is outside 0..{config.num_nodes - 1} "
                        f"({config.num_nodes} node(s))")
    return problems
