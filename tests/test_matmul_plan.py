"""Exercise 05's planner at SM counts the grading GPU does not have, and the split-K reduction's accuracy rule.

plan4 and plan5 choose a product's path (matrix-vector, small tiles, kernel 4's or 5's tiles, stream-K),
its splits of K and, for a wave and a tail, its head rows, from the GPU's SM count and occupancy. On a
GPU, grading sees each choice at that GPU's SM count only (tests/test_gpu_grading.py::
test_declared_paths_are_reached); here the rule is checked at 132 (an H100), 80, 40, 28 and a few
SMs, and so are the spec's SM-dependent shapes (spec05.tail_shape, spec05.streamk_shape).
launch_splitk_reduce's plan (slices of the splits, added in groups of about sqrt(slice)) bounds the chains
of float32 additions; the GPU checks it on one large-K product, here over SM counts, outputs and splits.

The planner is host code that asks the GPU for its SM count, with no entry point that takes one, so
this file checks a Python copy of it (split_k, split_tiles, split_tail, plan4, plan5, reduce_slices)
with the solution's constants read from its source. test_the_copied_lines_are_the_solutions asserts the
copied lines verbatim: a change to the planner fails there until the copy follows it.

The kernels the plans launch are checked on the GPU: 05's groups reach every path, and the known-wrong
variants of tests/known_wrong/ex05_matmul.py plant their faults (gemv_tail_ignored,
gemv_cols_warp_dropped, split_k_drops_last_split, split_k_first_split_twice,
reduction_float4_drops_a_lane, streamk_fixup_drops_the_last_worker, small_tiles_k_tail_dropped,
ring_index_unwrapped, transposed_b_splits_start_at_k0, ...).
"""
from __future__ import annotations

import math
import re

from grader.env import REPO
from grader.specs import ex05_matmul as spec05
from tests.grading import kernel_source

SOURCE = kernel_source(REPO / "solutions" / "05_matmul")  # every kernel file of 05, one text


def const(name: str) -> str:
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
kGemvThreads = int(const("kGemvThreads"))
kGemvRowsPerBlock, kGemvColsPerBlock = kGemvThreads // 32, 4 * 32
assert const("kGemvRowsPerBlock") == "kGemvThreads / 32" and const("kGemvColsPerBlock") == "4 * 32"
kGemvColsNarrow = int(const("kGemvColsNarrow"))
kGemvColsNarrowMost = 1 << 22
assert const("kGemvColsNarrowMost") == "int64_t(1) << 22"
kSmallThreads, kSmallBK = int(const("kSmallThreads")), int(const("kSmallBK"))
kSmallArea, kSmallSide = 16 * kSmallThreads, int(const("kSmallSide"))
assert const("kSmallArea") == "16 * kSmallThreads"


