"""Grading a class: a gradebook with a row per student and exercise, whatever each submitted."""
from __future__ import annotations

import csv
import importlib.util
import json
import re
import shutil
import signal
import threading
import time
import warnings
from concurrent.futures import Future

import pytest

from grader.classroom import grade as classroom_module
from grader import env
from grader.authoring import notebook_authoring
from grader.classroom import gradebook
from grader.classroom.grade import grade_class, grade_class_on_slurm, main, worker_devices
from grader.env import visible_gpus
from grader.classroom.gradebook import outcomes
from grader.run.options import GradeOptions
from grader.classroom.slurm import SlurmOptions, job_script, slices
from grader.specs import select
from tests.conftest import HAS_GPU
from tests.grading import EXERCISES, JOBS, SOLUTIONS, explain, pythonpath_outside_the_checkout
from tests.known_wrong import all_variants

UNIT1 = ["01_leaky_relu", "02_elu"]
STUDENTS = ("alice", "bob", "carol", "dave")


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
    (subs / "dave").mkdir()  # dave: the unit-1 notebook, answered (it covers 01 only)
    (notebook,) = notebook_authoring.write(["unit1_scalar_kernels"], root / "notebooks")  # the instructor's
    shutil.copy(notebook, subs / "dave" / notebook.name)
    out = root / "gradebook"
    results = grade_class(subs, select(UNIT1), GradeOptions(seed=7, jobs=JOBS), out=out)
    return subs, out, results


def test_gradebook_is_complete(classroom):
    _, out, _ = classroom
    rows = list(csv.DictReader((out / "gradebook.csv").open()))
    assert {(r["student_id"], r["assignment"]) for r in rows} == {(s, ex) for s in STUDENTS for ex in UNIT1}
    carol = next(r for r in rows if r["student_id"] == "carol" and r["assignment"] == "01_leaky_relu")
    assert carol["status"] == "build failed" and carol["score"] == "0" and "leaky_relu.cu" in carol["reasons"]
    assert "blocks_total" in carol["reasons"]  # the compiler's own message: the undeclared name
    for student in STUDENTS:
        for name in ("report.json", "report.md", "report.html"):
            assert (out / student / name).exists()
        html = (out / student / "report.html").read_text()
        assert ("throughput.png" in html) == (out / student / "throughput.png").exists()  # no broken image
    carol_html = (out / "carol" / "report.html").read_text()
    assert "build failed" in carol_html and "blocks_total" in carol_html
    keep_artifacts(out)


def nbgrader_export(results: dict[str, list[dict]], folder) -> str:
    """What nbgrader's own `nbgrader export` (its CsvExportPlugin) writes for these scores, from a
    real nbgrader gradebook: an assignment per exercise, its points as one autograded cell."""
    from nbgrader.api import Gradebook
    from nbgrader.plugins import CsvExportPlugin

    with warnings.catch_warnings(), Gradebook(f"sqlite:///{folder / 'gradebook.db'}", "cuda-kernels-for-pytorch") as gb:
        warnings.filterwarnings("ignore", message="Object of type")  # nbgrader's own SQLAlchemy use
        for row in results[next(iter(results))]:
            gb.add_assignment(row.exercise)
            gb.add_notebook(row.exercise, row.exercise)
            gb.add_grade_cell("points", row.exercise, row.exercise, max_score=row.max_points, cell_type="code")
        for student, rows in sorted(results.items()):
            gb.add_student(student)
            for row in rows:
                gb.add_submission(row.exercise, student)
                gb.find_grade("points", row.exercise, row.exercise, student).auto_score = float(row.points)
        gb.db.commit()
        CsvExportPlugin(to=str(folder / "export.csv")).export(gb)
    return (folder / "export.csv").read_text()


