"""Warm-up before run_start: the recipe step at every size of the schedule, and nothing of
the run changed."""
from __future__ import annotations

import copy
import os
import random

import numpy as np
import pytest
import torch
from torch import nn

from submission.config import resolve
from submission.methods.ema import EMA
from submission.methods.loss import LOSSES
from submission.run_plan import RunPlan
from submission.step import Normalizer, RecipeStep, autocast_for, build_step, recipe_optimizer
from submission.warmup import warm_up

CPU = torch.device("cpu")


def _state_of(step) -> dict:
    """Everything of a run that the warm-up must leave as it found it, copied."""
    return copy.deepcopy({
        "model": step.model.state_dict(), "ema": step.ema.model.state_dict(),
        "grads": [p.grad for p in step.model.parameters()],
        "optimizer": step.optimizer.state_dict(),
        "scaler": step.scaler.state_dict() if step.scaler else None,
        "rng": (random.getstate(), np.random.get_state(), torch.get_rng_state())})


def _assert_same(before, after) -> None:
    """Equal, tensors bit for bit, through dicts, lists and tuples."""
    if isinstance(before, torch.Tensor):
        assert isinstance(after, torch.Tensor) and torch.equal(before, after)
    elif isinstance(before, dict):
        assert before.keys() == after.keys()
        for key in before:
            _assert_same(before[key], after[key])
    elif isinstance(before, (list, tuple)):
        assert len(before) == len(after)
        for old, new in zip(before, after):
            _assert_same(old, new)
    elif isinstance(before, np.ndarray):
        assert np.array_equal(before, after)
    else:
        assert before == after


def _shapes_seen(step) -> list:
    """The (batch, side) of every forward of the model's stem, from now on."""
    seen = []
    step.model.conv1.register_forward_pre_hook(lambda m, args: seen.append(args[0].shape[::3]))
    step.ema.model.conv1.register_forward_pre_hook(lambda m, args: seen.append(args[0].shape[::3]))
    return seen


def test_warm_up_runs_the_recipe_step_at_every_size_and_leaves_the_run_bit_identical():
    """Mild on a fresh step: the recipe step at each side of the plan on batches of the
    loader's size, the evaluation forward at both batch sizes; afterwards no momentum
    buffer (a fresh optimizer has none), no gradient, the same weights, BatchNorm
    statistics, EMA copy, learning rate and random generators."""
    config = resolve("cpu", {"batch_per_device": "2"})
    torch.manual_seed(0)
    step = build_step(config, 10, CPU)
    step.set_lr(0.0123)
    plan = RunPlan.of(config, 60_000)
    assert plan.sides() == [16, 20, 24, 28, 32]
    before = _state_of(step)
    assert before["optimizer"]["state"] == {} and all(g is None for g in before["grads"])
    seen = _shapes_seen(step)
    lines = []
    seconds = warm_up(step, plan, [3, 1], CPU, log=lines.append)

    # the step's forward at every training side, then both evaluation batch sizes
    assert seen == [(2, side) for side in plan.sides()] + [(3, config.eval_resolution),
                                                           (1, config.eval_resolution)]
    assert set(seconds) == set(plan.sides()) | {-config.eval_resolution}
    assert lines[0].startswith("warm-up before run_start: 5 training sizes (16, 20, 24, 28, 32 px) "
                               "and evaluation at 32 px, ")
    assert lines[0].endswith(" s, synthetic batches, 5 recipe steps")
    _assert_same(before, _state_of(step))
    assert [group["lr"] for group in step.optimizer.param_groups] == [0.0123]
    assert step.model.training


def tiny_model() -> nn.Module:
    return nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 10))


