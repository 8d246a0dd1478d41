"""Exercise 10: 2-d convolution through cuDNN with cached plans, as PyTorch ops with autograd.

The cuDNN work is in cudnn_conv.cu, the C++ ops in cudnn_conv.cpp; this file builds them (cached),
defines the gradients and the shape functions, and exposes the Python API.
"""
import torch

from grader.build import load_library
from grader.conv_args import Conv2dLayer, ConvTranspose2dLayer, resolve_padding

lib = load_library(__file__)

# How a plan's algorithm is chosen, and whether plans are kept (see README, "Interface").
MODES = {"uncached": 0, "heuristic": 1, "benchmark": 2}

# The ops' overloads, looked up once: calling them directly skips a Python layer (host time counts).
# Their int[2] arguments take a single int too (the op's schema repeats it), so the forward's
# no-gradient path passes stride, padding and dilation through untouched.
_conv2d = lib.ops.conv2d.default
_backward_input = lib.ops.conv2d_backward_input.default
_backward_weight = lib.ops.conv2d_backward_weight.default
_backward_bias = lib.ops.conv2d_backward_bias.default
_transpose = lib.ops.conv_transpose2d.default


def _pair(v, name: str) -> list:
    if isinstance(v, int):
        return [v, v]
    v = list(v)
    if len(v) != 2:  # refused here, before a size is computed from it
        raise ValueError(f"{name} must be an int or 2 values (height, width), but is {v}")
    return v


def _pairs(**named) -> list:
    """Each argument as a pair, in the order given: _pairs(stride=1, padding=(0, 1))."""
    return [_pair(v, name) for name, v in named.items()]


def _mode(mode) -> int:
    """A mode's name, or its number as the registered ops take it (0, 1, 2)."""
    if isinstance(mode, int) and mode in MODES.values():
        return mode
    try:
        return MODES[mode]
    except (KeyError, TypeError):
        raise ValueError(f"mode must be one of {', '.join(MODES)} (or 0, 1, 2), not {mode!r}") from None


def _needs_grad(x, weight, bias) -> bool:
    # getattr: a bias that is not a tensor reaches the op, whose schema names it in the error
    return torch.is_grad_enabled() and (x.requires_grad or weight.requires_grad or getattr(bias, "requires_grad", False))


def conv2d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1, mode="benchmark"):
    """Like F.conv2d(x, weight, bias, stride, padding, dilation, groups) for NCHW float32/float64 tensors:
    weight (C_out, C_in / groups, kH, kW), bias None or (C_out,); padding numbers, "valid" or "same"."""
    if isinstance(padding, str):
        x, padding = resolve_padding(x, weight, stride, padding, dilation)
    # _needs_grad inlined: this is the path whose host time is measured (cheapest tests first)
    if (x.requires_grad or weight.requires_grad or getattr(bias, "requires_grad", False)) and torch.is_grad_enabled():
        geometry = _pairs(stride=stride, padding=padding, dilation=dilation)
        return _Conv2d.apply(x, weight, bias, *geometry, groups, _mode(mode))
    return _conv2d(x, weight, bias, stride, padding, dilation, groups, _mode(mode))


def conv2d_backward_input(grad_output, weight, input_size, stride=1, padding=0, dilation=1, groups=1,
                          mode="benchmark"):
    """The gradient of conv2d with respect to its input of shape input_size (cuDNN's backward-data)."""
    geometry = _pairs(stride=stride, padding=padding, dilation=dilation)
    return _backward_input(grad_output, weight, list(input_size), *geometry,
                           groups, _mode(mode))


def conv2d_backward_weight(grad_output, x, weight_size, stride=1, padding=0, dilation=1, groups=1, mode="benchmark"):
    """The gradient of conv2d with respect to its weight of shape weight_size (cuDNN's backward-filter)."""
    geometry = _pairs(stride=stride, padding=padding, dilation=dilation)
    return _backward_weight(grad_output, x, list(weight_size), *geometry,
                            groups, _mode(mode))


