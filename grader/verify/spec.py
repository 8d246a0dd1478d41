"""What an exercise's grading spec declares: the vocabulary the specs are written in.

Each exercise has one module grader/specs/exNN_name.py defining `SPEC`, an instance of a Spec
subclass; grader.specs finds and imports them (its registry). Specs live in the grader, not in the
exercise folder, so a student cannot edit them and they still work in a student release without
solutions/.
"""
from __future__ import annotations

import contextlib
import contextvars
import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Callable, ContextManager, Mapping, Sequence


PERFORMANCE = "performance"


@dataclass
class Check:
    """One graded test. `run(ctx)` raises CheckFailure (or any error) when it fails."""

    name: str
    group: str
    run: Callable[["Context"], None]
    needs_gpu: bool = True
    # skipped by `make grade QUICK=1`, the fast edit-grade loop; e.g. the checks of which kernels ran,
    # whose profiler costs seconds to start
    slow: bool = False
    huge: bool = False  # allocates more than 2^31 bytes: runs alone among concurrent grading processes


class CheckList(list):
    """How every spec declares its checks: `checks.add("forward[empty]", self._check_empty)`, in the
    order a student reads them (the first failure of a group is the reason the report gives). The
    group is the name up to its `[`."""

    def add(self, name: str, run: Callable[["Context"], None], *, needs_gpu: bool = True, slow: bool = False,
            huge: bool = False) -> None:
        self.append(Check(name, name.split("[", 1)[0], run, needs_gpu, slow, huge))


@dataclass
class Benchmark:
    """How to time an exercise: the op on inputs refilled with fresh values before every timed call,
    each timed output checkable against a float64 reference (grader.verify.speed, grader.verify.judge)."""

    label: str  # e.g. "fp32, 2^28 elements"
    make_inputs: Callable[[int], tuple]  # seed -> one input set (tensors on the GPU), the same for a seed
    call: Callable[[ModuleType, tuple], object]  # run the exercise's op on an input set
    baseline: Callable[[tuple], object]  # PyTorch's own op on the same input set
    work: float  # bytes moved (unit "B") or floating-point operations (unit "FLOP") per call
    # the float64 value of each output tensor (in grader.verify.timer.output_tensors's order) at the flat
    # indices `where` (one LongTensor or slice per output), or whole when `where` is None
    reference: Callable[[tuple, list | None], list]
    # per output: a Tolerance (elementwise) or a float (normwise relative error); may depend on the inputs
    tolerance: Callable[[tuple], list]
    unit: str = "B"  # "B": rates in GB/s against copy bandwidth; "FLOP": TFLOP/s against cuBLAS fp32
    # the kernels a timed call may run (grader.verify.observe.KernelRule); None: the spec's `kernel_rule`
    kernels: object | None = None
    # calls at the benchmark's shape with other parameter values, each run and checked once beside
    # the timing: label -> (call(module, inputs), reference like `reference`)
    variants: dict = field(default_factory=dict)
    # each output's shape for the inputs, where an output too large for one float64 reference is
    # checked piece by piece (its reference computes the pieces); None: the reference's shapes
    shapes: Callable[[tuple], list] | None = None
    # the correctness group each output vouches for; default: the spec's first perf_requires
    output_groups: tuple[str, ...] = ()
    # for the roofline chart of `make bench`: the other quantity (FLOPs of a "B" benchmark, fewest
    # bytes moved of a "FLOP" one); None leaves the exercise off the chart
    flops: float | None = None
    min_bytes: float | None = None


# --- declared domains: every argument's edge values, each reached by some check ------------------

@dataclass(frozen=True)
class Edge:
    """One edge of an argument's domain, which the generated properties try in every dtype (one edge at
    a time over the call's own arguments) and the coverage test (tests/test_coverage.py) requires some
    check to reach: a value that replaces the argument (a scalar, a flag, a mode, a list), or, for a
    tensor argument, `make(t)` giving the tensor at the edge (its values at the op's special points)."""

    name: str  # as the report prints it: "0.0", "None", "negative", "exact zeros", "padding_mode='reflect'"
    value: object = None
    make: Callable | None = None  # tensor -> tensor, for a tensor argument's edge
    # the op must refuse the edge with an error naming the argument (a mode the interface does not
    # support), rather than compute it
    refused: bool = False

    def at(self, current):
        """The argument at this edge, from its value in the base call."""
        return self.make(current) if self.make is not None else self.value

    @property
    def is_mode(self) -> bool:
        """A mode the op supports (a flag, a named option: training=False, padding_mode='reflect'): a path
        of its own through the forward and the backward, which the gradient property freezes each
        differentiable argument in as well."""
        return self.make is None and not self.refused and isinstance(self.value, (bool, str))


