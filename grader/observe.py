"""Watching what an op did while it ran: which kernels, on which streams, for how long, and whether
it left host threads behind.

The profiler (CUPTI) sees every kernel of the process, whichever thread or stream launched it, with
its stream and its duration on the GPU; `observe(fn)` returns them with the PyTorch operators that
were dispatched. A `KernelRule` says which of those an exercise's op may run. The grader uses both
on checked calls of every dtype and configuration (grader.properties) and on timed calls at the
benchmark's shape (grader.speed), so a fall-back that only some calls take is seen.
"""
from __future__ import annotations

import os
import re
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


def observe(fn, cpu_ops: bool = False) -> tuple[object, Observation]:
    """Run `fn()` under the profiler and return its result with what ran on the GPU (and, with
    `cpu_ops`, which PyTorch operators were dispatched). The device is synchronized before and after,
    so the observation holds all of the call's work and nothing before it."""
    import torch
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CUDA] + ([ProfilerActivity.CPU] if cpu_ops else [])
    torch.cuda.synchronize()
    with profile(activities=activities) as prof:
        result = fn()
        torch.cuda.synchronize()
    seen = Observation()
    for e in prof.events():
        if e.device_type == DeviceType.CUDA:
            seen.kernels.append(Kernel(e.name, int(getattr(e, "device_resource_id", -1) or -1),
                                       (e.time_range.end - e.time_range.start) / 1e6, e.time_range.start / 1e6))
        elif cpu_ops and e.name.startswith("aten::"):
            seen.ops.append(e.name)
    seen.kernels.sort(key=lambda k: k.start_s)
    return result, seen


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
        kernels = [k for k in seen.kernels if kernel_function(k.name) != SLEEP_KERNEL]
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
