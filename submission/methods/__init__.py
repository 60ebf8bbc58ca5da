"""The recipes' speed-up methods, one small module each; none knows about MLPerf.

Mild (and every recipe):
blurpool            anti-aliased downsampling (model surgery, model.py)
loss                BCE-with-logits (sum / batch) or cross-entropy, label smoothing
ema                 exponential moving average of weights and BN statistics
progressive_resize  on-device downscaling of training batches early in training
schedule            step-wise linear warmup + cosine decay
sgdw                SGD with weight decay decoupled from the gradient

Medium / Hot (docs/recipes-medium-hot.md); step.py runs all but RandAugment:
mixup               MixUp of a batch and its mixed (smoothed) targets, drawn per forward pass
sam                 sharpness-aware minimisation around a base optimizer (every k-th step)
stochastic_depth    per-sample / per-block stochastic depth for ResNet Bottlenecks
colout              batch-wise removal of random rows and columns
randaugment         per-image PIL augmentation (Hot), in the torchvision loader's workers
                    (data/run_loaders.py hands it to data/torchvision_loader.py)

Each module declares what the harness knows of it besides its code (`DECLARATIONS`,
method.py); `ALL` below collects them for Config.methods and `bench compare=methods`.
"""
from __future__ import annotations

from . import (blurpool, colout, ema, loss, mixup, progressive_resize, randaugment, sam, sgdw,
               stochastic_depth)
from .method import Method

# Composer counts channels-last memory as an algorithm (ChannelsLast); here it is the model's
# memory format (model.py), declared with the methods so that the logs name it among them
CHANNELS_LAST = Method("channels_last", False, lambda c: "channels last")

# every method, in the order the logs and `settings` name them
ALL: tuple[Method, ...] = (
    *blurpool.DECLARATIONS, CHANNELS_LAST, *ema.DECLARATIONS, *loss.DECLARATIONS,
    *sgdw.DECLARATIONS, *progressive_resize.DECLARATIONS, *mixup.DECLARATIONS, *sam.DECLARATIONS,
    *randaugment.DECLARATIONS, *stochastic_depth.DECLARATIONS, *colout.DECLARATIONS)
