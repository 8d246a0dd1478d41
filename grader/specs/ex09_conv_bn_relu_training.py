"""Grading of exercise 09: fused Conv2d + BatchNorm2d + ReLU for training (forward, running
statistics, full backward, autograd, drop-in module).

References are eager PyTorch (nn.Conv2d + nn.BatchNorm2d + nn.ReLU) run in float64 on the same
inputs. Version 1 runs in strict fp32 (TF32 off); comparisons are normwise
(‖actual - expected‖ / ‖expected‖), as the order of the long sums is the kernel's choice:
  output and running statistics 2e-5, the five gradients 1e-4 (the weight gradient sums N*P*Q
  products), gradcheck in float64 with its default tolerances (atol 1e-5, rtol 1e-3).
The ReLU's kink makes the gradient jump: where the float64 pre-activation is within 1e-3 of 0, the
incoming gradient is set to 0, so that rounding on either side of the kink cannot decide a check.
Version 2 (the three convolutions on TF32 tensor cores, GPUs of compute capability 8.0 and newer) is
graded in its own group against bounds derived from TF32's precision (the section "version 2" below).
"""
from __future__ import annotations

import math
from dataclasses import replace

import torch
import torch.nn.functional as F

from grader.verify import precision as probes
from grader.verify import sass
from grader.verify.checks import (CALL_TOLERANCE, CheckFailure, RelErrors, assert_own_kernels, assert_rel_error,
                                  expect_error, host_values, poison, require_capability, unmodified)
from grader.verify.observe import KernelRule
from grader.verify.spec import (NEGATIVE, SIGNS, ZERO, AuditCall, Benchmark, Check, CheckList, Context, Edge,
                                ModuleOptions, Spec, as_conv_output, audit_randn, conv_empty_kernel, conv_output_hw,
                                conv_padding_edges,
                                conv_smallest_hw, conv_smallest_input, conv_transpose_output_hw, torch_defaults,
                                values)
from grader.specs.conv_bn import SHAPES, Shape, conv_bn_modules
from grader.specs.ex06_conv2d import (RANGE_SCALES, TENSOR_CORE_CAPABILITY, clean64, random_case, tf32_bound,
                                      tf32_products_bound, whole_reference)

# version 1 (strict fp32): the convolutions' kernels, then BatchNorm's and the split-K reduction's
CONV_KERNELS = ("conv_bn_relu_forward_kernel", "conv_dgrad_kernel", "conv_wgrad_kernel")
BN_KERNELS = ("bn_stats_finalize_kernel", "bn_relu_apply_kernel", "bn_relu_backward_reduce_kernel",
              "bn_relu_backward_kernel", "conv_wgrad_reduce_kernel")
KERNELS = ("conv_bn_relu_forward_kernel", "bn_stats_finalize_kernel", "bn_relu_apply_kernel",
           "bn_relu_backward_reduce_kernel", "bn_relu_backward_kernel", "conv_dgrad_kernel", "conv_wgrad_kernel",
           "conv_wgrad_reduce_kernel")
# version 2 (TF32 tensor cores): its own convolutions' kernels, the same BatchNorm kernels
TF32_KERNELS = ("conv_bn_relu_forward_tf32_kernel", "conv_dgrad_tf32_kernel", "dgrad_flip_weights_kernel",
                "conv_dgrad_tf32_unit_stride_kernel", "conv_wgrad_tf32_kernel") + BN_KERNELS
STRICT, TF32 = 1, 2  # the versions
TF32_GROUP = "tensor_cores_tf32"
# version 2's instruction, in the code the GPU runs (grader.verify.sass): its forward, both grad_x kernels and
# grad_w's (the weight flip and BatchNorm's kernels compute no products)
TF32_INSTRUCTION = sass.MmaInstruction("mma", "tf32", ("conv_bn_relu_forward_tf32_kernel", "conv_dgrad_tf32_kernel",
                                                       "conv_dgrad_tf32_unit_stride_kernel", "conv_wgrad_tf32_kernel"))
Y_TOL, GRAD_TOL, STATS_TOL = 2e-5, 1e-4, 2e-5
KINK = 1e-3  # |pre-activation| below this: the incoming gradient is zeroed (see the module docstring)


EVAL_SHAPES = (SHAPES[0], SHAPES[2], SHAPES[5])
RANDOM_TF32_CASES = 4


class Layer:
    """One layer's state, drawn from a seeded generator: an eager float64 reference (nn.Sequential)
    and the exercise's leaf tensors in `dtype`."""

    def __init__(self, g: torch.Generator, shape: Shape, dtype=torch.float32, momentum=0.1, eps=1e-5,
                 bias_offset: float = 0.0):
        self.shape, self.dtype, self.momentum, self.eps = shape, dtype, momentum, eps
        sh = shape
        fan_in = sh.c * sh.r * sh.s

        def rnd(*size, scale=1.0, offset=0.0):
            return torch.randn(size, generator=g, device="cuda", dtype=torch.float64) * scale + offset

        # weights at half the unit-variance scale, so invstd ~ 2 and gamma * invstd is far from 1
        self.init = {
            "weight": rnd(sh.k, sh.c, sh.r, sh.s, scale=0.5 / fan_in**0.5),
            "bias": rnd(sh.k, scale=0.2, offset=bias_offset) if sh.bias else None,
            "bn_weight": 1.0 + 0.4 * (torch.rand(sh.k, generator=g, device="cuda", dtype=torch.float64) - 0.5) * 2,
            "bn_bias": rnd(sh.k, scale=0.3),
            "running_mean": rnd(sh.k, scale=0.1),
            "running_var": 0.5 + torch.rand(sh.k, generator=g, device="cuda", dtype=torch.float64),
        }
        self.ref = self._sequential(torch.float64)
        self.params = {k: (v.to(dtype).requires_grad_() if v is not None else None)
                       for k, v in self.init.items() if k not in ("running_mean", "running_var")}
        self.buffers = {"running_mean": self.init["running_mean"].to(dtype).clone(),
                        "running_var": self.init["running_var"].to(dtype).clone(),
                        "num_batches_tracked": torch.zeros((), dtype=torch.long, device="cuda")}

    def _sequential(self, dtype) -> torch.nn.Sequential:
        sh = self.shape
        seq = torch.nn.Sequential(
            torch.nn.Conv2d(sh.c, sh.k, (sh.r, sh.s), sh.stride, sh.padding, sh.dilation, bias=sh.bias),
            torch.nn.BatchNorm2d(sh.k, eps=self.eps, momentum=self.momentum), torch.nn.ReLU()).to("cuda", dtype)
        with torch.no_grad():
            seq[0].weight.copy_(self.init["weight"])
            if sh.bias:
                seq[0].bias.copy_(self.init["bias"])
            seq[1].weight.copy_(self.init["bn_weight"])
            seq[1].bias.copy_(self.init["bn_bias"])
            seq[1].running_mean.copy_(self.init["running_mean"])
            seq[1].running_var.copy_(self.init["running_var"])
        return seq

    def input(self, g: torch.Generator) -> torch.Tensor:
        sh = self.shape
        return torch.randn((sh.n, sh.c, sh.h, sh.w), generator=g, device="cuda", dtype=torch.float64)

    def call(self, mod, x: torch.Tensor, training: bool, version: int | None = STRICT) -> torch.Tensor:
        p, b, sh = self.params, self.buffers, self.shape
        return mod.conv_bn_relu(x, p["weight"], p["bias"], p["bn_weight"], p["bn_bias"], b["running_mean"],
                                b["running_var"], b["num_batches_tracked"], training=training, momentum=self.momentum,
                                eps=self.eps, stride=sh.stride, padding=sh.padding, dilation=sh.dilation,
                                version=version)

    def pre_activation(self, x64: torch.Tensor, training: bool) -> torch.Tensor:
        """BatchNorm's output in float64, without touching the reference's running statistics."""
        conv, bn = self.ref[0], self.ref[1]
        with torch.no_grad():
            z = conv(x64)
            if training:
                return F.batch_norm(z, None, None, bn.weight, bn.bias, True, 0.0, bn.eps)
            return F.batch_norm(z, bn.running_mean, bn.running_var, bn.weight, bn.bias, False, 0.0, bn.eps)

    def grad_output(self, g: torch.Generator, x64: torch.Tensor, training: bool) -> torch.Tensor:
        t = self.pre_activation(x64, training)
        gy = torch.randn(t.shape, generator=g, device="cuda", dtype=torch.float64)
        return torch.where(t.abs() < KINK, torch.zeros_like(gy), gy)


def _grads(tensors) -> list:
    return [t.grad if t is not None else None for t in tensors]


