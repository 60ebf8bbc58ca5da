"""submission.tradeoff.grid: a grid file read, checked and turned into points."""
from __future__ import annotations

import pytest

from submission.errors import ConfigError
from submission.tradeoff import points as grid_points
from submission.tradeoff.grid import load_grid

GRID = """name: small
budget: scale_schedule_ratio
budgets: [0.5, 1.0]
seeds: [3, 4]
baseline: plain
targets: [0.6]
settings: {epochs: 0.1}
configurations:
  plain: {recipe: baseline}
  mild, no smoothing: {recipe: mild, label_smoothing: 0.0, budgets: [1.0]}
"""


def _grid(tmp_path, text=GRID):
    path = tmp_path / "grid.yaml"
    path.write_text(text)
    return load_grid(str(path))


def test_points_run_seed_by_seed_then_budget_then_configuration(tmp_path):
    points = _grid(tmp_path).points()
    assert [(p.seed, p.budget, p.configuration) for p in points] == [
        (3, 0.5, "plain"), (3, 1.0, "plain"), (3, 1.0, "mild, no smoothing"),
        (4, 0.5, "plain"), (4, 1.0, "plain"), (4, 1.0, "mild, no smoothing")]
    assert [p.index for p in points] == list(range(6))
    assert points[2].slug == "mild-no-smoothing-budget1-seed3"
    assert points[2].settings == {"epochs": 0.1, "recipe": "mild", "label_smoothing": 0.0,
                                  "scale_schedule_ratio": 1.0, "target_accuracy": "none", "runs": 1,
                                  "seeds": "3"}


def test_a_point_resolves_its_settings_with_their_origin(tmp_path):
    grid = _grid(tmp_path)
    point = grid.points()[2]
    config = grid_points.point_config(grid, point, {"system": "cpu"})
    assert (config.recipe, config.label_smoothing, config.target_accuracy, config.epochs) == ("mild", 0.0, None, 0.1)
    assert config.origin("label_smoothing") == f"grid {grid.source}"


def test_the_command_line_may_not_change_what_the_grid_sets(tmp_path):
    grid = _grid(tmp_path)
    with pytest.raises(ConfigError, match=r"epochs=2: the grid \(.*grid.yaml\) sets it for its points"):
        grid_points.point_config(grid, grid.points()[0], {"epochs": "2"})


@pytest.mark.parametrize("old, new, message", [
    ("budget: scale_schedule_ratio", "budget: lr", r"budget 'lr': a budget sets scale_schedule_ratio or epochs"),
    ("seeds: [3, 4]", "seeds: [3, 3]", "seeds must be a list of distinct whole numbers"),
    ("baseline: plain", "baseline: nothing",
     r"baseline 'nothing' is not one of the configurations \(plain, mild, no smoothing\)"),
    ("{epochs: 0.1}", "{epochs: 0.1, seeds: '1'}", "settings: seeds is set by each point"),
    ("{epochs: 0.1}", "{scale_schedule_ratio: 1}", "settings: scale_schedule_ratio is set by the budgets"),
    ("label_smoothing: 0.0", "label_smothing: 0.0",
     "configuration 'mild, no smoothing': unknown setting 'label_smothing'"),
    ("targets: [0.6]", "targets: [75.9]", r"targets must be a list of top-1 fractions in \(0, 1\]"),
    ("name: small", "name: ../up", "name '../up' names a folder"),
    ("budgets: [0.5, 1.0]", "budgets: [0.5, 0.5]", r"budgets \[0.5, 0.5\] name a budget twice"),
    ("budgets: [1.0]}", "budgets: [1.0, 1]}", r"configuration 'mild, no smoothing': budgets \[1.0, 1\] name a budget"),
    ("  plain: {recipe: baseline}", "  plain: {recipe: baseline}\n  Mild (no smoothing): {recipe: mild}",
     r"configurations 'Mild \(no smoothing\)' and 'mild, no smoothing' share a folder name \('mild-no-smoothing'\)"),
    ("{epochs: 0.1}", "{epochs: 0.1, system: p4d}", "settings: system is set on the command line"),
])
def test_a_bad_grid_is_refused_naming_the_file_and_what_is_wrong(tmp_path, old, new, message):
    with pytest.raises(ConfigError, match=message) as refused:
        _grid(tmp_path, GRID.replace(old, new))
    assert "grid.yaml is not a grid the harness can run" in str(refused.value)


def test_an_unknown_grid_name_lists_the_shipped_ones():
    with pytest.raises(ConfigError, match=r"grid=nope: no such grid file .*shipped: embedded, imagenet"):
        load_grid("nope")


@pytest.mark.parametrize("name", ["embedded", "imagenet"])
def test_the_shipped_grids_resolve_every_point(name, tmp_path):
    grid = load_grid(name)
    given = {"system": "p4d", "data_dir": str(tmp_path)} if name == "imagenet" else {}
    configs = [grid_points.point_config(grid, p, given) for p in grid.points()]
    assert {c.recipe for c in configs} == {"baseline", "mild", "medium", "hot"}
    assert all(c.target_accuracy is None for c in configs)


EPOCHS_GRID = """name: by-epochs
budget: epochs
budgets: [40]
seeds: [1]
baseline: mild
configurations:
  mild: {recipe: mild}
  medium: {recipe: medium, budgets: [90]}
"""


def test_an_epochs_budget_trains_that_many_epochs_inside_the_recipes_range(tmp_path):
    """B epochs is the recipe's 90-epoch schedule dilated to B (ratio B / 90), so the recipe's
    own scale_schedule_ratio (Mild's 0.32) does not shrink it, and its published range holds."""
    grid = _grid(tmp_path, EPOCHS_GRID)
    given = {"system": "p4d", "data_dir": str(tmp_path)}
    mild, medium = (grid_points.point_config(grid, p, given) for p in grid.points())
    assert (mild.recipe, mild.train_epochs, mild.warmup_train_epochs) == ("mild", 40.0, 8.0)
    assert mild.scale_schedule_ratio == pytest.approx(40 / 90)
    assert (medium.recipe, medium.train_epochs, medium.scale_schedule_ratio) == ("medium", 90.0, 1.0)
    too_long = _grid(tmp_path, EPOCHS_GRID.replace("budgets: [40]", "budgets: [72]"))
    with pytest.raises(ConfigError, match=r"scale_schedule_ratio=0.8 is outside the mild recipe's published range"):
        grid_points.point_config(too_long, too_long.points()[0], given)
    for key in ("epochs", "scale_schedule_ratio"):
        with pytest.raises(ConfigError, match=f"settings: {key} is set by the budgets"):
            _grid(tmp_path, EPOCHS_GRID + f"settings: {{{key}: 1}}\n")


@pytest.mark.parametrize("old, new, where", [
    ("{epochs: 0.1}", "{epochs: 0.1, cache_clear_cmd: 'touch ran'}", "settings"),
    ("{recipe: baseline}", "{recipe: baseline, cache_clear_cmd: 'touch ran'}", "configuration 'plain'"),
])
def test_a_grid_that_sets_the_cache_clearing_command_is_refused_naming_the_key(tmp_path, old, new, where):
    """A grid file is data someone may hand over: it must not choose a command to run."""
    with pytest.raises(ConfigError, match=rf"{where}: cache_clear_cmd runs a command: it is taken from "
                                          r"the system descriptor or the command line only"):
        _grid(tmp_path, GRID.replace(old, new))
