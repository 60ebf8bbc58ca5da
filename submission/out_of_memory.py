"""An allocation that failed: where it happened and which setting to change.

torch raises torch.OutOfMemoryError on a GPU; on the CPU its allocator raises a plain
RuntimeError ("DefaultCPUAllocator: can't allocate memory", torch 2.14). The training
code marks where it is with `At(...)`; the first mark an out-of-memory error passes
through is kept on the exception, so that `reason` (the run_stop reason) and `advice`
(printed by the rank that hit it) can say where it happened. The campaign finds the
printed line in the run's output (`reported`).
"""
from __future__ import annotations

import re
from types import TracebackType

import torch

from .config import Config

CPU_ALLOCATOR = re.compile(r"DefaultCPUAllocator: (can't allocate memory|not enough memory)")
MARK = "ran out of memory on rank"     # begins every line `advice` gives; `reported` finds it


def is_out_of_memory(exc: BaseException) -> bool:
    """torch.OutOfMemoryError, or the CPU allocator's error, here or in what caused it
    (torch.compile wraps errors raised while it compiles)."""
    seen = set()
    link: BaseException | None = exc
    while link is not None and id(link) not in seen:
        seen.add(id(link))
        if isinstance(link, torch.OutOfMemoryError) or (
                isinstance(link, RuntimeError) and CPU_ALLOCATOR.search(str(link))):
            return True
        link = link.__cause__ or link.__context__
    return False


class At:
    """`with At("training", side, batch, step):` an out-of-memory error leaving the block
    carries this place (phase: warm-up, warm-up evaluation, training, evaluation)."""

    def __init__(self, phase: str, side: int, batch: int, step: int = 0):
        self.phase, self.side, self.batch, self.step = phase, side, batch, step

    def __enter__(self) -> At:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        if exc is not None and place_of(exc) is None and is_out_of_memory(exc):
            exc.out_of_memory_at = self  # type: ignore[attr-defined]  # a mark on the exception: place_of reads it

    @property
    def evaluation(self) -> bool:
        return self.phase.endswith("evaluation")

    def __str__(self) -> str:
        batch = f"{self.batch} images per device"
        if self.phase == "warm-up":
            return f"in the warm-up at {self.side} px ({batch}), before run_start"
        if self.phase == "warm-up evaluation":
            return f"in the warm-up's evaluation at {self.side} px ({batch}), before run_start"
        if self.phase == "training":
            return f"at training step {self.step} at {self.side} px ({batch})"
        return f"in the evaluation after step {self.step} at {self.side} px ({batch})"


def place_of(exc: BaseException) -> At | None:
    return getattr(exc, "out_of_memory_at", None)


def reason(exc: BaseException) -> str:
    """The run_stop reason: short, saying where."""
    place = place_of(exc)
    return f"out of memory {place}" if place else "out of memory (the traceback says where)"


def advice(exc: BaseException, config: Config, device: torch.device, rank: int) -> str:
    """One line: where, how much memory there is, which setting to lower and how the
    campaign takes the new value."""
    place = place_of(exc)
    where = str(place) if place else ("outside the warm-up, training steps and evaluations "
                                      "(the traceback says where)")
    lines = [f"{MARK} {rank} ({_memory(device)}) {where}."]
    if place is None or not place.evaluation:
        smaller = max(1, config.batch_per_device // 2)
        lines.append(
            f"Lower batch_per_device (now {config.batch_per_device}, global batch "
            f"{config.global_batch_size} over {config.world_size} process(es)), e.g. "
            f"batch_per_device={smaller}; the learning rate follows the global batch "
            f"(lr {config.lr:g} x global batch / lr_reference_batch {config.lr_reference_batch}), "
            "so this is a new campaign: add new_campaign=true (this one is archived under "
            "results/archive/) or another results_dir=.")
    if place is None or place.evaluation:
        now = config.eval_batch
        current = (f"now {config.eval_batch_size}" if config.eval_batch_size else
                   f"now 0: batch_per_device's {config.batch_per_device}")
        lines.append(f"Lower eval_batch_size ({current}), e.g. eval_batch_size={max(1, now // 2)}; "
                     "it does not change training, so the same command with it resumes the "
                     "campaign.")
    return " ".join(lines)


def _memory(device: torch.device) -> str:
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        return f"{device}: {props.name}, {props.total_memory / 2**30:.1f} GiB"
    import psutil
    return f"cpu: {psutil.virtual_memory().total / 2**30:.1f} GiB of host memory"


def reported(output: str) -> str | None:
    """The first out-of-memory line a rank printed in a run's output, or None."""
    return next((line.strip() for line in output.splitlines() if MARK in line), None)
