# GENERATED from solutions/09_conv_bn_relu_training/conv_bn_relu_training.py by `make exercises`: edit only inside the BEGIN/END SOLUTION regions.
"""Exercise 09: Conv2d + BatchNorm2d + ReLU, fused, for training: a torch.autograd.Function and a
drop-in nn.Module (`FusedConvBNReLU`) with the parameters and buffers of Conv2d + BatchNorm2d.

The kernels are in conv_bn_relu_training.cu, the C++ ops in conv_bn_relu_training.cpp; this file
builds them (cached), registers their shapes, and wires the forward and backward ops into autograd.
Version 1 runs in strict fp32; version 2 runs the three convolutions (forward, grad_input, grad_weight)
on TF32 tensor cores; by default the one PyTorch's own convolutions would take
(torch.backends.cudnn.allow_tf32).
"""
from __future__ import annotations

import torch

from grader.build import load_library
from grader.conv_args import pair as _pair, resolve_padding

lib = load_library(__file__)


class ConvBNReLUFunction(torch.autograd.Function):
    """y = relu(batchnorm(conv2d(x, weight, bias))); batch statistics when `training`, else running ones.

    In training the running statistics (and num_batches_tracked) are updated in place, as
    nn.BatchNorm2d does. Differentiable in x, weight, bias, bn_weight and bn_bias. `version` (1 or 2)
    is the ops' version, for the forward and the backward alike.
    """

    @staticmethod
    def forward(ctx, x, weight, bias, bn_weight, bn_bias, running_mean, running_var, num_batches_tracked,
                training, momentum, eps, stride, padding, dilation, version):
        # BEGIN SOLUTION
        # TODO: call lib.ops.conv_bn_relu_forward (keep_z only when some input needs a gradient: the
        # TODO: backward needs z), save what the backward needs with ctx.save_for_backward and keep
        # TODO: the non-tensor settings (the version too) on ctx; return y.
        # TODO: (the reference solution takes about 7 lines)
        raise NotImplementedError("exercises/09_conv_bn_relu_training/conv_bn_relu_training.py: line 31 is not implemented yet")
        # END SOLUTION

    @staticmethod
    def backward(ctx, grad_y):
        # BEGIN SOLUTION
        # TODO: call lib.ops.conv_bn_relu_backward with the saved tensors and the forward's version, and
        # TODO: return one gradient per input of forward (None for the buffers and settings, and for bias
        # TODO: when it was None).
        # TODO: (the reference solution takes about 7 lines)
        raise NotImplementedError("exercises/09_conv_bn_relu_training/conv_bn_relu_training.py: line 46 is not implemented yet")
        # END SOLUTION


def default_version(x: torch.Tensor) -> int:
    """The version `conv_bn_relu` runs when none is named: 2 (TF32 tensor cores) where PyTorch itself
    would let cuDNN convolve in TF32 (torch.backends.cudnn.allow_tf32, its default True) for a float32 x
    on a GPU of compute capability 8.0 or newer; else 1 (strict fp32)."""
    if (torch.backends.cudnn.allow_tf32 and x.dtype == torch.float32 and x.is_cuda
            and torch.cuda.get_device_capability(x.device) >= (8, 0)):
        return 2
    return 1


def conv_bn_relu(x, weight, bias, bn_weight, bn_bias, running_mean, running_var, num_batches_tracked,
                 training: bool = True, momentum: float | None = 0.1, eps: float = 1e-5, stride=1, padding=0,
                 dilation=1, version: int | None = None) -> torch.Tensor:
    """The functional form: relu(F.batch_norm(F.conv2d(x, weight, bias, stride, padding, dilation),
    running_mean, running_var, bn_weight, bn_bias, training, momentum, eps)), in our own kernels (padding
    numbers, "valid" or "same", as F.conv2d takes it: grader.conv_args).
    version 1: strict fp32 (float32 or float64); version 2: the forward's and the backward's convolutions
    on TF32 tensor cores (float32, compute capability 8.0+); None: as PyTorch's flag
    torch.backends.cudnn.allow_tf32 says (default_version)."""
    if version is None:
        version = default_version(x)
    x, padding = resolve_padding(x, weight, stride, padding, dilation)
    return ConvBNReLUFunction.apply(x, weight, bias, bn_weight, bn_bias, running_mean, running_var,
                                    num_batches_tracked, bool(training), None if momentum is None else float(momentum),
                                    float(eps), _pair(stride), _pair(padding), _pair(dilation), int(version))


