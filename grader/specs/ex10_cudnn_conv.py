"""Grading for exercise 10: 2-d convolution through cuDNN with a plan cache.

The wrapper module provides conv2d, conv2d_backward_input, conv2d_backward_weight,
conv2d_backward_bias, conv_transpose2d (each convolution with groups, and mode="benchmark" |
"heuristic" | "uncached"; conv2d and conv_transpose2d with an optional bias), describe, cache_stats,
cache_clear and set_cache_capacity. cuDNN's kernels are allowed here (they are the point); what must
not run is PyTorch's own convolution (aten::conv*, aten::cudnn_convolution, at::native kernels).
"""
from __future__ import annotations

import dataclasses
import re
import threading
from contextlib import contextmanager
from typing import NamedTuple

import torch
import torch.nn.functional as F

from grader.verify.timer import math_mode
from grader.verify.checks import (CALL_TOLERANCE, CheckFailure, Comparison, RelErrors, assert_rel_error, expect_error, poison,
                                  poison_next_allocation, require_free_memory, unmodified)
from grader.verify.judge import names_one_of
from grader.verify.observe import KernelRule, observe
from grader.verify.spec import (AuditCall, Benchmark, Check, CheckList, Context, DropIn, Spec, audit_randn,
                                as_conv_output, conv_empty_kernel, conv_output_hw, conv_padding_edges,
                                conv_smallest_input, conv_transpose_output_hw, torch_defaults, values)
from grader.specs.ex06_conv2d import SQUARE_GEOMETRIES, random_case, whole_reference

# Normwise relative error against float64. Strict fp32 (no Tensor Core math; every algorithm cuDNN offers, the
# Winograd and FFT ones included, as PyTorch's contract) stays below 1e-4: on the H200 (cuDNN 9.19, 2026-11-29,
# every convolution of the model list and the strict watch's calls) direct algorithms 2e-6 at most, the
# non-fused Winograd weight gradient 1.7e-5; TF32's error is 2.9e-4 and more, so a plan that uses TF32 where it
# must not fails here as well as by its kernels' names; float64 must be exact to its own rounding.
TOL = {"strict": 1e-4, "tf32": 5e-3, "float64": 1e-12}
# Exercise 06's six square geometries (kernel, stride, padding), all on one input shape: a plan
# keyed without the stride is then found for a call with another stride.
CASES = SQUARE_GEOMETRIES
CASE_X = (2, 8, 19, 23)  # N, C, H, W: odd sizes, not multiples of a tile
CASE_K = 12  # output channels
# Grouped convolutions, each on its own odd input: (label, x shape, output channels, groups, kernel
# (kh, kw), stride, padding, dilation). Depthwise (groups == C_in == C_out), depthwise with a channel
# multiplier (C_out / groups = 2), ResNeXt's grouped 3x3, a grouped 1x1 (ShuffleNet), and an
# asymmetric one; each is checked after its groups=1 twin on the same x (a plan keyed without groups
# and without the weight's channels would be found next), without and with a bias.
GROUPED = (
    ("depthwise", (2, 12, 17, 23), 12, 12, (3, 3), (1, 1), (1, 1), (1, 1)),
    ("depthwise x2", (2, 8, 19, 15), 16, 8, (3, 3), (2, 2), (1, 1), (1, 1)),
    ("resnext 8x4", (2, 32, 13, 11), 32, 8, (3, 3), (1, 1), (1, 1), (1, 1)),
    ("1x1 groups 3", (3, 9, 10, 7), 6, 3, (1, 1), (1, 1), (0, 0), (1, 1)),
    ("asymmetric groups 2", (2, 6, 21, 18), 10, 2, (3, 5), (2, 1), (1, 2), (1, 2)),
)
# Convolutions large enough that cuDNN's algorithms need a workspace: (x shape, K, kernel, padding). The last: where
# cuDNN's heuristic weight gradient is the non-fused Winograd of a 5 x 5 kernel, 1.2e-3 off float64 (H200, cuDNN 9),
# past strict fp32's tolerance (the solution's strict_refuses)
WORKSPACE_CASES = (((8, 64, 56, 56), 64, 3, 1), ((16, 256, 14, 14), 256, 3, 1), ((4, 32, 64, 64), 48, 5, 2),
                   ((8, 128, 28, 28), 128, 5, 2))
# Strict fp32's transforming algorithms, watched: (op, x shape, kernel size, algorithm mode), stride 1, "same"
# padding, as many output channels as x has. Calls per op and per family (Winograd, FFT) where cuDNN ranks that
# family above every direct algorithm in strict fp32 (H200, cuDNN 9, scripts/strict_transform_shapes.py, a fresh
# plan per trial, idle and beside another process's GEMMs): a heuristic pick where cuDNN's heuristics do, which
# no load moves; else three benchmark shapes the family won in every trial, as a class grading's load can
# reorder one timing. PyTorch's strict path takes such algorithms (strict fp32 rules out Tensor Core math
# only), so the op must too, or it is slower than F.conv2d under the same flags: on Hopper, where these calls
# were found, each op runs a Winograd or FFT kernel in at least one of its calls (its heuristic calls do
# whichever family comes first); everywhere, no TF32 kernel runs and each call agrees with PyTorch's strict
# call on the same inputs within the strict tolerance (a float64 reference of these sizes would take a
# consumer GPU seconds a call).
_WINOGRAD_BENCHMARK = ((16, 256, 28, 28), (32, 128, 28, 28), (16, 512, 14, 14))
TRANSFORM_WATCH = (*(("forward", xs, 3, "benchmark") for xs in _WINOGRAD_BENCHMARK),  # Winograd
                   ("forward", (32, 128, 28, 28), 3, "heuristic"),  # FFT
                   *(("backward_input", xs, 3, "benchmark") for xs in _WINOGRAD_BENCHMARK),  # Winograd (non-fused)
                   ("backward_input", (16, 128, 28, 28), 3, "heuristic"),  # FFT
                   ("backward_weight", (16, 256, 28, 28), 3, "heuristic"),  # Winograd (non-fused)
                   ("backward_weight", (16, 128, 28, 28), 3, "heuristic"))  # FFT
_TRANSFORMING = re.compile(r"(?i)winograd|fft")
# A batch past cuDNN's 2^31-element descriptors, run in pieces of whole images as PyTorch splits it: HUGE_N images
# of 1 x HUGE_SIDE x HUGE_SIDE through a 1 x 1 kernel to HUGE_K channels, an output of exactly 2^31 elements.
HUGE_N, HUGE_K, HUGE_SIDE = 2, 4, 16384
# The gradients' batch past 2^31 elements: HUGE_BWD_N images of HUGE_BWD_C x H x W through a 2 x 1 kernel (stride
# 1, no padding) to HUGE_BWD_K channels, grad_output of 2^31 elements in two pieces. Taller than wide, in plane and
# kernel, so that a size read for another (W for H) changes what is split or summed. The forward's geometry would
# not do: with one input channel and four outputs, cuDNN's heuristic weight-gradient algorithm lost its float32
# sums (H200, 2026-11-29: on values in [0, 1) every channel came back as exactly 2^25, a quarter of the true sum)
# and the check took 29 s. Here the weight's gradient has 512 values, each a sum of 2^26 terms: drawn with mean 0,
# so that no sum grows far past its terms' norm sqrt(sum of their squares), and each is held within HUGE_SUM_TOL
# of that norm, where a piece dropped or counted twice is about 70% of it off.
HUGE_BWD_N, HUGE_BWD_C, HUGE_BWD_K, HUGE_BWD_H, HUGE_BWD_W = 2, 8, 32, 8193, 4096
HUGE_BWD_KH = 2  # the kernel's height (its width is 1): grad_output is (N, K, H - 1, W)
HUGE_SUM_TOL = 1e-2
HUGE_BWD_ROWS = 64  # rows of grad_output a piece of the reference (64 x 4096 pixels)
HUGE_CHUNK = 1 << 24  # elements a piece of the float64 comparison (128 MiB)
# The timed convolutions: (x shape, output channels), 3x3, stride 1, padding 1.
BENCH = (((32, 512, 7, 7), 512), ((32, 64, 56, 56), 64))
# The launch cache's checks (CUDA graphs): the streams check's convolution, 3x3, stride 1, padding 1.
GRAPH_X, GRAPH_K = (2, 8, 20, 20), 8
GRAPH_Y = (GRAPH_X[0], GRAPH_K, GRAPH_X[2], GRAPH_X[3])  # its output
GRAPH_COUNTS = ("graph_hits", "graph_captures", "graph_failures", "graphs")


def _name(k, s, p, d=1) -> str:
    return f"k{k}s{s}p{p}" + (f"d{d}" if d != 1 else "")


def math_of(mode: str):
    """A check's math mode, restored after: TF32 allowed ("tf32") or not ("strict", "float64")."""
    return math_mode(tf32=mode == "tf32")


def _rand(ctx: Context, name: str, shape, dtype=torch.float32, scale=1.0) -> torch.Tensor:
    g = ctx.generator(name)
    return (torch.randn(shape, generator=g, device="cuda", dtype=torch.float32) * scale).to(dtype)


def _weight(ctx, name, shape, dtype=torch.float32):
    fan_in = shape[1] * shape[2] * shape[3]
    return _rand(ctx, name, shape, dtype, fan_in ** -0.5)


def _double(t):
    return None if t is None else t.detach().double()


def _reference(x, w, s, p, d, groups=1, bias=None):
    return F.conv2d(x.double(), w.double(), _double(bias), s, p, d, groups)


def _reference_grads(x, w, g, s, p, d, groups=1):
    """(grad_x, grad_w, grad_bias) of F.conv2d in float64, by autograd."""
    x64 = x.detach().double().requires_grad_()
    w64 = w.detach().double().requires_grad_()
    b64 = torch.zeros(w.shape[0], dtype=torch.float64, device=w.device, requires_grad=True)
    y = F.conv2d(x64, w64, b64, s, p, d, groups)
    return torch.autograd.grad(y, (x64, w64, b64), g.double())


# PyTorch's convolution among other PyTorch ops: its operators (aten::conv2d, aten::convolution,
# aten::convolution_backward, aten::cudnn_convolution, aten::_conv_depthwise2d, aten::slow_conv2d_*, ...)
# and its own GPU kernels (the depthwise and slow convolutions, im2col / col2im); "convert" is not one
_PYTORCH_CONV = re.compile(r"conv(?!ert)|im2col|col2im")


# cuDNN's and cuBLAS's kernels of TF32 (Tensor Core) math, by name: every one that ran with TF32 allowed and not
# in strict fp32 over the model list's convolutions (H200, cuDNN 9.19) names tf32 or a Tensor Core tile (s1688,
# tensorop) but their helpers (workspace set-up, split-K reductions); no strict kernel does
_TF32_KERNEL = re.compile(r"(?i)tf32|tensorop|s1688|s16816|hmma|hgmma")


def assert_no_pytorch_conv(fn, what: str, *, other_ops: bool = False, strict: bool = False) -> list[tuple[str, str]]:
    """cuDNN's kernels may run, PyTorch's convolution may not: no aten::conv* / aten::cudnn_* op on
    the CPU side, no at::native kernel on the GPU, and at least one kernel must have run.

    `other_ops`: for a whole model, whose BatchNorm, pooling, activations and classifier are PyTorch's:
    PyTorch's other ops and kernels may run (aten::cudnn_batch_norm included); only its convolution's
    ops and kernels may not. Returns what ran, as (kind, name) pairs in the profiler's order: kind "op"
    for an operator dispatched on the host (aten's and the course's, e.g. "ns::conv2d"), "kernel" for a
    GPU kernel."""
    from torch.autograd import DeviceType

    from grader.verify.observe import visible_session

    torch.cuda.synchronize()
    with visible_session() as prof:
        fn()
        torch.cuda.synchronize()
    events = prof.events()
    ran = [("kernel" if e.device_type == DeviceType.CUDA else "op", e.name) for e in events
           if e.device_type == DeviceType.CUDA or "::" in e.name]
    if other_ops:
        ops = sorted({name for kind, name in ran if kind == "op" and name.startswith("aten::") and _PYTORCH_CONV.search(name)})
    else:
        ops = sorted({e.name for e in events if e.device_type == DeviceType.CPU and e.name.startswith("aten::")
                      and ("conv" in e.name or "cudnn" in e.name)})
    if ops:
        raise CheckFailure(f"{what}: PyTorch's convolution ran ({', '.join(ops[:3])}); the op must call cuDNN itself")
    kernels = [name for kind, name in ran if kind == "kernel"]
    native = sorted({k for k in kernels if "at::native" in k and (not other_ops or _PYTORCH_CONV.search(k))})
    if native:
        raise CheckFailure(f"{what}: PyTorch's own {'convolution ' if other_ops else ''}kernels ran "
                           f"({'; '.join(n[:80] for n in native[:2])}); the op must call cuDNN itself")
    if not kernels:
        raise CheckFailure(f"{what}: no GPU kernel ran")
    tensor_math = sorted({k for k in kernels if _TF32_KERNEL.search(k)}) if strict else []
    if tensor_math:
        raise CheckFailure(f"{what}: strict fp32 ran a TF32 (Tensor Core) kernel ({tensor_math[0][:80]}): with TF32 "
                           "off, the plan's math must be CUDNN_FMA_MATH")
    return ran


def graph_counts(m) -> dict:
    """The launch cache's counts from cache_stats()."""
    s = m.cache_stats()
    missing = [k for k in GRAPH_COUNTS if k not in s]
    if missing:
        raise CheckFailure(f"cache_stats() has no {', '.join(missing)}: the launch cache's counts are part of "
                           "the interface")
    return {k: int(s[k]) for k in GRAPH_COUNTS}


@contextmanager
def launch_cache(m, enabled: bool):
    """The launch cache (CUDA graphs) on or off for the body; on again after it (the default)."""
    m.set_graphs(enabled)
    try:
        yield
    finally:
        m.set_graphs(True)


