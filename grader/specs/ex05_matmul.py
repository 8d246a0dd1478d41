"""Grading for exercise 05, C = A @ B in float32: each numbered kernel (naive, shared-memory
tiles, register blocking, cp.async pipeline) is graded on its own, the fastest (kernel 4) is timed
against cuBLAS (TF32 off)."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from grader.checks import (CheckFailure, assert_own_kernels, assert_rel_error, expect_error, on_a_busy_stream, poison_next_allocation,
                           unmodified)
from grader.observe import KernelRule
from grader.spec import AuditCall, Benchmark, Check, CheckList, Context, Spec, audit_randn, random_shape

# Normwise relative error against a float64 reference. Strict fp32 products of these sizes are
# near 1e-7; TF32 (10-bit mantissa) gives about 3e-4 and fp16 about 5e-4: both fail.
REL_TOL = 1e-5

# (M, N, K): ones, row and column vectors, primes, one off the 32- and 128-wide tiles, K not a
# multiple of the 8- or 32-deep steps, K = 1; N % 4 and K % 4 chosen so that each of the fast
# kernel's float4 paths (A, B, both, neither) runs.
SHAPES = (
    (1, 1, 1), (1, 1, 300), (1, 1000, 1), (1, 513, 257), (1000, 1, 257), (2, 3, 4), (31, 33, 17), (32, 32, 32),
    (33, 31, 65), (97, 101, 103), (127, 129, 131), (128, 128, 128), (129, 257, 1000), (200, 1032, 257),
    (256, 384, 64), (513, 1031, 257), (1000, 1000, 1), (2000, 3, 2000), (1031, 1000, 4099),
)


def _names(arg: str) -> tuple[str, ...]:
    """Ways an error message can name the argument `arg`."""
    return (f"{arg} must", f"{arg} is", f"{arg} has", f"`{arg}`", f"'{arg}'", f"{arg}:", f"{arg} (", f"{arg}'s")


def _rand(ctx: Context, name: str, shape) -> torch.Tensor:
    return torch.randn(shape, generator=ctx.generator(name), device="cuda")


@dataclass
class MatmulSpec(Spec):
    # (group, version, kernel name)
    versions_graded: tuple[tuple[str, int, str], ...] = (
        ("naive", 1, "matmul_kernel1"), ("shared_tiles", 2, "matmul_kernel2"), ("register_blocked", 3, "matmul_kernel3"),
        ("async_pipeline", 4, "matmul_kernel4"))

    def _expect(self, ctx: Context, version: int, a: torch.Tensor, b: torch.Tensor, what: str) -> None:
        with unmodified(A=a, B=b):
            poison_next_allocation(a.shape[0] * b.shape[1])
            c = ctx.module.matmul(a, b, version)
            torch.cuda.synchronize()
        if not isinstance(c, torch.Tensor):
            raise CheckFailure(f"{what}: expected a tensor, got {type(c).__name__}")
        if c.dtype != torch.float32:
            raise CheckFailure(f"{what}: output dtype {c.dtype}, expected torch.float32")
        assert_rel_error(c, a.double() @ b.double(), REL_TOL, what)

    def _shape(self, ctx: Context, version: int, group: str, m: int, n: int, k: int) -> None:
        name = f"{group}[{m}x{n}x{k}]"
        self._expect(ctx, version, _rand(ctx, name + "A", (m, k)), _rand(ctx, name + "B", (k, n)),
                     f"{group}[M={m}, N={n}, K={k}]")

    def checks(self) -> list[Check]:
        checks = CheckList()
        for group, version, kernel in self.versions_graded:
            for m, n, k in SHAPES:
                checks.add(f"{group}[{m}x{n}x{k}]",
                           lambda ctx, v=version, g=group, s=(m, n, k): self._shape(ctx, v, g, *s))
            checks.add(f"{group}[K = 0 gives zeros]", lambda ctx, v=version, g=group: self._expect(
                ctx, v, torch.empty(37, 0, device="cuda"), torch.empty(0, 45, device="cuda"), f"{g}[K = 0]"))
            checks.add(f"{group}[empty]", lambda ctx, v=version, g=group: self._check_empty(ctx, v, g))
            checks.add(f"{group}[non-contiguous]", lambda ctx, v=version, g=group: self._check_noncontiguous(ctx, v, g))
            checks.add(f"{group}[unaligned views]", lambda ctx, v=version, g=group: self._check_unaligned(ctx, v, g))
            checks.add(f"{group}[output poisoned]", lambda ctx, v=version, g=group: self._check_poisoned(ctx, v, g))
            checks.add(f"{group}[current stream]", lambda ctx, v=version, g=group: self._check_stream(ctx, v, g))
            checks.add(f"{group}[own kernel ran]",
                       lambda ctx, v=version, g=group, kn=kernel: self._check_own(ctx, v, g, kn), slow=True)
        self._input_checks(checks)
        checks.add("registration[opcheck]", self._check_opcheck)
        return checks

    def _check_stream(self, ctx: Context, version: int, group: str) -> None:
        a, b = _rand(ctx, f"{group}streamA", (333, 257)), _rand(ctx, f"{group}streamB", (257, 190))
        c = on_a_busy_stream(lambda x, y: ctx.module.matmul(x, y, version), a, b)
        assert_rel_error(c, a.double() @ b.double(), REL_TOL,
                         f"{group} inside `with torch.cuda.stream(s)` (launch on the current stream)")

    def _check_own(self, ctx: Context, version: int, group: str, kernel: str) -> None:
        a, b = _rand(ctx, "ownA", (300, 200)), _rand(ctx, "ownB", (200, 260))  # made outside the profiled call
        assert_own_kernels(lambda: ctx.module.matmul(a, b, version), (kernel,), group)

    def _input_checks(self, checks: CheckList) -> None:
        fn = lambda ctx: ctx.module.matmul  # noqa: E731
        m = lambda *s: torch.ones(*s, device="cuda")  # noqa: E731
        bad = [
            ("cpu A", lambda: (torch.ones(4, 5), torch.ones(5, 3)), ("A",), "a CPU A"),
            ("cpu B", lambda: (m(4, 5), torch.ones(5, 3)), ("B",), "a CPU B"),
            ("float64 A", lambda: (m(4, 5).double(), m(5, 3)), ("A",), "a float64 A"),
            ("float16 B", lambda: (m(4, 5), m(5, 3).half()), ("B",), "a float16 B"),
            ("1-D A", lambda: (m(5), m(5, 3)), ("A",), "a 1-D A"),
            ("3-D B", lambda: (m(4, 5), m(2, 5, 3)), ("B",), "a 3-D B"),
            ("inner sizes differ", lambda: (m(4, 5), m(6, 3)), ("A", "B"), "A (4, 5) with B (6, 3)"),
        ]
        for label, args, args_named, what in bad:
            names = tuple(n for a in args_named for n in _names(a))
            checks.add(f"input_checks[{label}]",
                       lambda ctx, a=args, names=names, what=what: expect_error(fn(ctx), *a(), names=names, what=what),
                       needs_gpu=label != "cpu A")
        for version in (0, 5):
            checks.add(f"input_checks[version={version}]",
                       lambda ctx, v=version: expect_error(fn(ctx), m(4, 5), m(5, 3), v, names=_names("version"),
                                                           what=f"version={v}"))
        # one row more than gridDim.y's 65535 row tiles cover: an error naming A (K = 1 keeps it small)
        for version, rows in ((1, 8), (2, 32), (3, 128), (4, 128)):
            checks.add(f"input_checks[M too large for the grid, version={version}]",
                       lambda ctx, v=version, r=65535 * rows + 1: expect_error(
                           fn(ctx), m(r, 1), m(1, 3), v, names=_names("A"), what=f"A with M = {r}, version={v}"))

    def _check_empty(self, ctx: Context, version: int, group: str) -> None:
        for (mm, k), (k2, n) in (((0, 5), (5, 3)), ((4, 5), (5, 0)), ((0, 0), (0, 0))):
            c = ctx.module.matmul(torch.empty(mm, k, device="cuda"), torch.empty(k2, n, device="cuda"), version)
            torch.cuda.synchronize()
            if tuple(c.shape) != (mm, n):
                raise CheckFailure(f"{group}[empty A ({mm}, {k}) @ B ({k2}, {n})]: shape {tuple(c.shape)}, expected {(mm, n)}")

    def _check_noncontiguous(self, ctx: Context, version: int, group: str) -> None:
        a = _rand(ctx, "ncA", (260, 130))
        b = _rand(ctx, "ncB", (260, 300))
        self._expect(ctx, version, a.t(), b, f"{group}[A = base.t(), a transposed view]")
        self._expect(ctx, version, a[::2, :100], b[:100, 1::2], f"{group}[A and B strided views]")

    def _check_unaligned(self, ctx: Context, version: int, group: str) -> None:
        """Contiguous views that start 4 bytes into their storage: no 16-byte vector loads there."""
        m, n, k = 131, 260, 128
        fa = _rand(ctx, "unA", (1 + m * k,))
        fb = _rand(ctx, "unB", (1 + k * n,))
        self._expect(ctx, version, fa[1:].view(m, k), fb[:-1].view(k, n), f"{group}[A a view 4 bytes into its storage]")
        self._expect(ctx, version, fa[:-1].view(m, k), fb[1:].view(k, n), f"{group}[B a view 4 bytes into its storage]")

    def _check_poisoned(self, ctx: Context, version: int, group: str) -> None:
        """Twice on different inputs, the output's memory poisoned in between: an element left
        unwritten shows up as NaN or as the first run's value."""
        first = ctx.module.matmul(_rand(ctx, "p1A", (777, 300)), _rand(ctx, "p1B", (300, 901)), version)
        del first
        self._expect(ctx, version, _rand(ctx, "p2A", (777, 300)), _rand(ctx, "p2B", (300, 901)), f"{group}[output poisoned]")

    def _check_opcheck(self, ctx: Context) -> None:
        try:
            torch.library.opcheck(ctx.module.lib.ops.matmul, (_rand(ctx, "opA", (5, 7)), _rand(ctx, "opB", (7, 3)), 3))
        except Exception as e:
            raise CheckFailure(f"torch.library.opcheck: {str(e).splitlines()[0][:300]}") from None

    def audit_calls(self, device, dtype) -> list[AuditCall]:
        """For the bad-input audit (tests/test_input_audit.py), the judge and the generated properties:
        float32 only, every version (K and N multiples of 4, so the fast kernel's float4 paths run;
        a spoiled shape takes the others)."""
        a = audit_randn(5, 8, device=device, dtype=torch.float32, seed=1)
        b = audit_randn(8, 12, device=device, dtype=torch.float32, seed=2)
        return [self._call(a, b, group, v, kernel) for group, v, kernel in self.versions_graded]

    @staticmethod
    def _call(a, b, group, version, kernel) -> AuditCall:
        return AuditCall("matmul", (a, b, version), ("A", "B", "version"), lambda A, B, v: A.double() @ B.double(),
                         label=f"matmul(version={version})", group=group, kernels=KernelRule((kernel,)),
                         registered="lib.ops.matmul", nonfinite=(0, 1))

    def random_calls(self, g, device, dtype) -> list[AuditCall]:
        """Per version, a product of random sizes: each of M, N and K tiny, odd, off a tile's multiple
        or large (up to a few million multiply-adds, so the slowest version stays quick)."""
        calls = []
        for group, v, kernel in self.versions_graded:
            # within every version's grid (version 1's is the smallest: 524280 rows), and quick for it
            m, n, k = random_shape(g, dims=3, max_numel=1 << 22, max_dim=3000)
            seed = int(torch.randint(0, 2**31, (1,), generator=g))
            calls.append(self._call(audit_randn(m, k, device=device, dtype=torch.float32, seed=seed),
                                    audit_randn(k, n, device=device, dtype=torch.float32, seed=seed + 1), group, v, kernel))
        return calls

    def kernel_rule(self):
        return KernelRule(tuple(kernel for _, _, kernel in self.versions_graded))

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
        return {f"kernel{v} {group.replace('_', ' ')}": (lambda mod, inp, v=v: mod.matmul(inp[0], inp[1], v))
                for group, v, _ in self.versions_graded}


SPEC = MatmulSpec(
    exercise="05_matmul",
    title="Matrix product: naive, shared-memory tiles, register blocking, cp.async pipeline",
    module="matmul.py",
    points={"naive": 2, "shared_tiles": 2, "register_blocked": 3, "async_pipeline": 2,
            "input_checks": 1, "registration": 1,
            "performance": 3},
    perf_requires=("async_pipeline",),
    solution_vs_baseline=0.89,  # H100, 2026-11-25 sweep (scripts/sweep_matmul.py): kernel 4 46.2 vs 51.8 TFLOP/s
)