def values(*vs, refused: Sequence = ()) -> tuple[Edge, ...]:
    """Value edges, named by repr (a float keeps its decimal point: 0.0 and 0 differ for an op)."""
    return tuple(Edge(repr(v), v, refused=v in refused) for v in vs)


def _exact_zeros(t):
    """Every third element exactly 0, the rest as they were: the point where an activation's branch
    (x > 0 against x >= 0) or a derivative's kink is decided."""
    out = t.detach().clone()
    out.view(-1)[::3] = 0
    return out


# edges of a tensor argument's values
EXACT_ZEROS = Edge("exact zeros", make=_exact_zeros)
NEGATIVE = Edge("negative", make=lambda t: -t.detach().abs())
ZERO = Edge("zero", make=lambda t: t.detach() * 0)


def _mixed_signs(t):
    """|t| with every other element negated."""
    import torch

    signs = 1 - 2 * (torch.arange(t.numel(), device=t.device) % 2)
    return t.detach().abs() * signs.reshape(t.shape).to(t.dtype)


SIGNS = Edge("mixed signs", make=_mixed_signs)


def frozen_edge(name: str, mode: str | None = None, alone: bool = False) -> str:
    """The edge of a differentiable argument left out of autograd while the others are differentiated,
    or with `alone` the only one differentiated (grader.verify.properties's gradient property runs both
    for each of a call's grad_args, the second where there are three or more, in the base call and at
    each of its mode edges)."""
    at = f", at {mode}" if mode else ""
    if alone:
        return f"requires_grad=True alone ({name} differentiated, the others frozen{at})"
    return f"requires_grad=False ({name} frozen, the others differentiated{at})"


@dataclass
class ModuleOptions:
    """A module-level entry point (a from_modules constructor, an nn.Module wrapper) and its options'
    domains: the generated check (grader.verify.properties.module_checks) builds PyTorch's own modules with
    each edge in turn (the others at `base`), passes them through the entry point and compares the
    result with PyTorch's modules in every mode `check` tries, or requires the error naming the
    option of an edge marked refused."""

    name: str  # "ConvBNReLUInference.from_modules": the check's name and the report's
    group: str  # the scored group the check belongs to
    base: dict  # option -> its value where the other options are tried
    options: dict  # option -> tuple of Edges
    # check(ctx, options: dict, what: str) -> None: builds, runs and compares (raises CheckFailure);
    # raises the entry point's own error for a refused edge
    check: Callable = None


@dataclass
class DropIn:
    """A module class the exercise exports as a drop-in for one of torch.nn's: the generated check
    (grader.verify.properties.drop_in_checks) builds both from each of `constructions` (positional
    arguments in torch.nn's order, keywords by torch.nn's names; the first with only the required ones,
    so that every default is torch.nn's), requires the same parameters and buffers (names and shapes) and
    the same extra_repr, loads torch.nn's state into the exercise's module, and compares the outputs and
    the gradients (the input's and every parameter's) with torch.nn's module run in float64; the input is
    left as torch.nn's leaves it (as it was, or overwritten with the result and returned: inplace=True)."""

    name: str  # the class's name in the exercise's module: "LeakyReLU"
    torch_class: type  # torch.nn.LeakyReLU
    constructions: tuple  # ((args, kwargs), ...)
    input_shape: Callable  # (args, kwargs) -> the input's shape for that construction
    tol: float = 1e-6  # relative error of the float32 output against float64
    grad_tol: float = 1e-5
    group: str = "forward"  # the group of the outputs' check (one of the spec's points)
    grad_group: str = "autograd"  # the group of the gradients' check (`group` where the spec has no such group)
    # (torch.nn's module, the input's shape) -> [(forward's keyword arguments, refused), ...]: calls tried beside
    # the plain forward(x) (ConvTranspose2d's output_size); a refused one must raise as torch.nn's does
    forward_calls: Callable | None = None


