"""Going on after a fault the CUDA context does not survive.

A kernel that reads or writes outside its memory (an illegal address) leaves the process's CUDA context
unusable: every later CUDA call fails. Failing every check after it would cost a submission whose
version 2 reads past a tile's edge the points of versions 3 to 6 too, which had nothing wrong. So the
grading process, once the faulted check is recorded as failed, replaces itself (exec: the same process
id, log, time limit and gate for the grader) with a fresh one that skips every check already recorded
and runs the rest. At most MAX_RESUMES times per process: a submission that faults everywhere then has
its remaining checks failed as not run, naming the first fault (grader/run/suite/test_exercise.py).
Not under compute-sanitizer (it follows the process it started) nor when the run stops at its first
failure (pytest -x: a mutant is killed by that failure alone)."""
from __future__ import annotations

import json
import os
import sys

ENV = "COURSE_RESUMED_AFTER"  # JSON list of the checks whose faults earlier images of this process ended on
MAX_RESUMES = 4
FINISHED = ("passed", "failed", "skipped")

lost: list[str] = []  # the checks of this image whose kernel faulted
attempted = False  # restart() was called (and, since this image still runs, its exec failed)


def faulted_before() -> list[str]:
    """The checks earlier images of this grading process faulted in, in order ([] in the first)."""
    try:
        found = json.loads(os.environ.get(ENV) or "[]")
    except ValueError:
        return []
    return [str(x) for x in found] if isinstance(found, list) else []


def first_fault() -> str | None:
    """The first check that faulted in this process, in this image or an earlier one."""
    return next(iter(faulted_before() + lost), None)


def allowed() -> bool:
    return not os.environ.get("COURSE_SANITIZE") and len(faulted_before()) < MAX_RESUMES


def recorded(path) -> dict:
    """The results file (its JSON) as the earlier images left it; {} where there is none to read."""
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def finished(results: dict) -> set[str]:
    """The names of the tests a results file (its JSON) holds an outcome for."""
    return {t["name"] for t in results.get("tests", []) if t.get("outcome") in FINISHED}


def restart(faulted: str) -> None:
    """Replace this process with a fresh run of the same command that skips what is recorded (returns
    only if exec failed: the caller goes on, its later checks failed as not run)."""
    global attempted
    attempted = True
    sys.stdout.write(f"\n[a kernel faulted in {faulted}: the CUDA context is lost; going on in a fresh process "
                     f"({len(faulted_before()) + 1} of at most {MAX_RESUMES})]\n")
    sys.stdout.flush()
    sys.stderr.flush()
    child = dict(os.environ)
    child[ENV] = json.dumps(faulted_before() + [faulted])
    # the fresh image starts as a fresh process would: no descriptor of this one's but its standard
    # streams (the log), so none of the CUDA driver's keeps the faulted context's memory alive
    os.closerange(3, _max_fd())
    try:
        os.execve(sys.executable, [sys.executable, *sys.orig_argv[1:]], child)
    except OSError as e:
        sys.stdout.write(f"[could not start it: {e}]\n")


def _max_fd() -> int:
    import resource

    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return soft if 0 < soft < (1 << 20) else (1 << 16)
