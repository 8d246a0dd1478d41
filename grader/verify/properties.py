"""Properties every op of every exercise must have, generated from the op's calls, not hand-listed.

An exercise's spec describes each public op by valid calls (`Spec.audit_calls`, fixed small shapes,
and `Spec.random_calls`, shapes drawn per run from the op's size classes), each with its float64
reference and what may be assumed of it (grader.verify.spec.AuditCall). From those, `property_checks`
generates, for every op, in each dtype the spec lists:

- random shapes: the calls of this run's random shapes give the reference's answer;
- non-contiguous arguments: each tensor argument, and all at once, in each layout of the same values
  (grader.verify.checks.LAYOUTS: every other element of a larger tensor; a crop of a wider one, last stride
  1; dense with the last two dims transposed; and from three dims, a slice of a longer batch and a
  narrowed view, whose batch and channel strides are larger than packed): the right answer, or an
  error naming the argument (an interface may refuse them);
- PyTorch's defaults: every argument a drop-in caller may leave out (bias, stride, padding, dilation,
  groups, a scalar's default) left out, the arguments after them by keyword: PyTorch's answer at its
  defaults;
- NaN and infinities where the call says the reference defines the result (IEEE propagation);
- every declared edge of every argument's domain (the call's `scalars` and `domains`: zero, negative,
  above one, None, every flag and mode, tensor values at the op's special points), one at a time over
  the fixed call, in every dtype (float64 too); a refused edge must raise an error naming it;
- the state an op updates in place by design (running statistics: the call's `updates`), after the
  call and at every edge, in every dtype;
- the current stream, forward and backward: inside `torch.cuda.stream(s)`, with the inputs
  produced late on `s`, the answer is right, and the call's work (the forward's in the stream property,
  the backward's in the gradients') ends before the next work queued on `s` begins;
- two results held at once: two calls with other values, both kept: they share no memory with each
  other or with the inputs, and both are right;
- gradients (calls with `grad_args`) at every declared edge, the forward's result judged there too
  (an op that computes otherwise when an input requires grad), with each differentiable argument frozen
  in turn (requires_grad=False while the others are differentiated), each alone differentiated (three or
  more), one subset between drawn from the run's seed (four or more), and on a side stream;
- module entry points (Spec.module_options): each option's every edge built into PyTorch's own
  modules and compared with them, or refused with an error naming the option;
- output strides: the op's own result (the Python API's) laid out as the registered fake says, for
  contiguous arguments and in every layout, and as PyTorch's op lays out a result it makes;
- state between calls: the same tensors again (a result the caller overwrote never comes back),
  each tensor argument changed in place and then moved to another address, and new values given on
  a side stream: an op keeping results, a cache keyed by addresses, or a stream of its own for
  inputs it has seen, answers the old values;
- 1-D arguments one element longer (full grade and quick, group "input_checks" where graded): refused
  with an error naming them where the reference refuses them;
- each tensor argument alone on a second GPU, where the machine has two (group "input_checks" where
  graded): the right answer or an error naming it;
- integer-list arguments (stride, padding, dilation) with each component alone at -1 and at 0, and one
  value shorter and longer (group "input_checks" where graded): refused with an error naming them where
  the reference refuses them, else the reference's answer or that error;
- which kernels ran (full grade): in every dtype (float64 included), for every fixed call at each
  of its scalar values and for several random geometries, only the exercise's own
  (grader.verify.observe.KernelRule), so a fall-back for one dtype, one parameter value or one kind of
  shape is seen; observed where the op can see a profiler, its values compared too;
- output metadata (full grade): shape, dtype and strides against the registered fake
  (torch.library.opcheck), contiguous and in each non-contiguous layout;
- the registered fake refuses what the op refuses (full grade): every refusal probe (refusal_probes:
  each tensor argument misshapen at either end, or along a dim one longer or cut to 1; each
  declared edge; each integer list out of its domain; all again with the optional tensors left out):
  where the op and PyTorch refuse it the fake raises too (else torch.compile traces a wrong shape);
  where the op computes it, the fake gives its shape and dtype;
- each drop-in module class (Spec.drop_ins): built as torch.nn's is, with only the required arguments
  (torch.nn's defaults), positionally in torch.nn's order and by keyword: the same parameters and
  buffers and the same extra_repr (print(model)), and with torch.nn's state loaded, its outputs and
  gradients, and its input afterwards (overwritten and returned where torch.nn's is: inplace=True);
- every tensor argument at the edge of mapped memory (checked last): each call (fixed and random shapes,
  first dtype) with every tensor argument in memory of its own whose last byte is the last mapped one,
  then whose first byte is the first (grader.verify.guard): the right answer, and a read or write
  past an argument's end or before its start (an off-by-one load guard, a halo read at index -1,
  whose value no output uses) faults there and fails saying so, where the caching allocator's
  neighbouring memory hides it everywhere else.

Every call is observed by the watch the op cannot see (grader.verify.observe.WATCH): no PyTorch or library
kernel may do its work in a value check either, so what an op does when it sees no profiler is
checked for kernels, and what it does when it sees one is checked for values. Every call also
requires plain torch.Tensor results, inputs left unmodified (but those the op
updates by design), outputs written everywhere (the memory it may reuse is poisoned with NaN) and no
host thread left running. Each property belongs to the group of its op's calls (the gradients to
"autograd" where the exercise grades it), so a failure costs that group.

Each copy to the host and each synchronisation waits for this process's turn on the GPU the grading
processes share, so a call's values come to the host in one copy (`OutputCheck`, `host_values`); a
call's variants (layouts, edges, special values, list components) run back to back in one window and
are judged together (`check_calls`), and the own-kernel, random-shapes and defaults properties judge
their calls' values at the end of the check (`Later`); either way the first wrong call in order fails.
"""
from __future__ import annotations

import contextlib
import dataclasses
import inspect
import math
import re

import torch

from grader.verify.checks import LAYOUTS, CheckFailure, cuda_context_lost, late_copies, poison_next_allocation
from grader.verify.checks import refill_late, strided_copy
from grader.verify.checks import assert_rel_error, expect_error, require_plain_tensor, shape_spoils
from grader.verify.checks import call_dtype as dtype_of, call_tolerance as tolerance, host_values, output_problem, OutputCheck
from grader.verify.checks import call_terms
from grader.verify.fp64 import reference_device
from grader.verify.guard import at_memory_edge, unsupported as memory_edge_unsupported
from grader.verify.judge import clean, cotangent, gradient_terms, gradients, names_one_of, resolve
from grader.verify.observe import WATCH, KernelRule, Observation, is_sleep, native_threads, observe
from grader.verify.observe import stream_mark, unjoined_work
from grader.verify.timer import MARK_CYCLES
from grader.verify.spec import AuditCall, Check, Context, DropIn, Edge, ModuleOptions, Spec, audit_seed, frozen_edge

ERRORS = (RuntimeError, ValueError, TypeError, IndexError)


class Device:
    """Where the properties run: the GPU when grading; the CPU in the grader's own tests, where
    streams, sleeps and the caching allocator's poisoning do nothing."""

    def __init__(self, name: str = "cuda"):
        self.name = name
        self.cuda = name == "cuda"

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize()

    def side_stream(self):
        return torch.cuda.Stream() if self.cuda else None

    def on(self, stream):
        """The context in which `stream` is the current stream."""
        return torch.cuda.stream(stream) if self.cuda and stream is not None else contextlib.nullcontext()

    def late_copies(self, args: list, later_sizes=()) -> list:
        """grader.verify.checks.late_copies (on the CPU: plain copies, nothing to be late for)."""
        return late_copies(args, later_sizes) if self.cuda else [a.clone() if isinstance(a, torch.Tensor) else a
                                                                 for a in args]

    def refill_late(self, tensors: list, values: list) -> None:
        """grader.verify.checks.refill_late (on the CPU: plain copies)."""
        if self.cuda:
            refill_late(tensors, values)
        else:
            for t, v in zip(tensors, values):
                if isinstance(t, torch.Tensor):
                    t.copy_(v)

    def to_device(self, t: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        return t.to(self.name if self.cuda else "cpu", dtype)

    def poison(self, numel: int, dtype: torch.dtype, blocks: int | None = 2) -> None:
        if self.cuda:
            poison_next_allocation(numel, dtype, blocks)


DEVICE = Device("cuda")
AUTOGRAD = "autograd"

# --- the dry run: which edges the generated checks reach, without calling any op ----------------------
# (tests/test_coverage.py on the CPU) None: the checks run for real
_reached: list | None = None


@contextlib.contextmanager
def dry_run():
    """Inside, the edge, gradient and module-option checks call no op: each records the edge it would
    reach, as (call label or entry point, argument, edge name, dtype), into the list yielded."""
    global _reached
    saved, _reached = _reached, []
    try:
        yield _reached
    finally:
        _reached = saved


def _reach(label: str, argument: str, edge: str, dtype) -> bool:
    """Record an edge reached; True in a dry run (the caller then skips the op)."""
    if _reached is None:
        return False
    _reached.append((label, argument, edge, str(dtype).replace("torch.", "")))
    return True


def _tensors(value) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in _tensors(v)]
    return []


def _fresh(args) -> list:
    return [a.clone() if isinstance(a, torch.Tensor) else (list(a) if isinstance(a, list) else a) for a in args]


def _in_float64(args, device) -> list:
    """The arguments on `device`, their floating-point tensors in float64."""
    return [a.detach().to(device, torch.float64 if a.is_floating_point() else a.dtype)
            if isinstance(a, torch.Tensor) else a for a in args]


def _double(args) -> list:
    """The arguments in float64 where the references run (grader.verify.fp64.reference_device)."""
    return _in_float64(args, reference_device())


# --- comparing, NaN-aware ------------------------------------------------------------------------

def _compare(actual, expected, tol: float, what: str, terms=None) -> None:
    """`actual` (plain tensors, or a tuple/list of them) against `expected` (float64, None where not
    compared): grader.verify.checks.output_problem, raised; `terms`: call_terms."""
    for t in _tensors(actual):
        require_plain_tensor(t, what)
    problem = output_problem(actual, expected, tol, what, terms=terms)
    if problem:
        raise CheckFailure(problem)


def _compare_call(actual, expected, call: AuditCall, args: list, what: str) -> None:
    """_compare by `call`'s own rule on `args`: its tolerance there and, where it sums products, its terms."""
    _compare(actual, expected, tolerance(call, args), what, call_terms(call, args, expected))


# --- one call, watched ---------------------------------------------------------------------------

def _watching() -> bool:
    """Calls are observed (not under compute-sanitizer, which cannot share the process with CUPTI)."""
    import os

    return not os.environ.get("COURSE_SANITIZE")


def _rule(ctx: Context, call: AuditCall) -> KernelRule | None:
    """The kernels the call may run: its own rule, else its exercise's (the context's)."""
    return call.kernels if call.kernels is not None else ctx.kernel_rule


