"""07's version 3 (Winograd F(4x4, 3x3)) without a GPU: its three transform kernels transliterated into
Python over flat arrays, as the kernels index them (a thread per item, item i in the kernel's own
numbering), with F.conv_transpose2d standing in for kernel 2's grouped 1 x 1 product between them. In
float64 the model must equal the transposed convolution to rounding, for paddings that pad and crop,
groups, bias, and sizes off the 4 x 4 tiles; in float32 stay within the tolerance the grader applies.

If the kernels' indexing changes, change the transliteration with it (this test is only as good as that).
"""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from grader.env import REPO

SOURCE = (REPO / "solutions" / "07_conv_transpose2d" / "conv_transpose2d.cu").read_text()

BT = torch.tensor([[4, 0, -5, 0, 1, 0], [0, -4, -4, 1, 1, 0], [0, 4, -4, -1, 1, 0], [0, -2, -1, 2, 1, 0],
                   [0, 2, -1, -2, 1, 0], [0, 4, 0, -5, 0, 1]], dtype=torch.float64)
AT = torch.tensor([[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0], [0, 1, -1, 8, -8, 1]],
                  dtype=torch.float64)


def winograd_g(g0, g1, g2, dim):
    """winograd_g: G (g0, g1, g2), its 6 values stacked along `dim` (divided as the kernel divides)."""
    return torch.stack([g0 / 4, -(g0 + g1 + g2) / 6, -(g0 - g1 + g2) / 6, g0 / 24 + g1 / 12 + g2 / 6,
                        g0 / 24 - g1 / 12 + g2 / 6, g2], dim)


def weight_kernel(w, cin, cout_g, dt):
    """winograd_weight_kernel: item i = ci cout_g + co; U[(a 6 + b) plane + i] = (G g G^T)[a][b]."""
    f = w.reshape(cin * cout_g, 3, 3).flip(1, 2).to(dt)  # g[r][c] = f[(2 - r) 3 + (2 - c)]
    t = winograd_g(f[:, 0], f[:, 1], f[:, 2], 1)  # (items, 6, 3): G g, column by column
    u = winograd_g(t[..., 0], t[..., 1], t[..., 2], 2)  # (items, a, b): row a of G g, times G^T
    U = torch.empty(36 * cin * cout_g, dtype=dt)
    plane = cin * cout_g
    i = torch.arange(plane)
    for a in range(6):
        for b in range(6):
            U[(a * 6 + b) * plane + i] = u[:, a, b]
    return U


