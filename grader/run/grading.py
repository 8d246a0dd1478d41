"""Grading a target folder: its exercises built in parallel, each graded in its own time-limited
process (several at once, each timing alone on the GPU: grader.run.gate), and each process's results
scored into a row. `python -m grader` (grader.run.cli), class grading (grader.classroom.grade) and the tests
call `grade_target`; `build_all` is the one build scheduler.
"""
from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_all
from dataclasses import asdict, replace
from pathlib import Path
from typing import Sequence

from grader import env
from grader.toolchain import build
from grader.run import gate
from grader.run.options import DEFAULT_TIMEOUT, RACECHECK, GradeOptions
from grader.verify import paths
from grader.verify.outcomes import ExerciseRow, TestOutcome
from grader.verify.results import peak_check_mib, write_json_atomic
from grader.verify.scoring import score_exercise
from grader.specs import Selection, Spec

BUILD_TIMEOUT = 900


def rounds(items: Sequence, exercise_of) -> list[list]:
    """`items` in rounds of at most one per exercise (`exercise_of(item)`), the i-th item of each
    exercise in round i: a round fits one target folder, which holds each exercise name once."""
    by_exercise: dict[str, list] = {}
    for item in items:
        by_exercise.setdefault(exercise_of(item), []).append(item)
    count = max((len(v) for v in by_exercise.values()), default=0)
    return [[v[i] for v in by_exercise.values() if i < len(v)] for i in range(count)]


def resolve_target(target: str) -> Path:
    if target in ("exercises", "solutions"):
        return env.REPO / target
    path = Path(target).resolve()
    if not path.is_dir():
        raise SystemExit(f"target {target!r} is not a folder")
    return path


def _child_env(device: str | None = None) -> dict:
    """The environment of a build or grading process; `device` pins it to one GPU."""
    e = dict(os.environ)
    if device is not None:
        e["CUDA_VISIBLE_DEVICES"] = device
        e["COURSE_GPU_EXPECTED"] = device  # a pinned process that sees no GPU must fail, not skip
    e["PYTHONPATH"] = os.pathsep.join(filter(None, [str(env.REPO), e.get("PYTHONPATH")]))
    e.setdefault("PYTHONUNBUFFERED", "1")
    return e


def _build_one(d: Path, child: dict) -> dict:
    """Build one folder in its own process (nothing when its build is up to date); never raises."""
    try:
        hit = build.cached(d)
        if hit is not None:
            return asdict(hit)
        with tempfile.NamedTemporaryFile(suffix=".json") as out:
            cmd = [sys.executable, "-m", "grader.toolchain.build", str(d), "--json", out.name]
            start = time.perf_counter()
            try:
                proc = gate.run_session(cmd, BUILD_TIMEOUT, cwd=env.REPO, env=child)
            except subprocess.TimeoutExpired:
                return {"ok": False, "error": f"the build took longer than {BUILD_TIMEOUT} s"}
            try:
                data = json.loads(Path(out.name).read_text())[0]
            except (ValueError, IndexError):
                data = {"ok": False, "error": (proc.stderr or proc.stdout)[-3000:]}
            data["wall_s"] = time.perf_counter() - start
            return data
    except Exception as e:  # a job waiting for this build must hear of it, whatever happened
        return {"ok": False, "error": f"the build could not run: {type(e).__name__}: {e}"}


def _source_bytes(folder: Path) -> int:
    """The size of a folder's sources and headers: how long its build takes, roughly."""
    try:
        return sum(p.stat().st_size for p in folder.iterdir()
                   if p.suffix in build.SOURCE_SUFFIXES + build.HEADER_SUFFIXES and p.is_file())
    except OSError:
        return 0


