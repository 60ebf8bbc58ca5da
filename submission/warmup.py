"""Warm-up before run_start: pay one-time set-up costs on synthetic batches, not in the timed run.

The first step at a new image size builds cuDNN/oneDNN plans and, with compile=true,
compiles the model for that shape; progressive resizing meets a dozen sizes in Mild, and
a first evaluation meets its batch sizes. Without a warm-up that cost lands between
run_start and run_stop (what it costs on a GPU: docs/timing-and-warmup.md).

`warm_up` calls the run's own recipe step (`RecipeStep`: normalise, ColOut, resize,
MixUp, forward, backward, the optimizer's update, SAM's second pass on its steps) on
random uint8 batches of the loader's output size, at every training side of the run's
plan, then the evaluation forward at each batch size evaluation meets: every shape and
kernel the run meets is met before run_start, and no training or validation image is
read. It leaves no trace: weights, BatchNorm statistics, gradients, the optimizer's
state (SAM's step count included), the GradScaler's, the learning rate, the EMA copy and
every random number generator are bit-identical afterwards, so a run with warm-up starts
from exactly the state a run without it starts from.

`warm_up_loaders` reads the run's FFCV pipelines through once on synthetic .beton files
(random images written with the data set's write settings by `prepare`, shaped like each
split), so that their numba compilation, shared across Loaders by `loaders.compile_cache`
(and from a campaign's second run loaded from its folder),
is done before the real Loaders are built on the data after run_start, and so that the
host buffers those Loaders allocate are already in torch's cache.
"""
from __future__ import annotations

import contextlib
import copy
import gc
import random
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import cast

import numpy as np
import torch

from .loaders import compile_cache
from .loaders.protocol import Loader, one_epoch
from .methods.sam import SAM
from .out_of_memory import At
from .private_folder import inductor_folder, make_private, refuse_untrusted
from .run_plan import RunPlan
from .step import RecipeStep

RECOMPILE_ADVICE = "Run with TORCH_LOGS=recompiles to see why, or compile=false"


@contextlib.contextmanager
def leaves_no_trace(step: RecipeStep) -> Iterator[None]:
    """Restore, on exit, everything calling `step` changes: the model's and the EMA copy's
    parameters and buffers, the gradients, the optimizer's state and param groups (SAM's
    step count too), the GradScaler's state, and every random number generator."""
    modules = [step.model] + ([step.ema.model] if step.ema else [])
    saved = [{k: v.detach().clone() for k, v in m.state_dict(keep_vars=True).items()} for m in modules]
    grads = [None if p.grad is None else p.grad.detach().clone() for p in step.model.parameters()]
    optimizer = copy.deepcopy(step.optimizer.state_dict())
    scaler = step.scaler.state_dict() if step.scaler else None
    rng = (random.getstate(), np.random.get_state(), torch.get_rng_state(),
           torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None)
    was_training = step.model.training
    try:
        yield
    finally:
        with torch.no_grad():
            for module, state in zip(modules, saved):
                current = module.state_dict(keep_vars=True)
                for key, value in state.items():
                    current[key].copy_(value)
            for p, grad in zip(step.model.parameters(), grads):
                p.grad = grad
        step.optimizer.load_state_dict(optimizer)
        if scaler is not None and step.scaler is not None:
            step.scaler.load_state_dict(scaler)
        step.model.train(was_training)
        random.setstate(rng[0])
        np.random.set_state(rng[1])
        torch.set_rng_state(rng[2])
        if rng[3] is not None:
            torch.cuda.set_rng_state_all(rng[3])


def calls_at_a_side(step: RecipeStep, calls_per_side: int) -> int:
    """How many times to call the step at one side: `calls_per_side`; with SAM at least two,
    the first a two-pass step (the warm-up sets SAM's count for it: it is restored after),
    then a plain one."""
    return max(calls_per_side, 2) if isinstance(step.optimizer, SAM) else calls_per_side


