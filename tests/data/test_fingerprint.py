"""Ranks compare what they will train on before run_start (issue 25): a node given other
data stops every rank with one message, instead of a collective mismatch or a hang."""
from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from submission.config import parse_overrides, resolve
from submission.data import fingerprint
from submission.data.beton_cache import HEAD_BYTES, head_sha256
from submission.data.prepare import prepare

from conftest import QUICK_EVAL_IMAGES, QUICK_TRAIN_IMAGES, REPO, child_env, free_port, mllog_events, quick_settings

pytestmark = pytest.mark.timeout(300)

# quick_settings' train_limit and test_train.py's 2560: the session's cache has them
SMALL, LARGE = QUICK_TRAIN_IMAGES, 2560


def _config(tmp: Path, cache: Path, **extra):
    return resolve(None, parse_overrides(quick_settings(tmp, cache, **extra)))


@pytest.fixture(scope="module")
def prepared(tmp_path_factory, cache_dir):
    """(config, data with SMALL training images, data with LARGE), from real Fashion-MNIST."""
    tmp = tmp_path_factory.mktemp("fingerprint")
    config = _config(tmp, cache_dir)
    return config, prepare(config), prepare(_config(tmp, cache_dir, train_limit=LARGE))


def test_identical_data_agrees_and_the_facts_are_json(prepared):
    config, small, _ = prepared
    facts = fingerprint.fingerprint(small)
    assert json.loads(json.dumps(facts)) == facts
    assert facts["train_samples"] == SMALL and facts["eval_samples"] == QUICK_EVAL_IMAGES
    assert facts["num_classes"] == 10
    assert facts["train_file_bytes"] == Path(small.train_path).stat().st_size
    assert facts["eval_file_bytes"] == Path(small.val_path).stat().st_size
    assert facts["write_jpeg_quality"] == config.write_jpeg_quality
    assert len(facts["train_file_header_sha256"]) == 64
    # paths are not facts: a copy of the same files elsewhere (another node's disk) agrees
    assert all(small.train_path not in str(value) for value in facts.values())
    same = {"node_rank": 0, "hostname": "a", "data": facts}
    assert fingerprint.unlike_data([same, {**same, "node_rank": 1, "hostname": "b"}]) is None
    assert fingerprint.unlike_data([same]) is None and fingerprint.unlike_data([]) is None


def test_another_training_set_is_named_with_both_values(prepared):
    config, small, large = prepared
    ranks = [{"node_rank": 0, "hostname": "alpha", "data": fingerprint.fingerprint(small)},
             {"node_rank": 0, "hostname": "alpha", "data": fingerprint.fingerprint(small)},
             {"node_rank": 1, "hostname": "beta", "data": fingerprint.fingerprint(large)}]
    message = fingerprint.unlike_data(ranks)
    assert message is not None
    assert "rank 2 (node 1, host beta):" in message
    assert "rank 1 " not in message                       # rank 1 agrees with rank 0
    assert f"train_samples: rank 0 has {SMALL}, rank 2 has {LARGE}" in message
    small_bytes, large_bytes = (Path(d.train_path).stat().st_size for d in (small, large))
    assert f"train_file_bytes: rank 0 has {small_bytes}, rank 2 has {large_bytes}" in message
    assert "train_file_header_sha256" in message
    assert "eval_samples" not in message and "eval_file" not in message   # same eval set
    assert "on node 0, host alpha" in message
    assert "train_limit" in message and "cache_dir" in message             # what to do


def test_a_beton_of_the_same_size_with_other_header_bytes_is_named(prepared, tmp_path):
    config, small, _ = prepared
    assert small.train_head_sha256 == head_sha256(small.train_path)     # recorded by prepare
    changed = tmp_path / "train.beton"
    shutil.copyfile(small.train_path, changed)
    content = bytearray(changed.read_bytes())
    assert len(content) > HEAD_BYTES                          # the bounded read is exercised
    content[HEAD_BYTES - 100] ^= 0xFF                         # a byte of the metadata table
    changed.write_bytes(bytes(content))
    before, after = small.train_head_sha256, head_sha256(changed)
    assert before != after
    other = dataclasses.replace(small, train_path=str(changed), train_head_sha256=after)
    ranks = [{"node_rank": 0, "hostname": "h", "data": fingerprint.fingerprint(small)},
             {"node_rank": 1, "hostname": "h", "data": fingerprint.fingerprint(other)}]
    message = fingerprint.unlike_data(ranks)
    assert (f"train_file_header_sha256: rank 0 has {before[:16]}..., "
            f"rank 1 has {after[:16]}...") in message
    assert "train_file_bytes" not in message and "train_samples" not in message
    # past the head, a change is not seen: the read stays bounded on a 100 GB file
    content[HEAD_BYTES - 100] ^= 0xFF
    content[-1] ^= 0xFF
    changed.write_bytes(bytes(content))
    assert head_sha256(changed) == before
    # the fingerprint itself opens no .beton (the run reads no data before run_start): it
    # takes the recorded hash, whatever the file now holds
    assert fingerprint.fingerprint(other)["train_file_header_sha256"] == after


