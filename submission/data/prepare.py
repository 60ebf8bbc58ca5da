"""Images -> FFCV .beton files, cached by content.

Each split's cache key covers its source (file names, sizes and mtimes, or the idx
bytes), the write settings and the subset: a second run with the same inputs reuses
the file, any change writes a new one. Files are written under a temporary name and
renamed on success, so a .beton that exists is complete; the temporary file of a
conversion that was killed is removed by the next one.

Unusable images (unreadable, or so small that a stored side or the evaluation crop
would be 0 px) fail the step, naming every bad path, unless skip_bad_images=true, which
leaves them out, counts them, and lists them in `skipped_images.txt` beside the .beton
files (an MLPerf run should train on the whole data set: skipping is opt-in).

Beside the data, `prepare` writes a small synthetic .beton of random images for each
split, with the same write settings and the split's largest stored height and width, on
which the loaders are warmed up before run_start (warmup.warm_up_loaders).
"""
from __future__ import annotations

import _thread
import contextlib
import hashlib
import json
import logging
import os
import re
import signal
import socket
import sys
import tempfile
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import resource_tracker
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import psutil

from ..config import REPO_ROOT, Config, ConfigError
from ..jsonfile import write_json
from . import sources

FORMAT_VERSION = 1   # bump when the way .beton files are written changes


@dataclass
class PreparedData:
    train_path: str
    val_path: str
    num_classes: int
    train_samples: int
    eval_samples: int
    skipped_images: int = 0
    # random images written the same way, shaped like each split: the loaders' warm-up
    synthetic_train_path: str = ""
    synthetic_val_path: str = ""
    synthetic_samples: int = 0
    # head_sha256 of each split's .beton, taken here, where reading the data is allowed:
    # the ranks compare them before run_start without opening the files (data.fingerprint)
    train_head_sha256: str = ""
    val_head_sha256: str = ""

    @classmethod
    def load(cls, path: Path) -> "PreparedData":
        fields = json.loads(Path(path).read_text())
        if "synthetic_path" in fields:      # written before the splits had files of their own
            fields["synthetic_train_path"] = fields["synthetic_val_path"] = fields.pop("synthetic_path")
        return cls(**fields)

    def to_dict(self) -> dict:
        return asdict(self)

    def save(self, path: Path) -> None:
        write_json(Path(path), self.to_dict())


def _subset_indices(total: int, limit: int) -> np.ndarray:
    """Evenly spaced indices, so a subset keeps every class (sources are class-sorted)."""
    if not limit or limit >= total:
        return np.arange(total)
    return np.linspace(0, total - 1, limit).round().astype(np.int64)


def _subset(split, limit: int):
    keep = _subset_indices(len(split), limit)
    if isinstance(split, sources.ArraySplit):
        return sources.ArraySplit(split.images[keep], split.labels[keep], split.classes,
                                  split.source_digest)
    split.samples = [split.samples[i] for i in keep]
    return split


class SyntheticSplit:
    """Random-noise images with labels in the data set's class range: the file a split's
    loader is warmed up on before run_start (warmup.py). Its first image has the split's
    largest stored height and width, the others are no larger: FFCV sizes a decoder's
    scratch buffer by the file's largest height and width, so the warm-up's buffers come
    out the size of the run's (on a GPU they are pinned, and torch's host cache hands a
    freed block on only to a request of its power-of-two size)."""
    SMALL_SHAPE = (48, 64)

    def __init__(self, count: int, num_classes: int, largest: tuple[int, int]):
        self.count, self.num_classes, self.largest = count, num_classes, tuple(largest)

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, index: int) -> tuple[np.ndarray, int]:
        shape = self.largest if index == 0 else tuple(map(min, self.SMALL_SHAPE, self.largest))
        image = np.random.default_rng(index).integers(0, 256, (*shape, 3), dtype=np.uint8)
        return image, index % self.num_classes

    def fingerprint(self) -> str:
        return f"synthetic {self.count} images, largest {self.largest}, classes {self.num_classes}"