def test_warm_up_of_sam_includes_a_two_pass_step_at_every_side_and_restores_its_state():
    """Hot's step (SAM every 5th step, MixUp, ColOut; a small model in place of ResNet-50)
    two steps into a run, with a GradScaler whose scale grows at every step: at each side
    at least one two-pass SAM step, on batches of the loader's full side (ColOut crops them
    in the step); afterwards the momentum buffers, SAM's step count, the scaler's state,
    the weights, the EMA copy, the gradients and the generators are those of before."""
    config = resolve("cpu", {"recipe": "hot", "batch_per_device": "2"})
    torch.manual_seed(0)
    model = tiny_model()
    step = RecipeStep(config, model, model, EMA(model, 10, 1), recipe_optimizer(config, model, CPU),
                      LOSSES[config.loss], autocast_for(config, CPU),
                      torch.amp.GradScaler("cpu", init_scale=1024.0, growth_interval=1), Normalizer(CPU))
    plan = RunPlan.of(config, 60_000)
    assert plan.sides() == [16, 20, 24, 28, 30] and config.sam_interval == 5
    for _ in range(2):
        images = torch.randint(0, 256, (2, 3, 32, 32), dtype=torch.uint8)
        step(images.contiguous(memory_format=torch.channels_last), torch.randint(0, 10, (2, 1)), 16)
    step.update_average(2)
    assert step.optimizer.steps == 2 and step.optimizer.state_dict()["base"]["state"]
    assert step.scaler.get_scale() == 1024.0 * 2 ** 2
    before = _state_of(step)

    seen, calls = [], []          # sides of the model's forwards; (side, forwards) of each step
    model[0].register_forward_pre_hook(lambda m, args: seen.append(args[0].shape[-1]))
    plain_step = step.optimizer.step

    def counted(closure, scaler=None):
        first = len(seen)
        loss = plain_step(closure, scaler)
        calls.append((seen[first], len(seen) - first))
        return loss

    step.optimizer.step = counted
    warm_up(step, plan, [2], CPU, log=lambda line: None)
    del step.optimizer.step

    # at every side a two-pass SAM step, then a plain one
    assert calls == [(side, passes) for side in plan.sides() for passes in (2, 1)]
    assert len(seen) == len(calls) + 5      # the evaluation ran on the EMA copy
    _assert_same(before, _state_of(step))
    assert step.optimizer.steps == 2 and step.scaler.get_scale() == 1024.0 * 2 ** 2


LOADER_PROBE = '''
import hashlib, json, sys
import torch
from numba.core import event
from submission import distributed
from submission.config import Config
from submission.data.data_json import PreparedData
from submission.loaders.run_loaders import run_loaders
from submission.warmup import warm_up_loaders

config = Config.from_dict(json.loads(open(sys.argv[1]).read()))
data = PreparedData.load(sys.argv[2])
ctx = distributed.Context(0, 0, 1, torch.device("cpu"))
if sys.argv[3] == "warm":
    warm_up_loaders(*run_loaders(config, ctx, 5, data.synthetic_train_path, data.synthetic_val_path,
                                 data.synthetic_samples, shard=False), log=lambda line: None)
with event.install_recorder("numba:compile") as compiles:
    train, val = run_loaders(config, ctx, 5, data.train_path, data.val_path, data.eval_samples,
                             shard=True)
    labels = [y.tolist() for _, (_, y) in zip(range(3), train)]
    images = hashlib.sha256(b"".join(x.numpy().tobytes() for x, _ in val)).hexdigest()
found = {"compiles": len(compiles.buffer), "labels": labels, "val": images}
if sys.argv[3] == "warm":
    with event.install_recorder("numba:compile") as other_compiles:   # another crop size: not reused
        from submission.loaders.ffcv_loaders import val_loader
        smaller = val_loader(data.val_path, 16, 16, 8, 1, ctx.device, 0, 1, 8)
        found["other_side"] = next(iter(smaller))[0].shape[-1]
    found["other_compiles"] = len(other_compiles.buffer)
print(json.dumps(found))
'''


@pytest.mark.e2e
def test_loaders_warmed_on_synthetic_images_compile_nothing_after_run_start(tmp_path, cache_dir):
    """In a fresh process, the run's loaders compile their numba pipelines on first use;
    after warm_up_loaders on the synthetic files they compile nothing, and they give the
    same batches (evaluation images bit for bit, training labels in the same order)."""
    import json
    import subprocess
    import sys

    from submission.config import parse_overrides
    from submission.data.prepare import prepare

    from conftest import GPUS_HIDDEN, REPO, quick_settings

    config = resolve(None, parse_overrides(quick_settings(tmp_path, cache_dir)))
    data = prepare(config)
    assert data.synthetic_samples == config.batch_per_device
    assert data.synthetic_train_path and data.synthetic_val_path
    (tmp_path / "config.json").write_text(json.dumps(config.to_dict()))
    data.save(tmp_path / "data.json")
    (tmp_path / "probe.py").write_text(LOADER_PROBE)

    def probe(mode: str) -> dict:
        done = subprocess.run([sys.executable, str(tmp_path / "probe.py"), str(tmp_path / "config.json"),
                               str(tmp_path / "data.json"), mode], cwd=REPO, capture_output=True,
                              text=True, timeout=300,
                              env={"PYTHONPATH": str(REPO), "PATH": "", **GPUS_HIDDEN})
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads(done.stdout.strip().splitlines()[-1])

    cold, warm = probe("cold"), probe("warm")
    assert cold["compiles"] > 0            # FFCV compiles a new Loader's pipelines
    assert warm["compiles"] == 0
    assert warm["val"] == cold["val"] and warm["labels"] == cold["labels"]
    assert warm["other_compiles"] > 0 and warm["other_side"] == 16


