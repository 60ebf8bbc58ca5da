"""torch.distributed set-up for processes started by torchrun (NCCL on GPUs, gloo on CPU)."""
from __future__ import annotations

import datetime
import os
from dataclasses import dataclass
from typing import TypeVar, cast

import torch
import torch.distributed as dist

from . import heartbeat

Sent = TypeVar("Sent")      # what a rank sends: any picklable object

# A rank that waits longer than this for its peers fails instead of hanging: the bound for a
# peer that is slow but alive. A node lost is found sooner by its silence (heartbeat.py).
COLLECTIVE_TIMEOUT = datetime.timedelta(minutes=10)
_beating: list[heartbeat.Heartbeat] = []     # this node's heartbeat, in a run of several nodes


@dataclass
class Context:
    rank: int
    local_rank: int
    world_size: int
    device: torch.device

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def setup(device_type: str, lost_node_seconds: float) -> Context:
    """This process's rank and device, its process group joined; on several nodes, this node's
    heartbeat started first, so that a node lost while the ranks meet is found too."""
    rank = int(os.environ.get("RANK", 0))
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    world_size = int(os.environ.get("WORLD_SIZE", 1))
    if device_type == "cuda":
        if not torch.cuda.is_available():
            raise RuntimeError("device=cuda but torch sees no GPU (check the driver, "
                               "CUDA_VISIBLE_DEVICES, or run with device=cpu)")
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    else:
        device = torch.device("cpu")
    if world_size > 1 and not dist.is_initialized():
        beat = heartbeat.start(lost_node_seconds)
        _beating.extend([beat] if beat else [])
        os.environ.setdefault("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1")
        dist.init_process_group("nccl" if device_type == "cuda" else "gloo",
                                timeout=COLLECTIVE_TIMEOUT,
                                device_id=device if device_type == "cuda" else None)
    return Context(rank, local_rank, world_size, device)


def all_reduce_sum(tensor: torch.Tensor) -> torch.Tensor:
    if dist.is_initialized():
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    return tensor


@torch.no_grad()
def average_buffers(module: torch.nn.Module) -> None:
    """Average floating-point buffers (BatchNorm running statistics) over ranks.

    DDP broadcasts rank 0's buffers at each forward, then every rank updates them with
    its own batch: after the last step (and in an EMA of them) the ranks disagree.
    Averaging before evaluation makes every rank score the same model.
    """
    if not dist.is_initialized():
        return
    buffers = [b for b in module.buffers() if b.is_floating_point()]
    for buffer in buffers:
        dist.all_reduce(buffer, op=dist.ReduceOp.SUM)
    torch._foreach_div_(buffers, float(dist.get_world_size()))


def agree_to_stop(nonfinite_loss: bool, out_of_time: bool, device: torch.device) -> tuple[bool, bool]:
    """(some rank's loss is non-finite, rank 0's clock says the time is up), the same answer
    on every rank, so that all ranks leave the training loop at the same step. Only rank
    0's clock counts: clocks of different hosts (or processes) need not agree."""
    if not dist.is_initialized():
        return nonfinite_loss, out_of_time
    flags = torch.tensor([float(nonfinite_loss), float(out_of_time and dist.get_rank() == 0)],
                         device=device)
    dist.all_reduce(flags, op=dist.ReduceOp.MAX)
    return bool(flags[0]), bool(flags[1])


def broadcast_object(obj: Sent, src: int = 0) -> Sent:
    if not dist.is_initialized():
        return obj
    holder = [obj]
    dist.broadcast_object_list(holder, src=src)
    return holder[0]


def all_gather_object(obj: Sent) -> list[Sent]:
    """Every rank's `obj`, in rank order (a list of one without a process group)."""
    if not dist.is_initialized():
        return [obj]
    gathered: list[Sent | None] = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, obj)
    return cast(list[Sent], gathered)          # each filled with a rank's


def cleanup() -> None:
    """The run has ended on this node: its peers no longer wait for its heartbeat."""
    while _beating:
        _beating.pop().finish()
    if dist.is_initialized():
        dist.destroy_process_group()
