"""A crash, a hang or tampering in one exercise costs that exercise only: shown with real
extensions that segfault and spin on the host, and a module that patches the grader, so it runs on
CPU machines too. The two exercises are graded at once (`--parallel 2`, through grader.run.gate), the
way `make grade` grades a target."""
from __future__ import annotations

import pytest

from tests.grading import SOLUTIONS, check_variant, explain, grade
from tests.known_wrong import all_variants

CPU_CRASHES = [v for v in all_variants() if v.extra.get("cpu")]
# a hang costs its exercise this long; the healthy neighbour takes about 15 s on 2 cores
TIMEOUT = 30


@pytest.fixture(scope="module")
def neighbour():
    """A healthy neighbour, linked in by every test: the reference itself, whose build is the one
    tests/test_builds.py made (a build is cached per folder, so a copy elsewhere would compile again)."""
    return SOLUTIONS / "02_elu"


@pytest.mark.parametrize("variant", CPU_CRASHES, ids=[v.name for v in CPU_CRASHES])
def test_crash_costs_only_its_exercise(tmp_path, variant, neighbour):
    variant.materialize(tmp_path)
    (tmp_path / "02_elu").symlink_to(neighbour)
    rows = grade(tmp_path, ["01", "02"], timeout=TIMEOUT, parallel=2)
    check_variant(variant, rows["01_leaky_relu"])
    healthy = rows["02_elu"]
    assert healthy.status == "graded", explain(rows)
    assert all(t.outcome in ("passed", "skipped") for t in healthy.tests), explain(rows)


def test_a_failed_build_costs_only_its_exercise(tmp_path, neighbour):
    """Grading starts beside the builds; a folder that does not compile is still reported as such,
    with the compiler's file and line, while its neighbour is graded."""
    variant = next(v for v in all_variants() if v.name == "compile_error")
    variant.materialize(tmp_path)
    (tmp_path / "02_elu").symlink_to(neighbour)
    rows = grade(tmp_path, ["01", "02"], timeout=TIMEOUT, parallel=2)
    failed = rows["01_leaky_relu"]
    assert failed.status == "build failed" and failed.points == 0, explain(rows)
    assert "leaky_relu.cu" in failed.error.splitlines()[0] and "error" in failed.error, failed.error
    neighbour = rows["02_elu"]
    assert neighbour.status == "graded", explain(rows)
    assert any(t.outcome == "passed" for t in neighbour.tests), explain(rows)
