"""Which images of a folder can go through the pipeline, checked before any is written.

Every image's size is read from its header: one over max_image_pixels is refused without
being decoded (a decompression bomb). Every other image is decoded once; an unreadable
one, or one so small that a stored side or the evaluation crop would be 0 px, fails the
step, naming every bad path, unless skip_bad_images=true, which leaves them out, counts
them, and lists them in `skipped_images.txt` beside the .beton files (an MLPerf run should train on the whole
data set: skipping is opt-in). The verdicts are remembered in `verified-<split>.json`
beside the .beton files, by path, size and mtime, so an unchanged data set is not decoded
again on the next invocation.
"""
from __future__ import annotations

import functools
import json
import multiprocessing
import os
import signal
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from types import FrameType
from typing import Any

from .. import said
from ..config import Config, ConfigError
from ..jsonfile import write_json
from . import sources
from .progress_meter import ProgressMeter


def manifest_path(folder: Path, split_name: str) -> Path:
    """The verdicts on a split's images, beside its .beton files."""
    return folder / f"verified-{split_name}.json"


def pixel_problem(height: int, width: int, max_pixels: int) -> str | None:
    """Why an image of this size is refused before it is decoded (max_image_pixels), or None."""
    if height * width <= max_pixels:
        return None
    return (f"{width}x{height} px ({width * height:,} pixels) is over max_image_pixels={max_pixels}: "
            "decoded, it would take that many times 3 bytes, in each worker")


def _check_image(path: Path, max_pixels: int) -> tuple[str | None, int, int]:
    """(why it cannot be used or None, height, width) of one image file: its size read from
    its header first, and an image over max_pixels refused without being decoded."""
    try:
        width, height = sources.image_size(path)
        over = pixel_problem(height, width, max_pixels)
        if over:
            return over, height, width
        image = sources.load_rgb(path)
        if image.ndim != 3 or min(image.shape[:2]) < 1:
            return f"decoded to shape {image.shape}", 0, 0
    except Exception as exc:  # noqa: BLE001 - PIL raises many types for broken files
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


def check_images(split: sources.FolderSplit, workers: int, manifest: Path, max_pixels: int,
                 unusable: Callable[[int, int], str | None] = lambda height, width: None) -> None:
    """Decode every image whose (size, mtime) this manifest has not seen verified; record
    the unreadable ones, those over max_pixels (read from their header, never decoded) and
    those `unusable(height, width)` refuses, in split.bad. The manifest (beside the .beton
    files) remembers each verdict and size, so an unchanged data set is not decoded again on
    the next invocation; an image over the limit is not remembered (a higher limit decodes it)."""
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
        progress = ProgressMeter(f"checking {sources.display(split.root)}", len(todo))
        for (_, key, stat), (problem, height, width) in zip(
                todo, checked([p for p, _, _ in todo], workers, max_pixels)):
            verdicts[key] = [stat.st_size, stat.st_mtime_ns, problem, height, width]
            progress.advance()
        progress.done()
    if len(todo) < len(split.samples):
        said.say(f"[prepare] {len(split.samples) - len(todo)} images of {sources.display(split.root)} "
                 f"unchanged since verified ({manifest.name}): not decoded again", file=sys.stderr)
    for path, _ in split.samples:
        _, _, problem, height, width = verdicts[str(path)]
        problem = problem or pixel_problem(height, width, max_pixels) or unusable(height, width)
        if problem:
            split.bad.append((path, problem))
    write_json(manifest, {**known, **{key: seen for key, seen in verdicts.items()
                                      if not pixel_problem(seen[3], seen[4], max_pixels)}}, compact=True)


_slot: list = []        # in a check's worker process: (every worker's slot, this one's index)


def _claim_slot(slots: Any, claimed: Any) -> None:
    """A worker's start: a slot of its own, where it notes the image it decodes (1-based; 0:
    none). Ended by the pool (SIGTERM: another worker died), it empties its slot first, so
    that the one slot left names the image whose worker was lost."""
    with claimed.get_lock():
        index = claimed.value
        claimed.value += 1
    _slot[:] = [slots, index]

    def ended_by_the_pool(signum: int, frame: FrameType | None) -> None:
        slots[index] = 0
        os._exit(1)
    signal.signal(signal.SIGTERM, ended_by_the_pool)


def _check_numbered(item: tuple[int, Path], max_pixels: int) -> tuple[str | None, int, int]:
    slots, index = _slot
    slots[index] = item[0] + 1
    verdict = _check_image(item[1], max_pixels)
    slots[index] = 0
    return verdict


def checked(paths: list[Path], workers: int, max_pixels: int) -> Iterator[tuple[str | None, int, int]]:
    """Each image's verdict, in order, from `workers` processes; a worker lost (killed for
    memory) is a ConfigError, one line, naming the image it was decoding."""
    slots, claimed = multiprocessing.Array("q", workers, lock=False), multiprocessing.Value("i", 0)
    with ProcessPoolExecutor(max_workers=workers, initializer=_claim_slot, initargs=(slots, claimed)) as pool:
        try:
            yield from pool.map(functools.partial(_check_numbered, max_pixels=max_pixels),
                                enumerate(paths), chunksize=64)
        except BrokenProcessPool:
            pool.shutdown(wait=True)        # the other workers ended (their slots emptied)
            lost = [sources.display(paths[number - 1]) for number in slots if number]
            raise ConfigError(
                f"a worker process of the image check ended abruptly while it decoded "
                f"{' or '.join(lost) or 'an image'}: most often the kernel's out-of-memory killer (dmesg "
                "names it). Lower max_image_pixels= (or remove that image), or free memory, and run "
                "again") from None


def _read_manifest(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}          # missing or damaged: every image is checked again


def forget_verdicts(manifest: Path, paths: list[Path]) -> None:
    """So that the next run checks these images again."""
    known = _read_manifest(manifest)
    write_json(manifest, {key: seen for key, seen in known.items()
                          if key not in {str(p) for p in paths}}, compact=True)


def bad_image_listing(bad: list[tuple[Path, str]]) -> str:
    """The lines of an error message that name unusable images and why."""
    return sources.listing([f"{sources.display(p)}: {why}" for p, why in bad])


def drop_unusable(splits: tuple[sources.FolderSplit, sources.FolderSplit], folder: Path, config: Config,
                  workers: int) -> int:
    """Check the folder splits' images; fail on unreadable or too small ones unless
    skip_bad_images (then leave them out and list them). Returns how many were left out."""
    bad: list[tuple[Path, str]] = []
    for split, name in zip(splits, ("train", "val")):
        if split.ignored:
            print(f"[prepare] ignoring {len(split.ignored)} entries that are not image files in "
                  f"{sources.display(split.root)} (e.g. {sources.display(split.ignored[0])})"
                  f"{_archives_note(split.ignored)}", file=sys.stderr)
        check_images(split, workers, manifest_path(folder, name), config.max_image_pixels,
                     functools.partial(too_small, config=config, split_name=name))
        bad += split.bad
    listing = folder / "skipped_images.txt"
    if bad and not config.skip_bad_images:
        listing.unlink(missing_ok=True)
        raise ConfigError(f"{len(bad)} unusable images (unreadable, or too small for the "
                          f"pipeline):\n{bad_image_listing(bad)}\n"
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
