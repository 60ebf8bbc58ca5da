"""The device loader on CUDA: nvJPEG's writes never land on memory that queued kernels still read,
and training batches made while the loader's streams lag far behind the host are its CPU path's,
pixel by pixel, across epoch boundaries; each test with a control, the fix turned off
(device_streams.UNSAFE), that must fail. GPU machines only; every other run skips them
(tests/conftest.py hides the GPUs unless the run selects the gpu mark). On a GPU machine:

    python -m pytest -m gpu tests/loaders/test_device_loader_gpu.py

The hazard (docs/gpu-data.md; pytorch/vision#9606, meta-pytorch/torchcodec#1634): torchvision's
decode_jpeg on CUDA allocates its outputs on the current stream, and nvJPEG writes them from a
stream of its own without waiting for the current one; a block the current stream freed while
kernels queued on it still read it can be handed to the decoder and overwritten under them.
"""
from __future__ import annotations

import io

import numpy as np
import pytest
import torch

from submission.config import resolve
from submission.data.beton_samples import JPEG, BetonSamples
from submission.data.prepare import prepare
from submission.data.synthetic_images import FolderShape, picture, write_folder
from submission.loaders import device_loader, device_streams

from image_folders import FFCV_FINALIZER_NOISE

DECODERS_MOVING = pytest.mark.filterwarnings("ignore:The image decoding and encoding capabilities:DeprecationWarning")
NESTED_PROTOTYPE = pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors:UserWarning")
pytestmark = [pytest.mark.gpu, FFCV_FINALIZER_NOISE, DECODERS_MOVING, NESTED_PROTOTYPE, pytest.mark.timeout(600),
              pytest.mark.skipif(not torch.cuda.is_available(),
                                 reason="needs CUDA: on a GPU machine, run "
                                        "`python -m pytest -m gpu tests/loaders/test_device_loader_gpu.py`")]
SLEEP_CYCLES = 2_000_000_000      # torch.cuda._sleep: about a second of one GPU thread spinning
FILL = 77                         # what the freed blocks held, and what the copies out of them must hold


def jpegs(count: int) -> list[torch.Tensor]:
    """`count` JPEG files of different sizes (synthetic photos), as CPU uint8 tensors."""
    shape = FolderShape(classes=4, train_per_class=count, val_per_class=1, sides=(96, 320))
    files = []
    for k in range(count):
        out = io.BytesIO()
        picture(k % 4, k, "train", shape).save(out, "JPEG", quality=90)
        files.append(torch.frombuffer(bytearray(out.getvalue()), dtype=torch.uint8))
    return files


def decode_beside_queued_reads(decode, files: list[torch.Tensor]) -> tuple[int, list[torch.Tensor]]:
    """On a stream `reading` (the loader's compute stream, or the caller's): blocks of the decoded
    images' sizes, filled with FILL, are copied by kernels queued behind a long one, then freed
    (the allocator may hand them out at once on that stream); then `decode(files, device,
    reading)`. (How many bytes of the copies are not FILL: what the decoder wrote under the
    queued reads; the decoded images, on the CPU)."""
    from torchvision.io import ImageReadMode, decode_jpeg
    device = torch.device("cuda")
    sizes = [tuple(decode_jpeg(f, mode=ImageReadMode.RGB).shape) for f in files]
    reading = torch.cuda.Stream(device)
    torch.cuda.synchronize(device)
    with torch.cuda.stream(reading):
        blocks = [torch.full(size, FILL, dtype=torch.uint8, device=device) for size in sizes]
        torch.cuda._sleep(SLEEP_CYCLES)
        copies = [block.clone() for block in blocks]          # queued behind the sleep
        del blocks
        decoded = decode(files, device, reading)
    torch.cuda.synchronize(device)
    overwritten = sum(int((copy != FILL).sum()) for copy in copies)
    return overwritten, [image.cpu() for image in decoded]


def plain(files, device, reading):
    """torchvision's own call, on the stream whose freed blocks have queued readers."""
    from torchvision.io import ImageReadMode, decode_jpeg
    return decode_jpeg(files, device=device, mode=ImageReadMode.RGB)


def pipelines(files, device, reading):
    """The loader's decode stage: on a stream of its own that runs nothing but the decoder, not
    synchronized; its images recorded on the stream that reads them (epoch_ahead)."""
    decoding = torch.cuda.Stream(device)
    with torch.cuda.stream(decoding):
        decoded = device_loader.decode_jpegs(files, device, synchronize=False)
    reading.wait_stream(decoding)
    for image in decoded:
        image.record_stream(reading)
    return decoded


def on_its_stream(files, device, reading):
    """The loader's decode outside an epoch (on_device, ops_per_batch): the current stream
    synchronized first."""
    return device_loader.decode_jpegs(files, device, synchronize=True)


