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
    # the op's shape checks (stencil2d.cpp): a fake without them traces a wrong shape
    torch._check(x.dim() in (2, 3), lambda: f"x must be an image (H, W) or a batch of images (B, H, W), but has "
                 f"shape {list(x.shape)}")
    torch._check(weight.dim() == 2 and weight.shape[0] == weight.shape[1],
                 lambda: f"weight must be a square K x K filter, but has shape {list(weight.shape)}")
    torch._check(weight.shape[0] % 2 == 1 and weight.shape[0] <= 7,
                 lambda: f"weight must be K x K with K odd and at most 7, but K = {weight.shape[0]}")
    return x.new_empty(x.shape)


class Stencil2d(torch.nn.Module):
    """A fixed K x K filter applied to (H, W) or (B, H, W) images."""

    def __init__(self, weight: torch.Tensor):
        super().__init__()
        self.register_buffer("weight", weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return stencil2d(x, self.weight)
