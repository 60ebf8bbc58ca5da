"""TrivialAugment against its definition: the wide set's operations and magnitudes drawn as
torchvision's TrivialAugmentWide draws them (one operation uniformly, one of 31 bins uniformly,
a sign for the signed ones) and applied as its _apply_op applies them; the composer set as
RandAugment at depth 1 and severity 10; and what a configuration may combine it with."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image
from torchvision.transforms import InterpolationMode, autoaugment

from submission.config import ConfigError, resolve
from submission.methods import trivialaugment
from submission.methods.randaugment import RandAugment
from submission.methods.trivialaugment import WIDE, TrivialAugment

# torchvision's definition: op name -> (its magnitudes, signed) (autoaugment.py L406-423)
TV_SPACE = autoaugment.TrivialAugmentWide()._augmentation_space(31)
FACTORS = ("Brightness", "Color", "Contrast", "Sharpness")     # TV applies 1 + magnitude
KIND = {"Identity": "identity", "ShearX": "shear_x_nearest", "ShearY": "shear_y_nearest",
        "TranslateX": "translate_x_pixels", "TranslateY": "translate_y_pixels", "Rotate": "rotate_nearest",
        "Brightness": "brightness", "Color": "color", "Contrast": "contrast", "Sharpness": "sharpness",
        "Posterize": "posterize", "Solarize": "solarize", "AutoContrast": "autocontrast", "Equalize": "equalize"}


def image(seed: int = 0, size=(40, 32)) -> Image.Image:
    return Image.fromarray(np.random.default_rng(seed).integers(0, 256, (size[1], size[0], 3), dtype=np.uint8))


def torchvision_magnitude(name: str, value) -> float:
    """The magnitude TV's _apply_op takes for one of our values."""
    return 0.0 if value is None else float(value) - 1.0 if name in FACTORS else float(value)


def test_the_wide_set_is_torchvisions_in_its_order_and_each_value_is_a_bin_of_its_range():
    assert [operation.kind for operation in WIDE] == [KIND[name] for name in TV_SPACE]
    random = np.random.default_rng(0)
    for operation, (name, (magnitudes, signed)) in zip(WIDE, TV_SPACE.items()):
        if operation.draw is None:
            assert magnitudes.ndim == 0
            continue
        drawn = np.array([torchvision_magnitude(name, v) for v in operation.draw(10, random, 6200)])
        bins = magnitudes.tolist()
        if name.startswith("Translate"):       # TV: int(signed magnitude)
            bins = [float(int(b)) for b in bins]
        assert set(np.unique(np.abs(drawn)).tolist()) == set(bins if not signed else map(abs, bins))
        counts = np.unique(np.abs(drawn) if signed else drawn, return_counts=True)[1]
        if not name.startswith("Translate") and name != "Posterize":     # 31 distinct bins
            assert counts.min() > 6200 / 31 * 0.7 and counts.max() < 6200 / 31 * 1.3
        if signed:                               # each sign half the time, on the non-zero bins
            assert 0.45 < (drawn[drawn != 0] < 0).mean() < 0.55
        else:
            assert drawn.min() >= 0


def test_each_wide_operation_is_torchvisions_on_a_pil_image_at_each_value():
    random = np.random.default_rng(1)
    for operation, name in zip(WIDE, TV_SPACE):
        for k, value in enumerate(operation.draw(10, random, 8) if operation.draw else [None]):
            img = image(k)
            reference = autoaugment._apply_op(img, name, torchvision_magnitude(name, value),
                                              InterpolationMode.NEAREST, None)
            assert np.array_equal(np.asarray(operation.apply(img, value)), np.asarray(reference)), (name, value)


def test_one_operation_per_image_uniformly_and_a_seed_reproduces_the_images(monkeypatch):
    applied = []
    recorders = [lambda img, severity, k=k: applied.append(k) or img for k in range(len(WIDE))]
    monkeypatch.setattr(trivialaugment, "WIDE", recorders)
    np.random.seed(0)
    augment = TrivialAugment("wide")
    for _ in range(2800):
        augment(image())
    counts = np.bincount(applied, minlength=14)
    assert len(applied) == 2800 and counts.min() > 200 * 0.75 and counts.max() < 200 * 1.25
    monkeypatch.undo()

    def run(seed):
        np.random.seed(seed)
        return [np.asarray(augment(image(i))) for i in range(8)]
    first, again, other = run(3), run(3), run(4)
    assert all(np.array_equal(a, b) for a, b in zip(first, again))
    assert not all(np.array_equal(a, b) for a, b in zip(first, other))


def test_the_composer_set_is_randaugment_at_depth_1_and_severity_10_image_for_image():
    images = [image(i) for i in range(40)]
    np.random.seed(7)
    mine = [np.asarray(TrivialAugment("composer")(img)) for img in images]
    np.random.seed(7)
    hot = [np.asarray(RandAugment(10, 1, "all")(img)) for img in images]
    assert all(np.array_equal(a, b) for a, b in zip(mine, hot))


def test_a_configuration_names_it_and_refuses_it_beside_randaugment_or_with_ffcv():
    config = resolve(None, {"recipe": "hot", "randaugment_depth": "0", "trivialaugment": "wide"})
    assert "TrivialAugment (wide)" in config.methods and not any("RandAugment" in m for m in config.methods)
    with pytest.raises(ConfigError, match="TrivialAugment replaces RandAugment"):
        resolve(None, {"recipe": "hot", "trivialaugment": "wide"})
    with pytest.raises(ConfigError, match="trivialaugment=composer needs train_loader=torchvision or device"):
        resolve(None, {"recipe": "mild", "trivialaugment": "composer"})
    with pytest.raises(ConfigError, match="trivialaugment"):
        resolve(None, {"recipe": "hot", "randaugment_depth": "0", "trivialaugment": "narrow"})
    assert resolve(None, {"recipe": "hot"}).trivialaugment == "none"


def test_the_torchvision_loader_gets_the_configurations_trivialaugment_or_its_randaugment():
    from submission.loaders.run_loaders import augmentation_of
    augment = augmentation_of(resolve(None, {"recipe": "hot", "randaugment_depth": "0", "trivialaugment": "wide"}))
    assert isinstance(augment, TrivialAugment) and augment.space == "wide"
    assert isinstance(augmentation_of(resolve(None, {"recipe": "hot"})), RandAugment)
    assert augmentation_of(resolve(None, {"recipe": "hot", "randaugment_depth": "0"})) is None


def test_an_unknown_space_is_refused_by_name_and_the_transform_runs_in_a_pipeline():
    with pytest.raises(ValueError, match="space"):
        TrivialAugment("narrow")
    from torchvision import transforms
    np.random.seed(0)
    pipeline = transforms.Compose([transforms.RandomResizedCrop(32), TrivialAugment("wide"),
                                   transforms.PILToTensor()])
    out = pipeline(image(3, size=(48, 48)))
    assert out.dtype == torch.uint8 and out.shape == (3, 32, 32)
    assert repr(TrivialAugment("composer")) == "TrivialAugment(space='composer')"
    assert trivialaugment.SPACES == ("wide", "composer")