# Shapes for tracing (torch.compile, opcheck), with the ops' shape checks (conv_bn_relu_training.cpp): a fake
# without them traces a wrong shape.
def _out_shape(x, weight, stride, padding, dilation, **params):
    """The convolution's output shape [N, K, P, Q], after conv_shape's checks and check_param's for `params`."""
    for name, v, least in (("stride", stride, 1), ("padding", padding, 0), ("dilation", dilation, 1)):
        torch._check(len(v) == 2 and min(v) >= least, lambda: f"{name} must be 2 values >= {least}, got {v}")
    xs, ws = list(x.shape), list(weight.shape)
    torch._check(x.dim() == 4 and min(xs[1:]) > 0, lambda: f"x must have 4 dimensions, at least one channel and a "
                 f"non-zero height and width, but has shape {xs}")
    torch._check(weight.dim() == 4 and ws[1] == xs[1] and min(ws) > 0, lambda: f"weight must be a non-empty "
                 f"[K, {xs[1]}, R, S] (x's channels in dim 1, groups=1), but has shape {ws}")
    torch._check(all(n + 2 * p >= d * (k - 1) + 1 for n, p, d, k in zip(xs[2:], padding, dilation, ws[2:])),
                 lambda: f"x of shape {xs} is smaller than the (dilated) kernel {ws} plus padding")
    k = ws[0]
    for name, t in params.items():
        torch._check(t is None or (t.dim() == 1 and t.shape[0] == k),
                     lambda: f"{name} must have shape [{k}] (one value per output channel), but has {list(t.shape)}")
    p = (x.shape[2] + 2 * padding[0] - dilation[0] * (weight.shape[2] - 1) - 1) // stride[0] + 1
    q = (x.shape[3] + 2 * padding[1] - dilation[1] * (weight.shape[3] - 1) - 1) // stride[1] + 1
    return [x.shape[0], k, p, q]


@torch.library.register_fake(lib.qualname("conv_bn_relu_forward"))
def _forward_fake(x, weight, bias, bn_weight, bn_bias, running_mean, running_var, num_batches_tracked, training,
                  momentum, eps, stride, padding, dilation, keep_z, version):
    shape = _out_shape(x, weight, stride, padding, dilation, bias=bias, bn_weight=bn_weight, bn_bias=bn_bias,
                       running_mean=running_mean, running_var=running_var)
    torch._check(eps > 0, lambda: f"eps must be positive, got {eps}")
    torch._check(num_batches_tracked.numel() == 1, lambda: f"num_batches_tracked must be a one-element int64 tensor, "
                 f"but has shape {list(num_batches_tracked.shape)}")
    torch._check(not training or shape[0] * shape[2] * shape[3] > 1, lambda: f"x: expected more than 1 value per "
                 f"channel when training, got x of shape {list(x.shape)}")
    torch._check(not training or momentum is None or 0 <= momentum <= 1,
                 lambda: f"momentum must be in [0, 1] or None, got {momentum}")
    z = x.new_empty(shape) if (training or keep_z) else x.new_empty((0,))
    return x.new_empty(shape), z, x.new_empty((shape[1],)), x.new_empty((shape[1],))


