"""The timed part of grading: the submission's op at the benchmark's shape, every timed call a
call the grader can check.

In the grading process (`measure_submission`), only the submission's op is timed; the reference
solution, PyTorch's op and the device's limit are timed by a trusted process that never runs
submitted code (grader.run.yardstick), and the parent puts the two together (grader.verify.scoring). What makes
a timed call indistinguishable from a checked one, and checked:

- Fresh inputs: before every call the input set is refilled in place from a secret seed, so no
  call sees the values of another (a memo by tensor, by pointer or by version, or a replayed
  output, returns the wrong answer), and nothing can be computed ahead of time. The fresh values
  are written on the timed stream just before the call, the set holding NaN until then: an op that
  runs ahead of the current stream (on a stream of its own, during the timer's sleep) reads NaN
  where its work starts before the copies end. Whether it does is a race with the host's dispatch
  (on an H200, 2026-12-02, three such ops read the fresh values in every checked timed call); the
  watched calls below judge the order itself.
- Every output looked at: a plain torch.Tensor, on the GPU, sharing no memory with the inputs;
  each call's output is checked in full against the float64 reference with a chance decided after
  the call returned, and always the last; the elements of some of them are saved for the parent to
  re-check (grader.verify.judge). A wrong timed output fails the correctness group it belongs to.
- Watched: a few timed calls are observed in the process-wide watch's hidden windows
  (grader.verify.observe.WATCH), as the checked calls are, so the op sees the same state whether it is
  checked, observed or timed; the watch sees every kernel of the process with its stream and
  duration: each must be the exercise's own, start once the timed stream reaches the call and end
  before the timed stream's next work (a mark queued as the call returns), or the group the timed
  calls vouch for fails (`unordered_work`); and the timed median may not be far below what those
  kernels took. Between its windows the watch profiles nothing, so the other
  timed calls, and the yardstick's, run without a profiler's overhead.
  Host threads left running by a call are counted, and the device must be idle after the end event.
- One state: the global math flags are the exercise's for the whole process (Spec.math), checks
  and timing alike.
- No memory kept per call: before the timing, calls at the benchmark's shape with their outputs freed
  must leave no PyTorch memory allocated past their warm-up (`grown_per_calls`); an op that keeps a
  tensor with every call fails the group its timed calls vouch for.
"""
from __future__ import annotations

import random
import secrets
import time
from typing import Callable

import torch

from grader.verify.timer import (L2Flusher, copy_bandwidth, input_tensors, matmul_flops, new_events, output_tensors,
                                 prepare, time_fn, timed_call)
from grader.verify.checks import CheckFailure, Comparison, require_plain_tensor
from grader.verify.observe import Observation, is_sleep, observe, unjoined_work
from grader.verify.scoring import speed_verdict
from grader.verify.spec import Benchmark, Context, Spec

# Grading caps each timed op at this many seconds of sampling (make bench allows more): the median of
# the samples gathered by then is stable to a few percent, and the edit-grade loop stays short.
GRADING_SECONDS = 1.0
VERIFY_CHANCE = 0.15  # after each timed call, the chance that its output is checked in full
JUDGED_CALLS = 2  # timed calls besides the last whose sampled outputs the parent re-checks
JUDGED_ELEMENTS = 4096  # elements of each output tensor sent to the parent
PROFILED_CALLS = 3
CHUNK = 1 << 24  # elements per piece when a large output is checked against a pointwise reference
WHOLE_LIMIT = 1 << 26  # outputs up to this many elements are checked against one whole reference


def bench_group(spec: Spec, k: int = 0, bench: Benchmark | None = None) -> str:
    """The correctness group output `k` of a timed call vouches for."""
    bench = bench or spec.benchmark()
    groups = getattr(bench, "output_groups", ()) or ()
    if k < len(groups):
        return groups[k]
    return spec.perf_requires[0] if spec.perf_requires else "forward"


