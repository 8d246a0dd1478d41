"""Exercise 05's versions 4 and 5 beyond their tiles, without a GPU: the plans (which path, how K is split), the
split-K and batch index arithmetic of matmul_kernel4 and its launcher, the matrix-vector kernels
(matmul_gemv_rows, matmul_gemv_cols) and matmul_splitk_reduce, transliterated into Python over flat
arrays, as the kernels address them. On small integer matrices every sum is exact, so the model must
reassemble A @ B exactly, with every k of every output covered once, for shapes off every split, with
and without the float4 path, and batches that take several launches (gridDim.z's limit made small).

If the kernels' arithmetic changes, change the transliteration with it (this test is only as good as that).
"""
from __future__ import annotations

import math
import re

import pytest
import torch

from grader.env import REPO
from grader.specs import ex05_matmul as spec05
from tests.grading import kernel_source

SOURCE = kernel_source(REPO / "solutions" / "05_matmul")  # every kernel file of 05, one text


def const(name: str) -> int:
    m = re.search(rf"constexpr int(?:64_t)? {name} = ([^;]+);", SOURCE)
    assert m, name
    return m.group(1)


kBM4, kBN4, kBK4 = (int(x) for x in re.search(r"kBM4 = (\d+), kBN4 = (\d+), kBK4 = (\d+);", SOURCE).groups())
kSplitMinK4, kSplitSteps5 = int(const("kSplitMinK4")), int(const("kSplitSteps5"))
kBM5, kBN5 = (int(x) for x in re.search(r"constexpr int kBM5 = (\d+), kBN5 = (\d+);", SOURCE).groups())
kAChunks5 = int(const("kAChunks5"))
kGemvRowsMinK, kGemvColsMinK = int(const("kGemvRowsMinK")), int(const("kGemvColsMinK"))
kMaxSplits, kFillMinK = int(const("kMaxSplits")), int(const("kFillMinK"))
BLOCKS4 = 2  # kernel 4's blocks an SM runs at once on an H100 (course::wave_blocks asks the occupancy API)
kGemvThreads, kReduceLoads = int(const("kGemvThreads")), int(const("kReduceLoads"))
kGemvRowsPerBlock = kGemvThreads // 32
kGemvVec = 4 * 32
kGemvColsWarps, kGemvColsPerBlock = kGemvThreads // 32, 4 * 32
kGemvColsNarrow = int(const("kGemvColsNarrow"))
kGemvColsNarrowMost = 1 << 22
assert const("kGemvColsNarrowMost") == "int64_t(1) << 22"
assert const("kGemvColsWarps") == "kGemvThreads / 32" and const("kGemvColsPerBlock") == "4 * 32"
kSmallThreads, kSmallBK = int(const("kSmallThreads")), int(const("kSmallBK"))
kSmallArea, kSmallSide = 16 * kSmallThreads, int(const("kSmallSide"))
assert const("kSmallArea") == "16 * kSmallThreads"


