"""RandAugment on a batch (the device loader's): each kind of operation against its PIL
reference at the same values, and the draws: per image, as randaugment.py draws them."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

from submission.data.pillow_build import SIMD, pillow_build
from submission.data.synthetic_images import FolderShape, picture
from submission.methods import randaugment, randaugment_batch

# Photo-like images (a hue, stripes, noise, shapes), not square: height and width kept apart
SHAPE = FolderShape(classes=4, train_per_class=4, val_per_class=1, sides=(48, 64))
IMAGES = [picture(k % 4, k, "train", SHAPE).crop((0, 0, 44, 36)) for k in range(12)]
BATCH = torch.stack([torch.from_numpy(np.array(image)).permute(2, 0, 1) for image in IMAGES])

# the largest grey-level difference from PIL, and the share of pixels allowed to differ by it:
# lookups, blends and whole-pixel shifts are exact (2026-11-27, on the CPU: every kind was);
# a warp's bilinear samples and autocontrast's scale may round the other way on another device
TOLERANCE = {"rotate": (1, 0.005), "shear_x": (1, 0.005), "shear_y": (1, 0.005), "autocontrast": (1, 0.005)}
if pillow_build().startswith(SIMD):
    # Pillow-SIMD's RGB -> L (SSE4, 15-bit weights 9798, 19235, 3735) is one level off Pillow's
    # on about 0.05% of pixels (2026-11-27); Color's blend multiplies that by up to |factor - 1|
    TOLERANCE["color"] = (10, 0.01)
OPERATIONS = {operation.kind: operation for operation in randaugment.AUGMENTATION_SETS["all"]}


@pytest.mark.parametrize("kind", sorted(OPERATIONS))
def test_each_kind_on_a_batch_is_its_pil_operation_at_each_images_value(kind):
    operation = OPERATIONS[kind]
    values = (operation.draw(10, np.random.default_rng(1), len(IMAGES)) if operation.draw
              else np.zeros(len(IMAGES)))
    batch = randaugment_batch.KINDS[kind](BATCH, values)
    most, share = TOLERANCE.get(kind, (0, 0.0))
    for image, value, mine in zip(IMAGES, values, batch):
        reference = np.asarray(operation.apply(image, value if operation.draw else None)).astype(int)
        difference = np.abs(mine.permute(1, 2, 0).numpy().astype(int) - reference)
        assert difference.max() <= most and (difference > 0).mean() <= share, (kind, value, difference.max())
    if kind not in ("autocontrast", "equalize"):       # a value that changes the image changes it
        assert not torch.equal(batch, BATCH)


def test_the_values_of_a_batch_differ_image_to_image_and_their_levels_follow_u_01_severity():
    count, severity = 20_000, 7
    (chosen, values), = randaugment_batch.draw(count, severity, 1, "all", np.random.default_rng(0))
    operations = randaugment.AUGMENTATION_SETS["all"]
    assert np.bincount(chosen, minlength=len(operations)).min() > count / len(operations) * 0.85
    for name, level_of in (("shear_x", lambda v: np.abs(v) / 0.3 * 10),
                           ("translate_y", np.abs),
                           ("posterize", None)):
        mine = values[chosen == [op.kind for op in operations].index(name)]
        assert len(np.unique(mine)) > (2 if level_of is None else len(mine) * 0.9)
        if level_of is None:                                  # 4 - int(level x 4 / 10): 1..4 bits
            assert set(np.unique(mine)) <= {1, 2, 3, 4}
            continue
        levels = level_of(mine)
        assert levels.min() >= 0.1 and levels.max() <= severity
        assert abs(levels.mean() - (0.1 + severity) / 2) < 0.15
        assert abs(np.median(levels) - (0.1 + severity) / 2) < 0.2
        assert 0.45 < (mine < 0).mean() < 0.55                 # the sign, image by image
    factors = values[chosen == [op.kind for op in operations].index("contrast")]
    assert factors.min() >= 1 - 0.09 * severity and factors.max() <= severity
    assert 0.45 < (factors >= 1).mean() < 0.55


def test_a_batch_gets_each_images_own_operation_as_pil_would_apply_it():
    steps = randaugment_batch.draw(len(IMAGES), 10, 2, "all", np.random.default_rng(3))
    batch = randaugment_batch.apply(BATCH, steps, "all")
    operations = randaugment.AUGMENTATION_SETS["all"]
    for k, image in enumerate(IMAGES):
        for chosen, values in steps:
            image = operations[chosen[k]].apply(image, values[k])
        difference = np.abs(batch[k].permute(1, 2, 0).numpy().astype(int) - np.asarray(image).astype(int))
        assert (difference > 0).mean() <= 0.005, k
    again = randaugment_batch.randaugment(BATCH, 10, 2, "all", np.random.default_rng(3))
    assert torch.equal(again, batch)


@pytest.mark.parametrize("augmentation_set", ["safe", "original"])
def test_the_other_sets_run_on_a_batch(augmentation_set):
    out = randaugment_batch.randaugment(BATCH, 10, 1, augmentation_set, np.random.default_rng(0))
    assert out.dtype == torch.uint8 and out.shape == BATCH.shape and not torch.equal(out, BATCH)


def test_pil_and_batch_rotate_agree_on_a_square_image_at_a_right_angle():
    square = torch.from_numpy(np.array(IMAGES[0].crop((0, 0, 36, 36)))).permute(2, 0, 1)[None]
    mine = randaugment_batch.KINDS["rotate"](square, np.array([90.0]))[0].permute(1, 2, 0).numpy()
    assert np.array_equal(mine, np.asarray(Image.fromarray(square[0].permute(1, 2, 0).numpy()).rotate(90)))