@dataclass
class AuditCall:
    """One valid call of an exercise's public op: the bad-input audit (tests/test_input_audit.py),
    the judge (grader.verify.judge) and the generated properties (grader.verify.properties) all start from it.

    The audit spoils one tensor argument at a time (on the CPU, an integer dtype, an extra leading
    dim, a dim one longer, a strided view, a zero-size dim) and requires the call to raise an error
    that names that argument, or to return what `reference` returns for the same arguments.
    """

    op: str  # a function of the exercise's Python module ("conv2d") or a path under it ("lib.ops.conv2d")
    args: tuple  # valid positional arguments: tensors (all on one device) and scalars, lists, None
    names: tuple[str, ...]  # each argument's name as the C++ checks spell it in their messages
    # the expected result for (spoiled) arguments, e.g. in float64; a tensor, or a tuple of them with
    # None where an output is not compared. None: only errors and crashes are judged
    reference: Callable[..., object] | None = None
    label: str = ""  # tells several calls of one op apart, e.g. "conv2d(version=1)"; default: op
    # the scored group whose points this call's result vouches for (grader.verify.judge re-checks it outside
    # the submission's process); default: "backward" for an op named so, else "forward"
    group: str = ""
    # arguments whose gradient through autograd the judge checks too (in the "autograd" group):
    # <d(y . v)/d arg> for a random v, against the reference differentiated in float64
    grad_args: tuple[int, ...] = ()
    # --- what the generated properties (grader.verify.properties) may assume of this call ---
    # the kernels the call may run (grader.verify.observe.KernelRule); None: the spec's kernel_rule
    kernels: object | None = None
    # the registered op that takes these same arguments ("lib.ops.leaky_relu"): its outputs' shape,
    # dtype and strides are checked against its registered fake (torch.library.opcheck)
    registered: str = ""
    # tensor arguments where NaN and +-inf have a result the reference defines (IEEE propagation)
    nonfinite: tuple[int, ...] = ()
    # whether +-inf there is defined too (not where a mean of infinities meets a stable algorithm's
    # differences: inf - inf); NaN always is
    infinities: bool = True
    # scalar arguments -> other valid values to try (e.g. a negative slope, one above 1): value edges of
    # their domains, which the kernel watch also tries (grader.verify.properties._at_each_scalar)
    scalars: dict = field(default_factory=dict)
    # argument -> its domain's further edges (Edge): tensor values at the op's special points (exact
    # zeros, negative weights), flags, modes, geometry; with `scalars`, every edge the generated
    # properties try in every dtype (`edges()`), and the gradients at each (and with each of grad_args
    # frozen in turn)
    domains: dict = field(default_factory=dict)
    # the float64 values the arguments in `mutates` hold after the call, from the arguments before it:
    # {index: tensor} (running statistics a training step updates); compared by a property of their own
    # (at the call and at each edge, in every dtype), in `updates_group` (default: the call's group)
    updates: Callable[..., dict] | None = None
    updates_group: str = ""
    # arguments the op updates in place by design (running statistics): not required unmodified
    mutates: tuple[int, ...] = ()
    exact: bool = False  # the op moves values without arithmetic: its result must be bit-exact
    # the normwise relative error allowed: a float, or a function of the call's arguments (a precision
    # derived from the inputs, e.g. tensor cores' TF32); None: by the arguments' dtype
    tolerance: object = None
    # (major, minor): the call needs a GPU of at least this compute capability; below it, the checks
    # made from the call are reported as not run on this GPU (grader.verify.checks.require_capability)
    needs_capability: tuple[int, int] | None = None
    # each output (and each gradient) a sum of products of the tensor arguments' elements with coefficients 0
    # or 1 (matmul, a convolution, its transpose and gradients, a bias added), rounded in float32 order: where
    # an output is small enough to cancel, its error is relative to the larger of its norm and its terms' norm
    # (grader.verify.checks.terms_norm). Not for a tolerance derived from the precision (it has the terms)
    sums_products: bool = False
    # arguments a drop-in caller may leave out, each with the value it then takes (PyTorch's default for
    # it: `torch_defaults`): the generated property calls the op without them (the arguments after them
    # by keyword) and compares with the reference at those values
    defaults: dict = field(default_factory=dict)

    def __post_init__(self):
        if len(self.names) != len(self.args):
            raise ValueError(f"AuditCall {self.op}: {len(self.args)} arguments but {len(self.names)} names")
        self.label = self.label or self.op.rsplit(".", 1)[-1]
        self.group = self.group or ("backward" if "backward" in self.label else "forward")
        for i in (*self.scalars, *self.domains, *self.defaults):
            if not 0 <= i < len(self.args):
                raise ValueError(f"AuditCall {self.label}: a domain for argument {i} of {len(self.args)}")

    def edges(self) -> list[tuple[int, Edge]]:
        """Every declared edge, (argument index, Edge): the `scalars`' values, then the `domains`'."""
        out = [(i, Edge(repr(v), v)) for i, vs in self.scalars.items() for v in vs]
        out += [(i, e) for i, es in self.domains.items() for e in es]
        return out


