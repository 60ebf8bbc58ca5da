"""A process with one CPU to run on (taskset, a one-CPU container) ends when its work is done.

numba picks TBB where libtbb is installed; with one usable CPU, TBB starts no worker thread,
and a parallel region first launched from a thread other than the main one (what FFCV's
loader thread does) leaves a task that numba's unload waits for at exit: the campaign hung
after writing its report. submission/__init__.py chooses OpenMP for such a process."""
from __future__ import annotations

import importlib
import os
import subprocess
import sys

import pytest

from conftest import REPO, set_up_needed

# a parallel region first launched from a thread, as FFCV's loader launches its pipeline
_PARALLEL_FROM_A_THREAD = """
import sys, threading
if "import-submission" in sys.argv:
    import submission
import numba, numpy as np

@numba.njit(parallel=True)
def total(a):
    s = 0.0
    for i in numba.prange(a.shape[0]):
        s += a[i]
    return s

worker = threading.Thread(target=lambda: print(total(np.ones(100)), numba.threading_layer(), flush=True))
worker.start()
worker.join()
"""

needs_affinity = set_up_needed(hasattr(os, "sched_setaffinity"), "no CPU affinity here (Linux has it)")


def _on_one_cpu(*args: str, env: dict | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    one = min(os.sched_getaffinity(0))
    return subprocess.run([sys.executable, "-c", _PARALLEL_FROM_A_THREAD, *args], cwd=REPO,
                          capture_output=True, text=True, timeout=timeout, env=env,
                          preexec_fn=lambda: os.sched_setaffinity(0, {one}))


@needs_affinity
@pytest.mark.e2e
def test_a_one_cpu_process_of_the_harness_ends_after_numbas_threads_ran():
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_THREADING_LAYER"}
    done = _on_one_cpu("import-submission", env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["100.0", "omp"]


@needs_affinity
@pytest.mark.e2e
def test_without_the_choice_such_a_process_hangs_where_tbb_is_installed():
    """The same process without the harness's choice, where numba finds TBB: it prints its
    result, then does not end (what the test above guards against)."""
    try:
        importlib.import_module("numba.np.ufunc.tbbpool")    # numba's TBB layer: it loads libtbb
    except ImportError:
        pytest.skip("numba finds no TBB here: nothing to hang")
    env = {**{k: v for k, v in os.environ.items() if k != "NUMBA_THREADING_LAYER"},
           "NUMBA_THREADING_LAYER": "tbb"}
    with pytest.raises(subprocess.TimeoutExpired) as hung:
        _on_one_cpu(env=env, timeout=10)   # it ends in 1-2 s where it ends
    assert "100.0" in (hung.value.stdout or b"").decode()
