"""Turning test outcomes into points: all-or-nothing per group, tiers for speed.

The speed's verdict (`speed_verdict`) is computed from the timing's raw measurements both in the
grading process (to tell the student at once) and again here, in the parent, which scores with its
own result: a submission that patches the grader in its process cannot award itself a tier.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Sequence

from grader.verify.outcomes import UNFINISHED, ExerciseRow, GroupScore, TestOutcome
from grader.verify.spec import PERFORMANCE, Spec

# How a check that cannot run on this machine says so (too little GPU memory): it is reported as not
# run, and costs its group nothing unless the grade is strict (grader.verify.checks.require_free_memory).
NOT_RUN_HERE = "not run here: "
# How the timing says it was skipped because a group speed requires had already failed a check
NOT_TIMED = "not timed: "

# A measured rate this far above the device's limit is a timing artefact or a cheat, not speed. The
# FLOP limit is strict-fp32 cuBLAS, which a convolution may pass by doing fewer multiplications than it
# is credited with (Winograd: 2.25x fewer for 3x3), but not by 4x.
OVER_LIMIT = {"B": 1.10, "FLOP": 4.0}
# The timed calls' median may be this far below the time the op's own kernels took on the GPU when the
# profiler watched a few of them, right after, on the same refilled inputs (noise); further below, the op
# did less (or other) work when it was not observed, e.g. a library's kernels only when no profiler is
# on. Honest ops sit at or above 1: the median over the kernels' time was 1.000-1.017 for all ten
# references on the H100 (2026-11-26, cold and warm grades), the events also timing the launch gaps.
UNOBSERVED_MARGIN = 0.9


def tier_fraction(spec: Spec, ratio: float) -> float:
    """Fraction of the performance points earned at `ratio` of the reference's throughput."""
    earned = 0.0
    for threshold, fraction in spec.perf_tiers:
        if ratio >= threshold:
            earned = max(earned, fraction)
    return earned


# An honest op's device sync after its end event took 17-63 us on the H100 (PyTorch's baselines,
# cuBLAS's the longest) and 20-117 us on a two-H200 host, varying by process more than by op, so the
# margin counts above the larger of the baseline's wait in the same run and an honest GPU sleep's in
# the timed process just after its samples; capped, so that a stall of either cannot hide a short
# kernel run off the timed stream.
IDLE_SYNC_CAP_S = 1e-4


def work_escaped(busy_after_s: float, median_s: float, idle_sync_s: float = 0.0) -> bool:
    """The device was still busy well after the timed stream finished: work ran outside the
    events. `idle_sync_s` is what the same wait took after an honest op (PyTorch's baseline) in
    the same run; the absolute margin allows for a sync's jitter, the relative one for noise on
    long ops."""
    return busy_after_s - min(idle_sync_s, IDLE_SYNC_CAP_S) > max(5e-5, 0.25 * median_s)


def speed_verdict(spec: Spec, perf: dict) -> tuple[float, str]:
    """(fraction of the performance points earned, why not all) from a timing's raw numbers:
    rate and reference_rate (per second), limit, unit, time_s and busy_after_s."""
    if str(perf.get("verdict", "")).startswith("grader error"):
        return 0.0, perf["verdict"]
    try:
        rate, reference, time_s = float(perf["rate"]), float(perf["reference_rate"]), float(perf["time_s"])
        limit, busy = float(perf.get("limit") or 0.0), float(perf.get("busy_after_s", 0.0))
        idle_sync = max(float(perf.get("baseline_busy_after_s", 0.0)), float(perf.get("honest_busy_after_s", 0.0)))
        kernel_time = float(perf.get("kernel_time_s") or 0.0)
        threads = int(perf.get("threads_started") or 0)
    except (KeyError, TypeError, ValueError):
        return 0.0, perf.get("verdict") or "the timing recorded no throughput"
    if not (rate > 0 and reference > 0 and time_s > 0):
        return 0.0, "the timing recorded no throughput"
    if work_escaped(busy, time_s, idle_sync):
        return 0.0, (f"the GPU stayed busy {busy * 1e6:.0f} us after the timed stream's {time_s * 1e6:.0f} us "
                     "of work ended: work ran outside the current stream, so the timing is not credited "
                     "(launch on at::cuda::getCurrentCUDAStream())")
    if threads:
        return 0.0, (f"a timed call left {threads} host thread(s) running after it returned (work the timing "
                     "cannot see), so the timing is not credited")
    if kernel_time > 0 and time_s < UNOBSERVED_MARGIN * kernel_time:
        return 0.0, (f"the timed calls took {time_s * 1e6:.0f} us, but the op's own kernels alone took "
                     f"{kernel_time * 1e6:.0f} us when the profiler watched: the op does other (or less) work "
                     "when it is not observed, so the timing is not credited")
    unit = perf.get("unit")
    if unit in OVER_LIMIT and not limit > 0:
        return 0.0, "the timing recorded no device limit to compare with"
    if unit in OVER_LIMIT and rate / limit > OVER_LIMIT[unit]:
        name = "the copy bandwidth" if unit == "B" else "strict-fp32 cuBLAS's rate"
        return 0.0, (f"{rate / limit:.0%} of {name} is not physically possible for this work: "
                     "the op skipped work (or cached a result), so speed is not credited")
    ratio = rate / reference
    fraction = tier_fraction(spec, ratio)
    if fraction == 0:
        first = min(t for t, _ in spec.perf_tiers)
        return 0.0, f"reached {ratio:.2f}x of the reference's throughput; the first tier needs {first:g}x"
    return fraction, ""


