"""06's depthwise tile plan (the host function `depthwise_tile` of solutions/06_conv2d/conv2d.cu) on
the depthwise layers of MobileNetV2: each gets a plan that fits in shared memory, blocks that carry
enough outputs, and row tiles of nearly equal height.

The kernels' index arithmetic is graded on the GPU: 06's direct, implicit_gemm and depthwise groups
(grouped and depthwise cases in each) lose their points to the known-wrong variants groups_ignored,
gemm_group_filters_of_group_0 and depthwise_halo_dropped (tests/known_wrong/ex06_conv2d.py), and the
grade asserts that the launcher reaches `v2.depthwise_tile`. The planner's speed rules, and layers of
a real network's sizes, no graded check sees: they are checked here. `depthwise_tile` is compiled with
the kernels and no op exposes it, so this file holds a Python copy of it (tests/test_conv_autograd.py
plans MobileNet's weight-gradient calls with it too). The C++ lines it copies, and the constants they
read, are asserted verbatim in the solution (test_the_copy_is_the_solutions_planner): a change there
fails until the copy follows.
"""
from __future__ import annotations

from grader.env import REPO

CONV = (REPO / "solutions" / "06_conv2d" / "conv2d.cu").read_text()

# conv2d.cu's constants the plan reads (pinned below)
kDwThreads, kDwRows, kDwSmemBytes, kDwOutputsPerBlock = 256, 4, 24576, 2048


