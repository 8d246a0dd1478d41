"""The graded tests: one per check of the exercise's spec, then the timing."""
from __future__ import annotations

import dataclasses
import time
import types

import pytest

from grader.run import gate
from grader.run.suite import resume
from grader.verify.checks import cuda_context_lost, run_check
from grader.verify.observe import WATCH, KernelRule, observe
from grader.verify.properties import watched
from grader.verify.speed import measure_submission
from grader.verify.results import save_atomic
from grader.verify.scoring import NOT_TIMED

def _fail_if_context_lost() -> None:
    """After a fault the CUDA context is unusable and every later check would fail with the same message.
    The process goes on in a fresh one (grader/run/suite/resume.py); where it may not (its restarts spent,
    under compute-sanitizer), the checks left are failed at once, naming the first fault."""
    if resume.lost:
        pytest.fail(f"not run: a kernel faulted in {resume.first_fault()}, which leaves the GPU unusable "
                    "for the rest of this exercise's checks", pytrace=False)


class Watched:
    """A module (or namespace) of the exercise seen through the watch: every function called through
    it runs in a hidden window (`observe(..., hidden=True)`), and a kernel that `rule` does not allow
    fails the call with the reason. For checks whose calls are not made through
    grader.verify.properties.invoke (the huge ones): the device is synchronized around each call, so only
    checks that race no stream are given it."""

    def __init__(self, target, rule: KernelRule | None, what: str):
        object.__setattr__(self, "_target", target)
        object.__setattr__(self, "_rule", rule)
        object.__setattr__(self, "_what", what)

    def __getattr__(self, name: str):
        value = getattr(self._target, name)
        kind = type(value).__name__
        if isinstance(value, (types.ModuleType, types.SimpleNamespace)) or kind in ("Library", "_OpNamespace"):
            return Watched(value, self._rule, self._what)
        if callable(value) and not isinstance(value, type):
            return self._watched(value, name)
        return value

    def _watched(self, fn, name: str):
        if self._rule is None:  # no rule to hold its kernels to: observed all the same
            return lambda *args, **kwargs: observe(lambda: fn(*args, **kwargs), hidden=True)[0]
        return watched(fn, self._rule, f"{self._what} (the call of {name})")


def _group_lost(check, spec, request) -> bool:
    """Under --skip-lost-groups: whether an earlier check of this check's group failed in this process,
    and no group's `requires` names this check (whose outcome decides that group's points)."""
    if not request.config.getoption("--skip-lost-groups"):
        return False
    if any(check.name in needed for needed in spec.requires.values()):
        return False
    recorder = request.config.pluginmanager.get_plugin("course-results")
    return recorder is not None and any(t.group == check.group and t.outcome == "failed"
                                        for t in recorder.tests.values())


def test_check(check, ctx, spec, request):
    _fail_if_context_lost()
    if _group_lost(check, spec, request):
        pytest.skip(f"not run: {check.group} has lost its points already (--skip-lost-groups)")
    if check.huge and WATCH.on:
        # the op's calls in a check of more than 2^31 elements are observed too (Watched):
        # a fall-back to PyTorch for inputs past 2^31 elements shows its kernels
        ctx = dataclasses.replace(ctx, module=Watched(ctx.module, spec.kernel_rule(), check.name))
    # a check of more than 2^31 bytes runs alone among concurrent grading processes; outside the
    # try, so that its tensors (held by a failure's traceback) are freed before the next one runs
    asked = time.time()
    with gate.one_at_a_time(check.huge):
        began = time.time()
        failure = run_check(check, ctx)
    if check.huge:  # the lock's timeline (scripts/grade_time.py): when it was asked for, got, and let go
        request.node.user_properties += [("lock_asked", round(asked, 3)), ("lock_wait_s", round(began - asked, 3)),
                                         ("lock_held_s", round(time.time() - began, 3))]
    if failure is not None:
        if cuda_context_lost(failure):
            resume.lost.append(check.name)
        pytest.fail(failure, pytrace=False)


def test_performance(spec, ctx, record_property, request, judge_last_calls):
    """The submission's op timed at the benchmark's shape (grader.verify.speed); the parent scores the
    raw numbers against the yardstick's, and re-checks the sampled outputs saved here."""
    _fail_if_context_lost()
    if spec.benchmark() is None:
        pytest.skip("this exercise has no timed part")
    # speed counts only once these groups pass: a failed check of one makes the timing pointless, and
    # skipping it spares the GPU turn every other exercise (a class's too) would wait for
    recorder = request.config.pluginmanager.get_plugin("course-results")
    failed = [t.name for t in (recorder.tests.values() if recorder is not None else ())
              if t.group in spec.perf_requires and t.outcome == "failed"]
    if failed:
        pytest.skip(f"{NOT_TIMED}{failed[0]} failed")
    judge_last_calls()  # the judge's last calls: not in the GPU's turn below
    gate.wait_for_gpu()  # graded beside other exercises: the timing runs alone on the GPU
    try:
        result = measure_submission(spec, ctx)
    finally:
        gate.timing_over()  # the next turn begins while this process writes its results
    judged = result.pop("judged", [])
    path = request.config.getoption("--timed-outputs")
    if path and judged:
        save_atomic(path, {"calls": judged})
    record_property("performance", result)
    if result["verdict"]:
        pytest.fail(result["verdict"], pytrace=False)
