"""The convolution exercises' argument spelling, shared by their Python wrappers (06 to 10) as the course's
C++ headers are by their kernels: a (height, width) pair from an int or two values, PyTorch's padding
words, and their drop-in module classes' construction and print (Conv2dLayer, ConvTranspose2dLayer: each
exercise's subclass runs its own op). The students' files import it as `grader.conv_args`.

PyTorch's padding words (F.conv2d, torch.nn.Conv2d): "valid" is no padding; "same" (stride 1 only) gives
an output as large as x, d (k - 1) zeros along each axis, half before x and the rest after it. The
course's ops take one padding for both sides of an axis, as cuDNN does; where d (k - 1) is odd, x gets
the one more row or column of zeros after its end first (`F.pad`: a fill and a copy), as PyTorch gives
cuDNN.
"""
from __future__ import annotations

import math

import torch

PADDING_WORDS = ("valid", "same")


def pair(v, name: str | None = None) -> list[int]:
    """An int means the same value for height and width; two values pass through (the op checks their
    count and range and names the argument). A word is refused here, naming `name` where given: where
    the exercise takes PyTorch's padding words, `resolve_padding` has turned them into numbers first."""
    if isinstance(v, str):
        raise ValueError(f"{name or 'stride, padding and dilation'} must be an int or (height, width) numbers, "
                         f"but is {v!r}")
    return [int(v), int(v)] if isinstance(v, int) else [int(e) for e in v]


def check_padding_word(padding, stride) -> None:
    """torch.nn.Conv2d's refusals of a padding given as a word (a construction fails as PyTorch's does)."""
    if isinstance(padding, str):
        if padding not in PADDING_WORDS:
            raise ValueError(f"padding must be numbers or one of {PADDING_WORDS}, but is {padding!r}")
        if padding == "same" and pair(stride, "stride") != [1, 1]:
            raise ValueError("padding='same' is not supported for strided convolutions")


