"""The grader's own logic, on CPU tensors and synthetic results: no build, no GPU."""
from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from grader import env
from grader.toolchain import build
from grader import specs as spec
from grader.verify import checks
from grader.run import report
from grader.verify.checks import CheckFailure, Tolerance
from grader.verify.outcomes import ExerciseRow, TestOutcome
from grader.verify.properties import property_checks
from grader.verify.results import write_json_atomic
from grader.verify.scoring import score_exercise, speed_verdict, tier_fraction, work_escaped
from grader.verify.timer import Timing
from tests.grading import SOLUTIONS, grader_import_graph

LEAKY = spec.by_exercise("01")


def _escaped(t: Timing) -> bool:
    """Work ran outside the timed stream, as the verdict decides from a timing's numbers."""
    return work_escaped(t.busy_after_s, t.median_s)


def _tests(outcomes: dict[str, str], perf: dict | None = None) -> list[dict]:
    out = [{"name": f"{g}[{i}]", "group": g, "outcome": o, "reason": "boom" if o == "failed" else "", "properties": {}}
           for i, (g, o) in enumerate(outcomes.items())]
    if perf is not None:
        out.append({"name": "performance", "group": "performance", "outcome": perf.pop("outcome", "passed"),
                    "reason": perf.pop("reason", ""), "properties": {"performance": perf}})
    return out


def _score(spec, tests: list[dict], *args, **kwargs) -> ExerciseRow:
    """score_exercise of tests written as the results file writes them."""
    return score_exercise(spec, [TestOutcome.from_json(t) for t in tests], *args, **kwargs)


def test_groups_are_all_or_nothing():
    tests = _tests({"forward": "passed", "backward": "failed", "input_checks": "passed", "autograd": "passed"})
    tests.append({"name": "forward[x]", "group": "forward", "outcome": "failed", "reason": "nan", "properties": {}})
    row = _score(LEAKY, tests)
    assert row.groups["forward"].points == 0 and "nan" in row.groups["forward"].reason
    assert row.groups["backward"].points == 0
    assert row.groups["input_checks"].points == 1 and row.groups["autograd"].points == 1


@pytest.mark.parametrize("exercise, own_check", [("09", "forward[own kernels ran]"), ("09", "backward[own kernels ran]"),
                                                 ("03", "forward[own kernel ran]"),
                                                 ("10", "forward[no PyTorch convolution ran]")])
def test_a_group_that_requires_a_check_earns_nothing_when_that_check_fails(exercise, own_check):
    """09's and 03's autograd groups (gradcheck through the Python wrapper) and 10's stream checks
    count only while the own-work checks have not failed; one that did not run (QUICK=1) blocks
    nothing."""
    sp = spec.by_exercise(exercise)
    (group,) = [g for g, needed in sp.requires.items() if own_check in needed]
    groups = {g: "passed" for g in sp.points if g != "performance"}
    tests = _tests(groups) + [{"name": n, "group": n.split("[")[0], "outcome": "passed", "reason": "",
                               "properties": {}} for n in sp.requires[group]]
    assert _score(sp, tests).groups[group].state == "passed"
    failed = [dict(t, outcome="failed", reason="PyTorch's kernels ran") if t["name"] == own_check else t for t in tests]
    row = _score(sp, failed)
    assert row.groups[group].points == 0 and own_check in row.groups[group].reason
    not_run = [dict(t, outcome="not run") if t["name"] == own_check else t for t in tests]
    assert _score(sp, not_run).groups[group].state == "passed"


def _group_requirements() -> list[tuple[str, str, str]]:
    """(exercise, gated group, required group) for every spec that pays a group only once another passes."""
    return [(sp.exercise, group, needed) for sp in spec.all_specs() for group, names in sp.requires.items()
            for needed in names if needed in sp.points]


@pytest.mark.parametrize("exercise, group, needed", _group_requirements())
def test_a_group_that_requires_a_group_earns_nothing_while_that_group_fails(exercise, group, needed):
    """04-07's registration (opcheck) and 03's autograd (gradcheck) would pass or fail a broken kernel
    by chance: they count only once the kernel's own groups pass, so a grade is the same every run.
    Each required group failing alone costs the gated group; skipped here or not run, it costs nothing."""
    sp = spec.by_exercise(exercise)
    groups = {g: "passed" for g in sp.points if g != "performance"}
    assert _score(sp, _tests(groups)).groups[group].state == "passed"
    row = _score(sp, _tests(dict(groups, **{needed: "failed"})))
    assert row.groups[group].points == 0 and row.groups[group].state == "failed"
    assert f"counts only once {needed} passes" in row.groups[group].reason
    for outcome in ("skipped", "not run"):
        assert _score(sp, _tests(dict(groups, **{needed: outcome}))).groups[group].state == "passed"


def test_every_opcheck_group_waits_for_the_kernels_it_runs():
    """The property behind the requirement: every exercise with a registration group gates it."""
    for sp in spec.all_specs():
        if "registration" in sp.points:
            assert any(n in sp.points for n in sp.requires.get("registration", ())), sp.exercise


def _perf(ratio: float, **raw) -> dict:
    """A timing's raw numbers, as the grading process records them: `ratio` of the reference's rate."""
    return {"rate": 100.0 * ratio, "reference_rate": 100.0, "limit": 1000.0, "time_s": 1e-3, "busy_after_s": 1e-6,
            "unit": "B", **raw}


def test_speed_earns_tiers_only_after_forward_passes():
    ok = {"forward": "passed", "backward": "passed", "input_checks": "passed", "autograd": "passed"}
    full = _score(LEAKY, _tests(ok, _perf(0.97)))
    assert full.points == LEAKY.total
    half = _score(LEAKY, _tests(ok, _perf(0.6)))
    assert half.groups["performance"].points == 1 and half.groups["performance"].state == "partial"
    broken = dict(ok, forward="failed")
    fast_but_wrong = _score(LEAKY, _tests(broken, _perf(5)))
    assert fast_but_wrong.groups["performance"].points == 0
    assert "forward" in fast_but_wrong.groups["performance"].reason


@pytest.mark.parametrize("raw, why", [
    (_perf(0.2), "first tier needs"),
    (_perf(5.0, limit=300.0), "not physically possible"),
    (_perf(0.97, busy_after_s=5e-4), "outside the current stream"),
    (_perf(0.97, busy_after_s=5e-4, baseline_busy_after_s=4e-4), "outside the current stream"),  # capped
    ({"unit": "B"}, "no throughput"),
])
def test_the_parent_recomputes_the_speed_verdict_from_the_raw_numbers(raw, why):
    """A grading process that claims full speed (no verdict, tier 1.0) against its own numbers, as a
    patched grader would, earns what the numbers say."""
    ok = {"forward": "passed", "backward": "passed", "input_checks": "passed", "autograd": "passed"}
    row = _score(LEAKY, _tests(ok, dict(raw, tier_fraction=1.0, verdict="")))
    assert row.groups["performance"].points == 0 and why in row.groups["performance"].reason, row
    assert speed_verdict(LEAKY, raw)[0] == 0


def test_a_sync_as_slow_as_the_baselines_is_not_escaped_work():
    """The reference stencil's sync took 34-76 us after its 192 us kernel, PyTorch's 51 us, on the
    H100: measured against the baseline's, not against zero."""
    honest = _perf(0.97, time_s=192e-6, busy_after_s=76e-6, baseline_busy_after_s=51e-6)
    assert speed_verdict(LEAKY, honest) == (1.0, "")
    escaped = _perf(0.97, time_s=20e-6, busy_after_s=192e-6, baseline_busy_after_s=51e-6)
    assert "outside the current stream" in speed_verdict(LEAKY, escaped)[1]


def test_a_sync_as_slow_as_an_honest_sleeps_in_the_same_process_is_not_escaped_work():
    """On a two-H200 host 02's and 07's solutions waited 93-117 us for the device after 233-627 us of work,
    PyTorch's baseline 20 us in the yardstick's process: an honest GPU sleep timed in the op's own process
    (honest_busy_after_s) waits as long, and the margin counts above it, up to the cap."""
    honest = _perf(0.97, time_s=233e-6, busy_after_s=117e-6, baseline_busy_after_s=20e-6, honest_busy_after_s=95e-6)
    assert speed_verdict(LEAKY, honest) == (1.0, "")
    assert "outside the current stream" in speed_verdict(LEAKY, dict(honest, honest_busy_after_s=0.0))[1]
    # a slow sync of its own does not hide more than the cap's worth of work run off the stream
    escaped = _perf(0.97, time_s=233e-6, busy_after_s=400e-6, baseline_busy_after_s=20e-6, honest_busy_after_s=300e-6)
    assert "outside the current stream" in speed_verdict(LEAKY, escaped)[1]


@pytest.mark.parametrize("kernels_over_median", [1 / 1.017, 1.0, 1 / 0.95])
def test_an_op_timed_as_fast_as_its_own_kernels_keeps_its_speed(kernels_over_median):
    """The references' timed median was 1.000-1.017 times what their kernels took under the profiler
    (H100, all ten): such ratios, and a little noise below them, are credited."""
    honest = _perf(0.97, time_s=1e-3, kernel_time_s=1e-3 * kernels_over_median)
    assert speed_verdict(LEAKY, honest) == (1.0, "")


def test_kernels_side_by_side_count_once_in_the_observed_time():
    from types import SimpleNamespace as K

    from grader.verify.speed import busy_time
    assert busy_time([]) == 0
    assert busy_time([K(start_s=0.0, duration_s=2.0), K(start_s=3.0, duration_s=1.0)]) == 3.0
    # a library's two streams: the overlap once; a kernel inside another adds nothing
    assert busy_time([K(start_s=1.0, duration_s=2.0), K(start_s=0.0, duration_s=2.0),
                      K(start_s=0.5, duration_s=0.5)]) == 3.0


