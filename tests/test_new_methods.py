"""The Medium / Hot recipes' methods (MixUp, SAM, stochastic depth, ColOut), each pinned
against a hand computation of Composer v0.8.0's definition, on the CPU."""
import copy
import math

import numpy as np
import pytest
import torch
import torchvision
from torch import nn
from torchvision.models.resnet import Bottleneck

from submission.methods import colout, loss, mixup, sam, sgdw, stochastic_depth
from submission.step import optimizer_step


# --------------------------------------------------------------------------- MixUp
def test_mixing_coefficient_keeps_the_smaller_side_of_the_beta_draw():
    z = np.random.default_rng(3).beta(0.2, 0.2)
    assert mixup.mixing_coefficient(0.2, np.random.default_rng(3)) == pytest.approx(min(z, 1 - z))
    rng = np.random.default_rng(0)
    draws = [mixup.mixing_coefficient(0.25, rng) for _ in range(500)]
    assert all(0.0 <= m <= 0.5 for m in draws)
    assert max(draws) > 0.3                  # not degenerate
    assert mixup.mixing_coefficient(0.0) == 0.0
    # numpy's global generator by default, as Composer's np.random.beta
    np.random.seed(7)
    z = np.random.beta(0.2, 0.2)
    np.random.seed(7)
    assert mixup.mixing_coefficient(0.2) == pytest.approx(min(z, 1 - z))


def test_mixup_batch_mixes_each_image_with_its_permuted_partner():
    x = torch.arange(16, dtype=torch.float32).view(4, 1, 2, 2)
    y = torch.tensor([3, 1, 0, 2])
    perm = torch.tensor([2, 0, 3, 1])
    mixed, partner, used = mixup.mixup_batch(x, y, 0.25, perm)
    for i in range(4):
        assert torch.allclose(mixed[i], 0.75 * x[i] + 0.25 * x[perm[i]])
    assert partner.tolist() == [0, 3, 2, 1]
    assert used is perm
    torch.manual_seed(0)
    _, _, drawn = mixup.mixup_batch(x, y, 0.1)
    assert sorted(drawn.tolist()) == [0, 1, 2, 3]


def test_mixed_targets_and_bce_against_a_hand_computation():
    logits = torch.tensor([[2.0, -1.0, 0.5], [0.0, 1.0, -2.0]])
    labels, perm, m, s, K = torch.tensor([0, 2]), torch.tensor([1, 0]), 0.3, 0.1, 3
    partner = labels[perm]
    targets = mixup.mixed_targets(labels, partner, m, K, s)
    total = 0.0
    for i, row in enumerate(logits.tolist()):
        for k, z in enumerate(row):
            own = (1 - s) * (k == labels[i].item()) + s / K           # smoothed by LabelSmoothing
            other = float(k == partner[i].item())                      # MixUp's one-hot, unsmoothed
            t = (1 - m) * own + m * other
            assert targets[i, k].item() == pytest.approx(t, abs=1e-7)
            p = 1 / (1 + math.exp(-z))
            total += -(t * math.log(p) + (1 - t) * math.log(1 - p))
    assert mixup.bce_on_targets(logits, targets).item() == pytest.approx(total / 2, rel=1e-6)
    # the loss with the project's signature (logits, labels, smoothing) gives the same
    fn = mixup.mixup_loss_fn("bce", partner, m)
    assert fn(logits, labels, s).item() == pytest.approx(total / 2, rel=1e-6)
    # both losses are linear in the targets: mixing targets == mixing the two losses
    assert fn(logits, labels, s).item() == pytest.approx(
        (1 - m) * loss.bce_loss(logits, labels, s).item() + m * loss.bce_loss(logits, partner, 0.0).item(),
        rel=1e-6)
    both = mixup.mixup_loss_fn("bce", partner, m, smooth_partner=True)(logits, labels, s)
    assert both.item() == pytest.approx(
        (1 - m) * loss.bce_loss(logits, labels, s).item() + m * loss.bce_loss(logits, partner, s).item(),
        rel=1e-6)
    ce = mixup.mixup_loss_fn("cross_entropy", partner, m, smooth_partner=True)(logits, labels, s)
    assert ce.item() == pytest.approx(
        (1 - m) * loss.cross_entropy_loss(logits, labels, s).item()
        + m * loss.cross_entropy_loss(logits, partner, s).item(), rel=1e-6)


def test_mixed_targets_sum_to_one():
    t = mixup.mixed_targets(torch.tensor([0, 4, 2]), torch.tensor([4, 2, 0]), 0.4, 5, 0.13)
    assert torch.allclose(t.sum(dim=1), torch.ones(3))


