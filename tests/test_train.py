"""The training loop for real: learning, DDP over gloo with torchrun, two "nodes"."""
from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from submission.compliance import check_path
from submission.config import parse_overrides, resolve
from submission.data.data_json import PreparedData
from submission.data.prepare import prepare
from submission.loaders import ffcv_loaders
from submission.model import model_from_config
from submission.step import Normalizer, autocast_for
from submission.train import evaluate

from conftest import QUICK_BATCH, REPO, child_env, descendants, free_port, mllog_events, quick_settings, run_submission

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]


@pytest.mark.loaders_interpreted
def test_ddp_ranks_agree_and_eval_counts_each_image_once(tmp_path, cache_dir):
    """torchrun --nproc_per_node=2 (gloo): both ranks end with identical weights, and the
    logged accuracy equals a single-process evaluation of the same (EMA) weights."""
    cfg = resolve(None, parse_overrides(quick_settings(
        tmp_path, cache_dir, procs_per_node=2, target_accuracy=0.99, eval_limit=401)))
    assert cfg.world_size == 2 and cfg.global_batch_size == 2 * QUICK_BATCH
    data = prepare(cfg)
    data.save(tmp_path / "data.json")
    (tmp_path / "config.json").write_text(json.dumps(cfg.to_dict()))
    result = tmp_path / "result_0.txt"
    done = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
         "-m", "submission.train", "--config", str(tmp_path / "config.json"),
         "--data", str(tmp_path / "data.json"), "--seed", "3", "--result", str(result),
         "--save-weights", str(tmp_path / "weights")],
        cwd=REPO, capture_output=True, text=True, timeout=600, env=child_env())
    assert done.returncode == 0, done.stdout + done.stderr

    rank0 = torch.load(tmp_path / "weights" / "rank0.pt")
    rank1 = torch.load(tmp_path / "weights" / "rank1.pt")
    for part in ("model", "eval_model"):
        assert rank0[part].keys() == rank1[part].keys()
        for name in rank0[part]:
            assert torch.equal(rank0[part][name], rank1[part][name]), f"{part}.{name} differs"
    # the evaluated weights are the EMA, not the trained ones
    assert not torch.equal(rank0["model"]["fc.weight"], rank0["eval_model"]["fc.weight"])

    events = mllog_events(result)
    logged = [e["value"] for e in events if e["key"] == "eval_accuracy"][-1]
    assert [e["value"] for e in events if e["key"] == "global_batch_size"] == [2 * QUICK_BATCH]
    # the logged world is the launched one: 2 CPU processes on 1 node, no accelerator
    assert [e["value"] for e in events if e["key"] == "number_of_nodes"] == [1]
    assert [e["value"] for e in events if e["key"] == "accelerators_per_node"] == [0]
    model = model_from_config(cfg, data.num_classes)
    model.load_state_dict(rank0["eval_model"])
    device = torch.device("cpu")
    loader = ffcv_loaders.val_loader(data.val_path, cfg.eval_resolution, cfg.eval_resize, 64, 1, device,
                                rank=0, world_size=1, num_samples=data.eval_samples)
    single = evaluate(model, loader, Normalizer(device), autocast_for(cfg, device),
                      data.eval_samples)
    assert single == pytest.approx(logged, abs=1e-12)
    stop = [e for e in events if e["key"] == "run_stop"][0]
    # 0.99 is out of reach: the run ends at its epoch budget
    assert stop["metadata"]["status"] == "aborted" and stop["metadata"]["epoch_num"] == 0.5
    assert all(v.passed for v in check_path(result, ("2.0.0",)))


@pytest.mark.loaders_interpreted
def test_two_nodes_on_loopback_write_one_result(tmp_path, cache_dir):
    """nodes=2: two campaign commands (node_rank 0 and 1) rendezvous over loopback. They train
    on the device loader: its shards under a real two-process gloo world, each rank its
    DistributedSampler's share (the shards themselves: tests/loaders/test_device_loader.py)."""
    port = free_port()
    common = dict(nodes=2, master_addr="127.0.0.1", master_port=port, runs=1, seeds="21",
                  target_accuracy=0.05, train_loader="device")
    node1 = subprocess.Popen(
        [sys.executable, "-m", "submission", "run",
         *quick_settings(tmp_path / "node1", cache_dir, node_rank=1, **common)],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=child_env())
    node0 = run_submission("run", *quick_settings(tmp_path / "node0", cache_dir, node_rank=0, **common))
    out1, _ = node1.communicate(timeout=600)
    assert node0.returncode == 0, node0.stdout + node0.stderr
    assert node1.returncode == 0, out1
    # two nodes of a one-node descriptor: the results and the logged platform say so
    result = tmp_path / "node0" / "2xlocal_cpu" / "resnet" / "result_0.txt"
    events = mllog_events(result)
    assert [e["value"] for e in events if e["key"] == "number_of_nodes"] == [2]
    assert [e["value"] for e in events if e["key"] == "global_batch_size"] == [2 * QUICK_BATCH]
    assert [e["value"] for e in events if e["key"] == "submission_platform"] == ["2xlocal_cpu"]
    assert not (tmp_path / "node1" / "2xlocal_cpu" / "resnet").exists()   # only rank 0 logs


