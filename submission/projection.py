"""Time and cost of a run and of a campaign on a system, projected from measured figures.

    python -m submission project system=NAME profile=FILE [loader_profile=FILE] [dp_efficiency=F]
        [key=value ...]

The profile is the JSON `python -m submission bench ... json=FILE` writes on a machine:
per-process training-step rate at every image side of the progressive-resizing
schedule, evaluation rate, FFCV loader rate and its thread count, and the one-time
costs inside a run. The projection walks the run plan of the chosen recipe on NAME
(step.RunPlan, the one the training loop follows) step by step, and adds up:

  training   per side: images / min(step rate x processes x data-parallel efficiency,
             loader rate per thread x loader threads per process x processes)
  evaluation evaluations x eval images / (eval rate x processes)
  set-up     inside the timed region: FFCV's first-epoch and first-evaluation extra
             time, and the first step at each new side

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
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .config import Config, ConfigError, load_descriptor, parse_overrides, resolve
from .data.sources import PUBLISHED_SPLIT_SIZES
from .step import RunPlan

SCHEMA = 1
# Assumed share of linear scaling kept by data-parallel training over several processes
# when no measurement is given (dp_efficiency=); 1 process needs none.
DEFAULT_DP_EFFICIENCY = 0.90
BENCH_HINT = ("measure one on the target machine: `python -m submission bench system={system} "
              "json=profile-{system}.json`, then `python -m submission project system={system} "
              "profile=profile-{system}.json`")
# a side the profile lacks may be inferred from its neighbours, not from beyond this share
# of the measured range
SIDE_MARGIN = 0.10


class ProfileError(ConfigError):
    """The profile is missing, unreadable or lacks a figure the projection needs."""


@dataclass
class Part:
    what: str
    images: int
    img_per_s: float          # whole system
    limited_by: str
    seconds: float


@dataclass
class Projection:
    system: str
    recipe: str
    processes: int
    parts: list[Part]
    runs: int
    price_usd_per_hour: float
    assumptions: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    # (epoch, minutes) of a run that reaches the target at the last evaluation before the
    # end of its budget; None when that evaluation is the budget's last step
    early_stop: tuple[float, float] | None = None
    # where the loader limits the run (a torchvision loader, or figures from loader_profile=)
    loader_summary: list[str] = field(default_factory=list)

    @property
    def run_minutes(self) -> float:
        return sum(p.seconds for p in self.parts) / 60

    @property
    def training_img_per_s(self) -> float:
        """The whole system's training rate over every side of the run (what the
        write-ups' throughput figures measure)."""
        training = [p for p in self.parts if p.what.startswith("train ")]
        return sum(p.images for p in training) / sum(p.seconds for p in training)

    @property
    def campaign_minutes(self) -> float:
        return self.run_minutes * self.runs

    @property
    def run_cost_usd(self) -> float | None:
        return self.run_minutes / 60 * self.price_usd_per_hour if self.price_usd_per_hour else None

    @property
    def campaign_cost_usd(self) -> float | None:
        cost = self.run_cost_usd
        return None if cost is None else cost * self.runs


# ---------------------------------------------------------------------------
def load_profile(path: Path, system: str) -> dict[str, Any]:
    path = Path(path)
    try:
        profile = json.loads(path.read_text())
    except FileNotFoundError:
        raise ProfileError(f"profile {path} does not exist; " + BENCH_HINT.format(system=system)) from None
    except json.JSONDecodeError as exc:
        raise ProfileError(f"profile {path} is not valid JSON (line {exc.lineno}: {exc.msg})") from None
    except (OSError, UnicodeDecodeError) as exc:     # a folder, no permission, a binary file
        raise ProfileError(f"profile {path} cannot be read as a JSON text file "
                           f"({type(exc).__name__}: {exc}); " + BENCH_HINT.format(system=system)) from None
    if not isinstance(profile, dict) or profile.get("schema") != SCHEMA:
        raise ProfileError(f"profile {path} is not a schema-{SCHEMA} bench profile "
                           f"(schema: {profile.get('schema') if isinstance(profile, dict) else None!r})")
    problems = profile_problems(profile)
    if problems:
        raise ProfileError(f"profile {path} is not a bench profile the projection can use: "
                           f"{'; '.join(problems)}; " + BENCH_HINT.format(system=system))
    return profile