def test_plain_decode_jpeg_overwrites_queued_reads_here_and_the_loaders_decodes_do_not():
    """The hazard reproduced as pytorch/vision#9606 does, then the loader's decodes, its pipeline's
    and its one outside an epoch, on the same setup: the copies keep FILL, and the images are the
    CPU decoder's within the decoders' difference (IDCTs and upsampling). Where plain decode_jpeg
    leaves the copies alone, the hazard does not reproduce on this GPU and the loader's decodes
    would pass proving nothing: skipped, with that reason."""
    from torchvision.io import ImageReadMode, decode_jpeg
    files = jpegs(8)
    overwritten, _ = decode_beside_queued_reads(plain, files)
    if overwritten == 0:
        pytest.skip(f"plain decode_jpeg left the queued reads alone on {torch.cuda.get_device_name()}: the hazard "
                    "does not reproduce here, so the loader's decode cannot be told from it")
    for decode in (pipelines, on_its_stream):
        overwritten, decoded = decode_beside_queued_reads(decode, files)
        assert overwritten == 0, decode.__name__
        for file, image in zip(files, decoded):
            reference = decode_jpeg(file, mode=ImageReadMode.RGB)
            assert image.shape == reference.shape
            assert (image.int() - reference.int()).abs().float().mean() < 2


BATCH, SIDE, EPOCHS = 48, 96, 12
RAW_MOST = 1              # grey levels apart, any pixel of a raw image: float sums on two devices
JPEG_MOST = 16            # ... the 99.9th percentile of a JPEG image's pixels: nvJPEG against libjpeg-turbo
LAG_CYCLES = 20_000_000   # torch.cuda._sleep after each batch on each of the loader's streams: ~10 ms


@pytest.fixture(scope="module")
def betons(tmp_path_factory):
    """The same 392 photos (60-240 px) written raw and in the entry's proportion mode (half JPEG):
    8 batches of 48 an epoch, so the last batch of each is gathered into the ring's first slot
    (7 slots) where each epoch starts the ring over (the control)."""
    root = tmp_path_factory.mktemp("stress")
    write_folder(root / "images", FolderShape(classes=4, train_per_class=98, val_per_class=2, sides=(60, 240)))
    return {mode: prepare(resolve("cpu", {"dataset": "imagenet", "data_dir": str(root / "images"),
                                          "cache_dir": str(root / "cache"), "write_mode": mode})).train_path
            for mode in ("raw", "proportion")}


def lagging_batches(path: str, epochs: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """`epochs` epochs of the device loader's training batches on CUDA, kept on the GPU (nothing
    read back until the end, no synchronization), a sleep queued on each of its two streams after
    each batch is taken: its kernels lag far behind the host, as behind a busy step."""
    loader = device_loader.train_loader(path, SIDE, BATCH, 4, 7, torch.device("cuda"), 0, 1)
    assert (len(loader) - 1) % len(loader.ring()) in (0, 1), "the last batch must land in the ring's first slots"
    streams = loader.stage_streams()
    kept = []
    for _ in range(epochs):
        for images, labels in loader:
            kept.append((images, labels))
            for stream in streams:
                with torch.cuda.stream(stream):
                    torch.cuda._sleep(LAG_CYCLES)
    torch.cuda.synchronize()
    loader.close()
    return kept


def beyond_bounds(path: str, made: list[tuple[torch.Tensor, torch.Tensor]], epochs: int) -> list[str]:
    """Each batch of `made` against the same batch through the CPU path (FFCV's decoder on the
    host): what lies beyond the bounds, per image (raw: any pixel more than RAW_MOST apart;
    JPEG: its 99.9th percentile more than JPEG_MOST), labels unequal."""
    reference = device_loader.train_loader(path, SIDE, BATCH, 4, 7, torch.device("cpu"), 0, 1)
    raw = BetonSamples(path).modes != JPEG
    expected = [batch for _ in range(epochs) for batch in reference]
    assert len(expected) == len(made)
    found = []
    for number, ((images, labels), (cpu_images, cpu_labels)) in enumerate(zip(made, expected)):
        order = reference.order(number // len(reference))
        indices = order[number % len(reference) * BATCH:][:BATCH]
        if not torch.equal(labels.cpu(), cpu_labels):
            found.append(f"batch {number}: labels differ")
        apart = (images.cpu().int() - cpu_images.int()).abs().flatten(1).float()
        largest, high = apart.amax(dim=1).numpy(), torch.quantile(apart, 0.999, dim=1).numpy()
        beyond = np.flatnonzero(np.where(raw[indices], largest > RAW_MOST, high > JPEG_MOST))
        found += [f"batch {number} image {k} (sample {indices[k]}, {'raw' if raw[indices[k]] else 'JPEG'}): "
                  f"largest {largest[k]:.0f}, 99.9th percentile {high[k]:.0f} grey levels apart" for k in beyond]
    return found


@pytest.mark.parametrize("mode", ["raw", "proportion"])
def test_batches_made_while_the_streams_lag_are_the_cpu_paths_pixel_by_pixel(betons, mode, monkeypatch):
    """EPOCHS epochs of each write mode (raw: no decode, nothing in a batch that synchronizes;
    proportion: raw and JPEG images of many sizes), the loader's streams kept lagging: no device
    assert, every pixel within its bound. The control, the fixes off (each epoch forgets the
    slots' reads; the decode on the compute stream, unsynchronized, its images unrecorded), must
    show batches beyond them: else this test could not tell the fix from its absence."""
    made = lagging_batches(betons[mode], EPOCHS)
    assert beyond_bounds(betons[mode], made, EPOCHS) == []
    del made
    monkeypatch.setattr(device_streams.UNSAFE, "forget_slots", True)
    monkeypatch.setattr(device_streams.UNSAFE, "shared_decode_stream", True)
    control = lagging_batches(betons[mode], EPOCHS)
    assert beyond_bounds(betons[mode], control, EPOCHS), "the control, the fixes off, made every batch right"
