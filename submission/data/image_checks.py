"""Which images of a folder can go through the pipeline, checked before any is written.

Every image is decoded once; an unreadable one, or one so small that a stored side or the
evaluation crop would be 0 px, fails the step, naming every bad path, unless
skip_bad_images=true, which leaves them out, counts them, and lists them in
`skipped_images.txt` beside the .beton files (an MLPerf run should train on the whole
data set: skipping is opt-in). The verdicts are remembered in `verified-<split>.json`
beside the .beton files, by path, size and mtime, so an unchanged data set is not decoded
again on the next invocation.
"""
from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from .. import said
from ..config import Config, ConfigError
from ..jsonfile import write_json
from . import sources
from .progress_meter import ProgressMeter


def manifest_path(folder: Path, split_name: str) -> Path:
    """The verdicts on a split's images, beside its .beton files."""
    return folder / f"verified-{split_name}.json"


def _check_image(path: Path) -> tuple[str | None, int, int]:
    """(why it cannot be used or None, height, width) of one image file."""
    try:
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


def check_images(split: sources.FolderSplit, workers: int, manifest: Path,
                 unusable: Callable[[int, int], str | None] = lambda height, width: None) -> None:
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
        progress = ProgressMeter(f"checking {sources.display(split.root)}", len(todo))
        with ProcessPoolExecutor(max_workers=workers) as pool:
            for (_, key, stat), (problem, height, width) in zip(
                    todo, pool.map(_check_image, [p for p, _, _ in todo], chunksize=64)):
                verdicts[key] = [stat.st_size, stat.st_mtime_ns, problem, height, width]
                progress.advance()
        progress.done()
    if len(todo) < len(split.samples):
        said.say(f"[prepare] {len(split.samples) - len(todo)} images of {sources.display(split.root)} "
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
        check_images(split, workers, manifest_path(folder, name),
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
