"""`make bench`'s measurements beyond each exercise's benchmark shape (grader.bench.benchmarks runs them):
the convolutions on more shapes beside cuDNN, the fused training step's peak memory, and the cuDNN
wrapper's host time per call. Grading never runs this module; the specs stay what is graded.

EXTRAS maps an exercise to its report (a JSON-able dict, measured on the reference solution).
The unit-5 notebook's cache plot and scripts/host_time_cudnn.py use the host-time helpers here.
"""
from __future__ import annotations

import time

import torch
import torch.nn.functional as F

from grader import env
from grader.bench import model_shapes
from grader.verify.checks import runs_arch_specific
from grader.specs import by_exercise, import_exercise_module
from grader.specs import ex08_conv_bn_relu_inference as ex08
from grader.specs import ex09_conv_bn_relu_training as ex09
from grader.specs.ex06_conv2d import randn
from grader.specs.ex10_cudnn_conv import BENCH as CUDNN_BENCH
from grader.specs.ex10_cudnn_conv import conv_flops, launch_cache
from grader.verify.timer import L2Flusher, math_mode, time_fn, tuned_strict_fp32


def _reference(exercise: str):
    spec = by_exercise(exercise)
    return import_exercise_module(env.REPO / "solutions" / spec.exercise, spec)


# ------------------------------------------------------------------- convolutions beside cuDNN
# Shapes timed with 06's fast version beside cuDNN (strict fp32):
# (label, (n, cin, h, w), (cout, kh, kw), stride, padding)
CONV2D_SHAPES = [
    ("32x512x7x7, 512->512, 3x3, pad 1", (32, 512, 7, 7), (512, 3, 3), 1, 1),
    ("32x128x28x28, 128->256, 3x3, stride 2, pad 1", (32, 128, 28, 28), (256, 3, 3), 2, 1),
]
# 07's: the transposes of 06's, i.e. the gradient of those convolutions with respect to their input.
# (label, x shape (n, cin, h, w), weight shape (cin, cout, kh, kw), stride, padding, output_padding)
CONV_TRANSPOSE2D_SHAPES = [
    ("32x512x7x7, 512->512, 3x3, pad 1", (32, 512, 7, 7), (512, 512, 3, 3), 1, 1, 0),
    ("32x256x14x14, 256->128, 3x3, stride 2, pad 1, output_padding 1", (32, 256, 14, 14), (256, 128, 3, 3), 2, 1, 1),
]


def time_shapes(module, shapes, call, baseline, work) -> list[dict]:
    """Time `call(module, inputs, params)` beside `baseline(inputs, params)` on each
    (label, x shape, weight shape, params) in `shapes` (strict fp32); `work(x shape, weight shape,
    params)` counts the FLOPs."""
    flush = L2Flusher()
    rows = []
    with tuned_strict_fp32():
        for label, xs, ws, params in shapes:
            g = torch.Generator(device="cuda")
            g.manual_seed(7)
            inputs = [(randn(g, xs, torch.float32), randn(g, ws, torch.float32, 0.05)) for _ in range(2)]
            mine = time_fn(lambda inp: call(module, inp, params), inputs, flush=flush)
            base = time_fn(lambda inp: baseline(inp, params), inputs, flush=flush)
            flops = work(xs, ws, params)
            rows.append({"shape": label, "time_us": round(mine.median_s * 1e6, 1),
                         "tflops": round(flops / mine.median_s / 1e12, 2),
                         "cudnn_time_us": round(base.median_s * 1e6, 1),
                         "cudnn_tflops": round(flops / base.median_s / 1e12, 2),
                         "time_vs_cudnn": round(mine.median_s / base.median_s, 2)})
    return rows


