"""Two qualifies at once: the second on the same cache_dir is refused while the first holds its
scratch folder, naming it; out= never writes over another record; without out=, a fresh folder."""
from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from submission import file_lock
from submission.cli import main as cli_main
from submission.options import QualifyOptions
from submission.qualify import record
from submission.qualify.command import Qualify

from conftest import REPO, child_env, wait_for
from image_folders import make_nested


@pytest.mark.e2e
def test_a_second_qualify_on_the_same_cache_dir_is_refused_while_the_first_runs(tmp_path, capsys):
    root, cache = tmp_path / "images", tmp_path / "cache"
    make_nested(root, train_counts=(3, 3, 3), val_counts=(1, 1, 1))
    words = [f"data_dir={root}", f"cache_dir={cache}", "recipes=mild"]
    scratch = Qualify(QualifyOptions(), {"data_dir": str(root), "cache_dir": str(cache)}).scratch
    first = subprocess.Popen([sys.executable, "-m", "submission", "qualify", "minutes=5", *words,
                              f"out={tmp_path / 'first'}"], cwd=REPO, env=child_env(), text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_for(lambda: file_lock.holder(scratch / ".lock") == str(first.pid), 300,
                 "the first qualify to hold its scratch folder")
        second = tmp_path / "second"
        assert cli_main(["qualify", "minutes=0.01", *words, f"out={second}"]) == 1
        err = capsys.readouterr().err
        assert err.strip() == (f"error: another qualify (pid {first.pid}) is using {scratch} (its data, "
                               "short campaign and profiles): wait for it to end, or give this one a "
                               "cache_dir of its own"), err
        assert not second.exists()
    finally:
        os.killpg(first.pid, signal.SIGINT)
        first.communicate(timeout=120)


def test_out_holding_a_record_is_refused_and_left_as_it_was(tmp_path, capsys):
    root, out = tmp_path / "images", tmp_path / "earlier"
    make_nested(root, train_counts=(3, 3, 3), val_counts=(1, 1, 1))
    out.mkdir()
    (out / record.LOG).write_text("an earlier qualify's output\n")
    assert cli_main(["qualify", "minutes=0.01", "recipes=mild", f"data_dir={root}", f"out={out}",
                     f"cache_dir={tmp_path / 'cache'}"]) == 2
    assert (f"out={out} holds qualify.log already: qualify writes its record into a new or empty "
            "folder, never over another") in capsys.readouterr().err
    assert [p.name for p in out.iterdir()] == [record.LOG]
    assert (out / record.LOG).read_text() == "an earlier qualify's output\n"
    assert not (tmp_path / "cache").exists()


def test_without_out_a_record_folder_taken_already_gives_a_fresh_one(tmp_path):
    from submission.qualify.claim import record_folder
    taken = tmp_path / "qualify" / "local_cpu-20260101-000000"
    taken.mkdir(parents=True)
    (taken.parent / f"{taken.name}-2").mkdir()
    assert record_folder("", taken) == taken.parent / f"{taken.name}-3"
    assert record_folder("", tmp_path / "new") == tmp_path / "new"
