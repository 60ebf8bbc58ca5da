"""Where images come from: an ImageNet-style folder or the Fashion-MNIST idx files.

Each source is an indexed data set of (HxWx3 uint8 array, label) that FFCV's writer
consumes, plus a fingerprint of its inputs so that prepared .beton files can be reused.

Supported folder layouts (the same for train/ and val/):
  nested:  <split>/<class>/<image>            (class = folder name, e.g. a WordNet id)
  flat:    <split>/<image> + a label file      (validation only, see read_label_file)
Image files are recognised by extension; anything else is listed as ignored.
"""
from __future__ import annotations

import csv
import gzip
import hashlib
import math
import os
import struct
import subprocess
import sys
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import numpy as np
from PIL import Image

from ..config import ConfigError

# Images per split (train, val) of the data sets the harness prepares, before train_limit /
# eval_limit: ImageNet-1k (ILSVRC 2012) and Fashion-MNIST, as their publishers list them.
PUBLISHED_SPLIT_SIZES = {"imagenet": (1_281_167, 50_000), "fashion-mnist": (60_000, 10_000)}
IMAGE_EXTENSIONS = {".jpeg", ".jpg", ".jfif", ".png", ".gif", ".bmp", ".webp", ".tif", ".tiff",
                    ".ppm"}
ARCHIVE_SUFFIXES = (".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tar.xz", ".zip", ".7z", ".rar")
LABEL_HEADERS = ("ImageId", "image", "filename", "file", "id")   # first column, any case
IDX_LARGEST = 1 << 28       # bytes of data: Fashion-MNIST's largest idx file holds 47,040,000
FASHION_MNIST_PACKAGE_DIR = Path("/usr/share/datasets/fashion-mnist")
FASHION_MNIST_CLASSES = ("t-shirt", "trouser", "pullover", "dress", "coat",
                         "sandal", "shirt", "sneaker", "bag", "ankle-boot")
SUPPORTED_LAYOUTS = (
    "supported layouts:\n"
    "  DIR/train/<class>/<image> and DIR/val/<class>/<image>   (nested)\n"
    "  DIR/val/<image> plus val_labels=FILE                     (flat validation), where FILE is\n"
    "    a CSV of image,class-folder-name rows (e.g. Kaggle's LOC_val_solution.csv:\n"
    "    ImageId,PredictionString); convert the devkit's ground truth with its meta.mat first")


@contextmanager
def _no_pixel_limit() -> Iterator[None]:
    """PIL refuses images over ~179 M pixels as decompression bombs (and warns over ~89 M):
    a guard against hostile files, but these are the user's own images. Lifted for this
    decoding only, so PIL's limit stays as it was for any other code."""
    saved = Image.MAX_IMAGE_PIXELS
    Image.MAX_IMAGE_PIXELS = None
    try:
        yield
    finally:
        Image.MAX_IMAGE_PIXELS = saved


def image_size(path: Path) -> tuple[int, int]:
    """(width, height) from the image's header: PIL opens lazily, and nothing is decoded."""
    with _no_pixel_limit(), Image.open(path) as image:
        return image.size


def load_rgb(path: Path) -> np.ndarray:
    """Decode any PIL-readable image (grey, CMYK, palette, alpha; a GIF's first frame),
    whatever its size, to HxWx3 uint8 RGB.

    EXIF orientation is not applied: the pixels are used as stored, as torchvision's
    ImageFolder, the MLPerf reference and the published entry's FFCV writer do."""
    with _no_pixel_limit(), Image.open(path) as image:
        image.load()
        if image.mode in ("RGBA", "LA") or (image.mode == "P" and "transparency" in image.info):
            # composite transparent pixels on white rather than on whatever RGB lies beneath
            rgba = image.convert("RGBA")
            background = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
            image = Image.alpha_composite(background, rgba)
        if image.mode.startswith("I;16") or image.mode in ("I", "F"):
            # 16-bit or float grey: PIL's convert("RGB") clips instead of scaling
            grey = np.asarray(image, dtype=np.float64)
            top = 65535.0 if image.mode.startswith("I;16") or grey.max() > 255 else 255.0
            grey = np.clip(grey / top * 255.0 + 0.5, 0, 255).astype(np.uint8)
            return np.repeat(grey[..., None], 3, axis=-1)
        return np.asarray(image.convert("RGB"), dtype=np.uint8)