def conv2d_tf32_report(shapes) -> list[dict] | dict:
    """06's version 3 (TF32 tensor cores) beside cuDNN with TF32 allowed (PyTorch's default for
    convolutions, the tensor cores' rate: this version's limit), cuDNN's autotuner on, on 06's
    benchmark shape and on `shapes`; median GPU time (grader.verify.timer.time_fn, L2 flushed), TFLOP/s, ratio."""
    if torch.cuda.get_device_capability() < (8, 0):
        return {"skipped": f"version 3 needs compute capability 8.0; {torch.cuda.get_device_name()} is "
                           + ".".join(map(str, torch.cuda.get_device_capability()))}
    m = _reference("06_conv2d")
    flush = L2Flusher()
    rows = []
    with math_mode(tf32=True, cudnn_benchmark=True):
        for label, xs, ws, params in shapes:
            g = torch.Generator(device="cuda")
            g.manual_seed(7)
            inputs = [(randn(g, xs, torch.float32), randn(g, ws, torch.float32, (ws[1] * ws[2] * ws[3]) ** -0.5))
                      for _ in range(2)]
            ours = time_fn(lambda inp: m.conv2d(inp[0], inp[1], None, **params, version=3), inputs, flush=flush)
            base = time_fn(lambda inp: F.conv2d(inp[0], inp[1], None, **params), inputs, flush=flush)
            s, p = params["stride"], params["padding"]
            ho, wo = (xs[2] + 2 * p - ws[2]) // s + 1, (xs[3] + 2 * p - ws[3]) // s + 1
            flops = 2 * xs[0] * ws[0] * ho * wo * xs[1] * ws[2] * ws[3]
            rows.append({"shape": label, "time_us": round(ours.median_s * 1e6, 1),
                         "tflops": round(flops / ours.median_s / 1e12, 2),
                         "cudnn_tf32_time_us": round(base.median_s * 1e6, 1),
                         "cudnn_tf32_tflops": round(flops / base.median_s / 1e12, 2),
                         "vs_cudnn_tf32": round(base.median_s / ours.median_s, 3)})
    return rows


def conv2d_report() -> dict:
    """06's fast strict version (2) beside strict cuDNN on CONV2D_SHAPES, and version 3 (TF32) beside
    cuDNN with TF32 allowed on the benchmark's shape and CONV2D_SHAPES."""
    def work(xs, ws, params):
        s, p = params["stride"], params["padding"]
        ho = (xs[2] + 2 * p - ws[2]) // s + 1
        wo = (xs[3] + 2 * p - ws[3]) // s + 1
        return 2 * xs[0] * ws[0] * ho * wo * xs[1] * ws[2] * ws[3]

    shapes = [(label, xs, (cout, xs[1], kh, kw), {"stride": s, "padding": p})
              for label, xs, (cout, kh, kw), s, p in CONV2D_SHAPES]
    rows = time_shapes(
        _reference("06_conv2d"), shapes,
        call=lambda mod, inp, params: mod.conv2d(inp[0], inp[1], None, **params, version=2),
        baseline=lambda inp, params: F.conv2d(inp[0], inp[1], None, **params),
        work=work)
    bench = ("32x64x56x56, 64->64, 3x3, pad 1 (the benchmark's)", (32, 64, 56, 56), (64, 64, 3, 3),
             {"stride": 1, "padding": 1})
    return {"strict fp32, version 2 beside cuDNN": rows,
            "TF32, version 3 beside cuDNN with TF32 allowed": conv2d_tf32_report([bench, *shapes]),
            DEPTHWISE_KEY: depthwise_layers(),
            model_shapes.EXTRA_KEY: conv2d_layers()}


