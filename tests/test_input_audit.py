"""Bad-input audit: every solution op through a wrong device, a wrong dtype, a wrong rank, mismatched
shapes, non-contiguous and empty inputs. Each case spoils one tensor argument of a valid call (the
spec's `audit_calls`) and expects either a correct result or a clear error naming the argument:

    device         the argument on the CPU, the others on the GPU: must raise, naming it. On a
                   machine without a GPU: the call with every tensor on the CPU must raise, naming
                   one of its tensor arguments.
    dtype          an integer tensor
    rank           an extra leading dim (of size 2)
    shape          one dim one longer (calls with two or more tensors)
    noncontiguous  a strided view with the same values
    empty          one dim of size 0

For all but `device`, a call may instead return a result: it must then equal the reference's (in
float64) and, for a strided view, the same call's on contiguous copies. For `shape` and `empty`, which
set one tensor against another, the error may name any tensor argument of the call. A crash, a hang or
a CUDA error is never an answer. `valid` (GPU) first checks each unspoiled call against its reference.

Each exercise is audited in its own process (`python -m tests.test_input_audit EXERCISE`), case after
case; a crash or a CUDA error is reported under its case's name and the audit resumes after it in a
fresh process. Only the `device` kind runs without a GPU.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest

from grader import env

env.configure()  # before torch.utils.cpp_extension is imported (by the exercise modules' builds)

import torch  # noqa: E402

from grader.verify.judge import clean, compare, device_spoils, is_tensor, names_one_of, resolve, tolerance  # noqa: E402
from grader.verify.checks import grown, strided_copy, with_leading_dim  # noqa: E402
from grader.verify.spec import AuditCall, Spec, audit_randn  # noqa: E402
from tests.grading import JOBS, SOLUTIONS, quiet, selected  # noqa: E402

KINDS = ("valid", "device", "dtype", "rank", "shape", "noncontiguous", "empty")
CPU_KINDS = ("device",)
GPU_KINDS = tuple(k for k in KINDS if k != "device")
# as grader.verify.checks.expect_error accepts (NotImplementedError is a RuntimeError)
ERRORS = (RuntimeError, ValueError, TypeError, IndexError)
STICKY = 3  # the child's exit status after a CUDA error: the context may be unusable, resume in a fresh process
CASE_TIMEOUT = 600  # seconds for one child process (all its cases)
MAX_RESTARTS = 40


# ------------------------------------------------------------------------------------ the cases
@dataclass
class Case:
    name: str
    kind: str
    call: AuditCall
    make: Callable[[], list]  # fresh (spoiled) arguments
    names: tuple[str, ...]  # an error must name one of these
    must_raise: bool = False


def _fresh(args) -> list:
    """A private copy of the arguments (an op may update a buffer in place), tensors with their layout."""
    return [a.clone() if is_tensor(a) else (list(a) if isinstance(a, list) else a) for a in args]


def _shape(t) -> str:
    return "[" + ", ".join(map(str, t.shape)) + "]"


def _emptied(t, d: int | None):
    return t.reshape(1)[:0] if d is None else t.narrow(d, 0, 0).contiguous()


def _integer(t):
    return t.to(torch.int64 if t.dtype == torch.int32 else torch.int32)


def cases_of(calls: list[AuditCall], kinds, device: str) -> list[Case]:
    """Every case of every call, in a fixed order (a resumed audit skips by index)."""
    out: list[Case] = []
    for call in calls:
        tensors = [i for i, a in enumerate(call.args) if is_tensor(a)]
        all_names = tuple(call.names[i] for i in tensors)

        def spoil(i, fn, call=call):
            def make():
                args = _fresh(call.args)
                args[i] = fn(args[i])
                return args
            return make

        for kind in kinds:
            if kind == "valid":
                out.append(Case(f"{call.label}: valid arguments", kind, call, lambda call=call: _fresh(call.args), ()))
            elif kind == "device":
                if device == "cpu":
                    if tensors:
                        out.append(Case(f"{call.label}: device, every tensor on the CPU", kind, call,
                                        lambda call=call: _fresh(call.args), all_names, must_raise=True))
                    continue
                for name, i in device_spoils(call):  # as the judge names them (grader.verify.judge)
                    out.append(Case(name, kind, call, spoil(i, lambda t: t.cpu()), (call.names[i],), must_raise=True))
            elif kind == "dtype":
                for i in tensors:
                    wrong = _integer(call.args[i]).dtype
                    out.append(Case(f"{call.label}: dtype, {call.names[i]} of {str(wrong).replace('torch.', '')}",
                                    kind, call, spoil(i, _integer), (call.names[i],)))
            elif kind == "rank":
                for i in tensors:
                    t = call.args[i]
                    out.append(Case(f"{call.label}: rank, {call.names[i]} {_shape(t)} with an extra leading dim",
                                    kind, call, spoil(i, with_leading_dim), (call.names[i],)))
            elif kind == "shape":
                if len(tensors) < 2:
                    continue
                for i in tensors:
                    t = call.args[i]
                    for d in range(t.dim()):
                        out.append(Case(f"{call.label}: shape, {call.names[i]} {_shape(t)} with dim {d} "
                                        f"{t.shape[d]} -> {t.shape[d] + 1}", kind, call,
                                        spoil(i, lambda t, d=d: grown(t, d)), all_names))
            elif kind == "noncontiguous":
                for i in tensors:
                    if strided_copy(call.args[i]) is None:
                        continue  # one element: every view of it is contiguous
                    out.append(Case(f"{call.label}: noncontiguous, {call.names[i]} a strided view", kind, call,
                                    spoil(i, strided_copy), (call.names[i],)))
            elif kind == "empty":
                for i in tensors:
                    t = call.args[i]
                    for d in (range(t.dim()) if t.dim() else (None,)):
                        what = f"dim {d} of size 0" if d is not None else "0 elements"
                        out.append(Case(f"{call.label}: empty, {call.names[i]} {_shape(t)} with {what}", kind, call,
                                        spoil(i, lambda t, d=d: _emptied(t, d)), all_names))
            else:
                raise ValueError(f"unknown kind {kind!r}; known: {', '.join(KINDS)}")
    return out


# ------------------------------------------------------------------------------------ judging
class CudaError(Exception):
    pass


def _sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def judge(module, case: Case) -> str | None:
    """None when the op answered this case acceptably, else what was wrong. Raises CudaError after a
    CUDA error (the process should not go on)."""
    fn = resolve(module, case.call.op)
    args = case.make()
    ref_args = _fresh(args)  # before the call: an op may update buffers in place
    try:
        out = fn(*args)
        _sync()
    except ERRORS as e:
        msg = clean(e)
        if "CUDA error" in msg or "cudaError" in msg or "CUDA driver error" in msg:
            raise CudaError(f"a CUDA error, not an input check: {msg[:300]}") from None
        if case.kind == "valid":
            return f"valid arguments were rejected: {msg[:300]}"
        if not names_one_of(msg, case.names):
            return f"raised an error that does not name {' or '.join(case.names)}: {msg[:300]}"
        return None
    except Exception as e:  # noqa: BLE001: any other exception type is a finding
        return f"raised {type(e).__name__} (expected RuntimeError, ValueError or TypeError): {clean(e)[:300]}"
    if case.must_raise:
        return f"was accepted, but must raise an error naming {' or '.join(case.names)}"
    tol = tolerance(case.call)
    if case.call.reference is not None:
        try:
            expected = case.call.reference(*ref_args)
        except Exception as e:  # noqa: BLE001
            return (f"returned a result, but the reference rejects these arguments ({clean(e)[:200]}): it must "
                    f"raise an error naming {' or '.join(case.names)}")
        problem = compare(out, expected, tol, "the result against the reference")
        if problem:
            return problem
    if case.kind == "noncontiguous":
        try:
            again = fn(*[a.contiguous() if is_tensor(a) else a for a in case.make()])
            _sync()
        except ERRORS as e:
            return f"accepted the strided view, but the same call on contiguous copies raised: {clean(e)[:300]}"
        problem = compare(out, again, tol, "the result against the same call on contiguous copies")
        if problem:
            return problem
    return None


def uncovered_ops(module, calls: list[AuditCall]) -> list[str]:
    """The library's ops that take a tensor and that no audit call reaches: by the op's own name,
    or through the module's function of the same name."""
    lib = getattr(module, "lib", None)
    if lib is None:
        return []
    prefix = lib.namespace + "::"
    ops = sorted({n[len(prefix):] for n in torch._C._dispatch_get_all_op_names() if n.startswith(prefix)})
    covered = {c.op.rsplit(".", 1)[-1] for c in calls}
    missing = []
    for name in ops:
        schema = getattr(lib.ops, name).default._schema
        if any("Tensor" in str(a.type) for a in schema.arguments) and name not in covered:
            missing.append(name)
    return missing


