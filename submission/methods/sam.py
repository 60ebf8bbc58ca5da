"""Sharpness-aware minimisation (Foret et al. 2020) as Composer v0.8.0's SAMOptimizer.

Every `interval`-th call of `step` (counting from 1: calls 10, 20, ... with interval 10;
Composer's `(global_step + 1) % interval == 0`) is a SAM step:
  1. gradient g at the weights w;
  2. ascend: e = g * rho / (||g|| + epsilon), ||.|| the L2 norm over all parameters
     together, w <- w + e;
  3. gradient g' at w + e;
  4. restore w <- w - e (the gradients keep g'), then the base optimizer's ordinary step
     with g' at w (for DecoupledSGDW: decay of w, momentum, update).
The other calls are one gradient and one base step. The step count advances on every
call, skipped steps included. Medium: rho 0.5, epsilon 1e-12, interval 10; Hot: interval 5
(composer/yamls/recipes/resnet50_{medium,spicy}.yaml; the algorithm's defaults are
rho 0.05, epsilon 1e-12, interval 1).

The closure: `closure(sync)` runs forward and backward once (the loss multiplied by the
scaler's scale when there is one) and returns the unscaled loss; `step` clears the
gradients before each call. In Composer the closure is the trainer's whole
`_train_microbatches`, so what runs at BEFORE_FORWARD (MixUp's coefficient and
permutation) draws afresh for the second pass of a SAM step, from the un-mixed batch;
the closure of submission.step's `optimizer_step` does the same (its `before_forward`).

AMP (how Composer handled the GradScaler): SAMOptimizer sets
`_step_supports_amp_closure`, so the trainer uses its `ClosureGradScaler`
(composer/trainer/_scaler.py), whose `step` wraps the closure: before each pass it
forces the scaler's per-optimizer stage back to READY and empties the gradients, after
it the gradients are unscaled (the trainer unscales at the end of `_train_microbatches`)
and checked for inf/NaN; a pass that overflowed on any rank (`all_gather_object`) makes
the closure return None. SAM then skips the whole step: an overflow in the first pass
means no ascent and no update; in the second pass the ascent is undone and there is no
update. `update()` backs the scale off from the last pass's inf flag, all-reduced over
ranks. So the ascent uses the *unscaled* gradient and the scale is updated once per
step. Here the same with torch's stock GradScaler: the first pass's gradients are
unscaled by hand (1 / scale, one host read per SAM step, which Composer also paid in
`.item()`), an overflow there is recorded by handing the inf gradients to
`scaler.step` (which skips the update and records the flag), and the second pass goes
through `scaler.step` / `scaler.update` as a plain step does.

DDP (whether the gradients are all-reduced): Composer calls the first closure with
`ddp_sync=False`, which runs the pass inside `DistributedDataParallel.no_sync()`, so the
gradient used for the ascent (and its norm) is each rank's own, never all-reduced: every
GPU ascends to its own w + e (per-device "m-sharpness", as in the SAM paper). The second
closure uses the default `ddp_sync=True`: the gradient at w + e is all-reduced as in any
step (the gradients were zeroed in between, so the reduction is of g' alone), and every
rank takes the same base step from the same w. The closure of submission.step's
`optimizer_step` does the same with a DDP-wrapped net: `closure(False)` runs under
`net.no_sync()` (`sync_context`).

Composer quirk not kept: its SAMOptimizer tests the closure's loss for truth (`if
loss:`), so a loss of exactly 0 also skipped the update.
"""
from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist


class SAM:
    """Wraps `base` (e.g. DecoupledSGDW): `step(closure, scaler)` does SAM every
    `interval`-th call and a plain step otherwise."""

    def __init__(self, base: torch.optim.Optimizer, rho: float = 0.05, epsilon: float = 1e-12,
                 interval: int = 1):
        if rho < 0:
            raise ValueError(f"rho must be >= 0, got {rho}")
        if interval < 1:
            raise ValueError(f"interval must be >= 1, got {interval}")
        self.base = base
        self.rho = rho
        self.epsilon = epsilon
        self.interval = interval
        self.steps = 0                     # calls of step() so far (Composer's global_step)

    @property
    def param_groups(self) -> list[dict[str, Any]]:
        return self.base.param_groups

    def params(self) -> list[torch.Tensor]:
        return [p for group in self.base.param_groups for p in group["params"]]

    def zero_grad(self, set_to_none: bool = True) -> None:
        self.base.zero_grad(set_to_none=set_to_none)

    def state_dict(self) -> dict:
        """The base optimizer's state and the step count, as torch.optim.Optimizer's."""
        return {"base": self.base.state_dict(), "steps": self.steps}

    def load_state_dict(self, state: dict) -> None:
        self.base.load_state_dict(state["base"])
        self.steps = state["steps"]

    def next_is_sam(self) -> bool:
        """Whether the next call of step() is a two-pass SAM step."""
        return (self.steps + 1) % self.interval == 0

    def step(self, closure: Callable[[bool], torch.Tensor],
             scaler: torch.amp.GradScaler | None = None) -> torch.Tensor:
        """One optimizer step; returns the loss at the current weights (first pass)."""
        try:
            if self.next_is_sam():
                return self._sam_step(closure, scaler)
            self.zero_grad()
            loss = closure(True)
            update(self.base, scaler)
            return loss
        finally:
            self.steps += 1

    @torch.no_grad()
    def _sam_step(self, closure: Callable[[bool], torch.Tensor], scaler: torch.amp.GradScaler | None) -> torch.Tensor:
        self.zero_grad()
        with torch.enable_grad():
            loss = closure(False)                          # per-rank gradient at w
        grads = [p.grad for p in self.params() if p.grad is not None]
        inv_scale = 1.0 / scaler.get_scale() if scaler is not None else 1.0
        norm = torch.linalg.vector_norm(
            torch.stack([torch.linalg.vector_norm(g.float()) for g in grads])) * inv_scale
        if scaler is not None and _any_rank(not torch.isfinite(norm).item(), norm.device):
            # overflow in the first pass: no ascent, no update; the scaler sees the inf
            # gradients, skips the base step and backs the scale off
            update(self.base, scaler)
            return loss
        factor = self.rho * inv_scale / (norm + self.epsilon)
        ascent: list[tuple[torch.Tensor, torch.Tensor]] = []
        for p in self.params():
            if p.grad is None:
                continue
            e = p.grad * factor.to(p.grad.dtype)
            p.add_(e)
            ascent.append((p, e))
        self.zero_grad()
        with torch.enable_grad():
            closure(True)                                  # all-reduced gradient at w + e
        for p, e in ascent:
            p.sub_(e)                                      # back to w, keeping that gradient
        update(self.base, scaler)
        return loss


def update(optimizer: torch.optim.Optimizer, scaler: torch.amp.GradScaler | None) -> None:
    """The optimizer's step on the gradients in place, through the GradScaler when there is
    one (which skips it, and backs the scale off, when they hold an inf or a NaN)."""
    if scaler is not None:
        scaler.step(optimizer)
        scaler.update()
    else:
        optimizer.step()


def _any_rank(flag: bool, device: torch.device) -> bool:
    """`flag` OR-ed over the ranks of the default process group (just `flag` without one)."""
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return flag
    t = torch.tensor([float(flag)], device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return bool(t.item())


def sync_context(net: torch.nn.Module, sync: bool) -> contextlib.AbstractContextManager:
    """`net.no_sync()` for an unsynchronised pass of a DDP-wrapped net, else nothing."""
    no_sync = getattr(net, "no_sync", None)
    if not sync and no_sync is not None:
        return no_sync()
    return contextlib.nullcontext()
