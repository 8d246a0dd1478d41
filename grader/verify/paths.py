"""Planner paths: the branches of the solutions' launchers and planners, declared per spec, marked in the
sources, and observed while grading.

A launcher marks a branch with `course::took<scalar_t>("v5.splitk")` or `course::took("v4.streamk")`
(grader/toolchain/include/course/paths.h); each exercise's library keeps the set of branches it took and exports it
as `course_paths_taken()` (course/ops.h). A spec declares its branches in `Spec.paths`: name -> the dtypes
it must be reached in (`()` for a branch marked without a dtype). Three views, one home:

- `markers(folder)`: the names marked in an exercise folder's sources, and whether each carries a dtype
  (tests/test_coverage_paths.py: every marker declared, every declared path marked);
- `taken(library)`: what a loaded library recorded; `record(exercise_dir, out)`: written by the grading
  process at its end when COURSE_PATHS_OUT names a file (grader/run/suite/conftest.py);
- `unreached(spec, taken)`: each declared (path, dtype) no call in the process took
  (tests/test_gpu_grading.py grades the solutions with COURSE_PATHS_OUT set).
"""
from __future__ import annotations

import json
import re
from pathlib import Path

ENV = "COURSE_PATHS_OUT"  # a file, "{exercise}" in it replaced by the exercise's folder name

# course::took("name") or course::took<T>(cond ? "a" : "b"), over several lines; every string literal
# in the arguments is a name the call may record
_CALL = re.compile(r"course::took\s*(<[^>]*>)?\s*\((.*?)\)\s*;", re.S)
_NAME = re.compile(r'"([^"\\]+)"')
# lib.took("name") or lib.took("a" if c else "b", x.dtype) in an exercise's Python (grader.toolchain.build.Library.took)
_PY_CALL = re.compile(r"\blib\.took\((.*)\)\s*(?:#.*)?$", re.M)
SOURCES = (".cu", ".cpp", ".cuh", ".h")


def _code_of(line: str) -> str:
    """A C++ line without its `//` comment (one outside a string literal)."""
    at = line.find("//")
    while at >= 0 and line[:at].count('"') % 2:
        at = line.find("//", at + 2)
    return line if at < 0 else line[:at]


def markers(folder: Path) -> dict[str, bool]:
    """Each path name marked in the folder's sources -> whether its marker carries a dtype (took<T>).
    Comments are not read (a `//` line mentioning course::took is no marker)."""
    found: dict[str, bool] = {}
    for path in sorted(Path(folder).iterdir()):
        if path.suffix == ".py":
            for call in _PY_CALL.finditer(path.read_text()):
                args = call.group(1)
                dtype = "," in args.rsplit('"', 1)[-1]  # an argument after the last name: the dtype
                for name in _NAME.findall(args):
                    found[name] = found.get(name, False) or dtype
            continue
        if path.suffix not in SOURCES:
            continue
        text = "\n".join(_code_of(line) for line in path.read_text().splitlines())
        for call in _CALL.finditer(text):
            for name in _NAME.findall(call.group(2)):
                found[name] = found.get(name, False) or bool(call.group(1))
    return found


def expected(spec) -> set[str]:
    """The recorded names a spec's declared paths stand for: "name/dtype" per dtype, or "name"."""
    return {f"{name}/{dtype}" if dtype else name
            for name, dtypes in spec.paths.items() for dtype in (tuple(dtypes) or ("",))}


def taken(library: str | Path) -> set[str]:
    """The paths a loaded library recorded (its `course_paths_taken()`); empty for a library without it
    (a submission whose binding file does not include course/ops.h)."""
    import ctypes

    lib = ctypes.CDLL(str(library))  # the library already loaded: the same handle, not a second copy
    try:
        fn = lib.course_paths_taken
    except AttributeError:
        return set()
    fn.restype = ctypes.c_char_p
    return {line for line in (fn() or b"").decode().splitlines() if line}


def record(exercise_dir: Path, out: str) -> Path | None:
    """Add the paths the exercise folder's library took in this process to `out` ("{exercise}" in it
    replaced), as JSON {"exercise", "library", "taken"}: the processes that share one exercise's checks
    (grader.run.grading.plan_parts) each add theirs. None when the library was never loaded."""
    from grader.toolchain import build

    library = build._loaded.get(str(Path(exercise_dir).resolve()))
    if library is None or not library.path:
        return None
    path = Path(out.replace("{exercise}", Path(exercise_dir).resolve().name))
    with build.FolderLock(path.parent, path.name + ".lock"):
        found = set(taken(library.path))
        try:
            found |= set(json.loads(path.read_text())["taken"])
        except (OSError, ValueError, KeyError):
            pass
        path.write_text(json.dumps({"exercise": Path(exercise_dir).resolve().name, "library": library.path,
                                    "taken": sorted(found)}, indent=1))
    return path


def unreached(spec, taken_names: set[str]) -> list[str]:
    """The declared (path, dtype) pairs of `spec` that no call took, sorted."""
    return sorted(expected(spec) - set(taken_names))
