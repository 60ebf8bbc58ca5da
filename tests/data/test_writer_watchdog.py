"""submission/data/writer_watchdog.py: a conversion whose FFCV writer process dies, or
that Ctrl-C stops, ends (and its workers with it) instead of hanging."""
from __future__ import annotations

import logging
import os
import signal
import threading
import time

import pytest

from submission.data import sources
from submission.data.prepare import prepare

from image_folders import FFCV_FINALIZER_NOISE, cache_contents, config, error_of, make_nested

pytestmark = FFCV_FINALIZER_NOISE


def converted_once_then_rewritten_with(tmp_path, monkeypatch, at_the_third_image):
    """A folder converted once; then the configuration of a second conversion (a new write
    setting: a new .beton) whose writer processes, forked from this one, run
    `at_the_third_image()` when they reach image 2."""
    root, cache = tmp_path / "d", tmp_path / "cache"
    make_nested(root)
    prepare(config(root, cache))
    real_item = sources.FolderSplit.__getitem__

    def item(split, index):
        if index == 2:
            at_the_third_image()
        return real_item(split, index)

    monkeypatch.setattr(sources.FolderSplit, "__getitem__", item)
    return root, cache, config(root, cache, write_jpeg_quality=80)


@pytest.mark.timeout(120)
def test_a_writer_process_that_dies_ends_the_conversion_instead_of_hanging(tmp_path, monkeypatch):
    root, cache, rewrite = converted_once_then_rewritten_with(
        tmp_path, monkeypatch, lambda: os.kill(os.getpid(), signal.SIGKILL))  # as the OOM killer
    message = error_of(rewrite)
    assert "an FFCV writer process died while writing" in message
    assert "was killed by SIGKILL" in message and "out-of-memory killer" in message
    assert not [n for n in cache_contents(cache, root) if ".tmp" in n]
    monkeypatch.undo()
    assert prepare(rewrite).train_samples == 15


@pytest.mark.timeout(120)
def test_ctrl_c_while_writing_stops_the_conversion_and_its_workers(tmp_path, monkeypatch):
    import psutil

    def ctrl_c_then_a_long_image():
        os.kill(os.getppid(), signal.SIGINT)      # the writer's parent: this test
        time.sleep(60)                            # a worker busy on a large image

    root, cache, rewrite = converted_once_then_rewritten_with(tmp_path, monkeypatch,
                                                              ctrl_c_then_a_long_image)
    before = {child.pid for child in psutil.Process().children()}
    with pytest.raises(KeyboardInterrupt):
        prepare(rewrite)
    workers = [child for child in psutil.Process().children() if child.pid not in before]
    _, still_running = psutil.wait_procs(workers, timeout=10)   # killed, not left running
    assert workers and not still_running
    assert not [n for n in cache_contents(cache, root) if ".tmp" in n]
    # an interrupt raised in logging's at-fork callback would have left its lock held:
    # the next log call of any thread, anywhere in this process, would wait forever
    taken = []

    def take_and_give_back() -> None:
        taken.append(logging._lock.acquire(timeout=5))
        if taken[-1]:
            logging._lock.release()

    other = threading.Thread(target=take_and_give_back)
    other.start()
    other.join()
    assert taken == [True]
