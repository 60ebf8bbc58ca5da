"""submission.published.CLOSED_RECORDS: the MLPerf Training closed-division ResNet-50 records on
8x H100 and 8x H200, matched to a system by its GPUs, and their scores checked against the public
result logs where a copy of those is at hand: MLPERF_TRAINING_RESULTS=<a folder holding clones of
mlcommons/training_results_v3.1 and training_results_v4.0 as training_results_v3.1/, ...>."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from submission import published, score

H100, H200 = "NVIDIA H100 80GB HBM3", "NVIDIA H200"


def test_records_are_matched_by_gpu_model_and_count():
    assert [r.minutes for r in published.closed_records_on(H200, 8)] == [12.078]
    assert [r.minutes for r in published.closed_records_on(H100, 8)] == [13.579, 13.819, 13.326]
    assert published.closed_records_on("H100-80GB-HBM3", 8) == published.closed_records_on(H100, 8)
    assert published.closed_records_on(H100, 16) == []
    assert published.closed_records_on("NVIDIA A100-SXM4-40GB", 8) == []
    assert published.closed_records_on("", 8) == []


def _logs(record: published.ClosedRecord) -> Path:
    root = os.environ.get("MLPERF_TRAINING_RESULTS")
    folder = (Path(root) / f"training_results_{record.round}" / record.submitter / "results" / record.folder
              if root else None)
    if folder is None or not (folder / "resnet").is_dir():
        pytest.skip("the MLPerf result logs are not at hand: set MLPERF_TRAINING_RESULTS (module docstring)")
    return folder


@pytest.mark.parametrize("record", published.CLOSED_RECORDS, ids=lambda r: f"{r.round}-{r.folder}")
def test_each_record_is_the_official_score_of_its_logs_and_their_recipe_is_the_one_named(record):
    folder = _logs(record)
    summary = score.summarize(folder, ruleset=f"{record.round[1:]}.0")
    assert summary.valid and len(summary.runs) == record.runs
    assert summary.score_minutes == pytest.approx(record.minutes, abs=5e-4)
    events = [json.loads(line.split(":::MLLOG ", 1)[1])
              for line in (folder / "resnet" / "result_0.txt").read_text().splitlines() if ":::MLLOG" in line]
    logged = {e["key"]: e["value"] for e in events}
    assert (logged["submission_division"], logged["opt_name"], logged["global_batch_size"]) == ("closed", "lars", 3200)
    assert logged["submission_org"] == record.submitter
