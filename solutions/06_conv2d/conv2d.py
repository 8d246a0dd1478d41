"""Exercise 06: 2-D convolution (NCHW, with groups) as a differentiable PyTorch op, and as an nn.Module.

The kernels are in conv2d.cu, the C++ op in conv2d.cpp; this file builds them (cached), registers
the shape function and the backward, and exposes the Python API. The backward computes both
gradients with the forward op itself (the identities below): no other kernel, and no PyTorch
convolution.
"""
from __future__ import annotations

import torch

from grader.build import load_library
from grader.conv_args import Conv2dLayer, pair as _pair, resolve_padding

lib = load_library(__file__)


def default_version(x: torch.Tensor, groups: int = 1) -> int:
    """The version `conv2d` runs when none is named: 3 (TF32 tensor cores) where PyTorch itself would
    let cuDNN use TF32 (torch.backends.cudnn.allow_tf32, its default True) for a float32 x on a GPU of
    compute capability 8.0 or newer, without groups; else 2 (strict fp32, and the depthwise kernel)."""
    if (torch.backends.cudnn.allow_tf32 and groups == 1 and x.dtype == torch.float32 and x.is_cuda
            and torch.cuda.get_device_capability(x.device) >= (8, 0)):
        return 3
    return 2


def conv2d(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None, stride=1, padding=0,
           dilation=1, groups: int = 1, version: int | None = None) -> torch.Tensor:
    """Like torch.nn.functional.conv2d (same argument order, padding "valid" and "same" too): x (N, Cin, H, W),
    weight (Cout, Cin / groups, kh, kw), bias (Cout,) or None. version 1 runs the direct kernel, version 2
    the implicit GEMM (strict fp32; the depthwise kernel where groups == Cin), version 3 the implicit
    GEMM on TF32 tensor cores (float32, groups 1, compute capability 8.0+); None: as PyTorch's flag
    torch.backends.cudnn.allow_tf32 says (default_version)."""
    if version is None:
        version = default_version(x, groups)
    x, padding = resolve_padding(x, weight, stride, padding, dilation)
    return lib.ops.conv2d(x, weight, bias, _pair(stride), _pair(padding), _pair(dilation), int(groups), int(version))


def output_size(size: int, k: int, stride: int, pad: int, dil: int) -> int:
    return (size + 2 * pad - dil * (k - 1) - 1) // stride + 1


# Shapes for tracing (torch.compile, opcheck): a new contiguous (N, Cout, Ho, Wo) tensor.
@torch.library.register_fake(lib.qualname("conv2d"))
def _conv2d_fake(x, weight, bias, stride, padding, dilation, groups, version):
    # the op's shape checks (check_conv_args in conv2d.cpp): a fake without them traces a wrong shape
    for name, v, least in (("stride", stride, 1), ("padding", padding, 0), ("dilation", dilation, 1)):
        torch._check(len(v) == 2 and min(v) >= least, lambda: f"{name} must be 2 values >= {least}, but is {v}")
    xs, ws = list(x.shape), list(weight.shape)
    torch._check(x.dim() == 4, lambda: f"x must have 4 dimensions (N, C, H, W), but has shape {xs}")
    torch._check(groups >= 1 and xs[1] % groups == 0, lambda: f"groups ({groups}) must divide x's {xs[1]} channels")
    torch._check(weight.dim() == 4, lambda: f"weight must have 4 dimensions, but has shape {ws}")
    torch._check(ws[0] % groups == 0, lambda: f"groups ({groups}) must divide weight's {ws[0]} output channels")
    torch._check(ws[1] * groups == xs[1], lambda: f"weight must have shape (cout, cin / groups, kh, kw) with cin / "
                 f"groups = {xs[1]} / {groups}, but has shape {ws}")
    torch._check(bias is None or (bias.dim() == 1 and bias.shape[0] == ws[0]),
                 lambda: f"bias must have shape ({ws[0]},) (one value per output channel), but has {list(bias.shape)}")
    torch._check(all(k > 0 and d * (k - 1) + 1 <= n + 2 * p for k, d, n, p in zip(ws[2:], dilation, xs[2:], padding)),
                 lambda: f"weight: the kernel {ws} with dilation {dilation} spans more than the padded input (x is "
                 f"{xs}, padding {padding})")
    ho = output_size(x.shape[2], weight.shape[2], stride[0], padding[0], dilation[0])
    wo = output_size(x.shape[3], weight.shape[3], stride[1], padding[1], dilation[1])
    return x.new_empty((x.shape[0], weight.shape[0], ho, wo))


