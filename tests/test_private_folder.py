"""submission/private_folder.py: a folder the harness loads code from (numba's compiled
pipelines, TorchInductor's code) is the user's own, or the run is refused before it starts,
in one line saying why and what to do; the folders the harness makes are 0700. Tests run as
root here: a folder given to another user is made with chown."""
from __future__ import annotations

import os
import stat

import pytest

from submission import preflight
from submission.config import ConfigError, resolve
from submission.private_folder import cache_dir_problems, make_private, problem

from conftest import run_submission

OTHER_USER = 4321


def test_a_folder_of_the_users_own_is_trusted_and_one_others_can_write_is_not(tmp_path):
    folder = make_private(tmp_path / "cache" / "numba")
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert problem(folder) is None and problem(tmp_path / "not yet made" / "numba") is None
    folder.chmod(0o777)
    assert "writable by every user (mode 777)" in problem(folder)
    folder.chmod(0o700)
    folder.parent.chmod(0o777)          # cache_dir: whoever writes it can swap numba/
    assert f"{folder.parent} is writable by every user" in problem(folder)


def test_a_folder_owned_by_another_user_is_refused(tmp_path):
    folder = make_private(tmp_path / "cache" / "inductor")
    os.chown(folder, OTHER_USER, -1)
    assert f"{folder} is owned by uid {OTHER_USER}" in problem(folder)


def test_a_folder_further_up_writable_by_others_counts_only_without_the_sticky_bit(tmp_path):
    shared = tmp_path / "shared"
    folder = make_private(shared / "me" / "cache" / "numba")
    shared.chmod(0o1777)                 # as /tmp: no one may move my folder away
    assert problem(folder) is None
    shared.chmod(0o777)
    assert "above it, is writable by others without the sticky bit" in problem(folder)


def test_preflight_names_the_cache_dir_and_what_to_do(tmp_path):
    cache = make_private(tmp_path / "cache")
    config = resolve("cpu", {"cache_dir": str(cache), "compile": "true"})
    assert cache_dir_problems(cache, compiled=True) == []
    cache.chmod(0o777)
    problems = preflight.launch_plan(config).problems
    (line,) = [p for p in problems if p.startswith("cache_dir")]
    assert str(cache) in line and "cache_dir=$HOME/.cache/resnet-submission" in line


@pytest.mark.e2e
def test_a_campaign_on_a_world_writable_cache_is_refused_in_one_line_before_anything_runs(tmp_path):
    """User B made the shared cache world-writable and planted a pickle that would create a
    file: user A's campaign refuses to start; nothing is unpickled, nothing is written."""
    cache, results, ran = tmp_path / "cache", tmp_path / "results", tmp_path / "planted-code-ran"
    (cache / "numba").mkdir(parents=True)
    (cache / "numba" / "planted.nbc").write_bytes(
        b"cos\nsystem\n(V" + f"touch {ran}".encode() + b"\ntR.")
    for folder in (cache, cache / "numba"):
        folder.chmod(0o777)
    done = run_submission("run", "system=cpu", f"results_dir={results}", f"cache_dir={cache}",
                          "runs=1", "package=false", timeout=300)
    assert done.returncode == 2, done.stderr
    assert "cache_dir:" in done.stderr and "is writable by every user" in done.stderr
    assert "Traceback" not in done.stderr
    assert not ran.exists() and not results.exists()
    assert sorted(p.name for p in cache.iterdir()) == ["numba"]


def test_compile_true_refuses_an_inductor_folder_others_can_write(tmp_path, monkeypatch):
    import torch

    from submission.warmup import compiled
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    cache = make_private(tmp_path / "cache")
    cache.chmod(0o777)
    with pytest.raises(ConfigError, match="TorchInductor's compiled code would be loaded from .*every user"):
        compiled(torch.nn.Linear(2, 2), cache, 1)
    assert not (cache / "inductor").exists()
    cache.chmod(0o700)
    compiled(torch.nn.Linear(2, 2), cache, 1)
    assert stat.S_IMODE((cache / "inductor").stat().st_mode) == 0o700
