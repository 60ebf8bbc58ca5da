"""A projection in words: its assumptions, its warnings, where the loader limits, and the
table `python -m submission project` prints."""
from __future__ import annotations

from .. import inventory, published
from ..bench_profile import RATE_SETTINGS, BenchProfile
from ..config import Config
from ..loader_kinds import kind_of
from ..loader_threads import LoaderThreads
from ..run_plan import RunPlan
from .rates import Rates, compiled_rates, sam_passes
from .result import TRAINING, Part, Projection


def _or_unknown(value: object) -> object:
    return "?" if value is None else value


def same_device(config: Config, profile: BenchProfile) -> bool | None:
    """Whether the profile was measured on the GPU model the system trains on; None where
    either names none (a CPU run, or system=local on a machine without a GPU)."""
    measured = profile.measured.device_name
    accelerator = config.descriptor.accelerator_model_name
    if not measured or not accelerator or config.device_type != "cuda":
        return None
    return inventory.same_model(measured, accelerator)


def _measured_lines(config: Config, profile: BenchProfile, loader_profile: BenchProfile | None,
                    rates: Rates) -> list[str]:
    """What the rates come from: the profile, the processes, the loader's threads, the
    per-image costs besides the step."""
    m, loader, costs = profile.measured, rates.loader, rates.loader_costs
    overhead = profile.loop_overhead
    in_turns = all(pair.in_turns for pair in profile.fed_step_by_side.values())
    profiled = profile.settings.get("system")
    taken_as = (f"; {m.device_name} is {config.system_id}'s GPU, so its rates are taken as "
                f"{config.system_id}'s (measured for system {profiled})"
                if same_device(config, profile) and profiled != config.system_id else "")
    return [
        f"profile {profile.file}: measured {_or_unknown(m.date)} on {_or_unknown(m.host)}, device "
        f"{_or_unknown(m.device_name)} ({_or_unknown(m.device)}), torch {_or_unknown(m.torch)}; "
        f"rates are per process{taken_as}",
        f"processes: {rates.processes} ({config.num_nodes} node(s) x {config.processes_per_node}), "
        f"global batch {config.global_batch_size}",
        f"data-parallel efficiency {rates.dp_efficiency:g} "
        + ("(one process: none needed)" if rates.processes == 1 else
           "(assumed, not measured; pass dp_efficiency= to change it)"),
        (f"loader threads per process: {_threads_words(loader.threads)}{_hyperthreads(config, loader.count)}; "
         f"the {'loader profile' if loader_profile is not None else 'profile'}'s loader: "
         f"{loader.curve.words(loader.count)}"
         if loader.scales_with_threads else
         f"the device loader: {loader.figures.img_per_s:,.0f} img/s per process, as the "
         f"{'loader profile' if loader_profile is not None else 'profile'} measured it (it decodes "
         "on the device; its threads only gather bytes, so its rate is not scaled by them)"),
        "the loader's work the step does not hide, per image per process: "
        + ("; ".join(f"{cost * 1e3:.3g} ms at {side} px" for side, cost in sorted(costs.items()))
           + (", in between linear in the side" if len(costs) > 1 else ", at every side")
           + " (the bench's step fed by the loader against the synthetic step"
           + (" timed in turns with it)" if in_turns else " of its first row)")
           if costs else "not in the profile, not counted"),
        (f"the loop's own work around each step: {rates.loop_s * 1e3:.3g} ms (normalising and "
         f"resizing the batch, the EMA update; the profile's loop_overhead at {overhead.side} px)"
         if overhead else "the loop's own work around each step: not in the profile, not counted"),
    ]


def _threads_words(threads: LoaderThreads) -> str:
    """The count and where it comes from; a given count that would not fit, and what fits."""
    if threads.problem:
        return (f"{threads.threads}, what fits: a campaign would refuse workers_per_device as given "
                f"({threads.problem.split('; pass')[0]})")
    return f"{threads.threads} ({threads.origin if threads.derived else 'workers_per_device from ' + threads.origin})"


def _hyperthreads(config: Config, threads: int) -> str:
    """Where the descriptor states physical cores: the threads of a process beyond its cores."""
    stated = config.descriptor
    cores = (stated.host_processor_core_count or 0) * (stated.host_processors_per_node or 0)
    per_process = cores // config.processes_per_node
    if not per_process or threads <= per_process or (stated.host_vcpus or 0) <= cores:
        return ""
    return (f" ({threads - per_process} of them beyond the {per_process} physical cores a process has: "
            "on hyperthreads)")


