"""Grading a class: a gradebook with a row per student and exercise, whatever each submitted."""
from __future__ import annotations

import csv
import shutil

import pytest

from grader.classroom import grade_class
from grader.spec import select
from tests.conftest import HAS_GPU
from tests.grading import EXERCISES, SOLUTIONS
from tests.known_wrong import all_variants

UNIT1 = ["01_leaky_relu", "02_elu"]


@pytest.fixture(scope="module")
def classroom(tmp_path_factory):
    root = tmp_path_factory.mktemp("class")
    subs = root / "submissions"
    for ex in UNIT1:  # alice: the reference
        shutil.copytree(SOLUTIONS / ex, subs / "alice" / "exercises" / ex)
    shutil.copytree(SOLUTIONS / "01_leaky_relu", subs / "bob" / "exercises" / "01_leaky_relu")  # bob: half done
    shutil.copytree(EXERCISES / "02_elu", subs / "bob" / "exercises" / "02_elu")
    broken = next(v for v in all_variants() if v.name == "compile_error")  # carol: 01 does not compile
    broken.materialize(subs / "carol" / "exercises")
    shutil.copytree(SOLUTIONS / "02_elu", subs / "carol" / "exercises" / "02_elu")
    out = root / "gradebook"
    results = grade_class(subs, select(UNIT1), seed=7, out=out, timeout=600, jobs=2)
    return subs, out, results


def test_gradebook_is_complete(classroom):
    _, out, _ = classroom
    rows = list(csv.DictReader((out / "gradebook.csv").open()))
    assert {(r["student_id"], r["assignment"]) for r in rows} == {
        (s, ex) for s in ("alice", "bob", "carol") for ex in UNIT1}
    carol = next(r for r in rows if r["student_id"] == "carol" and r["assignment"] == "01_leaky_relu")
    assert carol["status"] == "build failed" and carol["score"] == "0" and "leaky_relu.cu" in carol["reasons"]
    for student in ("alice", "bob", "carol"):
        for name in ("report.json", "report.md", "report.html"):
            assert (out / student / name).exists()
    assert "build failed" in (out / "carol" / "report.html").read_text()


def test_scores_follow_the_submissions(classroom):
    _, _, results = classroom
    score = {s: {r["exercise"]: r["points"] for r in rows} for s, rows in results.items()}
    if HAS_GPU:
        assert score["alice"] == {"01_leaky_relu": 10, "02_elu": 10}
        assert score["bob"] == {"01_leaky_relu": 10, "02_elu": 0}
        assert score["carol"] == {"01_leaky_relu": 0, "02_elu": 10}
    else:  # GPU checks skipped: nothing earns points, but every row is there and graded or explained
        assert all(p == 0 for s in score.values() for p in s.values())
        stub_checks = next(r for r in results["bob"] if r["exercise"] == "02_elu")["groups"]["input_checks"]
        ref_checks = next(r for r in results["alice"] if r["exercise"] == "02_elu")["groups"]["input_checks"]
        assert stub_checks["state"] == "failed" and ref_checks["state"] == "skipped"


def test_rerun_resumes_without_regrading(classroom):
    subs, out, _ = classroom
    before = (out / "alice" / "report.json").stat().st_mtime_ns
    grade_class(subs, select(UNIT1), seed=7, out=out, timeout=600, jobs=2)
    assert (out / "alice" / "report.json").stat().st_mtime_ns == before
