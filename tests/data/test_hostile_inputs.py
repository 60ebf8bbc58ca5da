"""Inputs made to hurt: a decompression bomb among the images is refused (or skipped) by name
from its header, with memory bounded; an image check's worker lost for memory, a gzip bomb or a
short idx file in the Fashion-MNIST files, and a system JSON of the wrong shape each end in one
line naming the file."""
from __future__ import annotations

import gzip
import json
import os
import signal
import struct
import subprocess
import sys
import textwrap
import zlib
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from submission.config import ConfigError, resolve
from submission.data import image_checks, sources
from submission.data.prepare import prepare

from conftest import REPO, child_env
from image_folders import FFCV_FINALIZER_NOISE, config, make_nested

pytestmark = FFCV_FINALIZER_NOISE
SIDE = 60_000
STRIP_ROWS = 100


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def write_black_png(path: Path, width: int, height: int) -> Path:
    """An RGB PNG of all-zero rows, written strip by strip and never held whole: each strip
    of filter byte + zero rows is deflated once after a full flush (so that its deflated bytes
    stand alone) and written again for each strip; the stream ends with an empty final block
    and the Adler-32 of the zeros (its sum stays 1, its running total is the length)."""
    row = bytes(1 + 3 * width)
    strips, rest = divmod(height, STRIP_ROWS)
    deflate = zlib.compressobj(9)
    with path.open("wb") as file:
        file.write(b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)))
        file.write(_chunk(b"IDAT", deflate.compress(row * STRIP_ROWS) + deflate.flush(zlib.Z_FULL_FLUSH)))
        again = _chunk(b"IDAT", deflate.compress(row * STRIP_ROWS) + deflate.flush(zlib.Z_FULL_FLUSH))
        for _ in range(strips - 1):
            file.write(again)
        for _ in range(rest):
            file.write(_chunk(b"IDAT", deflate.compress(row) + deflate.flush(zlib.Z_FULL_FLUSH)))
        adler = ((len(row) * height) % 65521) << 16 | 1
        file.write(_chunk(b"IDAT", b"\x03\x00" + struct.pack(">I", adler)) + _chunk(b"IEND", b""))
    return path


def test_the_hand_written_png_is_a_png_pil_decodes(tmp_path):
    image = Image.open(write_black_png(tmp_path / "small.png", 250, 321))
    assert image.size == (250, 321) and image.mode == "RGB"
    assert not np.asarray(image).any()


CHECK = textwrap.dedent("""
    import json, resource, sys
    from pathlib import Path
    resource.setrlimit(resource.RLIMIT_AS, (6 << 30, 6 << 30))   # the unfixed code decoded it all
    from submission.config import ConfigError, resolve
    from submission.data import image_checks, sources
    root, cache, skip = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
    config = resolve("cpu", {"dataset": "imagenet", "data_dir": str(root), "cache_dir": str(cache),
                             "skip_bad_images": skip})
    cache.mkdir()
    try:
        said = {"skipped": image_checks.drop_unusable(sources.scan_image_folder(root), cache, config, 2)}
    except ConfigError as error:
        said = {"error": str(error)}
    # this process's peak from /proc (its ru_maxrss keeps the forking pytest's across exec);
    # the check's workers, forked from it, by getrusage
    own = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
    peak = max(own, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
    print(json.dumps({**said, "peak_bytes": peak * 1024}))
""")


@pytest.fixture(scope="module")
def bomb_folder(tmp_path_factory):
    root = tmp_path_factory.mktemp("bomb") / "images"
    make_nested(root, train_counts=(2, 2, 2), val_counts=(1, 1, 1))
    write_black_png(root / "train" / "cat" / "bomb.png", SIDE, SIDE)
    return root


@pytest.mark.e2e
@pytest.mark.parametrize("skip", ["false", "true"])
def test_a_60000_px_square_png_is_refused_or_skipped_by_name_from_its_header(bomb_folder, tmp_path, skip):
    """60,000 x 60,000 RGB is 10.8 GB decoded: its header alone refuses it (max_image_pixels),
    and no process of the check comes near that much memory."""
    done = subprocess.run([sys.executable, "-c", CHECK, str(bomb_folder), str(tmp_path / "cache"), skip],
                          capture_output=True, text=True, timeout=300, env=child_env(), cwd=REPO)
    assert done.returncode == 0, done.stderr
    said = json.loads(done.stdout.splitlines()[-1])
    assert said["peak_bytes"] < SIDE * SIDE * 3 / 20, said
    reason = "60000x60000 px (3,600,000,000 pixels) is over max_image_pixels=100000000"
    if skip == "false":
        assert "bomb.png" in said["error"] and reason in said["error"], said
    else:
        assert said["skipped"] == 1
        assert f"bomb.png\t{reason}" in (tmp_path / "cache" / "skipped_images.txt").read_text()


