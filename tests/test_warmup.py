"""Warm-up before run_start: every size of the schedule, and nothing of the run changed."""
from __future__ import annotations

import copy
import os
import random

import numpy as np
import torch

from submission.config import resolve
from submission.data.loaders import Normalizer
from submission.methods.ema import EMA
from submission.methods.loss import LOSSES
from submission.methods.sgdw import DecoupledSGDW
from submission.model import model_from_config
from submission.step import RunPlan, autocast_for, optimizer_step
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
    hook = model.conv1.register_forward_pre_hook(lambda m, args: sides_seen.append(args[0].shape[::3]))
    sides = RunPlan.of(config, 60_000).sides()
    assert sides == [16, 20, 24, 28, 32]
    seconds = warm_up(model, model, train_sides=sides, eval_side=config.eval_resolution, batch=2,
                      eval_batches=[3, 1], num_classes=10, loss_fn=loss_fn, smoothing=0.08,
                      autocast=autocast, normalize=normalize, device=CPU, log=lambda line: None)
    hook.remove()

    # every training side at the training batch, then both evaluation batch sizes
    assert sides_seen == [(2, side) for side in sides] + [(3, config.eval_resolution),
                                                          (1, config.eval_resolution)]
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


LOADER_PROBE = '''
import hashlib, json, sys
import torch
from numba.core import event
from submission import distributed
from submission.config import Config
from submission.data.prepared_data import PreparedData
from submission.train import run_loaders
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
with event.install_recorder("numba:compile") as other_compiles:   # another crop size: not reused
    from submission.data.loaders import val_loader
    smaller = val_loader(data.val_path, 16, 16, 8, 1, ctx.device, 0, 1, 8)
    side = next(iter(smaller))[0].shape[-1]
print(json.dumps({"compiles": len(compiles.buffer), "labels": labels, "val": images,
                  "other_compiles": len(other_compiles.buffer), "other_side": side}))
'''


def test_loaders_warmed_on_synthetic_images_compile_nothing_after_run_start(tmp_path, cache_dir):
    """In a fresh process, the run's loaders compile their numba pipelines on first use;
    after warm_up_loaders on the synthetic files they compile nothing, and they give the
    same batches (evaluation images bit for bit, training labels in the same order)."""
    import json
    import subprocess
    import sys

    from conftest import GPUS_HIDDEN, REPO, quick_settings
    from submission.config import parse_overrides
    from submission.data.prepare import prepare

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


BUFFER_PROBE = '''
import gc, json, sys, weakref
import torch
import ffcv.pipeline.graph
from submission import distributed
from submission.config import Config
from submission.data.loaders import one_epoch
from submission.data.prepared_data import PreparedData
from submission.train import run_loaders
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

    from conftest import GPUS_HIDDEN, REPO
    from image_folders import config as folder_config, write_image
    from submission.data.prepare import prepare
    from submission.data.synthetic import largest_stored_image

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
    for warm_up in found["warm_ups"]:
        assert warm_up["bytes"] == found["run"]               # [training epoch, evaluation]
        assert warm_up["previous_alive"][1] == len(found["run"][0]) > 0
        assert warm_up["left"] == 0


ORDER_TRACE = '''
import json, os, sys
_trace = os.environ["ORDER_TRACE"]

def _note(kind, what=""):
    with open(_trace, "a") as out:
        out.write(json.dumps([kind, str(what)]) + "\\n")

def _audit(event, args):
    if event == "open" and args and str(args[0]).endswith(".beton"):
        _note("open", args[0])

sys.addaudithook(_audit)
import ffcv.reader
from submission import mlperf_log
_reader_init, _run_start = ffcv.reader.Reader.__init__, mlperf_log.RunLog.init_stop_run_start

def _reader(self, fname, *args, **kwargs):
    _note("read", fname)
    return _reader_init(self, fname, *args, **kwargs)

def _started(self):
    _note("run_start")
    return _run_start(self)

