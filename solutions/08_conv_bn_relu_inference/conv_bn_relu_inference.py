"""Exercise 08: Conv2d + BatchNorm2d (eval) + ReLU in one kernel, for inference.

The kernels are in conv_bn_relu_inference.cu, the C++ op in conv_bn_relu_inference.cpp; this file
builds them (cached), registers the op's shape function, and exposes the Python API. Version 1 runs
in strict fp32, version 2 on TF32 tensor cores; by default the one PyTorch's own convolution would
take (torch.backends.cudnn.allow_tf32).
"""
from __future__ import annotations

import torch

from grader.build import load_library
from grader.conv_args import pair as _pair, resolve_padding

lib = load_library(__file__)


def default_version(x: torch.Tensor) -> int:
    """The version `conv_bn_relu_inference` runs when none is named: 2 (TF32 tensor cores) where PyTorch
    itself would let cuDNN convolve in TF32 (torch.backends.cudnn.allow_tf32, its default True) for a
    float32 x on a GPU of compute capability 8.0 or newer; else 1 (strict fp32)."""
    if (torch.backends.cudnn.allow_tf32 and x.dtype == torch.float32 and x.is_cuda
            and torch.cuda.get_device_capability(x.device) >= (8, 0)):
        return 2
    return 1


def conv_bn_relu_inference(x, weight, bias, bn_weight, bn_bias, running_mean, running_var, eps: float = 1e-5,
                           stride=1, padding=0, dilation=1, version: int | None = None) -> torch.Tensor:
    """relu(F.batch_norm(F.conv2d(x, weight, bias, stride, padding, dilation), running_mean, running_var,
    bn_weight, bn_bias, training=False, eps=eps)) in one kernel (padding numbers, "valid" or "same", as
    F.conv2d takes it: grader.conv_args). Not differentiable (inference only).
    version 1: strict fp32 (float32 or float64); version 2: the convolution on TF32 tensor cores (float32,
    compute capability 8.0+); None: as PyTorch's flag torch.backends.cudnn.allow_tf32 says (default_version)."""
    if version is None:
        version = default_version(x)
    x, padding = resolve_padding(x, weight, stride, padding, dilation)
    return lib.ops.conv_bn_relu_inference(x, weight, bias, bn_weight, bn_bias, running_mean, running_var, float(eps),
                                          _pair(stride), _pair(padding), _pair(dilation), int(version))


@torch.library.register_fake(lib.qualname("conv_bn_relu_inference"))
def _fake(x, weight, bias, bn_weight, bn_bias, running_mean, running_var, eps, stride, padding, dilation, version):
    # the op's shape checks (conv_bn_relu_inference.cpp): a fake without them traces a wrong shape
    for name, v, least in (("stride", stride, 1), ("padding", padding, 0), ("dilation", dilation, 1)):
        torch._check(len(v) == 2 and min(v) >= least, lambda: f"{name} must be 2 values >= {least}, got {v}")
    xs, ws = list(x.shape), list(weight.shape)
    torch._check(x.dim() == 4 and min(xs[1:]) > 0, lambda: f"x must have 4 dimensions, at least one channel and a "
                 f"non-zero height and width, but has shape {xs}")
    torch._check(weight.dim() == 4 and ws[1] == xs[1] and min(ws) > 0, lambda: f"weight must be a non-empty "
                 f"[K, {xs[1]}, R, S] (x's channels in dim 1, groups=1), but has shape {ws}")
    torch._check(all(n + 2 * p >= d * (k - 1) + 1 for n, p, d, k in zip(xs[2:], padding, dilation, ws[2:])),
                 lambda: f"x of shape {xs} is smaller than the (dilated) kernel {ws} plus padding")
    torch._check(eps > 0, lambda: f"eps must be positive, got {eps}")
    k = ws[0]
    for name, t in (("bias", bias), ("bn_weight", bn_weight), ("bn_bias", bn_bias), ("running_mean", running_mean),
                    ("running_var", running_var)):
        torch._check(t is None or (t.dim() == 1 and t.shape[0] == k),
                     lambda: f"{name} must have shape [{k}] (one value per output channel), but has {list(t.shape)}")
    p = (x.shape[2] + 2 * padding[0] - dilation[0] * (weight.shape[2] - 1) - 1) // stride[0] + 1
    q = (x.shape[3] + 2 * padding[1] - dilation[1] * (weight.shape[3] - 1) - 1) // stride[1] + 1
    return x.new_empty((x.shape[0], k, p, q))


class ConvBNReLUInference(torch.nn.Module):
    """nn.Sequential(Conv2d, BatchNorm2d, ReLU) in eval mode, as one kernel: build it with
    `ConvBNReLUInference.from_modules(conv, bn)` (it keeps references to their parameters and buffers).
    Runs the default version (TF32 tensor cores where torch.backends.cudnn.allow_tf32 allows them, as
    torch.nn.Conv2d)."""

    def __init__(self, conv: torch.nn.Conv2d, bn: torch.nn.BatchNorm2d):
        super().__init__()
        if conv.groups != 1 or conv.padding_mode != "zeros":
            raise ValueError("only groups=1 and padding_mode='zeros' are supported")
        if not (bn.affine and bn.track_running_stats):
            raise ValueError("the BatchNorm2d must have affine=True and track_running_stats=True")
        self.conv, self.bn = conv, bn

    @classmethod
    def from_modules(cls, conv: torch.nn.Conv2d, bn: torch.nn.BatchNorm2d) -> "ConvBNReLUInference":
        return cls(conv, bn)

    @torch.no_grad()
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        c, bn = self.conv, self.bn
        return conv_bn_relu_inference(x, c.weight, c.bias, bn.weight, bn.bias, bn.running_mean, bn.running_var,
                                      bn.eps, c.stride, c.padding, c.dilation)
