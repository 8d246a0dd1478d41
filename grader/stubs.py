"""Generate the student tree exercises/ from solutions/, the single source of truth.

In every source file, each region

    // BEGIN SOLUTION            (or `# BEGIN SOLUTION` in Python)
    // GOAL: what to achieve     comment lines at the top: the goal (HINTS=goal keeps only this)
    // TODO: what to write ...   the steps (HINTS=steps, the default, keeps only these)
    // STUB: code                optional: code the stub gets instead (a host-side loud failure)
    ... reference code ...
    // END SOLUTION

keeps its markers and, by the hint level, its TODO lines (`steps`) or its GOAL lines written as
TODO lines (`goal`), gains a line giving the reference's size, and loses its code. At `goal` the
region also names the README's collapsed hint that holds its TODO lines: the README's Hints section
becomes <details> blocks, its general hints first, then one block per region with its steps.
A Python region with no STUB line gets `raise NotImplementedError(...)`. Nested, unterminated and
stray END markers are errors. Files without regions are copied unchanged. Each file's header line
says the level (`make exercises HINTS=goal`; no HINTS for `steps`), and --check reads it from
there, so a student tree at either level, or with levels mixed by exercise, checks as in sync.

    python -m grader.stubs                  write exercises/, each exercise at the level it has
    python -m grader.stubs --hints goal     write exercises/ at the goal level (--hints steps: back)
    python -m grader.stubs --ex 03 04       rewrite only those exercise folders
    python -m grader.stubs --check          exit 1 if exercises/ differs from what would be written
"""
from __future__ import annotations

import argparse
import filecmp
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from grader import readme_tables, regions
from grader.env import REPO
from grader.regions import COMMENT, RegionError

SOLUTIONS = REPO / "solutions"
EXERCISES = REPO / "exercises"

GENERATED_NOTE = ("GENERATED from solutions/{rel} by `make exercises{hints}`: edit only inside the BEGIN/END "
                  "SOLUTION regions.")
SKIP = {"__pycache__", ".ipynb_checkpoints"}

# How much a region's comment gives away: `steps` (its TODO lines, the default) or `goal` (its GOAL
# lines; the TODO lines go to the README's Hints, collapsed).
LEVELS = ("steps", "goal")
DEFAULT_LEVEL = "steps"
# the order of a README's hint blocks: the kernels' file first, then the binding's, then Python
HINT_FILE_ORDER = {".cu": 0, ".cuh": 0, ".cpp": 1, ".h": 1, ".hpp": 1, ".py": 2}


def stub_text(text: str, suffix: str, where: str, level: str = DEFAULT_LEVEL) -> str:
    """The student version of one source file's text, at hint level `level`."""
    if level not in LEVELS:
        raise ValueError(f"unknown hint level {level!r}: choose one of {', '.join(LEVELS)}")
    prefix = COMMENT[suffix]
    lines = text.splitlines(keepends=True)
    found = regions.spans(lines, prefix, where)
    titles = hint_titles(text, where) if level == "goal" else [None] * len(found)
    # A region's line in the stub's messages is counted without the GOAL lines above it: a goal
    # written into the solution leaves its `steps` stub as it was.
    goal_lines = [l.strip().startswith(f"{prefix} {regions.GOAL}") for l in lines]
    out: list[str] = []
    last = 0
    for (begin, end), title in zip(found, titles):
        out += lines[last : begin + 1]
        out += _stub_region(lines[begin + 1 : end], prefix, regions.indent_of(lines[begin]), where, begin + 1, title,
                            message_line=begin + 1 - sum(goal_lines[:begin]))
        last = end
    out += lines[last:]
    return "".join(out)


def hint_titles(text: str, where: str) -> list[str]:
    """The name of each region's hint in the README, in the file's order: "matmul.cu: matmul_kernel1",
    and "stencil2d.cu: stencil2d_kernel, region 2 of 2" where a function holds several regions."""
    file = Path(where).name
    found = regions.regions_of(Path(where), text)
    bases = [r.name.split("#")[0] for r in found]
    titles = []
    for i, base in enumerate(bases):
        n, k = bases.count(base), bases[: i + 1].count(base)
        titles.append(f"{file}: {base}" + (f", region {k} of {n}" if n > 1 else ""))
    return titles


