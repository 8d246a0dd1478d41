"""The typed results (grader.verify.outcomes) write the files the grader has always written: a results
file's tests, report.json's rows and gradebook.json's read back and written again are the same bytes,
key order included (the gradebook, nbgrader's feedback and scripts/compare_grades.py read them)."""
from __future__ import annotations

import json

import pytest

from grader import specs as spec
from grader.classroom.gradebook import failed_rows
from grader.verify.outcomes import OUTCOMES, ExerciseRow, GroupScore, TestOutcome
from grader.verify.results import ResultsRecorder
from grader.verify.scoring import NOT_RUN_HERE, score_exercise

LEAKY = spec.by_exercise("01")

# Rows as report.json held them before the types (shapes taken from a grade of 01 and trimmed): a
# graded row on a GPU (timed, a check this GPU could not run), one without a GPU, a build failure, a
# process that timed out before its first test, and a student the grader failed on (no "performance").
ROWS = [
    '{"exercise": "01_leaky_relu", "title": "LeakyReLU(negative_slope)", "status": "graded", "error": "", '
    '"points": 9.5, "max_points": 10, "groups": {"forward": {"points": 4.0, "max": 4, "state": "passed", '
    '"reason": "", "passed": 2, "total": 2}, "performance": {"points": 1.5, "max": 2, "state": "partial", '
    '"reason": "0.93x of the reference earns 75%", "passed": 1, "total": 1}}, "tests": [{"name": "forward[float32-1]", '
    '"group": "forward", "outcome": "passed", "reason": "", "properties": {}, "huge": false, "seconds": 0.012, '
    '"gpu_peak_mib": 22}, {"name": "forward[huge]", "group": "forward", "outcome": "skipped", "reason": '
    f'"{NOT_RUN_HERE}the check needs 8.6 GiB of free GPU memory", "properties": {{}}, "huge": true, "seconds": 0.001}}, '
    '{"name": "performance", "group": "performance", "outcome": "passed", "reason": "", "properties": '
    '{"performance": {"rate": 2900000000000.0, "unit": "B", "reference_rate": 3100000000000.0, "ratio": 0.93}}, "seconds": 1.5, '
    '"gpu_peak_mib": 410}, {"name": "judge: leaky_relu", "group": "forward", "outcome": "passed", "reason": "", '
    '"properties": {}}], "performance": {"rate": 2900000000000.0, "unit": "B", "reference_rate": 3100000000000.0, "ratio": 0.93}, '
    '"not_run": ["forward[huge]: the check needs 8.6 GiB of free GPU memory"], "passed": 3, "total_tests": 4, '
    '"log": "4 passed in 3.2s\\n", "build": {"cached": true, "wall_s": 0.0}, "resources": {"kernels": [], "arch": "sm_90a"}}',
    '{"exercise": "01_leaky_relu", "title": "LeakyReLU(negative_slope)", "status": "graded", "error": "", '
    '"points": 0.0, "max_points": 10, "groups": {"forward": {"points": 0.0, "max": 4, "state": "skipped", '
    '"reason": "forward[float32-1]: no CUDA GPU on this machine: GPU checks skipped", "passed": 0, "total": 61}}, '
    '"tests": [{"name": "input_checks[cpu tensor]", "group": "input_checks", "outcome": "passed", "reason": "", '
    '"properties": {}, "huge": false, "seconds": 0.001}, {"name": "forward[float32-1]", "group": "forward", '
    '"outcome": "skipped", "reason": "no CUDA GPU on this machine: GPU checks skipped", "properties": {}, '
    '"huge": false, "seconds": 17.014}], "performance": null, "not_run": [], "passed": 1, "total_tests": 102, '
    '"log": " durations.)\\n1 passed, 101 skipped, 14 deselected in 17.45s\\n", "build": {"cached": false, '
    '"wall_s": 17.7}, "resources": {"kernels": [], "arch": "sm_90a"}}',
    '{"exercise": "01_leaky_relu", "title": "LeakyReLU(negative_slope)", "status": "build failed", "error": '
    '"leaky_relu.cu(97): error", "points": 0.0, "max_points": 10, "groups": {"forward": {"points": 0.0, "max": 4, '
    '"state": "build failed", "reason": "leaky_relu.cu(97): error"}}, "tests": [], "performance": null, '
    '"build": {"cached": false, "wall_s": 12.5}}',
    '{"exercise": "01_leaky_relu", "title": "LeakyReLU(negative_slope)", "status": "timed out", "error": '
    '"grading took longer than 600 s", "points": 0.0, "max_points": 10, "groups": {"forward": {"points": 0.0, '
    '"max": 4, "state": "timed out", "reason": "grading took longer than 600 s"}}, "tests": [], '
    '"performance": null, "log": "", "build": {"cached": true, "wall_s": 0.0}, "resources": {"error": "x"}}',
    '{"exercise": "01_leaky_relu", "title": "LeakyReLU(negative_slope)", "status": "grader error", "error": '
    '"RuntimeError()", "points": 0.0, "max_points": 10, "groups": {}, "tests": []}',
]


