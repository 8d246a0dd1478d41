"""Timing on the GPU: the one harness used by grading and by `make bench`.

Each sample: flush L2 (write twice its size), synchronise, queue a GPU sleep, record a CUDA event,
run the op on the next of several rotated input sets, record an event, synchronise. The sleep
keeps the GPU busy while Python dispatches the op, so the events time the GPU's work and not the
host's launch latency (40-70 us per call for a Python-registered op, 5-9% of a 0.7 ms kernel).
Samples continue until the standard
error of the mean is under 1% of the mean (or a time cap), and the median is reported.
The host wall time of each sample is kept too, and how long the device stays busy once the timed
stream's end event has completed: work still running then escaped the timed stream (launched on
another stream or thread), and such a result is not credited. That, not the wall time, is the test:
host stalls before the end event (a cudaMalloc when other processes hold the GPU's memory, a busy
CPU) lengthen the wall time of honest work, and once cost a reference kernel its timing points.
"""
from __future__ import annotations

import contextlib
import math
import statistics
import time
from dataclasses import asdict, dataclass
from typing import Callable, Sequence

import torch

from grader.scoring import work_escaped


@dataclass
class Timing:
    median_s: float
    mean_s: float
    sem_s: float
    samples: int
    wall_median_s: float
    busy_after_s: float = 0.0  # median time the device stayed busy after the timed stream finished

    def rate(self, amount: float) -> float:
        """amount (bytes or FLOPs) per second at the median time."""
        return amount / self.median_s if self.median_s > 0 else float("inf")

    @property
    def escaped_stream(self) -> bool:
        """Work ran outside the timed stream (grader.scoring.work_escaped)."""
        return work_escaped(self.busy_after_s, self.median_s)

    def as_dict(self) -> dict:
        return asdict(self)


# GPU clock cycles of the sleep queued before each timed call: about 250 us at the H100's 1.98 GHz
# (longer at lower clocks), more than an op's host-side dispatch takes.
HOST_LEAD_CYCLES = 500_000


@contextlib.contextmanager
def math_mode(*, tf32: bool = False, cudnn_benchmark: bool | None = None):
    """Time (or check) under one math mode, restored on exit: TF32 on or off for both cuBLAS and
    cuDNN (off: strict fp32, the mode every fp32 benchmark here compares in), and, when given,
    cuDNN's autotuner (on: PyTorch's convolutions at their fastest algorithm)."""
    flags = torch.backends
    before = (flags.cudnn.allow_tf32, flags.cuda.matmul.allow_tf32, flags.cudnn.benchmark)
    flags.cudnn.allow_tf32 = flags.cuda.matmul.allow_tf32 = tf32
    if cudnn_benchmark is not None:
        flags.cudnn.benchmark = cudnn_benchmark
    try:
        yield
    finally:
        flags.cudnn.allow_tf32, flags.cuda.matmul.allow_tf32, flags.cudnn.benchmark = before


def tuned_strict_fp32():
    """PyTorch's convolutions at their fastest strict-fp32 algorithm: TF32 off, cuDNN's autotuner on."""
    return math_mode(cudnn_benchmark=True)


class L2Flusher:
    def __init__(self, device=None):
        props = torch.cuda.get_device_properties(device)
        size = max(2 * getattr(props, "L2_cache_size", 64 << 20), 64 << 20)
        self.buffer = torch.empty(size // 4, dtype=torch.int32, device=device)

    def __call__(self):
        self.buffer.fill_(0x5A5A5A5A)


def time_fn(
    fn: Callable[[object], object],
    inputs: Sequence[object],
    *,
    warmup: int = 3,
    min_samples: int = 10,
    max_samples: int = 500,
    max_seconds: float = 3.0,
    target_sem: float = 0.01,
    flush: L2Flusher | None = None,
) -> Timing:
    """Time `fn(inputs[i % len(inputs)])` on the current stream."""
    flush = flush or L2Flusher()
    stream = torch.cuda.current_stream()
    for i in range(warmup):
        fn(inputs[i % len(inputs)])
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times: list[float] = []
    walls: list[float] = []
    busy: list[float] = []
    deadline = time.perf_counter() + max_seconds
    queued = torch.cuda.Event(enable_timing=True)
    for i in range(max_samples):
        flush()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        queued.record(stream)
        torch.cuda._sleep(HOST_LEAD_CYCLES)
        start.record(stream)
        fn(inputs[i % len(inputs)])
        end.record(stream)
        end.synchronize()
        done = time.perf_counter()
        torch.cuda.synchronize()  # the whole device: waits for work on other streams too
        busy.append(time.perf_counter() - done)
        slept = queued.elapsed_time(start) / 1e3
        walls.append(time.perf_counter() - t0 - slept)
        times.append(start.elapsed_time(end) / 1e3)
        if len(times) >= min_samples:
            mean = statistics.fmean(times)
            sem = statistics.stdev(times) / math.sqrt(len(times))
            if sem <= target_sem * mean or time.perf_counter() > deadline:
                break
    mean = statistics.fmean(times)
    sem = statistics.stdev(times) / math.sqrt(len(times)) if len(times) > 1 else 0.0
    return Timing(statistics.median(times), mean, sem, len(times), statistics.median(walls), statistics.median(busy))


def copy_bandwidth(nbytes: int, flush: L2Flusher | None = None) -> float:
    """Device-to-device copy bandwidth in bytes/s (bytes read + bytes written), measured now."""
    n = max(nbytes // 2 // 4, 1 << 20)
    src = torch.empty(n, dtype=torch.float32, device="cuda").uniform_()
    dst = torch.empty_like(src)
    t = time_fn(lambda _: dst.copy_(src), [None], flush=flush)
    return t.rate(2 * n * 4)


def matmul_flops(n: int = 4096, flush: L2Flusher | None = None) -> float:
    """Strict-fp32 cuBLAS matrix product rate in FLOP/s, measured now (TF32 off)."""
    with math_mode():
        a = torch.randn(n, n, device="cuda")
        b = torch.randn(n, n, device="cuda")
        t = time_fn(lambda _: a @ b, [None], flush=flush)
    return t.rate(2 * n**3)
