"""`python -m submission tradeoff`: run a grid's points one after another, then write its report.

    tradeoff [grid=NAME|FILE] [system=NAME] [key=value ...]   every point not finished, then the report
    tradeoff grid=NAME point=K [...]       point K alone (one SLURM array task: scripts/slurm/run.sbatch)
    tradeoff grid=NAME point=K redo=true   point K trained again, its old run kept under attempts/
    tradeoff grid=NAME list=true [...]     the points with their numbers, and the SLURM array command
    tradeoff grid=NAME report=true [...]   the report of the points finished so far, running none
    tradeoff published                     the write-ups' ImageNet points, drawn per system

Its options are declared in submission/options.py (`python -m submission tradeoff --help`).

The default grid is `embedded` (Fashion-MNIST) without data_dir, `imagenet` with it. On an
ImageNet grid, profile=FILE [profile_<recipe>=FILE ...] [loader_profile=FILE] [dp_efficiency=F]
[systems=A,B] also projects every point's minutes and dollars to each system with accelerators
(or those named): tradeoff/projected.py. The report flags runs whose minutes look disturbed
(spread_limit=F, default 1.5: slower than F times their point's fastest seed, or their
configuration's other budgets per unit of budget), each with the command that redoes it.
"""
from __future__ import annotations

import fcntl
import time
from pathlib import Path
from typing import TYPE_CHECKING

from .. import published, runs, said, system_descriptor
from ..config import Config, in_repository, parse_overrides
from ..costs import usd
from ..errors import ConfigError
from ..options import TradeoffOptions, words_of
from ..preflight import launch_plan, resolve_here
from ..run_folder import ResultsRoot
from ..system_descriptor import SystemDescriptor
from ..system_json import fill_from_host
from . import grid_report
from . import points as grid_points
from .grid import Grid, GridPoint, load_grid
from .grid_progress import GridProgress

if TYPE_CHECKING:       # read only with profile= (it imports the projection)
    from .projected_points import ProjectionInputs


def main(options: TradeoffOptions, words: list[str]) -> int:
    if words[:1] == ["published"]:
        if options != TradeoffOptions():
            raise ConfigError("tradeoff published takes only results_dir=")
        return draw_published(parse_overrides(words[1:]))
    given = parse_overrides([w for w in words if not w.startswith("profile_")])
    grid = load_grid(options.grid or _default_grid(given))
    points = grid.points()
    configs = {p.index: grid_points.point_config(grid, p, given) for p in points}
    first = configs[points[0].index]
    projecting = _refuse_options(grid, first, options, _recipe_profiles(words))
    folder = grid_points.grid_folder(grid, first)
    if options.list:
        print(listing(grid, points, folder, words_of(options) + words))
        return 0
    chosen = _chosen(points, options.point)
    if options.redo and options.point is None:
        raise ConfigError("redo=true trains one point again: name it with point=K (tradeoff.md's "
                          "Disturbed timings give the command for each flagged run; list=true numbers them)")
    if options.report:
        print(f"[tradeoff] report: {write(grid, configs, folder, options.spread_limit, projecting, given)}",
              flush=True)
        return 0
    problems = launch_plan(first).problems     # what this machine cannot run (trackers included)
    if problems:
        raise ConfigError(f"cannot run grid {grid.name}:\n  - " + "\n  - ".join(problems))
    _refuse_busy(grid, chosen, folder)
    grid_points.record_grid(grid, first, folder, given)
    try:
        with runs.terminate_as_interrupt(), said.once_each():
            run_points(grid, chosen, configs, folder, len(points), options.redo)
    except runs.Busy:                   # another command writes this grid: it writes the report
        raise
    except BaseException:               # a point that fails or is stopped leaves the others' report
        try:
            print(f"[tradeoff] report: {write(grid, configs, folder, options.spread_limit, projecting, given)}",
                  flush=True)
        except Exception as exc:        # noqa: BLE001 - said, so that the point's own error stays the one raised
            print(f"[tradeoff] the report of the finished points could not be written: {exc}", flush=True)
        raise
    print(f"[tradeoff] report: {write(grid, configs, folder, options.spread_limit, projecting, given)}", flush=True)
    return 0


