"""Exercise 07: transposed 2-D convolution (NCHW, with groups), a gather and an implicit GEMM, as a
differentiable PyTorch op.

The kernel is in conv_transpose2d.cu, the C++ op in conv_transpose2d.cpp; this file builds them
(cached), registers the shape function and the backward, and exposes the Python API (and an
nn.Module). The backward computes both gradients with the forward op itself (the identities below):
no other kernel, and no PyTorch convolution.
"""
from __future__ import annotations

import torch

from grader.build import load_library
from grader.conv_args import ConvTranspose2dLayer, pair as _pair

lib = load_library(__file__)


# version 3 runs its 36 products per group as one call of version 2, which takes 65535 groups
WINOGRAD_MAX_GROUPS = 65535 // 36
# With fewer input channels a group the transforms cost more than the multiplications they save: on
# the H100 (make bench's timer) 3 -> 64 channels took 2.8 times version 2's time, 4 a group (ResNeXt)
# 1.2 times, depthwise 1.8 times; 8 -> 8 channels 0.87 times, 16 -> 16 0.72, 64 -> 3 0.45.
WINOGRAD_MIN_CIN_G = 8


def default_version(x: torch.Tensor, weight: torch.Tensor, stride=1, padding=0, dilation=1, groups: int = 1) -> int:
    """The version `conv_transpose2d` runs when none is named: 3 (Winograd) where it applies (a 3 x 3
    kernel at stride 1 and dilation 1, at most WINOGRAD_MAX_GROUPS groups, transforms under 2^31
    elements) and pays (WINOGRAD_MIN_CIN_G input channels a group or more), else 2. Arguments it cannot
    read go to version 2, whose checks name them."""
    if x.dim() != 4 or weight.dim() != 4 or tuple(weight.shape[2:]) != (3, 3) or groups > WINOGRAD_MAX_GROUPS:
        return 2
    if groups < 1 or x.shape[1] // groups < WINOGRAD_MIN_CIN_G:
        return 2
    if _pair(stride) != [1, 1] or _pair(dilation) != [1, 1] or len(_pair(padding)) != 2:
        return 2
    ho, wo = (output_size(x.shape[2 + i], 3, 1, _pair(padding)[i], 0, 1) for i in range(2))
    tiles = x.shape[0] * -(-ho // 4) * -(-wo // 4)
    return 3 if 36 * max(x.shape[1], weight.shape[1] * groups) * tiles < 2**31 - 1 else 2


def conv_transpose2d(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None, stride=1, padding=0,
                     output_padding=0, groups: int = 1, dilation=1, version: int | None = None) -> torch.Tensor:
    """Like torch.nn.functional.conv_transpose2d (same argument order): x (N, Cin, H, W), weight
    (Cin, Cout / groups, kh, kw), bias (Cout,) or None. version 1 runs the gather kernel, version 2
    the implicit GEMM, version 3 Winograd F(4x4, 3x3) (3 x 3 kernels at stride 1 and dilation 1);
    None: the fastest that applies (default_version)."""
    if version is None:
        version = default_version(x, weight, stride, padding, dilation, groups)
    return lib.ops.conv_transpose2d(x, weight, bias, _pair(stride), _pair(padding), _pair(output_padding),
                                    int(groups), _pair(dilation), int(version))


def output_size(size: int, k: int, stride: int, pad: int, output_pad: int, dil: int) -> int:
    return (size - 1) * stride - 2 * pad + dil * (k - 1) + output_pad + 1


# Shapes for tracing (torch.compile, opcheck): a new contiguous (N, Cout, Ho, Wo) tensor, Cout =
# weight.shape[1] * groups.
@torch.library.register_fake(lib.qualname("conv_transpose2d"))
def _conv_transpose2d_fake(x, weight, bias, stride, padding, output_padding, groups, dilation, version):
    # the op's shape checks (check_conv_transpose_args in conv_transpose2d.cpp): a fake without them traces a
    # wrong shape
    for name, v, least in (("stride", stride, 1), ("padding", padding, 0), ("output_padding", output_padding, 0),
                           ("dilation", dilation, 1)):
        torch._check(len(v) == 2 and min(v) >= least, lambda: f"{name} must be 2 values >= {least}, but is {v}")
    xs, ws = list(x.shape), list(weight.shape)
    torch._check(x.dim() == 4, lambda: f"x must have 4 dimensions (N, C, H, W), but has shape {xs}")
    torch._check(groups >= 1 and xs[1] % groups == 0, lambda: f"groups ({groups}) must divide x's {xs[1]} channels")
    torch._check(weight.dim() == 4, lambda: f"weight must have 4 dimensions, but has shape {ws}")
    torch._check(ws[0] == xs[1], lambda: f"weight must have shape (cin, cout / groups, kh, kw) with cin = x.size(1) = "
                 f"{xs[1]} whatever the groups, but has shape {ws}")
    torch._check(ws[2] > 0 and ws[3] > 0, lambda: f"weight must have a kernel of at least 1 x 1, but has shape {ws}")
    cout = ws[1] * groups
    torch._check(bias is None or (bias.dim() == 1 and bias.shape[0] == cout),
                 lambda: f"bias must have shape ({cout},) (one value per output channel), but has {list(bias.shape)}")
    torch._check(all(0 <= o < max(s, d) for o, s, d in zip(output_padding, stride, dilation)),
                 lambda: f"output_padding must be non-negative and smaller than the stride or the dilation, but is "
                 f"{output_padding} with stride {stride} and dilation {dilation}")
    ho = output_size(xs[2], ws[2], stride[0], padding[0], output_padding[0], dilation[0])
    wo = output_size(xs[3], ws[3], stride[1], padding[1], output_padding[1], dilation[1])
    torch._check(ho > 0 and wo > 0, lambda: f"padding {padding} crops the whole output: x {xs} and weight {ws} give "
                 f"{ho} x {wo}")
    return x.new_empty((x.shape[0], cout, ho, wo))


# --- the backward, through the forward op ------------------------------------------------------------
# For y = conv_transpose2d(x, W; stride s, padding p, output_padding, groups g, dilation d), W (cin,
# cout / g, kh, kw), and dy = dL/dy, along one axis (the other is the same):
#
#     y[n, co, i s - p + a d] += x[n, ci, i] W[ci, co, a]   (co in ci's group)
#
# - dL/dx[n, ci, i] = sum_{co, a} dy[n, co, i s - p + a d] W[ci, co, a]: conv2d(dy, W; s, p, d, g), W
#   read as a conv2d weight. This op computes a stride-1 correlation as a stride-1 transposed
#   convolution with the kernel flipped and its channel axes swapped within each group, padding
#   d (k - 1) - p (where that is negative, the result is padded with zeros instead); the stride is then
#   every s-th row and column of it ([::s]), cut to x's size. That computes all s^2 phases of which
#   one is kept: s^2 times the multiply-adds of the forward (a conv2d kernel would not).
# - dL/dW[ci, co, a] = sum_{n, i} x[n, ci, i] dy[n, co, i s - p + a d]: a correlation of dy with x as
#   the kernel (dilation s, padding p), at every d-th tap: the stride-1 transposed convolution of dy,
#   its channels as images and its images as channels, with x flipped as the kernel (dilation s,
#   padding s (h - 1) - p), then [::d], the first kh x kw taps; one group per group of W.
# - dL/dbias[co] = sum_{n, o} dy[n, co, o].
#
# The functions take the forward op as `convt(x, w, stride, padding, output_padding, groups, dilation)`,
# so the same code runs with F.conv_transpose2d standing in for it (tests/test_conv_autograd.py).


def sample(t: torch.Tensor, first, step, size) -> torch.Tensor:
    """out[..., i, j] = t[..., first[0] + i step[0], first[1] + j step[1]] for i < size[0], j < size[1];
    0 where that falls outside t (first may be negative). A strided view of t where nothing does."""
    lo, hi = [], []  # the positions i that land inside t: lo <= i < hi
    for f, s, n, length in zip(first, step, size, t.shape[-2:]):
        lo.append(max(0, -(f // s)))
        hi.append(max(lo[-1], min(n, (length - 1 - f) // s + 1)))
    rows, cols = (slice(f + a * s, f + (b - 1) * s + 1, s) for f, a, b, s in zip(first, lo, hi, step))
    if lo == [0, 0] and hi == list(size):
        return t[..., rows, cols]
    out = t.new_zeros(*t.shape[:-2], *size)
    if hi[0] > lo[0] and hi[1] > lo[1]:
        out[..., lo[0]:hi[0], lo[1]:hi[1]] = t[..., rows, cols]
    return out


def conv_transpose2d_input_grad(convt, grad_y: torch.Tensor, weight: torch.Tensor, x_shape, stride, padding,
                                dilation, groups: int) -> torch.Tensor:
    """dL/dx, of x's shape x_shape, for dL/dy = grad_y: one stride-1 call of `convt`, then every s-th pixel."""
    n, cin, h, w = x_shape
    _, cout_g, kh, kw = weight.shape
    # BEGIN SOLUTION
    # GOAL: return dL/dx of shape (n, cin, h, w): the stride-1 transposed convolution of grad_y with
    # GOAL: the flipped kernel (the identity above), sampled every s-th row and column.
    # TODO: W' (g cout / g, cin / g, kh, kw): W viewed (g, cin / g, cout / g, kh, kw), dims 1 and 2
    # TODO: swapped, dims 3 and 4 flipped. q = d (k - 1) - p per axis. full = convt(grad_y, W', [1, 1],
    # TODO: [max(q, 0) per axis], [0, 0], g, dilation); dL/dx[i] = full[i s + min(q, 0)], 0 where that
    # TODO: is outside full: sample(full, [min(q, 0) per axis], stride, (h, w)).
    g = groups
    flipped = weight.reshape(g, cin // g, cout_g, kh, kw).transpose(1, 2).flip(3, 4)
    flipped = flipped.reshape(g * cout_g, cin // g, kh, kw)
    pad = [d * (k - 1) - p for p, d, k in zip(padding, dilation, (kh, kw))]
    full = convt(grad_y, flipped, [1, 1], [max(q, 0) for q in pad], [0, 0], g, list(dilation))
    return sample(full, [min(q, 0) for q in pad], stride, (h, w))
    # END SOLUTION


def conv_transpose2d_weight_grad(convt, x: torch.Tensor, grad_y: torch.Tensor, weight_shape, stride, padding,
                                 dilation, groups: int, chunks: int = 1) -> torch.Tensor:
    """dL/dW, of shape weight_shape, for dL/dy = grad_y: one stride-1 call of `convt`, the batch split
    into `chunks` (dividing it) summed afterwards (weight_grad_chunks says why)."""
    n, cin, h, w = x.shape
    _, cout_g, kh, kw = weight_shape
    ho, wo = grad_y.shape[2:]
    # BEGIN SOLUTION
    # GOAL: return dL/dW of shape (cin, cout / g, kh, kw): one stride-1 call of convt with dy's channels
    # GOAL: as images, its images (c chunks of them) as channels, and x flipped as the kernel.
    # TODO: z (cout / g, g n, ho, wo): dy viewed (c, n / c, g, cout / g, ho, wo), ordered (cout / g, g, c,
    # TODO: n / c, ho, wo). The kernel (g n, cin / g, h, w): x viewed (c, n / c, g, cin / g, h, w), ordered
    # TODO: (g, c, n / c, cin / g, h, w), flipped along h and w. q = s (size - 1) - p per axis (s, size:
    # TODO: the stride and x's size). full = convt(z, kernel, [1, 1], [max(q, 0)], [0, 0], g c, stride)
    # TODO: is (cout / g, g c cin / g, A, B); sample(full, [min(q, 0)], dilation, (kh, kw)), viewed
    # TODO: (cout / g, g, c, cin / g, kh, kw), summed over the chunks, ordered (g, cin / g, cout / g, kh,
    # TODO: kw), is dL/dW reshaped to (cin, cout / g, kh, kw).
    g, c = groups, chunks
    cin_g = cin // g
    z = grad_y.reshape(c, n // c, g, cout_g, ho, wo).permute(3, 2, 0, 1, 4, 5).reshape(cout_g, g * n, ho, wo)
    kernel = x.reshape(c, n // c, g, cin_g, h, w).permute(2, 0, 1, 3, 4, 5).reshape(g * n, cin_g, h, w).flip(2, 3)
    pad = [s * (size - 1) - p for s, size, p in zip(stride, (h, w), padding)]
    full = convt(z, kernel, [1, 1], [max(q, 0) for q in pad], [0, 0], g * c, list(stride))
    out = sample(full, [min(q, 0) for q in pad], dilation, (kh, kw)).reshape(cout_g, g, c, cin_g, kh, kw).sum(2)
    return out.permute(1, 2, 0, 3, 4).reshape(cin, cout_g, kh, kw)
    # END SOLUTION


# The weight gradient is a GEMM with a small output (cin x cout / g kh kw) and a long reduction (n h w
# over the batch): as one call it makes few output tiles, so a few SMs would walk the whole reduction
# while the rest idle. Splitting the batch into P chunks, each a group of its own, makes P times the
# tiles, each with 1/P of the reduction; the P partial gradients are then summed (torch.sum:
# deterministic). P is chosen for about WAVES waves of 64 x 64 tiles over the GPU's SMs, divides the
# batch (no copies to pad it), keeps at least MIN_CHUNK_REDUCTION multiply-adds per output and chunk
# (a small problem stays one call), and keeps g P within the 65535 grid layers of version 2.
WAVES = 2
TILE = 64 * 64
MIN_CHUNK_REDUCTION = 1024
MAX_GROUPS = 65535


def weight_grad_chunks(n: int, outputs: int, reduction: int, groups: int, sms: int) -> int:
    """P for a weight gradient of `outputs` values, each a sum of `reduction` products over the n
    images, with `groups` groups, on a GPU of `sms` SMs."""
    def ceil_div(a, b):
        return -(-a // b)

    cap = max(1, min(n, reduction // MIN_CHUNK_REDUCTION, MAX_GROUPS // groups))
    want = min(cap, ceil_div(WAVES * sms, ceil_div(outputs, TILE)))
    if want <= 1:
        return 1
    divisors = [p for p in range(1, cap + 1) if n % p == 0]
    return next((p for p in divisors if p >= want), divisors[-1])


def layer_chunks(n: int, weight_shape, in_hw, groups: int, sms: int) -> int:
    """weight_grad_chunks for n images of a layer with this weight shape and input size."""
    cin, cout_g, kh, kw = weight_shape
    return weight_grad_chunks(n, cin * cout_g * kh * kw, n * in_hw[0] * in_hw[1], groups, sms)


def _op(version: int):
    """This exercise's forward op, without bias, as the identities call it."""
    def convt(x, w, stride, padding, output_padding, groups, dilation):
        return lib.ops.conv_transpose2d(x, w, None, stride, padding, output_padding, int(groups), dilation, version)
    return convt


def _sms(t: torch.Tensor) -> int:
    return torch.cuda.get_device_properties(t.device).multi_processor_count if t.is_cuda else 132


def _weight_grad(x, grad_y, weight_shape, stride, padding, dilation, groups, version):
    if x.numel() == 0 or grad_y.numel() == 0:
        return x.new_zeros(weight_shape)
    cout_g = weight_shape[1]
    # The call's input image holds numel(grad_y) / (cout / g) values and its kernel numel(x), both
    # indexed with int by the op: a batch past that goes in pieces, summed.
    per_image = max(grad_y[0].numel() // cout_g, x[0].numel(), 1)
    step = max(1, (2**31 - 2) // per_image)
    total = None
    for start in range(0, x.shape[0], step):
        xs, gs = x[start:start + step], grad_y[start:start + step]
        chunks = layer_chunks(xs.shape[0], weight_shape, xs.shape[2:], groups, _sms(x))
        if chunks > 1:  # (planner paths: grader/verify/paths.py)
            lib.took("wgrad.chunked", x.dtype)
        if start > 0:  # a batch past int32 indices, in pieces
            lib.took("wgrad.batch_pieces", x.dtype)
        part = conv_transpose2d_weight_grad(_op(version), xs, gs, weight_shape, stride, padding, dilation, groups,
                                            chunks)
        total = part if total is None else total + part
    return total


def _setup_context(ctx, inputs, output):
    x, weight, bias, stride, padding, output_padding, groups, dilation, version = inputs
    # only what the gradients asked for need: x for the weight's, the weight for x's
    ctx.save_for_backward(x if ctx.needs_input_grad[1] else None, weight if ctx.needs_input_grad[0] else None)
    ctx.x_shape, ctx.weight_shape = tuple(x.shape), tuple(weight.shape)
    ctx.settings = (list(stride), list(padding), list(dilation), int(groups), int(version))


def _backward(ctx, grad_y):
    x, weight = ctx.saved_tensors
    stride, padding, dilation, groups, version = ctx.settings
    grad_x = grad_w = grad_b = None
    if ctx.needs_input_grad[0]:  # the same version as the forward
        if grad_y.numel() == 0 or weight.numel() == 0 or 0 in ctx.x_shape:
            grad_x = grad_y.new_zeros(ctx.x_shape)
        else:
            grad_x = conv_transpose2d_input_grad(_op(version), grad_y, weight, ctx.x_shape, stride, padding, dilation,
                                                 groups)
    if ctx.needs_input_grad[1]:  # x is its kernel (not 3 x 3): version 2 where the forward ran 3
        grad_w = _weight_grad(x, grad_y, ctx.weight_shape, stride, padding, dilation, groups, min(version, 2))
    if ctx.needs_input_grad[2]:
        grad_b = grad_y.sum((0, 2, 3))
    return grad_x, grad_w, grad_b, None, None, None, None, None, None


torch.library.register_autograd(lib.qualname("conv_transpose2d"), _backward, setup_context=_setup_context)


class ConvTranspose2d(ConvTranspose2dLayer):
    """Drop-in for torch.nn.ConvTranspose2d (zero padding), trainable: weight (in_channels,
    out_channels / groups, kh, kw), torch.nn's signature, initialisation and print
    (grader.conv_args.ConvTranspose2dLayer)."""

    def forward(self, x: torch.Tensor, output_size=None) -> torch.Tensor:
        """`output_size` ((H, W), or the whole output shape), as torch.nn.ConvTranspose2d takes it: the
        output_padding that gives that size, in place of the module's."""
        return conv_transpose2d(x, self.weight, self.bias, self.stride, self.padding,
                                self.output_padding_for(x, output_size), self.groups, self.dilation)