# PyTorch's defaults for the arguments of its functional convolutions and batch norm (F.conv2d,
# F.conv_transpose2d, F.batch_norm, torch.nn.grad.*): what a drop-in op must take when they are left out
TORCH_DEFAULTS = {"bias": None, "stride": 1, "padding": 0, "output_padding": 0, "dilation": 1, "groups": 1,
                  "momentum": 0.1, "eps": 1e-5}


def torch_defaults(names: Sequence[str], first: int = 0, keep: Sequence[str] = ()) -> dict[int, object]:
    """{index: PyTorch's default} for the arguments from index `first` on that PyTorch's op lets a caller
    leave out (`TORCH_DEFAULTS`, by name), but those in `keep` (a call's groups where its weight is
    grouped: at groups=1 PyTorch refuses it): an AuditCall's `defaults`."""
    return {i: TORCH_DEFAULTS[n] for i, n in enumerate(names) if i >= first and n in TORCH_DEFAULTS and n not in keep}


# added to every audit_randn seed: the judge (grader.verify.judge) draws its calls' values fresh for each
# run, from the run's seed; the audit keeps 0, its fixed values. A context variable, not a module
# global: the parent judges several exercises and students at once in threads, and one thread's
# offset must never leak into another's draws (that re-checked a right answer against other inputs)
_audit_seed_offset: contextvars.ContextVar[int] = contextvars.ContextVar("audit_seed_offset", default=0)


@contextlib.contextmanager
def audit_seed(offset: int):
    """Draw every audit_randn tensor made in the body, in this thread, from seeds shifted by `offset`."""
    token = _audit_seed_offset.set(offset)
    try:
        yield
    finally:
        _audit_seed_offset.reset(token)


# audit_randn's largest tensor sent to a GPU from pinned memory without a wait (larger ones copy as before)
PINNED_COPY_MAX_BYTES = 64 << 20


def audit_randn(*shape: int, device, dtype, seed: int = 0, scale: float = 1.0, offset: float = 0.0):
    """A small random tensor for an AuditCall: drawn on the CPU in float64 (the same values on every
    device), rounded to `dtype` there, then moved. To a GPU from pinned memory without a wait, on the
    current stream, where the op's call comes after it: a copy from pageable memory waits for the stream,
    and with a dozen processes' contexts taking turns on the GPU each wait is a turn (these copies were
    a fifth of a grade's check time, H200 2026-11-30)."""
    import torch

    g = torch.Generator().manual_seed((seed + _audit_seed_offset.get()) % 2**63)
    values = (torch.randn(shape, generator=g, dtype=torch.float64) * scale + offset).to(dtype)
    if torch.device(device).type != "cuda" or values.numel() * values.element_size() > PINNED_COPY_MAX_BYTES:
        return values.to(device=device)
    return values.pin_memory().to(device=device, non_blocking=True)


