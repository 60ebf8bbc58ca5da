"""Published figures of the recipe, as data with their source, to show beside our own.

None of these was measured by this project: each names where it comes from. `system` is
the descriptor under systems/ that describes the same machine ("" when none does).
"""
from __future__ import annotations

from dataclasses import dataclass

from .inventory import same_model

MLPERF_V2 = "MosaicML, MLPerf Training v2.0 open division, ResNet-50 result logs (2022-06)"
MLPERF_V2_NVIDIA = "NVIDIA, MLPerf Training v2.0 closed division, ResNet-50 MXNet (2022-06)"
MOSAIC_RESNET = "MosaicML, 'Mosaic ResNet' recipe write-up (2022)"
MOSAIC_DEEP_DIVE = "MosaicML, Mosaic ResNet deep dive: throughput per cloud system (2022)"
FFCV_IMAGENET = ("FFCV authors, ffcv-imagenet ResNet-50 configs (rn50, 16-88 epochs), as set beside "
                 "the recipes in the Mosaic ResNet write-up (2022)")
MOSAIC_ABLATIONS = "MosaicML, Mosaic ResNet write-ups: ablations of the recipes' methods (2022)"


@dataclass(frozen=True)
class PublishedTime:
    label: str               # what ran: recipe and entry
    system: str              # systems/<system>.json describing the machine, or ""
    hardware: str
    minutes: float
    target: float            # top-1 the time is measured to
    runs: int                # how many runs the figure summarises (1: a single figure)
    source: str


@dataclass(frozen=True)
class PublishedThroughput:
    label: str
    system: str
    hardware: str
    img_per_s: float         # training throughput of the whole machine
    source: str


TIMES = (
    # 23.8 min in the write-ups; 23.79 is the olympic mean of the five public v2.0 logs.
    PublishedTime("Mild (MLPerf v2.0 open entry)", "a100-80gb", "8x A100-80GB SXM4",
                  23.79, 0.759, 5, MLPERF_V2),
    PublishedTime("Baseline of the same entry (no speed-up methods)", "a100-80gb",
                  "8x A100-80GB SXM4", 110.5, 0.759, 5, MLPERF_V2),
    PublishedTime("NVIDIA MXNet (closed division)", "a100-80gb", "8x A100-80GB SXM4",
                  28.7, 0.759, 5, MLPERF_V2_NVIDIA),
    PublishedTime("Mild, longer schedule", "a100-80gb", "8x A100-80GB SXM4",
                  25.3, 0.766, 5, MOSAIC_RESNET),
    PublishedTime("Mild, longer schedule", "a100-80gb", "8x A100-80GB SXM4",
                  52.4, 0.781, 5, MOSAIC_RESNET),
    PublishedTime("Mild, longer schedule", "p4d", "AWS p4d.24xlarge, 8x A100-40GB",
                  56.0, 0.781, 5, MOSAIC_RESNET),
    PublishedTime("Medium", "p4d", "AWS p4d.24xlarge, 8x A100-40GB", 60.4, 0.794, 5, MOSAIC_RESNET),
    PublishedTime("Hot", "a100-80gb", "8x A100-80GB SXM4", 255.0, 0.799, 5, MOSAIC_RESNET),
    PublishedTime("Hot, longer schedule", "a100-80gb", "8x A100-80GB SXM4", 880.0, 0.810, 5,
                  MOSAIC_RESNET),
)

THROUGHPUTS = (
    PublishedThroughput("Mild", "bm-gpu4", "Oracle BM.GPU4.8, 8x A100-40GB", 22242, MOSAIC_DEEP_DIVE),
    PublishedThroughput("Mild", "p4d", "AWS p4d.24xlarge, 8x A100-40GB", 21582, MOSAIC_DEEP_DIVE),
    # The CPU-heavy Hot recipe: host CPU matters (p4d at 64% of BM.GPU4.8).
    PublishedThroughput("Hot", "bm-gpu4", "Oracle BM.GPU4.8, 8x A100-40GB", 14388, MOSAIC_DEEP_DIVE),
    PublishedThroughput("Hot", "p4d", "AWS p4d.24xlarge, 8x A100-40GB", 9225, MOSAIC_DEEP_DIVE),
)


# What the closed-division records below trained, as their logs and code say (docs/systems.md)
ANOTHER_RECIPE = ("the closed division's reference ResNet-50 v1.5 at 224 px with LARS at global batch "
                  "3200 (NVIDIA's MXNet implementation), not the Mild recipe")


