"""The judge: the grader re-checks the submission's results in a process its code never runs in.

A submission's Python and C++ run inside its grading process, so they could change anything there:
patch `torch.allclose` or the grader's own functions, or rewrite the results file. The integrity
snapshot (grader.verify.integrity) notices patching; this module makes the scored verdict not depend on
that process telling the truth. It works in two halves:

- In the grading process, before any check, `record_outputs` calls each public op of the exercise
  once on the spec's valid audit calls (`Spec.audit_calls`: small, every op covered), their values
  drawn fresh from the run's seed, and saves only the outputs (tensors, to the CPU) to a file.
- In the parent grader, which never imports the submission, `verdicts` draws the same inputs from
  the same seed, computes the reference itself in float64 on the CPU, and compares. Each call
  becomes one test, `judge: <call>`, in the group whose points it vouches for (`AuditCall.group`):
  a wrong or missing output fails that group whatever the grading process reported. A call with
  `grad_args` is also differentiated through autograd (<d(y . v)/d arg> for a random v, one scalar
  backward): the gradients vouch for the "autograd" group, against the reference differentiated in
  float64 here.
- After every check, `record_layouts` repeats each call with every tensor argument in each
  non-contiguous layout (grader.verify.checks.LAYOUTS): the right result, or an error naming one of
  them, for the call's group. Then, last (a submission without input checks may crash on it),
  `record_input_checks` repeats each call with one tensor argument at a time on the CPU and saves the
  error it raised, or that it was accepted. The judge requires an error naming that argument, for
  "input_checks". A call among these that loses the CUDA context fails its own group and leaves the
  ones after it unasked and unjudged, as a check's fault does (`verdicts`).

So wrong results cannot earn points by tampering with the checks: a group passes only if the op's
outputs, read back and compared here, are right. What the judge cannot see from outside is how the
outputs were made (which kernels ran, the timing): those are measured in the grading process, and
the parent recomputes the speed's verdict from the raw measurements (grader.verify.scoring.speed_verdict).
"""
from __future__ import annotations

import contextlib
import os
import re
import threading
import traceback
from pathlib import Path
from types import ModuleType
from typing import Callable, Sequence

import torch

from grader import env
from grader.verify.checks import LAYOUTS, cuda_context_lost, error_message, output_problem, relative_error
from grader.verify.checks import without_cpp_stack as clean  # the judge's name for it
from grader.verify.checks import call_tolerance as tolerance  # noqa: F401 (the judge's name for it)
from grader.verify.checks import SMALL_OUTPUT, call_terms, squares
from grader.verify.outcomes import TestOutcome
from grader.verify.results import save_atomic
from grader.verify.spec import AuditCall, Spec, audit_seed, derived_seed

JUDGE_PREFIX = "judge: "
RECHECKED = "re-checked by the grader outside the submission's process: "  # a failed verdict's reason begins so
AUTOGRAD = "autograd"  # the group the gradients through autograd vouch for
GRADS_SUFFIX = " autograd"
INPUT_CHECKS = "input_checks"  # the group the wrong-device calls vouch for
LAYOUT_INFIX = ": every tensor argument as a "  # "<call>: every tensor argument as a <layout>"
DEVICE_INFIX = ": device, "  # "<call>: device, <argument> on the CPU", as the bad-input audit names it
# the outputs file is written by the submission's process: refuse to load an absurd one
MAX_OUTPUTS_BYTES = 64 << 20
# the answer (in the outputs file) whose fault lost the CUDA context as the process ended: no call after it
# could reach the GPU, so the judge leaves the answers missing after it unjudged (`verdicts`)
CONTEXT_LOST_KEY = "\0context lost in"


# --- comparing (shared with the bad-input audit, tests/test_input_audit.py) ----------------------

def is_tensor(a) -> bool:
    return isinstance(a, torch.Tensor)


def compare(actual, expected, tol: float, what: str, terms=None) -> str | None:
    """None when `actual` matches `expected` (a tensor, or a tuple with None where not compared), on
    its device: grader.verify.checks.output_problem, the generated properties' comparison (`terms`:
    call_terms)."""
    return output_problem(actual, expected, tol, what, same_device=True, terms=terms)