def random_shape(g, max_dims: int = 3, max_numel: int = 1 << 20, dims: int | None = None,
                 max_dim: int | None = None) -> tuple[int, ...]:
    """A shape drawn from `g` (a CPU generator) across the size classes that break naive indexing:
    tiny, odd, just off a multiple of 32 or 256, prime-ish, and large; `dims` dims, or 1 to
    `max_dims`; each at most `max_dim`, all together at most `max_numel` elements."""
    import torch

    def draw(lo, hi):
        return int(torch.randint(lo, hi + 1, (1,), generator=g))

    def size(budget: int) -> int:
        kind = draw(0, 4)
        if kind == 0:
            n = draw(1, 8)
        elif kind == 1:
            n = draw(9, 1000)
        elif kind == 2:
            n = 32 * draw(1, 40) + (-1, 1)[draw(0, 1)]
        elif kind == 3:
            n = 256 * draw(1, 64) + draw(1, 255)
        else:
            n = draw(100_000, 1_500_000)
        return max(1, min(n, budget, max_dim or n))

    dims = dims or draw(1, max_dims)
    shape, budget = [], max_numel
    for _ in range(dims):
        n = size(budget)
        shape.append(n)
        budget = max(1, budget // n)
    return tuple(shape)


@dataclass
class Spec:
    exercise: str  # folder name, e.g. "01_leaky_relu"
    title: str
    module: str  # the Python wrapper file in the exercise folder, e.g. "leaky_relu.py"
    points: dict[str, int]  # scored group -> points; "performance" is earned by speed
    # (fraction of the reference's throughput, fraction of the performance points earned)
    perf_tiers: Sequence[tuple[float, float]] = ((0.5, 0.5), (0.85, 1.0))
    perf_requires: Sequence[str] = ()  # groups that must pass before speed earns anything
    # group -> checks that must not fail, or groups that must not fail, for the group to earn anything:
    # a group whose checks a wrapper falling back to PyTorch's ops would also pass (gradcheck through
    # the Python wrapper, a stream check of it) is paid only while the own-work checks hold; one whose
    # verdict on a broken kernel is chance (opcheck runs the op several times and compares: a racy
    # kernel passes or fails it by luck) only once the kernel's own group passes, so that a grade does
    # not change from run to run. A check that did not run (QUICK=1), or a group skipped here, blocks nothing.
    requires: Mapping[str, Sequence[str]] = field(default_factory=dict)
    # the reference solution's throughput over the baseline's, measured on an H100; stands in for
    # the reference when solutions/ is absent (a student release)
    solution_vs_baseline: float = 1.0
    description: str = ""
    # the branches of the reference's launchers and planners (grader/verify/paths.py): name -> the dtypes each
    # must be reached in by a checked call ("float32", ...; () for a branch marked without a dtype).
    # tests/test_coverage_paths.py holds it to the markers in solutions/, tests/test_gpu_grading.py to a grade
    paths: Mapping[str, Sequence[str]] = field(default_factory=dict)

    @property
    def number(self) -> str:
        return self.exercise.split("_", 1)[0]

    @property
    def marker(self) -> str:
        return f"ex{self.number}"

    @property
    def total(self) -> int:
        return sum(self.points.values())

    def checks(self) -> list[Check]:
        """The exercise's hand-written checks, declared through a CheckList."""
        raise NotImplementedError

    def benchmark(self) -> Benchmark | None:
        return None

    def audit_calls(self, device, dtype) -> list[AuditCall]:
        """Small valid calls covering every public op, with tensors on `device`, for the bad-input
        audit. `dtype` is the floating dtype to use (the audit asks for float64); an exercise whose
        ops take only float32 uses that instead."""
        return []

    def random_calls(self, g, device, dtype) -> list[AuditCall]:
        """Valid calls of random shapes drawn from `g` (a CPU generator) across the op's size
        classes, values from audit_randn: the generated properties and the judge check these beside
        the fixed audit calls, so the shapes differ from run to run (replayable by the seed)."""
        return []

    # the floating dtypes the generated properties try (the first is the main one)
    property_dtypes: tuple = ("float32",)

    def module_options(self) -> list[ModuleOptions]:
        """The exercise's module-level entry points and their options' domains (ModuleOptions)."""
        return []

    def drop_ins(self) -> list[DropIn]:
        """The exercise's module classes that stand in for torch.nn's (DropIn)."""
        return []

    def kernel_rule(self):
        """Which kernels the exercise's ops may run (grader.verify.observe.KernelRule); None: not checked."""
        return None

    def math(self) -> ContextManager:
        """The global math state every call of this exercise runs in, checks and timing alike, set
        once for the whole grading process: TF32 off for cuBLAS and cuDNN (strict fp32) and cuDNN's
        autotuner on (PyTorch's convolutions at their fastest). A submission cannot tell a timed call
        from a checked one by these flags, and may not change them (grader.verify.integrity)."""
        from grader.verify.timer import tuned_strict_fp32

        return tuned_strict_fp32()

    def versions(self) -> dict[str, Callable[[ModuleType, tuple], object]]:
        """The reference's numbered versions for `make bench` (name -> call); default: the op."""
        bench = self.benchmark()
        return {"reference": bench.call} if bench else {}


def derived_seed(seed: int, name: str) -> int:
    """A seed for one named use of the run's `seed`: the same in every process, independent of order."""
    return int(hashlib.sha256(f"{seed}:{name}".encode()).hexdigest()[:12], 16)


@dataclass
class Context:
    """What a check gets: the exercise's Python module (student or reference) and a seed."""

    module: ModuleType
    seed: int
    exercise_dir: Path
    extra: dict = field(default_factory=dict)
    # the kernels the exercise's calls may run where a call names none (its spec's kernel_rule(),
    # a grader.verify.observe.KernelRule): None holds no call to a rule
    kernel_rule: object = None

    def seed_for(self, name: str) -> int:
        """A per-check seed derived from the run's seed, stable under reordering of checks."""
        return derived_seed(self.seed, name)

    def generator(self, name: str, device: str = "cuda"):
        import torch

        g = torch.Generator(device=device)
        g.manual_seed(self.seed_for(name))
        return g


def _cropped(dim: int, n: int):
    """A tensor edge's maker: the first `n` elements along `dim` (negative: from the end), packed."""
    return lambda t: t.narrow(dim, 0, n).contiguous()


def as_conv_output(g, x_size, w_size, stride, padding, dilation, groups=1):
    """g, once it has the shape of the convolution's output for these sizes (PyTorch's shape checks, on
    the meta device), else a ValueError: a float64 reference of a convolution's gradient calls
    torch.nn.grad, which trusts its caller on it, and on the CPU a grad_output of another batch or size
    reads past its end (a misshapen probe could crash the grading process)."""
    import torch
    import torch.nn.functional as F

    y = F.conv2d(torch.empty(list(x_size), device="meta"), torch.empty(list(w_size), device="meta"), None, stride,
                 padding, dilation, groups)
    if tuple(g.shape) != tuple(y.shape):
        raise ValueError(f"grad_output has shape {list(g.shape)}, but the convolution gives {list(y.shape)}")
    return g


def conv_output_hw(in_hw, k_hw, stride, padding, dilation) -> tuple[int, ...]:
    """A convolution's output height and width (PyTorch's floor; below 1 where none is left)."""
    return tuple((n + 2 * p - d * (k - 1) - 1) // s + 1 for n, k, s, p, d in zip(in_hw, k_hw, stride, padding, dilation))


def conv_transpose_output_hw(in_hw, k_hw, stride, padding, output_padding, dilation) -> tuple[int, ...]:
    """A transposed convolution's output height and width (below 1 where the padding crops all of it)."""
    return tuple((n - 1) * s - 2 * p + d * (k - 1) + op + 1
                 for n, k, s, p, op, d in zip(in_hw, k_hw, stride, padding, output_padding, dilation))


def conv_smallest_hw(k_hw, dilation, padding) -> list[int]:
    """A convolution's smallest input height and width: where the (dilated) kernel just fits the padded
    input, so that each axis of the output is 1."""
    return [max(1, d * (k - 1) + 1 - 2 * p) for k, d, p in zip(k_hw, dilation, padding)]


def conv_empty_kernel() -> tuple[Edge, ...]:
    """The edges of a convolution's weight with no rows, and with no columns (each axis alone), declared
    refused: PyTorch's CPU kernels refuse both, but its meta device lets them through and the grader's
    reference runs no empty probe on the CPU (properties.reference_result), so only the declaration says
    so. The op must refuse them naming the weight, and its fake too (`kh > 0 && kw > 0` written with `||`,
    or with one axis twice, lets one of them through)."""
    return (Edge("kernel height 0 (refused)", make=lambda w: w[:, :, :0].clone(), refused=True),
            Edge("kernel width 0 (refused)", make=lambda w: w[:, :, :, :0].clone(), refused=True))


def conv_smallest_input(in_hw, k_hw, dilation, padding, transposed: bool = False, stride=(1, 1),
                        output_padding=(0, 0)) -> tuple[Edge, ...]:
    """The edges of a convolution's input `x` at its smallest height, and at its smallest width (each
    axis alone, the other as it was): for a convolution, where the (dilated) kernel just fits the padded
    input, so that axis of the output is 1 (`>=` against `>` in a size check); for a transposed one, the
    smallest input that leaves an output row (column). An axis already at its smallest has none. And
    one pixel below it, which PyTorch refuses (marked refused: the op must refuse it, naming x)."""
    def smallest(d: int) -> int:
        if not transposed:
            return conv_smallest_hw(k_hw, dilation, padding)[d]
        n = 1
        while conv_transpose_output_hw((n,), k_hw[d:d + 1], stride[d:d + 1], padding[d:d + 1], output_padding[d:d + 1],
                                       dilation[d:d + 1])[0] < 1:
            n += 1
        return n

    edges = []
    for d, axis in enumerate(("height", "width")):
        n = smallest(d)
        if n < in_hw[d]:
            edges.append(Edge(f"{axis} {n} (the smallest input)", make=_cropped(d - 2, n)))
        if 1 < n <= in_hw[d]:  # one pixel less: PyTorch refuses it, and so must the op (a size check's
            # `>` for `>=`, or an output size rounded toward zero at stride 2, lets it through)
            edges.append(Edge(f"{axis} {n - 1} (one below the smallest: refused)", make=_cropped(d - 2, n - 1),
                              refused=True))
    return tuple(edges)


def one_per_axis(shape, axes: Sequence[str | None]) -> tuple[Edge, ...]:
    """A tensor argument cut to one element along each named axis in turn (None: an axis left alone),
    the others as they were: a single row, a single column, M = 1; where a tile's bound (`>` for `>=`), a
    vector load past the end or a loop that assumes a second element shows. An axis already of size 1
    has none."""
    return tuple(Edge(f"one {axis}", make=_cropped(d, 1)) for d, axis in enumerate(axes) if axis and shape[d] > 1)


def conv_padding_edges(in_hw, k_hw, stride, dilation, padding, transposed: bool = False,
                       output_padding=(0, 0)) -> tuple[Edge, ...]:
    """The padding edges of a convolution of this geometry, as [h, w] lists (as the ops take them):
    none; 3 (past the 0 to 2 that the hand-written cases take); and the widest supported: for a
    convolution, the kernel's reach plus one (border outputs read padding alone), for a transposed one
    the largest that leaves an output row and column. Those leaving no output, and the call's own
    padding, are left out."""
    def out(d, p):
        geometry = (in_hw[d:d + 1], k_hw[d:d + 1], stride[d:d + 1], (p,))
        if transposed:
            return conv_transpose_output_hw(*geometry, output_padding[d:d + 1], dilation[d:d + 1])[0]
        return conv_output_hw(*geometry, dilation[d:d + 1])[0]

    if transposed:
        widest = [max([p for p in range(0, 64) if out(d, p) >= 1], default=0) for d in range(2)]
    else:
        widest = [dilation[d] * (k_hw[d] - 1) + 1 for d in range(2)]
    chosen = []
    for name, p in (("0", [0, 0]), ("3", [3, 3]), ("widest", widest)):
        if all(out(d, p[d]) >= 1 for d in range(2)) and p != list(padding) and p not in [c.value for c in chosen]:
            chosen.append(Edge(f"{p} ({name})" if name == "widest" else repr(p), p))
    return tuple(chosen)
