"""The rate model of a projection: at each side of the run, the seconds an image costs the
step (measured, or interpolated between measured sides, scaled by the SAM passes of the
run's recipe over the profile's), the loader's work the step does not hide and the loop's
own work; the whole system's step rate with data parallelism; the loader's rate at the threads
the system gives it, along what the profile measured (loader_scaling.py)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .. import inventory
from ..bench_profile import BenchProfile, FedStep, Loader, ProfileError
from ..config import HARNESS_ORIGINS, Config, ConfigError
from ..loader_kinds import kind_of
from ..loader_threads import LoaderThreads, loader_threads
from ..run_plan import RunPlan
from .hints import BENCH_HINT, loader_remedy
from .loader_scaling import ThreadCurve, thread_curve

# Assumed share of linear scaling kept by data-parallel training over several processes
# when no measurement is given (dp_efficiency=); 1 process needs none.
DEFAULT_DP_EFFICIENCY = 0.90
# a side the profile lacks may be inferred from its neighbours, not from beyond this share
# of the measured range
SIDE_MARGIN = 0.10


@dataclass(frozen=True)
class StepTimes:
    seconds: dict[int, float]     # per image per process at each side of the run, before SAM
    inferred: dict[int, str]      # how each side the profile lacks was had
    profile_recipe: str
    profile_sam: int
    sam_factor: float             # the run's SAM passes a step over the profile's
    compiled: bool = False        # the profile's compiled step (its compiled rows), not the eager one
    cuda_graphs: bool = False     # compiled and replayed as CUDA graphs
    measured_sides: tuple[int, ...] = ()

    def other_recipe(self, config: Config) -> bool:
        return self.profile_recipe != config.recipe


@dataclass(frozen=True)
class Shape:
    """The eager step's seconds per image by side, which a compiled step measured at two sides
    follows in between, and where they come from."""
    seconds: dict[int, float]
    source: str


@dataclass(frozen=True)
class LoaderModel:
    kind: str
    figures: Loader
    profile: BenchProfile         # the profile the loader figures come from
    threads: LoaderThreads        # loader threads per process in the run, and where the count comes from
    vcpus: int                    # of one node
    vcpu_source: str
    curve: ThreadCurve            # its rate per process by threads, as measured

    @property
    def per_thread(self) -> float:
        return self.figures.img_per_s / self.figures.threads

    @property
    def scales_with_threads(self) -> bool:
        """A CPU loader's rate grows with its threads; the device loader's is the device's (its
        threads only gather bytes), taken per process as measured."""
        return not kind_of(self.kind).on_device

    @property
    def count(self) -> int:
        return self.threads.threads

    @property
    def per_process(self) -> float:
        return self.curve.at(self.count) if self.scales_with_threads else self.figures.img_per_s


@dataclass(frozen=True)
class Rates:
    processes: int
    dp_efficiency: float
    step: StepTimes
    loader: LoaderModel
    loader_costs: dict[int, float]    # the loader's work the step does not hide, s per image, by side
    loop_s: float                     # the loop's own work per step, as measured
    loop_per_image: float
    eval_rate: float                  # whole system
    step_rates: dict[int, float]      # whole system, every per-image cost included

    @property
    def loader_rate(self) -> float:
        return self.loader.per_process * self.processes

    def training(self, side: int) -> tuple[float, str]:
        """The whole system's training rate at `side`, and what limits it."""
        step_rate = self.step_rates[side]
        if step_rate <= self.loader_rate:
            return step_rate, "step + loader" if loader_cost_at(self.loader_costs, side) else "step"
        return self.loader_rate, "loader"


def sam_passes(interval: int) -> float:
    """Forward-backward passes per step on average: every interval-th step is two."""
    return 1 + 1 / interval if interval else 1.0


def side_seconds(train_step: dict[int, float], side: int, shape: Shape | None = None) -> tuple[float, str]:
    """Seconds per image of the step at `side` from the rates by side: measured; or between the
    nearest measured sides by the step's cost per image, along `shape` (the eager step's, where
    it holds the three sides), else linear in the area (FLOPs per image scale with side^2); or
    within SIDE_MARGIN outside the measured range the nearest one's scaled by the area; and how
    it was had, after the side ("" when measured). ValueError: further outside."""
    if side in train_step:
        return 1 / train_step[side], ""
    measured = sorted(train_step)
    seconds = {k: 1 / train_step[k] for k in measured}
    below = [k for k in measured if k < side]
    above = [k for k in measured if k > side]
    if below and above:
        low, high = below[-1], above[0]
        share = (side ** 2 - low ** 2) / (high ** 2 - low ** 2)
        how = "linear in the area"
        if shape is not None and {low, high, side} <= shape.seconds.keys():
            along = shape.seconds
            if along[high] != along[low]:
                share = (along[side] - along[low]) / (along[high] - along[low])
                how = f"along the eager step's cost per image ({shape.source})"
        return seconds[low] + (seconds[high] - seconds[low]) * share, f"between {low} and {high} px, {how}"
    nearest = below[-1] if below else above[0]
    if abs(side - nearest) > SIDE_MARGIN * nearest:
        raise ValueError(side)
    return (seconds[nearest] * (side / nearest) ** 2,
            f"from {nearest} px scaled by the area (outside the measured {measured[0]}-"
            f"{measured[-1]} px by {abs(side - nearest) / nearest:.0%})")


