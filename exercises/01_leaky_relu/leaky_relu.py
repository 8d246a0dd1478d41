# GENERATED from solutions/01_leaky_relu/leaky_relu.py by `make exercises`: edit only inside the BEGIN/END SOLUTION regions.
"""Exercise 01: LeakyReLU as a PyTorch op with autograd, and as an nn.Module.

The kernels are in leaky_relu.cu, the C++ op in leaky_relu.cpp; this file builds them (cached),
registers the backward and the shape function, and exposes the Python API.
"""
import torch

from grader.build import load_library

lib = load_library(__file__)


def leaky_relu(x: torch.Tensor, negative_slope: float = 0.01, inplace: bool = False) -> torch.Tensor:
    """y = x where x > 0, negative_slope * x elsewhere. `negative_slope` reaches the kernel by value;
    `inplace`, as F.leaky_relu's, writes y into x and returns x (leaky_relu_)."""
    if inplace:
        return leaky_relu_(x, negative_slope)
    return lib.ops.leaky_relu(x, float(negative_slope))


def leaky_relu_backward(grad_output: torch.Tensor, x: torch.Tensor, negative_slope: float) -> torch.Tensor:
    return lib.ops.leaky_relu_backward(grad_output, x, float(negative_slope))


# Shapes for tracing (torch.compile, opcheck): outputs are new contiguous tensors like x.
@torch.library.register_fake(lib.qualname("leaky_relu"))
def _leaky_relu_fake(x, negative_slope):
    return x.new_empty(x.shape)


@torch.library.register_fake(lib.qualname("leaky_relu_backward"))
def _leaky_relu_backward_fake(grad_output, x, negative_slope):
    # the op's own shape check (course::check_same): a fake without it traces a wrong shape
    torch._check(grad_output.shape == x.shape, lambda: f"grad_output must have the same shape as x ({list(x.shape)}), "
                 f"but has shape {list(grad_output.shape)}")
    return x.new_empty(x.shape)


def _setup_context(ctx, inputs, output):
    x, negative_slope = inputs
    ctx.save_for_backward(x)
    ctx.negative_slope = negative_slope


def _backward(ctx, grad_output):
    (x,) = ctx.saved_tensors
    return leaky_relu_backward(grad_output, x, ctx.negative_slope), None


torch.library.register_autograd(lib.qualname("leaky_relu"), _backward, setup_context=_setup_context)


class _LeakyReLUInPlace(torch.autograd.Function):
    """x overwritten with its LeakyReLU. The backward reads the result, not x: for a slope of 0 or more
    the result is positive exactly where x was, so the backward kernel gives the same gradient from it,
    and no copy of x is kept. PyTorch's in-place LeakyReLU has the same rule and refuses a negative slope
    under autograd; so does this one."""

    @staticmethod
    def forward(ctx, x, negative_slope):
        x.copy_(leaky_relu(x, negative_slope))
        ctx.mark_dirty(x)
        ctx.save_for_backward(x)
        ctx.negative_slope = negative_slope
        return x

    @staticmethod
    def backward(ctx, grad_output):
        (y,) = ctx.saved_tensors
        torch._check(ctx.negative_slope >= 0, lambda: f"leaky_relu_: the backward of the in-place LeakyReLU reads "
                     f"its result, which a negative_slope ({ctx.negative_slope}) makes ambiguous; call the "
                     "out-of-place leaky_relu (inplace=False)")
        return leaky_relu_backward(grad_output, y, ctx.negative_slope), None


def leaky_relu_(x: torch.Tensor, negative_slope: float = 0.01) -> torch.Tensor:
    """In place, as F.leaky_relu_ and nn.LeakyReLU(inplace=True): x holds the result and is returned."""
    return _LeakyReLUInPlace.apply(x, float(negative_slope))


class LeakyReLU(torch.nn.Module):
    """Drop-in for torch.nn.LeakyReLU."""

    def __init__(self, negative_slope: float = 0.01, inplace: bool = False):
        super().__init__()
        self.negative_slope, self.inplace = negative_slope, inplace

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return leaky_relu(x, self.negative_slope, self.inplace)

    def extra_repr(self) -> str:
        return f"negative_slope={self.negative_slope}" + (", inplace=True" if self.inplace else "")
