"""Counting the float64 work a grade does on the GPU, to estimate its time on a consumer GPU.

Consumer and datacentre-inference GPUs (a T4, an RTX card) run float64 at 1/32 to 1/64 of their
float32 rate, so the grader's float64 references and gradchecks that take milliseconds on an H100
could take minutes there. With COURSE_COUNT_FP64=<file>, a grading process counts, under a dispatch
mode, the floating-point operations of every matrix product and convolution with float64 CUDA
operands (PyTorch's own FLOP formulas, torch.utils.flop_counter) and the elements every other
float64 CUDA operator touches, and writes them to <file> when it ends. scripts/fp64_estimate.py
turns a grade's counts into the estimate in docs/performance.md.

A diagnostic, off in grading: the mode runs every operator through Python.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

ENV = "COURSE_COUNT_FP64"


class Float64Work(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        from torch.utils.flop_counter import flop_registry

        self.registry = flop_registry
        self.flops = 0  # of matrix products and convolutions
        self.elements = 0  # touched by any other operator
        self.ops = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        tensors = [t for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
        if any(t.dtype == torch.float64 and t.is_cuda for t in tensors):
            self.ops += 1
            packet = func._overloadpacket
            if packet in self.registry:
                try:
                    self.flops += int(self.registry[packet](*args, **kwargs, out_val=out))
                except Exception:  # noqa: BLE001: a formula that does not fit this overload
                    self.elements += max(t.numel() for t in tensors)
            else:
                self.elements += max(t.numel() for t in tensors)
        return out

    def save(self, path: str) -> None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        with open(path, "w") as f:
            json.dump({"flops": self.flops, "elements": self.elements, "ops": self.ops}, f)


def start() -> Float64Work | None:
    """Push the counting mode for the rest of the process when COURSE_COUNT_FP64 asks for it."""
    if not os.environ.get(ENV):
        return None
    mode = Float64Work()
    mode.__enter__()
    return mode


# Compute capabilities whose float64 runs at half (or a third of) the float32 rate: P100, V100, A100,
# H100, B200. Every other GPU (a T4, any RTX or L-series card) has 1/32 to 1/64 of it.
FULL_RATE_FP64 = {(6, 0), (7, 0), (8, 0), (9, 0), (10, 0)}
REFERENCE_DEVICE_ENV = "COURSE_REFERENCE_DEVICE"  # "cpu" or "cuda": overrides the choice below


def reference_device() -> str:
    """Where the generated checks compute their float64 references: on the GPU where its float64 is
    fast (an H100 grades in seconds what its CPU cores, shared by ten grading processes, take a
    minute for), on the CPU elsewhere (a T4's float64 would make a grade take many minutes)."""
    chosen = os.environ.get(REFERENCE_DEVICE_ENV)
    if chosen in ("cpu", "cuda"):
        return chosen
    if torch.cuda.is_available() and torch.cuda.get_device_capability() in FULL_RATE_FP64:
        return "cuda"
    return "cpu"
