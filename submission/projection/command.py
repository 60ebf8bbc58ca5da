"""`python -m submission project system=NAME profile=FILE [loader_profile=FILE]
[dp_efficiency=F] [key=value ...]`: the projection printed."""
from __future__ import annotations

from ..bench_profile import ProfileError, eager_beside, read
from ..config import parse_overrides
from ..options import ProjectOptions
from ..preflight import resolve_here
from ..run_plan import RunPlan
from .estimate import project
from .hints import BENCH_HINT, loader_remedy
from .schedule import dataset_images
from .text import format_projection


def main(options: ProjectOptions, words: list[str]) -> int:
    profile_path, loader_path, dp_efficiency = options.profile, options.loader_profile, options.dp_efficiency
    config = resolve_here(None, parse_overrides(words))
    bench_hint = BENCH_HINT.format(system=config.system_id)
    if not profile_path:
        sides = sorted(set(RunPlan.of(config, dataset_images(config)[0]).sides()))
        raise ProfileError(
            f"no profile for {config.system_id}: a projection needs measured figures, never "
            f"guessed ones: the per-process training-step rate at {', '.join(map(str, sides))} px, "
            f"the evaluation rate at {config.eval_resolution} px, the FFCV loader rate and the "
            "in-run set-up times; " + bench_hint)
    profile = read(profile_path, "profile", bench_hint)
    loader_profile = (read(loader_path, "loader_profile", loader_remedy(config))
                      if loader_path else None)
    print(format_projection(project(config, profile, loader_profile, dp_efficiency,
                                    eager_beside=eager_beside(profile), beyond=options.beyond_measured_threads)))
    return 0
