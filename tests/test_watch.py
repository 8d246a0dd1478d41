"""One watch (grader.verify.observe.WATCH), on the CPU: what an op can ask about profiling reads the same in
every value check as outside any window, the watch still sees the op's operators there, every call
the generated checks make is observed, and an op that branches on any profiling query loses: PyTorch's
path when none says "profiling" is seen by the value checks' hidden windows, a wrong answer when one
does is compared in the visible own-kernel checks."""
from __future__ import annotations

import dataclasses
import types

import pytest
import torch

from grader.verify import properties
from grader.verify.checks import CheckFailure
from grader.verify.observe import WATCH, KernelRule, Observation, observe, profiler_visible
from grader.verify.properties import Device
from tests.test_properties import DEFAULT_A, SPEC, ScaleSpec, _module, _run

QUERIES = {
    "torch.autograd.profiler._is_profiler_enabled": lambda: bool(torch.autograd.profiler._is_profiler_enabled),
    "torch._C._autograd._profiler_enabled()": lambda: bool(torch._C._autograd._profiler_enabled()),
    "torch._C._autograd._profiler_type()": lambda: torch._C._autograd._profiler_type() != torch._C._profiler.ActiveProfilerType.NONE,
}
# PyTorch's own op for the same values, which the exercise's rule forbids (a "fall-back")
FALLBACK = "aten::leaky_relu"


class CpuRule(KernelRule):
    """The exercise's rule on the CPU, where no GPU kernel runs: PyTorch's leaky_relu may not."""

    def problem(self, seen: Observation, what: str, expect_work: bool = True) -> str | None:
        return super().problem(seen, what, expect_work=False)


@dataclasses.dataclass
class WatchedSpec(ScaleSpec):
    def kernel_rule(self):
        return CpuRule(library=True, forbidden_ops=(FALLBACK,))


WATCHED = WatchedSpec(exercise="99_scale", title="scale", module="scale.py", points={"forward": 1, "autograd": 1},
                      property_dtypes=("float32", "float64"))


@pytest.fixture(autouse=True)
def cpu(monkeypatch):
    monkeypatch.setattr(properties, "DEVICE", Device("cpu"))
    yield
    WATCH.stop()  # the grading process keeps it on; the repository's other tests run without it


def _right(x, a=DEFAULT_A):
    return torch.ops.course_props_test.scale(x, float(a))


def _fallback(x, a=DEFAULT_A):
    return torch.nn.functional.leaky_relu(x, float(a))


def _checks(spec, module, only=()):
    """Every generated check, the own-kernel ones too, under the spec's kernel rule."""
    return _run(spec, module, only or None, seed=5, own_kernels=True)


def test_what_an_op_can_ask_reads_the_same_in_a_value_check_as_outside_any_window():
    outside = profiler_visible()
    assert outside["torch._C._autograd._profiler_type()"].endswith("NONE") and not any(
        v for v in outside.values() if isinstance(v, bool)), outside
    WATCH.start()
    between = profiler_visible()
    seen_inside = []
    _, seen = observe(lambda: seen_inside.append(profiler_visible()) or _fallback(torch.randn(64), 0.1),
                      cpu_ops=True, hidden=True)
    assert between == outside and seen_inside == [outside], (outside, between, seen_inside)
    # and the hidden window saw the op's operators, from the op's own thread
    assert FALLBACK in seen.ops, seen.ops
    assert profiler_visible() == outside


def test_every_call_of_the_generated_checks_is_observed():
    calls = []

    def op(x, a=DEFAULT_A):
        calls.append(WATCH.open > 0)
        return _right(x, a)

    # output metadata (opcheck) and the gradients' backward are not calls whose values are compared
    failed = {k: v for k, v in _checks(WATCHED, _module(op)).items() if v}
    assert not failed, failed
    assert calls and all(calls), f"{calls.count(False)} of {len(calls)} calls unobserved"


def test_a_right_op_passes_every_check_under_the_watch():
    failed = {k: v for k, v in _checks(WATCHED, _module(_right)).items() if v}
    assert not failed, failed


@pytest.mark.parametrize("query", sorted(QUERIES))
def test_an_op_taking_pytorchs_path_when_no_profiler_shows_loses_its_value_checks(query):
    ask = QUERIES[query]

    def op(x, a=DEFAULT_A):
        return _right(x, a) if ask() else _fallback(x, a)

    found = _checks(WATCHED, _module(op), only=["random shapes", "non-contiguous", "every declared edge", "gradients"])
    assert found and all(found.values()), found
    assert all(f"PyTorch's {FALLBACK}" in v for v in found.values()), found


