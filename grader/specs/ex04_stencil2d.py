"""Grading for exercise 04, a K x K filter over (H, W) or (B, H, W) images ("same" size, zero
padding), with the filter in constant memory and a shared-memory tile with a halo."""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from grader.verify.checks import (CheckFailure, Tolerance, assert_close, assert_own_kernels, ends_and_between, expect_error,
                                  poison_next_allocation, require_free_memory, require_plain_tensor, unmodified)
from grader.verify.observe import KernelRule
from grader.verify.spec import (NEGATIVE, SIGNS, ZERO, AuditCall, Benchmark, Check, CheckList, Context, Spec, audit_randn,
                                random_shape)

# (name, x shape, K): images smaller than the filter, single rows and columns, primes, one off the
# 32-wide tile, non-square (a swapped axis shows), batches; the last ones are large enough for a
# race between warps to show. (70000, 3, 3): more image tiles than gridDim.y may have.
CASES = (
    ("1x1 K=3", (1, 1), 3), ("1x1 K=7", (1, 1), 7), ("2x2 K=7", (2, 2), 7), ("1x17 K=3", (1, 17), 3),
    ("17x1 K=5", (17, 1), 5), ("31x33 K=3", (31, 33), 3), ("32x32 K=3", (32, 32), 3), ("33x31 K=5", (33, 31), 5),
    ("97x101 K=7", (97, 101), 7), ("127x257 K=1", (127, 257), 1), ("64x200 K=3", (64, 200), 3),
    ("1000x1003 K=5", (1000, 1003), 5), ("4099x3001 K=3", (4099, 3001), 3), ("2053x1031 K=7", (2053, 1031), 7),
    ("batch 3x45x67 K=3", (3, 45, 67), 3), ("batch 5x33x31 K=7", (5, 33, 31), 7), ("batch 1x64x64 K=5", (1, 64, 64), 5),
    ("batch 2x1x1 K=3", (2, 1, 1), 3), ("batch 2000x5x7 K=3", (2000, 5, 7), 3),
    ("batch 70000x3x3 K=3 (more tiles than gridDim.y)", (70000, 3, 3), 3),
    ("batch 4x515x300 K=5", (4, 515, 300), 5),
)


def _names(arg: str) -> tuple[str, ...]:
    """Ways an error message can name the argument `arg`."""
    return (f"{arg} must", f"{arg} is", f"{arg} has", f"`{arg}`", f"'{arg}'", f"{arg}:", f"{arg} (")


def _rand(ctx: Context, name: str, shape, dtype=torch.float32, scale=1.0) -> torch.Tensor:
    g = ctx.generator(name)
    return torch.randn(shape, generator=g, device="cuda", dtype=torch.float32).to(dtype) * scale


