"""Published figures of the recipe, as data with their source, to show beside our own.

None of these was measured by this project: each names where it comes from. `system` is
the descriptor under systems/ that describes the same machine ("" when none does).
"""
from __future__ import annotations

from dataclasses import dataclass

MLPERF_V2 = "MosaicML, MLPerf Training v2.0 open division, ResNet-50 result logs (2022-06)"
MLPERF_V2_NVIDIA = "NVIDIA, MLPerf Training v2.0 closed division, ResNet-50 MXNet (2022-06)"
MOSAIC_RESNET = "MosaicML, 'Mosaic ResNet' recipe write-up (2022)"
MOSAIC_DEEP_DIVE = "MosaicML, Mosaic ResNet deep dive: throughput per cloud system (2022)"


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
    PublishedTime("Medium", "p4d", "AWS p4d.24xlarge, 8x A100-40GB", 60.4, 0.794, 1, MOSAIC_RESNET),
    PublishedTime("Hot", "a100-80gb", "8x A100-80GB SXM4", 255.0, 0.799, 1, MOSAIC_RESNET),
    PublishedTime("Hot, longer schedule", "a100-80gb", "8x A100-80GB SXM4", 880.0, 0.810, 1,
                  MOSAIC_RESNET),
)

THROUGHPUTS = (
    PublishedThroughput("Mild", "bm-gpu4", "Oracle BM.GPU4.8, 8x A100-40GB", 22242, MOSAIC_DEEP_DIVE),
    PublishedThroughput("Mild", "p4d", "AWS p4d.24xlarge, 8x A100-40GB", 21582, MOSAIC_DEEP_DIVE),
    # The CPU-heavy Hot recipe: host CPU matters (p4d at 64% of BM.GPU4.8).
    PublishedThroughput("Hot", "bm-gpu4", "Oracle BM.GPU4.8, 8x A100-40GB", 14388, MOSAIC_DEEP_DIVE),
    PublishedThroughput("Hot", "p4d", "AWS p4d.24xlarge, 8x A100-40GB", 9225, MOSAIC_DEEP_DIVE),
)


def times_for(system: str, target: float | None = None) -> list[PublishedTime]:
    return [t for t in TIMES if t.system == system and (target is None or t.target == target)]


def throughput_for(system: str, recipe: str = "Mild") -> PublishedThroughput | None:
    return next((t for t in THROUGHPUTS if t.system == system and t.label.lower() == recipe.lower()),
                None)


def sources() -> list[str]:
    return list(dict.fromkeys([t.source for t in TIMES] + [t.source for t in THROUGHPUTS]))
