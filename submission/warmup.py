"""Warm-up before run_start: pay one-time set-up costs on synthetic batches, not in the timed run.

The first step at a new image size builds cuDNN/oneDNN plans (1-3 s per size on an H100,
measured earlier in this project) and, with compile=true, compiles the model for that
shape (43-61 s per size). Progressive resizing uses about 13 sizes in Mild, so without a
warm-up that cost lands between run_start and run_stop.

`warm_up` runs forward and backward at every training side of the schedule, and the
evaluation forward at its size, through the real (possibly compiled, possibly DDP)
network, on random batches made here: no training or validation image is read. It
takes no optimizer step and restores everything it touched: weights, BatchNorm
statistics, gradients and the random number generators are bit-identical afterwards,
so a run with warm-up starts from exactly the state a run without it starts from.

`warm_up_loaders` reads the run's FFCV pipelines through once on synthetic .beton files
(random images written with the data set's write settings by `prepare`, shaped like each
split), so that their numba compilation, shared across Loaders by `data.compile_cache`,
is done before the real Loaders are built on the data after run_start, and so that the
host buffers those Loaders allocate are already in torch's cache.
"""
from __future__ import annotations

import contextlib
import gc
import random
import time

import numpy as np
import torch

from .data import loaders
from .out_of_memory import At


RECOMPILE_ADVICE = "Run with TORCH_LOGS=recompiles to see why, or compile=false"


@contextlib.contextmanager
def preserved_state(*modules: torch.nn.Module):
    """Restore the modules' parameters and buffers, and every RNG, on exit."""
    saved = [{k: v.detach().clone() for k, v in m.state_dict(keep_vars=True).items()} for m in modules]
    rng = (random.getstate(), np.random.get_state(), torch.get_rng_state(),
           torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None)
    try:
        yield
    finally:
        with torch.no_grad():
            for module, state in zip(modules, saved):
                current = module.state_dict(keep_vars=True)
                for key, value in state.items():
                    current[key].copy_(value)
                for p in module.parameters():
                    p.grad = None
        random.setstate(rng[0])
        np.random.set_state(rng[1])
        torch.set_rng_state(rng[2])
        if rng[3] is not None:
            torch.cuda.set_rng_state_all(rng[3])


def warm_up(net: torch.nn.Module, model: torch.nn.Module, *, train_sides: list[int],
            eval_side: int, batch: int, eval_batches: list[int], num_classes: int, loss_fn,
            smoothing: float, autocast, normalize, device: torch.device,
            log=print, calls_per_side: int = 1, net_is_compiled: bool = False,
            dynamic_shapes: bool = False) -> dict[int, float]:
    """Forward+backward at each training side (calls_per_side times: CUDA graphs are
    captured on a later call than the first), eval forward at eval_side for each batch size
    evaluation meets (a smaller last batch needs plans of its own: about 2 s of a first
    evaluation on an H100); returns the seconds each side took (the first call at a size
    carries its set-up cost). net_is_compiled: a side at which torch.compile compiled
    nothing (it fell back to eager) is refused, since the run would go eager there; with
    dynamic_shapes a graph serves many sides, so only a warm-up that compiled nothing at
    all is refused."""
    generator = torch.Generator(device="cpu").manual_seed(0)

    def batch_of(size: int, side: int) -> torch.Tensor:
        images = torch.randint(0, 256, (size, 3, side, side), dtype=torch.uint8, generator=generator)
        return images.to(device).contiguous(memory_format=torch.channels_last)

    seconds: dict[int, float] = {}
    graphs_before = compiled_graphs()
    with preserved_state(model):
        was_training = model.training
        model.train()
        for side in train_sides:
            start, graphs = time.perf_counter(), compiled_graphs()
            with At("warm-up", side, batch):
                for _ in range(calls_per_side):
                    model.zero_grad(set_to_none=True)
                    labels = torch.randint(0, num_classes, (batch,), generator=generator).to(device)
                    with autocast():
                        loss = loss_fn(net(normalize(batch_of(batch, side))), labels, smoothing)
                    loss.backward()
                _sync(device)
            seconds[side] = time.perf_counter() - start
            if net_is_compiled and not dynamic_shapes and compiled_graphs() == graphs:
                raise RuntimeError(
                    f"torch.compile compiled nothing at {side} px during the warm-up: the step "
                    f"would run eagerly at that size inside the timed region (torch._dynamo "
                    f"recompile_limit {torch._dynamo.config.recompile_limit}; the schedule has "
                    f"{len(train_sides)} sizes). {RECOMPILE_ADVICE}")
        if net_is_compiled and dynamic_shapes and compiled_graphs() == graphs_before:
            raise RuntimeError("torch.compile (dynamic shapes) compiled nothing during the warm-up: "
                               f"the step would run eagerly. {RECOMPILE_ADVICE}")
        model.eval()
        with torch.no_grad(), autocast(), At("warm-up evaluation", eval_side,
                                             max(eval_batches, default=0)):
            start = time.perf_counter()
            for eval_batch in eval_batches:
                model(normalize(batch_of(eval_batch, eval_side)))  # evaluation runs eagerly
            _sync(device)
            seconds[-eval_side] = time.perf_counter() - start     # negative: evaluation
        model.train(was_training)
    log(f"warm-up before run_start: {len(train_sides)} training sizes "
        f"({', '.join(str(s) for s in train_sides)} px) and evaluation at {eval_side} px, "
        f"{sum(seconds.values()):.1f} s, synthetic batches"
        + (f"; torch.compile compiled {compiled_graphs() - graphs_before} graph(s)" if net_is_compiled else ""))
    return seconds