def _is_code(line: str, prefix: str) -> bool:
    s = line.strip()
    return bool(s) and not s.startswith(prefix)


def _stub_region(lines: list[str], prefix: str, indent: str, where: str, begin_line: int,
                 hint_title: str | None = None, message_line: int | None = None) -> list[str]:
    """The stub of one region: its TODO lines (or, given the title of its README hint, its GOAL
    lines as TODO lines and a pointer to that hint), its size, and its STUB lines."""
    todo, goal, stub = [], [], []
    for line in lines:
        s = line.strip()
        if s.startswith(f"{prefix} TODO"):
            todo.append(line)
        elif s.startswith(f"{prefix} {regions.GOAL}"):
            goal.append(f"{indent}{prefix} TODO:{s[len(prefix) + 1 + len(regions.GOAL):].rstrip()}\n")
        elif s.startswith(f"{prefix} STUB:"):
            stub.append(indent + s[len(prefix) + len(" STUB:") :].strip() + "\n")
    if not todo:
        raise RegionError(f"{where}:{begin_line}: a solution region needs a `{prefix} TODO: ...` line saying what to write")
    size = sum(_is_code(l, prefix) for l in lines)
    if hint_title is not None:
        if not goal:
            raise RegionError(f"{where}:{begin_line}: HINTS=goal needs a `{prefix} GOAL: ...` line in every region, "
                              f"saying what the region must achieve (its TODO lines are the steps)")
        todo = goal
    todo.append(f"{indent}{prefix} TODO: (the reference solution takes about {size} line{'s' if size != 1 else ''})\n")
    if hint_title is not None:
        todo.append(f'{indent}{prefix} TODO: (the steps, when you want them: README.md, Hints, "{hint_title}")\n')
    if not stub and prefix == "#":
        line = begin_line if message_line is None else message_line
        stub = [f'{indent}raise NotImplementedError("{where}: line {line} is not implemented yet")\n']
    return todo + stub


def steps_of(lines: list[str], prefix: str) -> list[str]:
    """A region's TODO lines as text: without the comment prefix and "TODO:" (a continuation's own
    indentation kept)."""
    out = []
    for line in lines:
        s = line.strip()
        if s.startswith(f"{prefix} TODO"):
            rest = s[len(prefix) + len(" TODO") :]
            rest = rest[1:] if rest.startswith(":") else rest
            out.append(rest[1:] if rest.startswith(" ") else rest)
    return out


HINTS_INTRO = """\
Open these one at a time, the general hints first. Each region of your files states its goal and the
size of the reference's answer; the block named after a region (as its last TODO line names it) gives
its steps."""


def readme_with_hints(readme: str, folder: Path, where: str) -> str:
    """The README of a goal-level exercise: its Hints section collapsed into <details> blocks, from
    gentle to explicit: the README's own hints, then one block per region of the folder's sources
    (kernels' file first) with the region's TODO lines, the steps its goal-level stub leaves out."""
    lines = readme.splitlines()
    try:
        start = next(i for i, l in enumerate(lines) if l.strip() == "## Hints")
    except StopIteration:
        raise RegionError(f"{where}: HINTS=goal needs a `## Hints` section to put the regions' steps in") from None
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    general = "\n".join(lines[start + 1 : end]).strip("\n")
    blocks = [f"<details>\n<summary>General hints</summary>\n\n{general}\n\n</details>"] if general.strip() else []
    sources = sorted((p for p in folder.iterdir() if p.suffix in COMMENT),
                     key=lambda p: (HINT_FILE_ORDER.get(p.suffix, 9), p.name))
    for src in sources:
        text = src.read_text()
        rel = f"{Path(where).parent}/{src.name}"
        found = regions.regions_of(src, text)
        if not found:
            continue
        stub_lines = stub_text(text, src.suffix, rel, "goal").splitlines()
        begins = [b for b, _ in regions.spans(stub_lines, COMMENT[src.suffix], rel)]
        for region, title, begin in zip(found, hint_titles(text, rel), begins):
            steps = "\n".join(steps_of(region.lines, region.prefix))
            # the line of the region's BEGIN marker in the student's file, under its header line
            blocks.append(f"<details>\n<summary>{title} (line {begin + 2}), step by step</summary>\n\n"
                          f"```text\n{steps}\n```\n\n</details>")
    body = ["", HINTS_INTRO, ""] + "\n\n".join(blocks).splitlines() + [""]
    out = lines[: start + 1] + body + lines[end:]
    return "\n".join(out) + ("\n" if readme.endswith("\n") else "")