@pytest.mark.parametrize("query", sorted(QUERIES))
def test_an_op_wrong_while_a_profiler_shows_loses_its_own_kernel_check(query):
    ask = QUERIES[query]

    def op(x, a=DEFAULT_A):
        return _right(x, a) * (1.01 if ask() else 1.0)

    found = _checks(WATCHED, _module(op))
    assert "relative error" in found["scale [own kernels in every dtype and shape]"], found
    # the value checks, which it cannot tell from unobserved calls, it passes
    assert not found["scale [random shapes]"], found


def test_the_plain_spec_without_a_rule_still_observes_each_call():
    """A spec with no kernel rule: calls are still made in the watch's windows (the state stays one)."""
    calls = []

    def op(x, a=DEFAULT_A):
        calls.append(WATCH.open > 0)
        return _right(x, a)

    _checks(SPEC, _module(op), only=["random shapes"])
    assert calls and all(calls)


def test_the_huge_checks_calls_are_observed_through_the_module():
    """A check given the module through `Watched` (the huge ones): each call of the op is observed, and
    PyTorch's path fails the call with the rule's reason."""
    from grader.run.suite.test_exercise import Watched

    rule = WATCHED.kernel_rule()
    module = Watched(_module(_right, ops=types.SimpleNamespace(scale=_fallback)), rule, "forward[huge]")
    x = torch.randn(1000)
    assert torch.equal(module.scale(x, 0.1), _right(x, 0.1))
    with pytest.raises(CheckFailure, match=f"forward\\[huge\\].*PyTorch's {FALLBACK}"):
        module.lib.ops.scale(x, 0.1)


def _k(name: str, stream: int, start_us: float, dur_us: float):
    from grader.verify.observe import Kernel

    return Kernel(name, stream, dur_us / 1e6, start_us / 1e6)


SLEEP = "spin_kernel(long)"
COPY = "void at::native::elementwise_kernel<128, 2, at::native::direct_copy_kernel_cuda(...)>"
FILL = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<int>, ...>"
OWN = "void (anonymous namespace)::leaky_relu_kernel<float>(float const*, float*, long)"


def test_a_watched_timed_call_less_the_graders_kernels_is_the_ops_own_work():
    """grader.verify.speed.grader_kernels on a timed call's timeline (timer.timed_call): the grader's two
    sleeps and its late step between them on the timed stream (the inputs' copies, the L2 flush), and the
    mark after the end event (the stream's last sleep), are set apart; the op's kernels on that stream
    after them are its work, inside the window; a kernel of another stream that ran during the sleep or
    the late step is work before the window opened."""
    from grader.verify.speed import grader_kernels

    timed, side = 7, 13
    mark = _k(SLEEP, timed, 430, 1)
    honest = [_k(SLEEP, timed, 0, 300), _k(COPY, timed, 301, 20), _k(FILL, timed, 322, 40),
              _k(SLEEP, timed, 363, 1), _k(OWN, timed, 365, 50), mark]
    work, opened, found = grader_kernels(honest)
    assert [k.name for k in work] == [OWN] and abs(opened - 364e-6) < 1e-9 and found == mark
    assert not [k for k in work if k.start_s < opened - 1e-6]
    ahead = honest[:4] + [_k(OWN, side, 40, 50), _k(OWN, side, 330, 10)]
    work, opened, found = grader_kernels(ahead)
    assert [k.start_s for k in work if k.start_s < opened - 1e-6] == [40e-6, 330e-6] and found is None
    # an op's own sleep (on any stream) is its work, not a sleep of the grader's: the grader's mark is
    # queued after the call returns, the last on the timed stream
    cheat = honest[:5] + [_k(SLEEP, timed, 420, 5), _k(SLEEP, side, 200, 5), _k(SLEEP, timed, 440, 1)]
    work, _, found = grader_kernels(cheat)
    assert sorted(k.start_s for k in work) == [200e-6, 365e-6, 420e-6] and found.start_s == 440e-6
    assert grader_kernels([_k(OWN, timed, 0, 5)]) == ([_k(OWN, timed, 0, 5)], None, None)


def test_a_watched_timed_calls_work_must_lie_between_the_window_and_the_mark():
    """grader.verify.speed.unordered_work: the call's kernels, on any stream, start once the timed window
    opened (the current stream reached the call) and end before the mark (the caller's next work there).
    Work that started during the grader's sleep read inputs not yet written; work of another stream still
    running at the mark was never joined. Either fails, whatever values it happened to read; a library's
    fork and join inside the window passes."""
    from grader.verify.speed import grader_kernels, unordered_work

    timed, side = 7, 13
    grader = [_k(SLEEP, timed, 0, 300), _k(COPY, timed, 301, 20), _k(FILL, timed, 322, 40), _k(SLEEP, timed, 363, 1)]

    def verdict(*kernels):
        return unordered_work(*grader_kernels(grader + list(kernels)))

    assert verdict(_k(OWN, timed, 365, 50), _k(SLEEP, timed, 416, 1)) is None
    # forked onto a stream of its own after the window opened, and joined back before the mark
    assert verdict(_k(OWN, side, 366, 40), _k(OWN, timed, 407, 5), _k(SLEEP, timed, 413, 1)) is None
    early = verdict(_k(OWN, side, 120, 50), _k(SLEEP, timed, 365, 1))  # ran ahead, joined or not
    assert early and "started before the current stream reached the call" in early
    assert "the benchmark's shape" in early
    unjoined = verdict(_k(SLEEP, timed, 366, 1), _k(OWN, side, 365, 50))  # waited, never joined
    assert unjoined and "after the current stream's next work started" in unjoined
    # a timeline without the mark judges only the start
    assert verdict(_k(OWN, side, 370, 50)) is None