def _run_lines(config: Config, plan: RunPlan, eval_images: int, train_images: int,
               early: tuple[float, float] | None) -> list[str]:
    """What the run is: its epochs, steps and evaluations, what is not counted, its price."""
    price = config.price_usd_per_hour
    return [
        f"epochs from the {config.recipe} recipe on {config.system_id}: {config.train_epochs:g} "
        f"({config.epochs:g} x scale_schedule_ratio {config.scale_schedule_ratio:g}), "
        f"{plan.steps_per_epoch} steps per epoch from {train_images:,} training images, "
        f"{plan.total_steps} steps; the table trains the whole budget"
        + ("" if early is None else
           f"; the run ends earlier when the target is reached at the last evaluation before the "
           f"budget's end (epoch {early[0]:.4g}), where the published Mild runs reached it"),
        f"evaluation every {config.eval_every_epochs:g} epochs ({plan.eval_every} steps): "
        f"{plan.evaluations_until(plan.total_steps)} evaluations of {eval_images:,} images, "
        "scaling with processes",
        "not counted: set-up outside the timed region (data conversion, launch, model build, "
        "cache clearing) and the gaps between runs",
        (f"price ${price:g}/hour for the whole system: {config.price_source or 'source not given'}, "
         f"{config.price_date or 'date not given'}" if price else
         "no price: pass price_usd_per_hour= (with price_source= and price_date=)"),
    ]


def _adjustment_lines(config: Config, rates: Rates) -> list[str]:
    """How a profile of another recipe was adjusted: SAM, the sides it lacks."""
    step, lines = rates.step, []
    if step.other_recipe(config):
        lines.append(
            f"the profile's step rates were measured with recipe {step.profile_recipe}, the run is "
            f"{config.recipe}: step time x {step.sam_factor:.4g} for SAM "
            f"({sam_passes(config.sam_interval):.4g} forward-backward passes a step on average, "
            f"sam_interval {config.sam_interval}, over {sam_passes(step.profile_sam):.4g}, "
            f"sam_interval {step.profile_sam}); the other step methods (MixUp, ColOut, stochastic "
            "depth, which computes every branch in sample mode) not adjusted")
    if step.compiled:
        lines.append(f"the step compiled{' + CUDA graphs' if step.cuda_graphs else ''}, as the profile "
                     f"measured it at {', '.join(map(str, step.measured_sides))} px: a run with compile=true"
                     f"{' cuda_graphs=true' if step.cuda_graphs else ''}, every side compiled by the warm-up "
                     "before run_start")
    if step.inferred:
        sides_by_how: dict[str, list[int]] = {}
        for side, how in step.inferred.items():
            sides_by_how.setdefault(how, []).append(side)
        lines.append("sides the profile did not measure, inferred from the step time per image "
                     "of the nearest measured sides: "
                     + "; ".join(f"{', '.join(map(str, sides))} px {how}" for how, sides in sides_by_how.items()))
    return lines


def _loader_lines(profile: BenchProfile, loader_profile: BenchProfile | None,
                  rates: Rates) -> list[str]:
    """Where the loader figures come from, and the loader's CPU work per image."""
    source, loader, lines = rates.loader.profile, rates.loader.figures, []
    if loader_profile is not None:
        lm = loader_profile.measured
        lines.append(
            f"loader figures (loader, augmentation_ms_per_image) from loader_profile "
            f"{loader_profile.file}: measured {_or_unknown(lm.date)} on {_or_unknown(lm.host)} "
            f"(device {_or_unknown(lm.device_name)}), recipe "
            f"{_or_unknown(loader_profile.settings.get('recipe'))}, the {rates.loader.kind} loader at "
            f"{_or_unknown(loader.resolution)} px; the step, evaluation and set-up figures from "
            f"{profile.file}")
    work = source.augmentation_ms_per_image
    if work:
        lines.append(
            "CPU work per image of the loader, one thread (loader profile's bench): "
            f"decode {work.decode:.3g} ms, crop + flip {work.crop_flip:.3g} ms, "
            f"{work.augmentation or 'RandAugment'} {work.randaugment:.3g} ms, to tensor {work.to_tensor:.3g} ms "
            f"= {work.total:.3g} ms ({1e3 / work.total:,.0f} img/s a thread at most, "
            f"on {_or_unknown(work.images)} images of {work.source or 'its data set'})"
            if work.total > 0 else "CPU work per image of the loader: 0 ms measured")
    return lines