def invoke(ctx: Context, call: AuditCall, args: list, what: str, visible: bool = False, queued_ok: bool = False,
           expected=None, omit: frozenset = frozenset(), kernels: bool = True, defer: bool = False):
    """Call the op as a user would: the result must be plain tensors, the inputs unmodified (but
    those the op updates by design), the memory it may write poisoned beforehand, and no host thread
    may outlive the call. Every call is observed (grader.verify.observe.WATCH): in the watch's hidden window
    by default (a value check, where only PyTorch's or a library's kernels fail, as nothing says the
    op had work to do), in a visible one with `visible` (the own-kernel check: its kernels must have
    done the work). Either way the caller compares the values. `expected`: the reference's answer for
    these values, when the caller has it already (the same values in another layout). `omit`: indices of
    arguments left out of the call (each holds in `args` the value the op must then take), those after
    them passed by keyword, under the names of the op's own signature. Without `kernels`, the call is
    observed all the same (the op cannot tell) but which kernels ran is not judged here (a property of
    the state alone: the call's own group judges its kernels at the same calls). With `defer`, whether the
    inputs were modified is queued and returned third (`Unmodified`), for the caller to copy to the host
    with its comparisons (one wait on the GPU for all)."""
    fn = resolve(ctx.module, call.op)
    if omit:
        fn = _leaving_out(fn, omit)
    before = {i: a.clone() for i, a in enumerate(args) if isinstance(a, torch.Tensor) and i not in call.mutates}
    expected_first = _reference(call, args) if expected is None else expected
    first = (_tensors(expected_first) or [None])[0]
    if first is not None:
        DEVICE.poison(first.numel(), dtype_of(call))
    rule = _rule(ctx, call) if _watching() else None
    if _watching():
        WATCH.start()  # before the threads are counted: the watch's own thread is no thread of the op's
    threads = native_threads()
    if _watching():
        out, seen = observe(lambda: fn(*args), cpu_ops=bool(rule and rule.needs_cpu_ops), hidden=not visible,
                            queued_ok=queued_ok)
    else:
        out, seen = fn(*args), None
    DEVICE.sync()
    if native_threads() > threads:
        raise CheckFailure(f"{what}: the call left {native_threads() - threads} host thread(s) running")
    for t in _tensors(out) if isinstance(out, (tuple, list)) else [out]:
        if t is not None:
            require_plain_tensor(t, what)
    if kernels and rule is not None and seen is not None:
        problem = rule.problem(seen, what, expect_work=visible and any(t.numel() for t in _tensors(out)))
        if problem:
            raise CheckFailure(problem)
    unmodified = Unmodified(args, before, call.names, what)
    if defer:
        return out, expected_first, unmodified
    unmodified.check()
    return out, expected_first


class Unmodified:
    """Whether a call left its inputs as they were (`before`: index -> copy taken before the call), bits
    and shape, compared on the device when made; `check(values)` fails on the first one changed, from
    `flags` as host_values copied them (copied here when not given)."""

    def __init__(self, args: list, before: dict, names, what: str):
        self.names, self.what = names, what
        self.reshaped = [i for i, copy in before.items() if args[i].shape != copy.shape]
        self.ids = [i for i in before if i not in self.reshaped]
        same = [(_bits(args[i]) == _bits(before[i])).all().to(torch.float64) for i in self.ids]
        # one vector on the first one's device (a tensor on another GPU, in one property, costs a copy)
        self.flags = torch.stack([t.to(same[0].device) for t in same]) if same else None

    def check(self, values: list[float] | None = None) -> None:
        if values is None and self.flags is not None:
            values = self.flags.tolist()
        changed = sorted(self.reshaped + [i for i, ok in zip(self.ids, values or []) if not ok])
        for i in changed[:1]:
            raise CheckFailure(f"{self.what}: the input `{self.names[i]}` was modified; an op must not write to its inputs")


def _leaving_out(fn, omit: frozenset):
    """`fn` called as fn(*args) but with the arguments at `omit` left out: those before the first one
    positionally, the rest by the keyword the signature gives their position."""
    first = min(omit)

    def call(*args):
        try:
            names = list(inspect.signature(fn).parameters)
        except (TypeError, ValueError):  # no signature to read (a builtin): positional only
            names = []
        later = {names[i]: a for i, a in enumerate(args) if i > first and i not in omit and i < len(names)}
        if len(later) != sum(1 for i in range(first + 1, len(args)) if i not in omit):
            raise CheckFailure(f"the op's signature ({', '.join(names)}) has no parameter at each position after "
                               f"{first}: it cannot be called as PyTorch's op is, by keyword")
        return fn(*args[:first], **later)
    return call


def _bits(t: torch.Tensor) -> torch.Tensor:
    ints = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()]
    return t.detach().contiguous().view(ints)


def _reference(call: AuditCall, args: list):
    """The reference's answer for `args`, in float64 (computed before the op runs)."""
    return call.reference(*_double(args)) if call.reference is not None else None


def check_call(ctx: Context, call: AuditCall, args: list, what: str, may_refuse: tuple[str, ...] = (),
               visible: bool = False, updates: bool = False, expected=None, omit: frozenset = frozenset(),
               outputs: bool = True, later: Later | None = None):
    """The op on `args` gives the reference's answer (or, when `may_refuse` names arguments, an error
    naming one of them), its kernels observed (`invoke`); with `updates`, the arguments it updates in
    place by design hold the call's `updates` after it. Without `outputs`, neither its outputs nor its
    kernels are judged (a property of the state alone: the call's own properties judge both, in its
    group, at the same calls). `later`: the values are judged with the other calls' of the check, in
    one copy to the host (`Later`). Returns (output, expected), (None, None) when refused."""
    # the state the op updates in place by design, as it must be after the call (before it runs)
    updated = call.updates(*_double(args)) if updates and call.updates is not None else {}
    try:
        try:
            out, expected, unmodified = invoke(ctx, call, args, what, visible=visible, expected=expected, omit=omit,
                                               kernels=outputs, defer=True)
        except ERRORS as e:
            _refused_or_raise(e, may_refuse, what)
            return None, None
    except CheckFailure:
        if later is not None:
            later.judge()  # a wrong value of an earlier call fails the check first
        raise
    tol = tolerance(call, args)
    checks = [OutputCheck(out, expected, tol, what, terms=call_terms(call, args, expected))] if outputs else []
    checks += [OutputCheck(args[i], value, tol, f"{what}: `{call.names[i]}` after the call") for i, value in updated.items()]
    if later is not None:
        later.add(unmodified, checks, args)
    else:
        Later.judged([(unmodified, checks)])
    return out, expected


def _refused_or_raise(error: BaseException, may_refuse, what: str) -> None:
    """Return where `error` refuses the call by naming one of `may_refuse` (an argument or option the
    interface may refuse; a stub's "not implemented yet" is no refusal); else raise it as the call's failure."""
    msg = clean(error)
    if may_refuse and names_one_of(msg, may_refuse) and "not implemented yet" not in msg:
        return
    raise CheckFailure(f"{what}: {type(error).__name__}: {msg[:300]}") from None


class Later:
    """The values of a check's calls judged together: each call's flags and numbers kept on the device
    (`add`) and brought to the host in one copy (`judge`, at the end of the check, when BATCH_BYTES of
    arguments are held, or before a failure of a later call is raised), failing on the first wrong one in
    the calls' order. Each copy from a GPU waits for this context's turn on the GPU the grading
    processes share: a check of N calls then waits 2N + 1 times, not 3N."""

    def __init__(self):
        self.pending: list = []
        self.held = 0

    def add(self, unmodified: Unmodified, checks: list, args: list) -> None:
        self.pending.append((unmodified, checks))
        self.held += _held_bytes(args)
        if self.held > BATCH_BYTES:
            self.judge()

    def judge(self) -> None:
        pending, self.pending, self.held = self.pending, [], 0
        Later.judged(pending)

    @staticmethod
    def judged(pending: list) -> None:
        values = host_values(*(t for unmodified, checks in pending for t in (unmodified.flags, *(c.stats for c in checks))))
        at = 0
        for unmodified, checks in pending:
            unmodified.check(values[at])
            for c, v in zip(checks, values[at + 1:at + 1 + len(checks)]):
                problem = c.problem(v)
                if problem:
                    raise CheckFailure(problem)
            at += 1 + len(checks)


# The most argument bytes one batch of check_calls (or one Later) holds at once (its calls' arguments, their
# copies and outputs stay alive until the batch is judged)
BATCH_BYTES = 256 << 20


def _held_bytes(args: list) -> int:
    """What a call judged later holds until then: its arguments, the copy that shows they were not
    modified, and about as much output."""
    return 3 * sum(a.numel() * a.element_size() for a in args if isinstance(a, torch.Tensor))


def check_calls(ctx: Context, call: AuditCall, items: list[tuple[list, str, tuple[str, ...], object]]) -> list:
    """check_call for each of `items` ((args, what, may_refuse, expected): the reference's answer for args)
    of one call, with the calls made back to back in one hidden observation window and judged together:
    one synchronisation before, one after and one copy to the host for the batch, where check_call waits
    three times per call (each a wait for this context's turn on the GPU the grading processes share).
    Judged in the items' order as check_call judges each, but for the kernels: one the rule forbids, in
    any call of the batch, fails it naming the batch. Returns each item's output (None where refused)."""
    batch, held, outputs = [], 0, []
    for item in items:
        size = _held_bytes(item[0])
        if batch and held + size > BATCH_BYTES:
            outputs += _check_batch(ctx, call, batch)
            batch, held = [], 0
        batch.append(item)
        held += size
    if batch:
        outputs += _check_batch(ctx, call, batch)
    return outputs


def _check_batch(ctx: Context, call: AuditCall, items: list) -> list:
    fn = resolve(ctx.module, call.op)
    rule = _rule(ctx, call) if _watching() else None
    befores = [{i: a.clone() for i, a in enumerate(args) if isinstance(a, torch.Tensor) and i not in call.mutates}
               for args, *_ in items]
    described = f"{_described(call)}, one of {len(items)} calls ({items[0][1]}, ...)" if len(items) > 1 else items[0][1]
    if _watching():
        WATCH.start()  # before the threads are counted: the watch's own thread is no thread of the op's
    threads = native_threads()
    ran: list[tuple[object, Exception | None, int]] = []  # (output, error, threads it started)

    def calls():
        for args, _, _, expected in items:
            first = (_tensors(expected) or [None])[0]
            if first is not None:  # after the copies above: they would take the poisoned blocks
                DEVICE.poison(first.numel(), dtype_of(call))
            before = native_threads()
            try:
                ran.append((fn(*args), None, 0))
            except ERRORS as e:
                ran.append((None, e, 0))
            ran[-1] = (*ran[-1][:2], native_threads() - before)

    try:
        if _watching():
            _, seen = observe(calls, cpu_ops=bool(rule and rule.needs_cpu_ops), hidden=True)
        else:
            calls()
            seen = None
        DEVICE.sync()
    except ERRORS as e:  # an error the GPU reports after the calls (a fault): the batch's
        raise CheckFailure(f"{described}: {type(e).__name__}: {clean(e)[:300]}") from None
    left = native_threads() - threads
    checks = []  # (its Unmodified, its OutputCheck) of each call that answered
    outputs = []
    answered = []  # (output, what) of the earlier calls whose result is none of their arguments
    for (args, what, may_refuse, expected), before, (out, error, started) in zip(items, befores, ran):
        outputs.append(out)
        if error is not None:
            _refused_or_raise(error, may_refuse, what)
            continue
        if left > 0 and started > 0:
            raise CheckFailure(f"{what}: the call left {left} host thread(s) running")
        for t in _tensors(out) if isinstance(out, (tuple, list)) else [out]:
            if t is not None:
                require_plain_tensor(t, what)
        # the batch holds every result until it is judged: one written over by a later call would read
        # as a wrong value, where the fault is the memory the two share
        earlier = next((w for o, w in answered if _overlap(out, o)), None)
        if earlier is not None:
            raise CheckFailure(f"{what}: the result shares memory with the result of an earlier call ({earlier}), "
                               "which it overwrote (an op returns new tensors; a caller keeps each)")
        if not _overlap(out, args):
            answered.append((out, what))
        checks.append((Unmodified(args, before, call.names, what), OutputCheck(out, expected, tolerance(call, args), what,
                                                                            terms=call_terms(call, args, expected))))
    if left > 0:
        raise CheckFailure(f"{described}: the calls left {left} host thread(s) running")
    if rule is not None and seen is not None:
        problem = rule.problem(seen, described, expect_work=False)
        if problem:
            raise CheckFailure(problem)
    Later.judged([(unmodified, [output]) for unmodified, output in checks])
    return outputs


