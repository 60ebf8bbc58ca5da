"""submission.methods.sgdw: decoupled weight decay that follows the schedule, momentum as
plain SGD's, and the fused optimizer's GradScaler hand-off."""
import copy

import torch

from submission.methods import sgdw


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
