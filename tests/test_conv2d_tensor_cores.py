"""Exercise 06's version 3 (TF32 tensor cores) without a GPU: a model of its data movement, and its
grading tolerance against emulated TF32 and FP16 arithmetic.

1. The kernel's index arithmetic (conv2d_kernel3's gather and weight copies, swizzle3, mma_stage3's
   fragment loads, store_y3), transliterated line by line into Python, runs on a model of the hardware:
   a stage's shared memory as float arrays, and mma.sync m16n8k8 from the fragment layouts CUTLASS's
   cute declares (tests/test_matmul_tensor_cores.py: TF32_A, TF32_B, C_MAP, written independently of
   the kernel's comments). The reassembled convolution must equal F.conv2d exactly (small integers,
   float64), every output written once, for geometries off every tile, both tile widths and both
   weight-copy paths.
2. The layouts are conflict-free: each quarter-warp's 16-byte fragment reads of A and B cover the 8
   slots of 128 bytes, the gather's 4-byte writes of a warp hit 32 banks, the weights' 16-byte writes
   are conflict-free per quarter-warp.
3. The tensor-core group's tolerance (grader/specs/ex06_conv2d.py) accepts emulated TF32 and rejects a
   dropped K tail and FP16 operands on a range FP16 cannot hold, and the strict groups' tolerance
   rejects TF32.

The source lines the transliteration follows are asserted verbatim (SOURCE_LINES): if the kernel's
arithmetic changes, this test fails until the transliteration changes with it.
"""
from __future__ import annotations

import itertools
import re

import pytest
import torch
import torch.nn.functional as F

from grader.env import REPO
from grader.verify import precision as probes
from grader.specs import ex06_conv2d as spec06
from tests.test_matmul_tensor_cores import C_MAP, TF32_A, TF32_B

SOURCE = (REPO / "solutions" / "06_conv2d" / "conv2d.cu").read_text()


def constant(name: str) -> int:
    return int(re.search(rf"constexpr int (?:\w+ = \d+, )*{name} = (\d+)", SOURCE).group(1))


BM, BK, WM, WN, STAGES = (constant(n) for n in ("kBM3", "kBK3", "kWM3", "kWN3", "kStages3"))
M_TILES, N_TILES = WM // 16, WN // 8
WARP = 32