_ABSENT = object()


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


_OBJECT = (lambda v: isinstance(v, dict), "an object")
_RATE = (lambda v: _is_number(v) and v > 0, "a number of images per second > 0")
_COUNT = (lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 1, "a whole number >= 1")
_SECONDS = (lambda v: _is_number(v) and v >= 0, "a number of seconds >= 0")
_WHOLE = (lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0, "a whole number >= 0")
LOADER_KINDS = ("ffcv", "torchvision")
_KIND = (lambda v: v in LOADER_KINDS, "one of " + ", ".join(LOADER_KINDS))
# the bench's per-image CPU work of the torchvision loader, each on one thread (ms per image)
AUGMENTATION_STAGES = ("decode", "crop_flip", "randaugment", "to_tensor", "total")


def _unhidden(fed: float, synthetic: float, loader_alone: float) -> float:
    # a loader slower than the step makes the fed step wait: that is the loader's limit,
    # which the projection counts apart (from its own rate and the system's threads)
    return max(0.0, 1 / fed - max(1 / synthetic, 1 / loader_alone))


def loader_costs(profile: dict[str, Any], train_resolution: int) -> dict[int, float]:
    """Seconds per image that feeding the step from the loader adds to the step itself, by
    the side the bench measured it at: the step fed by the loader against the synthetic
    step timed in turns with it (at full size and at the smallest side; profiles from
    before 2026-11-23 hold full size only, against the bench's first row, timed a minute
    earlier; at the profile's training resolution, else the run's). On a CPU the loader's
    threads take cores the step computes on; on a GPU the loader works beside it and this
    is about 0."""
    loader_alone = (profile.get("loader") or {}).get("img_per_s") or float("inf")
    by_side = profile.get("fed_step_by_side")
    if by_side:
        return {int(side): _unhidden(v["fed_img_per_s"], v["synthetic_img_per_s"], loader_alone)
                for side, v in by_side.items()}
    fed, synthetic = profile.get("fed_step_img_per_s"), profile.get("step_img_per_s")
    if not fed or not synthetic:
        return {}
    side = (profile.get("settings") or {}).get("train_resolution") or train_resolution
    return {side: _unhidden(fed, synthetic, loader_alone)}


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



def _recipe_setting(profile: dict[str, Any], key: str, default: Any) -> Any:
    """A recipe setting the profile was measured with: its settings' own, else its recipe
    file's (profiles before 2026-11-24 name the recipe only), else `default`."""
    settings = profile.get("settings") or {}
    if key in settings:
        return settings[key]
    from .config import load_recipe
    try:
        return load_recipe(settings["recipe"]).get(key, default) if settings.get("recipe") else default
    except ConfigError:
        return default


def loader_kind(profile: dict[str, Any]) -> str:
    """Which loader the profile's "loader" figures measured: its loader.kind, else its
    recipe's train_loader (profiles before 2026-11-24 were FFCV's)."""
    return (profile.get("loader") or {}).get("kind") or _recipe_setting(profile, "train_loader", "ffcv")


def sam_passes(interval: int) -> float:
    """Forward-backward passes per step on average: every interval-th step is two."""
    return 1 + 1 / interval if interval else 1.0


def bench_command(config: Config) -> str:
    ratio = (f" scale_schedule_ratio={config.scale_schedule_ratio:g}"
             if config.recipe != "mild" else "")
    return (f"python -m submission bench recipe={config.recipe}{ratio} "
            f"json=loader-{config.recipe}.json")


