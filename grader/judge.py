"""The judge: the grader re-checks the submission's results in a process its code never runs in.

A submission's Python and C++ run inside its grading process, so they could change anything there:
patch `torch.allclose` or the grader's own functions, or rewrite the results file. The integrity
snapshot (grader.integrity) notices patching; this module makes the scored verdict not depend on
that process telling the truth. It works in two halves:

- In the grading process, before any check, `record_outputs` calls each public op of the exercise
  once on the spec's valid audit calls (`Spec.audit_calls`: small, every op covered), their values
  drawn fresh from the run's seed, and saves only the outputs (tensors, to the CPU) to a file.
- In the parent grader, which never imports the submission, `verdicts` draws the same inputs from
  the same seed, computes the reference itself in float64 on the CPU, and compares. Each call
  becomes one test, `judge: <call>`, in the group whose points it vouches for (`AuditCall.group`):
  a wrong or missing output fails that group whatever the grading process reported.

So wrong results cannot earn points by tampering with the checks: a group passes only if the op's
outputs, read back and compared here, are right. What the judge cannot see from outside is how the
outputs were made (which kernels ran, the timing): those are measured in the grading process, and
the parent recomputes the speed's verdict from the raw measurements (grader.performance.verdict).
"""
from __future__ import annotations

import os
from pathlib import Path
from types import ModuleType

import torch

from grader.checks import cuda_context_lost, relative_error
from grader.spec import AuditCall, Spec, audit_seed

JUDGE_PREFIX = "judge: "
# the outputs file is written by the submission's process: refuse to load an absurd one
MAX_OUTPUTS_BYTES = 64 << 20


# --- comparing (shared with the bad-input audit, tests/test_input_audit.py) ----------------------

def clean(e: BaseException) -> str:
    """An exception's message without PyTorch's C++ stack."""
    return str(e).split("\nException raised from")[0].strip()


def is_tensor(a) -> bool:
    return isinstance(a, torch.Tensor)


def tolerance(call: AuditCall) -> float:
    """Normwise relative error allowed: far below the rounding of a lower precision."""
    dtypes = {a.dtype for a in call.args if is_tensor(a) and a.is_floating_point()}
    return 1e-10 if dtypes == {torch.float64} else 1e-5


def compare(actual, expected, tol: float, what: str) -> str | None:
    """None when `actual` matches `expected` (a tensor, or a tuple with None where not compared)."""
    if expected is None:
        return None
    if isinstance(expected, (tuple, list)):
        if not isinstance(actual, (tuple, list)) or len(actual) != len(expected):
            return f"{what}: expected {len(expected)} outputs, got {type(actual).__name__}"
        for k, (a, e) in enumerate(zip(actual, expected)):
            problem = compare(a, e, tol, f"{what}[{k}]")
            if problem:
                return problem
        return None
    if not is_tensor(actual):
        return f"{what}: expected a tensor, got {type(actual).__name__}"
    if tuple(actual.shape) != tuple(expected.shape):
        return f"{what}: shape {list(actual.shape)}, expected {list(expected.shape)}"
    if actual.device != expected.device:
        return f"{what}: on {actual.device}, expected on {expected.device}"
    err = relative_error(actual, expected)
    if not err <= tol:
        return f"{what}: relative error {err:.3g} exceeds {tol:g}"
    return None


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


def _storable(value):
    """An op's result as the judge may load it (torch.load with weights_only): tensors on the CPU
    in lists, None, numbers; anything else by its type's name."""
    if is_tensor(value):
        return value.detach().cpu().clone()
    if isinstance(value, (tuple, list)):
        return [_storable(v) for v in value]
    if value is None or isinstance(value, (int, float, bool)):
        return value
    return {"unexpected type": type(value).__name__}


# --- in the grading process -------------------------------------------------------------------------

def record_outputs(module: ModuleType, spec: Spec, seed: int, path: Path, device: str = "cuda") -> str | None:
    """Call every judged op on `device` and save its outputs to `path` after each call (a crash
    leaves the finished ones). Returns the first failure's message, or None."""
    from grader.results import save_atomic

    outputs: dict[str, object] = {}
    first_problem = None
    for call in judged_calls(spec, seed):
        try:
            result = resolve(module, call.op)(*[_to(a, device) for a in call.args])
            if device != "cpu":
                torch.cuda.synchronize()
            outputs[call.label] = _storable(result)
        except Exception as e:  # noqa: BLE001: any error is this call's answer, for the judge to report
            message = f"{type(e).__name__}: {clean(e)[:500]}"
            outputs[call.label] = {"error": message}
            first_problem = first_problem or f"{call.label}: {message}"
            if cuda_context_lost(message):
                save_atomic(path, outputs)
                return first_problem
        save_atomic(path, outputs)
    return first_problem


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


def verdicts(spec: Spec, seed: int, path: Path, tests: list[dict]) -> list[dict]:
    """One test per judged call whose group the grading process ran (passed or failed: deselected
    or skipped groups are not judged), comparing its saved output with the reference computed here."""
    ran = {t.get("group") for t in tests if t["outcome"] in ("passed", "failed")}
    calls = [c for c in judged_calls(spec, seed) if c.group in ran]
    if not calls:
        return []
    outputs, unreadable = load_outputs(path)
    entries = []
    for call in calls:
        entry = {"name": JUDGE_PREFIX + call.label, "group": call.group, "outcome": "failed", "reason": "",
                 "properties": {}}
        problem = unreadable or _problem(call, outputs)
        if problem:
            entry["reason"] = f"re-checked by the grader outside the submission's process: {problem}"
        else:
            entry["outcome"] = "passed"
        entries.append(entry)
    return entries


def _problem(call: AuditCall, outputs: dict) -> str | None:
    if call.label not in outputs:
        return f"{call.label} gave no output (the grading process ended before this call)"
    actual = outputs[call.label]
    if isinstance(actual, dict):
        if "error" in actual:
            return f"{call.label} on valid arguments raised {actual['error']}"
        return f"{call.label} returned a {actual.get('unexpected type', 'value')}, not tensors"
    try:
        expected = call.reference(*[_to(a, "cpu") for a in call.args])
    except Exception as e:  # noqa: BLE001: a grader fault, reported as such
        return f"grader error: the reference of {call.label} failed ({type(e).__name__}: {clean(e)[:200]})"
    return compare(actual, expected, tolerance(call), f"{call.label}'s result")

