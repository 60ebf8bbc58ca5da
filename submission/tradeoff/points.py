"""The points of a grid on this machine: each one run, with the machinery of a campaign run.

    <results_dir>/tradeoff/<grid>/<system_name>/   (its files, by name: run_folder.GridFolder)
      grid.json                         the grid as read, and the settings given for all points
      system.json                       the MLPerf description of the machine the points ran on
      points/<slug>/                    a point's configuration and data, its run's MLLOG lines
                                        once it trained its whole budget, its progress records,
                                        transcript, trackers' files, and point.json: its figures
                                        (tradeoff.analysis.Point)
      attempts/                         logs of interrupted points, kept aside, and the runs of
                                        points redone (redo=true), each in a folder of its own

A point is locked while it runs (one SLURM array task each), never rewritten once finished,
and redone when a run of it was interrupted. Its log is an MLPerf log of a run without a target:
it is never scored or packaged (its run_stop says why).
"""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from .. import runs, tracking
from ..config import Config
from ..costs import usd
from ..errors import ConfigError
from ..jsonfile import write_json
from ..preflight import resolve_here
from ..progress import read_progress, run_energy
from ..results import RULESET, CampaignError, read_json, results_root
from ..run_folder import GridFolder, PointFolder
from ..system_json import run_description
from ..train_args import TrainArgs
from .analysis import Evaluation, Point
from .grid import COMMAND_LINE_KEYS, Grid, GridPoint

WHOLE_BUDGET = "no target"          # the start of run_stop's reason when a run trained its budget


def point_config(grid: Grid, point: GridPoint, overrides: dict[str, str]) -> Config:
    """The point's configuration: the grid's settings and the configuration's, then the
    command line's, which may not change what the grid sets."""
    clashes = sorted(key for key in (set(overrides) - set(COMMAND_LINE_KEYS)) & set(point.settings)
                     if str(overrides[key]) != str(point.settings[key]))
    if clashes:
        raise ConfigError(f"{', '.join(f'{k}={overrides[k]}' for k in clashes)}: the grid ({grid.source}) "
                          "sets it for its points; change it in the grid file, or give another grid")
    try:
        return resolve_here(None, overrides, layers=((f"grid {grid.source}", point.settings),))
    except ConfigError as exc:
        raise ConfigError(f"point {point.index} ({point.label}): {exc}") from None


def grid_folder(grid: Grid, config: Config) -> Path:
    return results_root(config).grid(grid.name, config.system_name).path


def point_folder(folder: Path, point: GridPoint) -> PointFolder:
    return GridFolder(folder).point(point.slug)


def is_finished(folder: Path, point: GridPoint) -> bool:
    return point_folder(folder, point).run.result.is_file()


def redo(folder: Path, point: GridPoint) -> Path | None:
    """Move a finished point's run (its log, records, transcript) to attempts/<slug>-<time>/,
    so that the next run_point trains it again; the folder it went to, or None when the point
    has no run to move. The point's other files (config.json, data.json) stay."""
    moved = [path for path in point_folder(folder, point).run_paths() if path.exists()]
    if not moved:
        return None
    kept = GridFolder(folder).attempts / f"{point.slug}-{runs.stamp()}"
    kept.mkdir(parents=True)
    for path in moved:
        path.rename(kept / path.name)
    print(f"[tradeoff] point {_numbered(point, None)}: {point.label}, its run moved to {kept}; "
          "training it again", flush=True)
    return kept


def _numbered(point: GridPoint, count: int | None) -> str:
    """"3 of 24 (point=2)": the place a person counts, and the index point= and SLURM use."""
    return f"{point.index + 1}" + (f" of {count}" if count else "") + f" (point={point.index})"


def run_point(grid: Grid, point: GridPoint, config: Config, folder: Path, count: int) -> None:
    """Train the point's whole budget, unless it is finished already (with these settings)."""
    where = point_folder(folder, point)
    run = where.run
    if is_finished(folder, point):
        _say_finished(point, where, config, count)
        return
    config = runs.plan_launch(config, say="[tradeoff]").approved()
    with runs.Lock(where.path):
        if is_finished(folder, point):          # another array task finished it meanwhile
            _say_finished(point, where, config, count)
            return
        _check_recorded(where, config)
        if run.left_by_an_attempt():
            runs.set_aside(run, GridFolder(folder).attempts, point.slug, f"point {point.index}", "[tradeoff]")
        from ..data.prepare import prepare
        data = prepare(config, world_size=config.world_size)
        write_json(where.config, config.to_dict())
        write_json(where.data, data.to_dict())
        print(f"[tradeoff] point {_numbered(point, count)}: {point.label}", flush=True)
        label = f"[point {point.index + 1}/{count} {point.configuration} @{point.budget:g} seed {point.seed}]"
        track = tracking.Target(tuple(config.trackers), str(run.events), str(run.wandb), point.slug,
                                f"tradeoff-{grid.name}-{config.system_name}") if config.trackers else None
        runs.run_once(config, TrainArgs(where.config, where.data, seed=point.seed, label=label,
                                        progress=run.records, track=track),
                      run, f"point {_numbered(point, count)}, {point.label},", "[tradeoff]")
        try:
            record = point_record(point, run.result, config.price_usd_per_hour, run.records)
        except StoppedEarly as exc:
            print(f"[tradeoff] {exc}", flush=True)
            return
        write_json(where.record, record.to_dict())
        if tracking.TENSORBOARD in config.trackers:
            tracking.write_point_hparams(run.events, point_hparams(grid, point), {
                "top1": record.top1, "minutes": record.minutes, "usd": record.cost_usd, "joules": record.joules})