class Split(Protocol):
    """A split as a .beton is written from it (beton_cache.py): FolderSplit, ArraySplit, or
    synthetic.SyntheticSplit."""
    def __len__(self) -> int: ...

    def __getitem__(self, index: int) -> tuple[np.ndarray, int]: ...

    def fingerprint(self) -> str: ...


@dataclass
class FolderSplit:
    """The images of one split of an image folder, with integer labels."""
    root: Path
    samples: list[tuple[Path, int]]
    classes: list[str]
    ignored: list[Path] = field(default_factory=list)   # non-image files
    bad: list[tuple[Path, str]] = field(default_factory=list)  # unusable images, and why

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, index: int) -> tuple[np.ndarray, int]:
        path, label = self.samples[index]
        return load_rgb(path), label

    def fingerprint(self) -> str:
        digest = hashlib.sha256()
        for path, label in self.samples:
            stat = path.stat()
            digest.update(os.fsencode(path.relative_to(self.root))
                          + f"\0{label}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
        return digest.hexdigest()


def display(path: Path) -> str:
    """A path for messages, whatever bytes its name has (non-UTF-8 names shown escaped)."""
    return os.fsencode(path).decode("utf-8", errors="backslashreplace")


def _is_image(path: Path) -> bool:
    return path.suffix.lower() in IMAGE_EXTENSIONS


def is_archive(path: Path) -> bool:
    return path.name.lower().endswith(ARCHIVE_SUFFIXES)


def _files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.is_file() and not p.name.startswith("."))


def _subfolders(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))


def listing(lines: list[str], most: int = 20) -> str:
    """The first `most` lines, indented, and how many more there are."""
    more = f"\n  ... and {len(lines) - most} more" if len(lines) > most else ""
    return "\n".join(f"  {line}" for line in lines[:most]) + more


def _refuse_dangling_links(split_dir: Path) -> None:
    """Links (class folders or images) whose target is missing, e.g. an unmounted disk,
    would otherwise drop their class or image without a word."""
    links = sorted(Path(entry.path) for folder in [split_dir, *_subfolders(split_dir)]
                   for entry in os.scandir(folder)      # is_symlink() costs no system call
                   if entry.is_symlink() and not entry.name.startswith(".")
                   and not os.path.exists(entry.path))
    if links:
        shown = listing([f"{display(p)} -> {os.readlink(p)}" for p in links])
        raise ConfigError(f"{len(links)} symbolic links in {display(split_dir)} point to nothing:\n"
                          f"{shown}\nMount or restore what they point to, or remove the links.")


def _subfolder_with_images(folder: Path) -> Path | None:
    return next((sub for sub in _subfolders(folder) if any(map(_is_image, _files(sub)))), None)


def _empty_class_folders_message(empty: list[Path]) -> str:
    message = ("class folders without a single image: " + ", ".join(str(p) for p in empty[:5])
               + " — remove them or add their images")
    deeper = next(filter(None, map(_subfolder_with_images, empty)), None)
    if deeper:
        message += (f". {display(deeper)} holds images, but images in subfolders of a class "
                    "folder are not read: data_dir (or that class folder) is probably one level "
                    "off; point data_dir at the folder holding train/<class>/<image>, or move the "
                    "images up into their class folder")
    return message


def _no_images_message(split_dir: Path, found: str = "holds no images") -> str:
    archives = [p.name for p in _files(split_dir) if is_archive(p)]
    unpack = (f", only the archive {', '.join(archives[:3])}: extract it there first (images in "
              "archives are not read)") if archives else ""
    return f"{split_dir} {found}{unpack}.\n{SUPPORTED_LAYOUTS}"