# the lines whose arithmetic is transliterated below
SOURCE_LINES = [
    "__device__ __forceinline__ int swizzle3(int k, int m) { return m ^ (((k >> 2) & 3) << 3); }",
    "const float4 v = *reinterpret_cast<const float4*>(&st.B[wn0 + 8 * j + g][4 * t]);",
    "b[j][0] = to_tf32(v.x), b[j][1] = to_tf32(v.y), b[j][2] = to_tf32(v.z), b[j][3] = to_tf32(v.w);",
    "const int k = 4 * t + 2 * step + h;",
    "const float4 v = *reinterpret_cast<const float4*>(&st.A[k][swizzle3(k, wm0 + 32 * q + 4 * g)]);",
    "a[2 * q][2 * h] = to_tf32(v.x), a[2 * q][2 * h + 1] = to_tf32(v.y);",
    "a[2 * q + 1][2 * h] = to_tf32(v.z), a[2 * q + 1][2 * h + 1] = to_tf32(v.w);",
    "for (int j = 0; j < kNTiles3; ++j) mma_tf32(acc[i][j], a[i], b[j][2 * step], b[j][2 * step + 1]);",
    "const int co = co0 + 8 * j + 2 * t + c;",
    "const int64_t m = m0 + 32 * q + 4 * g;",
    "const float v[4] = {acc[2 * q][j][c] + b, acc[2 * q][j][2 + c] + b, acc[2 * q + 1][j][c] + b,",
    "acc[2 * q + 1][j][2 + c] + b};",
    "const int a_row = tid % kBM3, a_k = (tid / kBM3) * kAPer;",
    "cp_async4(&st.A[a_k + e][swizzle3(a_k + e, a_row)], ok ? xn + c_off + ih * s.w + iw : x, ok);",
    "const int b_row = tid / 4, b_c = tid % 4;",
    "const int r = b_row + pass * kBRows;",
    "cp_async16(&st.B[r][4 * b_c], ok ? src : weight, ok);",
    "cp_async4(&st.B[r][4 * b_c + e], ok ? src + e : weight, ok);",
    "const int wm0 = (warp / (BN3 / kWN3)) * kWM3, wn0 = (warp % (BN3 / kWN3)) * kWN3;",
    "store_y3(y, bias, acc, s, m0 + wm0, co0 + wn0, lane);",
    "const int steps = (K + kBK3 - 1) / kBK3;",
    # the tap-major order (cin % 16 == 0) and its weight copy
    "const int step = k0 / kBK3, chunk = step / khw, tap = step - chunk * khw, ci0 = chunk * kBK3;",
    "const int kh = tap / s.kw, kw = tap - kh * s.kw;",
    "const bool ok = ih >= 0 && ih < s.h && iw >= 0 && iw < s.w;",
    "const float* src = xn + (ci0 + a_k) * hw_in + ih * s.w + iw;",
    "cp_async4(&st.A[a_k + e][swizzle3(a_k + e, a_row)], ok ? src + e * hw_in : x, ok);",
    "const float* w = weight + (int64_t(co) * khw + tap) * s.cin + ci0 + 4 * b_c; // weight_t[co][tap][ci]",
    "cp_async16(&st.B[r][4 * b_c], co < s.cout ? w : weight, co < s.cout);",
    "weight_t[i] = weight[(row - tap) * cin + int64_t(ci) * khw + tap];",
]
HEADER = (REPO / "solutions" / "06_conv2d" / "conv2d.h").read_text()
HEADER_LINES = ["return version == 3 && s.cin % 16 == 0;"]


def test_transliterated_lines_are_the_kernels():
    text = " ".join(SOURCE.split())
    missing = [line for line in SOURCE_LINES if " ".join(line.split()) not in text]
    assert not missing, f"conv2d.cu changed; update the model in this test: {missing}"
    header = " ".join(HEADER.split())
    assert all(" ".join(line.split()) in header for line in HEADER_LINES), "conv2d.h's conv2d_weight_scratch changed"
    assert (BM, BK, WM, WN) == (128, 16, 64, 32)


def swizzle3(k: int, m: int) -> int:
    return m ^ (((k >> 2) & 3) << 3)


# ------------------------------------------------------------------------------ the kernel, modelled
class Problem:
    def __init__(self, n, cin, h, w, cout, kh, kw, stride=(1, 1), pad=(0, 0), dil=(1, 1), seed=0):
        g = torch.Generator().manual_seed(seed)
        self.x = torch.randint(-3, 4, (n, cin, h, w), generator=g).double()
        self.wt = torch.randint(-3, 4, (cout, cin, kh, kw), generator=g).double()
        self.b = torch.randint(-3, 4, (cout,), generator=g).double()
        self.n, self.cin, self.h, self.w, self.cout, self.kh, self.kw = n, cin, h, w, cout, kh, kw
        self.stride, self.pad, self.dil = stride, pad, dil
        self.ho = (h + 2 * pad[0] - dil[0] * (kh - 1) - 1) // stride[0] + 1
        self.wo = (w + 2 * pad[1] - dil[1] * (kw - 1) - 1) // stride[1] + 1
        self.xf = self.x.reshape(-1).tolist()
        self.wf = self.wt.reshape(-1).tolist()

    def reference(self):
        return F.conv2d(self.x, self.wt, self.b, self.stride, self.pad, self.dil)


