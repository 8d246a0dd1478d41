"""Exercises 06 and 07 with groups, without a GPU: the index arithmetic of every kernel version (06's
direct kernel, implicit GEMM and depthwise kernel with its host-side tile choice; 07's gather and
implicit GEMM), transliterated into Python over flat arrays, as the kernels address them. On small
integer tensors every sum is exact, so each model must reassemble F.conv2d / F.conv_transpose2d with
groups exactly, with every output written once, and the depthwise kernel must stay inside its shared
tile (every element it reads was loaded, none past the static buffer).

If the kernels' arithmetic changes, change the transliteration with it (this test is only as good as that).
"""
from __future__ import annotations

import math

import re

import pytest
import torch
import torch.nn.functional as F

from grader.env import REPO

CONV = (REPO / "solutions" / "06_conv2d" / "conv2d.cu").read_text()
TRANSPOSED = (REPO / "solutions" / "07_conv_transpose2d" / "conv_transpose2d.cu").read_text()


def const(source: str, name: str) -> int:
    m = re.search(rf"constexpr int(?:64_t)? {name} = (\d+);", source)
    assert m, name
    return int(m.group(1))


BN6, BK6, TM6, TN6 = (const(CONV, n) for n in ("BN", "BK", "TM", "TN"))
kDwThreads, kDwRows = const(CONV, "kDwThreads"), const(CONV, "kDwRows")
kDwSmemBytes, kDwOutputsPerBlock = const(CONV, "kDwSmemBytes"), const(CONV, "kDwOutputsPerBlock")
m7 = re.search(r"constexpr int BM = (\d+), BN = (\d+), BK = (\d+), kGemmThreads = (\d+);", TRANSPOSED)
BM7, BN7, BK7, kGemmThreads7 = (int(v) for v in m7.groups())