def test_nbgrader_shaped_grades_and_lms_totals_hold_folders_and_notebooks(classroom, tmp_path, monkeypatch):
    """grades.csv is what `nbgrader export` writes for the same scores, column for column and byte
    for byte (student ids here have no comma, which nbgrader would not quote); totals.csv has a row
    per student. dave handed in a notebook, the others folders: all are rows of the same files."""
    _, out, results = classroom
    text = (out / "grades.csv").read_text()
    header = text.splitlines()[0].split(",")
    assert header == gradebook.NBGRADER_COLUMNS
    rows = read_csv(out / "grades.csv")
    assert [(r["assignment"], r["student_id"]) for r in rows] == [(ex, s) for ex in UNIT1 for s in STUDENTS]
    dave = {r["assignment"]: r for r in rows if r["student_id"] == "dave"}  # the notebook submission
    assert dave["01_leaky_relu"]["max_score"] == "10.0" and dave["02_elu"]["score"] == "0.0"
    if importlib.util.find_spec("nbgrader") is not None:  # nbgrader's own export of the same scores
        from grader.authoring.notebook_release import _tool_env

        monkeypatch.setenv("PATH", _tool_env()["PATH"])  # nbgrader's gradebook runs alembic
        assert text == nbgrader_export(results, tmp_path)
    totals = read_csv(out / "totals.csv")
    assert list(totals[0]) == ["student_id", *UNIT1, "total", "max_score"]
    assert [t["student_id"] for t in totals] == sorted(STUDENTS)
    for t in totals:
        points = {r.exercise: r.points for r in results[t["student_id"]]}
        assert {ex: float(t[ex]) for ex in UNIT1} == points and float(t["total"]) == sum(points.values())
        assert t["max_score"] == "20"


def keep_artifacts(out) -> None:
    """With COURSE_TEST_ARTIFACTS=DIR, keep each student's feedback page (and plot) there, to read."""
    import os
    from pathlib import Path

    if not os.environ.get("COURSE_TEST_ARTIFACTS"):
        return
    dest = Path(os.environ["COURSE_TEST_ARTIFACTS"])
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copy(out / "gradebook.csv", dest / "class-gradebook.csv")
    for student in STUDENTS:
        for name in ("report.html", "throughput.png"):
            if (out / student / name).exists():
                shutil.copy(out / student / name, dest / f"class-{student}-{name}")


def test_scores_follow_the_submissions(classroom):
    _, _, results = classroom
    score = {s: {r.exercise: r.points for r in rows} for s, rows in results.items()}
    if HAS_GPU:  # the real scores: correct earns everything, a stub nothing, a build failure nothing
        assert score["alice"] == {"01_leaky_relu": 10, "02_elu": 10}, explain(results["alice"])
        assert score["bob"] == {"01_leaky_relu": 10, "02_elu": 0}, explain(results["bob"])
        assert score["carol"] == {"01_leaky_relu": 0, "02_elu": 10}, explain(results["carol"])
        assert score["dave"] == {"01_leaky_relu": 10, "02_elu": 0}, explain(results["dave"])
        for row in results["alice"]:
            assert all(g.state == "passed" for g in row.groups.values()), explain([row])
        bob_stub = next(r for r in results["bob"] if r.exercise == "02_elu")
        assert bob_stub.status == "graded" and "not implemented" in " ".join(
            g.reason for g in bob_stub.groups.values()), explain([bob_stub])
    else:  # GPU checks skipped: nothing earns points, but every row is there and graded or explained
        assert all(p == 0 for s in score.values() for p in s.values())
        stub_checks = next(r for r in results["bob"] if r.exercise == "02_elu").groups["input_checks"]
        ref_checks = next(r for r in results["alice"] if r.exercise == "02_elu").groups["input_checks"]
        assert stub_checks.state == "failed" and ref_checks.state == "skipped"
    dave = {r.exercise: r for r in results["dave"]}
    assert dave["01_leaky_relu"].status == "graded" and dave["02_elu"].status == "missing"


def test_notebook_submission_is_assembled_into_the_exercise(classroom):
    subs, out, _ = classroom
    kernel = (out / "dave" / "from_notebooks" / "01_leaky_relu" / "leaky_relu.cu").read_text()
    assert [p.name for p in (subs / "dave").iterdir()] == ["unit1_scalar_kernels.ipynb"]  # submissions only read
    assert "y[i] = leaky_relu_value<opmath>(x[i], negative_slope);" in kernel  # dave's cell, not the stub
    assert "is not implemented yet" not in kernel


def test_rerun_resumes_without_regrading(classroom):
    subs, out, _ = classroom
    before = (out / "alice" / "report.json").stat().st_mtime_ns
    grade_class(subs, select(UNIT1), GradeOptions(seed=7, jobs=JOBS), out=out)
    assert (out / "alice" / "report.json").stat().st_mtime_ns == before


