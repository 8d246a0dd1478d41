"""The student tree is generated from solutions/ and must stay in sync with it."""
from pathlib import Path

import pytest

from grader import regions, stubs


def test_exercises_in_sync_with_solutions():
    problems = stubs.check()
    assert not problems, "run `make exercises`:\n" + "\n".join(problems)


def test_every_solution_has_regions_and_a_readme():
    for folder in sorted(p for p in stubs.SOLUTIONS.iterdir() if p.is_dir()):
        assert (folder / "README.md").exists(), f"{folder.name} has no README.md"
        sources = [p for p in folder.iterdir() if p.suffix in stubs.COMMENT]
        assert any("BEGIN SOLUTION" in p.read_text() for p in sources), f"{folder.name} has no student region"


def test_generated_files_say_they_are_generated():
    for path in stubs.EXERCISES.rglob("*"):
        if path.is_file() and (path.suffix in stubs.COMMENT or path.suffix == ".md"):
            assert "GENERATED from solutions/" in path.read_text().splitlines()[0], path


CPP = """int f() {
  // BEGIN SOLUTION
  // TODO: return the answer.
  // STUB: TORCH_CHECK(false, "f is not implemented yet");
  int a = 40;
  return a + 2;
  // END SOLUTION
}
"""


def test_region_keeps_markers_todo_and_stub():
    out = stubs.stub_text(CPP, ".cpp", "x.cpp")
    assert "// BEGIN SOLUTION" in out and "// END SOLUTION" in out
    assert "// TODO: return the answer." in out
    assert "about 2 lines" in out
    assert '  TORCH_CHECK(false, "f is not implemented yet");' in out
    assert "return a + 2" not in out and "STUB:" not in out


def test_python_region_raises_by_default():
    py = "def f():\n    # BEGIN SOLUTION\n    # TODO: compute.\n    return 1\n    # END SOLUTION\n"
    out = stubs.stub_text(py, ".py", "x.py")
    assert 'raise NotImplementedError("x.py: line 2 is not implemented yet")' in out
    compile(out, "x.py", "exec")


def test_text_outside_regions_is_unchanged():
    out = stubs.stub_text(CPP, ".cpp", "x.cpp")
    assert out.startswith("int f() {\n") and out.endswith("}\n")


@pytest.mark.parametrize(
    "text, message",
    [
        ("// BEGIN SOLUTION\n// TODO: a\n// BEGIN SOLUTION\n// END SOLUTION\n", "x.cu:3: nested"),
        ("// BEGIN SOLUTION\n// TODO: a\nint x;\n", "x.cu:1: BEGIN SOLUTION is never closed"),
        ("int x;\n// END SOLUTION\n", "x.cu:2: END SOLUTION without"),
        ("// BEGIN SOLUTION\nint x;\n// END SOLUTION\n", "x.cu:1: a solution region needs"),
    ],
)
def test_bad_regions_are_errors_with_line_numbers(text, message):
    with pytest.raises(stubs.RegionError, match=message):
        stubs.stub_text(text, ".cu", "x.cu")


def test_generate_fails_before_touching_anything(tmp_path):
    (tmp_path / "solutions" / "99_bad").mkdir(parents=True)
    (tmp_path / "solutions" / "99_bad" / "bad.cu").write_text("// BEGIN SOLUTION\n// TODO: x\n")
    with pytest.raises(stubs.RegionError):
        stubs.generate(tmp_path / "solutions", tmp_path / "out")


@pytest.mark.parametrize(
    "text, message",
    [
        ("int f() {\n// BEGIN SOLUTION\n// TODO: a\n// BEGIN SOLUTION\n// END SOLUTION\n}\n", "x.cu:4: nested"),
        ("int f() {\n// BEGIN SOLUTION\n// TODO: a\n}\n", "x.cu:2: BEGIN SOLUTION is never closed"),
        ("int x;\n// END SOLUTION\n", "x.cu:2: END SOLUTION without"),
    ],
)
def test_notebooks_read_regions_with_the_same_parser(text, message):
    """grader/regions.py is the one parser: the notebooks' named regions fail as the stubs do."""
    with pytest.raises(regions.RegionError, match=message):
        regions.regions_of(Path("x.cu"), text)


def test_named_regions_are_the_stubbed_ones():
    (region,) = regions.regions_of(Path("x.cpp"), CPP)
    assert region.name == "f" and region.todo == ["  // TODO: return the answer."]
    assert region.teaching_lines() == ["// TODO: return the answer.", "int a = 40;", "return a + 2;"]
