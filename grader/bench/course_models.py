"""ResNet-50 and MobileNetV2 (grader.bench.models) run by the course's own kernels, and checked against
PyTorch's model with the same weights: issue 20's "a ResNet-50 and a MobileNetV2 built from the
course's modules run forward and backward and match PyTorch's outputs and gradients".

`CourseLayers(root)` is a layer factory over the exercise folders under `root` (solutions/ by
default; a student's exercises/ works the same): each ConvBN block of the model becomes a
`CourseConvBN`, with the parameters and buffers of PyTorch's block (so state dicts load across),
run by

- 09's FusedConvBNReLU (training, and eval with a gradient) and 08's one-kernel inference fusion
  (eval without a gradient), where the block is a dense convolution followed by BatchNorm and ReLU:
  ResNet-50's stem and the first two convolutions of each bottleneck;
- 10's conv2d (cuDNN through the course's own plans, with autograd and groups), then PyTorch's
  BatchNorm2d and activation, everywhere else: 08 and 09 take groups=1 only (their kernels are dense
  implicit GEMMs) and always end in ReLU, so MobileNetV2's depthwise convolutions, its ReLU6 layers,
  and the blocks without an activation (a bottleneck's last convolution, its shortcut, MobileNetV2's
  projections) go through 10.

The fully connected layer, pooling, the residual additions and BatchNorm outside 08/09 stay
PyTorch's. `compare(model_name)` runs both models (training step, then eval) in strict float32 and
returns the errors; `check_course_kernels` asserts that no PyTorch convolution ran in the course
model and that the course's ops did. tests/test_course_models.py and scripts/course_models.py use them.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import nn

from grader import env
from grader.bench.models import MODELS, ConvBN

# ops are run by: 09 (training; eval with a gradient) and 08 (eval, no gradient), or 10 + PyTorch's BatchNorm2d
FUSED, CONV = "09 FusedConvBNReLU / 08 inference", "10 conv2d + BatchNorm2d"


class CourseLayers:
    """The layer factory of grader.bench.models over the course's modules in `root` (default solutions/)."""

    def __init__(self, root: str | Path | None = None):
        from grader.specs import by_exercise, import_exercise_module

        self.root = Path(root) if root is not None else env.REPO / "solutions"

        def load(exercise: str):
            spec = by_exercise(exercise)
            return import_exercise_module(self.root / spec.exercise, spec)

        self.ex10, self.ex09, self.ex08 = load("10"), load("09"), load("08")

    def conv_bn(self, cin, cout, kernel_size, stride=1, padding=0, groups=1, act=None) -> "CourseConvBN":
        return CourseConvBN(self, cin, cout, kernel_size, stride, padding, groups, act)

    def linear(self, cin, cout) -> nn.Module:
        return nn.Linear(cin, cout)  # no course exercise covers a linear layer with autograd


class CourseConvBN(ConvBN):
    """A ConvBN block run by the course's kernels (the module docstring says which, `route` names it).
    Its own `conv` and `bn` hold the parameters and buffers; the 09 and 08 modules it calls are built
    over those very modules, and kept out of the module tree (plain attributes), so the state dict
    has PyTorch's block's names only."""

    def __init__(self, course: CourseLayers, cin, cout, kernel_size, stride=1, padding=0, groups=1, act=None):
        super().__init__(cin, cout, kernel_size, stride, padding, groups, act)
        self._conv2d = course.ex10.conv2d
        # 09 and 08 compute relu(bn(conv(x))) with dense convolutions only (groups=1; any stride, padding
        # and dilation): a grouped or depthwise layer, ReLU6 or no activation goes through 10 instead
        self.route = FUSED if act == "relu" and groups == 1 else CONV
        if self.route == FUSED:
            # 09's module, its conv and bn replaced by ours (built on meta: nothing allocated twice)
            fused = course.ex09.FusedConvBNReLU(cin, cout, kernel_size, stride, padding, bias=False, device="meta")
            fused.conv, fused.bn = self.conv, self.bn
            self.__dict__["_fused"] = fused
            self.__dict__["_inference"] = course.ex08.ConvBNReLUInference.from_modules(self.conv, self.bn)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.route == FUSED:
            wants_grad = torch.is_grad_enabled() and (x.requires_grad or any(p.requires_grad for p in self.parameters()))
            if self.training or wants_grad:
                self._fused.train(self.training)
                return self._fused(x)
            return self._inference(x)
        c = self.conv
        return self.activate(self.bn(self._conv2d(x, c.weight, c.bias, c.stride, c.padding, c.dilation, c.groups)))

    def extra_repr(self) -> str:
        return f"act={self.act}, route={self.route}"