def ceil_div(a, b):
    return -(-a // b)


# ------------------------------------------------------------------------ the planner, copied
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


def reduce_slices(total, splits, sms):
    """launch_splitk_reduce's (slices, group) for one output matrix of `total` floats, aligned."""
    busy = 4 * sms * kGemvThreads
    vec = total >= 4 * busy and total % 4 == 0
    units = total // 4 if vec else total
    slices = 1
    while slices < 32 and 2 * slices <= splits and units * slices < busy:
        slices *= 2
    per = ceil_div(splits, slices)
    group = 1
    while group * group < per:
        group += 1
    return slices, group


# the lines the functions above copy (split_k, split_tiles, split_tail, plan4, streamk_workers, Tile5's kBK,
# plan5, launch_splitk_reduce's plan, and the reduction's grouping of the additions the accuracy rule counts)
PLANNER_LINES = (
    "const int64_t s = std::max<int64_t>(1, std::min(want, most));", "if (s == 1) return {path, 1, K};",
    "const int64_t k_split = course::ceil_div<int64_t>(course::ceil_div<int64_t>(K, s), align) * align;",
    "return {path, course::ceil_div<int64_t>(K, k_split), k_split};",
    "if (tiles < sms && K >= 2 * min_k && (K >= 4 * std::max(M, N) || 3 * tiles <= 2 * sms)) {",
    "const int64_t most = std::min(K / min_k, kMaxSplits);", "const int64_t slots = 2 * sms;",
    "int64_t want = slots / tiles;", "if (10 * tiles * want < 9 * slots) {",
    "for (int64_t s = want + 1; s <= std::min(most, K / kFillMinK); ++s) {",
    "if (10 * tiles * s >= 9 * slots * course::ceil_div<int64_t>(tiles * s, slots)) { want = s; break;",
    "return split_k(path, K, want, most, align);",
    "const int64_t cols = course::ceil_div<int64_t>(N, bn), rows = course::ceil_div<int64_t>(M, bm);",
    "const int64_t head = rows * cols / slots * slots / cols;", "const int64_t tail = (rows - head) * cols;",
    "const int64_t want = tail > 0 ? std::min(slots / tail, K / kFillMinK) : 1;",
    "if (head == 0 || want < 2) return {path, 1, K};", "Plan plan = split_k(path, K, want, want, align);",
    "if (plan.splits > 1) plan.head_rows = head * bm;",
    "if (N == 1) { const int64_t blocks = course::ceil_div<int64_t>(M, kGemvRowsPerBlock) * batch;",
    "return split_k(Path::kGemvRows, K, course::ceil_div<int64_t>(4 * sms, blocks), "
    "std::min(K / kGemvRowsMinK, kMaxSplits), 4);",
    "if (M == 1) { const int64_t blocks = course::ceil_div<int64_t>(N, kGemvColsPerBlock) * batch;",
    "const int64_t narrow = course::ceil_div<int64_t>(N, kGemvColsNarrow) * batch;",
    "if (blocks < sms && narrow >= sms && K * N <= kGemvColsNarrowMost) return {Path::kGemvColsNarrow, 1, K};",
    "return split_k(Path::kGemvCols, K, course::ceil_div<int64_t>(2 * sms, blocks), "
    "std::min(K / kGemvColsMinK, kMaxSplits), 1);",
    "const int64_t tiles4 = course::ceil_div<int64_t>(M, kBM4) * course::ceil_div<int64_t>(N, kBN4) * batch;",
    "if (tiles4 < sms && std::min(M, N) <= kSmallSide) {",
    "const int64_t rows = M <= 32 ? 32 : N <= 32 ? 128 : 64;",
    "const Path path = rows == 32 ? Path::kSmall32 : rows == 64 ? Path::kSmall64 : Path::kSmall128;",
    "const int64_t tiles = course::ceil_div<int64_t>(M, rows) * "
    "course::ceil_div<int64_t>(N, kSmallArea / rows) * batch;",
    "if (K < 4 * std::max(M, N)) {",
    "const Plan longer = split_tiles(path, M, N, K, tiles, sms, kSmallBK, 2 * kSplitMinK4);",
    "if (longer.splits > 1 && 2 * tiles * longer.splits >= sms) return longer;",
    "return split_tiles(path, M, N, K, tiles, sms, kSmallBK, kSplitMinK4);",
    "if (batch == 1 && tiles4 > sms) {",
    "const int64_t slots = course::wave_blocks(matmul_kernel4<true>, kThreads4);",
    "if (tiles4 > slots && tiles4 < 3 * slots) return split_tail(Path::kTiles, M, N, K, kBM4, kBN4, slots, kBK4);",
    "const Plan plan = split_tiles(Path::kTiles, M, N, K, tiles4, sms, kBK4, kSplitMinK4);",
    "if (plan.splits == 1 && batch == 1 && 3 * tiles4 > 2 * sms) {", "const int64_t workers = streamk_workers();",
    "if (10 * tiles4 < 9 * workers && tiles4 * course::ceil_div<int64_t>(K, kBK4) >= 16 * workers) { "
    "return {Path::kStreamK, 1, K};",
    "int64_t streamk_workers() { return course::wave_blocks(matmul_kernel4_streamk<true>, kThreads4); }",
    "static constexpr int kElems = 16 / sizeof(T);", "static constexpr int kBK = kAChunks5 * kElems;",
    "if (sizeof(T) == 4 && (N == 1 || M == 1)) return plan4(batch, M, N, K);",
    "const int64_t tiles = course::ceil_div<int64_t>(M, kBM5) * course::ceil_div<int64_t>(N, kBN5) * batch;",
    "return split_tiles(Path::kTiles, M, N, K, tiles, sm_count(), Tile5<T>::kBK, kSplitSteps5 * Tile5<T>::kBK);",
    "const int64_t total = batch * MN, sms = sm_count(), busy = 4 * sms * kGemvThreads;",
    "const bool vec = total >= 4 * busy && MN % 4 == 0 && course::is_aligned16(workspace) &&",
    "const int64_t units = vec ? total / 4 : total;", "int slices = 1;",
    "while (slices < 32 && 2 * slices <= splits && units * slices < busy) slices *= 2;",
    "const int64_t per = course::ceil_div<int64_t>(splits, slices);", "int64_t group = 1;",
    "while (group * group < per) ++group;",
    "const int64_t per = (splits + slices - 1) / slices;",
    "const int64_t first = slice * per, last = first + per < splits ? first + per : splits;",
    "if (++in_group == group || s0 + j + 1 == last) {",
)


def test_the_copied_lines_are_the_solutions():
    """A change to the planner or the reduction's plan fails here until the copy above follows it."""
    flat = " ".join(SOURCE.split())
    missing = [line for line in PLANNER_LINES if " ".join(line.split()) not in flat]
    assert not missing, f"05's planner changed; change its copy in this file: {missing}"


# --------------------------------------------------------------------------------- the plans
CASES = [  # (batch, M, N, K, sms): each path, split or not, a head and a tail
    (1, 5, 1, 1000, 4),     # rows, K below kGemvRowsMinK: not split
    (1, 3, 1, 4100, 132),   # rows, split in 4
    (1, 1, 1, 3001, 132),   # a dot product (rows), split
    (2, 9, 1, 2052, 8),     # rows, batched, split
    (1, 1, 37, 1003, 132),  # cols, split
    (3, 1, 5, 300, 16),     # cols, batched, split
    (1, 7, 5, 600, 16),     # small 32 x 128 tiles, split K (K >= 4 max(M, N), K >= 128)
    (2, 6, 9, 1100, 64),    # small, batched, split
    (3, 4, 6, 530, 132),    # small, batched, split in 8
    (5, 4, 3, 7, 132),      # small, K below 128: not split
    (1, 3, 2, 0, 132),      # K = 0
    (1, 40, 36, 200, 132),  # small 64 x 64 tiles, split in 3 (the last 40 k)
    (1, 150, 20, 97, 132),  # small 128 x 32 tiles, two row tiles, K below 128
    (1, 65, 66, 300, 4),    # kernel 4 (both sides above 64), split
    (2, 70, 65, 50, 1),     # kernel 4, batched, not split (its tiles fill the SMs)
    (1, 257, 5, 520, 1),    # kernel 4, a head (2 tiles: a wave of 1 SM) and a tail of 1 row in 2 splits
    (1, 1, 37, 301, 2),     # cols in 16-column blocks (128-column ones fewer than the SMs)
    (1, 1, 40, 200, 3),     # the same
    (2, 1, 20, 70, 3),      # the same, batched
    (1, 70, 67, 260, 1),    # stream-K: one tile, 2 workers
    (1, 300, 66, 190, 2),   # stream-K: 3 tiles, 4 workers
]


def test_the_reductions_chains_of_additions_stay_short():
    """The README's accuracy claim for split K: however many splits and outputs, no chain of float32
    additions in the reduction is much longer than 2 sqrt(splits) (slices of the splits in groups of
    about sqrt(slice), then the slices in order), and every slice but the empty ones is used."""
    for sms in (1, 40, 132):
        for total in (1, 37, 768, 4096, 32000, 10**6):
            for splits in (2, 3, 5, 17, 88, 255, 1024, 2048, 4096):
                slices, group = reduce_slices(total, splits, sms)
                assert 1 <= slices <= 32 and slices & (slices - 1) == 0 and slices <= splits
                per = ceil_div(splits, slices)
                chain = group + ceil_div(per, group) + slices  # within a group, the groups, the slices
                assert chain <= 2 * math.isqrt(splits) + 3 + slices, (sms, total, splits, slices, group)
                # outputs x slices reach about 4 waves of the GPU's threads, or the slices hit a bound
                assert total * slices >= 4 * sms * kGemvThreads or slices == 32 or 2 * slices > splits


def test_the_cases_take_the_paths_they_are_meant_to():
    """The plan's rule, as the README states it (and the spec's shapes rely on, on an H100: 132 SMs)."""
    plans = [plan4(b, m, n, k, s)[:2] for b, m, n, k, s in CASES]
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
