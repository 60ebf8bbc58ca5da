"""The cache of .beton files: each split written once per content and write settings.

A split's cache key covers its source (file names, sizes and mtimes, or the idx bytes),
the write settings and the subset: a second run with the same inputs reuses the file, any
change writes a new one. Files are written under a temporary name and renamed on success,
so a .beton that exists is complete; its size is recorded beside it, and a file whose size
differs (a copy cut short, a full disk) is rebuilt, never loaded. The temporary file of a
conversion that was killed is removed by the next one. Processes sharing a cache folder (a
SLURM job array's tasks, nodes on a shared disk) write each file once: the others wait for
it, saying whom they wait for, and then reuse it.
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import socket
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import psutil

from .. import said
from ..config import Config, ConfigError
from ..durable import put_in_place
from . import sources
from .image_checks import bad_image_listing, forget_verdicts, manifest_path
from .writer_watchdog import interrupted_if_a_writer_dies, release_shared_memory

FORMAT_VERSION = 1   # bump when the way .beton files are written changes

# The Config settings that say how images are written, each with the name FFCV's
# RGBImageField gives it. The cache key holds FFCV's names: renaming one there would
# write every cached .beton again.
WRITE_SETTINGS = {"write_mode": "write_mode", "write_max_resolution": "max_resolution",
                  "write_jpeg_quality": "jpeg_quality",
                  "write_compress_probability": "compress_probability"}


def write_settings(config: Config) -> dict:
    """{Config setting: value} of the settings the images are written with (data.json
    records them)."""
    return {name: getattr(config, name) for name in WRITE_SETTINGS}


def _image_field_arguments(settings: dict) -> dict:
    return {WRITE_SETTINGS[name]: value for name, value in settings.items()}


def cache_key(split: sources.Split, settings: dict) -> str:
    """The 16 hex digits that name the split's .beton written with `settings`."""
    key = {"format": FORMAT_VERSION, "write": _image_field_arguments(settings),
           "source": split.fingerprint(), "samples": len(split)}
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]


class DecodeFailureRecorder:
    """A folder split for FFCV's writer whose images cannot make it hang: an image that
    fails to decode there (changed since it was checked) becomes a black placeholder and
    is recorded as a file named by its index. The writer decodes in worker processes: a
    worker that raises leaves it waiting forever, and a record in memory would stay in
    the worker."""
    PLACEHOLDER = np.zeros((8, 8, 3), np.uint8)

    def __init__(self, split: sources.FolderSplit, folder: Path):
        self.split, self.folder = split, folder

    def __len__(self) -> int:
        return len(self.split)

    def __getitem__(self, index: int) -> tuple[np.ndarray, int]:
        try:
            return self.split[index]
        except Exception as exc:  # noqa: BLE001 - PIL raises many types for broken files
            (self.folder / str(index)).write_text(f"{type(exc).__name__}: {exc}")
            return self.PLACEHOLDER, self.split.samples[index][1]

    def failures(self) -> list[tuple[Path, str]]:
        return sorted((self.split.samples[int(record.name)][0], record.read_text())
                      for record in self.folder.iterdir())


def _temp_name(path: Path) -> Path:
    # the host too: nodes may share a cache folder, and a PID means something on its host only
    return path.with_name(f"{path.name}.tmp-{os.getpid()}@{socket.gethostname()}")


def _write_beton(split: sources.Split, path: Path, settings: dict, workers: int) -> list[tuple[Path, str]]:
    """Write the split to path; return the images that failed to decode (then nothing
    is written)."""
    from ffcv.fields import IntField, RGBImageField
    from ffcv.writer import DatasetWriter

    tmp = _temp_name(path)
    try:
        writer = DatasetWriter(str(tmp), {
            "image": RGBImageField(**_image_field_arguments(settings)),
            "label": IntField(),
        }, num_workers=workers)
        print(f"writing {path} ({len(split)} images)", file=sys.stderr, flush=True)
        with tempfile.TemporaryDirectory(prefix="decode-failures-") as records:
            recorder = (DecodeFailureRecorder(split, Path(records))
                        if isinstance(split, sources.FolderSplit) else None)
            try:
                with interrupted_if_a_writer_dies() as deaths:
                    writer.from_indexed_dataset(recorder or split)
            except KeyboardInterrupt:
                release_shared_memory(writer)
                if not deaths:
                    raise                       # the user's Ctrl-C
                raise ConfigError(
                    f"an FFCV writer process died while writing {path} ({deaths[0]}); nothing "
                    "was written. A SIGKILL is most often the kernel's out-of-memory killer "
                    "(dmesg says): free memory, or lower write_max_resolution, and run the "
                    "same command again") from None
            failures = recorder.failures() if recorder else []
        if not failures:
            put_in_place(tmp, path)
        return failures
    finally:
        tmp.unlink(missing_ok=True)