@pytest.mark.parametrize("speedup_unobserved", [1.15, 1.5, 4.0])
def test_an_op_faster_when_not_profiled_loses_its_speed(speedup_unobserved):
    """An op that runs its own kernels when a profiler watches and something faster otherwise (a
    library's kernels): its timed median falls well below its observed kernels' time."""
    sneaky = _perf(0.97, time_s=1e-3, kernel_time_s=1e-3 * speedup_unobserved)
    fraction, why = speed_verdict(LEAKY, sneaky)
    assert fraction == 0 and "when it is not observed" in why, why


def test_a_check_this_gpu_cannot_run_costs_nothing_unless_strict():
    from grader.verify.scoring import NOT_RUN_HERE

    def _t(name, group, outcome, reason=""):
        return {"name": name, "group": group, "outcome": outcome, "reason": reason, "properties": {}}

    s = LEAKY
    tests = [_t("forward[a]", "forward", "passed"),
             _t("forward[huge]", "forward", "skipped", NOT_RUN_HERE + "the check needs 8.6 GiB of free GPU memory"),
             *[_t(f"{g}[a]", g, "passed") for g in ("backward", "input_checks", "autograd")]]
    row = _score(s, tests)
    assert row.groups["forward"].state == "passed" and row.groups["forward"].points == 4
    assert row.not_run == ("forward[huge]: the check needs 8.6 GiB of free GPU memory",)
    strict = _score(s, tests, strict=True)
    assert strict.groups["forward"].points == 0 and "8.6 GiB" in strict.groups["forward"].reason
    # a group none of whose checks ran here is not graded, strict or not
    alone = _score(s, [tests[1], *tests[2:]])
    assert alone.groups["forward"].points == 0
    # any other skip is not excused
    other = _score(s, [_t("forward[a]", "forward", "passed"), _t("forward[b]", "forward", "skipped", "why"),
                               *tests[2:]])
    assert other.groups["forward"].points == 0


def test_checks_a_gpu_cannot_run_are_reported_one_line_per_reason():
    """A T4 leaves out a whole tensor-core version: dozens of checks, one reason. The report names the
    reason once with a few of its checks, not one line per check, and loses no check's reason."""
    from grader.run import report

    why_cc = "version 5 needs compute capability 8.0; this GPU is 7.5"
    checks = [f"tensor_cores_tf32[{i}x{i}x{i}]: {why_cc}" for i in range(1, 37)]
    checks += ["forward[huge]: the check needs 8.6 GiB of free GPU memory", "a check without a reason"]
    row = ExerciseRow("01_leaky_relu", "", "graded", "", 0.0, 10, not_run=tuple(checks))
    lines = report.reasons(row)
    assert lines == [
        f"not run on this GPU: tensor_cores_tf32[1x1x1], tensor_cores_tf32[2x2x2], tensor_cores_tf32[3x3x3] and 33 more: {why_cc}",
        "not run on this GPU: forward[huge]: the check needs 8.6 GiB of free GPU memory",
        "not run on this GPU: a check without a reason"]


def test_skipped_groups_earn_nothing_and_say_why():
    row = _score(LEAKY, _tests({"forward": "skipped", "backward": "skipped"}))
    assert row.points == 0 and row.groups["forward"].state == "skipped"


def test_build_failure_costs_every_group_with_the_compiler_message():
    row = _score(LEAKY, [], "build failed", "leaky_relu.cu(97): error: expected a \";\"")
    assert row.points == 0
    assert all("leaky_relu.cu(97)" in g.reason for g in row.groups.values())
    assert "build failed" in report.table([row])


def test_tiers():
    assert tier_fraction(LEAKY, 0.49) == 0 and tier_fraction(LEAKY, 0.5) == 0.5 and tier_fraction(LEAKY, 0.9) == 1.0


def test_math_mode_sets_and_restores_the_backend_flags():
    from grader.verify.timer import math_mode, tuned_strict_fp32

    flags = torch.backends
    before = (flags.cudnn.allow_tf32, flags.cuda.matmul.allow_tf32, flags.cudnn.benchmark)
    with math_mode():
        assert not flags.cudnn.allow_tf32 and not flags.cuda.matmul.allow_tf32
        assert flags.cudnn.benchmark == before[2]  # untouched unless asked
    with pytest.raises(RuntimeError), tuned_strict_fp32():
        assert flags.cudnn.benchmark and not flags.cudnn.allow_tf32
        raise RuntimeError("a failing timed call")
    assert (flags.cudnn.allow_tf32, flags.cuda.matmul.allow_tf32, flags.cudnn.benchmark) == before


@pytest.mark.parametrize("s", spec.all_specs(), ids=lambda s: s.exercise)
def test_every_exercise_math_state_is_a_context_manager(s):
    """Grading (for the whole process), the yardstick and `make bench` enter each exercise's math state
    with `with`: on the CPU too."""
    with s.math():
        pass


def test_timing_flags_work_outside_the_stream():
    assert not _escaped(Timing(1e-3, 1e-3, 1e-6, 10, 1.05e-3, 8e-6))
    assert not _escaped(Timing(5e-6, 5e-6, 1e-8, 10, 30e-6, 6e-6))  # launch latency alone
    # a host stall before the end event (wall 2.3x the event time, H100 cold run) is not an escape
    assert not _escaped(Timing(713e-6, 713e-6, 1e-6, 40, 1636e-6, 9e-6))
    assert _escaped(Timing(1e-5, 1e-5, 1e-7, 10, 2e-3, 1.9e-3))
    assert _escaped(Timing(1e-3, 1e-3, 1e-6, 10, 1.6e-3, 6e-4))  # part of the work on a side stream


def test_assert_close_rejects_nan_zeros_and_fp16_precision():
    expected = torch.linspace(-3, 3, 1001, dtype=torch.float64)
    tol = checks.ELEMENTWISE_TOL[torch.float32]
    checks.assert_close(expected.float(), expected, tol, "exact")
    with pytest.raises(CheckFailure, match="1001 of 1001"):
        checks.assert_close(torch.zeros(1001), expected, tol, "zeros")
    nan = expected.float().clone()
    nan[500] = float("nan")
    with pytest.raises(CheckFailure, match=r"at \[500\]: got nan"):
        checks.assert_close(nan, expected, tol, "one NaN")
    with pytest.raises(CheckFailure, match="elements wrong"):
        checks.assert_close(expected.half().float(), expected, tol, "computed in fp16")
    with pytest.raises(CheckFailure, match="shape"):
        checks.assert_close(expected.float()[:-1], expected, tol, "short")


def test_assert_close_reports_indices_in_the_tensors_shape():
    expected = torch.zeros(4, 5, dtype=torch.float64)
    actual = torch.zeros(4, 5)
    actual[2, 3] = 1
    with pytest.raises(CheckFailure, match=r"at \[2, 3\]: got 1"):
        checks.assert_close(actual, expected, Tolerance(1e-5, 1e-30), "2-D")


def test_rel_error_rejects_zeros_and_nan():
    e = torch.randn(100, dtype=torch.float64)
    checks.assert_rel_error(e.float(), e, 1e-6, "fine")
    with pytest.raises(CheckFailure):
        checks.assert_rel_error(torch.zeros(100), e, 1e-3, "zeros")
    with pytest.raises(CheckFailure):
        checks.assert_rel_error(torch.full((100,), float("nan")), e, 1e-3, "nan")


def test_unmodified_detects_writes_bitwise():
    x = torch.randn(10)
    with pytest.raises(CheckFailure, match="`x` was modified"):
        with checks.unmodified(x=x):
            x[3] = -x[3]
    y = torch.tensor([0.0])
    with pytest.raises(CheckFailure):
        with checks.unmodified(y=y):
            y.neg_()  # -0.0 == 0.0 numerically, but not bitwise


def test_expect_error_requires_the_argument_name():
    def bad(_):
        raise RuntimeError("something went wrong")

    def good(_):
        raise RuntimeError("x must be a CUDA tensor")

    def silent(_):
        return None

    assert "x must" in checks.expect_error(good, 1, names=("x",), what="w")
    with pytest.raises(CheckFailure, match="does not name"):
        checks.expect_error(bad, 1, names=("x",), what="w")
    with pytest.raises(CheckFailure, match="was accepted"):
        checks.expect_error(silent, 1, names=("x",), what="w")


def test_poison():
    assert torch.isnan(checks.poison(torch.empty(8))).all()
    assert (checks.poison(torch.empty(8, dtype=torch.int32)) == 2**31 - 1).all()


def test_exercise_selection():
    assert spec.select(["1"])[0].exercise == "01_leaky_relu"
    assert spec.select(["elu"])[0].exercise == "02_elu"
    with pytest.raises(SystemExit, match="no exercise called"):
        spec.select(["99"])


def test_every_spec_is_consistent():
    specs = spec.all_specs()
    assert not spec.SPEC_ERRORS, spec.SPEC_ERRORS
    # select() finds a spec by its module's name without importing the others: they must agree
    assert [f"ex{s.exercise}" for s in specs] == spec.spec_modules()
    for s in specs:
        groups = {c.group for c in s.checks()}
        scored = set(s.points) - {spec.PERFORMANCE}
        assert groups == scored, f"{s.exercise}: checks cover {groups}, points cover {scored}"
        # property_checks gives a spec whose calls fail to build on the CPU no generated check at all: none may
        generated = property_checks(s)
        assert generated, f"{s.exercise}: no generated checks (its audit_calls raise on the CPU in float32?)"
        # a generated check in a group the spec does not score would run and count for nothing
        unscored = {c.name: c.group for c in generated if c.group not in scored}
        assert not unscored, f"{s.exercise}: checks in groups without points: {unscored}"
        names = [c.name for c in s.checks()]
        assert len(names) == len(set(names)), f"{s.exercise}: duplicate check names"
        assert set(s.perf_requires) <= scored
        assert all(0 < t and 0 < f <= 1 for t, f in s.perf_tiers)


