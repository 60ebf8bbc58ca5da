"""The projection of one run on a system from a bench profile: the rate model, the walk
over the run's schedule, and what is said of them."""
from __future__ import annotations

from .. import published
from ..bench_profile import BenchProfile
from ..config import Config
from ..run_plan import RunPlan
from . import schedule, text
from .rates import dp_efficiency_of, rates
from .result import Projection


def project(config: Config, profile: BenchProfile, loader_profile: BenchProfile | None = None,
            dp_efficiency: float | None = None, infer_sides: bool = False,
            eager_beside: BenchProfile | None = None) -> Projection:
    """The run `config` describes, projected from `profile`'s rates (the loader's from
    `loader_profile` when given) with `dp_efficiency` (default: 1 for one process,
    DEFAULT_DP_EFFICIENCY for more); infer_sides: sides the profile lacks are inferred from
    their neighbours even for its own recipe (a run of another length); eager_beside: the eager
    profile whose shape a compiled profile's sides in between follow. ProfileError: the
    profile lacks a figure the run needs."""
    efficiency = dp_efficiency_of(config, dp_efficiency)
    images = train_images, eval_images = schedule.dataset_images(config)
    plan = RunPlan.of(config, train_images)
    model = rates(config, plan, profile, loader_profile, efficiency, infer_sides, eager_beside)
    parts = schedule.parts_until(config, plan, profile, model, eval_images, plan.total_steps)
    early = schedule.early_stop(config, plan, profile, model, eval_images)
    power = profile.power
    watts = power.watts if power is not None else None
    return Projection(config.system_id, config.recipe, model.processes, parts, config.runs,
                      config.price_usd_per_hour,
                      text.assumptions(config, plan, profile, loader_profile, model, images, early),
                      text.warnings(config, profile, loader_profile), early,
                      text.loader_summary(config, model, parts, loader_profile), watts,
                      text.energy_note(profile),
                      published.closed_records_on(config.descriptor.accelerator_model_name,
                                                  config.accelerators_per_node * config.num_nodes))
