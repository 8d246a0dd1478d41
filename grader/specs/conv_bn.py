"""What exercises 08 (the fused inference layer) and 09 (the fused training layer) share: the layers
both grade (ResNet-like, and one with odd sizes), and PyTorch's Conv2d and BatchNorm2d built from a
module option's values for their `from_modules` checks."""
from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Shape:
    name: str
    n: int
    c: int
    h: int
    w: int
    k: int
    r: int
    s: int
    stride: tuple = (1, 1)
    padding: tuple = (0, 0)
    dilation: tuple = (1, 1)
    bias: bool = False


# ResNet-like layers, plus one with odd sizes, uneven strides/dilations and channel counts off 64.
SHAPES = (
    Shape("resnet-3x3", 8, 64, 56, 56, 64, 3, 3, padding=(1, 1)),
    Shape("stem-7x7-s2", 4, 3, 112, 112, 64, 7, 7, stride=(2, 2), padding=(3, 3)),
    Shape("down-3x3-s2", 8, 128, 28, 28, 256, 3, 3, stride=(2, 2), padding=(1, 1)),
    Shape("1x1-bias", 8, 256, 14, 14, 64, 1, 1, bias=True),
    Shape("deep-3x3", 16, 512, 7, 7, 512, 3, 3, padding=(1, 1)),
    Shape("odd-dilated-bias", 3, 17, 13, 11, 19, 3, 3, stride=(1, 2), padding=(2, 1), dilation=(2, 1), bias=True),
)


def conv_bn_modules(g: torch.Generator, options: dict, cin: int = 5, cout: int = 6):
    """nn.Conv2d(3x3, padding 2) and nn.BatchNorm2d built with `options` (bias, padding, padding_mode, eps,
    momentum, affine, track_running_stats), on the GPU, every parameter and buffer drawn from `g` (a CPU
    generator): BatchNorm's weight of both signs, its running variance positive. With padding "same" the
    kernel is 2x3: its height's d (k - 1) is odd, so PyTorch puts one more zero row after x's end than
    before it."""
    padding = options.get("padding", 2)
    conv = torch.nn.Conv2d(cin, cout, (2, 3) if padding == "same" else 3, padding=padding, bias=options["bias"],
                           padding_mode=options["padding_mode"])
    bn = torch.nn.BatchNorm2d(cout, eps=options["eps"], momentum=options["momentum"], affine=options["affine"],
                              track_running_stats=options["track_running_stats"])
    with torch.no_grad():
        conv.weight.copy_(torch.randn(conv.weight.shape, generator=g) * 0.3)
        if conv.bias is not None:
            conv.bias.copy_(torch.randn(cout, generator=g) * 0.2)
        if bn.affine:
            signs = 1 - 2 * (torch.arange(cout) % 2)
            bn.weight.copy_((0.5 + torch.rand(cout, generator=g)) * signs)
            bn.bias.copy_(torch.randn(cout, generator=g) * 0.3)
        if bn.track_running_stats:
            bn.running_mean.copy_(torch.randn(cout, generator=g) * 0.3)
            bn.running_var.copy_(0.5 + torch.rand(cout, generator=g))
            bn.num_batches_tracked.fill_(3)
    return conv.cuda(), bn.cuda()