def test_work_still_running_when_the_current_streams_next_work_began_is_unjoined():
    """observe.unjoined_work on the stream property's window: the call's kernels, then the mark (a short
    sleep queued on the current stream after the call returned). Work on the current stream, and work of
    another stream that the current one waited for (ended before the mark began), is ordered; a kernel of
    another stream still running at the mark, or starting after it, is not."""
    from grader.verify.observe import Observation
    from grader.verify.observe import unjoined_work

    current, side = 7, 13
    late_inputs = [_k(SLEEP, current, 0, 10_000), _k(COPY, current, 10_001, 3)]
    mark = _k(SLEEP, current, 10_030, 1)
    on_current = Observation(late_inputs + [_k(OWN, current, 10_005, 20), mark])
    joined = Observation(late_inputs + [_k(OWN, side, 10_006, 20), mark])
    still_running = Observation(late_inputs + [_k(OWN, side, 10_020, 20), mark])
    after = Observation(late_inputs + [mark, _k(OWN, side, 10_040, 5)])
    assert unjoined_work(on_current, current, "call") is None
    assert unjoined_work(joined, current, "call") is None
    for seen in (still_running, after):
        problem = unjoined_work(seen, current, "call")
        assert problem and "leaky_relu_kernel" in problem and "the current stream's next work started" in problem
    assert unjoined_work(after, None, "call") is None  # the stream's id unknown: nothing claimed


def test_a_window_whose_mark_came_after_an_idle_gpu_proves_nothing_and_asks_a_longer_hold():
    """properties.host_outran: the GPU idle before the mark (every earlier kernel ended well before it
    began) means the host queued the mark after the hold ran out, so an unjoined kernel could have run and
    ended unseen in between; a mark right after the hold, the call's last kernel or its join is in time."""
    from grader.verify.observe import Observation
    from grader.verify.observe import unjoined_work
    from grader.verify.properties import HOST_SLACK_S, host_outran

    current, side = 7, 13
    hold = _k(SLEEP, current, 0, 2_500)
    in_time = Observation([hold, _k(OWN, current, 2_501, 20), _k(SLEEP, current, 2_523, 1)])
    joined = Observation([hold, _k(OWN, side, 2_504, 20), _k(SLEEP, current, 2_530, 1)])
    unjoined_in_time = Observation([hold, _k(OWN, side, 2_504, 20), _k(SLEEP, current, 2_502, 1)])
    gap_us = HOST_SLACK_S * 1e6 + 30
    # the host late: the unjoined kernel ran right after the hold and ended long before the mark
    unjoined_late = Observation([hold, _k(OWN, side, 2_504, 5), _k(SLEEP, current, 2_509 + gap_us, 1)])
    for seen in (in_time, joined, unjoined_in_time):
        assert not host_outran(seen, current)
    assert unjoined_work(unjoined_in_time, current, "call")
    assert host_outran(unjoined_late, current) and unjoined_work(unjoined_late, current, "call") is None
    assert not host_outran(unjoined_late, None)  # the stream's id unknown: no mark to judge
    assert not host_outran(Observation([_k(SLEEP, current, 0, 1)]), current)  # nothing before the mark


def test_a_gradient_read_on_the_current_stream_unlike_its_settled_value_was_read_unfinished():
    """properties.read_early: the copies the current stream made of the gradients as the backward returned
    against the gradients once the device is synchronized. Equal (NaN where both are NaN, or a gradient
    that is not a tensor) is ordered; a difference anywhere names the argument and the unjoined stream."""
    import torch

    from grader.verify.properties import read_early

    g = torch.tensor([1.0, float("nan"), -2.0])
    assert read_early([g.clone(), None], [g, None], ["x", "w"], "call") is None
    early = g.clone()
    early[2] = float("nan")  # the poisoned memory the backward had not yet written
    problem = read_early([g.clone(), early], [g, g], ["x", "weight"], "call")
    assert problem and "`weight`" in problem and "the current stream's next work started" in problem
    assert read_early([torch.tensor([3, 4])], [torch.tensor([3, 5])], ["n"], "call")