def test_parallel_workers_give_the_serial_gradebook(classroom, tmp_path):
    """The class fixture graded with several workers (one per GPU, or two without one); one worker
    gives the same gradebook."""
    subs, _, parallel = classroom
    assert len(worker_devices(2)) == 2
    serial = grade_class(subs, select(UNIT1), GradeOptions(seed=7, jobs=JOBS), out=tmp_path / "serial",
                         devices=worker_devices(1))
    assert outcomes(parallel) == outcomes(serial)
    rows = list(csv.DictReader((tmp_path / "serial" / "gradebook.csv").open()))
    assert len(rows) == 2 * len(STUDENTS)


def test_slurm_job_array_with_submitits_local_executor(classroom, tmp_path):
    """The Slurm path end to end, with submitit's local executor standing in for the cluster."""
    pytest.importorskip("submitit", reason="submitit is installed by scripts/bootstrap.sh (requirements.txt)")
    subs, _, serial = classroom
    out = tmp_path / "slurm"
    opts = SlurmOptions(tasks=2, cluster="local", time_min=30)
    results = grade_class_on_slurm(subs, select(UNIT1), GradeOptions(seed=7, jobs=JOBS), out=out, opts=opts)
    assert outcomes(results) == outcomes(serial)
    rows = list(csv.DictReader((out / "gradebook.csv").open()))
    assert {(r["student_id"], r["assignment"]) for r in rows} == {(s, ex) for s in STUDENTS for ex in UNIT1}
    # two array tasks ran, each with its own log folder
    assert len([d for d in (out / ".submitit").iterdir() if d.is_dir() and d.name.isdigit()]) == 2


def test_slurm_job_script(tmp_path):
    script = job_script(tmp_path, SlurmOptions(tasks=8, partition="gpu", time_min=90, gpus_per_task=1), students=300)
    assert script.startswith("#!/bin/bash")
    for line in ("#SBATCH --array=0-7%8", "#SBATCH --partition=gpu", "#SBATCH --time=90", "#SBATCH --gpus-per-node=1",
                 "submitit.core._submit"):
        assert line in script, line


def test_slices_cover_every_student_once():
    students = [f"s{i}" for i in range(23)]
    parts = slices(students, 4)
    assert len(parts) == 4 and sorted(sum(parts, [])) == sorted(students)
    assert slices(["a"], 8) == [["a"]]