def repeat_on_same_buffers(fn, x: torch.Tensor, values, out_shape) -> list[torch.Tensor]:
    """fn() once per value, with x refilled in place first; each output is copied into a slot made before
    the first call and freed before the next call, so the caching allocator hands the op the same buffers
    every time (as in a training loop): with the launch cache on, the second call captures a graph and the
    later ones replay it. A copy allocated between the calls (a clone) could take the block the op's
    workspace had, and move the workspace, and with it the graph's key, at every call."""
    outs = [torch.empty(out_shape, device="cuda") for _ in values]
    for v, out in zip(values, outs):
        x.copy_(v)
        y = fn()
        out.copy_(y)
        del y
    torch.cuda.synchronize()
    return outs


class Config(NamedTuple):
    """One convolution: x's and the weight's shapes (the weight (C_out, C_in / groups, kh, kw)), its
    parameters, and whether it has a bias."""
    x: tuple
    w: tuple
    stride: tuple
    padding: tuple
    dilation: tuple
    groups: int
    bias: bool

    def __str__(self) -> str:
        return (f"x {self.x}, weight {self.w}, stride {self.stride}, padding {self.padding}, dilation "
                f"{self.dilation}, groups {self.groups}, {'bias' if self.bias else 'no bias'}")


# the kinds of channel grouping a model meets: each gets its own fixed audit call and random draws
KINDS = ("dense", "grouped", "depthwise")


