"""Grading for exercise 07, transposed 2-D convolution (NCHW, with groups), and its backward.

The checks are exercise 06's (grader/specs/ex06_conv2d.py), with the weight laid out
(cin, cout / groups, kh, kw), F.conv_transpose2d as the float64 reference, and output_padding; the
autograd group's too, on cases of its own.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from grader.verify.checks import (CheckFailure, assert_rel_error, ends_and_between, require_free_memory,
                                  require_plain_tensor)
from grader.verify.observe import KernelRule
from grader.verify.spec import Benchmark, CheckList, DropIn, conv_transpose_output_hw
from grader.specs.ex06_conv2d import CASES, FP64_CASES, REL_TOL, Case, ConvSpec, randn, whole_reference, with_channels

# Exercise 06's cases (all give a non-empty output when transposed too), and output_padding: with
# a stride > 1 several input sizes of a conv2d give one output size, and output_padding picks one.
T_CASES = CASES + [
    Case("stride 2, output_padding 1", 2, 6, 9, 11, 5, 3, 3, (2, 2), (1, 1), (1, 1), True, (1, 1)),
    Case("stride (3, 2), output_padding (2, 0)", 2, 4, 7, 8, 6, 4, 3, (3, 2), (1, 0), (1, 1), True, (2, 0)),
    Case("dilation 2, stride 1, output_padding 1", 2, 3, 8, 9, 4, 3, 3, (1, 1), (1, 1), (2, 2), True, (1, 1)),
    Case("stride 2, 64 -> 32, 4x4 kernel (upsampling)", 2, 64, 12, 10, 32, 4, 4, (2, 2), (1, 1)),
]
T_FP64_CASES = FP64_CASES + T_CASES[-4:-1]
# and with groups and output_padding together (exercise 06's grouped cases are among CASES)
T_CASES += [
    Case("groups 3, stride 2, output_padding 1", 2, 6, 9, 11, 9, 3, 3, (2, 2), (1, 1), (1, 1), True, (1, 1), groups=3),
    Case("depthwise 4x4 stride 2 (upsampling)", 2, 16, 12, 10, 16, 4, 4, (2, 2), (1, 1), groups=16),
]
T_FP64_CASES += T_CASES[-2:]
# version 2's stride phases where the stride and the dilation share a factor: rows and columns no tap
# reaches (the bias alone), taps a step apart, phases of several tap rows and none
T_CASES += [
    Case("stride 2, dilation 2: odd rows and columns reached by no tap", 2, 3, 7, 6, 5, 3, 3, (2, 2), (1, 1), (2, 2),
         True, (1, 1)),
    Case("stride (3, 2), dilation (2, 3)", 2, 4, 6, 7, 6, 3, 2, (3, 2), (2, 1), (2, 3), True, (1, 0)),
]
# more groups x stride phases than one launch's gridDim.z holds (65535; the launcher's
# `v2.phase_launches`): 256 groups of 2 -> 1 channels at stride (16, 17), 272 phases, 255 a launch (255
# x 256 = 65280 layers), so phases 255-271 go in a second launch; with padding 1 three of them, (15, 0),
# (15, 1) and (15, 16), hold taps (a second launch that restarts at phase 0 never writes them)
PHASE_LAUNCHES = Case("groups 256, stride (16, 17): phases in two launches", 1, 512, 2, 2, 256, 3, 3, (16, 17), (1, 1),
                      groups=256)
T_CASES.append(PHASE_LAUNCHES)
T_FP64_CASES.append(PHASE_LAUNCHES)

# The autograd group's cases (see ex06_conv2d.GRADCHECK_CASES), with output_padding: beyond the
# stride where the dilation allows it, and a padding beyond d (k - 1) (the data gradient's stride-1
# transposed convolution would need a negative padding: its result is padded instead).
T_GRADCHECK_CASES = [
    Case("stride (2, 1), output_padding (1, 0), dilation (1, 2)", 2, 3, 5, 4, 4, 3, 2, (2, 1), (1, 1), (1, 2), True,
         (1, 0)),
    Case("groups 2, stride (1, 3), output_padding (0, 2), padding (2, 0) beyond the kernel", 2, 4, 4, 3, 6, 2, 3,
         (1, 3), (2, 0), (1, 1), True, (0, 2), groups=2),
    Case("depthwise 4x4 stride 2 (upsampling)", 2, 3, 4, 5, 3, 4, 4, (2, 2), (1, 1), groups=3),
    Case("dilation 3, output_padding 2, groups 2", 1, 2, 3, 3, 4, 2, 2, (1, 1), (0, 0), (3, 3), True, (2, 2),
         groups=2),
    Case("4 images in 2 chunks", 4, 2, 24, 24, 3, 3, 3, (1, 1), (1, 1)),
]
T_GRADIENT_CASES = [
    Case("stride (2, 1), output_padding (1, 0), dilation (1, 2)", 2, 6, 6, 5, 8, 3, 2, (2, 1), (1, 1), (1, 2), True,
         (1, 0)),
    Case("1x1", 2, 6, 9, 9, 8, 1, 1),
    Case("groups 4, stride 2", 2, 8, 6, 7, 12, 3, 3, (2, 2), (1, 1), groups=4),
    Case("depthwise 4x4 stride 2", 2, 8, 7, 7, 8, 4, 4, (2, 2), (1, 1), groups=8),
    Case("8 images in chunks, on a side stream", 8, 4, 32, 32, 6, 3, 3, (1, 1), (1, 1)),
]
# A batch whose weight gradient the backward computes in pieces (conv_transpose2d.py's
# `wgrad.batch_pieces`; see ex06_conv2d.HUGE_GRADIENT_CASE): x's planes (n x 75 x 75, one channel) are
# the identity's kernel, which its op indexes with int: pieces of 381,774 images, here one full and one
# of 27,720. A padding of 25 crops y to 27 x 27 (y and its gradient 2.2 GiB); the backward's flipped copy
# of a piece of x adds 8 GiB to x's 8.6: 19.8 GiB free asked.
T_HUGE_GRADIENT_CASE = Case("huge: 409494 images of 75x75, the weight gradient in 2 pieces", 409_494, 1, 75, 75, 1, 3,
                            3, (1, 1), (25, 25), bias=False)


def random_transposed_case(g: torch.Generator, name: str, kind: str = "dense") -> Case:
    """A random transposed convolution, shapes drawn from `g` (CPU), with channels of `kind` (dense,
    grouped or depthwise: ex06_conv2d.with_channels)."""
    def r(lo, hi):
        return int(torch.randint(lo, hi + 1, (1,), generator=g))

    kh, kw = r(1, 5), r(1, 5)
    stride, dilation = (r(1, 3), r(1, 3)), (r(1, 2), r(1, 2))
    h, w = r(1, 24), r(1, 24)
    out_pad = tuple(r(0, max(s, d) - 1) for s, d in zip(stride, dilation))
    padding = []
    for size, k, s, d, op in ((h, kh, stride[0], dilation[0], out_pad[0]), (w, kw, stride[1], dilation[1], out_pad[1])):
        full = (size - 1) * s + d * (k - 1) + op + 1  # output length before cropping the padding
        padding.append(min(r(0, 2), (full - 1) // 2))  # keep at least one output position
    return with_channels(g, Case(name, r(1, 4), r(1, 40), h, w, r(1, 70), kh, kw, stride, tuple(padding), dilation,
                                 bool(r(0, 1)), out_pad), kind)


# version=None where Winograd applies (3 x 3, stride 1, 8 input channels a group) but its transforms
# would hold 36 x max(cin, cout) x tiles >= 2^31 elements: 2 groups of 16 -> 32 channels, padding 1,
# 932,068 images of 5 x 1 (2 tiles of 4 rows each): 36 x 32 x 1,864,136 = 2^31 + 1,025, and the same
# images 1 x 5 (each dimension's tile count varied alone). An estimate counting 5 rows or 5 columns as
# one tile, or cout as weight.shape[1] / groups, falls under it (0.3 GB in, 0.6 GB out)
PAST_WINOGRAD = ((932_068, 16, 5, 1), (932_068, 16, 1, 5))


def _output_sizes(module: torch.nn.ConvTranspose2d, x_shape: tuple) -> list[tuple[dict, bool]]:
    """forward(x, output_size=...) as a UNet's decoder calls it: the largest size along each axis as (H, W),
    the smallest height with the largest width as the whole shape, and one row past the largest, which
    torch.nn's module refuses (torch.nn.ConvTranspose2d._output_padding's range: a stride s leaves s sizes)."""
    smallest = conv_transpose_output_hw(x_shape[2:], module.kernel_size, module.stride, module.padding, (0, 0),
                                        module.dilation)
    largest = [smallest[d] + module.stride[d] - 1 for d in range(2)]
    return [({"output_size": largest}, False),
            ({"output_size": (x_shape[0], module.out_channels, smallest[0], largest[1])}, False),
            ({"output_size": [largest[0] + 1, smallest[1]]}, True)]


class ConvTranspose2dSpec(ConvSpec):
    def checks(self) -> CheckList:
        checks = super().checks()
        checks.add("winograd[version=None past version 3's 2^31-element transforms]", self._check_default_past_winograd,
                   slow=True)
        return checks

    def _check_default_past_winograd(self, ctx) -> None:
        for shape in PAST_WINOGRAD:
            self._default_past_winograd(ctx, shape)

    def _default_past_winograd(self, ctx, shape: tuple) -> None:
        n, cin, h, w = shape
        require_free_memory(n * (cin + 2 * cin) * h * w * 4 + (1 << 28), "the check of version=None past Winograd's limit")
        g = ctx.generator(f"past winograd {shape}")
        x = torch.randn(shape, generator=g, device="cuda")
        weight = torch.randn((cin, cin, 3, 3), generator=g, device="cuda") * (cin * 9) ** -0.5
        bias = torch.randn(2 * cin, generator=g, device="cuda")
        what = f"winograd[version=None, x {shape}, weight {tuple(weight.shape)}, groups 2, padding 1]"
        try:
            y = ctx.module.conv_transpose2d(x, weight, bias, 1, 1, 0, 2, 1)
            torch.cuda.synchronize()
        except (RuntimeError, ValueError, TypeError) as e:
            raise CheckFailure(f"{what}: {type(e).__name__}: {str(e).splitlines()[0][:300]} (version=None must choose a "
                               "version that takes these arguments: version 3's transforms would hold 2^31 "
                               "elements or more)") from None
        require_plain_tensor(y, what)
        if tuple(y.shape) != (n, 2 * cin, h, w):
            raise CheckFailure(f"{what}: shape {tuple(y.shape)}, expected {(n, 2 * cin, h, w)}")
        # each image on its own: the last 32, the first 16 and 16 between
        picks = ends_and_between(n, 32, 16, 16, ctx.seed_for("past winograd"))
        expected = F.conv_transpose2d(x[picks].double(), weight.double(), bias.double(), 1, 1, 0, 2, 1)
        assert_rel_error(y[picks], expected, REL_TOL[torch.float32], f"{what}, on images {n - 32} to {n - 1}, 0 to 15 and 16 between")

    def drop_ins(self) -> list[DropIn]:
        """ConvTranspose2d with torch.nn's defaults, every argument positionally, and the tuples by keyword."""
        constructions = (((5, 8, 3), {}), ((6, 9, (3, 2), 2, 1, 1, 3, False, 2), {}),
                         ((4, 6, 3), {"stride": (2, 1), "padding": (1, 0), "output_padding": (1, 0), "groups": 2,
                                      "dilation": (1, 2), "bias": False}))
        return [DropIn("ConvTranspose2d", torch.nn.ConvTranspose2d, constructions,
                       input_shape=lambda args, kwargs: (2, args[0], 7, 6), tol=REL_TOL[torch.float32], grad_tol=1e-4,
                       group="registration",  # fitting PyTorch as torch.nn's does, beside opcheck
                       forward_calls=_output_sizes)]

    def benchmark(self) -> Benchmark:
        # the gradient, with respect to its input, of exercise 06's benchmark convolution
        n, cin, h, w, cout, k = 32, 64, 56, 56, 64, 3

        def make_inputs(seed: int):
            g = torch.Generator(device="cuda")
            g.manual_seed(seed)
            return (randn(g, (n, cin, h, w), torch.float32), randn(g, (cin, cout, k, k), torch.float32, (cout * k * k) ** -0.5))

        return Benchmark(
            label="strict fp32, 32x64x56x56, 64->64, 3x3, pad 1",
            make_inputs=make_inputs,
            call=lambda mod, inp: mod.conv_transpose2d(inp[0], inp[1], None, 1, 1, version=2),
            baseline=lambda inp: F.conv_transpose2d(inp[0], inp[1], None, 1, 1),
            # every input pixel times every tap and output channel (taps cropped by the padding included)
            work=2 * n * cin * h * w * cout * k * k,
            unit="FLOP",
            reference=whole_reference(lambda inp: F.conv_transpose2d(inp[0].double(), inp[1].double(), None, 1, 1)),
            tolerance=lambda inp: [REL_TOL[torch.float32]],
            kernels=KernelRule(("conv_transpose2d_kernel2",)),
            min_bytes=4 * (2 * n * cin * h * w + cout * cin * k * k),
        )

    def versions(self):
        return {"kernel1 gather": lambda mod, inp: mod.conv_transpose2d(inp[0], inp[1], None, 1, 1, version=1),
                "kernel2 implicit GEMM": lambda mod, inp: mod.conv_transpose2d(inp[0], inp[1], None, 1, 1, version=2),
                "kernel3 Winograd": lambda mod, inp: mod.conv_transpose2d(inp[0], inp[1], None, 1, 1, version=3)}


