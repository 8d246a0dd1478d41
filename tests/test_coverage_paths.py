"""Planner paths on CPU: every branch marked in a solution (course::took, lib.took) is declared by its spec
(Spec.paths) with the dtypes it must be reached in, and every declared one is marked. Whether the checks
reach them is the GPU's question (tests/test_gpu_grading.py::test_declared_paths_are_reached)."""
from __future__ import annotations

import pytest

from grader.verify import paths
from tests.grading import SOLUTIONS, selected

SPECS = selected()
DTYPES = {"float32", "float64", "float16", "bfloat16"}


@pytest.mark.parametrize("spec", SPECS, ids=[s.exercise for s in SPECS])
def test_markers_and_declared_paths_agree(spec):
    marked = paths.markers(SOLUTIONS / spec.exercise)
    assert marked, f"{spec.exercise}: no course::took marker in the solution"
    undeclared = sorted(set(marked) - set(spec.paths))
    unmarked = sorted(set(spec.paths) - set(marked))
    assert not undeclared, f"{spec.exercise}: branches marked in the solution but not in its spec's paths: {undeclared}"
    assert not unmarked, f"{spec.exercise}: paths its spec declares that no marker in the solution records: {unmarked}"
    for name, dtypes in spec.paths.items():
        assert "/" not in name, f"{spec.exercise}: {name!r}: '/' separates a path from its dtype"
        assert set(dtypes) <= DTYPES, f"{spec.exercise}: {name}: unknown dtypes {sorted(set(dtypes) - DTYPES)}"
        # a marker with a dtype records name/dtype, one without records name: the declaration must say which
        if marked[name]:
            assert dtypes, f"{spec.exercise}: {name} is marked with a dtype (took<T>): declare the dtypes to reach"
        else:
            assert not dtypes, f"{spec.exercise}: {name} is marked without a dtype: declare it with ()"


def test_markers_are_read_from_code_not_comments(tmp_path):
    """The scanner's own cases: several lines, ternaries, a template argument, Python's dtype argument,
    comments skipped."""
    (tmp_path / "a.cu").write_text(
        '// course::took("in_a_comment");\n'
        'course::took<T>(kBt ? (vec ? "bt.vec" : "bt.scalar")\n'
        '                : "plain");\n'
        'if (n > 0) course::took("free");  // course::took("trailing")\n'
        'x = f("a // b");  // then a call );\n')
    (tmp_path / "a.py").write_text(
        'lib.took("py.typed" if c else "py.other", x.dtype)\n'
        'lib.took("py.free")  # why\n')
    assert paths.markers(tmp_path) == {"bt.vec": True, "bt.scalar": True, "plain": True, "free": False,
                                       "py.typed": True, "py.other": True, "py.free": False}


def test_expected_and_unreached():
    class Spec:
        paths = {"a": ("float32", "float64"), "b": ()}

    assert paths.expected(Spec) == {"a/float32", "a/float64", "b"}
    assert paths.unreached(Spec, {"a/float32", "b", "c"}) == ["a/float64"]
