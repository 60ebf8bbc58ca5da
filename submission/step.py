"""What a run trains with (`RecipeStep`), built once, here; when, is run_plan.py's `RunPlan`.

The training loop and every bench row use this step and nothing else, so that a figure
about the run is measured on the run's own step.

RecipeStep: the model with the recipe's initialisation, BlurPool and stochastic depth,
the EMA copy, the decoupled SGDW optimizer (inside SAM for Medium and Hot), the loss,
autocast and (fp16 on CUDA) a GradScaler, and the normaliser (`Normalizer`: every loader
hands the step uint8 images, and normalising them is the step's first operation, on the
device); calling it trains one batch at a side: normalise, ColOut, downscale, MixUp,
forward, backward, update. The order of ColOut, resizing and MixUp is Hot's `algorithms`
order in Composer v0.8.0 (ColOut and progressive resizing at AFTER_DATALOADER, once per step;
MixUp at BEFORE_FORWARD, which SAM's closure runs again, so each of its two passes mixes the
un-mixed batch with a draw of its own); label smoothing acts on the batch's own labels
before MixUp mixes the targets (methods/mixup.py). The loop calls `train_on` with the step's
`StepPlan` (run_plan.py): the values the run changes from step to step (learning rate, side,
a scheduled method's value).
"""
from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from .config import Config
from .methods.colout import colout_batch
from .methods.ema import EMA
from .methods.loss import LOSSES
from .methods.mixup import mixing_coefficient, mixup_batch, mixup_loss_fn
from .methods.progressive_resize import resize_batch
from .methods.sam import SAM, sync_context, update
from .methods.sgdw import DecoupledSGDW
from .methods.stochastic_depth import apply_stochastic_depth
from .run_plan import StepPlan

Optimizer = torch.optim.Optimizer | SAM        # SAM wraps the recipe's (methods/sam.py)

IMAGENET_MEAN = (0.485 * 255, 0.456 * 255, 0.406 * 255)
IMAGENET_STD = (0.229 * 255, 0.224 * 255, 0.225 * 255)


class Normalizer:
    """The step's input: uint8 NCHW (channels last), as every loader hands it -> float, ImageNet
    mean/std, on the batch's device."""

    def __init__(self, device: torch.device):
        self.mean = torch.tensor(IMAGENET_MEAN, device=device).view(1, 3, 1, 1)
        self.std = torch.tensor(IMAGENET_STD, device=device).view(1, 3, 1, 1)

    def __call__(self, images: torch.Tensor) -> torch.Tensor:
        out = images.float().sub_(self.mean).div_(self.std)
        return out.contiguous(memory_format=torch.channels_last)


def autocast_dtype(config: Config) -> torch.dtype | None:
    """The dtype the run computes in under autocast; None with precision=fp32."""
    if config.precision != "amp":
        return None
    return torch.bfloat16 if config.amp_dtype == "bf16" else torch.float16


def autocast_for(config: Config, device: torch.device) -> Callable[[], contextlib.AbstractContextManager]:
    """A factory of the run's autocast context (a no-op context with precision=fp32)."""
    dtype = autocast_dtype(config)
    if dtype is None:
        return contextlib.nullcontext
    # including_emulation=False: a V100 "supports" bf16 only by emulation, far slower
    if (dtype == torch.bfloat16 and device.type == "cuda"
            and not torch.cuda.is_bf16_supported(including_emulation=False)):
        raise RuntimeError(f"amp_dtype=bf16 but {torch.cuda.get_device_name(device)} has no bf16 "
                           "support: use amp_dtype=fp16 (the published setting)")
    return lambda: torch.autocast(device.type, dtype=dtype)


def grad_scaler(config: Config, device: torch.device) -> torch.amp.GradScaler | None:
    """A GradScaler for fp16 autocast on CUDA (Composer v0.7's `precision: amp`), else None."""
    fp16_on_cuda = config.precision == "amp" and config.amp_dtype == "fp16" and device.type == "cuda"
    return torch.amp.GradScaler("cuda") if fp16_on_cuda else None


def recipe_optimizer(config: Config, model: nn.Module, device: torch.device) -> Optimizer:
    """The recipe's SGDW at this global batch (torch's fused kernel on CUDA), inside SAM
    when the recipe has it."""
    sgdw = DecoupledSGDW(model.parameters(), lr=config.peak_lr, momentum=config.momentum,
                         weight_decay=config.effective_weight_decay, fused=device.type == "cuda")
    if config.sam_interval:
        return SAM(sgdw, rho=config.sam_rho, epsilon=config.sam_epsilon, interval=config.sam_interval)
    return sgdw


def optimizer_step(net: nn.Module, optimizer: Optimizer, scaler: torch.amp.GradScaler | None,
                   autocast: Callable[[], contextlib.AbstractContextManager], loss_fn: Callable,
                   images: torch.Tensor, labels: torch.Tensor, smoothing: float,
                   before_forward: Callable | None = None) -> torch.Tensor:
    """Forward, backward and update on one batch (a GradScaler only for fp16 on CUDA); a
    SAM optimizer calls the forward and backward once or twice (methods/sam.py).
    before_forward(images, labels) -> (images, loss_fn): what each pass trains on in place
    of (images, loss_fn), called afresh before every forward, as Composer runs
    Event.BEFORE_FORWARD in each call of SAM's closure (MixUp draws anew for each pass)."""
    def forward_backward(sync: bool = True) -> torch.Tensor:
        inputs, pass_loss_fn = before_forward(images, labels) if before_forward else (images, loss_fn)
        with sync_context(net, sync):
            with autocast():
                loss = pass_loss_fn(net(inputs), labels.view(-1), smoothing)
            (scaler.scale(loss) if scaler else loss).backward()
        return loss.detach()

    if isinstance(optimizer, SAM):
        return optimizer.step(forward_backward, scaler)
    optimizer.zero_grad(set_to_none=True)
    loss = forward_backward()
    update(optimizer, scaler)
    return loss


