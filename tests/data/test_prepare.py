"""submission/data/prepare.py: a source scanned, subset and written, described as a
PreparedData; a training set too small for one step refused before anything is written."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from submission.config import ConfigError, parse_overrides, resolve
from submission.data.prepare import PreparedData, prepare, refuse_unreadable_by_the_loaders

from image_folders import (  # noqa: F401 - module-scoped fixtures, used by name
    FFCV_FINALIZER_NOISE,
    cache_contents,
    config,
    fashion,
    make_nested,
    needs_fashion,
    nested,
    read_val,
)

pytestmark = FFCV_FINALIZER_NOISE


def test_nested_folder_prepares_both_splits(nested):
    root, cache, labels, data = nested
    assert isinstance(data, PreparedData)
    assert Path(data.train_path).is_file() and Path(data.val_path).is_file()
    assert data.train_path != data.val_path
    assert Path(data.train_path).name.startswith("train-") and data.train_path.endswith(".beton")
    assert Path(data.val_path).name.startswith("val-") and data.val_path.endswith(".beton")
    assert Path(data.train_path).parent == cache / root.name
    assert (data.num_classes, data.train_samples, data.eval_samples) == (3, 15, 7)
    assert data.skipped_images == 0
    assert not [n for n in cache_contents(cache, root) if ".tmp" in n]


@needs_fashion
@pytest.mark.timeout(120)
def test_fashion_mnist_subset_keeps_every_class(fashion, tmp_path):
    cfg = resolve("cpu", {"dataset": "fashion-mnist", "data_dir": "", "cache_dir": str(tmp_path / "cache"),
                          "train_limit": "600", "eval_limit": "200", "write_mode": "raw",
                          "write_max_resolution": "28"})
    data = prepare(cfg)
    assert (data.num_classes, data.train_samples, data.eval_samples) == (10, 600, 200)
    assert Path(data.train_path).parent == tmp_path / "cache" / "fashion-mnist"
    for path, source, limit in ((data.train_path, fashion[0], 600), (data.val_path, fashion[1], 200)):
        labels, _ = read_val(path, limit, resolution=28, resize=28, batch_size=100)
        spaced = np.linspace(0, len(source) - 1, limit).round().astype(int)
        assert labels == source.labels[spaced].tolist()              # evenly spaced subset
        assert set(labels) == set(range(10))


@needs_fashion
def test_a_launch_whose_global_batch_exceeds_the_training_images_writes_nothing(tmp_path):
    """The campaign's refusal comes before the data's .beton files and the synthetic ones
    are written (it used to come after both)."""
    from submission import campaign

    from conftest import quick_settings
    cache = tmp_path / "cache"
    cfg = resolve(None, parse_overrides(quick_settings(tmp_path / "results", cache, train_limit=100,
                                                       batch_per_device=128, runs=1, seeds="1")))
    with pytest.raises(ConfigError) as refused:
        campaign.run_campaign(cfg)
    assert ("100 training images are fewer than one global batch (128 = 128 per process x 1 "
            "process(es)): lower batch_per_device or add images") in str(refused.value)
    assert [p for p in cache.rglob("*") if not p.is_dir()] == []


def test_a_folder_too_small_for_one_step_is_refused_before_anything_is_written(tmp_path):
    root, cache = tmp_path / "d", tmp_path / "cache"
    make_nested(root)                                       # 15 training images
    (root / "train" / "cat" / "broken.JPEG").write_bytes(b"\xff\xd8 cut")
    refused = r"^{} training images are fewer than one global batch \({} "
    with pytest.raises(ConfigError, match=refused.format(16, 17)):
        prepare(config(root, cache, batch_per_device=17), world_size=1)
    assert not cache.exists()                               # the images were not even checked
    # one fewer once the broken image is left out: refused after the check, before any .beton
    with pytest.raises(ConfigError, match=refused.format(15, 16)):
        prepare(config(root, cache, batch_per_device=16, skip_bad_images="true"), world_size=1)
    assert cache_contents(cache, root) == ["skipped_images.txt", "verified-train.json",
                                           "verified-val.json"]
    assert not (cache / "synthetic").exists()
    data = prepare(config(root, cache, batch_per_device=15, skip_bad_images="true"), world_size=1)
    assert (data.train_samples, data.skipped_images) == (15, 1)


def test_a_beton_a_loader_reads_itself_is_refused_before_run_start_when_its_layout_is_not_read(nested, tmp_path):
    """The torchvision loader reads the training file and the device loader both files with
    their own reader (loader_kinds: reads_beton_itself); FFCV's Loader reads the others."""
    good = nested[3].train_path
    empty = tmp_path / "empty.beton"
    empty.write_bytes(b"")
    refuse_unreadable_by_the_loaders(resolve("cpu", {"train_loader": "ffcv"}), empty, empty)
    refuse_unreadable_by_the_loaders(resolve("cpu", {"train_loader": "torchvision"}), good, empty)
    for loader, train, val in (("torchvision", empty, good), ("device", good, empty)):
        with pytest.raises(ConfigError, match=f"the {loader} loader cannot read {empty}: it is empty"):
            refuse_unreadable_by_the_loaders(resolve("cpu", {"train_loader": loader}), train, val)
