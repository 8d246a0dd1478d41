# GENERATED from solutions/07_conv_transpose2d/conv_transpose2d.py by `make exercises`: edit only inside the BEGIN/END SOLUTION regions.
"""Exercise 07: transposed 2-D convolution (NCHW, with groups), a gather and an implicit GEMM, as a PyTorch op.

The kernel is in conv_transpose2d.cu, the C++ op in conv_transpose2d.cpp; this file builds them
(cached), registers the shape function and exposes the Python API (and an nn.Module). Forward only.
"""
from __future__ import annotations

import math

import torch

from grader.build import load_library

lib = load_library(__file__)


def _pair(v) -> list[int]:
    """An int means the same value for height and width; a pair passes through (and is checked in C++)."""
    return [int(v), int(v)] if isinstance(v, int) else [int(e) for e in v]


def conv_transpose2d(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None, stride=1, padding=0,
                     output_padding=0, groups: int = 1, dilation=1, version: int = 2) -> torch.Tensor:
    """Like torch.nn.functional.conv_transpose2d (same argument order): x (N, Cin, H, W), weight
    (Cin, Cout / groups, kh, kw), bias (Cout,) or None. version 1 runs the gather kernel, version 2
    the implicit GEMM."""
    return lib.ops.conv_transpose2d(x, weight, bias, _pair(stride), _pair(padding), _pair(output_padding),
                                    int(groups), _pair(dilation), int(version))


def output_size(size: int, k: int, stride: int, pad: int, output_pad: int, dil: int) -> int:
    return (size - 1) * stride - 2 * pad + dil * (k - 1) + output_pad + 1


# Shapes for tracing (torch.compile, opcheck): a new contiguous (N, Cout, Ho, Wo) tensor, Cout =
# weight.shape[1] * groups.
@torch.library.register_fake(lib.qualname("conv_transpose2d"))
def _conv_transpose2d_fake(x, weight, bias, stride, padding, output_padding, groups, dilation, version):
    ho = output_size(x.shape[2], weight.shape[2], stride[0], padding[0], output_padding[0], dilation[0])
    wo = output_size(x.shape[3], weight.shape[3], stride[1], padding[1], output_padding[1], dilation[1])
    return x.new_empty((x.shape[0], weight.shape[1] * groups, ho, wo))


class ConvTranspose2d(torch.nn.Module):
    """Forward-only drop-in for torch.nn.ConvTranspose2d (zero padding): weight (in_channels,
    out_channels / groups, kh, kw)."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0, output_padding=0,
                 groups: int = 1, bias: bool = True, dilation=1, device=None, dtype=None):
        super().__init__()
        if in_channels % groups or out_channels % groups:
            raise ValueError(f"groups ({groups}) must divide in_channels ({in_channels}) and out_channels ({out_channels})")
        kh, kw = _pair(kernel_size)
        self.stride, self.padding, self.dilation = _pair(stride), _pair(padding), _pair(dilation)
        self.output_padding, self.groups = _pair(output_padding), groups
        factory = {"device": device, "dtype": dtype}
        self.weight = torch.nn.Parameter(torch.empty(in_channels, out_channels // groups, kh, kw, **factory))
        self.bias = torch.nn.Parameter(torch.empty(out_channels, **factory)) if bias else None
        # torch.nn.ConvTranspose2d's default initialisation: fan_in = weight.shape[1] * kh * kw
        bound = 1 / math.sqrt(out_channels // groups * kh * kw)
        torch.nn.init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            torch.nn.init.uniform_(self.bias, -bound, bound)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return conv_transpose2d(x, self.weight, self.bias, self.stride, self.padding, self.output_padding, self.groups,
                                self.dilation)

    def extra_repr(self) -> str:
        return (f"{self.weight.shape[0]}, {self.weight.shape[1] * self.groups}, kernel_size={tuple(self.weight.shape[2:])}, "
                f"stride={self.stride}, padding={self.padding}, output_padding={self.output_padding}, "
                f"groups={self.groups}, dilation={self.dilation}, bias={self.bias is not None}")
