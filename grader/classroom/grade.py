"""`make grade SUBMISSIONS=dir`: grade a whole class into a gradebook and per-student feedback.

`dir` holds one folder per student; each holds an `exercises/` tree, the exercise folders
directly, or the student's notebooks (their `%%solution` cells are put into the exercise files).
Every student is graded with the same seed, each exercise in its own process, so one student's
broken submission never costs another's result. Results are kept per student with the key they
were graded under (grader.classroom.gradebook): a re-run grades again only the students whose submission,
seed, exercise selection or grader changed since, says why, and skips the others (--force regrades
every student).

Writes, under --out (default: SUBMISSIONS.gradebook beside SUBMISSIONS; it records its class, and
grading another class into it is refused), as grader.classroom.gradebook describes:
  grades.csv       the columns of `nbgrader export`, one row per exercise and student
  totals.csv       one row per student, for an LMS
  gradebook.csv    one row per student and exercise, with status and the reasons points were lost
  gradebook.json   everything, for machines
  <student>/report.{json,md,html}, <student>/throughput.png   feedback for each student
"""
from __future__ import annotations

import argparse
import copy
import hashlib
import importlib
import os
import queue
import secrets
import shutil
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from grader import env
from grader.run.grading import default_parallel, grade_target, rounds, start_builds
from grader.classroom.gradebook import (check_class, claim, content_hash, default_folder, failed_rows, graded_files,
                                        grading_key, load_report, manifest, report_rows, stale, without_logs,
                                        write_gradebook, write_report)
from grader.run.options import DEFAULT_STALL, DEFAULT_TIMEOUT, GradeOptions
from grader.run.report import table
from grader.verify.outcomes import ExerciseRow
from grader.verify.scoring import score_exercise
from grader.classroom.slurm import SlurmOptions, job_script, run_array
from grader.specs import Spec, select


def notebooks_of(student: Path) -> list[Path]:
    return sorted(p for p in student.rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)


def exercises_root(student: Path, out: Path) -> Path:
    """The folder holding the student's exercise folders: their `exercises/` tree, the folders
    assembled from their notebooks into the output folder (see assemble_notebooks), or the student
    folder itself. Submissions are only read, never written."""
    if (student / "exercises").is_dir():
        return student / "exercises"
    if notebooks_of(student):
        return out / student.name / "from_notebooks"
    return student


def assemble_notebooks(student: Path, dest: Path) -> list[str]:
    """A student who submitted notebooks: put each notebook's `%%solution` cells into a copy of the
    exercise's student folder, `dest/NN_name/`, graded like an `exercises/` tree. Returns the
    exercises found."""
    from grader.authoring import notebooks as nb

    course = nb.Course("submission", seed=0, quiet=True)
    for path in notebooks_of(student):
        course.record_notebook(path)
    if dest.exists():
        shutil.rmtree(dest)
    found = sorted({ex for (ex, _, _) in course.cells})
    for exercise in found:
        shutil.copytree(course.assemble(exercise), dest / exercise)
    return found


@dataclass
class Submission:
    """What one student submitted, as graded: the folder holding their exercise folders, and the
    content key of each selected exercise (grader.classroom.gradebook.grading_key)."""

    folder: Path
    content: dict[str, str | None]
    error: str = ""  # why it cannot be graded at all (notebooks that could not be read)


