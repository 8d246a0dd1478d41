"""An untouched stub compiles without a warning about the course's own code, at every level (a
student reading "declared but never referenced" about code they did not write learns to ignore
warnings). The stub generator marks [[maybe_unused]] the given declarations that only the blanked
code used (grader/authoring/stubs.py, mark_unused); what its rule cannot see carries the attribute in solutions/.

- steps: exercises/ itself (built by test_builds.py in the same run: no compile here);
- goal: the same graded code as steps (checked below, file by file), so the same warnings;
- open: every exercise whose open stubs' code differs from its steps stubs' (the ones with OPEN
  regions, 05 to 10) is built from .build/level-open/exercises/, the tree test_hint_levels.py builds
  one of; the others have the steps code. On CI's 2 cores the five more builds take about 4 minutes
  (cached by source hash afterwards).
"""
from __future__ import annotations

from pathlib import Path

import pytest

from grader.run import resources
from grader.authoring import stubs
from grader.run.grading import build_all
from tests.grading import EXERCISES, JOBS, SOLUTIONS, exercise_folders, level_tree, quiet

STUBS = exercise_folders(EXERCISES)


def _code(text: str, suffix: str) -> list[str]:
    """What the compiler sees of a source: its lines without the whole-line comments."""
    prefix = stubs.COMMENT[suffix]
    return [l for l in text.splitlines() if not l.strip().startswith(prefix)]


def _same_code_as_steps(folder: Path, level: str) -> bool:
    """Whether every source of a solutions/ exercise compiles to the same stub at `level` as at steps."""
    for src in (p for p in folder.iterdir() if p.suffix in stubs.COMMENT):
        text = src.read_text()
        at = lambda lv: _code(stubs.stub_text(text, src.suffix, src.name, lv), src.suffix)  # noqa: E731
        if at(level) != at("steps"):
            return False
    return True


OPEN_BUILT = [f.name for f in exercise_folders(SOLUTIONS) if not _same_code_as_steps(f, "open")]


@pytest.fixture(scope="module")
def steps_builds():
    # cached by test_builds.py in the same run (the same folders and configuration): no compile here
    return build_all(STUBS, JOBS, log=quiet)


@pytest.fixture(scope="module")
def open_builds():
    root = level_tree("open")
    return {name: result for name, result in
            ((f.name, r) for f, r in build_all([root / n for n in OPEN_BUILT], JOBS, log=quiet).items())}, root


def _no_warnings(result: dict, folder: Path, level: str) -> None:
    assert result["ok"], result.get("error")
    warnings = resources.exercise_report(folder)["warnings"]
    assert not warnings, f"{folder.name} ({level}): the given code warns in the stub:\n" + "\n".join(warnings)


@pytest.mark.parametrize("folder", STUBS, ids=[f.name for f in STUBS])
def test_an_untouched_stub_compiles_without_warnings(steps_builds, folder):
    _no_warnings(steps_builds[folder], folder, "steps")


@pytest.mark.parametrize("folder", exercise_folders(SOLUTIONS), ids=lambda f: f.name)
def test_goal_stubs_compile_as_the_steps_stubs(folder):
    assert _same_code_as_steps(folder, "goal"), f"{folder.name}: the goal level's code differs from steps'"


@pytest.mark.parametrize("name", OPEN_BUILT)
def test_an_untouched_open_level_stub_compiles_without_warnings(open_builds, name):
    results, root = open_builds
    _no_warnings(results[name], root / name, "open")
