"""Timing on the GPU: the one harness used by grading and by `make bench`.

Each sample: fresh values made for the next of several rotated input sets and the set poisoned,
synchronise; queue a GPU sleep, then the fresh values' copy into the set and an L2 flush (write twice
its size), a second sleep as long, record a CUDA event, run the op, record an event, synchronise. The
inputs are ready on the timed stream only, just before the op: work started ahead of it (on a stream of
its own, during the first sleep) reads the poison. The second sleep parts the flush from the op as the
synchronise before the sleep did when the inputs were refilled first: with the op queued straight
behind the copies and the flush, the solutions' timed calls on an H200 took 50-250 us longer than
their kernels (2026-12-01), 9 of the 135 points lost. The sleeps keep the GPU busy while Python
dispatches the op, so the events time the GPU's work
and not the host's launch latency (40-70 us per call for a Python-registered op, 5-9% of a 0.7 ms kernel);
its length is twice the op's host dispatch time, measured in the warm-up (an autograd forward and
backward through a Python module takes longer than the 250 us that suffice for one op, and the
gap would otherwise be timed, by how busy the process's host is).
Samples continue until the standard
error of the mean is under 1% of the mean (or a time cap), and the median is reported.
The host wall time of each sample is kept too, and how long the device stays busy once the timed
stream's end event has completed: work still running then escaped the timed stream (launched on
another stream or thread), and such a result is not credited. That, not the wall time, is the test:
host stalls before the end event (a cudaMalloc when other processes hold the GPU's memory, a busy
CPU) lengthen the wall time of honest work, and once cost a reference kernel its timing points.
"""
from __future__ import annotations

import math
import statistics
import time
from dataclasses import asdict, dataclass, field
from typing import Callable, Sequence

import torch


@dataclass
class Timing:
    median_s: float
    mean_s: float
    sem_s: float
    samples: int
    wall_median_s: float
    busy_after_s: float = 0.0  # median time the device stayed busy after the timed stream finished
    honest_busy_after_s: float = 0.0  # the same wait after a GPU sleep as long as the median, measured next
    threads_started: int = 0  # most host threads a call left running after it returned
    lead_cycles: int = 0  # the GPU sleep queued before each call (host_lead_cycles)
    last: tuple | None = field(default=None, repr=False)  # (output, inputs) of the last timed call, if kept

    def rate(self, amount: float) -> float:
        """amount (bytes or FLOPs) per second at the median time."""
        return amount / self.median_s if self.median_s > 0 else float("inf")

    def as_dict(self) -> dict:
        return {k: v for k, v in asdict(self).items() if k != "last"}


# GPU clock cycles of the sleep queued before each timed call: at least about 250 us at the H100's
# 1.98 GHz (longer at lower clocks), more than one op's host-side dispatch takes; at most about 20 ms.
HOST_LEAD_CYCLES = 500_000
MAX_LEAD_CYCLES = 40_000_000


def _sleep_rate() -> float:
    """GPU sleep cycles per second on this device now (torch.cuda._sleep counts clock cycles)."""
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda._sleep(100_000)  # clocks up
    a.record()
    torch.cuda._sleep(4_000_000)
    b.record()
    b.synchronize()
    return 4_000_000 / max(a.elapsed_time(b) / 1e3, 1e-6)


def host_lead_cycles(fn, inputs: Sequence[object]) -> int:
    """Sleep cycles that cover twice the longest host dispatch time of `fn` on two of `inputs`: `fn`
    runs behind a long sleep, so that it never waits for the GPU (an op that synchronizes gets the
    longest lead). Computed per timing, with no state kept (the grader's data is watched)."""
    host_s = 0.0
    for i in range(2):
        torch.cuda.synchronize()
        torch.cuda._sleep(MAX_LEAD_CYCLES)
        t0 = time.perf_counter()
        fn(inputs[i % len(inputs)])
        host_s = max(host_s, time.perf_counter() - t0)
    torch.cuda.synchronize()
    return int(min(MAX_LEAD_CYCLES, max(HOST_LEAD_CYCLES, 2 * host_s * _sleep_rate())))