def input_kernel(x, n, cin, h, w, pc_h, pc_w, th, tw, dt):
    """winograd_input_kernel: item i = ci tiles + t, t = (n th + ty) tw + tx; V[(r 6 + c) plane + i]."""
    tiles = n * th * tw
    i = torch.arange(tiles * cin)
    ci, t = i // tiles, i % tiles
    img, tt = t // (th * tw), t % (th * tw)
    y0, x0 = (tt // tw) * 4 - pc_h, (tt % tw) * 4 - pc_w
    flat = x.reshape(-1).to(dt)
    src = (img * cin + ci) * h * w
    d = torch.zeros(len(i), 6, 6, dtype=dt)
    for r in range(6):
        for c in range(6):
            yy, xx = y0 + r, x0 + c
            ok = (yy >= 0) & (yy < h) & (xx >= 0) & (xx < w)
            d[ok, r, c] = flat[(src + yy * w + xx)[ok]]
    v = BT.to(dt) @ d @ BT.to(dt).T
    V = torch.empty(36 * cin * tiles, dtype=dt)
    plane = cin * tiles
    for r in range(6):
        for c in range(6):
            V[(r * 6 + c) * plane + i] = v[:, r, c]
    flags = torch.zeros(tiles, dtype=torch.bool)  # cleared by the weight kernel, set by any channel's thread
    flags[t[~d.isfinite().flatten(1).all(1)]] = True
    return V, flags


def output_kernel(M, flags, direct, bias, n, cout, ho, wo, th, tw, dt):
    """winograd_output_kernel: item i = co tiles + t; y[n][co][y0 + r][x0 + c] = (A^T m A)[r][c] + bias[co]
    inside y only; a flagged tile's outputs from `direct` (winograd_direct_tile's sums, F.conv_transpose2d
    standing in)."""
    tiles = n * th * tw
    i = torch.arange(tiles * cout)
    co, t = i // tiles, i % tiles
    img, tt = t // (th * tw), t % (th * tw)
    y0, x0 = (tt // tw) * 4, (tt % tw) * 4
    plane = cout * tiles
    m = torch.stack([M[(k * plane) + i] for k in range(36)], 1).reshape(-1, 6, 6)
    o = AT.to(dt) @ m @ AT.to(dt).T
    if bias is not None:
        o = o + bias.to(dt)[co][:, None, None]
    y = torch.full((n * cout * ho * wo,), float("nan"), dtype=dt)
    dst = (img * cout + co) * ho * wo
    for r in range(4):
        for c in range(4):
            ok = (y0 + r < ho) & (x0 + c < wo)
            at = dst + (y0 + r) * wo + x0 + c
            y[at[ok]] = torch.where(flags[t], direct.reshape(-1).to(dt)[at.clamp(max=y.numel() - 1)], o[:, r, c])[ok]
    return y.view(n, cout, ho, wo)


def winograd(x, w, bias, padding, groups, dt):
    n, cin, h, wd = x.shape
    cout_g = w.shape[1]
    cout = cout_g * groups
    ph, pw = padding
    ho, wo = h + 2 - 2 * ph, wd + 2 - 2 * pw
    th, tw = -(-ho // 4), -(-wo // 4)
    tiles = n * th * tw
    U = weight_kernel(w, cin, cout_g, dt)
    V, flags = input_kernel(x, n, cin, h, wd, 2 - ph, 2 - pw, th, tw, dt)
    # kernel 2's grouped 1 x 1 product: one image of 36 cin channels, 1 x tiles pixels, 36 groups per group
    M = F.conv_transpose2d(V.view(1, 36 * cin, 1, tiles), U.view(36 * cin, cout_g, 1, 1), None, 1, 0, 0, 36 * groups)
    direct = F.conv_transpose2d(x.to(dt), w.to(dt), None if bias is None else bias.to(dt), 1, padding, 0, groups)
    return output_kernel(M.reshape(-1), flags, direct, bias, n, cout, ho, wo, th, tw, dt)


CASES = [  # n, cin, h, w, cout_g, (padding h, w), groups, bias
    (1, 1, 1, 1, 1, (0, 0), 1, False),   # one pixel: a 3 x 3 output, one tile
    (2, 3, 5, 7, 4, (1, 1), 1, True),    # the benchmark's padding, sizes off the tiles
    (1, 6, 9, 4, 2, (0, 1), 3, True),    # groups, padding 0 (the conv form pads by 2) beside 1
    (3, 4, 8, 8, 5, (2, 0), 2, False),   # padding 2: the conv form does not pad
    (1, 2, 11, 6, 3, (3, 1), 1, True),   # padding 3: the conv form crops (pc = -1)
    (2, 5, 4, 13, 2, (1, 2), 5, True),   # depthwise-like groups
]


@pytest.mark.parametrize("n, cin, h, w, cout_g, padding, groups, bias", CASES)
def test_the_winograd_model_is_the_transposed_convolution(n, cin, h, w, cout_g, padding, groups, bias):
    g = torch.Generator().manual_seed(n * 1000 + cin * 100 + h * 10 + w + padding[0])
    x = torch.randn(n, cin, h, w, generator=g, dtype=torch.float64)
    wt = torch.randn(cin, cout_g, 3, 3, generator=g, dtype=torch.float64)
    b = torch.randn(cout_g * groups, generator=g, dtype=torch.float64) if bias else None
    ref = F.conv_transpose2d(x, wt, b, 1, padding, 0, groups)
    got = winograd(x, wt, b, padding, groups, torch.float64)
    assert got.shape == ref.shape and not got.isnan().any(), "every output written once"
    assert torch.allclose(got, ref, rtol=1e-10, atol=1e-10), (got - ref).abs().max()
    got32 = winograd(x, wt, b, padding, groups, torch.float32).double()
    assert ((got32 - ref).norm() / ref.norm()) < 1e-5


@pytest.mark.parametrize("dt", [torch.float64, torch.float32])
def test_non_finite_inputs_land_where_the_definition_puts_them(dt):
    """NaN, +inf and -inf in x: without the flags the transforms spread them over whole tiles (and make an
    inf NaN); with them every output is NaN, +inf or -inf exactly where the reference's is."""
    g = torch.Generator().manual_seed(7)
    x = torch.randn(2, 4, 11, 9, generator=g, dtype=torch.float64)
    wt = torch.randn(4, 3, 3, 3, generator=g, dtype=torch.float64)
    b = torch.randn(3, generator=g, dtype=torch.float64)
    x.view(-1)[torch.randperm(x.numel(), generator=g)[:3]] = torch.tensor([float("nan"), float("inf"), float("-inf")],
                                                                           dtype=torch.float64)
    ref = F.conv_transpose2d(x, wt, b, 1, 1)
    got = winograd(x, wt, b, (1, 1), 1, dt).double()
    assert torch.equal(got.isnan(), ref.isnan()) and torch.equal(got == float("inf"), ref == float("inf"))
    assert torch.equal(got == float("-inf"), ref == float("-inf"))
    fin = ref.isfinite()
    assert ((got[fin] - ref[fin]).norm() / ref[fin].norm()) < (1e-10 if dt == torch.float64 else 1e-5)


def test_the_winograd_model_follows_the_kernels():
    """The lines the model transliterates are still conv_transpose2d.cu's."""
    flat = " ".join(SOURCE.split())
    for line in ("const T* f = w + i * 9;",
                 "const T col[3] = {f[2 * 3 + 2 - c], f[1 * 3 + 2 - c], f[0 * 3 + 2 - c]};",
                 "winograd_g(col, t[c]);", "const T row[3] = {t[0][a], t[1][a], t[2][a]};",
                 "o[1] = -(g[0] + g[1] + g[2]) / 6;", "o[3] = g[0] / 24 + g[1] / 12 + g[2] / 6;",
                 "for (int b = 0; b < 6; ++b) U[(a * 6 + b) * plane + i] = u[b];",
                 "o[1] = -4 * d[1] - 4 * d[2] + d[3] + d[4];", "o[5] = 4 * d[1] - 5 * d[3] + d[5];",
                 "const int y0 = (tt / tw) * 4 - pc_h, x0 = (tt % tw) * 4 - pc_w;",
                 "const T* src = x + (n * s.cin + ci) * s.h * s.w;",
                 "col[r] = yy >= 0 && yy < s.h && xx >= 0 && xx < s.w ? src[yy * s.w + xx] : T(0);",
                 "for (int c = 0; c < 6; ++c) out[(r * 6 + c) * plane] = o[c];",
                 "o[3] = d1 + 8 * d2 + m[5];", "for (int r = 0; r < 6; ++r) col[r] = in[(r * 6 + c) * plane];",
                 "if (x0 + c < s.wo) dst[(y0 + r) * s.wo + x0 + c] = o[c] + b;",
                 "x, V, flags, s, 2 - s.pad_h, 2 - s.pad_w, th, tw);", "p.groups = 36 * s.groups;",
                 "conv_transpose2d_cuda<scalar_t>(V, U, nullptr, M, p, 2, stream);",
                 "finite = finite && isfinite(col[r]);", "if (!finite) flags[t] = T(1);", "if (i < tiles) flags[i] = T(0);",
                 "if (flags[t] != T(0)) {", "const int iy = y0 + r + s.pad_h - a;", "const int ix = x0 + c + s.pad_w - bb;",
                 "if (ix >= 0 && ix < s.w) acc += xc[iy * s.w + ix] * wc[a * 3 + bb];"):
        assert " ".join(line.split()) in flat, line


def test_default_version_takes_winograd_exactly_where_version_3_applies():
    """conv_transpose2d without a version runs 3 on every call version 3 accepts and 2 elsewhere (the
    binding's refusals: kernel, stride, dilation, groups, transforms past 2^31 elements; and fewer than 8
    input channels a group, where it is slower), and hands
    unreadable arguments to version 2, whose checks name them. Meta tensors (shapes only); the module is
    read as text, so no build is needed."""
    path = REPO / "solutions" / "07_conv_transpose2d" / "conv_transpose2d.py"
    source = path.read_text()
    # the function and what it reads, without building the library
    names = {"torch": torch}
    start = source.index("def _pair(")
    exec(compile(source[start:source.index("def conv_transpose2d(")] + source[source.index("def output_size("):
                 source.index("# Shapes for tracing")], str(path), "exec"), names)
    version = names["default_version"]

    def empty(*shape):
        return torch.empty(*shape, device="meta")

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