def test_namespaces_differ_per_target(tmp_path):
    a = tmp_path / "alice" / "01_leaky_relu"
    b = tmp_path / "bob" / "01_leaky_relu"
    a.mkdir(parents=True), b.mkdir(parents=True)
    names = {build.namespace_for(p) for p in (a, b, build.env.REPO / "solutions" / "01_leaky_relu")}
    assert len(names) == 3 and all(n.isidentifier() for n in names)
    assert build.build_dir_for(a) != build.build_dir_for(b)


def test_compiler_output_is_condensed_to_errors():
    log = "\n".join([
        "[1/3] c++ -MMD ... -c x.cpp",
        "FAILED: leaky_relu.cuda.o",
        "/w/leaky_relu.cu(97): error: expected a \";\"",
        "    leaky_relu_kernel<scalar_t><<<blocks, 256>>>(x);",
        "    ^",
        "1 error detected in the compilation of \"/w/leaky_relu.cu\".",
        "ninja: build stopped: subcommand failed.",
    ])
    out = build.condense_compiler_output(log)
    assert out.splitlines()[0] == '/w/leaky_relu.cu(97): error: expected a ";"'
    assert "leaky_relu_kernel<scalar_t>" in out and "ninja" not in out and "FAILED" not in out
    # as torch raises it: its first line is the failing command, which the student does not need
    wrapped = "Error building extension 'ex01': [1/2] /usr/local/cuda/bin/nvcc -Werror -c /w/leaky_relu.cu\n" + log
    assert build.condense_compiler_output(wrapped) == out


def test_json_written_atomically(tmp_path):
    path = tmp_path / "r.json"
    write_json_atomic(path, {"a": 1})
    assert json.loads(path.read_text()) == {"a": 1}
    assert list(tmp_path.iterdir()) == [path]


def test_report_shows_reasons_and_totals():
    row = _score(LEAKY, _tests({"forward": "failed", "backward": "passed", "input_checks": "passed",
                                        "autograd": "passed"}))
    text = report.table([row])
    assert "01_leaky_relu" in text and "forward (0/4): forward[0]: boom" in text and "total: 4/10" in text
    md = report.markdown([row], {"target": "t", "seed": 7})
    assert "SEED=7" in md and "| 01_leaky_relu |" in md


def test_quick_mode_and_the_full_grade_word_what_was_not_graded_the_same_way():
    """QUICK=1 leaves the timing out (no test of `performance`), a full grade on a small GPU skips a
    check: both read "not graded here: <groups> (why)", never as points lost."""
    ok = {"forward": "passed", "backward": "passed", "input_checks": "passed", "autograd": "passed"}
    quick = _score(LEAKY, _tests(ok))  # what a quick grade records: no performance test at all
    why = "QUICK=1 skips the timing and the slow checks"
    assert report.reasons(quick, why) == [f"not graded here: performance ({why})"]
    assert "total: 8/10 (2 of them not graded here)" in report.table([quick], not_run_why=why)
    skipped = _score(LEAKY, _tests(dict(ok, forward="skipped"), _perf(0.97)))
    skipped.groups["forward"] = dataclasses.replace(skipped.groups["forward"],
                                                    reason="forward[0]: Skipped: needs 14 GiB of free GPU memory")
    lines = report.reasons(skipped)
    assert "not graded here: forward (needs 14 GiB of free GPU memory)" in lines
    assert not any(l.startswith("forward (0/4)") for l in lines), lines
    # without a reason to leave checks out, a group none of whose checks ran is still a loss
    assert report.reasons(quick) == ["performance (0/2): the timing did not run"]


def test_without_a_gpu_each_exercise_is_one_line_and_the_free_gpus_are_named():
    gpu_skip = "Skipped: no CUDA GPU on this machine: GPU checks skipped"
    tests = [{"name": f"forward[{i}]", "group": "forward", "outcome": "skipped", "reason": gpu_skip,
              "properties": {}} for i in range(5)]
    tests.append({"name": "input_checks[cpu x]", "group": "input_checks", "outcome": "passed", "reason": "",
                  "properties": {}})
    ok = _score(LEAKY, tests)
    bad_tests = [dict(t) for t in tests]
    bad_tests[-1].update(outcome="failed", reason="no error for a CPU x")
    bad = _score(LEAKY, bad_tests)
    broken = _score(LEAKY, [], "build failed", "leaky_relu.cu(97): error: expected a \";\"")
    broken = dataclasses.replace(broken, exercise="02_elu")
    text = report.no_gpu_summary([ok])
    assert text.splitlines()[0] == "01_leaky_relu: compiled; its CPU check input_checks[cpu x] passed; 5 checks need a GPU"
    assert "0/" not in text and "total" not in text and "Google Colab" in text and "Kaggle" in text
    text = report.no_gpu_summary([bad, broken])
    assert "01_leaky_relu: compiled; its CPU check input_checks[cpu x] FAILED; 5 checks need a GPU" in text
    assert "input_checks: input_checks[cpu x]: no error for a CPU x" in text
    assert "02_elu: build failed: leaky_relu.cu(97)" in text
    md = report.markdown([ok], {"target": "t", "seed": 7, "gpu": False})
    assert "5 checks need a GPU" in md and "| exercise |" not in md


def test_bench_publish_puts_one_table_into_the_readme(tmp_path):
    """`make bench PUBLISH=1`: the report lands in docs/results/<gpu>/ and its table in the README,
    replaced (not repeated) by the next run. The numbers here are made up: only the plumbing is tested."""
    import json

    from grader.bench.benchmarks import README_BEGIN, README_END, publish

    report = tmp_path / "bench-report"
    report.mkdir()
    result = {"exercise": "01_leaky_relu", "title": "LeakyReLU", "label": "fp32, 2^28 elements", "unit": "B",
              "work": 2 * 4 * 2**28, "flops": 2**28, "min_bytes": None,
              "rows": [{"version": "reference", "time_s": 1e-3, "rate": 2.1e12, "samples": 50},
                       {"version": "PyTorch", "time_s": 0.9e-3, "rate": 2.4e12, "samples": 50}]}
    info = {"date": "2026-01-01", "torch": "2.x", "cuda": "13.0", "cudnn": 91900, "gpu": "NVIDIA Test GPU 80GB",
            "sms": 132, "driver": "999.1"}
    (report / "results.json").write_text(json.dumps(
        {"limits": {"copy_bandwidth": 2.9e12, "fp32_matmul": 5e13}, "info": info, "results": [result]}))
    (report / "results.md").write_text("page")
    readme = tmp_path / "README.md"
    readme.write_text("# Course\n\ntext\n")
    folder = publish(report, docs=tmp_path / "docs" / "results", readme=readme)
    assert folder.name == "nvidia-test-gpu-80gb" and (folder / "results.json").exists()
    first = readme.read_text()
    assert first.count(README_BEGIN) == 1 and first.count(README_END) == 1
    assert "| 01_leaky_relu | fp32, 2^28 elements | reference |" in first and "NVIDIA Test GPU 80GB" in first
    assert "docs/results/nvidia-test-gpu-80gb/throughput.png" in first
    assert "](throughput.png)" not in first  # the page's own relative links stay in the page
    publish(report, docs=tmp_path / "docs" / "results", readme=readme)
    assert readme.read_text() == first


def test_every_known_wrong_variant_still_applies_to_its_solution(tmp_path):
    """A variant is a patch of the solution's text: an edit of the solution that moves the patched
    lines must fail here, on the CPU, not only where the GPU suite runs the variant."""
    from tests.known_wrong import all_variants

    for v in all_variants():
        v.materialize(tmp_path / v.id.replace("/", "_"))  # raises, naming the variant and the text