class math_mode:
    """Time (or check) under one math mode, restored on exit: TF32 on or off for both cuBLAS and
    cuDNN (off: strict fp32, the mode every fp32 benchmark here compares in), and, when given,
    cuDNN's autotuner (on: PyTorch's convolutions at their fastest algorithm).

    A class, not a generator: the grading process enters one for its whole life and never leaves
    it (grader/run/suite/conftest.py); a generator left suspended is closed when the interpreter
    exits, after torch's modules are torn down, and printed "Exception ignored in: <generator
    object math_mode>" at the end of every grading process. An instance entered and never exited
    leaves nothing to run."""

    def __init__(self, *, tf32: bool = False, cudnn_benchmark: bool | None = None):
        self.tf32, self.cudnn_benchmark = tf32, cudnn_benchmark
        self._before: list[tuple] = []  # a stack: one instance may be entered again inside itself

    def __enter__(self) -> None:
        flags = torch.backends
        self._before.append((flags.cudnn.allow_tf32, flags.cuda.matmul.allow_tf32, flags.cudnn.benchmark))
        flags.cudnn.allow_tf32 = flags.cuda.matmul.allow_tf32 = self.tf32
        if self.cudnn_benchmark is not None:
            flags.cudnn.benchmark = self.cudnn_benchmark

    def __exit__(self, *exc) -> None:
        flags = torch.backends
        flags.cudnn.allow_tf32, flags.cuda.matmul.allow_tf32, flags.cudnn.benchmark = self._before.pop()


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


@dataclass
class Sample:
    """One timed call: its output and what was measured around it."""

    output: object
    time_s: float  # between the CUDA events around the call
    wall_s: float  # host time from the sleep's start to the end event, less the sleep
    busy_after_s: float  # the device still busy after the end event (work on other streams)
    threads_started: int  # host threads the call left running


def prepare(inputs, refill=None, flush: "L2Flusher | None" = None) -> Callable[[], None]:
    """Before a timed call, on the host: fresh values made for the inputs (`refill.stage`, which
    poisons the inputs themselves), the device idle. Returns the late step that `timed_call` queues on
    the timed stream behind its GPU sleep: the fresh values copied in, then L2 flushed. The inputs are
    ready on the current stream only, just before the call: an op that starts ahead of it (on a stream of
    its own, during the sleep) reads the poison and answers wrong, whatever shape the checks used."""
    commit = refill.stage(inputs) if refill is not None else None
    torch.cuda.synchronize()

    def late() -> None:
        if commit is not None:
            commit()
        if flush is not None:
            flush()

    return late


# GPU clock cycles of a short sleep (under a microsecond) that marks a point on a stream for the watch
# (grader.verify.properties: the stream property's marks)
MARK_CYCLES = 1_000


def timed_call(fn, inputs, events, lead_cycles: int = HOST_LEAD_CYCLES,
               late: Callable[[], None] | None = None) -> Sample:
    """`fn(inputs)` between two CUDA events on the current stream, behind a GPU sleep that keeps
    the GPU busy while the host dispatches the op; `events` = (queued, start, end). `late` (from
    `prepare`, which comes first) is queued after the sleep, then a second sleep as long (its end opens
    the timed window; the two bracket the grader's own kernels for the watch,
    grader.verify.speed.grader_kernels), then the start event; after the end event, a mark (a short sleep:
    the caller's next work, which the call's work on any stream must precede)."""
    from grader.verify.observe import native_threads

    queued, start, end = events
    stream = torch.cuda.current_stream()
    threads = native_threads()
    t0 = time.perf_counter()
    queued.record(stream)
    torch.cuda._sleep(lead_cycles)
    if late is not None:
        late()
    torch.cuda._sleep(lead_cycles)
    start.record(stream)
    out = fn(inputs)
    end.record(stream)
    torch.cuda._sleep(MARK_CYCLES)  # the caller's next work on its stream (the watch: the call's must end first)
    threads_after = native_threads()
    end.synchronize()
    done = time.perf_counter()
    torch.cuda.synchronize()  # the whole device: waits for work on other streams too
    busy = time.perf_counter() - done
    slept = queued.elapsed_time(start) / 1e3
    return Sample(out, start.elapsed_time(end) / 1e3, done - t0 - slept, busy, max(0, threads_after - threads))