def check_step(ctx: Context, layer: Layer, training: bool, what: str, backward: bool, forward: bool = True,
               version: int | None = STRICT) -> None:
    """One forward (and backward) of the exercise against the float64 reference."""
    g = ctx.generator(what)
    x64 = layer.input(g)
    gy64 = layer.grad_output(g, x64, training)
    x = x64.to(layer.dtype).requires_grad_()
    layer.ref.train(training)
    xr = x64.clone().requires_grad_()
    yr = layer.ref(xr)
    poison(torch.empty(yr.numel() * 3, device="cuda", dtype=layer.dtype))  # the allocator hands this out next
    # the output and every gradient judged in one copy to the host, in this order (RelErrors)
    with RelErrors() as errors:
        with unmodified(x=x):
            y = layer.call(ctx.module, x, training, version)
        if forward:
            errors.add(y, yr, Y_TOL if layer.dtype == torch.float32 else 1e-12, f"{what}: output")
        if not backward:
            return
        y.backward(gy64.to(layer.dtype))
        yr.backward(gy64)
        conv, bn = layer.ref[0], layer.ref[1]
        p = layer.params
        tol = GRAD_TOL if layer.dtype == torch.float32 else 1e-10
        for name, mine, ref in (("grad_input", x.grad, xr.grad), ("grad_weight", p["weight"].grad, conv.weight.grad),
                                ("grad_gamma (bn weight)", p["bn_weight"].grad, bn.weight.grad),
                                ("grad_beta (bn bias)", p["bn_bias"].grad, bn.bias.grad)):
            if mine is None:
                raise CheckFailure(f"{what}: {name} is None")  # after the results before it (RelErrors)
            errors.add(mine, ref, tol, f"{what}: {name}")
    if layer.shape.bias:
        mine, ref = p["bias"].grad, conv.bias.grad
        if mine is None:
            raise CheckFailure(f"{what}: grad_bias (conv bias) is None")
        if training:
            # exactly 0 in exact arithmetic (the batch mean cancels a per-channel shift); compare its
            # size with that of the bias gradient's terms, gamma * invstd * dbeta
            with torch.no_grad():
                var = layer.ref[0](x64).var(dim=(0, 2, 3), unbiased=False)
                scale = bn.weight / torch.sqrt(var + bn.eps) * bn.bias.grad
            err = torch.linalg.vector_norm(mine.double() - ref).item()
            if not err <= tol * torch.linalg.vector_norm(scale).item():
                raise CheckFailure(f"{what}: grad_bias (conv bias) is {mine.tolist()[:4]}..., expected ~0 "
                                   "(train-mode BatchNorm cancels the conv bias)")
        else:
            assert_rel_error(mine, ref, tol, f"{what}: grad_bias (conv bias)")
    elif p["bias"] is not None:
        raise CheckFailure(f"{what}: a layer without bias got a bias")


def check_running_stats(ctx: Context, momentum, what: str, bias_offset: float = 0.0) -> None:
    shape = Shape("stats", 4, 16, 15, 13, 24, 3, 3, padding=(1, 1), bias=True)
    layer = Layer(ctx.generator(what), shape, momentum=momentum, bias_offset=bias_offset)
    g = ctx.generator(what + "x")
    for step in range(4):
        x64 = layer.input(g) * (1 + step) + step  # the statistics move from step to step
        layer.ref.train()
        with torch.no_grad():
            layer.ref(x64)
            layer.call(ctx.module, x64.float(), True)
        torch.cuda.synchronize()
        b, bn = layer.buffers, layer.ref[1]
        label = f"{what} after {step + 1} training step{'s' if step else ''}"
        assert_rel_error(b["running_mean"], bn.running_mean, STATS_TOL, f"{label}: running_mean")
        assert_rel_error(b["running_var"], bn.running_var, STATS_TOL, f"{label}: running_var")
        if int(b["num_batches_tracked"]) != int(bn.num_batches_tracked):
            raise CheckFailure(f"{label}: num_batches_tracked is {int(b['num_batches_tracked'])}, "
                               f"expected {int(bn.num_batches_tracked)}")
    before = {k: v.clone() for k, v in layer.buffers.items()}
    with torch.no_grad():
        layer.call(ctx.module, layer.input(g).float(), False)
    torch.cuda.synchronize()
    for k, v in before.items():
        if not torch.equal(v, layer.buffers[k]):
            raise CheckFailure(f"{what}: eval mode changed {k}; it must only read the running statistics")


def check_gradcheck(ctx: Context, shape: Shape, training: bool, what: str) -> None:
    layer = Layer(ctx.generator(what), shape, dtype=torch.float64)
    x = layer.input(ctx.generator(what + "x")).requires_grad_()
    p = layer.params
    names = ["x", "weight", "bias", "bn_weight", "bn_bias"]
    inputs = [x, p["weight"], p["bias"], p["bn_weight"], p["bn_bias"]]
    names, inputs = zip(*[(n, t) for n, t in zip(names, inputs) if t is not None])
    sh, b = shape, layer.buffers

    def fn(*args):
        kw = dict(zip(names, args))
        return ctx.module.conv_bn_relu(kw["x"], kw["weight"], kw.get("bias"), kw["bn_weight"], kw["bn_bias"],
                                       b["running_mean"], b["running_var"], b["num_batches_tracked"],
                                       training=training, momentum=0.1, eps=1e-5, stride=sh.stride,
                                       padding=sh.padding, dilation=sh.dilation, version=STRICT)

    try:
        ok = torch.autograd.gradcheck(fn, tuple(inputs), eps=1e-6, atol=1e-5, rtol=1e-3)
    except Exception as e:
        raise CheckFailure(f"{what}: {str(e).splitlines()[0][:300]}") from None
    if not ok:
        raise CheckFailure(f"{what}: gradcheck failed")


# ----------------------------------------------------------------------------- the module
def check_module_state(ctx: Context) -> None:
    mod = ctx.module
    g = ctx.generator("module-state")
    torch.manual_seed(int(torch.randint(0, 2**31, (1,), generator=g, device="cuda")))
    seq = torch.nn.Sequential(torch.nn.Conv2d(8, 12, 3, stride=2, padding=1, dilation=1, bias=True),
                              torch.nn.BatchNorm2d(12, eps=1e-3, momentum=0.2), torch.nn.ReLU()).cuda()
    with torch.no_grad():
        seq[1].running_mean.uniform_(-0.5, 0.5)
        seq[1].running_var.uniform_(0.5, 2.0)
        seq[1].weight.uniform_(0.5, 1.5)
        seq[1].bias.uniform_(-0.5, 0.5)
        seq[1].num_batches_tracked.fill_(7)
    fused = mod.FusedConvBNReLU(8, 12, 3, stride=2, padding=1, bias=True, eps=1e-3, momentum=0.2).cuda()
    want = {"conv.weight", "conv.bias", "bn.weight", "bn.bias", "bn.running_mean", "bn.running_var",
            "bn.num_batches_tracked"}
    if set(fused.state_dict()) != want:
        raise CheckFailure(f"module: state_dict keys {sorted(fused.state_dict())}, expected {sorted(want)}")
    fused.load_sequential_state_dict(seq.state_dict())
    x = torch.randn(5, 8, 17, 19, generator=g, device="cuda")
    with torch.no_grad():
        seq.eval()
        fused.eval()
        assert_rel_error(fused(x), seq(x), Y_TOL, "module: eval forward after loading the Sequential's state")
        if int(fused.bn.num_batches_tracked) != 7:
            raise CheckFailure("module: eval forward changed num_batches_tracked")
        seq.train()
        fused.train()
        assert_rel_error(fused(x), seq(x), Y_TOL, "module: train forward after loading the Sequential's state")
        assert_rel_error(fused.bn.running_mean, seq[1].running_mean, STATS_TOL, "module: running_mean after train()")
        if int(fused.bn.num_batches_tracked) != 8:
            raise CheckFailure("module: a training forward must add 1 to num_batches_tracked")
    other = mod.FusedConvBNReLU.from_sequential(seq)
    with torch.no_grad():
        other.eval()
        seq.eval()
        assert_rel_error(other(x), seq(x), Y_TOL, "module: FusedConvBNReLU.from_sequential, eval forward")