def side_seconds(train_step: dict[str, Any], side: int) -> tuple[float, str]:
    """Seconds per image of the step at `side`: measured, or between the nearest measured
    sides linear in the area (side squared), or within SIDE_MARGIN outside the measured
    range the nearest one's scaled by the area; and how it was had ("" when measured)."""
    if str(side) in train_step:
        return 1 / train_step[str(side)]["img_per_s"], ""
    measured = sorted(int(k) for k in train_step)
    seconds = {k: 1 / train_step[str(k)]["img_per_s"] for k in measured}
    below = [k for k in measured if k < side]
    above = [k for k in measured if k > side]
    if below and above:
        low, high = below[-1], above[0]
        share = (side ** 2 - low ** 2) / (high ** 2 - low ** 2)
        return (seconds[low] + (seconds[high] - seconds[low]) * share,
                f"{side} px between {low} and {high} px, linear in the area")
    nearest = below[-1] if below else above[0]
    if abs(side - nearest) > SIDE_MARGIN * nearest:
        raise ValueError(side)
    return (seconds[nearest] * (side / nearest) ** 2,
            f"{side} px from {nearest} px scaled by the area (outside the measured {measured[0]}-"
            f"{measured[-1]} px by {abs(side - nearest) / nearest:.0%})")


def profile_problems(profile: dict[str, Any]) -> list[str]:
    """Each field the projection reads that is not of the type and range the bench writes."""
    def at(name: str) -> Any:
        value: Any = profile
        for key in name.split("."):
            value = value.get(key, _ABSENT) if isinstance(value, dict) else _ABSENT
        return value

    steps = at("train_step")
    sides = list(steps) if isinstance(steps, dict) else []
    # (field, kind, needed): fields not needed are left out by older profiles, and the
    # projection then counts no such set-up; a probe it reads needs both its figures
    fields = [("measured", _OBJECT, True), ("settings", _OBJECT, True),
              ("train_step", _OBJECT, True), ("eval_img_per_s", _RATE, True),
              ("loader", _OBJECT, True), ("loader.img_per_s", _RATE, True),
              ("loader.threads", _COUNT, True), ("setup_s", _OBJECT, False),
              ("setup_s.in_run_first_epoch_extra", _SECONDS, False),
              ("setup_s.first_eval_extra", _SECONDS, False), ("loader_setup_s", _OBJECT, False),
              ("step_img_per_s", _RATE, False), ("fed_step_img_per_s", _RATE, False),
              ("fed_step_by_side", _OBJECT, False), ("settings.train_resolution", _COUNT, False),
              ("loader.epoch_start_s", _SECONDS, False), ("loop_overhead", _OBJECT, False),
              ("loop_overhead.normalize_resize_s", _SECONDS, False),
              ("loop_overhead.ema_s", _SECONDS, False),
              ("loader.kind", _KIND, False), ("settings.sam_interval", _WHOLE, False),
              ("augmentation_ms_per_image", _OBJECT, False)]
    augmentation = at("augmentation_ms_per_image")
    if isinstance(augmentation, dict):
        fields += [(f"augmentation_ms_per_image.{key}", _SECONDS, True) for key in AUGMENTATION_STAGES]
    for side in sides:
        fields += [(f"train_step.{side}", _OBJECT, True), (f"train_step.{side}.img_per_s", _RATE, True),
                   (f"train_step.{side}.first_step_s", _SECONDS, False)]
    for probe in ("cold", "warm"):
        fields += [(f"loader_setup_s.{probe}", _OBJECT, at("loader_setup_s") not in (_ABSENT, None))]
        fields += [(f"loader_setup_s.{probe}.{key}", _SECONDS, True)
                   for key in ("train_first_batch_s", "val_first_pass_s")]
    by_side = at("fed_step_by_side")
    fed_sides = list(by_side) if isinstance(by_side, dict) else []
    for side in fed_sides:
        fields += [(f"fed_step_by_side.{side}", _OBJECT, True)] + [
            (f"fed_step_by_side.{side}.{key}", _RATE, True) for key in ("fed_img_per_s", "synthetic_img_per_s")]
    problems = [f"{field} side {side!r} is not a whole number of px"
                for field, keys in (("train_step", sides), ("fed_step_by_side", fed_sides))
                for side in keys if not side.isdigit()]
    skip_below: list[str] = []      # fields reported, or optional and absent: not their parts
    for name, (ok, what), needed in fields:
        value = at(name)
        if any(name.startswith(f"{parent}.") for parent in skip_below) or (
                not needed and value in (_ABSENT, None)):
            skip_below.append(name)
            continue
        if value is _ABSENT or not ok(value):
            skip_below.append(name)
            problems.append(f"{name} is {'missing' if value is _ABSENT else json.dumps(value)}, "
                            f"not {what}")
    return problems


