"""Grading for exercise 05, C = A @ B: each numbered kernel (naive, shared-memory tiles, register
blocking, cp.async pipeline: strict float32; tensor cores, mma.sync and Hopper's wgmma: TF32 for
float32, BF16 for bfloat16) is graded on its own, the fastest strict-float32 one (kernel 4) is timed
against cuBLAS (TF32 off)."""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from grader.verify.checks import (LAYOUTS, CheckFailure, aligned_cropped_copy, assert_own_kernels, assert_rel_error, expect_error,
                                  on_a_busy_stream, poison_next_allocation, relative_error, require_capability,
                                  require_plain_tensor, terms_norm, cancelling_terms, transposed_copy,
                                  unmodified)
from grader.verify import precision as probes
from grader.verify import sass
from grader.verify.observe import SLEEP_KERNEL, KernelRule, kernel_function, observe
from grader.verify.spec import (AuditCall, Benchmark, Check, CheckList, Context, Spec, audit_randn, one_per_axis,
                                random_shape)
from grader.verify.timer import math_mode

# Normwise relative error against a float64 reference. Strict fp32 products of these sizes are
# near 1e-7; TF32 (10-bit mantissa) gives about 3e-4 and fp16 about 5e-4: both fail.
REL_TOL = 1e-5


# --- kernel 5, tensor cores: a tolerance derived from the precision, element by element ------------
@dataclass(frozen=True)
class Precision:
    """How a tensor-core product rounds: its operands to `operand_u` (unit roundoff; 0 where the inputs
    are taken exactly), float32 sums, the result once to `output_u`."""

    name: str
    dtype: torch.dtype  # of the inputs and of the result
    operand_u: float
    output_u: float


TF32 = Precision("TF32", torch.float32, 2.0**-11, 2.0**-24)  # float32 inputs rounded to 10 mantissa bits
BF16 = Precision("BF16", torch.bfloat16, 0.0, 2.0**-8)  # bfloat16 inputs are exact; C rounded to bfloat16
SUM_U = 2.0**-24  # the tensor cores' float32 sums
OPERAND_SIGMAS = 5.0  # operand rounding: the error's spread times 5 (about 8 standard deviations)
SUM_SIGMAS = 4.0  # float32 summation, K terms: 4 sqrt(K) u (Higham's probabilistic bound, with margin)
# The precision probes (grader.verify.precision: values near 1e5 and 1e-6, which FP16 cannot hold; operands in
# [0.5, 1.5), where truncation adds up), each on every path of the tensor-core versions' plans, within the
# group's own bound (tensor_core_bound): (path, (batch,) M, N, K), K >= probes.POSITIVE_MIN_K. The first
# path's checks keep the probe's plain name. Version 5 (H100 plans): its tiles; split K over them (43
# splits for TF32, 22 for BF16); float32's tall products (M >= 2048), which read B^T written rounded by
# matmul_transpose_tf32 (bfloat16 takes its tiles there); a batch. Version 6: its tiles (float32 after
# matmul_transpose_tf32's B^T), K not a multiple of 16 bytes (copies with rows padded), a tall product, a batch.
RANGE_SCALES = probes.RANGE_SCALES
PROBE_PATHS = {
    5: (("tiles", (130, 260, 600)), ("split K", (48, 130, 4099)), ("M >= 2048, B^T", (2049, 130, 1001)),
        ("batch", (3, 97, 101, 520))),
    6: (("tiles", (130, 264, 600)), ("rows padded", (129, 257, 1031)), ("M >= 2048", (2049, 136, 1000)),
        ("batch", (3, 97, 104, 520))),
}