def check_from_modules(ctx: Context, options: dict, what: str) -> None:
    """FusedConvBNReLU.from_modules(conv, bn) against nn.Sequential(conv, bn, ReLU) on copies of the same
    modules, in the mode options["mode"]: two steps (the output, the running statistics and
    num_batches_tracked after each), then the gradients of the convolution's and BatchNorm's weights."""
    import copy


    conv, bn = conv_bn_modules(torch.Generator().manual_seed(ctx.seed_for(what)), options)
    seq = torch.nn.Sequential(copy.deepcopy(conv), copy.deepcopy(bn), torch.nn.ReLU())
    fused = ctx.module.FusedConvBNReLU.from_modules(conv, bn)
    training = options["mode"] == "train"
    seq.train(training)
    fused.train(training)
    g = ctx.generator(what)
    for step in range(2):
        x = torch.randn(3, 5, 9, 8, generator=g, device="cuda") * (1 + step) + step
        y, yr = fused(x), seq(x)
        label = f"module: {what}, {options['mode']} step {step + 1}"
        assert_rel_error(y, yr, Y_TOL, f"{label}: output")
        if options["track_running_stats"]:
            for name in ("running_mean", "running_var"):
                assert_rel_error(getattr(fused.bn, name), getattr(seq[1], name), STATS_TOL, f"{label}: {name}")
            if int(fused.bn.num_batches_tracked) != int(seq[1].num_batches_tracked):
                raise CheckFailure(f"{label}: num_batches_tracked is {int(fused.bn.num_batches_tracked)}, expected "
                                   f"{int(seq[1].num_batches_tracked)}")
    v = torch.randn(y.shape, generator=g, device="cuda")
    (y * v).sum().backward()
    (yr * v).sum().backward()
    for name, mine, ref in (("conv.weight", fused.conv.weight, seq[0].weight),
                            ("bn.weight", getattr(fused.bn, "weight", None), seq[1].weight)):
        if ref is not None:
            if mine is None or mine.grad is None:
                raise CheckFailure(f"module: {what}: no gradient reached {name}")
            assert_rel_error(mine.grad, ref.grad, GRAD_TOL, f"module: {what}: the gradient of {name}")


def _small_cnn(block, dtype=torch.float32):
    return torch.nn.Sequential(block(3, 16, 3, 1, 1, True), block(16, 32, 3, 2, 1, False),
                               block(32, 32, 3, 1, 2, False, dilation=2),
                               torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(32, 10)).to("cuda", dtype)


def _eager_block(cin, cout, k, stride, padding, bias, dilation=1):
    return torch.nn.Sequential(torch.nn.Conv2d(cin, cout, k, stride, padding, dilation, bias=bias),
                               torch.nn.BatchNorm2d(cout), torch.nn.ReLU())


def check_training_curve(ctx: Context) -> None:
    """A small CNN made of fused blocks follows eager PyTorch's loss curve step by step."""
    mod = ctx.module
    g = ctx.generator("loss-curve")
    torch.manual_seed(int(torch.randint(0, 2**31, (1,), generator=g, device="cuda")))
    eager = _small_cnn(_eager_block)
    fused = _small_cnn(lambda cin, cout, k, s, p, b, dilation=1: mod.FusedConvBNReLU(cin, cout, k, s, p, dilation, b))
    state = {}
    for key, v in eager.state_dict().items():  # block i of eager is "i.0.*", "i.1.*"; fused is "i.conv.*", "i.bn.*"
        parts = key.split(".")
        if len(parts) == 3 and parts[1] in ("0", "1"):
            key = f"{parts[0]}.{'conv' if parts[1] == '0' else 'bn'}.{parts[2]}"
        state[key] = v
    fused.load_state_dict(state)
    x = torch.randn(32, 3, 24, 24, generator=g, device="cuda")
    labels = torch.randint(0, 10, (32,), generator=g, device="cuda")
    opts = [torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9) for m in (eager, fused)]
    curves = ([], [])
    for step in range(6):
        for m, opt, curve in zip((eager, fused), opts, curves):
            opt.zero_grad()
            loss = F.cross_entropy(m(x), labels)
            loss.backward()
            opt.step()
            curve.append(loss.item())
    diffs = [abs(a - b) / abs(a) for a, b in zip(*curves)]
    if not max(diffs) <= 1e-3:
        shown = ", ".join(f"{a:.5f}/{b:.5f}" for a, b in zip(*curves))
        raise CheckFailure(f"training curve: the fused CNN's losses leave eager's (eager/fused per step: {shown})")
    if curves[0][-1] >= curves[0][0]:
        raise CheckFailure("training curve: the eager reference did not learn (a grader problem)")


# ----------------------------------------------------------------------------- the audit's references
def _per_channel(t: torch.Tensor) -> torch.Tensor:
    return t[None, :, None, None]


def _audit_forward(x, weight, bias, gamma, beta, running_mean, running_var, num_batches_tracked, training, momentum,
                   eps, stride, padding, dilation, keep_z=False, version=STRICT):
    """What conv_bn_relu_forward returns, in float64: (y, z, save_mean, save_invstd); z is conv + bias
    (empty when neither training nor keep_z), the statistics are the batch's or the running ones."""
    z = F.conv2d(x.double(), weight.double(), None if bias is None else bias.double(), stride, padding, dilation)
    if training:
        if z.numel() == z.shape[1]:  # refused as F.batch_norm refuses it
            raise ValueError(f"Expected more than 1 value per channel when training, got input size {list(z.shape)}")
        mean, invstd = z.mean((0, 2, 3)), (z.var((0, 2, 3), unbiased=False) + eps).rsqrt()
    else:
        mean, invstd = running_mean.double(), (running_var.double() + eps).rsqrt()
    y = F.relu((z - _per_channel(mean)) * _per_channel(invstd * gamma.double()) + _per_channel(beta.double()))
    return y, (z if training or keep_z else z.new_empty(0)), mean, invstd


def _audit_updates(x, weight, bias, gamma, beta, running_mean, running_var, num_batches_tracked, training,
                   momentum, eps, stride, padding, dilation, *rest) -> dict:
    """The running statistics after a call, in float64, as nn.BatchNorm2d leaves them: in training
    (1 - m) running + m batch (the variance unbiased), m = momentum, or 1 / batches seen when it is None
    (a cumulative average; momentum 0.0 leaves them as they were); num_batches_tracked + 1. In eval:
    unchanged."""
    if not training:
        return {5: running_mean, 6: running_var, 7: num_batches_tracked}
    z = F.conv2d(x.double(), weight.double(), None if bias is None else bias.double(), stride, padding, dilation)
    count = num_batches_tracked + 1
    m = 1.0 / float(count) if momentum is None else momentum
    return {5: (1 - m) * running_mean + m * z.mean((0, 2, 3)),
            6: (1 - m) * running_var + m * z.var((0, 2, 3), unbiased=True), 7: count}


def _few_values_per_channel(x, w, conv) -> tuple[Edge, ...]:
    """x cut to one image of the smallest height the kernel fits, then of the smallest width, then of
    both (N = 1, and an output of one row, one column, one value): BatchNorm's batch statistics over a
    single output row or column, the fewest it takes in training; and over one value per channel, which
    PyTorch refuses in training (and so must the op)."""
    hw = conv_smallest_hw(w.shape[2:], conv[2], conv[1])
    c, h, wd = x.shape[1:]
    return (Edge(f"one image of one output row (x {[1, c, hw[0], wd]})", make=lambda t: t[:1, :, :hw[0]].contiguous()),
            Edge(f"one image of one output column (x {[1, c, h, hw[1]]})", make=lambda t: t[:1, :, :, :hw[1]].contiguous()),
            Edge(f"one value per channel (x {[1, c, *hw]}: refused in training)",
                 make=lambda t: t[:1, :, :hw[0], :hw[1]].contiguous(), refused=True))


def _domains(x, w, conv, momentum: int | None = None, eps: int = 10, gamma: int = 3, training: int | None = 8,
             padding: int | None = 12, trains: bool = False) -> dict:
    """The edges of a call's arguments (their indices): BatchNorm's weight negative, zero and of both
    signs; the other mode; momentum and eps past their ranges (refused); the padding's edges and x at
    its smallest size, and where the call `trains`, at one output row, one column and one value per
    channel (refused)."""
    out = {gamma: (NEGATIVE, ZERO, SIGNS), eps: (Edge("0.0", 0.0, refused=True),)}
    if momentum is not None:
        out[momentum] = (Edge("1.5", 1.5, refused=True),)
    if training is not None:
        out[training] = values(False)
    if padding is not None:
        out[padding] = conv_padding_edges(tuple(x.shape[2:]), tuple(w.shape[2:]), conv[0], conv[2], conv[1])
        out[0] = conv_smallest_input(tuple(x.shape[2:]), tuple(w.shape[2:]), conv[2], conv[1])
        out[1] = conv_empty_kernel()
        if trains:
            out[0] += _few_values_per_channel(x, w, conv)
    return out


