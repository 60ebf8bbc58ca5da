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
from dataclasses import dataclass
from typing import Any, Literal

from .errors import ConfigError
from .loader_kinds import TrainLoader
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
from .setting_declaration import (
    ABOVE_0,
    AT_LEAST_0,
    AT_LEAST_1,
    BELOW_1,
    COMPARED,
    FRACTION,
    HARNESS,
    HOST,
    OPERATIONAL,
    RECIPE,
    RECORDED,
    Declaration,
    NotAValue,
    Range,
    declarations,
    declare,
)

# The words of each setting that takes one of a few: its type (mypy checks each use), and what it
# admits (declarations reads them with typing.get_args).
InitConv = Literal["kaiming_normal", "torchvision"]
InitBnGamma = Literal["uniform", "ones"]
LogitBiasInit = Literal["log_prior", "zeros"]
Precision = Literal["amp", "fp32"]
AmpDtype = Literal["bf16", "fp16"]
Dataset = Literal["imagenet", "fashion-mnist"]
WriteMode = Literal["raw", "jpg", "proportion", "smart"]
Device = Literal["", "cuda", "cpu"]
Tracker = Literal["tensorboard", "wandb", "none"]      # tracker= is a comma list of these


@dataclass(frozen=True, kw_only=True)
class RecipeSettings:
    """The recipe's settings that are not a method's: submission/recipes/*.yaml (the methods'
    own: submission/methods/declarations/)."""
    init_conv: InitConv = declare("conv/linear weight init: kaiming_normal or torchvision's default", kind=RECIPE)
    init_bn_gamma: InitBnGamma = declare("BatchNorm gamma init: uniform (U(0,1)) or ones", kind=RECIPE)
    logit_bias_init: LogitBiasInit = declare("final bias init: log_prior (-log classes) or zeros", kind=RECIPE)
    zero_init_residual: bool = declare("zero the last BN gamma of each residual block", kind=RECIPE)
    channels_last: bool = declare("NHWC model and batches", kind=RECIPE)
    train_resolution: int = declare("RandomResizedCrop side of training images",
                                    admits=AT_LEAST_1, profile=COMPARED, kind=RECIPE)
    eval_resolution: int = declare("center-crop side of evaluation images",
                                   admits=AT_LEAST_1, profile=COMPARED, kind=RECIPE)
    eval_resize: int = declare("evaluation: resize to this, then center-crop eval_resolution",
                               admits=AT_LEAST_1, kind=RECIPE)
    crop_scale_min: float = declare("RandomResizedCrop smallest area fraction",
                                    admits=Range(0, 1, low_open=True), kind=RECIPE)
    lr: float = declare("peak learning rate at lr_reference_batch; scaled linearly with the batch",
                        admits=ABOVE_0, kind=RECIPE)
    lr_reference_batch: int = declare("global batch at which lr and weight_decay are given",
                                      admits=AT_LEAST_1, kind=RECIPE)
    momentum: float = declare("SGD momentum", admits=BELOW_1, kind=RECIPE)
    weight_decay: float = declare("decoupled weight decay per step at lr_reference_batch; scaled "
                                  "linearly with the batch, so the decay per epoch stays the same",
                                  admits=BELOW_1, kind=RECIPE)
    epochs: float = declare("training epochs before scale_schedule_ratio", admits=ABOVE_0, kind=RECIPE)
    scale_schedule_ratio: float = declare("multiplies epochs (and warmup_epochs if scale_warmup)",
                                          admits=ABOVE_0, kind=RECIPE)
    whole_epochs: bool = declare("truncate epochs x scale_schedule_ratio to whole epochs (Composer v0.7)", kind=RECIPE)
    warmup_epochs: float = declare("linear warmup, in epochs", admits=AT_LEAST_0, kind=RECIPE)
    lr_final_fraction: float = declare("learning rate at the end of the cosine decay, as a fraction "
                                       "of the peak (Composer's alpha_f)", admits=FRACTION, kind=RECIPE)
    scale_warmup: bool = declare("multiply warmup_epochs by scale_schedule_ratio too (Composer v0.7: no)", kind=RECIPE)
    eval_every_epochs: float = declare("evaluation cadence in epochs", admits=ABOVE_0, kind=RECIPE)
    target_accuracy: float | None = declare("top-1 fraction that ends a run successfully; none: "
                                            "no target, the whole budget trains (tradeoff points)",
                                            admits=Range(0, 1, low_open=True), kind=RECIPE)
    precision: Precision = declare("amp (autocast) or fp32", profile=COMPARED, kind=RECIPE)
    amp_dtype: AmpDtype = declare("autocast dtype when precision=amp: fp16 (with a GradScaler on CUDA) or bf16",
                                  profile=COMPARED, kind=RECIPE)
    train_loader: TrainLoader = declare("ffcv; torchvision (per-image CPU augmentation in DataLoader "
                                        "workers); or device (decode, crop, resize and RandAugment on the "
                                        "run's device, nvJPEG on a GPU); all three read the same .beton, "
                                        "and evaluation goes through the device loader with device",
                                        profile=RECORDED, kind=RECIPE)