@pytest.mark.parametrize("text", ROWS, ids=["gpu", "no gpu", "build failed", "timed out", "grader error"])
def test_a_row_read_and_written_again_is_the_same_bytes(text):
    row = ExerciseRow.from_json(json.loads(text))
    assert json.dumps(row.to_json()) == text
    assert isinstance(row.groups["forward"] if row.groups else GroupScore(0, 0, ""), GroupScore)
    assert all(isinstance(t, TestOutcome) for t in row.tests)


def test_the_scorer_writes_the_rows_of_before():
    """score_exercise's rows, written, have the keys the rows had before the types, in that order."""
    tests = [TestOutcome.from_json(t) for t in json.loads(ROWS[0])["tests"]]
    graded = score_exercise(LEAKY, tests).to_json()
    assert list(graded) == ["exercise", "title", "status", "error", "points", "max_points", "groups", "tests",
                            "performance", "not_run", "passed", "total_tests"]
    assert [list(g) for g in graded["groups"].values()] == [["points", "max", "state", "reason", "passed", "total"]] * 5
    assert graded["tests"] == json.loads(ROWS[0])["tests"]
    failed = score_exercise(LEAKY, [], "build failed", "leaky_relu.cu(97): error").to_json()
    assert list(failed) == ["exercise", "title", "status", "error", "points", "max_points", "groups", "tests",
                            "performance"]
    assert [list(g) for g in failed["groups"].values()] == [["points", "max", "state", "reason"]] * 5
    (error,) = failed_rows([LEAKY], "RuntimeError()")
    assert json.dumps(error.to_json()) == ROWS[-1]


def test_keys_of_another_version_are_kept():
    text = '{"name": "a", "group": "g", "outcome": "passed", "reason": "", "properties": {}, "new_key": 1}'
    assert json.dumps(TestOutcome.from_json(json.loads(text)).to_json()) == text


def test_an_unknown_outcome_is_refused():
    with pytest.raises(ValueError, match="'pass'"):
        TestOutcome.from_json({"name": "a", "group": "g", "outcome": "pass", "reason": "", "properties": {}})
    with pytest.raises(ValueError, match="not 'PASSED'"):
        TestOutcome("a", "g", "PASSED")
    assert OUTCOMES == ("passed", "failed", "skipped", "not run")


CHECKS = '''
import collections
import pytest

Check = collections.namedtuple("Check", "name group huge")

@pytest.mark.parametrize("check", [Check("ok", "forward", False), Check("bad", "forward", False),
                                   Check("big", "forward", True)], ids=lambda c: c.name)
def test_check(check, record_property):
    record_property("seen", check.name)
    if check.name == "bad":
        assert 1 == 2, "wrong values"
    if check.huge:
        pytest.skip("not run here: too little memory")

def test_performance(record_property):
    record_property("performance", {"rate": 1.0, "unit": "B"})
'''


def test_a_results_file_read_and_written_again_is_the_same_bytes(tmp_path):
    """Every test a real pytest run records (passed, failed, skipped, a property, a huge check, the
    timing), read back and written again: the same bytes as the recorder wrote."""
    (tmp_path / "test_recorded_shapes.py").write_text(CHECKS)
    out = tmp_path / "results.json"
    pytest.main([str(tmp_path / "test_recorded_shapes.py"), "-q", "-p", "no:cacheprovider"], plugins=[ResultsRecorder(out)])
    written = json.loads(out.read_text())["tests"]
    assert {t["name"]: t["outcome"] for t in written} == {"ok": "passed", "bad": "failed", "big": "skipped",
                                                          "performance": "passed"}
    for t in written:
        assert json.dumps(TestOutcome.from_json(t).to_json(), default=str) == json.dumps(t, default=str)
    huge = TestOutcome.from_json(written[2])
    assert huge.huge is True and huge.reason == "not run here: too little memory" and huge.properties == {"seen": "big"}