@dataclass(frozen=True)
class ClosedRecord:
    """An MLPerf Training closed-division ResNet-50 result on one machine: another recipe than
    ours (ANOTHER_RECIPE), shown beside our figures and never joined to them."""
    round: str               # "v4.0": mlcommons/training_results_<round>
    submitter: str
    system: str              # as the submitter's system description names it
    folder: str              # <submitter>/results/<folder>/resnet/result_*.txt in that repository
    hardware: str
    accelerator: str         # the GPU model as its driver names it (a descriptor's accelerator_model_name)
    accelerators: int        # in the whole system
    minutes: float           # the official result summarizer's score of the five logs
    target: float = 0.759
    runs: int = 5

    @property
    def source(self) -> str:
        return (f"{self.submitter}, MLPerf Training {self.round} closed division, ResNet-50 result logs "
                f"(mlcommons/training_results_{self.round}: {self.submitter}/results/{self.folder}), "
                "scored with mlperf_logging.result_summarizer")


_H100, _H200 = "NVIDIA H100 80GB HBM3", "NVIDIA H200"

CLOSED_RECORDS = (
    ClosedRecord("v3.1", "NVIDIA", "Eos_n1 (1x DGX H100)", "eos_ngc23.09_mxnet",
                 "8x H100-SXM5-80GB, 2x Xeon Platinum 8480C", _H100, 8, 13.579),
    ClosedRecord("v3.1", "Azure", "ND_H100_v5", "ND_H100_v5_mxnet",
                 "Azure ND H100 v5 VM, 8x H100-SXM-80GB, 2x Xeon Platinum 8480C", _H100, 8, 13.819),
    ClosedRecord("v4.0", "NVIDIA", "Eos (1x DGX H100)", "eos_ngc24.04_mxnet",
                 "8x H100-SXM5-80GB, 2x Xeon Platinum 8480C", _H100, 8, 13.326),
    ClosedRecord("v4.0", "NVIDIA", "NVIDIA H200 (1x HGX H200)", "h200_ngc24.04_mxnet",
                 "8x H200-SXM5-141GB, 2x Xeon Platinum 8480C", _H200, 8, 12.078),
)


def closed_records_on(accelerator: str, accelerators: int) -> list[ClosedRecord]:
    """The closed-division records on as many GPUs of the model `accelerator` names."""
    return [r for r in CLOSED_RECORDS
            if r.accelerators == accelerators and same_model(r.accelerator, accelerator)]


@dataclass(frozen=True)
class PublishedPoint:
    """One point of a published tradeoff curve: top-1 against training minutes (evaluation and
    checkpointing excluded)."""
    configuration: str
    system: str              # systems/<system>.json describing the machine, or ""
    hardware: str
    top1: float              # fraction, as a Point's top1
    minutes: float
    runs: int                # how many seeds the figure is the mean of (1: a single figure)
    note: str
    source: str


@dataclass(frozen=True)
class PublishedAblation:
    """One variant of a published ablation: its top-1 and its minutes, or img/s where the
    write-up gives a throughput instead (None where it gives neither)."""
    study: str               # what was compared
    variant: str
    epochs: float | None     # None where the write-up gives no duration
    top1: float | None
    minutes: float | None
    img_per_s: float | None
    system: str
    hardware: str
    runs: int                # at least this many replicates
    source: str


_CLOUD = ("a100-80gb", "8x A100-80GB SXM4")          # MosaicML's own machine ("cloud")
_P4D = ("p4d", "AWS p4d.24xlarge, 8x A100-40GB")
_UNSPECIFIED = ("", "8x A100 (not specified further)")

# Means over 5 seeds for the Mosaic recipes, 3 for the FFCV configs; the two points on an
# unnamed 8x A100 are taken as single headline figures.
POINTS = (
    PublishedPoint("Mild (MLPerf v2.0 open)", *_CLOUD, 0.759, 23.8, 5,
                   "28 epochs; NVIDIA closed MXNet: 28.7 min", MLPERF_V2),
    PublishedPoint("Mosaic baseline (MLPerf v2.0 open)", *_CLOUD, 0.759, 110.5, 5,
                   "no speed-up methods", MLPERF_V2),
    PublishedPoint("Mild", *_CLOUD, 0.766, 25.3, 5, "NVIDIA-hyperparameter baseline: 180 min to "
                   "76.6 (7.1x slower); it never exceeds 76.7", MOSAIC_RESNET),
    PublishedPoint("Mild", *_CLOUD, 0.781, 52.4, 5, "timm A3 reaches 78.1 2.5x slower", MOSAIC_RESNET),
    PublishedPoint("Mild", *_P4D, 0.781, 56.0, 5, "timm A3 on p4d: 334 min (CPU-bound "
                   "RandAugment/CutMix/MixUp)", MOSAIC_RESNET),
    PublishedPoint("Medium", *_P4D, 0.794, 60.4, 5, "FFCV authors' own rn50 (with test-time "
                   "augmentation): 78.4 in 77.2 min", MOSAIC_RESNET),
    PublishedPoint("Medium", *_UNSPECIFIED, 0.784, 60.0, 1, "under 60 min (an upper bound)",
                   MOSAIC_RESNET),
    PublishedPoint("Hot", *_CLOUD, 0.799, 255.0, 5, "timm A2: 79.8 in 501 min", MOSAIC_RESNET),
    PublishedPoint("Hot", *_UNSPECIFIED, 0.800, 284.0, 1, "", MOSAIC_RESNET),
    PublishedPoint("Hot", *_CLOUD, 0.810, 880.0, 5, "timm A1: 80.4 in 970 min; PyTorch blog: 80.9 "
                   "in 1439 min", MOSAIC_RESNET),
) + tuple(
    PublishedPoint(f"ffcv-imagenet rn50, {epochs} epochs", *_P4D, top1, minutes, 3,
                   "the FFCV authors' configs", FFCV_IMAGENET)
    for epochs, top1, minutes in ((16, 0.738, 14.9), (24, 0.756, 21.7), (32, 0.766, 28.7),
                                  (40, 0.772, 35.6), (56, 0.780, 49.4), (88, 0.784, 77.2))
)


