"""torchvision ResNet-50 with the recipe's initialisation and (optionally) BlurPool."""
from __future__ import annotations

import math

import torch
import torchvision
from torch import nn

from .config import Config
from .methods.blurpool import apply_blurpool


def initialize(model: nn.Module, conv: str, bn_gamma: str, logit_bias: str) -> None:
    """Published init: Kaiming-normal (fan-in) convs and linear, BN gamma ~ U(0,1),
    beta 0, final bias -log(num_classes) (a prior of 1/K per class under the BCE loss)."""
    for module in model.modules():
        if isinstance(module, (nn.Conv2d, nn.Linear)) and conv == "kaiming_normal":
            nn.init.kaiming_normal_(module.weight, mode="fan_in", nonlinearity="relu")
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.BatchNorm2d):
            if bn_gamma == "uniform":
                nn.init.uniform_(module.weight, 0.0, 1.0)
            else:
                nn.init.ones_(module.weight)
            nn.init.zeros_(module.bias)
    fc = model.fc
    assert isinstance(fc, nn.Linear), fc
    if logit_bias == "log_prior":
        nn.init.constant_(fc.bias, -math.log(fc.out_features))
    else:
        nn.init.zeros_(fc.bias)


def build_model(num_classes: int, *, blurpool: bool, init_conv: str, init_bn_gamma: str,
                logit_bias_init: str, zero_init_residual: bool, channels_last: bool) -> nn.Module:
    model = torchvision.models.resnet50(weights=None, num_classes=num_classes)
    initialize(model, init_conv, init_bn_gamma, logit_bias_init)
    if zero_init_residual:
        for block in model.modules():
            if isinstance(block, torchvision.models.resnet.Bottleneck):
                nn.init.zeros_(block.bn3.weight)
    if blurpool:
        apply_blurpool(model)
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
    return model


def model_from_config(config: Config, num_classes: int) -> nn.Module:
    return build_model(num_classes, blurpool=config.blurpool, init_conv=config.init_conv,
                       init_bn_gamma=config.init_bn_gamma, logit_bias_init=config.logit_bias_init,
                       zero_init_residual=config.zero_init_residual,
                       channels_last=config.channels_last)