def conv_transpose2d_report() -> dict:
    """07's reference beside cuDNN on CONV_TRANSPOSE2D_SHAPES."""
    shapes = [(label, xs, ws, {"stride": s, "padding": p, "output_padding": op})
              for label, xs, ws, s, p, op in CONV_TRANSPOSE2D_SHAPES]
    rows = time_shapes(
        _reference("07_conv_transpose2d"), shapes,
        call=lambda mod, inp, params: mod.conv_transpose2d(inp[0], inp[1], None, **params),
        baseline=lambda inp, params: F.conv_transpose2d(inp[0], inp[1], None, **params),
        work=lambda xs, ws, params: 2 * xs[0] * xs[1] * xs[2] * xs[3] * ws[1] * ws[2] * ws[3])
    return {"strict fp32, beside cuDNN's F.conv_transpose2d": rows, model_shapes.EXTRA_KEY: conv_transpose2d_layers()}


# ------------------------------------------------------------- the fused layers' TF32 versions
def tf32_row(label: str, ours, pytorch, inputs, flops: float, flush) -> dict:
    """One row of a TF32 version beside PyTorch with TF32 allowed (its default for convolutions; cuDNN's
    autotuner on): median GPU time (grader.verify.timer.time_fn, L2 flushed), TFLOP/s and PyTorch's time / ours,
    in the keys conv2d_tf32_report's rows have (grader.bench.benchmarks prints them)."""
    with math_mode(tf32=True, cudnn_benchmark=True):
        mine = time_fn(ours, inputs, flush=flush).median_s
        base = time_fn(pytorch, inputs, flush=flush).median_s
    return {"shape": label, "time_us": round(mine * 1e6, 1), "tflops": round(flops / mine / 1e12, 2),
            "cudnn_tf32_time_us": round(base * 1e6, 1), "cudnn_tf32_tflops": round(flops / base / 1e12, 2),
            "vs_cudnn_tf32": round(base / mine, 3)}


def no_tensor_cores(what: str) -> dict | None:
    """A report's "skipped" entry below compute capability 8.0, else None."""
    if torch.cuda.get_device_capability() >= (8, 0):
        return None
    return {"skipped": f"{what} needs compute capability 8.0; {torch.cuda.get_device_name()} is "
                       + ".".join(map(str, torch.cuda.get_device_capability()))}


# 08's layers beside eager PyTorch: the benchmark's, and 06's CONV2D_SHAPES (3x3, padding 1, bias)
FUSED_SHAPES = [("32x64x56x56, 64->64, 3x3, pad 1 (the benchmark's)", ex08.Shape("bench", 32, 64, 56, 56, 64, 3, 3,
                                                                                 padding=(1, 1))),
                ("32x512x7x7, 512->512, 3x3, pad 1", ex08.Shape("deep", 32, 512, 7, 7, 512, 3, 3, padding=(1, 1))),
                ("32x128x28x28, 128->256, 3x3, stride 2, pad 1",
                 ex08.Shape("down", 32, 128, 28, 28, 256, 3, 3, stride=(2, 2), padding=(1, 1)))]


def conv_bn_relu_inference_report() -> dict:
    """08's version 2 (TF32 tensor cores) beside eager PyTorch's conv2d + batch_norm + relu with TF32
    allowed, on FUSED_SHAPES."""
    skipped = no_tensor_cores("version 2")
    if skipped:
        return skipped
    m = _reference("08_conv_bn_relu_inference")
    flush = L2Flusher()
    rows = []
    for label, sh in FUSED_SHAPES:
        g = torch.Generator(device="cuda")
        g.manual_seed(7)
        inputs = [ex08.make_case(g, sh) for _ in range(2)]
        p, q = [(size + 2 * pad - (k - 1) - 1) // st + 1
                for size, pad, k, st in ((sh.h, sh.padding[0], sh.r, sh.stride[0]), (sh.w, sh.padding[1], sh.s, sh.stride[1]))]

        def pytorch(t, sh=sh):
            z = F.conv2d(t["x"], t["weight"], t["bias"], sh.stride, sh.padding, sh.dilation)
            return F.relu(F.batch_norm(z, t["running_mean"], t["running_var"], t["bn_weight"], t["bn_bias"], False,
                                       0.0, 1e-5))

        rows.append(tf32_row(label, lambda t, sh=sh: ex08.call(m, t, sh, version=ex08.TF32), pytorch, inputs,
                             2.0 * sh.n * sh.k * p * q * sh.c * sh.r * sh.s, flush))
    return {"TF32, version 2 beside eager PyTorch (cuDNN) with TF32 allowed": rows}


