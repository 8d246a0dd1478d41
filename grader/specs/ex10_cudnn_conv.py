"""Grading for exercise 10: 2-d convolution through cuDNN with a plan cache.

The wrapper module provides conv2d, conv2d_backward_input, conv2d_backward_weight, conv_transpose2d
(each with mode="benchmark" | "heuristic" | "uncached"), describe, cache_stats, cache_clear and
set_cache_capacity. cuDNN's kernels are allowed here (they are the point); what must not run is
PyTorch's own convolution (aten::conv*, aten::cudnn_convolution, at::native kernels).
"""
from __future__ import annotations

import threading
from contextlib import contextmanager

import torch
import torch.nn.functional as F

from grader.timer import math_mode
from grader.checks import CheckFailure, assert_rel_error, expect_error, poison, poison_next_allocation, unmodified
from grader.observe import KernelRule
from grader.spec import AuditCall, Benchmark, Check, CheckList, Context, Spec, audit_randn
from grader.specs.ex06_conv2d import SQUARE_GEOMETRIES, random_case, whole_reference

# Normwise relative error against float64. Strict fp32 is far below TF32's rounding (~5e-4), so a
# plan that uses TF32 when it must not fails; float64 must be exact to its own rounding.
TOL = {"strict": 1e-5, "tf32": 5e-3, "float64": 1e-12}
# Exercise 06's six square geometries (kernel, stride, padding), all on one input shape: a plan
# keyed without the stride is then found for a call with another stride.
CASES = SQUARE_GEOMETRIES
CASE_X = (2, 8, 19, 23)  # N, C, H, W: odd sizes, not multiples of a tile
CASE_K = 12  # output channels
# Convolutions large enough that cuDNN's algorithms need a workspace: (x shape, K, kernel, padding).
WORKSPACE_CASES = (((8, 64, 56, 56), 64, 3, 1), ((16, 256, 14, 14), 256, 3, 1), ((4, 32, 64, 64), 48, 5, 2))
# The timed convolutions: (x shape, output channels), 3x3, stride 1, padding 1.
BENCH = (((32, 512, 7, 7), 512), ((32, 64, 56, 56), 64))
# The launch cache's checks (CUDA graphs): the streams check's convolution, 3x3, stride 1, padding 1.
GRAPH_X, GRAPH_K = (2, 8, 20, 20), 8
GRAPH_COUNTS = ("graph_hits", "graph_captures", "graph_failures", "graphs")


def _name(k, s, p, d=1) -> str:
    return f"k{k}s{s}p{p}" + (f"d{d}" if d != 1 else "")


def math_of(mode: str):
    """A check's math mode, restored after: TF32 allowed ("tf32") or not ("strict", "float64")."""
    return math_mode(tf32=mode == "tf32")


def _rand(ctx: Context, name: str, shape, dtype=torch.float32, scale=1.0) -> torch.Tensor:
    g = ctx.generator(name)
    return (torch.randn(shape, generator=g, device="cuda", dtype=torch.float32) * scale).to(dtype)


def _weight(ctx, name, shape, dtype=torch.float32):
    fan_in = shape[1] * shape[2] * shape[3]
    return _rand(ctx, name, shape, dtype, fan_in ** -0.5)


def _out(n, k, s, p, d):
    return (n + 2 * p - d * (k - 1) - 1) // s + 1


def _reference(x, w, s, p, d):
    return F.conv2d(x.double(), w.double(), None, s, p, d)


def _reference_grads(x, w, g, s, p, d):
    """(grad_x, grad_w) of F.conv2d in float64, by autograd."""
    x64 = x.detach().double().requires_grad_()
    w64 = w.detach().double().requires_grad_()
    y = F.conv2d(x64, w64, None, s, p, d)
    return torch.autograd.grad(y, (x64, w64), g.double())


def assert_no_pytorch_conv(fn, what: str) -> None:
    """cuDNN's kernels may run, PyTorch's convolution may not: no aten::conv* / aten::cudnn_* op on
    the CPU side, no at::native kernel on the GPU, and at least one kernel must have run."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    events = prof.events()
    ops = sorted({e.name for e in events if e.device_type == DeviceType.CPU and e.name.startswith("aten::")
                  and ("conv" in e.name or "cudnn" in e.name)})
    if ops:
        raise CheckFailure(f"{what}: PyTorch's convolution ran ({', '.join(ops[:3])}); the op must call cuDNN itself")
    kernels = [e.name for e in events if e.device_type == DeviceType.CUDA]
    native = sorted({k for k in kernels if "at::native" in k})
    if native:
        raise CheckFailure(f"{what}: PyTorch's own kernels ran ({'; '.join(n[:80] for n in native[:2])}); "
                           "the op must call cuDNN itself")
    if not kernels:
        raise CheckFailure(f"{what}: no GPU kernel ran")


def graph_counts(m) -> dict:
    """The launch cache's counts from cache_stats()."""
    s = m.cache_stats()
    missing = [k for k in GRAPH_COUNTS if k not in s]
    if missing:
        raise CheckFailure(f"cache_stats() has no {', '.join(missing)}: the launch cache's counts are part of "
                           "the interface")
    return {k: int(s[k]) for k in GRAPH_COUNTS}


@contextmanager
def launch_cache(m, enabled: bool):
    """The launch cache (CUDA graphs) on or off for the body; on again after it (the default)."""
    m.set_graphs(enabled)
    try:
        yield
    finally:
        m.set_graphs(True)


def repeat_on_same_buffers(fn, x: torch.Tensor, values) -> list[torch.Tensor]:
    """fn() once per value, with x refilled in place first; each output is copied and freed before the
    next call, so the caching allocator hands the op the same buffers every time (as in a training
    loop): with the launch cache on, the second call captures a graph and the later ones replay it."""
    outs = []
    for v in values:
        x.copy_(v)
        y = fn()
        outs.append(y.clone())
        del y
    torch.cuda.synchronize()
    return outs


def _random_configs(seed: int, count: int):
    """(x shape, w shape, stride, padding, dilation) of `count` random convolutions: exercise 06's
    generator, smaller (each new shape builds cuDNN plans)."""
    g = torch.Generator().manual_seed(seed)
    configs = []
    for _ in range(count):
        c = random_case(g, "", batch=3, cin=9, size=24, cout=9)
        configs.append(((c.n, c.cin, c.h, c.w), (c.cout, c.cin, c.kh, c.kw), c.stride, c.padding, c.dilation))
    return configs


