"""submission.projection.schedule: the run's parts (training per side, evaluation, set-up,
each later epoch's loader start) and its early stop, on the run plan the loop follows."""
from __future__ import annotations

import pytest

from submission import config as config_module
from submission.run_plan import RunPlan

from hand_profiles import _cpu, _profile, _project


def test_side_schedule_follows_the_recipe():
    plan = RunPlan.of(_cpu(), 60_000)
    assert (plan.steps_per_epoch, plan.total_steps) == (937, 150)
    schedule = plan.side_runs()
    assert sum(steps for _, _, steps in schedule) == 150
    sides = [side for side, _, _ in schedule]
    assert sides[0] == 16 and sides[-1] == 32 and sides == sorted(sides)
    first_side, _, first_steps = schedule[0]
    assert first_steps >= 61                   # steps 0..60: progress <= 0.4, half size
    last_side, last_first, last_steps = schedule[-1]
    assert last_first + last_steps == 150 and last_first <= 120     # full size from 80%


def test_fixed_size_run_is_the_sum_of_its_parts():
    config = _cpu(progressive_resize="false")
    profile = _profile([32], 100.0, setup={"in_run_first_epoch_extra": 12.0, "first_eval_extra": 3.0})
    result = _project(config, profile, "test.json")
    # 60,000 images // 64 = 937 steps per epoch; 0.16 epochs -> 150 steps; eval every 37 steps
    steps, evals = 150, 5
    expected_s = steps * 64 / 100.0 + evals * 2000 / 200.0 + 15.0
    assert result.run_minutes == pytest.approx(expected_s / 60)
    assert result.campaign_minutes == pytest.approx(5 * expected_s / 60)
    assert [p.limited_by for p in result.parts] == ["step", "eval", "set-up"]
    assert result.run_cost_usd is None
    # a run that reaches the target at the evaluation of step 148 stops there: 4 evaluations
    epoch, minutes = result.early_stop
    assert epoch == pytest.approx(148 / 937)
    assert minutes == pytest.approx((148 * 64 / 100.0 + 4 * 2000 / 200.0 + 15.0) / 60)


def test_a_batch_larger_than_the_data_set_names_the_setting_to_lower():
    config = _cpu(batch_per_device=10_000_000)
    with pytest.raises(config_module.ConfigError,
                       match=r"60000 training images are fewer than one global batch \(10000000 = "
                             r"10000000 per process x 1 process\(es\)\): lower batch_per_device"):
        _project(config, _profile([16, 20, 24, 28, 32]), "p.json")


def test_in_run_set_up_comes_from_the_loader_probe_of_the_warm_up_setting():
    """The bench's fresh-process probe: with the warm-up, the warm loaders' first batch and
    evaluation pass; without it, the cold ones plus the first step at each side."""
    probe = {"cold": {"train_first_batch_s": 16.0, "val_first_pass_s": 1.5, "warm_up_s": 0.0},
             "warm": {"train_first_batch_s": 0.5, "val_first_pass_s": 0.1, "warm_up_s": 11.0}}
    profile = _profile([32], 100.0, first_step_s=2.64)    # 2 s more than a steady step of 64
    profile["loader_setup_s"] = probe
    warm = _project(_cpu(progressive_resize="false"), profile, "p.json")
    cold = _project(_cpu(progressive_resize="false", warmup="false"), profile, "p.json")
    assert warm.parts[-1].seconds == pytest.approx(0.6)
    assert cold.parts[-1].seconds == pytest.approx(17.5 + 2.0)
    assert "warm-up before run_start" in warm.parts[-1].what and "warmup=false" in cold.parts[-1].what
    assert not any("set-up figures" in w for w in warm.warnings)


def test_each_later_epoch_pays_the_loaders_start():
    """The bench's loader.epoch_start_s, once for every epoch after the first (whose start
    is in the in-run set-up), up to the step the run ends at."""
    config = _cpu(progressive_resize="false", epochs="2.5", eval_every_epochs="1")
    profile = _profile([32], 100.0)
    plain = _project(config, profile, "p.json")
    profile["loader"]["epoch_start_s"] = 1.5
    restarted = _project(config, profile, "p.json")
    assert restarted.parts[-1].limited_by == "loader" and "each of 2 later epochs" in restarted.parts[-1].what
    assert restarted.run_minutes - plain.run_minutes == pytest.approx(2 * 1.5 / 60)
    # the early stop at the evaluation of epoch 2 crossed one epoch start
    assert restarted.early_stop[1] - plain.early_stop[1] == pytest.approx(1.5 / 60)


def test_a_projection_reads_as_numbers():
    """What a later `tradeoff` reads: parts by kind, run, training and evaluation minutes, cost."""
    config = _cpu(progressive_resize="false", price_usd_per_hour="6")
    profile = _profile([32], 100.0, setup={"in_run_first_epoch_extra": 12.0, "first_eval_extra": 3.0})
    result = _project(config, profile, "p.json")
    assert [p.kind for p in result.parts] == ["training", "evaluation", "set-up"]
    assert result.parts[0].side == 32
    assert result.training_minutes == pytest.approx(150 * 64 / 100.0 / 60)
    assert result.evaluation_minutes == pytest.approx(5 * 2000 / 200.0 / 60)
    assert result.run_minutes == pytest.approx(result.training_minutes + result.evaluation_minutes + 15 / 60)
    assert result.run_cost_usd == pytest.approx(result.run_minutes / 60 * 6)
