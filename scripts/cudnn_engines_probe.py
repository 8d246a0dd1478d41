"""Exercise 10's algorithm set against PyTorch's, on a GPU: which cuDNN algorithms reach F.conv2d's speed.

    python3 scripts/cudnn_engines_probe.py        (from the repository root; about 2 minutes on an H200)

The op chooses among the legacy API's algorithms (cudnnFind...AlgorithmEx); PyTorch's cuDNN path chooses among
the graph API's engine configurations. scripts/cudnn_engines_probe.cu times both sets, for the forward, the data
gradient and the weight gradient of each shape below, strict fp32 and TF32 (see its header for how). This script
builds it with nvcc against the cuDNN that torch loads, runs it, then times PyTorch on the same calls in the same
process order (F.conv2d and aten.convolution_backward, cudnn.benchmark on; grader.verify.timer's method is not
used here so that the three columns share one: CUDA events, median of 15, L2 flushed before each).
The shapes: the model-layer rows of `make bench EX=10` that were slowest against PyTorch, and two controls.
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
import torch.nn.functional as F

REPO = Path(__file__).resolve().parent.parent
# name, n, c, h, w, k, r, s, stride, padding (h, w), dilation, groups
SHAPES = [
    ("mbv2_f11.project_1x1", 32, 384, 14, 14, 96, 1, 1, 1, (0, 0), 1, 1),
    ("mbv2_f17.project_1x1", 32, 960, 7, 7, 320, 1, 1, 1, (0, 0), 1, 1),
    ("mbv2_f8.expand_1x1", 32, 64, 14, 14, 384, 1, 1, 1, (0, 0), 1, 1),
    ("mbv2_f15.project_1x1", 32, 960, 7, 7, 160, 1, 1, 1, (0, 0), 1, 1),
    ("r50_l3.1.conv1_1x1", 32, 1024, 14, 14, 256, 1, 1, 1, (0, 0), 1, 1),
    ("r50_l2.0.conv3_1x1", 32, 128, 28, 28, 512, 1, 1, 1, (0, 0), 1, 1),
    ("r50_l1.0.conv3_1x1", 32, 64, 56, 56, 256, 1, 1, 1, (0, 0), 1, 1),
    ("dilated_3x3_d2", 4, 256, 64, 64, 256, 3, 3, 1, (2, 2), 2, 1),
    ("depthwise_5x5", 32, 240, 28, 28, 240, 5, 5, 1, (2, 2), 1, 240),
    ("column_7x1", 32, 192, 17, 17, 192, 7, 1, 1, (3, 0), 1, 1),
    ("r50_l4.0.conv2_s2", 32, 512, 14, 14, 512, 3, 3, 2, (1, 1), 1, 1),
    ("r50_l1.0.conv2_3x3", 32, 64, 56, 56, 64, 3, 3, 1, (1, 1), 1, 1),
]


def cudnn_dir() -> Path:
    import nvidia.cudnn  # the wheel torch loads its cuDNN from

    return Path(list(nvidia.cudnn.__path__)[0])


def run_probe() -> None:
    cudnn = cudnn_dir()
    exe = Path(tempfile.mkdtemp()) / "cudnn_engines_probe"
    nvcc = Path(os.environ.get("CUDA_HOME", "/usr/local/cuda")) / "bin" / "nvcc"
    subprocess.run([str(nvcc), "-O2", "-std=c++17", "-arch=native", str(REPO / "scripts" / "cudnn_engines_probe.cu"),
                    f"-I{cudnn / 'include'}", f"-L{cudnn / 'lib'}", "-l:libcudnn.so.9", "-Xcompiler", "-w",
                    "-o", str(exe)], check=True)
    lines = "".join(f"{name} {n} {c} {h} {w} {k} {r} {s} {st} {st} {p[0]} {p[1]} {d} {d} {g}\n"
                    for name, n, c, h, w, k, r, s, st, p, d, g in SHAPES)
    env = {**os.environ, "LD_LIBRARY_PATH": f"{cudnn / 'lib'}:{os.environ.get('LD_LIBRARY_PATH', '')}"}
    subprocess.run([str(exe)], input=lines, text=True, env=env, check=True)


def time_us(f, flush: torch.Tensor) -> float:
    f()
    f()
    torch.cuda.synchronize()
    times = []
    for i in range(15):
        flush.fill_(i)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        f()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1000)
    return sorted(times)[len(times) // 2]


def time_pytorch() -> None:
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    torch.backends.cudnn.benchmark = True
    print(f"\nPyTorch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}, cudnn.benchmark on")
    print(f"{'shape':24} {'op':5} {'strict_us':>10} {'tf32_us':>10}")
    for name, n, c, h, w, k, r, s, st, p, d, g in SHAPES:
        x = torch.randn(n, c, h, w, device="cuda")
        wt = torch.randn(k, c // g, r, s, device="cuda")
        pad = list(p)
        gy = torch.randn_like(F.conv2d(x, wt, None, st, pad, d, g))
        geometry = ([st, st], pad, [d, d], False, [0, 0], g)  # stride ... groups of aten.convolution_backward
        backward = torch.ops.aten.convolution_backward
        calls = {"fwd": lambda: F.conv2d(x, wt, None, st, pad, d, g),
                 "dgrad": lambda: backward(gy, x, wt, None, *geometry, [True, False, False]),
                 "wgrad": lambda: backward(gy, x, wt, None, *geometry, [False, True, False])}
        for op, f in calls.items():
            row = []
            for tf32 in (False, True):
                torch.backends.cudnn.allow_tf32 = tf32
                row.append(time_us(f, flush))
            print(f"{name:24} {op:5} {row[0]:10.1f} {row[1]:10.1f}", flush=True)


def main() -> int:
    if not torch.cuda.is_available():
        print("no GPU here: this probe times cuDNN on one", file=sys.stderr)
        return 1
    print(torch.cuda.get_device_name(), flush=True)
    run_probe()
    time_pytorch()
    return 0


if __name__ == "__main__":
    sys.exit(main())
