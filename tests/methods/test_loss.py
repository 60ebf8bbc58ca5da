"""submission.methods.loss: the recipe's BCE loss (summed over classes, divided by the
batch) and its label-smoothed targets."""
import math

import pytest
import torch

from submission.methods import loss


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