@pytest.mark.parametrize("name, function", [
    ("void (anonymous namespace)::leaky_relu_kernel<float>(float const*, float*, long, float)", "leaky_relu_kernel"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::leaky_relu_kernel("
     "at::TensorIteratorBase&, c10::Scalar const&)::{lambda()#1}::operator()() const::{lambda(float)#1}>(int, ...)",
     "vectorized_elementwise_kernel"),
    ("matmul_kernel3", "matmul_kernel3"),
    ("void conv2d_kernel2<64, 64, 8>(float const*, float const*, float*)", "conv2d_kernel2"),
])
def test_kernel_function_is_the_kernels_own_name(name, function):
    assert checks.kernel_function(name) == function


def _seen(*names, stream=7, ops=()):
    from grader.verify.observe import Kernel, Observation

    return Observation([Kernel(n, stream, 1e-5, float(i)) for i, n in enumerate(names)], list(ops))


def test_a_pytorch_kernel_mentioning_our_name_is_not_ours():
    """PyTorch's LeakyReLU kernel carries `leaky_relu_kernel` in its template arguments."""
    from grader.verify.observe import KernelRule

    rule = KernelRule(("leaky_relu_kernel",))
    pytorch = ("void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::"
               "leaky_relu_kernel(at::TensorIteratorBase&)::{lambda(float)#1}>(int, ...)")
    assert "other than this exercise's own" in rule.problem(_seen(pytorch), "forward")
    assert rule.problem(_seen("void (anonymous namespace)::leaky_relu_kernel<float>(float const*)"), "forward") is None


def test_copies_fills_and_the_graders_sleep_are_not_work_but_need_an_own_kernel_beside_them():
    from grader.verify.observe import KernelRule

    rule = KernelRule(("stencil2d_kernel",))
    copy = ("void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl_nocast<at::native::"
            "direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const>(int)")
    fill = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, at::detail::Array<char*, 1> >"
    mine = "void stencil2d_kernel<3>(float const*, float*, int, int, int)"
    assert rule.problem(_seen("Memcpy DtoD (Device -> Device)", copy, fill, "spin_kernel(long)", mine), "f") is None
    assert "no GPU kernel of the exercise ran" in rule.problem(_seen(copy, "Memset (Device)", "spin_kernel(long)"), "f")
    assert rule.problem(_seen(copy), "f", expect_work=False) is None  # an empty output needs no kernel


def test_a_library_rule_allows_cudnn_but_not_pytorchs_convolution():
    from grader.verify.observe import KernelRule

    rule = KernelRule(library=True, forbidden_ops=("conv", "cudnn"))
    cudnn = "sm90_xmma_fprop_implicit_gemm_f32f32_tf32f32_f32_nhwckrsc_nchw_tilesize128x128x16_stage4"
    assert rule.problem(_seen(cudnn, ops=["aten::empty", "aten::zeros"]), "f") is None
    assert "aten::cudnn_convolution" in rule.problem(_seen(cudnn, ops=["aten::cudnn_convolution"]), "f")
    native = "void at::native::im2col_kernel<float>(long, float const*)"
    assert "other than this exercise's own" in rule.problem(_seen(native), "f")


def test_an_elementwise_rule_allows_pytorchs_flips_and_sums_but_no_other_kernel():
    """06/07's backward: their own op beside PyTorch's fills, copies, flips and sums, never PyTorch's
    convolution (its at::native kernels or cuDNN's), its multiplies, a library's GEMM or a forbidden op."""
    from grader.verify.observe import KernelRule

    rule = KernelRule(("conv2d_kernel2",), elementwise=True, forbidden_ops=("conv", "mm"))
    mine = "void (anonymous namespace)::conv2d_kernel2<float, 64>(float const*, float const*, float const*, float*)"
    total = ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::func_wrapper_t<float, "
             "at::native::sum_functor<float, float, float>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, "
             "unsigned int, float, 4, 4> >(at::native::ReduceOp<float, ...>)")
    flip = ("void at::native::index_elementwise_kernel<128, 4, at::native::gpu_index_kernel<at::native::flip_kernel_impl"
            "<float>(at::TensorIterator&)::{lambda(int)#1}>(at::TensorIteratorBase&)::{lambda(int)#1}>(long, ...)")
    assert rule.problem(_seen(flip, mine, total, ops=["aten::flip", "aten::sum"]), "backward") is None
    mul = ("void at::native::vectorized_elementwise_kernel<4, at::native::binary_internal::MulFunctor<float>, "
           "std::array<char*, 3ul> >(int, ...)")  # a multiply and a sum over a strided view: a convolution
    for foreign in ("void at::native::(anonymous namespace)::conv_depthwise2d_forward_kernel<0, float, int>(...)",
                    mul, "void at::native::im2col_kernel<float>(long, float const*)",
                    "sm90_xmma_dgrad_implicit_gemm_f32f32_f32f32_f32_nchwkcrs_nchw_tilesize64x64x8",
                    "ampere_sgemm_128x64_nn"):
        assert "other than this exercise's own" in rule.problem(_seen(mine, foreign), "backward"), foreign
    assert "aten::convolution_backward" in rule.problem(_seen(mine, ops=["aten::convolution_backward"]), "backward")
    assert "other than this exercise's own" in KernelRule(("conv2d_kernel2",)).problem(_seen(mine, total), "f")


def test_faults_that_end_the_cuda_context_are_recognised():
    assert checks.cuda_context_lost("AcceleratorError: CUDA error: an illegal memory access was encountered")
    assert checks.cuda_context_lost("RuntimeError: CUDA error: misaligned address")
    assert not checks.cuda_context_lost("RuntimeError: CUDA error: invalid configuration argument")
    assert not checks.cuda_context_lost("x must be a CUDA tensor")


def test_ops_called_tells_an_exercise_op_from_pytorchs():
    """The autograd check's own-op test: a wrapper falling back to torch.nn.functional shows aten's
    ops, the exercise's op (a custom op with a registered backward) shows its own, both directions."""
    lib = torch.library.Library("course_probe", "DEF")
    lib.define("twice(Tensor x) -> Tensor")
    lib.define("twice_backward(Tensor g) -> Tensor")
    lib.impl("twice", lambda x: x * 2, "CPU")
    lib.impl("twice_backward", lambda g: g * 2, "CPU")
    torch.library.register_autograd("course_probe::twice", lambda ctx, g: torch.ops.course_probe.twice_backward(g))
    x = torch.randn(5, requires_grad=True)
    ours = checks.ops_called(lambda: torch.ops.course_probe.twice(x).sum().backward())
    assert {"course_probe::twice", "course_probe::twice_backward"} <= set(ours)
    theirs = checks.ops_called(lambda: torch.nn.functional.leaky_relu(x, 0.1).sum().backward())
    assert {"aten::leaky_relu", "aten::leaky_relu_backward"} <= set(theirs)
    assert not any(n.startswith("course_probe::") for n in theirs)


@pytest.mark.gpu
def test_the_timer_catches_work_left_running_on_a_side_stream():
    """On the GPU: an op that queues its real work on a stream of its own (and a trivial kernel on the
    timed one) is flagged; the same work on the timed stream is not."""
    from grader.verify.timer import time_fn

    x = torch.randn(1 << 26, device="cuda")
    side = torch.cuda.Stream()

    def honest(t):
        return t * 2

    def escaping(t):
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            y = t * 2
            for _ in range(4):
                y = y * 1.0001
        return t[:1] + 0

    assert not _escaped(time_fn(honest, [x], max_seconds=0.5))
    timing = time_fn(escaping, [x], max_seconds=0.5)
    assert _escaped(timing), timing


def test_backward_against_finite_differences_passes_a_right_backward_and_fails_a_wrong_one():
    class ScaledBackward(torch.autograd.Function):
        """LeakyReLU whose backward forgets the slope on negative inputs."""

        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return torch.nn.functional.leaky_relu(x, 0.2)

        @staticmethod
        def backward(ctx, g):
            return g

    g = torch.Generator().manual_seed(0)
    x = torch.randn(64, dtype=torch.float64, generator=g) + 0.1
    checks.assert_backward_matches_forward(lambda t: torch.nn.functional.leaky_relu(t, 0.2), x, "right", generator=g)
    checks.assert_backward_matches_forward(torch.nn.functional.elu, x, "smooth", generator=g)
    with pytest.raises(CheckFailure, match="finite difference"):
        checks.assert_backward_matches_forward(ScaledBackward.apply, x, "wrong", generator=g)
    with pytest.raises(CheckFailure, match="no gradient"):
        checks.assert_backward_matches_forward(lambda t: t.detach() * 2, x, "detached", generator=g)


def test_no_import_cycle_among_grader_modules():
    """classroom imports slurm and gradebook; neither imports classroom back (issue 23)."""
    graph = {m: d for m, d in grader_import_graph().items() if not m.startswith(("specs.", "run.suite."))}
    graph = {m: d & set(graph) for m, d in graph.items()}  # the modules outside the specs and the suite
    assert {"classroom.slurm", "classroom.gradebook"} <= graph["classroom.grade"]
    assert "classroom.grade" not in graph["classroom.slurm"] | graph["classroom.gradebook"]
    state: dict[str, str] = {}

    def visit(m: str, path: list[str]) -> None:
        state[m] = "open"
        for d in sorted(graph[m]):
            assert state.get(d) != "open", "import cycle: " + " -> ".join(path + [m, d])
            if d not in state:
                visit(d, path + [m])
        state[m] = "done"

    for m in sorted(graph):
        if m not in state:
            visit(m, [])


# grader's wings, floor by floor from the ground up: a module imports the base (grader/env.py), its own
# wing and the wings on the floors below; wings on one floor import neither the other. The public
# faces (grader.build, grader.timer, ...: grader/__init__.py's PUBLIC_FACES) are for the students'
# files and notebooks: no wing imports one.
WING_FLOORS = ({"toolchain"}, {"verify"}, {"specs"}, {"run"}, {"authoring", "bench"}, {"classroom"})
BASE = {"env"}


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """Each import of a wing's module (or of the base) that does not run down: `importer -> imported`."""
    floor = {wing: i for i, wings in enumerate(WING_FLOORS) for wing in wings}
    wrong = []
    for module, imported in sorted(graph.items()):
        wing = module.split(".")[0]
        if wing not in floor and module not in BASE:
            continue  # a public face: on top of every wing
        for other in sorted(imported):
            to = other.split(".")[0]
            if module in BASE:
                ok = other in BASE
            elif to in floor:
                ok = to == wing or floor[to] < floor[wing]
            else:
                ok = other in BASE
            if not ok:
                wrong.append(f"{module} -> {other}")
    return wrong


def test_every_wing_imports_only_the_wings_below_it():
    """The grader's wings import only downward (issue 49): the floors above, the base at the bottom,
    and every folder of grader/ is a wing with its floor."""
    graph = grader_import_graph()
    folders = {p.name for p in (env.REPO / "grader").iterdir() if (p / "__init__.py").is_file()}
    assert folders == set().union(*WING_FLOORS), "a wing without a floor (WING_FLOORS) or a floor without a wing"
    assert upward_imports(graph) == []
    # the check can fail: an import up a floor, across one floor, or of a face, is named
    assert upward_imports({"verify.checks": {"run.report", "verify.observe", "env"}}) == ["verify.checks -> run.report"]
    assert upward_imports({"bench.models": {"authoring.regions"}}) == ["bench.models -> authoring.regions"]
    assert upward_imports({"run.cli": {"build"}, "env": {"toolchain.build"}}) == ["env -> toolchain.build",
                                                                                  "run.cli -> build"]


def test_the_authoring_guide_maps_every_grader_module():
    """docs/authoring.md's table of where the grader's parts live names every module."""
    text = (env.REPO / "docs" / "authoring.md").read_text()
    modules = [p.relative_to(env.REPO / "grader").as_posix() for p in (env.REPO / "grader").glob("*/*.py")
               if not p.name.startswith("__") and p.parent.name != "specs"]
    assert len(modules) > 20 and not [m for m in modules if f"`grader/{m}`" not in text]


