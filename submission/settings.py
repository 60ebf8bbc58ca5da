"""Every setting of the harness, declared once (submission/setting_declaration.py says how).

A setting is one field of `Settings`: its name, its type, its default, what it means, what
values it admits, and its kind (recipe, harness, operational). The harness's own settings are
declared below; each method declares its settings class in its module under
submission/methods/declarations/, and `Settings` lists every class by name.

Everything else reads this declaration: config.resolve (types and precedence), config.validate
(ranges and choices), the `settings` verb, the campaign's resume rule, and the bench profile's
list of the settings it records. Settings that tie two values together are checked in
config.validate (and by the method that declares them).
"""
import dataclasses
import typing
from dataclasses import dataclass
from typing import Any, get_args

from .errors import ConfigError
from .methods.declarations.blurpool import BlurPoolSettings
from .methods.declarations.colout import ColOutSettings
from .methods.declarations.ema import EMASettings
from .methods.declarations.loss import LossSettings
from .methods.declarations.mixup import MixUpSettings
from .methods.declarations.progressive_resize import ProgressiveResizeSettings
from .methods.declarations.randaugment import RandAugmentSettings
from .methods.declarations.sam import SAMSettings
from .methods.declarations.sgdw import SGDWSettings
from .methods.declarations.stochastic_depth import StochasticDepthSettings
from .methods.declarations.trivialaugment import TrivialAugmentSettings
from .setting_declaration import (ABOVE_0, AT_LEAST_0, AT_LEAST_1, BELOW_1, COMPARED, FRACTION, HARNESS,
                                  OPERATIONAL, RECIPE, RECORDED, Declaration, NotAValue, Range, declaration_of,
                                  setting)


@dataclass(frozen=True, kw_only=True)
class RecipeSettings:
    """The recipe's settings that are not a method's: submission/recipes/*.yaml (the methods'
    own: submission/methods/declarations/)."""
    init_conv: str = setting(RECIPE, "conv/linear weight init: kaiming_normal or torchvision's default",
                             admits=("kaiming_normal", "torchvision"))
    init_bn_gamma: str = setting(RECIPE, "BatchNorm gamma init: uniform (U(0,1)) or ones",
                                 admits=("uniform", "ones"))
    logit_bias_init: str = setting(RECIPE, "final bias init: log_prior (-log classes) or zeros",
                                   admits=("log_prior", "zeros"))
    zero_init_residual: bool = setting(RECIPE, "zero the last BN gamma of each residual block")
    channels_last: bool = setting(RECIPE, "NHWC model and batches")
    train_resolution: int = setting(RECIPE, "RandomResizedCrop side of training images",
                                    admits=AT_LEAST_1, profile=COMPARED)
    eval_resolution: int = setting(RECIPE, "center-crop side of evaluation images",
                                   admits=AT_LEAST_1, profile=COMPARED)
    eval_resize: int = setting(RECIPE, "evaluation: resize to this, then center-crop eval_resolution",
                               admits=AT_LEAST_1)
    crop_scale_min: float = setting(RECIPE, "RandomResizedCrop smallest area fraction",
                                    admits=Range(0, 1, low_open=True))
    lr: float = setting(RECIPE, "peak learning rate at lr_reference_batch; scaled linearly with the batch",
                        admits=ABOVE_0)
    lr_reference_batch: int = setting(RECIPE, "global batch at which lr and weight_decay are given",
                                      admits=AT_LEAST_1)
    momentum: float = setting(RECIPE, "SGD momentum", admits=BELOW_1)
    weight_decay: float = setting(RECIPE, "decoupled weight decay per step at lr_reference_batch; scaled "
                                          "linearly with the batch, so the decay per epoch stays the same",
                                  admits=BELOW_1)
    epochs: float = setting(RECIPE, "training epochs before scale_schedule_ratio", admits=ABOVE_0)
    scale_schedule_ratio: float = setting(RECIPE, "multiplies epochs (and warmup_epochs if scale_warmup)",
                                          admits=ABOVE_0)
    whole_epochs: bool = setting(RECIPE, "truncate epochs x scale_schedule_ratio to whole epochs (Composer v0.7)")
    warmup_epochs: float = setting(RECIPE, "linear warmup, in epochs", admits=AT_LEAST_0)
    lr_final_fraction: float = setting(RECIPE, "learning rate at the end of the cosine decay, as a fraction "
                                               "of the peak (Composer's alpha_f)", admits=FRACTION)
    scale_warmup: bool = setting(RECIPE, "multiply warmup_epochs by scale_schedule_ratio too (Composer v0.7: no)")
    eval_every_epochs: float = setting(RECIPE, "evaluation cadence in epochs", admits=ABOVE_0)
    target_accuracy: float | None = setting(RECIPE, "top-1 fraction that ends a run successfully; none: "
                                                    "no target, the whole budget trains (tradeoff points)",
                                            admits=Range(0, 1, low_open=True))
    precision: str = setting(RECIPE, "amp (autocast) or fp32", admits=("amp", "fp32"), profile=COMPARED)
    amp_dtype: str = setting(RECIPE, "autocast dtype when precision=amp: fp16 (with a GradScaler on "
                                     "CUDA) or bf16", admits=("bf16", "fp16"), profile=COMPARED)
    train_loader: str = setting(RECIPE, "ffcv; torchvision (per-image CPU augmentation in DataLoader "
                                        "workers); or device (decode, crop, resize and RandAugment on the "
                                        "run's device, nvJPEG on a GPU); all three read the same .beton, "
                                        "and evaluation goes through the device loader with device",
                                admits=("ffcv", "torchvision", "device"), profile=RECORDED)


