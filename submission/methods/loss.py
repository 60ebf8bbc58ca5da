"""Classification losses on integer labels, with label smoothing.

bce: binary cross-entropy with logits against smoothed one-hot targets, summed over
classes and divided by the batch size. PyTorch's default mean over N*K entries would
be K (1000) times smaller, too small to learn with the recipe's learning rates.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F


def smoothed_one_hot(labels: torch.Tensor, num_classes: int, smoothing: float) -> torch.Tensor:
    targets = F.one_hot(labels, num_classes).float()
    return targets * (1.0 - smoothing) + smoothing / num_classes


def bce_loss(logits: torch.Tensor, labels: torch.Tensor, smoothing: float) -> torch.Tensor:
    targets = smoothed_one_hot(labels, logits.shape[1], smoothing)
    summed = F.binary_cross_entropy_with_logits(logits.float(), targets, reduction="sum")
    return summed / logits.shape[0]


def cross_entropy_loss(logits: torch.Tensor, labels: torch.Tensor, smoothing: float) -> torch.Tensor:
    return F.cross_entropy(logits.float(), labels, label_smoothing=smoothing)

LOSSES = {"bce": bce_loss, "cross_entropy": cross_entropy_loss}