# --------------------------------------------------------------------------- SAM
X = torch.tensor([[1.0, -2.0, 0.5], [0.3, 0.7, -1.0], [2.0, 0.1, 0.4], [-0.5, 1.5, 1.0]])
Y = torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.5, -0.5], [2.0, 1.0]])


def tiny_model():
    torch.manual_seed(0)
    return nn.Linear(3, 2)


def mse(model, x=X, y=Y):
    return 0.5 * ((model(x) - y) ** 2).sum() / x.shape[0]


def hand_grads(w, b):
    """dL/dW, dL/db of mse by hand."""
    r = X @ w.T + b - Y
    return r.T @ X / X.shape[0], r.sum(0) / X.shape[0]


def hand_sam_point(w, b, rho, eps=1e-12):
    gw, gb = hand_grads(w, b)
    norm = torch.sqrt((gw ** 2).sum() + (gb ** 2).sum())
    return hand_grads(w + rho * gw / (norm + eps), b + rho * gb / (norm + eps))


def closure_for(model, optimizer_scaler=None):
    def closure(sync):
        loss = mse(model)
        (optimizer_scaler.scale(loss) if optimizer_scaler else loss).backward()
        return loss.detach()
    return closure


def test_sam_step_is_the_hand_computed_two_step_update():
    model = tiny_model()
    w, b = model.weight.detach().clone(), model.bias.detach().clone()
    opt = sam.SAM(torch.optim.SGD(model.parameters(), lr=0.1), rho=0.5, epsilon=1e-12, interval=1)
    loss0 = opt.step(closure_for(model))
    gw2, gb2 = hand_sam_point(w, b, 0.5)
    assert torch.allclose(model.weight, w - 0.1 * gw2, atol=1e-6)
    assert torch.allclose(model.bias, b - 0.1 * gb2, atol=1e-6)
    # the returned loss is the one at w (the first pass)
    ref = tiny_model()
    assert loss0.item() == pytest.approx(mse(ref).item(), rel=1e-6)
    # and SAM differs from a plain step (the ascent matters)
    gw, _ = hand_grads(w, b)
    assert not torch.allclose(model.weight, w - 0.1 * gw, atol=1e-4)


@pytest.mark.parametrize("fused", [False, True])   # fused: the scaler hands found_inf to the kernel
def test_sam_with_decoupled_sgdw_decays_and_steps_from_the_restored_weights(fused):
    model = tiny_model()
    w, b = model.weight.detach().clone(), model.bias.detach().clone()
    base = sgdw.DecoupledSGDW(model.parameters(), lr=0.2, momentum=0.875, weight_decay=5e-4,
                              fused=fused)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 12) if fused else None
    sam.SAM(base, rho=0.5, interval=1).step(closure_for(model, scaler), scaler)
    gw2, gb2 = hand_sam_point(w, b, 0.5)
    # first step: the momentum buffer is the gradient; decay (1 - 5e-4 * lr/lr0) of w
    assert torch.allclose(model.weight, w * (1 - 5e-4) - 0.2 * gw2, atol=1e-6)
    assert torch.allclose(model.bias, b * (1 - 5e-4) - 0.2 * gb2, atol=1e-6)


@pytest.mark.parametrize("epsilon", [1e-12, 0.5])    # a large epsilon shows the unscaling
def test_sam_with_a_grad_scaler_matches_the_unscaled_update(epsilon):
    model = tiny_model()
    w, b = model.weight.detach().clone(), model.bias.detach().clone()
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 12)
    opt = sam.SAM(torch.optim.SGD(model.parameters(), lr=0.1), rho=0.5, epsilon=epsilon, interval=1)
    opt.step(closure_for(model, scaler), scaler)
    gw2, gb2 = hand_sam_point(w, b, 0.5, epsilon)
    assert torch.allclose(model.weight, w - 0.1 * gw2, atol=1e-6)
    assert torch.allclose(model.bias, b - 0.1 * gb2, atol=1e-6)
    assert scaler.get_scale() == 2.0 ** 12             # no overflow, no growth yet


def test_sam_overflow_in_the_first_pass_skips_the_step_and_backs_off_the_scale():
    model = tiny_model()
    before = copy.deepcopy(model.state_dict())
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 12)
    opt = sam.SAM(torch.optim.SGD(model.parameters(), lr=0.1), rho=0.5, interval=1)
    passes = []

    def closure(sync):
        passes.append(sync)
        loss = mse(model) * float("inf")
        scaler.scale(loss).backward()
        return loss.detach()
    opt.step(closure, scaler)
    assert passes == [False]                           # no second pass
    for k, v in model.state_dict().items():
        assert torch.equal(v, before[k])
    assert scaler.get_scale() == 2.0 ** 11
    assert opt.steps == 1