def _storages(value) -> list[tuple[int, int]]:
    out = []
    for t in _tensors(value):
        if t.numel():
            s = t.untyped_storage()
            out.append((s.data_ptr(), s.data_ptr() + s.nbytes()))
    return out


def _overlap(a, b) -> bool:
    return any(lo < hi2 and lo2 < hi for lo, hi in _storages(a) for lo2, hi2 in _storages(b))


def _observed(ctx: Context, call: AuditCall, fn, what: str, queued_ok: bool = False):
    """`fn` called in the watch's hidden window (grader.verify.observe.WATCH), its kernels held to the rule:
    for calls made by something else than `invoke` (the forward of a gradient check; the backward
    that follows runs under the watch too, unobserved)."""
    rule = _rule(ctx, call) if _watching() else None
    return fn if rule is None else watched(fn, rule, what, queued_ok)


def watched(fn, rule: KernelRule, what: str, queued_ok: bool = False):
    """`fn`, each call of it in the watch's hidden window, failing (CheckFailure) when a kernel the
    rule does not allow ran (no work is required: a value check's call may have none to do)."""
    def call(*args, **kwargs):
        out, seen = observe(lambda: fn(*args, **kwargs), cpu_ops=rule.needs_cpu_ops, hidden=True, queued_ok=queued_ok)
        problem = rule.problem(seen, what, expect_work=False)
        if problem:
            raise CheckFailure(problem)
        return out
    return call


# --- gradients -----------------------------------------------------------------------------------

# How the gradient flowing back into an op's backward may be laid out (check_gradients's `flowing`): a
# view with gaps (a transpose or a slice downstream), and one value expanded, every stride 0 (`y.sum()`).
FLOWING_BACK = {"a strided view": "strided", "one value expanded (stride 0, as y.sum() hands back)": "expanded"}


def check_gradients(ctx: Context, call: AuditCall, args: list, what: str, stream=None, flowing: str = "") -> None:
    """<d(y . v)/d arg> through autograd against the reference differentiated in float64 (on a side
    stream whose inputs arrive late, when `stream` is given, and the backward's work ordered before that
    stream's next work); v, the gradient the op's backward receives, dense, or laid out as `flowing` says
    (a value of FLOWING_BACK)."""
    if _reached is not None:  # a dry run calls no op
        return
    seed = ctx.seed_for(what)
    tol = max(tolerance(call, args), 1e-5)
    with torch.no_grad():
        out = call.reference(*_double(args))
    shape = out.shape if isinstance(out, torch.Tensor) else ()
    v64 = cotangent(shape, seed)
    if flowing == "expanded" and v64.numel():
        v64 = v64.reshape(-1)[:1].expand(shape)
    expected = gradients(call.reference, call, _double(args), seed, v64)
    terms = gradient_terms(call, _double(args), expected, v64)
    sizes = sorted({a.numel() for a in args if isinstance(a, torch.Tensor)} | {math.prod(shape)}
                   | {e.numel() for e in expected if isinstance(e, torch.Tensor)})
    fn = _observed(ctx, call, resolve(ctx.module, call.op), what, queued_ok=stream is not None)
    watched_join = stream is not None and DEVICE.cuda and _watching()
    side_id = stream_id(stream) if watched_join else None

    def backward(step, leaves: list, hold: int, windows: list, settled: list) -> list | None:
        """On a side stream, the backward observed, a copy of each gradient made on the current stream as it
        returns (what a caller reading them there reads), and then a mark: its work must be ordered before
        the current stream's next work (unjoined_work), as the forward's is in the stream property, and the
        copies must equal the gradients once the device is synchronized (`settled`, filled then)."""
        if not watched_join:
            step()
            return None

        def step_then_read() -> list:
            step()
            return [leaf.grad.clone() if type(leaf.grad) is torch.Tensor else leaf.grad for leaf in leaves]

        read, window = observe(lambda: _held_then_marked(step_then_read, hold), hidden=True, queued_ok=True)
        windows.append(window)
        settled[:] = [leaf.grad for leaf in leaves]
        return read

    for hold in HOLDS[1:]:  # a longer hold only where the host outran the last (host_outran)
        seen, settled = [], []
        DEVICE.sync()
        try:
            with DEVICE.on(stream):
                # The same every run for an op that is wrong in a racy way. Its output and every gradient are
                # made in memory filled with NaN first (one left unwritten never holds an earlier result's
                # values). On a side stream the inputs, the output and the gradient flowing back are made
                # after a sleep, and the cotangent before it (a copy from the CPU would wait out the sleep and
                # let the race go either way): an op or a backward on another stream reads NaN.
                v = DEVICE.to_device(v64.contiguous(), dtype_of(call))
                if flowing == "expanded" and v.numel():
                    # its storage past the one value NaN: a backward reading it as packed reads NaN
                    storage = torch.full_like(v.reshape(-1), float("nan"))
                    storage[:1] = v.reshape(-1)[:1]
                    v = storage[:1].expand(shape)
                elif flowing == "strided":
                    with_gaps = strided_copy(v)  # the same values (None for a single one: it stays dense)
                    v = v if with_gaps is None else with_gaps
                if stream is not None:
                    made = DEVICE.late_copies(args, sizes)
                else:
                    made = args
                    for numel in sizes:
                        DEVICE.poison(numel, dtype_of(call), blocks=None)
                forward: list = []
                actual = gradients(fn, call, made, seed, v, forward=forward,
                                   backward=lambda step, leaves, h=hold, w=seen, s=settled:
                                   backward(step, leaves, h, w, s))
        except (TypeError, RuntimeError) as e:
            raise CheckFailure(f"{what}: {clean(e)[:300]}") from None
        DEVICE.sync()
        if not seen or not host_outran(seen[0], side_id):
            break
    unjoined = unjoined_work(seen[0], side_id, f"{what}, the backward") if seen else None
    unjoined = unjoined or read_early(actual, settled, [call.names[i] for i in call.grad_args], f"{what}, the backward")
    if unjoined:
        raise CheckFailure(unjoined)
    # the forward's result first (the value checks call the op with no input requiring grad: an op that
    # computes otherwise under autograd is judged here), then every gradient's numbers, in one copy to the
    # host, judged in the arguments' order: the first wrong or missing one fails the check
    checks, missing = [OutputCheck(forward[0], out, tolerance(call, args), f"{what}: the forward's result",
                                   terms=call_terms(call, args, out))], None
    for k, (a, e) in enumerate(zip(actual, expected)):
        if a is None:
            missing = f"{what}: no gradient reached `{call.names[call.grad_args[k]]}`"
            break
        try:
            require_plain_tensor(a, what)
        except CheckFailure as e:
            missing = str(e)
            break
        checks.append(OutputCheck(a, e, tol, f"{what}, d/d{call.names[call.grad_args[k]]}", terms=terms[k]))
    for c, values in zip(checks, host_values(*(c.stats for c in checks))):
        problem = c.problem(values)
        if problem:
            raise CheckFailure(problem)
    if missing:
        raise CheckFailure(missing)


# --- the properties ------------------------------------------------------------------------------

class _Calls:
    """The calls of one op label, drawn for one check (fresh values from the check's seed)."""

    def __init__(self, spec: Spec, label: str):
        self.spec, self.label = spec, label

    def __call__(self, ctx: Context, name: str, dtype: torch.dtype, random_shapes: bool = True) -> list[AuditCall]:
        with audit_seed(ctx.seed_for(name)):
            calls = [c for c in self.spec.audit_calls(DEVICE.name, dtype) if c.label == self.label]
            if random_shapes:
                g = torch.Generator().manual_seed(ctx.seed_for(name + " shapes"))
                calls += [c for c in self.spec.random_calls(g, DEVICE.name, dtype) if c.label == self.label]
        return calls


def _dtypes(spec: Spec) -> list[torch.dtype]:
    return [getattr(torch, d) if isinstance(d, str) else d for d in spec.property_dtypes]


def _described(call: AuditCall) -> str:
    shapes = [("x".join(map(str, a.shape)) or "scalar") for a in call.args if isinstance(a, torch.Tensor)]
    return f"{call.label} on {', '.join(shapes)} {str(dtype_of(call)).replace('torch.', '')}"


def _random_shapes(spec, calls: _Calls, every_dtype: bool = False):
    def run(ctx):
        for dtype in _dtypes(spec)[slice(1, None) if every_dtype else slice(0, 1)]:
            with audit_seed(ctx.seed_for(f"{calls.label} random {dtype}")):
                g = torch.Generator().manual_seed(ctx.seed_for(f"{calls.label} shapes {dtype}"))
                chosen = [c for c in spec.random_calls(g, DEVICE.name, dtype) if c.label == calls.label]
            later = Later()  # the values judged together
            for call in chosen:
                check_call(ctx, call, _fresh(call.args), _described(call), later=later)
            later.judge()
    return run


def _noncontiguous(spec, calls: _Calls):
    def run(ctx):
        for call in calls(ctx, "noncontiguous", _dtypes(spec)[0]):
            # every layout holds the same values: one float64 reference serves them all (a consumer
            # GPU runs float64 at 1/32 to 1/64 of its float32 rate), and the calls are judged together
            expected = _reference(call, _fresh(call.args))
            items = []
            for layout, copy in LAYOUTS.items():
                tensors = [i for i, a in enumerate(call.args) if isinstance(a, torch.Tensor) and i not in call.mutates
                           and copy(a) is not None]
                for chosen in [[i] for i in tensors] + ([tensors] if len(tensors) > 1 else []):
                    args = _fresh(call.args)
                    for i in chosen:
                        args[i] = copy(args[i])
                    names = tuple(call.names[i] for i in chosen)
                    items.append((args, f"{_described(call)}, {' and '.join(names)} as a {layout}", names, expected))
            check_calls(ctx, call, items)
    return run


