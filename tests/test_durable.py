"""Results, state and logs reach the disk before they are renamed into place (a power loss
leaves the old file or the new one whole, never an empty result_<i>.txt that counts as a run):
each writer's file is fsynced before its rename, and its folder after it."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
from fsync_recorder import flushed_before_renamed, read, recording, sitecustomize

from submission import package
from submission.jsonfile import write_json

from conftest import REPO, child_env, quick_settings


def test_put_in_place_flushes_the_file_then_renames_it_then_flushes_the_folder(tmp_path, monkeypatch):
    new, final = tmp_path / "result_0.txt.partial", tmp_path / "result_0.txt"
    new.write_text(":::MLLOG run_stop\n")
    from submission import durable
    with recording(monkeypatch) as calls:
        durable.put_in_place(new, final)
    assert calls == [["fsync", str(new)], ["rename", str(new), str(final)], ["fsync", str(tmp_path)]]
    assert final.read_text() == ":::MLLOG run_stop\n" and not new.exists()


def test_a_json_record_is_flushed_before_it_is_renamed(tmp_path, monkeypatch):
    target = tmp_path / "campaign.json"
    with recording(monkeypatch) as calls:
        write_json(target, {"seeds": [1]})
    assert flushed_before_renamed(calls, str(target)) == (True, True)


def test_a_package_is_flushed_file_by_file_before_it_is_renamed_into_place(tmp_path, monkeypatch):
    from test_package import ORG, REPO_ROOT, SYSTEM_NAME, make_campaign
    results, out = tmp_path / "results", tmp_path / "out"
    make_campaign(results)
    with recording(monkeypatch) as calls:
        built = package.build_package(results, [SYSTEM_NAME], ORG, out, REPO_ROOT)
    assert built.passed
    (at,) = [i for i, call in enumerate(calls) if call[0] == "rename" and call[2] == str(out / ORG)]
    candidate = calls[at][1]
    flushed = {call[1] for call in calls[:at] if call[0] == "fsync"}
    files = {os.path.join(candidate, path.relative_to(built.path))
             for path in built.path.rglob("*") if path.is_file()}
    assert files and not files - flushed, sorted(files - flushed)[:5]
    assert ["fsync", str(out)] in calls[at + 1:]


@pytest.mark.e2e
@pytest.mark.loaders_interpreted
def test_a_campaigns_result_record_and_beton_are_flushed_before_they_are_renamed(tmp_path):
    """A real run, every process of it recorded (a sitecustomize): the worker's result file,
    the campaign's JSON records and the .beton files written for it (a cache of its own)."""
    results, record = tmp_path / "results", tmp_path / "calls.jsonl"
    env = child_env(**sitecustomize(tmp_path / "site", record))
    done = subprocess.run([sys.executable, "-m", "submission", "run",
                           *quick_settings(results, tmp_path / "cache", runs=1, seeds="3")],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode in (0, 1), done.stdout + done.stderr      # 1: the run missed its target
    calls = [call[1:] for call in read(record)]
    folder = results / "local_cpu"
    for final in (folder / "resnet" / "result_0.txt", folder / "campaign.json", folder / "summary.json"):
        assert flushed_before_renamed(calls, str(final)) == (True, True), final
    betons = {call[2] for call in calls if call[0] == "rename" and call[2].endswith(".beton")}
    # train and val (and the warm-up's synthetic set), written by this campaign
    assert {os.path.basename(beton).split("-")[0] for beton in betons} >= {"train", "val"}, betons
    for final in betons:
        assert flushed_before_renamed(calls, final) == (True, True), final
