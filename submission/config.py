"""One resolved configuration: a recipe, a system descriptor and key=value overrides.

Precedence, lowest first: the recipe (submission/recipes/<name>.yaml, which may
extend another through `base:`), the harness defaults below, the `harness` block of
the system descriptor (systems/<name>.json), then the command line.

Recipe keys and harness keys share one flat namespace, so `lr=1.0`, `runs=3` and
`data_dir=/data/imagenet` all read the same way. Unknown keys and values of the
wrong type are rejected with the list of known keys.
"""
from __future__ import annotations

import copy
import difflib
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

REPO_ROOT = Path(__file__).resolve().parent.parent
SYSTEMS_DIR = REPO_ROOT / "systems"
RECIPES_DIR = Path(__file__).resolve().parent / "recipes"
EMBEDDED_PRESET = Path(__file__).resolve().parent / "embedded.yaml"
# Where a setting's value came from when the harness chose it, not the user (Config.origin)
DEFAULT_ORIGIN = "the harness defaults"
EMBEDDED_ORIGIN = EMBEDDED_PRESET.relative_to(REPO_ROOT).as_posix()
HARNESS_ORIGINS = {DEFAULT_ORIGIN, EMBEDDED_ORIGIN}
DEFAULT_SYSTEM = "local"


class ConfigError(ValueError):
    """Bad user input: the message says what is wrong and what to do."""


# Settings of the harness, not of the published recipe: name -> (default, meaning).
HARNESS_SETTINGS: dict[str, tuple[Any, str]] = {
    "recipe": ("mild", "recipe file under submission/recipes/ (mild, medium, hot, baseline)"),
    "org": ("Unaffiliated", "submitting organisation: MLPerf `submitter` and package folder"),
    "runs": (5, "runs in the campaign; an MLPerf ResNet score needs exactly 5"),
    "seeds": ("", "comma-separated seeds, one per run; empty: drawn once, recorded"),
    "new_campaign": (False, "archive the existing results of this system and start again"),
    "package": (True, "assemble results/package/<org>/ when the campaign completes"),
    "results_dir": ("results", "where result files, summaries and packages go"),
    # data
    "dataset": ("imagenet", "imagenet (an image folder), fashion-mnist (the embedded campaign: "
                            "submission/embedded.yaml), or auto: imagenet when data_dir is set"),
    "data_dir": ("", "image folder with train/ and val/; for fashion-mnist the idx folder"),
    "val_labels": ("", "label CSV (image,class-folder rows, e.g. LOC_val_solution.csv) for a "
                       "flat val/ folder; convert the devkit's ground truth to it first"),
    "cache_dir": ("cache", ".beton files, reused while source and write settings match"),
    "skip_bad_images": (False, "skip unusable images (unreadable, or too small for the pipeline; counted, listed) instead of failing"),
    "write_mode": ("proportion", "FFCV RGBImageField write_mode: raw, jpg, proportion, smart (published: "
                   "proportion; raw gave a CPU-bound loader 2x the rate for 1.75x the bytes: "
                   "docs/throughput.md, bench sweep=loader)"),
    "write_max_resolution": (500, "longest side stored in the .beton (Composer's create_ffcv_datasets.py: 500)"),
    "write_jpeg_quality": (90, "JPEG quality of stored images (create_ffcv_datasets.py: 90)"),
    "write_compress_probability": (0.5, "share of images stored as JPEG in proportion mode (0.5)"),
    "train_limit": (0, "use only N training images, evenly spaced over the set (0: all)"),
    "eval_limit": (0, "use only N validation images, evenly spaced over the set (0: all)"),
    # launch
    "batch_per_device": (256, "batch per process; global batch = this x processes"),
    "workers_per_device": (8, "FFCV loader threads per process"),
    "procs_per_node": (0, "processes per node; 0: accelerators_per_node, or 1 without"),
    "nodes": (0, "nodes; 0: the descriptor's number_of_nodes"),
    "node_rank": (0, "this node's rank in a multi-node campaign"),
    "master_addr": ("127.0.0.1", "rendezvous host (node 0) for torchrun"),
    "master_port": (29500, "rendezvous port for torchrun"),
    "device": ("", "cuda or cpu; empty: cuda when the descriptor has accelerators"),
    "cpu_threads": (0, "torch threads per process on CPU; 0: cores / processes"),
    "cache_clear_cmd": ("sysctl -w vm.drop_caches=3", "run before each run; empty: skip (logged)"),
    "eval_batch_size": (0, "evaluation batch per process; 0: batch_per_device"),
    "progress_every_steps": (50, "print a progress line every N steps"),
    "max_run_minutes": (0.0, "stop a run (status aborted) after N minutes; 0: no limit"),
    "warmup": (True, "before run_start, run every training size and the eval size once on "
                     "synthetic batches (cuDNN plans, compilation); weights left untouched"),
    "compile": (False, "torch.compile the training step (static shapes, every size compiled "
                       "in the warm-up, Inductor cache under cache_dir)"),
    "cuda_graphs": (False, "with compile=true on one GPU: replay each size's compiled step as "
                           "CUDA graphs (torch.compile mode reduce-overhead)"),
    "compile_dynamic": (False, "with compile=true: graphs with symbolic sizes (torch.compile "
                               "dynamic=True) instead of one per size; torch compiles again only "
                               "where a size changes its guards"),
    "cudnn_benchmark": (False, "on CUDA: cuDNN times its algorithms at each new shape and keeps "
                               "the fastest (the warm-up pays the trials before run_start)"),
    # price, for cost per run
    "price_usd_per_hour": (0.0, "hourly price of the whole system (all nodes)"),
    "price_source": ("", "where the price comes from"),
    "price_date": ("", "when the price was read"),
}