def reference(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """float64 cross-correlation with zero padding, through F.conv2d with one channel."""
    k = w.shape[-1]
    x4 = x.to(torch.float64).reshape(-1, 1, x.shape[-2], x.shape[-1])
    return F.conv2d(x4, w.to(torch.float64)[None, None], padding=k // 2).reshape(x.shape)


def tolerance(x: torch.Tensor, w: torch.Tensor) -> Tolerance:
    """fp32 products and sums of at most 49 terms: a few ulps of sum |w| * max |x| at worst. Far
    below fp16/TF32 rounding (~5e-4 relative per term), so a half-precision computation fails."""
    scale = float(w.abs().sum()) * (float(x.abs().max()) if x.numel() else 1.0)
    return Tolerance(1e-5, 2e-6 * scale)


@dataclass
class StencilSpec(Spec):
    # the kernel, and the copy of the filter into __constant__ memory (cudaMemcpyToSymbolAsync)
    kernels: tuple[str, ...] = ("stencil2d_kernel", "Memcpy DtoD")

    def _expect(self, ctx: Context, x: torch.Tensor, w: torch.Tensor, what: str) -> None:
        with unmodified(x=x, weight=w):
            poison_next_allocation(x.numel())
            y = ctx.module.stencil2d(x, w)
            torch.cuda.synchronize()
        if not isinstance(y, torch.Tensor):
            raise CheckFailure(f"{what}: expected a tensor, got {type(y).__name__}")
        if y.dtype != torch.float32:
            raise CheckFailure(f"{what}: output dtype {y.dtype}, expected torch.float32")
        assert_close(y, reference(x, w), tolerance(x, w), what)

    def _case(self, ctx: Context, name: str, shape, k: int) -> None:
        self._expect(ctx, _rand(ctx, name, shape), _rand(ctx, name + "w", (k, k), scale=0.5), f"forward[{name}]")

    def checks(self) -> list[Check]:
        checks = CheckList()
        # first: a fallback to PyTorch's op is named as such, not as the precision it happens to miss
        # (in the full grade: the quick loop skips it, as the profiler's start-up costs seconds)
        checks.add("forward[own kernel ran]", self._check_own, slow=True)
        for name, shape, k in CASES:
            checks.add(f"forward[{name}]", lambda ctx, n=name, s=shape, k=k: self._case(ctx, n, s, k))
        checks.add("forward[filter changes between calls]", self._check_filter_changes)
        checks.add("forward[non-contiguous]", self._check_noncontiguous)
        checks.add("forward[huge: a batch of more than 2^31 pixels]", self._check_huge_batch, slow=True, huge=True)
        checks.add("forward[huge: one row of 2^31 + 1 pixels]", self._check_huge_side, slow=True, huge=True)
        checks.add("forward[empty]", self._check_empty)
        fn = lambda ctx: ctx.module.stencil2d  # noqa: E731
        x = lambda: torch.ones(8, 9, device="cuda")  # noqa: E731
        w = lambda k=3: torch.ones(k, k, device="cuda")  # noqa: E731
        bad = [
            ("cpu x", lambda: (torch.ones(8, 9), torch.ones(3, 3)), "x", "a CPU x"),
            ("float64 x", lambda: (x().double(), w()), "x", "a float64 x"),
            ("float64 weight", lambda: (x(), w().double()), "weight", "a float64 weight"),
            ("1-D x", lambda: (torch.ones(9, device="cuda"), w()), "x", "a 1-D x"),
            ("4-D x", lambda: (torch.ones(1, 1, 8, 9, device="cuda"), w()), "x", "a 4-D x"),
            ("1-D weight", lambda: (x(), torch.ones(9, device="cuda")), "weight", "a 1-D weight"),
            ("non-square weight", lambda: (x(), torch.ones(3, 5, device="cuda")), "weight", "a 3 x 5 weight"),
            ("even K", lambda: (x(), w(4)), "weight", "a 4 x 4 weight (K even)"),
            ("K > 7", lambda: (x(), w(9)), "weight", "a 9 x 9 weight (K > 7)"),
        ]
        for label, args, arg, what in bad:
            checks.add(f"input_checks[{label}]",
                       lambda ctx, a=args, arg=arg, what=what: expect_error(fn(ctx), *a(), names=_names(arg), what=what),
                       needs_gpu=label != "cpu x")
        checks.add("registration[opcheck]", self._check_opcheck)
        return checks

    def _check_own(self, ctx: Context) -> None:
        x, w = _rand(ctx, "own", (2, 300, 301)), _rand(ctx, "ownw", (3, 3))  # made outside the profiled call
        assert_own_kernels(lambda: ctx.module.stencil2d(x, w), self.kernels, "forward")

    def _check_filter_changes(self, ctx: Context) -> None:
        """The filter is copied on every call: a cached one gives the previous call's result."""
        x = _rand(ctx, "changes", (100, 130))
        for i, k in enumerate((3, 3, 5, 3)):
            self._expect(ctx, x, _rand(ctx, f"changes-w{i}", (k, k)), f"forward[call {i + 1} with a new {k}x{k} filter]")

    def _check_noncontiguous(self, ctx: Context) -> None:
        base = _rand(ctx, "noncontig", (3, 301, 517))
        w = _rand(ctx, "noncontig-w", (5, 5))
        self._expect(ctx, base[1].t(), w, "forward[x = base.t(), a transposed view]")
        self._expect(ctx, base[:, ::2, 1::3], w, "forward[x = base[:, ::2, 1::3], a strided view]")
        self._expect(ctx, base[0], w.t(), "forward[weight = w.t(), a transposed view]")

    def _check_huge_batch(self, ctx: Context) -> None:
        """2^19 + 3 images of 64 x 64 (2^31 + 12288 pixels, 16 GiB in and out): image b starts at
        b * H * W, past 2^31 for the last three, where a 32-bit image offset wraps. Checked on the last
        64 images, the first 8 and 56 drawn between them."""
        batch, side = (1 << 19) + 3, 64
        numel = batch * side * side
        require_free_memory(2 * 4 * numel + (1 << 30), "the check of a batch of more than 2^31 pixels")
        x = torch.empty((batch, side, side), device="cuda")
        x.normal_(generator=ctx.generator("huge"))
        w = _rand(ctx, "huge-w", (3, 3), scale=0.5)
        y = ctx.module.stencil2d(x, w)
        torch.cuda.synchronize()
        what = f"forward[huge: {batch} images of {side} x {side}, more than 2^31 pixels]"
        require_plain_tensor(y, what)
        if tuple(y.shape) != tuple(x.shape):
            raise CheckFailure(f"{what}: shape {tuple(y.shape)}, expected {tuple(x.shape)}")
        picks = ends_and_between(batch, 64, 8, 56, ctx.seed_for("huge"))
        xs = x[picks]
        assert_close(y[picks], reference(xs, w), tolerance(xs, w), f"{what}, on the images {batch - 64} to {batch - 1}, 0 to 7 and 56 between (index 0 here is image {batch - 64})")

    def _check_huge_side(self, ctx: Context) -> None:
        """One image of 1 x (2^31 + 1) pixels (8 GiB in and 8 out): a side past 2^31 - 1 that a kernel keeps
        in a 32-bit int wraps negative. Refused with an error naming x (a limit the kernel states, as the
        reference's sides below 2^30), or right on its first and last 63 columns (each compared with the
        filter over a crop of 64, whose inner edge only the 64th output reads past)."""
        side = (1 << 31) + 1
        require_free_memory(2 * 4 * side + (1 << 30), "the check of a row of 2^31 + 1 pixels")
        x = torch.empty((1, side), device="cuda")
        x.normal_(generator=ctx.generator("huge-side"))
        w = _rand(ctx, "huge-side-w", (3, 3), scale=0.5)
        what = f"forward[huge: one row of {side} pixels]"
        try:
            y = ctx.module.stencil2d(x, w)
            torch.cuda.synchronize()
        except RuntimeError as e:
            message = str(e)
            if any(name in message for name in _names("x")):
                return  # refused, naming x
            raise CheckFailure(f"{what}: {message.splitlines()[0][:300]} (refuse it with an error naming x, or "
                               "compute it)") from None
        require_plain_tensor(y, what)
        if tuple(y.shape) != tuple(x.shape):
            raise CheckFailure(f"{what}: shape {tuple(y.shape)}, expected {tuple(x.shape)}")
        for first, inner in ((0, slice(0, 63)), (side - 64, slice(1, 64))):
            crop = x[:, first:first + 64]
            got, want = y[:, first:first + 64][:, inner], reference(crop, w)[:, inner]
            assert_close(got, want, tolerance(crop, w), f"{what}, columns {first + inner.start} to {first + inner.stop - 1}")

    def _check_empty(self, ctx: Context) -> None:
        w = _rand(ctx, "empty-w", (3, 3))
        for shape in ((0, 5), (5, 0), (0, 4, 4), (3, 0, 4)):
            y = ctx.module.stencil2d(torch.empty(shape, device="cuda"), w)
            torch.cuda.synchronize()
            if tuple(y.shape) != shape:
                raise CheckFailure(f"forward[empty {shape}]: shape {tuple(y.shape)}, expected {shape}")

    def _check_opcheck(self, ctx: Context) -> None:
        try:
            torch.library.opcheck(ctx.module.lib.ops.stencil2d, (_rand(ctx, "opcheck", (2, 17, 19)),
                                                                 _rand(ctx, "opcheck-w", (3, 3))))
        except Exception as e:
            raise CheckFailure(f"torch.library.opcheck: {str(e).splitlines()[0][:300]}") from None

    def audit_calls(self, device, dtype) -> list[AuditCall]:
        """For the bad-input audit (tests/test_input_audit.py), the judge and the generated properties:
        float32 only, a batch and one image."""
        w = audit_randn(3, 3, device=device, dtype=torch.float32, seed=2, scale=0.5)
        return [self._call(audit_randn(2, 6, 7, device=device, dtype=torch.float32, seed=1), w, "stencil2d(batch)"),
                self._call(audit_randn(6, 7, device=device, dtype=torch.float32, seed=3), w, "stencil2d(image)")]

    @staticmethod
    def _call(x, w, label) -> AuditCall:
        def ref(x, w):
            if w.dim() != 2 or w.shape[0] != w.shape[1] or w.shape[0] % 2 == 0:
                raise ValueError(f"weight must be K x K with K odd, but has shape {list(w.shape)}")
            if x.numel() == 0:  # "same" size: an empty image gives an empty output
                return torch.zeros(x.shape, dtype=torch.float64, device=x.device)
            return reference(x, w)

        # NaN in x spreads to its neighbours; in the filter it would meet the zero padding, where
        # whether 0 * NaN is computed is the kernel's choice
        # the filter's values at their edges: all negative, all zero, of both signs (a kernel that takes |w|,
        # or skips or clamps some taps, is right only for the random filters)
        return AuditCall("stencil2d", (x, w), ("x", "weight"), ref, label=label, registered="lib.ops.stencil2d",
                         nonfinite=(0,), domains={1: (NEGATIVE, ZERO, SIGNS)})

    def random_calls(self, g, device, dtype) -> list[AuditCall]:
        seed = int(torch.randint(0, 2**31, (1,), generator=g))
        k = 2 * int(torch.randint(0, 4, (1,), generator=g)) + 1
        w = audit_randn(k, k, device=device, dtype=torch.float32, seed=seed + 1, scale=0.5)
        return [self._call(audit_randn(*random_shape(g, dims=3, max_numel=1 << 20), device=device,
                                       dtype=torch.float32, seed=seed), w, "stencil2d(batch)"),
                self._call(audit_randn(*random_shape(g, dims=2, max_numel=1 << 20), device=device,
                                       dtype=torch.float32, seed=seed + 2), w, "stencil2d(image)")]

    def kernel_rule(self):
        return KernelRule(self.kernels)

    def benchmark(self) -> Benchmark:
        h = w = 8192
        k = 3

        def make_inputs(seed: int):
            g = torch.Generator(device="cuda")
            g.manual_seed(seed)
            return (torch.randn(h, w, generator=g, device="cuda"), torch.randn(k, k, generator=g, device="cuda"))

        def reference_at(inputs, where):
            full = reference(inputs[0], inputs[1])
            return [full if where is None else full.reshape(-1)[where[0]]]

        return Benchmark(
            label=f"fp32, {h} x {w}, {k} x {k} filter",
            make_inputs=make_inputs,
            call=lambda mod, inp: mod.stencil2d(inp[0], inp[1]),
            baseline=lambda inp: F.conv2d(inp[0][None, None], inp[1][None, None], padding=k // 2),
            work=2 * 4 * h * w,  # read every pixel once, write every output once (the halo comes from cache)
            reference=reference_at,
            tolerance=lambda inp: [tolerance(inp[0], inp[1])],
            shapes=lambda inp: [(h, w)],
            flops=2 * k * k * h * w,
        )


# The launcher's branches (grader/verify/paths.py): each filter size, more row tiles than gridDim.y holds,
# a batch past 2^31 pixels
PATHS = {"k1": (), "k3": (), "k5": (), "k7": (), "grid_stride_tiles": (), "past_2^31": ()}

SPEC = StencilSpec(
    exercise="04_stencil2d",
    title="2-D stencil: constant-memory filter, shared tile with halo",
    module="stencil2d.py",
    paths=PATHS,
    points={"forward": 5, "input_checks": 1, "registration": 1, "performance": 3},
    perf_requires=("forward",),
    requires={"registration": ("forward",)},  # opcheck on a broken kernel: chance
    solution_vs_baseline=3.0,  # H100, 2026-11-25 sweep: 2820 vs cuDNN 925 GB/s
)