def compiled_rates(config: Config, profile: BenchProfile) -> dict[int, float]:
    """The compiled step's rates the run is projected with ({}: the eager step's): where the run
    compiles, or where the profile measured only the compiled step."""
    return profile.compiled_img_per_s if config.compile or profile.of_the_compiled_step else {}


def eager_shape(profile: BenchProfile, beside: BenchProfile | None) -> Shape | None:
    """What a compiled profile's sides in between follow: the eager step of the same bench where
    it measured more than the compiled sides (a full `bench compile=true`), else that of the eager
    profile beside it (qualify's record); None: neither."""
    own = {side: 1 / f.img_per_s for side, f in profile.train_step.items()}
    if own.keys() - profile.compiled_img_per_s.keys():
        return Shape(own, "the eager step measured in the same bench")
    if beside is not None:
        return Shape({side: 1 / f.img_per_s for side, f in beside.train_step.items()},
                     f"the eager profile {Path(beside.file).name} beside it")
    return None


def step_times(config: Config, plan: RunPlan, profile: BenchProfile, infer_sides: bool = False,
               eager_beside: BenchProfile | None = None) -> StepTimes:
    """The step's time per image at every side of `plan`: the compiled step's where the run
    compiles (compile=true) and the profile compiled it, or where the profile measured only the
    compiled step (a compiled bench measures two sides: those between are inferred); else the
    eager one's. A side the profile lacks is inferred for the compiled step, a profile of
    another recipe (whose sides differ), or with infer_sides (a run of another length: a
    tradeoff's budgets), and not far outside."""
    profile_recipe = profile.settings.get("recipe") or config.recipe
    compiled = compiled_rates(config, profile)
    may_infer = profile_recipe != config.recipe or infer_sides or bool(compiled)
    rates = compiled or {side: figures.img_per_s for side, figures in profile.train_step.items()}
    shape = eager_shape(profile, eager_beside) if compiled else None
    sides = sorted(set(plan.sides()))
    seconds, inferred = {}, {}
    for side in sides:
        try:
            seconds[side], how = side_seconds(rates, side, shape)
        except ValueError:
            how = None
        if how:
            inferred[side] = how
    missing = [side for side in sides if side not in rates]
    beyond = [side for side in missing if side not in seconds]
    if missing and (not may_infer or beyond):
        raise ProfileError(
            f"profile {profile.file} has no training-step rate at side(s) "
            f"{', '.join(map(str, beyond if may_infer else missing))} px, which the "
            f"{config.recipe} schedule on {config.system_id} trains at"
            + (f" (more than {SIDE_MARGIN:.0%} outside its measured {min(rates)}-{max(rates)} px: "
               "not inferred)" if may_infer else "")
            + "; " + BENCH_HINT.format(system=config.system_id))
    # SAM: every sam_interval-th step is two passes; the profile's per-side means hold
    # its own recipe's share of them (the bench times a multiple of sam_interval steps)
    return StepTimes(seconds, inferred, profile_recipe, profile.sam_interval,
                     sam_passes(config.sam_interval) / sam_passes(profile.sam_interval),
                     bool(compiled), bool(compiled) and bool(profile.settings.get("cuda_graphs")),
                     tuple(sorted(rates)))


def host_vcpus(config: Config) -> tuple[int, str]:
    """vCPUs of one node of `config`'s system, and where the count comes from: the
    descriptor's host_processor_vcpu_count; else its cores x processors per node (one
    thread per core: the descriptor does not say whether SMT is on, so this is a lower
    bound); a descriptor that names no host processor describes the machine it runs on,
    and then this machine's count is taken. A descriptor that names its processor but
    states neither is refused, naming the field to fill."""
    stated = config.descriptor
    where = f"systems/{config.system_id}.json"
    if stated.host_vcpus:
        return stated.host_vcpus, f"{stated.host_vcpus} vCPUs ({where})"
    cores, sockets = stated.host_processor_core_count, stated.host_processors_per_node
    if cores and sockets:
        return cores * sockets, (f"{cores * sockets} vCPUs = {cores} cores x {sockets} processors "
                                 f"x 1 thread per core ({where} states no vCPU count nor SMT: a "
                                 "lower bound)")
    if not stated.host_processor_model_name:
        host = inventory.host()[0]
        return host, (f"{host} vCPUs of this machine ({where} names no host processor: "
                      "it describes the machine it runs on)")
    raise ConfigError(
        f"{where} states no host_processor_vcpu_count, nor host_processor_core_count with "
        "host_processors_per_node, so the loader threads per process cannot be projected: fill "
        "host_processor_vcpu_count (the vCPUs of one node) in that file")


