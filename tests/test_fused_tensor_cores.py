"""Exercises 08's and 09's version 2 (TF32 tensor cores) without a GPU: models of their data movement,
and their grading tolerances against emulated TF32 and FP16 arithmetic.

1. The forward engine (tc_conv_gemm, mma_stage: the gather and weight copies, the swizzle, the fragment
   reads, the mma) is exercise 06's version 3 with a 64-channel tile, given to both exercises in one
   course header, course/tf32_conv.cuh. Its lines are asserted verbatim there (ENGINE_LINES), both files
   are asserted to take it from there and to hold no copy, and tests/test_conv2d_tensor_cores.py's
   model of 06's engine (run with BN3 = 64, the same arithmetic) computes the accumulators; the
   epilogues modelled here (08: BatchNorm and the ReLU on the fragments; 09: z and the tile's statistics
   in training, y in eval) must reassemble the layer exactly (small integers, float64), every output
   written once.
2. 09's gemm_tile_tf32 (the backward's GEMMs): its fragment reads of version 1's shared slices, through
   mma.sync m16n8k8 as CUTLASS's cute lays it out, and the dgrad and wgrad epilogues' mapping of the D
   fragment give the slice's product exactly.
3. The tensor-core groups' tolerances (grader/specs/ex08_*.py, ex09_*.py) accept emulated TF32 within half
   of their bound, and reject a dropped K tail and FP16 operands on inputs FP16 cannot hold; the strict
   groups' tolerances reject TF32.

The source lines the transliterations follow are asserted verbatim: if a kernel's arithmetic changes,
this test fails until its model changes with it.
"""
from __future__ import annotations

import itertools

import pytest
import torch
import torch.nn.functional as F

from grader.env import REPO
from grader.verify import precision as probes
from grader.specs import ex08_conv_bn_relu_inference as spec08
from grader.specs import ex09_conv_bn_relu_training as spec09
from tests import test_conv2d_tensor_cores as t06
from tests.test_conv2d_tensor_cores import WARP, Conflicts, Problem, tf32

SOURCE08 = (REPO / "solutions" / "08_conv_bn_relu_inference" / "conv_bn_relu_inference.cu").read_text()
SOURCE09 = (REPO / "solutions" / "09_conv_bn_relu_training" / "conv_bn_relu_training.cu").read_text()
ENGINE = (REPO / "grader" / "toolchain" / "include" / "course" / "tf32_conv.cuh").read_text()
BN = 64  # the engine's channels per block: 06's model with BN3 = 64