def _header(suffix: str, rel: str, level: str = DEFAULT_LEVEL) -> str:
    note = GENERATED_NOTE.format(rel=rel, hints="" if level == DEFAULT_LEVEL else f" HINTS={level}")
    if suffix == ".md":
        return f"<!-- {note} -->\n"
    return f"{COMMENT[suffix]} {note}\n"


def level_of(folder: Path) -> str:
    """The hint level a generated exercise folder has: its README's header line says it."""
    readme = folder / "README.md"
    first = readme.read_text().split("\n", 1)[0] if readme.is_file() else ""
    m = re.search(r"`make exercises HINTS=(\w+)`", first)
    return m.group(1) if m and m.group(1) in LEVELS else DEFAULT_LEVEL


def levels_of(root: Path = EXERCISES) -> dict[str, str]:
    """Each exercise folder of a generated tree and its hint level."""
    return {d.name: level_of(d) for d in sorted(root.iterdir()) if d.is_dir()} if root.is_dir() else {}


def generate(solutions: Path = SOLUTIONS, out: Path = EXERCISES, hints: str | dict[str, str] = DEFAULT_LEVEL) -> list[Path]:
    """Write the student tree for every solutions/NN_* folder into `out`; return the files written.
    `hints`: the level of every exercise, or a level per exercise folder (others: `steps`)."""
    for level in [hints] if isinstance(hints, str) else hints.values():
        if level not in LEVELS:
            raise ValueError(f"unknown hint level {level!r}: choose one of {', '.join(LEVELS)}")
    written = []
    for src in sorted(solutions.rglob("*")):
        rel = src.relative_to(solutions)
        if src.is_dir() or SKIP.intersection(rel.parts) or src.suffix == ".pyc":
            continue
        dst = out / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        level = hints if isinstance(hints, str) else hints.get(rel.parts[0], DEFAULT_LEVEL)
        if src.suffix in COMMENT or src.suffix == ".md":
            text = src.read_text()
            if src.suffix in COMMENT:
                text = stub_text(text, src.suffix, f"{out.name}/{rel}", level)
            elif level == "goal" and src.name == "README.md" and len(rel.parts) == 2:
                text = readme_with_hints(text, src.parent, f"{out.name}/{rel}")
            header = _header(src.suffix, rel.as_posix(), level)
            dst.write_text(header + text)
        else:
            shutil.copy2(src, dst)
        written.append(dst)
    return written


def differences(expected_root: Path, actual_root: Path) -> list[str]:
    """Files that are missing, extra or different between two trees."""
    problems = []
    expected = {p.relative_to(expected_root) for p in expected_root.rglob("*") if p.is_file()}
    actual = {
        p.relative_to(actual_root)
        for p in actual_root.rglob("*")
        if p.is_file() and not SKIP.intersection(p.relative_to(actual_root).parts) and p.suffix != ".pyc"
    }
    problems += [f"missing: exercises/{p}" for p in sorted(expected - actual)]
    problems += [f"not generated from solutions/: exercises/{p}" for p in sorted(actual - expected)]
    problems += [
        f"differs from its generated version: exercises/{p}"
        for p in sorted(expected & actual)
        if not filecmp.cmp(expected_root / p, actual_root / p, shallow=False)
    ]
    return problems


