"""Grading of exercise 08: Conv2d + BatchNorm2d (eval) + ReLU in one kernel.

The reference is eager PyTorch (F.conv2d, F.batch_norm in eval mode, F.relu) in float64 on the same
inputs. Comparisons are normwise (‖actual - expected‖ / ‖expected‖): version 1 (strict fp32) 1e-5 for
float32 (the order of the C*R*S-long sums is the kernel's choice), 1e-12 for float64; version 2 (TF32
tensor cores, on GPUs of compute capability 8.0 and newer) a tolerance derived from TF32's precision
(tf32_tolerance below), with inputs near 1e5 and 1e-6 that FP16 cannot hold.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from grader.verify.checks import (CheckFailure, assert_own_kernels, assert_rel_error, expect_error, kernels_launched, poison,
                                  require_capability, unmodified)
from grader.verify import precision as probes
from grader.verify import sass
from grader.verify.observe import KernelRule
from grader.verify.spec import (NEGATIVE, SIGNS, ZERO, AuditCall, Benchmark, Check, CheckList, Context, Edge, ModuleOptions,
                                Spec, audit_randn, conv_empty_kernel, conv_padding_edges, conv_smallest_input,
                                torch_defaults, values)
from grader.specs.ex06_conv2d import RANGE_SCALES, TENSOR_CORE_CAPABILITY, random_case, tf32_bound, whole_reference
from grader.specs.conv_bn import SHAPES as TRAIN_SHAPES
from grader.specs.conv_bn import Shape, conv_bn_modules

KERNEL = "conv_bn_relu_kernel"  # version 1, strict fp32
TF32_KERNEL = "conv_bn_relu_tf32_kernel"  # version 2, TF32 tensor cores
STRICT, TF32 = 1, 2  # the versions
TF32_GROUP = "tensor_cores_tf32"
# version 2's instruction, in the code the GPU runs (grader.verify.sass)
TF32_INSTRUCTION = sass.MmaInstruction("mma", "tf32", (TF32_KERNEL,))
TOL = {torch.float32: 1e-5, torch.float64: 1e-12}
RANDOM_TF32_CASES = 6

SHAPES = TRAIN_SHAPES + (
    Shape("n1-k1", 1, 5, 9, 7, 1, 3, 3, padding=(1, 1), bias=True),
    Shape("k70-5x5", 2, 33, 20, 23, 70, 5, 5, stride=(2, 3), padding=(2, 2), bias=True),
    Shape("k130-1x3", 5, 9, 31, 17, 130, 1, 3, padding=(0, 4), dilation=(1, 3)),
    Shape("pixels-off-128", 1, 16, 11, 13, 64, 3, 3),
)


# Version 2's paths for the precision probes (grader.verify.precision: values near 1e5 and 1e-6, positive
# operands), K = c r s >= grader.verify.precision.POSITIVE_MIN_K: 16-byte weight loads (K % 4 == 0) and 4-byte
# ones (K odd), each kernel instantiation (kVecB). The first path's checks keep the probe's plain name.
PROBE_SHAPES = (
    ("16-byte weight loads", Shape("probe, K % 4 == 0", 2, 64, 15, 13, 40, 3, 3, padding=(1, 1), bias=True)),
    ("K odd", Shape("probe, K odd", 2, 67, 9, 12, 33, 3, 3, stride=(1, 2), padding=(1, 1), bias=True)),
)


def make_case(g: torch.Generator, sh: Shape, dtype=torch.float32):
    def rnd(*size, scale=1.0):
        return torch.randn(size, generator=g, device="cuda", dtype=torch.float64) * scale

    fan_in = sh.c * sh.r * sh.s
    t = {
        "x": rnd(sh.n, sh.c, sh.h, sh.w),
        "weight": rnd(sh.k, sh.c, sh.r, sh.s, scale=1 / fan_in**0.5),
        "bias": rnd(sh.k, scale=0.2) if sh.bias else None,
        "bn_weight": 0.5 + torch.rand(sh.k, generator=g, device="cuda", dtype=torch.float64),
        "bn_bias": rnd(sh.k, scale=0.3),
        "running_mean": rnd(sh.k, scale=0.2),
        "running_var": 0.3 + torch.rand(sh.k, generator=g, device="cuda", dtype=torch.float64),
    }
    return {k: (v.to(dtype) if v is not None else None) for k, v in t.items()}


def reference(t: dict, sh: Shape, eps: float) -> torch.Tensor:
    d = {k: (v.double() if v is not None else None) for k, v in t.items()}
    z = F.conv2d(d["x"], d["weight"], d["bias"], sh.stride, sh.padding, sh.dilation)
    return F.relu(F.batch_norm(z, d["running_mean"], d["running_var"], d["bn_weight"], d["bn_bias"], False, 0.0, eps))


# --- version 2, TF32 tensor cores: a tolerance derived from the precision (as 06's version 3) ------
# Version 2 computes acc = conv(x, weight) on TF32 tensor cores and y = relu(scale * acc + shift) in
# float32, with BatchNorm (and the conv's bias) folded into scale = gamma / sqrt(running_var + eps) and
# shift = beta + (bias - running_mean) * scale. The error of scale * acc is scale times the error of acc,
# which is the error TF32 makes on the convolution with the folded weight, weight * scale (each product
# x w scale is rounded as x w is, times scale): exercise 06's per-output bound (tf32_bound) applies to
# conv(x, weight * scale) + shift as it stands, the float32 multiply-add by its last term. The ReLU adds
# no error (|relu(a) - relu(b)| <= |a - b|), so ||y - ref|| <= ||bound||, compared with ||ref|| of the
# ReLU's output (about 1 / sqrt(2) of the pre-activation's: the tolerance is about 5 u sqrt(2), 3.4e-3
# on random data, where TF32 lands near 3e-4 and a dropped K step or a wrong fragment near 1e-1 and above;
# tests/test_fused_tensor_cores.py emulates TF32 and the dropped step, known-wrong c_fragment_rows_swapped plants
# the wrong fragment).
def folded(t: dict, eps: float):
    """BatchNorm (eval) and the conv's bias folded into the convolution, in float64: (weight * scale, shift)."""
    d = {k: (v.detach().double() if v is not None else None) for k, v in t.items()}
    scale = d["bn_weight"] / torch.sqrt(d["running_var"] + eps)
    bias = d["bias"] if d["bias"] is not None else torch.zeros_like(scale)
    return d["weight"] * scale[:, None, None, None], d["bn_bias"] + (bias - d["running_mean"]) * scale