# --- the backward, through the forward op ------------------------------------------------------------
# For y = conv2d(x, W; stride s, padding p, dilation d, groups g), W (cout, cin / g, kh, kw), and
# dy = dL/dy, along one axis (the other is the same):
#
#     y[n, co, o] = sum_{ci in co's group, a} x[n, ci, o s - p + a d] W[co, ci, a]
#
# - dL/dx[n, ci, i] = sum_{co, a : o s - p + a d = i} dy[n, co, o] W[co, ci, a]: the transposed
#   convolution of dy with W. Spread dy out to stride 1 (s - 1 zeros between its pixels), and it is a
#   stride-1 convolution with W flipped and its channel axes swapped within each group, padding
#   d (k - 1) - p and dilation d. With a stride the spread-out dy is s^2 times larger than dy, zeros
#   mostly, and this convolution does s^2 times the multiply-adds of the forward: the price of having
#   no kernel of its own (exercise 07's transposed convolution skips the zeros).
# - dL/dW[co, ci, a] = sum_{n, o} x[n, ci, o s - p + a d] dy[n, co, o]: a convolution of x with dy as
#   the kernel, the channels of x in the role of images and the images in the role of channels
#   (stride d, dilation s, padding p), one group per group of W.
# - dL/dbias[co] = sum_{n, o} dy[n, co, o].
#
# conv2d_input_grad and conv2d_weight_grad take the forward op as `conv(x, w, stride, padding,
# dilation, groups)`, so the same code runs with F.conv2d standing in for it (tests/test_conv_autograd.py).


