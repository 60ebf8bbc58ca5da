"""Each method of the recipe, pinned against its definition."""
import copy
import math

import pytest
import torch
import torchvision
import yaml

from submission.methods import blurpool, ema, loss, progressive_resize, schedule, sgdw
from submission.mlperf_log import mlperf_tensor_name
from submission.model import build_model
from submission.step import RunPlan


def mild_model(**overrides):
    options = dict(blurpool=True, init_conv="kaiming_normal", init_bn_gamma="uniform",
                   logit_bias_init="log_prior", zero_init_residual=False, channels_last=True)
    options.update(overrides)
    return build_model(1000, **options)


def test_bce_loss_is_summed_over_classes_and_divided_by_batch():
    logits = torch.tensor([[2.0, -1.0, 0.5], [0.0, 1.0, -2.0]])
    labels = torch.tensor([0, 2])
    s = 0.08
    total = 0.0
    for row, label in zip(logits.tolist(), labels.tolist()):
        for k, z in enumerate(row):
            y = (1 - s) * (k == label) + s / 3
            p = 1 / (1 + math.exp(-z))
            total += -(y * math.log(p) + (1 - y) * math.log(1 - p))
    assert loss.bce_loss(logits, labels, s).item() == pytest.approx(total / 2, rel=1e-6)
    # the default mean reduction would be num_classes times smaller
    mean = torch.nn.functional.binary_cross_entropy_with_logits(
        logits, loss.smoothed_one_hot(labels, 3, s))
    assert loss.bce_loss(logits, labels, s).item() == pytest.approx(mean.item() * 3, rel=1e-6)


def test_smoothed_targets_sum_to_one():
    targets = loss.smoothed_one_hot(torch.tensor([1, 4]), 5, 0.08)
    assert torch.allclose(targets.sum(1), torch.ones(2))
    assert targets[0, 1].item() == pytest.approx(0.92 + 0.016)


def test_initialisation_follows_the_published_config():
    torch.manual_seed(0)
    model = mild_model(blurpool=False)
    assert torch.allclose(model.fc.bias, torch.full((1000,), -math.log(1000)))
    gammas = torch.cat([m.weight for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d)])
    assert 0 <= gammas.min() and gammas.max() <= 1 and 0.45 < gammas.mean() < 0.55
    betas = torch.cat([m.bias for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d)])
    assert torch.all(betas == 0)
    conv = model.layer3[0].conv2
    fan_in = conv.in_channels * 9
    assert conv.weight.std().item() == pytest.approx(math.sqrt(2 / fan_in), rel=0.05)


def test_blurpool_replaces_six_convs_and_the_max_pool():
    model = torchvision.models.resnet50()
    convs, pools = blurpool.apply_blurpool(model)
    assert (convs, pools) == (6, 1)
    blurred = {n for n, m in model.named_modules() if isinstance(m, blurpool.BlurConv2d)}
    assert blurred == {f"layer{i}.0.{c}" for i in (2, 3, 4) for c in ("conv2", "downsample.0")}
    assert isinstance(model.maxpool, blurpool.BlurMaxPool2d)
    assert not isinstance(model.conv1, blurpool.BlurConv2d)   # RGB stem left alone
    out = model(torch.randn(2, 3, 64, 64))
    assert out.shape == (2, 1000)


def test_blurpool_twice_changes_nothing_and_the_pool_blurs_any_width():
    model = mild_model()
    assert blurpool.apply_blurpool(model) == (0, 0)           # mild_model() already blurred
    assert not any(isinstance(m.conv, blurpool.BlurConv2d) for m in model.modules()
                   if isinstance(m, blurpool.BlurConv2d))
    # a pool whose input width is not the last conv's out_channels in traversal order
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.Conv2d(3, 5, 3),
                              torch.nn.MaxPool2d(3, stride=2, padding=1))
    blurpool.apply_blurpool(net)
    out = net[2](torch.ones(1, 8, 9, 9))
    assert out.shape == (1, 8, 5, 5)