def ceil_div(a, b):
    return -(-a // b)


# ------------------------------------------------------------------------------ plan4 and split_k
def split_k(path, K, want, most, align):
    s = max(1, min(want, most))
    if s == 1:
        return path, 1, K
    k_split = ceil_div(ceil_div(K, s), align) * align
    return path, ceil_div(K, k_split), k_split


def plan4(batch, M, N, K, sms, blocks_per_sm=BLOCKS4):
    """(path, splits, k_split) or, with a head, (path, splits, k_split, head_rows)."""
    if N == 1:
        blocks = ceil_div(M, kGemvRowsPerBlock) * batch
        return split_k("rows", K, ceil_div(4 * sms, blocks), min(K // kGemvRowsMinK, kMaxSplits), 4)
    if M == 1:
        blocks = ceil_div(N, kGemvColsPerBlock) * batch
        narrow = ceil_div(N, kGemvColsNarrow) * batch
        if blocks < sms and narrow >= sms and K * N <= kGemvColsNarrowMost:
            return "cols16", 1, K
        return split_k("cols", K, ceil_div(2 * sms, blocks), min(K // kGemvColsMinK, kMaxSplits), 1)
    tiles4 = ceil_div(M, kBM4) * ceil_div(N, kBN4) * batch
    if tiles4 < sms and min(M, N) <= kSmallSide:
        rows = 32 if M <= 32 else 128 if N <= 32 else 64
        tiles = ceil_div(M, rows) * ceil_div(N, kSmallArea // rows) * batch
        if K < 4 * max(M, N):
            longer = split_tiles(f"small{rows}", M, N, K, tiles, sms, kSmallBK, 2 * kSplitMinK4)
            if longer[1] > 1 and 2 * tiles * longer[1] >= sms:
                return longer
        return split_tiles(f"small{rows}", M, N, K, tiles, sms, kSmallBK, kSplitMinK4)
    if batch == 1 and tiles4 > sms:
        slots = sms * blocks_per_sm
        if slots < tiles4 < 3 * slots:
            return split_tail("tiles", M, N, K, kBM4, kBN4, slots, kBK4)
    plan = split_tiles("tiles", M, N, K, tiles4, sms, kBK4, kSplitMinK4)
    if plan[1] == 1 and batch == 1 and 3 * tiles4 > 2 * sms:
        workers = sms * blocks_per_sm  # streamk_workers: matmul_kernel4_streamk's blocks the GPU holds
        if 10 * tiles4 < 9 * workers and tiles4 * ceil_div(K, kBK4) >= 16 * workers:
            return "streamk", 1, K
    return plan


def split_tail(path, M, N, K, bm, bn, slots, align):
    cols, rows = ceil_div(N, bn), ceil_div(M, bm)
    head = rows * cols // slots * slots // cols
    tail = (rows - head) * cols
    want = min(slots // tail, K // kFillMinK) if tail > 0 else 1
    if head == 0 or want < 2:
        return path, 1, K
    plan = split_k(path, K, want, want, align)
    return plan + (head * bm,) if plan[1] > 1 else plan


def plan5(batch, M, N, K, sms, bf16):
    if not bf16 and (N == 1 or M == 1):
        return plan4(batch, M, N, K, sms)
    tiles = ceil_div(M, kBM5) * ceil_div(N, kBN5) * batch
    bk = kAChunks5 * (8 if bf16 else 4)  # Tile5<T>::kBK
    return split_tiles("tiles5", M, N, K, tiles, sms, bk, kSplitSteps5 * bk)


def split_tiles(path, M, N, K, tiles, sms, align, min_k):
    if tiles < sms and K >= 2 * min_k and (K >= 4 * max(M, N) or 3 * tiles <= 2 * sms):
        most = min(K // min_k, kMaxSplits)
        slots = 2 * sms
        want = slots // tiles
        if 10 * tiles * want < 9 * slots:
            for s in range(want + 1, min(most, K // kFillMinK) + 1):
                if 10 * tiles * s >= 9 * slots * ceil_div(tiles * s, slots):
                    want = s
                    break
        return split_k(path, K, want, most, align)
    return path, 1, K


# ------------------------------------------------------------------------------ the kernels
class Flat:
    """A flat float array with a base offset (a pointer), and a count of the reads of each element."""

    def __init__(self, data, offset=0):
        self.data, self.offset = data, offset

    def __add__(self, n):
        return Flat(self.data, self.offset + n)

    def __getitem__(self, i):
        return self.data[self.offset + i]

    def __setitem__(self, i, v):
        self.data[self.offset + i] = v


def kernel4(A, B, C, M, N, K, k_split, splits, grid_z, covered):
    """matmul_kernel4's blocks of one launch: offsets by blockIdx.z, then the tile product over k_len
    (the tile loop is kernel 4's job, tested elsewhere; here every (row, col) of C over k < k_len)."""
    for z in range(grid_z):
        batch = z // splits
        k0 = (z - batch * splits) * k_split
        k_len = k_split if k_split < K - k0 else K - k0
        a = A + (batch * M * K + k0)
        b = B + ((batch * K + k0) * N)
        c = C + z * M * N
        for row in range(M):
            for col in range(N):
                acc = 0.0
                for k in range(k_len):
                    acc += a[row * K + k] * b[k * N + col]
                    covered.append((a.offset + row * K + k, b.offset + k * N + col))
                c[row * N + col] = acc


def streamk_begin(worker, total, workers):
    return worker * total // workers


def streamk_worker(it, total, workers):
    """streamk_worker: the worker whose iterations hold `it`."""
    w = it * workers // total
    while w + 1 < workers and streamk_begin(w + 1, total, workers) <= it:
        w += 1
    while w > 0 and streamk_begin(w, total, workers) > it:
        w -= 1
    return w


def kernel4_streamk(A, B, C, ws, M, N, K, workers, covered):
    """matmul_kernel4_streamk's workers: each tile part (k steps first .. last - 1 of a tile) into C when
    whole, else into the workspace slot 2 worker + part (inside C's rows and columns; the kernel's other
    outputs are the loader's zeros, which the fix-up never reads). Returns the slots written."""
    tile_cols, steps = ceil_div(N, kBN4), ceil_div(K, kBK4)
    total = ceil_div(M, kBM4) * tile_cols * steps
    written = set()
    for worker in range(workers):
        end, part = streamk_begin(worker + 1, total, workers), 0
        it = streamk_begin(worker, total, workers)
        while it < end:
            tile = it // steps
            first = it - tile * steps
            last = first + (end - it) if end - it < steps - first else steps
            m0, n0, k0 = tile // tile_cols * kBM4, tile % tile_cols * kBN4, first * kBK4
            k_len = (last * kBK4 if last * kBK4 < K else K) - k0
            whole = first == 0 and last == steps
            assert part < 2, "a worker reached a third tile: its workspace holds two parts"
            for r in range(min(kBM4, M - m0)):
                for c in range(min(kBN4, N - n0)):
                    acc = 0.0
                    for k in range(k0, k0 + k_len):
                        acc += A[(m0 + r) * K + k] * B[k * N + n0 + c]
                        covered.append((A.offset + (m0 + r) * K + k, B.offset + k * N + n0 + c))
                    if whole:
                        C[(m0 + r) * N + n0 + c] = acc
                    else:
                        ws[(2 * worker + part) * kBM4 * kBN4 + r * kBN4 + c] = acc
            if not whole:
                written.add(2 * worker + part)
            it += last - first
            part += 1
    return written


def streamk_fixup(ws, C, M, N, K, workers, used):
    """matmul_streamk_fixup: each shared tile's outputs, 4 a thread, summed over its workers in order."""
    tile_cols, steps = ceil_div(N, kBN4), ceil_div(K, kBK4)
    tiles = ceil_div(M, kBM4) * tile_cols
    total = tiles * steps
    for tile in range(tiles):
        first = tile * steps
        w0, w1 = streamk_worker(first, total, workers), streamk_worker(first + steps - 1, total, workers)
        if w0 == w1 and streamk_begin(w0, total, workers) <= first:
            continue
        for e in range(0, kBM4 * kBN4, 4):
            r, c = e // kBN4, e % kBN4
            row, col = tile // tile_cols * kBM4 + r, tile % tile_cols * kBN4 + c
            if row >= M or col >= N:
                continue
            sums = [0.0] * 4
            for w in range(w0, w1 + 1):
                part = 0 if streamk_begin(w, total, workers) >= first else 1
                used.add(2 * w + part)
                for j in range(4):
                    sums[j] += ws[(2 * w + part) * kBM4 * kBN4 + e + j]
            for j in range(4):
                if col + j < N:
                    C[row * N + col + j] = sums[j]


def load_quad(src, row, col, ld, inside, cols, vec, what):
    """load_quad<vec>: the 4 floats src[row * ld + col ..] as (value, index) entries, (0.0, None)
    outside; a float4 (vec) must be 16-byte aligned and lie wholly before `cols`."""
    at = row * ld + col
    if vec and inside and col < cols:
        assert (src.offset + at) % 4 == 0, f"a float4 of {what} is not 16-byte aligned"
    quad = []
    for e in range(4):
        ok = inside and (col < cols if vec else col + e < cols)
        if ok:
            assert col + e < cols, f"a float4 of {what} straddles its rows' end"
        quad.append((src[at + e], src.offset + at + e) if ok else (0.0, None))
    return quad


def small_tiles(A, B, C, M, N, K, k_split, splits, rows, vec, grid, covered):
    """matmul_small_tiles<rows, vec>: every block's loads (float4 quads of A and B, zeros outside), A
    stored transposed, the k steps through two buffers, each thread's 4 x 4 outputs and their stores."""
    cols = kSmallArea // rows
    col_quads, k_quads = cols // 4, kSmallBK // 4
    a_quads, b_quads = rows * kSmallBK // 4, kSmallBK * col_quads
    a_per, b_per = ceil_div(a_quads, kSmallThreads), ceil_div(b_quads, kSmallThreads)
    gx, gy, gz = grid
    for z in range(gz):
        batch = z // splits
        k0 = (z - batch * splits) * k_split
        k_len = k_split if k_split < K - k0 else K - k0
        a, b, c = A + (batch * M * K + k0), B + ((batch * K + k0) * N), C + z * M * N
        for by in range(gy):
            for bx in range(gx):
                m0, n0 = by * rows, bx * cols
                acc = [[[0.0] * 4 for _ in range(4)] for _ in range(kSmallThreads)]
                steps = ceil_div(k_len, kSmallBK)
                for step in range(steps):
                    k = step * kSmallBK
                    As = [[None] * (rows + 4) for _ in range(kSmallBK)]
                    Bs = [[None] * cols for _ in range(kSmallBK)]
                    for tid in range(kSmallThreads):
                        for i in range(a_per):
                            q = tid + i * kSmallThreads
                            row, col = m0 + q // k_quads, k + 4 * (q % k_quads)
                            quad = load_quad(a, row, col, K, q < a_quads and row < M, k_len, vec, "A")
                            if q < a_quads:
                                for e in range(4):
                                    assert As[4 * (q % k_quads) + e][q // k_quads] is None
                                    As[4 * (q % k_quads) + e][q // k_quads] = quad[e]
                        for i in range(b_per):
                            q = tid + i * kSmallThreads
                            row, col = k + q // col_quads, n0 + 4 * (q % col_quads)
                            quad = load_quad(b, row, col, N, q < b_quads and row < k_len, N, vec, "B")
                            if q < b_quads:
                                for e in range(4):
                                    assert Bs[q // col_quads][4 * (q % col_quads) + e] is None
                                    Bs[q // col_quads][4 * (q % col_quads) + e] = quad[e]
                    assert all(v is not None for r in As for v in r[:rows]) and all(v is not None for r in Bs for v in r)
                    for tid in range(kSmallThreads):
                        tx, ty = tid % col_quads, tid // col_quads
                        for kk in range(kSmallBK):
                            for i in range(4):
                                av, ai = As[kk][4 * ty + i]
                                for j in range(4):
                                    bv, bi = Bs[kk][4 * tx + j]
                                    acc[tid][i][j] += av * bv
                                    if ai is not None and bi is not None:
                                        covered.append((ai, bi))
                for tid in range(kSmallThreads):
                    tx, ty = tid % col_quads, tid // col_quads
                    for i in range(4):
                        row, col = m0 + 4 * ty + i, n0 + 4 * tx
                        if row >= M:
                            continue
                        for j in range(4):
                            if col + j < N:
                                c[row * N + col + j] = acc[tid][i][j]


def gemv_rows(A, x, out, M, K, k_split, grid, vec, covered):
    gx, gy, gz = grid
    for bz in range(gz):
        for by in range(gy):
            for bx in range(gx):
                for warp in range(kGemvRowsPerBlock):
                    row = bx * kGemvRowsPerBlock + warp
                    if row >= M:
                        continue
                    batch, split = bz, by
                    k0 = split * k_split
                    k1 = K if K - k0 < k_split else k0 + k_split
                    a = A + (batch * M + row) * K
                    v = x + batch * K
                    lanes = []
                    for lane in range(32):
                        acc, k = 0.0, k0
                        if vec:
                            full = k0 + (k1 - k0) // kGemvVec * kGemvVec
                            for i in range(k0 + 4 * lane, full, kGemvVec):
                                assert i % 4 == 0 and (a.offset + i) % 4 == 0 and (v.offset + i) % 4 == 0  # float4 aligned
                                for e in range(4):
                                    acc += a[i + e] * v[i + e]
                                    covered.append((a.offset + i + e, v.offset + i + e))
                            k = full
                        for i in range(k + lane, k1, 32):
                            acc += a[i] * v[i]
                            covered.append((a.offset + i, v.offset + i))
                        lanes.append(acc)
                    offset = 16  # the shuffle tree: lane l adds lane l ^ offset
                    while offset:
                        lanes = [lanes[l] + lanes[l ^ offset] for l in range(32)]
                        offset //= 2
                    out[(batch * gy + split) * M + row] = lanes[0]


def gemv_cols(A, B, out, N, K, k_split, grid, vec, covered, cols=None):
    """matmul_gemv_cols<vec, cols>: 128 columns a block (a warp on one row) or 16 (8 rows a warp); the
    lanes of a column group summed by the shuffle tree (xor offsets cols / 4 .. 16), then the warps."""
    cols = cols or kGemvColsPerBlock
    row_lanes = cols // 4
    warp_rows = 32 // row_lanes
    block_rows = kGemvColsWarps * warp_rows
    gx, gy, gz = grid
    for bz in range(gz):
        for by in range(gy):
            for bx in range(gx):
                batch, split = bz, by
                k0 = split * k_split
                k1 = K if K - k0 < k_split else k0 + k_split
                c0 = bx * cols
                sums = [[0.0] * cols for _ in range(kGemvColsWarps)]
                for warp in range(kGemvColsWarps):
                    accs = []
                    for lane in range(32):
                        col = c0 + 4 * (lane % row_lanes)
                        acc = [0.0] * 4
                        if col < N:
                            a = A + batch * K
                            b = B + (batch * K * N + col)
                            for k in range(k0 + warp * warp_rows + lane // row_lanes, k1, block_rows):
                                if vec:
                                    assert (b.offset + k * N) % 4 == 0  # float4 aligned
                                for e in range(4):
                                    if vec or col + e < N:  # the float4 lies wholly inside (N % 4 == 0)
                                        acc[e] += a[k] * b[k * N + e]
                                        covered.append((a.offset + k, b.offset + k * N + e))
                        accs.append(acc)
                    offset = row_lanes
                    while offset < 32:  # __shfl_xor_sync: every lane adds its partner's value
                        accs = [[accs[l][e] + accs[l ^ offset][e] for e in range(4)] for l in range(32)]
                        offset *= 2
                    for lane in range(row_lanes):
                        sums[warp][4 * lane:4 * lane + 4] = accs[lane]
                for t in range(cols):
                    c = c0 + t
                    if c < N:
                        total = sums[0][t]
                        for w in range(1, kGemvColsWarps):
                            total += sums[w][t]
                        out[(batch * gy + split) * N + c] = total


def reduce_slices(total, splits, sms, MN=None, aligned=True):
    """launch_splitk_reduce's choice: (slices, group, blocks, vec)."""
    busy = 4 * sms * kGemvThreads
    vec = total >= 4 * busy and (MN if MN is not None else total) % 4 == 0 and aligned
    units = total // 4 if vec else total
    slices = 1
    while slices < 32 and 2 * slices <= splits and units * slices < busy:
        slices *= 2
    per = ceil_div(splits, slices)
    group = 1
    while group * group < per:
        group += 1
    return slices, group, min(ceil_div(units, kGemvThreads // slices), 8 * sms), vec


def splitk_reduce(ws, C, MN, total, splits, group, slices, blocks, used, vec=False):
    """matmul_splitk_reduce<T, kVec>: kVec = 4 (vec) outputs a thread, each summed as one alone; the
    splits loaded kReduceLoads at a time, added in order in groups of `group`."""
    k_vec = 4 if vec else 1
    units = kGemvThreads // slices
    per = ceil_div(splits, slices)
    all_units = total // k_vec
    for block in range(blocks):
        for base in range(block * units, all_units, blocks * units):
            slice_sums = [[None] * kGemvThreads for _ in range(k_vec)]
            for t in range(kGemvThreads):
                slice, o = t // units, t % units
                first = slice * per
                last = first + per if first + per < splits else splits
                i = (base + o) * k_vec
                if i >= total:
                    continue
                b = 0 if total == MN else i // MN
                e = i - b * MN
                p = ws + (b * splits * MN + e)
                sums, part, in_group = [0.0] * k_vec, [0.0] * k_vec, 0
                for s0 in range(first, last, kReduceLoads):
                    v = [[p[(s0 + j) * MN + c] for c in range(k_vec)] if s0 + j < last else None
                         for j in range(kReduceLoads)]
                    for j in range(kReduceLoads):
                        if s0 + j >= last:
                            break
                        for c in range(k_vec):
                            part[c] += v[j][c]
                            used.append(p.offset + (s0 + j) * MN + c)
                        in_group += 1
                        if in_group == group or s0 + j + 1 == last:
                            for c in range(k_vec):
                                sums[c] += part[c]
                                part[c] = 0.0
                            in_group = 0
                if slices == 1:
                    for c in range(k_vec):
                        C[i + c] = sums[c]
                else:
                    for c in range(k_vec):
                        slice_sums[c][t] = sums[c]
            if slices == 1:
                continue
            for o in range(units):
                i = (base + o) * k_vec
                if i < total:
                    for c in range(k_vec):
                        total_sum = slice_sums[c][o]
                        for l in range(1, slices):
                            total_sum += slice_sums[c][l * units + o]
                        C[i + c] = total_sum


def launch4(plan, A, B, out, batch, M, N, K, max_grid_z, aligned, covered):
    """launch4: the batch chunks (gridDim.z) and each path's launch, into `out` (C, or the workspace)."""
    path, splits, k_split = plan[:3]
    per_launch = max_grid_z // splits
    for b0 in range(0, batch, per_launch):
        nb = min(per_launch, batch - b0)
        a, b, o = A + b0 * M * K, B + b0 * K * N, out + b0 * splits * M * N
        if path == "rows":
            vec = K % 4 == 0 and k_split % 4 == 0 and aligned
            gemv_rows(a, b, o, M, K, k_split, (ceil_div(M, kGemvRowsPerBlock), splits, nb), vec, covered)
        elif path in ("cols", "cols16"):
            vec = N % 4 == 0 and aligned
            cols = kGemvColsPerBlock if path == "cols" else kGemvColsNarrow
            gemv_cols(a, b, o, N, K, k_split, (ceil_div(N, cols), splits, nb), vec, covered, cols)
        elif path.startswith("small"):
            rows = int(path[5:])
            vec = K % 4 == 0 and N % 4 == 0 and k_split % 4 == 0 and aligned
            grid = (ceil_div(N, kSmallArea // rows), ceil_div(M, rows), nb * splits)
            small_tiles(a, b, o, M, N, K, k_split, splits, rows, vec, grid, covered)
        else:
            assert nb * splits <= max_grid_z
            kernel4(a, b, o, M, N, K, k_split, splits, nb * splits, covered)


def reduce_into(workspace, C, batch, MN, splits, sms):
    """launch_splitk_reduce, checking that every partial product is summed once."""
    total = batch * MN
    slices, group, blocks, vec = reduce_slices(total, splits, sms, MN)
    used = []
    splitk_reduce(workspace, C, MN, total, splits, group, slices, min(blocks, 3), used, vec)
    assert sorted(used) == list(range(workspace.offset, workspace.offset + batch * splits * MN))


def matmul_cuda4(A, B, C, batch, M, N, K, sms, max_grid_z=65535, aligned=True, blocks_per_sm=BLOCKS4):
    """The launcher: the plan, the head and tail where it has them, the launches, the reduction. Returns
    the plan and every (A index, B index) product taken."""
    plan = plan4(batch, M, N, K, sms, blocks_per_sm)
    path, splits, k_split = plan[:3]
    head = plan[3] if len(plan) > 3 else 0
    rows = M - head  # the rows that split
    workspace = Flat([float("nan")] * (batch * splits * rows * N)) if splits > 1 else None
    covered = []
    if path == "streamk":
        workers = sms * blocks_per_sm
        ws = Flat([float("nan")] * (2 * workers * kBM4 * kBN4))
        written, used = kernel4_streamk(A, B, C, ws, M, N, K, workers, covered), set()
        streamk_fixup(ws, C, M, N, K, workers, used)
        assert used == written, (sorted(used), sorted(written))  # the fix-up reads exactly the parts written
        return plan, covered
    if head:
        launch4((path, 1, K), A, B, C, 1, head, N, K, max_grid_z, aligned, covered)
        launch4(plan, A + head * K, B, workspace, 1, rows, N, K, max_grid_z, aligned, covered)
        reduce_into(workspace, C + head * N, 1, rows * N, splits, sms)
        return plan, covered
    launch4(plan, A, B, workspace if splits > 1 else C, batch, M, N, K, max_grid_z, aligned, covered)
    if splits > 1:
        reduce_into(workspace, C, batch, M * N, splits, sms)
    return plan, covered


CASES = [  # (batch, M, N, K, sms, max_grid_z): each path, split or not, tails, batch chunks
    (1, 5, 1, 1000, 4, 65535),     # rows, K % 128 != 0: the float4 steps and a tail
    (1, 3, 1, 4100, 132, 65535),   # rows, split in 4 with tails
    (1, 1, 1, 3001, 132, 65535),   # a dot product, split, scalar (K odd)
    (2, 9, 1, 2052, 8, 3),         # rows, batched, split, batch chunks of 1
    (1, 1, 37, 1003, 132, 65535),  # cols, split, the last range shorter
    (3, 1, 5, 300, 16, 20),        # cols, batched, split (9: slices of the reduction left empty), chunks
    (1, 7, 5, 600, 16, 65535),     # small 32 x 128 tiles, split K (K >= 4 max(M, N), K >= 128)
    (2, 6, 9, 1100, 64, 65535),    # small, batched, split
    (3, 4, 6, 530, 132, 16),       # small, batched, split (8), several launches (2 batch elements each)
    (5, 4, 3, 7, 132, 2),          # small, no split, batch chunks of 2
    (1, 3, 2, 0, 132, 65535),      # K = 0: zeros
    (1, 40, 36, 200, 132, 65535),  # small 64 x 64 tiles, split in 3 (the last 40 k), float4 loads
    (1, 150, 20, 97, 132, 65535),  # small 128 x 32 tiles, two row tiles, K odd: one float at a time
    (1, 65, 66, 300, 4, 65535),    # kernel 4 (both sides above 64), split
    (2, 70, 65, 50, 1, 65535),     # kernel 4, batched, not split (its tiles fill the SMs)
    (1, 257, 5, 520, 1, 65535),    # kernel 4, a head (2 tiles: a wave of 1 SM) and a tail of 1 row in 2 splits
    (1, 1, 37, 301, 2, 65535),     # cols in 16-column blocks (128-column ones fewer than the SMs), N and K odd
    (1, 1, 40, 200, 3, 65535),     # the same, float4 loads
    (2, 1, 20, 70, 3, 65535),      # the same, batched
    (1, 70, 67, 260, 1, 65535),    # stream-K: one tile, 2 workers (33 k steps, the last partial)
    (1, 300, 66, 190, 2, 65535),   # stream-K: 3 tiles, 4 workers, the second worker in two tiles
]


@pytest.mark.parametrize("batch, M, N, K, sms, max_grid_z", CASES)
def test_version4_paths_reassemble_the_product(batch, M, N, K, sms, max_grid_z):
    g = torch.Generator().manual_seed(batch * 1000003 + M * 1009 + N * 101 + K)
    a = torch.randint(-3, 4, (batch, M, K), generator=g, dtype=torch.float64)
    b = torch.randint(-3, 4, (batch, K, N), generator=g, dtype=torch.float64)
    C = Flat([float("nan")] * (batch * M * N))
    plan, covered = matmul_cuda4(Flat(a.flatten().tolist()), Flat(b.flatten().tolist()), C, batch, M, N, K, sms,
                                 max_grid_z)
    got = torch.tensor(C.data, dtype=torch.float64).view(batch, M, N)
    assert torch.equal(got, a @ b), plan
    # every product A[bt, i, k] B[bt, k, j] taken exactly once
    assert len(covered) == len(set(covered)) == batch * M * N * K, plan


@pytest.mark.parametrize("batch, MN, splits, aligned", [(2, 4100, 3, True), (2, 4100, 3, False), (1, 4099, 11, True),
                                                      (1, 8192, 9, True), (3, 7, 40, True)])
def test_the_reduction_sums_every_split_once(batch, MN, splits, aligned):
    """matmul_splitk_reduce, 4 outputs a thread (many outputs, MN % 4 == 0, aligned) or one (slices of the
    splits where outputs are few): C = the sum over the splits of each output, every partial read once
    (reduce_into checks that), on one SM's thresholds so that 4100 outputs take the float4 path."""
    g = torch.Generator().manual_seed(MN + splits)
    ws = torch.randint(-50, 51, (batch, splits, MN), generator=g, dtype=torch.float64)
    C = Flat([float("nan")] * (batch * MN))
    vec = reduce_slices(batch * MN, splits, 1, MN, aligned)[3]
    assert vec == (batch * MN >= 4 * 4 * kGemvThreads and MN % 4 == 0 and aligned)
    total, sms = batch * MN, 1
    slices, group, blocks, vec = reduce_slices(total, splits, sms, MN, aligned)
    used = []
    splitk_reduce(Flat(ws.flatten().tolist()), C, MN, total, splits, group, slices, min(blocks, 3), used, vec)
    assert sorted(used) == list(range(batch * splits * MN))
    assert torch.equal(torch.tensor(C.data, dtype=torch.float64).view(batch, MN), ws.sum(1))


def test_the_reductions_chains_of_additions_stay_short():
    """The README's accuracy claim for split K: however many splits and outputs, no chain of float32
    additions in the reduction is much longer than 2 sqrt(splits) (slices of the splits in groups of
    about sqrt(slice), then the slices in order), and every slice but the empty ones is used."""
    for sms in (1, 40, 132):
        for total in (1, 37, 768, 4096, 32000, 10**6):
            for splits in (2, 3, 5, 17, 88, 255, 1024, 2048, 4096):
                slices, group, _, _ = reduce_slices(total, splits, sms)
                assert 1 <= slices <= 32 and slices & (slices - 1) == 0 and slices <= splits
                per = ceil_div(splits, slices)
                chain = group + ceil_div(per, group) + slices  # within a group, the groups, the slices
                assert chain <= 2 * math.isqrt(splits) + 3 + slices, (sms, total, splits, slices, group)
                # outputs x slices reach about 4 waves of the GPU's threads, or the slices hit a bound
                assert total * slices >= 4 * sms * kGemvThreads or slices == 32 or 2 * slices > splits


def test_the_cases_take_the_paths_they_are_meant_to():
    """The plan's rule, as the README states it (and the spec's shapes rely on, on an H100: 132 SMs)."""
    plans = [plan4(b, m, n, k, s)[:2] for b, m, n, k, s, _ in CASES]
    assert [p for p, _ in plans] == (["rows"] * 4 + ["cols"] * 2 + ["small32"] * 5 + ["small64", "small128"] +
                                     ["tiles"] * 3 + ["cols16"] * 3 + ["streamk"] * 2)
    assert [s > 1 for _, s in plans] == [False, True, True, True, True, True, True, True, True, False, False, True,
                                         False, True, False, True, False, False, False, False, False]
    assert plan4(1, 257, 5, 520, 1) == ("tiles", 2, 264, 256)  # the head: 256 rows
    # the spec's shapes on an H100
    assert plan4(1, 100, 70, 50000, 132) == ("tiles", 261, 192)  # one wave of 2 blocks per SM
    assert plan4(1, 129, 257, 4099, 132) == ("tiles", 43, 96)
    assert plan4(1, 64, 64, 1 << 18, 132) == ("small64", 256, 1024)
    assert plan4(1, 64, 64, 1 << 16, 132) == ("small64", 256, 256)
    assert plan4(1, 5, 300, 1003, 132) == ("small32", 11, 96)  # the last split 43 k: a step's tail
    assert plan4(1, 48, 130, 4099, 132) == ("small64", 43, 96)
    assert plan4(1, 150, 20, 97, 132) == ("small128", 1, 97)
    # kernel 4's tiles filling between half and two thirds of the SMs take 3 splits, or where 3 would leave
    # more than a tenth of a wave of 2 blocks per SM idle, the fewest (of 256 k or more) that fill their
    # waves to 90%; tiles that nearly fill the SMs, none
    assert plan4(1, 1031, 1000, 4099, 132) == ("tiles", 7, 592)  # 72 tiles: 504 blocks of 528
    assert plan4(1, 1031, 1000, 1500, 132)[:2] == ("tiles", 3)  # 7 splits would be shorter than 256
    assert plan4(1, 1100, 1100, 1100, 132)[:2] == ("tiles", 3)  # 81 tiles: 243 of 264
    # unsplit tiles over two thirds of the SMs and under 90% of the blocks the GPU holds: stream-K
    assert plan4(1, 1400, 1400, 700, 132) == ("streamk", 1, 700)  # 121 tiles
    assert plan4(1, 1200, 1200, 1200, 132)[0] == plan4(1, 1500, 1500, 500, 132)[0] == "streamk"  # 100, 144
    assert plan4(1, 2000, 2000, 2000, 132)[0] == "tiles"  # 256 tiles: 97% of 264 blocks
    assert plan4(1, 1450, 1450, 9, 132)[0] == "tiles"  # 2 k steps a tile: too little to share
    assert plan4(2, 1200, 1200, 1200, 132)[0] == "tiles"  # a batch: a block a tile
    assert plan4(1, 2000, 3, 2000, 132) == ("small128", 13, 160)  # ranges of 128 k or more (16 tiles)
    # K dominating: one wave of 2 blocks per SM, whatever K (the workspace is then at most a wave of tiles)
    assert plan4(1, 1400, 1400, 1 << 20, 132) == ("tiles", 2, 1 << 19)  # 121 tiles: 242 blocks
    assert plan4(1, 256, 256, 1 << 18, 132)[:2] == ("tiles", 66)  # 4 tiles: 264 blocks
    assert plan4(1, 1024, 1024, 1 << 16, 132) == ("tiles", 4, 1 << 14)  # 64 tiles: 256 blocks
    assert plan4(1, 64, 64, 1 << 20, 132)[:2] == ("small64", 263)
    assert plan4(1, 3, 1, 4100, 132) == ("rows", 4, 1028)
    assert plan4(1, 1, 777, 5003, 132) == ("cols", 38, 132)
    assert plan4(2, 64, 48, 20000, 132)[1] > 1
    # K does not dominate but the tiles fill at most two thirds of the SMs: one wave of 2 blocks per SM (the
    # model list's classifier, GPT-2's MLP at 64 tokens, 1024^3), no more than K / 64 splits
    assert plan4(1, 32, 1000, 2048, 132) == ("small32", 16, 128)  # ranges of 128 k: 128 blocks
    assert plan4(1, 32, 1000, 1280, 132) == ("small32", 10, 128)  # 80 blocks
    assert plan4(1, 24, 512, 1024, 132) == ("small32", 16, 64)  # 8 ranges of 128 would be 32 blocks
    # M == 1: 16-column blocks where 128-column ones are fewer than the SMs and those are not, on a small B
    # (GPT-2's one-token 768 -> 3072 and 768 -> 2304; the spec's 1 x 2200 x 1001 and 1 x 2203 x 999)
    assert plan4(1, 1, 3072, 768, 132) == plan4(1, 1, 2304, 768, 132) == ("cols16", 1, 768)
    assert plan4(1, 1, 2200, 1001, 132)[0] == plan4(1, 1, 2203, 999, 132)[0] == "cols16"
    assert plan4(1, 1, 768, 3072, 132)[0] == "cols"  # 48 narrow blocks
    assert plan4(1, 1, 16384, 16384, 132)[0] == "cols"  # a large B
    assert plan4(1, 64, 3072, 768, 132) == ("small64", 5, 160)
    assert plan4(1, 1024, 1024, 1024, 132) == ("tiles", 4, 256)
    assert plan4(1, 300, 200, 260, 132) == ("tiles", 4, 72)
    assert plan4(1, 2, 2, 511, 132) == ("small32", 6, 96)
    # a head and a tail: 1 or 2 whole waves of kernel 4's tiles and a last one at most half full (GPT-2's
    # prompt at 8192 tokens: 384 tiles, 44 rows of them in the head's wave, the other 20 in 2 splits)
    assert plan4(1, 8192, 768, 768, 132) == ("tiles", 2, 384, 44 * 128)
    assert plan4(1, 8192, 768, 3072, 132) == ("tiles", 2, 1536, 44 * 128)
    assert plan4(1, 8192, 2304, 768, 132) == ("tiles", 1, 768)  # 4 whole waves: not worth it
    assert plan4(1, 8192, 3072, 768, 132) == ("tiles", 1, 768)  # 1536 tiles, 6 waves
    assert plan4(1, 6000, 768, 200, 132) == ("tiles", 1, 200)  # a tail's splits would be shorter than 256
    assert plan4(2, 8192, 768, 768, 132) == ("tiles", 1, 768)  # batches: no head
    for sms in (132, 80, 40, 28):  # the spec's tail check on an H100, and on GPUs of fewer SMs
        assert len(plan4(1, *spec05.tail_shape(sms), sms)) == 4, sms
    # not split: the 4096^3 benchmark, tiles that fill more than two thirds of the SMs (stream-K below 90%
    # of a wave), K below 128
    assert plan4(1, 4096, 4096, 4096, 132) == ("tiles", 1, 4096)
    assert plan4(1, 2048, 1024, 1024, 132) == ("streamk", 1, 1024)  # 128 tiles
    # the spec's stream-K check on an H100 and on GPUs of fewer SMs: 3 columns of tiles, 1.2 SMs' worth
    for sms in (132, 80, 40, 28):
        for n in (300, 301):
            assert plan4(1, *spec05.streamk_shape(sms, n), sms)[0] == "streamk", (sms, n)
    assert plan4(1, 2, 2, 127, 132) == ("small32", 1, 127)
    # the small tiles only where kernel 4's are fewer than the SMs: 64 x 20000 has 157 of them
    assert plan4(1, 64, 20000, 64, 132) == ("tiles", 1, 64)
    # version 5: kernel 5's 128 x 128 tiles split by the same rule in whole k steps (32 k in TF32, 64 in
    # BF16), at least kSplitSteps5 of them; float32 matrix-vector products take version 4's kernels
    # (the spec's VERSION5_SHAPES on an H100, and the model list's classifier)
    assert plan5(1, 100, 70, 50000, 132, False) == ("tiles5", 261, 192)
    assert plan5(1, 5, 300, 1003, 132, False) == ("tiles5", 11, 96)
    assert plan5(1, 48, 130, 4099, 132, True) == ("tiles5", 22, 192)
    assert plan5(1, 300, 200, 260, 132, False) == ("tiles5", 3, 96)
    assert plan5(1, 300, 200, 260, 132, True) == ("tiles5", 2, 192)
    assert plan5(1, 3, 1, 4100, 132, False) == plan4(1, 3, 1, 4100, 132) == ("rows", 4, 1028)
    assert plan5(1, 1, 777, 5003, 132, False) == ("cols", 38, 132)
    assert plan5(1, 1, 777, 5003, 132, True) == ("tiles5", 27, 192)
    assert plan5(1, 32, 1000, 2048, 132, False)[:2] == ("tiles5", 32)
    assert plan5(1, 4096, 4096, 4096, 132, False) == ("tiles5", 1, 4096)


def test_the_small_tiles_model_follows_the_kernel():
    """The lines small_tiles, plan4, the launcher and the reduction transliterate are still the solution's
    (a change there must change them)."""
    flat = " ".join(SOURCE.split())
    for line in ("const int tid = threadIdx.x, tx = tid % kBNQuads, ty = tid / kBNQuads;",
                 "const int64_t row = m0 + q / kKQuads, col = k + 4 * (q % kKQuads);",
                 "load_quad<kVec>(ra[i], A, row, col, K, q < kAQuads && row < M, k_len);",
                 "const float4 q = inside && col < cols ? *reinterpret_cast<const float4*>(src + row * ld + col)",
                 "for (int e = 0; e < 4; ++e) v[e] = inside && col + e < cols ? src[row * ld + col + e] : 0.f;",
                 "const int64_t row = k + q / kBNQuads, col = n0 + 4 * (q % kBNQuads);",
                 "load_quad<kVec>(rb[i], B, row, col, N, q < kBQuads && row < k_len, N);",
                 "for (int e = 0; e < 4; ++e) As[buf][4 * (q % kKQuads) + e][q / kKQuads] = ra[i][e];",
                 "*reinterpret_cast<float4*>(&Bs[buf][q / kBNQuads][4 * (q % kBNQuads)]) =",
                 "const float4 a = *reinterpret_cast<const float4*>(&As[buf][k][4 * ty]);",
                 "const float4 b = *reinterpret_cast<const float4*>(&Bs[buf][k][4 * tx]);",
                 "const int64_t row = m0 + 4 * ty + i, col = n0 + 4 * tx;",
                 "const int64_t rows = M <= 32 ? 32 : N <= 32 ? 128 : 64;",
                 # stream-K: plan4's rule, the workers' parts, the fix-up
                 "if (plan.splits == 1 && batch == 1 && 3 * tiles4 > 2 * sms) {",
                 "if (10 * tiles4 < 9 * workers && tiles4 * course::ceil_div<int64_t>(K, kBK4) >= 16 * workers) {",
                 "return worker * total / workers;",
                 "const int64_t tile = it / steps, first = it - tile * steps;",
                 "const int64_t last = end - it < steps - first ? first + (end - it) : steps;",
                 "const int64_t m0 = tile / tile_cols * kBM4, n0 = tile % tile_cols * kBN4, k0 = first * kBK4;",
                 "const int64_t k_len = (last * kBK4 < K ? last * kBK4 : K) - k0;",
                 "if (first == 0 && last == steps) {",
                 "store_tile4<true>(workspace + (2 * worker + part) * kBM4 * kBN4, acc, kBM4, kBN4, 0, 0, arow, bcol);",
                 "it += last - first;",
                 "int64_t w = it * workers / total;",
                 "while (w + 1 < workers && streamk_begin(w + 1, total, workers) <= it) ++w;",
                 "while (w > 0 && streamk_begin(w, total, workers) > it) --w;",
                 "const int64_t w0 = streamk_worker(first, total, workers), w1 = streamk_worker(first + steps - 1, total, workers);",
                 "if (w0 == w1 && streamk_begin(w0, total, workers) <= first) return;",
                 "const int part = streamk_begin(w, total, workers) >= first ? 0 : 1;",
                 "const float4 v = *reinterpret_cast<const float4*>(workspace + (2 * w + part) * kBM4 * kBN4 + e);",
                 "for (int j = 0; j < 4 && col + j < N; ++j) C[row * N + col + j] = out[j];",
                 "const bool vec = K % 4 == 0 && N % 4 == 0 && plan.k_split % 4 == 0 && course::is_aligned16(A, B, out);",
                 "const Plan plan = split_tiles(Path::kTiles, M, N, K, tiles4, sms, kBK4, kSplitMinK4);",
                 "if (sizeof(T) == 4 && (N == 1 || M == 1)) return plan4(batch, M, N, K);",
                 "const int64_t tiles = course::ceil_div<int64_t>(M, kBM5) * course::ceil_div<int64_t>(N, kBN5) * batch;",
                 "return split_tiles(Path::kTiles, M, N, K, tiles, sm_count(), Tile5<T>::kBK, kSplitSteps5 * Tile5<T>::kBK);",
                 "if (tiles < sms && K >= 2 * min_k && (K >= 4 * std::max(M, N) || 3 * tiles <= 2 * sms)) {",
                 "const int64_t most = std::min(K / min_k, kMaxSplits);", "int64_t want = slots / tiles;",
                 "if (10 * tiles * want < 9 * slots) {",
                 "for (int64_t s = want + 1; s <= std::min(most, K / kFillMinK); ++s) {",
                 "if (10 * tiles * s >= 9 * slots * course::ceil_div<int64_t>(tiles * s, slots)) {",
                 "if (tiles4 > slots && tiles4 < 3 * slots) return split_tail(Path::kTiles, M, N, K, kBM4, kBN4, slots, kBK4);",
                 "const int64_t head = rows * cols / slots * slots / cols;",
                 "const int64_t want = tail > 0 ? std::min(slots / tail, K / kFillMinK) : 1;",
                 "if (head == 0 || want < 2) return {path, 1, K};",
                 "if (plan.splits > 1) plan.head_rows = head * bm;",
                 "return plan.splits > 1 ? batch * plan.splits * (M - plan.head_rows) * N : 0;",
                 "launch4({plan.path, 1, K}, A, B, C, 1, head, N, K, stream, false, trans_b);",
                 "launch4(plan, A + head * K, B, workspace, 1, tail, N, K, stream, false, trans_b);",
                 "launch_splitk_reduce(workspace, C + head * N, 1, tail * N, plan.splits, stream);",
                 "const bool vec = total >= 4 * busy && MN % 4 == 0 && course::is_aligned16(workspace) &&",
                 "while (slices < 32 && 2 * slices <= splits && units * slices < busy) slices *= 2;",
                 "if (s0 + j < last) load_vec<kVec>(v[j], p + (s0 + j) * MN);",
                 "if (++in_group == group || s0 + j + 1 == last) {",
                 "const int64_t b = total == MN ? 0 : i / MN, e = i - b * MN;",
                 "if (blocks < sms && narrow >= sms && K * N <= kGemvColsNarrowMost) return {Path::kGemvColsNarrow, 1, K};",
                 "const Plan longer = split_tiles(path, M, N, K, tiles, sms, kSmallBK, 2 * kSplitMinK4);",
                 "if (longer.splits > 1 && 2 * tiles * longer.splits >= sms) return longer;",
                 "constexpr int kRowLanes = kBlockCols / 4, kWarpRows = 32 / kRowLanes;",
                 "for (int64_t k = k0 + warp * kWarpRows + lane / kRowLanes; k < k1; k += kBlockRows) {",
                 "for (int offset = kRowLanes; offset < 32; offset *= 2) {",
                 "if (lane < kRowLanes) *reinterpret_cast<float4*>(&sums[warp][4 * lane]) = acc;"):
        assert " ".join(line.split()) in flat, line


# ------------------------------------------------------------------ kernel 4's loader, every layout
kThreads4, kRow4, kRowStep4 = 128, kBM4 + 4, 16
kCopies4 = kBM4 // kRowStep4


def along_k(base, ld, rows, r0, k0, k_len, tid):
    """AlongK: a thread's copies of one step as (dst k, dst row, source index or None)."""
    warp, lane = tid // 32, tid % 32
    r, c = warp * 4 + lane // 8, lane % 8
    p = (r0 + r) * ld + k0 + c
    rows_in = sum(r0 + r + i * kRowStep4 < rows for i in range(kCopies4))
    k_left = k_len
    while True:
        k_ok = c < k_left
        yield [(c, r + i * kRowStep4, p + i * kRowStep4 * ld if k_ok and i < rows_in else None)
               for i in range(kCopies4)]
        p += kBK4
        k_left -= kBK4


def across_k(base, ld, rows, r0, k0, k_len, tid, vec):
    """AcrossK<vec>: a thread's copies of one step (16-byte ones as 4 entries)."""
    k_step = kThreads4 // (kBN4 // 4) if vec else kThreads4 // kBN4
    copies = kBK4 // k_step
    c = 4 * (tid % (kBN4 // 4)) if vec else tid % kBN4
    r = tid // (kBN4 // 4) if vec else tid // kBN4
    p = (k0 + r) * ld + r0 + c
    col_ok = r0 + c < rows
    k_left = k_len
    while True:
        out = []
        for i in range(copies):
            ok = col_ok and r + i * k_step < k_left
            src = p + i * k_step * ld
            if vec and ok:
                assert (base + src) % 4 == 0, "a 16-byte copy is not 16-byte aligned"
            for e in range(4 if vec else 1):
                out.append((r + i * k_step, c + e, src + e if ok else None))
        yield out
        p += copies * k_step * ld
        k_left -= kBK4


@pytest.mark.parametrize("trans_a, trans_b", [(False, False), (True, False), (False, True), (True, True)])
def test_kernel4s_loader_fills_every_stage_in_every_layout(trans_a, trans_b):
    """Every stage slot As[k][m], Bs[k][n] (m, n < 128) is written exactly once per step, with A's
    (m0 + m, k0 + 8 step + k) element (B's (k0 + 8 step + k, n0 + n)) where that lies inside the matrix
    and the block's K range and zero (no read) elsewhere, reading nothing outside the matrix, for
    either stored layout of A and of B, with and without B's 16-byte copies, on random shapes, tile
    positions (edges included) and K ranges (splits)."""
    g = torch.Generator().manual_seed(4 + 2 * trans_a + trans_b)
    rand = lambda lo, hi: int(torch.randint(lo, hi + 1, (1,), generator=g))
    for _ in range(12):
        M, N, K = rand(1, 300), rand(1, 300), rand(1, 90)
        vec = not trans_b and N % 4 == 0 and rand(0, 1) == 1
        base_b = 4 * rand(0, 3) if vec else rand(0, 7)  # the matrices' offsets in floats (16-byte aligned for vec)
        m0, n0 = kBM4 * rand(0, (M - 1) // kBM4), kBN4 * rand(0, (N - 1) // kBN4)
        k0 = rand(0, K - 1)
        k_len = rand(1, K - k0)
        steps = ceil_div(k_len, kBK4)
        ops = {"A": (M, K, trans_a, m0), "B": (N, K, trans_b, n0)}  # (tile-side extent, K, stored transposed, r0)
        for name, (rows, K_, trans, r0) in ops.items():
            # the stored layout: A row-major / B transposed run along k (ld K); the others across it
            runs_along_k = (name == "A") != trans
            ld = K_ if runs_along_k else rows
            size = rows * K_
            base = base_b if name == "B" else 0
            threads = [along_k(base, ld, rows, r0, k0, k_len, t) if runs_along_k
                       else across_k(base, ld, rows, r0, k0, k_len, t, vec and name == "B") for t in range(kThreads4)]
            for step in range(steps):
                stage = [[None] * kRow4 for _ in range(kBK4)]
                for it in threads:
                    for k, r, src in next(it):
                        assert stage[k][r] is None, (name, step, k, r)
                        stage[k][r] = ("zero",) if src is None else src
                for k in range(kBK4):
                    for r in range(kBM4):
                        got = stage[k][r]
                        assert got is not None, (name, step, k, r)
                        kk, rr = k0 + step * kBK4 + k, r0 + r
                        if kk < k0 + k_len and rr < rows:
                            want = kk * ld + rr if not runs_along_k else rr * ld + kk
                            assert got == want, (name, step, k, r, got, want)
                        else:
                            assert got == ("zero",), (name, step, k, r, got)
                    assert all(v is None for v in stage[k][kBM4:]), "the padding is never written"
                assert all(v == ("zero",) or 0 <= v < size for row in stage for v in row[:kBM4])


def test_the_loader_model_follows_the_kernel():
    """The lines along_k, across_k and the test above transliterate are still the solution's."""
    flat = " ".join(SOURCE.split())
    for line in ("r = warp * 4 + lane / 8;", "c = lane % 8;", "p = m + (r0 + r) * ld + k0 + c;",
                 "for (int i = 0; i < kCopies4; ++i) rows_in += r0 + r + i * kRowStep4 < rows;",
                 "cp_async4(&dst[c][r + i * kRowStep4], ok ? p + i * stride : base, ok);",
                 "c = kVec ? 4 * (tid % (kBN4 / 4)) : tid % kBN4;", "r = kVec ? tid / (kBN4 / 4) : tid / kBN4;",
                 "p = m + (k0 + r) * ld + r0 + c;", "const bool ok = col_ok && r + i * kKStep < k_left;",
                 "p += kCopies * stride;",
                 "std::conditional_t<kTransA, AcrossK<false>, AlongK> a;",
                 "std::conditional_t<kTransB, AlongK, AcrossK<kVecB>> b;",
                 ": a(A, kTransA ? M : K, M, m0, k0, k_len), b(B, kTransB ? K : N, N, n0, k0, k_len) {}",
                 "constexpr int kRow4 = kBM4 + 4;", "constexpr int kRowStep4 = 16;",
                 "constexpr int kCopies4 = kBM4 / kRowStep4;"):
        assert " ".join(line.split()) in flat, line
