"""submission/data/sharding.py: steps per epoch as FFCV's distributed order makes them, and
the refusal of a training set that makes no step (tests/test_step.py checks the counts
against torch's DistributedSampler)."""
from __future__ import annotations

import pytest

from submission.config import ConfigError, resolve
from submission.data.sharding import refuse_fewer_than_one_batch, steps_per_epoch
from submission.run_plan import RunPlan


def test_a_step_needs_one_batch_on_every_process():
    # 8 processes, 16 each: 121 images are 16 per process (padded), 120 only 15
    assert steps_per_epoch(121, 16, 8) == 1 and steps_per_epoch(120, 16, 8) == 0
    refuse_fewer_than_one_batch(121, 16, 8)
    with pytest.raises(ConfigError) as refused:
        refuse_fewer_than_one_batch(120, 16, 8)
    assert str(refused.value) == ("120 training images are fewer than one global batch (128 = "
                                  "16 per process x 8 process(es)): lower batch_per_device or "
                                  "add images")


def test_the_run_plan_refuses_with_the_same_words():
    config = resolve("cpu", {"batch_per_device": "16"})
    with pytest.raises(ConfigError) as refused:
        RunPlan.of(config, 120, 8)
    assert str(refused.value).startswith("120 training images are fewer than one global batch (128")
    assert RunPlan.of(config, 121, 8).steps_per_epoch == 1
