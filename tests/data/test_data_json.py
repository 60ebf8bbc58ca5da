"""submission/data/data_json.py: data.json, written by the campaign and read by every
training process, loads whichever version of the harness wrote it."""
from __future__ import annotations

import json

from submission.data.data_json import PreparedData

WRITE = {"write_mode": "proportion", "write_max_resolution": 500, "write_jpeg_quality": 90,
         "write_compress_probability": 0.5}


def test_what_is_saved_loads_back_the_same(tmp_path):
    data = PreparedData("/c/train-1.beton", "/c/val-2.beton", num_classes=1000,
                        train_samples=1_281_167, eval_samples=50_000, skipped_images=3,
                        synthetic_train_path="/c/synthetic-3.beton",
                        synthetic_val_path="/c/synthetic-4.beton", synthetic_samples=256,
                        train_head_sha256="a" * 64, val_head_sha256="b" * 64, write_settings=WRITE)
    data.save(tmp_path / "data.json")
    assert PreparedData.load(tmp_path / "data.json") == data
    assert [p.name for p in tmp_path.iterdir()] == ["data.json"]


def test_a_data_json_of_an_earlier_version_loads(tmp_path):
    """One synthetic file for both splits, and neither head hashes nor write settings."""
    (tmp_path / "data.json").write_text(json.dumps({
        "train_path": "/c/train-1.beton", "val_path": "/c/val-2.beton", "num_classes": 10,
        "train_samples": 60_000, "eval_samples": 10_000, "skipped_images": 0,
        "synthetic_path": "/c/synthetic-3.beton", "synthetic_samples": 64}))
    data = PreparedData.load(tmp_path / "data.json")
    assert data.synthetic_train_path == data.synthetic_val_path == "/c/synthetic-3.beton"
    assert (data.train_head_sha256, data.write_settings) == ("", {})