def assumptions(config: Config, plan: RunPlan, profile: BenchProfile,
                loader_profile: BenchProfile | None, rates: Rates, images: tuple[int, int],
                early: tuple[float, float] | None) -> list[str]:
    train_images, eval_images = images
    return (_measured_lines(config, profile, loader_profile, rates)
            + _run_lines(config, plan, eval_images, train_images, early)
            + _adjustment_lines(config, rates) + _loader_lines(profile, loader_profile, rates))


def warnings(config: Config, profile: BenchProfile, loader_profile: BenchProfile | None) -> list[str]:
    """Where the profile's figures may not apply to the projected run."""
    settings, measured, found = profile.settings, profile.measured, []
    for key in RATE_SETTINGS:
        if key in settings and settings[key] != getattr(config, key):
            found.append(f"the profile was measured with {key}={settings[key]}, the projected "
                         f"run uses {key}={getattr(config, key)}: its rates may not apply")
    # a profile of another system measured on the system's GPU model has its per-process
    # speed (the loader is projected from the system's own vCPUs)
    same = same_device(config, profile)
    if settings.get("system") not in (None, config.system_id) and not same:
        system = (f"{config.system_id}'s {config.descriptor.accelerator_model_name}"
                  if same is False else config.system_id)
        found.append(f"the profile was measured for system {_or_unknown(settings.get('system'))} on "
                     f"{_or_unknown(measured.device_name)}, not on {system}: this projects "
                     f"{config.system_id}'s schedule at that machine's per-process speed")
    if measured.device and measured.device != config.device_type:
        found.append(f"the profile was measured on {measured.device}, {config.system_id} "
                     f"runs on {config.device_type}")
    if config.compile and not profile.compiled_img_per_s:
        found.append("the run compiles its step (compile=true), the profile measured the eager step only: "
                     "this projects the eager step (`bench compile=true` measures the compiled one)")
    if compiled_rates(config, profile) and settings.get("cuda_graphs") and config.world_size > 1:
        found.append(f"the profile's step was compiled with CUDA graphs, which this harness replays in a "
                     f"run of one process only (cuda_graphs=true is refused with {config.world_size}): a run "
                     f"on {config.system_id} compiles without them, and may be slower than projected")
    if profile.setup_s is None and profile.loader_setup_s is None:
        found.append("the profile has no in-run set-up figures (setup_s): FFCV's first-epoch "
                     "compilation is not counted")
    resolution = (loader_profile.loader.resolution if loader_profile is not None else None)
    if resolution not in (None, config.train_resolution):
        found.append(f"the loader figures were measured at {resolution} px, the run's loader "
                     f"crops to {config.train_resolution} px: the per-thread rate scales with the "
                     "images decoded and augmented, so the loader limit shows its shape, not its size")
    return found


def loader_summary(config: Config, rates: Rates, parts: list[Part],
                   loader_profile: BenchProfile | None) -> list[str]:
    """Where the loader limits the run: for a torchvision loader, or figures from
    loader_profile=; else none."""
    loader = rates.loader
    if not kind_of(loader.kind).pil_workers and loader_profile is None:
        return []
    train_parts = [part for part in parts if part.kind == TRAINING]
    limited = [part for part in train_parts if part.limited_by == "loader"]
    fastest, slowest = max(rates.step_rates.values()), min(rates.step_rates.values())
    threads, processes, curve = loader.count, rates.processes, loader.curve
    all_vcpus = loader.vcpus // config.processes_per_node
    rate = published.throughput_for(config.system_id, config.recipe)
    training = sum(p.images for p in train_parts) / sum(p.seconds for p in train_parts)
    feeding = next((t for t in range(1, max(all_vcpus, curve.largest) * 4 + 1)
                    if curve.at(t) * processes >= fastest), None)
    return [
        f"the {loader.kind} loader: {loader.per_process:,.1f} img/s per process at {threads} threads "
        f"(measured: {loader.figures.threads} thread(s) at {loader.figures.img_per_s:,.1f} img/s; "
        f"{curve.largest} the most measured), x {processes} processes = {rates.loader_rate:,.0f} img/s "
        "for the whole system",
        f"the step alone: {slowest:,.0f} to {fastest:,.0f} img/s for the whole system over the "
        "sides of the run",
        (f"loader-limited: {len(limited)} of {len(train_parts)} training parts ("
         + ", ".join(f"{part.side} px" for part in limited)
         + f"), {sum(p.seconds for p in limited) / sum(p.seconds for p in train_parts):.0%} of the "
         f"training time" if limited else
         f"loader-limited: none of the {len(train_parts)} training parts (step-limited throughout)"),
        f"threads per process to feed the step at its fastest side: "
        f"{feeding or 'none along what was measured and assumed'}; this system has {threads} "
        f"({all_vcpus} vCPUs per process); every vCPU a loader thread: "
        f"{curve.at(all_vcpus) * processes:,.0f} img/s",
        f"the loader limits the step at its fastest side below "
        f"{fastest / (threads * processes):,.1f} img/s per thread, at every side below "
        f"{slowest / (threads * processes):,.1f} ({threads} threads x {processes} processes)",
        f"projected training {training:,.0f} img/s"
        + (f" against the published {rate.label} {rate.img_per_s:,.0f} img/s "
           f"({training / rate.img_per_s:.2f}x; were it loader-bound, "
           f"{rate.img_per_s / (threads * processes):,.1f} img/s per thread of "
           f"{threads} x {processes})" if rate else ""),
    ]


