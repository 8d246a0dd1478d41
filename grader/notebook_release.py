"""Check and release the nbgrader course's notebooks (`make notebooks`).

    python -m grader.notebook_release release [UNIT ...] [--root DIR]   nbgrader generate_assignment into
                                                                        notebooks/release
    python -m grader.notebook_release check [UNIT ...]                  notebooks valid, in sync with
                                                                        solutions/ and their generators
    python -m grader.notebook_release generate [UNIT ...]               rewrite notebooks/source/<unit>/<unit>.ipynb
                                                                        from notebooks/generators/<unit>.py

`check` (and tests/test_notebooks.py) require every `%%solution` cell to hold exactly its region's TODO
and code lines, and every region of an exercise a notebook builds to have its cell. `release` refuses
to run while `check` fails, and fails when a released notebook still holds solution code or hidden tests.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

from grader.env import REPO
from grader.notebook_authoring import NOTEBOOKS, SCHEMA_VERSION, SOURCE, dumps, generate, generated, generator_of
from grader.notebooks import (EXERCISES, MAGIC, NB_BEGIN, NB_END, NB_HIDDEN_BEGIN, NB_HIDDEN_END, SOLUTIONS,
                              parse_solution_cell)
from grader.regions import COMMENT, find_region, regions_of

RELEASE = NOTEBOOKS / "release"


def units(root: Path = SOURCE) -> list[str]:
    return sorted(p.name for p in root.iterdir() if p.is_dir() and any(p.glob("*.ipynb"))) if root.exists() else []


def notebooks_of(unit: str, root: Path = SOURCE) -> list[Path]:
    return sorted((root / unit).glob("*.ipynb"))


def check_notebook(path: Path) -> list[str]:
    """Problems with one source notebook: format, nbgrader metadata, regions against solutions/."""
    import nbformat

    problems = []
    rel = path.relative_to(REPO) if path.is_relative_to(REPO) else path
    try:
        nb = nbformat.read(path, as_version=4)
        nbformat.validate(nb)
    except Exception as e:
        return [f"{rel}: not a valid notebook: {e}"]
    grade_ids: dict[str, int] = {}
    for i, cell in enumerate(nb.cells):
        where = f"{rel} cell {i}"
        meta = cell.metadata.get("nbgrader")
        src = cell.source
        if meta:
            if meta.get("schema_version") != SCHEMA_VERSION:
                problems.append(f"{where}: nbgrader schema_version {meta.get('schema_version')}, "
                                f"expected {SCHEMA_VERSION}")
            gid = meta.get("grade_id")
            if not gid:
                problems.append(f"{where}: nbgrader cell without grade_id")
            elif gid in grade_ids:
                problems.append(f"{where}: grade_id {gid!r} also used by cell {grade_ids[gid]}")
            else:
                grade_ids[gid] = i
            if meta.get("grade") and not (isinstance(meta.get("points"), (int, float)) and meta["points"] > 0):
                problems.append(f"{where}: graded cell {gid!r} needs points > 0")
        has_region = any(NB_BEGIN in l for l in src.splitlines())
        if has_region and not (meta and meta.get("solution")):
            problems.append(f"{where}: has a solution region but is not an nbgrader solution cell")
        if NB_HIDDEN_BEGIN in src and not (meta and meta.get("grade")):
            problems.append(f"{where}: hidden tests outside a graded cell")
        if src.count(NB_BEGIN) != src.count(NB_END) or src.count(NB_HIDDEN_BEGIN) != src.count(NB_HIDDEN_END):
            problems.append(f"{where}: unbalanced BEGIN/END markers")
        if cell.cell_type != "code":
            continue
        try:
            sol = parse_solution_cell(src)
        except ValueError as e:
            problems.append(f"{where}: {e}")
            continue
        if sol is None:
            continue
        if not (meta and meta.get("solution")):
            problems.append(f"{where}: a {MAGIC} cell must be an nbgrader solution cell")
        for root in (EXERCISES, SOLUTIONS):
            f = root / sol.exercise / sol.file
            if not f.exists():
                if root == SOLUTIONS:
                    continue  # a student release has no solutions/
                problems.append(f"{where}: {f.relative_to(REPO)} does not exist")
                continue
            try:
                region = find_region(f, sol.name)
            except (KeyError, ValueError) as e:
                problems.append(f"{where}: {e}")
                continue
            if root == SOLUTIONS and region.teaching_lines() != sol.teaching_lines():
                problems.append(f"{where}: {MAGIC} {sol.target} {sol.name} differs from the region in "
                                f"solutions/{sol.target}:\n" + _diff(region.teaching_lines(), sol.teaching_lines()))
    return problems


def _diff(expected: list[str], actual: list[str]) -> str:
    import difflib

    return "\n".join(difflib.unified_diff(expected, actual, "solutions/", "notebook", lineterm="", n=1))


def uncovered_regions(path: Path) -> list[str]:
    """Regions of the exercises a notebook builds that it has no `%%solution` cell for: its build
    would silently keep the student copy's stub there."""
    import nbformat

    cells = [parse_solution_cell(c.source) for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"]
    cells = [c for c in cells if c]
    have = {(c.exercise, c.file, c.name) for c in cells}
    missing = []
    for exercise in sorted({c.exercise for c in cells}):
        folder = SOLUTIONS / exercise if (SOLUTIONS / exercise).is_dir() else EXERCISES / exercise
        for f in sorted(folder.iterdir()):
            if f.suffix in COMMENT and f.suffix != ".py":
                missing += [f"{exercise}/{f.name} {r.name}" for r in regions_of(f)
                            if (exercise, f.name, r.name) not in have]
    return missing


def check(selected: list[str] | None = None) -> list[str]:
    problems = []
    found = units()
    if not found:
        problems.append(f"no notebooks under {SOURCE.relative_to(REPO)}")
    for unit in selected or found:
        for path in notebooks_of(unit):
            problems += check_notebook(path)
            rel = path.relative_to(REPO)
            problems += [f"{rel}: no {MAGIC} cell for the region {m}" for m in uncovered_regions(path)]
        if generator_of(unit):
            expected = dumps(generated(unit))
            path = SOURCE / unit / f"{unit}.ipynb"
            if not path.exists() or path.read_text() != expected:
                problems.append(f"{path.relative_to(REPO)} differs from what notebooks/generators/{unit}.py "
                                f"writes: run `python -m grader.notebook_release generate {unit}`")
    return problems


def release(selected: list[str] | None = None, root: Path = NOTEBOOKS) -> list[Path]:
    """Run nbgrader generate_assignment for each unit; return the released notebooks.

    With another `root`, the units' sources are copied to root/source first (tests use a temporary
    course directory so they never touch notebooks/ or its gradebook).
    """
    root = Path(root).resolve()
    if root != NOTEBOOKS.resolve():
        for unit in selected or units():
            dst = root / "source" / unit
            if dst.exists():
                shutil.rmtree(dst)
            shutil.copytree(SOURCE / unit, dst, ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
    out = []
    for unit in selected or units(root / "source"):
        proc = run_nbgrader(["generate_assignment", unit, "--force"], root)
        released = sorted((root / "release" / unit).glob("*.ipynb"))
        if not released:
            raise RuntimeError(f"nbgrader wrote no notebook for {unit}:\n{proc.stderr}")
        for path in released:
            leaks = release_leaks(path)
            if leaks:
                raise RuntimeError(f"{path}: the release still contains:\n" + "\n".join(leaks))
        out += released
    return out


def run_nbgrader(args: list[str], root: Path = NOTEBOOKS, env: dict[str, str] | None = None):
    """Run the real nbgrader command line with the course's nbgrader_config.py, in course directory
    `root`; raise with nbgrader's log when it fails."""
    cmd = [sys.executable, "-m", "nbgrader", *args, f"--CourseDirectory.root={Path(root).resolve()}"]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, env={**_tool_env(), **(env or {})})
    if proc.returncode != 0:
        raise RuntimeError(f"nbgrader {' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}")
    return proc

def _tool_env() -> dict[str, str]:
    """The environment for nbgrader: its gradebook runs `alembic`, which sits beside this Python
    (the virtual environment's bin/, not necessarily on PATH when the venv is not activated). After
    `pip install --target DIR`, scripts are in DIR/bin and nbconvert's templates in DIR/share/jupyter,
    where neither PATH nor Jupyter looks: add those too."""
    env = dict(os.environ)
    bins = [str(Path(sys.executable).parent)]
    site = _site_of("alembic")
    if site and (site / "bin" / "alembic").is_file():
        bins.append(str(site / "bin"))
    env["PATH"] = os.pathsep.join([*bins, env.get("PATH", "")])
    site = _site_of("nbconvert")
    if site and (site / "share" / "jupyter" / "nbconvert" / "templates").is_dir():
        env["JUPYTER_PATH"] = os.pathsep.join(filter(None, [env.get("JUPYTER_PATH"), str(site / "share" / "jupyter")]))
    return env


def _site_of(package: str) -> Path | None:
    """The folder that holds an installed package (site-packages, or a `pip install --target` folder)."""
    found = importlib.util.find_spec(package)
    return Path(found.origin).parents[1] if found and found.origin else None


def release_leaks(path: Path) -> list[str]:
    """Solution code or hidden tests left in a released notebook."""
    import nbformat

    nb = nbformat.read(path, as_version=4)
    text = "\n".join(c.source for c in nb.cells)
    leaks = [m for m in (NB_BEGIN, NB_END, NB_HIDDEN_BEGIN, NB_HIDDEN_END) if m in text]
    for cell in nb.cells:
        sol = parse_solution_cell(cell.source) if cell.cell_type == "code" else None
        if sol is None:
            continue
        ref = SOLUTIONS / sol.exercise / sol.file
        if not ref.exists():
            continue
        region = find_region(ref, sol.name)
        code = [l.strip() for l in region.lines if l.strip() and not l.strip().startswith(region.prefix)]
        shown = {l.strip() for l in cell.source.splitlines()}
        leaks += [f"{sol.target} {sol.name}: `{l}`" for l in code if l in shown]
    return leaks


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p_release = sub.add_parser("release", help="nbgrader generate_assignment for every unit into notebooks/release")
    p_release.add_argument("units", nargs="*")
    p_release.add_argument("--root", type=Path, default=NOTEBOOKS,
                           help="nbgrader course directory (default notebooks/)")
    p_check = sub.add_parser("check", help="notebooks valid and in sync with solutions/ and their generators")
    p_check.add_argument("units", nargs="*")
    p_gen = sub.add_parser("generate", help="rewrite source notebooks from notebooks/generators/")
    p_gen.add_argument("units", nargs="*")
    args = parser.parse_args(argv)
    if args.command == "check":
        problems = check(args.units)
        for p in problems:
            print(p)
        print("notebooks: ok" if not problems else f"notebooks: {len(problems)} problem(s)")
        return 1 if problems else 0
    if args.command == "generate":
        for path in generate(args.units):
            print(f"wrote {path.relative_to(REPO)}")
        return 0
    problems = check(args.units)
    if problems:
        print("\n".join(problems))
        print("fix these first (python -m grader.notebook_release check)")
        return 1
    for path in release(args.units, args.root):
        print(f"released {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
