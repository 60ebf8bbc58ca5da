"""submission.methods.sam (Medium, Hot): the two-pass update against a hand computation
of Composer v0.8.0's definition, with a GradScaler and decoupled SGDW, its interval, and
its first pass unsynchronised under DDP."""
import copy

import pytest
import torch
from torch import nn

from submission.methods import sam, sgdw
from submission.step import optimizer_step

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

    def loss_fn(out, labels, smoothing):
        return 0.5 * ((out - Y) ** 2).sum() / out.shape[0]

    import contextlib
    for _ in range(2):
        optimizer_step(net, opt, None, contextlib.nullcontext, loss_fn, X,
                       torch.zeros(4, dtype=torch.long), 0.0)
    assert net.calls == [False, True, False]          # plain; SAM: unsynced, then synced


DDP_WORKER = f"""
import contextlib, os, sys
import torch, torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from submission.methods import sam
from submission.step import optimizer_step
rank, init_file, out = int(sys.argv[1]), sys.argv[2], sys.argv[3]
dist.init_process_group("gloo", init_method="file://" + init_file, rank=rank, world_size=2)
X, Y = torch.tensor({X.tolist()!r}), torch.tensor({Y.tolist()!r})
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
"""


@pytest.mark.e2e
def test_sam_under_ddp_ascends_per_rank_and_all_reduces_the_second_gradient(tmp_path):
    import subprocess
    import sys

    from conftest import REPO as repo
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