def point_hparams(grid: Grid, point: GridPoint) -> dict[str, Any]:
    """What tells a point from the grid's others: its configuration, recipe, budget and seed,
    and each setting its configuration gives beyond the grid's own."""
    configuration = next(c for c in grid.configurations if c.name == point.configuration)
    own = {key: value for key, value in configuration.settings.items() if key != "recipe"}
    return {"configuration": point.configuration, "recipe": str(point.settings.get("recipe", "")),
            "budget": point.budget, "seed": point.seed,
            **{key: value if isinstance(value, (bool, int, float)) else str(value) for key, value in own.items()}}


def _say_finished(point: GridPoint, where: PointFolder, config: Config, count: int) -> None:
    _check_recorded(where, config)
    print(f"[tradeoff] point {_numbered(point, count)}: {point.label}, already finished: {where.run.result}",
          flush=True)


def _check_recorded(where: PointFolder, config: Config) -> None:
    """A point's folder holds the run of these settings, or none."""
    changes = _recorded_changes(where, config)
    if changes:
        raise CampaignError(f"{where.path} holds a run of this point with other settings ({', '.join(changes)}); "
                            "move the folder aside to run the point with these, or use another results_dir")


def _recorded_changes(where: PointFolder, config: Config) -> list[str]:
    """How the settings the point in `where` ran with differ from `config`'s ([]: none, or no run)."""
    recorded = where.config
    return runs.training_changes(read_json(recorded)["settings"], config) if recorded.is_file() else []


class StoppedEarly(CampaignError):
    """A point's run ended before the end of its budget (diverged, max_run_minutes): finished,
    kept, and left out of the curves, which compare whole budgets."""


def point_record(point: GridPoint, log: Path, price_usd_per_hour: float, progress: Path | None = None) -> Point:
    """The point's figures from its MLPerf log: top-1 at the end of the budget, and the
    minutes from run_start to run_stop with the evaluations left out (as the write-ups count
    training time), at each evaluation too; its energy from its progress records."""
    from mlperf_logging.compliance_checker.mlp_parser import parse_file
    lines, _ = parse_file(str(log), ruleset=RULESET)
    first: dict[str, Any] = {}
    evaluations, eval_ms, eval_began = [], 0.0, None
    for line in lines:
        first.setdefault(line.key, line)
        if line.key == "eval_start":
            eval_began = line.timestamp
        elif line.key == "eval_accuracy":
            top1 = float(line.value["value"])
        elif line.key == "eval_stop" and eval_began is not None:
            minutes = (eval_began - first["run_start"].timestamp - eval_ms) / 60000
            evaluations.append(Evaluation(max(minutes, 0.0), top1))
            eval_ms += line.timestamp - eval_began
    if "run_stop" not in first:
        raise CampaignError(f"{log} has no run_stop: not a finished point")
    reason = str((first["run_stop"].value.get("metadata") or {}).get("reason", ""))
    if not reason.startswith(WHOLE_BUDGET) or not evaluations:
        raise StoppedEarly(f"point {point.index} ({point.label}) stopped before the end of its budget "
                           f"({reason or 'no evaluation'}): kept in {log.parent}, left out of the curves; "
                           "move that folder aside to run the point again")
    minutes = (first["run_stop"].timestamp - first["run_start"].timestamp - eval_ms) / 60000
    cost = usd(minutes, price_usd_per_hour)
    used = run_energy(read_progress(progress)) if progress is not None and progress.is_file() else None
    return Point(point.configuration, point.budget, point.seed, evaluations[-1].top1, minutes, cost,
                 tuple(evaluations), used.joules if used else None)


def finished_points(grid: Grid, folder: Path, price_usd_per_hour: float,
                    configs: dict[int, Config]) -> tuple[list[Point], list[str]]:
    """The figures of every finished point of the grid in `folder` (point.json, or read from
    its log where a run was stopped before writing it), costed at `price_usd_per_hour`: the
    report's price, whatever price the runs were launched with; and why each point left out
    is: stopped before the end of its budget, or run with other settings than `configs`
    (each point's configuration now: a grid file edited since)."""
    found, left_out = [], []
    for point in grid.points():
        where = point_folder(folder, point)
        run = where.run
        if not run.result.is_file():
            continue
        changes = _recorded_changes(where, configs[point.index])
        if changes:
            left_out.append(f"point {point.index} ({point.label}) ran with other settings than the grid's "
                            f"({', '.join(changes)}): left out of the curves; move {where.path} aside and run "
                            "the grid again to redo it")
            continue
        record = where.record
        if not record.is_file():
            try:
                write_json(record, point_record(point, run.result, price_usd_per_hour, run.records).to_dict())
            except StoppedEarly as exc:
                left_out.append(str(exc))
                continue
        figures = Point.from_dict(json.loads(record.read_text()))
        cost = usd(figures.minutes, price_usd_per_hour)
        found.append(dataclasses.replace(figures, cost_usd=cost))
    return found, left_out


def record_grid(grid: Grid, config: Config, folder: Path, overrides: dict[str, str]) -> None:
    """grid.json and system.json: what the grid is and which machine runs it; a folder whose
    points ran on other hardware is refused, as a campaign's is."""
    folder.mkdir(parents=True, exist_ok=True)
    files = GridFolder(folder)
    changes = runs.hardware_changes(files.system, config)
    if changes:
        raise CampaignError(f"{folder} holds points run on other hardware or software ({'; '.join(changes)}): "
                            "one tradeoff's points share one machine; give this machine another results_dir")
    write_json(files.system, run_description(config))
    write_json(files.grid, {"grid": grid.to_dict(), "command_line": overrides,
                                      "system": config.system_id, "system_name": config.system_name,
                                      "price_usd_per_hour": config.price_usd_per_hour,
                                      "price_source": config.price_source, "price_date": config.price_date})