@dataclass(frozen=True, kw_only=True)
class HarnessSettings:
    """The harness's defaults that change what a run computes."""
    recipe: str = declare("a shipped recipe (mild, medium, hot, baseline: submission/recipes/) "
                          "or a recipe file of yours, by its path ending in .yaml",
                          "mild", profile=RECORDED, kind=HARNESS)
    dataset: Dataset = declare("imagenet (an image folder), fashion-mnist (the embedded campaign: "
                               "submission/embedded.yaml), or auto: imagenet when data_dir is set",
                               "imagenet", also=("auto",), kind=HARNESS)
    skip_bad_images: bool = declare("skip unusable images (unreadable, or too small for the "
                                    "pipeline; counted, listed) instead of failing", False, kind=HARNESS)
    # ImageNet's photos are a few megapixels; PIL's own guard (~179 M) is lifted for the
    # user's images (data/sources.py), this one is read from each image's header first
    max_image_pixels: int = declare("refuse an image over this many pixels (or skip it, with "
                                    "skip_bad_images), read from its header before it is decoded",
                                    100_000_000, admits=AT_LEAST_1, kind=HARNESS)
    write_mode: WriteMode = declare("FFCV RGBImageField write_mode: raw, jpg, proportion, smart "
                                    "(published: proportion; docs/throughput.md, bench sweep=loader)",
                                    "proportion", kind=HARNESS)
    write_max_resolution: int = declare("longest side stored in the .beton (Composer's "
                                        "create_ffcv_datasets.py: 500)", 500, admits=AT_LEAST_1, kind=HARNESS)
    write_jpeg_quality: int = declare("JPEG quality of stored images (create_ffcv_datasets.py: 90)",
                                      90, admits=Range(1, 100), kind=HARNESS)
    write_compress_probability: float = declare("share of images stored as JPEG in proportion "
                                                "mode (0.5)", 0.5, admits=FRACTION, kind=HARNESS)
    train_limit: int = declare("use only N training images, evenly spaced over the set (0: all)",
                               0, admits=AT_LEAST_0, kind=HARNESS)
    eval_limit: int = declare("use only N validation images, evenly spaced over the set (0: all)",
                              0, admits=AT_LEAST_0, kind=HARNESS)
    batch_per_device: int = declare("batch per process; global batch = this x processes", 256,
                                    admits=AT_LEAST_1, profile=COMPARED, kind=HARNESS)
    procs_per_node: int = declare("processes per node; 0: accelerators_per_node, or 1 without",
                                  0, admits=AT_LEAST_0, kind=HARNESS)
    nodes: int = declare("nodes; 0: the descriptor's number_of_nodes", 0, admits=AT_LEAST_0, kind=HARNESS)
    device: Device = declare("cuda or cpu; empty: cuda when the descriptor has accelerators", "", kind=HARNESS)
    cpu_threads: int = declare("torch threads per process on CPU; 0: cores / processes", 0,
                               admits=AT_LEAST_0, kind=HARNESS)
    max_run_minutes: float = declare("stop a run (status aborted) after N minutes; 0: no limit",
                                     0.0, admits=AT_LEAST_0, kind=HARNESS)
    compile: bool = declare("torch.compile the training step (static shapes, every size compiled "
                            "in the warm-up, Inductor cache under cache_dir)", False, profile=RECORDED, kind=HARNESS)
    cuda_graphs: bool = declare("with compile=true on one GPU: replay each size's compiled step as "
                                "CUDA graphs (torch.compile mode reduce-overhead)", False,
                                profile=RECORDED, kind=HARNESS)
    compile_dynamic: bool = declare("with compile=true: graphs with symbolic sizes (torch.compile "
                                    "dynamic=True) instead of one per size; torch compiles again "
                                    "only where a size changes its guards", False, profile=RECORDED, kind=HARNESS)
    cudnn_benchmark: bool = declare("on CUDA: cuDNN times its algorithms at each new shape and "
                                    "keeps the fastest (the warm-up pays the trials before "
                                    "run_start)", False, profile=RECORDED, kind=HARNESS)


