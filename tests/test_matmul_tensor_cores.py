"""Exercise 05's kernel 5 (tensor cores) without a GPU: a model of its data movement, and its grading
tolerance against emulated TF32, BF16 and FP16 arithmetic.

1. The kernel's index arithmetic (Loader5, the swizzles, load_fragments5's ldmatrix and shared loads,
   store_c5), transliterated line by line into Python, runs on a model of the hardware: shared memory
   as 16-byte chunks, ldmatrix (plain and .trans) as the PTX ISA describes it, and mma.sync from the
   fragment layouts CUTLASS's cute declares for SM80_16x8x8_F32TF32TF32F32_TN and
   SM80_16x8x16_F32BF16BF16F32_TN (thread/value -> (m, k) column-major), written down here
   independently of the kernel's own comments. The reassembled product must equal A @ B exactly (the
   model multiplies in float64), for shapes off every tile, both dtypes and every vector path.
2. The swizzles are conflict-free: each ldmatrix phase (8 rows of 16 bytes) covers the 8 slots of
   128 bytes, and the TF32 B loads of a warp hit 32 distinct banks.
3. The tensor-core groups' tolerance (grader/specs/ex05_matmul.py) accepts emulated TF32 and BF16
   results and rejects what it must: dropped k terms, FP16 operands on a range FP16 cannot hold,
   and the strict float32 groups' tolerance rejects TF32.
4. Kernel 6 (wgmma): its ldmatrix addresses into TMA's 128-byte swizzle give mma.sync's A fragments,
   conflict-free; its checks run only on a 9.0 GPU from a "9.0a" build.

If the kernel's arithmetic changes, change the transliteration with it (test 1 is only as good as that).
"""
from __future__ import annotations

import itertools
import math
import re
from pathlib import Path

import pytest
import torch

from grader.verify import precision as probes
from grader.specs import ex05_matmul as spec05
from tests.grading import kernel_source

# ------------------------------------------------------------------------------ the hardware model
WARP = 32