def scan_nested(split_dir: Path, classes: list[str] | None = None) -> FolderSplit:
    class_dirs = _subfolders(split_dir)
    names = [p.name for p in class_dirs]
    if classes is None:
        classes = names
    unknown = sorted(set(names) - set(classes))
    if unknown:
        raise ConfigError(f"{split_dir} has classes that train/ lacks: {', '.join(unknown[:5])}"
                          f"{' ...' if len(unknown) > 5 else ''}")
    index = {name: i for i, name in enumerate(classes)}
    samples, empty = [], []
    loose = [p for p in _files(split_dir) if _is_image(p)]
    ignored = [p for p in _files(split_dir) if not _is_image(p)]     # e.g. an unextracted n03.tar
    if loose and class_dirs:
        raise ConfigError(
            f"{len(loose)} images lie directly in {split_dir} beside its class folders (e.g. "
            f"{display(loose[0])}): they have no class. Move them into their class folder or "
            "remove them.")
    for class_dir in class_dirs:
        files = _files(class_dir)
        images = [p for p in files if _is_image(p)]
        ignored += [p for p in files if not _is_image(p)]
        # folders inside a class folder (even one named like x.JPEG) are not images
        ignored += _subfolders(class_dir)
        if not images:
            empty.append(class_dir)
        samples += [(p, index[class_dir.name]) for p in images]
    if empty:
        raise ConfigError(_empty_class_folders_message(empty))
    return FolderSplit(split_dir, samples, classes, ignored)


def read_label_file(path: Path, classes: list[str]) -> dict[str, int]:
    """Map image file stem -> class index from a CSV of (image, class folder name).

    The devkit's ILSVRC2012_validation_ground_truth.txt is not accepted: its ids follow
    the order of the devkit's meta.mat, not the class folders, so reading it needs
    meta.mat; convert it to a CSV first (or use Kaggle's LOC_val_solution.csv).
    """
    if not path.is_file():
        raise ConfigError(f"val_labels={path} does not exist")
    index = {name: i for i, name in enumerate(classes)}
    rows = _label_rows(path)
    has_header = bool(rows and rows[0]) and rows[0][0].strip().lower() in {
        header.lower() for header in LABEL_HEADERS}
    if has_header:
        rows = rows[1:]
    if not rows:
        raise ConfigError(f"{path} holds no labels.\n{SUPPORTED_LAYOUTS}")
    labels: dict[str, int] = {}
    for number, row in enumerate(rows, start=1):
        if len(row) < 2 or not row[1].split():
            raise ConfigError(f"{path}, row {number}: expected `image,label`, got {','.join(row)!r}"
                              f"\n{SUPPORTED_LAYOUTS}")
        label = row[1].split()[0]       # Kaggle: "n01751748 x y x y ..." (boxes follow)
        if label not in index:
            raise ConfigError(_unknown_label_message(path, row, number == 1 and not has_header))
        image = Path(row[0].strip()).stem
        if labels.get(image, index[label]) != index[label]:
            raise ConfigError(f"{path}: image {image!r} is listed twice with different labels, "
                              f"{classes[labels[image]]!r} and {label!r} (row {number}): keep "
                              "only the right row")
        labels[image] = index[label]
    return labels


def _label_rows(path: Path) -> list[list[str]]:
    try:
        text = path.read_text(encoding="utf-8-sig")     # -sig: Excel's byte-order mark
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path} is not UTF-8 text ({exc.reason} at byte {exc.start}): save it "
                          "as UTF-8 (Excel: CSV UTF-8)") from None
    return [row for row in csv.reader(text.splitlines()) if any(c.strip() for c in row)]