def tf32_tolerance(t: dict, stride, padding, dilation, eps: float) -> float:
    """The normwise relative error version 2 (TF32 tensor cores) may make on this layer (the bound above)."""
    weight, shift = folded(t, eps)
    pre, bound = tf32_bound(t["x"], weight, shift, stride, padding, dilation)
    norm = torch.linalg.vector_norm(F.relu(pre)).item()
    allowed = torch.linalg.vector_norm(bound).item()
    return allowed / norm if norm > 0 else allowed


def call(mod, t: dict, sh: Shape, eps: float = 1e-5, version: int | None = STRICT):
    return mod.conv_bn_relu_inference(t["x"], t["weight"], t["bias"], t["bn_weight"], t["bn_bias"], t["running_mean"],
                                      t["running_var"], eps, sh.stride, sh.padding, sh.dilation, version=version)


def check_case(ctx: Context, sh: Shape, dtype, what: str, eps: float = 1e-5, transform=None,
               version: int | None = STRICT, probe: probes.Probe | None = None) -> None:
    t = make_case(ctx.generator(what), sh, dtype)
    if transform is not None:
        t["x"] = transform(t["x"])
    if probe is not None and probe.kind == "range":  # x and the BatchNorm's affine map scaled alike: y scales too
        t = t | {k: probe.scaled(t[k]) for k in ("x", "bn_bias", "running_mean", "bias") if t[k] is not None}
    elif probe is not None:  # x, the weight and the conv's bias in [0.5, 1.5): every product positive
        g = ctx.generator(what + "-positive")
        t = t | {k: probe.draw(g, t[k].shape, dtype) for k in ("x", "weight", "bias") if t[k] is not None}
    expected = reference(t, sh, eps)
    poison(torch.empty(expected.numel() * 2, device="cuda", dtype=dtype))  # the allocator hands this out next
    with unmodified(**{k: v for k, v in t.items() if v is not None}):
        y = call(ctx.module, t, sh, eps, version)
    torch.cuda.synchronize()
    if y.dtype != dtype:
        raise CheckFailure(f"{what}: output dtype {y.dtype}, expected {dtype}")
    if version == TF32:
        assert_rel_error(y, expected, tf32_tolerance(t, sh.stride, sh.padding, sh.dilation, eps),
                         f"{what} (TF32 tensor cores: the README's How it is graded)")
    else:
        assert_rel_error(y, expected, TOL[dtype], what)