# The launchers' branches (grader/verify/paths.py): version 2's kernels (stride phases, 3x3, 1x1, other
# filters; groups; phases past one launch's gridDim.z), version 3 (Winograd), the weight gradient's chunks
_BOTH = ("float32", "float64")
PATHS = {
    "v1": _BOTH, "v2.phases": _BOTH, "v2.3x3": _BOTH, "v2.1x1": _BOTH, "v2.one_phase": _BOTH, "v2.grouped": _BOTH,
    "v2.phase_launches": _BOTH, "v3.winograd": _BOTH, "v3.grouped": _BOTH,
    "wgrad.chunked": _BOTH, "wgrad.batch_pieces": ("float32",),
}

SPEC = ConvTranspose2dSpec(
    exercise="07_conv_transpose2d",
    title="transposed 2-D convolution",
    module="conv_transpose2d.py",
    paths=PATHS,
    points={"gather": 2, "implicit_gemm": 3, "winograd": 2, "autograd": 2, "input_checks": 1, "registration": 1,
            "performance": 3},
    perf_requires=("implicit_gemm",),
    # the versions opcheck runs; the backward runs version 2's kernel (the identities call the op itself)
    # version 3's products are version 2's kernel: its group is paid once that kernel's passes
    requires={"registration": ("gather", "implicit_gemm"), "autograd": ("implicit_gemm",),
              "winograd": ("implicit_gemm",)},
    # make bench EX=07 on the H100 (2026-11-26): implicit GEMM 259.1 us, PyTorch (cuDNN, strict fp32)
    # 140.3 us; the gather kernel 1,964 us. With the stride phases (2026-11-27, same timer): 0.53-0.55x;
    # with the 3 x 3 taps as constants (same day, copies beside cuDNN at 154 us): 0.61x; make bench
    # PUBLISH=1 later that day, cuDNN at 140 us: 0.55x
    solution_vs_baseline=0.6,
    op="conv_transpose2d",
    transposed=True,
    versions_graded=(("gather", 1, "conv_transpose2d_kernel1"), ("implicit_gemm", 2, "conv_transpose2d_kernel2"),
                     ("winograd", 3, ("winograd_weight_kernel", "winograd_input_kernel", "conv_transpose2d_kernel2",
                                      "winograd_output_kernel"))),
    winograd_groups=("winograd",),
    cases=tuple(T_CASES),
    fp64_cases=tuple(T_FP64_CASES),
    random_case=random_transposed_case,
    # the backward: gradient values through version 2; each version's backward runs its own kernels
    # (version 3's on the 3 x 3 stride-1 gradient case: its data gradient is version 3 too)
    autograd_version=2,
    gradcheck_cases=tuple(T_GRADCHECK_CASES),
    gradient_cases=tuple(T_GRADIENT_CASES),
    backward_versions=(1, 2, 3),
    huge_gradient_case=T_HUGE_GRADIENT_CASE,
)