def _unknown_label_message(path: Path, row: list[str], may_be_header: bool) -> str:
    label = row[1].split()[0]
    # image names and WordNet ids have digits; a header's words have none
    if may_be_header and not any(c.isdigit() for c in row[0] + label):
        return (f"{path}: its first row {','.join(row)!r} looks like a header, but one not "
                f"recognised: a header's first column must be one of {', '.join(LABEL_HEADERS)} "
                "(any case). Rename that column, or remove the row.")
    return f"{path}: label {label!r} of {row[0]!r} is not a class folder in train/"


def scan_flat(split_dir: Path, label_file: Path, classes: list[str]) -> FolderSplit:
    labels = read_label_file(label_file, classes)
    files = _files(split_dir)
    images = [p for p in files if _is_image(p)]
    unlabeled = [p.name for p in images if p.stem not in labels]
    if unlabeled:
        raise ConfigError(f"{len(unlabeled)} images in {split_dir} have no label in {label_file} "
                          f"(first: {', '.join(unlabeled[:3])})")
    samples = [(p, labels[p.stem]) for p in images]
    missing = sorted(set(labels) - {p.stem for p in images})
    if missing:
        print(f"[prepare] {len(missing)} rows of {label_file} name images that {split_dir} does "
              f"not have (e.g. {', '.join(missing[:3])}): those rows are not used", file=sys.stderr)
    return FolderSplit(split_dir, samples, classes, [p for p in files if not _is_image(p)])


def scan_image_folder(data_dir: Path, val_labels: str = "") -> tuple[FolderSplit, FolderSplit]:
    """Find train/ and val/ under data_dir and list their labelled images."""
    if not data_dir.is_dir():
        raise ConfigError(f"data_dir={data_dir} is not a directory.\n{SUPPORTED_LAYOUTS}")
    train_dir, val_dir = data_dir / "train", data_dir / "val"
    if not train_dir.is_dir() or not val_dir.is_dir():
        raise ConfigError(f"{data_dir} needs train/ and val/ subfolders.\n{SUPPORTED_LAYOUTS}")
    _refuse_dangling_links(train_dir)
    _refuse_dangling_links(val_dir)
    train = scan_nested(train_dir)
    if not train.classes:
        raise ConfigError(_no_images_message(train_dir, found="has no class folders"))
    entries = [p for p in val_dir.iterdir() if not p.name.startswith(".")]
    if not entries:
        raise ConfigError(f"{val_dir} is empty: put the validation images there.\n{SUPPORTED_LAYOUTS}")
    has_class_dirs = any(p.is_dir() for p in entries)
    if not has_class_dirs and not any(map(_is_image, _files(val_dir))):
        raise ConfigError(_no_images_message(val_dir))
    if has_class_dirs and val_labels:
        raise ConfigError(f"{val_dir} has class folders, which give the labels; val_labels="
                          f"{val_labels} is only for a flat val/ folder: drop val_labels=")
    if has_class_dirs:
        val = scan_nested(val_dir, train.classes)
    elif val_labels:
        val = scan_flat(val_dir, Path(val_labels), train.classes)
    else:
        raise ConfigError(f"{val_dir} holds images without class folders: pass val_labels=FILE.\n"
                          f"{SUPPORTED_LAYOUTS}")
    return train, val


# ---------------------------------------------------------------------------
@dataclass
class ArraySplit:
    """In-memory greyscale images (N x H x W uint8) with labels; each item is an RGB image
    (the grey channel three times, as ImageNet's pipeline takes), made when it is read."""
    images: np.ndarray
    labels: np.ndarray
    classes: list[str]
    source_digest: str

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int) -> tuple[np.ndarray, int]:
        return np.repeat(self.images[index][..., None], 3, axis=-1), int(self.labels[index])

    def fingerprint(self) -> str:
        return self.source_digest