def course_model(model_name: str, root: str | Path | None = None, **kwargs) -> nn.Module:
    return MODELS[model_name](CourseLayers(root), **kwargs)


# ---------------------------------------------------------------------------------- the comparison
def rel_error(a: torch.Tensor, b: torch.Tensor) -> float:
    """Normwise relative error of a against b, in float64: ||a - b|| / ||b||."""
    a, b = a.detach().double(), b.detach().double()
    return float(torch.linalg.vector_norm(a - b) / torch.linalg.vector_norm(b).clamp_min(1e-300))


def max_error(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.detach().double() - b.detach().double()).abs().max())


@dataclass
class Errors:
    """One quantity of the course model against PyTorch's float32 model and, for scale, of both against
    PyTorch's model in float64."""

    vs_torch: float  # normwise relative error against PyTorch's float32 model
    max_vs_torch: float  # largest absolute difference
    course_vs_fp64: float
    torch_vs_fp64: float


@dataclass
class Comparison:
    model: str
    output: Errors  # training mode
    grads: dict[str, Errors] = field(default_factory=dict)  # per parameter, training mode
    stats: dict[str, Errors] = field(default_factory=dict)  # BatchNorm's running means and variances after it
    batches_tracked_equal: bool = True
    eval_output: Errors | None = None  # eval mode, without gradients (08 where it applies)
    eval_grads: dict[str, Errors] = field(default_factory=dict)  # eval mode, forward and backward (09's eval)

    def problems(self) -> list[str]:
        """What is out of tolerance (see the tolerances below), one line each."""
        out = [describe(what, e) for what, e in [("training output", self.output), ("eval output", self.eval_output),
                                                   *((f"running stat {k}", e) for k, e in self.stats.items())]
               if not within(e, OUT_TOL)]
        out += [describe(f"{mode} gradient of {k}", e) for mode, grads in (("training", self.grads),
                                                                          ("eval", self.eval_grads))
                for k, e in grads.items() if not within(e, GRAD_TOL)]
        if not self.batches_tracked_equal:
            out.append("num_batches_tracked differs")
        return out


# Tolerances: normwise relative errors against PyTorch's float32 model. For scale, PyTorch's float32
# model against its float64 twin and, standing in for a second float32 implementation, PyTorch's
# channels_last path (another summation order) against the contiguous one, on the CPU at 2 x 3 x 128 x
# 128, seed 0 (tests/test_course_models.py runs that stand-in through these checks):
# - the forward is well-conditioned and continuous (ReLU's kink moves a value by its rounding only):
#   outputs 2e-5 (training) and 7e-6 (eval) apart, running statistics 2e-5: OUT_TOL = 1e-4.
# - the backward is neither. Where a pre-activation lies within rounding of ReLU's (or ReLU6's) kink,
#   two float32 implementations may disagree on whether the gradient passes; in the 4 x 4 layers (32
#   values a channel at batch 2) that one element moves its channel's gradient, and everything before
#   it, by up to ~1e-2 (the stand-in: layer4.2's gradients, 1e-4 from float64 in PyTorch, 1e-2 in it).
#   And BatchNorm with batch statistics, 50 deep at initialisation, amplifies the forward's rounding into
#   training gradients ~1e-2 from float64 (median over parameters; up to 4e-2, and without bound where
#   the exact gradient is ~0, e.g. a BatchNorm's bias that a 1x1 convolution and another BatchNorm
#   follow); perturbing float64's input by 1e-7 moves its own gradients by ~5e-3. So a gradient passes
#   within GRAD_TOL = 5e-2 of PyTorch's float32 (a wrong one, e.g. without BatchNorm's mean terms or with
#   a transposed filter, is off by O(1)) or, where PyTorch's own float32 is that far from float64, no
#   further from float64 than RATIO times it.
OUT_TOL, GRAD_TOL, RATIO = 1e-4, 5e-2, 8