def dataset_images(config: Config) -> tuple[int, int]:
    train, val = PUBLISHED_SPLIT_SIZES[config.dataset]
    return (min(train, config.train_limit or train), min(val, config.eval_limit or val))


def host_vcpus(config: Config) -> tuple[int, str]:
    """vCPUs of one node of `config`'s system, and where the count comes from: the
    descriptor's host_processor_vcpu_count; else its cores x processors per node (one
    thread per core: the descriptor does not say whether SMT is on, so this is a lower
    bound); a descriptor that names no host processor describes the machine it runs on,
    and then this machine's count is taken. A descriptor that names its processor but
    states neither is refused, naming the field to fill."""
    stated = load_descriptor(config.system_id)
    where = f"systems/{config.system_id}.json"

    def count(field: str) -> int:
        value = str(stated.get(field) or "").strip()
        return int(value) if value.isascii() and value.isdigit() else 0

    if count("host_processor_vcpu_count"):
        return count("host_processor_vcpu_count"), f"{count('host_processor_vcpu_count')} vCPUs ({where})"
    cores, sockets = count("host_processor_core_count"), count("host_processors_per_node")
    if cores and sockets:
        return cores * sockets, (f"{cores * sockets} vCPUs = {cores} cores x {sockets} processors "
                                 f"x 1 thread per core ({where} states no vCPU count nor SMT: a "
                                 "lower bound)")
    if not str(stated.get("host_processor_model_name") or "").strip():
        host = str(config.description.get("host_processor_vcpu_count") or "").strip()
        if host.isdigit():
            return int(host), (f"{host} vCPUs of this machine ({where} names no host processor: "
                               "it describes the machine it runs on)")
    raise ConfigError(
        f"{where} states no host_processor_vcpu_count, nor host_processor_core_count with "
        "host_processors_per_node, so the loader threads per process cannot be projected: fill "
        "host_processor_vcpu_count (the vCPUs of one node) in that file")