@pytest.mark.parametrize("side", [14, 15])
def test_blurred_shortcut_conv_strides_its_blur_and_computes_the_same(side):
    """The downsample's 1x1 stride-2 conv: blurring at stride 2 then a stride-1 conv gives
    what blurring every position then the strided conv gives (Composer's order)."""
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(16, 8, 1, stride=2, bias=False)
    x = torch.randn(2, 16, side, side, dtype=torch.float64)
    conv = conv.double()
    reference = conv(blurpool.blur(x, blurpool.blur_kernel(16).double()))
    blurred = blurpool.BlurConv2d(conv)
    assert (blurred.blur_stride, blurred.conv.stride) == (2, (1, 1))
    out = blurred(x)
    assert out.shape == reference.shape == (2, 8, (side + 1) // 2, (side + 1) // 2)
    assert torch.allclose(out, reference, rtol=0, atol=1e-12)
    three = blurpool.BlurConv2d(torch.nn.Conv2d(16, 8, 3, stride=2, padding=1))
    assert (three.blur_stride, three.conv.stride) == (1, (2, 2))     # a 3x3 conv does not commute


def test_blur_kernel_is_normalised_and_preserves_a_flat_image():
    kernel = blurpool.blur_kernel(4)
    assert kernel.shape == (4, 1, 3, 3) and torch.allclose(kernel.sum((1, 2, 3)), torch.ones(4))
    flat = torch.ones(1, 4, 8, 8)
    blurred = blurpool.blur(flat, kernel)
    assert torch.allclose(blurred[..., 1:-1, 1:-1], flat[..., 1:-1, 1:-1])


def test_ema_smoothing_per_update_and_cadence():
    assert ema.smoothing_per_update(100, 20) == pytest.approx(0.5 ** 0.2)
    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.BatchNorm1d(2))
    average = ema.EMA(model, half_life_batches=100, update_every_batches=20)
    start = average.model[0].weight.clone()
    with torch.no_grad():
        model[0].weight.add_(1.0)
        model[1].running_mean.fill_(3.0)
    assert not average.update(model, step=19)
    assert torch.equal(average.model[0].weight, start)
    assert average.update(model, step=20)
    keep = 0.5 ** 0.2
    assert torch.allclose(average.model[0].weight, keep * start + (1 - keep) * (start + 1))
    assert torch.allclose(average.model[1].running_mean, torch.full((2,), (1 - keep) * 3.0))
    assert not average.model[0].weight.requires_grad


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


@pytest.mark.parametrize("overrides, floored", [
    ({}, {}),                                                          # Mild: no side floors
    ({"recipe": "medium", "scale_schedule_ratio": "1"}, {120: 119}),
    ({"recipe": "hot", "scale_schedule_ratio": "3"}, {100: 99})])      # ColOut: 167-px batches
def test_the_plan_trains_at_the_floored_side_and_keeps_the_pinned_one(overrides, floored):
    from submission.config import resolve
    plan = RunPlan.of(resolve("p4d", overrides), 1_281_167)
    assert set(floored) <= set(plan.sides())
    for side, first, steps in plan.side_runs():
        assert plan.side(first) == side                     # the pinned side, as the bench keys it
        assert plan.trained_side(first) == plan.trained_side(first + steps - 1) == floored.get(side, side)


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


def test_lr_schedule_warmup_then_cosine():
    peak, total, warmup = 2.048, 1000, 100
    assert schedule.lr_at(0, total, warmup, peak) == 0.0
    assert schedule.lr_at(50, total, warmup, peak) == pytest.approx(peak / 2)
    assert schedule.lr_at(100, total, warmup, peak) == pytest.approx(peak)
    assert schedule.lr_at(550, total, warmup, peak) == pytest.approx(peak / 2)
    assert schedule.lr_at(1000, total, warmup, peak) == pytest.approx(0.0, abs=1e-12)


def test_sgdw_decay_follows_the_schedule_not_the_lr():
    weight = torch.nn.Parameter(torch.ones(3))
    opt = sgdw.DecoupledSGDW([weight], lr=2.0, momentum=0.875, weight_decay=5e-4)
    weight.grad = torch.zeros(3)
    opt.step()
    assert torch.allclose(weight, torch.full((3,), 1 - 5e-4))          # lr_t / lr_0 = 1
    opt.param_groups[0]["lr"] = 0.5                                       # a quarter of lr_0
    opt.step()
    assert torch.allclose(weight, torch.full((3,), (1 - 5e-4) * (1 - 5e-4 / 4)))
    assert opt.param_groups[0]["weight_decay"] == 0.0                     # not coupled to the gradient


