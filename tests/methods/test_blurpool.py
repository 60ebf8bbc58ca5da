"""submission.methods.blurpool: which convolutions and pools it blurs, and the blur
itself, against Composer's definition."""
import pytest
import torch
import torchvision

from submission.methods import blurpool

from conftest import mild_model


def test_blurpool_replaces_six_convs_and_the_max_pool():
    model = torchvision.models.resnet50()
    convs, pools = blurpool.apply_blurpool(model)
    assert (convs, pools) == (6, 1)
    blurred = {n for n, m in model.named_modules() if isinstance(m, blurpool.BlurConv2d)}
    assert blurred == {f"layer{i}.0.{c}" for i in (2, 3, 4) for c in ("conv2", "downsample.0")}
    assert isinstance(model.maxpool, blurpool.BlurMaxPool2d)
    assert not isinstance(model.conv1, blurpool.BlurConv2d)   # RGB stem left alone
    out = model(torch.randn(2, 3, 64, 64))
    assert out.shape == (2, 1000)


def test_blurpool_twice_changes_nothing_and_the_pool_blurs_any_width():
    model = mild_model()
    assert blurpool.apply_blurpool(model) == (0, 0)           # mild_model() already blurred
    assert not any(isinstance(m.conv, blurpool.BlurConv2d) for m in model.modules()
                   if isinstance(m, blurpool.BlurConv2d))
    # a pool whose input width is not the last conv's out_channels in traversal order
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.Conv2d(3, 5, 3),
                              torch.nn.MaxPool2d(3, stride=2, padding=1))
    blurpool.apply_blurpool(net)
    out = net[2](torch.ones(1, 8, 9, 9))
    assert out.shape == (1, 8, 5, 5)


@pytest.mark.parametrize("side", [14, 15])
def test_blurred_shortcut_conv_strides_its_blur_and_computes_the_same(side):
    """The downsample's 1x1 stride-2 conv: blurring at stride 2 then a stride-1 conv gives
    what blurring every position then the strided conv gives (Composer's order)."""
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(16, 8, 1, stride=2, bias=False)
    x = torch.randn(2, 16, side, side, dtype=torch.float64)
    conv = conv.double()
    reference = conv(blurpool.blur(x, blurpool.blur_kernel(16).double()))
    blurred = blurpool.BlurConv2d(conv)
    assert (blurred.blur_stride, blurred.conv.stride) == (2, (1, 1))
    out = blurred(x)
    assert out.shape == reference.shape == (2, 8, (side + 1) // 2, (side + 1) // 2)
    assert torch.allclose(out, reference, rtol=0, atol=1e-12)
    three = blurpool.BlurConv2d(torch.nn.Conv2d(16, 8, 3, stride=2, padding=1))
    assert (three.blur_stride, three.conv.stride) == (1, (2, 2))     # a 3x3 conv does not commute


def test_blur_kernel_is_normalised_and_preserves_a_flat_image():
    kernel = blurpool.blur_kernel(4)
    assert kernel.shape == (4, 1, 3, 3) and torch.allclose(kernel.sum((1, 2, 3)), torch.ones(4))
    flat = torch.ones(1, 4, 8, 8)
    blurred = blurpool.blur(flat, kernel)
    assert torch.allclose(blurred[..., 1:-1, 1:-1], flat[..., 1:-1, 1:-1])