@dataclass(frozen=True, kw_only=True)
class OperationalSettings:
    """The harness's defaults that what a run computes does not depend on."""
    org: str = declare("submitting organisation: MLPerf `submitter` and package folder",
                       "Unaffiliated", kind=OPERATIONAL)
    runs: int = declare("runs in the campaign; an MLPerf ResNet score needs exactly 5", 5,
                        admits=AT_LEAST_1, kind=OPERATIONAL)
    seeds: str = declare("comma-separated seeds, one per run; empty: drawn once, recorded", "", kind=OPERATIONAL)
    new_campaign: bool = declare("archive the existing results of this system and start again",
                                 False, kind=OPERATIONAL)
    package: bool = declare("assemble results/package/<org>/ when the campaign completes", True, kind=OPERATIONAL)
    results_dir: str = declare("where result files, summaries and packages go", "results", kind=OPERATIONAL)
    data_dir: str = declare("image folder with train/ and val/; for fashion-mnist the idx folder",
                            "", kind=OPERATIONAL)
    val_labels: str = declare("label CSV (image,class-folder rows, e.g. LOC_val_solution.csv) "
                              "for a flat val/ folder; convert the devkit's ground truth to it first",
                              "", kind=OPERATIONAL)
    cache_dir: str = declare(".beton files, reused while source and write settings match", "cache", kind=OPERATIONAL)
    # the images and their order come from the seed: the threads only share out the work, and
    # they are fitted to the CPUs this process may use, which may change between resumes. With
    # the torchvision loader each worker draws its augmentations from its own generator, so
    # another count gives other draws from the same distributions, as another seed would.
    workers_per_device: int = declare("loader threads (FFCV), worker processes "
                                      "(torchvision) or threads gathering bytes (device) "
                                      "per process; 0: derived (on a GPU the CPUs this process "
                                      "may use / processes - 1 for the step's thread; on a CPU "
                                      "8, lowered to the CPUs each process has: loader_threads.py)",
                                      0, admits=AT_LEAST_0, profile=RECORDED, kind=OPERATIONAL)
    node_rank: int = declare("this node's rank in a multi-node campaign", 0, admits=AT_LEAST_0, kind=OPERATIONAL)
    master_addr: str = declare("rendezvous host (node 0) for torchrun", "127.0.0.1", kind=OPERATIONAL,
                               names=HOST)
    master_port: int = declare("rendezvous port for torchrun", 29500, admits=Range(1, 65535), kind=OPERATIONAL)
    lost_node_seconds: float = declare("several nodes: a node silent this long (no heartbeat) is taken as "
                                       "lost, and the others stop the run, keeping its partial log",
                                       180.0, admits=Range(10), kind=OPERATIONAL)
    cache_clear_cmd: str = declare("run before each run; empty: skip (logged)",
                                   "sysctl -w vm.drop_caches=3", kind=OPERATIONAL)
    # evaluation runs in eval mode (BatchNorm from its running statistics): an image's logits do
    # not depend on its batch, and lowering it is the answer to an evaluation out of memory
    eval_batch_size: int = declare("evaluation batch per process; 0: batch_per_device", 0,
                                   admits=AT_LEAST_0, kind=OPERATIONAL)
    progress_every_steps: int = declare("print a progress line every N steps", 50,
                                        admits=AT_LEAST_1, kind=OPERATIONAL)
    progress_every_seconds: float = declare("also print one once N seconds have passed since "
                                            "the last (so that slow steps show progress)", 30.0,
                                            admits=ABOVE_0, kind=OPERATIONAL)
    warmup: bool = declare("before run_start, run every training size and the eval size once "
                           "on synthetic batches (cuDNN plans, compilation); weights left "
                           "untouched", True, kind=OPERATIONAL)
    tracker: str = declare("where runs can be watched: tensorboard (event files beside the "
                           "results), wandb (pip extra [wandb]), none; several joined by commas",
                           "tensorboard", admits=Tracker, many=True, kind=OPERATIONAL)
    price_usd_per_hour: float = declare("hourly price of the whole system (all nodes)", 0.0,
                                        admits=AT_LEAST_0, kind=OPERATIONAL)
    price_source: str = declare("where the price comes from", "", kind=OPERATIONAL)
    price_date: str = declare("when the price was read", "", kind=OPERATIONAL)


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


DECLARED: dict[str, Declaration] = declarations(Settings)


def kind(name: str) -> str:
    return DECLARED[name].kind


def names_a_host(name: str) -> bool:
    """Whether setting `name`'s value names a machine (declared `names=HOST`)."""
    return name in DECLARED and DECLARED[name].names == HOST


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
