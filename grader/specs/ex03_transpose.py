"""Grading for exercise 03, out-of-place transpose of a 2-D tensor through a shared-memory tile.

A transpose moves values without arithmetic, so results must be bit-exact.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from grader.verify.checks import (CheckFailure, Comparison, Tolerance, assert_close, assert_own_kernels, expect_error,
                                  poison_next_allocation, require_free_memory, require_plain_tensor, unmodified)
from grader.verify.observe import KernelRule
from grader.verify.spec import (AuditCall, Benchmark, Check, CheckList, Context, Spec, audit_randn, one_per_axis,
                                random_shape)

EXACT = Tolerance(0.0, 0.0)
DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64)
# Shapes that break naive tiling: single rows and columns, primes, one off the 32-wide tile,
# wide and tall; the last float32 ones are large enough for a race between warps to show.
SHAPES = ((1, 1), (1, 7), (7, 1), (1, 1000), (1000, 1), (2, 3), (31, 33), (32, 32), (33, 31), (97, 101),
          (257, 129), (1000, 1003), (3, 70001))
LARGE_SHAPES = ((4099, 3001), (2048, 4096))
# More row tiles than gridDim.y may have (65535 x 64 rows): the kernel must loop over them.
TALL = (4_200_001, 3)
# The smallest matrix whose first block moves two full row tiles (65536 of them: gridDim.y is 65535),
# reusing its shared tile: a race between the first tile's reads and the second's writes (a missing
# barrier at the end of the loop) shows under compute-sanitizer racecheck (RACECHECK=1).
TWO_TILES = (65536 * 64, 2)
# More than 2^31 elements (float16, 4 GiB in and 4 out; the launcher's `past_2^31`): both offsets,
# r * cols + c read and c * rows + r written, pass 2^31 in the last rows and columns, and neither side
# is a multiple of the 64-wide tile
HUGE = (32771, 65537)


def _short(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


def _names(arg: str) -> tuple[str, ...]:
    """Ways an error message can name the argument `arg`."""
    return (f"{arg} must", f"{arg} is", f"{arg} has", f"`{arg}`", f"'{arg}'", f"{arg}:", f"{arg} (")


def _rand(ctx: Context, name: str, shape, dtype=torch.float32) -> torch.Tensor:
    g = ctx.generator(name)
    return torch.randn(shape, generator=g, device="cuda", dtype=torch.float32).to(dtype)


@dataclass
class TransposeSpec(Spec):
    kernels: tuple[str, ...] = ("transpose_kernel",)
    property_dtypes: tuple = ("float32", "float16", "bfloat16", "float64")

    def _expect(self, ctx: Context, x: torch.Tensor, what: str) -> None:
        with unmodified(x=x):
            poison_next_allocation(x.numel(), x.dtype)
            y = ctx.module.transpose(x)
            torch.cuda.synchronize()
        if not isinstance(y, torch.Tensor):
            raise CheckFailure(f"{what}: expected a tensor, got {type(y).__name__}")
        if y.dtype != x.dtype:
            raise CheckFailure(f"{what}: output dtype {y.dtype}, expected {x.dtype}")
        assert_close(y, x.t(), EXACT, what)

    def checks(self) -> list[Check]:
        checks = CheckList()
        for dtype in DTYPES:
            shapes = SHAPES + LARGE_SHAPES if dtype == torch.float32 else SHAPES[::2] + LARGE_SHAPES[:1]
            for shape in shapes:
                name = f"forward[{_short(dtype)}-{shape[0]}x{shape[1]}]"
                checks.add(name, lambda ctx, n=name, s=shape, d=dtype: self._expect(ctx, _rand(ctx, n, s, d), n))
        checks.add("forward[tall: more than 65535 row tiles]", lambda ctx: self._expect(
            ctx, _rand(ctx, "tall", TALL), f"forward[tall {TALL[0]}x{TALL[1]}: more than 65535 row tiles]"))
        checks.add("forward[racecheck: a block moving two row tiles]", lambda ctx: self._expect(
            ctx, _rand(ctx, "two tiles", TWO_TILES), f"forward[{TWO_TILES[0]}x{TWO_TILES[1]}: a block moving two row tiles]"))
        checks.add("forward[huge: more than 2^31 elements]", self._check_huge, slow=True, huge=True)
        checks.add("forward[non-contiguous]", self._check_noncontiguous)
        checks.add("forward[unaligned view]", lambda ctx: self._expect(
            ctx, _rand(ctx, "unaligned", (1 + 45 * 77,), torch.float16)[1:].view(45, 77), "forward[unaligned view]"))
        checks.add("forward[empty]", self._check_empty)
        checks.add("forward[output poisoned]", self._check_poisoned)
        checks.add("forward[own kernel ran]", self._check_own, slow=True)
        fn = lambda ctx: ctx.module.transpose  # noqa: E731
        checks.add("input_checks[cpu tensor]", lambda ctx: expect_error(
            fn(ctx), torch.randn(4, 5), names=_names("x"), what="a CPU tensor"), needs_gpu=False)
        checks.add("input_checks[integer dtype]", lambda ctx: expect_error(
            fn(ctx), torch.ones(4, 5, dtype=torch.int32, device="cuda"), names=_names("x"), what="an int32 tensor"))
        checks.add("input_checks[1-D]", lambda ctx: expect_error(
            fn(ctx), torch.ones(5, device="cuda"), names=_names("x"), what="a 1-D tensor"))
        checks.add("input_checks[3-D]", lambda ctx: expect_error(
            fn(ctx), torch.ones(2, 3, 4, device="cuda"), names=_names("x"), what="a 3-D tensor"))
        checks.add("autograd[gradcheck float64]", self._check_gradcheck)
        checks.add("autograd[opcheck]", self._check_opcheck)
        return checks

    def _check_own(self, ctx: Context) -> None:
        x = _rand(ctx, "own", (1000, 1003))  # made outside the profiled call
        assert_own_kernels(lambda: ctx.module.transpose(x), self.kernels, "forward")

    def _check_huge(self, ctx: Context) -> None:
        """A HUGE float16 matrix (2^31 + 229,379 elements, where a 32-bit offset wraps), compared exactly
        block of output rows by block, the last (whose offsets are past 2^31) first. 8.75 GiB of free
        memory: a card without it skips the check (not run here, it costs nothing)."""
        rows, cols = HUGE
        require_free_memory(2 * 2 * rows * cols + (3 << 28), "the check of more than 2^31 elements")
        x = torch.empty(HUGE, dtype=torch.float16, device="cuda").normal_(generator=ctx.generator("huge"))
        y = ctx.module.transpose(x)
        torch.cuda.synchronize()
        what = f"forward[huge: {rows}x{cols} float16, more than 2^31 elements]"
        require_plain_tensor(y, what)
        if tuple(y.shape) != (cols, rows) or y.dtype != x.dtype:
            raise CheckFailure(f"{what}: {tuple(y.shape)} {y.dtype}, expected {(cols, rows)} {x.dtype}")
        step = (1 << 24) // rows  # output rows a block: 2^24 elements
        cmp = Comparison(EXACT, what)
        for i in [cols - step] + list(range(0, cols - step, step)):
            cmp.add(y[i:i + step], x[:, i:i + step].t(), offset=i * rows)
            if cmp.bad:
                break
        problem = cmp.problem()
        if problem:
            raise CheckFailure(problem)

    def _check_noncontiguous(self, ctx: Context) -> None:
        base = _rand(ctx, "noncontig", (301, 517))
        self._expect(ctx, base.t(), "forward[x = base.t(), a transposed view]")
        self._expect(ctx, base[:, ::3], "forward[x = base[:, ::3], a strided view]")
        self._expect(ctx, base[5:200, 7:400], "forward[x = base[5:200, 7:400], a sliced view]")

    def _check_empty(self, ctx: Context) -> None:
        for shape in ((0, 5), (5, 0), (0, 0)):
            y = ctx.module.transpose(torch.empty(shape, device="cuda"))
            torch.cuda.synchronize()
            if tuple(y.shape) != (shape[1], shape[0]):
                raise CheckFailure(f"forward[empty {shape}]: shape {tuple(y.shape)}, expected {(shape[1], shape[0])}")

    def _check_poisoned(self, ctx: Context) -> None:
        """Twice on different inputs, the output's memory poisoned in between: an element left
        unwritten shows up as NaN or as the first run's value."""
        first = ctx.module.transpose(_rand(ctx, "poison1", (1025, 1999)))
        del first
        self._expect(ctx, _rand(ctx, "poison2", (1025, 1999)), "forward[output poisoned]")

    def _check_gradcheck(self, ctx: Context) -> None:
        x = _rand(ctx, "gradcheck", (7, 5), torch.float64).requires_grad_()
        try:
            ok = torch.autograd.gradcheck(ctx.module.transpose, (x,), eps=1e-6, atol=1e-5)
        except Exception as e:
            raise CheckFailure(f"gradcheck: {str(e).splitlines()[0]}") from None
        if not ok:
            raise CheckFailure("gradcheck failed")

    def _check_opcheck(self, ctx: Context) -> None:
        x = _rand(ctx, "opcheck", (5, 33)).requires_grad_()
        try:
            torch.library.opcheck(ctx.module.lib.ops.transpose, (x,))
        except Exception as e:
            raise CheckFailure(f"torch.library.opcheck: {str(e).splitlines()[0][:300]}") from None

    def audit_calls(self, device, dtype) -> list[AuditCall]:
        """For the bad-input audit (tests/test_input_audit.py), the judge and the generated properties."""
        # and a row vector, whose transpose has the same memory order: the result must still be a new tensor
        return [self._call(audit_randn(5, 7, device=device, dtype=dtype)),
                self._call(audit_randn(1, 9, device=device, dtype=dtype, seed=2), "transpose(row vector)")]

    def _call(self, x, label: str = "") -> AuditCall:
        # x cut to one row, then to one column: a tile bound, or a path for thin matrices, shows there
        return AuditCall("transpose", (x,), ("x",), lambda x: x.t(), grad_args=(0,), registered="lib.ops.transpose",
                         nonfinite=(0,), exact=True, domains={0: one_per_axis(x.shape, ("row", "column"))},
                         **({"label": label} if label else {}))

    def random_calls(self, g, device, dtype) -> list[AuditCall]:
        seed = int(torch.randint(0, 2**31, (1,), generator=g))
        return [self._call(audit_randn(*random_shape(g, dims=2), device=device, dtype=dtype, seed=seed))]

    def kernel_rule(self):
        return KernelRule(self.kernels)

    def benchmark(self) -> Benchmark:
        n = m = 16384

        def make_inputs(seed: int):
            g = torch.Generator(device="cuda")
            g.manual_seed(seed)
            return (torch.randn(n, m, generator=g, device="cuda"),)

        def reference(inputs, where):
            x = inputs[0]
            if where is None:
                return [x.t().double()]
            k = where[0]
            k = torch.arange(k.start, k.stop, device=x.device) if isinstance(k, slice) else k.to(x.device)
            i, j = k // n, k % n  # out[i, j] = x[j, i]
            return [x.reshape(-1)[j * m + i].double()]

        return Benchmark(
            label=f"fp32, {n} x {m}",
            make_inputs=make_inputs,
            call=lambda mod, inp: mod.transpose(inp[0]),
            baseline=lambda inp: inp[0].t().contiguous(),
            work=2 * 4 * n * m,  # read every element once, write it once
            reference=reference,
            tolerance=lambda inp: [EXACT],
            shapes=lambda inp: [(m, n)],
        )


# The launcher's branches (grader/verify/paths.py): more row tiles than gridDim.y holds (the kernel's grid
# stride over them), and a matrix past 2^31 elements
PATHS = {"grid_stride_rows": ("float32",), "past_2^31": ("float16",)}

SPEC = TransposeSpec(
    exercise="03_transpose",
    title="Transpose through a shared-memory tile",
    module="transpose.py",
    paths=PATHS,
    points={"forward": 5, "input_checks": 1, "autograd": 1, "performance": 3},
    perf_requires=("forward",),
    # gradcheck goes through the Python wrapper: x.t().contiguous() there would pass it
    requires={"autograd": ("forward[own kernel ran]", "forward")},  # gradcheck of a broken kernel: chance
    solution_vs_baseline=2.97,  # H100, 2026-11-23 grading run: 2923 vs 984 GB/s
)
