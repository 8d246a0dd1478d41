"""The known-wrong suite's reusable slots (tests/grading.py): every variant graded once, in a slot that
holds exactly its files, and a slot's next build recompiling only what changed, even after a build
that failed."""
from __future__ import annotations

import re
import subprocess
import sys
import threading
import time
from concurrent.futures import Future
from pathlib import Path

import pytest

from grader import env
from grader.run.grading import build_all
from grader.toolchain.build import write_slot
from grader.toolchain import build
from tests import grading
from tests.known_wrong import all_variants

VARIANTS = [v for v in all_variants() if not v.extra.get("cpu") and not v.extra.get("timed") and not v.extra.get("huge")]


def expected_files(v) -> dict[str, bytes]:
    texts = v.texts()
    return {p.name: texts[p.name].encode() if p.name in texts else p.read_bytes()
            for p in v.source.iterdir() if p.is_file()}


def held_files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file() and p.name != ".course-build.lock"}


@pytest.mark.parametrize("lanes", [1, 2, 16, 64])
def test_the_plan_gives_every_variant_to_one_exercise_with_its_own_slots(lanes):
    plan = grading.slot_plan(VARIANTS, lanes, Path("/slots"))
    dealt = [v.id for _, vs in plan for v in vs]
    assert sorted(dealt) == sorted(v.id for v in VARIANTS) and len(set(dealt)) == len(dealt)
    folders = [f for fs, _ in plan for f in fs]
    assert len(set(folders)) == len(folders)
    for fs, vs in plan:
        assert 1 <= len(fs) <= len(vs) and {v.exercise for v in vs} == {f.name for f in fs}
    assert len(folders) <= lanes + len(plan)  # each exercise's share rounded, at least one


def test_slots_grade_each_variant_alone_with_its_own_files(tmp_path, monkeypatch):
    """grade_in_slots (its builds stubbed out): each grading sees its variant's files exactly, and no
    slot is written while one of its variants is being graded."""
    from grader.run import grading as run_grading

    def no_build(dirs, jobs, pool, log=print):
        done: Future = Future()
        done.set_result({"ok": True})
        return {d: done for d in dirs}

    monkeypatch.setattr(run_grading, "start_builds", no_build)
    busy, lock, seen = set(), threading.Lock(), []
    chosen = [v for v in VARIANTS if v.exercise[:2] in ("01", "03", "05")]

    def one(v, target, device):
        folder = target / v.exercise
        with lock:
            assert folder not in busy
            busy.add(folder)
        try:
            assert held_files(folder) == expected_files(v), v.id
            time.sleep(0.001)
            assert held_files(folder) == expected_files(v), v.id
        finally:
            with lock:
                busy.discard(folder)
        seen.append(v.id)
        return {"id": v.id, "slot": str(folder)}

    rows = grading.grade_in_slots(chosen, one, lanes=4, root=tmp_path)
    assert sorted(seen) == sorted(v.id for v in chosen)
    assert {k: r["id"] for k, r in rows.items()} == {v.id: v.id for v in chosen}


def test_slots_are_dealt_over_every_gpu_each_slot_on_one(tmp_path, monkeypatch):
    """On a machine of several GPUs the slots are dealt over all of them: every GPU grades, a slot's
    variants all go to its one GPU, and each variant is graded once."""
    from grader.run import grading as run_grading

    def no_build(dirs, jobs, pool, log=print):
        done: Future = Future()
        done.set_result({"ok": True})
        return {d: done for d in dirs}

    monkeypatch.setattr(run_grading, "start_builds", no_build)
    lock, by_slot, graded = threading.Lock(), {}, []
    chosen = [v for v in VARIANTS if v.exercise[:2] in ("01", "03", "05")]

    def one(v, target, device):
        with lock:
            by_slot.setdefault(str(target / v.exercise), set()).add(device)
            graded.append(v.id)
        return v.id

    grading.grade_in_slots(chosen, one, lanes=12, root=tmp_path, devices=["0", "1", "2"])
    assert sorted(graded) == sorted(v.id for v in chosen)
    assert all(len(d) == 1 for d in by_slot.values()), by_slot
    assert set().union(*by_slot.values()) == {"0", "1", "2"}
    # 05's many variants have several slots: they go to more than one GPU
    assert len({d for slot, ds in by_slot.items() if slot.endswith("05_matmul") for d in ds}) > 1, by_slot