def names_one_of(msg: str, names) -> bool:
    """The message names one of `names` as a word ("x must", "x's", "(x", not "max" or "bn_x")."""
    return any(re.search(rf"(?<!\w){re.escape(n)}(?!\w)", msg) for n in names)


def resolve(module, path: str):
    """`conv2d` or `lib.ops.conv2d_forward` under the exercise's module."""
    fn = module
    for part in path.split("."):
        fn = getattr(fn, part)
    return fn


# --- the calls ------------------------------------------------------------------------------------

def judged_calls(spec: Spec, seed: int) -> list[AuditCall]:
    """The spec's valid audit calls that have a reference, on the CPU, their values drawn from
    `seed` (the same in every process)."""
    with audit_seed(seed):
        calls = spec.audit_calls("cpu", torch.float64)
    return [c for c in calls if c.reference is not None]


def _to(value, device: str):
    if is_tensor(value):
        return value.detach().to(device)
    if isinstance(value, (tuple, list)):
        return [_to(v, device) for v in value]
    return value


def _sync(device: str) -> None:
    """Wait for the op's kernels, so that a fault in them is this call's answer."""
    if device == "cuda":
        torch.cuda.synchronize()


def _error(e: BaseException) -> dict:
    return {"error": f"{type(e).__name__}: {clean(e)[:500]}"}


def _storable(value):
    """An op's result as the judge may load it (torch.load with weights_only): plain tensors on the
    CPU in lists, None, numbers; anything else (a Tensor subclass too, which could not be loaded and
    would cost every later call's answer) by its type's name."""
    if type(value) is torch.Tensor:
        return value.detach().cpu().clone()
    if isinstance(value, (tuple, list)):
        return [_storable(v) for v in value]
    if value is None or isinstance(value, (int, float, bool)):
        return value
    return {"unexpected type": type(value).__name__}


# --- in the grading process -------------------------------------------------------------------------

def record_outputs(module: ModuleType, spec: Spec, seed: int, path: Path, device: str = "cuda",
                   go_on: bool = False) -> str | None:
    """Call every judged op on `device` and save its outputs to `path` after each call (a crash
    leaves the finished ones). Returns the first failure's message (a fault that lost the CUDA context:
    its own, as the calls stop there), or None. `go_on`: the file holds what an earlier image of this
    process recorded before a fault (grader/run/suite/resume.py): what it holds (a call's output, its
    gradients: each a step of its own) is kept, the faulted step among them; the others are replayed."""
    outputs: dict[str, object] = load_outputs(path)[0] if go_on else {}
    first_problem = None
    for call in judged_calls(spec, seed):
        steps = [(call.label, lambda call=call: _forward(module, call, device))]
        if call.grad_args and spec.points.get(AUTOGRAD):
            # its own step: after a fault in the forward, a fresh image still records the gradients
            steps.append((call.label + GRADS_SUFFIX, lambda call=call: _gradients(module, call, seed, device)))
        for label, step in steps:
            if label in outputs:
                if not _is_error(outputs[label]):
                    _replay(step)
                continue
            try:
                outputs[label] = step()
            except Exception as e:  # noqa: BLE001: any error is this call's answer, for the judge to report
                outputs[label] = _error(e)
            message = outputs[label]["error"] if _is_error(outputs[label]) else None
            if message:
                first_problem = first_problem or f"{label}: {message}"
            save_atomic(path, outputs)
            if message and cuda_context_lost(message):
                return f"{label}: {message}"  # this one, which the caller goes on after
    return first_problem


def _is_error(answer) -> bool:
    return isinstance(answer, dict) and isinstance(answer.get("error"), str)


def _replay(step) -> None:
    """A step an earlier image answered, made again with its answer dropped: the fresh image's ops then
    start from the state the first image's checks met (a flag read back from the GPU once, a cache
    filled), so none of that one-time work lands in a watched check. Not a step that failed (the fault)."""
    try:
        step()
    except Exception:  # noqa: BLE001: its answer is the earlier image's
        pass


def _forward(module: ModuleType, call: AuditCall, device: str):
    result = resolve(module, call.op)(*[_to(a, device) for a in call.args])
    _sync(device)
    return _storable(result)