def _defaults(spec, calls: _Calls):
    """PyTorch's defaults: each call with every argument a drop-in caller may leave out left out
    (`AuditCall.defaults`), against the reference at PyTorch's defaults for them. A call whose arguments
    PyTorch refuses at those defaults (groups 1 against a grouped weight) is passed over; a label none of
    whose calls is valid there fails, so the property never passes without a call."""
    def run(ctx):
        tried, later = 0, Later()  # the values judged together
        for call in calls(ctx, "defaults", _dtypes(spec)[0], random_shapes=False):
            if not call.defaults:
                continue
            args = _fresh(call.args)
            for i, value in call.defaults.items():
                args[i] = value
            try:
                expected = _reference(call, args)
            except (RuntimeError, ValueError):  # PyTorch refuses these arguments at its defaults
                continue
            tried += 1
            left_out = ", ".join(call.names[i] for i in sorted(call.defaults))
            check_call(ctx, call, args, f"{_described(call)} with {left_out} left out (PyTorch's defaults)",
                       expected=expected, omit=frozenset(call.defaults), later=later)
        later.judge()
        if not tried:
            raise CheckFailure(f"{calls.label}: no call of the spec is valid at PyTorch's defaults (a grader bug)")
    return run


# the property's name in the report, e.g. "conv2d [every tensor argument at the edge of mapped memory]"
MEMORY_EDGE = "every tensor argument at the edge of mapped memory"
# where = "end" | "start": how the placement is said in a check's description and in its failure
_EDGE_WORDS = {"end": ("ending at the last byte of mapped GPU memory", "past the end of an argument's memory"),
               "start": ("starting at the first byte of mapped GPU memory", "before the start of an argument's memory")}


def memory_edge_failure(what: str, where: str, names: tuple[str, ...], error: str) -> str:
    """The failure of a call whose arguments were at the edge of mapped memory (grader.verify.guard) and
    that faulted: the op read or wrote outside an argument, said first; CUDA's own words kept (the suite
    knows a lost context by them)."""
    placed, outside = _EDGE_WORDS[where]
    args = ", ".join(f"`{n}`" for n in names)
    if "misaligned address" in error:
        return (f"{what}: a misaligned access: the op assumed more alignment of an argument's data pointer than "
                f"its element size ({args} {placed}, as PyTorch may hand them; check the pointer's alignment "
                f"before a vector load) [{MEMORY_EDGE}]: {error}")
    return (f"{what}: the op read or wrote {outside} ({args} {placed}, so the first byte outside faults; "
            f"elsewhere the caching allocator's neighbouring memory hides such an access: an off-by-one load "
            f"guard, or a halo read at index -1) [{MEMORY_EDGE}]: {error}")


def _memory_edges(spec, calls: _Calls):
    """Each call (fixed and this run's random shapes, first dtype) twice: every tensor argument (but
    those the op updates in place) in memory of its own whose last byte is the last mapped one, then
    every one whose first byte is the first mapped one (grader.verify.guard.at_memory_edge): the right
    answer, and no access outside an argument, which faults there."""
    def run(ctx):
        if DEVICE.cuda:
            why = memory_edge_unsupported(torch.cuda.current_device())
            if why:  # a grader's limit, not the submission's: reported as not run, costing nothing
                import pytest

                from grader.verify.scoring import NOT_RUN_HERE

                pytest.skip(f"{NOT_RUN_HERE}{MEMORY_EDGE}: {why}")
        for call in calls(ctx, "memory edges", _dtypes(spec)[0]):
            expected = None  # the float64 reference, once for both placements (the same values)
            for where in ("end", "start"):
                args, names = _fresh(call.args), []
                for i, a in enumerate(args):
                    if isinstance(a, torch.Tensor) and i not in call.mutates:
                        placed = at_memory_edge(a, where)
                        if placed is not None:
                            args[i] = placed
                            names.append(call.names[i])
                if not names:
                    continue  # no tensor to place (empty ones, or not on the GPU)
                if expected is None:
                    expected = _reference(call, list(call.args))
                what = f"{_described(call)}, every tensor argument {_EDGE_WORDS[where][0]}"
                try:
                    check_call(ctx, call, args, what, expected=expected)
                except CheckFailure as e:
                    error = str(e)
                    if cuda_context_lost(error):
                        error = error[len(what) + 2:] if error.startswith(what + ": ") else error
                        raise CheckFailure(memory_edge_failure(what, where, tuple(names), error)) from None
                    raise
                del args
    return run


def _nonfinite(spec, calls: _Calls):
    def run(ctx):
        g = torch.Generator().manual_seed(ctx.seed_for(f"{calls.label} nonfinite"))
        for call in calls(ctx, "nonfinite", _dtypes(spec)[0]):
            items = []  # each argument's special values, the calls judged together (check_calls)
            for i in call.nonfinite:
                args = _fresh(call.args)
                flat = args[i].view(-1)
                if flat.numel() < 3:
                    continue
                values = (float("nan"), float("inf"), -float("inf")) if call.infinities else (float("nan"),)
                where = torch.randperm(flat.numel(), generator=g)[:len(values)].tolist()
                for pos, value in zip(where, values):
                    flat[pos] = value
                what = "NaN, +inf and -inf" if call.infinities else "NaN"
                items.append((args, f"{_described(call)}, {what} in `{call.names[i]}` at flat indices {where}", (),
                              _reference(call, args)))
            check_calls(ctx, call, items)
    return run


def _at_each_scalar(call: AuditCall):
    """(fresh arguments, "name=value") for each other value of each of the call's scalar parameters."""
    for i, values in call.scalars.items():
        for value in values:
            args = _fresh(call.args)
            args[i] = value
            yield args, f"{call.names[i]}={value}"


def _edge_text(call: AuditCall, i: int, edge: Edge) -> str:
    named = call.names[i]
    return f"`{named}` {edge.name}" if edge.make is not None else f"{named}={edge.name}"


def _at_each_edge(call: AuditCall, modes_only: bool = False):
    """(argument index, Edge, fresh arguments, description) for every declared edge of the call (or only
    its modes, Edge.is_mode), one at a time over its own arguments."""
    for i, edge in call.edges():
        if modes_only and not edge.is_mode:
            continue
        args = _fresh(call.args)
        args[i] = edge.at(args[i])
        yield i, edge, args, _edge_text(call, i, edge)


def edge_dtypes(spec: Spec) -> list[torch.dtype]:
    """The dtypes every edge is tried in: the spec's, and float64 (every op takes it; the judge too)."""
    return list(dict.fromkeys([*_dtypes(spec), torch.float64]))


def _edges(spec, calls: _Calls):
    def run(ctx):
        for dtype in edge_dtypes(spec):
            for call in calls(ctx, f"edges {dtype}", dtype, random_shapes=False):
                items = []  # the edges PyTorch computes, judged together (check_calls), in order
                for i, edge, args, which in _at_each_edge(call):
                    if _reach(call.label, call.names[i], edge.name, dtype_of(call)):
                        continue
                    # a refused edge (a mode the interface does not support): an error naming the argument,
                    # or the right answer
                    what = f"{_described(call)}, {which}"
                    try:
                        expected = _reference(call, args)
                    except Exception:  # noqa: BLE001: refused by the reference, however it says so
                        check_calls(ctx, call, items)  # the edges before it first: the first fault in order
                        items = []
                        _refused_as_the_reference_refuses(ctx, call, args, i, what)
                        continue
                    items.append((args, what, (call.names[i],) if edge.refused else (), expected))
                check_calls(ctx, call, items)
    return run


def _at_edge(ctx: Context, call: AuditCall, args: list, i: int, what: str, may_refuse=(), updates: bool = False,
             outputs: bool = True):
    """One edge of argument `i`: where PyTorch refuses it (an input one pixel smaller than the padded
    kernel), the op must refuse it too, naming the argument; else check_call."""
    try:
        expected = _reference(call, args)
    except Exception:  # noqa: BLE001: refused by the reference, however it says so
        _refused_as_the_reference_refuses(ctx, call, args, i, what)
        return
    check_call(ctx, call, args, what, may_refuse=may_refuse, updates=updates, expected=expected, outputs=outputs)


def _updates(spec, calls: _Calls):
    """The state each fixed call updates in place (running statistics), at every declared edge: judged in
    the updates' own group, its outputs and kernels left to the call's (a forward normalising with the
    wrong statistics, or through PyTorch at one edge, but updating the running ones right loses forward,
    not running_stats)."""
    def run(ctx):
        for dtype in edge_dtypes(spec):
            for call in calls(ctx, f"updates {dtype}", dtype, random_shapes=False):
                check_call(ctx, call, _fresh(call.args), _described(call), updates=True, outputs=False)
                for i, edge, args, which in _at_each_edge(call):
                    _at_edge(ctx, call, args, i, f"{_described(call)}, {which}",
                             may_refuse=(call.names[i],) if edge.refused else (), updates=True, outputs=False)
    return run


def stream_id(stream) -> int | None:
    """The watch's id of `stream` (grader.verify.observe.Kernel.stream): a short sleep queued there,
    observed alone."""
    with DEVICE.on(stream):
        _, seen = observe(lambda: torch.cuda._sleep(MARK_CYCLES), hidden=True)
    return next((k.stream for k in seen.kernels if is_sleep(k)), None)


# The holds before a call whose join is judged, in GPU clock cycles (2.5, 10 and 80 ms), each tried when the
# host outran the one before (`host_outran`). The forward's stream property starts at the first (its late
# inputs' sleep already holds the stream 10 ms); the backward through autograd, with nothing queued before
# it, at the second (on the H200, 01's `backward_never_joined` passed a hold of 2.5 ms unseen).
HOLDS = (5_000_000, 20_000_000, 160_000_000)
# how long the GPU may idle before the mark and the host still count as in time: above a kernel's dispatch
# after the one before it or after a join (microseconds), below a small unjoined kernel's time plus that
HOST_SLACK_S = 20e-6


def _held_then_marked(call, hold: int = HOLDS[0]):
    """`call()` between a long GPU sleep (`hold` cycles) queued on the current stream and a short one (the work
    a caller queues there next). The first holds back the call's work and the mark alike while the host queues
    them (the op's Python, autograd's engine): work on a stream of the op's own that waits for the current one
    but is never waited for becomes ready with the mark and is still running as it starts, where without the
    hold it could finish before the host reached the mark and pass unseen (`host_outran` tells when the hold
    was too short)."""
    if DEVICE.cuda:
        torch.cuda._sleep(hold)
    out = call()
    if DEVICE.cuda:
        torch.cuda._sleep(MARK_CYCLES)
    return out


def host_outran(seen: Observation, stream: int | None) -> bool:
    """Whether the GPU idled before `_held_then_marked`'s mark: every kernel before it had ended more than
    HOST_SLACK_S before it began, so the host queued the mark after the hold ran out and unjoined work could
    have ended unseen in between. The window proves nothing either way; a longer hold is tried."""
    mark = stream_mark(seen, stream)
    if mark is None:
        return False
    ends = [k.start_s + k.duration_s for k in seen.kernels if k is not mark and k.start_s <= mark.start_s]
    return bool(ends) and mark.start_s - max(ends) > HOST_SLACK_S


