"""Time and cost of a run and of a campaign on a system, projected from measured figures.

    python -m submission project system=NAME profile=FILE [loader_profile=FILE] [dp_efficiency=F]
        [key=value ...]

The profile (submission.bench_profile) is what `python -m submission bench ... json=FILE` writes
on a machine: per-process training-step rate at every image side of the
progressive-resizing schedule, evaluation rate, the loader's rate and its thread count,
and the one-time costs inside a run. The projection walks the run plan of the chosen
recipe on NAME (run_plan.RunPlan, the one the training loop follows) step by step, and adds up:

  training   per side: images / min(step rate x processes x data-parallel efficiency,
             loader rate per thread x loader threads per process x processes)
  evaluation evaluations x eval images / (eval rate x processes)
  set-up     inside the timed region: the loaders' first batch and first evaluation pass,
             and without the warm-up the first step at each new side

It assumes the run trains its whole epoch budget (the published Mild runs reached the
target at their last evaluations) and every assumption is printed with the figures.

A profile measured with another recipe than the projected one (a Mild profile on a GPU
for a Hot projection) is adjusted, and each adjustment printed: the step time scaled by
the SAM passes (1 + 1/sam_interval of the projected recipe over the profile's), and sides
the profile lacks interpolated between the nearest measured ones, linear in the area.
loader_profile=FILE takes the loader figures ("loader", "augmentation_ms_per_image") from
another profile, e.g. a bench of recipe=hot on a CPU host: Hot loads with torchvision
(per-image CPU work in DataLoader workers), and the loader's rate per thread times the
system's threads is then where such a recipe is limited.

  rates.py     the rate model: per side, step, SAM, loader and loop costs; data parallelism
  schedule.py  the walk over the run plan: the parts of a run ending at a given step
  text.py      assumptions, warnings, the loader summary, the printed table
  estimate.py  project(config, profile, loader_profile, dp_efficiency) -> Projection
  result.py    Projection and its Parts, as numbers
  command.py   the command line
"""
from ..bench_profile import ProfileError
from .command import main
from .estimate import project
from .hints import BENCH_HINT, loader_remedy
from .rates import DEFAULT_DP_EFFICIENCY, SIDE_MARGIN, host_vcpus
from .result import Part, Projection
from .text import format_projection

__all__ = ["BENCH_HINT", "DEFAULT_DP_EFFICIENCY", "SIDE_MARGIN", "Part", "ProfileError", "Projection",
           "format_projection", "host_vcpus", "loader_remedy", "main", "project"]
