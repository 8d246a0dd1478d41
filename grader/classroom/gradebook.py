"""The gradebook of a class: where it lives, which class it belongs to, writing each student's report
and the class's gradebook, and loading them.

A class folder `<parent>/<class>/` is graded into `<parent>/<class>.gradebook/` unless told otherwise
(`default_folder`), so that two classes side by side never share one. The gradebook folder holds:
  class.json       the class folder it belongs to, and the seed the class is graded with: grading
                   another class into it is refused (`claim`), and a re-run takes that seed
  gradebook.csv    one row per student and exercise: status, score, the reasons points were lost
  grades.csv       the same scores with exactly the columns `nbgrader export` writes (nbgrader 0.9's
                   CsvExportPlugin: NBGRADER_COLUMNS), one row per assignment and student
  totals.csv       one row per student: the points of each exercise, the total and the maximum, for
                   an LMS to import
  gradebook.json   everything, for machines
  <student>/report.{json,md,html}, <student>/throughput.png   each student's feedback

In grades.csv an assignment is one exercise (01_leaky_relu, ...), not the exercises of a run taken
together: an exercise is what the course hands out and grades as a unit (its own folder, README,
spec and maximum), students may hand in a folder or a notebook for it, and its name and maximum stay
the same whichever exercises a run selects, so a re-run with another --ex or a second grading
later in the term adds rows under the same assignments instead of inventing a new one per
selection. The nbgrader course's own assignments are its units' notebooks (unit1_scalar_kernels,
...), with their own points: an exercise name never collides with them. `duedate`, `timestamp`,
the names and the email are empty, as nbgrader leaves them when it does not know them (a folder
carries no submission time); the late penalty is 0; numbers are written as nbgrader writes them
("7.5", "10.0"); a value with a comma is quoted (nbgrader writes it bare, which breaks its own
file). Notebook submissions and folder submissions are rows of the same file.

Resuming. Each report.json keeps the key it was graded under (`grading_key`): the content hash of
each selected exercise folder of the submission (its sources, headers, Python and notebooks, not
build products or caches: `graded_files`), the notebooks a submission of notebooks came as, the seed,
the exercise selection (and -k), and the grader's own version (a hash of grader/, specs included). A
re-run keeps a report whose key is today's and grades the student again otherwise (`stale` says why).
"""
from __future__ import annotations

import csv
import functools
import hashlib
import io
import json
from dataclasses import replace
from pathlib import Path

from grader import env
from grader.run.options import GradeOptions
from grader.run.report import feedback_html, markdown, plot_student, reasons
from grader.verify.outcomes import GRADER_ERROR, ExerciseRow, rows_from_json, rows_to_json
from grader.verify.results import write_json_atomic, write_text_atomic
from grader.verify.spec import Spec

MANIFEST = "class.json"


def default_folder(root: Path) -> Path:
    """Where the class in `root` is graded by default: `<class>.gradebook` beside it."""
    root = Path(root).resolve()
    return root.parent / f"{root.name}.gradebook"


def manifest(out: Path) -> dict | None:
    """What the gradebook folder `out` records (its class folder and seed), or None for a new one."""
    try:
        return json.loads((out / MANIFEST).read_text())
    except (OSError, ValueError):
        return None


def check_class(out: Path, root: Path) -> None:
    """Refuse (SystemExit, with what to do) when `out` is the gradebook of a class other than `root`."""
    recorded = (manifest(out) or {}).get("class")
    root = Path(root).resolve()
    if recorded is None or Path(recorded) == root:
        return
    raise SystemExit(
        f"{out} is the gradebook of the class in {recorded}, not of the class in {root}: one gradebook "
        f"holds one class, so it was left as it is.\n"
        f"To grade {root}, leave --out away (its own gradebook is {default_folder(root)}) or give another "
        f"folder. If {root} is {recorded} moved or renamed, delete {out / MANIFEST} and grade again: "
        f"the gradebook is then adopted, and every student whose submission differs from what was graded "
        f"is graded again.")


def claim(out: Path, root: Path, seed: int) -> None:
    """Make `out` the gradebook of the class in `root`, graded with `seed` (after check_class)."""
    check_class(out, root)
    record = {"class": str(Path(root).resolve()), "seed": seed}
    if manifest(out) != record:
        write_json_atomic(out / MANIFEST, record)