@dataclass(frozen=True, kw_only=True)
class HarnessSettings:
    """The harness's defaults that change what a run computes."""
    recipe: str = setting(HARNESS, "recipe file under submission/recipes/ (mild, medium, hot, baseline)",
                          "mild", profile=RECORDED)
    dataset: str = setting(HARNESS, "imagenet (an image folder), fashion-mnist (the embedded campaign: "
                                    "submission/embedded.yaml), or auto: imagenet when data_dir is set",
                           "imagenet", admits=("imagenet", "fashion-mnist"), also=("auto",))
    skip_bad_images: bool = setting(HARNESS, "skip unusable images (unreadable, or too small for the "
                                             "pipeline; counted, listed) instead of failing", False)
    write_mode: str = setting(HARNESS, "FFCV RGBImageField write_mode: raw, jpg, proportion, smart "
                                       "(published: proportion; docs/throughput.md, bench sweep=loader)",
                              "proportion", admits=("raw", "jpg", "proportion", "smart"))
    write_max_resolution: int = setting(HARNESS, "longest side stored in the .beton (Composer's "
                                                 "create_ffcv_datasets.py: 500)", 500, admits=AT_LEAST_1)
    write_jpeg_quality: int = setting(HARNESS, "JPEG quality of stored images (create_ffcv_datasets.py: 90)",
                                      90, admits=Range(1, 100))
    write_compress_probability: float = setting(HARNESS, "share of images stored as JPEG in proportion "
                                                         "mode (0.5)", 0.5, admits=FRACTION)
    train_limit: int = setting(HARNESS, "use only N training images, evenly spaced over the set (0: all)",
                               0, admits=AT_LEAST_0)
    eval_limit: int = setting(HARNESS, "use only N validation images, evenly spaced over the set (0: all)",
                              0, admits=AT_LEAST_0)
    batch_per_device: int = setting(HARNESS, "batch per process; global batch = this x processes", 256,
                                    admits=AT_LEAST_1, profile=COMPARED)
    procs_per_node: int = setting(HARNESS, "processes per node; 0: accelerators_per_node, or 1 without",
                                  0, admits=AT_LEAST_0)
    nodes: int = setting(HARNESS, "nodes; 0: the descriptor's number_of_nodes", 0, admits=AT_LEAST_0)
    device: str = setting(HARNESS, "cuda or cpu; empty: cuda when the descriptor has accelerators", "",
                          admits=("", "cuda", "cpu"))
    cpu_threads: int = setting(HARNESS, "torch threads per process on CPU; 0: cores / processes", 0,
                               admits=AT_LEAST_0)
    max_run_minutes: float = setting(HARNESS, "stop a run (status aborted) after N minutes; 0: no limit",
                                     0.0, admits=AT_LEAST_0)
    compile: bool = setting(HARNESS, "torch.compile the training step (static shapes, every size compiled "
                                     "in the warm-up, Inductor cache under cache_dir)", False, profile=RECORDED)
    cuda_graphs: bool = setting(HARNESS, "with compile=true on one GPU: replay each size's compiled step as "
                                         "CUDA graphs (torch.compile mode reduce-overhead)", False,
                                profile=RECORDED)
    compile_dynamic: bool = setting(HARNESS, "with compile=true: graphs with symbolic sizes (torch.compile "
                                             "dynamic=True) instead of one per size; torch compiles again "
                                             "only where a size changes its guards", False, profile=RECORDED)
    cudnn_benchmark: bool = setting(HARNESS, "on CUDA: cuDNN times its algorithms at each new shape and "
                                             "keeps the fastest (the warm-up pays the trials before "
                                             "run_start)", False, profile=RECORDED)