class Refill:
    """Gives an input set fresh values in place, from a seed nobody can guess, and remembers it (the
    parent regenerates the inputs of a judged call from it)."""

    def __init__(self, bench: Benchmark, rng: random.Random | None = None):
        self.bench, self.seed = bench, None
        self.rng = rng or random.SystemRandom()

    def stage(self, inputs) -> Callable[[], None]:
        """Fresh values for the set, made now from a new seed, and its floating-point tensors filled with
        NaN now; returns their copy into the set, for the timed call to queue on its stream late
        (grader.verify.timer.prepare): an op that reads its inputs ahead of the current stream reads NaN."""
        self.seed = self.rng.getrandbits(62)
        fresh = self.bench.make_inputs(self.seed)
        pairs = list(zip(input_tensors(inputs), input_tensors(fresh), strict=True))
        with torch.no_grad():
            for dst, _ in pairs:
                if dst.is_floating_point():
                    dst.fill_(float("nan"))

        def commit() -> None:
            with torch.no_grad():
                for dst, src in pairs:
                    dst.copy_(src)
            # their memory back now (reused only behind the copies, on this stream): the op's own allocations
            # land where they did when the inputs were refilled before the sleep, call after call
            pairs.clear()

        return commit


def _storage_range(t: torch.Tensor) -> tuple[int, int]:
    s = t.untyped_storage()
    return s.data_ptr(), s.data_ptr() + s.nbytes()


def check_structure(out, inputs, what: str) -> list[torch.Tensor]:
    """The output's tensors, each a plain torch.Tensor on the GPU sharing no memory with an input."""
    tensors = output_tensors(out)
    ins = [_storage_range(t) for t in input_tensors(inputs) if t.numel()]
    for k, t in enumerate(tensors):
        name = what if len(tensors) == 1 else f"{what} [output {k}]"
        require_plain_tensor(t, name)
        if not t.is_cuda:
            raise CheckFailure(f"{name}: on {t.device}, expected on the GPU")
        if t.numel():
            lo, hi = _storage_range(t)
            if any(lo < b and a < hi for a, b in ins):
                raise CheckFailure(f"{name}: shares memory with an input; an op returns new tensors")
    return tensors


def verify(bench: Benchmark, reference, out, inputs, what: str) -> dict[int, str]:
    """Check every element of a timed call's outputs against the float64 reference; returns the
    problems by output index (empty when right)."""
    tensors = check_structure(out, inputs, what)
    tolerances = bench.tolerance(inputs)
    whole = None
    problems: dict[int, str] = {}
    if len(tensors) != len(tolerances):
        return {0: f"{what}: {len(tensors)} output tensor(s), expected {len(tolerances)}"}
    shapes = bench.shapes(inputs) if getattr(bench, "shapes", None) else None
    for k, (a, tol) in enumerate(zip(tensors, tolerances)):
        name = what if len(tensors) == 1 else f"{what} [output {k}]"
        cmp = Comparison(tol, name)
        if a.numel() > WHOLE_LIMIT and shapes is not None:
            if tuple(a.shape) != tuple(shapes[k]):
                problems[k] = f"{name}: shape {tuple(a.shape)}, expected {tuple(shapes[k])}"
                continue
            flat = a.reshape(-1)
            for start in range(0, flat.numel(), CHUNK):
                piece = slice(start, min(flat.numel(), start + CHUNK))
                where = [piece if j == k else slice(0, 0) for j in range(len(tensors))]
                cmp.add(flat[piece], reference(inputs, where)[k], offset=start)
        else:
            if whole is None:
                whole = reference(inputs, None)
            if tuple(a.shape) != tuple(whole[k].shape):
                problems[k] = f"{name}: shape {tuple(a.shape)}, expected {tuple(whole[k].shape)}"
                continue
            cmp.add(a, whole[k])
        problem = cmp.problem()
        if problem:
            problems[k] = problem
    return problems


def sample_outputs(out, seed: int, rng: random.Random) -> dict:
    """Random elements of each output tensor, chosen now (after the call), for the parent."""
    record = {"seed": seed, "where": [], "values": []}
    for t in output_tensors(out):
        n = t.numel()
        g = torch.Generator().manual_seed(rng.getrandbits(62))
        idx = torch.randint(0, max(n, 1), (min(JUDGED_ELEMENTS, n),), generator=g)
        record["where"].append(idx)
        record["values"].append(t.detach().reshape(-1)[idx.to(t.device)].cpu().clone())
    return record