# Loaded in each of torchrun's workers (LOCAL_RANK is theirs) of the run below: every .beton the
# trainer opens, every FFCV Reader it makes, and run_start, in order
ORDER_TRACE = '''
import os
if "LOCAL_RANK" in os.environ:
    import json, sys
    _trace = os.environ["ORDER_TRACE"]

    def _note(kind, what=""):
        with open(_trace, "a") as out:
            out.write(json.dumps([kind, str(what)]) + "\\n")

    def _audit(event, args):
        if event == "open" and args and str(args[0]).endswith(".beton"):
            _note("open", args[0])

    sys.addaudithook(_audit)
    import ffcv.reader
    from submission import mlperf_log
    _reader_init, _run_start = ffcv.reader.Reader.__init__, mlperf_log.RunLog.init_stop_run_start

    def _reader(self, fname, *args, **kwargs):
        _note("read", fname)
        return _reader_init(self, fname, *args, **kwargs)

    def _started(self):
        _note("run_start")
        return _run_start(self)

    ffcv.reader.Reader.__init__, mlperf_log.RunLog.init_stop_run_start = _reader, _started
'''


# Mild on FFCV's loader and the entry's .beton; Hot on the device loader (RandAugment on the
# batch) with every image a JPEG (write_mode=jpg). Hot there: 0.28 and 0.18 at its first
# evaluation, 0.42 and 0.35 at its second in two runs (2026-11-27, interpreted). Since its CPU
# path decodes with FFCV's decoder (issue 61), seed 5 reads 0.195 then 0.44, seed 7 0.15 then
# 0.485, seed 6 0.2625 at its first (2026-11-28): seed 6, which stops there, half an epoch sooner
LEARNING = {
    "ffcv": ({"seeds": "5"}, "16, 20, 24, 28, 32 px"),
    "device": ({"recipe": "hot", "train_loader": "device", "write_mode": "jpg", "seeds": "6"}, "16, 20, 24, 28, 30 px"),
}
TARGET = 0.2            # twice chance; a run stops at the first evaluation that reaches it


@pytest.mark.loaders_interpreted     # learning and the order of reads are asserted, not decoding speed
@pytest.mark.parametrize("loader", LEARNING)
def test_each_loader_learns_fashion_mnist_and_reads_no_data_before_run_start(tmp_path, cache_dir, loader):
    """A real scaled-down run with its warm-up, on each loader: before run_start its trainer
    opens only the synthetic files, the training and validation .beton files (the loaders read
    their labels) only after; it learns, reaching twice chance within its epoch, and stops at the
    evaluation that reaches it with run_stop status success (a target out of reach: the DDP test
    above)."""
    results = tmp_path / "results"
    hook, trace = tmp_path / "hook", tmp_path / "trace.jsonl"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(ORDER_TRACE)
    settings, sides = LEARNING[loader]
    # its own data and batch: what the accuracies below were measured with
    done = run_submission("run", *quick_settings(results, cache_dir, runs=1,
                                                 train_limit=2560, eval_limit=400, batch_per_device=64,
                                                 epochs=1.0, eval_every_epochs=0.5, warmup="true",
                                                 target_accuracy=TARGET, **settings),
                          env=child_env(PYTHONPATH=f"{hook}:{REPO}", ORDER_TRACE=str(trace)))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "reached the target" in done.stdout
    assert f"warm-up before run_start: 5 training sizes ({sides})" in done.stdout
    assert "loader warm-up before run_start" in done.stdout
    folder = results / "local_cpu"
    data = PreparedData.load(folder / "data.json")
    events = [tuple(json.loads(line)) for line in trace.read_text().splitlines()]
    start = events.index(("run_start", ""))
    before, after = {what for _, what in events[:start]}, {what for _, what in events[start:]}
    assert {data.synthetic_train_path, data.synthetic_val_path} <= before
    assert data.train_path not in before and data.val_path not in before
    assert {data.train_path, data.val_path} <= after

    events = mllog_events(folder / "resnet" / "result_0.txt")
    accuracies = [e["value"] for e in events if e["key"] == "eval_accuracy"]
    # 40 steps from scratch: 0.27-0.54 over repeated runs with FFCV compiled (2026-11-22/23;
    # not bit-reproducible on CPU), 0.405 in each of 4 runs interpreted (2026-11-27); chance 0.10
    assert accuracies[-1] >= TARGET > max(accuracies[:-1], default=0), accuracies
    stop = [e for e in events if e["key"] == "run_stop"][0]
    assert stop["metadata"]["status"] == "success" and stop["metadata"]["epoch_num"] <= 1.0
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["valid"] is False                          # one run: no MLPerf score