def resolve_padding(x: torch.Tensor, weight: torch.Tensor, stride, padding, dilation) -> tuple[torch.Tensor, list[int]]:
    """x and the padding an op of the course takes (the same on both sides of an axis), for a padding as
    F.conv2d takes it: numbers, "valid" or "same" (see the module's docstring)."""
    if not isinstance(padding, str):
        return x, pair(padding, "padding")
    check_padding_word(padding, stride)
    if padding == "valid" or not (isinstance(x, torch.Tensor) and isinstance(weight, torch.Tensor)
                                  and weight.dim() == 4):
        return x, [0, 0]  # a misshapen argument: the op's own check names it
    total = [d * (k - 1) for d, k in zip(pair(dilation, "dilation"), weight.shape[2:])]
    if total[0] % 2 or total[1] % 2:
        x = torch.nn.functional.pad(x, (0, total[1] % 2, 0, total[0] % 2))
    return x, [t // 2 for t in total]


# --- the drop-in module classes' common part ------------------------------------------------------

class _ConvLayer(torch.nn.Module):
    """torch.nn.Conv2d's and torch.nn.ConvTranspose2d's construction, parameters, default initialisation
    and print (extra_repr), for the exercises' drop-in classes (zero padding only, as their ops); each
    exercise's subclass gives `forward`, through its own op."""

    transposed = False

    def _build(self, in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias, padding_mode,
               device, dtype, output_padding=0) -> None:
        if in_channels % groups or out_channels % groups:
            raise ValueError(f"groups ({groups}) must divide in_channels ({in_channels}) and out_channels ({out_channels})")
        if padding_mode != "zeros":
            raise ValueError(f"padding_mode: only 'zeros' is supported, not {padding_mode!r}")
        kh, kw = pair(kernel_size, "kernel_size")
        if self.transposed:
            self.padding = pair(padding, "padding")
        else:
            check_padding_word(padding, stride)
            self.padding = padding if isinstance(padding, str) else pair(padding, "padding")
        self.stride, self.dilation = pair(stride, "stride"), pair(dilation, "dilation")
        self.output_padding = pair(output_padding, "output_padding")
        self.groups, self.padding_mode = groups, padding_mode
        factory = {"device": device, "dtype": dtype}
        shape = (in_channels, out_channels // groups) if self.transposed else (out_channels, in_channels // groups)
        self.weight = torch.nn.Parameter(torch.empty(*shape, kh, kw, **factory))
        self.bias = torch.nn.Parameter(torch.empty(out_channels, **factory)) if bias else None
        # torch.nn's default initialisation (kaiming_uniform_ with a = sqrt(5)): uniform within 1 / sqrt(fan_in),
        # fan_in = weight.shape[1] * kh * kw
        bound = 1 / math.sqrt(shape[1] * kh * kw)
        torch.nn.init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            torch.nn.init.uniform_(self.bias, -bound, bound)

    def extra_repr(self) -> str:
        """As torch.nn's (what print(model) shows): the sizes and stride, then each setting off its default."""
        a, b = self.weight.shape[:2]  # (out, in / groups), transposed (in, out / groups)
        cin, cout = (a, b * self.groups) if self.transposed else (b * self.groups, a)
        s = f"{cin}, {cout}, kernel_size={tuple(self.weight.shape[2:])}, stride={tuple(self.stride)}"
        if isinstance(self.padding, str) or any(self.padding):
            s += f", padding={self.padding if isinstance(self.padding, str) else tuple(self.padding)}"
        if tuple(self.dilation) != (1, 1):
            s += f", dilation={tuple(self.dilation)}"
        if any(self.output_padding):
            s += f", output_padding={tuple(self.output_padding)}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        return s if self.bias is not None else s + ", bias=False"


class Conv2dLayer(_ConvLayer):
    """torch.nn.Conv2d's signature (padding as numbers, "valid" or "same"): weight (out_channels,
    in_channels / groups, kh, kw). A subclass's forward(x) calls its conv2d with self's settings."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0, dilation=1,
                 groups: int = 1, bias: bool = True, padding_mode: str = "zeros", device=None, dtype=None):
        super().__init__()
        self._build(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias, padding_mode,
                    device, dtype)


class ConvTranspose2dLayer(_ConvLayer):
    """torch.nn.ConvTranspose2d's signature: weight (in_channels, out_channels / groups, kh, kw). A
    subclass's forward(x, output_size=None) calls its conv_transpose2d with `output_padding_for(x,
    output_size)`."""

    transposed = True

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0, output_padding=0,
                 groups: int = 1, bias: bool = True, dilation=1, padding_mode: str = "zeros", device=None, dtype=None):
        super().__init__()
        self._build(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias, padding_mode,
                    device, dtype, output_padding)

    def output_padding_for(self, x: torch.Tensor, output_size=None) -> list[int]:
        """The module's output_padding, or, given `output_size` ((H, W), or the whole output shape) as
        torch.nn.ConvTranspose2d takes it, the one that gives that size: a stride s leaves s sizes an output
        could have (output_padding 0 to s - 1 more than the smallest), and `output_size` must be one of them."""
        if output_size is None:
            return self.output_padding
        size = [int(v) for v in output_size]
        if len(size) == x.dim():  # the whole shape: its height and width
            size = size[-2:]
        if len(size) != 2:
            raise ValueError(f"output_size must be (height, width) or the output's whole shape, but is "
                             f"{list(output_size)}")
        kernel = self.weight.shape[2:]
        smallest = [(x.shape[2 + d] - 1) * self.stride[d] - 2 * self.padding[d]
                    + self.dilation[d] * (kernel[d] - 1) + 1 for d in range(2)]
        largest = [smallest[d] + self.stride[d] - 1 for d in range(2)]
        if any(not smallest[d] <= size[d] <= largest[d] for d in range(2)):
            raise ValueError(f"output_size {size}: the sizes this input ({list(x.shape[2:])}) can give range from "
                             f"{smallest} to {largest}")
        return [size[d] - smallest[d] for d in range(2)]
