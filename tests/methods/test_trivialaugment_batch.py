"""TrivialAugment on a batch (the device loader's): each kind of the wide set against its PIL
operation at every value it can draw, and a batch drawn and applied per image as
trivialaugment.py would, in both spaces."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from submission.data.pillow_build import SIMD, pillow_build
from submission.data.synthetic_images import FolderShape, picture
from submission.methods import randaugment_batch, trivialaugment, trivialaugment_batch

# Photo-like images (test_randaugment_batch.py's): one not square, one square (Image.rotate's
# 90-degree shortcut)
SHAPE = FolderShape(classes=4, train_per_class=4, val_per_class=1, sides=(48, 64))
CROPS = {"44x36": (0, 0, 44, 36), "40x40": (0, 0, 40, 40)}
OPERATIONS = {operation.kind: operation for operation in trivialaugment.WIDE}
# the kinds reproduce Pillow's arithmetic; Pillow-SIMD's RGB -> L is one level off it on about
# 0.05% of pixels, times |factor - 1| in Color's blend (test_randaugment_batch.py)
TOLERANCE = {"color": (10, 0.01)} if pillow_build().startswith(SIMD) else {}


def images_of(crop):
    images = [picture(k % 4, k, "train", SHAPE).crop(CROPS[crop]) for k in range(8)]
    return images, torch.stack([torch.from_numpy(np.array(image)).permute(2, 0, 1) for image in images])


def pixels(batch_image: torch.Tensor) -> np.ndarray:
    return batch_image.permute(1, 2, 0).numpy()


def every_value(operation) -> np.ndarray:
    """Every value the operation draws: its bins with both signs (a few thousand draws)."""
    if operation.draw is None:
        return np.zeros(1)
    return np.unique(operation.draw(10, np.random.default_rng(0), 4000))


@pytest.mark.parametrize("crop", sorted(CROPS))
@pytest.mark.parametrize("kind", sorted(OPERATIONS))
def test_each_wide_kind_on_a_batch_is_its_pil_operation_at_every_value(kind, crop):
    operation, (images, batch) = OPERATIONS[kind], images_of(crop)
    values = every_value(operation)
    # every value, each on one of the images in turn, in batches of the 8 images
    for start in range(0, len(values), len(images)):
        chunk = values[start:start + len(images)]
        done = trivialaugment_batch.KINDS[kind](batch[:len(chunk)], chunk)
        most, share = TOLERANCE.get(kind, (0, 0.0))
        for image, value, mine in zip(images, chunk, done):
            reference = np.asarray(operation.apply(image, value if operation.draw else None)).astype(int)
            difference = np.abs(pixels(mine).astype(int) - reference)
            assert difference.max() <= most and (difference > 0).mean() <= share, (kind, crop, value)


def test_the_rotations_include_the_right_angles_and_the_translations_whole_pixels():
    rotations = every_value(OPERATIONS["rotate_nearest"])
    assert {-90.0, 90.0, 0.0, 135.0} <= set(rotations.tolist())
    shifts = every_value(OPERATIONS["translate_x_pixels"])
    assert np.array_equal(shifts, np.trunc(shifts)) and shifts.max() == 32 and shifts.min() == -32


@pytest.mark.parametrize("space", trivialaugment.SPACES)
def test_a_batch_gets_each_images_own_operation_as_pil_would_apply_it(space):
    images, batch = images_of("44x36")
    steps = trivialaugment_batch.draw(len(images), space, np.random.default_rng(3))
    (chosen, values), = steps
    done = trivialaugment_batch.apply(batch, steps, space)
    operations = trivialaugment.OPERATIONS[space]
    for k, image in enumerate(images):
        operation = operations[chosen[k]]
        reference = np.asarray(operation.apply(image, values[k] if operation.draw else None)).astype(int)
        difference = np.abs(pixels(done[k]).astype(int) - reference)
        assert (difference > 0).mean() <= 0.005, (space, operation.kind)      # bilinear warps: 1 level
    again = trivialaugment_batch.trivialaugment(batch, space, np.random.default_rng(3))
    assert torch.equal(again, done)


def test_the_composer_space_draws_what_randaugment_draws_at_depth_1_and_severity_10():
    mine = trivialaugment_batch.draw(500, "composer", np.random.default_rng(5))
    hot = randaugment_batch.draw(500, 10, 1, "all", np.random.default_rng(5))
    assert all(np.array_equal(a, b) for step, other in zip(mine, hot) for a, b in zip(step, other))
    (chosen, _), = trivialaugment_batch.draw(28_000, "wide", np.random.default_rng(0))
    assert np.bincount(chosen, minlength=14).min() > 2000 * 0.85          # uniform over 14