def ceil_div(a, b):
    return -(-a // b)


def out_size(size, k, stride, pad, dil):
    return (size + 2 * pad - dil * (k - 1) - 1) // stride + 1


class Shape:
    """Conv2dShape."""

    def __init__(self, n, cin, h, w, cout, kh, kw, ho, wo, stride, padding, dilation, groups):
        self.n, self.cin, self.h, self.w, self.cout, self.kh, self.kw = n, cin, h, w, cout, kh, kw
        self.ho, self.wo = ho, wo
        (self.stride_h, self.stride_w), (self.pad_h, self.pad_w), (self.dil_h, self.dil_w) = stride, padding, dilation
        self.groups = groups


def depthwise_tile(s, elem_bytes):
    """depthwise_tile: ((planes, rows, cols, in_rows, in_cols, row_tiles), grid), or None where it
    returns false (the GEMM takes the call)."""
    cap = kDwSmemBytes // elem_bytes
    planes = s.n * s.cout

    def in_rows(rows):
        return (rows - 1) * s.stride_h + s.dil_h * (s.kh - 1) + 1

    def in_cols(cols):
        return (cols - 1) * s.stride_w + s.dil_w * (s.kw - 1) + 1

    cols = s.wo if s.wo <= 128 else 64
    rows = min(s.ho, max(1, kDwOutputsPerBlock // cols))
    while True:
        fit, one = cap // in_cols(cols), in_rows(1)
        if fit >= one:
            rows = min(rows, (fit - one) // s.stride_h + 1)
            break
        if cols == 1:
            return None
        cols = (cols + 1) // 2
    tiles_down = ceil_div(s.ho, rows)
    rows = ceil_div(s.ho, tiles_down)
    whole_groups = ceil_div(rows, kDwRows) * kDwRows
    if ceil_div(s.ho, whole_groups) == tiles_down and in_rows(whole_groups) * in_cols(cols) <= cap:
        rows = min(whole_groups, s.ho)
    per_block = 1
    if rows == s.ho and cols == s.wo:
        per_block = max(1, kDwOutputsPerBlock // (rows * cols))
        per_block = min(per_block, cap // (in_rows(rows) * in_cols(cols)), planes)
    row_tiles = ceil_div(s.ho, rows)
    grid = (ceil_div(planes, per_block) * row_tiles, ceil_div(s.wo, cols))
    if grid[0] >= 2**31 - 1 or grid[1] > 65535:
        return None
    return (per_block, rows, cols, in_rows(rows), in_cols(cols), row_tiles), grid


def depthwise_path(s, elem_bytes):
    """launch_depthwise's choice: "direct" (a 3x3 filter), "tile" (its tile fits), or None (the GEMM)."""
    if s.kh == 3 and s.kw == 3:
        return "direct"
    return "tile" if depthwise_tile(s, elem_bytes) is not None else None


# The C++ the copies above follow, line by line (leading spaces and trailing comments aside)
SOURCE_LINES = (
    "constexpr int kDwThreads = 256;",
    "constexpr int kDwRows = 4;",
    "constexpr int kDwSmemBytes = 24576;",
    "constexpr int64_t kDwOutputsPerBlock = 2048;",
    "} else if (version == 2 && s.groups == s.cin && launch_depthwise(x, weight, bias, y, s, stream)) {",
    "if (s.kh == 3 && s.kw == 3) {",
    "if (!depthwise_tile(s, sizeof(scalar_t), t, grid)) return false;",
    "const int64_t cap = kDwSmemBytes / elem_bytes;",
    "const int64_t planes = s.n * s.cout;",
    "auto in_rows = [&](int64_t rows) { return (rows - 1) * s.stride_h + int64_t(s.dil_h) * (s.kh - 1) + 1; };",
    "auto in_cols = [&](int64_t cols) { return (cols - 1) * s.stride_w + int64_t(s.dil_w) * (s.kw - 1) + 1; };",
    "int64_t cols = s.wo <= 128 ? s.wo : 64;",
    "int64_t rows = std::min<int64_t>(s.ho, std::max<int64_t>(1, kDwOutputsPerBlock / cols));",
    "const int64_t fit = cap / in_cols(cols), one = in_rows(1);",
    "if (fit >= one) {",
    "rows = std::min(rows, (fit - one) / s.stride_h + 1);",
    "if (cols == 1) return false;",
    "cols = (cols + 1) / 2;",
    "const int64_t tiles_down = course::ceil_div<int64_t>(s.ho, rows);",
    "rows = course::ceil_div<int64_t>(s.ho, tiles_down);",
    "const int64_t whole_groups = course::ceil_div<int64_t>(rows, kDwRows) * kDwRows;",
    "if (course::ceil_div<int64_t>(s.ho, whole_groups) == tiles_down"
    " && in_rows(whole_groups) * in_cols(cols) <= cap) {",
    "rows = std::min<int64_t>(whole_groups, s.ho);",
    "int64_t per_block = 1;",
    "if (rows == s.ho && cols == s.wo) {",
    "per_block = std::max<int64_t>(1, kDwOutputsPerBlock / (rows * cols));",
    "per_block = std::min({per_block, cap / (in_rows(rows) * in_cols(cols)), planes});",
    "const int64_t row_tiles = course::ceil_div<int64_t>(s.ho, rows);",
    "const int64_t gx = course::ceil_div<int64_t>(planes, per_block) * row_tiles,"
    " gy = course::ceil_div<int64_t>(s.wo, cols);",
    "if (gx >= INT32_MAX || gy > 65535) return false;",
    "t = {static_cast<int>(per_block), static_cast<int>(rows), static_cast<int>(cols),"
    " static_cast<int>(in_rows(rows)),",
    "static_cast<int>(in_cols(cols)), static_cast<int>(row_tiles)};",
)


def test_the_copy_is_the_solutions_planner():
    """The lines depthwise_tile and depthwise_path copy are still conv2d.cu's (a change there must change them)."""
    for line in SOURCE_LINES:
        assert line in CONV, line


def test_depthwise_tiles_of_mobilenet_layers_fit():
    """MobileNetV2's depthwise layers (batch 32) take the direct kernel (3x3); with 5x5 filters (as
    EfficientNet's) the tile kernel: a plan for each, inside shared memory, and blocks that carry enough
    outputs (at least a quarter of a pass of the 256 threads: a plane cut into two equal row tiles holds
    about half of the largest tile that fits), and row tiles of nearly equal height (the last more than
    half as tall as the others: 26 + 26 + 4 rows was slow)."""
    from grader.bench import model_shapes
    seen = 0
    for layer, _ in model_shapes.unique(model_shapes.mobilenet_v2()):
        if not isinstance(layer, model_shapes.Conv) or layer.groups == 1:
            continue
        ho, wo = layer.out_hw
        s = Shape(layer.n, layer.cin, layer.h, layer.w, layer.cout, layer.k, layer.k, ho, wo, (layer.stride,) * 2,
                  (layer.padding,) * 2, (1, 1), layer.groups)
        assert depthwise_path(s, 4) == "direct", layer
        s = Shape(layer.n, layer.cin, layer.h, layer.w, layer.cout, 5, 5, ho, wo, (layer.stride,) * 2, (2, 2), (1, 1),
                  layer.groups)
        for elem in (4, 8):
            plan = depthwise_tile(s, elem)
            assert plan is not None, layer
            (tp, rows, cols, in_rows, in_cols, _), grid = plan
            assert tp * in_rows * in_cols <= kDwSmemBytes // elem
            assert tp * rows * cols >= kDwThreads * kDwRows // 4 or tp == s.n * s.cout, (layer, plan)
            last = ho - (ceil_div(ho, rows) - 1) * rows
            assert 2 * last > rows, (layer, plan)
        seen += 1
    assert seen >= 8
