"""Watching what an op did while it ran: which kernels, on which streams, for how long, and whether
it left host threads behind.

The profiler (CUPTI) sees every kernel of the process, whichever thread or stream launched it, with
its stream and its duration on the GPU; `observe(fn)` returns them with the PyTorch operators that
were dispatched. A `KernelRule` says which of those an exercise's op may run.

One watch (`WATCH`): an op must not be able to tell a checked call from an observed one, so that
what it does when its kernels are looked at is what it does when its values are, and the reverse.
The grading process starts the watch before the submission is imported and keeps it to the end: a
thread of its own that holds a profiler session (CPU and GPU activity, every thread) around each
call the grader observes, and none between them (a session running between windows recorded all of
the grader's own work too, whose parsing at every window doubled a grade's time). Because the
session belongs to another thread, the queries an op can make on its own thread
(`torch.autograd.profiler._is_profiler_enabled`, `torch._C._autograd._profiler_enabled()`,
`_profiler_type()`) read "not profiling" for every call, checked, observed or timed alike. Two
kinds of observation window, each holding one call's work alone:

- hidden (`observe(fn, hidden=True)`): the watch's own session; the op sees nothing change. The
  grader's value checks (grader.verify.properties.invoke), the huge checks and the timed calls it watches
  run so: an op taking PyTorch's path whenever no profiler is visible shows PyTorch's kernels there.
- visible (`observe(fn)`): a session on the op's own thread, which every query reports; the
  own-kernel checks run so and compare the call's values too, so an op wrong only while a profiler
  is visible loses there.

Whatever the op reads, every state it can be called in is both value-checked and kernel-checked.
The sessions have one configuration (the same activities) whichever the window.
"""
from __future__ import annotations

import contextlib
import os
import queue
import re
import threading
import time
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Kernel:
    name: str
    stream: int
    duration_s: float
    start_s: float


@dataclass
class Observation:
    kernels: list[Kernel] = field(default_factory=list)  # GPU kernels, copies and sets, in start order
    ops: list[str] = field(default_factory=list)  # PyTorch operators dispatched on the host ("aten::mm")


def _activities() -> list:
    from torch.profiler import ProfilerActivity
    import torch

    # one configuration for every session, whatever the window looks for: an op cannot learn from
    # the activities which kind of check called it
    return [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])


def _session(every_thread: bool):
    """A profiler session, not yet entered: every thread's operators (the watch's, held by another
    thread than the op's), or the entering thread's (a visible window)."""
    from torch.profiler import profile

    if every_thread:
        try:
            from torch.profiler import _ExperimentalConfig

            return profile(activities=_activities(), experimental_config=_ExperimentalConfig(profile_all_threads=True))
        except (ImportError, TypeError):  # an older PyTorch: GPU kernels only (CUPTI sees every thread's)
            pass
    return profile(activities=_activities())


