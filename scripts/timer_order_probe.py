#!/usr/bin/env python3
"""How the order of a timed call's preparation moves the time the events measure (grader.verify.timer).

For some exercises' benchmarks, with the reference solution, in one process: the median event time of
SAMPLES timed calls under each order, beside the op's kernel time alone (the union of its kernels'
intervals in a watched call: grader.verify.speed.busy_time):
  first      inputs refilled and L2 flushed, synchronise, one sleep, start event, the op (the order before
             the inputs arrived late)
  late-mark  synchronise, one sleep, the inputs' copies and the flush, a short sleep, start, the op
  late-two   synchronise, one sleep, the copies and the flush, a second sleep as long, start, the op
             (grader.verify.timer.timed_call)
then the same again after WINDOWS observation windows of a small op (a grading process opens about 300
before its timing), and a fourth order, late-two with the host's dispatch of the op timed: how long the
host took from the first sleep's launch to the op's return against the GPU's time before the start event.

    PYTHONPATH=. python3 scripts/timer_order_probe.py [EXERCISES...]   # default 01 04 06; ~1 minute on an H200
"""
from __future__ import annotations

import statistics
import sys
import time

import torch

from grader.bench.benchmark_extras import _reference
from grader.specs import by_exercise
from grader.verify.observe import is_sleep, observe
from grader.verify.speed import Refill, busy_time
from grader.verify.timer import MARK_CYCLES, L2Flusher, host_lead_cycles, new_events

SAMPLES = 30
WINDOWS = 300


def one(order: str, fn, inputs, refill: Refill, flush: L2Flusher, lead: int, events) -> tuple[float, float, float]:
    """(event time, host time from the first launch to the op's return, GPU time before the start event)."""
    queued, start, end = events
    stream = torch.cuda.current_stream()
    if order == "first":
        refill.stage(inputs)()
        flush()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        queued.record(stream)
        torch.cuda._sleep(lead)
    else:
        commit = refill.stage(inputs)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        queued.record(stream)
        torch.cuda._sleep(lead)
        commit()
        flush()
        torch.cuda._sleep(MARK_CYCLES if order == "late-mark" else lead)
    start.record(stream)
    out = fn(inputs)
    host = time.perf_counter() - t0
    end.record(stream)
    end.synchronize()
    del out
    return start.elapsed_time(end) / 1e3, host, queued.elapsed_time(start) / 1e3


def kernel_time(fn, inputs, refill: Refill) -> float:
    times = []
    for _ in range(3):
        refill.stage(inputs)()
        torch.cuda.synchronize()
        _, seen = observe(lambda: fn(inputs), hidden=True)
        times.append(busy_time([k for k in seen.kernels if not is_sleep(k)]))
    return statistics.median(times)


def probe(exercise: str, orders=("first", "late-mark", "late-two")) -> None:
    spec = by_exercise(exercise)
    bench = spec.benchmark()
    module = _reference(exercise)
    inputs = bench.make_inputs(1)
    refill, flush, events = Refill(bench), L2Flusher(), new_events()

    def fn(inp):
        return bench.call(module, inp)

    for _ in range(3):
        fn(inputs)
    lead = host_lead_cycles(fn, [inputs])
    kernels = kernel_time(fn, inputs, refill)
    for when in ("fresh process", f"after {WINDOWS} observation windows"):
        if when != "fresh process":
            small = torch.ones(16, device="cuda")
            for _ in range(WINDOWS):
                observe(lambda: small.add_(1), hidden=True)
        for order in orders:
            got = [one(order, fn, inputs, refill, flush, lead, events) for _ in range(SAMPLES)]
            t = statistics.median(g[0] for g in got)
            host = statistics.median(g[1] for g in got)
            before = statistics.median(g[2] for g in got)
            print(f"{exercise} {when:32s} {order:9s} events {t * 1e6:8.1f} us  kernels {kernels * 1e6:8.1f} us  "
                  f"gap {(t - kernels) * 1e6:7.1f} us  host to the op's return {host * 1e6:7.1f} us, GPU before start "
                  f"{before * 1e6:7.1f} us (lead {lead} cycles)", flush=True)


if __name__ == "__main__":
    print(torch.cuda.get_device_name(), torch.__version__, flush=True)
    for ex in sys.argv[1:] or ["01", "04", "06"]:
        probe(ex)