ffcv.reader.Reader.__init__, mlperf_log.RunLog.init_stop_run_start = _reader, _started
'''


def test_no_data_set_is_read_before_run_start(tmp_path, cache_dir):
    """A real run with the warm-up on: before run_start only the synthetic files are opened;
    the training and validation .beton files (FFCV's Reader reads their labels) only after."""
    import json
    import subprocess
    import sys

    from conftest import GPUS_HIDDEN, REPO, quick_settings
    from submission.config import parse_overrides
    from submission.data.prepare import prepare

    config = resolve(None, parse_overrides(quick_settings(tmp_path, cache_dir, warmup="true")))
    data = prepare(config)
    (tmp_path / "config.json").write_text(json.dumps(config.to_dict()))
    data.save(tmp_path / "data.json")
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(ORDER_TRACE)
    trace = tmp_path / "trace.jsonl"
    done = subprocess.run(
        [sys.executable, "-m", "submission.train", "--config", str(tmp_path / "config.json"),
         "--data", str(tmp_path / "data.json"), "--seed", "2", "--result", str(tmp_path / "result_0.txt")],
        cwd=REPO, capture_output=True, text=True, timeout=600,
        env={"PYTHONPATH": f"{hook}:{REPO}", "ORDER_TRACE": str(trace), "PATH": "", **GPUS_HIDDEN})
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert "loader warm-up before run_start" in done.stdout
    events = [tuple(json.loads(line)) for line in trace.read_text().splitlines()]
    start = events.index(("run_start", ""))
    before, after = {what for _, what in events[:start]}, {what for _, what in events[start:]}
    assert {data.synthetic_train_path, data.synthetic_val_path} <= before
    assert data.train_path not in before and data.val_path not in before
    assert {data.train_path, data.val_path} <= after


COMPILE_PROBE = '''
import contextlib, json, sys
from pathlib import Path
import torch
from torch import nn
from submission.data.loaders import Normalizer
from submission.methods.loss import LOSSES
from submission.warmup import compiled, compiled_graphs, warm_up

CPU = torch.device("cpu")
normalize = Normalizer(CPU)
lines = []


def tiny():
    return nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 10))


settings = dict(eval_side=8, batch=4, eval_batches=[4], num_classes=10, loss_fn=LOSSES["bce"],
                smoothing=0.1, autocast=contextlib.nullcontext, normalize=normalize, device=CPU,
                log=lines.append, net_is_compiled=True)
sides = list(range(8, 48, 4))          # 10 sizes: torch._dynamo compiles 8 unless told more
model = tiny()
net = compiled(model, Path(sys.argv[1]), len(sides))
warm_up(net, model, train_sides=sides, **settings)
after_warm_up = compiled_graphs()
for side in sides:                     # the run's steps, at every size of the schedule
    images = torch.randint(0, 256, (4, 3, side, side), dtype=torch.uint8)
    net(normalize(images.contiguous(memory_format=torch.channels_last))).sum().backward()
late = compiled_graphs() - after_warm_up

# room for no more sizes: a second model's first size falls back to eager, and is refused
torch._dynamo.config.recompile_limit = len(sides)
other = tiny()
try:
    warm_up(torch.compile(other, dynamic=False), other, train_sides=[8], **settings)
    refused = ""
except RuntimeError as error:
    refused = str(error)
print(json.dumps({"after_warm_up": after_warm_up, "late": late, "refused": refused,
                  "log": lines[0]}))
'''


DYNAMIC_PROBE = COMPILE_PROBE.split("sides = ")[0] + '''
sides = list(range(8, 48, 4))
model = tiny()
net = compiled(model, Path(sys.argv[1]), len(sides), dynamic=True)
warm_up(net, model, train_sides=sides, dynamic_shapes=True, **settings)
after_warm_up = compiled_graphs()
for side in sides:
    images = torch.randint(0, 256, (4, 3, side, side), dtype=torch.uint8)
    net(normalize(images.contiguous(memory_format=torch.channels_last))).sum().backward()
late = compiled_graphs() - after_warm_up
try:                                   # warmed already: this warm-up compiles nothing at all
    warm_up(net, model, train_sides=sides, dynamic_shapes=True, **settings)
    refused = ""
except RuntimeError as error:
    refused = str(error)
print(json.dumps({"after_warm_up": after_warm_up, "late": late, "refused": refused,
                  "log": lines[0]}))
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


def test_compiled_warm_up_compiles_every_size_of_a_long_schedule_before_run_start(tmp_path):
    """compile=true with more sizes than torch._dynamo's recompile_limit (8; Mild has 13):
    the warm-up compiles every one, the run's steps at those sizes compile nothing more,
    and a size torch would leave eager is refused before run_start, not run slowly."""
    figures = _probe(tmp_path, COMPILE_PROBE)
    assert figures["after_warm_up"] >= 10
    assert f"torch.compile compiled {figures['after_warm_up']} graph(s)" in figures["log"]
    assert figures["late"] == 0
    assert "compiled nothing at 8 px" in figures["refused"]
    assert (tmp_path / "inductor").is_dir()        # Inductor's cache went under cache_dir


def test_dynamic_compile_serves_every_size_with_few_graphs_and_nothing_after_the_warm_up(tmp_path):
    """compile_dynamic=true: fewer graphs than sizes, all compiled in the warm-up; a warm-up
    that compiles nothing at all is refused."""
    figures = _probe(tmp_path, DYNAMIC_PROBE)
    assert 1 <= figures["after_warm_up"] < 10
    assert f"torch.compile compiled {figures['after_warm_up']} graph(s)" in figures["log"]
    assert figures["late"] == 0
    assert "(dynamic shapes) compiled nothing during the warm-up" in figures["refused"]