def check_one_kernel(ctx: Context, version: int = STRICT) -> None:
    """Fusion: one kernel launch, the version's own, and no memory beyond the output (no intermediate tensor)."""
    sh = SHAPES[0]
    t = make_case(ctx.generator("fused"), sh)
    kernel = TF32_KERNEL if version == TF32 else KERNEL
    assert_own_kernels(lambda: call(ctx.module, t, sh, version=version), (kernel,), f"version {version}")
    names = kernels_launched(lambda: call(ctx.module, t, sh, version=version))
    if len(names) != 1:
        raise CheckFailure(f"fusion: {len(names)} kernels ran ({', '.join(n[:40] for n in names)}); expected one")
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    y = call(ctx.module, t, sh, version=version)
    torch.cuda.synchronize()
    extra = torch.cuda.max_memory_allocated() - base - y.numel() * y.element_size()
    if extra > (1 << 20):
        raise CheckFailure(f"fusion: the op allocated {extra / 2**20:.1f} MiB beyond its output; the convolution's "
                           "result must not be written to memory before BatchNorm and ReLU")


class ConvBNReLUInferenceSpec(Spec):
    def checks(self) -> list[Check]:
        checks = CheckList()
        for sh in SHAPES:
            name = f"forward[float32-{sh.name}]"
            checks.add(name, lambda ctx, sh=sh, n=name: check_case(ctx, sh, torch.float32, n))
        for sh in (SHAPES[5], SHAPES[7]):
            name = f"forward[float64-{sh.name}]"
            checks.add(name, lambda ctx, sh=sh, n=name: check_case(ctx, sh, torch.float64, n))
        checks.add("forward[eps=0.1]", lambda ctx: check_case(ctx, SHAPES[5], torch.float32, "forward[eps=0.1]", 0.1))
        checks.add("forward[channels_last x]", lambda ctx: check_case(
            ctx, SHAPES[3], torch.float32, "forward[channels_last x]",
            transform=lambda x: x.contiguous(memory_format=torch.channels_last)))
        checks.add("forward[empty batch]", self._check_empty)
        # the profiler (seconds to start): in the full grade only, not in the quick loop
        checks.add("forward[one kernel, no intermediate]", check_one_kernel, slow=True)
        checks.add("forward[module]", self._check_module)
        # under grading's math state (TF32 off): a default that ignores torch.backends.cudnn.allow_tf32 fails
        checks.add("forward[version=None with allow_tf32 off: strict fp32]", lambda ctx: check_case(
            ctx, SHAPES[7], torch.float32, "forward[version=None with allow_tf32 off: strict fp32]", version=None))
        self._tf32_checks(checks)
        self._input_checks(checks)
        return checks

    def _tf32_checks(self, checks: CheckList) -> None:
        """Version 2 (TF32 tensor cores), float32 only: every shape, random ones, eps, a channels_last x, an
        empty batch, inputs near 1e5 and 1e-6 (FP16 cannot hold them, TF32 can), one kernel and no
        intermediate. Below compute capability 8.0 (a T4) not run, at no cost."""
        def add(name, run, slow=False):
            def run_here(ctx):
                require_capability(*TENSOR_CORE_CAPABILITY, f"version {TF32} (TF32 tensor cores)")
                return run(ctx)
            checks.add(f"{TF32_GROUP}[{name}]", run_here, slow=slow)

        add("one kernel, no intermediate", lambda ctx: check_one_kernel(ctx, TF32), slow=True)
        for sh in SHAPES:
            name = f"{TF32_GROUP}[float32-{sh.name}]"
            add(f"float32-{sh.name}", lambda ctx, sh=sh, n=name: check_case(ctx, sh, torch.float32, n, version=TF32))
        for i in range(RANDOM_TF32_CASES):
            name = f"{TF32_GROUP}[random shape {i}]"
            add(f"random shape {i}", lambda ctx, n=name: check_case(
                ctx, _shape_of(random_case(ctx.generator(n, device="cpu"), n)), torch.float32, n, version=TF32))
        add("eps=0.1", lambda ctx: check_case(ctx, SHAPES[5], torch.float32, f"{TF32_GROUP}[eps=0.1]", 0.1,
                                              version=TF32))
        add("channels_last x", lambda ctx: check_case(
            ctx, SHAPES[3], torch.float32, f"{TF32_GROUP}[channels_last x]", version=TF32,
            transform=lambda x: x.contiguous(memory_format=torch.channels_last)))
        add("empty batch", lambda ctx: self._check_empty(ctx, TF32))
        for i, (path, sh) in enumerate(PROBE_SHAPES):
            for probe in probes.PROBES:
                name = probes.check_name(TF32_GROUP, probe, None if i == 0 else path)
                add(name[len(TF32_GROUP) + 1:-1], lambda ctx, sh=sh, p=probe, pa=path: check_case(
                    ctx, sh, torch.float32, probes.what(TF32_GROUP, p, pa), version=TF32, probe=p))
        # last: a wrong precision is reported by the value checks first
        add(f"{TF32_INSTRUCTION.describe()} in its kernels' machine code",
            sass.InstructionCheck(TF32_INSTRUCTION))

    def _check_empty(self, ctx: Context, version: int = STRICT) -> None:
        sh = Shape("empty", 0, 4, 8, 8, 6, 3, 3, padding=(1, 1))
        t = make_case(ctx.generator("empty"), sh)
        y = call(ctx.module, t, sh, version=version)
        torch.cuda.synchronize()
        if tuple(y.shape) != (0, 6, 8, 8):
            raise CheckFailure(f"forward[empty batch]: shape {tuple(y.shape)}, expected (0, 6, 8, 8)")

    # the drop-in module, built by from_modules from every kind of Conv2d and BatchNorm2d: each
    # constructor parameter varied alone from (8 -> 24, 3x3, stride 2, padding 1, bias, eps 1e-3)
    MODULES = {"base": {}, "stride (1, 2)": {"stride": (1, 2)}, "padding (0, 2)": {"padding": (0, 2)},
               "dilation 2": {"dilation": 2}, "dilation (1, 3)": {"dilation": (1, 3)}, "no bias": {"bias": False},
               "kernel 1x3": {"kernel_size": (1, 3)}, "eps 0.1": {"eps": 0.1}}

    def _check_module(self, ctx: Context) -> None:
        g = ctx.generator("module")
        torch.manual_seed(int(torch.randint(0, 2**31, (1,), generator=g, device="cuda")))
        for label, change in self.MODULES.items():
            conv_args = {"kernel_size": 3, "stride": 2, "padding": 1, "dilation": 1, "bias": True}
            conv_args.update({k: v for k, v in change.items() if k != "eps"})
            conv = torch.nn.Conv2d(8, 24, **conv_args).cuda()
            bn = torch.nn.BatchNorm2d(24, eps=change.get("eps", 1e-3)).cuda()
            with torch.no_grad():
                bn.running_mean.uniform_(-0.5, 0.5)
                bn.running_var.uniform_(0.5, 2.0)
                bn.weight.uniform_(0.5, 1.5)
                bn.bias.uniform_(-0.5, 0.5)
            seq = torch.nn.Sequential(conv, bn, torch.nn.ReLU()).eval()
            fused = ctx.module.ConvBNReLUInference.from_modules(conv, bn)
            x = torch.randn(3, 8, 21, 19, generator=g, device="cuda")
            with torch.no_grad():
                assert_rel_error(fused(x), seq(x), TOL[torch.float32],
                                 f"forward[module from Conv2d and BatchNorm2d, {label}, against Sequential in eval]")

    def module_options(self) -> list[ModuleOptions]:
        """ConvBNReLUInference.from_modules, every option of the Conv2d and the BatchNorm2d it takes (in
        eval: the module is for inference, where momentum must change nothing); the modes and the
        BatchNorm2d without affine parameters or running statistics it does not support are refused."""
        return [ModuleOptions(
            "ConvBNReLUInference.from_modules", "forward",
            base={"bias": True, "padding": 2, "padding_mode": "zeros", "eps": 1e-5, "momentum": 0.1, "affine": True,
                  "track_running_stats": True},
            options={"bias": values(False), "padding": values("same", "valid"),
                     "padding_mode": values("reflect", "replicate", "circular",
                                            refused=("reflect", "replicate", "circular")),
                     "eps": values(1e-3, 0.1), "momentum": values(0.0, None, 1.0),
                     "affine": values(False, refused=(False,)),
                     "track_running_stats": values(False, refused=(False,))},
            check=_check_from_modules)]

    def _input_checks(self, checks: CheckList) -> None:
        def run(mod, x, w, bn_w=None, stride=1, padding=1, version=STRICT):
            k = w.shape[0]
            ones = torch.ones(k, device=w.device, dtype=w.dtype)
            return mod.conv_bn_relu_inference(x, w, None, ones if bn_w is None else bn_w, ones * 0, ones * 0, ones,
                                              1e-5, stride, padding, 1, version=version)

        def w(c=4, k=6, dtype=torch.float32, device="cuda"):
            return torch.randn(k, c, 3, 3, device=device, dtype=dtype)

        def x(c=4, dtype=torch.float32, device="cuda"):
            return torch.randn(2, c, 9, 9, device=device, dtype=dtype)

        cases = [
            ("cpu x", lambda m: run(m, x(device="cpu"), w(device="cpu")), ("x",)),  # runs on CPU-only machines too
            ("integer x", lambda m: run(m, x().to(torch.int32), w()), ("x",)),
            ("3-D x", lambda m: run(m, x()[0], w()), ("x",)),
            ("weight channels", lambda m: run(m, x(c=4), w(c=5)), ("weight",)),
            ("weight dtype", lambda m: run(m, x(), w(dtype=torch.float64)), ("weight",)),
            ("bn_weight size", lambda m: run(m, x(), w(), bn_w=torch.ones(5, device="cuda")), ("bn_weight",)),
            ("stride 0", lambda m: run(m, x(), w(), stride=0), ("stride",)),
            ("x smaller than the kernel", lambda m: run(m, x()[:, :, :2, :2], w(), padding=0), ("x",)),
            ("version 3", lambda m: run(m, x(), w(), version=3), ("version",)),
            # version 2 rounds to TF32, a float32 format: a float64 x is refused, never rounded silently
            ("a float64 x with version 2", lambda m: run(m, x(dtype=torch.float64), w(dtype=torch.float64),
                                                         version=TF32), ("x",)),
        ]
        for label, fn, names in cases:
            checks.add(f"input_checks[{label}]",
                       lambda ctx, fn=fn, names=names, label=label: expect_error(fn, ctx.module, names=names, what=label),
                       needs_gpu=label != "cpu x")

    # --- the bad-input audit (tests/test_input_audit.py) -----------------------------------------
    def audit_calls(self, device, dtype) -> list[AuditCall]:
        """With and without bias; an empty height or width of x leaves no output (rejected)."""
        def r(*shape, seed, scale=1.0, offset=0.0):
            return audit_randn(*shape, device=device, dtype=dtype, seed=seed, scale=scale, offset=offset)

        x, w, b = r(2, 3, 6, 5, seed=1), r(4, 3, 3, 3, seed=2, scale=0.3), r(4, seed=3, scale=0.2)
        bn = (r(4, seed=4, scale=0.2, offset=1.0), r(4, seed=5, scale=0.3), r(4, seed=6, scale=0.2),
              r(4, seed=7, scale=0.1, offset=1.0))  # bn_weight, bn_bias, running_mean, running_var (> 0)
        # and a pointwise (1x1, stride 1, no padding) convolution, the other kind a model is made of: the
        # generated checks (which kernels ran among them) meet it in every run
        x1, w1 = r(2, 3, 5, 4, seed=8), r(4, 3, 1, 1, seed=9, scale=0.5)
        # without a bias, stride 2 and 3 with padding on both axes (a dilated 3 x 4 kernel, 3 x 2 outputs): x one
        # pixel below its smallest then leaves (-1) / stride = 0 in C++'s division, an output of 1 where
        # PyTorch's floor leaves none (conv_smallest_input's refused edges)
        x2, w2 = r(2, 3, 7, 5, seed=10), r(4, 3, 3, 4, seed=11, scale=0.3)
        geometries = [(x, w, b, ((1, 2), (1, 0), (1, 1))), (x2, w2, None, ((2, 3), (1, 1), (2, 1)))]
        calls = ([_call(xg, wg, bias, bn, conv) for xg, wg, bias, conv in geometries]
                 + [_call(x1, w1, b, bn, ((1, 1), (0, 0), (1, 1)), "pointwise")])
        # version 2 (float32 only), the same geometries
        x1, w1, b = (t.float() for t in (x1, w1, b))
        bn = tuple(t.float() for t in bn)
        return calls + ([_call(xg.float(), wg.float(), None if bias is None else bias.float(), bn, conv, version=TF32)
                         for xg, wg, bias, conv in geometries]
                        + [_call(x1, w1, b, bn, ((1, 1), (0, 0), (1, 1)), "pointwise", version=TF32)])

    def random_calls(self, g, device, dtype) -> list[AuditCall]:
        """Per version, a convolution of random geometry (exercise 06's generator), with bias or not
        (version 2 in float32)."""
        calls = []
        for version in (STRICT, TF32):
            c = random_case(g, f"random {version}")
            seed = int(torch.randint(0, 2**31, (1,), generator=g))
            d = torch.float32 if version == TF32 else dtype

            def r(*shape, k, scale=1.0, offset=0.0):
                return audit_randn(*shape, device=device, dtype=d, seed=seed + k, scale=scale, offset=offset)

            x = r(c.n, c.cin, c.h, c.w, k=0)
            w = r(c.cout, c.cin, c.kh, c.kw, k=1, scale=(c.cin * c.kh * c.kw) ** -0.5)
            bn = (r(c.cout, k=3, scale=0.2, offset=1.0), r(c.cout, k=4, scale=0.3), r(c.cout, k=5, scale=0.2),
                  r(c.cout, k=6, scale=0.1, offset=1.0))
            calls.append(_call(x, w, r(c.cout, k=2, scale=0.2) if c.bias else None, bn,
                               (c.stride, c.padding, c.dilation), version=version))
        return calls

    def kernel_rule(self):
        return KernelRule((KERNEL, TF32_KERNEL))

    # --- speed ---------------------------------------------------------------------------------
    def benchmark(self) -> Benchmark:
        n, c, h, w, k = 32, 64, 56, 56, 64
        sh = Shape("bench", n, c, h, w, k, 3, 3, padding=(1, 1))

        def make_inputs(seed: int):
            g = torch.Generator(device="cuda")
            g.manual_seed(seed)
            return (make_case(g, sh),)

        def baseline(inp):
            t = inp[0]
            z = F.conv2d(t["x"], t["weight"], None, 1, 1)
            return F.relu(F.batch_norm(z, t["running_mean"], t["running_var"], t["bn_weight"], t["bn_bias"], False,
                                       0.0, 1e-5))

        return Benchmark(
            label="fp32 (TF32 off) eval, 32x64x56x56, 64->64, 3x3, pad 1",
            make_inputs=make_inputs,
            call=lambda mod, inp: call(mod, inp[0], sh),
            baseline=baseline,
            work=2.0 * n * k * h * w * c * 9,
            unit="FLOP",
            reference=whole_reference(lambda inp: reference(inp[0], sh, 1e-5)),
            tolerance=lambda inp: [TOL[torch.float32]],
            kernels=KernelRule((KERNEL,)),
            min_bytes=4.0 * (n * c * h * w + n * k * h * w + k * c * 9),
        )