def cute_map(shape, stride, rows):
    """(lane, value) -> (row, col) of a cute layout over a column-major rows x cols tile; `shape` and
    `stride` are ((4, 8), value modes) as cute writes them: thread = t0 + 4 t1."""
    (ts, vs), (tst, vst) = shape, stride
    out = {}
    for lane in range(WARP):
        t0, t1 = lane % ts[0], lane // ts[0]
        for v in range(math.prod(vs)):
            idx, off, rest = [], 0, v
            for n in vs:
                idx.append(rest % n)
                rest //= n
            off = t0 * tst[0] + t1 * tst[1] + sum(i * s for i, s in zip(idx, vst))
            out[lane, v] = (off % rows, off // rows)
    return out


# cute's MMA_Traits (include/cute/atom/mma_traits_sm80.hpp): A is M x K, B is N x K, C is M x N
TF32_A = cute_map(((4, 8), (2, 2)), ((16, 1), (8, 64)), 16)  # (m, k)
TF32_B = cute_map(((4, 8), (2,)), ((8, 1), (32,)), 8)  # (n, k)
BF16_A = cute_map(((4, 8), (2, 2, 2)), ((32, 1), (16, 8, 128)), 16)
BF16_B = cute_map(((4, 8), (2, 2)), ((16, 1), (8, 64)), 8)
C_MAP = cute_map(((4, 8), (2, 2)), ((32, 1), (16, 8)), 16)  # SM80_16x8_Row: (m, n)


class Shared:
    """A stage: A[m][chunk] and B[k][chunk] (or B^T, Bt[n][chunk]) of 16-byte chunks, each a list of
    elements (4 floats or 8 bfloat16s, as Python floats)."""

    def __init__(self, elems, bk, b_chunks, bm, a_chunks, bn=0):
        self.elems = elems
        self.A = [[[0.0] * elems for _ in range(a_chunks)] for _ in range(bm)]
        self.B = [[[0.0] * elems for _ in range(b_chunks)] for _ in range(bk)]
        self.Bt = [[[0.0] * elems for _ in range(a_chunks)] for _ in range(bn)]


def words(chunk, elems):
    """A 16-byte chunk as four 32-bit words: one float each, or two bfloat16s (low half first)."""
    return [chunk[w] for w in range(4)] if elems == 4 else [(chunk[2 * w], chunk[2 * w + 1]) for w in range(4)]


def ldmatrix_x4(rows, elems, trans=False):
    """rows[l]: the 16-byte row lane l addresses (row l % 8 of matrix l / 8). Returns r[lane][i]."""
    out = [[None] * 4 for _ in range(WARP)]
    for lane, i in itertools.product(range(WARP), range(4)):
        mat = rows[8 * i: 8 * i + 8]
        if not trans:
            out[lane][i] = words(mat[lane // 4], elems)[lane % 4]
        else:  # 16-bit elements: lane gets (row 2 (l % 4), col l / 4) and (row 2 (l % 4) + 1, col l / 4)
            assert elems == 8
            out[lane][i] = (mat[2 * (lane % 4)][lane // 4], mat[2 * (lane % 4) + 1][lane // 4])
    return out


def mma(d, a, b, bf16):
    """d[lane][4] += A B for one 16 x 8 tile, the operands given as registers per lane."""
    amap, bmap = (BF16_A, BF16_B) if bf16 else (TF32_A, TF32_B)
    kk = 16 if bf16 else 8
    Am = [[None] * kk for _ in range(16)]
    Bm = [[None] * 8 for _ in range(kk)]
    per = 2 if bf16 else 1
    for (lane, v), (m, k) in amap.items():
        reg = a[lane][v // per]
        Am[m][k] = reg[v % per] if bf16 else reg
    for (lane, v), (n, k) in bmap.items():
        reg = b[lane][v // per]
        Bm[k][n] = reg[v % per] if bf16 else reg
    for (lane, v), (m, n) in C_MAP.items():
        d[lane][v] += sum(Am[m][k] * Bm[k][n] for k in range(kk))


def swizzle_a(r, c, a_chunks):
    return c ^ (r & 7) if a_chunks == 8 else c ^ ((r >> 1) & 3)


def swizzle_b(bf16, k, c):
    return c ^ (k & 7) if bf16 else c ^ ((k & 3) << 1)


# ------------------------------------------------------------------------ the kernel, transliterated

SOURCE = kernel_source(Path(__file__).resolve().parents[1] / "solutions" / "05_matmul")  # every kernel file of 05


def solution_a_chunks() -> int:
    """Kernel 5's kAChunks5 (16-byte chunks of k per A row per stage), read from the solution."""
    return int(re.search(r"constexpr int kAChunks5 = (\d+);", SOURCE).group(1))


def solution_tiles() -> tuple[int, int, int, int]:
    """Kernel 5's (kBM5, kBN5, kWarpsM5, kWarpsN5), read from the solution: the model runs what it runs."""
    text = SOURCE
    bm, bn = map(int, re.search(r"constexpr int kBM5 = (\d+), kBN5 = (\d+);", text).groups())
    wm, wn = map(int, re.search(r"constexpr int kWarpsM5 = (\d+), kWarpsN5 = (\d+);", text).groups())
    return bm, bn, wm, wn


def run_kernel5(A, B, bf16, vec_a, vec_b, check_banks=None, tiles=None, a_chunks=None, k_split=None, bt=False):
    """Kernel 5 on lists of Python floats (row-major A: M x K, B: K x N) -> C (M x N), with the
    solution's tile constants or `tiles` = (block rows, block columns, warps down, warps across) and
    `a_chunks` (kAChunks5); with `k_split`, split K (blocks over K ranges of k_split, whose partial
    products are summed, as the workspace's are by matmul_splitk_reduce); with `bt` (TF32, kBt), B read
    from B^T as matmul_transpose_tf32 writes it: N rows of K padded to whole chunks, zeros past K."""
    bm, bn, warps_m, warps_n = tiles or solution_tiles()
    threads, warps = 32 * warps_m * warps_n, warps_m * warps_n
    wm, wn = bm // warps_m, bn // warps_n  # a warp's tile of C
    mt, nt = wm // 16, wn // 8  # its mma tiles
    M, K = len(A), len(A[0]) if A else 0
    N = len(B[0]) if B else 0
    elems = 8 if bf16 else 4
    a_chunks = a_chunks or solution_a_chunks()
    bk, mma_k, b_chunks = a_chunks * elems, 16 if bf16 else 8, bn // elems
    a_step, b_step = threads // a_chunks, threads // b_chunks  # rows per copy pass (Loader5's kARowStep, kBRowStep)
    C = [[None] * N for _ in range(M)]
    flat_a = [x for row in A for x in row]
    flat_b = [x for row in B for x in row]
    ldbt = -(-K // elems) * elems
    flat_bt = [B[k][n] if k < K else 0.0 for n in range(N) for k in range(ldbt)]
    k_split = k_split or K
    ranges = [(kb, min(k_split, K - kb)) for kb in range(0, K, k_split)] or [(0, 0)]  # (k0, k_len) of each split
    for by, bx, (kb, k_len) in itertools.product(range(-(-M // bm)), range(-(-N // bn)), ranges):
        m0, n0 = bm * by, bn * bx
        steps = -(-k_len // bk)
        acc = {(w, lane): [[[0.0] * 4 for _ in range(nt)] for _ in range(mt)] for w in range(warps) for lane in range(WARP)}
        for step in range(steps):
            s = Shared(elems, bk, b_chunks, bm, a_chunks, bn)
            k0 = step * bk
            for tid in range(threads):  # Loader5: its constructor's pointers (offsets here), stepped k0 times
                ra, ca, rb, cb = tid // a_chunks, tid % a_chunks, tid // b_chunks, tid % b_chunks
                a, b = (m0 + ra) * K + kb + elems * ca + k0, (kb + rb) * N + n0 + elems * cb + k0 * N
                a_pass, b_pass = a_step * K, b_step * N
                a_left, b_rows = k_len - elems * ca - k0, k_len - rb - k0
                a_rows = min(max(-(-(M - m0 - ra) // a_step), 0), bm // a_step)
                b_left = min(max(N - n0 - elems * cb, 0), elems)
                src = a  # Loader5::load
                for i in range(bm // a_step):
                    r = ra + i * a_step
                    s.A[r][swizzle_a(r, ca, a_chunks)] = chunk(flat_a, vec_a, i < a_rows, src, a_left, elems)
                    src += a_pass
                if bt:  # B^T's rows n0 + ra + a_step i, copied as A's (whole chunks)
                    src = (n0 + ra) * ldbt + kb + elems * ca + k0
                    bt_rows = min(max(-(-(N - n0 - ra) // a_step), 0), bn // a_step)
                    for i in range(bn // a_step):
                        r = ra + i * a_step
                        s.Bt[r][swizzle_a(r, ca, a_chunks)] = chunk(flat_bt, True, i < bt_rows, src, a_left, elems)
                        src += a_step * ldbt
                    continue
                src = b
                for i in range(bk // b_step):
                    r = rb + i * b_step
                    s.B[r][swizzle_b(bf16, r, cb)] = chunk(flat_b, vec_b, i * b_step < b_rows, src, b_left, elems)
                    src += b_pass
            for warp in range(warps):  # load_fragments5 and mma_fragments5, each mma k step
                wrow, wcol = (warp // warps_n) * wm, (warp % warps_n) * wn
                for ks in range(bk // mma_k):
                    a = {}
                    for i in range(mt):
                        rows, addrs = [], []
                        for lane in range(WARP):
                            q, r8 = lane // 8, lane % 8
                            r, c = wrow + 16 * i + 8 * (q % 2) + r8, 2 * ks + q // 2
                            rows.append(s.A[r][swizzle_a(r, c, a_chunks)])
                            addrs.append(16 * a_chunks * r + 16 * swizzle_a(r, c, a_chunks))
                        if check_banks is not None:
                            check_banks("ldmatrix A", addrs)
                        a[i] = ldmatrix_x4(rows, elems)
                    b = {}
                    if bt:  # ldmatrix.x4 over B^T's rows: b[j], b[j + 1]
                        for j in range(0, nt, 2):
                            rows, addrs = [], []
                            for lane in range(WARP):
                                q, r8 = lane // 8, lane % 8
                                r, c = wcol + 8 * j + 8 * (q // 2) + r8, 2 * ks + q % 2
                                rows.append(s.Bt[r][swizzle_a(r, c, a_chunks)])
                                addrs.append(16 * a_chunks * r + 16 * swizzle_a(r, c, a_chunks))
                            if check_banks is not None:
                                check_banks("ldmatrix B^T", addrs)
                            w = ldmatrix_x4(rows, elems)
                            b[j] = [[w[lane][0], w[lane][1]] for lane in range(WARP)]
                            b[j + 1] = [[w[lane][2], w[lane][3]] for lane in range(WARP)]
                    elif not bf16:
                        for j in range(nt):
                            b[j] = [[None, None] for _ in range(WARP)]
                            addrs = []
                            for lane in range(WARP):
                                g, t = lane // 4, lane % 4
                                n = wcol + 8 * j + g
                                for h in range(2):
                                    k = 8 * ks + t + 4 * h
                                    b[j][lane][h] = s.B[k][swizzle_b(False, k, n // 4)][n % 4]
                                    if h == 0:
                                        addrs.append(16 * b_chunks * k + 16 * swizzle_b(False, k, n // 4) + 4 * (n % 4))
                            if check_banks is not None:
                                check_banks("TF32 B", addrs, words=True)
                    else:
                        for j in range(0, nt, 2):
                            rows, addrs = [], []
                            for lane in range(WARP):
                                q, r8 = lane // 8, lane % 8
                                k, c = 16 * ks + 8 * (q % 2) + r8, (wcol + 8 * j) // 8 + q // 2
                                rows.append(s.B[k][swizzle_b(True, k, c)])
                                addrs.append(16 * b_chunks * k + 16 * swizzle_b(True, k, c))
                            if check_banks is not None:
                                check_banks("ldmatrix B", addrs)
                            r = ldmatrix_x4(rows, elems, trans=True)
                            b[j] = [[r[lane][0], r[lane][1]] for lane in range(WARP)]
                            b[j + 1] = [[r[lane][2], r[lane][3]] for lane in range(WARP)]
                    for i, j in itertools.product(range(mt), range(nt)):
                        d = [acc[warp, lane][i][j] for lane in range(WARP)]
                        mma(d, [a[i][lane] for lane in range(WARP)], b[j], bf16)
        for warp, lane in itertools.product(range(warps), range(WARP)):  # store_c5
            row0, col0 = m0 + (warp // warps_n) * wm, n0 + (warp % warps_n) * wn
            g, t = lane // 4, lane % 4
            for i, j, h in itertools.product(range(mt), range(nt), range(2)):
                row, col = row0 + 16 * i + 8 * h + g, col0 + 8 * j + 2 * t
                if row >= M or col >= N:
                    continue
                for e in range(2 if col + 1 < N else 1):  # the split ranges' sums added up
                    x = acc[warp, lane][i][j][2 * h + e]
                    C[row][col + e] = x if C[row][col + e] is None else C[row][col + e] + x
    return C


def chunk(flat, vec, row_ok, src, left, elems):
    """Loader5::chunk: a 16-byte chunk's elements from offset src, zeros outside the matrix (an
    element outside is never read: the kernel's cp.async copies 0 bytes there)."""
    def read(at):
        assert 0 <= at < len(flat), f"read outside the matrix at {at}"
        return flat[at]
    if vec:
        return [read(src + e) for e in range(elems)] if row_ok and left > 0 else [0.0] * elems
    return [read(src + e) if row_ok and e < left else 0.0 for e in range(elems)]


def _bank_checker(problems):
    def check(what, addrs, words=False):
        if words:  # 32 lanes, one 4-byte word each: 32 distinct banks
            banks = {(a // 4) % 32 for a in addrs}
            if len(banks) != 32:
                problems.append(f"{what}: {32 - len(banks)} bank conflicts")
        else:  # ldmatrix: each matrix's 8 rows of 16 bytes in one phase: 8 distinct 16-byte slots of 128
            for i in range(4):
                slots = {(a // 16) % 8 for a in addrs[8 * i: 8 * i + 8]}
                if len(slots) != 8:
                    problems.append(f"{what}, matrix {i}: rows share 16-byte slots ({sorted(slots)})")
    return check


@pytest.mark.parametrize("bf16,bt", [(False, False), (False, True), (True, False)], ids=["tf32", "tf32-bt", "bf16"])
@pytest.mark.parametrize("m,n,k,vec_a,vec_b,split", [
    (130, 70, 37, False, False, None), (19, 136, 48, True, True, None), (128, 129, 40, True, False, None),
    (7, 3, 1, False, False, None),
    # split K: ranges of two k steps (the solution's least), the last one shorter and off a chunk
    (9, 20, 300, False, False, 2), (9, 24, 296, True, True, 2), (3, 136, 200, True, False, 2)])
def test_kernel5_reassembles_the_product(bf16, bt, m, n, k, vec_a, vec_b, split):
    if bt and vec_b:
        pytest.skip("B^T's chunks are whole, one copy path whatever N: the cases without vec_b run it")
    if vec_a and k % (8 if bf16 else 4) or vec_b and n % (8 if bf16 else 4):
        pytest.skip("the vector path needs K (N) a multiple of a chunk's elements")
    k_split = split and split * solution_a_chunks() * (8 if bf16 else 4)  # whole k steps, as split_tiles makes them
    g = torch.Generator().manual_seed(m * 1000 + n + k)
    # small integers: every product and sum is exact in float64, so the comparison is exact
    A = torch.randint(-8, 9, (m, k), generator=g).double()
    B = torch.randint(-8, 9, (k, n), generator=g).double()
    problems = []
    C = run_kernel5(A.tolist(), B.tolist(), bf16, vec_a, vec_b, _bank_checker(problems) if m == 130 or bt else None,
                    k_split=k_split, bt=bt)
    assert not problems, problems[:5]
    got = torch.tensor(C, dtype=torch.float64)
    assert torch.equal(got, A @ B), (got - A @ B).abs().max()


def _tuner_configs():
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "scripts" / "tune_matmul5.py"
    module_spec = importlib.util.spec_from_file_location("tune_matmul5", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module


def _tile_shapes():
    """One tuner configuration per tile shape and A row width (the ring's depth and blocks per SM leave
    the model alone)."""
    shapes = {}
    for name, config in sorted(_tuner_configs().CONFIGS.items()):
        shapes.setdefault((*config[:4], config[6]), name)
    return sorted(shapes.values())


@pytest.mark.parametrize("name", _tile_shapes())
def test_every_tuning_configuration_reassembles_the_product_without_bank_conflicts(name, tmp_path):
    """scripts/tune_matmul5.py times tile shapes on a GPU; whichever wins, the model has checked its
    index arithmetic and swizzles here, and the script's rewrite of the solution's constants applies."""
    tuner = _tuner_configs()
    bm, bn, warps_m, warps_n, stages, min_blocks, a_chunks = tuner.CONFIGS[name]
    text = (tuner.write_copy(name, tuner.CONFIGS[name], tmp_path) / tuner.KERNEL5).read_text()
    assert f"kBM5 = {bm}, kBN5 = {bn};" in text and f"kStages5 = {stages};" in text
    assert f"kAChunks5 = {a_chunks};" in text
    assert f"kWarpsM5 = {warps_m}, kWarpsN5 = {warps_n};" in text and f"kMinBlocks5 = {min_blocks};" in text
    g = torch.Generator().manual_seed(bm + bn)
    for bf16 in (False, True):
        m, n, k = bm + 3, bn + 5, a_chunks * (8 if bf16 else 4) + 3  # a partial block each way, a partial k step
        A = torch.randint(-8, 9, (m, k), generator=g).double()
        B = torch.randint(-8, 9, (k, n), generator=g).double()
        problems = []
        C = run_kernel5(A.tolist(), B.tolist(), bf16, False, False, _bank_checker(problems), tiles=(bm, bn, warps_m, warps_n),
                        a_chunks=a_chunks)
        assert not problems, problems[:5]
        assert torch.equal(torch.tensor(C, dtype=torch.float64), A @ B)


# ----------------------------------------------------------------------------- precision emulation

def tf32(x: torch.Tensor) -> torch.Tensor:
    """float32 -> TF32 as cvt.rna does: to nearest 10-bit mantissa, ties away from zero."""
    bits = x.float().view(torch.int32)
    rounded = (bits + 0x1000) & ~0x1FFF  # add half an ulp of the 13 dropped bits, truncate: ties away (magnitude)
    out = rounded.view(torch.float32)
    return torch.where(torch.isfinite(x), out, x.float())


def tensor_core_product(a: torch.Tensor, b: torch.Tensor, operands) -> torch.Tensor:
    """A @ B with the operands rounded by `operands` and the products summed in float32."""
    return (operands(a) @ operands(b)).float() if a.numel() and b.numel() else torch.zeros(a.shape[0], b.shape[1])


def _within(c, a, b, precision) -> bool:
    try:
        spec05.assert_tensor_core_result(c, a, b, precision, "emulated")
        return True
    except AssertionError:
        return False


SIZES = [(1, 1, 1), (2, 3, 4), (31, 33, 17), (97, 101, 103), (129, 257, 1000), (200, 64, 4099)]


@pytest.mark.parametrize("m,n,k", SIZES)
def test_tolerance_accepts_emulated_tf32(m, n, k):
    g = torch.Generator().manual_seed(k)
    for scale in (1.0, 1e5, 1e-6):
        a, b = torch.randn(m, k, generator=g) * scale, torch.randn(k, n, generator=g) * scale
        c = tensor_core_product(a, b, tf32)
        assert _within(c, a, b, spec05.TF32), (scale, m, n, k)


@pytest.mark.parametrize("m,n,k", SIZES)
def test_tolerance_accepts_emulated_bf16(m, n, k):
    g = torch.Generator().manual_seed(k + 1)
    a = torch.randn(m, k, generator=g).bfloat16()
    b = torch.randn(k, n, generator=g).bfloat16()
    c = (a.float() @ b.float()).bfloat16()  # float32 sums, one rounding to bfloat16
    assert _within(c, a, b, spec05.BF16)


def test_tolerance_rejects_fp16_operands_out_of_fp16_range():
    """FP16 has TF32's 10-bit mantissa: only the range tells them apart (the spec's range checks)."""
    g = torch.Generator().manual_seed(5)
    for scale in spec05.RANGE_SCALES:
        a, b = torch.randn(127, 129, generator=g) * scale, torch.randn(129, 131, generator=g) * scale
        fp16 = tensor_core_product(a, b, lambda x: x.half().float())
        assert not _within(fp16, a, b, spec05.TF32), scale
        assert _within(tensor_core_product(a, b, tf32), a, b, spec05.TF32), scale


@pytest.mark.parametrize("precision", ["TF32", "BF16"])
def test_tolerance_rejects_a_dropped_k_tile(precision):
    prec = getattr(spec05, precision)
    g = torch.Generator().manual_seed(6)
    m, n, k = 513, 1031, 257
    bk = 16 if precision == "TF32" else 32
    dtype = torch.float32 if precision == "TF32" else torch.bfloat16
    a, b = torch.randn(m, k, generator=g).to(dtype), torch.randn(k, n, generator=g).to(dtype)
    for first in (0, (k // bk) * bk):  # a whole first tile, or the last partial one (k = 256)
        keep = torch.ones(k, dtype=torch.bool)
        keep[first: first + bk] = False
        dropped = (a.float()[:, keep] @ b.float()[keep]).to(dtype) if precision == "BF16" else \
            tensor_core_product(a[:, keep], b[keep], tf32)
        assert not _within(dropped, a, b, prec), first


def truncated(x: torch.Tensor) -> torch.Tensor:
    """float32 -> TF32 as the tensor cores take an unrounded float32: the low 13 bits dropped."""
    return (x.float().view(torch.int32) & ~0x1FFF).view(torch.float32)


def _probe_shapes():
    """Every (M, N, K) the spec's probes run (grader.verify.precision, on every path of PROBE_PATHS; a batch's
    members alike)."""
    return sorted({tuple(shape[-3:]) for paths in spec05.PROBE_PATHS.values() for _, shape in paths})


def test_tolerance_tells_a_truncated_operand_from_a_rounded_one_on_positive_operands():
    """The tensor-core groups' positive operands on every probed path: rounded to nearest, within the
    bound; either operand (or both) truncated, outside it. On random signs a truncated operand passes (its
    bias cancels), which is why the groups multiply positive operands too."""
    g = torch.Generator().manual_seed(3)
    for m, n, k in _probe_shapes():
        assert k >= probes.POSITIVE_MIN_K
        a, b = probes.POSITIVE.draw(g, (m, k), device="cpu"), probes.POSITIVE.draw(g, (k, n), device="cpu")
        assert _within((tf32(a).double() @ tf32(b).double()).float(), a, b, spec05.TF32)
        for x, y in ((truncated(a), tf32(b)), (tf32(a), truncated(b)), (truncated(a), truncated(b))):
            assert not _within((x.double() @ y.double()).float(), a, b, spec05.TF32), (m, n, k)
    m, n, k = _probe_shapes()[0]
    signed_a, signed_b = torch.randn(m, k, generator=g), torch.randn(k, n, generator=g)
    assert _within((truncated(signed_a).double() @ tf32(signed_b).double()).float(), signed_a, signed_b, spec05.TF32)


@pytest.mark.parametrize("probe", probes.RANGE_PROBES, ids=lambda p: p.label)
def test_range_probes_tell_bf16_from_fp16_operands(probe):
    """BF16's range probes: bfloat16 operands near 1e5 or 1e-6 multiplied through FP16 (an m16n8k16 f16
    mma fed the same bits rounded to half) fall outside BF16's bound; in float32 sums, within it."""
    g = torch.Generator().manual_seed(11)
    m, n, k = spec05.PROBE_PATHS[5][0][1]
    a = probe.draw(g, (m, k), torch.bfloat16, device="cpu")
    b = probe.draw(g, (k, n), torch.bfloat16, device="cpu")
    assert _within((a.double() @ b.double()).to(torch.bfloat16), a, b, spec05.BF16)
    fp16 = (a.half().double() @ b.half().double()).to(torch.bfloat16)
    assert not _within(fp16, a, b, spec05.BF16)


def test_positive_probe_tells_a_truncated_bf16_result():
    """BF16's positive probe: C truncated to bfloat16 (round toward zero) falls outside the bound."""
    g = torch.Generator().manual_seed(12)
    m, n, k = spec05.PROBE_PATHS[5][0][1]
    a = probes.POSITIVE.draw(g, (m, k), torch.bfloat16, device="cpu")
    b = probes.POSITIVE.draw(g, (k, n), torch.bfloat16, device="cpu")
    exact = (a.double() @ b.double()).float()
    assert _within(exact.to(torch.bfloat16), a, b, spec05.BF16)
    chopped = (exact.view(torch.int32) & ~0xFFFF).view(torch.float32).to(torch.bfloat16)
    assert not _within(chopped, a, b, spec05.BF16)


def test_strict_fp32_tolerance_rejects_tf32():
    g = torch.Generator().manual_seed(7)
    for m, n, k in ((513, 1031, 257), (200, 64, 4099)):
        a, b = torch.randn(m, k, generator=g), torch.randn(k, n, generator=g)
        c = tensor_core_product(a, b, tf32)
        err = ((c.double() - a.double() @ b.double()).norm() / (a.double() @ b.double()).norm()).item()
        assert err > 10 * spec05.REL_TOL, err
        strict = (a @ b)
        err32 = ((strict.double() - a.double() @ b.double()).norm() / (a.double() @ b.double()).norm()).item()
        assert err32 < spec05.REL_TOL / 10, err32


# ------------------------------------------------------------------------------ where version 5 runs
@pytest.mark.parametrize("gpu, arch_list, runs", [
    ((7, 5), "", False),             # a T4
    ((8, 0), "", True),              # an A100
    ((9, 0), "", True),              # an H100
    ((9, 0), "7.5+PTX", False),      # an H100 running a T4's code (compute_75, JIT-compiled)
    ((9, 0), "8.0+PTX", True),       # an H100 running an A100's code
    ((9, 0), "7.5;9.0a", True),      # a fat build: the H100's own SASS
    ((8, 6), "7.5 9.0", False),      # an RTX 30 given 7.5 SASS and 9.0 (which it cannot run)
])
def test_tensor_core_checks_run_only_where_the_running_code_has_them(monkeypatch, gpu, arch_list, runs):
    """require_capability judges the code this GPU runs, not only the GPU: a TORCH_CUDA_ARCH_LIST
    build for an older architecture has no tensor-core path, and the groups say not run, costing nothing."""
    from grader.verify import checks
    from grader.verify.scoring import NOT_RUN_HERE

    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: gpu)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "a GPU")
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", arch_list)
    if runs:
        checks.require_capability(8, 0, "version 5")
        return
    with pytest.raises(pytest.skip.Exception) as skipped:
        checks.require_capability(8, 0, "version 5")
    message = str(skipped.value)
    assert message.startswith(NOT_RUN_HERE) and "needs compute capability 8.0" in message
    assert ("built for 7.5" in message) == (gpu != (7, 5))



# ------------------------------------------------------------------------------ where version 6 runs
@pytest.mark.parametrize("gpu, arch_list, runs", [
    ((9, 0), "9.0a", True), ((9, 0), "7.5;9.0a+PTX", True),
    ((9, 0), "9.0", False), ((9, 0), "9.0+PTX", False), ((9, 0), "", False),  # no sm_90a code in the build
    ((10, 0), "9.0a;10.0", False), ((12, 0), "12.0", False), ((8, 0), "8.0;9.0a", False),  # another GPU
])
def test_wgmma_checks_run_on_a_9_0_gpu_from_a_9_0a_build_only(monkeypatch, gpu, arch_list, runs):
    """sm_90a's instructions (kernel 6: wgmma, TMA) run on a 9.0 GPU only, and only from a "9.0a" build:
    a check that needs them is reported as not run anywhere else (a newer GPU included), never run to
    fail there."""
    from grader.verify import checks
    from grader.verify.scoring import NOT_RUN_HERE

    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: gpu)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "a GPU")
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", arch_list)
    assert checks.runs_arch_specific(spec05.WGMMA_CAPABILITY) is runs
    if runs:
        checks.require_capability(*spec05.WGMMA_CAPABILITY, "version 6")
        return
    with pytest.raises(pytest.skip.Exception) as skipped:
        checks.require_capability(*spec05.WGMMA_CAPABILITY, "version 6")
    assert str(skipped.value).startswith(NOT_RUN_HERE)

def test_the_loader_model_follows_the_kernel():
    """The model above transliterates Loader5's pointer arithmetic, the B^T fragments and
    matmul_transpose_tf32's layout: these are the kernel's lines it follows (change both together)."""
    text = SOURCE
    for line in ("a = reinterpret_cast<const Bits*>(A) + (m0 + ra) * K + k0 + kElems * ca;",
                 "b = reinterpret_cast<const Bits*>(B) + (k0 + rb) * N + n0 + kElems * cb;",
                 "a_pass = kARowStep * K;", "b_pass = kBRowStep * N;", "a_left = k_len - kElems * ca;",
                 "b_rows = k_len - rb;",
                 "const int64_t z = blockIdx.z, batch = z / splits, k0 = (z - batch * splits) * k_split;",
                 "const int64_t k_len = K - k0 < k_split ? K - k0 : k_split;",
                 "const int64_t steps = course::ceil_div<int64_t>(k_len, Tile5<T>::kBK);",
                 "store_c5<float>(partial + z * M * N, acc, M, N, m0 + wrow, n0 + wcol, lane);",
                 "const int64_t rows = course::ceil_div<int64_t>(M - m0 - ra, kARowStep);",
                 "const int64_t cols = N - n0 - kElems * cb;",
                 "chunk<kVecA>(&s.A[r][swizzle_a(r, ca)], src, i < a_rows, a_left);",
                 # B^T (kBt)
                 "b = reinterpret_cast<const Bits*>(B) + (n0 + ra) * ldbt + k0 + kElems * ca;",
                 "b_pass = kBRowStep * ldbt;", "const int64_t bt = course::ceil_div<int64_t>(N - n0 - ra, kBRowStep);",
                 "chunk<true>(&s.Bt[r][swizzle_a(r, ca)], src, i < bt_rows, a_left);",
                 "const int r = wcol + 8 * j + 8 * (q / 2) + r8, c = 2 * ks + q % 2;",
                 "ldmatrix_x4(w, &s.Bt[r][swizzle_a(r, c)]);",
                 "b[j][0] = w[0], b[j][1] = w[1], b[j + 1][0] = w[2], b[j + 1][1] = w[3];",
                 "tile[i][threadIdx.x] = k < K && n < N ? to_tf32(B[k * ldb + n]) : 0u;",
                 "if (n < N && k < Kp) Bt[n * Kp + k] = tile[threadIdx.x][i];",
                 "chunk<kVecB>(&s.B[r][swizzle_b<T>(r, cb)], src, i * kBRowStep < b_rows, b_left);",
                 "a += Tile5<T>::kBK;", "a_left -= Tile5<T>::kBK;", "b += kBCopies * b_pass;", "b_rows -= Tile5<T>::kBK;"):
        assert line in text, line


# ------------------------------------------------------------------------------ kernel 6's A fragments
K6_LINES = ("const int r = wrow + lane % 8 + 8 * ((lane / 8) % 2);", "const int c = 2 * ks + lane / 16;",
            "ldmatrix_x4(a[ks], stage_a + r * kRowBytes6 + 16 * (c ^ (r % 8)));")


def load_a6(stage, wrow, ks):
    """load_a6's ldmatrix addresses (K6_LINES), transliterated: the 16-byte row each lane addresses in
    a stage of 128 rows of 128 bytes."""
    rows, addrs = [], []
    for lane in range(WARP):
        r = wrow + lane % 8 + 8 * ((lane // 8) % 2)
        c = 2 * ks + lane // 16
        addr = r * 128 + 16 * (c ^ (r % 8))
        addrs.append(addr)
        rows.append(stage[addr // 128][addr % 128 // 16])
    return rows, addrs


@pytest.mark.parametrize("bf16", [False, True], ids=["tf32", "bf16"])
def test_kernel6_reads_mma_s_a_fragments_from_tma_s_swizzle_without_bank_conflicts(bf16):
    """TMA's 128-byte swizzle stores 16-byte chunk c of row r at c ^ (r % 8); load_a6's ldmatrix
    addresses must give each lane, for every warp's 16 rows and every wgmma k step, exactly the A
    fragment of mma.sync's layout (which wgmma takes from registers), each matrix's 8 rows in 8
    different 16-byte slots (no bank conflicts)."""
    text = SOURCE
    assert all(line in text for line in K6_LINES), "load_a6 changed: change its transliteration with it"
    elems, kk, per, amap = (8, 16, 2, BF16_A) if bf16 else (4, 8, 1, TF32_A)
    stage = [[None] * 8 for _ in range(128)]
    for r, c in itertools.product(range(128), range(8)):  # what TMA writes: element (r, k) as its coordinates
        stage[r][c ^ (r % 8)] = [(r, elems * c + e) for e in range(elems)]
    problems = []
    check = _bank_checker(problems)
    for wrow, ks in itertools.product(range(0, 128, 16), range(4)):
        rows, addrs = load_a6(stage, wrow, ks)
        check(f"rows {wrow}.., k step {ks}", addrs)
        frag = ldmatrix_x4(rows, elems)
        for (lane, v), (m, k) in amap.items():
            reg = frag[lane][v // per]
            assert (reg[v % per] if bf16 else reg) == (wrow + m, ks * kk + k), (wrow, ks, lane, v)
    assert not problems, problems
