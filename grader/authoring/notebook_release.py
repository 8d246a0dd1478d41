"""Check and release the nbgrader course's notebooks (`make notebooks`).

    python -m grader.authoring.notebook_release release [UNIT ...] [--root DIR] [--repo URL]
                                                                        the instructor's notebooks from
        notebooks/source/<unit>.py into notebooks/source/<unit>/, then nbgrader generate_assignment into
        notebooks/release/<unit>/ (committed: the student notebooks, which open in Colab from GitHub);
        with every unit, also README.md's table of Colab badges
    python -m grader.authoring.notebook_release release --check                   exit 1 when notebooks/release/
        or README.md's Colab badges differ from what `release` writes
    python -m grader.authoring.notebook_release check [UNIT ...]                  the instructor's notebooks valid and
        in sync with solutions/
    python -m grader.authoring.notebook_release generate [UNIT ...]               only write the instructor's notebooks,
        notebooks/source/<unit>/<unit>.ipynb (not tracked), e.g. to run them in Jupyter

The GitHub repository every Colab badge and the setup cell's clone point at is pyproject.toml's
`[tool.course] repo`; `--repo URL` (`make notebooks COURSE_REPO=URL`) releases with another and records
it there. `release` refuses the placeholder OWNER/cuda-course, in one line naming the setting, unless
`[tool.course] template = true` says this repository is the template courses are made from.

`check` (and tests/test_notebooks.py) require sane nbgrader metadata, every `%%solution` cell to hold
exactly its region's TODO and code lines, and every region of an exercise a notebook builds to have its
cell. `release` refuses to run while `check` fails, and fails when a released notebook still holds
solution code or hidden tests.
"""
from __future__ import annotations

import argparse
import filecmp
import importlib.util
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from grader.authoring import notebook_authoring as authoring
from grader.env import REPO
from grader.authoring.notebooks import (EXERCISES, MAGIC, NB_BEGIN, NB_END, NB_HIDDEN_BEGIN, NB_HIDDEN_END, SOLUTIONS,
                                        parse_solution_cell)
from grader.authoring.regions import COMMENT, find_region, regions_of

NOTEBOOKS = authoring.NOTEBOOKS
SOURCE = authoring.SOURCE
RELEASE = NOTEBOOKS / "release"
SCHEMA_VERSION = 3


def units() -> list[str]:
    return authoring.units()


def _read(notebook):
    """A notebook from a path, or the notebook itself."""
    import nbformat

    return nbformat.read(notebook, as_version=4) if isinstance(notebook, (str, Path)) else notebook


def check_notebook(notebook, name: str | None = None) -> list[str]:
    """Problems with one notebook (a path, or a notebook named `name`): format, nbgrader metadata,
    regions against solutions/."""
    import nbformat

    problems = []
    if isinstance(notebook, (str, Path)):
        path = Path(notebook)
        name = name or str(path.relative_to(REPO) if path.is_relative_to(REPO) else path)
    rel = name or "notebook"
    try:
        nb = _read(notebook)
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


def uncovered_regions(notebook) -> list[str]:
    """Regions of the exercises a notebook (or its path) builds that it has no `%%solution` cell for:
    its build would silently keep the student copy's stub there."""
    cells = [parse_solution_cell(c.source) for c in _read(notebook).cells if c.cell_type == "code"]
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


def check(selected: list[str] | None = None, notebooks: dict | None = None) -> list[str]:
    """Problems with the instructor's notebooks of these units (default all), generated here unless given."""
    if not units():
        return [f"no notebook sources notebooks/source/<unit>.py under {SOURCE.relative_to(REPO)}"]
    problems = []
    for unit, nb in (notebooks or authoring.notebooks(selected)).items():
        name = f"notebooks/source/{unit}.py"
        problems += check_notebook(nb, name)
        problems += [f"{name}: no {MAGIC} cell for the region {m}" for m in uncovered_regions(nb)]
    return problems


def release(selected: list[str] | None = None, root: Path = NOTEBOOKS) -> list[Path]:
    """Write the instructor's notebooks into root/source/<unit>/ and run nbgrader generate_assignment
    for each unit into root/release/<unit>/; return the released notebooks. Raises, before nbgrader
    runs, when `check` finds problems.

    With another `root` (tests use a temporary course directory), notebooks/ and its gradebook are
    not touched.
    """
    root = Path(root).resolve()
    notebooks = authoring.notebooks(selected)
    problems = check(notebooks=notebooks)
    if problems:
        raise ReleaseError("\n".join(problems))
    out = []
    for unit, nb in notebooks.items():
        source = root / "source" / unit / f"{unit}.ipynb"
        source.parent.mkdir(parents=True, exist_ok=True)
        source.write_text(authoring.dumps(nb))
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


class ReleaseError(RuntimeError):
    """`check` found problems: nothing was released."""


class RepositoryNotSet(ValueError):
    """The release would point Colab at the placeholder repository, or COURSE_REPO is not GitHub's."""


def release_repository(given: str | None = None, pyproject: Path | None = None) -> str:
    """The owner/name a release points its Colab badges and setup cell at: `given` (COURSE_REPO, a
    GitHub URL or owner/name), else `[tool.course] repo`. The placeholder is refused unless
    `[tool.course] template = true` (this repository: a template, whose forks set their own)."""
    if given:
        try:
            return authoring.github_repo(given)
        except ValueError as e:
            raise RepositoryNotSet(str(e)) from None
    config = authoring.course_config(pyproject)
    repo = config.get("repo") or authoring.PLACEHOLDER_REPO
    if repo == authoring.PLACEHOLDER_REPO and not config.get("template"):
        raise RepositoryNotSet(
            f"notebooks: the Colab badges would open the placeholder {authoring.PLACEHOLDER_REPO}: run "
            "`make notebooks COURSE_REPO=https://github.com/<owner>/<name>` (or set [tool.course] repo "
            "in pyproject.toml)")
    return repo