def conv2d_backward_bias(grad_output):
    """The gradient of conv2d with respect to its bias: grad_output summed over N, H and W (cuDNN's
    backward-bias)."""
    return _backward_bias(grad_output)


def _transposed_size(x, weight, stride, padding, output_padding, dilation, groups):
    size = [x.shape[0], weight.shape[1] * groups]
    for i in range(2):
        if not 0 <= output_padding[i] < max(stride[i], dilation[i]):
            raise ValueError(f"output_padding must be smaller than stride or dilation, but is {output_padding}")
        size.append((x.shape[2 + i] - 1) * stride[i] - 2 * padding[i] + dilation[i] * (weight.shape[2 + i] - 1)
                    + output_padding[i] + 1)
    if min(size) < 1:  # cuDNN's descriptors take no empty dim; say which shapes led to it
        raise ValueError(f"x of shape {tuple(x.shape)} and weight of shape {tuple(weight.shape)} give an output of "
                         f"shape {tuple(size)}, with an empty or negative dim")
    return size


def conv_transpose2d(x, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1,
                     mode="benchmark"):
    """Like F.conv_transpose2d(x, weight, bias, stride, padding, output_padding, groups, dilation): the
    backward-data of the convolution whose weight is `weight` (C_in, C_out / groups, kH, kW), plus bias
    (None or (C_out,))."""
    s, p, op, d = _pairs(stride=stride, padding=padding, output_padding=output_padding, dilation=dilation)
    if x.dim() != 4 or weight.dim() != 4:
        raise ValueError(f"x and weight must have 4 dimensions, but have shapes {tuple(x.shape)}, {tuple(weight.shape)}")
    if not isinstance(groups, int) or groups < 1:
        raise ValueError(f"groups must be an int of at least 1, but is {groups!r}")
    size = _transposed_size(x, weight, s, p, op, d, groups)
    m = _mode(mode)
    if _needs_grad(x, weight, bias):
        return _ConvTranspose2d.apply(x, weight, bias, size, s, p, d, groups, m)
    return _transpose(x, weight, bias, size, s, p, d, groups, m)


class _Conv2d(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, stride, padding, dilation, groups, mode):
        # BEGIN OPEN
        # GOAL: y = conv2d(x, weight) + bias through the registered op, keeping what backward needs on ctx.
        ctx.save_for_backward(x, weight)
        ctx.conf = (stride, padding, dilation, groups, mode)
        return _conv2d(x, weight, bias, stride, padding, dilation, groups, mode)
        # END OPEN

    @staticmethod
    def backward(ctx, grad):
        # BEGIN OPEN
        # GOAL: the gradients of x, weight and bias that autograd asks for (ctx.needs_input_grad), each by one of
        # GOAL: this file's ops with the forward's stride, padding, dilation, groups and mode; None for the rest.
        x, weight = ctx.saved_tensors
        grad_x = grad_w = grad_b = None
        if ctx.needs_input_grad[0]:
            grad_x = _backward_input(grad, weight, list(x.shape), *ctx.conf)
        if ctx.needs_input_grad[1]:
            grad_w = _backward_weight(grad, x, list(weight.shape), *ctx.conf)
        if ctx.needs_input_grad[2]:
            grad_b = _backward_bias(grad)
        return grad_x, grad_w, grad_b, None, None, None, None, None
        # END OPEN