def start_builds(dirs: Sequence[Path], jobs: int, pool: ThreadPoolExecutor, log=print,
                 longest_first: bool = False) -> dict[Path, Future]:
    """Start building folders on `pool` (`jobs` workers), each in its own process, in the order given
    (a class's rounds, a mutant round's quick builds first) or `longest_first` (by their sources' size);
    a failure costs only that folder. Each future's result is the folder's build result (a dict)."""
    child = _child_env()
    child["MAX_JOBS"] = str(max(1, env.usable_cores() // max(1, jobs)))  # ninja's parallelism inside one build

    def report(d: Path, future: Future) -> None:
        data = future.result()
        state = "cached" if data.get("cached") else ("built" if data["ok"] else "FAILED")
        log(f"  {state:6s} {d.relative_to(d.parent.parent) if len(d.parts) > 1 else d}  ({data.get('wall_s', 0):.1f} s)")

    futures = {}
    folders = list(dict.fromkeys(dirs))
    for d in sorted(folders, key=_source_bytes, reverse=True) if longest_first else folders:
        futures[d] = pool.submit(_build_one, d, child)
        futures[d].add_done_callback(lambda f, d=d: report(d, f))
    return futures


def build_all(dirs: list[Path], jobs: int, log=print) -> dict[Path, dict]:
    """Build folders in parallel, each in its own process; a failure costs only that folder."""
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = start_builds(dirs, jobs, pool, log)
    return {d: f.result() for d, f in futures.items()}


SANITIZER_EXIT = 86  # compute-sanitizer's exit status when it found an error (--error-exitcode)


def find_sanitizer() -> str:
    for candidate in [Path(os.environ.get("CUDA_HOME", "/usr/local/cuda")) / "bin" / "compute-sanitizer",
                      Path("/usr/local/cuda/bin/compute-sanitizer")]:
        if candidate.exists():
            return str(candidate)
    found = shutil.which("compute-sanitizer")
    if not found:
        raise SystemExit("SANITIZE=1 and RACECHECK=1 need compute-sanitizer (part of the CUDA toolkit), which is not installed here")
    return found


def sanitizer_errors(output: str) -> str:
    """The first errors compute-sanitizer reported, e.g. 'Invalid __global__ write of size 4 bytes
    at leaky_relu_kernel<float>(...)+0x2d0 ... Address 0x7f... is out of bounds', or '' if none."""
    lines = [l.removeprefix("=========").strip() for l in output.splitlines() if l.startswith("=========")]
    first = [i for i, l in enumerate(lines) if l.startswith(("Invalid ", "Misaligned ", "Malloc/Free error",
                                                             "Error: Race reported", "Warning: Race reported"))]
    if not first:
        return ""
    i = first[0]
    return " | ".join(l for l in lines[i:i + 4] if l)[:600]


def _results_path(workdir: Path, exercise: str) -> Path:
    """Where a grading process writes its tests' outcomes as they finish."""
    return workdir / f"{exercise}.json"


def _judge_outputs_path(workdir: Path, exercise: str) -> Path:
    """Where a grading process saves its op's outputs on the judge's calls (grader.verify.judge)."""
    return workdir / f"{exercise}.judge.pt"


def _build_result_path(workdir: Path, exercise: str) -> Path:
    """Where the parent says how a grading process's builds went (grader.run.gate.wait_for_build)."""
    return workdir / f"{exercise}.build.json"


def _timed_outputs_path(workdir: Path, exercise: str) -> Path:
    """Where a grading process saves sampled elements of its timed outputs (grader.verify.judge)."""
    return workdir / f"{exercise}.timed.pt"


YARDSTICK = "yardstick"  # the name of the run's yardstick job (no exercise is named so)


def yardstick_job(references: dict[str, Path | None], workdir: Path, device: str | None = None,
                  last: bool = False) -> gate.Job:
    """The trusted process that times the reference, PyTorch and the device's limit for each of
    `references` (exercise -> reference folder, None without one; grader.run.yardstick); it waits for
    the references' builds and for the GPU. `last`: it times after the run's other jobs (gate.Job.last;
    else before them: gate.Job.light)."""
    out = workdir / f"{YARDSTICK}.json"
    out.unlink(missing_ok=True)
    _build_result_path(workdir, YARDSTICK).unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "grader.run.yardstick", "--out", str(out),
           *(e if ref is None else f"{e}={ref}" for e, ref in references.items())]
    child = _child_env(device)
    child[gate.BUILD_ENV] = str(_build_result_path(workdir, YARDSTICK))
    return gate.Job(YARDSTICK, cmd, child, env.REPO, light=not last, last=last)


def _timing_ran(workdir: Path, exercise: str) -> bool:
    """Whether the exercise's grading process ran its timing (passed or failed; not skipped, as when a
    check it requires failed, nor cut short before it)."""
    try:
        tests = read_results(_results_path(workdir, exercise))["tests"]
    except (OSError, ValueError, KeyError, TypeError):
        return False
    return any(t.name == "performance" and t.ran for t in tests)


def read_results(path: Path) -> dict:
    """A grading process's results file (grader.verify.results.ResultsRecorder): its tests as
    TestOutcomes, and what it was running and found tampered with."""
    data = json.loads(Path(path).read_text())
    return {**data, "tests": [TestOutcome.from_json(t) for t in data["tests"]]}


def read_yardstick(job: gate.Job, workdir: Path) -> dict[str, dict]:
    """The yardstick's numbers by exercise; an exercise it could not measure gets {"error": why}
    (its speed then cannot be scored)."""
    try:
        return json.loads((workdir / f"{YARDSTICK}.json").read_text())
    except (OSError, ValueError):
        tail = " ".join((job.output or "").strip().splitlines()[-3:])[-300:]
        return {"*": {"error": "the reference timing failed" + (f": {tail}" if tail else "")}}


def grading_job(exercise: str, exercise_dir: Path, workdir: Path, options: GradeOptions,
                device: str | None = None, part: tuple[int, int] = (0, 1), first_share: float | None = None) -> gate.Job:
    """The process that grades one exercise folder (run by grader.run.gate, which contains its crashes
    and hangs); `grading_row` scores it once it ended. It may start before the folder is built: it
    waits, before loading the exercise, for the parent to write `_build_result_path`. Of `options`,
    it takes the seed, the keyword (pytest's -k), quick, sanitize and first_failure.

    `options.sanitize` runs the correctness checks (not the timing, not the slow checks) under
    compute-sanitizer's memcheck, with PyTorch's caching allocator off so that every tensor is its
    own allocation: a write past the end of an output is caught even when the answer is right.
    `sanitize="racecheck"` runs compute-sanitizer's racecheck instead, on the checks marked
    `racecheck` (grader/run/suite/conftest.py: every op's fixed small calls, forward and backward, and the
    specs' checks named "racecheck", shapes where a block's shared tile is reused): a shared-memory
    hazard between threads (a missing barrier) is reported even when every answer happens to be right.

    `options.first_failure` stops the process at its first failed check (pytest's -x): not a grade (the
    checks after it are not run), but all a mutant needs to be known killed (grader.run.mutants).

    `part` (i, n): this process runs every n-th of the checks from the i-th (`--shard`); part 0 also the
    timing and the judge's recordings, under the exercise's own file names (`merge_parts` joins them), and
    with `first_share` (`first_shares`) that fraction of the checks, the others the rest in equal parts."""
    if options.seed is None:
        raise ValueError("a grading process needs the run's seed (GradeOptions.seed)")
    seed, keyword, sanitize = options.seed, options.keyword, options.sanitize
    name = part_name(exercise, part[0])
    results_path = _results_path(workdir, name)
    results_path.unlink(missing_ok=True)
    _build_result_path(workdir, name).unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "pytest", str(env.REPO / "grader" / "run" / "suite"), "-q", "-p", "no:cacheprovider",
           f"--rootdir={env.REPO}", f"--exercise-dir={exercise_dir}", f"--seed={seed}", f"--results={results_path}"]
    if part[0] == 0:
        _judge_outputs_path(workdir, exercise).unlink(missing_ok=True)
        _timed_outputs_path(workdir, exercise).unlink(missing_ok=True)
        cmd += [f"--judge-outputs={_judge_outputs_path(workdir, exercise)}",
                f"--timed-outputs={_timed_outputs_path(workdir, exercise)}"]
    if part[1] > 1:
        cmd.append(f"--shard={part[0]}/{part[1]}")
        if first_share is not None:
            cmd.append(f"--first-share={first_share:.4f}")
    if keyword:
        cmd += ["-k", keyword]
    if sanitize == RACECHECK:
        cmd += ["-m", "racecheck and not slow and not huge"]
    elif options.quick or sanitize:
        cmd += ["-m", "not slow"]
    if options.first_failure:
        cmd.append("-x")
    if options.skip_lost_groups:
        cmd.append("--skip-lost-groups")
    cmd.append("--durations=5")  # in the log: where grading time goes
    child = _child_env(device)
    child[gate.BUILD_ENV] = str(_build_result_path(workdir, name))
    child["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"  # the suite needs no installed plugin; loading them costs
    if sanitize == RACECHECK:
        # hazards between threads of a block in shared memory; the caching allocator may stay on
        cmd = [find_sanitizer(), "--tool", "racecheck", "--racecheck-report", "analysis", "--error-exitcode",
               str(SANITIZER_EXIT), "--print-limit", "10", "--target-processes", "all", *cmd]
        child.update(COURSE_SANITIZE="1")
    elif sanitize:
        # memory errors only: PyTorch's own probing of the CUDA API would otherwise be reported too
        cmd = [find_sanitizer(), "--tool", "memcheck", "--report-api-errors", "no", "--error-exitcode",
               str(SANITIZER_EXIT), "--print-limit", "10", "--target-processes", "all", *cmd]
        child.update(PYTORCH_NO_CUDA_MEMORY_CACHING="1", COURSE_SANITIZE="1")
    # under compute-sanitizer one check may run minutes: only the time limit applies there
    # it waits for its build before its checks (wait_for_build): it may start up ahead of its slot
    return gate.Job(name, cmd, child, env.REPO, progress=results_path, stall_s=None if sanitize else options.stall,
                    may_queue=True)


def part_name(exercise: str, part: int) -> str:
    """A grading process's name (its files' names): the exercise's for part 0, `<exercise>.part<i>` for others."""
    return exercise if part == 0 else f"{exercise}.part{part}"


MAX_PARTS = 4  # an exercise's checks over at most this many processes (each pays its own start-up)
MIN_PART_S = 10.0  # and each part at least this many seconds of its checks: 01-04's take seconds in all
STARTUP_S = 6.0  # a grading process's start-up before its first check (torch, CUDA, the extension)
# A first warm grade's estimate of each exercise's check time, before this GPU has measured its own (a grade
# that built nothing records them: record_check_seconds): the reference solutions' grading processes on an
# H200 (2026-11-30, `make grade TARGET=solutions`, warm, fourteen at once: each process's time less its waits,
# its timing and one start-up). Relative costs are what plan_parts uses, and they hold across GPUs better
# than sources' sizes do (05 has twice 09's sources and a third of its checks' time).
FIRST_GRADE_SECONDS = {"01_leaky_relu": 3.9, "02_elu": 2.9, "03_transpose": 1.0, "04_stencil2d": 1.2,
                       "05_matmul": 47.0, "06_conv2d": 73.3, "07_conv_transpose2d": 72.2,
                       "08_conv_bn_relu_inference": 19.1, "09_conv_bn_relu_training": 124.3, "10_cudnn_conv": 72.5}
# Part 0's own work beside its share of the checks (the judge's recordings and last calls), in seconds, before
# this GPU has measured its own (record_check_seconds): 09's part 0 ran 45.8 s of checks and recordings where
# its three other parts ran 37.0-37.3 s (H200 host of two, 2026-11-30, warm, d24cd8b); the others' part 0
# ended with their other parts, within the spread of the parts' own checks.
FIRST_PART0_EXTRA = {"09_conv_bn_relu_training": 8.6}
PART0_KEY = "part 0's extra"  # in CHECK_SECONDS, beside the exercises' seconds: {exercise: seconds}
BYTES_PER_CHECK_SECOND = 1300.0  # an exercise not in the table: from its sources' size (about the table's ratio)
# each machine's last full grade's check time per exercise, by GPU: {device name: {exercise: seconds}}
CHECK_SECONDS = env.BUILD_ROOT / "check-seconds.json"
FP64_ENV = "COURSE_COUNT_FP64"  # grader.verify.fp64.ENV, named here without importing torch: counts per process


def _recorded(device_name: str) -> dict:
    """This GPU's entry of CHECK_SECONDS (record_check_seconds), {} where there is none or it cannot be read."""
    try:
        mine = json.loads(CHECK_SECONDS.read_text()).get(device_name, {})
    except (OSError, ValueError, AttributeError):
        return {}
    return mine if isinstance(mine, dict) else {}


def check_weights(target: Path, exercises: Sequence[str], device_name: str) -> dict[str, float]:
    """Each exercise's check time in seconds, as this GPU's last full grade measured it (CHECK_SECONDS),
    else FIRST_GRADE_SECONDS, else estimated from its sources' size."""
    measured = _recorded(device_name)
    out = {}
    for e in exercises:
        known = measured.get(e)
        out[e] = (float(known) if isinstance(known, (int, float)) else FIRST_GRADE_SECONDS.get(e)
                  or _source_bytes(target / e) / BYTES_PER_CHECK_SECOND)
    return out


def part0_extras(exercises: Sequence[str], device_name: str) -> dict[str, float]:
    """Each exercise's part-0 extra seconds (the judge's recordings), as this GPU's last full grade measured
    them (CHECK_SECONDS), else FIRST_PART0_EXTRA, else 0."""
    measured = _recorded(device_name).get(PART0_KEY)
    measured = measured if isinstance(measured, dict) else {}
    return {e: float(measured.get(e, FIRST_PART0_EXTRA.get(e, 0.0))) for e in exercises}


def first_shares(weights: dict[str, float], extras: dict[str, float], parts: dict[str, int]) -> dict[str, float]:
    """For each exercise in several parts whose part 0 has extra work (`extras`), the fraction of its checks
    part 0 takes so that every part ends together: the checks' seconds T (its weight less the extra) and
    the extra J over n parts give each (T + J) / n, part 0's checks (T + J) / n - J (none below 0)."""
    out = {}
    for e, n in parts.items():
        checks, extra = weights.get(e, 0.0) - extras.get(e, 0.0), extras.get(e, 0.0)
        if n > 1 and extra > 0 and checks > 0:
            out[e] = max(0.0, min(1.0 / n, ((checks + extra) / n - extra) / checks))
    return out


def record_check_seconds(rows: Sequence[ExerciseRow], jobs: dict[str, list], device_name: str,
                         built: bool = False, shares: dict[str, float] | None = None) -> None:
    """Each exercise's check time where every check ran to its end (no test failed: a failing check stops at
    its first wrong answer, so a stub's or a half-done exercise's seconds would say little): its processes'
    running time (less their waits for the builds, the GPU and the lock of the largest checks, and the timing
    alone on the GPU, which no split shortens) less one start-up each, kept for the next grade's plan_parts on this GPU. (The tests' own seconds leave out the
    fixtures and the collection a process spends beside them.) Not from a grade that `built` anything: its
    checks met another load (processes waiting on their builds leave the GPU to the rest, compilers take
    cores): on the H200, 10 measured 43 s cold and 61 s warm, and a warm grade planned by the cold one's
    seconds left 06 unsplit, its longest process (2026-11-30)."""
    if built:
        return
    seconds, extras = {}, {}
    for row in rows:
        parts = jobs.get(row.exercise, ())
        if row.status == "graded" and parts and not any(t.outcome == "failed" for t in row.tests):
            running = [job.wall_s - job.held_s - job.waited_s - job.timed_s - job.after_s - STARTUP_S for job in parts]
            seconds[row.exercise] = round(max(0.0, sum(running)), 1)
            if len(parts) > 1:  # part 0's extra: what it ran beyond its share of the others' checks
                share = (shares or {}).get(row.exercise, 1.0 / len(parts))
                checks = sum(running[1:]) / (1.0 - share)
                extras[row.exercise] = round(min(max(0.0, running[0] - share * checks), checks), 1)
    if not seconds:
        return
    try:
        known = json.loads(CHECK_SECONDS.read_text())
        known = known if isinstance(known, dict) else {}
    except (OSError, ValueError):
        known = {}
    mine = known.get(device_name) if isinstance(known.get(device_name), dict) else {}
    earlier = mine.get(PART0_KEY) if isinstance(mine.get(PART0_KEY), dict) else {}
    known[device_name] = {**mine, **seconds, PART0_KEY: {**earlier, **extras}}
    try:
        write_json_atomic(CHECK_SECONDS, known)
    except OSError:
        pass  # a read-only build folder: the next grade estimates from the sources again


def plan_parts(weights: dict[str, float], parallel: int) -> dict[str, int]:
    """Grading processes per exercise, for `weights` (each exercise's check time, seconds) and `parallel`
    processes running checks at once: the exercise with the most seconds per process gets one more while
    it has at most MAX_PARTS, each part keeps MIN_PART_S, and the machine's slots still hold every
    process's work within the new longest part (sum of the work and start-ups <= parallel x that). A
    grade ends with its longest part's checks; an exercise done with its checks frees its slot for a
    part started after it, so there may be more processes than `parallel` (started longest first)."""
    parts = {e: 1 for e in weights}
    if not parts:
        return parts

    def fits(plan: dict[str, int]) -> bool:
        longest = max(weights[e] / plan[e] for e in plan) + STARTUP_S
        return sum(weights[e] + STARTUP_S * plan[e] for e in plan) <= parallel * longest + 1e-6

    while True:
        chosen = max(parts, key=lambda e: weights[e] / parts[e])
        if parts[chosen] >= MAX_PARTS or weights[chosen] / (parts[chosen] + 1) < MIN_PART_S:
            return parts  # the longest cannot be shared further: no other split shortens the grade
        trial = {**parts, chosen: parts[chosen] + 1}
        if not fits(trial):
            return parts
        parts = trial


def merge_parts(exercise: str, jobs: list[gate.Job], workdir: Path) -> gate.Job:
    """The parts of one exercise's grading as one process would have left them: every part's tests in the
    exercise's results file (part 0's, which holds the timing), and one job that crashed, hung or was
    stopped if any part was. A part without a readable results file (it died before collecting its
    checks) leaves the exercise none: its checks are not scored as if they had not been asked."""
    tests, running, tampered, whole = [], None, [], True
    for job in jobs:
        try:
            data = json.loads(_results_path(workdir, job.name).read_text())
            tests += data["tests"]
        except (OSError, ValueError, KeyError, TypeError):
            whole = False
            continue
        running = running or data.get("running")
        tampered += [t for t in data.get("tampered") or [] if t not in tampered]
    write_json_atomic(_results_path(workdir, exercise),
                      {"tests": tests if whole else [], "running": running, "tampered": tampered})
    codes = [j.returncode for j in jobs if j.returncode not in (0, 1)]
    merged = gate.Job(exercise, jobs[0].cmd, jobs[0].env, jobs[0].cwd,
                      returncode=min(codes, key=lambda c: (c or 0) >= 0) if codes else jobs[0].returncode,
                      timed_out=any(j.timed_out for j in jobs), stall_s=jobs[0].stall_s,
                      stalled=any(j.stalled for j in jobs),
                      output="\n".join(f"--- part {k} of {len(jobs)} ({j.name}) ---\n{j.output}"
                                        for k, j in enumerate(jobs)))
    for field_ in ("active_s", "waited_s", "held_s", "timed_s", "after_s", "wall_s"):
        setattr(merged, field_, max(getattr(j, field_) for j in jobs))
    return merged


SASS_READ = "sass"  # the build result's word that the grader read the library (grader/run/suite/conftest.py)


def read_library_when_built(exercise: str, folder: Path, build_done: Future, chosen, pool: ThreadPoolExecutor,
                            device: str | None, library_code: dict) -> Future:
    """Once `folder`'s build is done, and before any grading process loads it: where the exercise's spec has
    instruction checks (grader.verify.sass.InstructionCheck), read its library (cuobjdump, in `pool`) into
    `library_code[exercise]` = (SASS, PTX, the GPU's compute capability) for instruction_verdicts. The future
    gives {"ok": True, "read": whether it was read}: a library the grader could not read (no cuobjdump here)
    leaves the check to the grading process, as before."""
    done: Future = Future()

    def read() -> None:
        from grader.verify import sass

        try:
            spec = chosen.specs().get(exercise)
            needed = spec is not None and any(sass.instruction_of(c.run) for c in spec.checks())
            capability = env.device_capability(device) if needed else None
            if needed and capability and build_done.result().get("ok"):
                library_code[exercise] = (*sass.read_library(sass.library_of(folder)), capability)
        except Exception:  # noqa: BLE001: no cuobjdump, an unreadable file: the grading process reads it, as it did
            library_code.pop(exercise, None)
        done.set_result({"ok": True, "read": exercise in library_code})

    build_done.add_done_callback(lambda _f: pool.submit(read))
    return done


def instruction_verdicts(spec: Spec, tests: Sequence[TestOutcome], sass_code: list, ptx_code: list,
                         capability: tuple[int, int]) -> list[TestOutcome]:
    """The judge's word on each instruction check (grader.verify.sass.InstructionCheck) that ran in the grading
    process, from the library as the grader read it before that process loaded it: the process, told so,
    passes the check at once (its submitted code could have replaced the file on disk since)."""
    from grader.verify import sass
    from grader.verify.judge import JUDGE_PREFIX, RECHECKED

    ran = {t.name: t for t in tests}
    out = []
    for check in spec.checks():
        need = sass.instruction_of(check.run)
        if need is None or check.name not in ran or not ran[check.name].ran:
            continue
        found = sass.problem(sass_code, ptx_code, need, capability)
        out.append(TestOutcome(JUDGE_PREFIX + check.name, check.group, "failed", RECHECKED + found) if found
                   else TestOutcome(JUDGE_PREFIX + check.name, check.group, "passed"))
    return out


def grading_row(spec: Spec, job: gate.Job, workdir: Path, timeout: float, sanitize: bool | str = False,
                seed: int | None = None, yardstick: dict | None = None, device: str | None = None,
                strict: bool = False, library_code: tuple | None = None, references=None) -> ExerciseRow:
    """Score an ended grading process: its tests, or why it crashed, hung, erred or was tampered with.
    With the run's `seed` (on a GPU), the judge re-checks the op's saved outputs here, where the
    submission's code never ran (grader.verify.judge; `references`, its answers for this spec and seed,
    may have been computed ahead): its verdicts join the tests of their groups, and the
    timing's raw numbers are put beside the `yardstick`'s (grader.run.yardstick) to be scored. Without
    (no GPU), nothing can be re-checked, and a GPU check's "passed" is not believed."""
    results_path = _results_path(workdir, spec.exercise)
    output = job.output
    status, error = "graded", ""
    if job.stalled:
        status, error = "timed out", (f"a check ran {job.stall_s:g} s without ending, and no other started "
                                      "(a hanging kernel or an endless loop?)")
    elif job.timed_out:
        status, error = "timed out", f"grading took longer than {timeout:g} s (a hanging kernel or an endless loop?)"
    data = {"tests": [], "running": None}
    if results_path.exists():
        try:
            data = read_results(results_path)
        except (ValueError, KeyError, TypeError) as e:  # written atomically by the grader: not its file
            status, error = "tampered", (f"its results file is not one the grader writes "
                                         f"({type(e).__name__}: {str(e)[:200]})")
    tests: list[TestOutcome] = data["tests"]
    if job.returncode is not None and job.returncode < 0 and status == "graded":
        sig = signal.Signals(-job.returncode).name
        status, error = "crashed", f"the grading process died with {sig}"
    elif job.returncode not in (0, 1) and status == "graded" and not tests:
        status, error = "error", _tail(output)
    found = sanitizer_errors(output) if sanitize else ""
    if sanitize and (found or job.returncode == SANITIZER_EXIT):
        status = "shared memory races" if sanitize == RACECHECK else "memory errors"
        error = f"compute-sanitizer{' racecheck' if sanitize == RACECHECK else ''}: " + (found or "errors reported (see the log)")
    if data.get("tampered"):
        shown = ", ".join(data["tampered"][:5]) + (" ..." if len(data["tampered"]) > 5 else "")
        status, error = "tampered", f"the submission replaced functions the grader relies on: {shown}"
    if status in ("crashed", "timed out"):
        running = data.get("running")
        if running:
            error += f" while running {running}"
        # keep the finished tests: the crash costs the unfinished ones, not the exercise's record
        tests = [t.with_outcome("failed", error) if t.outcome == "not run" else t for t in tests]
        if tests:
            status = "graded"
    if seed is not None and status == "graded":
        from grader.verify import judge  # imports torch: the specs, loaded by now, did already

        tests += judge.verdicts(spec, seed, _judge_outputs_path(workdir, spec.exercise), tests, references)
        if library_code is not None:
            tests += instruction_verdicts(spec, tests, *library_code)
        tests, timing = timing_tests(spec, tests, yardstick or {}, _timed_outputs_path(workdir, spec.exercise), device)
        tests += timing
    elif seed is None:
        on_gpu = {c.name for c in spec.checks() if c.needs_gpu} | {"performance"}
        tests = [t.with_outcome("skipped", "a GPU check cannot have passed without a GPU")
                 if t.name in on_gpu and t.outcome == "passed" else t for t in tests]
    row = score_exercise(spec, tests, status, error, strict)
    return replace(row, log=_tail(output, 20000))


def timing_tests(spec: Spec, tests: list[TestOutcome], yardstick: dict, timed_outputs: Path,
                 device: str | None) -> tuple[list[TestOutcome], list[TestOutcome]]:
    """(`tests` with the timing's raw numbers put beside the yardstick's for scoring (grader.verify.scoring),
    the timing's verdicts on correctness as tests of the groups they vouch for: the timed calls the
    grading process found wrong, and the parent's own re-check of sampled timed outputs)."""
    from grader.verify import judge
    from grader.verify.speed import combine

    at = next((i for i, t in enumerate(tests) if t.name == "performance"), None)
    if at is None or not tests[at].ran:
        return tests, []
    perf_test = tests[at]
    raw = perf_test.properties.get("performance") or {}
    if "rate" in raw and "error" in yardstick:
        raw = {**raw, "verdict": f"grader error: {yardstick['error']}"}
    combined = combine(raw, None if "error" in yardstick else yardstick)
    tests = [*tests[:at], replace(perf_test, properties={**perf_test.properties, "performance": combined}),
             *tests[at + 1:]]
    found = [TestOutcome("timed calls at the benchmark's shape", group, "failed", why)
             for group, why in (raw.get("wrong") or {}).items()]
    failed = perf_test.outcome == "failed"
    excused = failed and (bool(found) or "out of memory" in str(perf_test.reason).lower())
    return tests, found + judge.timed_verdicts(spec, timed_outputs, device, excused=excused)


def pytest_session_s(output: str) -> float | None:
    """The seconds pytest's summary line gives its session (`3 failed, 80 passed in 28.03s`), from a
    grading process's output; None when it has none (it crashed or was killed)."""
    found = re.findall(r"\bin (\d+(?:\.\d+)?)s\b", output[-2000:] if output else "")
    return float(found[-1]) if found else None


def _tail(text: str, limit: int = 3000) -> str:
    return text[-limit:] if text else ""


def resource_reports(target: Path, rows: list[ExerciseRow], cc: str | None) -> None:
    """Each built exercise's resource report (grader.run.resources) into its row, in place in `rows`;
    never fails the grade."""
    from grader.run import resources

    for i, row in enumerate(rows):
        if row.status in ("build failed", "missing"):
            continue
        try:
            report = resources.exercise_report(target / row.exercise, cc)
        except Exception as e:  # the report is advice: a bug in it must not cost a grade
            report = {"error": f"{type(e).__name__}: {e}"}
        rows[i] = replace(row, resources=report)


GIB_PER_PROCESS = gate.MEMORY_CAP_GIB  # free GPU memory to allow per grading process that runs its checks (its cap)
CORES_SPARED, PARALLEL_MAX = 2, 16  # default_parallel: the cores less two (the parent, the builds), at most 16
# PARALLEL's default as the Makefile, the README and `python -m grader --help` state it (tests/test_messages.py)
PARALLEL_DEFAULT = (f"the cores less {CORES_SPARED}, at most {PARALLEL_MAX}, "
                    f"one per {GIB_PER_PROCESS:g} GiB of free GPU memory")
# What a grading process still holds once its checks are done and it waits for its timing: its CUDA
# context with cuBLAS and cuDNN loaded (0.7 GiB measured on an H100)
GIB_PER_WAITING_PROCESS = 1.0


def default_parallel(count: int) -> int:
    """How many of `count` exercises run their checks at once: as many as there are cores less two
    (a grading process keeps about one busy), at most 16, and one per 7.5 GiB of free GPU memory, so
    that the check that needs 8.8 GiB (one at a time) still finds it beside the others (a 16 GB T4
    grades one at a time, a 24 GB card two or three, an 80 GB H100 all ten). All at once where that
    fits: each timing waits for every running check to end, and a process started later makes every
    other one wait for its checks. `python -m grader` prints the most memory each exercise's checks
    held."""
    n = min(count, max(1, env.usable_cores() - CORES_SPARED), PARALLEL_MAX)
    if n <= 1:
        return 1
    free = env.gpu_free_gib()
    if free is not None:
        n = min(n, int(free // GIB_PER_PROCESS))
    return max(1, n)


def default_resident(parallel: int) -> int | None:
    """How many grading processes may be alive at once: `parallel` running their checks, and beside
    them those done with their checks that wait for their turn to time, each still holding a CUDA
    context. Unbounded, all ten waited on a card with 7.5 GiB free and the checks running beside
    them ran out of memory (measured). None where the free memory is unknown."""
    free = env.gpu_free_gib()
    if free is None:
        return None
    return parallel + max(0, int((free - parallel * GIB_PER_PROCESS) // GIB_PER_WAITING_PROCESS))


def selects_performance(keyword: str | None) -> bool:
    """Whether a pytest `-k` expression keeps the timing test (as pytest matches it: by substring of
    the test's name and markers)."""
    if not keyword:
        return True
    from _pytest.mark.expression import Expression

    names = ("test_performance", "performance", "slow", "gpu", "test_exercise.py")
    try:
        return Expression.compile(keyword).evaluate(lambda sub, *_: any(sub in n for n in names))
    except Exception:  # an expression pytest itself will reject: time as if selected
        return True


def release_when_built(jobs: dict[str, gate.Job], waits: list[tuple[str, dict[str, Future], Path]]) -> None:
    """For each (job name, the builds it needs, its build-result file): once those builds are done (at
    once when it needs none), write what built into the file its process waits for and release the
    job (its clock runs again). Each job is settled once, whichever build finishes last."""
    lock = threading.Lock()
    settled: set[str] = set()

    def settle(name: str, needs: dict[str, Future], result_file: Path) -> None:
        with lock:
            if name in settled or not all(f.done() for f in needs.values()):
                return
            settled.add(name)
        try:
            ok = {k: {key: v for key, v in f.result().items() if key in ("ok", "read")} for k, f in needs.items()}
            write_json_atomic(result_file, {"ok": all(v["ok"] for v in ok.values()), **ok})
        finally:
            jobs[name].held = False

    for name, needs, result_file in waits:
        for f in needs.values():
            f.add_done_callback(lambda _f, a=(name, needs, result_file): settle(*a))
        settle(name, needs, result_file)


def judge_ahead(chosen: Selection, exercises: Sequence[str], seed: int) -> dict:
    """The judge's answers (grader.verify.judge.References) for `exercises` and `seed`, computed in a thread
    of this process, in that order, while the grading processes run their checks: they depend on nothing a
    submission does, and scoring at the end then only compares. Returns a dict that holds each exercise's
    References once its spec has loaded (scoring makes its own for one still missing). One core's worth:
    the cores less CORES_SPARED run the checks."""
    answers: dict = {}

    def compute() -> None:
        import torch

        from grader.verify import judge

        loaded = chosen.specs()
        answers.update({e: judge.References(loaded[e], seed) for e in exercises if e in loaded})
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            for e in exercises:
                if e in answers:
                    with contextlib.suppress(Exception):  # a grader fault: scoring meets it again and reports it
                        answers[e].compute_all()
        finally:
            torch.set_num_threads(threads)  # the scoring threads, started later, take every core again

    threading.Thread(target=compute, name="judge ahead", daemon=True).start()
    return answers


def grade_target(target: Path, specs: Sequence[Spec] | Selection, options: GradeOptions, *,
                 device: str | None = None, yardsticks: dict | None = None, log=print,
                 compiling=None) -> list[ExerciseRow]:
    """Build and grade every selected exercise of one target folder; one row per exercise, graded
    under `options` (its seed must be set; `options.parallel` None: `default_parallel`).

    Each grading process starts at once, beside the builds: it imports torch and collects its
    checks while its exercise (and the reference it is timed against) compiles, then waits for the
    parent's word, its clock stopped (grader.run.gate). `specs` may be a Selection whose specs are still
    importing: they are needed only to score. `device` (a CUDA_VISIBLE_DEVICES entry) pins the
    grading processes to one GPU. `options.parallel` exercises run their checks at once, and each timing
    runs alone on the GPU, never beside a build; the rows are those of a serial run (`parallel` 1).
    The reference, PyTorch and the device's limit are timed by a yardstick process (grader.run.yardstick)
    once the grading processes have ended, for the exercises whose timing ran; `yardsticks`, a dict
    kept by the caller across calls, holds its numbers by (device, exercise), so that a class's
    students are measured against one yardstick per GPU.
    `compiling()` says whether other builds still run on this machine (grader.run.gate.run)."""
    chosen = specs if isinstance(specs, Selection) else Selection.of(specs)
    seed, timeout, jobs, keyword, sanitize = options.seed, options.timeout, options.jobs, options.keyword, options.sanitize
    gpu = env.gpu_present()
    present = [e for e in chosen.exercises if (target / e).is_dir()]
    # processes the machine runs at once left over by the exercises share their longest checks (only where
    # the parallelism is the grader's own choice: a class and a mutant round give theirs; not under
    # compute-sanitizer, nor when one failure ends a process, nor while float64 work is counted per process)
    # (nvidia-smi, by name: not on the quick edit loop, which estimates from the sources and measures nothing)
    device_name = env.device_name() if gpu and not options.quick else ""
    weights = check_weights(target, present, device_name)
    splittable = any(w / 2 >= MIN_PART_S for w in weights.values())  # else no need to ask for the slots
    if (options.parallel is None and splittable and not sanitize and not options.first_failure
            and not os.environ.get(FP64_ENV)):
        parts = plan_parts(weights, default_parallel(PARALLEL_MAX))
    else:
        parts = {e: 1 for e in present}
    shares = first_shares(weights, part0_extras(present, device_name), parts)  # part 0's, where it does more
    parallel = max(1, options.parallel if options.parallel is not None
                   else default_parallel(max(len(chosen.exercises), sum(parts.values()))))
    # a full grade on a GPU measures each exercise's check time for the next one's plan
    measuring = (gpu and options.parallel is None and not options.quick and not keyword and not sanitize
                 and not options.first_failure)
    if os.environ.get(paths.ENV):  # each process adds the planner paths it took: none from an earlier run
        for e in present:
            Path(os.environ[paths.ENV].replace("{exercise}", e)).unlink(missing_ok=True)
    solutions = env.REPO / "solutions"
    timed = gpu and not options.quick and not sanitize and selects_performance(keyword)
    yardsticks = {} if yardsticks is None else yardsticks
    references: dict[str, Path | None] = {}  # exercise -> the reference its yardstick times (None: PyTorch's x ratio)
    for e in present if timed else []:
        if (device, e) in yardsticks:
            continue  # measured earlier in this run on this GPU
        if (solutions / e).resolve() == (target / e).resolve():
            references[e] = target / e  # grading the solutions: each is its own reference (built once)
        else:
            references[e] = solutions / e if (solutions / e).is_dir() else None
    # the judge's answers, computed while the grading processes run their checks (None without a GPU: no verdicts)
    judge_answers = judge_ahead(chosen, sorted(present, key=lambda e: -weights.get(e, 0.0)), seed) if gpu else None
    # each exercise and each reference a yardstick times
    to_build = [d for d in [*(target / e for e in present), *references.values()] if d is not None]
    log(f"building {len(dict.fromkeys(to_build))} extension(s), {jobs} at a time ...")
    with tempfile.TemporaryDirectory(prefix="course-grade-") as tmp:
        tmp = Path(tmp)
        # the libraries' reads (read_library_when_built) in a pool of their own: not behind a build still queued
        with ThreadPoolExecutor(max_workers=max(1, jobs), thread_name_prefix="build") as pool, \
                ThreadPoolExecutor(max_workers=4, thread_name_prefix="library") as readers:
            part_jobs = {e: [grading_job(e, target / e, tmp, options, device, (k, parts[e]), shares.get(e))
                             for k in range(parts[e])] for e in present}
            gradings = {e: jobs_[0] for e, jobs_ in part_jobs.items()}
            jobs_by_name = {job.name: job for jobs_ in part_jobs.values() for job in jobs_}
            exercise_of = {job.name: e for e, jobs_ in part_jobs.items() for job in jobs_}
            if "OMP_NUM_THREADS" not in os.environ:
                # PyTorch's CPU ops (references, the judge's inputs) would each take every core, and
                # `parallel` processes doing so at once spend their time preempting one another
                share = max(1, env.usable_cores() // max(1, min(parallel, len(jobs_by_name))))
                for job in jobs_by_name.values():
                    job.env["OMP_NUM_THREADS"] = str(share)
            for job in jobs_by_name.values():
                job.held = True
            # the longest builds first (09's and 10's, not after 01-08's): a grade's critical path is its
            # slowest exercise's build and checks
            builds = start_builds(to_build, jobs, pool, log, longest_first=True)
            # the tensor-core groups' instruction, read from each library as built before its processes load it
            library_code: dict[str, tuple] = {}
            reads = {e: read_library_when_built(e, target / e, builds[target / e], chosen, readers, device, library_code)
                     for e in present} if gpu else {}
            release_when_built(jobs_by_name, [(name, {e: builds[target / e], **({SASS_READ: reads[e]} if e in reads else {})},
                                               _build_result_path(tmp, name)) for name, e in exercise_of.items()])
            if len(gradings) > 1 and parallel <= 1 and timed:
                # one after another: build everything first, so that no timing runs beside a compiler
                wait_all(builds.values())
            if len(gradings) > 1 and parallel > 1:
                log(f"grading {len(gradings)} exercises, up to {parallel} at a time (each timing alone on the GPU) ...")
            split = {e: n for e, n in parts.items() if n > 1}
            if split:
                log("checks shared by several processes: " + ", ".join(f"{e} by {n}" for e, n in split.items()))

            def done(job: gate.Job) -> None:
                if job.name not in exercise_of:
                    return
                own = builds[target / exercise_of[job.name]]
                if own.done() and not own.result()["ok"]:
                    return  # reported as a failed build
                notes = [f"{s:.1f} s of it {what}" for s, what in
                         ((job.held_s, "waiting for its build or a slot"), (job.waited_s, "waiting for the GPU"),
                          (job.timed_s, "timing alone on the GPU")) if s >= 0.1]
                try:
                    peak = peak_check_mib(json.loads(_results_path(tmp, job.name).read_text()))
                except (OSError, ValueError):
                    peak = 0
                if peak:
                    notes.append(f"its largest check held {peak / 1024:.1f} GiB of the GPU")
                session = pytest_session_s(job.output)
                outside = job.wall_s - job.held_s - job.waited_s - job.after_s - (session or 0.0)
                if session is not None and outside >= 5:  # start-up and exit, which should take seconds
                    notes.append(f"{session:.1f} s in pytest's session, {outside:.1f} s outside it")
                log(f"  graded {job.name} in {job.wall_s:.1f} s" + (f" ({'; '.join(notes)})" if notes else ""))

            # the longest parts first: a process started once another's checks end must not be the last to end
            ordered = sorted(jobs_by_name.values(), key=lambda job: -weights[exercise_of[job.name]] / parts[exercise_of[job.name]])
            # (the bound on processes alive matters only where some wait for a slot)
            resident = default_resident(parallel) if len(ordered) > parallel else None
            # The yardstick, a job of the same run: started beside the checks, it times once every grading
            # process has ended (no submitted code is alive), the exercises whose timing ran (a stub's does
            # not: its checks fail first, and its grade does not wait for its reference's timing)
            stick = None
            if references:
                stick = yardstick_job(references, tmp, device, last=True)
                stick.held = True
                stick.go_text = lambda: json.dumps(sorted(e for e in references if _timing_ran(tmp, e)))
                release_when_built({stick.name: stick}, [(stick.name, {e: builds[ref] for e, ref in references.items()
                                                                      if ref is not None},
                                                          _build_result_path(tmp, YARDSTICK))])
            gate.run(ordered + ([stick] if stick is not None else []), tmp, parallel=parallel, resident=resident,
                     compiling=compiling,
                     timeout=timeout, on_finish=done)
        for e, jobs_ in part_jobs.items():
            if len(jobs_) > 1:
                gradings[e] = merge_parts(e, jobs_, tmp)
        timed_here = {e: ref for e, ref in references.items() if _timing_ran(tmp, e)}
        if timed_here:
            log(f"  timed the reference of {len(timed_here)} exercise(s) beside PyTorch and the device's limit "
                f"in {stick.timed_s:.1f} s")
            measured = read_yardstick(stick, tmp)
            for e in timed_here:
                yardsticks[(device, e)] = measured.get(e) or measured.get("*") or {"error": "not measured"}
        # every build has ended here (a process may end before its build: no check needed it)
        loaded = chosen.specs()
        scoring_all = time.perf_counter()

        def score(e: str) -> ExerciseRow | None:
            s = loaded.get(e)
            if s is None:
                return None  # its spec failed to load (grader.specs.SPEC_ERRORS): not graded
            d = target / e
            if not d.is_dir():
                return score_exercise(s, [], "missing", f"no folder {d}")
            if not builds[d].result()["ok"]:
                row = score_exercise(s, [], "build failed", builds[d].result().get("error", ""))
            else:
                scoring = time.perf_counter()
                row = grading_row(s, gradings[e], tmp, timeout, sanitize, seed if gpu else None,
                                  yardsticks.get((device, e)), device, options.strict, library_code.get(e),
                                  judge_answers.get(e) if judge_answers is not None else None)
                scoring = time.perf_counter() - scoring
                if scoring >= 2:  # the judge's re-checks here, outside the grading process
                    log(f"  scored {e} in {scoring:.1f} s (the judge's re-checks in this process)")
            # fresh or cached, and how long it took (VERBOSE=1 says which)
            return replace(row, build={"cached": bool(builds[d].result().get("cached")),
                                       "wall_s": round(builds[d].result().get("wall_s") or 0.0, 1)})

        # side by side (the judge's float64 references, the outputs read back): every process has ended and the
        # yardstick is timed, so nothing here shares the GPU with a timing; a class's workers, one per GPU,
        # score in threads as well (the judge's own GPU work holds a lock)
        with ThreadPoolExecutor(max_workers=max(1, min(4, len(chosen.exercises))), thread_name_prefix="score") as scorers:
            scored = dict(zip(chosen.exercises, scorers.map(score, chosen.exercises)))
        rows: dict[str, ExerciseRow] = {e: row for e, row in scored.items() if row is not None}
        scoring_all = time.perf_counter() - scoring_all
        if scoring_all >= 2 and len(rows) > 1:  # after every process and the yardstick: a grade's last seconds
            log(f"  scored {len(rows)} exercises in {scoring_all:.1f} s")
    if measuring:
        record_check_seconds(list(rows.values()), part_jobs, device_name,
                             built=not all(f.result().get("cached") for f in builds.values()), shares=shares)
    return [rows[e] for e in chosen.exercises if e in rows]
