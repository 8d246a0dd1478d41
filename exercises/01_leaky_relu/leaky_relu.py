# GENERATED from solutions/01_leaky_relu/leaky_relu.py by `make exercises`: edit only inside the BEGIN/END SOLUTION regions.
"""Exercise 01: LeakyReLU as a PyTorch op with autograd, and as an nn.Module.

The kernels are in leaky_relu.cu, the C++ op in leaky_relu.cpp; this file builds them (cached),
registers the backward and the shape function, and exposes the Python API.
"""
import torch

from grader.build import load_library

lib = load_library(__file__)


def leaky_relu(x: torch.Tensor, negative_slope: float = 0.01) -> torch.Tensor:
    """y = x where x > 0, negative_slope * x elsewhere. `negative_slope` reaches the kernel by value."""
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


class LeakyReLU(torch.nn.Module):
    """Drop-in for torch.nn.LeakyReLU (without inplace)."""

    def __init__(self, negative_slope: float = 0.01):
        super().__init__()
        self.negative_slope = negative_slope

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return leaky_relu(x, self.negative_slope)

    def extra_repr(self) -> str:
        return f"negative_slope={self.negative_slope}"