# ------------------------------------------------------------------- layers of real models

def time_layers(kind, inputs_of, calls, skip=lambda layer: None) -> list[dict]:
    """The distinct layers of grader.bench.model_shapes of one kind (the models' and the shape classes',
    `bench_layers`), each timed (time_fn: median GPU time,
    L2 flushed): `calls(layer)` gives (ours, PyTorch's, ours with TF32 allowed or None), each a
    function of `inputs_of(layer, generator)`. Ours and PyTorch's in strict fp32 (cuDNN's autotuner
    on), and PyTorch with TF32 allowed (its default for convolutions) beside ours in TF32 where there
    is such a version, else beside our strict time. vs = PyTorch's time / ours: above 1, ours is faster."""
    flush = L2Flusher()
    rows = []
    for layer, count in model_shapes.unique(model_shapes.bench_layers()):
        if not isinstance(layer, kind):
            continue
        row = {"model": layer.model, "layer": layer.name, "shape": layer.shape, "count": count}
        why = skip(layer)
        if why:
            rows.append({**row, "skipped": why})
            continue
        ours, pytorch, ours_tf32 = calls(layer)
        g = torch.Generator(device="cuda")
        g.manual_seed(11)
        try:  # one layer's failure is that row's, not the report's
            inputs = [inputs_of(layer, g) for _ in range(2)]
            with math_mode(cudnn_benchmark=True):
                mine = time_fn(ours, inputs, flush=flush).median_s
                strict = time_fn(pytorch, inputs, flush=flush).median_s
            with math_mode(tf32=True, cudnn_benchmark=True):
                tf32 = time_fn(pytorch, inputs, flush=flush).median_s
                mine_tf32 = time_fn(ours_tf32, inputs, flush=flush).median_s if ours_tf32 else mine
        except Exception as e:  # noqa: BLE001
            rows.append({**row, "skipped": f"failed: {type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"})
            continue
        rows.append({**row, "tflops": round(2 * layer.macs / mine / 1e12, 2), "ours_us": round(mine * 1e6, 1),
                     "pytorch_strict_us": round(strict * 1e6, 1), "vs_strict": round(strict / mine, 3),
                     "ours_tf32_us": round(mine_tf32 * 1e6, 1), "pytorch_tf32_us": round(tf32 * 1e6, 1),
                     "vs_tf32": round(tf32 / mine_tf32, 3)})
    return rows


def conv_inputs(layer, g):
    fan_in = layer.w_shape[1] * layer.kernel[0] * layer.kernel[1]
    return randn(g, layer.x_shape, torch.float32), randn(g, layer.w_shape, torch.float32, fan_in ** -0.5)


def conv2d_layers() -> list[dict]:
    """06's fast strict version (2) on every convolution of the model list, grouped (depthwise) ones
    included (version 2 takes its depthwise kernel for those), and from compute capability 8.0 version 3
    (TF32, groups 1) beside PyTorch with TF32 allowed."""
    m = _reference("06_conv2d")
    tensor_cores = torch.cuda.get_device_capability() >= (8, 0)
    return time_layers(model_shapes.Conv, conv_inputs, lambda layer: (
        lambda inp: m.conv2d(inp[0], inp[1], None, stride=layer.stride, padding=layer.padding,
                             dilation=layer.dilation, groups=layer.groups, version=2),
        lambda inp: F.conv2d(inp[0], inp[1], None, layer.stride, layer.padding, layer.dilation, layer.groups),
        (lambda inp: m.conv2d(inp[0], inp[1], None, stride=layer.stride, padding=layer.padding,
                              dilation=layer.dilation, version=3))
        if tensor_cores and layer.groups == 1 else None))


