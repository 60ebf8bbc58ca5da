"""submission/data/sources.py: image folders (nested, or a flat val/ with a label file) and
Fashion-MNIST read as splits; every layout mistake named, with what to do."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from submission.config import ConfigError, resolve
from submission.data import sources
from submission.data.prepare import prepare
from submission.loaders import ffcv_loaders

from image_folders import (  # noqa: F401 - module-scoped fixtures, used by name
    CLASSES,
    CPU,
    FFCV_FINALIZER_NOISE,
    SIZES,
    config,
    error_of,
    fashion,
    make_nested,
    needs_fashion,
    nested,
    picture,
    read_val,
    write_image,
)

pytestmark = FFCV_FINALIZER_NOISE


def test_non_image_files_are_ignored_not_counted(nested):
    root, _, labels, data = nested
    train, val = sources.scan_image_folder(root)
    assert [p.name for p in train.ignored] == ["notes.txt"]        # hidden files are skipped
    assert [p.name for p in val.ignored] == ["README"]
    assert [label for _, label in train.samples] == labels["train"]
    assert data.train_samples == len(labels["train"])


def make_flat(root: Path, classes: list[str], val_labels: list[int]) -> list[Path]:
    make_nested(root, train_counts=(2, 2, 2), val_counts=(), classes=classes)
    (root / "val").mkdir()
    return [write_image(root / "val" / f"ILSVRC2012_val_{i:08d}.JPEG", label, 50 + i,
                        SIZES[i % len(SIZES)])
            for i, label in enumerate(val_labels, start=1)]


FLAT_LABELS = [2, 0, 1, 1, 0, 2, 2]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("style", ["kaggle", "generic"])
def test_flat_val_with_label_file(tmp_path, style):
    root = tmp_path / f"flat_{style}"
    classes = ["n01440764", "n01443537", "n01484850"]
    files = make_flat(root, classes, FLAT_LABELS)
    if style == "kaggle":
        label_file = tmp_path / "LOC_val_solution.csv"
        rows = [f"{f.stem},{classes[label]} 10 10 20 20 {classes[label]} 1 2 3 4"
                for f, label in zip(files, FLAT_LABELS)]
        label_file.write_text("ImageId,PredictionString\n" + "\n".join(reversed(rows)) + "\n")
    else:   # generic, with a blank line, as editors leave them
        label_file = tmp_path / "val_labels.csv"
        label_file.write_text("filename,label\n" + "".join(
            f"{f.name},{classes[label]}\n" for f, label in zip(files, FLAT_LABELS)) + "\n")

    train, val = sources.scan_image_folder(root, str(label_file))
    assert train.classes == classes
    assert [(p.name, label) for p, label in val.samples] == \
        [(f.name, label) for f, label in zip(files, FLAT_LABELS)]

    data = prepare(config(root, tmp_path / "cache", val_labels=label_file))
    assert (data.num_classes, data.train_samples, data.eval_samples) == (3, 6, len(FLAT_LABELS))
    labels, _ = read_val(data.val_path, data.eval_samples)
    assert labels == FLAT_LABELS


def test_missing_data_dir(tmp_path):
    missing = tmp_path / "no_such_folder"
    message = error_of(config(missing, tmp_path / "cache"))
    assert str(missing) in message and "not a directory" in message
    assert "supported layouts" in message
    assert "data_dir" in error_of(config("", tmp_path / "cache"))
    assert not (tmp_path / "cache").exists() or not list((tmp_path / "cache").rglob("*.beton"))


def test_data_dir_without_train_and_val_lists_the_layouts(tmp_path):
    root = tmp_path / "loose"
    write_image(root / "a.JPEG", 0, 1)
    (root / "train").mkdir()
    message = error_of(config(root, tmp_path / "cache"))
    assert "train/ and val/" in message and str(root) in message
    assert "supported layouts" in message
    assert "nested" in message and "val_labels" in message


def test_empty_class_folder_is_named(tmp_path):
    root = tmp_path / "empty_class"
    make_nested(root, train_counts=(2, 2, 2), val_counts=(1, 1, 1))
    (root / "train" / "zebra").mkdir()
    (root / "train" / "zebra" / "notes.txt").write_text("no images here")
    message = error_of(config(root, tmp_path / "cache"))
    assert str(root / "train" / "zebra") in message
    assert "without a single image" in message


def test_flat_val_without_val_labels(tmp_path):
    root = tmp_path / "flat_unlabelled"
    make_flat(root, list(CLASSES), [0, 1, 2])
    message = error_of(config(root, tmp_path / "cache"))
    assert str(root / "val") in message and "val_labels" in message


def test_label_file_naming_an_unknown_class(tmp_path):
    root = tmp_path / "flat_unknown"
    files = make_flat(root, list(CLASSES), [0, 1, 2])
    label_file = tmp_path / "labels.csv"
    label_file.write_text("filename,label\n" + "".join(
        f"{f.name},{name}\n" for f, name in zip(files, ["cat", "wolf", "fox"])))
    message = error_of(config(root, tmp_path / "cache", val_labels=label_file))
    assert "'wolf'" in message and str(label_file) in message
    assert files[1].name in message


def test_devkit_ground_truth_is_refused_with_the_way_out(tmp_path):
    # its ids follow the devkit's meta.mat order, not the class folders: reading it
    # without meta.mat would mislabel almost every image
    root = tmp_path / "flat_devkit"
    make_flat(root, list(CLASSES), [0, 1, 2])
    label_file = tmp_path / "ILSVRC2012_validation_ground_truth.txt"
    label_file.write_text("1\n2\n3\n")
    message = error_of(config(root, tmp_path / "cache", val_labels=label_file))
    assert str(label_file) in message and "image,label" in message and "meta.mat" in message


def test_one_column_label_row_is_named(tmp_path):
    root = tmp_path / "flat_one_column"
    files = make_flat(root, list(CLASSES), [0, 1, 2])
    label_file = tmp_path / "labels.csv"
    label_file.write_text(f"filename,label\n{files[0].name},cat\n{files[1].name}\n")
    message = error_of(config(root, tmp_path / "cache", val_labels=label_file))
    assert "row 2" in message and files[1].name in message


def test_missing_label_file_and_unlabelled_images(tmp_path):
    root = tmp_path / "flat_partial"
    files = make_flat(root, list(CLASSES), [0, 1, 2])
    missing = tmp_path / "nope.csv"
    assert str(missing) in error_of(config(root, tmp_path / "cache", val_labels=missing))
    label_file = tmp_path / "partial.csv"
    label_file.write_text(f"filename,label\n{files[0].name},cat\n")
    message = error_of(config(root, tmp_path / "cache", val_labels=label_file))
    assert "2 images" in message and files[1].name in message


def odd_images(folder: Path) -> dict[str, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = {}
    grey = Image.new("L", (24, 30), 77)
    grey.save(paths.setdefault("grey", folder / "grey.JPEG"), "JPEG", quality=95)
    cmyk = Image.new("CMYK", (30, 24), (0, 255, 255, 0))            # pure red
    cmyk.save(paths.setdefault("cmyk", folder / "cmyk.jpg"), "JPEG", quality=95)
    rgba = np.zeros((20, 28, 4), np.uint8)
    rgba[:, :14] = (10, 200, 30, 255)                                 # opaque green left
    rgba[:, 14:] = (0, 0, 0, 0)                                       # transparent black right
    Image.fromarray(rgba, "RGBA").save(paths.setdefault("rgba", folder / "alpha.png"))
    palette = Image.new("P", (26, 22), 1)
    palette.putpalette([0, 0, 0, 200, 100, 50] + [0] * (256 * 3 - 6))
    palette.save(paths.setdefault("palette", folder / "palette.png"))
    with_transparency = Image.new("P", (22, 26), 1)
    with_transparency.putpalette([0, 0, 0, 40, 50, 60] + [0] * (256 * 3 - 6))
    with_transparency.save(paths.setdefault("palette_alpha", folder / "palette_alpha.png"),
                           transparency=1)
    deep = Image.fromarray(np.full((18, 20), 20000, np.uint16))    # 16-bit grey (mode I;16)
    deep.save(paths.setdefault("grey16", folder / "grey16.png"))
    return paths


def test_odd_images_decode_to_rgb(tmp_path):
    paths = odd_images(tmp_path / "odd")
    with Image.open(paths["grey"]) as im:
        assert im.mode == "L"
    with Image.open(paths["cmyk"]) as im:
        assert im.mode == "CMYK"
    with Image.open(paths["palette"]) as im:
        assert im.mode == "P"
    decoded = {name: sources.load_rgb(path) for name, path in paths.items()}
    for name, image in decoded.items():
        assert image.dtype == np.uint8 and image.ndim == 3 and image.shape[2] == 3, name
    assert decoded["grey"].shape == (30, 24, 3)
    assert np.abs(decoded["grey"].astype(int) - 77).max() <= 2
    assert decoded["cmyk"].shape == (24, 30, 3)
    assert np.abs(decoded["cmyk"].astype(int) - (255, 0, 0)).max() <= 8
    assert decoded["rgba"].shape == (20, 28, 3)
    assert (decoded["rgba"][:, :14] == (10, 200, 30)).all()
    assert (decoded["rgba"][:, 14:] == 255).all()                    # transparent -> white
    assert (decoded["palette"] == (200, 100, 50)).all()
    assert (decoded["palette_alpha"] == 255).all()
    assert np.abs(decoded["grey16"].astype(int) - round(20000 / 65535 * 255)).max() <= 1


def test_odd_images_prepare(tmp_path):
    root = tmp_path / "odd_set"
    for split in ("train", "val"):
        for path in odd_images(root / split / "misc").values():
            path.rename(root / split / "misc" / f"{split}_{path.name}")
        write_image(root / split / "plain" / "plain.JPEG", 0, 3)
    data = prepare(config(root, tmp_path / "cache"))
    assert (data.num_classes, data.train_samples, data.eval_samples) == (2, 7, 7)
    assert data.skipped_images == 0
    assert Path(data.train_path).is_file() and Path(data.val_path).is_file()


@needs_fashion
def test_fashion_mnist_loads_from_the_package(fashion):
    train, val = fashion
    assert (len(train), len(val)) == (60000, 10000)
    assert train.images.shape == (60000, 28, 28) and val.images.shape == (10000, 28, 28)
    assert train.images.dtype == np.uint8
    assert len(train.classes) == 10 and train.classes == val.classes
    assert set(np.unique(train.labels)) == set(range(10)) == set(np.unique(val.labels))
    image, label = train[123]
    assert image.shape == (28, 28, 3) and image.dtype == np.uint8 and 0 <= label < 10
    assert all((image[..., channel] == train.images[123]).all() for channel in range(3))  # grey x 3
    assert train.fingerprint() != val.fingerprint()


def test_fashion_mnist_missing_files_are_named(tmp_path):
    empty = tmp_path / "idx"
    empty.mkdir()
    cfg = resolve("cpu", {"dataset": "fashion-mnist", "data_dir": str(empty),
                          "cache_dir": str(tmp_path / "cache")})
    with pytest.raises(ConfigError) as info:
        prepare(cfg)
    assert str(empty / "train-images-idx3-ubyte") in str(info.value)


def test_empty_val_folder_says_it_is_empty(tmp_path):
    make_nested(tmp_path / "d", val_counts=(0, 0, 0))
    (tmp_path / "d" / "val").mkdir()
    assert "val is empty" in error_of(config(tmp_path / "d", tmp_path / "cache"))


def test_loose_images_beside_class_folders_are_refused(tmp_path):
    make_nested(tmp_path / "d")
    write_image(tmp_path / "d" / "val" / "stray.JPEG", 0, 1)
    message = error_of(config(tmp_path / "d", tmp_path / "cache"))
    assert "1 images lie directly in" in message and "stray.JPEG" in message


def test_val_labels_with_class_folders_is_refused(tmp_path):
    make_nested(tmp_path / "d")
    (tmp_path / "labels.csv").write_text("val_cat_0,wolf\n")
    message = error_of(config(tmp_path / "d", tmp_path / "cache", val_labels=tmp_path / "labels.csv"))
    assert "has class folders" in message and "drop val_labels=" in message


def test_label_rows_without_an_image_are_reported(tmp_path, capfd):
    make_nested(tmp_path / "d", val_counts=(0, 0, 0))
    val = tmp_path / "d" / "val"
    write_image(val / "img_1.JPEG", 0, 1)
    write_image(val / "img_2.JPEG", 1, 2)
    (tmp_path / "labels.csv").write_text("image,label\nimg_1,cat\nimg_2,dog\nimg_3,fox\nimg_4,fox\n")
    data = prepare(config(tmp_path / "d", tmp_path / "cache", val_labels=tmp_path / "labels.csv"))
    assert data.eval_samples == 2
    assert "2 rows of" in capfd.readouterr().err


def test_exif_orientation_is_not_applied(tmp_path):
    """As torchvision's ImageFolder and the MLPerf reference: pixels as stored."""
    image = Image.new("RGB", (40, 20), (200, 10, 10))
    exif = Image.Exif()
    exif[0x0112] = 6                        # "rotate 90 degrees clockwise to display"
    image.save(tmp_path / "rotated.jpg", "JPEG", exif=exif)
    assert sources.load_rgb(tmp_path / "rotated.jpg").shape == (20, 40, 3)