def warm_up(step: RecipeStep, plan: RunPlan, eval_batches: list[int], device: torch.device, *,
            log: Callable[[str], None] = print, calls_per_side: int = 1, net_is_compiled: bool = False,
            dynamic_shapes: bool = False) -> dict[int, float]:
    """The recipe step at each training side of `plan` (calls_at_a_side times: CUDA graphs
    are captured on a later call than the first, hence calls_per_side 3 with them), on
    batches of the loader's size, then the evaluation forward of the evaluated model at
    each of `eval_batches` (a smaller last batch needs plans of its own); returns the
    seconds each side took (the first call at a size carries its set-up cost; the
    evaluation under the negative evaluation side). net_is_compiled: a side at which
    torch.compile compiled nothing (it fell back to eager) is refused, since the run would
    go eager there; with dynamic_shapes a graph serves many sides, so only a warm-up that
    compiled nothing at all is refused."""
    config, sides = plan.config, plan.sides()
    generator = torch.Generator(device="cpu").manual_seed(0)

    def images_of(size: int, side: int) -> torch.Tensor:
        images = torch.randint(0, 256, (size, 3, side, side), dtype=torch.uint8, generator=generator)
        return images.to(device).contiguous(memory_format=torch.channels_last)

    labels = torch.zeros((config.batch_per_device, 1), dtype=torch.int64, device=device)
    seconds: dict[int, float] = {}
    graphs_before, steps = compiled_graphs(), 0
    with leaves_no_trace(step):
        step.model.train()
        for side in sides:
            start, graphs = time.perf_counter(), compiled_graphs()
            with At("warm-up", side, config.batch_per_device):
                for call in range(calls_at_a_side(step, calls_per_side)):
                    if call == 0 and isinstance(step.optimizer, SAM):
                        step.optimizer.steps = step.optimizer.interval - 1     # next: two passes
                    step(images_of(config.batch_per_device, config.train_resolution), labels, side)
                    steps += 1
                _sync(device)
            seconds[side] = time.perf_counter() - start
            if net_is_compiled and not dynamic_shapes and compiled_graphs() == graphs:
                raise RuntimeError(
                    f"torch.compile compiled nothing at {side} px during the warm-up: the step "
                    f"would run eagerly at that size inside the timed region (torch._dynamo "
                    f"recompile_limit {torch._dynamo.config.recompile_limit}; the schedule has "
                    f"{len(sides)} sizes). {RECOMPILE_ADVICE}")
        if net_is_compiled and dynamic_shapes and compiled_graphs() == graphs_before:
            raise RuntimeError("torch.compile (dynamic shapes) compiled nothing during the warm-up: "
                               f"the step would run eagerly. {RECOMPILE_ADVICE}")
        seconds[-config.eval_resolution] = evaluation_forward(step, eval_batches, images_of, device)
    log(f"warm-up before run_start: {len(sides)} training sizes "
        f"({', '.join(str(s) for s in sides)} px) and evaluation at {config.eval_resolution} px, "
        f"{sum(seconds.values()):.1f} s, synthetic batches, {steps} recipe steps"
        + (f"; torch.compile compiled {compiled_graphs() - graphs_before} graph(s)" if net_is_compiled else ""))
    return seconds


def evaluation_forward(step: RecipeStep, eval_batches: list[int], images_of: Callable[[int, int], torch.Tensor],
                       device: torch.device) -> float:
    """The evaluated model's forward at each evaluation batch size, as `evaluate` runs it
    (eval mode, eagerly, under autocast); returns the seconds it took."""
    model, side = step.eval_model, step.config.eval_resolution
    was_training = model.training
    model.eval()
    start = time.perf_counter()
    with torch.no_grad(), step.autocast(), At("warm-up evaluation", side, max(eval_batches, default=0)):
        for size in eval_batches:
            model(step.normalize(images_of(size, side)))
        _sync(device)
    model.train(was_training)
    return time.perf_counter() - start