def largest_stored_image(path: str | Path) -> tuple[int, int]:
    """The largest stored height and width among a .beton's images, from its metadata (no
    image is decoded), read by `prepare` before any run starts."""
    from ffcv.reader import Reader
    reader = Reader(str(path))
    images = reader.metadata[f"f{reader.field_names.index('image')}"]
    return int(images["height"].max()), int(images["width"].max())


def _check_image(path: Path) -> tuple[str | None, int, int]:
    """(why it cannot be used or None, height, width) of one image file."""
    try:
        image = sources.load_rgb(path)
        if image.ndim != 3 or min(image.shape[:2]) < 1:
            return f"decoded to shape {image.shape}", 0, 0
    except Exception as exc:  # PIL raises many types for broken files
        return f"{type(exc).__name__}: {exc}", 0, 0
    return None, int(image.shape[0]), int(image.shape[1])


def stored_shape(height: int, width: int, max_resolution: int) -> tuple[int, int]:
    """The (height, width) FFCV's RGBImageField stores: scaled down, truncated, so that
    the long side is at most max_resolution."""
    ratio = max_resolution / max(height, width) if max_resolution else 1.0
    return (int(ratio * height), int(ratio * width)) if ratio < 1 else (height, width)


def too_small(height: int, width: int, config: Config, split_name: str) -> str | None:
    """Why a decodable image cannot go through the split's pipeline, or None: a stored
    side of 0 px, or (validation) a center crop of 0 px, on which FFCV's resize aborts
    the whole process inside OpenCV."""
    stored = stored_shape(height, width, config.write_max_resolution)
    if min(stored) < 1:
        return (f"{width}x{height} px: stored with its long side at write_max_resolution="
                f"{config.write_max_resolution}, its short side would be 0 px")
    crop_ratio = config.eval_resolution / config.eval_resize
    if split_name == "val" and int(crop_ratio * min(stored)) < 1:
        return (f"{width}x{height} px: the evaluation center crop ({config.eval_resolution}/"
                f"{config.eval_resize} of the short side) would be 0 px")
    return None


def check_images(split: sources.FolderSplit, workers: int, manifest: Path,
                 unusable=lambda height, width: None) -> None:
    """Decode every image whose (size, mtime) this manifest has not seen verified; record
    the unreadable ones, and those `unusable(height, width)` refuses, in split.bad. The
    manifest (beside the .beton files) remembers each verdict and size, so an unchanged
    data set is not decoded again on the next invocation."""
    known = _read_manifest(manifest)
    verdicts: dict[str, list] = {}
    todo = []
    for path, _ in split.samples:
        key = str(path)          # JSON keeps non-UTF-8 names as escaped surrogates
        stat = path.stat()
        seen = known.get(key)
        if seen and len(seen) == 5 and seen[:2] == [stat.st_size, stat.st_mtime_ns]:
            verdicts[key] = seen
        else:
            todo.append((path, key, stat))
    if todo:
        progress = Progress(f"checking {sources.display(split.root)}", len(todo))
        with ProcessPoolExecutor(max_workers=workers) as pool:
            for (path, key, stat), (problem, height, width) in zip(
                    todo, pool.map(_check_image, [p for p, _, _ in todo], chunksize=64)):
                verdicts[key] = [stat.st_size, stat.st_mtime_ns, problem, height, width]
                progress.advance()
        progress.done()
    if len(todo) < len(split.samples):
        print(f"[prepare] {len(split.samples) - len(todo)} images of {sources.display(split.root)} "
              f"unchanged since verified ({manifest.name}): not decoded again", file=sys.stderr)
    for path, _ in split.samples:
        _, _, problem, height, width = verdicts[str(path)]
        problem = problem or unusable(height, width)
        if problem:
            split.bad.append((path, problem))
    write_json(manifest, {**known, **verdicts}, compact=True)


def _read_manifest(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}          # missing or damaged: every image is checked again


class Progress:
    """A one-line progress meter on stderr: done/total, rate, ETA."""

    def __init__(self, label: str, total: int):
        self.label, self.total, self.count = label, total, 0
        self.start = self.last = time.monotonic()

    def advance(self, n: int = 1) -> None:
        self.count += n
        now = time.monotonic()
        if now - self.last >= 2 or self.count == self.total:
            self.last = now
            rate = self.count / max(now - self.start, 1e-9)
            eta = (self.total - self.count) / rate if rate else 0
            print(f"\r{self.label}: {self.count}/{self.total} ({rate:.0f}/s, ETA {eta:.0f}s)",
                  end="", file=sys.stderr, flush=True)

    def done(self) -> None:
        print(f"\r{self.label}: {self.count}/{self.total} in {time.monotonic() - self.start:.1f}s",
              file=sys.stderr, flush=True)