def test_every_path_and_module_the_docs_name_exists():
    """README.md, docs/ and the exercise READMEs name grader modules and scripts by path or dotted
    name: a rename leaves none of them pointing nowhere."""
    import re

    docs = [env.REPO / "README.md", env.REPO / "notebooks" / "README.md", *(env.REPO / "docs").glob("*.md"),
            *(env.REPO / "solutions").glob("*/README.md")]
    missing = []
    for doc in docs:
        text = doc.read_text()
        for path in set(re.findall(r"(?:grader|scripts|tests)/[\w/]+\.(?:py|sh)", text)):
            if "exNN" not in path and not (env.REPO / path).exists():
                missing.append(f"{doc.name}: {path}")
        for dotted in set(re.findall(r"\bgrader\.(\w+)", text)):
            if importlib.util.find_spec(f"grader.{dotted}") is None:
                missing.append(f"{doc.name}: grader.{dotted}")
    assert len(docs) > 10 and not missing, missing


def test_every_import_of_a_grader_name_resolves():
    """Every `from grader... import name` in the project, those inside functions too: many run only on
    a GPU (the timing, `make bench`, the notebooks' plots), so a renamed module or helper would
    otherwise first fail there."""
    import ast

    files = subprocess.run(["git", "ls-files", "*.py"], cwd=env.REPO, capture_output=True, text=True,
                           check=True).stdout.split()
    missing = []
    for f in files:
        for node in ast.walk(ast.parse((env.REPO / f).read_text())):
            if isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").split(".")[0] == "grader":
                if importlib.util.find_spec(node.module) is None:
                    missing.append(f"{f}:{node.lineno}: {node.module}")
                    continue
                module = importlib.import_module(node.module)
                missing += [f"{f}:{node.lineno}: {node.module}.{a.name}" for a in node.names
                            if not hasattr(module, a.name) and importlib.util.find_spec(f"{node.module}.{a.name}") is None]
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.split(".")[0] == "grader" and importlib.util.find_spec(a.name) is None:
                        missing.append(f"{f}:{node.lineno}: {a.name}")
    assert len(files) > 50 and not missing, missing


def test_a_timing_without_the_yardstick_shows_its_rate_and_no_ratio(tmp_path):
    """The yardstick's process failed: the row keeps the rate, shows no ratio, and the plot leaves it out."""
    row = _score(LEAKY, _tests({"forward": "passed"}, {"rate": 2e12, "unit": "B", "time_s": 1e-3}))
    text = report.table([row])
    assert "2,000 GB/s" in text
    report.plot_student([row], tmp_path / "plot.png")
    assert not (tmp_path / "plot.png").exists()


@pytest.mark.parametrize("free_mib, cores, expected", [
    (81000, 16, 10),  # an H100: every exercise at once, no second wave of checks behind the timings
    (15000, 16, 1),   # a 16 GB T4 with 14.6 GiB free: the 8.8 GiB check needs the room
    (15400, 16, 2),   # 15.04 GiB: two
    (23000, 4, 2),    # a 24 GB card on 4 cores: the cores less two
    (81000, 2, 1),
])
def test_default_parallel_follows_free_gpu_memory_and_cores(monkeypatch, free_mib, cores, expected):
    from grader.run import grading

    monkeypatch.setattr(grading.env, "nvidia_smi", lambda query: [str(free_mib)] if query == "memory.free" else [])
    monkeypatch.setattr(grading.env, "usable_cores", lambda: cores)
    assert grading.default_parallel(10) == expected


@pytest.mark.parametrize("free_mib, parallel, expected", [
    (7680, 1, 1),     # an 8 GB card: one process alive at a time, none waiting beside the checks
    (14848, 1, 8),    # a 16 GB T4: checks one at a time, seven more may wait for their timing
    (81000, 10, 14),  # an H100
])
def test_default_resident_leaves_the_checks_their_memory(monkeypatch, free_mib, parallel, expected):
    from grader.run import grading

    monkeypatch.setattr(grading.env, "nvidia_smi", lambda query: [str(free_mib)] if query == "memory.free" else [])
    assert grading.default_resident(parallel) == expected
    monkeypatch.setattr(grading.env, "nvidia_smi", lambda query: [])
    assert grading.default_resident(parallel) is None


def test_every_required_check_is_one_of_the_specs_checks():
    """A `requires` entry names a scored group and, as what it needs, other scored groups or checks by
    the names a grading run records: a renamed check would otherwise block nothing, silently."""
    for s in spec.select([]):
        names = {c.name for c in s.checks()} | {g for g in s.points if g != "performance"}
        for group, needed in s.requires.items():
            assert group in s.points, f"{s.exercise}: requires names the unscored group {group!r}"
            assert group not in needed, f"{s.exercise}: {group} requires itself"
            assert set(needed) <= names, f"{s.exercise}: {sorted(set(needed) - names)} are neither its checks nor its groups"


def test_every_spec_declares_its_checks_one_way():
    """One declaration (grader.verify.spec.CheckList): each check's group is its name up to `[`, every
    scored group but speed has a check, and no name is declared twice (results are keyed by name)."""
    for s in spec.select([]):
        checks = s.checks()
        assert type(checks) is spec.CheckList, f"{s.exercise}: checks() returns {type(checks).__name__}"
        names = [c.name for c in checks]
        assert len(names) == len(set(names)), f"{s.exercise}: {sorted({n for n in names if names.count(n) > 1})}"
        for c in checks:
            assert c.group == c.name.split("[", 1)[0] and c.group in s.points, (s.exercise, c.name, c.group)
        assert set(s.points) - {spec.PERFORMANCE} <= {c.group for c in checks}, s.exercise


def test_a_timing_that_saved_nothing_fails_unless_it_ran_out_of_memory(tmp_path):
    """Nothing saved by a timing that passed: its outputs went unchecked, so the groups they vouch for
    fail. By one stopped for a reason scored already (a wrong timed output, out of GPU memory): not."""
    from grader.verify import judge

    ex01 = spec.by_exercise("01")
    missing = tmp_path / "timed_outputs.pt"
    verdicts = judge.timed_verdicts(ex01, missing)
    assert verdicts and all(v.outcome == "failed" and "saved no" in v.reason for v in verdicts), verdicts
    assert judge.timed_verdicts(ex01, missing, excused=True) == []


def test_a_check_this_gpu_cannot_run_costs_nothing_through_a_real_pytest_run(tmp_path):
    """The scorer knows such a check by its reason; pytest reports a skip as "Skipped: <why>", so the
    recorder must hand over the reason itself (as a synthetic test of the scorer alone could not see)."""
    import json

    import pytest as pytest_module

    from grader.verify import scoring
    from grader.verify.results import ResultsRecorder

    (tmp_path / "test_one.py").write_text(
        "import pytest\n"
        "def test_fits():\n    pass\n"
        f"def test_huge():\n    pytest.skip({scoring.NOT_RUN_HERE!r} + 'needs 8.8 GiB of free GPU memory')\n")
    out = tmp_path / "results.json"
    pytest_module.main([str(tmp_path / "test_one.py"), "-q", "-p", "no:cacheprovider"], plugins=[ResultsRecorder(out)])
    tests = json.loads(out.read_text())["tests"]
    huge = next(TestOutcome.from_json(t) for t in tests if t["name"] == "huge")
    assert scoring.not_run_here(huge), huge


def test_a_timing_skipped_after_a_required_group_failed_is_that_loss_not_a_skip():
    """The grading process does not time an exercise whose forward already failed (the GPU turn is
    spared): the speed is lost for that reason, as if it had been timed; a timing skipped for any
    other reason (no GPU) stays "not graded here"."""
    from grader.verify.scoring import NOT_TIMED

    ex01 = spec.by_exercise("01")
    tests = [{"name": c.name, "group": c.group, "outcome": "passed", "reason": "", "properties": {}}
             for c in ex01.checks()]
    forward = next(t for t in tests if t["group"] == "forward")
    forward.update(outcome="failed", reason="relative error 0.5")
    perf = {"name": "performance", "group": "performance", "outcome": "skipped", "properties": {},
            "reason": f"{NOT_TIMED}{forward['name']} failed"}
    row = _score(ex01, tests + [perf])
    assert row.groups["performance"].state == "failed", row.groups["performance"]
    assert "speed counts only once forward passes" in row.groups["performance"].reason
    forward.update(outcome="skipped", reason="no CUDA GPU on this machine")
    perf["reason"] = "no CUDA GPU on this machine"
    assert _score(ex01, tests + [perf]).groups["performance"].state == "skipped"


@pytest.mark.parametrize("present, caps, expected", [
    (False, set(), env.DEFAULT_ARCH_LIST),      # no GPU to ask: a T4's and Hopper's own (9.0a)
    (True, {"9.0"}, env.HOPPER_ARCH_LIST),      # an H100 or H200: its wgmma and TMA built too
    (True, {"8.6"}, None), (True, {"9.0", "8.0"}, None), (True, set(), None),  # torch's own choice
])
def test_configure_builds_hopper_s_own_instructions_on_a_hopper_gpu(monkeypatch, present, caps, expected):
    monkeypatch.delenv("TORCH_CUDA_ARCH_LIST", raising=False)
    monkeypatch.setattr(env, "gpu_present", lambda: present)
    monkeypatch.setattr(env, "gpu_capabilities", lambda: caps)
    env.configure()
    assert os.environ.get("TORCH_CUDA_ARCH_LIST") == expected
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "8.0")  # a list the user set is kept
    env.configure()
    assert os.environ["TORCH_CUDA_ARCH_LIST"] == "8.0"