def new_events() -> tuple:
    return tuple(torch.cuda.Event(enable_timing=True) for _ in range(3))


def time_fn(
    fn: Callable[[object], object],
    inputs: Sequence[object],
    *,
    refill=None,
    inspect: Callable[[object, object], None] | None = None,
    keep_last: bool = False,
    warmup: int = 3,
    min_samples: int = 10,
    max_samples: int = 500,
    max_seconds: float = 3.0,
    target_sem: float = 0.01,
    flush: L2Flusher | None = None,
) -> Timing:
    """Time `fn(inputs[i % len(inputs)])` on the current stream.

    `refill` (grader.verify.speed.Refill) gives the set fresh values before each timed call, written on
    the timed stream just before it (not timed; see `prepare`), so no
    call sees the inputs of another; `inspect(output, input_set)` looks at each output after its call
    (not timed) and may raise to stop. With `keep_last`, `Timing.last` holds the last call's
    (output, input set), unchanged since that call."""
    flush = flush or L2Flusher()
    for i in range(warmup):
        fn(inputs[i % len(inputs)])
    lead = host_lead_cycles(fn, inputs)
    events = new_events()
    samples: list[Sample] = []
    last = None
    deadline = time.perf_counter() + max_seconds
    for i in range(max_samples):
        inp = inputs[i % len(inputs)]
        last = None  # the previous output is freed before the next call, as between untimed calls
        late = prepare(inp, refill, flush)
        sample = timed_call(fn, inp, events, lead, late)
        if inspect is not None:
            inspect(sample.output, inp)
        last = (sample.output, inp)
        sample.output = None
        samples.append(sample)
        if len(samples) >= min_samples:
            times = [s.time_s for s in samples]
            mean = statistics.fmean(times)
            sem = statistics.stdev(times) / math.sqrt(len(times))
            if sem <= target_sem * mean or time.perf_counter() > deadline:
                break
    times = [s.time_s for s in samples]
    mean = statistics.fmean(times)
    sem = statistics.stdev(times) / math.sqrt(len(times)) if len(times) > 1 else 0.0
    median = statistics.median(times)
    return Timing(median, mean, sem, len(times), statistics.median(s.wall_s for s in samples),
                  statistics.median(s.busy_after_s for s in samples), honest_busy_after(median, lead, events, flush),
                  max(s.threads_started for s in samples), lead, last if keep_last else None)


HONEST_SAMPLES = 10


def honest_busy_after(median_s: float, lead: int, events, flush: "L2Flusher") -> float:
    """The median wait for the whole device after an honest call of `median_s` on the timed stream (a GPU
    sleep that long, nothing on other streams), timed as each sample is, in the same process just after
    its samples: what a device sync costs this host now. The same honest op's wait was 20 us in one
    process and 90-117 us in another on one H200 host, so a baseline measured elsewhere misjudges it."""
    cycles = max(1, int(median_s * _sleep_rate()))
    busy = []
    for _ in range(HONEST_SAMPLES):
        late = prepare(None, None, flush)
        busy.append(timed_call(lambda _: torch.cuda._sleep(cycles), None, events, lead, late).busy_after_s)
    return statistics.median(busy)


def output_tensors(out) -> list:
    """The tensors of an op's result, in order: a tensor, or the tensors of a (nested) tuple or list;
    anything else is returned as is, for the caller to reject."""
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in output_tensors(o)]
    return [out]


def input_tensors(inputs) -> list:
    """The tensors of an input set (nested tuples, lists and dicts), in a fixed order."""
    if isinstance(inputs, torch.Tensor):
        return [inputs]
    if isinstance(inputs, dict):
        return [t for k in sorted(inputs) for t in input_tensors(inputs[k])]
    if isinstance(inputs, (tuple, list)):
        return [t for x in inputs for t in input_tensors(x)]
    return []


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