@pytest.mark.timeout(180)
def test_odd_names_tiny_images_and_folders_named_like_images(tmp_path):
    """A non-UTF-8 file name and a 1x1-pixel image are images like any other; a folder
    named like an image inside a class folder is not an image (listed as ignored)."""
    root = tmp_path / "d"
    make_nested(root)
    odd_name = os.fsdecode(b"caf\xe9_latin1.JPEG")          # not valid UTF-8
    write_image(root / "train" / "cat" / odd_name, 0, 3)
    Image.new("RGB", (1, 1), (10, 20, 30)).save(root / "train" / "dog" / "pixel.png")
    (root / "train" / "fox" / "nested.JPEG").mkdir()
    data = prepare(config(root, tmp_path / "cache"))
    assert data.train_samples == 17
    loader = ffcv_loaders.train_loader(data.train_path, resolution=32, batch_size=17, workers=1,
                                  seed=0, device=CPU, distributed=False)
    (images, labels), = list(loader)
    assert tuple(images.shape) == (17, 3, 32, 32)


def test_dangling_links_are_refused(tmp_path):
    root = tmp_path / "d"
    make_nested(root)
    (root / "train" / "wolf").symlink_to(tmp_path / "unmounted" / "wolf")
    (root / "train" / "cat" / "x.JPEG").symlink_to("/nonexistent/x.JPEG")
    message = error_of(config(root, tmp_path / "cache"))
    assert "2 symbolic links" in message and "point to nothing" in message
    assert str(root / "train" / "wolf") in message
    assert str(root / "train" / "cat" / "x.JPEG") in message
    assert "/nonexistent/x.JPEG" in message and "remove the links" in message