class CudnnConvSpec(Spec):
    # --- forward -------------------------------------------------------------------------------
    def _expect_forward(self, ctx, x, w, s, p, d, mode, what, algo="benchmark"):
        with math_of(mode), unmodified(x=x, weight=w):
            y = ctx.module.conv2d(x, w, s, p, d, mode=algo)
            torch.cuda.synchronize()
        if not isinstance(y, torch.Tensor) or y.dtype != x.dtype:
            raise CheckFailure(f"{what}: expected a {x.dtype} tensor, got {getattr(y, 'dtype', type(y).__name__)}")
        assert_rel_error(y, _reference(x, w, s, p, d), TOL[mode], what)

    def _check_case(self, ctx, k, s, p, mode, algo="benchmark"):
        dtype = torch.float64 if mode == "float64" else torch.float32
        x = _rand(ctx, "case-x", CASE_X, dtype)
        w = _weight(ctx, f"case-w{k}", (CASE_K, CASE_X[1], k, k), dtype)
        if s != 1:  # the stride-1 twin first: a plan keyed without the stride would be found next
            self._expect_forward(ctx, x, w, 1, p, 1, mode, f"forward[{mode}-{_name(k, 1, p)}]", algo)
        self._expect_forward(ctx, x, w, s, p, 1, mode, f"forward[{mode}-{_name(k, s, p)}]", algo)

    def _check_random_forward(self, ctx, name, dtype=torch.float32, mode="strict"):
        for i, (xs, ws, s, p, d) in enumerate(_random_configs(ctx.seed_for(name), 8)):
            x, w = _rand(ctx, f"{name}-x{i}", xs, dtype), _weight(ctx, f"{name}-w{i}", ws, dtype)
            self._expect_forward(ctx, x, w, s, p, d, mode, f"{name}: x {xs}, weight {ws}, stride {s}, padding {p}, dilation {d}")

    def _check_noncontiguous(self, ctx):
        x = _rand(ctx, "nc-x", (2, 6, 15, 26))
        w = _weight(ctx, "nc-w", (5, 6, 3, 3))
        self._expect_forward(ctx, x[:, :, :, ::2], w, 1, 1, 1, "strict", "forward[strided view x[..., ::2]]")
        self._expect_forward(ctx, x.contiguous(memory_format=torch.channels_last), w, 2, 1, 1, "strict",
                             "forward[channels_last x]")
        self._expect_forward(ctx, x, w.transpose(2, 3), 1, 0, 1, "strict", "forward[transposed weight view]")

    def _check_poisoned(self, ctx):
        """Run twice with results that differ, poisoning free memory in between: an output element
        left unwritten shows up as NaN or as the first run's value."""
        x = _rand(ctx, "poison-x", (3, 7, 33, 31))
        w = _weight(ctx, "poison-w", (9, 7, 3, 3))
        with math_of("strict"):
            first = ctx.module.conv2d(x, w, 1, 1)
            torch.cuda.synchronize()
        del first
        poison(torch.empty((1 << 22,), device="cuda"))
        self._expect_forward(ctx, -x, w, 1, 1, 1, "strict", "forward[output poisoned]")

    def _check_modes(self, ctx, algo):
        for k, s, p in ((3, 2, 1), (5, 1, 2)):
            x = _rand(ctx, f"{algo}-x{k}", CASE_X)
            w = _weight(ctx, f"{algo}-w{k}", (CASE_K, CASE_X[1], k, k))
            self._expect_forward(ctx, x, w, s, p, 1, "strict", f"forward[mode={algo}, {_name(k, s, p)}]", algo)
            self._expect_forward(ctx, x, w, s, p, 1, "tf32", f"forward[mode={algo}, tf32, {_name(k, s, p)}]", algo)

    def _check_own_forward(self, ctx):
        x = _rand(ctx, "own-x", (4, 16, 28, 28))
        w = _weight(ctx, "own-w", (32, 16, 3, 3))
        with math_of("strict"):
            ctx.module.conv2d(x, w, 1, 1)  # a plan exists; the profiled call uses it
            assert_no_pytorch_conv(lambda: ctx.module.conv2d(x, w, 1, 1), "forward")
            assert_no_pytorch_conv(lambda: ctx.module.conv2d(x, w, 2, 1, mode="uncached"), "forward, mode=uncached")

    def _check_workspace(self, ctx, backward: bool):
        """Larger convolutions, where the chosen algorithms usually need a workspace (the seed crashed
        on a null workspace with a non-zero size), in both algorithm modes and both math modes."""
        for i, (xs, k, ks, pad) in enumerate(WORKSPACE_CASES):
            x = _rand(ctx, f"ws-x{i}", xs)
            w = _weight(ctx, f"ws-w{i}", (k, xs[1], ks, ks))
            for algo in ("heuristic", "benchmark"):
                for mode in ("strict", "tf32"):
                    what = f"{'backward' if backward else 'forward'}[workspace: x {xs}, {_name(ks, 1, pad)}, {mode}, mode={algo}]"
                    if backward:
                        self._expect_backward(ctx, x, w, (1, 1), (pad, pad), (1, 1), mode, what, algo)
                    else:
                        self._expect_forward(ctx, x, w, 1, pad, 1, mode, what, algo)

    # --- backward ------------------------------------------------------------------------------
    def _expect_backward(self, ctx, x, w, s, p, d, mode, what, algo="benchmark"):
        y_shape = (x.shape[0], w.shape[0], _out(x.shape[2], w.shape[2], s[0], p[0], d[0]),
                   _out(x.shape[3], w.shape[3], s[1], p[1], d[1]))
        g = _rand(ctx, what + "-g", y_shape, x.dtype)
        m = ctx.module
        with math_of(mode), unmodified(grad_output=g, x=x, weight=w):
            gx = m.conv2d_backward_input(g, w, tuple(x.shape), s, p, d, mode=algo)
            gw = m.conv2d_backward_weight(g, x, tuple(w.shape), s, p, d, mode=algo)
            torch.cuda.synchronize()
        ref_x, ref_w = _reference_grads(x, w, g, s, p, d)
        assert_rel_error(gx, ref_x, TOL[mode], f"{what}: conv2d_backward_input (grad of x)")
        assert_rel_error(gw, ref_w, TOL[mode], f"{what}: conv2d_backward_weight (grad of weight)")

    def _check_backward_case(self, ctx, k, s, p, mode):
        dtype = torch.float64 if mode == "float64" else torch.float32
        x = _rand(ctx, "bcase-x", CASE_X, dtype)
        w = _weight(ctx, f"bcase-w{k}", (CASE_K, CASE_X[1], k, k), dtype)
        if s != 1:
            self._expect_backward(ctx, x, w, (1, 1), (p, p), (1, 1), mode, f"backward[{mode}-{_name(k, 1, p)}]")
        self._expect_backward(ctx, x, w, (s, s), (p, p), (1, 1), mode, f"backward[{mode}-{_name(k, s, p)}]")

    def _check_random_backward(self, ctx, name):
        for i, (xs, ws, s, p, d) in enumerate(_random_configs(ctx.seed_for(name), 6)):
            x, w = _rand(ctx, f"{name}-x{i}", xs), _weight(ctx, f"{name}-w{i}", ws)
            self._expect_backward(ctx, x, w, s, p, d, "strict",
                                  f"{name}: x {xs}, weight {ws}, stride {s}, padding {p}, dilation {d}")

    def _check_transposed(self, ctx, mode):
        # (C_in, C_out, k, stride, padding, output_padding, dilation)
        for i, (ci, co, k, s, p, op, d) in enumerate(((6, 4, 3, 2, 1, 1, 1), (5, 7, 1, 1, 0, 0, 1), (4, 3, 4, 3, 2, 2, 1),
                                                      (3, 5, 3, 2, 1, 1, 2), (8, 8, 7, 2, 3, 1, 1))):
            x = _rand(ctx, f"t{mode}-x{i}", (2, ci, 9, 13))
            w = _weight(ctx, f"t{mode}-w{i}", (ci, co, k, k))
            what = f"conv_transpose2d[{mode}, weight {tuple(w.shape)}, stride {s}, padding {p}, output_padding {op}, dilation {d}]"
            with math_of(mode), unmodified(x=x, weight=w):
                y = ctx.module.conv_transpose2d(x, w, s, p, op, d)
                torch.cuda.synchronize()
            expected = F.conv_transpose2d(x.double(), w.double(), None, s, p, op, 1, d)
            assert_rel_error(y, expected, TOL[mode], what)

    def _check_autograd(self, ctx):
        x = _rand(ctx, "ag-x", (2, 5, 14, 11)).requires_grad_()
        w = _weight(ctx, "ag-w", (7, 5, 3, 3)).requires_grad_()
        with math_of("strict"):
            y = ctx.module.conv2d(x, w, 2, 1)
            g = _rand(ctx, "ag-g", tuple(y.shape))
            gx, gw = torch.autograd.grad(y, (x, w), g)
            torch.cuda.synchronize()
        ref_x, ref_w = _reference_grads(x, w, g, (2, 2), (1, 1), (1, 1))
        assert_rel_error(gx, ref_x, TOL["strict"], "autograd: grad of x through conv2d")
        assert_rel_error(gw, ref_w, TOL["strict"], "autograd: grad of weight through conv2d")
        xt = _rand(ctx, "agt-x", (2, 4, 6, 5)).requires_grad_()
        wt = _weight(ctx, "agt-w", (4, 3, 3, 3)).requires_grad_()
        with math_of("strict"):
            yt = ctx.module.conv_transpose2d(xt, wt, 2, 1, 1)
            gt = _rand(ctx, "agt-g", tuple(yt.shape))
            gxt, gwt = torch.autograd.grad(yt, (xt, wt), gt)
        x64, w64 = xt.detach().double().requires_grad_(), wt.detach().double().requires_grad_()
        ref = torch.autograd.grad(F.conv_transpose2d(x64, w64, None, 2, 1, 1), (x64, w64), gt.double())
        assert_rel_error(gxt, ref[0], TOL["strict"], "autograd: grad of x through conv_transpose2d")
        assert_rel_error(gwt, ref[1], TOL["strict"], "autograd: grad of weight through conv_transpose2d")

    def _check_gradcheck(self, ctx):
        x = _rand(ctx, "gc-x", (2, 3, 7, 6), torch.float64).requires_grad_()
        w = _rand(ctx, "gc-w", (4, 3, 3, 2), torch.float64).requires_grad_()
        fn = ctx.module.conv2d
        try:
            ok = torch.autograd.gradcheck(lambda a, b: fn(a, b, (2, 1), (1, 0), (1, 2)), (x, w), eps=1e-6, atol=1e-6)
        except Exception as e:
            raise CheckFailure(f"gradcheck of conv2d in float64: {str(e).splitlines()[0][:300]}") from None
        if not ok:
            raise CheckFailure("gradcheck of conv2d in float64 failed")

    def _check_own_backward(self, ctx):
        x = _rand(ctx, "ownb-x", (4, 16, 28, 28))
        w = _weight(ctx, "ownb-w", (32, 16, 3, 3))
        g = _rand(ctx, "ownb-g", (4, 32, 28, 28))
        m = ctx.module
        with math_of("strict"):
            def both():
                m.conv2d_backward_input(g, w, tuple(x.shape), 1, 1)
                m.conv2d_backward_weight(g, x, tuple(w.shape), 1, 1)
            both()
            assert_no_pytorch_conv(both, "backward")

    # --- cache ---------------------------------------------------------------------------------
    def _stats(self, ctx):
        s = ctx.module.cache_stats()
        return {k: int(s[k]) for k in ("hits", "misses", "evictions", "size", "capacity")}  # workspace: not compared

    def _check_hit(self, ctx):
        m = ctx.module
        x = _rand(ctx, "hit-x", (2, 5, 12, 12))
        w = _weight(ctx, "hit-w", (6, 5, 3, 3))
        m.cache_clear()
        with math_of("strict"):
            m.conv2d(x, w, 1, 1)
            first = self._stats(ctx)
            if (first["misses"], first["hits"], first["size"]) != (1, 0, 1):
                raise CheckFailure(f"cache: after cache_clear() and one call, expected 1 miss, 0 hits and 1 plan, got {first}")
            self._expect_forward(ctx, -x, w, 1, 1, 1, "strict", "cache[second identical call]")
        second = self._stats(ctx)
        if (second["misses"], second["hits"], second["size"]) != (1, 1, 1):
            raise CheckFailure(f"cache: a second call with the same shapes and parameters must be a hit; got {second}")

    def _check_key_fields(self, ctx):
        """Each field that changes the plan, changed alone (each dimension of a pair alone too), must
        miss and give the right answer; repeated, it must hit. The answers are checked, not only the
        counts the module reports about itself."""
        m = ctx.module
        x = _rand(ctx, "key-x", (2, 5, 16, 15))
        w = _weight(ctx, "key-w", (6, 5, 3, 3))
        g = _rand(ctx, "key-g", (2, 6, 16, 15))
        base = dict(x=x, w=w, s=(1, 1), p=(1, 1), d=(1, 1), mode="strict", algo="benchmark", op="forward")
        variations = {
            "stride": dict(s=(2, 2)), "stride (height only)": dict(s=(2, 1)), "stride (width only)": dict(s=(1, 2)),
            "padding": dict(p=(0, 0)), "padding (height only)": dict(p=(0, 1)), "padding (width only)": dict(p=(1, 0)),
            "dilation": dict(d=(2, 2)), "dilation (height only)": dict(d=(2, 1)), "dilation (width only)": dict(d=(1, 2)),
            "dtype (float64)": dict(x=x.double(), w=w.double(), mode="float64"),
            "math mode (TF32 allowed)": dict(mode="tf32"),
            "batch size": dict(x=x[:1]), "input channels": dict(x=x[:, :4], w=w[:, :4]),
            "input height": dict(x=x[:, :, :13]), "input width": dict(x=x[:, :, :, :12]),
            "output channels": dict(w=w[:4]), "kernel size": dict(w=_weight(ctx, "key-w5", (6, 5, 5, 5))),
            "kernel height": dict(w=_weight(ctx, "key-w53", (6, 5, 5, 3))),
            "kernel width": dict(w=_weight(ctx, "key-w35", (6, 5, 3, 5))),
            "operation (backward-data)": dict(op="backward_input"), "algorithm mode (heuristic)": dict(algo="heuristic"),
        }

        def call(c, what):
            xc, wc = c["x"].contiguous(), c["w"].contiguous()
            with math_of(c["mode"]):
                if c["op"] == "forward":
                    out = m.conv2d(xc, wc, c["s"], c["p"], c["d"], mode=c["algo"])
                    expected = _reference(xc, wc, c["s"], c["p"], c["d"])
                else:
                    out = m.conv2d_backward_input(g, wc, tuple(xc.shape), c["s"], c["p"], c["d"], mode=c["algo"])
                    expected = torch.nn.grad.conv2d_input(tuple(xc.shape), wc.double(), g.double(), c["s"], c["p"], c["d"])
            torch.cuda.synchronize()
            assert_rel_error(out, expected, TOL[c["mode"]], f"cache[{what}]")

        m.cache_clear()
        call(base, "the first call")
        for field, change in variations.items():
            c = {**base, **change}
            before = self._stats(ctx)
            call(c, f"a call that differs only in {field}")
            after = self._stats(ctx)
            if after["misses"] != before["misses"] + 1 or after["hits"] != before["hits"]:
                raise CheckFailure(f"cache: a call that differs only in {field} was a hit; the key must include it "
                                   f"(counts before {before}, after {after})")
            call(c, f"the call that differs only in {field}, repeated")
            again = self._stats(ctx)
            if again["hits"] != after["hits"] + 1:
                raise CheckFailure(f"cache: repeating the call that differs in {field} was not a hit ({after} -> {again})")

    def _check_clear(self, ctx):
        m = ctx.module
        x = _rand(ctx, "clear-x", (1, 3, 9, 9))
        w = _weight(ctx, "clear-w", (4, 3, 3, 3))
        with math_of("strict"):
            m.conv2d(x, w, 1, 1)
            m.conv2d(x, w, 2, 1)
            if self._stats(ctx)["size"] < 1:
                raise CheckFailure(f"cache: no plan is held after two calls: {self._stats(ctx)}")
            m.cache_clear()
            s = self._stats(ctx)
            if (s["size"], s["hits"], s["misses"]) != (0, 0, 0):
                raise CheckFailure(f"cache: cache_clear() must drop every plan and reset the counts, got {s}")
            self._expect_forward(ctx, x, w, 1, 1, 1, "strict", "cache[call after cache_clear()]")
            s = self._stats(ctx)
            if (s["size"], s["misses"]) != (1, 1):
                raise CheckFailure(f"cache: the first call after cache_clear() must miss and add a plan, got {s}")

    def _check_bounded(self, ctx):
        m = ctx.module
        x = _rand(ctx, "lru-x", (1, 4, 24, 24))
        w = _weight(ctx, "lru-w", (4, 4, 3, 3))
        cap = self._stats(ctx)["capacity"]
        m.cache_clear()
        try:
            m.set_cache_capacity(3)
            with math_of("strict"):
                for h in (20, 21, 22, 23, 24):  # five keys: plans for 20 and 21 are evicted
                    m.conv2d(x[:, :, :h], w, 1, 1)
                s = self._stats(ctx)
                if s["size"] != 3 or s["evictions"] != 2:
                    raise CheckFailure(f"cache: with capacity 3, five different calls must leave 3 plans and 2 evictions, got {s}")
                m.conv2d(x[:, :, :22], w, 1, 1)  # the oldest kept plan: a hit, and now the newest
                m.conv2d(x[:, :, :20], w, 1, 1)  # evicted: a miss, which evicts 23 (least recently used)
                m.conv2d(x[:, :, :22], w, 1, 1)
                s2 = self._stats(ctx)
                if (s2["hits"] - s["hits"], s2["misses"] - s["misses"]) != (2, 1):
                    raise CheckFailure(f"cache: least-recently-used eviction expected (2 hits, 1 miss), got {s} -> {s2}")
                self._expect_forward(ctx, x[:, :, :23], w, 1, 1, 1, "strict", "cache[call after eviction]")
                s3 = self._stats(ctx)
                if s3["misses"] != s2["misses"] + 1 or s3["size"] != 3:
                    raise CheckFailure(f"cache: the least recently used plan should have been evicted: {s2} -> {s3}")
        finally:
            m.set_cache_capacity(max(cap, 16))

    def _check_uncached(self, ctx):
        m = ctx.module
        before = self._stats(ctx)
        x = _rand(ctx, "unc-x", CASE_X)
        w = _weight(ctx, "unc-w", (CASE_K, CASE_X[1], 3, 3))
        self._expect_forward(ctx, x, w, 2, 1, 1, "strict", "forward[mode=uncached]", "uncached")
        g = _rand(ctx, "unc-g", (CASE_X[0], CASE_K, _out(CASE_X[2], 3, 2, 1, 1), _out(CASE_X[3], 3, 2, 1, 1)))
        with math_of("strict"):
            gx = m.conv2d_backward_input(g, w, CASE_X, 2, 1, mode="uncached")
            gw = m.conv2d_backward_weight(g, x, tuple(w.shape), 2, 1, mode="uncached")
        ref_x, ref_w = _reference_grads(x, w, g, 2, 1, 1)
        assert_rel_error(gx, ref_x, TOL["strict"], "conv2d_backward_input, mode=uncached")
        assert_rel_error(gw, ref_w, TOL["strict"], "conv2d_backward_weight, mode=uncached")
        after = self._stats(ctx)
        if after != before:
            raise CheckFailure(f"cache: mode='uncached' must not use the cache, but the counts moved: {before} -> {after}")

    # --- the launch cache (CUDA graphs) ---------------------------------------------------------
    def _graph_inputs(self, ctx, name, count):
        x = torch.zeros(GRAPH_X, device="cuda")
        w = _weight(ctx, f"{name}-w", (GRAPH_K, GRAPH_X[1], 3, 3))
        values = [_rand(ctx, f"{name}-v{i}", GRAPH_X) for i in range(count)]
        return x, w, values

    def _check_graph_replay(self, ctx):
        """The same buffers with new values in them: the second call captures a graph, the later ones
        replay it, and every result is that of the values the buffers hold at the call."""
        m = ctx.module
        x, w, values = self._graph_inputs(ctx, "graph", 5)
        refs = [_reference(v, w, 1, 1, 1) for v in values]
        m.cache_clear()
        with math_of("strict"), launch_cache(m, True):
            outs = repeat_on_same_buffers(lambda: m.conv2d(x, w, 1, 1), x, values)
            counts = graph_counts(m)
            for i, (y, ref) in enumerate(zip(outs, refs)):
                assert_rel_error(y, ref, TOL["strict"], f"graphs: call {i + 1} of conv2d on the same buffers refilled "
                                 "with new values (a replayed graph must read the buffers' current values)")
            if counts["graph_captures"] < 1 or counts["graph_hits"] < 1:
                raise CheckFailure(f"graphs: {len(values)} calls of conv2d on the same buffers replayed no graph "
                                   f"(counts {counts}); the second call should capture one, the later ones replay it")
            # the gradients, the same way: grad_output refilled in place, x as the last call left it
            g = torch.zeros((GRAPH_X[0], GRAPH_K, GRAPH_X[2], GRAPH_X[3]), device="cuda")
            gs = [_rand(ctx, f"graph-g{i}", tuple(g.shape)) for i in range(4)]
            grads = [_reference_grads(x, w, gi, 1, 1, 1) for gi in gs]
            gxs = repeat_on_same_buffers(lambda: m.conv2d_backward_input(g, w, GRAPH_X, 1, 1), g, gs)
            gws = repeat_on_same_buffers(lambda: m.conv2d_backward_weight(g, x, tuple(w.shape), 1, 1), g, gs)
        for i, ((ref_x, ref_w), gx, gw) in enumerate(zip(grads, gxs, gws)):
            same = f"call {i + 1} on the same buffers"
            assert_rel_error(gx, ref_x, TOL["strict"], f"graphs: conv2d_backward_input {same}")
            assert_rel_error(gw, ref_w, TOL["strict"], f"graphs: conv2d_backward_weight {same}")

    def _check_graph_new_output(self, ctx):
        """A graph holds the addresses it was captured with: a call whose output is another buffer must
        not replay it (it would write the old buffer and leave the new one unwritten)."""
        m = ctx.module
        x, w, values = self._graph_inputs(ctx, "graph-out", 7)
        m.cache_clear()
        with math_of("strict"), launch_cache(m, True):
            repeat_on_same_buffers(lambda: m.conv2d(x, w, 1, 1), x, values[:3])  # a graph for these buffers
            kept = []
            for v in values[3:]:  # same x, w and workspace; every output kept alive, so each is a new buffer
                x.copy_(v)
                poison_next_allocation(GRAPH_X[0] * GRAPH_K * GRAPH_X[2] * GRAPH_X[3])
                kept.append(m.conv2d(x, w, 1, 1))
            torch.cuda.synchronize()
        for i, (y, v) in enumerate(zip(kept, values[3:])):
            assert_rel_error(y, _reference(v, w, 1, 1, 1), TOL["strict"],
                             f"graphs: conv2d call {i + 1} into its own output buffer, after a graph was captured "
                             "for another output buffer (a graph is only for the exact addresses it was captured with)")

    def _check_graphs_off(self, ctx):
        """set_graphs(False) and mode="uncached": the same results, and no graph captured or replayed."""
        m = ctx.module
        x, w, values = self._graph_inputs(ctx, "graph-off", 4)
        refs = [_reference(v, w, 1, 1, 1) for v in values]
        m.cache_clear()
        with math_of("strict"):
            with launch_cache(m, False):
                if m.cache_stats().get("graphs_enabled") is not False:
                    raise CheckFailure(f"graphs: after set_graphs(False), cache_stats() says {m.cache_stats()}")
                off = repeat_on_same_buffers(lambda: m.conv2d(x, w, 1, 1), x, values)
                off_counts = graph_counts(m)
            uncached = repeat_on_same_buffers(lambda: m.conv2d(x, w, 1, 1, mode="uncached"), x, values)
            uncached_counts = graph_counts(m)
        for i, ref in enumerate(refs):
            assert_rel_error(off[i], ref, TOL["strict"], f"graphs off: call {i + 1} on the same buffers")
            assert_rel_error(uncached[i], ref, TOL["strict"], f"mode=uncached: call {i + 1} on the same buffers")
        if any(off_counts.values()):
            raise CheckFailure(f"graphs: with set_graphs(False), repeated calls still used graphs: {off_counts}")
        if any(uncached_counts.values()):
            raise CheckFailure(f"graphs: mode='uncached' must never use graphs, but the counts moved: "
                               f"{uncached_counts}")

    def _check_graph_side_stream(self, ctx):
        """A replayed graph must run on the caller's current stream: on a side stream, after that
        stream's long sleep and its copy into the input, it must read the copied values."""
        m = ctx.module
        x = _rand(ctx, "sgraph-x", GRAPH_X)
        w = _weight(ctx, "sgraph-w", (GRAPH_K, GRAPH_X[1], 3, 3))
        expected = _reference(x, w, 1, 1, 1)
        late = torch.zeros_like(x)
        side = torch.cuda.Stream()
        torch.cuda.synchronize()
        with math_of("strict"), launch_cache(m, True):
            with torch.cuda.stream(side):
                for _ in range(3):  # on this stream's own buffers: the second call captures, the third replays
                    m.conv2d(late, w, 1, 1)
            side.synchronize()
            for attempt in range(2):
                late.zero_()
                torch.cuda.synchronize()
                with torch.cuda.stream(side):
                    torch.cuda._sleep(100_000_000)  # tens of milliseconds of work queued first
                    late.copy_(x)
                    y = m.conv2d(late, w, 1, 1)
                torch.cuda.synchronize()
                assert_rel_error(y, expected, TOL["strict"],
                                 f"streams: a repeated conv2d on a side stream (attempt {attempt + 1}) read its input "
                                 "before that stream wrote it: a replayed graph must be launched on the current stream")
                del y

    def _check_inside_user_capture(self, ctx):
        """Called inside the caller's own torch.cuda.graph capture, the op must queue cuDNN's work on the
        capturing stream (so it is recorded into the caller's graph), not capture or replay its own."""
        m = ctx.module
        x = torch.zeros(GRAPH_X, device="cuda")
        w = _weight(ctx, "ugraph-w", (GRAPH_K, GRAPH_X[1], 3, 3))
        values = [_rand(ctx, f"ugraph-v{i}", GRAPH_X) for i in range(3)]
        with math_of("strict"), launch_cache(m, True):
            warm = torch.cuda.Stream()
            warm.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(warm):  # plans made (and the op's own graph) before the capture, as torch asks
                for _ in range(3):
                    m.conv2d(x, w, 1, 1)
            torch.cuda.current_stream().wait_stream(warm)
            torch.cuda.synchronize()
            graph = torch.cuda.CUDAGraph()
            try:
                with torch.cuda.graph(graph):
                    y = m.conv2d(x, w, 1, 1)
            except Exception as e:
                raise CheckFailure(f"streams: conv2d inside torch.cuda.graph capture failed: {type(e).__name__}: "
                                   f"{str(e).splitlines()[0][:300]}") from None
            for i, v in enumerate(values):
                x.copy_(v)
                graph.replay()
                torch.cuda.synchronize()
                assert_rel_error(y, _reference(v, w, 1, 1, 1), TOL["strict"],
                                 f"streams: replay {i + 1} of a torch.cuda.graph that captured conv2d (the op's work "
                                 "must be queued on the capturing stream, the current one)")

    # --- threads and streams -------------------------------------------------------------------
    def _check_threads(self, ctx):
        """Several Python threads, each on its own stream and shapes: every result right, and the
        counts add up (each thread's first call per key misses, the rest hit)."""
        m = ctx.module
        threads, fwd_calls, bwd_calls = 6, 8, 4
        jobs = []
        for t in range(threads):
            x = _rand(ctx, f"thr-x{t}", (1 + t % 3, 3 + t, 10 + t, 12 + 2 * t))
            w = _weight(ctx, f"thr-w{t}", (4 + t, 3 + t, 3, 3))
            y_ref = _reference(x, w, 1, 1, 1)
            g = _rand(ctx, f"thr-g{t}", tuple(y_ref.shape))
            gx_ref, _ = _reference_grads(x, w, g, 1, 1, 1)
            jobs.append((x, w, g, y_ref, gx_ref))
        torch.cuda.synchronize()
        results: list = [None] * threads
        errors: list = []
        start = threading.Barrier(threads)

        def work(t):
            x, w, g, _, _ = jobs[t]
            try:
                stream = torch.cuda.Stream()
                stream.wait_stream(torch.cuda.default_stream())
                start.wait()
                with torch.cuda.stream(stream):
                    ys = [m.conv2d(x, w, 1, 1) for _ in range(fwd_calls)]
                    gxs = [m.conv2d_backward_input(g, w, tuple(x.shape), 1, 1) for _ in range(bwd_calls)]
                stream.synchronize()
                results[t] = (ys, gxs)
            except Exception as e:  # reported by the main thread
                errors.append(f"thread {t}: {type(e).__name__}: {str(e).splitlines()[0][:300]}")

        m.cache_clear()
        with math_of("strict"):
            pool = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
            for th in pool:
                th.start()
            for th in pool:
                th.join(timeout=300)
        torch.cuda.synchronize()
        if errors:
            raise CheckFailure("threads: " + "; ".join(errors[:3]))
        for t, (ys, gxs) in enumerate(results):
            for i, y in enumerate(ys):
                assert_rel_error(y, jobs[t][3], TOL["strict"], f"threads: thread {t}, conv2d call {i}")
            for i, gx in enumerate(gxs):
                assert_rel_error(gx, jobs[t][4], TOL["strict"], f"threads: thread {t}, backward_input call {i}")
        s = self._stats(ctx)
        keys, calls = 2 * threads, threads * (fwd_calls + bwd_calls)
        if (s["misses"], s["hits"], s["size"]) != (keys, calls - keys, keys):
            raise CheckFailure(f"threads: {threads} threads made {calls} calls on {keys} different keys, so "
                               f"{keys} misses, {calls - keys} hits and {keys} plans were expected; got {s}")

    def _check_stream(self, ctx):
        """The op must run on the caller's current stream. The input is filled on a side stream after
        a long sleep there: run on that stream, the op waits for it; run anywhere else, it reads zeros."""
        m = ctx.module
        x = _rand(ctx, "stream-x", (2, 8, 20, 20))
        w = _weight(ctx, "stream-w", (8, 8, 3, 3))
        expected = _reference(x, w, 1, 1, 1)
        with math_of("strict"):
            m.conv2d(torch.zeros_like(x), w, 1, 1)  # the plan (and the handle) exist, made on the default stream
            torch.cuda.synchronize()
            for attempt in range(2):
                side = torch.cuda.Stream()
                late = torch.zeros_like(x)
                torch.cuda.synchronize()
                with torch.cuda.stream(side):
                    torch.cuda._sleep(100_000_000)  # tens of milliseconds of work queued first
                    late.copy_(x)
                    y = m.conv2d(late, w, 1, 1)
                torch.cuda.synchronize()
                assert_rel_error(y, expected, TOL["strict"],
                                 f"streams: conv2d called on a side stream (attempt {attempt + 1}) read its input "
                                 "before that stream wrote it, so it did not run on the current stream; bind "
                                 "the handle to the current stream (cudnnSetStream) on every call")

    # --- input checks --------------------------------------------------------------------------
    def _input_checks(self) -> list[tuple[str, object, tuple[str, ...], bool]]:
        def x(shape=(1, 3, 8, 8), **kw):
            return torch.randn(shape, device="cuda", **kw)

        def w(shape=(4, 3, 3, 3), **kw):
            return torch.randn(shape, device="cuda", **kw)

        def conv(*a, **kw):
            return lambda ctx: ctx.module.conv2d(*[t() if callable(t) else t for t in a], **kw)

        return [
            ("a CPU tensor x", lambda ctx: ctx.module.conv2d(torch.randn(1, 3, 8, 8), torch.randn(4, 3, 3, 3)), ("x",), False),
            ("an int32 x", conv(lambda: torch.ones(1, 3, 8, 8, dtype=torch.int32, device="cuda"),
                                lambda: torch.ones(4, 3, 3, 3, dtype=torch.int32, device="cuda")), ("x",), True),
            ("a 3-d x", conv(lambda: x((3, 8, 8)), w), ("x",), True),
            ("weight of another dtype", conv(x, lambda: w(dtype=torch.float64)), ("weight",), True),
            ("weight with other input channels", conv(x, lambda: w((4, 5, 3, 3))), ("weight",), True),
            ("stride 0", conv(x, w, 0), ("stride",), True),
            ("padding -1", conv(x, w, 1, -1), ("padding",), True),
            ("dilation 0", conv(x, w, 1, 0, 0), ("dilation",), True),
            ("stride with 3 values", conv(x, w, (1, 1, 1)), ("stride",), True),
            ("a kernel larger than the padded input", conv(lambda: x((1, 3, 4, 4)), lambda: w((4, 3, 7, 7))),
             ("kernel", "larger"), True),
            # x of 2^28 elements (1 GiB, never read) and a 1x1 kernel to 8 channels: exactly 2^31 outputs,
            # refused before cuDNN is asked (whose status names no limit)
            ("an output of 2^31 elements", conv(lambda: torch.empty(1, 1, 16384, 16384, device="cuda"),
                                                lambda: w((8, 1, 1, 1))), ("2^31",), True),
            ("grad_output of the wrong shape", lambda ctx: ctx.module.conv2d_backward_input(
                torch.randn(1, 4, 5, 5, device="cuda"), w(), (1, 3, 8, 8), 1, 0), ("grad_output",), True),
            ("grad_output of another dtype", lambda ctx: ctx.module.conv2d_backward_weight(
                torch.randn(1, 4, 6, 6, device="cuda", dtype=torch.float64), x(), (4, 3, 3, 3), 1, 0),
             ("grad_output",), True),
        ]

    def _check_usable_after_errors(self, ctx):
        """Errors must leave the op usable: no lock held, no half-built plan cached."""
        for what, fn, names, _ in self._input_checks():
            try:
                fn(ctx)
            except Exception:
                pass
        x = _rand(ctx, "after-x", (3, 6, 17, 10))
        w = _weight(ctx, "after-w", (5, 6, 3, 2))
        self._expect_forward(ctx, x, w, (2, 1), (1, 0), (1, 1), "strict", "input_checks[a valid call after the errors]")

    # --- descriptors (no GPU needed) -----------------------------------------------------------
    def _check_describe(self, ctx):
        configs = [((2, 8, 19, 23), (12, 8, k, k), (s, s), (p, p), (1, 1)) for k, s, p in CASES]
        configs += _random_configs(ctx.seed_for("describe"), 20)
        for xs, ws, s, p, d in configs:
            for dtype in (torch.float32, torch.float64):
                got = tuple(ctx.module.describe(xs, ws, s, p, d, dtype))
                want = (xs[0], ws[0], _out(xs[2], ws[2], s[0], p[0], d[0]), _out(xs[3], ws[3], s[1], p[1], d[1]))
                if got != want:
                    raise CheckFailure(f"describe: x {xs}, weight {ws}, stride {s}, padding {p}, dilation {d}, {dtype}: "
                                       f"output shape {got}, expected {want}")

    def _check_status_errors(self, ctx):
        """Parameters cuDNN itself rejects: its status must become a Python error that names it."""
        d = ctx.module.describe
        for what, args in (("stride 0", (0, 1, 1)), ("padding -1", (1, -1, 1)), ("dilation 0", (1, 1, 0))):
            expect_error(d, (2, 3, 9, 9), (4, 3, 3, 3), *args, names=("CUDNN_STATUS_BAD_PARAM",),
                         what=f"describe with {what} (cuDNN rejects it)")

    # --- the list ------------------------------------------------------------------------------
    def checks(self) -> list[Check]:
        checks = CheckList()
        checks.add("descriptors[output shapes]", self._check_describe, needs_gpu=False)
        checks.add("descriptors[cuDNN status errors]", self._check_status_errors, needs_gpu=False)
        for mode in ("strict", "tf32"):
            for k, s, p in CASES:
                checks.add(f"forward[{mode}-{_name(k, s, p)}]",
                           lambda ctx, k=k, s=s, p=p, mode=mode: self._check_case(ctx, k, s, p, mode))
        checks.add("forward[float64-k3s2p1]", lambda ctx: self._check_case(ctx, 3, 2, 1, "float64"))
        checks.add("forward[random shapes]", lambda ctx: self._check_random_forward(ctx, "forward[random shapes]"))
        checks.add("forward[random shapes, tf32]",
                   lambda ctx: self._check_random_forward(ctx, "forward[random shapes, tf32]", mode="tf32"))
        checks.add("forward[random shapes, float64]",
                   lambda ctx: self._check_random_forward(ctx, "forward[random shapes, float64]", torch.float64, "float64"))
        checks.add("forward[non-contiguous]", self._check_noncontiguous)
        checks.add("forward[output poisoned]", self._check_poisoned)
        checks.add("forward[mode=heuristic]", lambda ctx: self._check_modes(ctx, "heuristic"))
        checks.add("forward[mode=uncached]", lambda ctx: self._check_modes(ctx, "uncached"))
        checks.add("forward[plans with a workspace]", lambda ctx: self._check_workspace(ctx, False))
        # the profiler's checks (seconds to start) are in the full grade only, not in the quick loop
        checks.add("forward[no PyTorch convolution ran]", self._check_own_forward, slow=True)
        for mode in ("strict", "tf32"):
            for k, s, p in CASES:
                checks.add(f"backward[{mode}-{_name(k, s, p)}]",
                           lambda ctx, k=k, s=s, p=p, mode=mode: self._check_backward_case(ctx, k, s, p, mode))
        checks.add("backward[float64-k3s2p1]", lambda ctx: self._check_backward_case(ctx, 3, 2, 1, "float64"))
        checks.add("backward[random shapes]", lambda ctx: self._check_random_backward(ctx, "backward[random shapes]"))
        checks.add("backward[conv_transpose2d strict]", lambda ctx: self._check_transposed(ctx, "strict"))
        checks.add("backward[conv_transpose2d tf32]", lambda ctx: self._check_transposed(ctx, "tf32"))
        checks.add("backward[autograd]", self._check_autograd)
        checks.add("backward[gradcheck float64]", self._check_gradcheck)
        checks.add("backward[plans with a workspace]", lambda ctx: self._check_workspace(ctx, True))
        checks.add("backward[no PyTorch convolution ran]", self._check_own_backward, slow=True)
        checks.add("cache[second identical call hits]", self._check_hit)
        checks.add("cache[every key field]", self._check_key_fields)
        checks.add("cache[clear]", self._check_clear)
        checks.add("cache[bounded, least recently used evicted]", self._check_bounded)
        checks.add("cache[mode=uncached bypasses it]", self._check_uncached)
        checks.add("cache[graphs: repeated calls replay, reading new values]", self._check_graph_replay)
        checks.add("cache[graphs: a new output buffer never replays an old graph]", self._check_graph_new_output)
        checks.add("cache[graphs off and mode=uncached: no graph]", self._check_graphs_off)
        checks.add("threads[6 threads, own streams and shapes]", self._check_threads)
        checks.add("streams[runs on the current stream]", self._check_stream)
        checks.add("streams[a replayed graph runs on the current stream]", self._check_graph_side_stream)
        checks.add("streams[called inside torch.cuda.graph capture]", self._check_inside_user_capture)
        for what, fn, names, needs_gpu in self._input_checks():
            checks.add(f"input_checks[{what}]",
                       lambda ctx, fn=fn, names=names, what=what: expect_error(fn, ctx, names=names, what=what),
                       needs_gpu=needs_gpu)
        checks.add("input_checks[a valid call after the errors]", self._check_usable_after_errors)
        return checks

    # --- the bad-input audit (tests/test_input_audit.py) -----------------------------------------
    def audit_calls(self, device, dtype) -> list[AuditCall]:
        """The four tensor ops (conv2d in every mode), float64, on one convolution and its transpose.
        cuDNN's descriptors take no empty dim, so an empty tensor must be rejected."""
        def r(*shape, seed, scale=1.0):
            return audit_randn(*shape, device=device, dtype=dtype, seed=seed, scale=scale)

        x, w = r(2, 3, 7, 6, seed=1), r(4, 3, 3, 2, seed=2, scale=0.3)
        return _calls(x, w, ((2, 1), (1, 1), (1, 2)), r)  # x (2, 3, 7, 6) -> (2, 4, 4, 6)

    def random_calls(self, g, device, dtype) -> list[AuditCall]:
        """Every op on a convolution of random geometry (no dimension empty)."""
        seed = int(torch.randint(0, 2**31, (1,), generator=g))
        (xs, ws, *conv), = _random_configs(seed, 1)

        def r(*shape, seed: int, scale=1.0, base=seed):
            return audit_randn(*shape, device=device, dtype=dtype, seed=base + seed, scale=scale)

        return _calls(r(*xs, seed=1), r(*ws, seed=2, scale=(ws[1] * ws[2] * ws[3]) ** -0.5), tuple(conv), r)

    def kernel_rule(self):
        # cuDNN's kernels are the point; PyTorch's convolution (which would call cuDNN) may not run
        return KernelRule(library=True, forbidden_ops=("conv", "cudnn"))

    # --- speed ---------------------------------------------------------------------------------
    def benchmark(self) -> Benchmark:
        def make_inputs(seed: int):
            g = torch.Generator(device="cuda")
            g.manual_seed(seed)
            tensors = []
            for (n, c, h, w), k in BENCH:
                tensors.append(torch.randn((n, c, h, w), generator=g, device="cuda"))
                tensors.append(torch.randn((k, c, 3, 3), generator=g, device="cuda") * (c * 9) ** -0.5)
            return tuple(tensors)

        return Benchmark(
            label="strict fp32, 3x3 pad 1: 32x512x7x7 512->512 + 32x64x56x56 64->64",
            make_inputs=make_inputs,
            call=lambda mod, inp: [mod.conv2d(inp[0], inp[1], 1, 1), mod.conv2d(inp[2], inp[3], 1, 1)],
            baseline=lambda inp: [F.conv2d(inp[0], inp[1], None, 1, 1), F.conv2d(inp[2], inp[3], None, 1, 1)],
            work=float(sum(conv_flops(x, k) for x, k in BENCH)),
            unit="FLOP",
            reference=whole_reference(lambda inp: [_reference(inp[2 * i], inp[2 * i + 1], 1, 1, 1)
                                                   for i in range(len(BENCH))]),
            tolerance=lambda inp: [TOL["strict"]] * len(BENCH),
            flops=float(sum(conv_flops(x, k) for x, k in BENCH)),
            min_bytes=float(sum(4 * (n * c * h * w + k * c * 9 + n * k * h * w) for (n, c, h, w), k in BENCH)),
        )