def _check_from_modules(ctx: Context, options: dict, what: str) -> None:
    """ConvBNReLUInference.from_modules(conv, bn) in eval against nn.Sequential(conv, bn, ReLU)."""
    conv, bn = conv_bn_modules(torch.Generator().manual_seed(ctx.seed_for(what)), options)
    seq = torch.nn.Sequential(conv, bn, torch.nn.ReLU()).eval()
    fused = ctx.module.ConvBNReLUInference.from_modules(conv, bn)
    fused.eval()
    x = torch.randn(2, 5, 9, 8, generator=ctx.generator(what), device="cuda")
    with torch.no_grad():
        assert_rel_error(fused(x), seq(x), TOL[torch.float32], f"forward[{what}, against Sequential in eval]")


def _audit_reference(x, w, b, gamma, beta, mean, var, eps, stride, padding, dilation, version=STRICT):
    z = F.conv2d(x.double(), w.double(), None if b is None else b.double(), stride, padding, dilation)
    return F.relu(F.batch_norm(z, mean.double(), var.double(), gamma.double(), beta.double(), False, 0.0, eps))


def _audit_tf32_tolerance(x, w, b, gamma, beta, mean, var, eps, stride, padding, dilation, *version) -> float:
    """tf32_tolerance of an audit call's arguments."""
    t = {"x": x, "weight": w, "bias": b, "bn_weight": gamma, "bn_bias": beta, "running_mean": mean, "running_var": var}
    return tf32_tolerance(t, stride, padding, dilation, eps)