def layout_variants(call: AuditCall) -> list[tuple[str, list[int], object]]:
    """(name, argument indices, copy) of the call with every tensor argument it does not update in
    place laid out otherwise (grader.verify.checks.LAYOUTS), where a layout applies to any of them: a
    submission that disabled the in-process checks of non-contiguous inputs still meets these."""
    out = []
    for layout, copy in LAYOUTS.items():
        chosen = [i for i, a in enumerate(call.args) if is_tensor(a) and i not in call.mutates and copy(a) is not None]
        if chosen:
            out.append((f"{call.label}{LAYOUT_INFIX}{layout}", chosen, copy))
    return out


def record_layouts(module: ModuleType, spec: Spec, seed: int, path: Path, device: str = "cuda") -> None:
    """Each judged call in every layout of layout_variants: its output or its error, added to the
    outputs file after each call. Run after every check, before the wrong-device calls (an op without
    input checks that faults on those costs their answers only); never raises, as record_input_checks."""
    try:
        outputs, _ = load_outputs(path)
        for call in judged_calls(spec, seed):
            for name, chosen, copy in layout_variants(call):
                args = [_to(a, device) for a in call.args]
                for i in chosen:
                    args[i] = copy(args[i])
                lost = False
                try:
                    outputs[name] = _storable(resolve(module, call.op)(*args))
                    _sync(device)
                except Exception as e:  # noqa: BLE001: the error is the answer (naming an argument may be fine)
                    outputs[name] = _error(e)
                    lost = cuda_context_lost(outputs[name]["error"])
                if lost:
                    outputs[CONTEXT_LOST_KEY] = name
                save_atomic(path, outputs)
                if lost:
                    return
    except Exception:  # noqa: BLE001: what is missing, the judge reports as missing
        traceback.print_exc()


def device_spoils(call: AuditCall) -> list[tuple[str, int]]:
    """(name, index) of each tensor argument, for the call with it on the CPU."""
    return [(f"{call.label}{DEVICE_INFIX}{call.names[i]} on the CPU", i)
            for i, a in enumerate(call.args) if is_tensor(a)]


def record_input_checks(module: ModuleType, spec: Spec, seed: int, path: Path, device: str = "cuda") -> None:
    """Each judged call with one tensor argument on the CPU and the rest on `device`: the error it
    raised, or that it was accepted, added to the outputs file after each call. Never raises: it runs
    after every check (before the timing's turn, or as the process ends), where an exception would be
    blamed on a test it is not part of (a fault of its own is printed to the grading log; the judge
    reports the answers missing)."""
    if not spec.points.get(INPUT_CHECKS):
        return
    try:
        outputs, _ = load_outputs(path)
        if CONTEXT_LOST_KEY in outputs:  # a layout call faulted: no call here could reach the GPU
            return
        for call in judged_calls(spec, seed):
            for name, i in device_spoils(call):
                try:
                    args = [_to(a, device) for a in call.args]
                    args[i] = call.args[i]
                    resolve(module, call.op)(*args)
                    _sync(device)
                    outputs[name] = {"accepted": True}
                except Exception as e:  # noqa: BLE001: the error is the answer
                    outputs[name] = {"error": error_message(e, module, op=call.op)[:500]}
                    if cuda_context_lost(outputs[name]["error"]):
                        outputs[CONTEXT_LOST_KEY] = name
                save_atomic(path, outputs)
                if CONTEXT_LOST_KEY in outputs:
                    return
    except Exception:  # noqa: BLE001: what is missing, the judge reports as missing
        traceback.print_exc()


class LastCalls:
    """record_layouts, then record_input_checks, made once per process image, after every check: last
    because an op without input checks may crash on them and so lose only their answers. The grading
    process makes them before its timing's turn on the GPU (so that the turn holds the timing alone), or
    as it ends where no timing did (grader/run/suite/conftest.py)."""

    def __init__(self, module: ModuleType, spec: Spec, seed: int, path: Path, device: str = "cuda"):
        self.module, self.spec, self.seed, self.path, self.device = module, spec, seed, path, device
        self.made = False

    def make(self) -> str | None:
        """Make them (once): the call whose fault lost the CUDA context among them, else None. None also
        where an earlier image of this process made them and faulted (the fault is in the file already)."""
        if self.made:
            return None
        self.made = True
        if CONTEXT_LOST_KEY in load_outputs(self.path)[0]:
            return None
        record_layouts(self.module, self.spec, self.seed, self.path, self.device)
        record_input_checks(self.module, self.spec, self.seed, self.path, self.device)
        return load_outputs(self.path)[0].get(CONTEXT_LOST_KEY)