def _ablation(study: str, epochs: float | None, variant: str, top1: float | None,
              minutes: float | None = None, img_per_s: float | None = None) -> PublishedAblation:
    return PublishedAblation(study, variant, epochs, top1, minutes, img_per_s, *_CLOUD, 3,
                             MOSAIC_ABLATIONS)


_CUTMIX_MIXUP = "Hot prototype, CutMix vs MixUp"
_MIXUP_SMOOTHING = "Mild prototype, MixUp vs label smoothing"
_MIXUP_ALPHA = "Hot, MixUp alpha 0.25 vs 1.0"
_SAM_EVERY = "Hot, SAM every 5 vs every 10 steps"
_LOSS_INIT = "Medium prototype, loss and logit bias init"
_RANDAUGMENT_DEPTH = "NVIDIA-hyperparameter baseline + channels last, RandAugment depth"

ABLATIONS = (
    _ablation(_CUTMIX_MIXUP, 180, "CutMix", 0.7885, 279),
    _ablation(_CUTMIX_MIXUP, 180, "MixUp", 0.7956, 242),
    _ablation(_CUTMIX_MIXUP, 540, "CutMix", 0.8021, 932),
    _ablation(_CUTMIX_MIXUP, 540, "MixUp", 0.8069, 880),
    _ablation(_MIXUP_SMOOTHING, 30, "MixUp and label smoothing", 0.7591, img_per_s=18043),
    _ablation(_MIXUP_SMOOTHING, 30, "MixUp alone", 0.7604, img_per_s=18527),
    _ablation(_MIXUP_SMOOTHING, 30, "label smoothing alone", 0.7633, img_per_s=19086),
    _ablation(_MIXUP_ALPHA, 450, "alpha 0.25", 0.8078, 573),
    _ablation(_MIXUP_ALPHA, 450, "alpha 1.0", 0.7969, 543),
    _ablation(_MIXUP_ALPHA, 810, "alpha 0.25", 0.8103, 980),
    _ablation(_MIXUP_ALPHA, 810, "alpha 1.0", 0.8022, 1008),
    _ablation(_SAM_EVERY, 180, "SAM every 5 steps", 0.7986, 254),
    _ablation(_SAM_EVERY, 180, "SAM every 10 steps", 0.7986, 237),
    _ablation(_SAM_EVERY, 450, "SAM every 5 steps", 0.8078, 573),
    _ablation(_SAM_EVERY, 450, "SAM every 10 steps", 0.8069, 532),
    _ablation(_LOSS_INIT, 36, "BCE, default bias init", 0.7591),
    _ablation(_LOSS_INIT, 36, "cross-entropy", 0.7629),
    _ablation(_LOSS_INIT, 36, "BCE, bias -log(n)", 0.7675),
    _ablation(_LOSS_INIT, 90, "BCE, default bias init", 0.7834),
    _ablation(_LOSS_INIT, 90, "cross-entropy", 0.7860),
    _ablation(_LOSS_INIT, 90, "BCE, bias -log(n)", 0.791),
    _ablation(_RANDAUGMENT_DEPTH, None, "depth 0", None, img_per_s=15422),
    _ablation(_RANDAUGMENT_DEPTH, None, "depth 1", None, img_per_s=12597),
    _ablation(_RANDAUGMENT_DEPTH, None, "depth 2", None, img_per_s=11108),
)


def points_for(system: str) -> list[PublishedPoint]:
    """The published tradeoff points on systems/<system>.json's machine ("": 8x A100 of a
    kind the write-up does not name)."""
    return [p for p in POINTS if p.system == system]


def times_for(system: str, target: float | None = None) -> list[PublishedTime]:
    return [t for t in TIMES if t.system == system and (target is None or t.target == target)]


def throughput_for(system: str, recipe: str = "Mild") -> PublishedThroughput | None:
    return next((t for t in THROUGHPUTS if t.system == system and t.label.lower() == recipe.lower()),
                None)


def sources() -> list[str]:
    return list(dict.fromkeys([t.source for t in TIMES] + [t.source for t in THROUGHPUTS]))