def test_child_processes_keep_compiled_python_in_the_build_folder(monkeypatch, tmp_path):
    """Where torch has no .pyc and PYTHONDONTWRITEBYTECODE is set (many containers) every grading process
    compiled torch from source; the children cache it under .build/pycache (written, and read by the next
    process), unless the user chose a cache of their own."""
    monkeypatch.delenv("PYTHONPYCACHEPREFIX", raising=False)
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    # where torch has its .pyc beside its sources (a pip install), nothing changes: a prefix would hide them
    monkeypatch.setattr(env, "_bytecode_beside", lambda package: True)
    env.configure()
    assert "PYTHONPYCACHEPREFIX" not in os.environ and os.environ["PYTHONDONTWRITEBYTECODE"] == "1"
    monkeypatch.setattr(env, "_bytecode_beside", lambda package: False)
    env.configure()
    assert os.environ["PYTHONPYCACHEPREFIX"] == str(env.BYTECODE_DIR) and "PYTHONDONTWRITEBYTECODE" not in os.environ
    # a child started so writes its modules' bytecode there, and the next one finds it
    prefix = tmp_path / "pycache"
    module = tmp_path / "course_pyc_probe.py"
    module.write_text("VALUE = 1\n")
    child = dict(os.environ, PYTHONPYCACHEPREFIX=str(prefix), PYTHONPATH=str(tmp_path))
    subprocess.run([sys.executable, "-c", "import course_pyc_probe"], env=child, check=True)
    assert list(prefix.rglob("course_pyc_probe*.pyc"))
    # a .pyc beside its source is used only while it matches the source (a copy that changed the mtimes not)
    import py_compile

    py_compile.compile(str(module), cfile=importlib.util.cache_from_source(str(module)))
    assert env._valid_bytecode(module)
    os.utime(module, (module.stat().st_atime, module.stat().st_mtime + 5))
    assert not env._valid_bytecode(module)
    monkeypatch.setenv("PYTHONPYCACHEPREFIX", str(tmp_path / "mine"))
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    env.configure()
    assert os.environ["PYTHONPYCACHEPREFIX"] == str(tmp_path / "mine") and os.environ["PYTHONDONTWRITEBYTECODE"] == "1"


def test_the_longest_builds_start_first(tmp_path):
    """A grade submits its builds largest sources first, so that the slowest exercise's build (and
    then its checks, the grade's critical path) does not wait behind the quick ones."""
    from grader.run import grading

    sizes = {"01_small": 10, "09_large": 5000, "05_middle": 800}
    for name, n in sizes.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "k.cu").write_text("x" * n)
        (tmp_path / name / "README.md").write_text("y" * 100000)  # not a source: not counted

    submitted = []

    class Pool:
        def submit(self, fn, d, child):
            submitted.append(d.name)
            f = grading.Future()
            f.set_result({"ok": True, "cached": True})
            return f

    grading.start_builds([tmp_path / n for n in sizes], 4, Pool(), log=lambda *a: None, longest_first=True)
    assert submitted == ["09_large", "05_middle", "01_small"]
    submitted.clear()  # a class's rounds and a mutant round keep their own order
    grading.start_builds([tmp_path / n for n in sizes], 4, Pool(), log=lambda *a: None)
    assert submitted == list(sizes)


def test_spare_processes_go_to_the_longest_exercises():
    from grader.run.grading import FIRST_GRADE_SECONDS as h200, MAX_PARTS, STARTUP_S, plan_parts

    # the H200's check seconds: the longest (09 first) shared until the slots hold no more
    plan = plan_parts(h200, 12)
    assert plan["09_conv_bn_relu_training"] >= 3 and sum(plan.values()) > len(plan)
    assert all(plan[e] == 1 for e in ("01_leaky_relu", "02_elu", "03_transpose", "04_stencil2d"))
    longest = max(h200[e] / plan[e] for e in plan)
    assert longest < max(h200.values()) / 2
    assert sum(h200[e] + STARTUP_S * plan[e] for e in plan) <= 12 * (longest + STARTUP_S)
    # ten on a card that runs ten at once: fewer spare slots, no more parts
    assert sum(plan_parts(h200, 10).values()) <= sum(plan.values())
    # a small card, two at once: the slots are full already
    assert plan_parts(h200, 2) == {e: 1 for e in h200}
    # one exercise alone: as many parts as it has work for
    assert plan_parts({"09": 107}, 12) == {"09": MAX_PARTS}
    assert plan_parts({"09": 25}, 12) == {"09": 2}  # each part at least MIN_PART_S
    # a small exercise is not split: its checks take less than a process's start-up
    assert plan_parts({"01": 8, "08": 18}, 12) == {"01": 1, "08": 1}
    assert plan_parts({}, 12) == {}


def test_check_time_is_measured_per_gpu_and_read_back(tmp_path, monkeypatch):
    """A full grade on a GPU records each exercise's check time (its processes' running time, less their
    waits and a start-up each); the next grade there plans its parts by it, an exercise never measured by
    the course's first-grade table, or by its sources' size where the table has none."""
    from types import SimpleNamespace

    from grader.run import grading
    from grader.verify.outcomes import ExerciseRow, TestOutcome

    monkeypatch.setattr(grading, "CHECK_SECONDS", tmp_path / "check-seconds.json")
    passed = (TestOutcome("forward[a]", "forward", "passed", seconds=30.0),)
    rows = [ExerciseRow("09_conv_bn_relu_training", "x", "graded", "", 1, 1, tests=passed),
            ExerciseRow("05_matmul", "y", "build failed", "", 0, 1)]
    jobs = {"09_conv_bn_relu_training": [
        SimpleNamespace(wall_s=85.0, held_s=20.0, waited_s=10.0, timed_s=5.0, after_s=0.0),
        SimpleNamespace(wall_s=40.0, held_s=2.0, waited_s=0.0, timed_s=0.0, after_s=0.0)],
            "05_matmul": [SimpleNamespace(wall_s=50.0, held_s=0.0, waited_s=0.0, timed_s=0.0, after_s=0.0)]}
    grading.record_check_seconds(rows, jobs, "GPU A, 1.0")
    (tmp_path / "99_new").mkdir()
    (tmp_path / "99_new" / "y.cu").write_text("x" * 5000)
    names = ["09_conv_bn_relu_training", "05_matmul", "99_new"]
    startup = grading.STARTUP_S
    assert grading.check_weights(tmp_path, names, "GPU A, 1.0") == {
        "09_conv_bn_relu_training": round(88.0 - 2 * startup, 1), "05_matmul": grading.FIRST_GRADE_SECONDS["05_matmul"],
        "99_new": 5000 / grading.BYTES_PER_CHECK_SECOND}
    assert grading.check_weights(tmp_path, names[:1], "GPU B, 1.0") == {
        "09_conv_bn_relu_training": grading.FIRST_GRADE_SECONDS["09_conv_bn_relu_training"]}  # another GPU
    grading.record_check_seconds([ExerciseRow("05_matmul", "y", "graded", "", 1, 1, tests=passed)], jobs, "GPU A, 1.0")
    assert grading.check_weights(tmp_path, ["05_matmul"], "GPU A, 1.0") == {"05_matmul": 50.0 - startup}
    # a grade with a failed check (a stub's, stopping early) leaves the measurement as it was
    failed = (TestOutcome("forward[a]", "forward", "failed", seconds=0.5),)
    jobs_fast = {"05_matmul": [SimpleNamespace(wall_s=9.0, held_s=0.0, waited_s=0.0, timed_s=0.0, after_s=0.0)]}
    grading.record_check_seconds([ExerciseRow("05_matmul", "y", "graded", "", 0, 1, tests=failed)], jobs_fast, "GPU A, 1.0")
    assert grading.check_weights(tmp_path, ["05_matmul"], "GPU A, 1.0") == {"05_matmul": 50.0 - startup}
    # nor does a grade that built anything (its checks ran beside compilers and processes waiting on them)
    grading.record_check_seconds([ExerciseRow("05_matmul", "y", "graded", "", 1, 1, tests=passed)], jobs_fast,
                                 "GPU A, 1.0", built=True)
    assert grading.check_weights(tmp_path, ["05_matmul"], "GPU A, 1.0") == {"05_matmul": 50.0 - startup}
    (tmp_path / "check-seconds.json").write_text("not json")  # a damaged file: the table again
    assert grading.check_weights(tmp_path, ["05_matmul"], "GPU A, 1.0") == {"05_matmul": grading.FIRST_GRADE_SECONDS["05_matmul"]}


def test_an_exercise_graded_in_parts_gives_the_row_of_one_process(monkeypatch):
    """With processes to spare, one exercise's checks run in several processes (`--shard`, each every
    n-th check, part 0 the timing; here part 0 a smaller share, `--first-share`, as where its judge's
    recordings cost it more); their results, merged, are those of one process: the same tests with
    the same outcomes (on the CPU: its CPU checks, the GPU ones skipped alike)."""
    from grader.run import grading
    from grader.run.options import GradeOptions
    from grader.specs import select

    whole = grading.grade_target(SOLUTIONS, select(["01"]), GradeOptions(seed=5, parallel=1), log=lambda *a: None)[0]
    monkeypatch.setattr(grading, "default_parallel", lambda count: min(count, 3))
    monkeypatch.setattr(grading, "MIN_PART_S", 0)  # 01 is small enough to be graded whole by default
    monkeypatch.setattr(grading, "FIRST_PART0_EXTRA", {"01_leaky_relu": 1.5})
    commands = []
    real = grading.grading_job
    monkeypatch.setattr(grading, "grading_job", lambda *a, **k: commands.append(real(*a, **k)) or commands[-1])
    seen = []
    parted = grading.grade_target(SOLUTIONS, select(["01"]), GradeOptions(seed=5), log=seen.append)[0]
    assert any("01_leaky_relu by 3" in line for line in seen), seen
    assert all(any(arg.startswith("--first-share=") for arg in job.cmd) for job in commands), [j.cmd for j in commands]
    assert sorted((t.name, t.outcome, t.reason) for t in parted.tests) == \
        sorted((t.name, t.outcome, t.reason) for t in whole.tests)
    assert (parted.status, parted.points) == (whole.status, whole.points)
    assert [l for l in parted.log.splitlines() if l.startswith("--- part")] == [
        "--- part 0 of 3 (01_leaky_relu) ---", "--- part 1 of 3 (01_leaky_relu.part1) ---",
        "--- part 2 of 3 (01_leaky_relu.part2) ---"]


