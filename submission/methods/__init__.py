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
                    (loaders/run_loaders.py hands it to loaders/torchvision_loader.py)

Not in a published recipe (docs/cpu-augment.md):
trivialaugment      one PIL operation per image in place of RandAugment, where RandAugment acts

Each method declares what the harness knows of it besides its code in a torch-free module of
declarations/ (method.py): its settings class, which settings.Settings lists, and its `Method`
record, which `ALL` lists below. The settings, the configuration and every verb that resolves
one then need no torch, which the methods' code imports (seconds on one CPU).
"""
from __future__ import annotations

from .declarations.blurpool import BLURPOOL
from .declarations.colout import COLOUT
from .declarations.ema import EMA
from .declarations.loss import LABEL_SMOOTHING, LOSS
from .declarations.mixup import MIXUP
from .declarations.progressive_resize import PROGRESSIVE_RESIZE
from .declarations.randaugment import RANDAUGMENT
from .declarations.sam import SAM
from .declarations.sgdw import SGDW
from .declarations.stochastic_depth import STOCHASTIC_DEPTH
from .declarations.trivialaugment import TRIVIALAUGMENT
from .method import Method

# Composer counts channels-last memory as an algorithm (ChannelsLast); here it is the model's
# memory format (model.py), declared with the methods so that the logs name it among them
CHANNELS_LAST = Method("channels_last", False, lambda c: "channels last")

# every method, in the order the logs and `settings` name them
ALL: tuple[Method, ...] = (
    BLURPOOL,
    CHANNELS_LAST,
    COLOUT,
    EMA,
    LABEL_SMOOTHING,
    LOSS,
    MIXUP,
    PROGRESSIVE_RESIZE,
    RANDAUGMENT,
    SAM,
    SGDW,
    STOCHASTIC_DEPTH,
    TRIVIALAUGMENT,
)


def problems(config: object) -> list[str]:
    """What the methods a configuration uses say its settings cannot do together."""
    return [problem for problem in (method.problem_of(config) for method in ALL) if problem]