def _write_settings(config: Config) -> dict:
    return {"write_mode": config.write_mode, "max_resolution": config.write_max_resolution,
            "jpeg_quality": config.write_jpeg_quality,
            "compress_probability": config.write_compress_probability}


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
        except Exception as exc:  # PIL raises many types for broken files
            (self.folder / str(index)).write_text(f"{type(exc).__name__}: {exc}")
            return self.PLACEHOLDER, self.split.samples[index][1]

    def failures(self) -> list[tuple[Path, str]]:
        return sorted((self.split.samples[int(record.name)][0], record.read_text())
                      for record in self.folder.iterdir())


def _temp_name(path: Path) -> Path:
    # the host too: nodes may share a cache folder, and a PID means something on its host only
    return path.with_name(f"{path.name}.tmp-{os.getpid()}@{socket.gethostname()}")


def _write_beton(split, path: Path, settings: dict, workers: int) -> list[tuple[Path, str]]:
    """Write the split to path; return the images that failed to decode (then nothing
    is written)."""
    from ffcv.fields import IntField, RGBImageField
    from ffcv.writer import DatasetWriter

    tmp = _temp_name(path)
    try:
        writer = DatasetWriter(str(tmp), {
            "image": RGBImageField(write_mode=settings["write_mode"],
                                   max_resolution=settings["max_resolution"],
                                   jpeg_quality=settings["jpeg_quality"],
                                   compress_probability=settings["compress_probability"]),
            "label": IntField(),
        }, num_workers=workers)
        print(f"writing {path} ({len(split)} images)", file=sys.stderr, flush=True)
        with tempfile.TemporaryDirectory(prefix="decode-failures-") as records:
            recorder = (DecodeFailureRecorder(split, Path(records))
                        if isinstance(split, sources.FolderSplit) else None)
            try:
                with _interrupted_if_a_writer_dies() as deaths:
                    writer.from_indexed_dataset(recorder or split)
            except KeyboardInterrupt:
                _release(writer)
                if not deaths:
                    raise                       # the user's Ctrl-C
                raise ConfigError(
                    f"an FFCV writer process died while writing {path} ({deaths[0]}); nothing "
                    "was written. A SIGKILL is most often the kernel's out-of-memory killer "
                    "(dmesg says): free memory, or lower write_max_resolution, and run the "
                    "same command again") from None
            failures = recorder.failures() if recorder else []
        if not failures:
            tmp.rename(path)
        return failures
    finally:
        tmp.unlink(missing_ok=True)


@contextlib.contextmanager
def _interrupted_if_a_writer_dies():
    """FFCV's writer waits until its worker processes have written every sample: one that
    dies (killed for memory, an error outside DecodeFailureRecorder) leaves it waiting
    forever. A thread watches this process's new children while the writer runs and,
    when one has exited with an error, records how and interrupts the wait (a
    KeyboardInterrupt in the main thread). Yields the list of deaths recorded.
    Ctrl-C stops this process only (the workers, forked with a handler that ignores it,
    would each print a traceback); the workers left are killed on the way out."""
    resource_tracker.ensure_running()    # a child of ours as well, which must live on
    me, parent = psutil.Process(), os.getpid()
    existing = {child.pid for child in me.children()}
    deaths: list[str] = []
    finished = threading.Event()
    interrupted_at: list[float] = []     # when the main thread was last interrupted

    def interrupt() -> None:
        interrupted_at.append(time.monotonic())
        _thread.interrupt_main()

    def workers() -> list[psutil.Process]:
        return [child for child in me.children() if child.pid not in existing]

    def watch() -> None:
        while not finished.wait(0.2):
            if interrupted_at:
                # still running a second later: the KeyboardInterrupt was deferred (above)
                if time.monotonic() - interrupted_at[-1] > 1.0:
                    interrupt()
                continue
            died = next(((child, how) for child in workers()
                         if (how := _abnormal_exit(child.pid))), None)
            if died:
                deaths.append(f"process {died[0].pid} {died[1]}")
                interrupt()

    def on_ctrl_c(signum, frame):
        if os.getpid() != parent:
            return
        interrupted_at.append(time.monotonic())
        if frame is not None and frame.f_code.co_filename == logging.__file__:
            # inside logging's at-fork lock handling (FFCV starting a worker): raised there,
            # the exception is dropped and leaves logging's lock held for good; the watcher
            # raises it again a second later
            return
        raise KeyboardInterrupt

    if threading.current_thread() is not threading.main_thread():
        yield deaths        # signals and interrupt_main reach the main thread only
        return
    previous = signal.signal(signal.SIGINT, on_ctrl_c)
    watcher = threading.Thread(target=watch, name="ffcv-writer-watch", daemon=True)
    watcher.start()
    try:
        try:
            yield deaths
        finally:
            finished.set()
            watcher.join()
            signal.signal(signal.SIGINT, previous)
    except BaseException:
        for child in workers():     # they would go on writing, or wait on a queue forever
            child.kill()
        raise