def check() -> list[str]:
    """How exercises/ differs from what its generation writes, each exercise at the level its
    header says."""
    with tempfile.TemporaryDirectory() as tmp:
        generated = Path(tmp) / "exercises"
        generate(SOLUTIONS, generated, levels_of(EXERCISES))
        return differences(generated, EXERCISES)


def _student_edits(paths: list[str] | None = None) -> list[str]:
    """Uncommitted changes under exercises/ (a student's work), which regeneration would destroy."""
    try:
        out = subprocess.run(["git", "status", "--porcelain", "--", *(paths or ["exercises"])], cwd=REPO,
                             capture_output=True, text=True)
    except OSError:
        return []
    return [l for l in out.stdout.splitlines() if l.strip()] if out.returncode == 0 else []


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="only report differences")
    parser.add_argument("--force", action="store_true", help="overwrite uncommitted changes in exercises/")
    parser.add_argument("--ex", nargs="*", default=[], help="only these exercise folders (numbers or names)")
    parser.add_argument("--hints", choices=LEVELS, default=None,
                        help="how much each region's comment gives away: steps (its TODO lines) or goal (its goal "
                             "and size; the steps go to the README's Hints); default: the level each exercise has "
                             "now (steps for a new one)")
    args = parser.parse_args(argv)
    if args.check:
        problems = check()
        for p in problems:
            print(p)
        print("exercises/ is in sync with solutions/" if not problems else "run `make exercises` to regenerate")
        return 1 if problems else 0
    readme_tables.write()  # each solutions/ README's points table from its spec, before exercises/ copies it
    if args.ex:
        return _regenerate_some(args.ex, args.hints, args.force)
    edits = _student_edits()
    if edits and not args.force:
        print("exercises/ has uncommitted changes; regenerating would overwrite them:", *edits, sep="\n  ")
        print("commit or stash them, or run `make exercises FORCE=1`")
        return 1
    hints = args.hints or levels_of(EXERCISES)
    with tempfile.TemporaryDirectory() as tmp:
        generated = Path(tmp) / "exercises"
        generate(SOLUTIONS, generated, hints)  # fails on a bad region before anything is touched
        if EXERCISES.exists():
            shutil.rmtree(EXERCISES)
        shutil.copytree(generated, EXERCISES)
    print(f"wrote {sum(1 for p in EXERCISES.rglob('*') if p.is_file())} files under exercises/")
    _print_levels()
    return 0


def _print_levels() -> None:
    goal = [name for name, level in levels_of(EXERCISES).items() if level == "goal"]
    if goal:
        print(f"hints at the goal level (steps in each README's Hints): {', '.join(goal)}")


def _regenerate_some(names: list[str], hints: str | None = None, force: bool = False) -> int:
    folders = [d for d in sorted(SOLUTIONS.iterdir()) if d.is_dir()
               and any(d.name == n or d.name.split("_", 1)[0] == n.zfill(2) for n in names)]
    if not folders:
        print(f"no solutions/ folder matches {names}")
        return 1
    edits = _student_edits([f"exercises/{d.name}" for d in folders])
    if edits and not force:
        print("these exercises have uncommitted changes; regenerating would overwrite them:", *edits, sep="\n  ")
        print("commit or stash them, or add FORCE=1")
        return 1
    for folder in folders:
        target = EXERCISES / folder.name
        level = hints or (level_of(target) if target.is_dir() else DEFAULT_LEVEL)
        with tempfile.TemporaryDirectory() as tmp:
            staging = Path(tmp) / "solutions" / folder.name
            shutil.copytree(folder, staging)
            generated = Path(tmp) / "exercises"
            generate(staging.parent, generated, level)
            if target.exists():
                shutil.rmtree(target)
            shutil.copytree(generated / folder.name, target)
        print(f"wrote exercises/{folder.name}" + (f" (HINTS={level})" if level != DEFAULT_LEVEL else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