def test_label_file_giving_one_image_two_labels_is_refused(tmp_path):
    root = tmp_path / "flat"
    files = make_flat(root, list(CLASSES), [0, 1, 2])
    rows = "".join(f"{f.name},{CLASSES[label]}\n" for f, label in zip(files, [0, 1, 2]))
    same_twice = tmp_path / "same.csv"
    same_twice.write_text(f"filename,label\n{rows}{files[1].name},dog\n")
    _, val = sources.scan_image_folder(root, str(same_twice))
    assert [label for _, label in val.samples] == [0, 1, 2]
    conflicting = tmp_path / "conflicting.csv"
    conflicting.write_text(f"filename,label\n{rows}{files[1].stem},fox\n")
    message = error_of(config(root, tmp_path / "cache", val_labels=conflicting))
    assert f"image {files[1].stem!r} is listed twice" in message
    assert "'dog'" in message and "'fox'" in message and str(conflicting) in message


def test_label_file_encodings_and_unknown_headers(tmp_path):
    root = tmp_path / "flat"
    files = make_flat(root, list(CLASSES), [0, 1, 2])
    rows = "".join(f"{f.stem},{CLASSES[label]}\n" for f, label in zip(files, [0, 1, 2]))
    excel = tmp_path / "excel.csv"
    excel.write_text("ImageId,PredictionString\n" + rows, encoding="utf-8-sig")
    _, val = sources.scan_image_folder(root, str(excel))
    assert [label for _, label in val.samples] == [0, 1, 2]

    latin1 = tmp_path / "latin1.csv"
    latin1.write_bytes(("ImageId,PredictionString\n" + rows + "caf\xe9,cat\n").encode("latin-1"))
    message = error_of(config(root, tmp_path / "cache", val_labels=latin1))
    assert str(latin1) in message and "not UTF-8" in message and "save it as UTF-8" in message

    odd_header = tmp_path / "odd_header.csv"
    odd_header.write_text("image_id,label\n" + rows)
    message = error_of(config(root, tmp_path / "cache", val_labels=odd_header))
    assert "looks like a header" in message and "not recognised" in message
    assert "ImageId, image, filename" in message and "is not a class folder" not in message


