"""Build ahead of `nbgrader autograde`: every exercise folder that running a class's notebooks will
build, in parallel, so that their cells then find the builds cached.

    python -m grader.authoring.notebook_prebuild [NOTEBOOK ...] [--jobs N]   (default: every notebook under
                                                                   notebooks/submitted/)

A notebook that checks kernel 1 before kernel 2 is written builds its exercise once per state; this
reads the notebook's cells in order, as running them would, to find every such state.
"""
from __future__ import annotations

import argparse
import ast
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from grader import env
from grader.env import REPO
from grader.authoring.notebooks import SOLUTIONS, Course, parse_solution_cell

SUBMITTED = REPO / "notebooks" / "submitted"


@dataclass
class CourseCall:
    method: str  # "build", "check", "performance" or "throughput_sweep"
    exercise: str
    group: str | None = None  # course.check's group
    only: list[str] | None = None  # course.check's visible cases


# where each Course method that builds takes the exercise
_EXERCISE_ARGUMENT = {"build": 0, "check": 1, "performance": 0, "throughput_sweep": 0}


def _literal(node):
    try:
        return ast.literal_eval(node)
    except ValueError:
        return None  # a name or an expression: not known before the cell runs


def course_calls(source: str) -> list[CourseCall]:
    """The `course.<method>(...)` calls of a Python cell that build an exercise, in source order."""
    calls = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "course"
                and node.func.attr in _EXERCISE_ARGUMENT):
            continue
        args = [_literal(a) for a in node.args]
        keywords = {k.arg: _literal(k.value) for k in node.keywords}
        at = _EXERCISE_ARGUMENT[node.func.attr]
        exercise = args[at] if len(args) > at else keywords.get("exercise")
        if not isinstance(exercise, str):
            continue
        group = (args[0] if args else keywords.get("group")) if node.func.attr == "check" else None
        call = CourseCall(node.func.attr, exercise, group, keywords.get("only"))
        calls.append(((node.lineno, node.col_offset), call))
    return [call for _, call in sorted(calls, key=lambda c: c[0])]  # source order (ast.walk is breadth-first)


def builds_of(path: Path) -> list[Path]:
    """The exercise folders that running a notebook's cells in order will build, in that order.

    Course.build() builds the `%%solution` cells run so far, so a notebook that checks kernel 1 before
    kernel 2 is written builds that exercise once per state; a performance cell also loads the
    reference solution (solutions/, where present)."""
    import nbformat

    course = Course("prebuild", seed=1, quiet=True)
    folders: list[Path] = []
    for cell in nbformat.read(path, as_version=4).cells:
        if cell.cell_type != "code":
            continue
        try:
            parsed = parse_solution_cell(cell.source)
            if parsed:
                course.record(parsed)
                continue
            if cell.source.lstrip().startswith("%"):
                continue
            for call in course_calls(cell.source):
                folders.append(course.assemble(call.exercise))
                if call.method == "performance" and (SOLUTIONS / call.exercise).is_dir():
                    folders.append(SOLUTIONS / call.exercise)
        except (ValueError, KeyError, FileNotFoundError, SyntaxError):
            continue  # that cell fails when it runs, with its own message; the rest still builds
    return list(dict.fromkeys(folders))


def prebuild(paths: list[Path], jobs: int | None = None, log=print) -> dict[Path, dict]:
    """Build, in parallel, every exercise folder that running these notebooks will build (a class's
    submissions before `nbgrader autograde`, say): the notebooks then find their builds cached."""
    from grader.run.grading import build_all

    folders: list[Path] = []
    for path in paths:
        folders += builds_of(Path(path))
    folders = list(dict.fromkeys(folders))
    jobs = jobs or env.default_build_jobs()
    log(f"building {len(folders)} exercise folder(s) for {len(paths)} notebook(s), {jobs} at a time ...")
    return build_all(folders, jobs, log=log)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("notebooks", nargs="*", type=Path)
    parser.add_argument("--jobs", type=int, default=None, help="builds at a time (default: half the cores)")
    args = parser.parse_args(argv)
    paths = args.notebooks or sorted(SUBMITTED.glob("*/*/*.ipynb"))
    if not paths:
        print("no notebooks given, and none under notebooks/submitted/")
        return 1
    results = prebuild(paths, args.jobs)
    failed = [d for d, r in results.items() if not r["ok"]]
    print(f"{len(results) - len(failed)} of {len(results)} built or cached"
          + (f"; {len(failed)} failed (their cells will show the compiler's message)" if failed else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