def _calls(x, w, conv, r) -> list[AuditCall]:
    """Every tensor op on the convolution of x and w (stride, padding, dilation `conv`), and its
    transpose; `r(*shape, seed=)` draws the output gradient."""
    stride, padding, dilation = conv
    n, _, h, wd = x.shape
    g = r(n, w.shape[0], _out(h, w.shape[2], stride[0], padding[0], dilation[0]),
          _out(wd, w.shape[3], stride[1], padding[1], dilation[1]), seed=3)
    params = ("stride", "padding", "dilation", "mode")
    calls = [AuditCall("conv2d", (x, w, *conv, mode), ("x", "weight", *params),
                       lambda x, w, s, p, d, m: _reference(x, w, s, p, d), label=f"conv2d(mode={mode})")
             for mode in ("benchmark", "heuristic", "uncached")]
    calls.append(AuditCall(
        "conv2d_backward_input", (g, w, list(x.shape), *conv, "heuristic"),
        ("grad_output", "weight", "input_size", *params),
        lambda g, w, size, s, p, d, m: torch.nn.grad.conv2d_input(size, w.double(), g.double(), s, p, d)))
    calls.append(AuditCall(
        "conv2d_backward_weight", (g, x, list(w.shape), *conv, "uncached"),
        ("grad_output", "x", "weight_size", *params),
        lambda g, x, size, s, p, d, m: torch.nn.grad.conv2d_weight(x.double(), size, g.double(), s, p, d)))
    # the transpose of the same convolution: g -> the shape of x (output_padding makes up what the
    # stride dropped)
    out_pad = tuple(int(size - ((o - 1) * s - 2 * p + d * (k - 1) + 1))
                    for size, o, s, p, d, k in zip(x.shape[2:], g.shape[2:], stride, padding, dilation, w.shape[2:]))
    calls.append(AuditCall(
        "conv_transpose2d", (g, w, stride, padding, out_pad, dilation, "benchmark"),
        ("x", "weight", "stride", "padding", "output_padding", "dilation", "mode"),
        lambda x, w, s, p, op, d, m: F.conv_transpose2d(x.double(), w.double(), None, s, p, op, 1, d),
        group="backward"))  # graded with the backward checks: it is the same cuDNN backward-data call
    return calls


def conv_flops(x_shape, k, ks=3) -> int:
    n, c, h, w = x_shape  # stride 1, padding 1: the output is h x w
    return 2 * n * k * c * ks * ks * h * w


SPEC = CudnnConvSpec(
    exercise="10_cudnn_conv",
    title="cuDNN convolution with cached plans",
    module="cudnn_conv.py",
    points={"descriptors": 1, "forward": 3, "backward": 3, "cache": 2, "threads": 1, "streams": 1,
            "input_checks": 1, "performance": 3},
    perf_requires=("forward",),
    # the stream checks call the Python wrapper: F.conv2d there would run on the current stream too
    requires={"streams": ("forward[no PyTorch convolution ran]",)},
    # strict fp32, both shapes: 701 us (ours) against 675 us (F.conv2d, cudnn.benchmark) on an H100
    # with cuDNN 9.19 and torch 2.11, 2026-11-22
    solution_vs_baseline=2.07,  # H100, 2026-11-23 grading run: 55.2 vs 27.8 TFLOP/s (see docs/performance.md)
)