def _shape_of(c) -> Shape:
    """An exercise 06 Case (groups 1) as this exercise's Shape."""
    return Shape(c.name, c.n, c.cin, c.h, c.w, c.cout, c.kh, c.kw, c.stride, c.padding, c.dilation, c.bias)


def _call(x, w, bias, bn, conv, kind: str = "", version: int = STRICT) -> AuditCall:
    names = ("x", "weight", "bias", "bn_weight", "bn_bias", "running_mean", "running_var", "eps", "stride",
             "padding", "dilation", "version")
    what = [f"version={version}", "bias" if bias is not None else "no bias"] + ([kind] if kind else [])
    tf32 = version == TF32
    what += ["TF32"] if tf32 else []
    # the domains' edges: BatchNorm's weight (gamma) negative, zero and of both signs (a fold of the scale
    # that loses its sign, a ReLU applied before it); eps 0 refused; the padding's edges; x at its smallest size
    domains = {0: conv_smallest_input(tuple(x.shape[2:]), tuple(w.shape[2:]), conv[2], conv[1]), 1: conv_empty_kernel(),
               3: (NEGATIVE, ZERO, SIGNS), 7: (Edge("0.0", 0.0, refused=True),),
               9: conv_padding_edges(tuple(x.shape[2:]), tuple(w.shape[2:]), conv[0], conv[2], conv[1])}
    # NaN and infinities in x propagate through the convolution, BatchNorm and ReLU (torch.relu keeps NaN)
    return AuditCall("conv_bn_relu_inference", (x, w, bias, *bn, 1e-5, *conv, version), names, _audit_reference,
                     label=f"conv_bn_relu_inference({', '.join(what)})", group=TF32_GROUP if tf32 else "",
                     kernels=KernelRule((TF32_KERNEL if tf32 else KERNEL,)),
                     registered="lib.ops.conv_bn_relu_inference", nonfinite=(0,), scalars={7: (0.1, 1e-3)},
                     domains=domains,
                     tolerance=_audit_tf32_tolerance if tf32 else None,
                     needs_capability=TENSOR_CORE_CAPABILITY if tf32 else None,
                     defaults=torch_defaults(names, first=7))


# The launchers' branches (grader/verify/paths.py): with and without a bias, the kernels' 16-byte stores of 4
# pixels or single ones, version 2's (TF32, float32) 16-byte weight copies
_BOTH = ("float32", "float64")
PATHS = {"bias": _BOTH, "no_bias": _BOTH, "v1.store_vec4": _BOTH, "v1.store_scalar": _BOTH,
         "v2.store_vec4": (), "v2.store_scalar": (), "v2.vec_w": (), "v2.scalar_w": ()}

SPEC = ConvBNReLUInferenceSpec(
    exercise="08_conv_bn_relu_inference",
    title="Conv2d + BatchNorm2d (eval) + ReLU in one kernel",
    module="conv_bn_relu_inference.py",
    paths=PATHS,
    points={"forward": 5, TF32_GROUP: 2, "input_checks": 1, "performance": 4},
    perf_tiers=((0.5, 0.5), (0.85, 1.0)),
    perf_requires=("forward",),
    solution_vs_baseline=1.0,
)