def _recipe_profiles(words: list[str]) -> dict[str, str]:
    """profile_<recipe>=FILE words: a recipe's own profile, beside profile= (any recipe)."""
    found = {}
    for word in words:
        key, sep, value = word.partition("=")
        if key.startswith("profile_"):
            if not sep or not value:
                raise ConfigError(f"{key} takes a file: {key}=FILE (a bench profile of recipe "
                                  f"{key.removeprefix('profile_')})")
            found[key] = value
    return found


def _refuse_options(grid: Grid, first: Config, options: TradeoffOptions,
                    by_recipe: dict[str, str]) -> ProjectionInputs | None:
    """What the grid and its first point refuse before anything runs or is written; the
    profiles of the points' projection read and checked (None without profile=)."""
    if first.num_nodes > 1:
        raise ConfigError(f"{first.num_nodes} nodes: a tradeoff point runs on one node (its followers are a "
                          "campaign's); on a cluster the grid is a job array of one-node tasks "
                          "(list=true prints the sbatch command)")
    if first.dataset == "imagenet" and not first.data_dir:
        raise ConfigError(f"grid {grid.name} trains on ImageNet: give its folder, dataset=imagenet "
                          "data_dir=FOLDER (with train/ and val/); without data_dir= the grid is the "
                          "embedded one (grid=embedded, Fashion-MNIST)")
    if not options.profile:
        return None
    if first.dataset != "imagenet":
        raise ConfigError(f"profile={options.profile}: projections to the systems are of ImageNet "
                          f"points; grid {grid.name} runs on {first.dataset} (data_dir= an ImageNet folder)")
    from .projected_points import inputs_of  # a wrong file is said now, not after the points trained
    return inputs_of(options, by_recipe)


def run_points(grid: Grid, chosen: list[GridPoint], configs: dict[int, Config], folder: Path, count: int,
               redo: bool) -> None:
    """Each chosen point in turn (its old run set aside first with redo), a progress line after
    each when there are several."""
    progress = GridProgress(chosen)
    for point in chosen:
        if redo:
            grid_points.redo(folder, point)
        ran = not grid_points.is_finished(folder, point)
        began = time.monotonic()
        grid_points.run_point(grid, point, configs[point.index], folder, count)
        progress.finished(point, (time.monotonic() - began) / 60 if ran else None)
        if len(chosen) > 1:
            print(progress.line(), flush=True)


def _refuse_busy(grid: Grid, chosen: list[GridPoint], folder: Path) -> None:
    """Refuse, before anything is written, a command whose points another process is running."""
    for point in chosen:
        holder = runs.lock_holder(grid_points.point_folder(folder, point).path)
        if holder:
            raise runs.Busy(f"point {point.index + 1} of {len(grid.points())} (point={point.index}, "
                            f"{point.label}) is being run by another tradeoff (pid {holder}); wait for "
                            "it to end, or run other points with point=K (list=true numbers them)")


def _default_grid(given: dict[str, str]) -> str:
    """`imagenet` for a system that trains on ImageNet (data_dir= names it), else `embedded`."""
    if given.get("data_dir"):
        return "imagenet"
    if resolve_here(None, given).dataset == "imagenet":
        raise ConfigError(f"system={given.get('system')} trains on ImageNet: give data_dir=FOLDER "
                          "(the grid is then `imagenet`), or grid=NAME")
    return "embedded"


def _chosen(points: list[GridPoint], point: int | None) -> list[GridPoint]:
    if point is None:
        return points
    if point >= len(points):
        raise ConfigError(f"point={point}: this grid has points 0 to {len(points) - 1} (list=true shows them)")
    return [points[point]]