# Build products and caches: never graded, never part of a submission's content.
SKIPPED_DIRS = {"__pycache__", ".ipynb_checkpoints", "build", "dist"}
SKIPPED_SUFFIXES = {".pyc", ".pyo", ".so", ".o", ".a", ".obj", ".lib", ".dll", ".dylib", ".exp", ".pdb", ".egg-info"}


def graded_files(folder: Path) -> list[Path]:
    """The files of a submitted folder that grading reads (paths relative to it, sorted): everything
    but build products, caches and hidden files."""
    folder = Path(folder)
    found = []
    for p in folder.rglob("*"):
        rel = p.relative_to(folder)
        if (any(part.startswith(".") or part in SKIPPED_DIRS or Path(part).suffix in SKIPPED_SUFFIXES
                for part in rel.parts) or not p.is_file()):
            continue
        found.append(rel)
    return sorted(found)


def content_hash(folder: Path, name: str = "") -> str:
    """A hash of the graded files of `folder` (their paths and bytes) and of `name`."""
    h = hashlib.sha256(name.encode() + b"\0")
    for rel in graded_files(folder):
        h.update(rel.as_posix().encode() + b"\0" + (Path(folder) / rel).read_bytes() + b"\0")
    return h.hexdigest()


@functools.cache
def grader_version() -> str:
    """The grader's own version: a hash of its sources, specs, suite and headers, computed once."""
    return content_hash(env.REPO / "grader", "grader")[:16]


def grading_key(options: GradeOptions, exercises: list[str], content: dict[str, str | None]) -> dict:
    """What a student's grade depends on. `content`: exercise -> content hash of the submitted folder
    (None when there is none), and "notebooks" -> the hash of the notebooks it was assembled from;
    of `options`, those that change a grade: the seed, the keyword, `strict` (whether a check this GPU
    cannot run costs its group), and the modes that leave checks out (quick, sanitize, first_failure)."""
    return {"grader": grader_version(), "seed": options.seed, "exercises": list(exercises), "keyword": options.keyword,
            "strict": options.strict, "quick": options.quick, "sanitize": options.sanitize,
            "first_failure": options.first_failure, "content": dict(content)}


def stale(report: dict | None, key: dict) -> str | None:
    """Why `report` does not show what grading under `key` would (None: it does, keep it)."""
    if report is None:
        return "not graded yet"
    old = report.get("key")
    if not isinstance(old, dict):
        return "graded before reports kept what they were graded from"
    why = []
    before, now = old.get("content") or {}, key["content"]
    # an exercise selected by only one of the keys is the selection's change, not the submission's
    one_only = set(old.get("exercises") or []) ^ set(key["exercises"])
    changed = sorted(k for k in set(before) | set(now) if k not in one_only and before.get(k) != now.get(k))
    if changed:
        why.append(f"the submission changed ({', '.join(changed)})")
    if old.get("seed") != key["seed"]:
        why.append(f"the seed changed ({old.get('seed')} -> {key['seed']})")
    if old.get("exercises") != key["exercises"] or old.get("keyword") != key["keyword"]:
        why.append("the exercise selection changed")
    modes = [m for m in ("strict", "quick", "sanitize", "first_failure") if old.get(m, False) != key[m]]
    if modes:
        why.append(f"the grading options changed ({', '.join(modes)})")
    if old.get("grader") != key["grader"]:
        why.append("the grader changed")
    if not why and old != key:
        why.append("what it was graded from changed")
    return "; ".join(why) or None


def load_report(out: Path, student: str) -> dict | None:
    """A student's finished report, or None when they are not graded yet."""
    path = out / student / "report.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def load_gradebook(out: Path) -> dict | None:
    """The class's gradebook.json (seed and every student's rows), or None before one is written."""
    try:
        return json.loads((out / "gradebook.json").read_text())
    except (OSError, ValueError):
        return None


def report_rows(report: dict) -> list[ExerciseRow]:
    """The rows of a report.json (load_report)."""
    return rows_from_json(report["exercises"])


def failed_rows(specs: list[Spec], error: str) -> list[ExerciseRow]:
    """Rows for a student the grader itself failed on: zero points, and why."""
    return [ExerciseRow(sp.exercise, sp.title, GRADER_ERROR, error, 0.0, sp.total) for sp in specs]