def fashion_mnist_dir(data_dir: str) -> Path:
    if data_dir:
        return Path(data_dir)
    if FASHION_MNIST_PACKAGE_DIR.is_dir():
        return FASHION_MNIST_PACKAGE_DIR
    try:
        listed = subprocess.run(["dpkg", "-L", "dataset-fashion-mnist"], capture_output=True,
                                text=True, check=True).stdout.split()
        return Path(next(p for p in listed if p.endswith("train-images-idx3-ubyte.gz"))).parent
    except (OSError, subprocess.CalledProcessError, StopIteration):
        raise ConfigError("Fashion-MNIST not found: install the Debian package "
                          "dataset-fashion-mnist (scripts/bootstrap.sh does) or pass "
                          "data_dir=FOLDER holding the four *-idx*-ubyte[.gz] files") from None


def _idx_file(path: Path) -> Path | None:
    """The idx file, zipped or not, or None."""
    return next((p for p in (path, path.with_name(path.name + ".gz")) if p.is_file()), None)


def _refuse_image_folder(folder: Path) -> None:
    """An image folder given to the Fashion-MNIST campaign (system=cpu's data set)."""
    if (not _idx_file(folder / "train-images-idx3-ubyte") and (folder / "train").is_dir()
            and (folder / "val").is_dir()):
        raise ConfigError(
            f"data_dir={folder} is an image folder (train/ and val/), but dataset=fashion-mnist "
            "(what system=cpu runs: the embedded Fashion-MNIST campaign) reads idx files. For "
            f"the image folder pass dataset=imagenet, or use system=local data_dir={folder}.")


def _read_idx(path: Path) -> np.ndarray:
    """An unsigned-byte idx file (gzipped or not), read no further than its header declares:
    a gzip bomb or a damaged file is one line naming it."""
    found = _idx_file(path)
    if found is None:
        raise ConfigError(f"missing Fashion-MNIST file {path}.gz (or its unzipped form)")
    try:
        with gzip.open(found, "rb") if found.suffix == ".gz" else found.open("rb") as file:
            shape = _idx_shape(found, file.read)
            size = math.prod(shape)
            if size > IDX_LARGEST:
                raise ConfigError(f"{found} declares a shape {shape} of {size} bytes, more than any "
                                  f"Fashion-MNIST file ({IDX_LARGEST} at most): download it again")
            raw = file.read(size + 1)
    except (OSError, EOFError, zlib.error) as error:
        raise ConfigError(f"{found} is not a gzip file, or a damaged one ({error}): download it again") from None
    if len(raw) > size:
        raise ConfigError(f"{found} holds more than the {size} bytes of data its header declares "
                          f"(shape {shape}): not a Fashion-MNIST file; download it again")
    if len(raw) < size:
        raise ConfigError(f"{found} is truncated: {len(raw)} bytes for shape {shape}")
    return np.frombuffer(raw, dtype=np.uint8).reshape(shape)


def _idx_shape(found: Path, read: Callable[[int], bytes]) -> tuple[int, ...]:
    head = read(4)
    if len(head) < 4:
        raise ConfigError(f"{found} is {len(head)} bytes long: too short for an idx file; download it again")
    zero, dtype_code, ndim = struct.unpack(">HBB", head)
    if zero != 0 or dtype_code != 0x08:
        raise ConfigError(f"{found} is not an unsigned-byte idx file")
    dims = read(4 * ndim)
    if len(dims) < 4 * ndim:
        raise ConfigError(f"{found} is truncated inside its header; download it again")
    return struct.unpack(">" + "I" * ndim, dims)


def load_fashion_mnist(data_dir: str) -> tuple[ArraySplit, ArraySplit]:
    folder = fashion_mnist_dir(data_dir)
    _refuse_image_folder(folder)
    splits = []
    for prefix in ("train", "t10k"):
        images = _read_idx(folder / f"{prefix}-images-idx3-ubyte")
        labels = _read_idx(folder / f"{prefix}-labels-idx1-ubyte")
        if len(images) != len(labels):
            raise ConfigError(f"{folder}: {len(images)} {prefix} images but {len(labels)} labels")
        digest = hashlib.sha256(images.tobytes() + labels.tobytes()).hexdigest()
        splits.append(ArraySplit(images, labels.astype(np.int64), list(FASHION_MNIST_CLASSES), digest))
    return splits[0], splits[1]