def read_early(read: list, settled: list, names: list, what: str) -> str | None:
    """Why the gradients read on the current stream as the backward returned (`read`) differ from the same
    gradients once the device is synchronized (`settled`), or None: the backward's work was still running
    on a stream of its own when the caller's stream read its results. NaN equals NaN here (a NaN the
    backward itself wrote is the values' check's to judge). One copy to the host for them all."""
    pairs = [(r, s, name) for r, s, name in zip(read, settled, names)
             if isinstance(r, torch.Tensor) and isinstance(s, torch.Tensor) and r.shape == s.shape]
    if not pairs:
        return None
    differ = torch.stack([(((r != s) & ~(torch.isnan(r) & torch.isnan(s))) if r.is_floating_point() else r != s)
                          .any() for r, s, _ in pairs]).tolist()
    name = next((name for (_, _, name), d in zip(pairs, differ) if d), None)
    if name is None:
        return None
    return (f"{what}: `{name}`'s gradient read on the current stream as the backward returned differs from its "
            "value once the device is synchronized: its work (on another stream) was not ordered before the "
            "current stream's next work started (e.g. current.wait_stream(side), or an event), so a caller that "
            "reads it there reads it unfinished")


def _stream(spec, calls: _Calls):
    """Each fixed call inside `with torch.cuda.stream(s)`, its inputs arriving late on s: on fresh tensors,
    then on the same tensors again with new values (an op that runs the calls it has seen before on a
    stream of its own, as the timing's repeated inputs, reads them early there, whatever the allocator
    reuses). Its work must also be ordered before s's next work (`unjoined_work`): an op whose own stream
    waits for s but that never makes s wait for it back is right only for a caller that synchronizes."""
    def run(ctx):
        side = DEVICE.side_stream()
        side_id = stream_id(side) if DEVICE.cuda and _watching() else None
        dtype = _dtypes(spec)[0]
        for call, again in zip(calls(ctx, "stream", dtype, random_shapes=False),
                               calls(ctx, "stream again", dtype, random_shapes=False)):
            fn = resolve(ctx.module, call.op)
            what = f"{_described(call)} inside `with torch.cuda.stream(s)` (launch on the current stream)"
            rule = _rule(ctx, call) if _watching() else None
            late = None
            for values, how in ((call.args, ""), (again.args, ", the same tensors again with new values")):
                expected = _reference(call, list(values))
                for hold in HOLDS:
                    DEVICE.sync()
                    with DEVICE.on(side):
                        if late is None:
                            late = DEVICE.late_copies(list(values))
                        else:
                            DEVICE.refill_late(late, list(values))
                        # observed like every call (grader.verify.observe.WATCH); the late inputs' copies and
                        # sleep are still queued, which the window allows
                        out, seen = observe(lambda h=hold: _held_then_marked(lambda: fn(*late), h),
                                            cpu_ops=bool(rule and rule.needs_cpu_ops), hidden=True,
                                            queued_ok=True) if rule is not None else (fn(*late), None)
                    DEVICE.sync()
                    if seen is None or not host_outran(seen, side_id):
                        break
                problem = rule.problem(seen, what + how, expect_work=False) if rule is not None else None
                problem = problem or (unjoined_work(seen, side_id, what + how) if seen is not None else None)
                if problem:
                    raise CheckFailure(problem)
                _compare_call(out, expected, call, list(values), what + how)
    return run


def _held_at_once(spec, calls: _Calls):
    def run(ctx):
        first = calls(ctx, "held 1", _dtypes(spec)[0], random_shapes=False)
        second = calls(ctx, "held 2", _dtypes(spec)[0], random_shapes=False)
        for a, b in zip(first, second):
            what = f"{_described(a)}, two calls with other values, both results kept"
            out_a, expected_a = check_call(ctx, a, list(a.args), what + " (the first)")
            out_b, _ = check_call(ctx, b, list(b.args), what + " (the second)")
            if _overlap(out_a, out_b):
                raise CheckFailure(f"{what}: the second result shares memory with the first (an op returns new "
                                   "tensors; a caller keeps both)")
            if _overlap(out_b, [t for i, t in enumerate(b.args) if i not in b.mutates]):
                raise CheckFailure(f"{what}: the result shares memory with an input")
            _compare_call(out_a, expected_a, a, list(a.args), what + " (the first, read after the second)")
    return run


def _gradients_property(spec, calls: _Calls):
    def run(ctx):
        side = DEVICE.side_stream()
        for call in calls(ctx, "gradients", _dtypes(spec)[0], random_shapes=False):
            if not call.grad_args:
                continue
            through = f"the gradients through {_described(call)}"
            check_gradients(ctx, call, _fresh(call.args), through)
            for i, edge, args, which in _at_each_edge(call):
                if not edge.refused and not _reach(call.label, call.names[i], f"{edge.name} (gradients)",
                                                   dtype_of(call)):
                    check_gradients(ctx, call, args, f"{through}, {which}")
            # each differentiable argument left out of autograd while the others are differentiated (a
            # frozen parameter), and where there are three or more, each alone differentiated (only
            # BatchNorm's affine parameters trained), in the base call and in each of its modes (a frozen
            # BatchNorm in eval): the backward must still give the differentiated ones theirs
            if len(call.grad_args) > 1:
                modes = [(None, call.args, "")]
                modes += [(edge.name, args, f", {which}")
                          for _, edge, args, which in _at_each_edge(call, modes_only=True)]
                for i in call.grad_args:
                    name = call.names[i]
                    subsets = [(False, tuple(j for j in call.grad_args if j != i),
                                f"`{name}` with requires_grad=False (the others differentiated)")]
                    if len(call.grad_args) > 2:
                        subsets.append((True, (i,), f"`{name}` alone differentiated (the others with "
                                                    "requires_grad=False)"))
                    for alone, grad_args, how in subsets:
                        for mode, args, at in modes:
                            if _reach(call.label, name, frozen_edge(name, mode, alone), dtype_of(call)):
                                continue
                            check_gradients(ctx, dataclasses.replace(call, grad_args=grad_args), _fresh(args),
                                            f"{through}, {how}{at}")
                # where there are four or more, one of the subsets between (a backward with a path of its own
                # for, say, a frozen BatchNorm's affine parameters: x, weight and bias differentiated), drawn
                # from the run's seed: each run meets another
                if len(call.grad_args) >= 4 and _reached is None:
                    g = torch.Generator().manual_seed(ctx.seed_for(f"{call.label} gradient subset"))
                    size = int(torch.randint(2, len(call.grad_args) - 1, (1,), generator=g))
                    picked = sorted(call.grad_args[int(k)] for k in torch.randperm(len(call.grad_args), generator=g)[:size])
                    names = ", ".join(f"`{call.names[j]}`" for j in picked)
                    for mode, args, at in modes:
                        check_gradients(ctx, dataclasses.replace(call, grad_args=tuple(picked)), _fresh(args),
                                        f"{through}, only {names} differentiated (the others with requires_grad=False){at}")
            check_gradients(ctx, call, _fresh(call.args), f"the gradients through {_described(call)} inside "
                            "`with torch.cuda.stream(s)` (the backward too runs on the current stream)", stream=side)
            # the gradient a caller's graph hands back is not always dense: a backward that reads it as packed
            # (a raw pointer, no .contiguous()) computes from the wrong elements
            for name, flowing in FLOWING_BACK.items():
                check_gradients(ctx, call, _fresh(call.args), f"{through}, the gradient flowing back as {name}",
                                flowing=flowing)
    return run


# random geometries drawn for the kernel watch, beside the fixed calls: a fall-back for one kind of
# shape (a pointwise kernel, a stride, a dilation) meets the watch in some run without being named
KERNEL_DRAWS = 3


def _kernel_cases(spec, calls: _Calls, ctx: Context, dtype):
    """(call, fresh arguments, description) for the kernel watch: every fixed call, each with every
    value of its scalar parameters (a fall-back for one value shows), and KERNEL_DRAWS random ones."""
    fixed = calls(ctx, f"kernels {dtype}", dtype, random_shapes=False)
    for call in fixed:
        yield call, _fresh(call.args), _described(call)
        for args, which in _at_each_scalar(call):
            yield call, args, f"{_described(call)}, {which}"
    for draw in range(KERNEL_DRAWS):
        with audit_seed(ctx.seed_for(f"{calls.label} kernels {dtype} {draw}")):
            g = torch.Generator().manual_seed(ctx.seed_for(f"{calls.label} kernel shapes {dtype} {draw}"))
            drawn = [c for c in spec.random_calls(g, DEVICE.name, dtype) if c.label == calls.label]
        for call in drawn:
            yield call, _fresh(call.args), _described(call)


def _own_kernels(spec, calls: _Calls):
    """Only the exercise's own kernels ran, in a window the op can see (a profiler on its thread), and
    the values are right there too: an op can tell this check from the others (whose windows it
    cannot see), but is checked the same way in both."""
    def run(ctx):
        import pytest

        if not _watching():
            pytest.skip("which kernels ran is not checked under compute-sanitizer (SANITIZE=1)")
        # float64 too, which the judge's calls use: an exercise taking only float32 draws float32 for it
        later = Later()  # each call in its own visible window, the values judged together
        for dtype in dict.fromkeys([*_dtypes(spec), torch.float64]):
            for call, args, what in _kernel_cases(spec, calls, ctx, dtype):
                check_call(ctx, call, args, what, visible=True, later=later)
        later.judge()
    return run


# --- output layout, state between calls, argument lengths ---------------------------------------