def project(config: Config, profile: dict[str, Any], profile_name: str,
            dp_efficiency: float | None = None, loader_profile: dict[str, Any] | None = None,
            loader_profile_name: str = "") -> Projection:
    processes = config.world_size
    if dp_efficiency is None:
        dp_efficiency = 1.0 if processes == 1 else DEFAULT_DP_EFFICIENCY
    if not 0 < dp_efficiency <= 1:
        raise ConfigError(f"dp_efficiency must be in (0, 1], not {dp_efficiency}")
    measured, settings = profile["measured"], profile["settings"]
    train_images, eval_images = dataset_images(config)
    plan = RunPlan.of(config, train_images)
    steps_per_epoch, total_steps, eval_every = plan.steps_per_epoch, plan.total_steps, plan.eval_every
    schedule = plan.side_runs()

    profile_recipe = settings.get("recipe") or config.recipe
    other_recipe = profile_recipe != config.recipe
    missing = sorted({side for side, _, _ in schedule if str(side) not in profile["train_step"]})
    step_seconds, inferred = {}, []
    for side in sorted({side for side, _, _ in schedule}):
        try:
            step_seconds[side], how = side_seconds(profile["train_step"], side)
        except ValueError:
            how = None
        if how:
            inferred.append(how)
    beyond = [side for side in missing if side not in step_seconds]
    if missing and (not other_recipe or beyond):
        measured_sides = sorted(map(int, profile["train_step"]))
        raise ProfileError(
            f"profile {profile_name} has no training-step rate at side(s) "
            f"{', '.join(map(str, beyond if other_recipe else missing))} px, which the "
            f"{config.recipe} schedule on {config.system_id} trains at"
            + (f" (more than {SIDE_MARGIN:.0%} outside its measured {measured_sides[0]}-"
               f"{measured_sides[-1]} px: not inferred)" if other_recipe else "")
            + "; " + BENCH_HINT.format(system=config.system_id))
    # SAM: every sam_interval-th step is two passes; the profile's per-side means hold
    # its own recipe's share of them (the bench times a multiple of sam_interval steps)
    profile_sam = _recipe_setting(profile, "sam_interval", 0) or 0
    sam_factor = sam_passes(config.sam_interval) / sam_passes(profile_sam)

    loader_source, loader_name = ((loader_profile, loader_profile_name) if loader_profile is not None
                                  else (profile, profile_name))
    needed_kind, kind = config.train_loader, loader_kind(loader_source)
    if kind != needed_kind:
        files = (f"profile {profile_name}" + (f" with loader_profile {loader_profile_name}"
                                             if loader_profile is not None else ""))
        raise ProfileError(
            f"the {config.recipe} recipe loads its training images with the {needed_kind} loader, "
            f"but the loader figures of {loader_name} were measured with the {kind} loader "
            f"({files}): measure the {needed_kind} loader with `{bench_command(config)}` "
            f"and pass loader_profile=loader-{config.recipe}.json")

    vcpus, vcpu_source = host_vcpus(config)
    threads = max(1, min(config.workers_per_device, vcpus // config.processes_per_node))
    loader = loader_source["loader"]
    per_thread = loader["img_per_s"] / loader["threads"]
    loader_rate = per_thread * threads * processes
    costs = loader_costs(profile, config.train_resolution)
    # the loop's own work around each step (normalising and resizing the batch, the EMA
    # update), measured per step by the bench at the smallest side
    overhead = profile.get("loop_overhead") or {}
    loop_s = overhead.get("normalize_resize_s", 0.0) + overhead.get("ema_s", 0.0)
    # normalising and resizing scale with the batch the bench measured; the EMA is per step
    loop_per_image = (overhead.get("normalize_resize_s", 0.0) / settings.get("batch_per_device", config.batch_per_device)
                      + overhead.get("ema_s", 0.0) / config.batch_per_device)

    setup = profile.get("setup_s") or {}
    # measured in fresh processes by the bench: the loaders' set-up after run_start
    loader_probe = (profile.get("loader_setup_s") or {}).get("warm" if config.warmup else "cold")
    eval_rate = profile["eval_img_per_s"] * processes

    # the step's rate of the whole system at each side, the loader's work it does not hide
    # and the loop's own work included
    step_rates = {side: processes * dp_efficiency / (step_seconds[side] * sam_factor
                                                     + loader_cost_at(costs, side) + loop_per_image)
                  for side in step_seconds}

    def parts_until(stop: int) -> list[Part]:
        """The run's parts when it ends after step `stop` (an evaluation step, or the budget)."""
        parts = []
        for side, first, steps in schedule:
            steps = min(steps, stop - first)
            if steps <= 0:
                break
            unhidden = loader_cost_at(costs, side)
            step_rate = step_rates[side]
            rate, limit = ((step_rate, "step + loader" if unhidden else "step") if step_rate <= loader_rate
                           else (loader_rate, "loader"))
            images = steps * config.global_batch_size
            parts.append(Part(f"train {side} px, epochs {first / steps_per_epoch:.3g}-"
                              f"{(first + steps) / steps_per_epoch:.3g}", images, rate, limit,
                              images / rate))
        count = plan.evaluations_until(stop)
        parts.append(Part(f"evaluation, {count} x {eval_images:,} images", count * eval_images,
                          eval_rate, "eval", count * eval_images / eval_rate))
        # with the warm-up, the first step at each side is paid before run_start
        first_steps = 0.0 if config.warmup else sum(
            max(0.0, profile["train_step"][str(side)].get("first_step_s", 0.0)
                - config.batch_per_device / profile["train_step"][str(side)]["img_per_s"])
            for side, first, _ in schedule if first < stop and str(side) in profile["train_step"])
        if loader_probe:
            in_run = loader_probe["train_first_batch_s"] + loader_probe["val_first_pass_s"]
            what = ("in-run set-up: the loaders' first batch and first evaluation pass "
                    + ("(pipelines compiled by the warm-up before run_start)" if config.warmup
                       else "(FFCV compiling: warmup=false), first step at each side"))
        else:
            in_run = setup.get("in_run_first_epoch_extra", 0.0) + setup.get("first_eval_extra", 0.0)
            what = "in-run set-up: FFCV first epoch and first evaluation, first step at each side"
        parts.append(Part(what, 0, 0.0, "set-up", in_run + first_steps))
        restarts = math.ceil(stop / steps_per_epoch) - 1     # the first start is in the set-up
        if loader.get("epoch_start_s") is not None and restarts > 0:
            parts.append(Part(f"the loader's start at each of {restarts} later epochs, "
                              f"{loader['epoch_start_s']:.2f} s each", 0, 0.0, "loader",
                              restarts * loader["epoch_start_s"]))
        return parts

    parts = parts_until(total_steps)
    last_regular = plan.last_regular_evaluation()
    early = None
    if last_regular:
        early = (plan.epoch(last_regular), sum(p.seconds for p in parts_until(last_regular)) / 60)

    warnings = []
    for key in ("batch_per_device", "precision", "amp_dtype", "train_resolution", "eval_resolution"):
        if key in settings and settings[key] != getattr(config, key):
            warnings.append(f"the profile was measured with {key}={settings[key]}, the projected "
                            f"run uses {key}={getattr(config, key)}: its rates may not apply")
    if settings.get("system") not in (None, config.system_id):
        warnings.append(f"the profile was measured for system {settings.get('system')} on "
                        f"{measured.get('device_name', '?')}, not on {config.system_id}: this "
                        f"projects {config.system_id}'s schedule at that machine's per-process speed")
    if measured.get("device") and measured["device"] != config.device_type:
        warnings.append(f"the profile was measured on {measured['device']}, {config.system_id} "
                        f"runs on {config.device_type}")
    if not setup and not loader_probe:
        warnings.append("the profile has no in-run set-up figures (setup_s): FFCV's first-epoch "
                        "compilation is not counted")

    price = config.price_usd_per_hour
    assumptions = [
        f"profile {profile_name}: measured {measured.get('date', '?')} on {measured.get('host', '?')}, "
        f"device {measured.get('device_name', '?')} ({measured.get('device', '?')}), torch "
        f"{measured.get('torch', '?')}; rates are per process",
        f"processes: {processes} ({config.num_nodes} node(s) x {config.processes_per_node}), "
        f"global batch {config.global_batch_size}",
        f"data-parallel efficiency {dp_efficiency:g} "
        + ("(one process: none needed)" if processes == 1 else
           "(assumed, not measured; pass dp_efficiency= to change it)"),
        f"loader threads per process: {threads} = min(workers_per_device {config.workers_per_device}, "
        f"{vcpu_source} / {config.processes_per_node} processes); the "
        f"{'loader profile' if loader_profile is not None else 'profile'}'s loader ran "
        f"{loader['threads']} threads at {loader['img_per_s']:,.0f} img/s, scaled per thread",
        "the loader's work the step does not hide, per image per process: "
        + ("; ".join(f"{cost * 1e3:.3g} ms at {side} px" for side, cost in sorted(costs.items()))
           + (", in between linear in the side" if len(costs) > 1 else ", at every side")
           + " (the bench's step fed by the loader against the synthetic step"
           + (" timed in turns with it)" if profile.get("fed_step_by_side") else " of its first row)")
           if costs else "not in the profile, not counted"),
        (f"the loop's own work around each step: {loop_s * 1e3:.3g} ms (normalising and resizing "
         f"the batch, the EMA update; the profile's loop_overhead at {overhead.get('side')} px)"
         if overhead else "the loop's own work around each step: not in the profile, not counted"),
        f"epochs from the {config.recipe} recipe on {config.system_id}: {config.train_epochs:g} "
        f"({config.epochs:g} x scale_schedule_ratio {config.scale_schedule_ratio:g}), "
        f"{steps_per_epoch} steps per epoch from {train_images:,} training images, "
        f"{total_steps} steps; the table trains the whole budget"
        + ("" if early is None else
           f"; the run ends earlier when the target is reached at the last evaluation before the "
           f"budget's end (epoch {early[0]:.4g}), where the published Mild runs reached it"),
        f"evaluation every {config.eval_every_epochs:g} epochs ({eval_every} steps): "
        f"{plan.evaluations_until(total_steps)} evaluations of {eval_images:,} images, scaling with processes",
        "not counted: set-up outside the timed region (data conversion, launch, model build, "
        "cache clearing) and the gaps between runs",
        (f"price ${price:g}/hour for the whole system: {config.price_source or 'source not given'}, "
         f"{config.price_date or 'date not given'}" if price else
         "no price: pass price_usd_per_hour= (with price_source= and price_date=)"),
    ]
    if other_recipe:
        assumptions.append(
            f"the profile's step rates were measured with recipe {profile_recipe}, the run is "
            f"{config.recipe}: step time x {sam_factor:.4g} for SAM ({sam_passes(config.sam_interval):.4g} "
            f"forward-backward passes a step on average, sam_interval {config.sam_interval}, over "
            f"{sam_passes(profile_sam):.4g}, sam_interval {profile_sam}); the other step methods "
            "(MixUp, ColOut, stochastic depth, which computes every branch in sample mode) not adjusted")
    if inferred:
        assumptions.append("sides the profile did not measure, inferred from the step time per image "
                           "of the nearest measured sides: " + "; ".join(inferred))
    augmentation = loader_source.get("augmentation_ms_per_image")
    if loader_profile is not None:
        lm = loader_source.get("measured") or {}
        ls = loader_source.get("settings") or {}
        assumptions.append(
            f"loader figures (loader, augmentation_ms_per_image) from loader_profile {loader_profile_name}: "
            f"measured {lm.get('date', '?')} on {lm.get('host', '?')} (device {lm.get('device_name', '?')}), "
            f"recipe {ls.get('recipe', '?')}, the {kind} loader at {loader.get('resolution', '?')} px; the "
            f"step, evaluation and set-up figures from {profile_name}")
    if augmentation:
        assumptions.append(
            "CPU work per image of the loader, one thread (loader profile's bench): "
            f"decode {augmentation['decode']:.3g} ms, crop + flip {augmentation['crop_flip']:.3g} ms, "
            f"RandAugment {augmentation['randaugment']:.3g} ms, to tensor {augmentation['to_tensor']:.3g} ms "
            f"= {augmentation['total']:.3g} ms ({1e3 / augmentation['total']:,.0f} img/s a thread at most, "
            f"on {augmentation.get('images', '?')} images of {augmentation.get('source', 'its data set')})"
            if augmentation["total"] > 0 else "CPU work per image of the loader: 0 ms measured")
    if loader_profile is not None and loader.get("resolution") not in (None, config.train_resolution):
        warnings.append(f"the loader figures were measured at {loader['resolution']} px, the run's loader "
                        f"crops to {config.train_resolution} px: the per-thread rate scales with the "
                        "images decoded and augmented, so the loader limit shows its shape, not its size")

    summary: list[str] = []
    if kind == "torchvision" or loader_profile is not None:
        train_parts = [part for part in parts if part.what.startswith("train ")]
        limited = [part for part in train_parts if part.limited_by == "loader"]
        fastest = max(step_rates.values())
        need = math.ceil(fastest / processes / per_thread)
        all_vcpus = vcpus // config.processes_per_node
        summary = [
            f"the {kind} loader: {per_thread:,.1f} img/s per thread (measured: {loader['threads']} "
            f"thread(s) at {loader['img_per_s']:,.1f} img/s), x {threads} threads per process x "
            f"{processes} processes = {loader_rate:,.0f} img/s for the whole system",
            f"the step alone: {min(step_rates.values()):,.0f} to {fastest:,.0f} img/s for the whole "
            f"system over the sides of the run",
            (f"loader-limited: {len(limited)} of {len(train_parts)} training parts ("
             + ", ".join(part.what.split(',')[0].removeprefix('train ') for part in limited)
             + f"), {sum(p.seconds for p in limited) / sum(p.seconds for p in train_parts):.0%} of the "
             f"training time" if limited else
             f"loader-limited: none of the {len(train_parts)} training parts (step-limited throughout)"),
            f"threads per process to feed the step at its fastest side: {need}; this system has "
            f"{threads} (workers_per_device {config.workers_per_device}, {all_vcpus} vCPUs per process); "
            f"every vCPU a loader thread: {per_thread * all_vcpus * processes:,.0f} img/s",
        ]
        from . import published
        rate = published.throughput_for(config.system_id, config.recipe)
        training = sum(p.images for p in train_parts) / sum(p.seconds for p in train_parts)
        summary.append(f"the loader limits the step at its fastest side below "
                       f"{fastest / (threads * processes):,.1f} img/s per thread, at every side "
                       f"below {min(step_rates.values()) / (threads * processes):,.1f} "
                       f"({threads} threads x {processes} processes)")
        summary.append(f"projected training {training:,.0f} img/s"
                       + (f" against the published {rate.label} {rate.img_per_s:,.0f} img/s "
                          f"({training / rate.img_per_s:.2f}x; were it loader-bound, "
                          f"{rate.img_per_s / (threads * processes):,.1f} img/s per thread of "
                          f"{threads} x {processes})" if rate else ""))
    return Projection(config.system_id, config.recipe, processes, parts, config.runs, price,
                      assumptions, warnings, early, summary)


def format_projection(projection: Projection) -> str:
    from . import published

    p = projection
    lines = [f"# Projection: recipe {p.recipe} on {p.system}, {p.processes} process(es)", "",
             "| part | images | img/s (whole system) | limited by | minutes |",
             "|---|---|---|---|---|"]
    for part in p.parts:
        rate = f"{part.img_per_s:,.0f}" if part.img_per_s else "—"
        images = f"{part.images:,}" if part.images else "—"
        lines.append(f"| {part.what} | {images} | {rate} | {part.limited_by} | {part.seconds / 60:.3f} |")

    def cost(value: float | None) -> str:
        return "—" if value is None else f"${value:,.2f}"

    lines += [f"| training at every side, on average | | {p.training_img_per_s:,.0f} | | |",
              f"| **one run (run_start→run_stop), whole budget** | | | | **{p.run_minutes:.3f}** |",
              f"| **campaign of {p.runs} runs** | | | | **{p.campaign_minutes:.3f}** |"]
    if p.early_stop:
        epoch, minutes = p.early_stop
        lines += [f"| one run reaching the target at the evaluation of epoch {epoch:.4g} | | | | {minutes:.3f} |",
                  f"| campaign of {p.runs} such runs | | | | {minutes * p.runs:.3f} |"]
    times = [t for t in published.times_for(p.system) if p.recipe in t.label.lower()]
    rate = published.throughput_for(p.system, p.recipe)
    lines += [f"| *published* {t.label}, to {t.target:.1%} top-1 ({t.source}) | | | | {t.minutes:g} |"
              for t in times]
    if rate:
        lines.append(f"| *published* {rate.label} training throughput ({rate.source}) | | "
                     f"{rate.img_per_s:,.0f} | | |")
    lines += ["", f"Cost: {cost(p.run_cost_usd)} per run, {cost(p.campaign_cost_usd)} for the campaign "
              "(whole budget)."]
    if times or rate:
        lines.append("Rows marked *published* were not measured here: the figures of the write-ups "
                     "for this system, beside the projection.")
    if p.loader_summary:
        lines += ["", "Where the loader limits:"] + [f"- {line}" for line in p.loader_summary]
    lines += ["", "Assumptions:"] + [f"- {a}" for a in p.assumptions]
    if p.warnings:
        lines += ["", "**Warnings:**"] + [f"- {w}" for w in p.warnings]
    return "\n".join(lines) + "\n"


def main(words: list[str]) -> int:
    overrides = parse_overrides(words)
    profile_path = overrides.pop("profile", "")
    loader_path = overrides.pop("loader_profile", "")
    dp = overrides.pop("dp_efficiency", None)
    config = resolve(None, overrides)
    if not profile_path:
        sides = sorted(set(RunPlan.of(config, dataset_images(config)[0]).sides()))
        raise ProfileError(
            f"no profile for {config.system_id}: a projection needs measured figures, never "
            f"guessed ones: the per-process training-step rate at {', '.join(map(str, sides))} px, "
            f"the evaluation rate at {config.eval_resolution} px, the FFCV loader rate and the "
            "in-run set-up times; " + BENCH_HINT.format(system=config.system_id))
    try:
        dp_efficiency = float(dp) if dp is not None else None
    except ValueError:
        raise ConfigError(f"dp_efficiency takes a number in (0, 1], not {dp!r}") from None
    profile = load_profile(Path(profile_path), config.system_id)
    loader_profile = load_profile(Path(loader_path), config.system_id) if loader_path else None
    print(format_projection(project(config, profile, profile_path, dp_efficiency,
                                    loader_profile, loader_path)))
    return 0