def without_logs(rows: list[ExerciseRow]) -> list[ExerciseRow]:
    """The rows as a student's report keeps them: the raw pytest log is for the instructor's JSON only."""
    return [replace(r, log=None) for r in rows]


def write_report(folder: Path, rows: list[ExerciseRow], header: dict) -> None:
    """One student's feedback: report.json (read back on a re-run), report.md, report.html, the plot;
    `rows` without their logs (without_logs)."""
    folder.mkdir(parents=True, exist_ok=True)
    write_json_atomic(folder / "report.json", {**header, "exercises": rows_to_json(without_logs(rows))})
    (folder / "report.md").write_text(markdown(rows, header))
    (folder / "report.html").write_text(feedback_html(rows, header))
    plot_student(rows, folder / "throughput.png")


def _csv(header: list[str], rows: list[list], lineterminator: str = "\r\n") -> str:
    text = io.StringIO()
    w = csv.writer(text, lineterminator=lineterminator)
    w.writerow(header)
    w.writerows(rows)
    return text.getvalue()


# The header of `nbgrader export` (nbgrader 0.9, nbgrader/plugins/export.py, CsvExportPlugin.export)
NBGRADER_COLUMNS = ["assignment", "duedate", "timestamp", "student_id", "last_name", "first_name", "email",
                    "raw_score", "late_submission_penalty", "score", "max_score"]


def _exercises(results: dict[str, list[ExerciseRow]]) -> dict[str, float]:
    """Every exercise of the gradebook, in order, with its maximum."""
    found = {r.exercise: r.max_points for rows in results.values() for r in rows}
    return dict(sorted(found.items()))


def nbgrader_rows(results: dict[str, list[ExerciseRow]]) -> list[list[str]]:
    """grades.csv's rows, in `nbgrader export`'s order (assignments, then students) and number format
    (str of a float); a student without a row for an exercise scores 0, as nbgrader's export does."""
    rows = []
    for exercise, maximum in _exercises(results).items():
        for student in sorted(results):
            points = next((float(r.points) for r in results[student] if r.exercise == exercise), 0.0)
            rows.append([exercise, "", "", student, "", "", "", str(points), str(0.0), str(max(0.0, points)),
                         str(float(maximum))])
    return rows


def totals_rows(results: dict[str, list[ExerciseRow]]) -> tuple[list[str], list[list[str]]]:
    """totals.csv: a column per exercise, then total and max_score; one row per student."""
    exercises = _exercises(results)
    rows = []
    for student, graded in sorted(results.items()):
        points = {r.exercise: r.points for r in graded}
        rows.append([student, *(f"{points.get(e, 0):g}" for e in exercises),
                     f"{round(sum(points.values()), 2):g}", f"{sum(exercises.values()):g}"])
    return ["student_id", *exercises, "total", "max_score"], rows


def outcomes(results: dict[str, list[ExerciseRow]]) -> dict:
    """What must not depend on how a class was graded (serial or concurrent, one GPU or several):
    each student's exercise statuses and every group's state but speed (timings vary from run to
    run, and with them the speed tiers)."""
    return {(student, r.exercise): (r.status, {g: v.state for g, v in r.groups.items() if g != "performance"})
            for student, rows in results.items() for r in rows}


def write_gradebook(out: Path, results: dict[str, list[ExerciseRow]], seed: int) -> None:
    """The class's gradebook from every student's rows (each file written whole or not at all)."""
    detailed = [[student, r.exercise, r.status, f"{r.points:g}", f"{r.points:g}", r.max_points,
                 " | ".join(reasons(r))[:1000]]
                for student, rows in sorted(results.items()) for r in rows]
    write_text_atomic(out / "gradebook.csv", _csv(
        ["student_id", "assignment", "status", "raw_score", "score", "max_score", "reasons"], detailed))
    write_text_atomic(out / "grades.csv", _csv(NBGRADER_COLUMNS, nbgrader_rows(results), lineterminator="\n"))
    write_text_atomic(out / "totals.csv", _csv(*totals_rows(results)))
    write_json_atomic(out / "gradebook.json", {"seed": seed, "students": {s: rows_to_json(rows) for s, rows in results.items()}})
