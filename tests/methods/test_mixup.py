"""submission.methods.mixup (Medium, Hot): the mixing coefficient, the mixed batch and
targets, and the loss on them, against a hand computation of Composer v0.8.0's definition."""
import math

import numpy as np
import pytest
import torch

from submission.methods import loss, mixup


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