def loader_model(config: Config, profile: BenchProfile, loader_profile: BenchProfile | None,
                 beyond: float | None = None) -> LoaderModel:
    """The loader figures the run is projected with (loader_profile's, else the profile's),
    refused when they measured another loader than the recipe trains with; its threads by the
    rule a run applies (loader_threads.py) to the descriptor's vCPUs, its rate along what the
    profile measured (loader_scaling.py; `beyond`: beyond_measured_threads)."""
    source = loader_profile if loader_profile is not None else profile
    kind = source.loader.kind
    if kind != config.train_loader:
        files = (f"profile {profile.file}" + (f" with loader_profile {loader_profile.file}"
                                             if loader_profile is not None else ""))
        raise ProfileError(
            f"the {config.recipe} recipe loads its training images with the {config.train_loader} "
            f"loader, but the loader figures of {source.file} were measured with the {kind} "
            f"loader ({files}): {loader_remedy(config)}")
    vcpus, vcpu_source = host_vcpus(config)
    origin = config.origin("workers_per_device")
    threads = loader_threads(config.workers_per_device, origin, origin in HARNESS_ORIGINS, config.device_type,
                             vcpus, vcpu_source, config.processes_per_node)
    return LoaderModel(kind, source.loader, source, threads, vcpus, vcpu_source, thread_curve(source, beyond))


def _unhidden(pair: FedStep, loader_alone: float) -> float:
    # a loader slower than the step makes the fed step wait: that is the loader's limit,
    # which the projection counts apart (from its own rate and the system's threads)
    return max(0.0, 1 / pair.fed_img_per_s - max(1 / pair.synthetic_img_per_s, 1 / loader_alone))


def loader_costs(profile: BenchProfile) -> dict[int, float]:
    """Seconds per image that feeding the step from the loader adds to the step itself, by
    the side the bench measured it at: the step fed by the loader against the synthetic
    step. On a CPU the loader's threads take cores the step computes on; on a GPU the
    loader works beside it and this is about 0."""
    return {side: _unhidden(pair, profile.loader.img_per_s)
            for side, pair in profile.fed_step_by_side.items()}


def loader_cost_at(costs: dict[int, float], side: int) -> float:
    """The cost at `side`: linear in the side between the two measured, the nearer one's
    outside them (FFCV decodes at the training resolution whatever side the step trains at;
    the step's own size is what changes)."""
    if not costs:
        return 0.0
    low, high = min(costs), max(costs)
    if side <= low or low == high:
        return costs[low]
    if side >= high:
        return costs[high]
    return costs[low] + (costs[high] - costs[low]) * (side - low) / (high - low)


def loop_work(config: Config, profile: BenchProfile) -> tuple[float, float]:
    """The loop's own work around each step (normalising and resizing the batch, the EMA
    update) as the bench measured it per step, and per image of the run: normalising and
    resizing scale with the batch the bench measured, the EMA is per step."""
    overhead = profile.loop_overhead
    if overhead is None:
        return 0.0, 0.0
    measured_batch = profile.settings.get("batch_per_device") or config.batch_per_device
    return (overhead.normalize_resize_s + overhead.ema_s,
            overhead.normalize_resize_s / measured_batch + overhead.ema_s / config.batch_per_device)


def dp_efficiency_of(config: Config, given: float | None) -> float:
    if given is None:
        return 1.0 if config.world_size == 1 else DEFAULT_DP_EFFICIENCY
    if not 0 < given <= 1:
        raise ConfigError(f"dp_efficiency must be in (0, 1], not {given}")
    return given


def rates(config: Config, plan: RunPlan, profile: BenchProfile, loader_profile: BenchProfile | None,
          dp_efficiency: float, infer_sides: bool = False, eager_beside: BenchProfile | None = None,
          beyond: float | None = None) -> Rates:
    processes = config.world_size
    step = step_times(config, plan, profile, infer_sides, eager_beside)
    loader = loader_model(config, profile, loader_profile, beyond)
    costs = loader_costs(profile)
    loop_s, loop_per_image = loop_work(config, profile)
    # the step's rate of the whole system at each side, the loader's work it does not hide
    # and the loop's own work included
    step_rates = {side: processes * dp_efficiency / (seconds * step.sam_factor
                                                     + loader_cost_at(costs, side) + loop_per_image)
                  for side, seconds in step.seconds.items()}
    return Rates(processes, dp_efficiency, step, loader, costs, loop_s, loop_per_image,
                 profile.eval_img_per_s * processes, step_rates)