@pytest.mark.parametrize("off_by_one", ["images_in_a_subfolder", "data_dir_one_level_up"])
def test_class_folders_with_images_one_level_down_say_so(tmp_path, off_by_one):
    root = tmp_path / "d"
    if off_by_one == "images_in_a_subfolder":
        make_nested(root)
        write_image(root / "train" / "wolf" / "imgs" / "w.JPEG", 0, 1)
        deeper = root / "train" / "wolf" / "imgs"
    else:
        make_nested(root / "train")                     # d/train/train/<class>/...
        make_nested(root, train_counts=(), val_counts=(1, 1, 1))
        deeper = root / "train" / "train" / "cat"
    message = error_of(config(root, tmp_path / "cache"))
    assert "without a single image" in message
    assert f"{deeper} holds images" in message and "one level off" in message


def test_val_holding_only_an_archive_says_extract_it(tmp_path):
    import tarfile
    root = tmp_path / "d"
    make_nested(root, val_counts=())
    (root / "val").mkdir()
    image = write_image(tmp_path / "ILSVRC2012_val_00000001.JPEG", 0, 1)
    with tarfile.open(root / "val" / "ILSVRC2012_img_val.tar", "w") as archive:
        archive.add(image, arcname=image.name)
    message = error_of(config(root, tmp_path / "cache"))
    assert "holds no images" in message and "ILSVRC2012_img_val.tar" in message
    assert "extract it" in message and "without class folders" not in message