class Conflicts:
    """Bank-conflict bookkeeping: every access of one instruction, grouped as the hardware serves it."""

    def __init__(self):
        self.bad = []

    def quarter_warps_16(self, what, offsets):
        """16-byte accesses (float offsets, 32 lanes): each quarter-warp's 8 must cover 8 distinct slots."""
        for q in range(4):
            slots = [(offsets[lane] // 4) % 8 for lane in range(8 * q, 8 * q + 8)]
            if len(set(slots)) != 8:
                self.bad.append((what, q, slots))

    def warp_4(self, what, offsets):
        """4-byte accesses: the warp's 32 must hit 32 distinct banks (or the same word)."""
        banks = {}
        for off in offsets:
            banks.setdefault(off % 32, set()).add(off)
        if any(len(words) > 1 for words in banks.values()):
            self.bad.append((what, sorted(offsets)))


def weight_tap_major(p: Problem) -> list:
    """conv2d_weight_kernel3: weight (cout, cin, kh, kw) -> weight_t (cout, kh, kw, cin), flat."""
    khw = p.kh * p.kw
    out = [None] * len(p.wf)
    for i in range(len(out)):
        ci, row = i % p.cin, i // p.cin
        tap = row % khw
        out[i] = p.wf[(row - tap) * p.cin + ci * khw + tap]
    return out


def load_stage_tap_major(p: Problem, bn: int, m0: int, co0: int, k0: int, conflicts: Conflicts, weight_t: list):
    """load_stage with kTapMajor: one tap and 16 channels per step; B from weight_t."""
    threads = 2 * bn
    a_per = BM * BK // threads
    b_rows = threads // 4
    hw_out, hw_in, khw = p.ho * p.wo, p.h * p.w, p.kh * p.kw
    M = p.n * hw_out
    A = [[None] * BM for _ in range(BK)]
    B = [[None] * BK for _ in range(bn)]
    a_writes, b_writes = {}, {}
    step = k0 // BK
    chunk, tap = step // khw, step % khw
    ci0 = chunk * BK
    kh, kw = tap // p.kw, tap % p.kw
    for tid in range(threads):
        a_row, a_k = tid % BM, (tid // BM) * a_per
        m_load = m0 + a_row
        xn, ih0, iw0 = 0, -(1 << 30), 0
        if m_load < M:
            n = m_load // hw_out
            pp = m_load - n * hw_out
            oh, ow = pp // p.wo, pp % p.wo
            xn = n * p.cin * hw_in
            ih0 = oh * p.stride[0] - p.pad[0]
            iw0 = ow * p.stride[1] - p.pad[1]
        ih, iw = ih0 + kh * p.dil[0], iw0 + kw * p.dil[1]
        ok = 0 <= ih < p.h and 0 <= iw < p.w
        src = xn + (ci0 + a_k) * hw_in + ih * p.w + iw
        for e in range(a_per):
            col = swizzle3(a_k + e, a_row)
            assert A[a_k + e][col] is None, "two copies to one element of A"
            A[a_k + e][col] = p.xf[src + e * hw_in] if ok else 0.0
            a_writes.setdefault((tid // WARP, e), []).append((a_k + e) * BM + col)
        b_row, b_c = tid // 4, tid % 4
        for pas in range(2):
            r = b_row + pas * b_rows
            co = co0 + r
            w = (co * khw + tap) * p.cin + ci0 + 4 * b_c
            for e in range(4):
                assert B[r][4 * b_c + e] is None, "two copies to one element of B"
                B[r][4 * b_c + e] = weight_t[w + e] if co < p.cout else 0.0
            b_writes.setdefault((tid // WARP, pas), []).append(r * BK + 4 * b_c)
    assert all(v is not None for row in A for v in row) and all(v is not None for row in B for v in row)
    for key, offs in a_writes.items():
        conflicts.warp_4(f"gather write {key}", offs)
    for key, offs in b_writes.items():
        conflicts.quarter_warps_16(f"weight write {key}", offs)
    return A, B


def load_stage(p: Problem, bn: int, vec_b: bool, m0: int, co0: int, k0: int, conflicts: Conflicts):
    """conv2d_kernel3's load_stage for every thread of the block: the stage's A[k][m] and B[co][k]."""
    threads = 2 * bn
    a_per = BM * BK // threads
    b_rows = threads // 4
    hw_out, hw_in, khw = p.ho * p.wo, p.h * p.w, p.kh * p.kw
    M, K = p.n * hw_out, p.cin * khw
    A = [[None] * BM for _ in range(BK)]
    B = [[None] * BK for _ in range(bn)]
    a_writes = {}  # (warp, e) -> offsets
    b_writes = {}
    for tid in range(threads):
        a_row, a_k = tid % BM, (tid // BM) * a_per
        m_load = m0 + a_row
        xn, ih0, iw0 = 0, -(1 << 30), 0
        if m_load < M:
            n = m_load // hw_out
            pp = m_load - n * hw_out
            oh, ow = pp // p.wo, pp % p.wo
            xn = n * p.cin * hw_in
            ih0 = oh * p.stride[0] - p.pad[0]
            iw0 = ow * p.stride[1] - p.pad[1]
        k = k0 + a_k
        ci = k // khw
        kh = (k - ci * khw) // p.kw
        kw = k - ci * khw - kh * p.kw
        c_off = ci * hw_in
        for e in range(a_per):
            ih, iw = ih0 + kh * p.dil[0], iw0 + kw * p.dil[1]
            ok = k < K and 0 <= ih < p.h and 0 <= iw < p.w
            col = swizzle3(a_k + e, a_row)
            assert A[a_k + e][col] is None, "two copies to one element of A"
            A[a_k + e][col] = p.xf[xn + c_off + ih * p.w + iw] if ok else 0.0
            a_writes.setdefault((tid // WARP, e), []).append((a_k + e) * BM + col)
            kw += 1
            if kw == p.kw:
                kw = 0
                kh += 1
                if kh == p.kh:
                    kh = 0
                    c_off += hw_in
            k += 1
        b_row, b_c = tid // 4, tid % 4
        for pas in range(2):
            r = b_row + pas * b_rows
            co, kb = co0 + r, k0 + 4 * b_c
            for e in range(4):
                ok = co < p.cout and kb + e < K
                if vec_b:  # one 16-byte copy, whole or zeros: K % 4 == 0
                    ok = co < p.cout and kb < K
                assert B[r][4 * b_c + e] is None, "two copies to one element of B"
                B[r][4 * b_c + e] = p.wf[co * K + kb + e] if ok else 0.0
            b_writes.setdefault((tid // WARP, pas), []).append(r * BK + 4 * b_c)
    assert all(v is not None for row in A for v in row) and all(v is not None for row in B for v in row)
    for key, offs in a_writes.items():
        conflicts.warp_4(f"gather write {key}", offs)
    if vec_b:
        for key, offs in b_writes.items():
            conflicts.quarter_warps_16(f"weight write {key}", offs)
    return A, B


def mma(acc, a_regs, b_regs):
    """mma.sync m16n8k8 (TF32 in, float32 sums; exact here): a_regs[lane][4], b_regs[lane][2], acc[lane][4]."""
    At = [[None] * 8 for _ in range(16)]
    Bt = [[None] * 8 for _ in range(8)]  # Bt[n][k]
    for lane in range(WARP):
        for v in range(4):
            m, k = TF32_A[lane, v]
            At[m][k] = a_regs[lane][v]
        for v in range(2):
            n, k = TF32_B[lane, v]
            Bt[n][k] = b_regs[lane][v]
    for lane in range(WARP):
        for v in range(4):
            m, n = C_MAP[lane, v]
            acc[lane][v] += sum(At[m][k] * Bt[n][k] for k in range(8))


def mma_stage3(A, B, acc, wm0, wn0, conflicts: Conflicts):
    """mma_stage3 for the 32 lanes of one warp; acc[lane][i][j][4]."""
    b = [[[None] * 4 for _ in range(N_TILES)] for _ in range(WARP)]
    for j in range(N_TILES):
        offs = []
        for lane in range(WARP):
            g, t = lane // 4, lane % 4
            row = wn0 + 8 * j + g
            b[lane][j] = [B[row][4 * t + e] for e in range(4)]
            offs.append(row * BK + 4 * t)
        conflicts.quarter_warps_16(f"B fragment j={j}", offs)
    for step in range(2):
        a = [[[None] * 4 for _ in range(M_TILES)] for _ in range(WARP)]
        for h, q in itertools.product(range(2), range(2)):
            offs = []
            for lane in range(WARP):
                g, t = lane // 4, lane % 4
                k = 4 * t + 2 * step + h
                col = swizzle3(k, wm0 + 32 * q + 4 * g)
                v = A[k][col:col + 4]
                offs.append(k * BM + col)
                a[lane][2 * q][2 * h], a[lane][2 * q][2 * h + 1] = v[0], v[1]
                a[lane][2 * q + 1][2 * h], a[lane][2 * q + 1][2 * h + 1] = v[2], v[3]
            conflicts.quarter_warps_16(f"A fragment step={step} h={h} q={q}", offs)
        for i, j in itertools.product(range(M_TILES), range(N_TILES)):
            tile = [acc[lane][i][j] for lane in range(WARP)]
            mma(tile, [a[lane][i] for lane in range(WARP)],
                [[b[lane][j][2 * step], b[lane][j][2 * step + 1]] for lane in range(WARP)])


def store_y3(p: Problem, y, written, acc, m0, co0):
    hw_out = p.ho * p.wo
    M = p.n * hw_out
    for lane in range(WARP):
        g, t = lane // 4, lane % 4
        for j, c in itertools.product(range(N_TILES), range(2)):
            co = co0 + 8 * j + 2 * t + c
            if co >= p.cout:
                continue
            bias = float(p.b[co])
            for q in range(2):
                m = m0 + 32 * q + 4 * g
                if m >= M:
                    continue
                v = [acc[lane][2 * q][j][c] + bias, acc[lane][2 * q][j][2 + c] + bias,
                     acc[lane][2 * q + 1][j][c] + bias, acc[lane][2 * q + 1][j][2 + c] + bias]
                for r in range(4):  # the vector store writes the same 4 (hw_out % 4 == 0 keeps them in one image)
                    mr = m + r
                    if mr >= M:
                        break
                    n = mr // hw_out
                    idx = (n * p.cout + co) * hw_out + (mr - n * hw_out)
                    written[idx] += 1
                    y[idx] = v[r]


def run_kernel3(p: Problem, bn: int, vec_b: bool, tap_major: bool = False):
    hw_out = p.ho * p.wo
    M, K = p.n * hw_out, p.cin * p.kh * p.kw
    y = [float("nan")] * (p.n * p.cout * hw_out)
    written = [0] * len(y)
    conflicts = Conflicts()
    steps = (K + BK - 1) // BK
    warps = 2 * bn // WARP
    weight_t = weight_tap_major(p) if tap_major else None
    for bx, by in itertools.product(range(-(-M // BM)), range(-(-p.cout // bn))):
        m0, co0 = bx * BM, by * bn
        acc = {w: [[[[0.0] * 4 for _ in range(N_TILES)] for _ in range(M_TILES)] for _ in range(WARP)]
               for w in range(warps)}
        for step in range(steps):
            A, B = (load_stage_tap_major(p, bn, m0, co0, step * BK, conflicts, weight_t) if tap_major
                    else load_stage(p, bn, vec_b, m0, co0, step * BK, conflicts))
            for warp in range(warps):
                wm0, wn0 = (warp // (bn // WN)) * WM, (warp % (bn // WN)) * WN
                mma_stage3(A, B, acc[warp], wm0, wn0, conflicts)
        for warp in range(warps):
            wm0, wn0 = (warp // (bn // WN)) * WM, (warp % (bn // WN)) * WN
            store_y3(p, y, written, acc[warp], m0 + wm0, co0 + wn0)
    return torch.tensor(y, dtype=torch.float64).reshape(p.n, p.cout, p.ho, p.wo), written, conflicts


# (n, cin, h, w, cout, kh, kw, stride, padding, dilation): K = cin kh kw = 27 (a tail of 11), 64 (no tail,
# vector weight copies), 5 (one short step); M off 128 and Ho Wo % 4 != 0; cout off 64 and 128; strides,
# padding and dilation that differ by axis; cin 16 and 32 (whole steps of channels: the tap-major order)
PROBLEMS = [
    (2, 3, 9, 7, 70, 3, 3, (1, 2), (1, 0), (1, 1)),
    (1, 4, 13, 12, 33, 4, 4, (2, 1), (2, 1), (1, 2)),
    (3, 5, 5, 6, 5, 1, 1, (1, 1), (0, 0), (1, 1)),
    (1, 16, 7, 9, 70, 3, 2, (1, 2), (1, 1), (2, 1)),
    (2, 32, 5, 4, 9, 1, 1, (1, 1), (0, 0), (1, 1)),
]


@pytest.mark.parametrize("bn", [64, 128])
@pytest.mark.parametrize("problem", PROBLEMS, ids=lambda p: "x".join(map(str, p[:7])))
def test_kernel3_model_is_exact_and_conflict_free(problem, bn):
    n, cin, h, w, cout, kh, kw, stride, pad, dil = problem
    p = Problem(n, cin, h, w, cout, kh, kw, stride, pad, dil, seed=sum(problem[:7]))
    K = cin * kh * kw
    # the launcher's choice (conv2d_weight_scratch) where cin % 16 == 0, and the generic order always
    paths = [(False, False)] + ([(True, False)] if K % 4 == 0 else []) + ([(True, True)] if cin % BK == 0 else [])
    for vec_b, tap_major in paths:
        y, written, conflicts = run_kernel3(p, bn, vec_b, tap_major)
        assert set(written) == {1}, "every output written exactly once"
        assert torch.equal(y, p.reference()), (y - p.reference()).abs().max()
        assert not conflicts.bad, conflicts.bad[:3]


# ------------------------------------------------------------------------------ the tolerance
def tf32(t: torch.Tensor) -> torch.Tensor:
    """float32 -> TF32, rounded to nearest with ties away from zero (cvt.rna): 10 mantissa bits."""
    bits = t.float().view(torch.int32).to(torch.int64)
    rounded = ((bits + (1 << 12)) & ~((1 << 13) - 1)) & 0xFFFFFFFF
    return rounded.to(torch.int64).where(rounded < 2**31, rounded - 2**32).to(torch.int32).view(torch.float32)


def emulated(x, w, b, stride, padding, dilation, operands=tf32, k_keep=None):
    """A tensor-core convolution: operands rounded, products summed exactly (float64), + bias, to float32.
    k_keep: only the first k_keep k = (ci, kh, kw) of each output (a dropped K tail)."""
    xr, wr = operands(x).double(), operands(w).double()
    if k_keep is not None:
        flat = wr.reshape(wr.shape[0], -1).clone()
        flat[:, k_keep:] = 0
        wr = flat.reshape(wr.shape)
    return F.conv2d(xr, wr, b.double(), stride, padding, dilation).float()


def inputs(c: spec06.Case, scale=1.0, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(c.n, c.cin, c.h, c.w, generator=g) * scale
    w = torch.randn(c.cout, c.cin, c.kh, c.kw, generator=g) * (c.cin * c.kh * c.kw) ** -0.5
    b = torch.randn(c.cout, generator=g) * scale
    return x, w, b


def rel(y, ref):
    return (torch.linalg.vector_norm(y.double() - ref) / torch.linalg.vector_norm(ref)).item()


CASES = [c for c in spec06.CASES if c.n * c.cout * c.h * c.w <= 200_000]


@pytest.mark.parametrize("c", CASES, ids=lambda c: c.name)
def test_tf32_tolerance_accepts_tf32_and_rejects_a_dropped_tail(c):
    x, w, b = inputs(c, seed=len(c.name))
    ref = F.conv2d(x.double(), w.double(), b.double(), c.stride, c.padding, c.dilation)
    tol = spec06.tf32_tolerance(x, w, b, c.stride, c.padding, c.dilation)
    got = rel(emulated(x, w, b, c.stride, c.padding, c.dilation), ref)
    assert got <= tol / 2, (got, tol)  # genuine TF32 within half its bound
    assert got > spec06.REL_TOL[torch.float32], got  # and outside the strict groups' tolerance
    K = c.cin * c.kh * c.kw
    kept = emulated(x, w, b, c.stride, c.padding, c.dilation, k_keep=K - K % 16)
    tail = kept.double() - emulated(x, w, b, c.stride, c.padding, c.dilation).double()
    if K % 16 and tail.abs().max() > 0:  # ("kernel = padded input": its last 8 k read only the padding)
        assert rel(kept, ref) > 10 * tol, (rel(kept, ref), tol)


def truncated(t: torch.Tensor) -> torch.Tensor:
    """float32 -> TF32 as the tensor cores take an unrounded word: the low 13 bits dropped."""
    return (t.float().view(torch.int32) & ~0x1FFF).view(torch.float32)


def _small_probe_cases():
    """The spec's probe cases, the 128-channel tiles' one cut to one image (its K and geometry kept)."""
    return [(path, c if c.n * c.h * c.w <= 4096 else spec06.Case(c.name, 1, c.cin, 16, 16, c.cout, c.kh, c.kw,
                                                                  c.stride, c.padding)) for path, c in spec06.PROBE_CASES]


@pytest.mark.parametrize("path,c", _small_probe_cases(), ids=lambda v: v if isinstance(v, str) else "")
@pytest.mark.parametrize("probe", probes.RANGE_PROBES, ids=lambda p: p.label)
def test_fp16_operands_fail_the_range_probes(probe, path, c):
    """On every probed path: x and the bias scaled (as ConvSpec._check_probe), TF32 within half the
    bound, FP16 operands outside it."""
    x, w, b = inputs(c, seed=3)
    x, b = probe.scaled(x), probe.scaled(b)
    ref = F.conv2d(x.double(), w.double(), b.double(), c.stride, c.padding, c.dilation)
    tol = spec06.tf32_tolerance(x, w, b, c.stride, c.padding, c.dilation)
    assert rel(emulated(x, w, b, c.stride, c.padding, c.dilation), ref) <= tol / 2
    fp16 = emulated(x, w, b, c.stride, c.padding, c.dilation, operands=lambda t: t.half().float())
    err = rel(fp16, ref)
    assert not err <= tol, (err, tol)  # NaN (1e5 overflows to inf) counts as failing


@pytest.mark.parametrize("path,c", _small_probe_cases(), ids=lambda v: v if isinstance(v, str) else "")
def test_truncated_operands_fail_the_positive_probe(path, c):
    """On every probed path (K >= POSITIVE_MIN_K): x, w and b in [0.5, 1.5), rounded TF32 within the
    bound, either operand truncated outside it (grader.verify.precision's derivation)."""
    assert c.cin * c.kh * c.kw >= probes.POSITIVE_MIN_K
    g = torch.Generator().manual_seed(4)
    x, w, b = (probes.POSITIVE.draw(g, t.shape, device="cpu") for t in inputs(c))
    ref = F.conv2d(x.double(), w.double(), b.double(), c.stride, c.padding, c.dilation)
    tol = spec06.tf32_tolerance(x, w, b, c.stride, c.padding, c.dilation)
    assert rel(emulated(x, w, b, c.stride, c.padding, c.dilation), ref) <= tol / 2
    for ops in ((truncated, tf32), (tf32, truncated)):
        xr, wr = ops[0](x).double(), ops[1](w).double()
        err = rel(F.conv2d(xr, wr, b.double(), c.stride, c.padding, c.dilation).float(), ref)
        assert err > 1.5 * tol, (err, tol)


def test_range_check_is_declared():
    names = {ch.name for ch in spec06.SPEC.checks() if ch.group == "tensor_cores_tf32"}
    assert {f"tensor_cores_tf32[values near {s:g}]" for s in spec06.RANGE_SCALES} <= names
    assert not any("float64" in n for n in names)