@dataclass(frozen=True, kw_only=True)
class OperationalSettings:
    """The harness's defaults that what a run computes does not depend on."""
    org: str = setting(OPERATIONAL, "submitting organisation: MLPerf `submitter` and package folder",
                       "Unaffiliated")
    runs: int = setting(OPERATIONAL, "runs in the campaign; an MLPerf ResNet score needs exactly 5", 5,
                        admits=AT_LEAST_1)
    seeds: str = setting(OPERATIONAL, "comma-separated seeds, one per run; empty: drawn once, recorded", "")
    new_campaign: bool = setting(OPERATIONAL, "archive the existing results of this system and start again",
                                 False)
    package: bool = setting(OPERATIONAL, "assemble results/package/<org>/ when the campaign completes", True)
    results_dir: str = setting(OPERATIONAL, "where result files, summaries and packages go", "results")
    data_dir: str = setting(OPERATIONAL, "image folder with train/ and val/; for fashion-mnist the idx folder",
                            "")
    val_labels: str = setting(OPERATIONAL, "label CSV (image,class-folder rows, e.g. LOC_val_solution.csv) "
                                           "for a flat val/ folder; convert the devkit's ground truth to it first",
                              "")
    cache_dir: str = setting(OPERATIONAL, ".beton files, reused while source and write settings match", "cache")
    # the images and their order come from the seed: the threads only share out the work, and
    # they are fitted to the CPUs this process may use, which may change between resumes. With
    # the torchvision loader each worker draws its augmentations from its own generator, so
    # another count gives other draws from the same distributions, as another seed would.
    workers_per_device: int = setting(OPERATIONAL, "loader threads (FFCV), worker processes "
                                                   "(torchvision) or threads gathering bytes (device) "
                                                   "per process", 8,
                                      admits=AT_LEAST_1, profile=RECORDED)
    node_rank: int = setting(OPERATIONAL, "this node's rank in a multi-node campaign", 0, admits=AT_LEAST_0)
    master_addr: str = setting(OPERATIONAL, "rendezvous host (node 0) for torchrun", "127.0.0.1")
    master_port: int = setting(OPERATIONAL, "rendezvous port for torchrun", 29500, admits=Range(1, 65535))
    cache_clear_cmd: str = setting(OPERATIONAL, "run before each run; empty: skip (logged)",
                                   "sysctl -w vm.drop_caches=3")
    # evaluation runs in eval mode (BatchNorm from its running statistics): an image's logits do
    # not depend on its batch, and lowering it is the answer to an evaluation out of memory
    eval_batch_size: int = setting(OPERATIONAL, "evaluation batch per process; 0: batch_per_device", 0,
                                   admits=AT_LEAST_0)
    progress_every_steps: int = setting(OPERATIONAL, "print a progress line every N steps", 50,
                                        admits=AT_LEAST_1)
    progress_every_seconds: float = setting(OPERATIONAL, "also print one once N seconds have passed since "
                                                         "the last (so that slow steps show progress)", 30.0,
                                            admits=ABOVE_0)
    warmup: bool = setting(OPERATIONAL, "before run_start, run every training size and the eval size once "
                                        "on synthetic batches (cuDNN plans, compilation); weights left "
                                        "untouched", True)
    tracker: str = setting(OPERATIONAL, "where runs can be watched: tensorboard (event files beside the "
                                        "results), wandb (pip extra [wandb]), none; several joined by commas",
                           "tensorboard", admits=("tensorboard", "wandb", "none"), many=True)
    price_usd_per_hour: float = setting(OPERATIONAL, "hourly price of the whole system (all nodes)", 0.0,
                                        admits=AT_LEAST_0)
    price_source: str = setting(OPERATIONAL, "where the price comes from", "")
    price_date: str = setting(OPERATIONAL, "when the price was read", "")


