"""submission/data/image_checks.py: unreadable and too small images refused, or skipped
and listed; verdicts remembered so an unchanged folder is not decoded again."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from submission.data.prepare import prepare

from image_folders import FFCV_FINALIZER_NOISE, cache_contents, config, error_of, make_nested, read_val, write_image

pytestmark = FFCV_FINALIZER_NOISE


@pytest.fixture(scope="module")
def corrupt(tmp_path_factory):
    root = tmp_path_factory.mktemp("corrupt") / "images"
    make_nested(root, train_counts=(3, 3, 3), val_counts=(1, 1, 1))
    garbage = root / "train" / "dog" / "x.JPEG"
    garbage.write_bytes(np.random.default_rng(0).integers(0, 256, 3000, dtype=np.uint8).tobytes())
    truncated = root / "val" / "fox" / "cut.JPEG"
    whole = write_image(tmp_path_factory.mktemp("whole") / "whole.JPEG", 2, 7, size=(40, 40))
    blob = whole.read_bytes()
    truncated.write_bytes(blob[:len(blob) // 2])
    return root, [garbage, truncated]


def test_corrupt_images_fail_listing_paths_and_leave_nothing(corrupt, tmp_path):
    root, bad = corrupt
    cache = tmp_path / "cache"
    message = error_of(config(root, cache))
    for path in bad:
        assert str(path) in message
    assert "2 unusable images" in message and "skip_bad_images" in message
    left = cache_contents(cache, root)
    assert not [n for n in left if ".beton" in n or ".tmp" in n]
    assert "skipped_images.txt" not in left


def test_skip_bad_images_leaves_them_out_and_lists_them(corrupt, tmp_path):
    root, bad = corrupt
    cache = tmp_path / "cache"
    data = prepare(config(root, cache, skip_bad_images="true"))
    assert (data.train_samples, data.eval_samples, data.skipped_images) == (9, 3, 2)
    assert data.num_classes == 3
    assert Path(data.train_path).is_file() and Path(data.val_path).is_file()
    listing = (cache / root.name / "skipped_images.txt").read_text().splitlines()
    assert sorted(line.split("\t")[0] for line in listing) == sorted(str(p) for p in bad)


def test_verified_images_are_not_decoded_again_and_a_changed_one_is(tmp_path, capfd):
    make_nested(tmp_path / "d")
    cache = tmp_path / "cache"
    prepare(config(tmp_path / "d", cache))
    assert "checking" in capfd.readouterr().err
    prepare(config(tmp_path / "d", cache))
    second = capfd.readouterr().err
    assert "checking" not in second and "15 images of" in second and "not decoded again" in second
    changed = next((tmp_path / "d" / "train" / "cat").iterdir())
    changed.write_bytes(b"not an image any more")
    message = error_of(config(tmp_path / "d", cache))
    assert "1 unusable images" in message and changed.name in message


def test_skipped_listing_does_not_outlive_the_bad_images(tmp_path):
    make_nested(tmp_path / "d")
    bad = tmp_path / "d" / "train" / "cat" / "broken.JPEG"
    bad.write_bytes(b"\xff\xd8 cut")
    cache = tmp_path / "cache"
    prepare(config(tmp_path / "d", cache, skip_bad_images="true"))
    listing = cache / "d" / "skipped_images.txt"
    assert listing.is_file()
    bad.unlink()
    assert prepare(config(tmp_path / "d", cache, skip_bad_images="true")).skipped_images == 0
    assert not listing.exists()


def test_images_too_small_for_the_pipeline_are_refused_then_skippable(tmp_path):
    """A 1x1 validation image (its center crop is 0 px) and a 200x1 training image (0 px
    high once stored at write_max_resolution=64) would abort the process inside OpenCV:
    they are named with their sizes, and skip_bad_images=true leaves them out."""
    root = tmp_path / "d"
    make_nested(root)
    Image.new("RGB", (1, 1), (10, 20, 30)).save(root / "val" / "cat" / "pixel.png")
    Image.new("RGB", (200, 1), (10, 20, 30)).save(root / "train" / "dog" / "line.png")
    cfg = config(root, tmp_path / "cache")
    assert cfg.eval_resolution < cfg.eval_resize          # a crop ratio below 1
    message = error_of(cfg)
    assert "2 unusable images" in message
    assert "pixel.png: 1x1 px: the evaluation center crop" in message
    assert "line.png: 200x1 px: stored with its long side at write_max_resolution=64" in message

    data = prepare(config(root, tmp_path / "cache", skip_bad_images="true"))
    assert (data.train_samples, data.eval_samples, data.skipped_images) == (15, 7, 2)
    labels, _ = read_val(data.val_path, data.eval_samples, resolution=cfg.eval_resolution,
                         resize=cfg.eval_resize)
    assert len(labels) == 7


def test_an_archive_beside_class_folders_is_named_as_not_read(tmp_path, capfd):
    root = tmp_path / "d"
    make_nested(root)
    (root / "train" / "n03.tar").write_bytes(b"\0" * 1024)
    data = prepare(config(root, tmp_path / "cache"))
    assert data.train_samples == 15
    err = capfd.readouterr().err
    assert "ignoring 1 entries" in err and "n03.tar" in err and "archives" in err
    assert "extract them" in err
