"""Counting a piece of work's torch operations (loaders/torch_ops.py) leaves the process's
stderr to the process: the profiler's own lines (kineto's, from C++) do not reach it."""
from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import REPO, child_env

pytestmark = pytest.mark.e2e          # each starts a process (torch's import: seconds)

COUNT = """
import sys, torch
from submission.loaders.torch_ops import count_ops
result, counted = count_ops(lambda: torch.ones(3) + 1)
print("counted", counted.ops, counted.names, result.tolist())
print("mine, after", file=sys.stderr)
"""

WRITTEN_BACK = """
import os, sys
from submission.loaders.torch_ops import kineto_lines_dropped
with kineto_lines_dropped():
    os.write(2, b"USDT:2026-11-28 13:36:26 10832:10832 SyncActivityProfilerHandler.cpp:39] profiler_start\\n")
    os.write(2, b"ERROR:2026-11-28 13:36:26 1:1 DeviceProperties.cpp:56] gpuGetDeviceCount failed with code 35\\n")
    os.write(2, b"a line of the process's own, from C\\n")
    print("a warning of its own, from Python", file=sys.stderr)
print("after", file=sys.stderr)
"""


def run(code: str) -> subprocess.CompletedProcess:
    # on this CPU-only machine, as on a GPU machine the suite hides the GPUs from its children
    return subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120,
                          env=child_env())


def test_counting_operations_prints_none_of_the_profilers_own_lines():
    done = run(COUNT)
    assert done.returncode == 0, done.stderr
    assert "counted 2 ('aten::ones', 'aten::add') [2.0, 2.0, 2.0]" in done.stdout
    assert done.stderr == "mine, after\n"
    for line in ("gpuGetDeviceCount", "USDT", "profiler_start", "profiler_stop"):
        assert line not in done.stderr


def test_what_else_reaches_stderr_while_the_profiler_starts_is_written_back():
    done = run(WRITTEN_BACK)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ("a line of the process's own, from C\na warning of its own, from Python\nafter\n")