# Settings a recipe file defines (values in submission/recipes/*.yaml): name -> (type, meaning).
# Recipe files are checked against these types; the values live only in the recipe files.
RECIPE_SETTINGS: dict[str, tuple[type, str]] = {
    "blurpool": (bool, "anti-aliased stride-2 convs and stem max-pool"),
    "init_conv": (str, "conv/linear weight init: kaiming_normal or torchvision's default"),
    "init_bn_gamma": (str, "BatchNorm gamma init: uniform (U(0,1)) or ones"),
    "logit_bias_init": (str, "final bias init: log_prior (-log classes) or zeros"),
    "zero_init_residual": (bool, "zero the last BN gamma of each residual block"),
    "channels_last": (bool, "NHWC model and batches"),
    "loss": (str, "bce (sum over classes / batch) or cross_entropy"),
    "label_smoothing": (float, "label smoothing of the targets"),
    "ema_half_life_batches": (float, "EMA half-life in batches; 0: no EMA"),
    "ema_update_every_batches": (int, "EMA update cadence in batches"),
    "progressive_resize": (bool, "downscale training batches early in training"),
    "resize_initial_scale": (float, "side scale until resize_start_fraction"),
    "resize_start_fraction": (float, "share of training at the initial scale"),
    "resize_finish_fraction": (float, "share of training at which full size is reached"),
    "resize_multiple": (int, "the side is rounded to a multiple of this"),
    "resize_granularity": (str, "epoch: the side changes at epoch boundaries; step: every step"),
    "resize_mode": (str, "interpolation of the downscaling: nearest, bilinear or area"),
    "train_resolution": (int, "RandomResizedCrop side of training images"),
    "eval_resolution": (int, "center-crop side of evaluation images"),
    "eval_resize": (int, "evaluation: resize to this, then center-crop eval_resolution"),
    "crop_scale_min": (float, "RandomResizedCrop smallest area fraction"),
    "optimizer": (str, "sgdw: SGD with decoupled weight decay"),
    "lr": (float, "peak learning rate at lr_reference_batch; scaled linearly with the batch"),
    "lr_reference_batch": (int, "global batch at which lr and weight_decay are given"),
    "momentum": (float, "SGD momentum"),
    "weight_decay": (float, "decoupled weight decay per step at lr_reference_batch; scaled "
                            "linearly with the batch, so the decay per epoch stays the same"),
    "epochs": (float, "training epochs before scale_schedule_ratio"),
    "scale_schedule_ratio": (float, "multiplies epochs (and warmup_epochs if scale_warmup)"),
    "whole_epochs": (bool, "truncate epochs x scale_schedule_ratio to whole epochs (Composer v0.7)"),
    "warmup_epochs": (float, "linear warmup, in epochs"),
    "scale_warmup": (bool, "multiply warmup_epochs by scale_schedule_ratio too (Composer v0.7: no)"),
    "eval_every_epochs": (float, "evaluation cadence in epochs"),
    "target_accuracy": (float, "top-1 fraction that ends a run successfully"),
    "precision": (str, "amp (autocast) or fp32"),
    "amp_dtype": (str, "autocast dtype when precision=amp: fp16 (with a GradScaler) or bf16"),
    # Medium and Hot (all off in Mild)
    "mixup_alpha": (float, "MixUp: mixing weight min(z, 1-z), z ~ Beta(alpha, alpha); 0: no MixUp"),
    "sam_interval": (int, "SAM: every Nth step is a two-pass SAM step; 0: no SAM"),
    "sam_rho": (float, "SAM: radius of the ascent step"),
    "sam_epsilon": (float, "SAM: added to the gradient norm of the ascent"),
    "stochastic_depth_rate": (float, "stochastic depth: drop rate of the last residual block; 0: none"),
    "stochastic_depth_method": (str, "stochastic depth: sample (per image) or block (per batch)"),
    "stochastic_depth_distribution": (str, "stochastic depth: rates linear in depth, or uniform"),
    "colout_fraction": (float, "ColOut: share of rows and of columns dropped from each batch; 0: none"),
    "randaugment_depth": (int, "RandAugment: operations per image; 0: no RandAugment"),
    "randaugment_severity": (int, "RandAugment: magnitude, 0-10"),
    "randaugment_set": (str, "RandAugment: augmentation set (all, safe, original)"),
    "train_loader": (str, "ffcv, or torchvision (per-image CPU augmentation in DataLoader workers, "
                          "from the same .beton: what RandAugment needs)"),
}