def conv2d_input_grad(conv, grad_y: torch.Tensor, weight: torch.Tensor, x_shape, stride, padding, dilation,
                      groups: int) -> torch.Tensor:
    """dL/dx, of x's shape x_shape, for dL/dy = grad_y: one stride-1 call of `conv`."""
    n, cin, h, w = x_shape
    cout, cin_g, kh, kw = weight.shape
    # BEGIN SOLUTION
    # GOAL: return dL/dx of shape (n, cin, h, w): conv(dy', W', [1, 1], padding', dilation, g), with dy'
    # GOAL: grad_y spread out to stride 1 and W' the flipped kernel (the identity above), or cropped
    # GOAL: where the padding would be negative.
    # TODO: W' = W flipped along kh and kw, its channel axes swapped within each group: view W as
    # TODO: (g, cout / g, cin / g, kh, kw), swap dims 1 and 2, flip dims 3 and 4, reshape to (cin, cout / g, kh, kw).
    # TODO: dy': along each axis the stride-1 output would have h + 2p - d (k - 1) rows; where that is
    # TODO: not grad_y's size, a zero tensor of it with grad_y at every s-th row and column ([::s]).
    # TODO: The padding q = d (k - 1) - p per axis; where q < 0, crop -q rows (columns) off both ends
    # TODO: of dy' instead (a slice) and pad by 0. Return conv(dy', W', [1, 1], [max(q, 0) per axis], dilation, g).
    g = groups
    flipped = weight.reshape(g, cout // g, cin_g, kh, kw).transpose(1, 2).flip(3, 4).reshape(cin, cout // g, kh, kw)
    full = [size + 2 * p - d * (k - 1) for size, p, d, k in zip((h, w), padding, dilation, (kh, kw))]
    if list(grad_y.shape[2:]) != full:  # a stride: s - 1 zeros between the rows (columns), and those floor dropped
        spread = grad_y.new_zeros(n, cout, *full)
        spread[:, :, ::stride[0], ::stride[1]] = grad_y
        grad_y = spread
    pad = [d * (k - 1) - p for p, d, k in zip(padding, dilation, (kh, kw))]
    crop = [max(-q, 0) for q in pad]
    grad_y = grad_y[:, :, crop[0]:full[0] - crop[0], crop[1]:full[1] - crop[1]]
    return conv(grad_y, flipped, [1, 1], [max(q, 0) for q in pad], list(dilation), g)
    # END SOLUTION


def conv2d_weight_grad(conv, x: torch.Tensor, grad_y: torch.Tensor, weight_shape, stride, padding, dilation,
                       groups: int, chunks: int = 1) -> torch.Tensor:
    """dL/dW, of shape weight_shape, for dL/dy = grad_y: one call of `conv`, the batch split into `chunks`
    (dividing it) summed afterwards (weight_grad_chunks says why)."""
    n, cin, h, w = x.shape
    cout, cin_g, kh, kw = weight_shape
    ho, wo = grad_y.shape[2:]
    # BEGIN SOLUTION
    # GOAL: return dL/dW of shape (cout, cin / g, kh, kw): one call conv(x', dy', dilation, padding,
    # GOAL: stride, g * c), the channels of x as images and the images (c chunks of them) as channels.
    # TODO: x' (cin / g, g n, h, w): x viewed (c, n / c, g, cin / g, h, w), ordered (cin / g, g, c, n / c,
    # TODO: h, w). dy', the kernel (g c cout / g output channels of n / c input channels, ho x wo): dy
    # TODO: viewed (c, n / c, g, cout / g, ho, wo), ordered (g, c, cout / g, n / c, ho, wo). Each (group,
    # TODO: chunk) pair is a group of the call. It gives (cin / g, g c cout / g, kh', kw') with kh' >= kh
    # TODO: (stride = the forward's dilation, dilation = its stride): keep [:kh, :kw], sum over the
    # TODO: chunks, order the result (g, cout / g, cin / g, kh, kw) and reshape it to (cout, cin / g, kh, kw).
    g, c = groups, chunks
    xs = x.reshape(c, n // c, g, cin_g, h, w).permute(3, 2, 0, 1, 4, 5).reshape(cin_g, g * n, h, w)
    ks = grad_y.reshape(c, n // c, g, cout // g, ho, wo).permute(2, 0, 3, 1, 4, 5).reshape(c * cout, n // c, ho, wo)
    out = conv(xs, ks, list(dilation), list(padding), list(stride), g * c)[:, :, :kh, :kw]
    out = out.reshape(cin_g, g, c, cout // g, kh, kw).sum(2)
    return out.permute(1, 2, 0, 3, 4).reshape(cout, cin_g, kh, kw)
    # END SOLUTION


# The weight gradient is a GEMM with a small output (cout x cin / g kh kw: 37k values for ResNet's
# 64 -> 64 3x3) and a long reduction (n ho wo: 100k for batch 32 at 56 x 56): as one call it makes
# few output tiles (9 of 64 x 64 there), so a few SMs would walk the whole reduction while the rest
# idle. Splitting the batch into P chunks, each a group of its own, makes P times the tiles, each with
# 1/P of the reduction; the P partial gradients are then summed (torch.sum: deterministic). P is
# chosen for about WAVES waves of 64 x 64 tiles over the GPU's SMs, divides the batch (no copies to
# pad it), keeps at least MIN_CHUNK_REDUCTION multiply-adds per output and chunk (a small problem
# stays one call), and keeps g P within the 65535 grid layers of version 2's implicit GEMM.
#
# With one image per chunk, each group of the call has one input channel: version 2 takes its
# depthwise kernel, with a whole output plane as the kernel. For a depthwise layer that is the right
# kernel (a GEMM tile would hold 9 x 1 useful values of 64 x 64), and its shared tile fits planes up
# to 56 x 56 at stride 1 (larger ones go to the GEMM). For a layer with many output channels per
# group it is not: the depthwise kernel would read each image plane once per output channel, so
# there the chunks keep two images or more (largest = n / 2) and the call stays a GEMM. (Batch 1
# cannot: its weight gradient always reaches the depthwise kernel.)
WAVES = 2
TILE = 64 * 64
MIN_CHUNK_REDUCTION = 1024
MAX_GROUPS = 65535
DEPTHWISE_MULTIPLIER = 2  # output channels per group up to which one image per chunk is fine


def weight_grad_chunks(n: int, outputs: int, reduction: int, groups: int, sms: int,
                       largest: int | None = None) -> int:
    """P for a weight gradient of `outputs` values, each a sum of `reduction` products over the n
    images, with `groups` groups, on a GPU of `sms` SMs; at most `largest` (default n)."""
    def ceil_div(a, b):
        return -(-a // b)

    cap = max(1, min(n if largest is None else largest, reduction // MIN_CHUNK_REDUCTION, MAX_GROUPS // groups))
    want = min(cap, ceil_div(WAVES * sms, ceil_div(outputs, TILE)))
    if want <= 1:
        return 1
    divisors = [p for p in range(1, cap + 1) if n % p == 0]
    return next((p for p in divisors if p >= want), divisors[-1])


def layer_chunks(n: int, weight_shape, out_hw, groups: int, sms: int) -> int:
    """weight_grad_chunks for n images of a layer with this weight shape and output size."""
    cout, cin_g, kh, kw = weight_shape
    largest = n // 2 if cout // groups > DEPTHWISE_MULTIPLIER and n > 1 else n
    return weight_grad_chunks(n, cout * cin_g * kh * kw, n * out_hw[0] * out_hw[1], groups, sms, largest)


def _op(version: int):
    """This exercise's forward op, without bias, as the identities call it."""
    def conv(x, w, stride, padding, dilation, groups):
        return lib.ops.conv2d(x, w, None, stride, padding, dilation, int(groups), version)
    return conv


def _sms(t: torch.Tensor) -> int:
    return torch.cuda.get_device_properties(t.device).multi_processor_count if t.is_cuda else 132


def _weight_grad(x, grad_y, weight_shape, stride, padding, dilation, groups, version):
    if x.numel() == 0 or grad_y.numel() == 0:
        return x.new_zeros(weight_shape)
    cin_g = weight_shape[1]
    # The call's input image holds numel(x) / (cin / g) values and its weight numel(grad_y), both
    # indexed with int by the op: a batch past that goes in pieces, summed.
    per_image = max(x[0].numel() // cin_g, grad_y[0].numel(), 1)
    step = max(1, (2**31 - 2) // per_image)
    total = None
    for start in range(0, x.shape[0], step):
        xs, gs = x[start:start + step], grad_y[start:start + step]
        chunks = layer_chunks(xs.shape[0], weight_shape, gs.shape[2:], groups, _sms(x))
        # Version 3 (TF32) takes groups 1 only, so chunks (groups of the call) go through version 2:
        # strict fp32, at least as accurate; one chunk keeps version 3.
        v = 2 if version == 3 and chunks > 1 else version
        if chunks > 1:  # (planner paths: grader/verify/paths.py)
            lib.took("wgrad.chunked" if v == version else "wgrad.chunked_v3_as_v2", x.dtype)
        if start > 0:  # a batch past int32 indices, in pieces
            lib.took("wgrad.batch_pieces", x.dtype)
        part = conv2d_weight_grad(_op(v), xs, gs, weight_shape, stride, padding, dilation, groups, chunks)
        total = part if total is None else total + part
    return total


def _setup_context(ctx, inputs, output):
    x, weight, bias, stride, padding, dilation, groups, version = inputs
    # only what the gradients asked for need: x for the weight's, the weight for x's
    ctx.save_for_backward(x if ctx.needs_input_grad[1] else None, weight if ctx.needs_input_grad[0] else None)
    ctx.x_shape, ctx.weight_shape = tuple(x.shape), tuple(weight.shape)
    ctx.settings = (list(stride), list(padding), list(dilation), int(groups), int(version))


def _backward(ctx, grad_y):
    x, weight = ctx.saved_tensors
    stride, padding, dilation, groups, version = ctx.settings
    grad_x = grad_w = grad_b = None
    if ctx.needs_input_grad[0]:  # the same version as the forward (version 3 is dense: so is this call)
        if grad_y.numel() == 0 or weight.numel() == 0 or 0 in ctx.x_shape:
            grad_x = grad_y.new_zeros(ctx.x_shape)
        else:
            grad_x = conv2d_input_grad(_op(version), grad_y, weight, ctx.x_shape, stride, padding, dilation, groups)
    if ctx.needs_input_grad[1]:
        grad_w = _weight_grad(x, grad_y, ctx.weight_shape, stride, padding, dilation, groups, version)
    if ctx.needs_input_grad[2]:
        grad_b = grad_y.sum((0, 2, 3))
    return grad_x, grad_w, grad_b, None, None, None, None, None


torch.library.register_autograd(lib.qualname("conv2d"), _backward, setup_context=_setup_context)


class Conv2d(Conv2dLayer):
    """Drop-in for torch.nn.Conv2d (zero padding, as numbers, "valid" or "same"), trainable: weight
    (out_channels, in_channels / groups, kh, kw), torch.nn's signature, initialisation and print
    (grader.conv_args.Conv2dLayer); runs conv2d's default version (TF32 tensor cores where
    torch.backends.cudnn.allow_tf32 allows them, as torch.nn.Conv2d), its backward too."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return conv2d(x, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)
