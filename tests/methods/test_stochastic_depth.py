"""submission.methods.stochastic_depth (Hot): drop rates over ResNet-50's blocks, and
what a block computes in evaluation and training, against the plain torchvision block."""
import copy

import pytest
import torch
import torchvision
from torch import nn
from torchvision.models.resnet import Bottleneck

from submission.methods import stochastic_depth


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
