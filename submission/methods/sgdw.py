"""SGD with decoupled weight decay (Loshchilov & Hutter), as Composer's DecoupledSGDW.

Every step each weight is multiplied by (1 - weight_decay * lr_t / lr_0) before the
momentum update: the decay follows the LR schedule but is not multiplied by the LR
(Mild: weight_decay 5e-4, momentum 0.875, no nesterov, no dampening, one group).
"""
from __future__ import annotations

import torch


class DecoupledSGDW(torch.optim.SGD):
    def __init__(self, params, lr: float, momentum: float, weight_decay: float):
        super().__init__(params, lr=lr, momentum=momentum, weight_decay=0.0)
        for group in self.param_groups:
            group["decoupled_weight_decay"] = weight_decay
            group["initial_lr"] = lr

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            factor = 1.0 - group["decoupled_weight_decay"] * group["lr"] / group["initial_lr"]
            params = [p for p in group["params"] if p.grad is not None]
            if params and factor != 1.0:
                torch._foreach_mul_(params, factor)
        return super().step(closure)
