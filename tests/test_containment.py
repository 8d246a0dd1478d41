"""A crash, a hang or tampering in one exercise costs that exercise only: shown with real
extensions that segfault and spin on the host, and a module that patches the grader, so it runs on
CPU machines too. The two exercises are graded at once (`--parallel 2`, through grader.run.gate), the
way `make grade` grades a target."""
from __future__ import annotations

import pytest

from tests.grading import SOLUTIONS, check_variant, explain, grade
from grader.verify.judge import JUDGE_PREFIX
from tests.known_wrong import Variant, all_variants

CPU_CRASHES = [v for v in all_variants() if v.extra.get("cpu")]
# a hang costs its exercise this long; the healthy neighbour takes about 15 s on 2 cores alone, longer
# beside the crashing exercise's fresh images and CI's other test worker
TIMEOUT = 60
# and a check that runs this long with no other starting (the hang's), sooner: the neighbour's longest
# check takes about a second here alone, but one of its checks ran past 10 s of its process's own time on
# CI's loaded 2 cores (twice, 2026-11-30: its stall limit, then 10 s, stopped it)
STALL = 25


@pytest.fixture(scope="module")
def neighbour():
    """A healthy neighbour, linked in by every test: the reference itself, whose build is the one
    tests/test_builds.py made (a build is cached per folder, so a copy elsewhere would compile again)."""
    return SOLUTIONS / "02_elu"


@pytest.mark.parametrize("variant", CPU_CRASHES, ids=[v.name for v in CPU_CRASHES])
def test_crash_costs_only_its_exercise(tmp_path, variant, neighbour):
    variant.materialize(tmp_path)
    (tmp_path / "02_elu").symlink_to(neighbour)
    rows = grade(tmp_path, ["01", "02"], timeout=TIMEOUT, parallel=2, stall=STALL)
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


def test_a_lost_cuda_context_costs_the_faulted_check_alone(tmp_path):
    """A kernel fault leaves the CUDA context unusable: the grading process goes on with the checks left in a
    fresh process (grader/run/suite/resume.py), so a fault costs its own check's group, not every check after
    it. The fault is simulated on the host (check_input raises CUDA's illegal-address message in the process's
    first image only), so this runs on a CPU machine too: there the faulted check is the CPU-tensor input check;
    on a GPU, the judge's first call."""
    fault = ('  if (std::getenv("COURSE_RESUMED_AFTER") == nullptr)\n'
             '    TORCH_CHECK(false, "CUDA error: an illegal memory access was encountered (simulated)");\n'
             '  course::check_cuda(t, name);\n')
    variant = Variant("01_leaky_relu", "fault_in_the_first_image", "check_input raises a lost context's message once",
                      {"leaky_relu.cpp": [("  course::check_cuda(t, name);\n", fault)]}, loses=set())
    variant.materialize(tmp_path)
    row = grade(tmp_path, ["01"], timeout=120)["01_leaky_relu"]
    assert row.status == "graded", explain([row])
    assert "going on in a fresh process (1 of at most" in (row.log or ""), row.log
    failed = [t for t in row.tests if t.outcome == "failed"]
    assert len(failed) <= 1 and all("illegal memory access" in t.reason for t in failed), explain([row])
    # a check's fault is marked as one the process went on after (the judge then excuses no missing answer)
    assert all(t.extra.get("resumed") for t in failed if not t.name.startswith(JUDGE_PREFIX)), failed
    assert not any("not run: a kernel faulted" in (t.reason or "") for t in row.tests), explain([row])
    names = [t.name for t in row.tests]
    assert len(names) == len(set(names)), sorted({n for n in names if names.count(n) > 1})
    assert not any(t.outcome == "not run" for t in row.tests), explain([row])
