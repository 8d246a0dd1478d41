# GENERATED from solutions/05_matmul/matmul.py by `make exercises`: edit only inside the BEGIN/END SOLUTION regions.
"""Exercise 05: C = A @ B, six numbered kernels from naive to Hopper's tensor cores, as a PyTorch op.

The kernels are in matmul_*.cu (one file a version; matmul_internal.cuh what they share), the C++ op
in matmul.cpp; this file builds them (cached), registers the shape function, and exposes the Python API.
"""
import torch

from grader.build import load_library

lib = load_library(__file__)

VERSIONS = {1: "matmul_kernel1", 2: "matmul_kernel2", 3: "matmul_kernel3", 4: "matmul_kernel4",
            5: "matmul_kernel5", 6: "matmul_kernel6"}


def matmul(A: torch.Tensor, B: torch.Tensor, version: int = 4) -> torch.Tensor:
    """A (M, K) @ B (K, N) -> C (M, N) on the GPU, computed by matmul_kernel<version>: float32 in strict
    float32 (versions 1-4) or on TF32 tensor cores (5, and 6 on Hopper); bfloat16 on BF16 tensor cores
    (5 and 6 only), C in bfloat16 as torch.matmul returns it. Versions 4 to 6 also take batches:
    A (b, M, K) @ B (b, K, N) -> C (b, M, N)."""
    return lib.ops.matmul(A, B, int(version))


@torch.library.register_fake(lib.qualname("matmul"))
def _matmul_fake(A, B, version=4):
    torch._check(A.dim() in (2, 3) and B.dim() == A.dim(), lambda: "A and B must both be 2-D or both 3-D")
    torch._check(A.dim() == 2 or version >= 4, lambda: f"A is a 3-D batch {list(A.shape)}: versions 4 to 6 take it")
    torch._check(A.dim() == 2 or A.shape[0] == B.shape[0], lambda: f"A's batch size must match B's: {A.shape} and {B.shape}")
    torch._check(A.shape[-1] == B.shape[-2], lambda: f"A's columns must match B's rows: {A.shape} and {B.shape}")
    return A.new_empty((*A.shape[:-1], B.shape[-1]))
