"""The projection of one run on a system from a bench profile: the rate model, the walk
over the run's schedule, and what is said of them."""
from __future__ import annotations

from .. import published
from ..bench_profile import BenchProfile
from ..config import Config
from ..run_plan import RunPlan
from . import schedule, text
from .loader_scaling import lift_line
from .rates import dp_efficiency_of, rates
from .result import Projection


def project(config: Config, profile: BenchProfile, loader_profile: BenchProfile | None = None,
            dp_efficiency: float | None = None, infer_sides: bool = False,
            eager_beside: BenchProfile | None = None, beyond: float | None = None,
            lift: bool = True) -> Projection:
    """The run `config` describes, projected from `profile`'s rates (the loader's from
    `loader_profile` when given) with `dp_efficiency` (default: 1 for one process,
    DEFAULT_DP_EFFICIENCY for more); infer_sides: sides the profile lacks are inferred from
    their neighbours even for its own recipe (a run of another length); eager_beside: the eager
    profile whose shape a compiled profile's sides in between follow; beyond: what each loader
    thread beyond the profile's largest measured count adds (loader_scaling.py); lift: say what
    more loader threads would buy where the loader limits a part. ProfileError: the profile
    lacks a figure the run needs."""
    efficiency = dp_efficiency_of(config, dp_efficiency)
    images = train_images, eval_images = schedule.dataset_images(config)
    plan = RunPlan.of(config, train_images)
    model = rates(config, plan, profile, loader_profile, efficiency, infer_sides, eager_beside, beyond)
    parts = schedule.parts_until(config, plan, profile, model, eval_images, plan.total_steps)
    early = schedule.early_stop(config, plan, profile, model, eval_images)
    power = profile.power
    watts = power.watts if power is not None else None

    def minutes_at(threads: int) -> float:
        more = config.replaced({"workers_per_device": threads}, "the command line")
        return project(more, profile, loader_profile, dp_efficiency, infer_sides, eager_beside, beyond,
                       lift=False).run_minutes

    limited = [model.step_rates[p.side] for p in parts if p.limited_by == "loader" and p.side is not None]
    loader = model.loader
    lifted = (lift_line(loader.count, max(1, loader.vcpus // config.processes_per_node), model.processes,
                        loader.curve, limited, minutes_at)
              if lift and limited and loader.scales_with_threads else "")
    return Projection(config.system_id, config.recipe, model.processes, parts, config.runs,
                      config.price_usd_per_hour,
                      text.assumptions(config, plan, profile, loader_profile, model, images, early),
                      text.warnings(config, profile, loader_profile), early,
                      text.loader_summary(config, model, parts, loader_profile), watts,
                      text.energy_note(profile),
                      published.closed_records_on(config.descriptor.accelerator_model_name,
                                                  config.accelerators_per_node * config.num_nodes),
                      lifted)
