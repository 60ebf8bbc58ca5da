"""submission.tradeoff.projected_points: measured points projected to systems from bench profiles, and
grid_report.cheapest_by_system naming where a system changes which point is cheapest."""
from __future__ import annotations

import json

import pytest

from submission import system_descriptor
from submission.bench_profile import read
from submission.config import ConfigError, resolve
from submission.options import TradeoffOptions
from submission.projection import project
from submission.tradeoff import grid_report, projected_points
from submission.tradeoff.analysis import Evaluation, Point
from submission.tradeoff.grid import load_grid

from conftest import REPO

H100 = str(REPO / "docs" / "gpu-h100-2026-11-22" / "profile-h100.json")
LOADER = str(REPO / "docs" / "projection-hot-loader-cpu.json")
GRID = """name: loaders
budget: scale_schedule_ratio
budgets: [0.45]
seeds: [1, 2]
baseline: mild
targets: [0.77]
configurations:
  mild: {recipe: mild}
  mild, torchvision loader: {recipe: mild, train_loader: torchvision, budgets: [0.35]}
"""
# both reach 0.77: mild in 40 epochs (FFCV), the torchvision ablation in 31
TOP1 = {("mild", 0.45): (0.771, 0.773), ("mild, torchvision loader", 0.35): (0.770, 0.772)}


@pytest.fixture
def slow_gpu(tmp_path):
    """The H100 profile with its training step at a quarter of the rate (about a V100's): a
    GPU whose step, not the loader, limits a run on a host with 8 loader threads a GPU."""
    data = json.loads(open(H100).read())
    for side in data["train_step"].values():
        side["img_per_s"] /= 4
    path = tmp_path / "slow-gpu.json"
    path.write_text(json.dumps(data))
    return str(path)


@pytest.fixture
def systems(tmp_path, monkeypatch):
    """p4d, and the same machine with 16 vCPUs: 2 loader threads for each of its 8 GPUs."""
    folder = tmp_path / "systems"
    folder.mkdir()
    p4d = json.loads((system_descriptor.SYSTEMS_DIR / "p4d.json").read_text())
    (folder / "p4d.json").write_text(json.dumps(p4d))
    (folder / "p4d-few-cpus.json").write_text(json.dumps(
        {**p4d, "system_name": "p4d_16vcpu", "host_processor_vcpu_count": "16"}))
    monkeypatch.setattr(system_descriptor, "SYSTEMS_DIR", folder)
    return ["p4d", "p4d-few-cpus"]


def _measured(tmp_path, systems, profile=H100):
    path = tmp_path / "grid.yaml"
    path.write_text(GRID)
    grid = load_grid(str(path))
    points = [Point(configuration, budget, seed, top1, 30.0, None, (Evaluation(30.0, top1),))
              for (configuration, budget), pair in TOP1.items() for seed, top1 in zip((1, 2), pair)]
    options = TradeoffOptions(profile=profile, loader_profile=LOADER, systems=",".join(systems))
    curves, notes = projected_points.project_points(grid, points, projected_points.inputs_of(options))
    return grid, grid_report.Measured(grid, "local", "here", "a CPU", "imagenet", 0.0, points, 4, curves, notes)


def test_each_point_gets_the_minutes_and_dollars_project_gives_it_on_each_system(tmp_path, systems):
    grid, measured = _measured(tmp_path, systems)
    for system in systems:
        by_name = {p.configuration: p for p in measured.projected[system]}
        config = resolve(system, {"recipe": "mild", "scale_schedule_ratio": "0.45"})
        whole = project(config, read(H100), None, infer_sides=True)
        expected = whole.run_minutes - whole.evaluation_minutes        # as a measured point counts
        assert expected > whole.training_minutes                        # the set-up in the timed region counts
        mild = by_name["mild"]
        assert mild.minutes_mean == pytest.approx(expected)
        assert mild.cost_mean == pytest.approx(expected / 60 * 32.7726)      # p4d's list price
        assert mild.top1_mean == pytest.approx(0.772)                         # measured, not projected
        tv = resolve(system, {"recipe": "mild", "scale_schedule_ratio": "0.35", "train_loader": "torchvision"})
        tv_whole = project(tv, read(H100), read(LOADER), infer_sides=True)
        assert by_name["mild, torchvision loader"].minutes_mean == pytest.approx(
            tv_whole.run_minutes - tv_whole.evaluation_minutes)


