"""An untouched stub compiles without a warning about the course's own code: the given helpers a
blanked region leaves unused carry [[maybe_unused]] in solutions/ (a student reading "variable
declared but never referenced" about code they did not write learns to ignore warnings)."""
from __future__ import annotations

import os

import pytest

from grader import resources
from grader.grading import build_all
from tests.grading import EXERCISES, exercise_folders, quiet

STUBS = exercise_folders(EXERCISES)


@pytest.fixture(scope="module")
def builds():
    # cached by test_builds.py in the same run (the same folders and configuration): no compile here
    return build_all(STUBS, os.cpu_count() or 2, log=quiet)


@pytest.mark.parametrize("folder", STUBS, ids=[f.name for f in STUBS])
def test_an_untouched_stub_compiles_without_warnings(builds, folder):
    assert builds[folder]["ok"], builds[folder].get("error")
    warnings = resources.exercise_report(folder)["warnings"]
    assert not warnings, f"{folder.name}: the given code warns in the stub:\n" + "\n".join(warnings)