def read_submission(student: Path, specs: list[Spec], out: Path) -> Submission:
    """Hash what `student` submitted for each exercise of `specs`, assembling their notebooks first
    (into `out`) if they submitted notebooks. Reads the submission, never writes it."""
    folder, content, error = exercises_root(student, out), {}, ""
    if folder != student / "exercises" and folder != student:  # notebooks, put into exercise folders
        h = hashlib.sha256()
        for path in notebooks_of(student):
            h.update(path.relative_to(student).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
        content["notebooks"] = h.hexdigest()
        try:
            assemble_notebooks(student, folder)
        except Exception as e:  # an unreadable notebook costs that student only
            error = f"could not read the submitted notebooks: {type(e).__name__}: {e}"
    for sp in specs:
        d = folder / sp.exercise
        content[sp.exercise] = content_hash(d, sp.exercise) if d.is_dir() and not error else None
    return Submission(folder, content, error)


def plan(root: Path, specs: list[Spec], options: GradeOptions, *, out: Path, students: list[str] | None = None):
    """Each student's submission and key (under `options`), and why each student to grade is graded
    (the others' reports show what grading them again would): (students, submissions, keys, why)."""
    every = student_folders(root, out, students)
    claim(out, root, options.seed)
    subs = {s.name: read_submission(s, specs, out) for s in every}
    exercises = [sp.exercise for sp in specs]
    keys = {name: grading_key(options, exercises, sub.content) for name, sub in subs.items()}
    why = {}
    for s in every:
        reason = "--force" if options.force else stale(load_report(out, s.name), keys[s.name])
        if reason is not None:
            why[s.name] = reason
    return every, subs, keys, why


STORE = env.BUILD_ROOT / "submissions"


def stored(folder: Path, exercise: str, digest: str) -> Path:
    """The copy of a submitted exercise folder that is built and graded: STORE/<content hash>/<exercise>/,
    its graded files only (grader.classroom.gradebook.graded_files). Named by its content alone: identical
    folders share one copy and one build (within a run, across runs and classes), a grade depends on
    the content and the seed only, and nothing in its paths, op namespace or messages names a student.
    Written once, whole (another Slurm task may store the same content at the same time)."""
    dest = STORE / digest[:32] / exercise
    if dest.is_dir():
        return dest
    tmp = STORE / f".{digest[:32]}.{os.getpid()}.{threading.get_ident()}"
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / exercise).mkdir(parents=True)
    try:
        for rel in graded_files(folder):
            (tmp / exercise / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(folder / rel, tmp / exercise / rel)
        if content_hash(tmp / exercise, exercise) != digest:
            raise RuntimeError(f"{folder} changed while it was being graded")
        try:
            os.rename(tmp, dest.parent)
        except OSError:  # stored by another process meanwhile
            if not dest.is_dir():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return dest


def student_folders(root: Path, out: Path, names: list[str] | None = None) -> list[Path]:
    """The student folders of the class in `root` (the named ones), sorted; never the gradebook itself."""
    every = sorted(d for d in root.iterdir() if d.is_dir() and not d.name.startswith(".")
                   and d.resolve() != Path(out).resolve())
    if names is not None:
        every = [d for d in every if d.name in set(names)]
    if not every:
        raise SystemExit(f"no student folders in {root}" + (" by those names" if names is not None else "")
                         + ": a class is one folder per student, each laid out like exercises/")
    return every


def score(rows: list[ExerciseRow]) -> str:
    return f"{sum(r.points for r in rows):g}/{sum(r.max_points for r in rows)}"


def progress(done: int, total: int, label: str, elapsed: float) -> None:
    """One student done; `elapsed` (seconds since grading began) lets a run cut short still tell its pace."""
    width = 30
    filled = int(width * done / max(1, total))
    print(f"[{'#' * filled}{'.' * (width - filled)}] {done}/{total} {elapsed:4.0f} s  {label}", flush=True)


def worker_devices(workers: int | None) -> list[str | None]:
    """One grading worker per visible GPU (each pinned to its GPU), or `workers` of them.

    Without a GPU the workers have no device (the GPU checks skip, nothing is timed), and there is
    one per two cores (at least two: a worker waits on its builds and its processes' start-up). More
    workers than GPUs share GPUs round-robin, which makes their timings disturb each other: keep one
    per GPU to grade speed.
    """
    gpus = env.visible_gpus() if env.gpu_present() else []
    count = workers or (len(gpus) if gpus else max(2, env.usable_cores() // 2))
    return [gpus[i % len(gpus)] if gpus else None for i in range(count)]


def grade_class(root: Path, specs: list[Spec], options: GradeOptions, *, out: Path,
                devices: list[str | None] | None = None, students: list[str] | None = None,
                write_book: bool = True) -> dict[str, list[ExerciseRow]]:
    """Grade every student folder of `root` (or the named `students`) into `out`, under `options`
    (its seed set; `options.jobs` builds at once; `options.parallel` None: `default_parallel` per round).

    What is graded is one copy per distinct exercise folder (`stored`): identical folders (an
    untouched stub, the same files handed in twice) are built and graded once, and each student with
    that content gets a copy of the row. The copies are graded in rounds of at most one per exercise
    (`grader.run.grading.rounds`), each round by one worker in `devices` (default: one per visible GPU) as one grading
    run, so that, as in `make grade`, several copies run their checks at once on a GPU and each
    timing runs alone (grader.run.gate). A result depends only on the content and the seed, never on the
    student, the round, the worker or the GPU, so the gradebook is the same as a serial run's. The
    reference, PyTorch and the device's limit are timed once per exercise and GPU (grader.run.yardstick)
    and every copy graded on that GPU is scored against them. `options.strict`: a check a GPU cannot run for
    lack of memory costs its group (the gradebook lists such checks either way).
    """
    began = time.perf_counter()
    seed, jobs = options.seed, options.jobs
    every, subs, keys, why = plan(root, specs, options, out=out, students=students)
    yardsticks: dict = {}  # (device, exercise) -> the yardstick's numbers, shared by every copy
    todo = [s.name for s in every if s.name in why]
    units: dict[str, tuple[Spec, Path]] = {}  # content hash -> its spec, and the copy that is graded
    not_copied: dict[tuple[str, str], str] = {}  # (student, exercise) -> why it could not be copied
    handed_in = 0
    for name in todo:
        sub = subs[name]
        for sp in specs:
            digest = sub.content[sp.exercise]
            if digest is None or sub.error:
                continue
            handed_in += 1
            if digest not in units:
                try:
                    units[digest] = (sp, stored(sub.folder / sp.exercise, sp.exercise, digest))
                except Exception as e:  # e.g. the folder changed meanwhile: that student's exercise only
                    not_copied[name, sp.exercise] = f"the submitted folder could not be copied for grading: {e}"
    # Build every distinct folder in parallel on the CPU cores, in the order the rounds grade them, while
    # the GPUs grade the rounds whose folders are built: the first round starts after its own builds, and
    # runs its checks beside the others' builds; no timing starts until every build has ended.
    schedule = rounds(list(units), lambda d: units[d][0].exercise)
    start = time.perf_counter()
    build_pool = ThreadPoolExecutor(max_workers=max(1, jobs))
    builds = start_builds([units[d][1] for r in schedule for d in r], jobs, build_pool, log=lambda *a: None)
    build_pool.shutdown(wait=False)
    last_built = [start]
    for f in builds.values():
        f.add_done_callback(lambda _: last_built.append(time.perf_counter()))
    if units:
        same = f" ({handed_in - len(units)} identical to another, built and graded once)" if handed_in > len(units) else ""
        print(f"building {len(units)} distinct exercise folder(s) of the {handed_in} submitted{same}, "
              f"{jobs} at a time, grading each round as its folders are built ...", flush=True)
    devices = devices or worker_devices(None)
    if len(devices) > 1 or devices[0] is not None:
        print(f"grading with {len(devices)} worker(s): "
              + ", ".join("no GPU" if d is None else f"GPU {d}" for d in devices), flush=True)

    results: dict[str, list[ExerciseRow]] = {}
    graded: dict[str, ExerciseRow] = {}  # content hash -> its row
    waiting = {name: {subs[name].content[sp.exercise] for sp in specs if (name, sp.exercise) not in not_copied} - {None}
               for name in todo if not subs[name].error}
    done = 0
    busy: list[float] = []  # seconds each round held its worker: the grading alone, builds apart
    lock = threading.Lock()
    free: queue.Queue = queue.Queue()
    for d in devices:
        free.put(d)

    def finish(student: str, rows: list[ExerciseRow], label: str) -> None:
        nonlocal done
        with lock:
            results[student] = rows
            done += 1
            progress(done, len(every), label, time.perf_counter() - began)

    def rows_of(student: str) -> list[ExerciseRow]:
        sub = subs[student]
        if sub.error:
            return failed_rows(specs, sub.error)
        rows = []
        for sp in specs:
            digest = sub.content[sp.exercise]
            if (student, sp.exercise) in not_copied:
                rows += failed_rows([sp], not_copied[student, sp.exercise])
            elif digest is None:
                rows.append(score_exercise(sp, [], "missing", f"no folder {sub.folder / sp.exercise}"))
            else:  # a copy: a student's report never shares an object with another's
                rows.append(copy.deepcopy(graded[digest]))
        return rows

    def complete(student: str) -> None:
        rows = without_logs(rows_of(student))
        header = {"target": student, "seed": seed, "date": time.strftime("%Y-%m-%d %H:%M:%S"), "key": keys[student]}
        write_report(out / student, rows, header)
        again = "" if why[student] == "not graded yet" else f" (graded again: {why[student]})"
        finish(student, rows, f"{student}: {score(rows)}{again}")

    def grade_round(digests: list[str]) -> None:
        """Grade a round's copies (one per exercise) as one run of the gate, on one worker's GPU."""
        by_exercise: dict[str, ExerciseRow] = {}
        error = "the grader returned no result"
        for d in digests:  # before taking a GPU: a failed build is graded (and reported) as one
            builds[units[d][1]].result()
        device = free.get()
        took = time.perf_counter()
        try:
            with tempfile.TemporaryDirectory(prefix="course-round-") as tmp:
                target = Path(tmp)
                for d in digests:  # a folder laid out like exercises/; the builds are the copies' own
                    (target / units[d][0].exercise).symlink_to(units[d][1].resolve(), target_is_directory=True)
                round_specs = [units[d][0] for d in digests]
                # built above: jobs=1; parallel per round, unless given
                parallel = options.parallel if options.parallel is not None else default_parallel(len(digests))
                found = grade_target(target, round_specs, options.replace(jobs=1, parallel=parallel),
                                     device=device, yardsticks=yardsticks, log=lambda *a: None,
                                     compiling=lambda: not all(f.done() for f in builds.values()))
                by_exercise = {r.exercise: r for r in found}
        except Exception as e:  # a grader fault on one round must not lose the others
            error = repr(e)
        finally:
            with lock:
                busy.append(time.perf_counter() - took)
            free.put(device)
        ready = []
        with lock:
            for d in digests:
                spec = units[d][0]
                graded[d] = by_exercise.get(spec.exercise) or failed_rows([spec], error)[0]
            for student, left in waiting.items():
                if left & set(digests):
                    left.difference_update(digests)
                    if not left:
                        ready.append(student)
        for student in ready:
            complete(student)

    for student in every:
        if student.name not in why:
            rows = report_rows(load_report(out, student.name))
            finish(student.name, rows, f"{student.name}: {score(rows)}, unchanged since graded: skipped (--force regrades)")
    for student in todo:
        if not waiting.get(student):  # nothing left to grade: nothing submitted, or all of it failed before grading
            complete(student)
    pool = ThreadPoolExecutor(max_workers=len(devices))
    try:
        for f in [pool.submit(grade_round, r) for r in schedule]:
            f.result()
    except BaseException:  # Ctrl-C (or a fault): no round or build starts after it; what was graded is kept
        pool.shutdown(wait=False, cancel_futures=True)
        build_pool.shutdown(wait=False, cancel_futures=True)
        if write_book:  # the students finished so far only: an earlier gradebook's row could be for other code
            with lock:
                finished = dict(results)
            write_gradebook(out, finished, seed)
        raise
    pool.shutdown()
    if units:
        wall = time.perf_counter() - start
        print(f"{len(units)} folder(s) built in {max(last_built) - start:.0f} s and graded in {wall:.0f} s "
              f"from the first build ({len(schedule)} round(s) on {len(devices)} worker(s))", flush=True)
        print(throughput_line(handed_in, wall, sum(busy), len(devices)), flush=True)
    if write_book:
        write_gradebook(out, results, seed)
    return dict(sorted(results.items()))


def throughput_line(handed_in: int, wall_s: float, busy_s: float, workers: int) -> str:
    """Student-exercises per worker-hour (a worker is a GPU when there is one), two ways: over the
    wall time from the first build (builds included, every worker counted for all of it), and over
    the time the workers spent grading (builds apart)."""
    def per_hour(seconds: float) -> str:
        return f"{handed_in * 3600 / seconds:.0f}" if seconds > 0 else "-"
    return (f"{handed_in} student-exercise(s): {per_hour(wall_s * workers)} per worker-hour with the builds "
            f"({wall_s:.0f} s x {workers}), {per_hour(busy_s)} per worker-hour of grading alone "
            f"({busy_s:.0f} s of the workers' time)")


def grade_slice(students: list[str], root: str, exercises: list[str], out: str, options: dict) -> dict[str, float]:
    """One Slurm array task: grade these students into `out` under `options` (GradeOptions.to_json,
    read back here whole); return their totals."""
    env.configure()
    results = grade_class(Path(root), select(exercises), GradeOptions.from_json(options), out=Path(out),
                          students=students, write_book=False)
    return {s: sum(r.points for r in rows) for s, rows in results.items()}


def grade_class_on_slurm(root: Path, specs: list[Spec], options: GradeOptions, *, out: Path,
                         opts: SlurmOptions) -> dict[str, list[ExerciseRow]]:
    """Grade the class as a Slurm job array (grader.classroom.slurm), then write the gradebook here; each task
    is given `options` whole (as JSON)."""
    seed, force = options.seed, options.force
    every, _, keys, why = plan(root, specs, options, out=out)
    students = [d.name for d in every]
    todo = [s for s in students if s in why]

    def done(student: str) -> bool:
        return stale(load_report(out, student), keys[student]) is None

    if force:  # an old report must not stand in for a regrade whose task fails
        for s in todo:
            (out / s / "report.json").unlink(missing_ok=True)
    args = (str(root), [s.exercise for s in specs], str(out), options.to_json())
    # the task by its importable name, which submitit pickles as a reference (under `python -m
    # grader.classroom.grade` this module is __main__, whose functions would be pickled whole)
    task = importlib.import_module("grader.classroom.grade").grade_slice
    failures = run_array(task, todo, args, opts=opts, folder=out / ".submitit", done=done)
    results = {s: report_rows(load_report(out, s)) if done(s) else failed_rows(specs, failures[s]) for s in students}
    write_gradebook(out, results, seed)
    return results


def main(argv: list[str] | None = None) -> int:
    from grader.run.cli import UsageParser, exercise_names

    parser = UsageParser(prog="python -m grader.classroom.grade", description=__doc__,
                         formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("submissions", type=Path)
    parser.add_argument("--ex", nargs="*", default=[], help="exercise numbers or names, by spaces or commas")
    parser.add_argument("--seed", type=int)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT)
    parser.add_argument("--stall", type=float, default=DEFAULT_STALL,
                        help="seconds of an exercise's grading with no check starting or ending: stopped as hanging")
    parser.add_argument("--jobs", type=int, default=env.default_build_jobs(), help="parallel builds")
    parser.add_argument("--workers", type=int, default=None,
                        help="students graded at once (default: one per visible GPU, each pinned to its GPU)")
    parser.add_argument("--force", action="store_true", help="regrade students already graded")
    parser.add_argument("--strict", action="store_true",
                        help="a check a GPU cannot run (too little memory) costs its group, instead of nothing")
    parser.add_argument("-k", dest="keyword")
    cluster = parser.add_argument_group("Slurm (a job array through submitit; see grader/classroom/slurm.py)")
    cluster.add_argument("--slurm", action="store_true", help="grade as a Slurm job array")
    cluster.add_argument("--tasks", type=int, default=SlurmOptions.tasks, help="array tasks (slices of students)")
    cluster.add_argument("--partition")
    cluster.add_argument("--time-min", type=int, default=SlurmOptions.time_min, help="time limit per task")
    cluster.add_argument("--gpus-per-task", type=int, default=SlurmOptions.gpus_per_task)
    cluster.add_argument("--cpus-per-task", type=int, default=SlurmOptions.cpus_per_task)
    cluster.add_argument("--account")
    cluster.add_argument("--setup", action="append", default=[],
                         help="a shell line to run before each task (repeatable), e.g. 'module load cuda'")
    cluster.add_argument("--local", action="store_true", help="run the array's tasks as local processes")
    cluster.add_argument("--dry-run", action="store_true", help="print the sbatch script and stop")
    args = parser.parse_args(argv)
    env.configure()
    root = args.submissions.resolve()
    if not root.is_dir():  # a wrong usage is one line (SystemExit prints it on stderr), no traceback
        raise SystemExit(f"SUBMISSIONS={args.submissions}: no such folder (a class is a folder of student folders)")
    out = (args.out or default_folder(root)).resolve()
    student_folders(root, out)  # an empty class: said before anything is written
    specs = select(exercise_names(args.ex))  # an unknown exercise too
    check_class(out, root)
    kept = (manifest(out) or {}).get("seed")  # a re-run grades with the class's seed: see grader.classroom.gradebook
    seed = args.seed if args.seed is not None else kept if kept is not None else secrets.randbelow(2**31)
    old = root.parent / "gradebook"
    if args.out is None and not out.exists() and (old / "gradebook.csv").exists() and manifest(old) is None:
        print(f"note: a class's gradebook is now {out}, no longer {old}, which this run leaves alone")
    kept_note = ", the gradebook's" if args.seed is None and kept is not None else ""
    options = GradeOptions.from_args(args, seed=seed)  # the one value every step below is given
    if args.slurm:
        opts = SlurmOptions(tasks=args.tasks, partition=args.partition, time_min=args.time_min,
                            gpus_per_task=args.gpus_per_task, cpus_per_task=args.cpus_per_task,
                            account=args.account, cluster="local" if args.local else "slurm", setup=args.setup)
        if args.dry_run:
            print(job_script(out / ".submitit", opts, len(student_folders(root, out))), end="")
            return 0
        print(f"grading the class in {root} (seed {seed}{kept_note}) into {out} as a Slurm job array")
        results = grade_class_on_slurm(root, specs, options, out=out, opts=opts)
    else:
        print(f"grading the class in {root} (seed {seed}{kept_note}) into {out}")
        if not env.gpu_present():
            print("no CUDA GPU here: submissions are compiled and the GPU checks are skipped")
        start = time.perf_counter()
        results = grade_class(root, specs, options, out=out, devices=worker_devices(args.workers))
        print(f"graded {len(results)} student(s) in {time.perf_counter() - start:.0f} s")
    if len(results) <= 10:
        for student, rows in results.items():
            print(f"\n== {student}")
            print(table(rows))
    else:
        for student, rows in results.items():
            print(f"{student:30s} {sum(r.points for r in rows):6g} / {sum(r.max_points for r in rows)}")
    print(f"\ngradebook: {out / 'grades.csv'} (nbgrader's columns), {out / 'totals.csv'} (one row per student), "
          f"{out / 'gradebook.csv'} (with reasons); feedback: {out}/<student>/report.html")
    return 0


if __name__ == "__main__":
    sys.exit(main())