def margin(e: Errors, tol: float) -> float:
    """How close to its tolerance: at most 1 when within `tol` of PyTorch's float32 model, or no further
    from float64 than RATIO times it is."""
    return min(e.vs_torch / tol, e.course_vs_fp64 / max(RATIO * e.torch_vs_fp64, 1e-300))


def within(e: Errors, tol: float) -> bool:
    return margin(e, tol) <= 1


def describe(what: str, e: Errors) -> str:
    return (f"{what}: {e.vs_torch:.2e} from PyTorch's float32 (max abs {e.max_vs_torch:.2e}); "
            f"from float64: course {e.course_vs_fp64:.2e}, PyTorch float32 {e.torch_vs_fp64:.2e}")


def _errors(course, torch32, torch64) -> Errors:
    return Errors(rel_error(course, torch32), max_error(course, torch32), rel_error(course, torch64),
                  rel_error(torch32, torch64))


def _perturb(model: nn.Module, seed: int) -> None:
    """BatchNorm's affine parameters and running statistics away from their initial 1 and 0, so that
    each enters the outputs and gradients (fixed by the seed)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                c = m.num_features
                m.weight.copy_(torch.rand(c, generator=g) + 0.5)
                m.bias.copy_(torch.randn(c, generator=g) * 0.1)
                m.running_mean.copy_(torch.randn(c, generator=g) * 0.1)
                m.running_var.copy_(torch.rand(c, generator=g) + 0.5)


def build_pair(model_name: str, root: str | Path | None = None, seed: int = 0, device="cuda"):
    """PyTorch's model and the course's with identical weights and buffers, both in training mode.
    MobileNetV2 without dropout: its random mask is not part of what is compared."""
    kwargs = {"dropout": 0.0} if model_name == "MobileNetV2" else {}
    torch.manual_seed(seed)
    reference = MODELS[model_name](**kwargs)
    _perturb(reference, seed)
    reference = reference.to(device)
    course = course_model(model_name, root, **kwargs).to(device)
    course.load_state_dict(reference.state_dict())
    return reference.train(), course.train()


def inputs(batch: int, size: int, seed: int = 0, device="cuda", num_classes: int = 1000):
    """The input batch and the gradient fed into the output (loss = (output * grad_out).sum())."""
    g = torch.Generator().manual_seed(seed + 1)
    x = torch.randn(batch, 3, size, size, generator=g)
    grad_out = torch.randn(batch, num_classes, generator=g)
    return x.to(device), grad_out.to(device)


def train_step(model: nn.Module, x: torch.Tensor, grad_out: torch.Tensor) -> torch.Tensor:
    """Forward and backward of loss = (output * grad_out).sum(), gradients set afresh."""
    model.zero_grad(set_to_none=True)
    out = model(x)
    (out * grad_out).sum().backward()
    return out


def compare(model_name: str, root: str | Path | None = None, batch: int = 2, size: int = 128, seed: int = 0,
            device="cuda") -> Comparison:
    """PyTorch's model in float32 and float64 and the course's, from the same weights, in strict float32
    (TF32 off, restored after): one training step (forward, backward, running statistics updated), then
    in eval mode a forward without gradients, and a forward and backward."""
    from grader.verify.timer import math_mode

    reference, course = build_pair(model_name, root, seed, device)
    reference64 = copy.deepcopy(reference).double()
    models = (course, reference, reference64)
    x, grad_out = inputs(batch, size, seed, device)

    def step():
        outs = [train_step(m, x.to(dtype), grad_out.to(dtype))
                for m, dtype in zip(models, (torch.float32, torch.float32, torch.float64))]
        grads = [dict((k, p.grad) for k, p in m.named_parameters()) for m in models]
        return _errors(*outs), {k: _errors(g, grads[1][k], grads[2][k]) for k, g in grads[0].items()}

    with math_mode(tf32=False):
        output, grads = step()
        result = Comparison(model_name, output, grads)
        buffers = [dict(m.named_buffers()) for m in models]
        for name, b in buffers[0].items():
            if name.endswith("num_batches_tracked"):
                result.batches_tracked_equal &= bool(torch.equal(b, buffers[1][name]))
            else:
                result.stats[name] = _errors(b, buffers[1][name], buffers[2][name])
        for m in models:
            m.eval()
        with torch.no_grad():
            result.eval_output = _errors(course(x), reference(x), reference64(x.double()))
        _, result.eval_grads = step()
    return result


def check_course_kernels(model_name: str, root: str | Path | None = None, batch: int = 2, size: int = 128,
                         seed: int = 0) -> dict[str, int]:
    """Profile the course model's training step (forward and backward), its eval forward, and its eval
    forward and backward: no PyTorch convolution may run (grader.specs.ex10_cudnn_conv.assert_no_pytorch_conv, which raises
    CheckFailure), and the course's ops must have: 10's conv2d and its two backward ops for every block
    routed through 10, 09's and 08's kernels for those routed through them. Returns the count of each
    course op and kernel seen, by name."""
    from grader.verify.checks import CheckFailure
    from grader.verify.observe import kernel_function
    from grader.specs import ex08_conv_bn_relu_inference as ex08, ex09_conv_bn_relu_training as ex09
    from grader.specs.ex10_cudnn_conv import assert_no_pytorch_conv
    from grader.verify.timer import math_mode

    _, course = build_pair(model_name, root, seed)
    x, grad_out = inputs(batch, size, seed)
    blocks = [m for m in course.modules() if isinstance(m, CourseConvBN)]
    fused = sum(m.route == FUSED for m in blocks)
    lib10 = CourseLayers(root).ex10.lib  # 10's library: its ops' names carry the build's namespace
    ops10 = {op: lib10.qualname(op) for op in ("conv2d", "conv2d_backward_input", "conv2d_backward_weight")}
    counts: dict[str, int] = {}

    def count(ran, what):
        for kind, name in ran:
            key = kernel_function(name) if kind == "kernel" else name
            if key in ops10.values() or key in ex09.KERNELS or key == ex08.KERNEL:
                counts[f"{what}: {key}"] = counts.get(f"{what}: {key}", 0) + 1

    def expect(what, name, at_least):
        seen = counts.get(f"{what}: {name}", 0)
        if seen < at_least:
            raise CheckFailure(f"{model_name}, {what}: {name} ran {seen} times, expected at least {at_least}")

    with math_mode(tf32=False):
        train_step(course, x, grad_out)  # plans made, algorithms chosen: the profiled step reuses them
        count(assert_no_pytorch_conv(lambda: train_step(course, x, grad_out), f"{model_name} training step",
                                     other_ops=True), "train")
        course.eval()
        with torch.no_grad():
            course(x)
            count(assert_no_pytorch_conv(lambda: course(x), f"{model_name} eval forward", other_ops=True), "eval")
        train_step(course, x, grad_out)
        count(assert_no_pytorch_conv(lambda: train_step(course, x, grad_out), f"{model_name} eval forward and backward",
                                     other_ops=True), "eval with gradients")
    via10 = len(blocks) - fused
    expect("train", ops10["conv2d"], via10)
    expect("train", ops10["conv2d_backward_weight"], via10)
    expect("train", ops10["conv2d_backward_input"], via10 - (blocks[0].route == CONV))  # none for the input image
    expect("eval", ops10["conv2d"], via10)
    expect("eval with gradients", ops10["conv2d_backward_weight"], via10)
    if fused:
        for k in ("conv_bn_relu_forward_kernel", "bn_relu_backward_kernel", "conv_wgrad_kernel", "conv_dgrad_kernel"):
            expect("train", k, 1)
        expect("eval", ex08.KERNEL, fused)
        for k in ("conv_bn_relu_forward_kernel", "conv_wgrad_kernel"):
            expect("eval with gradients", k, 1)
    return counts
