"""BlurPool: blur before every strided downsampling (Zhang, "Making CNNs shift-invariant").

Stride-2 convs with at least `min_channels` input channels get a fixed 3x3
[1,2,1]x[1,2,1]/16 depthwise blur (stride 1) in front (a 1x1 conv: the blur strided
instead, see BlurConv2d); max-pools become max (stride 1) followed by a blur with the
pool's stride. In torchvision ResNet-50 that touches 6 convs
(conv2 and downsample of the first block of layer2/3/4; the RGB stem is left alone)
and the stem max-pool.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def blur_kernel(channels: int) -> torch.Tensor:
    taps = torch.tensor([1.0, 2.0, 1.0])
    kernel = torch.outer(taps, taps) / 16.0
    return kernel.expand(channels, 1, 3, 3).clone()


def blur(x: torch.Tensor, kernel: torch.Tensor, stride: int = 1) -> torch.Tensor:
    return F.conv2d(x, kernel.to(dtype=x.dtype), stride=stride, padding=1, groups=x.shape[1])


class BlurConv2d(nn.Module):
    """blur (stride 1) -> the original strided conv.

    A 1x1 conv without padding (the shortcut's downsample) mixes channels at each position
    and the blur mixes positions within each channel, so the two commute: there the blur
    takes the stride and the conv runs at stride 1. Same function up to float rounding,
    but the blur computes and stores a quarter of the positions, at the 256-1024 channel
    inputs where it is most expensive."""

    def __init__(self, conv: nn.Conv2d):
        super().__init__()
        self.conv = conv
        self.blur_stride = 1
        if conv.kernel_size == (1, 1) and conv.padding == (0, 0) and len(set(conv.stride)) == 1:
            self.blur_stride, conv.stride = conv.stride[0], (1, 1)
        self.register_buffer("kernel", blur_kernel(conv.in_channels), persistent=False)

    kernel: torch.Tensor    # a buffer (register_buffer)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(blur(x, self.kernel, stride=self.blur_stride))


class BlurMaxPool2d(nn.Module):
    """max-pool with stride 1 -> blur with the original stride. The blur is depthwise over
    whatever channels arrive, so no channel count has to be guessed at surgery time."""

    def __init__(self, pool: nn.MaxPool2d):
        super().__init__()
        self.kernel_size, self.padding = pool.kernel_size, pool.padding
        self.stride = pool.stride if isinstance(pool.stride, int) else pool.stride[0]
        self.register_buffer("kernel", blur_kernel(1), persistent=False)

    kernel: torch.Tensor    # a buffer (register_buffer)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.max_pool2d(x, self.kernel_size, stride=1, padding=self.padding)
        return blur(x, self.kernel.expand(x.shape[1], 1, 3, 3), stride=self.stride)


def _is_strided(conv: nn.Conv2d) -> bool:
    stride = conv.stride if isinstance(conv.stride, tuple) else (conv.stride,)
    return max(stride) > 1


def apply_blurpool(model: nn.Module, min_channels: int = 16) -> tuple[int, int]:
    """Replace strided convs and max-pools in place; return (convs, pools) replaced.
    Applying it again changes nothing: blurred layers are not wrapped twice."""
    convs = pools = 0
    for parent in list(model.modules()):
        if isinstance(parent, (BlurConv2d, BlurMaxPool2d)):
            continue
        for name, child in list(parent.named_children()):
            if isinstance(child, nn.Conv2d):
                if _is_strided(child) and child.in_channels >= min_channels:
                    setattr(parent, name, BlurConv2d(child))
                    convs += 1
            elif isinstance(child, nn.MaxPool2d):
                setattr(parent, name, BlurMaxPool2d(child))
                pools += 1
    return convs, pools