@dataclass(frozen=True)
class Range:
    """The numbers a setting admits: low and/or high, each end closed unless marked open."""
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False

    def admits(self, value: float) -> bool:
        return ((self.low is None or (value > self.low if self.low_open else value >= self.low))
                and (self.high is None or (value < self.high if self.high_open else value <= self.high)))

    def __str__(self) -> str:
        def number(value: float) -> str:
            return str(int(value)) if float(value).is_integer() else f"{value:g}"
        if self.high is None:
            return f"{'above' if self.low_open else 'at least'} {number(self.low)}"
        return (f"in {'(' if self.low_open else '['}{number(self.low)}, "
                f"{number(self.high)}{')' if self.high_open else ']'}")


AT_LEAST_0, AT_LEAST_1, ABOVE_0 = Range(0), Range(1), Range(0, low_open=True)
FRACTION = Range(0, 1)

# What each number setting admits and the words each text setting takes, checked by
# `validate` before anything starts (a value out of range would fail mid-run, or hang
# FFCV's writer, or silently spoil runs). Ranges that tie two settings are in `validate`.
RANGES: dict[str, Range] = {
    "runs": AT_LEAST_1, "batch_per_device": AT_LEAST_1, "workers_per_device": AT_LEAST_1,
    "procs_per_node": AT_LEAST_0, "nodes": AT_LEAST_0, "node_rank": AT_LEAST_0,
    "master_port": Range(1, 65535), "cpu_threads": AT_LEAST_0, "eval_batch_size": AT_LEAST_0,
    "progress_every_steps": AT_LEAST_1, "max_run_minutes": AT_LEAST_0,
    "train_limit": AT_LEAST_0, "eval_limit": AT_LEAST_0, "write_max_resolution": AT_LEAST_1,
    "write_jpeg_quality": Range(1, 100), "write_compress_probability": FRACTION,
    "price_usd_per_hour": AT_LEAST_0,
    "label_smoothing": Range(0, 1, high_open=True), "target_accuracy": Range(0, 1, low_open=True),
    "ema_half_life_batches": AT_LEAST_0, "ema_update_every_batches": AT_LEAST_1,
    "resize_multiple": AT_LEAST_1, "train_resolution": AT_LEAST_1, "eval_resolution": AT_LEAST_1,
    "eval_resize": AT_LEAST_1, "crop_scale_min": Range(0, 1, low_open=True), "lr": ABOVE_0,
    "lr_reference_batch": AT_LEAST_1, "momentum": Range(0, 1, high_open=True),
    "weight_decay": Range(0, 1, high_open=True), "epochs": ABOVE_0, "scale_schedule_ratio": ABOVE_0,
    "warmup_epochs": AT_LEAST_0, "eval_every_epochs": ABOVE_0,
    "mixup_alpha": AT_LEAST_0, "sam_interval": AT_LEAST_0, "sam_rho": AT_LEAST_0,
    "sam_epsilon": ABOVE_0, "stochastic_depth_rate": Range(0, 1, high_open=True),
    "colout_fraction": Range(0, 1, high_open=True), "randaugment_depth": AT_LEAST_0,
    "randaugment_severity": Range(0, 10),
}
CHOICES: dict[str, tuple[str, ...]] = {
    "dataset": ("imagenet", "fashion-mnist"),       # `auto` is decided by `resolve` (see below)
    "device": ("", "cuda", "cpu"),
    "write_mode": ("raw", "jpg", "proportion", "smart"),
    "init_conv": ("kaiming_normal", "torchvision"), "init_bn_gamma": ("uniform", "ones"),
    "logit_bias_init": ("log_prior", "zeros"), "loss": ("bce", "cross_entropy"),
    "resize_granularity": ("epoch", "step"), "resize_mode": ("nearest", "bilinear", "area"),
    "optimizer": ("sgdw",), "precision": ("amp", "fp32"), "amp_dtype": ("bf16", "fp16"),
    "stochastic_depth_method": ("sample", "block"), "stochastic_depth_distribution": ("linear", "uniform"),
    "randaugment_set": ("all", "safe", "original"), "train_loader": ("ffcv", "torchvision"),
}
# Values also accepted where a setting is given, which `resolve` turns into one of CHOICES
# before `validate` sees them; `settings` lists them beside the CHOICES.
RESOLVED_CHOICES: dict[str, tuple[str, ...]] = {"dataset": ("auto",)}
# Seeds reach numpy's and FFCV's generators, which take unsigned 32-bit seeds.
SEED_RANGE = Range(0, 2**32, high_open=True)