class _ConvTranspose2d(torch.autograd.Function):
    # y = conv2d's backward-data of x, plus bias, so dL/dx = conv2d(dL/dy, w), dL/dw = backward-filter(x, dL/dy)
    # and dL/dbias = dL/dy summed over N, H and W.
    @staticmethod
    def forward(ctx, x, weight, bias, size, stride, padding, dilation, groups, mode):
        # BEGIN OPEN
        # GOAL: y = conv_transpose2d(x, weight) + bias of shape `size` through the registered op, keeping what backward
        # GOAL: needs on ctx.
        ctx.save_for_backward(x, weight)
        ctx.conf = (stride, padding, dilation, groups, mode)
        return _transpose(x, weight, bias, size, stride, padding, dilation, groups, mode)
        # END OPEN

    @staticmethod
    def backward(ctx, grad):
        # BEGIN OPEN
        # GOAL: the gradients autograd asks for, each by one of this file's ops: y is the backward-data of the
        # GOAL: convolution of y with weight, so each gradient is one of that convolution's three operations
        # GOAL: (Background: Groups, the same filter read backwards); None for the rest.
        x, weight = ctx.saved_tensors
        grad_x = grad_w = grad_b = None
        if ctx.needs_input_grad[0]:
            grad_x = _conv2d(grad.contiguous(), weight, None, *ctx.conf)
        if ctx.needs_input_grad[1]:
            grad_w = _backward_weight(x, grad, list(weight.shape), *ctx.conf)
        if ctx.needs_input_grad[2]:
            grad_b = _backward_bias(grad)
        return grad_x, grad_w, grad_b, None, None, None, None, None, None
        # END OPEN


# Shapes for tracing (torch.compile, fake tensors), with the ops' shape checks (cudnn_conv.cpp): a fake without
# them traces a wrong shape.
def _shape4(s, name: str) -> list:
    torch._check(len(s) == 4 and min(s) > 0, lambda: f"{name} must have 4 non-empty dimensions (N, C, H, W), but has "
                 f"shape {list(s)}")
    return list(s)