def cotangent(shape, seed: int) -> torch.Tensor:
    """The random v of gradients(): float64, on the CPU, the same in every process for one seed."""
    return torch.randn(tuple(shape), generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def gradients(fn, call: AuditCall, args: list, cotangent_seed: int, v: torch.Tensor | None = None,
              forward: list | None = None,
              backward: Callable[[Callable[[], None], list], list | None] | None = None) -> list:
    """The gradients of <fn(*args), v> for the call's grad_args, through autograd, for a random v
    drawn from `cotangent_seed` (or `v`, cotangent(...) already where the result will be: no copy
    between the forward and the backward); one scalar backward (torch.autograd.grad with explicit
    gradients would import sympy: seconds). Also grader.verify.properties's, which passes `forward`
    to receive the forward's result (detached) and judge it too, and `backward(step, leaves)` to run the
    backward step itself (in a window of the watch); what that returns, where not None, stands for the
    leaves' gradients (as the current stream read them)."""
    args = list(args)
    for i in call.grad_args:
        args[i] = args[i].detach().requires_grad_()
    y = fn(*args)
    if not is_tensor(y):
        raise TypeError(f"returned a {type(y).__name__}, not a tensor")
    if forward is not None:
        forward.append(y.detach())
    if not y.requires_grad:
        raise RuntimeError("the result does not require grad: no backward is registered")
    if v is None:
        v = cotangent(y.shape, cotangent_seed)
    scalar = _HandsBack.apply(y, v.to(device=y.device, dtype=y.dtype))
    leaves = [args[i] for i in call.grad_args]
    read = backward(scalar.backward, leaves) if backward is not None else scalar.backward()
    return read if read is not None else [leaf.grad for leaf in leaves]


class _HandsBack(torch.autograd.Function):
    """A scalar whose backward hands `v` itself to y's backward as its gradient, layout and all (a product
    with v, summed, would hand it a new dense tensor): d<y, v>/d args, and a backward meets the gradient
    a caller gives, non-contiguous or expanded (stride 0, as `y.sum()` hands back) where it is."""

    @staticmethod
    def forward(ctx, y, v):
        ctx.v = v
        return y.new_zeros(())

    @staticmethod
    def backward(ctx, grad):
        return ctx.v, None


def gradient_terms(call: AuditCall, args: list, expected: list, v: torch.Tensor) -> list:
    """For each of the call's gradients (`expected`, the reference's, for the cotangent `v`) its terms' norms
    where the call sums products (`sums_products`) and the gradient is small enough to cancel (an OutputCheck's
    `terms`), else None. Each gradient of a sum of products sums products too: the gradients of
    <reference(the arguments squared), v squared> are, term by term, the sums of those terms' squares."""
    small = [k for k, e in enumerate(expected) if is_tensor(e) and e.numel() <= SMALL_OUTPUT]
    if not call.sums_products or call.exact or not small:
        return [None] * len(expected)
    v64 = torch.nan_to_num(v.double(), nan=0.0, posinf=0.0, neginf=0.0)
    squared = gradients(call.reference, call, squares(args), 0, v64 * v64)  # (v goes where the answer is)
    return [squared[k].clamp_min(0).sqrt().to(expected[k].device) if k in small else None
            for k in range(len(expected))]


def _differentiate(fn, call: AuditCall, seed: int, device: str) -> list:
    """gradients() on the call's own arguments on `device`, v the same in the grading process and here."""
    return gradients(fn, call, [_to(a, device) for a in call.args], derived_seed(seed, call.label))


def _gradients(module: ModuleType, call: AuditCall, seed: int, device: str):
    try:
        grads = _differentiate(resolve(module, call.op), call, seed, device)
        _sync(device)
        return _storable(grads)
    except Exception as e:  # noqa: BLE001
        return _error(e)


# --- in the parent ----------------------------------------------------------------------------------

def load_outputs(path: Path) -> tuple[dict, str]:
    """(outputs by call label, why none could be read)."""
    try:
        size = os.path.getsize(path)
    except OSError:
        return {}, "the grading process saved no outputs for the judge (it ended before its first call)"
    if size > MAX_OUTPUTS_BYTES:
        return {}, f"the outputs file holds {size} bytes, far more than these small calls return"
    try:
        data = torch.load(path, map_location="cpu", weights_only=True)  # no code runs from the file
    except Exception as e:  # noqa: BLE001
        return {}, f"the outputs file could not be read ({type(e).__name__}: {clean(e)[:200]})"
    if not isinstance(data, dict):
        return {}, f"the outputs file holds a {type(data).__name__}, not the outputs by call"
    return data, ""


class References:
    """The judge's float64 answers for one spec and seed, each computed once (under one lock): they depend
    on nothing a submission does, so the parent computes them ahead (`compute_all`, in a thread beside the
    grading processes' checks: 4 of a warm grade's last 5 s on an H200, 2026-11-30) and `verdicts` only
    compares; or `verdicts` computes those it asks for first. The forward answers and the gradients each
    have their own draw of the calls (a reference may update its arguments in place), as each pass of
    `verdicts` had."""

    def __init__(self, spec: Spec, seed: int):
        self.spec, self.seed = spec, seed
        self._lock = threading.RLock()
        self._draws: dict[str, list[AuditCall]] = {}
        self._kept: dict[tuple[str, str], tuple] = {}

    def calls(self, kind: str = "forward") -> list[AuditCall]:
        """The judged calls of the `kind` ("forward" or "gradients") draw, the same objects every time."""
        with self._lock:
            if kind not in self._draws:
                self._draws[kind] = judged_calls(self.spec, self.seed)
            return self._draws[kind]

    def _get(self, key: tuple[str, str], compute):
        with self._lock:
            if key not in self._kept:
                try:
                    self._kept[key] = (compute(), None)
                except Exception as e:  # noqa: BLE001: raised again to each caller, reported as a grader fault
                    self._kept[key] = (None, e)
            value, error = self._kept[key]
        if error is not None:
            raise error
        return value

    def answer(self, call: AuditCall):
        """The reference answer of `call` (one of `calls()`), in float64 on the CPU."""
        return self._get(("forward", call.label), lambda: _reference_answer(call))

    def gradients(self, call: AuditCall) -> list:
        """The reference's gradients through `call` (one of `calls("gradients")`), in float64 on the CPU."""
        return self._get(("gradients", call.label), lambda: _differentiate(call.reference, call, self.seed, "cpu"))

    def gradient_terms(self, call: AuditCall) -> list:
        """gradient_terms of `call`'s gradients, for the cotangent the grading process drew."""
        def compute():
            expected = self.gradients(call)
            if not call.sums_products:
                return [None] * len(expected)
            v = cotangent(self.answer(call).shape, derived_seed(self.seed, call.label))  # (the answer kept)
            return gradient_terms(call, [_to(a, "cpu") for a in call.args], expected, v)
        return self._get(("gradient terms", call.label), compute)

    def compute_all(self) -> None:
        """Every answer and gradient `verdicts` may ask for (a fault is kept for it to report)."""
        for call in self.calls():
            with contextlib.suppress(Exception):
                self.answer(call)
        for call in self.calls("gradients"):
            if call.grad_args:
                with contextlib.suppress(Exception):
                    self.gradients(call)
                    self.gradient_terms(call)


def verdicts(spec: Spec, seed: int, path: Path, tests: Sequence[TestOutcome],
             references: References | None = None) -> list[TestOutcome]:
    """One test per judged call whose group the grading process ran (passed or failed: deselected
    or skipped groups are not judged), comparing its saved output with the reference computed here
    (`references`: those of this spec and seed, computed ahead or now)."""
    references = references or References(spec, seed)
    ran = {t.group for t in tests if t.ran}
    calls = [c for c in references.calls() if c.group in ran]
    if not calls and not {AUTOGRAD, INPUT_CHECKS} & ran:
        return []
    outputs, unreadable = load_outputs(path)
    entries = []
    # a check that failed by a fault the CUDA context did not survive (an access past an argument's end,
    # a 32-bit offset past 2^31): the calls recorded after every check (layouts, wrong devices) found no
    # GPU, and their missing answers are not judged. The fault costs its own check's group; nothing is
    # gained by one (the answers most often missing are input_checks', a point). Not a fault the process
    # went on after in a fresh image (extra "resumed", grader/run/suite/resume.py): that image recorded them
    lost = next((t.name for t in tests if t.outcome == "failed" and cuda_context_lost(str(t.reason))
                 and not t.extra.get("resumed")), None)
    # or a layout (or wrong-device) call as the process ended: it fails its own group (its answer is the
    # fault); the wrong-device answers after it, which found no GPU, are not judged
    lost = lost or outputs.pop(CONTEXT_LOST_KEY, None)

    def add(name: str, group: str, problem: str | None, recorded_last: bool = False) -> None:
        if problem and recorded_last and lost and name not in outputs and not unreadable:
            return
        entries.append(TestOutcome(JUDGE_PREFIX + name, group, "failed", f"{RECHECKED}{problem}") if problem
                       else TestOutcome(JUDGE_PREFIX + name, group, "passed"))

    for call in calls:
        # the layouts hold the call's values: one reference (float64, on the CPU) serves them all
        reference = lambda call=call: references.answer(call)  # noqa: E731
        add(call.label, call.group, unreadable or _problem(call, outputs, reference=reference))
        for name, chosen, _ in layout_variants(call):
            add(name, call.group, unreadable or _problem(call, outputs, name, [call.names[i] for i in chosen],
                                                         reference=reference), True)
    if AUTOGRAD in ran:
        for call in references.calls("gradients"):
            if call.grad_args:
                add(call.label + GRADS_SUFFIX, AUTOGRAD,
                    unreadable or _gradient_problem(call, outputs, lambda call=call: references.gradients(call),
                                                    lambda call=call: references.gradient_terms(call)))
    if INPUT_CHECKS in ran:
        for call in references.calls():
            for name, i in device_spoils(call):
                add(name, INPUT_CHECKS, unreadable or _input_check_problem(name, call.names[i], outputs), True)
    return entries


# the parent's own GPU work (regenerating a timed call's inputs) from several class workers at once
_gpu_lock = threading.Lock()


def _parent_device(device: str | None) -> int:
    """The index, in this process, of the GPU a grading process was pinned to (CUDA_VISIBLE_DEVICES
    entry `device`); 0 when it was not pinned."""
    visible = env.visible_gpus()
    return visible.index(device) if device in visible else 0


def timed_verdicts(spec: Spec, path: Path, device: str | None = None, excused: bool = False) -> list[TestOutcome]:
    """The parent's re-check of timed outputs: for each timed call the grading process sampled (the
    last one always), regenerate its inputs from the call's seed on this process's GPU, compute the
    reference at the sampled elements and compare. One test per output's group, `judge: timed
    outputs` (with the group's name where there are several); a timing that saved nothing fails (it
    ran: the file is written when it ends), unless `excused`: it stopped for a reason scored already (a wrong timed output fails its own group; out
    of GPU memory costs the speed points), and the other groups' points stand."""
    from grader.verify.speed import bench_group

    bench = spec.benchmark()
    if bench is None:
        return []
    groups = {bench_group(spec, k, bench) for k in range(max(1, len(getattr(bench, "output_groups", ()) or ())))}
    data, unreadable = load_outputs(path)
    calls = data.get("calls") if isinstance(data, dict) else None
    problems: dict[str, str] = {}
    nothing_saved = unreadable or not isinstance(calls, list) or not calls
    if nothing_saved and excused:
        return []
    if nothing_saved:  # every output went unchecked: each group one vouches for fails
        problems = dict.fromkeys(groups, unreadable or "the timing saved no sampled outputs")
    else:
        import torch

        with _gpu_lock, torch.cuda.device(_parent_device(device)):
            try:
                for n, call in enumerate(calls[:8]):
                    for k, problem in _timed_call_problems(bench, call, f"timed call {n + 1}").items():
                        problems.setdefault(bench_group(spec, k, bench), problem)
            except Exception as e:  # noqa: BLE001: a malformed file, or a grader fault
                problems.setdefault(bench_group(spec, 0, bench), f"the sampled outputs could not be checked "
                                                                  f"({type(e).__name__}: {clean(e)[:200]})")
            finally:
                torch.cuda.empty_cache()
    def name(g: str) -> str:  # one outcome per group, each its own name (a report's rows are keyed by name)
        return f"{JUDGE_PREFIX}timed outputs" + (f" ({g})" if len(groups) > 1 else "")
    return [TestOutcome(name(g), g, "failed", f"{RECHECKED}{problems[g]}") if g in problems
            else TestOutcome(name(g), g, "passed") for g in sorted(groups)]


def _timed_call_problems(bench, call: dict, what: str) -> dict[int, str]:
    import torch

    from grader.verify.checks import Comparison

    seed, where, values = int(call["seed"]), call["where"], call["values"]
    inputs = bench.make_inputs(seed)
    tolerances = bench.tolerance(inputs)
    if not (len(where) == len(values) == len(tolerances)):
        return {0: f"{what}: {len(values)} sampled output(s), expected {len(tolerances)}"}
    expected = bench.reference(inputs, [w.to("cuda") for w in where])
    found = {}
    for k, (w, v, e, tol) in enumerate(zip(where, values, expected, tolerances)):
        if not (isinstance(v, torch.Tensor) and v.shape == w.shape):
            found[k] = f"{what}: output {k}'s sampled values are malformed"
            continue
        cmp = Comparison(tol, f"{what}, output {k} (at {len(w)} random elements)")
        cmp.add(v, e.reshape(-1).cpu(), w)
        problem = cmp.problem()
        if problem:
            found[k] = problem
    return found


def _input_check_problem(name: str, argument: str, outputs: dict) -> str | None:
    answer = outputs.get(name)
    if not isinstance(answer, dict):
        return f"{name}: no answer (the grading process ended before this call, or crashed on it)"
    if "error" not in answer:
        return f"{name}: was accepted, but must raise an error naming {argument}"
    if not names_one_of(str(answer["error"]), (argument,)):
        return f"{name}: raised an error that does not name {argument}: {str(answer['error'])[:200]}"
    return None


def _gradient_problem(call: AuditCall, outputs: dict, expected, terms) -> str | None:
    """What is wrong with the saved gradients through `call`; `expected()`: the reference's, `terms()` each
    one's terms' norms where it may cancel (gradient_terms)."""
    what = f"the gradients through {call.label}"
    actual = outputs.get(call.label + GRADS_SUFFIX)
    if actual is None:
        return f"{what}: none saved (the grading process ended before this call)"
    if isinstance(actual, dict):
        return f"{what}: {actual.get('error', 'not tensors')}"
    try:
        expected, terms = expected(), terms()
    except Exception as e:  # noqa: BLE001: a grader fault, reported as such
        return f"grader error: differentiating the reference of {call.label} failed ({type(e).__name__}: {clean(e)[:200]})"
    if not isinstance(actual, (list, tuple)) or len(actual) != len(expected) or not any(t is not None for t in terms):
        return compare(actual, expected, tolerance(call), what)
    # each gradient with its own terms, in order: the first wrong one is the problem (named as one list's)
    for k, (a, e, t) in enumerate(zip(actual, expected, terms)):
        problem = compare(a, e, tolerance(call), f"{what}[{k}]", t)
        if problem:
            return problem
    return None


def _problem(call: AuditCall, outputs: dict, name: str | None = None, may_refuse: list[str] = (),
             reference=None) -> str | None:
    """What is wrong with the saved answer `name` (default: the call's label) to the call; an error
    naming one of `may_refuse` (arguments an interface may refuse in that layout) is an answer too.
    `reference()`: the call's reference answer, computed once for the call and its layouts (the same
    values), by default here."""
    name = name or call.label
    if name not in outputs:
        return f"{name} gave no output (the grading process ended before this call)"
    actual = outputs[name]
    if isinstance(actual, dict):
        if "error" in actual:
            if may_refuse and names_one_of(str(actual["error"]), may_refuse):
                return None
            return f"{name} on valid arguments raised {actual['error']}"
        return f"{name} returned a {actual.get('unexpected type', 'value')}, not tensors"
    try:
        expected = reference() if reference is not None else _reference_answer(call)
    except Exception as e:  # noqa: BLE001: a grader fault, reported as such
        return f"grader error: the reference of {call.label} failed ({type(e).__name__}: {clean(e)[:200]})"
    return compare(actual, expected, tolerance(call), f"{name}'s result", call_terms(call, call.args, expected))


def _reference_answer(call: AuditCall):
    """The call's reference answer, in float64 on the CPU."""
    return call.reference(*[_to(a, "cpu") for a in call.args])
