"""Exercise 04: a K x K filter over an image or a batch of images, as a PyTorch op.

The kernel is in stencil2d.cu, the C++ op in stencil2d.cpp; this file builds them (cached),
registers the shape function, and exposes the Python API.
"""
import torch

from grader.build import load_library

lib = load_library(__file__)


def stencil2d(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """out[..., y, x] = sum_{dy, dx} weight[dy, dx] * x[..., y + dy - K//2, x + dx - K//2], zero-padded.

    x: (H, W) or (B, H, W) float32 CUDA; weight: (K, K) float32 CUDA, K odd, K <= 7. The output has
    x's shape. This is cross-correlation, like F.conv2d(x[:, None], weight[None, None], padding=K // 2).
    """
    return lib.ops.stencil2d(x, weight)


@torch.library.register_fake(lib.qualname("stencil2d"))
def _stencil2d_fake(x, weight):
    return x.new_empty(x.shape)


class Stencil2d(torch.nn.Module):
    """A fixed K x K filter applied to (H, W) or (B, H, W) images."""

    def __init__(self, weight: torch.Tensor):
        super().__init__()
        self.register_buffer("weight", weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return stencil2d(x, self.weight)