def test_each_exact_variant_is_entered_as_its_row_arrives(tmp_path, monkeypatch):
    """A known-wrong run cut short (a lent machine's time limit) keeps the ledger entries of the variants
    graded before the cut: each row is judged as it arrives, and only a variant that lost exactly its
    groups is entered."""
    from grader.run import grading as run_grading
    from grader.verify.outcomes import ExerciseRow, GroupScore
    from tests.known_wrong import ledger
    from tests.test_gpu_grading import entered_if_exact

    def no_build(dirs, jobs, pool, log=print):
        done: Future = Future()
        done.set_result({"ok": True})
        return {d: done for d in dirs}

    entered: list[str] = []
    monkeypatch.setattr(run_grading, "start_builds", no_build)
    monkeypatch.setattr(ledger, "record", lambda v, device=None: entered.append(v.id))
    exact, wrong, cut = [v for v in VARIANTS if v.exercise.startswith("03") and v.reason][:3]

    def row(v, lose: bool) -> ExerciseRow:
        groups = {g: GroupScore(points=0 if lose and g in v.loses else 1, max=1, state="failed", reason=v.reason)
                  for g in ("performance", *v.loses)}
        return ExerciseRow(exercise=v.exercise, title="", status="graded", error="", points=0, max_points=1, groups=groups)

    def fake_grade(target, exercises, **kwargs):
        v = next(x for x in (exact, wrong, cut) if held_files(target / x.exercise) == expected_files(x))
        if v is cut:
            raise KeyboardInterrupt  # the device call's limit
        return {v.exercise: row(v, lose=v is exact)}

    monkeypatch.setattr(grading, "grade", fake_grade)
    with pytest.raises(KeyboardInterrupt):
        # one slot: the three graded in turn
        grading.grade_variants([exact, wrong, cut], keyword=None, root=tmp_path,
                               on_row=entered_if_exact(frozenset({"performance"})))
    assert entered == [exact.id]


def ran_steps(log: str) -> set[str]:
    """The files ninja's verbose output says it compiled (the source of each `-c`) or linked (`.so`)."""
    steps = set()
    for line in log.splitlines():
        line = re.sub(r"^Error building extension '[^']*': ", "", line)  # a failed build's first step
        if re.match(r"^\[\d+/\d+\] ", line):
            source = re.search(r"\s-c\s+(\S+)", line)
            out = re.search(r"\s-o\s+(\S+)", line)
            steps.add(Path(source.group(1)).name if source else Path(out.group(1)).suffix if out else line)
    return steps


def test_a_slot_recompiles_only_the_changed_file_and_survives_a_failed_build():
    """01's solution, then three of its .cu variants (the second does not compile), one after another
    in one slot: the slot holds exactly each one's files, each build after the first runs ninja alone
    on leaky_relu.cu (and the link), the failed one leaves the next building, up to date and loading."""
    by_name = {v.name: v for v in VARIANTS if v.exercise == "01_leaky_relu"}
    first, broken, then = by_name["empty_kernel"], by_name["compile_error"], by_name["off_by_one"]
    assert set(first.edits) == set(broken.edits) == set(then.edits) == {"leaky_relu.cu"}
    slot = env.BUILD_ROOT / "test-slots" / "s00" / "01_leaky_relu"  # a stable path: its build folder stays
    write_slot(slot, first.source)
    # ninja runs here whatever the slot held (a cache hit would leave a file touched since its last
    # compile to be rebuilt with the next variant's)
    (build.build_dir_for(slot) / "fingerprint").unlink(missing_ok=True)
    assert build_all([slot], 1, log=grading.quiet)[slot]["ok"]  # the solution (from scratch the first time)
    for v, ok in ((first, True), (broken, False), (then, True)):
        write_slot(slot, v.source, v.texts())
        assert held_files(slot) == expected_files(v), v.id
        result = build_all([slot], 1, log=grading.quiet)[slot]
        assert result["ok"] is ok, (v.id, result.get("error"))
        assert result["extra"].get("ninja_only", True), "the build took torch's full path: nothing to compare"
        steps = ran_steps(result["log"])
        assert steps == ({"leaky_relu.cu", ".so"} if ok else {"leaky_relu.cu"}), (v.id, steps)
    # the last build is the slot's sources' (its cache stamp) and its library loads with every op
    assert build.cached(slot) is not None
    namespace = build.namespace_for(slot)
    code = ("import torch; from grader.toolchain import build; lib = build.load_library(sys.argv[1]); "
            "print(sorted(n for n in torch._C._dispatch_get_all_op_names() if n.startswith(lib.namespace + '::')))")
    out = subprocess.run([sys.executable, "-c", "import sys; " + code, str(slot)], cwd=env.REPO, text=True,
                         capture_output=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert f"{namespace}::leaky_relu" in out.stdout, out.stdout
