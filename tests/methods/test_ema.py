"""submission.methods.ema: the exponential moving average of the weights and its cadence."""
import pytest
import torch

from submission.methods import ema


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
