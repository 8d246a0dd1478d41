"""The known-wrong ledger (tests/known_wrong/ledger.py): a variant's digest moves with everything its
grade depended on and with nothing else, and a recorded grade stays current until then."""
from __future__ import annotations

import dataclasses
import shutil

import pytest

from tests.known_wrong import all_variants, ledger


@pytest.fixture
def grader_copy(tmp_path, monkeypatch):
    """The digests computed over a copy of grader/ that a test may edit."""
    copy = tmp_path / "grader"
    shutil.copytree(ledger.GRADER, copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(ledger, "GRADER", copy)
    ledger._grader_digest.cache_clear()
    yield copy
    ledger._grader_digest.cache_clear()


def first(prefix: str):
    return next(v for v in all_variants() if v.exercise.startswith(prefix) and not v.extra.get("cpu"))


def test_each_variant_has_its_own_digest_and_keeps_it():
    variants = [v for v in all_variants() if not v.extra.get("cpu")]
    digests = [ledger.digest(v) for v in variants]
    assert len(set(digests)) == len(variants), "two variants share a digest"
    assert digests == [ledger.digest(v) for v in variants]


def test_the_declaration_is_part_of_the_digest():
    v = first("09")
    for change in ({"loses": v.loses | {"input_checks"}}, {"reason": v.reason + "!"}, {"status": "crashed"},
                   {"keeps": {"input_checks"}}, {"partial": {"running_stats"}}):
        assert ledger.digest(dataclasses.replace(v, **change)) != ledger.digest(v), change


def test_a_grading_file_makes_every_exercise_stale_and_a_wing_that_grades_nothing_none(grader_copy):
    v01, v09 = first("01"), first("09")
    before = ledger.digest(v01), ledger.digest(v09)
    with open(grader_copy / "authoring" / "stubs.py", "a") as f:
        f.write("\n# not read by a grade\n")
    ledger._grader_digest.cache_clear()
    assert (ledger.digest(v01), ledger.digest(v09)) == before
    checks = grader_copy / "verify" / "checks.py"
    with open(checks, "a") as f:
        f.write("\n# a comment in a module every grade reads\n")
    text = checks.read_text()
    edited = text.replace('"""Whether an error message says the CUDA context is gone', '"""Whether it says so')
    assert edited != text, "the docstring this test edits has moved"
    checks.write_text(edited)
    ledger._grader_digest.cache_clear()
    assert (ledger.digest(v01), ledger.digest(v09)) == before, "a comment or a docstring changes no grade"
    with open(checks, "a") as f:
        f.write("\nREAD_BY_EVERY_GRADE = 1\n")
    ledger._grader_digest.cache_clear()
    assert ledger.digest(v01) != before[0] and ledger.digest(v09) != before[1]


def test_an_exercise_spec_reaches_its_exercise_and_those_that_import_it(grader_copy):
    v05, v06, v09 = first("05"), first("06"), first("09")
    before = [ledger.digest(v) for v in (v05, v06, v09)]
    with open(next((grader_copy / "specs").glob("ex06_*.py")), "a") as f:
        f.write("\n_09_SPEC_IMPORTS_06S = 1\n")
    ledger._grader_digest.cache_clear()
    after = [ledger.digest(v) for v in (v05, v06, v09)]
    assert after[0] == before[0] and after[1] != before[1] and after[2] != before[2]


def test_a_recorded_grade_is_current_until_its_variant_changes(tmp_path, monkeypatch):
    monkeypatch.setenv(ledger.LEDGER_ENV, str(tmp_path / "graded.json"))
    v, w = first("02"), [x for x in all_variants() if x.exercise.startswith("02")][1]
    assert ledger.stale([v, w]) == [v, w]
    ledger.record(v, device="a test's GPU")
    assert ledger.stale([v, w]) == [w]
    assert ledger.read()[v.id]["device"] == "a test's GPU"
    file = next(iter(v.edits))
    changed = dataclasses.replace(v, edits={**v.edits, file: v.edits[file] + [
        ("\n", "\n\n", v.texts()[file].count("\n"))]})
    assert ledger.stale([changed]) == [changed]


def test_the_code_digest_reads_the_same_on_every_python(tmp_path):
    """The GPU machines run another Python than CI: the fields a version adds empty (3.12's `type_params`)
    or leaves None must not reach the digest, so the code's dump is pinned here."""
    path = tmp_path / "probe.py"
    path.write_bytes(b'"""doc"""\ndef f(a, b=1):\n    """doc"""\n    return a + b\n')
    assert ledger._code(path).decode() == (
        "Module(body=[FunctionDef(name='f', args=arguments(args=[arg(arg='a'), arg(arg='b')], "
        "defaults=[Constant(value=1)]), body=[Return(value=BinOp(left=Name(id='a', ctx=Load()), op=Add(), "
        "right=Name(id='b', ctx=Load())))])])")