DISK_PROBE = '''
import hashlib, json, sys
from pathlib import Path
from numba.core import event
with event.install_recorder("numba:compile") as compiles:
    from submission.loaders import compile_cache
    compile_cache.install(Path(sys.argv[3]))        # before FFCV's import, as train.set_up does
    import torch
    from submission import distributed
    from submission.config import Config
    from submission.data.data_json import PreparedData
    from submission.loaders.run_loaders import run_loaders
    from submission.warmup import warm_up_loaders
    config = Config.from_dict(json.loads(open(sys.argv[1]).read()))
    data = PreparedData.load(sys.argv[2])
    ctx = distributed.Context(0, 0, 1, torch.device("cpu"))
    said = []
    warm_up_loaders(*run_loaders(config, ctx, 5, data.synthetic_train_path, data.synthetic_val_path,
                                 data.synthetic_samples, shard=False), log=said.append)
    train, val = run_loaders(config, ctx, 5, data.train_path, data.val_path, data.eval_samples, shard=True)
    labels = [y.tolist() for _, (_, y) in zip(range(3), train)]
    images = hashlib.sha256(b"".join(x.numpy().tobytes() for x, _ in val)).hexdigest()
print(json.dumps({"compiles": sum(1 for _, e in compiles.buffer if e.is_start), "labels": labels,
                  "val": images, "said": said[0]}))
'''


@pytest.mark.e2e
def test_a_campaigns_next_runs_load_ffcvs_compiled_pipelines_from_disk(tmp_path, cache_dir):
    """Each run of a campaign is a new process. Two at once on an empty folder (ranks of a
    first run) compile FFCV's import (numba's typed dict) and the JPEG-decoding pipelines and
    write them there; a third process compiles nothing at all, from FFCV's import to the
    run's loaders, and gives the same batches. With numba's default optimisation, as runs
    have it: unoptimised (the suite's NUMBA_OPT=0) the decoders keep their dispatchers'
    addresses and are compiled in every process (docs/ffcv-notes.md)."""
    import json
    import re
    import subprocess
    import sys

    from submission.config import parse_overrides
    from submission.data.prepare import prepare

    from conftest import GPUS_HIDDEN, REPO, quick_settings

    config = resolve(None, parse_overrides(quick_settings(tmp_path, cache_dir, write_mode="jpg")))
    data = prepare(config)
    (tmp_path / "config.json").write_text(json.dumps(config.to_dict()))
    data.save(tmp_path / "data.json")
    (tmp_path / "probe.py").write_text(DISK_PROBE)
    folder = tmp_path / "numba"

    def started() -> subprocess.Popen:
        return subprocess.Popen([sys.executable, str(tmp_path / "probe.py"), str(tmp_path / "config.json"),
                                 str(tmp_path / "data.json"), str(folder)], cwd=REPO, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env={"PYTHONPATH": str(REPO), "PATH": "", **GPUS_HIDDEN})

    def result(process: subprocess.Popen) -> dict:
        out, err = process.communicate(timeout=600)
        assert process.returncode == 0, err[-3000:]
        assert "could not" not in err                       # nothing damaged, nothing unwritten
        return json.loads(out.strip().splitlines()[-1])

    first = [result(process) for process in [started(), started()]]     # at once
    assert sum(run["compiles"] for run in first) > 0     # one may load what the other wrote first
    loaded_from = re.escape(f"functions loaded from {folder})")
    assert all(re.search(rf"\(numba: \d+ compilations, \d+ {loaded_from}$", run["said"]) for run in first)
    assert not list(folder.glob("*.tmp"))
    entries = sorted(folder.glob("*.nbc"))
    assert entries
    later = result(started())
    assert later["compiles"] == 0
    assert re.search(rf"\(numba: 0 compilations, [1-9]\d* {loaded_from}$", later["said"])
    assert later["val"] == first[0]["val"] == first[1]["val"]
    assert later["labels"] == first[0]["labels"] == first[1]["labels"]
    assert sorted(folder.glob("*.nbc")) == entries