def test_sgdw_momentum_update_matches_plain_sgd_without_decay():
    torch.manual_seed(0)
    a, b = torch.nn.Parameter(torch.randn(4)), None
    b = torch.nn.Parameter(a.detach().clone())
    opt_a = sgdw.DecoupledSGDW([a], lr=0.1, momentum=0.875, weight_decay=0.0)
    opt_b = torch.optim.SGD([b], lr=0.1, momentum=0.875)
    for _ in range(3):
        grad = torch.randn(4)
        a.grad, b.grad = grad.clone(), grad.clone()
        opt_a.step()
        opt_b.step()
    assert torch.allclose(a, b)


def test_fused_sgdw_takes_the_grad_scaler_flag_on_the_device():
    """fused=True (used on CUDA): GradScaler hands the optimizer its scale and inf flag as
    tensors instead of reading the flag on the host; a step with an overflow changes
    nothing (weights, momentum, decay), a clean step matches the unfused optimizer."""
    torch.manual_seed(0)
    fused_model, plain_model = torch.nn.Linear(4, 3), torch.nn.Linear(4, 3)
    plain_model.load_state_dict(fused_model.state_dict())
    fused = sgdw.DecoupledSGDW(fused_model.parameters(), lr=0.1, momentum=0.875, weight_decay=5e-4,
                               fused=True)
    plain = sgdw.DecoupledSGDW(plain_model.parameters(), lr=0.1, momentum=0.875, weight_decay=5e-4)
    assert fused._step_supports_amp_scaling
    scaler = torch.amp.GradScaler("cpu", init_scale=1024.0)
    x, y = torch.randn(8, 4), torch.randn(8, 3)

    def backward(model, scale):
        model.zero_grad(set_to_none=True)
        scale(torch.nn.functional.mse_loss(model(x), y)).backward()

    for step in range(3):
        backward(fused_model, scaler.scale)
        if step == 1:
            fused_model.weight.grad[0, 0] = float("inf")
            before = copy.deepcopy((fused_model.state_dict(), fused.state_dict()["state"]))
        scaler.step(fused)
        scaler.update()
        if step == 1:
            assert all(torch.equal(before[0][k], v) for k, v in fused_model.state_dict().items())
            assert all(torch.equal(before[1][i]["momentum_buffer"], s["momentum_buffer"])
                       for i, s in fused.state_dict()["state"].items())
            assert scaler.get_scale() == 512.0                 # the scaler backed off
        else:
            backward(plain_model, lambda loss: loss)
            plain.step()
    for name, value in plain_model.state_dict().items():
        assert torch.allclose(fused_model.state_dict()[name], value, atol=1e-6), name


def test_logged_tensor_names_are_exactly_the_mlperf_reference_set():
    from importlib.resources import files
    rules = files("mlperf_logging") / "compliance_checker" / "training_2.0.0" / "closed_resnet.yaml"
    end = next(item["END"]["CHECK"] for item in yaml.safe_load(rules.read_text()) if "END" in item)
    expected = set(eval(end.split("==", 1)[1].strip().removeprefix("sorted(").removesuffix(")")))
    names = {mlperf_tensor_name(n) for n, _ in mild_model().named_parameters()}
    assert names == expected


@pytest.mark.filterwarnings("ignore:torch.cuda.amp.GradScaler is enabled, but CUDA")
def test_amp_is_fp16_with_a_grad_scaler_and_bf16_is_refused_on_an_emulating_gpu(monkeypatch):
    from submission.config import resolve
    from submission.step import autocast_for, grad_scaler
    cuda, cpu = torch.device("cuda", 0), torch.device("cpu")
    published = resolve("p4d")
    assert isinstance(grad_scaler(published, cuda), torch.amp.GradScaler)
    assert grad_scaler(published, cpu) is None
    assert grad_scaler(resolve("p4d", {"amp_dtype": "bf16"}), cuda) is None
    with autocast_for(published, cpu)():
        assert torch.get_autocast_dtype("cpu") == torch.float16
    # a V100 without a V100 descriptor (system=local): bf16 only by emulation
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True: including_emulation)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "Tesla V100-SXM2-16GB")
    with pytest.raises(RuntimeError, match="V100.*no bf16 support"):
        autocast_for(resolve("p4d", {"amp_dtype": "bf16"}), cuda)