def test_an_image_over_the_pixel_limit_is_refused_then_skipped_by_prepare(tmp_path):
    root = tmp_path / "images"
    make_nested(root)
    Image.new("RGB", (60, 50)).save(root / "val" / "fox" / "large.png")
    message = str(pytest.raises(ConfigError, prepare, config(root, tmp_path / "c1", max_image_pixels=2999)).value)
    assert "large.png: 60x50 px (3,000 pixels) is over max_image_pixels=2999" in message
    data = prepare(config(root, tmp_path / "c2", max_image_pixels=2999, skip_bad_images="true"))
    assert data.skipped_images == 1
    assert prepare(config(root, tmp_path / "c2", max_image_pixels=3000)).skipped_images == 0


def test_a_check_worker_killed_for_memory_is_one_line_naming_the_file(tmp_path, monkeypatch):
    """The kernel's out-of-memory killer sends SIGKILL: here the worker sends it itself when
    it reaches the image (the pool's workers are forked from this process)."""
    root = tmp_path / "images"
    make_nested(root, train_counts=(3, 3, 3), val_counts=(1, 1, 1))
    Image.new("RGB", (30, 30)).save(root / "train" / "dog" / "killer.png")
    load = sources.load_rgb

    def killed_at_the_killer(path, *args, **kwargs):
        if path.name == "killer.png":
            os.kill(os.getpid(), signal.SIGKILL)
        return load(path, *args, **kwargs)
    monkeypatch.setattr(sources, "load_rgb", killed_at_the_killer)
    cfg = config(root, tmp_path / "cache")
    with pytest.raises(ConfigError) as refused:
        image_checks.drop_unusable(sources.scan_image_folder(root), tmp_path, cfg, 1)
    message = str(refused.value)
    assert len(message.splitlines()) == 1, message
    assert "while it decoded " in message and "killer.png: most often the kernel's out-of-memory killer" in message


def _fashion_folder(tmp_path: Path, images: bytes) -> Path:
    folder = tmp_path / "idx"
    folder.mkdir()
    for name in ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
                 "t10k-labels-idx1-ubyte"):
        (folder / f"{name}.gz").write_bytes(gzip.compress(struct.pack(">HBBI", 0, 8, 1, 1) + b"\x00"))
    (folder / "train-images-idx3-ubyte.gz").write_bytes(images)
    return folder


def _gzip_bomb(size: int) -> bytes:
    """A gzip member of `size` zero bytes after a valid idx header, deflated as it is made."""
    deflate = zlib.compressobj(9, zlib.DEFLATED, 31)
    header = struct.pack(">HBBIII", 0, 8, 3, 60000, 28, 28)
    parts, block = [deflate.compress(header)], bytes(1 << 20)
    parts += [deflate.compress(block) for _ in range(size >> 20)]
    return b"".join(parts) + deflate.flush()


@pytest.mark.parametrize("images, message", [
    (lambda: _gzip_bomb(1 << 28), "holds more than the 47040000 bytes of data its header declares"),
    (lambda: gzip.compress(b"\x00\x00"), "is 2 bytes long: too short for an idx file"),
    (lambda: b"not gzip at all", "is not a gzip file"),
    (lambda: gzip.compress(struct.pack(">HBBIII", 0, 8, 3, 1 << 31, 1 << 31, 4)), "declares a shape"),
])
def test_a_damaged_fashion_mnist_file_is_one_line_naming_it(tmp_path, images, message):
    folder = _fashion_folder(tmp_path, images())
    with pytest.raises(ConfigError) as refused:
        sources.load_fashion_mnist(str(folder))
    text = str(refused.value)
    assert len(text.splitlines()) == 1 and str(folder / "train-images-idx3-ubyte.gz") in text, text
    assert message in text


@pytest.mark.parametrize("content, message", [
    (b"5", "holds 5, not an object"), (b"null", "holds null, not an object"),
    (b"[]", "holds a list, not an object"), ("{\"x\": \"\xe9\"}".encode("latin-1"), "is not UTF-8"),
])
def test_a_system_json_of_the_wrong_shape_is_one_line_naming_the_file(tmp_path, monkeypatch, content, message):
    from submission import system_descriptor
    (tmp_path / "odd.json").write_bytes(content)
    monkeypatch.setattr(system_descriptor, "SYSTEMS_DIR", tmp_path)
    with pytest.raises(ConfigError) as refused:
        resolve("odd", {})
    text = str(refused.value)
    assert len(text.splitlines()) == 1 and str(tmp_path / "odd.json") in text and message in text, text