DEPTHWISE_KEY = "depthwise layers (MobileNetV2), bytes moved beside cuDNN"


def depthwise_layers() -> list[dict]:
    """06's depthwise path on MobileNetV2's depthwise layers beside cuDNN (strict fp32, autotuner on):
    median GPU time, and the rate at which each moves the bytes a depthwise convolution must (its
    input and its output once, the weights): the kernel is bound by memory, so GB/s is its measure."""
    m = _reference("06_conv2d")
    flush = L2Flusher()
    rows = []
    for layer, count in model_shapes.unique(model_shapes.mobilenet_v2()):
        if not (isinstance(layer, model_shapes.Conv) and layer.groups == layer.cin == layer.cout > 1):
            continue
        g = torch.Generator(device="cuda")
        g.manual_seed(13)
        inputs = [conv_inputs(layer, g) for _ in range(2)]
        ho, wo = layer.out_hw
        moved = 4 * (layer.n * layer.cin * layer.h * layer.w + layer.n * layer.cout * ho * wo
                     + layer.cout * layer.k * layer.k)
        args = (layer.stride, layer.padding, 1, layer.groups)
        with math_mode(cudnn_benchmark=True):
            mine = time_fn(lambda inp: m.conv2d(inp[0], inp[1], None, *args, version=2), inputs, flush=flush).median_s
            cudnn = time_fn(lambda inp: F.conv2d(inp[0], inp[1], None, *args), inputs, flush=flush).median_s
        rows.append({"layer": layer.name, "shape": layer.shape, "count": count, "MB": round(moved / 1e6, 1),
                     "ours_us": round(mine * 1e6, 1), "ours_GBps": round(moved / mine / 1e9),
                     "cudnn_us": round(cudnn * 1e6, 1), "cudnn_GBps": round(moved / cudnn / 1e9),
                     "cudnn_time_over_ours": round(cudnn / mine, 2)})
        del inputs
    return rows


def conv_transpose2d_layers() -> list[dict]:
    """07's reference on every transposed convolution of the model list (grouped ones too)."""
    m = _reference("07_conv_transpose2d")
    return time_layers(model_shapes.ConvTranspose, conv_inputs, lambda layer: (
        lambda inp: m.conv_transpose2d(inp[0], inp[1], None, stride=layer.stride, padding=layer.padding,
                                       output_padding=layer.output_padding, groups=layer.groups,
                                       dilation=layer.dilation),
        lambda inp: F.conv_transpose2d(inp[0], inp[1], None, layer.stride, layer.padding, layer.output_padding,
                                       layer.groups, layer.dilation), None))


def cudnn_conv_layers() -> list[dict]:
    """10's ops on every convolution and transposed convolution of the model list, grouped (depthwise) ones
    included. They follow PyTorch's flags as F.conv2d does, so the same call timed with TF32 allowed is
    their TF32 path."""
    m = _reference("10_cudnn_conv")

    def calls(layer):
        ours = lambda inp: m.conv2d(inp[0], inp[1], stride=layer.stride, padding=layer.padding,  # noqa: E731
                                    dilation=layer.dilation, groups=layer.groups)
        return ours, lambda inp: F.conv2d(inp[0], inp[1], None, layer.stride, layer.padding, layer.dilation,
                                          layer.groups), ours

    def transposed_calls(layer):
        ours = lambda inp: m.conv_transpose2d(inp[0], inp[1], None, layer.stride, layer.padding,  # noqa: E731
                                              layer.output_padding, layer.groups, layer.dilation)
        return ours, lambda inp: F.conv_transpose2d(inp[0], inp[1], None, layer.stride, layer.padding,
                                                    layer.output_padding, layer.groups, layer.dilation), ours
    return (time_layers(model_shapes.Conv, conv_inputs, calls)
            + time_layers(model_shapes.ConvTranspose, conv_inputs, transposed_calls))


