"""submission/data/beton_cache.py: .beton files reused while their images and write
settings are unchanged, rebuilt when damaged, never left half-written."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from submission.config import resolve
from submission.data.beton_cache import cache_key, write_settings
from submission.data.prepare import prepare
from submission.data.synthetic import SyntheticSplit, largest_stored_image

from image_folders import FFCV_FINALIZER_NOISE, cache_contents, config, error_of, make_nested, write_image

pytestmark = FFCV_FINALIZER_NOISE


def test_cache_reuses_and_rekeys_per_split(tmp_path):
    root = tmp_path / "cached"
    make_nested(root, train_counts=(3, 3, 3), val_counts=(2, 2, 2))
    cache = tmp_path / "cache"
    first = prepare(config(root, cache))
    stamps = {p: os.stat(p).st_mtime_ns for p in (first.train_path, first.val_path)}

    again = prepare(config(root, cache))
    assert (again.train_path, again.val_path) == (first.train_path, first.val_path)
    assert {p: os.stat(p).st_mtime_ns for p in stamps} == stamps     # not rewritten

    # touching an image (same bytes, newer mtime) -> new train file, same val file
    image = next((root / "train" / "dog").iterdir())
    st = image.stat()
    os.utime(image, ns=(st.st_atime_ns, st.st_mtime_ns + 2_000_000_000))
    touched = prepare(config(root, cache))
    assert touched.train_path != first.train_path
    assert touched.val_path == first.val_path
    assert os.stat(first.val_path).st_mtime_ns == stamps[first.val_path]

    # new content in one image -> another train file
    write_image(image, 1, 99, size=(40, 40))
    replaced = prepare(config(root, cache))
    assert replaced.train_path not in (first.train_path, touched.train_path)
    assert replaced.val_path == first.val_path
    assert replaced.train_samples == 9

    # another eval subset -> only the val file changes
    stamp = os.stat(replaced.train_path).st_mtime_ns
    subset = prepare(config(root, cache, eval_limit=4))
    assert subset.train_path == replaced.train_path
    assert os.stat(subset.train_path).st_mtime_ns == stamp
    assert subset.val_path != replaced.val_path
    assert (subset.train_samples, subset.eval_samples) == (9, 4)
    assert not [n for n in cache_contents(cache, root) if ".tmp" in n]


def test_truncated_beton_is_rebuilt_not_loaded(tmp_path, capfd):
    make_nested(tmp_path / "d")
    cache = tmp_path / "cache"
    first = prepare(config(tmp_path / "d", cache))
    whole = Path(first.train_path).read_bytes()
    Path(first.train_path).write_bytes(whole[: len(whole) // 2])
    again = prepare(config(tmp_path / "d", cache))
    assert "damaged, rebuilding it" in capfd.readouterr().err
    assert again.train_path == first.train_path
    assert Path(again.train_path).read_bytes() == whole
    # a file from before sizes were recorded: read by FFCV once, kept when whole, rebuilt when cut
    record = Path(first.train_path + ".size")
    record.unlink()
    prepare(config(tmp_path / "d", cache))
    assert "reusing" in capfd.readouterr().err and record.is_file()
    record.unlink()
    Path(first.train_path).write_bytes(whole[: len(whole) // 2])
    prepare(config(tmp_path / "d", cache))
    assert "damaged, rebuilding it" in capfd.readouterr().err
    assert Path(first.train_path).read_bytes() == whole


def zero_fill_keeping_size_and_mtime(path: Path) -> None:
    stat = path.stat()
    path.write_bytes(bytes(stat.st_size))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))


@pytest.mark.timeout(120)
def test_an_image_changed_after_its_check_fails_the_write_instead_of_hanging(tmp_path):
    """The check remembers verdicts by size and mtime: an image broken while keeping both
    reaches FFCV's writer, whose worker used to die on it and leave the writer waiting."""
    root, cache = tmp_path / "d", tmp_path / "cache"
    make_nested(root)
    prepare(config(root, cache))
    victim = sorted((root / "train" / "dog").glob("*.JPEG"))[0]
    zero_fill_keeping_size_and_mtime(victim)
    message = error_of(config(root, cache, write_jpeg_quality=80))
    assert "1 images could not be decoded while writing" in message
    assert str(victim) in message and "UnidentifiedImageError" in message
    assert "skip_bad_images=true" in message
    assert not [n for n in cache_contents(cache, root) if ".tmp" in n]
    # its verdict was forgotten: checked again, so skip_bad_images=true leaves it out
    data = prepare(config(root, cache, write_jpeg_quality=80, skip_bad_images="true"))
    assert (data.train_samples, data.skipped_images) == (14, 1)


