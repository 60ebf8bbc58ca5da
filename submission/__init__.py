"""MLPerf ResNet-50 submission harness (README.md; the layout: docs/layout.md)."""
import os


def _numba_threading_layer_for_one_cpu() -> None:
    """numba picks TBB where libtbb is installed (Debian's OpenCV brings it). With one usable
    CPU, TBB starts no worker thread: a parallel region first launched from a thread other
    than the main one (FFCV's loader thread) leaves a task that numba's unload waits for at
    exit, and the process hangs once its work is done (oneTBB issue 2056, numba issue 10556;
    tests/test_one_cpu.py). OpenMP has no such wait. Set here, before anything imports
    numba, for this process and the ones it starts; a layer the user chose is kept."""
    if "NUMBA_THREADING_LAYER" not in os.environ and _one_cpu():
        os.environ["NUMBA_THREADING_LAYER"] = "omp"


def _one_cpu() -> bool:
    """One CPU to run on: by this process's affinity (taskset, cpusets), or by a cgroup's CPU
    quota under two CPUs (TBB counts that too)."""
    if hasattr(os, "sched_getaffinity") and len(os.sched_getaffinity(0)) == 1:
        return True
    try:
        with open("/sys/fs/cgroup/cpu.max") as limit:
            quota, period = limit.read().split()[:2]
        return quota != "max" and int(quota) < 2 * int(period)
    except (OSError, ValueError):
        return False


_numba_threading_layer_for_one_cpu()
