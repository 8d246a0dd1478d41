"""On a GPU: solutions earn full marks, stubs earn nothing and say "not implemented", and every
known-wrong submission loses exactly the points it should, with the reason it should."""
from __future__ import annotations

import json
import os
import re
import sys
import time

import pytest

from tests.grading import (EXERCISES, SOLUTIONS, check_variant, explain, grade, grade_variants, grade_variants_timed,
                           selected)
from grader.verify import paths
from tests.known_wrong import Variant, all_variants, ledger

pytestmark = pytest.mark.gpu

CHOSEN = {s.exercise for s in selected()}
# KNOWN_WRONG=new: only the variants of the trust rework's classes (those with a "kind"); =stale: only
# those the ledger holds no current grade of (tests.known_wrong.ledger); any other value is a regular
# expression over variant ids ("09_.*/pytorch|transpose"): the module's fixtures grade every chosen
# variant at once, so -k alone would not save their time. Each variant graded as expected is entered in
# the ledger (tests/known_wrong/graded.json, or the file KNOWN_WRONG_LEDGER names).
KNOWN_WRONG = os.environ.get("KNOWN_WRONG", "")


def wanted(variant) -> bool:
    if variant.exercise not in CHOSEN:
        return False
    if KNOWN_WRONG == "new":
        return bool(variant.extra.get("kind"))
    return KNOWN_WRONG in ("", "stale") or re.search(KNOWN_WRONG, variant.id) is not None


WANTED = [v for v in all_variants() if wanted(v)]
if KNOWN_WRONG == "stale":
    WANTED = ledger.stale(WANTED)
GPU_VARIANTS = [v for v in WANTED if not v.extra.get("cpu") and not v.extra.get("timed") and not v.extra.get("huge")]
# whose fault shows only in the timed part, or in a check of more than 2^31 bytes: graded in full,
# timing and huge checks included
TIMED_VARIANTS = [v for v in WANTED if v.extra.get("timed") or v.extra.get("huge")]
# Correctness is what the known-wrong suite is about; timing each variant would take minutes.
QUICK = "not performance and not huge"


@pytest.fixture(scope="module")
def solution_paths_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("paths")


@pytest.fixture(scope="module")
def solution_rows(solution_paths_dir):
    # every grading process writes the planner paths its library took (grader/verify/paths.py)
    saved = os.environ.get(paths.ENV)
    os.environ[paths.ENV] = str(solution_paths_dir / "{exercise}.json")
    try:
        return grade(SOLUTIONS)
    finally:
        if saved is None:
            os.environ.pop(paths.ENV, None)
        else:
            os.environ[paths.ENV] = saved


def test_solutions_earn_full_marks(solution_rows):
    for row in solution_rows.values():
        assert row.points == row.max_points, explain(solution_rows)


def test_declared_paths_are_reached(solution_rows, solution_paths_dir):
    """Every branch a spec declares (Spec.paths) is taken by some call of the solution's full grade (checks,
    judge and timing: every one of them checked), in every dtype declared. Prints what was reached."""
    missing, report = {}, []
    for spec in selected():
        if spec.exercise not in solution_rows:
            continue
        found = solution_paths_dir / f"{spec.exercise}.json"
        assert found.is_file(), f"{spec.exercise}: its grading process wrote no paths ({paths.ENV})"
        taken = set(json.loads(found.read_text())["taken"])
        unreached = paths.unreached(spec, taken)
        report.append(f"{spec.exercise}: {len(paths.expected(spec)) - len(unreached)} of {len(paths.expected(spec))} "
                      f"declared paths reached" + (f"; unreached: {', '.join(unreached)}" if unreached else ""))
        undeclared = sorted(t for t in taken if t not in paths.expected(spec))
        if undeclared:
            report.append(f"{spec.exercise}: taken, not declared for that dtype: {', '.join(undeclared)}")
        if unreached:
            missing[spec.exercise] = unreached
    print("\n".join(report))
    assert not missing, "declared planner paths no checked call took:\n" + "\n".join(report)


def test_stubs_earn_nothing_and_say_not_implemented():
    rows = grade(EXERCISES, keyword="not huge")
    for row in rows.values():
        assert row.points == 0, explain(rows)
        reasons = " ".join(g.reason for g in row.groups.values())
        assert "not implemented" in reasons, explain(rows)


def entered_if_exact(ignore: frozenset = frozenset()):
    """What to do with each variant's row as it arrives: enter the variant in the ledger when it lost
    exactly its groups (its test reports it otherwise), so that a run cut short by a lent machine's time
    limit keeps every grade it finished."""
    def enter(variant, row) -> None:
        try:
            check_variant(variant, row, ignore=ignore)
        except AssertionError as e:
            # said now, with the row's reasons (its test says it once every variant is graded, which a
            # cut-short run never reaches)
            first, *rest = str(e).splitlines() or [""]
            detail = "".join(f"\n    {line[:300]}" for line in rest[:30])
            print(f"known-wrong {variant.id}: NOT as expected: {first[:300]}{detail}", file=sys.stderr, flush=True)
            return
        ledger.record(variant)
        print(f"known-wrong {variant.id}: as expected (entered)", file=sys.stderr, flush=True)
    return enter


@pytest.fixture(scope="module")
def variant_rows():
    return grade_variants(GPU_VARIANTS, keyword=QUICK, on_row=entered_if_exact(frozenset({"performance"})))


@pytest.mark.parametrize("variant", GPU_VARIANTS, ids=[v.id for v in GPU_VARIANTS])
def test_known_wrong_loses_exactly_its_points(variant_rows, variant):
    check_variant(variant, variant_rows[variant.id], ignore={"performance"})