def test_part_0_takes_a_smaller_share_where_it_does_more(tmp_path, monkeypatch):
    """Part 0 also records the judge's outputs: where that costs it seconds (FIRST_PART0_EXTRA, then what the
    GPU's last full grade measured), it takes fewer of the checks, so that every part ends together; the deal
    keeps every part a mix of every kind, and equal shares deal check k to part k % n."""
    from types import SimpleNamespace

    from grader.run import grading
    from grader.run.suite.conftest import deal
    from grader.verify.outcomes import ExerciseRow, TestOutcome

    share = grading.first_shares({"09": 124.3, "06": 70.0}, {"09": 8.6, "06": 0.0}, {"09": 4, "06": 3})
    assert set(share) == {"09"} and share["09"] == pytest.approx(((115.7 + 8.6) / 4 - 8.6) / 115.7)
    assert grading.first_shares({"09": 10.0}, {"09": 30.0}, {"09": 2}) == {}  # only extra: no checks to move
    assert grading.first_shares({"09": 40.0}, {"09": 30.0}, {"09": 2}) == {"09": 0.0}  # part 0 its extra alone
    assert deal(10, 3) == [k % 3 for k in range(10)] and deal(4, 1) == [0] * 4
    owners = deal(400, 4, 0.194)
    assert [owners.count(i) for i in range(4)] == [78, 108, 107, 107]
    assert all(set(owners[k:k + 16]) == {0, 1, 2, 3} for k in range(0, 400, 16))  # mixed all along

    monkeypatch.setattr(grading, "CHECK_SECONDS", tmp_path / "check-seconds.json")
    assert grading.part0_extras(["09_conv_bn_relu_training", "05_matmul"], "GPU A, 1.0") == {
        "09_conv_bn_relu_training": grading.FIRST_PART0_EXTRA["09_conv_bn_relu_training"], "05_matmul": 0.0}
    passed = (TestOutcome("forward[a]", "forward", "passed", seconds=30.0),)
    row = ExerciseRow("09_conv_bn_relu_training", "x", "graded", "", 1, 1, tests=passed)
    startup = grading.STARTUP_S
    # part 0 ran 20 s of its 0.2 share and 6 s of recordings; each other part 26.67 s: (1 - 0.2) / 3 of 100 s
    parts = [SimpleNamespace(wall_s=26.0 + startup + 3.0, held_s=3.0, waited_s=0.0, timed_s=0.0, after_s=0.0)] + \
        [SimpleNamespace(wall_s=80 / 3 + startup, held_s=0.0, waited_s=0.0, timed_s=0.0, after_s=0.0)] * 3
    grading.record_check_seconds([row], {row.exercise: parts}, "GPU A, 1.0", shares={row.exercise: 0.2})
    assert grading.part0_extras([row.exercise], "GPU A, 1.0") == {row.exercise: pytest.approx(6.0)}
    assert grading.check_weights(tmp_path, [row.exercise], "GPU A, 1.0") == {row.exercise: pytest.approx(106.0)}


def test_a_part_that_died_before_collecting_costs_the_whole_exercise(tmp_path):
    """One part's process died before it wrote its results file: its checks were never collected, so
    the merged results hold none (not the other parts' checks alone, which could pass their groups), and
    the row says why."""
    from grader.run import gate, grading
    from grader.specs import by_exercise
    from grader.verify.results import write_json_atomic

    spec = by_exercise("01_leaky_relu")
    write_json_atomic(tmp_path / "01_leaky_relu.json", {"tests": [
        {"name": "forward[float32-1]", "group": "forward", "outcome": "passed", "reason": "", "properties": {}}],
        "running": None, "tampered": []})
    jobs = [gate.Job("01_leaky_relu", [], {}, tmp_path, returncode=0, output="part 0"),
            gate.Job("01_leaky_relu.part1", [], {}, tmp_path, returncode=-11, output="Segmentation fault")]
    merged = grading.merge_parts("01_leaky_relu", jobs, tmp_path)
    row = grading.grading_row(spec, merged, tmp_path, timeout=60, seed=None)
    assert row.points == 0 and row.status == "crashed" and "SIGSEGV" in row.error, row


# --- grader.verify.guard: tensors at the edge of mapped GPU memory --------------------------------

@pytest.mark.parametrize("nbytes", [1, 2, 6, 4096, 2 << 20, (2 << 20) + 2, 5 * (2 << 20) - 3])
@pytest.mark.parametrize("where", ["end", "start"])
def test_a_tensor_at_the_memory_edge_touches_its_mapping_at_that_edge_with_unmapped_guards(nbytes, where):
    from grader.verify.guard import placement

    g = 2 << 20
    p = placement(nbytes, g, where)
    assert p["mapped"] % g == 0 and nbytes <= p["mapped"] < nbytes + g  # whole granules, the fewest
    assert p["map_at"] >= g and p["map_at"] % g == 0  # an unmapped guard before, granule-aligned
    after = p["reserve"] - (p["map_at"] + p["mapped"])
    assert after >= g and after >= nbytes and p["map_at"] >= nbytes  # and after: a tensor's length at least
    if where == "end":
        assert p["data_at"] + nbytes == p["map_at"] + p["mapped"]  # the last byte is the mapping's last
    else:
        assert p["data_at"] == p["map_at"]  # the first byte is the mapping's first
    for bad in ((0, g, where), (nbytes, 0, where), (nbytes, g, "middle")):
        with pytest.raises(ValueError):
            placement(*bad)


def test_the_driver_structs_are_laid_out_as_cuda_h_says(tmp_path):
    """ctypes' CUmemAllocationProp, CUmemLocation and CUmemAccessDesc against the toolkit's cuda.h,
    compiled here (sizes and field offsets)."""
    import ctypes
    import shutil

    from grader.verify import guard

    header = Path(os.environ.get("CUDA_HOME", "/usr/local/cuda")) / "include" / "cuda.h"
    if not header.is_file() or shutil.which("gcc") is None:
        pytest.skip("needs the CUDA toolkit's cuda.h and gcc")
    src = tmp_path / "layout.c"
    src.write_text("#include <stdio.h>\n#include <stddef.h>\n#include <cuda.h>\nint main(void) {\n"
                   '  printf("%zu %zu %zu %zu %zu %zu %zu\\n", sizeof(CUmemAllocationProp), '
                   "offsetof(CUmemAllocationProp, location), offsetof(CUmemAllocationProp, win32HandleMetaData), "
                   "offsetof(CUmemAllocationProp, allocFlags), sizeof(CUmemLocation), sizeof(CUmemAccessDesc), "
                   "offsetof(CUmemAccessDesc, flags));\n  return 0;\n}\n")
    exe = tmp_path / "layout"
    subprocess.run(["gcc", f"-I{header.parent}", str(src), "-o", str(exe)], check=True, capture_output=True)
    want = [int(v) for v in subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.split()]
    P, A = guard.CUmemAllocationProp, guard.CUmemAccessDesc
    have = [ctypes.sizeof(P), P.location.offset, P.win32HandleMetaData.offset, P.allocFlags.offset,
            ctypes.sizeof(guard.CUmemLocation), ctypes.sizeof(A), A.flags.offset]
    assert have == want


def test_at_memory_edge_leaves_cpu_and_empty_tensors_alone():
    from grader.verify.guard import at_memory_edge

    assert at_memory_edge(torch.ones(3), "end") is None
    assert at_memory_edge(torch.ones(0, 4), "start") is None
    with pytest.raises(ValueError):
        at_memory_edge(torch.ones(3), "middle")


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
def test_at_memory_edge_round_trips_values_at_the_mapping_edge(dtype):
    """On the GPU: the values, shape, dtype and requires_grad come back (odd byte counts too); for "end"
    the last byte is the mapping's last, for "start" the first is its first."""
    from grader.verify.guard import at_memory_edge, mapping_of

    for shape in [(1,), (3,), (7, 5), (2, 3, 5), (64, 65), (1, 1, 1, 1), ()]:
        for where in ("end", "start"):
            t = torch.randn(shape, device="cuda").to(dtype).requires_grad_(dtype != torch.float16)
            placed = at_memory_edge(t, where)
            assert placed.shape == t.shape and placed.dtype == t.dtype and placed.is_contiguous()
            assert placed.requires_grad == t.requires_grad and placed.is_cuda
            assert torch.equal(placed.detach(), t.detach()), (shape, where)
            lo, hi = mapping_of(placed)
            nbytes = placed.numel() * placed.element_size()
            assert (placed.data_ptr() + nbytes == hi) if where == "end" else (placed.data_ptr() == lo), (shape, where)
            assert placed.data_ptr() % placed.element_size() == 0
            if placed.requires_grad:  # a leaf of its own, as the argument was
                (placed.float() * 2).sum().backward()
                assert torch.equal(placed.grad.float(), torch.full(shape, 2.0, device="cuda"))


def test_the_memory_edge_property_is_not_run_where_the_driver_cannot_place_tensors(monkeypatch):
    """Where the driver library or its virtual memory management is missing, the property is reported
    as not run here (a grader's limit costs a submission nothing), with the reason."""
    from grader.verify import guard

    monkeypatch.setattr(guard, "_DRIVER", "libcuda.so.1: cannot open shared object file")
    assert "could not be loaded" in guard.unsupported(0)


@pytest.mark.gpu
def test_the_gpu_supports_placing_tensors_at_a_memory_edge():
    from grader.verify import guard

    assert guard.unsupported(torch.cuda.current_device()) is None