def not_run_here(test: TestOutcome) -> bool:
    """A check skipped because this machine cannot run it (too little GPU memory)."""
    return test.outcome == "skipped" and str(test.reason).startswith(NOT_RUN_HERE)


def score_exercise(spec: Spec, tests: Sequence[TestOutcome], status: str = "graded", error: str = "",
                   strict: bool = False) -> ExerciseRow:
    """The exercise's row of the report: points per group, reasons, speed. A check this machine
    cannot run (not_run_here) costs its group nothing, unless `strict`: the group is then not graded
    here; either way the row lists it under `not_run`."""
    tests = tuple(tests)
    if status != "graded":
        groups = {group: GroupScore(0.0, pts, status, error) for group, pts in spec.points.items()}
        return ExerciseRow(spec.exercise, spec.title, status, error, 0.0, spec.total, groups, tests)
    by_group: dict[str, list[TestOutcome]] = {}
    for t in tests:
        by_group.setdefault(t.group or "", []).append(t)
    not_run = tuple(f"{t.name}: {t.reason[len(NOT_RUN_HERE):]}" for t in tests if not_run_here(t))
    groups: dict[str, GroupScore] = {}
    for group, pts in spec.points.items():
        if group == PERFORMANCE:
            continue
        members = by_group.get(group, [])
        failed = [t for t in members if t.outcome == "failed"]
        unfinished = [t for t in members if t.outcome in UNFINISHED and (strict or not not_run_here(t))]
        if not strict and members and all(not_run_here(t) for t in members):
            unfinished = members  # nothing of the group ran here
        if not members:
            state, reason = "not run", "no test of this group ran (deselected?)"
        elif failed:
            state, reason = "failed", f"{failed[0].name}: {failed[0].reason}"
            if len(failed) > 1:
                reason += f" (and {len(failed) - 1} more failed)"
        elif unfinished:
            state, reason = "skipped", f"{unfinished[0].name}: {unfinished[0].reason}"
        else:
            state, reason = "passed", ""
        groups[group] = GroupScore(float(pts) if state == "passed" else 0.0, pts, state, reason,
                                   passed=sum(t.outcome == "passed" for t in members), total=len(members))
    outcomes = {t.name: t.outcome for t in tests}
    for group, needed in spec.requires.items():
        entry = groups.get(group)
        failed = [name for name in needed if required_failed(name, outcomes, {g: v.state for g, v in groups.items()})]
        if entry is not None and entry.state == "passed" and failed:
            groups[group] = replace(entry, points=0.0, state="failed",
                                    reason=f"counts only once {', '.join(failed)} passes")
    performance = None
    if PERFORMANCE in spec.points:
        groups[PERFORMANCE] = _score_performance(spec, by_group.get(PERFORMANCE, []), groups)
        perf_test = (by_group.get(PERFORMANCE) or [None])[0]
        if perf_test:
            performance = perf_test.properties.get("performance")
    return ExerciseRow(spec.exercise, spec.title, status, error, sum(g.points for g in groups.values()), spec.total,
                       groups, tests, performance, not_run=not_run, passed=sum(t.outcome == "passed" for t in tests),
                       total_tests=len(tests))


def required_failed(name: str, outcomes: dict[str, str], states: dict[str, str]) -> bool:
    """Whether what `name` stands for in a spec's `requires` failed: a scored group (`states`: group ->
    its state), or one check (`outcomes`: check -> its outcome; what did not run, deselected or skipped
    here, blocks nothing)."""
    if name in states:
        return states[name] == "failed"
    return outcomes.get(name) == "failed"


def _score_performance(spec: Spec, tests: list[TestOutcome], groups: dict[str, GroupScore]) -> GroupScore:
    pts = spec.points[PERFORMANCE]
    entry = GroupScore(0.0, pts, "not run", "", passed=0, total=1)
    if not tests:
        return replace(entry, reason="the timing did not run")
    test = tests[0]
    perf = test.properties.get("performance") or {}
    states = {g: s.state for g, s in groups.items()}
    missing = [g for g in spec.perf_requires if states.get(g) != "passed"]
    # a timing skipped because a required group failed (NOT_TIMED) is that loss, not "not graded here"
    required_failed = any(states.get(g) == "failed" for g in spec.perf_requires)
    if test.outcome in UNFINISHED and not required_failed:
        return replace(entry, state="skipped", reason=test.reason or "not run")
    if missing:
        return replace(entry, state="failed", reason=f"speed counts only once {', '.join(missing)} passes")
    if test.outcome == "failed":
        return replace(entry, state="failed", reason=test.reason)
    # recomputed here, not taken from the grading process's own verdict
    fraction, reason = speed_verdict(spec, perf)
    if reason:
        return replace(entry, state="failed", reason=reason)
    ratio = float(perf["rate"]) / float(perf["reference_rate"])
    return replace(entry, points=round(pts * fraction, 2), state="passed" if fraction >= 1 else "partial",
                   reason="" if fraction >= 1 else f"{ratio:.2f}x of the reference earns {fraction:.0%}", passed=1)
