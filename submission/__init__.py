"""MLPerf ResNet-50 submission harness (README.md; the layout: docs/layout.md)."""
import os


def _numba_threading_layer_for_one_cpu() -> None:
    """numba picks TBB where libtbb is installed (Debian's OpenCV brings it). With one usable
    CPU, TBB starts no worker thread: a parallel region first launched from a thread other
    than the main one (FFCV's loader thread) leaves a task that numba's unload waits for at
    exit, and the process hangs once its work is done (oneTBB issue 2056, numba issue 10556;
    tests/test_one_cpu.py). OpenMP has no such wait. Set here, before anything imports
    numba, for this process and the ones it starts; a layer the user chose is kept."""
    from .inventory import one_cpu_to_run_on
    if "NUMBA_THREADING_LAYER" not in os.environ and one_cpu_to_run_on():
        os.environ["NUMBA_THREADING_LAYER"] = "omp"


_numba_threading_layer_for_one_cpu()