def test_train_holding_only_class_archives_says_extract_them(tmp_path):
    import tarfile
    root = tmp_path / "d"
    make_nested(root, train_counts=())
    (root / "train").mkdir(exist_ok=True)
    image = write_image(tmp_path / "n01_1.JPEG", 0, 1)
    with tarfile.open(root / "train" / "n01.tar", "w") as archive:
        archive.add(image, arcname=image.name)
    message = error_of(config(root, tmp_path / "cache"))
    assert "train has no class folders, only the archive n01.tar: extract it" in message


def test_jfif_and_gif_images_are_read(tmp_path):
    root = tmp_path / "d"
    make_nested(root)
    picture(1, 5, (30, 26)).save(root / "train" / "dog" / "photo.jfif", "JPEG", quality=95)
    frames = [Image.new("RGB", (28, 22), colour) for colour in ((250, 0, 0), (0, 0, 250))]
    gif = root / "train" / "fox" / "anim.gif"
    frames[0].save(gif, save_all=True, append_images=frames[1:])
    first = sources.load_rgb(gif)
    assert first.shape == (22, 28, 3) and np.abs(first.astype(int) - (250, 0, 0)).max() <= 8
    data = prepare(config(root, tmp_path / "cache"))
    assert (data.train_samples, data.skipped_images) == (17, 0)


def test_images_over_pils_decompression_bomb_limit_are_read(tmp_path, monkeypatch):
    """A limit lowered to 10,000 pixels stands for PIL's ~179 M (an image that large takes
    seconds to decode): over twice the limit PIL refuses the image, over it PIL warns."""
    import warnings
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 10_000)
    root = tmp_path / "d"
    make_nested(root)
    huge = root / "train" / "cat" / "huge.png"
    Image.new("RGB", (300, 200), (30, 60, 90)).save(huge)            # 60,000 pixels
    with pytest.raises(Image.DecompressionBombError):
        Image.open(huge)
    data = prepare(config(root, tmp_path / "cache"))
    assert (data.train_samples, data.skipped_images) == (16, 0)
    Image.new("RGB", (120, 100), (30, 60, 90)).save(tmp_path / "large.png")   # 12,000
    with warnings.catch_warnings():
        warnings.simplefilter("error", Image.DecompressionBombWarning)
        assert sources.load_rgb(tmp_path / "large.png").shape == (100, 120, 3)
    assert Image.MAX_IMAGE_PIXELS == 10_000                           # restored after decoding


def test_an_image_folder_given_to_the_fashion_mnist_campaign_says_what_to_pass(tmp_path):
    make_nested(tmp_path / "d", train_counts=(1, 1, 1), val_counts=(1, 1, 1))
    cfg = resolve("cpu", {"data_dir": str(tmp_path / "d"), "cache_dir": str(tmp_path / "cache")})
    assert cfg.dataset == "fashion-mnist"
    message = error_of(cfg)
    assert "is an image folder" in message and "embedded Fashion-MNIST campaign" in message
    assert "dataset=imagenet" in message and f"system=local data_dir={tmp_path / 'd'}" in message