@torch.library.register_fake(lib.qualname("conv_bn_relu_backward"))
def _backward_fake(grad_y, x, weight, z, y, bn_weight, save_mean, save_invstd, training, stride, padding, dilation,
                   version):
    shape = _out_shape(x, weight, stride, padding, dilation, bn_weight=bn_weight, save_mean=save_mean,
                       save_invstd=save_invstd)
    for name, t in (("grad_y", grad_y), ("z", z), ("y", y)):
        torch._check(list(t.shape) == shape, lambda: f"{name} must be the forward's output {shape}, but has shape "
                     f"{list(t.shape)}")
    k = shape[1]
    return x.new_empty(x.shape), x.new_empty(weight.shape), x.new_empty((k,)), x.new_empty((k,)), x.new_empty((k,))


class FusedConvBNReLU(torch.nn.Module):
    """Drop-in for nn.Sequential(nn.Conv2d(...), nn.BatchNorm2d(...), nn.ReLU()) (groups=1, zero padding).

    The parameters and buffers live in `self.conv` (an nn.Conv2d) and `self.bn` (an nn.BatchNorm2d), so
    they have those modules' names, shapes and initialisation: conv.weight, conv.bias, bn.weight,
    bn.bias, bn.running_mean, bn.running_var, bn.num_batches_tracked. Their own forwards never run.
    Runs the default version (TF32 tensor cores where torch.backends.cudnn.allow_tf32 allows them, as
    torch.nn.Conv2d).
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0, dilation=1,
                 bias: bool = True, eps: float = 1e-5, momentum: float | None = 0.1, device=None, dtype=None):
        super().__init__()
        self.conv = torch.nn.Conv2d(in_channels, out_channels, kernel_size, stride=stride, padding=padding,
                                    dilation=dilation, bias=bias, device=device, dtype=dtype)
        self.bn = torch.nn.BatchNorm2d(out_channels, eps=eps, momentum=momentum, device=device, dtype=dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        conv, bn = self.conv, self.bn
        return conv_bn_relu(x, conv.weight, conv.bias, bn.weight, bn.bias, bn.running_mean, bn.running_var,
                            bn.num_batches_tracked, training=self.training, momentum=bn.momentum, eps=bn.eps,
                            stride=conv.stride, padding=conv.padding, dilation=conv.dilation)

    # --- interoperability with nn.Sequential(Conv2d, BatchNorm2d, ReLU) ------------------------
    @staticmethod
    def map_sequential_state_dict(state_dict: dict) -> dict:
        """Rename a Sequential's keys ("0.weight", "1.running_mean", ...) to ours ("conv.weight", ...)."""
        prefixes = {"0.": "conv.", "1.": "bn."}
        out = {}
        for key, value in state_dict.items():
            for old, new in prefixes.items():
                if key.startswith(old):
                    out[new + key[len(old):]] = value
                    break
            else:
                raise KeyError(f"unexpected key {key!r}: expected the keys of nn.Sequential(Conv2d, BatchNorm2d, ReLU)")
        return out

    def load_sequential_state_dict(self, state_dict: dict, strict: bool = True):
        return self.load_state_dict(self.map_sequential_state_dict(state_dict), strict=strict)

    @classmethod
    def from_modules(cls, conv: torch.nn.Conv2d, bn: torch.nn.BatchNorm2d) -> "FusedConvBNReLU":
        """A fused module with the same settings and a copy of the state of `conv` and `bn`."""
        if conv.groups != 1 or conv.padding_mode != "zeros":
            raise ValueError("only groups=1 and padding_mode='zeros' are supported")
        if not (bn.affine and bn.track_running_stats):
            raise ValueError("the BatchNorm2d must have affine=True and track_running_stats=True")
        p = conv.weight
        fused = cls(conv.in_channels, conv.out_channels, conv.kernel_size, conv.stride, conv.padding, conv.dilation,
                    conv.bias is not None, bn.eps, bn.momentum, device=p.device, dtype=p.dtype)
        fused.conv.load_state_dict(conv.state_dict())
        fused.bn.load_state_dict(bn.state_dict())
        fused.train(conv.training)
        return fused

    @classmethod
    def from_sequential(cls, seq: torch.nn.Sequential) -> "FusedConvBNReLU":
        return cls.from_modules(seq[0], seq[1])

    def extra_repr(self) -> str:
        return "fused: relu(bn(conv(x)))"
