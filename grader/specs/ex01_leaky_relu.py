import torch
import torch.nn.functional as F

from grader.specs.activation import ActivationSpec


def _grad(g: torch.Tensor, x: torch.Tensor, negative_slope: float) -> torch.Tensor:
    return torch.where(x > 0, g, g * negative_slope)


# The launchers' branches (grader/verify/paths.py): the kernels' 16-byte loops and scalar ones in every dtype,
# and a tensor past 2^31 elements (the huge checks: float16)
PATHS = {**{f"{op}.{path}": ("float32", "float16", "bfloat16", "float64")
            for op in ("forward", "backward") for path in ("vector16", "scalar")},
         "forward.past_2^31": ("float16",), "backward.past_2^31": ("float16",)}

SPEC = ActivationSpec(
    exercise="01_leaky_relu",
    title="LeakyReLU(negative_slope)",
    module="leaky_relu.py",
    module_class="LeakyReLU",
    torch_module=torch.nn.LeakyReLU,
    paths=PATHS,
    points={"forward": 4, "backward": 2, "input_checks": 1, "autograd": 1, "performance": 2},
    perf_requires=("forward", "backward"),
    solution_vs_baseline=1.0,
    op="leaky_relu",
    param="negative_slope",
    param_values=(0.01, 0.2, 0.0, -0.5, 1.7),
    reference=lambda x, p: F.leaky_relu(x, p),
    reference_grad=_grad,
    kernels=("leaky_relu_kernel",),
    backward_kernels=("leaky_relu_backward_kernel",),
    baseline=lambda x, p: F.leaky_relu(x, p),
    baseline_grad=lambda g, x, p: torch.ops.aten.leaky_relu_backward(g, x, p, False),
)