def _fake_result(op, args: list):
    """What the registered fake says `op` returns for `args`: fake tensors (shape, dtype, strides)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode() as mode:
        return op(*[mode.from_tensor(a) if isinstance(a, torch.Tensor) else a for a in args])


def _layout_difference(actual, expected, dtypes: bool = True) -> str | None:
    """How the tensors of `actual` differ from those of `expected` in shape, dtype (unless `dtypes` is
    False: a float64 reference's) or strides (those of dims longer than one: the others locate
    nothing), or None."""
    got, want = _tensors(actual), _tensors(expected)
    if len(got) != len(want):
        return f"{len(got)} tensors, expected {len(want)}"
    for k, (a, e) in enumerate(zip(got, want)):
        which = f"output {k}" if len(got) > 1 else "output"
        if tuple(a.shape) != tuple(e.shape) or (dtypes and a.dtype != e.dtype):
            return f"{which} is {list(a.shape)} {a.dtype}, expected {list(e.shape)} {e.dtype}"
        if any(a.stride(d) != e.stride(d) for d in range(a.dim()) if a.shape[d] > 1):
            return f"{which} has strides {list(a.stride())}, expected {list(e.stride())}"
    return None


def _output_strides(spec, calls: _Calls):
    """The op's own results (the Python API's, which a test of the registered op alone never sees)
    laid out as the registered fake says, for contiguous arguments and every layout of LAYOUTS; and,
    for contiguous arguments, as PyTorch's op (the reference) lays out a result it makes (a view of an
    input, as x.t(), is no layout a new tensor must copy)."""
    def run(ctx):
        for call in calls(ctx, "output strides", _dtypes(spec)[0], random_shapes=False):
            registered = resolve(ctx.module, call.registered) if call.registered else None
            layouts = []  # (how, args, what, PyTorch's own result where it makes a new tensor)
            for how in ("contiguous", *LAYOUTS):
                args, chosen = _fresh(call.args), []
                if how != "contiguous":
                    chosen = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor) and i not in call.mutates
                              and LAYOUTS[how](a) is not None]
                    if not chosen:
                        continue
                    for i in chosen:
                        args[i] = LAYOUTS[how](args[i])
                what = f"{_described(call)}, {'contiguous arguments' if how == 'contiguous' else 'every argument as a ' + how}"
                pytorch = None
                if how == "contiguous":
                    doubled = _double(args)
                    with torch.no_grad():
                        made = call.reference(*doubled)
                    pytorch = None if _overlap(made, doubled) else made
                layouts.append((args, what, tuple(call.names[i] for i in chosen), pytorch))
            # every layout holds the same values: one reference, and the calls judged together (check_calls)
            expected = _reference(call, _fresh(call.args))
            outs = check_calls(ctx, call, [(args, what, refusable, expected) for args, what, refusable, _ in layouts])
            for (args, what, _, pytorch), out in zip(layouts, outs):
                if out is None:
                    continue  # refused, with an error naming the argument
                if registered is not None:
                    try:
                        fake = _fake_result(registered, args)
                    except ERRORS:
                        fake = None  # a fake that fails where the op works: output metadata's opcheck says so
                    problem = fake is not None and _layout_difference(out, fake)
                    if problem:
                        raise CheckFailure(f"{what}: the result differs from the registered fake's ({problem}); "
                                           "torch.compile and every caller plan with the fake's layout")
                problem = pytorch is not None and _layout_difference(out, pytorch, dtypes=False)
                if problem:
                    raise CheckFailure(f"{what}: the result is laid out otherwise than PyTorch's own op lays out "
                                       f"its result ({problem}): return a new contiguous tensor")
    return run


def _between_calls(spec, calls: _Calls):
    """State an op may not keep between calls, each call on the same tensor objects:
    - called again, every call computes (a cache keyed by addresses, the output's included, warms up);
    - a result the caller overwrote (with NaN) never comes back, and two results share no memory;
    - each tensor argument in turn changed in place (the same address, new values: a cache or graph
      keyed by addresses, or a memo, answers the old values), then moved (new values at a new address,
      the old one still alive: a cache key that leaves that argument out replays the old address);
    - every argument given new values inside `with torch.cuda.stream(s)` after a GPU sleep, and the op
      called there: an op that runs inputs it has seen on a stream of its own reads the old values."""
    def run(ctx):
        side = DEVICE.side_stream()
        first = calls(ctx, "between calls 1", _dtypes(spec)[0], random_shapes=False)
        second = calls(ctx, "between calls 2", _dtypes(spec)[0], random_shapes=False)
        for a, b in zip(first, second):
            desc = _described(a)
            args = _fresh(a.args)
            tensors = [i for i, t in enumerate(args) if isinstance(t, torch.Tensor)]
            # every tensor the steps swap in is made now: the calls then allocate alike (their outputs and
            # workspaces at the same addresses), so a cache keyed by addresses meets its own key again
            others = _fresh(b.args)
            moved = {i: t for i, t in zip(tensors, _fresh([a.args[i] for i in tensors]))}
            # the float64 reference of the base values, computed once for every call on them (an op that
            # updates an argument by design changes them between calls: its references are computed anew)
            base = None if a.mutates else _reference(a, args)
            for k in range(3):
                check_call(ctx, a, args, f"{desc}, call {k + 1} on the same tensors", expected=base)
            out1, _ = check_call(ctx, a, args, f"{desc}, on the same tensors again", expected=base)
            with torch.no_grad():
                for t in _tensors(out1):
                    if t.is_floating_point():
                        t.detach().fill_(float("nan"))
            what = f"{desc}, on the same tensors after the caller filled the previous result with NaN"
            out2, _ = check_call(ctx, a, args, what, expected=base)
            if _overlap(out1, out2):
                raise CheckFailure(f"{what}: the result shares memory with the previous one (an op returns new "
                                   "tensors: a caller may keep or overwrite each)")
            del out1, out2
            held = []  # the arguments' old tensors stay alive: no new tensor takes their address
            for i in tensors:
                name = a.names[i]
                if not isinstance(others[i], torch.Tensor) or others[i].shape != args[i].shape \
                        or others[i].dtype != args[i].dtype or not args[i].numel():
                    continue
                with torch.no_grad():
                    args[i].copy_(others[i])
                changed = None if a.mutates else _reference(a, args)
                for again in ("", ", called again"):
                    check_call(ctx, a, args, f"{desc}, `{name}` changed in place (the same address, new values){again}",
                               expected=changed)
                held.append(args[i])
                args[i] = moved[i]  # a copy of the base values: every argument holds them again
                check_call(ctx, a, args, f"{desc}, `{name}` at a new address with other values (the old tensor still "
                           "alive)", expected=base)
            expected = _reference(a, list(a.args)) if base is None else base
            first_out = (_tensors(expected) or [None])[0]
            side_desc = f"{desc}: the same tensors, given new values on a side stream"
            fn = _observed(ctx, a, resolve(ctx.module, a.op), side_desc, queued_ok=True)
            DEVICE.sync()
            with DEVICE.on(side):
                if DEVICE.cuda:
                    torch.cuda._sleep(20_000_000)  # GPU clock cycles: milliseconds on any GPU
                with torch.no_grad():
                    for i in tensors:
                        args[i].copy_(a.args[i])
                if first_out is not None:
                    DEVICE.poison(first_out.numel(), dtype_of(a))
                out = fn(*args)
            DEVICE.sync()
            _compare_call(out, expected, a, list(a.args), f"{desc}: the same tensors, given new values inside "
                          "`with torch.cuda.stream(s)` and the op called there (it reads them on the current stream, "
                          "whatever it saw before)")
            del held
    return run


def _right_unchanged(ctx: Context, call: AuditCall) -> bool:
    """Whether the op gives the reference's answer on the call as declared: an input check's variants
    that PyTorch computes are judged on their values only then. An op wrong on every call (a dropped bias,
    ignored groups) loses the call's own group there; its argument handling is judged by what it refuses.
    Only a value or an error counts as wrong here: a call the watch faults (a PyTorch kernel, a modified
    input) stays judged by each variant, as every other call is."""
    args = _fresh(call.args)
    try:
        out, expected = invoke(ctx, call, args, f"{_described(call)}, as declared")
    except ERRORS:
        return False
    except CheckFailure:
        return True
    return output_problem(out, expected, tolerance(call, args), "as declared", terms=call_terms(call, args, expected)) is None


def _refused_as_the_reference_refuses(ctx: Context, call: AuditCall, args: list, i: int, what: str,
                                      named: tuple[str, ...] | None = None, values: bool = True) -> None:
    """Argument `i` changed in `args`: where the reference refuses the call, the op raises an error
    naming the argument, or one of `named` (computing something, or reading only part of it, is no
    check); where the reference computes it, the op gives the reference's answer or refuses it naming
    one of them (an interface may support less than PyTorch), unless `values` is false (_right_unchanged)."""
    name = call.names[i]
    named = named or (name,)
    try:
        _reference(call, args)
    except Exception:  # noqa: BLE001: refused by the reference (however it says so): the op must refuse too
        pass
    else:
        if values:
            check_call(ctx, call, args, what, may_refuse=named)
        return
    try:
        resolve(ctx.module, call.op)(*args)
        DEVICE.sync()
    except ERRORS as e:
        msg = clean(e)
        if "not implemented yet" in msg or not names_one_of(msg, named):
            which = f"`{name}`" if len(named) == 1 else f"`{name}` or another argument"
            raise CheckFailure(f"{what}: the error does not name {which}: {msg[:300]}") from None
        return
    raise CheckFailure(f"{what}: was accepted, where PyTorch refuses it; refuse it with an error naming `{name}`")


def _wrong_lengths(spec, calls: _Calls):
    """Each 1-D tensor argument of a call with several tensors one element longer (a per-channel
    parameter too long for the others' shapes): refused as the reference refuses it."""
    def run(ctx):
        for call in calls(ctx, "wrong lengths", _dtypes(spec)[0], random_shapes=False):
            if sum(isinstance(t, torch.Tensor) for t in call.args) < 2:
                continue
            values = _right_unchanged(ctx, call)
            for i, t in enumerate(call.args):
                if not isinstance(t, torch.Tensor) or t.dim() != 1:
                    continue
                args = _fresh(call.args)
                args[i] = torch.cat([args[i], args[i][:1] if args[i].numel() else args[i].new_zeros(1)])
                _refused_as_the_reference_refuses(
                    ctx, call, args, i, f"{_described(call)}, `{call.names[i]}` one element longer ({args[i].numel()})",
                    values=values)
    return run


def _int_lists(call: AuditCall) -> list[int]:
    """The call's arguments that are lists of integers (a convolution's stride, padding, dilation)."""
    return [i for i, a in enumerate(call.args) if isinstance(a, (list, tuple)) and a
            and all(isinstance(v, int) and not isinstance(v, bool) for v in a)]


def _list_length_changed(call: AuditCall, args: list) -> bool:
    return any(len(args[i]) != len(call.args[i]) for i in _int_lists(call))


def list_variants(value) -> list[tuple[list, str]]:
    """Each component of an integer list alone at -1 and at 0, and the list one shorter and one longer:
    the values a check of one component, or of the length, decides (`a[0] >= 1 && a[1] >= 1`)."""
    value = list(value)
    out = []
    for j, v in enumerate(value):
        for bad in (-1, 0):
            if v != bad:
                out.append((value[:j] + [bad] + value[j + 1:], f"component {j} = {bad}"))
    out.append((value[:-1], f"{len(value) - 1} values"))
    out.append((value + value[-1:], f"{len(value) + 1} values"))
    return out


def _list_components(spec, calls: _Calls, input_checks: bool = True):
    """Each integer-list argument with one component at -1 or 0 (the others as they were), and one value
    shorter or longer. `input_checks`: the lengths, and the components PyTorch's reference refuses, which
    the op must refuse with an error naming an argument (this one, or another that the changed geometry
    makes inconsistent: a backward's grad_output no longer the forward's shape), or (a length PyTorch
    computes) give its answer where it is right as declared. Else the components PyTorch computes, where
    the op gives its answer or refuses it so: values, judged in the call's own group (a kernel wrong only
    at padding 0 is wrong in its group; its input checks may be right)."""
    def run(ctx):
        for call in calls(ctx, "list components", _dtypes(spec)[0], random_shapes=False):
            values = _right_unchanged(ctx, call) if input_checks else False
            computed = []  # the components PyTorch computes, judged together (check_calls)
            for i in _int_lists(call):
                named = (call.names[i], *(n for n in call.names if n != call.names[i]))
                for value, which in list_variants(call.args[i]):
                    args = _fresh(call.args)
                    args[i] = type(call.args[i])(value)
                    what = f"{_described(call)}, `{call.names[i]}` = {value} ({which})"
                    handling = len(value) != len(call.args[i]) or _reference_refuses(call, args)
                    if handling != input_checks:
                        continue
                    if input_checks:
                        _refused_as_the_reference_refuses(ctx, call, args, i, what, named=named, values=values)
                    else:
                        computed.append((args, what, named, _reference(call, args)))
            check_calls(ctx, call, computed)
    return run


def _other_gpu(spec, calls: _Calls):
    """Each tensor argument alone on a second GPU (where there is one): the right answer, or an error
    naming it, as PyTorch's ops give; a kernel reading it through the first GPU's pointers is neither."""
    def run(ctx):
        for call in calls(ctx, "other gpu", _dtypes(spec)[0], random_shapes=False):
            if not _right_unchanged(ctx, call):
                continue  # wrong as declared: the call's own group judges its values
            for i, t in enumerate(call.args):
                if isinstance(t, torch.Tensor):
                    args = _fresh(call.args)
                    args[i] = args[i].to("cuda:1")
                    check_call(ctx, call, args, f"{_described(call)}, `{call.names[i]}` on cuda:1",
                               may_refuse=(call.names[i],))
    return run


def _fake(spec, calls: _Calls):
    def run(ctx):
        for call in calls(ctx, "fake", _dtypes(spec)[0], random_shapes=False):
            op = resolve(ctx.module, call.registered)

            def arguments(how: str) -> list:
                """Fresh arguments laid out `how`; those the op updates in place keep the layout it requires."""
                out = []
                for i, a in enumerate(_fresh(call.args)):
                    if isinstance(a, torch.Tensor) and i not in call.mutates:
                        if how in LAYOUTS:
                            a = LAYOUTS[how](a) if LAYOUTS[how](a) is not None else a
                        elif how == "channels_last" and a.dim() == 4:
                            # an op whose result follows its input's memory format differs from a fake that does not
                            a = a.contiguous(memory_format=torch.channels_last)
                    out.append(a)
                return out

            for how in ("contiguous", *LAYOUTS, "channels_last"):
                try:
                    op(*arguments(how))
                except ERRORS as e:
                    if how != "contiguous" and names_one_of(clean(e), call.names):
                        continue  # the interface refuses such arguments, with an error naming them
                    raise CheckFailure(f"{_described(call)}, {how} arguments: {type(e).__name__}: {clean(e)[:300]}") from None
                try:
                    torch.library.opcheck(op, tuple(arguments(how)), test_utils=("test_schema", "test_faketensor"))
                except Exception as e:  # noqa: BLE001: opcheck's own error types
                    raise CheckFailure(f"{_described(call)}, {how} arguments: the result does not match the "
                                       f"registered fake (shape, dtype or strides): {clean(e).splitlines()[0][:300]}") from None
    return run


FAKE_REFUSES = "the registered fake refuses what the op refuses"


def reference_result(call: AuditCall, args: list):
    """PyTorch's answer (the call's reference) for a probe, or its error where PyTorch refuses it: its
    shape checks on the meta device first (no kernel runs), then on the CPU in float64, where its
    kernels check more (an output_padding past the stride, a kernel of no columns). Not on the CPU for
    a probe with an empty tensor: some crash PyTorch's CPU kernels (torch.nn.grad.conv2d_input,
    depthwise, with an empty grad_output batch), which would take this process with them."""
    out = call.reference(*_in_float64(args, "meta"))
    if any(isinstance(a, torch.Tensor) and not a.numel() for a in args):
        return out
    return call.reference(*_in_float64(args, "cpu"))


def _reference_refuses(call: AuditCall, args: list) -> bool:
    """Whether PyTorch refuses these arguments (reference_result). Where the op refuses what PyTorch
    computes (a limit of the exercise's, which the audit lets an op state by an error naming the
    argument), the fake may trace it: the op still refuses it when it runs."""
    try:
        reference_result(call, args)
    except Exception:  # noqa: BLE001: a refusal, however the reference says it
        return True
    return False


def fake_refusal_problem(call: AuditCall, args: list, message: str,
                         shows: tuple[str, int] | None = None) -> str | None:
    """Why a registered fake's error on these arguments is no refusal, or None. A refusal names one of the
    call's arguments, as the op's must, or is PyTorch's own for the same arguments (a fake that calls
    PyTorch's meta function); an error the fake's code runs into (a negative size, a division by zero, a
    list index past its end) is none: such a fake refuses these inputs by accident, and traces others
    that its checks let through. `shows`: (a tensor argument, the size one of its dims was grown to): a
    refusal that names that argument shows the size it refused, not another of its figures (a message
    quoting the wrong dim sends the reader to the wrong number; the fakes are given code, not the
    student's)."""
    if names_one_of(message, call.names):
        if shows and names_one_of(message, shows[:1]) and str(shows[1]) not in re.findall(r"\d+", message):
            return (f"its registered fake refuses `{shows[0]}` with a dim grown to {shows[1]} without showing "
                    f"{shows[1]} ({message.splitlines()[0][:200]}): the message quotes another figure")
        return None
    try:
        call.reference(*_in_float64(args, "meta"))
    except Exception as e:  # noqa: BLE001: PyTorch's refusal, however it says it
        if clean(e).splitlines()[:1] == message.splitlines()[:1]:
            return None
    return (f"its registered fake raises an error that names no argument ({message.splitlines()[0][:200]}): "
            "an error its code ran into, not a check")


def optional_tensors(op) -> tuple[int, ...]:
    """The positions of `op`'s optional tensor arguments (`Tensor?` in its schema: a bias)."""
    schema = getattr(getattr(op, "default", op), "_schema", None)
    if schema is None:
        return ()
    return tuple(i for i, a in enumerate(schema.arguments)
                 if isinstance(a.type, torch.OptionalType) and isinstance(a.type.getElementType(), torch.TensorType))


def refusal_probes(call: AuditCall, optional: Sequence[int] = ()):
    """(fresh arguments, description, declared, shows) for every misshapen or out-of-domain input the grader
    has for one call, one change at a time: each tensor argument misshapen (grader.verify.checks.shape_spoils),
    each declared edge (an input one pixel below the smallest, where PyTorch refuses it; `declared` is
    True for an edge the spec lets the op refuse, as eps = 0, whatever PyTorch's version does with it),
    each integer list with a component at -1, at 0 (list_variants) or 64 above its value, or a value
    more or fewer; then all of them again with the `optional` tensor arguments (a bias) left out, whose
    own shape checks could refuse first and hide a check behind them (a grouped weight's filter count
    divisible by groups). `shows`: (argument, size) where one of a tensor's dims was grown (shape_spoils),
    the figure a refusal naming that argument quotes, else None."""
    def around(base: list, note: str, skip: Sequence[int]):
        for i, t in enumerate(base):
            if isinstance(t, torch.Tensor):
                for which, spoil, grown_to in shape_spoils(t):
                    args = _fresh(base)
                    args[i] = spoil(args[i])
                    shows = None if grown_to is None else (call.names[i], grown_to)
                    yield args, f"`{call.names[i]}` {which}{note}", False, shows
        for i, edge in call.edges():
            if i not in skip and (edge.make is None or isinstance(base[i], torch.Tensor)):
                args = _fresh(base)
                args[i] = edge.at(args[i])
                yield args, f"{_edge_text(call, i, edge)}{note}", edge.refused, None
        for i in _int_lists(call):
            far = [(list(base[i][:j]) + [v + 64] + list(base[i][j + 1:]), f"component {j} far above")
                   for j, v in enumerate(base[i])]  # an output_padding past the stride, a kernel past the input
            for value, which in list_variants(base[i]) + far:
                args = _fresh(base)
                args[i] = type(base[i])(value)
                yield args, f"`{call.names[i]}` = {value} ({which}){note}", False, None

    yield from around(list(call.args), "", ())
    left_out = [i for i in optional if isinstance(call.args[i], torch.Tensor)]
    if left_out:
        base = list(call.args)
        for i in left_out:
            base[i] = None
        yield from around(base, f", with {', '.join(f'`{call.names[i]}`' for i in left_out)} None", left_out)


def _fake_refuses(spec, calls: _Calls):
    """Every refusal probe of each fixed call (refusal_probes: each tensor argument misshapen, each declared
    edge, each integer list out of its domain, and again with the optional tensors left out), the
    registered op called on it, then its registered fake (under FakeTensorMode): where the op refuses it
    and so does PyTorch, or the spec lets it (an edge declared refused), the fake refuses it too, else
    torch.compile traces a wrong shape; where the op computes it (rightly, where PyTorch computes it too),
    the fake gives its shape and dtype."""
    def run(ctx):
        for call in calls(ctx, "fake refusals", _dtypes(spec)[0], random_shapes=False):
            op = resolve(ctx.module, call.registered)
            for args, which, declared, shows in refusal_probes(call, optional_tensors(op)):
                what = f"{_described(call)}, {which}"
                try:
                    out, refused = op(*_fresh(args)), None
                    DEVICE.sync()
                except ERRORS as e:
                    out, refused = None, clean(e)
                    if "not implemented yet" in refused:
                        raise CheckFailure(f"{what}: {refused[:300]}") from None
                try:
                    fake, fake_refused = _fake_result(op, args), None
                except Exception as e:  # noqa: BLE001: a refusal, however the fake says it
                    fake, fake_refused = None, clean(e)
                if refused is not None and fake_refused is None and (declared or _reference_refuses(call, args)):
                    shapes = ", ".join(str(list(f.shape)) for f in _tensors(fake))
                    raise CheckFailure(f"{what}: the op refuses it ({refused[:200]}), but its registered fake "
                                       f"accepts it (giving {shapes}): torch.compile would trace a wrong shape; "
                                       f"the fake must make the op's checks [{FAKE_REFUSES}]")
                if refused is not None and fake_refused is not None:
                    problem = fake_refusal_problem(call, args, fake_refused, shows)
                    if problem is not None:
                        raise CheckFailure(f"{what}: the op refuses it ({refused[:200]}), but {problem}; the fake "
                                           f"must make the op's checks, each naming its argument [{FAKE_REFUSES}]")
                # computed where PyTorch computes it: the fake must not refuse it, unless the op's answer is wrong
                # or a list's length changed (an input accepted by a faulty check and read in part, its answer
                # right or wrong by what lies past the list: the input checks judge both, _list_components)
                if refused is None and fake_refused is not None and not _reference_refuses(call, args) \
                        and not _list_length_changed(call, args) \
                        and output_problem(out, _reference(call, args), tolerance(call, args), what) is None:
                    raise CheckFailure(f"{what}: the op computes it, but its registered fake refuses it "
                                       f"({fake_refused[:200]}) [{FAKE_REFUSES}]")
                if refused is None and fake_refused is None:
                    got, want = ([(list(t.shape), t.dtype) for t in _tensors(v)] for v in (fake, out))
                    if got != want:
                        raise CheckFailure(f"{what}: the registered fake says {got}, the op returns {want} "
                                           f"[{FAKE_REFUSES}]")
    return run


def _on_capability(needs: tuple[int, int], label: str, run):
    def checked(ctx):
        from grader.verify.checks import require_capability

        if DEVICE.name == "cuda":
            require_capability(*needs, label)
        return run(ctx)
    return checked


def property_checks(spec: Spec) -> list[Check]:
    """The generated checks of every op of `spec` (see the module's docstring)."""
    try:
        with audit_seed(0):
            calls = spec.audit_calls("cpu", torch.float32)
    except Exception:  # noqa: BLE001: a spec that cannot describe its calls on the CPU gets no properties
        return []
    checks: list[Check] = []
    # last of all: a fault there loses the checks after it (the CUDA context is gone), so every other
    # check has run by then, and the fault's reason is its group's first failure
    at_edges: list[Check] = []
    seen: set[str] = set()
    for call in calls:
        if call.label in seen or call.reference is None:
            continue
        seen.add(call.label)
        op = _Calls(spec, call.label)
        group = call.group if call.group in spec.points else next(iter(spec.points))
        grad_group = AUTOGRAD if AUTOGRAD in spec.points else group

        def add(what, make, grp=group, slow=False, needs=call.needs_capability, label=call.label, into=checks):
            run = make(spec, op)
            if needs is not None:  # below it, reported as not run on this GPU (costs nothing)
                run = _on_capability(needs, label, run)
            into.append(Check(f"{call.label} [{what}]", grp, run, slow=slow))

        add("random shapes", _random_shapes)
        if len(_dtypes(spec)) > 1:
            add("random shapes in every dtype", lambda sp, c: _random_shapes(sp, c, every_dtype=True), slow=True)
        add("non-contiguous arguments", _noncontiguous)
        if call.defaults:
            add("PyTorch's defaults", _defaults)
        if call.nonfinite:
            add("NaN and infinities", _nonfinite)
        if call.edges():
            add("every declared edge", _edges)
        if call.updates is not None:
            updates_group = call.updates_group if call.updates_group in spec.points else group
            add("the state it updates, at every edge", _updates, updates_group)
        add("on the current stream", _stream)
        add("two results held at once", _held_at_once)
        add("output strides against the registered fake and PyTorch's", _output_strides)
        add("state between calls on the same tensors", _between_calls)
        tensors = [a for a in call.args if isinstance(a, torch.Tensor)]
        if len(tensors) > 1 and any(a.dim() == 1 for a in tensors):
            add("1-D arguments one element longer", _wrong_lengths,
                grp="input_checks" if "input_checks" in spec.points else group)
        if DEVICE.cuda and torch.cuda.is_available() and torch.cuda.device_count() > 1:
            add("each tensor argument on another GPU", _other_gpu,
                grp="input_checks" if "input_checks" in spec.points else group)
        if _int_lists(call):
            add("each component of its list arguments", _list_components,
                grp="input_checks" if "input_checks" in spec.points else group)
            add("each component of its list arguments, where PyTorch computes it",
                lambda sp, c: _list_components(sp, c, input_checks=False))
        if call.grad_args:
            add("gradients", _gradients_property, grad_group)
        if call.kernels is not None or spec.kernel_rule() is not None:
            add("own kernels in every dtype and shape", _own_kernels, slow=True)
        if call.registered:
            add("output metadata against the registered fake", _fake, slow=True)
            add(FAKE_REFUSES, _fake_refuses, slow=True)
        add(MEMORY_EDGE, _memory_edges, into=at_edges)
    return checks + module_checks(spec) + drop_in_checks(spec) + at_edges


def _module_options(entry: ModuleOptions):
    def run(ctx):
        for option, edges in entry.options.items():
            for edge in edges:
                if _reach(entry.name, option, edge.name, "module"):
                    continue
                chosen = {**entry.base, option: edge.value}
                what = f"{entry.name} with {option}={edge.name}"
                try:
                    entry.check(ctx, chosen, what)
                except ERRORS as e:
                    # an option the entry point does not support: refused with an error naming it (or
                    # computed as PyTorch's modules compute it)
                    _refused_or_raise(e, (option,) if edge.refused else (), what)
                    continue
                except CheckFailure as e:
                    if edge.refused:
                        raise CheckFailure(f"{e} ({option}={edge.name} is not supported: refuse it with an error "
                                           f"naming `{option}`, or compute it as PyTorch does)") from None
                    raise
    return run


def module_checks(spec: Spec) -> list[Check]:
    """One check per module entry point of `spec` (Spec.module_options): every option's every edge."""
    return [Check(f"{entry.group}[{entry.name}: every option's edges]", entry.group, _module_options(entry))
            for entry in spec.module_options()]


def _arguments_text(args, kwargs) -> str:
    return ", ".join([repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs.items()])


def _drop_in(entry: DropIn, gradients: bool):
    """The check of `entry`'s outputs (its construction, parameters and buffers too), or of its gradients:
    two checks, so that a module whose backward alone is wrong keeps its forward group's points."""
    def shapes(module) -> dict:
        return {"parameters": {n: tuple(t.shape) for n, t in module.named_parameters()},
                "buffers": {n: tuple(t.shape) for n, t in module.named_buffers()}}

    def run(ctx):
        ours_class = getattr(ctx.module, entry.name, None)
        if not isinstance(ours_class, type):
            raise CheckFailure(f"{entry.name}: the exercise's module has no class {entry.name}")
        device = DEVICE.name if DEVICE.cuda else "cpu"
        g = torch.Generator().manual_seed(ctx.seed_for(f"drop-in {entry.name}"))
        for args, kwargs in entry.constructions:
            what = f"{entry.name}({_arguments_text(args, kwargs)}) against torch.nn.{entry.torch_class.__name__}"
            theirs = entry.torch_class(*args, **kwargs)
            try:
                ours = ours_class(*args, **kwargs)
            except ERRORS as e:
                raise CheckFailure(f"{what}: {type(e).__name__}: {clean(e)[:300]}") from None
            if shapes(ours) != shapes(theirs):
                raise CheckFailure(f"{what}: {shapes(ours)}, expected {shapes(theirs)}")
            if not gradients and ours.extra_repr() != theirs.extra_repr():  # what print(model) shows of it
                raise CheckFailure(f"{what}: extra_repr() gives {ours.extra_repr()!r}, torch.nn's "
                                   f"{theirs.extra_repr()!r}")
            # torch.nn's drawn state in both: the same values whatever each initialisation draws
            ours.load_state_dict(theirs.state_dict())
            ours, theirs = ours.to(device), theirs.to(device, torch.float64)
            x = torch.randn(entry.input_shape(args, kwargs), generator=g, dtype=torch.float64) * 3
            calls = [({}, False), *(entry.forward_calls(theirs, tuple(x.shape)) if entry.forward_calls else ())]
            for extra, refused in calls:
                said = f"{what}, forward(x, {_arguments_text((), extra)})" if extra else what
                if refused:
                    expect_error(lambda: ours(x.to(device, torch.float32), **extra), names=tuple(extra),
                                 what=f"{said}, which torch.nn's refuses")
                    continue
                ours.zero_grad(), theirs.zero_grad()
                # fresh leaves each call (on the CPU, x.to() of x's own device and dtype would be x itself); each
                # module is given a copy made under autograd, which one built with inplace=True may overwrite
                x_ours = x.to(device, torch.float32).detach().requires_grad_()
                x_ref = x.to(device).detach().clone().requires_grad_()
                in_ours, in_ref = x_ours.clone(), x_ref.clone()
                y_ref = theirs(in_ref, **extra)
                y = ours(in_ours, **extra)
                DEVICE.sync()
                v = torch.randn(tuple(y_ref.shape), generator=g, dtype=torch.float64).to(device)
                if not gradients:
                    assert_rel_error(y.detach(), y_ref.detach(), entry.tol, f"{said}: the output")
                    if torch.equal(in_ref.detach(), x_ref.detach()):  # torch.nn's leaves its input as it was
                        if not torch.equal(in_ours.detach(), x.to(device, torch.float32)):
                            raise CheckFailure(f"{said}: the call changed its input")
                    else:  # in place: its input overwritten with the result, and returned
                        assert_rel_error(in_ours.detach(), in_ref.detach(), entry.tol,
                                         f"{said}: its input after the call (torch.nn's holds the result there)")
                    if (y is in_ours) != (y_ref is in_ref):
                        raise CheckFailure(f"{said}: " + ("returned its input itself, where torch.nn's returns a new "
                                                          "tensor" if y is in_ours else "returned a new tensor, where "
                                                          "torch.nn's returns its input, overwritten"))
                    continue
                if y.shape != y_ref.shape:
                    raise CheckFailure(f"{said}: an output of shape {tuple(y.shape)}, expected {tuple(y_ref.shape)}")
                try:
                    (y_ref * v).sum().backward()
                    refused, reference = None, theirs
                except RuntimeError as e:
                    refused = clean(e).splitlines()[0][:200]
                    reference, x_ref = _out_of_place_gradients(entry, args, kwargs, theirs, x, v, device)
                try:
                    (y * v.to(y.dtype)).sum().backward()
                except ERRORS as e:
                    if refused is None or "not implemented yet" in str(e):
                        raise
                    continue  # refused, as torch.nn's module refuses it
                DEVICE.sync()
                if refused is not None and reference is None:
                    raise CheckFailure(f"{said}: the backward ran where torch.nn's refuses it ({refused}); refuse it "
                                       "with an error too")
                if refused is not None:
                    said = f"{said}, whose backward torch.nn's refuses ({refused}), against the out-of-place module's"
                mine = {"the input": x_ours.grad, **{n: t.grad for n, t in ours.named_parameters()}}
                for name, want in {"the input": x_ref.grad,
                                   **{n: t.grad for n, t in reference.named_parameters()}}.items():
                    if mine[name] is None:
                        raise CheckFailure(f"{said}: no gradient for {name}")
                    assert_rel_error(mine[name], want, entry.grad_tol, f"{said}: the gradient of {name}")
    return run


def _out_of_place_gradients(entry: DropIn, args, kwargs, theirs, x, v, device):
    """Where torch.nn's module refuses a backward (an in-place activation's, which reads its result: a
    negative slope makes the result's sign ambiguous), the gradients a drop-in may compute instead: torch.nn's
    module built with inplace=False, holding `theirs`'s state, in float64. Returns (that module, its input
    with its gradient), or (None, None) where the class takes no `inplace`."""
    signature = inspect.signature(entry.torch_class)
    if "inplace" not in signature.parameters:
        return None, None
    bound = signature.bind(*args, **kwargs)  # the constructions built torch.nn's module already
    bound.arguments["inplace"] = False
    module = entry.torch_class(*bound.args, **bound.kwargs)
    module.load_state_dict(theirs.state_dict())
    module = module.to(device, torch.float64)
    x_ref = x.to(device).detach().clone().requires_grad_()
    (module(x_ref) * v).sum().backward()
    return module, x_ref


def drop_in_checks(spec: Spec) -> list[Check]:
    """Two checks per drop-in module class of `spec` (Spec.drop_ins): torch.nn's defaults, argument order,
    parameters and outputs in the entry's group; its gradients in its grad_group (the spec's autograd
    group where it has one)."""
    checks = []
    for entry in spec.drop_ins():
        title = f"{entry.name}: a drop-in for torch.nn.{entry.torch_class.__name__}"
        grad_group = entry.grad_group if entry.grad_group in spec.points else entry.group
        checks += [Check(f"{entry.group}[{title}]", entry.group, _drop_in(entry, gradients=False)),
                   Check(f"{grad_group}[{title}: its gradients]", grad_group, _drop_in(entry, gradients=True))]
    return checks
