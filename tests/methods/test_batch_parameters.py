"""The batched augmentations' parameters: made on the host, sent to the device in one copy
(methods/batch_parameters.py); the images they make are those each kind makes by itself."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from submission.data.synthetic_images import FolderShape, picture
from submission.loaders.torch_ops import count_ops
from submission.methods import randaugment, randaugment_batch, trivialaugment, trivialaugment_batch
from submission.methods.batch_parameters import HostArray, ParameterStaging

SHAPE = FolderShape(classes=4, train_per_class=4, val_per_class=1, sides=(48, 64))


def batch_of(crop: tuple[int, int, int, int], count: int = 24) -> torch.Tensor:
    return torch.stack([torch.from_numpy(np.array(picture(k % 4, k, "train", SHAPE).crop(crop))).permute(2, 0, 1)
                        for k in range(count)])


def each_kind_alone(images, steps, operations, kinds):
    """The batched augmentation as it ran before its parameters were packed: per step and
    operation, the images that drew it taken out, the kind applied to them by itself (its
    parameters sent alone), put back."""
    for chosen, values in steps:
        images = images.clone()
        for k, operation in enumerate(operations):
            where = np.flatnonzero(chosen == k)
            rows = torch.from_numpy(where)
            images.index_copy_(0, rows, kinds[operation.kind](images.index_select(0, rows), values[where]))
    return images


CASES = [("randaugment all, depth 2", randaugment.AUGMENTATION_SETS["all"], randaugment_batch.KINDS,
          lambda n, rng: randaugment_batch.draw(n, 10, 2, "all", rng)),
         ("trivialaugment wide", trivialaugment.OPERATIONS["wide"], trivialaugment_batch.KINDS,
          lambda n, rng: trivialaugment_batch.draw(n, "wide", rng))]


@pytest.mark.parametrize("crop", [(0, 0, 44, 36), (0, 0, 40, 40)])
@pytest.mark.parametrize("name, operations, kinds, draw", CASES, ids=[case[0] for case in CASES])
def test_one_copy_of_every_parameter_makes_the_images_each_kind_makes_alone(crop, name, operations, kinds, draw):
    images, staging = batch_of(crop), ParameterStaging()
    for seed in range(3):            # the same staging batch after batch
        steps = draw(len(images), np.random.default_rng(seed))
        packed = randaugment_batch.apply_operations(images, steps, operations, kinds, staging)
        assert torch.equal(packed, each_kind_alone(images, steps, operations, kinds)), (name, seed)
        assert not torch.equal(packed, images)


def test_the_hosts_values_enter_torch_once_a_batch_and_cost_no_more_operations():
    """Every value the host computed (rows, masks, matrices, factors, the grey weights and the
    smoothing filter) becomes a tensor in one conversion (aten::lift_fresh: a tensor from numpy
    or a list; before the packing, one per kind and parameter), and the batch's operations do
    not grow in number with it."""
    images = batch_of((0, 0, 44, 36), 16)
    steps = randaugment_batch.draw(len(images), 10, 2, "all", np.random.default_rng(0))
    staging = ParameterStaging()
    randaugment_batch.apply(images, steps, "all", staging)
    _, counted = count_ops(lambda: randaugment_batch.apply(images, steps, "all", staging))
    assert counted.names.count("aten::lift_fresh") == 1, counted.names
    assert counted.ops <= 728           # 814 with a copy per parameter (2026-11-28, this CPU)
    (chosen, _), = trivial = trivialaugment_batch.draw(len(images), "wide", np.random.default_rng(0))
    _, counted = count_ops(lambda: trivialaugment_batch.apply(images, trivial, "wide", staging))
    assert counted.names.count("aten::lift_fresh") == 1 and counted.ops <= 376    # 461 before


def test_each_parameter_keeps_its_dtype_shape_and_values_in_the_packed_buffer():
    arrays = [HostArray.of([255, 1, 7], torch.uint8, -1, 1, 1, 1), HostArray.of([2.5, -1.0], torch.float64, -1, 2),
              HostArray.of([], torch.int64, -1), HostArray.of([1 << 40, -3], torch.int64, -1, 1, 1),
              HostArray.of([0.1, 0.7], torch.float32, 1, 1, 2), HostArray.of([-2, 300], torch.int16, -1)]
    first = ParameterStaging().send(arrays, torch.device("cpu"))
    for array, tensor in zip(arrays, first):
        assert tensor.dtype == array.dtype and tensor.shape == array.shape
        assert torch.equal(tensor, torch.as_tensor(array.values))
    staging = ParameterStaging()
    kept = staging.send(arrays, torch.device("cpu"))
    staging.send([HostArray.of(np.zeros(64), torch.float64, -1)], torch.device("cpu"))
    assert all(torch.equal(a, b) for a, b in zip(kept, first))   # a CPU batch's views are its own


@pytest.mark.gpu
def test_the_pinned_buffer_is_rewritten_only_after_the_copy_from_it_has_run():
    """The copy is queued behind a long kernel; the next batch's values, written at once into a
    buffer the copy has not read yet, would reach the first batch's tensors. The staging
    waits for the copy's event first; without that wait (the control) they do."""
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    device = torch.device("cuda")

    def first_values(staging: ParameterStaging, wait: bool) -> torch.Tensor:
        torch.cuda._sleep(200_000_000)                  # about 0.1 s of GPU time before the copy
        first = staging.send([HostArray.of(np.arange(512), torch.int64, -1)], device)[0]
        if not wait:
            staging._copied = None                      # the control: the event forgotten
        staging.send([HostArray.of(np.full(512, -1), torch.int64, -1)], device)
        return first.cpu()

    assert torch.equal(first_values(ParameterStaging(), wait=True), torch.arange(512))
    assert not torch.equal(first_values(ParameterStaging(), wait=False), torch.arange(512))