def _dz(grad_y, z, y, gamma, mean, invstd, training):
    """(dz, dgamma, dbeta) in float64 from the backward's saved tensors: the gradient reaching the
    convolution's output, and BatchNorm's parameter gradients."""
    grad_y, z, y, gamma, mean, invstd = (t.double() for t in (grad_y, z, y, gamma, mean, invstd))
    g = torch.where(y > 0, grad_y, torch.zeros_like(grad_y))
    xhat = (z - _per_channel(mean)) * _per_channel(invstd)
    dbeta, dgamma = g.sum((0, 2, 3)), (g * xhat).sum((0, 2, 3))
    u = g - (_per_channel(dbeta) + xhat * _per_channel(dgamma)) / (g.numel() // g.shape[1]) if training else g
    return _per_channel(gamma * invstd) * u, dgamma, dbeta


def _audit_backward(grad_y, x, weight, z, y, gamma, mean, invstd, training, stride, padding, dilation, version=STRICT):
    """What conv_bn_relu_backward returns, in float64: (grad_x, grad_weight, grad_bias, grad_bn_weight,
    grad_bn_bias) from the saved tensors. In training the bias's gradient is 0 (the batch mean cancels it)."""
    x, weight = x.double(), weight.double()
    dz, dgamma, dbeta = _dz(grad_y, z, y, gamma, mean, invstd, training)
    dz = as_conv_output(dz, x.shape, weight.shape, stride, padding, dilation)
    grad_x = torch.nn.grad.conv2d_input(x.shape, weight, dz, stride, padding, dilation)
    grad_w = torch.nn.grad.conv2d_weight(x, weight.shape, dz, stride, padding, dilation)
    grad_bias = torch.zeros_like(dbeta) if training else dz.sum((0, 2, 3))
    return grad_x, grad_w, grad_bias, dgamma, dbeta


NAMES = ("x", "weight", "bias", "bn_weight", "bn_bias", "running_mean", "running_var", "num_batches_tracked",
         "training", "momentum", "eps", "stride", "padding", "dilation")
RUNNING = (5, 6, 7)  # running_mean, running_var, num_batches_tracked: updated in place in training
BACKWARD_NAMES = ("grad_y", "x", "weight", "z", "y", "bn_weight", "save_mean", "save_invstd", "training", "stride",
                  "padding", "dilation")


def _calls(r, x, w, b, conv, k: int, seed: int, kind: str = "", version: int = STRICT) -> list[AuditCall]:
    """The calls of every op on one convolution: `r(*shape, seed=, scale=, offset=)` draws a tensor.
    Version 2's calls (float32) are graded in its group, against its TF32 bounds; their gradients are
    not asked of the Python function (the fixed checks take the backward op on given saved tensors:
    TF32's forward moves values across the ReLU's kink, where the gradient jumps)."""
    gamma, beta = r(k, seed=seed, scale=0.2, offset=1.0), r(k, seed=seed + 1, scale=0.3)
    mean, var = r(k, seed=seed + 2, scale=0.2), r(k, seed=seed + 3, scale=0.1, offset=1.0)
    count = torch.zeros((), dtype=torch.long, device=x.device)
    tf32 = version == TF32
    tag = "".join(f", {t}" for t in (kind, "TF32" if tf32 else "") if t)
    forward_tolerance = _audit_tf32_tolerance if tf32 else _audit_strict_tolerance
    per_version = {"group": TF32_GROUP if tf32 else "", "kernels": KernelRule(TF32_KERNELS if tf32 else KERNELS),
                   "needs_capability": TENSOR_CORE_CAPABILITY if tf32 else None}
    calls = [AuditCall("conv_bn_relu", (x, w, b, gamma, beta, mean, var, count, True, 0.1, 1e-5, *conv, version),
                       NAMES + ("version",), lambda *a: _audit_forward(*a[:14], True)[0],
                       label=f"conv_bn_relu(training{tag})",
                       # not the bias: in training its gradient is 0, which a relative error cannot judge
                       grad_args=() if tf32 else (0, 1, 3, 4), mutates=RUNNING, nonfinite=(0,), infinities=False,
                       # momentum None: the cumulative average, a path of its own; 0.0: no update at all
                       # (not None's average), 1.0: the batch's statistics alone
                       scalars={9: (None, 0.0, 0.3, 1.0), 10: (1e-3,)}, domains=_domains(x, w, conv, momentum=9, trains=True),
                       updates=None if tf32 else _audit_updates, updates_group="running_stats",
                       tolerance=lambda *a: forward_tolerance(*a[:14], outputs=("y",)),
                       defaults=torch_defaults(NAMES, first=9), **per_version)]
    for training in (True, False):
        mode = "training" if training else "eval"
        args = (x, w, b, gamma, beta, mean, var, count, training, 0.1, 1e-5, *conv, True, version)  # keep_z
        calls.append(AuditCall("lib.ops.conv_bn_relu_forward", args, NAMES + ("keep_z", "version"), _audit_forward,
                               label=f"conv_bn_relu_forward({mode}{tag})", registered="lib.ops.conv_bn_relu_forward",
                               mutates=RUNNING if training else (), nonfinite=(0,),
                               # the batch's statistics of infinities: inf - inf in Welford's or Chan's updates
                               infinities=not training,
                               scalars={10: (0.1,), **({9: (None, 0.0, 1.0)} if training else {})},
                               domains=_domains(x, w, conv, momentum=9, training=None, trains=training),
                               updates=None if tf32 else _audit_updates, updates_group="running_stats",
                               tolerance=lambda *a: forward_tolerance(*a[:14]), **per_version))
        y, z, m, invstd = (t.to(x.dtype) for t in _audit_forward(*args))
        grad_y = r(*y.shape, seed=seed + 4)
        calls.append(AuditCall(
            "lib.ops.conv_bn_relu_backward", (grad_y, x, w, z, y, gamma, m, invstd, training, *conv, version),
            BACKWARD_NAMES + ("version",), _audit_backward, label=f"conv_bn_relu_backward({mode}{tag})",
            domains={5: (NEGATIVE, ZERO, SIGNS)},
            registered="lib.ops.conv_bn_relu_backward",
            tolerance=(lambda *a: tf32_backward_tolerance(*a[:12])) if tf32 else None, **per_version))
    return calls


# ------------------------------------------------------------------ version 2: TF32 tensor cores
# Version 2 computes the three convolutions on TF32 tensor cores, the rest (BatchNorm's statistics,
# its normalisation, its backward) as version 1 does in float32. Each bound below starts from exercise
# 06's per-output bound B of a TF32 product sum (tf32_bound, tf32_products_bound: 5 u sqrt(sum of the
# squared products) + the float32 sums' rounding, u = 2^-11), and follows it through what comes after:
#
#   z = conv(x, w) + bias: |dz| <= B elementwise (06's bound as it stands).
#   The batch statistics of channel c over its n values: |d mean| <= mean(B) (the mean of the errors),
#   and, as var = mean((z - mean)^2), |d var| <= 2 sqrt(var) rms(B) + rms(B)^2 (Cauchy-Schwarz; removing
#   the mean only shrinks rms(dz)); invstd = (var + eps)^-1/2 moves by |d invstd| <= invstd^3 |d var| / 2.
#   y = relu(gamma (z - mean) invstd + beta): the ReLU adds no error (|relu(a) - relu(b)| <= |a - b|), so
#   |dy| <= |gamma| (invstd (B + mean(B)) + |z - mean| |d invstd|): the normalisation divides by the
#   channel's spread, so what carries through is B relative to that spread, whatever the scale of x
#   (the three terms: mean(B) is not divided by sqrt(n), as the rounding of a weight errs alike in
#   every output of its channel).
#   In eval y = relu(scale conv(x, w) + shift), with scale and shift the running statistics folded:
#   |dy| <= |scale| B (exercise 08's bound).
#   The running statistics move by momentum times the batch's: |d running_mean| <= m mean(B) and
#   |d running_var| <= m n / (n - 1) |d var|.
#   The backward: grad_x is the transposed convolution of dz = gamma invstd u with w and grad_w the
#   correlation of x with dz over N*P*Q, both on TF32 tensor cores: 06's bound of those products. The
#   rest (u, grad_gamma, grad_beta, grad_bias) is float32, as in version 1.
#
# Each is compared normwise, ||actual - ref|| <= ||bound|| + (version 1's tolerance) ||ref||: on random
# data about 1e-2 for y in training (3e-3 in eval) and 2.3e-3 for z, where TF32 lands near 3e-4 and a
# dropped K step or a wrong fragment at 1e-1 and above (tests/test_fused_tensor_cores.py emulates TF32 and the
# dropped step; known-wrong c_fragment_rows_swapped_in_z and backward_b_fragment_wrong plant wrong fragments).
# FP16 operands have TF32's mantissa: inputs near 1e5 (FP16 overflows) and 1e-6 (below its smallest
# normal) tell them apart, in z (y is normalised).
def tf32_forward_bounds(x, w, b, gamma, beta, running_mean, running_var, eps, momentum, stride, padding, dilation,
                        training) -> dict:
    """Version 2's forward in float64 and the bounds above: name -> (reference, bound, floor) for y, z,
    save_mean, save_invstd and (training) the running statistics after the step; floor is version 1's
    normwise tolerance, added to ||bound|| / ||reference||."""
    z, bz = tf32_bound(x, w, b, stride, padding, dilation)
    gamma, beta, rm, rv = (t.detach().double() for t in (gamma, beta, running_mean, running_var))
    if not training:  # the running statistics folded: 08's bound, on conv(x, w) (its bias is in the shift)
        invstd = (rv + eps).rsqrt()
        scale = gamma * invstd
        pre = (z - _per_channel(rm)) * _per_channel(scale) + _per_channel(beta)
        _, bc = tf32_bound(x, w, None, stride, padding, dilation)
        return {"y": (F.relu(pre), _per_channel(scale.abs()) * bc, Y_TOL), "z": (z, bz, Y_TOL),
                "save_mean": (rm, torch.zeros_like(rm), STATS_TOL), "save_invstd": (invstd, torch.zeros_like(rm), STATS_TOL)}
    n = z.numel() // z.shape[1]
    mean, var = z.mean((0, 2, 3)), z.var((0, 2, 3), unbiased=False)
    invstd = (var + eps).rsqrt()
    b_mean = bz.mean((0, 2, 3))
    b_rms = bz.square().mean((0, 2, 3)).sqrt()
    b_var = 2 * var.sqrt() * b_rms + b_rms.square()
    b_invstd = invstd.pow(3) * b_var / 2
    centred = z - _per_channel(mean)
    y = F.relu(centred * _per_channel(gamma * invstd) + _per_channel(beta))
    b_y = _per_channel(gamma.abs()) * (_per_channel(invstd) * (bz + _per_channel(b_mean))
                                       + centred.abs() * _per_channel(b_invstd))
    m = 1.0 if momentum is None else momentum  # None: a cumulative average, 1 / batches seen <= 1
    return {"y": (y, b_y, Y_TOL), "z": (z, bz, Y_TOL), "save_mean": (mean, b_mean, STATS_TOL),
            "save_invstd": (invstd, b_invstd, STATS_TOL),
            "running_mean": ((1 - m) * rm + m * mean, m * b_mean, STATS_TOL),
            "running_var": ((1 - m) * rv + m * var * n / (n - 1), m * b_var * n / (n - 1), STATS_TOL)}


def bound_tolerance(reference: torch.Tensor, bound: torch.Tensor, floor: float) -> float:
    """||bound|| / ||reference|| + floor: the normwise relative error a TF32 bound allows."""
    return bound_tolerances([(reference, bound, floor)])[0]


def bound_tolerances(bounds) -> list[float]:
    """bound_tolerance of each (reference, bound, floor), their norms brought to the host in one copy (a wait
    for the GPU each: a few per checked call)."""
    bounds = list(bounds)
    norms = [n[0] for n in host_values(*(torch.linalg.vector_norm(t).reshape(1) for reference, bound, _ in bounds
                                         for t in (reference, bound)))]
    return [(allowed / norm if norm > 0 else allowed) + floor
            for (_, _, floor), norm, allowed in zip(bounds, norms[::2], norms[1::2])]


def _audit_tf32_tolerance(x, w, b, gamma, beta, running_mean, running_var, count, training, momentum, eps, stride,
                          padding, dilation, outputs=("y", "z", "save_mean", "save_invstd")) -> float:
    """The largest of the outputs' TF32 tolerances for an audit call of version 2 (its arguments)."""
    bounds = tf32_forward_bounds(x, w, b, gamma, beta, running_mean, running_var, eps, momentum, stride, padding,
                                 dilation, training)
    return max(bound_tolerances(bounds[name] for name in outputs))


def _audit_strict_tolerance(x, w, b, gamma, beta, running_mean, running_var, count, training, momentum, eps, stride,
                            padding, dilation, outputs=("y", "z", "save_mean", "save_invstd")) -> float:
    """Version 1's tolerance for a forward audit call: its dtype's (CALL_TOLERANCE), plus, in training, the
    rounding of the normalisation: y = gamma invstd (z - mean) + beta, however computed (the solution's
    z scale + shift), rounds z and mean at |z| + |mean| and then multiplies by gamma invstd, so
    |dy| <= 4 u |gamma| invstd (|z| + |mean|). On most data that adds little (invstd about 1); where a
    channel's values barely spread (a batch of few pixels, or every tap in the padding: z the bias alone,
    var 0), invstd reaches eps^-1/2 and magnifies it: PyTorch's own float32 on such a call errs 1.3e-5
    against float64 (H200), over the floor of 1e-5."""
    floor = CALL_TOLERANCE[x.dtype]
    if not training or "y" not in outputs:
        return floor
    u = 2.0**-24 if x.dtype == torch.float32 else 2.0**-53
    # non-finite inputs as 0 (the NaN checks' calls): their positions are compared apart, and a NaN here
    # would make every tolerance NaN
    z = F.conv2d(clean64(x), clean64(w), clean64(b), stride, padding, dilation)
    mean, var = z.mean((0, 2, 3)), z.var((0, 2, 3), unbiased=False)
    gamma = clean64(gamma)
    y = F.relu((z - _per_channel(mean)) * _per_channel(gamma * (var + eps).rsqrt()) + _per_channel(clean64(beta)))
    bound = 4 * u * _per_channel(gamma.abs() * (var + eps).rsqrt()) * (z.abs() + _per_channel(mean.abs()))
    allowed = bound_tolerance(y, bound, floor)
    return allowed if math.isfinite(allowed) else floor


def tf32_backward_bounds(grad_y, x, w, z, y, gamma, mean, invstd, training, stride, padding, dilation) -> dict:
    """The backward op's gradients of the convolution in float64 from its saved tensors, and version 2's
    bounds: name -> (reference, bound, floor) for grad_input and grad_weight."""
    dz, _, _ = _dz(grad_y, z, y, gamma, mean, invstd, training)
    x64, w64 = x.double(), w.double()
    output_padding = [n - m for n, m in zip(x.shape[2:], conv_transpose_output_hw(dz.shape[2:], w.shape[2:], stride,
                                                                                  padding, (0, 0), dilation))]
    gx, bx = tf32_bound(dz, w64, None, stride, padding, dilation, output_padding=output_padding)
    gw, bw = tf32_products_bound(lambda a, b: torch.nn.grad.conv2d_weight(a, w.shape, b, stride, padding, dilation),
                                 x64, dz, dz.numel() // dz.shape[1])
    return {"grad_input": (gx, bx, GRAD_TOL), "grad_weight": (gw, bw, GRAD_TOL)}


def tf32_backward_tolerance(*args) -> float:
    """The larger of grad_input's and grad_weight's TF32 tolerances (the backward op's arguments)."""
    return max(GRAD_TOL, *bound_tolerances(tf32_backward_bounds(*args).values()))


# Version 2's paths for the precision probes (grader.verify.precision), each product sum K >= POSITIVE_MIN_K
# (forward c r s, grad_x's k r s, or at stride 2 about a quarter of it, and grad_w's n p q): 16-byte weight
# loads (c r s and k r s multiples of 4: the unit-stride grad_x's flipped weight too), K odd (4-byte
# loads in both), and stride 2 (grad_x by conv_dgrad_tf32_kernel). A range probe scales x and the conv's
# bias (forward) or grad_y (backward: both gradients' GEMMs take it); the positive one draws x, the weight,
# the bias and grad_y in [0.5, 1.5), the backward in eval so that y > 0 and dz = grad_y gamma invstd
# keeps its sign. The first path's checks keep the probe's plain name.
PROBE_SHAPES = (
    ("unit stride, 16-byte loads", Shape("probe, K % 4 == 0", 4, 64, 15, 13, 64, 3, 3, padding=(1, 1), bias=True)),
    ("K odd", Shape("probe, K odd", 4, 67, 11, 13, 65, 3, 3, padding=(1, 1), bias=True)),
    ("stride 2", Shape("probe, stride 2", 5, 64, 21, 19, 128, 3, 3, stride=(2, 2), padding=(1, 1), bias=True)),
)


def check_tf32_forward(ctx: Context, sh: Shape, training: bool, what: str, scale: float = 1.0,
                       g: torch.Generator | None = None, probe: probes.Probe | None = None) -> None:
    """Version 2's forward op (z kept) against float64, every output within its TF32 bound; x and the
    conv's bias multiplied by `scale` (a range check), or made a precision probe's (grader.verify.precision)."""
    layer = Layer(ctx.generator(what + "-init"), sh)
    x = (layer.input(g or ctx.generator(what)) * scale).float()
    p, buf = layer.params, layer.buffers
    w, gamma, beta = (p[k].detach() for k in ("weight", "bn_weight", "bn_bias"))
    bias = None if p["bias"] is None else p["bias"].detach() * scale
    if probe is not None and probe.kind == "range":
        x, bias = probe.scaled(x), None if bias is None else probe.scaled(bias)
    elif probe is not None:
        pg = ctx.generator(what + "-positive")
        x, w = probe.draw(pg, x.shape), probe.draw(pg, w.shape)
        bias = None if bias is None else probe.draw(pg, bias.shape)
    rm0, rv0 = buf["running_mean"].clone(), buf["running_var"].clone()
    bounds = tf32_forward_bounds(x, w, bias, gamma, beta, rm0, rv0, layer.eps, layer.momentum, sh.stride,
                                 sh.padding, sh.dilation, training)
    poison(torch.empty(3 * x.shape[0] * sh.k * sh.h * sh.w + (1 << 20), device="cuda"))
    with unmodified(x=x, weight=w, bn_weight=gamma, bn_bias=beta):
        y, z, mean, invstd = ctx.module.lib.ops.conv_bn_relu_forward(
            x, w, bias, gamma, beta, buf["running_mean"], buf["running_var"], buf["num_batches_tracked"], training,
            layer.momentum, layer.eps, list(sh.stride), list(sh.padding), list(sh.dilation), True, TF32)
    torch.cuda.synchronize()
    outputs = {"y": y, "z": z, "save_mean": mean, "save_invstd": invstd}
    if training:
        outputs |= {"running_mean": buf["running_mean"], "running_var": buf["running_var"]}
    for name, actual in outputs.items():
        expected, bound, floor = bounds[name]
        assert_rel_error(actual, expected, bound_tolerance(expected, bound, floor),
                         f"{what}: {name} (TF32 tensor cores: the README's How it is graded)")


def check_tf32_backward(ctx: Context, sh: Shape, training: bool, what: str, g: torch.Generator | None = None,
                        probe: probes.Probe | None = None) -> None:
    """Version 2's backward op on saved tensors from the float64 forward (in float32): grad_input and
    grad_weight within their TF32 bounds, BatchNorm's gradients as version 1's; grad_y scaled by a range
    probe, or x, the weight, the bias and grad_y drawn by the positive one (grader.verify.precision)."""
    layer = Layer(ctx.generator(what + "-init"), sh)
    g = g or ctx.generator(what)
    x64 = layer.input(g)
    gy = layer.grad_output(g, x64, training).float()
    p, buf = layer.params, layer.buffers
    w, gamma, beta = (p[k].detach() for k in ("weight", "bn_weight", "bn_bias"))
    bias = p["bias"].detach() if p["bias"] is not None else None
    if probe is not None and probe.kind == "range":
        gy = probe.scaled(gy)
    elif probe is not None:
        pg = ctx.generator(what + "-positive")
        x64, w = probe.draw(pg, x64.shape, torch.float64), probe.draw(pg, w.shape)
        bias = None if bias is None else probe.draw(pg, bias.shape)
        gy = probe.draw(pg, gy.shape)
    y, z, mean, invstd = (t.float() for t in _audit_forward(
        x64, w, bias, gamma, beta, buf["running_mean"], buf["running_var"], None, training, 0.1, layer.eps, sh.stride,
        sh.padding, sh.dilation, True))
    x = x64.float()
    saved = (gy, x, w, z, y, gamma, mean, invstd, training, list(sh.stride), list(sh.padding), list(sh.dilation))
    with unmodified(grad_y=gy, x=x, z=z, y=y):
        grads = ctx.module.lib.ops.conv_bn_relu_backward(*saved, TF32)
    torch.cuda.synchronize()
    refs = _audit_backward(*saved)
    bounds = tf32_backward_bounds(*saved)
    for name, actual, expected in zip(("grad_input", "grad_weight", "grad_bias", "grad_gamma (bn weight)",
                                       "grad_beta (bn bias)"), grads, refs):
        if name == "grad_bias" and training:
            continue  # 0 in exact arithmetic (the batch mean cancels it): version 1's checks judge it
        tol = bound_tolerance(*bounds[name]) if name in bounds else GRAD_TOL
        assert_rel_error(actual, expected, tol, f"{what}: {name} (TF32 tensor cores: the README's How it is graded)")


def _tf32_shape(c) -> Shape:
    """An exercise 06 Case (groups 1) as this exercise's Shape, with 2 images where one would leave a
    single value per channel (which training refuses)."""
    p, q = conv_output_hw((c.h, c.w), (c.kh, c.kw), c.stride, c.padding, c.dilation)
    n = 2 if c.n * p * q == 1 else c.n
    return Shape(c.name, n, c.cin, c.h, c.w, c.cout, c.kh, c.kw, c.stride, c.padding, c.dilation, c.bias)


# ----------------------------------------------------------------------------- the spec
class ConvBNReLUTrainingSpec(Spec):
    def checks(self) -> list[Check]:
        checks = CheckList()

        def layer(ctx, sh, name):
            return Layer(ctx.generator(name + "-init"), sh)

        for sh in SHAPES:
            checks.add(f"forward[train-{sh.name}]", lambda ctx, sh=sh, n=f"forward[train-{sh.name}]":
                       check_step(ctx, layer(ctx, sh, n), True, n, backward=False))
        for sh in EVAL_SHAPES:
            checks.add(f"forward[eval-{sh.name}]", lambda ctx, sh=sh, n=f"forward[eval-{sh.name}]":
                       check_step(ctx, layer(ctx, sh, n), False, n, backward=False))
        checks.add("forward[own kernels ran]", self._check_own_forward, slow=True)
        # the README asks for stable statistics: channels whose values sit far from 0 relative to their
        # spread (E[z^2] - E[z]^2 in float32 loses the variance there; two passes or Welford keep it)
        stable = Shape("mean-30x-std", 8, 16, 14, 14, 32, 3, 3, padding=(1, 1), bias=True)
        checks.add("forward[stable statistics: channel means 30 times their spread]",
                   lambda ctx, n="forward[stable statistics]": check_step(
                ctx, Layer(ctx.generator(n + "-init"), stable, bias_offset=30.0), True, n, backward=False))
        checks.add("running_stats[momentum=0.1]", lambda ctx: check_running_stats(ctx, 0.1, "momentum=0.1"))
        checks.add("running_stats[momentum=0.3]", lambda ctx: check_running_stats(ctx, 0.3, "momentum=0.3"))
        checks.add("running_stats[momentum=None]",
                   lambda ctx: check_running_stats(ctx, None, "momentum=None (cumulative average)"))
        # the edges of momentum's domain: 0.0 leaves the statistics as they were (not None's average), 1.0
        # keeps the last batch's alone
        checks.add("running_stats[momentum=0.0]", lambda ctx: check_running_stats(ctx, 0.0, "momentum=0.0"))
        checks.add("running_stats[momentum=1.0]", lambda ctx: check_running_stats(ctx, 1.0, "momentum=1.0"))
        # channels near 1000 with a spread near 1: E[z^2] - E[z]^2 in float32 loses the running variance
        checks.add("running_stats[stable statistics: channel means 1000 times their spread]",
                   lambda ctx: check_running_stats(ctx, 0.1, "channel means near 1000, spread near 1",
                                                   bias_offset=1000.0))
        for sh in SHAPES:
            checks.add(f"backward[train-{sh.name}]", lambda ctx, sh=sh, n=f"backward[train-{sh.name}]":
                       check_step(ctx, layer(ctx, sh, n), True, n, backward=True, forward=False))
        for sh in EVAL_SHAPES:
            checks.add(f"backward[eval-{sh.name}]", lambda ctx, sh=sh, n=f"backward[eval-{sh.name}]":
                       check_step(ctx, layer(ctx, sh, n), False, n, backward=True, forward=False))
        checks.add("backward[own kernels ran]", self._check_own_backward, slow=True)
        small = (Shape("small", 2, 3, 6, 5, 4, 3, 3, padding=(1, 1), bias=True),
                 Shape("small-strided", 2, 2, 7, 6, 3, 3, 2, stride=(2, 1), padding=(1, 0), dilation=(1, 2), bias=True),
                 Shape("small-nobias", 3, 2, 4, 4, 5, 1, 1))
        for sh in small:
            for training in (True, False):
                mode = "train" if training else "eval"
                name = f"autograd[gradcheck float64 {mode} {sh.name}]"
                checks.add(name, lambda ctx, sh=sh, t=training, n=name: check_gradcheck(ctx, sh, t, n))
        checks.add("module[state_dict, train/eval]", check_module_state)
        checks.add("module[training curve]", check_training_curve)
        # under grading's math state (TF32 off): a default that ignores torch.backends.cudnn.allow_tf32 fails
        name = "forward[version=None with allow_tf32 off: strict fp32]"
        checks.add(name, lambda ctx, n=name: check_step(ctx, layer(ctx, SHAPES[5], n), True, n, backward=False,
                                                        version=None))
        self._tf32_checks(checks)
        self._input_checks(checks)
        return checks

    def _tf32_checks(self, checks: CheckList) -> None:
        """Version 2 (the three convolutions on TF32 tensor cores), float32 only: its own kernels ran (forward
        and backward, training and eval, through autograd); the forward op's outputs and the running
        statistics on every shape, in training and eval, random shapes and inputs near 1e5 and 1e-6 (FP16
        cannot hold them, TF32 can); the backward op on saved tensors from the float64 forward. Each within
        its TF32 bound. Below compute capability 8.0 (a T4) not run, at no cost."""
        def add(name, run, slow=False):
            def run_here(ctx):
                require_capability(*TENSOR_CORE_CAPABILITY, f"version {TF32} (TF32 tensor cores)")
                return run(ctx)
            checks.add(f"{TF32_GROUP}[{name}]", run_here, slow=slow)

        add("own kernels ran", lambda ctx: (self._check_own_forward(ctx, TF32), self._check_own_backward(ctx, TF32)),
            slow=True)
        for training, shapes in ((True, SHAPES), (False, EVAL_SHAPES)):
            mode = "train" if training else "eval"
            for sh in shapes:
                name = f"{TF32_GROUP}[forward {mode}-{sh.name}]"
                add(f"forward {mode}-{sh.name}", lambda ctx, sh=sh, t=training, n=name: check_tf32_forward(ctx, sh, t, n))
            for sh in shapes:
                name = f"{TF32_GROUP}[backward {mode}-{sh.name}]"
                add(f"backward {mode}-{sh.name}", lambda ctx, sh=sh, t=training, n=name: check_tf32_backward(ctx, sh, t, n))
        for i in range(RANDOM_TF32_CASES):
            name = f"{TF32_GROUP}[random shape {i}]"

            def random_step(ctx, n=name):
                sh = _tf32_shape(random_case(ctx.generator(n, device="cpu"), n))
                check_tf32_forward(ctx, sh, True, n)
                check_tf32_backward(ctx, sh, True, n)
            add(f"random shape {i}", random_step)
        for i, (path, sh) in enumerate(PROBE_SHAPES):
            for probe in probes.PROBES:
                name = probes.check_name(TF32_GROUP, probe, None if i == 0 else path)
                add(name[len(TF32_GROUP) + 1:-1], lambda ctx, sh=sh, p=probe, pa=path: (
                    check_tf32_forward(ctx, sh, True, probes.what(TF32_GROUP, p, pa + ", forward"), probe=p),
                    check_tf32_backward(ctx, sh, p.kind == "range", probes.what(TF32_GROUP, p, pa + ", backward"),
                                        probe=p)))
        # last: a wrong precision is reported by the value checks first
        add(f"{TF32_INSTRUCTION.describe()} in its kernels' machine code",
            sass.InstructionCheck(TF32_INSTRUCTION))

    def _input_checks(self, checks: CheckList) -> None:
        def call(mod, x, w, bn_w=None, training=True, stride=1, padding=1, version=STRICT):
            k = w.shape[0]
            dev, dt = w.device, w.dtype
            ones = torch.ones(k, device=dev, dtype=dt)
            return mod.conv_bn_relu(x, w, None, ones if bn_w is None else bn_w, ones * 0, ones * 0, ones.clone(),
                                    torch.zeros((), dtype=torch.long, device=dev), training=training, stride=stride,
                                    padding=padding, version=version)

        def w(c=4, k=6, dtype=torch.float32, device="cuda"):
            return torch.randn(k, c, 3, 3, device=device, dtype=dtype)

        def x(n=2, c=4, dtype=torch.float32, device="cuda"):
            return torch.randn(n, c, 9, 9, device=device, dtype=dtype)

        cases = [
            ("cpu x", lambda m: call(m, x(device="cpu"), w(device="cpu")), ("x",)),  # runs on CPU-only machines too
            ("integer x", lambda m: call(m, x().to(torch.int32), w()), ("x",)),
            ("3-D x", lambda m: call(m, x()[0], w()), ("x",)),
            ("weight channels", lambda m: call(m, x(c=4), w(c=5)), ("weight",)),
            ("weight dtype", lambda m: call(m, x(), w(dtype=torch.float64)), ("weight",)),
            ("bn_weight size", lambda m: call(m, x(), w(), bn_w=torch.ones(5, device="cuda")), ("bn_weight",)),
            ("stride 0", lambda m: call(m, x(), w(), stride=0), ("stride",)),
            ("x smaller than the kernel", lambda m: call(m, x()[:, :, :2, :2], w(), padding=0), ("x",)),
            ("one value per channel in training", lambda m: call(m, x(n=1)[:, :, :3, :3], w(), padding=0), ("x",)),
            ("version 3", lambda m: call(m, x(), w(), version=3), ("version",)),
            # version 2 rounds to TF32, a float32 format: a float64 x is refused, never rounded silently
            ("a float64 x with version 2", lambda m: call(m, x(dtype=torch.float64), w(dtype=torch.float64),
                                                          version=TF32), ("x",)),
        ]
        for label, fn, names in cases:
            checks.add(f"input_checks[{label}]",
                       lambda ctx, fn=fn, names=names, label=label: expect_error(fn, ctx.module, names=names, what=label),
                       needs_gpu=label != "cpu x")

    def _check_own_forward(self, ctx: Context, version: int = STRICT) -> None:
        kernels = TF32_KERNELS if version == TF32 else KERNELS
        for training in (True, False):
            lay = Layer(ctx.generator("own-fwd"), SHAPES[0])
            x = lay.input(ctx.generator("own-fwd-x")).float()
            with torch.no_grad():
                assert_own_kernels(lambda: lay.call(ctx.module, x, training, version), kernels,
                                   f"forward ({'train' if training else 'eval'}, version={version})")

    def _check_own_backward(self, ctx: Context, version: int = STRICT) -> None:
        kernels = TF32_KERNELS if version == TF32 else KERNELS
        for training in (True, False):
            lay = Layer(ctx.generator("own-bwd"), SHAPES[3])
            x = lay.input(ctx.generator("own-bwd-x")).float().requires_grad_()
            y = lay.call(ctx.module, x, training, version)
            gy = torch.randn_like(y)
            torch.cuda.synchronize()
            assert_own_kernels(lambda: y.backward(gy), kernels,
                               f"backward ({'train' if training else 'eval'}, version={version})")

    def module_options(self) -> list[ModuleOptions]:
        """FusedConvBNReLU.from_modules, every option of the Conv2d and the BatchNorm2d it copies, in
        training and in eval; the padding modes and the BatchNorm2d without affine parameters or running
        statistics it does not support are refused."""
        return [ModuleOptions(
            "FusedConvBNReLU.from_modules", "module",
            base={"bias": True, "padding": 2, "padding_mode": "zeros", "eps": 1e-5, "momentum": 0.1, "affine": True,
                  "track_running_stats": True, "mode": "train"},
            options={"bias": values(False), "padding": values("same", "valid"),
                     "padding_mode": values("reflect", "replicate", "circular",
                                            refused=("reflect", "replicate", "circular")),
                     "eps": values(1e-3, 0.1), "momentum": values(0.0, None, 1.0, 0.3),
                     "affine": values(False, refused=(False,)),
                     "track_running_stats": values(False, refused=(False,)), "mode": values("train", "eval")},
            check=check_from_modules)]

    # --- the bad-input audit (tests/test_input_audit.py) -----------------------------------------
    def audit_calls(self, device, dtype) -> list[AuditCall]:
        """The Python function (training), and the two ops in training and in eval; the backward's
        saved tensors come from the float64 reference forward. An empty height or width of x leaves
        no output (rejected)."""
        def r(*shape, seed, scale=1.0, offset=0.0):
            return audit_randn(*shape, device=device, dtype=dtype, seed=seed, scale=scale, offset=offset)

        x, w, b = r(2, 3, 6, 7, seed=1), r(4, 3, 3, 2, seed=2, scale=0.3), r(4, seed=3, scale=0.2)
        # stride, padding, dilation: the output is 4 x 3, so that its edge of one output row holds 3 values per
        # channel: over 2, BatchNorm's normalized values are +-sqrt(var / (var + eps)) whatever x is, and the
        # gradient reaching x, eps / (var + eps) of the others' scale, is rounding in float32
        conv = ((1, 2), (1, 0), (2, 1))
        # and a pointwise (1x1, stride 1, no padding) convolution, the other kind a model is made of: the
        # generated checks (which kernels ran among them) meet it in every run
        x1, w1 = r(2, 3, 5, 4, seed=20), r(4, 3, 1, 1, seed=21, scale=0.5)
        pointwise = ((1, 1), (0, 0), (1, 1))

        def r32(*shape, seed, scale=1.0, offset=0.0):  # version 2 takes float32 only
            return audit_randn(*shape, device=device, dtype=torch.float32, seed=seed, scale=scale, offset=offset)

        # version 2's: stride 2 and 3 with padding on both axes (a dilated 3 x 4 kernel, 3 x 3 outputs: its
        # one-output-row edge keeps 3 values per channel, as the first call's): x one pixel below its smallest
        # then leaves (-1) / stride = 0 in C++'s division, an output of 1 where PyTorch's floor leaves none
        # (conv_smallest_input's refused edges)
        x2, w2 = r32(2, 3, 7, 8, seed=23), r32(4, 3, 3, 4, seed=24, scale=0.3)
        b32, x1_32, w1_32 = (t.float() for t in (b, x1, w1))
        return (_calls(r, x, w, b, conv, 4, seed=4) + _calls(r, x1, w1, b, pointwise, 4, seed=22, kind="pointwise")
                + _calls(r32, x2, w2, b32, ((2, 3), (1, 1), (2, 1)), 4, seed=4, version=TF32)
                + _calls(r32, x1_32, w1_32, b32, pointwise, 4, seed=22, kind="pointwise", version=TF32))

    def random_calls(self, g, device, dtype) -> list[AuditCall]:
        """Per version, the two ops on a convolution of random geometry (exercise 06's generator);
        version 2 in float32."""
        calls = []
        for version in (STRICT, TF32):
            c = random_case(g, f"random {version}")
            p, q = conv_output_hw((c.h, c.w), (c.kh, c.kw), c.stride, c.padding, c.dilation)
            if c.n * p * q < 3:  # F.batch_norm refuses one value per channel in training, and over two the
                c = replace(c, n=4)  # gradient to x is rounding (audit_calls): at least 4 values
            seed = int(torch.randint(0, 2**31, (1,), generator=g))
            d = torch.float32 if version == TF32 else dtype

            def r(*shape, seed, scale=1.0, offset=0.0, d=d):
                return audit_randn(*shape, device=device, dtype=d, seed=seed, scale=scale, offset=offset)

            x = r(c.n, c.cin, c.h, c.w, seed=seed)
            w = r(c.cout, c.cin, c.kh, c.kw, seed=seed + 1, scale=(c.cin * c.kh * c.kw) ** -0.5)
            b = r(c.cout, seed=seed + 2, scale=0.2) if c.bias else None
            # not the Python function: its gradients meet the ReLU's kink, where rounding decides (see the
            # module's docstring); the fixed audit calls check those
            calls += [call for call in _calls(r, x, w, b, (c.stride, c.padding, c.dilation), c.cout, seed + 3,
                                              version=version) if call.op.startswith("lib.ops.")]
        return calls

    def kernel_rule(self):
        return KernelRule(tuple(dict.fromkeys(KERNELS + TF32_KERNELS)))

    # --- speed ---------------------------------------------------------------------------------
    def benchmark(self) -> Benchmark:
        n, c, h, w, k = BENCH

        def make_inputs(seed: int):
            g = torch.Generator(device="cuda")
            g.manual_seed(seed)
            x = torch.randn(n, c, h, w, generator=g, device="cuda").requires_grad_()
            wt = (torch.randn(k, c, 3, 3, generator=g, device="cuda") / (c * 9) ** 0.5).requires_grad_()
            gamma = (1 + 0.2 * torch.randn(k, generator=g, device="cuda")).requires_grad_()
            beta = (0.1 * torch.randn(k, generator=g, device="cuda")).requires_grad_()
            gy = torch.randn(n, k, h, w, generator=g, device="cuda")
            buffers = (torch.full((k,), RUNNING_MEAN_0, device="cuda"), torch.full((k,), RUNNING_VAR_0, device="cuda"),
                       torch.zeros((), dtype=torch.long, device="cuda"))
            return x, wt, gamma, beta, gy, buffers

        return Benchmark(
            label="fp32 (TF32 off) train fwd+bwd, 32x64x56x56, 64->64, 3x3, pad 1",
            make_inputs=make_inputs,
            call=fused_step,
            baseline=eager_step,
            work=3 * 2.0 * n * k * h * w * c * 9,  # forward, grad_input and grad_weight convolutions
            unit="FLOP",
            reference=whole_reference(_reference_step),
            # the gradients loosely: a handful of ReLU-kink flips between float32 and float64 move them ~1e-3
            tolerance=lambda inp: [Y_TOL, 1e-2, 1e-2, 1e-2, 1e-2, STATS_TOL, STATS_TOL],
            output_groups=("forward", "backward", "backward", "backward", "backward", "running_stats", "running_stats"),
            kernels=KernelRule(KERNELS),
            min_bytes=4.0 * (2 * n * c * h * w + 4 * n * k * h * w),
        )


BENCH = (32, 64, 56, 56, 64)
# The timed step's running statistics start here in every input set (a refill restores them), so the
# reference knows them without reading buffers the step has updated since
RUNNING_MEAN_0, RUNNING_VAR_0, BENCH_MOMENTUM = 0.0, 1.0, 0.1


def fused_step(mod, inp, version: int = STRICT):
    """y, the four gradients, and the running statistics the step updated (copies: an output may not
    share memory with an input), so that they too are verified at the benchmark's shape."""
    x, wt, gamma, beta, gy, (rm, rv, nbt) = inp
    y = mod.conv_bn_relu(x, wt, None, gamma, beta, rm, rv, nbt, training=True, momentum=BENCH_MOMENTUM, eps=1e-5,
                         stride=1, padding=1, version=version)
    return (y, *torch.autograd.grad(y, (x, wt, gamma, beta), gy), rm.clone(), rv.clone())


def eager_step(inp):
    x, wt, gamma, beta, gy, (rm, rv, nbt) = inp
    y = F.relu(F.batch_norm(F.conv2d(x, wt, None, 1, 1), rm, rv, gamma, beta, True, BENCH_MOMENTUM, 1e-5))
    return (y, *torch.autograd.grad(y, (x, wt, gamma, beta), gy), rm.clone(), rv.clone())


def _reference_step(inp):
    """The training step in float64: y, the gradients of x, the weight, gamma and beta, and the
    running mean and (unbiased) variance after it."""
    x, wt, gamma, beta, gy, _ = inp
    leaves = [t.detach().double().requires_grad_() for t in (x, wt, gamma, beta)]
    with torch.enable_grad():
        z = F.conv2d(leaves[0], leaves[1], None, 1, 1)
        y = F.relu(F.batch_norm(z, None, None, leaves[2], leaves[3], True, 0.0, 1e-5))
        grads = torch.autograd.grad(y, leaves, gy.double())
    z = z.detach()
    m = BENCH_MOMENTUM
    running_mean = (1 - m) * RUNNING_MEAN_0 + m * z.mean((0, 2, 3))
    running_var = (1 - m) * RUNNING_VAR_0 + m * z.var((0, 2, 3), unbiased=True)
    return [y.detach(), *grads, running_mean, running_var]


# The launchers' branches (grader/verify/paths.py): forward in training and eval, grad_x at unit stride or
# not, grad_w whole or split, per version (2: TF32, float32), with and without a bias, momentum or the
# cumulative average, eval keeping z or not
_BOTH = ("float32", "float64")
PATHS = {
    "v1.forward.train": _BOTH, "v1.forward.eval": _BOTH, "v1.dgrad.unit_stride": _BOTH, "v1.dgrad.strided": _BOTH,
    "v1.wgrad": _BOTH, "wgrad.whole": _BOTH, "wgrad.splitk": _BOTH,
    "v2.forward.train": (), "v2.forward.eval": (), "v2.forward.vec_w": (), "v2.forward.scalar_w": (),
    "v2.dgrad.unit_stride.vec_w": (), "v2.dgrad.unit_stride.scalar_w": (), "v2.dgrad.strided": (), "v2.wgrad": (),
    "bias": _BOTH, "no_bias": _BOTH, "train.momentum": _BOTH, "train.cumulative_average": _BOTH,
    "eval": _BOTH, "eval.keep_z": _BOTH,
}

SPEC = ConvBNReLUTrainingSpec(
    exercise="09_conv_bn_relu_training",
    title="Conv2d + BatchNorm2d + ReLU, training (full backward)",
    module="conv_bn_relu_training.py",
    paths=PATHS,
    points={"forward": 3, "running_stats": 2, "backward": 4, "autograd": 2, "module": 2, TF32_GROUP: 2,
            "input_checks": 1, "performance": 3},
    perf_tiers=((0.5, 0.5), (0.85, 1.0)),
    perf_requires=("forward", "backward"),
    # gradcheck goes through the Python wrapper: PyTorch's own ops there would pass it
    requires={"autograd": ("forward[own kernels ran]", "backward[own kernels ran]")},
    solution_vs_baseline=0.81,  # H100, 2026-11-23 grading run: 18.7 vs 23.1 TFLOP/s
)