@pytest.mark.loaders_interpreted
def test_a_dead_rank_fails_the_run_without_hanging(tmp_path, cache_dir):
    """SIGKILL one of two ranks mid-run: the campaign stops with a clear message, the
    partial log ends with run_stop aborted or stays incomplete, never a result file."""
    import os
    import signal
    import time
    results = tmp_path / "results"
    campaign = subprocess.Popen(
        [sys.executable, "-m", "submission", "run",
         *quick_settings(results, cache_dir, procs_per_node=2, runs=1, seeds="9",
                         target_accuracy=0.99, epochs=3.0)],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=child_env())
    partial = results / "local_cpu" / "resnet" / "result_0.txt.partial"
    try:
        deadline = time.monotonic() + 300
        while not (partial.is_file() and "run_start" in partial.read_text()):
            assert time.monotonic() < deadline and campaign.poll() is None, "run never started"
            time.sleep(0.5)
        # this campaign's rank 1 (another test's campaign may run beside it)
        rank1 = [pid for pid in descendants(campaign.pid) if _is_rank(str(pid), "1")]
        assert len(rank1) == 1
        killed_at = time.monotonic()
        os.kill(rank1[0], signal.SIGKILL)
        out, _ = campaign.communicate(timeout=180)
    finally:
        for pid in descendants(campaign.pid)[::-1]:      # what is left of it, if the test failed
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
    assert time.monotonic() - killed_at < 120, "the job hung after a rank died"
    assert campaign.returncode == 1, out
    assert "run 1 failed" in out and "re-run the same command" in out
    assert not (results / "local_cpu" / "resnet" / "result_0.txt").exists()


def _is_rank(pid: str, rank: str) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return False
    return b"submission.train" in cmdline and f"RANK={rank}".encode() in environ


SKEWED_RANK_1 = '''
import os, time
if os.environ.get("RANK") == "1":
    # rank 1's clock runs 1000x fast, and its loss turns non-finite from its 7th step on
    _real, _start = time.monotonic, time.monotonic()
    time.monotonic = lambda: _start + (_real() - _start) * 1000
    from submission.methods import loss as _loss
    _bce, _calls = _loss.LOSSES["bce"], [0]
    def _nan_from_step_7(logits, labels, smoothing):
        _calls[0] += 1
        value = _bce(logits, labels, smoothing)
        return value * float("nan") if _calls[0] >= 7 else value
    _loss.LOSSES["bce"] = _nan_from_step_7
'''


@pytest.mark.loaders_interpreted
def test_ranks_stop_together_and_a_diverged_rank_ends_the_run_as_diverged(tmp_path, cache_dir):
    """Two gloo ranks; rank 1's clock says max_run_minutes is long past, and its loss goes
    NaN at step 7. Only rank 0's clock counts, so nobody stops at step 5; at step 10 (the
    next check) both ranks stop together and rank 0 logs the run as diverged."""
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(SKEWED_RANK_1)
    cfg = resolve(None, parse_overrides(quick_settings(
        tmp_path, cache_dir, procs_per_node=2, max_run_minutes=5, progress_every_steps=5, batch_per_device=16,
        epochs=1.0, eval_every_epochs=0.5, warmup="false")))   # 20 steps of a global batch of 2 x 16
    data = prepare(cfg)
    data.save(tmp_path / "data.json")
    (tmp_path / "config.json").write_text(json.dumps(cfg.to_dict()))
    result = tmp_path / "result_0.txt"
    env = child_env(PYTHONPATH=f"{hook}:{REPO}")
    done = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
         "-m", "submission.train", "--config", str(tmp_path / "config.json"),
         "--data", str(tmp_path / "data.json"), "--seed", "4", "--result", str(result)],
        cwd=REPO, capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    stop = [e for e in mllog_events(result) if e["key"] == "run_stop"]
    assert len(stop) == 1 and stop[0]["metadata"]["status"] == "aborted"
    assert stop[0]["metadata"]["reason"].startswith("diverged: non-finite loss at step 10"), stop
    assert all(v.passed for v in check_path(result, ("2.0.0",)))
