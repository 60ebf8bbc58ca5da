"""The device loader (train_loader=device) on the CPU, against FFCV: its crops are FFCV's draws,
its pixels FFCV's decoder's to a grey level, its epochs FFCV's sharding, its RandAugment the
batched one, and what it cannot read or decode is refused or named, without a hang."""
from __future__ import annotations

import math
import shutil

import numpy as np
import pytest
import torch
from PIL import Image

from submission.config import ConfigError, resolve
from submission.data.beton_samples import JPEG, BetonSamples, layout_problem
from submission.data.prepare import prepare
from submission.data.sharding import steps_per_epoch
from submission.data.synthetic_images import FolderShape, write_folder
from submission.loaders import device_loader, ffcv_loaders
from submission.loaders.batch_gather import random_crops
from submission.loaders.device_loader import AUGMENT, DECODE, UndecodableSample
from submission.loaders.protocol import one_epoch
from submission.loaders.run_loaders import batch_augmentation_of
from submission.loaders.torch_ops import count_ops
from submission.methods import randaugment_batch, trivialaugment_batch

from image_folders import FFCV_FINALIZER_NOISE

# torchvision 0.29 announces that its decoders move to TorchCodec (docs/gpu-data.md)
DECODERS_MOVING = pytest.mark.filterwarnings("ignore:The image decoding and encoding capabilities:DeprecationWarning")
# the decoded JPEGs are padded by a nested tensor, which torch calls a prototype (device_loader)
NESTED_PROTOTYPE = pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors:UserWarning")
pytestmark = [FFCV_FINALIZER_NOISE, DECODERS_MOVING, NESTED_PROTOTYPE, pytest.mark.timeout(300)]
CPU = torch.device("cpu")
SIDE = 48


@pytest.fixture(scope="module")
def photos(tmp_path_factory):
    """Photo-like images (synthetic_images: hue, stripes, noise, shapes) of 40-90 px, written in
    the entry's proportion mode (about half raw, half JPEG) and all as JPEG."""
    root = tmp_path_factory.mktemp("photos")
    write_folder(root / "images", FolderShape(classes=3, train_per_class=12, val_per_class=4, sides=(40, 90)))
    return {mode: prepare(resolve("cpu", {"dataset": "imagenet", "data_dir": str(root / "images"),
                                          "cache_dir": str(root / "cache"), "write_mode": mode}))
            for mode in ("proportion", "jpg")}


def ffcv_reference(samples: BetonSamples, index: int, box, flip: bool, side: int) -> np.ndarray:
    """What FFCV's decoder makes of sample `index` for this box: libffcv's JPEG decode (or the
    raw pixels), then its resize_crop (OpenCV INTER_AREA), flipped as its RandomHorizontalFlip."""
    from ffcv.libffcv import imdecode, resize_crop
    height, width = int(samples.heights[index]), int(samples.widths[index])
    if samples.modes[index] == JPEG:
        pixels = np.zeros(height * width * 3, np.uint8)
        imdecode(np.array(samples.stored(index)), pixels, height, width, height, width, 0, 0, 1, 1, False, False)
        pixels = pixels.reshape(height, width, 3)
    else:
        pixels = np.array(samples.pixels(index))
    top, left, crop_height, crop_width = (int(v) for v in box)
    out = np.zeros((side, side, 3), np.uint8)
    resize_crop(pixels, top, top + crop_height, left, left + crop_width, out)
    return out[:, ::-1] if flip else out