def ceil_div(a, b):
    return -(-a // b)


class Shape:
    """Conv2dShape / ConvTranspose2dShape."""

    def __init__(self, n, cin, h, w, cout, kh, kw, ho, wo, stride, padding, dilation, groups):
        self.n, self.cin, self.h, self.w, self.cout, self.kh, self.kw, self.ho, self.wo = n, cin, h, w, cout, kh, kw, ho, wo
        (self.stride_h, self.stride_w), (self.pad_h, self.pad_w), (self.dil_h, self.dil_w) = stride, padding, dilation
        self.groups = groups


def ints(g, *shape):
    return torch.randint(-3, 4, shape, generator=g, dtype=torch.int64)


def flat(t):
    return [int(v) for v in t.reshape(-1)]


class Out:
    """y, each element written exactly once."""

    def __init__(self, size):
        self.v = [None] * size

    def __setitem__(self, i, value):
        assert 0 <= i < len(self.v), f"store out of bounds: {i} of {len(self.v)}"
        assert self.v[i] is None, f"y[{i}] written twice"
        self.v[i] = value

    def tensor(self, shape):
        assert all(v is not None for v in self.v), f"{sum(v is None for v in self.v)} outputs never written"
        return torch.tensor(self.v, dtype=torch.int64).reshape(shape)


# ------------------------------------------------------------------------------------------- 06
def load_padded(x, plane, ih, iw, h, w):
    return x[plane + ih * w + iw] if 0 <= ih < h and 0 <= iw < w else 0


def conv2d_kernel1(x, wt, bias, s):
    total = s.n * s.cout * s.ho * s.wo
    y = Out(total)
    for i in range(total):
        ow = i % s.wo
        t = i // s.wo
        oh = t % s.ho
        t //= s.ho
        co = t % s.cout
        n = t // s.cout
        cin_g, cout_g = s.cin // s.groups, s.cout // s.groups
        g = co // cout_g
        xn = (n * s.cin + g * cin_g) * s.h * s.w
        wc = co * cin_g * s.kh * s.kw
        acc = bias[co] if bias else 0
        for ci in range(cin_g):
            plane = xn + ci * s.h * s.w
            for kh in range(s.kh):
                ih = oh * s.stride_h - s.pad_h + kh * s.dil_h
                for kw in range(s.kw):
                    iw = ow * s.stride_w - s.pad_w + kw * s.dil_w
                    acc += load_padded(x, plane, ih, iw, s.h, s.w) * wt[wc + (ci * s.kh + kh) * s.kw + kw]
        y[i] = acc
    return y


def conv2d_kernel2(x, wt, bias, s, BM):
    """Every block (bx, by, group) of the implicit GEMM, each thread's loads, the outer products of
    the shared tiles as threads (tm, tn) read them, and the epilogue's stores (vector or scalar)."""
    kBPerThread = BK6 * BN6 // BM
    hw_out, hw_in = s.ho * s.wo, s.h * s.w
    M = s.n * hw_out
    cin_g, cout_g = s.cin // s.groups, s.cout // s.groups
    K = cin_g * s.kh * s.kw
    y = Out(s.n * s.cout * hw_out)
    grid = (ceil_div(M, BM), ceil_div(cout_g, BN6), s.groups)
    for group in range(grid[2]):
        for by in range(grid[1]):
            for bx in range(grid[0]):
                m0, co0 = bx * BM, by * BN6
                th = []
                for tid in range(BM):
                    m_load = m0 + tid
                    st = {"m_ok": m_load < M, "xn": 0, "ih0": 0, "iw0": 0, "c_off": 0, "kh": 0, "kw": 0}
                    if st["m_ok"]:
                        n = m_load // hw_out
                        p = m_load - n * hw_out
                        oh, ow = p // s.wo, p % s.wo
                        st["xn"] = (n * s.cin + group * cin_g) * hw_in
                        st["ih0"], st["iw0"] = oh * s.stride_h - s.pad_h, ow * s.stride_w - s.pad_w
                    st["b_co"] = tid // (BK6 // kBPerThread)
                    st["b_k"] = (tid % (BK6 // kBPerThread)) * kBPerThread
                    st["co_ok"] = co0 + st["b_co"] < cout_g
                    st["w_row"] = (group * cout_g + co0 + st["b_co"]) * K
                    th.append(st)
                acc = [[[0] * TN6 for _ in range(TM6)] for _ in range(BM)]
                for kt in range(ceil_div(K, BK6)):
                    k0 = kt * BK6
                    As = [[None] * BM for _ in range(BK6)]
                    Bs = [[None] * BN6 for _ in range(BK6)]
                    for tid, st in enumerate(th):  # load_tile + store_tile
                        for j in range(BK6):
                            ok = st["m_ok"] and k0 + j < K
                            As[j][tid] = load_padded(x, st["xn"] + st["c_off"], st["ih0"] + st["kh"] * s.dil_h,
                                                     st["iw0"] + st["kw"] * s.dil_w, s.h, s.w) if ok else 0
                            st["kw"] += 1
                            if st["kw"] == s.kw:
                                st["kw"] = 0
                                st["kh"] += 1
                                if st["kh"] == s.kh:
                                    st["kh"] = 0
                                    st["c_off"] += hw_in
                        for j in range(kBPerThread):
                            k = k0 + st["b_k"] + j
                            Bs[st["b_k"] + j][st["b_co"]] = wt[st["w_row"] + k] if st["co_ok"] and k < K else 0
                    for tid in range(BM):
                        tn, tm = tid % (BN6 // TN6), tid // (BN6 // TN6)
                        for kk in range(BK6):
                            a = [As[kk][tm * 4 + i] for i in range(4)] + [As[kk][BM // 2 + tm * 4 + i] for i in range(4)]
                            b = [Bs[kk][tn * 4 + j] for j in range(4)] + [Bs[kk][BN6 // 2 + tn * 4 + j] for j in range(4)]
                            for i in range(TM6):
                                for j in range(TN6):
                                    acc[tid][i][j] += a[i] * b[j]
                vec_store = hw_out % 4 == 0
                for tid in range(BM):
                    tn, tm = tid % (BN6 // TN6), tid // (BN6 // TN6)
                    for half in range(2):
                        m = m0 + half * (BM // 2) + tm * 4
                        if m >= M:
                            continue
                        for j in range(TN6):
                            co_in_group = co0 + (tn * 4 + j if j < 4 else BN6 // 2 + tn * 4 + j - 4)
                            if co_in_group >= cout_g:
                                continue
                            co = group * cout_g + co_in_group
                            b = bias[co] if bias else 0
                            if vec_store:
                                n = m // hw_out
                                for r in range(4):
                                    y[(n * s.cout + co) * hw_out + (m - n * hw_out) + r] = acc[tid][half * 4 + r][j] + b
                            else:
                                for r in range(4):
                                    mr = m + r
                                    if mr >= M:
                                        break
                                    n = mr // hw_out
                                    y[(n * s.cout + co) * hw_out + (mr - n * hw_out)] = acc[tid][half * 4 + r][j] + b
    return y


def depthwise_tile(s, elem_bytes):
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
    tiles_down = ceil_div(s.ho, rows)  # equal row tiles, whole kDwRows groups where that adds no tile
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


# the direct kernel's outputs per thread, as launch_depthwise picks them
DIRECT_COLS_RULE = "const bool four = s.stride_w == 1 || s.wo <= 8;"
assert DIRECT_COLS_RULE in CONV


def depthwise_path(s, elem_bytes):
    """launch_depthwise's choice: "direct" (a 3x3 filter), "tile" (its tile fits), or None (the GEMM)."""
    if s.kh == 3 and s.kw == 3:
        return "direct"
    return "tile" if depthwise_tile(s, elem_bytes) is not None else None


def conv2d_depthwise(x, wt, bias, s, elem_bytes=4):
    """The depthwise path of version 2: the kernel launch_depthwise takes."""
    path = depthwise_path(s, elem_bytes)
    assert path is not None
    return conv2d_depthwise_direct(x, wt, bias, s) if path == "direct" else conv2d_depthwise_tile(x, wt, bias, s, elem_bytes)


def conv2d_depthwise_direct(x, wt, bias, s):
    """The direct 3x3 kernel: every item (plane, row, strip) of the grid-stride loop, in 32-bit arithmetic."""
    k = 3
    cols = 4 if s.stride_w == 1 or s.wo <= 8 else 2
    strips = ceil_div(s.wo, cols)
    items = s.n * s.cout * s.ho * strips
    assert items <= 2**31 - 1  # the 32-bit branch; the 64-bit one computes the same split
    mult = s.cout // s.groups
    hw = s.h * s.w
    y = Out(s.n * s.cout * s.ho * s.wo)
    for item in range(items):
        row = item // strips
        plane = row // s.ho
        strip, oh = item - row * strips, row - plane * s.ho
        co = plane % s.cout
        in_plane = plane if mult == 1 else (plane // s.cout) * s.cin + co // mult
        ow0 = strip * cols
        ih0, iw0 = oh * s.stride_h - s.pad_h, ow0 * s.stride_w - s.pad_w
        b = bias[co] if bias else 0
        acc = [b] * cols
        for kh in range(k):
            ih = ih0 + kh * s.dil_h
            if ih < 0 or ih >= s.h:
                continue
            for kw in range(k):
                wv = wt[co * k * k + kh * k + kw]
                for j in range(cols):
                    iw = iw0 + j * s.stride_w + kw * s.dil_w
                    if 0 <= iw < s.w:
                        acc[j] += x[in_plane * hw + ih * s.w + iw] * wv
        for j in range(cols):
            if ow0 + j < s.wo:
                y[(plane * s.ho + oh) * s.wo + ow0 + j] = acc[j]
    return y


def conv2d_depthwise_tile(x, wt, bias, s, elem_bytes=4):
    """The tile kernel: each block's shared tile as its threads fill it, then every thread's units."""
    plan = depthwise_tile(s, elem_bytes)
    assert plan is not None
    (tp, trows, tcols, tin_rows, tin_cols, row_tiles), grid = plan
    cap = kDwSmemBytes // elem_bytes
    kh_n, kw_n = s.kh, s.kw
    planes = s.n * s.cout
    mult = s.cout // s.groups
    hw = s.h * s.w
    tile_hw = tin_rows * tin_cols
    y = Out(s.n * s.cout * s.ho * s.wo)
    for by in range(grid[1]):
        for bx in range(grid[0]):
            plane_tile = bx // row_tiles
            plane0 = plane_tile * tp
            n0 = plane0 // s.cout
            co0 = plane0 - n0 * s.cout
            oh0, ow0 = (bx - plane_tile * row_tiles) * trows, by * tcols
            ih0, iw0 = oh0 * s.stride_h - s.pad_h, ow0 * s.stride_w - s.pad_w
            tile = [None] * cap
            for tid in range(kDwThreads):
                p = tid // tile_hw
                rem = tid - p * tile_hw
                r = rem // tin_cols
                c = rem - r * tin_cols
                step_p = kDwThreads // tile_hw
                step_rem = kDwThreads - step_p * tile_hw
                step_r = step_rem // tin_cols
                step_c = step_rem - step_r * tin_cols
                for e in range(tid, tp * tile_hw, kDwThreads):
                    assert (p * tin_rows + r) * tin_cols + c == e, "the carried (p, r, c) is not e's"
                    ih, iw = ih0 + r, iw0 + c
                    v = 0
                    if plane0 + p < planes and 0 <= ih < s.h and 0 <= iw < s.w:
                        in_plane = plane0 + p
                        if mult != 1:
                            q = co0 + p
                            in_plane = (n0 + q // s.cout) * s.cin + (q % s.cout) // mult
                        v = x[in_plane * hw + ih * s.w + iw]
                    assert e < cap and tile[e] is None
                    tile[e] = v
                    c += step_c
                    r += step_r
                    p += step_p
                    if c >= tin_cols:
                        c -= tin_cols
                        r += 1
                    if r >= tin_rows:
                        r -= tin_rows
                        p += 1
            row_groups = ceil_div(trows, kDwRows)
            units = tp * row_groups * tcols
            for tid in range(kDwThreads):
                for u in range(tid, units, kDwThreads):
                    col, pg = u % tcols, u // tcols
                    p = pg // row_groups
                    r0 = (pg - p * row_groups) * kDwRows
                    ow = ow0 + col
                    if plane0 + p >= planes or ow >= s.wo:
                        continue
                    co = (co0 + p) % s.cout
                    nrows = min(kDwRows, trows - r0)
                    b = bias[co] if bias else 0
                    acc = [b] * kDwRows
                    wp = co * kh_n * kw_n
                    tbase = p * tile_hw + r0 * s.stride_h * tin_cols + col * s.stride_w
                    row_step = s.stride_h * tin_cols
                    for kh in range(kh_n):
                        for kw in range(kw_n):
                            wv = wt[wp + kh * kw_n + kw]
                            tk = tbase + kh * s.dil_h * tin_cols + kw * s.dil_w
                            for j in range(kDwRows):
                                if j < nrows:
                                    idx = tk + j * row_step
                                    assert 0 <= idx < tp * tile_hw and tile[idx] is not None, "read outside the tile"
                                    acc[j] += tile[idx] * wv
                    for j in range(kDwRows):
                        oh = oh0 + r0 + j
                        if j < nrows and oh < s.ho:
                            y[(plane0 + p) * s.ho * s.wo + oh * s.wo + ow] = acc[j]
    return y


def out_size(size, k, stride, pad, dil):
    return (size + 2 * pad - dil * (k - 1) - 1) // stride + 1


# (n, cin, h, w, cout, kh, kw, stride, padding, dilation, groups)
CONV_CASES = [
    (2, 6, 7, 9, 6, 3, 3, (1, 1), (1, 1), (1, 1), 6),  # depthwise
    (2, 4, 9, 7, 8, 3, 3, (2, 2), (1, 1), (1, 1), 4),  # depthwise, channel multiplier 2
    (1, 16, 5, 6, 16, 3, 3, (1, 1), (1, 1), (1, 1), 4),  # ResNeXt-like: 4 channels per group
    (3, 9, 5, 4, 6, 1, 1, (1, 1), (0, 0), (1, 1), 3),  # grouped 1x1
    (2, 6, 11, 8, 10, 3, 5, (2, 1), (1, 2), (1, 2), 2),  # asymmetric
    (1, 4, 6, 6, 130, 3, 3, (1, 1), (1, 1), (1, 1), 2),  # more than one channel tile per group
    (2, 5, 6, 7, 7, 2, 3, (1, 2), (0, 1), (2, 1), 1),  # dense
]


def conv_case(case, seed=0):
    n, cin, h, w, cout, kh, kw, stride, padding, dilation, groups = case
    g = torch.Generator().manual_seed(seed)
    x, wt, b = ints(g, n, cin, h, w), ints(g, cout, cin // groups, kh, kw), ints(g, cout)
    ho, wo = (out_size(sz, k, st, p, d) for sz, k, st, p, d in zip((h, w), (kh, kw), stride, padding, dilation))
    s = Shape(n, cin, h, w, cout, kh, kw, ho, wo, stride, padding, dilation, groups)
    expected = F.conv2d(x, wt, b, stride, padding, dilation, groups)
    return s, x, wt, b, expected


@pytest.mark.parametrize("case", CONV_CASES, ids=lambda c: f"{c[0]}x{c[1]}x{c[2]}x{c[3]}-{c[4]}-g{c[10]}")
def test_conv2d_direct_reassembles_grouped_convolution(case):
    s, x, wt, b, expected = conv_case(case)
    y = conv2d_kernel1(flat(x), flat(wt), flat(b), s)
    assert torch.equal(y.tensor(expected.shape), expected)


@pytest.mark.parametrize("BM", (64, 128))
@pytest.mark.parametrize("case", CONV_CASES, ids=lambda c: f"{c[0]}x{c[1]}x{c[2]}x{c[3]}-{c[4]}-g{c[10]}")
def test_conv2d_implicit_gemm_reassembles_grouped_convolution(case, BM):
    s, x, wt, b, expected = conv_case(case, seed=1)
    y = conv2d_kernel2(flat(x), flat(wt), flat(b), s, BM)
    assert torch.equal(y.tensor(expected.shape), expected)


DEPTHWISE_CASES = [  # 3x3: the direct kernel (4 or 2 outputs a thread); other filters: the tile kernel
    (2, 6, 7, 9, 6, 3, 3, (1, 1), (1, 1), (1, 1), 6),  # direct, 4 a thread (the last strip 1 of 4)
    (2, 4, 9, 7, 8, 3, 3, (2, 2), (1, 1), (1, 1), 4),  # direct, channel multiplier 2, stride 2 on 4 columns
    (1, 2, 41, 45, 2, 3, 3, (2, 2), (0, 0), (1, 1), 2),  # direct, stride 2 on 22 columns: 2 a thread
    (2, 3, 19, 23, 3, 3, 3, (1, 3), (2, 1), (2, 2), 3),  # direct, dilation 2, strides (1, 3), padding (2, 1)
    (1, 3, 70, 70, 3, 5, 5, (1, 1), (2, 2), (1, 1), 3),  # tile, several row tiles (halo between them)
    (1, 2, 41, 45, 2, 5, 3, (2, 2), (0, 0), (1, 1), 2),  # tile, stride 2, no padding: the halo is the image's
    (1, 2, 23, 140, 2, 3, 5, (1, 1), (1, 2), (1, 1), 2),  # tile, wider than 128: column tiles
    (2, 3, 12, 10, 3, 5, 3, (1, 2), (2, 0), (2, 3), 3),  # 5x3 kernel, dilation: the run-time taps
    (1, 5, 1, 1, 5, 1, 1, (1, 1), (0, 0), (1, 1), 5),  # 1x1 planes, many a block
    (3, 1, 8, 6, 4, 3, 3, (1, 1), (1, 1), (1, 1), 1),  # cin 1 with groups 1: depthwise, multiplier 4
]


@pytest.mark.parametrize("case", DEPTHWISE_CASES, ids=lambda c: f"{c[0]}x{c[1]}x{c[2]}x{c[3]}-{c[4]}-k{c[5]}x{c[6]}")
def test_depthwise_kernel_reassembles_depthwise_convolution(case):
    s, x, wt, b, expected = conv_case(case, seed=2)
    assert s.groups == s.cin  # the launcher's condition
    assert depthwise_path(s, 4) == ("direct" if (s.kh, s.kw) == (3, 3) else "tile")
    y = conv2d_depthwise(flat(x), flat(wt), flat(b), s)
    assert torch.equal(y.tensor(expected.shape), expected)
    y = conv2d_depthwise(flat(x), flat(wt), [], s, elem_bytes=8)  # float64's tiles, no bias
    assert torch.equal(y.tensor(expected.shape), F.conv2d(x, wt, None, *case[7:]))


def test_direct_depthwise_kernel_on_random_3x3_layers():
    """The direct kernel (3x3) on random strides, dilations, paddings and sizes, 4 or 2 outputs a
    thread and every partial last strip: every output written once, exactly F.conv2d's."""
    g = torch.Generator().manual_seed(7)

    def r(lo, hi):
        return int(torch.randint(lo, hi + 1, (1,), generator=g))

    for _ in range(24):
        stride, dilation, padding = (r(1, 3), r(1, 3)), (r(1, 2), r(1, 2)), (r(0, 2), r(0, 2))
        h = r(max(1, 2 * dilation[0] + 1 - 2 * padding[0]), 19)
        w = r(max(1, 2 * dilation[1] + 1 - 2 * padding[1]), 23)
        cin = r(1, 4)
        cout = cin * (2 if r(0, 3) == 0 else 1)
        s, x, wt, b, expected = conv_case((r(1, 2), cin, h, w, cout, 3, 3, stride, padding, dilation, cin), seed=r(0, 99))
        assert depthwise_path(s, 4) == "direct"
        y = conv2d_depthwise(flat(x), flat(wt), flat(b), s)
        assert torch.equal(y.tensor(expected.shape), expected), (stride, dilation, padding, h, w)


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


def test_depthwise_falls_back_when_one_output_does_not_fit():
    # a 1x1 output from a 100x100 kernel: 10^4 inputs, more than the 6144 floats of the tile
    s = Shape(1, 2, 100, 100, 2, 100, 100, 1, 1, (1, 1), (0, 0), (1, 1), 2)
    assert depthwise_tile(s, 4) is None


# ------------------------------------------------------------------------------------------- 07
def source_index(o, k_off, pad, stride, in_size):
    t = o + pad - k_off
    if t < 0 or t % stride != 0:
        return -1
    i = t // stride
    return i if i < in_size else -1


def conv_transpose2d_kernel1(x, wt, bias, s):
    total = s.n * s.cout * s.ho * s.wo
    y = Out(total)
    for i in range(total):
        ow = i % s.wo
        t = i // s.wo
        oh = t % s.ho
        t //= s.ho
        co = t % s.cout
        n = t // s.cout
        hw, taps = s.h * s.w, s.kh * s.kw
        cin_g, cout_g = s.cin // s.groups, s.cout // s.groups
        g, cg = co // cout_g, co % cout_g
        xn = (n * s.cin + g * cin_g) * hw
        wg = (g * cin_g * cout_g + cg) * taps
        acc = bias[co] if bias else 0
        for kh in range(s.kh):
            ih = source_index(oh, kh * s.dil_h, s.pad_h, s.stride_h, s.h)
            if ih < 0:
                continue
            for kw in range(s.kw):
                iw = source_index(ow, kw * s.dil_w, s.pad_w, s.stride_w, s.w)
                if iw < 0:
                    continue
                xp, wp = xn + ih * s.w + iw, wg + kh * s.kw + kw
                for c in range(cin_g):
                    acc += x[xp + c * hw] * wt[wp + c * cout_g * taps]
        y[i] = acc
    return y


def phase_1d(first, out, k, stride, pad, dil):
    """phase_1d: (first, count, tap0, taps, step, d_in, in0) of one axis' phase."""
    count = (out - first + stride - 1) // stride if first < out else 0
    g = math.gcd(stride, dil)
    step, d_in = stride // g, dil // g
    want = (first + pad) % stride
    tap0 = next((r for r in range(min(step, k)) if (r * dil) % stride == want), -1)
    taps = 0 if tap0 < 0 else (k - tap0 + step - 1) // step
    in0 = 0
    if tap0 >= 0:
        assert (first + pad - tap0 * dil) % stride == 0
        in0 = int((first + pad - tap0 * dil) / stride)  # C++ division: exact here
    return first, count, tap0, taps, step, d_in, in0


def conv_transpose2d_kernel2(x, wt, bias, s):
    """Launches over the stride phases (chunks of gridDim.z), blocks (bx, by, z): the phase's taps, the A
    loader (WeightA, on the group's weights from the phase's first tap), the B gather (GatherB from the
    group's input channels, its carried (ci, rr, ss)), the sum over the phase's taps, and the epilogue's
    stores through row_of / col_of. Every output written exactly once."""
    HWo, RS = s.ho * s.wo, s.kh * s.kw
    cin_g, cout_g = s.cin // s.groups, s.cout // s.groups
    y = Out(s.n * s.cout * HWo)
    written = [0] * (s.n * s.cout * HWo)
    phases = s.stride_h * s.stride_w
    pixels_max = s.n * ceil_div(s.ho, s.stride_h) * ceil_div(s.wo, s.stride_w)
    per_launch = max(1, 65535 // s.groups)
    for phase0 in range(0, phases, per_launch):
        np_ = min(per_launch, phases - phase0)
        grid = (ceil_div(pixels_max, BN7), ceil_div(cout_g, BM7), s.groups * np_)
        for z in range(grid[2]):
            phase, group = phase0 + z // s.groups, z % s.groups
            ph = phase_1d(phase // s.stride_w, s.ho, s.kh, s.stride_h, s.pad_h, s.dil_h)
            pw = phase_1d(phase % s.stride_w, s.wo, s.kw, s.stride_w, s.pad_w, s.dil_w)
            first_h, count_h, tap0_h, taps_h, step_h, din_h, in0_h = ph
            first_w, count_w, tap0_w, taps_w, step_w, din_w, in0_w = pw
            pixels = count_h * count_w
            ncols = s.n * pixels
            taps = taps_h * taps_w
            k_end = cin_g * taps
            first_tap = tap0_h * s.kw + tap0_w if taps > 0 else 0
            w_base = group * cin_g * cout_g * RS + first_tap
            di, dj = step_h * s.kw, step_w
            for by in range(grid[1]):
                for bx in range(grid[0]):
                    m0, n0 = by * BM7, bx * BN7
                    if n0 >= ncols:
                        continue
                    # A[row][k] (WeightA.load, thread t rows t/8 + 16 e at k = k0 + t % 8)
                    A = [[0] * k_end for _ in range(BM7)]
                    for k0 in range(0, k_end, BK7):
                        for t in range(kGemmThreads7):
                            kidx = k0 + t % BK7
                            ci, ij = kidx // taps, kidx % taps
                            i, j = ij // taps_w, ij % taps_w
                            rs = i * di + j * dj
                            for e in range(BM7 * BK7 // kGemmThreads7):
                                row = t // BK7 + e * (kGemmThreads7 // BK7)
                                co = m0 + row
                                if kidx < k_end and co < cout_g:
                                    A[row][kidx] = wt[w_base + (ci * cout_g + co) * RS + rs]
                    # B[k][col] (GatherB: thread t is column t)
                    B = [[0] * BN7 for _ in range(k_end)]
                    for t in range(BN7):
                        col = n0 + t
                        base = None
                        ih0 = iw0 = 0
                        if col < ncols:
                            n = col // pixels
                            pix = col - n * pixels
                            q, p_ = pix // count_w, pix % count_w
                            base = (n * s.cin + group * cin_g) * s.h * s.w
                            ih0, iw0 = in0_h + q, in0_w + p_
                        for k0 in range(0, k_end, BK7):
                            ci, rs = k0 // taps, k0 % taps
                            rr, ss = rs // taps_w, rs % taps_w
                            for i in range(BK7):
                                ih, iw = ih0 - rr * din_h, iw0 - ss * din_w
                                ok = base is not None and k0 + i < k_end and 0 <= ih < s.h and 0 <= iw < s.w
                                if k0 + i < k_end:
                                    B[k0 + i][t] = x[base + (ci * s.h + ih) * s.w + iw] if ok else 0
                                ss += 1
                                if ss == taps_w:
                                    ss = 0
                                    rr += 1
                                    if rr == taps_h:
                                        rr = 0
                                        ci += 1
                    for t in range(kGemmThreads7):
                        ty, tx = t // 16, t % 16
                        row_of = [ty * 4 + i if i < 4 else BM7 // 2 + ty * 4 + i - 4 for i in range(8)]
                        col_of = [tx * 4 + j if j < 4 else BN7 // 2 + tx * 4 + j - 4 for j in range(8)]
                        acc = [[sum(A[row_of[i]][k] * B[k][col_of[j]] for k in range(k_end)) for j in range(8)]
                               for i in range(8)]
                        colbase, valid = [], []
                        for j in range(8):
                            col = n0 + col_of[j]
                            valid.append(col < ncols)
                            n = col // pixels if valid[j] else 0
                            pix = col - n * pixels
                            q, p_ = pix // count_w, pix % count_w
                            colbase.append(n * s.cout * HWo + (first_h + q * s.stride_h) * s.wo + first_w + p_ * s.stride_w)
                        vec_ok = s.stride_h == 1 and s.stride_w == 1 and HWo % 4 == 0
                        for i in range(8):
                            if m0 + row_of[i] >= cout_g:
                                continue
                            co = group * cout_g + m0 + row_of[i]
                            b = bias[co] if bias else 0
                            for g4 in range(2):
                                out = co * HWo
                                if vec_ok and valid[4 * g4 + 3]:
                                    for j in range(4):
                                        y[out + colbase[4 * g4] + j] = acc[i][4 * g4 + j] + b
                                        written[out + colbase[4 * g4] + j] += 1
                                else:
                                    for j in range(4):
                                        if valid[4 * g4 + j]:
                                            y[out + colbase[4 * g4 + j]] = acc[i][4 * g4 + j] + b
                                            written[out + colbase[4 * g4 + j]] += 1
    assert all(w == 1 for w in written), "every output written exactly once"
    return y


def t_out_size(size, k, stride, pad, out_pad, dil):
    return (size - 1) * stride - 2 * pad + dil * (k - 1) + out_pad + 1


# (n, cin, h, w, cout, kh, kw, stride, padding, output_padding, dilation, groups)
TRANSPOSED_CASES = [
    (2, 6, 5, 7, 6, 3, 3, (1, 1), (1, 1), (0, 0), (1, 1), 6),  # depthwise
    (2, 4, 5, 4, 8, 3, 3, (2, 2), (1, 1), (1, 1), (1, 1), 4),  # channel multiplier 2, stride 2
    (1, 16, 4, 5, 16, 3, 3, (1, 1), (1, 1), (0, 0), (1, 1), 4),  # 4 channels per group
    (3, 9, 4, 3, 6, 1, 1, (1, 1), (0, 0), (0, 0), (1, 1), 3),  # grouped 1x1
    (2, 6, 5, 4, 10, 4, 3, (3, 2), (1, 0), (2, 0), (1, 1), 2),  # asymmetric, output_padding
    (1, 4, 3, 3, 132, 2, 2, (1, 1), (0, 0), (0, 0), (2, 1), 2),  # more than one channel tile per group
    (2, 5, 4, 5, 7, 3, 2, (1, 2), (0, 1), (0, 1), (2, 1), 1),  # dense
    # stride phases (kernel 2): taps every step = stride / gcd(stride, dilation); phases no tap reaches
    (1, 3, 4, 5, 4, 3, 3, (2, 2), (1, 0), (1, 1), (2, 2), 1),  # stride 2, dilation 2: odd rows, columns bias only
    (2, 4, 3, 4, 6, 3, 2, (3, 2), (2, 1), (1, 0), (2, 3), 2),  # stride 3 with dilation 2, stride 2 with dilation 3
    (2, 8, 3, 3, 4, 2, 2, (2, 2), (0, 0), (0, 0), (1, 1), 1),  # a UNet's 2x2 stride-2 upsampling: one tap a phase
    (1, 2, 3, 3, 2, 1, 1, (3, 3), (0, 0), (2, 2), (1, 1), 1),  # 1x1, stride 3, output_padding 2: 8 of 9 phases bias only
]


def transposed_case(case, seed=0):
    n, cin, h, w, cout, kh, kw, stride, padding, out_pad, dilation, groups = case
    g = torch.Generator().manual_seed(seed)
    x, wt, b = ints(g, n, cin, h, w), ints(g, cin, cout // groups, kh, kw), ints(g, cout)
    ho, wo = (t_out_size(sz, k, st, p, op, d)
              for sz, k, st, p, op, d in zip((h, w), (kh, kw), stride, padding, out_pad, dilation))
    s = Shape(n, cin, h, w, cout, kh, kw, ho, wo, stride, padding, dilation, groups)
    expected = F.conv_transpose2d(x.double(), wt.double(), b.double(), stride, padding, out_pad, groups,
                                  dilation).to(torch.int64)
    return s, x, wt, b, expected


@pytest.mark.parametrize("case", TRANSPOSED_CASES, ids=lambda c: f"{c[0]}x{c[1]}x{c[2]}x{c[3]}-{c[4]}-g{c[11]}")
def test_conv_transpose2d_gather_reassembles_grouped_transposed_convolution(case):
    s, x, wt, b, expected = transposed_case(case)
    y = conv_transpose2d_kernel1(flat(x), flat(wt), flat(b), s)
    assert torch.equal(y.tensor(expected.shape), expected)


@pytest.mark.parametrize("case", TRANSPOSED_CASES, ids=lambda c: f"{c[0]}x{c[1]}x{c[2]}x{c[3]}-{c[4]}-g{c[11]}")
def test_conv_transpose2d_implicit_gemm_reassembles_grouped_transposed_convolution(case):
    s, x, wt, b, expected = transposed_case(case, seed=1)
    y = conv_transpose2d_kernel2(flat(x), flat(wt), flat(b), s)
    assert torch.equal(y.tensor(expected.shape), expected)


def test_the_phases_give_every_output_exactly_the_taps_that_reach_it():
    """phase_1d over every (output size, kernel, stride, padding, dilation) up to small bounds: each output
    lies in one phase, and the phase's taps (tap0 + i step, reading input in0 + q - i d_in) are exactly
    the taps whose scatter reaches it (o + pad - r dil a non-negative multiple of the stride, any
    input row: the gather tests the range), each with its input row."""
    for stride in range(1, 5):
        for dil in range(1, 5):
            for k in range(1, 6):
                for pad in range(0, 7):
                    out = 11
                    seen = []
                    for a in range(stride):
                        first, count, tap0, taps, step, d_in, in0 = phase_1d(a, out, k, stride, pad, dil)
                        for q in range(count):
                            o = first + q * stride
                            seen.append(o)
                            got = {(tap0 + i * step, in0 + q - i * d_in) for i in range(taps)}
                            want = {(r, (o + pad - r * dil) // stride) for r in range(k)
                                    if (o + pad - r * dil) % stride == 0}
                            assert got == want, (stride, dil, k, pad, o)
                    assert sorted(seen) == list(range(out))


def test_the_unit_stride_phase_is_phase_1d_at_stride_1():
    """Kernel 2's stride-1 instantiation takes unit_phase's constants instead of phase_1d: the same numbers."""
    for out, k, pad, dil in ((5, 3, 1, 1), (7, 1, 0, 1), (4, 3, 0, 2), (9, 4, 5, 3)):
        assert phase_1d(0, out, k, 1, pad, dil) == (0, out, 0, k, 1, dil, pad)


def test_the_models_follow_the_sources():
    """The lines the models transliterate are still in the kernels (a change there must change them)."""
    for line in ("const scalar_t* xn = x + (n * s.cin + g * cin_g) * s.h * s.w;",
                 "xn = x + (n * s.cin + group * cin_g) * hw_in;",
                 "const scalar_t* w_row = weight + (int64_t(group) * cout_g + co0 + b_co) * K;",
                 "const int co = group * cout_g + co_in_group;",
                 "in_plane = (n0 + q / s.cout) * s.cin + (q % s.cout) / mult;",
                 "const scalar_t* tk = tp + kh * s.dil_h * t.in_cols + kw * s.dil_w;",
                 "} else if (version == 2 && s.groups == s.cin && launch_depthwise(x, weight, bias, y, s, stream)) {"):
        assert line in CONV, line
    for line in ("const scalar_t* wg = weight + (int64_t(g) * cin_g * cout_g + cg) * taps;",
                 "const WeightA<T, kUnitStride> la{weight + int64_t(group) * cin_g * cout_g * RS + first_tap, cout_g, RS, m0,",
                 "const int first_tap = ph.taps * pw.taps > 0 ? ph.tap0 * s.kw + pw.tap0 : 0;",
                 "const int ci = kidx / taps, ij = kidx - ci * taps;", "const int i = ij / S, j = ij - i * S;",
                 "rs = i * di + j * dj;",
                 "const int ih = ih0 - rr * dh, iw = iw0 - ss * dw;",
                 "ih0 = ph.in0 + q;", "iw0 = pw.in0 + p;",
                 "for (int r = 0; r < p.step && r < k; ++r) {", "if ((r * dil) % stride == want) {",
                 "p.in0 = p.tap0 < 0 ? 0 : (first + pad - p.tap0 * dil) / stride;",
                 "__device__ __forceinline__ Phase1D unit_phase(int out, int k, int pad, int dil) {\n  return {0, out, 0, k, 1, dil, pad};\n}",
                 "colbase[j] = int64_t(n) * s.cout * HWo + (ph.first + q * s.stride_h) * s.wo + pw.first + p * s.stride_w;",
                 "base = x + (int64_t(n) * s.cin + int64_t(group) * (s.cin / s.groups)) * H * W;",
                 "const int co = group * cout_g + m0 + row_of(i);"):
        assert line in TRANSPOSED, line