def _out_shape(x, w, stride, padding, dilation, groups, names=("x", "weight")) -> list:
    """The convolution's output shape for input shape x and filter shape w, after make_args' checks."""
    x, w = _shape4(x, names[0]), _shape4(w, names[1])
    for name, v, least in (("stride", stride, 1), ("padding", padding, 0), ("dilation", dilation, 1)):
        torch._check(len(v) == 2 and min(v) >= least, lambda: f"{name} must be 2 values >= {least}, but is {v}")
    torch._check(groups >= 1 and x[1] % groups == 0 and w[0] % groups == 0,
                 lambda: f"groups ({groups}) must divide {names[0]}'s {x[1]} channels and {names[1]}'s {w[0]} filters")
    torch._check(w[1] * groups == x[1], lambda: f"{names[1]} must have {names[0]}'s {x[1]} channels / groups {groups} "
                 f"in dimension 1, but has shape {w}")
    out = [x[0], w[0]]
    for d in range(2):
        span = dilation[d] * (w[2 + d] - 1) + 1
        torch._check(x[2 + d] + 2 * padding[d] >= span, lambda: f"the kernel ({span} wide with its dilation) is larger "
                     f"than the padded input {names[0]} ({x} + 2 * padding {padding})")
        out.append((x[2 + d] + 2 * padding[d] - span) // stride[d] + 1)
    return out


def _check_bias(bias, channels):
    torch._check(bias is None or (bias.dim() == 1 and bias.shape[0] == channels),
                 lambda: f"bias must have shape [{channels}] (one per output channel), but has {list(bias.shape)}")


def _check_output(t, name: str, shape: list):
    torch._check(list(t.shape) == shape, lambda: f"{name} must have shape {shape} (what the convolution gives), but "
                 f"has shape {list(t.shape)}")


@torch.library.register_fake(lib.qualname("conv2d"))
def _conv2d_fake(x, weight, bias, stride, padding, dilation, groups, mode):
    out = _out_shape(x.shape, weight.shape, stride, padding, dilation, groups)
    _check_bias(bias, out[1])
    return x.new_empty(out)


@torch.library.register_fake(lib.qualname("conv2d_backward_input"))
def _backward_input_fake(grad_output, weight, input_size, stride, padding, dilation, groups, mode):
    _check_output(grad_output, "grad_output", _out_shape(input_size, weight.shape, stride, padding, dilation, groups,
                                                         ("input_size", "weight")))
    return weight.new_empty(input_size)


@torch.library.register_fake(lib.qualname("conv2d_backward_weight"))
def _backward_weight_fake(grad_output, x, weight_size, stride, padding, dilation, groups, mode):
    _check_output(grad_output, "grad_output", _out_shape(x.shape, weight_size, stride, padding, dilation, groups,
                                                         ("x", "weight_size")))
    return x.new_empty(weight_size)


@torch.library.register_fake(lib.qualname("conv2d_backward_bias"))
def _backward_bias_fake(grad_output):
    return grad_output.new_empty((_shape4(grad_output.shape, "grad_output")[1],))


@torch.library.register_fake(lib.qualname("conv_transpose2d"))
def _transpose_fake(x, weight, bias, output_size, stride, padding, dilation, groups, mode):
    torch._check(x.dim() == 4 and weight.dim() == 4 and weight.shape[0] == x.shape[1],
                 lambda: f"weight must have x's channels in dimension 0 (C_in, C_out / groups, kH, kW), but has shape "
                 f"{list(weight.shape)} (x has shape {list(x.shape)})")
    _check_output(x, "x", _out_shape(output_size, weight.shape, stride, padding, dilation, groups,
                                     ("output_size", "weight")))
    _check_bias(bias, output_size[1])
    return x.new_empty(output_size)


def describe(x_size, w_size, stride=1, padding=0, dilation=1, groups=1, dtype=torch.float32):
    """The output shape cuDNN's descriptors give for this convolution (needs no GPU)."""
    geometry = _pairs(stride=stride, padding=padding, dilation=dilation)
    return tuple(lib.ops.describe(list(x_size), list(w_size), *geometry, groups,
                                  dtype == torch.float64))


def cache_stats() -> dict:
    """The plan cache's counters: hits, misses, evictions, size (plans held), capacity, and the
    largest workspace (bytes) a cached plan needs; then the launch cache's (CUDA graphs, see README):
    graph_hits (calls replayed), graph_captures, graph_failures (keys that run the plain call),
    graphs (held) and graphs_enabled."""
    (hits, misses, evictions, size, capacity, workspace, graph_hits, graph_captures, graph_failures, graphs,
     enabled) = lib.ops.cache_stats()
    return {"hits": hits, "misses": misses, "evictions": evictions, "size": size, "capacity": capacity,
            "max_workspace_bytes": workspace, "graph_hits": graph_hits, "graph_captures": graph_captures,
            "graph_failures": graph_failures, "graphs": graphs, "graphs_enabled": bool(enabled)}


def cache_clear() -> None:
    """Drop every cached plan and graph, and reset the counters."""
    lib.ops.cache_clear()


def set_graphs(enabled: bool) -> None:
    """Turn the launch cache on (the default) or off: on, a cached call repeated on the same buffers is
    captured into a CUDA graph on its second call and replayed with one launch after that."""
    lib.ops.set_graphs(bool(enabled))


def set_cache_capacity(capacity: int) -> None:
    """Keep at most `capacity` plans (least recently used evicted first)."""
    lib.ops.cache_set_capacity(int(capacity))


class Conv2d(Conv2dLayer):
    """Drop-in for torch.nn.Conv2d (zero padding, as numbers, "valid" or "same") through conv2d: torch.nn's
    signature, parameters, initialisation and print (grader.conv_args.Conv2dLayer). `mode` (an attribute,
    "benchmark" unless set) picks how cuDNN's algorithm is chosen, for the forward and the backward."""

    mode = "benchmark"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return conv2d(x, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups, mode=self.mode)


class ConvTranspose2d(ConvTranspose2dLayer):
    """Drop-in for torch.nn.ConvTranspose2d (zero padding) through conv_transpose2d, `output_size` included
    (grader.conv_args.ConvTranspose2dLayer); `mode` as Conv2d's."""

    mode = "benchmark"

    def forward(self, x: torch.Tensor, output_size=None) -> torch.Tensor:
        return conv_transpose2d(x, self.weight, self.bias, self.stride, self.padding,
                                self.output_padding_for(x, output_size), self.groups, self.dilation, mode=self.mode)
