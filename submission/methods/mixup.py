"""MixUp (Zhang et al. 2017) as Composer v0.8.0 runs it with `interpolate_loss: false`.

One coefficient per forward pass: z ~ Beta(alpha, alpha) and Composer keeps
m = min(z, 1 - z), so m <= 0.5 is the weight of the *permuted* copy and the original
example keeps 1 - m >= 0.5 (its label stays the "main" one). Then one random permutation
of the batch:
    images  <- (1 - m) * images + m * images[perm]
    targets <- (1 - m) * targets(labels) + m * one_hot(labels[perm])
(composer/algorithms/mixup/mixup.py at v0.8.0: `_gen_mixing_coef`, `mixup_batch`, and
`MixUp.apply`, which draws both and mixes the images on Event.BEFORE_FORWARD and mixes
the targets on Event.BEFORE_LOSS). Medium: alpha 0.2, Hot: alpha 0.25.

A SAM step runs BEFORE_FORWARD in each of its two passes, each from the un-mixed batch,
so it draws twice; submission.step's `RecipeStep.mixup` is called the same way, once per
pass.

With label smoothing (both recipes also set `label_smoothing`): both algorithms act on
Event.BEFORE_LOSS, in the order of the YAML's `algorithms` keys (yahp keeps key order;
the Engine only reverses the order on AFTER_* events), and `label_smoothing` comes before
`mixup` in both recipe files. So LabelSmoothing first turns the batch's own integer labels
into smoothed dense targets, then MixUp mixes those with a plain (unsmoothed) one-hot of
the permuted labels, which it kept as integers at BEFORE_FORWARD:
    targets = (1 - m) * smooth(one_hot(y)) + m * one_hot(y[perm])
`mixed_targets(..., smooth_partner=False)` builds exactly that; smooth_partner=True
smooths both sides (the same as smoothing the mixed one-hot, since smoothing is affine).

The losses then run on dense targets: Composer's `binary_cross_entropy_with_logits`
(sum over classes / batch size, the project's `bce` loss) and `soft_cross_entropy`
(-sum_k t_k log softmax_k, mean over the batch). Both are linear in the targets, so for
either loss, mixing targets equals mixing the two losses with the same targets.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
import torch.nn.functional as F

from .loss import smoothed_one_hot


def mixing_coefficient(alpha: float, rng: np.random.Generator | None = None) -> float:
    """Weight of the permuted copy: min(z, 1 - z), z ~ Beta(alpha, alpha); 0 when alpha
    is 0. Default `rng`: numpy's global generator, as Composer (np.random.beta)."""
    if alpha < 0:
        raise ValueError(f"alpha must be >= 0, got {alpha}")
    if alpha == 0:
        return 0.0
    z = float((rng or np.random).beta(alpha, alpha))
    return min(z, 1.0 - z)


def mixup_batch(images: torch.Tensor, labels: torch.Tensor, mixing: float,
                permutation: torch.Tensor | None = None
                ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The mixed images, the labels of the mixed-in examples, and the permutation used
    (a fresh torch.randperm of the batch when none is given)."""
    if permutation is None:
        permutation = torch.randperm(images.shape[0], device=images.device)
    partner = images[permutation]
    mixed = images * (1.0 - mixing) + partner * mixing
    return mixed, labels[permutation], permutation


def mixed_targets(labels: torch.Tensor, partner_labels: torch.Tensor, mixing: float,
                  num_classes: int, smoothing: float, smooth_partner: bool = False) -> torch.Tensor:
    """Dense (N, num_classes) targets: (1 - mixing) * smoothed own labels + mixing *
    partner labels, the partner's one-hot smoothed only with smooth_partner=True
    (Composer v0.8.0's recipes: not smoothed; see the module docstring)."""
    own = smoothed_one_hot(labels, num_classes, smoothing)
    partner = (smoothed_one_hot(partner_labels, num_classes, smoothing) if smooth_partner
               else F.one_hot(partner_labels, num_classes).float())
    return own * (1.0 - mixing) + partner * mixing


def bce_on_targets(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """BCE-with-logits against dense targets, summed over classes / batch size (the
    project's `bce` loss, and Composer's, when the targets are already dense)."""
    summed = F.binary_cross_entropy_with_logits(logits.float(), targets, reduction="sum")
    return summed / logits.shape[0]


def soft_cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Cross-entropy against dense targets: -sum_k t_k log softmax(logits)_k, batch mean."""
    return -(targets * F.log_softmax(logits.float(), dim=1)).sum(dim=1).mean()


TARGET_LOSSES: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "bce": bce_on_targets, "cross_entropy": soft_cross_entropy}


def mixup_loss_fn(loss: str, labels_of_partner: torch.Tensor, mixing: float,
                  smooth_partner: bool = False) -> Callable:
    """A loss with the project's signature (logits, labels, smoothing) for one mixed
    batch: it builds the mixed targets from the batch's own labels and scores `logits`
    against them with the dense-target version of `loss` ("bce" or "cross_entropy")."""
    on_targets = TARGET_LOSSES[loss]

    def mixed_loss(logits: torch.Tensor, labels: torch.Tensor, smoothing: float) -> torch.Tensor:
        targets = mixed_targets(labels, labels_of_partner, mixing, logits.shape[1], smoothing,
                                smooth_partner)
        return on_targets(logits, targets)
    return mixed_loss