def warm_up_loaders(train_loader, val_loader, log=print) -> float:
    """One pass over each loader (built with the run's pipelines on the synthetic files);
    returns the seconds it took, almost all of it numba compiling the pipelines.

    Each FFCV epoch allocates its batch buffers (on a GPU, pinned host memory: about 1 GiB
    per loader for ImageNet's 500 px images at batch 256, mostly the decoder's scratch
    space). Freed, torch keeps pinned blocks for a later request of the same power-of-two
    size, so the run's first epoch and first evaluation can take this warm-up's blocks
    instead of pinning new memory inside the timed region. Hence: the synthetic files'
    largest images are the splits' (prepare.SyntheticSplit); the evaluation pass runs while
    the training epoch holds its buffers, as in a run, so both sets of blocks exist; and a
    garbage collection at the end frees them, because the frames of numba's compilation
    keep the first epoch of a pipeline alive in reference cycles."""
    start = time.perf_counter()
    training = loaders.one_epoch(train_loader)
    try:
        next(training)
        _exhaust(loaders.one_epoch(val_loader))     # one_epoch: its thread has ended after it
        _exhaust(training)
    finally:
        training.close()
    gc.collect()
    seconds = time.perf_counter() - start
    log(f"loader warm-up before run_start: pipelines compiled on synthetic images, {seconds:.1f} s")
    return seconds


def _exhaust(batches) -> None:
    for _ in batches:
        pass


def compiled_graphs() -> int:
    """Graphs torch.compile has compiled in this process so far (all models)."""
    from torch._dynamo.utils import counters
    return counters["stats"]["unique_graphs"]


def compiled(net: torch.nn.Module, cache_dir, sizes: int, cuda_graphs: bool = False,
             dynamic: bool = False) -> torch.nn.Module:
    """torch.compile with static shapes, room for `sizes` input sizes; Inductor's on-disk
    cache under cache_dir, so that runs 2-5 of a campaign (new processes) reuse what run 1
    compiled. A cache folder the user chose (TORCHINDUCTOR_CACHE_DIR set to anything but
    torch's default) is kept.
    Each size is one more compilation of the same forward; past torch._dynamo's
    recompile_limit (8) torch runs the new sizes eagerly with only a warning, and Mild's
    schedule has 13 sizes: its 5 largest, 40% of the run, would not be compiled.
    cuda_graphs: mode reduce-overhead, each size's forward and backward replayed as CUDA
    graphs (on an H100: 2.58x eager at 88 px, where the step is launch-bound, 1.31x at
    176 px; docs/gpu-h100.md).
    dynamic: graphs with symbolic sizes instead (dynamic=True), compiled again only where a
    size changes a guard (on CPU, ResNet-50 compiled again going from 32 to 16 px). Issue 9
    measured it on an H100: 130 s to compile once, then 1.2-2.4 s at each new size, and no
    gain over eager."""
    import os
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir
    torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, sizes)
    chosen = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    if chosen is None or os.path.abspath(chosen) == os.path.abspath(default_cache_dir()):
        # torch writes its default into the variable the first time it looks it up
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(cache_dir / "inductor")
    if not cuda_graphs:
        return torch.compile(net, dynamic=dynamic)
    return StepMarked(torch.compile(net, dynamic=dynamic, mode="reduce-overhead"))


class StepMarked(torch.nn.Module):
    """Each forward starts a new step for CUDA graph trees: the previous step's outputs
    are dead and their memory may be replayed over (without the mark, the warm-up's
    repeated calls stopped with "accessing tensor output of CUDAGraphs that has been
    overwritten by a subsequent run")."""

    def __init__(self, net: torch.nn.Module):
        super().__init__()
        self.net = net

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        torch.compiler.cudagraph_mark_step_begin()
        return self.net(images)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