# ------------------------------------------------------------------------------------ the child process
def _child(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("exercise")
    parser.add_argument("--kinds", required=True)
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--log", required=True)
    parser.add_argument("--folder", default=str(env.REPO / "solutions"))
    parser.add_argument("--provider", help="MODULE:FUNCTION giving (module, calls) for a device, instead of a spec")
    a = parser.parse_args(argv)
    env.configure()
    from grader import specs

    log = open(a.log, "a", buffering=1)

    def emit(**kw):
        log.write(json.dumps(kw) + "\n")
        log.flush()

    device = "cuda" if torch.cuda.is_available() else "cpu"
    kinds = a.kinds.split(",")
    if a.provider:
        import importlib

        mod_name, fn_name = a.provider.split(":")
        module, calls = getattr(importlib.import_module(mod_name), fn_name)(device)
    else:
        if device == "cpu" and set(kinds) - set(CPU_KINDS):
            emit(error=f"the kinds {sorted(set(kinds) - set(CPU_KINDS))} need a GPU")
            return 2
        spec = specs.by_exercise(a.exercise)
        try:
            module = specs.import_exercise_module(Path(a.folder) / spec.exercise, spec)
        except Exception as e:  # noqa: BLE001: a build error
            emit(error=f"could not load {spec.module}: {type(e).__name__}: {clean(e)[:2000]}")
            return 2
        calls = spec.audit_calls(device, torch.float64)
    cases = cases_of(calls, kinds, device)
    emit(total=len(cases), uncovered=uncovered_ops(module, calls) if a.start == 0 else [])
    for index in range(a.start, len(cases)):
        case = cases[index]
        emit(start=index, case=case.name)
        try:
            problem = judge(module, case)
        except CudaError as e:
            emit(result=index, case=case.name, problem=str(e))
            return STICKY
        emit(result=index, case=case.name, problem=problem)
    return 0


# ------------------------------------------------------------------------------------ the parent
def _describe_exit(code: int) -> str:
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit status {code}"


def audit(exercise: str, kinds, extra: tuple[str, ...] = ()) -> tuple[int, dict[str, str], list[str]]:
    """Run the audit of one exercise in child processes: (cases run, case -> problem, uncovered ops).
    `extra`: more options for the child (--folder DIR, --provider MODULE:FUNCTION)."""
    problems: dict[str, str] = {}
    uncovered: list[str] = []
    total, start, done = None, 0, 0
    child_env = dict(os.environ)
    child_env.update(env.configure())
    for _ in range(MAX_RESTARTS):
        with tempfile.NamedTemporaryFile("r", suffix=".jsonl") as log:
            cmd = [sys.executable, "-m", "tests.test_input_audit", exercise, "--kinds", ",".join(kinds),
                   "--start", str(start), "--log", log.name, *extra]
            began = time.monotonic()
            try:
                proc = subprocess.run(cmd, cwd=env.REPO, env=child_env, capture_output=True, text=True,
                                      timeout=CASE_TIMEOUT, start_new_session=True)
                code, tail = proc.returncode, (proc.stderr or proc.stdout)[-1500:]
            except subprocess.TimeoutExpired:
                code, tail = None, f"no answer within {CASE_TIMEOUT} s"
            events = [json.loads(line) for line in Path(log.name).read_text().splitlines() if line.strip()]
        last_started = None
        for ev in events:
            if "error" in ev:
                pytest.fail(f"{exercise}: {ev['error']}", pytrace=False)
            if "total" in ev:
                total = ev["total"]
                uncovered += ev.get("uncovered", [])
            if "start" in ev:
                last_started = (ev["start"], ev["case"])
            if "result" in ev:
                done += 1
                last_started = None
                if ev["problem"]:
                    problems[ev["case"]] = ev["problem"]
                start = ev["result"] + 1
        if code == 0:
            return done, problems, uncovered
        if last_started is not None:  # it died (or hung) inside a case
            index, name = last_started
            why = "hung" if code is None else f"crashed the process ({_describe_exit(code)})"
            problems[name] = f"{why}; last output: {tail.strip()[-600:]}"
            done += 1
            start = index + 1
        elif code != STICKY:
            pytest.fail(f"{exercise}: the audit process ended ({_describe_exit(code) if code is not None else 'hung'}) "
                        f"outside any case after {time.monotonic() - began:.0f} s:\n{tail}", pytrace=False)
        if total is not None and start >= total:
            return done, problems, uncovered
    pytest.fail(f"{exercise}: the audit restarted {MAX_RESTARTS} times; problems so far: {problems}", pytrace=False)


def _report(exercise: str, done: int, problems: dict[str, str], uncovered: list[str]) -> str:
    lines = [f"{exercise}: {len(problems)} of {done} cases failed"]
    lines += [f"  {name}: {why}" for name, why in problems.items()]
    if uncovered:
        lines.append(f"  ops no audit call reaches: {', '.join(uncovered)} (add them to the spec's audit_calls)")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------ the tests
SPECS = selected()


@pytest.fixture(scope="module")
def solution_builds():
    from grader.run.grading import build_all

    return build_all([SOLUTIONS / s.exercise for s in SPECS], JOBS, log=quiet)


def _checked_build(builds, spec: Spec) -> None:
    result = builds[SOLUTIONS / spec.exercise]
    assert result["ok"], f"solutions/{spec.exercise} failed to build:\n{result.get('error')}"


def test_every_spec_has_audit_calls():
    for spec in SPECS:
        calls = spec.audit_calls("cpu", torch.float64)
        assert calls, f"{spec.exercise}: audit_calls() returns no call"
        labels = [c.label for c in calls]
        assert len(set(labels)) == len(labels), f"{spec.exercise}: two audit calls share a label: {labels}"
        for call in calls:
            assert any(is_tensor(a) for a in call.args), f"{spec.exercise}: {call.label} has no tensor argument"


@pytest.mark.parametrize("spec", SPECS, ids=[s.exercise for s in SPECS])
def test_wrong_device_raises_an_error_naming_the_argument(spec, solution_builds):
    """Also, with a GPU: every valid call gives its reference's result. Everywhere: every op of the
    library that takes a tensor is audited."""
    _checked_build(solution_builds, spec)
    kinds = ("valid", "device") if torch.cuda.is_available() else CPU_KINDS
    done, problems, uncovered = audit(spec.exercise, kinds)
    assert done and not problems and not uncovered, _report(spec.exercise, done, problems, uncovered)


@pytest.mark.gpu
@pytest.mark.parametrize("spec", SPECS, ids=[s.exercise for s in SPECS])
def test_bad_inputs_raise_an_error_naming_the_argument_or_give_the_right_result(spec, solution_builds):
    _checked_build(solution_builds, spec)
    done, problems, uncovered = audit(spec.exercise, tuple(k for k in GPU_KINDS if k != "valid"))
    assert done and not problems, _report(spec.exercise, done, problems, uncovered)


# ------------------------------------------------------------------------------------ the audit's own tests (CPU)
def _toy_add(x, y):
    """A well-checked op: float 2-D tensors of one shape, named in every error."""
    for name, t in (("x", x), ("y", y)):
        if not t.is_floating_point():
            raise TypeError(f"{name} must be a floating-point tensor, but has dtype {t.dtype}")
        if t.dim() != 2:
            raise ValueError(f"{name} must be 2-D, but has shape {list(t.shape)}")
    if x.shape != y.shape:
        raise ValueError(f"y must have the shape of x {list(x.shape)}, but has {list(y.shape)}")
    return x + y


def _toy_unnamed(x, y):
    try:
        return _toy_add(x, y)
    except ValueError:
        raise RuntimeError("bad input") from None


def _toy_strides_ignored(x, y):
    """Reads a strided view as if it were contiguous: wrong values, no error."""
    out = _toy_add(x, y)
    if not x.is_contiguous():
        out = torch.as_strided(x, x.shape, torch.empty(x.shape).stride()) + y
    return out


def _toy_crashes(x, y):
    if x.numel() == 0 or y.numel() == 0:
        os.abort()  # as a segfault would: no Python error, the process is gone
    if x.dim() != 2 or y.dim() != 2:
        raise RuntimeError("CUDA error: an illegal memory access was encountered")
    return _toy_add(x, y)


def _toy(device):
    """(module, calls) for the audit's own tests: one call of each toy op."""
    module = types.SimpleNamespace(add=_toy_add, unnamed=_toy_unnamed, strides_ignored=_toy_strides_ignored,
                                   crashes=_toy_crashes)
    x = audit_randn(4, 5, device=device, dtype=torch.float64)
    y = audit_randn(4, 5, device=device, dtype=torch.float64, seed=1)
    calls = [AuditCall(op, (x, y), ("x", "y"), lambda x, y: x.double() + y.double())
             for op in ("add", "unnamed", "strides_ignored", "crashes")]
    return module, calls


def _toy_problems(op: str, kinds) -> dict[str, str]:
    module, calls = _toy("cpu")
    cases = cases_of([c for c in calls if c.op == op], kinds, "cpu")
    assert cases
    return {c.name: p for c in cases if (p := judge(module, c))}


def test_audit_passes_a_well_checked_op():
    assert _toy_problems("add", ("valid", "dtype", "rank", "shape", "noncontiguous", "empty")) == {}


def test_audit_finds_an_error_that_does_not_name_the_argument():
    problems = _toy_problems("unnamed", ("rank", "shape", "empty"))
    assert problems and all("does not name" in p for p in problems.values()), problems
    assert any(": rank, y " in name for name in problems), problems


def test_audit_finds_a_strided_view_read_as_contiguous():
    problems = _toy_problems("strides_ignored", ("noncontiguous", "rank", "empty"))
    assert list(problems) == ["strides_ignored: noncontiguous, x a strided view"], problems
    assert "relative error" in problems["strides_ignored: noncontiguous, x a strided view"]


def test_audit_finds_a_cpu_call_that_is_accepted():
    problems = _toy_problems("add", ("device",))
    assert list(problems) == ["add: device, every tensor on the CPU"], problems


def test_audit_names_the_case_that_crashed_and_goes_on_after_it():
    done, problems, _ = audit("toy", ("empty", "rank", "noncontiguous"), ("--provider", "tests.test_input_audit:_toy"))
    expected = [c.name for c in cases_of(_toy("cpu")[1], ("empty", "rank", "noncontiguous"), "cpu")]
    assert done == len(expected)
    crashed = {n: p for n, p in problems.items() if n.startswith("crashes:")}
    empty = [n for n in expected if n.startswith("crashes: empty")]
    rank = [n for n in expected if n.startswith("crashes: rank")]
    assert empty and all("crashed the process (killed by SIGABRT)" in crashed[n] for n in empty), problems
    assert rank and all("a CUDA error, not an input check" in crashed[n] for n in rank), problems
    assert set(crashed) == set(empty) | set(rank), problems


if __name__ == "__main__":
    sys.exit(_child(sys.argv[1:]))
