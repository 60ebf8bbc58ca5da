"""Stochastic depth (Huang et al. 2016) on torchvision ResNet Bottleneck blocks, as
Composer v0.8.0 (composer/algorithms/stochastic_depth/, stochastic_layers.py).

Drop rates: with `linear` distribution the i-th Bottleneck (0-based, in module order) of
n gets drop_rate * (i + 1) / n, so in ResNet-50 (n = 16) from 0.1/16 up to 0.1 on the
last block; `uniform` gives every block drop_rate.

Two methods, both leaving the residual branch F(x) = bn3(conv3(...)) *unscaled at train
time* (no 1/keep factor, unlike timm's DropPath) and scaling it by keep = 1 - rate at
evaluation, so that evaluation computes the expected branch: relu(shortcut(x) + keep*F(x)).
Evaluation is therefore deterministic but not the plain block unless the rate is 0.
- "sample" (the Hot recipe's `stochastic_method: sample`): the branch is computed for
  the whole batch and each sample's branch is kept with probability keep
  (mask = floor(keep + U[0,1)), one draw per sample and block), then
  relu(shortcut + mask * F(x)).
- "block" (the original paper; Composer's default): one draw per block and forward: when
  dropped the branch is not computed and the block returns shortcut(x), passed through
  relu when the shortcut is the downsample projection; the draw is on the host
  (`bool(torch.bernoulli(...))`), a graph break under torch.compile, and DDP must then
  find unused parameters.

drop_warmup: Composer can ramp the overall rate linearly from 0 over the first
`drop_warmup` fraction of training, but refuses a non-zero warmup with "sample". The Hot
recipe sets `drop_warmup: 0.0dur`, i.e. none, so the rates here are fixed for the run.

`apply_stochastic_depth` swaps each Bottleneck for a StochasticBottleneck that holds the
same submodules under the same names, so parameter and state-dict names are unchanged.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, get_args

import torch
from torch import nn

from .declarations.stochastic_depth import StochasticDepthDistribution, StochasticDepthMethod

METHODS, DISTRIBUTIONS = get_args(StochasticDepthMethod), get_args(StochasticDepthDistribution)

if TYPE_CHECKING:
    from torchvision.models.resnet import Bottleneck


class StochasticBottleneck(nn.Module):
    """A torchvision Bottleneck's modules with a stochastic residual branch."""
    conv1: nn.Module
    bn1: nn.Module
    conv2: nn.Module
    bn2: nn.Module
    conv3: nn.Module
    bn3: nn.Module
    relu: nn.Module
    downsample: nn.Module | None

    def __init__(self, block: Bottleneck, drop_rate: float, method: StochasticDepthMethod = "sample"):
        super().__init__()
        if method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}, got {method!r}")
        for name in ("conv1", "bn1", "conv2", "bn2", "conv3", "bn3", "relu", "downsample"):
            setattr(self, name, getattr(block, name))
        self.stride = block.stride
        self.drop_rate = float(drop_rate)
        self.method = method

    def branch(self, x: torch.Tensor) -> torch.Tensor:
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        return self.bn3(self.conv3(out))

    def shortcut(self, x: torch.Tensor) -> torch.Tensor:
        return x if self.downsample is None else self.downsample(x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        keep = 1.0 - self.drop_rate
        if not self.training:
            out = self.branch(x)
            if self.drop_rate:
                out = out * keep
            return self.relu(out + self.shortcut(x))
        if self.method == "block":
            if self.drop_rate and not bool(torch.bernoulli(torch.tensor(keep))):
                return x if self.downsample is None else self.relu(self.downsample(x))
            return self.relu(self.branch(x) + self.shortcut(x))
        out = self.branch(x)
        if self.drop_rate:
            shape = (x.shape[0],) + (1,) * (out.dim() - 1)
            mask = torch.floor(keep + torch.rand(shape, dtype=out.dtype, device=out.device))
            out = out * mask
        return self.relu(out + self.shortcut(x))


def block_drop_rates(count: int, drop_rate: float,
                     distribution: StochasticDepthDistribution = "linear") -> list[float]:
    """The drop rate of each of `count` blocks, in order."""
    if distribution not in DISTRIBUTIONS:
        raise ValueError(f"distribution must be one of {DISTRIBUTIONS}, got {distribution!r}")
    if not 0.0 <= drop_rate <= 1.0:
        raise ValueError(f"drop_rate must be in [0, 1], got {drop_rate}")
    if distribution == "uniform":
        return [drop_rate] * count
    return [drop_rate * (i + 1) / count for i in range(count)]


def _bottlenecks(model: nn.Module, kind: type) -> list[tuple[nn.Module, str, nn.Module]]:
    """(parent, attribute name, block) for every block of type `kind`, in module order."""
    found = []
    for parent in model.modules():
        for name, child in parent.named_children():
            if isinstance(child, kind):
                found.append((parent, name, child))
    return found


def apply_stochastic_depth(model: nn.Module, drop_rate: float = 0.1, method: StochasticDepthMethod = "sample",
                           distribution: StochasticDepthDistribution = "linear") -> nn.Module:
    """Replace every Bottleneck of `model` in place; returns the model."""
    from torchvision.models.resnet import Bottleneck  # torchvision takes seconds to import
    blocks = _bottlenecks(model, Bottleneck)
    for (parent, name, block), rate in zip(blocks, block_drop_rates(len(blocks), drop_rate,
                                                                     distribution)):
        setattr(parent, name, StochasticBottleneck(block, rate, method))
    return model