def record_repository(repo: str, pyproject: Path | None = None) -> bool:
    """Write `repo = "owner/name"` into pyproject.toml's `[tool.course]` table (made if missing), so
    that later releases and `release --check` use it; True when the file changed."""
    path = pyproject or authoring.PYPROJECT
    text = path.read_text()
    line = f'repo = "{repo}"'
    table = re.search(r"^\[tool\.course\][ \t]*\n(.*?)(?=^\[|\Z)", text, re.M | re.S)
    if table is None:
        new = text.rstrip("\n") + f"\n\n[tool.course]\n{line}\n"
    elif re.search(r"^repo[ \t]*=.*$", table.group(1), re.M):
        body = re.sub(r"^repo[ \t]*=.*$", line, table.group(1), count=1, flags=re.M)
        new = text[:table.start(1)] + body + text[table.end(1):]
    else:
        new = text[:table.start(1)] + line + "\n" + text[table.start(1):]
    if new != text:
        path.write_text(new)
    return new != text


def release_differences(released: Path) -> list[str]:
    """How notebooks/release/ differs from a release made in course directory `released`'s parent
    (its release/ folder): missing, extra or different files."""
    problems = []
    expected = {p.relative_to(released) for p in released.rglob("*") if p.is_file()}
    actual = {p.relative_to(RELEASE) for p in RELEASE.rglob("*")
              if p.is_file() and ".ipynb_checkpoints" not in p.parts} if RELEASE.exists() else set()
    problems += [f"missing: notebooks/release/{p}" for p in sorted(expected - actual)]
    problems += [f"not made by the release: notebooks/release/{p}" for p in sorted(actual - expected)]
    problems += [f"differs from what nbgrader releases: notebooks/release/{p}" for p in sorted(expected & actual)
                 if not filecmp.cmp(released / p, RELEASE / p, shallow=False)]
    return problems


def check_release() -> list[str]:
    """Release every unit into a temporary course directory and compare with notebooks/release/;
    and the README's Colab badges with the repository ([tool.course] repo) and the units."""
    with tempfile.TemporaryDirectory() as tmp:
        release(root=Path(tmp))
        return release_differences(Path(tmp) / "release") + readme_differences()


README = REPO / "README.md"


def readme_differences() -> list[str]:
    """How README.md's Colab badges differ from what `make notebooks` writes there."""
    text = README.read_text()
    try:
        return [] if authoring.with_readme_block(text) == text else \
            ["README.md: the Colab badges differ from the units and the repository ([tool.course] repo in pyproject.toml)"]
    except authoring.AuthoringError as e:
        return [str(e)]


def write_readme() -> bool:
    """Put the units' Colab badges into README.md; True when it changed."""
    text = README.read_text()
    new = authoring.with_readme_block(text)
    if new != text:
        README.write_text(new)
    return new != text


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
    from grader.run.cli import UsageParser  # as `python -m grader`: a wrong usage in one line

    parser = UsageParser(prog="python -m grader.authoring.notebook_release", description=__doc__,
                         formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p_release = sub.add_parser("release", help="nbgrader generate_assignment for every unit into notebooks/release")
    p_release.add_argument("units", nargs="*")
    p_release.add_argument("--root", type=Path, default=NOTEBOOKS,
                           help="nbgrader course directory (default notebooks/)")
    p_release.add_argument("--check", action="store_true",
                           help="only report how notebooks/release/ differs from a fresh release")
    p_release.add_argument("--repo", metavar="URL",
                           help="the course's GitHub repository (https://github.com/OWNER/NAME or OWNER/NAME) for "
                                "the Colab badges and the setup cell's clone; recorded in pyproject.toml's "
                                "[tool.course] repo (default: that value)")
    p_check = sub.add_parser("check", help="the instructor's notebooks valid and in sync with solutions/")
    p_check.add_argument("units", nargs="*")
    p_gen = sub.add_parser("generate", help="write the instructor's notebooks into notebooks/source/<unit>/")
    p_gen.add_argument("units", nargs="*")
    args = parser.parse_args(argv)
    if args.command == "check":
        problems = check(args.units)
        for p in problems:
            print(p)
        print("notebooks: ok" if not problems else f"notebooks: {len(problems)} problem(s)")
        return 1 if problems else 0
    if args.command == "generate":
        for path in authoring.write(args.units):
            print(f"wrote {path.relative_to(REPO)}")
        return 0
    if args.check:
        problems = check_release()
        print("\n".join(problems) if problems else "notebooks/release/ is what nbgrader releases")
        if problems:
            print("run `make notebooks` to release again")
        return 1 if problems else 0
    try:
        repo = release_repository(args.repo)
    except RepositoryNotSet as e:
        print(e)
        return 1
    authoring.GITHUB_REPO = repo
    try:
        released = release(args.units, args.root)
    except ReleaseError as e:
        print(e)
        print("fix these first (python -m grader.authoring.notebook_release check)")
        return 1
    for path in released:
        print(f"released {path.relative_to(REPO) if path.is_relative_to(REPO) else path}")
    if args.repo and record_repository(repo):
        print(f"recorded repo = \"{repo}\" in pyproject.toml's [tool.course]")
    if args.root.resolve() == NOTEBOOKS.resolve() and not args.units and write_readme():
        print("wrote README.md's Colab badges")
    return 0


if __name__ == "__main__":
    sys.exit(main())
