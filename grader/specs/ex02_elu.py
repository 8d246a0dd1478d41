import torch
import torch.nn.functional as F

from grader.verify.checks import ELEMENTWISE_TOL, assert_close
from grader.verify.spec import Check, CheckList
from grader.specs.activation import ActivationSpec


def _grad(g: torch.Tensor, x: torch.Tensor, alpha: float) -> torch.Tensor:
    return torch.where(x > 0, g, g * alpha * torch.exp(x))


class EluSpec(ActivationSpec):
    def checks(self) -> list[Check]:
        checks = CheckList()
        # first in its group, so that its hint is the reason a student reads
        checks.add("forward[accurate near zero]", self._check_near_zero)
        checks += super().checks()
        return checks

    def _check_near_zero(self, ctx) -> None:
        """alpha * (exp(x) - 1) cancels catastrophically for small |x| (relative error ~1e-3 at
        x = -1e-4 in float); expm1 does not. The elementwise fp32 tolerance (1e-5) tells them apart."""
        g = ctx.generator("near zero")
        x = -torch.rand(100_000, generator=g, device="cuda") * 1e-3
        for alpha in self.param_values[:2]:
            y = self._fn(ctx)(x, alpha)
            torch.cuda.synchronize()
            assert_close(y, self.reference(x.double(), alpha), ELEMENTWISE_TOL[torch.float32],
                         f"forward[x in (-1e-3, 0], alpha={alpha}] (hint: expm1)")


# The launchers' branches (grader/verify/paths.py): the kernels' 16-byte loops and scalar ones in every dtype,
# and a tensor past 2^31 elements (the huge checks: float16)
PATHS = {**{f"{op}.{path}": ("float32", "float16", "bfloat16", "float64")
            for op in ("forward", "backward") for path in ("vector16", "scalar")},
         "forward.past_2^31": ("float16",), "backward.past_2^31": ("float16",)}

SPEC = EluSpec(
    exercise="02_elu",
    title="ELU(alpha)",
    module="elu.py",
    module_class="ELU",
    torch_module=torch.nn.ELU,
    paths=PATHS,
    points={"forward": 4, "backward": 2, "input_checks": 1, "autograd": 1, "performance": 2},
    perf_requires=("forward", "backward"),
    solution_vs_baseline=1.0,
    op="elu",
    param="alpha",
    param_values=(1.0, 0.5, 2.5, 0.0, -0.7),  # PyTorch takes any alpha, a negative one too
    reference=lambda x, a: F.elu(x, a),
    reference_grad=_grad,
    kernels=("elu_kernel",),
    backward_kernels=("elu_backward_kernel",),
    baseline=lambda x, a: F.elu(x, a),
    baseline_grad=lambda g, x, a: torch.ops.aten.elu_backward(g, a, 1, 1, False, x),
)