@pytest.mark.gpu
def test_at_memory_edge_leaves_the_graders_state_as_the_integrity_snapshot_took_it():
    """On the GPU: placing tensors changes no grader state the tamper check watches (a module-level
    cache filled on first use read as a submission's tampering, and cost every exercise its points)."""
    from grader.verify import guard, integrity

    snapshot = integrity.Snapshot().take()
    for where in ("end", "start"):
        del_me = guard.at_memory_edge(torch.ones(5, device="cuda"), where)
        del del_me
    assert snapshot.changed(deep=True) == []


@pytest.mark.gpu
def test_memory_the_module_holds_does_not_turn_a_large_check_off():
    """On the GPU: a module that holds all but 2 GiB of the GPU through PyTorch does not make an 8 GiB check
    "not run here" (which costs nothing): its holdings count as free, so the check runs, and fails if they
    leave it too little; the GPU's own lack of memory still skips it."""
    from grader.verify.checks import GRADER_HELD, require_free_memory

    torch.cuda.empty_cache()
    free, _ = torch.cuda.mem_get_info()
    if free < (12 << 30):
        pytest.skip("needs 12 GiB of free GPU memory")
    hog = torch.empty(free - (2 << 30), dtype=torch.uint8, device="cuda")
    try:
        require_free_memory(8 << 30, "an 8 GiB check")  # not skipped
        with pytest.raises(pytest.skip.Exception, match="not run here"):
            require_free_memory(free + GRADER_HELD + (4 << 30), "a check larger than the GPU's free memory")
    finally:
        del hog
        torch.cuda.empty_cache()


@pytest.mark.gpu
def test_at_memory_edge_frees_its_memory():
    """On the GPU: 200 placements made and dropped leave neither torch's allocator nor the device's free
    memory lower, and the driver reports no error."""
    import gc

    from grader.verify.guard import at_memory_edge

    x = torch.randn(1000, 3, device="cuda")
    torch.cuda.synchronize()
    gc.collect()
    allocated, (free, _) = torch.cuda.memory_allocated(), torch.cuda.mem_get_info()
    for k in range(200):
        y = at_memory_edge(x, "end" if k % 2 else "start")
        assert float(y.sum()) == pytest.approx(float(x.sum()), rel=1e-5)
        del y
    gc.collect()
    torch.cuda.synchronize()
    assert torch.cuda.memory_allocated() == allocated
    assert torch.cuda.mem_get_info()[0] >= free - (16 << 20)  # a granule's slack, not 200 granules


_OUTSIDE = """
import ctypes, sys, torch
from grader.verify import guard
x = guard.at_memory_edge(torch.arange(10, dtype=torch.float32, device="cuda"), sys.argv[1])
lib = guard._lib()
lib.cuMemcpyDtoH_v2.argtypes = [ctypes.c_void_p, ctypes.c_ulonglong, ctypes.c_size_t]
byte = ctypes.c_ubyte()
inside = x.data_ptr() + (39 if sys.argv[1] == "end" else 0)
outside = x.data_ptr() + (40 if sys.argv[1] == "end" else -1)
assert lib.cuMemcpyDtoH_v2(ctypes.byref(byte), inside, 1) == 0, "the edge byte itself is not readable"
print("outside:", lib.cuMemcpyDtoH_v2(ctypes.byref(byte), outside, 1), flush=True)
"""


@pytest.mark.gpu
@pytest.mark.parametrize("where", ["end", "start"])
def test_the_byte_outside_the_edge_is_not_mapped(where):
    """On the GPU, in a process of its own (an access there may lose the CUDA context): the tensor's edge
    byte is readable, the next one outside it is not (an error, or the process faults)."""
    import sys

    done = subprocess.run([sys.executable, "-c", _OUTSIDE, where], capture_output=True, text=True, cwd=env.REPO,
                          timeout=120)
    assert "the edge byte itself" not in done.stderr, done.stderr
    assert done.returncode != 0 or ("outside:" in done.stdout and "outside: 0" not in done.stdout), (done.stdout, done.stderr)


def test_the_checks_likeliest_to_fault_run_last_in_the_grading_process():
    """A fault the CUDA context does not survive costs every check after it: the grading suite collects
    the huge checks after every other check, the memory edges after them, and the timing last."""
    import sys

    from grader.verify.properties import MEMORY_EDGE

    ran = subprocess.run([sys.executable, "-m", "pytest", "grader/run/suite", "--exercise-dir",
                          str(SOLUTIONS / "04_stencil2d"), "--collect-only", "-q", "-p", "no:cacheprovider"],
                         cwd=env.REPO, capture_output=True, text=True, timeout=300)
    names = [line.split("::", 1)[1] for line in ran.stdout.splitlines() if "::" in line]
    assert names and names[-1] == "test_performance", ran.stdout[-2000:]
    kind = [2 if n.endswith(f"[{MEMORY_EDGE}]]") else 1 if "[huge" in n else 0 for n in names[:-1]]
    assert kind == sorted(kind) and {1, 2} <= set(kind), names


def test_a_lost_group_skips_its_other_checks_but_not_one_another_group_requires():
    """--skip-lost-groups (GradeOptions.skip_lost_groups, the known-wrong suite's): once a check of a group has
    failed in this process, the group's later checks are skipped (its points and its first failure's reason
    are decided), whatever other groups did; a check named by a group's `requires` still runs, since its
    outcome decides that group's points; without the option nothing is skipped."""
    from types import SimpleNamespace

    from grader.run.suite.test_exercise import _group_lost

    exercise_spec = spec.by_exercise("09_conv_bn_relu_training")
    required = next(n for needed in exercise_spec.requires.values() for n in needed if n not in exercise_spec.points)
    group = required.split("[", 1)[0]

    def lost(check_name, outcomes, on=True):
        recorder = SimpleNamespace(tests={n: TestOutcome(n, n.split("[", 1)[0], o) for n, o in outcomes.items()})
        config = SimpleNamespace(getoption=lambda name: on if name == "--skip-lost-groups" else None,
                                 pluginmanager=SimpleNamespace(get_plugin=lambda name: recorder))
        check = SimpleNamespace(name=check_name, group=check_name.split("[", 1)[0])
        return _group_lost(check, exercise_spec, SimpleNamespace(config=config))

    failed_first = {f"{group}[an earlier check]": "failed"}
    assert lost(f"{group}[a later check]", failed_first)
    assert not lost(f"{group}[a later check]", failed_first, on=False)
    assert not lost(required, failed_first)
    assert not lost(f"{group}[a later check]", {f"{group}[an earlier check]": "passed", "other[x]": "failed"})


def test_a_device_s_compute_capability_is_read_by_its_index(monkeypatch):
    """env.device_capability: the GPU a grading process is pinned to (its index), else the first visible one;
    None where nvidia-smi cannot say (here, a machine without one, its answers given)."""
    from grader import env

    monkeypatch.setattr(env, "_fixed_smi", lambda query: ["9.0", "8.6"] if query == "compute_cap" else [])
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert env.device_capability("1") == (8, 6) and env.device_capability() == (9, 0)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,0")
    assert env.device_capability() == (8, 6)
    assert env.device_capability("2") is None and env.device_capability("GPU-uuid") is None
    monkeypatch.setattr(env, "_fixed_smi", lambda query: [])
    assert env.device_capability("0") is None


def test_a_wrong_cudnn_value_names_the_kernels_of_the_same_call(monkeypatch):
    """10's accuracy checks: a wrong value's failure is the verdict, with the kernels the same call ran
    again (its plan cached) added where the watch saw any: its algorithm decides its rounding."""
    from grader.specs import ex10_cudnn_conv as ex10
    from grader.verify.checks import CheckFailure
    from grader.verify.observe import Kernel, Observation

    calls = []
    with ex10.naming_kernels(lambda: calls.append(1), "strict"):
        pass
    assert not calls  # a right value costs no second call
    seen = Observation([Kernel("winograd_nonfused_5x5_kernel(float*, int)", 7, 1e-3, 0.0)])
    monkeypatch.setattr(ex10, "observe", lambda fn, hidden=False: (fn(), seen))
    with pytest.raises(CheckFailure) as failure:
        with ex10.naming_kernels(lambda: calls.append(1), "strict"):
            raise CheckFailure("cache[backward-data: kernel size]: relative error 2e-4 exceeds 0.0001")
    assert calls == [1] and str(failure.value).endswith("exceeds 0.0001; the same call again ran winograd_nonfused_5x5_kernel")
    monkeypatch.setattr(ex10, "observe", lambda fn, hidden=False: (_ for _ in ()).throw(RuntimeError("no watch")))
    with pytest.raises(CheckFailure, match=r"exceeds 0.0001$"):
        with ex10.naming_kernels(lambda: None, "strict"):
            raise CheckFailure("cache[x]: relative error 2e-4 exceeds 0.0001")


def test_usable_cores_follow_the_affinity_not_the_machine():
    """A Slurm allocation or `taskset` gives the grader fewer cores than the machine has: the defaults
    (parallel grading processes, builds) count those it may use."""
    import subprocess
    import sys

    if not hasattr(os, "sched_getaffinity"):
        pytest.skip("no CPU affinity on this platform")
    code = "from grader import env; print(env.usable_cores())"
    out = subprocess.run(["taskset", "-c", "0", sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=Path(__file__).resolve().parents[1],
                         env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
    if out.returncode != 0 and "taskset" in out.stderr:
        pytest.skip(f"taskset failed: {out.stderr.strip()[:200]}")
    assert out.stdout.strip() == "1", out.stderr


def test_memory_kept_by_calls_past_their_warm_up_fails_them_from_a_mebibyte():
    """grader.verify.speed.memory_kept: calls at one shape, their outputs freed, that leave a mebibyte or
    more allocated keep memory per call (no cache, plan or graph needs it after the warm-up); less is
    allowed (the allocator's block rounding, a small bounded state)."""
    from grader.verify.speed import KEPT_BYTES, memory_kept

    assert memory_kept(0) is None and memory_kept(KEPT_BYTES - 512) is None
    problem = memory_kept(3 * 64 << 20)
    assert problem and "192.0 MiB" in problem and "keeps memory with every call" in problem
