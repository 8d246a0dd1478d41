# GENERATED from solutions/02_elu/elu.py by `make exercises`: edit only inside the BEGIN/END SOLUTION regions.
"""Exercise 02: ELU as a PyTorch op with autograd, and as an nn.Module.

The kernels are in elu.cu, the C++ op in elu.cpp; this file builds them (cached),
registers the backward and the shape function, and exposes the Python API.
"""
import torch

from grader.build import load_library

lib = load_library(__file__)


def elu(x: torch.Tensor, alpha: float = 1.0, inplace: bool = False) -> torch.Tensor:
    """y = x where x > 0, alpha * (exp(x) - 1) elsewhere. `alpha` reaches the kernel by value; `inplace`,
    as F.elu's, writes y into x and returns x (elu_)."""
    if inplace:
        return elu_(x, alpha)
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


class _ELUInPlace(torch.autograd.Function):
    """x overwritten with its ELU. The backward kernel reads x, so where a gradient is wanted a copy of x
    is kept for it (the memory the out-of-place op keeps); without autograd nothing is. (PyTorch's in-place
    ELU reads its result instead and refuses a negative alpha under autograd; this one computes it.)"""

    @staticmethod
    def forward(ctx, x, alpha):
        kept = x.clone() if ctx.needs_input_grad[0] else None
        x.copy_(elu(x, alpha))
        ctx.mark_dirty(x)
        ctx.save_for_backward(kept)
        ctx.alpha = alpha
        return x

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return elu_backward(grad_output, x, ctx.alpha), None


def elu_(x: torch.Tensor, alpha: float = 1.0) -> torch.Tensor:
    """In place, as F.elu_ and nn.ELU(inplace=True): x holds the result and is returned."""
    return _ELUInPlace.apply(x, float(alpha))


class ELU(torch.nn.Module):
    """Drop-in for torch.nn.ELU."""

    def __init__(self, alpha: float = 1.0, inplace: bool = False):
        super().__init__()
        self.alpha, self.inplace = alpha, inplace

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return elu(x, self.alpha, self.inplace)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}" + (", inplace=True" if self.inplace else "")