def _abnormal_exit(pid: int) -> str | None:
    """How the child `pid` ended, if it has ended with an error (it stays unreaped)."""
    try:
        ended = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return None
    if ended is None or (ended.si_code == os.CLD_EXITED and ended.si_status == 0):
        return None
    if ended.si_code == os.CLD_EXITED:
        return f"exited with status {ended.si_status}"
    return f"was killed by {signal.Signals(ended.si_status).name}"


def _release(writer) -> None:
    """The shared memory an interrupted DatasetWriter allocated (it frees it only on success)."""
    memory = getattr(writer, "metadata_sm", None)
    if memory is not None:
        memory.close()
        memory.unlink()


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


def _listing(bad: list[tuple[Path, str]]) -> str:
    return sources.listing([f"{sources.display(p)}: {why}" for p, why in bad])


def _forget_verdicts(manifest: Path, paths: list[Path]) -> None:
    """So that the next run checks these images again."""
    known = _read_manifest(manifest)
    write_json(manifest, {key: seen for key, seen in known.items()
                          if key not in {str(p) for p in paths}}, compact=True)


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


def cache_folder(config: Config) -> Path:
    folder = Path(config.cache_dir)
    return folder if folder.is_absolute() else REPO_ROOT / folder


def _cached_beton(split, folder: Path, split_name: str, settings: dict, workers: int) -> Path:
    """The split's .beton, keyed by its content and the write settings; written if missing.
    A file whose size differs from the one recorded when it was written (a copy cut short,
    a full disk) is rebuilt, never loaded."""
    key = hashlib.sha256(json.dumps({
        "format": FORMAT_VERSION, "write": settings, "source": split.fingerprint(),
        "samples": len(split)}, sort_keys=True).encode()).hexdigest()[:16]
    path = folder / f"{split_name}-{key}.beton"
    record = path.with_name(path.name + ".size")
    _remove_dead_temps(folder, split_name)
    if path.is_file():
        size = path.stat().st_size
        if not record.is_file() and _readable_beton(path):      # written before sizes were
            record.write_text(f"{size}\n")                       # recorded: checked once
        recorded = record.read_text().strip() if record.is_file() else ""
        if recorded == str(size):
            print(f"[prepare] reusing {path} (same images and write settings)", file=sys.stderr)
            return path
        print(f"[prepare] {path} is {size} bytes, but {recorded or 'it cannot be read and no size'} "
              "was recorded when it was written: damaged, rebuilding it", file=sys.stderr)
        path.unlink()
    failures = _write_beton(split, path, settings, workers)
    if failures:
        _forget_verdicts(folder / f"verified-{split_name}.json", [p for p, _ in failures])
        raise ConfigError(
            f"{len(failures)} images could not be decoded while writing {path}, although they "
            f"were checked before (changed since, or unreadable):\n{_listing(failures)}\n"
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


def _drop_unusable(splits, folder: Path, config: Config, workers: int) -> int:
    """Check folder images; fail on unreadable or too small ones unless skip_bad_images
    (then list them)."""
    bad = []
    for split, name in zip(splits, ("train", "val")):
        if split.ignored:
            print(f"[prepare] ignoring {len(split.ignored)} entries that are not image files in "
                  f"{sources.display(split.root)} (e.g. {sources.display(split.ignored[0])})"
                  f"{_archives_note(split.ignored)}", file=sys.stderr)
        check_images(split, workers, folder / f"verified-{name}.json",
                     lambda height, width, name=name: too_small(height, width, config, name))
        bad += split.bad
    listing = folder / "skipped_images.txt"
    if bad and not config.skip_bad_images:
        listing.unlink(missing_ok=True)
        raise ConfigError(f"{len(bad)} unusable images (unreadable, or too small for the "
                          f"pipeline):\n{_listing(bad)}\n"
                          "Replace or remove them, or pass skip_bad_images=true to leave "
                          "them out (they are then counted and listed).")
    if bad:
        unusable = {p for p, _ in bad}
        for split in splits:
            split.samples = [(p, label) for p, label in split.samples if p not in unusable]
        listing.write_text("".join(f"{sources.display(p)}\t{why}\n" for p, why in bad))
        print(f"[prepare] skipping {len(bad)} unusable images, listed in {listing}",
              file=sys.stderr)
    else:
        listing.unlink(missing_ok=True)     # a listing of an earlier preparation is stale
    return len(bad)


def _archives_note(ignored: list[Path]) -> str:
    archives = [p for p in ignored if sources.is_archive(p)]
    if not archives:
        return ""
    return (f"; {len(archives)} of them archives (e.g. {sources.display(archives[0])}), whose "
            "images are not read: if they hold images of the data set (an unextracted class), "
            "extract them into their class folders first")


def prepare(config: Config) -> PreparedData:
    """Return the .beton pair for this configuration, writing what is missing.

    Each split is cached on its own, so a new eval subset does not rewrite the training
    set. The returned description is also saved as JSON (`PreparedData.save`), which
    is what the training processes read.
    """
    workers = max(os.cpu_count() or 1, 1)
    if config.dataset == "fashion-mnist":
        train, val = sources.load_fashion_mnist(config.data_dir)
        name = "fashion-mnist"
    else:
        if not config.data_dir:
            raise ConfigError("dataset=imagenet needs data_dir=FOLDER (with train/ and val/).\n"
                              + sources.SUPPORTED_LAYOUTS)
        train, val = sources.scan_image_folder(Path(config.data_dir), config.val_labels)
        name = Path(config.data_dir).resolve().name or "images"
    train, val = _subset(train, config.train_limit), _subset(val, config.eval_limit)
    folder = cache_folder(config) / name
    folder.mkdir(parents=True, exist_ok=True)
    skipped = 0
    if isinstance(train, sources.FolderSplit):
        skipped = _drop_unusable((train, val), folder, config, workers)
    if not len(train) or not len(val):
        raise ConfigError("no images left to write after filtering")
    settings = _write_settings(config)
    train_path = _cached_beton(train, folder, "train", settings, workers)
    val_path = _cached_beton(val, folder, "val", settings, workers)
    # one batch for each loader: enough to compile its pipeline (warmup.warm_up_loaders)
    count = max(config.batch_per_device, config.eval_batch)
    synthetic_folder = cache_folder(config) / "synthetic"
    synthetic_folder.mkdir(exist_ok=True)
    def synthetic_like(path: Path) -> Path:
        split = SyntheticSplit(count, len(train.classes), largest_stored_image(path))
        return _cached_beton(split, synthetic_folder, "synthetic", settings, workers)
    synthetic_train, synthetic_val = synthetic_like(train_path), synthetic_like(val_path)
    return PreparedData(str(train_path), str(val_path), num_classes=len(train.classes),
                        train_samples=len(train), eval_samples=len(val), skipped_images=skipped,
                        synthetic_train_path=str(synthetic_train),
                        synthetic_val_path=str(synthetic_val), synthetic_samples=count,
                        train_head_sha256=head_sha256(train_path),
                        val_head_sha256=head_sha256(val_path))
