"""submission/data/prepare.py: a source scanned, subset and written, described as a
PreparedData."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from image_folders import FFCV_FINALIZER_NOISE, cache_contents, needs_fashion, read_val
from image_folders import fashion, nested  # noqa: F401 - module-scoped fixtures, used by name
from submission.config import resolve
from submission.data.prepare import PreparedData, prepare

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

