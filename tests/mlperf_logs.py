"""Hand-written MLPerf result files for the tests of score.py and package.py.

Each line is written here as `:::MLLOG {json}` with a known time_ms, so the tests know
run_start and run_stop exactly. The keys are those ruleset 2.0.0 asks of an open-division
ResNet log (training_2.0.0/common.yaml, open_common.yaml, open_resnet.yaml).
"""
from __future__ import annotations

import json
from pathlib import Path

ORG = "TestOrg"
SYSTEM_NAME = "test_system"
TRAIN_SAMPLES = 60000
INIT_START_MS = 1_700_000_000_000


def mlperf_log(minutes: float, seed: int, *, status: str = "success", epochs: int = 2,
               accuracies: tuple[float, ...] = (0.80, 0.86), with_run_stop: bool = True,
               org: str = ORG, platform: str = SYSTEM_NAME, division: str = "open",
               start_ms: int = INIT_START_MS) -> str:
    """A complete (or, with_run_stop=False, interrupted) log of one run.

    run_start is at start_ms + 60 s; run_stop exactly `minutes` later.
    """
    run_start = start_ms + 60_000
    run_stop = run_start + round(minutes * 60_000)
    lines: list[tuple[int, str, str, object, dict]] = []

    def point(t, key, value=None, **meta):
        lines.append((t, "POINT_IN_TIME", key, value, meta))

    def interval(kind, t, key, value=None, **meta):
        lines.append((t, f"INTERVAL_{kind}", key, value, meta))

    point(start_ms, "cache_clear", True)
    interval("START", start_ms, "init_start")
    point(start_ms + 1, "submission_org", org)
    point(start_ms + 1, "submission_platform", platform)
    point(start_ms + 1, "submission_division", division)
    point(start_ms + 1, "submission_status", "onprem")
    point(start_ms + 1, "submission_benchmark", "resnet")
    point(start_ms + 1, "number_of_nodes", 1)
    point(start_ms + 1, "accelerators_per_node", 0)
    point(start_ms + 2, "seed", seed)
    point(start_ms + 2, "global_batch_size", 256)
    point(start_ms + 2, "gradient_accumulation_steps", 1)
    point(start_ms + 2, "train_samples", TRAIN_SAMPLES)
    point(start_ms + 2, "eval_samples", 10000)
    point(start_ms + 2, "opt_name", "sgd")
    interval("END", run_start, "init_stop")
    interval("START", run_start, "run_start")
    # epochs spread evenly in the timed region, one eval at the end of each
    step = (run_stop - run_start) // (epochs + 1)
    for epoch in range(1, epochs + 1):
        t = run_start + (epoch - 1) * step
        interval("START", t, "epoch_start", epoch_num=epoch)
        interval("START", t + step // 2, "eval_start", epoch_num=epoch)
        accuracy = accuracies[min(epoch - 1, len(accuracies) - 1)]
        point(t + step - 1, "eval_accuracy", accuracy, epoch_num=epoch)
        interval("END", t + step - 1, "eval_stop", epoch_num=epoch)
        interval("END", t + step, "epoch_stop", epoch_num=epoch)
    if with_run_stop:
        interval("END", run_stop, "run_stop", status=status, epoch_num=epochs)

    out = []
    for lineno, (t, event_type, key, value, meta) in enumerate(lines, start=1):
        record = {"namespace": "", "time_ms": t, "event_type": event_type, "key": key,
                  "value": value, "metadata": {"file": "submission/train.py", "lineno": lineno, **meta}}
        out.append(":::MLLOG " + json.dumps(record))
    return "\n".join(out) + "\n"


def write_runs(system_dir: Path, minutes: list[float], statuses: list[str] | None = None,
               seeds: list[int] | None = None, **kwargs) -> list[Path]:
    """system_dir/resnet/result_<i>.txt for each time in `minutes`."""
    folder = Path(system_dir) / "resnet"
    folder.mkdir(parents=True, exist_ok=True)
    statuses = statuses or ["success"] * len(minutes)
    seeds = seeds or [1000 + i for i in range(len(minutes))]
    paths = []
    for i, (m, status, seed) in enumerate(zip(minutes, statuses, seeds)):
        path = folder / f"result_{i}.txt"
        path.write_text(mlperf_log(m, seed, status=status, **kwargs))
        paths.append(path)
    return paths