class Inspector:
    """Looks at every timed output: its structure always; in full with a chance decided after the
    call; some sampled for the parent."""

    def __init__(self, spec: Spec, bench: Benchmark, refill: Refill, rng: random.Random):
        self.spec, self.bench, self.refill, self.rng = spec, bench, refill, rng
        self.verified = 0
        self.wrong: dict[str, str] = {}  # group -> why
        self.judged: list[dict] = []

    def fail(self, problems: dict[int, str]) -> None:
        for k, why in problems.items():
            self.wrong.setdefault(bench_group(self.spec, k, self.bench), f"a timed call at the benchmark's shape: {why}")

    def __call__(self, out, inputs, always: bool = False) -> None:
        try:
            if always or self.rng.random() < VERIFY_CHANCE:
                self.verified += 1
                problems = verify(self.bench, self.bench.reference, out, inputs, "a timed output")
                if problems:
                    self.fail(problems)
                    raise CheckFailure(next(iter(problems.values())))
                if len(self.judged) < JUDGED_CALLS and self.rng.random() < 0.5:
                    self.judged.append(sample_outputs(out, self.refill.seed, self.rng))
            else:
                check_structure(out, inputs, "a timed output")
        except CheckFailure as e:
            if not self.wrong:
                self.wrong[bench_group(self.spec, 0, self.bench)] = f"a timed call at the benchmark's shape: {e}"
            raise

    def last(self, out, inputs) -> None:
        self(out, inputs, always=True)
        self.judged.append(sample_outputs(out, self.refill.seed, self.rng))


def busy_time(kernels) -> float:
    """How long the GPU ran any of `kernels` (each with start_s and duration_s): the union of their
    intervals, so that kernels a library runs side by side on its own streams count once."""
    total, end = 0.0, float("-inf")
    for k in sorted(kernels, key=lambda k: k.start_s):
        start, stop = k.start_s, k.start_s + k.duration_s
        if stop > end:
            total += stop - max(start, end)
            end = stop
    return total


def grader_kernels(kernels) -> tuple[list, float | None, object]:
    """The kernels of a watched timed call (grader.verify.timer.timed_call) less the grader's own: its two
    GPU sleeps (the first two on the timed stream, which the op's own work there follows), its late step
    between them on that stream (the inputs' copies, the L2 flush) and the mark after the end event (the
    last sleep on that stream, when it follows the two); when the timed window opened (the second
    sleep's end), or None without the sleeps; and the mark, or None."""
    kernels = sorted(kernels, key=lambda k: k.start_s)
    sleeps = [k for k in kernels if is_sleep(k)]
    if not sleeps:
        return kernels, None, None
    stream = sleeps[0].stream  # the first kernel of all: the device was idle before the grader's sleep
    on_timed = [k for k in sleeps if k.stream == stream]
    first, second = (on_timed + [sleeps[0]])[:2]
    mark = on_timed[-1] if len(on_timed) > 2 else None
    lo, hi = first.start_s + first.duration_s, second.start_s
    grader = {first, second, mark}
    work = [k for k in kernels
            if k not in grader and not (k.stream == stream and lo - 1e-6 <= k.start_s <= hi + 1e-6)]
    return work, second.start_s + second.duration_s, mark


def unordered_work(work: list, opened: float | None, mark) -> str | None:
    """Why a watched timed call's work (`grader_kernels`) was not ordered on the current stream, or None:
    a kernel that started before the timed window opened did not wait for the current stream (it ran
    during the grader's sleep, reading inputs the caller had not written yet: they hold NaN until just
    before the call), and one of another stream still running at the mark was never waited for (a caller
    reading the result on its stream reads it unfinished). Either is a wrong op, whatever its values
    happened to be: which values a race reads depends on how fast the host dispatched."""
    what = "a timed call at the benchmark's shape"
    early = sorted({k.name[:80] for k in work if opened is not None and k.start_s < opened - 1e-6})
    if early:
        return (f"{what}: kernels of the call ({'; '.join(early[:2])}) started before the current stream reached "
                "the call, during the grader's GPU sleep: work that does not wait for the current stream reads "
                "inputs the caller has not written yet, and escapes the timing (launch on the current stream, or "
                "make the op's own stream wait for it: side.wait_stream(current))")
    if mark is None:
        return None
    return unjoined_work(Observation(work + [mark]), mark.stream, what)