def listing(grid: Grid, points: list[GridPoint], folder: Path, words: list[str]) -> str:
    lines = [f"grid {grid.name} ({grid.source}): {len(points)} points, results in {folder}", "",
             "| point | configuration | budget | seed | finished |", "|---|---|---|---|---|"]
    lines += [f"| {p.index} | {p.configuration} | {p.budget:g} ({grid.budget_key}) | {p.seed} | "
              f"{'yes' if grid_points.is_finished(folder, p) else 'no'} |" for p in points]
    given = " ".join(w for w in words if not w.startswith(("point=", "list=")))
    lines += ["", "On a SLURM cluster, one array task a point:",
              f"  sbatch --array=0-{len(points) - 1} scripts/slurm/run.sbatch tradeoff {given}".rstrip()]
    return "\n".join(lines)


def write(grid: Grid, configs: dict[int, Config], folder: Path, spread_limit: float,
          projecting: ProjectionInputs | None, given: dict[str, str]) -> Path:
    """The report of the points finished so far (each point's configuration in `configs`), the
    points projected to the systems with `projecting`'s profiles; one writer at a time (array
    tasks finish together)."""
    config = configs[0]
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".report.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        finished, left_out = grid_points.finished_points(grid, folder, config.price_usd_per_hour, configs)
        measured = grid_report.Measured(
            grid, config.system_id, config.system_name, _machine(config), config.dataset,
            config.price_usd_per_hour, finished, len(configs), left_out=left_out,
            spread_limit=spread_limit, command_line=dict(given))
        if projecting is not None:
            from .projected_points import project_points
            measured.projected, measured.projection_notes = project_points(grid, finished, projecting)
        return grid_report.write_report(folder, measured)


def _machine(config: Config) -> str:
    if config.device_type == "cuda":
        return f"{config.accelerators_per_node}x {config.descriptor.accelerator_model_name}"
    described = SystemDescriptor.from_json(fill_from_host(config.descriptor.to_json()))   # this machine's
    return f"{described.host_processor_model_name or 'a CPU'} ({described.host_vcpus or '?'} vCPUs)"


def draw_published(given: dict[str, str]) -> int:
    """The write-ups' ImageNet tradeoff points, one plot per system that has some, and a table
    with their dollars at each descriptor's price."""
    if set(given) - {"results_dir"}:
        raise ConfigError("tradeoff published takes only results_dir=")
    folder = ResultsRoot(in_repository(given.get("results_dir", "results"))).published_points
    folder.mkdir(parents=True, exist_ok=True)
    from .plots import plot_tradeoff
    systems = sorted({p.system for p in published.POINTS if p.system})
    lines = ["# Published tradeoff points of the write-ups, per system", "",
             "Top-1 against training minutes (evaluation and checkpointing excluded) as published; "
             "dollars at each system descriptor's price. Nothing here was measured by this harness.", ""]
    for system in systems + [""]:           # "": an 8x A100 the write-up does not name
        name = system or "unnamed-8xa100"
        price = system_descriptor.load_descriptor(system).price_usd_per_hour if system else 0.0
        path = plot_tradeoff([], folder / f"published-{name}.png", published=published.points_for(system),
                             title=f"published points on {system or 'an 8x A100 not named further'}")
        lines += [f"## {system or 'An 8x A100 not named further (no descriptor)'}", "",
                  f"![{name}]({path.name})", ""]
        lines += grid_report.published_table([system])[2:]
        if price:
            lines += [f"At ${price:g}/hour (systems/{system}.json): "
                      + "; ".join(f"{p.configuration} {p.top1 * 100:.1f}% ${usd(p.minutes, price):,.2f}"
                                  for p in published.points_for(system)), ""]
    lines += grid_report.ablations_table()
    (folder / grid_report.REPORT).write_text("\n".join(lines) + "\n")
    print(f"[tradeoff] published points: {folder / grid_report.REPORT}")
    return 0