@pytest.fixture(scope="module")
def timed_variant_rows():
    return grade_variants_timed(TIMED_VARIANTS, on_row=entered_if_exact())


@pytest.mark.parametrize("variant", TIMED_VARIANTS, ids=[v.id for v in TIMED_VARIANTS])
def test_known_wrong_timed_loses_exactly_its_points(timed_variant_rows, variant):
    check_variant(variant, timed_variant_rows[variant.id])


def test_a_hanging_kernel_costs_its_exercise_alone_at_the_stall_limit(tmp_path):
    """01 whose grid-stride loops never advance (kernels that never end), graded beside 02: 01's grading
    process is stopped once no check has started or ended for `stall` seconds of its own time, long
    before the exercise's time limit; the check it was running fails saying so, and 02 keeps every
    point it earns alone."""
    import shutil

    hangs = Variant("01_leaky_relu", "never_advances", "the grid-stride loops add 0 to i",
                    {"leaky_relu.cu": [("i < n_vec; i += stride)", "i < n_vec; i += 0 * stride)")]},
                    loses={"forward", "backward", "autograd", "performance"})
    target = tmp_path / "class"
    hangs.materialize(target)
    shutil.copytree(SOLUTIONS / "02_elu", target / "02_elu", ignore=shutil.ignore_patterns("__pycache__"))
    stall, began = 20.0, time.monotonic()
    rows = grade(target, ["01", "02"], keyword=QUICK, parallel=2, stall=stall, timeout=600)
    hung = rows["01_leaky_relu"]
    reasons = " ".join(g.reason for g in hung.groups.values())
    assert hung.groups["forward"].points == 0 and f"a check ran {stall:g} s without ending" in reasons, explain(rows)
    assert time.monotonic() - began < 300, "the hang was stopped by the time limit, not the stall limit"
    elu = rows["02_elu"]
    assert all(g.points == g.max for name, g in elu.groups.items() if name != "performance"), explain(rows)


def test_an_op_that_keeps_what_it_allocates_costs_its_exercise_alone(tmp_path):
    """01 whose op keeps every output and 256 MiB more in a module list (a cache that only grows), graded
    beside 02: 01's process is held to its share of the GPU (grader.run.gate.MEMORY_CAP_GIB), so its own
    checks run out of memory once it has kept that much, and 02, beside it, keeps every point it earns
    alone; on a large GPU without the share 01 would take most of the card before its checks end."""
    import shutil

    keeps = Variant("01_leaky_relu", "keeps_what_it_allocates", "every call keeps its output and 256 MiB more",
                    {"leaky_relu.py": [("lib = load_library(__file__)\n", "lib = load_library(__file__)\n_kept = []\n"),
                                       ("    return lib.ops.leaky_relu(x, float(negative_slope))\n",
                                        "    _kept.append(torch.empty(1 << 26, device=x.device))\n"
                                        "    _kept.append(lib.ops.leaky_relu(x, float(negative_slope)))\n"
                                        "    return _kept[-1]\n")]},
                    loses={"forward"})
    target = tmp_path / "class"
    keeps.materialize(target)
    shutil.copytree(SOLUTIONS / "02_elu", target / "02_elu", ignore=shutil.ignore_patterns("__pycache__"))
    rows = grade(target, ["01", "02"], keyword=QUICK, parallel=2, timeout=900)
    reasons = " ".join(g.reason for g in rows["01_leaky_relu"].groups.values()).lower()
    assert "out of memory" in reasons, explain(rows)
    elu = rows["02_elu"]
    assert all(g.points == g.max for name, g in elu.groups.items() if name != "performance"), explain(rows)


SANITIZE_VARIANTS = [v for v in all_variants() if v.extra.get("sanitize") and wanted(v)]


@pytest.mark.parametrize("variant", SANITIZE_VARIANTS, ids=[v.id for v in SANITIZE_VARIANTS])
def test_sanitize_mode_catches_a_planted_out_of_bounds_write(tmp_path, variant):
    """`make grade SANITIZE=1`: the reference is clean under memcheck; a write past the end that
    leaves every answer right is reported by name."""
    variant.materialize(tmp_path / "planted")
    rows = grade(tmp_path / "planted", [variant.exercise], sanitize=True, timeout=1800)
    row = rows[variant.exercise]
    assert row.status == "memory errors", explain(rows)
    assert "Invalid __global__ write" in row.error, row.error
    clean = grade(SOLUTIONS, [variant.exercise], sanitize=True, timeout=1800)[variant.exercise]
    assert clean.status == "graded", explain([clean])


RACECHECK_VARIANTS = [v for v in all_variants() if v.extra.get("racecheck") and wanted(v)]


@pytest.mark.parametrize("variant", RACECHECK_VARIANTS, ids=[v.id for v in RACECHECK_VARIANTS])
def test_racecheck_mode_catches_a_planted_race(tmp_path, variant):
    """`make grade RACECHECK=1`: the reference is clean under racecheck; a missing barrier whose race
    rarely shows in the values is reported."""
    variant.materialize(tmp_path / "planted")
    rows = grade(tmp_path / "planted", [variant.exercise], sanitize="racecheck", timeout=1800)
    row = rows[variant.exercise]
    assert row.status == "shared memory races", explain(rows)
    assert "Race reported" in row.error, row.error
    clean = grade(SOLUTIONS, [variant.exercise], sanitize="racecheck", timeout=1800)
    assert clean[variant.exercise].status == "graded", explain(clean)
    assert not any(g.state == "failed" for g in clean[variant.exercise].groups.values()), explain(clean)