class Watch:
    """The process-wide watch: a thread of its own from `start()` on, which holds a profiler session
    around each hidden observation window (see the module's docstring)."""

    def __init__(self) -> None:
        self._thread: threading.Thread | None = None
        self._requests: queue.Queue = queue.Queue()
        self._replies: queue.Queue = queue.Queue()
        self.open = 0  # observation windows open now (a window inside another observes nothing new)
        self.windows = 0  # windows observed so far (hidden and visible)
        self.overhead_s = 0.0  # their cost beyond the calls they held: sessions, synchronizing, reading events

    @property
    def on(self) -> bool:
        return self._thread is not None

    def integrity_state(self) -> str:
        """What grader.verify.integrity compares before and after the checks: the watch's windows and
        counters change as they run; that it is on (and its channels) must not."""
        return f"{self.on}:{id(self._requests)}:{id(self._replies)}"

    def start(self) -> None:
        """Start the watch (before the submission is imported). Idempotent."""
        if self.on:
            return
        import torch

        # kineto initializes on the thread that first profiles; it must be the one that imported torch
        with _session(every_thread=False):
            pass
        self._thread = threading.Thread(target=self._serve, name="course-watch", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """End the watch (the grader's own tests; the grading process keeps it to its end)."""
        if self.on:
            self._ask("stop")
            self._ask("exit")
            self._thread.join()
            self._thread = None

    def _serve(self) -> None:
        import torch.autograd.profiler as autograd_profiler

        prof = None
        while True:
            what = self._requests.get()
            try:
                if what == "start":
                    prof = _session(every_thread=True)
                    prof.__enter__()
                    # profile() raises this module-wide flag for every thread; the session is this
                    # thread's, and an op's thread must read what it reads outside any window
                    if hasattr(autograd_profiler, "_set_is_profiler_enabled"):
                        autograd_profiler._set_is_profiler_enabled(False)
                    else:
                        autograd_profiler._is_profiler_enabled = False
                    self._replies.put(None)
                elif what == "stop":
                    done, prof = prof, None
                    if done is not None:
                        done.__exit__(None, None, None)
                    self._replies.put(done)
                else:
                    self._replies.put(None)
                    return
            except BaseException as e:  # noqa: BLE001: handed to the thread that asked
                self._replies.put(e)

    def _ask(self, what: str):
        self._requests.put(what)
        reply = self._replies.get()
        if isinstance(reply, BaseException):
            raise reply
        return reply


WATCH = Watch()


@contextlib.contextmanager
def visible_session():
    """A profiler session on this thread (one the op can see), as the visible windows of `observe`
    hold, for a check that reads the profiler's events itself (10's no-PyTorch-convolution check):
    kineto runs one session at a time, so none may be opened beside the watch's."""
    if WATCH.open:
        raise RuntimeError("visible_session inside another observation window")
    WATCH.open += 1
    try:
        with _session(every_thread=False) as prof:
            yield prof
    finally:
        WATCH.open -= 1
        WATCH.windows += 1


def observe(fn, cpu_ops: bool = False, hidden: bool = False, queued_ok: bool = False) -> tuple[object, Observation]:
    """Run `fn()` in an observation window and return its result with what ran on the GPU (and, with
    `cpu_ops`, which PyTorch operators were dispatched). Visible (the default): a session on this
    thread, which the op can query; `hidden`: the watch's own session (started here if it is not
    on yet), which it cannot. The device is synchronized before the call (unless `queued_ok`: the
    caller queued only copies, fills and sleeps, which a rule allows, e.g. inputs made late on a
    side stream) and after it, so the observation holds all of the call's work and nothing else."""
    import torch
    from torch.autograd import DeviceType

    if WATCH.open:  # inside another window: that one observes this call
        return fn(), Observation()
    began = time.perf_counter()
    inside = 0.0
    cuda = torch.cuda.is_available()
    if hidden:
        WATCH.start()
    if cuda and not queued_ok:
        torch.cuda.synchronize()
    if hidden:
        WATCH.open += 1
        try:
            WATCH._ask("start")
            try:
                t = time.perf_counter()
                result = fn()
                if cuda:
                    torch.cuda.synchronize()
                inside = time.perf_counter() - t
            finally:
                prof = WATCH._ask("stop")
        finally:
            WATCH.open -= 1
            WATCH.windows += 1
    else:
        with visible_session() as prof:
            t = time.perf_counter()
            result = fn()
            if cuda:
                torch.cuda.synchronize()
            inside = time.perf_counter() - t
    seen = Observation()
    for e in prof.events():
        if e.device_type == DeviceType.CUDA:
            seen.kernels.append(Kernel(e.name, int(getattr(e, "device_resource_id", -1) or -1),
                                       (e.time_range.end - e.time_range.start) / 1e6, e.time_range.start / 1e6))
        elif cpu_ops and e.name.startswith("aten::"):
            seen.ops.append(e.name)
    seen.kernels.sort(key=lambda k: k.start_s)
    WATCH.overhead_s += time.perf_counter() - began - inside
    return result, seen


def profiler_visible() -> dict:
    """What an op can ask about profiling on its own thread (the grader's tests compare these across
    checks): every public query we know of."""
    import torch
    import torch.autograd.profiler as autograd_profiler

    found = {"torch.autograd.profiler._is_profiler_enabled": bool(autograd_profiler._is_profiler_enabled),
             "torch._C._autograd._profiler_enabled()": bool(torch._C._autograd._profiler_enabled()),
             "torch._C._autograd._profiler_type()": str(torch._C._autograd._profiler_type())}
    if torch.cuda.is_available():
        found["torch.cuda.is_current_stream_capturing()"] = bool(torch.cuda.is_current_stream_capturing())
    return found


def kernel_function(name: str) -> str:
    """The unqualified function name of a profiled kernel: `leaky_relu_kernel` for
    `void (anonymous namespace)::leaky_relu_kernel<float>(float const*, ...)`, but
    `vectorized_elementwise_kernel` for PyTorch's `void at::native::vectorized_elementwise_kernel<4,
    at::native::(anonymous namespace)::leaky_relu_kernel(...)...>(...)`, whose template arguments
    merely mention a name like ours."""
    s = name.strip().removeprefix("void ").replace("(anonymous namespace)::", "")
    return re.split(r"[<(]", s, maxsplit=1)[0].split("::")[-1].strip()


# What an op may run beside its own kernels: copies and fills (`x.contiguous()`, `at::zeros`), which
# compute nothing. PyTorch's copy and fill kernels are recognised by the functor in their template
# arguments; the profiler labels the driver's own copies and sets "Memcpy ..." and "Memset ...".
HOUSEKEEPING = ("Memcpy DtoD", "Memset")
_HOUSEKEEPING_FUNCTORS = re.compile(r"direct_copy_kernel|copy_kernel_cuda|FillFunctor|fill_kernel_cuda")
# the grader's own GPU sleep (torch.cuda._sleep), queued before every timed call
SLEEP_KERNEL = "spin_kernel"


def is_sleep(kernel) -> bool:
    """Whether an observed kernel is a GPU sleep (torch.cuda._sleep): the grader's marks and timer sleeps."""
    return kernel_function(kernel.name) == SLEEP_KERNEL


def stream_mark(seen: Observation, stream: int | None):
    """The mark in `seen`: a short sleep queued on `stream` (the current one) as a call returned, the caller's
    next work there (grader.verify.properties._held_then_marked, grader.verify.timer.timed_call); the last
    sleep on `stream`, or None (None also where the stream's id is unknown)."""
    marks = [k for k in seen.kernels if k.stream == stream and is_sleep(k)] if stream is not None else []
    return marks[-1] if marks else None


def unjoined_work(seen: Observation, stream: int | None, what: str) -> str | None:
    """Why the call's work was not all ordered before the current stream's next work, or None. `seen`: a
    window holding the call and then a mark on `stream` (the current one; `stream_mark`); a kernel of
    another stream still running when that sleep began, or starting after, ran past the point where the
    caller's stream went on: the op returned without making its stream wait for that work. A library
    that forks onto its own streams and joins back ends them all first."""
    mark = stream_mark(seen, stream)
    if mark is None:
        return None
    late = sorted({k.name[:80] for k in seen.kernels if k.stream != stream and k.start_s + k.duration_s > mark.start_s})
    if not late:
        return None
    return (f"{what}: kernels of the call ({'; '.join(late[:2])}) ran on another stream after the current stream's "
            "next work started: the op returned without making the current stream wait for its work (e.g. "
            "current.wait_stream(side), or an event), so a caller that reads the result there reads it unfinished")


# The PyTorch kernels an `elementwise` rule allows beside copies and fills: flips and sums (a
# backward's flipped kernels and summed chunks; names seen on the H100, torch 2.11). Nothing else of
# PyTorch's: a multiply and a sum over a strided view would compute a convolution.
ELEMENTWISE_ALLOWED = re.compile(r"flip_kernel|sum_functor")


def is_housekeeping(name: str) -> bool:
    return name.startswith(HOUSEKEEPING) or bool(_HOUSEKEEPING_FUNCTORS.search(name))


@dataclass(frozen=True)
class KernelRule:
    """Which kernels an exercise's op may run.

    `names`: the exercise's own kernels (exact function names, fixed by the given code); copies and
    fills may run beside them. `library`: any library's kernel may run (an exercise that wraps
    cuDNN), but no PyTorch kernel (at::native) and none of `forbidden_ops` (e.g. PyTorch's own
    convolution, which would call cuDNN for the op). `elementwise`: PyTorch's flips and sums may
    run too (ELEMENTWISE_ALLOWED: a backward's flipped kernels and summed chunks around the
    exercise's op), and nothing else of PyTorch's or of a library (cuDNN, cuBLAS)."""

    names: tuple[str, ...] = ()
    library: bool = False
    forbidden_ops: tuple[str, ...] = ()
    elementwise: bool = False

    @property
    def needs_cpu_ops(self) -> bool:
        return bool(self.forbidden_ops)

    def own(self, k: Kernel) -> bool:
        if self.library:
            return "at::native" not in k.name or is_housekeeping(k.name)
        if kernel_function(k.name) in self.names or is_housekeeping(k.name):
            return True
        return self.elementwise and "at::native" in k.name and bool(ELEMENTWISE_ALLOWED.search(k.name))

    def problem(self, seen: Observation, what: str, expect_work: bool = True) -> str | None:
        """Why the observed call broke the rule, or None."""
        ops = sorted({o for o in seen.ops if any(f in o for f in self.forbidden_ops)})
        if ops:
            return f"{what}: PyTorch's {', '.join(ops[:3])} ran; the op must do this work itself"
        kernels = [k for k in seen.kernels if not is_sleep(k)]
        foreign = sorted({k.name for k in kernels if not self.own(k)})
        if foreign:
            shown = "; ".join(n[:100] for n in foreign[:3])
            expected = ", ".join(self.names) if self.names else "cuDNN's (called by the op itself)"
            return f"{what}: kernels other than this exercise's own ran ({shown}); the work must be done by {expected}"
        if expect_work and not any(not is_housekeeping(k.name) for k in kernels):
            return f"{what}: no GPU kernel of the exercise ran" + (f"; expected {', '.join(self.names)}" if self.names else "")
        return None


def native_threads() -> int:
    """This process's threads, native ones included (a std::thread started from C++ counts)."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        import threading

        return threading.active_count()