def matmul_layers() -> list[dict]:
    """05's kernel 4 (strict fp32) and, from compute capability 8.0, kernel 5 (TF32) on every matrix
    product of the model list (GPT-2's decoding ones are matrix-vector products)."""
    m = _reference("05_matmul")
    tensor_cores = torch.cuda.get_device_capability() >= (8, 0)

    def inputs_of(layer, g):
        return randn(g, (layer.m, layer.k), torch.float32), randn(g, (layer.k, layer.n), torch.float32, layer.k ** -0.5)

    return time_layers(model_shapes.Matmul, inputs_of, lambda layer: (
        lambda inp: m.matmul(inp[0], inp[1], 4), lambda inp: torch.matmul(inp[0], inp[1]),
        (lambda inp: m.matmul(inp[0], inp[1], 5)) if tensor_cores else None))


# ------------------------------------------------------------ the fused training step's memory
def peak_mib(step, inp=None) -> float:
    """The most memory `step(inp)` allocated beyond what was allocated before it, in MiB."""
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    out = step(inp)
    torch.cuda.synchronize()
    del out
    return (torch.cuda.max_memory_allocated() - base) / 2**20


def training_step_memory_report() -> dict:
    """Peak memory of 09's training step (forward + backward), beyond its inputs, fused and eager."""
    mod = _reference("09_conv_bn_relu_training")
    with tuned_strict_fp32():
        inp = ex09.SPEC.benchmark().make_inputs(7)
        ex09.fused_step(mod, inp), ex09.eager_step(inp)  # warm up (cuDNN's algorithm search allocates)
        fused = peak_mib(lambda i: ex09.fused_step(mod, i), inp)
        eager = peak_mib(ex09.eager_step, inp)
    n, c, h, w, k = ex09.BENCH
    act = n * k * h * w * 4 / 2**20
    return {"peak_MiB_fused": round(fused, 1), "peak_MiB_eager": round(eager, 1),
            "fused_over_eager": round(fused / eager, 3), "one_activation_MiB": round(act, 1),
            "shape": "32x64x56x56, 64->64, 3x3, pad 1, fp32"}


def conv_bn_relu_training_report() -> dict:
    """09's training step: its peak memory (training_step_memory_report), and version 2 (the three
    convolutions on TF32 tensor cores) beside eager PyTorch with TF32 allowed, on the benchmark's shape."""
    report = training_step_memory_report()
    key = "TF32, version 2's training step beside eager PyTorch (cuDNN) with TF32 allowed"
    skipped = no_tensor_cores("version 2")
    if skipped:
        return report | {key: skipped}
    mod = _reference("09_conv_bn_relu_training")
    inputs = [ex09.SPEC.benchmark().make_inputs(seed) for seed in (7, 8)]
    n, c, h, w, k = ex09.BENCH
    row = tf32_row("32x64x56x56, 64->64, 3x3, pad 1 (the benchmark's), forward + backward",
                   lambda inp: ex09.fused_step(mod, inp, version=ex09.TF32), ex09.eager_step, inputs,
                   3 * 2.0 * n * k * h * w * c * 9, L2Flusher())
    return report | {key: [row]}


# ----------------------------------------------------------- the cuDNN wrapper beside F.conv2d
HOST_CASE = ((1, 16, 7, 7), 16)  # host time per call: 3x3, padding 1; the GPU's work is a few us


def host_us_per_call(fn, calls: int = 200, loops: int = 10) -> list[float]:
    """Host time of one call of fn(), in us, once per loop: the wall time of `calls` back-to-back calls
    with no sync among them, divided by `calls`. The GPU is synchronised between loops only, so its
    queue (about a thousand launches) never fills and blocks the host: what is timed is the enqueueing."""
    for _ in range(20):  # plans built, allocator warm
        fn()
    torch.cuda.synchronize()
    per_call = []
    for _ in range(loops):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        per_call.append((time.perf_counter() - t0) / calls * 1e6)
        torch.cuda.synchronize()
    return per_call