def folder_name_problem(what: str, name: str) -> str | None:
    """Why `name` cannot be one folder's name (org, system_name), or None."""
    if not name or name.strip() != name or name.startswith(".") or any(c in name for c in "/\\"):
        return (f"{what} {name!r} names a folder: it must not be empty, start with a dot or a "
                "space, end with a space, or hold a slash")
    if len(name) > 100:
        return f"{what} is {len(name)} characters long; a folder name of at most 100 is needed"
    return None


MLPERF_REQUIRED_FIELDS = (
    "submitter", "division", "status", "system_name", "number_of_nodes",
    "host_processors_per_node", "host_processor_model_name", "host_processor_core_count",
    "host_processor_vcpu_count", "host_processor_frequency", "host_processor_caches",
    "host_processor_interconnect", "host_memory_capacity", "host_storage_type",
    "host_storage_capacity", "host_networking", "host_networking_topology",
    "host_memory_configuration", "accelerators_per_node", "accelerator_model_name",
    "accelerator_host_interconnect", "accelerator_frequency", "accelerator_on-chip_memories",
    "accelerator_memory_configuration", "accelerator_memory_capacity",
    "accelerator_interconnect", "accelerator_interconnect_topology", "cooling", "hw_notes",
    "framework", "other_software_stack", "operating_system", "sw_notes",
)