# A dataclass takes its bases' fields in the reverse order of the bases: the recipe's settings
# come first, then each method's (in the order of submission.methods.ALL), then the harness's
# and the operational ones, as `settings` and campaign.json list them.
@dataclass(frozen=True, kw_only=True)
class Settings(
    OperationalSettings,
    HarnessSettings,
    TrivialAugmentSettings,
    StochasticDepthSettings,
    SGDWSettings,
    SAMSettings,
    RandAugmentSettings,
    ProgressiveResizeSettings,
    MixUpSettings,
    LossSettings,
    EMASettings,
    ColOutSettings,
    BlurPoolSettings,
    RecipeSettings,
):
    """Every setting, typed: the fields config.Config resolves."""


def _declared() -> dict[str, Declaration]:
    """Each setting's declaration, with its type (bool, int, float, str), whether it may be
    None, and its default, from its field."""
    hints = typing.get_type_hints(Settings)
    declared = {}
    for field in dataclasses.fields(Settings):
        types = [t for t in get_args(hints[field.name]) if t is not type(None)] or [hints[field.name]]
        declared[field.name] = dataclasses.replace(
            declaration_of(field), type=types[0], optional=type(None) in get_args(hints[field.name]))
    return declared


DECLARED: dict[str, Declaration] = _declared()


def kind(name: str) -> str:
    return DECLARED[name].kind


def meaning(name: str) -> str:
    return DECLARED[name].meaning


def admits(name: str) -> Range | tuple[str, ...] | None:
    """The Range or the words `name` admits (None: any value of its type)."""
    return DECLARED[name].choices()


def also_accepted(name: str) -> tuple[str, ...]:
    return DECLARED[name].also


def value_type(name: str) -> type:
    """bool, int, float or str: the type a value of `name` has."""
    return DECLARED[name].type


def default(name: str) -> Any:
    """A harness or operational setting's default (recipe settings have none here)."""
    value = DECLARED[name].default
    if value is dataclasses.MISSING:
        raise KeyError(f"{name} is a recipe setting: its value is in the recipe files")
    return value


def names(*kinds: str) -> list[str]:
    """The settings of these kinds (all of them without any), in declaration order."""
    return [name for name in DECLARED if not kinds or kind(name) in kinds]


def defaults() -> dict[str, Any]:
    """Every harness and operational setting with its default."""
    return {name: default(name) for name in names(HARNESS, OPERATIONAL)}


def profiled(*marks: str) -> list[str]:
    """The settings a bench profile records (RECORDED, COMPARED) or compares (COMPARED)."""
    marks = marks or (RECORDED, COMPARED)
    return [name for name in DECLARED if DECLARED[name].profile in marks]


def words_admitted(name: str) -> tuple[str, ...]:
    """The words a text setting with choices admits."""
    allowed = admits(name)
    if not isinstance(allowed, tuple):
        raise TypeError(f"{name} admits {allowed!r}, not a list of words")
    return allowed


def admits_text(name: str) -> str:
    """What `name` admits, in words ("" when any value of its type)."""
    return DECLARED[name].admits_text()


def problem(name: str, value: Any) -> str | None:
    """Why `value` is not admitted by `name`'s own declaration, or None."""
    return DECLARED[name].problem(value)


def words(name: str, value: Any) -> list[str]:
    """The words of a comma-list setting's value (tracker=tensorboard,wandb), [] for none."""
    return DECLARED[name].words(value)


def optional(name: str) -> bool:
    """Whether `name` may be None (given as "none"): a target_accuracy of none trains the
    whole budget."""
    return DECLARED[name].optional


def coerce(name: str, raw: Any, origin: str) -> Any:
    """raw (a command-line string or a YAML/JSON value) as a value of `name`'s type; a
    ConfigError saying where it came from when it is not one."""
    try:
        return DECLARED[name].read(raw)
    except NotAValue as exc:
        where = "" if origin == "the command line" else f" (in {origin})"
        raise ConfigError(f"{name} takes {exc}, not {raw!r}{where}") from None
