"""submission.methods.progressive_resize: the scale schedule, the sides it trains at
and the resize itself, against Composer's interpolate calls."""
import pytest
import torch

from submission.methods import progressive_resize
from submission.run_plan import RunPlan


@pytest.mark.parametrize("progress, scale", [(0.0, 0.5), (0.4, 0.5), (0.6, 0.75), (0.8, 1.0), (1.0, 1.0)])
def test_progressive_resize_scale(progress, scale):
    assert progressive_resize.resize_scale(progress, 0.5, 0.4, 0.8) == pytest.approx(scale)


def test_resized_batches_are_multiples_of_four_and_channels_last():
    assert progressive_resize.scaled_side(176, 0.5, 4) == 88
    assert progressive_resize.scaled_side(176, 0.6, 4) == 104   # 105.6 -> 104
    assert progressive_resize.scaled_side(6, 0.5, 4) == 4        # never below one multiple
    batch = torch.randn(2, 3, 176, 176).contiguous(memory_format=torch.channels_last)
    for mode in ("nearest", "bilinear"):
        out = progressive_resize.resize_batch(batch, 132, mode)
        assert out.shape == (2, 3, 132, 132) and out.is_contiguous(memory_format=torch.channels_last)
    assert progressive_resize.resize_batch(batch, 176) is batch
    # nearest keeps pixel values (Composer v0.7's mode): every output pixel is an input pixel
    half = progressive_resize.resize_batch(batch, 88, "nearest")
    assert torch.isin(half, batch).all()


def test_nearest_resize_equals_composers_scale_factor_call_at_every_mild_side():
    from submission.config import resolve
    batch = torch.randn(2, 3, 176, 176)
    sides = RunPlan.of(resolve("p4d"), 20_480).sides()     # 10 steps an epoch, 280 steps
    for side in sides[:-1]:                         # Composer skips the resize at 176
        # Composer v0.7.0-RC1's call (recompute_scale_factor left at its default)
        composer = torch.nn.functional.interpolate(batch, scale_factor=side / 176, mode="nearest")
        assert torch.equal(progressive_resize.resize_batch(batch, side, "nearest"), composer)


def _composers_resize(batch, side, mode):
    """Composer v0.8.0's resize (progressive_resizing.py `_make_resize`), the mode as the run's."""
    extra = {"antialias": True, "align_corners": False} if mode == "bilinear" else {}
    return torch.nn.functional.interpolate(batch, scale_factor=side / batch.shape[-1], mode=mode,
                                           recompute_scale_factor=False, **extra)


@pytest.mark.parametrize("mode", ["nearest", "bilinear", "area"])
@pytest.mark.parametrize("width, side, trained", [
    (176, 120, 119),      # 176 * (120 / 176) = 119.99... in doubles: Medium's 120-px phase
    (167, 100, 99),       # Hot's ColOut-cropped batches in the 100-px phase
    (176, 60, 59), (176, 88, 88), (176, 132, 132), (167, 104, 104), (30, 16, 16)])
def test_resize_floors_the_scale_factor_as_composer(mode, width, side, trained):
    torch.manual_seed(0)
    batch = torch.randn(2, 3, width, width).contiguous(memory_format=torch.channels_last)
    out = progressive_resize.resize_batch(batch, side, mode)
    assert out.shape == (2, 3, trained, trained) and progressive_resize.output_side(width, side) == trained
    assert torch.equal(out, _composers_resize(batch, side, mode))
    assert out.is_contiguous(memory_format=torch.channels_last)


def test_resize_never_scales_up():
    """Composer skips a scale factor >= 1: a 30-px batch (ColOut's crop of 32) asked for 32
    stays 30, not upscaled."""
    batch = torch.randn(1, 3, 30, 30)
    for side in (30, 32):
        assert progressive_resize.resize_batch(batch, side) is batch
        assert progressive_resize.output_side(30, side) == 30


def test_mild_changes_size_only_at_epoch_boundaries():
    from submission.config import resolve
    cfg = resolve("p4d")
    per_epoch, total = 10, 280                      # 28 epochs of 10 steps
    sides = [progressive_resize.side_at(s, per_epoch, total, cfg) for s in range(total)]
    for epoch in range(28):
        assert len(set(sides[epoch * per_epoch:(epoch + 1) * per_epoch])) == 1
    assert sides[0] == 88 and sides[-1] == 176
    assert sides[11 * per_epoch] == 88              # 11/28 = 0.39 < 0.4: still half size
    plan = RunPlan.of(cfg, per_epoch * cfg.global_batch_size)
    assert (plan.steps_per_epoch, plan.total_steps) == (per_epoch, total)
    assert plan.sides() == [88, 96, 104, 112, 116, 124, 132, 140, 148, 156, 164, 172, 176]
    assert [plan.side(s) for s in range(total)] == sides
    step_cfg = resolve("p4d", {"resize_granularity": "step"})
    assert len(RunPlan.of(step_cfg, per_epoch * cfg.global_batch_size).sides()) > 13