def test_sam_overflow_in_the_second_pass_restores_the_weights():
    model = tiny_model()
    before = copy.deepcopy(model.state_dict())
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 12)
    opt = sam.SAM(torch.optim.SGD(model.parameters(), lr=0.1), rho=0.5, interval=1)

    def closure(sync):
        loss = mse(model) * (1.0 if not sync else float("inf"))
        scaler.scale(loss).backward()
        return loss.detach()
    opt.step(closure, scaler)
    for k, v in model.state_dict().items():
        assert torch.allclose(v, before[k], atol=1e-7)
    assert scaler.get_scale() == 2.0 ** 11


def test_sam_runs_every_interval_th_step_and_plain_sgd_otherwise():
    model, twin = tiny_model(), tiny_model()
    opt = sam.SAM(torch.optim.SGD(model.parameters(), lr=0.1), rho=0.5, interval=3)
    plain = torch.optim.SGD(twin.parameters(), lr=0.1)
    passes = []

    def closure(sync):
        passes.append(sync)
        loss = mse(model)
        loss.backward()
        return loss.detach()
    for _ in range(2):                                 # steps 1, 2: plain
        opt.step(closure)
        plain.zero_grad()
        mse(twin).backward()
        plain.step()
    assert torch.equal(model.weight, twin.weight) and torch.equal(model.bias, twin.bias)
    assert passes == [True, True]
    w, b = model.weight.detach().clone(), model.bias.detach().clone()
    opt.step(closure)                                  # step 3: SAM, first pass unsynchronised
    assert passes == [True, True, False, True]
    gw2, gb2 = hand_sam_point(w, b, 0.5)
    assert torch.allclose(model.weight, w - 0.1 * gw2, atol=1e-6)
    for _ in range(3):
        opt.step(closure)
    assert passes[4:] == [True, True, False, True]
    assert opt.steps == 6


class RecordingNet(nn.Module):
    """A stand-in for DistributedDataParallel: records whether a pass ran under no_sync."""

    def __init__(self, module):
        super().__init__()
        self.module, self.unsynced, self.calls = module, False, []

    def forward(self, x):
        self.calls.append(self.unsynced)
        return self.module(x)

    def no_sync(self):
        net = self

        class _Ctx:
            def __enter__(self):
                net.unsynced = True

            def __exit__(self, *exc):
                net.unsynced = False
        return _Ctx()


def test_the_recipe_step_runs_the_first_sam_pass_under_no_sync():
    model = tiny_model()
    net = RecordingNet(model)
    opt = sam.SAM(torch.optim.SGD(model.parameters(), lr=0.1), rho=0.5, interval=2)
    loss_fn = lambda out, labels, smoothing: 0.5 * ((out - Y) ** 2).sum() / out.shape[0]  # noqa: E731
    import contextlib
    for _ in range(2):
        optimizer_step(net, opt, None, contextlib.nullcontext, loss_fn, X,
                       torch.zeros(4, dtype=torch.long), 0.0)
    assert net.calls == [False, True, False]          # plain; SAM: unsynced, then synced


# --------------------------------------------------------------------------- stochastic depth
def small_block(downsample: bool):
    torch.manual_seed(1)
    if downsample:
        ds = nn.Sequential(nn.Conv2d(8, 16, 1, stride=2, bias=False), nn.BatchNorm2d(16))
        block = Bottleneck(8, 4, stride=2, downsample=ds)
    else:
        block = Bottleneck(16, 4)
    for m in block.modules():          # non-trivial BN statistics and affine parameters
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 2.0)
            nn.init.uniform_(m.weight, 0.5, 1.5)
            nn.init.uniform_(m.bias, -0.2, 0.2)
    return block


def reference_parts(block, x):
    """(branch, shortcut) of the plain torchvision block, in its current mode."""
    out = block.relu(block.bn1(block.conv1(x)))
    out = block.relu(block.bn2(block.conv2(out)))
    out = block.bn3(block.conv3(out))
    return out, (x if block.downsample is None else block.downsample(x))


