"""What a test may skip in CI: a test that cannot set up what it needs fails there (CI=true)
and skips elsewhere (conftest.cannot_set_up, set_up_needed); only a GPU, an optional extra or
external data its module names skip in CI too. Every other skip in tests/ goes through the helper."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap

import pytest

from conftest import REPO, cannot_set_up

# the skips that stay skips in CI: (file, number of them) -> what they wait for
SKIPS_IN_CI = {
    ("tests/test_systems.py", 1): "gpu: a GPU driver is loaded (the test is of a host without one)",
    ("tests/loaders/test_device_loader_gpu.py", 2): "gpu: CUDA, and a GPU whose plain decode_jpeg shows the hazard",
    ("tests/methods/test_batch_parameters.py", 1): "gpu: CUDA",
    ("tests/test_redaction.py", 1): "extra: wandb (the [wandb] extra)",
    ("tests/test_closed_records.py", 1): "data: the MLPerf result logs (MLPERF_TRAINING_RESULTS)",
    ("tests/data/test_pillow_simd.py", 1): "extra: Pillow-SIMD (SETUP_EXTRAS=pillow-simd)",
    ("tests/test_tracking.py", 1): "extra: wandb (the [wandb] extra)",
    ("tests/test_one_cpu.py", 1): "extra: numba's TBB threading layer (the tbb package)",
    ("tests/conftest.py", 1): "the helper itself: cannot_set_up",
}
SKIP = re.compile(r"pytest\.skip\(|\.skipif\(|importorskip\(")


def test_with_ci_true_a_set_up_failure_fails_and_without_it_skips(monkeypatch):
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="set-up failed, and CI .CI=true. does not skip it: no munge"):
        cannot_set_up("no munge")
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception, match="no munge"):
        cannot_set_up("no munge")


@pytest.mark.e2e
def test_a_set_up_mark_without_what_it_needs_fails_a_run_in_ci_and_skips_elsewhere(tmp_path):
    """A real pytest run of a module marked set_up_needed(False, ...), with CI=true and without."""
    (tmp_path / "test_needs.py").write_text(textwrap.dedent('''
        from conftest import set_up_needed

        @set_up_needed(False, "the Debian package it needs is not installed")
        def test_needs_a_package():
            pass

        @set_up_needed(True, "present")
        def test_has_what_it_needs():
            pass
    '''))
    outcomes = {}
    for ci in ("true", ""):
        # tests/conftest.py loaded as a plugin (-p conftest): its hooks serve a module outside tests/
        done = subprocess.run([sys.executable, "-m", "pytest", "-n", "0", "-p", "no:cacheprovider", "-p", "conftest",
                               f"--rootdir={REPO}", "-c", str(REPO / "setup.cfg"), str(tmp_path / "test_needs.py")],
                              cwd=REPO / "tests", capture_output=True, text=True, timeout=300,
                              env={**_env_without_ci(), **({"CI": ci} if ci else {}),
                                   "PYTHONPATH": os.pathsep.join((str(REPO / "tests"), str(REPO)))})
        outcomes[ci] = done
    failed, skipped = outcomes["true"], outcomes[""]
    assert failed.returncode == 1 and "1 passed, 1 error" in failed.stdout, failed.stdout
    assert "set-up failed, and CI (CI=true) does not skip it: the Debian package it needs" in failed.stdout
    assert skipped.returncode == 0 and "1 passed, 1 skipped" in skipped.stdout, skipped.stdout


def _env_without_ci() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "CI"}


def test_every_skip_in_the_tests_is_a_gpu_an_extra_or_external_data_or_goes_through_the_helper():
    found = {}
    for path in sorted((REPO / "tests").rglob("*.py")):
        count = len(SKIP.findall(path.read_text()))
        if count and path.name != "test_setup_skips.py":
            found[(str(path.relative_to(REPO)), count)] = SKIPS_IN_CI.get((str(path.relative_to(REPO)), count))
    unlisted = sorted(key for key, why in found.items() if why is None)
    assert not unlisted, (f"skips not listed in SKIPS_IN_CI: {unlisted}. A test that cannot set up "
                          "what it needs calls conftest.cannot_set_up (or is marked set_up_needed)")
    assert set(found) == set(SKIPS_IN_CI)


def test_one_worker_at_a_time_holds_one_lock_file_for_the_whole_session(tmp_path_factory):
    """Inside, the session's lock file is held (flock conflicts between two opens of one file,
    as between two workers); outside, it is free again."""
    import fcntl

    from conftest import _session_folder, one_worker_at_a_time
    path = _session_folder(tmp_path_factory) / "apt-test.lock"

    def free() -> bool:
        with open(path, "a") as other:
            try:
                fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False
            return True
    with one_worker_at_a_time(tmp_path_factory, "apt-test"):
        assert not free()
    assert free()