GRAPHS_OFF = "graphs off"  # in a host_calls name: time it with the launch cache off (host_times)


def host_calls(m, x, w) -> dict:
    """The calls whose host time is reported: ours with cached plans (both algorithm modes; the same
    buffers every call, so the launch cache replays a CUDA graph, and once with it off), ours
    uncached, and F.conv2d, each a 3x3 convolution with padding 1."""
    return {
        "cached, benchmark": lambda: m.conv2d(x, w, None, 1, 1),
        f"cached, benchmark, {GRAPHS_OFF}": lambda: m.conv2d(x, w, None, 1, 1),
        "cached, heuristic": lambda: m.conv2d(x, w, None, 1, 1, mode="heuristic"),
        "uncached": lambda: m.conv2d(x, w, None, 1, 1, mode="uncached"),
        "F.conv2d": lambda: F.conv2d(x, w, None, 1, 1),
    }


def host_times(m, calls: dict, loops: int = 10) -> dict[str, list[float]]:
    """host_us_per_call of each call, the launch cache off for those whose name says GRAPHS_OFF."""
    return {name: _timed_with_graphs(m, GRAPHS_OFF not in name, fn, loops) for name, fn in calls.items()}


def _timed_with_graphs(m, graphs: bool, fn, loops: int) -> list[float]:
    with launch_cache(m, graphs):
        return host_us_per_call(fn, loops=loops)


def host_inputs(x_shape=HOST_CASE[0], k=HOST_CASE[1]):
    x = torch.randn(x_shape, device="cuda")
    return x, torch.randn(k, x_shape[1], 3, 3, device="cuda") * (x_shape[1] * 9) ** -0.5


def throughput(m, flush) -> dict:
    """Our op against F.conv2d (cuDNN's autotuner on) on 10's benchmark shapes in strict fp32 and
    TF32: median GPU time of each (grader.verify.timer.time_fn: L2 flushed, inputs rotated) and the ratio."""
    rows = {}
    for tf32 in (False, True):
        with math_mode(tf32=tf32, cudnn_benchmark=True):
            for x_shape, k in CUDNN_BENCH:
                inputs = [host_inputs(x_shape, k) for _ in range(2)]
                ours = time_fn(lambda inp: m.conv2d(inp[0], inp[1], None, 1, 1), inputs, flush=flush)
                base = time_fn(lambda inp: F.conv2d(inp[0], inp[1], None, 1, 1), inputs, flush=flush)
                flops = conv_flops(x_shape, k)
                rows[f"{'tf32' if tf32 else 'strict'} {'x'.join(map(str, x_shape))} {x_shape[1]}->{k}"] = {
                    "ours_us": ours.median_s * 1e6, "pytorch_us": base.median_s * 1e6,
                    "ours_tflops": flops / ours.median_s / 1e12, "pytorch_tflops": flops / base.median_s / 1e12,
                    "ratio": base.median_s / ours.median_s}
    return rows


def cudnn_report() -> dict:
    """10's op against F.conv2d per shape in both math modes, host time per call on a tiny input
    (cached with the launch cache on and off, uncached, F.conv2d), and cached against uncached time."""
    m = _reference("10_cudnn_conv")
    flush = L2Flusher()
    report: dict = {"date": time.strftime("%Y-%m-%d"), "device": torch.cuda.get_device_name(),
                    "cudnn": torch.backends.cudnn.version(), "throughput": throughput(m, flush),
                    "host_us_per_call": {}, "cached_vs_uncached_us": {}}
    with math_mode(cudnn_benchmark=True):  # strict fp32
        x, w = host_inputs()
        for name, times in host_times(m, host_calls(m, x, w)).items():
            report["host_us_per_call"][f"1x16x7x7 16->16 3x3: {name}"] = min(times)
        for x_shape, k in (HOST_CASE, ((32, 64, 56, 56), 64)):
            xs = [host_inputs(x_shape, k) for _ in range(2)]
            row = {}
            for mode in ("benchmark", "uncached"):
                t = time_fn(lambda inp, mode=mode: m.conv2d(inp[0], inp[1], None, 1, 1, mode=mode), xs, flush=flush)
                row[mode] = {"gpu_us": t.median_s * 1e6, "wall_us": t.wall_median_s * 1e6}
            report["cached_vs_uncached_us"][f"{'x'.join(map(str, x_shape))} {x_shape[1]}->{k}"] = row
        report["cache_stats"] = m.cache_stats()
    report[model_shapes.EXTRA_KEY] = cudnn_conv_layers()
    return report