def _draw_config(g: torch.Generator, kind: str) -> Config:
    """A random convolution of one kind: exercise 06's geometry generator (kernel up to 5x5, stride up
    to 3, dilation up to 2, padding up to 2, never an empty output), smaller (each new shape builds
    cuDNN plans), with channels drawn for the kind: dense (groups 1), grouped (2 to 4 groups of 1 to 3
    channels in and out) or depthwise (groups = C_in, C_out = C_in or 2 C_in)."""
    def r(lo, hi):
        return int(torch.randint(lo, hi + 1, (1,), generator=g))

    c = random_case(g, "", batch=3, cin=9, size=24, cout=9)
    if kind == "dense":
        groups, cin, cout = 1, c.cin, c.cout
    elif kind == "grouped":
        groups = r(2, 4)
        cin, cout = groups * r(1, 3), groups * r(1, 3)
    else:
        groups = cin = r(2, 12)
        cout = cin * r(1, 2)
    return Config((c.n, cin, c.h, c.w), (cout, cin // groups, c.kh, c.kw), tuple(c.stride), tuple(c.padding),
                  tuple(c.dilation), groups, bool(c.bias))


def _random_configs(seed: int, count: int) -> list[Config]:
    """`count` random convolutions, the kinds in turn (every list of three or more has each)."""
    g = torch.Generator().manual_seed(seed)
    return [_draw_config(g, KINDS[i % len(KINDS)]) for i in range(count)]


def expect_size_error(fn, ctx, arg: str, what: str) -> None:
    """A tensor or size cuDNN's int32 descriptors cannot hold: an error that says 2^31 and names the
    argument (not a cuDNN status, which names neither), or one of `arg`'s names separated by "|"."""
    msg = expect_error(fn, ctx, names=("2^31",), what=what)
    if not names_one_of(msg, tuple(arg.split("|"))):
        raise CheckFailure(f"{what}: the error says 2^31 but does not name `{arg.replace('|', '` or `')}`: {msg[:200]}")


class CudnnConvSpec(Spec):
    def drop_ins(self) -> list[DropIn]:
        """Conv2d and ConvTranspose2d through the wrapper, built and called as 06's and 07's are (their
        constructions, output sizes and torch.nn's print), held to strict fp32's bound (its transforms: TOL)."""
        from grader.specs.ex06_conv2d import SPEC as CONV2D
        from grader.specs.ex07_conv_transpose2d import SPEC as CONV_TRANSPOSE2D

        return [dataclasses.replace(entry, tol=TOL["strict"], grad_tol=TOL["strict"], group="forward",
                                    grad_group="backward")
                for spec in (CONV2D, CONV_TRANSPOSE2D) for entry in spec.drop_ins()]

    # --- forward -------------------------------------------------------------------------------
    def _expect_forward(self, ctx, x, w, s, p, d, mode, what, algo="benchmark", groups=1, bias=None):
        tensors = dict(x=x, weight=w) if bias is None else dict(x=x, weight=w, bias=bias)
        run = lambda: ctx.module.conv2d(x, w, bias, s, p, d, groups, mode=algo)  # noqa: E731
        with math_of(mode), unmodified(**tensors):
            y = run()
            torch.cuda.synchronize()
        if not isinstance(y, torch.Tensor) or y.dtype != x.dtype:
            raise CheckFailure(f"{what}: expected a {x.dtype} tensor, got {getattr(y, 'dtype', type(y).__name__)}")
        with naming_kernels(run, mode):
            assert_rel_error(y, _reference(x, w, s, p, d, groups, bias), TOL[mode], what)

    def _check_case(self, ctx, k, s, p, mode, algo="benchmark"):
        dtype = torch.float64 if mode == "float64" else torch.float32
        x = _rand(ctx, "case-x", CASE_X, dtype)
        w = _weight(ctx, f"case-w{k}", (CASE_K, CASE_X[1], k, k), dtype)
        b = _rand(ctx, f"case-b{k}", (CASE_K,), dtype)
        if s != 1:  # the stride-1 twin first: a plan keyed without the stride would be found next
            self._expect_forward(ctx, x, w, 1, p, 1, mode, f"forward[{mode}-{_name(k, 1, p)}]", algo)
        self._expect_forward(ctx, x, w, s, p, 1, mode, f"forward[{mode}-{_name(k, s, p)}]", algo)
        self._expect_forward(ctx, x, w, s, p, 1, mode, f"forward[{mode}-{_name(k, s, p)}, with a bias]", algo, bias=b)

    def _check_grouped(self, ctx, case, mode, algo="benchmark"):
        """One grouped convolution after its groups=1 twin on the same x, K and kernel; then with a bias."""
        label, xs, k, groups, (kh, kw), s, p, d = case
        dtype = torch.float64 if mode == "float64" else torch.float32
        x = _rand(ctx, f"grp-x-{label}", xs, dtype)
        dense = _weight(ctx, f"grp-dense-{label}", (k, xs[1], kh, kw), dtype)
        w = _weight(ctx, f"grp-w-{label}", (k, xs[1] // groups, kh, kw), dtype)
        b = _rand(ctx, f"grp-b-{label}", (k,), dtype)
        what = (f"forward[{mode}-groups {label}: x {xs}, weight {tuple(w.shape)}, groups {groups}, stride {s}, "
                f"padding {p}, dilation {d}")
        self._expect_forward(ctx, x, dense, s, p, d, mode, f"{what}: its groups=1 twin, weight {tuple(dense.shape)}]", algo)
        self._expect_forward(ctx, x, w, s, p, d, mode, what + "]", algo, groups)
        self._expect_forward(ctx, x, w, s, p, d, mode, what + ", with a bias]", algo, groups, b)

    def _check_random_forward(self, ctx, name, dtype=torch.float32, mode="strict"):
        for i, c in enumerate(_random_configs(ctx.seed_for(name), 9)):
            x, w = _rand(ctx, f"{name}-x{i}", c.x, dtype), _weight(ctx, f"{name}-w{i}", c.w, dtype)
            b = _rand(ctx, f"{name}-b{i}", c.w[:1], dtype) if c.bias else None
            self._expect_forward(ctx, x, w, c.stride, c.padding, c.dilation, mode, f"{name}: {c}", groups=c.groups, bias=b)

    def _check_noncontiguous(self, ctx):
        x = _rand(ctx, "nc-x", (2, 6, 15, 26))
        w = _weight(ctx, "nc-w", (5, 6, 3, 3))
        self._expect_forward(ctx, x[:, :, :, ::2], w, 1, 1, 1, "strict", "forward[strided view x[..., ::2]]")
        self._expect_forward(ctx, x.contiguous(memory_format=torch.channels_last), w, 2, 1, 1, "strict",
                             "forward[channels_last x]")
        self._expect_forward(ctx, x, w.transpose(2, 3), 1, 0, 1, "strict", "forward[transposed weight view]")

    def _check_padding_words(self, ctx):
        """padding "same" and "valid" as F.conv2d takes them: "same" where d (k - 1) is odd along an axis
        (one more row or column of zeros after the end than before, PyTorch's side), even, or both, with a
        dilation; "valid" with a stride; "same" with a stride refused with an error naming the padding, as
        PyTorch refuses it."""
        x = _rand(ctx, "pw-x", (2, 5, 13, 12))
        for kh, kw, d in ((2, 3, (1, 1)), (4, 4, (1, 1)), (3, 2, (2, 3)), (3, 3, (1, 1))):
            w = _weight(ctx, f"pw-w{kh}{kw}", (6, 5, kh, kw))
            self._expect_forward(ctx, x, w, 1, "same", d, "strict",
                                 f"forward[padding 'same', a {kh}x{kw} kernel, dilation {d}]")
        self._expect_forward(ctx, x, w, 2, "valid", 1, "strict", "forward[padding 'valid', stride 2]")
        expect_error(ctx.module.conv2d, x, w, None, 2, "same", names=("padding",),
                     what="forward[padding 'same' with stride 2, which PyTorch refuses]")

    def _check_padding_words_backward(self, ctx):
        """The gradients through padding "same" (an odd d (k - 1) along one axis: the zeros PyTorch adds after
        the end take no gradient back to x)."""
        x = _rand(ctx, "pwb-x", (2, 4, 11, 10)).requires_grad_()
        w = _weight(ctx, "pwb-w", (6, 4, 2, 3)).requires_grad_()
        b = _rand(ctx, "pwb-b", (6,)).requires_grad_()
        with math_of("strict"):
            y = ctx.module.conv2d(x, w, b, 1, "same", (1, 2))
            g = _rand(ctx, "pwb-g", tuple(y.shape))
            grads = torch.autograd.grad(y, (x, w, b), g)
            torch.cuda.synchronize()
        for name, got, ref in zip(("x", "weight", "bias"), grads, _reference_grads(x, w, g, 1, "same", (1, 2))):
            assert_rel_error(got, ref, TOL["strict"], f"backward[padding 'same', a 2x3 kernel, dilation (1, 2)]: "
                             f"the gradient of {name}")

    def _check_poisoned(self, ctx):
        """Run twice with results that differ, poisoning free memory in between: an output element
        left unwritten shows up as NaN or as the first run's value."""
        x = _rand(ctx, "poison-x", (3, 7, 33, 31))
        w = _weight(ctx, "poison-w", (9, 7, 3, 3))
        with math_of("strict"):
            first = ctx.module.conv2d(x, w, None, 1, 1)
            torch.cuda.synchronize()
        del first
        poison(torch.empty((1 << 22,), device="cuda"))
        self._expect_forward(ctx, -x, w, 1, 1, 1, "strict", "forward[output poisoned]")

    def _check_modes(self, ctx, algo):
        for k, s, p in ((3, 2, 1), (5, 1, 2)):
            x = _rand(ctx, f"{algo}-x{k}", CASE_X)
            w = _weight(ctx, f"{algo}-w{k}", (CASE_K, CASE_X[1], k, k))
            self._expect_forward(ctx, x, w, s, p, 1, "strict", f"forward[mode={algo}, {_name(k, s, p)}]", algo)
            self._expect_forward(ctx, x, w, s, p, 1, "tf32", f"forward[mode={algo}, tf32, {_name(k, s, p)}]", algo)
        for case in (GROUPED[0], GROUPED[2]):  # depthwise and ResNeXt's, with a bias
            label, xs, k, groups, (kh, kw), s, p, d = case
            x = _rand(ctx, f"{algo}-x-{label}", xs)
            w = _weight(ctx, f"{algo}-w-{label}", (k, xs[1] // groups, kh, kw))
            b = _rand(ctx, f"{algo}-b-{label}", (k,))
            for mode in ("strict", "tf32"):
                self._expect_forward(ctx, x, w, s, p, d, mode, f"forward[mode={algo}, {mode}, groups {label}, with a bias]",
                                     algo, groups, b)

    def _check_own_forward(self, ctx):
        x = _rand(ctx, "own-x", (4, 16, 28, 28))
        w = _weight(ctx, "own-w", (32, 16, 3, 3))
        wd = _weight(ctx, "own-wd", (32, 1, 3, 3))  # depthwise x2: PyTorch has its own kernels for it
        b = _rand(ctx, "own-b", (32,))
        m = ctx.module
        with math_of("strict"):
            m.conv2d(x, w, None, 1, 1)  # a plan exists; the profiled call uses it
            assert_no_pytorch_conv(lambda: m.conv2d(x, w, None, 1, 1), "forward", strict=True)
            # (uncached: the algorithm is chosen again in the profiled call, where a search times every one)
            assert_no_pytorch_conv(lambda: m.conv2d(x, w, None, 2, 1, mode="uncached"), "forward, mode=uncached")
            m.conv2d(x, wd, b, 1, 1, 1, 16)
            assert_no_pytorch_conv(lambda: m.conv2d(x, wd, b, 1, 1, 1, 16), "forward, depthwise with a bias", strict=True)
            assert_no_pytorch_conv(lambda: m.conv2d(x, w, b, 2, 1, mode="uncached"), "forward with a bias, mode=uncached")
        self._check_strict_transforms(ctx, "forward")

    def _check_strict_transforms(self, ctx, direction: str):
        """Strict fp32 at TRANSFORM_WATCH's calls of `direction`'s ops: no TF32 kernel runs, every answer is
        PyTorch's strict one, and (on Hopper, where the calls were found) each op runs a Winograd or FFT kernel in
        at least one of its calls."""
        m = ctx.module
        transformed: dict[str, list[str]] = {}
        for i, (op, xs, ks, algo) in enumerate(TRANSFORM_WATCH):
            if not op.startswith(direction):
                continue
            x = _rand(ctx, f"transform-x{i}", xs)
            w = _weight(ctx, f"transform-w{i}", (xs[1], xs[1], ks, ks))
            g = _rand(ctx, f"transform-g{i}", xs)  # stride 1, "same" padding: the output has x's shape
            pad = ks // 2
            call = {"forward": lambda: m.conv2d(x, w, None, 1, pad, mode=algo),
                    "backward_input": lambda: m.conv2d_backward_input(g, w, tuple(xs), 1, pad, mode=algo),
                    "backward_weight": lambda: m.conv2d_backward_weight(g, x, tuple(w.shape), 1, pad, mode=algo)}[op]
            what = f"{op}: x {xs}, {_name(ks, 1, pad)}, mode={algo}, strict fp32"
            with math_of("strict"):
                got = call()  # its plan, chosen (by timing every algorithm in benchmark mode); the profiled call uses it
                kernels = [name for kind, name in assert_no_pytorch_conv(call, what, strict=True) if kind == "kernel"]
                mask = {"forward": None, "backward_input": [True, False, False],
                        "backward_weight": [False, True, False]}[op]
                if mask is None:
                    expected = F.conv2d(x, w, None, 1, pad)
                else:
                    grads = torch.ops.aten.convolution_backward(g, x, w, None, [1, 1], [pad, pad], [1, 1], False,
                                                                [0, 0], 1, mask)
                    expected = grads[0] if mask[0] else grads[1]
            assert_rel_error(got, expected, TOL["strict"], f"{what}, against PyTorch's strict fp32")
            hits = transformed.setdefault(op, [])
            if any(_TRANSFORMING.search(k) for k in kernels):
                hits.append(what)
        # where cuDNN ranks a transform first was measured on Hopper (compute capability 9.0) only: elsewhere
        # the calls are held to the other two properties
        if torch.cuda.get_device_capability()[0] != 9:
            return
        for op, hits in transformed.items():
            if not hits:
                calls = "; ".join(f"x {xs}, mode={algo}" for o, xs, _, algo in TRANSFORM_WATCH if o == op)
                raise CheckFailure(f"{op} in strict fp32 ran no Winograd or FFT kernel at {calls}, where cuDNN ranks "
                                   "such an algorithm first and PyTorch's strict path takes it: strict fp32 rules out "
                                   "Tensor Core math only, not the algorithms that transform the data")

    def _check_workspace(self, ctx, backward: bool):
        """Larger convolutions, where the chosen algorithms usually need a workspace (the seed crashed
        on a null workspace with a non-zero size), in both algorithm modes and both math modes."""
        for i, (xs, k, ks, pad) in enumerate(WORKSPACE_CASES):
            x = _rand(ctx, f"ws-x{i}", xs)
            w = _weight(ctx, f"ws-w{i}", (k, xs[1], ks, ks))
            for algo in ("heuristic", "benchmark"):
                for mode in ("strict", "tf32"):
                    what = f"{'backward' if backward else 'forward'}[workspace: x {xs}, {_name(ks, 1, pad)}, {mode}, mode={algo}]"
                    if backward:
                        self._expect_backward(ctx, x, w, (1, 1), (pad, pad), (1, 1), mode, what, algo)
                    else:
                        self._expect_forward(ctx, x, w, 1, pad, 1, mode, what, algo)

    # --- backward ------------------------------------------------------------------------------
    def _expect_backward(self, ctx, x, w, s, p, d, mode, what, algo="benchmark", groups=1):
        """conv2d_backward_input, conv2d_backward_weight and conv2d_backward_bias of one convolution."""
        y_shape = (x.shape[0], w.shape[0], *conv_output_hw(x.shape[2:], w.shape[2:], s, p, d))
        g = _rand(ctx, what + "-g", y_shape, x.dtype)
        m = ctx.module
        with math_of(mode), unmodified(grad_output=g, x=x, weight=w):
            gx = m.conv2d_backward_input(g, w, tuple(x.shape), s, p, d, groups, mode=algo)
            gw = m.conv2d_backward_weight(g, x, tuple(w.shape), s, p, d, groups, mode=algo)
            gb = m.conv2d_backward_bias(g)
            torch.cuda.synchronize()
        ref_x, ref_w, ref_b = _reference_grads(x, w, g, s, p, d, groups)
        with RelErrors() as errors:  # the three in one copy to the host, in this order
            errors.add(gx, ref_x, TOL[mode], f"{what}: conv2d_backward_input (grad of x)")
            errors.add(gw, ref_w, TOL[mode], f"{what}: conv2d_backward_weight (grad of weight)")
            # a sum of grad_output: exact to its dtype's rounding whatever the math mode
            errors.add(gb, ref_b, TOL["float64" if x.dtype == torch.float64 else "strict"],
                       f"{what}: conv2d_backward_bias (grad of bias)")

    def _check_backward_case(self, ctx, k, s, p, mode):
        dtype = torch.float64 if mode == "float64" else torch.float32
        x = _rand(ctx, "bcase-x", CASE_X, dtype)
        w = _weight(ctx, f"bcase-w{k}", (CASE_K, CASE_X[1], k, k), dtype)
        if s != 1:
            self._expect_backward(ctx, x, w, (1, 1), (p, p), (1, 1), mode, f"backward[{mode}-{_name(k, 1, p)}]")
        self._expect_backward(ctx, x, w, (s, s), (p, p), (1, 1), mode, f"backward[{mode}-{_name(k, s, p)}]")

    def _check_backward_grouped(self, ctx, case, mode):
        """The gradients of one grouped convolution, after those of its groups=1 twin on the same x."""
        label, xs, k, groups, (kh, kw), s, p, d = case
        dtype = torch.float64 if mode == "float64" else torch.float32
        x = _rand(ctx, f"bgrp-x-{label}", xs, dtype)
        dense = _weight(ctx, f"bgrp-dense-{label}", (k, xs[1], kh, kw), dtype)
        w = _weight(ctx, f"bgrp-w-{label}", (k, xs[1] // groups, kh, kw), dtype)
        what = (f"backward[{mode}-groups {label}: x {xs}, weight {tuple(w.shape)}, groups {groups}, stride {s}, "
                f"padding {p}, dilation {d}")
        self._expect_backward(ctx, x, dense, s, p, d, mode, f"{what}: its groups=1 twin, weight {tuple(dense.shape)}]")
        self._expect_backward(ctx, x, w, s, p, d, mode, what + "]", groups=groups)

    def _check_random_backward(self, ctx, name):
        for i, c in enumerate(_random_configs(ctx.seed_for(name), 6)):
            x, w = _rand(ctx, f"{name}-x{i}", c.x), _weight(ctx, f"{name}-w{i}", c.w)
            self._expect_backward(ctx, x, w, c.stride, c.padding, c.dilation, "strict", f"{name}: {c}", groups=c.groups)

    # (C_in, C_out, k, stride, padding, output_padding, dilation, groups, bias)
    TRANSPOSED = ((6, 4, 3, 2, 1, 1, 1, 1, False), (5, 7, 1, 1, 0, 0, 1, 1, True), (4, 3, 4, 3, 2, 2, 1, 1, False),
                  (3, 5, 3, 2, 1, 1, 2, 1, True), (8, 8, 7, 2, 3, 1, 1, 1, False),
                  (6, 4, 3, 2, 1, 1, 1, 2, True),  # 2 groups: weight (6, 2, 3, 3)
                  (8, 8, 3, 2, 1, 1, 1, 8, True),  # depthwise: weight (8, 1, 3, 3)
                  (6, 9, 4, 3, 2, 2, 1, 3, False),  # 3 groups of 2 -> 3 channels
                  (4, 8, 3, 1, 1, 0, 2, 4, True))  # depthwise x2, dilated

    def _check_huge_batch_forward(self, ctx):
        """conv2d and conv_transpose2d on a batch whose output has 2^31 elements (HUGE_N, HUGE_K, HUGE_SIDE),
        strict fp32, each output plane against float64 piece by piece. Needs x, the output and a float64 piece."""
        what = "forward[huge: a batch past 2^31 output elements, in pieces of whole images]"
        plane = HUGE_SIDE * HUGE_SIDE
        require_free_memory(4 * plane * HUGE_N * (1 + HUGE_K) + 64 * HUGE_CHUNK + (2 << 30), what)
        g = ctx.generator("huge batch forward")
        x = torch.empty((HUGE_N, 1, HUGE_SIDE, HUGE_SIDE), device="cuda").normal_(generator=g)
        w = torch.randn((HUGE_K, 1, 1, 1), generator=g, device="cuda")
        b = torch.randn((HUGE_K,), generator=g, device="cuda")
        w64, b64 = w.reshape(-1).double(), b.double()
        for name, call in (("conv2d", lambda: ctx.module.conv2d(x, w, b, 1, 0, mode="heuristic")),
                           ("conv_transpose2d", lambda: ctx.module.conv_transpose2d(
                               x, w.reshape(1, HUGE_K, 1, 1), b, 1, 0, 0, 1, 1, mode="heuristic"))):
            with math_of("strict"):
                y = call()
            if tuple(y.shape) != (HUGE_N, HUGE_K, HUGE_SIDE, HUGE_SIDE):
                raise CheckFailure(f"{what}: {name} gave shape {tuple(y.shape)}, expected "
                                   f"{(HUGE_N, HUGE_K, HUGE_SIDE, HUGE_SIDE)}")
            cmp = Comparison(TOL["strict"], f"{what}: {name} of x {tuple(x.shape)} with a 1 x 1 weight to {HUGE_K} "
                             "channels and a bias")
            for n in range(HUGE_N):
                for k in range(HUGE_K):
                    xs, ys = x[n, 0].reshape(-1), y[n, k].reshape(-1)
                    for i in range(0, plane, HUGE_CHUNK):
                        cmp.add(ys[i:i + HUGE_CHUNK], xs[i:i + HUGE_CHUNK].double() * w64[k] + b64[k],
                                offset=((n * HUGE_K + k) * plane + i))
            del y
            if cmp.problem():
                raise CheckFailure(cmp.problem())

    def _check_huge_batch_backward(self, ctx):
        """The gradients of x, the weight and the bias for a batch whose grad_output has 2^31 elements (HUGE_BWD_*),
        strict fp32, piece by piece of rows: the grad of x at the strict tolerance, the weight's and the bias's sums
        over the whole batch within HUGE_SUM_TOL of their terms' norm (float32 products of a piece summed in
        float64: their error is far below that tolerance)."""
        what = "backward[huge: a batch past 2^31 output elements, in pieces of whole images]"
        n_img, c, k, h, w_, kh = HUGE_BWD_N, HUGE_BWD_C, HUGE_BWD_K, HUGE_BWD_H, HUGE_BWD_W, HUGE_BWD_KH
        ho = h - kh + 1
        piece = HUGE_BWD_ROWS * w_
        require_free_memory(4 * n_img * w_ * (2 * c * h + k * ho) + 16 * piece * (2 * c + k) + (2 << 30), what)
        g = ctx.generator("huge batch backward")
        x = torch.empty((n_img, c, h, w_), device="cuda").normal_(generator=g)
        gy = torch.empty((n_img, k, ho, w_), device="cuda").normal_(generator=g)
        w = torch.randn((k, c, kh, 1), generator=g, device="cuda") * (c * kh) ** -0.5
        m = ctx.module
        with math_of("strict"):
            gw = m.conv2d_backward_weight(gy, x, (k, c, kh, 1), 1, 0, mode="heuristic")
            gb = m.conv2d_backward_bias(gy)
            gx = m.conv2d_backward_input(gy, w, (n_img, c, h, w_), 1, 0, mode="heuristic")
        if tuple(gx.shape) != tuple(x.shape):
            raise CheckFailure(f"{what}: conv2d_backward_input gave shape {tuple(gx.shape)}, expected {tuple(x.shape)}")
        if tuple(gw.shape) != (k, c, kh, 1) or tuple(gb.shape) != (k,):
            raise CheckFailure(f"{what}: the weight's and the bias's gradients have shapes {tuple(gw.shape)} and "
                               f"{tuple(gb.shape)}, expected {(k, c, kh, 1)} and {(k,)}")
        # the sums of the terms and of their squares (the norm each sum is held to), accumulated in float64
        sum_w = torch.zeros((kh, k, c), dtype=torch.float64, device="cuda")
        sq_w = torch.zeros_like(sum_w)
        sum_b = torch.zeros(k, dtype=torch.float64, device="cuda")
        sq_b = torch.zeros_like(sum_b)
        wt = w[..., 0].permute(2, 1, 0).contiguous()  # (kh, c, k): x's gradient is wt[i] @ grad_output, shifted by i
        # The grad of x against PyTorch's strict float32 products (a sum of 64 terms each: about 1e-7 off, 100x
        # below the tolerance): in float64 they would take a consumer card's float64 units about a minute.
        cmp = Comparison(TOL["strict"], f"{what}: conv2d_backward_input (grad of x)")
        with math_of("strict"):
            for n in range(n_img):
                for t in range(0, ho, HUGE_BWD_ROWS):  # grad_output's rows t .. t + rows
                    rows = min(HUGE_BWD_ROWS, ho - t)
                    gs = gy[n, :, t:t + rows].reshape(k, -1)
                    for i in range(kh):
                        xs = x[n, :, t + i:t + i + rows].reshape(c, -1)
                        sum_w[i] += (gs @ xs.T).double()
                        sq_w[i] += (gs.square() @ xs.square().T).double()
                    sum_b += gs.double().sum(1)
                    sq_b += gs.double().square().sum(1)
                for r in range(0, h, HUGE_BWD_ROWS):  # x's rows r .. r + rows
                    rows = min(HUGE_BWD_ROWS, h - r)
                    expected = torch.zeros((c, rows * w_), device="cuda")
                    for i in range(kh):  # grad_output's rows r - i .. reach them through the kernel's row i
                        lo, hi = max(r - i, 0), min(r + rows - i, ho)
                        if hi > lo:
                            expected[:, (lo + i - r) * w_:(hi + i - r) * w_] += wt[i] @ gy[n, :, lo:hi].reshape(k, -1)
                    cmp.add(gx[n, :, r:r + rows].reshape(c, -1), expected)
        if cmp.problem():
            raise CheckFailure(cmp.problem())
        for name, got, expected, sq, call in (
                ("weight", gw.permute(2, 0, 1, 3).reshape(-1), sum_w.reshape(-1), sq_w.reshape(-1),
                 "conv2d_backward_weight"),
                ("bias", gb.reshape(-1), sum_b, sq_b, "conv2d_backward_bias")):
            norm = sq.sqrt()
            off = ((got.double() - expected).abs() / norm).nan_to_num(nan=float("inf"))
            if not bool((off <= HUGE_SUM_TOL).all()):
                j = int(off.argmax())
                raise CheckFailure(f"{what}: {call} (grad of {name}): element {j} is {got[j].item():.8g}, expected "
                                   f"{expected[j].item():.8g}: off by {off[j].item():.3g} of its terms' norm "
                                   f"{norm[j].item():.6g} (tolerance {HUGE_SUM_TOL:g})")

    def _check_transposed(self, ctx, mode):
        for i, (ci, co, k, s, p, op, d, groups, bias) in enumerate(self.TRANSPOSED):
            x = _rand(ctx, f"t{mode}-x{i}", (2, ci, 9, 13))
            w = _weight(ctx, f"t{mode}-w{i}", (ci, co // groups, k, k))
            b = _rand(ctx, f"t{mode}-b{i}", (co,)) if bias else None
            what = (f"conv_transpose2d[{mode}, weight {tuple(w.shape)}, stride {s}, padding {p}, output_padding {op}, "
                    f"groups {groups}, dilation {d}, {'bias' if bias else 'no bias'}]")
            tensors = dict(x=x, weight=w) if b is None else dict(x=x, weight=w, bias=b)
            with math_of(mode), unmodified(**tensors):
                y = ctx.module.conv_transpose2d(x, w, b, s, p, op, groups, d)
                torch.cuda.synchronize()
            expected = F.conv_transpose2d(x.double(), w.double(), _double(b), s, p, op, groups, d)
            assert_rel_error(y, expected, TOL[mode], what)

    def _check_autograd(self, ctx):
        m = ctx.module
        # (x shape, weight shape, groups, bias): dense without a bias, grouped and depthwise with one
        for i, (xs, ws, groups, bias) in enumerate((((2, 5, 14, 11), (7, 5, 3, 3), 1, False),
                                                    ((2, 6, 14, 11), (4, 3, 3, 3), 2, True),
                                                    ((2, 5, 13, 12), (10, 1, 3, 3), 5, True))):
            x = _rand(ctx, f"ag-x{i}", xs).requires_grad_()
            w = _weight(ctx, f"ag-w{i}", ws).requires_grad_()
            b = _rand(ctx, f"ag-b{i}", ws[:1]).requires_grad_() if bias else None
            inputs = (x, w) if b is None else (x, w, b)
            with math_of("strict"):
                y = m.conv2d(x, w, b, 2, 1, 1, groups)
                g = _rand(ctx, f"ag-g{i}", tuple(y.shape))
                grads = torch.autograd.grad(y, inputs, g)
                torch.cuda.synchronize()
            refs = _reference_grads(x, w, g, (2, 2), (1, 1), (1, 1), groups)
            for name, got, ref in zip(("x", "weight", "bias"), grads, refs):
                assert_rel_error(got, ref, TOL["strict"], f"autograd: grad of {name} through conv2d (x {xs}, weight "
                                 f"{ws}, groups {groups}, {'bias' if bias else 'no bias'})")
        # (x shape, weight shape (C_in, C_out / groups, k, k), groups, bias)
        for i, (xs, ws, groups, bias) in enumerate((((2, 4, 6, 5), (4, 3, 3, 3), 1, False),
                                                    ((2, 6, 6, 5), (6, 2, 3, 3), 3, True))):
            xt = _rand(ctx, f"agt-x{i}", xs).requires_grad_()
            wt = _weight(ctx, f"agt-w{i}", ws).requires_grad_()
            bt = _rand(ctx, f"agt-b{i}", (ws[1] * groups,)).requires_grad_() if bias else None
            inputs = (xt, wt) if bt is None else (xt, wt, bt)
            with math_of("strict"):
                yt = m.conv_transpose2d(xt, wt, bt, 2, 1, 1, groups)
                gt = _rand(ctx, f"agt-g{i}", tuple(yt.shape))
                grads = torch.autograd.grad(yt, inputs, gt)
            doubles = [t.detach().double().requires_grad_() for t in inputs]
            y64 = F.conv_transpose2d(doubles[0], doubles[1], doubles[2] if bt is not None else None, 2, 1, 1, groups)
            refs = torch.autograd.grad(y64, doubles, gt.double())
            for name, got, ref in zip(("x", "weight", "bias"), grads, refs):
                assert_rel_error(got, ref, TOL["strict"], f"autograd: grad of {name} through conv_transpose2d (x {xs}, "
                                 f"weight {ws}, groups {groups}, {'bias' if bias else 'no bias'})")

    def _check_gradcheck(self, ctx):
        fn, tfn = ctx.module.conv2d, ctx.module.conv_transpose2d
        x = _rand(ctx, "gc-x", (2, 3, 7, 6), torch.float64).requires_grad_()
        w = _rand(ctx, "gc-w", (4, 3, 3, 2), torch.float64).requires_grad_()
        xg = _rand(ctx, "gc-xg", (2, 4, 7, 6), torch.float64).requires_grad_()
        wg = _rand(ctx, "gc-wg", (6, 2, 3, 2), torch.float64).requires_grad_()
        bg = _rand(ctx, "gc-bg", (6,), torch.float64).requires_grad_()
        xt = _rand(ctx, "gc-xt", (2, 4, 5, 4), torch.float64).requires_grad_()
        wt = _rand(ctx, "gc-wt", (4, 3, 3, 2), torch.float64).requires_grad_()
        bt = _rand(ctx, "gc-bt", (6,), torch.float64).requires_grad_()
        for what, f, inputs in (
                ("conv2d", lambda a, b: fn(a, b, None, (2, 1), (1, 0), (1, 2)), (x, w)),
                ("conv2d with 2 groups and a bias", lambda a, b, c: fn(a, b, c, (2, 1), (1, 0), (1, 2), 2), (xg, wg, bg)),
                ("conv_transpose2d with 2 groups and a bias", lambda a, b, c: tfn(a, b, c, 2, 1, 1, 2), (xt, wt, bt))):
            try:
                ok = torch.autograd.gradcheck(f, inputs, eps=1e-6, atol=1e-6)
            except Exception as e:
                raise CheckFailure(f"gradcheck of {what} in float64: {str(e).splitlines()[0][:300]}") from None
            if not ok:
                raise CheckFailure(f"gradcheck of {what} in float64 failed")

    def _check_own_backward(self, ctx):
        x = _rand(ctx, "ownb-x", (4, 16, 28, 28))
        w = _weight(ctx, "ownb-w", (32, 16, 3, 3))
        wd = _weight(ctx, "ownb-wd", (32, 1, 3, 3))
        g = _rand(ctx, "ownb-g", (4, 32, 28, 28))
        m = ctx.module
        with math_of("strict"):
            def every():
                m.conv2d_backward_input(g, w, tuple(x.shape), 1, 1)
                m.conv2d_backward_weight(g, x, tuple(w.shape), 1, 1)
                m.conv2d_backward_input(g, wd, tuple(x.shape), 1, 1, 1, 16)  # depthwise x2
                m.conv2d_backward_weight(g, x, tuple(wd.shape), 1, 1, 1, 16)
                m.conv2d_backward_bias(g)
            every()
            assert_no_pytorch_conv(every, "backward", strict=True)
        self._check_strict_transforms(ctx, "backward")

    # --- cache ---------------------------------------------------------------------------------
    def _stats(self, ctx):
        s = ctx.module.cache_stats()
        return {k: int(s[k]) for k in ("hits", "misses", "evictions", "size", "capacity")}  # workspace: not compared

    def _check_hit(self, ctx):
        m = ctx.module
        x = _rand(ctx, "hit-x", (2, 5, 12, 12))
        w = _weight(ctx, "hit-w", (6, 5, 3, 3))
        m.cache_clear()
        with math_of("strict"):
            m.conv2d(x, w, None, 1, 1)
            first = self._stats(ctx)
            if (first["misses"], first["hits"], first["size"]) != (1, 0, 1):
                raise CheckFailure(f"cache: after cache_clear() and one call, expected 1 miss, 0 hits and 1 plan, got {first}")
            self._expect_forward(ctx, -x, w, 1, 1, 1, "strict", "cache[second identical call]")
        second = self._stats(ctx)
        if (second["misses"], second["hits"], second["size"]) != (1, 1, 1):
            raise CheckFailure(f"cache: a second call with the same shapes and parameters must be a hit; got {second}")

    def _check_key_fields(self, ctx):
        """Each field that changes the plan, changed alone (each dimension of a pair alone too), must
        miss and give the right answer; repeated, it must hit. A property of every operation: the same
        fields are changed in the forward, in backward-data and in backward-filter, and the operation
        changed alone too. Groups change the weight's channels with them (C_in / groups); the answers
        are checked, not only the counts the module reports about itself."""
        m = ctx.module
        x = _rand(ctx, "key-x", (2, 6, 16, 15))
        w = _weight(ctx, "key-w", (6, 6, 3, 3))
        base = dict(x=x, w=w, s=(1, 1), p=(1, 1), d=(1, 1), groups=1, mode="strict", algo="benchmark")
        variations = {
            "stride": dict(s=(2, 2)), "stride (height only)": dict(s=(2, 1)), "stride (width only)": dict(s=(1, 2)),
            "padding": dict(p=(0, 0)), "padding (height only)": dict(p=(0, 1)), "padding (width only)": dict(p=(1, 0)),
            "dilation": dict(d=(2, 2)), "dilation (height only)": dict(d=(2, 1)), "dilation (width only)": dict(d=(1, 2)),
            "dtype (float64)": dict(x=x.double(), w=w.double(), mode="float64"),
            "math mode (TF32 allowed)": dict(mode="tf32"),
            "batch size": dict(x=x[:1]), "input channels": dict(x=x[:, :4], w=w[:, :4]),
            "input height": dict(x=x[:, :, :13]), "input width": dict(x=x[:, :, :, :12]),
            "output channels": dict(w=w[:4]), "kernel size": dict(w=_weight(ctx, "key-w5", (6, 6, 5, 5))),
            "kernel height": dict(w=_weight(ctx, "key-w53", (6, 6, 5, 3))),
            "kernel width": dict(w=_weight(ctx, "key-w35", (6, 6, 3, 5))),
            "groups (2)": dict(w=w[:, :3], groups=2), "groups (3)": dict(w=w[:, :2], groups=3),
            "groups (6, depthwise)": dict(w=w[:, :1], groups=6),
            "algorithm mode (heuristic)": dict(algo="heuristic"),
        }
        grads = {}

        def grad_output(c):
            """A gradient of the call's output shape (one per shape and dtype, drawn once)."""
            xs, ws, s, p, d = c["x"].shape, c["w"].shape, c["s"], c["p"], c["d"]
            shape = (xs[0], ws[0], *conv_output_hw(xs[2:], ws[2:], s, p, d))
            key = (shape, c["x"].dtype)
            if key not in grads:
                grads[key] = _rand(ctx, f"key-g{shape}", shape, c["x"].dtype)
            return grads[key]

        def call(op, c, what):
            xc, wc = c["x"].contiguous(), c["w"].contiguous()
            conv = (c["s"], c["p"], c["d"], c["groups"])
            if op == "forward":
                run = lambda: m.conv2d(xc, wc, None, *conv, mode=c["algo"])  # noqa: E731
                expected = _reference(xc, wc, *conv)
            elif op == "backward-data":
                g = grad_output(c)
                run = lambda: m.conv2d_backward_input(g, wc, tuple(xc.shape), *conv, mode=c["algo"])  # noqa: E731
                expected = torch.nn.grad.conv2d_input(tuple(xc.shape), wc.double(), g.double(), *conv)
            else:
                g = grad_output(c)
                run = lambda: m.conv2d_backward_weight(g, xc, tuple(wc.shape), *conv, mode=c["algo"])  # noqa: E731
                expected = torch.nn.grad.conv2d_weight(xc.double(), tuple(wc.shape), g.double(), *conv)
            with math_of(c["mode"]):
                out = run()
            torch.cuda.synchronize()
            with naming_kernels(run, c["mode"]):
                assert_rel_error(out, expected, TOL[c["mode"]], f"cache[{op}: {what}]")

        def new_key(op, c, what):
            """A call whose key no earlier call had: a miss and the right answer; again: a hit."""
            before = self._stats(ctx)
            call(op, c, what)
            after = self._stats(ctx)
            if after["misses"] != before["misses"] + 1 or after["hits"] != before["hits"]:
                raise CheckFailure(f"cache: {op}, {what}, was a hit; the key must tell them apart (counts before "
                                   f"{before}, after {after})")
            call(op, c, f"{what}, repeated")
            again = self._stats(ctx)
            if again["hits"] != after["hits"] + 1:
                raise CheckFailure(f"cache: {op}, repeating {what} was not a hit ({after} -> {again})")

        m.cache_clear()
        call("forward", base, "the first call")
        for op in ("forward", "backward-data", "backward-filter"):
            if op != "forward":  # the operation changed alone
                new_key(op, base, f"a call that differs from the first only in the operation ({op})")
            for field, change in variations.items():
                new_key(op, {**base, **change}, f"a call that differs only in {field}")
        # a bias is no key field (the same plan, then cudnnAddTensor): whatever the counts, the answer
        b = _rand(ctx, "key-b", (6,))
        with math_of("strict"):
            y = m.conv2d(x, w, b, 1, 1)
        assert_rel_error(y, _reference(x, w, 1, 1, 1, 1, b), TOL["strict"], "cache[forward: the first call with a bias]")

    def _check_clear(self, ctx):
        m = ctx.module
        x = _rand(ctx, "clear-x", (1, 3, 9, 9))
        w = _weight(ctx, "clear-w", (4, 3, 3, 3))
        with math_of("strict"):
            m.conv2d(x, w, None, 1, 1)
            m.conv2d(x, w, None, 2, 1)
            if self._stats(ctx)["size"] < 1:
                raise CheckFailure(f"cache: no plan is held after two calls: {self._stats(ctx)}")
            m.cache_clear()
            s = self._stats(ctx)
            if (s["size"], s["hits"], s["misses"]) != (0, 0, 0):
                raise CheckFailure(f"cache: cache_clear() must drop every plan and reset the counts, got {s}")
            self._expect_forward(ctx, x, w, 1, 1, 1, "strict", "cache[call after cache_clear()]")
            s = self._stats(ctx)
            if (s["size"], s["misses"]) != (1, 1):
                raise CheckFailure(f"cache: the first call after cache_clear() must miss and add a plan, got {s}")

    def _check_bounded(self, ctx):
        m = ctx.module
        x = _rand(ctx, "lru-x", (1, 4, 24, 24))
        w = _weight(ctx, "lru-w", (4, 4, 3, 3))
        cap = self._stats(ctx)["capacity"]
        m.cache_clear()
        try:
            m.set_cache_capacity(3)
            with math_of("strict"):
                for h in (20, 21, 22, 23, 24):  # five keys: plans for 20 and 21 are evicted
                    m.conv2d(x[:, :, :h], w, None, 1, 1)
                s = self._stats(ctx)
                if s["size"] != 3 or s["evictions"] != 2:
                    raise CheckFailure(f"cache: with capacity 3, five different calls must leave 3 plans and 2 evictions, got {s}")
                m.conv2d(x[:, :, :22], w, None, 1, 1)  # the oldest kept plan: a hit, and now the newest
                m.conv2d(x[:, :, :20], w, None, 1, 1)  # evicted: a miss, which evicts 23 (least recently used)
                m.conv2d(x[:, :, :22], w, None, 1, 1)
                s2 = self._stats(ctx)
                if (s2["hits"] - s["hits"], s2["misses"] - s["misses"]) != (2, 1):
                    raise CheckFailure(f"cache: least-recently-used eviction expected (2 hits, 1 miss), got {s} -> {s2}")
                self._expect_forward(ctx, x[:, :, :23], w, 1, 1, 1, "strict", "cache[call after eviction]")
                s3 = self._stats(ctx)
                if s3["misses"] != s2["misses"] + 1 or s3["size"] != 3:
                    raise CheckFailure(f"cache: the least recently used plan should have been evicted: {s2} -> {s3}")
        finally:
            m.set_cache_capacity(max(cap, 16))

    def _check_uncached(self, ctx):
        m = ctx.module
        before = self._stats(ctx)
        x = _rand(ctx, "unc-x", CASE_X)
        w = _weight(ctx, "unc-w", (CASE_K, CASE_X[1], 3, 3))
        self._expect_forward(ctx, x, w, 2, 1, 1, "strict", "forward[mode=uncached]", "uncached")
        g = _rand(ctx, "unc-g", (CASE_X[0], CASE_K, *conv_output_hw(CASE_X[2:], (3, 3), (2, 2), (1, 1), (1, 1))))
        with math_of("strict"):
            gx = m.conv2d_backward_input(g, w, CASE_X, 2, 1, mode="uncached")
            gw = m.conv2d_backward_weight(g, x, tuple(w.shape), 2, 1, mode="uncached")
        ref_x, ref_w, _ = _reference_grads(x, w, g, 2, 1, 1)
        with RelErrors() as errors:
            errors.add(gx, ref_x, TOL["strict"], "conv2d_backward_input, mode=uncached")
            errors.add(gw, ref_w, TOL["strict"], "conv2d_backward_weight, mode=uncached")
        after = self._stats(ctx)
        if after != before:
            raise CheckFailure(f"cache: mode='uncached' must not use the cache, but the counts moved: {before} -> {after}")

    # --- the launch cache (CUDA graphs) ---------------------------------------------------------
    def _graph_inputs(self, ctx, name, count):
        x = torch.zeros(GRAPH_X, device="cuda")
        w = _weight(ctx, f"{name}-w", (GRAPH_K, GRAPH_X[1], 3, 3))
        values = [_rand(ctx, f"{name}-v{i}", GRAPH_X) for i in range(count)]
        return x, w, values

    def _check_graph_replay(self, ctx):
        """The same buffers with new values in them: the second call captures a graph, the later ones
        replay it, and every result is that of the values the buffers hold at the call."""
        m = ctx.module
        x, w, values = self._graph_inputs(ctx, "graph", 5)
        refs = [_reference(v, w, 1, 1, 1) for v in values]
        m.cache_clear()
        with math_of("strict"), launch_cache(m, True):
            outs = repeat_on_same_buffers(lambda: m.conv2d(x, w, None, 1, 1), x, values, GRAPH_Y)
            counts = graph_counts(m)
            for i, (y, ref) in enumerate(zip(outs, refs)):
                assert_rel_error(y, ref, TOL["strict"], f"graphs: call {i + 1} of conv2d on the same buffers refilled "
                                 "with new values (a replayed graph must read the buffers' current values)")
            if counts["graph_captures"] < 1 or counts["graph_hits"] < 1:
                raise CheckFailure(f"graphs: {len(values)} calls of conv2d on the same buffers replayed no graph "
                                   f"(counts {counts}); the second call should capture one, the later ones replay it")
            # the gradients, the same way: grad_output refilled in place, x as the last call left it
            g = torch.zeros(GRAPH_Y, device="cuda")
            gs = [_rand(ctx, f"graph-g{i}", tuple(g.shape)) for i in range(4)]
            grads = [_reference_grads(x, w, gi, 1, 1, 1) for gi in gs]
            gxs = repeat_on_same_buffers(lambda: m.conv2d_backward_input(g, w, GRAPH_X, 1, 1), g, gs, GRAPH_X)
            gws = repeat_on_same_buffers(lambda: m.conv2d_backward_weight(g, x, tuple(w.shape), 1, 1), g, gs,
                                         tuple(w.shape))
        with RelErrors() as errors:  # every call's gradients in one copy to the host, in this order
            for i, ((ref_x, ref_w, _), gx, gw) in enumerate(zip(grads, gxs, gws)):
                same = f"call {i + 1} on the same buffers"
                errors.add(gx, ref_x, TOL["strict"], f"graphs: conv2d_backward_input {same}")
                errors.add(gw, ref_w, TOL["strict"], f"graphs: conv2d_backward_weight {same}")

    def _check_graph_interleaved(self, ctx):
        """A model's layers: several keys called in turn (one input buffer, three weights), round after
        round. Each key's second call captures and its later calls replay, however many other keys come
        between (a cache that remembers only the last key seen, or evicts on every new one, never captures
        here). Each output is copied into a slot made before the loop, so the only allocation in a round is
        the op's own output, freed before the next call: the allocator hands every call the same address
        once the op's first calls have made their lasting allocations (plans, workspace)."""
        m = ctx.module
        x, _, values = self._graph_inputs(ctx, "graph-layers", 6)
        weights = [_weight(ctx, f"graph-layers-w{j}", (GRAPH_K, GRAPH_X[1], 3, 3)) for j in range(3)]
        outs = [torch.empty(GRAPH_Y, device="cuda") for _ in range(len(values) * len(weights))]
        addresses = [[] for _ in weights]  # each layer's output address, call by call
        m.cache_clear()
        with math_of("strict"), launch_cache(m, True):
            for r, v in enumerate(values):
                x.copy_(v)
                for j, w in enumerate(weights):
                    y = m.conv2d(x, w, None, 1, 1)
                    addresses[j].append(y.data_ptr())
                    outs[r * len(weights) + j].copy_(y)
                    del y
            torch.cuda.synchronize()
            counts = graph_counts(m)
        for i, y in enumerate(outs):
            r, j = divmod(i, len(weights))
            assert_rel_error(y, _reference(values[r], weights[j], 1, 1, 1), TOL["strict"],
                             f"graphs: round {r + 1}, layer {j + 1} of {len(weights)} convolutions called in turn")
        # the layers called three times or more at one output address: each one's key came back (a capture,
        # then a replay); one the allocator moved every call holds no key twice and asks nothing
        repeated = sum(1 for seen in addresses if max(seen.count(a) for a in seen) >= 3)
        if counts["graph_captures"] < repeated or counts["graph_hits"] < repeated:
            raise CheckFailure(f"graphs: {len(values)} rounds of {len(weights)} convolutions called in turn (as a "
                               f"model's layers, {repeated} of them at one output address three times or more) "
                               f"captured {counts['graph_captures']} graphs and replayed {counts['graph_hits']} "
                               f"(counts {counts}); each layer's second call should capture its graph and its later "
                               "calls replay it, whatever other keys came between")

    def _check_graph_new_output(self, ctx):
        """A graph holds the addresses it was captured with: a call whose output is another buffer must
        not replay it (it would write the old buffer and leave the new one unwritten).

        The workspace is in a graph's key too, and it comes from the caching allocator right after the
        output: a new output that took the workspace's old block would move the workspace, and a key
        without the output would miss by luck. So the call swaps two blocks of the output's size and
        nothing else: `spare` holds one while the graph is captured (the op's output takes the other), then
        `held` takes the graph's output block and `spare` is freed. The op's next output lands in the spare
        block from the same allocator state the captured calls' workspace came from: only the output's
        address differs from the graph's key."""
        m = ctx.module
        x, w, values = self._graph_inputs(ctx, "graph-out", 7)
        numel = GRAPH_X[0] * GRAPH_K * GRAPH_X[2] * GRAPH_X[3]
        m.cache_clear()
        with math_of("strict"), launch_cache(m, True):
            spare = poison(torch.empty(GRAPH_Y, device="cuda"))
            # a graph for these buffers; its slots stay alive, so no block of the output's size is freed
            slots = repeat_on_same_buffers(lambda: m.conv2d(x, w, None, 1, 1), x, values[:3], GRAPH_Y)
            held = torch.empty(GRAPH_Y, device="cuda")  # the block the graph's output had
            del spare
            x.copy_(values[3])
            kept = [m.conv2d(x, w, None, 1, 1)]
            for v in values[4:]:  # more new buffers, each output kept alive
                x.copy_(v)
                poison_next_allocation(numel)
                kept.append(m.conv2d(x, w, None, 1, 1))
            torch.cuda.synchronize()
            del slots, held
        for i, (y, v) in enumerate(zip(kept, values[3:])):
            assert_rel_error(y, _reference(v, w, 1, 1, 1), TOL["strict"],
                             f"graphs: conv2d call {i + 1} into its own output buffer, after a graph was captured "
                             "for another output buffer (a graph is only for the exact addresses it was captured with)")

    def _check_graph_new_plan(self, ctx):
        """The plan is in a graph's key: on the same x, w and output buffers, another convolution (padding
        2 and dilation 2 where the graph's had 1 and 1: the same output shape, so the output lands where
        the graph's did) must not replay the graph of the first. A key without the plan replays it where
        the two plans' workspaces also land at one address (no workspace, or one best-fitting free block);
        the values tell either way."""
        m = ctx.module
        x, w, values = self._graph_inputs(ctx, "graph-plan", 6)
        convs = [(1, 1)] * 3 + [(2, 2)] * 3  # (padding, dilation) call by call
        geometry = iter(convs)
        m.cache_clear()
        with math_of("strict"), launch_cache(m, True):
            outs = repeat_on_same_buffers(lambda: m.conv2d(x, w, None, 1, *next(geometry)), x, values, GRAPH_Y)
        for i, (y, v, (p, d)) in enumerate(zip(outs, values, convs)):
            what = (f"call {i + 1} on the same buffers" if i < 3 else f"call {i + 1}: the same buffers, another "
                    f"convolution (padding {p}, dilation {d} after three calls with 1 and 1: a graph is only for the "
                    "plan it was captured with)")
            assert_rel_error(y, _reference(v, w, 1, p, d), TOL["strict"], f"graphs: conv2d, {what}")

    def _check_graph_bias(self, ctx):
        """The bias is one of the addresses a graph holds: on the same buffers, a bias refilled in place
        is read anew by every replay, and a call with another bias tensor (same x, w and output
        buffers) must not replay the graph captured with the first (it would add the first's values)."""
        m = ctx.module
        x, w, values = self._graph_inputs(ctx, "graph-bias", 6)
        bias = torch.zeros(GRAPH_K, device="cuda")
        biases = [_rand(ctx, f"graph-bias-b{i}", (GRAPH_K,)) for i in range(len(values))]
        other = _rand(ctx, "graph-bias-other", (GRAPH_K,))
        m.cache_clear()
        outs = [torch.empty(GRAPH_Y, device="cuda") for _ in values]  # made first: no allocation between calls
        with math_of("strict"), launch_cache(m, True):
            for v, b, out in zip(values[:4], biases, outs):  # x and the bias refilled in place: captured, then replayed
                x.copy_(v)
                bias.copy_(b)
                y = m.conv2d(x, w, bias, 1, 1)
                out.copy_(y)
                del y
            counts = graph_counts(m)
            for v, out in zip(values[4:], outs[4:]):  # the same x, w and output buffer, another bias tensor
                x.copy_(v)
                y = m.conv2d(x, w, other, 1, 1)
                out.copy_(y)
                del y
            torch.cuda.synchronize()
        for i, (y, v) in enumerate(zip(outs, values)):
            b = biases[i] if i < 4 else other
            what = (f"call {i + 1} on the same buffers with the bias refilled in place" if i < 4 else
                    f"call {i + 1}: the same buffers but another bias tensor (a graph is only for the exact "
                    "addresses it was captured with, the bias's included)")
            assert_rel_error(y, _reference(v, w, 1, 1, 1, 1, b), TOL["strict"], f"graphs: conv2d with a bias, {what}")
        if counts["graph_captures"] < 1 or counts["graph_hits"] < 1:
            raise CheckFailure(f"graphs: 4 calls of conv2d with a bias on the same buffers replayed no graph (counts "
                               f"{counts}); the second call should capture one, the later ones replay it")

    def _check_graphs_off(self, ctx):
        """set_graphs(False) and mode="uncached": the same results, and no graph captured or replayed."""
        m = ctx.module
        x, w, values = self._graph_inputs(ctx, "graph-off", 4)
        refs = [_reference(v, w, 1, 1, 1) for v in values]
        m.cache_clear()
        with math_of("strict"):
            with launch_cache(m, False):
                if m.cache_stats().get("graphs_enabled") is not False:
                    raise CheckFailure(f"graphs: after set_graphs(False), cache_stats() says {m.cache_stats()}")
                off = repeat_on_same_buffers(lambda: m.conv2d(x, w, None, 1, 1), x, values, GRAPH_Y)
                off_counts = graph_counts(m)
            uncached = repeat_on_same_buffers(lambda: m.conv2d(x, w, None, 1, 1, mode="uncached"), x, values,
                                              GRAPH_Y)
            uncached_counts = graph_counts(m)
        with RelErrors() as errors:
            for i, ref in enumerate(refs):
                errors.add(off[i], ref, TOL["strict"], f"graphs off: call {i + 1} on the same buffers")
                errors.add(uncached[i], ref, TOL["strict"], f"mode=uncached: call {i + 1} on the same buffers")
        if any(off_counts.values()):
            raise CheckFailure(f"graphs: with set_graphs(False), repeated calls still used graphs: {off_counts}")
        if any(uncached_counts.values()):
            raise CheckFailure(f"graphs: mode='uncached' must never use graphs, but the counts moved: "
                               f"{uncached_counts}")

    def _check_graph_side_stream(self, ctx):
        """A replayed graph must run on the caller's current stream: on a side stream, after that
        stream's long sleep and its copy into the input, it must read the copied values."""
        m = ctx.module
        x = _rand(ctx, "sgraph-x", GRAPH_X)
        w = _weight(ctx, "sgraph-w", (GRAPH_K, GRAPH_X[1], 3, 3))
        expected = _reference(x, w, 1, 1, 1)
        late = torch.zeros_like(x)
        side = torch.cuda.Stream()
        torch.cuda.synchronize()
        with math_of("strict"), launch_cache(m, True):
            with torch.cuda.stream(side):
                for _ in range(3):  # on this stream's own buffers: the second call captures, the third replays
                    m.conv2d(late, w, None, 1, 1)
            side.synchronize()
            for attempt in range(2):
                late.zero_()
                torch.cuda.synchronize()
                with torch.cuda.stream(side):
                    torch.cuda._sleep(100_000_000)  # tens of milliseconds of work queued first
                    late.copy_(x)
                    y = m.conv2d(late, w, None, 1, 1)
                torch.cuda.synchronize()
                assert_rel_error(y, expected, TOL["strict"],
                                 f"streams: a repeated conv2d on a side stream (attempt {attempt + 1}) read its input "
                                 "before that stream wrote it: a replayed graph must be launched on the current stream")
                del y

    def _check_inside_user_capture(self, ctx):
        """Called inside the caller's own torch.cuda.graph capture, the op must queue cuDNN's work on the
        capturing stream (so it is recorded into the caller's graph), not capture or replay its own."""
        m = ctx.module
        x = torch.zeros(GRAPH_X, device="cuda")
        w = _weight(ctx, "ugraph-w", (GRAPH_K, GRAPH_X[1], 3, 3))
        values = [_rand(ctx, f"ugraph-v{i}", GRAPH_X) for i in range(3)]
        with math_of("strict"), launch_cache(m, True):
            warm = torch.cuda.Stream()
            warm.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(warm):  # plans made (and the op's own graph) before the capture, as torch asks
                for _ in range(3):
                    m.conv2d(x, w, None, 1, 1)
            torch.cuda.current_stream().wait_stream(warm)
            torch.cuda.synchronize()
            graph = torch.cuda.CUDAGraph()
            try:
                with torch.cuda.graph(graph):
                    y = m.conv2d(x, w, None, 1, 1)
            except Exception as e:
                raise CheckFailure(f"streams: conv2d inside torch.cuda.graph capture failed: {type(e).__name__}: "
                                   f"{str(e).splitlines()[0][:300]}") from None
            for i, v in enumerate(values):
                x.copy_(v)
                graph.replay()
                torch.cuda.synchronize()
                assert_rel_error(y, _reference(v, w, 1, 1, 1), TOL["strict"],
                                 f"streams: replay {i + 1} of a torch.cuda.graph that captured conv2d (the op's work "
                                 "must be queued on the capturing stream, the current one)")

    # --- threads and streams -------------------------------------------------------------------
    def _check_threads(self, ctx):
        """Several Python threads, each on its own stream and shapes: every result right, and the
        counts add up (each thread's first call per key misses, the rest hit)."""
        m = ctx.module
        threads, fwd_calls, bwd_calls = 6, 8, 4
        jobs = []
        for t in range(threads):
            x = _rand(ctx, f"thr-x{t}", (1 + t % 3, 3 + t, 10 + t, 12 + 2 * t))
            w = _weight(ctx, f"thr-w{t}", (4 + t, 3 + t, 3, 3))
            y_ref = _reference(x, w, 1, 1, 1)
            g = _rand(ctx, f"thr-g{t}", tuple(y_ref.shape))
            gx_ref, _, _ = _reference_grads(x, w, g, 1, 1, 1)
            jobs.append((x, w, g, y_ref, gx_ref))
        torch.cuda.synchronize()
        results: list = [None] * threads
        errors: list = []
        start = threading.Barrier(threads)

        def work(t):
            x, w, g, _, _ = jobs[t]
            try:
                stream = torch.cuda.Stream()
                stream.wait_stream(torch.cuda.default_stream())
                start.wait()
                with torch.cuda.stream(stream):
                    ys = [m.conv2d(x, w, None, 1, 1) for _ in range(fwd_calls)]
                    gxs = [m.conv2d_backward_input(g, w, tuple(x.shape), 1, 1) for _ in range(bwd_calls)]
                stream.synchronize()
                results[t] = (ys, gxs)
            except Exception as e:  # reported by the main thread
                errors.append(f"thread {t}: {type(e).__name__}: {str(e).splitlines()[0][:300]}")

        m.cache_clear()
        with math_of("strict"):
            pool = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
            for th in pool:
                th.start()
            for th in pool:
                th.join(timeout=300)
        torch.cuda.synchronize()
        if errors:
            raise CheckFailure("threads: " + "; ".join(errors[:3]))
        for t, (ys, gxs) in enumerate(results):
            for i, y in enumerate(ys):
                assert_rel_error(y, jobs[t][3], TOL["strict"], f"threads: thread {t}, conv2d call {i}")
            for i, gx in enumerate(gxs):
                assert_rel_error(gx, jobs[t][4], TOL["strict"], f"threads: thread {t}, backward_input call {i}")
        s = self._stats(ctx)
        keys, calls = 2 * threads, threads * (fwd_calls + bwd_calls)
        if (s["misses"], s["hits"], s["size"]) != (keys, calls - keys, keys):
            raise CheckFailure(f"threads: {threads} threads made {calls} calls on {keys} different keys, so "
                               f"{keys} misses, {calls - keys} hits and {keys} plans were expected; got {s}")

    def _check_stream(self, ctx):
        """The op must run on the caller's current stream. The input is filled on a side stream after
        a long sleep there: run on that stream, the op waits for it; run anywhere else, it reads zeros."""
        m = ctx.module
        x = _rand(ctx, "stream-x", (2, 8, 20, 20))
        w = _weight(ctx, "stream-w", (8, 8, 3, 3))
        expected = _reference(x, w, 1, 1, 1)
        with math_of("strict"):
            m.conv2d(torch.zeros_like(x), w, None, 1, 1)  # the plan (and the handle) exist, made on the default stream
            torch.cuda.synchronize()
            for attempt in range(2):
                side = torch.cuda.Stream()
                late = torch.zeros_like(x)
                torch.cuda.synchronize()
                with torch.cuda.stream(side):
                    torch.cuda._sleep(100_000_000)  # tens of milliseconds of work queued first
                    late.copy_(x)
                    y = m.conv2d(late, w, None, 1, 1)
                torch.cuda.synchronize()
                assert_rel_error(y, expected, TOL["strict"],
                                 f"streams: conv2d called on a side stream (attempt {attempt + 1}) read its input "
                                 "before that stream wrote it, so it did not run on the current stream; bind "
                                 "the handle to the current stream (cudnnSetStream) on every call")

    # --- input checks --------------------------------------------------------------------------
    def _input_checks(self) -> list[tuple[str, object, tuple[str, ...], bool]]:
        """(what, fn(ctx), names: the error must name one of them, needs a GPU). A name "size:ARG" asks
        for a size error: it must say 2^31 and name ARG (expect_size_error)."""
        def x(shape=(1, 3, 8, 8), **kw):
            return torch.randn(shape, device="cuda", **kw)

        def w(shape=(4, 3, 3, 3), **kw):
            return torch.randn(shape, device="cuda", **kw)

        def b(shape=(4,), **kw):
            return torch.randn(shape, device="cuda", **kw)

        def huge(*shape):
            """A tensor of `shape` that takes one element of memory (every stride 0)."""
            return torch.zeros(1, device="cuda").expand(*shape)

        def conv(*a, **kw):
            return lambda ctx: ctx.module.conv2d(*[t() if callable(t) else t for t in a], **kw)

        def transpose(*a, **kw):
            return lambda ctx: ctx.module.conv_transpose2d(*[t() if callable(t) else t for t in a], **kw)

        return [
            ("a CPU tensor x", lambda ctx: ctx.module.conv2d(torch.randn(1, 3, 8, 8), torch.randn(4, 3, 3, 3)), ("x",), False),
            ("an int32 x", conv(lambda: torch.ones(1, 3, 8, 8, dtype=torch.int32, device="cuda"),
                                lambda: torch.ones(4, 3, 3, 3, dtype=torch.int32, device="cuda")), ("x",), True),
            ("a 3-d x", conv(lambda: x((3, 8, 8)), w), ("x",), True),
            ("weight of another dtype", conv(x, lambda: w(dtype=torch.float64)), ("weight",), True),
            ("weight with other input channels", conv(x, lambda: w((4, 5, 3, 3))), ("weight",), True),
            ("stride 0", conv(x, w, None, 0), ("stride",), True),
            ("padding -1", conv(x, w, None, 1, -1), ("padding",), True),
            ("dilation 0", conv(x, w, None, 1, 0, 0), ("dilation",), True),
            ("stride with 3 values", conv(x, w, None, (1, 1, 1)), ("stride",), True),
            ("a kernel larger than the padded input", conv(lambda: x((1, 3, 4, 4)), lambda: w((4, 3, 7, 7))),
             ("kernel", "larger"), True),
            # groups
            ("groups 0", conv(lambda: x((1, 4, 8, 8)), lambda: w((4, 4, 3, 3)), None, 1, 0, 1, 0), ("groups",), True),
            ("groups -2", conv(lambda: x((1, 4, 8, 8)), lambda: w((4, 4, 3, 3)), None, 1, 0, 1, -2), ("groups",), True),
            ("groups that do not divide x's channels", conv(lambda: x((1, 3, 8, 8)), lambda: w((4, 1, 3, 3)), None, 1, 0,
                                                             1, 2), ("groups",), True),
            ("groups that do not divide the output channels", conv(lambda: x((1, 4, 8, 8)), lambda: w((3, 2, 3, 3)), None,
                                                                    1, 0, 1, 2), ("groups",), True),
            ("groups larger than x's channels", conv(lambda: x((1, 2, 8, 8)), lambda: w((4, 1, 3, 3)), None, 1, 0, 1, 4),
             ("groups",), True),
            ("a dense weight with groups 2", conv(lambda: x((1, 4, 8, 8)), lambda: w((4, 4, 3, 3)), None, 1, 0, 1, 2),
             ("weight",), True),
            ("a grouped weight with groups 1", conv(lambda: x((1, 4, 8, 8)), lambda: w((4, 2, 3, 3))), ("weight",), True),
            ("a weight for groups 4 with groups 2", conv(lambda: x((1, 4, 8, 8)), lambda: w((4, 1, 3, 3)), None, 1, 0,
                                                          1, 2), ("weight",), True),
            ("conv2d_backward_input: a weight that does not match groups", lambda ctx: ctx.module.conv2d_backward_input(
                torch.randn(1, 4, 6, 6, device="cuda"), w((4, 4, 3, 3)), (1, 4, 8, 8), 1, 0, 1, 2), ("weight",), True),
            ("conv2d_backward_weight: a weight_size that does not match groups",
             lambda ctx: ctx.module.conv2d_backward_weight(torch.randn(1, 4, 6, 6, device="cuda"), x((1, 4, 8, 8)),
                                                           (4, 4, 3, 3), 1, 0, 1, 2), ("weight_size",), True),
            ("conv_transpose2d: groups 0", transpose(lambda: x((1, 4, 5, 5)), lambda: w((4, 2, 3, 3)), None, 1, 0, 0, 0),
             ("groups",), True),
            ("conv_transpose2d: groups that do not divide x's channels", transpose(
                lambda: x((1, 3, 5, 5)), lambda: w((3, 2, 3, 3)), None, 1, 0, 0, 2), ("groups",), True),
            ("conv_transpose2d: weight with other input channels", transpose(
                lambda: x((1, 4, 5, 5)), lambda: w((6, 2, 3, 3)), None, 1, 0, 0, 2), ("weight",), True),
            # bias
            ("a CPU bias", conv(x, w, lambda: torch.randn(4)), ("bias",), True),
            ("a bias of another dtype", conv(x, w, lambda: b(dtype=torch.float64)), ("bias",), True),
            ("an int32 bias", conv(x, w, lambda: torch.ones(4, dtype=torch.int32, device="cuda")), ("bias",), True),
            ("a bias of the wrong size", conv(x, w, lambda: b((5,))), ("bias",), True),
            ("a 2-d bias", conv(x, w, lambda: b((4, 1))), ("bias",), True),
            ("a bias that is not a tensor", conv(x, w, 1.0), ("bias",), True),
            ("conv_transpose2d: a bias of the wrong size", transpose(lambda: x((1, 4, 5, 5)), lambda: w((4, 3, 3, 3)),
                                                                     lambda: b((4,))), ("bias",), True),
            ("conv_transpose2d: a bias of another dtype", transpose(lambda: x((1, 4, 5, 5)), lambda: w((4, 3, 3, 3)),
                                                                    lambda: b((3,), dtype=torch.float64)), ("bias",), True),
            # sizes cuDNN's int32 descriptors cannot hold, each exactly 2^31 elements: refused before cuDNN
            # is asked (whose status names no limit). The huge tensors are stride-0 views of one element:
            # no memory (an op that copies one before refusing it allocates 8 GiB).
            # x of 2^28 elements (1 GiB, never read) and a 1x1 kernel to 8 channels: exactly 2^31 outputs
            ("an output of 2^31 elements", conv(lambda: torch.empty(1, 1, 16384, 16384, device="cuda"),
                                                lambda: w((8, 1, 1, 1))), ("size:output",), True),
            ("an x of 2^31 elements", conv(lambda: huge(1, 2, 32768, 32768), lambda: w((1, 2, 1, 1)), None, 256),
             ("size:x",), True),
            ("a weight of 2^31 elements", conv(lambda: x((1, 2, 128, 128)), lambda: huge(65536, 2, 128, 128)),
             ("size:weight",), True),
            ("conv2d_backward_input: an input_size of 2^31 elements", lambda ctx: ctx.module.conv2d_backward_input(
                torch.randn(1, 1, 128, 128, device="cuda"), w((1, 2, 1, 1)), (1, 2, 32768, 32768), 256),
             ("size:input_size",), True),
            ("conv2d_backward_input: a grad_output of 2^31 elements", lambda ctx: ctx.module.conv2d_backward_input(
                huge(1, 8, 16384, 16384), w((8, 1, 1, 1)), (1, 1, 16384, 16384)), ("size:grad_output",), True),
            ("conv2d_backward_weight: a weight_size of 2^31 elements", lambda ctx: ctx.module.conv2d_backward_weight(
                torch.randn(1, 65536, 1, 1, device="cuda"), x((1, 2, 128, 128)), (65536, 2, 128, 128)),
             ("size:weight_size",), True),
            ("conv2d_backward_bias: a grad_output of 2^31 elements", lambda ctx: ctx.module.conv2d_backward_bias(
                huge(1, 8, 16384, 16384)), ("size:grad_output",), True),
            ("conv_transpose2d: an output of 2^31 elements", transpose(lambda: huge(1, 1, 8192, 8192),
                                                                       lambda: w((1, 8, 1, 1)), None, 2, 0, 1),
             ("size:output|output_size",), True),  # (the registered op's argument, or the output the call makes)
            ("conv_transpose2d: an x of 2^31 elements", transpose(lambda: huge(1, 2, 32768, 32768),
                                                                  lambda: w((2, 1, 1, 1))), ("size:x",), True),
            # gradients
            ("grad_output of the wrong shape", lambda ctx: ctx.module.conv2d_backward_input(
                torch.randn(1, 4, 5, 5, device="cuda"), w(), (1, 3, 8, 8), 1, 0), ("grad_output",), True),
            ("grad_output of another dtype", lambda ctx: ctx.module.conv2d_backward_weight(
                torch.randn(1, 4, 6, 6, device="cuda", dtype=torch.float64), x(), (4, 3, 3, 3), 1, 0),
             ("grad_output",), True),
            ("conv2d_backward_bias: a 3-d grad_output", lambda ctx: ctx.module.conv2d_backward_bias(
                torch.randn(4, 6, 6, device="cuda")), ("grad_output",), True),
        ]

    def _check_usable_after_errors(self, ctx):
        """Errors must leave the op usable: no lock held, no half-built plan cached."""
        for what, fn, names, _ in self._input_checks():
            try:
                fn(ctx)
            except Exception:
                pass
        x = _rand(ctx, "after-x", (3, 6, 17, 10))
        w = _weight(ctx, "after-w", (5, 6, 3, 2))
        self._expect_forward(ctx, x, w, (2, 1), (1, 0), (1, 1), "strict", "input_checks[a valid call after the errors]")

    # --- descriptors (no GPU needed) -----------------------------------------------------------
    def _check_describe(self, ctx):
        configs = [Config((2, 8, 19, 23), (12, 8, k, k), (s, s), (p, p), (1, 1), 1, False) for k, s, p in CASES]
        configs += [Config(xs, (k, xs[1] // g, kh, kw), s, p, d, g, False) for _, xs, k, g, (kh, kw), s, p, d in GROUPED]
        configs += _random_configs(ctx.seed_for("describe"), 21)
        for c in configs:
            (n, _, h, wd), (k, _, kh, kw), s, p, d = c.x, c.w, c.stride, c.padding, c.dilation
            want = (n, k, *conv_output_hw((h, wd), (kh, kw), s, p, d))
            for dtype in (torch.float32, torch.float64):
                got = tuple(ctx.module.describe(c.x, c.w, s, p, d, c.groups, dtype))
                if got != want:
                    raise CheckFailure(f"describe: {c}, {dtype}: output shape {got}, expected {want}")

    def _check_status_errors(self, ctx):
        """Parameters cuDNN itself rejects: its status must become a Python error that names it. With
        groups, the weight holds C_in / groups channels: a dense weight with groups 2, or a grouped one
        with groups 1, is a mismatch cuDNN finds only once the group count is set."""
        d = ctx.module.describe
        for what, x_size, w_size, args in (("stride 0", (2, 3, 9, 9), (4, 3, 3, 3), (0, 1, 1)),
                                           ("padding -1", (2, 3, 9, 9), (4, 3, 3, 3), (1, -1, 1)),
                                           ("dilation 0", (2, 3, 9, 9), (4, 3, 3, 3), (1, 1, 0)),
                                           ("groups 0", (2, 4, 9, 9), (4, 4, 3, 3), (1, 1, 1, 0)),
                                           ("a dense weight with groups 2", (2, 4, 9, 9), (4, 4, 3, 3), (1, 1, 1, 2)),
                                           ("a grouped weight with groups 1", (2, 4, 9, 9), (4, 2, 3, 3), (1, 1, 1, 1))):
            expect_error(d, x_size, w_size, *args, names=("CUDNN_STATUS_BAD_PARAM",),
                         what=f"describe with {what} (cuDNN rejects it)")

    # --- the list ------------------------------------------------------------------------------
    def checks(self) -> list[Check]:
        checks = CheckList()
        checks.add("descriptors[output shapes]", self._check_describe, needs_gpu=False)
        checks.add("descriptors[cuDNN status errors]", self._check_status_errors, needs_gpu=False)
        for mode in ("strict", "tf32"):
            for k, s, p in CASES:
                checks.add(f"forward[{mode}-{_name(k, s, p)}]",
                           lambda ctx, k=k, s=s, p=p, mode=mode: self._check_case(ctx, k, s, p, mode))
        checks.add("forward[float64-k3s2p1]", lambda ctx: self._check_case(ctx, 3, 2, 1, "float64"))
        for mode in ("strict", "tf32"):
            for case in GROUPED:
                checks.add(f"forward[{mode}-groups {case[0]}]",
                           lambda ctx, case=case, mode=mode: self._check_grouped(ctx, case, mode))
        checks.add("forward[float64-groups depthwise x2]", lambda ctx: self._check_grouped(ctx, GROUPED[1], "float64"))
        checks.add("forward[random shapes]", lambda ctx: self._check_random_forward(ctx, "forward[random shapes]"))
        checks.add("forward[random shapes, tf32]",
                   lambda ctx: self._check_random_forward(ctx, "forward[random shapes, tf32]", mode="tf32"))
        checks.add("forward[random shapes, float64]",
                   lambda ctx: self._check_random_forward(ctx, "forward[random shapes, float64]", torch.float64, "float64"))
        checks.add("forward[non-contiguous]", self._check_noncontiguous)
        checks.add("forward[padding 'same' and 'valid']", self._check_padding_words)
        checks.add("forward[output poisoned]", self._check_poisoned)
        checks.add("forward[mode=heuristic]", lambda ctx: self._check_modes(ctx, "heuristic"))
        checks.add("forward[mode=uncached]", lambda ctx: self._check_modes(ctx, "uncached"))
        checks.add("forward[plans with a workspace]", lambda ctx: self._check_workspace(ctx, False))
        checks.add("forward[huge: a batch past 2^31 output elements]", self._check_huge_batch_forward, slow=True,
                   huge=True)
        # the profiler's checks (seconds to start) are in the full grade only, not in the quick loop
        checks.add("forward[no PyTorch convolution ran]", self._check_own_forward, slow=True)
        for mode in ("strict", "tf32"):
            for k, s, p in CASES:
                checks.add(f"backward[{mode}-{_name(k, s, p)}]",
                           lambda ctx, k=k, s=s, p=p, mode=mode: self._check_backward_case(ctx, k, s, p, mode))
        checks.add("backward[float64-k3s2p1]", lambda ctx: self._check_backward_case(ctx, 3, 2, 1, "float64"))
        for mode in ("strict", "tf32"):
            for case in GROUPED:
                checks.add(f"backward[{mode}-groups {case[0]}]",
                           lambda ctx, case=case, mode=mode: self._check_backward_grouped(ctx, case, mode))
        checks.add("backward[float64-groups depthwise x2]",
                   lambda ctx: self._check_backward_grouped(ctx, GROUPED[1], "float64"))
        checks.add("backward[random shapes]", lambda ctx: self._check_random_backward(ctx, "backward[random shapes]"))
        checks.add("backward[conv_transpose2d strict]", lambda ctx: self._check_transposed(ctx, "strict"))
        checks.add("backward[conv_transpose2d tf32]", lambda ctx: self._check_transposed(ctx, "tf32"))
        checks.add("backward[autograd]", self._check_autograd)
        checks.add("backward[padding 'same']", self._check_padding_words_backward)
        checks.add("backward[gradcheck float64]", self._check_gradcheck)
        checks.add("backward[plans with a workspace]", lambda ctx: self._check_workspace(ctx, True))
        checks.add("backward[huge: a batch past 2^31 output elements]", self._check_huge_batch_backward, slow=True,
                   huge=True)
        checks.add("backward[no PyTorch convolution ran]", self._check_own_backward, slow=True)
        checks.add("cache[second identical call hits]", self._check_hit)
        checks.add("cache[every key field]", self._check_key_fields)
        checks.add("cache[clear]", self._check_clear)
        checks.add("cache[bounded, least recently used evicted]", self._check_bounded)
        checks.add("cache[mode=uncached bypasses it]", self._check_uncached)
        checks.add("cache[graphs: repeated calls replay, reading new values]", self._check_graph_replay)
        checks.add("cache[graphs: layers called in turn each replay]", self._check_graph_interleaved)
        checks.add("cache[graphs: a new output buffer never replays an old graph]", self._check_graph_new_output)
        checks.add("cache[graphs: another convolution on the same buffers is another graph]",
                   self._check_graph_new_plan)
        checks.add("cache[graphs: the bias is read at every replay, and another bias is another graph]",
                   self._check_graph_bias)
        checks.add("cache[graphs off and mode=uncached: no graph]", self._check_graphs_off)
        checks.add("threads[6 threads, own streams and shapes]", self._check_threads)
        checks.add("streams[runs on the current stream]", self._check_stream)
        checks.add("streams[a replayed graph runs on the current stream]", self._check_graph_side_stream)
        checks.add("streams[called inside torch.cuda.graph capture]", self._check_inside_user_capture)
        for what, fn, names, needs_gpu in self._input_checks():
            if names[0].startswith("size:"):
                run = lambda ctx, fn=fn, arg=names[0][5:], what=what: expect_size_error(fn, ctx, arg, what)  # noqa: E731
            else:
                run = lambda ctx, fn=fn, names=names, what=what: expect_error(fn, ctx, names=names, what=what)  # noqa: E731
            checks.add(f"input_checks[{what}]", run, needs_gpu=needs_gpu)
        checks.add("input_checks[a valid call after the errors]", self._check_usable_after_errors)
        return checks

    # --- the bad-input audit (tests/test_input_audit.py) -----------------------------------------
    def audit_calls(self, device, dtype) -> list[AuditCall]:
        """Every tensor op (conv2d in every mode) on one convolution of each kind and its transpose:
        dense, grouped and depthwise, with a bias. cuDNN's descriptors take no empty dim, so an empty
        tensor must be rejected."""
        def r(*shape, seed, scale=1.0):
            return audit_randn(*shape, device=device, dtype=dtype, seed=seed, scale=scale)

        return _cancelling([call for c, kind in ((AUDIT_DENSE, "dense"), (AUDIT_GROUPED, "grouped"),
                                                 (AUDIT_DEPTHWISE, "depthwise"))
                            for call in _calls(c, kind, r)] + _gradients_at_defaults(AUDIT_DENSE, r))

    def random_calls(self, g, device, dtype) -> list[AuditCall]:
        """Every op on a convolution of random geometry of each kind (no dimension empty)."""
        seed = int(torch.randint(0, 2**31, (1,), generator=g))
        draws = torch.Generator().manual_seed(seed)
        calls = []
        for i, kind in enumerate(KINDS):
            def r(*shape, seed: int, scale=1.0, base=seed + 16 * i):
                return audit_randn(*shape, device=device, dtype=dtype, seed=base + seed, scale=scale)

            calls += _calls(_draw_config(draws, kind), kind, r)
        return _cancelling(calls)

    def kernel_rule(self):
        # cuDNN's kernels are the point; PyTorch's convolution (which would call cuDNN) may not run
        return KernelRule(library=True, forbidden_ops=("conv", "cudnn"))

    # --- speed ---------------------------------------------------------------------------------
    def benchmark(self) -> Benchmark:
        def make_inputs(seed: int):
            g = torch.Generator(device="cuda")
            g.manual_seed(seed)
            tensors = []
            for (n, c, h, w), k in BENCH:
                tensors.append(torch.randn((n, c, h, w), generator=g, device="cuda"))
                tensors.append(torch.randn((k, c, 3, 3), generator=g, device="cuda") * (c * 9) ** -0.5)
            return tuple(tensors)

        return Benchmark(
            label="strict fp32, 3x3 pad 1: 32x512x7x7 512->512 + 32x64x56x56 64->64",
            make_inputs=make_inputs,
            call=lambda mod, inp: [mod.conv2d(inp[0], inp[1], None, 1, 1), mod.conv2d(inp[2], inp[3], None, 1, 1)],
            baseline=lambda inp: [F.conv2d(inp[0], inp[1], None, 1, 1), F.conv2d(inp[2], inp[3], None, 1, 1)],
            work=float(sum(conv_flops(x, k) for x, k in BENCH)),
            unit="FLOP",
            reference=whole_reference(lambda inp: [_reference(inp[2 * i], inp[2 * i + 1], 1, 1, 1)
                                                   for i in range(len(BENCH))]),
            tolerance=lambda inp: [TOL["strict"]] * len(BENCH),
            flops=float(sum(conv_flops(x, k) for x, k in BENCH)),
            min_bytes=float(sum(4 * (n * c * h * w + k * c * 9 + n * k * h * w) for (n, c, h, w), k in BENCH)),
        )


# The audit's fixed convolutions, one of each kind (KINDS), each with a bias:
AUDIT_DENSE = Config((2, 3, 7, 6), (4, 3, 3, 2), (2, 1), (1, 1), (1, 2), 1, True)  # -> (2, 4, 4, 6)
AUDIT_GROUPED = Config((2, 6, 7, 6), (4, 3, 3, 2), (1, 2), (1, 0), (2, 1), 2, True)  # -> (2, 4, 5, 3)
AUDIT_DEPTHWISE = Config((2, 4, 9, 7), (8, 1, 3, 3), (2, 2), (1, 1), (1, 1), 4, True)  # -> (2, 8, 5, 4)
# the ops' `mode` as the registered ops take it (the Python functions take either)
MODE = {"uncached": 0, "heuristic": 1, "benchmark": 2}
CONV_NAMES = ("stride", "padding", "dilation", "groups", "mode")


def _conv2d_reference(x, w, b, s, p, d, groups, mode):
    return _reference(x, w, s, p, d, groups, b)


def _audit_tolerance(*args) -> float:
    """The generated checks' tolerance for a call on `args`: strict fp32's (TOL, which lets the transforming
    algorithms' rounding through) for float32, the course's default for other dtypes."""
    dtype = next(a.dtype for a in args if isinstance(a, torch.Tensor))
    return TOL["strict"] if dtype == torch.float32 else CALL_TOLERANCE[dtype]


@contextmanager
def naming_kernels(run, mode: str):
    """A wrong value raised in the body names the kernels cuDNN ran for it: `run()` (the call, its plan now
    cached) again under the watch (hidden), in `mode`'s math. A plan's algorithm decides its rounding (a
    transforming one, picked by timing under load, can be past strict fp32's tolerance), and the kernels'
    names say which algorithm the plan holds."""
    try:
        yield
    except CheckFailure as failure:
        try:
            with math_of(mode):
                _, seen = observe(run, hidden=True)
            names = list(dict.fromkeys(k.name.split("(")[0][:60] for k in seen.kernels if k.name))
            said = f"; the same call again ran {', '.join(names[:4])}" if names else ""
        except Exception:  # noqa: BLE001: the failure is the verdict; the names only explain it
            said = ""
        raise CheckFailure(f"{failure}{said}") from None


def _cancelling(calls: list[AuditCall]) -> list[AuditCall]:
    """Every op here sums products (`AuditCall.sums_products`: a small output that cancels is judged against
    its terms' norm)."""
    for call in calls:
        call.sums_products = True
    return calls


def _calls(c: Config, kind: str, r) -> list[AuditCall]:
    """Every tensor op on the convolution `c` (of kind `kind`) and its transpose; `r(*shape, seed=,
    scale=)` draws the tensors. The dense kind has every op, in every mode, and the bias's gradient;
    the others (labelled by kind) the forward, both gradients and the transpose."""
    x = r(*c.x, seed=1)
    w = r(*c.w, seed=2, scale=(c.w[1] * c.w[2] * c.w[3]) ** -0.5)
    b = r(c.w[0], seed=4) if c.bias else None
    (n, _, h, wd), (k, _, kh, kw) = c.x, c.w
    s, p, d = c.stride, c.padding, c.dilation
    g = r(n, k, *conv_output_hw((h, wd), (kh, kw), s, p, d), seed=3)
    conv = (s, p, d, c.groups)
    suffix = "" if kind == "dense" else f"({kind})"
    forward = ("benchmark", "heuristic", "uncached") if kind == "dense" else ("benchmark",)
    # the forward's x at its smallest per axis and its padding's edges (none, 3, the widest), one at a
    # time: each a new plan, and a descriptor or workspace sized for the base geometry shows there
    hw, khw = tuple(c.x[2:]), tuple(c.w[2:])
    groups_zero = values(0, refused=(0,))  # refused, naming groups (a check of groups >= 0 divides by it)
    forward_domains = {0: conv_smallest_input(hw, khw, d, p), 1: conv_empty_kernel(),
                       4: conv_padding_edges(hw, khw, s, d, p), 6: groups_zero}
    keep = ("groups",) if c.groups != 1 else ()  # PyTorch's default groups=1 refuses a grouped weight
    calls = [AuditCall("conv2d", (x, w, None if mode == "heuristic" else b, *conv, MODE[mode]),
                       ("x", "weight", "bias", *CONV_NAMES), _conv2d_reference,
                       label=f"conv2d(mode={mode})" if kind == "dense" else f"conv2d{suffix}",
                       registered="lib.ops.conv2d", tolerance=_audit_tolerance, domains=forward_domains,
                       defaults=torch_defaults(("x", "weight", "bias", *CONV_NAMES), first=2, keep=keep))
             for mode in forward]
    calls.append(AuditCall(
        "conv2d_backward_input", (g, w, list(c.x), *conv, MODE["heuristic"]),
        ("grad_output", "weight", "input_size", *CONV_NAMES),
        lambda g, w, size, s, p, d, groups, m: torch.nn.grad.conv2d_input(
            size, w.double(), as_conv_output(g, size, w.shape, s, p, d, groups).double(), s, p, d, groups),
        label=f"conv2d_backward_input{suffix}", registered="lib.ops.conv2d_backward_input", tolerance=_audit_tolerance,
        domains={6: groups_zero}))
    calls.append(AuditCall(
        "conv2d_backward_weight", (g, x, list(c.w), *conv, MODE["uncached"]),
        ("grad_output", "x", "weight_size", *CONV_NAMES),
        lambda g, x, size, s, p, d, groups, m: torch.nn.grad.conv2d_weight(
            x.double(), size, as_conv_output(g, x.shape, size, s, p, d, groups).double(), s, p, d, groups),
        label=f"conv2d_backward_weight{suffix}", registered="lib.ops.conv2d_backward_weight",
        tolerance=_audit_tolerance, domains={6: groups_zero}))
    if kind == "dense":
        calls.append(AuditCall("conv2d_backward_bias", (g,), ("grad_output",), lambda g: g.double().sum((0, 2, 3)),
                               registered="lib.ops.conv2d_backward_bias", tolerance=_audit_tolerance))
    # the transpose of the same convolution: g -> the shape of x (output_padding makes up what the
    # stride dropped), with a bias of x's channels. (No grad_args: they vouch for an "autograd" group,
    # which this exercise grades inside "backward", by hand: backward[autograd], backward[gradcheck].)
    out_pad = tuple(int(size - ((o - 1) * st - 2 * pd + dl * (kk - 1) + 1))
                    for size, o, st, pd, dl, kk in zip(c.x[2:], g.shape[2:], s, p, d, c.w[2:]))
    bt = r(c.x[1], seed=5) if c.bias else None
    ghw = tuple(g.shape[2:])
    calls.append(AuditCall(
        "conv_transpose2d", (g, w, bt, s, p, out_pad, c.groups, d, MODE["benchmark"]),
        ("x", "weight", "bias", "stride", "padding", "output_padding", "groups", "dilation", "mode"),
        lambda x, w, b, s, p, op, groups, d, m: F.conv_transpose2d(x.double(), w.double(), _double(b), s, p, op, groups, d),
        # graded with the backward checks: it is the same cuDNN backward-data call
        label=f"conv_transpose2d{suffix}", group="backward", tolerance=_audit_tolerance,
        domains={0: conv_smallest_input(ghw, khw, d, p, True, s, out_pad), 1: conv_empty_kernel(),
                 4: conv_padding_edges(ghw, khw, s, d, p, True, out_pad), 6: groups_zero},
        defaults=torch_defaults(("x", "weight", "bias", "stride", "padding", "output_padding", "groups", "dilation"), first=2)))
    if kind == "dense":
        # the registered op itself, which takes the output's size: the Python function's call above never
        # hands its registered fake (torch.compile's) a wrong size, which only this call's probes do
        calls.append(AuditCall(
            "lib.ops.conv_transpose2d", (g, w, bt, list(c.x), s, p, d, c.groups, MODE["benchmark"]),
            ("x", "weight", "bias", "output_size", "stride", "padding", "dilation", "groups", "mode"),
            _transpose_op_reference, label="lib.ops.conv_transpose2d", group="backward",
            registered="lib.ops.conv_transpose2d", tolerance=_audit_tolerance, domains={7: groups_zero}))
    return calls


def _gradients_at_defaults(c: Config, r) -> list[AuditCall]:
    """conv2d_backward_input and conv2d_backward_weight of `c`'s shapes at PyTorch's default geometry (stride
    1, padding 0, dilation 1, groups 1), each with that geometry declared as its defaults: a gradient's
    grad_output is shaped by the geometry, so only a call at the defaults can leave them out (the "PyTorch's
    defaults" property then calls the op without them: a wrong default of the Python function shows)."""
    x, w = r(*c.x, seed=11), r(*c.w, seed=12, scale=(c.w[1] * c.w[2] * c.w[3]) ** -0.5)
    g = r(c.x[0], c.w[0], c.x[2] - c.w[2] + 1, c.x[3] - c.w[3] + 1, seed=13)
    conv = ((1, 1), (0, 0), (1, 1), 1)
    input_names = ("grad_output", "weight", "input_size", *CONV_NAMES)
    weight_names = ("grad_output", "x", "weight_size", *CONV_NAMES)
    return [
        AuditCall("conv2d_backward_input", (g, w, list(c.x), *conv, MODE["benchmark"]), input_names,
                  lambda g, w, size, s, p, d, groups, m: torch.nn.grad.conv2d_input(
                      size, w.double(), as_conv_output(g, size, w.shape, s, p, d, groups).double(), s, p, d, groups),
                  label="conv2d_backward_input(PyTorch's default geometry)", registered="lib.ops.conv2d_backward_input",
                  tolerance=_audit_tolerance, defaults=torch_defaults(input_names, first=3)),
        AuditCall("conv2d_backward_weight", (g, x, list(c.w), *conv, MODE["benchmark"]), weight_names,
                  lambda g, x, size, s, p, d, groups, m: torch.nn.grad.conv2d_weight(
                      x.double(), size, as_conv_output(g, x.shape, size, s, p, d, groups).double(), s, p, d, groups),
                  label="conv2d_backward_weight(PyTorch's default geometry)", registered="lib.ops.conv2d_backward_weight",
                  tolerance=_audit_tolerance, defaults=torch_defaults(weight_names, first=3)),
    ]


def _transpose_op_reference(x, w, b, size, s, p, d, groups, mode):
    """F.conv_transpose2d for the registered op, which takes the output's size: its batch and channels
    must be x's and weight's, its height and width one output_padding in PyTorch's range makes."""
    if len(size) != 4 or size[0] != x.shape[0] or size[1] != w.shape[1] * groups:
        raise ValueError(f"output_size {list(size)} must be [{x.shape[0]}, {w.shape[1] * groups}, H, W]")
    out_pad = [n - m for n, m in zip(size[2:], conv_transpose_output_hw(x.shape[2:], w.shape[2:], s, p, (0, 0), d))]
    if not all(0 <= out_pad[i] < max(s[i], d[i]) for i in range(2)):  # (the meta device checks no range)
        raise ValueError(f"output_size {list(size)} needs an output_padding of {out_pad}, outside PyTorch's range")
    return F.conv_transpose2d(x.double(), w.double(), _double(b), s, p, out_pad, groups, d)


def conv_flops(x_shape, k, ks=3) -> int:
    n, c, h, w = x_shape  # stride 1, padding 1: the output is h x w
    return 2 * n * k * c * ks * ks * h * w


# run()'s branches (grader/verify/paths.py): each op in each dtype, strict or TF32 math, the uncached mode,
# the plan cache's hits and misses (benchmarked or heuristic), graphs captured and replayed
_BOTH = ("float32", "float64")
PATHS = {"forward": _BOTH, "backward_data": _BOTH, "backward_filter": _BOTH, "math.strict": (),
         "math.tf32_allowed": (), "mode.uncached": (), "plan.hit": (), "plan.miss.benchmark": (),
         "plan.miss.heuristic": (), "graph.capture": (), "graph.replay": (),
         # a batch past 2^31 elements in pieces (the huge checks): the forward, conv_transpose2d's backward-data,
         # the weight's and the bias's gradients
         "pieces.forward": (), "pieces.backward_data": (), "pieces.backward_filter": (), "pieces.backward_bias": ()}

SPEC = CudnnConvSpec(
    exercise="10_cudnn_conv",
    title="cuDNN convolution with cached plans",
    module="cudnn_conv.py",
    paths=PATHS,
    points={"descriptors": 1, "forward": 3, "backward": 3, "cache": 2, "threads": 1, "streams": 1,
            "input_checks": 1, "performance": 3},
    perf_requires=("forward",),
    # the stream checks call the Python wrapper: F.conv2d there would run on the current stream too
    requires={"streams": ("forward[no PyTorch convolution ran]",)},
    # strict fp32, both shapes: 701 us (ours) against 675 us (F.conv2d, cudnn.benchmark) on an H100
    # with cuDNN 9.19 and torch 2.11, 2026-11-22
    solution_vs_baseline=2.07,  # H100, 2026-11-23 grading run: 55.2 vs 27.8 TFLOP/s (see docs/performance.md)
)
