"""RandAugment as Composer v0.8.0: per-image randomness, determinism under a seed, the
magnitudes of its operations, and its place in a torchvision pipeline."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image
from torchvision import transforms

from submission.methods import randaugment
from submission.methods.randaugment import AUGMENTATION_SETS, RandAugment


def image(seed: int = 0, size: int = 32) -> Image.Image:
    rng = np.random.default_rng(seed)
    return Image.fromarray(rng.integers(0, 256, (size, size, 3), dtype=np.uint8))


def pixels(img: Image.Image) -> np.ndarray:
    return np.asarray(img, dtype=np.uint8)


def test_each_call_draws_its_own_operation_and_magnitude():
    np.random.seed(0)
    ra, img = RandAugment(10, 1, "all"), image()
    results = {pixels(ra(img)).tobytes() for _ in range(20)}
    assert len(results) >= 10                        # not one fixed transform


def test_a_seed_reproduces_the_same_images_and_another_seed_does_not():
    ra, images = RandAugment(10, 1, "all"), [image(i) for i in range(8)]

    def run(seed):
        np.random.seed(seed)
        return [pixels(ra(img)) for img in images]
    first, again, other = run(3), run(3), run(4)
    assert all(np.array_equal(a, b) for a, b in zip(first, again))
    assert not all(np.array_equal(a, b) for a, b in zip(first, other))


def test_depth_applies_that_many_operations(monkeypatch):
    applied = []
    recorder = [lambda img, severity, i=i: applied.append(i) or img for i in range(3)]
    monkeypatch.setitem(AUGMENTATION_SETS, "all", recorder)
    RandAugment(10, 2, "all")(image())
    assert len(applied) == 2
    RandAugment(10, 0, "all")(image())
    assert len(applied) == 2


def test_posterize_and_solarize_match_a_hand_computation(monkeypatch):
    img = image(1)
    # the magnitude draw is U(0.1, severity): pin it to 7.5
    monkeypatch.setattr(np.random, "uniform", lambda low=0.0, high=1.0, size=None: 7.5)
    bits = 4 - int(7.5 * 4 / 10)                                   # 1 bit kept
    expected = pixels(img) & np.uint8((0xFF << (8 - bits)) & 0xFF)
    assert np.array_equal(pixels(randaugment.posterize(img, 10)), expected)
    threshold = 256 - int(7.5 * 256 / 10)                          # 64
    source = pixels(img)
    expected = np.where(source >= threshold, 255 - source, source)
    assert np.array_equal(pixels(randaugment.solarize(img, 10)), expected)


def test_geometric_operations_at_no_magnitude_leave_the_image_and_at_severity_10_move_it(monkeypatch):
    img = image(2)
    draws = iter([0.0, 0.0])      # magnitude level, then the sign draw
    monkeypatch.setattr(np.random, "uniform", lambda low=0.0, high=1.0, size=None: next(draws))
    assert np.array_equal(pixels(randaugment.shear_x(img, 10)), pixels(img))    # shear 0
    monkeypatch.undo()
    np.random.seed(5)
    moved = [op for op in (randaugment.rotate, randaugment.shear_x, randaugment.translate_y)
             if not np.array_equal(pixels(op(img, 10)), pixels(img))]
    assert len(moved) == 3


def test_enhancement_factors_stay_in_composers_range():
    np.random.seed(0)
    factors = [randaugment._factor(10) for _ in range(2000)]
    assert min(factors) >= 1 - 0.09 * 10 and max(factors) <= 10
    assert 0.4 < np.mean([f >= 1 for f in factors]) < 0.6           # each side half the time


@pytest.mark.parametrize("kwargs, word", [
    ({"severity": 11}, "severity"), ({"severity": -1}, "severity"),
    ({"depth": -1}, "depth"), ({"augmentation_set": "most"}, "augmentation_set")])
def test_invalid_arguments_are_refused_by_name(kwargs, word):
    with pytest.raises(ValueError, match=word):
        RandAugment(**kwargs)


def test_inside_a_torchvision_pipeline():
    np.random.seed(0)
    torch.manual_seed(0)
    pipeline = transforms.Compose([transforms.RandomResizedCrop(32), transforms.RandomHorizontalFlip(),
                                   RandAugment(10, 1, "all"), transforms.PILToTensor()])
    out = pipeline(image(3, size=48))
    assert out.dtype == torch.uint8 and out.shape == (3, 32, 32)
    for name in ("safe", "original"):
        assert pixels(RandAugment(10, 3, name)(image(4))).shape == (32, 32, 3)
