"""Exercise 06: 2-D convolution (NCHW, with groups) as a PyTorch op, and as an nn.Module.

The kernels are in conv2d.cu, the C++ op in conv2d.cpp; this file builds them (cached), registers
the shape function and exposes the Python API. Forward only: the op has no autograd formula.
"""
from __future__ import annotations

import math

import torch

from grader.build import load_library

lib = load_library(__file__)


def _pair(v) -> list[int]:
    """An int means the same value for height and width; a pair passes through (and is checked in C++)."""
    return [int(v), int(v)] if isinstance(v, int) else [int(e) for e in v]


def default_version(x: torch.Tensor, groups: int = 1) -> int:
    """The version `conv2d` runs when none is named: 3 (TF32 tensor cores) where PyTorch itself would
    let cuDNN use TF32 (torch.backends.cudnn.allow_tf32, its default True) for a float32 x on a GPU of
    compute capability 8.0 or newer, without groups; else 2 (strict fp32, and the depthwise kernel)."""
    if (torch.backends.cudnn.allow_tf32 and groups == 1 and x.dtype == torch.float32 and x.is_cuda
            and torch.cuda.get_device_capability(x.device) >= (8, 0)):
        return 3
    return 2


def conv2d(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None, stride=1, padding=0,
           dilation=1, groups: int = 1, version: int | None = None) -> torch.Tensor:
    """Like torch.nn.functional.conv2d (same argument order): x (N, Cin, H, W), weight
    (Cout, Cin / groups, kh, kw), bias (Cout,) or None. version 1 runs the direct kernel, version 2
    the implicit GEMM (strict fp32; the depthwise kernel where groups == Cin), version 3 the implicit
    GEMM on TF32 tensor cores (float32, groups 1, compute capability 8.0+); None: as PyTorch's flag
    torch.backends.cudnn.allow_tf32 says (default_version)."""
    if version is None:
        version = default_version(x, groups)
    return lib.ops.conv2d(x, weight, bias, _pair(stride), _pair(padding), _pair(dilation), int(groups), int(version))


def output_size(size: int, k: int, stride: int, pad: int, dil: int) -> int:
    return (size + 2 * pad - dil * (k - 1) - 1) // stride + 1


# Shapes for tracing (torch.compile, opcheck): a new contiguous (N, Cout, Ho, Wo) tensor.
@torch.library.register_fake(lib.qualname("conv2d"))
def _conv2d_fake(x, weight, bias, stride, padding, dilation, groups, version):
    ho = output_size(x.shape[2], weight.shape[2], stride[0], padding[0], dilation[0])
    wo = output_size(x.shape[3], weight.shape[3], stride[1], padding[1], dilation[1])
    return x.new_empty((x.shape[0], weight.shape[0], ho, wo))


class Conv2d(torch.nn.Module):
    """Forward-only drop-in for torch.nn.Conv2d (zero padding): weight (out_channels,
    in_channels / groups, kh, kw); runs conv2d's default version (TF32 tensor cores where
    torch.backends.cudnn.allow_tf32 allows them, as torch.nn.Conv2d)."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0, dilation=1,
                 groups: int = 1, bias: bool = True, device=None, dtype=None):
        super().__init__()
        if in_channels % groups or out_channels % groups:
            raise ValueError(f"groups ({groups}) must divide in_channels ({in_channels}) and out_channels ({out_channels})")
        kh, kw = _pair(kernel_size)
        self.stride, self.padding, self.dilation = _pair(stride), _pair(padding), _pair(dilation)
        self.groups = groups
        factory = {"device": device, "dtype": dtype}
        self.weight = torch.nn.Parameter(torch.empty(out_channels, in_channels // groups, kh, kw, **factory))
        self.bias = torch.nn.Parameter(torch.empty(out_channels, **factory)) if bias else None
        bound = 1 / math.sqrt(in_channels // groups * kh * kw)  # torch.nn.Conv2d's default initialisation
        torch.nn.init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            torch.nn.init.uniform_(self.bias, -bound, bound)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return conv2d(x, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)

    def extra_repr(self) -> str:
        return (f"{self.weight.shape[1] * self.groups}, {self.weight.shape[0]}, kernel_size={tuple(self.weight.shape[2:])}, "
                f"stride={self.stride}, padding={self.padding}, dilation={self.dilation}, groups={self.groups}, "
                f"bias={self.bias is not None}")
