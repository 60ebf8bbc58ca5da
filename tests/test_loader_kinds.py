"""submission/loader_kinds.py: each train_loader word's kind, read where code asks what a loader
does (prepare, the methods' declarations, the bench, the projection) instead of comparing the
word with strings."""
from __future__ import annotations

import pytest

from submission import settings
from submission.config import ConfigError, resolve
from submission.loader_kinds import DEVICE, FFCV, KINDS, TORCHVISION, kind_of, recipe_loader_if_replaced


def test_the_kinds_are_the_settings_words_and_an_unknown_word_is_named():
    assert tuple(KINDS) == settings.admits("train_loader")
    with pytest.raises(ValueError, match="train_loader=dali is not a loader: one of ffcv, torchvision, device"):
        kind_of("dali")


def test_a_loader_other_than_the_recipes_is_named_with_the_recipes_own():
    assert recipe_loader_if_replaced(resolve("cpu", {"recipe": "hot"})) is None
    assert recipe_loader_if_replaced(resolve("cpu", {"recipe": "hot", "train_loader": "device"})) is TORCHVISION
    assert recipe_loader_if_replaced(resolve("cpu", {"recipe": "mild", "train_loader": "device"})) is FFCV


def test_a_per_image_augmentation_needs_a_loader_kind_that_takes_it():
    for word in ("torchvision", "device"):
        assert "RandAugment" in " ".join(resolve("cpu", {"recipe": "hot", "train_loader": word}).methods)
    with pytest.raises(ConfigError, match="randaugment_depth=1 needs train_loader=torchvision or device"):
        resolve("cpu", {"recipe": "hot", "train_loader": "ffcv"})


@pytest.mark.parametrize("overrides, beside", [
    ({"recipe": "mild"}, DEVICE), ({"recipe": "hot"}, DEVICE),
    ({"recipe": "mild", "train_loader": "device"}, FFCV), ({"recipe": "hot", "train_loader": "device"}, TORCHVISION)])
def test_the_bench_measures_beside_each_loader_the_first_of_its_kinds_beside_that_runs_the_configuration(
        overrides, beside):
    from submission.bench.loader_rows import beside as measured_beside
    assert measured_beside(resolve("cpu", overrides)) == beside.word
