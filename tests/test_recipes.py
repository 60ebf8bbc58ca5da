"""Every recipe's published values (Mild, the baseline, Medium, Hot), the scale_schedule_ratio
ranges, the plan and step Medium and Hot give (their real runs through the campaign: below)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from submission import config
from submission.config import ConfigError, load_recipe, resolve
from submission.methods.stochastic_depth import StochasticBottleneck
from submission.run_plan import RunPlan
from submission.show_settings import describe_settings
from submission.step import build_step

IMAGENET_TRAIN = 1_281_167


def test_mild_recipe_carries_the_published_values():
    mild = config.load_recipe("mild")
    assert mild["lr"] == 2.048 and mild["lr_reference_batch"] == 2048
    assert mild["momentum"] == 0.875 and mild["weight_decay"] == 5e-4
    assert mild["label_smoothing"] == 0.08 and mild["loss"] == "bce"
    assert mild["epochs"] * mild["scale_schedule_ratio"] == pytest.approx(28.8)
    assert mild["whole_epochs"]          # Composer v0.7 truncated 28.8 to 28 epochs
    assert mild["warmup_epochs"] == 8.0 and not mild["scale_warmup"]   # Composer v0.7: unscaled
    assert mild["lr_final_fraction"] == 0.0   # the cosine decays to 0 (alpha_f's default)
    assert mild["precision"] == "amp" and mild["amp_dtype"] == "fp16"   # fp16 + GradScaler
    assert mild["resize_granularity"] == "epoch" and mild["resize_mode"] == "nearest"
    assert (mild["train_resolution"], mild["eval_resolution"], mild["eval_resize"]) == (176, 224, 232)
    assert mild["ema_half_life_batches"] == 100 and mild["ema_update_every_batches"] == 20
    assert mild["target_accuracy"] == 0.759
    assert mild["blurpool"] and mild["progressive_resize"]


def test_baseline_drops_the_speed_up_methods():
    base = config.load_recipe("baseline")
    assert base["loss"] == "cross_entropy" and base["label_smoothing"] == 0.1
    assert not base["blurpool"] and not base["progressive_resize"]
    assert base["ema_half_life_batches"] == 0
    assert base["train_resolution"] == 224 and base["eval_resize"] == 256
    assert base["epochs"] * base["scale_schedule_ratio"] == 90
    assert base["momentum"] == 0.875   # inherited from mild
    assert base["init_bn_gamma"] == "uniform" and base["init_conv"] == "kaiming_normal"


def test_settings_show_the_published_recipe():
    text = describe_settings("mild")
    for line in ("lr = 2.048", "momentum = 0.875", "label_smoothing = 0.08", "whole_epochs = True",
                 "amp_dtype = 'fp16'", "resize_granularity = 'epoch'", "train_epochs = 28 ",
                 "warmup_train_epochs = 8 ",
                 "training sides = 88, 96, 104, 112, 116, 124, 132, 140, 148, 156, 164, 172, 176 "):
        assert line in text


def test_medium_and_hot_carry_the_published_values():
    medium, hot = load_recipe("medium"), load_recipe("hot")
    # Composer v0.8.0 resnet50_medium.yaml
    assert (medium["label_smoothing"], medium["mixup_alpha"]) == (0.1, 0.2)
    assert (medium["sam_rho"], medium["sam_epsilon"], medium["sam_interval"]) == (0.5, 1e-12, 10)
    assert medium["train_loader"] == "ffcv" and medium["randaugment_depth"] == 0
    assert medium["scale_schedule_ratio"] is None      # left to the user, as in the file
    # resnet50_spicy.yaml (Hot)
    assert (hot["label_smoothing"], hot["mixup_alpha"], hot["sam_interval"]) == (0.13, 0.25, 5)
    assert hot["weight_decay"] == 3e-4 and hot["colout_fraction"] == 0.05
    assert (hot["resize_initial_scale"], hot["resize_start_fraction"]) == (0.6, 0.2)
    assert (hot["randaugment_set"], hot["randaugment_depth"], hot["randaugment_severity"]) == ("all", 1, 10)
    assert (hot["stochastic_depth_rate"], hot["stochastic_depth_method"],
            hot["stochastic_depth_distribution"]) == (0.1, "sample", "linear")
    assert hot["train_loader"] == "torchvision"
    # what all three share: the optimiser, the batch, the resolutions, the EMA
    mild = load_recipe("mild")
    for key in ("lr", "momentum", "lr_reference_batch", "train_resolution", "eval_resize",
                "ema_half_life_batches", "warmup_epochs", "epochs", "loss"):
        assert mild[key] == medium[key] == hot[key], key
    assert mild["mixup_alpha"] == 0 and mild["sam_interval"] == 0 and mild["colout_fraction"] == 0


@pytest.mark.parametrize("recipe, ratio, words", [
    ("medium", None, "R in [0.75, 2.6]"),
    ("medium", "0.7", "it must be in [0.75, 2.6]"),
    ("medium", "2.7", "it must be in [0.75, 2.6]"),
    ("hot", "2.6", "it must be above 2.6"),
    ("hot", None, "R above 2.6"),
    ("mild", "0.8", "it must be in (0, 0.75]"),
])
def test_a_ratio_outside_the_published_range_is_refused_naming_it(recipe, ratio, words):
    overrides = {"recipe": recipe, **({"scale_schedule_ratio": ratio} if ratio else {})}
    with pytest.raises(ConfigError) as error:
        resolve("p4d", overrides)
    assert words in str(error.value)


def test_ratios_inside_the_ranges_set_the_duration():
    assert resolve("p4d", {"recipe": "medium", "scale_schedule_ratio": "0.75"}).train_epochs == 67
    assert resolve("p4d", {"recipe": "medium", "scale_schedule_ratio": "2.6"}).train_epochs == 234
    assert resolve("p4d", {"recipe": "hot", "scale_schedule_ratio": "3"}).train_epochs == 270
    assert resolve("p4d", {"recipe": "baseline"}).train_epochs == 90      # no published range
    # the embedded campaign sets its own duration: the ImageNet ranges do not apply to it
    assert resolve("cpu", {"recipe": "hot"}).dataset == "fashion-mnist"


def test_randaugment_needs_the_torchvision_loader():
    with pytest.raises(ConfigError, match="randaugment_depth=1 needs train_loader=torchvision"):
        resolve("cpu", {"recipe": "hot", "train_loader": "ffcv"})
    assert resolve("cpu", {"recipe": "hot", "train_loader": "ffcv", "randaugment_depth": "0"})


def test_hot_plan_trains_colout_sides_and_counts_sam_steps():
    hot = RunPlan.of(resolve("p4d", {"recipe": "hot", "scale_schedule_ratio": "3"}), IMAGENET_TRAIN)
    # ColOut keeps int(0.95 x 176) = 167 rows and columns; the resize starts at 0.6 of that,
    # rounded to a multiple of 4, and never scales a batch up (167 stays 167, not 168)
    assert hot.full_side == 167 and hot.sides()[0] == 100 and hot.sides()[-1] == 167
    assert all(side % 4 == 0 for side in hot.sides()[:-1])
    assert hot.sam_steps() == hot.total_steps // 5 and hot.sam_steps(12) == 2
    medium = RunPlan.of(resolve("p4d", {"recipe": "medium", "scale_schedule_ratio": "1"}), IMAGENET_TRAIN)
    assert medium.full_side == 176 and medium.sides()[-1] == 176
    assert medium.sam_steps() == medium.total_steps // 10
    assert RunPlan.of(resolve("p4d"), IMAGENET_TRAIN).sam_steps() == 0


def test_settings_show_the_derived_block_of_each_ratio():
    text = describe_settings("hot", 3.0)
    assert "SAM steps = 33,750 of 168,750" in text
    assert "ColOut crops 176 to 167 first" in text
    assert "RandAugment (all, depth 1, severity 10)" in text
    ends = describe_settings("medium")          # no ratio given: both ends of the range
    assert "train_epochs = 67" in ends and "train_epochs = 234" in ends
    with pytest.raises(ConfigError, match="above 2.6"):
        describe_settings("hot", 2.0)


def test_the_hot_step_trains_at_the_planned_side_with_sam_passes():
    config = resolve("cpu", {"recipe": "hot", "batch_per_device": "8"})
    plan = RunPlan.of(config, 6000)
    step = build_step(config, 10, torch.device("cpu"))
    assert sum(isinstance(m, StochasticBottleneck) for m in step.model.modules()) == 16
    seen: list[tuple[int, ...]] = []
    step.model.register_forward_pre_hook(lambda module, args: seen.append(tuple(args[0].shape)))
    torch.manual_seed(0)
    np.random.seed(0)
    images = torch.randint(0, 256, (8, 3, 32, 32), dtype=torch.uint8)
    labels = torch.randint(0, 10, (8, 1))
    first, trained = plan.side(0), plan.trained_side(0)   # pinned; the tensor's own side
    for _ in range(5):
        loss = step(images, labels, first)
        assert torch.isfinite(loss)
    # ColOut keeps 30 of 32 px; five steps, the 5th a SAM step: six forward passes
    assert plan.full_side == 30
    assert seen == [(8, 3, trained, trained)] * 6
    step(images, labels, None)
    assert seen[-1] == (8, 3, 30, 30)


# Medium's whole run: the interrupted five-run campaign of test_campaign.py is Medium's.
# Hot's whole run on the torchvision loader: the resumed run of test_interrupt.py's Hot campaigns.
# The baseline's: the two-run campaign of test_tracking.py is the baseline's.