# ------------------------------------------------------------------- 05's tensor cores beside cuBLAS
MATMUL_TC_N = 4096


def tensor_cores_report(n: int = MATMUL_TC_N) -> dict:
    """05's kernel 5 (mma.sync) and, on a Hopper build, kernel 6 (wgmma) at n^3 beside cuBLAS doing the
    same arithmetic: float32 inputs with TF32 allowed (torch.backends.cuda.matmul.allow_tf32 = True:
    cuBLAS's tensor-core rate, the limit for TF32), and bfloat16 inputs (torch.matmul in bfloat16).
    Median GPU time (grader.verify.timer.time_fn), TFLOP/s, ratio (cuBLAS's time / ours)."""
    if torch.cuda.get_device_capability() < (8, 0):
        return {"skipped": f"kernel 5 needs compute capability 8.0; {torch.cuda.get_device_name()} is "
                           + ".".join(map(str, torch.cuda.get_device_capability()))}
    m = _reference("05_matmul")
    flush = L2Flusher()
    flops = 2 * n**3
    versions = (5, 6) if runs_arch_specific((9, 0)) else (5,)  # version 6: Hopper's wgmma, a 9.0a build
    rows = {}
    g = torch.Generator(device="cuda").manual_seed(5)
    for dtype, label in ((torch.float32, "tf32"), (torch.bfloat16, "bf16")):
        inputs = [tuple(torch.randn(n, n, generator=g, device="cuda").to(dtype) for _ in range(2)) for _ in range(2)]
        with math_mode(tf32=True):  # cuBLAS on TF32 tensor cores for float32; bfloat16 is unaffected
            base = time_fn(lambda inp: torch.matmul(inp[0], inp[1]), inputs, flush=flush)
            ours = {v: time_fn(lambda inp, v=v: m.matmul(inp[0], inp[1], v), inputs, flush=flush) for v in versions}
        row = {"cublas_us": round(base.median_s * 1e6, 1), "cublas_tflops": round(flops / base.median_s / 1e12, 2)}
        for v, t in ours.items():
            suffix = "" if v == 5 else "_6"  # (kernel 5's keys as before)
            row.update({f"kernel{v}_us": round(t.median_s * 1e6, 1), f"kernel{v}_tflops": round(flops / t.median_s / 1e12, 2),
                        f"ratio{suffix}": round(base.median_s / t.median_s, 3)})
        rows[f"{label} {n}^3"] = row
    report = {"date": time.strftime("%Y-%m-%d"), "device": torch.cuda.get_device_name(), "tensor_cores": rows}
    if 6 not in versions:
        report["kernel6"] = "not run: version 6 needs a compute capability 9.0 GPU and a 9.0a build"
    return report


def matmul_report() -> dict:
    return {**tensor_cores_report(), model_shapes.EXTRA_KEY: matmul_layers()}


EXTRAS = {
    "05_matmul": matmul_report,
    "06_conv2d": conv2d_report,
    "07_conv_transpose2d": conv_transpose2d_report,
    "08_conv_bn_relu_inference": conv_bn_relu_inference_report,
    "09_conv_bn_relu_training": conv_bn_relu_training_report,
    "10_cudnn_conv": cudnn_report,
}