def watched_calls(spec: Spec, bench: Benchmark, call, inputs, refill: Refill, inspect, flush,
                  lead_cycles: int) -> dict:
    """A few timed calls observed in the watch's hidden windows (like the others, to the op): their
    kernels (the exercise's own, each between the timed window's opening and the mark: `unordered_work`),
    and how long those kernels took on the GPU."""
    rule = bench.kernels or spec.kernel_rule()
    events = new_events()
    found = {"kernel_time_s": [], "profiled_time_s": [], "foreign": "", "unordered": ""}
    for _ in range(PROFILED_CALLS):
        late = prepare(inputs, refill, flush)
        sample, seen = observe(lambda: timed_call(call, inputs, events, lead_cycles, late),
                               cpu_ops=bool(rule and rule.needs_cpu_ops), hidden=True)
        inspect(sample.output, inputs, always=True)
        work, opened, mark = grader_kernels(seen.kernels)
        if rule is not None and not found["foreign"]:
            found["foreign"] = rule.problem(Observation(work, seen.ops), "a timed call at the benchmark's shape") or ""
        if not found["unordered"]:
            found["unordered"] = unordered_work(work, opened, mark) or ""
        found["kernel_time_s"].append(busy_time(work))
        found["profiled_time_s"].append(sample.time_s)
    for key in ("kernel_time_s", "profiled_time_s"):
        values = sorted(found[key])
        found[key] = values[len(values) // 2] if values else 0.0
    return found


# PyTorch memory that calls at one shape, past their warm-up and with their outputs freed, may leave
# allocated: none is needed (caches, plans, workspaces and graphs are made by the first calls; 10's graph
# is captured on a key's second call), and an op keeping a tensor of the benchmark's size per call leaves
# megabytes
KEPT_BYTES = 1 << 20
KEPT_CALLS = 3


def grown_per_calls(call, inputs, refill: Refill, warm: int = 2) -> int:
    """Bytes of PyTorch memory that KEPT_CALLS calls at the benchmark's shape left allocated, after `warm`
    calls and with every output freed: before the timing, which would run out of memory first."""
    def calls(n: int) -> None:
        for _ in range(n):
            prepare(inputs, refill)()
            out = call(inputs)
            del out

    calls(warm)
    torch.cuda.synchronize()  # allocated bytes fall at each free, record_stream or not: no event to wait for
    held = torch.cuda.memory_allocated()
    calls(KEPT_CALLS)
    torch.cuda.synchronize()
    return torch.cuda.memory_allocated() - held


def memory_kept(grown: int) -> str | None:
    """Why KEPT_CALLS calls that left `grown` more bytes allocated keep memory with every call, or None."""
    if grown < KEPT_BYTES:
        return None
    return (f"{KEPT_CALLS} more calls at the benchmark's shape, their outputs freed, left {grown / 2**20:.1f} MiB more "
            "memory allocated than before them: the op keeps memory with every call (a tensor held in a list, a "
            "cache without a bound), and a model calling it in a loop runs out of memory")


def measure_submission(spec: Spec, ctx: Context) -> dict:
    """Time the submission's op (in its own grading process): the raw numbers and what was wrong
    with the timed calls. The parent scores them against the yardstick (grader.verify.scoring)."""
    bench = spec.benchmark()
    rng = random.SystemRandom()
    refill = Refill(bench, rng)
    flush = L2Flusher()
    inputs = bench.make_inputs(secrets.randbits(62))
    inspector = Inspector(spec, bench, refill, rng)
    result: dict = {"label": bench.label, "unit": bench.unit, "work": bench.work, "verdict": "", "wrong": {}}

    def call(inp):
        return bench.call(ctx.module, inp)

    phases = result["phase_s"] = {}
    clock = time.perf_counter()

    def phase(name: str) -> None:
        nonlocal clock
        now = time.perf_counter()
        phases[name] = round(now - clock, 3)
        clock = now

    try:
        kept = memory_kept(grown_per_calls(call, inputs, refill))
        if kept:
            raise CheckFailure(kept)
        phase("memory per call")
        timing = time_fn(call, [inputs], refill=refill, inspect=inspector, keep_last=True, flush=flush,
                         max_seconds=GRADING_SECONDS)
        inspector.last(*timing.last)
        timing.last = None
        phase("timed calls")
        watched = watched_calls(spec, bench, call, inputs, refill, inspector, flush, timing.lead_cycles)
        phase("profiled calls")
        rule = bench.kernels or spec.kernel_rule()
        for label, (variant, reference) in bench.variants.items():
            prepare(inputs, refill, flush)()  # the fresh values in place now: this call is not timed
            what = f"{label} at the benchmark's shape"
            out, seen = observe(lambda: variant(ctx.module, inputs), cpu_ops=bool(rule and rule.needs_cpu_ops), hidden=True)
            problems = verify(bench, reference, out, inputs, what)
            foreign = rule.problem(seen, what) if rule is not None and not problems else None
            if foreign:
                problems = {0: foreign}
            if problems:
                inspector.fail(problems)
                raise CheckFailure(next(iter(problems.values())))
        phase("other parameter values")
    except CheckFailure as e:
        result["wrong"] = inspector.wrong or {bench_group(spec, 0, bench): str(e)}
        result["verdict"] = f"wrong result on a timed call: {e}"
        result["judged"] = inspector.judged
        return result
    result.update(time_s=timing.median_s, samples=timing.samples, rate=timing.rate(bench.work),
                  busy_after_s=timing.busy_after_s, honest_busy_after_s=timing.honest_busy_after_s,
                  wall_s=timing.wall_median_s,
                  threads_started=timing.threads_started, verified=inspector.verified, **watched)
    result["judged"] = inspector.judged
    problem = watched["foreign"] or watched["unordered"]
    if problem:
        result["wrong"] = {bench_group(spec, 0, bench): problem}
        result["verdict"] = problem
    return result


def measure_yardstick(spec: Spec, reference_module) -> dict:
    """The trusted half (grader.run.yardstick, never beside submitted code): the reference solution's
    rate (or PyTorch's times the solution's recorded ratio, without solutions/), PyTorch's, and the
    device's limit, on inputs refilled as the submission's are."""
    from grader.verify.observe import WATCH

    # the watch's thread as the submissions' processes have it (grader.verify.observe.WATCH; idle between
    # its windows), so both sides of the ratio are timed in the same state
    WATCH.start()
    bench = spec.benchmark()
    flush = L2Flusher()
    refill = Refill(bench)
    inputs = bench.make_inputs(secrets.randbits(62))
    baseline = time_fn(bench.baseline, [inputs], refill=refill, flush=flush, max_seconds=GRADING_SECONDS)
    found = {"label": bench.label, "unit": bench.unit, "work": bench.work,
             "baseline_rate": baseline.rate(bench.work), "baseline_busy_after_s": baseline.busy_after_s}
    if reference_module is not None:
        reference = time_fn(lambda inp: bench.call(reference_module, inp), [inputs], refill=refill, flush=flush,
                            max_seconds=GRADING_SECONDS)
        found.update(reference_rate=reference.rate(bench.work), reference_source="solution")
    else:
        found.update(reference_rate=found["baseline_rate"] * spec.solution_vs_baseline,
                     reference_source=f"PyTorch x {spec.solution_vs_baseline:g} (no solutions/ folder)")
    found.update(device_limit(bench, flush))
    return found


_limits: dict[tuple, dict] = {}  # measured once per process (the yardstick's: once per run)


def device_limit(bench: Benchmark, flush) -> dict:
    """The device's limit for a benchmark: the copy bandwidth at its byte count, or strict-fp32
    cuBLAS's rate, measured now (once per process and kind)."""
    key = (bench.unit, int(bench.work) if bench.unit == "B" else 0)
    if key not in _limits:
        if bench.unit == "B":
            _limits[key] = {"limit": copy_bandwidth(int(bench.work), flush=flush), "limit_name": "copy bandwidth"}
        else:
            _limits[key] = {"limit": matmul_flops(flush=flush), "limit_name": "cuBLAS fp32"}
    return _limits[key]


def combine(submission: dict, yardstick: dict | None) -> dict:
    """The submission's timing beside the yardstick's numbers, with the ratios the report shows."""
    perf = dict(submission)
    if yardstick:
        perf.update({k: v for k, v in yardstick.items() if k not in ("label", "unit", "work")})
    if perf.get("rate") and perf.get("reference_rate"):
        perf["ratio"] = perf["rate"] / perf["reference_rate"]
    if perf.get("rate") and perf.get("limit"):
        perf["fraction_of_limit"] = perf["rate"] / perf["limit"]
    return perf


def measure(spec: Spec, ctx: Context, reference_module) -> dict:
    """Both halves in this process, with the verdict (the notebooks' own timing, where the student
    grades their own work)."""
    with spec.math():
        perf = measure_submission(spec, ctx)
        if "rate" in perf:
            perf = combine(perf, measure_yardstick(spec, reference_module))
    perf["tier_fraction"] = 0.0
    if "rate" in perf:
        perf["tier_fraction"], perf["verdict"] = speed_verdict(spec, perf)
    return perf