def test_visible_gpus_follow_cuda_visible_devices(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    assert visible_gpus() == ["2", "3"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert visible_gpus() == []


def test_visible_gpus_are_cuda_indices_not_device_node_numbers(monkeypatch, tmp_path):
    """A container given the host's GPUs 3 and 5 has /dev/nvidia3 and /dev/nvidia5; CUDA calls
    them 0 and 1, and CUDA_VISIBLE_DEVICES=3 would hide both."""
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    for name in ("nvidia3", "nvidia5", "nvidiactl", "nvidia-uvm"):
        (tmp_path / name).touch()
    assert visible_gpus(tmp_path) == ["0", "1"]
    assert visible_gpus(tmp_path / "empty") == []


def test_slurm_task_that_keeps_failing_is_retried_then_reported(tmp_path):
    """A task that fails (here: it starts where the grader cannot be imported) is submitted once
    more; when that fails too, its students get a row saying so (with the log's path) and the
    gradebook is still written."""
    pytest.importorskip("submitit", reason="submitit is installed by scripts/bootstrap.sh (requirements.txt)")
    subs = tmp_path / "submissions"
    shutil.copytree(SOLUTIONS / "01_leaky_relu", subs / "erin" / "exercises" / "01_leaky_relu")
    out = tmp_path / "gradebook"
    # the repository off the path, the rest kept (submitit itself may come from PYTHONPATH)
    opts = SlurmOptions(tasks=1, cluster="local", time_min=5, retries=1,
                        setup=["cd /", f"export PYTHONPATH={pythonpath_outside_the_checkout()}"])
    results = grade_class_on_slurm(subs, select(["01"]), GradeOptions(seed=7), out=out, opts=opts)
    row = results["erin"][0]
    assert row.status == "grader error" and "Slurm task" in row.error, row
    assert "No module named 'grader'" in row.error, row.error  # the task's own error, not just "failed"
    assert len([d for d in (out / ".submitit").iterdir() if d.is_dir() and d.name.isdigit()]) == 2  # tried twice
    rows = list(csv.DictReader((out / "gradebook.csv").open()))
    assert [(r["student_id"], r["status"]) for r in rows] == [("erin", "grader error")]


@pytest.mark.skipif(HAS_GPU, reason="needs a machine where CUDA sees no GPU")
def test_a_worker_given_a_gpu_it_cannot_see_fails_loudly():
    """Pinned to a GPU that CUDA does not see, grading must not skip the GPU checks (a zero for the
    whole class, with no error): each fails, saying why."""
    from grader.run.grading import grade_target

    (row,) = grade_target(SOLUTIONS, select(["01"]), GradeOptions(seed=1, timeout=300, quick=True), device="0",
                          log=lambda *a: None)
    forward = row.groups["forward"]
    assert forward.state == "failed", forward
    assert "given GPU '0'" in str(row), str(row)[:500]


# A small class for resuming: two identical submissions and a stub, of one exercise (their builds are
# the classroom's own: the graded copies are shared by content). Names that no report text contains.
SMALL = {"ann_q7": SOLUTIONS / "02_elu", "ben_q7": SOLUTIONS / "02_elu", "cleo_q7": EXERCISES / "02_elu"}


def grade_counting(subs, out, ex=("02",), seed=7, **kwargs):
    """grade_class, and the exercise folders it graded (each grading process's, as graded: the copy)."""
    calls = []
    real = classroom_module.grade_target

    def counting(target, specs, *a, **kw):
        calls.extend((target / s.exercise).resolve() for s in specs)
        return real(target, specs, *a, **kw)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(classroom_module, "grade_target", counting)
        results = grade_class(subs, select(list(ex)), GradeOptions(seed=seed, jobs=JOBS, **kwargs), out=out)
    return results, calls


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    root = tmp_path_factory.mktemp("small")
    for student, folder in SMALL.items():
        shutil.copytree(folder, root / "class" / student / "exercises" / "02_elu")
    results, calls = grade_counting(root / "class", root / "class.gradebook")
    return root, results, calls


def copy_of(small, tmp_path, students=tuple(SMALL)):
    """The small class and its gradebook, copied (the named students), as an instructor who moved a
    class does it: with the gradebook's class.json deleted, as its refusal message says."""
    root, _, _ = small
    for student in students:
        shutil.copytree(root / "class" / student, tmp_path / "class" / student)
        shutil.copytree(root / "class.gradebook" / student, tmp_path / "class.gradebook" / student)
    return tmp_path / "class", tmp_path / "class.gradebook"


def test_identical_submissions_are_graded_once(small):
    root, results, calls = small
    assert len(calls) == 2, calls  # ann's and ben's identical folders once, cleo's stub once
    # what was graded is a copy named by its content: no student's name in its path, nothing of one
    # student in another's report
    assert not any(s in str(c) for c in calls for s in SMALL), calls
    assert outcomes({"x": results["ann_q7"]}) == outcomes({"x": results["ben_q7"]}) != outcomes({"x": results["cleo_q7"]})
    for student in SMALL:
        for name in ("report.json", "report.md", "report.html"):
            text = (root / "class.gradebook" / student / name).read_text()
            assert all(other not in text for other in SMALL if other != student), (student, name)
    keys = {s: json.loads((root / "class.gradebook" / s / "report.json").read_text())["key"] for s in SMALL}
    assert keys["ann_q7"] == keys["ben_q7"] != keys["cleo_q7"]
    assert keys["ann_q7"]["content"]["02_elu"] == gradebook.content_hash(SOLUTIONS / "02_elu", "02_elu")


def test_resume_skips_a_class_that_did_not_change(small, tmp_path, capsys):
    subs, out = copy_of(small, tmp_path)
    before = files_of(out)
    results, calls = grade_counting(subs, out)
    assert calls == [] and outcomes(results) == outcomes(small[1])
    shown = capsys.readouterr().out.splitlines()
    for student in SMALL:
        assert "unchanged since graded: skipped" in next(l for l in shown if f"{student}: " in l)
    after = files_of(out)
    assert {k: v for k, v in after.items() if k.endswith("report.json")} == {
        k: v for k, v in before.items() if k.endswith("report.json")}


def test_a_changed_submission_is_graded_again_alone(small, tmp_path, capsys):
    subs, out = copy_of(small, tmp_path)
    reports = {s: (out / s / "report.json").read_bytes() for s in SMALL}
    shutil.rmtree(subs / "cleo_q7" / "exercises" / "02_elu")  # cleo hands in the finished exercise
    shutil.copytree(SOLUTIONS / "02_elu", subs / "cleo_q7" / "exercises" / "02_elu")
    (subs / "cleo_q7" / "exercises" / "02_elu" / "__pycache__").mkdir()  # caches are not the submission
    (subs / "cleo_q7" / "exercises" / "02_elu" / "__pycache__" / "elu.cpython-311.pyc").write_bytes(b"x")
    results, calls = grade_counting(subs, out)
    assert len(calls) == 1
    shown = capsys.readouterr().out.splitlines()
    assert "(graded again: the submission changed (02_elu))" in next(l for l in shown if "cleo_q7: " in l)
    # the pace, builds included and apart: one student-exercise graded (cleo's other one is unchanged)
    assert re.search(r"^1 student-exercise\(s\): \d+ per worker-hour with the builds .* per worker-hour of grading alone",
                     "\n".join(shown), re.M), shown
    assert {s: (out / s / "report.json").read_bytes() == reports[s] for s in SMALL} == {
        "ann_q7": True, "ben_q7": True, "cleo_q7": False}
    assert outcomes({"x": results["cleo_q7"]}) == outcomes({"x": results["ann_q7"]})


@pytest.mark.parametrize("change, why", [
    ({"seed": 8}, "the seed changed (7 -> 8)"),
    ({"ex": ("01", "02")}, "the exercise selection changed"),
    ({"keyword": "forward"}, "the exercise selection changed"),
    ({"grader": "0" * 16}, "the grader changed"),
    ({"force": True}, "--force"),
])
def test_what_a_grade_depends_on_changed_so_it_is_graded_again(small, tmp_path, capsys, monkeypatch, change, why):
    subs, out = copy_of(small, tmp_path, students=("ann_q7", "ben_q7"))
    if "grader" in change:
        version = change.pop("grader")
        monkeypatch.setattr(gradebook, "grader_version", lambda: version)
    results, calls = grade_counting(subs, out, **change)
    assert len(calls) == 1  # ann's and ben's identical folders, graded once again
    shown = capsys.readouterr().out
    for student in ("ann_q7", "ben_q7"):
        assert f"(graded again: {why})" in next(l for l in shown.splitlines() if f"{student}: " in l)
        key = json.loads((out / student / "report.json").read_text())["key"]
        assert key["seed"] == change.get("seed", 7) and key["keyword"] == change.get("keyword")
    if "ex" in change:
        assert [r.status for r in results["ann_q7"]] == ["missing", "graded"]


def test_an_interrupt_stops_the_class_before_its_next_round(small, tmp_path, monkeypatch):
    """Ctrl-C while a round is graded: that round ends (its processes have the same signal), and no
    other round starts. (Rounds queued on the pool used to run to the end before the interrupt
    surfaced: a class interrupted on the H100 went on grading after `make` had exited.)"""
    subs, out = copy_of(small, tmp_path)
    graded, main = [], threading.main_thread().ident

    def interrupted_in_the_first_round(target, specs, *args, **kwargs):
        graded.append(target)
        if len(graded) == 1:
            signal.pthread_kill(main, signal.SIGINT)
            time.sleep(1)  # the main thread takes the interrupt while this round still runs
        return []

    def built(dirs, jobs, pool, log=print):
        futures = {}
        for d in dirs:
            futures[d] = Future()
            futures[d].set_result({"ok": True})
        return futures

    monkeypatch.setattr(classroom_module, "grade_target", interrupted_in_the_first_round)
    monkeypatch.setattr(classroom_module, "start_builds", built)
    (out / "gradebook.json").write_text(json.dumps({"seed": 1, "students": {s: [] for s in SMALL}}))  # a stale one
    # Ctrl-C as Python takes it: a test run started in the background (nohup ... &) inherits SIGINT ignored
    saved = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            grade_class(subs, select(["02"]), GradeOptions(seed=1, force=True), out=out, devices=[None])
    finally:
        signal.signal(signal.SIGINT, saved)
    time.sleep(2)  # a round still queued would have started by now
    assert len(graded) == 1, graded
    # the gradebook holds only the students finished before the interrupt (none: it came during the
    # first round), not the stale rows of an earlier one
    assert json.loads((out / "gradebook.json").read_text())["students"] == {}


def test_a_folder_that_cannot_be_copied_costs_its_student_only(small, tmp_path, monkeypatch):
    """ann's folder fails to copy for grading (say, it changed meanwhile): her exercise gets the
    error, naming her folder; ben, with the same content, is graded from his own copy, and nothing
    of ann's reaches his report."""
    subs, out = copy_of(small, tmp_path, students=("ann_q7", "ben_q7"))
    real = classroom_module.stored

    def failing(folder, exercise, digest):
        if "ann_q7" in str(folder):
            raise RuntimeError(f"{folder} changed while it was being graded")
        return real(folder, exercise, digest)

    monkeypatch.setattr(classroom_module, "stored", failing)
    results, calls = grade_counting(subs, out, force=True)
    assert len(calls) == 1
    (ann,), (ben,) = results["ann_q7"], results["ben_q7"]
    assert ann.status == "grader error" and "ann_q7" in ann.error, ann
    assert ben.status == "graded" and "ann_q7" not in json.dumps(ben.to_json())
    assert "ann_q7" not in (out / "ben_q7" / "report.json").read_text()


def test_only_graded_files_make_a_submissions_content(tmp_path):
    folder = tmp_path / "02_elu"
    shutil.copytree(SOLUTIONS / "02_elu", folder, ignore=shutil.ignore_patterns("__pycache__"))
    first = gradebook.content_hash(folder, "02_elu")
    for junk in ("__pycache__/elu.cpython-311.pyc", "build/elu.o", "ex02.so", ".ipynb_checkpoints/x.ipynb", ".DS_Store"):
        (folder / junk).parent.mkdir(parents=True, exist_ok=True)
        (folder / junk).write_bytes(b"junk")
    assert gradebook.content_hash(folder, "02_elu") == first
    assert [p.name for p in gradebook.graded_files(folder)] == ["README.md", "elu.cpp", "elu.cu", "elu.h", "elu.py"]
    (folder / "notes.ipynb").write_text("{}")  # a notebook is part of what was handed in
    assert gradebook.content_hash(folder, "02_elu") != first
    (folder / "notes.ipynb").unlink()
    (folder / "elu.cu").write_text((folder / "elu.cu").read_text() + "\n// one more line\n")
    assert gradebook.content_hash(folder, "02_elu") != first
    assert gradebook.content_hash(folder, "02_elu") != gradebook.content_hash(folder, "01_leaky_relu")
    assert gradebook.grader_version() == gradebook.content_hash(env.REPO / "grader", "grader")[:16]


def read_csv(path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def files_of(folder) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_sibling_classes_keep_apart_and_a_gradebook_refuses_another_class(tmp_path, capsys):
    """Two classes side by side, with the same student names (issue 22: the second class was shown
    the first's grades): each is graded into its own folder by default, and grading one into the
    other's gradebook is refused, naming both folders and what to do, and changes nothing."""
    for cls in ("class", "class2"):
        (tmp_path / cls / "erin").mkdir(parents=True)  # erin submitted nothing: nothing to build or run
    assert main([str(tmp_path / "class"), "--ex", "02", "--seed", "5"]) == 0
    assert main([str(tmp_path / "class2"), "--ex", "02"]) == 0
    for cls in ("class", "class2"):
        book = tmp_path / f"{cls}.gradebook"
        assert json.loads((book / "class.json").read_text())["class"] == str(tmp_path / cls)
        assert [(r["student_id"], r["status"]) for r in read_csv(book / "gradebook.csv")] == [("erin", "missing")]
        assert str(tmp_path / cls / "erin") in json.loads((book / "erin" / "report.json").read_text())["exercises"][0]["error"]
    before = files_of(tmp_path / "class.gradebook")
    capsys.readouterr()
    with pytest.raises(SystemExit) as refused:
        main([str(tmp_path / "class2"), "--ex", "02", "--out", str(tmp_path / "class.gradebook")])
    message = str(refused.value)
    assert f"class in {tmp_path / 'class'}," in message and f"class in {tmp_path / 'class2'}:" in message
    assert str(tmp_path / "class2.gradebook") in message and "class.json" in message  # what to do instead
    assert files_of(tmp_path / "class.gradebook") == before
    # a re-run grades with the class's seed, which the gradebook keeps
    assert main([str(tmp_path / "class"), "--ex", "02"]) == 0
    shown = capsys.readouterr().out
    assert "(seed 5, the gradebook's)" in shown and "erin: 0/10, unchanged since graded: skipped" in shown
    assert json.loads((tmp_path / "class.gradebook" / "class.json").read_text())["seed"] == 5