def test_other_write_settings_and_an_unreadable_description_are_decisions(prepared, tmp_path):
    config, small, _ = prepared
    assert small.write_settings == {"write_mode": config.write_mode,     # recorded by prepare
                                    "write_max_resolution": config.write_max_resolution,
                                    "write_jpeg_quality": config.write_jpeg_quality,
                                    "write_compress_probability": config.write_compress_probability}
    other = dataclasses.replace(small, write_settings={**small.write_settings,
                                                       "write_jpeg_quality": 80})
    ranks = [{"node_rank": 0, "hostname": "h", "data": fingerprint.fingerprint(small)},
             {"node_rank": 1, "hostname": "h", "data": fingerprint.fingerprint(other)}]
    assert "write_jpeg_quality: rank 0 has 90, rank 1 has 80" in fingerprint.unlike_data(ranks)
    # a data.json from before the write settings were recorded loads, and says so
    written_before = {key: value for key, value in small.to_dict().items()
                      if key != "write_settings"}
    (tmp_path / "old.json").write_text(json.dumps(written_before))
    old = fingerprint.of_rank(tmp_path / "old.json", config)["data"]
    assert old["write_settings"] == "(not recorded: prepare again)" and "write_mode" not in old
    assert old["train_samples"] == SMALL

    # of_rank never raises: every rank reaches the gathering, and learns why the run stops
    broken = fingerprint.of_rank(tmp_path / "missing.json", config)
    assert broken["hostname"] == socket.gethostname() and broken["node_rank"] == 0
    message = fingerprint.unlike_data([ranks[0], broken])
    assert "data.json: rank 0 has (none), rank 1 has " in message and "missing.json" in message
    gone = dataclasses.replace(small, val_path=str(tmp_path / "gone.beton"))
    unreadable = fingerprint.fingerprint(gone)["eval_file_unreadable"]
    assert unreadable.startswith("FileNotFoundError")


def _stop_processes_of(nodes: list[subprocess.Popen], tmp_path: Path) -> None:
    """Kill what the test started and left running (a campaign that timed out, its torchrun
    and workers, which name files under tmp_path on their command lines)."""
    for node in nodes:
        node.kill()
    for pid in (int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()):
        try:
            mine = str(tmp_path).encode() in Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if mine:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


@pytest.mark.loaders_interpreted
@pytest.mark.e2e
def test_a_node_with_another_training_set_stops_every_rank_before_run_start(
        tmp_path, cache_dir, prepared):
    """Two campaign commands on loopback (node_rank 0 and 1); node 1's command line has
    another train_limit. Both stop before run_start with the message, in bounded time."""
    common = dict(nodes=2, master_addr="127.0.0.1", master_port=free_port(), runs=1,
                  seeds="21", target_accuracy=0.05, epochs=1.0)
    outputs = [tmp_path / "node0.out", tmp_path / "node1.out"]
    nodes: list[subprocess.Popen] = []
    started = time.monotonic()
    try:
        for rank, limit in ((1, LARGE), (0, SMALL)):        # the follower first, as a user would
            with open(outputs[rank], "w") as output:
                nodes.append(subprocess.Popen(
                    [sys.executable, "-m", "submission", "run",
                     *quick_settings(tmp_path / f"node{rank}", cache_dir, node_rank=rank,
                                     train_limit=limit, **common)],
                    cwd=REPO, stdout=output, stderr=subprocess.STDOUT, env=child_env()))
        # measured here: 30-40 s, most of it preparing data and starting torchrun; without
        # the check both ranks hang in their first training collective (still there at 150 s)
        for node in nodes:
            node.wait(timeout=max(120 - (time.monotonic() - started), 1))
    finally:
        _stop_processes_of(nodes, tmp_path)
    elapsed = time.monotonic() - started
    node1, node0 = nodes
    out0, out1 = (path.read_text() for path in outputs)
    assert node0.returncode != 0, out0
    assert node1.returncode != 0, out1
    named = f"train_samples: rank 0 has {SMALL}, rank 1 has {LARGE}"
    for out in (out0, out1):
        assert "would train or evaluate on different data" in out, out
        assert named in out, out
        assert "rank 1 (node 1, host " in out
        assert "collective mismatch" not in out.lower()
    assert elapsed < 120, f"took {elapsed:.0f} s"
    # the follower did prepare the other set, and rank 0 logged no run_start
    recorded = json.loads((tmp_path / "node1" / "2xlocal_cpu" / "data.node1.json").read_text())
    assert recorded["train_samples"] == LARGE
    resnet = tmp_path / "node0" / "2xlocal_cpu" / "resnet"
    assert not (resnet / "result_0.txt").exists()
    events = mllog_events(resnet / "result_0.txt.partial")
    keys = [e["key"] for e in events]
    assert "init_start" in keys and "run_start" not in keys and "epoch_start" not in keys
    stop = [e for e in events if e["key"] == "run_stop"]
    assert len(stop) == 1 and stop[0]["metadata"]["status"] == "aborted"
    assert named in stop[0]["metadata"]["reason"]