# the engine's lines, in the header both exercises include; each is 06's version-3 arithmetic for BN3 = 64
# under the names of ConvShape (tid = 06's a_row with a_k = 0, as 128 threads gather 128 rows)
ENGINE_LINES = [
    "constexpr int kTcPixels = 128;", "constexpr int kTcChannels = 64;", "constexpr int kTcK = 16;",
    "constexpr int kTcStages = 3;", "constexpr int kTcThreads = 128;",
    "constexpr int kWarpPixels = 64, kWarpChannels = 32;",
    "__device__ __forceinline__ int swizzle(int k, int m) { return m ^ (((k >> 2) & 3) << 3); }",
    "const float4 v = *reinterpret_cast<const float4*>(&st.B[wn0 + 8 * j + g][4 * t]);",
    "b[j][0] = to_tf32(v.x), b[j][1] = to_tf32(v.y), b[j][2] = to_tf32(v.z), b[j][3] = to_tf32(v.w);",
    "const int k = 4 * t + 2 * step + h;",
    "const float4 v = *reinterpret_cast<const float4*>(&st.A[k][swizzle(k, wm0 + 32 * q + 4 * g)]);",
    "a[0][2 * h] = to_tf32(v.x), a[0][2 * h + 1] = to_tf32(v.y);",
    "a[1][2 * h] = to_tf32(v.z), a[1][2 * h + 1] = to_tf32(v.w);",
    "for (int j = 0; j < kNTiles; ++j) mma_tf32(acc[2 * q + i][j], a[i], b[j][2 * step], b[j][2 * step + 1]);",
    "const int wm0 = (warp / 2) * kWarpPixels, wn0 = (warp % 2) * kWarpChannels;",
    "const int n = (m0 + tid) / PQ, pq = m0 + tid - n * PQ, p = pq / s.Q, q = pq - p * s.Q;",
    "h0 = p * s.stride_h - s.pad_h;", "w0 = q * s.stride_w - s.pad_w;",
    "const bool ok = k < CRS && unsigned(h) < unsigned(s.H) && unsigned(ww) < unsigned(s.W);",
    "cp_async4(&st.A[e][swizzle(e, tid)], ok ? xn + c_off + h * s.W + ww : xn, ok);",
    "const int b_row = tid / 4, b_c = tid % 4;",
    "const int row = b_row + pass * kBRows;",
    "const int co = co0 + row, kb = k0 + 4 * b_c;",
    "cp_async16(&st.B[row][4 * b_c], ok ? src : w, ok);",
    "cp_async4(&st.B[row][4 * b_c + e], ok ? src + e : w, ok);",
    "const int steps = (CRS + kTcK - 1) / kTcK;",
]
# each exercise's own lines around the engine: its tile's origin, the warp's part of it, the 16-byte store
KERNEL_LINES = [
    "#include <course/tf32_conv.cuh>",
    "using namespace course::tf32_conv;",
    "const int m0 = blockIdx.x * kTcPixels, co0 = blockIdx.y * kTcChannels;",
    "const int wm0 = (warp / 2) * kWarpPixels, wn0 = (warp % 2) * kWarpChannels;",
    "out[(int64_t(n) * s.K + co) * PQ + (mr - n * PQ)] = v[r];",
]
EPILOGUE08 = [
    "const int ch = wn0 + 8 * j + 2 * t + c, co = co0 + ch;",
    "const int m = m0 + wm0 + 32 * q + 4 * g;",
    "v[0] = relu(acc[2 * q][j][c] * scale + shift);", "v[1] = relu(acc[2 * q][j][2 + c] * scale + shift);",
    "v[2] = relu(acc[2 * q + 1][j][c] * scale + shift);", "v[3] = relu(acc[2 * q + 1][j][2 + c] * scale + shift);",
]
EPILOGUE09 = [
    "const int ch = wn0 + 8 * j + 2 * t + c, co = co0 + ch;",
    "const int m = m0 + wm0 + 32 * q + 4 * g;",
    "const float v[4] = {acc[2 * q][j][c] + b, acc[2 * q][j][2 + c] + b, acc[2 * q + 1][j][c] + b,",
    "acc[2 * q + 1][j][2 + c] + b};",
    "if (co < s.K && m < M) store_pixels4(z, s, m, co, M, v, vec_ok);",
    "for (int r = 0; r < 4; ++r) sum += m + r < M ? v[r] : 0.0f;",
    "for (int off = 4; off < 32; off *= 2) v += __shfl_xor_sync(0xffffffffu, v, off);",
    "if (g == 0) red[warp / 2][ch] = sum;",
    "const int nvalid = min(kTcPixels, M - m0);",
    "mean[j][c] = (red[0][ch] + red[1][ch]) / float(nvalid);",
    "for (int r = 0; r < 4; ++r) m2 += m + r < M ? (v[r] - mean[j][c]) * (v[r] - mean[j][c]) : 0.0f;",
    "if (g == 0) red[warp / 2][ch] = m2;",
    "if (warp / 2 == 0 && g == 0) {",
    "part_mean[blockIdx.x * s.K + co] = mean[j][c];",
    "part_m2[blockIdx.x * s.K + co] = red[0][ch] + red[1][ch];",
    "const float a[4] = {acc[2 * q][j][c], acc[2 * q][j][2 + c], acc[2 * q + 1][j][c], acc[2 * q + 1][j][2 + c]};",
]
GEMM_TILE_TF32 = [
    "const int wr = (warp / 2) * 32, wc = (warp % 2) * 64;",
    "__device__ __forceinline__ int a_row(int i, int h, int g) { return 8 * i + 4 * h + (g & 3) + 16 * (g >> 2); }",
    "const int row0 = wr + a_row(i, 0, g), row1 = wr + a_row(i, 1, g);",
    "a[i][0] = to_tf32(sm.a[buf][t][row0]), a[i][1] = to_tf32(sm.a[buf][t][row1]);",
    "a[i][2] = to_tf32(sm.a[buf][t + 4][row0]), a[i][3] = to_tf32(sm.a[buf][t + 4][row1]);",
    "const int col = wc + 8 * j + g;",
    "const uint32_t b0 = to_tf32(sm.b[buf][t][col]), b1 = to_tf32(sm.b[buf][t + 4][col]);",
    "for (int i = 0; i < 2; ++i) mma_tf32(acc[i][j], a[i], b0, b1);",
    # the dgrad and wgrad epilogues: D fragment (i, j, e) -> row and column of C
    "const int wr = m0 + (warp / 2) * 32, wc = n0 + (warp % 2) * 64;",
    "const int c = wr + a_row(i, h, g);",
    "const int col = wc + 8 * j + 2 * t + e;",
    "grad_x[(int64_t(n) * s.C + c) * HW + (col - n * HW)] = acc[i][j][2 * h + e];",
    "const int k = wr + a_row(i, h, g);",
    "constexpr int kAStride = BM + 4, kBStride = BN + 8;",
    "if (col < CRS) o[int64_t(k) * CRS + col] = acc[i][j][2 * h + e] * bn_scale;",
]


