"""The thread counts the bench sweeps the train loader at (bench/thread_rows.py)."""
from __future__ import annotations

import pytest

from submission.bench.thread_rows import thread_counts
from submission.config import ConfigError


def test_the_sweep_doubles_up_to_the_cpus_and_holds_the_count_a_gpu_run_derives():
    assert thread_counts(16, None) == [1, 2, 4, 8, 15, 16]     # 15: 16 CPUs less the step's thread
    assert thread_counts(2, None) == [1, 2]
    assert thread_counts(1, None) == [1]
    assert thread_counts(96, None) == [1, 2, 4, 8, 16, 32, 64, 95, 96]
    assert thread_counts(16, 6) == [1, 2, 4, 6]                  # sweep_threads=6
    assert thread_counts(16, 0) == []                            # sweep_threads=0: none
    with pytest.raises(ConfigError, match="sweep_threads=32, but this process may use 16 CPUs"):
        thread_counts(16, 32)
