"""The device loader on CUDA: nvJPEG's writes never land on memory that queued kernels still read,
and a thousand training batches match its CPU path. GPU machines only; every other run skips
them (tests/conftest.py hides the GPUs unless the run selects the gpu mark). On a GPU machine:

    python -m pytest -m gpu tests/loaders/test_device_loader_gpu.py

The hazard (docs/gpu-data.md; pytorch/vision#9606, meta-pytorch/torchcodec#1634): torchvision's
decode_jpeg on CUDA allocates its outputs on the current stream, and nvJPEG writes them from a
stream of its own without waiting for the current one; a block the current stream freed while
kernels queued on it still read it can be handed to the decoder and overwritten under them.
"""
from __future__ import annotations

import io

import pytest
import torch

from submission.config import resolve
from submission.data.beton_samples import JPEG, BetonSamples
from submission.data.prepare import prepare
from submission.data.synthetic_images import FolderShape, picture, write_folder
from submission.loaders import device_loader

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
    """On a stream of its own: blocks of the decoded images' sizes, filled with FILL, are copied
    by kernels queued behind a long one, then freed (the allocator may hand them out at once);
    then `decode(files, device)`. (How many bytes of the copies are not FILL: what the decoder
    wrote under the queued reads; the decoded images, on the CPU)."""
    from torchvision.io import ImageReadMode, decode_jpeg
    device = torch.device("cuda")
    sizes = [tuple(decode_jpeg(f, mode=ImageReadMode.RGB).shape) for f in files]
    stream = torch.cuda.Stream(device)
    torch.cuda.synchronize(device)
    with torch.cuda.stream(stream):
        blocks = [torch.full(size, FILL, dtype=torch.uint8, device=device) for size in sizes]
        torch.cuda._sleep(SLEEP_CYCLES)
        copies = [block.clone() for block in blocks]          # queued behind the sleep
        del blocks
        decoded = decode(files, device)
    torch.cuda.synchronize(device)
    overwritten = sum(int((copy != FILL).sum()) for copy in copies)
    return overwritten, [image.cpu() for image in decoded]


def test_plain_decode_jpeg_writes_over_memory_that_queued_kernels_still_read():
    """The hazard itself, reproduced as pytorch/vision#9606 does: torchvision's own call hands
    nvJPEG the freed blocks, and the copies queued before the decode read its pixels."""
    from torchvision.io import ImageReadMode, decode_jpeg
    overwritten, _ = decode_beside_queued_reads(
        lambda files, device: decode_jpeg(files, device=device, mode=ImageReadMode.RGB), jpegs(8))
    assert overwritten > 0, "the hazard did not show: plain decode_jpeg left the queued reads alone here"


def test_the_loaders_decode_waits_for_the_queued_reads_and_decodes_as_the_cpu():
    """device_loader.decode_jpegs synchronizes the stream first: the copies keep FILL, and the
    images are the CPU decoder's within the decoders' difference (IDCTs and upsampling)."""
    from torchvision.io import ImageReadMode, decode_jpeg
    files = jpegs(8)
    overwritten, decoded = decode_beside_queued_reads(device_loader.decode_jpegs, files)
    assert overwritten == 0
    for file, image in zip(files, decoded):
        reference = decode_jpeg(file, mode=ImageReadMode.RGB)
        assert image.shape == reference.shape
        assert (image.int() - reference.int()).abs().float().mean() < 2


STRESS_BATCHES, BATCH, SIDE = 1000, 48, 96
RAW_MOST, JPEG_MOST = 0.5, 3.0        # mean grey levels apart per image: float sums; the decoders


def test_a_thousand_training_batches_on_cuda_are_the_cpu_paths_batches(tmp_path):
    """STRESS_BATCHES training batches through the device loader on CUDA (proportion mode: raw
    and JPEG images, of many sizes), the GPU kept busy by a matmul per batch on the default
    stream, against the same batches through its CPU path (FFCV's libjpeg-turbo decoder): no
    device assert, the same labels, each image within its decoders' tolerance."""
    write_folder(tmp_path / "images", FolderShape(classes=4, train_per_class=120, val_per_class=2, sides=(60, 240)))
    data = prepare(resolve("cpu", {"dataset": "imagenet", "data_dir": str(tmp_path / "images"),
                                   "cache_dir": str(tmp_path / "cache"), "write_mode": "proportion"}))
    worst = largest_differences(data.train_path, torch.device("cuda"), STRESS_BATCHES)
    assert worst["raw"] <= RAW_MOST and worst["jpeg"] <= JPEG_MOST, worst


def largest_differences(path: str, device: torch.device, count: int) -> dict[str, float]:
    """The largest mean difference of a raw and of a JPEG image between `count` training batches
    of the device loader on `device` (its JPEGs decoded there: torchvision's CPU decoder on a
    CPU, a GPU's path) and the same batches through its CPU path; their labels equal."""
    made = device_loader.train_loader(path, SIDE, BATCH, 4, 7, device, 0, 1)
    made.jpegs_on_device = True
    reference = device_loader.train_loader(path, SIDE, BATCH, 4, 7, torch.device("cpu"), 0, 1)
    raw = BetonSamples(path).modes != JPEG
    load = torch.randn(2048, 2048, device=device)
    batches, worst = 0, {"raw": 0.0, "jpeg": 0.0}
    while batches < count:
        epoch = batch_indices(reference)
        for (images, labels), (expected, expected_labels), indices in zip(made, reference, epoch):
            load = torch.tanh(load @ load)                   # the step's stream kept busy
            assert torch.equal(labels.cpu(), expected_labels)
            differences = (images.cpu().int() - expected.int()).abs().float().mean(dim=(1, 2, 3)).numpy()
            for kind, mine in (("raw", raw[indices]), ("jpeg", ~raw[indices])):
                worst[kind] = max([worst[kind], *differences[mine]])
            batches += 1
            if batches == count:
                break
    return worst


def batch_indices(loader):
    """The sample indices of each batch of the epoch `loader` is about to make."""
    order = loader.order(loader.epoch)
    return [order[k * loader.batch_size:(k + 1) * loader.batch_size] for k in range(len(loader))]