@dataclass
class RecipeStep:
    """Everything one training step of the recipe uses; call it on a uint8 batch."""
    config: Config
    model: nn.Module                 # the weights being trained
    net: nn.Module                   # what the step calls: the model, wrapped in DDP and/or compiled
    ema: EMA | None
    optimizer: Optimizer
    loss_fn: Callable
    autocast: Callable
    scaler: torch.amp.GradScaler | None
    normalize: Normalizer

    def __call__(self, images: torch.Tensor, labels: torch.Tensor, side: int | None = None) -> torch.Tensor:
        """Train on one batch of uint8 images, downscaled to the pinned `side` (None: as
        given). ColOut and the resize once per step (Composer's AFTER_DATALOADER), MixUp
        once per forward pass (BEFORE_FORWARD: twice in a SAM step)."""
        config = self.config
        x = self.normalize(images)
        if config.colout_fraction:
            x = colout_batch(x, config.colout_fraction, config.colout_fraction).contiguous(
                memory_format=torch.channels_last)
        if side is not None:
            x = resize_batch(x, side, config.resize_mode)
        return optimizer_step(self.net, self.optimizer, self.scaler, self.autocast, self.loss_fn,
                              x, labels, config.label_smoothing,
                              before_forward=self.mixup if config.mixup_alpha else None)

    def train_on(self, images: torch.Tensor, labels: torch.Tensor, at: StepPlan) -> torch.Tensor:
        """The loop's step: one batch trained with what the RunPlan scheduled for this step,
        each value set before it (as Composer's Event.BATCH_START), at the side `at.side`."""
        self.set_lr(at.lr)
        return self(images, labels, at.side)

    def mixup(self, images: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, Callable]:
        """One MixUp draw (coefficient, then permutation, as Composer's MixUp.apply) on the
        un-mixed batch: the mixed images and the loss against their mixed targets."""
        mixing = mixing_coefficient(self.config.mixup_alpha)
        mixed, partner_labels, _ = mixup_batch(images, labels.view(-1), mixing)
        return mixed, mixup_loss_fn(self.config.loss, partner_labels, mixing)

    def set_lr(self, lr: float) -> None:
        for group in self.optimizer.param_groups:
            group["lr"] = lr

    def update_average(self, step: int) -> None:
        """After the optimizer step numbered `step` (from 1): the EMA at its cadence."""
        if self.ema:
            self.ema.update(self.model, step)

    @property
    def classes(self) -> int:
        """The classes the model scores: its last layer's outputs."""
        head = self.model.fc
        assert isinstance(head, nn.Linear), "a ResNet's head (model.py)"
        return head.out_features

    @property
    def eval_model(self) -> nn.Module:
        """What evaluation scores: the EMA copy when the recipe keeps one."""
        return self.ema.model if self.ema else self.model

    def with_net(self, net: nn.Module) -> RecipeStep:
        """The same step calling another wrapper of the same model (a compiled one)."""
        return dataclasses.replace(self, net=net)


def build_step(config: Config, num_classes: int, device: torch.device, *,
               ddp: bool = False, local_rank: int = 0,
               optimizer: Callable[[nn.Module], Optimizer] | None = None) -> RecipeStep:
    """The recipe step of `config` on `device`. ddp: the model wrapped in
    DistributedDataParallel (the process group is up). optimizer: another optimizer in
    place of the recipe's, given the model (the bench's per-method comparison)."""
    from .model import model_from_config  # torchvision: seconds that `settings` and `project` need not pay
    model = model_from_config(config, num_classes)
    if config.stochastic_depth_rate:
        apply_stochastic_depth(model, config.stochastic_depth_rate, config.stochastic_depth_method,
                               config.stochastic_depth_distribution)
    model = model.to(device)
    ema = (EMA(model, config.ema_half_life_batches, config.ema_update_every_batches)
           if config.ema_half_life_batches > 0 else None)
    net: nn.Module = model
    if ddp:
        from torch.nn.parallel import DistributedDataParallel
        # block-wise stochastic depth skips whole blocks: their parameters get no gradient
        skips_blocks = config.stochastic_depth_rate > 0 and config.stochastic_depth_method == "block"
        net = DistributedDataParallel(model, device_ids=[local_rank] if device.type == "cuda" else None,
                                      find_unused_parameters=skips_blocks)
    return RecipeStep(
        config=config, model=model, net=net, ema=ema,
        optimizer=optimizer(model) if optimizer else recipe_optimizer(config, model, device),
        loss_fn=LOSSES[config.loss], autocast=autocast_for(config, device),
        scaler=grad_scaler(config, device), normalize=Normalizer(device))