BUFFER_PROBE = '''
import gc, json, sys, weakref
import torch
import ffcv.pipeline.graph
from submission import distributed
from submission.config import Config
from submission.loaders.protocol import one_epoch
from submission.data.data_json import PreparedData
from submission.loaders.run_loaders import run_loaders
from submission.warmup import warm_up_loaders

gc.disable()      # what the warm-up frees must not depend on when a collection happens to run
epochs = []       # one entry per FFCV epoch: its buffers' sizes and weak references
allocate = ffcv.pipeline.graph.Graph.allocate_memory

def noted(self, *args):
    buffers = allocate(self, *args)
    arrays = [a for kind in buffers.values() for b in kind.values() if b is not None
              for a in (b if isinstance(b, (tuple, list)) else [b])]
    previous_alive = sum(ref() is not None for ref in epochs[-1]["refs"]) if epochs else 0
    epochs.append({"bytes": sorted(int(a.nbytes) for a in arrays),
                   "refs": [weakref.ref(a) for a in arrays], "previous_alive": previous_alive})
    return buffers

ffcv.pipeline.graph.Graph.allocate_memory = noted
config = Config.from_dict(json.loads(open(sys.argv[1]).read()))
data = PreparedData.load(sys.argv[2])
ctx = distributed.Context(0, 0, 1, torch.device("cpu"))
warm_ups = []
for _ in range(2):    # the first compiles the pipelines, the second does not
    first = len(epochs)
    warm_up_loaders(*run_loaders(config, ctx, 5, data.synthetic_train_path, data.synthetic_val_path,
                                 data.synthetic_samples, shard=False), log=lambda line: None)
    warm_ups.append({"bytes": [e["bytes"] for e in epochs[first:]],
                     "previous_alive": [e["previous_alive"] for e in epochs[first:]],
                     "left": sum(ref() is not None for e in epochs for ref in e["refs"])})
first = len(epochs)
train, val = run_loaders(config, ctx, 5, data.train_path, data.val_path, data.eval_samples, shard=True)
training = one_epoch(train)
next(training)
for _ in val:
    pass
print(json.dumps({"warm_ups": warm_ups, "run": [e["bytes"] for e in epochs[first:]]}))
'''


@pytest.mark.e2e
def test_the_loader_warm_up_leaves_freed_buffers_of_the_run_loaders_sizes(tmp_path, cache_dir):
    """FFCV allocates each epoch's batch buffers (pinned on a GPU, where torch keeps a
    freed block for a request of the same power-of-two size). In a fresh process (numba
    compiles there, and its frames keep the first epoch alive in reference cycles), with
    the garbage collector off, the warm-up run twice (compiling, then not): it allocates
    what the run's first training epoch and first evaluation allocate, byte for byte, on
    images whose largest height and width differ between the splits; the evaluation's
    buffers are allocated while the training epoch holds its own, as in a run; and none
    of them is alive when the warm-up returns."""
    import json
    import subprocess
    import sys

    from submission.data.prepare import prepare
    from submission.data.synthetic import largest_stored_image

    from conftest import GPUS_HIDDEN, REPO
    from image_folders import config as folder_config
    from image_folders import write_image

    images = tmp_path / "images"
    for split, sizes in (("train", ((40, 24), (24, 30), (32, 32))), ("val", ((36, 20), (20, 26)))):
        for label, name in enumerate(("cat", "dog")):
            for serial, size in enumerate(sizes * 3):
                write_image(images / split / name / f"{split}_{name}_{serial}.JPEG", label, serial, size)
    config = folder_config(images, cache_dir, batch_per_device=4, workers_per_device=1,
                           eval_resize=20, eval_resolution=16, train_resolution=16)
    data = prepare(config)
    assert largest_stored_image(data.train_path) == (32, 40)     # (height, width)
    assert largest_stored_image(data.val_path) == (26, 36)
    (tmp_path / "config.json").write_text(json.dumps(config.to_dict()))
    data.save(tmp_path / "data.json")
    (tmp_path / "probe.py").write_text(BUFFER_PROBE)
    done = subprocess.run([sys.executable, str(tmp_path / "probe.py"), str(tmp_path / "config.json"),
                           str(tmp_path / "data.json")], cwd=REPO, capture_output=True, text=True,
                          timeout=300, env={"PYTHONPATH": str(REPO), "PATH": "", **GPUS_HIDDEN})
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    for each in found["warm_ups"]:
        assert each["bytes"] == found["run"]                  # [training epoch, evaluation]
        assert each["previous_alive"][1] == len(found["run"][0]) > 0
        assert each["left"] == 0


