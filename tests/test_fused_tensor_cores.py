"""Exercises 08's and 09's version 2 (TF32 tensor cores) without a GPU: the bank conflicts of their shared
memory accesses, which no GPU check sees, and their grading tolerances against emulated TF32 and FP16
arithmetic, on every probed path.

1. The forward engine (tc_conv_gemm, mma_stage: the gather and weight copies, the swizzle, the fragment
   reads, the mma) is exercise 06's version 3 with a 64-channel tile, given to both exercises in one
   course header, course/tf32_conv.cuh. Its lines are asserted verbatim there (ENGINE_LINES), so
   tests/test_conv2d_tensor_cores.py's model of 06's kernel at BN3 = 64, which finds no bank conflict,
   holds for it; both exercise files are asserted to take it from there and to hold no copy.
2. 09's gemm_tile_tf32 (the backward's GEMMs): its fragment reads of version 1's shared slices, through
   mma.sync m16n8k8 as CUTLASS's cute lays it out, and the dgrad and wgrad epilogues' mapping of the D
   fragment give the slice's product exactly, and every read of a warp hits 32 banks. Its lines are
   asserted verbatim (GEMM_TILE_TF32): if they change, this test fails until its model changes with them.
3. The tensor-core groups' tolerances (grader/specs/ex08_*.py, ex09_*.py) accept emulated TF32 within half
   of their bound, and reject a dropped K tail, FP16 operands on inputs FP16 cannot hold and truncated
   operands on the positive probe; the strict groups' tolerances reject TF32.

The values of the epilogues (08's BatchNorm and ReLU, 09's z, tile statistics and unit-stride data
gradient) are checked on the GPU by each exercise's TF32 group, which the known-wrong variants of
tests/known_wrong/ex08_*.py and ex09_*.py show failing on a planted fault (c_fragment_rows_swapped,
scale_loses_the_sign_of_gamma, c_fragment_rows_swapped_in_z, tile_mean_over_a_full_tile,
dgrad_filter_not_flipped).
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
from tests.test_conv2d_tensor_cores import WARP, tf32

SOURCE08 = (REPO / "solutions" / "08_conv_bn_relu_inference" / "conv_bn_relu_inference.cu").read_text()
SOURCE09 = (REPO / "solutions" / "09_conv_bn_relu_training" / "conv_bn_relu_training.cu").read_text()
ENGINE = (REPO / "grader" / "toolchain" / "include" / "course" / "tf32_conv.cuh").read_text()

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


@pytest.mark.parametrize("source, lines", [(ENGINE, ENGINE_LINES), (SOURCE09, GEMM_TILE_TF32)],
                         ids=["engine", "09 backward"])
def test_transliterated_lines_are_the_kernels(source, lines):
    text = flat(source)
    missing = [line for line in lines if flat(line) not in text]
    assert not missing, (f"a TF32 kernel changed; update its model (the engine's: 06's, in "
                         f"tests/test_conv2d_tensor_cores.py; gemm_tile_tf32's: below): {missing}")
    assert (t06.BM, t06.BK, t06.WM, t06.WN, t06.STAGES) == (128, 16, 64, 32, 3)  # 06's model: the same tiles


@pytest.mark.parametrize("source", [SOURCE08, SOURCE09], ids=["08", "09"])
def test_the_exercises_take_the_engine_from_the_header(source):
    """One home for the engine: an exercise file that defines any of its parts again (a copy drifts from the
    header whose lines ENGINE_LINES holds to 06's model) fails here."""
    parts = ["int kTcPixels", "int kTcK ", "struct TcStage", "int swizzle(", "void mma_stage(", "void tc_conv_gemm(",
             "cp_async_wait<"]
    assert not [p for p in parts if p in source], "the TF32 engine belongs in course/tf32_conv.cuh only"


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
