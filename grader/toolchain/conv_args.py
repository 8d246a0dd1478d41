"""The convolution exercises' argument spelling, shared by their Python wrappers (06 to 10) as the course's
C++ headers are by their kernels: a (height, width) pair from an int or two values, and PyTorch's padding
words. The students' files import it as `grader.conv_args`.

PyTorch's padding words (F.conv2d, torch.nn.Conv2d): "valid" is no padding; "same" (stride 1 only) gives
an output as large as x, d (k - 1) zeros along each axis, half before x and the rest after it. The
course's ops take one padding for both sides of an axis, as cuDNN does; where d (k - 1) is odd, x gets
the one more row or column of zeros after its end first (`F.pad`: a fill and a copy), as PyTorch gives
cuDNN.
"""
from __future__ import annotations

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