def _remove_dead_temps(folder: Path, split_name: str) -> None:
    """Remove the temporary .beton files of this host's conversions that were killed
    (kill -9, power loss): they are as large as the data set."""
    for tmp in sorted(folder.glob(f"{split_name}-*.beton.tmp-*")):
        match = re.fullmatch(r".*\.tmp-(\d+)(?:@(.*))?", tmp.name)
        if not match or match[2] not in (None, socket.gethostname()) or psutil.pid_exists(int(match[1])):
            continue
        size = tmp.stat().st_size
        tmp.unlink(missing_ok=True)
        print(f"[prepare] removed {tmp} ({size / 1e6:.1f} MB), left by process {match[1]}, "
              "which no longer runs", file=sys.stderr)


# An FFCV .beton starts with its header (format version, field count, page size, sample
# count: 24 bytes), one descriptor per field (1,041 bytes each), then one 24-byte record
# per sample (its label, its image's storage mode, stored size and where its bytes lie).
# The first 64 KiB thus cover the layout and the first ~2,640 samples' records: another
# subset, source or write setting changes them, and reading them costs the same on a
# 100 GB file as on a small one. A bounded check, not a checksum of the data.
HEAD_BYTES = 64 * 1024


def head_sha256(path: str | Path) -> str:
    """sha256 of the first HEAD_BYTES bytes of the file (all of it when smaller)."""
    with open(path, "rb") as handle:
        return hashlib.sha256(handle.read(HEAD_BYTES)).hexdigest()


def cached_beton(split: sources.Split, folder: Path, split_name: str, settings: dict, workers: int) -> Path:
    """The split's .beton, keyed by its content and the write settings (write_settings);
    written if missing. A file whose size differs from the one recorded when it was
    written (a copy cut short, a full disk) is rebuilt, never loaded."""
    path = folder / f"{split_name}-{cache_key(split, settings)}.beton"
    with _writing(path):
        return _reused_or_written(split, path, split_name, settings, workers)


@contextlib.contextmanager
def _writing(path: Path) -> Iterator[None]:
    """Hold `path`'s conversion lock (a file beside it naming its holder), waiting for
    another process that holds it; the waiting is said once, with the holder. In a cache
    folder this process cannot write, nothing can be written either: no lock is needed to
    reuse a file there."""
    try:
        handle = open(path.with_name(f".{path.name}.lock"), "a+")
    except OSError:
        if not path.parent.is_dir() or os.access(path.parent, os.W_OK):
            raise
        handle = None
    if handle is None:
        yield
        return
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            # the holder writes the file, or checks the copy it found (the synthetic sets of
            # both splits are often one file: the second holds the lock only to reuse it)
            print(f"[prepare] waiting for process {handle.read().strip() or '?'}, which is writing "
                  f"or checking {path}", file=sys.stderr, flush=True)
            fcntl.flock(handle, fcntl.LOCK_EX)
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()}@{socket.gethostname()}")
        handle.flush()
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _reused_or_written(split: sources.Split, path: Path, split_name: str, settings: dict, workers: int) -> Path:
    record = path.with_name(path.name + ".size")
    _remove_dead_temps(path.parent, split_name)
    if path.is_file():
        size = path.stat().st_size
        if not record.is_file() and _readable_beton(path):      # written before sizes were
            record.write_text(f"{size}\n")                       # recorded: checked once
        recorded = record.read_text().strip() if record.is_file() else ""
        if recorded == str(size):
            said.say(f"[prepare] reusing {path} (same images and write settings)", file=sys.stderr)
            return path
        print(f"[prepare] {path} is {size} bytes, but {recorded or 'it cannot be read and no size'} "
              "was recorded when it was written: damaged, rebuilding it", file=sys.stderr)
        path.unlink()
    failures = _write_beton(split, path, settings, workers)
    if failures:
        forget_verdicts(manifest_path(path.parent, split_name), [p for p, _ in failures])
        raise ConfigError(
            f"{len(failures)} images could not be decoded while writing {path}, although they "
            f"were checked before (changed since, or unreadable):\n{bad_image_listing(failures)}\n"
            "Replace or remove them, or pass skip_bad_images=true to leave them out; nothing "
            "was written, and the next run checks them again.")
    record.write_text(f"{path.stat().st_size}\n")
    return path


def _readable_beton(path: Path) -> bool:
    """FFCV can read the file's header, field descriptions and allocation table."""
    from ffcv.reader import Reader
    try:
        Reader(str(path))
        return True
    except Exception:  # noqa: BLE001 - any failure to parse means: do not load it
        return False