def warm_up_loaders(train_loader: Loader, val_loader: Loader, log: Callable[[str], None] = print) -> float:
    """One pass over each loader (built with the run's pipelines on the synthetic files);
    returns the seconds it took, almost all of it numba compiling the pipelines (or loading
    them: its line says how many compilations and loads).

    Each FFCV epoch allocates its batch buffers (on a GPU, pinned host memory: about 1 GiB
    per loader for ImageNet's 500 px images at batch 256, mostly the decoder's scratch
    space). Freed, torch keeps pinned blocks for a later request of the same power-of-two
    size, so the run's first epoch and first evaluation can take this warm-up's blocks
    instead of pinning new memory inside the timed region. Hence: the synthetic files'
    largest images are the splits' (prepare.SyntheticSplit); the evaluation pass runs while
    the training epoch holds its buffers, as in a run, so both sets of blocks exist; and a
    garbage collection at the end frees them, because the frames of numba's compilation
    keep the first epoch of a pipeline alive in reference cycles."""
    start, (folder, loaded) = time.perf_counter(), compile_cache.on_disk()
    with compile_cache.compilations() as compiled:
        training = one_epoch(train_loader)
        try:
            next(training)
            _exhaust(one_epoch(val_loader))     # one_epoch: its thread has ended after it
            _exhaust(training)
        finally:
            training.close()
    gc.collect()
    seconds = time.perf_counter() - start
    log(f"loader warm-up before run_start: the pipelines read once on synthetic images, {seconds:.1f} s "
        f"(numba: {compiled.count} compilations"
        + (f", {compile_cache.on_disk()[1] - loaded} functions loaded from {folder})" if folder else ")"))
    return seconds


def _exhaust(batches: Iterable[object]) -> None:
    for _ in batches:
        pass


def compiled_graphs() -> int:
    """Graphs torch.compile has compiled in this process so far (all models)."""
    from torch._dynamo.utils import counters
    return counters["stats"]["unique_graphs"]


def compiled(net: torch.nn.Module, cache_dir: Path, sizes: int, cuda_graphs: bool = False,
             dynamic: bool = False) -> torch.nn.Module:
    """torch.compile with static shapes, room for `sizes` input sizes; Inductor's on-disk
    cache under cache_dir, so that runs 2-5 of a campaign (new processes) reuse what run 1
    compiled. A cache folder the user chose (TORCHINDUCTOR_CACHE_DIR set to anything but
    torch's default) is kept. Either is refused when others could write it (private_folder).
    Each size is one more compilation of the same forward; past torch._dynamo's
    recompile_limit (8) torch runs the new sizes eagerly with only a warning, and Mild's
    schedule has 13 sizes: its 5 largest, 40% of the run, would not be compiled.
    cuda_graphs: mode reduce-overhead, each size's forward and backward replayed as CUDA
    graphs, which pays most where the step is launch-bound (small sides).
    dynamic: graphs with symbolic sizes instead (dynamic=True), compiled again only where a
    size changes a guard. What each costs and gains: docs/timing-and-warmup.md."""
    import os

    from torch._inductor.runtime.cache_dir_utils import default_cache_dir
    torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, sizes)
    chosen = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    if chosen is None or os.path.abspath(chosen) == os.path.abspath(default_cache_dir()):
        # torch writes its default into the variable the first time it looks it up
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(inductor_folder(cache_dir))
    refuse_untrusted(Path(os.environ["TORCHINDUCTOR_CACHE_DIR"]), "TorchInductor's compiled code")
    make_private(Path(os.environ["TORCHINDUCTOR_CACHE_DIR"]))
    # torch.compile of a module returns a module (OptimizedModule), typed as any callable
    if not cuda_graphs:
        return cast(torch.nn.Module, torch.compile(net, dynamic=dynamic))
    return StepMarked(cast(torch.nn.Module, torch.compile(net, dynamic=dynamic, mode="reduce-overhead")))


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