def flat(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize("source, lines", [(ENGINE, ENGINE_LINES), (SOURCE08, KERNEL_LINES + EPILOGUE08),
                                           (SOURCE09, KERNEL_LINES + EPILOGUE09), (SOURCE09, GEMM_TILE_TF32)],
                         ids=["engine", "08", "09 forward", "09 backward"])
def test_transliterated_lines_are_the_kernels(source, lines):
    text = flat(source)
    missing = [line for line in lines if flat(line) not in text]
    assert not missing, f"a TF32 kernel changed; update the model in this test: {missing}"
    assert (t06.BM, t06.BK, t06.WM, t06.WN, t06.STAGES) == (128, 16, 64, 32, 3)  # 06's model: the same tiles


@pytest.mark.parametrize("source", [SOURCE08, SOURCE09], ids=["08", "09"])
def test_the_exercises_take_the_engine_from_the_header(source):
    """One home for the engine: an exercise file that defines any of its parts again (a copy drifts from the
    header the model above follows) fails here."""
    parts = ["int kTcPixels", "int kTcK ", "struct TcStage", "int swizzle(", "void mma_stage(", "void tc_conv_gemm(",
             "cp_async_wait<"]
    assert not [p for p in parts if p in source], "the TF32 engine belongs in course/tf32_conv.cuh only"


# ------------------------------------------------------------------------ the forward engine, modelled
def blocks(p: Problem, vec_b: bool, conflicts: Conflicts):
    """Each block's warps' accumulators through 06's model of the engine: (m0, co0, {warp: (wm0, wn0, acc)})."""
    hw_out = p.ho * p.wo
    M, K = p.n * hw_out, p.cin * p.kh * p.kw
    steps = (K + t06.BK - 1) // t06.BK
    for bx, by in itertools.product(range(-(-M // t06.BM)), range(-(-p.cout // BN))):
        m0, co0 = bx * t06.BM, by * BN
        warps = {}
        for warp in range(2 * BN // WARP):
            wm0, wn0 = (warp // 2) * t06.WM, (warp % 2) * t06.WN
            warps[warp] = (wm0, wn0, [[[[0.0] * 4 for _ in range(t06.N_TILES)] for _ in range(t06.M_TILES)]
                                      for _ in range(WARP)])
        for step in range(steps):
            A, B = t06.load_stage(p, BN, vec_b, m0, co0, step * t06.BK, conflicts)
            for wm0, wn0, acc in warps.values():
                t06.mma_stage3(A, B, acc, wm0, wn0, conflicts)
        yield bx, m0, co0, warps


def lane_pixels(acc, lane, q, j, c):
    """A lane's 4 accumulators of pixels 32 q + 4 g + {0..3}, channel 8 j + 2 t + c (the comment's order)."""
    a = acc[lane]
    return [a[2 * q][j][c], a[2 * q][j][2 + c], a[2 * q + 1][j][c], a[2 * q + 1][j][2 + c]]


def store(p, out, written, m, co, v):
    hw_out = p.ho * p.wo
    for r in range(4):  # store_pixels4: the vector store writes the same 4 (P*Q % 4 == 0 keeps them in one image)
        mr = m + r
        if mr >= p.n * hw_out:
            break
        n = mr // hw_out
        idx = (n * p.cout + co) * hw_out + (mr - n * hw_out)
        written[idx] += 1
        out[idx] = v[r]


PROBLEMS = t06.PROBLEMS + [(2, 6, 11, 10, 64, 3, 3, (1, 1), (1, 1), (1, 1))]  # 64 channels: the benchmark's tile


def problem(spec) -> Problem:
    n, cin, h, w, cout, kh, kw, stride, pad, dil = spec
    return Problem(n, cin, h, w, cout, kh, kw, stride, pad, dil, seed=sum(spec[:7]))


@pytest.mark.parametrize("spec", PROBLEMS, ids=lambda p: "x".join(map(str, p[:7])))
def test_08_epilogue_model_is_exact(spec):
    p = problem(spec)
    g = torch.Generator().manual_seed(1)
    scale = torch.randint(-3, 4, (p.cout,), generator=g).double() / 2
    shift = torch.randint(-3, 4, (p.cout,), generator=g).double()
    hw_out = p.ho * p.wo
    M = p.n * hw_out
    for vec_b in ([False, True] if (p.cin * p.kh * p.kw) % 4 == 0 else [False]):
        y = [float("nan")] * (p.n * p.cout * hw_out)
        written = [0] * len(y)
        conflicts = Conflicts()
        for _, m0, co0, warps in blocks(p, vec_b, conflicts):
            for wm0, wn0, acc in warps.values():
                for lane in range(WARP):
                    g_, t = lane // 4, lane % 4
                    for j, c in itertools.product(range(t06.N_TILES), range(2)):
                        ch = wn0 + 8 * j + 2 * t + c
                        co = co0 + ch
                        if co >= p.cout:
                            continue
                        for q in range(2):
                            m = m0 + wm0 + 32 * q + 4 * g_
                            if m >= M:
                                continue
                            v = [max(a * float(scale[co]) + float(shift[co]), 0.0) for a in lane_pixels(acc, lane, q, j, c)]
                            store(p, y, written, m, co, v)
        conv = F.conv2d(p.x, p.wt, None, p.stride, p.pad, p.dil)
        expected = F.relu(conv * scale.view(1, -1, 1, 1) + shift.view(1, -1, 1, 1))
        assert set(written) == {1}, "every output written exactly once"
        assert torch.equal(torch.tensor(y, dtype=torch.float64).reshape(expected.shape), expected)
        assert not conflicts.bad, conflicts.bad[:3]


@pytest.mark.parametrize("spec", PROBLEMS, ids=lambda p: "x".join(map(str, p[:7])))
def test_09_training_epilogue_model_is_exact(spec):
    """z, and each 128-pixel tile's per-channel (mean, M2) as bn_stats_finalize_kernel merges them."""
    p = problem(spec)
    hw_out = p.ho * p.wo
    M = p.n * hw_out
    z = [float("nan")] * (p.n * p.cout * hw_out)
    written = [0] * len(z)
    part_mean, part_m2 = {}, {}
    for bx, m0, co0, warps in blocks(p, False, Conflicts()):
        nvalid = min(t06.BM, M - m0)
        red = {}  # (warp / 2, ch) -> the sum lane g == 0 wrote
        lane_sums = {}
        for warp, (wm0, wn0, acc) in warps.items():
            for lane in range(WARP):
                g_, t = lane // 4, lane % 4
                for j, c in itertools.product(range(t06.N_TILES), range(2)):
                    ch = wn0 + 8 * j + 2 * t + c
                    co = co0 + ch
                    b = float(p.b[co]) if co < p.cout else 0.0
                    s = 0.0
                    for q in range(2):
                        m = m0 + wm0 + 32 * q + 4 * g_
                        v = [a + b for a in lane_pixels(acc, lane, q, j, c)]
                        if co < p.cout and m < M:
                            store(p, z, written, m, co, v)
                        s += sum(v[r] for r in range(4) if m + r < M)
                    lane_sums[warp, lane, j, c] = s
            # warp_channel_sum: the 8 lanes of the same t; lane g == 0 writes red
            for lane in range(4):
                for j, c in itertools.product(range(t06.N_TILES), range(2)):
                    ch = wn0 + 8 * j + 2 * lane + c
                    red[warp // 2, ch] = sum(lane_sums[warp, lane + 4 * gg, j, c] for gg in range(8))
        for ch in range(BN):
            co = co0 + ch
            if co >= p.cout:
                continue
            mean = (red[0, ch] + red[1, ch]) / nvalid
            pixels = [(n, pq) for n in range(p.n) for pq in range(hw_out) if m0 <= n * hw_out + pq < m0 + nvalid]
            values = [z[(n * p.cout + co) * hw_out + pq] for n, pq in pixels]
            part_mean[bx, co] = mean
            part_m2[bx, co] = sum((v - mean) ** 2 for v in values)  # the second pass, the same sums
            assert mean == pytest.approx(sum(values) / len(values), rel=1e-12, abs=1e-12)
    expected = F.conv2d(p.x, p.wt, p.b, p.stride, p.pad, p.dil)
    assert set(written) == {1}, "every output written exactly once"
    assert torch.equal(torch.tensor(z, dtype=torch.float64).reshape(expected.shape), expected)
    # the tiles' statistics merge into the batch's (Chan), as the finalize kernel does
    flat_z = expected.permute(1, 0, 2, 3).reshape(p.cout, -1)
    for co in range(p.cout):
        n_, mean_, m2_ = 0, 0.0, 0.0
        for bx in range(-(-M // t06.BM)):
            nb = min(t06.BM, M - bx * t06.BM)
            delta = part_mean[bx, co] - mean_
            mean_ += delta * nb / (n_ + nb)
            m2_ += part_m2[bx, co] + delta * delta * n_ * nb / (n_ + nb)
            n_ += nb
        assert mean_ == pytest.approx(flat_z[co].mean().item(), rel=1e-9, abs=1e-9)
        assert m2_ / n_ == pytest.approx(flat_z[co].var(unbiased=False).item(), rel=1e-9, abs=1e-9)


# ---------------------------------------- 09's unit-stride dgrad: the forward's engine on flipped filters
# dgrad_as_forward, dgrad_flip_weights_kernel and conv_dgrad_tf32_unit_stride_kernel's epilogue
DGRAD_AS_FORWARD = [
    "d.C = s.K, d.H = s.P, d.W = s.Q;",
    "d.K = s.C, d.P = s.H, d.Q = s.W;",
    "d.stride_h = d.stride_w = 1;",
    "d.pad_h = s.dil_h * (s.R - 1) - s.pad_h, d.pad_w = s.dil_w * (s.S - 1) - s.pad_w;",
    "const int ss = int(i % s.S), r = int(i / s.S % s.R);",
    "const int64_t ck = i / (int64_t(s.R) * s.S);",
    "const int k = int(ck % s.K), c = int(ck / s.K);",
    "wflip[i] = w[((int64_t(k) * s.C + c) * s.R + (s.R - 1 - r)) * s.S + (s.S - 1 - ss)] * (gamma[k] * invstd[k]);",
    "tc_conv_gemm<kVecB>(u, wflip, d, m0, co0, ring, acc);",
    "const int co = co0 + wn0 + 8 * j + 2 * t + c;",
    "const int m = m0 + wm0 + 32 * q + 4 * g;",
    "const float a[4] = {acc[2 * q][j][c], acc[2 * q][j][2 + c], acc[2 * q + 1][j][c], acc[2 * q + 1][j][2 + c]};",
    "store_pixels4(grad_x, d, m, co, M, a, vec_ok);",
]
# (N, C, H, W, K, R, S, padding, dilation), stride 1: two pixel blocks (9 x 8 x 2), two channel blocks of
# grad_x (C = 66), padding beyond the reach of the filter (the engine's padding negative), dilation, 1 x 1
DGRAD_PROBLEMS = [(2, 3, 9, 8, 5, 3, 3, (1, 1), (1, 1)), (1, 66, 4, 5, 3, 3, 3, (1, 1), (1, 1)),
                  (2, 3, 5, 6, 4, 1, 3, (1, 2), (1, 1)), (1, 2, 9, 8, 3, 5, 4, (2, 1), (1, 2)),
                  (1, 5, 6, 7, 8, 1, 1, (0, 0), (1, 1))]


def test_09_dgrad_lines_are_the_kernels():
    text = flat(SOURCE09)
    missing = [line for line in DGRAD_AS_FORWARD if flat(line) not in text]
    assert not missing, f"09's unit-stride dgrad changed; update the model in this test: {missing}"


@pytest.mark.parametrize("spec", DGRAD_PROBLEMS, ids=lambda p: "x".join(map(str, p[:7])) + f"-pad{p[7]}-dil{p[8]}")
def test_09_unit_stride_dgrad_is_the_forward_engine_on_flipped_filters(spec):
    """grad_x of a unit-stride convolution, as version 2 computes it: the filters flipped and their
    channels swapped (with the BatchNorm scale), then the forward engine's model on dgrad_as_forward's
    shape and the epilogue's stores give autograd's gradient exactly, every pixel written once."""
    n, c, h, w, k, r, s, pad, dil = spec
    g = torch.Generator().manual_seed(sum(spec[:7]))
    ho, wo = h + 2 * pad[0] - dil[0] * (r - 1), w + 2 * pad[1] - dil[1] * (s - 1)
    u = torch.randint(-3, 4, (n, k, ho, wo), generator=g).double()
    wt = torch.randint(-3, 4, (k, c, r, s), generator=g).double()
    bn_scale = torch.randint(-4, 5, (k,), generator=g).double() / 2  # gamma * invstd, exact in binary
    wf = wt.reshape(-1).tolist()
    wflip = [0.0] * len(wf)
    for i in range(len(wf)):  # dgrad_flip_weights_kernel, element i
        ss, rr = i % s, i // s % r
        ck = i // (r * s)
        kk, cc = ck % k, ck // k
        wflip[i] = wf[((kk * c + cc) * r + (r - 1 - rr)) * s + (s - 1 - ss)] * float(bn_scale[kk])
    d_pad = (dil[0] * (r - 1) - pad[0], dil[1] * (s - 1) - pad[1])  # dgrad_as_forward
    p = Problem(n, k, ho, wo, c, r, s, (1, 1), d_pad, dil)
    assert (p.ho, p.wo) == (h, w), "the engine's output is grad_x's plane"
    p.x, p.xf = u, u.reshape(-1).tolist()
    p.wt, p.wf = torch.tensor(wflip, dtype=torch.float64).reshape(c, k, r, s), wflip
    x = torch.zeros(n, c, h, w, dtype=torch.float64, requires_grad=True)
    F.conv2d(x, wt * bn_scale.view(-1, 1, 1, 1), None, 1, pad, dil).backward(u)
    M = n * h * w
    for vec_b in ([False, True] if (k * r * s) % 4 == 0 else [False]):
        grad_x = [float("nan")] * (n * c * h * w)
        written = [0] * len(grad_x)
        for _, m0, co0, warps in blocks(p, vec_b, Conflicts()):
            for wm0, wn0, acc in warps.values():
                for lane in range(WARP):
                    g_, t = lane // 4, lane % 4
                    for j, cq in itertools.product(range(t06.N_TILES), range(2)):
                        co = co0 + wn0 + 8 * j + 2 * t + cq
                        for q in range(2):
                            m = m0 + wm0 + 32 * q + 4 * g_
                            if co < c and m < M:
                                store(p, grad_x, written, m, co, lane_pixels(acc, lane, q, j, cq))
        assert set(written) == {1}, "every pixel of grad_x written exactly once"
        assert torch.equal(torch.tensor(grad_x, dtype=torch.float64).reshape(x.shape), x.grad)


# --------------------------------------------------------------- 09's gemm_tile_tf32 (the backward)
def a_row(i, h, g):
    return 8 * i + 4 * h + (g & 3) + 16 * (g >> 2)


def test_gemm_tile_tf32_fragments_give_the_slice_product():
    """One slice (8 k) of a 64 x 128 tile, as version 1's loaders leave it in shared memory (a[k][row],
    b[k][col]): the 4 warps' fragments through the mma model, read back through the epilogues' mapping
    (row wr + a_row(i, h, g), column wc + 8 j + 2 t + e of acc[i][j][2 h + e]), give A B exactly; and
    every fragment read of a warp (one 32-bit word per lane) hits 32 distinct banks with the rows of
    kAStride = 68 and kBStride = 136 floats."""
    a_stride, b_stride = 68, 136
    conflicts = []

    def check_banks(what, words):
        if len({w % 32 for w in words}) != 32:
            conflicts.append(what)
    g = torch.Generator().manual_seed(7)
    a = torch.randint(-4, 5, (8, 64), generator=g).double()  # a[k][row]
    b = torch.randint(-4, 5, (8, 128), generator=g).double()  # b[k][col]
    product = a.T @ b
    got = torch.full((64, 128), float("nan"), dtype=torch.float64)
    for warp in range(4):
        wr, wc = (warp // 2) * 32, (warp % 2) * 64
        acc = [[[[0.0] * 4 for _ in range(8)] for _ in range(2)] for _ in range(WARP)]
        frag_a = [[None] * 2 for _ in range(WARP)]
        for lane in range(WARP):
            gg, t = lane // 4, lane % 4
            for i in range(2):
                row0, row1 = wr + a_row(i, 0, gg), wr + a_row(i, 1, gg)
                frag_a[lane][i] = [a[t, row0].item(), a[t, row1].item(), a[t + 4, row0].item(), a[t + 4, row1].item()]
        for i, h, k4 in itertools.product(range(2), range(2), range(2)):
            check_banks(f"A tile {i} row half {h} k + {4 * k4}",
                        [(lane % 4 + 4 * k4) * a_stride + wr + a_row(i, h, lane // 4) for lane in range(WARP)])
        for j in range(8):
            frag_b = []
            for lane in range(WARP):
                gg, t = lane // 4, lane % 4
                col = wc + 8 * j + gg
                frag_b.append([b[t, col].item(), b[t + 4, col].item()])
            for k4 in range(2):
                check_banks(f"B tile {j} k + {4 * k4}",
                            [(lane % 4 + 4 * k4) * b_stride + wc + 8 * j + lane // 4 for lane in range(WARP)])
            for i in range(2):
                tile = [acc[lane][i][j] for lane in range(WARP)]
                t06.mma(tile, [frag_a[lane][i] for lane in range(WARP)], frag_b)
        for lane in range(WARP):
            gg, t = lane // 4, lane % 4
            for i, h, j, e in itertools.product(range(2), range(2), range(8), range(2)):
                got[wr + a_row(i, h, gg), wc + 8 * j + 2 * t + e] = acc[lane][i][j][2 * h + e]
    assert torch.equal(got, product)
    assert not conflicts, conflicts[:4]  # (the mma model reads CUTLASS's layouts: test_matmul_tensor_cores)


# ------------------------------------------------------------------------------------ the tolerances
def fp16(t: torch.Tensor) -> torch.Tensor:
    return t.half().float()


def conv_emulated(x, w, stride, padding, dilation, operands=tf32, k_keep=None):
    """A tensor-core convolution without its bias: operands rounded, products summed exactly (float64)."""
    xr, wr = operands(x).double(), operands(w).double()
    if k_keep is not None:
        flat_w = wr.reshape(wr.shape[0], -1).clone()
        flat_w[:, k_keep:] = 0
        wr = flat_w.reshape(wr.shape)
    return F.conv2d(xr, wr, None, stride, padding, dilation)


def rel(y, ref):
    return (torch.linalg.vector_norm(y.double() - ref.double()) / torch.linalg.vector_norm(ref.double())).item()


def cpu_case08(sh, seed, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    fan_in = sh.c * sh.r * sh.s
    t = {"x": torch.randn(sh.n, sh.c, sh.h, sh.w, generator=g) * scale,
         "weight": torch.randn(sh.k, sh.c, sh.r, sh.s, generator=g) / fan_in ** 0.5,
         "bias": torch.randn(sh.k, generator=g) * 0.2 * scale if sh.bias else None,
         "bn_weight": 0.5 + torch.rand(sh.k, generator=g), "bn_bias": torch.randn(sh.k, generator=g) * 0.3 * scale,
         "running_mean": torch.randn(sh.k, generator=g) * 0.2 * scale, "running_var": 0.3 + torch.rand(sh.k, generator=g)}
    return t


def emulated08(t, sh, eps, operands=tf32, k_keep=None):
    """Version 2: acc on TF32 tensor cores, then relu(scale acc + shift) with the fold (float32 output)."""
    d = {k: (v.double() if v is not None else None) for k, v in t.items()}
    scale = d["bn_weight"] / torch.sqrt(d["running_var"] + eps)
    bias = d["bias"] if d["bias"] is not None else torch.zeros_like(scale)
    shift = d["bn_bias"] + (bias - d["running_mean"]) * scale
    acc = conv_emulated(t["x"], t["weight"], sh.stride, sh.padding, sh.dilation, operands, k_keep)
    return F.relu(acc * scale.view(1, -1, 1, 1) + shift.view(1, -1, 1, 1)).float()


SMALL08 = [sh for sh in spec08.SHAPES if sh.n * sh.k * sh.h * sh.w <= 400_000]


@pytest.mark.parametrize("sh", SMALL08, ids=lambda sh: sh.name)
def test_08_tolerance_accepts_tf32_and_rejects_a_dropped_tail(sh):
    t = cpu_case08(sh, seed=len(sh.name))
    eps = 1e-5
    ref = spec08.reference(t, sh, eps)
    tol = spec08.tf32_tolerance(t, sh.stride, sh.padding, sh.dilation, eps)
    got = rel(emulated08(t, sh, eps), ref)
    assert got <= tol / 2, (got, tol)  # genuine TF32 within half its bound
    assert got > spec08.TOL[torch.float32], got  # and outside the strict group's tolerance
    K = sh.c * sh.r * sh.s
    if K % 16:
        assert rel(emulated08(t, sh, eps, k_keep=K - K % 16), ref) > 4 * tol


@pytest.mark.parametrize("sh", [sh for _, sh in spec08.PROBE_SHAPES], ids=lambda sh: sh.name)
@pytest.mark.parametrize("scale", spec08.RANGE_SCALES)
def test_08_fp16_operands_fail_the_range_checks(scale, sh):
    """On every probed path (spec08.PROBE_SHAPES), as check_case scales a range probe's inputs."""
    t = cpu_case08(sh, seed=3, scale=scale)
    ref = spec08.reference(t, sh, 1e-5)
    tol = spec08.tf32_tolerance(t, sh.stride, sh.padding, sh.dilation, 1e-5)
    assert rel(emulated08(t, sh, 1e-5), ref) <= tol / 2
    err = rel(emulated08(t, sh, 1e-5, operands=fp16), ref)
    assert not err <= tol, (err, tol)  # NaN (1e5 overflows to inf) counts as failing


def truncated(t: torch.Tensor) -> torch.Tensor:
    """float32 -> TF32 as the tensor cores take an unrounded word: the low 13 bits dropped."""
    return (t.float().view(torch.int32) & ~0x1FFF).view(torch.float32)


@pytest.mark.parametrize("sh", [sh for _, sh in spec08.PROBE_SHAPES], ids=lambda sh: sh.name)
def test_08_truncated_operands_fail_the_positive_probe(sh):
    """check_case's positive probe (x, weight and bias in [0.5, 1.5)) on every probed path: rounded TF32
    within half the bound, x or the weight truncated outside it."""
    assert sh.c * sh.r * sh.s >= probes.POSITIVE_MIN_K
    t = cpu_case08(sh, seed=4)
    g = torch.Generator().manual_seed(5)
    t |= {k: probes.POSITIVE.draw(g, t[k].shape, device="cpu") for k in ("x", "weight", "bias")}
    ref = spec08.reference(t, sh, 1e-5)
    tol = spec08.tf32_tolerance(t, sh.stride, sh.padding, sh.dilation, 1e-5)
    assert rel(emulated08(t, sh, 1e-5), ref) <= tol / 2
    for k in ("x", "weight"):
        err = rel(emulated08(t | {k: truncated(t[k])}, sh, 1e-5, operands=lambda v: v), ref)
        assert err > 1.5 * tol, (k, err, tol)


def cpu_layer09(sh, seed, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    fan_in = sh.c * sh.r * sh.s
    return {"x": torch.randn(sh.n, sh.c, sh.h, sh.w, generator=g) * scale,
            "weight": torch.randn(sh.k, sh.c, sh.r, sh.s, generator=g) * 0.5 / fan_in ** 0.5,
            "bias": torch.randn(sh.k, generator=g) * 0.2 * scale if sh.bias else None,
            "bn_weight": 1.0 + 0.4 * (torch.rand(sh.k, generator=g) - 0.5) * 2,
            "bn_bias": torch.randn(sh.k, generator=g) * 0.3, "running_mean": torch.randn(sh.k, generator=g) * 0.1,
            "running_var": 0.5 + torch.rand(sh.k, generator=g)}


def emulated09_forward(t, sh, training, eps=1e-5, momentum=0.1, operands=tf32, k_keep=None):
    """Version 2's forward op: z on TF32 tensor cores (float32), the rest in float64 (version 1's float32
    arithmetic is far below these bounds)."""
    acc = conv_emulated(t["x"], t["weight"], sh.stride, sh.padding, sh.dilation, operands, k_keep)
    z = (acc + (0 if t["bias"] is None else t["bias"].double().view(1, -1, 1, 1))).float().double()
    gamma, beta = t["bn_weight"].double(), t["bn_bias"].double()
    rm, rv = t["running_mean"].double(), t["running_var"].double()
    if training:
        n = z.numel() // z.shape[1]
        mean, var = z.mean((0, 2, 3)), z.var((0, 2, 3), unbiased=False)
    else:
        mean, var = rm, rv
    invstd = (var + eps).rsqrt()
    y = F.relu((z - mean.view(1, -1, 1, 1)) * (gamma * invstd).view(1, -1, 1, 1) + beta.view(1, -1, 1, 1))
    out = {"y": y, "z": z, "save_mean": mean, "save_invstd": invstd}
    if training:
        out |= {"running_mean": (1 - momentum) * rm + momentum * mean,
                "running_var": (1 - momentum) * rv + momentum * var * n / (n - 1)}
    return out


def bounds09(t, sh, training):
    return spec09.tf32_forward_bounds(t["x"], t["weight"], t["bias"], t["bn_weight"], t["bn_bias"], t["running_mean"],
                                      t["running_var"], 1e-5, 0.1, sh.stride, sh.padding, sh.dilation, training)


SMALL09 = [sh for sh in spec09.SHAPES if sh.n * sh.k * sh.h * sh.w <= 300_000]


@pytest.mark.parametrize("training", [True, False], ids=["train", "eval"])
@pytest.mark.parametrize("sh", SMALL09, ids=lambda sh: sh.name)
def test_09_forward_tolerances_accept_tf32_and_reject_a_dropped_tail(sh, training):
    t = cpu_layer09(sh, seed=len(sh.name))
    bounds = bounds09(t, sh, training)
    got = emulated09_forward(t, sh, training)
    K = sh.c * sh.r * sh.s
    dropped = emulated09_forward(t, sh, training, k_keep=K - K % 16) if K % 16 else None
    for name, (ref, bound, floor) in bounds.items():
        tol = spec09.bound_tolerance(ref, bound, floor)
        err = rel(got[name], ref) if torch.linalg.vector_norm(ref) > 0 else 0.0
        assert err <= tol / 2 or err <= floor, (name, err, tol)
    # genuine TF32 is outside the strict output tolerance; a dropped K tail outside the TF32 bound
    assert rel(got["y"], bounds["y"][0]) > spec09.Y_TOL
    if dropped is not None:
        ref, bound, floor = bounds["y"]
        assert rel(dropped["y"], ref) > 4 * spec09.bound_tolerance(ref, bound, floor)


@pytest.mark.parametrize("scale", spec09.RANGE_SCALES)
def test_09_fp16_operands_fail_the_range_checks(scale):
    sh = spec09.Shape("range", 2, 24, 13, 11, 40, 3, 3, padding=(1, 1), bias=True)  # as the spec's range check
    t = cpu_layer09(sh, seed=5, scale=scale)
    bounds = bounds09(t, sh, True)
    ref, bound, floor = bounds["z"]
    tol = spec09.bound_tolerance(ref, bound, floor)
    assert rel(emulated09_forward(t, sh, True)["z"], ref) <= tol / 2
    err = rel(emulated09_forward(t, sh, True, operands=fp16)["z"], ref)
    assert not err <= tol, (err, tol)


def emulated09_backward(gy, x, w, z, y, gamma, mean, invstd, training, stride, padding, dilation, drop_k8=False):
    """Version 2's grad_input and grad_weight: dgrad multiplies TF32(w * bn_scale) by TF32(u), wgrad
    TF32(u) by TF32(x) and then scales by bn_scale; u in float64 (version 1's float32 is far below)."""
    dz, _, _ = spec09._dz(gy, z, y, gamma, mean, invstd, training)
    bn_scale = (gamma.double() * invstd.double())
    u = dz / bn_scale.view(1, -1, 1, 1)
    w_scaled = tf32((w.double() * bn_scale.view(-1, 1, 1, 1)).float()).double()
    if drop_k8:  # the last 8 of the dgrad reduction's (k, r, s) left out: one k step of gemm_tile_tf32
        flat_w = w_scaled.permute(1, 0, 2, 3).reshape(w.shape[1], -1).clone()
        flat_w[:, flat_w.shape[1] - 8:] = 0
        w_scaled = flat_w.reshape(w.shape[1], w.shape[0], *w.shape[2:]).permute(1, 0, 2, 3)
    gx = torch.nn.grad.conv2d_input(x.shape, w_scaled, tf32(u.float()).double(), stride, padding, dilation)
    gw = torch.nn.grad.conv2d_weight(tf32(x).double(), w.shape, tf32(u.float()).double(), stride, padding, dilation)
    return gx, gw * bn_scale.view(-1, 1, 1, 1)


@pytest.mark.parametrize("training", [True, False], ids=["train", "eval"])
@pytest.mark.parametrize("sh", SMALL09, ids=lambda sh: sh.name)
def test_09_backward_tolerances_accept_tf32(sh, training):
    t = cpu_layer09(sh, seed=3 + len(sh.name))
    g = torch.Generator().manual_seed(11)
    fwd = spec09._audit_forward(t["x"], t["weight"], t["bias"], t["bn_weight"], t["bn_bias"], t["running_mean"],
                                t["running_var"], None, training, 0.1, 1e-5, sh.stride, sh.padding, sh.dilation, True)
    y, z, mean, invstd = (v.float() for v in fwd)
    gy = torch.randn(y.shape, generator=g)
    saved = (gy, t["x"], t["weight"], z, y, t["bn_weight"], mean, invstd, training, sh.stride, sh.padding, sh.dilation)
    bounds = spec09.tf32_backward_bounds(*saved)
    gx, gw = emulated09_backward(*saved)
    for name, got in (("grad_input", gx), ("grad_weight", gw)):
        ref, bound, floor = bounds[name]
        tol = spec09.bound_tolerance(ref, bound, floor)
        assert rel(got, ref) <= tol / 2, (name, rel(got, ref), tol)
        assert rel(got, ref) > spec09.GRAD_TOL / 10  # TF32, not strict fp32 (emulation sanity)
    if sh.k * sh.r * sh.s > 8:
        gx_dropped, _ = emulated09_backward(*saved, drop_k8=True)
        ref, bound, floor = bounds["grad_input"]
        assert rel(gx_dropped, ref) > 4 * spec09.bound_tolerance(ref, bound, floor)


def _probe_layer09(sh, probe, seed):
    """cpu_layer09 made a precision probe's as the spec's check_tf32_forward and check_tf32_backward make it."""
    t = cpu_layer09(sh, seed=seed)
    g = torch.Generator().manual_seed(seed + 1)
    if probe.kind == "range":
        return t | {"x": probe.scaled(t["x"]), "bias": probe.scaled(t["bias"])}
    return t | {k: probe.draw(g, t[k].shape, device="cpu") for k in ("x", "weight", "bias")}


@pytest.mark.parametrize("path,sh", spec09.PROBE_SHAPES, ids=lambda v: v if isinstance(v, str) else "")
def test_09_probes_on_every_path(path, sh):
    """Every probed path: the range probes (FP16 operands fail z's bound, TF32 passes), the positive
    forward (x truncated fails z's bound) and the positive backward in eval (u or x truncated in grad_w,
    u truncated in grad_x, fail; rounded TF32 passes)."""
    for probe in probes.RANGE_PROBES:
        t = _probe_layer09(sh, probe, 5)
        ref, bound, floor = bounds09(t, sh, True)["z"]
        tol = spec09.bound_tolerance(ref, bound, floor)
        assert rel(emulated09_forward(t, sh, True)["z"], ref) <= tol / 2
        assert not rel(emulated09_forward(t, sh, True, operands=fp16)["z"], ref) <= tol
    t = _probe_layer09(sh, probes.POSITIVE, 6)
    ref, bound, floor = bounds09(t, sh, True)["z"]
    tol = spec09.bound_tolerance(ref, bound, floor)
    assert rel(emulated09_forward(t, sh, True)["z"], ref) <= tol / 2
    assert rel(emulated09_forward(t | {"x": truncated(t["x"])}, sh, True, operands=lambda v: v)["z"], ref) > 1.5 * tol
    # the backward, eval: y > 0 everywhere, grad_y in [0.5, 1.5)
    fwd = spec09._audit_forward(t["x"], t["weight"], t["bias"], t["bn_weight"], t["bn_bias"], t["running_mean"],
                                t["running_var"], None, False, 0.1, 1e-5, sh.stride, sh.padding, sh.dilation, True)
    y, z, mean, invstd = (v.float() for v in fwd)
    assert (y > 0).all()
    gy = probes.POSITIVE.draw(torch.Generator().manual_seed(7), y.shape, device="cpu")
    saved = (gy, t["x"], t["weight"], z, y, t["bn_weight"], mean, invstd, False, sh.stride, sh.padding, sh.dilation)
    bounds = spec09.tf32_backward_bounds(*saved)
    tols = {name: spec09.bound_tolerance(*bounds[name]) for name in ("grad_input", "grad_weight")}
    gx, gw = emulated09_backward(*saved)
    assert rel(gx, bounds["grad_input"][0]) <= tols["grad_input"] / 2
    assert rel(gw, bounds["grad_weight"][0]) <= tols["grad_weight"] / 2
    dz, _, _ = spec09._dz(gy, z, y, t["bn_weight"], mean, invstd, False)
    bn_scale = (t["bn_weight"].double() * invstd.double())
    u = truncated((dz / bn_scale.view(1, -1, 1, 1)).float()).double()
    w_scaled = tf32((t["weight"].double() * bn_scale.view(-1, 1, 1, 1)).float()).double()
    gx_t = torch.nn.grad.conv2d_input(t["x"].shape, w_scaled, u, sh.stride, sh.padding, sh.dilation)
    gw_t = torch.nn.grad.conv2d_weight(tf32(t["x"]).double(), t["weight"].shape, u, sh.stride, sh.padding,
                                       sh.dilation) * bn_scale.view(-1, 1, 1, 1)
    assert rel(gx_t, bounds["grad_input"][0]) > 1.3 * tols["grad_input"], (rel(gx_t, bounds["grad_input"][0]), tols)
    assert rel(gw_t, bounds["grad_weight"][0]) > 1.3 * tols["grad_weight"], (rel(gw_t, bounds["grad_weight"][0]), tols)


def test_tensor_core_groups_are_declared():
    for spec, group in ((spec08.SPEC, spec08.TF32_GROUP), (spec09.SPEC, spec09.TF32_GROUP)):
        names = {ch.name for ch in spec.checks() if ch.group == group}
        assert {f"{group}[values near {s:g}]" for s in spec08.RANGE_SCALES} <= names
        assert spec.points[group] == 2