class Config:
    """Resolved settings (attribute access) plus the system's MLPerf description."""

    def __init__(self, system_id: str, settings: dict[str, Any], description: dict[str, Any],
                 origins: dict[str, str] | None = None):
        self.system_id = system_id            # the short name the user typed: p4d, cpu
        self.settings = settings
        self.description = description      # MLPerf system description fields only
        self.origins = origins or {}        # setting -> where its value came from

    def origin(self, key: str) -> str:
        return self.origins.get(key, DEFAULT_ORIGIN)

    def replaced(self, updates: dict[str, Any], origin: str) -> "Config":
        """A new Config with `updates` set and `origin` recorded as where each came from;
        this one is left as it was (the values are not validated again)."""
        return Config(self.system_id, {**self.settings, **updates}, dict(self.description),
                      {**self.origins, **{key: origin for key in updates}})

    def __getattr__(self, name: str) -> Any:
        try:
            return self.__dict__["settings"][name]
        except KeyError:
            raise AttributeError(name) from None

    # ---- derived values: computed here, never stored twice -------------------
    @property
    def system_name(self) -> str:
        """The descriptor's name; several nodes of a one-node descriptor: Nx<name>."""
        name = self.description["system_name"]
        described = int(self.description["number_of_nodes"] or 1)
        return f"{self.num_nodes}x{name}" if self.num_nodes != described else name

    @property
    def accelerators_per_node(self) -> int:
        """What trains: one GPU per process on cuda, none on cpu."""
        return self.processes_per_node if self.device_type == "cuda" else 0

    @property
    def num_nodes(self) -> int:
        return self.nodes or int(self.description["number_of_nodes"])

    @property
    def device_type(self) -> str:
        if self.device:
            return self.device
        return "cuda" if int(self.description["accelerators_per_node"] or 0) > 0 else "cpu"

    @property
    def processes_per_node(self) -> int:
        if self.procs_per_node:
            return self.procs_per_node
        return max(int(self.description["accelerators_per_node"] or 0), 1)

    @property
    def world_size(self) -> int:
        return self.num_nodes * self.processes_per_node

    @property
    def global_batch_size(self) -> int:
        return self.batch_per_device * self.world_size

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
        system description notes, `settings`)."""
        named = [
            (self.blurpool, "BlurPool"), (self.channels_last, "channels last"),
            (self.ema_half_life_batches > 0, f"EMA (half-life {self.ema_half_life_batches:g} steps)"),
            (self.label_smoothing > 0, f"label smoothing {self.label_smoothing:g}"),
            (self.progressive_resize, f"progressive resizing (from {self.resize_initial_scale:g}x)"),
            (self.mixup_alpha > 0, f"MixUp (alpha {self.mixup_alpha:g})"),
            (self.sam_interval > 0, f"SAM (rho {self.sam_rho:g}, every {self.sam_interval}th step)"),
            (self.randaugment_depth > 0, f"RandAugment ({self.randaugment_set}, depth "
                                         f"{self.randaugment_depth}, severity {self.randaugment_severity})"),
            (self.stochastic_depth_rate > 0, f"stochastic depth ({self.stochastic_depth_method}, "
                                             f"{self.stochastic_depth_distribution} to {self.stochastic_depth_rate:g})"),
            (self.colout_fraction > 0, f"ColOut ({self.colout_fraction:g} of rows and columns)")]
        return [words for on, words in named if on]

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

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Config":
        """Inverse of to_dict (derived values are recomputed, not read back)."""
        return cls(data["system"], dict(data["settings"]), dict(data["system_description"]),
                   dict(data.get("origins", {})))

    def to_dict(self) -> dict[str, Any]:
        derived = {name: getattr(self, name) for name in (
            "system_name", "num_nodes", "device_type", "processes_per_node",
            "accelerators_per_node", "world_size",
            "global_batch_size", "peak_lr", "effective_weight_decay", "train_epochs",
            "warmup_train_epochs", "methods")}
        return {"system": self.system_id, "settings": dict(self.settings),
                "derived": derived, "system_description": dict(self.description),
                "origins": dict(self.origins)}


# ---------------------------------------------------------------------------
def available_systems() -> list[str]:
    return sorted(p.stem for p in SYSTEMS_DIR.glob("*.json"))


def available_recipes() -> list[str]:
    return sorted(p.stem for p in RECIPES_DIR.glob("*.yaml"))


def load_descriptor(system: str) -> dict[str, Any]:
    path = SYSTEMS_DIR / f"{system}.json"
    if not path.is_file():
        raise ConfigError(f"unknown system {system!r}: no {path}. "
                          f"Known systems: {', '.join(available_systems())}")
    try:
        descriptor = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path} is not valid JSON (line {exc.lineno}, column {exc.colno}: "
                          f"{exc.msg}): fix the file and run again") from None
    missing = [f for f in MLPERF_REQUIRED_FIELDS if f not in descriptor]
    if missing:
        raise ConfigError(f"{path} lacks MLPerf system-description fields: {', '.join(missing)}")
    problems = _descriptor_problems(descriptor)
    if problems:
        raise ConfigError(f"{path}: " + "; ".join(problems) + ". Fix the file and run again")
    return descriptor


def _descriptor_problems(descriptor: dict[str, Any]) -> list[str]:
    """The fields the harness computes with, or that a checker would refuse, checked."""
    from .system_description import STATUS_2X, STATUS_4X
    problems = []
    if not isinstance(descriptor.get("harness", {}), dict):
        problems.append('"harness" must be an object of settings ({"key": value, ...})')
    if not _is_count(descriptor["number_of_nodes"], lowest=1):
        problems.append(f'"number_of_nodes" must be a whole number of at least 1, '
                        f'not {descriptor["number_of_nodes"]!r}')
    accelerators = descriptor["accelerators_per_node"]
    if accelerators != "" and not _is_count(accelerators, lowest=0):
        problems.append(f'"accelerators_per_node" must be a whole number, or empty to read it '
                        f"from this machine, not {accelerators!r}")
    if descriptor["status"] not in {**STATUS_4X, **STATUS_2X}:
        problems.append(f'"status" {descriptor["status"]!r} is not one of '
                        f"{', '.join(repr(s) for s in STATUS_4X)} (or the 4.x wording)")
    if descriptor["division"] not in ("open", "closed"):
        problems.append(f'"division" must be "open" or "closed", not {descriptor["division"]!r}')
    return problems


def _is_count(value: Any, lowest: int) -> bool:
    """A whole number >= lowest, as a JSON number or a string of digits."""
    if isinstance(value, bool):
        return False
    if isinstance(value, str):
        return value.strip().isascii() and value.strip().isdigit() and int(value) >= lowest
    return isinstance(value, int) and value >= lowest


def _recipe_file(name: str) -> tuple[Path, dict[str, Any]]:
    path = RECIPES_DIR / f"{name}.yaml"
    if not path.is_file():
        raise ConfigError(f"unknown recipe {name!r}. Known recipes: {', '.join(available_recipes())}")
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
    """The recipe's settings, checked against RECIPE_SETTINGS (a `base:` recipe first).
    A setting left empty (the published scale_schedule_ratio of Medium and Hot, which
    each user chooses) is None until the system or the command line sets it."""
    path, recipe = _recipe_file(name)
    base = recipe.pop("base", None)
    for key in ("recipe", "scale_schedule_ratio_range"):
        recipe.pop(key, None)
    for key, value in recipe.items():
        if key not in RECIPE_SETTINGS:
            raise ConfigError(f"{path}: unknown recipe setting {key!r}; known: "
                              f"{', '.join(RECIPE_SETTINGS)}")
        if value is not None:
            recipe[key] = _coerce(key, value, RECIPE_SETTINGS[key][0], origin=str(path))
    merged = {**load_recipe(base), **recipe} if base else recipe
    if not base:
        missing = [key for key in RECIPE_SETTINGS if key not in merged]
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


def _coerce(key: str, raw: Any, kind: type, origin: str = "the command line") -> Any:
    """raw (a command-line string or a YAML/JSON value) as a value of `kind`."""
    value = raw
    if isinstance(raw, str) and kind is not str:
        try:
            value = yaml.safe_load(raw)
        except yaml.YAMLError:
            value = raw
        if kind is float and isinstance(value, str):
            try:
                value = float(value)   # YAML 1.1 reads 5e-4 (no dot) as a string
            except ValueError:
                pass
    where = "" if origin == "the command line" else f" (in {origin})"
    if kind is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{key} takes true or false, not {raw!r}{where}")
    elif kind is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{key} takes a whole number, not {raw!r}{where}")
    elif kind is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ConfigError(f"{key} takes a number, not {raw!r}{where}")
        value = float(value)
    elif kind is str:
        value = "" if value is None else str(value)
    return value


def _apply(settings: dict[str, Any], updates: dict[str, Any], origin: str,
           origins: dict[str, str]) -> None:
    for key, raw in updates.items():
        origins[key] = origin
        if key not in settings:
            close = difflib.get_close_matches(key, settings, n=3)
            hint = f" Did you mean {', '.join(close)}?" if close else ""
            raise ConfigError(f"unknown setting {key!r} (from {origin}).{hint} "
                              "`python -m submission settings` lists them all.")
        kind = RECIPE_SETTINGS[key][0] if key in RECIPE_SETTINGS else type(HARNESS_SETTINGS[key][0])
        settings[key] = _coerce(key, raw, kind, origin)
    if "price_usd_per_hour" in updates:
        # a price must not carry the source and date of one given elsewhere (30 USD on the
        # command line is not the descriptor's list price): its source is where it was given
        for key, value in (("price_source", origin), ("price_date", "")):
            if key not in updates:
                settings[key], origins[key] = value, origin


def resolve(system: str | None = None, overrides: dict[str, str] | None = None) -> Config:
    overrides = dict(overrides or {})
    system = overrides.pop("system", None) or system or DEFAULT_SYSTEM
    descriptor = load_descriptor(system)
    harness = dict(descriptor.get("harness", {}))
    description = describe_machine({k: v for k, v in descriptor.items() if k != "harness"})

    recipe_name = overrides.get("recipe") or harness.get("recipe") or HARNESS_SETTINGS["recipe"][0]
    settings = load_recipe(recipe_name)
    origins = {key: f"submission/recipes/{recipe_name}.yaml" for key in settings}
    for key, (default, _) in HARNESS_SETTINGS.items():
        settings.setdefault(key, copy.deepcopy(default))
    dataset = _chosen_dataset(settings, harness, overrides)
    if dataset == "fashion-mnist":
        _apply(settings, _load_preset(recipe_name), EMBEDDED_ORIGIN, origins)
    _apply(settings, harness, f"systems/{system}.json", origins)
    _apply(settings, overrides, "the command line", origins)
    settings["recipe"], settings["dataset"] = recipe_name, dataset
    config = Config(system, settings, description, origins)
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


def describe_machine(description: dict[str, Any]) -> dict[str, Any]:
    """The descriptor with its empty fields read from this machine: host facts always;
    accelerators and the system name too for a descriptor that leaves them empty
    (system=local)."""
    from . import inventory
    from .system_description import fill_from_host
    described = dict(description)
    if str(described.get("accelerators_per_node", "")) == "":
        found = inventory.gpus()
        problem = inventory.mixed(found)
        if problem:
            raise ConfigError(problem)
        described.update({k: v for k, v in inventory.accelerator_fields(found).items()
                          if described.get(k, "") == ""})
        if not described.get("system_name"):
            described["system_name"] = inventory.local_system_name(found, inventory.host()[0])
    return fill_from_host(described)


def validate(config: Config) -> None:
    """Reject settings that cannot produce a meaningful run, before anything starts."""
    published = ratio_range(config.recipe)
    if config.settings["scale_schedule_ratio"] is None:
        raise ConfigError(
            f"recipe={config.recipe} leaves scale_schedule_ratio to you, as its published file "
            f"does: choose the run's length with scale_schedule_ratio=R, R {published} "
            "(the fraction of its 90 epochs to train)")
    problems = [f"{key}={config.settings[key]!r} must be {bound} ({config.origin(key)})"
                for key, bound in RANGES.items() if not bound.admits(config.settings[key])]
    problems += [f"{key} must be one of {', '.join(c for c in choices if c)}"
                 f"{' (or empty)' if '' in choices else ''}, not {config.settings[key]!r} "
                 f"({config.origin(key)})"
                 for key, choices in CHOICES.items() if config.settings[key] not in choices]
    for what, name, origin in (
            ("org", config.org, config.origin("org")),
            ("system_name", config.description["system_name"], f"systems/{config.system_id}.json")):
        problem = folder_name_problem(what, str(name))
        if problem:
            problems.append(f"{problem} ({origin})")
    for key in ("results_dir", "cache_dir"):
        if not config.settings[key].strip():
            problems.append(f"{key} is empty: name a folder (default {HARNESS_SETTINGS[key][0]!r})")
    if problems:       # the checks below combine these values
        raise ConfigError("invalid configuration:\n  - " + "\n  - ".join(problems))
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
    if config.progressive_resize and not (
            0 < config.resize_initial_scale <= 1
            and 0 <= config.resize_start_fraction <= config.resize_finish_fraction <= 1):
        problems.append("progressive resizing needs 0 < resize_initial_scale <= 1 and "
                        "0 <= resize_start_fraction <= resize_finish_fraction <= 1")
    # a named descriptor's V100s, refused where no GPU can be asked (dry-run, project);
    # preflight.gpu_problems asks the GPUs of the launching machine themselves
    accelerator = str(config.description.get("accelerator_model_name", ""))
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
    if config.randaugment_depth and config.train_loader != "torchvision":
        problems.append(f"randaugment_depth={config.randaugment_depth} needs train_loader=torchvision: "
                        "RandAugment works on each image in the loader's worker processes, which "
                        "FFCV's compiled pipeline cannot run")
    if config.eval_resize < config.eval_resolution:
        problems.append("eval_resize must be at least eval_resolution (resize, then center-crop)")
    if config.node_rank >= config.num_nodes:
        problems.append(f"node_rank={config.node_rank} is outside 0..{config.num_nodes - 1} "
                        f"({config.num_nodes} node(s))")
    if problems:
        raise ConfigError("invalid configuration:\n  - " + "\n  - ".join(problems))