COMPILE_PROBE = '''
import contextlib, json, sys
from pathlib import Path
import torch
from torch import nn
from submission.config import resolve
from submission.step import Normalizer
from submission.methods.loss import LOSSES
from submission.methods.sgdw import DecoupledSGDW
from submission.run_plan import RunPlan
from submission.step import RecipeStep
from submission.warmup import compiled, compiled_graphs, warm_up

CPU = torch.device("cpu")
# ten sides, 8 to 44 px: torch._dynamo compiles 8 sizes of a forward unless told more
config = resolve("cpu", {"batch_per_device": "4", "train_resolution": "44", "resize_initial_scale": "0.2",
                         "resize_granularity": "step", "ema_half_life_batches": "0"})
plan = RunPlan.of(config, 4000)
sides = plan.sides()
assert sides == list(range(8, 48, 4)), sides
lines = []


def tiny():
    return nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 10))


def recipe_step(model, net):
    optimizer = DecoupledSGDW(model.parameters(), lr=0.1, momentum=0.875, weight_decay=5e-4)
    return RecipeStep(config, model, net, None, optimizer, LOSSES["bce"], contextlib.nullcontext,
                      None, Normalizer(CPU))


def warmed(step, dynamic=False) -> str:
    try:
        warm_up(step, plan, [4], CPU, log=lines.append, net_is_compiled=True, dynamic_shapes=dynamic)
        return ""
    except RuntimeError as error:
        return str(error)


def late_graphs(step) -> int:
    before = compiled_graphs()
    for side in sides:                 # the run's steps, at every size of the schedule
        images = torch.randint(0, 256, (4, 3, 44, 44), dtype=torch.uint8)
        step(images.contiguous(memory_format=torch.channels_last), torch.zeros((4, 1), dtype=torch.int64), side)
    return compiled_graphs() - before
'''

STATIC_PROBE = COMPILE_PROBE + '''
model = tiny()
step = recipe_step(model, compiled(model, Path(sys.argv[1]), len(sides)))
warmed(step)
after_warm_up = compiled_graphs()
late = late_graphs(step)
# room for no more sizes: a second model's first size falls back to eager, and is refused
torch._dynamo.config.recompile_limit = len(sides)
other = tiny()
refused = warmed(recipe_step(other, torch.compile(other, dynamic=False)))
print(json.dumps({"after_warm_up": after_warm_up, "late": late, "refused": refused, "log": lines[0]}))
'''


DYNAMIC_PROBE = COMPILE_PROBE + '''
model = tiny()
step = recipe_step(model, compiled(model, Path(sys.argv[1]), len(sides), dynamic=True))
warmed(step, dynamic=True)
after_warm_up = compiled_graphs()
late = late_graphs(step)
refused = warmed(step, dynamic=True)    # warmed already: this warm-up compiles nothing at all
print(json.dumps({"after_warm_up": after_warm_up, "late": late, "refused": refused, "log": lines[0]}))
'''


def _probe(tmp_path, source: str) -> dict:
    import json
    import subprocess
    import sys

    from conftest import GPUS_HIDDEN, REPO

    (tmp_path / "probe.py").write_text(source)
    done = subprocess.run([sys.executable, str(tmp_path / "probe.py"), str(tmp_path)], cwd=REPO,
                          capture_output=True, text=True, timeout=600,
                          env={"PYTHONPATH": str(REPO), "PATH": os.environ["PATH"], **GPUS_HIDDEN})
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.e2e
def test_compiled_warm_up_compiles_every_size_of_a_long_schedule_before_run_start(tmp_path):
    """compile=true with more sizes than torch._dynamo's recompile_limit (8; Mild has 13):
    the warm-up compiles every one, the run's steps at those sizes compile nothing more,
    and a size torch would leave eager is refused before run_start, not run slowly."""
    figures = _probe(tmp_path, STATIC_PROBE)
    assert figures["after_warm_up"] >= 10
    assert f"torch.compile compiled {figures['after_warm_up']} graph(s)" in figures["log"]
    assert figures["late"] == 0
    assert "compiled nothing at 8 px" in figures["refused"]
    assert (tmp_path / "inductor").is_dir()        # Inductor's cache went under cache_dir


@pytest.mark.e2e
def test_dynamic_compile_serves_every_size_with_few_graphs_and_nothing_after_the_warm_up(tmp_path):
    """compile_dynamic=true: fewer graphs than sizes, all compiled in the warm-up; a warm-up
    that compiles nothing at all is refused."""
    figures = _probe(tmp_path, DYNAMIC_PROBE)
    assert 1 <= figures["after_warm_up"] < 10
    assert f"torch.compile compiled {figures['after_warm_up']} graph(s)" in figures["log"]
    assert figures["late"] == 0
    assert "(dynamic shapes) compiled nothing during the warm-up" in figures["refused"]
