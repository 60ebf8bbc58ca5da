"""SGD with decoupled weight decay (Loshchilov & Hutter), as Composer's DecoupledSGDW.

Every step each weight is multiplied by (1 - weight_decay * lr_t / lr_0) before the
momentum update: the decay follows the LR schedule but is not multiplied by the LR
(Mild: weight_decay 5e-4, momentum 0.875, no nesterov, no dampening, one group).

fused=True uses torch's fused SGD kernel, which also takes a GradScaler's scale and
inf/NaN flag as tensors (`_step_supports_amp_scaling`): a step with fp16 autocast then
needs no host synchronisation, where a GradScaler in front of an unfused optimizer reads
the flag on the host every step (`found_inf.item()`) to decide whether to step. The
decay is skipped on the device as well when the flag is set, as the step is.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable

import torch


class DecoupledSGDW(torch.optim.SGD):
    def __init__(self, params: Iterable[torch.nn.Parameter], lr: float, momentum: float, weight_decay: float,
                 fused: bool = False):
        super().__init__(params, lr=lr, momentum=momentum, weight_decay=0.0, fused=fused or None)
        for group in self.param_groups:
            group["decoupled_weight_decay"] = weight_decay
            group["initial_lr"] = lr

    # torch's Optimizer declares step as two overloads (closure or none); SGD's, untyped, is one
    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None) -> float | None:  # type: ignore[override]
        # set by GradScaler.step on a fused optimizer: 1.0 where the scaled gradients overflowed
        found_inf = getattr(self, "found_inf", None)
        for group in self.param_groups:
            decay = group["decoupled_weight_decay"] * group["lr"] / group["initial_lr"]
            params = [p for p in group["params"] if p.grad is not None]
            if not params or decay == 0.0:
                continue
            if found_inf is None:
                torch._foreach_mul_(params, 1.0 - decay)
            else:
                torch._foreach_mul_(params, 1.0 - decay * (1.0 - found_inf.to(params[0].device)))
        return super().step(closure)
