"""Exercise 02: ELU as a PyTorch op with autograd, and as an nn.Module.

The kernels are in elu.cu, the C++ op in elu.cpp; this file builds them (cached),
registers the backward and the shape function, and exposes the Python API.
"""
import torch

from grader.build import load_library

lib = load_library(__file__)


def elu(x: torch.Tensor, alpha: float = 1.0) -> torch.Tensor:
    """y = x where x > 0, alpha * (exp(x) - 1) elsewhere. `alpha` reaches the kernel by value."""
    return lib.ops.elu(x, float(alpha))


def elu_backward(grad_output: torch.Tensor, x: torch.Tensor, alpha: float) -> torch.Tensor:
    return lib.ops.elu_backward(grad_output, x, float(alpha))


# Shapes for tracing (torch.compile, opcheck): outputs are new contiguous tensors like x.
@torch.library.register_fake(lib.qualname("elu"))
def _elu_fake(x, alpha):
    return x.new_empty(x.shape)


@torch.library.register_fake(lib.qualname("elu_backward"))
def _elu_backward_fake(grad_output, x, alpha):
    # the op's own shape check (course::check_same): a fake without it traces a wrong shape
    torch._check(grad_output.shape == x.shape, lambda: f"grad_output must have the same shape as x ({list(x.shape)}), "
                 f"but has shape {list(grad_output.shape)}")
    return x.new_empty(x.shape)


def _setup_context(ctx, inputs, output):
    x, alpha = inputs
    ctx.save_for_backward(x)
    ctx.alpha = alpha


def _backward(ctx, grad_output):
    (x,) = ctx.saved_tensors
    return elu_backward(grad_output, x, ctx.alpha), None


torch.library.register_autograd(lib.qualname("elu"), _backward, setup_context=_setup_context)


class ELU(torch.nn.Module):
    """Drop-in for torch.nn.ELU (without inplace)."""

    def __init__(self, alpha: float = 1.0):
        super().__init__()
        self.alpha = alpha

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return elu(x, self.alpha)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}"
