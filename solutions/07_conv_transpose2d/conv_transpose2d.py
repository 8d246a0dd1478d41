"""Exercise 07: transposed 2-D convolution (NCHW, groups = 1), a gather and an implicit GEMM, as a PyTorch op.

The kernel is in conv_transpose2d.cu, the C++ op in conv_transpose2d.cpp; this file builds them
(cached), registers the shape function and exposes the Python API. Forward only.
"""
from __future__ import annotations

import torch

from grader.build import load_library

lib = load_library(__file__)


def _pair(v) -> list[int]:
    """An int means the same value for height and width; a pair passes through (and is checked in C++)."""
    return [int(v), int(v)] if isinstance(v, int) else [int(e) for e in v]


def conv_transpose2d(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None, stride=1, padding=0,
                     output_padding=0, dilation=1, version: int = 2) -> torch.Tensor:
    """Like torch.nn.functional.conv_transpose2d with groups=1: x (N, Cin, H, W), weight
    (Cin, Cout, kh, kw), bias (Cout,) or None. version 1 runs the gather kernel, version 2 the
    implicit GEMM."""
    return lib.ops.conv_transpose2d(x, weight, bias, _pair(stride), _pair(padding), _pair(output_padding),
                                    _pair(dilation), int(version))


def output_size(size: int, k: int, stride: int, pad: int, output_pad: int, dil: int) -> int:
    return (size - 1) * stride - 2 * pad + dil * (k - 1) + output_pad + 1


# Shapes for tracing (torch.compile, opcheck): a new contiguous (N, Cout, Ho, Wo) tensor.
@torch.library.register_fake(lib.qualname("conv_transpose2d"))
def _conv_transpose2d_fake(x, weight, bias, stride, padding, output_padding, dilation, version):
    ho = output_size(x.shape[2], weight.shape[2], stride[0], padding[0], output_padding[0], dilation[0])
    wo = output_size(x.shape[3], weight.shape[3], stride[1], padding[1], output_padding[1], dilation[1])
    return x.new_empty((x.shape[0], weight.shape[1], ho, wo))
