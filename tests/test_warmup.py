"""Warm-up before run_start: every size of the schedule, and nothing of the run changed."""
from __future__ import annotations

import copy
import random

import numpy as np
import torch

from submission.config import resolve
from submission.data.loaders import Normalizer
from submission.methods.ema import EMA
from submission.methods.loss import LOSSES
from submission.methods.progressive_resize import schedule_sides
from submission.methods.sgdw import DecoupledSGDW
from submission.model import model_from_config
from submission.train import autocast_for, optimizer_step
from submission.warmup import warm_up

CPU = torch.device("cpu")


def test_warm_up_runs_every_size_and_leaves_the_run_bit_identical():
    config = resolve("cpu", {})
    torch.manual_seed(0)
    model = model_from_config(config, 10)
    ema = EMA(model, 10, 1)
    optimizer = DecoupledSGDW(model.parameters(), lr=0.1, momentum=0.875, weight_decay=5e-4)
    normalize, autocast, loss_fn = Normalizer(CPU), autocast_for(config, CPU), LOSSES["bce"]
    images = torch.randint(0, 256, (4, 3, 16, 16), dtype=torch.uint8)
    labels = torch.randint(0, 10, (4,))
    optimizer_step(model, optimizer, None, autocast, loss_fn, normalize(images), labels, 0.08)
    ema.update(model, 1)                      # momentum buffers and an EMA with history

    before = copy.deepcopy((model.state_dict(), ema.model.state_dict(), optimizer.state_dict()))
    rng = (random.getstate(), np.random.get_state(), torch.get_rng_state())
    sides_seen = []
    hook = model.conv1.register_forward_pre_hook(lambda m, args: sides_seen.append(args[0].shape[-1]))
    sides = schedule_sides(150, 150, config)
    assert sides == [16, 20, 24, 28, 32]
    seconds = warm_up(model, model, train_sides=sides, eval_side=config.eval_resolution, batch=2,
                      eval_batch=3, num_classes=10, loss_fn=loss_fn, smoothing=0.08,
                      autocast=autocast, normalize=normalize, device=CPU, log=lambda line: None)
    hook.remove()

    assert sides_seen == sides + [config.eval_resolution]
    assert set(seconds) == set(sides) | {-config.eval_resolution}
    after = (model.state_dict(), ema.model.state_dict(), optimizer.state_dict())
    for old, new in zip(before[:2], after[:2]):
        assert old.keys() == new.keys()
        assert all(torch.equal(old[k], new[k]) for k in old)      # BN statistics included
    assert all(torch.equal(before[2]["state"][i]["momentum_buffer"], after[2]["state"][i]["momentum_buffer"])
               for i in before[2]["state"])
    assert all(p.grad is None for p in model.parameters())
    assert model.training
    assert random.getstate() == rng[0] and torch.equal(torch.get_rng_state(), rng[2])
    assert np.array_equal(np.random.get_state()[1], rng[1][1])
