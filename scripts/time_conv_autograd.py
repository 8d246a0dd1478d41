"""Exercises 06 and 07 in training: forward + backward of the solutions' conv2d / conv_transpose2d (both
gradients computed by the exercise's own forward op) beside PyTorch's, on model layers (needs a CUDA GPU):

    python3 scripts/time_conv_autograd.py              # every layer, strict fp32 and PyTorch's default
    python3 scripts/time_conv_autograd.py --strict     # strict fp32 only

Builds solutions/06_conv2d and solutions/07_conv_transpose2d (cached, as the grader does). Per layer:
first the gradients of x, weight and bias (and the output) against PyTorch's op in float64, normwise,
ours and PyTorch's float32 side by side; then one forward and backward (torch.autograd.grad of the
output for a fixed upstream gradient, so nothing accumulates) timed with grader.verify.timer.time_fn (CUDA
events, warm-up, L2 flushed, median of many runs, two input sets rotated), ours and PyTorch's (cuDNN's
autotuner on), in two math modes:

- strict: torch.backends.cudnn.allow_tf32 = False (TF32 off): ours runs version 2, cuDNN fp32;
- default: allow_tf32 as PyTorch ships it (True): 06 runs its default version (3, TF32 tensor cores,
  on a dense layer of an 8.0+ GPU: forward and data gradient on version 3, the weight gradient split in
  chunks on version 2), cuDNN TF32; 07 has no TF32 version (version 2).

One line per layer and mode: milliseconds for forward + backward, PyTorch's time over ours (above 1:
ours is faster), and the worst relative error of the gradients, ours and PyTorch's. Strided layers
cost 06's data gradient s^2 times the forward's work (its input is the gradient spread out by zeros);
the README of each exercise says why.
"""
from __future__ import annotations

import argparse
import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from grader.verify.checks import relative_error  # noqa: E402
from grader.verify.timer import L2Flusher, math_mode, time_fn  # noqa: E402


@dataclass(frozen=True)
class Layer:
    label: str
    transposed: bool
    n: int
    cin: int
    size: int  # square input, size x size
    cout: int
    k: int
    stride: int = 1
    padding: int = 0
    groups: int = 1
    output_padding: int = 0  # transposed only


LAYERS = [
    Layer("ResNet-50 3x3, 64 -> 64, 56x56", False, 32, 64, 56, 64, 3, 1, 1),
    Layer("ResNet-50 3x3 stride 2, 128 -> 128, 56x56", False, 32, 128, 56, 128, 3, 2, 1),
    Layer("ResNet-50 1x1, 256 -> 64, 56x56", False, 32, 256, 56, 64, 1),
    Layer("MobileNetV2 depthwise 3x3, 144, 56x56", False, 32, 144, 56, 144, 3, 1, 1, groups=144),
    Layer("UNet transposed 4x4 stride 2, 128 -> 64, 28x28", True, 32, 128, 28, 64, 4, 2, 1),
]


def load(folder: str, file: str):
    path = ROOT / "solutions" / folder / file
    spec = importlib.util.spec_from_file_location(f"autograd_timing_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def make_inputs(layer: Layer, seed: int):
    """x, weight, bias and the upstream gradient of the layer, float32 on the GPU."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.randn(layer.n, layer.cin, layer.size, layer.size, generator=g, device="cuda")
    if layer.transposed:
        w_shape = (layer.cin, layer.cout // layer.groups, layer.k, layer.k)
        fan_in = layer.cout // layer.groups * layer.k * layer.k
    else:
        w_shape = (layer.cout, layer.cin // layer.groups, layer.k, layer.k)
        fan_in = layer.cin // layer.groups * layer.k * layer.k
    w = torch.randn(w_shape, generator=g, device="cuda") * fan_in ** -0.5
    b = torch.randn(layer.cout, generator=g, device="cuda") * 0.1
    y = torch_op(layer)(x.to("meta"), w.to("meta"), b.to("meta"))  # only its shape
    grad_y = torch.randn(y.shape, generator=g, device="cuda")
    return x, w, b, grad_y


def torch_op(layer: Layer):
    if layer.transposed:
        return lambda x, w, b: F.conv_transpose2d(x, w, b, layer.stride, layer.padding, layer.output_padding,
                                                  layer.groups)
    return lambda x, w, b: F.conv2d(x, w, b, layer.stride, layer.padding, 1, layer.groups)


def our_op(layer: Layer, ex06, ex07, default: bool):
    """The exercise's op: 06 at its default version (PyTorch's flag decides) in the default mode, else
    version 2; 07 at version 2."""
    if layer.transposed:
        return lambda x, w, b: ex07.conv_transpose2d(x, w, b, layer.stride, layer.padding, layer.output_padding,
                                                     layer.groups, version=2)
    version = None if default else 2
    return lambda x, w, b: ex06.conv2d(x, w, b, layer.stride, layer.padding, 1, layer.groups, version=version)


def forward_backward(op):
    """fn(input set) -> the gradients of x, weight and bias, for the set's upstream gradient."""
    def run(inp):
        x, w, b, grad_y = inp
        leaves = (x.requires_grad_(), w.requires_grad_(), b.requires_grad_())
        return torch.autograd.grad(op(*leaves), leaves, grad_y)
    return run


def worst_error(op, inp, reference) -> float:
    return max(relative_error(a, e) for a, e in zip(forward_backward(op)(inp), reference))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--strict", action="store_true", help="strict fp32 only (no default-mode rows)")
    parser.add_argument("--max-seconds", type=float, default=2.0, help="timing budget per measurement")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("time_conv_autograd.py needs a CUDA GPU")
    ex06 = load("06_conv2d", "conv2d.py")
    ex07 = load("07_conv_transpose2d", "conv_transpose2d.py")
    flush = L2Flusher()
    modes = (("strict", False),) if args.strict else (("strict", False), ("default", True))
    print(f"{torch.cuda.get_device_name()}; forward + backward (grads of x, weight, bias), median of CUDA-event times")
    print(f"{'layer':48} {'mode':8} {'ours ms':>8} {'torch ms':>8} {'torch/ours':>10} {'ours err':>9} {'torch err':>9}")
    for i, layer in enumerate(LAYERS):
        inputs = [make_inputs(layer, 2 * i + j) for j in range(2)]
        x, w, b, grad_y = inputs[0]
        x64, w64, b64 = (t.detach().double().requires_grad_() for t in (x, w, b))
        reference = torch.autograd.grad(torch_op(layer)(x64, w64, b64), (x64, w64, b64), grad_y.double())
        del x64, w64, b64
        for mode, tf32 in modes:
            with math_mode(tf32=tf32, cudnn_benchmark=True):
                ours, theirs = our_op(layer, ex06, ex07, default=tf32), torch_op(layer)
                ours_err = worst_error(ours, inputs[0], reference)
                theirs_err = worst_error(theirs, inputs[0], reference)
                ours_t = time_fn(forward_backward(ours), inputs, flush=flush, max_seconds=args.max_seconds)
                theirs_t = time_fn(forward_backward(theirs), inputs, flush=flush, max_seconds=args.max_seconds)
            print(f"{layer.label:48} {mode:8} {ours_t.median_s * 1e3:8.3f} {theirs_t.median_s * 1e3:8.3f} "
                  f"{theirs_t.median_s / ours_t.median_s:10.2f} {ours_err:9.1e} {theirs_err:9.1e}", flush=True)
        del inputs, reference
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