def test_a_host_with_fewer_cpus_per_gpu_changes_the_cheapest_point(tmp_path, systems, slow_gpu):
    _, measured = _measured(tmp_path, systems, slow_gpu)
    cheapest = grid_report.cheapest_by_system(measured)[0.77]
    # 8 loader threads a GPU: both are step-bound and the ablation's fewer epochs win; 2 a
    # GPU: both are loader-bound, and FFCV's threads (1.6x torchvision's) outweigh 9 epochs
    assert cheapest == {"p4d": "mild, torchvision loader @0.35", "p4d-few-cpus": "mild @0.45"}
    text = "\n".join(grid_report._order_section(measured))
    assert "The cheapest point differs between systems for 77.00%." in text
    assert "The cheapest point to each target, by dollars:" in text      # both systems priced
    grid_report.write_report(tmp_path, measured)
    frontiers = json.loads((tmp_path / "tradeoff.json").read_text())["projected_frontier"]
    assert set(frontiers) == set(systems)
    for system, name in cheapest.items():          # each system's cheapest point is on its own frontier
        configuration, budget = name.split(" @")
        assert any(p["configuration"] == configuration and p["budget"] == float(budget)
                   for p in frontiers[system]), (system, frontiers[system])


def test_a_torchvision_configuration_needs_a_loader_profile(tmp_path, systems):
    path = tmp_path / "grid.yaml"
    path.write_text(GRID)
    grid = load_grid(str(path))
    points = [Point("mild, torchvision loader", 0.35, 1, 0.77, 30.0, None)]
    with pytest.raises(ConfigError, match=r"loads with torchvision \(CPU-bound\): projecting it needs "
                                          r"loader figures: measure the torchvision loader with "
                                          r"`python -m submission bench recipe=mild "
                                          r"train_loader=torchvision data_dir=DIR json=loader-mild.json`.* and pass "
                                          r"loader_profile=loader-mild.json"):
        projected_points.project_points(grid, points,
                                        projected_points.inputs_of(TradeoffOptions(profile=H100, systems="p4d")))


@pytest.mark.parametrize("words, message", [
    (["system=p4d"], r"system=p4d trains on ImageNet: give data_dir=FOLDER"),
    (["profile=missing.json"], r"profile missing.json does not exist.*python -m submission bench"),
    (["profile=" + H100, "dp_efficiency=abc"], r"dp_efficiency=abc: give a number in \(0, 1\]"),
    (["profile=" + H100, "dp_efficiency=1.5"], r"dp_efficiency=1.5: give a number in \(0, 1\]"),
    (["profile=" + H100, "systems=p4d,z9"], r"systems=p4d,z9: no descriptor z9"),
])
def test_a_tradeoff_whose_projection_cannot_be_made_is_refused_before_any_point_runs(tmp_path, words, message):
    from submission.options import parse
    from submission.tradeoff.command import main
    data = [] if words == ["system=p4d"] else ["system=p4d", f"data_dir={tmp_path}"]
    with pytest.raises(ConfigError, match=message):
        main(*parse("tradeoff", TradeoffOptions, data + words + [f"results_dir={tmp_path / 'results'}"]))
    assert not (tmp_path / "results").exists()


def test_a_report_before_any_point_finished_has_no_system_section(tmp_path, systems):
    (tmp_path / "grid.yaml").write_text(GRID)
    grid = load_grid(str(tmp_path / "grid.yaml"))
    measured = grid_report.Measured(grid, "local", "here", "a CPU", "imagenet", 0.0, [], 4)
    measured.projected, measured.projection_notes = projected_points.project_points(
        grid, [], projected_points.inputs_of(TradeoffOptions(profile=H100, systems=",".join(systems))))
    text = grid_report.write_report(tmp_path, measured).read_text()
    assert "No point has finished yet" in text and "## Projected on" not in text