def test_crops_are_ffcvs_draws_inside_the_image_within_its_scale_and_ratio():
    rng = np.random.default_rng(0)
    heights = rng.integers(64, 500, 10_000)              # ImageNet-like: 3/4 to 4/3, some beyond
    widths = (heights * rng.uniform(0.6, 1.6, 10_000)).astype(np.int64)
    boxes, flips = random_crops(heights, widths, 0.25, seed=11)
    top, left, height, width = boxes.T
    assert (top >= 0).all() and (left >= 0).all() and (height >= 1).all() and (width >= 1).all()
    assert (top + height <= heights).all() and (left + width <= widths).all()
    area, aspect = height * width / (heights * widths), width / height
    drawn = (area >= 0.25 - 0.02) & (area <= 1) & (aspect >= 3 / 4 - 0.05) & (aspect <= 4 / 3 + 0.05)
    # FFCV's fallback after ten misses: the largest centred crop within the ratio bounds
    fallback = ~drawn
    assert drawn.mean() > 0.95
    assert ((top == (heights - height) // 2) & (left == (widths - width) // 2))[fallback].all()
    assert ((width == widths) | (height == heights))[fallback].all()
    # the whole range drawn (U(0.25, 1) areas, log-uniform aspects, less the misses FFCV redraws)
    assert np.quantile(area[drawn], 0.02) < 0.3 and np.quantile(area[drawn], 0.98) > 0.85
    assert np.quantile(aspect[drawn], 0.02) < 0.8 and np.quantile(aspect[drawn], 0.98) > 1.25
    assert 0.48 < flips.mean() < 0.52                                   # 4 sigma over 10,000 draws
    again, other = random_crops(heights, widths, 0.25, seed=11), random_crops(heights, widths, 0.25, seed=12)
    assert np.array_equal(again[0], boxes) and np.array_equal(again[1], flips)
    assert not np.array_equal(other[0], boxes)


def test_training_crops_are_ffcvs_decoder_pixels_within_two_grey_levels(photos):
    data = photos["proportion"]
    loader = device_loader.train_loader(data.train_path, SIDE, 12, 2, 5, CPU, 0, 1, crop_scale_min=0.08)
    samples = loader.samples
    differences = {JPEG: [], 1: []}
    for number, indices in enumerate(np.array_split(loader.order(0), 3)):
        host = loader.host(indices, seed=number)
        images, labels = loader.on_device(host)
        assert images.dtype == torch.uint8 and images.shape == (len(indices), 3, SIDE, SIDE)
        assert images.is_contiguous(memory_format=torch.channels_last)
        assert labels.view(-1).tolist() == samples.labels[indices].tolist()
        for k, index in enumerate(indices):
            reference = ffcv_reference(samples, index, host.boxes[k], host.flips[k], SIDE).astype(int)
            mine = images[k].permute(1, 2, 0).numpy().astype(int)
            differences[int(samples.modes[index])].append(np.abs(mine - reference).mean())
    assert len(differences[JPEG]) >= 5 and len(differences[1]) >= 5
    assert max(differences[JPEG]) <= 2 and max(differences[1]) <= 2, differences
    # raw: OpenCV's INTER_AREA weights, so all but fixed-point rounding agrees
    assert np.mean(differences[1]) < 0.2


def test_evaluation_batches_are_ffcvs_val_loaders_within_two_grey_levels(photos):
    data = photos["proportion"]
    mine = device_loader.val_loader(data.val_path, SIDE, 56, 5, 1, CPU, 0, 1)
    theirs = ffcv_loaders.val_loader(data.val_path, SIDE, 56, 5, 1, CPU, 0, 1, data.eval_samples)
    pairs = list(zip(mine, theirs))
    assert len(pairs) == len(mine) == math.ceil(data.eval_samples / 5)
    for (images, labels), (expected, expected_labels) in pairs:
        assert torch.equal(labels.view(-1), expected.new_tensor(expected_labels.view(-1).tolist()).long())
        difference = (images.int() - expected.int()).abs().float().mean(dim=(1, 2, 3))
        assert difference.max() <= 2, difference


def test_the_same_seed_gives_the_same_batches_whatever_the_threads(photos):
    def epoch(seed, threads):
        loader = device_loader.train_loader(photos["proportion"].train_path, 24, 8, threads, seed, CPU, 0, 1)
        return [(images.clone(), labels.clone()) for images, labels in loader]
    first, again, other = epoch(3, 1), epoch(3, 3), epoch(4, 1)
    assert all(torch.equal(a, b) and torch.equal(x, y) for (a, x), (b, y) in zip(first, again))
    assert not all(torch.equal(a, b) for (a, _), (b, _) in zip(first, other))


def test_an_epochs_batches_are_those_its_seeds_make_one_at_a_time(photos):
    """Made ahead by the loader's threads into its ring of host slots (here the fewest: one batch
    ahead, three slots), each batch is the one its seed makes alone: no slot is refilled while
    the step's thread still reads it."""
    from submission.loaders.epoch_ahead import batch_seed
    loader = device_loader.DeviceLoader(photos["proportion"].train_path, side=24, batch_size=4, device=CPU,
                                        threads=2, train=True, seed=3, ahead=1)
    made = [(images.clone(), labels.clone()) for images, labels in loader]
    order = loader.order(0)
    assert len(made) == len(loader) == len(order) // 4
    for number, (images, labels) in enumerate(made):
        alone = loader.on_device(loader.host(order[number * 4:(number + 1) * 4], batch_seed(3, 0, 0, number)))
        assert torch.equal(images, alone[0]) and torch.equal(labels, alone[1])


@pytest.fixture(scope="module")
def numbered(tmp_path_factory):
    """23 images of one flat colour each, its number in the red and green levels: any crop of
    an image tells which it is. Written raw: the colours stay exact."""
    root = tmp_path_factory.mktemp("numbered")
    for index in range(23):
        for split in ("train", "val"):
            folder = root / "images" / split / f"n{index % 2:08d}"
            folder.mkdir(parents=True, exist_ok=True)
            Image.new("RGB", (30 + index, 24), (10 * index, 255 - 10 * index, 7)).save(folder / f"{index}.png")
    return prepare(resolve("cpu", {"dataset": "imagenet", "data_dir": str(root / "images"),
                                   "cache_dir": str(root / "cache"), "write_mode": "raw"}))


def numbers(images: torch.Tensor) -> list[int]:
    return [int(round(red / 10)) for red in images[:, 0, 4, 4].tolist()]


@pytest.mark.parametrize("batch, world", [(4, 2), (3, 2), (5, 3), (12, 2), (4, 1)])
def test_an_epoch_across_ranks_is_ffcvs_distributed_order_each_sample_once(numbered, batch, world):
    """Each rank a DistributedSampler's share (the last batch dropped), the shares disjoint and,
    where they divide evenly, every sample once; the run plan's steps."""
    seen = []
    for rank in range(world):
        loader = device_loader.train_loader(numbered.train_path, 8, batch, 2, 9, CPU, rank, world)
        assert len(loader) == steps_per_epoch(23, batch, world)
        ranks = [numbers(images) for images, _ in loader]
        assert len(ranks) == len(loader)
        seen.append(sum(ranks, []))
    everything = sum(seen, [])
    padded = math.ceil(23 / world) * world - 23            # DistributedSampler's repeats
    assert len(everything) - len(set(everything)) <= padded
    if (23 + padded) // world % batch == 0:
        assert set(everything) == set(range(23))


def test_evaluation_across_ranks_scores_each_image_once(numbered):
    seen = []
    for rank in range(3):
        loader = device_loader.val_loader(numbered.val_path, 8, 8, 4, 1, CPU, rank, 3)
        seen += sum((numbers(images) for images, _ in loader), [])
    assert sorted(seen) == list(range(23))


@pytest.mark.parametrize("settings, batched", [
    ({"randaugment_depth": "1", "randaugment_severity": "10", "randaugment_set": "all"},
     lambda images, steps: randaugment_batch.apply(images, steps, "all")),
    ({"randaugment_depth": "0", "trivialaugment": "wide"},
     lambda images, steps: trivialaugment_batch.apply(images, steps, "wide"))])
def test_the_augmentation_is_its_batched_form_on_the_batchs_draws(photos, settings, batched):
    """The configuration's RandAugment or TrivialAugment, built from its settings
    (run_loaders.batch_augmentation_of), applied to the batch with the draws the host made."""
    config = resolve("cpu", {"recipe": "hot", "train_loader": "device", **settings})
    hot = device_loader.train_loader(photos["proportion"].train_path, SIDE, 12, 1, 5, CPU, 0, 1,
                                     augment=batch_augmentation_of(config))
    indices = hot.order(0)[:12]
    host = hot.host(indices, seed=2)
    augmented, _ = hot.on_device(host)
    host.augment = None
    plain, _ = hot.on_device(host)
    assert torch.equal(augmented, batched(plain, hot.host(indices, seed=2).augment))
    assert not torch.equal(augmented, plain)


def test_an_epoch_left_early_ends_its_thread_and_the_next_epoch_starts_over(photos):
    import threading
    loader = device_loader.train_loader(photos["proportion"].train_path, 16, 4, 1, 5, CPU, 0, 1)
    for _ in one_epoch(loader):
        break
    assert not [t for t in threading.enumerate() if t.name.startswith("device-loader")]
    assert sum(1 for _ in loader) == len(loader)


def test_a_beton_of_another_layout_is_refused_with_what_to_do(photos, tmp_path):
    from ffcv.fields import FloatField, IntField, RGBImageField
    from ffcv.writer import DatasetWriter
    other = tmp_path / "other.beton"
    DatasetWriter(str(other), {"image": RGBImageField(), "label": IntField(), "weight": FloatField()},
                  num_workers=1).from_indexed_dataset([(np.zeros((8, 8, 3), np.uint8), 1, 0.5)])
    assert "holds the fields image (RGBImageField), label (IntField), weight (FloatField)" in layout_problem(other)
    older = tmp_path / "older.beton"
    shutil.copyfile(photos["jpg"].train_path, older)
    with open(older, "r+b") as file:          # the header's first field: the format's version
        file.write(np.uint16(1).tobytes())
    empty = tmp_path / "empty.beton"
    empty.write_bytes(b"")
    for path, problem in ((older, "is FFCV file format 1; this FFCV reads format 2"),
                          (empty, "is empty or cut short")):
        with pytest.raises(ConfigError, match="delete this one") as refused:
            device_loader.train_loader(str(path), 16, 4, 1, 0, CPU, 0, 1)
        assert problem in str(refused.value) and "train_loader=ffcv" in str(refused.value)
    assert layout_problem(photos["jpg"].train_path) is None


def test_a_jpeg_that_does_not_decode_is_named_and_stops_the_epoch(photos, tmp_path):
    damaged = tmp_path / "damaged.beton"
    shutil.copyfile(photos["jpg"].train_path, damaged)
    samples = BetonSamples(damaged)
    victim = 5
    with open(damaged, "r+b") as file:
        file.seek(int(samples.ptrs[victim]))
        file.write(b"\x00" * int(samples.sizes[victim]))
    loader = device_loader.train_loader(str(damaged), 16, len(samples), 2, 0, CPU, 0, 1)
    with pytest.raises(UndecodableSample, match=f"sample {victim} of {damaged}"):
        for _ in loader:
            pass
    assert sum(1 for _ in device_loader.train_loader(photos["jpg"].train_path, 16, 4, 1, 0, CPU, 0, 1)) > 0


MOST_OPS = 32           # Mild's device work per batch (issue 61; docs/gpu-data.md)


@pytest.mark.parametrize("decoded_by", ["host", "device"])
def test_a_batch_costs_the_same_few_torch_operations_whatever_its_size(photos, decoded_by):
    """Mild's device work per training batch: at most 32 torch operations called from Python,
    as many at 16 images as at 64, its JPEGs decoded on the host (a CPU's path) or by the device
    (a GPU's: torchvision's decode there is one operation, `image::decode_jpegs_cuda`, counted
    so); Hot's RandAugment and TrivialAugment counted apart, as many at both sizes too."""
    path = photos["proportion"].train_path
    modes = BetonSamples(path).modes
    mixed = np.stack((np.flatnonzero(modes == JPEG)[:8], np.flatnonzero(modes != JPEG)[:8]), axis=1).ravel()

    def costs(augment) -> list:
        loader = device_loader.train_loader(path, SIDE, 64, 2, 5, CPU, 0, 1, augment=augment)
        loader.jpegs_on_device = decoded_by == "device"
        found = []
        for count in (16, 64):
            indices = np.resize(mixed, count)          # JPEG and raw images alike at both sizes
            loader.on_device(loader.host(indices, seed=0))       # the first batch of a size: its bags
            host = loader.host(indices, seed=count)
            found.append(count_ops(lambda: loader.on_device(host), parts=(AUGMENT,), as_one=(DECODE,))[1])  # noqa: B023
        return found

    small, large = costs(None)
    assert small.ops == large.ops <= MOST_OPS, (small.names, large.names)
    assert small.names.count(DECODE) == large.names.count(DECODE) == (decoded_by == "device")
    hot = {"recipe": "hot", "train_loader": "device"}
    trivial = {**hot, "randaugment_depth": "0", "trivialaugment": "wide"}
    for augment in (batch_augmentation_of(resolve("cpu", hot)), batch_augmentation_of(resolve("cpu", trivial))):
        small, large = costs(augment)
        assert small.ops == large.ops <= MOST_OPS
        assert small.parts[AUGMENT] == large.parts[AUGMENT] > 0


def test_the_gather_is_one_compiled_call_that_leaves_the_interpreter_to_other_threads(photos, monkeypatch):
    """The host's part of a batch is one call of a numba function compiled nogil (and parallel:
    prange over the images); while a long one runs, this thread keeps running Python."""
    import threading
    import time

    from submission.loaders import batch_gather
    compiled = batch_gather._compiled()
    assert compiled.targetoptions["nogil"] and compiled.targetoptions["parallel"]
    calls = []
    monkeypatch.setattr(batch_gather, "_compiled", lambda: lambda *args: calls.append(1) or compiled(*args))
    count = 3000
    loader = device_loader.train_loader(photos["proportion"].train_path, SIDE, count, 1, 5, CPU, 0, 1)
    indices = np.resize(loader.order(0), count)
    loader.host(indices[:16], seed=0)
    assert len(calls) == 1
    done, times = threading.Event(), []
    gathering = threading.Thread(target=lambda: (loader.host(indices, seed=1), done.set()))
    gathering.start()
    while not done.is_set():                       # this thread's Python, while the gather runs
        times.append(time.perf_counter())
    gathering.join()
    took, longest_pause = times[-1] - times[0], max(np.diff(times))
    assert len(calls) == 2
    assert took > 0.05 and longest_pause < took / 2, (took, longest_pause)
