"""Grading for exercise 06, 2-D convolution (NCHW, with groups), every numbered version: the direct
kernel and the implicit GEMM in strict fp32 (and version 2's depthwise path), and the implicit GEMM on
TF32 tensor cores (version 3, groups 1, graded with a tolerance derived from TF32's precision, on GPUs
of compute capability 8.0 and newer); and its backward (group "autograd"), which computes both
gradients with the forward op itself.

Exercise 07 (transposed convolution) reuses the helpers here: the case list, the argument checks,
the autograd group and the strict-fp32 benchmark setup.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

import torch
import torch.nn.functional as F

from grader.verify.checks import (CheckFailure, assert_own_kernels, assert_rel_error, cancelling_terms, expect_error,
                                  poison, require_capability, require_free_memory, terms_norm, unmodified)
from grader.verify import precision as probes
from grader.verify import sass
from grader.verify.observe import KernelRule, kernel_function, observe
from grader.verify.spec import (AuditCall, Benchmark, Check, CheckList, Context, DropIn, Spec, audit_randn,
                                conv_empty_kernel, conv_output_hw, conv_padding_edges, conv_smallest_input,
                                conv_transpose_output_hw, torch_defaults, values)

# Normwise relative error against a float64 reference. A strict-fp32 convolution of these sizes
# is near 1e-7; TF32 or fp16 operands (10-bit mantissa) give about 1e-3 and fail.
REL_TOL = {torch.float32: 1e-5, torch.float64: 1e-11}

# --- version 3, TF32 tensor cores: a tolerance derived from the precision (as 05's kernel 5) -------
# Each operand rounded to TF32 (unit roundoff 2^-11) changes each product x w by at most 2 u, randomly
# signed: over the K = cin kh kw products of an output their errors add up to about u sqrt(sum (x w)^2)
# (u sqrt(K) times a typical product); the float32 sums add at most sqrt(K) 2^-24 of the terms'
# magnitude (probabilistically), the bias and the result one float32 rounding. Per output:
#
#     bound = 5 u sqrt(conv(x^2, w^2)) + 4 sqrt(K) 2^-24 (conv(|x|, |w|) + |b|) + 2^-24 |y|
#
# compared normwise, ||y - ref|| / ||ref|| <= ||bound|| / ||ref||: about 5 u (2.4e-3) on random data,
# where TF32 lands near 4e-4 and a dropped K step or a wrong fragment near 1e-1 and above. FP16 has TF32's
# 10-bit mantissa, so ordinary values cannot tell them apart; its 5 exponent bits can: the group also
# convolves inputs near 1e5 (FP16 overflows at 65504) and near 1e-6 (below FP16's smallest normal), which
# TF32 (float32's 8 exponent bits) holds. The strict groups' 1e-5 fails TF32 (about 4e-4). Those range
# probes and the positive one (x and weight in [0.5, 1.5): a truncated operand's bias adds up past the
# bound, K >= grader.verify.precision.POSITIVE_MIN_K) run on every path of version 3's plan (PROBE_CASES).
TF32_U = 2.0**-11
FP32_U = 2.0**-24
OPERAND_SIGMAS = 5.0
SUM_SIGMAS = 4.0
RANGE_SCALES = probes.RANGE_SCALES
TENSOR_CORE_CAPABILITY = (8, 0)


def clean64(t):
    """t in float64, non-finite values as 0 (None stays None)."""
    return None if t is None else torch.nan_to_num(t.detach().double(), nan=0.0, posinf=0.0, neginf=0.0)


def tf32_products_bound(op, a, b, k: int, bias=None):
    """(reference, bound) of a bilinear op(a, b) whose outputs each sum k products of an element of a
    and one of b, computed on TF32 tensor cores: op in float64 on the inputs (non-finite values as 0),
    and per output the bound above. Convolutions (tf32_bound) and the weight gradient (exercise 09)."""
    a64, b64, c64 = clean64(a), clean64(b), clean64(bias)
    ref = op(a64, b64)
    spread = terms_norm(op, (a64, b64))
    magnitude = op(a64.abs(), b64.abs())
    if c64 is not None:
        shape = [1, -1] + [1] * (ref.dim() - 2)
        ref, magnitude = ref + c64.view(shape), magnitude + c64.abs().view(shape)
    bound = (OPERAND_SIGMAS * TF32_U * spread + SUM_SIGMAS * k ** 0.5 * FP32_U * magnitude) * (1 + FP32_U) \
        + FP32_U * ref.abs()
    return ref, bound


def tf32_bound(x, w, b, stride, padding, dilation, output_padding=None, groups=1):
    """(reference, bound): the convolution in float64 and, per output, the error TF32 tensor cores may
    make on it (the bound above; a transposed convolution where output_padding is given), from the
    inputs themselves (float64, on their device; non-finite inputs count as 0). Exercises 08 and 09
    derive their fused layers' tolerances from it."""
    transposed = output_padding is not None
    conv = F.conv_transpose2d if transposed else F.conv2d
    extra = ({"output_padding": output_padding} if transposed else {}) | {"groups": groups}
    k = (w.shape[0] // groups if transposed else w.shape[1]) * w.shape[2] * w.shape[3]
    return tf32_products_bound(lambda a, kernel: conv(a, kernel, None, stride=stride, padding=padding,
                                                      dilation=dilation, **extra), x, w, k, b)


def tf32_tolerance(x, w, b, stride, padding, dilation, output_padding=None, groups=1) -> float:
    """The normwise relative error TF32 tensor cores may make on this convolution: ||bound|| / ||ref||
    of tf32_bound."""
    ref, bound = tf32_bound(x, w, b, stride, padding, dilation, output_padding, groups)
    norm = torch.linalg.vector_norm(ref).item()
    allowed = torch.linalg.vector_norm(bound).item()
    return allowed / norm if norm > 0 else allowed


# --- the backward (group "autograd") ----------------------------------------------------------------
AUTOGRAD = "autograd"
# PyTorch operators the backward must not call (substrings of aten:: names): its convolutions and
# matrix products; its elementwise ops (zeros, strided copies, flips, sums) may run beside the op
NOT_IN_BACKWARD = ("conv", "cudnn", "mm", "matmul", "einsum", "linear", "tensordot")
RANDOM_GRADIENT_CASES = 6  # the kinds in turn: dense, grouped, depthwise


@dataclass(frozen=True)
class Case:
    """One convolution: x (n, cin, h, w), weight for cin -> cout with a kh x kw kernel."""

    name: str
    n: int
    cin: int
    h: int
    w: int
    cout: int
    kh: int
    kw: int
    stride: tuple[int, int] = (1, 1)
    padding: tuple[int, int] = (0, 0)
    dilation: tuple[int, int] = (1, 1)
    bias: bool = True
    output_padding: tuple[int, int] = (0, 0)  # transposed convolution only
    groups: int = 1  # divides cin and cout


def _sq(n, cin, hw, cout, k, s, p, bias=True, name=""):
    return Case(name or f"k{k}s{s}p{p}", n, cin, hw, hw, cout, k, k, (s, s), (p, p), (1, 1), bias)


# The seed's six square geometries (kernel, stride, padding), exercise 10's too
SQUARE_GEOMETRIES = ((3, 1, 0), (3, 1, 1), (3, 2, 1), (1, 1, 0), (1, 2, 0), (7, 2, 3))
# The square cases, then the shapes that break naive indexing: non-square inputs, kernels,
# strides, paddings and dilations (a swapped axis shows), batch 1, channel counts off multiples of
# the 64-wide tiles, im2col lengths (cin * kh * kw) off multiples of 8, no bias.
CASES = [
    *(_sq(2, 5, 19, 7, k, s, p) for k, s, p in SQUARE_GEOMETRIES),
    Case("non-square input", 3, 4, 13, 29, 6, 3, 3, (1, 1), (1, 1)),
    Case("non-square kernel 1x5", 2, 3, 11, 23, 5, 1, 5, (1, 1), (0, 2)),
    Case("non-square kernel 4x2", 2, 3, 12, 9, 5, 4, 2, (1, 1), (1, 0)),
    Case("stride (2, 1)", 2, 3, 17, 15, 4, 3, 3, (2, 1), (1, 1)),
    Case("stride (1, 3)", 2, 3, 17, 15, 4, 3, 3, (1, 3), (1, 1)),
    Case("padding (0, 2)", 2, 3, 10, 14, 4, 3, 3, (1, 1), (0, 2)),
    Case("dilation (2, 3)", 2, 3, 21, 18, 5, 3, 3, (1, 2), (2, 3), (2, 3)),
    Case("padding > kernel / 2", 1, 2, 6, 7, 3, 3, 3, (1, 1), (2, 2)),
    Case("kernel = padded input", 2, 3, 5, 6, 4, 7, 8, (1, 1), (1, 1)),
    Case("batch 1, 1 channel", 1, 1, 9, 11, 1, 3, 3, (1, 1), (1, 1)),
    Case("no bias", 2, 5, 12, 12, 7, 3, 3, (1, 1), (1, 1), bias=False),
    Case("odd channels 67 -> 65", 2, 67, 9, 9, 65, 3, 3, (1, 1), (1, 1)),
    Case("channels 96 -> 130, many tiles", 3, 96, 20, 21, 130, 3, 3, (1, 1), (1, 1)),
    Case("64 -> 64, 28x28 (the benchmark's kind)", 4, 64, 28, 28, 64, 3, 3, (1, 1), (1, 1)),
    Case("output 1x1 per image, 257 images", 257, 3, 3, 3, 5, 3, 3),
    # enough output pixels that version 2 takes its 128-pixel tiles (the benchmark's path)
    Case("2x8x190x190, 8 -> 72 (large tiles)", 2, 8, 190, 190, 72, 3, 3, (1, 1), (1, 1)),
]
# Grouped convolutions, graded in every version's group: depthwise (groups == cin == cout: version 2
# takes its depthwise kernel), a channel multiplier of 2, ResNeXt's 32 groups of 4 channels, a grouped
# 1x1 (ShuffleNet), and odd sizes, stride 2, dilation and a kernel of another shape with groups. Each
# group's channels are few and unlike its neighbours' offsets, so a wrong group offset shows.
GROUPED_CASES = [
    Case("depthwise 3x3", 2, 12, 17, 23, 12, 3, 3, (1, 1), (1, 1), groups=12),
    Case("depthwise 3x3 stride 2", 2, 16, 33, 28, 16, 3, 3, (2, 2), (1, 1), groups=16),
    Case("depthwise 3x3, 64x64 planes (2 row tiles)", 1, 4, 64, 64, 4, 3, 3, (1, 1), (1, 1), groups=4),
    Case("depthwise x2 multiplier", 2, 8, 19, 15, 16, 3, 3, (2, 2), (1, 1), groups=8),
    Case("resnext 32 groups of 4", 2, 128, 14, 13, 128, 3, 3, (1, 1), (1, 1), groups=32),
    Case("grouped 1x1, 3 groups", 3, 9, 10, 7, 6, 1, 1, groups=3),
    Case("groups 2, odd sizes, stride (2, 1)", 2, 6, 21, 18, 10, 3, 5, (2, 1), (1, 2), (1, 2), groups=2),
    Case("groups 4, dilation 2, no padding", 1, 12, 16, 15, 8, 3, 3, (1, 1), (0, 0), (2, 2), False, groups=4),
    Case("groups 2, 70 channels a group (two channel tiles)", 2, 10, 9, 11, 140, 3, 3, (1, 1), (1, 1), groups=2),
    # depthwise with a 2x2 filter dilated to 81 x 81 pixels: one output's input is more than version 2's
    # depthwise tile holds (6144 floats, 3072 doubles), so its GEMM takes the call (`v2.depthwise_to_gemm`)
    Case("depthwise 2x2 dilation 80 (no depthwise tile fits: the GEMM)", 2, 3, 83, 85, 3, 2, 2, (1, 1), (1, 1),
         (80, 80), groups=3),
]
CASES += GROUPED_CASES
# in float64 too: the square cases, a stride, a dilation, odd channels, version 2's 128-pixel tiles (its
# `v2.gemm128/float64`), and grouped ones, the GEMM taking a depthwise call among them
FP64_CASES = [c for c in CASES if c.name.startswith("k")] + [
    c for c in CASES if c.name in ("stride (2, 1)", "dilation (2, 3)", "odd channels 67 -> 65",
                                   "2x8x190x190, 8 -> 72 (large tiles)", "depthwise 3x3", "depthwise x2 multiplier",
                                   "resnext 32 groups of 4", "groups 2, odd sizes, stride (2, 1)",
                                   "depthwise 2x2 dilation 80 (no depthwise tile fits: the GEMM)")]
RANDOM_CASES = 9  # the kinds in turn: dense, grouped, depthwise
KINDS = ("dense", "grouped", "depthwise")
KIND_LABELS = {"dense": "", "grouped": "groups 2", "depthwise": "depthwise"}  # the fixed audit call of each kind
DEPTHWISE_PATH = "depthwise path"  # a depthwise group's audit calls
# Version 3's paths for the precision probes (grader.verify.precision), each K = cin kh kw >= 512: channels
# innermost (cin % 16 == 0: the weight copied tap-major by conv2d_weight_kernel3), the weight's own order
# with 16-byte weight loads (K % 4 == 0) and with 4-byte ones (K odd), and 128-channel tiles (more than
# 64 channels and enough tiles to fill an H100's or H200's 132 SMs: 160 row tiles of 128 pixels), with
# channels innermost and in the weight's order with 4-byte loads (57 channels, K = 513; 192 row tiles).
PROBE_CASES = (
    ("channels innermost", Case("probe, channels innermost", 2, 64, 15, 13, 40, 3, 3, (1, 1), (1, 1))),
    ("weight order, 16-byte loads", Case("probe, weight order", 2, 60, 14, 11, 24, 3, 3, (1, 1), (1, 1))),
    ("weight order, K odd", Case("probe, K odd", 2, 67, 9, 12, 33, 3, 3, (1, 2), (1, 1))),
    ("128-channel tiles", Case("probe, 128-channel tiles", 5, 64, 64, 64, 128, 3, 3, (1, 1), (1, 1))),
    ("128-channel tiles, K odd", Case("probe, 128-channel tiles, K odd", 6, 57, 64, 64, 72, 3, 3, (1, 1), (1, 1))),
)

# The depthwise group's cases (groups == cin == cout, or a channel multiplier), version 2. 3x3 filters
# (the direct kernel): MobileNet's at stride 1 and 2, rows whose last strip of outputs is partial (4 or 2
# outputs a thread), large planes, no padding, 7x7 and 1x1 planes, dilation, strides per axis, a channel
# multiplier, 1 channel. Other filters (the tile kernel): 5x5, 1x7, 3x5, planes large enough for several
# row tiles (the halo between tiles), wider than 128 (column tiles), no padding (the halo is the
# image's), tiny planes packed several to a block.
DEPTHWISE_CASES = [
    Case("3x3 pad 1, 24 channels", 2, 24, 29, 31, 24, 3, 3, (1, 1), (1, 1), groups=24),
    Case("3x3 stride 2 pad 1", 2, 16, 37, 30, 16, 3, 3, (2, 2), (1, 1), groups=16),
    Case("3x3, 70x70 planes (row tiles)", 2, 5, 70, 70, 5, 3, 3, (1, 1), (1, 1), groups=5),
    Case("3x3 stride 2, 113x113 planes, no padding", 1, 3, 113, 113, 3, 3, 3, (2, 2), (0, 0), groups=3),
    Case("3x3, 9x150 planes (column tiles)", 2, 3, 9, 150, 3, 3, 3, (1, 1), (1, 1), groups=3),
    Case("3x3, 7x7 planes, 96 channels (many planes a block)", 3, 96, 7, 7, 96, 3, 3, (1, 1), (1, 1), groups=96),
    Case("3x3, 1x1 planes", 5, 7, 1, 1, 7, 3, 3, (1, 1), (1, 1), groups=7),
    Case("5x5 pad 2", 2, 6, 19, 17, 6, 5, 5, (1, 1), (2, 2), groups=6),
    Case("1x7, stride (1, 2)", 2, 4, 11, 26, 4, 1, 7, (1, 2), (0, 3), groups=4),
    Case("3x3 dilation (2, 3)", 2, 5, 21, 22, 5, 3, 3, (1, 1), (2, 3), (2, 3), groups=5),
    Case("3x3, channel multiplier 3", 2, 4, 15, 14, 12, 3, 3, (1, 1), (1, 1), groups=4),
    Case("3x3, 1 channel", 2, 1, 13, 17, 1, 3, 3, (1, 1), (1, 1)),
    Case("no bias, stride 2, odd", 3, 11, 23, 19, 11, 3, 3, (2, 2), (1, 1), bias=False, groups=11),
    Case("batch 64, 32 channels, 28x28", 64, 32, 28, 28, 32, 3, 3, (1, 1), (1, 1), groups=32),
    Case("3x3 stride (1, 3), dilation 2", 2, 6, 21, 40, 6, 3, 3, (1, 3), (2, 1), (2, 2), groups=6),
    Case("5x5, 70x70 planes (row tiles)", 2, 5, 70, 70, 5, 5, 5, (1, 1), (2, 2), groups=5),
    Case("3x5, 9x150 planes (column tiles)", 2, 3, 9, 150, 3, 3, 5, (1, 1), (1, 2), groups=3),
    Case("5x5 stride 2, 113x113 planes, no padding", 1, 3, 113, 113, 3, 5, 5, (2, 2), (0, 0), groups=3),
    Case("5x5, 7x7 planes, 96 channels (many planes a block)", 3, 96, 7, 7, 96, 5, 5, (1, 1), (2, 2), groups=96),
    # more column tiles than gridDim.y holds (65535): a launcher must tile it otherwise (16 MiB in and out)
    Case("1x5, a 1 x 4194304 row (65536 tiles of 64 columns)", 1, 1, 1, 4194304, 1, 1, 5, (1, 1), (0, 2)),
]
DEPTHWISE_FP64_CASES = [DEPTHWISE_CASES[i] for i in (0, 1, 2, 7, 10)]

# The autograd group's cases, version 2. gradcheck (float64, fast mode): a stride per axis with a
# padding beyond the dilated kernel's reach d (k - 1) (the data gradient crops its input there),
# dilation, groups, depthwise (the depthwise kernel), a channel multiplier, a batch split into chunks.
# The float32 gradients (and which kernels the backward ran, in every version): a stride per axis with
# dilation, a 1x1, groups, depthwise, and a batch large enough to be split into chunks (on a side stream too).
GRADCHECK_CASES = [
    Case("stride (2, 1), padding (3, 1) beyond the kernel, dilation (1, 2)", 2, 3, 9, 8, 4, 3, 2, (2, 1), (3, 1),
         (1, 2)),
    Case("groups 2, stride (1, 3), dilation (2, 1)", 2, 4, 7, 11, 6, 3, 3, (1, 3), (1, 0), (2, 1), groups=2),
    Case("depthwise 3x3 stride 2", 2, 3, 9, 7, 3, 3, 3, (2, 2), (1, 1), groups=3),
    Case("channel multiplier 2, dilation 2", 1, 2, 8, 8, 4, 3, 3, (1, 1), (2, 2), (2, 2), groups=2),
    Case("4 images in 2 chunks", 4, 2, 24, 24, 3, 3, 3, (1, 1), (1, 1)),
    # grouped and chunked on every GPU (conv2d.py's weight_grad_chunks: 2304 products per weight, 2 chunks)
    Case("groups 2, 4 images in 2 chunks", 4, 4, 24, 24, 4, 3, 3, (1, 1), (1, 1), groups=2),
]
GRADIENT_CASES = [
    Case("stride (2, 1), dilation (1, 2)", 2, 6, 12, 11, 8, 3, 2, (2, 1), (1, 1), (1, 2)),
    Case("1x1", 2, 6, 9, 9, 8, 1, 1),
    Case("groups 4", 2, 8, 10, 10, 12, 3, 3, (1, 1), (1, 1), groups=4),
    Case("depthwise 3x3", 2, 8, 14, 14, 8, 3, 3, (1, 1), (1, 1), groups=8),
    Case("8 images in chunks, on a side stream", 8, 4, 32, 32, 6, 3, 3, (1, 1), (1, 1)),
    # grouped and chunked on every GPU, not only where a random case happens to be (8 chunks of 1 image)
    Case("groups 4, 8 images in chunks", 8, 8, 32, 32, 8, 3, 3, (1, 1), (1, 1), groups=4),
]
# A batch whose weight gradient the backward computes in pieces (conv2d.py's `wgrad.batch_pieces`): the
# identity's convolution holds the batch's x planes (n x 75 x 75, one channel) as one image its op
# indexes with int, so past 2^31 - 2 elements it goes in pieces of 381,774 images, here one full and one
# of 27,720 (6.8% of the sum: dropped or counted twice it is off by about 0.26, the tolerance 3.8e-3).
# A 3x3 filter at stride 3 keeps y and its gradient at a ninth of x: 8.6 GiB for x, 11.5 GiB free asked.
HUGE_GRADIENT_CASE = Case("huge: 409494 images of 75x75, the weight gradient in 2 pieces", 409_494, 1, 75, 75, 1, 3, 3,
                          (3, 3), (0, 0), bias=False)


def random_case(g: torch.Generator, name: str, batch: int = 4, cin: int = 40, size: int = 40,
                cout: int = 70, kind: str = "dense") -> Case:
    """A random convolution whose output is never empty, shapes drawn from `g` (CPU): up to 5x5
    kernels, strides up to 3, dilations up to 2, padding up to 2, at most `batch` images of
    `size` x `size` pixels and `cin` -> `cout` channels (kind "dense"); or grouped (kind "grouped":
    2 to 8 groups of 1 to 9 channels in and out) or depthwise (kind "depthwise": groups = cin up to
    `cin`, cout = cin or, one time in four, 2 cin)."""
    def r(lo, hi):
        return int(torch.randint(lo, hi + 1, (1,), generator=g))

    kh, kw = r(1, 5), r(1, 5)
    stride, dilation, padding = (r(1, 3), r(1, 3)), (r(1, 2), r(1, 2)), (r(0, 2), r(0, 2))
    min_h = max(1, dilation[0] * (kh - 1) + 1 - 2 * padding[0])
    min_w = max(1, dilation[1] * (kw - 1) + 1 - 2 * padding[1])
    c = Case(name, r(1, batch), r(1, cin), r(min_h, size), r(min_w, size), r(1, cout), kh, kw, stride, padding,
             dilation, bool(r(0, 1)))
    return with_channels(g, c, kind, cin)


def with_channels(g: torch.Generator, c: Case, kind: str, cin: int = 40) -> Case:
    """Case c with channels drawn for `kind` (dense: c's own)."""
    def r(lo, hi):
        return int(torch.randint(lo, hi + 1, (1,), generator=g))

    if kind == "grouped":
        groups = r(2, 8)
        return replace(c, cin=groups * r(1, 9), cout=groups * r(1, 9), groups=groups)
    if kind == "depthwise":
        groups = r(1, cin)
        return replace(c, cin=groups, cout=groups * (2 if r(0, 3) == 0 else 1), groups=groups)
    return c


def weight_shape(c: Case, transposed: bool = False) -> tuple[int, int, int, int]:
    """(cin, cout / groups, kh, kw) transposed, else (cout, cin / groups, kh, kw)."""
    return (c.cin, c.cout // c.groups, c.kh, c.kw) if transposed else (c.cout, c.cin // c.groups, c.kh, c.kw)


def describe(c: Case, transposed: bool = False) -> str:
    weight = "x".join(map(str, weight_shape(c, transposed)))
    extra = f"output_padding {c.output_padding}, " if transposed else ""
    groups = f"groups {c.groups}, " if c.groups != 1 else ""
    return (f"x {c.n}x{c.cin}x{c.h}x{c.w}, weight {weight}, stride {c.stride}, padding {c.padding}, {extra}"
            f"{groups}dilation {c.dilation}, {'bias' if c.bias else 'no bias'}")


def whole_reference(compute):
    """A Benchmark.reference from a function computing every output in float64 (a tensor, or a
    list of them): the values at `where` are gathered from it."""
    def reference(inputs, where):
        with torch.no_grad():
            out = compute(inputs)
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        return outs if where is None else [o.reshape(-1)[w] for o, w in zip(outs, where)]
    return reference


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


def randn(g: torch.Generator, shape, dtype, scale: float = 1.0) -> torch.Tensor:
    return (torch.randn(shape, generator=g, device="cuda", dtype=torch.float32) * scale).to(dtype)


# ----------------------------------------------------------------------------------------- spec


def kernel_names(kernel: str | tuple[str, ...]) -> tuple[str, ...]:
    return kernel if isinstance(kernel, tuple) else (kernel,)


def winograd_shape(c: Case) -> bool:
    """A case 07's Winograd version takes: a 3 x 3 kernel at stride 1 and dilation 1."""
    return (c.kh, c.kw, c.stride, c.dilation) == (3, 3, (1, 1), (1, 1))


def as_winograd(c: Case) -> Case:
    """The case with a 3 x 3 kernel at stride 1 and dilation 1, as a transposed convolution: no
    output_padding, and padding at most (size + 1) / 2 (an output of at least one pixel)."""
    padding = tuple(min(p, (size + 1) // 2) for p, size in zip(c.padding, (c.h, c.w)))
    return replace(c, kh=3, kw=3, stride=(1, 1), dilation=(1, 1), output_padding=(0, 0), padding=padding)


@dataclass
class ConvSpec(Spec):
    """Checks of a convolution op `op(x, weight, bias, stride=, padding=, dilation=, groups=, ...)`,
    forward or transposed, for each graded (group, version, kernel names)."""

    op: str = "conv2d"
    transposed: bool = False
    # (group, version, the kernels it may run: a name or a tuple); version None: no version argument
    versions_graded: tuple[tuple[str, int | None, str | tuple[str, ...]], ...] = ()
    cases: tuple[Case, ...] = ()
    fp64_cases: tuple[Case, ...] = ()
    random_case: Callable[..., Case] | None = None  # (generator, name, kind=one of KINDS)
    # groups graded on depthwise convolutions only (a path of a version, not a version): their cases,
    # and their fixed checks (empty batch, layouts, poison, stream, own kernel) made depthwise
    depthwise_groups: tuple[str, ...] = ()
    depthwise_cases: tuple[Case, ...] = ()
    depthwise_fp64_cases: tuple[Case, ...] = ()
    # groups whose version takes 3 x 3 kernels at stride 1 and dilation 1 only (07's Winograd): graded on
    # the cases of that shape, their random cases and fixed checks made so (transposed: as_winograd)
    winograd_groups: tuple[str, ...] = ()
    # versions that run on TF32 tensor cores: float32 only, dense (groups 1), graded with tf32_tolerance,
    # and only on GPUs of compute capability TENSOR_CORE_CAPABILITY (below it, not run and cost nothing)
    tf32_versions: tuple[int, ...] = ()
    # (path, case) per precision probe of the TF32 versions (grader.verify.precision); the first path's checks
    # keep the probe's plain name
    probe_cases: tuple[tuple[str, Case], ...] = ()
    # group -> the instruction its kernels must hold in the code the GPU runs (grader.verify.sass)
    instructions: tuple[tuple[str, sass.MmaInstruction], ...] = ()
    # the version the op runs without a `version` argument under grading's math state (TF32 off): its
    # group also checks that call (a default that ignores torch.backends.cudnn.allow_tf32 fails it)
    default_version: int | None = None
    # the "autograd" group (where scored): the version whose backward its gradient values are checked
    # through (its audit calls carry grad_args: the generated gradient property and the judge check
    # them too), the cases of gradcheck and of the float32 gradients, and the versions whose backward
    # the profiler watches (each may run its own kernels, backward_kernel_names, beside PyTorch's
    # elementwise ones; a TF32 version only on 8.0+ GPUs)
    autograd_version: int | None = None
    gradcheck_cases: tuple[Case, ...] = ()
    gradient_cases: tuple[Case, ...] = ()
    backward_versions: tuple[int, ...] = ()
    # a float32 case past 2^31 elements whose weight gradient goes in pieces (checked through the
    # autograd version, alone among grading processes: a huge check), or None
    huge_gradient_case: Case | None = None

    # --- helpers -------------------------------------------------------------------------------
    def call(self, ctx: Context, x, w, b, c: Case, version: int | None):
        kwargs = {"stride": c.stride, "padding": c.padding, "dilation": c.dilation, "groups": c.groups}
        if self.transposed:
            kwargs["output_padding"] = c.output_padding
        if version is not None:
            kwargs["version"] = version
        return getattr(ctx.module, self.op)(x, w, b, **kwargs)

    def _fixed(self, group: str, c: Case) -> Case:
        """A fixed check's case for `group`: depthwise (as many output channels as input channels,
        groups = cin) in a depthwise group, 3 x 3 at stride 1 in a Winograd group, else as given."""
        if group in self.winograd_groups:
            return as_winograd(c)
        return replace(c, cout=c.cin, groups=c.cin) if group in self.depthwise_groups else c

    def _inputs(self, ctx: Context, name: str, c: Case, dtype: torch.dtype):
        g = ctx.generator(name)
        x = randn(g, (c.n, c.cin, c.h, c.w), dtype)
        shape = weight_shape(c, self.transposed)
        fan_in = shape[1] * c.kh * c.kw
        w = randn(g, shape, dtype, fan_in ** -0.5)
        b = randn(g, (c.cout,), dtype) if c.bias else None
        return x, w, b

    def tolerance(self, version, x, w, b, c: Case) -> float:
        """The normwise relative error allowed: TF32's bound for a tensor-core version, else REL_TOL."""
        if version in self.tf32_versions:
            return tf32_tolerance(x, w, b, c.stride, c.padding, c.dilation,
                                  c.output_padding if self.transposed else None, c.groups)
        return REL_TOL[x.dtype]

    def _reference(self, x, w, b, c: Case) -> torch.Tensor:
        b = None if b is None else b.double()
        if self.transposed:
            return F.conv_transpose2d(x.double(), w.double(), b, c.stride, c.padding, c.output_padding, c.groups,
                                      c.dilation)
        return F.conv2d(x.double(), w.double(), b, c.stride, c.padding, c.dilation, c.groups)

    def _expect(self, ctx: Context, version, c: Case, dtype: torch.dtype, what: str, x=None, w=None, b=None):
        if x is None:
            x, w, b = self._inputs(ctx, what, c, dtype)
        tensors = {"x": x, "weight": w} | ({"bias": b} if b is not None else {})
        with unmodified(**tensors):
            y = self.call(ctx, x, w, b, c, version)
            torch.cuda.synchronize()
        if not isinstance(y, torch.Tensor):
            raise CheckFailure(f"{what}: expected a tensor, got {type(y).__name__}")
        expected = self._reference(x, w, b, c)
        if y.dtype != dtype:
            raise CheckFailure(f"{what}: output dtype {y.dtype}, expected {dtype}")
        tf32 = version in self.tf32_versions
        precision = " (TF32 tensor cores: the README's How it is graded)" if tf32 else ""
        # strict: relative to the terms' norm where that is larger (a few outputs that cancel); TF32's bound has it
        terms = None if tf32 else cancelling_terms(lambda x, w, b: self._reference(x, w, b, c), (x, w, b), expected)
        assert_rel_error(y, expected, self.tolerance(version, x, w, b, c),
                         f"{what} ({describe(c, self.transposed)}){precision}", terms=terms)

    # --- the checks ----------------------------------------------------------------------------
    def checks(self) -> list[Check]:
        checks = CheckList()
        for group, version, kernel in self.versions_graded:
            depthwise = group in self.depthwise_groups
            tf32 = version in self.tf32_versions

            def add(name, run, slow=False, tf32=tf32, version=version):
                if tf32:  # below compute capability 8.0 (a T4): not run, costs the group nothing
                    def run_here(ctx, run=run):
                        require_capability(*TENSOR_CORE_CAPABILITY, f"version {version} (TF32 tensor cores)")
                        return run(ctx)
                    checks.add(name, run_here, slow=slow)
                else:
                    checks.add(name, run, slow=slow)

            winograd = group in self.winograd_groups
            # a TF32 version is one dense GEMM (groups 1; grouped calls are refused, input_checks): dense cases
            cases = self.depthwise_cases if depthwise else [c for c in self.cases if (not tf32 or c.groups == 1)
                                                            and (not winograd or winograd_shape(c))]
            # first: a fallback to PyTorch's op is named as such, not as the precision it happens to miss
            # (in the full grade: the quick loop skips it, as the profiler's start-up costs seconds)
            add(f"{group}[own kernel ran]", lambda ctx, v=version, k=kernel, g=group: self._check_own(ctx, v, k, g),
                slow=True)
            for c in cases:
                name = f"{group}[float32, {c.name}]"
                add(name, lambda ctx, v=version, c=c, n=name: self._expect(ctx, v, c, torch.float32, n))
            # a TF32 version takes float32 only (input_checks)
            for c in () if tf32 else (self.depthwise_fp64_cases if depthwise else
                                      [c for c in self.fp64_cases if not winograd or winograd_shape(c)]):
                name = f"{group}[float64, {c.name}]"
                add(name, lambda ctx, v=version, c=c, n=name: self._expect(ctx, v, c, torch.float64, n))
            for i in range(RANDOM_CASES):
                name = f"{group}[random shape {i}]"
                kind = "depthwise" if depthwise else "dense" if tf32 else KINDS[i % len(KINDS)]
                add(name, lambda ctx, v=version, n=name, k=kind, w=winograd: self._expect(
                    ctx, v, (as_winograd if w else lambda c: c)(self.random_case(ctx.generator(n, device="cpu"), n,
                                                                                  kind=k)), torch.float32, n))
            for i, (path, c) in enumerate(self.probe_cases if tf32 else ()):
                for probe in probes.PROBES:
                    add(probes.check_name(group, probe, None if i == 0 else path),
                        lambda ctx, v=version, g=group, p=probe, pa=path, c=c: self._check_probe(ctx, v, g, p, pa, c))
            if version is not None and version == self.default_version and not depthwise:
                c = next(c for c in CASES if c.name == "odd channels 67 -> 65")  # K = 603, off every tile
                name = f"{group}[version=None with allow_tf32 off: strict fp32]"
                add(name, lambda ctx, c=c, n=name: self._expect(ctx, None, c, torch.float32, n))
            add(f"{group}[empty batch]", lambda ctx, v=version, g=group: self._check_empty(ctx, v, g))
            add(f"{group}[non-contiguous inputs]", lambda ctx, v=version, g=group: self._check_noncontiguous(ctx, v, g))
            add(f"{group}[output poisoned]", lambda ctx, v=version, g=group: self._check_poisoned(ctx, v, g))
            for need in (need for g, need in self.instructions if g == group):  # last: value checks report first
                add(f"{group}[{need.describe()} in its kernels' machine code]",
                    sass.InstructionCheck(need))
        if AUTOGRAD in self.points:
            self._autograd_checks(checks)
        self._input_checks(checks)
        checks.add("registration[opcheck]", self._check_opcheck)
        return checks

    def _check_probe(self, ctx: Context, version, group: str, probe: probes.Probe, path: str, c: Case) -> None:
        """A precision probe on one path of the version's plan, within the TF32 bound: a range probe scales
        x and the bias (x near 1e5 or 1e-6: TF32 holds them, FP16 cannot), the positive one draws x, the
        weight and the bias in [0.5, 1.5) (a truncated operand's bias adds up)."""
        name = f"{group}-{probe.label}-{c.name}"
        x, w, b = self._inputs(ctx, name, c, torch.float32)
        if probe.kind == "range":
            x, b = probe.scaled(x), probe.scaled(b)
        else:
            g = ctx.generator(name + "-positive")
            x, w, b = (probe.draw(g, t.shape) for t in (x, w, b))
        self._expect(ctx, version, c, torch.float32, probes.what(group, probe, path), x, w, b)

    def _check_empty(self, ctx: Context, version, group: str = "") -> None:
        c = self._fixed(group, Case("empty batch", 0, 3, 8, 8, 4, 3, 3, (1, 1), (1, 1), bias=False))
        x, w, _ = self._inputs(ctx, "empty", c, torch.float32)
        y = self.call(ctx, x, w, None, c, version)
        torch.cuda.synchronize()
        if tuple(y.shape) != (0, c.cout, 8, 8):
            raise CheckFailure(f"empty batch: shape {tuple(y.shape)}, expected (0, {c.cout}, 8, 8)")

    def _check_noncontiguous(self, ctx: Context, version, group: str) -> None:
        c = self._fixed(group, Case("non-contiguous", 2, 6, 15, 13, 5, 3, 3, (1, 2), (1, 1)))
        x, w, b = self._inputs(ctx, f"{group}-noncontig", c, torch.float32)
        self._expect(ctx, version, c, torch.float32, f"{group}[channels_last x]",
                     x.to(memory_format=torch.channels_last), w, b)
        wide = list(w.shape[:3]) + [2 * c.kw]
        big = randn(ctx.generator(f"{group}-noncontig-w"), wide, torch.float32, 0.1)
        self._expect(ctx, version, c, torch.float32, f"{group}[strided weight w[..., ::2]]", x, big[..., ::2], b)

    def _check_poisoned(self, ctx: Context, version, group: str) -> None:
        """Run, free the output, fill the freed memory with NaN, run on other inputs: an output
        element left unwritten shows up as NaN (or as the first run's value)."""
        c = self._fixed(group, Case("poisoned", 3, 7, 23, 17, 67, 3, 3, (1, 1), (1, 1)))
        x, w, b = self._inputs(ctx, f"{group}-poison", c, torch.float32)
        first = self.call(ctx, x, w, b, c, version)
        numel = first.numel()
        del first
        poison(torch.empty(4 * numel + (1 << 20), device="cuda"))  # the allocator hands this memory out next
        self._expect(ctx, version, c, torch.float32, f"{group}[output poisoned with NaN]", -x, w, b)

    def _check_own(self, ctx: Context, version, kernel, group: str) -> None:
        """The group's kernels did the work, on a dense convolution and on a grouped one (for a
        depthwise group: on two depthwise ones, 3x3 and 5x5)."""
        cases = [self._fixed(group, Case("own", 2, 16, 20, 20, 32, 3, 3, (1, 1), (1, 1))),
                 self._fixed(group, Case("own, grouped", 2, 16, 20, 20, 32, 5, 5, (1, 1), (2, 2), groups=4))]
        if version in self.tf32_versions:  # one dense GEMM: grouped calls are refused (input_checks)
            cases = cases[:1]
        label = f"{group}" + (f" (version={version})" if version is not None else "")
        for c in cases:
            x, w, b = self._inputs(ctx, f"{group}-{c.name}", c, torch.float32)
            assert_own_kernels(lambda: self.call(ctx, x, w, b, c, version), kernel_names(kernel),
                               f"{label}, {describe(c, self.transposed)}")

    def _input_checks(self, checks: CheckList) -> None:
        op = self.op

        def bad(label, names, make, needs_gpu=True):
            def run(ctx):
                args, kwargs = make()
                expect_error(lambda: getattr(ctx.module, op)(*args, **kwargs), names=names, what=label)
            checks.add(f"input_checks[{label}]", run, needs_gpu=needs_gpu)

        def cuda(*shape, dtype=torch.float32):
            return torch.ones(shape, device="cuda", dtype=dtype)

        # weight (3 -> 4 channels, 3x3): (4, 3, 3, 3) for conv2d, (3, 4, 3, 3) transposed
        wshape = (3, 4, 3, 3) if self.transposed else (4, 3, 3, 3)
        x, w = (lambda: cuda(2, 3, 8, 8)), (lambda: cuda(*wshape))
        wrong_cin = (5, 4, 3, 3) if self.transposed else (4, 5, 3, 3)
        bad("a CPU tensor", ("x",), lambda: ((torch.ones(2, 3, 8, 8), torch.ones(wshape)), {}), needs_gpu=False)
        bad("an integer x", ("x",), lambda: ((cuda(2, 3, 8, 8, dtype=torch.int32), w()), {}))
        bad("a float16 x", ("x",), lambda: ((cuda(2, 3, 8, 8, dtype=torch.float16), w().half()), {}))
        bad("a 3-D x", ("x",), lambda: ((cuda(3, 8, 8), w()), {}))
        bad("a 3-D weight", ("weight",), lambda: ((x(), cuda(*wshape[:3])), {}))
        bad("weight of another dtype", ("weight",), lambda: ((x(), w().double()), {}))
        bad("mismatched channels", ("weight",), lambda: ((x(), cuda(*wrong_cin)), {}))
        bad("bias of the wrong size", ("bias",), lambda: ((x(), w(), cuda(5)), {}))
        bad("bias of another dtype", ("bias",), lambda: ((x(), w(), cuda(4, dtype=torch.float64)), {}))
        bad("stride 0", ("stride",), lambda: ((x(), w()), {"stride": (1, 0)}))
        bad("negative stride", ("stride",), lambda: ((x(), w()), {"stride": -1}))
        bad("stride with 3 values", ("stride",), lambda: ((x(), w()), {"stride": (1, 1, 1)}))
        bad("dilation 0", ("dilation",), lambda: ((x(), w()), {"dilation": (0, 1)}))
        bad("negative padding", ("padding",), lambda: ((x(), w()), {"padding": (0, -1)}))
        # groups (PyTorch's rules): a weight must match the groups given, as must the bias
        bad("groups 0", ("groups",), lambda: ((cuda(2, 4, 8, 8), cuda(4, 4, 3, 3)), {"groups": 0}))
        bad("negative groups", ("groups",), lambda: ((cuda(2, 4, 8, 8), cuda(4, 4, 3, 3)), {"groups": -2}))
        if self.transposed:  # weight (cin, cout / groups, kh, kw): dimension 0 is x's channels whatever the groups
            # the case: a weight that groups=1 accepts, but whose x has channels that groups 3 does not divide
            bad("groups that do not divide the channels of x", ("groups",),
                lambda: ((cuda(2, 4, 5, 5), cuda(4, 2, 3, 3)), {"groups": 3}))
            bad("groups that do not divide the channels of x, a grouped weight", ("groups",),
                lambda: ((cuda(2, 6, 5, 5), cuda(6, 2, 3, 3)), {"groups": 4}))
            # and the other way: a weight laid out as conv2d's, x's channels / groups in dimension 0
            bad("a weight with the channels of x over groups in dimension 0", ("weight",),
                lambda: ((cuda(2, 4, 5, 5), cuda(2, 3, 3, 3)), {"groups": 2}))
            bad("a bias of cout over groups values", ("bias",),
                lambda: ((cuda(2, 4, 5, 5), cuda(4, 3, 3, 3), cuda(3)), {"groups": 2}))
        else:  # weight (cout, cin / groups, kh, kw)
            bad("groups that do not divide the channels of x", ("groups",),
                lambda: ((cuda(2, 3, 8, 8), cuda(4, 1, 3, 3)), {"groups": 2}))
            bad("groups that do not divide the output channels", ("groups",),
                lambda: ((cuda(2, 4, 8, 8), cuda(3, 2, 3, 3)), {"groups": 2}))
            bad("a dense weight with groups 2", ("weight",), lambda: ((cuda(2, 4, 8, 8), cuda(4, 4, 3, 3)), {"groups": 2}))
            bad("a grouped weight with groups 1", ("weight",), lambda: ((cuda(2, 4, 8, 8), cuda(4, 2, 3, 3)), {}))
            bad("a depthwise weight with groups 1", ("weight",), lambda: ((cuda(2, 4, 8, 8), cuda(4, 1, 3, 3)), {}))
            bad("a weight for groups 4 with groups 2", ("weight",),
                lambda: ((cuda(2, 4, 8, 8), cuda(4, 1, 3, 3)), {"groups": 2}))
            bad("a bias of one group of channels", ("bias",),
                lambda: ((cuda(2, 4, 8, 8), cuda(6, 2, 3, 3), cuda(3)), {"groups": 2}))
        if self.transposed:
            bad("output_padding >= stride and >= dilation", ("output_padding",),
                lambda: ((x(), w()), {"stride": 2, "output_padding": (0, 2)}))
            bad("negative output_padding", ("output_padding",), lambda: ((x(), w()), {"output_padding": (-1, 0)}))
            bad("padding that leaves no output", ("padding",),
                lambda: ((cuda(2, 3, 2, 2), w()), {"padding": (3, 0)}))
        else:
            bad("a kernel larger than the padded input", ("weight", "kernel"),
                lambda: ((cuda(2, 3, 4, 8), cuda(4, 3, 7, 3)), {"padding": (1, 1)}))
            bad("a dilated kernel larger than the input", ("weight", "kernel"),
                lambda: ((x(), w()), {"dilation": (1, 4)}))
        for group, version, _ in self.versions_graded:
            if group in self.winograd_groups:  # 3 x 3 kernels at stride 1 and dilation 1 only
                bad(f"version {version} with stride 2", ("stride",), lambda v=version: ((x(), w()), {"stride": 2, "version": v}))
                bad(f"version {version} with a 5 x 5 kernel", ("weight",),
                    lambda v=version: ((x(), cuda(*wshape[:2], 5, 5)), {"version": v}))
                bad(f"version {version} with dilation 2", ("dilation",),
                    lambda v=version: ((x(), w()), {"dilation": 2, "version": v}))
        versions = [version for _, version, _ in self.versions_graded if version is not None]
        if versions:
            past = max(versions) + 1
            bad(f"version {past}", ("version",), lambda: ((x(), w()), {"version": past}))
        for version in self.tf32_versions:
            bad(f"a float64 x with version {version}", ("x",),
                lambda v=version: ((cuda(2, 3, 8, 8, dtype=torch.float64), w().double()), {"version": v}))
            bad(f"groups 2 with version {version}", ("groups",),
                lambda v=version: ((cuda(2, 4, 8, 8), cuda(6, 2, 3, 3)), {"groups": 2, "version": v}))

    # --- the backward (group "autograd") ----------------------------------------------------------
    def _autograd_checks(self, checks: CheckList) -> None:
        """The backward, which computes both gradients with the forward op: its own kernels (and no
        PyTorch convolution) ran in every version, gradcheck in float64, float32 gradients against
        float64 autograd of PyTorch's op (fixed and random shapes, a batch split into chunks, on a side
        stream too), and opcheck's autograd registration. The version's audit calls add the generated
        gradient property (every call, and on a side stream whose inputs arrive late) and the judge's."""
        version = self.autograd_version
        for v in self.backward_versions:
            def own(ctx, v=v, names=self.backward_kernel_names(v)):
                if v in self.tf32_versions:
                    require_capability(*TENSOR_CORE_CAPABILITY, f"version {v} (TF32 tensor cores)")
                self._check_backward_kernels(ctx, v, names)
            checks.add(f"{AUTOGRAD}[backward's own kernels, version {v}]", own, slow=True)
        # gradcheck's first torch.autograd.grad imports sympy (seconds): in the full grade only
        for c in self.gradcheck_cases:
            checks.add(f"{AUTOGRAD}[gradcheck float64, {c.name}]",
                       lambda ctx, c=c: self._check_gradcheck(ctx, c, version), slow=True)
        for c in self.gradient_cases:
            name = f"{AUTOGRAD}[float32, {c.name}]"
            checks.add(name, lambda ctx, c=c, n=name: self._check_gradients(ctx, c, version, n))
        for i in range(RANDOM_GRADIENT_CASES):
            name = f"{AUTOGRAD}[float32, random shape {i}]"
            checks.add(name, lambda ctx, n=name, k=KINDS[i % len(KINDS)]: self._check_gradients(
                ctx, self.random_case(ctx.generator(n, device="cpu"), n, kind=k), version, n))
        if self.huge_gradient_case is not None:
            checks.add(f"{AUTOGRAD}[float32, huge: a batch past 2^31 elements, the weight gradient in pieces]",
                       lambda ctx, c=self.huge_gradient_case: self._check_huge_gradient(ctx, c, version),
                       slow=True, huge=True)
        checks.add(f"{AUTOGRAD}[opcheck]", self._check_autograd_opcheck, slow=True)

    def backward_kernel_names(self, version) -> tuple[str, ...]:
        """The kernels the backward of `version` may run: the version's own (every kernel versions_graded
        lists for it), and for a TF32 version the autograd version's too (its weight gradient in chunks
        runs there: version 3 takes no groups)."""
        def of(v):
            return [k for _, graded, kernel in self.versions_graded if graded == v for k in kernel_names(kernel)]
        extra = of(self.autograd_version) if version in self.tf32_versions else []
        return tuple(dict.fromkeys(of(version) + extra))

    def _grad_inputs(self, ctx: Context, name: str, c: Case, dtype: torch.dtype):
        """x, weight and bias (or None) of case c, each requiring its gradient."""
        return tuple(t.requires_grad_() if t is not None else None for t in self._inputs(ctx, name, c, dtype))

    def _out_hw(self, c: Case) -> tuple[int, int]:
        if self.transposed:
            return conv_transpose_output_hw((c.h, c.w), (c.kh, c.kw), c.stride, c.padding, c.output_padding, c.dilation)
        return conv_output_hw((c.h, c.w), (c.kh, c.kw), c.stride, c.padding, c.dilation)

    def gradient_tolerance(self, c: Case) -> float:
        """The normwise relative error float32 gradients may have: REL_TOL, or, for a long sum (the
        weight's gradient sums over every image and pixel), the float32 rounding of sums that long
        (SUM_SIGMAS sqrt(K) 2^-24, as tf32_tolerance's second term)."""
        ho, wo = self._out_hw(c)
        pixels = c.h * c.w if self.transposed else ho * wo  # what the weight's gradient sums over, per image
        longest = max(c.n * pixels, (max(c.cin, c.cout) // c.groups) * c.kh * c.kw, 1)
        return max(REL_TOL[torch.float32], SUM_SIGMAS * longest ** 0.5 * FP32_U)

    def _gradient_call(self, x, w, b, c: Case, version) -> AuditCall:
        """An AuditCall of case c whose gradients grader.verify.properties.check_gradients checks."""
        params = self._params(c.stride, c.padding, c.dilation, c.groups, c.output_padding)
        # the forward the gradient check observes runs the version's own kernels
        kernel = next((k for _, v, k in self.versions_graded if v == version), ())
        call = self._call(x, w, b, params, AUTOGRAD, version, kernel)
        return replace(call, grad_args=(0, 1, 2) if b is not None else (0, 1), tolerance=self.gradient_tolerance(c))

    def _check_gradients(self, ctx: Context, c: Case, version, what: str) -> None:
        """float32 gradients of x, weight and bias through autograd against PyTorch's op differentiated in
        float64 (grader.verify.properties.check_gradients: outputs and gradients made in memory poisoned with
        NaN); a case named "side stream" also inside `torch.cuda.stream(s)` with its inputs late there."""
        from grader.verify import properties

        x, w, b = self._inputs(ctx, what, c, torch.float32)
        call = self._gradient_call(x, w, b, c, version)
        properties.check_gradients(ctx, call, list(call.args), f"{what} ({describe(c, self.transposed)})")
        if "side stream" in c.name:
            properties.check_gradients(ctx, call, list(call.args), f"{what} ({describe(c, self.transposed)}) inside "
                                       "`with torch.cuda.stream(s)` (the backward too runs on the current stream)",
                                       stream=properties.DEVICE.side_stream())

    def _check_huge_gradient(self, ctx: Context, c: Case, version) -> None:
        """The weight's gradient of case c (float32, x past 2^31 elements, no bias, x not differentiated)
        through autograd, against float64 autograd of PyTorch's op summed over pieces of the batch, at
        gradient_tolerance. The memory it needs is x, y and y's gradient, and for a transposed convolution
        x's flipped copy the backward makes of up to 2^31 elements; a card without it skips the check (not
        run here, it costs nothing)."""
        what = f"{AUTOGRAD}[huge: the weight's gradient of a batch past 2^31 elements]"
        ho, wo = self._out_hw(c)
        x_numel, y_numel = c.n * c.cin * c.h * c.w, c.n * c.cout * ho * wo
        flipped = min(x_numel, 2**31) if self.transposed else 0
        require_free_memory(4 * (x_numel + 2 * y_numel + flipped) + (1 << 30), "the gradient check past 2^31 elements")
        g = ctx.generator("huge gradient")
        shape = weight_shape(c, self.transposed)
        w = randn(g, shape, torch.float32, (shape[1] * c.kh * c.kw) ** -0.5).requires_grad_()
        # drawn in place (randn's float32 product would hold a second x)
        x = torch.empty((c.n, c.cin, c.h, c.w), device=w.device).normal_(generator=g)
        y = self.call(ctx, x, w, None, c, version)
        if tuple(y.shape) != (c.n, c.cout, ho, wo):
            raise CheckFailure(f"{what}: y of shape {tuple(y.shape)}, expected {(c.n, c.cout, ho, wo)}")
        grad_y = torch.empty_like(y).normal_(generator=g)
        (grad_w,) = torch.autograd.grad(y, w, grad_y)
        del y
        w64 = w.detach().double().requires_grad_()
        expected = torch.zeros_like(w64)
        step = max(1, 2**25 // (c.cin * c.h * c.w))  # images a piece of the reference: 256 MiB of x in float64
        for i in range(0, c.n, step):
            piece = self._reference(x[i:i + step].double(), w64, None, c)
            expected += torch.autograd.grad(piece, w64, grad_y[i:i + step].double())[0]
        assert_rel_error(grad_w, expected, self.gradient_tolerance(c), f"{what} ({describe(c, self.transposed)})")

    def _check_gradcheck(self, ctx: Context, c: Case, version) -> None:
        """torch.autograd.gradcheck in float64 (fast mode: random directions) through the op, x, weight
        and bias (where the case has one) all differentiated: the backward agrees with the forward."""
        tensors = [t for t in self._grad_inputs(ctx, f"gradcheck {c.name}", c, torch.float64) if t is not None]

        def fn(x, w, b=None):
            return self.call(ctx, x, w, b, c, version)

        try:
            ok = torch.autograd.gradcheck(fn, tuple(tensors), fast_mode=True)
        except Exception as e:  # noqa: BLE001: gradcheck's own error, or the op's
            lines = [line for line in str(e).splitlines() if line.strip()]
            raise CheckFailure(f"gradcheck ({describe(c, self.transposed)}): {type(e).__name__}: "
                               f"{' '.join(lines[:3])[:400]}") from None
        if not ok:
            raise CheckFailure(f"gradcheck ({describe(c, self.transposed)}) failed")

    def _check_backward_kernels(self, ctx: Context, version, names: tuple[str, ...]) -> None:
        """Only the version's own kernels (one of them at least), PyTorch's copies, fills, flips and sums
        ran in the backward, in every dtype the version takes: no PyTorch convolution or matrix product
        (a wrapper falling back to PyTorch's op shows here, whose gradients are right). A Winograd
        version on the gradient cases it takes (3 x 3 at stride 1)."""
        import os

        import pytest

        if os.environ.get("COURSE_SANITIZE"):
            pytest.skip("which kernels ran is not checked under compute-sanitizer (SANITIZE=1)")
        rule = KernelRule(names, elementwise=True, forbidden_ops=NOT_IN_BACKWARD)
        tf32 = version in self.tf32_versions
        winograd = any(group in self.winograd_groups for group, v, _ in self.versions_graded if v == version)
        cases = [c for c in self.gradient_cases if (not tf32 or c.groups == 1) and (not winograd or winograd_shape(c))]
        for dtype in (torch.float32,) if tf32 else (torch.float32, torch.float64):
            for c in cases:
                what = f"the backward of version {version} ({describe(c, self.transposed)}, {dtype_name(dtype)})"
                x, w, b = self._grad_inputs(ctx, f"backward kernels {c.name}", c, dtype)
                y = self.call(ctx, x, w, b, c, version)
                v = torch.randn_like(y)
                try:
                    _, seen = observe(lambda: y.backward(v), cpu_ops=True)
                except Exception as e:  # noqa: BLE001
                    raise CheckFailure(f"{what}: {type(e).__name__}: {str(e).splitlines()[0][:300]}") from None
                problem = rule.problem(seen, what)
                if problem:
                    raise CheckFailure(problem)
                if not any(kernel_function(k.name) in names for k in seen.kernels):
                    raise CheckFailure(f"{what}: none of {', '.join(names)} ran; the backward must compute the "
                                       "gradients with this exercise's op")

    def _check_autograd_opcheck(self, ctx: Context) -> None:
        """torch.library.opcheck with the inputs requiring gradients: the autograd registration too."""
        op = getattr(ctx.module.lib.ops, self.op)
        for c in self.gradcheck_cases:
            x, w, b = self._grad_inputs(ctx, f"opcheck {c.name}", c, torch.float32)
            params = [list(p) if isinstance(p, tuple) else p
                      for p in self._params(c.stride, c.padding, c.dilation, c.groups, c.output_padding)]
            try:
                torch.library.opcheck(op, (x, w, b, *params, self.autograd_version),
                                      test_utils=("test_schema", "test_autograd_registration", "test_faketensor"))
            except Exception as e:  # noqa: BLE001: opcheck's own error types
                raise CheckFailure(f"torch.library.opcheck ({describe(c, self.transposed)}): "
                                   f"{str(e).splitlines()[0][:300]}") from None

    # --- the bad-input audit (tests/test_input_audit.py) -----------------------------------------
    def _params(self, stride, padding, dilation, groups, output_padding=(0, 0)) -> tuple:
        """The op's scalar arguments in its order: (stride, padding, output_padding, groups, dilation)
        transposed (as F.conv_transpose2d), else (stride, padding, dilation, groups)."""
        if self.transposed:
            return (stride, padding, output_padding, groups, dilation)
        return (stride, padding, dilation, groups)

    def audit_calls(self, device, dtype) -> list[AuditCall]:
        """Each graded version, with and without bias, on a geometry where an empty height or width
        of x leaves no output (which the op must reject, as PyTorch does); a pointwise and a grouped
        one and a depthwise one. A depthwise group: depthwise convolutions only (3x2 with stride and dilation, with and
        without bias; 3x3 stride 2 with a channel multiplier of 2). A Winograd group: the dense, grouped and
        depthwise ones 3 x 3 at stride 1, paddings that pad and crop."""
        return [call for group, version, kernel in self.versions_graded
                for call in self._audit_calls_of(device, self._dtype(version, dtype), group, version, kernel)]

    def _dtype(self, version, dtype):
        """The dtype a version's audit calls take: float32 for a TF32 version, else the audit's."""
        return torch.float32 if version in self.tf32_versions else dtype

    def _audit_calls_of(self, device, dtype, group, version, kernel) -> list[AuditCall]:
        def r(*shape, seed, scale=1.0):
            return audit_randn(*shape, device=device, dtype=dtype, seed=seed, scale=scale)

        def weight(cin, cout, kh, kw, groups, seed, scale):
            return r(*((cin, cout // groups) if self.transposed else (cout, cin // groups)), kh, kw, seed=seed, scale=scale)

        if self.transposed:  # stride, padding, output_padding, groups, dilation
            x = r(2, 3, 5, 4, seed=1)
            params = self._params((2, 1), (1, 1), (1, 2), 1, (1, 0))
        else:  # stride, padding, dilation, groups
            x = r(2, 3, 7, 6, seed=1)
            params = self._params((2, 1), (1, 1), (1, 2), 1)
        w, b = weight(3, 4, 3, 2, 1, 2, 0.3), r(4, seed=3, scale=0.2)
        # and a pointwise (1x1, stride 1, no padding) convolution, the other kind a model is made of: the
        # generated checks (which kernels ran among them) meet it in every run; and a grouped one (2 groups
        # of 2 -> 3 channels), and the depthwise ones
        x1, w1 = r(2, 3, 5, 4, seed=4), weight(3, 4, 1, 1, 1, 5, 0.5)
        pointwise = self._params((1, 1), (0, 0), (1, 1), 1)
        xg, wg, bg = r(2, 4, 7, 6, seed=6), weight(4, 6, 3, 3, 2, 7, 0.3), r(6, seed=8, scale=0.2)
        grouped = self._params((1, 2), (1, 1), (1, 1), 2, (0, 1))
        xd, wd, bd = r(2, 5, 9, 8, seed=9), weight(5, 5, 3, 2, 5, 10, 0.5), r(5, seed=11, scale=0.2)
        depthwise = self._params((2, 1), (1, 1), (1, 2), 5, (1, 0))
        x2, w2, b2 = r(2, 3, 9, 7, seed=12), weight(3, 6, 3, 3, 3, 13, 0.5), r(6, seed=14, scale=0.2)
        multiplier = self._params((2, 2), (1, 1), (1, 1), 3, (1, 1))
        geometries = (((x, w), params, (b, None), ""), ((x1, w1), pointwise, (b,), "pointwise"),
                      ((xg, wg), grouped, (bg,), KIND_LABELS["grouped"]), ((xd, wd), depthwise, (bd,), "depthwise"))
        # (labels apart from the version groups' depthwise call, also version=2)
        depthwise_geometries = (((xd, wd), depthwise, (bd, None), DEPTHWISE_PATH),
                                ((x2, w2), multiplier, (b2,), f"{DEPTHWISE_PATH}, channel multiplier 2"))
        if version in self.tf32_versions:  # one dense GEMM: the dense geometries
            geometries = tuple(g for g in geometries if g[3] in ("", "pointwise"))
        if group in self.winograd_groups:  # 3 x 3 at stride 1 and dilation 1 (padding 1: an empty x, no output)
            geometries = (((x, weight(3, 4, 3, 3, 1, 2, 0.3)), self._params((1, 1), (1, 1), (1, 1), 1, (0, 0)), (b, None), ""),
                          ((xg, weight(4, 6, 3, 3, 2, 7, 0.3)), self._params((1, 1), (2, 0), (1, 1), 2, (0, 0)), (bg,),
                           KIND_LABELS["grouped"]),
                          ((xd, weight(5, 5, 3, 3, 5, 10, 0.5)), self._params((1, 1), (0, 1), (1, 1), 5, (0, 0)), (bd,),
                           "depthwise"),
                          # one tile of 4 x 3 outputs (a width off the 4-wide tile), 8 -> 2 channels: a non-finite
                          # x sends the tile down its direct path, whose columns past the width belong to the
                          # next row (the NaN and infinities property)
                          ((r(1, 8, *((2, 1) if self.transposed else (4, 3)), seed=15), weight(8, 2, 3, 3, 1, 16, 0.3)),
                           self._params((1, 1), (0, 0) if self.transposed else (1, 1), (1, 1), 1, (0, 0)),
                           (r(2, seed=17, scale=0.2),), "one tile of 4 x 3"))
        return [self._call(*tensors, bias, conv, group, version, kernel, kind)
                for tensors, conv, biases, kind in (depthwise_geometries if group in self.depthwise_groups
                                                    else geometries)
                for bias in biases]

    def _call(self, x, w, bias, params, group, version, kernel, kind: str = "") -> AuditCall:
        names = (("stride", "padding", "output_padding", "groups", "dilation") if self.transposed
                 else ("stride", "padding", "dilation", "groups"))
        extra = () if version is None else (version,)
        what = [f"version={version}"] if version is not None else []
        what.append("bias" if bias is not None else "no bias")
        what += [kind] if kind else []
        tf32 = version in self.tf32_versions
        what += ["TF32"] if tf32 else []
        # NaN and infinities in x propagate to every output that reads them; in the weight they would
        # meet the zero padding, where whether 0 * inf is computed is the kernel's choice
        # the autograd version's calls: their gradients too (the generated property, the judge)
        grads = (0, 1, 2) if bias is not None else (0, 1)
        # the padding's edges (none, 3, the widest this geometry supports), one at a time
        stride, padding = params[0], params[1]
        dilation, output_padding = (params[4], params[2]) if self.transposed else (params[2], (0, 0))
        edges = conv_padding_edges(tuple(x.shape[2:]), tuple(w.shape[2:]), stride, dilation, padding,
                                   self.transposed, output_padding)
        arg_names = ("x", "weight", "bias", *names, *(("version",) if extra else ()))
        groups = params[names.index("groups")]
        return AuditCall(self.op, (x, w, bias, *params, *extra), arg_names,
                         self._audit_reference, label=f"{self.op}({', '.join(what)})", group=group,
                         grad_args=grads if AUTOGRAD in self.points and version == self.autograd_version else (),
                         kernels=KernelRule(kernel_names(kernel)), registered=f"lib.ops.{self.op}", nonfinite=(0,),
                         domains={0: conv_smallest_input(tuple(x.shape[2:]), tuple(w.shape[2:]), dilation, padding,
                                                         self.transposed, stride, output_padding),
                                  1: conv_empty_kernel(), 4: edges, 6: values(0, refused=(0,))},
                         tolerance=self._audit_tolerance if tf32 else None, sums_products=not tf32,
                         needs_capability=TENSOR_CORE_CAPABILITY if tf32 else None,
                         defaults=torch_defaults(arg_names, first=2, keep=("groups",) if groups != 1 else ()))

    def _audit_tolerance(self, x, w, b, *params) -> float:
        """tf32_tolerance of an audit call's arguments (the op's scalars in its order, then the version)."""
        if self.transposed:
            stride, padding, output_padding, groups, dilation = params[:5]
            return tf32_tolerance(x, w, b, stride, padding, dilation, output_padding, groups)
        stride, padding, dilation, groups = params[:4]
        return tf32_tolerance(x, w, b, stride, padding, dilation, groups=groups)

    def random_calls(self, g, device, dtype) -> list[AuditCall]:
        """Per graded version, one convolution of random geometry (self.random_case) and kind (dense,
        grouped or depthwise; a depthwise group's: depthwise), with bias or not; a Winograd group's made
        3 x 3 at stride 1 (as_winograd)."""
        calls = []
        for group, version, kernel in self.versions_graded:
            drawn = KINDS[int(torch.randint(0, len(KINDS), (1,), generator=g))]
            kind = "depthwise" if group in self.depthwise_groups else "dense" if version in self.tf32_versions else drawn
            c = self.random_case(g, f"random {group}", kind=kind)
            c = as_winograd(c) if group in self.winograd_groups else c
            seed = int(torch.randint(0, 2**31, (1,), generator=g))
            d = self._dtype(version, dtype)
            x = audit_randn(c.n, c.cin, c.h, c.w, device=device, dtype=d, seed=seed)
            shape = weight_shape(c, self.transposed)
            w = audit_randn(*shape, device=device, dtype=d, seed=seed + 1, scale=(shape[1] * c.kh * c.kw) ** -0.5)
            b = audit_randn(c.cout, device=device, dtype=d, seed=seed + 2) if c.bias else None
            params = self._params(c.stride, c.padding, c.dilation, c.groups, c.output_padding)
            label = DEPTHWISE_PATH if group in self.depthwise_groups else KIND_LABELS[kind]
            calls.append(self._call(x, w, b, params, group, version, kernel, label))
        return calls

    def kernel_rule(self):
        return KernelRule(tuple(dict.fromkeys(k for _, _, kernel in self.versions_graded for k in kernel_names(kernel))))

    def _audit_reference(self, x, w, b, *params):
        """PyTorch's op in float64; a weight without output channels (which PyTorch refuses) gives an
        empty output of the shape the definition gives."""
        x, w, b = x.double(), w.double(), (None if b is None else b.double())
        if self.transposed:
            stride, padding, output_padding, groups, dilation = params[:5]
            run = lambda w: F.conv_transpose2d(x, w, b, stride, padding, output_padding, groups, dilation)  # noqa: E731
        else:
            stride, padding, dilation, groups = params[:4]
            run = lambda w: F.conv2d(x, w, b, stride, padding, dilation, groups)  # noqa: E731
        cout = 1 if self.transposed else 0
        if w.dim() == 4 and w.shape[cout] == 0 and b is None:
            # one output channel per group (a transposed weight's dimension 1 is per group already)
            one = w.new_zeros([(1 if self.transposed else groups) if i == cout else n for i, n in enumerate(w.shape)])
            return run(one)[:, :0]
        return run(w)

    def _check_opcheck(self, ctx: Context) -> None:
        """The schema, and the shape function against the real op (torch.compile relies on both)."""
        op = getattr(ctx.module.lib.ops, self.op)
        g = ctx.generator("opcheck")
        x = randn(g, (2, 3, 11, 9), torch.float32)
        w = randn(g, (3, 5, 3, 2) if self.transposed else (5, 3, 3, 2), torch.float32)
        b = randn(g, (5,), torch.float32)
        # grouped: 2 groups of 2 -> 3 channels, and depthwise (4 groups)
        xg = randn(g, (2, 4, 10, 7), torch.float32)
        wg = randn(g, (4, 3, 3, 3) if self.transposed else (6, 2, 3, 3), torch.float32)
        wd = randn(g, (4, 1, 3, 3), torch.float32)
        bg, bd = randn(g, (6,), torch.float32), randn(g, (4,), torch.float32)
        if self.transposed:  # (x, weight, bias, stride, padding, output_padding, groups, dilation, version)
            arg_sets = ((x, w, b, [2, 1], [1, 0], [1, 0], 1, [1, 2], 2), (x, w, None, [1, 1], [0, 0], [0, 0], 1, [1, 1], 1),
                        (xg, wg, bg, [2, 1], [1, 1], [1, 0], 2, [1, 1], 2), (xg, wd, bd, [1, 1], [1, 1], [0, 0], 4, [1, 1], 1))
        else:  # (x, weight, bias, stride, padding, dilation, groups, version)
            arg_sets = ((x, w, b, [2, 1], [1, 0], [1, 2], 1, 2), (x, w, None, [1, 1], [0, 0], [1, 1], 1, 1),
                        (xg, wg, bg, [2, 1], [1, 1], [1, 1], 2, 2), (xg, wd, bd, [1, 2], [1, 1], [1, 1], 4, 2),
                        (xg, wd, None, [1, 1], [1, 1], [1, 1], 4, 1))
        for args in arg_sets:
            try:
                torch.library.opcheck(op, args, test_utils=("test_schema", "test_faketensor"))
            except Exception as e:
                raise CheckFailure(f"torch.library.opcheck: {str(e).splitlines()[0][:300]}") from None


@dataclass
class Conv2dSpec(ConvSpec):
    def drop_ins(self) -> list[DropIn]:
        """Conv2d with torch.nn's defaults, every argument positionally, the tuples by keyword, and the padding
        words: "same" with d (k - 1) odd along one axis (PyTorch's one more row of zeros after the end) and
        along both, "valid" with a stride."""
        constructions = (((5, 8, 3), {}), ((6, 9, (3, 2), 2, 1, 2, 3, False), {}),
                         ((4, 6, 3), {"stride": (2, 1), "padding": (1, 2), "dilation": (2, 1), "groups": 2, "bias": False}),
                         ((4, 6, (4, 3)), {"padding": "same", "dilation": (1, 2)}), ((5, 8, 2), {"padding": "same"}),
                         ((5, 8, 3), {"padding": "valid", "stride": 2}))
        return [DropIn("Conv2d", torch.nn.Conv2d, constructions, input_shape=lambda args, kwargs: (2, args[0], 13, 11),
                       tol=REL_TOL[torch.float32], grad_tol=1e-4,
                       group="registration")]  # fitting PyTorch as torch.nn's does, beside opcheck

    # --- speed ---------------------------------------------------------------------------------
    def benchmark(self) -> Benchmark:
        n, cin, h, w, cout, k = 32, 64, 56, 56, 64, 3

        def make_inputs(seed: int):
            g = torch.Generator(device="cuda")
            g.manual_seed(seed)
            return (randn(g, (n, cin, h, w), torch.float32), randn(g, (cout, cin, k, k), torch.float32, (cin * k * k) ** -0.5))

        return Benchmark(
            label="strict fp32, 32x64x56x56, 64->64, 3x3, pad 1",
            make_inputs=make_inputs,
            call=lambda mod, inp: mod.conv2d(inp[0], inp[1], None, 1, 1, 1, version=2),
            baseline=lambda inp: F.conv2d(inp[0], inp[1], None, 1, 1),
            work=2 * n * cout * h * w * cin * k * k,
            unit="FLOP",
            reference=whole_reference(lambda inp: F.conv2d(inp[0].double(), inp[1].double(), None, 1, 1)),
            tolerance=lambda inp: [REL_TOL[torch.float32]],
            kernels=KernelRule(("conv2d_kernel2",)),
            min_bytes=4 * (2 * n * cin * h * w + cout * cin * k * k),
        )

    def versions(self):
        return {"kernel1 direct": lambda mod, inp: mod.conv2d(inp[0], inp[1], None, 1, 1, 1, version=1),
                "kernel2 implicit GEMM": lambda mod, inp: mod.conv2d(inp[0], inp[1], None, 1, 1, 1, version=2)}


# The launchers' branches (grader/verify/paths.py): versions 1 and 2 in float32 and float64 (the implicit GEMM's
# two tiles, groups, the depthwise kernels and the GEMM where their tile does not fit), version 3 (TF32,
# float32: tap-major K or the weight's order, wide or narrow tiles, 16-byte weight copies), and the
# weight gradient's batch chunks (conv2d.py)
_BOTH = ("float32", "float64")
PATHS = {
    "v1": _BOTH, "v2.gemm128": _BOTH, "v2.gemm64": _BOTH, "v2.grouped": _BOTH, "v2.depthwise3x3.four": _BOTH,
    "v2.depthwise3x3.two": _BOTH, "v2.depthwise_tile": _BOTH, "v2.depthwise_to_gemm": _BOTH,
    "v3": (), "v3.tap_major.wide": (), "v3.tap_major.narrow": (), "v3.wide.vec_b": (), "v3.wide.scalar_b": (),
    "v3.narrow.vec_b": (), "v3.narrow.scalar_b": (),
    "wgrad.chunked": _BOTH, "wgrad.chunked_v3_as_v2": ("float32",), "wgrad.batch_pieces": ("float32",),
}

SPEC = Conv2dSpec(
    exercise="06_conv2d",
    title="2-D convolution: direct and implicit GEMM",
    module="conv2d.py",
    paths=PATHS,
    points={"direct": 2, "implicit_gemm": 3, "depthwise": 2, "tensor_cores_tf32": 2, "autograd": 2, "input_checks": 1,
            "registration": 1, "performance": 3},
    perf_requires=("implicit_gemm",),
    # the kernels opcheck runs; the backward (version 2) runs the implicit GEMM and the depthwise kernel: on a
    # broken one gradcheck and opcheck pass or fail by chance, and a grade must not
    requires={"registration": ("direct", "implicit_gemm", "depthwise"), "autograd": ("implicit_gemm", "depthwise")},
    solution_vs_baseline=0.8,  # H100, 2026-11-23 grading run: 24.4 vs cuDNN 30.6 TFLOP/s (strict fp32)
    # version 2 takes its depthwise kernels where groups == cin (the direct one for 3x3 filters, the tile
    # kernel for others): its group's cases may run any of them; the depthwise group grades that path
    # alone, on depthwise convolutions
    versions_graded=(("direct", 1, "conv2d_kernel1"),
                     ("implicit_gemm", 2, ("conv2d_kernel2", "conv2d_depthwise_kernel", "conv2d_depthwise_tile_kernel")),
                     ("depthwise", 2, ("conv2d_depthwise_kernel", "conv2d_depthwise_tile_kernel")),
                     ("tensor_cores_tf32", 3, ("conv2d_kernel3", "conv2d_weight_kernel3"))),
    tf32_versions=(3,),
    probe_cases=PROBE_CASES,
    instructions=(("tensor_cores_tf32", sass.MmaInstruction("mma", "tf32", ("conv2d_kernel3",))),),
    default_version=2,
    cases=tuple(CASES),
    fp64_cases=tuple(FP64_CASES),
    random_case=random_case,
    depthwise_groups=("depthwise",),
    depthwise_cases=tuple(DEPTHWISE_CASES),
    depthwise_fp64_cases=tuple(DEPTHWISE_FP64_CASES),
    # the backward: gradient values through version 2; each version's backward runs its own kernels
    # (version 3's weight gradient in chunks goes through version 2: version 3 takes no groups)
    autograd_version=2,
    gradcheck_cases=tuple(GRADCHECK_CASES),
    gradient_cases=tuple(GRADIENT_CASES),
    backward_versions=(1, 2, 3),
    huge_gradient_case=HUGE_GRADIENT_CASE,
)
