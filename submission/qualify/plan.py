"""What `qualify` runs on a device, in which order, and whether each part fits the time left.

A part is one command of the harness (`bench ... quick=true json=...`, `run ...`), started
as its own process so that a failure ends that part only. Parts come in order of value:
every recipe's eager profile and the short campaign first, compiled variants after. Before
a part starts, its cost is estimated from what this machine has measured so far (the first
bench's seconds; the first compiled bench's extra seconds), else from the priors below; a
part that would not end inside the budget is left out and named, and a part still running
at the budget's end is stopped.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..data.synthetic_images import FolderShape

RECIPES = ("mild", "medium", "hot")
DEFAULT_MINUTES = {"cuda": 8.0, "cpu": 5.0}
RECORD_RESERVE_S = 10.0       # the campaign's report and the record, after the last part
# the campaign's verdict: the recipe learned when every run's last evaluation scores at least
# this many times chance (1 / classes)
LEARNED_OVER_CHANCE = 1.5


@dataclass(frozen=True)
class Scale:
    """The sizes of a qualification on one kind of device: its synthetic data, the settings
    every part runs with, and those of the short campaign (on top of them)."""
    data: FolderShape
    settings: dict[str, str]
    campaign: dict[str, str]
    # before anything is measured here: seconds of an eager quick bench, and what compiling
    # adds to one (2 sides compiled, in turns with the eager step, side changes)
    bench_prior_s: float
    compile_prior_s: float
    campaign_factor: float     # the campaign of 2 runs against one eager bench
    steps: int                 # the bench's timed steps


# the campaign: 2 runs, each trained a few epochs of its progressive-resizing schedule
# (sides changing at epoch boundaries), an evaluation and progress windows often enough to
# see the timed region's start; a target no run is expected to reach, so that each trains
# its whole budget (the timings are what is measured). Its EMA, what every evaluation scores,
# is scaled to its length as submission/embedded.yaml scales it (a half-life of 10 batches of
# 150; here 8 of 120 on a GPU, 3 of 18 on a CPU): Mild's 100 batches, an update every 20, made
# for 17,500 steps, left the evaluated model 43% initial weights after the GPU campaign's 120
# steps and every evaluation at chance (docs/qualify.md)
_CAMPAIGN = {"runs": "2", "warmup_epochs": "1", "eval_every_epochs": "1",
             "target_accuracy": "1.0", "package": "false", "cache_clear_cmd": ""}

SCALES = {
    # the recipe's own sizes (176 px train, 224 eval, batch 256, fp16 AMP); priors from the
    # H200 qualification of 2026-11-26 (docs/gpu-h200.md): Mild's bench 68 s, the campaign
    # 98 s, compiling added 56 s
    "cuda": Scale(FolderShape(classes=10, train_per_class=520, val_per_class=50),
                  {}, {**_CAMPAIGN, "epochs": "20", "scale_schedule_ratio": "0.3",     # 120 steps
                       "progress_every_steps": "5", "ema_half_life_batches": "8", "ema_update_every_batches": "2"},
                  bench_prior_s=70.0, compile_prior_s=70.0, campaign_factor=1.5, steps=10),
    # small sides and batches, fp32 (bf16 autocast was slower at 16-32 px: submission/embedded.yaml);
    # priors from a 2-vCPU AMD EPYC build machine at batch 32 (docs/qualify.md): Mild's bench
    # 66-82 s, the campaign 132-151 s in the test suite; at batch 16, alone, 33 s and 52 s
    "cpu": Scale(FolderShape(classes=4, train_per_class=24, val_per_class=12, sides=(160, 256)),
                 {"device": "cpu", "batch_per_device": "16", "train_resolution": "32",
                  "eval_resolution": "32", "eval_resize": "36", "precision": "fp32"},
                 {**_CAMPAIGN, "epochs": "10", "scale_schedule_ratio": "0.3",          # 18 steps
                  "progress_every_steps": "3", "ema_half_life_batches": "3", "ema_update_every_batches": "1",
                  # 18 steps on 16-28 px learn nothing (nor 36) without it: the embedded campaign's
                  # zero-init residual branches, for the same tiny feature maps (docs/qualify.md)
                  "zero_init_residual": "true"},
                 bench_prior_s=75.0, compile_prior_s=0.0, campaign_factor=2.0, steps=3),
}
# each recipe's bench against Mild's (SAM's second pass): 1.46 and 1.12 on the 2-vCPU build
# machine, 1.15 and 0.93 on the H200 (docs/qualify.md)
BENCH_FACTOR = {"mild": 1.0, "medium": 1.4, "hot": 1.1}


@dataclass(frozen=True)
class Part:
    """One command of the qualification."""
    name: str                  # "bench mild", "bench mild compiled + CUDA graphs", "campaign"
    verb: str                  # "bench" or "run"
    recipe: str
    compiled: bool = False
    cuda_graphs: bool = False

    @property
    def key(self) -> str:
        """A short name for files: mild, mild-compiled, mild-compiled-graphs, campaign."""
        if self.verb == "run":
            return "campaign"
        return self.recipe + ("-compiled" if self.compiled else "") + ("-graphs" if self.cuda_graphs else "")


def parts(device_type: str, recipes: tuple[str, ...] = RECIPES) -> list[Part]:
    """Every part for this device, in the order they are tried."""
    eager = [Part(f"bench {recipe}", "bench", recipe) for recipe in recipes]
    campaign = Part(f"campaign of 2 runs ({recipes[0]})", "run", recipes[0])
    found = eager[:1] + [campaign] + eager[1:]
    if device_type == "cuda":      # on a CPU, Inductor's C++ build of one step takes minutes
        found += [Part(f"bench {recipe} compiled + CUDA graphs", "bench", recipe, True, True)
                  for recipe in recipes]
        found += [Part(f"bench {recipe} compiled", "bench", recipe, True) for recipe in recipes[:1]]
    return found


NOT_COMPILED = {"cpu": "On a CPU qualify does not compile: Inductor's C++ build of one step takes "
                       "minutes of a 5-minute budget (`bench compile=true` measures it)"}


@dataclass
class Estimates:
    """Seconds a part will take, from what was measured so far on this machine."""
    scale: Scale
    first_bench_s: float | None = None          # the first eager bench, per Mild-equivalent
    compile_extra_s: float | None = None        # a compiled bench's seconds beyond its eager one
    measured: dict[str, float] = field(default_factory=dict)

    def of(self, part: Part) -> float:
        unit = self.first_bench_s or self.scale.bench_prior_s
        bench = unit * BENCH_FACTOR.get(part.recipe, 1.0)
        if part.verb == "run":
            return unit * self.scale.campaign_factor
        if part.compiled:
            return bench + (self.compile_extra_s if self.compile_extra_s is not None
                            else self.scale.compile_prior_s)
        return bench

    def learn(self, part: Part, seconds: float) -> None:
        """Take a finished part's seconds (a stopped one's: a lower bound) into the estimates of the
        parts after it."""
        self.measured[part.key] = seconds
        if part.verb == "bench" and not part.compiled and self.first_bench_s is None:
            self.first_bench_s = seconds / BENCH_FACTOR.get(part.recipe, 1.0)
        if part.compiled and self.compile_extra_s is None:
            eager = self.measured.get(part.recipe)
            self.compile_extra_s = max(0.0, seconds - (eager if eager is not None else self.of(
                Part("", "bench", part.recipe))))


def fits(estimate_s: float, left_s: float) -> bool:
    """Whether a part estimated at `estimate_s` may start with `left_s` of the budget left
    (the record's own seconds kept back)."""
    return estimate_s <= left_s - RECORD_RESERVE_S
