"""Grading for unit 1's activations: an elementwise op with one scalar parameter, and its backward.

The wrapper module of such an exercise provides `<op>(x, p)`, `<op>_backward(grad_output, x, p)`
and `lib` (the loaded library, for opcheck).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from grader.verify.checks import (ELEMENTWISE_TOL, CheckFailure, Comparison, assert_backward_matches_forward, assert_close,
                                  assert_own_kernels, expect_error, ops_called, poison_next_allocation, on_a_busy_stream,
                                  require_free_memory, require_plain_tensor, unmodified)
from grader.verify.observe import KernelRule
from grader.verify.spec import (EXACT_ZEROS, AuditCall, Benchmark, Check, CheckList, Context, DropIn, Spec, audit_randn,
                                random_shape)

DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64)
# Sizes that break naive indexing: tiny, primes, just off multiples of 32, 256 and of 4/8-wide vectors.
SIZES = ((1,), (2,), (3,), (31,), (255,), (257,), (4099,), (1_000_003,), (7, 13, 5), (3, 1024, 257))
LARGE_ELEMENTS = 2**31 + 7  # over 2^31 elements: a 32-bit index overflows


def _short(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


@dataclass
class ActivationSpec(Spec):
    op: str = ""  # name of the Python function in the module, e.g. "leaky_relu"
    param: str = ""  # the scalar's name, e.g. "negative_slope"
    param_values: tuple[float, ...] = ()  # the first is the default
    reference: Callable[[torch.Tensor, float], torch.Tensor] | None = None  # float64 forward
    reference_grad: Callable[[torch.Tensor, torch.Tensor, float], torch.Tensor] | None = None  # float64
    baseline: Callable[[torch.Tensor, float], torch.Tensor] | None = None  # PyTorch's op (timed)
    baseline_grad: Callable[[torch.Tensor, torch.Tensor, float], torch.Tensor] | None = None  # its backward (timed)
    kernels: tuple[str, ...] = ()  # names of the exercise's forward kernels (fixed by the given code)
    backward_kernels: tuple[str, ...] = ()
    input_scale: float = 3.0
    flops_per_element: float = 1.0  # a compare and a multiply, counted as one
    property_dtypes: tuple = ("float32", "float16", "bfloat16", "float64")
    module_class: str = ""  # the drop-in module class, e.g. "LeakyReLU" (Spec.drop_ins)
    torch_module: type | None = None  # torch.nn's, e.g. torch.nn.LeakyReLU

    # --- helpers -------------------------------------------------------------------------------
    def _fn(self, ctx: Context):
        return getattr(ctx.module, self.op)

    def _bwd(self, ctx: Context):
        return getattr(ctx.module, f"{self.op}_backward")

    def _rand(self, ctx: Context, name: str, shape, dtype, scale=None) -> torch.Tensor:
        g = ctx.generator(name)
        x = torch.randn(shape, generator=g, device="cuda", dtype=torch.float32) * (scale or self.input_scale)
        return x.to(dtype)

    def _expect_forward(self, ctx, x: torch.Tensor, p: float, what: str) -> None:
        with unmodified(x=x):
            poison_next_allocation(x.numel(), x.dtype)
            y = self._fn(ctx)(x, p)
        torch.cuda.synchronize()
        expected = self.reference(x.to(torch.float64), p)
        assert_close(y, expected, ELEMENTWISE_TOL[x.dtype], what)
        if y.dtype != x.dtype:
            raise CheckFailure(f"{what}: output dtype {y.dtype}, expected {x.dtype}")

    def _expect_backward(self, ctx, g: torch.Tensor, x: torch.Tensor, p: float, what: str) -> None:
        with unmodified(grad_output=g, x=x):
            poison_next_allocation(x.numel(), x.dtype)
            dx = self._bwd(ctx)(g, x, p)
        torch.cuda.synchronize()
        expected = self.reference_grad(g.to(torch.float64), x.to(torch.float64), p)
        assert_close(dx, expected, ELEMENTWISE_TOL[x.dtype], what)

    # --- the checks ----------------------------------------------------------------------------
    def checks(self) -> list[Check]:
        checks = CheckList()
        default = self.param_values[0]
        for dtype in DTYPES:
            for shape in SIZES:
                size = "x".join(map(str, shape))
                name = f"forward[{_short(dtype)}-{size}]"
                checks.add(name, lambda ctx, n=name, s=shape, d=dtype: self._expect_forward(
                    ctx, self._rand(ctx, n, s, d), default, n))
        for p in self.param_values[1:]:
            name = f"forward[{self.param}={p}]"
            checks.add(name, lambda ctx, n=name, p=p: self._expect_forward(
                ctx, self._rand(ctx, n, (10_007,), torch.float32), p, n))
        checks.add("forward[non-contiguous]", self._check_noncontiguous)
        checks.add("forward[unaligned view]", lambda ctx: self._expect_forward(
            ctx, self._rand(ctx, "unaligned", (4097,), torch.float16)[1:], default, "forward[unaligned view x[1:]]"))
        # the kernels' scalar loops in the other dtypes too (a view off 16 bytes; grader/verify/paths.py)
        for dtype in (d for d in DTYPES if d != torch.float16):
            name = f"forward[unaligned view {_short(dtype)}]"
            checks.add(name, lambda ctx, n=name, d=dtype: self._expect_forward(
                ctx, self._rand(ctx, n, (4097,), d)[1:], default, f"{n[:-1]} x[1:]]"))
        checks.add("forward[empty]", self._check_empty)
        checks.add("forward[output poisoned]", self._check_writes_every_element)
        checks.add("forward[current stream]", self._check_current_stream)
        checks.add("forward[called twice]", self._check_called_twice)
        checks.add(f"forward[{self.op}_: in place, with PyTorch's defaults]", self._check_inplace_defaults)
        checks.add("forward[huge]", self._check_large, slow=True, huge=True)
        checks.add("forward[own kernel ran]", self._check_own_forward, slow=True)
        for dtype in DTYPES:
            for shape in ((1,), (257,), (1_000_003,), (3, 1024, 257)):
                size = "x".join(map(str, shape))
                name = f"backward[{_short(dtype)}-{size}]"
                checks.add(name, lambda ctx, n=name, s=shape, d=dtype: self._expect_backward(
                    ctx, self._rand(ctx, n + "g", s, d, 1.0), self._rand(ctx, n, s, d), default, n))
        for p in self.param_values[1:]:
            name = f"backward[{self.param}={p}]"
            checks.add(name, lambda ctx, n=name, p=p: self._expect_backward(
                ctx, self._rand(ctx, n + "g", (10_007,), torch.float32, 1.0),
                self._rand(ctx, n, (10_007,), torch.float32), p, n))
        checks.add("backward[non-contiguous grad]", lambda ctx: self._expect_backward(
            ctx, self._rand(ctx, "ncg", (512, 300), torch.float32, 1.0).t(),
            self._rand(ctx, "ncx", (300, 512), torch.float32), default, "backward[non-contiguous grad_output]"))
        for dtype in DTYPES:  # the backward kernel's scalar loop: views off 16 bytes (grader/verify/paths.py)
            name = f"backward[unaligned views {_short(dtype)}]"
            checks.add(name, lambda ctx, n=name, d=dtype: self._expect_backward(
                ctx, self._rand(ctx, n + "g", (4097,), d, 1.0)[1:], self._rand(ctx, n, (4097,), d)[1:], default,
                f"{n[:-1]} grad_output[1:], x[1:]]"))
        checks.add("backward[zeros in x]", self._check_backward_at_zero)
        checks.add("backward[empty]", lambda ctx: self._expect_backward(
            ctx, torch.empty(0, 3, device="cuda"), torch.empty(0, 3, device="cuda"), default, "backward[empty]"))
        checks.add("backward[huge]", self._check_large_backward, slow=True, huge=True)
        checks.add("backward[own kernel ran]", self._check_own_backward, slow=True)
        checks.add("input_checks[cpu tensor]", lambda ctx: expect_error(
            self._fn(ctx), torch.randn(8), default, names=("x",), what="a CPU tensor"), needs_gpu=False)
        checks.add("input_checks[integer dtype]", lambda ctx: expect_error(
            self._fn(ctx), torch.ones(8, dtype=torch.int32, device="cuda"), default, names=("x",), what="an int32 tensor"))
        checks.add("input_checks[grad shape]", lambda ctx: expect_error(
            self._bwd(ctx), torch.ones(7, device="cuda"), torch.ones(8, device="cuda"), default,
            names=("grad_output",), what="grad_output of another shape than x"))
        checks.add("input_checks[grad dtype]", lambda ctx: expect_error(
            self._bwd(ctx), torch.ones(8, device="cuda", dtype=torch.float64), torch.ones(8, device="cuda"), default,
            names=("grad_output",), what="grad_output of another dtype than x"))
        # which ops the gradient went through is read with a dispatch mode, whose first use imports
        # torch._dynamo (seconds): a check of its own, in the full grade only, like the profiler's
        checks.add("autograd[through the exercise's ops]", self._check_autograd_ops, slow=True)
        # gradcheck's first autograd.grad imports sympy (2.5 s on the H100): the quick loop checks
        # the same agreement of backward and forward along random directions instead
        checks.add("autograd[backward against finite differences]", self._check_directional)
        checks.add("autograd[gradcheck float64]", self._check_gradcheck, slow=True)
        checks.add("autograd[opcheck]", self._check_opcheck, slow=True)
        return checks

    def _check_current_stream(self, ctx: Context) -> None:
        p = self.param_values[0]
        data = self._rand(ctx, "stream", (1 << 20,), torch.float32)
        y = on_a_busy_stream(lambda x: self._fn(ctx)(x, p), data)
        assert_close(y, self.reference(data.to(torch.float64), p), ELEMENTWISE_TOL[torch.float32],
                     "forward inside `with torch.cuda.stream(s)` (launch on c10::cuda::getCurrentCUDAStream())")

    def _check_called_twice(self, ctx: Context) -> None:
        """Two calls with inputs of one shape: each answer is its own (no output kept and replayed)."""
        p = self.param_values[0]
        for i in range(2):
            self._expect_forward(ctx, self._rand(ctx, f"twice{i}", (4093,), torch.float32), p,
                                 f"forward, call {i + 1} of 2 with inputs of one shape")

    def _check_own_forward(self, ctx: Context) -> None:
        x = self._rand(ctx, "own", (1 << 20,), torch.float32)
        assert_own_kernels(lambda: self._fn(ctx)(x, self.param_values[0]), self.kernels, "forward")

    def _check_own_backward(self, ctx: Context) -> None:
        g = self._rand(ctx, "ownb", (1 << 20,), torch.float32)
        x = self._rand(ctx, "ownx", (1 << 20,), torch.float32)
        assert_own_kernels(lambda: self._bwd(ctx)(g, x, self.param_values[0]), self.backward_kernels, "backward")

    def _check_noncontiguous(self, ctx: Context) -> None:
        base = self._rand(ctx, "noncontig", (300, 512), torch.float32)
        self._expect_forward(ctx, base.t(), self.param_values[0], "forward[transposed x]")
        self._expect_forward(ctx, base[:, ::3], self.param_values[0], "forward[strided x[:, ::3]]")

    def _check_inplace_defaults(self, ctx: Context) -> None:
        """`op_(x)`, the in-place function, with its parameter left out, against torch.nn.functional's
        `op_(x)`: PyTorch's default (the generated defaults property calls the out-of-place op only), x
        holding the result, and x returned."""
        what = f"forward[{self.op}_(x) with {self.param} left out (PyTorch's default)]"
        fn = getattr(ctx.module, f"{self.op}_", None)
        if not callable(fn):
            raise CheckFailure(f"{what}: the exercise's module has no {self.op}_ (in place, as "
                               f"torch.nn.functional.{self.op}_)")
        x = self._rand(ctx, "in place defaults", (4, 7), torch.float32)
        expected = getattr(torch.nn.functional, f"{self.op}_")(x.to(torch.float64))
        y = fn(x)
        torch.cuda.synchronize()
        assert_close(x, expected, ELEMENTWISE_TOL[torch.float32], f"{what}: x after the call")
        if not isinstance(y, torch.Tensor) or y.data_ptr() != x.data_ptr() or y.shape != x.shape:
            raise CheckFailure(f"{what}: returned {type(y).__name__} {tuple(getattr(y, 'shape', ()))}, not x itself "
                               "(an in-place function returns its input, overwritten)")

    def _check_empty(self, ctx: Context) -> None:
        for shape in ((0,), (3, 0, 2)):
            x = torch.empty(shape, device="cuda")
            y = self._fn(ctx)(x, self.param_values[0])
            torch.cuda.synchronize()
            if tuple(y.shape) != shape:
                raise CheckFailure(f"forward[empty]: shape {tuple(y.shape)}, expected {shape}")

    def _check_writes_every_element(self, ctx: Context) -> None:
        """Run twice on inputs whose results differ everywhere, poisoning memory in between: an
        output slot left unwritten shows up as NaN or as the first run's value."""
        x = self._rand(ctx, "poison", (1 << 20) + 3, torch.float32)
        first = self._fn(ctx)(x, self.param_values[0])
        del first  # its memory is poisoned and handed out again by _expect_forward
        x2 = -x
        self._expect_forward(ctx, x2, self.param_values[0], "forward[output poisoned]")

    def _check_large(self, ctx: Context) -> None:
        """More than 2^31 elements, where a 32-bit index overflows: float16 in and out (8 GiB), the
        float64 reference computed piece by piece (so a 12 GB card runs it)."""
        require_free_memory(2 * 2 * LARGE_ELEMENTS + (3 << 28), "the check of more than 2^31 elements")
        x = self._large(ctx, "large", self.input_scale)
        y = self._fn(ctx)(x, self.param_values[0])
        torch.cuda.synchronize()
        self._compare_large(y, x.shape, "forward[huge: 2^31+7 float16 elements]",
                            lambda s: self.reference(x[s].to(torch.float64), self.param_values[0]))

    def _check_large_backward(self, ctx: Context) -> None:
        """The backward past 2^31 elements (the launcher's `backward.past_2^31`): grad_output, x and
        grad_x in float16 are three tensors of 4 GiB, 12.75 GiB with the pieces of the reference. A card
        without that much free skips it (not run here, it costs nothing), as a 12 GB one does; the
        forward's check still runs there. grad_output and x are distinct tensors, so a wrapped index in
        either read shows (one tensor passed as both would hide a wrap in one of them behind the other)."""
        require_free_memory(3 * 2 * LARGE_ELEMENTS + (3 << 28), "the backward's check of more than 2^31 elements")
        g = self._large(ctx, "large grad", 1.0)
        x = self._large(ctx, "large x", self.input_scale)
        dx = self._bwd(ctx)(g, x, self.param_values[0])
        torch.cuda.synchronize()
        self._compare_large(dx, x.shape, "backward[huge: 2^31+7 float16 elements]",
                            lambda s: self.reference_grad(g[s].to(torch.float64), x[s].to(torch.float64),
                                                          self.param_values[0]))

    def _large(self, ctx: Context, name: str, scale: float) -> torch.Tensor:
        """LARGE_ELEMENTS float16 values drawn on the GPU (no float32 copy of 8 GiB on the way)."""
        t = torch.empty(LARGE_ELEMENTS, dtype=torch.float16, device="cuda")
        return t.normal_(0, scale, generator=ctx.generator(name))

    @staticmethod
    def _compare_large(out, shape, what: str, expected) -> None:
        """`out` (a plain tensor of `shape`) against `expected(slice)`, the float64 reference of those
        elements, piece by piece; the end, where a 32-bit index goes wrong, first (a clear message)."""
        check = what.split(":")[0] + "]"
        require_plain_tensor(out, check)
        if tuple(out.shape) != tuple(shape):
            raise CheckFailure(f"{check}: shape {tuple(out.shape)}, expected {tuple(shape)}")
        chunk = 1 << 24
        cmp = Comparison(ELEMENTWISE_TOL[torch.float16], what)
        for start in [LARGE_ELEMENTS - chunk] + list(range(0, LARGE_ELEMENTS - chunk, chunk)):
            piece = slice(start, start + chunk)
            cmp.add(out[piece], expected(piece), offset=start)
            if cmp.bad:
                break
        problem = cmp.problem()
        if problem:
            raise CheckFailure(problem)

    def _check_backward_at_zero(self, ctx: Context) -> None:
        x = self._rand(ctx, "zeros", (4096,), torch.float32)
        x[::7] = 0.0
        g = self._rand(ctx, "zerosg", (4096,), torch.float32, 1.0)
        self._expect_backward(ctx, g, x, self.param_values[0], "backward[x with exact zeros]")

    def _check_autograd_ops(self, ctx: Context) -> None:
        """The gradient must flow through the exercise's two ops: PyTorch's own op (a wrapper that
        falls back to torch.nn.functional) passes gradcheck too."""
        ns, fn = ctx.module.lib.namespace, self._fn(ctx)
        probe = self._rand(ctx, "gradcheck_ops", (33,), torch.float32).requires_grad_()
        called = set(ops_called(lambda: fn(probe, self.param_values[0]).sum().backward()))
        missing = [op for op in (self.op, f"{self.op}_backward") if f"{ns}::{op}" not in called]
        if missing:
            theirs = sorted(n for n in called if self.op in n) or sorted(called)[:4]
            raise CheckFailure(f"the gradient did not go through this exercise's {' and '.join(missing)} op(s); "
                               f"ran {', '.join(theirs)}")

    def _off_the_kink(self, ctx: Context, name: str) -> torch.Tensor:
        x = self._rand(ctx, name, (64,), torch.float64, 1.0)
        return torch.where(x.abs() < 0.05, x + 0.1, x)  # finite differences straddle no kink at 0

    def _check_directional(self, ctx: Context) -> None:
        x, fn = self._off_the_kink(ctx, "directional"), self._fn(ctx)
        for p in self.param_values[:2]:
            assert_backward_matches_forward(lambda t: fn(t, p), x, f"{self.param}={p}",
                                            generator=ctx.generator(f"directional {p}"))

    def _check_gradcheck(self, ctx: Context) -> None:
        x = self._off_the_kink(ctx, "gradcheck").requires_grad_()
        fn = self._fn(ctx)
        for p in self.param_values[:2]:
            try:
                ok = torch.autograd.gradcheck(lambda t: fn(t, p), (x,), eps=1e-6, atol=1e-5)
            except Exception as e:
                raise CheckFailure(f"gradcheck with {self.param}={p}: {str(e).splitlines()[0]}") from None
            if not ok:
                raise CheckFailure(f"gradcheck with {self.param}={p} failed")

    def _check_opcheck(self, ctx: Context) -> None:
        op = getattr(ctx.module.lib.ops, self.op)
        x = self._rand(ctx, "opcheck", (5, 33), torch.float32).requires_grad_()
        try:
            torch.library.opcheck(op, (x, self.param_values[0]))
        except Exception as e:
            raise CheckFailure(f"torch.library.opcheck: {str(e).splitlines()[0][:300]}") from None

    # --- the bad-input audit (tests/test_input_audit.py) -----------------------------------------
    def drop_ins(self) -> list[DropIn]:
        """The module class with torch.nn's default, a value given positionally and one by keyword, and in
        place (`inplace` positionally and by keyword), at every negative value too, whose in-place backward
        torch.nn's refuses: the drop-in refuses it as well, or gives the out-of-place module's gradients."""
        if not self.module_class:
            return []
        other = self.param_values[1]
        constructions = (((), {}), ((other,), {}), ((), {self.param: self.param_values[-1]}),
                         ((other, True), {}), ((), {self.param: self.param_values[2], "inplace": True}),
                         *(((), {self.param: p, "inplace": True}) for p in self.param_values if p < 0))
        return [DropIn(self.module_class, self.torch_module, constructions, input_shape=lambda args, kwargs: (3, 37, 19))]

    def audit_calls(self, device, dtype) -> list[AuditCall]:
        x = audit_randn(4, 7, device=device, dtype=dtype, seed=1, scale=self.input_scale)
        g = audit_randn(4, 7, device=device, dtype=dtype, seed=2)
        return self._calls(x, g, self.param_values[1])

    def _calls(self, x, g, p) -> list[AuditCall]:
        others = tuple(q for q in self.param_values if q != p)
        return [
            # x exactly 0, where the op's branch is decided (x > 0 against x >= 0: the derivative there
            # is the parameter's side), at this call's parameter (not 1), and in the gradients
            AuditCall(self.op, (x, p), ("x", self.param), lambda x, p: self.reference(x.double(), p), grad_args=(0,),
                      registered=f"lib.ops.{self.op}", nonfinite=(0,), scalars={1: others},
                      domains={0: (EXACT_ZEROS,)}, defaults={1: self.param_values[0]}),
            AuditCall(f"{self.op}_backward", (g, x, p), ("grad_output", "x", self.param),
                      lambda g, x, p: self.reference_grad(g.double(), x.double(), p),
                      registered=f"lib.ops.{self.op}_backward", nonfinite=(0, 1), scalars={2: others},
                      domains={1: (EXACT_ZEROS,)}),
        ]

    def random_calls(self, g, device, dtype) -> list[AuditCall]:
        shape = random_shape(g)
        seed = int(torch.randint(0, 2**31, (1,), generator=g))
        x = audit_randn(*shape, device=device, dtype=dtype, seed=seed, scale=self.input_scale)
        grad = audit_randn(*shape, device=device, dtype=dtype, seed=seed + 1)
        p = self.param_values[int(torch.randint(0, len(self.param_values), (1,), generator=g))]
        return self._calls(x, grad, p)

    def kernel_rule(self):
        return KernelRule(self.kernels + self.backward_kernels)

    # --- speed ---------------------------------------------------------------------------------
    def benchmark(self) -> Benchmark:
        """The forward and the backward in one timed call, each output verified: a backward kernel
        that does its work twice (a tail loop from the wrong index) shows in the time, as a slow
        forward does. 2^27 elements a tensor: 2.5 GiB moved a call, far past any L2."""
        n = 2**27
        p = self.param_values[0]

        def make_inputs(seed: int):
            g = torch.Generator(device="cuda")
            g.manual_seed(seed)
            x = torch.randn(n, generator=g, device="cuda") * self.input_scale
            return (x, torch.randn(n, generator=g, device="cuda"))

        def reference_at(param):
            def reference(inputs, where):
                x, grad = (t.reshape(-1) for t in inputs)
                at = (lambda t, k: t) if where is None else (lambda t, k: t[where[k]])
                return [self.reference(at(x, 0).to(torch.float64), param),
                        self.reference_grad(at(grad, 1).to(torch.float64), at(x, 1).to(torch.float64), param)]
            return reference

        def both(mod, inp, q):
            return [getattr(mod, self.op)(inp[0], q), getattr(mod, f"{self.op}_backward")(inp[1], inp[0], q)]

        return Benchmark(
            label="fp32, 2^27 elements, forward + backward",
            make_inputs=make_inputs,
            call=lambda mod, inp: both(mod, inp, p),
            baseline=lambda inp: [self.baseline(inp[0], p), self.baseline_grad(inp[1], inp[0], p)],
            work=(2 + 3) * 4 * n,  # forward: read x, write y; backward: read grad_output and x, write grad_x
            reference=reference_at(p),
            tolerance=lambda inp: [ELEMENTWISE_TOL[torch.float32]] * 2,
            shapes=lambda inp: [tuple(inp[0].shape)] * 2,
            output_groups=("forward", "backward"),
            # the ops at the benchmark's size with each other value of the scalar: a fast path that is
            # right only for the timed value is wrong here
            variants={f"{self.op} and {self.op}_backward({self.param}={q})": (lambda mod, inp, q=q: both(mod, inp, q),
                                                                           reference_at(q))
                      for q in self.param_values[1:]},
            flops=2 * self.flops_per_element * n,
        )