def test_linear_drop_rates_over_resnet50_and_names_unchanged():
    model = torchvision.models.resnet50(weights=None)
    keys = list(model.state_dict())
    stochastic_depth.apply_stochastic_depth(model, 0.1, "sample", "linear")
    blocks = [m for m in model.modules() if isinstance(m, stochastic_depth.StochasticBottleneck)]
    assert len(blocks) == 16
    assert not any(isinstance(m, Bottleneck) for m in model.modules())
    assert [b.drop_rate for b in blocks] == pytest.approx([0.1 * (i + 1) / 16 for i in range(16)])
    assert model.layer4[2].drop_rate == pytest.approx(0.1)
    assert list(model.state_dict()) == keys
    stochastic_depth.set_drop_rate(model, 0.05)
    assert model.layer4[2].drop_rate == pytest.approx(0.05)
    assert stochastic_depth.block_drop_rates(4, 0.2, "uniform") == [0.2] * 4


@pytest.mark.parametrize("downsample", [False, True])
@pytest.mark.parametrize("method", ["sample", "block"])
def test_evaluation_is_the_expected_branch_and_rate_zero_is_the_plain_block(downsample, method):
    block = small_block(downsample).eval()
    x = torch.randn(4, 8 if downsample else 16, 6, 6)
    with torch.no_grad():
        plain = block(x)
        branch, short = reference_parts(block, x)
        stochastic = stochastic_depth.StochasticBottleneck(copy.deepcopy(block), 0.3, method).eval()
        assert torch.allclose(stochastic(x), torch.relu(0.7 * branch + short), atol=1e-6)
        assert torch.equal(stochastic(x), stochastic(x))                       # deterministic
        zero = stochastic_depth.StochasticBottleneck(copy.deepcopy(block), 0.0, method).eval()
        assert torch.equal(zero(x), plain)
        assert torch.equal(zero.train()(x), copy.deepcopy(block).train()(x))   # rate 0: no drops


@pytest.mark.parametrize("downsample", [False, True])
def test_sample_method_drops_whole_samples_and_averages_to_the_expectation(downsample):
    block = small_block(downsample).train()
    x = torch.randn(6, 8 if downsample else 16, 4, 4)
    with torch.no_grad():
        branch, short = reference_parts(copy.deepcopy(block), x)   # BN on batch statistics
        full, dropped = torch.relu(branch + short), torch.relu(short)
        layer = stochastic_depth.StochasticBottleneck(block, 0.4, "sample").train()
        torch.manual_seed(0)
        # 400 copies of the batch in one pass: the same BN batch statistics, 400 draws each
        n = 400
        out = layer(x.repeat(n, 1, 1, 1)).view(n, *full.shape)
        is_full = (out - full).flatten(2).abs().amax(2) < 1e-4
        is_dropped = (out - dropped).flatten(2).abs().amax(2) < 1e-4
        assert bool((is_full | is_dropped).all())         # each sample is all-or-nothing
    assert is_full.float().mean().item() == pytest.approx(0.6, abs=0.02)
    assert 0 < int(is_full[0].sum()) < x.shape[0]          # drawn per sample, not per batch
    total = out.sum(0)
    expected = 0.6 * full + 0.4 * dropped                 # no 1/keep rescaling at train time
    assert torch.allclose(total / n, expected, atol=0.05 * expected.abs().max().item())


def test_block_method_drops_the_whole_branch_for_the_whole_batch():
    block = small_block(True).train()
    x = torch.randn(2, 8, 2, 2)
    with torch.no_grad():
        branch, short = reference_parts(copy.deepcopy(block), x)
        full, dropped = torch.relu(branch + short), torch.relu(short)
        layer = stochastic_depth.StochasticBottleneck(block, 0.25, "block").train()
        torch.manual_seed(0)
        outcomes = []
        for _ in range(200):
            out = layer(x)
            if torch.allclose(out, full, atol=1e-5):
                outcomes.append(1)
            else:
                assert torch.allclose(out, dropped, atol=1e-5)
                outcomes.append(0)
    assert sum(outcomes) / len(outcomes) == pytest.approx(0.75, abs=0.08)


def test_drop_warmup_ramps_linearly_and_is_refused_with_the_sample_method():
    assert stochastic_depth.drop_rate_at(0.05, 0.1, 0.1, "block") == pytest.approx(0.05)
    assert stochastic_depth.drop_rate_at(0.5, 0.1, 0.1, "block") == pytest.approx(0.1)
    assert stochastic_depth.drop_rate_at(0.0, 0.1, 0.0, "sample") == pytest.approx(0.1)
    with pytest.raises(ValueError):
        stochastic_depth.drop_rate_at(0.0, 0.1, 0.1, "sample")


# --------------------------------------------------------------------------- ColOut
def test_colout_shapes_follow_composers_floor():
    x = torch.zeros(2, 3, 176, 176)
    assert colout.colout_batch(x, 0.05, 0.05).shape == (2, 3, 167, 167)
    assert colout.colout_batch(torch.zeros(1, 3, 88, 40), 0.05, 0.25).shape == (1, 3, 83, 30)
    assert colout.colout_batch(x, 0.0, 0.0).shape == x.shape


