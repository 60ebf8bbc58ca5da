"""submission.model: ResNet-50 initialised as the published Mild configuration."""
import math

import pytest
import torch

from conftest import mild_model


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
