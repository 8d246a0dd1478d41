"""07's default version (`default_version` in conv_transpose2d.py): the version conv_transpose2d runs
when none is named. 3 (Winograd) on every call version 3 accepts and where it pays, else 2.

The GPU grade reaches one of its edges (the winograd group's calls past version 3's 2^31-element
transforms, each spatial dimension's tile count at the edge alone); where Winograd pays (8 input
channels a group or more) is a speed rule no graded check
sees. What the kernels compute is graded there: the gather, implicit_gemm and winograd groups lose
their points to the known-wrong variants gather_weight_offset_by_output_group,
gemm_phase_taps_from_tap_0, winograd_output_transform_row_2, winograd_input_tiles_unpadded and
winograd_padding_past_2_not_cropped (tests/known_wrong/ex07_conv_transpose2d.py).

The exercise's Python module is loaded with tests/test_conv_autograd.py's CPU stand-in for the
compiled op, so the function tested is the one the GPU runs, with no build.
"""
from __future__ import annotations

import pytest
import torch

from tests.test_conv_autograd import _load, stand_in_07


@pytest.fixture(scope="module")
def default_version():
    # a namespace of its own: test_conv_autograd's stand-in may hold "course_test_ex07" in the same session
    module = _load("07_conv_transpose2d", "conv_transpose2d.py", stand_in_07("course_test_ex07_default_version"))
    return module.default_version


def empty(*shape):
    return torch.empty(*shape, device="meta")  # shapes only


def test_default_version_takes_winograd_exactly_where_version_3_applies(default_version):
    """3 on every call version 3 accepts and 2 elsewhere (the binding's refusals: kernel, stride,
    dilation, groups, transforms past 2^31 elements; and fewer than 8 input channels a group, where it
    is slower), and unreadable arguments handed to version 2, whose checks name them."""
    version = default_version
    x, w = empty(2, 16, 9, 10), empty(16, 4, 3, 3)
    assert version(x, w, 1, 1, 1, 1) == 3 and version(x, w, (1, 1), (0, 2), (1, 1), 2) == 3
    assert version(x, w, 2, 1, 1, 1) == 2 and version(x, w, (1, 2), 1, 1, 1) == 2
    assert version(x, w, 1, 1, 2, 1) == 2 and version(x, w, 1, 1, (1, 2), 1) == 2
    assert version(x, empty(16, 4, 3, 2), 1, 1, 1, 1) == 2 and version(x, empty(16, 4, 5, 5)) == 2
    assert version(empty(1, 8 * 1820, 1, 1), empty(8 * 1820, 1, 3, 3), groups=1820) == 3
    assert version(empty(1, 8 * 1821, 1, 1), empty(8 * 1821, 1, 3, 3), groups=1821) == 2
    # and only where it pays: 8 input channels a group or more
    assert version(empty(2, 7, 9, 9), empty(7, 64, 3, 3)) == 2 and version(empty(2, 8, 9, 9), empty(8, 1, 3, 3)) == 3
    assert version(empty(2, 64, 9, 9), empty(64, 1, 3, 3), groups=64) == 2
    assert version(empty(2, 64, 9, 9), empty(64, 1, 3, 3), groups=8) == 3
    assert version(empty(2, 64, 9, 9), empty(64, 1, 3, 3), groups=0) == 2  # the binding names groups
    assert version(empty(16, 9), w) == 2 and version(x, empty(16, 4)) == 2  # the binding names them
    assert version(x, w, padding=(1, 1, 1)) == 2
    # 36 channels x tiles: just under and at 2^31 elements
    big = empty(2**31 // 36 // 64 // 16 + 1, 64, 16, 16)  # outputs 16 x 16 (padding 1): 16 tiles an image
    small = empty(big.shape[0] - 2, 64, 16, 16)
    wb = empty(64, 64, 3, 3)
    assert version(small, wb, padding=1) == 3 and version(big, wb, padding=1) == 2


def test_the_graded_calls_past_winograd_sit_on_the_edge_in_each_dimension(default_version):
    """The winograd group's calls past version 3's limit (ex07_conv_transpose2d.PAST_WINOGRAD): version 2 for
    each, while an estimate that counts 5 rows, or 5 columns, as one tile of 4 would fall under 2^31 and
    choose version 3, which refuses them: each dimension's tile count is varied alone."""
    from grader.specs.ex07_conv_transpose2d import PAST_WINOGRAD

    assert {(h, w) for _, _, h, w in PAST_WINOGRAD} == {(5, 1), (1, 5)}
    for n, cin, h, w in PAST_WINOGRAD:
        weight = empty(cin, cin, 3, 3)  # 2 groups: 32 output channels
        assert default_version(empty(n, cin, h, w), weight, 1, 1, 1, 2) == 2
        tiles = n * -(-h // 4) * -(-w // 4)
        assert 36 * 2 * cin * tiles >= 2**31 - 1 > 36 * 2 * cin * n  # one tile an image would fit