def _product(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """A B in float64 (batches too): the reference, and on squared operands the terms' norms (terms_norm)."""
    return a.double() @ b.double()


def tensor_core_bound(a: torch.Tensor, b: torch.Tensor, precision: Precision) -> tuple[torch.Tensor, torch.Tensor]:
    """(the float64 product, the error allowed per element) for C = A B on tensor cores:

        |C - AB|_ij <= 5 u_op sqrt(sum_k a_ik^2 b_kj^2) + 4 sqrt(K) u_32 (|A||B|)_ij + u_out |AB|_ij

    Rounding each operand to u_op makes each product's relative error at most 2 u_op, randomly signed:
    their sum over k has the spread of sqrt(sum (a b)^2) u_op (about sqrt(K) u_op times the typical
    product, hence the usual `u sqrt(K)`), and exactly |a b| 2 u_op when K = 1. The float32 sums add
    at most sqrt(K) u_32 of the terms' magnitudes (probabilistically), and the result's own rounding
    u_out of it. Non-finite inputs count as 0 here (where they make C non-finite, so must C be)."""
    a64 = torch.nan_to_num(a.detach().double(), nan=0.0, posinf=0.0, neginf=0.0)
    b64 = torch.nan_to_num(b.detach().double(), nan=0.0, posinf=0.0, neginf=0.0)
    ref = a64 @ b64  # (batches too: the bound is per element either way)
    spread = terms_norm(_product, (a64, b64))
    magnitude = a64.abs() @ b64.abs()
    k = a.shape[-1]
    sums = OPERAND_SIGMAS * precision.operand_u * spread + SUM_SIGMAS * math.sqrt(max(k, 1)) * SUM_U * magnitude
    return ref, sums * (1 + precision.output_u) + precision.output_u * ref.abs()


def normwise_tolerance(a: torch.Tensor, b: torch.Tensor, precision: Precision) -> float:
    """The elementwise bound as a normwise relative error (what the judge and the generated
    properties compare): ||bound|| / ||AB||, or ||bound|| where AB = 0."""
    ref, bound = tensor_core_bound(a, b, precision)
    norm = torch.linalg.vector_norm(ref).item()
    allowed = torch.linalg.vector_norm(bound).item()
    return allowed / norm if norm > 0 else allowed


def assert_tensor_core_result(c, a: torch.Tensor, b: torch.Tensor, precision: Precision, what: str) -> None:
    """Every element of c within tensor_core_bound of the float64 product of the same inputs."""
    require_plain_tensor(c, what)
    expected = (*a.shape[:-1], b.shape[-1])
    if tuple(c.shape) != expected:
        raise CheckFailure(f"{what}: shape {tuple(c.shape)}, expected {expected}")
    if c.dtype != precision.dtype:
        raise CheckFailure(f"{what}: output dtype {c.dtype}, expected {precision.dtype} (the inputs' dtype)")
    ref, bound = tensor_core_bound(a, b, precision)
    got = c.detach().double()
    bad = ~((got - ref).abs() <= bound)  # NaN compares False: bad
    count = int(bad.sum())
    if count:
        first = bad.nonzero()[:3].tolist()
        shown = "; ".join(f"at {at}: got {got[tuple(at)].item():.8g}, expected {ref[tuple(at)].item():.8g} "
                          f"+- {bound[tuple(at)].item():.3g}" for at in first)
        raise CheckFailure(f"{what}: {count} of {c.numel()} elements outside {precision.name}'s error bound "
                           f"(the README's How it is graded); first: {shown}")

# (M, N, K): ones, row and column vectors, primes, one off the 32- and 128-wide tiles, K not a
# multiple of the 8- or 32-deep steps, K = 1; N % 4 and K % 4 chosen so that each of the fast
# kernel's float4 paths (A, B, both, neither) runs.
SHAPES = (
    (1, 1, 1), (1, 1, 300), (1, 1000, 1), (1, 513, 257), (1000, 1, 257), (2, 3, 4), (31, 33, 17), (32, 32, 32),
    (33, 31, 65), (97, 101, 103), (127, 129, 131), (128, 128, 128), (129, 257, 1000), (200, 1032, 257),
    (256, 384, 64), (513, 1031, 257), (1000, 1000, 1), (2000, 3, 2000), (1031, 1000, 4099),
)


# Version 4's other paths (the README's "Shape classes"), graded in async_pipeline beside SHAPES, which
# already holds small vectors. (The splits below are an H100's, 132 SMs; other GPUs split differently,
# and every shape still runs its path.) N == 1, a warp per row: K % 4 == 0 with a tail after the last
# 128-float step (517x1x1000), split in 4 ranges with tails (3x1x4100), a long dot product split in
# ranges of odd length (1x1x100003). M == 1, 8 warps a block over 128 columns (4 a lane, N odd: one
# float at a time): split in 38 ranges, the last shorter (1x777x5003); the reduction then shares each
# output among 32 threads. M == 1 in 16-column blocks, 8 rows a warp, not split (128-column blocks
# would be fewer than the SMs): float4 loads (1x2200x1001) and one float at a time (1x2203x999).
# Split K: 43 splits of 96, the last shorter, N % 4 != 0 (129x257x4099); 261 splits over a
# single tile (100x70x50000); and where K does not dominate but 6 tiles fill few SMs, 4 splits of 72, the
# last 44 (300x200x260). The small tiles (a side of 64 or less; SHAPES' small products take them too):
# 64 x 64 tiles, 256 splits of 256 (64x64x65536) and 43 of 96, the last 67, K odd (48x130x4099);
# 32 x 128 tiles, 11 splits of 96, the last 43 (5x300x1003), and 16 of 64 with float4 loads
# (24x512x1024); 128 x 32 tiles, two row tiles, one float at a time (150x20x97).
VERSION4_SHAPES = ((517, 1, 1000), (3, 1, 4100), (1, 1, 100003), (1, 777, 5003), (1, 3, 2000),
                   (1, 2200, 1001), (1, 2203, 999),
                   (129, 257, 4099), (100, 70, 50000), (64, 64, 65536), (300, 200, 260), (48, 130, 4099),
                   (5, 300, 1003), (24, 512, 1024), (150, 20, 97))
# Version 5's paths beside SHAPES (the README's "Shape classes"; H100 splits, TF32 / BF16): split K over
# kernel 5's tiles where K dominates (one tile, 100x70x50000: 261 splits; a short side, 5x300x1003:
# 11 / 6, 48x130x4099: 43 / 22, the last range shorter) and where few tiles fill few SMs (300x200x260,
# 6 tiles: 3 / 2 splits, the last 68 k); float32 matrix-vector products, version 4's kernels split
# (3x1x4100, 1x777x5003) or in 16-column blocks (1x2203x999), which bfloat16 takes as split tiles (22 and 27 splits);
# float32 products of 2048 rows or more, kernel 5 reading B^T (rounded by matmul_transpose_tf32): K odd,
# so A's copies go element by element and B^T's rows are padded (2049x130x1001), 16-byte copies of A
# (4100x64x96), and split K over 16 tiles (2048x40x4099).
VERSION5_SHAPES = ((100, 70, 50000), (5, 300, 1003), (48, 130, 4099), (300, 200, 260), (3, 1, 4100), (1, 777, 5003),
                   (1, 2203, 999), (2049, 130, 1001), (4100, 64, 96), (2048, 40, 4099))
# Version 6's edges beside SHAPES: K or N not a multiple of 16 bytes (A, and bfloat16 B, copied with
# their rows padded; B^T's padded with zeros), K shorter than one 128-byte k step, N one past a
# 256-column tile and M one past a 128-row one, several k steps with a partial last one.
VERSION6_SHAPES = ((129, 257, 33), (300, 513, 1030), (7, 5, 3), (257, 1000, 4097), (1, 300, 70))
# batches (versions 4 to 6): (batch, M, N, K), with one, odd and vector-shaped members, a split one, and a
# tall one with an odd K (version 5's float32 B^T, A read 4 bytes at a time: grader/verify/paths.py's v5.bt.scalar_a)
BATCHES = ((1, 33, 31, 65), (3, 97, 101, 103), (5, 1, 300, 77), (4, 100, 1, 1000), (2, 64, 48, 20000),
           (2, 2049, 65, 33))
# more batch elements than gridDim.z holds (65535): the launcher must take several launches
MANY = 65535 + 7
# Products whose plan depends on the GPU's SM count (kernel 4's tiles are 128 x 128; tests/test_matmul_plan.py
# checks on several SM counts that each takes its path): a whole wave of 2 blocks per SM of 3-column rows of
# tiles and a quarter of one more (the head and the tail), and about 1.2 SMs' worth of tiles (stream-K).
def tail_shape(sms: int) -> tuple[int, int, int]:
    slots = 2 * sms
    rows = slots // 3 + max(1, slots // 12)  # of 3 column tiles (N = 300): 88 + 22 on an H100
    return 128 * rows - 57, 300, 777


def streamk_shape(sms: int, n: int = 300) -> tuple[int, int, int]:
    return 128 * math.ceil(0.4 * sms) - 57, n, 777  # 3 x 53 tiles on an H100


def _sm_count() -> int:
    return torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count


# the large-K accuracy check: a product with one 64 x 64 tile and K = 2^18 (128 MiB of A and B); its
# error against float64 must be within 10 times cuBLAS's (strict float32) on the same inputs
LARGE_K = (64, 64, 1 << 18)
LARGE_K_FACTOR = 10.0


def _kernels(kernel) -> tuple[str, ...]:
    return (kernel,) if isinstance(kernel, str) else tuple(kernel)


def _names(arg: str) -> tuple[str, ...]:
    """Ways an error message can name the argument `arg`."""
    return (f"{arg} must", f"{arg} is", f"{arg} has", f"`{arg}`", f"'{arg}'", f"{arg}:", f"{arg} (", f"{arg}'s")


def _rand(ctx: Context, name: str, shape) -> torch.Tensor:
    return torch.randn(shape, generator=ctx.generator(name), device="cuda")


def _on_capability(run, capability: tuple[int, int], what: str):
    """A check of a tensor-core version: where the GPU (or the build) lacks its instructions (version 5
    below compute capability 8.0, a T4; version 6 anywhere but a 9.0 GPU with a "9.0a" build) it is
    reported as not run on this GPU, which costs its group nothing (grader.verify.checks.require_capability)."""
    def checked(ctx):
        require_capability(*capability, what)
        return run(ctx)
    checked.__wrapped__ = run  # what it checks, for the grader (grader.verify.sass.instruction_of)
    return checked


# the tensor-core groups: (group, version, kernels, precision); below compute capability 8.0 (a T4)
# their checks are reported as not run on this GPU and cost nothing. Version 5 plans as version 4 does
# (given code): split K sums kernel 5's partial products with version 4's reduction, float32
# matrix-vector products take version 4's matrix-vector kernels, and tall float32 products read B^T,
# written by matmul_transpose_tf32. Version 6 (Hopper only: wgmma and TMA, grader.verify.checks.ARCH_SPECIFIC)
# runs kernel 6's tiles, for float32 after matmul_transpose_tf32 (B^T).
KERNELS5_TF32 = ("matmul_kernel5", "matmul_splitk_reduce", "matmul_gemv_rows", "matmul_gemv_cols",
                 "matmul_transpose_tf32")
KERNELS5_BF16 = ("matmul_kernel5", "matmul_splitk_reduce")
KERNELS6 = ("matmul_kernel6", "matmul_transpose_tf32")
TENSOR_CORES = (("tensor_cores_tf32", 5, KERNELS5_TF32, TF32), ("tensor_cores_bf16", 5, KERNELS5_BF16, BF16),
                ("wgmma_tf32", 6, KERNELS6, TF32), ("wgmma_bf16", 6, KERNELS6, BF16))
# the instruction each tensor-core group's product kernel must hold in the code the GPU runs (grader.verify.sass):
# every instantiation of it for the group's element type
INSTRUCTIONS = {
    "tensor_cores_tf32": sass.MmaInstruction("mma", "tf32", ("matmul_kernel5",), "float"),
    "tensor_cores_bf16": sass.MmaInstruction("mma", "bf16", ("matmul_kernel5",), "__nv_bfloat16"),
    "wgmma_tf32": sass.MmaInstruction("wgmma", "tf32", ("matmul_kernel6",), "float"),
    "wgmma_bf16": sass.MmaInstruction("wgmma", "bf16", ("matmul_kernel6",), "__nv_bfloat16"),
}
TENSOR_CORE_CAPABILITY = (8, 0)
WGMMA_CAPABILITY = (9, 0)  # exactly 9.0, from a "9.0a" build (grader.verify.checks.ARCH_SPECIFIC)


def capability_of(version: int) -> tuple[int, int] | None:
    """The compute capability a version's instructions need (None: any GPU)."""
    return WGMMA_CAPABILITY if version == 6 else TENSOR_CORE_CAPABILITY if version == 5 else None


@dataclass
class MatmulSpec(Spec):
    # (group, version, kernel name): every numbered version, each group graded on its own
    # (version 4 has given kernels for the shapes its tiles do not fit: matrix-vector products, small
    # tiles for products with a short side, and the split-K reduction)
    versions_graded: tuple[tuple[str, int, str | tuple[str, ...]], ...] = (
        ("naive", 1, "matmul_kernel1"), ("shared_tiles", 2, "matmul_kernel2"), ("register_blocked", 3, "matmul_kernel3"),
        ("async_pipeline", 4, ("matmul_kernel4", "matmul_gemv_rows", "matmul_gemv_cols", "matmul_small_tiles",
                               "matmul_splitk_reduce", "matmul_kernel4_streamk", "matmul_streamk_fixup")),
        *((g, v, k) for g, v, k, _ in TENSOR_CORES))

    @staticmethod
    def precision(group: str) -> Precision | None:
        """The tensor-core precision a group is graded in; None: strict float32 (REL_TOL)."""
        return next((p for g, _, _, p in TENSOR_CORES if g == group), None)

    def _dtype(self, group: str) -> torch.dtype:
        p = self.precision(group)
        return p.dtype if p else torch.float32

    def _rand(self, ctx: Context, group: str, name: str, shape, scale: float = 1.0) -> torch.Tensor:
        return (_rand(ctx, name, shape) * scale).to(self._dtype(group))

    def _assert_result(self, c, a, b, group: str, what: str) -> None:
        precision = self.precision(group)
        if precision is None:
            if isinstance(c, torch.Tensor) and c.dtype != torch.float32:
                raise CheckFailure(f"{what}: output dtype {c.dtype}, expected torch.float32")
            # (batched: one norm over all) relative to the terms' norm where the answer cancels (a 1 x 1 product)
            ref = _product(a, b)
            assert_rel_error(c, ref, REL_TOL, what, terms=cancelling_terms(_product, (a, b), ref))
        else:
            assert_tensor_core_result(c, a, b, precision, what)

    def _expect(self, ctx: Context, version: int, a: torch.Tensor, b: torch.Tensor, what: str, group: str = "") -> None:
        with unmodified(A=a, B=b):
            poison_next_allocation(math.prod(a.shape[:-1]) * b.shape[-1], self._dtype(group))
            c = ctx.module.matmul(a, b, version)
            torch.cuda.synchronize()
        if not isinstance(c, torch.Tensor):
            raise CheckFailure(f"{what}: expected a tensor, got {type(c).__name__}")
        self._assert_result(c, a, b, group, what)

    def _shape(self, ctx: Context, version: int, group: str, m: int, n: int, k: int) -> None:
        name = f"{group}[{m}x{n}x{k}]"
        self._expect(ctx, version, self._rand(ctx, group, name + "A", (m, k)), self._rand(ctx, group, name + "B", (k, n)),
                     f"{group}[M={m}, N={n}, K={k}]", group)

    def _check_probe(self, ctx: Context, version: int, group: str, probe: probes.Probe, path: str,
                     shape: tuple[int, ...]) -> None:
        """A precision probe's operands (grader.verify.precision) on one planner path, within the group's bound.
        (Random signs hide a truncation, its bias cancelling too; ordinary magnitudes hide FP16.)"""
        *batch, m, n, k = shape
        name = f"{group}{probe.label}{'x'.join(map(str, shape))}"
        d = self._dtype(group)
        a = probe.draw(ctx.generator(name + "A"), (*batch, m, k), d)
        b = probe.draw(ctx.generator(name + "B"), (*batch, k, n), d)
        self._expect(ctx, version, a, b, probes.what(group, probe, f"{path} {'x'.join(map(str, shape))}"), group)

    def checks(self) -> list[Check]:
        checks = CheckList()
        for group, version, kernel in self.versions_graded:
            precision = self.precision(group)

            def add(name, run, slow=False, cc=capability_of(version),
                    what=f"version {version} ({precision.name if precision else ''} tensor cores)"):
                checks.add(name, run if cc is None else _on_capability(run, cc, what), slow=slow)

            dtype = self._dtype(group)
            extra = {4: VERSION4_SHAPES, 5: VERSION5_SHAPES, 6: VERSION6_SHAPES}.get(version, ())
            for m, n, k in SHAPES + extra:
                add(f"{group}[{m}x{n}x{k}]", lambda ctx, v=version, g=group, s=(m, n, k): self._shape(ctx, v, g, *s))
            if version >= 4:
                for shape in BATCHES:
                    add(f"{group}[batch {'x'.join(map(str, shape))}]",
                        lambda ctx, v=version, g=group, s=shape: self._batch(ctx, v, g, *s))
                add(f"{group}[batch views]", lambda ctx, v=version, g=group: self._check_batch_views(ctx, v, g))
                add(f"{group}[batch of {MANY}]", lambda ctx, v=version, g=group: self._check_many(ctx, v, g))
            if version == 4:
                add(f"{group}[a wave of tiles and a tail]", lambda ctx, v=version, g=group: self._check_tail(ctx, v, g))
                add(f"{group}[tiles shared by stream-K's workers]",
                    lambda ctx, v=version, g=group: self._check_streamk(ctx, v, g))
                add(f"{group}[large K error within {LARGE_K_FACTOR:g}x of cuBLAS]",
                    lambda ctx, v=version, g=group: self._check_large_k(ctx, v, g))
            if version >= 4:
                add(f"{group}[split K gives the same bits every run]",
                    lambda ctx, v=version, g=group: self._check_deterministic(ctx, v, g))
            add(f"{group}[K = 0 gives zeros]", lambda ctx, v=version, g=group, d=dtype: self._expect(
                ctx, v, torch.empty(37, 0, device="cuda", dtype=d), torch.empty(0, 45, device="cuda", dtype=d),
                f"{g}[K = 0]", g))
            for i, (path, shape) in enumerate(PROBE_PATHS.get(version, ()) if precision else ()):
                for probe in probes.PROBES:
                    add(probes.check_name(group, probe, None if i == 0 else f"{path}, {'x'.join(map(str, shape))}"),
                        lambda ctx, v=version, g=group, p=probe, pa=path, s=shape: self._check_probe(ctx, v, g, p, pa, s))
            add(f"{group}[empty]", lambda ctx, v=version, g=group: self._check_empty(ctx, v, g))
            add(f"{group}[non-contiguous]", lambda ctx, v=version, g=group: self._check_noncontiguous(ctx, v, g))
            add(f"{group}[every layout of A and B]", lambda ctx, v=version, g=group: self._check_layouts(ctx, v, g))
            if version == 4:
                add(f"{group}[transposed views read in place]", lambda ctx, v=version, g=group: self._check_in_place(ctx, v, g),
                    slow=True)
            add(f"{group}[unaligned views]", lambda ctx, v=version, g=group: self._check_unaligned(ctx, v, g))
            add(f"{group}[current stream]", lambda ctx, v=version, g=group: self._check_stream(ctx, v, g))
            add(f"{group}[own kernel ran]", lambda ctx, v=version, g=group, kn=kernel: self._check_own(ctx, v, g, kn),
                slow=True)
            if group in INSTRUCTIONS:  # last: a wrong precision is reported by the value checks first
                need = INSTRUCTIONS[group]
                add(f"{group}[{need.describe()} in its kernels' machine code]",
                    sass.InstructionCheck(need))
        self._input_checks(checks)
        checks.add("registration[opcheck]", self._check_opcheck)
        return checks

    def _batch(self, ctx: Context, version: int, group: str, batch: int, m: int, n: int, k: int) -> None:
        name = f"{group}[batch {batch}x{m}x{n}x{k}]"
        self._expect(ctx, version, self._rand(ctx, group, name + "A", (batch, m, k)),
                     self._rand(ctx, group, name + "B", (batch, k, n)), f"{group}[batch of {batch}, M={m}, N={n}, K={k}]",
                     group)

    def _check_batch_views(self, ctx: Context, version: int, group: str) -> None:
        """Batches as views: every other matrix of a larger batch, transposed matrices, a batch dim that is
        not the outermost; and an empty batch."""
        a = self._rand(ctx, group, "bvA", (6, 37, 53))
        b = self._rand(ctx, group, "bvB", (6, 29, 53))
        self._expect(ctx, version, a[::2], b[1::2].transpose(1, 2), f"{group}[A[::2] @ B[1::2].transpose(1, 2)]", group)
        p = self._rand(ctx, group, "bvP", (41, 3, 53))  # (M, batch, K)
        self._expect(ctx, version, p.permute(1, 0, 2), b[:3].transpose(1, 2),
                     f"{group}[A a (M, batch, K) tensor permuted to (batch, M, K)]", group)
        d = self._dtype(group)
        c = ctx.module.matmul(torch.empty(0, 3, 4, device="cuda", dtype=d), torch.empty(0, 4, 5, device="cuda", dtype=d),
                              version)
        torch.cuda.synchronize()
        if tuple(c.shape) != (0, 3, 5):
            raise CheckFailure(f"{group}[an empty batch (0, 3, 4) @ (0, 4, 5)]: shape {tuple(c.shape)}, expected (0, 3, 5)")

    def _check_many(self, ctx: Context, version: int, group: str) -> None:
        """More batch elements than gridDim.z holds: all computed (several launches), or an error naming A;
        never some left unwritten."""
        for m, n, k in ((2, 3, 5), (3, 1, 6)):
            a = self._rand(ctx, group, f"manyA{n}", (MANY, m, k))
            b = self._rand(ctx, group, f"manyB{n}", (MANY, k, n))
            with unmodified(A=a, B=b):
                poison_next_allocation(MANY * m * n, self._dtype(group))
                try:
                    c = ctx.module.matmul(a, b, version)
                    torch.cuda.synchronize()
                except RuntimeError as e:
                    if not any(x in str(e) for x in _names("A")):
                        raise CheckFailure(f"{group}[batch of {MANY}]: an error that does not name A: {str(e)[:200]}") from None
                    continue
            self._assert_result(c, a, b, group, f"{group}[batch of {MANY} ({m} x {k}) @ ({k} x {n}), more than gridDim.z's 65535]")

    def _check_tail(self, ctx: Context, version: int, group: str) -> None:
        """Kernel 4's tiles filling a whole wave of this GPU (2 blocks per SM) and then a quarter of one:
        version 4 runs the wave's rows of tiles whole and splits K over the rest (the README's Shape
        classes: a head and a tail), so the rows on either side of that line, the last row tile
        (partial) and the tail's reduction into C's rows are all in one product."""
        m, n, k = tail_shape(_sm_count())
        self._shape(ctx, version, group, m, n, k)
        # the same with B a transposed view (nn.Linear's x @ W.t(): read in place by both launches)
        a, b = self._rand(ctx, group, "tailA", (m, k)), self._rand(ctx, group, "tailB", (k, n))
        self._expect(ctx, version, a, transposed_copy(b), f"{group}[M={m}, N={n}, K={k}, B a transposed view]", group)

    def _check_streamk(self, ctx: Context, version: int, group: str) -> None:
        """Kernel 4's tiles filling about 1.2 times this GPU's SMs (3 columns of tiles), unsplit: version 4
        shares their k steps among as many blocks as the GPU holds (stream-K, the README's Shape classes),
        so tiles run whole into C and tiles in parts summed by the fix-up are both in one product; N = 300
        (16-byte copies of B) and 301 (4-byte ones), the last row tile partial."""
        for n in (300, 301):
            self._shape(ctx, version, group, *streamk_shape(_sm_count(), n))

    def _check_large_k(self, ctx: Context, version: int, group: str) -> None:
        """A long K over few output tiles (version 4 splits it): the error against float64 within
        LARGE_K_FACTOR times cuBLAS's (strict float32, TF32 off) on the same inputs, and REL_TOL."""
        m, n, k = LARGE_K
        a, b = self._rand(ctx, group, "largeKA", (m, k)), self._rand(ctx, group, "largeKB", (k, n))
        ref = a.double() @ b.double()
        with unmodified(A=a, B=b):
            poison_next_allocation(m * n)
            c = ctx.module.matmul(a, b, version)
            torch.cuda.synchronize()
        what = f"{group}[large K: {m} x {n} x {k}]"
        assert_rel_error(c, ref, REL_TOL, what)
        with math_mode(tf32=False):
            cublas = relative_error(torch.matmul(a, b), ref)
        ours = relative_error(c, ref)
        if not ours <= LARGE_K_FACTOR * cublas:
            raise CheckFailure(f"{what}: relative error {ours:.3g} against float64, more than {LARGE_K_FACTOR:g} times "
                               f"cuBLAS's {cublas:.3g} on the same inputs (a {k}-long chain of float32 additions per "
                               "output; split K: the README's Shape classes)")

    def _check_deterministic(self, ctx: Context, version: int, group: str) -> None:
        """Split K, the split matrix-vector products and (version 4) stream-K's shared tiles sum their
        partial products in a fixed order: the same inputs give the same bits every run (no atomics)."""
        bits = torch.int32 if self._dtype(group).itemsize == 4 else torch.int16
        shapes = [(100, 70, 50000), (1, 1, 100003), (1, 777, 5003)]
        if version == 4:
            shapes.append(streamk_shape(_sm_count()))
        for m, n, k in shapes:
            a, b = self._rand(ctx, group, f"detA{m}", (m, k)), self._rand(ctx, group, f"detB{m}", (k, n))
            first = ctx.module.matmul(a, b, version)
            for _ in range(2):
                again = ctx.module.matmul(a, b, version)
                torch.cuda.synchronize()
                if not torch.equal(first.view(bits), again.view(bits)):
                    raise CheckFailure(f"{group}[{m} x {n} x {k} twice]: the results differ in "
                                       f"{int((first.view(bits) != again.view(bits)).sum())} elements: "
                                       "the sums must be taken in the same order every run")

    def _check_stream(self, ctx: Context, version: int, group: str) -> None:
        a, b = self._rand(ctx, group, f"{group}streamA", (333, 257)), self._rand(ctx, group, f"{group}streamB", (257, 190))
        c = on_a_busy_stream(lambda x, y: ctx.module.matmul(x, y, version), a, b)
        self._assert_result(c, a, b, group, f"{group} inside `with torch.cuda.stream(s)` (launch on the current stream)")

    def _check_own(self, ctx: Context, version: int, group: str, kernel: str) -> None:
        # made outside the profiled call
        a, b = self._rand(ctx, group, "ownA", (300, 200)), self._rand(ctx, group, "ownB", (200, 260))
        assert_own_kernels(lambda: ctx.module.matmul(a, b, version), _kernels(kernel), group)

    def _input_checks(self, checks: CheckList) -> None:
        fn = lambda ctx: ctx.module.matmul  # noqa: E731
        m = lambda *s: torch.ones(*s, device="cuda")  # noqa: E731
        bad = [
            ("cpu A", lambda: (torch.ones(4, 5), torch.ones(5, 3)), ("A",), "a CPU A"),
            ("float64 A", lambda: (m(4, 5).double(), m(5, 3)), ("A",), "a float64 A"),
            ("float16 B", lambda: (m(4, 5), m(5, 3).half()), ("B",), "a float16 B"),
            ("1-D A", lambda: (m(5), m(5, 3)), ("A",), "a 1-D A"),
            ("4-D B", lambda: (m(4, 5), m(1, 2, 5, 3)), ("B",), "a 4-D B"),
            ("3-D B beside a 2-D A", lambda: (m(4, 5), m(2, 5, 3)), ("B",), "a 3-D B beside a 2-D A (no broadcasting)"),
            ("batch sizes differ", lambda: (m(2, 4, 5), m(3, 5, 3)), ("A", "B"), "A (2, 4, 5) with B (3, 5, 3)"),
            ("batched inner sizes differ", lambda: (m(2, 4, 5), m(2, 6, 3)), ("A", "B"), "A (2, 4, 5) with B (2, 6, 3)"),
            ("3-D with version 3", lambda: (m(2, 4, 5), m(2, 5, 3), 3), ("A",),
             "a batch with version=3 (only versions 4 to 6 take batches)"),
            ("inner sizes differ", lambda: (m(4, 5), m(6, 3)), ("A", "B"), "A (4, 5) with B (6, 3)"),
            ("bfloat16 B with a float32 A", lambda: (m(4, 5), m(5, 3).bfloat16(), 5), ("B",),
             "a bfloat16 B beside a float32 A"),
            ("bfloat16 A with version 4", lambda: (m(4, 5).bfloat16(), m(5, 3).bfloat16(), 4), ("A",),
             "bfloat16 operands with version=4 (only versions 5 and 6 take them)"),
        ]
        for label, args, args_named, what in bad:
            names = tuple(n for a in args_named for n in _names(a))
            checks.add(f"input_checks[{label}]",
                       lambda ctx, a=args, names=names, what=what: expect_error(fn(ctx), *a(), names=names, what=what),
                       needs_gpu=label != "cpu A")
        for version in (0, 7):
            checks.add(f"input_checks[version={version}]",
                       lambda ctx, v=version: expect_error(fn(ctx), m(4, 5), m(5, 3), v, names=_names("version"),
                                                           what=f"version={v}"))
        # one row more than gridDim.y's 65535 row tiles cover: an error naming A (K = 1 keeps it small)
        # (version 5's grid is version 4's; its check needs a tensor-core GPU, so it is not repeated here)
        for version, rows in ((1, 8), (2, 32), (3, 128), (4, 128)):
            checks.add(f"input_checks[M too large for the grid, version={version}]",
                       lambda ctx, v=version, r=65535 * rows + 1: expect_error(
                           fn(ctx), m(r, 1), m(1, 3), v, names=_names("A"), what=f"A with M = {r}, version={v}"))

    def _check_empty(self, ctx: Context, version: int, group: str) -> None:
        d = self._dtype(group)
        for (mm, k), (k2, n) in (((0, 5), (5, 3)), ((4, 5), (5, 0)), ((0, 0), (0, 0))):
            c = ctx.module.matmul(torch.empty(mm, k, device="cuda", dtype=d), torch.empty(k2, n, device="cuda", dtype=d),
                                  version)
            torch.cuda.synchronize()
            if tuple(c.shape) != (mm, n):
                raise CheckFailure(f"{group}[empty A ({mm}, {k}) @ B ({k2}, {n})]: shape {tuple(c.shape)}, expected {(mm, n)}")

    def _check_noncontiguous(self, ctx: Context, version: int, group: str) -> None:
        a = self._rand(ctx, group, "ncA", (260, 130))
        b = self._rand(ctx, group, "ncB", (260, 300))
        self._expect(ctx, version, a.t(), b, f"{group}[A = base.t(), a transposed view]", group)
        self._expect(ctx, version, a[::2, :100], b[:100, 1::2], f"{group}[A and B strided views]", group)
        # matrix-vector products whose matrix is a transposed view (versions 4 and 5 multiply the matrix's
        # own storage there, by the other matrix-vector kernel): N == 1 and M == 1, with and without
        # float4 loads, and a batch
        for m, k in ((257, 301), (256, 300)):
            base, x = self._rand(ctx, group, f"ncAt{m}", (k, m)), self._rand(ctx, group, f"ncx{m}", (k, 1))
            self._expect(ctx, version, base.t(), x, f"{group}[A = base.t() ({m} x {k}) @ a vector]", group)
            base, x = self._rand(ctx, group, f"ncBt{m}", (m, k)), self._rand(ctx, group, f"ncy{m}", (1, k))
            self._expect(ctx, version, x, base.t(), f"{group}[a row vector @ B = base.t() ({k} x {m})]", group)
        if version >= 4:
            base, x = self._rand(ctx, group, "ncAtb", (3, 130, 70)), self._rand(ctx, group, "ncxb", (3, 130, 1))
            self._expect(ctx, version, base.transpose(1, 2), x, f"{group}[a batch of A = base.transpose(1, 2) @ vectors]",
                         group)

    def _check_layouts(self, ctx: Context, version: int, group: str) -> None:
        """Every pairing of A's and B's layout (contiguous, and grader.verify.checks.LAYOUTS: every other element,
        rows cropped from wider ones, transposed; and rows cropped from wider ones without an offset), on shapes that take each of version 4's paths on an H100 (its tiles
        with K split and without, the small tiles, a batch), off every multiple of 4 where they can be; and one
        with every side a multiple of 8, where every 16-byte path takes its operands as they are (bfloat16's
        too: a view read as if it were contiguous shows only there, version 6 copying the others to pad them)."""
        shapes = [(130, 300, 260), (257, 517, 77), (33, 300, 200), (136, 264, 72)]
        if version >= 4:
            shapes.append((3, 130, 70, 150))
        layouts = {"contiguous": lambda t: t, **LAYOUTS, "aligned crop of a wider tensor": aligned_cropped_copy}
        for shape in shapes:
            *batch, m, n, k = shape
            name = "x".join(map(str, shape))
            a, b = self._rand(ctx, group, f"layA{name}", (*batch, m, k)), self._rand(ctx, group, f"layB{name}", (*batch, k, n))
            for la, fa in layouts.items():
                for lb, fb in layouts.items():
                    xa, xb = fa(a), fb(b)
                    if xa is not None and xb is not None:  # the batch layouts need a batch
                        self._expect(ctx, version, xa, xb, f"{group}[{name}: A {la}, B {lb}]", group)

    def _check_in_place(self, ctx: Context, version: int, group: str) -> None:
        """Version 4 reads a transposed A or B, or both, where kernel 4's tiles run: no copy kernel, only
        the product's own (the loader's layouts; a copy reads and writes the whole matrix)."""
        for shape in ((130, 300, 260), (3, 130, 70, 150)):
            *batch, m, n, k = shape
            a, b = self._rand(ctx, group, "ipA", (*batch, m, k)), self._rand(ctx, group, "ipB", (*batch, k, n))
            for what, x, y in (("A", transposed_copy(a), b), ("B", a, transposed_copy(b)),
                               ("A and B", transposed_copy(a), transposed_copy(b))):
                c, seen = observe(lambda: ctx.module.matmul(x, y, version))
                others = sorted({kernel_function(kernel.name) for kernel in seen.kernels}
                                - {SLEEP_KERNEL, "matmul_kernel4", "matmul_splitk_reduce"})
                label = f"{group}[{'x'.join(map(str, shape))}, {what} a transposed view]"
                if others:
                    raise CheckFailure(f"{label}: {', '.join(others[:3])} ran beside the product: a transposed view "
                                       "must be read in place by kernel 4's tiles, not copied first")
                self._assert_result(c, x, y, group, label)

    def _check_unaligned(self, ctx: Context, version: int, group: str) -> None:
        """Contiguous views that start one element (4 bytes, 2 for bfloat16) into their storage: no
        16-byte vector loads there."""
        m, n, k = 131, 260, 128
        fa = self._rand(ctx, group, "unA", (1 + m * k,))
        fb = self._rand(ctx, group, "unB", (1 + k * n,))
        size = fa.element_size()
        self._expect(ctx, version, fa[1:].view(m, k), fb[:-1].view(k, n),
                     f"{group}[A a view {size} bytes into its storage]", group)
        self._expect(ctx, version, fa[:-1].view(m, k), fb[1:].view(k, n),
                     f"{group}[B a view {size} bytes into its storage]", group)

    def _check_opcheck(self, ctx: Context) -> None:
        try:
            torch.library.opcheck(ctx.module.lib.ops.matmul, (_rand(ctx, "opA", (5, 7)), _rand(ctx, "opB", (7, 3)), 3))
            # a batch (versions 4 and 5): the registered fake must give its 3-D shape
            torch.library.opcheck(ctx.module.lib.ops.matmul, (_rand(ctx, "opbA", (2, 5, 7)), _rand(ctx, "opbB", (2, 7, 3)), 4))
        except Exception as e:
            raise CheckFailure(f"torch.library.opcheck: {str(e).splitlines()[0][:300]}") from None

    def audit_calls(self, device, dtype) -> list[AuditCall]:
        """For the bad-input audit (tests/test_input_audit.py), the judge and the generated properties:
        float32 only, every version (K and N multiples of 4, so the fast kernel's float4 paths run;
        a spoiled shape takes the others)."""
        calls = []
        for group, v, kernel in self.versions_graded:
            d = self._dtype(group)
            calls.append(self._call(audit_randn(5, 8, device=device, dtype=d, seed=1),
                                    audit_randn(8, 12, device=device, dtype=d, seed=2), group, v, kernel))
            if v >= 4:  # versions 4 to 6 take batches: the generated properties (the fake too) on one
                calls.append(self._call(audit_randn(3, 5, 8, device=device, dtype=d, seed=3),
                                        audit_randn(3, 8, 12, device=device, dtype=d, seed=4), group, v, kernel))
        return calls

    def _call(self, a, b, group, version, kernel) -> AuditCall:
        kernel = _kernels(kernel)
        precision = self.precision(group)
        label = f"matmul(version={version})" if precision is None else f"matmul(version={version}, {precision.name})"
        if a.dim() == 3:
            label = f"{label[:-1]}, batch of {a.shape[0]})"
        return AuditCall("matmul", (a, b, version), ("A", "B", "version"), lambda A, B, v: _product(A, B),
                         label=label, group=group, kernels=KernelRule(kernel),
                         registered="lib.ops.matmul", nonfinite=(0, 1),
                         # M = 1 and N = 1, each alone: a tile's bound or a vector path for a thin product
                         domains={0: one_per_axis(a.shape, (None,) * (a.dim() - 2) + ("row of A (M = 1)", None)),
                                  1: one_per_axis(b.shape, (None,) * (b.dim() - 2) + (None, "column of B (N = 1)"))},
                         # strict float32: the course's float32 tolerance (REL_TOL), of the terms' norm where a
                         # small product cancels (a random call's 1 x 1); tensor cores: their precision's bound
                         tolerance=None if precision is None else (lambda A, B, v, p=precision: normwise_tolerance(A, B, p)),
                         sums_products=precision is None,
                         needs_capability=capability_of(version))

    def random_calls(self, g, device, dtype) -> list[AuditCall]:
        """Per version, a product of random sizes: each of M, N and K tiny, odd, off a tile's multiple
        or large (up to a few million multiply-adds, so the slowest version stays quick)."""
        calls = []
        for group, v, kernel in self.versions_graded:
            # within every version's grid (version 1's is the smallest: 524280 rows), and quick for it
            m, n, k = random_shape(g, dims=3, max_numel=1 << 22, max_dim=3000)
            seed = int(torch.randint(0, 2**31, (1,), generator=g))
            d = self._dtype(group)
            calls.append(self._call(audit_randn(m, k, device=device, dtype=d, seed=seed),
                                    audit_randn(k, n, device=device, dtype=d, seed=seed + 1), group, v, kernel))
        return calls

    def kernel_rule(self):
        return KernelRule(tuple(dict.fromkeys(k for _, _, kernel in self.versions_graded for k in _kernels(kernel))))

    def benchmark(self) -> Benchmark:
        n = 4096

        def make_inputs(seed: int):
            g = torch.Generator(device="cuda")
            g.manual_seed(seed)
            return (torch.randn(n, n, generator=g, device="cuda"), torch.randn(n, n, generator=g, device="cuda"))

        def reference(inputs, where):
            a, b = inputs
            if where is None:
                return [a.double() @ b.double()]
            k = where[0].to(a.device)
            i, j = k // n, k % n  # C[i, j] = A[i, :] . B[:, j]
            return [(a[i].double() * b.t()[j].double()).sum(dim=1)]

        return Benchmark(
            label=f"fp32, {n} x {n} x {n}, TF32 off",
            make_inputs=make_inputs,
            call=lambda mod, inp: mod.matmul(inp[0], inp[1], 4),  # the fastest version
            baseline=lambda inp: torch.matmul(inp[0], inp[1]),
            work=2 * n**3,
            unit="FLOP",
            reference=reference,
            tolerance=lambda inp: [REL_TOL],
            kernels=KernelRule(("matmul_kernel4",)),
            min_bytes=4 * 3 * n * n,
        )

    def versions(self):
        """The strict-float32 versions (1-4), timed beside strict-float32 cuBLAS; kernel 5 is timed
        beside cuBLAS in TF32 and in BF16 by grader.bench.benchmark_extras."""
        return {f"kernel{v} {group.replace('_', ' ')}": (lambda mod, inp, v=v: mod.matmul(inp[0], inp[1], v))
                for group, v, _ in self.versions_graded if self.precision(group) is None}


# The planners' and launchers' branches (grader/verify/paths.py), each in the dtypes it can take: versions 1-3
# and 4 are float32 (marked without a dtype), 5 and 6 float32 and bfloat16 (B^T and the matrix-vector
# kernels float32 only)
_F32, _BOTH = ("float32",), ("float32", "bfloat16")
PATHS = {
    "v1": (), "v2": (), "v3.vec_a_vec_b": (), "v3.vec_a": (), "v3.vec_b": (), "v3.scalar": (),
    # version 4: kernel 4's tiles (B in 16-byte copies or not; A, B, both read transposed in place),
    # the small tiles, stream-K, a split tail, split K, batches (and more than one launch's gridDim.z)
    "v4.tiles.vec_b": (), "v4.tiles.scalar_b": (), "v4.tiles.a_mT": (), "v4.tiles.b_mT": (),
    "v4.tiles.a_mT_b_mT": (), "v4.small32": (), "v4.small64": (), "v4.small128": (), "small.vec4": (),
    "small.scalar": (), "v4.streamk": (), "v4.streamk.vec16": (), "v4.streamk.scalar": (), "v4.split_tail": (),
    "v4.splitk": (), "v4.batched": (), "v4.batch_over_grid_z": (),
    # the matrix-vector kernels (versions 4 and 5, float32), and a transposed view read in place
    "gemv_rows.vec16": (), "gemv_rows.scalar": (), "gemv_rows.splitk": (), "gemv_cols.vec16": (),
    "gemv_cols.scalar": (), "gemv_cols.splitk": (), "gemv_cols_narrow.vec16": (), "gemv_cols_narrow.scalar": (),
    "matvec.a_mT": (), "matvec.b_mT": (),
    "splitk_reduce.vec4": _BOTH, "splitk_reduce.scalar": _BOTH,
    # version 5: its tiles (A, B in 16-byte copies or not), B^T rounded first (tall float32), the
    # matrix-vector kernels, split K, batches
    "v5.tiles": _BOTH, "v5.vec_a_vec_b": _BOTH, "v5.vec_a": _BOTH, "v5.vec_b": _BOTH, "v5.scalar": _BOTH,
    "v5.bt": _F32, "v5.bt.vec_a": _F32, "v5.bt.scalar_a": _F32, "v5.matvec": _F32, "v5.splitk": _BOTH,
    "v5.batched": _BOTH, "v5.batch_over_grid_z": _BOTH,
    # version 6: wgmma tiles, K == 0, batches, rows copied into a padded workspace for TMA
    "v6.tiles": _BOTH, "v6.k0": _BOTH, "v6.batched": _BOTH, "v6.padded_copy": _BOTH,
}

SPEC = MatmulSpec(
    exercise="05_matmul",
    title="Matrix product: naive, shared-memory tiles, register blocking, cp.async pipeline, tensor cores (mma.sync, wgmma)",
    module="matmul.py",
    paths=PATHS,
    points={"naive": 2, "shared_tiles": 2, "register_blocked": 3, "async_pipeline": 2,
            "tensor_cores_tf32": 2, "tensor_cores_bf16": 1, "wgmma_tf32": 1, "wgmma_bf16": 1,
            "input_checks": 1, "registration": 1,
            "performance": 3},
    perf_requires=("async_pipeline",),
    requires={"registration": ("register_blocked", "async_pipeline")},  # the versions opcheck runs
    solution_vs_baseline=0.89,  # H100, 2026-11-25 sweep (scripts/sweep_matmul.py): kernel 4 46.2 vs 51.8 TFLOP/s
)