@pytest.mark.e2e
def test_temp_files_of_dead_conversions_are_removed(tmp_path, capfd):
    import socket
    import subprocess
    root, cache = tmp_path / "d", tmp_path / "cache"
    make_nested(root)
    finished = subprocess.Popen(["true"])
    finished.wait()
    folder = cache / root.name
    folder.mkdir(parents=True)
    dead = folder / f"train-0123456789abcdef.beton.tmp-{finished.pid}"
    dead_here = folder / f"val-0123456789abcdef.beton.tmp-{finished.pid}@{socket.gethostname()}"
    live = folder / f"train-fedcba9876543210.beton.tmp-{os.getpid()}"
    other_host = folder / f"train-0123456789abcdef.beton.tmp-{finished.pid}@another-node"
    for path in (dead, dead_here, live, other_host):
        path.write_bytes(b"\0" * 2_000_000)
    prepare(config(root, cache))
    assert not dead.exists() and not dead_here.exists()
    assert live.exists() and other_host.exists()
    err = capfd.readouterr().err
    assert f"removed {dead} (2.0 MB), left by process {finished.pid}" in err


@pytest.mark.parametrize("system, split, key", [
    ("cpu", SyntheticSplit(64, 10, (28, 28)), "6a891730b111168b"),
    ("p4d", SyntheticSplit(256, 1000, (500, 500)), "5433b499eff7eb4d")])
def test_the_cache_keys_of_earlier_versions_still_name_the_files(system, split, key):
    """A .beton cached by an earlier version is found again: on ImageNet, a changed key
    would cost hours of writing. The keys were taken from the version before the write
    settings were recorded in data.json."""
    assert cache_key(split, write_settings(resolve(system, {}))) == key


def test_the_largest_stored_image_is_read_once_per_file(tmp_path):
    """prepare reads each .beton's largest image from FFCV's metadata once and keeps it beside
    the file, for that file's size and modification time: a campaign that reuses its data
    starts without importing FFCV."""
    make_nested(tmp_path / "d", train_counts=(3, 3, 3), val_counts=(2, 2, 2))
    data = prepare(config(tmp_path / "d", tmp_path / "cache"))
    train = Path(data.train_path)
    memo = train.with_name(train.name + ".largest.json")
    measured = largest_stored_image(train)
    assert measured == tuple(json.loads(memo.read_text())[k] for k in ("height", "width"))
    assert 0 < min(measured) and max(measured) <= 500

    kept = json.loads(memo.read_text())          # the memo answers while the file is unchanged
    memo.write_text(json.dumps({**kept, "height": 7, "width": 9}))
    assert largest_stored_image(train) == (7, 9)
    st = train.stat()                            # the file changed: read from FFCV again
    os.utime(train, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    assert largest_stored_image(train) == measured
    assert json.loads(memo.read_text())["file"] == [st.st_size, st.st_mtime_ns + 1_000_000_000]


_PREPARE_ON_CUE = """
import sys, time
from pathlib import Path
sys.path.insert(0, "tests")
from image_folders import config
from submission.data.prepare import prepare
root, cache, cue = map(Path, sys.argv[1:4])
print("ready", flush=True)
while not cue.exists():
    time.sleep(0.02)
data = prepare(config(root, cache, workers_per_device=2))
print("prepared", data.train_path, data.val_path, flush=True)
"""


@pytest.mark.e2e
@pytest.mark.loaders_interpreted     # the writing and the lock are asserted: no loader runs here
def test_processes_sharing_a_cache_write_each_file_once(tmp_path):
    """Two processes preparing the same images at once into one cache folder (a SLURM job
    array's tasks): each .beton is written by one of them; the other waits for it, saying
    for whom, and reuses it. Before, both wrote the same file, each under its own name."""
    import subprocess
    import sys

    from conftest import REPO, child_env, wait_for
    root, cache, cue = tmp_path / "d", tmp_path / "cache", tmp_path / "go"
    make_nested(root, train_counts=(30, 30, 30), val_counts=(5, 5, 5))
    outputs = [tmp_path / f"process-{i}.out" for i in (0, 1)]
    processes = [subprocess.Popen([sys.executable, "-c", _PREPARE_ON_CUE, root, cache, cue], cwd=REPO,
                                  stdout=out.open("w"), stderr=subprocess.STDOUT, env=child_env())
                 for out in outputs]
    try:
        wait_for(lambda: all("ready" in out.read_text() for out in outputs), 120, "both processes")
        cue.touch()
        assert [p.wait(timeout=300) for p in processes] == [0, 0], [o.read_text() for o in outputs]
    finally:
        for process in processes:
            process.kill()
    said = [out.read_text() for out in outputs]
    prepared = {text.split("prepared ", 1)[1].split()[0] for text in said}
    assert len(prepared) == 1, said                       # the same training file for both
    for split in ("train", "val"):
        (beton,) = (cache / root.name).glob(f"{split}-*.beton")
        assert sum(text.count(f"writing {beton} ") for text in said) == 1, said
        assert sum(f"reusing {beton} " in text for text in said) == 1, said
    # a process that waited named the file, which the other one was writing or reusing (a
    # synthetic set of both splits is one file: its second use holds the lock to reuse it)
    for waiter, text in enumerate(said):
        for line in text.splitlines():
            if "[prepare] waiting for process " in line:
                held, other = line.split("which is writing or checking ", 1)[1], said[1 - waiter]
                assert f"writing {held} (" in other or f"reusing {held} " in other, said