def test_colout_removes_the_same_seeded_rows_and_columns_from_every_image():
    n, c, h, w = 3, 2, 20, 24
    x = torch.arange(n * c * h * w, dtype=torch.float32).view(n, c, h, w)
    out = colout.colout_batch(x, 0.25, 0.25, torch.Generator().manual_seed(5))
    g = torch.Generator().manual_seed(5)          # Composer: rows, then columns, from randperm
    rows = sorted(torch.randperm(h, generator=g)[:15].tolist())
    cols = sorted(torch.randperm(w, generator=g)[:18].tolist())
    assert out.shape == (n, c, 15, 18)
    for i, r in enumerate(rows):
        for j, col in enumerate(cols):
            assert torch.equal(out[:, :, i, j], x[:, :, r, col])
    # the global generator by default, like Composer's torch.randperm
    torch.manual_seed(11)
    a = colout.colout_batch(x, 0.25, 0.25)
    torch.manual_seed(11)
    assert torch.equal(a, colout.colout_batch(x, 0.25, 0.25))
    # the removed rows: exactly the complement, and a different seed removes others
    removed = sorted(set(range(h)) - set(rows))
    assert len(removed) == 5
    other = colout.colout_batch(x, 0.25, 0.25, torch.Generator().manual_seed(6))
    assert not torch.equal(other, out)


# --------------------------------------------------------------------------- SAM under DDP
DDP_WORKER = """
import contextlib, os, sys
import torch, torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from submission.methods import sam
from submission.step import optimizer_step
rank, init_file, out = int(sys.argv[1]), sys.argv[2], sys.argv[3]
dist.init_process_group("gloo", init_method="file://" + init_file, rank=rank, world_size=2)
X, Y = torch.tensor(%r), torch.tensor(%r)
torch.manual_seed(0)
model = nn.Linear(3, 2)
net = DistributedDataParallel(model)
x, y = X[2 * rank:2 * rank + 2], Y[2 * rank:2 * rank + 2]       # each rank its own half
loss_fn = lambda o, labels, s: 0.5 * ((o - y) ** 2).sum() / o.shape[0]
opt = sam.SAM(torch.optim.SGD(model.parameters(), lr=0.1), rho=0.5, interval=1)
optimizer_step(net, opt, None, contextlib.nullcontext, loss_fn, x,
               torch.zeros(2, dtype=torch.long), 0.0)
torch.save(model.state_dict(), out)
os._exit(0)        # skips a slow interpreter teardown
""" % (X.tolist(), Y.tolist())


def test_sam_under_ddp_ascends_per_rank_and_all_reduces_the_second_gradient(tmp_path):
    import subprocess
    import sys
    from pathlib import Path
    repo = Path(__file__).resolve().parent.parent
    procs = [subprocess.Popen([sys.executable, "-c", DDP_WORKER, str(r), str(tmp_path / "init"),
                               str(tmp_path / f"rank{r}.pt")], cwd=repo) for r in range(2)]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    got = [torch.load(tmp_path / f"rank{r}.pt") for r in range(2)]
    w0, b0 = tiny_model().weight.detach(), tiny_model().bias.detach()

    def grads(w, b, x, y):
        r = x @ w.T + b - y
        return r.T @ x / x.shape[0], r.sum(0) / x.shape[0]
    second = []
    for rank in range(2):
        x, y = X[2 * rank:2 * rank + 2], Y[2 * rank:2 * rank + 2]
        gw, gb = grads(w0, b0, x, y)                    # this rank's own gradient: no all-reduce
        norm = torch.sqrt((gw ** 2).sum() + (gb ** 2).sum())
        second.append(grads(w0 + 0.5 * gw / norm, b0 + 0.5 * gb / norm, x, y))
    gw2 = (second[0][0] + second[1][0]) / 2             # the second gradient, averaged by DDP
    gb2 = (second[0][1] + second[1][1]) / 2
    for g in got:
        assert torch.allclose(g["weight"], w0 - 0.1 * gw2, atol=1e-6)
        assert torch.allclose(g["bias"], b0 - 0.1 * gb2, atol=1e-6)
    # an ascent from the all-reduced first gradient would land elsewhere
    gw, gb = hand_grads(w0, b0)
    norm = torch.sqrt((gw ** 2).sum() + (gb ** 2).sum())
    gwa, _ = hand_grads(w0 + 0.5 * gw / norm, b0 + 0.5 * gb / norm)
    assert not torch.allclose(got[0]["weight"], w0 - 0.1 * gwa, atol=1e-4)