def energy_note(profile: BenchProfile) -> str:
    """Where a projection's energy comes from, or why it has none."""
    power = profile.power
    if power is None:
        return ("not projected: the profile holds no power figures (a bench of this version on a "
                "GPU with NVML, or a CPU host with readable RAPL counters, measures them)")
    if power.watts is None:
        return f"not projected: the profile's power was not measured ({power.not_measured})"
    return (f"at the profile's {power.watts:.0f} W per process training at {power.side} px "
            f"({power.source}; measured on {profile.measured.device_name}), applied to every part "
            "of the run and to each process: a device of another kind draws other watts")


def _cost(value: float | None) -> str:
    return "—" if value is None else f"${value:,.2f}"


def _table(p: Projection) -> list[str]:
    lines = ["| part | images | img/s (whole system) | limited by | minutes |", "|---|---|---|---|---|"]
    for part in p.parts:
        rate = f"{part.img_per_s:,.0f}" if part.img_per_s else "—"
        images = f"{part.images:,}" if part.images else "—"
        lines.append(f"| {part.what} | {images} | {rate} | {part.limited_by} | {part.seconds / 60:.3f} |")
    lines += [f"| training at every side, on average | | {p.training_img_per_s:,.0f} | | |",
              f"| **one run (run_start→run_stop), whole budget** | | | | **{p.run_minutes:.3f}** |",
              f"| **campaign of {p.runs} runs** | | | | **{p.campaign_minutes:.3f}** |"]
    if p.early_stop:
        epoch, minutes = p.early_stop
        lines += [f"| one run reaching the target at the evaluation of epoch {epoch:.4g} | | | | {minutes:.3f} |",
                  f"| campaign of {p.runs} such runs | | | | {minutes * p.runs:.3f} |"]
    return lines


def format_projection(p: Projection) -> str:
    times = [t for t in published.times_for(p.system) if p.recipe in t.label.lower()]
    rate = published.throughput_for(p.system, p.recipe)
    lines = [f"# Projection: recipe {p.recipe} on {p.system}, {p.processes} process(es)", ""] + _table(p)
    lines += [f"| *published* {t.label}, to {t.target:.1%} top-1 ({t.source}) | | | | {t.minutes:g} |"
              for t in times]
    if rate:
        lines.append(f"| *published* {rate.label} training throughput ({rate.source}) | | "
                     f"{rate.img_per_s:,.0f} | | |")
    lines += [f"| *published*, *another recipe* MLPerf {r.round} closed, {r.system}: {r.hardware}, to "
              f"{r.target:.1%} top-1 ({r.source}) | | | | {r.minutes:g} |" for r in p.closed_records]
    lines += ["", f"Cost: {_cost(p.run_cost_usd)} per run, {_cost(p.campaign_cost_usd)} for the "
              "campaign (whole budget).",
              (f"Energy: {p.run_kwh:.4g} kWh per run, {p.campaign_kwh:.4g} for the campaign (whole "
               f"budget), {p.energy_note}." if p.run_kwh is not None else f"Energy: {p.energy_note}.")]
    if times or rate:
        lines.append("Rows marked *published* were not measured here: the figures of the write-ups "
                     "for this system, beside the projection.")
    if p.closed_records:
        lines.append("Rows marked *another recipe* are MLPerf results on this system's GPUs that ran "
                     f"{published.ANOTHER_RECIPE}: beside the projection, not joined to it.")
    if p.loader_lift:
        lines += ["", f"Loader threads: {p.loader_lift}."]
    if p.loader_summary:
        lines += ["", "Where the loader limits:"] + [f"- {line}" for line in p.loader_summary]
    lines += ["", "Assumptions:"] + [f"- {a}" for a in p.assumptions]
    if p.warnings:
        lines += ["", "**Warnings:**"] + [f"- {w}" for w in p.warnings]
    return "\n".join(lines) + "\n"
